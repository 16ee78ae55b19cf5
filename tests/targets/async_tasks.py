# Target of tests/functional/async_tests.py: an asyncio program whose tasks wait in every
# way the asyncio tests check, and which writes its own truth once they all wait.
#
#   argv: OUT [--idle N] [--churn] [--pytask] [--edge-name] [--subclass]
#
# Tasks (names set by the program; the running one is the loop's main task, "main"):
#   gather-parent    awaits asyncio.gather(gather-a, gather-b)
#   gather-a/-b      await an Event through leaf_wait() (a coroutine awaiting a coroutine)
#   tg-parent        (3.11+) in `async with TaskGroup()` holding tg-1, tg-2
#   outer            creates inner with create_task and awaits it (plain `await task`)
#   inner            awaits asyncio.sleep through a generator-free chain of coroutines
#   shield-parent    awaits asyncio.shield(shielded)
#   shielded         awaits an Event
#   bare-future      awaits a Future no task completes
#   cycle-a/-b       each awaits the other (an await cycle: both wait forever)
#   idle-K           (--idle N) N tasks awaiting one Event
#   edge-task        (--edge-name) awaits an Event; its name is a copy of the str
#                    "edge-task" made to end 8 bytes before a page the process cannot
#                    read (PROT_NONE), as a small object at the end of an arena can: a
#                    reader that reads more than the object holds fails there; and a
#                    thread named "edge-thread" the same way (truth: "edge_thread", its
#                    native id), parked
#   main             writes the truth, then spins on the CPU in spin() -> burn() forever
# --churn: a second thread runs its own loop, making and finishing tasks ("churn-K") as
# fast as it can (a task list changing while it is read). --pytask: tasks are the
# pure-Python asyncio.tasks._PyTask (a task factory), not the C module's. --subclass:
# every task is of a subclass (two levels deep) of the task class (with --pytask, of
# _PyTask; else of asyncio.Task, the C one), as a framework's task factory makes them.
#
# The truth (OUT, written through a temporary name): the main thread's native id, and for
# each task of asyncio.all_tasks(): id(), get_name(), its coroutine stack innermost first
# (the task's coroutine and each coroutine it awaits, walked by cr_await / gi_yieldfrom:
# function as co_qualname, file, the suspended frame's f_lineno), and the tasks awaiting
# it as the program recorded them when it made each link. Stdin's EOF ends the program.
import asyncio
import json
import os
import sys
import threading

OUT = sys.argv[1]
ARGS = sys.argv[2:]
IDLE = int(ARGS[ARGS.index("--idle") + 1]) if "--idle" in ARGS else 0
AWAITERS = {}           # task name -> names of the tasks that await it


def qual(code):
    return getattr(code, "co_qualname", code.co_name)


def chain(task):
    """The task's coroutines, innermost first: (function, file, line)."""
    frames = []
    coro = task.get_coro()
    seen = set()
    while coro is not None and id(coro) not in seen:
        seen.add(id(coro))
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        code = getattr(coro, "cr_code", None) or getattr(coro, "gi_code", None)
        if frame is None or code is None:
            break
        frames.append({"function": qual(code), "file": code.co_filename, "line": frame.f_lineno})
        coro = getattr(coro, "cr_await", None) if hasattr(coro, "cr_await") else \
            getattr(coro, "gi_yieldfrom", None)
    frames.reverse()
    return frames


async def leaf_wait(ev):
    await ev.wait()


async def gather_parent(ev):
    a = asyncio.ensure_future(leaf_wait(ev))
    a.set_name("gather-a")
    b = asyncio.ensure_future(leaf_wait(ev))
    b.set_name("gather-b")
    AWAITERS["gather-a"] = AWAITERS["gather-b"] = ["gather-parent"]
    await asyncio.gather(a, b)


async def tg_parent(ev):
    async with asyncio.TaskGroup() as tg:
        tg.create_task(leaf_wait(ev), name="tg-1")
        tg.create_task(leaf_wait(ev), name="tg-2")
        AWAITERS["tg-1"] = AWAITERS["tg-2"] = ["tg-parent"]


async def nap():
    await asyncio.sleep(3600)


async def inner_work():
    await nap()


async def outer():
    t = asyncio.ensure_future(inner_work())
    t.set_name("inner")
    AWAITERS["inner"] = ["outer"]
    await t


async def shield_parent(ev):
    s = asyncio.ensure_future(leaf_wait(ev))
    s.set_name("shielded")
    AWAITERS["shielded"] = ["shield-parent"]
    await asyncio.shield(s)


async def bare_future():
    fut = asyncio.get_running_loop().create_future()
    await fut


async def idle(ev):
    await ev.wait()


CYCLE = {}


async def cycle(me, other):
    await asyncio.sleep(0)          # both exist before either awaits the other
    AWAITERS[other] = [me]
    await CYCLE[other]


def burn(n):
    x = 0
    for i in range(n):
        x += i * i
    return x


def spin():
    while True:
        burn(2000)


