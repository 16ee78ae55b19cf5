# Long recordings (issue 33): a running `record` paused, resumed and snapshotted from
# another shell (--control fifo:CTL,ACK, SIGUSR1, SIGUSR2), a profile a period (--every),
# and the jsonl stream read while it is written. The truth is the target's own account of
# when it worked in which function (tests/targets/phases.py, CLOCK_MONOTONIC, the clock of
# a .remora's sample times).
#
# long/control/INTERP: phases.py works in phase_a; remora records it with --control. Once
#   a "ping" is answered (sampling runs), "pause" is sent; once answered, the target is
#   told to work 300 ms in inside_pause (by its own clock) and to say when it is done;
#   then "resume", then 300 ms in phase_b, "snapshot", SIGUSR1 (a second snapshot),
#   SIGUSR2 twice (paused and resumed), "stop". No sample may be of inside_pause, none
#   may be timed between the pause's answer and the resume's sending, phase_b must be
#   sampled, the snapshots must load (collapsed, .remora, jsonl "snapshot" records) and
#   hold no more of any stack than the final profile, the summary must count 2 pauses.
# long/every/INTERP: phases.py alternates phase_a and phase_b every 0.7 s by itself;
#   `record --every 1 -d 5` to p-%n.collapsed, r-%n.remora and s.jsonl: five periods (no
#   empty sixth at the end), each .remora starting where the last ended, 1 s each, every sample
#   inside its period and in a phase the target was in around its time, the periods'
#   rounds adding up to the summary's, each collapsed file the same stacks as its
#   .remora and as its jsonl period record; the jsonl file is read line by line while
#   remora runs, and a period's record must be there before remora exits.

import errno
import json
import os
import shutil
import signal
import subprocess
import time

from harness import (INTERPRETERS, TARGETS, Fail, Recording, Target, interp_command, interp_missing,
                     summary, tail, target_says, workdir)
from formats import (by_thread, go_raw_samples, jsonl_records, next_times, parse_collapsed, pprof_stacks,
                     read_jsonl, read_pprof, read_remora, sample_functions)

ORDER = 210           # where run.py runs these tests among the modules' (ascending)

SCRIPT = os.path.join(TARGETS, "phases.py")
LONG_INTERPRETERS = ("pyenv-3.9.18", "pyenv-3.12.1", "sid-3.15")
ACK_TIMEOUT = 10.0
SLACK_NS = 2000000                  # around a phase switch (the target's clock is read
                                    # between two 200 us calls)
PAUSED = "paused"


class Control:
    """The two FIFOs of --control fifo:CTL,ACK."""

    def __init__(self, d):
        self.ctl, self.ack = os.path.join(d, "ctl"), os.path.join(d, "ack")
        os.mkfifo(self.ctl)
        os.mkfifo(self.ack)
        self.ackfd = os.open(self.ack, os.O_RDWR | os.O_NONBLOCK)
        self.buf = b""

    def send(self, cmd, want="ack"):
        """Sends a command; returns the time (CLOCK_MONOTONIC ns) its answer was read."""
        deadline = time.monotonic() + ACK_TIMEOUT
        while True:
            try:
                fd = os.open(self.ctl, os.O_WRONLY | os.O_NONBLOCK)
                break
            except OSError as e:
                # ENXIO: remora has not opened it yet (it does before sampling begins)
                if e.errno != errno.ENXIO or time.monotonic() > deadline:
                    raise Fail("cannot open the control FIFO: %s" % e)
                time.sleep(0.01)    # polling for remora's open, not waiting for a time
        try:
            os.write(fd, (cmd + "\n").encode())
        finally:
            os.close(fd)
        deadline = time.monotonic() + ACK_TIMEOUT
        while b"\n" not in self.buf:
            if time.monotonic() > deadline:
                raise Fail("no answer to %r on the ack FIFO in %.0fs" % (cmd, ACK_TIMEOUT))
            import select
            if select.select([self.ackfd], [], [], 0.1)[0]:
                self.buf += os.read(self.ackfd, 256)
        line, self.buf = self.buf.split(b"\n", 1)
        if line.decode() != want:
            raise Fail("%r answered %r, want %r" % (cmd, line.decode(), want))
        return time.monotonic_ns()

    def close(self):
        os.close(self.ackfd)


