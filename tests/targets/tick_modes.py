# Target for the tick-mode tests (tickmode_tests.py; runs on CPython 3.9-3.15).
#
# argv[2] says what it times of itself:
#   gil:       thread "worker" repeats a 10 ms cycle: HOLD of it spinning in pure Python in
#              hold() (it holds the GIL: no other thread wants it for long), the rest in
#              rest(), asleep in time.sleep (the GIL released); thread "napper" sleeps in
#              C 1 ms at a time (it takes the GIL a few microseconds at each wake-up).
#   exception: thread "worker" repeats a 10 ms cycle: HOLD of it spinning inside an
#              `except KeyError` block, in handling(), the rest spinning in plain(), no
#              exception being handled.
# The worker times itself with perf_counter: its time in hold()/handling() and its time in
# all, between two marks. Once it cycles, main writes argv[1] (temp + rename):
#   {"pid": N, "worker": TID, "napper": TID or null}
# and reads stdin: each line "mark" appends the running totals as one JSON line to
# marks.jsonl beside argv[1]: {"in": seconds in hold()/handling(), "all": seconds}.
# EOF on stdin ends it.

import json
import os
import sys
import threading
import time

CYCLE = 0.010
HOLD = 0.4

lock = threading.Lock()
totals = {"in": 0.0, "all": 0.0}
cycling = threading.Event()


def hold(end):
    n = 0
    while time.perf_counter() < end:
        n += 1


def rest(seconds):
    time.sleep(seconds)


def handling(end):
    n = 0
    while time.perf_counter() < end:
        n += 1


def plain(end):
    n = 0
    while time.perf_counter() < end:
        n += 1


def gil_worker():
    while True:
        t0 = time.perf_counter()
        hold(t0 + CYCLE * HOLD)
        t1 = time.perf_counter()
        rest(CYCLE * (1 - HOLD))
        t2 = time.perf_counter()
        with lock:
            totals["in"] += t1 - t0
            totals["all"] += t2 - t0
        cycling.set()


def exc_worker():
    while True:
        t0 = time.perf_counter()
        try:
            raise KeyError("handled")
        except KeyError:
            t1 = time.perf_counter()
            handling(t0 + CYCLE * HOLD)
            t2 = time.perf_counter()
        plain(t0 + CYCLE)
        t3 = time.perf_counter()
        with lock:
            totals["in"] += t2 - t1
            totals["all"] += t3 - t0
        cycling.set()


def napper():
    while True:
        time.sleep(0.001)


def main():
    if len(sys.argv) != 3 or sys.argv[2] not in ("gil", "exception"):
        sys.exit("usage: tick_modes.py READY_PATH gil|exception")
    ready = sys.argv[1]
    worker = threading.Thread(target=gil_worker if sys.argv[2] == "gil" else exc_worker,
                              name="worker", daemon=True)
    nap = threading.Thread(target=napper, name="napper", daemon=True) if sys.argv[2] == "gil" else None
    worker.start()
    if nap is not None:
        nap.start()
    if not cycling.wait(20):
        sys.exit("tick_modes: the worker never cycled")
    marks = open(os.path.join(os.path.dirname(ready), "marks.jsonl"), "w")
    tmp = ready + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"pid": os.getpid(), "worker": worker.native_id,
                   "napper": nap.native_id if nap is not None else None}, f)
    os.rename(tmp, ready)
    for line in sys.stdin:
        if line.strip() == "mark":
            with lock:
                snap = dict(totals)
            marks.write(json.dumps(snap) + "\n")
            marks.flush()


main()
