# A recording carries the source lines its heatmap shows (issue 46): `convert` to a heatmap
# opens no file the recording (or collapsed stacks) names.
#
#   security/recording-keeps-source/INTERP
#       a target the test writes spins in a thread; `record -p PID -o x.remora -o
#       x.heatmap.html`, and `record --every 1 -d 2.5` to p-%n.remora and p-%n.heatmap.html
#       with a SIGUSR1 snapshot; then the target's file is rewritten, and each recording
#       converted to a heatmap; then it is deleted, and each converted again: every page
#       shows the same rows, the same source text in them and the same state of each file
#       as the heatmap recorded beside it, the target's hot line among them.
#   security/recording-opens-nothing
#       a 0600 file holding a secret, named by collapsed stacks and by hand-made version 3
#       and 4 recordings: `convert` of each to a heatmap, under strace where there is one,
#       exits 0, opens no file of that name and shows none of its text.
#   security/recording-old-version
#       hand-made recordings of versions 1, 2 and 3 naming a readable file: their heatmaps
#       show none of its text and say why ("not in the recording"), exit 0.

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile

from harness import INTERPRETERS, Fail, Recording, Target, interp_missing, record, tail, workdir
from formats import read_remora

ORDER = 205           # where run.py runs these tests among the modules' (ascending)

KEEP_INTERPRETERS = ("pyenv-3.12.1", "debian-3.11-static", "sid-3.15")

# The target: a thread spinning in hot() (its marked line), main parked reading stdin.
TARGET = r'''import json, os, sys, threading

def hot(n):
    total = 0
    for i in range(n):
        total += i * i          # the hot line: KEPT-SOURCE-MARK
    return total

def spin():
    while True:
        hot(5000)

threading.Thread(target=spin, daemon=True).start()
with open(sys.argv[1] + ".tmp", "w") as f:
    json.dump({"file": os.path.abspath(__file__)}, f)
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
sys.stdin.read()
'''
MARK = "KEPT-SOURCE-MARK"


def page_of(path):
    """(rows, states) of a heatmap page: rows {row id: source cell}, states {file: (its
    source state, changed)} from its heatmap-data."""
    try:
        with open(path, encoding="utf-8") as f:
            page = f.read()
    except OSError as e:
        raise Fail("no heatmap at %s: %s" % (path, e))
    rows = {}
    for rid, body in re.findall(r'<tr id="(f\d+-\d+)"[^>]*>(.*?)</tr>', page, re.S):
        cell = re.search(r"<td class=s>(.*?)</td>", body, re.S)
        rows[rid] = cell.group(1) if cell else None
    m = re.search(r'<script type="application/json" id="heatmap-data">(.*?)</script>', page, re.S)
    if m is None:
        raise Fail("%s holds no heatmap-data element" % path)
    data = json.loads(m.group(1))
    return rows, {f["file"]: (f["source"], f["changed"]) for f in data["files"]}, page


def compare(want_path, got_path, what):
    """Problems of got's page against want's: rows, source cells, file states."""
    want, wstates, _ = page_of(want_path)
    got, gstates, _ = page_of(got_path)
    out = []
    if wstates != gstates:
        diff = sorted(f for f in set(wstates) | set(gstates) if wstates.get(f) != gstates.get(f))
        out.append("%s: files' states differ: %s" % (what, "; ".join(
            "%s recorded %r, converted %r" % (f, wstates.get(f), gstates.get(f)) for f in diff[:3])))
    if set(want) != set(got):
        out.append("%s: %d rows recorded, %d converted (%d differ)"
                   % (what, len(want), len(got), len(set(want) ^ set(got))))
    bad = [r for r in want if r in got and want[r] != got[r]]
    if bad:
        out.append("%s: %d source cells differ, first %s: recorded %r, converted %r"
                   % (what, len(bad), bad[0], (want[bad[0]] or "")[:60], (got[bad[0]] or "")[:60]))
    return out


def pairs(d):
    """Each recording in d with the heatmap written beside it: [(X.remora, X.heatmap.html)]."""
    out = []
    for name in sorted(os.listdir(d)):
        if name.endswith(".remora"):
            page = os.path.join(d, name[:-len(".remora")] + ".heatmap.html")
            if not os.path.exists(page):
                raise Fail("%s has no heatmap beside it (%s)" % (name, sorted(os.listdir(d))))
            out.append((os.path.join(d, name), page))
    return out


