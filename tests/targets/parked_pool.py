"""Benchmark target: a server's thread pool. NPARKED threads each recurse to DEPTH frames
and then block in lock.acquire() on a lock nobody releases (asleep in the kernel, holding
no GIL); NBUSY threads recurse to DEPTH frames and spin in a pure-Python loop. Writes
READY (temp + rename) once every busy thread spins and every parked thread is about to
block: {"pid": N, "busy": [TID...], "parked": [TID...]}. EOF on stdin ends it; so does
SECONDS passing.

    python parked_pool.py READY NPARKED DEPTH SECONDS [NBUSY]
"""
import json
import os
import sys
import threading
import time

sys.setrecursionlimit(10000)

READY, NPARKED, DEPTH, SECONDS = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
NBUSY = int(sys.argv[5]) if len(sys.argv) > 5 else 1
never = threading.Lock()
never.acquire()
tids = {"busy": [], "parked": []}
tids_lock = threading.Lock()
started = threading.Barrier(NPARKED + NBUSY + 1)
stop = False


def park():
    with tids_lock:
        tids["parked"].append(threading.get_native_id())
    started.wait()
    never.acquire()


def spin():
    with tids_lock:
        tids["busy"].append(threading.get_native_id())
    started.wait()
    n = 0
    while not stop:
        n += 1


def recurse(d, leaf):
    if d <= 1:
        leaf()
    else:
        recurse(d - 1, leaf)


threads = [threading.Thread(target=recurse, args=(DEPTH, park), daemon=True) for _ in range(NPARKED)]
threads += [threading.Thread(target=recurse, args=(DEPTH, spin), daemon=True) for _ in range(NBUSY)]
for t in threads:
    t.start()
started.wait()
with open(READY + ".tmp", "w") as f:
    json.dump(dict(tids, pid=os.getpid()), f)
os.rename(READY + ".tmp", READY)
end = time.monotonic() + SECONDS
stdin = sys.stdin.fileno()
import select  # noqa: E402
while time.monotonic() < end:
    if select.select([stdin], [], [], max(0.0, end - time.monotonic()))[0] and os.read(stdin, 4096) == b"":
        break
stop = True
