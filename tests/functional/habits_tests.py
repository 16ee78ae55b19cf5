# What py-spy's and Tachyon's users type (issue 50), on tests/targets/busy.py (two threads
# recursing DEPTH deep, then spinning in spin()):
#
#   habits/pid-alone          `record PID -o x.collapsed` and `top PID` as with -p (the
#                             profile holds spin()); `record -p A B` two pids, `record word`:
#                             exit 1, one line each
#   habits/sort               cpu_shares.py (share_60, share_30, share_10 under one loop)
#                             recorded once to a .remora, converted with --sort self (the default), total,
#                             name (and the aliases own, cumulative): the rows ordered so
#                             (self non-increasing; total non-increasing; names ascending),
#                             the same rows each time; record --sort total prints the table
#                             so; --sort bogus: exit 1, one line
#   habits/wait-command       `record -d 1 -- python -c <spins 3 s>`: the profile written at
#                             1 s, then one line saying remora waits for the command, then
#                             the command's exit code (7); a command that ends before -d:
#                             no such line
#   habits/target-exits       busy.py told to end 1.5 s in, recorded with -p and -d 30: exit
#                             0, the profile written, the summary says the target exited
#   habits/permission         uid 65534 (no CAP_BPF, no ptrace) against a root target:
#                             record and top print exactly one line (no engine notice
#                             before the permission error), exit 3

import os
import re
import shutil
import subprocess
import tempfile

from formats import FRAME, parse_collapsed
from harness import (HOST_PYTHON, INTERPRETERS, TARGETS, Fail, Skip, Target, interp_command,
                     interp_missing, one_line, summary, tail, workdir)

ORDER = 225           # where run.py runs these tests among the modules' (ascending)

HOST = [i for i in INTERPRETERS if i[0] == "pyenv-3.12.1"]
DEPTH = 6
WAITING = re.compile(r"^remora: waiting for the command \(pid \d+\) to exit; Ctrl-C interrupts it$", re.M)


def busy(interp, seconds=60):
    return Target(interp, os.path.join(TARGETS, "busy.py"), "ready", [DEPTH, 2, seconds])


def has_spin(path):
    return any(st.frames and st.frames[-1][0] == "spin" for st in parse_collapsed(path))


def test_pid_alone(remora, interp):
    d = workdir()
    try:
        with busy(interp) as t:
            t.wait_ready()
            col = os.path.join(d, "x.collapsed")
            rc, _, err = remora.run(["record", t.pid, "-d", "0.3", "-o", col])
            if rc != 0:
                raise Fail("`record PID -d 0.3 -o x.collapsed` exited %d: %s" % (rc, tail(err)))
            if not has_spin(col):
                raise Fail("`record PID`'s profile has no spin()")
            rc, out, err = remora.run(["top", t.pid, "-d", "1"])
            if rc != 0 or "spin" not in out:
                raise Fail("`top PID -d 1` exited %d, %s spin(): %s" % (rc, "with" if "spin" in out else "without", tail(err)))
            problems = []
            for args, what in ((["record", "-p", t.pid, "12", "-d", "0.3"], "two pids"),
                               (["record", "notapid", "-d", "0.3"], "a word"),
                               (["top", t.pid, str(t.pid) + "9", "-d", "0.3"], "top, two pids")):
                rc, _, err = remora.run(args)
                if rc != 1 or one_line(err):
                    problems.append("%s: exit %d (want 1), %s" % (what, rc, one_line(err) or err.strip()))
            if problems:
                raise Fail("; ".join(problems))
        return "record PID and top PID sample the target; two pids or a word: one line, exit 1"
    finally:
        shutil.rmtree(d, ignore_errors=True)


ROW = re.compile(r"^\s*(\d+)\s+[\d.]+%\s+(\d+)\s+[\d.]+%  (.*)$")


def table(out):
    """The table's rows in order: [{"self", "total", "function", "file"}]."""
    rows = []
    for line in out.split("\n")[1:]:
        m = ROW.match(line)
        if m:
            fm = FRAME.match(m.group(3))
            rows.append({"self": int(m.group(1)), "total": int(m.group(2)),
                         "function": fm.group(1) if fm else m.group(3), "file": fm.group(2) if fm else ""})
    return rows


def rows_of(remora, args):
    rc, out, err = remora.run(args)
    if rc != 0:
        raise Fail("`remora %s` exited %d: %s" % (" ".join(args), rc, tail(err)))
    return table(out)


