# Functional tests of launch mode (`record -- CMD`, `top -- CMD`) with commands that are
# not Python themselves (run by run.py; issue 16, "never hang"). The ground truth is the
# commands' own: their exit codes, and tests/targets/grandchild.py, which reports its own
# pid, thread id and the function it spins in.
#
#   record/launch-not-python  `record -o F -- CMD` for /bin/true, /bin/sleep 1, sh -c
#       "exit 3" and a shell that SIGKILLs itself (also with --subprocesses): remora exits
#       with the command's code (0, 0, 3, 137) within NO_PYTHON_LATE s of the command's
#       end (/bin/sleep 1: of its second), one line on stderr saying no Python was found,
#       no summary claiming samples, no output file. Stopped (SIGTERM) while it waits for
#       a shell blocked on a FIFO: one line, then the shell's own code once it exits.
#   top/launch-not-python  the same for `top -- CMD` (stdout a pipe): exit codes 0 and 3,
#       one line, nothing on stdout (no table of samples never taken).
#   record/launch-wait-cpu/INTERP  `record -- sh -c "read < FIFO; sleep 1; exec python
#       grandchild.py"`: from the moment the shell has the FIFO open (the test's open for
#       writing returns then) to the moment grandchild.py writes its ready file, remora's
#       own CPU time (/proc/PID/schedstat) is under WAIT_CPU_SHARE of the wall time; then
#       exit 0 and grandchild_spin in the profile. `.../subprocesses`: the same with
#       `--subprocesses` and python run as the shell's child, `; exit 5` after it.
#   record/launch-shell-subprocesses/INTERP  `record --subprocesses -- sh -c "sleep 0.3;
#       python grandchild.py OUT 0.4; exit 5"`: exit 5, the grandchild's thread (its own
#       pid and tid) named "... [pid P]" with at least SHELL_MIN samples, at least
#       SHELL_SHARE of them inside grandchild_spin called from grandchild_main; without
#       --subprocesses: exit 5, the no-Python line, no summary.

import errno
import json
import os
import select
import shlex
import shutil
import signal
import subprocess
import time

from harness import (INTERPRETERS, TARGETS, Fail, SUMMARY, Target, interp_missing, one_line,
                     tail, workdir)
from formats import parse_collapsed

ORDER = 230           # where run.py runs these tests among the modules' (ascending)

NO_PYTHON_LATE = 1.0       # s remora may take past the command's end (issue 16: "within a second")
WAIT_CPU_SHARE = 0.05      # remora's CPU while it waits, of the wall time (measured ~1%)
SHELL_MIN = 50             # samples of the grandchild's thread (0.4 s of CPU at 1 kHz: ~400)
SHELL_SHARE = 0.8          # ... inside grandchild_spin (the rest: its start, imports)
WAIT_INTERPRETERS = ("pyenv-3.12.1", "sid-3.15")
SHELL_INTERPRETERS = ("pyenv-3.9.18", "pyenv-3.12.1", "pyenv-3.13.0", "sid-3.15")


FIFO_TIMEOUT = 30.0        # s for the command to open its FIFO


def open_writer(fifo, proc):
    """Opens fifo for writing once the command has it open for reading (that is how a test
    knows remora is waiting for it); Fail if remora exits or FIFO_TIMEOUT passes first."""
    deadline = time.monotonic() + FIFO_TIMEOUT
    while True:
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as e:
            if e.errno != errno.ENXIO:          # ENXIO: no reader yet
                raise
        else:
            os.set_blocking(fd, True)
            return os.fdopen(fd, "w")
        if proc.poll() is not None:
            raise Fail("remora exited %d before the command opened its FIFO" % proc.returncode)
        if time.monotonic() > deadline:
            raise Fail("the command did not open its FIFO in %.0fs" % FIFO_TIMEOUT)
        time.sleep(0.005)


def read_line(f, timeout):
    """One line from a pipe, '' if none came within timeout seconds."""
    line, deadline = b"", time.monotonic() + timeout
    while not line.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([f], [], [], left)[0]:
            break
        c = os.read(f.fileno(), 1)
        if not c:
            break
        line += c
    return line.decode("utf-8", "replace")


def run_timed(remora, args):
    """Runs remora; returns (rc, stdout, stderr, wall seconds)."""
    t0 = time.monotonic()
    rc, out, err = remora.run(args)
    return rc, out, err, time.monotonic() - t0


def no_python_problems(what, rc, want_rc, err, wall, most):
    """What is wrong with a run whose command never ran Python."""
    problems = []
    if rc != want_rc:
        problems.append("%s: exit %d, want the command's %d" % (what, rc, want_rc))
    bad = one_line(err)
    if bad:
        problems.append("%s: want one line on stderr: %s" % (what, bad))
    elif "no Python" not in err:
        problems.append("%s: stderr does not say no Python was found: %s" % (what, err.strip()))
    if SUMMARY.search(err):
        problems.append("%s: a summary claims samples: %s" % (what, tail(err)))
    if wall > most:
        problems.append("%s: took %.2f s, want under %.2f s (the command's end + %.1f s)"
                        % (what, wall, most, NO_PYTHON_LATE))
    return problems


