# Functional tests for `remora dump --core` and for snapshots, added to run.py's list by
# tests(remora); helpers from harness.py (cores of a target: targets.py) and formats.py,
# as the other *_tests.py modules.
#
#   core/known-stacks/INTERP  gcore of a parked known_stacks.py target; `dump --core --json`
#                             must equal the target's own truth exactly, as the live test
#                             (chroot targets get --root, which gcore's host paths pass)
#   core/crash/INTERP         the same from a kernel core (SIGABRT with RLIMIT_CORE raised):
#                             a chroot target's core names files chroot-relative (--root)
#   core/gil/INTERP           gcore of gil_spin.py: the spinner holds the GIL (read from
#                             memory), nobody is on CPU (a core has no scheduler state)
#   core/errors               no such core (2), not a core (4), core of a non-Python (4),
#                             a wrong --exe (4, says the file differs), usage (1)
#   core/exe-root             a static interpreter's core, given only a copy of the
#                             executable (--exe) and an empty --root: exact truth
#   snapshot/INTERP           a snapshot recorded from a live known_stacks.py target
#                             (REMORA_FUZZ_TOOL snap-record) replays to the same truth
# Cores are written next to the target and removed with it (a few hundred MB each).

import os
import re
import shutil
import signal
import struct
import subprocess
import tempfile

from harness import (CRASH_TIMEOUT, GCORE_TIMEOUT, INTERPRETERS, TARGETS, CrashTarget, Fail, Skip,
                     Target, dump_frames_problems, dump_threads_problems, expect_failure, gcore,
                     interp_missing, kernel_cores_usable, one_line, tail)
from formats import parse_dump

ORDER = 20            # where run.py runs these tests among the modules' (ascending)

# interpreters per test (names from harness.INTERPRETERS): every minor version 3.9-3.15,
# shared libpython, static, PIE and not, host and chroot
CORE_INTERPS = ["pyenv-3.9.18", "pyenv-3.10.13", "pyenv-3.11.7", "debian-3.11-static",
                "pyenv-3.12.1", "pyenv-3.13.0", "sid-3.13-pie", "sid-3.14", "sid-3.15",
                "sid-3.15-pie"]
# kernel cores: every chroot interpreter (their gcores lose thread stacks, see LOST)
CRASH_INTERPS = ["pyenv-3.9.18", "pyenv-3.12.1", "sid-3.13", "sid-3.14-pie", "sid-3.15",
                 "sid-3.15-pie"]
GIL_INTERPS = ["pyenv-3.9.18", "pyenv-3.12.1", "sid-3.15"]
SNAPSHOT_INTERPS = ["pyenv-3.9.18", "pyenv-3.10.13", "pyenv-3.11.7", "debian-3.11-static",
                    "pyenv-3.12.1", "pyenv-3.13.0", "sid-3.13", "sid-3.14-pie", "sid-3.15"]
# 3.11: frames whose header names a function (f_func) the unwinder checks against its code
HALF_PUSH_INTERPS = ["pyenv-3.11.7", "debian-3.11-static"]


def core_args(target, core, json=True):
    args = ["dump", "--core", core] + (["--json"] if json else [])
    if target.root:
        args += ["--root", target.root]
    return args


def compare(doc, truth, pid, gil_free=True, lost_stacks=False):
    """Problems between a dump and a known_stacks truth (as test_known_stacks checks).
    With lost_stacks (gdb saved no thread stack but the main one), a worker thread may
    instead report an error and no frames: never other frames than the truth's."""
    problems, got, _ = dump_threads_problems(doc, truth, pid)
    holders = [n for n, th in got.items() if th.get("gil") is True]
    if gil_free and holders:
        problems.append("threads %s hold the GIL; every thread of the target is parked in C"
                        % holders)
    on_cpu = [n for n, th in got.items() if th.get("on_cpu") is not False]
    if on_cpu:
        problems.append("threads %s on CPU in a core" % on_cpu)
    more, diff = dump_frames_problems(got, truth, lost_stacks)
    problems += more
    if problems:
        raise Fail("; ".join(problems) + ("\n" + "\n".join("    " + l for l in diff)
                                              if diff else ""))


