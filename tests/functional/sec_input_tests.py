# Functional tests of remora's input bounds (issue 46, points 8 and 10): every file remora
# reads has a bound and a clear error, and a kernel thread is not a Python process.
#
#   security/input-convert-dev-zero   `convert /dev/zero`, `convert X --diff /dev/zero` and
#                                     `record --diff /dev/zero`: exit 1 within 5 s, one line
#                                     naming the file as a character device, under 256 MB
#                                     of memory (an address-space limit of 1 GiB where the
#                                     build allows one: not under ASan)
#   security/input-convert-fifo       a FIFO nobody writes to as convert's input and as
#                                     --diff: the same (it used to block in open for ever)
#   security/input-core-type          `dump --core` of a FIFO nobody writes to, /dev/null,
#                                     /dev/zero and a directory: the same, the file named
#   security/input-core-fifo-files    a static interpreter's core with --exe a FIFO (exit
#                                     1, one line) and with --root a directory whose
#                                     interpreter is a FIFO (no hang: exit 4, one line)
#   security/input-long-line          collapsed stacks whose line is 2 MB (a valid stack
#                                     otherwise), first or after a good one: refused, exit
#                                     1, one line naming the line as over 1 MB, under
#                                     256 MB of memory
#   security/input-remora-node-bound  a 21-byte .remora recording naming node 2^27:
#                                     refused as damaged, under 256 MB (it used to take a
#                                     table of 2^27 nodes, 512 MB, written in full)
#   security/input-heatmap-80k        80,000 distinct stacks `main (app.py:1);fN
#                                     (fileN.py:N)` converted to a heatmap within 10 s
#                                     (was 20-55 s: quadratic), every line in its data
#   security/input-kernel-thread      `dump -p 2`, `record -p 2 -d 1`, `top -p 2 -d 1`
#                                     (pid 2 a kernel thread, else SKIP): exit 4, one line
#                                     saying it is not a Python process (was "no process
#                                     with pid 2", exit 2)

import json
import os
import re
import resource
import shutil
import subprocess
import tempfile
import time

from harness import INTERPRETERS, TARGETS, Fail, Skip, Target, gcore, interp_missing, one_line, tail

ORDER = 255           # where run.py runs these tests among the modules' (ascending)

LIMIT_S = 5.0                   # a refusal is found at once (ms); a hang is killed here
AS_LIMIT = 1 << 30              # the address space a refusing remora runs in, where it can
RSS_LIMIT = 256 << 20           # its peak memory (bytes): reading 1 MB lines takes ~10 MB
HEATMAP_LINES = 80000
HEATMAP_S = 10.0                # 0.7 s here with the fix, 20 s without (55 s seen)
PF_KTHREAD = 0x00200000


AS_WORKS = {}                   # remora's path -> whether it starts under AS_LIMIT


def address_space_limit_works(remora):
    """Whether remora starts under RLIMIT_AS of AS_LIMIT (an ASan build reserves terabytes
    of shadow and does not): then each bounded run gets it, else only the RSS check."""
    if remora.path not in AS_WORKS:
        p = subprocess.run(remora.argv(["--version"]), stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, preexec_fn=limit_as, timeout=30)
        AS_WORKS[remora.path] = p.returncode == 0
    return AS_WORKS[remora.path]


def limit_as():
    resource.setrlimit(resource.RLIMIT_AS, (AS_LIMIT, AS_LIMIT))


def bounded_run(remora, args, cwd=None, limit_s=LIMIT_S):
    """Runs remora with stdin /dev/null (under AS_LIMIT where it can), killed after
    limit_s. Returns (rc, stdout, stderr, seconds); Fail on a hang, a signal or a sanitizer
    report."""
    argv = remora.argv(args)
    start = time.monotonic()
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, cwd=cwd, start_new_session=True,
                         preexec_fn=limit_as if address_space_limit_works(remora) else None)
    try:
        out, err = p.communicate(timeout=limit_s)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, 9)
        p.communicate()
        raise Fail("`remora %s` still running after %.0f s: killed (a hang)"
                   % (" ".join(map(str, args)), limit_s))
    spent = time.monotonic() - start
    out, err = out.decode("utf-8", "replace"), err.decode("utf-8", "replace")
    remora.judge(args, p.returncode, out, err)
    return p.returncode, out, err, spent


