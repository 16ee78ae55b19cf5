"""The cost of `record --mode memory` to its target (issue 49; docs/measured.md, "Memory
mode"): measures, never asserts.

    python3 tests/bench/mem_cost.py [--python /usr/bin/python3.11] [--pairs 12] [--seconds 3]
                                    [--loads alloc,leak,numpy,fault] [--toggle SECONDS] REMORA [REMORA ...]

Each REMORA is a remora binary, at its default fault period, or BINARY@N: the same at
--fault-period N (an older build: the change between them). Each load is a loop that
allocates, run SECONDS alone, then SECONDS under `REMORA record --mode memory --stats` for
each binary (their order turned each pair), then alone again, PAIRS times in turn:

  alloc   50,000 small dicts a round, freed: pymalloc's emptied arenas go back to the
          system and are faulted in again (~250,000-360,000 faults a second on 3.11)
  leak    tests/targets/real/mem_leak.py's work(): a service whose response cache never
          evicts, and four other sites that keep what they make; its stores emptied every
          4,000 requests (~140 MB) so that a run stays bounded
  numpy   tests/targets/real/mem_numpy.py's work(): numpy arrays kept at five sites; its
          lists emptied every 100 steps (~150 MB)
  fault   the worst case: each round 5,000 small dicts, then a 4 MB anonymous mapping
          written a byte a page and unmapped (1,024 faults a round, ~510,000 a second)

The work rate is the loop's units per CPU second of the target, by its own clock (this
machine's wall rates move with the load of others; the BPF program runs in the target's
context and is counted in it). Each recorded run is read against the mean of the runs
alone just before and after it (load that changes slowly cancels): its slowdown is
1 - recorded / that mean; printed: the median slowdown of the pairs with a 95% bootstrap
interval, and the mean with its own. The BPF run time per sample is --stats' tick_ns /
tick_runs, with bpf(BPF_ENABLE_STATS) held open for the run (the kernel counts run time
only while one is). bench.py's memory section calls run() and table(). Needs root."""

import argparse
import contextlib
import ctypes
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REAL = os.path.normpath(os.path.join(HERE, "..", "targets", "real"))

# Each load: argv[1] the seconds, argv[2] tests/targets/real; prints units per CPU second
# and the page faults per CPU second.
HEAD = r"""
import resource, sys, time
seconds = float(sys.argv[1])
sys.path.insert(0, sys.argv[2])
"""
TAIL = r"""
n, t0, c0 = 0, time.monotonic(), time.process_time()
f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
while time.monotonic() - t0 < seconds:
    n += step()
c = time.process_time() - c0
print(n / c, (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0) / c, c)
"""
LOADS = {
    "alloc": r"""
def step():
    keep = [{"i": i} for i in range(50000)]
    del keep
    return 1
""",
    "leak": r"""
import mem_leak as m
def step():
    m.work(200)
    if m.served % 4000 == 0:
        m.CACHE.clear()
        del m.SESSIONS[:], m.USERS[:], m.ACCESS_LOG[:], m.INDEX[:]
    return 200
""",
    "numpy": r"""
import mem_numpy as m
done = 0
def step():
    global done
    m.work(5)
    done += 5
    if done % 100 == 0:
        del m.FRAMES[:], m.SCALED[:], m.RAMPS[:], m.MASKS[:], m.IDS[:]
    return 5
""",
    "fault": r"""
import mmap
MB4 = 4 << 20
def step():
    keep = [{"i": i} for i in range(5000)]
    m = mmap.mmap(-1, MB4)
    for off in range(0, MB4, 4096):
        m[off] = 1
    m.close()
    del keep
    return 1
""",
    # for --toggle with other flags (--native): Python calls 30 deep, no allocation to speak of
    "calls": r"""
def down(d, x):
    return x * 3 % 1000003 if d == 0 else down(d - 1, x + d)
def step():
    for i in range(200):
        down(30, i)
    return 200
""",
}
UNITS = {"alloc": "rounds", "leak": "requests", "numpy": "steps", "fault": "rounds", "calls": "calls"}
TICK = re.compile(r"tick_runs=(\d+) tick_ns=(\d+)")
SAMPLE = re.compile(r"samples of (\d+) KiB")
SYS_BPF = {"x86_64": 321, "aarch64": 280}.get(os.uname().machine)
BPF_ENABLE_STATS = 32


