#!/usr/bin/env python3
"""Runs each libFuzzer target built by `make fuzz-build` for a bounded time.

    python3 tests/fuzz/run.py --bin build-fuzz --seconds 60 [--jobs 2] TARGET...

Each target starts from its committed seeds (tests/fuzz/corpus/T) and crash inputs
(tests/fuzz/regress/T); what it finds goes to BIN/corpus/T (not committed). A crash, leak,
sanitizer report or timeout fails the target and leaves the input in BIN/artifacts/: once
the bug is fixed, commit that input to tests/fuzz/regress/T/ so that `make test` replays it.
Prints one line per target (executions, coverage, corpus size), then
"fuzz: N passed, N failed"; exits 1 if any failed.
"""
import argparse
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
STAT = re.compile(r"^stat::(\w+):\s+(\d+)", re.M)
DONE = re.compile(r"#(\d+)\s+DONE\s+cov: (\d+) ft: (\d+) corp: (\d+)/(\S+)")


def corpus_bytes(d):
    return sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d)) if os.path.isdir(d) else 0


def run_target(binary_dir, target, seconds):
    work = os.path.join(binary_dir, "corpus", target)
    arts = os.path.join(binary_dir, "artifacts")
    os.makedirs(work, exist_ok=True)
    os.makedirs(arts, exist_ok=True)
    dirs = [work] + [d for d in (os.path.join(HERE, "corpus", target),
                                 os.path.join(HERE, "regress", target)) if os.path.isdir(d)]
    log = os.path.join(binary_dir, "fuzz-%s.log" % target)
    argv = [os.path.join(binary_dir, "fuzz-" + target)] + dirs + [
        "-max_total_time=%d" % seconds, "-print_final_stats=1", "-timeout=10",
        "-rss_limit_mb=2048", "-artifact_prefix=%s/%s-" % (arts, target)]
    env = dict(os.environ)
    env.setdefault("ASAN_OPTIONS", "detect_leaks=1")
    env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1")
    start = time.monotonic()
    with open(log, "w") as f:
        rc = subprocess.call(argv, stdout=f, stderr=subprocess.STDOUT, env=env,
                             timeout=seconds * 3 + 120)
    with open(log, errors="replace") as f:
        text = f.read()
    stats = {k: int(v) for k, v in STAT.findall(text)}
    done = DONE.findall(text)
    cov = done[-1][1] if done else "?"
    corp = done[-1][3] if done else "?"
    execs = stats.get("number_of_executed_units", 0)
    took = time.monotonic() - start
    line = "%s: %d executions in %.0fs (%d/s), coverage %s, corpus %s inputs / %d KB" % (
        target, execs, took, execs / took if took else 0, cov, corp, corpus_bytes(work) >> 10)
    if rc != 0:
        crash = re.findall(r"Test unit written to (\S+)", text)
        why = re.findall(r"==\d+==ERROR: (.*)|(runtime error: .*)|(fuzz: invariant broken.*)", text)
        first = next((w for g in why for w in g if w), "exit %d" % rc)
        return False, "FAIL %s -- %s; input: %s; log: %s" % (line, first, crash[0] if crash else "?", log)
    return True, "PASS " + line


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="build-fuzz")
    ap.add_argument("--seconds", type=int, default=int(os.environ.get("FUZZ_SECONDS", "60")))
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("targets", nargs="+")
    args = ap.parse_args()
    with ThreadPoolExecutor(max_workers=args.jobs) as ex:
        results = list(ex.map(lambda t: run_target(args.bin, t, args.seconds), args.targets))
    passed = failed = 0
    for ok, line in results:
        print(line, flush=True)
        passed += ok
        failed += not ok
    print("fuzz: %d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
