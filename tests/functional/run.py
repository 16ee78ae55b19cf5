#!/usr/bin/env python3
# Functional tests: run real interpreters (pyenv 3.9-3.13, Debian's static 3.11, and
# 3.13-3.15 PIE/non-PIE in the test chroot) with the targets in tests/targets/, and compare
# remora's output with the ground truth each target writes about itself. The tests of
# `remora dump` are here; those of `remora record` and `convert` in record_tests.py, the
# others in the *_tests.py modules; the shared helpers (interpreters, running remora,
# targets, recordings) in harness.py and the parts it gathers, the readers of remora's output
# formats in formats.py.
#
#   python3 tests/functional/run.py [--remora PATH] [--only SUBSTRING] [--timeout SECONDS] [--list]
#
# Environment: REMORA_CHROOT (default /var/cache/remora/sid), REMORA_WRAPPER (a command
# prefixed to every remora invocation, e.g. "valgrind -q --error-exitcode=99"),
# REMORA_FIDELITY=1 (adds the fidelity/mix tests to the default run).
# Prints one line per test (PASS/FAIL/SKIP), then "functional: N passed, N failed, N skipped";
# exits 1 if any test failed. Standard library only (runs on the host's python3).

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

from harness import (HOST_PYTHON, INTERPRETERS, OLD_PYTHONS, REPO, TARGETS, Fail, Remora, Skip, Target,
                     dump_frames_problems, dump_threads_problems, expect_failure, free_pid,
                     interp_missing, one_line, tail)
from formats import parse_dump
import record_tests

GIL_DUMPS, GIL_NEEDED = 10, 9            # margin: one bad dump of ten is tolerated
EXIT_RACE_TARGETS = 50                   # short-lived targets in the exit-during-dump test

# --- known stacks -----------------------------------------------------------------------


def test_known_stacks(remora, interp):
    with Target(interp, os.path.join(TARGETS, "known_stacks.py"), "truth.json") as t:
        truth = t.wait_ready()
        t.wait_main_in_read()
        rc, out, err = remora.run(["dump", "-p", t.pid, "--json"])
        if rc != 0:
            raise Fail("`remora dump --json` exited %d: %s" % (rc, tail(err)))
        doc = parse_dump(out)
        problems, got, want = dump_threads_problems(doc, truth, t.pid)
        holders = [n for n, th in got.items() if th.get("gil") is True]
        if len(holders) > 1:
            problems.append("%d threads hold the GIL: %s" % (len(holders), holders))
        more, diff = dump_frames_problems(got, truth)
        problems += more

        rc, out, err = remora.run(["dump", "-p", t.pid])
        if rc != 0:
            problems.append("text `remora dump` exited %d: %s" % (rc, tail(err)))
        else:
            absent = [str(n) for n in sorted(want)
                      if not re.search(r"(?<!\d)%d(?!\d)" % n, out)]
            if absent:
                problems.append("text dump does not mention thread ids %s" % ", ".join(absent))
        if problems:
            raise Fail("; ".join(problems) + ("\n" + "\n".join("    " + l for l in diff)
                                              if diff else ""))


# --- GIL --------------------------------------------------------------------------------

def test_gil(remora, interp):
    with Target(interp, os.path.join(TARGETS, "gil_spin.py"), "ready.json") as t:
        ready = t.wait_ready()
        t.wait_main_in_read()
        quiet = ready["parked"] + [ready["main"]]
        good, bad = 0, []
        for i in range(GIL_DUMPS):
            rc, out, err = remora.run(["dump", "-p", t.pid, "--json"])
            if rc != 0:
                bad.append("dump %d exited %d: %s" % (i + 1, rc, tail(err, 1)))
                continue
            try:
                doc = parse_dump(out)
            except Fail as e:
                bad.append("dump %d: %s" % (i + 1, e))
                continue
            got = {th.get("native_id"): th for th in doc["threads"]}
            wrong = []
            sp = got.get(ready["spinner"])
            if sp is None:
                wrong.append("spinner %d absent" % ready["spinner"])
            elif sp.get("gil") is not True or sp.get("on_cpu") is not True:
                wrong.append("spinner gil=%s on_cpu=%s" % (sp.get("gil"), sp.get("on_cpu")))
            for n in quiet:
                th = got.get(n)
                if th is None:
                    wrong.append("thread %d absent" % n)
                elif th.get("gil") is not False or th.get("on_cpu") is not False:
                    wrong.append("parked %d gil=%s on_cpu=%s"
                                 % (n, th.get("gil"), th.get("on_cpu")))
            if wrong:
                bad.append("dump %d: %s" % (i + 1, ", ".join(wrong)))
            else:
                good += 1
        if good < GIL_NEEDED:
            raise Fail("%d/%d dumps right, need %d (margin: one bad dump tolerated); %s"
                       % (good, GIL_DUMPS, GIL_NEEDED, "; ".join(bad[:3])))
        return "%d/%d dumps right" % (good, GIL_DUMPS)


