# Functional tests of what the outputs say (issue 17): the pstats file read by real
# Pythons' pstats, the terminal table, speedscope's time units and the differential
# flamegraph's colours. The target, tests/targets/format_shares.py, spends 60/30/10% of a
# 10 ms cycle in share_60/30/10 by its own clock (one of them twice as long on request),
# reports its own lines and, between "mark"s, the time each function took.
# See tests/functional/README.md for what each test checks.

import collections
import json
import os
import pty
import random
import shutil
import subprocess
import tempfile

from harness import (HOST_PYTHON, INTERPRETERS, TARGETS, Fail, Skip, Target, interp_missing,
                     interpreter, mark, one_line, record, summary, tail)
from formats import (FRAME, by_thread, flamegraph_data, parse_collapsed, read_pstats,
                     speedscope_counts, speedscope_stacks, untext, utf8)

ORDER = 120           # where run.py runs these tests among the modules' (ascending)

TARGET = os.path.join(TARGETS, "format_shares.py")
FUNCS = ("share_60", "share_30", "share_10")
SECONDS = 1.5                  # each recording (~1,500 samples at 1 kHz)
SHARE_MARGIN = 5.0             # points of share, each function, against the target's clock
STALL_LIMIT = 10.0             # % of a window the target may lose off-CPU for it to judge
TRIES = 3                      # windows before a busy machine skips a test
# Pythons whose pstats must read the file: the host's, and the oldest and newest pyenv ones
LOADERS = (("host python3", HOST_PYTHON), ("pyenv 3.9", interpreter("pyenv-3.9.18")[1]),
           ("pyenv 3.13", interpreter("pyenv-3.13.0")[1]))
PSTATS_INTERPRETERS = ("pyenv-3.9.18", "pyenv-3.12.1", "sid-3.15")
TABLE_INTERPRETERS = ("pyenv-3.9.18", "pyenv-3.12.1", "sid-3.15")
TIME_INTERPRETERS = ("pyenv-3.12.1", "sid-3.15")
DIFF_INTERPRETERS = ("pyenv-3.12.1", "sid-3.15")
DIFF_SECONDS = 2.0             # each run of the differential test (~2,000 samples)
DIFF_TRUE_CHANGE = 2.0         # points: a change of share between two runs of one program
                               # that the target's own clocks call real (a busy machine;
                               # seen up to 1.4 points between quiet runs)
SECONDS_TOLERANCE = 0.005      # the summary prints the duration to 0.01 s


def in_target(stats_key, name):
    file, _, fn = stats_key
    return fn == name and file.endswith("/format_shares.py")


def truth_shares(before, after, key="wall"):
    """The target's shares of share_60/30/10 between two marks (by its wall or cpu time),
    and the % of the window it stalled."""
    wall = [after[key][fn] - before[key][fn] for fn in FUNCS]
    n = sum(wall)
    stall = sum(after["stall"][fn] - before["stall"][fn] for fn in FUNCS)
    window = after["at"] - before["at"]
    return ([100.0 * w / n if n else 0.0 for w in wall], 100.0 * stall / window if window else 0.0)


def windows(remora, t, outputs, extra=(), seconds=SECONDS):
    """Records the running target once per call of the returned generator's next(): yields
    (summary, {ext: path}, mark before, mark after, try number)."""
    n = 1
    before = mark(t, n)
    for attempt in range(1, TRIES + 1):
        paths = {ext: os.path.join(t.dir, "w%d%s" % (attempt, ext)) for ext in outputs}
        args = ["-p", t.pid, "-d", seconds] + list(extra)
        for p in paths.values():
            args += ["-o", p]
        _, err = record(remora, args)
        n += 1
        after = mark(t, n)
        yield summary(err, 1000), paths, before, after, attempt
        before = after


# --- formats/pstats -----------------------------------------------------------------------

LOAD = r'''
import io, json, marshal, pstats, sys
path = sys.argv[1]
with open(path, "rb") as f:
    raw = marshal.loads(f.read())
out = io.StringIO()
st = pstats.Stats(path, stream=out)
st.sort_stats("cumulative").print_stats()
printed = out.getvalue()
st.stream = io.StringIO()
st.print_callers()
entries = [[list(k), list(v[:4]), [[list(c), list(cv)] for c, cv in v[4].items()]]
           for k, v in st.stats.items()]
print(json.dumps({"version": sys.version.split()[0], "entries": entries, "same": raw == st.stats,
                  "printed": printed, "callers": st.stream.getvalue(), "total_tt": st.total_tt}))
'''


