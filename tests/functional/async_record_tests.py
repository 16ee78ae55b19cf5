# Functional tests for `remora record --async`, `--async-mode all` and `top --async`
# (issue 18). The target, tests/targets/async_shares.py, runs three worker tasks that take
# 60/30/10% of the CPU under a gather in a task under the root task, and three tasks that
# only wait; it reports its own truth: each task's awaiter chain (the links it made), each
# waiting task's coroutine chain (walked through cr_await on its own objects), and on
# "mark" the wall, CPU and stalled time each worker measured on its own clock.
# async-record/kernel/short-tasks (issue 48): tests/targets/async_short.py, a task of 20 ms
# at a time, each named by the tick's drain on the kernel engine; the target counts its own
# tasks and spin time per kind. async-record/kernel/one-step: the same with tasks of 0.5 ms,
# which run and end before the tick is drained: named by the running task the tick read.
# See tests/functional/README.md for what each test checks.

import json
import os
import shutil

from harness import (INTERPRETERS, Fail, Skip, Target, interp_missing, mark, summary, tail,
                     tracer_of)
from formats import by_thread, parse_collapsed, speedscope_counts, speedscope_stacks

ORDER = 270           # where run.py runs these tests among the modules' (ascending)
# shares, a measurement of timing, only with REMORA_FIDELITY=1 (make test, not make asan) or
# an --only beginning with it (run.py): under the sanitizers a round takes several times as
# long and some are skipped (1,664-1,949 of 2,000), so a 2-point bound judges the build's
# speed, not the reading (CI stop 53: 62.3% for w60 on pyenv 3.9 under ASan); the task
# chains of every sample are still judged there by async-record/all, top and subclass
# (which judges its shares only with REMORA_FIDELITY=1 too).
TIMED = ("async-record/shares/", "async-record/kernel/short-tasks/", "async-record/kernel/one-step/")

TARGETS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "targets")
SCRIPT = os.path.join(TARGETS, "async_shares.py")
WORKERS = ("w60", "w30", "w10")
TASK = "task "
UNKNOWN = "<task>"              # a running task not in the last task list read (async.h)
MOVING = "<moving>"

SHARE_SECONDS = 2              # ~2000 rounds at 1 kHz
SHARE_MARGIN = 2.0             # points of share, each worker (the bound)
STALL_LIMIT = 10.0             # % of the window the workers may lose off-CPU for it to judge
WAIT_SECONDS = 1
WAIT_MIN = 90.0                # % of rounds each waiting task must be in (it is in every
                               # round; a task list that moved while read drops that round's)
UNKNOWN_MAX = 1.0              # % of task samples that may be the <task> marker (a task made
                               # since the list was read; none are made after ready)
TOP_SECONDS = 1.2
BLOCKING_INTERPRETERS = ("pyenv-3.12.1", "sid-3.15")   # --async with --blocking
SUBCLASS_INTERPRETERS = ("pyenv-3.9.18", "pyenv-3.12.1", "pyenv-3.13.0", "sid-3.15")  # tasks of a
                                                   # subclass of asyncio.Task
REFUSED = "cannot read the asyncio tasks"
# --async on the kernel engine (issue 48): the running task named from the tick's frames
KERNEL_INTERPRETERS = ("pyenv-3.9.18", "debian-3.11-static", "pyenv-3.12.1", "sid-3.13", "sid-3.15")
NOTICE = "the kernel engine cannot be used"
PARTIAL_MAX = 0.1              # % of samples partial, at most (the bound)
UNTASKED_MAX = 0.1             # % of a worker's spinning samples written without its task
# --async on the kernel engine with tasks that live well under the time between two readings
# of the task list (tests/targets/async_short.py): each named when its tick is drained
SHORT_SCRIPT = os.path.join(TARGETS, "async_short.py")
SHORT_INTERPRETERS = ("debian-3.11-static", "pyenv-3.12.1", "sid-3.13", "sid-3.15")
SHORT_LIFE_MS = 20             # each task's life (its spin): 10-100 times one round at 1 kHz
SHORT_SECONDS = 3
SHORT_UNKNOWN_MAX = 2.0        # % of the spinning samples written <task>, at most (a tick
                               # drained after its task ended, up to a round later: a timing
                               # measurement, TIMED: under the sanitizers' slower drains,
                               # 0.9-2.3%)
