# The node tools of the functional tests: speedscope's schema (tests/speedscope) and the
# Firefox Profiler (tests/firefox: its command-line client reads a profile's call trees),
# their npm packages installed when missing (`npm ci`); one check of tests/browser/run.mjs
# in headless Chromium. Standard library only.

import collections
import json
import os
import re
import shutil
import subprocess
import uuid

from common import REPO, Fail, Skip, tail


def browser_check(node, name, args):
    """Runs `node tests/browser/run.mjs ARGS`, whose check NAME prints one PASS, FAIL or
    SKIP line: its note when it passed; Skip with its reason, or Fail."""
    p = subprocess.run([node, os.path.join(REPO, "tests", "browser", "run.mjs")] + args,
                       stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=120)
    out = p.stdout.decode("utf-8", "replace")
    m = re.search(r"^(PASS|FAIL|SKIP) %s(?:: | \()?(.*?)\)?$" % re.escape(name), out, re.M)
    if m is None:
        raise Fail("run.mjs exited %d without a result: %s" % (p.returncode, tail(out, 4)))
    if m.group(1) == "SKIP":
        raise Skip(m.group(2))
    if m.group(1) == "FAIL" or p.returncode != 0:
        raise Fail("in Chromium: %s" % m.group(2))
    return m.group(2)

def npm_ci(directory, needed):
    """Installs the npm packages of directory (`npm ci`); None if `needed` (a path among
    them) is there after, else why not."""
    rel = os.path.relpath(directory, REPO)
    npm = shutil.which("npm")
    if npm is None:
        return "%s/node_modules missing and npm not installed" % rel
    p = subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=directory,
                       stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=300)
    if p.returncode != 0 or not os.path.exists(needed):
        return "`npm ci` in %s failed: %s" % (rel, tail(p.stdout.decode("utf-8", "replace")))
    return None


SPEEDSCOPE_DIR = os.path.join(REPO, "tests", "speedscope")
_validator = {}


def speedscope_validator():
    """The command that validates speedscope files, installing tests/speedscope's packages
    (`npm ci`) if they are missing; Skip when that cannot be done."""
    if "cmd" in _validator:
        return _validator["cmd"]
    if "skip" in _validator:
        raise Skip(_validator["skip"])
    node = shutil.which("node")
    validate = os.path.join(SPEEDSCOPE_DIR, "validate.js")
    schema = os.path.join(SPEEDSCOPE_DIR, "node_modules", "speedscope", "dist", "release",
                          "file-format-schema.json")
    reason = None
    if node is None:
        reason = "node not installed (apt-get install nodejs npm)"
    elif not (os.path.exists(schema) and
              os.path.isdir(os.path.join(SPEEDSCOPE_DIR, "node_modules", "ajv"))):
        reason = npm_ci(SPEEDSCOPE_DIR, schema)
    if reason:
        _validator["skip"] = reason
        raise Skip(reason)
    _validator["cmd"] = [node, validate]
    return _validator["cmd"]


FIREFOX_DIR = os.path.join(REPO, "tests", "firefox")
PROFILER_CLI = os.path.join(FIREFOX_DIR, "node_modules", "@firefox-devtools", "profiler-cli", "dist",
                            "profiler-cli.js")


def profiler_cli():
    """[node, profiler-cli.js], installing tests/firefox's package if missing; Skip when
    that cannot be done."""
    node = shutil.which("node")
    if node is None:
        raise Skip("node not installed")
    if not os.path.exists(PROFILER_CLI):
        reason = npm_ci(FIREFOX_DIR, PROFILER_CLI)
        if reason:
            raise Skip(reason)
    return [node, PROFILER_CLI]


def self_paths(node, path, out):
    """Counter of name paths (root first) of a profiler-cli call tree, by self samples (its
    selfSamples: the samples' weights summed, bytes in a memory profile)."""
    here = path + (node["name"],) if path is not None else ()
    if node.get("selfSamples"):
        out[here] += node["selfSamples"]
    for ch in node.get("children", []):
        self_paths(ch, here, out)


def profiler_call_trees(cli, gecko, home):
    """The profile gecko as the Firefox Profiler's own code reads it, through its client
    cli (profiler_cli()) in a session of its own, HOME=home: {tid: Counter of name paths by
    self samples (self_paths)}, a thread with none left out. Fail if the client fails."""
    session = "remora-" + uuid.uuid4().hex[:8]
    env = dict(os.environ, HOME=home)

    def run(args, timeout=120):
        p = subprocess.run(cli + args + ["--session", session], stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout, env=env)
        text = p.stdout.decode("utf-8", "replace")
        if p.returncode != 0:
            raise Fail("`profiler-cli %s` exited %d: %s" % (" ".join(args[:2]), p.returncode, tail(text, 4)))
        return text

    try:
        run(["load", gecko])
        got = {}
        for th in json.loads(run(["thread", "list", "--json"]))["threads"]:
            tree = json.loads(run(["thread", "samples-top-down", "--thread", th["threadHandle"],
                                   "--include-idle", "--max-lines", "100000", "--json"]))
            c = collections.Counter()
            self_paths(tree["regularCallTree"], None, c)
            if sum(c.values()):
                got[th["tid"]] = c
        return got
    finally:
        try:
            subprocess.run(cli + ["stop", "--session", session], stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30, env=env)
        except (OSError, subprocess.TimeoutExpired):
            pass
