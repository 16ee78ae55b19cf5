# What remora writes, read back by the functional tests: collapsed stacks (and their
# escapes), speedscope, pprof (gzip + profile.proto, decoded here), the Firefox Profiler's
# processed format, the raw .remora recording, the flamegraph page's embedded data, the
# pstats and `top` tables, and `dump`'s text and JSON. Each reader checks what it reads
# strictly and raises common.Fail on anything malformed; none runs remora (recording.py
# does). Standard library only; the *_tests.py modules import this and the shared modules
# (harness.py), never each other.

import collections
import gzip
import json
import math
import os
import re
import shutil
import subprocess

from common import REPO, Fail, tail


# --- collapsed stacks (src/formats/collapsed.c, escapes in src/formats/text.c) ---------------------

THREAD = re.compile(r"^thread (.*) \((\d+)\)$", re.S)
FRAME = re.compile(r"^(.*) \((.*):(-?\d+)\)$", re.S)


ESCAPE = re.compile(r"\\(?:x([0-9a-fA-F]{2})|u([0-9a-fA-F]{4})|([\\;nrt]))|;")
SIMPLE = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", ";": ";"}


def unescape_split(text):
    """Splits a collapsed stack at unescaped ';' and undoes \\\\ \\; \\n \\r \\t \\xNN \\uNNNN
    (src/formats/text.c). A line without a backslash is split as it is; one with escapes is
    read a token at a time (ESCAPE: an escape or a ';'), anything else between them kept."""
    if "\\" not in text:
        return text.split(";")
    parts, cur, i = [], [], 0
    for m in ESCAPE.finditer(text):
        plain = text[i:m.start()]
        if "\\" in plain:                 # a backslash ESCAPE did not take
            raise ValueError("bad or unknown escape %s" % plain[plain.index("\\"):][:6])
        cur.append(plain)
        i = m.end()
        if m.group(0) == ";":
            parts.append("".join(cur))
            cur = []
        elif m.group(1) or m.group(2):
            cur.append(chr(int(m.group(1) or m.group(2), 16)))
        else:
            cur.append(SIMPLE[m.group(3)])
    rest = text[i:]
    if "\\" in rest:
        raise ValueError("dangling backslash" if rest.endswith("\\") and rest.count("\\") == 1
                         else "bad or unknown escape %s" % rest[rest.index("\\"):][:6])
    cur.append(rest)
    parts.append("".join(cur))
    return parts


class Stack:
    """One line of a collapsed file: thread name and tid, frames outermost first as
    (function, file, line) -- file and line None for a frame without them -- and count."""

    def __init__(self, name, tid, frames, count):
        self.name, self.tid, self.frames, self.count = name, tid, frames, count

    def functions(self):
        return [f[0] for f in self.frames]


