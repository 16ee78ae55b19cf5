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
#   library/python/HOST/TARGET `make python`'s module (one _remora.abi3.so) imported by the
#                              host interpreter (pyenv 3.9, Debian's 3.11, pyenv 3.12):
#                              RemoteUnwinder(pid, all_threads=True).get_stack_trace() of
#                              known_stacks.py run by TARGET (all 12 builds): every
#                              thread's frames (funcname, filename, location.lineno) equal
#                              to the target's own sys._current_frames(); the result types
#                              and fields; remora.dump() the same; 3.11+ targets columns
#   library/python-tasks/TARGET  async_tasks.py under TARGET (3.9, 3.12, sid 3.15), read
#                              from Debian's 3.11: get_all_awaited_by() holds every task of
#                              the target's asyncio.all_tasks() under its loop's thread, by
#                              id, with its name, its coroutine stack (funcname, filename,
#                              lineno) and the ids awaiting it as the target recorded them;
#                              get_async_stack_trace() has the running task under that thread
#   library/pip-install        `python3 -m pip install . --no-build-isolation --no-index` into a
#                              fresh venv of Debian's python3 (its setuptools, no network):
#                              the installed remora (an .abi3.so) dumps known_stacks.py as
#                              its truth says
#   library/python-sample      remora.sample(pid, rate=50, duration=0.5) of known_stacks.py
#                              (Debian's 3.11 reading pyenv 3.12): samples, each every
#                              thread as the target's truth says; get_child_pids() of the
#                              driver names the sleep(1) it started, recursive and not
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

from harness import (INTERPRETERS, READ_SYSCALL, REPO, SANITIZER_MARKS, TARGETS, Fail, Skip,
                     Target, dump_frames_problems, dump_threads_problems, expect_failure, free_pid,
                     gcore, interp_missing, tail)

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
            if binary in (self.shared, self.check):
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


# --- the Python module -------------------------------------------------------------------

PY_HOSTS = ("pyenv-3.9.18", "debian-3.11-static", "pyenv-3.12.1")
PY_TARGETS = ("pyenv-3.9.18", "pyenv-3.12.1", "sid-3.15")
PY_STACK_TARGETS = tuple(i[0] for i in INTERPRETERS)   # every build the tests know
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


def test_python(remora, host, target):
    mod = PyModule.get(remora)
    minor = int(re.search(r"3\.(\d+)", target[0]).group(1))
    with Target(target, os.path.join(TARGETS, "known_stacks.py"), "truth.json") as t:
        truth = t.wait_ready()
        t.wait_main_in_read()
        p = mod.run(host, ["-c", PY_DRIVER, str(t.pid),
                           "columns" if minor >= 11 else "lines", truth["python"]])
        if p.returncode != 0:
            raise Fail("%s: exit %d: %s" % (host[0], p.returncode, tail(p.stderr, 6)))
        doc = json.loads(p.stdout)
        problems, got, _ = dump_threads_problems(doc, truth, t.pid)
        more, diff = dump_frames_problems(got, truth)
        problems += doc["problems"] + more + (diff or [])[:8]
        if problems:
            raise Fail("; ".join(problems))
        return "%d threads equal to the target's own frames, from %s" % (
            len(truth["threads"]), host[0])


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
    work = tempfile.mkdtemp(prefix="remora-cpython-", dir=os.path.join(root, "tmp"))
    visible = work[len(root):]
    env = ""
    try:
        os.chmod(work, 0o755)
        shutil.copytree(os.path.join(mod.path, "remora"), os.path.join(work, "remora"))
        if mod.env.get("LD_PRELOAD"):
            # ASan: the host's sanitizer runtimes copied beside the module, the address
            # sanitizer's preloaded (the targets the tests start inherit it: harmless)
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
    for h in PY_HOSTS:
        host = next(i for i in INTERPRETERS if i[0] == h)
        for tn in PY_STACK_TARGETS:
            target = next(i for i in INTERPRETERS if i[0] == tn)
            out.append(("library/python/%s/%s" % (h, tn),
                        (lambda a=host, b=target: test_python(remora, a, b)),
                        interp_missing(host) or interp_missing(target)))
    host311 = next(i for i in INTERPRETERS if i[0] == "debian-3.11-static")
    for tn in PY_TARGETS:
        target = next(i for i in INTERPRETERS if i[0] == tn)
        out.append(("library/python-tasks/" + tn, (lambda b=target: test_python_tasks(remora, b)),
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
    out.append(("library/cpython-tests", lambda: test_cpython(remora),
                interp_missing(next(i for i in INTERPRETERS if i[0] == "sid-3.15")) or
                (None if shutil.which("unshare") else "unshare(1) missing (util-linux)")))
    return out