def enable_bpf_stats():
    """An fd that keeps the kernel counting BPF run time while open, or None."""
    if SYS_BPF is None:
        return None
    libc = ctypes.CDLL(None, use_errno=True)
    attr = (ctypes.c_uint32 * 4)(0, 0, 0, 0)      # enable_stats.type = BPF_STATS_RUN_TIME
    fd = libc.syscall(SYS_BPF, BPF_ENABLE_STATS, ctypes.byref(attr), ctypes.sizeof(attr))
    return fd if fd >= 0 else None


def start(python, loop, seconds, remora=None, out=None):
    """One run of the loop begun, alone or under REMORA record --mode memory."""
    cmd = [python, loop, str(seconds), REAL]
    if remora is not None:
        binary, _, period = remora.partition("@")
        cmd = [binary, "record", "--mode", "memory", "--stats", "-o", out] + (
            ["--fault-period", period] if period else []) + ["--"] + cmd
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(p, what):
    """(units per CPU second, faults per CPU second, tick_runs, tick_ns, CPU seconds of the
    loop) of a run begun."""
    out, err = p.communicate()
    if p.returncode != 0:
        sys.exit("%s exited %d: %s" % (what, p.returncode, err.strip()[-300:]))
    m = TICK.search(err)
    rate, faults, cpu = (float(x) for x in out.split())
    kib = SAMPLE.search(err)
    return (rate, faults) + ((int(m.group(1)), int(m.group(2))) if m else (0, 0)) + (
        cpu, int(kib.group(1)) if kib else 0)


def one(python, loop, seconds, remora=None, out=None):
    return finish(start(python, loop, seconds, remora, out), remora or python)


def boot(xs, stat, rounds=4000):
    """stat(xs) and a 95% bootstrap interval for it (seeded: the same data, the same one)."""
    rng = random.Random(49)
    v = sorted(stat(rng.choices(xs, k=len(xs))) for _ in range(rounds))
    return stat(xs), v[int(rounds * 0.025)], v[int(rounds * 0.975) - 1]


def write_loop(d, load):
    """LOAD's loop as a script in d: its path (memcost_LOAD.py: numpy.py would shadow numpy)."""
    loop = os.path.join(d, "memcost_%s.py" % load)
    with open(loop, "w") as f:
        f.write(HEAD + LOADS[load] + TAIL)
    return loop


@contextlib.contextmanager
def measuring(log):
    """A run's set-up: the kernel counting BPF run time while it lasts (said when refused) and
    a scratch directory for the loops and recordings, yielded, removed afterwards."""
    stats_fd = enable_bpf_stats()
    if stats_fd is None:
        log("(no BPF run-time stats: bpf(BPF_ENABLE_STATS) refused)")
    d = tempfile.mkdtemp(prefix="remora-memcost-")
    try:
        yield d
    finally:
        if stats_fd is not None:
            os.close(stats_fd)
        shutil.rmtree(d, ignore_errors=True)


def run_together(remoras, loads, python, pairs, seconds, log=print):
    """As run(), but each pair's two runs at once, side by side (the machine's load, which
    moves from second to second, weighs on both alike): one alone, one recorded by the
    pair's REMORA (the binaries in turn)."""
    res = {}
    with measuring(log) as d:
        for load in loads:
            loop = write_loop(d, load)
            r = res[load] = {"alone": [], "faults": [], **{x: [] for x in remoras}}
            fl = []
            for k in range(pairs * len(remoras)):
                x = remoras[k % len(remoras)]
                pa = start(python, loop, seconds)
                pr = start(python, loop, seconds, x, os.path.join(d, "x.collapsed"))
                a, g = finish(pa, python), finish(pr, x)
                r["alone"].append(a[0])
                fl.append(a[1])
                r[x].append((g[0], 100.0 * (1 - g[0] / a[0]), g[2], g[3], g[4], g[5]))
                log("%s pair %d: alone %.1f, recorded %.1f (%s)" % (load, k + 1, a[0], g[0], x))
            r["faults"] = statistics.median(fl)
    return res


