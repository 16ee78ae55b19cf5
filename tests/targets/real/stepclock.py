# The loop and the clock of the one-thread real-program targets (django_orm.py,
# docutils_html.py, numpy_loops.py), and the marks of thread_pool.py's clock
# (tests/functional/real_tests.py copies this file beside the target's script).
#
# A target hands run() its iteration, which calls each of its steps (functions of the
# target's own file) through timed(); the clock adds each step's wall time to its total.
# A line "mark" on stdin appends one JSON line to marks.jsonl beside READY, {"at":
# perf_counter_ns, "threads": {TID: {step: ns}}}: between two marks around a recording
# the test has each step's share of that window by the target's own clock, the truth for
# that window whatever the program did in the others (its mix moves from one 5-s window
# to the next by 1-3 points: docs/measured.md). After `warmup` iterations run() writes
# READY (temp + rename): {"pid": N, "main": TID, "file": the steps' file, "steps":
# [names], plus the target's fields}. It polls stdin between iterations and returns at
# EOF, or after `lifetime` seconds whatever happens.

import json
import os
import select
import sys
import threading
import time

totals = {}                 # {step: ns}
marks = []                  # the open marks.jsonl


def timed(fn, *args):
    """fn(*args), its wall time added to fn's step."""
    t0 = time.perf_counter_ns()
    try:
        return fn(*args)
    finally:
        totals[fn.__name__] = totals.get(fn.__name__, 0) + time.perf_counter_ns() - t0


def open_marks(ready):
    """marks.jsonl beside READY, opened for stdin_closed()."""
    marks.append(open(os.path.join(os.path.dirname(ready), "marks.jsonl"), "w"))


def stdin_closed(snapshot=None):
    """True once stdin reached EOF (polled, never blocking); each "mark" line read writes
    a mark: snapshot() ({TID: {step: ns}}, as a target of several threads keeps them), or
    this thread's totals."""
    while select.select([0], [], [], 0)[0]:
        data = os.read(0, 4096)
        if not data:
            return True
        for _ in range(data.count(b"mark\n")):
            threads = snapshot() if snapshot else {str(threading.get_native_id()): dict(totals)}
            marks[0].write(json.dumps({"at": time.perf_counter_ns(), "threads": threads}) + "\n")
            marks[0].flush()
    return False


def write(path, text):
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.rename(path + ".tmp", path)


def run(iteration, steps, warmup, lifetime, fields):
    """Calls iteration(i) for i = 0, 1, ... until stdin's EOF or `lifetime` s."""
    start = time.monotonic()
    ready = sys.argv[1]
    open_marks(ready)
    i = 0
    while True:
        iteration(i)
        i += 1
        if i == warmup:
            write(ready, json.dumps(dict(fields, pid=os.getpid(), main=threading.get_native_id(),
                                         file=steps[0].__code__.co_filename,
                                         steps=[fn.__name__ for fn in steps])))
        if stdin_closed() or time.monotonic() - start > lifetime:
            return
