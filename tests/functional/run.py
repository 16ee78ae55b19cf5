#!/usr/bin/env python3
# Functional tests: run real interpreters (pyenv 3.9-3.13, Debian's static 3.11, and
# 3.13-3.15 PIE/non-PIE in the test chroot) with the targets in tests/targets/, and compare
# remora's output with the ground truth each target writes about itself. This is the
# runner alone: the tests are in the *_tests.py modules beside it (dump_tests.py those of
# `remora dump`, record_tests.py those of `record` and `convert`, ...), found here by their
# names, each giving its tests with tests(remora) and its place in the run with ORDER; the
# shared helpers in harness.py and the modules it gathers (interpreters.py, targets.py,
# recording.py, judges.py, nodetools.py, common.py), the readers of remora's output
# formats in formats.py.
#
#   python3 tests/functional/run.py [--remora PATH] [--only SUBSTRING] [--timeout SECONDS]
#                                   [--list]
#
# Environment: REMORA_CHROOT (default /var/cache/remora/sid), REMORA_WRAPPER (a command
# prefixed to every remora invocation, e.g. "valgrind -q --error-exitcode=99"),
# REMORA_FIDELITY=1 (adds the measurements of timing to the default run: the tests a
# module names in TIMED, e.g. fidelity/mix, real/*, server/*, idle/*).
# Prints one line per test (PASS/FAIL/SKIP), then "functional: N passed, N failed, N skipped";
# exits 1 if any test failed. Standard library only (runs on the host's python3).

import argparse
import glob
import importlib
import os
import shlex
import sys
import time

from harness import HERE, REPO, Fail, Remora, Skip


def test_modules():
    """The *_tests.py modules beside this file, imported, in the order they run: by their
    ORDER (which each must have: a new module chooses its place), then by name."""
    mods = [importlib.import_module(os.path.basename(p)[:-3])
            for p in glob.glob(os.path.join(HERE, "*_tests.py"))]
    return sorted(mods, key=lambda m: (m.ORDER, m.__name__))


def all_tests(remora, only):
    """[(name, function or None, skip reason)] of every module, in order. A measurement of
    timing (a test whose name begins with one of its module's TIMED prefixes: make test
    runs them, make asan leaves them out, issue 31) is there only with REMORA_FIDELITY=1
    or an --only beginning with one of those prefixes."""
    mods = test_modules()
    timed = tuple(p for m in mods for p in getattr(m, "TIMED", ()))
    timing = os.environ.get("REMORA_FIDELITY") == "1" or only.startswith(timed)
    tests = []
    for m in mods:
        tests += [t for t in m.tests(remora)
                  if timing or not t[0].startswith(getattr(m, "TIMED", ()))]
    return tests


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

    tests = [t for t in all_tests(remora, args.only) if args.only in t[0]]
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
