# Functional tests of the pprof output (`-o FILE.pb.gz`), run by run.py:
#
#   record/pprof/INTERP  odd_names.py recorded to pprof and collapsed at once: the pprof
#                        file, read by formats.read_pprof (gzip, then profile.proto), is
#                        well formed (string 0 empty, every id it names defined, one value
#                        per sample type, the period 1e9/RATE, labels on every sample),
#                        holds the same stacks and counts per thread as the collapsed
#                        file, and names the odd thread and function exactly as the
#                        target holds them (its own account in ready.json).
#   record/pprof-go      the same file read by pprof itself (`go tool pprof -raw`, from
#                        Debian's golang-go): it must accept it and count the same samples;
#                        skipped when go is not installed.
#   record/pprof-convert a .remora recording converted to pprof equals the recorded pprof.

import os
import re
import shutil
import subprocess

from harness import (INTERPRETERS, Fail, Skip, check_odd_names, interp_missing, interpreter,
                     odd_recording, tail)
from formats import (by_thread, first_difference, go_raw_samples, parse_collapsed, plain_frame,
                     pprof_stacks, read_pprof)

ORDER = 100           # where run.py runs these tests among the modules' (ascending)

RATE = 1000                      # record's default, which odd_recording uses
GO_INTERP = "pyenv-3.12.1"       # the file's format does not depend on the version


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
    go = interpreter(GO_INTERP)
    return [("record/pprof/%s" % i[0], lambda i=i: test_pprof(remora, i), interp_missing(i))
            for i in INTERPRETERS] + [
        ("record/pprof-go", lambda: test_pprof_go(remora, go), interp_missing(go)),
        ("record/pprof-convert", lambda: test_pprof_convert(remora, go), interp_missing(go)),
    ]
