# Functional tests of --native (run by run.py): each thread's C stack merged with its
# Python stack, in true call order. Target: tests/targets/native_parks.py, four threads
# parked in C at known points; its own sys._current_frames() gives each thread's Python
# frames, and the C functions between them are the ones its source calls.
#
#   native/dump/INTERP   `dump --native --json` of the live target: per thread, the Python
#       frames (native false) are exactly the target's own, innermost first, and the C
#       frames (native true) sit between the right ones:
#         pauser    pause inner of every Python frame, py_pause next outside it
#         qsorter   C frames inner of py_cmp; qsort (or glibc's qsort_r/msort) between
#                   py_cmp and py_qsort
#         keysorter C frames between py_key and py_sorted (named ...sort... where the
#                   interpreter's ELF file has a .symtab: not Debian's builds, whose
#                   static functions have no names)
#         sleeper   the libc call time.sleep makes (clock_nanosleep, select) inner of py_sleep
#         jitter    pause, then a `?? (0xADDRESS)` frame (code in no file: unwound by its
#                   frame pointer), then C frames, then py_jit: unknown memory does not
#                   end the walk
#       Every frame says "native"; the target is left running, traced by no one, and its
#       parent (this test) saw no stop (waitpid WUNTRACED). The text dump shows the same
#       order (pause above py_pause).
#   native/record/INTERP   `record --native --blocking --idle` of the same target, 1 s (the
#       stop-the-world read: parked threads are off a CPU, and on the kernel engine a
#       thread's C stack comes with its ticks and its switch-outs only), to collapsed
#       stacks and a .remora recording converted to a flamegraph: in the flamegraph each
#       thread's deepest stack passes the same checks (its "native" list gives which frames
#       are C frames), and the collapsed stacks hold the C frames as frames (pause after
#       py_pause, outermost first), and the recording converted to the Firefox Profiler's
#       format puts pause in the "Native" category, py_pause not; the target is left
#       untraced.
#   native/core/INTERP   the same checks on `dump --core FILE --native --json` of a gcore
#       of the parked target (host interpreters: gdb loses the chroot's thread stacks, see
#       targets.LOST), and native/crash/INTERP on the kernel's core of it (SIGABRT,
#       RLIMIT_CORE raised; chroot interpreters and pyenv 3.12, with --root): the registers
#       are the core's NT_PRSTATUS, the memory the core's.
#   native/dlopen/INTERP   a library built now (cc) and loaded by the target after
#       `record --native --blocking` attached (its TracerPid says when), its block() parked in pause()
#       under py_block: the recording has a stack with pause, block (named from the new
#       file's symbols once its modules are reported again, within a second) and py_block
#       in that order (skipped without cc).
#   native/traced   a target strace traces: `dump --native` and `record --native
#       --blocking` (both stop it) are refused, exit 3, one line naming the tracer (skipped
#       without strace). `record --native` alone runs on the kernel engine, which needs no
#       ptrace: native_tick_tests.py.
#   native/top/INTERP   `top --native --blocking --idle -d 1`: the last table has rows for pause,
#       py_pause, py_cmp and py_key (C functions are rows as Python ones are).
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import time

from harness import (CRASH_TIMEOUT, INTERPRETERS, READY_TIMEOUT, CrashTarget, Fail, Skip, Target,
                     expect_failure, gcore, interp_missing, interpreter, kernel_cores_usable,
                     proc_state, script, tail, tracer_of, workdir)
from formats import flamegraph_data, parse_collapsed, parse_top_tables

ORDER = 140           # where run.py runs these tests among the modules' (ascending)

RECORD_INTERPRETERS = ("pyenv-3.9.18", "pyenv-3.11.7", "pyenv-3.12.1", "debian-3.11-static",
                       "sid-3.13-pie", "sid-3.15")

SLEEP_CALLS = ("clock_nanosleep", "__clock_nanosleep", "select", "__select", "nanosleep")
QSORT_CALLS = re.compile(r"^(qsort|qsort_r|__qsort_r|msort_with_tmp.*)$")


def has_symtab(path):
    """Whether the ELF file at path has a .symtab (else only .dynsym names its functions:
    Debian's builds, whose static functions, list_sort among them, have no names)."""
    with open(path, "rb") as f:
        data = f.read()
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3a)
    return any(struct.unpack_from("<I", data, shoff + k * shentsize + 4)[0] == 2  # SHT_SYMTAB
               for k in range(shnum))


def short(fn):
    """A Python frame's name as co_name gives it (remora shows co_qualname on 3.11+)."""
    return fn.rsplit(".", 1)[-1]


