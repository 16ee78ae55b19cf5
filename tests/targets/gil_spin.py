# Target for the GIL functional test (runs on CPython 3.9-3.15).
#
# One thread spins in pure Python (it wants the GIL all the time and, having no rival,
# holds it); two threads are parked in C on a held lock; the main thread is parked in C
# reading stdin. Once the spinner is in its loop and the parked threads sit on their
# blocking line, main writes argv[1] (temp + rename):
#   {"pid": N, "spinner": TID, "parked": [TID, TID], "main": TID}
# and blocks reading stdin until EOF.

import json
import os
import sys
import threading
import time

BLOCK = threading.Lock()          # held by main: the parked threads block on it
spinning = threading.Event()


def spin():
    n = 0
    spinning.set()
    while True:
        n += 1


def parked_one():
    BLOCK.acquire()


def parked_two():
    BLOCK.acquire()


def at_line(frame, fn, offset):
    """True when frame is fn's frame, on the line `offset` lines below its def."""
    return (frame is not None and frame.f_code is fn.__code__
            and frame.f_lineno == fn.__code__.co_firstlineno + offset)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: gil_spin.py READY_PATH")
    path = sys.argv[1]
    BLOCK.acquire()
    spinner = threading.Thread(target=spin, name="spinner", daemon=True)
    blockers = [parked_one, parked_two]
    parked = [threading.Thread(target=fn, name="parked-%d" % (i + 1), daemon=True)
              for i, fn in enumerate(blockers)]
    for t in [spinner] + parked:
        t.start()
    if not spinning.wait(20):
        sys.exit("gil_spin: spinner never started")
    deadline = time.monotonic() + 20
    while True:
        frames = sys._current_frames()
        top = frames.get(spinner.ident)
        ok = top is not None and top.f_code is spin.__code__
        ok = ok and all(at_line(frames.get(t.ident), fn, 1) for t, fn in zip(parked, blockers))
        del frames
        if ok:
            break
        if time.monotonic() > deadline:
            sys.exit("gil_spin: threads never reached their loop / blocking line")
        time.sleep(0.002)
    ready = {"pid": os.getpid(), "spinner": spinner.native_id,
             "parked": [t.native_id for t in parked],
             "main": threading.main_thread().native_id}
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(ready, f)
    os.rename(tmp, path)
    sys.stdin.buffer.read()


main()