def dump_core(remora, args):
    rc, out, err = remora.run(args)
    if rc != 0:
        raise Fail("`remora %s` exited %d: %s" % (" ".join(args), rc, tail(err)))
    return parse_dump(out)


def test_core_known(remora, interp):
    with Target(interp, os.path.join(TARGETS, "known_stacks.py"), "truth.json") as t:
        truth = t.wait_ready()
        t.wait_main_in_read()
        lost = []
        core = gcore(t, lost)
        size = os.path.getsize(core)
        try:
            doc = dump_core(remora, core_args(t, core))
            compare(doc, truth, t.pid, lost_stacks=bool(lost))
            exact = sum(1 for th in doc["threads"] if not th.get("error"))
            rc, out, err = remora.run(core_args(t, core, json=False))
            if rc != 0:
                raise Fail("text dump --core exited %d: %s" % (rc, tail(err)))
            absent = [str(th["native_id"]) for th in truth["threads"]
                      if not re.search(r"(?<!\d)%d(?!\d)" % th["native_id"], out)]
            if absent:
                raise Fail("text dump --core does not mention thread ids %s" % ", ".join(absent))
        finally:
            os.unlink(core)
        if lost:
            return ("core of %d MB; gdb lost %d mappings (in-mapping guard pages): %d of %d "
                    "threads exact, the others report an error"
                    % (size >> 20, len(lost), exact, len(doc["threads"])))
        return "core of %d MB" % (size >> 20)


