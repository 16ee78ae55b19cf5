# Target for the cpu-mode test of parked threads (runs on CPython 3.9-3.15).
#
# Three threads: the main thread spins in Python (it holds the GIL nearly all the time);
# "hasher" hashes 16 MB at a time with hashlib, which releases the GIL for the whole
# digest, so it runs on a CPU while parked as far as the GIL can tell; "sleeper" sleeps.
# It writes argv[1] (temp + rename) once all run: {"pid": N, "main": TID, "hasher": TID,
# "sleeper": TID}. At EOF on stdin it writes cpu.json next to argv[1]: the CPU seconds
# each of hasher and sleeper used and the wall seconds since the ready file, as each
# thread measured itself, and exits.

import hashlib
import json
import os
import sys
import threading
import time

DATA = b"\x5a" * (16 << 20)
stop = threading.Event()
cpu = {}


def hasher(ready):
    ready["hasher"] = threading.get_native_id()
    start = time.thread_time()
    while not stop.is_set():
        hashlib.sha256(DATA).digest()
    cpu["hasher"] = time.thread_time() - start


def sleeper(ready):
    ready["sleeper"] = threading.get_native_id()
    start = time.thread_time()
    while not stop.is_set():
        time.sleep(0.01)
    cpu["sleeper"] = time.thread_time() - start


def spin(stdin):
    n = 0
    while True:
        n += 1
        if n % 100000 == 0:
            try:
                if os.read(stdin, 4096) == b"":
                    return
            except BlockingIOError:
                pass


def main():
    path = sys.argv[1]
    ready = {"pid": os.getpid(), "main": threading.get_native_id()}
    threads = [threading.Thread(target=f, args=(ready,), name=f.__name__) for f in (hasher, sleeper)]
    for t in threads:
        t.start()
    while "hasher" not in ready or "sleeper" not in ready:
        time.sleep(0.001)
    stdin = sys.stdin.fileno()
    os.set_blocking(stdin, False)
    with open(path + ".tmp", "w") as f:
        json.dump(ready, f)
    os.rename(path + ".tmp", path)
    wall = time.monotonic()
    spin(stdin)
    cpu["wall"] = time.monotonic() - wall
    stop.set()
    for t in threads:
        t.join()
    out = os.path.join(os.path.dirname(path), "cpu.json")
    with open(out + ".tmp", "w") as f:
        json.dump(cpu, f)
    os.rename(out + ".tmp", out)


main()
