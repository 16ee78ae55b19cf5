# Functional tests of profile fidelity (issue 14; design.md, "Reading memory fast", rule 5):
# every round is written, and the shares of a profile are the shares of the time the
# target spent. A stack that moved while it was read keeps the frames provably unchanged
# across the read and, where the moving top cannot be resolved, ends with the marker frame
# `<moving>` (no file, line 0; written like `<GC>`) as its innermost frame. "errors" counts
# only thread samples that could not be read at all; the summary says
# `..., E errors (x%), P partial (y%), L late` and --stats `errors=E partial=P`
# (docs/cli.md, "Counts": x and y are shares of the thread samples written).
#
#   fidelity/mix/INTERP     tests/targets/work_mix.py (recursion, json, re, dataclasses,
#       sorted with a key, generators, re.sub calling back) recorded -r 5000 -d 4 in wall
#       mode, between two marks of the target's own clock: each work function's inclusive
#       share of the main thread's samples, and its self share (the samples under it whose
#       innermost frame is known: a function or <GC>, not the marker; all of its time is
#       spent in some frame under it, so this share too is its clock's), within MIX_MARGIN
#       points of its share of the window by the target's perf_counter_ns (the kernel
#       engine; the user-space engine: the inclusive share within MIX_MARGIN_USER, the self
#       share reported), the main thread in every round (at most MIX_MISSING % of rounds
#       without it), every stack rooted at <module>;main.
#   fidelity/chains/INTERP  tests/targets/alternate.py at -r 1k and -r 20k: at least
#       CHAINS_WRITTEN % of rounds written, no stack mixing the chains or breaking their
#       order (record_tests.torn_kind), `<moving>` only innermost after a prefix of a
#       possible stack that keeps <module>;main.
#   fidelity/dump/INTERP    `dump --json` of work_mix.py's busy main thread, DUMPS times:
#       never an error, every stack starting <module>;main;loop, or the marker alone.
#   fidelity/async/INTERP   tests/targets/async_busy.py: wall mode, every main-thread stack
#       starts with the root frames the target took from sys._current_frames() (its last,
#       run_forever, whose line moves, may be the `<moving>` marker); --mode exception,
#       every stack passes through a frame of this target at a line inside an except block
#       (found by `ast` on its own source), at least ASYNC_EXC_MIN samples (some, but fewer: skipped, too busy to judge).
#
# A round of which nothing could be known (the stack moved each time it was read) is
# written as the marker alone: no frame claimed, so no root check applies to it; its share
# of the main thread's samples is reported and bounded by BARE_MAX in every test.
#
# chains, async and dump are in every run; mix, whose shares are a measurement of timing, only
# when --only names "fidelity/mix" or REMORA_FIDELITY=1, which `make test` sets and `make
# asan` does not (the sanitizers slow each reading several times over: more stacks move
# while read, which is what mix measures, not what the sanitizers check).

import collections
import os
import re

from formats import parse_collapsed
from harness import (BASE, INTERPRETERS, TARGETS, Fail, Skip, Target, interp_missing, mark, record, tail, torn_kind,
                     torn_verdict)

ORDER = 340           # where run.py runs these tests among the modules' (ascending)
# mix, a measurement of timing, only with REMORA_FIDELITY=1 (make test, not make asan)
# or an --only beginning with one of these (run.py); chains, async and dump in every run
TIMED = ("fidelity/mix",)

MARKER = "<moving>"
BARE_MAX = 2.0               # % of the main thread's samples that may be the marker alone

# mix
MIX_RATE, MIX_SECONDS = 5000, 4
MIX_MARGIN = 1.0             # points of share, each work function, inclusive and self (20,000
                             # samples of a ~13 ms cycle: the binomial error of a 25% share is
                             # 0.3 points, and a periodic program sampled at a fixed rate
                             # errs less than that)
MIX_MARGIN_USER = 2.0        # the user-space engine, inclusive only: a running thread's top
                             # moves while it is read (its stacks end in the marker) and the
                             # frames kept are those both copies agree on
