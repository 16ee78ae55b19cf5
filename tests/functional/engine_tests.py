# Which engine reads the target (issue 29; docs/cli.md "Engines"):
#   engine/default/INTERP   a plain `record` of a busy target names `engine kernel` in its
#                           summary (SKIP, naming the one-line notice, when this machine
#                           cannot load the kernel engine), its --stats `kernel:` line parses,
#                           and the busy thread's every stack is rooted at <module> in
#                           the target's file, down to the spinning function: its truth
#                           is the target's own stack (busy.py recurses DEPTH deep)
#   engine/no-caps          remora under setpriv without CAP_BPF, CAP_PERFMON and
#                           CAP_SYS_ADMIN (CAP_SYS_PTRACE kept): exactly one notice line,
#                           the summary says `engine user`, the profile holds the target's
#                           function; `--engine kernel` the same way: exit 3, one line
#   engine/conflicts        `--engine kernel` with --blocking, --native --blocking:
#                           exit 1, one line each (--native alone runs on the kernel
#                           engine: native_tick_tests.py) (--mode gil and exception are read at the tick:
#                           tickmode_tests.py; --async too: async_record_tests.py's
#                           async-record/kernel); `--engine bogus`: exit 1; `--engine user`
#                           says `engine user`
#   engine/held-up/INTERP   a CPU held up (a virtual CPU its host does not run) leaves the
#                           thread on it with no ticks: the rounds must read it instead.
#                           Made here by turning off remora's own task-clock events from
#                           outside (pidfd_getfd + PERF_EVENT_IOC_DISABLE) while the busy
#                           thread spins: after that, it must still have a sample in every
#                           10 ms of the recording (at 1 kHz), each whole to the spin, no
#                           more than a sample a period of the time, and --stats must
#                           count them as `behind`
import ctypes
import fcntl
import os
import re
import shutil
import time

from formats import parse_collapsed
from formats import TICK, read_remora, sample_functions
from harness import (INTERPRETERS, TARGETS, Fail, Recording, Skip, Target, interp_missing,
                     one_line, record, summary, tail, workdir)

ORDER = 320           # where run.py runs these tests among the modules' (ascending)

ENGINE_INTERPS = ("pyenv-3.9.18", "pyenv-3.11.7", "pyenv-3.12.1", "sid-3.15")
DEPTH = 30
NOTICE = "the kernel engine cannot be used"
NO_CAPS = ["setpriv", "--inh-caps=-bpf,-perfmon,-sys_admin",
           "--bounding-set=-bpf,-perfmon,-sys_admin", "--"]
HOST = [i for i in INTERPRETERS if i[0] == "pyenv-3.12.1"]


def busy(interp):
    return Target(interp, os.path.join(TARGETS, "busy.py"), "ready", [DEPTH, 1, 60])