def index(frames, pred, what, name):
    for i, f in enumerate(frames):
        if pred(f):
            return i
    raise Fail("thread %s: no %s in %s" % (name, what, describe(frames)))


def describe(frames):
    return " | ".join("%s%s" % (f["function"], "[C]" if f.get("native") else "") for f in frames)


def py(fn):
    return lambda f: not f["native"] and short(f["function"]) == fn


def check_thread(name, frames, truth, stripped):
    for f in frames:
        if not isinstance(f.get("native"), bool):
            raise Fail("thread %s: frame %r has no native flag" % (name, f))
    got = [short(f["function"]) for f in frames if not f["native"]]
    if got != truth["python"]:
        raise Fail("thread %s: Python frames %s, the target's own are %s"
                   % (name, got, truth["python"]))
    first_py = index(frames, lambda f: not f["native"], "Python frame", name)
    c = lambda f: f["native"]
    if name == "pauser":
        i = index(frames, lambda f: c(f) and f["function"] in ("pause", "__libc_pause"), "pause", name)
        if i > first_py or short(frames[first_py]["function"]) != "py_pause":
            raise Fail("thread pauser: pause is not inner of py_pause: %s" % describe(frames))
    elif name == "qsorter":
        i_cmp, i_q = index(frames, py("py_cmp"), "py_cmp", name), index(frames, py("py_qsort"), "py_qsort", name)
        i_sort = index(frames, lambda f: c(f) and QSORT_CALLS.match(f["function"]), "qsort", name)
        if not (i_cmp < i_sort < i_q) or i_cmp == 0 or not frames[0]["native"]:
            raise Fail("thread qsorter: want C frames, py_cmp, qsort, py_qsort in that order: %s"
                       % describe(frames))
    elif name == "keysorter":
        i_key, i_s = index(frames, py("py_key"), "py_key", name), index(frames, py("py_sorted"), "py_sorted", name)
        between = [f for f in frames[i_key + 1:i_s] if f["native"]]
        if not between or (not stripped and not any("sort" in f["function"] for f in between)):
            raise Fail("thread keysorter: want the C sort between py_key and py_sorted: %s"
                       % describe(frames))
        if not frames[0]["native"]:
            raise Fail("thread keysorter: no C frame inner of py_key: %s" % describe(frames))
    elif name == "jitter":
        i_p = index(frames, lambda f: c(f) and f["function"] in ("pause", "__libc_pause"), "pause", name)
        i_j = index(frames, lambda f: c(f) and f["function"] == "??" and f["file"].startswith("0x"),
                    "frame in unknown memory", name)
        i_py = index(frames, py("py_jit"), "py_jit", name)
        if not (i_p < i_j < i_py) or first_py != i_py:
            raise Fail("thread jitter: want pause, the unknown frame, then py_jit: %s" % describe(frames))
    elif name == "sleeper":
        i = index(frames, lambda f: c(f) and f["function"] in SLEEP_CALLS, "sleep's libc call", name)
        if i > first_py or short(frames[first_py]["function"]) != "py_sleep":
            raise Fail("thread sleeper: the libc call is not inner of py_sleep: %s" % describe(frames))


def test_dump(remora, interp):
    with Target(interp, script("native_parks.py"), "ready.json") as t:
        ready = t.wait_ready()
        for th in ready["threads"].values():
            t.wait_thread_parked(th["tid"])
        rc, out, err = remora.run(["dump", "-p", t.pid, "--native", "--json"])
        if rc != 0:
            raise Fail("dump --native exited %d: %s" % (rc, tail(err)))
        doc = json.loads(out)
        rc, text, err = remora.run(["dump", "-p", t.pid, "--native"])
        m = re.match(r"Process \d+: Python \S+ \((.*)\)(?:, resident [^\n]*)?\n", text)
        if rc != 0 or not m:
            raise Fail("text dump --native exited %d: %s" % (rc, tail(text + err)))
        stripped = not has_symtab(m.group(1))
        by_tid = {th["native_id"]: th for th in doc["threads"]}
        notes = []
        for name, truth in sorted(ready["threads"].items()):
            th = by_tid.get(truth["tid"])
            if th is None:
                raise Fail("thread %s (%d) not in the dump" % (name, truth["tid"]))
            check_thread(name, th["frames"], truth, stripped)
            notes.append("%s %d" % (name, sum(f["native"] for f in th["frames"])))
        lines = text.splitlines()
        where = [k for k, l in enumerate(lines) if re.match(r"\s+(pause|__libc_pause) \(.*\[C\]$", l)]
        if rc != 0 or not where or not lines[where[0] + 1:] or \
                not any(l.strip().startswith("py_pause (") for l in lines[where[0] + 1:]):
            raise Fail("text dump --native: no 'pause ... [C]' line above py_pause (exit %d): %s"
                       % (rc, tail(text + err)))
        if tracer_of(t.pid) != 0 or proc_state(t.pid) in ("T", "t"):
            raise Fail("the target is left traced (%s) or stopped (%s)" % (tracer_of(t.pid), proc_state(t.pid)))
        pid, status = os.waitpid(t.pid, os.WUNTRACED | os.WNOHANG)
        if pid != 0:
            raise Fail("the target's parent saw a change of state: status %#x" % status)
        if t.finish() != 0:
            raise Fail("the target failed: %s" % t.log_tail())
    return "%sC frames: %s" % ("no .symtab; " if stripped else "", ", ".join(notes))