ONE_STEP_INTERPRETERS = ("pyenv-3.9.18", "debian-3.11-static", "sid-3.13", "sid-3.15")
ONE_STEP_LIFE_MS = 0.5         # tasks that run and end between two drains of the ticks: named
                               # only by the running task the tick itself read
SHORT_WRONG_MAX = 0.1          # % of them under a task of the other kind, at most: a list
                               # reading torn by a task ending while it is read (its
                               # coroutine's address another's by the chain's read; seen
                               # once in 3,000 samples under the sanitizers)
NO_CAPS = ["setpriv", "--inh-caps=-bpf,-perfmon,-sys_admin",
           "--bounding-set=-bpf,-perfmon,-sys_admin", "--"]


def run_record(remora, args):
    """record ARGS; a target the task reader does not know yet is SKIP, with its line."""
    rc, out, err = remora.run(["record"] + list(args))
    if rc == 4 and REFUSED in err:
        raise Skip("the task reader does not support this interpreter yet: %s" % tail(err, 1))
    if rc != 0:
        raise Fail("`remora record %s` exited %d: %s" % (" ".join(map(str, args)), rc, tail(err)))
    return err


def split_tasks(functions):
    """[(task name, [coroutine functions after its frame])] of a stack (outermost first),
    and the functions before the first task frame."""
    head, out = [], []
    for fn in functions:
        if fn.startswith(TASK) or fn == UNKNOWN:
            out.append((fn[len(TASK):] if fn != UNKNOWN else None, []))
        elif out:
            out[-1][1].append(fn)
        else:
            head.append(fn)
    return out, head


def judge_stack(fns, truth, waiting_ok):
    """None when a stack's task frames are what the target says, else why not. A running
    worker: root -> parent -> worker, each awaiter's suspended coroutine frames between,
    then the worker's own frames (a prefix of its path; <moving> may end it). waiting_ok:
    a waiting task's stack (--async-mode all): its own coroutine chain exactly."""
    tasks, head = split_tasks(fns)
    if not tasks:
        return None                 # the loop between tasks: written as usual
    if head:
        return "frames %s above the root task" % head
    names = [n for n, _ in tasks]
    leaf = names[-1]
    if leaf is None:
        return None if len(names) == 1 else "<task> below a task"
    chain = truth["awaiters"].get(leaf)
    if chain is None:
        return "a task the target does not have: %r" % leaf
    if names != chain:
        return "task chain %s, the target's %s" % (" > ".join(names), " > ".join(chain))
    for name, coro in tasks[:-1]:
        if coro != truth["coros"][name]:
            return "awaiter %s's frames %s, the target's %s" % (name, coro, truth["coros"][name])
    own = tasks[-1][1]
    if own and own[-1] == MOVING:
        own = own[:-1]
    if leaf in truth["own"]:
        paths = truth["own"][leaf]
        if waiting_ok and own and own[0] == paths[0][0] and not any(
                own == p[:len(own)] for p in paths):
            return None             # a worker waiting its turn (in asyncio.sleep(0))
        # no own frame: the task is current while the loop's C code steps it (Task.__step)
        if not any(own == p[:len(own)] for p in paths):
            return "%s's own frames %s, not a prefix of %s" % (leaf, own, " or ".join(
                ";".join(p) for p in paths))
    elif waiting_ok and leaf in truth["waiting"]:
        if own != truth["coros"][leaf]:
            return "waiting %s's frames %s, the target's %s" % (leaf, own, truth["coros"][leaf])
    elif not waiting_ok or leaf not in truth["awaiters"]:
        return "task %s should not run" % leaf
    return None


def judge_stacks(stacks, truth, waiting_ok):
    """(problems, {leaf task: samples of the main thread}, unknown samples, task samples)."""
    problems, leaves, unknown, tasks = [], {}, 0, 0
    for s in stacks:
        fns = s.functions()
        why = judge_stack(fns, truth, waiting_ok)
        if why is not None and len(problems) < 3:
            problems.append("%s x%d: %s" % (why, s.count, ";".join(fns)[-300:]))
        if s.tid != truth["main"]:
            continue
        names = [n for n, _ in split_tasks(fns)[0]]
        if names:
            tasks += s.count
            if names[-1] is None:
                unknown += s.count
            else:
                leaves[names[-1]] = leaves.get(names[-1], 0) + s.count
    return problems, leaves, unknown, tasks


