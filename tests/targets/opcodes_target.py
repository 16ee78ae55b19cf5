"""Target for the --opcodes tests (runs on CPython 3.9-3.15): the main thread spins in hot(),
a loop of attribute reads and integer additions that 3.11+ specialise, and says what the
bytecode of hot() is, by its own dis module.

    python opcodes_target.py READY

READY (JSON, temp + rename), written once hot() has run long enough to be specialised:
    {"pid": N, "file": F, "function": "hot",
     "offsets": {"N": base opcode name at byte offset N (dis, not adaptive)},
     "family": {"SPECIALISED_NAME": "BASE_NAME", ...}}   (opcode._specializations; {} before 3.11)
It spins until stdin reaches EOF.
"""
import dis
import json
import opcode
import os
import select
import sys

READY = sys.argv[1]


class Point:
    def __init__(self):
        self.x = 1
        self.y = 2


def hot(p, rounds):
    s = 0
    for _ in range(rounds):
        s += p.x
        s += p.y
    return s


def main():
    p = Point()
    for _ in range(200):
        hot(p, 100)                 # warm: 3.11+ specialise hot()'s instructions
    offsets = {str(i.offset): i.opname for i in dis.get_instructions(hot.__code__)}
    family = {}
    for base, names in (getattr(opcode, "_specializations", None) or {}).items():
        for name in names:
            family[name] = base
    with open(READY + ".tmp", "w") as f:
        json.dump({"pid": os.getpid(), "file": hot.__code__.co_filename, "function": "hot",
                   "offsets": offsets, "family": family}, f)
    os.rename(READY + ".tmp", READY)
    while not select.select([sys.stdin], [], [], 0)[0]:
        hot(p, 10000)


main()
