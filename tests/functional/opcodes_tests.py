# Functional tests of --opcodes (each sample's bytecode instruction), run by run.py:
#
#   opcodes/record/INTERP  opcodes_target.py spins in hot(), a loop of attribute reads and
#                          integer additions, and gives hot()'s bytecode by its own dis
#                          (the base name at each byte offset) and its opcode module's
#                          families of specialised instructions. `record --opcodes` into
#                          collapsed stacks and a .remora: hot()'s innermost frames carry
#                          " [OP@N]" with N one of hot()'s instruction offsets and OP the
#                          base instruction there or one of its specialised forms; on 3.11+
#                          specialised forms are seen; the .remora converted to collapsed
#                          says the same, instruction for instruction; the flamegraph's
#                          "ops", the Firefox profile's frame implementations and the
#                          heatmap's per-line "ops" name hot()'s instructions as the
#                          collapsed stacks do (the same samples, converted).
#   opcodes/top/INTERP     `top --opcodes` on a pty: the selected row (hot(), first by
#                          %Own) names its instructions at the bottom, each one of hot()'s.

import collections
import json
import os
import re
import tempfile

from harness import INTERPRETERS, TARGETS, Fail, Target, interp_missing, pty_session, record, tail
from formats import frame_of

ORDER = 190           # where run.py runs these tests among the modules' (ascending)

SCRIPT = os.path.join(TARGETS, "opcodes_target.py")
LEAF = re.compile(r"^(.*) \((.*):(\d+)\) \[([A-Z0-9_]+)@(\d+)\]$")


def leaves(path):
    """Counter of (function, op, offset) of the innermost frames carrying an instruction,
    the samples without one, and a Counter of (file, op)."""
    got, bare, per_file = collections.Counter(), 0, collections.Counter()
    with open(path, encoding="utf-8") as f:
        for line in f:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            m = LEAF.match(stack.split(";")[-1])
            if m:
                got[(m.group(1), m.group(4), int(m.group(5)))] += int(count)
                per_file[(m.group(2), m.group(4))] += int(count)
            else:
                bare += int(count)
    return got, bare, per_file


def test_record(remora, interp):
    with Target(interp, SCRIPT, "ready.json") as t, tempfile.TemporaryDirectory(prefix="remora-op-") as d:
        ready = t.wait_ready()
        col, raw, conv = (os.path.join(d, n) for n in ("o.collapsed", "o.remora", "c.collapsed"))
        record(remora, ["-p", t.pid, "-d", "2", "--opcodes", "-o", col, "-o", raw])
        rc, _, err = remora.run(["convert", raw, "-o", conv])
        if rc != 0:
            raise Fail("convert exited %d: %s" % (rc, tail(err)))
        got, bare, per_file = leaves(col)
        again, _, _ = leaves(conv)
        views = {}
        for ext in ("html", "gecko.json", "heatmap.html"):
            out = os.path.join(d, "v." + ext)
            rc, _, err = remora.run(["convert", raw, "-o", out])
            if rc != 0:
                raise Fail("convert -o %s exited %d: %s" % (ext, rc, tail(err)))
            with open(out, encoding="utf-8") as f:
                views[ext] = f.read()
    minor = int(re.search(r"3\.(\d+)", interp[0]).group(1))
    family = ready["family"]
    mine = {k: n for k, n in got.items() if k[0] == "hot"}
    total = sum(mine.values())
    problems = []
    if total < 500:
        problems.append("%d samples in hot() with an instruction, want >= 500 (%d without)" % (total, bare))
    for (fn, op, off), n in sorted(mine.items()):
        base = ready["offsets"].get(str(off))
        if base is None:
            problems.append("%s@%d: no instruction of hot() starts at %d (%d samples)" % (op, off, off, n))
        elif op != base and family.get(op) != base:
            problems.append("%s@%d: hot() has %s there (%d samples)" % (op, off, base, n))
    special = sorted({op for (_, op, off) in mine if op != ready["offsets"].get(str(off))})
    if minor >= 11 and not special:
        problems.append("no specialised instruction seen on 3.%d: %s" % (minor, sorted({k[1] for k in mine})))
    if again != got:
        problems.append("the .remora converted says other instructions: %d vs %d kinds" % (len(again), len(got)))
    want_ops = {(op, off) for (_, op, off) in got}
    m = re.search(r'<script type="application/json" id="remora-data">(.*?)</script>', views["html"], re.S)
    fg = json.loads(m.group(1))["current"] if m else {}
    fg_ops = {(o[1], o[2]) for o in fg.get("ops", [])}
    if not want_ops <= fg_ops:
        problems.append("flamegraph ops lack %s" % sorted(want_ops - fg_ops)[:3])
    gk = json.loads(views["gecko.json"])
    strs = gk["shared"]["stringArray"]
    ff_ops = {(strs[i], a) for th in gk["threads"]
              for a, i in zip(th["frameTable"]["address"], th["frameTable"]["implementation"]) if i is not None}
    if not want_ops <= ff_ops:
        problems.append("Firefox frames lack %s" % sorted(want_ops - ff_ops)[:3])
    hm = json.loads(re.search(r'id="heatmap-data">(.*?)</script>', views["heatmap.html"], re.S).group(1))
    hm_ops = collections.Counter()
    for fl in hm["files"]:
        if fl["file"] == ready["file"]:
            for line, op, n in fl["ops"]:
                hm_ops[op] += n
    col_ops = collections.Counter({op: n for (fl, op), n in per_file.items() if fl == ready["file"]})
    if hm_ops != col_ops:
        problems.append("heatmap's instructions in %s %s, the collapsed stacks' %s" % (
            os.path.basename(ready["file"]), dict(hm_ops), dict(col_ops)))
    if problems:
        raise Fail("; ".join(problems[:6]))
    top = sorted(mine.items(), key=lambda kv: -kv[1])[:4]
    return "%d samples in hot(): %s; specialised: %s" % (
        total, ", ".join("%s@%d %d" % (k[1], k[2], n) for k, n in top), ", ".join(special) or "none (3.%d)" % minor)


def test_top(remora, interp):
    with Target(interp, SCRIPT, "ready.json") as t:
        ready = t.wait_ready()
        family = ready["family"]
        bases = set(ready["offsets"].values())

        def seen(text):
            lines = frame_of(text)
            return any(l.startswith("instructions:") for l in lines) and \
                any(l.lstrip().startswith("hot (") or " hot (" in l for l in lines)

        text, code = pty_session(remora.argv(["top", "--opcodes", "-p", t.pid]), 40, 160, seen)
    if code != 0:
        raise Fail("exit %d after q" % code)
    lines = frame_of(text[:text.rindex("\x1b[?1049l")])
    ops_line = next((l for l in lines if l.startswith("instructions:")), None)
    if ops_line is None:
        raise Fail("no instructions line: %r" % lines[-4:])
    named = re.findall(r"  ([A-Z][A-Z0-9_]*) [\d.]+%", ops_line)
    bad = [op for op in named if op not in bases and family.get(op) not in bases]
    if not named or bad:
        raise Fail("instructions %r: not hot()'s: %r" % (ops_line, bad))
    return ops_line


def tests(remora):
    return [("opcodes/record/" + i[0], lambda i=i: test_record(remora, i), interp_missing(i))
            for i in INTERPRETERS] + \
        [("opcodes/top/" + i[0], lambda i=i: test_top(remora, i), interp_missing(i)) for i in INTERPRETERS]
