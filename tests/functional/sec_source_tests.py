# Security tests of the source text remora shows (issue 46, points 1-4 and the source
# bound of 8): a target's files are read as the target would read them, inside its root,
# with its credentials, never on the host in its place. tests/targets/named_files.py
# gives its code objects names it chooses (code.replace) and parks a thread in each.
#
#   security/source-nobody          a uid 65534 target names a root-only file (0700 dir):
#                                   dump, dump --json and a heatmap hold none of its lines;
#                                   its own readable file still shows its line; --json's
#                                   "sources_unread" and record --stats' "sources:" line
#                                   say why the other was not read
#   security/source-chroot-exit     a chroot target (sid 3.15) that exits while recorded
#                                   (launched with --, and -p: reaped once the status line
#                                   shows samples): the heatmap shows the container's
#                                   file, never the host's of the same name
#   security/source-no-openat2-ENOSYS, -EPERM
#                                   remora under a seccomp filter refusing openat2 (a
#                                   helper the test builds with cc): a chroot target's file
#                                   that is an absolute link resolves inside the chroot,
#                                   never to the host's file; an ordinary file still shows
#                                   (the EPERM run's target runs as uid 65534)
#   security/source-core-root       dump --core CORE --root DIR of a frame naming
#                                   DIR/../..<secret>: nothing of the secret; a file
#                                   inside DIR still shows
#   security/source-spellings       one 16 MB file named by 300 spellings (/d/./././big.py):
#                                   dump and a heatmap under 10 s and 300 MB each, the lines
#                                   still shown

import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

from harness import (CHROOT, HOST_PYTHON, READY_TIMEOUT, TARGETS, Fail, Recording, Skip, gcore,
                     tail)

ORDER = 185           # where run.py runs these tests among the modules' (ascending)

SCRIPT = os.path.join(TARGETS, "named_files.py")
DROP = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
CHROOT_PYTHON = "/usr/bin/python3.15"


def token():
    return os.urandom(6).hex()


def write_lines(path, word, n=40, mode=0o644):
    with open(path, "w") as f:
        for k in range(1, n + 1):
            f.write("%s_%d = %d\n" % (word, k, k))
    os.chmod(path, mode)


class Named:
    """named_files.py run by argv_prefix + python, its script and ready file in run_dir
    (a host directory; 'visible' is how the target names it); names: FILE:LINE."""

    def __init__(self, cmd, run_dir, visible, names, extra=()):
        self.run_dir, self.visible = run_dir, visible
        shutil.copy(SCRIPT, os.path.join(run_dir, "named_files.py"))
        os.chmod(os.path.join(run_dir, "named_files.py"), 0o644)
        self.argv = cmd + ["-I", os.path.join(visible, "named_files.py"),
                           os.path.join(visible, "ready.json")] + list(extra) + list(names)
        self.proc = None

    def start(self):
        self.log = open(os.path.join(self.run_dir, "target.log"), "wb")
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=self.log,
                                     stderr=subprocess.STDOUT)
        self.pid = self.proc.pid
        return self

    def wait_ready(self):
        path = os.path.join(self.run_dir, "ready.json")
        deadline = time.monotonic() + READY_TIMEOUT
        while not os.path.exists(path):
            if self.proc is not None and self.proc.poll() is not None:
                raise Fail("target exited with %d before it was ready: %s"
                           % (self.proc.returncode, self.log_tail()))
            if time.monotonic() > deadline:
                raise Fail("target not ready after %.0fs: %s" % (READY_TIMEOUT, self.log_tail()))
            time.sleep(0.01)
        with open(path) as f:
            return json.load(f)

    def log_tail(self):
        try:
            with open(os.path.join(self.run_dir, "target.log"), "rb") as f:
                return tail(f.read().decode("utf-8", "replace"))
        except OSError:
            return "(no log)"

    def stop(self):
        if self.proc is None:
            return
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def need(tool):
    if shutil.which(tool) is None:
        raise Skip("%s not installed" % tool)


def need_chroot():
    if not os.access(CHROOT + CHROOT_PYTHON, os.X_OK):
        raise Skip("no %s in the chroot %s (tests/provision-chroot.sh)" % (CHROOT_PYTHON, CHROOT))
    need("chroot")


def run_ok(remora, args, what, prefix=()):
    rc, out, err = remora.run(args, prefix=prefix)
    if rc != 0:
        raise Fail("%s exited %d: %s" % (what, rc, tail(err)))
    return out, err


