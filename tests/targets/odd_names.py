# Target for the record convert/speedscope/hostile tests (runs on CPython 3.9-3.15): names
# that collapsed stacks must escape, JSON must encode and HTML must keep as text.
#
# Both odd threads are started with _thread.start_new_thread, outside threading's
# registry, so that remora names them as the kernel does (the Python names of
# threading.Threads are tests/targets/thread_names.py's).
#
# One thread renames itself (prctl PR_SET_NAME: what /proc/PID/task/TID/comm shows) to
# "odd;th\r\nead" -- a ';', a backslash and a newline -- and calls a chain of functions
# with hostile names (HOSTILE: quotes, backslashes, newlines, semicolons, </script> and
# other markup, lone surrogates, NUL and other control characters, a 1 MB name), each
# with a hostile file name, made with code.replace(); the innermost spins in a function
# named "odd;fn\name<newline>café" (co_name, and co_qualname where it exists), compiled
# from a file named "<odd;file\name>". A second thread names itself with bytes that are
# not UTF-8 and markup (PARKED_NAME) and waits. The main thread is parked in C reading
# stdin. Once the spinner runs, main writes argv[1] (temp + rename) with the names as the
# kernel and the code objects hold them (JSON; lone surrogates as \udXXX escapes):
#   {"pid": N, "odd": TID, "thread_name": S, "function": S, "file": S,
#    "hostile": [{"function": S, "file": S}, ...outermost first],
#    "parked": TID, "parked_name_hex": HEX of the name's bytes}
# and blocks reading stdin until EOF.

import ctypes
import json
import os
import sys
import threading
import types
import _thread

FUNC_NAME = "odd;fn\\name\ncafé"
FILE_NAME = "<odd;file\\name>"
THREAD_NAME = "odd;th\\r\nead"
PARKED_NAME = b'<b>"\xff\xfe;\x1b[7m\\x'         # 15 bytes: the most comm keeps
PR_SET_NAME, PR_GET_NAME = 15, 16

# (function name, file name), outermost first
HOSTILE = [
    ('say "hi" \'there\'', '"quoted\'.py'),
    ("back\\slash\\", "C:\\dir\\x.py\\"),
    ("new\nline\r\nend\n", "/tmp/new\nline\r.py"),
    ("semi;colon;", "a;b;.py"),
    ("</script><script>window.__pwned=1</script>", "<script>window.__pwned=3</script>.py"),
    ('<img src=x onerror="window.__pwned=2"><!--', "</ScRiPt ><!-- &amp; &lt;.py"),
    ("lone\ud800sur\udfffrogate", "\udcff\udbff.py"),
    ("ctl\x00\x01\x07\x08\t\x0b\x0c\x1b[31m\x1f\x7f\x85\x9b\u2028\u2029 end",
     "ctl\x1b]0;title\x07.py"),
    ("fake (frame.py:1) {\"$schema\":null}]},", "caf\u00e9\U0001f600\u202e.py"),
    ("L" * (1 << 20), ("\u00e9\U0001f600" * (1 << 19))),
]

SOURCE_HOP = """
def hop(started):
    return NEXT(started)
"""

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


def make_chain(last):
    """Functions named as in HOSTILE, each calling the next; the innermost calls last."""
    code = compile(SOURCE_HOP, "hop.py", "exec").co_consts[0]
    assert code.co_name == "hop"
    fn = last
    for name, path in reversed(HOSTILE):
        rename = {"co_name": name, "co_filename": path}
        if hasattr(code, "co_qualname"):
            rename["co_qualname"] = name
        fn = types.FunctionType(code.replace(**rename), {"NEXT": fn})
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
        chain(started)

    def park():
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_NAME, PARKED_NAME, 0, 0, 0) != 0:
            info["error"] = "prctl(PR_SET_NAME) failed: errno %d" % ctypes.get_errno()
        else:
            buf = ctypes.create_string_buffer(32)
            libc.prctl(PR_GET_NAME, buf, 0, 0, 0)
            info["parked_name_hex"] = buf.value.hex()
            info["parked"] = threading.get_native_id()
        parked.set()
        forever.wait()

    chain = make_chain(spin)
    parked, forever = threading.Event(), threading.Event()
    _thread.start_new_thread(park, ())
    if not parked.wait(20) or "error" in info:
        sys.exit("odd_names: parked thread never named: %s" % info.get("error", "timeout"))
    _thread.start_new_thread(run, ())
    if not named.wait(20) or "error" in info or not started.wait(20):
        sys.exit("odd_names: spinner never started: %s" % info.get("error", "timeout"))
    code = spin.__code__
    hostile, fn = [], chain
    while fn is not spin:                   # the names as the code objects hold them
        c = fn.__code__
        hostile.append({"function": getattr(c, "co_qualname", c.co_name),
                        "file": c.co_filename})
        fn = fn.__globals__["NEXT"]
    info.update({"pid": os.getpid(), "function": getattr(code, "co_qualname", code.co_name),
                 "file": code.co_filename, "hostile": hostile})
    tmp = sys.argv[1] + ".tmp"
    with open(tmp, "w") as f:
        json.dump(info, f)
    os.rename(tmp, sys.argv[1])
    sys.stdin.buffer.read()


main()
