"""Benchmark target: N threads, each recursing to DEPTH frames and then spinning in a
pure-Python loop; counts loop iterations. Writes READY (temp + rename) once every
thread spins; after SECONDS it writes the total iterations to READY + ".done" and exits.

    python busy.py READY DEPTH NTHREADS SECONDS [log]

With "log", the main thread also appends "MONOTONIC_TIME TOTAL_ITERATIONS" to READY + ".log"
every 5 ms, so that a benchmark can compare windows of one run (profiled, unprofiled).
"""
import os
import sys
import threading
import time

sys.setrecursionlimit(10000)

READY, DEPTH, NTHREADS, SECONDS = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
LOG = len(sys.argv) > 5 and sys.argv[5] == "log"
counts = [0] * NTHREADS
started = threading.Barrier(NTHREADS + 1)
stop = False


def spin(i):
    n = 0
    started.wait()
    while not stop:
        n += 1
        if n % 1000 == 0:
            counts[i] = n
    counts[i] = n


def recurse(d, i):
    if d <= 1:
        spin(i)
    else:
        recurse(d - 1, i)


def write(path, text):
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.rename(path + ".tmp", path)


threads = [threading.Thread(target=recurse, args=(DEPTH, i), daemon=True) for i in range(NTHREADS)]
for t in threads:
    t.start()
started.wait()
write(READY, str(os.getpid()))
start = time.perf_counter()
base = sum(counts)
if LOG:
    with open(READY + ".log", "w", buffering=1) as log:
        while time.perf_counter() - start < SECONDS:
            time.sleep(0.005)
            log.write("%f %d\n" % (time.monotonic(), sum(counts)))
else:
    time.sleep(SECONDS)
total = sum(counts) - base
elapsed = time.perf_counter() - start
stop = True
write(READY + ".done", "%d %f" % (total, elapsed))
