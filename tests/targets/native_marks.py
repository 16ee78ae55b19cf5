# Target of library/native-marks/* (tests/functional/library_tests.py): a thread whose
# stack enters the interpreter from C twice between Python frames (runs on 3.9-3.15).
#
#   callbacks   Caller.run() -> worker() -> functools.reduce(step, ...) -> step() -> sorted(key=leaf) ->
#               leaf(), blocked in lock.acquire on a lock main holds: reduce (C) called
#               step and sorted (C) called leaf, and the thread's start (C) called
#               Thread._bootstrap
# Main writes the truth (argv[1], temp + rename) once the thread sits on its blocking line,
# then blocks reading stdin (EOF ends it):
#   {"pid", "python", "native_id": the thread's, "frames": [{"function", "file", "line"}
#    ...innermost first, from sys._current_frames()], "entered_from_c": [the functions
#    C code called: leaf, step, Caller.run on 3.14+, and the outermost]}

import functools
import json
import os
import sys
import threading
import time

BLOCK = threading.Lock()
AT = {}


def leaf(x):
    AT["line"] = sys._getframe().f_lineno + 1
    BLOCK.acquire()
    return x


def step(a, b):
    return sorted([a, b], key=leaf)[0]


def worker():
    AT["native_id"] = threading.get_native_id()
    functools.reduce(step, [1, 2])


class Caller(threading.Thread):
    # run() calls worker() plainly: Thread.run's self._target(*args, **kwargs) enters the
    # eval loop from C on 3.11 (CALL_FUNCTION_EX), which would be a third entry there
    def run(self):
        worker()


def qual(code):
    return getattr(code, "co_qualname", code.co_name)


def entered_from_c(t, frames):
    """The functions of the thread's stack that C code called: leaf (by sorted), step (by
    reduce), Caller.run where _bootstrap_inner runs it through its contextvars Context
    (Context.run, C: 3.14+, where threads have a _context) and the outermost (by the
    thread's start)."""
    out = [qual(leaf.__code__), qual(step.__code__)]
    if "_context" in vars(t):
        out.append(qual(Caller.run.__code__))
    return out + [frames[-1]["function"]]


def version_string():
    v = sys.version_info
    s = "%d.%d.%d" % (v.major, v.minor, v.micro)
    if v.releaselevel != "final":
        s += {"alpha": "a", "beta": "b", "candidate": "rc"}[v.releaselevel] + str(v.serial)
    return s


def main():
    path = sys.argv[1]
    BLOCK.acquire()
    t = Caller(name="callbacks", daemon=True)
    t.start()
    deadline = time.monotonic() + 20
    while True:
        frame = sys._current_frames().get(t.ident)
        if frame is not None and frame.f_code is leaf.__code__ and \
                frame.f_lineno == AT.get("line"):
            break
        del frame
        if time.monotonic() > deadline:
            sys.exit("native_marks: the thread never reached leaf's lock")
        time.sleep(0.002)
    frames = []
    while frame is not None:
        frames.append({"function": qual(frame.f_code), "file": frame.f_code.co_filename,
                       "line": frame.f_lineno})
        frame = frame.f_back
    truth = {"pid": os.getpid(), "python": version_string(), "native_id": AT["native_id"],
             "frames": frames,
             "entered_from_c": entered_from_c(t, frames)}
    with open(path + ".tmp", "w") as f:
        json.dump(truth, f)
    os.rename(path + ".tmp", path)
    sys.stdin.buffer.read()


main()
