# Target for tests/functional/names_tests.py (runs on CPython 3.9-3.15): a threading
# registry (threading._active) that is large, or that changes while remora reads it.
#
# Before any real thread starts, main puts argv[3] dummy threading.Thread objects (never
# started, named "dummy-N") into threading._active under fake idents, small odd numbers
# no pthread id is (under threading._active_limbo_lock, as threading itself does). Then
# it starts the real threads, NAMES, each parked on an event, and writes argv[1] (temp +
# rename) once all run:
#   {"pid": N, "threads": [{"native_id": TID, "name": S}, ...],   (threading.enumerate(),
#                                                        the real threads: a native_id)
#    "names": {TID: [every name that thread ever has], ...}, "dummies": D}
# argv[2] says what follows:
#   hold    nothing: stdin's EOF ends it;
#   churn   one more real thread, "churner", keeps changing the registry until EOF: it
#           adds dummies under fresh fake idents and removes old ones (the dict grows,
#           is rebuilt, entries deleted), replaces dummies by new Thread objects (the old
#           ones freed), and renames the thread "victim" to "renamed-K" (K < RENAMES; a
#           new str each time, the old one freed), all in a tight loop. The ready file
#           is written once it has gone round CHURN_READY times; "names" lists them all.

import json
import os
import sys
import threading

NAMES = ["victim", "parked-a", "parked-\u00e9\u5de5"]
RENAMES = 40
POOL = 256                  # dummies the churner keeps in the registry at a time
CHURN_READY = 1000


def write(path, info):
    info["threads"] = [{"native_id": t.native_id, "name": t.name} for t in threading.enumerate()
                       if t.native_id is not None]
    with open(path + ".tmp", "w") as f:
        json.dump(info, f)
    os.rename(path + ".tmp", path)


def put(ident, thread):
    with threading._active_limbo_lock:
        threading._active[ident] = thread


def drop(ident):
    with threading._active_limbo_lock:
        threading._active.pop(ident, None)


def main():
    path, mode, ndummies = sys.argv[1], sys.argv[2], int(sys.argv[3])
    for i in range(ndummies):
        put(2 * i + 1, threading.Thread(name="dummy-%d" % i))
    forever = threading.Event()
    n = len(NAMES) + 1 + (mode == "churn")
    started = threading.Barrier(n)
    looped = threading.Event()

    def park():
        started.wait()
        forever.wait()

    def churn(victim):
        started.wait()
        base = 2 * ndummies + 1         # fake idents past the first dummies'
        pool = []
        i = 0
        while not forever.is_set():
            ident = base + 2 * i
            if i % 16 == 0 or len(pool) < POOL:
                t = threading.Thread(name="dummy-c%d" % i)
            else:
                t = pool[i % POOL][1]
            put(ident, t)
            pool.append((ident, t))
            if len(pool) > POOL:
                drop(pool.pop(0)[0])
            victim.name = "renamed-%d" % (i % RENAMES)
            i += 1
            if i == CHURN_READY:
                looped.set()
        for ident, _ in pool:
            drop(ident)

    threads = [threading.Thread(target=park, name=name, daemon=True) for name in NAMES]
    for t in threads:
        t.start()
    if mode == "churn":
        churner = threading.Thread(target=churn, args=(threads[0],), name="churner", daemon=True)
        churner.start()
    started.wait()
    info = {"pid": os.getpid(), "dummies": ndummies, "names": {}}
    for t in threading.enumerate():
        if t.native_id is not None:
            info["names"][t.native_id] = [t.name]
    if mode == "churn":
        looped.wait()
        info["names"][threads[0].native_id] = ["victim"] + ["renamed-%d" % k for k in range(RENAMES)]
    write(path, info)
    sys.stdin.read()
    forever.set()


main()
