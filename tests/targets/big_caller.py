# Target for the stitched-stack measurement of tests/bench/bench.py (CPython 3.9-3.15).
#
# The main thread runs big(), a function made with exec() to hold LOCALS local variables,
# so that its frame is larger than two pages, in a loop calling a() and then b(), both
# empty: the caller's frame header and the callee's frame lie kilobytes apart and the
# callee changes every ~0.1 us. In a sample whose innermost frame is a or b called from
# big, big's line must be that callee's own call line; the other call's line means the
# caller and the callee were read at different moments (a stitched stack). The two lines
# come from the source this script generates: the ground truth.
#
# argv[2], if given, is LOCALS (default 1200: a frame of ~10 KB).
# It writes argv[1] (temp + rename) once running: {"pid": N, "main": TID, "a_line": LA,
# "b_line": LB}; it polls stdin every POLL_EVERY loops and exits at EOF.
import json
import os
import select
import sys
import threading

LOCALS = int(sys.argv[2]) if len(sys.argv) > 2 else 1200
POLL_EVERY = 1 << 14
FILE = "big_frame"


def a():
    pass


def b():
    pass


def ready():
    tmp = sys.argv[1] + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"pid": os.getpid(), "main": threading.get_native_id(), "a_line": A_LINE,
                   "b_line": B_LINE}, f)
    os.rename(tmp, sys.argv[1])


def at_eof():
    return bool(select.select([sys.stdin], [], [], 0)[0]) and not sys.stdin.buffer.raw.read(1)


lines = ["def big(a, b, ready, at_eof, every):"]
lines += ["    v%d = %d" % (i, i) for i in range(LOCALS)]
lines += ["    ready()",
          "    n = 0",
          "    while True:",
          "        a()",
          "        b()",
          "        n += 1",
          "        if n == every:",
          "            n = 0",
          "            if at_eof():",
          "                return"]
A_LINE = lines.index("        a()") + 1
B_LINE = lines.index("        b()") + 1
space = {}
exec(compile("\n".join(lines) + "\n", FILE, "exec"), space)
space["big"](a, b, ready, at_eof, POLL_EVERY)
