# libremora (issue 47): the C library as a user gets it, installed.
#
#   library/c-example/INTERP   `make lib` and `make install` into a temporary DESTDIR;
#                              examples/dump_threads.c compiled against the installed
#                              header with pkg-config, linked shared (run with the
#                              installed libremora.so.0) and static (libremora.a and
#                              pkg-config --static); each run against known_stacks.py:
#                              every thread and its frames (function, file, line) equal to
#                              the target's own sys._current_frames(), the main thread
#                              marked main
#   library/c-errors           the example against a pid that does not exist (exit 2) and
#                              a process that is not Python (exit 4): one line each, from
#                              the library's message; tests/lib/lib_check.c (built the same
#                              way) on a core file that does not exist (2), unknown flags (1)
#   library/c-api/core/INTERP  gcore of known_stacks.py (pyenv 3.12, Debian's static 3.11):
#                              remora_open_core, read twice, every thread as the truth says
#   library/c-api/flags/INTERP REMORA_MAIN_THREAD: the main thread alone, exact;
#                              REMORA_OPCODES: the same frames, each thread's innermost one
#                              with its instruction's name (pyenv 3.9, 3.12, sid 3.15)
#   library/c-api/tasks/INTERP remora_tasks on async_tasks.py: every task of its truth, by
#                              id, with its name and its awaiters (pyenv 3.9, 3.12, sid 3.15)
#   library/c-api/native/INTERP  tests/lib/lib_flags.c (built against the installed
#                              library) with REMORA_NATIVE on native_marks.py (pyenv 3.9,
#                              3.12, 3.13: unstripped): the thread's Python frames equal to
#                              the target's, C frames merged: the lock's wait innermost, a
#                              C frame of the sort between leaf and step, one of reduce
#                              between step and worker
#   library/c-api/running-task/INTERP  lib_flags with REMORA_RUNNING_TASK on
#                              async_tasks.py (pyenv 3.9, 3.12, sid 3.15): the loop
#                              thread's task_id is id() of the target's running task, no
#                              other thread has one, none without the flag
#   library/hosts/HOST         `make python`'s module (one _remora.abi3.so) imported by the
#                              host interpreter HOST (HOSTS: pyenv 3.9-3.13, Debian's 3.11,
#                              the chroot's 3.13-3.15, those run in a private mount
#                              namespace with /proc mounted in the chroot): one run reads
#                              host_truth.py under every build of the run (started once for
#                              all hosts): main's and the parked threads' frames (funcname,
#                              filename, lineno) equal to the target's own
#                              sys._current_frames(), the main flag, the result types,
#                              columns from 3.11; HAS_GIL/ON_CPU on the spinning thread and
#                              never on a parked one, HAS_EXCEPTION on the thread in an
#                              except block only (50 reads each); get_all_awaited_by()
#                              against asyncio.all_tasks(); each failing target named
#   library/gil-requested/TARGET  gil_wait.py (sid 3.15, 3.15-pie, 3.14, pyenv 3.12, 3.9),
#                              read from Debian's 3.11 in mode ALL: main in a C call that
#                              keeps the GIL HAS_GIL, a thread waiting in take_gil()
#                              THREAD_STATUS_GIL_REQUESTED in every read on 3.15 and in
#                              none before (3.15 alone records it), one parked in read(2)
#                              neither; the same bits in every sample of remora.sample()
#                              (the sampling API, kernel engine where it loads, idle kept)
#   library/native-marks/TARGET  native_marks.py (pyenv 3.9-3.13, sid 3.14, 3.15) read
#                              with native=True from Debian's 3.11: the callback thread's
#                              frames equal to the target's own, a "<native>" after each
#                              one C code called (sorted's key, reduce's function,
#                              Context.run's on 3.14+, the outermost) on 3.11+, after the
#                              outermost alone before
#   library/native-marks/cpython-3.15  the same thread read in the chroot by CPython
#                              3.15's own _remote_debugging and by remora: equal
#   library/python-tasks/TARGET  async_tasks.py under TARGET (3.9, 3.12, sid 3.15), read
#                              from Debian's 3.11: get_all_awaited_by() holds every task of
#                              the target's asyncio.all_tasks() under its loop's thread, by
#                              id, with its name, its coroutine stack (funcname, filename,
#                              lineno) and the ids awaiting it as the target recorded them;
#                              get_async_stack_trace() has the running task under that thread
#   library/python-stats/TARGET  5 reads of known_stacks.py (pyenv 3.9, 3.12, sid 3.15)
#                              with stats=True, cache_frames=True from Debian's 3.11:
#                              get_stats() has CPython 3.15's keys; frame-cache hits and
#                              misses add up to the threads returned, frames from the cache
#                              and from memory to the frames returned (some from the
#                              cache: six threads parked); code-object hits and misses,
#                              vectored reads and their segments counted, all complete
#   library/pip-install        `python3 -m pip install . --no-build-isolation --no-index` into a
#                              fresh venv of Debian's python3 (its setuptools, no network):
#                              the installed remora (an .abi3.so) dumps known_stacks.py as
#                              its truth says
#   library/python-sample      remora.sample(pid, rate=50, duration=0.5) of known_stacks.py
#                              (Debian's 3.11 reading pyenv 3.12): samples, each every
#                              thread as the target's truth says; get_child_pids() of the
#                              driver names the sleep(1) it started, recursive and not
#   library/c-sample/ENGINE/INTERP  examples/sample_loop.c (built as the example is) run
#                              on busy.py (one thread spinning 12 frames deep; pyenv 3.12,
#                              sid 3.15) with the kernel engine (SKIP when it cannot be
#                              loaded here) and the user one: every sample of the spinning
#                              thread its stack as busy.py has it (spin in its loop, then
#                              recurse at its calls; a partial one its outer frames), under
#                              threading's; the main thread (asleep) never sampled; the
#                              engine line names the engine (user: "the user-space engine
#                              was asked for"), kernel samples marked so, counts agree
#   library/c-sample-gil       sample_loop with the kernel engine and gil mode (read at the
#                              tick, issue 48): exit 0, `engine kernel`, samples read in the
#                              kernel, never the asleep main thread
#   library/python-sample-engine/ENGINE  remora.sample(pid, engine=ENGINE, active_only=True)
#                              of busy.py from Debian's 3.11: the spinning thread's every
#                              sample its stack (user: a partial one its outer frames),
#                              the sleeping main thread left out, sample_engine() the engine
#   library/python-reuse/TARGET  inner_steps.py under TARGET (pyenv 3.9, 3.12, sid 3.15):
#                              its main thread's inner frames change step by step (grown,
#                              shrunk, the innermost at another line, a middle frame at
#                              another line with the same functions above it, unchanged)
#                              while its outer frames stay; read from Debian's 3.11 by two
#                              unwinders kept across the steps (cache_frames True and
#                              False), twice a step: every reading's main thread (funcname,
#                              filename, lineno) equal to the target's own frames at that
#                              step; a list handed back and then changed by the caller does
#                              not change the next result, and no list handed back is
#                              changed by a later call
#   library/python-errors      ProcessLookupError for a free pid, RuntimeError for sleep(1),
#                              ValueError for all_threads with only_active_thread,
#                              is_python_process, get_stats() without stats=True
#   library/cpython-tests      CPython's own tests of _remote_debugging
#                              (Lib/test/test_external_inspection.py from Debian's
#                              libpython3.15-testsuite in the test chroot), unchanged, under
#                              the chroot's python3.15 with remora in the place of
#                              _remote_debugging (a directory first on PYTHONPATH holding
#                              _remote_debugging.py, which re-exports remora's names, and
#                              `make python`'s module): every test passes, or is skipped by
#                              CPython itself, or is one of CPYTHON_SKIPS (each a documented
#                              difference, docs/api.md), skipped with its reason; the PASS
#                              line counts them
#
# The ASan run (--remora build-asan/remora) builds the library and the example with the
# same sanitizers (LIB_BUILD=build-asan-lib); the Python module too, loaded with the
# sanitizer's runtime preloaded. Standard library only.

import atexit
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading

from harness import (INTERPRETERS, READ_SYSCALL, REPO, SANITIZER_MARKS,
                     TARGETS, Fail, Skip,
                     Target, dump_frames_problems, dump_threads_problems, expect_failure, free_pid,
                     gcore, interp_missing, tail, wait_asleep)

ORDER = 320           # after install_tests (both run make install)

PREFIX = "/opt/libremora-test"
EXAMPLE_INTERPS = ("pyenv-3.9.18", "pyenv-3.12.1", "debian-3.11-static", "sid-3.13",
                   "sid-3.15-pie")
ASAN_FLAGS = "-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer " \
             "-fno-sanitize-recover=all"
BUILD_TIMEOUT = 900   # s: make lib compiles the reading half of the tree again (-fPIC)
HEADER = re.compile(r"^pid (\d+): Python (\S+), (\d+) threads$")
THREAD = re.compile(r'^thread (\d+)(?: "(.*)")?( \(main\))?(?: \((?:holds the GIL|on a CPU)\))?$')
FRAME = re.compile(r'^    File "(.*)", line (\d+), in (.*)$')
CHECK_FRAME = re.compile(r'^    File "(.*)", line (\d+), in (.*?)(?: @([A-Z_0-9]+))?$')
CHECK_THREAD = re.compile(r'^thread (\d+)( \(main\))?( \(holds the GIL\))?$')
CHECK_TASK = re.compile(r'^task (0x[0-9a-f]+) "(.*)" awaited by((?: 0x[0-9a-f]+)*)$')


