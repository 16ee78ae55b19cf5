# Functional tests for `remora record` and `remora convert` (issue #4), run by run.py on the
# same interpreters as the dump tests. Each target (tests/targets/) says when it is ready
# through a file and reports its own ground truth: the CPU shares it measured, its thread
# ids, the names it gave itself. Statistical assertions name their margin next to it.
# See tests/functional/README.md for what each test checks.

import collections
import difflib
import json
import os
import pty
import re
import select
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time
import tty

from harness import (HOST_PYTHON, INTERPRETERS, MOVING, SHORT_SECONDS, STATS, SUMMARY, torn_verdict,
                     TARGETS, Fail, Recording, Skip, Target, check_odd_names, free_pid,
                     interp_missing, mark, odd_recording, one_line, record, signame, speedscope_validator,
                     summary, tail, torn_kind, workdir)
from formats import by_thread, parse_collapsed, speedscope_counts, speedscope_stacks, total

ORDER = 30            # where run.py runs these tests among the modules' (ascending)

# 1. accuracy: 60/30/10 shares, wall and cpu mode
ACCURACY_SECONDS = 1.5
ACCURACY_MARGIN = 5.0          # points of share, each function (~1500 samples; in windows
                               # where the target did not stall, remora is within 1 point)
SLEEPER_CPU_MAX = 2.0          # % of all samples a sleeping thread may get in cpu mode
SLEEPER_WALL_MIN = 95.0        # % of rounds a sleeping thread must appear in, in wall mode
                               # (it is in every round; errors may drop a few)
STALL_LIMIT = 10.0             # % of a window the target may lose off-CPU (other work on the
                               # machine) for that window to judge remora; quiet: a few %
ACCURACY_TRIES = 3             # windows per mode before a busy machine skips the test
# 2. torn stacks
TORN_RATE, TORN_RATE_HZ = "20k", 20000
TORN_SECONDS = 6               # 120,000 rounds asked; 50,000 are enough down to 8.4 kHz
TORN_MAX_SECONDS = 25          # the longer recording when the first took too few samples
TORN_MIN_SAMPLES = 50000
# 3. gil mode
GIL_SECONDS = 1.5
GIL_MIN_SHARE = 10.0           # % of samples each spinner must get: the interpreter hands the
                               # GIL over every 5 ms switch interval (seen: 28-72% each)
GIL_INTERPRETERS = ("pyenv-3.9.18", "pyenv-3.12.1", "sid-3.15")
# 7. and 8.: not version-specific; one host and one chroot interpreter
SIGNAL_INTERPRETERS = ("pyenv-3.12.1", "sid-3.15")
STATS_INTERPRETERS = ("pyenv-3.12.1", "sid-3.15")
# 9. exception mode
EXC_MIN_ROUNDS = 50.0          # % of rounds each thread inside an except block must appear in
                               # (it is in every round; errors may drop a few: seen 0 errors)


# --- 1. accuracy ------------------------------------------------------------------------

SHARE_FUNCS = ("share_60", "share_30", "share_10")


def shares(counts):
    n = sum(counts)
    return [100.0 * c / n for c in counts] if n else [0.0] * len(counts)


def judge_window(mode, summ, stacks, before, after, ready):
    """Compares one recording with the target's own account of the same window.
    Returns (problems, note, percentage of the window the target stalled)."""
    key = "wall" if mode == "wall" else "cpu"      # cpu mode: the target's thread_time
    truth = shares([after[key][fn] - before[key][fn] for fn in SHARE_FUNCS])
    window = after["at"] - before["at"]
    stalled = 100.0 * sum(after["stall"][fn] - before["stall"][fn] for fn in SHARE_FUNCS) / window
    counts = [total(stacks, ready["main"], fn) for fn in SHARE_FUNCS]
    measured = shares(counts)
    problems = []
    if sum(counts) == 0:
        problems.append("%s: no sample of the main thread is in share_60/30/10" % mode)
    else:
        for fn, m, w in zip(SHARE_FUNCS, measured, truth):
            if abs(m - w) > ACCURACY_MARGIN:
                problems.append("%s: %s got %.1f%% of the samples, truth %.1f%% (margin %.0f "
                                "points)" % (mode, fn, m, w, ACCURACY_MARGIN))
    sleeper = total(stacks, ready["sleeper"])
    everything = total(stacks)
    if mode == "cpu":
        pct = 100.0 * sleeper / everything if everything else 0.0
        if pct >= SLEEPER_CPU_MAX:
            problems.append("cpu: the sleeping thread got %.1f%% of the samples (%d of %d), "
                            "want under %.0f%%" % (pct, sleeper, everything, SLEEPER_CPU_MAX))
        sleep_note = "sleeper %.1f%% of samples" % pct
    else:
        pct = 100.0 * sleeper / summ.samples if summ.samples else 0.0
        if not SLEEPER_WALL_MIN <= pct <= 100.0:
            problems.append("wall: the sleeping thread is in %d of %d rounds (%.1f%%), want "
                            "%.0f-100%%" % (sleeper, summ.samples, pct, SLEEPER_WALL_MIN))
        sleep_note = "sleeper in %.1f%% of rounds" % pct
    note = "%s %s (truth %s), %s, %d rounds, %d errors, target stalled %.0f%%" % (
        mode, "/".join("%.1f" % m for m in measured), "/".join("%.1f" % w for w in truth),
        sleep_note, summ.samples, summ.errors, stalled)
    return problems, note, stalled