def window(before, after):
    """The target's own shares of the workers' wall time, and the % it stalled."""
    wall = [after["wall"][w] - before["wall"][w] for w in WORKERS]
    stalled = sum(after["stall"][w] - before["stall"][w] for w in WORKERS)
    span = after["at"] - before["at"]
    n = sum(wall)
    return [100.0 * x / n if n else 0.0 for x in wall], 100.0 * stalled / span if span else 0.0


def kernel_problems(err, stacks):
    """--async on the kernel engine: the summary's engine kernel and no notice line (a
    machine that cannot load it: SKIP, naming the line), at most PARTIAL_MAX% of samples
    partial, and every sample in a worker's spin under a task frame (the tick's own frames
    name the task running). ([problems], note)."""
    summ = summary(err, 1000)
    notice = [l for l in err.splitlines() if NOTICE in l]
    if summ.engine != "kernel":
        if notice and "--async" not in notice[0]:
            raise Skip("the kernel engine is not used here: %s" % notice[0])
        return (["the summary says engine %s, want kernel%s"
                 % (summ.engine, ": " + notice[0] if notice else "")], "")
    problems = ["a notice line: %s" % notice[0]] if notice else []
    if summ.partial_pct > PARTIAL_MAX:
        problems.append("%d samples partial (%.2f%%, max %.1f%%)"
                        % (summ.partial, summ.partial_pct, PARTIAL_MAX))
    spinning = untasked = 0
    for st in stacks:
        fns = st.functions()
        if "spin_until" in fns:
            spinning += st.count
            if not split_tasks(fns)[0]:
                untasked += st.count
    if spinning and 100.0 * untasked / spinning > UNTASKED_MAX:
        problems.append("%d of %d samples in a worker's spin without its task (max %.1f%%)"
                        % (untasked, spinning, UNTASKED_MAX))
    return problems, "engine kernel, %d partial (%.2f%%), %d of %d spinning samples untasked" % (
        summ.partial, summ.partial_pct, untasked, spinning)


