# Running remora in the functional tests: one run (a hang, a signal or a sanitizer report
# always fails), one that must fail with one line, a recording in the foreground and one in
# the background with its status line on a pseudo-terminal, the summary and --stats lines,
# temp dirs, and a command on a pseudo-terminal of its own (`remora top`). Standard
# library only.

import fcntl
import json
import os
import pty
import re
import select
import shutil
import signal
import struct
import subprocess
import tempfile
import termios
import time

from common import TARGETS, Fail, one_line, tail
from formats import parse_collapsed
from targets import Target

SANITIZER_MARKS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
                   "UndefinedBehaviorSanitizer", "ThreadSanitizer")


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


def expect_failure(remora, args, want_rc, what, prefix=(), binary=None):
    rc, out, err = remora.run(args, prefix=prefix, binary=binary)
    if rc != want_rc:
        raise Fail("%s: exit %d, want %d; stderr: %s" % (what, rc, want_rc, tail(err)))
    bad = one_line(err)
    if bad:
        raise Fail("%s: %s" % (what, bad))
    return err


# --- recordings ------------------------------------------------------------------------

SHORT_SECONDS = 0.5            # recordings that only need some samples
SAMPLED_BEFORE_SIGNAL = 100    # rounds remora reports on its status line before we signal
STOP_TIMEOUT = 10.0            # seconds remora may take to end after a signal / target death

# the counts' words (docs/cli.md, "Counts"); errors and partial as shares of written
SUMMARY = re.compile(r"^remora: (?P<rounds>\d+) rounds? taken of (?P<asked_rounds>\d+) asked in "
                     r"(?P<seconds>[0-9.]+) s \((?P<hz>\d+) Hz of (?P<asked>\d+) Hz asked\), "
                     r"(?P<written>\d+) thread samples? written, (?P<idle>\d+) left out as idle "
                     r"\((?P<idle_kept>--idle|--idle keeps them)\), "
                     r"(?P<errors>\d+) errors? \((?P<error_pct>[0-9.]+)%\), (?P<partial>\d+) partial "
                     r"\((?P<partial_pct>[0-9.]+)%\), (?P<late>\d+) late"
                     r", engine (?P<engine>kernel|user)(?P<exited>; the target exited)?$", re.M)
# the documented fields, in order; later fields (key=number) may follow. Groups: rounds,
# errors, partial, reads, bytes, reads_per_round, cpu_us_per_round, the rest
STATS = re.compile(r"^stats: rounds=(\d+) rounds_asked=(?:\d+) thread_samples=(?:\d+) idle=(?:\d+) "
                   r"errors=(\d+) partial=(\d+) reads=(\d+) bytes=(\d+) "
                   r"reads_per_round=([0-9.]+) cpu_us_per_round=([0-9.]+)"
                   r"((?: \w+=[0-9.]+)*)$", re.M)
STATS_COUNTS = re.compile(r"^stats: rounds=(?P<rounds>\d+) rounds_asked=(?P<asked_rounds>\d+) "
                          r"thread_samples=(?P<written>\d+) idle=(?P<idle>\d+) "
                          r"errors=(?P<errors>\d+) partial=(?P<partial>\d+) ", re.M)
STATUS = re.compile(r"remora: (\d+) rounds?, ")


class Summary:
    """The summary line. 'samples' is the rounds taken (the name older tests use)."""

    def __init__(self, m):
        g = m.groupdict()
        self.samples = self.rounds = int(g["rounds"])
        self.asked_rounds, self.written, self.idle = (int(g["asked_rounds"]), int(g["written"]),
                                                      int(g["idle"]))
        self.idle_kept = g["idle_kept"] == "--idle"
        self.errors, self.late = int(g["errors"]), int(g["late"])
        self.seconds, self.hz, self.asked = float(g["seconds"]), int(g["hz"]), int(g["asked"])
        self.error_pct = float(g["error_pct"])
        self.partial, self.partial_pct = int(g["partial"]), float(g["partial_pct"])
        self.engine = g["engine"]
        self.exited = g["exited"] is not None

    def __str__(self):
        return ("%d rounds in %.2f s (%d Hz), %d thread samples written, %d idle, %d errors "
                "(%.2f%%), %d partial (%.2f%%), %d late, engine %s"
                % (self.rounds, self.seconds, self.hz, self.written, self.idle, self.errors,
                   self.error_pct, self.partial, self.partial_pct, self.late, self.engine))


def summary(err, asked=None):
    """The summary line of a recording's stderr; Fail if it is missing or malformed."""
    found = SUMMARY.findall(err)
    if len(found) != 1:
        raise Fail("want one summary line `remora: N rounds taken of A asked in D s (...)` on "
                   "stderr, found %d: %s" % (len(found), tail(err)))
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
    path = os.path.join(t.dir, "recorded.collapsed")
    _, err = record(remora, ["-p", t.pid] + list(args) + ["--stats", "-o", path])
    summ = summary(err, asked_hz)
    stacks = parse_collapsed(path)
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


# --- a command on a pseudo-terminal (`remora top`) --------------------------------------

TTY_TIMEOUT = 30.0


def spawn_on_pty(argv, rows, cols):
    """argv started on a new rows x cols pseudo-terminal (TERM=xterm): (pid, master fd)."""
    pid, fd = pty.fork()
    if pid == 0:
        os.environ["TERM"] = "xterm"
        try:
            os.execvp(argv[0], argv)
        finally:
            os._exit(127)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    return pid, fd


def pty_drive(argv, rows, cols, react, timeout=TTY_TIMEOUT):
    """Runs argv on a rows x cols pseudo-terminal until it exits, calling react(text so far)
    after each read and writing the bytes it returns (None: nothing); Fail after timeout s,
    saying react's 'where' attribute if it has one. Returns (everything read, exit code)."""
    pid, fd = spawn_on_pty(argv, rows, cols)
    buf, status = b"", None
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            r, _, _ = select.select([fd], [], [], 0.05)
            if r:
                try:
                    data = os.read(fd, 65536)
                except OSError:             # EIO: the other side closed
                    data = b""
                if not data:
                    break
                buf += data
            keys = react(buf.decode("utf-8", "replace"))
            if keys:
                os.write(fd, keys)
        else:
            raise Fail("no exit %.0fs into the session (%s): %r" % (
                timeout, getattr(react, "where", "?"), buf[-400:]))
        _, status = os.waitpid(pid, 0)
        pid = 0
    finally:
        if pid:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        os.close(fd)
    return buf.decode("utf-8", "replace"), os.waitstatus_to_exitcode(status)


def pty_session(argv, rows, cols, done, timeout=TTY_TIMEOUT):
    """Runs argv on a rows x cols pseudo-terminal until done(text so far) says the key to
    send (then sends it and waits for the exit); returns (everything read, exit code)."""
    sent = []

    def react(text):
        if not sent and done(text):
            sent.append(1)
            return b"q"
        return None
    react.where = "q not sent yet"
    return pty_drive(argv, rows, cols, react, timeout)
