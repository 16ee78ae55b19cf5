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
#                              the library's message
#
# The ASan run (--remora build-asan/remora) builds the library and the example with the
# same sanitizers (LIB_BUILD=build-asan-lib). Standard library only.

import os
import re
import shutil
import subprocess
import tempfile

from harness import (INTERPRETERS, REPO, TARGETS, Fail, Skip, Target, dump_frames_problems,
                     dump_threads_problems, expect_failure, free_pid, interp_missing, one_line,
                     tail)

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
        try:
            self._make(remora)
        except Fail as e:
            Installed.made = e
            raise

    def _run(self, argv, env=None, what=None):
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           env=env, timeout=BUILD_TIMEOUT)
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
            if binary == self.shared:
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
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return "exit 2 and 4, one line each"


def tests(remora):
    """[(name, function, skip reason or None)] for run.py."""
    out = []
    for name in EXAMPLE_INTERPS:
        interp = next(i for i in INTERPRETERS if i[0] == name)
        out.append(("library/c-example/" + name,
                    (lambda i=interp: test_c_example(remora, i)), interp_missing(interp)))
    out.append(("library/c-errors", lambda: test_c_errors(remora), None))
    return out
