# The default mode's idle test, on both engines (docs/how-it-reads.md, "Idle threads"):
# record and top leave out a thread asleep in the kernel that does not hold the GIL, and
# decide it without a system call per thread per round, so a decision may come from an
# earlier round. These tests hold each round's decisions to the target's own account.
#
# tests/targets/wake_work.py stamps, with its own CLOCK_MONOTONIC, when each of its
# threads works. idle/wake: a waker that sleeps 80-200 ms (long enough to be taken as
# asleep without a look for a while) and wakes into 8 ms of pure-Python work, beside a
# thread in one endless PBKDF2 call without the GIL (its samples show every round taken).
# idle/hash: two threads hashing 32 MB at a time with the GIL let go, beside a thread
# spinning in Python, so that each waits for the GIL after each digest, asleep, and comes
# back to the same frame. Twenty threads stay parked in both. Recorded at 1 kHz into a raw .remora
# file (each sample's time is its round's start, on the same clock: formats.read_remora),
# with the default engine and with --engine user, a round is judged for a thread when the
# thread worked, by its own account, from the round's time through READ_NS after
# (windows()); the thread must be in every round judged (at most MISSES of them missed),
# the first after it woke included: counted within one round. Parked threads are in no
# round.

import json
import os

from harness import INTERPRETERS, TARGETS, Fail, Skip, Target, interp_missing, record, summary
from formats import read_remora

RATE, RATE_HZ = "1k", 1000
SECONDS = 4
READ_NS = 2000000       # a round reads a thread at most this long after the round's time
                        # (23 threads take ~0.1 ms; the rest for a machine holding remora
                        # up): a round is judged when the thread worked from its time
                        # through this long after
HASH_IN_NS = 1000000    # a hasher stamps its start, then calls sha256, which lets the GIL go
MISSES = 0.02           # of the rounds judged, at most (one always allowed): a round whose
                        # reading came later than READ_NS (a machine holding remora up)
MIN_JUDGED = 30         # rounds judged per kind of thread, at least, or too busy to judge
PARKED_MOST = 0.01      # of rounds, a parked thread (none of them ever wakes)


def windows(truth, ready, wake):
    """{kind: [(tid, lo, hi)]}: when each thread worked, by its own account. A hasher from
    its start for as long as its digest's CPU time (the digest comes first, then the wait
    for the GIL, which takes no CPU time; time waiting for a CPU only makes the digest's
    stretch longer). The waker from its wake-up to the end of its work (holding the GIL:
    no other thread wants it); the cruncher from its start on."""
    if not wake:
        return {"hashers": [(tid, t0 + HASH_IN_NS, t0 + cpu) for tid in ready["hashers"]
                            for t0, _, cpu in truth["digests"][str(tid)]]}
    return {"waker": [(ready["waker"], w0, w1) for w0, w1 in truth["wakes"]],
            "cruncher": [(ready["cruncher"], truth["crunch"] + HASH_IN_NS, float("inf"))]}


def judged_rounds(rounds, lo, hi):
    """The rounds whose thread worked from their time through READ_NS after."""
    return [t for t in rounds if lo <= t and t + READ_NS <= hi]


def judge(r, truth, ready, wake):
    """(problems, too-busy notes, note) for one recording."""
    tids = {idx: th[0] for idx, th in r.threads.items()}
    rounds = sorted({s[0] for s in r.samples})
    seen = {}
    for t0, thread, _, _ in r.samples:
        seen.setdefault(tids[thread], set()).add(t0)
    start, end = r.meta["start_mono_ns"], r.meta["start_mono_ns"] + r.meta["duration_ns"]
    problems, busy, notes = [], [], []
    for what, spans in sorted(windows(truth, ready, wake).items(), reverse=True):
        judged = missed = firsts = 0
        examples = []
        for tid, lo, hi in spans:
            if hi == float("inf"):      # the cruncher: from before the recording to after
                lo, hi = max(lo, start), end
            if lo < start or hi > end:
                continue
            for k, t in enumerate(judged_rounds(rounds, lo, hi)):
                judged += 1
                firsts += k == 0
                if t not in seen.get(tid, ()):
                    missed += 1
                    if len(examples) < 3:
                        examples.append("thread %d: round at +%.3f ms, %.3f ms into its work (%s "
                                        "round)" % (tid, (t - start) / 1e6, (t - lo) / 1e6,
                                                    "first" if k == 0 else "#%d" % (k + 1)))
        notes.append("%s in %d of %d rounds judged (%d the first of a stretch)"
                     % (what, judged - missed, judged, firsts))
        if missed > max(1, MISSES * judged):
            problems.append("%s missing from %d of %d rounds they worked in: %s"
                            % (what, missed, judged, "; ".join(examples)))
        if judged < MIN_JUDGED:
            busy.append("%s: only %d rounds judged, need %d" % (what, judged, MIN_JUDGED))
    # every round has a thread to show it (the cruncher, the spinner): a round that shows
    # none would hide a thread it missed
    if len(rounds) < (1 - MISSES) * r.meta["rounds"]:
        problems.append("%d of %d rounds have no sample of any thread" % (r.meta["rounds"] - len(rounds),
                                                                          r.meta["rounds"]))
    n = max(len(rounds), 1)
    for tid in ready["parked"]:
        if len(seen.get(tid, ())) > PARKED_MOST * n:
            problems.append("parked thread %d in %d of %d rounds (at +%s ms)"
                            % (tid, len(seen[tid]), n, ", +".join("%.1f" % ((t - start) / 1e6)
                                                                 for t in sorted(seen[tid])[:5])))
    return problems, busy, "; ".join(notes)


def test_idle(remora, interp, mode):
    notes, problems, busy = [], [], []
    for engine in ([], ["--engine", "user"]):
        with Target(interp, os.path.join(TARGETS, "wake_work.py"), "ready.json", [mode]) as t:
            ready = t.wait_ready()
            for tid in ready["parked"]:
                t.wait_thread_parked(tid)
            path = os.path.join(t.dir, "idle.remora")
            _, err = record(remora, ["-p", t.pid, "-r", RATE, "-d", SECONDS, "-o", path] + engine)
            summ = summary(err, RATE_HZ)
            rc = t.finish()
            if rc != 0:
                raise Fail("target exited %d: %s" % (rc, t.log_tail()))
            with open(os.path.join(t.dir, "wakes.json")) as f:
                truth = json.load(f)
            recording = read_remora(path)
        bad, slow, note = judge(recording, truth, ready, mode == "wake")
        problems += ["engine %s: %s" % (summ.engine, b) for b in bad]
        busy += ["engine %s: %s" % (summ.engine, b) for b in slow]
        notes.append("engine %s: %s; %s" % (summ.engine, note, summ))
    if problems:
        raise Fail("; ".join(problems[:4]) + " [" + " | ".join(notes + busy) + "]")
    if busy:
        raise Skip("machine too busy to judge: " + " | ".join(busy + notes))
    return " | ".join(notes)


def tests(remora):
    """[(name, function, skip reason or None)] for run.py."""
    return [("idle/%s/%s" % (mode, i[0]), lambda i=i, mode=mode: test_idle(remora, i, mode),
             interp_missing(i)) for mode in ("wake", "hash") for i in INTERPRETERS]