def load_everywhere(path):
    """{loader: what LOAD reports} for each Python of LOADERS that is here; Fail if one
    cannot load the file."""
    got = {}
    for name, python in LOADERS:
        if not os.access(python, os.X_OK):
            continue
        p = subprocess.run([python, "-I", "-c", LOAD, path], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=60)
        if p.returncode != 0:
            raise Fail("%s's pstats cannot read %s: %s" % (name, os.path.basename(path),
                                                           tail(p.stderr.decode("utf-8", "replace"))))
        got[name] = json.loads(p.stdout)
    if HOST_PYTHON not in dict(LOADERS).values() or "host python3" not in got:
        raise Fail("the host's python3 (%s) is missing: it must read the file" % HOST_PYTHON)
    return got


def judge_pstats(loaded, ready, before, after, summ):
    """Problems of one pstats file as each Python loaded it, and a note."""
    truth, stalled = truth_shares(before, after)
    problems, note = [], ""
    for name, L in loaded.items():
        entries = {tuple(k): (v, {tuple(c): cv for c, cv in callers}) for k, v, callers in L["entries"]}
        if not L["same"]:
            problems.append("%s: pstats.Stats() holds another dict than marshal.loads()" % name)
        cum = []
        for fn in FUNCS:
            keys = [k for k in entries if in_target(k, fn)]
            if len(keys) != 1:
                problems.append("%s: %d entries for %s, want 1" % (name, len(keys), fn))
                cum.append(0.0)
                continue
            (cc, nc, tt, ct), callers = entries[keys[0]]
            cum.append(ct)
            if "(%s)" % fn not in L["printed"]:
                problems.append("%s: print_stats() does not show %s" % (name, fn))
            if not any(in_target(c, ready["caller"]) for c in callers):
                problems.append("%s: %s's callers %s lack %s, which calls it"
                                % (name, fn, sorted(c[2] for c in callers), ready["caller"]))
            cl = [l for l in L["callers"].split("\n") if "(%s)" % fn in l and "<-" in l]
            if not cl or "(%s)" % ready["caller"] not in L["callers"]:
                problems.append("%s: print_callers() shows no line for %s called by %s"
                                % (name, fn, ready["caller"]))
        total = sum(cum)
        measured = [100.0 * c / total if total else 0.0 for c in cum]
        for fn, m, w in zip(FUNCS, measured, truth):
            if abs(m - w) > SHARE_MARGIN:
                problems.append("%s: %s has %.1f%% of the three cumulative times, the target's "
                                "clock %.1f%% (margin %.0f points)" % (name, fn, m, w, SHARE_MARGIN))
        # all the sampled time: the main thread in every round, less errors
        if not 0.9 * summ.seconds - SECONDS_TOLERANCE <= L["total_tt"] <= summ.seconds * 1.01 + SECONDS_TOLERANCE:
            problems.append("%s: the tottimes add up to %.3f s, the recording lasted %.2f s"
                            % (name, L["total_tt"], summ.seconds))
        note = "cumtime shares %s (truth %s), %.3f s of tottime in %.2f s, target stalled %.0f%%" % (
            "/".join("%.1f" % m for m in measured), "/".join("%.1f" % w for w in truth),
            L["total_tt"], summ.seconds, stalled)
    return problems, note, stalled


