# asyncio tests (issue 18): `remora dump --async` against the truth an asyncio program
# writes about itself. Target: tests/targets/async_tasks.py (see its head): tasks under
# gather, a TaskGroup, nested create_task, shield, a task awaiting a bare future, and the
# loop's main task spinning on the CPU; its truth is asyncio.all_tasks(), each task's
# get_name(), its coroutine stack (the task's coroutine and those it awaits, walked by
# the target through cr_await, innermost first) and the awaiter links it recorded when it
# made them.
#   (and cycle-a, cycle-b awaiting each other: an await cycle, reported in the text dump
#   and not followed forever)
#   asyncio/dump/INTERP      `dump --async --json`: exactly the target's tasks (by id); for
#       each its name, state, thread (the loop's thread) and awaited_by exact; a pending
#       task's frames exact (function, file, line); the running task's frames judged
#       loosely (it moves): innermost first, only the functions it runs (burn, spin, main),
#       main outermost. Each thread's running task (the per-sample UNW_WANT_TASKS reading
#       that record --async uses): the loop's thread runs main, its task_frames are its
#       innermost frames down to main's coroutine; the other thread runs none. The text
#       dump: a "(T) NAME [state]" line per task, each awaited task indented under its
#       awaiter.
#   asyncio/idle/INTERP      the same with 10,000 more idle tasks (each awaiting one Event):
#       all exact; the PASS line gives one dump's time (measured, not asserted).
#   asyncio/edge-name/INTERP  the dump's checks with one more task, edge-task, whose name
#       object ends 8 bytes before a page the target cannot read (see the target): its
#       name read exactly, not the dump refused as a task list that kept changing; and a
#       thread named the same way ("edge-thread") named so in the dump, not by its kernel
#       name.
#   asyncio/subclass/INTERP, asyncio/pytask-subclass/INTERP  the dump's checks with every
#       task of a subclass, two levels deep, of asyncio.Task (the C class) or of _PyTask.
#   asyncio/churn/INTERP     a second thread runs its own loop making and finishing 50 tasks
#       at a time: 20 dumps each exit 0 with the stable tasks exact (churn-K tasks may be
#       there or not) or exit 5 with one line saying the list kept changing (counted,
#       at most 10 of 20); none hangs or crashes.
#   asyncio/core/INTERP      (host interpreters 3.9, 3.12, Debian's static 3.11) the same
#       checks on `dump --core CORE --async --json` of a gcore of the target.
#   asyncio/bound/INTERP     (3.12, sid 3.15) 100,001 idle tasks, one more than remora
#       reads: one line naming the bound, exit 5 (measured: its time).
#   asyncio/none/INTERP      a program that never imports asyncio: "tasks": [] in JSON, the
#       line "no asyncio tasks" in text, exit 0.
#   asyncio/pytask/INTERP    the pure-Python asyncio.Task (a task factory making _PyTask):
#       the same checks as async/dump.
import json
import os
import re
import time

from harness import INTERPRETERS, TARGETS, Fail, Skip, Target, gcore, interp_missing, one_line, tail

ORDER = 310           # where run.py runs these tests among the modules' (ascending)

SCRIPT = os.path.join(TARGETS, "async_tasks.py")
RUNNING = None                      # set from the truth: the running task's functions
IDLE_TASKS = 10000
BOUND_TASKS = 100001
CHURN_DUMPS = 20


def minor(interp):
    m = re.search(r"3\.(\d+)", interp[0])
    return int(m.group(1))


def frame_text(f):
    return "%s (%s:%s)" % (f["function"], f["file"], f["line"])


def check_doc(doc, truth, stable_only=False):
    """Problems of one dump --async --json document against the truth (list of lines)."""
    problems = []
    got = {t["id"]: t for t in doc.get("tasks", [])}
    want = {t["id"]: t for t in truth["tasks"]}
    extra = [t for i, t in got.items() if i not in want and
             not (stable_only and t["name"].startswith("churn-"))]
    for t in extra[:5]:
        problems.append("task %s (%#x) is not one of the target's" % (t["name"], t["id"]))
    for i, w in want.items():
        g = got.get(i)
        if g is None:
            problems.append("task %s (%#x) missing" % (w["name"], i))
            continue
        for key in ("name", "state"):
            if g[key] != w[key]:
                problems.append("task %s: %s %r, the target says %r" % (w["name"], key, g[key], w[key]))
        if g["thread"] != truth["native_id"]:
            problems.append("task %s: thread %s, its loop runs in %d" % (w["name"], g["thread"], truth["native_id"]))
        if sorted(g["awaited_by"]) != w["awaited_by"]:
            problems.append("task %s: awaited_by %s, the target recorded %s"
                            % (w["name"], [hex(x) for x in g["awaited_by"]], [hex(x) for x in w["awaited_by"]]))
        if w["frames"] is not None:
            gf = [{"function": f["function"], "file": f["file"], "line": f["line"]} for f in g["frames"]]
            if gf != w["frames"]:
                problems.append("task %s: frames [%s], the target's [%s]"
                                % (w["name"], ", ".join(map(frame_text, gf)),
                                   ", ".join(map(frame_text, w["frames"]))))
        else:
            fns = [f["function"] for f in g["frames"]]
            if not fns or fns[-1] != truth["running_functions"][0] or \
                    any(fn not in truth["running_functions"] for fn in fns):
                problems.append("running task %s: frames %s, the target runs only %s, %s outermost"
                                % (w["name"], fns, truth["running_functions"], truth["running_functions"][0]))
    return problems