MIX_MISSING = 0.5            # % of rounds that may lack the main thread (the first and last)
# chains
CHAINS_RATES = (("1k", 1000), ("20k", 20000))
CHAINS_SECONDS = 2
CHAINS_WRITTEN = 99.0        # % of rounds that must hold the main thread
# The kernel engine samples a thread on a CPU by its ticks (one a period of its own CPU
# time) and the rounds only the threads off a CPU: how many samples a thread gets is its
# CPU time over the period plus the rounds that found it waiting, not the rounds. What
# must hold there is that every tick is written (or read from user space in its place):
# no dropped tick, taken + fallback + gone = samples (KERNEL_STATS).
# async
ASYNC_SECONDS = 2
ASYNC_EXC_MIN = 20           # exception-mode samples needed for the check not to be vacuous
                             # (flaky() is in its except block 4-12% of the rounds, seen)

SUMMARY = re.compile(r"^remora: (\d+) rounds? taken of \d+ asked in ([0-9.]+) s \((\d+) Hz of (\d+) Hz "
                     r"asked\), \d+ thread samples? written, \d+ left out as idle \([^)]*\), "
                     r"(\d+) errors? \(([0-9.]+)%\)(?:, (\d+) partial \(([0-9.]+)%\))?, "
                     r"(\d+) late, engine (kernel|user)(; the target exited)?$", re.M)
STATS = re.compile(r"^stats: rounds=(\d+) rounds_asked=\d+ thread_samples=\d+ idle=\d+ errors=(\d+)"
                   r"(?: partial=(\d+))? reads=(\d+) ", re.M)


# --- remora's output ------------------------------------------------------------------

class Run:
    """The summary line (with or without the partial count: None if remora did not print
    one) and, if there, the --stats line of one recording."""

    def __init__(self, err, asked):
        found = SUMMARY.findall(err)
        if len(found) != 1:
            raise Fail("want one summary line `remora: N rounds taken of A asked in D s (...), E errors (x%%), "
                       "P partial (y%%), L late`, found %d: %s" % (len(found), tail(err)))
        m = SUMMARY.search(err)
        self.rounds, self.seconds, self.hz = int(m.group(1)), float(m.group(2)), int(m.group(3))
        if int(m.group(4)) != asked:
            raise Fail("summary says %s Hz asked, want %d" % (m.group(4), asked))
        self.errors, self.error_pct = int(m.group(5)), float(m.group(6))
        self.partial = int(m.group(7)) if m.group(7) is not None else None
        self.partial_pct = float(m.group(8)) if m.group(8) is not None else None
        self.late = int(m.group(9))
        self.engine = m.group(10)
        self.err = err
        self.problems = []
        st = STATS.search(err)
        if st:
            if int(st.group(1)) != self.rounds or int(st.group(2)) != self.errors:
                self.problems.append("--stats says rounds=%s errors=%s, the summary %d/%d"
                                     % (st.group(1), st.group(2), self.rounds, self.errors))
            sp = int(st.group(3)) if st.group(3) is not None else None
            if sp != self.partial:
                self.problems.append("--stats says partial=%s, the summary %s" % (sp, self.partial))

    def partial_text(self):
        if self.partial is None:
            return "partial n/a"
        return "%d partial (%.2f%%)" % (self.partial, self.partial_pct)

    def __str__(self):
        return "%d rounds in %.2f s (%d Hz), %d errors (%.2f%%), %s, %d late, engine %s" % (
            self.rounds, self.seconds, self.hz, self.errors, self.error_pct, self.partial_text(),
            self.late, self.engine)


KERNEL_STATS = re.compile(r"^kernel: samples=(\d+) fallback=(\d+) unnamed=(\d+) ticks=(\d+) "
                          r"dropped=(\d+) .* taken=(\d+) missed=(\d+) gone=(\d+) ", re.M)


def kernel_problems(err):
    """Why the kernel engine's --stats line says a tick was lost, or []."""
    m = KERNEL_STATS.search(err)
    if m is None:
        return ["no `kernel:` line in --stats: %s" % tail(err)]
    samples, fallback, ticks, dropped, taken, gone = (int(m.group(i)) for i in (1, 2, 4, 5, 6, 8))
    out = []
    if dropped:
        out.append("%d of %d ticks dropped (the ring buffer was full)" % (dropped, ticks))
    if taken + fallback + gone != samples:
        out.append("%d ticks reached remora, %d written, %d read from user space in their place, "
                   "%d of threads gone" % (samples, taken, fallback, gone))
    return out