def test_core_crash(remora, interp):
    why = kernel_cores_usable()
    if why:
        raise Skip(why)
    ct = CrashTarget(interp, os.path.join(TARGETS, "known_stacks.py"), "truth.json")
    with ct.t as t:
        truth = t.wait_ready()
        t.wait_main_in_read()
        os.kill(t.pid, signal.SIGABRT)
        try:
            t.proc.wait(timeout=CRASH_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise Fail("target did not die of SIGABRT within %ds" % CRASH_TIMEOUT)
        if t.proc.returncode != -signal.SIGABRT:
            raise Fail("target exited %d, want -SIGABRT" % t.proc.returncode)
        cores = [n for n in os.listdir(t.dir) if n == "core" or n.startswith("core.")]
        if not cores:
            raise Skip("the kernel wrote no core (core_pattern %r)"
                           % open("/proc/sys/kernel/core_pattern").read().strip())
        core = os.path.join(t.dir, cores[0])
        try:
            doc = dump_core(remora, core_args(t, core))
            compare(doc, truth, t.pid)
            if t.root:
                # without --root the chroot-relative names do not resolve: one line, exit 4
                rc, out, err = remora.run(["dump", "--core", core, "--json"])
                if rc != 4 or one_line(err) or "--root" not in err:
                    raise Fail("chroot core without --root: exit %d, stderr %r (want 4 and "
                                   "one line naming --root)" % (rc, err.strip()))
        finally:
            os.unlink(core)


def test_core_gil(remora, interp):
    with Target(interp, os.path.join(TARGETS, "gil_spin.py"), "ready.json") as t:
        ready = t.wait_ready()
        t.wait_main_in_read()
        core = gcore(t)
        try:
            doc = dump_core(remora, core_args(t, core))
        finally:
            os.unlink(core)
        got = {th.get("native_id"): th for th in doc["threads"]}
        wrong = []
        sp = got.get(ready["spinner"])
        # the spinner has no rival for the GIL (the others are parked in C and do not ask
        # for it), so it holds it whenever gdb stops it
        if sp is None:
            wrong.append("spinner %d absent" % ready["spinner"])
        elif sp.get("gil") is not True or sp.get("on_cpu") is not False:
            wrong.append("spinner gil=%s on_cpu=%s, want true/false" % (sp.get("gil"), sp.get("on_cpu")))
        for n in ready["parked"] + [ready["main"]]:
            th = got.get(n)
            if th is None:
                wrong.append("thread %d absent" % n)
            elif th.get("gil") is not False or th.get("on_cpu") is not False:
                wrong.append("parked %d gil=%s on_cpu=%s" % (n, th.get("gil"), th.get("on_cpu")))
        if got.get(ready["main"], {}).get("main") is not True:
            wrong.append("main thread %d not marked main" % ready["main"])
        if wrong:
            raise Fail(", ".join(wrong))


def test_core_errors(remora):
    tmp = tempfile.mkdtemp(prefix="remora-func-core-")
    try:
        missing = os.path.join(tmp, "no-such-core")
        expect_failure(remora, ["dump", "--core", missing], 2, "--core on a missing file")
        notcore = os.path.join(tmp, "not-a-core")
        with open(notcore, "wb") as f:
            f.write(b"\x7fELF" + b"\0" * 200)
        expect_failure(remora, ["dump", "--core", notcore], 4, "--core on a non-core file")
        expect_failure(remora, ["dump", "--core", "/bin/true"], 4, "--core on an executable")
        expect_failure(remora, ["dump", "-p", "1", "--core", notcore], 1, "-p with --core")
        expect_failure(remora, ["dump", "-p", "1", "--exe", "/bin/true"], 1, "--exe without --core")
        # a core of a process that is not Python
        if shutil.which("gcore") is None:
            raise Skip("gcore (gdb) not installed")
        sleeper = subprocess.Popen(["sleep", "100"])
        try:
            subprocess.run(["gcore", "-o", os.path.join(tmp, "sleep"), str(sleeper.pid)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=GCORE_TIMEOUT)
        finally:
            sleeper.kill()
            sleeper.wait()
        core = os.path.join(tmp, "sleep.%d" % sleeper.pid)
        if not os.path.exists(core):
            raise Fail("gcore of sleep wrote nothing")
        expect_failure(remora, ["dump", "--core", core], 4, "core of `sleep`")
        os.unlink(core)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    # a static interpreter's core read with another executable: refused, and said why
    by_name = {i[0]: i for i in INTERPRETERS}
    interp, other = by_name["debian-3.11-static"], by_name["pyenv-3.12.1"][1]
    if interp_missing(interp) or not os.path.exists(other):
        raise Skip("needs %s and %s" % (interp[1], other))
    with Target(interp, os.path.join(TARGETS, "known_stacks.py"), "truth.json") as t:
        t.wait_ready()
        t.wait_main_in_read()
        core = gcore(t)
        try:
            err = expect_failure(remora, ["dump", "--core", core, "--exe", other], 4,
                                     "static 3.11 core with --exe python3.12")
            if "not the file the core was made with" not in err:
                raise Fail("wrong --exe: stderr does not say the file differs: %s" % err.strip())
        finally:
            os.unlink(core)


def test_core_exe_root(remora):
    """A static interpreter's core read with only a copy of its executable (--exe) and an
    empty --root: the interpreter's bytes the core lacks come from the copy."""
    by_name = {i[0]: i for i in INTERPRETERS}
    interp = by_name["debian-3.11-static"]
    if interp_missing(interp):
        raise Skip(interp_missing(interp))
    with Target(interp, os.path.join(TARGETS, "known_stacks.py"), "truth.json") as t:
        truth = t.wait_ready()
        t.wait_main_in_read()
        core = gcore(t)
        elsewhere = os.path.join(t.dir, "elsewhere")
        os.makedirs(os.path.join(elsewhere, "root"))
        exe = os.path.join(elsewhere, "python-copy")
        shutil.copy(interp[1], exe)
        try:
            doc = dump_core(remora, ["dump", "--core", core, "--json", "--exe", exe,
                                          "--root", os.path.join(elsewhere, "root")])
            compare(doc, truth, t.pid)
        finally:
            os.unlink(core)


def snap_record(remora, tool, interp, script, ready, snap):
    """A snapshot of `script` parked with its main thread in read(0): the target's ready
    JSON, snap-record's dump (its stdout) and the target's pid."""
    with Target(interp, os.path.join(TARGETS, script), ready) as t:
        truth = t.wait_ready()
        t.wait_main_in_read()
        rc, out, err = remora.run(["snap-record", t.pid, snap], binary=tool)
        if rc != 0:
            raise Fail("snap-record exited %d: %s" % (rc, tail(err)))
        return truth, out, t.pid


def test_snapshot(remora, interp, tool):
    keep = tempfile.mkdtemp(prefix="remora-func-snap-")
    try:
        snap = os.path.join(keep, "target.snap")
        truth, out, pid = snap_record(remora, tool, interp, "known_stacks.py", "truth.json", snap)
        compare(parse_dump(out), truth, pid, gil_free=False)
        # the target is gone: the snapshot alone must give the same answer
        rc, out, err = remora.run(["snap-dump", snap], binary=tool)
        if rc != 0:
            raise Fail("snap-dump exited %d: %s" % (rc, tail(err)))
        compare(parse_dump(out), truth, pid, gil_free=False)
        return "snapshot of %d KB" % (os.path.getsize(snap) >> 10)
    finally:
        shutil.rmtree(keep, ignore_errors=True)


# 3.11's _PyInterpreterFrame (Include/internal/pycore_frame.h): f_func first, f_code at
# 32, int stacktop at 64, localsplus at 72
FR311_CODE, FR311_STACKTOP, FR311_LOCALS = 32, 64, 72


def snapshot_mems(data):
    """(offset, address, length) of each MEM record's bytes in a snapshot
    (tests/fuzz/README.md: records u32 type, u32 0, u64 len, payload, 8-aligned)."""
    if data[:8] != b"RMRSNAP\0":
        raise Fail("not a snapshot")
    out, at = [], 16
    while at + 16 <= len(data):
        kind, _, n = struct.unpack_from("<IIQ", data, at)
        if kind == 5 and n >= 8:
            out.append((at + 24, struct.unpack_from("<Q", data, at + 16)[0], n - 8))
        at += 16 + ((n + 7) & ~7)
    return out


def find_frames(data, mems, func, code):
    """Offsets in data of every 3.11 frame header whose f_func is func and f_code code."""
    want, got = struct.pack("<Q", func), []
    for off, _, n in mems:
        k = data.find(want, off, off + n)
        while k >= 0:
            if (k - off) % 8 == 0 and k + FR311_LOCALS <= off + n and \
                    struct.unpack_from("<Q", data, k + FR311_CODE)[0] == code:
                got.append(k)
            k = data.find(want, k + 1, off + n)
    return got


def test_half_push(remora, interp, tool):
    """A frame being pushed on 3.11, caught half-way (a frozen target, or a copy taken as
    the stores land in whatever order the compiler gave them): the caller's consumed
    slots and the new frame's f_func already name the callee, its f_code and instruction
    are still the stale frame's. A snapshot of outer() -> inner() parked in a read,
    rewritten so: its dump must not name the stale code (inner) as a frame; what it shows
    of the main thread is an error or the outer frames the target itself reported."""
    keep = tempfile.mkdtemp(prefix="remora-func-half-")
    try:
        snap = os.path.join(keep, "target.snap")
        truth, out, _ = snap_record(remora, tool, interp, "half_push.py", "ready.json", snap)
        want = [(f["function"], f["line"]) for f in truth["frames"]]

        def main_frames(out):
            doc = parse_dump(out)
            main = [th for th in doc["threads"] if th.get("main")]
            if len(main) != 1:
                raise Fail("%d main threads in the dump" % len(main))
            return main[0], [(f["function"], f["line"]) for f in main[0]["frames"]]

        th, got = main_frames(out)
        if got != want:
            raise Fail("whole snapshot: main thread %s, the target said %s" % (got, want))
        ids = truth["ids"]
        data = bytearray(open(snap, "rb").read())
        mems = snapshot_mems(data)
        callee = find_frames(data, mems, ids["inner"], ids["inner_code"])
        caller = find_frames(data, mems, ids["outer"], ids["outer_code"])
        if not callee or not caller:
            raise Fail("no frame of inner (%d) or outer (%d) in the snapshot: 3.11's frame "
                       "layout is not what this test knows" % (len(callee), len(caller)))
        slots = 0
        for k in caller:
            st = struct.unpack_from("<i", data, k + FR311_STACKTOP)[0]
            for at in (k + FR311_LOCALS + 8 * st, k + FR311_LOCALS + 8 * st + 8):
                if 0 <= st < 64 and struct.unpack_from("<Q", data, at)[0] == ids["inner"]:
                    struct.pack_into("<Q", data, at, ids["other"])
                    slots += 1
        if slots == 0:
            raise Fail("outer's frame holds no consumed slot naming inner")
        for k in callee:
            struct.pack_into("<Q", data, k, ids["other"])
        half = os.path.join(keep, "half.snap")
        with open(half, "wb") as f:
            f.write(data)
        rc, out, err = remora.run(["snap-dump", half], binary=tool)
        if rc != 0:
            raise Fail("snap-dump of the rewritten snapshot exited %d: %s" % (rc, tail(err)))
        th, got = main_frames(out)
        named = [f for f, _ in got if f in ("inner", "other")]
        if named:
            raise Fail("the half-pushed frame was named %s: main thread %s" % (named, got))
        if th.get("error"):
            return "whole: %d frames as the target said; half-pushed: error (%s)" % (len(want), th["error"])
        if got[:1] != [("<moving>", 0)] or got[1:] != want[1:]:
            raise Fail("half-pushed: main thread %s, expected <moving> then %s" % (got, want[1:]))
        return "whole: %d frames as the target said; half-pushed: %d outer frames known" % (
            len(want), len(got) - 1)
    finally:
        shutil.rmtree(keep, ignore_errors=True)


def tests(remora):
    """(name, function, skip reason) for run.py's list."""
    by_name = {i[0]: i for i in INTERPRETERS}
    out = []
    for name in CORE_INTERPS:
        i = by_name[name]
        out.append(("core/known-stacks/" + name, lambda i=i: test_core_known(remora, i),
                    interp_missing(i)))
    for name in CRASH_INTERPS:
        i = by_name[name]
        out.append(("core/crash/" + name, lambda i=i: test_core_crash(remora, i),
                    interp_missing(i)))
    for name in GIL_INTERPS:
        i = by_name[name]
        out.append(("core/gil/" + name, lambda i=i: test_core_gil(remora, i),
                    interp_missing(i)))
    out.append(("core/errors", lambda: test_core_errors(remora), None))
    out.append(("core/exe-root", lambda: test_core_exe_root(remora), None))
    tool = os.environ.get("REMORA_FUZZ_TOOL")
    no_tool = None if tool is not None and os.access(tool, os.X_OK) else \
        "REMORA_FUZZ_TOOL (build/fuzz_tool, made by make test) not set"
    for prefix, names, test in (("snapshot/", SNAPSHOT_INTERPS, test_snapshot),
                                ("snapshot/half-pushed/", HALF_PUSH_INTERPS, test_half_push)):
        for name in names:
            i = by_name[name]
            out.append((prefix + name, lambda i=i, test=test: test(remora, i, tool),
                        no_tool or interp_missing(i)))
    return out
