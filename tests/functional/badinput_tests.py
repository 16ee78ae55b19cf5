# Functional tests of bad input (issue 16), run by run.py:
#
#   badinput/flags           a table of bad values for every option of every command
#                            (record, top, dump, convert, and remora itself), and each
#                            option left without its value: exit 1, exactly one line on
#                            stderr naming the option (or the reason, for an output that
#                            cannot be written), at once (no sampling: no summary line,
#                            under QUICK_S seconds, no output file, a `-- CMD` never run).
#                            The target is a live Python, so a value that slipped through
#                            would be sampled (exit 0 after -d) and fail the case. -o in a
#                            directory uid 65534 may not write in: "Permission denied".
#   badinput/convert-files   `convert` (and `--diff`) on files that are not a profile it
#                            reads: text, empty, random bytes, a PNG header, gzip of text,
#                            .remora recordings cut short or from a newer version, JSON,
#                            speedscope-looking JSON, remora's own speedscope and pprof
#                            outputs, an ELF binary, a directory, collapsed stacks with a
#                            bad line: exit 1, one line naming the file and what remora
#                            reads, no output written. A recording cut after its samples
#                            keeps them (exit 0, one line saying so).
#   badinput/help            each command's --help lists its own options, one line each,
#                            and what its parser takes is what its help lists: every
#                            listed option is taken (probed), takes a value exactly when
#                            the help shows one; no short option (-a..-Z, probed one by
#                            one) and no long name found in src/cli/*.c, docs/cli.md, the
#                            README or py-spy's own flags is taken unless listed; every
#                            option docs/cli.md's and the README's synopsis give a command
#                            is in its help; a bad -f or --mode lists every format or mode
#                            the docs name.
#   badinput/accepted        the forms the docs promise are taken (1000, 10k, 2.5khz,
#                            1mhz, 250ms, 0.004m, ...) and -d is honoured exactly even
#                            when the period is longer (-r 1 -d 0.5 takes 0.5 s).

import gzip
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

import re

from harness import HOST_PYTHON, REPO, SUMMARY, TARGETS, Fail, Skip, Target, one_line, tail

ORDER = 250           # where run.py runs these tests among the modules' (ascending)

QUICK_S = 2.0                   # a usage error is found before anything is sampled: far
                                # under this (~5 ms); a slipped value samples for RUN_S
RUN_S = 3                       # -d of every record/top case whose -d is not the bad value
DURATION_MARGIN_S = 0.05        # the summary's duration against -d (printed to 0.01 s)

HOST = ("host-python3", HOST_PYTHON, None)

BAD_PIDS = ["", "abc", "0", "-5", "+5", "1.5", "0x10", " 12", "12abc", "4194305",
            "99999999999999999999999"]
BAD_RATES = ["", "fast", "0", "-1", "0.5", "1.5", "0.9hz", "inf", "nan", "1e3", "1e300",
             "1e9999", "2mhz", "1000001", "10k5", "1 khz", "1ghz", "1m", "0x10", "1.0000001khz",
             "5.", "."]
BAD_DURATIONS = ["", "abc", "0", "-1", "inf", "nan", "1e300", "1e9999", "0.0001", "0.5ms",
                 "30d", "1h", "2592001", "43201m", "1.5.2", "5.", "0x10", " 1", "1s "]
BAD_ROWS = ["", "0", "-1", "1.5", "abc", "1000001", "1e3", "+3"]
BAD_MAX_SAMPLES = ["", "0", "-1", "1e3", "abc", "1000000000001", "18446744073709551616"]
BAD_MODES = ["", "idle", "WALL", "wall,cpu"]
BAD_ASYNC_MODES = ["", "Running", "none", "running,all", "wall"]
BAD_FORMATS = ["", "bogus", "HTML"]

COLLAPSED = "thread main (1);main (app.py:1);work (app.py:5) 7\nthread main (1);main (app.py:1) 3\n"
READS = ".remora recordings and collapsed stacks"


