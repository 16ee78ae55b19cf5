# Judges of the functional tests: what a target can show, against what remora says of it:
# the stacks a chaos target's own source allows (roles of its threads), those of the
# alternate.py target (torn samples, the known defect's tolerance), a dump against a
# known_stacks.py truth, the odd names coming back exactly. Standard library only.

import ast
import collections
import difflib
import functools
import os
import re

from common import Fail

# a deep stack names the same few files again and again
basename = functools.lru_cache(maxsize=4096)(os.path.basename)

def check_odd_names(stacks, ready):
    """The odd thread and function must come back exactly, once unescaped."""
    names = {s.name for s in stacks if s.tid == ready["odd"]}
    if names != {ready["thread_name"]}:
        raise Fail("thread %d is named %r in the collapsed file, want %r"
                   % (ready["odd"], sorted(names), ready["thread_name"]))
    want = (ready["function"], ready["file"])
    if not any(f[:2] == want for s in stacks for f in s.frames):
        seen = sorted({f[:2] for s in stacks if s.tid == ready["odd"] for f in s.frames})
        raise Fail("no frame %r in the collapsed file; thread %d has %r"
                   % (want, ready["odd"], seen[-3:]))


# --- a target's source as ground truth (tests/targets/chaos_*.py) ------------------------

class Source:
    """A target script's functions (line spans) and calls: calls[(caller, callee)] is the
    set of lines of the plain calls caller makes to callee (every line of a multi-line
    call); '<module>' is the module body."""

    def __init__(self, script):
        with open(script, encoding="utf-8") as f:
            text = f.read()
        tree = ast.parse(text)
        self.base = os.path.basename(script)
        self.spans = {"<module>": (1, len(text.splitlines()))}
        self.calls = collections.defaultdict(set)
        self.imports = set()             # lines of the module's own import statements
        for node in tree.body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                self.imports.add(node.lineno)
            if isinstance(node, ast.FunctionDef):
                self.spans[node.name] = (node.lineno, node.end_lineno)
                self._calls(node.name, node)
            elif not isinstance(node, ast.ClassDef):
                self._calls("<module>", node)

    def _calls(self, caller, node):
        for n in ast.walk(node):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
                self.calls[(caller, n.func.id)].update(range(n.lineno, n.end_lineno + 1))


class Role:
    """What one thread of a target may show.
    roots: functions of the script that may be its outermost own frame;
    lead: file names whose frames may come before the script's (a threading.Thread's
          bootstrap: then the outermost frame must be _bootstrap);
    trail: file names whose frames may come after (innermost) the script's; "any": any
           file (a launched command, sampled while it writes its files at the start or end);
    alone: outermost functions of a stack made only of `lead`/`trail` files (e.g. the
           interpreter's threading._shutdown at exit); "any": a stack without a frame of
           the script may be anything (a launched command's main thread, while the
           interpreter starts: site, .pth files, importlib);
    imports: whether `<module>` on one of its import lines may have any frames inside
           (importlib and the imported module's; only a launched command is sampled
           that early);
    empty: whether the thread may have no frame at all (being born or torn down);
    forbidden: functions of the script this thread never runs;
    most: {function: most frames of it in one stack}."""

    def __init__(self, name, roots, lead=(), trail=(), alone=(), empty=False, forbidden=(),
                 most=None, imports=False):
        self.name, self.roots, self.lead, self.trail = name, set(roots), set(lead), set(trail)
        self.imports = imports
        self.alone, self.empty, self.forbidden = set(alone), empty, set(forbidden)
        self.most = most or {}


def bare(function):
    return function.rsplit(".", 1)[-1]


