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
import shutil

from harness import (INTERPRETERS, TARGETS, Fail, Target, interp_missing, record, tail, workdir)
from formats import (dump_json_stacks, dump_text_stacks, firefox_stacks, load_json,
                     parse_collapsed, parse_dump, read_pprof, pprof_stacks)

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


def tests(remora):
    """[(name, function, skip reason or None)] for run.py."""
    return [("names/dump/%s" % i[0], lambda i=i: test_dump(remora, i), interp_missing(i))
            for i in INTERPRETERS] + [
        ("names/record/%s" % i[0], lambda i=i: test_record(remora, i), interp_missing(i))
        for i in INTERPRETERS]