def test_shares(remora, interp, args=(), kernel=False):
    """record --async: each worker's share of the samples under its task frame within
    SHARE_MARGIN points of the target's own; every stack the chain the target made; the
    speedscope file the same stacks; the .remora converted back the same collapsed file.
    A window where the target stalled over STALL_LIMIT% is recorded once more. args: the
    target's (--subclass: every task of a subclass of asyncio.Task). kernel: the engine
    auto, --stats, and kernel_problems() judged too."""
    # shares are a measurement of timing: judged by shares/ always (TIMED), by subclass/
    # and kernel/ only where timing is (make test), never under the sanitizers' slower rounds
    judge_shares = (not args and not kernel) or os.environ.get("REMORA_FIDELITY") == "1"
    if kernel and os.environ.get("REMORA_TEST_ENGINE") == "user":
        raise Skip("REMORA_TEST_ENGINE=user: this run has no kernel engine to judge")
    extra = ["--engine", "auto", "--stats"] if kernel else []
    with Target(interp, SCRIPT, "ready.json", list(args)) as t:
        truth = t.wait_ready()
        n, notes = 1, []
        before = mark(t, n)
        for attempt in (1, 2):
            base = os.path.join(t.dir, "rec%d" % attempt)
            err = run_record(remora, ["-p", t.pid, "-d", SHARE_SECONDS, "--async",
                                      "-o", base + ".collapsed", "-o", base + ".json",
                                      "-o", base + ".remora"] + extra)
            n += 1
            after = mark(t, n)
            summ = summary(err, 1000)
            stacks = parse_collapsed(base + ".collapsed")
            problems, leaves, unknown, tasks = judge_stacks(stacks, truth, False)
            truth_sh, stalled = window(before, after)
            before = after
            counts = [leaves.get(w, 0) for w in WORKERS]
            got = [100.0 * c / sum(counts) if sum(counts) else 0.0 for c in counts]
            note = "%s (truth %s) of %d task samples, %d rounds, %d <task>, stalled %.0f%%" % (
                "/".join("%.1f" % g for g in got), "/".join("%.1f" % w for w in truth_sh),
                sum(counts), summ.samples, unknown, stalled)
            if sum(counts) == 0:
                problems.append("no sample under a worker's task frame")
            for w, g, x in zip(WORKERS, got, truth_sh):
                if abs(g - x) > SHARE_MARGIN and judge_shares:
                    problems.append("%s got %.1f%% of the task samples, the target measured "
                                    "%.1f%% (margin %.0f points)" % (w, g, x, SHARE_MARGIN))
            if tasks and 100.0 * unknown / tasks > UNKNOWN_MAX:
                problems.append("%d of %d task samples are <task> (max %.0f%%)"
                                % (unknown, tasks, UNKNOWN_MAX))
            if kernel:
                # the engine and the reading: no stall of the target explains these
                more, knote = kernel_problems(err, stacks)
                if more:
                    raise Fail("; ".join(more) + " [" + note + "]")
                note += "; " + knote
            if not problems or stalled <= STALL_LIMIT or attempt == 2:
                break
            notes.append("try 1 stalled: %s [%s]" % ("; ".join(problems), note))
        if problems and stalled > STALL_LIMIT:
            raise Skip("the target stalled %.0f%% of both windows: %s [%s]"
                       % (stalled, "; ".join(problems), note))
        if problems:
            raise Fail("; ".join(problems) + " [" + note + "]")
        # the same recording as speedscope, and the .remora converted back
        with open(base + ".json", encoding="utf-8") as f:
            seconds, _ = speedscope_stacks(json.load(f))
        want = by_thread(stacks)
        got_ss, _ = speedscope_counts(seconds, want)
        if got_ss != want:
            raise Fail("speedscope and collapsed files of one --async recording differ")
        conv = base + "-converted.collapsed"
        rc, _, err = remora.run(["convert", base + ".remora", "-o", conv])
        if rc != 0:
            raise Fail("convert of the .remora exited %d: %s" % (rc, tail(err)))
        with open(base + ".collapsed", "rb") as a, open(conv, "rb") as b:
            if a.read() != b.read():
                raise Fail("convert's collapsed file differs from the recording's own")
    if not judge_shares:
        note += " (shares not judged: REMORA_FIDELITY unset)"
    return "; ".join(notes + [note, "speedscope and convert agree"])


def test_all(remora, interp, extra=()):
    """--async-mode all --idle: each waiting task in >= WAIT_MIN% of rounds, under the
    awaiter chain the target made, with the coroutine chain it walked itself. With
    --blocking (extra): the same, and the target left untraced."""
    with Target(interp, SCRIPT, "ready.json") as t:
        truth = t.wait_ready()
        path = os.path.join(t.dir, "all.collapsed")
        err = run_record(remora, ["-p", t.pid, "-d", WAIT_SECONDS, "--async-mode", "all",
                                  "--idle", "--stats", "-o", path] + list(extra))
        if extra and tracer_of(t.pid) != 0:
            raise Fail("the target is still traced (TracerPid %d) after --blocking"
                       % tracer_of(t.pid))
        summ = summary(err, 1000)
        stacks = parse_collapsed(path)
        problems, leaves, _, _ = judge_stacks(stacks, truth, True)
        seen = {}
        for w in truth["waiting"]:
            pct = 100.0 * leaves.get(w, 0) / summ.samples if summ.samples else 0.0
            seen[w] = pct
            if pct < WAIT_MIN:
                problems.append("waiting task %s in %.1f%% of rounds (%d of %d), want >= %.0f%%"
                                % (w, pct, leaves.get(w, 0), summ.samples, WAIT_MIN))
        if problems:
            raise Fail("; ".join(problems))
    return "%d rounds; %s" % (summ.samples, ", ".join("%s %.1f%%" % kv for kv in sorted(seen.items())))


