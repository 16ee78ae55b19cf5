"""remora's benchmarks: measures, never asserts. Prints a table of figures.

First the floor under all of them: what one process_vm_readv costs here, per call, per
range and per page (tests/bench/vmread.c).

    python3 tests/bench/bench.py [--remora ./remora] [--vmread build/vmread] [--quick]
                                 [--only NAME] [--sections floor,rate,slowdown,short,stitch,blocking,native,idle,modes,tachyon,memory,fidelity,async,real]
                                 [--slowdown-seconds S]

remora records in its default mode, as users run it (idle threads left out, the kernel
engine where it loads), but where a table needs every thread's sample (--idle: memory).
For each interpreter found (as tests/functional/run.py finds them): targets busy at
depth 1, 50, 100 and 300 with 1 and 8 threads (3.15 also with --frame-anchor), sampled as fast as remora can (asked for
1 MHz): achieved samples/s, CPU us per sample, reads per sample. The target's own
slowdown at 1 kHz and 10 kHz (depth 50, one thread): 50 ms windows of one run in which
one remora records (continued) against windows in which it is stopped (SIGSTOP), with a
control in which no remora runs. How the samples of a loop calling functions shorter
than a read are shared out, against the target's own timing. How many samples of a
large frame calling two empty functions in turn name the other call's line (stitched).
The default mode beside --idle, on each engine, on 3.9.18, 3.12.1 and sid 3.15: one busy
thread as fast as remora can, and 100 threads parked 20 deep + 1 busy at 1 kHz for 5 s
(rounds reached, CPU and the BPF programs' time per round, with kernel.bpf_stats_enabled
set for the run and restored after). The kernel engine's BPF run time in each mode
(--sections modes: wall, cpu, gil, exception on busy.py at depth 50 and 1 kHz): the
walker's per tick, and the switch program's per switch-out walk (issue 48). Tachyon
(python3.15 -m profiling.sampling, in the chroot) against the same 3.15 target, each
profiler by default: CPU per sample, remora / Tachyon. A 10-million-sample recording of a deep-stack target:
remora's peak resident memory; memory mode's cost (issue 49, mem_cost.py): the target's
own rate under `record --mode memory` at the default fault period, on allocating programs
and a loop that only faults, with the BPF walker's run time per sample. Fidelity (only when asked: --sections fidelity): each work
function's share of tests/targets/work_mix.py on 3.15 by remora, remora --blocking and
Tachyon, against the target's own clock over the same window. --async (--sections async):
tests/targets/async_deep.py (4 worker tasks awaiting coroutines 50 deep, 10 waiting tasks)
at 1 kHz and as fast as remora can, without --async, with --async and with --async-mode all:
CPU us per sample, reads per sample, task-list reads and their cost. Real programs
(--sections real; tests/targets/real/: Django, docutils, aiohttp, numpy, a thread pool on
Debian's 3.11 and the chroot's 3.13-3.15, each where its package runs), as
tests/functional/real_tests.py records them: the default engine, two --blocking
recordings (the reference and the noise floor) and --engine user, each at 1 kHz with
--idle: partial share, leaf TV and largest inclusive-share error against the reference,
each with its floor (the second reference against the first), samples.
"""
import argparse
import json
import math
import os
import random
import re
import resource
import signal
import statistics
import subprocess
import tempfile
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "functional"))
from harness import INTERPRETERS, TARGETS, Target, interp_missing  # noqa: E402
from formats import parse_collapsed  # noqa: E402

# partial= is optional: an older remora (for an A/B run) has none
# either remora's (A/B runs compare an older binary): rounds were "samples" before the
# counts' words (docs/cli.md, "Counts")
STATS = re.compile(r"stats: (?:samples|rounds)=(\d+)(?: rounds_asked=\d+ thread_samples=\d+ idle=\d+)? "
                   r"errors=(\d+)(?: partial=(\d+))? reads=(\d+) bytes=(\d+) "
                   r"reads_per_(?:sample|round)=([\d.]+) cpu_us_per_(?:sample|round)=([\d.]+)")
MEMORY = re.compile(r"memory: maxrss_kb=(\d+)")


def scratch_output():
    """A file for outputs the bench does not read. Never os.devnull: a remora before
    2026-12-01 (an A/B baseline) renames its output into place, which as root replaces
    the /dev/null device with a regular file."""
    d = os.path.join(tempfile.gettempdir(), "remora-bench")
    os.makedirs(d, exist_ok=True)
    return os.path.join(d, "discarded.collapsed")


def busy(interp, depth, nthreads, seconds, log=False):
    """busy.py under interp, started and ready (a context manager)."""
    t = Target(interp, os.path.join(TARGETS, "busy.py"), "ready",
               (depth, nthreads, seconds) + (("log",) if log else ()))
    t.__enter__()
    try:
        t.wait_ready()
    except BaseException:
        t.__exit__()
        raise
    return t


KERNEL = re.compile(r"kernel: .*proc_reads=(\d+) .*bpf_runs=(\d+) bpf_ns=(\d+)")
TICK_NS = re.compile(r"kernel: .* tick_runs=(\d+) tick_ns=(\d+)")


def written(path):
    """The thread samples a collapsed file holds (the kernel engine's ticks are samples of
    their own: a round is not one sample a thread there)."""
    try:
        with open(path) as f:
            return sum(int(line.rsplit(" ", 1)[1]) for line in f if line.strip())
    except (OSError, ValueError, IndexError):
        return 0
IDLE_LOOKS = re.compile(r"idle: sched_reads=(\d+) state_reads=(\d+) kept=(\d+)")
ENGINE = re.compile(r", engine (\w+)")


def remora_stats(remora, pid, rate, seconds, extra=(), idle=False):
    """`remora record --stats` of pid: the default mode as users run it (idle threads left
    out), or with idle=True every thread's sample (--idle). Its figures, per round: CPU
    us (remora's own), reads; the kernel engine's BPF programs' us when
    kernel.bpf_stats_enabled is 1 (bpf_stats()), and /proc reads."""
    p = subprocess.run([remora, "record", "-p", str(pid), "-r", rate, "-d", str(seconds), "--stats",
                        "-o", scratch_output(), "-f", "collapsed", *(("--idle",) if idle else ()), *extra],
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=600)
    m = STATS.search(p.stderr)
    if not m:
        raise RuntimeError("no stats line: " + p.stderr.strip()[-300:])
    samples, errors, partial, reads, nbytes, rps, cpu = (float(x or 0) for x in m.groups()[:7])
    k, i, e = KERNEL.search(p.stderr), IDLE_LOOKS.search(p.stderr), ENGINE.search(p.stderr)
    rounds = max(samples, 1.0)
    n = written(scratch_output())
    return {"samples": samples, "rate": samples / seconds, "errors": errors, "partial": partial,
            "written": n, "wrate": n / seconds,
            # per thread sample written, remora's own and the BPF programs'
            "cpu_w": cpu * rounds / max(n, 1), "bpf_w": (int(k.group(3)) / 1e3 / max(n, 1)) if k else 0.0,
            "rps": rps, "cpu": cpu, "stderr": p.stderr, "engine": e.group(1) if e else "?",
            "bpf": int(k.group(3)) / 1e3 / rounds if k else 0.0,
            "bpf_runs": int(k.group(2)) if k else 0,
            "proc_reads": (int(k.group(1)) if k else int(i.group(2)) if i else 0) / rounds,
            "sched_reads": int(i.group(1)) / rounds if i else 0.0,
            "maxrss_kb": int(MEMORY.search(p.stderr).group(1)) if MEMORY.search(p.stderr) else 0}


