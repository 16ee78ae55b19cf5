# Functional tests of `remora top`, against the ground truth the targets write about
# themselves (run by run.py):
#
#   top/batch/INTERP   stdout not a terminal: one table a second, then the whole run's.
#                      known_stacks.py parks seven threads at known stacks; in wall mode
#                      each thread is in its innermost function all the time, so every
#                      table must give each function %Own = 100 x the threads it is
#                      innermost in, and %Total = 100 x the threads it is anywhere in
#                      (margin: TOP_MARGIN points per thread), and name no other function.
#   top/tty            on a pseudo-terminal: the alternate screen is taken and given back,
#                      the live frame names every parked function, key 2 sorts by %Total,
#                      q quits (exit 0), the terminal's modes are restored, and the whole
#                      run's table is printed after the screen is given back.
#   top/narrow         on an 80-column pseudo-terminal, deep_path.py's functions in a file
#                      at the end of a 160-character path: every row of the live frame fits
#                      in 80 columns and ends with ":LINE)"; each deep function's row shows
#                      its name whole and its path's end after "…" (the file's name whole);
#                      the parked one's names the line the target says it waits on.
#   top/launch         `top -- CMD`: a command that spins in one function and exits 3:
#                      top exits 3 and the whole run's table names that function.
#   top/errors         bad flags and targets: one line and the documented exit code.

import os
import re
import select
import signal
import subprocess
import termios
import time

from harness import (INTERPRETERS, TARGETS, TTY_TIMEOUT, Fail, Target, expect_failure, free_pid,
                     interp_command, interp_missing, interpreter, pty_drive, pty_session,
                     spawn_on_pty, tail)
from formats import CSI, frame_of, parse_top_tables

ORDER = 160           # where run.py runs these tests among the modules' (ascending)

TOP_MARGIN = 5.0            # percentage points per thread; parked threads read with no errors
TOP_SECONDS = 2.5           # two live tables, then the whole run's
TTY_ROWS, TTY_COLS = 50, 200     # room for every row and name of known_stacks.py


def truth_shares(truth):
    """{(function, file): (threads it is innermost in, threads it is anywhere in)}."""
    want = {}
    for th in truth["threads"]:
        frames = [(f["function"], f["file"]) for f in th["frames"]]
        for key in set(frames):
            own, total = want.get(key, (0, 0))
            want[key] = (own + (1 if frames and frames[0] == key else 0), total + 1)
    return want


def judge_table(rows, want, what):
    problems = []
    for key, (own_n, total_n) in sorted(want.items()):
        got = rows.get(key)
        if got is None:
            problems.append("%s (%s) missing" % key)
            continue
        for name, n, g in (("%Own", own_n, got[0]), ("%Total", total_n, got[1])):
            if abs(g - 100.0 * n) > TOP_MARGIN * max(n, 1):
                problems.append("%s (%s): %s %.2f, want %d" % (key[0], key[1], name, g, 100 * n))
    extra = [k for k in rows if k not in want and k[0] != "<GC>"]
    if extra:
        problems.append("functions the target is not in: %s" % ", ".join("%s (%s)" % k for k in extra))
    if problems:
        raise Fail("%s: %s" % (what, "; ".join(problems[:6])))


def known_target(interp):
    return Target(interp, os.path.join(TARGETS, "known_stacks.py"), "truth.json")


def test_batch(remora, interp):
    with known_target(interp) as t:
        truth = t.wait_ready()
        t.wait_main_in_read()
        rc, out, err = remora.run(["top", "-p", t.pid, "-d", TOP_SECONDS, "-l", 100, "--idle"])
        if rc != 0:
            raise Fail("`remora top -d %s` exited %d: %s" % (TOP_SECONDS, rc, tail(err)))
        tables = parse_top_tables(out)
        if len(tables) < 2 or "whole run" not in (tables[-1][0] or ""):
            raise Fail("want live tables then the whole run's, got %d tables: %s"
                       % (len(tables), tail(out)))
        want = truth_shares(truth)
        for i, (title, rows) in enumerate(tables):
            judge_table(rows, want, "table %d (%s)" % (i + 1, title))
        # the whole run: a thread's innermost function ran for all of it
        whole = tables[-1][1]
        key = next(k for k, (own, _) in want.items() if own == 1)
        secs = whole[key][2]
        if not TOP_SECONDS * 0.8 <= secs <= TOP_SECONDS * 1.2:
            raise Fail("%s (%s): OwnTime %.2fs over a %.1fs run" % (key[0], key[1], secs, TOP_SECONDS))
    return "%d tables, %d functions" % (len(tables), len(want))