def read(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def test_nobody(remora):
    need("setpriv")
    if not os.access(HOST_PYTHON, os.X_OK):
        raise Skip("%s not found" % HOST_PYTHON)
    probe = subprocess.run(DROP + ["true"], capture_output=True)
    if probe.returncode != 0:
        raise Skip("cannot switch to uid 65534: %s" % tail(probe.stderr.decode()))
    secret_word, public_word = "SECRET" + token(), "PUBLIC" + token()
    sec = tempfile.mkdtemp(prefix="remora-func-sec-")          # 0700, root's
    pub = tempfile.mkdtemp(prefix="remora-func-pub-")
    run = tempfile.mkdtemp(prefix="remora-func-run-")
    t = None
    try:
        os.chmod(pub, 0o755)
        os.chmod(run, 0o777)
        secret, public = os.path.join(sec, "secret.txt"), os.path.join(pub, "mine.py")
        write_lines(secret, secret_word)
        write_lines(public, public_word)
        t = Named(DROP + [HOST_PYTHON], run, run, [secret + ":5", public + ":7"]).start()
        t.wait_ready()
        text, _ = run_ok(remora, ["dump", "-p", t.pid], "dump")
        doc_text, _ = run_ok(remora, ["dump", "--json", "-p", t.pid], "dump --json")
        heat = os.path.join(run, "x.heatmap.html")
        _, rec_err = run_ok(remora, ["record", "-p", t.pid, "--idle", "--max-samples", "20",
                                     "--stats", "-o", heat], "record")
        said = [l for l in rec_err.split("\n") if l.startswith("sources: ")]
        page = read(heat)
        problems = []
        for what, out in (("dump", text), ("dump --json", doc_text), ("the heatmap", page)):
            if secret_word in out:
                problems.append("%s holds the root-only file's lines" % what)
        if "%s_7 = 7" % public_word not in text:
            problems.append("dump does not show the target's own file's line 7")
        doc = json.loads(doc_text)
        lines = [f.get("source") for th in doc["threads"] for f in th["frames"]
                 if f["file"] == public]
        if "%s_7 = 7" % public_word not in lines:
            problems.append("dump --json: the target's own file's line is %r" % lines)
        unread = {u["file"]: u["why"] for u in doc.get("sources_unread", [])}
        if "user" not in unread.get(secret, ""):
            problems.append("dump --json: sources_unread says %r of the root-only file" % unread)
        if not said or "unread=0" in said[0] or "user" not in said[0]:
            problems.append("record --stats does not say the root-only file went unread: %r" % said)
        if "%s_7 = 7" % public_word not in page:
            problems.append("the heatmap does not show the target's own file")
        if problems:
            raise Fail("; ".join(problems))
        return "the root-only file unread (%s), the target's own shown" % unread.get(secret)
    finally:
        if t is not None:
            t.stop()
        for d in (sec, pub, run):
            shutil.rmtree(d, ignore_errors=True)


def twin_dirs():
    """A fresh directory under the chroot's /tmp and one of the same name on the host's
    /tmp: (chroot host path, path as both name it, host path)."""
    for _ in range(20):
        inside = tempfile.mkdtemp(prefix="remora-func-twin-", dir=os.path.join(CHROOT, "tmp"))
        name = inside[len(CHROOT):]
        try:
            os.mkdir(name, 0o755)
        except FileExistsError:
            shutil.rmtree(inside, ignore_errors=True)
            continue
        os.chmod(inside, 0o777)
        return inside, name, name
    raise Fail("no free twin directory name")


def test_chroot_exit(remora):
    need_chroot()
    inside, name, host = twin_dirs()
    box_word, host_word = "CONTAINER" + token(), "HOST" + token()
    try:
        write_lines(os.path.join(inside, "app.py"), box_word)
        write_lines(os.path.join(host, "app.py"), host_word)
        app = os.path.join(name, "app.py") + ":9"
        cmd = ["chroot", CHROOT, CHROOT_PYTHON]
        # launched: the command exits by itself before -d ends
        shutil.copy(SCRIPT, os.path.join(inside, "named_files.py"))
        heat = os.path.join(host, "launched.heatmap.html")
        rc, out, err = remora.run(["record", "-d", "30", "-o", heat, "--"] + cmd +
                                  ["-I", os.path.join(name, "named_files.py"),
                                   os.path.join(name, "ready-launch.json"), "--spin",
                                   "--exit-after", "20000000", app])
        if rc != 0:
            raise Fail("record -- chroot ... exited %d: %s" % (rc, tail(err)))
        pages = [("launched", read(heat))]
        # -p: once the recording has sampled the target, it exits and is reaped (gone
        # from /proc) while remora still records
        t = Named(cmd, inside, name, [app], ["--spin"]).start()
        rec = None
        try:
            t.wait_ready()
            heat = os.path.join(host, "pid.heatmap.html")
            rec = Recording(remora, ["-p", t.pid, "-d", "30", "-o", heat])
            rec.wait_sampled(50)
        finally:
            t.stop()
            if rec is not None:
                rc, out, err = rec.finish()
        if rc not in (0, 2):
            raise Fail("record -p exited %d: %s" % (rc, tail(err)))
        pages.append(("-p", read(heat)))
        problems = []
        for what, page in pages:
            if host_word in page:
                problems.append("%s: the heatmap shows the host's file of the container's name" % what)
            if "%s_9 = 9" % box_word not in page:
                problems.append("%s: the heatmap does not show the container's file" % what)
        if problems:
            raise Fail("; ".join(problems))
        return "the container's file shown after its exit (%s)" % ", ".join(w for w, _ in pages)
    finally:
        shutil.rmtree(inside, ignore_errors=True)
        shutil.rmtree(host, ignore_errors=True)


# A helper that makes openat2 fail with the errno argv[1] names, then execs argv[2:].
SECCOMP_HELPER = r"""
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
#if defined(__x86_64__)
#define ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define ARCH AUDIT_ARCH_AARCH64
#endif
int main(int argc, char **argv)
{
    int e = strcmp(argv[1], "EPERM") == 0 ? EPERM : ENOSYS;
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ARCH, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_openat2, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (unsigned)e),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = { sizeof f / sizeof f[0], f };
    if (argc < 3 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
        perror("seccomp");
        return 97;
    }
    execv(argv[2], argv + 2);
    perror("execv");
    return 98;
}
"""


def build_helper(where):
    need("cc")
    src = os.path.join(where, "no_openat2.c")
    with open(src, "w") as f:
        f.write(SECCOMP_HELPER)
    exe = os.path.join(where, "no_openat2")
    p = subprocess.run(["cc", "-O", "-o", exe, src], capture_output=True)
    if p.returncode != 0:
        raise Skip("cannot build the seccomp helper: %s" % tail(p.stderr.decode()))
    probe = subprocess.run([exe, "ENOSYS", sys.executable, "-c",
                            "import ctypes, sys; libc = ctypes.CDLL(None, use_errno=True); "
                            "r = libc.syscall(437, -100, b'/', b'\\0' * 24, 24); "
                            "sys.exit(0 if r == -1 and ctypes.get_errno() == 38 else 1)"],
                           capture_output=True)
    if probe.returncode != 0:
        raise Skip("the seccomp filter does not refuse openat2 here (%d)" % probe.returncode)
    return exe


def test_no_openat2(remora, errname):
    need_chroot()
    inside, name, host = twin_dirs()
    tools = tempfile.mkdtemp(prefix="remora-func-tools-")
    box_word, host_word, plain_word = "CONTAINER" + token(), "HOST" + token(), "PLAIN" + token()
    t = None
    try:
        helper = build_helper(tools)
        write_lines(os.path.join(inside, "target.py"), box_word)
        write_lines(os.path.join(host, "target.py"), host_word)
        write_lines(os.path.join(inside, "plain.py"), plain_word)
        os.symlink(os.path.join(name, "target.py"), os.path.join(inside, "innocent.py"))
        cmd = ["chroot"] + (["--userspec=65534:65534"] if errname == "EPERM" else []) + \
              [CHROOT, CHROOT_PYTHON]
        t = Named(cmd, inside, name, [os.path.join(name, "innocent.py") + ":4",
                                      os.path.join(name, "plain.py") + ":6"]).start()
        t.wait_ready()
        text, _ = run_ok(remora, ["dump", "-p", t.pid], "dump under the filter",
                         prefix=[helper, errname])
        problems = []
        if host_word in text:
            problems.append("dump shows the host's file the container's link names")
        if "%s_4 = 4" % box_word not in text:
            problems.append("dump does not show the container's file behind its link")
        if "%s_6 = 6" % plain_word not in text:
            problems.append("dump does not show the container's ordinary file")
        if problems:
            raise Fail("; ".join(problems))
        return "openat2 refused (%s): the link resolved inside the chroot%s" % (
            errname, ", target uid 65534" if errname == "EPERM" else "")
    finally:
        if t is not None:
            t.stop()
        shutil.rmtree(inside, ignore_errors=True)
        shutil.rmtree(host, ignore_errors=True)
        shutil.rmtree(tools, ignore_errors=True)


class _Core:
    """What gcore() needs of a target: its pid and a directory for the core."""

    def __init__(self, pid, where):
        self.pid, self.dir = pid, where


def test_core_root(remora):
    need("gcore")
    if not os.access(HOST_PYTHON, os.X_OK):
        raise Skip("%s not found" % HOST_PYTHON)
    secret_word, inside_word = "SECRET" + token(), "INSIDE" + token()
    sec = tempfile.mkdtemp(prefix="remora-func-sec-")
    root = tempfile.mkdtemp(prefix="remora-func-root-")
    run = tempfile.mkdtemp(prefix="remora-func-run-")
    t = None
    try:
        secret = os.path.join(sec, "secret.py")
        write_lines(secret, secret_word, mode=0o600)
        write_lines(os.path.join(root, "inside.py"), inside_word)
        climb = root + "/../.." + secret             # the host's secret, by its name
        t = Named([HOST_PYTHON], run, run, [climb + ":5", root + "/inside.py:8"]).start()
        t.wait_ready()
        core = gcore(_Core(t.pid, run))
        exe = ["--exe", os.path.realpath(HOST_PYTHON)]    # the root holds no interpreter
        text, _ = run_ok(remora, ["dump", "--core", core, "--root", root] + exe,
                         "dump --core --root")
        doc, _ = run_ok(remora, ["dump", "--json", "--core", core, "--root", root] + exe,
                        "dump --json --core --root")
        problems = []
        if secret_word in text or secret_word in doc:
            problems.append("dump --core --root shows a file outside the root")
        if "%s_8 = 8" % inside_word not in text:
            problems.append("dump --core --root does not show the file inside the root")
        if problems:
            raise Fail("; ".join(problems))
        return "ROOT/../.. resolved inside ROOT"
    finally:
        if t is not None:
            t.stop()
        for d in (sec, root, run):
            shutil.rmtree(d, ignore_errors=True)


# remora run under this: its own time and peak memory on stderr's last line
MEASURE = ("import resource, subprocess, sys, time\n"
           "t = time.monotonic(); p = subprocess.run(sys.argv[1:])\n"
           "sys.stderr.write('\\nmeasured %.3f %d\\n' % (time.monotonic() - t, "
           "resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))\n"
           "sys.exit(p.returncode)\n")
SPELLINGS = 300
BIG_BYTES = 16 * 1000 * 1000
MAX_SECONDS, MAX_RSS_KB = 10.0, 300 * 1024


def measured(remora, args, what):
    rc, out, err = remora.run(args, prefix=[sys.executable, "-c", MEASURE])
    last = err.strip().split("\n")[-1].split()
    if rc != 0 or len(last) != 3 or last[0] != "measured":
        raise Fail("%s exited %d: %s" % (what, rc, tail(err)))
    return out, float(last[1]), int(last[2])


def test_spellings(remora):
    if not os.access(HOST_PYTHON, os.X_OK):
        raise Skip("%s not found" % HOST_PYTHON)
    d = tempfile.mkdtemp(prefix="remora-func-big-")
    t = None
    try:
        word = "BIG" + token()
        big = os.path.join(d, "big.py")
        with open(big, "w") as f:
            k, n = 1, 0
            while n < BIG_BYTES:
                line = "%s_%d = %d\n" % (word, k, k)
                f.write(line)
                n += len(line)
                k += 1
        names = ["%s/%sbig.py:%d" % (d, "./" * i, 10 + i) for i in range(SPELLINGS)]
        t = Named([HOST_PYTHON], d, d, names).start()
        t.wait_ready()
        out, secs, rss = measured(remora, ["dump", "-p", t.pid], "dump")
        shown = sum(1 for i in range(SPELLINGS) if "%s_%d = %d" % (word, 10 + i, 10 + i) in out)
        heat = os.path.join(d, "x.heatmap.html")
        _, hsecs, hrss = measured(remora, ["record", "-p", t.pid, "--idle", "--max-samples", "5",
                                           "-o", heat], "record to a heatmap")
        problems = []
        if secs > MAX_SECONDS or rss > MAX_RSS_KB:
            problems.append("dump took %.1f s and %d MB" % (secs, rss // 1024))
        if hsecs > MAX_SECONDS or hrss > MAX_RSS_KB:
            problems.append("record to a heatmap took %.1f s and %d MB" % (hsecs, hrss // 1024))
        if shown != SPELLINGS:
            problems.append("dump shows %d of the %d frames' lines" % (shown, SPELLINGS))
        if "%s_10 = 10" % word not in read(heat):
            problems.append("the heatmap shows no line of the file")
        if problems:
            raise Fail("; ".join(problems))
        return "dump %.2f s %d MB, heatmap %.2f s %d MB, %d lines shown" % (
            secs, rss // 1024, hsecs, hrss // 1024, shown)
    finally:
        if t is not None:
            t.stop()
        shutil.rmtree(d, ignore_errors=True)


def tests(remora):
    return [
        ("security/source-nobody", lambda: test_nobody(remora), None),
        ("security/source-chroot-exit", lambda: test_chroot_exit(remora), None),
        ("security/source-no-openat2-ENOSYS", lambda: test_no_openat2(remora, "ENOSYS"), None),
        ("security/source-no-openat2-EPERM", lambda: test_no_openat2(remora, "EPERM"), None),
        ("security/source-core-root", lambda: test_core_root(remora), None),
        ("security/source-spellings", lambda: test_spellings(remora), None),
    ]
