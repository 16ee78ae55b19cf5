# The counts' words (docs/cli.md, "Counts"; issue 50): one vocabulary, the same figures in
# the summary, --stats and every format's header that shows counts, and `top`'s header.
#
#   counts/async/INTERP     async_busy.py recorded --async to every format with a header
#       (collapsed, table, speedscope, pprof, gecko, flamegraph, svg, jsonl, .remora) with
#       --stats: the summary's counts text (`R rounds taken of A asked in D s (...), W thread
#       samples written, I left out as idle (...), E errors (x%), P partial (y%)`) is the
#       same string in the gecko meta.misc, speedscope's name, a pprof comment, the table's
#       last line and the flamegraph's "counts"; --stats, the flamegraph's, jsonl's end
#       record's and the .remora's fields hold the same numbers; the collapsed total, the
#       SVG header's and the gecko timeline's samples are W; A is the rate over D, x and y
#       are E and P over W.
#   counts/paused/INTERP    busy.py recorded with --control: a snapshot, a pause of
#       PAUSE_S, a resume, a stop; the same agreements, the summary's second line in the
#       singular (`1 period, 1 snapshot, paused 1 time`), D and A leave the pause out (A
#       within 2% of the rate over the recording less its pause), the flamegraph's and
#       jsonl's paused_s the pause the summary counts.
#   counts/idle/INTERP      server_like.py (one busy thread, one hashing without the GIL,
#       six waiting: a server's threads, as the aiohttp case of issue 50, stdlib only)
#       recorded with the user-space engine: I is stated, and I = R x threads - W (less
#       the errors' share), the same in every header; with --idle, 0 left out `(--idle)`;
#       with the kernel engine (ticks of CPU time for running threads) within KERNEL_SLACK
#       of rounds x threads and the late rounds' threads.
#   counts/aiohttp/INTERP   Debian's aiohttp server under its load client (issue 50's case),
#       recorded with each engine to every format: the same counts in all, idle stated.
#   top-header/gil/INTERP   `top` in tmux against gil_wait.py (main keeps the GIL in a C
#       call, a thread waits for it, one parked): the header line of shares says GIL held
#       33.3% (one thread of three), idle 66.7% (two asleep without the GIL), exception
#       0.0%, GC 0.0%, and waiting for GIL 33.3% on 3.15 ("n/a (3.15+)" before), each
#       within SHARE_MARGIN points; the engine and `Hz of 1000 Hz asked` shown; key t
#       shows `[thread MainThread (PID)]`, the thread's name.
#   top-header/exception/INTERP  `top -b --engine user` against exceptions.py (two of its
#       four threads spin inside an except block): the whole run's exception share 50%
#       within SHARE_MARGIN points (the user-space engine: a kernel tick does not read the
#       exception state, docs/cli.md says so).
#   top-header/wait-command/INTERP  `top -d 1 -- CMD`, the command spinning 2.5 s then
#       exiting 7: the whole run's table, one line `remora: waiting for the command (pid N)
#       to exit; Ctrl-C interrupts it` (as record's), exit 7.
#   counts/plural           (unit test, tests/unit/unit_formats.c "counts: plurals") and the
#       singulars above.

import json
import os
import re
import shutil
import subprocess
import time

from formats import flamegraph_data, parse_collapsed, read_jsonl, read_pprof, read_remora
from harness import (INTERPRETERS, STATS_COUNTS, TARGETS, Fail, Recording, Skip,
                     Target, interp_command, interp_missing, record, summary, tail, workdir)
from long_tests import Control

ORDER = 217           # where run.py runs these tests among the modules' (ascending)

COUNT_INTERPS = ("pyenv-3.12.1", "sid-3.15")
AIOHTTP_INTERPS = ("debian-3.11-static", "sid-3.15")   # Debian's python3-aiohttp
RATE = 1000
SECONDS = 1.5
PAUSE_S = 0.5
KERNEL_SLACK = 0.03   # of rounds x threads: the kernel engine's ticks against its rounds
SHARE_MARGIN = 5.0    # percentage points: the shares of three threads each in a known state
FORMATS = ("a.collapsed", "a.table", "a.speedscope.json", "a.pb.gz", "a.gecko.json", "a.html",
           "a.svg", "a.jsonl", "a.remora")
COUNTS = re.compile(r"^remora: (.*), \d+ late, engine (?:kernel|user)(?:; the target exited)?$", re.M)


def counts_text(err):
    """The counts text of the summary line (between `remora: ` and `, L late`)."""
    found = COUNTS.findall(err)
    if len(found) != 1:
        raise Fail("want one summary line: %s" % tail(err))
    return found[0]


