# Functional tests of the pprof output (`-o FILE.pb.gz`), run by run.py:
#
#   record/pprof/INTERP  odd_names.py recorded to pprof and collapsed at once: the pprof
#                        file, read by the decoder below (gzip, then profile.proto), is
#                        well formed (string 0 empty, every id it names defined, one value
#                        per sample type, the period 1e9/RATE, labels on every sample),
#                        holds the same stacks and counts per thread as the collapsed
#                        file, and names the odd thread and function exactly as the
#                        target holds them (its own account in ready.json).
#   record/pprof-go      the same file read by pprof itself (`go tool pprof -raw`, from
#                        Debian's golang-go): it must accept it and count the same samples;
#                        skipped when go is not installed.
#   record/pprof-convert a .remora recording converted to pprof equals the recorded pprof.

import collections
import gzip
import os
import re
import shutil
import subprocess

from harness import INTERPRETERS, Fail, Skip, interp_missing, tail
from record_tests import by_thread, check_odd_names, first_difference, odd_recording, parse_collapsed, plain_frame

RATE = 1000                      # record's default, which odd_recording uses
GO_INTERP = "pyenv-3.12.1"       # the file's format does not depend on the version


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


def judge_pprof(path, collapsed, ready):
    p = read_pprof(path)
    if p["types"] != [("samples", "count"), ("wall", "nanoseconds")]:
        raise Fail("sample types %r, want samples/count and wall/nanoseconds" % p["types"])
    if p["period"] != round(1e9 / RATE):
        raise Fail("period %d, want %d ns" % (p["period"], round(1e9 / RATE)))
    for smp in p["sample"]:
        if smp["value"][1] != smp["value"][0] * p["period"]:
            raise Fail("a sample's time %d is not its count %d x the period"
                       % (smp["value"][1], smp["value"][0]))
    got, names = pprof_stacks(p)
    stacks = parse_collapsed(collapsed)
    want = by_thread(stacks, plain_frame)
    if got != want:
        raise Fail("pprof and collapsed files of one recording differ: %s"
                   % first_difference(got, want))
    if names.get(ready["odd"]) != {ready["thread_name"]}:
        raise Fail("the odd thread's samples are labelled %r, want %r"
                   % (names.get(ready["odd"]), ready["thread_name"]))
    check_odd_names(stacks, ready)
    odd = (ready["function"], ready["file"])
    if not any(f[:2] == odd for st in got.get(ready["odd"], {}) for f in st):
        raise Fail("no frame %r in the odd thread's pprof samples" % (odd,))
    return p, sum(sum(c.values()) for c in got.values())


def test_pprof(remora, interp):
    d, ready = odd_recording(remora, interp, ["rec.pb.gz", "rec.collapsed"])
    try:
        p, n = judge_pprof(os.path.join(d, "rec.pb.gz"), os.path.join(d, "rec.collapsed"), ready)
        return "%d samples, %d locations, %d functions, %d strings; same stacks as collapsed" % (
            n, len(p["location"]), len(p["function"]), len(p["strings"]))
    finally:
        shutil.rmtree(d, ignore_errors=True)


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


def test_pprof_go(remora, interp):
    if shutil.which("go") is None:
        raise Skip("go not installed (Debian's golang-go has `go tool pprof`)")
    d, ready = odd_recording(remora, interp, ["rec.pb.gz", "rec.collapsed"])
    try:
        _, n = judge_pprof(os.path.join(d, "rec.pb.gz"), os.path.join(d, "rec.collapsed"), ready)
        count, text = go_raw_samples(os.path.join(d, "rec.pb.gz"), d)
        if count != n:
            raise Fail("`go tool pprof -raw` counts %d samples, the file holds %d: %s"
                       % (count, n, tail(text, 4)))
        return "pprof reads %d samples" % count
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_pprof_convert(remora, interp):
    d, ready = odd_recording(remora, interp, ["rec.remora", "rec.pb.gz", "rec.collapsed"])
    try:
        conv = os.path.join(d, "converted.pb.gz")
        rc, _, err = remora.run(["convert", os.path.join(d, "rec.remora"), "-o", conv])
        if rc != 0:
            raise Fail("`remora convert rec.remora -o converted.pb.gz` exited %d: %s" % (rc, tail(err)))
        a, _ = pprof_stacks(read_pprof(os.path.join(d, "rec.pb.gz")))
        b, _ = pprof_stacks(read_pprof(conv))
        if a != b:
            raise Fail("converted and recorded pprof differ: %s" % first_difference(a, b))
        return "%d samples" % sum(sum(c.values()) for c in a.values())
    finally:
        shutil.rmtree(d, ignore_errors=True)


def tests(remora):
    """[(name, function, skip reason or None)] for run.py."""
    go = next(i for i in INTERPRETERS if i[0] == GO_INTERP)
    return [("record/pprof/%s" % i[0], lambda i=i: test_pprof(remora, i), interp_missing(i))
            for i in INTERPRETERS] + [
        ("record/pprof-go", lambda: test_pprof_go(remora, go), interp_missing(go)),
        ("record/pprof-convert", lambda: test_pprof_convert(remora, go), interp_missing(go)),
    ]
