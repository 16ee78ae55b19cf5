# Functional tests of the static SVG flamegraph (`-o FILE.svg`, `-f svg`; issue 50), run by
# run.py:
#
#   formats/svg/INTERP      cpu_shares.py recorded to .svg, .collapsed and .remora at once:
#                           the SVG is well-formed XML (xml.etree); each box's path (the
#                           boxes under it, found by their places) is a stack prefix of the
#                           collapsed file, its title's count that prefix's inclusive count
#                           and its width / the root's its share (within 1e-4); every prefix
#                           of 0.1% or more has a box; the header's total and "too narrow"
#                           count are the collapsed file's; `convert` of the .remora and of
#                           the .collapsed draw the same boxes.
#   formats/svg-odd/INTERP  odd_names.py (hostile function, file and thread names): the SVG
#                           is valid UTF-8 and well-formed XML, no text holds a control
#                           character, the odd function is in a title as the writer escapes
#                           it, the 1 MB name cut to 2,000 characters.
#   formats/svg-synthetic   collapsed stacks written here, converted: hostile names judged as
#                           above, the samples of frames under 0.1% said in the header, and
#                           past 50,000 boxes the deepest levels dropped and said.
#   formats/svg-chromium    the synthetic SVG in headless Chromium (tests/browser/run.mjs
#                           --svg): no console error or request, only remora's script, each
#                           box at its width, click to zoom and back.

import bisect
import os
import re
import shutil
import xml.etree.ElementTree as ET

from harness import (INTERPRETERS, REPO, TARGETS, Fail, Skip, Target, browser_check,
                     interp_missing, odd_recording, record, tail, workdir)
from formats import parse_collapsed

ORDER = 125           # where run.py runs these tests among the modules' (ascending)

NS = "{http://www.w3.org/2000/svg}"
SVG_INTERPRETERS = ("pyenv-3.9.18", "pyenv-3.12.1", "sid-3.15")
ODD_INTERPRETERS = ("pyenv-3.12.1", "sid-3.15")
SECONDS = 1.0
ROW = 16                        # px between levels (svg.c's SVG_ROW)
SHARE_TOLERANCE = 1e-4          # widths are written to 0.001 px of 1180
EPS = 0.01                      # px: x and width each rounded to 0.001 px, a box at least 1.18
TITLE = re.compile(r"^(.*) \u2014 (\d+) samples?, ([0-9.]+)%$", re.S)
HEADER_TOTAL = re.compile(r"^(\d+) thread samples? written\b")
HEADER_NARROW = re.compile(r"(\d+) samples in frames too narrow to draw")
HEADER_CUT = re.compile(r"frames from depth (\d+) on not drawn: at most (\d+) boxes")
MAX_BOXES = 50000               # svg.c's SVG_MAX_RECTS
TITLE_MAX = 2000                # svg.c's SVG_MAX_TITLE