def peak_rss_run(remora, args, cwd=None, limit_s=LIMIT_S):
    """bounded_run's result with the peak RSS (bytes) of remora alone: it runs under a
    small Python that waits for it with wait4 (each child's own rusage)."""
    helper = (
        "import os, resource, sys, json, signal\n"
        "limit = float(sys.argv[1]); aslimit = int(sys.argv[2]); report = int(sys.argv[3])\n"
        "argv = sys.argv[4:]\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    os.close(report)\n"
        "    os.setsid()\n"
        "    if aslimit: resource.setrlimit(resource.RLIMIT_AS, (aslimit, aslimit))\n"
        "    fd = os.open('/dev/null', os.O_RDONLY); os.dup2(fd, 0)\n"
        "    os.execvp(argv[0], argv)\n"
        "signal.signal(signal.SIGALRM, lambda *a: os.killpg(pid, 9))\n"
        "signal.setitimer(signal.ITIMER_REAL, limit)\n"
        "while True:\n"
        "    try:\n"
        "        _, status, ru = os.wait4(pid, 0); break\n"
        "    except InterruptedError:\n"
        "        continue\n"
        "signal.setitimer(signal.ITIMER_REAL, 0)\n"
        "sys.stdout.flush()\n"
        "os.write(report, json.dumps([status, ru.ru_maxrss * 1024]).encode())\n")
    argv = remora.argv(args)
    r, w = os.pipe()
    start = time.monotonic()
    p = subprocess.Popen(["/usr/bin/python3", "-c", helper, str(limit_s),
                          str(AS_LIMIT if address_space_limit_works(remora) else 0), str(w)] + argv,
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         cwd=cwd, pass_fds=(w,))
    os.close(w)
    try:
        out, err = p.communicate(timeout=limit_s + 30)
        report = os.read(r, 4096)
    finally:
        os.close(r)
    spent = time.monotonic() - start
    status, rss = json.loads(report)
    out, err = out.decode("utf-8", "replace"), err.decode("utf-8", "replace")
    if os.WIFSIGNALED(status) and os.WTERMSIG(status) == 9 and spent >= limit_s:
        raise Fail("`remora %s` still running after %.0f s: killed (a hang), %d MB"
                   % (" ".join(map(str, args)), limit_s, rss >> 20))
    rc = os.WEXITSTATUS(status) if os.WIFEXITED(status) else -os.WTERMSIG(status)
    remora.judge(args, rc, out, err)
    return rc, out, err, spent, rss


def expect_refused(remora, args, want_rc, words, what, cwd=None):
    """args must exit want_rc within LIMIT_S with one stderr line holding each of words,
    under RSS_LIMIT. Returns a note of the time and memory it took."""
    rc, out, err, spent, rss = peak_rss_run(remora, args, cwd)
    if rc != want_rc:
        raise Fail("%s: exit %d, want %d (%.1f s, %d MB); stderr: %s"
                   % (what, rc, want_rc, spent, rss >> 20, tail(err)))
    bad = one_line(err)
    if bad:
        raise Fail("%s: %s" % (what, bad))
    missing = [w for w in words if w not in err]
    if missing:
        raise Fail("%s: the line does not say %s: %s" % (what, " or ".join(map(repr, missing)),
                                                         err.strip()))
    if rss > RSS_LIMIT:
        raise Fail("%s: took %d MB of memory (bound %d MB)" % (what, rss >> 20, RSS_LIMIT >> 20))
    return "%s %.2f s %d MB" % (what, spent, rss >> 20)


