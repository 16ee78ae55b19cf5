# Trust tests (issue #7): remora never writes into the target, and valgrind finds no
# error or leak in a dump and a short recording.

import hashlib
import os
import re
import shutil
import signal
import subprocess

from harness import INTERPRETERS, TARGETS, Fail, Skip, Target, interp_missing, tail

NEVER_WRITE_INTERPRETERS = ("pyenv-3.9.18", "pyenv-3.12.1", "sid-3.15")
VALGRIND_INTERPRETERS = ("pyenv-3.12.1", "sid-3.15")


def memory_digest(pid):
    """SHA-256 of every writable private or shared mapping of pid, read through
    /proc/PID/mem (regions the kernel will not let us read are named, not hashed)."""
    h = hashlib.sha256()
    regions = 0
    with open("/proc/%d/maps" % pid) as maps, open("/proc/%d/mem" % pid, "rb", 0) as mem:
        for line in maps:
            fields = line.split()
            lo, hi = (int(x, 16) for x in fields[0].split("-"))
            if "w" not in fields[1] or (len(fields) > 5 and fields[5] in ("[vvar]", "[vsyscall]")):
                continue
            try:
                mem.seek(lo)
                data = mem.read(hi - lo)
            except OSError:
                h.update(b"unreadable %x" % lo)
                continue
            h.update(b"%x:" % lo)
            h.update(data)
            regions += 1
    return h.hexdigest(), regions


def test_never_writes(remora, interp):
    """With the target stopped (SIGSTOP: none of its own code runs), a dump and a
    recording leave every byte of its writable memory as it was."""
    with Target(interp, os.path.join(TARGETS, "known_stacks.py"), "truth.json") as t:
        t.wait_ready()
        t.wait_main_in_read()
        os.kill(t.pid, signal.SIGSTOP)
        try:
            before, regions = memory_digest(t.pid)
            rc, out, err = remora.run(["dump", "-p", t.pid, "--json"])
            if rc != 0:
                raise Fail("dump exited %d: %s" % (rc, tail(err)))
            rc, out, err = remora.run(["record", "-p", t.pid, "-d", "0.3", "-r", "2k",
                                       "-o", os.path.join(t.dir, "x.collapsed")])
            if rc != 0:
                raise Fail("record exited %d: %s" % (rc, tail(err)))
            after, _ = memory_digest(t.pid)
        finally:
            os.kill(t.pid, signal.SIGCONT)
        if before != after:
            raise Fail("the target's writable memory changed while it was stopped and profiled")
        return "%d writable regions unchanged after a dump and a 0.3 s recording" % regions


VALGRIND_ERRORS = re.compile(r"ERROR SUMMARY: (\d+) errors")
VALGRIND_LOST = re.compile(r"(definitely|indirectly) lost: ([\d,]+) bytes")


def test_valgrind(remora, interp):
    """valgrind (memcheck, full leak check) on `remora dump` and a short `remora record`."""
    if shutil.which("valgrind") is None:
        raise Skip("valgrind not installed")
    with open(remora.path, "rb") as f:
        if b"__asan_init" in f.read():
            raise Skip("an ASan build: valgrind cannot run it (make test runs this on the plain build)")
    vg = ["valgrind", "--error-exitcode=99", "--leak-check=full", "--show-leak-kinds=definite,indirect"]
    notes = []
    with Target(interp, os.path.join(TARGETS, "known_stacks.py"), "truth.json") as t:
        t.wait_ready()
        t.wait_main_in_read()
        for args in (["dump", "-p", t.pid, "--json"],
                     ["record", "-p", t.pid, "-d", "0.5", "-o", os.path.join(t.dir, "x.html")]):
            p = subprocess.run(vg + [remora.path] + [str(a) for a in args], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, timeout=600)
            errors = VALGRIND_ERRORS.search(p.stderr)
            lost = [int(m.group(2).replace(",", "")) for m in VALGRIND_LOST.finditer(p.stderr)]
            if p.returncode != 0 or errors is None or errors.group(1) != "0" or any(lost):
                raise Fail("valgrind remora %s: exit %d, %s, lost %s: %s"
                           % (args[0], p.returncode, errors.group(0) if errors else "no summary",
                              lost, tail(p.stderr, 6)))
            notes.append("%s: 0 errors, 0 bytes lost" % args[0])
    return "; ".join(notes)


def tests(remora):
    out = []
    for interp in INTERPRETERS:
        if interp[0] in NEVER_WRITE_INTERPRETERS:
            out.append(("trust/never-writes/" + interp[0], lambda i=interp: test_never_writes(remora, i),
                        interp_missing(interp)))
        if interp[0] in VALGRIND_INTERPRETERS:
            out.append(("trust/valgrind/" + interp[0], lambda i=interp: test_valgrind(remora, i),
                        interp_missing(interp)))
    return out
