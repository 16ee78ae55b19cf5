# Target for the code-object churn test (runs on CPython 3.9-3.15).
#
# The main thread keeps making and freeing code objects: for k = 0, 1, 2, ... it compiles
# the source of a function f_<k> (six digits) from the file name "<churn-<k>>", execs it,
# calls it -- a busy loop of 200-500 us -- and drops it, so that the code object, its
# name, its file name and its line table are freed at once and their addresses are free
# for the next round (pymalloc hands the same sizes back in the same order). The ground
# truth of each round, on CLOCK_MONOTONIC (time.monotonic_ns), is kept in memory:
#   k  id(code)  exec_start exec_end  call_start call_end  fingerprint reused
# where f_<k>'s frame exists only inside [call_start, call_end] and the "<module>" code of
# "<churn-<k>>" only inside [exec_start, exec_end]; "fingerprint reused" is 1 when the code
# object, its name, file name and line table all sit at the addresses of an earlier
# round's (the case a cache keyed on those addresses alone gets wrong).
# It writes argv[1] (temp + rename) once the first rounds are done: {"pid": N, "main": TID};
# it polls stdin every few rounds and, at EOF, writes truth.txt next to argv[1] (one round
# a line, the fields above) and exits.

import json
import os
import random
import select
import sys
import threading
import time

POLL_EVERY = 8               # rounds between two looks at stdin
WARMUP_ROUNDS = 50           # rounds before the ready file

SOURCE = """def f_%06d(deadline):
    while now() < deadline:
        pass
"""


def linetable(code):
    return code.co_lnotab if sys.version_info < (3, 10) else code.co_linetable


def churn(ready):
    stdin = sys.stdin.buffer.raw
    now = time.monotonic_ns
    rng = random.Random(5)
    truth = []
    seen_prints = set()
    k = 0
    while True:
        name = "f_%06d" % k
        exec_start = now()
        module = compile(SOURCE % k, "<churn-%06d>" % k, "exec")
        space = {"now": now}
        exec(module, space)
        exec_end = now()
        fn = space.pop(name)        # no cycle: fn -> space, but space no longer -> fn
        code = fn.__code__
        addr = id(code)
        fprint = (addr, id(code.co_name), id(code.co_filename), id(linetable(code)))
        reused = fprint in seen_prints
        seen_prints.add(fprint)
        del code, module
        call_start = now()
        fn(call_start + rng.randint(200000, 500000))
        call_end = now()
        del fn, space               # frees f_<k>'s code object, name, file and line table
        truth.append("%d %d %d %d %d %d %d" % (k, addr, exec_start, exec_end, call_start,
                                               call_end, reused))
        k += 1
        if k == WARMUP_ROUNDS:
            tmp = ready + ".tmp"
            with open(tmp, "w") as f:
                json.dump({"pid": os.getpid(), "main": threading.get_native_id()}, f)
            os.rename(tmp, ready)
        if k % POLL_EVERY == 0 and select.select([stdin], [], [], 0)[0] and \
                not os.read(stdin.fileno(), 4096):
            break
    path = os.path.join(os.path.dirname(ready), "truth.txt")
    with open(path + ".tmp", "w") as f:
        f.write("\n".join(truth) + "\n")
    os.rename(path + ".tmp", path)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: exec_churn.py READY_PATH")
    churn(sys.argv[1])


main()
