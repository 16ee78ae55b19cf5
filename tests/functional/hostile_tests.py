# Hostile names (issue #7, point 5): tests/targets/odd_names.py names its functions, files
# and threads with quotes, backslashes, newlines, semicolons, </script> and other markup,
# lone surrogates, NUL and other control characters, bytes that are not UTF-8 and a 1 MB
# name, and writes the exact names into its ready file. Every output of remora must stay
# valid and give each name back, decoded, equal to what remora documents it emits:
#   - a lone surrogate or NUL in a str becomes U+FFFD, and a name keeps its first
#     NAME_BOUND code points (src/unwind/pystr.c, UNW_MAX_NAME);
#   - a byte of a thread name (the kernel's comm) that is not part of valid UTF-8 becomes
#     U+FFFD (src/formats/json.c, text.c).
# Checked: record to collapsed, speedscope, flamegraph, the table, pstats, pprof, the Firefox format
# and raw in one run; dump as text and --json; `top`'s tables (no raw control character:
# a name must not drive the terminal); convert of the raw recording to every format, and
# to the table on stdout; and, in headless Chromium (tests/browser/run.mjs --recorded-hostile), that the
# recorded flamegraph shows every name as text and runs nothing injected.

import collections
import json
import os
import shutil
import subprocess

from harness import (INTERPRETERS, REPO, SHORT_SECONDS, TARGETS, Fail, Skip, Target, browser_check,
                     interp_missing, record, speedscope_validator, summary, tail, workdir)
from formats import (NAME_BOUND, dump_json_stacks, dump_text_stacks, emitted, emitted_bytes,
                     firefox_stacks, flamegraph_data, flamegraph_stacks, jsonl_records,
                     no_raw_control, read_jsonl,
                     parse_collapsed, pprof_stacks, pstats_rows, read_pprof, read_pstats, short,
                     speedscope_stacks, strict_json, table_rows, top_rows, utf8)

ORDER = 60            # where run.py runs these tests among the modules' (ascending)

TABLE_ROWS = 1000              # -l for the table: every function gets a row
TOP_SECONDS = 1.2              # one live table of `remora top`, then the whole run's


# --- what remora must emit ----------------------------------------------------------------


class Want:
    """The ground truth of one odd_names.py run, as remora must show it."""

    def __init__(self, ready):
        self.chain = [(emitted(h["function"]), emitted(h["file"])) for h in ready["hostile"]]
        self.chain.append((emitted(ready["function"]), emitted(ready["file"])))
        self.threads = {ready["odd"]: emitted(ready["thread_name"]),
                        ready["parked"]: emitted_bytes(bytes.fromhex(ready["parked_name_hex"]))}
        self.odd = ready["odd"]
        # the 1 MB name is cut; that is part of what is checked
        assert any(len(h["function"]) > NAME_BOUND for h in ready["hostile"])


def has_chain(frames, chain):
    """Whether the (function, file) pairs of chain appear in frames, consecutively."""
    pairs = [tuple(f[:2]) for f in frames]
    return any(pairs[i:i + len(chain)] == chain for i in range(len(pairs) - len(chain) + 1))


def check_stacks(what, names, stacks, want):
    """names: {tid: thread name}; stacks: {tid: [frame lists, outermost first]}."""
    for tid, name in want.threads.items():
        if names.get(tid) != name:
            raise Fail("%s: thread %d is named %s, want %s" % (what, tid, short(names.get(tid)
                                                                                or ""), short(name)))
    if not any(has_chain(fr, want.chain) for fr in stacks.get(want.odd, [])):
        seen = [f[0] for fr in stacks.get(want.odd, [])[:1] for f in fr]
        raise Fail("%s: no stack of thread %d holds the %d hostile frames in order; one has %s"
                   % (what, want.odd, len(want.chain), [short(f, 30) for f in seen]))


# --- reading each format strictly ---------------------------------------------------------


def check_collapsed(what, path, want):
    with open(path, "rb") as f:
        text = utf8(what, f.read())
    no_raw_control(what, text.replace("\n", ""))
    stacks = parse_collapsed(path)
    names = {s.tid: s.name for s in stacks}
    by_tid = collections.defaultdict(list)
    for s in stacks:
        by_tid[s.tid].append(s.frames)
    check_stacks(what, names, by_tid, want)
    return len(stacks)


