# Shared parts of the functional tests (run.py, core_test.py and every *_tests.py): the
# interpreters this machine has, running remora (a hang, a signal or a sanitizer report
# always fails), starting targets -- on the host or inside the test chroot -- and waiting
# for their readiness (a ready file, /proc), recordings (`record`, one in the background
# with its status line on a pseudo-terminal, the summary and --stats lines), temp dirs,
# the ground truth a target's own source gives (chaos_*.py), comparing a dump with a
# target's truth, and the node tools (speedscope's schema). Reading what remora writes is
# formats.py's. Standard library only; the *_tests.py modules import this and formats.py,
# never each other.

import ast
import collections
import difflib
import json
import os
import platform
import pty
import re
import select
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
        args = [str(a) for a in args]
        # REMORA_TEST_ENGINE=user: every record and top on the user-space engine (the
        # suite run once more so shows that engine still passes what it passed before)
        if (os.environ.get("REMORA_TEST_ENGINE") == "user" and args and args[0] in ("record", "top")
                and not any(a == "--engine" or a.startswith("--engine=") for a in args)):
            args = args[:1] + ["--engine", "user"] + args[1:]
        return list(prefix) + self.wrapper + [binary or self.path] + args

    def run(self, args, prefix=(), binary=None, input=None, raw=False):
        """Run remora; returns (rc, stdout, stderr), stdout as bytes if raw. input (bytes),
        if given, is its stdin, else /dev/null. Raises Fail on a hang, a signal or a
        sanitizer report: those are never an acceptable outcome."""
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
        text = out.decode("utf-8", "replace")
        err = err.decode("utf-8", "replace")
        self.judge(args, p.returncode, text, err)
        return p.returncode, out if raw else text, err

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
            if not os.environ.get("REMORA_KEEP_TARGET_DIR"):
                shutil.rmtree(self.dir, ignore_errors=True)
        return False


def interpreter(name):
    """The entry of INTERPRETERS named name."""
    return next(i for i in INTERPRETERS if i[0] == name)


def interp_command(interp, args):
    """The command line running interp's python with args (through chroot(8) for an
    interpreter of the test chroot)."""
    name, python, root = interp
    return ([python] if not root else ["chroot", root, python]) + list(args)


# REMORA_INTERPRETERS (names, comma-separated): a run on those alone, the others' tests
# said skipped by name (make asan: one of each minor version and kind, see the Makefile)
ONLY_INTERPRETERS = [n for n in os.environ.get("REMORA_INTERPRETERS", "").split(",") if n]


def interp_missing(interp):
    name, python, root = interp
    if ONLY_INTERPRETERS and name not in ONLY_INTERPRETERS:
        return "not in this run's interpreters (REMORA_INTERPRETERS=%s)" % ",".join(ONLY_INTERPRETERS)
    if root:
        if not os.path.isdir(root):
            return "chroot %s missing (create it with tests/provision-chroot.sh)" % root
        if shutil.which("chroot") is None:
            return "chroot(8) not installed"
    if not os.access((root or "") + python, os.X_OK):
        return "interpreter %s not found%s" % (python, " in chroot " + root if root else "")
    return None


def script(name):
    """The path of tests/targets/NAME."""
    return os.path.join(TARGETS, name)


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


# --- recordings ------------------------------------------------------------------------

SHORT_SECONDS = 0.5            # recordings that only need some samples
SAMPLED_BEFORE_SIGNAL = 100    # rounds remora reports on its status line before we signal
STOP_TIMEOUT = 10.0            # seconds remora may take to end after a signal / target death

SUMMARY = re.compile(r"^remora: (\d+) samples in ([0-9.]+) s \((\d+) Hz of (\d+) Hz asked\), "
                     r"(\d+) errors \(([0-9.]+)%\), (\d+) partial \(([0-9.]+)%\), (\d+) late"
                     r", engine (kernel|user)(; the target exited)?$", re.M)