def load_svg(path):
    """The parsed SVG's root; Fail when it is not UTF-8 or not well-formed XML."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise Fail("%s is not UTF-8: %s" % (os.path.basename(path), e))
    try:
        return ET.fromstring(data)
    except ET.ParseError as e:
        raise Fail("%s is not well-formed XML: %s" % (os.path.basename(path), e))


def boxes(root):
    """[(name, count, x, y, width)] of the boxes, "all" first; Fail on a box without a
    title of the form "NAME — N samples, P%"."""
    frames = root.find(NS + "g")
    if frames is None:
        raise Fail("the SVG has no group of frames")
    out = []
    for g in frames.findall(NS + "g"):
        title, rect = g.find(NS + "title"), g.find(NS + "rect")
        if title is None or rect is None:
            raise Fail("a box without its title or rect")
        m = TITLE.match(title.text or "")
        if m is None:
            raise Fail("a title not 'NAME \u2014 N samples, P%%': %r" % (title.text or "")[:200])
        out.append((m.group(1), int(m.group(2)), float(rect.get("x")), int(rect.get("y")),
                    float(rect.get("width"))))
    if not out or out[0][0] != "all":
        raise Fail("the first box is not 'all'")
    return out


def box_paths(bs):
    """{path (tuple of names below "all"): [count, width]} from the boxes' places: a box's
    parent is the box one row below it whose span holds it (root at the bottom)."""
    ally = bs[0][3]
    xs, placed = {}, {}    # level: [x, ...] and [(x, width, path), ...], x ascending
    paths = {}
    for name, count, x, y, w in bs[1:]:
        level = (ally - y) // ROW
        if (ally - y) % ROW or level < 1:
            raise Fail("box %r at y %d is not on a row above 'all' (y %d)" % (name, y, ally))
        if level == 1:
            path = (name,)
        else:
            # the box below starting at or before x (a parent comes before its children)
            i = bisect.bisect_right(xs.get(level - 1, []), x + EPS) - 1
            if i < 0:
                raise Fail("box %r at level %d lies on no box below it" % (name, level))
            px, pw, parent = placed[level - 1][i]
            if x + w > px + pw + EPS:
                raise Fail("box %r at level %d overhangs the box below it, %r"
                           % (name, level, parent[-1]))
            path = parent + (name,)
        lx, lp = xs.setdefault(level, []), placed.setdefault(level, [])
        i = bisect.bisect_right(lx, x)
        if ((i > 0 and lp[i - 1][0] + lp[i - 1][1] > x + EPS)
                or (i < len(lx) and x + w > lx[i] + EPS)):
            raise Fail("box %r at level %d overlaps another" % (name, level))
        lx.insert(i, x)
        lp.insert(i, (x, w, path))
        got = paths.setdefault(path, [0, 0.0])
        got[0] += count
        got[1] += w
    return paths


def frame_name(f):
    fn, file, line = f
    return fn if file is None else "%s (%s:%d)" % (fn, file, line)


def prefixes(stacks):
    """{path: inclusive samples} of every stack prefix of the collapsed file, a path
    starting with "thread NAME (TID)"."""
    incl = {}
    for st in stacks:
        path = (escaped("thread %s (%d)" % (st.name or "?", st.tid)),)
        incl[path] = incl.get(path, 0) + st.count
        for f in st.frames:
            path = path + (escaped(frame_name(f)),)
            incl[path] = incl.get(path, 0) + st.count
    return incl


def header_lines(root):
    return [t.text or "" for t in root.findall(NS + "text")]


def judge(svg, collapsed):
    """Checks the SVG against the collapsed file of the same recording; returns a note."""
    root = load_svg(svg)
    bs = boxes(root)
    paths = box_paths(bs)
    incl = prefixes(parse_collapsed(collapsed))
    total = sum(c for p, c in incl.items() if len(p) == 1)
    problems = []
    if bs[0][1] != total:
        problems.append("'all' counts %d samples, the collapsed file %d" % (bs[0][1], total))
    allw = bs[0][4]
    for path, (count, w) in sorted(paths.items()):
        want = incl.get(path)
        if want is None:
            problems.append("box %r is no stack prefix of the collapsed file" % (path,))
            continue
        if count != want:
            problems.append("box %r counts %d, the collapsed file %d" % (path[-1], count, want))
        if abs(w / allw - want / total) > SHARE_TOLERANCE:
            problems.append("box %r is %.5f of the width, its share %.5f"
                            % (path[-1], w / allw, want / total))
    least = -(-total // 1000)
    text = " | ".join(header_lines(root))
    cut = HEADER_CUT.search(text)
    depth = int(cut.group(1)) if cut else None
    if len(bs) > MAX_BOXES:
        problems.append("%d boxes, past %d" % (len(bs), MAX_BOXES))
    missing = [p for p, c in incl.items()
               if c >= least and p not in paths and (depth is None or len(p) - 1 < depth)]
    if missing:
        problems.append("%d prefixes of 0.1%% or more without a box, e.g. %r"
                        % (len(missing), missing[0]))
    narrow = sum(c for p, c in incl.items() if c < least and (len(p) == 1 or incl[p[:-1]] >= least))
    m, n = HEADER_TOTAL.search(header_lines(root)[1]), HEADER_NARROW.search(text)
    if m is None or int(m.group(1)) != total:
        problems.append("the header's total %s, the collapsed file %d" % (m and m.group(1), total))
    if n is None or int(n.group(1)) != narrow:
        problems.append("the header's narrow samples %s, the collapsed file's %d"
                        % (n and n.group(1), narrow))
    if problems:
        raise Fail("%d problems: %s" % (len(problems), "; ".join(problems[:6])))
    return "%d boxes, %d samples, %d in narrow frames%s" % (
        len(bs), total, narrow, ", cut at depth %d" % depth if cut else ""), bs


def convert(remora, src, dst):
    rc, _, err = remora.run(["convert", src, "-o", dst])
    if rc != 0:
        raise Fail("`remora convert %s -o %s` exited %d: %s"
                   % (os.path.basename(src), os.path.basename(dst), rc, tail(err)))
    return boxes(load_svg(dst))


def same_boxes(a, b):
    key = lambda bs: sorted((n, c, y, round(w, 2)) for n, c, _, y, w in bs)
    return key(a) == key(b)


def test_svg(remora, interp):
    d = workdir()
    try:
        with Target(interp, os.path.join(TARGETS, "cpu_shares.py"), "ready.json") as t:
            t.wait_ready()
            args = ["-p", t.pid, "-d", SECONDS]
            for name in ("rec.svg", "rec.collapsed", "rec.remora"):
                args += ["-o", os.path.join(d, name)]
            record(remora, args)
        note, bs = judge(os.path.join(d, "rec.svg"), os.path.join(d, "rec.collapsed"))
        for src in ("rec.remora", "rec.collapsed"):
            got = convert(remora, os.path.join(d, src), os.path.join(d, "from-%s.svg" % src[4:]))
            if not same_boxes(got, bs):
                raise Fail("`convert %s -o x.svg` draws other boxes than the recording's SVG" % src)
        return note + "; convert from .remora and .collapsed: the same boxes"
    finally:
        shutil.rmtree(d, ignore_errors=True)


def escaped(s):
    """s as svg.c writes a name (XML references aside, which the parser undoes)."""
    out = []
    for ch in s:
        c = ord(ch)
        if ch in "\n\r\t":
            out.append({"\n": "\\n", "\r": "\\r", "\t": "\\t"}[ch])
        elif c < 0x20 or c == 0x7f or 0x80 <= c < 0xa0:
            out.append("\\x%02x" % c)
        elif c in (0x2028, 0x2029):
            out.append("\\u%04x" % c)
        elif 0xd800 <= c < 0xe000 or c in (0xfffe, 0xffff):
            out.append("\ufffd")
        else:
            out.append(ch)
    return "".join(out)


def test_odd(remora, interp):
    d, ready = odd_recording(remora, interp, ["odd.svg"])
    try:
        root = load_svg(os.path.join(d, "odd.svg"))
        bs = boxes(root)
        texts = [t for el in root.iter() for t in (el.text, el.tail) if t]
        bad = [t for t in texts if any(ord(c) < 0x20 and c not in "\n" or 0x7f <= ord(c) < 0xa0
                                       for c in t)]
        if bad:
            raise Fail("%d texts hold control characters, e.g. %r" % (len(bad), bad[0][:80]))
        names = [b[0] for b in bs]
        want = "%s (%s:" % (escaped(ready["function"]), escaped(ready["file"]))
        if not any(n.startswith(want) for n in names):
            raise Fail("no box titled %r...; titles: %r"
                       % (want[:80], [n[:60] for n in names][:12]))
        longest = max(len(n) for n in names)
        if longest > TITLE_MAX + 3:
            raise Fail("a title of %d characters, past %d" % (longest, TITLE_MAX))
        return "%d boxes, well-formed; the odd function's title as escaped; longest title %d" % (
            len(bs), longest)
    finally:
        shutil.rmtree(d, ignore_errors=True)


# names as collapsed stacks escape them (\\xNN, \\uNNNN): control characters, markup, quotes
ODD_THREAD = 'w\\x01<b>&"\' (2)'
ODD_FN = "f\\x1b[31m\\x85"
ODD_FRAME = "g\\u2028 (</svg> & <script>.py:7)"
SYNTHETIC = [   # (stack, count): 10,000 samples, the boxes drawn from 10 (0.1%)
    ("thread main (1);outer (a.py:1);hot (a.py:2)", 9000),
    ("thread main (1);outer (a.py:1);tiny (a.py:3)", 5),          # too narrow
    ("thread %s;%s;%s" % (ODD_THREAD, ODD_FN, ODD_FRAME), 990),
    ("thread %s;%s;narrow2" % (ODD_THREAD, ODD_FN), 3),           # too narrow
    ("thread t3 (3);solo", 2),                                     # a thread too narrow
]
DEEP = (1000, 60)       # stacks of 1 sample, frames each: 60,002 boxes of 0.1%, past the cap


def test_synthetic(remora):
    """Collapsed stacks written here, converted: narrow frames counted, hostile names kept
    as text, and past the cap of boxes the deepest levels dropped and said."""
    d = workdir()
    try:
        notes = []
        src = os.path.join(d, "odd.collapsed")
        with open(src, "w", encoding="utf-8") as f:
            f.writelines("%s %d\n" % sc for sc in SYNTHETIC)
        convert(remora, src, os.path.join(d, "odd.svg"))
        note, bs = judge(os.path.join(d, "odd.svg"), src)
        if "10 in narrow frames" not in note:
            raise Fail("want 10 samples in narrow frames: %s" % note)
        notes.append(note)
        deep = os.path.join(d, "deep.collapsed")
        n, depth = DEEP
        with open(deep, "w", encoding="utf-8") as f:
            for i in range(n):
                f.write("thread d (9);%s 1\n" % ";".join("f%d_%d" % (i, k) for k in range(depth)))
        convert(remora, deep, os.path.join(d, "deep.svg"))
        note, bs = judge(os.path.join(d, "deep.svg"), deep)
        if "cut at depth 50" not in note:
            raise Fail("want the frames from depth 50 dropped (1 + 1 + 1000 x 49 boxes "
                       "drawn): %s" % note)
        notes.append(note)
        return "; ".join(notes)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_chromium(remora):
    """The synthetic SVG (hostile names, a narrow thread) opened in headless Chromium by
    tests/browser/run.mjs --svg: it loads with no console error and no request, holds no
    script, and lays out each box at its rect's width."""
    node = shutil.which("node")
    if node is None:
        raise Skip("node not installed (apt-get install nodejs)")
    d = workdir()
    try:
        src, svg = os.path.join(d, "odd.collapsed"), os.path.join(d, "odd.svg")
        with open(src, "w", encoding="utf-8") as f:
            f.writelines("%s %d\n" % sc for sc in SYNTHETIC)
        bs = convert(remora, src, svg)
        return browser_check(node, "svg", ["--svg", svg, str(len(bs))])
    finally:
        shutil.rmtree(d, ignore_errors=True)


def tests(remora):
    """[(name, function, skip reason or None)] for run.py."""
    return [("formats/svg/%s" % i[0], lambda i=i: test_svg(remora, i), interp_missing(i))
            for i in INTERPRETERS if i[0] in SVG_INTERPRETERS] + [
        ("formats/svg-odd/%s" % i[0], lambda i=i: test_odd(remora, i), interp_missing(i))
        for i in INTERPRETERS if i[0] in ODD_INTERPRETERS] + [
        ("formats/svg-synthetic", lambda: test_synthetic(remora), None),
        ("formats/svg-chromium", lambda: test_chromium(remora), None)]