def parked(interp):
    """The target started, every thread parked in its system call; its ready document."""
    t = Target(interp, script("native_parks.py"), "ready.json")
    return t


def wait_parked(t):
    ready = t.wait_ready()
    for th in ready["threads"].values():
        t.wait_thread_parked(th["tid"])
    return ready


def interp_stripped(remora, t):
    rc, text, err = remora.run(["dump", "-p", t.pid])
    m = re.match(r"Process \d+: Python \S+ \((.*)\)(?:, resident [^\n]*)?\n", text)
    if rc != 0 or not m:
        raise Fail("dump exited %d: %s" % (rc, tail(text + err)))
    return not has_symtab(m.group(1))


def flamegraph_native_stacks(doc):
    """{tid: [stacks, each a frame list innermost first: {function, file, line, native}]}"""
    P = doc["current"]
    S, F, native = P["strings"], P["frames"], set(P.get("native", []))
    stacks, ti, path_ = {}, -1, []
    for depth, frame in zip(P["depth"], P["frame"]):
        if depth == 0:
            ti += 1
            path_ = []
            continue
        del path_[depth - 1:]
        path_.append({"function": S[F[3 * frame]], "file": S[F[3 * frame + 1]],
                      "line": F[3 * frame + 2], "native": frame in native})
        stacks.setdefault(P["threads"][ti][0], []).append(list(reversed(path_)))
    return stacks


def check_firefox(path, ready):
    """The Firefox Profiler file: C frames in the "Native" category, Python frames not."""
    with open(path) as f:
        doc = json.load(f)
    cats = [c["name"] for c in doc["meta"]["categories"]]
    if "Native" not in cats:
        raise Fail("firefox: no Native category in %s" % cats)
    native, strings = cats.index("Native"), doc["shared"]["stringArray"]
    seen = set()
    for th in doc["threads"]:
        ft, fn = th["frameTable"], th["funcTable"]
        for i, u in enumerate(ft["func"]):
            name = strings[fn["name"][u]]
            if name in ("pause", "py_pause"):
                if (ft["category"][i] == native) != (name == "pause"):
                    raise Fail("firefox: frame %s in category %s" % (name, cats[ft["category"][i]]))
                seen.add(name)
    if seen != {"pause", "py_pause"}:
        raise Fail("firefox: frames pause and py_pause not both there (%s)" % sorted(seen))


def test_record(remora, interp):
    d = workdir()
    try:
        with parked(interp) as t:
            ready = wait_parked(t)
            stripped = interp_stripped(remora, t)
            col, raw, html = (os.path.join(d, n) for n in ("n.collapsed", "n.remora", "n.html"))
            rc, out, err = remora.run(["record", "-p", t.pid, "--native", "--blocking", "--idle",
                                       "-d", 1, "-r", 50, "-o", col, "-o", raw])
            if rc != 0:
                raise Fail("record --native exited %d: %s" % (rc, tail(err)))
            rc, out, err2 = remora.run(["convert", raw, "-o", html])
            if rc != 0:
                raise Fail("convert of the recording exited %d: %s" % (rc, tail(err2)))
            fg = flamegraph_native_stacks(flamegraph_data("n.html", html))
            ffx = os.path.join(d, "n.json")
            rc, out, err3 = remora.run(["convert", raw, "-f", "firefox", "-o", ffx])
            if rc != 0:
                raise Fail("convert -f firefox exited %d: %s" % (rc, tail(err3)))
            check_firefox(ffx, ready)
            by_tid = {}
            for st in parse_collapsed(col):
                by_tid.setdefault(st.tid, []).append(st)
            for name, truth in sorted(ready["threads"].items()):
                stacks = fg.get(truth["tid"])
                if not stacks:
                    raise Fail("thread %s: no stacks in the flamegraph" % name)
                check_thread(name, max(stacks, key=len), truth, stripped)
                if name == "pauser":
                    deep = max(by_tid.get(truth["tid"], []), key=lambda s: len(s.frames), default=None)
                    fns = [f[0] for f in deep.frames] if deep else []
                    if "py_pause" not in fns or "pause" not in fns[fns.index("py_pause"):]:
                        raise Fail("collapsed: pauser's stack has no pause after py_pause: %s"
                                   % ";".join(fns))
            if tracer_of(t.pid) != 0 or proc_state(t.pid) in ("T", "t"):
                raise Fail("the target is left traced or stopped")
        return "%s%s" % ("no .symtab; " if stripped else "", err.strip().splitlines()[-1])
    finally:
        shutil.rmtree(d, ignore_errors=True)


