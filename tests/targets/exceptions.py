# Target for the exception-mode test (runs on CPython 3.9-3.15).
#
# Three threads spin forever, each in a function of a known name:
#   handler: inside an `except KeyError` block, in handler_work() called from it;
#   gen:     inside an `except ValueError` block, in gen_work() called by a generator
#            that the block resumed: the thread's innermost exception slot is the
#            generator's own (empty), the one before it holds the ValueError;
#   plain:   after an `except` block that has finished (3.9/3.10 leave None in the slot),
#            in plain_work() called by a generator resumed outside any except block.
# Each looks at sys.exc_info() from its spinning function and at the frame that holds
# the except block (or would), before it spins. Once all three have, main writes argv[1]
# (temp + rename):
#   {"pid": N, "main": TID, "file": CO_FILENAME,
#    "threads": {ROLE: {"tid": TID, "exc_info": NAME or null, "work": FUNCTION,
#                       "outer": FUNCTION, "outer_line": LINE}}}
# and blocks reading stdin until EOF.

import json
import os
import sys
import threading

seen = {}
lock = threading.Lock()
all_seen = threading.Event()


def note(role, outer):
    """Records what this thread is: sys.exc_info() here, the frame `outer` and its line."""
    exc = sys.exc_info()[0]
    work = sys._getframe(1).f_code.co_name
    with lock:
        seen[role] = {"tid": threading.get_native_id(),
                      "exc_info": exc.__name__ if exc is not None else None,
                      "work": work, "outer": outer.f_code.co_name,
                      "outer_line": outer.f_lineno}
        if len(seen) == 3:
            all_seen.set()


def handler_work():
    note("handler", sys._getframe(1))
    n = 0
    while True:
        n += 1


def handler_thread():
    try:
        raise KeyError("handled")
    except KeyError:
        handler_work()


def gen_work():
    note("gen", sys._getframe(2))
    n = 0
    while True:
        n += 1


def gen_body():
    gen_work()
    yield


def gen_thread():
    g = gen_body()
    try:
        raise ValueError("handled")
    except ValueError:
        next(g)


def plain_work():
    note("plain", sys._getframe(2))
    n = 0
    while True:
        n += 1


def plain_body():
    plain_work()
    yield


def plain_thread():
    try:
        raise OSError("over")
    except OSError:
        pass
    next(plain_body())


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: exceptions.py READY_PATH")
    path = sys.argv[1]
    for fn in (handler_thread, gen_thread, plain_thread):
        threading.Thread(target=fn, name=fn.__name__, daemon=True).start()
    if not all_seen.wait(20):
        sys.exit("exceptions: threads never reached their loops")
    ready = {"pid": os.getpid(), "main": threading.get_native_id(),
             "file": main.__code__.co_filename, "threads": seen}
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(ready, f)
    os.rename(tmp, path)
    sys.stdin.buffer.read()


main()
