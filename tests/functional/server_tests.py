# Functional tests against a server-like target (issue 17), run by run.py. The target,
# tests/targets/server_like.py, has one busy thread calling short functions from three
# lines of busy_loop() and six threads waiting (lock.acquire, time.sleep, select, an
# Event, stdin, the main thread in join); it writes its truth (each thread's native id,
# name, what it does; each function's first line; busy_loop's calling lines), and the
# test waits, on /proc, until every waiting thread is asleep in its system call.
#
#   server/pyspy/INTERP   py-spy's habits: joined short options (`-p<pid> -r200 -d1`,
#                         `-o<file>`, `-fcollapsed`, `-l3`) are taken (the summary names
#                         200 Hz and 1 s; the table has 3 rows); `--nonblocking` is taken
#                         and records the threads a default recording does, the target
#                         never traced; `--nonblocking --blocking` and `--gil --mode cpu`
#                         are one line, exit 1; `--gil` keeps the busy thread (the GIL
#                         holder) alone; `--function` and `--nolineno`: every frame of one
#                         function at one line, the target's at the first line their own
#                         code objects give, busy_loop one frame (without it: at two of
#                         its three calling lines at least, or the test proves nothing).
#   server/idle/INTERP    the default leaves idle threads out: the busy thread in >= 80% of
#                         rounds, the hasher (on a CPU, no GIL) in >= 30%, each waiting
#                         one (and main) in at most 2%; with `--blocking` (each thread's
#                         state read before it is stopped, 50 Hz) the same but waiting
#                         threads in at most 10% (a stop wakes them: IDLE_MOST_BLOCKING);
#                         `--idle` and
#                         `--mode wall --idle` keep every thread, each in >= 90% of rounds
#                         inside its own wait function; `--mode cpu --idle` is one line,
#                         exit 1; `top` (batch) names no wait function in its whole-run
#                         table by default, and every one of them with `--idle`.

import ast
import os
import re
import shutil
import time

from formats import parse_collapsed, parse_top_tables
from harness import (HOST_PYTHON, INTERPRETERS, TARGETS, Fail, Target,
                     interp_missing, interpreter, one_line, record, summary, tail, tracer_of,
                     workdir)

ORDER = 280           # where run.py runs these tests among the modules' (ascending)
# measurements of timing as fidelity/mix is, run as it is: REMORA_FIDELITY=1 (make test,
# not make asan) or an --only beginning with one of these (run.py)
TIMED = ("server/",)

HOST = ("host-python3", HOST_PYTHON, None)
SERVER_INTERPS = [HOST, interpreter("pyenv-3.9.18"), interpreter("pyenv-3.12.1"),
                  interpreter("sid-3.15")]
WAITING = ("locked", "sleeper", "selector", "waiter", "stdin")
FUTEX_WAITS = ("locked", "waiter")      # a futex, as the main thread's join
PARK_TIMEOUT = 10.0
DURATION_MARGIN_S = 0.05                # the summary's duration against -d (0.01 s printed)
GIL_SHARE = 0.6                         # of rounds: the busy thread holds the GIL but while
                                        # the hasher takes it between two digests
HASHER_GIL_MOST = 0.2                   # of rounds: the hasher holds the GIL between digests
                                        # (microseconds of Python every ~20 ms)


def task_state(pid, tid):
    try:
        with open("/proc/%d/task/%d/stat" % (pid, tid)) as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def wait_parked(t, truth):
    """Until every waiting thread (and the main one) sleeps in the kernel: the ones in a
    system call of their own there (harness), the futex waiters asleep (state S)."""
    for role in WAITING:
        tid = truth["threads"][role]["tid"]
        if role in FUTEX_WAITS:
            continue
        t.wait_thread_parked(tid)
    deadline = time.monotonic() + PARK_TIMEOUT
    for tid in [truth["threads"][r]["tid"] for r in FUTEX_WAITS] + [truth["main"]["tid"]]:
        while task_state(t.pid, tid) != "S":
            if time.monotonic() > deadline:
                raise Fail("thread %d never slept (state %s)" % (tid, task_state(t.pid, tid)))
            time.sleep(0.005)