def value_cases(flags, values, head, tail_args=()):
    """Cases giving each flag (all its spellings) each bad value, and no value at all."""
    cases = []
    for flag in flags:
        for v in values:
            cases.append((head + [flag, v] + list(tail_args), flag))
        cases.append((head + list(tail_args) + [flag], flag))      # missing: last on the line
    return cases


def sampling_cases(cmd, pid):
    """record and top share these options."""
    head = [cmd, "-p", pid]
    dur = ["-d", RUN_S]
    c = []
    c += value_cases(["-p", "--pid"], BAD_PIDS, [cmd], dur)
    c += value_cases(["-r", "--rate"], BAD_RATES, head, dur)
    c += value_cases(["-d", "--duration"], BAD_DURATIONS, head)
    c += value_cases(["-l", "--limit"], BAD_ROWS, head, dur)
    c += value_cases(["--mode"], BAD_MODES, head, dur)
    c += value_cases(["--async-mode"], BAD_ASYNC_MODES, head, dur)
    c += [(head + dur + ["--async", "--native"], "--native"),
          (head + dur + ["--async-mode", "all", "--subprocesses"], "--subprocesses"),
          (head + dur + ["--async-mode", "all", "--mode", "cpu"], "--mode cpu")]
    c += [
        (head + dur + ["--bogus"], "--bogus"),
        (head + dur + ["--no-gc=1"], "--no-gc=1"),
        (head + dur + ["stray"], "stray"),
        ([cmd, "-d", RUN_S], cmd),                              # no target
        ([cmd, "--"], "--"),                                    # nothing to run
    ]
    return c


def flag_cases(pid, d):
    """(argv, text the one line must hold) for every command."""
    good_in = os.path.join(d, "good.collapsed")
    out = os.path.join(d, "out.collapsed")
    c = []
    # remora itself
    c += [([], "command"), (["no-such-command"], "no-such-command"), (["--versionx"], "--versionx"),
          (["-p", pid], "-p")]
    # record and top
    for cmd in ("record", "top"):
        c += sampling_cases(cmd, pid)
    head = ["record", "-p", pid, "-d", RUN_S]
    c += value_cases(["--max-samples"], BAD_MAX_SAMPLES, head)
    c += value_cases(["-f", "--format"], BAD_FORMATS, head, ["-o", out])
    c += value_cases(["-o", "--output"], [""], head)
    c += value_cases(["--diff"], [""], head + ["-o", os.path.join(d, "d.html")])
    c += [(head + ["--native", "--nonblocking"], "--nonblocking"),
          (head + ["--native", "--subprocesses"], "--subprocesses")]
    c += [(head + ["-o", os.path.join(d, "out.unknown")], "-f"),
          (head + ["-o", "-", "-f", "raw"], "raw"),
          (head + ["-o", os.path.join(d, "a.remora"), "-o", os.path.join(d, "b.remora")], "raw")]
    c += [(["top", "-p", pid, "-d", RUN_S, "-o", out], "-o")]
    # outputs that cannot be written (the line names the reason, not only the flag)
    sub = os.path.join(d, "adir.html")
    os.mkdir(sub)
    c += [(head + ["-o", d, "-f", "collapsed"], "directory"),
          (head + ["-o", sub], "directory"),
          (head + ["-o", "/proc/version", "-f", "collapsed"], "/proc"),
          (head + ["-o", "/proc/remora-test.html"], "/proc"),
          (head + ["-o", os.path.join(d, "no", "such", "p.json")], "No such file or directory"),
          (head + ["-o", out, "-o", d, "-f", "collapsed"], "directory")]
    # bad baselines: found before sampling too
    c += [(head + ["-o", os.path.join(d, "d.html"), "--diff", "/etc/passwd"], "passwd"),
          (head + ["-o", os.path.join(d, "d.html"), "--diff", os.path.join(d, "missing.remora")],
           "missing.remora"),
          (head + ["-o", os.path.join(d, "d.html"), "--diff", d], "directory")]
    # the table's order, a pid alone (issue 50)
    c += value_cases(["--sort"], ["", "bogus"], head)
    c += [(["record", "notapid", "-d", RUN_S], "notapid"),
          (["record", pid, "1", "-d", RUN_S], "two pids"),
          (["top", pid, "-p", "1", "-d", RUN_S], "two pids")]
    # dump
    c += value_cases(["-p", "--pid"], BAD_PIDS, ["dump"])
    core = os.path.join(d, "no.core")
    c += value_cases(["--core"], [""], ["dump"])
    c += value_cases(["--exe"], ["", "/nonexistent/python", d], ["dump", "--core", core])
    c += value_cases(["--root"], ["", "/nonexistent/root", "/etc/passwd"], ["dump", "--core", core])
    c += [(["dump", "-p", pid, f], f) for f in ("--bogus", "--json=1")]
    c += [(["dump", "-p", pid, "--async", "--native"], "--async")]
    c += [(["dump", "-p", pid, "--async", "--locals"], "--async")]
    c += [(["dump", "-p", pid, "--locals", "--subprocesses"], "--subprocesses")]
    c += [(["dump", "-p", pid, "--native", "--subprocesses"], "--subprocesses")]
    c += [(["dump", "-p", pid, "--core", core], "core"),
          (["dump", "-p", pid, "--exe", "/bin/true"], "--exe"),
          (["dump", "--core", core, "--subprocesses"], "--subprocesses"),
          (["dump"], "dump"),
          (["dump", "notapid"], "notapid"),
          (["dump", "-p", pid, "1"], "two pids"),
          (["dump", pid, "--async", "--opcodes"], "--opcodes")]
    # convert
    c += value_cases(["-o", "--output"], [""], ["convert", good_in])
    c += value_cases(["-f", "--format"], BAD_FORMATS + ["raw"], ["convert", good_in])
    c += value_cases(["-l", "--limit"], BAD_ROWS, ["convert", good_in])
    c += value_cases(["--sort"], ["", "bogus", "SELF", "self "], ["convert", good_in])
    c += value_cases(["--diff"], [""], ["convert", good_in, "-o", os.path.join(d, "c.html")])
    c += [(["convert"], "input"),
          (["convert", good_in, good_in], "second"),
          (["convert", good_in, "--bogus"], "--bogus"),
          (["convert", good_in, "-o", os.path.join(d, "c.unknown")], "-f"),
          (["convert", good_in, "-o", d, "-f", "collapsed"], "directory"),
          (["convert", good_in, "-o", sub], "directory"),
          (["convert", good_in, "-o", "/proc/remora-test.html"], "/proc"),
          (["convert", good_in, "-o", os.path.join(d, "c.json"), "--diff", good_in], "--diff"),
          (["convert", good_in, "-o", os.path.join(d, "c.html"), "--diff", "/etc/passwd"], "passwd")]
    return c


