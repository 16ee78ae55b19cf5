# gil and exception modes read at the tick by the kernel engine (issue 48, first bullet;
# docs/how-it-reads.md "Two engines"). tests/targets/tick_modes.py times itself between two
# marks around each recording (1 kHz, 1.5 s):
#   tick-mode/gil/INTERP        its worker spins HOLD (40%) of each 10 ms in hold(), pure
#                               Python holding the GIL, and sleeps the rest; a second thread
#                               sleeps in C 1 ms at a time. `record --mode gil`: the summary
#                               says `engine kernel`, hold()'s samples over the recording's
#                               seconds x rate are its own share of wall time within MARGIN
#                               points, and at most 1% of samples are in rest() (asleep, the
#                               GIL released: but for the instant it has it back)
#   tick-mode/exception/INTERP  its worker spins HOLD of each 10 ms inside an `except
#                               KeyError` block, in handling(), the rest in plain(), no
#                               exception handled. `record --mode exception`: `engine
#                               kernel`, handling()'s share within MARGIN points of its own,
#                               no sample in plain(), at most 0.1% of samples partial
# A window the machine disturbed (the share off by more than MARGIN) is tried again, TRIES windows in all.
#   tick-mode/switch-walks/INTERP  the gil target (its threads go to sleep hundreds of times
#                               a second) recorded SWITCH_SECONDS with --stats in each of
#                               wall, gil and exception modes: the kernel engine walks a
#                               thread's frames as it leaves its CPU only where the rounds use
#                               that stack (wall and cpu modes), so --stats' switch_walks is
#                               over 0 in wall mode and 0 in the other two
import os
import re
import shutil

from formats import parse_collapsed
from harness import INTERPRETERS, TARGETS, Fail, Skip, Target, interp_missing, mark, record, \
    summary, tail, workdir

ORDER = 330           # after engine_tests.py

TICK_INTERPS = ("debian-3.11-static", "pyenv-3.12.1", "sid-3.13", "sid-3.15")
SECONDS = "1.5"
RATE = 1000
MARGIN = 5.0          # points of share between remora's and the target's own
TRIES = 3
NOTICE = "the kernel engine cannot be used"

MODES = {
    # mode: (the function timed, the function that must never be sampled)
    "gil": ("hold", "rest"),
    "exception": ("handling", "plain"),
}


def kernel_summary(err, mode):
    """The summary of a recording in MODE, which must have run on the kernel engine: Skip
    when that engine cannot be used here at all, Fail when the mode fell back to user space."""
    s = summary(err, RATE)
    if s.engine != "kernel":
        notice = [l for l in err.splitlines() if NOTICE in l]
        if notice and "--mode" not in notice[0]:
            raise Skip("the kernel engine is not used here: %s" % notice[0])
        raise Fail("--mode %s: the summary says engine %s, want kernel%s"
                   % (mode, s.engine, ": " + notice[0] if notice else ""))
    return s


def window(remora, t, n, mode, path):
    """One recording between marks n and n + 1: (summary, stacks, the target's share %)."""
    before = mark(t, n)
    _, err = record(remora, ["-p", t.pid, "-d", SECONDS, "-r", RATE, "--mode", mode, "-o", path])
    after = mark(t, n + 1)
    s = kernel_summary(err, mode)
    spent = after["all"] - before["all"]
    if spent <= 0:
        raise Fail("the target's clock did not move between marks %d and %d" % (n, n + 1))
    return s, parse_collapsed(path), 100.0 * (after["in"] - before["in"]) / spent


