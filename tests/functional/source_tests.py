# Functional tests of the source lines `dump` prints under each frame, run by run.py:
#
#   source/dump/INTERP   source_lines.py parks a thread in each kind of file a code object
#                        can name (CRLF and CR line ends, tabs, non-ASCII, a 5,000-character
#                        line, a file rewritten after import, one deleted, a relative name,
#                        "<string>", a binary file, a 17 MB one, a FIFO, a directory) and
#                        reports every parked thread's frames with linecache's line.
#                        `dump --json`: every frame's "source" is that line (null where
#                        the target's linecache has none; a line over 1,023 bytes cut
#                        there), "source_changed" on the rewritten file's frames only;
#                        the text dump: the same line under each frame, nothing where
#                        there is none; --no-source: no source at all. The FIFO never
#                        blocks the dump (each remora run is under the harness's timeout).

import json
import os

from harness import INTERPRETERS, TARGETS, Fail, Target, interp_missing, tail
from formats import parse_dump, untext

ORDER = 180           # where run.py runs these tests among the modules' (ascending)

SCRIPT = os.path.join(TARGETS, "source_lines.py")
LINE_MAX = 1023                 # dump.c: a source line is cut at this many bytes


def want_source(src):
    """The source line as remora can show it: cut at LINE_MAX bytes of UTF-8."""
    if src is None:
        return None
    b = src.encode()
    if len(b) <= LINE_MAX:
        return src
    return b[:LINE_MAX].decode("utf-8", "replace")


def json_problems(doc, truth):
    got = {th["native_id"]: th for th in doc["threads"]}
    problems = []
    for t in truth["threads"]:
        th = got.get(t["native_id"])
        if th is None:
            problems.append("%s: thread %d absent" % (t["case"], t["native_id"]))
            continue
        frames = th["frames"]
        if len(frames) != len(t["frames"]):
            problems.append("%s: %d frames, want %d" % (t["case"], len(frames), len(t["frames"])))
            continue
        for k, (g, w) in enumerate(zip(frames, t["frames"])):
            where = "%s frame %d (%s:%d)" % (t["case"], k, w["file"], w["line"])
            if (g["file"], g["line"]) != (w["file"], w["line"]):
                problems.append("%s: dump says %s:%d" % (where, g["file"], g["line"]))
            elif "source" not in g:
                problems.append("%s: no \"source\"" % where)
            elif g["source"] != want_source(w["source"]):
                problems.append("%s: source %r, want %r" % (where, (g["source"] or "")[:80],
                                                            (want_source(w["source"]) or "")[:80]))
            elif bool(g.get("source_changed")) != (w["changed"] and w["source"] is not None):
                problems.append("%s: source_changed %r, want %r" % (where, g.get("source_changed"),
                                                                    w["changed"]))
    return problems


def text_problems(text, truth):
    """Under each frame line of each truth thread, its source line (8 spaces in), or none."""
    blocks, cur = {}, None
    for line in text.split("\n"):
        if line.startswith("Thread "):
            cur = int(line.split()[1])
            blocks[cur] = []
        elif cur is not None and line.startswith("        "):
            if not blocks[cur]:
                return ["a line under thread %d before any frame: %r" % (cur, line[:80])]
            blocks[cur][-1][1].append(line[8:])
        elif cur is not None and line.startswith("    "):
            blocks[cur].append((line[4:], []))
    problems = []
    for t in truth["threads"]:
        frames = blocks.get(t["native_id"])
        if frames is None or len(frames) != len(t["frames"]):
            problems.append("%s: %s frames in the text, want %d" % (
                t["case"], "no" if frames is None else len(frames), len(t["frames"])))
            continue
        for (head, under), w in zip(frames, t["frames"]):
            want = want_source(w["source"])
            if want is None:
                if under:
                    problems.append("%s: %r printed under %s" % (t["case"], under[0][:60], head[:60]))
                continue
            suffix = "    [file changed since the process started]" if w["changed"] else ""
            if len(under) != 1 or untext("text dump", under[0]) != want + suffix:
                problems.append("%s: under %s: %r, want %r" % (t["case"], head[:60],
                                                             [u[:60] for u in under], (want + suffix)[:60]))
    return problems


def test_dump(remora, interp):
    with Target(interp, SCRIPT, "ready.json") as t:
        truth = t.wait_ready()
        rc, out, err = remora.run(["dump", "--json", "-p", str(t.pid)])
        if rc != 0:
            raise Fail("dump --json exited %d: %s" % (rc, tail(err)))
        problems = json_problems(parse_dump(out), truth)
        rc, text, err = remora.run(["dump", "-p", str(t.pid)])
        if rc != 0:
            raise Fail("dump exited %d: %s" % (rc, tail(err)))
        problems += text_problems(text, truth)
        rc, out, err = remora.run(["dump", "--json", "--no-source", "-p", str(t.pid)])
        if rc != 0:
            raise Fail("dump --json --no-source exited %d: %s" % (rc, tail(err)))
        if any("source" in f for th in parse_dump(out)["threads"] for f in th["frames"]):
            problems.append("--no-source: a frame has \"source\"")
        if problems:
            raise Fail("; ".join(problems[:6]) + (" (+%d more)" % (len(problems) - 6) if len(problems) > 6 else ""))
        nframes = sum(len(th["frames"]) for th in truth["threads"])
        shown = sum(1 for th in truth["threads"] for f in th["frames"] if f["source"] is not None)
        return "%d threads, %d frames: %d source lines as linecache has them, %d said to have none" % (
            len(truth["threads"]), nframes, shown, nframes - shown)


def tests(remora):
    return [("source/dump/" + i[0], lambda i=i: test_dump(remora, i), interp_missing(i))
            for i in INTERPRETERS]