def marker_problem(s):
    """Why a stack's use of the `<moving>` marker breaks the contract, or None."""
    where = [i for i, f in enumerate(s.frames) if f[0] == MARKER]
    if not where:
        return None
    if where != [len(s.frames) - 1]:
        return "`<moving>` not the innermost frame"
    if s.frames[-1][1:] != (None, None):
        return "`<moving>` written with a file or line (%s:%s), unlike `<GC>`" % s.frames[-1][1:]
    return None


def ends_moving(s):
    return bool(s.frames) and s.frames[-1][0] == MARKER


def is_bare(s):
    """The marker alone: nothing of the stack was known."""
    return len(s.frames) == 1 and s.frames[0][0] == MARKER


def bare_problem(what, bare, main):
    """A problem if more than BARE_MAX % of the main thread's samples knew nothing."""
    if main and 100.0 * bare / main > BARE_MAX:
        return "%s%d of %d main-thread samples (%.2f%%) know no frame, want at most %.1f%%" % (
            what, bare, main, 100.0 * bare / main, BARE_MAX)
    return None


def clock_shares(ready, before, after):
    """{function: % of the window} by the target's own perf_counter_ns, the window's length
    (s) and the target's CPU time over it as % of the window."""
    window = after["at"] - before["at"]
    if window <= 0:
        raise Fail("the target's marks are not in order")
    shares = {fn: 100.0 * (after["wall"][fn] - before["wall"][fn]) / window
              for fn in ready["functions"]}
    return shares, window / 1e9, 100.0 * (after["cpu"] - before["cpu"]) / window


def mix_shares(stacks, ready):
    """Main-thread samples, {function: % of them whose stack holds it}, {function: % of
    them whose stack holds it and ends in a known frame, not the marker}, marker samples."""
    main = [s for s in stacks if s.tid == ready["main"]]
    n = sum(s.count for s in main)
    got, self_ = {}, {}
    for fn in ready["functions"]:
        under = [s for s in main if any(f[0] == fn and f[1] == ready["file"] for f in s.frames)]
        got[fn] = 100.0 * sum(s.count for s in under) / n if n else 0.0
        self_[fn] = 100.0 * sum(s.count for s in under if not ends_moving(s)) / n if n else 0.0
    return n, got, self_, sum(s.count for s in main if ends_moving(s))


# --- fidelity/mix ---------------------------------------------------------------------

def record_mix(remora, interp, extra=(), rate=MIX_RATE, seconds=MIX_SECONDS):
    """One wall-mode recording of work_mix.py between two marks of its clock: (ready,
    Run, stacks, clock shares, window seconds, the target's CPU % of the window)."""
    with Target(interp, os.path.join(TARGETS, "work_mix.py"), "ready.json") as t:
        ready = t.wait_ready()
        path = os.path.join(t.dir, "mix.collapsed")
        before = mark(t, 1)
        _, err = record(remora, ["-p", t.pid, "-r", rate, "-d", seconds, "--mode", "wall",
                                 "--stats", "-f", "collapsed", "-o", path] + list(extra))
        after = mark(t, 2)
        stacks = parse_collapsed(path)
    run = Run(err, rate)
    clock, window, cpu = clock_shares(ready, before, after)
    return ready, run, stacks, clock, window, cpu


def test_mix(remora, interp):
    """The shares are a measurement on a shared machine: a recording outside the bounds
    is recorded once more, and the test passes only if that one is inside them (its note
    says what the first showed); two outside fail."""
    problems, note = judge_mix(remora, interp)
    if not problems:
        return note
    first = "; ".join(problems)
    problems, note = judge_mix(remora, interp)
    if problems:
        raise Fail("twice: " + first + " | then " + "; ".join(problems) + " [" + note + "]")
    return note + "; on a second recording, the first: " + first


