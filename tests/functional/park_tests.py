# Parked-thread test (issue #5): remora reads a parked thread's stack again only when
# the GIL has changed hands since its last walk (src/unwind/fast.c, parked_holds()). The
# target (tests/targets/park_shift.py) moves six parked threads from one park_<n> to the
# next every 0.1-2 ms while a spinning thread holds the GIL; it is recorded at 20 kHz into
# a raw .remora file (its samples timed as in code_tests.py), and every sample of a worker
# whose innermost frame is park_<n> must fall in one of that worker's park_<n> calls, by
# the target's own CLOCK_MONOTONIC account. A walk reused after the thread moved on shows
# up as a park_<n> sampled after that call ended. `--stats` must also report walks
# reused ("parked: reused=R"), or the test would not have tested the reuse.

import bisect
import os
import re

from harness import (INTERPRETERS, TARGETS, Fail, Skip, Target, interp_missing, more_seconds,
                     record, record_collapsed, summary)
from formats import innermost, next_times, read_remora, total

ORDER = 90            # where run.py runs these tests among the modules' (ascending)

RATE, RATE_HZ = "20k", 20000
SECONDS = 2.0
MAX_SECONDS = 10               # recorded in all, at most, when the first took too few
MIN_CHECKED = 5000             # worker samples in a park_<n>
MIN_REUSED = 0.2               # of thread samples served from a parked walk, at least
SLACK_NS = 50000               # at each edge of a call (as in code_tests.py)

PARK = re.compile(r"^park_(\d)$")
PARKED = re.compile(r"^parked: reused=(\d+) thread_samples=(\d+)$", re.M)
LATE = re.compile(r"^kernel: .* ticks_late=(\d+) unsettled=(\d+)\b", re.M)


def read_truth(path):
    """{tid: (starts, [(name, start, end)])}, each thread's calls in time order."""
    calls = {}
    with open(path) as f:
        for line in f:
            tid, name, start, end = line.split()
            calls.setdefault(int(tid), []).append((name, int(start), int(end)))
    out = {}
    for tid, cs in calls.items():
        cs.sort(key=lambda c: c[1])
        out[tid] = ([c[1] for c in cs], cs)
    return out


def judge(r, truth):
    """(checked, bad list) for one recording."""
    nxt = next_times(r)
    checked, bad = 0, []
    for i, (t0, thread, node, _) in enumerate(r.samples):
        t1 = nxt[i]
        tid = r.threads[thread][0]
        frame = innermost(r, node)
        if tid not in truth or frame is None or not PARK.match(frame[0]):
            continue
        checked += 1
        starts, cs = truth[tid]
        # the calls that began by the end of the window and ended after its start (a
        # thread's calls follow one another: scanned back from the last that began; a
        # window may be long, the first of a recording or one remora was held up in)
        j = bisect.bisect_right(starts, t1 + SLACK_NS)
        ok = False
        for name, _, end in reversed(cs[:j]):
            if end + SLACK_NS < t0:
                break
            if name == frame[0]:
                ok = True
                break
        if not ok:
            near = ", ".join("%s from %+.0f us to %+.0f us" % (c[0], (c[1] - t0) / 1e3, (c[2] - t0) / 1e3)
                             for c in cs[max(0, j - 2):j])
            bad.append("thread %d in %s at +%.3f ms (window %.0f us); its calls then: %s" % (
                tid, frame[0], (t0 - r.meta["start_mono_ns"]) / 1e6, (t1 - t0) / 1e3, near or "none yet"))
    return checked, bad


