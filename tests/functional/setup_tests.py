# Tests of the test set-up itself: tests/provision-chroot.sh, run with a stand-in for
# mmdebstrap (a script that fills the directory it is given with a few files) and one for
# chroot(8) (which logs the command it would run in the chroot), on directories made
# here; REMORA_CHROOT always names one of them, never the real cache. The script must
# never delete what it did not make, nor delete through a mount.
# setup/packages: tools/setup.sh (what `make demo` and `make test` run first) with
# stand-ins for id, dpkg-query and apt-get on a PATH of its own: nothing installed when
# all is there, only what is missing otherwise (apt-get update first), and one line with
# the command to run when not root or without apt-get, from the script and through make
# (the set-up target's line, then make's own that it stopped there: nothing compiled).
# setup/make-reads: reading the Makefile runs no program (no compiler probed, no set-up).

import os
import re
import shutil
import subprocess
import tempfile

from harness import REPO, Fail, Skip, tail

ORDER = 220           # where run.py runs these tests among the modules' (ascending)

SCRIPT = os.path.join(REPO, "tests", "provision-chroot.sh")
MARKER, STAMP, EXTRA_STAMP = ".remora-provision-chroot", ".remora-ready", ".remora-extra"
PKGS = "python3.13 python3.13-nopie python3.14 python3.14-nopie python3.15 python3.15-nopie"
# the extra packages as the script lists them (its one list: the real programs', CPython's
# test suite, the Python module's libraries)
with open(SCRIPT) as _f:
    EXTRA = re.search(r'^extra="([^"]*)"', _f.read(), re.M).group(1)

# mmdebstrap [options] SUITE TARGET MIRROR: TARGET must be empty or missing, as for the
# real one; each call is logged; STUB_FAIL=1 fails half-way.
STUB = r'''#!/bin/sh
for a; do prev2=$prev; prev=$a; done
target=$prev2
echo "$target" >> "$STUB_LOG"
if [ -d "$target" ] && [ -n "$(ls -A "$target")" ]; then
    echo "stub mmdebstrap: $target is not empty" >&2; exit 2
fi
mkdir -p "$target/usr/bin" && : > "$target/usr/bin/python3.15"
[ "${STUB_FAIL:-0}" = 1 ] && { echo "stub mmdebstrap: failing as asked" >&2; exit 3; }
exit 0
'''

# chroot ROOT COMMAND...: logs "ROOT COMMAND..."; STUB_FAIL=1 fails.
CHROOT_STUB = r'''#!/bin/sh
echo "$*" >> "$CHROOT_LOG"
[ "${STUB_FAIL:-0}" = 1 ] && { echo "stub chroot: failing as asked" >&2; exit 3; }
exit 0
'''


