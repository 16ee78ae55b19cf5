# Shared parts of the functional tests (run.py, record_tests.py): the interpreters this
# machine has, running remora (a hang, a signal or a sanitizer report always fails), and
# starting targets -- on the host or inside the test chroot -- that write a ready file.
# Standard library only.

import json
import os
import platform
import shutil
import signal
import subprocess
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
TARGETS = os.path.join(REPO, "tests", "targets")
CHROOT = os.environ.get("REMORA_CHROOT", "/var/cache/remora/sid")
HOST_PYTHON = "/usr/bin/python3"
PYENV = "/root/.pyenv/versions"

# (name, interpreter path as the target sees it, chroot root or None)
INTERPRETERS = [
    ("pyenv-3.9.18", PYENV + "/3.9.18/bin/python3.9", None),
    ("pyenv-3.10.13", PYENV + "/3.10.13/bin/python3.10", None),
    ("pyenv-3.11.7", PYENV + "/3.11.7/bin/python3.11", None),
    ("pyenv-3.12.1", PYENV + "/3.12.1/bin/python3.12", None),
    ("pyenv-3.13.0", PYENV + "/3.13.0/bin/python3.13", None),
    ("debian-3.11-static", "/usr/bin/python3.11", None),
    ("sid-3.13", "/usr/bin/python3.13", CHROOT),
    ("sid-3.13-pie", "/usr/bin/python3.13-pie", CHROOT),
    ("sid-3.14", "/usr/bin/python3.14", CHROOT),
    ("sid-3.14-pie", "/usr/bin/python3.14-pie", CHROOT),
    ("sid-3.15", "/usr/bin/python3.15", CHROOT),
    ("sid-3.15-pie", "/usr/bin/python3.15-pie", CHROOT),
]

READY_TIMEOUT = 30.0                     # seconds a target may take to write its ready file
SANITIZER_MARKS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
                   "UndefinedBehaviorSanitizer", "ThreadSanitizer")
# read(2) syscall number, to see that a target's main thread is parked reading stdin
READ_SYSCALL = {"x86_64": "0", "aarch64": "63"}.get(platform.machine())
# futex(2): where a thread waits for the GIL (not parked in its own blocking call yet)
FUTEX_SYSCALL = {"x86_64": "202", "aarch64": "98"}.get(platform.machine())


class Fail(Exception):
    pass


class Skip(Exception):
    pass


# --- running remora ---------------------------------------------------------------------

class Remora:
    def __init__(self, path, wrapper, timeout):
        self.path = path
        self.wrapper = wrapper
        self.timeout = timeout

    def argv(self, args, prefix=(), binary=None):
        return list(prefix) + self.wrapper + [binary or self.path] + [str(a) for a in args]

    def run(self, args, prefix=(), binary=None, input=None):
        """Run remora; returns (rc, stdout, stderr). input (bytes), if given, is its stdin,
        else /dev/null. Raises Fail on a hang, a signal or a sanitizer report: those are
        never an acceptable outcome."""
        argv = self.argv(args, prefix, binary)
        # Own process group, so a hang kills remora and anything a wrapper started.
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL if input is None else subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             start_new_session=True)
        try:
            out, err = p.communicate(input=input, timeout=self.timeout)
        except BaseException as e:
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
            if isinstance(e, subprocess.TimeoutExpired):
                raise Fail("`remora %s` hung (killed after %ss)"
                           % (" ".join(map(str, args)), self.timeout))
            raise
        out = out.decode("utf-8", "replace")
        err = err.decode("utf-8", "replace")
        self.judge(args, p.returncode, out, err)
        return p.returncode, out, err

    def judge(self, args, rc, out, err):
        """Raises Fail if remora died of a signal or a sanitizer spoke."""
        what = "`remora %s`" % " ".join(map(str, args))
        if rc < 0:
            raise Fail("%s killed by %s; stderr: %s" % (what, signame(-rc), tail(err)))
        for mark in SANITIZER_MARKS:
            if mark in err or mark in out:
                raise Fail("%s: sanitizer report: %s" % (what, tail(err, 6)))


def signame(n):
    try:
        return signal.Signals(n).name
    except ValueError:
        return "signal %d" % n


def tail(text, n=3):
    lines = [l for l in text.strip().splitlines() if l.strip()]
    return " | ".join(lines[-n:]) if lines else "(empty)"


def one_line(err):
    """None if err is exactly one non-empty line, else a description of what it is."""
    lines = err.splitlines()
    if len(lines) == 1 and lines[0].strip():
        return None
    if not lines:
        return "stderr is empty"
    return "stderr has %d lines: %s" % (len(lines), " | ".join(lines[:4]))


# --- targets ----------------------------------------------------------------------------