def test_park_shift(remora, interp):
    """Zero samples of a park_<n> outside that call, over >= MIN_CHECKED samples, with
    >= MIN_REUSED of the thread samples served from parked walks."""
    notes, recordings, reused, total, late, unsettled = [], [], 0, 0, 0, 0
    with Target(interp, os.path.join(TARGETS, "park_shift.py"), "ready.json") as t:
        ready = t.wait_ready()
        workers = set(ready["workers"])
        seconds, spent, attempt, guess = SECONDS, 0.0, 0, 0
        while True:
            attempt += 1
            path = os.path.join(t.dir, "park-%d.remora" % attempt)
            # parked threads are the point: --idle keeps their samples
            _, err = record(remora, ["-p", t.pid, "-r", RATE, "-d", seconds, "--idle", "--stats",
                                     "-o", path])
            summ = summary(err, RATE_HZ)
            m = PARKED.search(err)
            if m is None:
                raise Fail("no `parked: reused=R thread_samples=N` line in --stats: %s" % err[-300:])
            reused, total = reused + int(m.group(1)), total + int(m.group(2))
            # the kernel engine: ticks written at a round's time instead of their own
            # (their record reached the ring after the round began: none may), and rounds
            # not taken while a CPU was held up mid-walk for over 1 ms
            k = LATE.search(err)
            if k is not None:
                late, unsettled = late + int(k.group(1)), unsettled + int(k.group(2))
            notes.append("-d %g: %s, %s of %s thread samples from parked walks"
                         % (seconds, summ, m.group(1), m.group(2)))
            r = read_remora(path)
            recordings.append(r)
            guess += sum(1 for s in r.samples if r.threads[s[1]][0] in workers and
                         PARK.match((innermost(r, s[2]) or ("", ""))[0]))
            spent += summ.seconds
            if guess >= MIN_CHECKED or spent >= MAX_SECONDS:
                break
            seconds = more_seconds(guess, MIN_CHECKED, spent, MAX_SECONDS)
        rc = t.finish()
        if rc != 0:
            raise Fail("target exited %d: %s" % (rc, t.log_tail()))
        truth = read_truth(os.path.join(t.dir, "truth.txt"))
    checked, bad = 0, []
    for r in recordings:
        c, b = judge(r, truth)
        checked, bad = checked + c, bad + b
    ncalls = sum(len(cs) for _, cs in truth.values())
    figures = ("%d worker samples in a park_<n> checked against %d calls; %d outside their call; "
               "%.0f%% of thread samples from parked walks; slack %d us; ticks written late %d, "
               "rounds unsettled %d"
               % (checked, ncalls, len(bad), 100.0 * reused / max(total, 1), SLACK_NS // 1000,
                  late, unsettled))
    problems = []
    if bad:
        problems.append("%d samples show a call that was over, e.g. %s" % (len(bad), " | ".join(bad[:3])))
    if checked < MIN_CHECKED:
        problems.append("only %d samples in a park_<n>, need %d" % (checked, MIN_CHECKED))
    if reused < MIN_REUSED * total:
        problems.append("only %d of %d thread samples came from parked walks, need %.0f%% "
                        "(the test would not test the reuse)" % (reused, total, 100 * MIN_REUSED))
    if late > 0:
        problems.append("%d ticks written at a later round's time than their own (%d rounds "
                        "unsettled)" % (late, unsettled))
    if problems:
        raise Fail("; ".join(problems) + " [" + figures + "; " + "; ".join(notes) + "]")
    return figures + "; " + "; ".join(notes)


# --- cpu mode: a parked thread running C code without the GIL ---------------------------

CPU_SECONDS = 1.5
CPU_MIN_RATIO = 0.5            # the hasher's share of cpu-mode rounds, at least this part of
                               # the share of its time it was on a CPU by its own
                               # thread_time() (seen: 0.9-1.1 alone, more under load: a
                               # runnable thread waiting for a CPU reads 'R' too; a parked
                               # walk that never read the state: 0.15)
CPU_MIN_HASHER = 30.0          # % of its time on a CPU, or the machine was too busy to judge
SLEEPER_MAX = 40.0             # % of rounds a sleeping thread may show up in: woken every
                               # 10 ms on a machine whose CPUs the spinner, the hasher and
                               # remora keep busy, it waits runnable ('R') for one (seen
                               # 4-7%); a parked thread taken as on a CPU would be ~100%


def test_cpu_parked(remora, interp):
    """`record --mode cpu` of cpu_nogil.py: its hasher thread, parked as far as the GIL can
    tell (it holds no GIL while it hashes) but on a CPU, is in its share of rounds; its
    sleeper is not."""
    with Target(interp, os.path.join(TARGETS, "cpu_nogil.py"), "ready.json") as t:
        ready = t.wait_ready()
        err, summ, stacks, cpu = record_collapsed(remora, t, ["--mode", "cpu", "-d", CPU_SECONDS],
                                                  1000, "cpu.json")
    m = PARKED.search(err)
    rounds = max(summ.seconds * summ.hz, 1.0)
    hasher = 100.0 * total(stacks, ready["hasher"]) / rounds
    sleeper = 100.0 * total(stacks, ready["sleeper"]) / rounds
    on_cpu = 100.0 * cpu["hasher"] / max(cpu["wall"], 1e-3)
    figures = ("hasher in %.1f%% of rounds, on a CPU %.1f%% of its time by its own account; "
               "sleeper in %.1f%%; %s; %s of %s thread samples from parked walks"
               % (hasher, on_cpu, sleeper, summ, m.group(1) if m else "?", m.group(2) if m else "?"))
    if on_cpu < CPU_MIN_HASHER:
        raise Skip("the machine is too busy: the hasher was on a CPU only %.0f%% of its time [%s]"
                   % (on_cpu, figures))
    if hasher < CPU_MIN_RATIO * on_cpu:
        raise Fail("the hasher thread is in %.1f%% of cpu-mode rounds, on a CPU %.1f%% of its "
                   "time [%s]" % (hasher, on_cpu, figures))
    if sleeper > SLEEPER_MAX:
        raise Fail("the sleeping thread is in %.1f%% of cpu-mode rounds [%s]" % (sleeper, figures))
    return figures


def tests(remora):
    """[(name, function, skip reason or None)] for run.py."""
    return [("codes/park-shift/%s" % interp[0], lambda i=interp: test_park_shift(remora, i),
             interp_missing(interp)) for interp in INTERPRETERS] + \
           [("codes/cpu-parked/%s" % interp[0], lambda i=interp: test_cpu_parked(remora, i),
             interp_missing(interp)) for interp in INTERPRETERS]