class bpf_stats:
    """kernel.bpf_stats_enabled set to 1 inside the block (the BPF programs' run time, which
    `record --stats` prints as bpf_ns), restored after; nothing when it cannot be set."""
    PATH = "/proc/sys/kernel/bpf_stats_enabled"

    def __enter__(self):
        self.old = None
        try:
            with open(self.PATH) as f:
                self.old = f.read().strip()
            with open(self.PATH, "w") as f:
                f.write("1")
        except OSError:
            self.old = None
        return self

    def __exit__(self, *exc):
        if self.old is not None:
            try:
                with open(self.PATH, "w") as f:
                    f.write(self.old)
            except OSError:
                pass
        return False


SLOW_SECONDS = 30.0    # per column of the slowdown table
WINDOW = 0.05          # remora runs (SIGCONT) and stops (SIGSTOP) in turns of this long


def log_rate(points, lo, hi):
    """Iterations per second of a busy.py log between two monotonic times."""
    inside = [p for p in points if lo <= p[0] <= hi]
    if len(inside) < 2 or inside[-1][0] <= inside[0][0]:
        return None
    return (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0])


def pin(pid, cpu):
    """Every thread of pid on one CPU (best effort)."""
    try:
        for tid in os.listdir("/proc/%d/task" % pid):
            os.sched_setaffinity(int(tid), {cpu})
    except OSError:
        pass


def median_ci(groups, rounds=2000):
    """The median of all values in groups and a 95% bootstrap interval for it, the groups
    (values that share a window) resampled whole. Seeded: the same data, the same interval."""
    rng = random.Random(0)
    meds = sorted(statistics.median(x for g in rng.choices(groups, k=len(groups)) for x in g)
                  for _ in range(rounds))
    return (statistics.median(x for g in groups for x in g),
            meds[int(rounds * 0.025)], meds[int(rounds * 0.975) - 1])


