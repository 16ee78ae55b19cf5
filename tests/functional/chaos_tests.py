# Chaos tests (issue #7, point 4): remora records targets that misbehave under it --
# threads born and dying all the time, exceptions thrown through deep recursion, a
# target that exits (or is SIGKILLed) in the middle of a sample, one that is SIGSTOPped
# and resumed, one that forks -- and must never crash, hang, print a sanitizer report
# (harness.Remora fails on those), exit with an undocumented status, write a broken
# profile, or lie: every stack written must be one the target can have. The ground
# truth for that is the target's own source (tests/targets/chaos_*.py): its functions,
# their line spans and which of them calls which on what line (read with ast), plus
# the thread ids and roles each target reports about itself. Errors (torn reads) are
# counted by remora, never written as stacks, so they are reported but not judged.
#
# Interpreters: the representative set CHAOS_INTERPRETERS (3.9, 3.11, 3.12, 3.13 and
# 3.15), to keep the whole group near a minute per build. Random moments (delays before
# an exit or a SIGKILL, SIGSTOP timings) come from one seed per run, printed in every
# PASS/FAIL line; REMORA_CHAOS_SEED=N replays one.

import collections
import json
import os
import random
import shutil
import signal
import time

from harness import (INTERPRETERS, READY_TIMEOUT, SUMMARY, Fail, Recording, Role, Source, Target,
                     depth_note, interp_missing, judge_profile, one_line, record, recurse_roles,
                     script, summary, tail, wait_state, workdir)
from formats import (by_thread, first_difference, parse_collapsed, read_pstats, speedscope_counts,
                     speedscope_stacks, total)

ORDER = 50            # where run.py runs these tests among the modules' (ascending)

CHAOS_INTERPRETERS = ("pyenv-3.9.18", "pyenv-3.11.7", "pyenv-3.12.1", "pyenv-3.13.0", "sid-3.15")
SEED = int(os.environ.get("REMORA_CHAOS_SEED", "0")) or random.SystemRandom().randrange(1, 1 << 30)

RECORD_SECONDS = 1.0           # churn, recursion, fork: long enough for thousands of rounds
CHURN_WORKERS = 10             # distinct workers sampled for churn to count as exercised
CHURN_TRIES = 3                # recordings at most until then
FAST_RATE = "5k"               # a high rate: more samples land on a thread being born or dying
EXIT_RATE = "20k"              # exit tests: as many samples as possible near the exit
EXIT_DELAY_MAX = 0.4           # s after ready at which chaos_exit.py ends itself
KILL_ATTEMPTS = 4              # SIGKILLs per interpreter, at random moments
KILL_DELAY_MAX = 0.4           # s after `record` started
STOP_FLIPS = 25                # quick SIGSTOP/SIGCONT pairs while recording
MIN_SAMPLED = 20               # rounds after which a profile of a live target must hold stacks


# --- outputs ------------------------------------------------------------------------------

