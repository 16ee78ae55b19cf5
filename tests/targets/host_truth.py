# Target of library/hosts/* (tests/functional/library_tests.py): one process per build
# that every host interpreter reads, each thread in a state whose status bits the target
# knows (runs on CPython 3.9-3.15).
#
#   main       writes the truth, then blocks reading stdin (EOF ends the program): the
#              main thread, no GIL, not on a CPU, no exception
#   parked     parked_leaf() <- parked(): blocked in lock.acquire on a lock main holds: no
#              GIL, not on a CPU, no exception
#   except     inside an except block (a ValueError caught), blocked on the same lock:
#              THREAD_STATUS_HAS_EXCEPTION, no GIL, not on a CPU
#   busy       spins in pure Python in spin() at nice 19 (as cheap to the machine as a
#              spinning thread gets): holds the GIL (no other thread of the process wants
#              it once main parks) and is on a CPU (running or runnable)
#   asyncio    an event loop: task "root" (the loop's main task) made "parent", "child-a",
#              "child-b"; parent awaits child-a; child-a and child-b wait on an Event;
#              root records asyncio.all_tasks() and waits on the Event too
# The truth (argv[1], temp + rename):
#   {"pid", "python", "roles": {role: native id}, "threads": [{"native_id", "main",
#    "frames": [{"function", "file", "line"}, ...innermost first]}] (main, parked, except
#    only: the threads whose stacks stay put), "loop_thread": native id,
#    "tasks": [{"id": id(task), "name", "awaited_by": [names]}]}

import asyncio
import json
import os
import sys
import threading
import time

BLOCK = threading.Lock()          # held by main for the whole run
_announced = {}                   # thread ident -> (code, line) of its blocking call
_announced_lock = threading.Lock()
ROLES = {}                        # role -> native id
LOOP = {}                         # the asyncio thread's truth, once it has it
LOOP_READY = threading.Event()


def native_id():
    return threading.get_native_id()


def announce():
    caller = sys._getframe(1)
    with _announced_lock:
        _announced[threading.get_ident()] = (caller.f_code, caller.f_lineno)


def parked_leaf():
    announce(); BLOCK.acquire()


def parked():
    ROLES["parked"] = native_id()
    parked_leaf()


def excepting():
    ROLES["except"] = native_id()
    try:
        raise ValueError("handled while parked")
    except ValueError:
        announce(); BLOCK.acquire()


def spin():
    ROLES["busy"] = native_id()
    try:
        os.setpriority(os.PRIO_PROCESS, native_id(), 19)
    except (AttributeError, OSError):
        pass
    n = 0
    while True:
        n += 1


async def wait_on(ev):
    await ev.wait()


async def parent(child):
    await child


async def root():
    ev = asyncio.Event()
    a = asyncio.ensure_future(wait_on(ev))
    a.set_name("child-a")
    b = asyncio.ensure_future(wait_on(ev))
    b.set_name("child-b")
    p = asyncio.ensure_future(parent(a))
    p.set_name("parent")
    awaiters = {"child-a": ["parent"]}
    for _ in range(3):            # every task once into its first await
        await asyncio.sleep(0)
    LOOP["tasks"] = [{"id": id(t), "name": t.get_name(),
                      "awaited_by": awaiters.get(t.get_name(), [])}
                     for t in asyncio.all_tasks()]
    LOOP["thread"] = native_id()
    LOOP_READY.set()
    await ev.wait()


def run_loop():
    loop = asyncio.new_event_loop()
    task = loop.create_task(root())
    task.set_name("root")
    loop.run_until_complete(task)


def function_name(code):
    return getattr(code, "co_qualname", code.co_name)


def frames_of(frame):
    out = []
    while frame is not None:
        out.append({"function": function_name(frame.f_code), "file": frame.f_code.co_filename,
                    "line": frame.f_lineno})
        frame = frame.f_back
    return out


def wait_parked(threads, deadline):
    """Until each thread's innermost frame sits on its announced blocking line."""
    while True:
        frames = sys._current_frames()
        with _announced_lock:
            pending = [t.name for t in threads
                       if t.ident not in _announced or t.ident not in frames
                       or (frames[t.ident].f_code, frames[t.ident].f_lineno)
                       != _announced[t.ident]]
        del frames
        if not pending:
            return
        if time.monotonic() > deadline:
            sys.exit("host_truth: threads never parked: " + ", ".join(pending))
        time.sleep(0.002)


def version_string():
    v = sys.version_info
    s = "%d.%d.%d" % (v.major, v.minor, v.micro)
    if v.releaselevel != "final":
        s += {"alpha": "a", "beta": "b", "candidate": "rc"}[v.releaselevel] + str(v.serial)
    return s


def write_truth(path, current, parked_threads):
    ROLES["main"] = native_id()
    threads = [{"native_id": native_id(), "main": True,
                "frames": frames_of(current[threading.get_ident()])}]
    for t in parked_threads:
        threads.append({"native_id": t.native_id, "main": False,
                        "frames": frames_of(current[t.ident])})
    truth = {"pid": os.getpid(), "python": version_string(), "roles": ROLES,
             "threads": threads, "loop_thread": LOOP["thread"], "tasks": LOOP["tasks"]}
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(truth, f, indent=1)
    os.rename(tmp, path)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: host_truth.py TRUTH_PATH")
    path = sys.argv[1]
    BLOCK.acquire()
    parked_threads = [threading.Thread(target=parked, name="parked", daemon=True),
                      threading.Thread(target=excepting, name="except", daemon=True)]
    for t in parked_threads:
        t.start()
    threading.Thread(target=run_loop, name="asyncio", daemon=True).start()
    wait_parked(parked_threads, time.monotonic() + 20)
    if not LOOP_READY.wait(20):
        sys.exit("host_truth: the event loop never recorded its tasks")
    busy = threading.Thread(target=spin, name="busy", daemon=True)
    busy.start()
    while "busy" not in ROLES:
        time.sleep(0.002)
    # Capture, write and park on one line: this frame's f_lineno is the same in all three.
    current = sys._current_frames(); write_truth(path, current, parked_threads); sys.stdin.buffer.read()


main()
