# Call-kinds test: every way CPython enters a Python function, read still.
#
# tests/targets/call_kinds.py parks one thread per way of entering a Python function (a
# plain call, property, __getitem__, __getattribute__, __init__, generators under `for`
# and next(), await, *args/**kwargs, keywords, decorators, sorted(key=), __call__, an
# operator, `with`, a class body, super().__init__), after warming each path so the
# interpreter has specialized it, then writes the ground truth from sys._current_frames().
# Nothing moves afterwards. remora's consistency checks (the torn-stack defences in
# src/unwind/fast.c) must accept every one of these stacks: `remora dump` equals the
# truth frame for frame, and a `remora record` in wall mode has no errors and reports,
# for every thread in every round, exactly the thread's true stack.

import os

from harness import INTERPRETERS, TARGETS, Fail, Target, interp_missing, record, summary, tail
from formats import parse_collapsed

ORDER = 40            # where run.py runs these tests among the modules' (ascending)

RATE, SECONDS = 500, 1


def frames_key(frames):
    return [(f["function"], f["file"], f["line"]) for f in frames]


def test_call_kinds(remora, interp, extra=()):
    import json
    with Target(interp, os.path.join(TARGETS, "call_kinds.py"), "truth.json") as t:
        truth = t.wait_ready()
        t.wait_main_in_read()
        want = {th["native_id"]: th for th in truth["threads"]}
        problems = []

        rc, out, err = remora.run(["dump", "-p", t.pid, "--json"])
        if rc != 0:
            raise Fail("`remora dump --json` exited %d: %s" % (rc, tail(err)))
        got = {th.get("native_id"): th for th in json.loads(out)["threads"]}
        bad = [want[n]["name"] for n in want
               if n not in got or frames_key(got[n].get("frames", [])) != frames_key(want[n]["frames"])]
        if bad:
            problems.append("dump differs from the truth in: " + ", ".join(sorted(bad)))

        path = os.path.join(t.dir, "kinds.collapsed")
        # every thread is parked: --idle keeps them
        _, err = record(remora, ["-p", t.pid, "-r", RATE, "-d", SECONDS, "--idle", "-o", path]
                        + list(extra))
        summ = summary(err, RATE)
        if summ.errors:
            problems.append("record: %d of %d samples were errors (still stacks rejected)"
                            % (summ.errors, summ.samples))
        stacks = parse_collapsed(path)
        per_thread = {}
        for s in stacks:
            per_thread.setdefault(s.tid, []).append(s)
        counts = set()
        for n, th in want.items():
            mine = per_thread.get(n, [])
            truth_stack = [f["function"] for f in reversed(th["frames"])]
            wrong = [s for s in mine if s.functions() != truth_stack]
            if not mine:
                problems.append("record: thread %s never sampled" % th["name"])
            elif wrong:
                problems.append("record: thread %s has %d samples of another stack, e.g. %s"
                                % (th["name"], sum(s.count for s in wrong),
                                   ";".join(wrong[0].functions())))
            counts.add(sum(s.count for s in mine))
        extra = sorted(set(per_thread) - set(want))
        if extra:
            problems.append("record: threads the target does not have: %s" % extra)
        if len(counts) > 1:
            problems.append("record: threads sampled unevenly (%s samples each), want every "
                            "thread in every round" % sorted(counts))
        if problems:
            raise Fail("; ".join(problems))
        return "%d threads, %d rounds, %s" % (len(want), max(counts) if counts else 0, summ)


def tests(remora):
    out = [("call-kinds/" + i[0], lambda i=i: test_call_kinds(remora, i), interp_missing(i))
           for i in INTERPRETERS]
    # 3.15 with --frame-anchor: the frames below the anchor come from remora's memory
    out += [("call-kinds-anchor/" + i[0], lambda i=i: test_call_kinds(remora, i, ["--frame-anchor"]),
             interp_missing(i)) for i in INTERPRETERS if i[0] in ("sid-3.15", "sid-3.15-pie")]
    return out
