"""Target for the heatmap tests (runs on CPython 3.9-3.15): the main thread cycles over three
call sites whose time it measures with its own clock, so that each line's share is known.

    python line_clock.py READY

cycle() calls spin_a for 3 ms, spin_b for 1 ms, spin_a again for 1.5 ms, each call on a
line of its own between two readings of time.perf_counter_ns (the vDSO clock, no system
call); spin_a and spin_b spin in a loop written on one line, so that line holds all of
their own time. READY (JSON, temp + rename) after the first cycle:

    {"pid": N, "file": this file as the target sees it,
     "lines": {"call_a": L, "call_b": L, "call_a2": L, "spin_a": L, "spin_b": L}}

Between cycles it polls stdin: a line "mark" appends one JSON line to READY + ".marks":
{"at": ns, "ns": {"call_a": ns, "call_b": ns, "call_a2": ns}, "total": ns} (running totals:
the time measured around each call site, and the time of all cycles), so the test takes
the difference of the marks around a recording. EOF on stdin ends it.
"""
import inspect
import json
import os
import select
import sys
import time

perf = time.perf_counter
perf_ns = time.perf_counter_ns
READY = sys.argv[1]


def spin_a(t):
    while perf() < t: pass                                          # noqa: E701 (one line)


def spin_b(t):
    while perf() < t: pass                                          # noqa: E701


totals = {"call_a": 0, "call_b": 0, "call_a2": 0}


def cycle():
    t0 = perf_ns()
    spin_a(perf() + 0.003)
    t1 = perf_ns()
    spin_b(perf() + 0.001)
    t2 = perf_ns()
    spin_a(perf() + 0.0015)
    t3 = perf_ns()
    totals["call_a"] += t1 - t0
    totals["call_b"] += t2 - t1
    totals["call_a2"] += t3 - t2


def line_of(fn, text):
    src, first = inspect.getsourcelines(fn)
    for k, line in enumerate(src):
        if text in line:
            return first + k
    raise SystemExit("line_clock: no %r in %s" % (text, fn.__name__))


def main():
    lines = {"call_a": line_of(cycle, "spin_a(perf() + 0.003)"),
             "call_b": line_of(cycle, "spin_b(perf() + 0.001)"),
             "call_a2": line_of(cycle, "spin_a(perf() + 0.0015)"),
             "spin_a": line_of(spin_a, "while"), "spin_b": line_of(spin_b, "while")}
    start = perf_ns()
    cycle()
    with open(READY + ".tmp", "w") as f:
        json.dump({"pid": os.getpid(), "file": cycle.__code__.co_filename, "lines": lines}, f)
    os.rename(READY + ".tmp", READY)
    marks = open(READY + ".marks", "a", buffering=1)
    while True:
        cycle()
        if select.select([sys.stdin], [], [], 0)[0]:
            line = sys.stdin.readline()
            if not line:
                return
            now = perf_ns()
            marks.write(json.dumps({"at": now, "ns": dict(totals), "total": now - start}) + "\n")


main()
