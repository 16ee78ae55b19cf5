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
#                          says the same, instruction for instruction.

import collections
import os
import re
import tempfile

from harness import INTERPRETERS, TARGETS, Fail, Target, interp_missing, record, tail

SCRIPT = os.path.join(TARGETS, "opcodes_target.py")
LEAF = re.compile(r"^(.*) \((.*):(\d+)\) \[([A-Z0-9_]+)@(\d+)\]$")


def leaves(path):
    """Counter of (function, op, offset) of the innermost frames carrying an instruction,
    and the samples without one."""
    got, bare = collections.Counter(), 0
    with open(path, encoding="utf-8") as f:
        for line in f:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            m = LEAF.match(stack.split(";")[-1])
            if m:
                got[(m.group(1), m.group(4), int(m.group(5)))] += int(count)
            else:
                bare += int(count)
    return got, bare


def test_record(remora, interp):
    with Target(interp, SCRIPT, "ready.json") as t, tempfile.TemporaryDirectory(prefix="remora-op-") as d:
        ready = t.wait_ready()
        col, raw, conv = (os.path.join(d, n) for n in ("o.collapsed", "o.remora", "c.collapsed"))
        record(remora, ["-p", t.pid, "-d", "2", "--opcodes", "-o", col, "-o", raw])
        rc, _, err = remora.run(["convert", raw, "-o", conv])
        if rc != 0:
            raise Fail("convert exited %d: %s" % (rc, tail(err)))
        got, bare = leaves(col)
        again, _ = leaves(conv)
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
    if problems:
        raise Fail("; ".join(problems[:6]))
    top = sorted(mine.items(), key=lambda kv: -kv[1])[:4]
    return "%d samples in hot(): %s; specialised: %s" % (
        total, ", ".join("%s@%d %d" % (k[1], k[2], n) for k, n in top), ", ".join(special) or "none (3.%d)" % minor)


def tests(remora):
    return [("opcodes/record/" + i[0], lambda i=i: test_record(remora, i), interp_missing(i))
            for i in INTERPRETERS]