def judge_stack(frames, role, src):
    """None if a thread in `role` can have this stack (outermost first, as parsed from
    collapsed output), else what is wrong with it."""
    fr = list(frames)
    if fr and fr[-1][0] == "<GC>" and fr[-1][1] is None:
        fr = fr[:-1]
    if fr and fr[-1][0] == "<moving>" and fr[-1][1] is None:
        # a partial stack: the outer frames known, judged as the stack they begin
        fr = fr[:-1]
        if not fr:
            return None     # nothing known (the stack moved each time it was read): no claim
    if not fr:
        return None if role.empty else "an empty stack"
    for f in fr:
        if f[1] is None:
            return "frame %r has no file" % f[0]
    mine = [basename(f[1]) == src.base for f in fr]
    i = 0
    while i < len(fr) and not mine[i]:
        i += 1
    j = i
    while j < len(fr) and mine[j]:
        j += 1
    lead, own, trail = fr[:i], fr[i:j], fr[j:]
    if any(mine[j:]):
        return "the script's frames are interrupted by another file's"
    if not own:
        if role.alone == {"any"}:
            return None
        files = {os.path.basename(f[1]) for f in fr}
        if files - (role.lead | role.trail):
            return "frames of %s only" % ", ".join(sorted(files))
        if bare(fr[0][0]) not in role.alone and not (role.lead and bare(fr[0][0]) == "_bootstrap"):
            return "no frame of the script, and %s is outermost" % fr[0][0]
        return None
    if lead:
        files = {os.path.basename(f[1]) for f in lead}
        if files - role.lead:
            return "frames of %s before the script's" % ", ".join(sorted(files - role.lead))
        if bare(lead[0][0]) != "_bootstrap":
            return "%s is outermost, not threading's _bootstrap" % lead[0][0]
    if role.imports and not lead and [f[0] for f in own] == ["<module>"] and own[0][2] in src.imports:
        return None
    files = {os.path.basename(f[1]) for f in trail}
    if files - role.trail and role.trail != {"any"}:
        return "frames of %s inside the script's" % ", ".join(sorted(files - role.trail))
    if own[0][0] not in role.roots:
        return "%s is the script's outermost frame, want %s" % (own[0][0], " or ".join(sorted(role.roots)))
    counts = collections.Counter(f[0] for f in own)
    for fn, n in counts.items():
        if fn not in src.spans:
            return "%s is not a function of %s" % (fn, src.base)
        if fn in role.forbidden:
            return "%s, which this thread never runs" % fn
        if fn in role.most and n > role.most[fn]:
            return "%d frames of %s, at most %d are possible" % (n, fn, role.most[fn])
    for a, b in zip(own, own[1:]):
        lines = src.calls.get((a[0], b[0]))
        if not lines:
            return "%s -> %s: %s never calls %s" % (a[0], b[0], a[0], b[0])
        if a[2] not in lines:
            return "%s at line %d calls %s, which it does only on line %s" % (
                a[0], a[2], b[0], ", ".join(map(str, sorted(lines))))
    lo, hi = src.spans[own[-1][0]]
    # -1: an instruction with no line (CPython says None there too); 0: seen for a
    # module body finishing on 3.12
    if not lo <= own[-1][2] <= hi and not (not trail and (own[-1][2] == -1 or (
            own[-1][2] == 0 and own[-1][0] == "<module>"))):
        return "innermost %s at line %d, outside its lines %d-%d" % (own[-1][0], own[-1][2], lo, hi)
    return None


def judge_profile(stacks, roles, src, foreign=None, default=None):
    """Fail unless every stack fits the role of its thread. roles: {tid: [Role, ...]} (a
    tid reused by the kernel may have had more than one role); other tids get the roles
    in default, if given; foreign(tid) may name what an unexpected tid is (e.g. "a
    forked child"). Returns a Counter of samples by role name."""
    bad, examples, by_role = collections.Counter(), [], collections.Counter()
    for s in stacks:
        rs = roles.get(s.tid) or default
        if not rs:
            what = (foreign(s.tid) if foreign else None) or "a thread the target never had"
            why = "thread %d: %s" % (s.tid, what)
        else:
            whys = [judge_stack(s.frames, r, src) for r in rs]
            why = None if None in whys else "%s thread %d: %s" % (rs[0].name, s.tid, whys[0])
            if why is None:
                by_role[rs[whys.index(None)].name] += s.count
        if why:
            bad[why.split(":")[0]] += s.count
            if len(examples) < 3:
                examples.append("%s x%d [%s]" % (why, s.count, ";".join(
                    "%s:%s" % (f[0], f[2]) for f in s.frames)[-300:]))
    if bad:
        raise Fail("%d samples show stacks the target cannot have: %s" % (
            sum(bad.values()), " | ".join(examples)))
    return by_role


