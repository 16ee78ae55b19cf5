# The window and the tracemalloc account of the memory real-program targets (mem_numpy.py,
# mem_leak.py, mem_django.py; tests/functional/memory_real_tests.py copies this file
# beside the target's script), the truth `record --mode memory` is held to.
#
# A target hands run() its work(n), a function of its own file that calls its sites
# (functions of that file keeping fresh memory), and a warm-up. tracemalloc is started
# (NFRAMES frames a traceback: enough to reach the target's own frames from deep in a
# library: Django's ORM allocates up to 17 frames under them; each frame more slows every
# allocation), then the warm-up runs under it (tracemalloc's own memory grows the process
# too, invisible to its account: each traceback it interns, and each live trace; the warm-
# up interns the tracebacks of the work before the window, leaving in the window its entry
# for each live block, ~100 bytes, which remora counts with the site that made the block,
# and its table of live traces doubling: for a target whose window adds 70,000-140,000
# blocks (the leak's, Django's), `ballast` live objects made first size that table past
# what the window adds, or its new 8 MB of buckets would land on whatever site allocated
# when it filled (2 MB on the leak's index_key, 0.3% of its bytes: 2 points more); a
# target of few blocks (numpy's) goes without, as the ballast's freed part leaves memory
# that the window's allocations reuse, not growth: numpy's arrays 7% short of
# tracemalloc's), and READY is written (temp + rename): {"pid", "file": the target's file,
# "work": "work", plus the target's fields}. Each line "go N" on stdin: a snapshot,
# work(N), a snapshot, and one JSON line appended to marks.jsonl beside READY:
#   {"sites": {qualname: bytes}, "blocks": {qualname: blocks}, "total": bytes,
#    "beyond": bytes whose traceback did not reach the target's file}
# as compare_to(before, "traceback") gives them: each difference's bytes go to the
# innermost frame of the target's file in its traceback, that frame's line mapped to its
# function (co_qualname) through the code objects of the target's file (co_lines: the
# innermost code object holding the line). tracemalloc's and importlib's own frames are
# filtered out. EOF on stdin ends it.

import gc
import json
import os
import sys
import tracemalloc
import types

NFRAMES = 24
BALLAST = (280_000, 110_000)   # traced objects made, and kept: tracemalloc's table of
                        # traces rehashed past 262,144 entries to 1 Mi buckets, next at
                        # 524,288 entries, shrunk under 104,858 (10%): never in a window
kept = []


def write(path, text):
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.rename(path + ".tmp", path)


def code_lines(code, depth, out):
    """out[line] = (depth, qualname) for every line of code and the code objects in it,
    the deepest code object keeping a line it shares with its parent."""
    name = getattr(code, "co_qualname", code.co_name)
    if hasattr(code, "co_lines"):
        lines = {ln for _, _, ln in code.co_lines() if ln is not None}
    else:                                   # 3.9
        import dis
        lines = {ln for _, ln in dis.findlinestarts(code)}
    for ln in lines:
        if ln not in out or out[ln][0] <= depth:
            out[ln] = (depth, name)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            code_lines(c, depth + 1, out)


def line_index(module):
    """{line: qualname} of the functions of module's file (its top-level code left out)."""
    out = {}
    seen = set()
    for v in list(vars(module).values()):
        code = getattr(v, "__code__", None)
        if isinstance(code, types.CodeType) and code.co_filename == module.__file__ \
                and id(code) not in seen:
            seen.add(id(code))
            code_lines(code, 1, out)
    return {ln: name for ln, (_, name) in out.items()}


def account(before, after, own, index):
    """compare_to(before, "traceback") summed by site, from the snapshots' raw traces (the
    same sums, without a Traceback object for each of 100,000 traces): a trace's raw
    traceback is its frames, the most recent first; one whose most recent frame is
    tracemalloc's, importlib's or this file's is left out, as Snapshot.filter_traces would."""
    skip = (tracemalloc.__file__, __file__, "<frozen importlib._bootstrap>",
            "<frozen importlib._bootstrap_external>")
    sites, blocks, total, beyond = {}, {}, 0, 0
    for sign, snap in ((-1, before), (1, after)):
        memo = {}                           # a snapshot shares equal tracebacks
        for trace in snap.traces._traces:
            size, tb = trace[1], trace[2]
            if not tb or tb[0][0] in skip:
                continue
            site = memo.get(id(tb), 0)
            if site == 0:
                site = next((index.get(ln, "<line %d>" % ln) for fn, ln in tb if fn == own), None)
                memo[id(tb)] = site
            total += sign * size
            if site is None:
                beyond += sign * size
                continue
            sites[site] = sites.get(site, 0) + sign * size
            blocks[site] = blocks.get(site, 0) + sign
    return {"sites": sites, "blocks": blocks, "total": total, "beyond": beyond}


def run(module, warmup, fields, ballast=False):
    """Runs the target (module: its __main__) as the banner says, until EOF on stdin;
    ballast: BALLAST first."""
    tracemalloc.start(NFRAMES)
    if ballast:
        kept.extend(object() for _ in range(BALLAST[0]))
        del kept[BALLAST[1]:]
    warmup()
    ready = sys.argv[1]
    own = module.__file__
    index = line_index(module)
    marks = open(os.path.join(os.path.dirname(ready), "marks.jsonl"), "w")
    gc.collect()
    write(ready, json.dumps(dict(fields, pid=os.getpid(), file=own, work="work")))
    for line in sys.stdin:
        words = line.split()
        if len(words) != 2 or words[0] != "go":
            continue
        gc.collect()
        before = tracemalloc.take_snapshot()
        module.work(int(words[1]))
        after = tracemalloc.take_snapshot()
        res = account(before, after, own, index)
        del before, after
        marks.write(json.dumps(res) + "\n")
        marks.flush()
