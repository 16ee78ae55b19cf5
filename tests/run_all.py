"""Runs every test of remora and ends with one line counting them all.

    python3 tests/run_all.py --remora ./remora --unit build/unit_tests

1. the unit tests (a C binary that prints "unit: N passed, N failed");
2. provisions the chroot of CPython 3.13-3.15 (tests/provision-chroot.sh, cached) unless
   REMORA_NO_CHROOT=1; if it cannot be made, those interpreters are reported as skipped;
3. the functional tests (tests/functional/run.py) against real interpreters;
4. the browser tests of the HTML flamegraph (tests/browser/run.mjs, headless Chromium),
   including a page recorded from a real process here;
5. with --fuzz-tool, the committed fuzz corpora and crash inputs replayed (tests/fuzz/),
   and the tool passed to the functional tests (REMORA_FUZZ_TOOL) for the snapshot tests;
6. last, a check that /dev/null and /dev/full are still the character devices 1,3 and 1,7.
"""
import argparse
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
COUNT = re.compile(r"^(\w+): (\d+) passed, (\d+) failed(?:, (\d+) skipped)?\s*$")


def run_counted(name, cmd, env=None):
    """Runs cmd, passing its output through; returns (passed, failed, skipped)."""
    print(f"== {name}: {' '.join(cmd)}", flush=True)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env, errors="replace")
    counts = None
    for line in proc.stdout:
        sys.stdout.write(line)
        sys.stdout.flush()
        m = COUNT.match(line.strip())
        if m:
            counts = (int(m.group(2)), int(m.group(3)), int(m.group(4) or 0))
    rc = proc.wait()
    if counts is None:
        print(f"FAIL {name}: exited {rc} without a count line")
        return (0, 1, 0)
    if rc != 0 and counts[1] == 0:
        print(f"FAIL {name}: exited {rc}")
        return (counts[0], counts[1] + 1, counts[2])
    return counts


# remora runs as root and writes in place to devices: renaming over one would replace it
# for every program on the machine. The suite must leave these as it found them.
DEVICES = (("/dev/null", 1, 3), ("/dev/full", 1, 7))


def check_devices(devices=DEVICES):
    """One PASS or FAIL line: is each path still the character device it should be?
    Returns (passed, failed, skipped) for the totals."""
    problems = []
    for path, major, minor in devices:
        try:
            st = os.lstat(path)
        except OSError as e:
            problems.append(f"{path}: {e.strerror}")
            continue
        if not stat.S_ISCHR(st.st_mode):
            problems.append(f"{path} is not a character device ({stat.filemode(st.st_mode)})")
        elif (os.major(st.st_rdev), os.minor(st.st_rdev)) != (major, minor):
            problems.append(f"{path} is the character device {os.major(st.st_rdev)},"
                            f"{os.minor(st.st_rdev)}, want {major},{minor}")
    what = ", ".join(f"{p} c {ma},{mi}" for p, ma, mi in devices)
    if problems:
        print("FAIL devices: after the suite, " + "; ".join(problems), flush=True)
        return (0, 1, 0)
    print(f"PASS devices: after the suite, {what}", flush=True)
    return (1, 0, 0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--remora", default="./remora")
    ap.add_argument("--unit", default="build/unit_tests")
    ap.add_argument("--fuzz-tool", default=None)
    ap.add_argument("--mkprofile", default="build/mkprofile")
    args = ap.parse_args()

    env = dict(os.environ)
    totals = [0, 0, 0]
    for i, v in enumerate(run_counted("unit", [args.unit])):
        totals[i] += v
    if args.fuzz_tool:
        for i, v in enumerate(run_counted("fuzz-replay", [args.fuzz_tool, "replay",
                                                          os.path.join(HERE, "fuzz")])):
            totals[i] += v
        env["REMORA_FUZZ_TOOL"] = os.path.abspath(args.fuzz_tool)

    if env.get("REMORA_NO_CHROOT") != "1":
        print("== chroot: tests/provision-chroot.sh", flush=True)
        p = subprocess.run(["bash", os.path.join(HERE, "provision-chroot.sh")],
                           stdout=subprocess.PIPE, text=True)
        if p.returncode == 0 and p.stdout.strip():
            env["REMORA_CHROOT"] = p.stdout.strip().splitlines()[-1]
            print(f"chroot ready: {env['REMORA_CHROOT']}")
        else:
            print("chroot could not be provisioned: its interpreters will be skipped")

    for i, v in enumerate(run_counted("functional", [sys.executable, os.path.join(HERE, "functional", "run.py"),
                                                     "--remora", args.remora], env=env)):
        totals[i] += v

    # a flamegraph of a real recording, for the browser's render checks
    pages = []
    tmp = tempfile.mkdtemp(prefix="remora-all-")
    try:
        page = os.path.join(tmp, "recorded.html")
        src = ("import time\n"
               "def work():\n"
               "    t = time.perf_counter() + 0.4\n"
               "    while time.perf_counter() < t: pass\n"
               "work()\n")
        base = os.path.join(tmp, "base.remora")
        diff = os.path.join(tmp, "diff.html")
        # a recording, a baseline, and a differential flamegraph of the two (record --diff)
        for argv, out in ((["-o", page], page), (["-o", base], base), (["-o", diff, "--diff", base], diff)):
            p = subprocess.run([args.remora, "record", *argv, "--", sys.executable, "-c", src],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            if p.returncode == 0 and os.path.exists(out):
                if out.endswith(".html"):
                    pages += ["--page", out]
            else:
                print("FAIL browser/recorded-page: remora record %s exited %d: %s"
                      % (" ".join(argv), p.returncode, p.stdout.strip()[-300:]))
                totals[1] += 1
        # the baseline recording turned into a flamegraph later, without the process
        converted = os.path.join(tmp, "converted.html")
        p = subprocess.run([args.remora, "convert", base, "-o", converted],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if p.returncode == 0 and os.path.exists(converted):
            pages += ["--page", converted]
            # and the table of the same recording, which the page's hotspots must equal
            table = os.path.join(tmp, "converted.table")
            p = subprocess.run([args.remora, "convert", base, "-f", "table", "-o", table],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            if p.returncode == 0 and os.path.exists(table):
                pages += ["--table", table]
            else:
                print("FAIL browser/converted-table: remora convert %s -f table exited %d: %s"
                      % (base, p.returncode, p.stdout.strip()[-300:]))
                totals[1] += 1
        else:
            print("FAIL browser/converted-page: remora convert %s exited %d: %s"
                  % (base, p.returncode, p.stdout.strip()[-300:]))
            totals[1] += 1
        for i, v in enumerate(run_counted("browser", ["node", os.path.join(HERE, "browser", "run.mjs"),
                                                      "--mkprofile", args.mkprofile, *pages], env=env)):
            totals[i] += v
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    for i, v in enumerate(check_devices()):
        totals[i] += v
    print(f"{totals[0]} passed, {totals[1]} failed, {totals[2]} skipped")
    return 1 if totals[1] else 0


if __name__ == "__main__":
    sys.exit(main())