def test_tty(remora, interp):
    with known_target(interp) as t:
        truth = t.wait_ready()
        t.wait_main_in_read()
        want = truth_shares(truth)
        leaves = [k[0] for k, (own, _) in want.items() if own > 0]
        pid, fd = spawn_on_pty(remora.argv(["top", "-p", t.pid, "-l", 100, "--idle"]), TTY_ROWS, TTY_COLS)
        before = termios.tcgetattr(fd)
        buf, sent, status = b"", 0, None
        deadline = time.monotonic() + TTY_TIMEOUT
        try:
            while time.monotonic() < deadline:
                r, _, _ = select.select([fd], [], [], 0.05)
                if r:
                    try:
                        data = os.read(fd, 65536)
                    except OSError:         # EIO: the other side closed
                        data = b""
                    if not data:
                        break
                    buf += data
                frames = buf.decode("utf-8", "replace").split("\x1b[H")
                live = frames[-1] if len(frames) > 2 else ""
                if sent == 0 and all(n in live for n in leaves) and "last second" in live:
                    os.write(fd, b"2")      # sort by %Total
                    sent = 1
                elif sent == 1 and "sorted by %Total" in live:
                    during = termios.tcgetattr(fd)
                    os.write(fd, b"q")
                    sent = 2
            else:
                raise Fail("no exit %.0fs into the session (keys sent: %d): %r"
                           % (TTY_TIMEOUT, sent, buf[-300:]))
            _, status = os.waitpid(pid, 0)
            pid = 0
        finally:
            if pid:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
        after = termios.tcgetattr(fd)
        os.close(fd)
    text = buf.decode("utf-8", "replace")
    code = os.waitstatus_to_exitcode(status)
    if sent < 2:
        raise Fail("the live frame never showed every parked function%s: %r"
                   % (" sorted by %Total" if sent == 1 else "", text[-400:]))
    if code != 0:
        raise Fail("exit %d after q, want 0: %r" % (code, text[-300:]))
    if "\x1b[?1049h" not in text or "\x1b[?1049l" not in text:
        raise Fail("the alternate screen was not taken and given back")
    lflag = termios.ICANON | termios.ECHO
    if during[3] & lflag:
        raise Fail("keys were read with the terminal still in line mode")
    if (after[3] & lflag) != (before[3] & lflag):
        raise Fail("the terminal's modes were not restored: lflag %#x, was %#x" % (after[3], before[3]))
    final = parse_top_tables(text[text.rindex("\x1b[?1049l"):])
    if len(final) != 1 or "whole run, sorted by %Total" not in (final[0][0] or ""):
        raise Fail("after the screen was given back: %d tables, want the whole run's sorted by "
                   "%%Total: %r" % (len(final), text[text.rindex("\x1b[?1049l"):][:300]))
    judge_table(final[0][1], want, "the whole run's table")
    totals = [v[1] for v in final[0][1].values()]
    if totals != sorted(totals, reverse=True):
        raise Fail("the whole run's table is not sorted by %%Total: %s" % totals)
    return "%d bytes drawn, %d functions in the final table" % (len(buf), len(final[0][1]))


NARROW_ROWS, NARROW_COLS = 24, 80
ELLIPSIS = "\u2026"
SCREEN_ROW = re.compile(r"^\s*[\d.]+%\s+[\d.]+%\s+[\d.]+s\s+[\d.]+s  (.*)$")


def live_frame(text):
    """The lines of the last whole frame drawn on the screen (between two cursor homes),
    control sequences dropped."""
    frames = text.split("\x1b[H")
    if len(frames) < 3:
        return []
    return [CSI.sub("", l).rstrip("\r") for l in frames[-2].split("\n")]


def test_narrow(remora, interp):
    with Target(interp, os.path.join(TARGETS, "deep_path.py"), "truth.json") as t:
        truth = t.wait_ready()
        t.wait_main_in_read()
        leaf = os.path.basename(truth["file"])
        want = "%s:%d)" % (leaf, truth["wait_line"])

        def ready(text):
            lines = live_frame(text)
            return any("deep_wait" in l for l in lines) and any("deep_spin" in l for l in lines)

        text, code = pty_session(remora.argv(["top", "-p", t.pid, "--idle"]), NARROW_ROWS,
                                 NARROW_COLS, ready)
    if code != 0:
        raise Fail("exit %d after q, want 0: %r" % (code, text[-300:]))
    frame = live_frame(text[:text.rindex("\x1b[?1049l")])
    rows = [m.group(1) for m in map(SCREEN_ROW.match, frame) if m]
    problems = []
    for line in frame:
        if len(line) > NARROW_COLS:
            problems.append("a line of %d columns: %r" % (len(line), line))
    for fn in ("deep_wait", "deep_spin"):
        mine = [r for r in rows if r.startswith(fn + " (")]
        if not mine:
            problems.append("no row of %s in the live frame: %r" % (fn, rows))
            continue
        row = mine[0]
        shown = row[len(fn) + 2:row.rindex(":") if ":" in row else len(row)]
        if not shown.startswith(ELLIPSIS) or not truth["file"].endswith(shown[1:]) \
                or not shown.endswith(leaf):
            problems.append("%s's row shows the file as %r: want the end of %s, its name "
                            "whole, after %r" % (fn, shown, truth["file"], ELLIPSIS))
        if not re.search(r":\d+\)$", row):
            problems.append("%s's row lost its line: %r" % (fn, row))
        if fn == "deep_wait" and not row.endswith(want):
            problems.append("deep_wait's row is %r, want it to end %r" % (row, want))
    for row in rows:
        if "(" in row and not re.search(r":\d+\)$", row):
            problems.append("a row without its line: %r" % row)
    if problems:
        raise Fail("; ".join(problems[:6]))
    return "%d rows in 80 columns, e.g. %r" % (len(rows), next(r for r in rows if r.startswith("deep_wait")))


