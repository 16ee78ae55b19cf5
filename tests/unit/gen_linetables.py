"""Writes C fixtures for the line-table unit tests: each code object's table as the
running interpreter built it, and the line CPython itself reports for every instruction
(dis.findlinestarts on 3.9, co_lines() on 3.10+). Run under each interpreter:

    python3.X tests/unit/gen_linetables.py >> tests/unit/linetables.h

tests/unit/gen_linetables.sh runs it for every version and writes the header.
"""
import dis
import sys

SOURCE = '''
def simple(a, b):
    c = a + b
    return c

def loops(n):
    total = 0
    for i in range(n):
        if i % 3 == 0:
            total += i
        elif i % 5 == 0:
            total -= 1
        else:
            continue
    while total > 100:
        total //= 2
    return total

def handlers(x):
    try:
        return 1 / x
    except ZeroDivisionError:
        pass
    finally:
        x = None
    return 0

def far(x):
    y = x
''' + '\n' * 300 + '''    return [
        y
        for _ in range(3)
    ]

class K:
    def method(self):
        return (lambda z:
                z + 1)(2)
'''

def codes(co):
    yield co
    for c in co.co_consts:
        if hasattr(c, "co_code"):
            yield from codes(c)

def lines(co):
    """(byte offset, line or -1) for every code unit."""
    n = len(co.co_code)
    out = []
    if sys.version_info < (3, 10):
        starts = list(dis.findlinestarts(co))
        for off in range(0, n, 2):
            line = co.co_firstlineno
            for s, l in starts:
                if s <= off:
                    line = l
            out.append((off, line))
    else:
        table = {}
        for start, end, line in co.co_lines():
            for off in range(start, end, 2):
                table[off] = -1 if line is None else line
        for off in range(0, n, 2):
            out.append((off, table.get(off, -1)))
    return out

def main():
    minor = sys.version_info[1]
    top = compile(SOURCE, "<fixture>", "exec")
    cases = []
    for k, co in enumerate(codes(top)):
        tab = co.co_lnotab if minor == 9 else co.co_linetable
        offs = lines(co)
        name = "lt_%d_%d" % (minor, k)
        print("static const unsigned char %s_tab[] = {%s};" % (name, ",".join(str(b) for b in tab) or "0"))
        print("static const int %s_off[] = {%s};" % (name, ",".join(str(o) for o, _ in offs)))
        print("static const int %s_line[] = {%s};" % (name, ",".join(str(l) for _, l in offs)))
        cases.append('LT_CASE(%d, "%s", %d, %s, %d, %d)' % (minor, co.co_name, co.co_firstlineno,
                                                          name, len(tab), len(offs)))
    print("#define LT_CASES_%d \\\n    %s" % (minor, " \\\n    ".join(cases)))

main()