def start(interp):
    return Target(interp, os.path.join(TARGETS, "server_like.py"), "truth.json")


def threads_seen(stacks):
    """{tid: samples}."""
    seen = {}
    for s in stacks:
        seen[s.tid] = seen.get(s.tid, 0) + s.count
    return seen


def collapsed(remora, args, d, name):
    out = os.path.join(d, name)
    _, err = record(remora, list(args) + ["-o", out])
    return parse_collapsed(out), summary(err)


def def_lines(path, cache):
    """{name: {first lines of every function of that name}} of a Python file, from its own
    syntax tree (a decorated function's code starts at its first decorator), "<module>" at
    None if it cannot be read."""
    if path not in cache:
        try:
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read())
        except (OSError, SyntaxError, ValueError):
            cache[path] = None
            return None
        got = {}
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                first = min([node.lineno] + [x.lineno for x in node.decorator_list])
                got.setdefault(node.name, set()).add(first)
        cache[path] = got
    return cache[path]


def check_function(stacks, truth, root, what):
    """Every frame at its function's first line: the target's as its code objects say,
    the standard library's as its source does; busy_loop one frame. The problems."""
    problems, lines, cache = [], {}, {}
    for s in stacks:
        for fn, fi, li in s.frames:
            if fi is not None:
                lines.setdefault((fn, fi), set()).add(li)
    for (fn, fi), ls in sorted(lines.items()):
        if fi == truth["file"]:
            want = {truth["first_lines"].get(fn)}
        else:
            defs = def_lines((root or "") + fi, cache)
            if defs is None or fn == "<module>":      # 3.9 starts it at its first statement
                continue
            want = defs.get(fn.rsplit(".", 1)[-1], set())
        if not ls <= want:
            problems.append("%s: %s (%s) at lines %s, its first line %s"
                            % (what, fn, fi, sorted(ls), sorted(x for x in want if x)))
    if len(lines.get(("busy_loop", truth["file"]), ())) != 1:
        problems.append("%s: busy_loop at lines %s, want one"
                        % (what, sorted(lines.get(("busy_loop", truth["file"]), ()))))
    return problems