def test_short(remora, interp, life_ms=SHORT_LIFE_MS, rootless=None):
    """--async on the kernel engine, tasks made one after the other that each spin
    life_ms and end: at most SHORT_UNKNOWN_MAX% of the samples in a spin written
    <task>; every other one under root > the task (rootless: or the task alone, its
    awaiter not seen), whose kind (a-N, b-N) is the spin's (job_a;spin_a or job_b;spin_b:
    never a task of the other kind); both kinds seen in the proportion of their spins'
    wall time as the target measured it (within 5 points); engine kernel, at most
    PARTIAL_MAX% partial. rootless None: the task alone counts with <task> against
    SHORT_UNKNOWN_MAX (before 3.14 an awaiter is found at a drain: one late past the
    task's end finds none); True: not counted (tasks that end before any drain)."""
    if os.environ.get("REMORA_TEST_ENGINE") == "user":
        raise Skip("REMORA_TEST_ENGINE=user: this run has no kernel engine to judge")
    with Target(interp, SHORT_SCRIPT, "ready.json", [str(life_ms)]) as t:
        truth = t.wait_ready()
        before = mark(t, 1)
        path = os.path.join(t.dir, "short.collapsed")
        err = run_record(remora, ["-p", t.pid, "-d", SHORT_SECONDS, "--async", "--engine", "auto",
                                  "--stats", "-o", path])
        after = mark(t, 2)
        stacks = parse_collapsed(path)
    problems, note = kernel_problems(err, stacks)
    spinning, unknown, wrong, nwrong, kinds = 0, 0, [], 0, {"a": 0, "b": 0}
    alone = 0
    before_314 = not interp[0].endswith(("3.14", "3.15"))
    for st in stacks:
        fns = st.functions()
        if st.tid != truth["main"] or "spin_until" not in fns:
            continue
        spinning += st.count
        tasks, head = split_tasks(fns)
        names = [n for n, _ in tasks]
        if names == [None]:
            unknown += st.count
            continue
        kind = names[-1].split("-")[0] if names and names[-1] else None
        own = tasks[-1][1] if tasks else []
        outer_ok = names[:-1] == ["root"] or (before_314 and rootless is not False and names[:-1] == [])
        if head or not outer_ok or kind not in kinds or own != truth["own"][kind]:
            nwrong += st.count
            if len(wrong) < 3:
                wrong.append("x%d: %s" % (st.count, ";".join(fns)[-200:]))
            continue
        kinds[kind] += st.count
        if names[:-1] == []:
            alone += st.count
    made = {k: after["made"][k] - before["made"][k] for k in "ab"}
    spun = {k: after["wall"][k] - before["wall"][k] for k in "ab"}
    pct = 100.0 * (unknown + (alone if rootless is None else 0)) / spinning if spinning else 0.0
    named = kinds["a"] + kinds["b"]
    got_a = 100.0 * kinds["a"] / named if named else 0.0
    truth_a = 100.0 * spun["a"] / (spun["a"] + spun["b"]) if spun["a"] + spun["b"] else 0.0
    note = ("%d of %d spinning samples <task> (%.2f%% counted; %d of a task alone), %d under another kind, a/b %.1f%% (truth %.1f%%) of %d named, "
            "%d+%d tasks of %g ms made; %s" % (unknown, spinning, pct, alone, nwrong, got_a, truth_a, named,
                                              made["a"], made["b"], life_ms, note))
    if spinning < 100 * SHORT_SECONDS:
        problems.append("only %d samples in a task's spin" % spinning)
    if pct > SHORT_UNKNOWN_MAX:
        problems.append("%.2f%% of the spinning samples are <task>%s (max %.1f%%)"
                        % (pct, " or a task alone" if rootless is None else "", SHORT_UNKNOWN_MAX))
    if spinning and 100.0 * nwrong / spinning > SHORT_WRONG_MAX:
        problems.append("%d samples not under root > their own task's kind (max %.1f%%): %s"
                        % (nwrong, SHORT_WRONG_MAX, "; ".join(wrong)))
    if named and abs(got_a - truth_a) > 5.0:
        problems.append("kind a has %.1f%% of the named samples, the target spun %.1f%% in it"
                        % (got_a, truth_a))
    if problems:
        raise Fail("; ".join(problems) + " [" + note + "]")
    return note


