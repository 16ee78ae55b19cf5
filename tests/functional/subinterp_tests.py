# Subinterpreter tests (issue 17): a thread that runs code in a subinterpreter has a
# thread state in each interpreter, and remora reads both. The target
# (tests/targets/subinterp.py) parks a thread of the main interpreter, a thread inside a
# subinterpreter (whose state in the main interpreter waits in the call that entered it)
# and the main thread, and writes each state's frames and interpreter id as the target
# itself reports them. On every interpreter whose build can run code in a subinterpreter:
#   dump --json  exactly those states: (native id, interpreter) -> main flag and frames
#   dump         "interpreter N" on every thread block (there is more than one)
#   record       the subinterpreter's thread gets its own samples, labelled
#                "[interpreter N]", every one its parked stack; 0 errors in all

import os
import re

from harness import (INTERPRETERS, TARGETS, Fail, Skip, Target, interp_missing, record,
                     simple_frames, summary, tail, thread_diff, workdir)
from formats import parse_collapsed

ORDER = 240           # where run.py runs these tests among the modules' (ascending)

RECORD_S = "0.5"
LABEL = re.compile(r" \[interpreter (\d+)\]$")


def parked(t, truth):
    """Waits until every thread is blocked in its own system call."""
    t.wait_main_in_read()
    for th in truth["threads"]:
        if not th["main"]:
            t.wait_thread_parked(th["native_id"])


def key(th):
    return (th.get("native_id"), th.get("interpreter"))


def test_dump(remora, interp):
    with Target(interp, os.path.join(TARGETS, "subinterp.py"), "truth.json") as t:
        truth = t.wait_ready()
        if "skip" in truth:
            raise Skip(truth["skip"])
        parked(t, truth)
        sub = [th for th in truth["threads"] if th["role"] == "sub"][0]
        if sub["current"] is not None and sub["current"] != sub["interpreter"]:
            raise Fail("target: the subinterpreter says it is %r, create() said %r"
                       % (sub["current"], sub["interpreter"]))
        rc, out, err = remora.run(["dump", "-p", t.pid, "--json"])
        if rc != 0:
            raise Fail("`remora dump --json` exited %d: %s" % (rc, tail(err)))
        import json
        doc = json.loads(out)
        got = {}
        problems = []
        for th in doc["threads"]:
            if key(th) in got:
                problems.append("two states of thread %d in interpreter %r" % key(th))
            got[key(th)] = th
        want = {key(th): th for th in truth["threads"]}
        missing = sorted(set(want) - set(got), key=str)
        extra = sorted(set(got) - set(want), key=str)
        if missing:
            problems.append("states missing (native id, interpreter): %s" % missing)
        if extra:
            problems.append("unexpected states: %s" % extra)
        diff = []
        for k, th in want.items():
            g = got.get(k)
            if g is None:
                continue
            if g.get("error"):
                problems.append("%s (%s): error %r" % (k, th["role"], g["error"]))
            if g.get("main") is not th["main"]:
                problems.append("%s (%s): main is %r" % (k, th["role"], g.get("main")))
            if simple_frames(g.get("frames", [])) != th["frames"]:
                problems.append("%s (%s): frames differ" % (k, th["role"]))
                if not diff:
                    diff = thread_diff(th, g)
        rc, text, err = remora.run(["dump", "-p", t.pid])
        if rc != 0:
            problems.append("text `remora dump` exited %d: %s" % (rc, tail(err)))
        else:
            heads = re.findall(r"^Thread (\d+) \"[^\n]*\" interpreter (\d+)", text, re.M)
            blocks = len(re.findall(r"^Thread ", text, re.M))
            if sorted((int(a), int(b)) for a, b in heads) != sorted(want):
                problems.append("text dump's thread blocks name (thread, interpreter) %s of %d "
                                "blocks, want %s" % (sorted(heads), blocks, sorted(want)))
        if problems:
            raise Fail("; ".join(problems) + ("\n" + "\n".join("    " + l for l in diff)
                                              if diff else ""))


def test_record(remora, interp):
    with Target(interp, os.path.join(TARGETS, "subinterp.py"), "truth.json") as t:
        truth = t.wait_ready()
        if "skip" in truth:
            raise Skip(truth["skip"])
        parked(t, truth)
        path = os.path.join(workdir(), "subinterp-%s.collapsed" % interp[0])
        out, err = record(remora, ["-p", t.pid, "-d", RECORD_S, "--idle", "-o", path])
        s = summary(err)
        stacks = parse_collapsed(path)
    problems = []
    if s.errors:
        problems.append("%d errors (%s)" % (s.errors, s))
    want = {key(th): th for th in truth["threads"]}
    seen = {}
    for st in stacks:
        m = LABEL.search(st.name)
        k = (st.tid, int(m.group(1)) if m else 0)
        if k not in want:
            problems.append("samples of an unknown state %s (%r)" % (k, st.name))
            continue
        frames = [{"function": f[0], "file": f[1], "line": f[2]} for f in reversed(st.frames)]
        if frames != want[k]["frames"] and st.frames[-1][0] != "<moving>":
            problems.append("%d samples of %s (%s) at another stack: %s" % (
                st.count, k, want[k]["role"], ";".join(f[0] for f in st.frames)))
        seen[k] = seen.get(k, 0) + st.count
    for k, th in want.items():
        if seen.get(k, 0) < s.samples / max(1, len(want)) / 4:
            problems.append("state %s (%s) has %d samples of %d" % (k, th["role"], seen.get(k, 0),
                                                                 s.samples))
    if problems:
        raise Fail("; ".join(problems[:6]))
    sub = [k for k, th in want.items() if th["role"] == "sub"][0]
    return "%d samples; the subinterpreter's thread %d" % (s.samples, seen.get(sub, 0))


def tests(remora):
    out = []
    for interp in INTERPRETERS:
        missing = interp_missing(interp)
        out.append(("subinterp/dump/" + interp[0], lambda i=interp: test_dump(remora, i), missing))
        out.append(("subinterp/record/" + interp[0], lambda i=interp: test_record(remora, i),
                    missing))
    return out