def jsonl_profiles(records):
    """{(kind, n): (record, {tid: Counter(frames)})} of a jsonl stream, frames normalised."""
    import collections
    out = {}
    for r, _, stacks in jsonl_records(records):
        prof = {}
        for tid, c in stacks.items():
            for frames, n in c.items():
                prof.setdefault(tid, collections.Counter())[tuple(norm(f) for f in frames)] += n
        out[(r["type"], r["n"])] = (r, prof)
    return out


def norm(frame):
    """A frame as every format can say it: a marker (<GC>, <moving>) has no file or line."""
    fn, file, line = frame
    return (fn, file, line) if file else (fn, None, None)


def collapsed_profile(path):
    return by_thread(parse_collapsed(path), norm)


def remora_profile(r):
    """{tid: Counter(frames tuple)} of a parsed .remora."""
    import collections
    out = {}
    for _, thread, node, _ in r.samples:
        frames, n = [], node
        while n in r.nodes:
            parent, frame = r.nodes[n]
            frames.append(norm(r.frames[frame]))
            n = parent
        tid = r.threads[thread][0]
        out.setdefault(tid, collections.Counter())[tuple(reversed(frames))] += 1
    return out


PHASES = ("phase_a", "phase_b", "inside_pause")


def phase_in(functions):
    """The phase function of a stack (its functions outermost first), or None."""
    for fn in reversed(functions):
        if fn in PHASES:
            return fn
    return None


def leaves(prof):
    """Counter of the phase function each sample is in."""
    import collections
    c = collections.Counter()
    for stacks in prof.values():
        for frames, n in stacks.items():
            ph = phase_in([f[0] for f in frames])
            if ph:
                c[ph] += n
    return c


def test_control(remora, interp):
    d = workdir()
    ctl = Control(d)
    rec = None
    try:
        with Target(interp, SCRIPT, "ready.json") as t:
            t.wait_ready()
            paths = {k: os.path.join(d, n) for k, n in
                     (("col", "p.collapsed"), ("raw", "r.remora"), ("jl", "s.jsonl"), ("pb", "q.pb.gz"))}
            rec = Recording(remora, ["-p", t.pid, "-r", "500", "-d", "60", "--idle",
                                     "--control", "fifo:%s,%s" % (ctl.ctl, ctl.ack),
                                     "-o", paths["col"], "-o", paths["raw"], "-o", paths["jl"],
                                     "-o", paths["pb"]])
            ctl.send("ping")
            paused_at = ctl.send("pause")
            inside = target_says(t, "inside 300", 1)
            resumed_at = time.monotonic_ns()
            ctl.send("resume")
            target_says(t, "b 300", 2)
            ctl.send("snapshot")
            rec.proc.send_signal(signal.SIGUSR1)
            rec.proc.send_signal(signal.SIGUSR2)
            ctl.send("ping")        # the hook ran after the signal: paused
            rec.proc.send_signal(signal.SIGUSR2)
            ctl.send("ping")
            ctl.send("stop")
            rc, _, err = rec.finish()
            if rc != 0:
                raise Fail("record exited %d: %s" % (rc, tail(err)))
            problems, tools = [], []
            r = read_remora(paths["raw"])
            final = collapsed_profile(paths["col"])
            got = leaves(final)
            if got["inside_pause"]:
                problems.append("%d samples of inside_pause, run only while paused" % got["inside_pause"])
            if got["phase_b"] < 20:
                problems.append("only %d samples of phase_b after the resume" % got["phase_b"])
            during = [s for s in r.samples if paused_at < s[0] < resumed_at]
            if during:
                problems.append("%d samples timed while paused (first +%.1f ms after the pause's answer)"
                                % (len(during), (during[0][0] - paused_at) / 1e6))
            if not inside["start"] > paused_at:
                problems.append("the target entered inside_pause before the pause was answered")
            m = __import__("re").search(r"paused (\d+) times for ([\d.]+) s", err)
            if m is None or int(m.group(1)) != 2:
                problems.append("the summary does not count 2 pauses: %s" % tail(err))
            # the snapshots: load, and hold no more of a stack than the whole run
            for k in (1, 2):
                col = os.path.join(d, "p.snapshot-%d.collapsed" % k)
                raw = os.path.join(d, "r.snapshot-%d.remora" % k)
                if not (os.path.exists(col) and os.path.exists(raw)):
                    problems.append("snapshot %d: no %s" % (k, col if not os.path.exists(col) else raw))
                    continue
                snap = collapsed_profile(col)
                if remora_profile(read_remora(raw)) != snap:
                    problems.append("snapshot %d: the .remora and the collapsed file differ" % k)
                for tid, stacks in snap.items():
                    for frames, n in stacks.items():
                        if n > final.get(tid, {}).get(frames, 0):
                            problems.append("snapshot %d holds %d of a stack the final profile has %d of"
                                            % (k, n, final.get(tid, {}).get(frames, 0)))
                            break
                if leaves(snap)["phase_b"] == 0:
                    problems.append("snapshot %d, taken after phase_b, has none of it" % k)
                # pprof: our decoder, and Go's own tool where there is one
                pb = os.path.join(d, "q.snapshot-%d.pb.gz" % k)
                got_pb, _ = pprof_stacks(read_pprof(pb))
                n_pb = sum(sum(c.values()) for c in got_pb.values())
                n_col = sum(sum(c.values()) for c in snap.values())
                if n_pb != n_col:
                    problems.append("snapshot %d: the pprof file holds %d samples, the collapsed %d" % (k, n_pb, n_col))
                if shutil.which("go") is not None:
                    n_go, _ = go_raw_samples(pb, d)
                    tools.append("go tool pprof read %d" % n_go)
                    if n_go != n_col:
                        problems.append("snapshot %d: go tool pprof counts %d samples, want %d" % (k, n_go, n_col))
            jl = jsonl_profiles(read_jsonl(paths["jl"]))
            if ("snapshot", 1) not in jl or ("snapshot", 2) not in jl or ("period", 1) not in jl:
                problems.append("the jsonl stream lacks a snapshot or the period: %s" % sorted(jl))
            elif jl[("period", 1)][1] != final:
                problems.append("the jsonl period and the collapsed file differ")
            if problems:
                raise Fail("; ".join(problems[:5]))
            return ("paused %.0f ms (inside_pause %.0f ms by the target's clock): 0 samples in it; "
                    "phase_b %d samples after; 2 snapshots loaded (%s); %s" % (
                        (resumed_at - paused_at) / 1e6, (inside["end"] - inside["start"]) / 1e6,
                        got["phase_b"], ", ".join(tools) or "no go: pprof by our decoder only",
                        summary(err)))
    finally:
        if rec is not None:
            rec.close()
        ctl.close()
        subprocess.run(["rm", "-rf", d])