# chaos_recurse.py: two threads, main and the diver, recursing in dive()

def recurse_roles(ready):
    most = {"dive": ready["depth"] + 1}
    return {ready["main"]: [Role("main", ["<module>"], most=most)],
            ready["diver"]: [Role("diver", ["diver"], most=most)]}


def depth_note(stacks):
    """Samples with at least 400 dive frames, and with 1 to 99."""
    depths = [(sum(1 for f in s.frames if f[0] == "dive"), s.count) for s in stacks]
    return (sum(c for n, c in depths if n >= 400), sum(c for n, c in depths if 0 < n < 100))


# --- the alternate.py target (a->b->c, x->y->z): the stacks it can have -----------

CHAINS = (("a", "b", "c"), ("x", "y", "z"))
BASE = ["<module>", "main", "alternate"]


MOVING = "<moving>"


# A known defect of the user-space engine, not yet fixed (docs/how-it-reads.md, "Two copies
# torn alike"): on 3.12+
# when the machine reads slowly, about 1 to 4 samples in 100,000 of alternate.py are a
# caller of one chain under a callee of the other (`a;y`, `x;b`): both copies of the chunk
# torn the same way as the target moved from one chain to the other while they were read.
# Seen on the landed 05f0822 too. Such samples ("mixes the chains" only, never any other
# kind) are tolerated up to one in TORN_TOLERATED samples and always named in the PASS
# line; any other wrong stack, or more of them, fails. 1 in 10,000: a fresh-machine run
# (2026-12-02, 30 us of CPU per sample, 60-88% of samples partial) saw 1, 3 and 5 in
# about 120,000 on three interpreters; at 4 in 100,000 a run of 120,000 goes past 12 in
# under 1% of runs, past the former 1 in 25,000 (4.8) in about a third.
# The kernel engine reads a running thread while it cannot move: no tolerance there
# (issue 29), whatever share of its rounds went to user space.
TORN_TOLERATED = 10000


def torn_verdict(bad, examples, samples, engine):
    """(problem or None, note or "") for a recording's torn samples (bad: Counter by kind),
    recorded with the engine the summary named."""
    if not bad:
        return None, ""
    mixed = bad.get("mixes the chains", 0)
    if engine == "user" and mixed == sum(bad.values()) and mixed <= samples // TORN_TOLERATED:
        return None, ("KNOWN DEFECT: %d of %d samples mix the chains (two copies torn alike; "
                      "tolerated: 1 in %d), e.g. %s" % (mixed, samples, TORN_TOLERATED,
                                                        " | ".join(examples)))
    return ("%d torn or wrong samples (%s); e.g. %s" % (
        sum(bad.values()), ", ".join("%s: %d" % kv for kv in bad.items()), " | ".join(examples))), ""


