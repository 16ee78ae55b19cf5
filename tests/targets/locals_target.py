# A program parked with known local variables, for `remora dump --locals`
# (tests/functional/locals_tests.py). Its own truth, written to argv[1] (JSON) when every
# frame is parked: for each frame of interest its function, its locals as repr() gives
# them (frame.f_locals), its arguments, cells, free variables and unbound locals (from
# its code object), and for values that repr() writes with an address, the type's name
# and id(). Then the main thread reads stdin (EOF: exit).
#
#   main thread:  holder(...) -> closure(...) parked in read(0)
#                 holder holds every kind of value repr() is compared on, a cell shared
#                 with closure (a free variable in closure's frame) and an unbound local
#   "bounded":    a thread holding what dump must cut (a 10 million-item list, a 100 MB
#                 str, self-referencing list and dict, deep nesting, a huge int), locals
#                 named with control characters, and hostile strings; parked in read()
import json
import os
import sys
import threading
import types

OUT = sys.argv[1]
LIGHT = sys.argv[2:] == ["light"]       # the core test: small "big" values (a small core)
BIG_STR_LEN = 1000 * 1000 if LIGHT else 100 * 1000 * 1000
HUGE_LIST_LEN = 100 * 1000 if LIGHT else 10 * 1000 * 1000
bounded_ready = threading.Event()
pipe_r, pipe_w = os.pipe()


class Plain:
    pass


class Point:
    def __init__(self, x, y):
        self.x = x
        self.y = y


def safe_repr(v):
    try:
        return repr(v)
    except ValueError:          # an int past sys.get_int_max_str_digits()
        return "<too big>"


def describe(frame, extra=None, skip=()):
    """A frame's truth; the values of names in skip are not repr()'d (too big, or
    changing: named only)."""
    code = frame.f_code
    nargs = code.co_argcount + code.co_kwonlyargcount + bool(code.co_flags & 4) + bool(code.co_flags & 8)
    loc = dict(frame.f_locals)
    reprs = {k: "" if k in skip else safe_repr(v) for k, v in loc.items()}
    names = list(code.co_varnames) + [n for n in code.co_cellvars if n not in code.co_varnames] + list(code.co_freevars)
    return {
        "function": code.co_name,
        "locals": reprs,
        "skipped": [k for k in loc if k in skip],
        "objects": {k: [type(v).__name__, id(v)] for k, v in loc.items()
                    if reprs[k].startswith("<") and " at 0x" in reprs[k]},
        "arguments": list(code.co_varnames[:nargs]),
        "cells": list(code.co_cellvars),
        "free": list(code.co_freevars),
        "unbound": [n for n in names if n not in loc],
        "extra": extra or {},
    }


def park_bounded(box):
    huge_list = [None] * HUGE_LIST_LEN
    big_str = "x" * BIG_STR_LEN
    self_list = []
    self_list.append(self_list)
    self_dict = {}
    self_dict["me"] = self_dict
    deep = []
    for _ in range(100):
        deep = [deep]
    huge_int = -(7 ** 40000)
    hostile = '</script><img src=x onerror=alert(1)>\x1b[31m\n\r"\'\u2028\x00'
    box.append(describe(sys._getframe(), {"huge_int_digits30": (huge_int.bit_length() + 29) // 30,
                                          "big_str_len": len(big_str),
                                          "huge_list_len": len(huge_list)},
                        skip=("box", "huge_list", "big_str", "huge_int", "deep")))
    bounded_ready.set()
    os.read(pipe_r, 1)
    return huge_list, big_str, self_list, self_dict, deep, huge_int, hostile


def odd_names(a, b):
    c = a
    box = b
    box.append(describe(sys._getframe(), skip=("box", "</script>\"'")))
    park_bounded(box)
    return c


# the locals of odd_names renamed: control characters, a quote, </script>
_code = odd_names.__code__
_code = _code.replace(co_varnames=("na\nme\x1b[2J", "</script>\"'", "tab\there\x7f", "box"))
odd_names_renamed = types.FunctionType(_code, globals(), "odd_names")


def report(box, bounded_tid):
    """Writes the truth of its callers (closure, holder) and the bounded thread's
    frames, then parks in read(0) until EOF."""
    truth = {
        "frames": [describe(sys._getframe(1), skip=("box", "t")), describe(sys._getframe(2))] + box,
        "bounded_native_id": bounded_tid,
    }
    with open(OUT + ".tmp", "w") as f:
        json.dump(truth, f)
    os.rename(OUT + ".tmp", OUT)
    sys.stdin.buffer.read()


def holder(pos, dflt=2, *args, kwo=4, **kwargs):
    neg_big = -(2 ** 100) - 7
    pow100 = 2 ** 100
    small = -5
    zero = 0
    big63 = 2 ** 63 + 1
    f01 = 0.1
    f1e300 = 1e300
    negzero = -0.0
    fnan = float("nan")
    fninf = float("-inf")
    f1e16 = 1e16
    f1e15 = 1e15
    fsmall = 1e-5
    f123 = 123.0
    fpi = 3.141592653589793
    f3rd = 1 / 3
    yes = True
    no = False
    nothing = None
    s_ascii = "hello"
    s_empty = ""
    s_q1 = "it's"
    s_q2 = 'say "hi"'
    s_both = "it's \"x\""
    s_ctrl = "\x00\x01\x7f\t\n\r\x1b\x85\xa0\xad"
    s_nonascii = "café функция Ω"
    s_lines = "\u2028\u2029"
    s_astral = "\U0001f600\U00020000\U000e0001"
    s_surrogate = "a\ud800b"
    s_backslash = "C:\\path\\"
    b_all = bytes(range(256))
    b_q1 = b"it's"
    b_both = b"'\""
    b_empty = b""
    nested = [1, (2, 3), {"k": [4, {5}]}, "x", None]
    empty_set = set()
    empty_dict = {}
    empty_tuple = ()
    one_tuple = (1,)
    empty_list = []
    fz = frozenset({7})
    fz_empty = frozenset()
    int_set = {3, 1, 2}
    str_dict = {"a": 1, "b": [2.5, "c"]}
    obj = Plain()
    pts = [Point(1, 2), Point(3, 4)]
    pts[1].z = 5
    inst_dict = pts[0].__dict__         # an instance's dict (split keys where it can be)
    inst_dict2 = pts[1].__dict__
    del_dict = {"gone": 1, "kept": 2}
    del del_dict["gone"]
    del_dict["new"] = 3
    discard_set = {1, 2, 3}
    discard_set.discard(2)
    shared = ["cell", 1]

    def closure(x):
        inner_local = shared[0]
        box = []
        t = threading.Thread(target=odd_names_renamed, args=(x, box), name="bounded", daemon=True)
        t.start()
        bounded_ready.wait()
        report(box, t.native_id)
        return inner_local

    closure("arg")
    if pos is None:
        later = 1
        return later
    return None


holder(1, 2, 3, kwo=4, extra="e")