def check_outputs(remora, d, names, summ, need_stacks):
    """Every output of one recording is there and valid: collapsed parses, speedscope JSON
    parses and holds the same stacks, .remora converts to the same stacks, .html and
    .pstats (Python's marshal) loads. Returns the collapsed stacks."""
    paths = {os.path.splitext(n)[1]: os.path.join(d, n) for n in names}
    for p in paths.values():
        if not os.path.isfile(p):
            raise Fail("%s was not written" % os.path.basename(p))
    stacks = parse_collapsed(paths[".collapsed"])
    want = by_thread(stacks)
    if ".json" in paths:
        try:
            with open(paths[".json"], encoding="utf-8") as f:
                doc = json.load(f)
        except ValueError as e:
            raise Fail("%s is not JSON: %s" % (os.path.basename(paths[".json"]), e))
        got, _ = speedscope_stacks(doc)
        got = {tid: c for tid, c in got.items() if sum(c.values())}
        got, _ = speedscope_counts(got, want)       # weights in seconds: back to samples
        # speedscope has no "no line": remora writes 0 there for the -1 of collapsed
        flat = {}
        for tid, c in want.items():
            for st, n in c.items():
                st = tuple((fn, fi, 0 if li is not None and li < 0 else li) for fn, fi, li in st)
                flat.setdefault(tid, collections.Counter())[st] += n
        if got != flat:
            raise Fail("the speedscope file holds %d samples, the collapsed file %d; first "
                       "difference: %s" % (sum(sum(c.values()) for c in got.values()),
                                           total(stacks), first_difference(got, flat)))
    if ".remora" in paths:
        conv = os.path.join(d, "converted.collapsed")
        rc, _, err = remora.run(["convert", paths[".remora"], "-o", conv])
        if rc != 0:
            raise Fail("`remora convert` of the .remora file exited %d: %s" % (rc, tail(err)))
        back = by_thread(parse_collapsed(conv))
        if back != want:
            raise Fail("the .remora file converts to %d samples, the collapsed file has %d; "
                       "first difference: %s" % (sum(sum(c.values()) for c in back.values()),
                                                 total(stacks), first_difference(back, want)))
    if ".html" in paths:
        with open(paths[".html"], "rb") as f:
            html = f.read()
        if not html.rstrip().endswith(b"</html>"):
            raise Fail("the flamegraph does not end with </html> (%d bytes)" % len(html))
    if ".pstats" in paths:
        read_pstats(os.path.basename(paths[".pstats"]), paths[".pstats"])
    if need_stacks and summ.samples >= MIN_SAMPLED and total(stacks) == 0:
        raise Fail("%d rounds taken but no stack written (%s)" % (summ.samples, summ))
    return stacks


def outputs_args(d, names):
    """-o for each name, and --idle: every thread's every sample is judged, those waiting
    for the GIL or parked too (the default leaves idle threads out)."""
    args = ["--idle"]
    for n in names:
        args += ["-o", os.path.join(d, n)]
    return args


def seeded(note):
    return "%s; seed %d" % (note, SEED)


def rng_for(kind, interp):
    return random.Random("%d/%s/%s" % (SEED, kind, interp[0]))


# --- 1. thread churn ----------------------------------------------------------------------

def churn_roles(truth):
    roles = collections.defaultdict(list)
    roles[truth["main"]].append(Role("main", ["<module>"], trail=["threading.py", "_weakrefset.py"]))
    for tid in truth["thread_workers"]:
        roles[tid].append(Role("threading worker", ["thread_worker"], lead=["threading.py"],
                               empty=True))
    for tid in truth["raw_workers"]:
        roles[tid].append(Role("_thread worker", ["raw_worker"], empty=True))
    return roles


def test_churn(remora, interp):
    """Threads started and joined all the time (4 threading + 2 _thread workers a batch):
    every sampled thread is one the target started, with only bootstrap frames and its
    worker function; the main thread only <module> -> main -> churn and threading's."""
    src = Source(script("chaos_churn.py"))
    names = ["churn.collapsed", "churn.json"]
    stacks, summs = [], []
    with Target(interp, script("chaos_churn.py"), "ready.json") as t:
        main = t.wait_ready()["main"]
        # recorded again (CHURN_TRIES in all) while fewer than CHURN_WORKERS workers were
        # sampled: a worker lives for a fraction of a millisecond, and on a busy machine
        # or a sanitizer build 2-9 of some 3,000 were seen in a second (1 run in 100);
        # every recording's stacks are judged
        for _ in range(CHURN_TRIES):
            _, err = record(remora, ["-p", t.pid, "-r", FAST_RATE, "-d", RECORD_SECONDS]
                            + outputs_args(t.dir, names))
            summs.append(summary(err))
            stacks += check_outputs(remora, t.dir, names, summs[-1], True)
            if len({s.tid for s in stacks if s.tid != main}) >= CHURN_WORKERS:
                break
        summ = "; ".join(str(x) for x in summs)
        rc = t.finish()
        if rc != 0:
            raise Fail("the target exited %d: %s" % (rc, t.log_tail()))
        with open(os.path.join(t.dir, "truth.json")) as f:
            truth = json.load(f)
    # 3.9/3.10 keep no native thread id: remora reads the tid in each thread's struct
    # pthread in the sample's own read (before and after the thread's copies; a change
    # is an error), never the one a list walk found earlier, which a thread that took
    # over the same cached stack may have made stale
    by_role = judge_profile(stacks, churn_roles(truth), src)
    workers = {s.tid for s in stacks if s.tid != truth["main"]}
    if len(workers) < CHURN_WORKERS:
        raise Fail("only %d worker threads sampled (of %d started) in %d recordings: churn not "
                   "exercised [%s]" % (len(workers), len(truth["thread_workers"]) + len(truth["raw_workers"]),
                                       len(summs), summ))
    return "%d batches, %d of %d workers sampled; %s; samples by role: %s" % (
        truth["batches"], len(workers), len(truth["thread_workers"]) + len(truth["raw_workers"]),
        summ, ", ".join("%s %d" % kv for kv in sorted(by_role.items())))


