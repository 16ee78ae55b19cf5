#!/usr/bin/env python3
# The cost of --native to the target (issue 48): tests/targets/native_spin.py's own work
# rate (py_work's iterations a second, counted by the target) while nothing records it,
# while `record --native --blocking` (the stop-the-world read) records it and while
# `record --native` (the kernel engine: copies at the tick) does, at RATE; and the BPF
# frame walker's run time per tick (kernel.bpf_stats_enabled=1, --stats' tick_ns and
# tick_runs) with --native and without; and the work per second of the spinner's own CPU
# time (/proc schedstat: the ticks' BPF time, in its interrupts, counts in it; a stop,
# off its CPU, does not), which the machine's other load does not move. Windows alternate, WINDOWS of each, SECONDS long.
# The target runs on CPU 0, remora on CPU 1 (a 2-core machine: otherwise remora's own CPU,
# its start included, is taken from the target's).
#
#   python3 tests/bench/native_tick.py [--remora ./remora] [--python PYTHON] [--rate 1000]
#                                      [--seconds 3] [--windows 3]
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TARGET = os.path.join(HERE, "..", "targets", "native_spin.py")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--remora", default="./remora")
    ap.add_argument("--python", default=os.path.expanduser("~/.pyenv/versions/3.12.1/bin/python3.12"))
    ap.add_argument("--rate", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=3)
    ap.add_argument("--windows", type=int, default=3)
    a = ap.parse_args()
    try:
        with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
            f.write("1")
    except OSError as e:
        print("kernel.bpf_stats_enabled not set (%s): tick_ns will read 0" % e, file=sys.stderr)
    d = tempfile.mkdtemp(prefix="remora-nt-")
    ready = os.path.join(d, "ready.json")
    ncpu = os.cpu_count() or 1
    pin = (lambda cpu: (lambda: os.sched_setaffinity(0, {cpu}))) if ncpu >= 2 else (lambda cpu: None)
    t = subprocess.Popen([a.python, TARGET, ready], stdin=subprocess.PIPE, preexec_fn=pin(0))
    seq = [0]
    pid = tid = 0

    def count():
        seq[0] += 1
        t.stdin.write(b"%d\n" % seq[0])
        t.stdin.flush()
        path = ready + ".count%d" % seq[0]
        while not os.path.exists(path):
            time.sleep(0.001)
        with open(path) as f:
            doc = json.load(f)
        with open("/proc/%d/task/%d/schedstat" % (pid, tid)) as f:
            cpu = int(f.read().split()[0]) / 1e9
        return doc["count"], doc["t"], cpu

    try:
        while not os.path.exists(ready):
            time.sleep(0.01)
        doc = json.load(open(ready))
        pid, tid = doc["pid"], doc["tid"]
        configs = [("none", None), ("--native --blocking", ["--native", "--blocking"]),
                   ("--native (kernel)", ["--native"]), ("plain (kernel)", [])]
        rates = {name: [] for name, _ in configs}
        ticks = {name: [] for name, _ in configs}
        kept = {name: [] for name, _ in configs}
        percpu = {name: [] for name, _ in configs}
        for _ in range(a.windows):
            for name, flags in configs:
                if flags is None:
                    c0, t0, u0 = count()
                    time.sleep(a.seconds)
                    c1, t1, u1 = count()
                else:
                    rec = subprocess.Popen([a.remora, "record", "-p", str(pid), "-r", str(a.rate), "-d",
                                            str(a.seconds), "--stats", "-o", os.path.join(d, "x.collapsed")]
                                           + flags, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                           preexec_fn=pin(1))
                    # the window: from the first sample's status to the end (no sleep-sync
                    # needed: the counts are read at both ends of the recording's run)
                    c0, t0, u0 = count()
                    err = rec.communicate()[1].decode()
                    c1, t1, u1 = count()
                    m = re.search(r"tick_runs=(\d+) tick_ns=(\d+)", err)
                    if m and int(m.group(1)):
                        ticks[name].append(int(m.group(2)) / int(m.group(1)))
                    m = re.search(r"(\d+) rounds taken of (\d+) asked", err)
                    if m:
                        kept[name].append(int(m.group(1)) / int(m.group(2)))
                rates[name].append((c1 - c0) / (t1 - t0))
                percpu[name].append((c1 - c0) / max(u1 - u0, 1e-9))
        base = sum(rates["none"]) / len(rates["none"])
        print("| recording | work rate (iterations/s) | vs none | windows (vs none's mean) | per CPU-second, vs none | BPF ns/tick | rounds kept |")
        print("|---|---|---|---|---|---|---|")
        cbase = sum(percpu["none"]) / len(percpu["none"])
        for name, _ in configs:
            r = sum(rates[name]) / len(rates[name])
            tk = "%.0f" % (sum(ticks[name]) / len(ticks[name])) if ticks[name] else "-"
            kp = "%.1f%%" % (100 * sum(kept[name]) / len(kept[name])) if kept[name] else "-"
            ws = " ".join("%+.0f" % (100 * (w / base - 1)) for w in rates[name])
            pc = sum(percpu[name]) / len(percpu[name])
            print("| %s | %.0f | %+.1f%% | %s | %+.1f%% | %s | %s |" % (name, r, 100 * (r / base - 1), ws,
                                                               100 * (pc / cbase - 1), tk, kp))
    finally:
        t.stdin.close()
        t.wait()


if __name__ == "__main__":
    main()
