"""The cost of `record --mode memory` to its target (issue 49; docs/measured.md, "Memory
mode"): measures, never asserts.

    python3 tests/bench/mem_cost.py [--python /usr/bin/python3.11] [--pairs 8] [--seconds 3]
                                    REMORA [REMORA ...]

Each REMORA is a remora binary (one built with another CLI_MEMORY_FAULTS, the fault period,
measures that period). A target loop that grows and shrinks by page faults (each round:
5,000 small dicts, then a 4 MB anonymous mapping written a byte a page and unmapped: 1,024
faults a round) runs SECONDS alone, then SECONDS under `REMORA record --mode memory
--stats` for each binary, PAIRS times in turn; its work rate is rounds per CPU second of
its loop, by its own clock (this machine's wall rates move with the load of others), each
recorded run also read against the mean of the runs alone just before and after it. The
BPF run time per sample is --stats' tick_ns / tick_runs, with bpf(BPF_ENABLE_STATS) held
open for the run (the kernel counts run time only while one is). Prints, per binary, the
median rate alone and recorded, the slowdown, the median ns a sample and samples a second.
Needs root."""

import argparse
import ctypes
import os
import re
import statistics
import subprocess
import sys
import tempfile

LOOP = r"""
import mmap, sys, time
seconds = float(sys.argv[1])
MB4 = 4 << 20
rounds, t0, c0 = 0, time.monotonic(), time.process_time()
while time.monotonic() - t0 < seconds:
    keep = [{"i": i} for i in range(5000)]
    m = mmap.mmap(-1, MB4)
    for off in range(0, MB4, 4096):
        m[off] = 1
    m.close()
    del keep
    rounds += 1
print(rounds / (time.process_time() - c0))
"""
TICK = re.compile(r"tick_runs=(\d+) tick_ns=(\d+)")
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


def one(python, loop, seconds, remora=None, out=None):
    """(rounds per CPU second, tick_runs, tick_ns) of one run of the loop."""
    cmd = [python, loop, str(seconds)]
    if remora is None:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=True)
        return float(p.stdout.strip()), 0, 0
    p = subprocess.run([remora, "record", "--mode", "memory", "--stats", "-o", out, "--"] + cmd,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.exit("%s exited %d: %s" % (remora, p.returncode, p.stderr.strip()[-300:]))
    m = TICK.search(p.stderr)
    return float(p.stdout.strip()), int(m.group(1)) if m else 0, int(m.group(2)) if m else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("remoras", nargs="+")
    ap.add_argument("--python", default="/usr/bin/python3.11")
    ap.add_argument("--pairs", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=3.0)
    a = ap.parse_args()
    stats_fd = enable_bpf_stats()
    d = tempfile.mkdtemp(prefix="remora-memcost-")
    loop = os.path.join(d, "fault_loop.py")
    with open(loop, "w") as f:
        f.write(LOOP)
    alone, rec = [], {r: [] for r in a.remoras}
    for k in range(a.pairs):
        # a run alone on each side of the recorded ones: each recorded rate is read against
        # the mean of the two around it, which the others' load on this machine moved
        # least (its rates move by 1.5x from minute to minute)
        if not alone:
            alone.append(one(a.python, loop, a.seconds)[0])
        order = list(a.remoras) if k % 2 == 0 else list(reversed(a.remoras))
        got = {r: one(a.python, loop, a.seconds, r, os.path.join(d, "x.collapsed")) for r in order}
        alone.append(one(a.python, loop, a.seconds)[0])
        for r in a.remoras:
            rec[r].append(got[r] + ((alone[-2] + alone[-1]) / 2,))
        print("pair %d: alone %.1f/%.1f, %s" % (k + 1, alone[-2], alone[-1], ", ".join(
            "%.1f" % rec[r][-1][0] for r in a.remoras)), flush=True)
    base = statistics.median(alone)
    print("alone: median %.1f rounds per CPU second (%d runs)%s"
          % (base, len(alone), "" if stats_fd is not None else "; no BPF run-time stats"))
    for r in a.remoras:
        rates = [x[0] for x in rec[r]]
        per = [x[2] / x[1] for x in rec[r] if x[1] > 0]
        runs = sum(x[1] for x in rec[r]) / len(rec[r])
        paired = statistics.median(100.0 * (1 - x[0] / x[3]) for x in rec[r])
        print("%s: median %.1f (%.1f%% slower; paired with the runs alone around it: median "
              "%.1f%%), BPF %s ns a sample (median), %.0f samples a run"
              % (r, statistics.median(rates), 100.0 * (1 - statistics.median(rates) / base), paired,
                 "%.0f" % statistics.median(per) if per else "?", runs))


if __name__ == "__main__":
    main()