def judge_formats(d, err, want_paused=None):
    """Holds every header's counts to the summary's; returns (summary, notes)."""
    s = summary(err, RATE)
    text = counts_text(err)
    problems = []

    def same(what, got, want):
        if got != want:
            problems.append("%s: %r, the summary %r" % (what, got, want))

    st = STATS_COUNTS.search(err)
    if st is None:
        problems.append("no --stats line with the counts: %s" % tail(err))
    else:
        same("--stats", tuple(int(st.group(k)) for k in ("rounds", "asked_rounds", "written", "idle",
                                                          "errors", "partial")),
             (s.rounds, s.asked_rounds, s.written, s.idle, s.errors, s.partial))
    # the summary's own arithmetic
    if abs(s.asked_rounds - s.asked * s.seconds) > 0.01 * s.asked * s.seconds + 6:
        problems.append("rounds asked %d, the rate over %.2f s is %.0f"
                        % (s.asked_rounds, s.seconds, s.asked * s.seconds))
    for name, n, pct in (("errors", s.errors, s.error_pct), ("partial", s.partial, s.partial_pct)):
        want = 100.0 * n / s.written if s.written else 0.0
        if abs(pct - want) > 0.006:
            problems.append("%s %.2f%%, %d of %d written is %.3f%%" % (name, pct, n, s.written, want))
    p = lambda n: os.path.join(d, n)
    same("collapsed total", sum(x.count for x in parse_collapsed(p("a.collapsed"))), s.written)
    with open(p("a.table"), encoding="utf-8") as f:
        last = f.read().rstrip("\n").split("\n")[-1]
    same("the table's last line", last, "(%s)" % text)
    with open(p("a.speedscope.json"), encoding="utf-8") as f:
        name = json.load(f)["name"]
    same("speedscope's name", name.split(": ", 1)[-1], text)
    pp = read_pprof(p("a.pb.gz"))
    comments = [pp["strings"][c] for c in pp["comment"]]
    if text not in comments:
        problems.append("pprof comments %r lack the counts" % comments)
    with open(p("a.gecko.json"), encoding="utf-8") as f:
        gecko = json.load(f)
    misc = gecko["meta"]["misc"]
    same("gecko meta.misc", misc.split("; ", 1)[-1], text)
    same("gecko samples", sum(len(th["samples"]["time"]) for th in gecko["threads"]), s.written)
    doc = flamegraph_data("a.html", p("a.html"))
    fg = doc["current"]["meta"]
    same("flamegraph counts", fg.get("counts"), text)
    same("flamegraph fields", tuple(fg.get(k) for k in ("samples", "rounds", "rounds_asked",
                                                        "thread_samples", "idle", "errors",
                                                        "partial")) + (doc["current"].get("total"),),
         (s.rounds, s.rounds, s.asked_rounds, s.written, s.idle, s.errors, s.partial, s.written))
    with open(p("a.svg"), encoding="utf-8") as f:
        svg = f.read()
    want_svg = "%d thread sample%s written, %d round%s taken of %d asked, %d left out as idle, %d partial" % (
        s.written, "" if s.written == 1 else "s", s.rounds, "" if s.rounds == 1 else "s",
        s.asked_rounds, s.idle, s.partial)
    if want_svg not in svg:
        problems.append("the SVG header lacks %r" % want_svg)
    end = [r for r in read_jsonl(p("a.jsonl")) if r.get("type") == "end"]
    if len(end) != 1:
        problems.append("jsonl: %d end records" % len(end))
    else:
        same("jsonl end", tuple(end[0].get(k) for k in ("rounds", "rounds_asked", "thread_samples",
                                                        "idle", "errors", "partial")),
             (s.rounds, s.asked_rounds, s.written, s.idle, s.errors, s.partial))
    raw = read_remora(p("a.remora")).meta
    same(".remora", tuple(raw.get(k) for k in ("rounds", "thread_samples", "idle", "errors",
                                               "partial")),
         (s.rounds, s.written, s.idle, s.errors, s.partial))
    if want_paused is not None:
        for what, got in (("flamegraph", fg.get("paused_s")),
                          ("jsonl", end[0].get("paused_s") if end else None),
                          (".remora", raw.get("paused_ns", 0) / 1e9)):
            if got is None or abs(got - want_paused) > 0.006:
                problems.append("%s paused_s %s, the summary's pause %.2f s" % (what, got, want_paused))
    if problems:
        raise Fail("; ".join(problems[:6]))
    return s, text


def outputs(d):
    args = []
    for n in FORMATS:
        args += ["-o", os.path.join(d, n)]
    return args


