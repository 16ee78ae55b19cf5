# Targets of the functional tests: a script of tests/targets/ run by one interpreter (on the
# host or inside the test chroot), waiting for its readiness (its ready file, the kernel's
# word in /proc that a thread is parked), the marks a target that times itself writes, its
# state and tracer in /proc, a free pid, and cores of a target (gdb's gcore, or the
# kernel's after a crash). Standard library only.

import json
import os
import platform
import re
import shutil
import subprocess
import tempfile
import time

from common import Fail, Skip, tail
from interpreters import interp_command

READY_TIMEOUT = 30.0                     # seconds a target may take to write its ready file
# read(2) syscall number, to see that a target's main thread is parked reading stdin
READ_SYSCALL = {"x86_64": "0", "aarch64": "63"}.get(platform.machine())
# futex(2): where a thread waits for the GIL (not parked in its own blocking call yet)
FUTEX_SYSCALL = {"x86_64": "202", "aarch64": "98"}.get(platform.machine())


# --- targets ----------------------------------------------------------------------------

# targets that do not read stdin, so EOF does not end them (they end after their own time,
# or never), and subinterp.py, whose exit waits 5 s and more on 3.12 with its subinterpreter
# alive: killed at once when a test is done with them, not waited for
NO_EOF = ("busy.py", "async_deep.py", "dump_recurse.py", "chaos_exit.py", "grandchild.py",
          "subinterp.py")

class Target:
    """A target script run by one interpreter, stdin a pipe (EOF ends it). The script is
    copied into a fresh directory (inside the chroot for chroot interpreters); argv[1] is
    a file in that directory, which the target writes when it is ready (no such argument
    if out_name is None), followed by args; the files `support` are copied beside it. With
    spawn=False nothing is started: argv is the command line, for a test that starts it
    some other way (e.g. `remora record --`)."""

    def __init__(self, interp, script, out_name, args=(), spawn=True, support=()):
        self.name, self.python, self.root = interp
        self.script = script
        self.out_name = out_name
        self.args = [str(a) for a in args]
        self.spawn = spawn
        self.support = support
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
        for path in self.support:
            shutil.copy(path, self.host_path(os.path.join(visible, os.path.basename(path))))
        self.visible_dir = visible
        self.out = os.path.join(visible, self.out_name) if self.out_name else None
        argv = interp_command((self.name, self.python, self.root),
                              ["-I", script] + ([self.out] if self.out else []) + self.args)
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
        return self._wait_json(self.host_path(self.out), "it was ready",
                               "target not ready after %.0fs" % READY_TIMEOUT)

    def wait_file(self, suffix):
        """Polls for the ready file's name + suffix (written by temp + rename); its JSON."""
        path = self.host_path(self.out) + suffix
        return self._wait_json(path, "writing %s" % os.path.basename(path), "target wrote no %s in "
                               "%.0fs" % (os.path.basename(path), READY_TIMEOUT))

    def _wait_json(self, path, before, late):
        """Polls until path exists; its JSON. Fail if the target exits first ("target exited
        with N before BEFORE") or READY_TIMEOUT passes (LATE)."""
        deadline = time.monotonic() + READY_TIMEOUT
        while not os.path.exists(path):
            if self.proc.poll() is not None:
                raise Fail("target exited with %d before %s: %s"
                           % (self.proc.returncode, before, self.log_tail()))
            if time.monotonic() > deadline:
                raise Fail("%s: %s" % (late, self.log_tail()))
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

    def gil_wait_ready(self):
        """gil_wait.py, set in its known state: one thread parked in its own C call, the
        main thread told to take the GIL for good, the waiter asleep in futex(2) waiting
        for it (where the architecture's syscall number is known). Returns its truth."""
        truth = self.wait_ready()
        roles = truth["roles"]
        self.wait_thread_parked(roles["parked"])
        self.wait_main_in_read()
        self.proc.stdin.write(b"g")         # main: take the GIL for good
        self.proc.stdin.flush()
        if FUTEX_SYSCALL is not None:       # woken, then asleep waiting for the GIL
            self._wait_syscall(roles["waiter"], lambda f: f[:1] == [FUTEX_SYSCALL],
                               "the waiter never waited in futex(2) for the GIL")
        return truth

    def __exit__(self, *exc):
        try:
            if (self.proc and self.proc.poll() is None
                    and os.path.basename(self.script) in NO_EOF):
                self.proc.kill()            # it would not hear the EOF: no 5 s wait for it
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
            if not os.environ.get("REMORA_KEEP_TARGET_DIR"):
                shutil.rmtree(self.dir, ignore_errors=True)
        return False


def free_pid():
    with open("/proc/sys/kernel/pid_max") as f:
        pid = int(f.read()) - 1
    while os.path.exists("/proc/%d" % pid):
        pid -= 1
    return pid


# --- waiting on /proc ------------------------------------------------------------------

STATE_TIMEOUT = 10.0           # s for the kernel to show a target stopped / running


