# Target for the --subprocesses tests (runs on CPython 3.9-3.15).
#
# The main process starts two children with multiprocessing: one by fork (it spins in
# forked_child), one by spawn, a fresh interpreter (it spins in spawned_child, and forks a
# grandchild of its own that spins in grandchild). Each reports its pid and native thread
# id through a queue; once all three have, main writes argv[1] (temp + rename):
#   {"pid": N, "children": {"forked_child": {"pid": P, "tid": T}, "spawned_child": {...},
#                           "grandchild": {...}}}
# and reads lines from stdin: "late" starts one more child by fork (it spins in
# late_child) and writes argv[1] + ".late" the same way with {"late_child": {...}}; EOF
# stops every child and exits 0. The main thread itself is parked in C reading stdin.
# A child whose parent is gone (a killed target) stops by itself.

import json
import multiprocessing as mp
import os
import sys
import threading


def spin(report, name):
    parent = os.getppid()
    report.put((name, os.getpid(), threading.get_native_id()))
    x = 0
    while True:
        x += 1
        if x & 0xffff == 0 and os.getppid() != parent:
            os._exit(0)                 # orphaned (the target was killed): stop spinning


def forked_child(report):
    spin(report, "forked_child")


def grandchild(report):
    spin(report, "grandchild")


def spawned_child(report):
    mp.get_context("fork").Process(target=grandchild, args=(report,), daemon=True).start()
    spin(report, "spawned_child")


def late_child(report):
    spin(report, "late_child")


def write(path, doc):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f)
    os.rename(tmp, path)


def collect(report, n):
    got = {}
    while len(got) < n:
        name, pid, tid = report.get()
        got[name] = {"pid": pid, "tid": tid}
    return got


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: subprocs.py READY_PATH")
    spawn = mp.get_context("spawn")
    report = spawn.Queue()
    kids = [mp.get_context("fork").Process(target=forked_child, args=(report,)),
            spawn.Process(target=spawned_child, args=(report,))]
    for k in kids:
        k.start()
    write(sys.argv[1], {"pid": os.getpid(), "children": collect(report, 3)})
    for line in sys.stdin:
        if line.strip() == "late":
            k = mp.get_context("fork").Process(target=late_child, args=(report,))
            k.start()
            kids.append(k)
            write(sys.argv[1] + ".late", {"children": collect(report, 1)})
    for k in kids:
        k.kill()
        k.join()


if __name__ == "__main__":
    main()