class Target:
    """A target script run by one interpreter, stdin a pipe (EOF ends it). The script is
    copied into a fresh directory (inside the chroot for chroot interpreters); argv[1] is
    a file in that directory, which the target writes when it is ready (no such argument
    if out_name is None), followed by args. With spawn=False nothing is started: argv is
    the command line, for a test that starts it some other way (e.g. `remora record --`)."""

    def __init__(self, interp, script, out_name, args=(), spawn=True):
        self.name, self.python, self.root = interp
        self.script = script
        self.out_name = out_name
        self.args = [str(a) for a in args]
        self.spawn = spawn
        self.proc = None
        self.dir = None

    def host_path(self, path):
        return self.root + path if self.root else path

    def __enter__(self):
        base = os.path.join(self.root, "tmp") if self.root else None
        self.dir = tempfile.mkdtemp(prefix="remora-func-", dir=base)
        self.log = None
        try:
            self._start()
        except BaseException:
            self.__exit__()
            raise
        return self

    def _start(self):
        os.chmod(self.dir, 0o755)
        visible = self.dir[len(self.root):] if self.root else self.dir
        script = os.path.join(visible, os.path.basename(self.script))
        shutil.copy(self.script, self.host_path(script))
        self.visible_dir = visible
        self.out = os.path.join(visible, self.out_name) if self.out_name else None
        argv = [self.python, "-I", script] + ([self.out] if self.out else []) + self.args
        if self.root:
            argv = ["chroot", self.root] + argv
        self.argv = argv
        if not self.spawn:
            return
        self.log = open(os.path.join(self.dir, "target.log"), "wb")
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=self.log,
                                     stderr=subprocess.STDOUT)
        self.pid = self.proc.pid

    def finish(self, timeout=READY_TIMEOUT):
        """Close the target's stdin (EOF: it ends) and wait for it; returns its exit code."""
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise Fail("target did not exit within %.0fs of EOF on stdin: %s"
                       % (timeout, self.log_tail()))

    def log_tail(self):
        try:
            with open(os.path.join(self.dir, "target.log"), "rb") as f:
                return tail(f.read().decode("utf-8", "replace"))
        except OSError:
            return "(no log)"

    def wait_ready(self):
        """Poll for the ready file; returns its JSON."""
        path = self.host_path(self.out)
        deadline = time.monotonic() + READY_TIMEOUT
        while not os.path.exists(path):
            if self.proc.poll() is not None:
                raise Fail("target exited with %d before it was ready: %s"
                           % (self.proc.returncode, self.log_tail()))
            if time.monotonic() > deadline:
                raise Fail("target not ready after %.0fs: %s" % (READY_TIMEOUT,
                                                                 self.log_tail()))
            time.sleep(0.01)
        with open(path) as f:
            return json.load(f)

    def wait_file(self, suffix):
        """Polls for the ready file's name + suffix (written by temp + rename); its JSON."""
        path = self.host_path(self.out) + suffix
        deadline = time.monotonic() + READY_TIMEOUT
        while not os.path.exists(path):
            if self.proc.poll() is not None:
                raise Fail("target exited with %d before writing %s: %s"
                           % (self.proc.returncode, os.path.basename(path), self.log_tail()))
            if time.monotonic() > deadline:
                raise Fail("target wrote no %s in %.0fs: %s" % (os.path.basename(path), READY_TIMEOUT,
                                                                  self.log_tail()))
            time.sleep(0.01)
        with open(path) as f:
            return json.load(f)

    def _wait_syscall(self, tid, parked, what):
        """Polls /proc/PID/task/TID/syscall until parked(its fields) holds."""
        path = "/proc/%d/task/%d/syscall" % (self.pid, tid)
        deadline = time.monotonic() + READY_TIMEOUT
        while True:
            try:
                with open(path) as f:
                    fields = f.read().split()
            except OSError as e:
                raise Fail("cannot read %s: %s" % (path, e))
            if parked(fields):
                return
            if time.monotonic() > deadline:
                raise Fail("%s: %s" % (what, " ".join(fields[:2])))
            time.sleep(0.005)

    def wait_main_in_read(self):
        """The ready file is written just before the main thread parks in read(0, ...):
        poll the kernel until it is there (skipped on an unknown architecture)."""
        if READ_SYSCALL is not None:
            self._wait_syscall(self.pid, lambda f: f[:2] == [READ_SYSCALL, "0x0"],
                               "target's main thread never parked in read(0)")

    def wait_thread_parked(self, tid):
        """Polls the kernel until thread tid is blocked in a system call other than futex
        (which is where it would wait for the GIL): parked in its own C call, holding no
        GIL. Skipped on an unknown architecture."""
        if FUTEX_SYSCALL is not None:
            self._wait_syscall(tid, lambda f: bool(f) and f[0].isdigit() and f[0] != FUTEX_SYSCALL,
                               "thread %d never parked in a system call" % tid)

    def __exit__(self, *exc):
        try:
            if self.proc and self.proc.poll() is None:
                try:
                    self.proc.stdin.close()
                    self.proc.wait(timeout=5)
                except (OSError, subprocess.TimeoutExpired):
                    pass
            if self.proc and self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
        finally:
            if self.proc and self.proc.stdin:
                try:
                    self.proc.stdin.close()
                except OSError:
                    pass
            if self.log:
                self.log.close()
            shutil.rmtree(self.dir, ignore_errors=True)
        return False


def interp_missing(interp):
    name, python, root = interp
    if root:
        if not os.path.isdir(root):
            return "chroot %s missing (create it with tests/provision-chroot.sh)" % root
        if shutil.which("chroot") is None:
            return "chroot(8) not installed"
    if not os.access((root or "") + python, os.X_OK):
        return "interpreter %s not found%s" % (python, " in chroot " + root if root else "")
    return None



def expect_failure(remora, args, want_rc, what, prefix=(), binary=None):
    rc, out, err = remora.run(args, prefix=prefix, binary=binary)
    if rc != want_rc:
        raise Fail("%s: exit %d, want %d; stderr: %s" % (what, rc, want_rc, tail(err)))
    bad = one_line(err)
    if bad:
        raise Fail("%s: %s" % (what, bad))
    return err


def free_pid():
    with open("/proc/sys/kernel/pid_max") as f:
        pid = int(f.read()) - 1
    while os.path.exists("/proc/%d" % pid):
        pid -= 1
    return pid

