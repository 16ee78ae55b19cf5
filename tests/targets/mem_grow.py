# Target for the record --mode memory tests (runs on CPython 3.9-3.15).
#
# Four functions, called in turn, one round after another, each keeping new memory in
# the list KEPT: keep_3mb (3 MB a call, one bytes object written through), keep_1mb
# (1 MB), keep_small (256 KB in small objects: 2048 bytes objects of 128 bytes, each
# written), churn_3mb (3 MB allocated, written and freed). Around each call the target
# reads its own resident size (/proc/self/statm) and adds the difference to that
# function's account: its truth of where the process grew. (In a chroot without /proc:
# its peak resident size, getrusage's ru_maxrss, the same here once warm, in a child
# forked first: see main.) (Which function the growth
# lands in depends on the allocator's reuse: glibc hands churn_3mb's freed block to the
# next keep_3mb, so churn_3mb is the one whose calls grow; this account sees the same.)
#
# A warm-up round runs first (the allocator's thresholds settle: glibc's mmap threshold
# rises at the first free of a mapped block), then argv[1] is written (temp + rename):
# {"pid", "page", "resident": its resident bytes then}. Each line "go N" on stdin runs N rounds and then appends
# {"rounds", "growth": {function: bytes}} (the totals since the start) to marks.jsonl
# beside argv[1]; EOF on stdin ends it.

import json
import os
import resource
import sys

PAGE = os.sysconf("SC_PAGESIZE")
MB = 1 << 20
KEPT = []
NAMES = ("keep_3mb", "keep_1mb", "keep_small", "churn_3mb")
growth = {n: 0 for n in NAMES}


STATM = os.path.exists("/proc/self/statm")


def resident():
    if not STATM:
        # a chroot without /proc: the peak resident size, which is the resident size
        # here, where it only grows once warm (no call gives memory back to the system:
        # churn_3mb's block returns to the heap, not to the kernel)
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    with open("/proc/self/statm", "rb") as f:
        return int(f.read().split()[1]) * PAGE


def keep_3mb():
    KEPT.append(b"\x01" * (3 * MB))


def keep_1mb():
    KEPT.append(b"\x02" * MB)


def keep_small():
    KEPT.append([bytes([i & 0xFF]) * 128 for i in range(2048)])


def churn_3mb():
    block = b"\x03" * (3 * MB)
    del block


FUNCS = (keep_3mb, keep_1mb, keep_small, churn_3mb)


def one_round(account):
    for fn in FUNCS:
        before = resident()
        fn()
        after = resident()
        if account:
            growth[fn.__name__] += after - before


def main():
    ready = sys.argv[1]
    if not STATM:
        # ru_maxrss keeps the peak of every image this process exec'd over (the test
        # runner's, forked: hundreds of MB late in a suite), so growth under it is never
        # seen; a child starts its own account afresh. The child does the work and names
        # itself in the ready file ("pid"); this one waits for it.
        child = os.fork()
        if child:
            _, status = os.waitpid(child, 0)
            os._exit(os.waitstatus_to_exitcode(status))
    marks = os.path.join(os.path.dirname(ready), "marks.jsonl")
    for _ in range(2):
        one_round(False)
    rounds = 0
    tmp = ready + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"pid": os.getpid(), "page": PAGE, "resident": resident(),
                   "source": "statm" if STATM else "maxrss"}, f)
    os.rename(tmp, ready)
    for line in sys.stdin:
        words = line.split()
        if len(words) != 2 or words[0] != "go":
            continue
        for _ in range(int(words[1])):
            one_round(True)
            rounds += 1
        with open(marks, "a") as f:
            f.write(json.dumps({"rounds": rounds, "growth": growth}) + "\n")


main()
