# Installing remora (issue 21): `make install`/`uninstall` into a temporary DESTDIR, the
# installed binary against a live target, the manual page, the bash and zsh completions,
# and the Debian package built, linted and installed into a chroot.
#
#   install/version          VERSION, debian/changelog, remora.1's .TH and `remora --version`
#                            agree; the versions it says it reads are 3.9-3.15, every
#                            interpreter the tests know among them
#   install/make-install     make install PREFIX=/opt/prefix-test DESTDIR=TMP BIN=<remora
#                            under test>: exactly the four files and libremora's six (its
#                            header, libremora.a, libremora.so.0.N and its two links, the
#                            .pc), each equal to the tree's (the library as `make lib` built
#                            it), the links where they belong, the .pc naming the prefix;
#                            the installed remora's --version, and its `dump --json` of
#                            known_stacks.py equal to the target's own truth; make uninstall
#                            leaves no file in DESTDIR
#   install/manpage          groff -ww and `man --warnings -l` render docs/remora.1 without a
#                            warning; every option each command's --help lists (what the
#                            parser takes: cli_opt_help prints its table) is in that
#                            command's section, and every format, mode, exit code 0-5,
#                            ptrace_scope, CAP_SYS_PTRACE and containers are described;
#                            the PASS line names the page's options this build refuses
#                            (those other branches are adding: --async, --locals, ...)
#   install/bash-completion  the script sourced in bash, _remora called with COMP_WORDS:
#                            `remora ` the commands, `remora CMD -` every option of CMD's
#                            --help, `-f ` the formats its --help names, `--mode ` the modes,
#                            `dump -p ` the pid of a live Python and not that of a sleep(1)
#   install/zsh-completion   zsh -n parses it; each command's block names every option of
#                            its --help, the formats and the modes; an interactive zsh on a
#                            pty (zsh/zpty), TAB after `remora CMD -`, `-f `, `--mode `,
#                            `dump -p ` offers the same as for bash (SKIP without zsh)
#   install/no-test-code     the test-only functions (snapshots' recorder and reader, the
#                            entry points only tests and fuzzers call: REMORA_TESTING, the
#                            Makefile's TESTING_SRC) are in none of remora under test,
#                            libremora.a, libremora.so and the Python module (nm, clones such
#                            as NAME.part.0 too); each name is still defined in src/, so a
#                            rename cannot make the check pass by itself
#   install/deb              dpkg-buildpackage -us -uc -b in a copy of the tree (outside it),
#                            lintian clean (or each tag explained in docs/install.md), the
#                            package's version and Depends; dpkg -i in an overlay of the test
#                            chroot (Debian unstable: libdw1t64 provides libdw1), where the
#                            installed remora dumps known_stacks.py under python3.15 exactly
#                            as the target's truth says (SKIP without debhelper, the chroot
#                            or its mirror)
# Standard library only.

import glob
import json
import os
import re
import shutil
import subprocess
import tempfile
import time

from harness import (CHROOT, HOST_PYTHON, INTERPRETERS, REPO, TARGETS, Fail, Skip, Target,
                     dump_frames_problems, dump_threads_problems, interp_missing, interpreter,
                     tail)
from formats import parse_dump

ORDER = 300           # where run.py runs these tests among the modules' (ascending)

COMMANDS = ("dump", "record", "top", "convert")
# one line of a command's --help listing options (the form badinput/help checks)
HELP_LINE = re.compile(r"^  (-[^ ,]+(?:, -[^ ,]+)*)(?: ([A-Z](?:[A-Z .]*[A-Z.])?))?  +\S")
PREFIX = "/opt/prefix-test"
INSTALLED = {                            # installed path -> the tree's file
    "bin/remora": None,                  # the binary under test
    "share/man/man1/remora.1": "docs/remora.1",
    "share/bash-completion/completions/remora": "completions/remora.bash",
    "share/zsh/site-functions/_remora": "completions/_remora",
    # libremora (issue 47; docs/api.md): the library as `make lib` builds it
    "include/remora/remora.h": "include/remora/remora.h",
    "lib/libremora.a": "build-lib/libremora.a",
    "lib/libremora.so.0.1": "build-lib/libremora.so.0.1",
    "lib/libremora.so.0": "build-lib/libremora.so.0.1",
    "lib/libremora.so": "build-lib/libremora.so.0.1",
    "lib/pkgconfig/libremora.pc": None,  # made from src/lib/libremora.pc.in: checked apart
}
LIB_LINKS = {"lib/libremora.so.0": "libremora.so.0.1", "lib/libremora.so": "libremora.so.0"}
DUMP_INTERPS = ("pyenv-3.12.1", "debian-3.11-static")   # the first one present dumps
DEB_INTERP = interpreter("sid-3.15")[1]   # the chroot's python for the .deb's dump
CMD_TIMEOUT = 120                        # s for make, dpkg-buildpackage, apt-get


