# Functional tests of the line heatmap (-f heatmap, .heatmap.html, -o DIR), run by run.py:
#
#   heatmap/lines/INTERP   line_clock.py times three call sites of its loop with its own
#                          clock; `record -p PID -o X.heatmap.html` between two marks: the
#                          inclusive share of each call line, and the self share of the
#                          one-line spin loops they call, within HEATMAP_MARGIN points of
#                          the clock's shares of the same window; each call line links to
#                          the function it calls; the page's text holds those lines.
#   heatmap/hostile/INTERP source_lines.py's parked threads (a binary file, a 17 MB one, a
#                          FIFO, a directory, a deleted file, "<string>", a file rewritten
#                          after import) recorded with --idle into a heatmap and, from the
#                          .remora recording, `convert -f heatmap -o DIR`: never a hang,
#                          every such file said to be what it is, the readable ones read
#                          (convert: as the recording kept them, the same).
#   heatmap/chromium       a heatmap page opened in headless Chromium (--dump-dom): the
#                          page renders, its rows and the hottest line are in the DOM.

import json
import os
import re
import shutil
import subprocess
import tempfile
import time

from harness import (INTERPRETERS, READY_TIMEOUT, TARGETS, Fail, Skip, Target, interp_missing, record,
                     tail)

ORDER = 200           # where run.py runs these tests among the modules' (ascending)

LINE_SCRIPT = os.path.join(TARGETS, "line_clock.py")
SOURCE_SCRIPT = os.path.join(TARGETS, "source_lines.py")
HEATMAP_MARGIN = 2.0            # points: issue 32's bound on a line's share against the clock
SECONDS = 3


def heatmap_data(path):
    """The JSON the page carries (its heatmap-data element)."""
    try:
        with open(path, encoding="utf-8") as f:
            page = f.read()
    except OSError as e:
        raise Fail("no heatmap at %s: %s" % (path, e))
    m = re.search(r'<script type="application/json" id="heatmap-data">(.*?)</script>', page, re.S)
    if m is None:
        raise Fail("%s holds no heatmap-data element" % path)
    return page, json.loads(m.group(1))


def read_marks(t, n):
    """The first n mark lines, polled for (the target appends one per "mark" on stdin)."""
    path = t.host_path(t.out) + ".marks"
    deadline = time.monotonic() + READY_TIMEOUT
    while True:
        try:
            with open(path) as f:
                lines = [json.loads(x) for x in f.read().splitlines() if x.strip()]
        except (OSError, ValueError):
            lines = []
        if len(lines) >= n:
            return lines[:n]
        if t.proc.poll() is not None or time.monotonic() > deadline:
            raise Fail("target wrote %d marks, want %d: %s" % (len(lines), n, t.log_tail()))
        time.sleep(0.01)


def mark(t, n):
    t.proc.stdin.write(b"mark\n")
    t.proc.stdin.flush()
    return read_marks(t, n)[-1]


def test_lines(remora, interp):
    with Target(interp, LINE_SCRIPT, "ready.json") as t, tempfile.TemporaryDirectory(prefix="remora-hm-") as d:
        ready = t.wait_ready()
        out = os.path.join(d, "lines.heatmap.html")
        m0 = mark(t, 1)
        record(remora, ["-p", t.pid, "-d", SECONDS, "-o", out])
        m1 = mark(t, 2)
        page, data = heatmap_data(out)
    total_ns = m1["total"] - m0["total"]
    clock = {k: 100.0 * (m1["ns"][k] - m0["ns"][k]) / total_ns for k in m0["ns"]}
    clock["spin_a"] = clock["call_a"] + clock["call_a2"]
    clock["spin_b"] = clock["call_b"]
    files = {f["file"]: f for f in data["files"]}
    mine = files.get(ready["file"])
    if mine is None:
        raise Fail("no %s in the heatmap's files: %s" % (ready["file"], sorted(files)[:5]))
    if mine["source"] != "read":
        raise Fail("%s: source %r" % (ready["file"], mine["source"]))
    by_line = {l[0]: l for l in mine["lines"]}
    total = data["total"]
    got, problems = {}, []
    for key, line in ready["lines"].items():
        l = by_line.get(line, [line, 0, 0])
        # the call lines by their inclusive share, the spin lines by their self share
        got[key] = 100.0 * (l[1] if key.startswith("spin") else l[2]) / max(total, 1)
        if abs(got[key] - clock[key]) > HEATMAP_MARGIN:
            problems.append("%s (line %d) %.1f%%, clock %.1f%%" % (key, line, got[key], clock[key]))
    for key, callee in (("call_a", "spin_a"), ("call_b", "spin_b"), ("call_a2", "spin_a")):
        row = re.search(r'<tr id="f\d+-%d"[^>]*>(.*?)</tr>' % ready["lines"][key], page, re.S)
        if row is None:
            problems.append("no row for %s (line %d)" % (key, ready["lines"][key]))
        elif "\u2192 " + callee not in row.group(1) or 'href="#f' not in row.group(1):
            problems.append("%s's row does not link to %s: %s" % (key, callee, row.group(1)[-200:]))
        elif "spin_%s(perf() + 0.00" % callee[-1] not in row.group(1):
            problems.append("%s's row lacks its source text" % key)
    if problems:
        raise Fail("; ".join(problems) + " [%d samples]" % total)
    return "%d samples; line shares (heatmap/clock): %s" % (total, ", ".join(
        "%s %.1f/%.1f" % (k, got[k], clock[k]) for k in sorted(got)))