def run(remoras, loads, python, pairs, seconds, log=print):
    """{load: {"alone": [rates], "faults": faults/s alone, remora: [(rate, paired slowdown %,
    tick_runs, tick_ns, the loop's CPU seconds, KiB a sample)]}}: each load's PAIRS pairs, alone and
    recorded in turn."""
    res = {}
    with measuring(log) as d:
        for load in loads:
            loop = write_loop(d, load)
            alone = [one(python, loop, seconds)]
            r = res[load] = {"alone": [], "faults": [], **{x: [] for x in remoras}}
            for k in range(pairs):
                order = list(remoras) if k % 2 == 0 else list(reversed(remoras))
                got = {x: one(python, loop, seconds, x, os.path.join(d, "x.collapsed")) for x in order}
                alone.append(one(python, loop, seconds))
                base = (alone[-2][0] + alone[-1][0]) / 2
                for x in remoras:
                    g = got[x]
                    r[x].append((g[0], 100.0 * (1 - g[0] / base), g[2], g[3], g[4], g[5]))
                log("%s pair %d: alone %.1f/%.1f, recorded %s" % (load, k + 1, alone[-2][0], alone[-1][0],
                    ", ".join("%.1f" % got[x][0] for x in remoras)))
            r["alone"] = [a[0] for a in alone]
            r["faults"] = statistics.median(a[1] for a in alone)
    return res


# --toggle: the loop notes each step (its start and end by the monotonic clock, its CPU
# time, its units) and writes them at the end to argv[3], one "t0 t1 cpu units" line a
# step (a pipe would fill and stop it).
STEPS_TAIL = r"""
out, t0 = [], time.monotonic()
while time.monotonic() - t0 < seconds:
    a, c = time.monotonic(), time.process_time()
    n = step()
    out.append("%.6f %.6f %.6f %d" % (a, time.monotonic(), time.process_time() - c, n))
with open(sys.argv[3], "w") as f:
    f.write("\n".join(out))
"""


def run_toggled(remora, loads, python, seconds, window, log=print, flags=("--mode", "memory")):
    """The loop of each load run once for SECONDS under one `REMORA record --mode memory
    --control`, paused and resumed every WINDOW seconds (pause disables the fault events:
    nothing of remora is left in the target), the loop pinned to one CPU and remora to the
    other. Each recorded window is read against the paused one after it, by the steps the
    loop took wholly inside each (the machine's speed, which moves from second to second
    here, is much the same within a second): {load: [(recorded rate, paused rate, slowdown
    %)]}, rates in units per CPU second of the loop."""
    res = {}
    binary, _, period = remora.partition("@")
    with measuring(log) as d:
        for load in loads:
            loop = os.path.join(d, "memtoggle_%s.py" % load)
            with open(loop, "w") as f:
                f.write(HEAD + LOADS[load] + STEPS_TAIL)
            ctl, ack = os.path.join(d, "ctl"), os.path.join(d, "ack")
            for fifo in (ctl, ack):
                if os.path.exists(fifo):
                    os.unlink(fifo)
                os.mkfifo(fifo, 0o600)
            pin = (lambda cpu: ["taskset", "-c", cpu]) if (os.cpu_count() or 1) >= 2 else (lambda cpu: [])
            cmd = pin("0") + [binary, "record"] + list(flags) + ["-o",
                              os.path.join(d, "t.collapsed"), "--control", "fifo:%s,%s" % (ctl, ack)] + (
                ["--fault-period", period] if period else []) + [
                "--"] + pin("1") + [python, loop, str(seconds), REAL, os.path.join(d, "steps")]
            p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            cw = os.open(ctl, os.O_WRONLY)
            ar = os.open(ack, os.O_RDONLY)
            marks, on = [(time.monotonic(), True)], True
            try:
                while p.poll() is None:
                    time.sleep(window)
                    try:
                        os.write(cw, b"resume\n" if not on else b"pause\n")
                    except BrokenPipeError:
                        break       # remora ended with the loop
                    if not os.read(ar, 256):
                        break
                    on = not on
                    marks.append((time.monotonic(), on))
            finally:
                os.close(cw)
                os.close(ar)
            _, err = p.communicate()
            with open(os.path.join(d, "steps")) as f:
                steps = [tuple(float(x) for x in line.split()) for line in f if line.strip()]
            margin = 0.02
            rates = []
            for (a, state), (b, _) in zip(marks, marks[1:]):
                if a < marks[0][0] + 1.0:
                    continue        # the first second: the loop and its imports warm up
                inside = [st for st in steps if st[0] >= a + margin and st[1] <= b - margin]
                cpu = sum(st[2] for st in inside)
                if cpu > 0:
                    rates.append((state, sum(st[3] for st in inside) / cpu))
            pairs = [(x[1], y[1], 100.0 * (1 - x[1] / y[1])) for x, y in zip(rates, rates[1:])
                     if x[0] and not y[0]]
            res[load] = pairs
            said = [ln for ln in err.splitlines() if "rounds taken" in ln or "times for" in ln]
            log("%s: %d windows, %d pairs (recorded then paused); %s" % (
                load, len(rates), len(pairs), " | ".join(said)))
    return res


