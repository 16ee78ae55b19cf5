# Code-object cache test (issue #5): a target that keeps creating and freeing code objects
# (tests/targets/exec_churn.py: a function f_<k> built with exec(), run 200-500 us, then
# dropped, so its code object's address is reused by the next one) is recorded at 20 kHz
# into a raw .remora file, and every sample whose innermost frame is an f_<k> must fall in
# the time f_<k> was running, by the target's own CLOCK_MONOTONIC account.
#
# The .remora file is read by formats.read_remora (the format is described there).
# A sample's time is its round's deadline, on CLOCK_MONOTONIC from start_mono_ns: the
# stack was read at or after it, and before the next sample's time (the last one: before
# start + duration). So a sample labelled f_<k> is right when f_<k>'s call interval meets
# [its time, the next sample's time], widened by SLACK_NS each side.

import bisect
import json
import os
import re

from harness import (INTERPRETERS, STATS, TARGETS, Fail, Target, interp_missing, more_seconds,
                     record, record_collapsed, summary)
from formats import innermost, next_times, read_remora

ORDER = 80            # where run.py runs these tests among the modules' (ascending)

RATE, RATE_HZ = "20k", 20000
SECONDS = 2.0                  # ~36,000 samples in f_<k> at 20 kHz (the calls are ~90% of
                               # the target's time)
MAX_SECONDS = 12               # recorded in all, at most, when the first took too few
MIN_CHECKED = 20000            # samples whose innermost frame is an f_<k>
MIN_DISTINCT = 500             # distinct f_<k> seen (2 s hold ~5,000 calls; a busy machine
                               # stretches calls, seen down to ~1,200)
MIN_REUSED = 100               # calls whose code object sits where an earlier one was
SLACK_NS = 50000               # 50 us at each edge of a call: the target stamps just
                               # outside the call, remora a round's deadline (the read is
                               # at or after it, before the next); both CLOCK_MONOTONIC

CHURN_PARTIAL_MAX = 0.5         # % of samples partial with the kernel engine, at most (its
                                # walk names what user space cannot: before that, 60-75%)
PARTIAL = re.compile(r"\d+ partial \(([0-9.]+)%\)")
FUNC = re.compile(r"^f_(\d{6})$")
FILE = re.compile(r"^<churn-(\d{6})>$")


# --- the test ---------------------------------------------------------------------------

def read_truth(path):
    """{k: (code address, exec_start, exec_end, call_start, call_end, fingerprint reused)}"""
    truth = {}
    with open(path) as f:
        for line in f:
            k, addr, e0, e1, c0, c1, fp = (int(x) for x in line.split())
            truth[k] = (addr, e0, e1, c0, c1, fp)
    return truth


def judge(r, truth, starts, keys):
    """Checks every sample of one recording. Returns (checked, modules, seen set, bad list)."""
    nxt = next_times(r)
    checked, modules, seen, bad = 0, 0, set(), []
    for i, (t0, _, node, _) in enumerate(r.samples):
        t1 = nxt[i]
        frame = innermost(r, node)
        if frame is None:
            continue
        fn, file = frame
        mf, mfile = FUNC.match(fn), FILE.match(file)
        if mf is None and mfile is None:
            continue            # the driver's own frames, <GC>
        k = int(mf.group(1)) if mf else int(mfile.group(1))
        if mf and mfile:
            agree = mf.group(1) == mfile.group(1)
        else:
            agree = mf is None and fn == "<module>"
        if not agree:
            why = "function and file disagree"
        elif k not in truth:
            why = "the target never made it"
        else:
            _, e0, e1, c0, c1, _ = truth[k]
            lo, hi = (c0, c1) if mf else (e0, e1)
            if lo - SLACK_NS <= t1 and hi + SLACK_NS >= t0:
                if mf:
                    checked += 1
                    seen.add(k)
                else:
                    modules += 1
                continue
            why = "ran %+.0f..%+.0f us from the sample" % ((lo - t0) / 1e3, (hi - t0) / 1e3)
        if mf:
            checked += 1
        # what ran last by the end of the window, by the target's account
        j = bisect.bisect_right(starts, t1) - 1
        last = keys[j] if j >= 0 else None
        running = "none yet" if last is None else "f_%06d%s" % (
            last, "" if truth[last][4] + SLACK_NS >= t0 else " (ended before)")
        # a popped frame reported as live (the walk, issue #4), not a name from the cache:
        # f_<k> is the last call made and it ended before the window, no call since
        stale = mf is not None and last == k and k in truth and truth[k][4] + SLACK_NS < t0
        bad.append(("stale" if stale else "cache",
                    "%s (%s) at +%.3f ms (window %.0f us): %s; last call by then: %s" % (
                        fn, file, (t0 - r.meta["start_mono_ns"]) / 1e6, (t1 - t0) / 1e3, why,
                        running)))
    return checked, modules, seen, bad


