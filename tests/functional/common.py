# The functional tests' basics, imported by every other module of tests/functional/: where
# the repository and the targets are, the two outcomes a test raises besides passing (Fail,
# Skip), and the short forms of a command's output a message quotes. Standard library only.

import os

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
TARGETS = os.path.join(REPO, "tests", "targets")


class Fail(Exception):
    pass


class Skip(Exception):
    pass


def tail(text, n=3):
    lines = [l for l in text.strip().splitlines() if l.strip()]
    return " | ".join(lines[-n:]) if lines else "(empty)"


def one_line(err):
    """None if err is exactly one non-empty line, else a description of what it is."""
    lines = err.splitlines()
    if len(lines) == 1 and lines[0].strip():
        return None
    if not lines:
        return "stderr is empty"
    return "stderr has %d lines: %s" % (len(lines), " | ".join(lines[:4]))


def script(name):
    """The path of tests/targets/NAME."""
    return os.path.join(TARGETS, name)

