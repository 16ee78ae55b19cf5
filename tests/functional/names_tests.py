# Functional tests of Python thread names (threading.Thread.name), run by run.py:
#
#   names/dump/INTERP    thread_names.py held: `dump` and `dump --json` name every thread
#                        of threading.enumerate() as the target does (ASCII, non-ASCII,
#                        200 characters, odd characters), the _thread.start_new_thread
#                        one as the kernel does (its comm); after the target renames a
#                        thread (on a line on stdin) a new dump shows the new name.
#   names/record/INTERP  thread_names.py launched under `record --idle` into collapsed,
#                        speedscope, Firefox and pprof files at once: each names the
#                        threads as the target does, the renamed thread under its name
#                        before the rename and after it (each with samples), and nothing
#                        else; the .remora recording converted to collapsed says the same.

import collections
import json
import os
import re
import shutil
import time

from harness import (INTERPRETERS, TARGETS, Fail, Target, interp_missing, record, summary, tail,
                     workdir)
from formats import (dump_json_stacks, dump_text_stacks, firefox_stacks, load_json,
                     parse_collapsed, parse_dump, read_pprof, pprof_stacks)

ORDER = 170           # where run.py runs these tests among the modules' (ascending)

SCRIPT = os.path.join(TARGETS, "thread_names.py")


def kernel_name(pid, tid):
    try:
        with open("/proc/%d/task/%d/comm" % (pid, tid)) as f:
            return f.read().rstrip("\n")
    except OSError as e:
        raise Fail("cannot read thread %d's comm: %s" % (tid, e))


def want_names(ready):
    """{tid: name} the target reports (threading.enumerate()), its raw thread's comm."""
    want = {t["native_id"]: t["name"] for t in ready["threads"]}
    want[ready["raw"]] = ready["raw_name"] or kernel_name(ready["pid"], ready["raw"])
    return want


def compare(what, got, want):
    bad = ["thread %d: %r, want %r" % (tid, got.get(tid), name)
           for tid, name in sorted(want.items()) if got.get(tid) != name]
    extra = sorted(set(got) - set(want))
    if extra:
        bad.append("threads %r not in the target" % extra)
    if bad:
        raise Fail("%s: %s" % (what, "; ".join(bad)))


def dumps(remora, pid):
    rc, out, err = remora.run(["dump", "-p", str(pid)], raw=True)
    if rc != 0:
        raise Fail("dump exited %d: %s" % (rc, tail(err)))
    text, _ = dump_text_stacks("dump", out)
    rc, out, err = remora.run(["dump", "--json", "-p", str(pid)])
    if rc != 0:
        raise Fail("dump --json exited %d: %s" % (rc, tail(err)))
    js, _ = dump_json_stacks(parse_dump(out))
    return text, js


def test_dump(remora, interp):
    with Target(interp, SCRIPT, "ready.json", ["hold"]) as t:
        ready = t.wait_ready()
        want = want_names(ready)
        text, js = dumps(remora, t.pid)
        compare("dump", text, want)
        compare("dump --json", js, want)
        t.proc.stdin.write(b"rename\n")
        t.proc.stdin.flush()
        after = t.wait_file(".renamed")
        want = want_names(after)
        text, js = dumps(remora, t.pid)
        compare("dump after the rename", text, want)
        compare("dump --json after the rename", js, want)
        return "%d threads named; renamed %r" % (len(want), want[ready["renamed"]])


def names_of(pairs):
    """{tid: set of names} from (tid, name) pairs."""
    out = collections.defaultdict(set)
    for tid, name in pairs:
        out[tid].add(name)
    return dict(out)


def check_named(what, got, before, after, renamed):
    """got {tid: set of names}: every thread as the target named it; the renamed one under
    its old and new names (both: each phase lasted 1.5 s, three registry readings)."""
    problems = []
    for tid, name in sorted(after.items()):
        want = {before[tid], name} if tid == renamed else {name}
        if tid == renamed:
            want = {before[tid], after[tid]}
        if got.get(tid, set()) != want:
            problems.append("thread %d named %r, want %r" % (tid, sorted(got.get(tid, ())),
                                                             sorted(want)))
    if problems:
        raise Fail("%s: %s" % (what, "; ".join(problems)))


