# The default mode's idle test, on both engines (docs/how-it-reads.md, "Idle threads"):
# record and top leave out a thread asleep in the kernel that does not hold the GIL, and
# decide it without a system call per thread per round, so a decision may come from an
# earlier round. These tests hold each round's decisions to the target's own account.
#
# tests/targets/wake_work.py stamps, with its own CLOCK_MONOTONIC, when each of its
# threads works. idle/wake: a waker that sleeps 80-200 ms (long enough to be taken as
# asleep without a look for a while) and wakes into 15 ms of pure-Python work, beside a
# thread in one endless PBKDF2 call without the GIL. idle/hash: two threads hashing 32 MB
# at a time with the GIL let go, beside a thread spinning in Python, so that each waits
# for the GIL after each digest, asleep, and comes back to the same frame. Twenty threads
# stay parked in both. Recorded at 1 kHz into a raw .remora file (each sample at its
# round's time, or its tick's: formats.read_remora), with the default engine and with
# --engine user: at every millisecond at which a thread worked, by its own account, from
# 2 ms before through 2 ms after, it must have a sample in those 4 ms (at most MISSES of
# them missed); the waker one within 3 ms of each wake-up, or 1 ms after it has run for a
# tick period: counted within one round (or one tick period) of waking. Parked threads
# have no sample.

import bisect
import json
import os

from harness import INTERPRETERS, TARGETS, Fail, Skip, Target, interp_missing, record, summary
from formats import TICK, read_remora

ORDER = 290           # where run.py runs these tests among the modules' (ascending)
# measurements of timing as fidelity/mix is, run as it is: REMORA_FIDELITY=1 (make test,
# not make asan) or an --only beginning with one of these (run.py)
TIMED = ("idle/",)

RATE, RATE_HZ = "1k", 1000
SECONDS = 3                     # (4 until 2026-12-04: issue 31, CI in an hour)
STEP_NS = 1000000       # the instants judged: every millisecond of the recording
HALF_NS = 2000000       # a thread working from an instant's -2 ms to its +2 ms must have a
                        # sample in that window: at 1 kHz a round every 1 ms (a round
                        # read a little after its time, one skipped on a busy machine),
                        # or a kernel engine's tick every 1 ms of the thread's CPU time
FIRST_NS = 3000000      # ... and the first sample after the waker woke within 3 ms (one
                        # round, and 2 ms for the round to read it), or 1 ms after it had
                        # run RUN_NS since (the kernel engine samples a thread on a CPU by
                        # its ticks, every period of its own CPU time: a waker preempted
                        # after waking has its first tick that much later)
RUN_NS = 1000000        # one tick period at 1 kHz
RUN_MOST_NS = 1500000   # an instant is judged only when the waker ran this long of its 4 ms
                        # (its pauses apart): long enough for one tick
HASH_IN_NS = 1000000    # a hasher stamps its start, then calls sha256, which lets the GIL go
MISSES = 0.02           # of the instants (of the wakes) judged, at most, one always
                        # allowed
MIN_JUDGED = 30         # instants judged per kind of thread, at least, or too busy to judge
PARKED_MOST = 0.01      # of the samples, a parked thread's (none of them ever wakes)


def windows(truth, ready, wake):
    """{kind: [(tid, lo, hi, pauses)]}: when each thread worked, by its own account, and
    when it was off its CPU meanwhile (the waker notes its pauses). A hasher from
    its start for as long as its digest's CPU time (the digest comes first, then the wait
    for the GIL, which takes no CPU time; time waiting for a CPU only makes the digest's
    stretch longer). The waker from its wake-up to the end of its work (holding the GIL:
    no other thread wants it); the cruncher from its start on."""
    if not wake:
        return {"hashers": [(tid, t0 + HASH_IN_NS, t0 + cpu, []) for tid in ready["hashers"]
                            for t0, _, cpu in truth["digests"][str(tid)]]}
    return {"waker": [(ready["waker"], w0, w1, gaps) for w0, w1, gaps in truth["wakes"]],
            "cruncher": [(ready["cruncher"], truth["crunch"] + HASH_IN_NS, float("inf"), [])]}


def any_in(times, lo, hi):
    """Is there a time in the sorted list within [lo, hi]?"""
    i = bisect.bisect_left(times, lo)
    return i < len(times) and times[i] <= hi


def ran(pauses, lo, hi):
    """How long of [lo, hi] a thread ran, its pauses apart."""
    return (hi - lo) - sum(max(0, min(hi, p1) - max(lo, p0)) for p0, p1 in pauses)


def ran_until(pauses, lo, need):
    """The instant at which a thread working from lo, with these pauses, had run 'need'."""
    t, left = lo, need
    for p0, p1 in sorted(pauses):
        if p1 <= t:
            continue
        if p0 > t:
            if p0 - t >= left:
                return t + left
            left -= p0 - t
        t = max(t, p1)
    return t + left


