# Functional tests of `remora dump` (run by run.py, as every *_tests.py module):
#
#   known-stacks/INTERP   known_stacks.py parks its threads at known stacks and writes its
#                         own truth: `dump --json` must equal it exactly, the text dump name
#                         every thread id
#   gil/INTERP            gil_spin.py: in 9 of 10 dumps the spinner holds the GIL and is on
#                         CPU, the threads parked in C neither
#   fold/INTERP           dump_recurse.py (issue 50): the main thread recurses DEPTH deep
#                         and parks; it wrote its own stack (frames, f_lasti, the opcode
#                         there) and its threads' start order. Text: the main thread first,
#                         the others oldest first, no `interpreter N` (one interpreter),
#                         the recursion one line `down (file:line) ×N` (each run of equal
#                         frames of the truth one line with its length); --json every frame
#                         as the truth; `dump PID` (no -p) the same text; --opcodes: every
#                         Python frame's offset its f_lasti, its name the opcode there or one
#                         of its specialised forms (a caller resting in an inline cache
#                         aside: its bytes are counters), text and JSON alike
#   errors/*              usage (1), no such pid (2), not Python (4), a Python remora does
#                         not read (4, naming its version), no permission (3, with a hint),
#                         targets exiting while dumped (0, 2 or 4 only); one line each

import os
import re
import shutil
import subprocess
import tempfile

from harness import (HOST_PYTHON, INTERPRETERS, OLD_PYTHONS, TARGETS, Fail, Skip, Target,
                     dump_frames_problems, dump_threads_problems, expect_failure, free_pid,
                     interp_missing, one_line, tail)
from formats import parse_dump

ORDER = 10              # where run.py runs these tests among the modules' (ascending)

GIL_DUMPS, GIL_NEEDED = 10, 9            # margin: one bad dump of ten is tolerated
EXIT_RACE_TARGETS = 50                   # short-lived targets in the exit-during-dump test

# --- known stacks -----------------------------------------------------------------------


def test_known_stacks(remora, interp):
    with Target(interp, os.path.join(TARGETS, "known_stacks.py"), "truth.json") as t:
        truth = t.wait_ready()
        t.wait_main_in_read()
        rc, out, err = remora.run(["dump", "-p", t.pid, "--json"])
        if rc != 0:
            raise Fail("`remora dump --json` exited %d: %s" % (rc, tail(err)))
        doc = parse_dump(out)
        problems, got, want = dump_threads_problems(doc, truth, t.pid)
        holders = [n for n, th in got.items() if th.get("gil") is True]
        if len(holders) > 1:
            problems.append("%d threads hold the GIL: %s" % (len(holders), holders))
        more, diff = dump_frames_problems(got, truth)
        problems += more

        rc, out, err = remora.run(["dump", "-p", t.pid])
        if rc != 0:
            problems.append("text `remora dump` exited %d: %s" % (rc, tail(err)))
        else:
            absent = [str(n) for n in sorted(want)
                      if not re.search(r"(?<!\d)%d(?!\d)" % n, out)]
            if absent:
                problems.append("text dump does not mention thread ids %s" % ", ".join(absent))
        if problems:
            raise Fail("; ".join(problems) + ("\n" + "\n".join("    " + l for l in diff)
                                              if diff else ""))


# --- recursion folded, thread order, opcodes ------------------------------------------

FOLD_DEPTH = 25
DUMP_HEAD = re.compile(r'^Thread (\d+) "')
DUMP_LINE = re.compile(r"^    (.*) \((.*):(\d+)\)(?: \[([A-Z0-9_]+) at (\d+)\])?(?: \u00d7(\d+))?$")


def text_threads(out):
    """[(tid, header, [(function, file, line, op, offset, times)...])] of a text dump, in
    its order."""
    threads = []
    for line in out.split("\n"):
        m = DUMP_HEAD.match(line)
        if m:
            threads.append((int(m.group(1)), line, []))
            continue
        m = DUMP_LINE.match(line)
        if m and threads:
            threads[-1][2].append((m.group(1), m.group(2), int(m.group(3)), m.group(4),
                                   int(m.group(5)) if m.group(5) else None,
                                   int(m.group(6)) if m.group(6) else 1))
    return threads