def test_dev_zero(remora):
    tmp = tempfile.mkdtemp(prefix="remora-sec-input-")
    try:
        good = os.path.join(tmp, "good.collapsed")
        with open(good, "w") as f:
            f.write("thread main (1);main (app.py:1);work (app.py:5) 7\n")
        notes = [
            expect_refused(remora, ["convert", "/dev/zero", "-o", os.path.join(tmp, "a.html")], 1,
                           ["/dev/zero", "character device"], "convert /dev/zero"),
            expect_refused(remora, ["convert", good, "--diff", "/dev/zero", "-o",
                                    os.path.join(tmp, "b.html")], 1,
                           ["/dev/zero", "character device"], "convert --diff /dev/zero"),
            expect_refused(remora, ["record", "--diff", "/dev/zero", "-d", "1", "-o",
                                    os.path.join(tmp, "c.html"), "--", "/bin/true"], 1,
                           ["/dev/zero", "character device"], "record --diff /dev/zero"),
        ]
        left = [n for n in os.listdir(tmp) if n != "good.collapsed"]
        if left:
            raise Fail("outputs written though the input was refused: %s" % left)
        return "; ".join(notes)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_fifo(remora):
    tmp = tempfile.mkdtemp(prefix="remora-sec-input-")
    try:
        fifo = os.path.join(tmp, "in.fifo")
        os.mkfifo(fifo)
        good = os.path.join(tmp, "good.collapsed")
        with open(good, "w") as f:
            f.write("main (app.py:1) 3\n")
        notes = [
            expect_refused(remora, ["convert", fifo, "-o", os.path.join(tmp, "a.html")], 1,
                           [fifo, "FIFO"], "convert FIFO"),
            expect_refused(remora, ["convert", good, "--diff", fifo, "-o",
                                    os.path.join(tmp, "b.html")], 1, [fifo, "FIFO"],
                           "convert --diff FIFO"),
        ]
        return "; ".join(notes)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_core_type(remora):
    tmp = tempfile.mkdtemp(prefix="remora-sec-input-")
    try:
        fifo = os.path.join(tmp, "core.fifo")
        os.mkfifo(fifo)
        notes = []
        for path, kind in ((fifo, "FIFO"), ("/dev/null", "character device"),
                           ("/dev/zero", "character device"), (tmp, "directory")):
            notes.append(expect_refused(remora, ["dump", "--core", path], 1, [path, kind],
                                        "dump --core %s" % kind))
        return "; ".join(notes)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_core_fifo_files(remora):
    """A real core whose executable is given, or found under --root, as a FIFO: never a
    hang. (gcore of a static interpreter: the core names one file, the executable.)"""
    by_name = {i[0]: i for i in INTERPRETERS}
    interp = by_name["debian-3.11-static"]
    if interp_missing(interp):
        raise Skip(interp_missing(interp))
    with Target(interp, os.path.join(TARGETS, "known_stacks.py"), "truth.json") as t:
        t.wait_ready()
        t.wait_main_in_read()
        core = gcore(t)
        try:
            fifo = os.path.join(t.dir, "python.fifo")
            os.mkfifo(fifo)
            root = os.path.join(t.dir, "fifo-root")
            exe_dir = os.path.join(root, os.path.dirname(interp[1]).lstrip("/"))
            os.makedirs(exe_dir)
            os.mkfifo(os.path.join(exe_dir, os.path.basename(interp[1])))
            notes = [
                expect_refused(remora, ["dump", "--core", core, "--exe", fifo], 1,
                               [fifo, "FIFO"], "--exe FIFO"),
                expect_refused(remora, ["dump", "--core", core, "--root", root], 4,
                               ["FIFO"], "--root naming a FIFO"),
            ]
            return "; ".join(notes)
        finally:
            os.unlink(core)


def test_long_line(remora):
    tmp = tempfile.mkdtemp(prefix="remora-sec-input-")
    try:
        long_stack = "main (app.py:1);" + "f" * (2 << 20) + " (app.py:2) 1\n"
        notes = []
        for name, text, line in (("first", long_stack, 1),
                                 ("second", "main (app.py:1) 5\n" + long_stack, 2)):
            path = os.path.join(tmp, name + ".collapsed")
            with open(path, "w") as f:
                f.write(text)
            notes.append(expect_refused(remora, ["convert", path, "-o", os.path.join(tmp, name + ".html")],
                                        1, [path, "line %d" % line, "longer than 1 MB"],
                                        "a 2 MB line %s" % name))
            if os.path.exists(os.path.join(tmp, name + ".html")):
                raise Fail("an output was written from a refused input")
        return "; ".join(notes)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def varint(v):
    out = bytearray()
    while True:
        b, v = v & 0x7f, v >> 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def test_remora_node_bound(remora):
    tmp = tempfile.mkdtemp(prefix="remora-sec-input-")
    try:
        path = os.path.join(tmp, "far.remora")
        # a string, then thread 0 (tid 1, that name) whose root is node 2^27 - 1
        with open(path, "wb") as f:
            f.write(b"REMORA\0\3" + b"S" + varint(1) + b"x" + b"T" + varint(0) + varint(1) +
                    varint(0) + varint((1 << 27) - 1) + b"Z")
        return expect_refused(remora, ["convert", path, "-o", os.path.join(tmp, "x.html")], 1,
                              [path, "damaged"], "node 2^27 in 21 bytes")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


