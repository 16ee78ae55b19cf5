"""remora's benchmarks: measures, never asserts. Prints a table of figures.

First the floor under all of them: what one process_vm_readv costs here, per call, per
range and per page (tests/bench/vmread.c).

    python3 tests/bench/bench.py [--remora ./remora] [--vmread build/vmread] [--quick]
                                 [--only NAME] [--sections floor,rate,slowdown,tachyon,memory]

For each interpreter found (as tests/functional/run.py finds them): targets busy at
depth 1, 50, 100 and 300 with 1 and 8 threads (3.15 also with --frame-anchor), sampled as fast as remora can (asked for
1 MHz): achieved samples/s, CPU us per sample, reads per sample. The target's own
slowdown at 1 kHz and 10 kHz (depth 50, one thread): recorded windows against unprofiled
windows of the same run, with an unprofiled-against-unprofiled control. Tachyon
(python3.15 -m profiling.sampling, in the chroot) against the same 3.15 target: CPU per
sample, remora / Tachyon. A 10-million-sample recording of a deep-stack target:
remora's peak resident memory.
"""
import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "functional"))
from harness import INTERPRETERS, TARGETS, Target, interp_missing  # noqa: E402

STATS = re.compile(r"stats: samples=(\d+) errors=(\d+) reads=(\d+) bytes=(\d+) "
                   r"reads_per_sample=([\d.]+) cpu_us_per_sample=([\d.]+)")
MEMORY = re.compile(r"memory: maxrss_kb=(\d+)")


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


def remora_stats(remora, pid, rate, seconds, extra=(), cpu=None):
    p = subprocess.run([remora, "record", "-p", str(pid), "-r", rate, "-d", str(seconds), "--stats",
                        "-o", os.devnull, "-f", "collapsed", *extra],
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=600,
                       preexec_fn=None if cpu is None else lambda: os.sched_setaffinity(0, {cpu}))
    m = STATS.search(p.stderr)
    if not m:
        raise RuntimeError("no stats line: " + p.stderr.strip()[-300:])
    samples, errors, reads, nbytes, rps, cpu = (float(x) for x in m.groups()[:6])
    return {"samples": samples, "rate": samples / seconds, "errors": errors, "rps": rps, "cpu": cpu,
            "maxrss_kb": int(MEMORY.search(p.stderr).group(1)) if MEMORY.search(p.stderr) else 0}


PAIRS = 12
WINDOW = 0.5


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


def slowdown(remora, t, rate):
    """The target's slowdown while recorded at 'rate' (None: not recorded, the control):
    the median over PAIRS windows of its rate in the window against the mean of the
    unprofiled windows either side. The target runs on CPU 0 and remora on CPU 1, so
    that what is measured is remora's effect on the target, not the two taking turns on
    one CPU. The first 0.1 s of a recorded window (remora attaching) is left out.
    Returns (median, the unprofiled rate)."""
    two = len(os.sched_getaffinity(0)) >= 2
    if two:
        pin(t.pid, 0)
    times = [time.monotonic()]
    for _ in range(PAIRS):
        if rate:
            remora_stats(remora, t.pid, rate, WINDOW, cpu=1 if two else None)
        else:
            time.sleep(WINDOW)     # a window's length, not a synchronisation
        times.append(time.monotonic())
        time.sleep(WINDOW)
        times.append(time.monotonic())
    with open(t.host_path(t.out) + ".log") as f:
        points = [tuple(float(x) for x in line.split()) for line in f if line.count(" ") == 1]
    on = [log_rate(points, times[2 * i] + 0.1, times[2 * i + 1] - 0.02) for i in range(PAIRS)]
    off = [log_rate(points, times[2 * i + 1] + 0.02, times[2 * i + 2] - 0.02) for i in range(PAIRS)]
    ratios = []
    for i in range(PAIRS):
        around = [x for x in (off[i - 1] if i else None, off[i]) if x]
        if on[i] and around:
            ratios.append(on[i] / (sum(around) / len(around)) - 1)
    if not ratios:
        raise RuntimeError("the target's log has no points in the windows")
    return statistics.median(ratios), statistics.median([x for x in off if x])


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
    ap.add_argument("--sections", default="floor,rate,slowdown,tachyon,memory",
                    help="which tables, comma-separated (default: all)")
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
        slowdown_table(remora, interps)
    if "tachyon" in sections:
        tachyon_table(remora, interps, secs)
    if "memory" in sections and not args.quick and interps:
        memory_table(remora, interps)


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


def slowdown_table(remora, interps):
    print("\n## Target slowdown (depth 50, one thread; median of %d windows)\n" % PAIRS)
    print("One target run per row (on CPU 0; remora on CPU 1), its own iteration count logged "
          "every 20 ms: windows of %.1f s with remora recording alternate with windows without; "
          "a cell is the median over windows of (iterations/s in it) / (iterations/s in the "
          "unprofiled windows either side) - 1. 'none' records in no window: the noise floor.\n"
          % WINDOW)
    print("| interpreter | unprofiled it/s | none | at 1 kHz | at 10 kHz |")
    print("|---|---|---|---|---|")
    for it in interps:
        t = busy(it, 50, 1, 3 * PAIRS * 2 * WINDOW + 60, log=True)
        try:
            cols, base = [], 0.0
            for rate in (None, "1k", "10k"):
                med, base_rate = slowdown(remora, t, rate)
                cols.append(med)
                base = base or base_rate
        finally:
            t.__exit__()
        print("| %s | %.0f | %+.2f%% | %+.2f%% | %+.2f%% |" % (it[0], base, 100 * cols[0], 100 * cols[1],
                                                            100 * cols[2]), flush=True)


def tachyon_table(remora, interps, secs):
    sid315 = [i for i in interps if i[0] == "sid-3.15"]
    if sid315:
        print("\n## remora and Tachyon on the same 3.15 target (depth 50, one thread, asked for 1 MHz)\n")
        it = sid315[0]
        t = busy(it, 50, 1, secs * 3 + 60)
        try:
            s = remora_stats(remora, t.pid, "1M", secs)
            sa = remora_stats(remora, t.pid, "1M", secs, ("--frame-anchor",))
            ty = tachyon(it, t.pid, secs)
        finally:
            t.__exit__()
        if ty is None or "error" in ty:
            print("Tachyon could not run: %s" % (ty or {}).get("error", "python3.15's profiling.sampling not found"))
        else:
            print("| profiler | samples/s | CPU us/sample |")
            print("|---|---|---|")
            print("| remora | %.0f | %.2f |" % (s["rate"], s["cpu"]))
            print("| remora --frame-anchor | %.0f | %.2f |" % (sa["rate"], sa["cpu"]))
            print("| Tachyon | %.0f | %.2f |" % (ty["rate"], ty["cpu_us"]))
            print("\nCPU per sample, remora / Tachyon: %.2f (with --frame-anchor: %.2f)"
                  % (s["cpu"] / ty["cpu_us"], sa["cpu"] / ty["cpu_us"]))


def memory_table(remora, interps):
    it = ([i for i in interps if i[0] == "pyenv-3.12.1"] or interps)[0]
    print("\n## Memory: 10 million thread samples of a depth-100, 8-thread target (%s)\n" % it[0])
    t = busy(it, 100, 8, 900)
    try:
        rounds = 10_000_000 // 8
        s = remora_stats(remora, t.pid, "1M", 600, ("--max-samples", str(rounds)))
    finally:
        t.__exit__()
    print("rounds=%d thread samples=%d peak RSS=%.1f MB" % (s["samples"], s["samples"] * 8, s["maxrss_kb"] / 1024))


if __name__ == "__main__":
    main()