def churn_thread(ready):
    async def short(k):
        await asyncio.sleep(0)

    async def churn_main():
        asyncio.current_task().set_name("churn-main")
        ready.set()
        k = 0
        while True:
            loop = asyncio.get_running_loop()
            ts = [loop.create_task(short(k + j), name="churn-%d" % (k + j)) for j in range(50)]
            k += 50
            await asyncio.gather(*ts)

    asyncio.run(churn_main())


def edge_str(text):
    """A str equal to text whose object ends 8 bytes before a PROT_NONE page: a byte copy
    of a fresh str (header, cached hash, characters) into an anonymous mapping, its
    reference count set high so that it is never freed."""
    import ctypes
    import mmap
    src = "".join(list(text))           # a new object, not an interned constant
    hash(src)
    size = sys.getsizeof(src)
    m = mmap.mmap(-1, 2 * mmap.PAGESIZE)
    base = ctypes.addressof(ctypes.c_char.from_buffer(m))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mprotect.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    if libc.mprotect(base + mmap.PAGESIZE, mmap.PAGESIZE, 0) != 0:
        raise OSError(ctypes.get_errno(), "mprotect")
    at = (base + mmap.PAGESIZE - size - 8) & ~15
    ctypes.memmove(at, id(src), size)
    ctypes.c_ssize_t.from_address(at).value = 1 << 29
    obj = ctypes.cast(at, ctypes.py_object).value
    EDGE_KEEP.append(m)
    assert obj == text and type(obj) is str and id(obj) + size <= base + mmap.PAGESIZE - 8
    return obj


EDGE_KEEP = []


def named(coro, name):
    t = asyncio.ensure_future(coro)
    t.set_name(name)
    return t


PYTASK = "--pytask" in ARGS
current_task = getattr(asyncio.tasks, "_py_current_task", asyncio.current_task) if PYTASK \
    else asyncio.current_task
all_tasks = asyncio.tasks._py_all_tasks if PYTASK and hasattr(asyncio.tasks, "_py_all_tasks") \
    else asyncio.all_tasks


async def main():
    me = current_task()
    me.set_name("main")
    ev = asyncio.Event()
    keep = [named(gather_parent(ev), "gather-parent"), named(outer(), "outer"),
            named(shield_parent(ev), "shield-parent"), named(bare_future(), "bare-future")]
    if hasattr(asyncio, "TaskGroup"):
        keep.append(named(tg_parent(ev), "tg-parent"))
    keep += [named(idle(ev), "idle-%d" % k) for k in range(IDLE)]
    edge_thread = None
    if "--edge-name" in ARGS:
        keep.append(named(idle(ev), edge_str("edge-task")))
        edge_thread = threading.Thread(target=threading.Event().wait, daemon=True,
                                       name=edge_str("edge-thread"))
        edge_thread.start()
    # an await cycle: each awaits the other, forever
    CYCLE["cycle-a"] = named(cycle("cycle-a", "cycle-b"), "cycle-a")
    CYCLE["cycle-b"] = named(cycle("cycle-b", "cycle-a"), "cycle-b")
    # every task reaches the await it stays in (each needs a few steps of the loop)
    for _ in range(20):
        await asyncio.sleep(0)
    tasks = [t for t in all_tasks() if t is not me and not t.get_name().startswith("churn-")]
    by_name = {t.get_name(): t for t in tasks}
    truth = {"native_id": threading.get_native_id(), "python": sys.version.split()[0],
             "ctask": type(me).__mro__[-3].__module__ == "_asyncio" and not PYTASK, "tasks": []}
    for t in tasks:
        truth["tasks"].append({
            "id": id(t), "name": t.get_name(), "state": "pending", "frames": chain(t),
            "awaited_by": sorted(id(by_name[n]) for n in AWAITERS.get(t.get_name(), []))})
    truth["tasks"].append({"id": id(me), "name": "main", "state": "running", "frames": None,
                           "awaited_by": []})
    if edge_thread is not None:
        truth["edge_thread"] = edge_thread.native_id
    truth["running_functions"] = [qual(main.__code__), qual(spin.__code__), qual(burn.__code__)]
    with open(OUT + ".tmp", "w") as f:
        json.dump(truth, f)
    os.rename(OUT + ".tmp", OUT)
    spin()


def watch_stdin():
    sys.stdin.read()
    os._exit(0)


if __name__ == "__main__":
    threading.Thread(target=watch_stdin, daemon=True).start()
    if "--churn" in ARGS:
        started = threading.Event()
        threading.Thread(target=churn_thread, args=(started,), daemon=True, name="churner").start()
        started.wait()
    if PYTASK or "--subclass" in ARGS:
        base = asyncio.tasks._PyTask if PYTASK else asyncio.Task
        if "--subclass" in ARGS:
            class AppTask(base):
                pass

            class AppTaskDeeper(AppTask):
                pass
            base = AppTaskDeeper
        loop = asyncio.new_event_loop()
        if PYTASK:
            asyncio.tasks.Task = asyncio.tasks._PyTask
        loop.set_task_factory(lambda lp, coro, **kw: base(coro, loop=lp, **kw))
        loop.run_until_complete(main())
    else:
        asyncio.run(main())