def judge_mix(remora, interp):
    """One recording of the mix: (problems, note)."""
    ready, run, stacks, clock, window, cpu = record_mix(remora, interp)
    n, got, self_, moving = mix_shares(stacks, ready)
    problems = list(run.problems)
    bad_marker = collections.Counter(marker_problem(s) for s in stacks if marker_problem(s))
    for why, k in bad_marker.items():
        problems.append("%d samples: %s" % (k, why))
    others = sum(s.count for s in stacks if s.tid != ready["main"])
    if others:
        problems.append("%d samples of threads the target does not have" % others)
    # <module> and main never move (main sits in its call of loop): every stack has them
    unrooted = [s for s in stacks if s.tid == ready["main"] and not is_bare(s)
                and [(f[0], f[1]) for f in s.frames[:2]] != [("<module>", ready["file"]), ("main", ready["file"])]]
    bare = sum(s.count for s in stacks if s.tid == ready["main"] and is_bare(s))
    if bare_problem("", bare, n):
        problems.append(bare_problem("", bare, n))
    if unrooted:
        problems.append("%d samples not rooted at <module>;main, e.g. %s" % (
            sum(s.count for s in unrooted), ";".join(unrooted[0].functions())[:200]))
    gaps = {fn: got[fn] - clock[fn] for fn in ready["functions"]}
    self_gaps = {fn: self_[fn] - clock[fn] for fn in ready["functions"]}
    worst = max(ready["functions"], key=lambda fn: abs(gaps[fn]))
    worst_self = max(ready["functions"], key=lambda fn: abs(self_gaps[fn]))
    margin = MIX_MARGIN if run.engine == "kernel" else MIX_MARGIN_USER
    off = [fn for fn in ready["functions"] if abs(gaps[fn]) > margin]
    if off:
        problems.append("inclusive shares off by more than %.0f points: %s" % (margin, ", ".join(
            "%s %.1f%% (clock %.1f%%)" % (fn, got[fn], clock[fn]) for fn in off)))
    off = [fn for fn in ready["functions"] if abs(self_gaps[fn]) > MIX_MARGIN]
    if off and run.engine == "kernel":
        problems.append("self shares off by more than %.0f points: %s" % (MIX_MARGIN, ", ".join(
            "%s %.1f%% (clock %.1f%%)" % (fn, self_[fn], clock[fn]) for fn in off)))
    missing = run.rounds - n
    if run.engine == "kernel":
        problems += kernel_problems(run.err)
    elif n > run.rounds:
        problems.append("%d main-thread samples in %d rounds" % (n, run.rounds))
    elif run.rounds == 0 or 100.0 * missing / run.rounds > MIX_MISSING:
        problems.append("%d of %d rounds (%.1f%%) have no main-thread sample, want at most %.1f%%"
                        % (missing, run.rounds, 100.0 * missing / max(run.rounds, 1), MIX_MISSING))
    note = ("%s; main in %d rounds; marker %.1f%% (alone %.2f%%); worst gap %s %+.1f points, self %s "
            "%+.1f; clock sums to %.1f%% of %.2f s (target on CPU %.0f%%); remora incl/self/clock: %s" % (
                run, n, 100.0 * moving / max(n, 1), 100.0 * bare / max(n, 1), worst, gaps[worst],
                worst_self, self_gaps[worst_self], sum(clock.values()), window, cpu,
                ", ".join("%s %.1f/%.1f/%.1f" % (fn, got[fn], self_[fn], clock[fn])
                          for fn in ready["functions"])))
    return problems, note


# --- fidelity/dump --------------------------------------------------------------------

DUMPS = 10


def test_dump(remora, interp):
    """`dump --json` of work_mix.py's busy main thread, DUMPS times: never an error (a
    busy thread gets its known outer frames and the marker, or its whole stack), and every
    stack, read outermost first, starts <module>;main;loop in the target's file, but the
    marker alone."""
    import json
    problems, kinds = [], collections.Counter()
    with Target(interp, os.path.join(TARGETS, "work_mix.py"), "ready.json") as t:
        ready = t.wait_ready()
        for k in range(DUMPS):
            rc, out, err = remora.run(["dump", "-p", t.pid, "--json"])
            if rc != 0:
                problems.append("dump %d exited %d: %s" % (k + 1, rc, tail(err)))
                continue
            th = [x for x in json.loads(out)["threads"] if x["native_id"] == ready["main"]]
            if len(th) != 1:
                problems.append("dump %d: %d main threads" % (k + 1, len(th)))
                continue
            th = th[0]
            if th.get("error"):
                problems.append("dump %d: the main thread's stack unreadable (%s)" % (k + 1, th["error"]))
                continue
            fr = [(f["function"], f["file"]) for f in reversed(th["frames"])]
            if th.get("partial"):
                if not th["frames"] or th["frames"][0]["function"] != MARKER:
                    problems.append("dump %d: partial without the marker innermost" % (k + 1))
                    continue
                fr = fr[:-1]
                kinds["partial" if fr else "marker alone"] += 1
                if not fr:
                    continue
            else:
                kinds["whole"] += 1
            want = [("<module>", ready["file"]), ("main", ready["file"]), ("loop", ready["file"])]
            if fr[:3] != want[:min(3, len(fr))] or len(fr) < 2:
                problems.append("dump %d: not rooted at <module>;main;loop: %s" % (
                    k + 1, ";".join(f[0] for f in fr)[:200]))
    note = ", ".join("%s %d" % kv for kv in sorted(kinds.items()))
    if problems:
        raise Fail("; ".join(problems) + " [" + note + "]")
    return "%d dumps: %s" % (DUMPS, note)