# --- errors -----------------------------------------------------------------------------

def test_usage(remora):
    expect_failure(remora, ["dump"], 1, "`remora dump` without -p")
    expect_failure(remora, ["dump", "-p", "notapid"], 1, "`remora dump -p notapid`")
    expect_failure(remora, ["no-such-command"], 1, "`remora no-such-command`")
    expect_failure(remora, ["no-such-command", "--help"], 1, "`remora no-such-command --help`")
    for cmd in ("dump", "record", "top", "convert"):
        rc, out, err = remora.run([cmd, "--help"])
        if rc != 0 or not out.startswith("usage: remora %s" % cmd) or err:
            raise Fail("`remora %s --help`: exit %d, want 0 and the usage on stdout; stderr: %s"
                       % (cmd, rc, tail(err)))


def test_no_such_pid(remora):
    pid = free_pid()
    expect_failure(remora, ["dump", "-p", pid], 2, "pid %d (no such process)" % pid)
    expect_failure(remora, ["dump", "-p", pid, "--json"], 2,
                   "pid %d (no such process), --json" % pid)


def test_not_python(remora):
    sleeper = subprocess.Popen(["sleep", "100"])   # returns once sleep is exec'd
    try:
        expect_failure(remora, ["dump", "-p", sleeper.pid], 4, "`sleep 100`")
    finally:
        sleeper.kill()
        sleeper.wait()


def test_unsupported_version(remora, want, python):
    """A Python remora does not read: exit 4, one line naming the version found."""
    if not os.access(python, os.X_OK):
        raise Skip("interpreter %s not found" % python)
    with Target(("old-" + want, python, None), os.path.join(TARGETS, "idle.py"), "ready") as t:
        t.wait_ready()
        err = expect_failure(remora, ["dump", "-p", t.pid], 4, "Python %s target" % want)
        if "Python " + want not in err:
            raise Fail("the message does not name Python %s: %s" % (want, one_line(err) or err.strip()))


def test_permission(remora):
    if shutil.which("setpriv") is None:
        raise Skip("setpriv not installed")
    drop = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
    probe = subprocess.run(drop + ["true"], capture_output=True)
    if probe.returncode != 0:
        raise Skip("cannot switch to uid 65534: %s" % tail(probe.stderr.decode()))
    if not os.access(HOST_PYTHON, os.X_OK):
        raise Skip("%s not found" % HOST_PYTHON)
    bindir = tempfile.mkdtemp(prefix="remora-func-bin-")
    try:
        os.chmod(bindir, 0o755)
        binary = os.path.join(bindir, "remora")
        shutil.copy(remora.path, binary)
        os.chmod(binary, 0o755)
        interp = ("host-python3", HOST_PYTHON, None)
        with Target(interp, os.path.join(TARGETS, "known_stacks.py"), "truth.json") as t:
            t.wait_ready()
            err = expect_failure(remora, ["dump", "-p", t.pid], 3,
                                 "uid 65534 against a root target", prefix=drop,
                                 binary=binary)
            if "ptrace_scope" not in err and "CAP_SYS_PTRACE" not in err:
                raise Fail("stderr does not mention ptrace_scope or CAP_SYS_PTRACE: %s"
                           % err.strip())
    finally:
        shutil.rmtree(bindir, ignore_errors=True)


# A Python that starts threads, lets them work a little (argv[1] loop rounds) and exits.
SHORT_LIVED = """\
import sys, threading
n = int(sys.argv[1])
def work():
    s = 0
    for i in range(n):
        s += i
ts = [threading.Thread(target=work) for _ in range(4)]
for t in ts:
    t.start()
for t in ts:
    t.join()
"""


