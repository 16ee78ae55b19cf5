# Functional tests of --subprocesses (run by run.py). tests/targets/subprocs.py starts a
# child by fork, one by spawn (a fresh interpreter) which forks a grandchild, and, when
# told, a late child by fork; each spins in a function named after it and reports its own
# pid and thread id (the ground truth).
#
#   record/subprocesses/INTERP  `record -p MAIN --subprocesses -d 3`, its stderr on a
#       pseudo-terminal: once remora's status line shows it sampling, the target is told
#       to start the late child. Every child (the grandchild and the late one too) must
#       have samples under its own thread id, at least SUB_MIN, and at least SUB_SHARE of
#       them inside its own function, its thread named "... [pid P]" after its process;
#       without --subprocesses no child's thread appears.
#   dump/subprocesses/INTERP  `dump -p MAIN --subprocesses --json` gives one object per
#       process, the target's first, and every child's thread with its own function on
#       its stack; without the flag, the usual single object; with --core, exit 1.

import collections
import json
import os
import shutil

from harness import (INTERPRETERS, TARGETS, Fail, Recording, Target, expect_failure, interp_missing,
                     record, tail, workdir)
from formats import parse_collapsed

ORDER = 150           # where run.py runs these tests among the modules' (ascending)

SUB_INTERPRETERS = ("pyenv-3.9.18", "pyenv-3.12.1", "pyenv-3.13.0", "sid-3.15")
SUB_SECONDS = 3
SUB_MIN = 20              # samples of each child (3 s at 1 kHz: ~3000 for the early ones)
SUB_SHARE = 0.9           # a spinning child is in its own function but while it reports


def record_with_late_child(remora, t, path):
    """Records with --subprocesses; once remora's status line shows it sampling, starts the
    late child. Returns remora's stderr and the late child's report."""
    rec = Recording(remora, ["-p", t.pid, "--subprocesses", "-d", SUB_SECONDS, "-o", path])
    try:
        rec.wait_sampled(1)
        t.proc.stdin.write(b"late\n")
        t.proc.stdin.flush()
        late = t.wait_file(".late")
        rc, _, err = rec.finish()
    finally:
        rec.close()
    if rc != 0:
        raise Fail("`remora record --subprocesses` exited %d: %s" % (rc, tail(err)))
    return err, late


def test_subprocesses(remora, interp):
    d = workdir()
    try:
        with Target(interp, os.path.join(TARGETS, "subprocs.py"), "ready.json") as t:
            ready = t.wait_ready()
            path = os.path.join(d, "sub.collapsed")
            err, late = record_with_late_child(remora, t, path)
            kids = dict(ready["children"], **late["children"])
            stacks = parse_collapsed(path)
            by_tid = collections.defaultdict(lambda: [0, 0])
            names = {s.tid: s.name for s in stacks}
            for s in stacks:
                by_tid[s.tid][0] += s.count
                if s.tid in [k["tid"] for k in kids.values()]:
                    name = next(n for n, k in kids.items() if k["tid"] == s.tid)
                    if name in s.functions():
                        by_tid[s.tid][1] += s.count
            notes, problems = [], []
            for name, k in sorted(kids.items()):
                n, inside = by_tid.get(k["tid"], (0, 0))
                notes.append("%s %d/%d" % (name, inside, n))
                if n < SUB_MIN or inside < SUB_SHARE * n:
                    problems.append("%s (pid %d): %d samples, %d in %s()" % (name, k["pid"], n, inside, name))
                elif not names.get(k["tid"], "").endswith(" [pid %d]" % k["pid"]):
                    problems.append("%s's thread is named %r, not after its pid %d" % (name, names.get(k["tid"]), k["pid"]))
            if problems:
                raise Fail("%s [%s]" % ("; ".join(problems), " ".join(err.split())[-200:]))
            # without the flag, the children are not sampled
            plain = os.path.join(d, "plain.collapsed")
            record(remora, ["-p", t.pid, "-d", 0.5, "-o", plain])
            strays = {s.tid for s in parse_collapsed(plain)} & {k["tid"] for k in kids.values()}
            if strays:
                raise Fail("without --subprocesses, children's threads %s were sampled" % sorted(strays))
        return "samples in own function/all: " + ", ".join(notes)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_dump(remora, interp):
    """`dump -p MAIN --subprocesses --json`: one object per process, the target's first;
    every child's thread is there with the child's own function on its stack."""
    with Target(interp, os.path.join(TARGETS, "subprocs.py"), "ready.json") as t:
        ready = t.wait_ready()
        rc, out, err = remora.run(["dump", "-p", t.pid, "--subprocesses", "--json"])
        if rc != 0:
            raise Fail("`remora dump --subprocesses --json` exited %d: %s" % (rc, tail(err)))
        try:
            procs = json.loads(out)["processes"]
        except (ValueError, KeyError, TypeError) as e:
            raise Fail("not a JSON object with processes: %s: %s" % (e, out[:200]))
        if not procs or procs[0].get("pid") != t.pid:
            raise Fail("the first process is %r, want the target %d" % (procs[0].get("pid") if procs else None, t.pid))
        threads = {th["native_id"]: th for p in procs for th in p["threads"]}
        problems = []
        for name, k in sorted(ready["children"].items()):
            th = threads.get(k["tid"])
            if th is None:
                problems.append("%s (pid %d): not dumped" % (name, k["pid"]))
            elif name not in [f["function"] for f in th["frames"]]:
                problems.append("%s (pid %d): frames %s" % (name, k["pid"], [f["function"] for f in th["frames"]]))
        if problems:
            raise Fail("; ".join(problems))
        rc, out, err = remora.run(["dump", "-p", t.pid, "--json"])
        plain = json.loads(out) if rc == 0 else {}
        if rc != 0 or "processes" in plain or plain.get("pid") != t.pid:
            raise Fail("without --subprocesses: exit %d, %s" % (rc, out[:200]))
        expect_failure(remora, ["dump", "--core", "/nonexistent", "--subprocesses"], 1,
                       "`dump --core ... --subprocesses`")
    return "%d processes dumped, every child in its own function" % len(procs)


def tests(remora):
    """[(name, function, skip reason or None)] for run.py."""
    return [("record/subprocesses/%s" % i[0], lambda i=i: test_subprocesses(remora, i), interp_missing(i))
            for i in INTERPRETERS if i[0] in SUB_INTERPRETERS] + \
           [("dump/subprocesses/%s" % i[0], lambda i=i: test_dump(remora, i), interp_missing(i))
            for i in INTERPRETERS if i[0] in SUB_INTERPRETERS]
