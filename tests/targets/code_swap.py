# Target for the code-object swap test (runs on CPython 3.9-3.15).
#
# The main thread calls one function after another, each a fresh code object made from
# base() by code.replace() with the name f_<k> (six digits, k counting calls modulo
# 1024), and drops it after its call of ~200 us: code.replace() takes ~1 us and the
# allocator hands the freed code object's memory straight back, so the frame of f_<k+1>
# starts where f_<k>'s was, from a code object at the address f_<k>'s had, about a
# microsecond after f_<k> returned. Which line calls f_<k> is fixed by this source: k odd
# from the line marked ODD, k even from the line marked EVEN. A sample that names the
# callee after the code object that sat at that address a call earlier breaks that rule.
# argv[2], if given, is the length of a call in us (default 200).
# It writes argv[1] (temp + rename) once warm: {"pid": N, "main": TID}; it polls stdin
# every few calls and, at EOF, writes stats.json next to argv[1] ({"calls": N,
# "reused": M}: calls whose code object had the address of the call before) and exits.

import json
import os
import select
import sys
import threading
import time
import types

NAMES = 1024                 # even, so k and k % NAMES have the same parity
CALL_NS = int(sys.argv[2]) * 1000 if len(sys.argv) > 2 else 200000   # each call's busy loop
POLL_EVERY = 64              # calls between two looks at stdin
WARMUP = 100                 # calls before the ready file


def base(deadline):
    while now() < deadline:
        pass


now = time.monotonic_ns


def drive(ready):
    stdin = sys.stdin.buffer.raw
    names = ["f_%06d" % k for k in range(NAMES)]
    code, space = base.__code__, globals()
    qualname = hasattr(code, "co_qualname")
    calls = reused = 0
    last = None
    k = 0
    while True:
        name = names[k % NAMES]
        c = code.replace(co_name=name, co_qualname=name) if qualname else code.replace(co_name=name)
        fn = types.FunctionType(c, space, name)
        reused += id(c) == last
        last = id(c)
        del c
        if k & 1:
            fn(now() + CALL_NS)     # ODD
        else:
            fn(now() + CALL_NS)     # EVEN
        del fn
        k += 1
        calls += 1
        if k == WARMUP:
            with open(ready + ".tmp", "w") as f:
                json.dump({"pid": os.getpid(), "main": threading.get_native_id()}, f)
            os.rename(ready + ".tmp", ready)
        if k % POLL_EVERY == 0 and select.select([stdin], [], [], 0)[0] and \
                not os.read(stdin.fileno(), 4096):
            break
    path = os.path.join(os.path.dirname(ready), "stats.json")
    with open(path + ".tmp", "w") as f:
        json.dump({"calls": calls, "reused": reused}, f)
    os.rename(path + ".tmp", path)


drive(sys.argv[1])
