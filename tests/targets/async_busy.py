# Target for the fidelity tests (runs on CPython 3.9-3.15, stdlib only).
#
# An asyncio program, one thread, whose tasks run short coroutine chains:
#   worker(k)   await chain(n): chain awaits compute twice, compute awaits leaf twice
#               (coroutines awaiting coroutines, none suspending), then sleeps 1 ms
#   fan_out()   asyncio.gather of five compute() coroutines, then sleeps 1 ms
#   flaky()     awaits fail(), which raises ValueError; inside the except block it calls
#               recover() (plain CPU work), awaits compute() and sleeps (so it is resumed
#               inside the except block too)
# Stdin is watched by the loop itself (add_reader): EOF ends the program.
#
# Once every task has finished three rounds, a coroutine of its own writes argv[1]
# (temp + rename), its truth taken from the interpreter, not from any profiler:
#   {"pid": N, "main": TID, "file": this file as the target sees it,
#    "root": [{"function": qualname, "file": ..., "line": N}, ...outermost first]
#            -- the main thread's frames from sys._current_frames(), outermost first, down
#               to and including the event loop's run_forever frame: every stack the main
#               thread has while the loop runs starts with these (run_forever's own line
#               moves; the others sit in their calls),
#    "except": [{"function": qualname, "first": N, "last": N, "try_first": N,
#                "try_last": N}, ...]
#            -- every except block of this file (the handler's lines, from `ast` on this
#               file's own source), the function holding it and its try body's lines,
#    "funcs": [qualnames of this file's functions]}

import ast
import asyncio
import json
import os
import sys
import threading


def qualname(code):
    return getattr(code, "co_qualname", code.co_name)


# --- the tasks -----------------------------------------------------------------------------

async def leaf(n):
    s = 0
    for i in range(n):
        s += i * i
    return s


async def compute(n):
    a = await leaf(n)
    b = await leaf(n // 2)
    return a + b


async def chain(n):
    first = await compute(n)
    return first + await compute(n // 3)


PROGRESS = {"worker": 0, "fan_out": 0, "flaky": 0}     # rounds each kind of task finished


async def worker(k):
    while True:
        await chain(300 + 50 * k)
        PROGRESS["worker"] += 1
        await asyncio.sleep(0.001)


async def fan_out():
    while True:
        await asyncio.gather(*(compute(200 + 20 * i) for i in range(5)))
        PROGRESS["fan_out"] += 1
        await asyncio.sleep(0.001)


async def fail(n):
    await leaf(n)
    raise ValueError(n)


def recover(n):
    s = 0
    for i in range(n):
        s += i % 7
    return s


async def flaky():
    rounds = 0
    while True:
        rounds += 1
        try:
            await fail(100)
        except ValueError:
            recover(3000)
            await compute(300)
            await asyncio.sleep(0.001 if rounds % 4 else 0)
            recover(1000)
        PROGRESS["flaky"] += 1
        await asyncio.sleep(0.001)


# --- the truth -----------------------------------------------------------------------------

def except_blocks():
    """Every except handler of this file, with the function that holds it and the lines of
    the try body it handles."""
    with open(__file__) as f:
        tree = ast.parse(f.read())
    out = []

    def visit(node, func):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                visit(child, child.name)
            else:
                if isinstance(child, ast.Try):
                    for h in child.handlers:
                        out.append({"function": func, "first": h.lineno, "last": h.end_lineno,
                                    "try_first": child.body[0].lineno,
                                    "try_last": child.body[-1].end_lineno})
                visit(child, func)

    visit(tree, "<module>")
    return out


def own_functions():
    with open(__file__) as f:
        tree = ast.parse(f.read())
    return sorted({n.name for n in ast.walk(tree)
                   if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))})


def root_frames(loop):
    """The main thread's frames, outermost first, down to run_forever's."""
    frame = sys._current_frames()[threading.get_ident()]
    frames = []
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back
    frames.reverse()
    forever = type(loop).run_forever.__code__
    for i, f in enumerate(frames):
        if f.f_code is forever:
            return [{"function": qualname(g.f_code), "file": g.f_code.co_filename,
                     "line": g.f_lineno} for g in frames[:i + 1]]
    raise RuntimeError("run_forever is not on the main thread's stack")


async def announce(ready):
    while min(PROGRESS.values()) < 3:    # every task has run its round a few times
        await asyncio.sleep(0)
    loop = asyncio.get_running_loop()
    truth = {"pid": os.getpid(), "main": threading.get_native_id(),
             "file": os.path.abspath(__file__), "root": root_frames(loop),
             "except": except_blocks(), "funcs": own_functions()}
    tmp = ready + ".tmp"
    with open(tmp, "w") as f:
        json.dump(truth, f)
    os.rename(tmp, ready)


def stdin_readable(done):
    if not os.read(0, 4096) and not done.done():
        done.set_result(None)


async def amain(ready):
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    loop.add_reader(0, stdin_readable, done)
    tasks = [asyncio.ensure_future(worker(k)) for k in range(3)]
    tasks += [asyncio.ensure_future(fan_out()), asyncio.ensure_future(flaky())]
    await announce(ready)
    await done
    loop.remove_reader(0)
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: async_busy.py READY_PATH")
    asyncio.run(amain(sys.argv[1]))


main()