NOT_PYTHON = (
    # (command, its exit code, seconds it runs)
    (["/bin/true"], 0, 0.0),
    (["/bin/sleep", "1"], 0, 1.0),
    (["sh", "-c", "exit 3"], 3, 0.0),
    (["sh", "-c", "kill -9 $$"], 128 + signal.SIGKILL, 0.0),
)


def test_record_not_python(remora):
    d = workdir()
    try:
        notes, problems = [], []
        for extra in ([], ["--subprocesses"]):
            for cmd, want_rc, runs in NOT_PYTHON:
                path = os.path.join(d, "np.collapsed")
                what = "`record %s-- %s`" % ("".join(e + " " for e in extra), " ".join(cmd))
                rc, _, err, wall = run_timed(remora, ["record", "-o", path] + extra + ["--"] + cmd)
                problems += no_python_problems(what, rc, want_rc, err, wall, runs + NO_PYTHON_LATE)
                if os.path.exists(path):
                    problems.append("%s: wrote %s, with nothing sampled" % (what, path))
                    os.unlink(path)
                notes.append("%s%s %d in %.2fs" % ("sub " if extra else "", os.path.basename(cmd[0]) if
                                                   cmd[0] != "sh" else "sh " + cmd[2], rc, wall))
        problems += stopped_while_waiting(remora, d)
        if problems:
            raise Fail("; ".join(problems))
        return "; ".join(notes)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def stopped_while_waiting(remora, d):
    """SIGTERM while remora waits for a shell blocked on a FIFO: one line at once, then,
    once the shell exits 7, exit 7, no summary, no file."""
    fifo = os.path.join(d, "go")
    os.mkfifo(fifo)
    path = os.path.join(d, "stopped.collapsed")
    p = subprocess.Popen(remora.argv(["record", "-o", path, "--", "sh", "-c",
                                      "read line < %s; exit 7" % shlex.quote(fifo)]),
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, start_new_session=True)
    try:
        w = open_writer(fifo, p)        # the shell has it open: remora waits for it
        os.kill(p.pid, signal.SIGTERM)
        first = read_line(p.stderr, remora.timeout)     # remora's line, while the shell runs
        w.write("go\n")
        w.close()
        rest = p.communicate(timeout=remora.timeout)[1].decode("utf-8", "replace")
        rc = p.returncode
    except BaseException:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        raise
    finally:
        p.stderr.close()
    err = first + rest
    remora.judge(["record", "--", "sh"], rc, "", err)
    problems = []
    what = "SIGTERM while waiting for `sh -c \"read < FIFO; exit 7\"`"
    if rc != 7:
        problems.append("%s: exit %d, want the shell's 7" % (what, rc))
    bad = one_line(err)
    if bad:
        problems.append("%s: want one line on stderr: %s" % (what, bad))
    elif "stopped" not in first:
        problems.append("%s: the line does not say remora stopped: %s" % (what, first.strip()))
    if SUMMARY.search(err) or os.path.exists(path):
        problems.append("%s: a summary or a file, with nothing sampled: %s" % (what, tail(err)))
    return problems


def test_top_not_python(remora):
    notes, problems = [], []
    for cmd, want_rc, runs in (NOT_PYTHON[0], NOT_PYTHON[2]):
        what = "`top -- %s`" % " ".join(cmd)
        rc, out, err, wall = run_timed(remora, ["top", "--"] + cmd)
        problems += no_python_problems(what, rc, want_rc, err, wall, runs + NO_PYTHON_LATE)
        if out.strip():
            problems.append("%s: a table on stdout, with nothing sampled: %s" % (what, tail(out)))
        notes.append("%s %d in %.2fs" % (" ".join(cmd), rc, wall))
    if problems:
        raise Fail("; ".join(problems))
    return "; ".join(notes)