def check_threads(doc, truth):
    """Each thread's running task (what record --async reads per sample): the loop's
    thread runs main, its task_frames the frames down to main's coroutine; no other
    thread of the stable part runs a task."""
    problems = []
    main = next(t for t in truth["tasks"] if t["state"] == "running")
    for th in doc["threads"]:
        if th["native_id"] == truth["native_id"]:
            fns = [f["function"] for f in th["frames"][:th.get("task_frames", 0)]]
            if th.get("task") != main["id"]:
                problems.append("thread %d: task %s, it runs main (%#x)" % (th["native_id"], th.get("task"), main["id"]))
            elif not fns or fns[-1] != truth["running_functions"][0] or \
                    any(fn not in truth["running_functions"] for fn in fns):
                problems.append("thread %d: task_frames %d (%s), want the frames down to main"
                                % (th["native_id"], th.get("task_frames", 0), fns))
        elif th["name"] != "churner" and th.get("task"):
            problems.append("thread %s runs no task, remora says %#x" % (th["name"], th["task"]))
        if th["native_id"] == truth.get("edge_thread") and th["name"] != "edge-thread":
            problems.append("thread %d is named %r, not edge-thread" % (th["native_id"], th["name"]))
    if truth.get("edge_thread") and not any(th["native_id"] == truth["edge_thread"] for th in doc["threads"]):
        problems.append("thread edge-thread (%d) not in the dump" % truth["edge_thread"])
    return problems


def check_text(text, truth):
    lines = text.splitlines()
    at = {}
    for k, line in enumerate(lines):
        m = re.match(r"^( *)\(T\) (.*) \[(running|pending)\] id 0x([0-9a-f]+)", line)
        if m:
            at[int(m.group(4), 16)] = (k, len(m.group(1)), m.group(2), m.group(3))
    problems = []
    if "(in an await cycle:)" not in lines:
        problems.append("text: the cycle of cycle-a and cycle-b is not reported")
    for w in truth["tasks"]:
        g = at.get(w["id"])
        if g is None or g[2] != w["name"] or g[3] != w["state"]:
            problems.append("text: no line '(T) %s [%s] id %#x'" % (w["name"], w["state"], w["id"]))
            continue
        if w["name"].startswith("cycle-"):
            continue                # one of the two is printed under the other
        for parent in w["awaited_by"][:1]:
            p = at.get(parent)
            if p is None or not (p[0] < g[0] and p[1] < g[1]):
                problems.append("text: %s not indented under its awaiter %#x" % (w["name"], parent))
    return problems


def run_dump(remora, interp, args=(), idle=0):
    with Target(interp, SCRIPT, "truth.json", list(args) + (["--idle", idle] if idle else [])) as t:
        truth = t.wait_ready()
        start = time.monotonic()
        rc, out, err = remora.run(["dump", "-p", t.pid, "--async", "--json"])
        took = time.monotonic() - start
        if rc != 0:
            raise Fail("dump --async --json exited %d: %s" % (rc, tail(err)))
        doc = json.loads(out)
        problems = check_doc(doc, truth) + check_threads(doc, truth)
        rc, text, err = remora.run(["dump", "-p", t.pid, "--async"])
        if rc != 0:
            raise Fail("dump --async exited %d: %s" % (rc, tail(err)))
        if not idle:
            problems += check_text(text, truth)
        if problems:
            raise Fail("; ".join(problems[:8]) + (" (+%d more)" % (len(problems) - 8) if len(problems) > 8 else ""))
        if t.finish() != 0:
            raise Fail("the target failed: %s" % t.log_tail())
    return "%d tasks exact; one dump %.2fs" % (len(truth["tasks"]), took)