def test_exit_during_dump(remora):
    if not os.access(HOST_PYTHON, os.X_OK):
        raise Skip("%s not found" % HOST_PYTHON)
    codes = {}
    for attempt in range(EXIT_RACE_TARGETS):
        rounds = 10000 * 3 ** (attempt % 6)        # lifetimes from ~20 ms to ~300 ms
        proc = subprocess.Popen([HOST_PYTHON, "-I", "-c", SHORT_LIVED, str(rounds)],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        try:
            for dump in range(200):
                exited = proc.poll() is not None       # once reaped, one last dump
                rc, out, err = remora.run(["dump", "-p", proc.pid, "--json"])
                what = "target %d (attempt %d, dump %d)" % (proc.pid, attempt + 1, dump + 1)
                if rc not in (0, 2, 4):
                    raise Fail("%s: exit %d, want 0, 2 or 4; stderr: %s"
                               % (what, rc, tail(err)))
                if rc != 0:
                    bad = one_line(err)
                    if bad:
                        raise Fail("%s: exit %d, %s" % (what, rc, bad))
                else:
                    parse_dump(out)
                codes[rc] = codes.get(rc, 0) + 1
                if exited:
                    break
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
    return "%d targets, %d dumps, exits: %s" % (
        EXIT_RACE_TARGETS, sum(codes.values()),
        ", ".join("%d x%d" % (rc, n) for rc, n in sorted(codes.items())))


# --- driver -----------------------------------------------------------------------------

def report_time(spent, top=12):
    """Where the run's time went: the slowest tests, and each family (the name up to its
    first '/') with its count, so a suite that grew slow says where (issue 31: CI in an hour)."""
    total = sum(spent.values())
    if not spent:
        return
    print("time: %.0f s in %d tests; slowest:" % (total, len(spent)))
    for name, s in sorted(spent.items(), key=lambda kv: -kv[1])[:top]:
        print("time:   %7.1f s  %s" % (s, name))
    fam = {}
    for name, s in spent.items():
        f = fam.setdefault(name.split("/")[0], [0, 0.0])
        f[0] += 1
        f[1] += s
    print("time: by family: " + ", ".join("%s %d/%.0fs" % (k, n, s) for k, (n, s) in
                                          sorted(fam.items(), key=lambda kv: -kv[1][1])))
    kind = {}
    for name, s in spent.items():
        k = kind.setdefault("/".join(name.split("/")[:2]), [0, 0.0])
        k[0] += 1
        k[1] += s
    print("time: by kind (first 20): " + ", ".join("%s %d/%.0fs" % (k, n, s) for k, (n, s) in
                                                   sorted(kind.items(), key=lambda kv: -kv[1][1])[:20]))


def main():
    ap = argparse.ArgumentParser(description="remora functional tests")
    ap.add_argument("--remora", default=os.path.join(REPO, "remora"),
                    help="remora binary (default: the repository's ./remora)")
    ap.add_argument("--only", default="", metavar="SUBSTRING",
                    help="run only tests whose name contains SUBSTRING")
    ap.add_argument("--timeout", type=float, default=None,
                    help="seconds per remora invocation (default 30, 300 with a wrapper)")
    ap.add_argument("--list", action="store_true",
                    help="print the names of the tests that would run (one a line), run nothing")
    args = ap.parse_args()

    wrapper = shlex.split(os.environ.get("REMORA_WRAPPER", ""))
    timeout = args.timeout or (300.0 if wrapper else 30.0)
    remora = Remora(os.path.abspath(args.remora), wrapper, timeout)

    tests = []      # (name, function or None, skip reason)
    for interp in INTERPRETERS:
        missing = interp_missing(interp)
        tests.append(("known-stacks/" + interp[0],
                      lambda i=interp: test_known_stacks(remora, i), missing))
        tests.append(("gil/" + interp[0], lambda i=interp: test_gil(remora, i), missing))
    tests += [
        ("errors/usage", lambda: test_usage(remora), None),
        ("errors/no-such-pid", lambda: test_no_such_pid(remora), None),
        ("errors/not-python", lambda: test_not_python(remora), None),
    ] + [
        ("errors/unsupported-version/" + v, lambda v=v, p=p: test_unsupported_version(remora, v, p), None)
        for v, p in OLD_PYTHONS
    ] + [
        ("errors/permission", lambda: test_permission(remora), None),
        ("errors/exit-during-dump", lambda: test_exit_during_dump(remora), None),
    ]
    import core_tests                   # core dumps and snapshots: tests/functional/core_tests.py
    tests += core_tests.tests(remora)
    tests += record_tests.tests(remora)
    import callkinds_tests              # every way into a Python function: callkinds_tests.py
    tests += callkinds_tests.tests(remora)
    import chaos_tests                  # targets that misbehave: tests/functional/chaos_tests.py
    tests += chaos_tests.tests(remora)
    import hostile_tests                # hostile names, every format: tests/functional/hostile_tests.py
    tests += hostile_tests.tests(remora)
    import trust_tests                  # never writes, valgrind: tests/functional/trust_tests.py
    tests += trust_tests.tests(remora)
    import code_tests                   # code-object churn: tests/functional/code_tests.py
    tests += code_tests.tests(remora)
    import park_tests                   # parked threads' reused walks: tests/functional/park_tests.py
    tests += park_tests.tests(remora)
    import pprof_tests                  # the pprof output: tests/functional/pprof_tests.py
    tests += pprof_tests.tests(remora)
    import firefox_tests                # the Firefox Profiler output: firefox_tests.py
    tests += firefox_tests.tests(remora)
    import format_tests                 # what pstats, the table, speedscope, --diff say: format_tests.py
    tests += format_tests.tests(remora)
    import blocking_tests               # --blocking: tests/functional/blocking_tests.py
    tests += blocking_tests.tests(remora)
    import native_tests                 # --native: tests/functional/native_tests.py
    tests += native_tests.tests(remora)
    import subproc_tests                # --subprocesses: tests/functional/subproc_tests.py
    tests += subproc_tests.tests(remora)
    import top_tests                    # remora top: tests/functional/top_tests.py
    tests += top_tests.tests(remora)
    import names_tests                  # Python thread names: tests/functional/names_tests.py
    tests += names_tests.tests(remora)
    import source_tests                 # dump's source lines: tests/functional/source_tests.py
    tests += source_tests.tests(remora)
    import opcodes_tests                # --opcodes: tests/functional/opcodes_tests.py
    tests += opcodes_tests.tests(remora)
    import heatmap_tests                # the line heatmap: tests/functional/heatmap_tests.py
    tests += heatmap_tests.tests(remora)
    import long_tests                   # pause, snapshots, --every, jsonl: long_tests.py
    tests += long_tests.tests(remora)
    import setup_tests                  # the test set-up (provision-chroot.sh): setup_tests.py
    tests += setup_tests.tests(remora)
    import launch_tests                 # -- CMD that is not Python: tests/functional/launch_tests.py
    tests += launch_tests.tests(remora)
    import subinterp_tests              # subinterpreters: tests/functional/subinterp_tests.py
    tests += subinterp_tests.tests(remora)
    import badinput_tests               # bad options and inputs: tests/functional/badinput_tests.py
    tests += badinput_tests.tests(remora)
    import locals_tests                 # dump --locals: tests/functional/locals_tests.py
    tests += locals_tests.tests(remora)
    import async_record_tests           # record/top --async: tests/functional/async_record_tests.py
    tests += async_record_tests.tests(remora)
    # a server-like target, the idle test against the target's clock: measurements of
    # timing as mix is, run as mix is (make test; make asan leaves them out: issue 31)
    import server_tests                 # tests/functional/server_tests.py
    import idle_tests                   # tests/functional/idle_tests.py
    if args.only.startswith(("server/", "idle/")) or os.environ.get("REMORA_FIDELITY") == "1":
        tests += server_tests.tests(remora)
        tests += idle_tests.tests(remora)
    import install_tests                # make install, man page, completions, .deb: install_tests.py
    tests += install_tests.tests(remora)
    import async_tests                  # asyncio tasks: tests/functional/async_tests.py
    tests += async_tests.tests(remora)
    import engine_tests                 # which engine reads the target: engine_tests.py
    tests += engine_tests.tests(remora)
    # Debian's Django, docutils, aiohttp, numpy, a thread pool (real_tests.py): shares, a
    # measurement of timing as mix is, run as mix is (make test, not make asan)
    import real_tests
    if args.only.startswith("real/") or os.environ.get("REMORA_FIDELITY") == "1":
        tests += real_tests.tests(remora)
    # no round dropped (issue 14): fidelity_tests.py. chains and async in every run;
    # mix, a measurement of timing, only with --only naming "fidelity/mix" or
    # REMORA_FIDELITY=1 (make test sets it, make asan does not)
    import fidelity_tests
    tests += fidelity_tests.tests(remora, "fidelity/mix" in args.only or
                                  os.environ.get("REMORA_FIDELITY") == "1")
    tests = [t for t in tests if args.only in t[0]]
    if args.list:
        for name, _, _ in tests:
            print(name)
        return 0

    passed = failed = skipped = 0
    if not (os.path.isfile(remora.path) and os.access(remora.path, os.X_OK)):
        print("FAIL setup: no executable remora at %s (build it with make, or pass --remora)"
              % remora.path)
        print("functional: 0 passed, 1 failed, 0 skipped")
        return 1
    spent = {}                                  # test name -> seconds, for the summary
    for name, fn, skip in tests:
        t0 = time.monotonic()
        if skip:
            print("SKIP %s: %s" % (name, skip), flush=True)
            skipped += 1
            continue
        try:
            note = fn()
        except Skip as e:
            print("SKIP %s: %s" % (name, e), flush=True)
            skipped += 1
        except Fail as e:
            print("FAIL %s: %s" % (name, e), flush=True)
            failed += 1
        except Exception as e:                      # a bug in the test itself: still a failure
            print("FAIL %s: test error: %s: %s" % (name, type(e).__name__, e), flush=True)
            failed += 1
        else:
            print("PASS %s%s" % (name, " (%s)" % note if note else ""), flush=True)
            passed += 1
        spent[name] = time.monotonic() - t0
    report_time(spent)
    print("functional: %d passed, %d failed, %d skipped" % (passed, failed, skipped))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
