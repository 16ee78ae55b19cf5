# record --mode memory (issue 49; docs/cli.md "Memory"): where resident memory grows, read
# in the kernel at the page faults that grow it.
#   memory/shares/INTERP    mem_grow.py keeps 3 MB, 1 MB and 256 KB (small objects) a call
#                           in three functions and allocates and frees 3 MB in a fourth,
#                           measuring its own resident growth around each call
#                           (/proc/self/statm); a recording over ROUNDS rounds of them
#                           (-o collapsed and .remora) must give each function a share of
#                           the four's bytes within SHARE_POINTS points of the target's own
#                           account, at --fault-period 16 (the default 64 gives a quarter
#                           of the samples); the counts are bytes (multiples of the sample's
#                           64 KiB),
#                           the summary names the bytes attributed and the resident size at
#                           both ends, and the .remora recording keeps the unit
#                           (sample_bytes, mode "memory"; convert writes the same bytes)
#   memory/refused          --mode memory with --engine user (and --blocking): exit 1, one
#                           line; without CAP_BPF/CAP_PERFMON (setpriv): exit 1, one line
#                           naming the kernel engine, no profile written; --fault-period
#                           without --mode memory, or out of 1-65536: exit 1, one line
#   memory/top              `top --mode memory -d 3` (not a terminal) while mem_grow.py runs
#                           ROUNDS rounds: its last frame has byte columns (Own, Total in
#                           MiB) and each function's %Total within SHARE_POINTS + 1 of the
#                           target's account
#   memory/units            one recording of mem_grow.py over UNIT_ROUNDS rounds written in
#                           every format at once (and the .remora converted again): each
#                           carries bytes where it names a unit and its figures add up to the
#                           collapsed bytes: the table's byte columns, pstats' call counts
#                           (each function's the table's total bytes; its times all 0: no
#                           seconds claimed), speedscope's unit, pprof's
#                           resident/bytes, the SVG's titles and header, the Firefox
#                           Profiler's weightType "bytes" with each sample's weight, the
#                           flamegraph page's and jsonl's sample_bytes, the heatmap's words
#   memory/firefox-profiler a memory recording's .gecko.json loaded by the Firefox
#                           Profiler's own command-line client (tests/firefox): its call
#                           trees, by self weight, are the collapsed file's stacks in bytes
#                           (SKIP when node or the package cannot be had)
#   memory/dump-resident    `dump --json` of mem_grow.py: resident_bytes within
#                           DUMP_SLACK of the target's own statm reading, and the text
#                           line says `resident N MiB`
import json
import os
import re
import shutil
import subprocess

from formats import (by_thread, first_difference, flamegraph_data, load_json, parse_collapsed,
                     read_jsonl, read_pprof, read_pstats, read_remora)
from harness import (INTERPRETERS, TARGETS, Fail, Recording, Skip, Target, interp_missing,
                     one_line, profiler_call_trees, profiler_cli, tail, target_says, workdir)

ORDER = 325           # after engine_tests (the kernel engine's own), before real_tests

UNIT_ROUNDS = 8       # memory/units: about 35 MB of growth, some 500 samples
ROUNDS = 30           # rounds of the four functions: about 130 MB of growth, 2000 samples
SHARE_POINTS = 2.0    # the margin: a function's share within 2 points of the truth
SAMPLE_BYTES = 64 * 4096     # the default: a sample every 64 page faults (4 KiB pages)
TRUTH_PERIOD = 16             # shares and top: --fault-period 16, four times the samples
TRUTH_BYTES = TRUTH_PERIOD * 4096
FUNCS = ("keep_3mb", "keep_1mb", "keep_small", "churn_3mb")
NO_CAPS = ["setpriv", "--inh-caps=-bpf,-perfmon,-sys_admin",
           "--bounding-set=-bpf,-perfmon,-sys_admin", "--"]
HOST = [i for i in INTERPRETERS if i[0] == "pyenv-3.12.1"]
DUMP_SLACK = 0.05     # the target's RSS read by itself and by remora a moment apart
SUMMARY = re.compile(r"^remora: ([\d.]+) MiB of resident growth attributed \((\d+) samples of "
                     r"(\d+) KiB\); the target's resident size ([\d.]+) MiB at the start, "
                     r"([\d.]+) MiB at the end: ", re.M)