# --- 2. exceptions in deep recursion ------------------------------------------------------


# windows of RECORD_SECONDS at most: a window sees the deep end through the thread parked
# waiting for the GIL (the one diving is read torn); ~200-570 of ~3,000 samples per window
# under ASan here (before the target took turns by the switch interval, 0-10 on 3.12+, and
# none in ten windows on a loaded machine)
RECURSION_WINDOWS = 10


def test_recursion(remora, interp):
    """Two threads recurse to depth 500, raise at the bottom and catch at a different
    depth each time: every stack is <module> -> main -> spin -> dive x k or
    diver -> spin -> dive x k, k <= 501, each outer frame on the line of its call. Every
    window recorded is judged; a window that saw no deep or no shallow stack (a loaded
    machine: deep stacks in flux are read as torn more often) is recorded again, up to
    RECURSION_WINDOWS times, and the test fails if none saw both."""
    src = Source(script("chaos_recurse.py"))
    notes = []
    # 3.9/3.10 frames are heap objects: the diving thread's are freed faster than a sample
    # can read them (those samples are errors, as they must be), so only the thread
    # waiting for the GIL is seen, parked at one depth for long stretches: there, a
    # window must show one end of the recursion, not both
    heap_frames = interp[0].startswith(("pyenv-3.9", "pyenv-3.10"))
    seen = (lambda d, s: d or s) if heap_frames else (lambda d, s: d and s)
    with Target(interp, script("chaos_recurse.py"), "ready.json") as t:
        ready = t.wait_ready()
        for window in range(1, RECURSION_WINDOWS + 1):
            names = ["rec%d.collapsed" % window, "rec%d.json" % window]
            _, err = record(remora, ["-p", t.pid, "-r", FAST_RATE, "-d", RECORD_SECONDS]
                            + outputs_args(t.dir, names))
            summ = summary(err)
            stacks = check_outputs(remora, t.dir, names, summ, True)
            by_role = judge_profile(stacks, recurse_roles(ready), src)
            deep, shallow = depth_note(stacks)
            notes.append("%s; main %d, diver %d samples; %d at depth >= 400, %d below 100" % (
                summ, by_role["main"], by_role["diver"], deep, shallow))
            if seen(deep, shallow):
                break
        rc = t.finish()
        if rc != 0:
            raise Fail("the target exited %d: %s" % (rc, t.log_tail()))
    if not seen(deep, shallow):
        raise Fail("no window saw a sample at depth >= 400 %s one below 100: the recursion "
                   "was not seen [%s]" % ("or" if heap_frames else "and", " | ".join(notes)))
    return " | ".join(notes)


# --- 3. exit in the middle of a sample ----------------------------------------------------

EXIT_CODES = {"return": 0, "exit3": 3, "thread": 5, "kill": 128 + signal.SIGKILL}