def test_sort(remora, interp):
    d = workdir()
    try:
        with Target(interp, os.path.join(TARGETS, "cpu_shares.py"), "ready.json") as t:
            t.wait_ready()
            raw = os.path.join(d, "x.remora")
            rc, _, err = remora.run(["record", "-p", t.pid, "-d", "0.5", "-o", raw])
            if rc != 0:
                raise Fail("record exited %d: %s" % (rc, tail(err)))
            rc, out, err = remora.run(["record", "-p", t.pid, "-d", "0.3", "--sort", "total", "-l", "100"])
            if rc != 0:
                raise Fail("record --sort total exited %d: %s" % (rc, tail(err)))
            live = table(out)
        problems = []
        if [r["total"] for r in live] != sorted((r["total"] for r in live), reverse=True):
            problems.append("record --sort total: totals %s not in order" % [r["total"] for r in live])
        base = rows_of(remora, ["convert", raw, "-l", "100"])
        for key, aliases in (("self", ("own",)), ("total", ("cumulative",)), ("name", ())):
            rows = rows_of(remora, ["convert", raw, "-l", "100", "--sort", key])
            for a in aliases:
                if rows_of(remora, ["convert", raw, "-l", "100", "--sort", a]) != rows:
                    problems.append("--sort %s and --sort %s differ" % (a, key))
            if sorted(map(repr, rows)) != sorted(map(repr, base)):
                problems.append("--sort %s: not the same rows as the default table" % key)
            if key == "self" and rows != base:
                problems.append("--sort self is not the default order")
            if key == "name":
                names = [(r["function"], r["file"]) for r in rows]
                if names != sorted(names):
                    problems.append("--sort name: %s not ascending" % [n[0] for n in names])
            else:
                vals = [r[key] for r in rows]
                if vals != sorted(vals, reverse=True):
                    problems.append("--sort %s: %s not in order" % (key, vals))
        if len(base) < 4:
            problems.append("only %d rows to order" % len(base))
        rc, _, err = remora.run(["convert", raw, "--sort", "bogus"])
        if rc != 1 or one_line(err):
            problems.append("--sort bogus: exit %d (want 1), %s" % (rc, one_line(err) or err.strip()))
        if problems:
            raise Fail("; ".join(problems[:4]))
        return "%d rows, ordered by self, total and name; aliases agree" % len(base)
    finally:
        shutil.rmtree(d, ignore_errors=True)


SPIN = ("import time\nend = time.monotonic() + %s\n"
        "def work():\n    while time.monotonic() < end: pass\nwork()\nraise SystemExit(7)\n")


def test_wait_command(remora, interp):
    d = workdir()
    try:
        col = os.path.join(d, "x.collapsed")
        rc, _, err = remora.run(["record", "-d", "1", "-o", col, "--"] + interp_command(interp, ["-c", SPIN % 3]))
        problems = []
        if rc != 7:
            problems.append("exit %d, want the command's 7" % rc)
        lines = err.splitlines()
        waits = [i for i, l in enumerate(lines) if WAITING.match(l)]
        summ = [i for i, l in enumerate(lines) if l.startswith("remora: ") and " rounds taken of " in l]
        if len(waits) != 1:
            problems.append("%d lines saying remora waits for the command: %s" % (len(waits), tail(err)))
        elif not summ or waits[0] < summ[0]:
            problems.append("the waiting line comes before the summary: %s" % tail(err))
        if not os.path.exists(col) or not any(st.frames and st.frames[-1][0] == "work" for st in parse_collapsed(col)):
            problems.append("no profile of work() written")
        rc, _, err = remora.run(["record", "-d", "3", "-o", col, "--"] + interp_command(interp, ["-c", SPIN % 0.5]))
        if rc != 7 or WAITING.search(err):
            problems.append("a command ending before -d: exit %d (want 7), %s" % (
                rc, "a waiting line" if WAITING.search(err) else "no waiting line"))
        if problems:
            raise Fail("; ".join(problems))
        return "one line while waiting, after the summary; none when the command ends first"
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_target_exits(remora, interp):
    d = workdir()
    try:
        with busy(interp, 1.5) as t:
            t.wait_ready()
            col = os.path.join(d, "x.collapsed")
            rc, _, err = remora.run(["record", "-p", t.pid, "-d", "30", "-o", col])
        if rc != 0:
            raise Fail("record -p of a target that exited 1.5 s in: exit %d, want 0: %s" % (rc, tail(err)))
        s = summary(err)
        if not s.exited:
            raise Fail("the summary does not say the target exited: %s" % tail(err))
        if not has_spin(col):
            raise Fail("the profile written has no spin()")
        return "exit 0, %s" % s
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_permission(remora):
    if shutil.which("setpriv") is None:
        raise Skip("setpriv not installed")
    drop = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
    probe = subprocess.run(drop + ["true"], capture_output=True)
    if probe.returncode != 0:
        raise Skip("cannot switch to uid 65534: %s" % tail(probe.stderr.decode()))
    bindir = tempfile.mkdtemp(prefix="remora-func-bin-")
    try:
        os.chmod(bindir, 0o755)
        binary = os.path.join(bindir, "remora")
        shutil.copy(remora.path, binary)
        os.chmod(binary, 0o755)
        with busy(HOST[0]) as t:
            t.wait_ready()
            problems, said = [], ""
            for cmd in ("record", "top"):
                rc, _, err = remora.run([cmd, "-p", t.pid, "-d", "1"], prefix=drop, binary=binary)
                if rc != 3 or one_line(err):
                    problems.append("%s: exit %d (want 3), %s" % (cmd, rc, one_line(err) or err.strip()))
                said = err.strip()
            if problems:
                raise Fail("; ".join(problems))
        return said
    finally:
        shutil.rmtree(bindir, ignore_errors=True)


def tests(remora):
    out = []
    for i in HOST:
        m = interp_missing(i)
        out += [("habits/pid-alone", lambda i=i: test_pid_alone(remora, i), m),
                ("habits/sort", lambda i=i: test_sort(remora, i), m),
                ("habits/wait-command", lambda i=i: test_wait_command(remora, i), m),
                ("habits/target-exits", lambda i=i: test_target_exits(remora, i), m),
                ("habits/permission", lambda: test_permission(remora), m)]
    return out