def test_accuracy(remora, interp, extra=()):
    """60/30/10 shares within ACCURACY_MARGIN points of the target's own account, in wall
    and cpu mode. A window in which the target stalled more than STALL_LIMIT% of the time
    (a machine busy with other work) cannot judge remora: such a window is recorded again,
    up to ACCURACY_TRIES times, and the test is skipped if every one was disturbed."""
    notes, problems, busy = [], [], []
    with Target(interp, os.path.join(TARGETS, "cpu_shares.py"), "ready.json") as t:
        ready = t.wait_ready()
        n = 1
        before = mark(t, n)
        for mode in ("wall", "cpu"):
            for attempt in range(1, ACCURACY_TRIES + 1):
                path = os.path.join(t.dir, "%s-%d.collapsed" % (mode, attempt))
                # wall: every thread's every moment, the sleeping one's too (--idle)
                _, err = record(remora, ["-p", t.pid, "-d", ACCURACY_SECONDS, "--mode", mode,
                                         "-o", path] + (["--idle"] if mode == "wall" else [])
                                + list(extra))
                summ, stacks = summary(err, 1000), parse_collapsed(path)
                n += 1
                after = mark(t, n)
                bad, note, stalled = judge_window(mode, summ, stacks, before, after, ready)
                before = after
                if attempt > 1:
                    note += " (try %d)" % attempt
                if not bad:
                    notes.append(note)
                    break
                if stalled <= STALL_LIMIT:
                    problems.append("; ".join(bad) + " [" + note + "]")
                    break
            else:
                busy.append("%s: the target stalled more than %.0f%% of each of %d windows "
                            "(last: %s; %s)" % (mode, STALL_LIMIT, ACCURACY_TRIES, "; ".join(bad),
                                                note))
    if problems:
        raise Fail("; ".join(problems + busy))
    if busy:
        raise Skip("machine too busy to judge: " + "; ".join(busy + notes))
    return "; ".join(notes)


# --- 2. torn stacks ---------------------------------------------------------------------

def check_torn(stacks, main):
    """(bad Counter by kind, examples, Counter of innermost chain function)."""
    bad, examples, depth = collections.Counter(), [], collections.Counter()
    for s in stacks:
        fns = s.functions()
        kind = ("a thread the target does not have (%d)" % s.tid if s.tid != main
                else torn_kind(fns) if fns else "an empty stack")
        if kind:
            bad[kind] += s.count
            if len(examples) < 3:
                examples.append("%s x%d: %s" % (kind, s.count, ";".join(fns)))
        elif fns[-1] == MOVING:
            depth[MOVING] += s.count
        else:
            depth[fns[-1] if len(fns) > 3 else "alternate"] += s.count
    return bad, examples, depth