# the documented fields, in order; later fields (key=number) may follow
STATS = re.compile(r"^stats: samples=(\d+) errors=(\d+) partial=(\d+) reads=(\d+) bytes=(\d+) "
                   r"reads_per_sample=([0-9.]+) cpu_us_per_sample=([0-9.]+)"
                   r"((?: \w+=[0-9.]+)*)$", re.M)
STATUS = re.compile(r"remora: (\d+) samples, ")


class Summary:
    def __init__(self, m):
        self.samples, self.errors, self.late = int(m.group(1)), int(m.group(5)), int(m.group(9))
        self.seconds, self.hz, self.asked = float(m.group(2)), int(m.group(3)), int(m.group(4))
        self.error_pct = float(m.group(6))
        self.partial, self.partial_pct = int(m.group(7)), float(m.group(8))
        self.engine = m.group(10)
        self.exited = m.group(11) is not None

    def __str__(self):
        return ("%d samples in %.2f s (%d Hz), %d errors (%.2f%%), %d partial (%.2f%%), %d late, "
                "engine %s" % (self.samples, self.seconds, self.hz, self.errors, self.error_pct,
                               self.partial, self.partial_pct, self.late, self.engine))


def summary(err, asked=None):
    """The summary line of a recording's stderr; Fail if it is missing or malformed."""
    found = SUMMARY.findall(err)
    if len(found) != 1:
        raise Fail("want one summary line `remora: N samples in D s (...)` on stderr, found %d: %s"
                   % (len(found), tail(err)))
    s = Summary(SUMMARY.search(err))
    if asked is not None and s.asked != asked:
        raise Fail("summary says %d Hz asked, want %d" % (s.asked, asked))
    return s


def record(remora, args, want_rc=0, input=None):
    """Runs `remora record ARGS`; checks the exit code; returns (stdout, stderr)."""
    rc, out, err = remora.run(["record"] + list(args), input=input)
    if rc != want_rc:
        raise Fail("`remora record %s` exited %d, want %d: %s"
                   % (" ".join(map(str, args)), rc, want_rc, tail(err)))
    return out, err