def unwritable_cases(remora, pid, d):
    """-o in a directory the user may not write in (uid 65534, a root-owned directory;
    a read-only file system is record/unwritable-output's): [(argv, prefix, text)], and
    notes on what could not be tried here."""
    locked = os.path.join(d, "locked")
    os.mkdir(locked, 0o755)
    os.chmod(d, 0o755)
    drop = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
    probe = (subprocess.run(drop + [remora.path, "--version"], capture_output=True)
             if shutil.which("setpriv") else None)
    if probe is None or probe.returncode != 0:
        return [], ["cannot run remora as uid 65534: the Permission denied case not tried"]
    return [(["record", "-p", pid, "-d", RUN_S, "-o", os.path.join(locked, "p.html")], drop,
             "Permission denied"),
            (["convert", os.path.join(d, "good.collapsed"), "-o", os.path.join(locked, "c.html")],
             drop, "Permission denied")], []


def check_case(remora, args, want, prefix=(), limit=QUICK_S):
    """(None if `remora ARGS` failed as a usage error should, else what went wrong; stderr)."""
    what = "`remora %s`" % " ".join(repr(a) if a == "" or " " in a else a for a in map(str, args))
    start = time.monotonic()
    try:
        rc, out, err = remora.run(args, prefix=prefix)
    except Fail as e:               # a hang (a value taken, sampling 30 days) or a crash
        return "%s: %s" % (what, e), ""
    took = time.monotonic() - start
    if rc != 1:
        return "%s: exit %d, want 1: %s" % (what, rc, tail(err)), err
    bad = one_line(err)
    if bad:
        return "%s: %s" % (what, bad), err
    if SUMMARY.search(err) or took > limit:
        return "%s: sampled before failing (%.2f s): %s" % (what, took, err.strip()), err
    if want not in err:
        return "%s: the line does not name %r: %s" % (what, want, err.strip()), err
    return None, err