def test_keeps_source(remora, interp):
    d = workdir()
    src_dir = tempfile.mkdtemp(prefix="remora-recsrc-")
    try:
        script = os.path.join(src_dir, "kept_target.py")
        with open(script, "w") as f:
            f.write(TARGET)
        with Target(interp, script, "ready.json") as t:
            ready = t.wait_ready()
            record(remora, ["-p", t.pid, "-d", "1", "-o", os.path.join(d, "x.remora"),
                            "-o", os.path.join(d, "x.heatmap.html")])
            rec = Recording(remora, ["-p", t.pid, "-d", "2.5", "--every", "1",
                                     "-o", os.path.join(d, "p-%n.remora"),
                                     "-o", os.path.join(d, "p-%n.heatmap.html")])
            try:
                rec.wait_sampled(100)
                rec.proc.send_signal(signal.SIGUSR1)
                rc, _, err = rec.finish()
            finally:
                rec.close()
            if rc != 0:
                raise Fail("record --every exited %d: %s" % (rc, tail(err)))
            host_file = t.host_path(ready["file"])
            recorded = pairs(d)
            if len(recorded) < 4:
                raise Fail("want x, 3 periods and a snapshot, got %s" % [os.path.basename(r) for r, _ in recorded])
            rows, states, _ = page_of(os.path.join(d, "x.heatmap.html"))
            if states.get(ready["file"], ("",))[0] != "read" or not any(MARK in (c or "") for c in rows.values()):
                raise Fail("the recorded heatmap lacks the target's hot line: %r" % (states.get(ready["file"]),))
            problems = []
            for step in ("rewritten", "deleted"):
                if step == "rewritten":
                    with open(host_file, "w") as f:
                        f.write("# nothing of what ran is here any more\n" * 40)
                else:
                    os.unlink(host_file)
                for raw, page in recorded:
                    out = os.path.join(d, "conv.heatmap.html")
                    rc, _, err = remora.run(["convert", raw, "-o", out])
                    if rc != 0:
                        raise Fail("convert %s exited %d: %s" % (os.path.basename(raw), rc, tail(err)))
                    problems += compare(page, out, "%s, file %s" % (os.path.basename(raw), step))
            # what made them so: each recording holds the hot line's text (formats.read_remora)
            for raw, _ in recorded:
                src = read_remora(raw).sources.get(ready["file"])
                if src is None or src["problem"] or not any(MARK.encode() in l for l in src["lines"].values()):
                    problems.append("%s keeps no text of %s: %r" % (os.path.basename(raw), ready["file"],
                                                                    src and (src["problem"], len(src["lines"]))))
            if problems:
                raise Fail("; ".join(problems[:4]))
            return "%d recordings (a period's, a snapshot's): converted after the file was rewritten, " \
                   "then deleted, each heatmap the recorded one (%d rows)" % (len(recorded), len(rows))
    finally:
        shutil.rmtree(d, ignore_errors=True)
        shutil.rmtree(src_dir, ignore_errors=True)


# --- hand-made recordings (src/formats/raw.h's layout) -------------------------------------

def uvar(v):
    out = bytearray()
    while True:
        b = v & 0x7f
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def svar(v):
    return uvar((v << 1) ^ (v >> 63) if v < 0 else v << 1)


def sbytes(b):
    return uvar(len(b)) + b


def hand_recording(version, file, lines, kept=None):
    """A recording of `version` whose one thread was sampled once at each of `lines` of
    `file` (function f, called from <module> at line 1); version 4 with the 'L' record
    `kept` (bytes after its file id) when given."""
    out = bytearray(b"REMORA\0" + bytes([version]))
    for s in (b"<module>", b"f", file.encode(), b"MainThread"):
        out += b"S" + sbytes(s)
    out += b"F" + uvar(0) + uvar(2) + svar(1)
    for line in lines:
        out += b"F" + uvar(1) + uvar(2) + svar(line)
    out += b"T" + uvar(0) + uvar(4242) + uvar(3) + uvar(0)
    out += b"N" + uvar(1) + uvar(0) + uvar(0)
    for k, _ in enumerate(lines):
        out += b"N" + uvar(2 + k) + uvar(1) + uvar(1 + k)
        out += b"X" + uvar(1000000) + uvar(0) + uvar(2 + k) + b"\0"
    if kept is not None:
        out += b"L" + uvar(2) + kept
    out += b"M" + uvar(4242) + sbytes(b"python3 app.py") + sbytes(b"3.12.1") + sbytes(b"wall")
    out += uvar(int(len(lines) * 1e6)) + uvar(1000000) + uvar(len(lines)) + uvar(0) + uvar(0)
    out += svar(1700000000 * 10 ** 9)
    if version >= 2:
        out += svar(10 ** 9)
    if version >= 3:
        out += sbytes(b"user")
    return bytes(out + b"Z")