def test_record(remora, interp):
    d = workdir()
    try:
        with Target(interp, SCRIPT, "ready.json", spawn=False) as t:
            outs = {k: os.path.join(d, "rec." + k) for k in
                    ("collapsed", "speedscope.json", "gecko.json", "pb.gz", "remora")}
            args = ["--idle"]
            for k in outs:
                args += ["-o", outs[k]]
            record(remora, args + ["--"] + t.argv + ["phases"])
            with open(t.host_path(t.out)) as f:
                ready = json.load(f)
            with open(t.host_path(t.out) + ".renamed") as f:
                renamed = json.load(f)
        before, after = want_names(ready), want_names(renamed)
        # the target's main thread and the parked ones are there from the start
        tid = ready["renamed"]
        stacks = parse_collapsed(outs["collapsed"])
        col = names_of((s.tid, s.name) for s in stacks)
        for k in list(col):
            if k not in after:
                del col[k]          # threads of the interpreter's start or end, if any
        check_named("collapsed", col, before, after, tid)
        counts = collections.Counter((s.tid, s.name) for s in stacks for _ in range(s.count))
        doc = load_json(outs["speedscope.json"])
        import formats
        sp = names_of((int(m.group(2)), m.group(1)) for m in
                      (formats.THREAD.match(p.get("name", "")) for p in doc["profiles"]) if m)
        check_named("speedscope", {k: v for k, v in sp.items() if k in after}, before, after, tid)
        ff = load_json(outs["gecko.json"])
        firefox_stacks(ff)          # well formed
        fx = names_of((th["tid"], th["name"]) for th in ff["threads"])
        check_named("firefox", {k: v for k, v in fx.items() if k in after}, before, after, tid)
        _, pp = pprof_stacks(read_pprof(outs["pb.gz"]))
        check_named("pprof", {k: v for k, v in pp.items() if k in after}, before, after, tid)
        conv = os.path.join(d, "conv.collapsed")
        rc, _, err = remora.run(["convert", outs["remora"], "-f", "collapsed", "-o", conv])
        if rc != 0:
            raise Fail("convert exited %d: %s" % (rc, tail(err)))
        cv = names_of((s.tid, s.name) for s in parse_collapsed(conv))
        check_named("converted .remora", {k: v for k, v in cv.items() if k in after},
                    before, after, tid)
        return "renamed thread: %d samples as %r, %d as %r" % (
            counts[(tid, before[tid])], before[tid], counts[(tid, after[tid])], after[tid])
    finally:
        shutil.rmtree(d, ignore_errors=True)


REGISTRY = os.path.join(TARGETS, "thread_registry.py")
BIG = 10000                 # dummy entries in threading._active
CHURN_DUMPS = 20
CHURN_RECORD = "1.5"        # seconds: three periodic readings of the registry at least
NAMES_LINE = re.compile(r"^names: readings=(\d+) reads=(\d+) scans=(\d+) torn=(\d+) "
                        r"unscanned=(\d+) us=(\d+)$", re.M)
# Reads one registry reading may make with BIG dummies and a handful of threads: the scan
# (16 chunks at most), sys.modules and threading's dict, a few vectored reads per step,
# four scans if it moved. A reading that followed every entry would make ~BIG.
MAX_READS_PER_READING = 400


MOVING = "<moving>"         # a thread renamed all the while its name was read: unknown, said so


def allowed(ready):
    """{tid: set of names} the target gave each real thread, and MOVING (the honest unknown
    of a name that kept changing while read; never the kernel's name, which those threads
    no longer have)."""
    return {int(k): set(v) | {MOVING} for k, v in ready["names"].items()}


def check_allowed(what, got, names):
    """got {tid: name or set of names}: every real thread there, each under names it had,
    and no other thread."""
    bad = []
    for tid, ok in sorted(names.items()):
        g = got.get(tid)
        gs = g if isinstance(g, set) else {g}
        if g is None or not gs <= ok:
            bad.append("thread %d: %r, want one of %r" % (tid, g if not isinstance(g, set) else
                                                          sorted(g), sorted(ok)[:4]))
    extra = sorted(set(got) - set(names))
    if extra:
        bad.append("threads %r not in the target" % extra)
    if bad:
        raise Fail("%s: %s" % (what, "; ".join(bad)))


def dump_json_names(remora, pid):
    """{tid: name} of `dump --json -p PID`, and the seconds it took."""
    t0 = time.monotonic()
    rc, out, err = remora.run(["dump", "--json", "-p", str(pid)])
    took = time.monotonic() - t0
    if rc != 0:
        raise Fail("dump --json exited %d: %s" % (rc, tail(err)))
    names, _ = dump_json_stacks(parse_dump(out))
    return names, took


def record_names(remora, pid, d, secs="0.5"):
    """{tid: set of names} of `record --idle -d SECS --stats -o x.collapsed -p PID`, with
    its summary and the numbers of its names: line."""
    out = os.path.join(d, "x.collapsed")
    _, err = record(remora, ["-p", pid, "--idle", "-d", secs, "--stats", "-o", out])
    s = summary(err)
    m = NAMES_LINE.search(err)
    if m is None:
        raise Fail("no `names: readings=...` line with --stats: %s" % tail(err))
    return names_of((st.tid, st.name) for st in parse_collapsed(out)), s, [int(x) for x in m.groups()]


