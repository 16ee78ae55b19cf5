# Target for the record --mode gil test (runs on CPython 3.9-3.15).
#
# Two threads spin in pure Python and contend for the GIL (the interpreter hands it over
# every switch interval); a third thread sleeps in C (time.sleep); the main thread is
# parked in C reading stdin. Only the spinners ever hold the GIL for more than an instant.
# Once both spinners are in their loops, main writes argv[1] (temp + rename):
#   {"pid": N, "spinners": [TID, TID], "sleeper": TID, "main": TID}
# and blocks reading stdin until EOF.

import json
import os
import sys
import threading
import time


def spin_one(started):
    started.set()
    n = 0
    while True:
        n += 1


def spin_two(started):
    started.set()
    n = 0
    while True:
        n += 1


def sleep_in_c(started):
    started.set()
    while True:
        time.sleep(3600)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: gil_contend.py READY_PATH")
    threads = []
    for fn in (spin_one, spin_two, sleep_in_c):
        started = threading.Event()
        t = threading.Thread(target=fn, args=(started,), name=fn.__name__, daemon=True)
        t.start()
        if not started.wait(20):
            sys.exit("gil_contend: %s never started" % fn.__name__)
        threads.append(t)
    ready = {"pid": os.getpid(), "spinners": [threads[0].native_id, threads[1].native_id],
             "sleeper": threads[2].native_id, "main": threading.get_native_id()}
    tmp = sys.argv[1] + ".tmp"
    with open(tmp, "w") as f:
        json.dump(ready, f)
    os.rename(tmp, sys.argv[1])
    sys.stdin.buffer.read()


main()
