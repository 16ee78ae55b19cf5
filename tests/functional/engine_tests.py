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
#   engine/conflicts        `--engine kernel` with --blocking, --native, --mode gil,
#                           --mode exception, --async: exit 1, one line each; `--engine
#                           bogus`: exit 1; `--engine user` says `engine user`
import os
import re
import shutil

from formats import parse_collapsed
from harness import (INTERPRETERS, TARGETS, Fail, Skip, Target, interp_missing, one_line,
                     record, summary, tail, workdir)

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
            rc, _, err = remora.run(["record", "-p", t.pid, "-d", "0.5", "-o", out], prefix=NO_CAPS)
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
            for flags in (["--blocking"], ["--native"], ["--mode", "gil"], ["--mode", "exception"],
                          ["--async"], ["--engine", "bogus"]):
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
        return "6 refused in one line each; --engine user named"
    finally:
        shutil.rmtree(d, ignore_errors=True)


def tests(remora):
    """[(name, function, skip reason or None)] for run.py."""
    return [("engine/default/%s" % i[0], lambda i=i: test_default(remora, i), interp_missing(i))
            for i in INTERPRETERS if i[0] in ENGINE_INTERPS] + [
        ("engine/no-caps", lambda: test_no_caps(remora), interp_missing(HOST[0])),
        ("engine/conflicts", lambda: test_conflicts(remora), interp_missing(HOST[0])),
    ]