# --- fidelity/chains ------------------------------------------------------------------

def chains_kind(functions):
    """None if alternate.py can have this stack (a trailing `<moving>` after a prefix of one
    it can have that keeps <module>;main, the frames that never move), else what is wrong."""
    if MARKER in functions:
        if functions.index(MARKER) != len(functions) - 1:
            return "`<moving>` not innermost"
        prefix = functions[:-1]
        if not prefix:
            return None             # the marker alone: nothing known, nothing claimed
        if prefix[:2] != BASE[:2]:
            return "`<moving>` without <module>;main above it"
        if len(prefix) < len(BASE):
            return None if prefix == BASE[:len(prefix)] else "does not start with <module>;main;alternate"
        return torn_kind(prefix)
    return torn_kind(functions)


def chains_recording(remora, t, ready, rate, hz, attempt):
    """One recording of alternate.py at rate: (problems, how much short of CHAINS_WRITTEN
    the written share is (0: not short), the note)."""
    path = os.path.join(t.dir, "chains-%s-%d.collapsed" % (rate, attempt))
    _, err = record(remora, ["-p", t.pid, "-r", rate, "-d", CHAINS_SECONDS, "--stats", "-o", path])
    run = Run(err, hz)
    stacks = parse_collapsed(path)
    bad, examples, problems = collections.Counter(), [], []
    main = moving = bare = 0
    for s in stacks:
        fns = s.functions()
        if s.tid != ready["main"]:
            kind = "a thread the target does not have (%d)" % s.tid
        else:
            main += s.count
            moving += s.count if ends_moving(s) else 0
            bare += s.count if is_bare(s) else 0
            kind = (chains_kind(fns) if fns else "an empty stack") or marker_problem(s)
        if kind:
            bad[kind] += s.count
            if len(examples) < 3:
                examples.append("%s x%d: %s" % (kind, s.count, ";".join(fns)))
    written = 100.0 * main / run.rounds if run.rounds else 0.0
    note = "-r %s: %s, %.2f%% written, marker %.1f%% (alone %.2f%%)" % (
        rate, run, written, 100.0 * moving / max(main, 1), 100.0 * bare / max(main, 1))
    if bare_problem("", bare, main):
        problems.append("-r %s: %s" % (rate, bare_problem("", bare, main)))
    problems += ["-r %s: %s" % (rate, p) for p in run.problems]
    problem, known = torn_verdict(bad, examples, main, run.engine)
    if problem:
        problems.append("-r %s: %s" % (rate, problem))
    if known:
        note += "; " + known
    short = 0.0
    if run.engine == "kernel":
        problems += ["-r %s: %s" % (rate, p) for p in kernel_problems(run.err)]
    elif main > run.rounds:
        problems.append("-r %s: %d main-thread samples in %d rounds" % (rate, main, run.rounds))
    elif written < CHAINS_WRITTEN:
        short = CHAINS_WRITTEN - written
        problems.append("-r %s: %d of %d rounds written (%.2f%%), want at least %.0f%%"
                        % (rate, main, run.rounds, written, CHAINS_WRITTEN))
    return problems, short, note


def test_chains(remora, interp):
    """Every stack of every recording must be one the target can have. The written share is
    a measurement of timing (the first rounds, before the thread is read whole, are not
    written; a loaded machine has more of them): a recording whose only problem is that
    share is taken once more, and its note says so."""
    notes, problems = [], []
    with Target(interp, os.path.join(TARGETS, "alternate.py"), "ready.json") as t:
        ready = t.wait_ready()
        for rate, hz in CHAINS_RATES:
            rp, short, note = chains_recording(remora, t, ready, rate, hz, 1)
            if short and len(rp) == 1:
                rp, _, note2 = chains_recording(remora, t, ready, rate, hz, 2)
                note = note2 + " (on a second recording; the first: %s)" % note
            notes.append(note)
            problems += rp
    if problems:
        raise Fail("; ".join(problems) + " [" + "; ".join(notes) + "]")
    return "; ".join(notes)


