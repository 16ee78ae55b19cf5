# Functional tests of --blocking (run by run.py): the target held still by ptrace while
# each sample is read.
#
#   record/blocking/INTERP   chaos_recurse.py (two threads raising through 500-deep
#       recursion: without --blocking about half their samples are torn, counted as errors)
#       recorded with --blocking at 2 kHz: at most BLOCKING_ERRORS of the thread samples
#       are errors, every stack is one the target's source allows, deep and shallow ones
#       are seen; afterwards the target runs on, traced by no one.
#   record/blocking-signals  signals.py counts the queued real-time signals it receives:
#       SIGNALS of them sent while remora holds it, every one must arrive (remora passes
#       on each signal that stops a thread it traces).
#   record/blocking-traced   a target strace already traces is refused: exit 3, one line
#       naming the tracer (skipped without strace).
#   record/blocking-launch   `record --blocking -- python -c ...` exits with the command's
#       code (remora traces its own child: the child's end comes through ptrace).

import json
import os
import shutil
import signal
import subprocess
import time

from harness import (INTERPRETERS, READY_TIMEOUT, TARGETS, Fail, Recording, Skip, Source, Target,
                     depth_note, expect_failure, interp_command, interp_missing, interpreter,
                     judge_profile, proc_state, record, recurse_roles, script, summary, tail,
                     tracer_of, workdir)
from formats import parse_collapsed

ORDER = 130           # where run.py runs these tests among the modules' (ascending)

BLOCKING_INTERPRETERS = ("pyenv-3.9.18", "pyenv-3.12.1", "pyenv-3.13.0", "sid-3.15")
BLOCKING_ERRORS = 0.02
SIGNALS = 200


def test_blocking(remora, interp):
    src = Source(script("chaos_recurse.py"))
    d = workdir()
    try:
        with Target(interp, script("chaos_recurse.py"), "ready.json") as t:
            ready = t.wait_ready()
            path = os.path.join(d, "b.collapsed")
            # both threads, the one waiting for the GIL too (--idle), each read held still
            _, err = record(remora, ["-p", t.pid, "--blocking", "--idle", "-r", 2000, "-d", 1,
                                     "-o", path])
            summ = summary(err)
            stacks = parse_collapsed(path)
            by_role = judge_profile(stacks, recurse_roles(ready), src)
            deep, shallow = depth_note(stacks)
            tried = summ.errors + sum(s.count for s in stacks)
            if tried == 0 or summ.errors > BLOCKING_ERRORS * tried:
                raise Fail("%d of %d thread samples are errors with --blocking [%s]" % (summ.errors, tried, summ))
            if not deep or not shallow:
                raise Fail("%d samples at depth >= 400, %d below 100: the recursion was not seen [%s]"
                           % (deep, shallow, summ))
            if tracer_of(t.pid) != 0:
                raise Fail("the target is still traced by pid %s after remora exited" % tracer_of(t.pid))
            if proc_state(t.pid) in ("T", "t"):
                raise Fail("the target was left stopped")
            rc = t.finish()
            if rc != 0:
                raise Fail("the target exited %d: %s" % (rc, t.log_tail()))
        return "%s; main %d, diver %d; %d at depth >= 400, %d below 100" % (
            summ, by_role["main"], by_role["diver"], deep, shallow)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def count_signals(t, seq):
    t.proc.stdin.write(b"count %d\n" % seq)
    t.proc.stdin.flush()
    path = t.host_path(t.out) + ".count"
    deadline = time.monotonic() + READY_TIMEOUT
    while True:
        try:
            with open(path) as f:
                doc = json.load(f)
            if doc["seq"] == seq:
                return doc["signals"]
        except (OSError, ValueError):
            pass
        if time.monotonic() > deadline:
            raise Fail("the target did not answer `count %d`: %s" % (seq, t.log_tail()))
        time.sleep(0.005)


def test_signals(remora, interp):
    d = workdir()
    try:
        with Target(interp, os.path.join(TARGETS, "signals.py"), "ready.json") as t:
            t.wait_ready()
            rec = Recording(remora, ["-p", t.pid, "--blocking", "-d", 2, "-o", os.path.join(d, "s.collapsed")])
            try:
                rec.wait_sampled(1)
                for _ in range(SIGNALS):
                    os.kill(t.pid, signal.SIGRTMIN)
                seq, got = 0, 0
                deadline = time.monotonic() + 10
                while got < SIGNALS and time.monotonic() < deadline:
                    seq += 1
                    got = count_signals(t, seq)
                rc, _, err = rec.finish()
            finally:
                rec.close()
            if rc != 0:
                raise Fail("`remora record --blocking` exited %d: %s" % (rc, tail(err)))
            if got != SIGNALS:
                raise Fail("the target received %d of the %d signals sent while remora held it" % (got, SIGNALS))
        return "%d of %d signals delivered" % (got, SIGNALS)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_traced(remora, interp):
    strace = shutil.which("strace")
    if strace is None:
        raise Skip("strace not installed (apt-get install strace)")
    with Target(interp, os.path.join(TARGETS, "signals.py"), "ready.json") as t:
        t.wait_ready()
        tr = subprocess.Popen([strace, "-qq", "-o", "/dev/null", "-p", str(t.pid)],
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + READY_TIMEOUT
            while tracer_of(t.pid) != tr.pid:
                if time.monotonic() > deadline or tr.poll() is not None:
                    raise Fail("strace never traced the target")
                time.sleep(0.01)
            err = expect_failure(remora, ["record", "-p", t.pid, "--blocking", "-d", 0.2], 3,
                                 "--blocking on a target strace traces")
            if str(tr.pid) not in err:
                raise Fail("the message does not name the tracer %d: %s" % (tr.pid, err.strip()))
        finally:
            tr.send_signal(signal.SIGINT)
            tr.wait()
    return "refused: " + err.strip()[:120]


EXIT3 = "import sys\nx = 0\nfor i in range(3000000):\n    x += i\nsys.exit(3)\n"


def test_launch(remora, interp):
    cmd = interp_command(interp, ["-I", "-c", EXIT3])
    d = workdir()
    try:
        path = os.path.join(d, "l.collapsed")
        rc, _, err = remora.run(["record", "--blocking", "-o", path, "--"] + cmd)
        if rc != 3:
            raise Fail("exit %d, want the command's 3: %s" % (rc, tail(err)))
        n = sum(s.count for s in parse_collapsed(path))
        if n == 0:
            raise Fail("no samples of the command: %s" % tail(err))
        return "exit 3, %d samples" % n
    finally:
        shutil.rmtree(d, ignore_errors=True)


def tests(remora):
    """[(name, function, skip reason or None)] for run.py."""
    one = interpreter("pyenv-3.12.1")
    return [("record/blocking/%s" % i[0], lambda i=i: test_blocking(remora, i), interp_missing(i))
            for i in INTERPRETERS if i[0] in BLOCKING_INTERPRETERS] + [
        ("record/blocking-signals", lambda: test_signals(remora, one), interp_missing(one)),
        ("record/blocking-traced", lambda: test_traced(remora, one), interp_missing(one)),
        ("record/blocking-launch", lambda: test_launch(remora, one), interp_missing(one)),
    ]