HOSTILE = {                     # file name in source_lines.py's directory -> what it is said to be
    "binary.py": "binary, not source",
    "big.py": "too large to show",
    "fifo.py": "not a regular file",
    "dir.py": "not a regular file",
    "gone_mod.py": "missing or unreadable",
}


def hostile_problems(data, base, what):
    files = {f["file"]: f for f in data["files"]}
    problems = []
    for name, want in HOSTILE.items():
        f = files.get(os.path.join(base, name))
        if f is None:
            problems.append("%s: %s not in the heatmap" % (what, name))
        elif f["source"] != want:
            problems.append("%s: %s said to be %r, want %r" % (what, name, f["source"], want))
    f = files.get("<string>")
    if f is None or f["source"] != "not a file (a name in angle brackets)":
        problems.append("%s: <string> said to be %r" % (what, f and f["source"]))
    f = files.get(os.path.join(base, "changed_mod.py"))
    if f is None or f["source"] != "read" or not f["changed"]:
        problems.append("%s: changed_mod.py %r" % (what, f and (f["source"], f["changed"])))
    for name in ("crlf_mod.py", "cr_mod.py", "uni_mod.py", "long_mod.py"):
        f = files.get(os.path.join(base, name))
        if f is None or f["source"] != "read" or f["changed"]:
            problems.append("%s: %s %r" % (what, name, f and (f["source"], f["changed"])))
    return problems


def test_hostile(remora, interp):
    with Target(interp, SOURCE_SCRIPT, "ready.json") as t, tempfile.TemporaryDirectory(prefix="remora-hm-") as d:
        t.wait_ready()
        page = os.path.join(d, "h.heatmap.html")
        rec = os.path.join(d, "h.remora")
        record(remora, ["-p", t.pid, "-d", "1", "--idle", "-o", page, "-o", rec])
        _, data = heatmap_data(page)
        problems = hostile_problems(data, t.visible_dir, "record")
        # from the recording: the source it kept, each file said to be what record found
        # (a chroot interpreter's too: convert opens none of the names)
        outdir = os.path.join(d, "out")
        os.mkdir(outdir)
        rc, _, err = remora.run(["convert", rec, "-f", "heatmap", "-o", outdir])
        if rc != 0:
            raise Fail("convert -f heatmap -o DIR exited %d: %s" % (rc, tail(err)))
        _, conv = heatmap_data(os.path.join(outdir, "index.html"))
        problems += hostile_problems(conv, t.visible_dir, "convert")
        if conv["total"] != data["total"]:
            problems.append("convert: %d samples, the recording %d" % (conv["total"], data["total"]))
    if problems:
        raise Fail("; ".join(problems[:8]))
    return "%d files, %d samples: each hostile file said to be what it is, record and convert" % (
        len(data["files"]), data["total"])


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    return None


def test_chromium(remora):
    exe = chromium()
    if exe is None:
        raise Skip("no Chromium (tools/packages.txt installs it)")
    interp = next((i for i in INTERPRETERS if not interp_missing(i)), None)
    if interp is None:
        raise Skip("no interpreter")
    with Target(interp, LINE_SCRIPT, "ready.json") as t, tempfile.TemporaryDirectory(prefix="remora-hm-") as d:
        ready = t.wait_ready()
        out = os.path.join(d, "c.heatmap.html")
        record(remora, ["-p", t.pid, "-d", "1", "-o", out])
        profile = tempfile.mkdtemp(prefix="remora-chromium-")
        try:
            p = subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu",
                                "--user-data-dir=" + profile, "--dump-dom", "file://" + out],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
        finally:
            shutil.rmtree(profile, ignore_errors=True)
    dom = p.stdout.decode("utf-8", "replace")
    if p.returncode != 0 or "<table" not in dom:
        raise Fail("chromium --dump-dom exited %d: %s" % (p.returncode, tail(p.stderr.decode("utf-8", "replace"))))
    rows = len(re.findall(r'<tr id="f\d+-\d+"', dom))
    spin = ready["lines"]["spin_a"]
    if not re.search(r'<tr id="f\d+-%d"' % spin, dom) or "while perf() &lt; t: pass" not in dom:
        raise Fail("the rendered page lacks the hot line %d (%d rows)" % (spin, rows))
    return "rendered by %s: %d source rows, the hot line among them" % (os.path.basename(exe), rows)


def tests(remora):
    out = [("heatmap/lines/" + i[0], lambda i=i: test_lines(remora, i), interp_missing(i))
           for i in INTERPRETERS]
    out += [("heatmap/hostile/" + i[0], lambda i=i: test_hostile(remora, i), interp_missing(i))
            for i in INTERPRETERS]
    out.append(("heatmap/chromium", lambda: test_chromium(remora), None))
    return out
