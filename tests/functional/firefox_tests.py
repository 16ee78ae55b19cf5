# Functional tests of the Firefox Profiler output (`-o FILE.gecko.json`, `-f firefox`),
# run by run.py:
#
#   record/firefox/INTERP  odd_names.py recorded to the Firefox format, collapsed and
#                          .remora at once: the file, read by formats.firefox_stacks
#                          (every table's columns as long as its length, every index in
#                          range, prefixes before their stacks), holds per thread the same
#                          stacks and counts as the collapsed file, sample times in order
#                          within the recording, the odd thread and function named as the
#                          target holds them (its ready.json); the .remora converted to the
#                          format gives the same stacks; collapsed stacks (no times) are
#                          refused: exit 1.
#   record/firefox-gil/INTERP  gil_contend.py (two spinners, a sleeper, main parked): the
#                          "Holds GIL" markers give each spinner 20-80% of the recording,
#                          the others none, and no two threads the GIL at once.
#   record/firefox-profiler  the file loaded by the Firefox Profiler's own code (its
#                          command-line client, tests/firefox: `npm ci`): every thread's
#                          call tree must count the same samples under the same function
#                          names as the collapsed file; skipped when node/npm are missing.

import os
import shutil

from harness import (INTERPRETERS, SHORT_SECONDS, TARGETS, Fail, Target, check_odd_names,
                     expect_failure, interp_missing, interpreter, odd_recording,
                     profiler_call_trees, profiler_cli, record, tail, workdir)
from formats import (by_thread, firefox_stacks, first_difference, gil_markers, load_json,
                     parse_collapsed, plain_frame)

ORDER = 110           # where run.py runs these tests among the modules' (ascending)

PROFILER_INTERP = "pyenv-3.12.1"      # the format does not depend on the version
GIL_INTERPRETERS = ("pyenv-3.9.18", "pyenv-3.12.1", "sid-3.15")


def judge_firefox(path, collapsed, ready):
    doc = load_json(path)
    got, names, times = firefox_stacks(doc)
    got = {tid: c for tid, c in got.items() if sum(c.values())}
    stacks = parse_collapsed(collapsed)
    want = by_thread(stacks, plain_frame)
    if got != want:
        raise Fail("the Firefox file and the collapsed file of one recording differ: %s"
                   % first_difference(got, want))
    limit = (SHORT_SECONDS + 0.5) * 1000
    for tid, ts in times.items():
        if any(b < a for a, b in zip(ts, ts[1:])) or any(not 0 <= t <= limit for t in ts):
            raise Fail("thread %d: sample times out of order or outside 0..%.0f ms" % (tid, limit))
    if names.get(ready["odd"]) != ready["thread_name"]:
        raise Fail("the odd thread is named %r, want %r" % (names.get(ready["odd"]), ready["thread_name"]))
    check_odd_names(stacks, ready)
    odd = (ready["function"], ready["file"])
    if not any(f[:2] == odd for st in got.get(ready["odd"], {}) for f in st):
        raise Fail("no frame %r in the odd thread's samples" % (odd,))
    return got