def exit_roles(ready, launch):
    # at exit the main thread runs threading._shutdown and atexit handlers (a .pth file's
    # module may have registered one): any stack without a frame of the script
    roles = {ready["main"]: [Role("main", ["<module>"], trail=["any" if launch else "threading.py"],
                                  alone=["any"], empty=True, imports=launch)]}
    for tid in ready["threads"]:
        roles[tid] = [Role("thread", ["thread_loop"], lead=["threading.py"], empty=True)]
    return roles


def test_exit(remora, interp):
    """chaos_exit.py ends by itself (normal return, sys.exit(3), os._exit(5) from a thread,
    SIGKILL) at a random moment while remora samples at 20 kHz: `record -p PID -d 30`
    exits 0 and says the target exited (or, if it was gone before remora attached, exits 2
    with one line); `record -- CMD` exits with the command's code. Every profile written
    is valid and holds only stacks the target can have."""
    src = Source(script("chaos_exit.py"))
    rng = rng_for("exit", interp)
    notes, sampled = [], 0
    hows = list(EXIT_CODES)
    for launch in (False, True):
        for k, how in enumerate(hows):
            # one run each way ends late enough to be sampled for sure
            delay = round(0.25 + 0.1 * rng.random() if k == 0 else EXIT_DELAY_MAX * rng.random(), 3)
            what = "%s %s after %.3f s" % ("record --" if launch else "record -p", how, delay)
            names = ["exit.collapsed", "exit.json"]
            with Target(interp, script("chaos_exit.py"), "ready.json", args=[delay, how],
                        spawn=not launch) as t:
                outs = outputs_args(t.dir, names)
                if launch:
                    rc, out, err = remora.run(["record", "-r", EXIT_RATE] + outs + ["--"] + t.argv)
                    want = EXIT_CODES[how]
                else:
                    ready = t.wait_ready()
                    rc, out, err = remora.run(["record", "-p", t.pid, "-r", EXIT_RATE, "-d", 30] + outs)
                    # sampled: the profile written, exit 0; gone before remora attached: 2
                    want = 0 if SUMMARY.search(err) else 2
                    code = t.proc.wait(timeout=READY_TIMEOUT)
                    if code != (-signal.SIGKILL if how == "kill" else EXIT_CODES[how]):
                        raise Fail(seeded("%s: the target itself exited %d: %s"
                                          % (what, code, t.log_tail())))
                if rc != want:
                    raise Fail(seeded("%s: remora exited %d, want %d: %s" % (what, rc, want, tail(err))))
                if not SUMMARY.search(err):
                    # only possible when the target was gone before remora attached
                    bad = one_line(err)
                    if launch or bad:
                        raise Fail(seeded("%s: no summary, and %s" % (what, bad or err.strip())))
                    notes.append("%s: gone before attach" % how)
                    continue
                summ = summary(err)
                if not summ.exited:
                    raise Fail(seeded("%s: the summary does not say the target exited: %s"
                                      % (what, tail(err, 1))))
                stacks = check_outputs(remora, t.dir, names, summ, True)
                if launch:
                    ready_path = t.host_path(t.out)
                    if not os.path.exists(ready_path):
                        raise Fail(seeded("%s: the target never wrote its ready file" % what))
                    with open(ready_path) as f:
                        ready = json.load(f)
                try:
                    judge_profile(stacks, exit_roles(ready, launch), src)
                except Fail as e:
                    raise Fail(seeded("%s: %s" % (what, e)))
                sampled += summ.samples > 0
                notes.append("%s%s: %d rounds, %d stacks" % ("-- " if launch else "", how,
                                                             summ.samples, total(stacks)))
    if sampled < len(hows):
        raise Fail(seeded("only %d of %d recordings took samples: %s" % (sampled, 2 * len(hows),
                                                                         "; ".join(notes))))
    return seeded("; ".join(notes))


# --- 4. SIGSTOP / SIGCONT -----------------------------------------------------------------

