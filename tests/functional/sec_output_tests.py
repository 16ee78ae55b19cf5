# What remora writes is the user's (issue 46, points 5, 6, 7 and 9): outputs made with the
# user's umask, never through another user's link or into another user's FIFO or file in
# a sticky world-writable directory, a --control FIFO only one the user alone may write,
# and a profile whose output is gone at the end kept elsewhere, the one line saying where.
# 'nobody' is uid 65534 through setpriv; the sticky directories are made here (mode 1777)
# rather than the real /tmp. The target is cpu_shares.py under the host's python3.

import errno
import json
import os
import re
import select
import shutil
import stat
import subprocess
import time

from harness import (HOST_PYTHON, STOP_TIMEOUT, TARGETS, Fail, Skip, Target, one_line, tail,
                     workdir)
from formats import parse_collapsed

ORDER = 345           # where run.py runs these tests among the modules' (ascending)

NOBODY = 65534
SETPRIV = ["setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY, "--clear-groups"]
ACK_TIMEOUT = 10.0
# every format record writes, by its ending (raw and jsonl included)
ENDINGS = (".html", ".svg", ".gecko.json", ".json", ".collapsed", ".table", ".pstats", ".pb.gz",
           ".heatmap.html", ".jsonl", ".remora")


def target():
    return Target(("host-python3", HOST_PYTHON, None), os.path.join(TARGETS, "cpu_shares.py"),
                  "ready.json")


def needs_host():
    if not os.access(HOST_PYTHON, os.X_OK):
        raise Skip("%s not found" % HOST_PYTHON)
    if shutil.which("setpriv") is None:
        raise Skip("setpriv (util-linux) not found: it runs commands as nobody")


def as_nobody(argv):
    """Runs argv as nobody; Fail if it fails."""
    p = subprocess.run(SETPRIV + list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode != 0:
        raise Fail("as nobody, %s exited %d: %s" % (" ".join(argv), p.returncode,
                                                   tail(p.stderr.decode("utf-8", "replace"))))


def sticky_dir(d, name="shared"):
    """A directory anyone may write, sticky, as /tmp: in d (made searchable by nobody)."""
    os.chmod(d, 0o755)
    s = os.path.join(d, name)
    os.mkdir(s)
    os.chmod(s, 0o1777)
    return s


def umasked(mask):
    """The prefix that runs a command under umask mask."""
    return ["sh", "-c", 'umask %03o && exec "$@"' % mask, "sh"]


def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def fingerprint(path):
    st = os.lstat(path)
    with open(path, "rb") as f:
        return f.read(), stat.S_IMODE(st.st_mode), st.st_uid


# --- point 5: the umask -------------------------------------------------------------------

def test_umask(remora):
    """Under umask 077 every file record writes (each format, a heatmap's DIR/index.html,
    an --every period, a snapshot's name aside) and convert writes is 0600; under 022,
    0644."""
    needs_host()
    d = workdir()
    problems, seen = [], 0
    try:
        with target() as t:
            t.wait_ready()
            for mask, want in ((0o077, 0o600), (0o022, 0o644)):
                sub = os.path.join(d, "m%03o" % mask)
                os.mkdir(sub)
                heat = os.path.join(sub, "heat")
                os.mkdir(heat)
                outs = [os.path.join(sub, "p" + e) for e in ENDINGS]
                args = ["record", "-p", t.pid, "-d", "0.5", "--idle"]
                for o in outs:
                    args += ["-o", o]
                args += ["-o", heat, "-f", "heatmap"]
                rc, _, err = remora.run(args, prefix=umasked(mask))
                if rc != 0:
                    raise Fail("record under umask %03o exited %d: %s" % (mask, rc, tail(err)))
                rc, _, err = remora.run(["record", "-p", t.pid, "-d", "1.2", "--every", "1",
                                         "--idle", "-o", os.path.join(sub, "e-%n.collapsed")],
                                        prefix=umasked(mask))
                if rc != 0:
                    raise Fail("record --every under umask %03o exited %d: %s" % (mask, rc, tail(err)))
                conv = os.path.join(sub, "c.html")
                rc, _, err = remora.run(["convert", outs[-1], "-o", conv], prefix=umasked(mask))
                if rc != 0:
                    raise Fail("convert under umask %03o exited %d: %s" % (mask, rc, tail(err)))
                files = outs + [os.path.join(heat, "index.html"), os.path.join(sub, "e-1.collapsed"),
                                conv]
                for f in files:
                    if not os.path.exists(f):
                        problems.append("umask %03o: %s not written" % (mask, os.path.relpath(f, d)))
                    elif mode(f) != want:
                        problems.append("umask %03o: %s is %04o, want %04o"
                                        % (mask, os.path.relpath(f, d), mode(f), want))
                    seen += 1
    finally:
        shutil.rmtree(d, ignore_errors=True)
    if problems:
        raise Fail("; ".join(problems))
    return "%d files, each 0600 under umask 077 and 0644 under 022" % seen


# --- point 7: links, FIFOs and files of another user in a sticky directory ------------------

def test_foreign_link(remora):
    """In a sticky directory anyone may write: nobody's symlink to a root-owned victim
    (given as -o, reached through a link of root's, and as a directory on the way), nobody's
    FIFO and nobody's file (a jsonl stream written into it would be theirs to read) are
    refused before sampling, exit 1, one line, the victim as it was; a link root owns
    there is followed as before."""
    needs_host()
    d = workdir()
    reader = None
    try:
        s = sticky_dir(d)
        victim = os.path.join(d, "victim")
        with open(victim, "w") as f:
            f.write("root's own data\n")
        os.chmod(victim, 0o600)
        vdir = os.path.join(d, "vdir")
        os.mkdir(vdir, 0o700)
        before = fingerprint(victim)
        as_nobody(["ln", "-s", victim, os.path.join(s, "prof.html")])
        as_nobody(["ln", "-s", vdir, os.path.join(s, "dir")])
        as_nobody(["mkfifo", "-m", "666", os.path.join(s, "fifo")])
        as_nobody(["sh", "-c", 'umask 0 && : > "$0"', os.path.join(s, "theirs.jsonl")])
        own_link = os.path.join(d, "via.html")
        os.symlink(os.path.join(s, "prof.html"), own_link)
        # a reader, so that a remora that opens the FIFO is not left waiting for one
        reader = os.open(os.path.join(s, "fifo"), os.O_RDONLY | os.O_NONBLOCK)
        cases = (("nobody's link to the victim", ["-o", os.path.join(s, "prof.html")], "symlink"),
                 ("a link of root's to nobody's link", ["-o", own_link], "symlink"),
                 ("nobody's link as a directory", ["-o", os.path.join(s, "dir", "p.html")], "symlink"),
                 ("nobody's FIFO", ["-o", os.path.join(s, "fifo"), "-f", "collapsed"], "FIFO"),
                 ("nobody's file, a jsonl stream", ["-o", os.path.join(s, "theirs.jsonl")], "file"))
        problems = []
        with target() as t:
            t.wait_ready()
            for what, args, word in cases:
                rc, _, err = remora.run(["record", "-p", t.pid, "-d", "0.3"] + args)
                bad = one_line(err)
                if rc != 1 or bad or "sticky" not in err or word not in err:
                    problems.append("%s: exit %d, want 1 with one line naming the %s in a sticky "
                                    "directory: %s" % (what, rc, word, bad or tail(err)))
            after = fingerprint(victim)
            if after != before:
                problems.append("the victim changed: %d bytes mode %04o uid %d, was %d bytes mode %04o uid %d"
                                % (len(after[0]), after[1], after[2], len(before[0]), before[1], before[2]))
            if os.listdir(vdir):
                problems.append("written into the directory nobody's link names: %s" % os.listdir(vdir))
            # a link root owns in the sticky directory: followed, the file it names written
            mine = os.path.join(d, "mine.html")
            os.symlink(mine, os.path.join(s, "root.html"))
            rc, _, err = remora.run(["record", "-p", t.pid, "-d", "0.3", "--idle",
                                     "-o", os.path.join(s, "root.html")])
            if rc != 0 or not os.path.isfile(mine) or not os.path.islink(os.path.join(s, "root.html")):
                problems.append("root's own link in the sticky directory: exit %d, %s: %s"
                                % (rc, "file written" if os.path.isfile(mine) else "no file", tail(err)))
        if problems:
            raise Fail("; ".join(problems))
        return "%d refused with one line, the victim unchanged; root's own link followed" % len(cases)
    finally:
        if reader is not None:
            os.close(reader)
        shutil.rmtree(d, ignore_errors=True)


# --- point 6: the control FIFO ----------------------------------------------------------

def wait_opened(path, proc):
    """Waits until remora has path open for reading (a writer's non-blocking open works);
    returns the write descriptor."""
    deadline = time.monotonic() + ACK_TIMEOUT
    while True:
        try:
            return os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as e:
            if e.errno not in (errno.ENXIO, errno.ENOENT) or time.monotonic() > deadline:
                raise Fail("cannot open the control FIFO %s: %s" % (path, e))
        if proc.poll() is not None:
            raise Fail("remora exited %d before it opened %s" % (proc.returncode, path))
        time.sleep(0.01)            # polling for remora's open, not waiting for a time


def read_answer(ackfd, buf=b""):
    deadline = time.monotonic() + ACK_TIMEOUT
    while b"\n" not in buf:
        if time.monotonic() > deadline:
            raise Fail("no answer on the ack FIFO in %.0fs" % ACK_TIMEOUT)
        if select.select([ackfd], [], [], 0.1)[0]:
            buf += os.read(ackfd, 256)
    line, rest = buf.split(b"\n", 1)
    return line.decode(), rest


def start_record(remora, args, cwd=None):
    return subprocess.Popen(remora.argv(["record"] + [str(a) for a in args]), cwd=cwd,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)


def finish(proc):
    try:
        out, err = proc.communicate(timeout=STOP_TIMEOUT + 20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise Fail("remora did not end after stop")
    return proc.returncode, err.decode("utf-8", "replace")


def test_control(remora):
    """--control refuses a FIFO it did not make unless the user running it owns it and no
    one else may write it: nobody's FIFO of mode 666 in a sticky directory, and root's of
    mode 0622, exit 1 with one line before sampling (no output written). A FIFO remora
    makes is 0600 and root's, and works (stop ends the run); root's own FIFO of mode 0600
    works as the ack FIFO."""
    needs_host()
    d = workdir()
    try:
        s = sticky_dir(d)
        theirs = os.path.join(s, "x.ctl")
        as_nobody(["mkfifo", "-m", "666", theirs])
        wide = os.path.join(d, "wide.ctl")
        os.mkfifo(wide)
        os.chmod(wide, 0o622)
        problems = []
        with target() as t:
            t.wait_ready()
            for what, fifo in (("nobody's FIFO, mode 666", theirs), ("root's FIFO, mode 0622", wide)):
                out = os.path.join(d, "never.collapsed")
                rc, _, err = remora.run(["record", "-p", t.pid, "-d", "2", "--control", "fifo:" + fifo,
                                         "-o", out])
                bad = one_line(err)
                if rc != 1 or bad or os.path.exists(out):
                    problems.append("%s: exit %d, %s, want 1, one line, nothing sampled: %s"
                                    % (what, rc, "a profile written" if os.path.exists(out) else "no profile",
                                       bad or tail(err)))
            # remora's own FIFO (not there yet), and root's own ack FIFO (0600)
            ctl, ack = os.path.join(d, "new.ctl"), os.path.join(d, "ack")
            os.mkfifo(ack, 0o600)
            ackfd = os.open(ack, os.O_RDWR | os.O_NONBLOCK)
            out = os.path.join(d, "p.collapsed")
            proc = start_record(remora, ["-p", t.pid, "-d", "60", "--idle",
                                         "--control", "fifo:%s,%s" % (ctl, ack), "-o", out])
            try:
                fd = wait_opened(ctl, proc)
                st = os.stat(ctl)
                if not stat.S_ISFIFO(st.st_mode) or stat.S_IMODE(st.st_mode) != 0o600 or st.st_uid != 0:
                    problems.append("the FIFO remora made is %s mode %04o of uid %d, want a FIFO 0600 of root"
                                    % (stat.filemode(st.st_mode), stat.S_IMODE(st.st_mode), st.st_uid))
                os.write(fd, b"stop\n")
                os.close(fd)
                answer, _ = read_answer(ackfd)
                if answer != "ack":
                    problems.append("stop answered %r" % answer)
                rc, err = finish(proc)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
                os.close(ackfd)
            if rc != 0 or not os.path.isfile(out):
                problems.append("with its own FIFO: exit %d, %s: %s"
                                % (rc, "a profile" if os.path.isfile(out) else "no profile", tail(err)))
        if problems:
            raise Fail("; ".join(problems))
        return "nobody's and a mode-0622 FIFO refused (one line, exit 1); its own 0600 FIFO stopped the run"
    finally:
        shutil.rmtree(d, ignore_errors=True)


# --- point 9: a profile whose directory is gone at the end ---------------------------------

KEPT = re.compile(r"^remora: writing '([^']*)' failed: (.*); the (profile|recording|stream) is kept in (\S+)$", re.M)


def test_kept(remora):
    """`-o gone/y.html -o gone/y.remora -o gone/y.jsonl` with gone/ removed while recording
    (once --control's ping is answered): exit 5, one line per output saying where it is
    kept, each name keeping its ending; the kept flamegraph is a whole page naming the
    target's file, the kept recording converts (exit 0) to collapsed stacks of the
    target's, the kept stream is its start, period and end records."""
    needs_host()
    d = workdir()
    try:
        gone = os.path.join(d, "gone")
        os.mkdir(gone)
        ctl, ack = os.path.join(d, "ctl"), os.path.join(d, "ack")
        os.mkfifo(ack, 0o600)
        ackfd = os.open(ack, os.O_RDWR | os.O_NONBLOCK)
        with target() as t:
            t.wait_ready()
            proc = start_record(remora, ["-p", t.pid, "-d", "60", "--idle",
                                         "--control", "fifo:%s,%s" % (ctl, ack),
                                         "-o", "gone/y.html", "-o", "gone/y.remora",
                                         "-o", "gone/y.jsonl"], cwd=d)
            try:
                fd = wait_opened(ctl, proc)
                os.write(fd, b"ping\n")
                answer, rest = read_answer(ackfd)
                if answer != "ack":
                    raise Fail("ping answered %r" % answer)
                shutil.rmtree(gone)
                os.write(fd, b"stop\n")
                os.close(fd)
                read_answer(ackfd, rest)
                rc, err = finish(proc)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
                os.close(ackfd)
        kept = {m.group(1): (m.group(3), m.group(4)) for m in KEPT.finditer(err)}
        problems = []
        if rc != 5:
            problems.append("exit %d, want 5" % rc)
        for name in ("gone/y.html", "gone/y.remora", "gone/y.jsonl"):
            if name not in kept:
                problems.append("no line says where %s is kept: %s" % (name, tail(err, 4)))
            elif not os.path.isfile(kept[name][1]):
                problems.append("%s: the line names %s, which is not there" % (name, kept[name][1]))
        if problems:
            raise Fail("; ".join(problems))
        html, raw, jl = kept["gone/y.html"][1], kept["gone/y.remora"][1], kept["gone/y.jsonl"][1]
        if not html.endswith(".html") or not raw.endswith(".remora") or not jl.endswith(".jsonl"):
            problems.append("the kept names lost their endings: %s, %s, %s" % (html, raw, jl))
        with open(jl, encoding="utf-8") as f:
            try:
                kinds = [json.loads(line)["type"] for line in f]
            except ValueError as e:
                kinds = ["not JSON: %s" % e]
        records = [k for k in kinds if k not in ("string", "frame")]
        if records != ["start", "period", "end"]:
            problems.append("the kept stream's records are %s, want start, period, end (and "
                            "its strings and frames)" % records)
        with open(html, encoding="utf-8") as f:
            page = f.read()
        if "cpu_shares.py" not in page or "</html>" not in page:
            problems.append("the kept flamegraph is not a whole page naming the target's file")
        col = os.path.join(d, "back.collapsed")
        rc, _, cerr = remora.run(["convert", raw, "-o", col])
        if rc != 0:
            problems.append("convert of the kept recording exited %d: %s" % (rc, tail(cerr)))
        elif not any((f[1] or "").endswith("cpu_shares.py") for st in parse_collapsed(col) for f in st.frames):
            problems.append("the kept recording holds no stack of the target's")
        if problems:
            raise Fail("; ".join(problems))
        return "exit 5; kept %s (%d bytes), %s (%d bytes) and %s (%d bytes), each valid" % (
            os.path.basename(html), os.path.getsize(html), os.path.basename(raw), os.path.getsize(raw),
            os.path.basename(jl), os.path.getsize(jl))
    finally:
        shutil.rmtree(d, ignore_errors=True)


def tests(remora):
    return [
        ("security/output-umask", lambda: test_umask(remora), None),
        ("security/output-foreign-link", lambda: test_foreign_link(remora), None),
        ("security/output-kept", lambda: test_kept(remora), None),
        ("security/control-fifo", lambda: test_control(remora), None),
    ]