def test_async(remora, interp):
    d = workdir()
    try:
        with Target(interp, os.path.join(TARGETS, "async_busy.py"), "ready.json") as t:
            t.wait_ready()
            _, err = record(remora, ["-p", t.pid, "-d", SECONDS, "--async", "--stats"] + outputs(d))
        s, text = judge_formats(d, err)
        return text
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_aiohttp(remora, interp):
    """Debian's aiohttp serving its load client (tests/targets/real/aiohttp_server.py): the
    default recording leaves the server's waiting threads out, and says how many, in the
    same words and figures in the summary, --stats and every format's header; with the
    kernel engine (the default here) and the user-space one."""
    from real_tests import REAL, STEPCLOCK, import_problem
    why = import_problem(interp, "aiohttp.web")
    if why is not None:
        raise Skip("aiohttp does not import here: %s" % why)
    d = workdir()
    notes = []
    try:
        with Target(interp, os.path.join(REAL, "aiohttp_server.py"), "ready.json",
                    support=[STEPCLOCK]) as t:
            t.wait_ready()
            nthreads = len(os.listdir("/proc/%d/task" % t.pid))
            for engine in ("kernel", "user"):
                for n in FORMATS:
                    if os.path.exists(os.path.join(d, n)):
                        os.unlink(os.path.join(d, n))
                rc, _, err = remora.run(["record", "-p", t.pid, "-d", SECONDS, "--engine", engine,
                                         "--stats"] + outputs(d))
                if rc != 0 and engine == "kernel":
                    notes.append("kernel engine not usable here: %s" % tail(err, 1))
                    continue
                if rc != 0:
                    raise Fail("`record --engine user` exited %d: %s" % (rc, tail(err)))
                s, text = judge_formats(d, err)
                if nthreads > 1 and s.idle == 0:
                    raise Fail("%s engine: %d threads, none left out as idle: %s"
                               % (engine, nthreads, text))
                notes.append("%s: %s" % (engine, text))
        return "%d threads; %s" % (nthreads, " | ".join(notes))
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_paused(remora, interp):
    d = workdir()
    ctl = Control(d)
    rec = None
    try:
        with Target(interp, os.path.join(TARGETS, "busy.py"), "ready", [5, 1, 120]) as t:
            t.wait_ready()
            rec = Recording(remora, ["-p", t.pid, "-r", RATE, "-d", "60", "--stats",
                                     "--control", "fifo:%s,%s" % (ctl.ctl, ctl.ack)] + outputs(d))
            before = rec.wait_sampled(200)
            ctl.send("snapshot")
            ctl.send("pause")
            # not a synchronisation: the pause's length, the busy thread spinning meanwhile
            time.sleep(PAUSE_S)
            ctl.send("resume")
            rec.wait_sampled(before + 300)
            ctl.send("stop")
            rc, _, err = rec.finish()
            if rc != 0:
                raise Fail("record exited %d: %s" % (rc, tail(err)))
        m = re.search(r"^remora: 1 period, 1 snapshot, paused 1 time for ([\d.]+) s$", err, re.M)
        if m is None:
            raise Fail("want `remora: 1 period, 1 snapshot, paused 1 time for T s`: %s" % tail(err))
        paused = float(m.group(1))
        s, text = judge_formats(d, err, paused)
        raw = read_remora(os.path.join(d, "a.remora")).meta
        whole = raw["duration_ns"] / 1e9
        if abs(s.seconds - (whole - paused)) > 0.011:
            raise Fail("the summary's %.2f s is not the %.3f s recorded less the %.2f s paused"
                       % (s.seconds, whole, paused))
        return "%s; paused %.2f s of %.2f s" % (text, paused, whole)
    finally:
        if rec is not None:
            rec.close()
        ctl.close()
        shutil.rmtree(d, ignore_errors=True)


