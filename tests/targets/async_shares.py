# Target for the record --async tests (runs on CPython 3.9-3.15).
#
# One event loop on the main thread. The task "root" (asyncio.run's, renamed) awaits the
# task "parent", which gathers three worker tasks "w60", "w30", "w10": each, in turn,
# spins on perf_counter for 6, 3 and 1 ms of a 10 ms cycle (in spin_60/30/10, called from
# its coroutine work_60/30/10) and yields (asyncio.sleep(0)), so the CPU goes 60/30/10 to
# them. Each worker accounts for itself its wall time (perf_counter), its CPU time
# (thread_time) and the time it stalled (gaps over STALL between two clock readings: the
# thread was not running). Three more tasks only wait: "sleeper" (nap -> deeper_nap ->
# asyncio.sleep), "waiter" awaiting the task "waitee" (which awaits an Event that is never
# set, in wait_forever -> Event.wait).
#
# Once the cycle runs, it writes argv[1] (temp + rename):
#   {"pid", "main": TID, "awaiters": {task: [awaiter chain, root first]},
#    "coros": {task: [coroutine functions (co_qualname on 3.11+), outermost first,
#               walked by cr_await now]},
#    "own": {worker: [its possible own frame paths, outermost first]},
#    "waiting": [the tasks that only wait]}
# The awaiter chains are the links the target made (who awaits whom); coros of a waiting
# task are walked on its own coroutine through cr_await (gi_yieldfrom), as a debugger would.
# Each line "mark" on stdin (read by a loop reader callback, outside every task) appends
# {"at", "wall": {task: s}, "cpu": {...}, "stall": {...}} to marks.jsonl beside argv[1].
# EOF on stdin ends it (os._exit from the reader callback). --subclass (argv[2]): every
# task is of a subclass of asyncio.Task (a task factory's), the loop run without asyncio.run.

import asyncio
import json
import os
import sys
import threading
import time

CYCLE = 0.010
SHARES = (("w60", 0.6), ("w30", 0.3), ("w10", 0.1))
STALL = 0.0005
NAMES = [n for n, _ in SHARES]
totals = {key: {n: 0.0 for n in NAMES} for key in ("wall", "cpu", "stall")}


def spin_until(end):
    stalled, last = 0.0, time.perf_counter()
    while last < end:
        now = time.perf_counter()
        if now - last > STALL:
            stalled += now - last
        last = now
    return stalled


def spin_60(end):
    return spin_until(end)


def spin_30(end):
    return spin_until(end)


def spin_10(end):
    return spin_until(end)


def account(name, fn, share):
    w0, c0 = time.perf_counter(), time.thread_time()
    stalled = fn(w0 + CYCLE * share)
    w1, c1 = time.perf_counter(), time.thread_time()
    totals["wall"][name] += w1 - w0
    totals["cpu"][name] += c1 - c0
    totals["stall"][name] += stalled


async def work_60(started):
    started.add("w60")
    while True:
        account("w60", spin_60, 0.6)
        await asyncio.sleep(0)


async def work_30(started):
    started.add("w30")
    while True:
        account("w30", spin_30, 0.3)
        await asyncio.sleep(0)


async def work_10(started):
    started.add("w10")
    while True:
        account("w10", spin_10, 0.1)
        await asyncio.sleep(0)


async def fan_out(started):
    loop = asyncio.get_running_loop()
    workers = [loop.create_task(work_60(started), name="w60"),
               loop.create_task(work_30(started), name="w30"),
               loop.create_task(work_10(started), name="w10")]
    await asyncio.gather(*workers)


async def deeper_nap():
    await asyncio.sleep(3600)


async def nap():
    await deeper_nap()


async def wait_forever(event):
    await event.wait()


async def wait_for_task(task):
    await task


def coro_functions(task):
    """The task's coroutine chain, outermost first, walked through cr_await / gi_yieldfrom
    while it is suspended."""
    out, c = [], task.get_coro()
    for _ in range(100):
        code = getattr(c, "cr_code", None) or getattr(c, "gi_code", None)
        if code is None:
            break
        out.append(getattr(code, "co_qualname", code.co_name))   # as remora names it
        c = getattr(c, "cr_await", None) if hasattr(c, "cr_await") else getattr(c, "gi_yieldfrom", None)
        if c is None:
            break
    return out


def on_stdin(marks):
    data = os.read(0, 4096)
    if not data:
        os._exit(0)
    for line in data.split(b"\n"):
        if line.strip() == b"mark":
            marks.write(json.dumps(dict(totals, at=time.perf_counter())) + "\n")
            marks.flush()


async def root_main(ready):
    loop = asyncio.get_running_loop()
    asyncio.current_task().set_name("root")
    started = set()
    event = asyncio.Event()
    sleeper = loop.create_task(nap(), name="sleeper")
    waitee = loop.create_task(wait_forever(event), name="waitee")
    waiter = loop.create_task(wait_for_task(waitee), name="waiter")
    parent = loop.create_task(fan_out(started), name="parent")
    while len(started) < 3:
        await asyncio.sleep(0.001)
    # every task has run to its first wait: their chains are what the ready file says
    marks = open(os.path.join(os.path.dirname(ready), "marks.jsonl"), "w")
    loop.add_reader(0, on_stdin, marks)
    tasks = {"sleeper": sleeper, "waitee": waitee, "waiter": waiter, "parent": parent}
    truth = {
        "pid": os.getpid(),
        "main": threading.get_native_id(),
        "awaiters": {"root": ["root"], "parent": ["root", "parent"],
                     "w60": ["root", "parent", "w60"], "w30": ["root", "parent", "w30"],
                     "w10": ["root", "parent", "w10"], "sleeper": ["sleeper"],
                     "waiter": ["waiter"], "waitee": ["waiter", "waitee"]},
        "coros": dict({n: coro_functions(t) for n, t in tasks.items()},
                      root=["root_main"]),
        # a running worker's own frames: a prefix of one of these (its spin, or its yield)
        "own": {w: [["work_" + w[1:], "account", "spin_" + w[1:], "spin_until"],
                    ["work_" + w[1:], "sleep", "__sleep0"]] for w in NAMES},
        "waiting": ["root", "parent", "sleeper", "waiter", "waitee"],
        "names": sorted(t.get_name() for t in asyncio.all_tasks()),
    }
    tmp = ready + ".tmp"
    with open(tmp, "w") as f:
        json.dump(truth, f)
    os.rename(tmp, ready)
    await parent


def main():
    if len(sys.argv) not in (2, 3) or sys.argv[2:] not in ([], ["--subclass"]):
        sys.exit("usage: async_shares.py READY_PATH [--subclass]")
    if sys.argv[2:] != ["--subclass"]:
        asyncio.run(root_main(sys.argv[1]))
        return

    class AppTask(asyncio.Task):
        pass
    loop = asyncio.new_event_loop()
    loop.set_task_factory(lambda lp, coro, **kw: AppTask(coro, loop=lp, **kw))
    loop.run_until_complete(root_main(sys.argv[1]))


main()