def test_mode(remora, interp, mode):
    timed, never = MODES[mode]
    d = workdir()
    try:
        with Target(interp, os.path.join(TARGETS, "tick_modes.py"), "ready.json", [mode]) as t:
            t.wait_ready()
            notes = []
            for attempt in range(TRIES):
                path = os.path.join(d, "%s-%d.collapsed" % (mode, attempt))
                s, stacks, truth = window(remora, t, 2 * attempt + 1, mode, path)
                total = sum(st.count for st in stacks)
                inside = sum(st.count for st in stacks if st.frames and st.frames[-1][0] == timed)
                wrong = sum(st.count for st in stacks if any(f[0] == never for f in st.frames))
                share = 100.0 * inside / (s.seconds * s.asked)
                note = ("%s %.1f%% of %d samples (%d in %s), its own %.1f%%; %d partial (%.2f%%)"
                        % (timed, share, total, inside, timed, truth, s.partial, s.partial_pct))
                # gil: the instant rest()'s sleep has its GIL back and has not yet returned
                # holds it rightly; a few such samples at most
                if wrong > (0.01 * total if mode == "gil" else 0):
                    raise Fail("%d of %d samples in %s(), which %s: %s"
                               % (wrong, total, never, "releases the GIL" if mode == "gil"
                                  else "handles no exception", note))
                if mode == "exception" and s.partial_pct > 0.1:
                    raise Fail("more than 0.1%% of samples partial: %s" % note)
                if abs(share - truth) <= MARGIN:
                    return "engine kernel; " + note + ("" if attempt == 0 else " (try %d; before: %s)"
                                                      % (attempt + 1, "; ".join(notes)))
                notes.append(note)
            raise Fail("%s's share off its own by more than %.0f points in %d windows: %s"
                       % (timed, MARGIN, TRIES, "; ".join(notes)))
    finally:
        shutil.rmtree(d, ignore_errors=True)


SWITCH_SECONDS = "1"
SWITCH_WALKS = re.compile(r"switch_walks=(\d+) switch_used=(\d+)")


def switch_walks(remora, t, mode, path):
    """`record --mode MODE --stats` of t: (switch_walks, switch_used) from --stats."""
    _, err = record(remora, ["-p", t.pid, "-d", SWITCH_SECONDS, "-r", RATE, "--mode", mode, "--stats",
                             "-o", path])
    s = kernel_summary(err, mode)
    m = SWITCH_WALKS.search(err)
    if m is None:
        raise Fail("--mode %s: --stats has no switch_walks/switch_used: %s" % (mode, tail(err, 8)))
    return int(m.group(1)), int(m.group(2))


def test_switch_walks(remora, interp):
    if os.environ.get("REMORA_TEST_ENGINE") == "user":
        raise Skip("REMORA_TEST_ENGINE=user: this run has no kernel engine to judge")
    d = workdir()
    try:
        with Target(interp, os.path.join(TARGETS, "tick_modes.py"), "ready.json", ["gil"]) as t:
            t.wait_ready()
            got = {mode: switch_walks(remora, t, mode, os.path.join(d, "%s.collapsed" % mode))
                   for mode in ("wall", "gil", "exception")}
    finally:
        shutil.rmtree(d, ignore_errors=True)
    note = "; ".join("%s: switch_walks=%d switch_used=%d" % (m, w, u) for m, (w, u) in got.items())
    if got["wall"][0] == 0:
        raise Fail("wall mode walked no thread at its switch-out: %s" % note)
    for mode in ("gil", "exception"):
        if got[mode] != (0, 0):
            raise Fail("--mode %s: the kernel walked threads at their switch-out, a stack that mode "
                       "never uses: %s" % (mode, note))
    return note


def tests(remora):
    """[(name, function, skip reason or None)] for run.py."""
    return [("tick-mode/%s/%s" % (mode, i[0]), lambda i=i, mode=mode: test_mode(remora, i, mode),
             interp_missing(i))
            for mode in ("gil", "exception") for i in INTERPRETERS if i[0] in TICK_INTERPS] + \
           [("tick-mode/switch-walks/%s" % i[0], lambda i=i: test_switch_walks(remora, i), interp_missing(i))
            for i in INTERPRETERS if i[0] in TICK_INTERPS]
