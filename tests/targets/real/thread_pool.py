# Real-program target (tests/functional/real_tests.py): a concurrent.futures thread pool
# of WORKERS threads doing mixed work, as a batch job does; the same batch every iteration
# (its mix still moves from one window to the next: its clock, below, is the truth of each).
#
#   python thread_pool.py READY
#
# The main thread keeps IN_FLIGHT jobs queued (concurrent.futures.wait, FIRST_COMPLETED:
# asleep on a lock; each finished job replaced by a new one), so no worker waits for work
# and every worker runs the same mix: each job is the same steps in turn, pure-Python
# text processing (a word count with a Counter, a recursive-descent parser of nested
# lists), json dumps + loads of a document, a compiled regex's finditer over a log text,
# and hashlib.sha256 of a 4 MB buffer (which releases the GIL while it digests: a worker
# on a CPU without the GIL while the others run Python). Workers are named pool_0 ...
# After WARMUP jobs it writes READY (temp + rename): {"pid": N, "main": TID,
# "workers": {name: TID}, "file": this file as the target sees it, "steps": [names]}.
#
# It times itself: each thread adds the wall time (time.perf_counter_ns) of each call of a
# step (a worker: each step of a job; main: its concurrent.futures.wait and stdin_closed)
# to its own totals. It polls stdin as jobs finish: a line "mark" appends one JSON line
# to marks.jsonl beside READY (stepclock.py, copied beside it), {"at": perf_counter_ns,
# "threads": {TID: {step: ns}}}, so that a test has, between two marks around a
# recording, each thread's share of the window in each step (the truth for inclusive
# shares); EOF ends it, as do LIFETIME seconds whatever happens.

import collections
import concurrent.futures
import hashlib
import json
import os
import re
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))    # -I leaves it out
import stepclock                                                  # noqa: E402

WARMUP = 40
LIFETIME = 600.0
WORKERS = 4
IN_FLIGHT = 2 * WORKERS

TEXT = " ".join("the quick brown fox %d jumps over the lazy dog number %d" % (i, i * 7) for i in range(400))
NESTED = "[" + ",".join("[%d,[%d,%d],[[%d]]]" % (i, i + 1, i + 2, i + 3) for i in range(400)) + "]"
DOC = {"users": [{"id": i, "name": "user%d" % i, "email": "u%d@example.invalid" % i,
                  "roles": ["a", "b"][: i % 3], "score": i * 1.5, "active": i % 2 == 0}
                 for i in range(200)]}
LOG = "\n".join("2025-03-01T12:%02d:%02d host%d GET /api/items/%d 200 %dms" % (
    i % 60, (i * 7) % 60, i % 5, i, (i * 13) % 300) for i in range(1500))
LINE = re.compile(r"^(\S+) (host\d+) (GET|POST) (\S+) (\d{3}) (\d+)ms$", re.M)
BLOB = bytes(range(256)) * (4 * 1024 * 1024 // 256)


def word_count():
    counts = collections.Counter()
    for w in TEXT.split():
        if not w.isdigit():
            counts[w.lower()] += 1
    return counts.most_common(3)


def parse(s, i=0):
    """A recursive-descent parser of nested lists of ints: (value, next index)."""
    if s[i] == "[":
        items, i = [], i + 1
        while s[i] != "]":
            v, i = parse(s, i)
            items.append(v)
            if s[i] == ",":
                i += 1
        return items, i + 1
    j = i
    while s[j].isdigit():
        j += 1
    return int(s[i:j]), j


def parse_nested():
    return len(parse(NESTED)[0])


def json_roundtrip():
    n = 0
    for _ in range(6):
        n += len(json.loads(json.dumps(DOC))["users"])
    return n


def slow_requests():
    slow = []
    for m in LINE.finditer(LOG):
        if int(m.group(6)) > 250:
            slow.append((m.group(2), m.group(4)))
    return len(slow)


def digest():
    return hashlib.sha256(BLOB).hexdigest()


STEPS = (word_count, parse_nested, json_roundtrip, slow_requests, digest)
totals = {}                 # {tid: {step: ns}}, each thread writing only its own


def timed(fn, mine):
    t0 = time.perf_counter_ns()
    r = fn()
    mine[fn.__name__] = mine.get(fn.__name__, 0) + time.perf_counter_ns() - t0
    return r


def job():
    mine = totals.setdefault(threading.get_native_id(), {})
    return [timed(fn, mine) for fn in STEPS]


def stdin_closed():
    """True once stdin reached EOF (polled, never blocking); a "mark" line read writes a
    mark of every thread's totals."""
    return stepclock.stdin_closed(lambda: {str(tid): dict(steps) for tid, steps in list(totals.items())})


def main():
    start = time.monotonic()
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="pool")
    pending = {pool.submit(job) for _ in range(IN_FLIGHT)}
    done = 0
    mine = totals.setdefault(threading.get_native_id(), {})
    stepclock.open_marks(sys.argv[1])

    def wait():
        return concurrent.futures.wait(pending, return_when=concurrent.futures.FIRST_COMPLETED)

    while True:
        finished, pending = timed(wait, mine)
        for f in finished:
            f.result()
            pending.add(pool.submit(job))
        before, done = done, done + len(finished)
        if before < WARMUP <= done:
            workers = {t.name: t.native_id for t in threading.enumerate() if t.name.startswith("pool")}
            stepclock.write(sys.argv[1], json.dumps({"pid": os.getpid(), "main": threading.get_native_id(),
                                           "workers": workers, "file": os.path.abspath(__file__),
                                           "steps": [fn.__name__ for fn in STEPS]}))
        if timed(stdin_closed, mine) or time.monotonic() - start > LIFETIME:
            for f in pending:
                f.cancel()
            pool.shutdown()
            return


if __name__ == "__main__":
    main()
