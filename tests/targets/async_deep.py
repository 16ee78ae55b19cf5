"""Benchmark target for --async: one event loop, NTASKS worker tasks under a gather in a
task under the root task, each awaiting coroutines DEPTH deep and then spinning in a
pure-Python loop for 1 ms before it yields (asyncio.sleep(0)) to the next; NIDLE more
tasks wait on an Event (each through a coroutine 3 deep). Writes READY (temp + rename)
once every worker spins; exits after SECONDS.

    python async_deep.py READY DEPTH NTASKS NIDLE SECONDS
"""
import asyncio
import os
import sys
import time

sys.setrecursionlimit(10000)

READY, DEPTH, NTASKS, NIDLE, SECONDS = (sys.argv[1], int(sys.argv[2]), int(sys.argv[3]),
                                         int(sys.argv[4]), float(sys.argv[5]))


async def spin(started, i):
    started.add(i)
    while True:
        end = time.perf_counter() + 0.001
        while time.perf_counter() < end:
            pass
        await asyncio.sleep(0)


async def deep(n, started, i):
    if n <= 1:
        await spin(started, i)
    else:
        await deep(n - 1, started, i)


async def workers(started):
    await asyncio.gather(*[asyncio.create_task(deep(DEPTH, started, i), name="worker-%d" % i)
                           for i in range(NTASKS)])


async def idle3(event):
    await event.wait()


async def idle2(event):
    await idle3(event)


async def idle1(event):
    await idle2(event)


async def main():
    loop = asyncio.get_running_loop()
    event = asyncio.Event()
    idle = [loop.create_task(idle1(event), name="idle-%d" % i) for i in range(NIDLE)]
    started = set()
    work = loop.create_task(workers(started), name="workers")
    while len(started) < NTASKS:
        await asyncio.sleep(0.001)
    with open(READY + ".tmp", "w") as f:
        f.write("%d\n" % os.getpid())
    os.rename(READY + ".tmp", READY)
    loop.call_later(SECONDS, os._exit, 0)
    await work
    del idle


asyncio.run(main())