def test_pyspy(remora, interp):
    d = workdir()
    try:
        with start(interp) as t:
            truth = t.wait_ready()
            wait_parked(t, truth)
            pid, busy = t.pid, truth["threads"]["busy"]["tid"]
            hasher = truth["threads"]["hasher"]["tid"]
            problems, notes = [], []
            # joined short options
            out = os.path.join(d, "joined.collapsed")
            _, err = record(remora, ["-p%d" % pid, "-r200", "-d1", "-o" + out, "-fcollapsed"])
            s = summary(err, asked=200)
            if abs(s.seconds - 1.0) > DURATION_MARGIN_S:
                problems.append("-d1: sampled %.2f s" % s.seconds)
            if busy not in threads_seen(parse_collapsed(out)):
                problems.append("-p%d: the busy thread not in the profile" % pid)
            table, _ = record(remora, ["-p%d" % pid, "-d0.2", "-l3"])
            rows = [l for l in table.splitlines()[1:] if re.match(r"^\s*\d+\s+[\d.]+%", l)]
            if len(rows) != 3:
                problems.append("-l3: %d rows in the table, want 3" % len(rows))
            # --nonblocking: the default, never traced
            base, _ = collapsed(remora, ["-p", pid, "-d", "0.5"], d, "default.collapsed")
            nb, _ = collapsed(remora, ["-p", pid, "-d", "0.5", "--nonblocking"], d, "nb.collapsed")
            if set(threads_seen(nb)) != set(threads_seen(base)):
                problems.append("--nonblocking: threads %s, the default %s"
                                % (sorted(threads_seen(nb)), sorted(threads_seen(base))))
            if tracer_of(pid):
                problems.append("the target is traced after --nonblocking")
            for args, want in ((["--nonblocking", "--blocking"], "--nonblocking"),
                               (["--blocking", "--nonblocking"], "--blocking"),
                               (["--gil", "--mode", "cpu"], "--gil"),
                               (["--mode", "exception", "--gil"], "--gil")):
                rc, _, err = remora.run(["record", "-p", pid, "-d", "0.2"] + args)
                if rc != 1 or one_line(err) or want not in err:
                    problems.append("%s: exit %d, want 1 and one line naming %s: %s"
                                    % (" ".join(args), rc, want, tail(err)))
            # --gil: the GIL holder alone: never a waiting thread, the hasher only between
            # its digests
            gil, s = collapsed(remora, ["-p", pid, "-d", "1", "--gil"], d, "gil.collapsed")
            seen = threads_seen(gil)
            if set(seen) - {busy, hasher}:
                problems.append("--gil: samples of threads %s, which never hold the GIL"
                                % sorted(set(seen) - {busy, hasher}))
            if seen.get(hasher, 0) > HASHER_GIL_MOST * s.samples:
                problems.append("--gil: the hasher in %d of %d rounds: it holds the GIL only "
                                "between digests" % (seen[hasher], s.samples))
            if seen.get(busy, 0) < GIL_SHARE * s.samples:
                problems.append("--gil: the busy thread in %d of %d rounds, want %d%% at least"
                                % (seen.get(busy, 0), s.samples, 100 * GIL_SHARE))
            # --function, --nolineno
            lined, _ = collapsed(remora, ["-p", pid, "-d", "0.5"], d, "lines.collapsed")
            at = {f[2] for st in lined for f in st.frames
                  if f[0] == "busy_loop" and f[1] == truth["file"]}
            if len(at & set(truth["busy_lines"])) < 2:
                raise Fail("without --function busy_loop is at lines %s, want two of %s at "
                           "least: the target cannot tell" % (sorted(at), truth["busy_lines"]))
            for flag in ("--function", "--nolineno"):
                st, _ = collapsed(remora, ["-p", pid, "-d", "0.5", flag], d, "fn.collapsed")
                problems += check_function(st, truth, interp[2], flag)
            notes.append("busy_loop at %d lines without --function, one with" % len(at))
        if problems:
            raise Fail("; ".join(problems[:6]))
        return "; ".join(notes)
    finally:
        shutil.rmtree(d, ignore_errors=True)


WAIT_FUNCTIONS = {"locked": "locked_wait", "sleeper": "sleeper_wait",
                  "selector": "selector_wait", "waiter": "waiter_wait", "stdin": "stdin_wait",
                  "main": "main"}
BUSY_SHARE = 0.8        # of rounds: the busy thread is on a CPU or runnable all the time
IDLE_MOST = 0.02        # of rounds, a waiting thread by default: none of them ever wakes
IDLE_MOST_BLOCKING = 0.1    # ... with --blocking: each stop wakes every waiting thread, and
                            # one still on its way back into its wait when the next round
                            # looks reads as runnable (seen 0.5-20% of rounds at 200 Hz on
                            # a loaded machine, none at the 50 Hz the test records at)
IDLE_KEPT = 0.9         # of rounds, a waiting thread with --idle: in every round but errors
HASHER_SHARE = 0.3      # of rounds: digesting 16 MB (~20 ms) on a CPU, then waiting up to
                        # the switch interval (5 ms) for the GIL; a busy machine only adds
                        # time runnable, which counts as on a CPU


def roles(truth):
    """{tid: role} of the waiting threads and main."""
    got = {truth["threads"][r]["tid"]: r for r in WAITING}
    got[truth["main"]["tid"]] = "main"
    return got