# --- fidelity/async -------------------------------------------------------------------

def root_problem(s, root):
    """Why a main-thread stack does not start with the target's root frames, or None. Every
    root frame sits in a call except the last (run_forever, between its _run_once calls):
    only that one may be the `<moving>` marker, and only its name and file are compared."""
    fr = s.frames
    if is_bare(s):
        return None                 # nothing known, nothing claimed (bounded by BARE_MAX)
    for i, want in enumerate(root):
        last = i == len(root) - 1
        if i >= len(fr):
            return "the stack ends after %d of %d root frames" % (len(fr), len(root))
        got = fr[i]
        if last and got[0] == MARKER and i == len(fr) - 1:
            return None
        if (got[0], got[1]) != (want["function"], want["file"]) or (not last and got[2] != want["line"]):
            return "frame %d is %s (%s:%s), want %s (%s:%s)" % (
                i, got[0], got[1], got[2], want["function"], want["file"],
                "*" if last else want["line"])
    return None


def at_task_step(s):
    """Whether the stack ends in the event loop's call of a callback (asyncio's Handle._run):
    a task's step, in C, between the frames. Resuming a coroutine, CPython points the
    thread's exception state at the coroutine's own before it pushes the coroutine's frame,
    and back after it pops it (gen_send_ex; 3.11+: around the frame's evaluation), so a
    tick in that window sees flaky()'s exception -- it was suspended inside its except
    block -- with no frame of flaky() on the stack yet: the thread's true state, which
    the stack cannot place (seen once in ~200 exception samples of 3.9)."""
    if not s.frames:
        return False
    fn, file, _ = s.frames[-1]
    return fn in ("_run", "Handle._run") and (file or "").endswith(os.path.join("asyncio", "events.py"))


def at_raise(s, ready):
    """Whether the stack's innermost frame of the target is at a line of a try body with an
    except block (its innermost frame, fail()'s gone): 3.9/3.10 set the thread's
    exception state as they jump to the handler and record the handler's first
    instruction only when they dispatch it (f_lasti lags: checks of the eval breaker lie
    between), so a tick there sees the exception handled with the frame still at the
    instruction that raised."""
    fr = s.frames
    if not fr or fr[-1][1] != ready["file"] or fr[-1][2] is None:
        return False
    fn, _, line = fr[-1]
    return any(fn == b["function"] and b.get("try_first", 0) <= line <= b.get("try_last", -1)
               for b in ready["except"])


def in_except(s, ready):
    """Whether the stack passes through a frame of the target at a line of an except block
    of the function holding it (a function called from there is below that frame): True,
    False, or None when it cannot be told -- a frame of a function with an except block at
    an instruction the compiler gave no line (-1: the handler's PUSH_EXC_INFO, its
    COPY/POP_EXCEPT/RERAISE cleanup; 3.13's flaky() has six), where the thread may be
    handling its exception or not, a stack ending at a task's step (at_task_step) or in
    a try body at the instruction that raised (at_raise)."""
    unplaced = at_task_step(s) or at_raise(s, ready)
    for fn, file, line in s.frames:
        if file == ready["file"] and line is not None:
            for b in ready["except"]:
                if fn == b["function"] and b["first"] <= line <= b["last"]:
                    return True
                if fn == b["function"] and line < 0:
                    unplaced = True
    return None if unplaced else False