def test_pstats(remora, interp):
    """record -o x.pstats: Python's own pstats (host, 3.9, 3.13) reads it; the cumulative
    times of share_60/30/10 in the target's proportions; print_stats and print_callers
    show them; convert of the .remora gives the same file (-f pstats, .prof, stdout)."""
    with Target(interp, TARGET, "ready.json") as t:
        ready = t.wait_ready()
        for summ, paths, before, after, attempt in windows(remora, t, [".pstats", ".remora"]):
            loaded = load_everywhere(paths[".pstats"])
            problems, note, stalled = judge_pstats(loaded, ready, before, after, summ)
            if not problems:
                break
            if stalled <= STALL_LIMIT:
                raise Fail("; ".join(problems) + " [" + note + "]")
        else:
            raise Skip("machine too busy to judge: the target stalled over %.0f%% of each of %d "
                       "windows (last: %s; %s)" % (STALL_LIMIT, TRIES, "; ".join(problems), note))
        recorded = read_pstats("recorded pstats", paths[".pstats"])
        raw = paths[".remora"]
        for args, what in (([raw, "-f", "pstats", "-o", os.path.join(t.dir, "c.out")], "c.out"),
                           ([raw, "-o", os.path.join(t.dir, "c.prof")], "c.prof")):
            rc, _, err = remora.run(["convert"] + args)
            if rc != 0:
                raise Fail("`remora convert %s` exited %d: %s" % (" ".join(args), rc, tail(err)))
            if read_pstats(what, os.path.join(t.dir, what)) != recorded:
                raise Fail("convert's %s differs from the recorded .pstats" % what)
        rc, out, err = remora.run(["convert", raw, "-f", "pstats"], raw=True)
        with open(os.path.join(t.dir, "c.out"), "rb") as f:
            if rc != 0 or out != f.read():
                raise Fail("`convert -f pstats` to a pipe: exit %d, %d bytes, not the file's" % (rc, len(out)))
        refused = pty_refusal(remora, raw)
    return "%s; read by %s; converted the same (-f pstats, .prof, a pipe); %s" % (
        note, ", ".join("%s (%s)" % (n, l["version"]) for n, l in loaded.items()), refused)


def pty_refusal(remora, raw):
    """convert -f pstats with stdout a terminal: refused, exit 1, one line."""
    master, slave = pty.openpty()
    try:
        p = subprocess.run(remora.argv(["convert", raw, "-f", "pstats"]), stdin=subprocess.DEVNULL,
                           stdout=slave, stderr=subprocess.PIPE, timeout=30)
    finally:
        os.close(slave)
        os.close(master)
    err = p.stderr.decode("utf-8", "replace")
    if p.returncode != 1 or one_line(err) or "-o FILE.pstats" not in err:
        raise Fail("convert -f pstats to a terminal: exit %d, want 1 and one line naming -o "
                   "FILE.pstats: %s" % (p.returncode, tail(err)))
    return "refused to a terminal"


# --- formats/table --------------------------------------------------------------------------

def table_entries(what, data):
    """[(self, total, function, file, line)] of the table's rows (file '' and line None
    for a function without one)."""
    import re
    rows = []
    for line in utf8(what, data).split("\n")[1:]:
        m = re.match(r"^\s*(\d+)\s+[\d.]+%\s+(\d+)\s+[\d.]+%  (.*)$", line)
        if m is None:
            continue
        fm = FRAME.match(m.group(3))
        if fm:
            rows.append((int(m.group(1)), int(m.group(2)), untext(what, fm.group(1)),
                         untext(what, fm.group(2)), int(fm.group(3))))
        else:
            rows.append((int(m.group(1)), int(m.group(2)), untext(what, m.group(3)), "", None))
    if not rows:
        raise Fail("%s: no row" % what)
    return rows


def test_table(remora, interp):
    """The table on stdout (cpu mode, the target's deadlines in CPU time): no row without
    samples (<GC> only when the target collected garbage), share_60 shown at the line
    where it spent 75% of its time by its own clock, not at the lower line of its other
    25%."""
    with Target(interp, TARGET, "ready.json", args=["--cpu"]) as t:
        ready = t.wait_ready()
        lines = ready["lines"]["share_60"]
        before = mark(t, 1)
        out, err = record(remora, ["-p", t.pid, "-d", SECONDS, "-l", 1000, "--mode", "cpu"])
        after = mark(t, 2)
        summ = summary(err, 1000)
    rows = table_entries("the table", out.encode())
    problems = []
    empty = [r for r in rows if r[1] == 0]
    if empty:
        problems.append("%d rows without a sample, e.g. %s" % (len(empty), empty[0][2]))
    collected = after["gc"] - before["gc"]
    gc_rows = [r for r in rows if r[2] == "<GC>"]
    if collected == 0 and gc_rows:
        problems.append("a <GC> row (%d samples) but the target collected no garbage" % gc_rows[0][1])
    first = after["lines"]["first"] - before["lines"]["first"]
    hot = after["lines"]["hot"] - before["lines"]["hot"]
    if hot < 2 * first:
        raise Skip("the target spent %.3f s on its HOT line, %.3f s on its FIRST: not the 3:1 "
                   "it asks for (a stalled machine)" % (hot, first))
    s60 = [r for r in rows if r[2] == "share_60" and r[3].endswith("/format_shares.py")]
    if len(s60) != 1:
        problems.append("%d rows for share_60, want 1" % len(s60))
    elif s60[0][4] != lines["hot"]:
        problems.append("share_60 shown at line %s; it spent %.0f%% of its time on line %d "
                        "(and %.0f%% on line %d; def at %d)"
                        % (s60[0][4], 100 * hot / (hot + first), lines["hot"],
                           100 * first / (hot + first), lines["first"], lines["def"]))
    if problems:
        raise Fail("; ".join(problems))
    return "%d rows, none empty; share_60 at line %d (%.0f%% of its time), %d collections, " \
           "%d samples" % (len(rows), lines["hot"], 100 * hot / (hot + first), collected, summ.samples)