def check_speedscope(what, path, want, validator):
    with open(path, "rb") as f:
        doc = strict_json(what, f.read())
    if validator:
        p = subprocess.run(validator + [path], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=60)
        if p.returncode != 0:
            raise Fail("%s: speedscope's schema rejects it: %s"
                       % (what, tail(p.stdout.decode("utf-8", "replace"), 4)))
    got, names = speedscope_stacks(doc)
    check_stacks(what, names, {tid: list(c) for tid, c in got.items()}, want)


def check_flamegraph(what, path, want):
    names, stacks = flamegraph_stacks(flamegraph_data(what, path))
    check_stacks(what, names, stacks, want)


def check_rows(what, rows, want):
    """Every hostile (function, file) among a table's rows, unescaped."""
    missing = [p for p in want.chain if p not in rows]
    if missing:
        raise Fail("%s: no row for %d of the hostile functions, e.g. %s (file %s)"
                   % (what, len(missing), short(missing[0][0]), short(missing[0][1])))


def check_table(what, data, want):
    """The pstats table: one row per line, names escaped by out_text_str()."""
    check_rows(what, table_rows(what, data), want)


def check_pstats(what, path, want):
    """The pstats file (Python's marshal): loads, and has an entry for every hostile
    (function, file), names as remora emits them."""
    check_rows(what, pstats_rows(read_pstats(what, path)), want)


def check_top(what, data, want):
    """`remora top`'s tables (stdout not a terminal): no raw control character anywhere
    (a name must not drive the terminal), every hostile function in the whole run's table."""
    check_rows(what, top_rows(what, data), want)


def check_pprof(what, path, want):
    got, names = pprof_stacks(read_pprof(path))
    check_stacks(what, {tid: min(n) for tid, n in names.items() if len(n) == 1},
                 {tid: list(c) for tid, c in got.items()}, want)


def check_jsonl(what, path, want):
    with open(path, "rb") as f:
        utf8(what, f.read())
    (_, names, stacks), = [p for p in jsonl_records(read_jsonl(path)) if p[0]["type"] == "period"]
    check_stacks(what, names, {tid: list(c) for tid, c in stacks.items()}, want)


def check_firefox(what, path, want):
    with open(path, "rb") as f:
        doc = strict_json(what, f.read())
    got, names, _ = firefox_stacks(doc)
    check_stacks(what, names, {tid: list(c) for tid, c in got.items()}, want)


def check_dump_text(what, data, want):
    names, stacks = dump_text_stacks(what, data)
    check_stacks(what, names, stacks, want)


def check_dump_json(what, data, want):
    names, stacks = dump_json_stacks(strict_json(what, data))
    check_stacks(what, names, stacks, want)


# --- running remora for bytes ---------------------------------------------------------------

def run_bytes(remora, args):
    """Runs remora, which must exit 0; returns (stdout bytes, stderr text). Fail on a hang,
    a signal or a sanitizer report."""
    rc, out, err = remora.run(args, raw=True)
    if rc != 0:
        raise Fail("`remora %s` exited %d: %s" % (" ".join(map(str, args)), rc, tail(err)))
    return out, err


def hostile_recording(remora, interp, d, exts, dumps=False):
    """Records odd_names.py into d/rec.EXT for each of exts in one run (and dumps it as
    text and JSON when dumps); returns (Want, {ext: path}, {"text"/"json": stdout})."""
    with Target(interp, os.path.join(TARGETS, "odd_names.py"), "ready.json") as t:
        ready = t.wait_ready()
        paths = {ext: os.path.join(d, "rec" + ext) for ext in exts}
        args = ["-p", t.pid, "-d", SHORT_SECONDS, "-l", TABLE_ROWS, "--idle"]  # parked thread too
        for p in paths.values():
            args += ["-o", p]
        _, err = record(remora, args)
        summary(err, 1000)
        dumped = {}
        if dumps:
            dumped["text"] = run_bytes(remora, ["dump", "-p", t.pid])[0]
            dumped["json"] = run_bytes(remora, ["dump", "-p", t.pid, "--json"])[0]
            dumped["top"] = run_bytes(remora, ["top", "-p", t.pid, "-d", TOP_SECONDS, "-l", TABLE_ROWS,
                                               "--idle"])[0]
    return Want(ready), paths, dumped