def parse_collapsed(path):
    """Parses remora's collapsed output; Fail on any line that is not a threaded stack."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise Fail("cannot read %s: %s" % (path, e))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise Fail("%s is not UTF-8: %s" % (os.path.basename(path), e))
    if text and not text.endswith("\n"):
        raise Fail("%s does not end with a newline" % os.path.basename(path))
    stacks, seen = [], {}
    for n, line in enumerate(text.split("\n")[:-1] if text else [], 1):   # lines end at \n only
        where = "%s line %d (%r)" % (os.path.basename(path), n, line[:120])
        head, _, count = line.rpartition(" ")
        if not count.isdigit() or int(count) <= 0:
            raise Fail("%s: no positive count at the end" % where)
        try:
            parts = unescape_split(head)
        except ValueError as e:
            raise Fail("%s: %s" % (where, e))
        m = THREAD.match(parts[0])
        if m is None:
            raise Fail("%s: first element is not `thread NAME (TID)`" % where)
        frames = []
        for p in parts[1:]:
            fr = seen.get(p)                # deep stacks repeat their frames: parse each once
            if fr is None:
                fm = FRAME.match(p)
                fr = seen[p] = ((fm.group(1), fm.group(2), int(fm.group(3))) if fm
                                else (p, None, None))
            frames.append(fr)
        stacks.append(Stack(m.group(1), int(m.group(2)), frames, int(count)))
    return stacks


def by_thread(stacks, frame=None):
    """{tid: Counter(frames tuple -> samples)} of parsed collapsed stacks; 'frame', if
    given, maps each (function, file, line) first."""
    out = {}
    for s in stacks:
        key = tuple(frame(f) for f in s.frames) if frame else tuple(s.frames)
        out.setdefault(s.tid, collections.Counter())[key] += s.count
    return out


def plain_frame(f):
    """A collapsed frame as pprof and the Firefox format say it: no file "", no line 0."""
    fn, fi, li = f
    return (fn, fi or "", li if li is not None and li > 0 else 0)


def first_difference(a, b):
    """A description of one stack whose count differs between two {tid: Counter}."""
    for tid in sorted(set(a) | set(b)):
        ca, cb = a.get(tid, collections.Counter()), b.get(tid, collections.Counter())
        for st in list(ca) + list(cb):
            if ca.get(st, 0) != cb.get(st, 0):
                return "thread %d: %d vs %d samples of [%s]" % (
                    tid, ca.get(st, 0), cb.get(st, 0),
                    ";".join("%s %s:%s" % f if isinstance(f, tuple) else str(f) for f in st)[-400:])
    return "none"


def total(stacks, tid=None, has=None):
    """Samples in stacks, of thread tid if given, whose functions include has if given."""
    return sum(s.count for s in stacks
               if (tid is None or s.tid == tid) and (has is None or has in s.functions()))


def speedscope_stacks(doc):
    """{tid: Counter((function, file, line) tuples -> weight)} and profile names, from a
    speedscope file as remora writes it (sampled profiles named `thread NAME (TID)`, unit
    "seconds": a weight is the stack's samples x the sampling interval; see
    speedscope_counts)."""
    frames = doc["shared"]["frames"]
    keys = [(f["name"], f.get("file"), f.get("line")) for f in frames]
    out, names = {}, {}
    for prof in doc["profiles"]:
        m = THREAD.match(prof.get("name", ""))
        if m is None:
            if prof.get("samples"):
                raise Fail("profile %r is not named `thread NAME (TID)`" % prof.get("name"))
            continue
        tid = int(m.group(2))
        names[tid] = m.group(1)
        if prof.get("type") != "sampled" or len(prof["samples"]) != len(prof["weights"]):
            raise Fail("profile %r: not a sampled profile with one weight per sample"
                       % prof["name"])
        if prof.get("unit") != "seconds" or prof.get("startValue") != 0:
            raise Fail("profile %r: unit %r from %r, want seconds from 0"
                       % (prof["name"], prof.get("unit"), prof.get("startValue")))
        if not math.isclose(sum(prof["weights"]), prof["endValue"], rel_tol=1e-9, abs_tol=1e-12):
            raise Fail("profile %r: weights add up to %r, endValue is %r"
                       % (prof["name"], sum(prof["weights"]), prof["endValue"]))
        c = out.setdefault(tid, collections.Counter())
        for stack, w in zip(prof["samples"], prof["weights"]):
            if stack and (min(stack) < 0 or max(stack) >= len(frames)):
                raise Fail("profile %r: frame index out of range" % prof["name"])
            c[tuple(keys[i] for i in stack)] += w
    return out, names


def speedscope_counts(got, counts):
    """The weights of speedscope_stacks() (seconds) as sample counts, given the counts of
    the same recording ({tid: Counter(stack -> samples)}, e.g. its collapsed file): with
    one interval dt, total seconds / total samples, every weight must be a whole number of
    samples (within 1e-6 of one). Returns ({tid: Counter(stack -> count)}, dt); a weight
    that is no whole count stays a float, so a comparison with counts fails."""
    seconds = sum(sum(c.values()) for c in got.values())
    n = sum(sum(c.values()) for c in counts.values())
    dt = seconds / n if n else 0.0
    out = {}
    for tid, c in got.items():
        o = out.setdefault(tid, collections.Counter())
        for st, w in c.items():
            k = w / dt if dt else w
            o[st] = round(k) if abs(k - round(k)) < 1e-6 * max(1.0, k) else k
    return out, dt


# --- names as remora emits them, and strict reading of text and JSON ---------------------
# (src/unwind/pystr.c, src/formats/json.c, src/formats/text.c)

NAME_BOUND = 1024              # code points kept of a name (UNW_MAX_NAME in src/unwind/unwind.h)
# what may never appear raw in text remora writes (escaped instead): C0 but newline, DEL,
# C1, U+2028, U+2029
RAW_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029]")
TEXT_ESCAPE = re.compile(r"\\(?:x([0-9a-fA-F]{2})|u([0-9a-fA-F]{4})|(.))", re.S)


def emitted(name):
    """A str name of the target as remora documents it emits it."""
    return "".join("\ufffd" if c == "\0" or 0xd800 <= ord(c) <= 0xdfff else c
                   for c in name[:NAME_BOUND])


def emitted_bytes(b):
    """A thread name's bytes: each byte not part of valid UTF-8 becomes U+FFFD."""
    out, i = [], 0
    while i < len(b):
        for k in (1, 2, 3, 4):
            try:
                out.append(b[i:i + k].decode("utf-8"))
                i += k
                break
            except UnicodeDecodeError:
                continue
        else:
            out.append("\ufffd")
            i += 1
    return "".join(out)


def short(s, n=60):
    return repr(s if len(s) <= n else s[:n] + "...")


def utf8(what, data):
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise Fail("%s is not valid UTF-8: %s" % (what, e))


def no_raw_control(what, text):
    m = RAW_CONTROL.search(text)
    if m:
        raise Fail("%s holds a raw control character U+%04X at %d: %r"
                   % (what, ord(m.group()), m.start(), text[max(0, m.start() - 40):m.start() + 10]))