def grower(interp):
    return Target(interp, os.path.join(TARGETS, "mem_grow.py"), "ready.json")


def test_shares(remora, interp):
    if os.environ.get("REMORA_TEST_ENGINE") == "user":
        raise Skip("REMORA_TEST_ENGINE=user: this run has no kernel engine to judge")
    d = workdir()
    rec = None
    try:
        with grower(interp) as t:
            # in a chroot without /proc the target works in a child it forked (mem_grow.py)
            pid = t.wait_ready()["pid"]
            out, raw = os.path.join(d, "m.collapsed"), os.path.join(d, "m.remora")
            rec = Recording(remora, ["-p", pid, "--mode", "memory", "--fault-period",
                                     TRUTH_PERIOD, "-o", out, "-o", raw])
            rec.wait_sampled()
            truth = target_says(t, "go %d" % ROUNDS, 1)["growth"]
            rec.proc.send_signal(2)
            rc, _, err = rec.finish()
            if rc != 0:
                raise Fail("record --mode memory exited %d: %s" % (rc, tail(err)))
            m = SUMMARY.search(err)
            if m is None:
                raise Fail("no memory summary line: %s" % tail(err, 4))
            got = {f: 0 for f in FUNCS}
            total = 0
            for st in parse_collapsed(out):
                if st.count % TRUTH_BYTES:
                    raise Fail("a count of %d bytes, not a multiple of the sample's %d"
                               % (st.count, TRUTH_BYTES))
                total += st.count
                names = {f[0] for f in st.frames}
                for f in FUNCS:
                    if f in names:          # inclusive: keep_small's comprehension under it
                        got[f] += st.count
            if abs(total / 1048576.0 - float(m.group(1))) > 0.01 + 1e-6 * total:
                raise Fail("the profile holds %d bytes, the summary says %s MiB attributed"
                           % (total, m.group(1)))
            want_sum = sum(max(truth[f], 0) for f in FUNCS)
            got_sum = sum(got.values())
            if want_sum <= 0 or got_sum <= 0:
                raise Fail("no growth to share: target %r, profile %r" % (truth, got))
            rows, bad = [], []
            for f in FUNCS:
                w = 100.0 * max(truth[f], 0) / want_sum
                g = 100.0 * got[f] / got_sum
                rows.append("%s %.1f%%/%.1f%%" % (f, g, w))
                if abs(g - w) > SHARE_POINTS:
                    bad.append(f)
            if bad:
                raise Fail("shares (remora/target) off by more than %.0f points for %s: %s"
                           % (SHARE_POINTS, ", ".join(bad), "; ".join(rows)))
            r = read_remora(raw)
            if r.meta["mode"] != "memory" or r.meta["sample_bytes"] != TRUTH_BYTES:
                raise Fail("the .remora recording says mode %r, sample_bytes %r"
                           % (r.meta["mode"], r.meta["sample_bytes"]))
            back = os.path.join(d, "back.collapsed")
            rc, _, err = remora.run(["convert", raw, "-o", back])
            if rc != 0:
                raise Fail("convert of the memory recording exited %d: %s" % (rc, tail(err)))
            again = sum(st.count for st in parse_collapsed(back))
            if again != total:
                raise Fail("convert of the .remora wrote %d bytes, the recording %d" % (again, total))
            return "%s; %s of %.1f MiB" % ("; ".join(rows), m.group(1), want_sum / 1048576.0)
    finally:
        if rec is not None:
            rec.close()
        shutil.rmtree(d, ignore_errors=True)


