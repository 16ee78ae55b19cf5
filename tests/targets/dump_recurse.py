# Target for dump's text form (issue 50): recursion folded, the main thread first, the
# instruction of each frame. Runs on CPython 3.9-3.15.
#
#     python dump_recurse.py TRUTH DEPTH
#
# Starts two threads, "worker-1" then "worker-2", each parked on an event; then the main
# thread recurses DEPTH frames deep in down() and parks there on a lock. A third thread,
# "writer", waits until the main thread sits on its parking line, then writes the truth to
# TRUTH (temp + rename) from sys._current_frames(), and parks itself:
#   {"main": NATIVE_ID, "started": [native ids of worker-1, worker-2, writer, in order],
#    "frames": [{"function", "file", "line", "offset", "op", "ops"}... innermost first]}
# the main thread's frames, each with its f_lasti (the byte offset of its instruction), the
# name dis gives the unspecialised opcode there, and the names the interpreter may have put
# there instead (its specialised and instrumented forms).

import dis
import json
import opcode
import os
import sys
import threading
import time

TRUTH, DEPTH = sys.argv[1], int(sys.argv[2])
BLOCK = threading.Lock()
BLOCK.acquire()                     # never released: the main thread parks on it
PARK = threading.Event()            # never set: the other threads park on it
parked_at = {}


def down(n):
    if n <= 1:
        parked_at["line"] = sys._getframe().f_lineno + 1
        BLOCK.acquire()
    return down(n - 1)


def function_name(code):
    return getattr(code, "co_qualname", code.co_name)


def op_at(code, offset):
    raw = code.co_code
    if offset < 0 or offset >= len(raw):
        return None
    return dis.opname[raw[offset]]


def forms(op):
    if op is None:
        return []
    spec = getattr(opcode, "_specializations", {})
    return [op, "INSTRUMENTED_" + op] + list(spec.get(op, []))


def writer(main_ident):
    deadline = time.monotonic() + 30
    while True:
        frame = sys._current_frames().get(main_ident)
        if (frame is not None and frame.f_code is down.__code__ and "line" in parked_at
                and frame.f_lineno == parked_at["line"]):
            break
        del frame
        if time.monotonic() > deadline:
            sys.exit("dump_recurse: the main thread never parked")
        time.sleep(0.002)
    frames = []
    while frame is not None:
        frames.append({"function": function_name(frame.f_code), "file": frame.f_code.co_filename,
                       "line": frame.f_lineno, "offset": frame.f_lasti,
                       "op": op_at(frame.f_code, frame.f_lasti),
                       "ops": forms(op_at(frame.f_code, frame.f_lasti))})
        frame = frame.f_back
    truth = {"main": threading.main_thread().native_id,
             "started": [t.native_id for t in started], "frames": frames}
    with open(TRUTH + ".tmp", "w") as f:
        json.dump(truth, f)
    os.rename(TRUTH + ".tmp", TRUTH)
    PARK.wait()


started = []
for name in ("worker-1", "worker-2"):
    t = threading.Thread(target=PARK.wait, name=name, daemon=True)
    t.start()
    started.append(t)
w = threading.Thread(target=writer, args=(threading.get_ident(),), name="writer", daemon=True)
started.append(w)
w.start()
down(DEPTH)