def untext(what, s, quote=None):
    """Undoes out_text_str(): \\\\ \\n \\r \\t \\xNN \\uNNNN, and \\QUOTE."""
    def rep(m):
        if m.group(1):
            return chr(int(m.group(1), 16))
        if m.group(2):
            return chr(int(m.group(2), 16))
        c = m.group(3)
        if c in "nrt":
            return {"n": "\n", "r": "\r", "t": "\t"}[c]
        if c == "\\" or c == quote:
            return c
        raise Fail("%s: unknown escape \\%s in %s" % (what, c, short(s)))
    out = TEXT_ESCAPE.sub(rep, s)
    if re.search(r"(?<!\\)(?:\\\\)*\\$", s):
        raise Fail("%s: dangling backslash in %s" % (what, short(s)))
    return out


def strict_json(what, data):
    """Parses data as JSON the strict way: valid UTF-8, no NaN/Infinity, no lone surrogate."""
    text = utf8(what, data)

    def bad_constant(c):
        raise Fail("%s holds %s, which is not JSON" % (what, c))
    try:
        doc = json.loads(text, parse_constant=bad_constant)
    except ValueError as e:
        raise Fail("%s is not JSON: %s" % (what, e))

    def walk(v):
        if isinstance(v, str):
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:
                raise Fail("%s holds a string with a lone surrogate: %s" % (what, short(v)))
        elif isinstance(v, list):
            for x in v:
                walk(x)
        elif isinstance(v, dict):
            for k, x in v.items():
                walk(k)
                walk(x)
    walk(doc)
    return doc


# --- the flamegraph page (-o FILE.html): the template with the profile inserted ----------

TEMPLATE = os.path.join(REPO, "src", "formats", "flamegraph.html")
DATA_OPEN = '<script type="application/json" id="remora-data">'


def flamegraph_data(what, path):
    """The embedded profile of a flamegraph page, after checking that the page is the
    template with only the data inserted, and that the data cannot end its element."""
    with open(path, "rb") as f:
        page = utf8(what, f.read())
    with open(TEMPLATE, encoding="utf-8") as f:
        tpl = f.read()
    head, _, tail_ = tpl.partition("@REMORA_DATA@")
    if not (page.startswith(head) and page.endswith(tail_) and len(page) >= len(head) + len(tail_)):
        raise Fail("%s: the page is not the template with the data inserted" % what)
    data = page[len(head):len(page) - len(tail_)]
    if not head.endswith(DATA_OPEN):
        raise Fail("template: the data placeholder is not inside %s" % DATA_OPEN)
    for bad in ("<", ">", "&"):
        if bad in data:
            i = data.index(bad)
            raise Fail("%s: a raw %r in the embedded data: %r" % (what, bad, data[max(0, i - 40):i + 20]))
    return strict_json(what + " data", data.encode("utf-8"))


def flamegraph_stacks(doc):
    """({tid: thread name}, {tid: [frame lists, outermost first]}) of a flamegraph's
    embedded data, each thread's stacks rebuilt from its pre-order nodes."""
    P = doc["current"]
    S, F = P["strings"], P["frames"]
    names = {t[0]: t[1] for t in P["threads"]}
    # rebuild each thread's stacks from the pre-order nodes
    stacks = collections.defaultdict(list)
    ti, path_ = -1, []
    for depth, frame in zip(P["depth"], P["frame"]):
        if depth == 0:
            ti += 1
            path_ = []
            continue
        del path_[depth - 1:]
        path_.append((S[F[3 * frame]], S[F[3 * frame + 1]], F[3 * frame + 2]))
        stacks[P["threads"][ti][0]].append(list(path_))
    return names, stacks


# --- the table (no -o, -f table, -o FILE.table) -------------------------------------------

def table_rows(what, data):
    """{(function, file)} of the table's rows, unescaped; one row per line, names
    escaped by out_text_str(); no raw control character anywhere."""
    text = utf8(what, data)
    no_raw_control(what, text.replace("\n", ""))
    rows = set()
    for line in text.split("\n")[1:]:
        m = re.match(r"^\s*\d+\s+[\d.]+%\s+\d+\s+[\d.]+%  (.*)$", line)
        if m is None:
            if line and not line.startswith("("):
                raise Fail("%s: a line that is not a row: %s" % (what, short(line)))
            continue
        fm = FRAME.match(m.group(1))
        if fm:
            rows.add((untext(what, fm.group(1)), untext(what, fm.group(2))))
    return rows


# --- the pstats file (-o FILE.pstats): Python's marshal, as cProfile writes it ----------