def test_churn(remora, interp):
    with Target(interp, SCRIPT, "truth.json", ["--churn"]) as t:
        truth = t.wait_ready()
        moved = churned = 0
        for k in range(CHURN_DUMPS):
            rc, out, err = remora.run(["dump", "-p", t.pid, "--async", "--json"])
            if rc == 5 and not one_line(err) and "kept changing" in err:
                moved += 1
                continue
            if rc != 0:
                raise Fail("dump %d exited %d: %s" % (k, rc, tail(err)))
            doc = json.loads(out)
            problems = check_doc(doc, truth, stable_only=True)
            if problems:
                raise Fail("dump %d: %s" % (k, "; ".join(problems[:6])))
            churned += sum(tk["name"].startswith("churn-") for tk in doc["tasks"])
        if moved > CHURN_DUMPS // 2:
            raise Fail("%d of %d dumps gave up on a moving task list" % (moved, CHURN_DUMPS))
    return "%d of %d dumps exact (%d churn tasks seen in all), %d counted as moving" % (
        CHURN_DUMPS - moved, CHURN_DUMPS, churned, moved)


def test_core(remora, interp):
    """The same checks on a core (gcore) of the target: the tasks as they were when the
    core was made."""
    with Target(interp, SCRIPT, "truth.json") as t:
        truth = t.wait_ready()
        core = gcore(t)
        rc, out, err = remora.run(["dump", "--core", core, "--async", "--json"])
        if rc != 0:
            raise Fail("dump --core --async --json exited %d: %s" % (rc, tail(err)))
        problems = check_doc(json.loads(out), truth)
        if problems:
            raise Fail("; ".join(problems[:8]))
    return "%d tasks exact from the core" % len(truth["tasks"])


def test_bound(remora, interp):
    """More tasks than remora reads (100,000): one line, exit 5, in bounded time."""
    with Target(interp, SCRIPT, "truth.json", ["--idle", BOUND_TASKS]) as t:
        t.wait_ready()
        start = time.monotonic()
        rc, out, err = remora.run(["dump", "-p", t.pid, "--async", "--json"])
        took = time.monotonic() - start
        if rc != 5 or one_line(err) or "100,000" not in err or out:
            raise Fail("dump --async of %d tasks: exit %d, stderr %r, stdout %r"
                       % (BOUND_TASKS, rc, tail(err), out[:100]))
    return "refused in %.2fs: %s" % (took, err.strip())


def test_none(remora, interp):
    with Target(interp, os.path.join(TARGETS, "idle.py"), "ready.json") as t:
        t.wait_ready()
        rc, out, err = remora.run(["dump", "-p", t.pid, "--async", "--json"])
        if rc != 0 or json.loads(out).get("tasks") != []:
            raise Fail("dump --async --json without asyncio: exit %d, %s %s" % (rc, out[:200], tail(err)))
        rc, text, err = remora.run(["dump", "-p", t.pid, "--async"])
        if rc != 0 or "no asyncio tasks" not in text.splitlines():
            raise Fail("dump --async without asyncio: exit %d, %r" % (rc, text[:300]))
    return "empty"


def tests(remora):
    """[(name, function, skip reason or None)] for run.py."""
    out = []
    for i in INTERPRETERS:
        miss = interp_missing(i)
        out.append(("asyncio/dump/%s" % i[0], lambda i=i: run_dump(remora, i), miss))
        out.append(("asyncio/none/%s" % i[0], lambda i=i: test_none(remora, i), miss))
        out.append(("asyncio/pytask/%s" % i[0], lambda i=i: run_dump(remora, i, ["--pytask"]), miss))
        out.append(("asyncio/idle/%s" % i[0], lambda i=i: run_dump(remora, i, idle=IDLE_TASKS), miss))
        out.append(("asyncio/edge-name/%s" % i[0], lambda i=i: run_dump(remora, i, ["--edge-name"]), miss))
        out.append(("asyncio/subclass/%s" % i[0], lambda i=i: run_dump(remora, i, ["--subclass"]), miss))
        out.append(("asyncio/pytask-subclass/%s" % i[0],
                    lambda i=i: run_dump(remora, i, ["--pytask", "--subclass"]), miss))
        if i[0] in ("pyenv-3.12.1", "sid-3.14-pie", "sid-3.15"):
            out.append(("asyncio/churn/%s" % i[0], lambda i=i: test_churn(remora, i), miss))
        if i[0] in ("pyenv-3.12.1", "sid-3.15"):
            out.append(("asyncio/bound/%s" % i[0], lambda i=i: test_bound(remora, i), miss))
        if i[0] in ("pyenv-3.9.18", "pyenv-3.12.1", "debian-3.11-static"):
            out.append(("asyncio/core/%s" % i[0], lambda i=i: test_core(remora, i), miss))
    return out