class Recording:
    """`remora record` running in the background, its stderr a pseudo-terminal so that it
    prints its status line ("remora: N samples, ...") every half second: that is how a
    test knows that sampling has started, without sleeping."""

    def __init__(self, remora, args):
        self.remora = remora
        self.args = ["record"] + [str(a) for a in args]
        master, slave = pty.openpty()
        self.master = master
        self.stdout = tempfile.TemporaryFile()
        self.err = b""
        try:
            self.proc = subprocess.Popen(remora.argv(self.args), stdin=subprocess.DEVNULL,
                                         stdout=self.stdout, stderr=slave,
                                         start_new_session=True)
        except BaseException:
            os.close(master)
            raise
        finally:
            os.close(slave)

    def _read(self, timeout):
        """Reads what the terminal has; False once it is closed (remora exited)."""
        if not select.select([self.master], [], [], timeout)[0]:
            return True
        try:
            data = os.read(self.master, 65536)
        except OSError:             # EIO: no process has the terminal open any more
            return False
        self.err += data
        return bool(data)

    def text(self):
        return self.err.decode("utf-8", "replace").replace("\r\n", "\n")

    def wait_sampled(self, rounds=SAMPLED_BEFORE_SIGNAL, timeout=30.0):
        """Waits until remora's status line counts at least `rounds` rounds."""
        deadline = time.monotonic() + timeout
        while True:
            seen = [int(n) for n in STATUS.findall(self.text())]
            if seen and seen[-1] >= rounds:
                return seen[-1]
            if self.proc.poll() is not None:
                self._read(0)
                raise Fail("remora exited %d before its status line showed %d samples: %s"
                           % (self.proc.returncode, rounds, tail(self.text())))
            if time.monotonic() > deadline:
                raise Fail("remora's status line never showed %d samples in %.0fs: %r"
                           % (rounds, timeout, self.text()[-200:]))
            self._read(0.1)

    def finish(self, timeout=STOP_TIMEOUT):
        """Waits for remora to exit; returns (rc, stdout, stderr). Fail if it does not
        exit within timeout seconds (it is killed), dies of a signal or a sanitizer speaks."""
        deadline = time.monotonic() + timeout
        while self._read(max(0.0, min(0.1, deadline - time.monotonic()))):
            if self.proc.poll() is not None and not select.select([self.master], [], [], 0)[0]:
                break
            if time.monotonic() > deadline:
                self.kill()
                raise Fail("`remora %s` still running %.0fs later (killed)"
                           % (" ".join(self.args[1:]), timeout))
        try:
            rc = self.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.kill()
            raise Fail("`remora %s` still running %.0fs later (killed)"
                       % (" ".join(self.args[1:]), timeout))
        self.stdout.seek(0)
        out = self.stdout.read().decode("utf-8", "replace")
        # the status line is rewritten in place ("\r...") and erased ("\r\033[K") at the end
        err = "\n".join(l.split("\r")[-1].replace("\033[K", "")
                        for l in self.text().split("\n"))
        self.remora.judge(self.args, rc, out, err)
        return rc, out, err

    def kill(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def close(self):
        self.kill()
        os.close(self.master)
        self.stdout.close()


def workdir():
    """A fresh temporary directory; the caller removes it."""
    return tempfile.mkdtemp(prefix="remora-rec-")


def more_seconds(have, need, spent, most):
    """How long to record again when `spent` seconds gave `have` of the `need` samples (a
    busy machine, a sanitizer build): sized from the rate achieved (100 a second at
    least), with half again as margin, 1 s at least, `most` seconds in all at most."""
    per_s = max(100.0, have / max(spent, 0.1))
    return min(most - spent, max(1.0, round(1.5 * (need - have) / per_s, 1)))


def record_collapsed(remora, t, args, asked_hz, truth_name):
    """Records the running target t (`record -p PID ARGS --stats`) into a collapsed file,
    ends it, and reads the JSON file it wrote at exit next to its ready file. Returns
    (stderr, Summary, stacks, that JSON)."""
    import formats          # not at the top: formats imports this module (Fail)
    path = os.path.join(t.dir, "recorded.collapsed")
    _, err = record(remora, ["-p", t.pid] + list(args) + ["--stats", "-o", path])
    summ = summary(err, asked_hz)
    stacks = formats.parse_collapsed(path)
    rc = t.finish()
    if rc != 0:
        raise Fail("target exited %d: %s" % (rc, t.log_tail()))
    with open(os.path.join(t.dir, truth_name)) as f:
        return err, summ, stacks, json.load(f)


def odd_recording(remora, interp, outputs):
    """Records odd_names.py for SHORT_SECONDS into files named outputs (in a fresh directory,
    returned with the target's ready info); the caller removes the directory."""
    d = workdir()
    try:
        with Target(interp, os.path.join(TARGETS, "odd_names.py"), "ready.json") as t:
            ready = t.wait_ready()
            args = ["-p", t.pid, "-d", SHORT_SECONDS, "--idle"]    # its parked thread too
            for name in outputs:
                args += ["-o", os.path.join(d, name)]
            _, err = record(remora, args)
            summary(err, 1000)
    except BaseException:
        shutil.rmtree(d, ignore_errors=True)
        raise
    return d, ready


def check_odd_names(stacks, ready):
    """The odd thread and function must come back exactly, once unescaped."""
    names = {s.name for s in stacks if s.tid == ready["odd"]}
    if names != {ready["thread_name"]}:
        raise Fail("thread %d is named %r in the collapsed file, want %r"
                   % (ready["odd"], sorted(names), ready["thread_name"]))
    want = (ready["function"], ready["file"])
    if not any(f[:2] == want for s in stacks for f in s.frames):
        seen = sorted({f[:2] for s in stacks if s.tid == ready["odd"] for f in s.frames})
        raise Fail("no frame %r in the collapsed file; thread %d has %r"
                   % (want, ready["odd"], seen[-3:]))


# --- a target's source as ground truth (tests/targets/chaos_*.py) ------------------------

class Source:
    """A target script's functions (line spans) and calls: calls[(caller, callee)] is the
    set of lines of the plain calls caller makes to callee (every line of a multi-line
    call); '<module>' is the module body."""

    def __init__(self, script):
        with open(script, encoding="utf-8") as f:
            text = f.read()
        tree = ast.parse(text)
        self.base = os.path.basename(script)
        self.spans = {"<module>": (1, len(text.splitlines()))}
        self.calls = collections.defaultdict(set)
        self.imports = set()             # lines of the module's own import statements
        for node in tree.body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                self.imports.add(node.lineno)
            if isinstance(node, ast.FunctionDef):
                self.spans[node.name] = (node.lineno, node.end_lineno)
                self._calls(node.name, node)
            elif not isinstance(node, ast.ClassDef):
                self._calls("<module>", node)

    def _calls(self, caller, node):
        for n in ast.walk(node):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
                self.calls[(caller, n.func.id)].update(range(n.lineno, n.end_lineno + 1))


class Role:
    """What one thread of a target may show.
    roots: functions of the script that may be its outermost own frame;
    lead: file names whose frames may come before the script's (a threading.Thread's
          bootstrap: then the outermost frame must be _bootstrap);
    trail: file names whose frames may come after (innermost) the script's; "any": any
           file (a launched command, sampled while it writes its files at the start or end);
    alone: outermost functions of a stack made only of `lead`/`trail` files (e.g. the
           interpreter's threading._shutdown at exit); "any": a stack without a frame of
           the script may be anything (a launched command's main thread, while the
           interpreter starts: site, .pth files, importlib);
    imports: whether `<module>` on one of its import lines may have any frames inside
           (importlib and the imported module's; only a launched command is sampled
           that early);
    empty: whether the thread may have no frame at all (being born or torn down);
    forbidden: functions of the script this thread never runs;
    most: {function: most frames of it in one stack}."""

    def __init__(self, name, roots, lead=(), trail=(), alone=(), empty=False, forbidden=(),
                 most=None, imports=False):
        self.name, self.roots, self.lead, self.trail = name, set(roots), set(lead), set(trail)
        self.imports = imports
        self.alone, self.empty, self.forbidden = set(alone), empty, set(forbidden)
        self.most = most or {}


def bare(function):
    return function.rsplit(".", 1)[-1]


def judge_stack(frames, role, src):
    """None if a thread in `role` can have this stack (outermost first, as parsed from
    collapsed output), else what is wrong with it."""
    fr = list(frames)
    if fr and fr[-1][0] == "<GC>" and fr[-1][1] is None:
        fr = fr[:-1]
    if fr and fr[-1][0] == "<moving>" and fr[-1][1] is None:
        # a partial stack: the outer frames known, judged as the stack they begin
        fr = fr[:-1]
        if not fr:
            return None     # nothing known (the stack moved each time it was read): no claim
    if not fr:
        return None if role.empty else "an empty stack"
    for f in fr:
        if f[1] is None:
            return "frame %r has no file" % f[0]
    mine = [os.path.basename(f[1]) == src.base for f in fr]
    i = 0
    while i < len(fr) and not mine[i]:
        i += 1
    j = i
    while j < len(fr) and mine[j]:
        j += 1
    lead, own, trail = fr[:i], fr[i:j], fr[j:]
    if any(mine[j:]):
        return "the script's frames are interrupted by another file's"
    if not own:
        if role.alone == {"any"}:
            return None
        files = {os.path.basename(f[1]) for f in fr}
        if files - (role.lead | role.trail):
            return "frames of %s only" % ", ".join(sorted(files))
        if bare(fr[0][0]) not in role.alone and not (role.lead and bare(fr[0][0]) == "_bootstrap"):
            return "no frame of the script, and %s is outermost" % fr[0][0]
        return None
    if lead:
        files = {os.path.basename(f[1]) for f in lead}
        if files - role.lead:
            return "frames of %s before the script's" % ", ".join(sorted(files - role.lead))
        if bare(lead[0][0]) != "_bootstrap":
            return "%s is outermost, not threading's _bootstrap" % lead[0][0]
    if role.imports and not lead and [f[0] for f in own] == ["<module>"] and own[0][2] in src.imports:
        return None
    files = {os.path.basename(f[1]) for f in trail}
    if files - role.trail and role.trail != {"any"}:
        return "frames of %s inside the script's" % ", ".join(sorted(files - role.trail))
    if own[0][0] not in role.roots:
        return "%s is the script's outermost frame, want %s" % (own[0][0], " or ".join(sorted(role.roots)))
    counts = collections.Counter(f[0] for f in own)
    for fn, n in counts.items():
        if fn not in src.spans:
            return "%s is not a function of %s" % (fn, src.base)
        if fn in role.forbidden:
            return "%s, which this thread never runs" % fn
        if fn in role.most and n > role.most[fn]:
            return "%d frames of %s, at most %d are possible" % (n, fn, role.most[fn])
    for a, b in zip(own, own[1:]):
        lines = src.calls.get((a[0], b[0]))
        if not lines:
            return "%s -> %s: %s never calls %s" % (a[0], b[0], a[0], b[0])
        if a[2] not in lines:
            return "%s at line %d calls %s, which it does only on line %s" % (
                a[0], a[2], b[0], ", ".join(map(str, sorted(lines))))
    lo, hi = src.spans[own[-1][0]]
    # -1: an instruction with no line (CPython says None there too); 0: seen for a
    # module body finishing on 3.12
    if not lo <= own[-1][2] <= hi and not (not trail and (own[-1][2] == -1 or (
            own[-1][2] == 0 and own[-1][0] == "<module>"))):
        return "innermost %s at line %d, outside its lines %d-%d" % (own[-1][0], own[-1][2], lo, hi)
    return None


def judge_profile(stacks, roles, src, foreign=None, default=None):
    """Fail unless every stack fits the role of its thread. roles: {tid: [Role, ...]} (a
    tid reused by the kernel may have had more than one role); other tids get the roles
    in default, if given; foreign(tid) may name what an unexpected tid is (e.g. "a
    forked child"). Returns a Counter of samples by role name."""
    bad, examples, by_role = collections.Counter(), [], collections.Counter()
    for s in stacks:
        rs = roles.get(s.tid) or default
        if not rs:
            what = (foreign(s.tid) if foreign else None) or "a thread the target never had"
            why = "thread %d: %s" % (s.tid, what)
        else:
            whys = [judge_stack(s.frames, r, src) for r in rs]
            why = None if None in whys else "%s thread %d: %s" % (rs[0].name, s.tid, whys[0])
            if why is None:
                by_role[rs[whys.index(None)].name] += s.count
        if why:
            bad[why.split(":")[0]] += s.count
            if len(examples) < 3:
                examples.append("%s x%d [%s]" % (why, s.count, ";".join(
                    "%s:%s" % (f[0], f[2]) for f in s.frames)[-300:]))
    if bad:
        raise Fail("%d samples show stacks the target cannot have: %s" % (
            sum(bad.values()), " | ".join(examples)))
    return by_role


# chaos_recurse.py: two threads, main and the diver, recursing in dive()

def recurse_roles(ready):
    most = {"dive": ready["depth"] + 1}
    return {ready["main"]: [Role("main", ["<module>"], most=most)],
            ready["diver"]: [Role("diver", ["diver"], most=most)]}


def depth_note(stacks):
    """Samples with at least 400 dive frames, and with 1 to 99."""
    depths = [(sum(1 for f in s.frames if f[0] == "dive"), s.count) for s in stacks]
    return (sum(c for n, c in depths if n >= 400), sum(c for n, c in depths if 0 < n < 100))


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


# --- the alternate.py target (a->b->c, x->y->z): the stacks it can have -----------

CHAINS = (("a", "b", "c"), ("x", "y", "z"))
BASE = ["<module>", "main", "alternate"]


MOVING = "<moving>"


# A known defect of the user-space engine, not yet fixed (docs/how-it-reads.md, "Two copies
# torn alike"): on 3.12+
# when the machine reads slowly, about 1 to 4 samples in 100,000 of alternate.py are a
# caller of one chain under a callee of the other (`a;y`, `x;b`): both copies of the chunk
# torn the same way as the target moved from one chain to the other while they were read.
# Seen on the landed 05f0822 too. Such samples ("mixes the chains" only, never any other
# kind) are tolerated up to one in TORN_TOLERATED samples and always named in the PASS
# line; any other wrong stack, or more of them, fails. 1 in 10,000: a fresh-machine run
# (2026-12-02, 30 us of CPU per sample, 60-88% of samples partial) saw 1, 3 and 5 in
# about 120,000 on three interpreters; at 4 in 100,000 a run of 120,000 goes past 12 in
# under 1% of runs, past the former 1 in 25,000 (4.8) in about a third.
# The kernel engine reads a running thread while it cannot move: no tolerance there
# (issue 29), whatever share of its rounds went to user space.
TORN_TOLERATED = 10000


def torn_verdict(bad, examples, samples, engine):
    """(problem or None, note or "") for a recording's torn samples (bad: Counter by kind),
    recorded with the engine the summary named."""
    if not bad:
        return None, ""
    mixed = bad.get("mixes the chains", 0)
    if engine == "user" and mixed == sum(bad.values()) and mixed <= samples // TORN_TOLERATED:
        return None, ("KNOWN DEFECT: %d of %d samples mix the chains (two copies torn alike; "
                      "tolerated: 1 in %d), e.g. %s" % (mixed, samples, TORN_TOLERATED,
                                                        " | ".join(examples)))
    return ("%d torn or wrong samples (%s); e.g. %s" % (
        sum(bad.values()), ", ".join("%s: %d" % kv for kv in bad.items()), " | ".join(examples))), ""


def torn_kind(functions):
    """None if functions is a stack the alternate.py target can have, else what is wrong.
    A partial stack (its innermost frames moved while read) is one such stack's outer
    frames, then <moving>: judged as that prefix."""
    if functions and functions[-1] == "<GC>":
        functions = functions[:-1]
    if functions and functions[-1] == MOVING:
        # <module> and main never move (main sits in its call of alternate): a partial
        # stack keeps them at least
        functions = functions[:-1]
        if len(functions) < 3:
            # the marker alone: nothing of the stack known, nothing claimed
            return None if functions in ([], BASE[:2]) else "a partial stack without its root"
    chain_names = set(CHAINS[0]) | set(CHAINS[1])
    inner = [f for f in functions if f in chain_names]
    used = [i for i, ch in enumerate(CHAINS) if set(inner) & set(ch)]
    if len(used) > 1:
        return "mixes the chains"
    if functions[:3] != BASE:
        return "does not start with <module>;main;alternate"
    rest = functions[3:]
    if not rest:
        return None
    chain = CHAINS[used[0]] if used else None
    if chain is None or rest != list(chain[:len(rest)]):
        return "chain out of order or foreign frames" if chain else "foreign frames"
    return None


# --- a dump against a target's truth -----------------------------------------------------

def version_matches(reported, truth):
    """remora's "python" must be the target's version; a pre-release tag may be omitted."""
    if reported == truth:
        return True
    m = re.match(r"\d+\.\d+\.\d+", truth)
    return m is not None and reported == m.group(0)


def simple_frames(frames):
    """A dump's frames with only function, file and line, as a target's truth has them."""
    return [{"function": f.get("function"), "file": f.get("file"), "line": f.get("line")}
            for f in frames]


def frame_line(i, f):
    return "#%-3d %s (%s:%s)" % (i, f.get("function"), f.get("file"), f.get("line"))


def dump_threads_problems(doc, truth, pid):
    """(problems, {tid: dumped thread}, {tid: truth's thread}) of a dump against a
    known_stacks.py truth: its pid and python version, threads missing or unexpected."""
    problems = []
    if doc.get("pid") != pid:
        problems.append("pid is %r, want %d" % (doc.get("pid"), pid))
    if not version_matches(str(doc.get("python")), truth["python"]):
        problems.append("python is %r, want %r" % (doc.get("python"), truth["python"]))
    got = {th.get("native_id"): th for th in doc["threads"]}
    want = {th["native_id"]: th for th in truth["threads"]}
    missing, extra = sorted(set(want) - set(got)), sorted(set(got) - set(want), key=str)
    if missing:
        problems.append("threads missing: %s" % ", ".join(
            "%d (%s)" % (n, want[n]["name"]) for n in missing))
    if extra:
        problems.append("unexpected threads: %s" % ", ".join(map(str, extra)))
    return problems, got, want


def dump_frames_problems(got, truth, lost_stacks=False):
    """(problems, diff lines of the first thread whose frames differ, or None): each
    truth thread's `main` flag and frames, exactly. With lost_stacks, a worker thread
    may instead report an error and no frames."""
    problems, diff, differing = [], None, []
    for th in truth["threads"]:
        g = got.get(th["native_id"])
        if g is None:
            continue
        label = "%d (%s)" % (th["native_id"], th["name"])
        if g.get("main") is not th["main"]:
            problems.append("thread %s: main is %r, want %r" % (label, g.get("main"), th["main"]))
        if lost_stacks and not th["main"] and g.get("error") and not g.get("frames"):
            continue
        if simple_frames(g.get("frames", [])) != th["frames"]:
            differing.append(label)
            if diff is None:
                diff = ["thread %s: %d frames in truth, %d from remora"
                        % (label, len(th["frames"]), len(g.get("frames", [])))]
                diff += thread_diff(th, g)
    if differing:
        problems.append("frames differ in thread%s %s" % (
            "s" if len(differing) > 1 else "", ", ".join(differing)))
    return problems, diff


def thread_diff(t_truth, t_got):
    a = [frame_line(i, f) for i, f in enumerate(t_truth["frames"])]
    b = [frame_line(i, f) for i, f in enumerate(t_got.get("frames", []))]
    diff = list(difflib.unified_diff(a, b, "truth", "remora", lineterm="", n=2))
    if len(diff) > 40:
        diff = diff[:40] + ["... (%d more diff lines)" % (len(diff) - 40)]
    return diff


# --- node tools: speedscope's schema (tests/speedscope), the Firefox Profiler (tests/firefox)

def npm_ci(directory, needed):
    """Installs the npm packages of directory (`npm ci`); None if `needed` (a path among
    them) is there after, else why not."""
    rel = os.path.relpath(directory, REPO)
    npm = shutil.which("npm")
    if npm is None:
        return "%s/node_modules missing and npm not installed" % rel
    p = subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=directory,
                       stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=300)
    if p.returncode != 0 or not os.path.exists(needed):
        return "`npm ci` in %s failed: %s" % (rel, tail(p.stdout.decode("utf-8", "replace")))
    return None


SPEEDSCOPE_DIR = os.path.join(REPO, "tests", "speedscope")
_validator = {}


def speedscope_validator():
    """The command that validates speedscope files, installing tests/speedscope's packages
    (`npm ci`) if they are missing; Skip when that cannot be done."""
    if "cmd" in _validator:
        return _validator["cmd"]
    if "skip" in _validator:
        raise Skip(_validator["skip"])
    node = shutil.which("node")
    validate = os.path.join(SPEEDSCOPE_DIR, "validate.js")
    schema = os.path.join(SPEEDSCOPE_DIR, "node_modules", "speedscope", "dist", "release",
                          "file-format-schema.json")
    reason = None
    if node is None:
        reason = "node not installed (apt-get install nodejs npm)"
    elif not (os.path.exists(schema) and
              os.path.isdir(os.path.join(SPEEDSCOPE_DIR, "node_modules", "ajv"))):
        reason = npm_ci(SPEEDSCOPE_DIR, schema)
    if reason:
        _validator["skip"] = reason
        raise Skip(reason)
    _validator["cmd"] = [node, validate]
    return _validator["cmd"]
