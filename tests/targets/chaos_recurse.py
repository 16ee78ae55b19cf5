# Target for the chaos deep-recursion and SIGSTOP tests (runs on CPython 3.9-3.15).
#
# Two threads -- the main thread and a bare _thread thread -- each call dive(0, c) over
# and over: dive recurses to depth DEPTH, raises Boom at the bottom, and the exception is
# caught at depth c (a different, pseudo-random depth each call) and swallowed there.
# So every stack is <module> -> main -> spin -> dive x k (main thread) or
# diver -> spin -> dive x k (the other thread), with 1 <= k <= DEPTH + 1 and every frame but the
# innermost on the line of its call. No comprehensions, lambdas or with-blocks.
# Once both threads are diving it writes argv[1] (temp + rename):
#   {"pid": N, "main": TID, "diver": TID, "depth": DEPTH}
# It polls stdin every LOOK seconds; at EOF both threads stop and it exits 0.
#
# The two threads take turns by the interpreter's switch interval (SWITCH): each is parked,
# waiting for the GIL, at whatever depth the other's request found it. The main thread
# must not release the GIL any more often than that (a select() every few dives did): each
# release restarts the other thread's wait, which then never asks for the GIL and starves,
# parked at one depth for seconds.

import _thread
import json
import os
import select
import sys
import threading
import time

DEPTH = 500
ROUND = 20                       # dives between two looks at the clock
LOOK = 0.1                       # seconds between two looks at stdin
SWITCH = 0.001                   # the interpreter's switch interval


class Boom(Exception):
    pass


def dive(depth, catch_at):
    if depth == DEPTH:
        raise Boom(depth)
    if depth == catch_at:
        try:
            dive(depth + 1, catch_at)
        except Boom:
            return depth
    return dive(depth + 1, catch_at)


def spin(catches, state, rounds):
    i = 0
    while i < rounds and not state["stop"]:
        dive(0, catches[i % len(catches)])
        i += 1
        state["dives"] += 1


def diver(catches, state, tids, done):
    tids.append(threading.get_native_id())
    spin(catches, state, 1 << 62)
    done.release()


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: chaos_recurse.py READY_PATH")
    sys.setrecursionlimit(DEPTH * 2 + 100)
    sys.setswitchinterval(SWITCH)
    catches = []
    x = 12345
    for _ in range(997):
        x = (x * 1103515245 + 12345) % 2147483648
        catches.append(x % DEPTH)
    state = {"stop": False, "dives": 0}
    mine = {"stop": False, "dives": 0}
    at = 0
    tids = []
    done = _thread.allocate_lock()
    done.acquire()
    _thread.start_new_thread(diver, (catches[::-1], state, tids, done))
    stdin = sys.stdin.buffer.raw
    announced = False
    look = time.monotonic() + LOOK
    while True:
        spin(catches[at:], mine, ROUND)
        at = (at + ROUND) % len(catches)
        if not announced and state["dives"] > 0:
            tmp = sys.argv[1] + ".tmp"
            f = open(tmp, "w")
            f.write(json.dumps({"pid": os.getpid(), "main": threading.get_native_id(),
                                "diver": tids[0], "depth": DEPTH}))
            f.close()
            os.rename(tmp, sys.argv[1])
            announced = True
        if time.monotonic() < look:
            continue
        look = time.monotonic() + LOOK
        if select.select([stdin], [], [], 0)[0] and not os.read(stdin.fileno(), 4096):
            break
    state["stop"] = True
    done.acquire()


main()