def make_env(extra=None):
    """The environment for a make of the tree: an enclosing `make test`'s variables (its
    jobserver, WERROR=1) not passed on, as install_tests.py does."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")}
    env.update(extra or {})
    return env


def sanitized(binary):
    """Is binary an ASan build (the library and the example are built alike)?"""
    with open(binary, "rb") as f:
        return b"__asan_init" in f.read()


class Installed:
    """libremora built and installed into a temporary DESTDIR, the example built against
    it twice (shared and static); made once per run, removed at exit."""
    made = None

    @classmethod
    def get(cls, remora):
        if cls.made is None:
            cls.made = cls(remora)
        if isinstance(cls.made, Exception):
            raise cls.made
        return cls.made

    def __init__(self, remora):
        self.dest = tempfile.mkdtemp(prefix="remora-libtest-")
        atexit.register(shutil.rmtree, self.dest, True)
        try:
            self._make(remora)
        except Fail as e:
            Installed.made = e
            raise

    def _run(self, argv, env=None, what=None):
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           env=env or make_env(), timeout=BUILD_TIMEOUT)
        if p.returncode != 0:
            raise Fail("%s: exit %d: %s" % (what or " ".join(argv), p.returncode,
                                            tail(p.stdout + p.stderr, 6)))
        return p.stdout

    def _make(self, remora):
        asan = sanitized(remora.path)
        lib = ["LIB_BUILD=build-asan-lib", "LIB_CFLAGS=" + ASAN_FLAGS,
               "LDFLAGS=" + ASAN_FLAGS] if asan else []
        make = ["make", "-s", "-C", REPO] + lib
        self._run(make + ["lib"], what="make lib")
        self._run(make + ["install", "PREFIX=" + PREFIX, "DESTDIR=" + self.dest,
                          "BIN=" + os.path.abspath(remora.path)], what="make install")
        self.root = self.dest + PREFIX
        env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(self.root, "lib", "pkgconfig"))
        pc = ["pkg-config", "--define-prefix"]
        cflags = self._run(pc + ["--cflags", "libremora"], env).split()
        libs = self._run(pc + ["--libs", "libremora"], env).split()
        static = self._run(pc + ["--static", "--libs", "libremora"], env).split()
        if not any(f == "-I" + os.path.join(self.root, "include") for f in cflags):
            raise Fail("pkg-config --cflags libremora: %s, not the installed include/" % cflags)
        cc = ["cc", "-std=c11", "-Wall", "-Wextra", "-Werror"] + \
             (ASAN_FLAGS.split() if asan else ["-O2"])
        src = os.path.join(REPO, "examples", "dump_threads.c")
        self.shared = os.path.join(self.dest, "dump_threads")
        self.static = os.path.join(self.dest, "dump_threads_static")
        self._run(cc + cflags + ["-o", self.shared, src] + libs, what="cc (shared)")
        # libremora.a before the libraries it needs: -lremora names the archive here
        static = ["-Wl,-Bstatic", "-lremora", "-Wl,-Bdynamic"] + \
            [f for f in static if f != "-lremora"]
        self._run(cc + cflags + ["-o", self.static, src] + static, what="cc (static)")
        self.sample = os.path.join(self.dest, "sample_loop")
        self._run(cc + cflags + ["-o", self.sample, os.path.join(REPO, "examples", "sample_loop.c")]
                  + libs, what="cc (sample_loop)")
        self.check = os.path.join(self.dest, "lib_check")
        self._run(cc + cflags + ["-o", self.check, os.path.join(REPO, "tests", "lib", "lib_check.c")]
                  + libs, what="cc (lib_check)")
        needed = self._run(["readelf", "-d", self.shared])
        if "libremora.so.0" not in needed:
            raise Fail("the shared example does not need libremora.so.0: %s" % tail(needed))
        if "libremora" in self._run(["readelf", "-d", self.static]):
            raise Fail("the static example still needs a shared libremora")
        self.env_shared = {"LD_LIBRARY_PATH": os.path.join(self.root, "lib")}

    def run(self, remora, binary, args):
        """(rc, out, err) of the example: a signal or a sanitizer report fails."""
        saved = dict(os.environ)
        try:
            if binary in (self.shared, self.check, self.sample):
                os.environ.update(self.env_shared)
            return remora.run(args, binary=binary)
        finally:
            os.environ.clear()
            os.environ.update(saved)


def parse_example(out):
    """dump_threads' text as dump --json's document: {pid, python, threads: [...]}."""
    lines = out.splitlines()
    m = HEADER.match(lines[0]) if lines else None
    if m is None:
        raise Fail("the example's first line is not its header: %r" % (lines[:1],))
    doc = {"pid": int(m.group(1)), "python": m.group(2), "threads": []}
    for line in lines[1:]:
        t = THREAD.match(line)
        f = FRAME.match(line)
        if t:
            doc["threads"].append({"native_id": int(t.group(1)), "main": bool(t.group(3)),
                                   "frames": []})
        elif f and doc["threads"]:
            doc["threads"][-1]["frames"].append({"function": f.group(3), "file": f.group(1),
                                                 "line": int(f.group(2))})
        else:
            raise Fail("the example printed an unexpected line: %r" % line)
    if len(doc["threads"]) != int(m.group(3)):
        raise Fail("the header says %s threads, %d printed" % (m.group(3), len(doc["threads"])))
    return doc


def test_c_example(remora, interp):
    built = Installed.get(remora)
    with Target(interp, os.path.join(TARGETS, "known_stacks.py"), "truth.json") as t:
        truth = t.wait_ready()
        t.wait_main_in_read()
        problems = []
        for binary, kind in ((built.shared, "shared"), (built.static, "static")):
            rc, out, err = built.run(remora, binary, [t.pid])
            if rc != 0:
                problems.append("%s example: exit %d: %s" % (kind, rc, tail(err)))
                continue
            doc = parse_example(out)
            p, got, _ = dump_threads_problems(doc, truth, t.pid)
            more, diff = dump_frames_problems(got, truth)
            problems += ["%s example: %s" % (kind, x) for x in p + more + (diff or [])[:8]]
        if problems:
            raise Fail("; ".join(problems))
        return "the shared and the static example printed %d threads as the target knows them" \
            % len(truth["threads"])


def parse_check(out):
    """lib_check's output: (dump --json's document, {task id: task}); each frame with its
    instruction's name ("op", or None)."""
    lines = out.splitlines()
    m = HEADER.match(lines[0]) if lines else None
    if m is None:
        raise Fail("lib_check's first line is not its header: %r" % (lines[:1],))
    doc = {"pid": int(m.group(1)), "python": m.group(2), "threads": []}
    tasks, at = {}, None
    for line in lines[1:]:
        t, f, k = CHECK_THREAD.match(line), CHECK_FRAME.match(line), CHECK_TASK.match(line)
        if t:
            at = {"native_id": int(t.group(1)), "main": bool(t.group(2)), "frames": []}
            doc["threads"].append(at)
        elif k:
            at = {"id": int(k.group(1), 16), "name": k.group(2), "frames": [],
                  "awaited_by": sorted(int(x, 16) for x in k.group(3).split())}
            tasks[at["id"]] = at
        elif f and at is not None:
            at["frames"].append({"function": f.group(3), "file": f.group(1),
                                 "line": int(f.group(2)), "op": f.group(4)})
        else:
            raise Fail("lib_check printed an unexpected line: %r" % line)
    return doc, tasks


def judge_check(doc, truth, pid, main_only=False):
    """Problems of lib_check's threads against a known_stacks.py truth."""
    if main_only:
        truth = dict(truth, threads=[th for th in truth["threads"] if th["main"]])
    problems, got, _ = dump_threads_problems(doc, truth, pid)
    more, diff = dump_frames_problems(got, truth)
    return problems + more + (diff or [])[:8]


def test_c_core(remora, interp):
    built = Installed.get(remora)
    with Target(interp, os.path.join(TARGETS, "known_stacks.py"), "truth.json") as t:
        truth = t.wait_ready()
        t.wait_main_in_read()
        core = gcore(t)
        rc, out, err = built.run(remora, built.check, ["--core", core])
    if rc != 0:
        raise Fail("lib_check --core: exit %d: %s" % (rc, tail(err)))
    doc, _ = parse_check(out)
    problems = judge_check(doc, truth, t.pid)
    if problems:
        raise Fail("; ".join(problems))
    return "remora_open_core: %d threads exact, read twice" % len(truth["threads"])


def test_c_flags(remora, interp):
    built = Installed.get(remora)
    with Target(interp, os.path.join(TARGETS, "known_stacks.py"), "truth.json") as t:
        truth = t.wait_ready()
        t.wait_main_in_read()
        problems = []
        rc, out, err = built.run(remora, built.check, ["--flags", "0x1", t.pid])
        if rc != 0:
            raise Fail("REMORA_MAIN_THREAD: exit %d: %s" % (rc, tail(err)))
        doc, _ = parse_check(out)
        problems += ["REMORA_MAIN_THREAD: " + x for x in judge_check(doc, truth, t.pid, True)]
        rc, out, err = built.run(remora, built.check, ["--flags", "0x100", t.pid])
        if rc != 0:
            raise Fail("REMORA_OPCODES: exit %d: %s" % (rc, tail(err)))
        doc, _ = parse_check(out)
        problems += ["REMORA_OPCODES: " + x for x in judge_check(doc, truth, t.pid)]
        lacking = [th["native_id"] for th in doc["threads"]
                   if th["frames"] and th["frames"][0]["op"] is None]
        if lacking:
            problems.append("REMORA_OPCODES: no instruction in the innermost frame of %s" % lacking)
    if problems:
        raise Fail("; ".join(problems))
    return "the main thread alone; every thread's instruction, frames exact"


def test_c_tasks(remora, interp):
    built = Installed.get(remora)
    with Target(interp, os.path.join(TARGETS, "async_tasks.py"), "truth.json") as t:
        truth = t.wait_ready()
        rc, out, err = built.run(remora, built.check, ["--tasks", t.pid])
    if rc != 0:
        raise Fail("lib_check --tasks: exit %d: %s" % (rc, tail(err)))
    _, tasks = parse_check(out)
    problems = []
    for w in truth["tasks"]:
        g = tasks.get(w["id"])
        if g is None:
            problems.append("task %s (%#x) missing" % (w["name"], w["id"]))
        elif g["name"] != w["name"] or g["awaited_by"] != sorted(w["awaited_by"]):
            problems.append("task %s: %r awaited by %s, the target recorded %s" % (
                w["name"], g["name"], g["awaited_by"], sorted(w["awaited_by"])))
        elif w["frames"] is not None and [
                {k: f[k] for k in ("function", "file", "line")} for f in g["frames"]] != w["frames"]:
            problems.append("task %s: frames differ from the target's" % w["name"])
    if problems:
        raise Fail("; ".join(problems[:6]))
    return "%d tasks as asyncio.all_tasks() has them" % len(truth["tasks"])


def test_c_errors(remora):
    built = Installed.get(remora)
    pid = free_pid()
    saved = dict(os.environ)
    os.environ.update(built.env_shared)
    try:
        err = expect_failure(remora, [pid], 2, "the example on a free pid", binary=built.shared)
        if "no process with pid %d" % pid not in err:
            raise Fail("the example on a free pid said %r" % err.strip())
        sleeper = subprocess.Popen(["sleep", "60"])
        try:
            err = expect_failure(remora, [sleeper.pid], 4, "the example on sleep(1)",
                                 binary=built.shared)
            if "not a CPython process" not in err:
                raise Fail("the example on sleep(1) said %r" % err.strip())
        finally:
            sleeper.kill()
            sleeper.wait()
        err = expect_failure(remora, ["--core", "/nonexistent/core"], 2,
                             "lib_check on a missing core", binary=built.check)
        if "no such file" not in err:
            raise Fail("lib_check on a missing core said %r" % err.strip())
        err = expect_failure(remora, ["--flags", "0x100000", "1"], 1,
                             "lib_check with unknown flags", binary=built.check)
        if "unknown flags" not in err:
            raise Fail("lib_check with unknown flags said %r" % err.strip())
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return "exit 2 and 4, one line each; a missing core 2, unknown flags 1"


# --- REMORA_NATIVE and REMORA_RUNNING_TASK from C ---------------------------------------

