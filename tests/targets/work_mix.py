# Target for the fidelity tests and benchmark (runs on CPython 3.9-3.15, stdlib only).
#
# Looks like an ordinary program: the main thread's loop() cycles over seven work
# functions, each a top-level function called from the loop, each made of many short calls:
#   recurse         fib(18), recursive (~8,000 calls)
#   json_roundtrip  json.loads(json.dumps(d)) of a small document, many times
#   regex_scan      a compiled regex's findall over a short text, many times
#   build_objects   2,000 small dataclass objects
#   sort_records    sorted(..., key=lambda ...): C calling back into Python
#   pipeline        chained generator functions and expressions consumed by sum()
#   callback_sub    re.sub with a Python function as the replacement (C calling Python)
# The loop times each call itself with time.perf_counter_ns (inclusive wall time; the vDSO
# clock, no system call) and adds it to that function's total. The main thread's CPU time
# (time.thread_time_ns, a system call) is read only at marks: a system call around each
# call would be where a busy machine preempts the target, time outside every function.
#
# After the first cycle main writes argv[1] (temp + rename):
#   {"pid": N, "main": TID, "file": this file as the target sees it,
#    "functions": [names, in loop order], "loop": "loop"}
# Between cycles it polls stdin: each line "mark" appends the running totals as one JSON
# line to marks.jsonl beside argv[1]:
#   {"at": perf_counter_ns, "cpu": thread_time_ns, "cycles": N,
#    "wall": {name: ns, ...}, "calls": {name: N, ...}}
# so the test takes as truth the difference between the marks around a recording: the
# window it recorded. At EOF on stdin it appends one last mark ("eof": true) and exits.

import dataclasses
import json
import os
import re
import select
import sys
import threading
import time

perf_ns = time.perf_counter_ns
cpu_ns = time.thread_time_ns


# --- the work -----------------------------------------------------------------------------

def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def recurse():
    return fib(18)


DOC = {"id": 12345, "name": "remora", "tags": ["a", "bb", "ccc"], "ok": True,
       "items": [{"k": i, "v": "x" * (i % 7), "f": i / 3.0} for i in range(12)]}


def json_roundtrip():
    n = 0
    for _ in range(60):
        n += len(json.loads(json.dumps(DOC)))
    return n


WORDS = re.compile(r"\b[a-z]+[0-9]*\b")
TEXT = "alpha beta7 gamma delta99 epsilon zeta eta3 theta iota kappa lambda mu " * 4


def regex_scan():
    n = 0
    for _ in range(120):
        n += len(WORDS.findall(TEXT))
    return n


@dataclasses.dataclass
class Point:
    x: int
    y: int
    label: str


KEPT = [None]


def build_objects():
    pts = [Point(i, i * 2, "p") for i in range(2000)]
    # the last call's objects are freed here, inside the function: a list freed as the
    # function returns would be freed after the interpreter has popped its frame (in the
    # caller, by the profiler's account) but before the loop's clock stops (in it, by the
    # target's)
    KEPT[0] = pts
    return len(pts)


RECORDS = [((i * 7919) % 1000, "r%d" % i) for i in range(1500)]


def sort_records():
    return sorted(RECORDS, key=lambda r: (r[0] % 17, r[1]))[0]


def numbers(n):
    for i in range(n):
        yield i


def evens(it):
    for i in it:
        if i % 2 == 0:
            yield i


def pipeline():
    squares = (i * i for i in evens(numbers(8000)))
    small = (s % 1000 for s in squares)
    return sum(s + 1 for s in small)


VOWELS = re.compile(r"[aeiou]")
SUB_TEXT = "the quick brown fox jumps over the lazy dog " * 12


def upper_vowel(m):
    return m.group(0).upper()


def callback_sub():
    n = 0
    for _ in range(12):
        n += len(VOWELS.sub(upper_vowel, SUB_TEXT))
    return n


WORK = [recurse, json_roundtrip, regex_scan, build_objects, sort_records, pipeline,
        callback_sub]


# --- the loop -----------------------------------------------------------------------------

def snapshot(wall, calls, cycles, **extra):
    snap = {"at": perf_ns(), "cpu": cpu_ns(), "cycles": cycles, "wall": dict(wall),
            "calls": dict(calls)}
    snap.update(extra)
    return json.dumps(snap) + "\n"


def loop(ready):
    names = [fn.__name__ for fn in WORK]
    work = list(zip(WORK, names))
    wall = {name: 0 for name in names}
    calls = {name: 0 for name in names}
    marks = open(os.path.join(os.path.dirname(ready), "marks.jsonl"), "w")
    stdin = sys.stdin.buffer.raw
    pending = b""
    cycles = 0
    announced = False
    while True:
        for fn, name in work:
            t0 = perf_ns()
            fn()
            t1 = perf_ns()
            wall[name] += t1 - t0
            calls[name] += 1
        cycles += 1
        if not announced:
            tmp = ready + ".tmp"
            with open(tmp, "w") as f:
                json.dump({"pid": os.getpid(), "main": threading.get_native_id(),
                           "file": os.path.abspath(__file__), "functions": names,
                           "loop": "loop"}, f)
            os.rename(tmp, ready)
            announced = True
        if select.select([stdin], [], [], 0)[0]:
            data = os.read(stdin.fileno(), 4096)
            if not data:
                marks.write(snapshot(wall, calls, cycles, eof=True))
                marks.close()
                return
            pending += data
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                if line.strip() == b"mark":
                    marks.write(snapshot(wall, calls, cycles))
                    marks.flush()


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: work_mix.py READY_PATH")
    loop(sys.argv[1])


main()
