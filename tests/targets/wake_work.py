# Target for the idle tests (runs on CPython 3.9-3.15): threads that wake from a sleep
# into Python work, and threads running C code without the GIL, among parked ones.
#
#     python wake_work.py READY wake|hash
#
#   waker     (wake) sleeps 80-200 ms (time.sleep), then, awake, stamps the time with its
#             own CLOCK_MONOTONIC, calls short Python functions for WORK_S (noting each pause
#             longer than GAP_NS: off its CPU), stamps the end, and sleeps again
#   cruncher  (wake) stamps the time, then calls hashlib.pbkdf2_hmac for hours: on a CPU
#             the whole time without the GIL, so the waker never waits for it
#   spinner   (hash) calls short Python functions forever: it holds the GIL but when a
#             hasher takes it between two digests
#   hasher_N  (hash, two) stamps the time, hashes 32 MB
#             with hashlib.sha256 (which lets the GIL go for the digest and takes it again
#             after, waiting for the spinner to let it go, 5 ms or more, asleep), stamps the end and the CPU time the call took (its digest: the wait
#             for the GIL at its end takes none); again
#   parked_N  os.read() of a pipe nobody writes to (a read(2) the test can see it in)
#   main      reads stdin; EOF ends it
#
# Once every thread runs, main writes READY (temp + rename):
#   {"pid": N, "main": TID, "parked": [TID...], "hashers": [TID...], and "waker" and
#    "cruncher" (wake) or "spinner" (hash): TID}
# At EOF it writes wakes.json next to it: {"wakes": [[wake_ns, end_ns, [[pause_start_ns,
# pause_end_ns], ...]], ...], "digests":
# {TID: [[start_ns, end_ns, cpu_ns], ...]}, "crunch": start_ns} (CLOCK_MONOTONIC), and
# exits.

import hashlib
import json
import os
import random
import sys
import threading
import time

WORK_S = 0.015          # the waker works this long, holding the GIL
GAP_NS = 200000         # a pause in its work longer than this: it was off its CPU
BLOB = b"\xa5" * (32 << 20)
WAKE = sys.argv[2] == "wake"
NPARKED = 20
NHASHERS = 0 if WAKE else 2
never, _ = os.pipe()             # nobody writes to it
stop = threading.Event()
ready = {"parked": [], "hashers": []}
lock = threading.Lock()
started = threading.Barrier(NPARKED + NHASHERS + (3 if WAKE else 2))
wakes, digests = [], {}
crunch = [0]


def parked():
    with lock:
        ready["parked"].append(threading.get_native_id())
    started.wait()
    os.read(never, 1)


def hasher():
    tid = threading.get_native_id()
    with lock:
        ready["hashers"].append(tid)
    mine = digests[tid] = []
    started.wait()
    while not stop.is_set():
        t0, c0 = time.monotonic_ns(), time.thread_time_ns()
        hashlib.sha256(BLOB).digest()
        mine.append([t0, time.monotonic_ns(), time.thread_time_ns() - c0])


def step(n):
    return (n * 31 + 7) & 0xFFFF


def work(until):
    """Short calls until 'until'; the pauses longer than GAP_NS between two looks at the
    clock (off its CPU: preempted, or waiting for the GIL) as [start, end]."""
    n, last, gaps = 0, time.monotonic_ns(), []
    while last < until:
        n = step(n)
        now = time.monotonic_ns()
        if now - last > GAP_NS:
            gaps.append([last, now])
        last = now
    return gaps


def cruncher():
    ready["cruncher"] = threading.get_native_id()
    started.wait()
    crunch[0] = time.monotonic_ns()
    # one call for ever: PBKDF2 lets the GIL go for its whole computation (2^31 - 1
    # iterations, the most it takes: many minutes)
    hashlib.pbkdf2_hmac("sha256", b"remora", b"salt", (1 << 31) - 1)


def spinner():
    ready["spinner"] = threading.get_native_id()
    started.wait()
    n = 0
    while not stop.is_set():
        n = step(n)


def waker():
    ready["waker"] = threading.get_native_id()
    started.wait()
    rng = random.Random(1)
    while not stop.is_set():
        time.sleep(rng.uniform(0.08, 0.2))
        t0 = time.monotonic_ns()
        gaps = work(t0 + int(WORK_S * 1e9))
        wakes.append([t0, time.monotonic_ns(), gaps])


def main():
    path = sys.argv[1]
    threads = [threading.Thread(target=parked, daemon=True) for _ in range(NPARKED)]
    threads += [threading.Thread(target=hasher, daemon=True) for _ in range(NHASHERS)]
    threads.append(threading.Thread(target=waker if WAKE else spinner, daemon=True))
    if WAKE:
        threads.append(threading.Thread(target=cruncher, daemon=True))
    for t in threads:
        t.start()
    started.wait()
    ready["pid"] = os.getpid()
    ready["main"] = threading.get_native_id()
    with open(path + ".tmp", "w") as f:
        json.dump(ready, f)
    os.rename(path + ".tmp", path)
    sys.stdin.read()
    stop.set()
    for t in threads[NPARKED:NPARKED + NHASHERS + 1]:
        t.join()
    out = os.path.join(os.path.dirname(path), "wakes.json")
    with open(out + ".tmp", "w") as f:
        json.dump({"wakes": wakes, "digests": digests, "crunch": crunch[0]}, f)
    os.rename(out + ".tmp", out)
    os._exit(0)     # the cruncher cannot be stopped


main()
