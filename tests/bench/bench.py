"""remora's benchmarks: measures, never asserts. Prints a table of figures.

    python3 tests/bench/bench.py [--remora ./remora] [--quick]

For each interpreter found (as tests/functional/run.py finds them): targets busy at
depth 1, 50, 100 and 300 with 1 and 8 threads (3.15 also with --frame-anchor), sampled as fast as remora can (asked for
1 MHz): achieved samples/s, CPU us per sample, reads per sample. The target's own
slowdown at 1 kHz and 10 kHz against an unprofiled run (depth 50, one thread). Tachyon
(python3.15 -m profiling.sampling, in the chroot) against the same 3.15 target: CPU per
sample, remora / Tachyon. A 10-million-sample recording of a deep-stack target:
remora's peak resident memory.
"""
import argparse
import os
import re
import resource
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "functional"))
from harness import INTERPRETERS, TARGETS, Target, interp_missing  # noqa: E402

STATS = re.compile(r"stats: samples=(\d+) errors=(\d+) reads=(\d+) bytes=(\d+) "
                   r"reads_per_sample=([\d.]+) cpu_us_per_sample=([\d.]+)")
MEMORY = re.compile(r"memory: maxrss_kb=(\d+)")


def busy(interp, depth, nthreads, seconds):
    """busy.py under interp, started and ready (a context manager)."""
    t = Target(interp, os.path.join(TARGETS, "busy.py"), "ready", (depth, nthreads, seconds))
    t.__enter__()
    try:
        t.wait_ready()
    except BaseException:
        t.__exit__()
        raise
    return t


def throughput(t):
    """The target's own loop iterations per second, once it has finished."""
    t.proc.wait(timeout=300)
    with open(t.host_path(t.out) + ".done") as f:
        total, elapsed = f.read().split()
    return int(total) / float(elapsed)


def remora_stats(remora, pid, rate, seconds, extra=()):
    p = subprocess.run([remora, "record", "-p", str(pid), "-r", rate, "-d", str(seconds), "--stats",
                        "-o", os.devnull, "-f", "collapsed", *extra],
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=600)
    m = STATS.search(p.stderr)
    if not m:
        raise RuntimeError("no stats line: " + p.stderr.strip()[-300:])
    samples, errors, reads, nbytes, rps, cpu = (float(x) for x in m.groups()[:6])
    return {"samples": samples, "rate": samples / seconds, "errors": errors, "rps": rps, "cpu": cpu,
            "maxrss_kb": int(MEMORY.search(p.stderr).group(1)) if MEMORY.search(p.stderr) else 0}


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
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    remora = os.path.abspath(args.remora)
    secs = 1.0 if args.quick else 2.0
    interps = [i for i in INTERPRETERS if args.only in i[0] and not interp_missing(i)]
    if args.quick:
        interps = [i for i in interps if i[0] in ("pyenv-3.12.1", "sid-3.13", "sid-3.15")]

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

    print("\n## Target slowdown (depth 50, one thread, %.0f s runs)\n" % (secs * 2))
    print("| interpreter | unprofiled it/s | at 1 kHz | at 10 kHz |")
    print("|---|---|---|---|")
    for it in interps:
        rates = {}
        for rate in (None, "1k", "10k"):
            t = busy(it, 50, 1, secs * 2)
            try:
                if rate:
                    remora_stats(remora, t.pid, rate, secs * 2 + 5)
                rates[rate] = throughput(t)
            finally:
                t.__exit__()
        base = rates[None]
        print("| %s | %.0f | %+.1f%% | %+.1f%% |" % (it[0], base, 100 * (rates["1k"] / base - 1),
                                                    100 * (rates["10k"] / base - 1)), flush=True)

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

    if not args.quick and interps:
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