# --- the tests ------------------------------------------------------------------------------

def test_hostile(remora, interp):
    try:
        validator = speedscope_validator()
        schema = "speedscope schema checked"
    except Skip as e:
        validator, schema = None, "speedscope schema not checked: %s" % e
    d = workdir()
    try:
        exts = [".collapsed", ".json", ".html", ".table", ".pstats", ".pb.gz", ".gecko.json", ".jsonl",
                ".remora"]
        want, paths, dumped = hostile_recording(remora, interp, d, exts, dumps=True)
        check_collapsed("recorded collapsed", paths[".collapsed"], want)
        check_speedscope("recorded speedscope", paths[".json"], want, validator)
        check_flamegraph("recorded flamegraph", paths[".html"], want)
        with open(paths[".table"], "rb") as f:
            check_table("recorded table", f.read(), want)
        check_pstats("recorded pstats", paths[".pstats"], want)
        check_pprof("recorded pprof", paths[".pb.gz"], want)
        check_firefox("recorded Firefox profile", paths[".gecko.json"], want)
        check_jsonl("recorded jsonl", paths[".jsonl"], want)
        check_top("top", dumped["top"], want)
        check_dump_text("dump", dumped["text"], want)
        check_dump_json("dump --json", dumped["json"], want)
        # the raw recording, converted later to every format
        raw = paths[".remora"]
        conv = {ext: os.path.join(d, "conv" + ext) for ext in exts[:-1]}
        for ext, p in conv.items():
            run_bytes(remora, ["convert", raw, "-o", p, "-l", TABLE_ROWS])
        check_collapsed("converted collapsed", conv[".collapsed"], want)
        with open(paths[".collapsed"], "rb") as a, open(conv[".collapsed"], "rb") as b:
            if a.read() != b.read():
                raise Fail("the collapsed file converted from rec.remora differs from the recorded one")
        check_speedscope("converted speedscope", conv[".json"], want, validator)
        check_flamegraph("converted flamegraph", conv[".html"], want)
        with open(conv[".table"], "rb") as f:
            check_table("converted table", f.read(), want)
        check_pstats("converted pstats", conv[".pstats"], want)
        check_pprof("converted pprof", conv[".pb.gz"], want)
        check_firefox("converted Firefox profile", conv[".gecko.json"], want)
        check_jsonl("converted jsonl", conv[".jsonl"], want)
        out, _ = run_bytes(remora, ["convert", raw, "-l", TABLE_ROWS])
        check_table("convert's table on stdout", out, want)
        # and the collapsed file read back (convert reads collapsed stacks too)
        back = os.path.join(d, "back.json")
        run_bytes(remora, ["convert", paths[".collapsed"], "-o", back])
        check_speedscope("speedscope converted from the collapsed file", back, want, validator)
        return "%d hostile frames and 2 hostile thread names intact in 9 formats recorded, " \
               "8 converted + stdout table, top, dump text and JSON; %s" % (len(want.chain), schema)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_hostile_browser(remora, interp):
    node = shutil.which("node")
    if node is None:
        raise Skip("node not installed (apt-get install nodejs)")
    d = workdir()
    try:
        want, paths, _ = hostile_recording(remora, interp, d, [".html"])
        truth = os.path.join(d, "truth.json")
        with open(truth, "w", encoding="utf-8") as f:
            json.dump({"functions": want.chain,
                       "threads": [[tid, name] for tid, name in want.threads.items()]}, f)
        return browser_check(node, "recorded-hostile",
                             ["--recorded-hostile", paths[".html"], truth])
    finally:
        shutil.rmtree(d, ignore_errors=True)


def tests(remora):
    """[(name, function, skip reason or None)] for run.py."""
    out = []
    for interp in INTERPRETERS:
        out.append(("record/hostile/%s" % interp[0], lambda i=interp: test_hostile(remora, i),
                    interp_missing(interp)))
        out.append(("record/hostile-browser/%s" % interp[0],
                    lambda i=interp: test_hostile_browser(remora, i), interp_missing(interp)))
    return out