def folded(frames):
    """The truth's frames (innermost first) as runs: [((function, file, line), n)]."""
    runs = []
    for f in frames:
        key = (f["function"], f["file"], f["line"])
        if runs and runs[-1][0] == key:
            runs[-1][1] += 1
        else:
            runs.append([key, 1])
    return [(k, n) for k, n in runs]


def op_problems(what, got, truth):
    """Each frame's (opname, offset) against the truth's f_lasti and opcode there."""
    problems = []
    for k, ((name, offset), f) in enumerate(zip(got, truth)):
        if offset != f["offset"]:
            problems.append("%s frame %d (%s): offset %r, the frame's f_lasti is %d"
                            % (what, k, f["function"], offset, f["offset"]))
        elif f["op"] != "CACHE" and name not in f["ops"]:
            problems.append("%s frame %d (%s): %r at %d, the code has %s there"
                            % (what, k, f["function"], name, offset, f["op"]))
    return problems


def test_fold(remora, interp):
    script = os.path.join(TARGETS, "dump_recurse.py")
    with Target(interp, script, "truth.json", [FOLD_DEPTH]) as t:
        truth = t.wait_ready()
        problems = []
        rc, out, err = remora.run(["dump", "-p", t.pid])
        if rc != 0:
            raise Fail("`remora dump` exited %d: %s" % (rc, tail(err)))
        rc2, out2, err2 = remora.run(["dump", t.pid])
        if rc2 != 0 or out2 != out:
            problems.append("`remora dump PID` exited %d, %s `dump -p PID`'s: %s"
                            % (rc2, "its text the same as" if out2 == out else "its text not", tail(err2)))
        threads = text_threads(out)
        order = [tid for tid, _, _ in threads]
        if not order or order[0] != truth["main"]:
            problems.append("the first thread is %s, want the main thread %d" % (order[:1], truth["main"]))
        rest = [tid for tid in order if tid in truth["started"]]
        if rest != truth["started"]:
            problems.append("the other threads in the order %s, want oldest first %s" % (rest, truth["started"]))
        heads = [h for _, h, _ in threads if " interpreter " in h]
        if heads:
            problems.append("one interpreter, yet a header names it: %s" % heads[0])
        main = [fr for tid, _, fr in threads if tid == truth["main"]]
        want = folded(truth["frames"])
        got = [((fn, file, line), n) for fn, file, line, _, _, n in main[0]] if main else []
        if got != want:
            problems.append("the main thread's lines %s, want %s" % (
                ["%s:%d x%d" % (k[0], k[2], n) for k, n in got],
                ["%s:%d x%d" % (k[0], k[2], n) for k, n in want]))
        elif not any(k[0] == "down" and n >= FOLD_DEPTH - 1 for k, n in got):
            problems.append("no line folds the recursion of down() (%d deep)" % FOLD_DEPTH)
        # JSON keeps every frame
        rc, out, err = remora.run(["dump", "-p", t.pid, "--json", "--opcodes"])
        if rc != 0:
            raise Fail("`remora dump --json --opcodes` exited %d: %s" % (rc, tail(err)))
        doc = parse_dump(out)
        if doc["threads"][0]["native_id"] != truth["main"]:
            problems.append("--json: the first thread is %d, want the main thread" % doc["threads"][0]["native_id"])
        jmain = [th for th in doc["threads"] if th["native_id"] == truth["main"]]
        jframes = jmain[0]["frames"] if jmain else []
        if [(f["function"], f["file"], f["line"]) for f in jframes] != \
                [(f["function"], f["file"], f["line"]) for f in truth["frames"]]:
            problems.append("--json: the main thread's %d frames are not the truth's %d"
                            % (len(jframes), len(truth["frames"])))
        else:
            problems += op_problems("--json --opcodes", [(f.get("opname"), f.get("offset")) for f in jframes],
                                    truth["frames"])
        rc, out, err = remora.run(["dump", "-p", t.pid, "--opcodes", "--no-source"])
        if rc != 0:
            raise Fail("`remora dump --opcodes` exited %d: %s" % (rc, tail(err)))
        main = [fr for tid, _, fr in text_threads(out) if tid == truth["main"]]
        expanded = []
        for fn, file, line, op, offset, n in (main[0] if main else []):
            expanded += [(op, offset)] * n
        if len(expanded) != len(truth["frames"]):
            problems.append("--opcodes text: %d frames of the main thread, want %d" % (len(expanded), len(truth["frames"])))
        else:
            problems += op_problems("--opcodes text", expanded, truth["frames"])
        if problems:
            raise Fail("; ".join(problems[:4]))
        inner = truth["frames"][0]
        return "main first, %d runs for %d frames (down x%d), innermost %s at %d" % (
            len(want), len(truth["frames"]), max(n for k, n in want if k[0] == "down"),
            jframes[0].get("opname"), jframes[0].get("offset"))