def test_sigstop(remora, interp):
    """The recursion target is stopped and resumed STOP_FLIPS times at random moments
    while remora records, then held stopped until remora's status line shows it kept
    sampling: remora neither hangs nor stops; after SIGINT it exits 0 with a valid
    profile of true stacks, and the target carries on."""
    src = Source(script("chaos_recurse.py"))
    rng = rng_for("sigstop", interp)
    d = workdir()
    names = ["stop.collapsed", "stop.json", "stop.remora"]
    try:
        with Target(interp, script("chaos_recurse.py"), "ready.json") as t:
            ready = t.wait_ready()
            rec = Recording(remora, ["-p", t.pid, "-r", FAST_RATE] + outputs_args(d, names))
            try:
                rec.wait_sampled()
                try:
                    for _ in range(STOP_FLIPS):
                        os.kill(t.pid, signal.SIGSTOP)
                        wait_state(t.pid, True)
                        time.sleep(rng.random() * 0.01)      # a random moment, not a sync
                        os.kill(t.pid, signal.SIGCONT)
                        wait_state(t.pid, False)
                        time.sleep(rng.random() * 0.01)
                    os.kill(t.pid, signal.SIGSTOP)
                    wait_state(t.pid, True)
                    seen = rec.wait_sampled(0)
                    during = rec.wait_sampled(seen + 200) - seen
                finally:
                    os.kill(t.pid, signal.SIGCONT)
                wait_state(t.pid, False)
                os.kill(rec.proc.pid, signal.SIGINT)
                rc, out, err = rec.finish()
            finally:
                rec.close()
            if rc != 0:
                raise Fail("remora exited %d after SIGINT, want 0: %s" % (rc, tail(err)))
            if t.proc.poll() is not None:
                raise Fail("the target died (%d) while stopped and resumed" % t.proc.returncode)
            summ = summary(err)
            stacks = check_outputs(remora, d, names, summ, True)
            if t.finish() != 0:
                raise Fail("the target exited %d after EOF: %s" % (t.proc.returncode, t.log_tail()))
        by_role = judge_profile(stacks, recurse_roles(ready), src)
        return seeded("%d stop/continue pairs, %d+ rounds while held stopped; %s; main %d, "
                      "diver %d samples" % (STOP_FLIPS, during, summ, by_role["main"],
                                            by_role["diver"]))
    finally:
        shutil.rmtree(d, ignore_errors=True)


# --- 5. fork --------------------------------------------------------------------------------

def fork_roles(ready, launch):
    child = ["child_main", "child_work"]
    # launched, the parent is also seen starting (imports), writing its files, finishing
    return {ready["main"]: [Role("main", ["<module>"], forbidden=child, empty=launch,
                                 alone=["any"] if launch else [], imports=launch,
                                 trail=["any"] if launch else [])],
            ready["spinner"]: [Role("spinner", ["spinner"], forbidden=child, empty=launch)]}


def test_fork(remora, interp):
    """A parent that forks children running Python code of their own, with a second
    thread running: `record -p PARENT` and `record -- PARENT 20` show only the parent's
    two threads and functions, never a child's pid or frames."""
    src = Source(script("chaos_fork.py"))
    names = ["fork.collapsed", "fork.json"]
    notes = []
    for launch in (False, True):
        with Target(interp, script("chaos_fork.py"), "ready.json", args=[20] if launch else [],
                    spawn=not launch) as t:
            outs = outputs_args(t.dir, names)
            if launch:
                _, err = record(remora, ["-r", FAST_RATE] + outs + ["--"] + t.argv)
                with open(t.host_path(t.out)) as f:
                    ready = json.load(f)
            else:
                ready = t.wait_ready()
                _, err = record(remora, ["-p", t.pid, "-r", FAST_RATE, "-d", RECORD_SECONDS]
                                + outs)
            summ = summary(err)
            stacks = check_outputs(remora, t.dir, names, summ, True)
            if not launch and t.finish() != 0:
                raise Fail("the target exited %d: %s" % (t.proc.returncode, t.log_tail()))
            with open(os.path.join(t.dir, "children.json")) as f:
                children = set(json.load(f)["children"])
        try:
            by_role = judge_profile(stacks, fork_roles(ready, launch), src,
                                    lambda tid: "a forked child's pid" if tid in children else None)
        except Fail as e:
            raise Fail("%s: %s" % ("record --" if launch else "record -p", e))
        if by_role["main"] == 0:
            raise Fail("no sample of the parent's main thread [%s]" % summ)
        notes.append("%s: %d children, %s, main %d spinner %d" % (
            "--" if launch else "-p", len(children), summ, by_role["main"], by_role["spinner"]))
    return "; ".join(notes)