def test_async(remora, interp):
    problems = []
    with Target(interp, os.path.join(TARGETS, "async_busy.py"), "ready.json") as t:
        ready = t.wait_ready()
        wall_path = os.path.join(t.dir, "wall.collapsed")
        exc_path = os.path.join(t.dir, "exception.collapsed")
        # the loop sleeps 1 ms at a time (in epoll: idle): --idle keeps those rounds too
        _, err = record(remora, ["-p", t.pid, "-d", ASYNC_SECONDS, "--mode", "wall", "--idle",
                                 "--stats", "-o", wall_path])
        wall = Run(err, 1000)
        # the target's share of time in except blocks falls under load (seen 0.4% of rounds
        # where 4-8% is usual): too few samples to judge is recorded once more, not failed
        for attempt in range(2):
            _, err = record(remora, ["-p", t.pid, "-d", ASYNC_SECONDS, "--mode", "exception",
                                     "--idle", "--stats", "-o", exc_path])
            exc = Run(err, 1000)
            exc_stacks = parse_collapsed(exc_path)
            if sum(s.count for s in exc_stacks) >= ASYNC_EXC_MIN:
                break
        wall_stacks = parse_collapsed(wall_path)
    if not ready["except"]:
        raise Fail("the target found no except block in its own source")
    problems += ["wall: " + p for p in wall.problems] + ["exception: " + p for p in exc.problems]
    # wall mode: every main-thread stack rooted where the target says
    unrooted, examples, main, moving, bare = collections.Counter(), [], 0, 0, 0
    for s in wall_stacks:
        if s.tid != ready["main"]:
            unrooted["a thread the target does not have (%d)" % s.tid] += s.count
            continue
        main += s.count
        moving += s.count if ends_moving(s) else 0
        bare += s.count if is_bare(s) else 0
        why = root_problem(s, ready["root"]) or marker_problem(s)
        if why:
            unrooted[why] += s.count
            if len(examples) < 2:
                examples.append("x%d: %s" % (s.count, ";".join(s.functions())))
    if unrooted:
        problems.append("wall: %d samples not rooted at %s (%s); e.g. %s" % (
            sum(unrooted.values()), ";".join(f["function"] for f in ready["root"]),
            ", ".join("%s: %d" % kv for kv in list(unrooted.items())[:4]), " | ".join(examples)))
    if main == 0:
        problems.append("wall: no sample of the main thread")
    if bare_problem("wall: ", bare, main):
        problems.append(bare_problem("wall: ", bare, main))
    # exception mode: every stack inside an except block (or called from one)
    outside, oexamples, n_exc, unplaced, steps = 0, [], 0, 0, 0
    for s in exc_stacks:
        n_exc += s.count
        inside = in_except(s, ready)
        unplaced += s.count if inside is None else 0
        steps += s.count if at_task_step(s) or at_raise(s, ready) else 0
        why = None if inside is not False else "not inside an except block"
        why = why or marker_problem(s)
        if why:
            outside += s.count
            if len(oexamples) < 2:
                oexamples.append("%s x%d: %s" % (why, s.count, ";".join(
                    "%s:%s" % (f[0], f[2]) for f in s.frames[-6:])))
    if outside:
        problems.append("exception: %d of %d samples wrong; e.g. %s" % (outside, n_exc,
                                                                     " | ".join(oexamples)))
    if steps > max(2, n_exc // 50):    # windows of a few instructions a resumption or raise
        problems.append("exception: %d of %d samples at a task's step or a raise, want at "
                        "most 2%%" % (steps, n_exc))
    few = 0 < n_exc < ASYNC_EXC_MIN     # some, all right, but too few to judge: a busy machine
    if n_exc == 0:
        problems.append("exception: no sample, want at least %d" % ASYNC_EXC_MIN)
    written = 100.0 * main / wall.rounds if wall.rounds else 0.0
    note = ("wall: %s, %.2f%% of rounds written, marker %.1f%% (alone %.2f%%); exception: %d samples "
            "(%.1f%% of rounds; %d at an instruction with no line, a task's step or a raise, not "
            "judged), "
            "%d errors, %s"
            % (wall, written, 100.0 * moving / max(main, 1), 100.0 * bare / max(main, 1), n_exc,
               100.0 * n_exc / max(exc.rounds, 1), unplaced, exc.errors, exc.partial_text()))
    if problems:
        raise Fail("; ".join(problems) + " [" + note + "]")
    if few:
        raise Skip("machine too busy to judge exception mode: %d samples in two recordings' "
                   "last, want at least %d [%s]" % (n_exc, ASYNC_EXC_MIN, note))
    return note


# --- the list run.py runs -------------------------------------------------------------

def tests(remora):
    """[(name, function, skip reason or None)] for run.py: mix (TIMED), chains, async and
    dump."""
    out = []
    for kind, fn in (("mix", test_mix), ("chains", test_chains), ("async", test_async),
                     ("dump", test_dump)):
        for interp in INTERPRETERS:
            out.append(("fidelity/%s/%s" % (kind, interp[0]),
                        lambda i=interp, fn=fn: fn(remora, i), interp_missing(interp)))
    return out