NATIVE_C_TARGETS = ("pyenv-3.9.18", "pyenv-3.12.1", "pyenv-3.13.0")   # unstripped: the
                                       # static functions of the sort and reduce named
TASK_C_TARGETS = ("pyenv-3.9.18", "pyenv-3.12.1", "sid-3.15")


class LibFlags:
    """tests/lib/lib_flags.c built against the installed library (Installed), once."""
    made = None

    @classmethod
    def get(cls, remora):
        built = Installed.get(remora)
        if cls.made is None:
            path = os.path.join(built.dest, "lib_flags")
            cc = ["cc", "-std=c11", "-Wall", "-Wextra", "-Werror"] + \
                (ASAN_FLAGS.split() if sanitized(remora.path) else ["-O2"])
            p = subprocess.run(cc + ["-I" + os.path.join(built.root, "include"), "-o", path,
                                     os.path.join(REPO, "tests", "lib", "lib_flags.c"),
                                     "-L" + os.path.join(built.root, "lib"), "-lremora"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            cls.made = path if p.returncode == 0 else Fail("cc lib_flags.c: %s" % tail(p.stdout))
        if isinstance(cls.made, Exception):
            raise cls.made
        return built, cls.made


def lib_flags(remora, flags, pid):
    """lib_flags' reading: {native id: (task id, [(kind, function, file, line)])}."""
    built, path = LibFlags.get(remora)
    saved = dict(os.environ)
    os.environ.update(built.env_shared)         # the installed libremora.so.0
    try:
        rc, out, err = remora.run([hex(flags), pid], binary=path)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    if rc != 0:
        raise Fail("lib_flags %#x: exit %d: %s" % (flags, rc, tail(err)))
    threads, at = {}, None
    for line in out.splitlines():
        m = re.match(r"^thread (\d+) task (0x[0-9a-f]+|0)$", line)
        if m:
            at = threads[int(m.group(1))] = (int(m.group(2), 16), [])
        elif line.startswith("    ") and at is not None:
            kind, func, file, ln = line[4:].split("\t")
            at[1].append((kind, func, file, int(ln)))
        else:
            raise Fail("lib_flags printed an unexpected line: %r" % line)
    return threads


def test_c_native(remora, interp):
    REMORA_NATIVE = 0x0200
    with Target(interp, os.path.join(TARGETS, "native_marks.py"), "truth.json") as t:
        truth = t.wait_ready()
        threads = lib_flags(remora, REMORA_NATIVE, t.pid)
    frames = threads.get(truth["native_id"], (0, []))[1]
    python = [[f, fl, ln] for kind, f, fl, ln in frames if kind == "python"]
    want = [[f["function"], f["file"], f["line"]] for f in truth["frames"]]
    problems = []
    if python != want:
        problems.append("the Python frames %s, the target's %s"
                        % ([p[0] for p in python], [w[0] for w in want]))
    names = [f for _, f, _, _ in frames]
    pos = {n: names.index(n) for n in ("leaf", "step", "worker") if n in names}
    if len(pos) == 3:
        between = lambda a, b: [f for kind, f, _, _ in frames[pos[a] + 1:pos[b]]
                                if kind == "native"]
        sort_c, reduce_c = between("leaf", "step"), between("step", "worker")
        if not any("sort" in f for f in sort_c):
            problems.append("no C frame of the sort between leaf and step: %s" % sort_c[:8])
        if not any("reduce" in f for f in reduce_c):
            problems.append("no C frame of reduce between step and worker: %s" % reduce_c[:8])
    if not frames or frames[0][0] != "native":
        problems.append("the innermost frame is not C (the lock's wait): %s" % frames[:1])
    if problems:
        raise Fail("; ".join(problems))
    return "%d frames, %d of them C: the lock's wait innermost, the sort's C frames " \
           "between leaf and step, reduce's between step and worker" % (
               len(frames), sum(1 for f in frames if f[0] == "native"))


def test_c_running_task(remora, interp):
    REMORA_RUNNING_TASK = 0x0400
    with Target(interp, os.path.join(TARGETS, "async_tasks.py"), "truth.json") as t:
        truth = t.wait_ready()
        threads = lib_flags(remora, REMORA_RUNNING_TASK, t.pid)
        without = lib_flags(remora, 0, t.pid)
    running = next(w for w in truth["tasks"] if w["state"] == "running")
    task = threads.get(truth["native_id"], (None, []))[0]
    problems = []
    if task != running["id"]:
        problems.append("the loop's thread has task_id %#x, the running task is %#x (%s)"
                        % (task or 0, running["id"], running["name"]))
    others = {tid: tk for tid, (tk, _) in threads.items() if tid != truth["native_id"] and tk}
    if others:
        problems.append("task ids on threads running no task: %s" % others)
    if any(tk for tk, _ in without.values()):
        problems.append("task ids without REMORA_RUNNING_TASK")
    if problems:
        raise Fail("; ".join(problems))
    return "task_id %#x, id() of the target's running task, on its loop's thread alone" \
        % running["id"]


# --- the Python module -------------------------------------------------------------------

PY_TARGETS = ("pyenv-3.9.18", "pyenv-3.12.1", "sid-3.15")
# run by the host interpreter: the target's threads as dump --json's document, plus what
# the types say
PY_DRIVER = r"""
import json, sys
import remora
pid = int(sys.argv[1])
u = remora.RemoteUnwinder(pid, all_threads=True)
for _ in range(64):
    try:
        trace = u.get_stack_trace()
        break
    except RuntimeError:
        continue
problems = []
threads = []
for interp in trace:
    if type(interp) is not remora.InterpreterInfo or interp._fields != ("interpreter_id", "threads"):
        problems.append("not an InterpreterInfo: %r" % (interp,))
    for th in interp.threads:
        if type(th) is not remora.ThreadInfo or len(th) != 3:
            problems.append("not a ThreadInfo: %r" % (th,))
        frames = []
        for f in th.frame_info:
            if type(f) is not remora.FrameInfo or len(f) != 4 or f.opcode is not None:
                problems.append("not a FrameInfo without opcode: %r" % (f,))
            loc = f.location
            if type(loc) is not remora.LocationInfo or loc.end_lineno < loc.lineno:
                problems.append("not a LocationInfo: %r" % (loc,))
            cols = (loc.col_offset, loc.end_col_offset)
            if (sys.argv[2] == "columns") != all(isinstance(c, int) and c >= 0 for c in cols):
                problems.append("columns %r where the version %s them" % (
                    cols, "has" if sys.argv[2] == "columns" else "lacks"))
            frames.append({"function": f.funcname, "file": f.filename, "line": loc.lineno})
        threads.append({"native_id": th.thread_id, "frames": frames,
                        "main": bool(th.status & remora.THREAD_STATUS_MAIN_THREAD)})
dumped = {t.thread_id: [(f.funcname, f.filename, f.location.lineno) for f in t.frames]
          for t in remora.dump(pid)}
for t in threads:
    if dumped.get(t["native_id"]) != [(f["function"], f["file"], f["line"]) for f in t["frames"]]:
        problems.append("remora.dump differs in thread %d" % t["native_id"])
print(json.dumps({"pid": pid, "python": sys.argv[3], "threads": threads,
                  "problems": problems[:5]}))
"""


class PyModule:
    """`make python`'s module, built once a run; its directory and the environment a host
    interpreter imports it with."""
    made = None

    @classmethod
    def get(cls, remora):
        if cls.made is None:
            try:
                cls.made = cls(remora)
            except Fail as e:
                cls.made = e
        if isinstance(cls.made, Exception):
            raise cls.made
        return cls.made

    def __init__(self, remora):
        asan = sanitized(remora.path)
        lib_build = "build-asan-lib" if asan else "build-lib"
        lib = ["LIB_BUILD=" + lib_build, "LIB_CFLAGS=" + ASAN_FLAGS,
               "LDFLAGS=" + ASAN_FLAGS] if asan else []
        p = subprocess.run(["make", "-s", "-C", REPO] + lib + ["python"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=BUILD_TIMEOUT,
                           env=make_env())
        if p.returncode != 0:
            raise Fail("make python: exit %d: %s" % (p.returncode, tail(p.stdout, 6)))
        self.path = os.path.join(REPO, lib_build, "python")
        self.env = {"PYTHONPATH": self.path}
        if asan:
            # the sanitizer's runtime first in a host interpreter built without it; the
            # interpreter's own allocations are not this test's (no leak report)
            rt = subprocess.run(["cc", "-print-file-name=libasan.so"], stdout=subprocess.PIPE,
                                text=True).stdout.strip()
            self.env.update(LD_PRELOAD=rt, ASAN_OPTIONS="detect_leaks=0")

    def run(self, host, args, timeout=60):
        name, python, root = host
        env = dict(os.environ, **self.env)
        p = subprocess.run([python] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, env=env, timeout=timeout)
        for mark in SANITIZER_MARKS:
            if mark in p.stderr:
                raise Fail("%s: sanitizer report: %s" % (name, tail(p.stderr, 8)))
        return p


PY_TASKS = r"""
import json, sys
import remora
u = remora.RemoteUnwinder(int(sys.argv[1]))
for _ in range(64):
    try:
        every = u.get_all_awaited_by()
        running = u.get_async_stack_trace()
        break
    except RuntimeError:
        continue
tasks = {}
for entry in every:
    for t in entry.awaited_by:
        tasks[t.task_id] = {"thread": entry.thread_id, "name": t.task_name,
                            "frames": [[f.funcname, f.filename, f.location.lineno]
                                       for c in t.coroutine_stack for f in c.call_stack],
                            "awaited_by": sorted(c.task_name for c in t.awaited_by)}
print(json.dumps({"tasks": tasks,
                  "running": [[a.thread_id, a.awaited_by[0].task_name] for a in running]}))
"""


def test_python_tasks(remora, target):
    mod = PyModule.get(remora)
    host = next(i for i in INTERPRETERS if i[0] == "debian-3.11-static")
    with Target(target, os.path.join(TARGETS, "async_tasks.py"), "truth.json") as t:
        truth = t.wait_ready()
        p = mod.run(host, ["-c", PY_TASKS, str(t.pid)])
    if p.returncode != 0:
        raise Fail("exit %d: %s" % (p.returncode, tail(p.stderr, 6)))
    doc = json.loads(p.stdout)
    got = {int(k): v for k, v in doc["tasks"].items()}
    problems = []
    for w in truth["tasks"]:
        g = got.get(w["id"])
        if g is None:
            problems.append("task %s (%#x) missing" % (w["name"], w["id"]))
            continue
        if g["name"] != w["name"] or g["thread"] != truth["native_id"]:
            problems.append("task %s: name %r, thread %s (its loop's: %d)"
                            % (w["name"], g["name"], g["thread"], truth["native_id"]))
        if g["awaited_by"] != sorted(w["awaited_by"]):
            problems.append("task %s: awaited_by %s, the target recorded %s"
                            % (w["name"], g["awaited_by"], sorted(w["awaited_by"])))
        want = [[f["function"], f["file"], f["line"]] for f in w["frames"]] \
            if w["frames"] is not None else None
        if want is not None and g["frames"] != want:
            problems.append("task %s: frames %s, the target's %s" % (w["name"], g["frames"], want))
    main = next(w for w in truth["tasks"] if w["state"] == "running")
    if doc["running"] != [[truth["native_id"], main["name"]]]:
        problems.append("get_async_stack_trace: %s, want the running task %s under thread %d"
                        % (doc["running"], main["name"], truth["native_id"]))
    if problems:
        raise Fail("; ".join(problems[:6]))
    return "%d tasks as asyncio.all_tasks() has them, the running one under its thread" \
        % len(truth["tasks"])


def test_pip(remora):
    host = next(i for i in INTERPRETERS if i[0] == "debian-3.11-static")
    python = "/usr/bin/python3"
    probe = subprocess.run([python, "-c", "import setuptools, pip, venv"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if probe.returncode != 0:
        raise Skip("Debian's python3 lacks pip, setuptools or venv (apt-get install "
                   "python3-pip python3-setuptools python3-venv)")
    if sanitized(remora.path):
        raise Skip("pip builds the normal library; the ASan build's module is "
                   "library/python/*'s")
    work = tempfile.mkdtemp(prefix="remora-pip-")
    try:
        venv = os.path.join(work, "venv")
        p = subprocess.run([python, "-m", "venv", "--system-site-packages", venv],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if p.returncode != 0:
            raise Fail("python3 -m venv: %s" % tail(p.stdout))
        vpy = os.path.join(venv, "bin", "python")
        p = subprocess.run([vpy, "-m", "pip", "install", "--no-build-isolation", "--no-index",
                            "-q", REPO], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=BUILD_TIMEOUT, cwd=work, env=make_env())
        if p.returncode != 0:
            raise Fail("pip install: exit %d: %s" % (p.returncode, tail(p.stdout, 8)))
        with Target(host, os.path.join(TARGETS, "known_stacks.py"), "truth.json") as t:
            truth = t.wait_ready()
            t.wait_main_in_read()
            p = subprocess.run([vpy, "-c", PY_DRIVER, str(t.pid), "columns", truth["python"]],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               timeout=60, cwd=work)
        if p.returncode != 0:
            raise Fail("the installed module: exit %d: %s" % (p.returncode, tail(p.stderr, 6)))
        doc = json.loads(p.stdout)
        problems, got, _ = dump_threads_problems(doc, truth, t.pid)
        more, diff = dump_frames_problems(got, truth)
        problems += doc["problems"] + more + (diff or [])[:8]
        found = subprocess.run([vpy, "-c", "import remora._remora as m; print(m.__file__)"],
                               stdout=subprocess.PIPE, text=True, cwd=work).stdout.strip()
        if not found.startswith(venv) or not found.endswith(".abi3.so"):
            problems.append("the module imported is %r, not the venv's .abi3.so" % found)
        if problems:
            raise Fail("; ".join(problems))
        return "installed %s; it read %d threads exactly" % (os.path.basename(found),
                                                             len(truth["threads"]))
    finally:
        shutil.rmtree(work, ignore_errors=True)


PY_SAMPLE = r"""
import json, os, subprocess, sys
import remora
pid = int(sys.argv[1])
samples = []
for t, threads in remora.sample(pid, rate=50, duration=0.5):
    samples.append({str(th.thread_id): [[f.funcname, f.filename, f.location.lineno]
                                        for f in th.frames] for th in threads})
s = subprocess.Popen(["sleep", "60"])
try:
    kids = (remora.get_child_pids(os.getpid()), remora.get_child_pids(os.getpid(), recursive=False))
finally:
    s.kill()
print(json.dumps({"samples": samples, "sleep": s.pid, "kids": kids}))
"""


def test_python_sample(remora):
    mod = PyModule.get(remora)
    host = next(i for i in INTERPRETERS if i[0] == "debian-3.11-static")
    target = next(i for i in INTERPRETERS if i[0] == "pyenv-3.12.1")
    with Target(target, os.path.join(TARGETS, "known_stacks.py"), "truth.json") as t:
        truth = t.wait_ready()
        t.wait_main_in_read()
        p = mod.run(host, ["-c", PY_SAMPLE, str(t.pid)])
    if p.returncode != 0:
        raise Fail("exit %d: %s" % (p.returncode, tail(p.stderr, 6)))
    doc = json.loads(p.stdout)
    want = {str(th["native_id"]): [[f["function"], f["file"], f["line"]] for f in th["frames"]]
            for th in truth["threads"]}
    problems = []
    if len(doc["samples"]) < 5:
        problems.append("%d samples in 0.5 s at 50 Hz" % len(doc["samples"]))
    bad = [i for i, smp in enumerate(doc["samples"]) if smp != want]
    if bad:
        problems.append("samples %s differ from the target's truth" % bad[:5])
    for kids, what in zip(doc["kids"], ("recursive", "children only")):
        if doc["sleep"] not in kids:
            problems.append("get_child_pids (%s) lacks the sleep(1) started: %s" % (what, kids))
    if problems:
        raise Fail("; ".join(problems))
    return "%d samples, each every thread exact; get_child_pids found the child" \
        % len(doc["samples"])


PY_ERRORS = r"""
import subprocess, sys
import remora
free = int(sys.argv[1])
out = []
try:
    remora.RemoteUnwinder(free)
    out.append("no error for a free pid")
except ProcessLookupError:
    pass
s = subprocess.Popen(["sleep", "60"])
try:
    try:
        remora.RemoteUnwinder(s.pid)
        out.append("no error for sleep(1)")
    except RuntimeError as e:
        if "not a CPython process" not in str(e):
            out.append("sleep(1): %s" % e)
    if remora.is_python_process(s.pid) or remora.is_python_process(free):
        out.append("is_python_process true of sleep(1) or a free pid")
finally:
    s.kill()
if not remora.is_python_process(int(sys.argv[2])):
    out.append("is_python_process false of a Python")
try:
    remora.RemoteUnwinder(int(sys.argv[2]), all_threads=True, only_active_thread=True)
    out.append("no ValueError for all_threads with only_active_thread")
except ValueError:
    pass
try:
    remora.RemoteUnwinder(int(sys.argv[2])).get_stats()
    out.append("get_stats() without stats=True answered")
except RuntimeError:
    pass
print("; ".join(out))
"""


def test_python_errors(remora):
    mod = PyModule.get(remora)
    host = next(i for i in INTERPRETERS if i[0] == "debian-3.11-static")
    with Target(host, os.path.join(TARGETS, "known_stacks.py"), "truth.json") as t:
        t.wait_ready()
        p = mod.run(host, ["-c", PY_ERRORS, str(free_pid()), str(t.pid)])
    if p.returncode != 0 or p.stdout.strip():
        raise Fail("exit %d: %s %s" % (p.returncode, p.stdout.strip(), tail(p.stderr, 6)))
    return "ProcessLookupError, RuntimeError, ValueError as _remote_debugging raises them"


# --- sampling (remora_sample) ------------------------------------------------------------

SAMPLE_DEPTH = 12
SAMPLE_LINE = re.compile(r"^sample (\d+) thread (\d+)( \(main\))?( \(kernel\))?( \(partial\))?$")
SAMPLE_INTERPS = ("pyenv-3.12.1", "sid-3.15")


def busy_truth():
    """busy.py's own stack of its spinning thread, innermost first, as (function, line
    or a set of lines) for the frames in busy.py: spin (in its loop), recurse at its call
    of spin, then recurse at its own call SAMPLE_DEPTH - 1 times. Taken from the file."""
    with open(os.path.join(TARGETS, "busy.py")) as f:
        src = f.read().splitlines()
    spin_at = next(i for i, l in enumerate(src, 1) if l.startswith("def spin("))
    loop = {i for i, l in enumerate(src, 1) if i > spin_at and i < spin_at + 9 and
            l.startswith("    ") and "started.wait()" not in l and "n = 0" != l.strip()}
    call_spin = next(i for i, l in enumerate(src, 1) if l.strip() == "spin(i)")
    call_rec = next(i for i, l in enumerate(src, 1) if l.strip() == "recurse(d - 1, i)")
    return [("spin", loop), ("recurse", {call_spin})] + \
        [("recurse", {call_rec})] * (SAMPLE_DEPTH - 1)


def sample_problem(frames, partial, truth):
    """What is wrong with a sample of the spinning thread (frames innermost first, each
    (function, file, line)), or None: its busy.py frames are the truth's (a partial one's
    the truth's outer ones), under threading's bootstrap."""
    ours = [f for f in frames if os.path.basename(f[1]) == "busy.py"]
    rest = [f[0] for f in frames if os.path.basename(f[1]) != "busy.py"]
    want = truth[len(truth) - len(ours):] if partial else truth
    if len(ours) != len(want):
        return "%d frames in busy.py, %d in its truth: %s" % (len(ours), len(want), ours[:3])
    for (fn, _file, line), (wfn, lines) in zip(ours, want):
        if fn != wfn or line not in lines:
            return "%s:%d where the target is in %s at %s" % (fn, line, wfn, sorted(lines))
    if not rest or not rest[-1].endswith("_bootstrap") or frames[-1][0] != rest[-1]:
        return "the outer frames are not threading's: %s" % rest
    return None


def parse_samples(out):
    """sample_loop's output: ([(thread, kernel, partial, [(function, file, line)])],
    engine line, counts line)."""
    samples, engine, counts = [], None, None
    for line in out.splitlines():
        m = SAMPLE_LINE.match(line)
        f = FRAME.match(line)
        if m:
            samples.append((int(m.group(2)), bool(m.group(4)), bool(m.group(5)), []))
        elif f and samples:
            samples[-1][3].append((f.group(3), f.group(1), int(f.group(2))))
        elif line.startswith("engine "):
            engine = line
        elif line.startswith("rounds "):
            counts = dict(zip(line.split()[::2], map(int, line.split()[1::2])))
        else:
            raise Fail("sample_loop printed an unexpected line: %r" % line)
    if engine is None or counts is None:
        raise Fail("sample_loop printed no engine or counts line: %s" % tail(out))
    return samples, engine, counts


def test_c_sample(remora, interp, engine):
    built = Installed.get(remora)
    truth = busy_truth()
    with Target(interp, os.path.join(TARGETS, "busy.py"), "ready", [SAMPLE_DEPTH, 1, 60]) as t:
        t.wait_ready()
        wait_asleep(t.pid)          # the main thread past its ready file, in its sleep
        rc, out, err = built.run(remora, built.sample, [t.pid, 200, 0.5, engine])
    if engine == "kernel" and rc == 3:
        raise Skip("the kernel engine cannot be loaded here: %s" % tail(err))
    if rc != 0:
        raise Fail("sample_loop: exit %d: %s" % (rc, tail(err)))
    samples, line, counts = parse_samples(out)
    problems = []
    want = "engine kernel" if engine == "kernel" else \
        "engine user: the user-space engine was asked for"
    if line != want:
        problems.append("%r, not %r" % (line, want))
    if engine == "kernel" and not any(k for _, k, _, _ in samples):
        problems.append("no sample says the kernel read it")
    if engine == "user" and any(k for _, k, _, _ in samples):
        problems.append("a sample says the kernel read it with the user engine")
    if counts["samples"] != len(samples) or len(samples) < 50:
        problems.append("%d samples printed, %d counted, in 0.5 s at 200 Hz"
                        % (len(samples), counts["samples"]))
    if any(tid == t.pid for tid, _, _, _ in samples):
        problems.append("the main thread (asleep: idle) was sampled")
    bad = [(i, p) for i, (_, _, partial, frames) in enumerate(samples)
           for p in [sample_problem(frames, partial, truth)] if p]
    if bad:
        problems.append("%d of %d samples differ from the target's stack, e.g. sample %d: %s"
                        % (len(bad), len(samples), bad[0][0], bad[0][1]))
    whole = sum(1 for _, _, partial, _ in samples if not partial)
    if whole < 0.5 * len(samples):
        problems.append("only %d of %d samples whole" % (whole, len(samples)))
    if problems:
        raise Fail("; ".join(problems))
    return "%d samples (%d whole, %d by the kernel), each the target's own stack; %s" % (
        len(samples), whole, sum(1 for _, k, _, _ in samples if k), line)


def test_c_sample_gil(remora):
    built = Installed.get(remora)
    interp = next(i for i in INTERPRETERS if i[0] == "pyenv-3.12.1")
    with Target(interp, os.path.join(TARGETS, "busy.py"), "ready", [SAMPLE_DEPTH, 1, 60]) as t:
        t.wait_ready()
        wait_asleep(t.pid)          # the main thread past its ready file, in its sleep
        rc, out, err = built.run(remora, built.sample, [t.pid, 100, 0.3, "kernel", "gil"])
    if rc == 3:
        raise Skip("the kernel engine cannot be loaded here: %s" % tail(err))
    if rc != 0:
        raise Fail("kernel with gil mode: exit %d, %s" % (rc, tail(err)))
    samples, line, _ = parse_samples(out)
    problems = []
    if line != "engine kernel":
        problems.append("%r, not 'engine kernel'" % line)
    if not any(k for _, k, _, _ in samples):
        problems.append("no sample of %d says the kernel read it" % len(samples))
    if any(tid == t.pid for tid, _, _, _ in samples):
        problems.append("the main thread (asleep, no GIL) was sampled")
    if problems:
        raise Fail("; ".join(problems))
    return "gil mode on the kernel engine: %d samples, %d read at the tick; %s" % (
        len(samples), sum(1 for _, k, _, _ in samples if k), line)


PY_SAMPLE_KERNEL = r"""
import json, sys
import remora
pid = int(sys.argv[1])
rounds = []
for t, threads in remora.sample(pid, rate=200, duration=0.5, engine=sys.argv[2],
                                active_only=True):
    rounds.append([[th.thread_id, th.status, [[f.funcname, f.filename, f.location.lineno]
                                              for f in th.frames]] for th in threads])
print(json.dumps({"rounds": rounds, "engine": remora.sample_engine()}))
"""


def test_python_sample_engine(remora, engine):
    mod = PyModule.get(remora)
    host = next(i for i in INTERPRETERS if i[0] == "debian-3.11-static")
    target = next(i for i in INTERPRETERS if i[0] == "pyenv-3.12.1")
    truth = busy_truth()
    with Target(target, os.path.join(TARGETS, "busy.py"), "ready", [SAMPLE_DEPTH, 1, 60]) as t:
        t.wait_ready()
        wait_asleep(t.pid)          # the main thread past its ready file, in its sleep
        p = mod.run(host, ["-c", PY_SAMPLE_KERNEL, str(t.pid), engine])
    if engine == "kernel" and p.returncode != 0 and "PermissionError" in p.stderr:
        raise Skip("the kernel engine cannot be loaded here: %s" % tail(p.stderr))
    if p.returncode != 0:
        raise Fail("exit %d: %s" % (p.returncode, tail(p.stderr, 6)))
    doc = json.loads(p.stdout)
    problems = []
    if doc["engine"][0] != engine:
        problems.append("sample_engine() says %s" % doc["engine"])
    threads = [th for r in doc["rounds"] for th in r]
    if len(threads) < 50:
        problems.append("%d samples in 0.5 s at 200 Hz" % len(threads))
    others = [th[0] for th in threads if th[0] == t.pid]
    if others:
        problems.append("the sleeping main thread sampled with active_only")
    stacks = [[tuple(f) for f in th[2]] for th in threads if th[0] != t.pid]
    bad = [x for x in (sample_problem(f, False, truth) for f in stacks) if x]
    # a user-space reading of a running thread may be partial: its outer frames alone
    torn = [x for x in (sample_problem(f, True, truth) for f in stacks) if x]
    if torn or len(bad) > (0 if engine == "kernel" else 0.5 * len(stacks)):
        problems.append("%d of %d samples differ from the target's stack: %s"
                        % (len(bad), len(stacks), (torn or bad)[0]))
    if problems:
        raise Fail("; ".join(problems))
    return "%d samples in %d rounds, engine %s; %d not whole" % (
        len(threads), len(doc["rounds"]), doc["engine"][0], len(bad))


# --- every host interpreter against every build, in one run each ------------------------

# the hosts of library/hosts/*: (name in INTERPRETERS); the chroot's run through
# CHROOT_RUN with the module copied into the chroot's /tmp
HOSTS = ("pyenv-3.9.18", "pyenv-3.10.13", "pyenv-3.11.7", "pyenv-3.12.1", "pyenv-3.13.0",
         "debian-3.11-static", "sid-3.13", "sid-3.14", "sid-3.15")
HOST_READS = 50       # reads per status check: a bit the target's state guarantees must
                      # show in at least one, a bit it rules out in none
# run by each host interpreter: argv[1] a JSON file [[name, pid, truth], ...]; prints
# {name: [problems]} as JSON on its last line
HOST_DRIVER = r"""
import json, sys
import remora
from remora import (THREAD_STATUS_HAS_GIL as GIL, THREAD_STATUS_ON_CPU as CPU,
                    THREAD_STATUS_HAS_EXCEPTION as EXC, THREAD_STATUS_MAIN_THREAD as MAIN)
READS = int(sys.argv[2])

def stable(call):
    for _ in range(64):
        try:
            return call()
        except RuntimeError as e:
            last = e
    raise last

def statuses(pid, mode):
    # [{tid: status}] of READS reads of every thread, none skipped
    u = remora.RemoteUnwinder(pid, all_threads=True, mode=mode,
                              skip_non_matching_threads=False)
    return [{t.thread_id: t.status for i in stable(u.get_stack_trace) for t in i.threads}
            for _ in range(READS)]

def judge(pid, truth):
    minor = int(truth["python"].split(".")[1])
    out = []
    roles = truth["roles"]
    u = remora.RemoteUnwinder(pid, all_threads=True)
    trace = stable(u.get_stack_trace)
    got = {}
    for interp in trace:
        if type(interp) is not remora.InterpreterInfo:
            out.append("not an InterpreterInfo: %r" % (interp,))
        for th in interp.threads:
            if type(th) is not remora.ThreadInfo or len(th) != 3:
                out.append("not a ThreadInfo: %r" % (th,))
            got[th.thread_id] = th
            for f in th.frame_info:
                loc = f.location
                cols = (loc.col_offset, loc.end_col_offset)
                if (minor >= 11) != all(isinstance(c, int) and c >= 0 for c in cols):
                    out.append("columns %r on 3.%d" % (cols, minor))
                    break
    for want in truth["threads"]:
        th = got.get(want["native_id"])
        if th is None:
            out.append("thread %d missing" % want["native_id"])
            continue
        frames = [[f.funcname, f.filename, f.location.lineno] for f in th.frame_info]
        wanted = [[f["function"], f["file"], f["line"]] for f in want["frames"]]
        if frames != wanted:
            out.append("thread %d: frames %s, the target's own %s"
                       % (want["native_id"], frames[:4], wanted[:4]))
        if bool(th.status & MAIN) != want["main"]:
            out.append("thread %d: MAIN_THREAD %s, the target says %s"
                       % (want["native_id"], bool(th.status & MAIN), want["main"]))
    if roles["busy"] not in got:
        out.append("the busy thread %d missing" % roles["busy"])
    # (bit, mode, the role whose state guarantees it, the roles whose state rules it out)
    for bit, name, mode, yes, no in (
            (GIL, "HAS_GIL", remora.PROFILING_MODE_GIL, "busy", ("parked", "main", "except")),
            (GIL, "HAS_GIL", remora.PROFILING_MODE_CPU, "busy", ("parked", "main", "except")),
            (CPU, "ON_CPU", remora.PROFILING_MODE_CPU, "busy", ("parked", "main", "except")),
            (EXC, "HAS_EXCEPTION", remora.PROFILING_MODE_EXCEPTION, "except",
             ("parked", "main")),
            (EXC, "HAS_EXCEPTION", remora.PROFILING_MODE_ALL, "except", ("parked", "main"))):
        reads = statuses(pid, mode)
        if not any(r.get(roles[yes], 0) & bit for r in reads):
            out.append("mode %d: %s never set on the %s thread in %d reads"
                       % (mode, name, yes, len(reads)))
        for role in no:
            n = sum(1 for r in reads if r.get(roles[role], 0) & bit)
            if n:
                out.append("mode %d: %s set on the %s thread in %d of %d reads"
                           % (mode, name, role, n, len(reads)))
    # the threads mode CPU keeps with skip_non_matching_threads: the busy one, not parked
    u = remora.RemoteUnwinder(pid, all_threads=True, mode=remora.PROFILING_MODE_CPU)
    kept = {t.thread_id for i in stable(u.get_stack_trace) for t in i.threads}
    if roles["parked"] in kept:
        out.append("mode CPU kept the parked thread")
    # asyncio: every task of the target's all_tasks() under its loop's thread
    u = remora.RemoteUnwinder(pid)
    every = stable(u.get_all_awaited_by)
    tasks = {t.task_id: (e.thread_id, t) for e in every for t in e.awaited_by}
    names = {t.task_id: t.task_name for _, t in tasks.values()}
    for w in truth["tasks"]:
        if w["id"] not in tasks:
            out.append("task %s (%#x) missing" % (w["name"], w["id"]))
            continue
        thread, t = tasks[w["id"]]
        by = sorted(names.get(c.task_name, c.task_name) for c in t.awaited_by)
        if t.task_name != w["name"] or thread != truth["loop_thread"] or by != sorted(w["awaited_by"]):
            out.append("task %s: %r under thread %d awaited by %s (the target: thread %d, %s)"
                       % (w["name"], t.task_name, thread, by, truth["loop_thread"],
                          sorted(w["awaited_by"])))
    if len(tasks) != len(truth["tasks"]):
        out.append("%d tasks, asyncio.all_tasks() had %d" % (len(tasks), len(truth["tasks"])))
    return out

with open(sys.argv[1]) as f:
    pairs = json.load(f)
res = {}
for name, pid, truth in pairs:
    try:
        res[name] = judge(pid, truth)
    except Exception as e:
        res[name] = ["%s: %s" % (type(e).__name__, e)]
print(json.dumps(res))
"""
CHROOT_RUN = r"""
set -e
mount -t proc proc "$1/proc"
exec chroot "$1" env $5 PYTHONPATH="$2" timeout "$3" "$4" "${@:6}"
"""


class HostTargets:
    """host_truth.py under every build this run has, started once for every host test and
    ended at exit: [(name, pid, truth)]."""
    made = None

    @classmethod
    def get(cls):
        if cls.made is None:
            try:
                cls.made = cls()
            except Fail as e:
                cls.made = e
        if isinstance(cls.made, Exception):
            raise cls.made
        return cls.made.pairs

    def __init__(self):
        self.pairs = []
        for interp in INTERPRETERS:
            if interp_missing(interp):
                continue
            t = Target(interp, os.path.join(TARGETS, "host_truth.py"), "truth.json")
            t.__enter__()
            atexit.register(t.__exit__)
            truth = t.wait_ready()
            t.wait_main_in_read()      # (the others wait in a futex: the target saw them
                                       # on their blocking lines)
            self.pairs.append((interp[0], t.pid, truth))
        if not self.pairs:
            raise Skip("no interpreter of this run to start a target with")


def chroot_module(mod, root):
    """The module (and under ASan the sanitizer runtimes it needs) copied into a fresh
    directory of the chroot root's /tmp: (the directory on the host, its path inside the
    chroot, the `env` words a run inside needs). The caller removes the directory."""
    work = tempfile.mkdtemp(prefix="remora-module-", dir=os.path.join(root, "tmp"))
    visible = work[len(root):]
    env = ""
    os.chmod(work, 0o755)
    shutil.copytree(os.path.join(mod.path, "remora"), os.path.join(work, "remora"))
    if mod.env.get("LD_PRELOAD"):
        # ASan: the host's runtimes beside the module, the address sanitizer's preloaded
        for lib in ("libasan.so", "libubsan.so"):
            real = os.path.realpath(subprocess.run(
                ["cc", "-print-file-name=" + lib], stdout=subprocess.PIPE,
                text=True).stdout.strip())
            shutil.copy(real, os.path.join(work, os.path.basename(real)))
            if lib == "libasan.so":
                env = "LD_PRELOAD=%s/%s" % (visible, os.path.basename(real))
        for name in os.listdir(work):           # the sonames the module asks for
            m = re.match(r"^(lib\w+\.so\.\d+)\.", name)
            if m:
                os.symlink(name, os.path.join(work, m.group(1)))
        env += " LD_LIBRARY_PATH=%s ASAN_OPTIONS=detect_leaks=0" % visible
    return work, visible, env


def test_host(remora, host):
    mod = PyModule.get(remora)
    pairs = HostTargets.get()
    name, python, root = host
    timeout = 60 + 30 * len(pairs)
    if root:
        work, visible, env = chroot_module(mod, root)
        try:
            with open(os.path.join(work, "pairs.json"), "w") as f:
                json.dump(pairs, f)
            p = subprocess.run(["unshare", "-m", "--propagation", "private", "bash", "-c",
                                CHROOT_RUN, "sh", root, visible, str(timeout), python, env,
                                "-c", HOST_DRIVER, visible + "/pairs.json", str(HOST_READS)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               timeout=timeout + 30)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        for mark in SANITIZER_MARKS:
            if mark in p.stderr:
                raise Fail("%s: sanitizer report: %s" % (name, tail(p.stderr, 8)))
    else:
        with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
            json.dump(pairs, f)
            f.flush()
            p = mod.run(host, ["-c", HOST_DRIVER, f.name, str(HOST_READS)], timeout=timeout)
    try:
        res = json.loads(p.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        raise Fail("%s gave no result (exit %d): %s" % (name, p.returncode, tail(p.stderr, 8)))
    bad = ["%s: %s" % (target, "; ".join(problems[:4]))
           for target, problems in sorted(res.items()) if problems]
    if bad:
        raise Fail("%d of %d targets differ from their truth: %s"
                   % (len(bad), len(res), " | ".join(bad)))
    return "%s read %d builds (%s): frames, MAIN/HAS_GIL/ON_CPU/HAS_EXCEPTION and the " \
           "tasks as each target knows them" % (name, len(res), ", ".join(sorted(res)))


# --- THREAD_STATUS_GIL_REQUESTED ---------------------------------------------------------

GIL_TARGETS = ("sid-3.15", "sid-3.15-pie", "sid-3.14", "pyenv-3.12.1", "pyenv-3.9.18")
GIL_READS = 20
# run by the host: every thread's status in GIL_READS reads (mode ALL, nothing skipped)
GIL_DRIVER = r"""
import json, sys
import remora
u = remora.RemoteUnwinder(int(sys.argv[1]), all_threads=True, mode=remora.PROFILING_MODE_ALL,
                          skip_non_matching_threads=False)
print(json.dumps([{t.thread_id: t.status for i in u.get_stack_trace() for t in i.threads}
                  for _ in range(int(sys.argv[2]))]))
"""


# run by the host: each thread's status in the samples of the sampling API (kernel engine
# where it loads, idle threads kept), {tid: [status, ...]} and the engine
GIL_SAMPLE_DRIVER = r"""
import json, sys
import remora
seen = {}
for t, threads in remora.sample(int(sys.argv[1]), rate=200, duration=0.3, active_only=False):
    for th in threads:
        seen.setdefault(th.thread_id, []).append(th.status)
print(json.dumps({"seen": seen, "engine": remora.sample_engine()}))
"""


def test_gil_requested(remora, target):
    mod = PyModule.get(remora)
    host = next(i for i in INTERPRETERS if i[0] == "debian-3.11-static")
    minor = int(re.search(r"3\.(\d+)", target[0]).group(1))
    with Target(target, os.path.join(TARGETS, "gil_wait.py"), "truth.json") as t:
        truth = t.gil_wait_ready()
        roles = truth["roles"]
        p = mod.run(host, ["-c", GIL_DRIVER, str(t.pid), str(GIL_READS)])
    if p.returncode != 0:
        raise Fail("exit %d: %s" % (p.returncode, tail(p.stderr, 6)))
    reads = [{int(k): v for k, v in r.items()} for r in json.loads(p.stdout)]
    HAS_GIL, REQUESTED = 0x01, 0x08
    count = {role: (sum(1 for r in reads if r.get(tid, 0) & HAS_GIL),
                    sum(1 for r in reads if r.get(tid, 0) & REQUESTED))
             for role, tid in roles.items()}
    problems = []
    if count["main"][0] != len(reads):
        problems.append("main (in a C call holding the GIL) HAS_GIL in %d of %d reads"
                        % (count["main"][0], len(reads)))
    for role in ("main", "parked"):
        if count[role][1]:
            problems.append("%s GIL_REQUESTED in %d reads" % (role, count[role][1]))
    if count["waiter"][0]:
        problems.append("the waiter HAS_GIL in %d reads" % count["waiter"][0])
    if minor >= 15 and count["waiter"][1] != len(reads):
        problems.append("the waiter (in take_gil) GIL_REQUESTED in %d of %d reads"
                        % (count["waiter"][1], len(reads)))
    if minor < 15 and count["waiter"][1]:
        problems.append("GIL_REQUESTED on 3.%d, which does not record it" % minor)
    # the sampling API (remora_sample): the same bits in every sample, the waiter's read by
    # the round (asleep), the holder's at its ticks or by the round
    if not problems:
        with Target(target, os.path.join(TARGETS, "gil_wait.py"), "truth.json") as t:
            truth = t.gil_wait_ready()
            roles = truth["roles"]
            p = mod.run(host, ["-c", GIL_SAMPLE_DRIVER, str(t.pid)])
        if p.returncode != 0:
            raise Fail("sample(): exit %d: %s" % (p.returncode, tail(p.stderr, 6)))
        got = json.loads(p.stdout)
        seen = {int(k): v for k, v in got["seen"].items()}
        waiter = seen.get(roles["waiter"], [])
        if not waiter:
            problems.append("sample(): no sample of the waiter")
        req = sum(1 for st in waiter if st & REQUESTED)
        if minor >= 15 and req != len(waiter):
            problems.append("sample() (engine %s): the waiter GIL_REQUESTED in %d of %d samples"
                            % (got["engine"], req, len(waiter)))
        if minor < 15 and req:
            problems.append("sample(): GIL_REQUESTED on 3.%d" % minor)
        for role in ("main", "parked"):
            n = sum(1 for st in seen.get(roles[role], []) if st & REQUESTED)
            if n:
                problems.append("sample(): %s GIL_REQUESTED in %d samples" % (role, n))
    if problems:
        raise Fail("; ".join(problems))
    if minor >= 15:
        return "the waiting thread GIL_REQUESTED in all %d reads and all its sampled rounds " \
               "(engine %s), the holder HAS_GIL, the parked one neither" % (len(reads), got["engine"])
    return "3.%d records no request: GIL_REQUESTED never set (docs/api.md); the holder " \
           "HAS_GIL in all %d reads" % (minor, len(reads))


# --- native=True: "<native>" where C code entered the interpreter ------------------------

NATIVE_TARGETS = ("pyenv-3.9.18", "pyenv-3.10.13", "pyenv-3.11.7", "pyenv-3.12.1",
                  "pyenv-3.13.0", "sid-3.14", "sid-3.15")
# run by the host: the thread's frames with native=True, [funcname, filename, lineno|None]
NATIVE_DRIVER = r"""
import json, sys
import remora
pid, tid = int(sys.argv[1]), int(sys.argv[2])
u = remora.RemoteUnwinder(pid, all_threads=True, native=True)
print(json.dumps([[f.funcname, f.filename, f.location.lineno if f.location else None]
                  for i in u.get_stack_trace() for t in i.threads if t.thread_id == tid
                  for f in t.frame_info]))
"""
# run inside the test chroot, in one mount namespace with the target: CPython 3.15's own
# _remote_debugging and remora on the same thread
NATIVE_CPYTHON = r"""
set -e
mount -t proc proc "$1/proc"
exec 3<&0                   # (an asynchronous list's own stdin would be /dev/null)
chroot "$1" python3.15 -I "$2/native_marks.py" "$2/truth.json" <&3 >"$1$2/target.log" 2>&1 &
t=$!
i=0
while [ ! -e "$1$2/truth.json" ]; do
    i=$((i + 1)); [ $i -lt 2000 ] && kill -0 $t || exit 3; sleep 0.01
done
rc=0
chroot "$1" env $4 PYTHONPATH="$2" python3.15 -c "$3" "$2/truth.json" || rc=$?
kill $t 2>/dev/null || true
exit $rc
"""
NATIVE_COMPARE = r"""
import json, sys
import _remote_debugging, remora
truth = json.load(open(sys.argv[1]))
out = {}
for mod in (_remote_debugging, remora):
    u = mod.RemoteUnwinder(truth["pid"], all_threads=True, native=True)
    out[mod.__name__] = [[f.funcname, f.filename, f.location.lineno if f.location else None]
                         for i in u.get_stack_trace() for t in i.threads
                         if t.thread_id == truth["native_id"] for f in t.frame_info]
print(json.dumps(out))
"""


def native_expected(truth, minor):
    """The thread's frames with a "<native>" mark after each one C code called (3.11+);
    before 3.11, after the outermost alone."""
    out = []
    entered = truth["entered_from_c"] if minor >= 11 else [truth["frames"][-1]["function"]]
    for k, f in enumerate(truth["frames"]):
        out.append([f["function"], f["file"], f["line"]])
        if f["function"] in entered and (minor >= 11 or k == len(truth["frames"]) - 1):
            out.append(["<native>", "~", None])
    return out


def test_native_marks(remora, target):
    mod = PyModule.get(remora)
    host = next(i for i in INTERPRETERS if i[0] == "debian-3.11-static")
    minor = int(re.search(r"3\.(\d+)", target[0]).group(1))
    with Target(target, os.path.join(TARGETS, "native_marks.py"), "truth.json") as t:
        truth = t.wait_ready()
        p = mod.run(host, ["-c", NATIVE_DRIVER, str(t.pid), str(truth["native_id"])])
    if p.returncode != 0:
        raise Fail("exit %d: %s" % (p.returncode, tail(p.stderr, 6)))
    got = json.loads(p.stdout)
    want = native_expected(truth, minor)
    if got != want:
        raise Fail("native=True gave %s; the target's frames with a mark after each one C "
                   "called: %s" % ([g[0] for g in got], [w[0] for w in want]))
    return "%d marks, after %s" % (sum(1 for w in want if w[0] == "<native>"),
                                   ", ".join(w[0] for i, w in enumerate(want[:-1])
                                             if want[i + 1][0] == "<native>"))


def test_native_cpython(remora):
    """On sid 3.15: remora's frames equal CPython's own _remote_debugging's, marks and all."""
    mod = PyModule.get(remora)
    root = next(i for i in INTERPRETERS if i[0] == "sid-3.15")[2]
    work, visible, env = chroot_module(mod, root)
    try:
        shutil.copy(os.path.join(TARGETS, "native_marks.py"), work)
        p = subprocess.Popen(["unshare", "-m", "--propagation", "private", "sh", "-c",
                              NATIVE_CPYTHON, "sh", root, visible, NATIVE_COMPARE, env],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        # the target's stdin is p's, kept open (its EOF would end it) until the script,
        # which ends the target once compared, is done; the target's output goes to a
        # file, so stdout's EOF is the script's
        timer = threading.Timer(120, p.kill)
        timer.start()
        try:
            out = p.stdout.read()
            err = p.stderr.read()
            p.stdin.close()
            p.wait()
        finally:
            timer.cancel()
        with open(os.path.join(work, "truth.json")) as f:
            truth = json.load(f)
    except OSError as e:
        raise Fail("the chroot run gave no truth (%s): %s" % (e, tail(err, 6)))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    try:
        res = json.loads(out.strip().splitlines()[-1])
    except (IndexError, ValueError):
        raise Fail("no result (exit %d): %s" % (p.returncode, tail(err, 8)))
    theirs, ours = res["_remote_debugging"], res["remora"]
    if not theirs or ours != theirs:
        raise Fail("remora: %s; CPython's _remote_debugging: %s" % (ours, theirs))
    if ours != native_expected(truth, 15):
        raise Fail("both gave %s; the target says C called %s"
                   % ([g[0] for g in ours], truth["entered_from_c"]))
    return "the same %d frames as CPython's module, %d of them <native>" % (
        len(ours), sum(1 for f in ours if f[0] == "<native>"))


# --- get_stats() -------------------------------------------------------------------------

STATS_TARGETS = ("pyenv-3.9.18", "pyenv-3.12.1", "sid-3.15")
# CPython 3.15's _remote_debugging.RemoteUnwinder.get_stats() keys
CPYTHON_STATS = (
    "total_samples", "frame_cache_hits", "frame_cache_misses", "frame_cache_partial_hits",
    "frames_read_from_cache", "frames_read_from_memory", "memory_reads", "memory_bytes_read",
    "code_object_cache_hits", "code_object_cache_misses", "stale_cache_invalidations",
    "batched_read_attempts", "batched_read_successes", "batched_read_misses",
    "batched_read_segments_requested", "batched_read_segments_completed",
    "frame_cache_hit_rate", "code_object_cache_hit_rate", "batched_read_success_rate",
    "batched_read_segment_completion_rate")
PY_STATS = r"""
import json, sys
import remora
u = remora.RemoteUnwinder(int(sys.argv[1]), all_threads=True, stats=True, cache_frames=True)
threads = frames = 0
for _ in range(5):
    for i in u.get_stack_trace():
        for t in i.threads:
            threads += 1
            frames += len(t.frame_info)
print(json.dumps({"threads": threads, "frames": frames, "stats": u.get_stats()}))
"""


def test_python_stats(remora, target):
    mod = PyModule.get(remora)
    host = next(i for i in INTERPRETERS if i[0] == "debian-3.11-static")
    with Target(target, os.path.join(TARGETS, "known_stacks.py"), "truth.json") as t:
        t.wait_ready()
        t.wait_main_in_read()
        p = mod.run(host, ["-c", PY_STATS, str(t.pid)])
    if p.returncode != 0:
        raise Fail("exit %d: %s" % (p.returncode, tail(p.stderr, 6)))
    doc = json.loads(p.stdout)
    st, problems = doc["stats"], []
    missing = [k for k in CPYTHON_STATS if k not in st]
    if missing:
        problems.append("keys missing: %s" % missing)
    checks = (
        ("total_samples", st.get("total_samples") == 5),
        ("frame_cache_hits + misses = threads returned",
         st.get("frame_cache_hits", 0) + st.get("frame_cache_misses", 0) == doc["threads"]),
        ("frames_read_from_cache + _memory = frames returned",
         st.get("frames_read_from_cache", 0) + st.get("frames_read_from_memory", 0)
         == doc["frames"]),
        ("frames_read_from_cache > 0 (six parked threads)",
         st.get("frames_read_from_cache", 0) > 0),
        ("code_object_cache_hits > 0", st.get("code_object_cache_hits", 0) > 0),
        ("code_object_cache_misses > 0", st.get("code_object_cache_misses", 0) > 0),
        ("batched_read_attempts > 0 = successes (nothing unmapped)",
         0 < st.get("batched_read_attempts", 0) == st.get("batched_read_successes")),
        ("segments completed = requested > attempts",
         st.get("batched_read_segments_requested", 0) ==
         st.get("batched_read_segments_completed") > st.get("batched_read_attempts", 0)),
        ("memory_reads >= batched_read_attempts",
         st.get("memory_reads", 0) >= st.get("batched_read_attempts", 0) > 0),
        ("frame_cache_partial_hits 0 (not counted)", st.get("frame_cache_partial_hits") == 0))
    problems += [what for what, ok in checks if not ok]
    if problems:
        raise Fail("%s: %s" % ("; ".join(problems), json.dumps(doc)))
    zero = sorted(k for k in CPYTHON_STATS if not st[k])
    return "5 reads, %d threads, %d frames (%d from the cache); 0: %s" % (
        doc["threads"], doc["frames"], st["frames_read_from_cache"], ", ".join(zero))


# --- CPython's own tests of _remote_debugging -------------------------------------------

CPYTHON_TEST = "/usr/lib/python3.15/test/test_external_inspection.py"
CPYTHON_TIMEOUT = 1500   # s: the whole file (about 3 s when everything passes; a test that
                         # waits for a condition retries for up to 30 s)
# test method -> why remora does otherwise (each in docs/api.md's differences)
CPYTHON_SKIPS = {
    "test_oversized_linetable_degrades_to_no_location":
        "remora reads line tables up to 1 MiB (UNW_MAX_LINETABLE), CPython up to 64 KiB: "
        "such a frame has its location here",
}
# _remote_debugging.py: remora's names in the place of CPython's module
SHIM = """# remora in the place of CPython's _remote_debugging (tests/functional/library_tests.py)
from remora import *  # noqa: F401,F403
from remora import (RemoteUnwinder, InterpreterInfo, ThreadInfo, FrameInfo, LocationInfo,
                    AwaitedInfo, TaskInfo, CoroInfo, get_child_pids, is_python_process,
                    PROCESS_VM_READV_SUPPORTED, THREAD_STATUS_HAS_GIL, THREAD_STATUS_ON_CPU,
                    THREAD_STATUS_UNKNOWN, THREAD_STATUS_GIL_REQUESTED,
                    THREAD_STATUS_HAS_EXCEPTION, THREAD_STATUS_MAIN_THREAD)
"""
# run by the chroot's python3.15: the test file unchanged, the listed tests skipped with
# their reason, the results as JSON on the last line of stdout
CPYTHON_DRIVER = r"""
import json, sys, unittest
import _remote_debugging, remora
assert _remote_debugging.RemoteUnwinder is remora.RemoteUnwinder, _remote_debugging.__file__
import test.test_external_inspection as m
skips = json.loads(sys.argv[1])
found = set()
for cls in vars(m).values():
    if isinstance(cls, type) and issubclass(cls, unittest.TestCase):
        for name, why in skips.items():
            if name in vars(cls):
                setattr(cls, name, unittest.skip("remora: " + why)(vars(cls)[name]))
                found.add(name)
suite = unittest.defaultTestLoader.loadTestsFromModule(m)
r = unittest.TextTestRunner(verbosity=2, stream=sys.stderr).run(suite)
def name(t):
    return t.id().rsplit(".", 1)[-1] if hasattr(t, "id") else str(t)
print(json.dumps({"run": r.testsRun,
                  "failed": [[t.id(), tb[-600:]] for t, tb in r.failures + r.errors],
                  "skipped": [[name(t), why] for t, why in r.skipped],
                  "unexpected": [t.id() for t in r.unexpectedSuccesses],
                  "unknown_skips": sorted(set(skips) - found)}))
"""
CPYTHON_RUN = r"""
set -e
mount -t proc proc "$1/proc"
exec chroot "$1" env $6 PYTHONPATH="$2" timeout "$3" python3.15 -c "$4" "$5"
"""


def test_cpython(remora):
    mod = PyModule.get(remora)
    sid = next(i for i in INTERPRETERS if i[0] == "sid-3.15")
    root = sid[2]
    if not os.path.exists(root + CPYTHON_TEST):
        raise Skip("%s is not in the chroot (Debian's libpython3.15-testsuite: run "
                   "tests/provision-chroot.sh)" % CPYTHON_TEST)
    work, visible, env = chroot_module(mod, root)
    try:
        with open(os.path.join(work, "_remote_debugging.py"), "w") as f:
            f.write(SHIM)
        p = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                            CPYTHON_RUN, "sh", root, visible, str(CPYTHON_TIMEOUT),
                            CPYTHON_DRIVER, json.dumps(CPYTHON_SKIPS), env],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           timeout=CPYTHON_TIMEOUT + 60)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    try:
        res = json.loads(p.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        raise Fail("the run gave no result (exit %d): %s" % (p.returncode, tail(p.stderr, 10)))
    problems = ["%s: %s" % (t, tb.strip().splitlines()[-1] if tb.strip() else "?")
                for t, tb in res["failed"]]
    for mark in SANITIZER_MARKS:
        if mark in p.stderr:
            problems.append("sanitizer report: %s" % tail(p.stderr[p.stderr.index(mark):], 8))
            break
    problems += ["unexpected success: %s" % t for t in res["unexpected"]]
    problems += ["no test %s in the file (the list is stale)" % t for t in res["unknown_skips"]]
    ours = [t for t, why in res["skipped"] if why.startswith("remora: ")]
    theirs = [t for t, why in res["skipped"] if not why.startswith("remora: ")]
    if problems:
        raise Fail("%d of %d failed: %s" % (len(res["failed"]), res["run"],
                                            "; ".join(problems[:8])))
    passed = res["run"] - len(res["skipped"])
    return "%d tests: %d passed, 0 failed, %d skipped by CPython's own conditions (%s), %d " \
           "by remora's list (%s)" % (res["run"], passed, len(theirs), ", ".join(theirs),
                                     len(ours), ", ".join(ours))


REUSE_TARGETS = ("pyenv-3.9.18", "pyenv-3.12.1", "sid-3.15")
STEPS = 9             # inner_steps.py's STEPS

REUSE_DRIVER = r"""
import json, os, sys, time
import remora
pid, path, fd, nsteps, read_nr = (int(sys.argv[1]), sys.argv[2], int(sys.argv[3]),
                                  int(sys.argv[4]), sys.argv[5])
unwinders = [(cache, remora.RemoteUnwinder(pid, all_threads=True, cache_frames=cache))
             for cache in (True, False)]


def wait_step(k):
    deadline = time.monotonic() + 60
    while not os.path.exists("%s.%d" % (path, k)):
        if time.monotonic() > deadline:
            sys.exit("the target wrote no step %d" % k)
        time.sleep(0.01)
    with open("%s.%d" % (path, k)) as f:
        truth = json.load(f)
    # the truth is written on the line the thread then blocks on: read once it is there
    while read_nr != "-":
        with open("/proc/%d/syscall" % pid) as f:
            if f.read().split()[:2] == [read_nr, "0x0"]:
                break
        if time.monotonic() > deadline:
            sys.exit("step %d: the main thread never blocked in read(0)" % k)
        time.sleep(0.005)
    return [[f["function"], f["file"], f["line"]] for f in truth["frames"]]


def main_frames(trace):
    for interp in trace:
        for t in interp.threads:
            if t.thread_id == pid:
                return t.frame_info
    return None


problems, given = [], []
for k in range(nsteps):
    want = wait_step(k)
    for cache, u in unwinders:
        for rep in range(2):
            frames = main_frames(u.get_stack_trace())
            got = None if frames is None else [
                [f.funcname, f.filename, f.location.lineno if f.location else 0]
                for f in frames]
            if got != want:
                problems.append("step %d, cache_frames=%s, call %d: %s, the target's own %s"
                                % (k, cache, rep + 1, got, want))
            if frames is not None:
                given.append((k, cache, rep, frames, list(frames)))
                if rep == 0:
                    # the caller's list: changing it must change nothing of the next call
                    frames.append("the caller's")
                    given[-1][4].append("the caller's")
    os.write(fd, b"\n")
for k, cache, rep, frames, copy in given:
    if frames != copy:
        problems.append("step %d, cache_frames=%s, call %d: the list handed back changed "
                        "later" % (k, cache, rep + 1))
print(json.dumps({"problems": problems[:8]}))
"""


def test_reuse(remora, target):
    mod = PyModule.get(remora)
    host = next(i for i in INTERPRETERS if i[0] == "debian-3.11-static")
    with Target(target, os.path.join(TARGETS, "inner_steps.py"), "step") as t:
        fd = t.proc.stdin.fileno()
        p = subprocess.run([host[1], "-c", REUSE_DRIVER, str(t.pid), t.host_path(t.out),
                            str(fd), str(STEPS), READ_SYSCALL or "-"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           env=dict(os.environ, **mod.env), pass_fds=(fd,), timeout=300)
        for mark in SANITIZER_MARKS:
            if mark in p.stderr:
                raise Fail("sanitizer report: %s" % tail(p.stderr, 8))
        if p.returncode != 0:
            raise Fail("exit %d: %s; target: %s" % (p.returncode, tail(p.stderr, 6),
                                                    t.log_tail()))
        problems = json.loads(p.stdout)["problems"]
        if problems:
            raise Fail("; ".join(problems))
        code = t.finish()
        if code != 0:
            raise Fail("the target exited with %d: %s" % (code, t.log_tail()))
    return "%d steps, each read twice with cache_frames True and False: every reading equal " \
           "to the target's own frames; no list handed back changed later" % STEPS


def tests(remora):
    """[(name, function, skip reason or None)] for run.py."""
    out = []
    for name in EXAMPLE_INTERPS:
        interp = next(i for i in INTERPRETERS if i[0] == name)
        out.append(("library/c-example/" + name,
                    (lambda i=interp: test_c_example(remora, i)), interp_missing(interp)))
    out.append(("library/c-errors", lambda: test_c_errors(remora), None))
    for name in ("pyenv-3.12.1", "debian-3.11-static"):
        interp = next(i for i in INTERPRETERS if i[0] == name)
        out.append(("library/c-api/core/" + name, (lambda i=interp: test_c_core(remora, i)),
                    interp_missing(interp)))
    for name in PY_TARGETS:
        interp = next(i for i in INTERPRETERS if i[0] == name)
        out.append(("library/c-api/flags/" + name, (lambda i=interp: test_c_flags(remora, i)),
                    interp_missing(interp)))
        out.append(("library/c-api/tasks/" + name, (lambda i=interp: test_c_tasks(remora, i)),
                    interp_missing(interp)))
    for name in NATIVE_C_TARGETS:
        interp = next(i for i in INTERPRETERS if i[0] == name)
        out.append(("library/c-api/native/" + name, (lambda i=interp: test_c_native(remora, i)),
                    interp_missing(interp)))
    for name in TASK_C_TARGETS:
        interp = next(i for i in INTERPRETERS if i[0] == name)
        out.append(("library/c-api/running-task/" + name,
                    (lambda i=interp: test_c_running_task(remora, i)), interp_missing(interp)))
    for h in HOSTS:
        host = next(i for i in INTERPRETERS if i[0] == h)
        out.append(("library/hosts/" + h, (lambda a=host: test_host(remora, a)),
                    interp_missing(host) or
                    (None if not host[2] or shutil.which("unshare") else
                     "unshare(1) missing (util-linux)")))
    host311 = next(i for i in INTERPRETERS if i[0] == "debian-3.11-static")
    for tn in GIL_TARGETS:
        target = next(i for i in INTERPRETERS if i[0] == tn)
        out.append(("library/gil-requested/" + tn,
                    (lambda b=target: test_gil_requested(remora, b)),
                    interp_missing(host311) or interp_missing(target)))
    for tn in NATIVE_TARGETS:
        target = next(i for i in INTERPRETERS if i[0] == tn)
        out.append(("library/native-marks/" + tn,
                    (lambda b=target: test_native_marks(remora, b)),
                    interp_missing(host311) or interp_missing(target)))
    out.append(("library/native-marks/cpython-3.15", lambda: test_native_cpython(remora),
                interp_missing(next(i for i in INTERPRETERS if i[0] == "sid-3.15")) or
                (None if shutil.which("unshare") else "unshare(1) missing (util-linux)")))
    for tn in PY_TARGETS:
        target = next(i for i in INTERPRETERS if i[0] == tn)
        out.append(("library/python-tasks/" + tn, (lambda b=target: test_python_tasks(remora, b)),
                    interp_missing(host311) or interp_missing(target)))
    for tn in STATS_TARGETS:
        target = next(i for i in INTERPRETERS if i[0] == tn)
        out.append(("library/python-stats/" + tn, (lambda b=target: test_python_stats(remora, b)),
                    interp_missing(host311) or interp_missing(target)))
    out.append(("library/pip-install", lambda: test_pip(remora), interp_missing(host311)))
    out.append(("library/python-sample", lambda: test_python_sample(remora),
                interp_missing(host311) or
                interp_missing(next(i for i in INTERPRETERS if i[0] == "pyenv-3.12.1"))))
    for tn in REUSE_TARGETS:
        target = next(i for i in INTERPRETERS if i[0] == tn)
        out.append(("library/python-reuse/" + tn, (lambda b=target: test_reuse(remora, b)),
                    interp_missing(host311) or interp_missing(target)))
    out.append(("library/python-errors", lambda: test_python_errors(remora),
                interp_missing(next(i for i in INTERPRETERS if i[0] == "debian-3.11-static"))))
    for name in SAMPLE_INTERPS:
        interp = next(i for i in INTERPRETERS if i[0] == name)
        for engine in ("kernel", "user"):
            out.append(("library/c-sample/%s/%s" % (engine, name),
                        (lambda i=interp, e=engine: test_c_sample(remora, i, e)),
                        interp_missing(interp)))
    out.append(("library/c-sample-gil", lambda: test_c_sample_gil(remora),
                interp_missing(next(i for i in INTERPRETERS if i[0] == "pyenv-3.12.1"))))
    for engine in ("kernel", "user"):
        out.append(("library/python-sample-engine/" + engine,
                    (lambda e=engine: test_python_sample_engine(remora, e)),
                    interp_missing(host311) or
                    interp_missing(next(i for i in INTERPRETERS if i[0] == "pyenv-3.12.1"))))
    out.append(("library/cpython-tests", lambda: test_cpython(remora),
                interp_missing(next(i for i in INTERPRETERS if i[0] == "sid-3.15")) or
                (None if shutil.which("unshare") else "unshare(1) missing (util-linux)")))
    return out