HEATMAP_DATA = re.compile(r'<script type="application/json" id="heatmap-data">(.*?)</script>', re.S)


def test_heatmap_80k(remora):
    tmp = tempfile.mkdtemp(prefix="remora-sec-input-")
    try:
        src = os.path.join(tmp, "many.collapsed")
        with open(src, "w") as f:
            for i in range(1, HEATMAP_LINES + 1):
                f.write("thread main (1);main (app.py:1);f%d (file%d.py:%d) 1\n" % (i, i, i))
        out = os.path.join(tmp, "many.heatmap.html")
        rc, _, err, spent = bounded_run(remora, ["convert", src, "-o", out], cwd=tmp,
                                        limit_s=HEATMAP_S)
        if rc != 0:
            raise Fail("convert to a heatmap exited %d: %s" % (rc, tail(err)))
        with open(out, encoding="utf-8") as f:
            m = HEATMAP_DATA.search(f.read())
        if m is None:
            raise Fail("the heatmap has no heatmap-data element")
        data = json.loads(m.group(1))
        seen = {(fl["file"], ln[0]) for fl in data["files"] for ln in fl["lines"]}
        want = {("file%d.py" % i, i) for i in range(1, HEATMAP_LINES + 1)} | {("app.py", 1)}
        if seen != want:
            raise Fail("the heatmap's lines differ from the input's: %d missing (e.g. %s), "
                       "%d not in it" % (len(want - seen), sorted(want - seen)[:3],
                                         len(seen - want)))
        if data["total"] != HEATMAP_LINES:
            raise Fail("the heatmap counts %d samples, want %d" % (data["total"], HEATMAP_LINES))
        return "%d lines in %d files in %.2f s (bound %.0f s)" % (len(seen), len(data["files"]),
                                                                 spent, HEATMAP_S)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def kernel_thread_pid():
    """2 if pid 2 is a kernel thread here (PF_KTHREAD in its stat flags), else Skip."""
    try:
        with open("/proc/2/stat") as f:
            text = f.read()
    except OSError as e:
        raise Skip("no pid 2 here (%s): a kernel thread cannot be named" % e.strerror)
    flags = int(text[text.rindex(")") + 2:].split()[6])
    if not flags & PF_KTHREAD:
        raise Skip("pid 2 is not a kernel thread here (flags %#x): a PID namespace?" % flags)
    return 2


def test_kernel_thread(remora):
    pid = kernel_thread_pid()
    tmp = tempfile.mkdtemp(prefix="remora-sec-input-")
    try:
        out = os.path.join(tmp, "x.collapsed")
        for args in (["dump", "-p", pid], ["dump", "-p", pid, "--json"],
                     ["record", "-p", pid, "-d", "1", "-o", out], ["top", "-p", pid, "-d", "1"]):
            rc, _, err, spent = bounded_run(remora, args)
            what = "`remora %s`" % " ".join(map(str, args))
            if rc != 4:
                raise Fail("%s: exit %d, want 4; stderr: %s" % (what, rc, tail(err)))
            bad = one_line(err)
            if bad:
                raise Fail("%s: %s" % (what, bad))
            if "not a Python process" not in err or "kernel thread" not in err:
                raise Fail("%s: the line does not say pid %d is a kernel thread, not a Python "
                           "process: %s" % (what, pid, err.strip()))
        if os.path.exists(out):
            raise Fail("record -p %d wrote %s" % (pid, out))
        return "dump, dump --json, record and top: exit 4, %r" % err.strip()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def tests(remora):
    return [
        ("security/input-convert-dev-zero", lambda: test_dev_zero(remora), None),
        ("security/input-convert-fifo", lambda: test_fifo(remora), None),
        ("security/input-core-type", lambda: test_core_type(remora), None),
        ("security/input-core-fifo-files", lambda: test_core_fifo_files(remora), None),
        ("security/input-long-line", lambda: test_long_line(remora), None),
        ("security/input-remora-node-bound", lambda: test_remora_node_bound(remora), None),
        ("security/input-heatmap-80k", lambda: test_heatmap_80k(remora), None),
        ("security/input-kernel-thread", lambda: test_kernel_thread(remora), None),
    ]