def read_pstats(what, path):
    """The dict of a pstats file, loaded by this Python's marshal, every entry checked:
    {(file, line, function): (primitive calls, calls, tottime, cumtime, callers)}, callers
    {(file, line, function): (calls, primitive calls, tottime, cumtime)}; strs, ints and
    floats where cProfile puts them, no negative figure, tottime <= cumtime."""
    import marshal
    with open(path, "rb") as f:
        data = f.read()
    try:
        stats = marshal.loads(data)
    except (ValueError, EOFError, TypeError) as e:
        raise Fail("%s: marshal cannot load it: %s" % (what, e))

    def key_ok(k):
        return (isinstance(k, tuple) and len(k) == 3 and isinstance(k[0], str)
                and type(k[1]) is int and k[1] >= 0 and isinstance(k[2], str))

    if not isinstance(stats, dict):
        raise Fail("%s: a %s, not a dict" % (what, type(stats).__name__))
    for k, v in stats.items():
        if not key_ok(k):
            raise Fail("%s: key %r is not (file, line, function)" % (what, k))
        if not (isinstance(v, tuple) and len(v) == 5 and type(v[0]) is int and type(v[1]) is int
                and type(v[2]) is float and type(v[3]) is float and isinstance(v[4], dict)):
            raise Fail("%s: %r: value %r is not (cc, nc, tt, ct, callers)" % (what, k, v))
        if min(v[:4]) < 0 or v[2] > v[3] * (1 + 1e-9):
            raise Fail("%s: %r: figures %r (negative, or tottime over cumtime)" % (what, k, v[:4]))
        for ck, cv in v[4].items():
            if not key_ok(ck) or ck not in stats:
                raise Fail("%s: %r: caller %r is no entry of the file" % (what, k, ck))
            if not (isinstance(cv, tuple) and len(cv) == 4 and type(cv[0]) is int
                    and type(cv[1]) is int and type(cv[2]) is float and type(cv[3]) is float):
                raise Fail("%s: %r: caller %r: %r is not (nc, cc, tt, ct)" % (what, k, ck, cv))
    return stats


def pstats_rows(stats):
    """{(function, file)} of a pstats dict; cProfile's '~' (no file) is ''."""
    return {(fn, "" if file == "~" else file) for file, _, fn in stats}


# --- pprof (-o FILE.pb.gz): gzip, then profile.proto -------------------------------------

def pb_fields(buf, what):
    """[(field, wire type, int or bytes)] of one protobuf message."""
    out, i, n = [], 0, len(buf)

    def varint():
        nonlocal i
        v = shift = 0
        while True:
            if i >= n or shift > 63:
                raise Fail("%s: truncated or overlong varint" % what)
            b = buf[i]
            i += 1
            v |= (b & 0x7f) << shift
            shift += 7
            if not b & 0x80:
                return v

    while i < n:
        key = varint()
        field, wt = key >> 3, key & 7
        if wt == 0:
            out.append((field, wt, varint()))
        elif wt == 2:
            ln = varint()
            if i + ln > n:
                raise Fail("%s: field %d runs past the end" % (what, field))
            out.append((field, wt, buf[i:i + ln]))
            i += ln
        elif wt in (1, 5):
            w = 8 if wt == 1 else 4
            out.append((field, wt, int.from_bytes(buf[i:i + w], "little")))
            i += w
        else:
            raise Fail("%s: wire type %d" % (what, wt))
    return out


def packed(value, what):
    """A repeated varint field: packed (bytes) or one unpacked value (int)."""
    if isinstance(value, int):
        return [value]
    vals, v, shift = [], 0, 0
    for b in value:
        v |= (b & 0x7f) << shift
        shift += 7
        if not b & 0x80:
            vals.append(v)
            v = shift = 0
        elif shift > 63:
            raise Fail("%s: overlong varint" % what)
    if shift:
        raise Fail("%s: truncated packed varints" % what)
    return vals


def read_pprof(path):
    """The profile as a dict, with every reference checked."""
    name = os.path.basename(path)
    try:
        with gzip.open(path, "rb") as f:
            data = f.read()
    except (OSError, EOFError) as e:
        raise Fail("%s is not gzip: %s" % (name, e))
    p = {"sample_type": [], "sample": [], "location": {}, "function": {}, "strings": [],
         "comment": [], "period": 0, "period_type": None, "time_nanos": 0, "duration_nanos": 0}
    raw_vt = lambda b: {f: v for f, _, v in pb_fields(b, name + " ValueType")}
    for field, wt, v in pb_fields(data, name):
        if field == 1:
            p["sample_type"].append(raw_vt(v))
        elif field == 2:
            s = {"loc": [], "value": [], "label": []}
            for f2, _, v2 in pb_fields(v, name + " Sample"):
                if f2 == 1:
                    s["loc"] += packed(v2, name)
                elif f2 == 2:
                    s["value"] += packed(v2, name)
                elif f2 == 3:
                    s["label"].append({f3: v3 for f3, _, v3 in pb_fields(v2, name + " Label")})
            p["sample"].append(s)
        elif field == 4:
            loc = {"id": 0, "line": []}
            for f2, _, v2 in pb_fields(v, name + " Location"):
                if f2 == 1:
                    loc["id"] = v2
                elif f2 == 4:
                    loc["line"].append({f3: v3 for f3, _, v3 in pb_fields(v2, name + " Line")})
            if loc["id"] == 0 or loc["id"] in p["location"]:
                raise Fail("%s: location id %d zero or repeated" % (name, loc["id"]))
            p["location"][loc["id"]] = loc
        elif field == 5:
            fn = {f2: v2 for f2, _, v2 in pb_fields(v, name + " Function")}
            if fn.get(1, 0) == 0 or fn[1] in p["function"]:
                raise Fail("%s: function id %d zero or repeated" % (name, fn.get(1, 0)))
            p["function"][fn[1]] = fn
        elif field == 6:
            try:
                p["strings"].append(v.decode("utf-8"))
            except UnicodeDecodeError as e:
                raise Fail("%s: string %d is not UTF-8: %s" % (name, len(p["strings"]), e))
        elif field == 9:
            p["time_nanos"] = v
        elif field == 10:
            p["duration_nanos"] = v
        elif field == 11:
            p["period_type"] = raw_vt(v)
        elif field == 12:
            p["period"] = v
        elif field == 13:
            p["comment"] += packed(v, name)
    strs = p["strings"]
    if not strs or strs[0] != "":
        raise Fail("%s: string 0 must be empty" % name)

    def s(i, what):
        if not 0 <= i < len(strs):
            raise Fail("%s: %s names string %d of %d" % (name, what, i, len(strs)))
        return strs[i]

    p["types"] = [(s(vt.get(1, 0), "sample_type"), s(vt.get(2, 0), "sample_type"))
                  for vt in p["sample_type"]]
    for fn in p["function"].values():
        fn["name"], fn["file"] = s(fn.get(2, 0), "function"), s(fn.get(4, 0), "function")
    for loc in p["location"].values():
        for ln in loc["line"]:
            if ln.get(1, 0) not in p["function"]:
                raise Fail("%s: location %d names function %d, not defined"
                           % (name, loc["id"], ln.get(1, 0)))
    for smp in p["sample"]:
        if len(smp["value"]) != len(p["types"]):
            raise Fail("%s: a sample has %d values for %d sample types"
                       % (name, len(smp["value"]), len(p["types"])))
        for lid in smp["loc"]:
            if lid not in p["location"]:
                raise Fail("%s: a sample names location %d, not defined" % (name, lid))
        smp["labels"] = {}
        for lb in smp["label"]:
            key = s(lb.get(1, 0), "label")
            smp["labels"][key] = s(lb[2], "label") if 2 in lb else lb.get(3, 0)
    for c in p["comment"]:
        s(c, "comment")
    return p