# --- GIL --------------------------------------------------------------------------------

def test_gil(remora, interp):
    with Target(interp, os.path.join(TARGETS, "gil_spin.py"), "ready.json") as t:
        ready = t.wait_ready()
        t.wait_main_in_read()
        quiet = ready["parked"] + [ready["main"]]
        good, bad = 0, []
        for i in range(GIL_DUMPS):
            rc, out, err = remora.run(["dump", "-p", t.pid, "--json"])
            if rc != 0:
                bad.append("dump %d exited %d: %s" % (i + 1, rc, tail(err, 1)))
                continue
            try:
                doc = parse_dump(out)
            except Fail as e:
                bad.append("dump %d: %s" % (i + 1, e))
                continue
            got = {th.get("native_id"): th for th in doc["threads"]}
            wrong = []
            sp = got.get(ready["spinner"])
            if sp is None:
                wrong.append("spinner %d absent" % ready["spinner"])
            elif sp.get("gil") is not True or sp.get("on_cpu") is not True:
                wrong.append("spinner gil=%s on_cpu=%s" % (sp.get("gil"), sp.get("on_cpu")))
            for n in quiet:
                th = got.get(n)
                if th is None:
                    wrong.append("thread %d absent" % n)
                elif th.get("gil") is not False or th.get("on_cpu") is not False:
                    wrong.append("parked %d gil=%s on_cpu=%s"
                                 % (n, th.get("gil"), th.get("on_cpu")))
            if wrong:
                bad.append("dump %d: %s" % (i + 1, ", ".join(wrong)))
            else:
                good += 1
        if good < GIL_NEEDED:
            raise Fail("%d/%d dumps right, need %d (margin: one bad dump tolerated); %s"
                       % (good, GIL_DUMPS, GIL_NEEDED, "; ".join(bad[:3])))
        return "%d/%d dumps right" % (good, GIL_DUMPS)


# --- errors -----------------------------------------------------------------------------

def test_usage(remora):
    expect_failure(remora, ["dump"], 1, "`remora dump` without -p")
    expect_failure(remora, ["dump", "-p", "notapid"], 1, "`remora dump -p notapid`")
    expect_failure(remora, ["no-such-command"], 1, "`remora no-such-command`")
    expect_failure(remora, ["no-such-command", "--help"], 1, "`remora no-such-command --help`")
    for cmd in ("dump", "record", "top", "convert"):
        rc, out, err = remora.run([cmd, "--help"])
        if rc != 0 or not out.startswith("usage: remora %s" % cmd) or err:
            raise Fail("`remora %s --help`: exit %d, want 0 and the usage on stdout; stderr: %s"
                       % (cmd, rc, tail(err)))


def test_no_such_pid(remora):
    pid = free_pid()
    expect_failure(remora, ["dump", "-p", pid], 2, "pid %d (no such process)" % pid)
    expect_failure(remora, ["dump", "-p", pid, "--json"], 2,
                   "pid %d (no such process), --json" % pid)


def test_not_python(remora):
    sleeper = subprocess.Popen(["sleep", "100"])   # returns once sleep is exec'd
    try:
        expect_failure(remora, ["dump", "-p", sleeper.pid], 4, "`sleep 100`")
    finally:
        sleeper.kill()
        sleeper.wait()


def test_unsupported_version(remora, want, python):
    """A Python remora does not read: exit 4, one line naming the version found."""
    if not os.access(python, os.X_OK):
        raise Skip("interpreter %s not found" % python)
    with Target(("old-" + want, python, None), os.path.join(TARGETS, "idle.py"), "ready") as t:
        t.wait_ready()
        err = expect_failure(remora, ["dump", "-p", t.pid], 4, "Python %s target" % want)
        if "Python " + want not in err:
            raise Fail("the message does not name Python %s: %s" % (want, one_line(err) or err.strip()))