def test_torn(remora, interp, extra=()):
    """Not one sample mixes the chains or breaks their order, in at least TORN_MIN_SAMPLES
    samples at 20 kHz. If the first recording (TORN_SECONDS) took fewer samples, because
    remora could not keep the rate (a busy machine, a sanitizer build), a longer recording
    follows, sized from the rate achieved, up to TORN_MAX_SECONDS. The test is not vacuous:
    both chains must be seen below their first call; where most deep samples are torn and
    dropped (3.9/3.10 keep a few dozen in 6 s, seen: none once), one more recording."""
    notes, problems = [], []
    depth = collections.Counter()
    with Target(interp, os.path.join(TARGETS, "alternate.py"), "ready.json") as t:
        ready = t.wait_ready()
        seconds = TORN_SECONDS
        for attempt in (1, 2, 3):
            path = os.path.join(t.dir, "torn-%d.collapsed" % attempt)
            _, err = record(remora, ["-p", t.pid, "-r", TORN_RATE, "-d", seconds, "--stats",
                                     "-o", path] + list(extra))
            summ = summary(err, TORN_RATE_HZ)
            bad, examples, got = check_torn(parse_collapsed(path), ready["main"])
            depth += got
            st = STATS.search(err)
            notes.append("-d %g: %s; %s" % (seconds, summ, "reads/sample %s, cpu us/sample %s"
                                            % (st.group(6), st.group(7)) if st else
                                            "no stats line"))
            problem, known = torn_verdict(bad, examples, summ.samples, summ.engine)
            if known:
                notes.append(known)
            if problem:
                problems.append(problem)
                break
            enough = summ.samples >= TORN_MIN_SAMPLES
            seen = depth["b"] + depth["c"] > 0 and depth["y"] + depth["z"] > 0
            if enough and seen:
                break
            if attempt == 3 or summ.hz <= 0:
                if not enough:
                    problems.append("only %d samples in %.2f s (%d Hz of %d asked), need %d"
                                    % (summ.samples, summ.seconds, summ.hz, TORN_RATE_HZ,
                                       TORN_MIN_SAMPLES))
                break
            if not enough:
                seconds = min(TORN_MAX_SECONDS, -(-TORN_MIN_SAMPLES * 5 // (4 * summ.hz)))
    if not problems and (depth["b"] + depth["c"] == 0 or depth["y"] + depth["z"] == 0):
        problems.append("never saw a chain past its first call (b+c: %d, y+z: %d samples)"
                        % (depth["b"] + depth["c"], depth["y"] + depth["z"]))
    if problems:
        raise Fail("; ".join(problems) + " [" + "; ".join(notes) + "]")
    return "; ".join(notes) + "; innermost a/b/c %d/%d/%d, x/y/z %d/%d/%d, alternate %d, <moving> %d" % tuple(
        depth[k] for k in ("a", "b", "c", "x", "y", "z", "alternate", MOVING))


# --- 3. gil mode ------------------------------------------------------------------------

def test_gil_mode(remora, interp):
    with Target(interp, os.path.join(TARGETS, "gil_contend.py"), "ready.json") as t:
        ready = t.wait_ready()
        t.wait_main_in_read()
        t.wait_thread_parked(ready["sleeper"])      # not on its way to time.sleep() still
        path = os.path.join(t.dir, "gil.collapsed")
        _, err = record(remora, ["-p", t.pid, "-d", GIL_SECONDS, "--mode", "gil", "-o", path])
        summ = summary(err, 1000)
        stacks = parse_collapsed(path)
    everything = total(stacks)
    spinners = [total(stacks, tid) for tid in ready["spinners"]]
    others = collections.Counter()
    for s in stacks:
        if s.tid not in ready["spinners"]:
            who = ("the sleeper" if s.tid == ready["sleeper"] else
                   "main (parked in read)" if s.tid == ready["main"] else "thread %d" % s.tid)
            others[who] += s.count
    problems = []
    # one holder at a time: a sample a round from user space; with the kernel engine (gil
    # mode read at the tick) a holder's samples are its time over the period, rounds late
    # or not, so the bound is the recording's periods (2% for the printed seconds' rounding
    # and a tick's carry)
    periods = summ.samples if summ.engine != "kernel" else summ.seconds * summ.asked * 1.02
    if everything > periods:
        problems.append("%d samples for %d %s: more than one GIL holder at a time"
                        % (everything, periods, "rounds" if summ.engine != "kernel" else "periods"))
    if others:
        problems.append("samples of threads not holding the GIL: %s"
                        % ", ".join("%s %d" % kv for kv in others.items()))
    pcts = [100.0 * n / everything if everything else 0.0 for n in spinners]
    for i, pct in enumerate(pcts):
        if pct < GIL_MIN_SHARE:
            problems.append("spinner %d got %.1f%% of the samples, want at least %.0f%%"
                            % (i + 1, pct, GIL_MIN_SHARE))
    note = "%d samples in %d rounds, spinners %.1f%%/%.1f%%, %d errors" % (
        everything, summ.samples, pcts[0], pcts[1], summ.errors)
    if problems:
        raise Fail("; ".join(problems) + " [" + note + "]")
    return note


# --- 4. launch mode ---------------------------------------------------------------------

def test_launch(remora, interp):
    with Target(interp, os.path.join(TARGETS, "short_run.py"), None, spawn=False) as t:
        notes, problems = [], []
        for code, want_rc in (("0", 0), ("3", 3), ("kill", 128 + signal.SIGKILL)):
            path = os.path.join(t.dir, "launch-%s.collapsed" % code)
            rc, out, err = remora.run(["record", "-o", path, "--"] + t.argv + [code],
                                      input=b"hello remora\n")
            what = "child ending with %s" % ("SIGKILL" if code == "kill" else "exit " + code)
            if rc != want_rc:
                problems.append("%s: remora exited %d, want %d (%s)" % (what, rc, want_rc,
                                                                        tail(err)))
                continue
            if out != "got: HELLO REMORA\n":
                problems.append("%s: remora's stdout is %r, want the child's %r"
                                % (what, out[:200], "got: HELLO REMORA\n"))
            summ = summary(err, 1000)
            if not summ.exited:
                problems.append("%s: summary does not say the target exited" % what)
            work = total(parse_collapsed(path), has="brief_work")
            if work == 0:
                problems.append("%s: brief_work (40 ms) is not in the profile (%s)" % (what, summ))
            notes.append("%s -> %d, brief_work %d samples" % (code, rc, work))
        if problems:
            raise Fail("; ".join(problems))
        return "; ".join(notes)


# --- 5. convert -------------------------------------------------------------------------


def test_convert(remora, interp):
    d, ready = odd_recording(remora, interp, ["rec.remora", "rec.collapsed"])
    try:
        recorded = os.path.join(d, "rec.collapsed")
        converted = os.path.join(d, "converted.collapsed")
        rc, out, err = remora.run(["convert", os.path.join(d, "rec.remora"), "-o", converted])
        if rc != 0:
            raise Fail("`remora convert rec.remora -o converted.collapsed` exited %d: %s"
                       % (rc, tail(err)))
        with open(recorded, "rb") as f:
            a = f.read()
        with open(converted, "rb") as f:
            b = f.read()
        if a != b:
            al = a.decode("utf-8", "replace").splitlines()
            bl = b.decode("utf-8", "replace").splitlines()
            diff = list(difflib.unified_diff(al, bl, "recorded", "converted", lineterm="", n=0))
            same = sorted(al) == sorted(bl)
            raise Fail("convert's collapsed file differs from the recording's own (%d vs %d "
                       "lines%s):\n%s" % (len(al), len(bl), ", same lines in another order"
                                          if same else "",
                                          "\n".join("    " + l[:200] for l in diff[:12])))
        stacks = parse_collapsed(recorded)
        check_odd_names(stacks, ready)
        return "%d stacks, %d samples, byte-identical" % (len(stacks), total(stacks))
    finally:
        shutil.rmtree(d, ignore_errors=True)


# --- 6. speedscope ----------------------------------------------------------------------


def test_speedscope(remora, interp):
    validator = speedscope_validator()
    d, ready = odd_recording(remora, interp, ["rec.json", "rec.collapsed"])
    try:
        path = os.path.join(d, "rec.json")
        p = subprocess.run(validator + [path], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=60)
        text = p.stdout.decode("utf-8", "replace")
        if p.returncode != 0:
            raise Fail("speedscope's schema rejects remora's file (validate.js exited %d): %s"
                       % (p.returncode, tail(text, 5)))
        # the same recording, in both formats: the same stacks and counts per thread
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        seconds, names = speedscope_stacks(doc)
        stacks = parse_collapsed(os.path.join(d, "rec.collapsed"))
        want = by_thread(stacks)
        got, dt = speedscope_counts(seconds, want)
        if got != want:
            tids = sorted(set(got) | set(want))
            diffs = ["thread %d: %d samples in speedscope, %d in collapsed"
                     % (tid, sum(got.get(tid, {}).values()), sum(want.get(tid, {}).values()))
                     for tid in tids if got.get(tid) != want.get(tid)]
            raise Fail("speedscope and collapsed files of one recording differ: %s"
                       % "; ".join(diffs[:4]))
        if names.get(ready["odd"]) != ready["thread_name"]:
            raise Fail("odd thread's profile is named %r, want %r"
                       % (names.get(ready["odd"]), ready["thread_name"]))
        check_odd_names(stacks, ready)
        return "valid; %d profiles, %d samples, same stacks as collapsed" % (
            len(doc["profiles"]), total(stacks))
    finally:
        shutil.rmtree(d, ignore_errors=True)


# --- 7. ending well ---------------------------------------------------------------------

def test_stop_signal(remora, interp, sig):
    """SIGINT/SIGTERM to remora while it samples: exit 0, and both outputs written, only
    at the end (the final names do not exist before the signal)."""
    d = workdir()
    try:
        with Target(interp, os.path.join(TARGETS, "cpu_shares.py"), "ready.json") as t:
            ready = t.wait_ready()
            col, raw = os.path.join(d, "stop.collapsed"), os.path.join(d, "stop.remora")
            rec = Recording(remora, ["-p", t.pid, "-o", col, "-o", raw])
            try:
                seen = rec.wait_sampled()
                early = [os.path.basename(p) for p in (col, raw) if os.path.exists(p)]
                os.kill(rec.proc.pid, sig)
                rc, out, err = rec.finish()
            finally:
                rec.close()
            if early:
                raise Fail("%s existed while recording was in progress (want temp + rename)"
                           % " and ".join(early))
            if rc != 0:
                raise Fail("remora exited %d after %s, want 0: %s" % (rc, signame(sig),
                                                                     tail(err)))
            summ = summary(err, 1000)
            if t.proc.poll() is not None:
                raise Fail("the target died (%d) when remora was stopped" % t.proc.returncode)
        stacks = parse_collapsed(col)
        main = total(stacks, ready["main"])
        if main == 0 or total(stacks, ready["main"], "share_60") == 0:
            raise Fail("the profile has no samples of the target's main thread in share_60")
        conv = os.path.join(d, "converted.collapsed")
        rc, _, err = remora.run(["convert", raw, "-o", conv])
        if rc != 0:
            raise Fail("the .remora written after %s does not convert (exit %d): %s"
                       % (signame(sig), rc, tail(err)))
        if total(parse_collapsed(conv)) != total(stacks):
            raise Fail("the .remora written after %s holds %d samples, the collapsed file %d"
                       % (signame(sig), total(parse_collapsed(conv)), total(stacks)))
        return "signalled after %d rounds; exit 0, %s" % (seen, summ)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_target_killed(remora, interp):
    """The target is SIGKILLed during `record -p PID -d 30`: exit 0 (the profile is
    written), the summary says the target exited, and what was sampled is written."""
    d = workdir()
    try:
        with Target(interp, os.path.join(TARGETS, "cpu_shares.py"), "ready.json") as t:
            ready = t.wait_ready()
            col = os.path.join(d, "killed.collapsed")
            rec = Recording(remora, ["-p", t.pid, "-d", 30, "-o", col])
            try:
                seen = rec.wait_sampled()
                early = os.path.exists(col)
                t.proc.kill()
                t.proc.wait()
                rc, out, err = rec.finish()
            finally:
                rec.close()
        if early:
            raise Fail("killed.collapsed existed while recording was in progress")
        if rc != 0:
            raise Fail("remora exited %d after the target was killed, want 0: %s"
                       % (rc, tail(err)))
        summ = summary(err, 1000)
        if not summ.exited:
            raise Fail("summary does not say the target exited: %s" % tail(err, 1))
        stacks = parse_collapsed(col)
        if total(stacks, ready["main"], "share_60") == 0:
            raise Fail("the profile has no samples of the target's main thread in share_60")
        return "killed after %d rounds; exit 0, %s; the target exited" % (seen, summ)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def refused_before_sampling(remora, what, args, prefix):
    """Runs remora with args (under prefix); it must exit 1 with one line and no summary,
    within 5 s (nothing sampled). Returns its stderr."""
    start = time.monotonic()
    rc, _, err = remora.run(args, prefix=prefix)
    took = time.monotonic() - start
    if rc != 1:
        raise Fail("%s: exit %d, want 1: %s" % (what, rc, tail(err)))
    bad = one_line(err)
    if bad:
        raise Fail("%s: %s" % (what, bad))
    if SUMMARY.search(err) or took > 5:
        raise Fail("%s: remora sampled before failing (%.1f s): %s" % (what, took, err.strip()))
    return err


def ro_mount_prefix(path, mount, probe):
    """A command prefix that runs a command in a private mount namespace after the shell
    line `mount` ($0: path) made path read-only, even for root; None if `probe` ($0: path)
    is not refused there with "Read-only file system" (this machine cannot do it)."""
    if shutil.which("unshare") is None:
        return None
    prefix = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
              mount + ' && exec "$@"', path]
    p = subprocess.run(prefix + ["sh", "-c", probe, path], stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if p.returncode == 0 or b"Read-only file system" not in p.stdout:
        return None
    return prefix


def readonly_prefix(d):
    """A prefix under which directory d is read-only: a read-only tmpfs over it."""
    return ro_mount_prefix(d, 'mount -t tmpfs -o ro,size=64k remora-ro "$0"', ': > "$0/probe"')


class Drain:
    """Reads what is written to a FIFO or a pseudo-terminal, in a thread, as a program
    reading it would: a FIFO is opened for reading (blocking until a writer opens it) and
    read to EOF; a terminal's master side is read until stop() and quiet."""

    def __init__(self, fifo=None, master=None):
        self.fifo, self.master, self.data = fifo, master, b""
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        if self.fifo is not None:
            fd = os.open(self.fifo, os.O_RDONLY)
            try:
                while True:
                    chunk = os.read(fd, 65536)
                    if not chunk:
                        break
                    self.data += chunk
            finally:
                os.close(fd)
            return
        quiet = 0
        while True:
            ready, _, _ = select.select([self.master], [], [], 0.05)
            if not ready:
                # the kernel hands a terminal's bytes over asynchronously: once stopped,
                # end after 0.25 s with nothing more
                quiet = quiet + 1 if self.done.is_set() else 0
                if quiet == 5:
                    return
                continue
            try:
                self.data += os.read(self.master, 65536)
            except OSError:
                return

    def stop(self):
        """Ends the reader and returns what it read. A FIFO remora never opened is opened
        here (and closed) so that the reader sees its end."""
        self.done.set()
        if self.fifo is not None and self.thread.is_alive():
            try:
                os.close(os.open(self.fifo, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass
        self.thread.join(10)
        return self.data


def node_kind(path):
    """What is at path, not following a symlink: "char 1,3", "fifo", "symlink", ..."""
    try:
        st = os.lstat(path)
    except OSError as e:
        return "nothing (%s)" % e.strerror
    if stat.S_ISCHR(st.st_mode):
        return "char %d,%d" % (os.major(st.st_rdev), os.minor(st.st_rdev))
    for test, name in ((stat.S_ISLNK, "symlink"), (stat.S_ISFIFO, "fifo"), (stat.S_ISDIR, "directory"),
                       (stat.S_ISREG, "file"), (stat.S_ISBLK, "block device"), (stat.S_ISSOCK, "socket")):
        if test(st.st_mode):
            return name
    return stat.filemode(st.st_mode)


def test_outputs_in_place(remora):
    """An output that is not a regular file is written in place, streaming, never renamed
    over: remora runs as root, and renaming over a device node replaces it for every
    program. Nodes made here: the null device (c 1 3), the full device (c 1 7: remora must
    meet ENOSPC, exit 5), a FIFO a thread here reads, a symlink to a file (collapsed and
    raw), to the null node and to a pseudo-terminal a thread here reads, and `-o -`. After
    `record`, each node is what it was, each link still a link, and the bytes arrived: a
    collapsed profile through the FIFO, the terminal, stdout and the link's file."""
    if not os.access(HOST_PYTHON, os.X_OK):
        raise Skip("%s not found" % HOST_PYTHON)
    d = workdir()
    drains = []
    master = slave = None
    try:
        nodes = {"null": (1, 3), "full": (1, 7)}
        for name, (major, minor) in nodes.items():
            try:
                os.mknod(os.path.join(d, name), 0o666 | stat.S_IFCHR, os.makedev(major, minor))
            except OSError as e:
                raise Skip("cannot make a device node here: %s" % e)
        node, full = os.path.join(d, "null"), os.path.join(d, "full")
        fifo = os.path.join(d, "fifo")
        os.mkfifo(fifo, 0o600)
        master, slave = pty.openpty()
        tty.setraw(slave)               # the bytes as written: no \n -> \r\n
        pts = os.ttyname(slave)
        target, raw_target = os.path.join(d, "target.collapsed"), os.path.join(d, "target.remora")
        link, raw_link = os.path.join(d, "link.collapsed"), os.path.join(d, "link.remora")
        link_null, link_tty = os.path.join(d, "link-null"), os.path.join(d, "link-tty")
        os.symlink(target, link)
        os.symlink(raw_target, raw_link)
        os.symlink(node, link_null)
        os.symlink(pts, link_tty)
        before = {p: node_kind(p) for p in (node, full, fifo, link, raw_link, link_null, link_tty, pts)}
        known = set(os.listdir(d))
        via_fifo, via_tty = Drain(fifo=fifo), Drain(master=master)
        drains = [via_fifo, via_tty]
        problems = []
        with Target(("host-python3", HOST_PYTHON, None), os.path.join(TARGETS, "cpu_shares.py"), "ready.json") as t:
            t.wait_ready()
            out, _ = record(remora, ["-p", t.pid, "-d", SHORT_SECONDS, "-o", node, "-f", "collapsed",
                                     "-o", fifo, "-f", "collapsed", "-o", link_null, "-f", "collapsed",
                                     "-o", link_tty, "-f", "collapsed", "-o", "-", "-f", "collapsed",
                                     "-o", link, "-o", raw_link])
            rc, _, err = remora.run(["record", "-p", t.pid, "-d", SHORT_SECONDS, "-o", full, "-f", "collapsed"])
            if rc != 5 or "No space left on device" not in err:
                problems.append("-o to the full device (c 1 7): exit %d, want 5 with ENOSPC named: %s"
                                % (rc, tail(err)))
        got = {"fifo": via_fifo.stop(), "terminal": via_tty.stop(), "stdout": out.encode()}
        for p, was in before.items():
            now = node_kind(p)
            if now != was:
                problems.append("%s was a %s, is now %s" % (p, was, now))
        samples = []
        for what, data in got.items():
            path = os.path.join(d, "read-" + what)
            with open(path, "wb") as f:
                f.write(data)
            try:
                n = total(parse_collapsed(path))
            except Fail as e:
                n, note = 0, str(e)
            else:
                note = "no samples"
            if n == 0:
                problems.append("what the %s carried is not a profile (%d bytes): %s" % (what, len(data), note))
            samples.append("%s %d bytes, %d samples" % (what, len(data), n))
        for lk, tg in ((link, target), (raw_link, raw_target)):
            if not os.path.isfile(tg) or os.path.getsize(tg) == 0:
                problems.append("%s's target holds no profile" % os.path.basename(lk))
        leftovers = sorted(set(os.listdir(d)) - known - {"target.collapsed", "target.remora"}
                           - {"read-" + w for w in got})
        if leftovers:
            problems.append("temporary files left: %s" % ", ".join(leftovers))
        if problems:
            raise Fail("; ".join(problems))
        return ("nodes kept (null, full: exit 5 ENOSPC, fifo, %s), symlinks written through "
                "(collapsed %d bytes, raw %d bytes); %s" % (pts, os.path.getsize(target),
                                                           os.path.getsize(raw_target), "; ".join(samples)))
    finally:
        for dr in drains:
            dr.stop()
        for fd in (master, slave):
            if fd is not None:
                os.close(fd)
        shutil.rmtree(d, ignore_errors=True)


def immutable(path, on):
    """chattr +i / -i on path; False if this file system or machine cannot."""
    if shutil.which("chattr") is None:
        return False
    return subprocess.run(["chattr", "+i" if on else "-i", path], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL).returncode == 0


def readonly_file_prefix(f):
    """A prefix under which file f is read-only: f bound read-only over itself."""
    return ro_mount_prefix(f, 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0"', ': >> "$0"')


def test_outputs_refused(remora):
    """An output remora must not write is refused before sampling, exit 1, one stderr line
    that names the real reason, and what is there is left as it was: a directory (and a
    symlink to one), /proc/version, a file made immutable (chattr +i), a file bound
    read-only over itself. A file of mode 0444 is what the system allows: root may write
    it, so remora replaces it (exit 0, a profile in it); another user is refused."""
    if not os.access(HOST_PYTHON, os.X_OK):
        raise Skip("%s not found" % HOST_PYTHON)
    d = workdir()
    locked = None
    try:
        dirn, link_dir = os.path.join(d, "dir"), os.path.join(d, "link-dir")
        os.mkdir(dirn)
        os.symlink(dirn, link_dir)
        imm, ro, mode = (os.path.join(d, n) for n in ("immutable.collapsed", "bound.collapsed",
                                                          "mode-0444.collapsed"))
        for f in (imm, ro, mode):
            with open(f, "w") as fh:
                fh.write("kept\n")
        os.chmod(mode, 0o444)
        with open("/proc/version") as fh:
            version = fh.read()
        cases = [("directory", [], dirn, "is a directory"),
                 ("symlink to a directory", [], link_dir, "is a directory"),
                 ("/proc/version", [], "/proc/version", "the kernel's")]
        skipped = []
        if immutable(imm, True):
            locked = imm
            cases.append(("immutable file", [], imm, "immutable"))
        else:
            skipped.append("chattr +i failed here")
        prefix = readonly_file_prefix(ro)
        if prefix is not None:
            cases.append(("file bound read-only", prefix, ro, "Read-only file system"))
        else:
            skipped.append("a read-only bind mount failed here")
        root_writes = os.access(mode, os.W_OK)
        if not root_writes:
            cases.append(("mode 0444 (not root)", [], mode, "Permission denied"))
        notes = []
        interp = ("host-python3", HOST_PYTHON, None)
        with Target(interp, os.path.join(TARGETS, "cpu_shares.py"), "ready.json") as t:
            t.wait_ready()
            for what, pre, o, reason in cases:
                listing = sorted(os.listdir(d))
                err = refused_before_sampling(remora, what, ["record", "-p", t.pid, "-d", 10, "-o", o,
                                                             "-f", "collapsed"], pre)
                if reason.lower() not in err.lower():
                    raise Fail("%s: the message does not name the reason (%r): %s" % (what, reason, err.strip()))
                if sorted(os.listdir(d)) != listing or os.listdir(dirn):
                    raise Fail("%s: files were left: %s" % (what, sorted(set(os.listdir(d)) ^ set(listing))
                                                           or os.listdir(dirn)))
                notes.append(err.strip())
            if root_writes:
                record(remora, ["-p", t.pid, "-d", SHORT_SECONDS, "-o", mode, "-f", "collapsed"])
                if total(parse_collapsed(mode)) == 0:
                    raise Fail("mode 0444 as root: the file holds no profile")
                notes.append("mode 0444 as root: replaced by a profile, exit 0")
        for what, p, want in (("directory", dirn, "directory"), ("symlink", link_dir, "symlink")):
            if node_kind(p) != want:
                raise Fail("the %s is now a %s" % (what, node_kind(p)))
        for f in (imm, ro):
            with open(f) as fh:
                if fh.read() != "kept\n":
                    raise Fail("%s was written" % os.path.basename(f))
        with open("/proc/version") as fh:
            if fh.read() != version:
                raise Fail("/proc/version reads differently")
        return " | ".join(notes + ["skipped: " + s for s in skipped])
    finally:
        if locked is not None:
            immutable(locked, False)
        shutil.rmtree(d, ignore_errors=True)


def test_unwritable(remora):
    """An output remora cannot create ends the run before sampling: exit 1, one line."""
    if not os.access(HOST_PYTHON, os.X_OK):
        raise Skip("%s not found" % HOST_PYTHON)
    d = workdir()
    try:
        ro = os.path.join(d, "readonly")
        os.mkdir(ro)
        prefix = readonly_prefix(ro)
        if prefix is None:
            raise Skip("cannot make a read-only directory (unshare --mount + tmpfs failed)")
        ok = os.path.join(d, "fine.collapsed")
        cases = [
            ("read-only directory", prefix, [os.path.join(ro, "p.collapsed")]),
            ("second of two outputs read-only", prefix, [ok, os.path.join(ro, "p.remora")]),
            ("missing directory", [], [os.path.join(d, "no", "such", "dir", "p.json")]),
        ]
        interp = ("host-python3", HOST_PYTHON, None)
        notes = []
        with Target(interp, os.path.join(TARGETS, "cpu_shares.py"), "ready.json") as t:
            t.wait_ready()
            for what, pre, outs in cases:
                args = ["record", "-p", t.pid, "-d", 10]
                for o in outs:
                    args += ["-o", o]
                err = refused_before_sampling(remora, what, args, pre)
                if os.path.exists(ok):
                    raise Fail("%s: %s was created" % (what, os.path.basename(ok)))
                notes.append(err.strip())
        return " | ".join(notes)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_errors(remora):
    """Usage errors exit 1, a missing pid 2, a process that is not Python 4; one line each."""
    cases = [
        (["record"], 1, "no target"),
        (["record", "-p", "1", "--", "true"], 1, "both -p and a command"),
        (["record", "-p", "1", "-r", "fast"], 1, "bad rate"),
        (["record", "-p", "1", "-d", "0"], 1, "zero duration"),
        (["record", "-p", "1", "--mode", "idle"], 1, "bad mode"),
        (["record", "-p", "1", "-o", "out.unknown"], 1, "unknown output extension"),
        (["convert"], 1, "convert without input"),
    ]
    pid = free_pid()
    cases.append((["record", "-p", pid, "-d", 1], 2, "no such pid"))
    sleeper = subprocess.Popen(["sleep", "100"])
    try:
        cases.append((["record", "-p", sleeper.pid, "-d", 1], 4, "`sleep 100`"))
        for args, want, what in cases:
            rc, out, err = remora.run(args)
            if rc != want:
                raise Fail("%s (`remora %s`): exit %d, want %d: %s"
                           % (what, " ".join(map(str, args)), rc, want, tail(err)))
            bad = one_line(err)
            if bad and want != 1:
                raise Fail("%s: %s" % (what, bad))
            if want == 1 and not err.strip():
                raise Fail("%s: nothing on stderr" % what)
    finally:
        sleeper.kill()
        sleeper.wait()
    return "%d cases" % len(cases)


# Every format remora writes, as the README documents them; convert writes all but raw.
FORMATS = ["flamegraph", "svg", "firefox", "speedscope", "collapsed", "table", "pstats", "pprof", "heatmap", "jsonl", "raw"]
FORMAT_LIST = re.compile(r"(?:use one of |add -f \()([a-z, ]+)")


def test_format_lists(remora):
    """A message that asks for a format names every one (record: all nine; convert: all
    but raw), and each name it gives is one record accepts."""
    d = tempfile.mkdtemp(prefix="remora-fmt-")
    missing_in = os.path.join(d, "in.remora")
    cases = [
        (["record", "-p", "1", "-f", "bogus"], FORMATS),
        (["record", "-p", "1", "-o", os.path.join(d, "out.unknown")], FORMATS),
        (["convert", missing_in, "-f", "bogus"], FORMATS[:-1]),
        (["convert", missing_in, "-f", "raw", "-o", os.path.join(d, "x.remora")], FORMATS[:-1]),
        (["convert", missing_in, "-o", os.path.join(d, "out.unknown")], FORMATS[:-1]),
    ]
    try:
        for args, want in cases:
            what = "`remora %s`" % " ".join(args)
            rc, out, err = remora.run(args)
            bad = one_line(err)
            if rc != 1 or bad:
                raise Fail("%s: exit %d, want 1 and one line: %s" % (what, rc, bad or tail(err)))
            m = FORMAT_LIST.search(err)
            if m is None:
                raise Fail("%s: no list of formats in: %s" % (what, err.strip()))
            listed = [n.strip() for n in m.group(1).split(",")]
            if sorted(listed) != sorted(want):
                raise Fail("%s lists %s, want %s" % (what, ", ".join(listed), ", ".join(want)))
        pid = str(free_pid())
        for name in FORMATS:
            # accepted: the run goes on to attach and finds no process (exit 2)
            out_path = os.path.join(d, "p." + name)
            rc, out, err = remora.run(["record", "-p", pid, "-f", name, "-o", out_path])
            if rc != 2:
                raise Fail("`record -f %s`: exit %d, want 2 (no such pid): %s" % (name, rc, tail(err)))
        return "%d messages, %d formats" % (len(cases), len(FORMATS))
    finally:
        shutil.rmtree(d, ignore_errors=True)


# --- 8. --stats -------------------------------------------------------------------------

def test_stats(remora, interp):
    with Target(interp, os.path.join(TARGETS, "cpu_shares.py"), "ready.json") as t:
        t.wait_ready()
        path = os.path.join(t.dir, "stats.collapsed")
        _, err = record(remora, ["-p", t.pid, "-d", SHORT_SECONDS, "--stats", "-o", path])
        summ = summary(err, 1000)
    found = STATS.findall(err)
    if len(found) != 1:
        raise Fail("want one line `stats: rounds=N rounds_asked=A thread_samples=W idle=I "
                   "errors=E partial=P reads=R bytes=B reads_per_round=X cpu_us_per_round=Y`, "
                   "found %d: %s"
                   % (len(found), tail(err)))
    n, e, part, reads, nbytes = (int(v) for v in found[0][:5])
    rps, cpu = float(found[0][5]), float(found[0][6])
    problems = []
    if (n, e, part) != (summ.samples, summ.errors, summ.partial):
        problems.append("rounds/errors/partial %d/%d/%d, the summary says %d/%d/%d"
                        % (n, e, part, summ.samples, summ.errors, summ.partial))
    if n == 0 or reads == 0 or nbytes == 0:
        problems.append("zero samples, reads or bytes")
    elif abs(rps - reads / n) > 0.01:
        problems.append("reads_per_round %.2f but reads/rounds = %.3f" % (rps, reads / n))
    if cpu <= 0:
        problems.append("cpu_us_per_round is %s" % found[0][6])
    if problems:
        raise Fail("; ".join(problems))
    return "rounds=%d reads/round=%.2f bytes/round=%.0f cpu us/round=%.2f" % (
        n, rps, nbytes / n, cpu)


# --- 9. exception mode ------------------------------------------------------------------

EXC_WANT = {"handler": ("KeyError", ("handler_thread", "handler_work")),
            "gen": ("ValueError", ("gen_thread", "gen_body", "gen_work")),
            "plain": (None, ("plain_thread", "plain_body", "plain_work"))}


def exc_stack_problem(s, role, info, file):
    """Why a stack of thread `role` is not what the target said it runs, or None: innermost
    its spinning function, and the frame holding the except block on that block's line."""
    want = EXC_WANT[role][1]
    if s.functions()[-len(want):] != list(want):
        return "%s's stack ends %s, want ...%s" % (role, ";".join(s.functions()[-4:]),
                                                   ";".join(want))
    outer = s.frames[-len(want)]
    if (outer[1], outer[2]) != (file, info["outer_line"]):
        return "%s's %s is at %s:%s, want %s:%d (the except block)" % (
            role, want[0], outer[1], outer[2], file, info["outer_line"])
    return None


def test_exception_mode(remora, interp):
    with Target(interp, os.path.join(TARGETS, "exceptions.py"), "ready.json") as t:
        ready = t.wait_ready()
        t.wait_main_in_read()
        exc_path = os.path.join(t.dir, "exception.collapsed")
        wall_path = os.path.join(t.dir, "wall.collapsed")
        # three spinners take turns with the GIL (those waiting for it are idle) and main
        # reads stdin: --idle keeps every thread's every round, as the shares below need
        _, err = record(remora, ["-p", t.pid, "-d", SHORT_SECONDS, "--mode", "exception",
                                 "--idle", "-o", exc_path])
        summ = summary(err, 1000)
        _, werr = record(remora, ["-p", t.pid, "-d", SHORT_SECONDS, "--idle", "-o", wall_path])
        wsumm = summary(werr, 1000)
        rc, out, derr = remora.run(["dump", "-p", t.pid, "--json"])
        exc_stacks, wall_stacks = parse_collapsed(exc_path), parse_collapsed(wall_path)
    roles = ready["threads"]
    for role, (exc, _) in EXC_WANT.items():
        if roles[role]["exc_info"] != exc or roles[role]["work"] != EXC_WANT[role][1][-1]:
            raise Fail("the target's %s thread saw sys.exc_info() %s in %s, want %s in %s"
                       % (role, roles[role]["exc_info"], roles[role]["work"], exc,
                          EXC_WANT[role][1][-1]))
    who = {info["tid"]: role for role, info in roles.items()}
    who[ready["main"]] = "main"
    problems = []
    # exception mode: only the two threads inside except blocks, always inside them
    stray = collections.Counter()
    for s in exc_stacks:
        role = who.get(s.tid, "thread %d" % s.tid)
        if role not in ("handler", "gen"):
            stray[role] += s.count
            continue
        bad = exc_stack_problem(s, role, roles[role], ready["file"])
        if bad:
            problems.append("exception mode: " + bad)
    if stray:
        problems.append("exception mode has samples of threads not handling an exception: %s"
                        % ", ".join("%s %d" % kv for kv in sorted(stray.items())))
    counts = {role: total(exc_stacks, roles[role]["tid"]) for role in ("handler", "gen")}
    for role, n in counts.items():
        if n < summ.samples * EXC_MIN_ROUNDS / 100:
            problems.append("exception mode: the %s thread is in %d of %d rounds, want %.0f%%"
                            % (role, n, summ.samples, EXC_MIN_ROUNDS))
    # wall mode: every thread, the plain one in its own function
    wall = {role: total(wall_stacks, tid) for tid, role in who.items()}
    for role, n in wall.items():
        if n < wsumm.samples * EXC_MIN_ROUNDS / 100:
            problems.append("wall mode: the %s thread is in %d of %d rounds, want %.0f%%"
                            % (role, n, wsumm.samples, EXC_MIN_ROUNDS))
    for s in wall_stacks:
        role = who.get(s.tid)
        if role in EXC_WANT:
            bad = exc_stack_problem(s, role, roles[role], ready["file"])
            if bad:
                problems.append("wall mode: " + bad)
    # dump: the same verdict per thread
    if rc != 0:
        problems.append("`remora dump --json` exited %d: %s" % (rc, tail(derr)))
    else:
        try:
            got = {th.get("native_id"): th.get("exception") for th in json.loads(out)["threads"]}
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            got = {}
            problems.append("dump --json is not the documented JSON (%s)" % e)
        for tid, role in who.items():
            want = role in ("handler", "gen")
            if got and got.get(tid) is not want:
                problems.append("dump says \"exception\": %s for the %s thread, want %s"
                                % (json.dumps(got.get(tid)), role, json.dumps(want)))
    note = "exception mode %d rounds: handler %d, gen %d, %d errors; wall: %s" % (
        summ.samples, counts["handler"], counts["gen"], summ.errors,
        ", ".join("%s %d" % (r, wall[r]) for r in ("handler", "gen", "plain", "main")))
    if problems:
        raise Fail("; ".join(problems[:6]) + " [" + note + "]")
    return note


# --- the list run.py runs ---------------------------------------------------------------

ANCHOR_INTERPRETERS = ("sid-3.15", "sid-3.15-pie")


def tests(remora):
    """[(name, function, skip reason or None)] for run.py."""
    out = []
    by_name = {i[0]: i for i in INTERPRETERS}

    def each(kind, fn, names=None):
        for interp in INTERPRETERS:
            if names is None or interp[0] in names:
                out.append(("record/%s/%s" % (kind, interp[0]),
                            lambda i=interp: fn(remora, i), interp_missing(interp)))

    each("accuracy", test_accuracy)
    each("torn", test_torn)
    each("gil-mode", test_gil_mode, GIL_INTERPRETERS)
    each("launch", test_launch)
    each("convert", test_convert)
    each("speedscope", test_speedscope)
    each("sigint", lambda r, i: test_stop_signal(r, i, signal.SIGINT), SIGNAL_INTERPRETERS)
    each("sigterm", lambda r, i: test_stop_signal(r, i, signal.SIGTERM), SIGNAL_INTERPRETERS)
    each("target-killed", test_target_killed, SIGNAL_INTERPRETERS)
    each("stats", test_stats, STATS_INTERPRETERS)
    each("exception-mode", test_exception_mode)
    # --frame-anchor (3.15 only): the same judgements with the interpreter's anchor
    anchor = ["--frame-anchor"]
    each("accuracy-anchor", lambda r, i: test_accuracy(r, i, anchor), ANCHOR_INTERPRETERS)
    each("torn-anchor", lambda r, i: test_torn(r, i, anchor), ANCHOR_INTERPRETERS)
    out.append(("record/unwritable-output", lambda: test_unwritable(remora), None))
    out.append(("record/outputs-in-place", lambda: test_outputs_in_place(remora), None))
    out.append(("record/outputs-refused", lambda: test_outputs_refused(remora), None))
    out.append(("record/errors", lambda: test_errors(remora), None))
    out.append(("record/format-lists", lambda: test_format_lists(remora), None))
    assert all(n in by_name for n in GIL_INTERPRETERS + SIGNAL_INTERPRETERS + ANCHOR_INTERPRETERS)
    return out