def test_firefox(remora, interp):
    d, ready = odd_recording(remora, interp, ["rec.gecko.json", "rec.collapsed", "rec.remora"])
    try:
        got = judge_firefox(os.path.join(d, "rec.gecko.json"), os.path.join(d, "rec.collapsed"), ready)
        conv = os.path.join(d, "converted.gecko.json")
        rc, _, err = remora.run(["convert", os.path.join(d, "rec.remora"), "-o", conv])
        if rc != 0:
            raise Fail("`remora convert rec.remora -o converted.gecko.json` exited %d: %s" % (rc, tail(err)))
        back, _, _ = firefox_stacks(load_json(conv))
        back = {tid: c for tid, c in back.items() if sum(c.values())}
        if back != got:
            raise Fail("converted and recorded Firefox files differ: %s" % first_difference(back, got))
        # collapsed stacks have no times: one line, exit 1, no file
        bad = os.path.join(d, "from-collapsed.gecko.json")
        err = expect_failure(remora, ["convert", os.path.join(d, "rec.collapsed"), "-o", bad], 1,
                             "converting collapsed stacks to the Firefox format")
        if os.path.exists(bad) or "recording" not in err:
            raise Fail("converting collapsed stacks: %s, file %s" % (
                err.strip(), "written" if os.path.exists(bad) else "not written"))
        return "%d threads, %d samples; same stacks as collapsed; converted the same" % (
            len(got), sum(sum(c.values()) for c in got.values()))
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_gil(remora, interp):
    """gil_contend.py: two spinners take turns with the GIL, a sleeper and main never hold
    it. The Firefox file's "Holds GIL" markers: each spinner holds it for 20-80% of the
    recording, the others never, and no two threads' intervals overlap (the GIL is one)."""
    d = workdir()
    try:
        with Target(interp, os.path.join(TARGETS, "gil_contend.py"), "ready.json") as t:
            ready = t.wait_ready()
            # the sleeper says it started before it reaches time.sleep(), and may still
            # hold the GIL on its way there: wait until it and main are parked in C
            t.wait_main_in_read()
            t.wait_thread_parked(ready["sleeper"])
            path = os.path.join(d, "gil.gecko.json")
            # every thread (--idle): the sleeper and main are read and must hold no GIL
            record(remora, ["-p", t.pid, "-d", 1, "--idle", "-o", path])
        spans = gil_markers(load_json(path))
        notes, problems = [], []
        for tid in ready["spinners"]:
            held = sum(b - a for a, b in spans.get(tid, [])) / 1000.0
            notes.append("spinner %d %.0f%%" % (tid, 100 * held))
            if not 0.2 <= held <= 0.8:
                problems.append("spinner %d holds the GIL %.0f%% of 1 s by its markers" % (tid, 100 * held))
        for tid in (ready["sleeper"], ready["main"]):
            if spans.get(tid):
                problems.append("thread %d never holds the GIL but has %d markers" % (tid, len(spans[tid])))
        flat = sorted((a, b, tid) for tid, ss in spans.items() for a, b in ss)
        for (a1, b1, t1), (a2, b2, t2) in zip(flat, flat[1:]):
            if t1 != t2 and a2 < b1 - 1e-6:
                problems.append("threads %d and %d both hold the GIL at %.3f ms" % (t1, t2, a2))
                break
        if problems:
            raise Fail("; ".join(problems))
        return ", ".join(notes) + "; %d intervals, none overlapping" % len(flat)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_profiler(remora, interp):
    cli = profiler_cli()
    d, ready = odd_recording(remora, interp, ["rec.gecko.json", "rec.collapsed"])
    try:
        got = profiler_call_trees(cli, os.path.join(d, "rec.gecko.json"), d)
        stacks = parse_collapsed(os.path.join(d, "rec.collapsed"))
        want = by_thread(stacks, lambda f: f[0])
        if got != want:
            tids = sorted(set(got) | set(want))
            diffs = ["thread %d: %d samples in the profiler, %d in collapsed"
                     % (t, sum(got.get(t, {}).values()), sum(want.get(t, {}).values()))
                     for t in tids if got.get(t) != want.get(t)]
            raise Fail("the Firefox Profiler reads other stacks than the collapsed file's: %s"
                       % "; ".join(diffs[:4] or [first_difference(got, want)]))
        return "the profiler reads %d threads, %d samples, the same call trees" % (
            len(got), sum(sum(c.values()) for c in got.values()))
    finally:
        shutil.rmtree(d, ignore_errors=True)


def tests(remora):
    """[(name, function, skip reason or None)] for run.py."""
    pi = interpreter(PROFILER_INTERP)
    return [("record/firefox/%s" % i[0], lambda i=i: test_firefox(remora, i), interp_missing(i))
            for i in INTERPRETERS] + [
        ("record/firefox-profiler", lambda: test_profiler(remora, pi), interp_missing(pi)),
    ] + [("record/firefox-gil/%s" % i[0], lambda i=i: test_gil(remora, i), interp_missing(i))
         for i in INTERPRETERS if i[0] in GIL_INTERPRETERS]
