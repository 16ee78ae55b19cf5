# Target for the server-like tests (runs on CPython 3.9-3.15): what a first profile of a
# server looks like. One thread works, calling short functions from several lines of
# busy_loop(); one hashes 16 MB at a time (hashlib lets the GIL go while it digests: on
# a CPU without the GIL, as a server's compression or TLS would be); the others wait as
# a server's threads do, each in its own kind of wait:
#   locked    lock.acquire() on a lock the main thread holds and never releases
#   sleeper   time.sleep(3600)
#   selector  select.select() on a pipe nobody writes to
#   waiter    threading.Event().wait(), never set
#   stdin     sys.stdin.read(): EOF ends the process (os._exit)
# and the main thread waits in join() on the stdin thread.
#
# Once every thread has started (each says so by its native id), the main thread writes
# argv[1] (temp + rename):
#   {"pid": N, "file": this file, "threads": {ROLE: {"tid": N, "ident": N, "name": S,
#    "does": S}}, "first_lines": {FUNCTION: co_firstlineno}, "busy_lines": [lines in
#    busy_loop that call out]}
# The test waits, through /proc, for each waiting thread to be in its system call.

import hashlib
import json
import os
import select
import sys
import threading
import time

MODULE_FIRST_LINE = sys._getframe().f_code.co_firstlineno    # <module>'s, as its code says
lock = threading.Lock()
never = threading.Event()
started = {}
started_lock = threading.Lock()
all_started = threading.Event()
ROLES = ("busy", "hasher", "locked", "sleeper", "selector", "waiter", "stdin")
BLOB = bytes(16 << 20)


def note(role, does):
    t = threading.current_thread()
    with started_lock:
        started[role] = {"tid": threading.get_native_id(), "ident": t.ident, "name": t.name,
                         "does": does}
        if len(started) == len(ROLES):
            all_started.set()


def short_a(n):
    return (n * 7 + 3) & 0xFFFF


def short_b(n):
    return (n ^ 0x5A5A) + 1


def busy_loop():
    note("busy", "calls short_a and short_b from three lines, forever")
    n = 0
    while True:
        n += short_a(n)          # BUSY-LINE
        n -= short_b(n)          # BUSY-LINE
        n ^= short_a(n + 1)      # BUSY-LINE


def hash_loop():
    note("hasher", "hashlib.sha256 of 16 MB, forever (no GIL while it digests)")
    while True:
        hashlib.sha256(BLOB).digest()


def locked_wait():
    note("locked", "lock.acquire() on a lock the main thread holds")
    lock.acquire()


def sleeper_wait():
    note("sleeper", "time.sleep(3600)")
    while True:
        time.sleep(3600)


def selector_wait():
    r, w = os.pipe()
    note("selector", "select.select() on a pipe nobody writes to")
    while True:
        select.select([r], [], [])


def waiter_wait():
    note("waiter", "threading.Event().wait(), never set")
    never.wait()


def stdin_wait():
    note("stdin", "sys.stdin.read() until EOF")
    sys.stdin.read()
    os._exit(0)


def main():
    lock.acquire()
    threads = [threading.Thread(target=f, name=name, daemon=True)
               for f, name in ((busy_loop, "busy"), (hash_loop, "hasher"), (locked_wait, "locked"),
                               (sleeper_wait, "sleeper"), (selector_wait, "selector"),
                               (waiter_wait, "waiter"))]
    reader = threading.Thread(target=stdin_wait, name="stdin", daemon=True)
    for t in threads + [reader]:
        t.start()
    all_started.wait()
    me = os.path.abspath(__file__)
    with open(me) as f:
        busy_lines = [i for i, line in enumerate(f, 1) if line.rstrip().endswith("# BUSY-LINE")]
    truth = {
        "pid": os.getpid(),
        "file": me,
        "main": {"tid": threading.get_native_id(), "does": "join() on the stdin thread"},
        "threads": started,
        "first_lines": {f.__name__: f.__code__.co_firstlineno
                        for f in (short_a, short_b, busy_loop, hash_loop, locked_wait, sleeper_wait,
                                  selector_wait, waiter_wait, stdin_wait, main)},
        "busy_lines": busy_lines,
    }
    truth["first_lines"]["<module>"] = MODULE_FIRST_LINE
    with open(sys.argv[1] + ".tmp", "w") as f:
        json.dump(truth, f)
    os.rename(sys.argv[1] + ".tmp", sys.argv[1])
    reader.join()


main()