def pprof_stacks(p):
    """{tid: Counter((function, file, line) outermost first -> count)} and thread names."""
    out, names = {}, {}
    for smp in p["sample"]:
        tid = smp["labels"].get("thread_id")
        if not isinstance(tid, int) or "thread" not in smp["labels"]:
            raise Fail("a sample without thread and thread_id labels: %r" % smp["labels"])
        names.setdefault(tid, set()).add(smp["labels"]["thread"])
        frames = []
        for lid in reversed(smp["loc"]):
            for ln in reversed(p["location"][lid]["line"]):
                fn = p["function"][ln[1]]
                frames.append((fn["name"], fn["file"], ln.get(2, 0)))
        out.setdefault(tid, collections.Counter())[tuple(frames)] += smp["value"][0]
    return out, names


# --- the Firefox Profiler's processed format (-o FILE.gecko.json) -------------------------

def columns(table, what, names):
    n = table.get("length")
    for c in names:
        if not isinstance(table.get(c), list) or len(table[c]) != n:
            raise Fail("%s.%s is not a column of length %r" % (what, c, n))
    return n


def firefox_stacks(doc):
    """{tid: Counter((function, file, line) outermost first -> samples)}, thread names and
    each thread's sample times, from a processed profile as remora writes it."""
    strings = doc["shared"]["stringArray"]
    out, names, times = {}, {}, {}

    def s(i, what):
        if not isinstance(i, int) or not 0 <= i < len(strings):
            raise Fail("%s names string %r of %d" % (what, i, len(strings)))
        return strings[i]

    for th in doc["threads"]:
        tid = th["tid"]
        what = "thread %s" % tid
        ns = columns(th["stackTable"], what + " stackTable", ("frame", "prefix", "category"))
        nf = columns(th["frameTable"], what + " frameTable", ("func", "line", "category"))
        nfn = columns(th["funcTable"], what + " funcTable", ("name", "fileName", "lineNumber"))
        n = columns(th["samples"], what + " samples", ("stack", "time"))
        st, ft, fn = th["stackTable"], th["frameTable"], th["funcTable"]
        for i in range(ns):
            p = st["prefix"][i]
            if p is not None and not (isinstance(p, int) and 0 <= p < i):
                raise Fail("%s: stack %d's prefix %r does not come before it" % (what, i, p))
            if not 0 <= st["frame"][i] < nf:
                raise Fail("%s: stack %d names frame %r of %d" % (what, i, st["frame"][i], nf))
        for i in range(nf):
            if not 0 <= ft["func"][i] < nfn:
                raise Fail("%s: frame %d names func %r of %d" % (what, i, ft["func"][i], nfn))
        c = out.setdefault(tid, collections.Counter())
        for k in range(n):
            stack, frames = th["samples"]["stack"][k], []
            if stack is not None and not (isinstance(stack, int) and 0 <= stack < ns):
                raise Fail("%s: sample %d names stack %r of %d" % (what, k, stack, ns))
            while stack is not None:
                f = st["frame"][stack]
                u = ft["func"][f]
                file_i = fn["fileName"][u]
                frames.append((s(fn["name"][u], what), "" if file_i is None else s(file_i, what),
                               ft["line"][f] or 0))
                stack = st["prefix"][stack]
            c[tuple(reversed(frames))] += 1
        names[tid] = th["name"]
        times[tid] = th["samples"]["time"]
    return out, names, times