def toggled_table(res, remora, window):
    """The markdown table of run_toggled()'s results."""
    print("| load | remora (period) | pairs of %.1f s windows | rate paused (per CPU s) | recorded | "
          "slowdown, median of pairs [95%% CI] | mean [95%% CI] |" % window)
    print("|---|---|---|---|---|---|---|")
    for load, pairs in res.items():
        if not pairs:
            print("| %s | %s | 0 | | | | |" % (load, remora))
            continue
        sl = [p[2] for p in pairs]
        print("| %s | %s | %d | %.1f %s | %.1f | %.1f%% [%.1f, %.1f] | %.1f%% [%.1f, %.1f] |"
              % (load, remora, len(pairs), statistics.median(p[1] for p in pairs), UNITS[load],
                 statistics.median(p[0] for p in pairs), *boot(sl, statistics.median),
                 *boot(sl, statistics.mean)))


def table(res, remoras, names=None):
    """The markdown table of run()'s results: a row per load and binary. The walker's share:
    its run time over the loop's CPU time (an upper bound: the run time counts the ticks
    before the loop began too), the part of the slowdown measured exactly."""
    names = names or {x: x for x in remoras}
    print("| load | faults/s alone | remora (period) | rate alone (per CPU s) | recorded | slowdown, median "
          "of pairs [95% CI] | mean [95% CI] | BPF ns a sample | samples/s | walker, of the "
          "target's CPU |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for load, r in res.items():
        for x in remoras:
            sl = [p[1] for p in r[x]]
            med = boot(sl, statistics.median)
            mean = boot(sl, statistics.mean)
            per = [p[3] / p[2] for p in r[x] if p[2] > 0]
            share = statistics.median(100.0 * p[3] / (p[4] * 1e9) for p in r[x])
            sps = statistics.median(p[2] / p[4] for p in r[x])
            period = "%s (%d)" % (names[x], max(p[5] for p in r[x]) * 1024 // os.sysconf("SC_PAGE_SIZE"))
            print("| %s | %.0f | %s | %.1f %s | %.1f | %.1f%% [%.1f, %.1f] | %.1f%% [%.1f, %.1f] | "
                  "%s | %.0f | %.2f%% |"
                  % (load, r["faults"], period, statistics.median(r["alone"]), UNITS[load],
                     statistics.median(p[0] for p in r[x]), *med, *mean,
                     "%.0f" % statistics.median(per) if per else "?", sps, share))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("remoras", nargs="+")
    ap.add_argument("--python", default="/usr/bin/python3.11")
    ap.add_argument("--pairs", type=int, default=12)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--loads", default="alloc,leak,numpy,fault")
    ap.add_argument("--together", action="store_true",
                    help="each pair's runs at once, side by side (run_together)")
    ap.add_argument("--toggle", type=float, default=0,
                    help="one run a load, remora paused and resumed every TOGGLE seconds "
                         "(run_toggled; --seconds is the run's length)")
    ap.add_argument("--flags", default="--mode memory",
                    help="with --toggle: record's flags in place of --mode memory (e.g. "
                         "'--native', with --loads calls)")
    a = ap.parse_args()
    print("load average: %.2f %.2f %.2f" % os.getloadavg())
    if a.toggle > 0:
        for x in a.remoras:
            res = run_toggled(x, a.loads.split(","), a.python, a.seconds, a.toggle,
                              flags=a.flags.split())
            print("load average: %.2f %.2f %.2f" % os.getloadavg())
            toggled_table(res, x, a.toggle)
        return
    res = (run_together if a.together else run)(a.remoras, a.loads.split(","), a.python, a.pairs, a.seconds)
    print("load average: %.2f %.2f %.2f" % os.getloadavg())
    table(res, a.remoras)


if __name__ == "__main__":
    main()