def test_flags(remora):
    if not os.access(HOST_PYTHON, os.X_OK):
        raise Skip("%s not found" % HOST_PYTHON)
    d = tempfile.mkdtemp(prefix="remora-bad-")
    limit = QUICK_S * (10 if remora.wrapper else 1)
    try:
        with open(os.path.join(d, "good.collapsed"), "w") as f:
            f.write(COLLAPSED)
        with Target(HOST, os.path.join(TARGETS, "idle.py"), "ready") as t:
            t.wait_ready()
            cases = flag_cases(t.pid, d)
            before = set(os.listdir(d))
            problems = []
            for args, want in cases:
                p, _ = check_case(remora, args, want, limit=limit)
                if p:
                    problems.append(p)
            more, notes = unwritable_cases(remora, t.pid, d)
            for args, prefix, want in more:
                p, _ = check_case(remora, args, want, prefix=prefix, limit=limit)
                if p:
                    problems.append(p)
            # a bad value with `-- CMD`: refused before the command is started
            marker = os.path.join(d, "ran")
            cmd = ["--", HOST_PYTHON, "-c", "open(%r, 'w')" % marker]
            launch = [(["record", "-r", "0.5"] + cmd, "-r"), (["record", "-d", "inf"] + cmd, "-d"),
                      (["record", "-o", d, "-f", "collapsed"] + cmd, "directory"),
                      (["top", "-l", "0"] + cmd, "-l")]
            for args, want in launch:
                p, _ = check_case(remora, args, want, limit=limit)
                if p is None and os.path.exists(marker):
                    p = "`remora %s`: the command ran" % " ".join(args)
                if p:
                    problems.append(p)
            made = set(os.listdir(d)) - before - {"locked"}
            if made:
                problems.append("files written: %s" % ", ".join(sorted(made)))
        if problems:
            raise Fail("%d of %d cases: %s" % (len(problems), len(cases) + len(more) + len(launch),
                                               "; ".join(problems[:6])))
        return "%d cases, each exit 1 with one line%s" % (
            len(cases) + len(more) + len(launch), "; " + ", ".join(notes) if notes else "")
    finally:
        shutil.rmtree(d, ignore_errors=True)


# --- convert on files that are not profiles ---------------------------------------------

def short_recording(remora, d):
    """A real .remora recording of a host Python for a moment; its bytes."""
    path = os.path.join(d, "real.remora")
    src = "import time\nt = time.time() + 0.3\nwhile time.time() < t: pass\n"
    rc, _, err = remora.run(["record", "-o", path, "--", HOST_PYTHON, "-c", src])
    if rc != 0:
        raise Fail("recording a .remora to cut short: exit %d: %s" % (rc, tail(err)))
    with open(path, "rb") as f:
        return f.read()


