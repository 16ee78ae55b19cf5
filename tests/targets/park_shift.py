# Target for the parked-thread test (runs on CPython 3.9-3.15).
#
# One thread spins in pure Python and so holds the GIL most of the time; WORKERS threads
# park, over and over, each time in the next of NAMES functions park_0 .. park_7: one
# sleeps there (GIL released) for 100 us to 2 ms, then, the GIL taken back, returns and
# parks in the next. remora serves a parked thread from its last walk while the GIL's
# holder and switch count stay the same; this target moves parked threads as often as
# it can, so a walk reused once the thread has moved shows up as a park_<n> sampled
# outside that call. The ground truth, on CLOCK_MONOTONIC (time.monotonic_ns):
#   TID NAME START END
# one call a line, START taken just before the call, END just after it returns: the
# frame of park_<n> exists only inside [START, END] (a thread may wait for the GIL on
# its way in and out, so times taken inside the call would be too narrow). argv[1] (temp + rename) is written once every worker has parked a few times:
# {"pid": N, "workers": [TID, ...]}; at EOF on stdin the workers stop, truth.txt is
# written next to argv[1] and the target exits.

import json
import os
import random
import sys
import threading
import time

WORKERS = 6
NAMES = 8
WARMUP = 20                  # parks per worker before the ready file

now = time.monotonic_ns
stop = False
calls = [[] for _ in range(WORKERS)]


def make_park(n):
    def park(seconds):
        time.sleep(seconds)
    name = "park_%d" % n
    code = park.__code__.replace(co_name=name)
    if sys.version_info >= (3, 11):
        code = code.replace(co_qualname=name)
    park.__code__ = code
    park.__name__ = park.__qualname__ = name
    return park


PARKS = [make_park(n) for n in range(NAMES)]


def worker(i, warm):
    rng = random.Random(i)
    tid = threading.get_native_id()
    out = calls[i]
    k = 0
    while not stop:
        park, seconds = PARKS[k % NAMES], rng.uniform(0.0001, 0.002)
        start = now()
        park(seconds)
        out.append((tid, k % NAMES, start, now()))
        k += 1
        if k == WARMUP:
            warm.release()


def spin():
    n = 0
    while not stop:
        n += 1


def main():
    global stop
    if len(sys.argv) != 2:
        sys.exit("usage: park_shift.py READY_PATH")
    ready = sys.argv[1]
    warm = threading.Semaphore(0)
    threads = [threading.Thread(target=spin)]
    threads += [threading.Thread(target=worker, args=(i, warm)) for i in range(WORKERS)]
    for t in threads:
        t.start()
    for _ in range(WORKERS):
        warm.acquire()
    tmp = ready + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"pid": os.getpid(), "workers": sorted({c[0][0] for c in calls})}, f)
    os.rename(tmp, ready)
    sys.stdin.buffer.read()
    stop = True
    for t in threads:
        t.join()
    path = os.path.join(os.path.dirname(ready), "truth.txt")
    with open(path + ".tmp", "w") as f:
        for out in calls:
            for tid, n, start, end in out:
                f.write("%d park_%d %d %d\n" % (tid, n, start, end))
    os.rename(path + ".tmp", path)


main()