# --- 6. SIGKILL at a random moment ----------------------------------------------------------

def test_killed(remora, interp):
    """The target (the recursion target and the thread-churn target, in turn) is SIGKILLed
    KILL_ATTEMPTS times at a random moment of `record -p PID -d 30`, sometimes before
    remora has attached: with a summary (the target exited) exit 0, every
    format written and valid, its stacks true; without one, exit 2 and a single line on
    stderr."""
    rng = rng_for("killed", interp)
    names = ["k.collapsed", "k.json", "k.remora", "k.html", "k.pstats"]
    targets = (("chaos_recurse.py", recurse_roles), ("chaos_churn.py", None))
    notes = []
    for attempt in range(KILL_ATTEMPTS):
        name, roles_of = targets[attempt % 2]
        src = Source(script(name))
        delay = round(KILL_DELAY_MAX * rng.random(), 3)
        d = workdir()
        try:
            with Target(interp, script(name), "ready.json") as t:
                ready = t.wait_ready()
                rec = Recording(remora, ["-p", t.pid, "-d", 30] + outputs_args(d, names))
                try:
                    time.sleep(delay)                    # a random moment, not a sync
                    t.proc.kill()
                    t.proc.wait()
                    rc, out, err = rec.finish()
                finally:
                    rec.close()
            what = "%s killed %.3f s into the recording" % (name, delay)
            # sampled: the profile is written, exit 0; killed before remora attached: exit 2
            if rc != (0 if SUMMARY.search(err) else 2):
                raise Fail(seeded("%s: remora exited %d, want %d: %s" % (
                    what, rc, 0 if SUMMARY.search(err) else 2, tail(err))))
            if not SUMMARY.search(err):
                bad = one_line(err.strip("\n"))
                if bad:
                    raise Fail(seeded("%s: no summary and %s" % (what, bad)))
                notes.append("%.3f s: before attach" % delay)
                continue
            summ = summary(err)
            if not summ.exited:
                raise Fail(seeded("%s: the summary does not say the target exited" % what))
            stacks = check_outputs(remora, d, names, summ, True)
            default = None
            if roles_of is not None:
                roles = roles_of(ready)
            else:
                # the churn target died before writing its workers' ids: any thread but
                # main must look like one of its workers
                roles = churn_roles({"main": ready["main"], "thread_workers": [], "raw_workers": []})
                default = [Role("threading worker", ["thread_worker"], lead=["threading.py"], empty=True),
                           Role("_thread worker", ["raw_worker"], empty=True)]
            try:
                judge_profile(stacks, roles, src, default=default)
            except Fail as e:
                raise Fail(seeded("%s: %s" % (what, e)))
            notes.append("%.3f s: %d rounds" % (delay, summ.samples))
        finally:
            shutil.rmtree(d, ignore_errors=True)
    return seeded("; ".join(notes))


# --- the list run.py runs -------------------------------------------------------------------

def tests(remora):
    """[(name, function, skip reason or None)] for run.py."""
    out = []
    by_name = {i[0]: i for i in INTERPRETERS}
    assert all(n in by_name for n in CHAOS_INTERPRETERS)
    for kind, fn in (("churn", test_churn), ("recursion", test_recursion), ("exit", test_exit),
                     ("sigstop", test_sigstop), ("fork", test_fork), ("killed", test_killed)):
        for name in CHAOS_INTERPRETERS:
            interp = by_name[name]
            out.append(("chaos/%s/%s" % (kind, name), lambda i=interp, f=fn: f(remora, i),
                        interp_missing(interp)))
    return out
