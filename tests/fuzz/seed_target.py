# Target for the fuzz seed snapshots (runs on CPython 3.9-3.15): small on purpose, so that
# its snapshot is a small seed. Two threads parked in C (a lock main holds): one in a
# generator reached through a nested class method, one in a function with a non-ASCII
# name; once both sit on their blocking line, main writes argv[1] (temp + rename) with
# its pid and parks reading stdin.
import json
import os
import sys
import threading
import time

BLOCK = threading.Lock()
announced = {}


def announce():
    caller = sys._getframe(1)
    announced[threading.get_ident()] = (caller.f_code, caller.f_lineno)


class Outer:
    class Inner:
        def gen(self):
            announce(); BLOCK.acquire()
            yield 1


def thread_gen():
    next(Outer.Inner().gen())


def café():
    announce(); BLOCK.acquire()


def main():
    BLOCK.acquire()
    threads = [threading.Thread(target=f, daemon=True) for f in (thread_gen, café)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        frames = sys._current_frames()
        if all(t.ident in announced and t.ident in frames and
               (frames[t.ident].f_code, frames[t.ident].f_lineno) == announced[t.ident]
               for t in threads):
            break
        time.sleep(0.002)
    tmp = sys.argv[1] + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"pid": os.getpid()}, f)
    os.rename(tmp, sys.argv[1])
    sys.stdin.buffer.read()


main()
