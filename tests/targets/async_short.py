# Target for the record --async tests of short-lived tasks (issue 48; CPython 3.9-3.15).
#
# One event loop on the main thread. The task "root" (asyncio.run's, renamed) makes, one
# after the other, tasks "a-N" and "b-N" (two of kind a, then one of kind b) and awaits
# each: a task spins on perf_counter for LIFE_MS (argv[2]) in spin_a / spin_b, called from
# its coroutine job_a / job_b, and finishes. Each task lives well under the time between
# two readings of the task list by a sampler, so a sampler that names a running task only
# from a list read earlier misses most of them. The target counts for itself how many
# tasks of each kind it made and the wall time each kind spun.
#
# Once tasks run, it writes argv[1] (temp + rename):
#   {"pid", "main": TID, "own": {kind: [its coroutine's frames, outermost first]},
#    "life_ms"}
# Each line "mark" on stdin (read by a loop reader callback, outside every task) appends
# {"at", "made": {kind: n}, "wall": {kind: s}} to marks.jsonl beside argv[1]. EOF on
# stdin ends it.

import asyncio
import json
import os
import sys
import threading
import time

made = {"a": 0, "b": 0}
wall = {"a": 0.0, "b": 0.0}


def spin_until(end):
    while time.perf_counter() < end:
        pass


def spin_a(end):
    spin_until(end)


def spin_b(end):
    spin_until(end)


async def job_a(life):
    t0 = time.perf_counter()
    spin_a(t0 + life)
    wall["a"] += time.perf_counter() - t0


async def job_b(life):
    t0 = time.perf_counter()
    spin_b(t0 + life)
    wall["b"] += time.perf_counter() - t0


def on_stdin(marks):
    data = os.read(0, 4096)
    if not data:
        os._exit(0)
    for line in data.split(b"\n"):
        if line.strip() == b"mark":
            marks.write(json.dumps({"at": time.perf_counter(), "made": made, "wall": wall}) + "\n")
            marks.flush()


async def root_main(ready, life):
    loop = asyncio.get_running_loop()
    asyncio.current_task().set_name("root")
    n = 0
    while True:
        kind = "b" if n % 3 == 2 else "a"
        job = job_a if kind == "a" else job_b
        made[kind] += 1
        await loop.create_task(job(life), name="%s-%d" % (kind, n))
        n += 1
        if n == 10:
            marks = open(os.path.join(os.path.dirname(ready), "marks.jsonl"), "w")
            loop.add_reader(0, on_stdin, marks)
            truth = {"pid": os.getpid(), "main": threading.get_native_id(),
                     "own": {k: ["job_" + k, "spin_" + k, "spin_until"] for k in "ab"},
                     "life_ms": life * 1000.0}
            tmp = ready + ".tmp"
            with open(tmp, "w") as f:
                json.dump(truth, f)
            os.rename(tmp, ready)


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: async_short.py READY_PATH LIFE_MS")
    asyncio.run(root_main(sys.argv[1], float(sys.argv[2]) / 1000.0))


main()