def load_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise Fail("%s is not JSON: %s" % (os.path.basename(path), e))


def gil_markers(doc):
    """{tid: [(start, end) of its "Holds GIL" markers]}, every marker checked well formed."""
    strings = doc["shared"]["stringArray"]
    out = {}
    for th in doc["threads"]:
        m = th["markers"]
        n = columns(m, "thread %s markers" % th["tid"], ("name", "startTime", "endTime", "phase", "category", "data"))
        spans = out.setdefault(th["tid"], [])
        for i in range(n):
            if m["phase"][i] != 1 or not m["startTime"][i] <= m["endTime"][i]:
                raise Fail("thread %s: marker %d is not an interval with start <= end" % (th["tid"], i))
            if strings[m["name"][i]] == "Holds GIL":
                spans.append((m["startTime"][i], m["endTime"][i]))
    return out


# --- the raw recording (-o FILE.remora) --------------------------------------------------
#
# The .remora format (src/formats/raw.h), as read here: the magic b"REMORA\0" and a version
# byte (3: the metadata carries start_mono_ns and the engine; 4: and the 'L' records; 5: and
# sample_bytes, --mode memory's bytes a sample stands for, 0 for time), then
# records, a tag byte each, fields in LEB128 varints (signed ones zigzag-encoded):
#   'S' len bytes                    a string; ids count up from 0
#   'F' fn file line(signed)         a frame; ids count up from 0; strings by id
#   'C' fn file line(signed)         a C frame (--native), numbered with the 'F' frames
#   'T' idx tid name root            a thread; 'root' is the node id of its empty stack
#   'N' id parent frame              a node of the stack trie; 'frame' is its innermost frame
#   'X' dt_ns thread node flags(byte)  a sample: dt_ns since the previous sample (the first:
#                                    since sampling began), the stack's innermost node
#   'L' file problem changed nlines nkept (gap len bytes)*nkept
#                                    a sampled file's source (version 4, before 'M'): file a
#                                    string id; problem len bytes, empty when the text was
#                                    read; the file's line count; the kept lines (those a
#                                    heatmap shows), each its number's gap from the last
#                                    kept's and its text without the line's end
#   'M' pid command python mode duration_ns rate_mhz rounds errors late
#       start_unix_ns(signed) start_mono_ns(signed) engine   metadata; strings are len bytes
#       [sample_bytes, version 5] [thread_samples idle idle_kept partial paused_ns, version 6:
#       the counts' words, docs/cli.md's Counts]
#   'Z'                              the end
# A sample's time is on CLOCK_MONOTONIC from start_mono_ns. A round's sample (flags bit 8
# clear): when the round's reading began; the stack was read at or after it, and before
# the next round's time (the last one: before start + duration). A tick's (flags bit 8,
# the kernel engine): the instant the kernel read its stack.

class Raw:
    def __init__(self):
        self.strings, self.frames, self.nodes, self.threads = [], [], {}, {}
        self.samples = []           # (absolute ns, thread idx, node id, flags)
        self.meta = None
        # file -> {"problem": str or None, "changed": bool, "nlines": N,
        #          "lines": {number: text (bytes)}}: the source kept ('L')
        self.sources = {}