def judge(r, truth, ready, wake, ticks):
    """(problems, too-busy notes, note) for one recording. A sample is a round's (the
    user-space engine, and the kernel engine's threads off a CPU) or a tick's (the kernel
    engine's threads on a CPU, at the tick's time): either counts the thread. An instant
    is judged when something could have counted the thread: a round (one of its samples,
    of any thread, in the window: a round that found nothing active off a CPU writes
    none), or (ticks: the kernel engine) the thread's own running, long enough for a tick
    (the waker knows when it ran)."""
    tids = {idx: th[0] for idx, th in r.threads.items()}
    every = sorted(s[0] for s in r.samples)
    # a round's samples (a tick comes from the kernel whether remora's rounds run or not:
    # a thread preempted off its CPU is counted by rounds alone)
    rounds = sorted({s[0] for s in r.samples if not s[3] & TICK})
    seen = {}
    for t0, thread, _, _ in r.samples:
        seen.setdefault(tids[thread], []).append(t0)
    for v in seen.values():
        v.sort()
    start, end = r.meta["start_mono_ns"], r.meta["start_mono_ns"] + r.meta["duration_ns"]
    problems, busy, notes = [], [], []
    for what, spans in sorted(windows(truth, ready, wake).items(), reverse=True):
        judged = missed = wakes = late = 0
        examples = []
        for tid, lo, hi, pauses in spans:
            mine = seen.get(tid, [])
            if hi == float("inf"):      # the cruncher: from before the recording to after
                lo, hi = max(lo, start), end
            if lo < start or hi > end:
                continue
            first = max(lo + FIRST_NS, ran_until(pauses, lo, RUN_NS) + STEP_NS)
            if what == "waker" and first <= hi and (ticks or any_in(rounds, lo, first)):
                wakes += 1              # (a window with no round's sample of any thread:
                if not any_in(mine, lo, first):     # remora held up, not judged)
                    late += 1
                    if len(examples) < 3:
                        examples.append("thread %d: no sample in the %.1f ms after it woke at "
                                        "+%.3f ms" % (tid, (first - lo) / 1e6, (lo - start) / 1e6))
            t = start + ((lo + HALF_NS - start + STEP_NS - 1) // STEP_NS) * STEP_NS
            while t + HALF_NS <= hi:
                if ((any_in(rounds, t - HALF_NS, t + HALF_NS) or (ticks and what == "waker")) and
                        ran(pauses, t - HALF_NS, t + HALF_NS) >= RUN_MOST_NS):
                    judged += 1
                    if not any_in(mine, t - HALF_NS, t + HALF_NS):
                        missed += 1
                        if len(examples) < 3:
                            examples.append("thread %d: no sample within %.0f ms of +%.3f ms, "
                                            "%.3f ms into its work" % (tid, HALF_NS / 1e6,
                                                                       (t - start) / 1e6, (t - lo) / 1e6))
                t += STEP_NS
        notes.append("%s counted at %d of %d instants judged%s" % (
            what, judged - missed, judged,
            "; within %.0f ms of %d of %d wakes" % (FIRST_NS / 1e6, wakes - late, wakes) if what == "waker" else ""))
        if missed > max(1, MISSES * judged) or late > max(1, MISSES * wakes):
            problems.append("%s not counted while working: %d of %d instants, %d of %d wakes: %s"
                            % (what, missed, judged, late, wakes, "; ".join(examples)))
        if judged < MIN_JUDGED and what != "cruncher":     # (it shows the rounds; on the
                                                            # kernel engine it ticks instead)
            busy.append("%s: only %d instants judged, need %d" % (what, judged, MIN_JUDGED))
    for tid in ready["parked"]:
        if len(seen.get(tid, ())) > PARKED_MOST * len(every):
            problems.append("parked thread %d in %d of %d samples (at +%s ms)"
                            % (tid, len(seen[tid]), len(every), ", +".join(
                                "%.1f" % ((t - start) / 1e6) for t in seen[tid][:5])))
    return problems, busy, "; ".join(notes)


def test_idle(remora, interp, mode):
    notes, problems, busy = [], [], []
    for engine in ([], ["--engine", "user"]):
        with Target(interp, os.path.join(TARGETS, "wake_work.py"), "ready.json", [mode]) as t:
            ready = t.wait_ready()
            for tid in ready["parked"]:
                t.wait_thread_parked(tid)
            path = os.path.join(t.dir, "idle.remora")
            _, err = record(remora, ["-p", t.pid, "-r", RATE, "-d", SECONDS, "--stats", "-o", path]
                            + engine)
            summ = summary(err, RATE_HZ)
            rc = t.finish()
            if rc != 0:
                raise Fail("target exited %d: %s" % (rc, t.log_tail()))
            with open(os.path.join(t.dir, "wakes.json")) as f:
                truth = json.load(f)
            recording = read_remora(path)
        bad, slow, note = judge(recording, truth, ready, mode == "wake", summ.engine == "kernel")
        kline = [l for l in err.splitlines() if l.startswith("kernel: ")]
        problems += ["engine %s: %s%s" % (summ.engine, b, " (--stats %s)" % kline[0] if kline else "")
                     for b in bad]
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
