# Target for library/python-reuse (runs on CPython 3.9-3.15).
#
# The main thread recurses OUTER frames deep, then goes through STEPS: in each its inner
# frames are another chain (grown, shrunk, the innermost at another line, a middle frame
# at another line, the same again) while every frame below stays as it was. At each step
# it writes its own frames (innermost first: function, file, line) to argv[1] + ".K"
# (temp + rename), on the line where it then blocks reading stdin; a line on stdin moves
# it to the next step; EOF (or the last step) ends it:
#   {"pid": N, "step": K, "frames": [{"function": ..., "file": ..., "line": ...}, ...]}

import json
import os
import sys

OUTER = 20
PATH = sys.argv[1]


def name(code):
    return getattr(code, "co_qualname", code.co_name)


def truth(step):
    """Writes the caller's stack: it blocks on the line it called this from."""
    f = sys._getframe(1)
    frames = []
    while f is not None:
        frames.append({"function": name(f.f_code), "file": f.f_code.co_filename,
                       "line": f.f_lineno})
        f = f.f_back
    tmp = "%s.%d.tmp" % (PATH, step)
    with open(tmp, "w") as out:
        json.dump({"pid": os.getpid(), "step": step, "frames": frames}, out)
    os.rename(tmp, "%s.%d" % (PATH, step))


def leaf(step, where):
    if where == 0:
        truth(step); return sys.stdin.readline()
    truth(step); return sys.stdin.readline()


def descend(step, chain, where):
    if not chain:
        return leaf(step, where)
    return chain[0](step, chain[1:], where)


def b(step, chain, where):
    return descend(step, chain, where)


def c(step, chain, where):
    return descend(step, chain, where)


# (which line of steps() calls, the chain above it, the line leaf() blocks on)
STEPS = [
    (0, (), 0),
    (0, (b, c), 0),             # grown
    (0, (), 0),                 # shrunk back: step 0 again
    (0, (), 1),                 # only the innermost frame's line
    (0, (c,), 1),
    (1, (c,), 1),               # a middle frame's line, the frames above it alike
    (1, (b,), 0),
    (1, (b,), 0),               # nothing changed
    (0, (b, c, b, c), 1),
]


def steps():
    for k, (via, chain, where) in enumerate(STEPS):
        if via == 0:
            line = descend(k, chain, where)
        else:
            line = descend(k, chain, where)
        if not line:
            return


def outer(d):
    if d <= 1:
        return steps()
    return outer(d - 1)


outer(OUTER)