SPIN_EXIT = """
import sys, time
def spin_here(end):
    n = 0
    while time.monotonic() < end:
        n += 1
    return n
spin_here(time.monotonic() + 1.5)
sys.exit(3)
"""


def test_launch(remora, interp):
    cmd = interp_command(interp, ["-I", "-c", SPIN_EXIT])
    rc, out, err = remora.run(["top", "-l", 50, "--"] + cmd)
    if rc != 3:
        raise Fail("exit %d, want the command's 3: %s" % (rc, tail(err)))
    tables = parse_top_tables(out)
    if not tables or "whole run" not in (tables[-1][0] or ""):
        raise Fail("no whole-run table on stdout: %s" % tail(out))
    got = tables[-1][1].get(("spin_here", "<string>"))
    if got is None or got[0] < 80.0:
        raise Fail("spin_here (<string>) has %s in the whole run, want %%Own >= 80: %s"
                   % ("no row" if got is None else "%%Own %.2f" % got[0], tail(out, 8)))
    if "exited" not in err:
        raise Fail("stderr does not say the target exited: %s" % tail(err))
    return "spin_here %%Own %.1f, exit 3" % got[0]


def test_errors(remora):
    expect_failure(remora, ["top"], 1, "`remora top` without a target")
    expect_failure(remora, ["top", "-p", "notapid"], 1, "`remora top -p notapid`")
    expect_failure(remora, ["top", "-p", "1", "--bogus"], 1, "`remora top --bogus`")
    expect_failure(remora, ["top", "-p", "1", "-d", "0"], 1, "`remora top -d 0`")
    expect_failure(remora, ["top", "-p", "1", "--mode", "idle"], 1, "`remora top --mode idle`")
    pid = free_pid()
    expect_failure(remora, ["top", "-p", pid], 2, "`remora top` of pid %d (no such process)" % pid)
    expect_failure(remora, ["top", "--", "/nonexistent/python"], 2, "`remora top -- /nonexistent/python`")
    sleeper = subprocess.Popen(["sleep", "100"])
    try:
        expect_failure(remora, ["top", "-p", sleeper.pid], 4, "`remora top` of `sleep 100`")
    finally:
        sleeper.kill()
        sleeper.wait()


TTY_INTERP = "pyenv-3.12.1"     # the terminal layer does not depend on the version


def tests(remora):
    """[(name, function, skip reason or None)] for run.py."""
    tty = interpreter(TTY_INTERP)
    return [("top/batch/%s" % interp[0], lambda i=interp: test_batch(remora, i), interp_missing(interp))
            for interp in INTERPRETERS] + [
        ("top/tty", lambda: test_tty(remora, tty), interp_missing(tty)),
        ("top/narrow", lambda: test_narrow(remora, tty), interp_missing(tty)),
        ("top/launch", lambda: test_launch(remora, tty), interp_missing(tty)),
        ("top/errors", lambda: test_errors(remora), None),
    ] + [("top/keys/%s" % interp[0], lambda i=interp: test_keys(remora, i), interp_missing(interp))
         for interp in INTERPRETERS]


# --- keys -------------------------------------------------------------------------------

KEYS_ROWS, KEYS_COLS = 60, 220
PAUSE_WATCH = 2.2           # seconds watched for a redraw while paused (two refreshes' time)


def frame_rows(lines):
    """[(row text after the numbers, OwnTime, TotalTime)] of a frame's table rows."""
    out = []
    for l in lines:
        m = ROW_NUMS.match(l)
        if m:
            out.append((m.group(3), float(m.group(1)), float(m.group(2))))
    return out


ROW_NUMS = re.compile(r"^\s*[\d.]+%\s+[\d.]+%\s+([\d.]+)s\s+([\d.]+)s  (.*)$")