def test_permission(remora):
    if shutil.which("setpriv") is None:
        raise Skip("setpriv not installed")
    drop = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
    probe = subprocess.run(drop + ["true"], capture_output=True)
    if probe.returncode != 0:
        raise Skip("cannot switch to uid 65534: %s" % tail(probe.stderr.decode()))
    if not os.access(HOST_PYTHON, os.X_OK):
        raise Skip("%s not found" % HOST_PYTHON)
    bindir = tempfile.mkdtemp(prefix="remora-func-bin-")
    try:
        os.chmod(bindir, 0o755)
        binary = os.path.join(bindir, "remora")
        shutil.copy(remora.path, binary)
        os.chmod(binary, 0o755)
        interp = ("host-python3", HOST_PYTHON, None)
        with Target(interp, os.path.join(TARGETS, "known_stacks.py"), "truth.json") as t:
            t.wait_ready()
            err = expect_failure(remora, ["dump", "-p", t.pid], 3,
                                 "uid 65534 against a root target", prefix=drop,
                                 binary=binary)
            if "ptrace_scope" not in err and "CAP_SYS_PTRACE" not in err:
                raise Fail("stderr does not mention ptrace_scope or CAP_SYS_PTRACE: %s"
                           % err.strip())
    finally:
        shutil.rmtree(bindir, ignore_errors=True)


# A Python that starts threads, lets them work a little (argv[1] loop rounds) and exits.
SHORT_LIVED = """\
import sys, threading
n = int(sys.argv[1])
def work():
    s = 0
    for i in range(n):
        s += i
ts = [threading.Thread(target=work) for _ in range(4)]
for t in ts:
    t.start()
for t in ts:
    t.join()
"""


def test_exit_during_dump(remora):
    if not os.access(HOST_PYTHON, os.X_OK):
        raise Skip("%s not found" % HOST_PYTHON)
    codes = {}
    for attempt in range(EXIT_RACE_TARGETS):
        rounds = 10000 * 3 ** (attempt % 6)        # lifetimes from ~20 ms to ~300 ms
        proc = subprocess.Popen([HOST_PYTHON, "-I", "-c", SHORT_LIVED, str(rounds)],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        try:
            for dump in range(200):
                exited = proc.poll() is not None       # once reaped, one last dump
                rc, out, err = remora.run(["dump", "-p", proc.pid, "--json"])
                what = "target %d (attempt %d, dump %d)" % (proc.pid, attempt + 1, dump + 1)
                if rc not in (0, 2, 4):
                    raise Fail("%s: exit %d, want 0, 2 or 4; stderr: %s"
                               % (what, rc, tail(err)))
                if rc != 0:
                    bad = one_line(err)
                    if bad:
                        raise Fail("%s: exit %d, %s" % (what, rc, bad))
                else:
                    parse_dump(out)
                codes[rc] = codes.get(rc, 0) + 1
                if exited:
                    break
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
    return "%d targets, %d dumps, exits: %s" % (
        EXIT_RACE_TARGETS, sum(codes.values()),
        ", ".join("%d x%d" % (rc, n) for rc, n in sorted(codes.items())))


def tests(remora):
    """[(name, function, skip reason or None)] for run.py."""
    out = []
    for interp in INTERPRETERS:
        missing = interp_missing(interp)
        out.append(("known-stacks/" + interp[0],
                    lambda i=interp: test_known_stacks(remora, i), missing))
        out.append(("gil/" + interp[0], lambda i=interp: test_gil(remora, i), missing))
        out.append(("fold/" + interp[0], lambda i=interp: test_fold(remora, i), missing))
    return out + [
        ("errors/usage", lambda: test_usage(remora), None),
        ("errors/no-such-pid", lambda: test_no_such_pid(remora), None),
        ("errors/not-python", lambda: test_not_python(remora), None),
    ] + [
        ("errors/unsupported-version/" + v, lambda v=v, p=p: test_unsupported_version(remora, v, p), None)
        for v, p in OLD_PYTHONS
    ] + [
        ("errors/permission", lambda: test_permission(remora), None),
        ("errors/exit-during-dump", lambda: test_exit_during_dump(remora), None),
    ]
