# The node tools of the functional tests: speedscope's schema (tests/speedscope) and the
# Firefox Profiler (tests/firefox), their npm packages installed when missing (`npm ci`);
# one check of tests/browser/run.mjs in headless Chromium. Standard library only.

import os
import re
import shutil
import subprocess

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