def check_core(remora, t, core, ready, stripped):
    args = ["dump", "--core", core, "--native", "--json"] + (["--root", t.root] if t.root else [])
    rc, out, err = remora.run(args)
    if rc != 0:
        raise Fail("`remora %s` exited %d: %s" % (" ".join(args), rc, tail(err)))
    by_tid = {th["native_id"]: th for th in json.loads(out)["threads"]}
    notes = []
    for name, truth in sorted(ready["threads"].items()):
        th = by_tid.get(truth["tid"])
        if th is None:
            raise Fail("thread %s (%d) not in the core's dump" % (name, truth["tid"]))
        check_thread(name, th["frames"], truth, stripped)
        notes.append("%s %d" % (name, sum(f["native"] for f in th["frames"])))
    return "%sC frames: %s" % ("no .symtab; " if stripped else "", ", ".join(notes))


def test_core(remora, interp):
    with parked(interp) as t:
        ready = wait_parked(t)
        stripped = interp_stripped(remora, t)
        core = gcore(t)
        try:
            note = check_core(remora, t, core, ready, stripped)
        finally:
            os.unlink(core)
    return "gcore; " + note


def test_crash(remora, interp):
    why = kernel_cores_usable()
    if why:
        raise Skip(why)
    ct = CrashTarget(interp, script("native_parks.py"), "ready.json")
    with ct.t as t:
        ready = wait_parked(t)
        stripped = interp_stripped(remora, t)
        os.kill(t.pid, signal.SIGABRT)
        try:
            t.proc.wait(timeout=CRASH_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise Fail("target did not die of SIGABRT within %ds" % CRASH_TIMEOUT)
        cores = [n for n in os.listdir(t.dir) if n == "core" or n.startswith("core.")]
        if not cores:
            raise Skip("the kernel wrote no core")
        core = os.path.join(t.dir, cores[0])
        try:
            note = check_core(remora, t, core, ready, stripped)
        finally:
            os.unlink(core)
    return "kernel core; " + note


def test_traced(remora, interp):
    strace = shutil.which("strace")
    if strace is None:
        raise Skip("strace not installed (apt-get install strace)")
    with parked(interp) as t:
        wait_parked(t)
        tr = subprocess.Popen([strace, "-qq", "-o", "/dev/null", "-p", str(t.pid)],
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
        notes = []
        try:
            deadline = time.monotonic() + READY_TIMEOUT
            while tracer_of(t.pid) != tr.pid:
                if time.monotonic() > deadline or tr.poll() is not None:
                    raise Fail("strace never traced the target")
                time.sleep(0.01)
            for args in (["dump", "-p", t.pid, "--native"],
                         ["record", "-p", t.pid, "--native", "--blocking", "-d", 0.2, "-o", "-", "-f",
                          "collapsed"]):
                err = expect_failure(remora, args, 3, "%s --native on a traced target" % args[0])
                if str(tr.pid) not in err or "--native" not in err:
                    raise Fail("the message does not name the tracer %d and --native: %s"
                               % (tr.pid, err.strip()))
                notes.append(err.strip())
        finally:
            tr.send_signal(signal.SIGINT)
            tr.wait()
    return notes[0][:140]


BLOCK_C = "#include <unistd.h>\nvoid block(void) { for (;;) pause(); }\n"


def test_dlopen(remora, interp):
    cc = shutil.which("cc")
    if cc is None:
        raise Skip("no C compiler (cc) to build the library")
    with Target(interp, script("native_dlopen.py"), "ready.json") as t:
        t.wait_ready()
        src, so = t.host_path(t.visible_dir + "/block.c"), t.visible_dir + "/libblock.so"
        with open(src, "w") as f:
            f.write(BLOCK_C)
        r = subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", t.host_path(so), src],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        if r.returncode != 0:
            raise Fail("cc failed: %s" % r.stdout.decode(errors="replace")[-300:])
        raw = t.host_path(t.visible_dir + "/n.remora")
        rec = subprocess.Popen(remora.argv(["record", "-p", t.pid, "--native", "--blocking", "--idle",
                                            "-d", 3, "-r", 50, "-o", raw]),
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + READY_TIMEOUT
            while tracer_of(t.pid) != rec.pid:
                if time.monotonic() > deadline or rec.poll() is not None:
                    raise Fail("remora never held the target")
                time.sleep(0.01)
            t.proc.stdin.write((so + "\n").encode())
            t.proc.stdin.flush()
            tid = t.wait_file(".parked")["tid"]
            t.wait_thread_parked(tid)
            _, err = rec.communicate(timeout=READY_TIMEOUT)
        finally:
            if rec.poll() is None:
                rec.kill()
                rec.wait()
        if rec.returncode != 0:
            raise Fail("record --native exited %d: %s" % (rec.returncode, tail(err.decode())))
        html = t.host_path(t.visible_dir + "/n.html")
        rc, out, err2 = remora.run(["convert", raw, "-o", html])
        if rc != 0:
            raise Fail("convert exited %d: %s" % (rc, tail(err2)))
        stacks = flamegraph_native_stacks(flamegraph_data("n.html", html)).get(tid, [])
        for st in stacks:
            fns = [f["function"] for f in st]
            if "block" in fns and "py_block" in fns and \
                    any(f in fns[:fns.index("block")] for f in ("pause", "__libc_pause")) and \
                    fns.index("block") < fns.index("py_block") and st[fns.index("block")]["native"]:
                unnamed = sum(1 for s in stacks if any(f["function"] == "??" and f["file"].startswith("0x")
                                                       for f in s))
                return ("%d stacks of the thread, %d with a frame in no file known (before the "
                        "modules were reported again)" % (len(stacks), unnamed))
        raise Fail("no stack with pause, block, py_block in order; the deepest: %s"
                   % (describe(max(stacks, key=len)) if stacks else "none"))


def test_top(remora, interp):
    with parked(interp) as t:
        wait_parked(t)
        rc, out, err = remora.run(["top", "-p", t.pid, "--native", "--blocking", "--idle", "-d", 1,
                                   "-l", 500])
        if rc != 0:
            raise Fail("top --native exited %d: %s" % (rc, tail(err)))
        tables = parse_top_tables(out)
        if not tables:
            raise Fail("top --native printed no table: %s" % tail(out))
        fns = {k[0] for k in tables[-1][1]}
        missing = [f for f in ("pause", "py_pause", "py_cmp", "py_key") if f not in fns]
        if missing:
            raise Fail("top --native: no rows for %s in %s" % (missing, sorted(fns)[:40]))
    return "%d rows" % len(tables[-1][1])


def tests(remora):
    """[(name, function, skip reason or None)] for run.py."""
    return [("native/dump/%s" % i[0], lambda i=i: test_dump(remora, i), interp_missing(i))
            for i in INTERPRETERS] + [
        ("native/record/%s" % i[0], lambda i=i: test_record(remora, i), interp_missing(i))
        for i in INTERPRETERS if i[0] in RECORD_INTERPRETERS] + [
        ("native/core/%s" % i[0], lambda i=i: test_core(remora, i), interp_missing(i))
        for i in INTERPRETERS if not i[2]] + [
        ("native/crash/%s" % i[0], lambda i=i: test_crash(remora, i), interp_missing(i))
        for i in INTERPRETERS if i[2] or i[0] == "pyenv-3.12.1"] + [
        ("native/top/%s" % i[0], lambda i=i: test_top(remora, i), interp_missing(i))
        for i in INTERPRETERS if i[0] in ("pyenv-3.12.1", "sid-3.15")] + [
        ("native/dlopen/%s" % i[0], lambda i=i: test_dlopen(remora, i), interp_missing(i))
        for i in INTERPRETERS if i[0] in ("pyenv-3.12.1", "debian-3.11-static", "sid-3.15")] + [
        ("native/traced", lambda: test_traced(remora, interpreter("pyenv-3.12.1")),
         interp_missing(interpreter("pyenv-3.12.1")))]
