# Target for the call-kinds test (runs on CPython 3.9-3.15).
#
# Parks one thread per way the interpreter can enter a Python function -- a plain call,
# a property, __getitem__, __getattribute__, __init__, a generator under `for` and under
# next(), a bound method kept in a variable, f(*args, **kwargs), keyword arguments, a
# decorator's wrapper, sorted(key=...), __call__, an await chain, an operator (__add__),
# `with` (__enter__), a class body, super().__init__ -- each blocked in a C call
# (lock.acquire on a lock the main thread holds) inside the function so entered. Every
# path first runs WARM times without blocking, so the interpreter has specialized the
# instructions on it (3.11+), as in a long-running program. Then the ground truth from
# sys._current_frames() goes to argv[1] (temp + rename), in remora's dump JSON shape,
# and the main thread blocks reading stdin until EOF.
#
# Nothing moves after the truth is written: a profiler that reads these threads and
# reports an error or a different stack is rejecting or mangling a live, still stack.

import json
import os
import sys
import threading
import time

WARM = 200
BLOCK = threading.Lock()          # held by main for the whole run: every worker parks on it
_park = threading.local()         # per thread: block now (after warm-up)?
_announced = {}
_announced_lock = threading.Lock()


def park():
    """Block in a C call if this thread is past its warm-up; record where the caller is."""
    if getattr(_park, "now", False):
        caller = sys._getframe(1)
        with _announced_lock:
            _announced[threading.get_ident()] = (caller.f_code, caller.f_lineno + 1)
        BLOCK.acquire()



# Each kind: a function that enters leaf-like code in one particular way. The innermost
# Python frame is always one that called park() -> BLOCK.acquire().

class WithProperty:
    @property
    def prop(self):
        park()
        return 1


class WithGetitem:
    def __getitem__(self, i):
        park()
        return i


class WithGetattribute:
    def __getattribute__(self, name):
        park()
        return 1


class WithInit:
    def __init__(self):
        park()


class Base:
    def __init__(self):
        park()


class Derived(Base):
    def __init__(self):
        super().__init__()


class WithCall:
    def __call__(self):
        park()


class WithAdd:
    def __add__(self, other):
        park()
        return self


class WithEnter:
    def __enter__(self):
        park()
        return self

    def __exit__(self, *exc):
        return False


class WithMethod:
    def method(self):
        park()


def gen_body():
    park()
    yield 1


def plain_callee(a, b=2, *, c=3):
    park()


def decorate(fn):
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)
    return wrapper


@decorate
def decorated():
    park()


def key_fn(x):
    park()
    return x


async def co_inner():
    park()


async def co_outer():
    await co_inner()


def kind_plain():
    plain_callee(1)


def kind_property():
    WithProperty().prop


def kind_getitem():
    WithGetitem()[0]


def kind_getattribute():
    WithGetattribute().anything


def kind_init():
    WithInit()


def kind_super_init():
    Derived()


def kind_for_generator():
    for _ in gen_body():
        pass


def kind_next_generator():
    next(gen_body())


def kind_bound_method():
    m = WithMethod().method
    m()


def kind_star_args():
    args, kwargs = (1,), {"b": 2}
    plain_callee(*args, **kwargs)


def kind_keywords():
    plain_callee(1, b=2, c=4)


def kind_decorator():
    decorated()


def kind_sorted_key():
    sorted([1], key=key_fn)


def kind_dunder_call():
    WithCall()()


def kind_coroutine():
    co = co_outer()
    try:
        co.send(None)
    except StopIteration:
        pass


def kind_operator():
    WithAdd() + 1


def kind_with():
    with WithEnter():
        pass


def kind_class_body():
    class Body:
        park()
    return Body


def kind_lambda():
    (lambda: park())()


KINDS = [(name[5:].replace("_", "-"), fn) for name, fn in sorted(globals().items())
         if name.startswith("kind_")]


def worker(fn):
    for _ in range(WARM):
        fn()
    _park.now = True
    fn()


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
    """Wait until every worker sits in BLOCK.acquire() called from park()."""
    park_code = park.__code__
    while True:
        frames = sys._current_frames()
        pending = [t.name for t in threads
                   if t.ident not in frames or frames[t.ident].f_code is not park_code
                   or t.ident not in _announced]
        del frames
        if not pending:
            return
        if time.monotonic() > deadline:
            sys.exit("call_kinds: threads never parked: " + ", ".join(pending))
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
        sys.exit("usage: call_kinds.py TRUTH_PATH")
    path = sys.argv[1]
    BLOCK.acquire()
    threads = [threading.Thread(target=worker, args=(fn,), name=name, daemon=True)
               for name, fn in KINDS]
    for t in threads:
        t.start()
    wait_parked(threads, time.monotonic() + 20)
    current = sys._current_frames(); write_truth(path, current); sys.stdin.buffer.read()


main()