# --- formats/speedscope-time --------------------------------------------------------------

def test_speedscope_time(remora, interp):
    """speedscope's weights are seconds: every stack's weight is its samples (the collapsed
    file of the same recording) x one interval, that interval is the recording's duration
    over its rounds (the summary), each profile's endValue and each frame's weights add up
    to its samples x the interval, and the main thread's time is the recording's."""
    with Target(interp, TARGET, "ready.json") as t:
        ready = t.wait_ready()
        d = t.dir
        jpath, cpath = os.path.join(d, "t.json"), os.path.join(d, "t.collapsed")
        _, err = record(remora, ["-p", t.pid, "-d", SECONDS, "-o", jpath, "-o", cpath])
        summ = summary(err, 1000)
        with open(jpath, encoding="utf-8") as f:
            doc = json.load(f)
        stacks = parse_collapsed(cpath)
    seconds, names = speedscope_stacks(doc)
    counts = by_thread(stacks)
    got, dt = speedscope_counts(seconds, counts)
    if got != counts:
        raise Fail("weights are not the collapsed counts x one interval (%.9g s)" % dt)
    # the kernel engine: a sample is a period (a tick of CPU time, or a round's look at a
    # thread off a CPU) whether or not the rounds kept up; else the recording over its rounds
    want_dt = 1.0 / 1000 if summ.engine == "kernel" else summ.seconds / summ.samples
    tol = 0.0 if summ.engine == "kernel" else SECONDS_TOLERANCE / summ.samples
    if abs(dt - want_dt) > tol + 1e-9:
        raise Fail("a sample weighs %.9g s; want %.9g s (the recording took %.2f s for %d "
                   "rounds, engine %s)" % (dt, want_dt, summ.seconds, summ.samples, summ.engine))
    problems = []
    for prof in doc["profiles"]:
        tid = int(prof["name"].rsplit("(", 1)[1].rstrip(")"))
        n = sum(counts.get(tid, {}).values())
        if abs(prof["endValue"] - n * dt) > 1e-9 * max(1.0, n * dt):
            problems.append("%s: endValue %r, its %d samples x %.9g s = %r"
                            % (prof["name"], prof["endValue"], n, dt, n * dt))
    main = seconds.get(ready["main"], {})
    for fn in FUNCS:
        w = sum(v for st, v in main.items() if any(f[0] == fn for f in st))
        n = sum(c for st, c in counts[ready["main"]].items() if any(f[0] == fn for f in st))
        if abs(w - n * dt) > 1e-9 * max(1.0, w):
            problems.append("%s: its stacks weigh %.9g s, its %d samples x dt = %.9g s" % (fn, w, n, n * dt))
    main_s = sum(main.values())
    if not 0.95 * summ.seconds - SECONDS_TOLERANCE <= main_s <= summ.seconds + SECONDS_TOLERANCE:
        problems.append("the main thread (sampled every round) weighs %.3f s in a %.2f s recording"
                        % (main_s, summ.seconds))
    if problems:
        raise Fail("; ".join(problems))
    return "1 sample = %.6f ms (summary: %.2f s / %d rounds); main thread %.3f s of %.2f s" % (
        dt * 1e3, summ.seconds, summ.samples, main_s, summ.seconds)