def not_profiles(remora, d):
    """(name, content bytes or None for a directory, what it stands for)."""
    rng = random.Random(16)
    with open("/etc/passwd", "rb") as f:
        passwd = f.read()
    real = short_recording(remora, d)
    good = os.path.join(d, "good.collapsed")
    outputs = {}
    for name in ("own.json", "own.pb.gz"):
        rc, _, err = remora.run(["convert", good, "-o", os.path.join(d, name)])
        if rc != 0:
            raise Fail("convert good.collapsed -o %s: exit %d: %s" % (name, rc, tail(err)))
        with open(os.path.join(d, name), "rb") as f:
            outputs[name] = f.read()
    with open(sys.executable if os.path.isfile(sys.executable) else "/bin/true", "rb") as f:
        elf = f.read(1 << 16)
    return [
        ("passwd.txt", passwd, "/etc/passwd, text"),
        ("empty.collapsed", b"", "an empty file"),
        ("blank.collapsed", b"\n\n  \n", "blank lines only"),
        ("random.bin", bytes(rng.getrandbits(8) for _ in range(4096)), "random bytes"),
        ("image.png", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(64), "a PNG header"),
        ("text.gz", gzip.compress(passwd), "gzip of text"),
        ("magic.remora", real[:7], "a .remora cut inside its magic"),
        ("header.remora", real[:9], "a .remora cut in its first record"),
        ("newer.remora", real[:7] + b"\x63" + real[8:], "a .remora of version 99"),
        ("other.json", b'{"name": "x", "values": [1, 2, 3]}\n', "JSON that is not speedscope"),
        ("shape.json", b'{"$schema": "https://www.speedscope.app/file-format-schema.json",\n'
                       b' "profiles": 5, "shared": []}\n', "speedscope-looking JSON, wrong shape"),
        ("own.json", outputs["own.json"], "remora's own speedscope output"),
        ("own.pb.gz", outputs["own.pb.gz"], "remora's own pprof output"),
        ("binary.elf", elf, "an ELF binary"),
        ("adir", None, "a directory"),
        ("midline.collapsed", b"main;f 3\nnot a stack\nmain;g 2\n", "a bad line in the middle"),
        ("negative.collapsed", b"main;f -3\n", "a negative count"),
    ]