def cpu_seconds(pid):
    """A process's CPU time so far (its main thread: remora has no other), in seconds."""
    try:
        with open("/proc/%d/schedstat" % pid) as f:
            return int(f.read().split()[0]) / 1e9
    except OSError:                     # no schedstat: clock ticks
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_wait_cpu(remora, interp, subprocesses):
    with Target(interp, os.path.join(TARGETS, "grandchild.py"), "ready.json", args=[0.2],
                spawn=False) as t:
        fifo = os.path.join(t.dir, "go")
        os.mkfifo(fifo)
        path = os.path.join(t.dir, "wait.collapsed")
        python = " ".join(shlex.quote(a) for a in t.argv)
        if subprocesses:
            shell, want_rc, extra = "read line < %s; sleep 1; %s; exit 5", 5, ["--subprocesses"]
        else:
            shell, want_rc, extra = "read line < %s; sleep 1; exec %s", 0, []
        args = ["record", "-o", path] + extra + ["--", "sh", "-c", shell % (shlex.quote(fifo), python)]
        p = subprocess.Popen(remora.argv(args), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, start_new_session=True)
        try:
            with open_writer(fifo, p) as w:     # the shell has it open: remora waits for it
                t0, c0 = time.monotonic(), cpu_seconds(p.pid)
                w.write("go\n")
            ready = os.path.join(t.dir, "ready.json")
            deadline = t0 + 30
            while not os.path.exists(ready):
                if p.poll() is not None or time.monotonic() > deadline:
                    raise Fail("grandchild.py never wrote its ready file (remora %s)"
                               % ("exited %d" % p.returncode if p.poll() is not None else "still runs"))
                time.sleep(0.005)
            t1, c1 = time.monotonic(), cpu_seconds(p.pid)
            err = p.communicate(timeout=remora.timeout)[1].decode("utf-8", "replace")
        except BaseException:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            raise
        remora.judge(args, p.returncode, "", err)
        share = (c1 - c0) / (t1 - t0)
        note = "remora used %.1f ms of CPU in %.2f s of waiting (%.2f%%), exit %d" % (
            (c1 - c0) * 1e3, t1 - t0, 100 * share, p.returncode)
        problems = []
        if share >= WAIT_CPU_SHARE:
            problems.append("waiting for the command to run Python, remora used %.1f%% of a CPU, "
                            "want under %.0f%%" % (100 * share, 100 * WAIT_CPU_SHARE))
        if p.returncode != want_rc:
            problems.append("exit %d, want the command's %d: %s" % (p.returncode, want_rc, tail(err)))
        elif not os.path.exists(path):
            problems.append("no profile written: %s" % tail(err))
        elif not any("grandchild_spin" in s.functions() for s in parse_collapsed(path)):
            problems.append("grandchild_spin is not in the profile: %s" % tail(err))
        if problems:
            raise Fail("; ".join(problems) + " [" + note + "]")
        return note


def test_shell_subprocesses(remora, interp):
    with Target(interp, os.path.join(TARGETS, "grandchild.py"), "ready.json", args=[0.4],
                spawn=False) as t:
        python = " ".join(shlex.quote(a) for a in t.argv)
        cmd = ["sh", "-c", "sleep 0.3; %s; exit 5" % python]
        path = os.path.join(t.dir, "shell.collapsed")
        rc, _, err = remora.run(["record", "--subprocesses", "-o", path, "--"] + cmd)
        if rc != 5:
            raise Fail("exit %d, want the shell's 5: %s" % (rc, tail(err)))
        if not os.path.exists(path):
            raise Fail("exit 5 but no profile written: %s" % tail(err))
        with open(t.host_path(t.out)) as f:
            truth = json.load(f)
        mine = [s for s in parse_collapsed(path) if s.tid == truth["tid"]]
        n = sum(s.count for s in mine)
        inside = sum(s.count for s in mine if truth["function"] in s.functions()
                     and truth["caller"] in s.functions())
        names = {s.name for s in mine}
        note = "grandchild pid %d: %d samples, %d in %s" % (truth["pid"], n, inside, truth["function"])
        if n < SHELL_MIN or inside < SHELL_SHARE * n:
            raise Fail("the grandchild's thread %d: %d samples, %d in %s() called from %s(); want "
                       ">= %d and >= %.0f%% [%s]" % (truth["tid"], n, inside, truth["function"],
                                                     truth["caller"], SHELL_MIN, 100 * SHELL_SHARE,
                                                     " ".join(err.split())[-200:]))
        if not all(name.endswith(" [pid %d]" % truth["pid"]) for name in names):
            raise Fail("the grandchild's thread is named %s, not after its pid %d"
                       % (sorted(names), truth["pid"]))
        # without the flag: the shell is not Python, nothing is sampled
        os.unlink(t.host_path(t.out))
        plain = os.path.join(t.dir, "plain.collapsed")
        rc, _, err = remora.run(["record", "-o", plain, "--"] + cmd)
        problems = no_python_problems("without --subprocesses", rc, 5, err, 0, float("inf"))
        if os.path.exists(plain):
            problems.append("without --subprocesses: wrote %s, with nothing sampled" % plain)
        if problems:
            raise Fail("; ".join(problems))
        return note


def tests(remora):
    """[(name, function, skip reason or None)] for run.py."""
    return [
        ("record/launch-not-python", lambda: test_record_not_python(remora), None),
        ("top/launch-not-python", lambda: test_top_not_python(remora), None),
    ] + [
        ("record/launch-wait-cpu/%s%s" % (i[0], "/subprocesses" if sub else ""),
         lambda i=i, sub=sub: test_wait_cpu(remora, i, sub), interp_missing(i))
        for i in INTERPRETERS if i[0] in WAIT_INTERPRETERS for sub in (False, True)
    ] + [
        ("record/launch-shell-subprocesses/%s" % i[0], lambda i=i: test_shell_subprocesses(remora, i),
         interp_missing(i))
        for i in INTERPRETERS if i[0] in SHELL_INTERPRETERS
    ]