def run(argv, cwd=None, env=None, timeout=CMD_TIMEOUT, input=None):
    """(rc, stdout, stderr) of argv, text. make's variables of an enclosing `make test`
    (its jobserver, WERROR=1) are not passed on: the package is built as a user would."""
    env = {k: v for k, v in (env or os.environ).items()
           if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")}
    try:
        p = subprocess.run(argv, cwd=cwd, env=env, input=input, capture_output=True,
                           text=True, errors="replace", timeout=timeout)
    except subprocess.TimeoutExpired:
        raise Fail("`%s` took over %ds" % (" ".join(argv), timeout))
    return p.returncode, p.stdout, p.stderr


def help_of(remora, cmd):
    """({option: takes a value}, the help text) from `remora CMD --help`."""
    rc, out, err = remora.run([cmd, "--help"])
    if rc != 0:
        raise Fail("`remora %s --help`: exit %d: %s" % (cmd, rc, tail(err)))
    opts = {}
    for line in out.splitlines():
        m = HELP_LINE.match(line)
        if m:
            for name in m.group(1).split(", "):
                opts[name] = m.group(2) is not None
    if not opts:
        raise Fail("`remora %s --help` lists no option" % cmd)
    return opts, out


def formats_of(help_text):
    """The format names a --help's "formats:" line gives (wrapped onto the lines after it
    that go on with a comma-separated name, up to the "by -o's ending" line)."""
    m = re.search(r"^formats: (.*?)\n  by ", help_text, re.M | re.S)
    return [f.strip() for f in m.group(1).replace("\n", " ").split(",")] if m else []


def modes_of(help_text):
    """The mode names a --help's "modes:" paragraph gives (name before its "(...)")."""
    m = re.search(r"^modes: (.*?)(?:\n\n|\Z)", help_text, re.M | re.S)
    return re.findall(r"(?:^|, |\n\s*)(\w+) \(", m.group(1)) if m else []


def version_file():
    with open(os.path.join(REPO, "VERSION")) as f:
        return f.read().strip()


# --- version ----------------------------------------------------------------------------

def test_version(remora):
    problems = []
    version = version_file()
    with open(os.path.join(REPO, "debian", "changelog")) as f:
        m = re.match(r"remora \(([^)]+)\)", f.readline())
    deb = m.group(1) if m else None
    if deb is None or re.sub(r"-[^-]+$", "", deb) != version:
        problems.append("debian/changelog's version %r is not VERSION's %r" % (deb, version))
    with open(os.path.join(REPO, "docs", "remora.1")) as f:
        th = re.search(r'^\.TH REMORA 1 "[^"]*" "remora ([^"]+)"', f.read(), re.M)
    if th is None or th.group(1) != version:
        problems.append("remora.1's .TH names version %r, not VERSION's %r"
                        % (th and th.group(1), version))
    rc, out, err = remora.run(["--version"])
    lines = out.splitlines()
    if rc != 0 or len(lines) != 2 or lines[0] != "remora " + version:
        problems.append("`remora --version`: exit %d, %r, want 'remora %s' and the versions"
                        % (rc, out, version))
    minors = re.findall(r"\b3\.(\d+)\b", lines[1]) if len(lines) > 1 else []
    if [int(n) for n in minors] != list(range(9, 16)):
        problems.append("`remora --version` reads %s, want 3.9 to 3.15"
                        % (", ".join("3." + n for n in minors) or "nothing"))
    known = sorted({re.search(r"3\.(\d+)", p).group(1) for _, p, _ in INTERPRETERS}, key=int)
    absent = [k for k in known if k not in minors]
    if absent:
        problems.append("interpreters the tests read but --version does not list: 3.%s"
                        % ", 3.".join(absent))
    if problems:
        raise Fail("; ".join(problems))
    return "%s; %s" % (lines[0], lines[1])


# --- make install / uninstall -----------------------------------------------------------

def dump_against_truth(remora, binary, interp):
    """Problems of `BINARY dump --json` of known_stacks.py run by interp (host)."""
    with Target(interp, os.path.join(TARGETS, "known_stacks.py"), "truth.json") as t:
        truth = t.wait_ready()
        t.wait_main_in_read()
        rc, out, err = remora.run(["dump", "-p", t.pid, "--json"], binary=binary)
        if rc != 0:
            return ["installed `remora dump --json` exited %d: %s" % (rc, tail(err))]
        doc = parse_dump(out)
        problems, got, _ = dump_threads_problems(doc, truth, t.pid)
        more, diff = dump_frames_problems(got, truth)
        return problems + more + (diff or [])[:6]


def files_under(root):
    return sorted(os.path.relpath(os.path.join(d, f), root)
                  for d, _, fs in os.walk(root) for f in fs)


def test_make_install(remora):
    interp = next((interpreter(n) for n in DUMP_INTERPS if not interp_missing(interpreter(n))),
                  None)
    if interp is None:
        raise Skip("none of %s here" % ", ".join(DUMP_INTERPS))
    dest = tempfile.mkdtemp(prefix="remora-destdir-")
    binary = os.path.abspath(remora.path)
    make = ["make", "-s", "-C", REPO, "PREFIX=" + PREFIX, "DESTDIR=" + dest, "BIN=" + binary]
    try:
        problems = []
        # the library first (its -fPIC objects take a while on a loaded machine)
        rc, out, err = run(["make", "-s", "-C", REPO, "lib"], timeout=900)
        if rc != 0:
            raise Fail("make lib: exit %d: %s" % (rc, tail(err)))
        rc, out, err = run(make + ["install"])
        if rc != 0:
            raise Fail("make install: exit %d: %s" % (rc, tail(err)))
        root = dest + PREFIX
        got = files_under(dest)
        want = sorted(os.path.relpath(os.path.join(root, p), dest) for p in INSTALLED)
        if got != want:
            problems.append("make install wrote %s, want %s" % (got, want))
        for path, tree in INSTALLED.items():
            if path.endswith(".pc"):
                continue
            src = binary if tree is None else os.path.join(REPO, tree)
            dst = os.path.join(root, path)
            if os.path.exists(dst) and open(src, "rb").read() != open(dst, "rb").read():
                problems.append("%s differs from %s" % (dst, src))
        for path, target in LIB_LINKS.items():
            dst = os.path.join(root, path)
            if not os.path.islink(dst) or os.readlink(dst) != target:
                problems.append("%s is not a link to %s" % (path, target))
        pc = os.path.join(root, "lib/pkgconfig/libremora.pc")
        if os.path.exists(pc):
            text = open(pc).read()
            for line in ("prefix=%s" % PREFIX, "libdir=${prefix}/lib",
                         "includedir=${prefix}/include", "Version: %s" % version_file(),
                         "Libs: -L${libdir} -lremora"):
                if line not in text.splitlines():
                    problems.append("libremora.pc lacks the line %r" % line)
        if not os.access(os.path.join(root, "bin/remora"), os.X_OK):
            problems.append("bin/remora is not executable")
        installed = os.path.join(root, "bin/remora")
        rc, out, err = remora.run(["--version"], binary=installed)
        if rc != 0 or not out.startswith("remora %s\n" % version_file()):
            problems.append("installed --version: exit %d: %r" % (rc, out))
        problems += dump_against_truth(remora, installed, interp)
        rc, out, err = run(make + ["uninstall"])
        if rc != 0:
            problems.append("make uninstall: exit %d: %s" % (rc, tail(err)))
        left = files_under(dest) + [d for d, _, _ in os.walk(dest)
                                    if os.path.basename(d) in ("remora", "_remora", "remora.1")]
        if left:
            problems.append("make uninstall left %s" % ", ".join(left))
        if problems:
            raise Fail("; ".join(problems))
        return "%d files under DESTDIR%s; installed remora dumped %s exactly; uninstall " \
               "left no file" % (len(INSTALLED), PREFIX, interp[0])
    finally:
        shutil.rmtree(dest, ignore_errors=True)


# --- the manual page --------------------------------------------------------------------

def rendered_manpage(path):
    """(text, warnings): man's rendering at 80 columns, hyphenation undone."""
    env = dict(os.environ, MANWIDTH="80", LC_ALL="C.UTF-8", MAN_KEEP_FORMATTING="")
    rc, out, err = run(["man", "--warnings", "-E", "UTF-8", "-l", path], env=env)
    if rc != 0:
        raise Fail("man -l %s: exit %d: %s" % (path, rc, tail(err)))
    out = re.sub(r".\x08", "", out)                 # overstrikes, if any
    out = re.sub(r"[\u2010-]\n\s+", "", out)          # a word hyphenated across lines
    out = out.replace("\u2010", "-").replace("\u2212", "-")
    return out, err.strip()


def man_sections(text):
    """{command: its text} from the rendered page's "remora CMD" subsections."""
    parts = re.split(r"^   remora (\w+)\s*$", text, flags=re.M)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def test_manpage(remora):
    page = os.path.join(REPO, "docs", "remora.1")
    problems = []
    if shutil.which("groff") is None or shutil.which("man") is None:
        raise Skip("groff or man missing (apt-get install groff-base man-db)")
    rc, out, err = run(["groff", "-ww", "-man", "-z", page])
    if rc != 0 or err.strip():
        problems.append("groff -ww: exit %d: %s" % (rc, tail(err, 6)))
    text, warnings = rendered_manpage(page)
    if warnings:
        problems.append("man --warnings: %s" % tail(warnings, 6))
    sections = man_sections(text)
    counts, ahead = [], []
    for cmd in COMMANDS:
        opts, help_text = help_of(remora, cmd)
        sect = sections.get(cmd)
        if sect is None:
            problems.append("no 'remora %s' section" % cmd)
            continue
        missing = [o for o in opts if not re.search(r"(?<![\w-])%s(?![\w-])" % re.escape(o), sect)]
        if missing:
            problems.append("remora %s's section lacks %s" % (cmd, ", ".join(missing)))
        for name in formats_of(help_text) + modes_of(help_text):
            if not re.search(r"^       %s\b" % re.escape(name), text, re.M):
                problems.append("%s is not described (FORMATS/MODES)" % name)
        counts.append("%s %d" % (cmd, len(opts)))
        # the other way: what the page gives that this build's parser does not take yet
        # (options other branches are adding), named in the PASS line for whoever merges
        paged = set(re.findall(r"^       (-[\w-]+(?:, -[\w-]+)*)", sect, re.M))
        for name in sorted({n for p in paged for n in p.split(", ")} - set(opts)):
            rc, _, err = remora.run([cmd, name])
            if rc == 1 and ("unexpected argument" in err or "not available" in err):
                ahead.append("%s %s" % (cmd, name))
    exits = re.search(r"^EXIT STATUS\n(.*?)^\S", text, re.M | re.S)
    for code in range(6):
        if exits is None or not re.search(r"^       %d\b" % code, exits.group(1), re.M):
            problems.append("exit status %d not described" % code)
    perms = re.search(r"^PERMISSIONS\n(.*?)^\S", text, re.M | re.S)
    for word in ("ptrace_scope", "CAP_SYS_PTRACE", "Containers", "SYS_PTRACE", "--version"):
        if word not in (perms.group(1) if perms and word != "--version" else text):
            problems.append("%s not described" % word)
    if problems:
        raise Fail("; ".join(problems[:10]))
    return "no warning; options of each --help in its section: %s%s" % (
        ", ".join(counts), "; in the page, not taken by this build yet: %s" % ", ".join(ahead)
        if ahead else "")


# --- bash completion --------------------------------------------------------------------

BASH_CALL = r'''
source "$1"; shift
COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 )); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
_remora remora "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
printf '%s\n' "${COMPREPLY[@]}"
'''


def bash_complete(words):
    """The candidates _remora offers for the command line WORDS (the last one being
    completed), in a bash without any start-up file."""
    script = os.path.join(REPO, "completions", "remora.bash")
    rc, out, err = run(["bash", "--norc", "--noprofile", "-c", BASH_CALL, "bash", script]
                       + list(words), timeout=30)
    if rc != 0 or err.strip():
        raise Fail("completing %r: exit %d: %s" % (" ".join(words), rc, tail(err)))
    return [l for l in out.splitlines() if l]


def test_bash_completion(remora):
    problems, notes = [], []
    got = bash_complete(["remora", ""])
    if set(COMMANDS) - set(got):
        problems.append("`remora ` offers %s" % got)
    formats = modes = None
    for cmd in COMMANDS:
        opts, help_text = help_of(remora, cmd)
        got = set(bash_complete(["remora", cmd, "-"]))
        missing = sorted(set(opts) - got)
        if missing:
            problems.append("`remora %s -` lacks %s" % (cmd, ", ".join(missing)))
        fmts = formats_of(help_text)
        if "-f" in opts and fmts:
            offered = bash_complete(["remora", cmd, "-f", ""])
            if sorted(offered) != sorted(fmts):
                problems.append("`remora %s -f ` offers %s, --help names %s" % (cmd, offered, fmts))
            if cmd == "record":
                formats = offered
        if "--mode" in opts:
            offered = bash_complete(["remora", cmd, "--mode", ""])
            if sorted(offered) != sorted(modes_of(help_text)):
                problems.append("`remora %s --mode ` offers %s, --help names %s"
                                % (cmd, offered, modes_of(help_text)))
            modes = offered
    # pids of Python processes: a live target in, a sleep(1) out
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        with Target(("host", HOST_PYTHON, None), os.path.join(TARGETS, "idle.py"), "ready") as t:
            t.wait_ready()                          # its pid, a JSON number
            for cmd in ("dump", "record"):
                offered = bash_complete(["remora", cmd, "-p", ""])
                if str(t.pid) not in offered:
                    problems.append("`remora %s -p ` does not offer the Python target %d: %s"
                                    % (cmd, t.pid, offered[:10]))
                if str(sleeper.pid) in offered:
                    problems.append("`remora %s -p ` offers sleep(1)'s pid %d"
                                    % (cmd, sleeper.pid))
            notes.append("-p offered %d pids" % len(offered))
    finally:
        sleeper.kill()
        sleeper.wait()
    if problems:
        raise Fail("; ".join(problems[:8]))
    return "every --help option offered; -f %s; --mode %s; %s" % (
        " ".join(formats or []), " ".join(modes or []), "; ".join(notes))


# --- zsh completion ---------------------------------------------------------------------

# An interactive zsh on a pseudo-terminal (zsh/zpty) with compinit and _remora on fpath;
# compadd wrapped to append every match it is given to OUT; TAB bound to a completion
# widget whose last step (comppostfuncs, run once every match is in) writes OUT.end; then
# LINE and a TAB typed. Readiness by files, polled. $1 completions dir, $2 OUT, $3 LINE.
ZSH_CALL = r'''
zmodload zsh/zpty || exit 3
fdir=$1 out=$2 line=$3
: > $out
zpty z zsh -f -i
zpty -w z "PS1='' PROMPT='' RPROMPT=''; fpath=(${(q)fdir} \$fpath); autoload -Uz compinit; compinit -u -D"
zpty -w z "compadd() { if [[ \${@[1,(i)(-|--)]} == *-(O|A|D)\\ * ]]; then builtin compadd \"\$@\"; return; fi; local -a __h; builtin compadd -A __h \"\$@\"; (( \$#__h )) && print -rl -- \"\${__h[@]}\" >> ${(q)out}; builtin compadd \"\$@\"; }"
zpty -w z "_cap_end() { print done > ${(q)out}.end; }; _cap() { comppostfuncs=(_cap_end); _main_complete; }"
zpty -w z "zle -C cap-complete complete-word _cap; bindkey '^I' cap-complete; zstyle ':completion:*' menu no; LISTMAX=100000"
zpty -w z "print ready > ${(q)out}.ready"
for i in {1..600}; do [[ -s $out.ready ]] && break; sleep 0.05; done
zpty -w -n z "$line"$'\t'
for i in {1..600}; do [[ -s $out.end ]] && break; sleep 0.05; done
zpty -d z
[[ -s $out.end ]]
'''


def zsh_complete(zsh, line):
    """The matches zsh's completion system offers at the end of LINE with _remora."""
    d = tempfile.mkdtemp(prefix="remora-zsh-")
    try:
        out = os.path.join(d, "matches")
        rc, _, err = run([zsh, "-f", "-c", ZSH_CALL, "zsh", os.path.join(REPO, "completions"),
                          out, line], timeout=60)
        if rc == 3:
            raise Skip("zsh has no zsh/zpty module: cannot drive its completion")
        if rc != 0:
            raise Fail("zsh completing %r: exit %d: %s" % (line, rc, tail(err)))
        with open(out) as f:
            return sorted({l for l in f.read().splitlines() if l})
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_zsh_completion(remora):
    zsh = shutil.which("zsh")
    if zsh is None:
        raise Skip("zsh not installed (apt-get install zsh): only bash's completion checked")
    path = os.path.join(REPO, "completions", "_remora")
    rc, out, err = run([zsh, "-n", path], timeout=30)
    problems = []
    if rc != 0 or err.strip():
        problems.append("zsh -n: exit %d: %s" % (rc, tail(err)))
    text = open(path, encoding="utf-8").read()
    sampling = re.search(r"sampling=\((.*?)\n  \)", text, re.S)
    for cmd in COMMANDS:
        opts, help_text = help_of(remora, cmd)
        m = re.search(r"^    %s\)\n(.*?);;" % cmd, text, re.M | re.S)
        if m is None:
            problems.append("no block for %s" % cmd)
            continue
        block = m.group(1) + (sampling.group(1) if sampling and "$sampling" in m.group(1) else "")
        for o in opts:
            if o == "--":                       # the command to run: _normal after the options
                if "_normal" not in block:
                    problems.append("%s: nothing completes the command after --" % cmd)
            elif not re.search(r"(?<![\w-])%s(?![\w-])" % re.escape(o), block):
                problems.append("%s's block lacks %s" % (cmd, o))
        for name in formats_of(help_text) + modes_of(help_text):
            if not re.search(r"\b%s\b" % re.escape(name), text):
                problems.append("%s not offered" % name)
    if "_remora_pids" not in text or "/proc/" not in text:
        problems.append("-p does not complete pids")
    # the completion system itself, as a user's TAB drives it
    got = zsh_complete(zsh, "remora ")
    if set(COMMANDS) - set(got):
        problems.append("zsh: `remora ` offers %s" % got)
    for cmd in COMMANDS:
        opts, help_text = help_of(remora, cmd)
        got = zsh_complete(zsh, "remora %s -" % cmd)
        missing = sorted(set(opts) - set(got) - {"--"})
        if missing:
            problems.append("zsh: `remora %s -` lacks %s" % (cmd, ", ".join(missing)))
        if "-f" in opts and formats_of(help_text):
            got = zsh_complete(zsh, "remora %s -f " % cmd)
            if got != sorted(formats_of(help_text)):
                problems.append("zsh: `remora %s -f ` offers %s, --help names %s"
                                % (cmd, got, formats_of(help_text)))
        if cmd == "record":
            got = zsh_complete(zsh, "remora record --mode ")
            if got != sorted(modes_of(help_text)):
                problems.append("zsh: `remora record --mode ` offers %s" % got)
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        with Target(("host", HOST_PYTHON, None), os.path.join(TARGETS, "idle.py"), "ready") as t:
            t.wait_ready()
            got = zsh_complete(zsh, "remora dump -p ")
            if str(t.pid) not in got or str(sleeper.pid) in got:
                problems.append("zsh: `remora dump -p ` offers %s: want the Python target %d, "
                                "not sleep(1)'s %d" % (got[:10], t.pid, sleeper.pid))
    finally:
        sleeper.kill()
        sleeper.wait()
    if problems:
        raise Fail("; ".join(problems[:8]))
    return "zsh -n parses it; every --help option in its command's block and offered by " \
           "zsh's completion (zpty), -f the formats, --mode the modes, -p the Python pid"


# --- the Debian package -----------------------------------------------------------------

# Runs in a private mount namespace (unshare -m): an overlay of the test chroot (nothing
# written to it), /proc, the package's dependencies from the chroot's own archive, dpkg -i,
# then known_stacks.py under the chroot's python and the installed remora's dump.
# $1 chroot, $2 work dir (host), $3 the .deb, $4 python, $5 the target script.
DEB_SCRIPT = r'''
set -eu
lower=$1 w=$2 deb=$3 py=$4 script=$5
m=$w/root
mkdir -p "$w/upper" "$w/work" "$m"
mount -t overlay overlay -o "lowerdir=$lower,upperdir=$w/upper,workdir=$w/work" "$m"
mount -t proc proc "$m/proc"
cp /etc/resolv.conf "$m/etc/resolv.conf" 2>/dev/null || true
cp "$deb" "$m/tmp/remora.deb"
if chroot "$m" dpkg -s remora >/dev/null 2>&1; then echo "remora already in the chroot"; exit 3; fi
deps=$(dpkg-deb -f "$deb" Depends)
echo "Depends: $deps"
chroot "$m" apt-get -qq -o Acquire::Check-Valid-Until=false update >"$w/apt.log" 2>&1 || exit 4
chroot "$m" apt-get -qq -y --no-install-recommends satisfy "$deps" >>"$w/apt.log" 2>&1 || exit 5
chroot "$m" dpkg -i /tmp/remora.deb
chroot "$m" dpkg -s remora | grep -E '^(Status|Version):'
chroot "$m" sh -c 'command -v remora; remora --version'
mkdir -p "$m/tmp/t"
cp "$script" "$m/tmp/t/"
mkfifo "$w/stdin"
pid=
trap '[ -z "$pid" ] || kill -9 "$pid" 2>/dev/null || true' EXIT
chroot "$m" "$py" -I /tmp/t/known_stacks.py /tmp/t/truth.json < "$w/stdin" > "$w/target.log" 2>&1 &
pid=$!
exec 9>"$w/stdin"
n=0
until [ -e "$m/tmp/t/truth.json" ]; do
    kill -0 "$pid" 2>/dev/null || { echo "target exited"; exit 6; }
    n=$((n + 1)); [ $n -lt 3000 ] || { echo "target not ready"; exit 6; }
    sleep 0.01
done
n=0
until [ "$(cut -d' ' -f1,2 /proc/$pid/syscall)" = "0 0x0" ]; do
    n=$((n + 1)); [ $n -lt 3000 ] || { echo "target's main never read stdin"; exit 6; }
    sleep 0.01
done
echo "pid: $pid"
cp "$m/tmp/t/truth.json" "$w/truth.json"
rc=0
chroot "$m" remora dump -p "$pid" --json > "$w/dump.json" 2> "$w/dump.err" || rc=$?
echo "dump rc: $rc"
exec 9>&-
wait "$pid" || true
pid=
'''


def test_deb(remora):
    for tool in ("dpkg-buildpackage", "dh", "lintian", "unshare", "chroot"):
        if shutil.which(tool) is None:
            raise Skip("%s missing (apt-get install debhelper dpkg-dev lintian util-linux)"
                       % tool)
    missing = interp_missing(("sid", DEB_INTERP, CHROOT))
    if missing:
        raise Skip(missing)
    t0 = time.monotonic()
    work = tempfile.mkdtemp(prefix="remora-deb-")
    try:
        problems = []
        # a copy of the tree (tracked and new files, not the build's) outside the repo
        src = os.path.join(work, "remora")
        rc, out, err = run(["git", "-C", REPO, "ls-files", "-co", "--exclude-standard", "-z"])
        if rc != 0:
            raise Skip("not a git tree: %s" % tail(err))
        for rel in out.split("\0"):
            if rel and os.path.isfile(os.path.join(REPO, rel)):
                os.makedirs(os.path.dirname(os.path.join(src, rel)), exist_ok=True)
                shutil.copy2(os.path.join(REPO, rel), os.path.join(src, rel))
        env = dict(os.environ, DEB_BUILD_OPTIONS="parallel=2")
        rc, out, err = run(["dpkg-buildpackage", "-us", "-uc", "-b"], cwd=src, env=env,
                           timeout=300)
        if rc != 0:
            raise Fail("dpkg-buildpackage: exit %d: %s" % (rc, tail(out + err, 6)))
        built = time.monotonic() - t0
        version = version_file()
        debs = glob.glob(os.path.join(work, "remora_%s_*.deb" % version))
        if len(debs) != 1:
            raise Fail("no remora_%s_*.deb beside the tree: %s" % (version, os.listdir(work)))
        deb = debs[0]
        # lintian: clean, or each tag explained in docs/install.md
        changes = glob.glob(os.path.join(work, "remora_%s_*.changes" % version))
        rc, out, err = run(["lintian", "--pedantic", "-I", "-E", changes[0]], timeout=180)
        tags = sorted({l.split()[2] for l in out.splitlines() if re.match(r"^[EWIPX]: ", l)})
        explained = open(os.path.join(REPO, "docs", "install.md"), encoding="utf-8").read()
        unexplained = [t for t in tags if t not in explained]
        if unexplained or (rc != 0 and not tags):
            problems.append("lintian: exit %d, tags not explained in docs/install.md: %s %s"
                            % (rc, unexplained, tail(err)))
        rc, fields, _ = run(["dpkg-deb", "-f", deb, "Version", "Depends"])
        if "Version: %s" % version not in fields:
            problems.append("the package's version: %s" % fields)
        for lib in ("zlib1g", "libdw1", "libc6"):
            if not re.search(r"\b%s\b" % lib, fields):
                problems.append("Depends lacks %s: %s" % (lib, fields.strip()))
        rc, listing, _ = run(["dpkg-deb", "-c", deb])
        for path in ("./usr/bin/remora", "./usr/share/man/man1/remora.1.gz",
                     "./usr/share/bash-completion/completions/remora",
                     "./usr/share/zsh/vendor-completions/_remora"):
            if not re.search(r" %s$" % re.escape(path), listing, re.M):
                problems.append("the package lacks %s" % path)
        # dpkg -i in an overlay of the test chroot, the installed remora dumps a target
        box = os.path.join(work, "box")
        os.makedirs(box)
        rc, out, err = run(["unshare", "-m", "--propagation", "private", "bash", "-c",
                            DEB_SCRIPT, "bash", CHROOT, box, deb, DEB_INTERP,
                            os.path.join(TARGETS, "known_stacks.py")], timeout=240)
        log = (out + err).strip()
        if rc in (4, 5):
            apt = open(os.path.join(box, "apt.log"), errors="replace").read()
            if rc == 4:
                raise Skip("the chroot's archive cannot be reached (apt-get update): %s"
                           % tail(apt))
            raise Fail("the package's Depends cannot be met in the chroot: %s" % tail(apt, 6))
        if rc != 0:
            raise Fail("installing into the chroot: exit %d: %s" % (rc, tail(log, 8)))
        if "install ok installed" not in log or "/usr/bin/remora" not in log or \
                "remora %s" % version not in log:
            problems.append("dpkg -i / --version in the chroot: %s" % tail(log, 6))
        pid = int(re.search(r"^pid: (\d+)$", log, re.M).group(1))
        drc = int(re.search(r"^dump rc: (\d+)$", log, re.M).group(1))
        if drc != 0:
            problems.append("the installed remora's dump exited %d: %s" % (
                drc, tail(open(os.path.join(box, "dump.err"), errors="replace").read())))
        else:
            truth = json.load(open(os.path.join(box, "truth.json")))
            doc = parse_dump(open(os.path.join(box, "dump.json")).read())
            p, got, _ = dump_threads_problems(doc, truth, pid)
            more, diff = dump_frames_problems(got, truth)
            problems += p + more + (diff or [])[:6]
        if problems:
            raise Fail("; ".join(problems[:8]))
        deps = re.search(r"^Depends: (.*)$", log, re.M).group(1)
        return "built in %.0f s, lintian clean%s; Depends: %s; dpkg -i in an overlay of %s; " \
               "its remora dumped python3.15 exactly; %.0f s in all" % (
                   built, " but %s (explained)" % tags if tags else "", deps, CHROOT,
                   time.monotonic() - t0)
    finally:
        shutil.rmtree(work, ignore_errors=True)


# what only the test and fuzz binaries may hold (src/proc/snapshot.c, and what sits under
# #ifdef REMORA_TESTING)
TEST_ONLY = ("rec_new", "rec_free", "rec_mem", "rec_memv", "rec_maps", "rec_task", "rec_task_get",
             "rec_task_state", "rec_task_comm", "rec_elf", "rec_save", "rec_save_mem",
             "snapshot_open", "snapshot_open_mem", "snapshot_parse", "elf_trace_new",
             "elf_trace_free", "elf_trace_attach", "elf_trace_stub", "trace_lookup",
             "proc_open_snapshot", "proc_open_snapshot_mem", "proc_record_start",
             "proc_snapshot_save", "proc_snapshot_save_mem", "proc_open_core_mem", "core_open_mem",
             "proc_source_read", "elf_at", "tasks_walk_test", "native_count_frames")
# the library as `make lib` / `make python` build it
PRODUCT_LIBS = ("build-lib/libremora.a", "build-lib/libremora.so.0.1",
                "build-lib/python/remora/_remora.abi3.so")


def test_no_test_code(remora):
    defined = set()
    for path in glob.glob(os.path.join(REPO, "src", "*", "*.c")):
        with open(path, errors="replace") as f:
            defined.update(re.findall(r"^[A-Za-z_][\w \t*]*?\b(\w+)\(", f.read(), re.M))
    gone = [n for n in TEST_ONLY if n not in defined]
    if gone:
        raise Fail("no longer defined in src/ (renamed? update TEST_ONLY): %s" % ", ".join(gone))
    rc, out, err = run(["make", "-s", "-C", REPO, "lib"], timeout=900)
    if rc != 0:
        raise Fail("make lib: exit %d: %s" % (rc, tail(err)))
    files = [os.path.abspath(remora.path)] + [os.path.join(REPO, f) for f in PRODUCT_LIBS
                                               if os.path.exists(os.path.join(REPO, f))]
    problems, looked = [], []
    for f in files:
        rc, out, err = run(["nm", f])
        if rc != 0 or not out.strip():
            raise Fail("nm %s: exit %d, %d symbols: %s (stripped?)" % (f, rc, len(out.split()), tail(err)))
        names = {line.split()[-1] for line in out.splitlines() if line.strip() and ":" not in line}
        found = sorted(n for n in names if n.split(".")[0] in TEST_ONLY)
        if found:
            problems.append("%s holds %s" % (os.path.relpath(f, REPO), ", ".join(found)))
        looked.append("%s (%d symbols)" % (os.path.relpath(f, REPO), len(names)))
    if problems:
        raise Fail("test-only code in the product: " + "; ".join(problems))
    return "none of %d test-only names in %s" % (len(TEST_ONLY), ", ".join(looked))


def tests(remora):
    """[(name, function, skip reason or None)] for run.py."""
    return [
        ("install/version", lambda: test_version(remora), None),
        ("install/make-install", lambda: test_make_install(remora), None),
        ("install/manpage", lambda: test_manpage(remora), None),
        ("install/bash-completion", lambda: test_bash_completion(remora), None),
        ("install/zsh-completion", lambda: test_zsh_completion(remora), None),
        ("install/no-test-code", lambda: test_no_test_code(remora), None),
        ("install/deb", lambda: test_deb(remora), None),
    ]
