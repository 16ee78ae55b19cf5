# Trust tests (issue #7): remora never writes into the target, and valgrind finds no
# error or leak in a dump and a short recording.

import contextlib
import hashlib
import os
import re
import shutil
import signal
import subprocess

from harness import HERE, INTERPRETERS, TARGETS, Fail, Skip, Target, expect_failure, interp_missing, tail

ORDER = 70            # where run.py runs these tests among the modules' (ascending)

NEVER_WRITE_INTERPRETERS = ("pyenv-3.9.18", "pyenv-3.12.1", "sid-3.15")
VALGRIND_INTERPRETERS = ("pyenv-3.12.1", "sid-3.15")


def writable_memory(pid):
    """Yields (start, bytes or None) for every writable private or shared mapping of pid,
    read through /proc/PID/mem (None: a region the kernel will not let us read)."""
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
                data = None
            yield lo, data


def memory_digest(pid):
    """SHA-256 of every writable mapping of pid (regions the kernel will not let us read
    are named, not hashed), and how many were hashed."""
    h = hashlib.sha256()
    regions = 0
    for lo, data in writable_memory(pid):
        if data is None:
            h.update(b"unreadable %x" % lo)
            continue
        h.update(b"%x:" % lo)
        h.update(data)
        regions += 1
    return h.hexdigest(), regions


@contextlib.contextmanager
def stopped_target(interp):
    """known_stacks.py under interp, ready, its main thread parked in read, then stopped
    (SIGSTOP: none of its own code runs) until the block ends. Yields (target, truth)."""
    with Target(interp, os.path.join(TARGETS, "known_stacks.py"), "truth.json") as t:
        truth = t.wait_ready()
        t.wait_main_in_read()
        os.kill(t.pid, signal.SIGSTOP)
        try:
            yield t, truth
        finally:
            os.kill(t.pid, signal.SIGCONT)


def test_never_writes(remora, interp):
    """With the target stopped (SIGSTOP: none of its own code runs), a dump and a
    recording leave every byte of its writable memory as it was."""
    with stopped_target(interp) as (t, _):
        before, regions = memory_digest(t.pid)
        rc, out, err = remora.run(["dump", "-p", t.pid, "--json"])
        if rc != 0:
            raise Fail("dump exited %d: %s" % (rc, tail(err)))
        rc, out, err = remora.run(["record", "-p", t.pid, "-d", "0.3", "-r", "2k", "--idle",
                                   "-o", os.path.join(t.dir, "x.collapsed")])
        if rc != 0:
            raise Fail("record exited %d: %s" % (rc, tail(err)))
        after, _ = memory_digest(t.pid)
        if before != after:
            raise Fail("the target's writable memory changed while it was stopped and profiled")
        return "%d writable regions unchanged after a dump and a 0.3 s recording" % regions


def changed_words(before, after):
    """[(address, old, new)] of the 8-byte words that differ; Fail if the mappings did."""
    if [(lo, d is None or len(d)) for lo, d in before] != [(lo, d is None or len(d)) for lo, d in after]:
        raise Fail("the target's writable mappings changed while it was stopped")
    words = []
    for (lo, old), (_, new) in zip(before, after):
        if old == new or old is None or new is None:
            continue
        for page in range(0, len(old), 4096):
            if old[page:page + 4096] == new[page:page + 4096]:
                continue
            for off in range(page, min(page + 4096, len(old)), 8):
                a, b = old[off:off + 8], new[off:off + 8]
                if a != b:
                    words.append((lo + off, int.from_bytes(a, "little"), int.from_bytes(b, "little")))
    return words


def test_anchor_writes(remora, interp):
    """`record --frame-anchor` (3.15) writes only what it documents: with the target
    stopped, the words that change are at most one per thread, aligned, each now the
    address of a frame in the target's writable memory (its last_profiled_frame)."""
    with stopped_target(interp) as (t, truth):
        before = list(writable_memory(t.pid))
        rc, out, err = remora.run(["record", "-p", t.pid, "-d", "0.3", "-r", "2k", "--frame-anchor",
                                   "--idle", "-o", os.path.join(t.dir, "x.collapsed")])
        if rc != 0:
            raise Fail("record --frame-anchor exited %d: %s" % (rc, tail(err)))
        after = list(writable_memory(t.pid))
        words = changed_words(before, after)
        nthreads = len(truth["threads"])
        inside = lambda v: any(d is not None and lo <= v < lo + len(d) for lo, d in after)
        bad = [w for w in words if w[0] % 8 or not inside(w[2])]
        if not words:
            raise Fail("record --frame-anchor wrote nothing: the option did not take effect")
        if len(words) > nthreads or bad:
            raise Fail("record --frame-anchor changed %d words for %d threads%s"
                       % (len(words), nthreads, "; not frame addresses: %s"
                          % ", ".join("%x: %x -> %x" % w for w in bad[:4]) if bad else ""))
        return "%d words written for %d threads, each a frame address" % (len(words), nthreads)


def test_anchor_refused(remora, interp):
    """--frame-anchor on a target without last_profiled_frame: exit 4, one line, and
    nothing written."""
    with stopped_target(interp) as (t, _):
        before, _ = memory_digest(t.pid)
        err = expect_failure(remora, ["record", "-p", t.pid, "-d", "0.2", "--frame-anchor",
                                      "-o", os.path.join(t.dir, "x.collapsed")], 4,
                             "record --frame-anchor on %s" % interp[0])
        after, _ = memory_digest(t.pid)
        if "3.15" not in err:
            raise Fail("the refusal does not say the option needs 3.15: %s" % tail(err))
        if before != after:
            raise Fail("the target's memory changed although the option was refused")
        return err.strip()


VALGRIND_ERRORS = re.compile(r"ERROR SUMMARY: (\d+) errors")
VALGRIND_LOST = re.compile(r"(definitely|indirectly) lost: ([\d,]+) bytes")


def test_valgrind(remora, interp):
    """valgrind (memcheck, full leak check) on `remora dump` and a short `remora record`."""
    if shutil.which("valgrind") is None:
        raise Skip("valgrind not installed")
    with open(remora.path, "rb") as f:
        if b"__asan_init" in f.read():
            raise Skip("an ASan build: valgrind cannot run it (make test runs this on the plain build)")
    vg = ["valgrind", "--error-exitcode=99", "--leak-check=full", "--show-leak-kinds=definite,indirect",
          "--suppressions=" + os.path.join(HERE, "valgrind.supp")]      # libbpf's bpf(2) unions
    notes = []
    with Target(interp, os.path.join(TARGETS, "known_stacks.py"), "truth.json") as t:
        t.wait_ready()
        t.wait_main_in_read()
        for args in (["dump", "-p", t.pid, "--json"],
                     ["record", "-p", t.pid, "-d", "0.5", "--idle", "-o", os.path.join(t.dir, "x.html")]):
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
        if interp[0] == "pyenv-3.12.1":
            out.append(("trust/anchor-refused/" + interp[0], lambda i=interp: test_anchor_refused(remora, i),
                        interp_missing(interp)))
        if interp[0] == "sid-3.15":
            out.append(("trust/anchor-writes/" + interp[0], lambda i=interp: test_anchor_writes(remora, i),
                        interp_missing(interp)))
        if interp[0] in VALGRIND_INTERPRETERS:
            out.append(("trust/valgrind/" + interp[0], lambda i=interp: test_valgrind(remora, i),
                        interp_missing(interp)))
    return out
