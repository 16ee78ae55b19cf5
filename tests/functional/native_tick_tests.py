# Functional tests of --native on the kernel engine (issue 48): each tick copies the
# interrupted thread's user registers and the top of its stack, unwound in user space over
# that copy alone, so the target is never stopped. Target: tests/targets/native_spin.py, a
# thread that RUNS (a tick samples threads on a CPU) in Python called back from C:
# py_spin -> py_qsort -> libc qsort() -> (ctypes callback) py_cmp -> py_work; its own
# sys._getframe() gives the Python frames.
#
#   native/tick/INTERP   `record --native -r 1000 -d 2` of the spinning target:
#       - the summary says engine kernel (SKIP, naming the notice, where a plain record
#         is not on the kernel engine either: this machine cannot load it);
#       - the target is never traced while remora records (its TracerPid, polled from
#         before remora starts until it ends, stays 0: no ptrace stop can happen) and its
#         parent (this test) sees no stop (waitpid WUNTRACED);
#       - at least 99% of the asked rounds are taken (rounds taken of asked). On a machine
#         so loaded that a plain kernel recording of the same target, made next, keeps
#         less, no more than LOADED_SLACK points under that one's (each tick's unwind costs
#         remora ~45 us of CPU, and a loaded machine preempts it more: 85-92% against the
#         plain one's 93-97% on this 2-core machine under another helper's tests; the
#         spinner's own samples, its ticks, are all there either way: the note says both).
#         A measurement of timing: judged only with REMORA_FIDELITY=1 (make test, not make
#         asan: under the sanitizers each unwind takes several times as long, 70-76% kept);
#       - every spinner stack holding py_cmp has, outermost first, the target's own Python
#         frames in their order, and between py_qsort and py_cmp a C sort frame (qsort,
#         qsort_r, msort...): at least 99% of them; at most 1% of the spinner's samples
#         say <no native stack>.
import os
import re
import shutil
import subprocess
import time

from formats import parse_collapsed
from harness import (INTERPRETERS, Fail, Skip, Target, interp_missing, script, summary, tail,
                     tracer_of, workdir)

ORDER = 141           # where run.py runs these tests among the modules' (ascending)

TICK_INTERPRETERS = ("pyenv-3.12.1", "debian-3.11-static", "sid-3.15")
NOTICE = "the kernel engine cannot be used"
SORT_CALLS = re.compile(r"^(qsort|qsort_r|__qsort_r|msort_with_tmp.*)$")
NO_NATIVE = "<no native stack>"
LOADED_SLACK = 0.10


def short(fn):
    """A Python frame's name as co_name gives it (remora shows co_qualname on 3.11+)."""
    return fn.rsplit(".", 1)[-1]