def test_idle(remora, interp):
    d = workdir()
    try:
        with start(interp) as t:
            truth = t.wait_ready()
            wait_parked(t, truth)
            pid, busy = t.pid, truth["threads"]["busy"]["tid"]
            hasher = truth["threads"]["hasher"]["tid"]
            waiting = roles(truth)
            problems, notes = [], []
            # the default, and with --blocking (each thread's state from before the stop)
            # (--blocking at 50 Hz: a waiting thread a stop woke has 20 ms to wait again)
            for args, rate in (([], ["-r", "200", "-d", "1"]),
                               (["--blocking"], ["-r", "50", "-d", "2"])):
                what = " ".join(["default"] + args)
                st, s = collapsed(remora, ["-p", pid] + rate + args, d, "default.collapsed")
                seen = threads_seen(st)
                if seen.get(busy, 0) < BUSY_SHARE * s.samples:
                    problems.append("%s: the busy thread in %d of %d rounds, want %d%%"
                                    % (what, seen.get(busy, 0), s.samples, 100 * BUSY_SHARE))
                if seen.get(hasher, 0) < HASHER_SHARE * s.samples:
                    problems.append("%s: the hasher (on a CPU, no GIL) in %d of %d rounds, want "
                                    "%d%%" % (what, seen.get(hasher, 0), s.samples,
                                              100 * HASHER_SHARE))
                most = IDLE_MOST_BLOCKING if args else IDLE_MOST
                for tid, role in sorted(waiting.items()):
                    if seen.get(tid, 0) > most * s.samples:
                        problems.append("%s: %s (%d), waiting, in %d of %d rounds"
                                        % (what, role, tid, seen[tid], s.samples))
                notes.append("%s: busy %d, hasher %d, waiting %d of %d" % (
                    what, seen.get(busy, 0), seen.get(hasher, 0),
                    sum(seen.get(x, 0) for x in waiting), s.samples))
            for args in (["--idle"], ["--mode", "wall", "--idle"]):
                st, s = collapsed(remora, ["-p", pid, "-r", "200", "-d", "1"] + args, d,
                                  "idle.collapsed")
                inside = {}
                for x in st:
                    role = waiting.get(x.tid)
                    if role and (WAIT_FUNCTIONS[role], truth["file"]) in \
                            [(f[0], f[1]) for f in x.frames]:
                        inside[x.tid] = inside.get(x.tid, 0) + x.count
                for tid, role in sorted(waiting.items()):
                    if inside.get(tid, 0) < IDLE_KEPT * s.samples:
                        problems.append("%s: %s (%d) in %s in %d of %d rounds, want %d%%"
                                        % (" ".join(args), role, tid, WAIT_FUNCTIONS[role],
                                           inside.get(tid, 0), s.samples, 100 * IDLE_KEPT))
                if threads_seen(st).get(busy, 0) < BUSY_SHARE * s.samples:
                    problems.append("%s: the busy thread in %d of %d rounds"
                                    % (" ".join(args), threads_seen(st).get(busy, 0), s.samples))
            rc, _, err = remora.run(["record", "-p", pid, "-d", "0.2", "--mode", "cpu", "--idle"])
            if rc != 1 or one_line(err) or "--idle" not in err:
                problems.append("--mode cpu --idle: exit %d, want 1 and one line: %s"
                                % (rc, tail(err)))
            # top: the whole run's table
            for args, want in (([], False), (["--idle"], True)):
                rc, out, err = remora.run(["top", "-p", pid, "-d", "1.2", "-l", "100"] + args)
                if rc != 0:
                    problems.append("top %s: exit %d: %s" % (" ".join(args), rc, tail(err)))
                    continue
                tables = parse_top_tables(out)
                rows = tables[-1][1] if tables else {}
                named = {fn for fn, fi in rows if fi == truth["file"]}
                waits = set(WAIT_FUNCTIONS.values())
                if "busy_loop" not in named:
                    problems.append("top %s: busy_loop not in the table" % " ".join(args))
                if want and not waits <= named:
                    problems.append("top --idle: %s not in the table" % ", ".join(sorted(waits - named)))
                if not want and waits & named:
                    problems.append("top: waiting functions in the table: %s"
                                    % ", ".join(sorted(waits & named)))
        if problems:
            raise Fail("; ".join(problems[:6]))
        return "; ".join(notes)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def tests(remora):
    """[(name, function, skip reason or None)] for run.py."""
    return [("server/pyspy/%s" % i[0], lambda i=i: test_pyspy(remora, i), interp_missing(i))
            for i in SERVER_INTERPS] + \
           [("server/idle/%s" % i[0], lambda i=i: test_idle(remora, i), interp_missing(i))
            for i in [HOST] + list(INTERPRETERS)]   # issue 30: on all 12