def test_keys(remora, interp):
    """source_lines.py's parked threads under `top --idle` on a pty, driven by keys: a
    filter, the selected row's source line (the target's linecache), one thread, pause,
    reset, and q; then the whole run's table of every thread."""
    with Target(interp, os.path.join(TARGETS, "source_lines.py"), "ready.json") as t:
        truth = t.wait_ready()
        crlf = next(th for th in truth["threads"] if th["case"] == "crlf")
        leaf = next(f for f in crlf["frames"] if f["file"].endswith("crlf_mod.py"))
        threads = {th["native_id"]: th for th in truth["threads"]}
        st = {"step": 0, "paused_at": None, "paused_frames": None}
        problems, note = [], {}

        def react(text):
            step = st["step"]
            lines = frame_of(text)
            head = next((l for l in lines if " sorted by " in l), "")
            rows = frame_rows(lines)
            keys = None
            if step == 0 and "last second" in head and sum(r[0].startswith("parked (") for r in rows) >= 8:
                keys, step = b"/CRLF_mod\r", 1           # any case
            elif step == 1 and "[filter: CRLF_mod]" in head and rows:
                bad = [r[0] for r in rows if "crlf_mod" not in r[0].lower()]
                if bad:
                    problems.append("filtered rows without crlf_mod: %r" % bad[:3])
                foot = [l for l in lines if l.startswith("parked (") and ":  " in l]
                want = "parked (%s:%d):  %s" % (leaf["file"], leaf["line"], leaf["source"])
                if not foot or foot[-1] != want:
                    problems.append("selected row's source line %r, want %r" % (foot[-1:] or None, want))
                note["filter"] = len(rows)
                keys, step = b"/" + b"\x7f" * 20 + b"\r" + b"t", 2
            elif step == 2 and "[thread " in head and "[filter" not in head:
                tid = int(re.search(r"\[thread .*\((\d+)\)\]", head).group(1))   # NAME (TID)
                if tid not in threads:
                    return b"t"                         # the main thread, or another: the next
                fns = {f["function"] for f in threads[tid]["frames"]}
                alien = [r[0] for r in rows if r[0].split(" (")[0] not in fns]
                if alien or not rows:
                    problems.append("thread %d: rows not of its stack: %r" % (tid, alien[:3]))
                note["thread"] = "%d (%s, %d rows)" % (tid, threads[tid]["case"], len(rows))
                keys, step = b"p", 3
            elif step == 3 and "[paused]" in head:
                st["paused_at"], st["paused_frames"] = time.monotonic(), text.count("\x1b[H")
                step = 4
            elif step == 4 and time.monotonic() - st["paused_at"] > PAUSE_WATCH:
                if text.count("\x1b[H") != st["paused_frames"]:
                    problems.append("%d frames drawn while paused" % (text.count("\x1b[H") - st["paused_frames"]))
                keys, step = b"r", 5
            elif step == 5 and "[times since reset]" in head:
                if any(r[1] != 0.0 for r in rows):
                    problems.append("OwnTime not 0 just after the reset: %r" % rows[:2])
                keys, step = b"p", 6
            elif step == 6 and "[paused]" not in head and "last second" in head and any(r[2] > 0 for r in rows):
                secs = re.match(r"^([\d.]+) s ", lines[1]) if len(lines) > 1 else None
                if max(r[2] for r in rows) >= (float(secs.group(1)) if secs else 0.0) - 1.0:
                    problems.append("TotalTime %.2f s after a reset %s s into the run" % (
                        max(r[2] for r in rows), secs.group(1) if secs else "?"))
                keys, step = b"q", 7
            st["step"] = step
            react.where = "step %d of 7" % step
            return keys
        react.where = "step 0 of 7"
        text, code = pty_drive(remora.argv(["top", "-p", t.pid, "-l", 200, "--idle"]), KEYS_ROWS, KEYS_COLS,
                               react, 3 * TTY_TIMEOUT)
    step = st["step"]
    if step != 7:
        raise Fail("the session ended at step %d: %r" % (step, text[-400:]))
    if code != 0:
        raise Fail("exit %d after q" % code)
    final = parse_top_tables(text[text.rindex("\x1b[?1049l"):])
    if len(final) != 1 or "whole run" not in (final[0][0] or "") or "[" in (final[0][0] or ""):
        raise Fail("the table after the screen: %r" % (final[0][0] if final else None))
    parked = [k for k in final[0][1] if k[0] == "parked"]
    if len(parked) < 8:
        problems.append("the whole run's table has %d parked rows (every thread's), want >= 8" % len(parked))
    if problems:
        raise Fail("; ".join(problems[:6]))
    return "filter: %d rows; thread %s; paused %.1f s without a redraw; reset" % (
        note.get("filter", 0), note.get("thread"), PAUSE_WATCH)