# --- formats/diff ---------------------------------------------------------------------------

def diff_nodes(path):
    """[(function, file, colour, change, noise, samples)] of each frame node of a
    differential flamegraph (thread roots too, function None), and the diff's header."""
    doc = flamegraph_data("diff flamegraph", path)
    P = doc["current"]
    D = P.get("diff")
    if D is None:
        raise Fail("%s has no diff data" % os.path.basename(path))
    S, F = P["strings"], P["frames"]
    n = len(P["depth"])
    for col in ("base", "change", "noise", "colour"):
        if len(D[col]) != n:
            raise Fail("diff column %s has %d entries for %d nodes" % (col, len(D[col]), n))
    # a node's samples: its self plus its subtree's (parent: the nearest earlier node one
    # level up; depth 0 is a thread's root)
    parent, stack = [-1] * n, []
    for i in range(n):
        del stack[P["depth"][i]:]
        parent[i] = stack[-1] if stack else -1
        stack.append(i)
    subtotal = list(P["self"])
    for i in range(n - 1, 0, -1):
        if parent[i] >= 0:
            subtotal[parent[i]] += subtotal[i]
    out = []
    for i in range(n):
        fr = P["frame"][i]
        fn, file = (S[F[3 * fr]], S[F[3 * fr + 1]]) if fr >= 0 else (None, None)
        out.append((fn, file, D["colour"][i], D["change"][i], D["noise"][i], subtotal[i]))
    return out, D


class SameDirTarget(Target):
    """A Target run from the directory 'where' (made by the caller, who removes it), so
    that every run has the same script path: a differential profile matches frames by
    function and file."""

    def __init__(self, interp, script, out_name, where, args=()):
        Target.__init__(self, interp, script, out_name, args)
        self.where = where

    def __enter__(self):
        self.dir = self.where
        self.log = None
        try:
            self._start()
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc):
        keep = os.environ.get("REMORA_KEEP_TARGET_DIR")
        os.environ["REMORA_KEEP_TARGET_DIR"] = "1"     # the directory is the caller's
        try:
            return Target.__exit__(self, *exc)
        finally:
            if keep is None:
                del os.environ["REMORA_KEEP_TARGET_DIR"]
            else:
                os.environ["REMORA_KEEP_TARGET_DIR"] = keep


def run_once(remora, interp, d, name, outputs, slow=None, diff=None):
    """One run of the target (slow: the function it makes twice as slow) from d, recorded
    DIFF_SECONDS between two marks into d/NAME.EXT; returns (shares by its CPU clock, by
    its wall clock, summary)."""
    with SameDirTarget(interp, TARGET, name + ".ready", d,
                       args=["--cpu"] + (["--slow", slow] if slow else [])) as t:
        ready = t.wait_ready()
        if ready["slow"] != slow:
            raise Fail("the target slowed %r, asked %r" % (ready["slow"], slow))
        before = mark(t, 1)
        args = ["-p", t.pid, "-d", DIFF_SECONDS, "--mode", "cpu"]
        for ext in outputs:
            args += ["-o", os.path.join(d, name + ext)]
        if diff:
            args += ["--diff", diff]
        _, err = record(remora, args)
        after = mark(t, 2)
    cpu, _ = truth_shares(before, after, "cpu")
    wall, _ = truth_shares(before, after, "wall")
    # a runnable thread waiting for a CPU is sampled in cpu mode too: on a busy machine
    # the samples follow its wall clock, so a truth must hold by both clocks
    return cpu, wall, summary(err, 1000)


def coloured(nodes):
    return [(fn, c, ch, nz, n) for fn, _, c, ch, nz, n in nodes if c != 0]


