# Target for the output-format tests (tests/functional/format_tests.py; CPython 3.9-3.15).
#
# The main thread repeats a 10 ms cycle from cycle(): 6 ms in share_60, 3 ms in share_30,
# 1 ms in share_10, each spinning on its clock until its deadline. share_60 spends the
# first quarter of its time on the line marked FIRST and the rest on the line marked HOT
# (lower and higher lines of one function). Arguments after argv[1]: "--slow NAME" gives
# one of the three twice its time (the "slower version" of the program); "--cpu" makes
# the deadlines CPU time (thread_time) instead of wall time, so that the shares of CPU time
# stay 60/30/10 however busy the machine is.
#
# It accounts for itself, per function, the wall time (perf_counter) and CPU time
# (thread_time) around each call, the time it stalled inside it (gaps over STALL between
# two readings of its clock: not running; none with --cpu), and share_60's time on each of
# its two lines. Once the cycle runs it writes argv[1] (temp + rename):
#   {"pid": N, "main": TID, "slow": NAME or null, "caller": "cycle",
#    "lines": {"share_60": {"def": N, "first": N, "hot": N}}}
# from its own code objects and source. Each line "mark" on stdin appends the running
# totals as one JSON line to marks.jsonl beside argv[1]:
#   {"at": perf_counter, "wall": {fn: s}, "cpu": {fn: s}, "stall": {fn: s},
#    "lines": {"first": s, "hot": s},
#    "gc": collections so far (gc.get_stats())}
# EOF on stdin ends it.

import gc
import json
import os
import select
import sys
import threading
import time

CYCLE = 0.010
SHARES = (("share_60", 0.6), ("share_30", 0.3), ("share_10", 0.1))
STALL = 0.0005
lines = {"first": 0.0, "hot": 0.0}
clock = time.perf_counter            # the deadlines' clock (--cpu: time.thread_time)


def share_60(end):
    start = clock()
    mid = start + (end - start) * 0.25
    stalled, last = 0.0, start
    while last < mid: now = clock(); stalled += now - last if now - last > STALL else 0.0; last = now  # FIRST
    t = last
    while last < end: now = clock(); stalled += now - last if now - last > STALL else 0.0; last = now  # HOT
    lines["first"] += t - start
    lines["hot"] += last - t
    return stalled


def share_30(end):
    stalled, last = 0.0, clock()
    while last < end: now = clock(); stalled += now - last if now - last > STALL else 0.0; last = now
    return stalled


def share_10(end):
    stalled, last = 0.0, clock()
    while last < end: now = clock(); stalled += now - last if now - last > STALL else 0.0; last = now
    return stalled


def cycle(funcs, totals):
    for fn, name, length in funcs:
        w0, c0 = time.perf_counter(), time.thread_time()
        stalled = fn(clock() + length)
        totals["wall"][name] += time.perf_counter() - w0
        totals["cpu"][name] += time.thread_time() - c0
        totals["stall"][name] += stalled


def own_lines():
    with open(os.path.abspath(__file__)) as f:
        src = f.read().split("\n")
    found = {}
    for i, text in enumerate(src, 1):
        for tag in ("FIRST", "HOT"):
            if text.rstrip().endswith("# " + tag):
                found[tag.lower()] = i
    found["def"] = share_60.__code__.co_firstlineno
    return found


def main():
    global clock
    usage = "usage: format_shares.py READY_PATH [--slow FUNCTION] [--cpu]"
    if len(sys.argv) < 2:
        sys.exit(usage)
    ready, args, slow = sys.argv[1], sys.argv[2:], None
    while args:
        a = args.pop(0)
        if a == "--cpu":
            clock = time.thread_time
        elif a == "--slow" and args:
            slow = args.pop(0)
        else:
            sys.exit(usage)
    if slow is not None and slow not in dict(SHARES):
        sys.exit("format_shares.py: no function %r to slow down" % slow)
    funcs = [(globals()[name], name, CYCLE * share * (2 if name == slow else 1))
             for name, share in SHARES]
    totals = {key: {name: 0.0 for name, _ in SHARES} for key in ("wall", "cpu", "stall")}
    marks = open(os.path.join(os.path.dirname(ready), "marks.jsonl"), "w")
    stdin = sys.stdin.buffer.raw
    pending = b""
    announced = False
    while True:
        cycle(funcs, totals)
        if not announced:
            tmp = ready + ".tmp"
            with open(tmp, "w") as f:
                json.dump({"pid": os.getpid(), "main": threading.get_native_id(), "slow": slow,
                           "caller": cycle.__name__, "lines": {"share_60": own_lines()}}, f)
            os.rename(tmp, ready)
            announced = True
        if select.select([stdin], [], [], 0)[0]:
            data = os.read(stdin.fileno(), 4096)
            if not data:
                return
            pending += data
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                if line.strip() == b"mark":
                    snap = dict(totals, at=time.perf_counter(), lines=dict(lines),
                                gc=sum(s["collections"] for s in gc.get_stats()))
                    marks.write(json.dumps(snap) + "\n")
                    marks.flush()


main()