def test_idle(remora, interp):
    d = workdir()
    try:
        with Target(interp, os.path.join(TARGETS, "server_like.py"), "truth.json") as t:
            t.wait_ready()               # every thread started: their number holds
            nthreads = len(os.listdir("/proc/%d/task" % t.pid))
            _, err = record(remora, ["-p", t.pid, "-d", SECONDS, "--engine", "user", "--stats"] + outputs(d))
            s, text = judge_formats(d, err)
            _, err2 = record(remora, ["-p", t.pid, "-d", 0.3, "--engine", "user", "--idle",
                                      "-o", os.path.join(d, "i.collapsed")])
            s2 = summary(err2, RATE)
            # the kernel engine: a running thread's samples are ticks of its CPU time, not
            # rounds; within KERNEL_SLACK of the rounds x threads, and the late rounds'
            rc, _, err3 = remora.run(["record", "-p", t.pid, "-d", SECONDS, "--engine", "kernel",
                                      "-o", os.path.join(d, "k.collapsed")])
            s3 = summary(err3, RATE) if rc == 0 else None
        problems = []
        # a measurement of timing (a starved target's busy thread makes fewer ticks than
        # rounds): judged where timing is, make test (REMORA_FIDELITY=1), not under load
        if s3 is not None and os.environ.get("REMORA_FIDELITY") == "1":
            want3 = s3.rounds * nthreads - s3.written
            if abs(s3.idle - want3) > KERNEL_SLACK * s3.rounds * nthreads + s3.late * nthreads:
                problems.append("kernel engine: %d left out as idle, %d rounds x %d threads - %d "
                                "written = %d (%d late)" % (s3.idle, s3.rounds, nthreads, s3.written,
                                                            want3, s3.late))
        if s.idle == 0:
            problems.append("no thread sample left out as idle, %d threads mostly waiting" % nthreads)
        want = s.rounds * nthreads - s.written
        if not want - s.errors * nthreads <= s.idle <= want:
            problems.append("%d left out as idle, %d rounds x %d threads - %d written = %d "
                            "(%d errors)" % (s.idle, s.rounds, nthreads, s.written, want, s.errors))
        if s2.idle != 0 or not s2.idle_kept:
            problems.append("--idle: %d left out, said %s" % (s2.idle, "(--idle)" if s2.idle_kept else
                                                               "(--idle keeps them)"))
        if problems:
            raise Fail("; ".join(problems))
        return "%s; %d threads; kernel engine: %s" % (
            text, nthreads, "%d idle of %d" % (s3.idle, s3.rounds * nthreads - s3.written)
            if s3 is not None else "not usable here")
    finally:
        shutil.rmtree(d, ignore_errors=True)


# --- top in tmux ------------------------------------------------------------------------

SHARES = re.compile(r"^(last second|whole run):(.*) of (\d+) thread samples? looked at\s*$", re.M)


def tmux(sock, *args):
    return subprocess.run(["tmux", "-L", sock] + list(args), capture_output=True, text=True, timeout=10)


def pane(sock):
    return tmux(sock, "capture-pane", "-p", "-t", "top").stdout


def wait_pane(sock, ok, what, timeout=20.0):
    """Polls the pane until ok(text) (tmux has no way to wait for a drawing)."""
    deadline = time.monotonic() + timeout
    while True:
        text = pane(sock)
        if ok(text):
            return text
        if time.monotonic() > deadline:
            raise Fail("%s never showed in %.0fs: %r" % (what, timeout, text[-600:]))
        time.sleep(0.1)


def share(line, name):
    m = re.search(r"  %s (n/a|[\d.]+%%)" % re.escape(name), line)
    if m is None:
        return None
    return m.group(1) if m.group(1) == "n/a" else float(m.group(1)[:-1])


def test_top_gil(remora, interp):
    if shutil.which("tmux") is None:
        raise Skip("tmux not installed")
    minor = int(re.search(r"3\.(\d+)", interp[0]).group(1))
    sock = "remora-counts-%d" % os.getpid()
    with Target(interp, os.path.join(TARGETS, "gil_wait.py"), "truth.json") as t:
        truth = t.gil_wait_ready()
        roles = truth["roles"]
        cmd = " ".join(remora.argv(["top", "-p", str(t.pid), "-r", str(RATE)]))
        try:
            r = tmux(sock, "new-session", "-d", "-s", "top", "-x", "200", "-y", "40", cmd)
            if r.returncode != 0:
                raise Skip("tmux cannot start a session: %s" % r.stderr.strip())
            text = wait_pane(sock, lambda x: SHARES.search(x) and "last second" in x, "a live frame")
            # a second frame: a whole second of samples in the window
            first = SHARES.search(text).group(3)
            text = wait_pane(sock, lambda x: SHARES.search(x) and SHARES.search(x).group(3) != first,
                             "a second frame")
            line = SHARES.search(text).group(2)
            head = text
            tmux(sock, "send-keys", "-t", "top", "t")
            name = "[thread MainThread (%d)]" % roles["main"]
            thread_view = wait_pane(sock, lambda x: name in x, "the thread view %r" % name)
            tmux(sock, "send-keys", "-t", "top", "q")
        finally:
            tmux(sock, "kill-server")
    problems = []
    want = {"GIL held": 100 / 3, "idle": 200 / 3, "exception": 0.0, "GC": 0.0,
            "waiting for GIL": 100 / 3 if minor >= 15 else "n/a"}
    got = {k: share(line, k) for k in want}
    for k, w in want.items():
        g = got[k]
        if w == "n/a" or g == "n/a" or g is None:
            if g != w:
                problems.append("%s %s, want %s" % (k, g, w if w == "n/a" else "%.1f%%" % w))
        elif abs(g - w) > SHARE_MARGIN:
            problems.append("%s %.1f%%, want %.1f%% +- %.0f" % (k, g, w, SHARE_MARGIN))
    if not re.search(r"engine (kernel|user)", head):
        problems.append("no engine in the header")
    if not re.search(r"\(\d+ Hz of %d Hz asked\)" % RATE, head):
        problems.append("no `H Hz of %d Hz asked` in the header" % RATE)
    if "[thread %d]" % roles["main"] in thread_view:
        problems.append("the thread view shows a bare thread id")
    if problems:
        raise Fail("%s (line %r)" % ("; ".join(problems), line.strip()))
    return line.strip()