def test_diff(remora, interp):
    """record --diff BASELINE, in cpu mode of a target whose deadlines are CPU time (its
    shares do not move when the machine is busy): against a second run of the same
    program, no frame is coloured unless the target's own clocks say its share changed
    over DIFF_TRUE_CHANGE points (then it is measured again); against a run with one
    function (chosen here, slowed by the target) twice as slow, that function is red, no
    other function of the target is."""
    slow = random.Random(interp[0]).choice(FUNCS)
    root = interp[2]
    d = tempfile.mkdtemp(prefix="remora-diff-", dir=os.path.join(root, "tmp") if root else None)
    os.chmod(d, 0o755)
    try:
        base = os.path.join(d, "base.remora")
        truth0, wall0, s0 = run_once(remora, interp, d, "base", [".remora"])
        same_note = None
        for attempt in range(1, TRIES + 1):
            truth1, wall1, s1 = run_once(remora, interp, d, "same%d" % attempt, [".html"], diff=base)
            nodes, D = diff_nodes(os.path.join(d, "same%d.html" % attempt))
            bad = coloured(nodes)
            real = {fn: max(t1 - t0, w1 - w0, key=abs)
                    for fn, t0, t1, w0, w1 in zip(FUNCS, truth0, truth1, wall0, wall1)}
            same_note = "same program: %d of %d nodes coloured, noise up to ±%.2f pts (%d and %d " \
                        "samples), truth moved %s pts" % (
                            len(bad), len(nodes), 100 * D["noise50"], D["base_total"], D["total"],
                            "/".join("%+.1f" % v for v in real.values()))
            if not bad:
                break
            if max(abs(v) for v in real.values()) <= DIFF_TRUE_CHANGE:
                raise Fail("a second run of the same program (its shares within %.1f points of "
                           "the first by its own clock) colours %s" % (
                               DIFF_TRUE_CHANGE, "; ".join("%s %+.2f pts (noise ±%.2f, colour %.2f)"
                                                           % (fn, 100 * ch, 100 * nz, c)
                                                           for fn, c, ch, nz, n in bad[:5])))
        else:
            raise Skip("the target's own shares moved over %.1f points between runs %d times "
                       "(a busy machine): %s" % (DIFF_TRUE_CHANGE, TRIES, same_note))
        truth2, wall2, s2 = run_once(remora, interp, d, "slow", [".html"], slow=slow, diff=base)
        nodes, D = diff_nodes(os.path.join(d, "slow.html"))
        i = FUNCS.index(slow)
        if min(truth2[i] - truth0[i], wall2[i] - wall0[i]) < 5.0:
            raise Skip("the slowed %s took %.1f%% of the CPU time against %.1f%%, %.1f%% of the "
                       "wall time against %.1f%% (a busy machine)"
                       % (slow, truth2[i], truth0[i], wall2[i], wall0[i]))
        red = collections.Counter()
        for fn, file, c, ch, nz, n in nodes:
            if c > 0 and fn is not None and file.endswith("/format_shares.py"):
                red[fn] += n
        mine = [x for x in nodes if x[0] == slow and x[1].endswith("/format_shares.py")]
        widest = max(mine, key=lambda x: x[5]) if mine else None
        if widest is None or widest[2] <= 0:
            raise Fail("%s, made twice as slow (%.1f%% -> %.1f%% by the target's CPU clock, "
                       "%.1f%% -> %.1f%% by its wall clock), is not red: %s"
                       % (slow, truth0[i], truth2[i], wall0[i], wall2[i],
                                    "no node" if widest is None else "colour %.2f, change %+.2f "
                                    "pts, noise ±%.2f; its %d samples of %d" % (
                                        widest[2], 100 * widest[3], 100 * widest[4], widest[5],
                                        D["total"])))
        others = sorted(fn for fn in red if fn != slow)
        if others:
            raise Fail("besides %s (slowed), red: %s" % (slow, ", ".join(others)))
        return "%s; %s slowed: red (%+.1f pts, noise ±%.1f), nothing else of the target red" % (
            same_note, slow, 100 * widest[3], 100 * widest[4])
    finally:
        shutil.rmtree(d, ignore_errors=True)


def tests(remora):
    """[(name, function, skip reason or None)] for run.py."""
    out = []

    def each(kind, fn, names):
        for interp in INTERPRETERS:
            if interp[0] in names:
                out.append(("formats/%s/%s" % (kind, interp[0]),
                            lambda i=interp: fn(remora, i), interp_missing(interp)))

    each("pstats", test_pstats, PSTATS_INTERPRETERS)
    each("table", test_table, TABLE_INTERPRETERS)
    each("speedscope-time", test_speedscope_time, TIME_INTERPRETERS)
    each("diff", test_diff, DIFF_INTERPRETERS)
    return out