def test_refused(remora):
    d = workdir()
    seen = []
    try:
        with grower(HOST[0]) as t:
            t.wait_ready()
            out = os.path.join(d, "m.collapsed")
            cases = [([], ["--engine", "user"], "--engine user"), ([], ["--blocking"], "--blocking")]
            if shutil.which("setpriv") is not None:
                cases.append((NO_CAPS, ["--engine", "auto"], "kernel engine"))
            for prefix, flags, says in cases:
                rc, _, err = remora.run(["record", "-p", t.pid, "--mode", "memory", "-d", "0.2",
                                         "-o", out] + flags, prefix=prefix)
                line = one_line(err)
                if rc != 1 or line is not None or says not in err or "--mode memory" not in err:
                    raise Fail("--mode memory %s: exit %d (want 1), %s"
                               % (" ".join(prefix + flags), rc, line or err.strip()))
                if os.path.exists(out):
                    raise Fail("--mode memory %s wrote a profile" % " ".join(flags))
                seen.append(err.strip())
            # --fault-period: memory mode's alone, a count of faults
            for flags in (["--fault-period", "16"], ["--mode", "memory", "--fault-period", "0"],
                          ["--mode", "memory", "--fault-period", "65537"]):
                rc, _, err = remora.run(["record", "-p", t.pid, "-d", "0.2", "-o", out] + flags)
                line = one_line(err)
                if rc != 1 or line is not None or "--fault-period" not in err:
                    raise Fail("%s: exit %d (want 1), %s" % (" ".join(flags), rc, line or err.strip()))
                if os.path.exists(out):
                    raise Fail("%s wrote a profile" % " ".join(flags))
                seen.append(err.strip())
            if shutil.which("setpriv") is None:
                seen.append("(no setpriv(1): the capability case not run)")
            return " | ".join(seen)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_top(remora):
    """top --mode memory (not a terminal: a frame a second on stdout): its last frame's
    %Total of each function against the target's account of the growth since top began."""
    if os.environ.get("REMORA_TEST_ENGINE") == "user":
        raise Skip("REMORA_TEST_ENGINE=user: this run has no kernel engine to judge")
    with grower(HOST[0]) as t:
        t.wait_ready()
        top = subprocess.Popen(remora.argv(["top", "--mode", "memory", "--fault-period",
                                            str(TRUTH_PERIOD), "-p", str(t.pid), "-d", "3"]),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            first = top.stdout.readline()       # the first frame begins: sampling began
            if not first.startswith(b"remora top"):
                raise Fail("top --mode memory printed %r: %s" % (first, top.stderr.read()[-300:]))
            truth = target_says(t, "go %d" % ROUNDS, 1)["growth"]
            out, err = top.communicate(timeout=60)
        finally:
            if top.poll() is None:
                top.kill()
                top.wait()
        if top.returncode != 0:
            raise Fail("top --mode memory exited %d: %s" % (top.returncode, err[-300:]))
        last = out.decode("utf-8", "replace").rsplit("remora top", 1)[-1]
        if not re.search(r"%Own\s+%Total\s+Own\s+Total\s", last):
            raise Fail("top's last frame has no byte columns: %s" % last[:300])
        want_sum = sum(max(truth[f], 0) for f in FUNCS)
        rows, bad = [], []
        for f in FUNCS:
            m = re.search(r"^\s*[\d.]+%\s+([\d.]+)%\s+[\d.]+Mi\s+[\d.]+Mi\s+" + f + r" \(", last, re.M)
            g = float(m.group(1)) if m else 0.0
            w = 100.0 * max(truth[f], 0) / want_sum
            rows.append("%s %.1f%%/%.1f%%" % (f, g, w))
            # the whole run holds the target's idle reads too: a point more
            if abs(g - w) > SHARE_POINTS + 1:
                bad.append(f)
        if bad:
            raise Fail("top's %%Total (top/target) off for %s: %s" % (", ".join(bad), "; ".join(rows)))
        return "; ".join(rows)


# every format a memory recording is written in (record -o each), by its name's ending
UNIT_OUTPUTS = ("collapsed", "table", "pstats", "json", "pb.gz", "svg", "gecko.json", "html",
                "heatmap.html", "jsonl", "remora")
TABLE_ROW = re.compile(r"^\s*\d+\s+[\d.]+%\s+(\d+)\s+[\d.]+%  (\S+) \((.*):\d+\)$")
SVG_TITLE = re.compile(r"<title>[^<]* \u2014 ([^<]*)</title>")


def units_problems(d, stem, total):
    """What in the outputs d/stem.EXT of one memory profile of 'total' bytes (its collapsed
    counts) does not say bytes, or does not add up to them: a list of sentences."""
    bad = []
    path = lambda ext: os.path.join(d, stem + "." + ext)

    with open(path("table"), encoding="utf-8") as f:
        head = f.readline()
    if not re.match(r"^\s*self bytes\s+self%\s+total bytes\s+total%", head):
        bad.append("table header %r" % head.strip())

    # the table's total bytes by (function, file): what pstats' call counts must be
    totals = {}
    with open(path("table"), encoding="utf-8") as f:
        for line in f.read().split("\n")[1:]:
            m = TABLE_ROW.match(line)
            if m:
                totals[(m.group(2), m.group(3))] = int(m.group(1))

    stats = read_pstats("pstats", path("pstats"))
    times = [v[2] for v in stats.values()] + [v[3] for v in stats.values()]
    if any(t != 0.0 for t in times):
        bad.append("pstats claims seconds: times %r" % sorted(set(times))[-3:])
    calls = {(fn, file): v[1] for (file, _, fn), v in stats.items()}
    off = [k for k in totals if calls.get(k) != totals[k]]
    if not totals or off:
        bad.append("pstats call counts are not the table's total bytes: %s" % "; ".join(
            "%s: %r, table %d" % (k[0], calls.get(k), totals[k]) for k in off[:3]))

    doc = load_json(path("json"))
    units = {p.get("unit") for p in doc["profiles"]}
    if units != {"bytes"}:
        bad.append("speedscope units %r" % units)

    pp = read_pprof(path("pb.gz"))
    got = sum(smp["value"][1] for smp in pp["sample"]) if len(pp["types"]) == 2 else -1
    if pp["types"][1:] != [("resident", "bytes")] or got != total:
        bad.append("pprof sample types %r, %d bytes" % (pp["types"], got))

    with open(path("svg"), encoding="utf-8") as f:
        svg = f.read()
    titles = SVG_TITLE.findall(svg)
    if not titles or any(not re.match(r"^\d+ bytes( \([\d.]+ [KMGT]iB\))?, [\d.]+%$", t)
                         for t in titles):
        bad.append("SVG titles not in bytes: %r" % [t for t in titles if "bytes" not in t][:3])
    elif titles[0].split(" ", 1)[0] != str(total):
        bad.append("SVG's all box says %s, the profile %d bytes" % (titles[0], total))
    if " of resident growth (" not in svg or "share of the bytes" not in svg:
        bad.append("SVG header does not name the bytes")

    gecko = load_json(path("gecko.json"))
    weights = 0
    for th in gecko["threads"]:
        smp = th["samples"]
        if smp.get("weightType") != "bytes" or not isinstance(smp.get("weight"), list) or \
                len(smp["weight"]) != smp["length"]:
            bad.append("Firefox thread %s: weightType %r, weight %r"
                       % (th.get("tid"), smp.get("weightType"), str(smp.get("weight"))[:40]))
            break
        weights += sum(smp["weight"])
    else:
        if weights != total:
            bad.append("Firefox weights add up to %d, the profile %d bytes" % (weights, total))

    page = flamegraph_data("flamegraph", path("html"))
    if page["current"]["meta"].get("sample_bytes") != SAMPLE_BYTES:
        bad.append("flamegraph page's sample_bytes %r" % page["current"]["meta"].get("sample_bytes"))

    with open(path("heatmap.html"), encoding="utf-8") as f:
        heat = f.read()
    if "Where the memory grew" not in heat or "%d bytes of resident growth" % total not in heat:
        bad.append("heatmap does not say the %d bytes of growth" % total)

    start = read_jsonl(path("jsonl"))[0]
    if start.get("sample_bytes") != SAMPLE_BYTES:
        bad.append("jsonl start record's sample_bytes %r" % start.get("sample_bytes"))
    return bad


def record_growth(remora, outputs):
    """`record --mode memory -o OUTPUT...` of the grower through UNIT_ROUNDS rounds of
    growth, ended by SIGINT: its stderr; Fail if it did not exit 0."""
    rec = None
    try:
        with grower(HOST[0]) as t:
            pid = t.wait_ready()["pid"]
            args = ["-p", pid, "--mode", "memory"]
            for path in outputs:
                args += ["-o", path]
            rec = Recording(remora, args)
            rec.wait_sampled()
            target_says(t, "go %d" % UNIT_ROUNDS, 1)
            rec.proc.send_signal(2)
            rc, _, err = rec.finish()
            if rc != 0:
                raise Fail("record --mode memory exited %d: %s" % (rc, tail(err)))
            return err
    finally:
        if rec is not None:
            rec.close()


def test_units(remora):
    """One memory profile in every format: bytes wherever a format names its unit."""
    if os.environ.get("REMORA_TEST_ENGINE") == "user":
        raise Skip("REMORA_TEST_ENGINE=user: this run has no kernel engine to judge")
    d = workdir()
    try:
        err = record_growth(remora, [os.path.join(d, "m." + ext) for ext in UNIT_OUTPUTS])
        total = sum(st.count for st in parse_collapsed(os.path.join(d, "m.collapsed")))
        if total <= 0:
            raise Fail("no growth recorded: %s" % tail(err))
        bad = units_problems(d, "m", total)
        # the same from the recording, converted: the unit kept
        for ext in UNIT_OUTPUTS[:-1]:       # convert writes one output a run
            rc, _, err = remora.run(["convert", os.path.join(d, "m.remora"),
                                     "-o", os.path.join(d, "c." + ext)])
            if rc != 0:
                raise Fail("convert of the memory recording to .%s exited %d: %s"
                           % (ext, rc, tail(err)))
        bad += ["converted: " + b for b in units_problems(d, "c", total)]
        if bad:
            raise Fail("; ".join(bad))
        return "%d bytes in %d formats, recorded and converted" % (total, len(UNIT_OUTPUTS))
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_firefox_profiler(remora):
    """The Firefox Profiler reads a memory recording's weights as the collapsed bytes."""
    if os.environ.get("REMORA_TEST_ENGINE") == "user":
        raise Skip("REMORA_TEST_ENGINE=user: this run has no kernel engine to judge")
    cli = profiler_cli()
    d = workdir()
    try:
        gecko, coll = os.path.join(d, "m.gecko.json"), os.path.join(d, "m.collapsed")
        record_growth(remora, [gecko, coll])
        want = by_thread(parse_collapsed(coll), lambda f: f[0])
        got = profiler_call_trees(cli, gecko, d)
        if got != want:
            raise Fail("the Firefox Profiler weighs other stacks than the collapsed bytes: %s"
                       % first_difference(got, want))
        return "the profiler weighs %d bytes in %d stacks, as the collapsed file" % (
            sum(sum(c.values()) for c in got.values()), sum(len(c) for c in got.values()))
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_dump_resident(remora):
    with grower(HOST[0]) as t:
        ready = t.wait_ready()
        rc, out, err = remora.run(["dump", "--json", "-p", t.pid])
        if rc != 0:
            raise Fail("dump --json exited %d: %s" % (rc, tail(err)))
        doc = json.loads(out)
        have, want = doc.get("resident_bytes"), ready["resident"]
        if not isinstance(have, int) or abs(have - want) > DUMP_SLACK * want:
            raise Fail("dump says resident_bytes %r, the target read %d" % (have, want))
        rc, text, err = remora.run(["dump", "-p", t.pid])
        first = text.split("\n", 1)[0]
        if rc != 0 or not re.search(r"\), resident [\d.]+ MiB$", first):
            raise Fail("dump's process line %r (exit %d)" % (first, rc))
        return "%d bytes (the target: %d); %s" % (have, want, first)


def tests(remora):
    """[(name, function, skip reason or None)] for run.py."""
    return [("memory/shares/%s" % i[0], lambda i=i: test_shares(remora, i), interp_missing(i))
            for i in INTERPRETERS] + [
        ("memory/refused", lambda: test_refused(remora), interp_missing(HOST[0])),
        ("memory/top", lambda: test_top(remora), interp_missing(HOST[0])),
        ("memory/units", lambda: test_units(remora), interp_missing(HOST[0])),
        ("memory/firefox-profiler", lambda: test_firefox_profiler(remora), interp_missing(HOST[0])),
        ("memory/dump-resident", lambda: test_dump_resident(remora), interp_missing(HOST[0])),
    ]