def test_default(remora, interp):
    d = workdir()
    try:
        with busy(interp) as t:
            t.wait_ready()
            out = os.path.join(d, "x.collapsed")
            _, err = record(remora, ["-p", t.pid, "-d", "1", "--stats", "-o", out])
            s = summary(err)
            if s.engine != "kernel":
                notice = [l for l in err.splitlines() if NOTICE in l]
                raise Skip("the kernel engine is not used here: %s"
                           % (notice[0] if notice else tail(err)))
            if not re.search(r"^kernel: samples=\d+ fallback=\d+ unnamed=\d+ ticks=\d+ ", err, re.M):
                raise Fail("--stats has no `kernel:` line: %s" % tail(err, 8))
            bad, n = 0, 0
            for st in parse_collapsed(out):
                names, count = [f[0] for f in st.frames], st.count
                n += count
                if not names or names[0] not in ("_bootstrap", "Thread._bootstrap") or names[-1] != "spin" \
                        or names.count("recurse") < DEPTH - 2:
                    bad += count
            if n < 0.9 * s.samples:
                raise Fail("the busy thread in %d of %d rounds" % (n, s.samples))
            if bad > 0.01 * n:
                raise Fail("%d of %d stacks not _bootstrap;...;recurse x%d;spin" % (bad, n, DEPTH))
            return "%s; %d of %d stacks whole to the spin at depth %d" % (s, n - bad, n, DEPTH)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_no_caps(remora):
    if shutil.which("setpriv") is None:
        raise Skip("setpriv(1) not installed (util-linux)")
    d = workdir()
    try:
        with busy(HOST[0]) as t:
            t.wait_ready()
            out = os.path.join(d, "x.collapsed")
            # the default engine's fallback (--engine auto named: a forced user-engine run,
            # REMORA_TEST_ENGINE=user, would otherwise ask for the user engine, which says
            # nothing)
            rc, _, err = remora.run(["record", "--engine", "auto", "-p", t.pid, "-d", "0.5", "-o", out],
                                    prefix=NO_CAPS)
            if rc != 0:
                raise Fail("without CAP_BPF/CAP_PERFMON: exit %d, want 0: %s" % (rc, tail(err)))
            notices = [l for l in err.splitlines() if NOTICE in l]
            if len(notices) != 1:
                raise Fail("want one notice line, found %d: %s" % (len(notices), tail(err, 5)))
            s = summary(err)
            if s.engine != "user":
                raise Fail("the summary says engine %s, want user" % s.engine)
            text = open(out, encoding="utf-8").read()
            if "spin (" not in text:
                raise Fail("the profile lacks the target's spin(): %s" % text[:200])
            rc, _, err2 = remora.run(["record", "--engine", "kernel", "-p", t.pid, "-d", "0.5",
                                      "-o", out], prefix=NO_CAPS)
            if rc != 3 or one_line(err2) is not None or NOTICE not in err2:
                raise Fail("--engine kernel without the capabilities: exit %d (want 3), %s"
                           % (rc, one_line(err2) or err2.strip()))
            return "%s | %s" % (notices[0].strip(), err2.strip())
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_conflicts(remora):
    d = workdir()
    problems = []
    try:
        with busy(HOST[0]) as t:
            t.wait_ready()
            out = os.path.join(d, "x.collapsed")
            for flags in (["--blocking"], ["--native", "--blocking"], ["--engine", "bogus"]):
                args = ["record", "-p", t.pid, "-d", "0.2", "-o", out] + flags
                if flags[0] != "--engine":
                    args += ["--engine", "kernel"]
                rc, _, err = remora.run(args)
                if rc != 1 or one_line(err) is not None:
                    problems.append("%s: exit %d (want 1), %s" % (" ".join(flags), rc,
                                                                  one_line(err) or err.strip()))
            _, err = record(remora, ["-p", t.pid, "-d", "0.2", "--engine", "user", "-o", out])
            if summary(err).engine != "user":
                problems.append("--engine user: the summary says engine %s" % summary(err).engine)
        if problems:
            raise Fail("; ".join(problems))
        return "3 refused in one line each; --engine user named"
    finally:
        shutil.rmtree(d, ignore_errors=True)


SYS_PIDFD_GETFD = 438                   # x86_64 and the generic table alike
PERF_EVENT_IOC_DISABLE = 0x2401         # _IO('$', 1)
HELD_SECONDS, HELD_BIN_NS, HELD_EVERY, HELD_MOST = 3, 10000000, 0.9, 1.1


def perf_fds(pid):
    """remora's perf event descriptors, by /proc/PID/fd."""
    fds = []
    for name in os.listdir("/proc/%d/fd" % pid):
        try:
            if os.readlink("/proc/%d/fd/%s" % (pid, name)) == "anon_inode:[perf_event]":
                fds.append(int(name))
        except OSError:
            pass
    return fds