def record_watched(remora, t, args):
    """`remora record ARGS` of target t, its TracerPid polled until remora ends (a check,
    not a synchronisation). Returns (rc, stderr, the tracers seen)."""
    proc = subprocess.Popen(remora.argv(["record"] + [str(a) for a in args]),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    tracers = set()
    while proc.poll() is None:
        tr = tracer_of(t.pid)
        if tr:
            tracers.add(tr)
        time.sleep(0.005)
    err = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    return proc.returncode, err, tracers


def check_stacks(col, ready):
    """The spinner's stacks: (with py_cmp, in true order, without a native stack, all)."""
    truth = list(reversed(ready["python"]))         # outermost first, as collapsed lists them
    with_cmp = good = none = total = 0
    bad = None
    for st in parse_collapsed(col):
        if st.tid != ready["tid"]:
            continue
        fns = [f[0] for f in st.frames]
        total += st.count
        if NO_NATIVE in fns:
            none += st.count
        if "py_cmp" not in [short(f) for f in fns]:
            continue
        with_cmp += st.count
        shorts = [short(f) for f in fns]
        # the target's Python frames, in order, as a subsequence of the stack
        at, k = [], 0
        for name in truth:
            while k < len(shorts) and shorts[k] != name:
                k += 1
            at.append(k)
            k += 1
        i_q, i_c = shorts.index("py_qsort"), shorts.index("py_cmp")
        ordered = all(a < len(shorts) for a in at[:truth.index("py_cmp") + 1])
        if ordered and i_q < i_c and any(SORT_CALLS.match(f) for f in fns[i_q + 1:i_c]):
            good += st.count
        elif bad is None:
            bad = fns
    return with_cmp, good, none, total, bad


def kept(s):
    return s.rounds / float(s.asked_rounds) if s.asked_rounds else 0.0


def test_tick(remora, interp):
    d = workdir()
    try:
        with Target(interp, script("native_spin.py"), "ready.json") as t:
            ready = t.wait_ready()
            col = os.path.join(d, "n.collapsed")
            rc, err, tracers = record_watched(remora, t, ["-p", t.pid, "--native", "-d", 2, "-r", 1000,
                                                          "-o", col])
            if rc != 0:
                raise Fail("record --native exited %d: %s" % (rc, tail(err)))
            s = summary(err)
            if s.engine != "kernel":
                notice = [l for l in err.splitlines() if NOTICE in l]
                _, err2, _ = record_watched(remora, t, ["-p", t.pid, "-d", 0.3, "-o", col])
                if summary(err2).engine == "kernel":
                    raise Fail("record --native is on engine %s where a plain record is on the "
                               "kernel's: %s" % (s.engine, notice[0] if notice else tail(err)))
                raise Skip("the kernel engine is not used here: %s" % (notice[0] if notice else err.strip()))
            if tracers:
                raise Fail("the target was traced while remora recorded (TracerPid %s)" % sorted(tracers))
            pid, status = os.waitpid(t.pid, os.WUNTRACED | os.WNOHANG)
            if pid != 0:
                raise Fail("the target's parent saw a change of state: status %#x" % status)
            with_cmp, good, none, total, bad = check_stacks(col, ready)
            if total == 0 or with_cmp == 0:
                raise Fail("no spinner stack with py_cmp (%d of the spinner's): %s" % (total, tail(err)))
            if good < 0.99 * with_cmp:
                raise Fail("%d of %d stacks with py_cmp in true order (C sort between py_qsort and "
                           "py_cmp); one that is not: %s" % (good, with_cmp, " ; ".join(bad or [])))
            if none > 0.01 * total:
                raise Fail("%d of %d spinner samples say %s" % (none, total, NO_NATIVE))
            rate = kept(s)
            note = ""
            if os.environ.get("REMORA_FIDELITY") != "1":
                note = " (not judged: REMORA_FIDELITY unset)"
            elif rate < 0.99:
                # a loaded machine: what a plain kernel recording keeps there now
                _, err2, _ = record_watched(remora, t, ["-p", t.pid, "-d", 2, "-r", 1000, "-o", col])
                plain = kept(summary(err2))
                if plain >= 0.99 or rate < plain - LOADED_SLACK:
                    raise Fail("%d rounds taken of %d asked (%.1f%%), a plain recording %.1f%%"
                               % (s.rounds, s.asked_rounds, 100 * rate, 100 * plain))
                note = " (plain %.1f%%: a loaded machine)" % (100 * plain)
            note += "; %d spinner samples of %d asked" % (total, s.asked_rounds)
            if t.finish() != 0:
                raise Fail("the target failed: %s" % t.log_tail())
        return ("%.1f%% of the rounds%s; %d/%d py_cmp stacks in order; %d/%d with no native stack"
                % (100 * rate, note, good, with_cmp, none, total))
    finally:
        shutil.rmtree(d, ignore_errors=True)


def tests(remora):
    """[(name, function, skip reason or None)] for run.py."""
    return [("native/tick/%s" % i[0], lambda i=i: test_tick(remora, i), interp_missing(i))
            for i in INTERPRETERS if i[0] in TICK_INTERPRETERS]