def test_exec_churn(remora, interp, extra=()):
    """Zero mislabelled samples over >= MIN_CHECKED samples in f_<k>, >= MIN_DISTINCT
    distinct f_<k>, while the target reuses code-object addresses (>= MIN_REUSED calls)."""
    notes, recordings = [], []
    with Target(interp, os.path.join(TARGETS, "exec_churn.py"), "ready.json") as t:
        t.wait_ready()
        seconds, checked_guess, spent, attempt = SECONDS, 0, 0.0, 0
        while True:
            attempt += 1
            path = os.path.join(t.dir, "churn-%d.remora" % attempt)
            _, err = record(remora, ["-p", t.pid, "-r", RATE, "-d", seconds, "--stats",
                                     "-o", path] + list(extra))
            summ = summary(err, RATE_HZ)
            st = STATS.search(err)
            notes.append("-d %g: %s%s" % (seconds, summ, ", cpu us/sample %s" % st.group(7)
                                          if st else ""))
            r = read_remora(path)
            recordings.append(r)
            checked_guess += sum(1 for s in r.samples
                                 if (innermost(r, s[2]) or ("", ""))[0].startswith("f_"))
            spent += summ.seconds
            if checked_guess >= MIN_CHECKED or spent >= MAX_SECONDS:
                break
            # too few (a busy machine, a sanitizer build): record more, sized from what
            # was achieved, with half again as margin
            seconds = more_seconds(checked_guess, MIN_CHECKED, spent, MAX_SECONDS)
        rc = t.finish()
        if rc != 0:
            raise Fail("target exited %d: %s" % (rc, t.log_tail()))
        truth = read_truth(os.path.join(t.dir, "truth.txt"))
    keys = sorted(truth, key=lambda k: truth[k][3])
    starts = [truth[k][3] for k in keys]
    checked = modules = 0
    seen, bad = set(), []
    calls = reused = fp_reused = 0
    earlier = set()
    in_window = set()
    for r in recordings:
        c, m, s, b = judge(r, truth, starts, keys)
        checked, modules, bad = checked + c, modules + m, bad + b
        seen |= s
        lo = r.meta["start_mono_ns"]
        hi = lo + r.meta["duration_ns"]
        in_window |= {k for k in truth if truth[k][1] <= hi and truth[k][4] >= lo}
    for k in sorted(truth):
        addr = truth[k][0]
        if k in in_window:
            calls += 1
            reused += addr in earlier
            fp_reused += truth[k][5]
        earlier.add(addr)
    figures = ("%d samples in f_<k> checked, %d in <module> of <churn-k>, %d distinct f_<k> "
               "of %d calls recorded; %d calls reused a freed code object's address, %d "
               "with name/file/line-table addresses reused too; slack %d us"
               % (checked, modules, len(seen), calls, reused, fp_reused, SLACK_NS // 1000))
    cache_bad = [text for kind, text in bad if kind == "cache"]
    stale = [text for kind, text in bad if kind == "stale"]
    figures += "; %d mislabelled by name, %d popped frames reported" % (len(cache_bad), len(stale))
    problems = []
    if cache_bad:
        problems.append("%d mislabelled samples, e.g. %s" % (len(cache_bad),
                                                            " | ".join(cache_bad[:4])))
    # the kernel engine names a frame whose code object was freed before user space could
    # read it from the names its walk read (issue 48): no sample left partial for it
    worst = max((float(m.group(1)), n) for n in notes for m in [PARTIAL.search(n)] if m) \
        if any(PARTIAL.search(n) for n in notes) else (0.0, "")
    if ", engine kernel" in worst[1] and worst[0] > CHURN_PARTIAL_MAX:
        problems.append("partial %.2f%% > %.1f%% with the kernel engine (%s)"
                        % (worst[0], CHURN_PARTIAL_MAX, worst[1]))
    if checked < MIN_CHECKED:
        problems.append("only %d samples in f_<k>, need %d" % (checked, MIN_CHECKED))
    if len(seen) < MIN_DISTINCT:
        problems.append("only %d distinct f_<k> seen, need %d" % (len(seen), MIN_DISTINCT))
    if reused < MIN_REUSED:
        problems.append("the target reused a code object's address only %d times, need %d "
                        "(the test would prove nothing)" % (reused, MIN_REUSED))
    if stale:
        # a popped frame reported as live (the walk, not the cache: the sample is named
        # after the function that ran last): the torn-stack checks must reject it
        problems.append("%d popped frames reported as live, e.g. %s" % (len(stale), " | ".join(stale[:2])))
    if problems:
        raise Fail("; ".join(problems) + " [" + figures + "; " + "; ".join(notes) + "]")
    return figures + "; " + "; ".join(notes)


# --- code objects swapped at one address -----------------------------------------------

SWAP_SECONDS = 2.0
SWAP_MIN_CHECKED = 5000        # samples in an f_<k> called from drive (20 kHz: ~38,000; a
                               # sanitizer build on a busy machine: seen ~15,000)
SWAP_MIN_REUSED = 0.5          # share of calls whose code object took the last one's address


def swap_call_lines(path):
    """{parity: line} of the two calls in code_swap.py, from its source: 1 the line marked
    ODD, 0 the line marked EVEN."""
    lines = {}
    with open(path) as f:
        for n, text in enumerate(f, 1):
            for parity, mark in ((1, "# ODD"), (0, "# EVEN")):
                if text.rstrip().endswith(mark):
                    lines[parity] = n
    if len(lines) != 2:
        raise Fail("code_swap.py has no ODD and EVEN call lines")
    return lines


def swap_judge(callee, caller, line, lines):
    """None when the frame pair is not an f_<k> called from drive on one of the two call
    lines; else whether the callee's name is on its own parity's line."""
    m = FUNC.match(callee)
    if m is None or caller != "drive" or line not in lines.values():
        return None
    return lines[int(m.group(1)) & 1] == line


def test_code_swap(remora, interp):
    """Every sample whose innermost frame is an f_<k> called from drive() names the code
    object that was running: f_<k> with k odd only ever runs from the ODD line, k even
    from the EVEN line (tests/targets/code_swap.py), while each call's code object takes
    the address of the one before it, a microsecond after that one returned."""
    script = os.path.join(TARGETS, "code_swap.py")
    lines = swap_call_lines(script)
    with Target(interp, script, "ready.json") as t:
        t.wait_ready()
        _, summ, stacks, stats = record_collapsed(remora, t, ["-r", RATE, "-d", SWAP_SECONDS],
                                                  RATE_HZ, "stats.json")
    checked, misnamed, bad = 0, 0, []
    for s in stacks:
        right = swap_judge(s.frames[-1][0], s.frames[-2][0], s.frames[-2][2], lines) \
            if len(s.frames) >= 2 else None
        if right is None:
            continue
        checked += s.count
        if not right:
            misnamed += s.count
            bad.append("%s called from line %d (%d samples)" % (s.frames[-1][0], s.frames[-2][2], s.count))
    figures = ("%d samples in an f_<k> called from drive checked, %d named after another code "
               "object; %d of %d calls reused the last call's code address; %s"
               % (checked, misnamed, stats["reused"], stats["calls"], summ))
    if bad:
        raise Fail("%d stacks name a code object other than the one running, e.g. %s [%s]"
                   % (len(bad), " | ".join(bad[:4]), figures))
    if checked < SWAP_MIN_CHECKED:
        raise Fail("only %d samples checked, need %d [%s]" % (checked, SWAP_MIN_CHECKED, figures))
    if stats["reused"] < SWAP_MIN_REUSED * stats["calls"]:
        raise Fail("the target reused the last code object's address in too few calls "
                   "(the test would prove nothing) [%s]" % figures)
    return figures


SWAP_DUMPS = 150               # `remora dump` of a target swapping code objects every 100 us
SWAP_DUMP_CALL_US = 100        # (read frame by frame, 5% of dumps named a frame after the
SWAP_DUMP_MIN_CHECKED = 50     # code object before: 8 in 150; at 30 us a dump that checks
                               # its reads mostly finds the thread between two calls)


def test_code_swap_dump(remora, interp):
    """`remora dump` of code_swap.py with 100 us calls, SWAP_DUMPS times: the main thread's
    innermost f_<k>, when called from drive, is on its own parity's line every time."""
    script = os.path.join(TARGETS, "code_swap.py")
    lines = swap_call_lines(script)
    checked, unreadable, bad = 0, 0, []
    with Target(interp, script, "ready.json", args=[SWAP_DUMP_CALL_US]) as t:
        ready = t.wait_ready()
        for _ in range(SWAP_DUMPS):
            rc, out, err = remora.run(["dump", "-p", t.pid, "--json"])
            if rc != 0:
                raise Fail("`remora dump` exited %d: %s" % (rc, err.strip()[-300:]))
            doc = json.loads(out)
            for th in doc["threads"]:
                if th["native_id"] != ready["main"]:
                    continue
                if th.get("error"):
                    unreadable += 1
                fr = th.get("frames", [])
                right = swap_judge(fr[0]["function"], fr[1]["function"], fr[1]["line"], lines) \
                    if len(fr) >= 2 else None
                if right is None:
                    continue
                checked += 1
                if not right:
                    bad.append("%s called from line %d" % (fr[0]["function"], fr[1]["line"]))
        rc = t.finish()
        if rc != 0:
            raise Fail("target exited %d: %s" % (rc, t.log_tail()))
    figures = ("%d dumps, %d with the main thread in an f_<k> called from drive, %d named after "
               "another code object, %d unreadable" % (SWAP_DUMPS, checked, len(bad), unreadable))
    if bad:
        raise Fail("%d dumps name a code object other than the one running, e.g. %s [%s]"
                   % (len(bad), " | ".join(bad[:4]), figures))
    if checked < SWAP_DUMP_MIN_CHECKED:
        raise Fail("only %d dumps checked, need %d [%s]" % (checked, SWAP_DUMP_MIN_CHECKED, figures))
    return figures


def tests(remora):
    """[(name, function, skip reason or None)] for run.py."""
    out = [("codes/exec-churn/%s" % interp[0], lambda i=interp: test_exec_churn(remora, i),
            interp_missing(interp)) for interp in INTERPRETERS]
    # 3.15 with --frame-anchor: frames below the anchor are remembered, codes still checked
    out += [("codes/exec-churn-anchor/%s" % interp[0],
             lambda i=interp: test_exec_churn(remora, i, ["--frame-anchor"]), interp_missing(interp))
            for interp in INTERPRETERS if interp[0] == "sid-3.15"]
    out += [("codes/swap/%s" % interp[0], lambda i=interp: test_code_swap(remora, i),
             interp_missing(interp)) for interp in INTERPRETERS]
    out += [("codes/swap-dump/%s" % interp[0], lambda i=interp: test_code_swap_dump(remora, i),
             interp_missing(interp)) for interp in INTERPRETERS]
    return out