def proc_state(pid):
    """The kernel's state letter of pid's main thread, or None once it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def wait_state(pid, stopped):
    deadline = time.monotonic() + STATE_TIMEOUT
    while (proc_state(pid) in ("T", "t")) != stopped:
        if time.monotonic() > deadline:
            raise Fail("target %d never became %s (state %s)" % (
                pid, "stopped" if stopped else "running", proc_state(pid)))
        time.sleep(0.001)


def wait_asleep(pid):
    """Until pid's main thread sleeps in time.sleep() (its wait channel a nanosleep): a
    target that says it is ready goes on a few instructions to its sleep, and a thread
    waiting for the GIL on the way is asleep too ('S'), so the state letter is no proof."""
    deadline = time.monotonic() + STATE_TIMEOUT
    while True:
        try:
            with open("/proc/%d/wchan" % pid) as f:
                if "nanosleep" in f.read():
                    return
        except OSError:
            raise Fail("target %d is gone" % pid)
        if time.monotonic() > deadline:
            raise Fail("target %d's main thread never went to sleep" % pid)
        time.sleep(0.001)


def tracer_of(pid):
    """The TracerPid of pid (0: none), or None once it is gone."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("TracerPid:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return 0


# --- targets that time themselves: their marks ----------------------------------------

def mark(t, n):
    """Asks a target that keeps its own totals (cpu_shares.py, work_mix.py) for a snapshot
    of them (a line of marks.jsonl in its directory); returns its n-th."""
    return target_says(t, "mark", n)


def target_says(t, line, n):
    """Writes a command line to a target's stdin, then waits for the n-th line of
    marks.jsonl in its directory (the target's answer); returns it, parsed."""
    t.proc.stdin.write(line.encode() + b"\n")
    t.proc.stdin.flush()
    path = os.path.join(t.dir, "marks.jsonl")
    deadline = time.monotonic() + READY_TIMEOUT
    while True:
        try:
            with open(path) as f:
                lines = f.read().split("\n")[:-1]         # complete lines only
        except FileNotFoundError:
            lines = []
        if len(lines) >= n:
            return json.loads(lines[n - 1])
        if t.proc.poll() is not None:
            raise Fail("target exited %d before mark %d: %s" % (t.proc.returncode, n, t.log_tail()))
        if time.monotonic() > deadline:
            raise Fail("target never wrote mark %d" % n)
        time.sleep(0.005)           # polling the target's file, not waiting for an event


# --- cores of a target ----------------------------------------------------------------

GCORE_TIMEOUT = 120
CRASH_TIMEOUT = 30


# gdb 13's gcore gives up on a whole mapping when part of it cannot be read: glibc 2.42+
# (the chroot's) puts thread-stack guard pages inside the stack's mapping
# (MADV_GUARD_INSTALL), so such cores hold zeros for every thread stack but the main one.
LOST = re.compile(r"Memory read failed for corefile section, \d+ bytes at 0x([0-9a-f]+)")
VSYSCALL = 0xffffffffff600000


def gcore(target, lost=None):
    """Core of a running target, written into its directory; returns the host path.
    The start addresses of mappings gdb could not save are appended to 'lost'."""
    if shutil.which("gcore") is None:
        raise Skip("gcore (gdb) not installed")
    prefix = os.path.join(target.dir, "core")
    p = subprocess.run(["gcore", "-o", prefix, str(target.pid)], stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=GCORE_TIMEOUT)
    path = "%s.%d" % (prefix, target.pid)
    text = p.stdout.decode("utf-8", "replace")
    if p.returncode != 0 or not os.path.exists(path):
        raise Fail("gcore failed (%d): %s" % (p.returncode, tail(text)))
    if lost is not None:
        lost += [a for a in (int(x, 16) for x in LOST.findall(text)) if a != VSYSCALL]
    return path


class CrashTarget:
    """Target, started through sh so that it runs in its own directory with
    RLIMIT_CORE raised: a kernel core ("core" or "core.PID") lands next to it."""

    def __init__(self, interp, script, out_name):
        self.t = Target(interp, script, out_name)
        run_target = self.t

        def _start():
            os.chmod(run_target.dir, 0o777)
            visible = run_target.dir[len(run_target.root):] if run_target.root else run_target.dir
            script_path = os.path.join(visible, os.path.basename(run_target.script))
            shutil.copy(run_target.script, run_target.host_path(script_path))
            run_target.out = os.path.join(visible, run_target.out_name)
            cmd = "cd '%s' && ulimit -c unlimited && exec '%s' -I '%s' '%s'" % (
                visible, run_target.python, script_path, run_target.out)
            argv = ["sh", "-c", cmd]
            if run_target.root:
                argv = ["chroot", run_target.root] + argv
            run_target.log = open(os.path.join(run_target.dir, "target.log"), "wb")
            run_target.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=run_target.log,
                                               stderr=subprocess.STDOUT)
            run_target.pid = run_target.proc.pid
        self.t._start = _start


def kernel_cores_usable():
    try:
        with open("/proc/sys/kernel/core_pattern") as f:
            pattern = f.read().strip()
    except OSError as e:
        return "cannot read core_pattern: %s" % e
    if pattern.startswith("|") or "/" in pattern:
        return "kernel cores go to %r, not next to the process" % pattern
    return None