def test_convert_files(remora):
    if not os.access(HOST_PYTHON, os.X_OK):
        raise Skip("%s not found" % HOST_PYTHON)
    d = tempfile.mkdtemp(prefix="remora-bad-")
    limit = QUICK_S * (10 if remora.wrapper else 1)
    try:
        good = os.path.join(d, "good.collapsed")
        with open(good, "w") as f:
            f.write(COLLAPSED)
        files = not_profiles(remora, d)
        problems = []
        for name, content, what in files:
            path = os.path.join(d, name)
            if content is None:
                os.mkdir(path)
            else:
                with open(path, "wb") as f:
                    f.write(content)
            for args in (["convert", path, "-o", os.path.join(d, "out.html")],
                         ["convert", path, "-o", os.path.join(d, "out.gecko.json")],
                         ["convert", good, "-o", os.path.join(d, "out.html"), "--diff", path]):
                p, err = check_case(remora, args, path, limit=limit)
                if p is None:
                    if READS not in err and ".remora recording" not in err:
                        p = "%s (%s): the line does not say what remora reads: %s" % (
                            name, what, err.strip())
                if p is None and [n for n in os.listdir(d) if n.startswith("out.")]:
                    p = "%s (%s): an output was written" % (name, what)
                if p:
                    problems.append("%s: %s" % (what, p))
        # a recording cut after some samples keeps them, and says so
        real = short_recording(remora, d)
        cut = os.path.join(d, "cut.remora")
        with open(cut, "wb") as f:
            f.write(real[:len(real) * 2 // 3])
        out = os.path.join(d, "kept.collapsed")
        rc, _, err = remora.run(["convert", cut, "-o", out])
        if rc != 0 or one_line(err) or "truncated" not in err:
            problems.append("a recording cut at 2/3: exit %d, want 0 and one line saying it is "
                            "truncated: %s" % (rc, tail(err)))
        elif not os.path.exists(out) or os.path.getsize(out) == 0:
            problems.append("a recording cut at 2/3: no stacks kept")
        if problems:
            raise Fail("%d problems: %s" % (len(problems), "; ".join(problems[:6])))
        return "%d kinds of file, each refused by convert, convert -f firefox and --diff" % len(files)
    finally:
        shutil.rmtree(d, ignore_errors=True)


# --- each command's help against what its parser takes ----------------------------------

COMMANDS = ("dump", "record", "top", "convert")
HELP_LINE = re.compile(r"^  (-[^ ,]+(?:, -[^ ,]+)*)(?: ([A-Z](?:[A-Z .]*[A-Z.])?))?  +\S")
OPTION = re.compile(r"(?<![\w-])(--?[a-zA-Z][a-zA-Z0-9-]*)")
PYSPY_FLAGS = ["--pid", "--rate", "--duration", "--output", "--format", "--gil", "--idle",
               "--nonblocking", "--native", "--subprocesses", "--function", "--nolineno",
               "--threads", "--full-filenames", "--json", "--locals", "--dump", "--help",
               "--version", "--nogil", "--delay", "--core"]
DOC_FORMATS = ["flamegraph", "svg", "speedscope", "firefox", "pprof", "collapsed", "pstats", "raw"]
DOC_MODES = ["wall", "cpu", "gil", "exception"]
DOC_ASYNC_MODES = ["running", "all"]
REFUSED = ("unexpected argument", "not available")


def help_options(remora, cmd):
    """{name: takes a value} from `remora CMD --help`, and the problems with its form."""
    rc, out, err = remora.run([cmd, "--help"])
    problems, opts = [], {}
    if rc != 0 or err:
        problems.append("`%s --help`: exit %d, stderr %r" % (cmd, rc, tail(err)))
    if not out.startswith("usage: remora %s" % cmd):
        problems.append("`%s --help` does not start with its own usage: %r" % (cmd, out[:60]))
    for line in out.splitlines():
        if len(line) > 80:
            problems.append("`%s --help`: a line of %d columns: %r" % (cmd, len(line), line))
        m = HELP_LINE.match(line)
        if m:
            for name in m.group(1).split(", "):
                if name in opts:
                    problems.append("`%s --help` lists %s twice" % (cmd, name))
                opts[name] = m.group(2) is not None
    if not opts:
        problems.append("`%s --help` lists no option" % cmd)
    return opts, problems


def refused(remora, args):
    """Did remora's parser refuse the first option of args as one it does not know?"""
    rc, _, err = remora.run(args)
    return rc == 1 and any(r in err for r in REFUSED), rc, err


def synopsis_options(path):
    """{command: set of options} from the first code block of PATH's command synopsis."""
    text = open(os.path.join(REPO, path), encoding="utf-8").read()
    block = re.search(r"```\n(remora dump.*?)```", text, re.S)
    got, cmd = {}, None
    for line in block.group(1).splitlines():
        m = re.match(r"remora (\w*)", line)
        if m:
            cmd = m.group(1) or "remora"    # "remora --version": the command's own options
            line = line[m.end():]
        for o in OPTION.findall(line):
            got.setdefault(cmd, set()).add(o)
    return got


def test_help(remora):
    problems, counts = [], []
    sources = ""
    for name in sorted(os.listdir(os.path.join(REPO, "src", "cli"))):
        with open(os.path.join(REPO, "src", "cli", name), encoding="utf-8") as f:
            sources += f.read()
    candidates = set(re.findall(r'"(--?[a-zA-Z][a-zA-Z0-9-]*)', sources))
    for doc in ("docs/cli.md", "README.md"):
        with open(os.path.join(REPO, doc), encoding="utf-8") as f:
            candidates |= set(OPTION.findall(f.read()))
    candidates |= set(PYSPY_FLAGS)
    # "-p1234" in the docs is -p with its value: short names are probed one letter each
    candidates = {c for c in candidates if c.startswith("--") or len(c) == 2}
    candidates |= {"-" + c for c in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"}
    docs = [(d, synopsis_options(d)) for d in ("docs/cli.md", "README.md")]
    for cmd in COMMANDS:
        opts, p = help_options(remora, cmd)
        problems += p
        # every listed option is taken, with a value exactly when the help shows one
        for name, takes in sorted(opts.items()):
            no, rc, err = refused(remora, [cmd, name])
            if no:
                problems.append("`%s --help` lists %s, which it refuses: %s" % (cmd, name, tail(err)))
                continue
            if name.startswith("--") and name != "--":
                _, rc, err = refused(remora, [cmd, name + "=x"])
                said = "takes no value" in err
                if said == takes:
                    problems.append("`%s %s=x`: %s, but the help %s" % (
                        cmd, name, "refused as a flag" if said else "taken",
                        "shows a value" if takes else "shows none"))
        # nothing else is taken
        for name in sorted(candidates - set(opts)):
            no, rc, err = refused(remora, [cmd, name])
            if not no:
                problems.append("`%s %s` is taken (exit %d: %s) but not in `%s --help`"
                                % (cmd, name, rc, tail(err, 1), cmd))
        for doc, synopsis in docs:
            missing = sorted(synopsis.get(cmd, set()) - set(opts))
            if missing:
                problems.append("%s's synopsis gives %s %s, not in its --help"
                                % (doc, cmd, ", ".join(missing)))
        counts.append("%s %d" % (cmd, len(opts)))
    # a bad value's line lists what is accepted
    for args, names in ((["record", "-p", "1", "-f", "bogus"], DOC_FORMATS),
                        (["convert", "x", "-f", "bogus"], DOC_FORMATS[:-1]),
                        (["record", "-p", "1", "--mode", "bogus"], DOC_MODES),
                        (["top", "-p", "1", "--mode", "bogus"], DOC_MODES),
                        (["record", "-p", "1", "--async-mode", "bogus"], DOC_ASYNC_MODES),
                        (["top", "-p", "1", "--async-mode", "bogus"], DOC_ASYNC_MODES)):
        rc, _, err = remora.run(args)
        missing = [n for n in names if n not in err]
        if rc != 1 or one_line(err) or missing:
            problems.append("`remora %s`: exit %d, the line misses %s: %s"
                            % (" ".join(args), rc, ", ".join(missing) or "nothing", tail(err)))
    rc, out, err = remora.run(["--help"])
    missing = [c for c in COMMANDS if "\n  %s " % c not in out]
    if rc != 0 or missing:
        problems.append("`remora --help`: exit %d, commands missing: %s" % (rc, ", ".join(missing)))
    if problems:
        raise Fail("%d problems: %s" % (len(problems), "; ".join(problems[:8])))
    return "options listed and taken: %s; %d other names probed on each" % (
        ", ".join(counts), len(candidates))


# --- what is accepted ------------------------------------------------------------------

ACCEPTED = [   # (-r, -d, Hz asked, seconds)
    ("1", "0.5", 1, 0.5),               # the period (1 s) is longer than -d: -d still ends it
    ("2", "700ms", 2, 0.7),
    ("10k", "0.2", 10000, 0.2),
    ("2.5khz", ".2", 2500, 0.2),
    ("1KHz", "0.004m", 1000, 0.24),
    ("1mhz", "200ms", 1000000, 0.2),
    ("1M", "0.2s", 1000000, 0.2),
]


def test_accepted(remora):
    if not os.access(HOST_PYTHON, os.X_OK):
        raise Skip("%s not found" % HOST_PYTHON)
    d = tempfile.mkdtemp(prefix="remora-bad-")
    try:
        problems, got = [], []
        with Target(HOST, os.path.join(TARGETS, "idle.py"), "ready") as t:
            t.wait_ready()
            for rate, dur, hz, secs in ACCEPTED:
                out = os.path.join(d, "a.collapsed")
                args = ["record", "-p", t.pid, "-r", rate, "-d", dur, "-o", out]
                rc, _, err = remora.run(args)
                m = SUMMARY.search(err)
                if rc != 0 or m is None:
                    problems.append("-r %s -d %s: exit %d: %s" % (rate, dur, rc, tail(err)))
                    continue
                took, asked = float(m.group("seconds")), int(m.group("asked"))
                if asked != hz:
                    problems.append("-r %s: the summary says %d Hz asked, want %d" % (rate, asked, hz))
                if abs(took - secs) > DURATION_MARGIN_S:
                    problems.append("-r %s -d %s: sampled %.2f s, want %.2f (margin %.2f s)"
                                    % (rate, dur, took, secs, DURATION_MARGIN_S))
                got.append("%s/%s %.2fs" % (rate, dur, took))
        if problems:
            raise Fail("; ".join(problems))
        return ", ".join(got)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def tests(remora):
    """[(name, function, skip reason or None)] for run.py."""
    return [
        ("badinput/flags", lambda: test_flags(remora), None),
        ("badinput/convert-files", lambda: test_convert_files(remora), None),
        ("badinput/accepted", lambda: test_accepted(remora), None),
        ("badinput/help", lambda: test_help(remora), None),
    ]
