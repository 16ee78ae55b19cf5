# Target for the known-stacks functional test (runs on CPython 3.9-3.15).
#
# Parks six non-main threads at known stacks, each blocked in a C call (lock.acquire on a
# lock the main thread holds) with no Python frame of its own:
#   deep          300 recursive frames
#   nested-class  Outer.Inner.method
#   nested-func   outer.<locals>.inner, called through a lambda
#   generator     a generator body (via yield from) running under next()
#   coroutine     a coroutine body (via await) driven by coro.send(None)
#   non-ascii     café -> функция -> 𠀀 (1-, 2- and 4-byte str kinds) -> code compiled
#                 from a string ("<generated>")
# Then writes the ground truth from sys._current_frames() to argv[1] (temp + rename) and
# blocks reading stdin until EOF. The truth file has remora's JSON shape:
#   {"pid": N, "python": "3.12.1", "threads": [{"native_id": N, "name": "...", "main": bool,
#     "frames": [{"function": ..., "file": ..., "line": ...}, ...innermost first]}]}
# The main thread captures its own frames and parks on the same source line, so its
# recorded line is the line it sits on while remora looks at it.

import json
import os
import sys
import threading
import time

DEPTH = 300
BLOCK = threading.Lock()          # held by main for the whole run: every worker parks on it
_announced = {}                   # thread ident -> (code object, line) of its blocking call
_announced_lock = threading.Lock()


def announce():
    """Record the caller's code and line: the line of the blocking call that follows it."""
    caller = sys._getframe(1)
    with _announced_lock:
        _announced[threading.get_ident()] = (caller.f_code, caller.f_lineno)


# (a) deep recursion -------------------------------------------------------------------

def deep_leaf():
    announce(); BLOCK.acquire()


def recurse(n):
    if n <= 1:
        return deep_leaf()
    return recurse(n - 1)


def thread_deep():
    recurse(DEPTH)


# (b) method of a nested class ----------------------------------------------------------

class Outer:
    class Inner:
        def method(self):
            announce(); BLOCK.acquire()


def thread_nested_class():
    Outer.Inner().method()


# (c) nested function, reached through a lambda -------------------------------------------

def outer():
    def inner():
        announce(); BLOCK.acquire()
    call = lambda: inner()
    call()


def thread_nested_func():
    outer()


# (d) running generator -----------------------------------------------------------------

def gen_inner():
    announce(); BLOCK.acquire()
    yield 1


def gen_outer():
    yield from gen_inner()


def thread_generator():
    gen = gen_outer()
    next(gen)


# (e) coroutine driven by send(None) -----------------------------------------------------

async def co_inner():
    announce(); BLOCK.acquire()


async def co_outer():
    await co_inner()


def thread_coroutine():
    coro = co_outer()
    coro.send(None)


# (f) non-ASCII names, then code compiled from a string ------------------------------------

GENERATED_SRC = """\
def generated(announce, lock):
    x = 1
    announce(); lock.acquire()

generated(announce, lock)
"""


def 𠀀():
    code = compile(GENERATED_SRC, "<generated>", "exec")
    exec(code, {"announce": announce, "lock": BLOCK})


def функция():
    𠀀()


def café():
    функция()


def thread_non_ascii():
    café()


WORKERS = [
    ("deep", thread_deep),
    ("nested-class", thread_nested_class),
    ("nested-func", thread_nested_func),
    ("generator", thread_generator),
    ("coroutine", thread_coroutine),
    ("non-ascii", thread_non_ascii),
]


def function_name(code):
    return getattr(code, "co_qualname", code.co_name)


def frames_of(frame):
    out = []
    while frame is not None:
        out.append({"function": function_name(frame.f_code),
                    "file": frame.f_code.co_filename,
                    "line": frame.f_lineno})
        frame = frame.f_back
    return out


def wait_parked(threads, deadline):
    """Wait until every worker's innermost frame sits on its announced blocking line."""
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
            sys.exit("known_stacks: threads never parked: " + ", ".join(pending))
        time.sleep(0.002)


def version_string():
    v = sys.version_info
    s = "%d.%d.%d" % (v.major, v.minor, v.micro)
    if v.releaselevel != "final":
        s += {"alpha": "a", "beta": "b", "candidate": "rc"}[v.releaselevel] + str(v.serial)
    return s


def write_truth(path, current):
    by_ident = {t.ident: t for t in threading.enumerate()}
    main_ident = threading.main_thread().ident
    threads = []
    for ident, frame in current.items():
        t = by_ident[ident]
        threads.append({"native_id": t.native_id, "name": t.name,
                        "main": ident == main_ident, "frames": frames_of(frame)})
    threads.sort(key=lambda t: (not t["main"], t["native_id"]))
    truth = {"pid": os.getpid(), "python": version_string(), "threads": threads}
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(truth, f, indent=1)
    os.rename(tmp, path)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: known_stacks.py TRUTH_PATH")
    path = sys.argv[1]
    BLOCK.acquire()
    threads = [threading.Thread(target=fn, name=name, daemon=True) for name, fn in WORKERS]
    for t in threads:
        t.start()
    wait_parked(threads, time.monotonic() + 20)
    # Capture, write and park on one line: this frame's f_lineno is the same in all three.
    current = sys._current_frames(); write_truth(path, current); sys.stdin.buffer.read()


main()