def read_remora(path):
    """Parses a .remora file (format above). Fail if it is not a whole
    version-3 to version-6 recording (5: sample_bytes, 6: the counts' words in 'M')."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:7] != b"REMORA\0" or len(data) < 8:
        raise Fail("%s is not a .remora recording" % os.path.basename(path))
    if data[7] not in (3, 4, 5, 6):
        raise Fail("%s is version %d, want 3 to 6 (start_mono_ns, engine)" % (os.path.basename(path), data[7]))
    version = data[7]
    pos = 8

    def varint():
        nonlocal pos
        v, shift = 0, 0
        while True:
            if pos >= len(data):
                raise Fail("%s: truncated varint at byte %d" % (os.path.basename(path), pos))
            b = data[pos]
            pos += 1
            v |= (b & 0x7f) << shift
            if not b & 0x80:
                return v
            shift += 7

    def svarint():
        u = varint()
        return (u >> 1) ^ -(u & 1)

    def raw_bytes():
        nonlocal pos
        n = varint()
        b = data[pos:pos + n]
        if len(b) != n:
            raise Fail("%s: truncated string at byte %d" % (os.path.basename(path), pos))
        pos += n
        return b

    def string():
        return raw_bytes().decode("utf-8", "replace")

    r, rel = Raw(), []
    while True:
        if pos >= len(data):
            raise Fail("%s ends without 'Z'" % os.path.basename(path))
        tag = chr(data[pos])
        pos += 1
        if tag == "S":
            r.strings.append(string())
        elif tag in ("F", "C"):
            fn, file, line = varint(), varint(), svarint()
            r.frames.append((r.strings[fn], r.strings[file], line))
        elif tag == "T":
            idx, tid, name, root = varint(), varint(), varint(), varint()
            r.threads[idx] = (tid, r.strings[name], root)
        elif tag == "N":
            nid, parent, frame = varint(), varint(), varint()
            r.nodes[nid] = (parent, frame)
        elif tag == "X":
            dt, thread, node = varint(), varint(), varint()
            flags = data[pos]
            pos += 1
            rel.append((dt, thread, node, flags))
        elif tag == "L":
            file, problem = r.strings[varint()], string()
            src = {"problem": problem or None, "changed": bool(varint()), "nlines": varint(),
                   "lines": {}}
            line = 0
            for _ in range(varint()):
                line += varint()
                src["lines"][line] = raw_bytes()
            r.sources[file] = src
        elif tag == "M":
            m = {"pid": varint(), "command": string(), "python": string(), "mode": string(),
                 "duration_ns": varint(), "rate_mhz": varint(), "rounds": varint(),
                 "errors": varint(), "late": varint(), "start_unix_ns": svarint(),
                 "start_mono_ns": svarint(), "engine": string()}
            m["sample_bytes"] = varint() if version >= 5 else 0
            if version >= 6:
                m.update({"thread_samples": varint(), "idle": varint(), "idle_kept": bool(varint()),
                          "partial": varint(), "paused_ns": varint()})
            r.meta = m
        elif tag == "Z":
            break
        else:
            raise Fail("%s: unknown record %r at byte %d" % (os.path.basename(path), tag, pos - 1))
    if r.meta is None or r.meta["start_mono_ns"] <= 0:
        raise Fail("%s has no start_mono_ns" % os.path.basename(path))
    at = r.meta["start_mono_ns"]
    for dt, thread, node, flags in rel:
        at += dt
        r.samples.append((at, thread, node, flags))
    return r


def sample_functions(r, node):
    """The functions of a .remora sample's stack, outermost first."""
    out = []
    while node in r.nodes:
        parent, frame = r.nodes[node]
        out.append(r.frames[frame][0])
        node = parent
    return out[::-1]


def innermost(r, node):
    """(function, file) of a sample's innermost frame; None for an empty stack."""
    got = r.nodes.get(node)
    if got is None:
        return None
    fn, file, _ = r.frames[got[1]]
    return fn, file


TICK = 8                            # the flags bit of a tick's sample


def next_times(r):
    """Each sample's window end: a tick's sample, its own time (read at that instant); a
    round's, the next round's time (other threads' samples of the same round share this
    one's; ticks between rounds do not count); the last round's, the end of the
    recording."""
    end = r.meta["start_mono_ns"] + r.meta["duration_ns"]
    nxt, later, this = [end] * len(r.samples), end, None
    for i in range(len(r.samples) - 1, -1, -1):
        t, _, _, flags = r.samples[i]
        if flags & TICK:
            nxt[i] = t
            continue
        if this is not None and t != this:
            later = this
        this = t
        nxt[i] = later
    return nxt


# --- `remora top`'s tables ---------------------------------------------------------------

ROW = re.compile(r"^\s*([\d.]+)%\s+([\d.]+)%\s+([\d.]+)s\s+([\d.]+)s\s+(.*)$")
CSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
NAMED = re.compile(r"^(.*) \((.*):(\d+)\)$")


def frame_of(text):
    """The last whole frame drawn (lines, control sequences dropped), or []: paint() ends
    each with the clear-to-end sequence ESC [ J."""
    frames = [f for f in text.split("\x1b[H") if "\x1b[J" in f]
    if not frames:
        return []
    return [CSI.sub("", l).rstrip("\r") for l in frames[-1].split("\x1b[J")[0].split("\n")]


def parse_top_tables(text):
    """[(title line, {(function, file): (own, total, own_s, total_s)})] in order; a
    terminal's control sequences are dropped first."""
    tables = []
    for line in CSI.sub("", text).splitlines():
        line = line.rstrip("\r")
        if line.startswith("remora top "):
            tables.append([None, {}])
            continue
        if not tables:
            continue
        if tables[-1][0] is None and " sorted by " in line:
            tables[-1][0] = line
            continue
        m = ROW.match(line)
        if m:
            own, total, own_s, total_s, fn = m.groups()
            n = NAMED.match(fn)
            key = (n.group(1), n.group(2)) if n else (fn, "")
            tables[-1][1][key] = (float(own), float(total), float(own_s), float(total_s))
    return [(t, rows) for t, rows in tables]


def top_rows(what, data):
    """{(function, file)} of the rows of `remora top`'s last table (stdout not a terminal),
    names unescaped; no raw control character anywhere (a name must not drive the
    terminal)."""
    text = utf8(what, data)
    no_raw_control(what, text.replace("\n", ""))
    rows = set()
    for line in text.split("remora top ")[-1].split("\n"):
        m = re.match(r"^\s*[\d.]+%\s+[\d.]+%\s+[\d.]+s\s+[\d.]+s  (.*)$", line)
        fm = FRAME.match(m.group(1)) if m else None
        if fm:
            rows.add((untext(what, fm.group(1)), untext(what, fm.group(2))))
    return rows