def phase_at(truth, t):
    """The phases the target was in within SLACK_NS of t."""
    out, cur = set(), None
    for at, ph in truth:
        if at <= t - SLACK_NS:
            cur = ph
            continue
        if at > t + SLACK_NS:
            break
        out.add(ph)
    if cur is not None:
        out.add(cur)
    return out


def test_every(remora, interp):
    d = workdir()
    try:
        with Target(interp, SCRIPT, "ready.json", args=("alternate", "0.7")) as t:
            t.wait_ready()
            jl_path = os.path.join(d, "s.jsonl")
            rec = Recording(remora, ["-p", t.pid, "-r", "200", "-d", "5", "--every", "1",
                                     "-o", os.path.join(d, "p-%n.collapsed"),
                                     "-o", os.path.join(d, "r-%n.remora"), "-o", jl_path])
            # the stream read while it is written: complete lines parsed as they come
            seen_live = 0
            try:
                while rec.proc.poll() is None:
                    if os.path.exists(jl_path):
                        seen_live = sum(1 for r in read_jsonl(jl_path) if r.get("type") == "period")
                    rec._read(0.05)
                rc, _, err = rec.finish()
            finally:
                rec.close()
            if rc != 0:
                raise Fail("record exited %d: %s" % (rc, tail(err)))
            t.finish()
            with open(os.path.join(t.dir, "truth.json")) as f:
                truth = json.load(f)
        summ = summary(err)
        problems = []
        files = sorted(f for f in os.listdir(d) if f.startswith("r-"))
        if files != ["r-%d.remora" % k for k in range(1, 6)]:
            raise Fail("want r-1.remora .. r-5.remora, got %s" % files)
        jl = jsonl_profiles(read_jsonl(jl_path))
        rounds, checked, start, ends = 0, 0, None, []
        for k in range(1, 6):
            r = read_remora(os.path.join(d, "r-%d.remora" % k))
            m = r.meta
            rounds += m["rounds"]
            want = 1e9
            if abs(m["duration_ns"] - want) > 20e6:
                problems.append("period %d lasts %.3f s, want %.1f" % (k, m["duration_ns"] / 1e9, want / 1e9))
            if start is not None and abs(m["start_mono_ns"] - start) > 1e6:
                problems.append("period %d starts %.3f ms from where %d ended"
                                % (k, (m["start_mono_ns"] - start) / 1e6, k - 1))
            start = m["start_mono_ns"] + m["duration_ns"]
            ends.append(start)
            nxt = next_times(r)
            for i, (at, thread, node, _) in enumerate(r.samples):
                if not m["start_mono_ns"] <= at <= start:
                    problems.append("period %d: a sample at %+.3f ms of its start"
                                    % (k, (at - m["start_mono_ns"]) / 1e6))
                    break
                ph = phase_in(sample_functions(r, node))
                if ph is None:
                    continue
                checked += 1
                window = phase_at(truth, at) | phase_at(truth, nxt[i])
                if ph not in window and not any(at <= s <= nxt[i] for s, _ in truth):
                    problems.append("period %d: %s sampled at +%.1f ms, the target was in %s"
                                    % (k, ph, (at - m["start_mono_ns"]) / 1e6, sorted(window)))
            col = collapsed_profile(os.path.join(d, "p-%d.collapsed" % k))
            if remora_profile(r) != col:
                problems.append("period %d: the collapsed file and the .remora differ" % k)
            if ("period", k) not in jl:
                problems.append("the jsonl stream has no period %d" % k)
            elif jl[("period", k)][1] != col:
                problems.append("period %d: the jsonl record and the collapsed file differ" % k)
        if rounds != summ.samples:
            problems.append("the periods' rounds add up to %d, the summary says %d" % (rounds, summ.samples))
        if checked < 300:
            problems.append("only %d samples in a phase" % checked)
        if seen_live < 1:
            problems.append("no period record in the jsonl file before remora exited")
        if problems:
            raise Fail("; ".join(problems[:5]))
        return ("5 periods, %d rounds in all (summary %d), %d samples in a phase each where the "
                "target was; %d period records read while recording" % (rounds, summ.samples, checked, seen_live))
    finally:
        subprocess.run(["rm", "-rf", d])