def test_big_registry(remora, interp):
    """BIG dummy entries ahead of the real threads in threading._active: every real
    thread named as the target names it, by dump --json and by record; the cost of one
    dump and of one registry reading against the same target with an empty registry
    (measured, not asserted)."""
    d = workdir()
    try:
        times, cost = {}, {}
        for n in (0, BIG):
            with Target(interp, REGISTRY, "ready.json", ["hold", n]) as t:
                ready = t.wait_ready()
                want = want_of(ready)
                got, took = dump_json_names(remora, t.pid)
                compare("dump --json, %d dummies" % n, got, want)
                times[n] = [took] + [dump_json_names(remora, t.pid)[1] for _ in range(4)]
                rec, s, (readings, reads, scans, torn, unscanned, us) = record_names(remora, t.pid, d)
                compare("record, %d dummies" % n,
                        {k: (v.pop() if len(v) == 1 else v) for k, v in rec.items() if k in want},
                        want)
                if s.errors:
                    raise Fail("record, %d dummies: %s" % (n, s))
                if readings == 0 or reads > MAX_READS_PER_READING * readings or unscanned:
                    raise Fail("record: %d registry readings made %d reads (%d unscanned)"
                               % (readings, reads, unscanned))
                # never per sample: the first reading, one every 0.5 s, and the three
                # re-readings a thread not named yet may cause
                if readings > 1 + 1 + 3 or s.samples < 10 * readings:
                    raise Fail("record: %d registry readings for %d samples in 0.5 s"
                               % (readings, s.samples))
                cost[n] = (reads / readings, us / readings, readings, s.samples)
        med = {n: sorted(v)[len(v) // 2] for n, v in times.items()}
        return ("%d threads named among %d dummies; dump %.1f ms vs %.1f ms with none (median "
                "of 5); a reading %.0f reads %.0f us vs %.0f reads %.0f us; record: %d samples, "
                "%d readings" % (len(want), BIG, med[BIG] * 1e3, med[0] * 1e3, cost[BIG][0],
                                 cost[BIG][1], cost[0][0], cost[0][1], cost[BIG][3], cost[BIG][2]))
    finally:
        shutil.rmtree(d, ignore_errors=True)


def want_of(ready):
    """{tid: name} of the target's real threads (threading.enumerate() with a native_id)."""
    return {t["native_id"]: t["name"] for t in ready["threads"]}


def test_churn(remora, interp):
    """threading._active changing all the time (entries added and removed, the table
    rebuilt, dummies freed, a real thread renamed): every name dump and record show is
    one the target gave that thread."""
    d = workdir()
    try:
        with Target(interp, REGISTRY, "ready.json", ["churn", 0]) as t:
            ready = t.wait_ready()
            names = allowed(ready)
            named = collections.Counter()
            moving = 0
            for i in range(CHURN_DUMPS):
                got, _ = dump_json_names(remora, t.pid)
                check_allowed("dump --json %d of %d" % (i + 1, CHURN_DUMPS), got, names)
                named.update(tid for tid, name in got.items() if name != MOVING)
                moving += sum(name == MOVING for name in got.values())
            # MOVING is honest, not an answer: every thread named in some dump (a reader
            # that said MOVING for the renamed thread as often as measured with one round
            # of following instead of 16, 37% of dumps, fails this twice in 10^9 runs)
            never = sorted(tid for tid in names if named[tid] == 0)
            if never:
                raise Fail("threads %r named %r in all %d dumps" % (never, MOVING, CHURN_DUMPS))
            rec, s, (readings, reads, scans, torn, unscanned, us) = record_names(remora, t.pid, d,
                                                                            CHURN_RECORD)
            check_allowed("record", {k: v for k, v in rec.items() if k in names}, names)
            # (errors, if any, are the churner's stack moving as it was read: not names')
            return "%d dumps, each thread named as the target did (%d names %s); record: %d " \
                   "readings, %d scans, %d threads torn, %d sampling errors" % (
                       CHURN_DUMPS, moving, MOVING, readings, scans, torn, s.errors)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def tests(remora):
    """[(name, function, skip reason or None)] for run.py."""
    return [("names/dump/%s" % i[0], lambda i=i: test_dump(remora, i), interp_missing(i))
            for i in INTERPRETERS] + [
        ("names/record/%s" % i[0], lambda i=i: test_record(remora, i), interp_missing(i))
        for i in INTERPRETERS] + [
        ("names/big-registry/%s" % i[0], lambda i=i: test_big_registry(remora, i), interp_missing(i))
        for i in INTERPRETERS] + [
        ("names/churn/%s" % i[0], lambda i=i: test_churn(remora, i), interp_missing(i))
        for i in INTERPRETERS]
