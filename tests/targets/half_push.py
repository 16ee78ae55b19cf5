# Target for the snapshot half-pushed test (CPython 3.11).
#
# The main thread calls outer() -> inner(), which parks in os.read(0) until stdin's EOF.
# Just before it parks, inner() writes argv[1] (temp + rename): its stack from
# sys._getframe(), innermost first, and the addresses (id()) of the function objects
# inner, outer and other and of inner's and outer's code objects -- what a test needs to
# find their frames in a snapshot and rewrite them as a frame being pushed for other()
# would look half-way: the caller's consumed slots and the new frame's f_func naming
# other, its code still inner's. other() is never called.

import json
import os
import sys
import threading

with open(__file__) as _src:
    PARK_LINE = [n for n, l in enumerate(_src, 1) if l.rstrip().endswith("# PARK")][0]


def other():
    pass


def inner(ready):
    frames = []
    f = sys._getframe()
    while f is not None:
        frames.append({"function": f.f_code.co_name, "file": f.f_code.co_filename, "line": f.f_lineno})
        f = f.f_back
    frames[0]["line"] = PARK_LINE
    doc = {"pid": os.getpid(), "main": threading.get_native_id(), "frames": frames,
           "ids": {"inner": id(inner), "inner_code": id(inner.__code__), "outer": id(outer),
                   "outer_code": id(outer.__code__), "other": id(other)}}
    with open(ready + ".tmp", "w") as fp:
        json.dump(doc, fp)
    os.rename(ready + ".tmp", ready)
    os.read(0, 1)                   # PARK


def outer(ready):
    inner(ready)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: half_push.py READY_PATH")
    outer(sys.argv[1])


main()
