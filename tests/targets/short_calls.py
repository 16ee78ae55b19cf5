# Target for the short-calls test (runs on CPython 3.9-3.15).
#
# The main thread calls two short functions in a loop, a() (~0.3 us) and b() (~0.6 us),
# from cyc_ab(): the stack changes every few hundred nanoseconds, faster than one read of
# it. The ground truth is the target's own timing of three loops of the same shape, in
# which a() or b() is replaced by nop():
#   a_in = time per cycle of cyc_ab - that of cyc_nb (a's own time, less an empty call's)
#   b_in = time per cycle of cyc_ab - that of cyc_an
#   main = the rest of a cycle of cyc_ab (the loop itself, the calls and returns)
# as shares of a cycle, measured before the recording and again at EOF on stdin (the
# machine's speed wanders), each the best of seven.
#
# Once calibrated, the main thread writes argv[1] (temp + rename):
#   {"pid": N, "main": TID, "before": {"a": s, "b": s, "main": s}}
# and runs cyc_ab until EOF on stdin; then it calibrates again and writes
# {"after": {...}} to after.json next to argv[1] before exiting.

import json
import os
import sys
import threading
import time

N = 20000          # cycles a call of a loop
ROUNDS = 7         # timings of each loop, the best kept
stop = False


def a():
    for _ in range(20):
        pass


def b():
    for _ in range(60):
        pass


def nop():
    pass


def cyc_ab(n):
    for _ in range(n):
        a()
        b()


def cyc_nb(n):
    for _ in range(n):
        nop()
        b()


def cyc_an(n):
    for _ in range(n):
        a()
        nop()


def shares():
    """Each loop timed ROUNDS times, the three in turn (so that a change of the machine's
    speed falls on all three), the best of each."""
    best = {}
    for _ in range(ROUNDS):
        for fn in (cyc_ab, cyc_nb, cyc_an):
            t = time.perf_counter()
            fn(N)
            d = (time.perf_counter() - t) / N
            best[fn] = min(best.get(fn, d), d)
    ab, nb, an = best[cyc_ab], best[cyc_nb], best[cyc_an]
    a_in, b_in = max(ab - nb, 0.0), max(ab - an, 0.0)
    return {"a": a_in / ab, "b": b_in / ab, "main": max(ab - a_in - b_in, 0.0) / ab,
            "cycle_ns": ab * 1e9}


def write(path, obj):
    with open(path + ".tmp", "w") as f:
        json.dump(obj, f)
    os.rename(path + ".tmp", path)


def wait_eof():
    global stop
    sys.stdin.read()
    stop = True


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: short_calls.py READY_PATH")
    ready = sys.argv[1]
    before = shares()
    threading.Thread(target=wait_eof, daemon=True).start()
    write(ready, {"pid": os.getpid(), "main": threading.get_native_id(), "before": before})
    while not stop:
        cyc_ab(N)
    write(os.path.join(os.path.dirname(ready), "after.json"), {"after": shares()})


main()