def test_fallback(remora, interp):
    """--async without CAP_BPF and CAP_PERFMON: the user engine, with exactly one notice
    line, and the workers' task frames; with --engine user: the user engine, no notice."""
    if shutil.which("setpriv") is None:
        raise Skip("setpriv(1) not installed (util-linux)")
    notes = []
    with Target(interp, SCRIPT, "ready.json") as t:
        t.wait_ready()
        for prefix, engine, want in ((NO_CAPS, "auto", 1), ((), "user", 0)):
            path = os.path.join(t.dir, "fb-%s.collapsed" % engine)
            rc, _, err = remora.run(["record", "-p", t.pid, "-d", "0.5", "--async", "--engine",
                                     engine, "-o", path], prefix=prefix)
            if rc == 4 and REFUSED in err:
                raise Skip("the task reader does not support this interpreter yet: %s" % tail(err, 1))
            what = "without CAP_BPF" if prefix else "--engine user"
            if rc != 0:
                raise Fail("%s: exit %d, want 0: %s" % (what, rc, tail(err)))
            notices = [l for l in err.splitlines() if NOTICE in l]
            if len(notices) != want:
                raise Fail("%s: %d notice lines, want %d: %s" % (what, len(notices), want, tail(err, 5)))
            if summary(err).engine != "user":
                raise Fail("%s: the summary says engine %s, want user" % (what, summary(err).engine))
            text = open(path, encoding="utf-8").read()
            missing = [w for w in WORKERS if (TASK + w) not in text]
            if missing:
                raise Fail("%s: no sample under %s" % (what, ", ".join(TASK + w for w in missing)))
            notes.append("%s: engine user%s" % (what, ", " + notices[0].strip() if notices else ""))
    return "; ".join(notes)


def test_top(remora, interp):
    """top --async: the whole run's table has a row for each worker's task frame."""
    with Target(interp, SCRIPT, "ready.json") as t:
        t.wait_ready()
        rc, out, err = remora.run(["top", "-p", t.pid, "-d", TOP_SECONDS, "-l", 100, "--async"])
        if rc == 4 and REFUSED in err:
            raise Skip("the task reader does not support this interpreter yet: %s" % tail(err, 1))
        if rc != 0:
            raise Fail("`remora top --async` exited %d: %s" % (rc, tail(err)))
        last = out.split("remora top ")[-1]
        missing = [w for w in WORKERS if (TASK + w) not in last]
        if missing:
            raise Fail("the last table has no row for %s: %s"
                       % (", ".join(TASK + w for w in missing), tail(last, 8)))
    return "rows for %s" % ", ".join(TASK + w for w in WORKERS)


def tests(remora):
    out = []
    for interp in INTERPRETERS:
        missing = interp_missing(interp)
        for kind, fn in (("shares", test_shares), ("all", test_all), ("top", test_top)):
            out.append(("async-record/%s/%s" % (kind, interp[0]),
                        lambda i=interp, f=fn: f(remora, i), missing))
        if interp[0] in KERNEL_INTERPRETERS:
            out.append(("async-record/kernel/" + interp[0],
                        lambda i=interp: test_shares(remora, i, kernel=True), missing))
        if interp[0] in SHORT_INTERPRETERS:
            out.append(("async-record/kernel/short-tasks/" + interp[0],
                        lambda i=interp: test_short(remora, i), missing))
        if interp[0] in ONE_STEP_INTERPRETERS:
            # before 3.14 an awaiter is found at the drain, when it may wait on another
            out.append(("async-record/kernel/one-step/" + interp[0],
                        lambda i=interp: test_short(remora, i, ONE_STEP_LIFE_MS, rootless=True),
                        missing))
        if interp[0] == "pyenv-3.12.1":
            out.append(("async-record/fallback/" + interp[0],
                        lambda i=interp: test_fallback(remora, i), missing))
        if interp[0] in SUBCLASS_INTERPRETERS:
            out.append(("async-record/subclass/" + interp[0],
                        lambda i=interp: test_shares(remora, i, ["--subclass"]), missing))
        if interp[0] in BLOCKING_INTERPRETERS:
            out.append(("async-record/all-blocking/" + interp[0],
                        lambda i=interp: test_all(remora, i, ["--blocking"]), missing))
    return out