def torn_kind(functions):
    """None if functions is a stack the alternate.py target can have, else what is wrong.
    A partial stack (its innermost frames moved while read) is one such stack's outer
    frames, then <moving>: judged as that prefix."""
    if functions and functions[-1] == "<GC>":
        functions = functions[:-1]
    if functions and functions[-1] == MOVING:
        # <module> and main never move (main sits in its call of alternate): a partial
        # stack keeps them at least
        functions = functions[:-1]
        if len(functions) < 3:
            # the marker alone: nothing of the stack known, nothing claimed
            return None if functions in ([], BASE[:2]) else "a partial stack without its root"
    chain_names = set(CHAINS[0]) | set(CHAINS[1])
    inner = [f for f in functions if f in chain_names]
    used = [i for i, ch in enumerate(CHAINS) if set(inner) & set(ch)]
    if len(used) > 1:
        return "mixes the chains"
    if functions[:3] != BASE:
        return "does not start with <module>;main;alternate"
    rest = functions[3:]
    if not rest:
        return None
    chain = CHAINS[used[0]] if used else None
    if chain is None or rest != list(chain[:len(rest)]):
        return "chain out of order or foreign frames" if chain else "foreign frames"
    return None


# --- a dump against a target's truth -----------------------------------------------------

def version_matches(reported, truth):
    """remora's "python" must be the target's version; a pre-release tag may be omitted."""
    if reported == truth:
        return True
    m = re.match(r"\d+\.\d+\.\d+", truth)
    return m is not None and reported == m.group(0)


def simple_frames(frames):
    """A dump's frames with only function, file and line, as a target's truth has them."""
    return [{"function": f.get("function"), "file": f.get("file"), "line": f.get("line")}
            for f in frames]


def frame_line(i, f):
    return "#%-3d %s (%s:%s)" % (i, f.get("function"), f.get("file"), f.get("line"))


def dump_threads_problems(doc, truth, pid):
    """(problems, {tid: dumped thread}, {tid: truth's thread}) of a dump against a
    known_stacks.py truth: its pid and python version, threads missing or unexpected."""
    problems = []
    if doc.get("pid") != pid:
        problems.append("pid is %r, want %d" % (doc.get("pid"), pid))
    if not version_matches(str(doc.get("python")), truth["python"]):
        problems.append("python is %r, want %r" % (doc.get("python"), truth["python"]))
    got = {th.get("native_id"): th for th in doc["threads"]}
    want = {th["native_id"]: th for th in truth["threads"]}
    missing, extra = sorted(set(want) - set(got)), sorted(set(got) - set(want), key=str)
    if missing:
        problems.append("threads missing: %s" % ", ".join(
            "%d (%s)" % (n, want[n]["name"]) for n in missing))
    if extra:
        problems.append("unexpected threads: %s" % ", ".join(map(str, extra)))
    return problems, got, want


def dump_frames_problems(got, truth, lost_stacks=False):
    """(problems, diff lines of the first thread whose frames differ, or None): each
    truth thread's `main` flag and frames, exactly. With lost_stacks, a worker thread
    may instead report an error and no frames."""
    problems, diff, differing = [], None, []
    for th in truth["threads"]:
        g = got.get(th["native_id"])
        if g is None:
            continue
        label = "%d (%s)" % (th["native_id"], th["name"])
        if g.get("main") is not th["main"]:
            problems.append("thread %s: main is %r, want %r" % (label, g.get("main"), th["main"]))
        if lost_stacks and not th["main"] and g.get("error") and not g.get("frames"):
            continue
        if simple_frames(g.get("frames", [])) != th["frames"]:
            differing.append(label)
            if diff is None:
                diff = ["thread %s: %d frames in truth, %d from remora"
                        % (label, len(th["frames"]), len(g.get("frames", [])))]
                diff += thread_diff(th, g)
    if differing:
        problems.append("frames differ in thread%s %s" % (
            "s" if len(differing) > 1 else "", ", ".join(differing)))
    return problems, diff


def thread_diff(t_truth, t_got):
    a = [frame_line(i, f) for i, f in enumerate(t_truth["frames"])]
    b = [frame_line(i, f) for i, f in enumerate(t_got.get("frames", []))]
    diff = list(difflib.unified_diff(a, b, "truth", "remora", lineterm="", n=2))
    if len(diff) > 40:
        diff = diff[:40] + ["... (%d more diff lines)" % (len(diff) - 40)]
    return diff