def disable_events(pid):
    """Turns off every perf event of process pid from outside: the thread the event
    samples runs on, but has no ticks. Returns how many."""
    libc = ctypes.CDLL(None, use_errno=True)
    pidfd = os.pidfd_open(pid)
    n = 0
    try:
        for fd in perf_fds(pid):
            mine = libc.syscall(SYS_PIDFD_GETFD, pidfd, fd, 0)
            if mine < 0:
                raise Fail("pidfd_getfd(remora's fd %d): %s" % (fd, os.strerror(ctypes.get_errno())))
            try:
                fcntl.ioctl(mine, PERF_EVENT_IOC_DISABLE, 0)
                n += 1
            finally:
                os.close(mine)
    finally:
        os.close(pidfd)
    return n


def test_held_up(remora, interp):
    if not hasattr(os, "pidfd_open"):
        raise Skip("the host's python has no os.pidfd_open")
    d = workdir()
    try:
        with busy(interp) as t:
            t.wait_ready()
            path = os.path.join(d, "held.remora")
            rec = Recording(remora, ["-p", t.pid, "-r", "1k", "-d", HELD_SECONDS, "--stats",
                                     "-o", path])
            try:
                rec.wait_sampled(100)
                off_ns = time.monotonic_ns()
                n = disable_events(rec.proc.pid)
                rc, _, err = rec.finish()
            finally:
                rec.close()
        if rc != 0:
            raise Fail("remora exited %d: %s" % (rc, tail(err)))
        s = summary(err)
        if s.engine != "kernel":
            raise Skip("the kernel engine is not used here: %s" % tail(err))
        if n == 0:
            raise Fail("remora had no perf event open while sampling")
        stats = re.search(r"^kernel: .* behind=(\d+)", err, re.M)
        r = read_remora(path)
        end = r.meta["start_mono_ns"] + r.meta["duration_ns"]
        lo = off_ns + 5000000               # its last tick at most 2 periods before the turn-off
        bins, bad, total = {}, 0, 0
        for at, _, node, flags in r.samples:
            if at < lo or flags & TICK:
                continue
            names = sample_functions(r, node)
            if not names or names[-1] != "spin":
                continue                    # (the main thread, asleep holding no GIL: none)
            total += 1
            if names.count("recurse") < DEPTH - 2:
                bad += 1
            bins[(at - lo) // HELD_BIN_NS] = True
        want = max(1, int((end - lo + HELD_BIN_NS - 1) // HELD_BIN_NS))
        note = "%d events turned off at +%.0f ms; %d samples of the spin after, in %d of %d " \
               "bins of %d ms; %s; behind=%s" % (n, (off_ns - r.meta["start_mono_ns"]) / 1e6, total,
                                                len(bins), want, HELD_BIN_NS // 1000000, s,
                                                stats.group(1) if stats else "?")
        if len(bins) < HELD_EVERY * want or stats is None or int(stats.group(1)) == 0:
            raise Fail("the spinning thread, its ticks stopped, not read by the rounds: " + note)
        if total > HELD_MOST * (end - lo) / 1e6:     # 1 kHz: a period a millisecond at most
            raise Fail("the spinning thread counted for more periods than the time it had: " + note)
        if bad > 0.01 * total:
            raise Fail("%d of %d stacks not whole to the spin: %s" % (bad, total, note))
        return note
    finally:
        shutil.rmtree(d, ignore_errors=True)


def tests(remora):
    """[(name, function, skip reason or None)] for run.py."""
    return [("engine/default/%s" % i[0], lambda i=i: test_default(remora, i), interp_missing(i))
            for i in INTERPRETERS if i[0] in ENGINE_INTERPS] + [
        ("engine/held-up/%s" % i[0], lambda i=i: test_held_up(remora, i), interp_missing(i))
        for i in INTERPRETERS if i[0] in ENGINE_INTERPS] + [
        ("engine/no-caps", lambda: test_no_caps(remora), interp_missing(HOST[0])),
        ("engine/conflicts", lambda: test_conflicts(remora), interp_missing(HOST[0])),
    ]