def test_top_exception(remora, interp):
    """top -b against exceptions.py with the user-space engine (a kernel tick does not read
    the exception state): two of its four threads are in an except block all the time."""
    with Target(interp, os.path.join(TARGETS, "exceptions.py"), "truth.json") as t:
        truth = t.wait_ready()
        t.wait_main_in_read()
        rc, out, err = remora.run(["top", "-p", t.pid, "-d", 1.2, "--engine", "user"])
        nthreads = len(os.listdir("/proc/%d/task" % t.pid))
    if rc != 0:
        raise Fail("top exited %d: %s" % (rc, tail(err)))
    whole = [m for m in SHARES.finditer(out) if m.group(1) == "whole run"]
    if len(whole) != 1:
        raise Fail("want one `whole run:` line of shares: %s" % tail(out))
    line = whole[0].group(2)
    handling = sum(1 for th in truth["threads"].values() if th["exc_info"])
    want = 100.0 * handling / nthreads
    got = share(line, "exception")
    if got is None or got == "n/a" or abs(got - want) > SHARE_MARGIN:
        raise Fail("exception %s, want %.1f%% (%d of %d threads) +- %.0f (line %r)"
                   % (got, want, handling, nthreads, SHARE_MARGIN, line.strip()))
    return "%s; %d of %d threads in an except block" % (line.strip(), handling, nthreads)


WAITING = re.compile(r"^remora: waiting for the command \(pid \d+\) to exit; Ctrl-C interrupts it$", re.M)
SPIN = ("import time\nend = time.monotonic() + %s\n"
        "def work():\n    while time.monotonic() < end: pass\nwork()\nraise SystemExit(7)\n")


def test_top_wait(remora, interp):
    """`top -d 1 -- CMD` with a command that runs 2.5 s and exits 7: the whole run's table
    (naming work), one line saying it waits, exit 7."""
    rc, out, err = remora.run(["top", "-d", "1", "--"] + interp_command(interp, ["-c", SPIN % 2.5]))
    problems = []
    if rc != 7:
        problems.append("exit %d, want the command's 7" % rc)
    if len(WAITING.findall(err)) != 1:
        problems.append("want one line saying top waits for the command: %s" % tail(err))
    if "whole run" not in out or "work (" not in out:
        problems.append("no whole run's table naming work(): %s" % tail(out))
    if problems:
        raise Fail("; ".join(problems))
    return WAITING.search(err).group(0)


def tests(remora):
    out = []
    for i in INTERPRETERS:
        if i[0] not in COUNT_INTERPS:
            continue
        skip = interp_missing(i)
        out.append(("counts/async/%s" % i[0], lambda i=i: test_async(remora, i), skip))
        out.append(("counts/paused/%s" % i[0], lambda i=i: test_paused(remora, i), skip))
        out.append(("counts/idle/%s" % i[0], lambda i=i: test_idle(remora, i), skip))
    for i in INTERPRETERS:                  # the aiohttp case of issue 50, where Debian has it
        if i[0] in AIOHTTP_INTERPS:
            out.append(("counts/aiohttp/%s" % i[0], lambda i=i: test_aiohttp(remora, i),
                        interp_missing(i)))
        out.append(("top-header/gil/%s" % i[0], lambda i=i: test_top_gil(remora, i), skip))
        out.append(("top-header/exception/%s" % i[0], lambda i=i: test_top_exception(remora, i), skip))
        out.append(("top-header/wait-command/%s" % i[0], lambda i=i: test_top_wait(remora, i), skip))
    return out