def slowdown(remora, t, rate, seconds):
    """The target's change of speed while recorded at 'rate' (None: never recorded, the
    control). One remora records for the whole run and is stopped and continued every
    WINDOW seconds, so that there is no attach in a window and many windows fit: each
    recorded window's rate (from the target's own log) against each unrecorded window
    beside it, as a log ratio; the median of those and its 95% bootstrap interval,
    returned as fractions (-0.01: 1% slower), with the median unrecorded rate and the
    number of recorded windows. The target runs on CPU 0, remora and this script on CPU 1: what is
    measured is remora's effect on the target, not the two taking turns on one CPU."""
    mine = os.sched_getaffinity(0)
    two = len(mine) >= 2
    if two:
        pin(t.pid, 0)
        os.sched_setaffinity(0, {1})
    r = None
    try:
        if rate:
            r = subprocess.Popen([remora, "record", "-p", str(t.pid), "-r", rate, "-d", str(seconds + 60),
                                  "--stats", "-o", scratch_output(), "-f", "collapsed"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            r.send_signal(signal.SIGSTOP)
            began = time.monotonic()
        marks, on = [], False
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            on = not on
            if r:
                r.send_signal(signal.SIGCONT if on else signal.SIGSTOP)
            marks.append((time.monotonic(), on))
            time.sleep(WINDOW)     # a window's length, not a synchronisation
        marks.append((time.monotonic(), not on))
    finally:
        if r:
            r.send_signal(signal.SIGCONT)
            r.send_signal(signal.SIGINT)
            err = r.communicate(timeout=60)[1]
            lasted = time.monotonic() - began
        if two:
            os.sched_setaffinity(0, mine)
    if r and r.returncode != 0:
        raise RuntimeError("remora failed: " + err.strip()[-300:])
    with open(t.host_path(t.out) + ".log") as f:
        points = [tuple(float(x) for x in line.split()) for line in f if line.count(" ") == 1]
    # a window's rate from the log points inside it, its first 5 ms (remora waking) left out
    rates = [log_rate(points, marks[i][0] + 0.005, marks[i + 1][0] - 0.001) for i in range(len(marks) - 1)]
    # each recorded window against each unrecorded neighbour, as log(on) - log(off): a dip
    # of the machine's own is as likely on either side of a pair, and a drift cancels
    # between a window's pair with the one before and its pair with the one after
    groups = []
    for i in range(4, len(rates) - 1):     # the first windows: remora attaching
        if marks[i][1] and rates[i]:
            g = [math.log(rates[i]) - math.log(rates[j]) for j in (i - 1, i + 1) if rates[j]]
            if g:
                groups.append(g)
    if len(groups) < 10:
        raise RuntimeError("the target's log has too few points in the windows")
    off = statistics.median(x for i, x in enumerate(rates) if x and not marks[i][1])
    # the kernel engine's frame walker runs on the target's CPU, in its time, whether remora
    # is stopped or not (its ticks go on): its share of the run, from its own run time
    # (kernel.bpf_stats_enabled), is the target's slowdown on top of what the windows show
    tick = TICK_NS.search(err) if r else None
    bpf = -int(tick.group(2)) / 1e9 / lasted if tick else 0.0
    return tuple(math.exp(x) - 1 for x in median_ci(groups)) + (off, len(groups), bpf)


def tachyon(interp, pid, seconds):
    """CPU per sample of Tachyon attached to pid (same rate request), or None."""
    root = interp[2]
    if root is None or not os.path.exists(os.path.join(root, "usr/lib/python3.15/profiling/sampling")):
        return None
    proc_dir = os.path.join(root, "proc")
    if not os.path.exists(os.path.join(proc_dir, "self")):
        subprocess.run(["mount", "-t", "proc", "proc", proc_dir], check=False)
    out = os.path.join(root, "tmp", "tachyon.collapsed")
    t0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run(["chroot", root, "/usr/bin/python3.15", "-m", "profiling.sampling", "attach", "-a",
                        "-r", "1000000", "-d", str(max(1, int(round(seconds)))), "--collapsed", "-o", "/tmp/tachyon.collapsed",
                        str(pid)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    t1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (t1.ru_utime - t0.ru_utime) + (t1.ru_stime - t0.ru_stime)
    samples = 0
    m = re.search(r"Captured ([\d,]+) samples", p.stdout)
    if m:
        samples = int(m.group(1).replace(",", ""))
    elif os.path.exists(out):
        with open(out) as f:
            samples = sum(int(line.rsplit(" ", 1)[1]) for line in f if line.strip())
    if os.path.exists(out):
        os.unlink(out)
    if samples == 0:
        return {"error": p.stdout.strip()[-300:]}
    return {"samples": samples, "cpu_us": cpu * 1e6 / samples, "rate": samples / seconds}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--remora", default="./remora")
    ap.add_argument("--quick", action="store_true", help="fewer interpreters and shorter runs")
    ap.add_argument("--only", default="", help="interpreters whose name contains this")
    ap.add_argument("--vmread", default="build/vmread", help="tests/bench/vmread.c, built")
    ap.add_argument("--sections", default="floor,rate,slowdown,short,stitch,blocking,native,idle,modes,tachyon,memory,async,library,real,long",
                    help="which tables, comma-separated (default: all)")
    ap.add_argument("--slowdown-seconds", type=float, default=SLOW_SECONDS,
                    help="length of each column of the slowdown table (default %.0f)" % SLOW_SECONDS)
    args = ap.parse_args()
    remora = os.path.abspath(args.remora)
    secs = 1.0 if args.quick else 2.0
    interps = [i for i in INTERPRETERS if args.only in i[0] and not interp_missing(i)]
    if args.quick:
        interps = [i for i in interps if i[0] in ("pyenv-3.12.1", "sid-3.13", "sid-3.15")]

    sections = set(args.sections.split(","))
    if "floor" in sections:
        floor_table(args.vmread)
    if "rate" in sections:
        sampling_table(remora, interps, secs)
    if "slowdown" in sections:
        slowdown_table(remora, interps, 10.0 if args.quick else args.slowdown_seconds)
    if "short" in sections:
        short_table(remora, interps)
    if "stitch" in sections:
        stitch_table(remora, interps)
    if "blocking" in sections:
        blocking_table(remora, [i for i in interps if i[0] in ("pyenv-3.12.1", "pyenv-3.13.0", "sid-3.15")])
    if "native" in sections:
        blocking_table(remora, [i for i in interps if i[0] in ("pyenv-3.12.1", "debian-3.11-static", "sid-3.15")],
                       native=True)
    if "idle" in sections:
        idle_table(remora, interps, secs)
    if "modes" in sections:
        modes_table(remora, interps, secs)
    if "tachyon" in sections:
        tachyon_table(remora, interps, secs)
    if "memory" in sections and not args.quick and interps:
        memory_table(remora, interps)
    if "memory" in sections:
        memory_mode_table(remora, args.quick)
    if "fidelity" in sections:
        fidelity_table(remora, interps)
    if "async" in sections:
        async_table(remora, interps, secs)
    if "library" in sections:
        library_table(interps, secs)
    if "real" in sections:
        real_table(remora, interps, args.quick)
    if "long" in sections and interps:
        long_table(remora, interps, 60.0 if args.quick else LONG_SECONDS)


LONG_SECONDS, LONG_EVERY, LONG_RATE = 600.0, 10, 100

# get_stack_trace() in a loop for SECONDS by the module MODULE on PID, cache_frames as
# asked: CPU per call (issue 47). Run by the interpreter that hosts the module.
# A target given as a path to busy.py is started by the loop's own interpreter (in the
# chroot, the reader must share the target's mount namespace: /proc/PID/maps names files
# from the target's) and waited for through its ready file.
LIB_LOOP = r"""
import importlib, json, os, subprocess, sys, time
mod = importlib.import_module(sys.argv[1])
secs, cache = float(sys.argv[3]), sys.argv[4] == "1"
child = None
if sys.argv[2].isdigit():
    pid = int(sys.argv[2])
else:
    ready = sys.argv[2] + ".ready"
    child = subprocess.Popen([sys.executable, "-I", sys.argv[2], ready, "50", "1",
                              str(int(secs * 4 + 30))], stdin=subprocess.PIPE)
    while not os.path.exists(ready):
        if child.poll() is not None:
            sys.exit("busy.py exited")
        time.sleep(0.01)
    pid = child.pid
u = mod.RemoteUnwinder(pid, all_threads=True, cache_frames=cache)
depth, errors, n = 0, 0, 0
for _ in range(20):
    try:
        u.get_stack_trace()
    except RuntimeError:
        pass
c0, w0 = time.process_time(), time.perf_counter()
while time.perf_counter() - w0 < secs:
    try:
        trace = u.get_stack_trace()
        n += 1
        depth = max(len(t.frame_info) for i in trace for t in i.threads)
    except RuntimeError:
        errors += 1
cpu = time.process_time() - c0
if child is not None:
    child.kill()
    os.unlink(ready)
print(json.dumps({"calls": n, "errors": errors, "cpu_us": cpu * 1e6 / max(n, 1), "depth": depth}))
"""


LIB_ROUNDS = 3      # each configuration run this many times, interleaved: the least CPU kept


def library_table(interps, secs):
    """remora's Python module beside CPython's _remote_debugging (3.15: both from the
    chroot's python3.15; 3.9 and 3.12 targets: remora's from the host's python3). Each
    configuration is run LIB_ROUNDS times, in turn with the others, and its least CPU per
    call kept: the machine's other work only ever adds to a figure."""
    targets = [i for i in interps if i[0] in ("sid-3.15", "pyenv-3.12.1", "pyenv-3.9.18")]
    if not targets:
        return
    repo = os.path.join(HERE, "..", "..")
    p = subprocess.run(["make", "-s", "-C", repo, "python"], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        print("\n(make python failed: %s)" % p.stdout[-300:])
        return
    moddir = os.path.join(repo, "build-lib", "python")
    print("\n## The Python module: get_stack_trace() in a loop (busy.py depth 50, one busy "
          "thread, all_threads=True), %.0f s each, the least of %d runs\n" % (secs, LIB_ROUNDS))
    print("Issue 47's bound: with cache_frames=True, remora's CPU per call at most half of "
          "CPython's _remote_debugging's on the same 3.15 target (both run by the chroot's "
          "python3.15); 3.9 and 3.12 targets read by remora from the host's python3.\n")
    print("| target | module | cache_frames | calls/s | CPU us/call | depth | errors |")
    print("|---|---|---|---|---|---|---|")
    for it in targets:
        t = busy(it, 50, 1, secs * 8 * LIB_ROUNDS + 60) if it[2] is None else None
        try:
            best, failed = {}, {}
            configs = [(m, c) for m in (("_remote_debugging", "remora") if it[2] else ("remora",))
                       for c in ("1", "0")]
            for _ in range(LIB_ROUNDS):
                for module, cache in configs:
                    x, why = library_run(it, t, moddir, module, cache, secs)
                    if x is None:
                        failed[(module, cache)] = why
                    elif (module, cache) not in best or x["cpu_us"] < best[(module, cache)]["cpu_us"]:
                        best[(module, cache)] = x
            for module, cache in configs:
                x = best.get((module, cache))
                if x is None:
                    print("| %s | %s | %s | (failed: %s) | | | |" % (it[0], module, cache == "1",
                                                                   failed.get((module, cache))))
                    continue
                print("| %s | %s | %s | %.0f | %.2f | %d | %d |" % (
                    it[0], module, cache == "1", x["calls"] / secs, x["cpu_us"], x["depth"],
                    x["errors"]))
            for cache in ("1", "0"):
                ours, theirs = best.get(("remora", cache)), best.get(("_remote_debugging", cache))
                if ours and theirs:
                    print("| %s | remora / CPython | %s | | %.2fx | | |" % (
                        it[0], cache == "1", ours["cpu_us"] / theirs["cpu_us"]))
        finally:
            if t is not None:
                t.__exit__()


def library_run(it, t, moddir, module, cache, secs):
    """One LIB_LOOP run: (its JSON, None), or (None, why it failed)."""
    if it[2]:
        work = tempfile.mkdtemp(prefix="remora-libbench-", dir=os.path.join(it[2], "tmp"))
        os.chmod(work, 0o755)
        subprocess.run(["cp", "-r", os.path.join(moddir, "remora"),
                        os.path.join(TARGETS, "busy.py"), work])
        script = ("mount -t proc proc \"$1/proc\" && exec chroot \"$1\" env "
                  "PYTHONPATH=\"$2\" python3.15 -c \"$3\" $4 $5 $6 $7")
        argv = ["unshare", "-m", "--propagation", "private", "sh", "-c", script,
                "sh", it[2], work[len(it[2]):], LIB_LOOP, module,
                work[len(it[2]):] + "/busy.py", str(secs), cache]
        env = None
    else:
        work = None
        argv = ["/usr/bin/python3", "-c", LIB_LOOP, module, str(t.pid), str(secs), cache]
        env = dict(os.environ, PYTHONPATH=moddir)
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, env=env, timeout=secs * 4 + 60)
    if work:
        subprocess.run(["rm", "-rf", work])
    try:
        return json.loads(r.stdout.strip().splitlines()[-1]), None
    except (IndexError, ValueError):
        return None, r.stderr.strip()[-120:]


def long_table(remora, interps, seconds):
    """Issue 33: a long recording with a profile a period: the files, their rounds against
    the summary's, and remora's resident memory as it goes (from /proc, every period)."""
    it = ([i for i in interps if i[0] == "pyenv-3.12.1"] or interps)[0]
    print("\n## A long recording: %.0f s at %d Hz, --every %d (%s, busy.py depth 20, 4 threads)\n"
          % (seconds, LONG_RATE, LONG_EVERY, it[0]))
    d = tempfile.mkdtemp(prefix="remora-bench-long-")
    t = busy(it, 20, 4, seconds + 60)
    try:
        jl = os.path.join(d, "s.jsonl")
        p = subprocess.Popen([remora, "record", "-p", str(t.pid), "-r", str(LONG_RATE), "-d", str(seconds),
                              "--every", str(LONG_EVERY), "-o", os.path.join(d, "p-%n.pb.gz"), "-o", jl],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        rss, start = [], time.monotonic()
        while p.poll() is None:
            try:
                with open("/proc/%d/status" % p.pid) as f:
                    kb = int(re.search(r"^VmRSS:\s+(\d+)", f.read(), re.M).group(1))
                rss.append((time.monotonic() - start, kb))
            except (OSError, AttributeError):
                pass
            time.sleep(LONG_EVERY / 2)  # a measurement's pace, not a synchronisation
        err = p.stderr.read().decode("utf-8", "replace")
    finally:
        t.__exit__()
    files = sorted(f for f in os.listdir(d) if f.startswith("p-"))
    periods, rounds = 0, 0
    with open(jl) as f:
        for line in f:
            r = json.loads(line)
            if r["type"] == "period":
                periods += 1
                rounds += r["rounds"]
    m = re.search(r"remora: (\d+) (?:samples in|rounds? taken)", err)
    total = int(m.group(1)) if m else -1
    after = [kb for at, kb in rss if at >= 60] or [kb for _, kb in rss]
    first = after[0] if after else 0
    print("| pprof files | periods in the stream | rounds, periods' sum | rounds, summary | RSS at 1 min | "
          "RSS at the end | RSS max after 1 min |")
    print("|---|---|---|---|---|---|---|")
    print("| %d | %d | %d | %d | %.1f MB | %.1f MB | %.1f MB |" % (
        len(files), periods, rounds, total, first / 1024, (rss[-1][1] if rss else 0) / 1024,
        max(after or [0]) / 1024))
    subprocess.run(["rm", "-rf", d])


ASYNC = re.compile(r"async: task_samples=(\d+) waiting=(\d+) unknown=(\d+) list_reads=(\d+) "
                   r"list_errors=(\d+) us_per_list_read=([\d.]+)")
ASYNC_DEPTH, ASYNC_TASKS, ASYNC_IDLE = 50, 4, 10


def async_table(remora, interps, secs):
    print("\n## --async: CPU per sample (async_deep.py: %d worker tasks %d coroutines deep, "
          "%d waiting tasks; %.0f s each)\n" % (ASYNC_TASKS, ASYNC_DEPTH, ASYNC_IDLE, secs))
    print("| interpreter | rate asked | flags | samples/s | CPU us/sample | reads/sample | "
          "task samples | task-list reads (us each) | errors |")
    print("|---|---|---|---|---|---|---|---|---|")
    for it in interps:
        t = Target(it, os.path.join(TARGETS, "async_deep.py"), "ready",
                   (ASYNC_DEPTH, ASYNC_TASKS, ASYNC_IDLE, 12 * secs + 30))
        t.__enter__()
        try:
            t.wait_ready()
            for rate in ("1k", "1M"):
                for extra in ((), ("--async",), ("--async-mode", "all")):
                    try:
                        s = remora_stats(remora, t.pid, rate, secs, extra)
                    except RuntimeError as e:
                        print("| %s | %s Hz | %s | not measured: %s |||||||" % (
                            it[0], rate, " ".join(extra) or "(none)", str(e)[-120:]), flush=True)
                        continue
                    a = ASYNC.search(s.get("stderr", ""))
                    print("| %s | %s Hz | %s | %.0f | %.2f | %.2f | %s | %s | %d |" % (
                        it[0], rate, " ".join(extra) or "(none)", s["rate"], s["cpu"], s["rps"],
                        ("%s (+%s waiting)" % (a.group(1), a.group(2))) if a else "-",
                        ("%s (%s)" % (a.group(4), a.group(6))) if a else "-", s["errors"]),
                        flush=True)
        finally:
            t.__exit__()


def real_table(remora, interps, quick):
    """Issue 29's table: real programs, each engine against the --blocking reference."""
    import real_tests as R
    from harness import Skip
    interps = [i for i in interps if i[0] in (("sid-3.15",) if quick else R.REAL_INTERPS)]
    print("\n## Real programs (tests/targets/real/): each engine against a --blocking reference, "
          "%d Hz for %d s each, --idle\n" % (R.RATE, R.SECONDS))
    print("Leaf TV: total-variation distance (points) of the innermost-frame distributions "
          "(function + file; `<moving>` a leaf of its own) against the reference; incl: the "
          "largest difference (points) of one function's inclusive share among the %d largest; "
          "each / its floor, the same between the reference and a second --blocking recording. "
          "Clock (aiohttp, thread pool): the largest error (points) of a thread's share of one of its steps "
          "against the target's own clock over the same window.\n" % R.INCL_TOP)
    print("| program | interpreter | engine | partial | leaf TV / floor | incl / floor | samples | clock |")
    print("|---|---|---|---|---|---|---|---|")
    for program, script, module in R.PROGRAMS:
        for it in interps:
            why = R.import_problem(it, module)
            if why:
                print("| %s | %s | - | not run: %s does not import %s (%s) ||||" % (
                    program, it[0], it[0], module, why[-100:]), flush=True)
                continue
            d = tempfile.mkdtemp(prefix="remora-bench-real-")
            try:
                summ, recs, marks, ready = R.measure(remora_runner(remora), it, script, d)
            except (Skip, R.Fail) as e:
                print("| %s | %s | - | not measured: %s ||||" % (program, it[0], str(e)[-160:]), flush=True)
                continue
            finally:
                subprocess.run(["rm", "-rf", d])
            ref = R.Figures(recs, "B")
            for label, engine in (("default", "kernel"), ("user", "user"), ("A", "--blocking reference")):
                clock = R.Clock(recs[label], marks[label], ready).text() if label in marks else "-"
                if label == "A":
                    print("| %s | %s | %s | %.2f%% | - / %.1f | - / %.1f | %d | %s |" % (
                        program, it[0], engine, summ[label].partial_pct, ref.tv, ref.incl, ref.na, clock))
                    continue
                f = R.Figures(recs, label)
                print("| %s | %s | %s | %.2f%% | %.1f / %.1f | %.1f / %.1f | %d | %s |" % (
                    program, it[0], engine, summ[label].partial_pct, f.tv, f.tv_floor, f.incl,
                    f.incl_floor, f.n, clock), flush=True)


def remora_runner(remora):
    """The functional tests' way of running remora (a Fail on a hang or a signal)."""
    from harness import Remora
    return Remora(remora, [], 120.0)


def floor_table(vmread):
    print("## The floor: one process_vm_readv (tests/bench/vmread.c)\n")
    if not os.access(vmread, os.X_OK):
        print("not measured: no %s (make bench builds it)\n" % vmread)
        return
    p = subprocess.run([vmread], stdout=subprocess.PIPE, text=True, timeout=300)
    print(p.stdout)


def sampling_table(remora, interps, secs):
    print("## Sampling as fast as possible (asked for 1 MHz), %.0f s each\n" % secs)
    print("| interpreter | depth | threads | samples/s | CPU us/sample | reads/sample | errors |")
    print("|---|---|---|---|---|---|---|")
    for it in interps:
        for extra in ((), ("--frame-anchor",)) if it[0].startswith("sid-3.15") else ((),):
            for depth in (1, 50, 100, 300):
                for nthreads in (1, 8):
                    t = busy(it, depth, nthreads, secs + 30)
                    try:
                        s = remora_stats(remora, t.pid, "1M", secs, extra)
                    finally:
                        t.__exit__()
                    print("| %s%s | %d | %d | %.0f | %.2f | %.2f | %d |" % (
                        it[0], " " + " ".join(extra) if extra else "", depth, nthreads, s["rate"],
                        s["cpu"], s["rps"], s["errors"]), flush=True)


def slowdown_table(remora, interps, seconds):
    print("\n## Target slowdown (depth 50, one thread; %.0f s a column)\n" % seconds)
    print("One target run per row (on CPU 0), its own iteration count logged every 5 ms. One "
          "remora (on CPU 1) records for the whole column and is stopped and continued every "
          "%.0f ms; a cell is the median, over its recorded windows and each of their two "
          "unrecorded neighbours, of the change of the target's rate (recorded against "
          "unrecorded), with a 95%% bootstrap interval (recorded windows resampled). 'none' "
          "starts no remora: the noise floor. Negative is slower. With the kernel engine its frame "
          "walker runs in the target's own time on its CPU whether remora is stopped or not: its "
          "share of the run (its run time over the run, kernel.bpf_stats_enabled) is added "
          "('BPF'), the total after '='.\n"
          % (WINDOW * 1000))
    print("| interpreter | unprofiled it/s | recorded windows | none | at 1 kHz | at 10 kHz |")
    print("|---|---|---|---|---|---|")
    for it in interps:
        t = busy(it, 50, 1, 3 * seconds + 120, log=True)
        try:
            cols, base, n = [], 0.0, 0
            for rate in (None, "1k", "10k"):
                with bpf_stats():
                    med, lo, hi, base_rate, n, bpf = slowdown(remora, t, rate, seconds)
                cols.append("%+.2f%% [%+.2f, %+.2f]" % (100 * med, 100 * lo, 100 * hi) +
                            (" %+.2f%% BPF = %+.2f%%" % (100 * bpf, 100 * (med + bpf)) if rate else ""))
                base = base or base_rate
        finally:
            t.__exit__()
        print("| %s | %.0f | %d | %s |" % (it[0], base, n, " | ".join(cols)), flush=True)


BLOCK_PAIRS = 6       # recorded/unrecorded windows per cell of the --blocking table
BLOCK_WINDOW = 1.0


def blocking_cell(remora, t, rate, extra):
    """The target's change of speed while recorded at 'rate' with 'extra' flags, and
    remora's CPU per sample, rate achieved and errors. Windows of BLOCK_WINDOW seconds
    alternate: one remora run of that length, then none; each recorded window's rate
    (from the target's own log, its first 0.1 s left out: remora attaching) against its
    two unrecorded neighbours, as in the slowdown table."""
    marks, stats = [], []
    for _ in range(BLOCK_PAIRS):
        t0 = time.monotonic()
        stats.append(remora_stats(remora, t.pid, rate, BLOCK_WINDOW, extra))
        marks.append((t0 + 0.1, time.monotonic(), True))
        t1 = time.monotonic()
        time.sleep(BLOCK_WINDOW)   # a window's length, not a synchronisation
        marks.append((t1, time.monotonic(), False))
    with open(t.host_path(t.out) + ".log") as f:
        points = [tuple(float(x) for x in line.split()) for line in f if line.count(" ") == 1]
    rates = [log_rate(points, lo, hi) for lo, hi, _ in marks]
    groups = []
    for i, (_, _, on) in enumerate(marks):
        if on and rates[i]:
            g = [math.log(rates[i]) - math.log(rates[j]) for j in (i - 1, i + 1)
                 if 0 <= j < len(marks) and rates[j]]
            if g:
                groups.append(g)
    med = statistics.median(x for g in groups for x in g) if groups else float("nan")
    n = len(stats)
    return (math.exp(med) - 1, sum(x["cpu"] for x in stats) / n, sum(x["rate"] for x in stats) / n,
            sum(x["errors"] for x in stats) / max(1.0, sum(x["samples"] for x in stats)))


def blocking_table(remora, interps, native=False):
    if native:
        print("\n## --native: what the C stacks cost (depth 50, one thread)\n")
    else:
        print("\n## --blocking: what holding the target costs (depth 50, one thread)\n")
    print("busy.py on CPU 0 logs its own iteration count; %d windows of %.0f s recorded by one "
          "remora run each (on CPU 1), each against the unrecorded windows beside it. "
          "'slowdown' is the median change of the target's rate (negative: slower); CPU and "
          "rate are remora's own (`--stats`); errors are unreadable thread samples per round.\n"
          % (BLOCK_PAIRS, BLOCK_WINDOW))
    print("| interpreter | rate asked | flags | target slowdown | CPU us/sample | samples/s | errors |")
    print("|---|---|---|---|---|---|---|")
    mine = os.sched_getaffinity(0)
    for it in interps:
        t = busy(it, 50, 1, 8 * BLOCK_PAIRS * BLOCK_WINDOW + 60, log=True)
        try:
            if len(mine) >= 2:
                pin(t.pid, 0)
                os.sched_setaffinity(0, {1})
            for rate in ("100", "1k"):
                for extra in ((), ("--blocking",)) + ((("--native",),) if native else ()):
                    slow, cpu, got, errs = blocking_cell(remora, t, rate, extra)
                    print("| %s | %s Hz | %s | %+.1f%% | %.1f | %.0f | %.2f%% |" % (
                        it[0], rate, " ".join(extra) or "(none)", 100 * slow, cpu, got, 100 * errs),
                        flush=True)
        finally:
            os.sched_setaffinity(0, mine)
            t.__exit__()


def short_calls(remora, interp):
    """One run of tests/targets/short_calls.py recorded at 5 kHz for 2 s: the target's own
    shares of a cycle (mean of before and after) and remora's shares of the innermost frame
    among the main thread's samples in cyc_ab, with the kept and torn counts."""
    t = Target(interp, os.path.join(TARGETS, "short_calls.py"), "ready.json")
    t.__enter__()
    try:
        ready = t.wait_ready()
        path = os.path.join(t.dir, "short.collapsed")
        p = subprocess.run([remora, "record", "-p", str(ready["pid"]), "-r", "5k", "-d", "2", "--stats",
                            "-o", path], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                           timeout=120)
        m = STATS.search(p.stderr)
        counts = {"a": 0, "b": 0, "cyc_ab": 0}
        for st in parse_collapsed(path):
            names = st.functions()
            if st.tid == ready["main"] and "cyc_ab" in names and names[-1] in counts:
                counts[names[-1]] += st.count
        t.finish()
        with open(os.path.join(t.dir, "after.json")) as f:
            after = json.load(f)["after"]
    finally:
        t.__exit__()
    before = ready["before"]
    truth = {k: (before[k] + after[k]) / 2 for k in ("a", "b", "main")}
    kept = sum(counts.values())
    return truth, {k: v / max(kept, 1) for k, v in counts.items()}, kept, int(m.group(2)) if m else -1


def short_table(remora, interps):
    print("\n## Calls shorter than a read (tests/targets/short_calls.py, 5 kHz for 2 s)\n")
    print("The main thread loops calling a() (~0.3 us) and b() (~0.6 us) from cyc_ab(): its stack "
          "changes faster than remora can read it, so many samples are torn and dropped. 'truth' "
          "is the target's own timing of the loop against the same loop with a() or b() made "
          "empty (mean of before and after the recording); 'remora' is the share of kept samples "
          "in cyc_ab whose innermost frame is a, b or cyc_ab itself.\n")
    print("| interpreter | truth a / b / loop | remora a / b / loop | kept | torn |")
    print("|---|---|---|---|---|")
    for it in interps:
        truth, got, kept, torn = short_calls(remora, it)
        print("| %s | %.0f / %.0f / %.0f%% | %.0f / %.0f / %.0f%% | %d | %d |" % (
            it[0], 100 * truth["a"], 100 * truth["b"], 100 * truth["main"], 100 * got["a"],
            100 * got["b"], 100 * got["cyc_ab"], kept, torn), flush=True)


STITCH_SECONDS = 3


def stitch_row(remora, interp, nlocals=1200):
    """One run of tests/targets/big_caller.py recorded as fast as remora can for
    STITCH_SECONDS: (samples in a or b called from big with the callee's own line, with the
    other call's line, errors %)."""
    t = Target(interp, os.path.join(TARGETS, "big_caller.py"), "ready.json", (nlocals,))
    t.__enter__()
    try:
        ready = t.wait_ready()
        path = os.path.join(t.dir, "stitch.collapsed")
        p = subprocess.run([remora, "record", "-p", str(ready["pid"]), "-r", "1M", "-d", str(STITCH_SECONDS),
                            "--stats", "-o", path], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           text=True, timeout=120)
        own = {"a": ready["a_line"], "b": ready["b_line"]}
        right = wrong = 0
        for st in parse_collapsed(path):
            fr = st.frames
            if len(fr) < 2 or fr[-1][0] not in own or fr[-2][0] != "big":
                continue
            if fr[-2][2] == own[fr[-1][0]]:
                right += st.count
            else:
                wrong += st.count
        t.finish()
    finally:
        t.__exit__()
    m = STATS.search(p.stderr)
    errors = 100.0 * float(m.group(2)) / max(float(m.group(1)), 1) if m else -1
    return right, wrong, errors


def stitch_table(remora, interps):
    print("\n## Stitched stacks: a frame of 10 KB calling two empty functions in turn "
          "(tests/targets/big_caller.py, asked for 1 MHz, %d s)\n" % STITCH_SECONDS)
    print("big()'s frame header and its callee's frame lie 10 KB apart, so one copy reads them "
          "about half a microsecond apart, while the callee changes every ~0.1 us. 'stitched' "
          "counts samples in a() or b() whose caller line is the other call's: caller and "
          "callee from different moments, which both copies of the stack happened to agree "
          "on.\n")
    print("| interpreter | right | stitched | errors |")
    print("|---|---|---|---|")
    for it in interps:
        right, wrong, errors = stitch_row(remora, it)
        print("| %s | %d | %d | %.1f%% |" % (it[0], right, wrong, errors), flush=True)


def tachyon_table(remora, interps, secs):
    sid315 = [i for i in interps if i[0] == "sid-3.15"]
    if sid315:
        print("\n## remora and Tachyon on the same 3.15 target (depth 50, one thread, asked for 1 MHz)\n")
        print("Each profiler as it runs by default: remora leaves idle threads out (busy.py's main "
              "thread sleeps) with the kernel engine where it loads; Tachyon samples every thread "
              "(-a) in its default wall mode. remora's CPU is its own process's; its BPF programs' "
              "run time (kernel.bpf_stats_enabled) apart; per round, and per thread sample written "
              "(the kernel engine's ticks are samples of their own, a light round writes none: "
              "rounds and samples differ).\n")
        it = sid315[0]
        t = busy(it, 50, 1, secs * 6 + 60)
        try:
            with bpf_stats():
                s = remora_stats(remora, t.pid, "1M", secs)
                si = remora_stats(remora, t.pid, "1M", secs, idle=True)
                su = remora_stats(remora, t.pid, "1M", secs, ("--engine", "user"))
                sa = remora_stats(remora, t.pid, "1M", secs, ("--frame-anchor",))
            ty = tachyon(it, t.pid, secs)
        finally:
            t.__exit__()
        if ty is None or "error" in ty:
            print("Tachyon could not run: %s" % (ty or {}).get("error", "python3.15's profiling.sampling not found"))
        else:
            print("| profiler | engine | rounds/s | CPU us/round | BPF us/round | samples written/s | "
                  "CPU us/sample | BPF us/sample |")
            print("|---|---|---|---|---|---|---|---|")
            for name, x in (("remora", s), ("remora --idle", si), ("remora --engine user", su),
                            ("remora --frame-anchor", sa)):
                print("| %s | %s | %.0f | %.2f | %.2f | %.0f | %.2f | %.2f |" % (
                    name, x["engine"], x["rate"], x["cpu"], x["bpf"], x["wrate"], x["cpu_w"], x["bpf_w"]))
            print("| Tachyon | | %.0f | %.2f | | | | |" % (ty["rate"], ty["cpu_us"]))
            print("\nCPU per sample, remora / Tachyon: %.2f per sample written (with its BPF time: %.2f); "
                  "per round %.2f (with BPF %.2f); --idle %.2f; --engine user %.2f; --frame-anchor %.2f "
                  "(per sample written, with BPF)"
                  % (s["cpu_w"] / ty["cpu_us"], (s["cpu_w"] + s["bpf_w"]) / ty["cpu_us"],
                     s["cpu"] / ty["cpu_us"], (s["cpu"] + s["bpf"]) / ty["cpu_us"],
                     (si["cpu_w"] + si["bpf_w"]) / ty["cpu_us"], su["cpu_w"] / ty["cpu_us"],
                     sa["cpu_w"] / ty["cpu_us"]))


IDLE_INTERPS = ("pyenv-3.9.18", "pyenv-3.12.1", "sid-3.15")
POOL_PARKED, POOL_DEPTH, POOL_SECONDS = 100, 20, 5
IDLE_PAIRS = 2          # default and --idle taken in turns, this many times each


def parked_pool(interp, seconds):
    """tests/targets/parked_pool.py (POOL_PARKED threads parked POOL_DEPTH deep, one busy)
    started, ready, and every parked thread asleep in the kernel (a context manager)."""
    t = Target(interp, os.path.join(TARGETS, "parked_pool.py"), "ready.json",
               (POOL_PARKED, POOL_DEPTH, seconds))
    t.__enter__()
    try:
        ready = t.wait_ready()
        deadline = time.monotonic() + 30
        for tid in ready["parked"]:
            while True:             # polling the kernel for the state the target cannot see
                try:
                    with open("/proc/%d/task/%d/stat" % (t.pid, tid)) as f:
                        state = f.read().rsplit(")", 1)[1].split()[0]
                except (OSError, IndexError):
                    state = "?"
                if state in ("S", "D"):
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError("parked thread %d never asleep (%s)" % (tid, state))
                time.sleep(0.005)
    except BaseException:
        t.__exit__()
        raise
    return t


def idle_table(remora, interps, secs):
    """The default mode (idle threads left out: a system call to decide, when at all) beside
    --idle, each engine, on one busy thread as fast as remora can and on a thread pool of
    parked threads at 1 kHz."""
    chosen = [i for i in interps if i[0] in IDLE_INTERPS]
    print("\n## The default mode beside --idle (CPU per round, both engines)\n")
    print("One busy thread at depth 50 (busy.py; its main thread sleeps), asked for 1 MHz, %.0f s; "
          "%d threads parked %d deep + 1 busy (parked_pool.py), 1 kHz, %d s. Each cell the mean of "
          "%d runs taken in turns with its --idle pair. CPU is remora's own; BPF the kernel engine's "
          "programs' run time (kernel.bpf_stats_enabled), per round; /proc reads per round (stat, "
          "and schedstat for the user-space engine); the ratio default / --idle on CPU + BPF.\n"
          % (secs, POOL_PARKED, POOL_DEPTH, POOL_SECONDS, IDLE_PAIRS))
    print("| interpreter | target | engine | mode | samples/s | rounds asked | CPU us/sample | "
          "BPF us/sample | /proc reads/round | default / --idle |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for it in chosen:
        for what in ("busy", "pool"):
            rate, secs_ = ("1M", secs) if what == "busy" else ("1k", POOL_SECONDS)
            t = (busy(it, 50, 1, 8 * IDLE_PAIRS * secs + 60) if what == "busy"
                 else parked_pool(it, 8 * IDLE_PAIRS * POOL_SECONDS + 60))
            try:
                for engine in ("kernel", "user"):
                    runs = {False: [], True: []}
                    try:
                        with bpf_stats():
                            for _ in range(IDLE_PAIRS):
                                for idle in (False, True):
                                    runs[idle].append(remora_stats(remora, t.pid, rate, secs_,
                                                                   ("--engine", engine), idle=idle))
                    except RuntimeError as e:
                        print("| %s | %s | %s | not measured: %s |||||||" % (it[0], what, engine, str(e)[-120:]))
                        continue
                    cell = {}
                    for idle in (False, True):
                        rs = runs[idle]
                        cell[idle] = {k: sum(r[k] for r in rs) / len(rs)
                                      for k in ("rate", "cpu", "bpf", "proc_reads", "sched_reads")}
                    ratio = (cell[False]["cpu"] + cell[False]["bpf"]) / max(cell[True]["cpu"] + cell[True]["bpf"], 1e-9)
                    for idle in (False, True):
                        c = cell[idle]
                        asked = "-" if what == "busy" else "%.1f%%" % (100.0 * c["rate"] / 1000)
                        print("| %s | %s | %s | %s | %.0f | %s | %.2f | %.2f | %.2f | %s |" % (
                            it[0], "busy depth 50" if what == "busy" else "100 parked + 1 busy", engine,
                            "--idle" if idle else "default", c["rate"], asked, c["cpu"], c["bpf"],
                            c["proc_reads"] + c["sched_reads"], "" if idle else "%.2f" % ratio), flush=True)
            finally:
                t.__exit__()


MODES_INTERPS = ("debian-3.11-static", "pyenv-3.12.1", "sid-3.15")
MODES_RUNS = 3
SWITCH = re.compile(r"switch_walks=(\d+) switch_used=(\d+)")


def modes_table(remora, interps, secs):
    """The kernel engine's BPF run time in each mode at 1 kHz: the walker's per tick (its
    own run time over its runs) and the switch program's (every sched_switch of the machine
    runs it: its time over its runs, and over the switch-out walks it made), median of
    MODES_RUNS runs, busy.py at depth 50 (its thread holds the GIL: gil mode samples it)."""
    chosen = [i for i in interps if i[0] in MODES_INTERPS]
    print("\n## The kernel engine's BPF run time in each mode (issue 48)\n")
    print("The --async rows: tests/targets/async_short.py (tasks of 0.5 ms, one at a time) recorded "
          "without and with --async: the walker's time per tick with and without reading the "
          "running task at the tick.\n")
    print("busy.py at depth 50, one thread, 1 kHz, %.0f s, --stats with kernel.bpf_stats_enabled; "
          "median of %d runs. Walker: us per tick (tick_ns / tick_runs). Switch program: us per "
          "run (every context switch of the machine runs it), and its whole time per switch-out "
          "walk (a target thread leaving its CPU: each preemption, at most one a period as it "
          "sleeps).\n" % (secs, MODES_RUNS))
    print("| interpreter | mode | engine | ticks/s | walker us/tick | switch us/run | switch walks/s | "
          "switch us/walk |")
    print("|---|---|---|---|---|---|---|---|")
    for it in chosen:
        modes_rows(remora, it, secs, busy(it, 50, 1, 4 * MODES_RUNS * (secs + 2) + 60),
                   [(m, ("--mode", m)) for m in ("wall", "cpu", "gil", "exception")])
        t = Target(it, os.path.join(TARGETS, "async_short.py"), "ready.json", ("0.5",))
        t.__enter__()
        try:
            t.wait_ready()
        except BaseException:
            t.__exit__()
            raise
        modes_rows(remora, it, secs, t, [("wall (async_short)", ()), ("wall --async", ("--async",))])


def modes_rows(remora, it, secs, t, modes):
    """modes_table's rows for target t (ended after): each (label, flags) MODES_RUNS times."""
    try:
        for mode, flags in modes:
            rows = []
            with bpf_stats():
                for _ in range(MODES_RUNS):
                    p = subprocess.run([remora, "record", "-p", str(t.pid), "-r", "1000", "-d", str(secs),
                                        "--stats", *flags, "-o", scratch_output(), "-f", "collapsed"],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                       timeout=600)
                    k, tk, sw = KERNEL.search(p.stderr), TICK_NS.search(p.stderr), SWITCH.search(p.stderr)
                    e = ENGINE.search(p.stderr)
                    if not (k and tk and sw):
                        continue
                    runs, ns, truns, tns = int(k.group(2)), int(k.group(3)), int(tk.group(1)), int(tk.group(2))
                    walks = int(sw.group(1))
                    rows.append((e.group(1) if e else "?", truns / secs, tns / 1e3 / max(truns, 1),
                                 (ns - tns) / 1e3 / max(runs - truns, 1), walks / secs,
                                 (ns - tns) / 1e3 / max(walks, 1)))
            if not rows:
                print("| %s | %s | not measured ||||||" % (it[0], mode))
                continue
            med = [statistics.median(r[i] for r in rows) for i in range(1, 6)]
            print("| %s | %s | %s | %.0f | %.2f | %.2f | %.0f | %.1f |" % (
                it[0], mode, rows[0][0], *med), flush=True)
    finally:
        t.__exit__()


def memory_table(remora, interps):
    it = ([i for i in interps if i[0] == "pyenv-3.12.1"] or interps)[0]
    print("\n## Memory: 10 million thread samples of a depth-100, 8-thread target (%s)\n" % it[0])
    t = busy(it, 100, 8, 900)
    try:
        rounds = 10_000_000 // 8
        s = remora_stats(remora, t.pid, "1M", 600, ("--max-samples", str(rounds)), idle=True)
    finally:
        t.__exit__()
    print("rounds=%d thread samples=%d peak RSS=%.1f MB" % (s["samples"], s["samples"] * 8, s["maxrss_kb"] / 1024))


MEMCOST_PYTHON = "/usr/bin/python3.11"    # Debian's: numpy imports there


def memory_mode_table(remora, quick):
    """Issue 49's cost: the target's own work rate under `record --mode memory` at the
    default fault period, against its runs alone (mem_cost.py: the allocating programs of
    tests/targets/real/ and an allocation-heavy loop, then the worst case, a loop that
    only faults), and the BPF walker's run time per sample."""
    import mem_cost
    if not os.path.exists(MEMCOST_PYTHON):
        print("\n## Memory mode: skipped (no %s)" % MEMCOST_PYTHON)
        return
    loads = ["alloc", "leak", "fault"]
    if subprocess.run([MEMCOST_PYTHON, "-c", "import numpy"], stdout=subprocess.DEVNULL,
                      stderr=subprocess.DEVNULL).returncode == 0:
        loads.insert(2, "numpy")
    pairs, seconds = (4, 1.0) if quick else (16, 2.0)
    print("\n## Memory mode: the target's own rate alone and under `record --mode memory` "
          "(%s, %d pairs of %.0f s, load average %.1f)\n" % (MEMCOST_PYTHON, pairs, seconds, os.getloadavg()[0]))
    res = mem_cost.run([remora], loads, MEMCOST_PYTHON, pairs, seconds, log=lambda *a: None)
    mem_cost.table(res, [remora], {remora: "remora"})
    print("\n(load average %.1f after; the slowdown of each pair against the mean of the runs "
          "alone before and after it; the walker's share: its BPF run time over the loop's CPU time)"
          % os.getloadavg()[0])
    # the same in one run a load, remora paused and resumed every half second: the machine's
    # speed, which moves by tens of percent between runs here, cancels between neighbours
    window, run_s = 0.5, 10.0 if quick else 40.0
    print("\n## Memory mode, toggled: one %.0f s run a load under `record --mode memory --control`, "
          "paused and resumed every %.1f s, the loop on CPU 1 and remora on CPU 0\n" % (run_s, window))
    res = mem_cost.run_toggled(remora, loads, MEMCOST_PYTHON, run_s, window, log=lambda *a: None)
    mem_cost.toggled_table(res, "remora", window)


FIDELITY_SAMPLES = 20000     # main-thread samples each profiler must reach
FIDELITY_RATE, FIDELITY_SECONDS = 1000, 25
FIDELITY_MAX_WINDOWS = 3     # more windows (sized from the rate achieved) if one was too few


def tachyon_window(root, pid, rate, seconds):
    """Tachyon (python3.15 -m profiling.sampling, in the chroot) for one window: its
    collapsed stacks as [(thread id, [(file basename, function, line)], count)], its
    stdout."""
    proc_dir = os.path.join(root, "proc")
    if not os.path.exists(os.path.join(proc_dir, "self")):
        subprocess.run(["mount", "-t", "proc", "proc", proc_dir], check=False)
    name = "tachyon-fidelity-%d.collapsed" % os.getpid()
    out = os.path.join(root, "tmp", name)
    p = subprocess.run(["chroot", root, "/usr/bin/python3.15", "-m", "profiling.sampling", "attach", "-a",
                        "-r", str(rate), "-d", str(int(math.ceil(seconds))), "--collapsed", "-o", "/tmp/" + name,
                        str(pid)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
    stacks = []
    if os.path.exists(out):
        with open(out) as f:        # tid:N;file:function:line;... COUNT
            for line in f:
                head, _, count = line.rstrip("\n").rpartition(" ")
                parts = head.split(";")
                if not count.isdigit() or not parts[0].startswith("tid:"):
                    continue
                frames = []
                for fr in parts[1:]:
                    bits = fr.split(":")
                    frames.append((bits[0], ":".join(bits[1:-1]), bits[-1]) if len(bits) >= 3 else (None, fr, None))
                stacks.append((int(parts[0][4:]), frames, int(count)))
        os.unlink(out)
    return stacks, p.stdout


def fidelity_profile(remora, interp, how):
    """One work_mix.py target recorded by 'how' (remora, remora --blocking, tachyon) for
    windows between marks of the target's clock until FIDELITY_SAMPLES main-thread samples:
    {function: (clock %, profiler %)}, main samples, rounds, errors, partial, marker samples,
    the clock's sum over the loop (%), windows."""
    sys.path.insert(0, os.path.join(HERE, "..", "functional"))
    import fidelity_tests as F
    t = Target(interp, os.path.join(TARGETS, "work_mix.py"), "ready.json")
    t.__enter__()
    try:
        ready = t.wait_ready()
        fns = ready["functions"]
        base = os.path.basename(ready["file"])
        clock = dict.fromkeys(fns, 0)
        hits = dict.fromkeys(fns, 0)
        window_ns = main = rounds = errors = marker = 0
        partial = None
        seconds, n_mark, windows = FIDELITY_SECONDS, 0, 0
        while main < FIDELITY_SAMPLES and windows < FIDELITY_MAX_WINDOWS:
            n_mark += 1
            before = F.mark(t, n_mark)
            if how == "tachyon":
                stacks, out = tachyon_window(interp[2], t.pid, FIDELITY_RATE, seconds)
                mine = [(fr, c) for tid, fr, c in stacks if tid == ready["main"]]
                got = sum(c for _, c in mine)
                for fn in fns:
                    hits[fn] += sum(c for fr, c in mine if any(f[1] == fn and f[0] == base for f in fr))
                m = re.search(r"Captured ([\d,]+) samples", out)
                rounds += int(m.group(1).replace(",", "")) if m else got
                m = re.search(r"missed ([\d,]+) samples", out)
                errors += int(m.group(1).replace(",", "")) if m else 0
                said = [l.strip() for l in out.splitlines()
                        if re.match(r"\s*(Captured|Error rate|Warning: missed)", l)]
                print("Tachyon, window %d: %s" % (windows + 1, "; ".join(said) or out.strip()[-300:]))
            else:
                path = os.path.join(t.dir, "fidelity.collapsed")
                p = subprocess.run([remora, "record", "-p", str(t.pid), "-r", str(FIDELITY_RATE), "-d",
                                    str(seconds), "--mode", "wall", "--stats", "-o", path]
                                   + (["--blocking"] if how == "blocking" else []),
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=600)
                run = F.Run(p.stderr, FIDELITY_RATE)
                stacks = [s for s in parse_collapsed(path) if s.tid == ready["main"]]
                got = sum(s.count for s in stacks)
                for fn in fns:
                    hits[fn] += sum(s.count for s in stacks
                                    if any(f[0] == fn and f[1] == ready["file"] for f in s.frames))
                marker += sum(s.count for s in stacks if F.ends_moving(s))
                rounds += run.rounds
                errors += run.errors
                if run.partial is not None:
                    partial = (partial or 0) + run.partial
            after = F.mark(t, n_mark + 1)
            n_mark += 1
            for fn in fns:
                clock[fn] += after["wall"][fn] - before["wall"][fn]
            window_ns += after["at"] - before["at"]
            main += got
            windows += 1
            rate = got / max(seconds, 1e-9)
            if main < FIDELITY_SAMPLES and rate > 0:
                seconds = min(60, int(math.ceil((FIDELITY_SAMPLES - main) * 1.2 / rate)))
    finally:
        t.__exit__()
    shares = {fn: (100.0 * clock[fn] / window_ns, 100.0 * hits[fn] / max(main, 1)) for fn in fns}
    return shares, main, rounds, errors, partial, marker, 100.0 * sum(clock.values()) / window_ns, windows


def fidelity_table(remora, interps):
    sid315 = [i for i in interps if i[0] == "sid-3.15"]
    if not sid315:
        print("\n## Fidelity: not measured (no sid-3.15)")
        return
    it = sid315[0]
    print("\n## Fidelity: each function's share of tests/targets/work_mix.py on %s, %d Hz, "
          "at least %d main-thread samples each, against the target's own clock\n"
          % (it[0], FIDELITY_RATE, FIDELITY_SAMPLES))
    print("'clock' is the function's inclusive wall time (the target's perf_counter_ns) as a share "
          "of the windows the profiler recorded (one target, its own windows per profiler: the "
          "clock column is remora's windows'); each profiler's column is the share of the main "
          "thread's samples whose stack holds the function.\n")
    res = {}
    for how in ("remora", "blocking", "tachyon"):
        if how == "tachyon" and not os.path.exists(os.path.join(it[2], "usr/lib/python3.15/profiling/sampling")):
            res[how] = None
            continue
        res[how] = fidelity_profile(remora, it, how)
    fns = list(res["remora"][0])
    cols = [h for h in ("remora", "blocking", "tachyon") if res[h]]
    print("| function | clock | remora | remora --blocking | Tachyon |")
    print("|---|---|---|---|---|")
    for fn in fns:
        cells = []
        for how in ("remora", "blocking", "tachyon"):
            if res[how] is None:
                cells.append("n/a")
            else:
                c, g = res[how][0][fn]
                cells.append("%.1f%% (%+.1f; clock %.1f%%)" % (g, g - c, c) if how != "remora"
                             else "%.1f%% (%+.1f)" % (g, g - c))
        print("| %s | %.1f%% | %s |" % (fn, res["remora"][0][fn][0], " | ".join(cells)))
    print()
    print("Errors: remora's thread samples it could not read (the summary's count), Tachyon's "
          "samples it says it missed; rounds: remora's rounds, Tachyon's captured samples. "
          "Clock sum: the work functions' share of the windows (the loop's own time is the rest).\n")
    print("| profiler | main-thread samples | rounds | errors | partial | `<moving>` | clock sum | windows | worst gap |")
    print("|---|---|---|---|---|---|---|---|---|")
    for how in cols:
        shares, main, rounds, errors, partial, marker, csum, windows = res[how]
        worst = max(shares, key=lambda fn: abs(shares[fn][1] - shares[fn][0]))
        print("| %s | %d | %d | %d (%.1f%%) | %s | %.1f%% | %.1f%% | %d | %s %+.1f |" % (
            {"remora": "remora", "blocking": "remora --blocking", "tachyon": "Tachyon"}[how],
            main, rounds, errors, 100.0 * errors / max(rounds, 1),
            "n/a" if partial is None else "%d (%.1f%%)" % (partial, 100.0 * partial / max(rounds, 1)),
            100.0 * marker / max(main, 1), csum, windows, worst, shares[worst][1] - shares[worst][0]), flush=True)


if __name__ == "__main__":
    main()
