# The Python module's reuse of each thread's unchanged frames between calls (issue 47's
# speed point): RemoteUnwinder.get_stack_trace() hands back the objects of the frames that
# did not change since the last call, counted from the outermost, without looking them up.
#
#   library/python-reuse/TARGET  inner_steps.py under TARGET (pyenv 3.9, 3.12, sid 3.15):
#                              its main thread's inner frames change step by step (grown,
#                              shrunk, the innermost at another line, a middle frame at
#                              another line with the same functions above it, unchanged)
#                              while its outer frames stay; read from Debian's 3.11 by two
#                              unwinders kept across the steps (cache_frames True and
#                              False), twice a step: every reading's main thread (funcname,
#                              filename, lineno) equal to the target's own frames at that
#                              step; a list handed back and then changed by the caller does
#                              not change the next result, and no list handed back is
#                              changed by a later call
#
# Under ASan (--remora build-asan/remora) the module is library_tests' sanitized build.
# Standard library only.

import json
import os
import subprocess

from harness import INTERPRETERS, SANITIZER_MARKS, TARGETS, Fail, Target, interp_missing, tail
from library_tests import PyModule
from targets import READ_SYSCALL

ORDER = 321           # after library_tests (its module build)

REUSE_TARGETS = ("pyenv-3.9.18", "pyenv-3.12.1", "sid-3.15")
STEPS = 9             # inner_steps.py's STEPS

REUSE_DRIVER = r"""
import json, os, sys, time
import remora
pid, path, fd, nsteps, read_nr = (int(sys.argv[1]), sys.argv[2], int(sys.argv[3]),
                                  int(sys.argv[4]), sys.argv[5])
unwinders = [(cache, remora.RemoteUnwinder(pid, all_threads=True, cache_frames=cache))
             for cache in (True, False)]


def wait_step(k):
    deadline = time.monotonic() + 60
    while not os.path.exists("%s.%d" % (path, k)):
        if time.monotonic() > deadline:
            sys.exit("the target wrote no step %d" % k)
        time.sleep(0.01)
    with open("%s.%d" % (path, k)) as f:
        truth = json.load(f)
    # the truth is written on the line the thread then blocks on: read once it is there
    while read_nr != "-":
        with open("/proc/%d/syscall" % pid) as f:
            if f.read().split()[:2] == [read_nr, "0x0"]:
                break
        if time.monotonic() > deadline:
            sys.exit("step %d: the main thread never blocked in read(0)" % k)
        time.sleep(0.005)
    return [[f["function"], f["file"], f["line"]] for f in truth["frames"]]


def main_frames(trace):
    for interp in trace:
        for t in interp.threads:
            if t.thread_id == pid:
                return t.frame_info
    return None


problems, given = [], []
for k in range(nsteps):
    want = wait_step(k)
    for cache, u in unwinders:
        for rep in range(2):
            frames = main_frames(u.get_stack_trace())
            got = None if frames is None else [
                [f.funcname, f.filename, f.location.lineno if f.location else 0]
                for f in frames]
            if got != want:
                problems.append("step %d, cache_frames=%s, call %d: %s, the target's own %s"
                                % (k, cache, rep + 1, got, want))
            if frames is not None:
                given.append((k, cache, rep, frames, list(frames)))
                if rep == 0:
                    # the caller's list: changing it must change nothing of the next call
                    frames.append("the caller's")
                    given[-1][4].append("the caller's")
    os.write(fd, b"\n")
for k, cache, rep, frames, copy in given:
    if frames != copy:
        problems.append("step %d, cache_frames=%s, call %d: the list handed back changed "
                        "later" % (k, cache, rep + 1))
print(json.dumps({"problems": problems[:8]}))
"""


def test_reuse(remora, target):
    mod = PyModule.get(remora)
    host = next(i for i in INTERPRETERS if i[0] == "debian-3.11-static")
    with Target(target, os.path.join(TARGETS, "inner_steps.py"), "step") as t:
        fd = t.proc.stdin.fileno()
        p = subprocess.run([host[1], "-c", REUSE_DRIVER, str(t.pid), t.host_path(t.out),
                            str(fd), str(STEPS), READ_SYSCALL or "-"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           env=dict(os.environ, **mod.env), pass_fds=(fd,), timeout=300)
        for mark in SANITIZER_MARKS:
            if mark in p.stderr:
                raise Fail("sanitizer report: %s" % tail(p.stderr, 8))
        if p.returncode != 0:
            raise Fail("exit %d: %s; target: %s" % (p.returncode, tail(p.stderr, 6),
                                                    t.log_tail()))
        problems = json.loads(p.stdout)["problems"]
        if problems:
            raise Fail("; ".join(problems))
        code = t.finish()
        if code != 0:
            raise Fail("the target exited with %d: %s" % (code, t.log_tail()))
    return "%d steps, each read twice with cache_frames True and False: every reading equal " \
           "to the target's own frames; no list handed back changed later" % STEPS


def tests(remora):
    """[(name, function, skip reason or None)] for run.py."""
    host = next(i for i in INTERPRETERS if i[0] == "debian-3.11-static")
    out = []
    for name in REUSE_TARGETS:
        target = next(i for i in INTERPRETERS if i[0] == name)
        out.append(("library/python-reuse/" + name,
                    (lambda b=target: test_reuse(remora, b)),
                    interp_missing(host) or interp_missing(target)))
    return out