def test_target_exits(remora, interp):
    """--every with a launched command that exits 2.5 s in: three periods written, the last
    (cut short by the exit) too, their rounds adding up to the summary's; the command's
    exit code comes back."""
    d = workdir()
    try:
        code = ("import time\nend = time.monotonic() + 2.5\n"
                "def work():\n    while time.monotonic() < end: pass\nwork()\nraise SystemExit(3)\n")
        rc, _, err = remora.run(["record", "--every", "1", "-r", "200",
                                 "-o", os.path.join(d, "r-%n.remora"), "-o", os.path.join(d, "s.jsonl"),
                                 "--"] + interp_command(interp, ["-c", code]))
        if rc != 3:
            raise Fail("record exited %d, want the command's 3: %s" % (rc, tail(err)))
        files = sorted(f for f in os.listdir(d) if f.startswith("r-"))
        if files != ["r-1.remora", "r-2.remora", "r-3.remora"]:
            raise Fail("want r-1.remora .. r-3.remora, got %s" % files)
        rounds = [read_remora(os.path.join(d, f)).meta["rounds"] for f in files]
        summ = summary(err)
        records = read_jsonl(os.path.join(d, "s.jsonl"))
        if sum(rounds) != summ.samples:
            raise Fail("the periods' rounds %s add up to %d, the summary says %d" % (rounds, sum(rounds), summ.samples))
        if rounds[2] == 0 or records[-1].get("reason") != "target exited":
            raise Fail("the last period (%d rounds) or the stream's end (%r) does not say the target exited"
                       % (rounds[2], records[-1]))
        return "3 periods of %s rounds, the last cut short by the exit; exit code 3" % rounds
    finally:
        subprocess.run(["rm", "-rf", d])


def tests(remora):
    out = []
    for i in INTERPRETERS:
        if i[0] not in LONG_INTERPRETERS:
            continue
        out.append(("long/control/" + i[0], lambda i=i: test_control(remora, i), interp_missing(i)))
        out.append(("long/every/" + i[0], lambda i=i: test_every(remora, i), interp_missing(i)))
        if i[0] == "pyenv-3.12.1":
            out.append(("long/target-exits", lambda i=i: test_target_exits(remora, i), interp_missing(i)))
    return out