def test_provision(prefix_ok):
    """provision-chroot.sh with a stand-in mmdebstrap: a fresh path is built (beside, then
    renamed: no directory left over) and marked; a second run reuses it; one made before the
    extra packages (the real programs') were asked for gets them from its own apt-get
    (through a stand-in chroot), nothing in it removed, and keeps it all when that fails;
    a stale chroot it made is replaced; a failed build leaves the old one and nothing else;
    a directory it did not make, and one of its own with a directory bound beneath it, are
    refused, exit 1, and nothing in them (or through the mount) is deleted."""
    d = tempfile.mkdtemp(prefix="remora-setup-")
    bind_root = None
    try:
        stubdir = os.path.join(d, "bin")
        os.mkdir(stubdir)
        for name, text in (("mmdebstrap", STUB), ("chroot", CHROOT_STUB)):
            with open(os.path.join(stubdir, name), "w") as f:
                f.write(text)
            os.chmod(os.path.join(stubdir, name), 0o755)
        log = os.path.join(d, "stub.log")
        chroot_log = os.path.join(d, "chroot.log")
        area = os.path.join(d, "cache")         # REMORA_CHROOT's parent, made by the script

        def run(root, prefix=(), fail=False):
            open(log, "w").close()
            open(chroot_log, "w").close()
            env = dict(os.environ, REMORA_CHROOT=root, STUB_LOG=log, CHROOT_LOG=chroot_log,
                       PATH=stubdir + os.pathsep + os.environ.get("PATH", ""))
            env["STUB_FAIL"] = "1" if fail else "0"
            p = subprocess.run(list(prefix) + ["bash", SCRIPT], env=env, stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
            if "no Debian mirror found" in p.stderr:
                raise Skip("apt's sources name no Debian mirror here: the script stops before building")
            with open(log) as f:
                calls = f.read().split()
            return p.returncode, p.stdout.strip(), p.stderr.strip(), calls

        def chroot_calls():
            with open(chroot_log) as f:
                return [l for l in f.read().split("\n") if l]

        def leftovers():
            return sorted(n for n in os.listdir(area) if n != "sid") if os.path.isdir(area) else []

        notes = []
        sid = os.path.join(area, "sid")
        # 1. a fresh path
        rc, out, err, calls = run(sid)
        if rc != 0 or out != sid:
            raise Fail("fresh %s: exit %d, printed %r: %s" % (sid, rc, out, tail(err)))
        if not all(os.path.isfile(os.path.join(sid, n)) for n in (MARKER, STAMP, "usr/bin/python3.15")):
            raise Fail("fresh: %s lacks its marker, stamp or what mmdebstrap made: %s"
                       % (sid, sorted(os.listdir(sid))))
        if len(calls) != 1 or calls[0] == sid or os.path.dirname(calls[0]) != area:
            raise Fail("fresh: mmdebstrap was not given a new directory beside %s: %s" % (sid, calls))
        if leftovers():
            raise Fail("fresh: left beside it: %s" % leftovers())
        notes.append("fresh: built beside and renamed")
        with open(os.path.join(sid, EXTRA_STAMP)) as f:
            if f.read().strip() != EXTRA:
                raise Fail("fresh: %s does not list the extra packages" % EXTRA_STAMP)
        # 2. cached
        rc, out, err, calls = run(sid)
        if rc != 0 or calls or chroot_calls():
            raise Fail("second run: exit %d, mmdebstrap called %d times, chroot %s: %s"
                       % (rc, len(calls), chroot_calls(), tail(err)))
        # 2b. made before the extra packages: installed in place; a failure keeps it all
        os.unlink(os.path.join(sid, EXTRA_STAMP))
        mine = os.path.join(sid, "usr", "bin", "python3.15")
        rc, out, err, calls = run(sid, fail=True)
        if rc != 1 or calls or os.path.exists(os.path.join(sid, EXTRA_STAMP)) or not os.path.exists(mine):
            raise Fail("extra packages failing: exit %d (want 1), mmdebstrap called %d times, stamp %s, "
                       "chroot's files %s: %s" % (rc, len(calls), "written" if os.path.exists(
                           os.path.join(sid, EXTRA_STAMP)) else "not written",
                           "kept" if os.path.exists(mine) else "gone", tail(err)))
        rc, out, err, calls = run(sid)
        got = chroot_calls()
        installs = [c for c in got if " apt-get install " in " %s " % c]
        if (rc != 0 or out != sid or calls or not os.path.exists(mine) or len(installs) != 1
                or not installs[0].startswith(sid + " ") or not set(EXTRA.split()) <= set(installs[0].split())):
            raise Fail("extra packages: exit %d, printed %r, mmdebstrap called %d times, chroot ran %s, "
                       "chroot's files %s: %s" % (rc, out, len(calls), got,
                                                  "kept" if os.path.exists(mine) else "gone", tail(err)))
        with open(os.path.join(sid, EXTRA_STAMP)) as f:
            if f.read().strip() != EXTRA:
                raise Fail("extra packages installed but %s not written" % EXTRA_STAMP)
        notes.append("extra packages: installed in place (%d chroot commands), kept on failure" % len(got))
        # 3. a stale chroot of its own is replaced; 4. a failed build keeps it
        with open(os.path.join(sid, STAMP), "w") as f:
            f.write("python3.12\n")
        old = os.path.join(sid, "old-file")
        open(old, "w").close()
        rc, out, err, calls = run(sid, fail=True)
        if rc == 0 or not os.path.exists(old) or leftovers():
            raise Fail("failed build: exit %d, the old chroot %s, left beside it: %s: %s"
                       % (rc, "kept" if os.path.exists(old) else "gone", leftovers(), tail(err)))
        rc, out, err, calls = run(sid)
        with open(os.path.join(sid, STAMP)) as f:
            stamp = f.read().strip()
        if rc != 0 or os.path.exists(old) or stamp != PKGS or leftovers():
            raise Fail("stale chroot: exit %d, old file %s, stamp %r, left beside it: %s: %s"
                       % (rc, "kept" if os.path.exists(old) else "gone", stamp, leftovers(), tail(err)))
        notes.append("stale: replaced; failed build: old kept")
        # 5. a directory it did not make
        foreign = os.path.join(d, "foreign")
        os.makedirs(os.path.join(foreign, "etc"))
        keep = os.path.join(foreign, "etc", "keep")
        open(keep, "w").close()
        rc, out, err, calls = run(foreign)
        if rc != 1 or not os.path.exists(keep) or calls:
            raise Fail("a directory it did not make: exit %d, its file %s, mmdebstrap called %d times: %s"
                       % (rc, "kept" if os.path.exists(keep) else "deleted", len(calls), tail(err)))
        notes.append(err.splitlines()[-1] if err else "refused")
        # 6. its own stale chroot with a directory bound beneath it (as /proc would be)
        if prefix_ok:
            bind_root = os.path.join(d, "mounted")
            precious = os.path.join(d, "precious")
            os.makedirs(os.path.join(bind_root, "proc"))
            os.mkdir(precious)
            keep = os.path.join(precious, "keep")
            open(keep, "w").close()
            for n, text in ((MARKER, "made by tests/provision-chroot.sh\n"), (STAMP, "python3.12\n")):
                with open(os.path.join(bind_root, n), "w") as f:
                    f.write(text)
            prefix = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                      'mount --bind "$0" "$1" && shift && exec "$@"', precious, os.path.join(bind_root, "proc")]
            rc, out, err, calls = run(bind_root, prefix)
            # the namespace ended with the command: nothing is mounted here any more
            if rc != 1 or not os.path.exists(keep) or calls or "mounted beneath" not in err:
                raise Fail("a chroot with a bind mount beneath it: exit %d, the bound file %s, "
                           "mmdebstrap called %d times: %s"
                           % (rc, "kept" if os.path.exists(keep) else "deleted", len(calls), tail(err)))
            notes.append(err.splitlines()[-1])
        else:
            notes.append("skipped the bind mount case: unshare --mount cannot run here")
        return " | ".join(notes)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def can_unshare():
    if shutil.which("unshare") is None:
        return False
    return subprocess.run(["unshare", "--mount", "--propagation", "private", "true"],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0


SETUP = os.path.join(REPO, "tools", "setup.sh")
# what tools/setup.sh and make (reading the Makefile, the set-up target) run, from the
# machine: no compiler, so a make that compiled anything before the set-up would say so
SETUP_TOOLS = ("bash", "sh", "awk", "sed", "tr", "sort", "comm", "dirname", "cat", "make", "grep")

# id -u: STUB_UID; dpkg-query -W -f=...: "PKG ii " for each asked for that STUB_HAVE lists;
# apt-get: logs its arguments to STUB_LOG, fails with STUB_APT_RC on install
ID_STUB = '#!/bin/sh\n[ "$1" = -u ] && echo "$STUB_UID"\n'
DPKG_STUB = r'''#!/bin/sh
shift 2
for p; do grep -qx "$p" "$STUB_HAVE" && echo "$p ii "; done
exit 0
'''
APT_STUB = r'''#!/bin/sh
echo "$*" >> "$STUB_LOG"
[ "$1" = install ] && exit "${STUB_APT_RC:-0}"
exit 0
'''


def section(name):
    p = subprocess.run([SETUP, "--list", name], stdout=subprocess.PIPE, text=True, check=True)
    return p.stdout.split()


def make_stopped(err, target):
    """err is two lines: the set-up's one line, then make's own saying the set-up target
    failed (so no other recipe ran, nor printed anything)."""
    lines = err.splitlines()
    return (len(lines) == 2 and lines[0].startswith("remora: ")
            and re.fullmatch(r"make: \*\*\* \[Makefile:\d+: %s\] Error 1" % re.escape(target), lines[1]) is not None)


def test_packages():
    d = tempfile.mkdtemp(prefix="remora-setup-")
    try:
        bin_ = os.path.join(d, "bin")
        os.mkdir(bin_)
        for tool in SETUP_TOOLS:
            path = shutil.which(tool)
            if path is None:
                raise Skip("%s not found" % tool)
            os.symlink(path, os.path.join(bin_, tool))
        for name, text in (("id", ID_STUB), ("dpkg-query", DPKG_STUB), ("apt-get", APT_STUB)):
            with open(os.path.join(bin_, name), "w") as f:
                f.write(text)
            os.chmod(os.path.join(bin_, name), 0o755)
        log, have = os.path.join(d, "apt.log"), os.path.join(d, "have")
        demo, test = section("demo"), section("test")
        if "libdw-dev" not in demo or "mmdebstrap" not in test or section("node") != ["nodejs", "npm"]:
            raise Fail("tools/packages.txt: demo %r, test %r, node %r" % (demo, test, section("node")))

        def run(args, uid=0, installed=(), apt_rc=0, cmd=None, path=bin_):
            with open(have, "w") as f:
                f.write("".join(p + "\n" for p in installed))
            if os.path.exists(log):
                os.unlink(log)
            env = {"PATH": path, "STUB_UID": str(uid), "STUB_HAVE": have, "STUB_LOG": log,
                   "STUB_APT_RC": str(apt_rc), "HOME": d}
            p = subprocess.run(cmd or [SETUP] + args, cwd=REPO, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, timeout=60)
            calls = open(log).read().splitlines() if os.path.exists(log) else []
            return p.returncode, p.stdout, p.stderr, calls

        notes = []
        # all there: nothing installed, nothing said
        rc, out, err, calls = run(["--demo"], installed=demo)
        if rc != 0 or out or err or calls:
            raise Fail("all installed: exit %d, apt-get %r, said %r" % (rc, calls, out + err))
        # two missing, as root: apt-get update, then those two alone
        rc, out, err, calls = run(["--demo"], installed=[p for p in demo if p not in ("libdw-dev", "zsh", "python3")])
        want = ["update -qq", "install -y -qq --no-install-recommends libdw-dev python3"]
        if rc != 0 or calls != want:
            raise Fail("libdw-dev and python3 missing, as root: exit %d, apt-get %r, want %r: %s"
                       % (rc, calls, want, tail(err)))
        notes.append(out.strip())
        # missing, not root: one line with the command, nothing installed
        line = ("remora: make demo needs Debian packages not installed here (run: sudo apt-get "
                "install -y --no-install-recommends libdw-dev)")
        rc, out, err, calls = run(["--demo"], uid=1000, installed=[p for p in demo if p != "libdw-dev"])
        if rc != 1 or calls or out or err.splitlines() != [line]:
            raise Fail("libdw-dev missing, not root: exit %d, apt-get %r, said %r, want %r"
                       % (rc, calls, out + err, line))
        # the same through make: its set-up target, first, stops it before any compiler;
        # the script's line, then make's saying where it stopped, and nothing else
        rc, out, err, calls = run([], uid=1000, installed=[p for p in demo if p != "libdw-dev"],
                                  cmd=["make", "-s", "demo"])
        if rc == 0 or calls or out or not make_stopped(err, "demo-setup") or err.splitlines()[0] != line:
            raise Fail("make demo, libdw-dev missing, not root: exit %d, apt-get %r, said %r"
                       % (rc, calls, out + err))
        notes.append(err.splitlines()[0])
        # make test, not root, npm not on PATH: the test's packages and Debian's Node too
        rc, out, err, calls = run([], uid=1000, installed=demo, cmd=["make", "-s", "test"])
        missing = sorted(test + ["nodejs", "npm"])
        if rc == 0 or calls or out or not make_stopped(err, "test-setup") or \
                "install -y --no-install-recommends %s)" % " ".join(missing) not in err.splitlines()[0]:
            raise Fail("make test, not root, no npm: exit %d, said %r, want the packages %r"
                       % (rc, out + err, missing))
        # apt-get failing: its failure said in one last line
        rc, out, err, calls = run(["--demo"], installed=[p for p in demo if p != "libdw-dev"], apt_rc=100)
        if rc != 1 or "set-up of make demo failed, exit 100" not in err.splitlines()[-1]:
            raise Fail("apt-get install failing: exit %d, said %r" % (rc, tail(err)))
        # no apt-get: one line, nothing run
        os.unlink(os.path.join(bin_, "apt-get"))
        rc, out, err, calls = run(["--demo"], installed=())
        if rc != 1 or calls or len(err.splitlines()) != 1 or "make demo SETUP=no" not in err:
            raise Fail("no apt-get: exit %d, said %r" % (rc, out + err))
        notes.append(err.strip())
        return " | ".join(notes)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_make_reads():
    """Reading the Makefile runs nothing: with only make and sh on PATH (no compiler, no
    cat, uname, mktemp), `make -n uninstall` says its rm lines and not a word on stderr:
    no compiler probed (LTO), no set-up run, no machine asked, until a recipe needs it."""
    d = tempfile.mkdtemp(prefix="remora-setup-")
    try:
        for tool in ("make", "sh"):
            path = shutil.which(tool)
            if path is None:
                raise Skip("%s not found" % tool)
            os.symlink(path, os.path.join(d, tool))
        env = {"PATH": d, "HOME": d}
        p = subprocess.run(["make", "-n", "uninstall"], cwd=REPO, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=60)
        if p.returncode != 0 or p.stderr or "rm -f" not in p.stdout:
            raise Fail("make -n uninstall with only make and sh: exit %d, said %r on stderr, %r"
                       % (p.returncode, tail(p.stderr), tail(p.stdout)))
        return "make -n uninstall: %d lines, nothing run" % len(p.stdout.splitlines())
    finally:
        shutil.rmtree(d, ignore_errors=True)


def tests(remora):
    """[(name, function, skip reason or None)] for run.py."""
    del remora                          # the set-up needs no remora
    return [("setup/provision-chroot", lambda: test_provision(can_unshare()), None),
            ("setup/packages", test_packages, None),
            ("setup/make-reads", test_make_reads, None)]