def convert_traced(remora, inp, out, watch):
    """`convert INP -o OUT`, and once more under strace -f when there is one: (rc,
    stderr, the opens of a path holding `watch` by the second, or None without strace)."""
    rc, _, err = remora.run(["convert", inp, "-o", out])
    strace = shutil.which("strace")
    if strace is None or rc != 0:
        return rc, err, None
    log = out + ".strace"
    # LeakSanitizer cannot run under ptrace: the first run looked for leaks
    env = ["env", "ASAN_OPTIONS=%s:detect_leaks=0" % os.environ.get("ASAN_OPTIONS", "")]
    rc, _, err = remora.run(["convert", inp, "-o", out + ".traced.html"],
                            prefix=env + [strace, "-f", "-qq", "-e", "trace=open,openat,openat2", "-o", log])
    with open(log, errors="replace") as f:
        opens = [l.strip() for l in f if watch in l]
    return rc, err, opens


def test_opens_nothing(remora):
    d = tempfile.mkdtemp(prefix="remora-recsrc-")
    try:
        os.chmod(d, 0o700)
        secret_word = "SECRET-%s" % os.urandom(6).hex()
        secret = os.path.join(d, "root-only.secret")
        fd = os.open(secret, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write("".join("%s = %d\n" % (secret_word, i) for i in range(40)))
        inputs = {}
        inputs["collapsed"] = os.path.join(d, "in.collapsed")
        with open(inputs["collapsed"], "w") as f:
            f.write("main;<module> (%s:1);f (%s:7) 9\n" % (secret, secret))
        for version, kept in ((3, None), (4, None), (4, sbytes(b"missing or unreadable") + b"\0\0\0")):
            name = "v%d%s.remora" % (version, "-kept" if kept else "")
            inputs[name] = os.path.join(d, name)
            with open(inputs[name], "wb") as f:
                f.write(hand_recording(version, secret, (7, 20), kept))
        problems, traced = [], 0
        for what, path in sorted(inputs.items()):
            out = os.path.join(d, what + ".heatmap.html")
            rc, err, opens = convert_traced(remora, path, out, "root-only.secret")
            if rc != 0:
                problems.append("%s: convert exited %d: %s" % (what, rc, tail(err)))
                continue
            with open(out, encoding="utf-8", errors="replace") as f:
                page = f.read()
            if secret_word in page:
                problems.append("%s: the heatmap shows the secret file's text" % what)
            if "root-only.secret" not in page:
                problems.append("%s: the heatmap does not name the file at all" % what)
            if opens:
                problems.append("%s: convert opened it: %s" % (what, opens[0][:120]))
            traced += opens is not None
        if problems:
            raise Fail("; ".join(problems))
        return "%d inputs naming a 0600 secret: no text of it shown%s" % (
            len(inputs), ", no open of it under strace" if traced else " (no strace: opens not watched)")
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_old_version(remora):
    d = tempfile.mkdtemp(prefix="remora-recsrc-")
    try:
        word = "OLD-RECORDING-%s" % os.urandom(4).hex()
        src = os.path.join(d, "app.py")
        with open(src, "w") as f:
            f.write("".join("x%d = '%s'\n" % (i, word) for i in range(30)))
        os.chmod(src, 0o644)
        problems = []
        for version in (1, 2, 3):
            inp = os.path.join(d, "v%d.remora" % version)
            with open(inp, "wb") as f:
                f.write(hand_recording(version, src, (3, 12)))
            out = os.path.join(d, "v%d.heatmap.html" % version)
            rc, _, err = remora.run(["convert", inp, "-o", out])
            if rc != 0:
                problems.append("version %d: convert exited %d: %s" % (version, rc, tail(err)))
                continue
            rows, states, page = page_of(out)
            state = states.get(src, ("(not in the page)",))[0]
            if word in page or any(rows.values()):
                problems.append("version %d: source text shown" % version)
            if "not in the recording" not in state:
                problems.append("version %d: the file's source said to be %r" % (version, state))
            if not rows:
                problems.append("version %d: no rows for the sampled lines" % version)
        if problems:
            raise Fail("; ".join(problems))
        return "versions 1-3: the sampled lines without text, the file 'not in the recording', exit 0"
    finally:
        shutil.rmtree(d, ignore_errors=True)


def tests(remora):
    out = [("security/recording-keeps-source/" + i[0], lambda i=i: test_keeps_source(remora, i),
            interp_missing(i)) for i in INTERPRETERS if i[0] in KEEP_INTERPRETERS]
    out.append(("security/recording-opens-nothing", lambda: test_opens_nothing(remora), None))
    out.append(("security/recording-old-version", lambda: test_old_version(remora), None))
    return out
