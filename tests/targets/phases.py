# Target for the long-recording tests (runs on CPython 3.9-3.15): its main thread works
# in one phase function at a time, ~200 us a call, and keeps its own account of when it
# was in which, on CLOCK_MONOTONIC (time.monotonic_ns), the clock remora's recordings use.
#
#   phases.py READY [alternate SECONDS]
#
# With "alternate S" it switches between phase_a and phase_b every S seconds by itself.
# Otherwise it works in phase_a and takes commands on stdin, a line each:
#   inside MS    work in inside_pause for MS ms by its own clock, then back in phase_a
#   b MS         work in phase_b for MS ms, then back in phase_a
# and after each it appends {"cmd": ..., "start": NS, "end": NS} to marks.jsonl next to
# READY. READY (temp + rename) is written once it works: {"pid": N}. At EOF on stdin it
# writes truth.json next to READY: [[NS, PHASE], ...], each switch in order, and exits.

import json
import os
import sys
import threading
import time

now = time.monotonic_ns
phase = "phase_a"
switches = []
commands = []
lock = threading.Condition()
stop = False


def spin(deadline_ns):
    x = 0
    while now() < deadline_ns:
        x += 1
    return x


def phase_a():
    spin(now() + 200000)


def phase_b():
    spin(now() + 200000)


def inside_pause():
    spin(now() + 200000)


WORK = {"phase_a": phase_a, "phase_b": phase_b, "inside_pause": inside_pause}


def switch(to):
    global phase
    t = now()
    phase = to
    switches.append((t, to))
    return t


def reader():
    global stop
    for line in sys.stdin:
        with lock:
            commands.append(line.split())
            lock.notify()
    with lock:
        stop = True
        lock.notify()


def main():
    if len(sys.argv) not in (2, 4):
        sys.exit("usage: phases.py READY [alternate SECONDS]")
    ready = sys.argv[1]
    every = float(sys.argv[3]) * 1e9 if len(sys.argv) == 4 else None
    marks = os.path.join(os.path.dirname(ready), "marks.jsonl")
    threading.Thread(target=reader, daemon=True).start()
    switch("phase_a")
    with open(ready + ".tmp", "w") as f:
        json.dump({"pid": os.getpid()}, f)
    os.rename(ready + ".tmp", ready)
    until, back, cmd, start = None, None, None, None
    next_switch = now() + every if every else None
    while True:
        WORK[phase]()
        t = now()
        if next_switch is not None and t >= next_switch:
            switch("phase_b" if phase == "phase_a" else "phase_a")
            next_switch += every
        if until is not None and t >= until:
            end = switch("phase_a")
            with open(marks, "a") as f:
                f.write(json.dumps({"cmd": cmd, "start": start, "end": end}) + "\n")
            until = None
        if until is None:
            with lock:
                if stop:
                    break
                got = commands.pop(0) if commands else None
            if got and got[0] in ("inside", "b"):
                cmd = got[0]
                start = switch("inside_pause" if cmd == "inside" else "phase_b")
                until = start + int(float(got[1]) * 1e6)
    path = os.path.join(os.path.dirname(ready), "truth.json")
    with open(path + ".tmp", "w") as f:
        json.dump(switches, f)
    os.rename(path + ".tmp", path)


main()
