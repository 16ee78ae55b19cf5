# Target for the record convert/speedscope tests (runs on CPython 3.9-3.15): names that
# collapsed stacks must escape and JSON must encode.
#
# One thread renames itself (prctl PR_SET_NAME: what /proc/PID/task/TID/comm shows) to
# "odd;th\r\nead" -- a ';', a backslash and a newline -- and spins in a function whose
# name is "odd;fn\name<newline>café" (co_name, and co_qualname where it exists), compiled
# from a file named "<odd;file\name>". The main thread is parked in C reading stdin.
# Once the spinner runs, main writes argv[1] (temp + rename) with the names as the kernel
# and the code object hold them:
#   {"pid": N, "odd": TID, "thread_name": S, "function": S, "file": S}
# and blocks reading stdin until EOF.

import ctypes
import json
import os
import sys
import threading

FUNC_NAME = "odd;fn\\name\ncafé"
FILE_NAME = "<odd;file\\name>"
THREAD_NAME = "odd;th\\r\nead"
PR_SET_NAME, PR_GET_NAME = 15, 16

SOURCE = """
def spin(started):
    started.set()
    n = 0
    while True:
        n += 1
"""


def make_spin():
    ns = {}
    exec(compile(SOURCE, FILE_NAME, "exec"), ns)
    fn = ns["spin"]
    rename = {"co_name": FUNC_NAME}
    if hasattr(fn.__code__, "co_qualname"):
        rename["co_qualname"] = FUNC_NAME
    fn.__code__ = fn.__code__.replace(**rename)
    return fn


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: odd_names.py READY_PATH")
    spin = make_spin()
    named, started = threading.Event(), threading.Event()
    info = {}

    def run():
        # prctl, not /proc/self/task/TID/comm: a chroot may have no /proc
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_NAME, THREAD_NAME.encode(), 0, 0, 0) != 0:
            info["error"] = "prctl(PR_SET_NAME) failed: errno %d" % ctypes.get_errno()
            named.set()
            return
        buf = ctypes.create_string_buffer(32)
        libc.prctl(PR_GET_NAME, buf, 0, 0, 0)
        info["thread_name"] = buf.value.decode()
        info["odd"] = threading.get_native_id()
        named.set()
        spin(started)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    if not named.wait(20) or "error" in info or not started.wait(20):
        sys.exit("odd_names: spinner never started: %s" % info.get("error", "timeout"))
    code = spin.__code__
    info.update({"pid": os.getpid(), "function": getattr(code, "co_qualname", code.co_name),
                 "file": code.co_filename})
    tmp = sys.argv[1] + ".tmp"
    with open(tmp, "w") as f:
        json.dump(info, f)
    os.rename(tmp, sys.argv[1])
    sys.stdin.buffer.read()


main()
