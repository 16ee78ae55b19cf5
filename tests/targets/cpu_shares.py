# Target for the record accuracy test (runs on CPython 3.9-3.15).
#
# The main thread repeats a 10 ms cycle: 6 ms in share_60, 3 ms in share_30, 1 ms in
# share_10, each spinning on perf_counter until its deadline. It accounts for itself what
# each function really got: wall time (perf_counter) and CPU time (thread_time) around
# each call, and the time it stalled inside it (gaps of more than STALL between two clock
# readings: the thread was not running -- preempted, or the machine paused). A second
# thread sleeps in C (time.sleep) the whole time.
#
# Once the cycle runs, main writes argv[1] (temp + rename):
#   {"pid": N, "main": TID, "sleeper": TID}
# Between cycles it polls stdin: each line "mark" appends the running totals as one JSON
# line to marks.jsonl beside argv[1]:
#   {"at": perf_counter, "wall": {"share_60": s, ...}, "cpu": {...}, "stall": {...}}
# so the test takes as truth the difference between the marks around a recording.
# EOF on stdin ends it.

import json
import os
import select
import sys
import threading
import time

CYCLE = 0.010
SHARES = (("share_60", 0.6), ("share_30", 0.3), ("share_10", 0.1))
STALL = 0.0005


def share_60(end):
    stalled, last = 0.0, time.perf_counter()
    while last < end:
        now = time.perf_counter()
        if now - last > STALL:
            stalled += now - last
        last = now
    return stalled


def share_30(end):
    stalled, last = 0.0, time.perf_counter()
    while last < end:
        now = time.perf_counter()
        if now - last > STALL:
            stalled += now - last
        last = now
    return stalled


def share_10(end):
    stalled, last = 0.0, time.perf_counter()
    while last < end:
        now = time.perf_counter()
        if now - last > STALL:
            stalled += now - last
        last = now
    return stalled


def sleeper(started):
    started.set()
    while True:
        time.sleep(3600)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: cpu_shares.py READY_PATH")
    ready = sys.argv[1]
    started = threading.Event()
    th = threading.Thread(target=sleeper, args=(started,), name="sleeper", daemon=True)
    th.start()
    started.wait()
    funcs = [(globals()[name], name, share) for name, share in SHARES]
    totals = {key: {name: 0.0 for name, _ in SHARES} for key in ("wall", "cpu", "stall")}
    marks = open(os.path.join(os.path.dirname(ready), "marks.jsonl"), "w")
    stdin = sys.stdin.buffer.raw
    pending = b""
    announced = False
    while True:
        for fn, name, share in funcs:
            w0, c0 = time.perf_counter(), time.thread_time()
            stalled = fn(w0 + CYCLE * share)
            w1, c1 = time.perf_counter(), time.thread_time()
            totals["wall"][name] += w1 - w0
            totals["cpu"][name] += c1 - c0
            totals["stall"][name] += stalled
        if not announced:
            tmp = ready + ".tmp"
            with open(tmp, "w") as f:
                json.dump({"pid": os.getpid(), "main": threading.get_native_id(),
                           "sleeper": th.native_id}, f)
            os.rename(tmp, ready)
            announced = True
        if select.select([stdin], [], [], 0)[0]:
            data = os.read(stdin.fileno(), 4096)
            if not data:
                return
            pending += data
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                if line.strip() == b"mark":
                    snap = dict(totals, at=time.perf_counter())
                    marks.write(json.dumps(snap) + "\n")
                    marks.flush()


main()