# --- `remora dump`: text and --json -------------------------------------------------------

# a thread header names its interpreter only when the process has more than one
DUMP_THREAD = re.compile(r'^Thread (\d+) "((?:[^"\\]|\\.)*)"(?: interpreter \d+)?(?: \[[a-z, -]+\])?$')
# what may follow a text dump's frame: --opcodes' instruction, then a run's length (recursion
# folded: the same frame N times)
DUMP_FRAME_TAIL = re.compile(r"(?: \[([A-Z0-9_]+) at (\d+)\])?(?: \u00d7(\d+))?$")


def dump_text_stacks(what, data):
    """({tid: thread name}, {tid: [frame lists, outermost first]}) of a text dump, names
    unescaped; no raw control character anywhere."""
    text = utf8(what, data)
    no_raw_control(what, text.replace("\n", ""))
    names, stacks, cur = {}, collections.defaultdict(list), None
    for line in text.split("\n")[1:]:
        m = DUMP_THREAD.match(line)
        if m:
            cur = int(m.group(1))
            names[cur] = untext(what, m.group(2), '"')
            stacks[cur].append([])
        elif line.startswith("        ") and cur is not None:
            continue                # under a frame: its source line (or --locals)
        elif line.startswith("    ") and cur is not None and \
                not line.startswith("    <stack unreadable: "):
            body = line[4:]
            tm = DUMP_FRAME_TAIL.search(body)
            times = int(tm.group(3)) if tm.group(3) else 1
            fm = FRAME.match(body[:tm.start()])
            if fm is None:
                raise Fail("%s: a frame line that is not `function (file:line)`: %s"
                           % (what, short(line)))
            for _ in range(times):
                stacks[cur][-1].insert(0, (untext(what, fm.group(1)), untext(what, fm.group(2))))
        elif line:
            raise Fail("%s: unexpected line %s" % (what, short(line)))
    return names, stacks


def dump_json_stacks(doc):
    """({tid: thread name}, {tid: [its frames, outermost first]}) of `dump --json`."""
    names = {t["native_id"]: t["name"] for t in doc["threads"]}
    stacks = {t["native_id"]: [[(f["function"], f["file"]) for f in reversed(t["frames"])]]
              for t in doc["threads"]}
    return names, stacks


def parse_dump(out):
    """`dump --json`'s output: a JSON object with a "threads" list, or Fail."""
    try:
        doc = json.loads(out)
    except ValueError as e:
        raise Fail("output is not JSON (%s): %r" % (e, out[:200]))
    if not isinstance(doc, dict) or not isinstance(doc.get("threads"), list):
        raise Fail("output has no \"threads\" list: %r" % out[:200])
    return doc


# --- the jsonl stream (docs/jsonl.md) --------------------------------------------------------

def read_jsonl(path):
    """Every complete line of a jsonl stream, each parsed strictly (strict_json); a last
    line not ended yet (the stream being written) is left out."""
    with open(path, "rb") as f:
        data = f.read()
    name = os.path.basename(path)
    return [strict_json("%s line %d" % (name, n), line)
            for n, line in enumerate(data.split(b"\n")[:-1], 1)]


def jsonl_records(records):
    """[(record, names {tid: name}, stacks {tid: Counter((function, file, line) tuples,
    outermost first -> count)})] for each period and snapshot record of a stream, in order,
    names and frames resolved through its definitions (Fail on an id not defined before)."""
    strings, frames, out = {}, {}, []
    if not records or records[0].get("type") != "start":
        raise Fail("the jsonl stream does not begin with a start record")
    for r in records:
        kind = r.get("type")
        try:
            if kind == "reset":
                strings, frames = {}, {}
            elif kind == "string":
                strings[r["id"]] = r["value"]
            elif kind == "frame":
                frames[r["id"]] = (strings[r["function"]], strings[r["file"]], r["line"])
            elif kind in ("period", "snapshot"):
                names = {tid: strings[sid] for tid, sid, _ in r["threads"]}
                stacks = {}
                for tid, count, ids in r["stacks"]:
                    stacks.setdefault(tid, collections.Counter())[tuple(frames[i] for i in ids)] += count
                out.append((r, names, stacks))
        except KeyError as e:
            raise Fail("jsonl: a %s record uses an id not defined before it: %s" % (kind, e))
    return out


# --- pprof read by Go's own tool -------------------------------------------------------------

def go_raw_samples(path, home):
    """(sample count per go tool pprof -raw, its output) or Fail."""
    go = shutil.which("go")
    r = subprocess.run([go, "tool", "pprof", "-raw", path], stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120,
                       env=dict(os.environ, HOME=home))
    text = r.stdout.decode("utf-8", "replace")
    if r.returncode != 0:
        raise Fail("`go tool pprof -raw` exited %d: %s" % (r.returncode, tail(text, 4)))
    count, in_samples = 0, False
    for line in text.splitlines():
        if line.startswith("Samples:"):
            in_samples = True
        elif in_samples and re.match(r"^\s+\d+\s+\d+:", line):
            count += int(line.split()[0])
        elif in_samples and line.startswith("Locations"):
            break
    return count, text
