# The interpreters the functional tests run, every path of one in this one place: pyenv's
# 3.9-3.13 (and 3.7, 3.8, which remora refuses), Debian's static 3.11 and the host's python3,
# and 3.13-3.15 (PIE and not) in the test chroot (REMORA_CHROOT); which of them this run
# uses (REMORA_INTERPRETERS) and how a command line runs one. Standard library only.

import os
import shutil

CHROOT = os.environ.get("REMORA_CHROOT", "/var/cache/remora/sid")
HOST_PYTHON = "/usr/bin/python3"
PYENV = "/root/.pyenv/versions"

# (name, interpreter path as the target sees it, chroot root or None)
INTERPRETERS = [
    ("pyenv-3.9.18", PYENV + "/3.9.18/bin/python3.9", None),
    ("pyenv-3.10.13", PYENV + "/3.10.13/bin/python3.10", None),
    ("pyenv-3.11.7", PYENV + "/3.11.7/bin/python3.11", None),
    ("pyenv-3.12.1", PYENV + "/3.12.1/bin/python3.12", None),
    ("pyenv-3.13.0", PYENV + "/3.13.0/bin/python3.13", None),
    ("debian-3.11-static", "/usr/bin/python3.11", None),
    ("sid-3.13", "/usr/bin/python3.13", CHROOT),
    ("sid-3.13-pie", "/usr/bin/python3.13-pie", CHROOT),
    ("sid-3.14", "/usr/bin/python3.14", CHROOT),
    ("sid-3.14-pie", "/usr/bin/python3.14-pie", CHROOT),
    ("sid-3.15", "/usr/bin/python3.15", CHROOT),
    ("sid-3.15-pie", "/usr/bin/python3.15-pie", CHROOT),
]

# Pythons older than remora reads (errors/unsupported-version/*): (version, path)
OLD_PYTHONS = [("3.8", PYENV + "/3.8.18/bin/python3.8"), ("3.7", PYENV + "/3.7.16/bin/python3.7")]


def interpreter(name):
    """The entry of INTERPRETERS named name."""
    return next(i for i in INTERPRETERS if i[0] == name)


def interp_command(interp, args):
    """The command line running interp's python with args (through chroot(8) for an
    interpreter of the test chroot)."""
    name, python, root = interp
    return ([python] if not root else ["chroot", root, python]) + list(args)


# REMORA_INTERPRETERS (names, comma-separated): a run on those alone, the others' tests
# said skipped by name (make asan: one of each minor version and kind, see the Makefile)
ONLY_INTERPRETERS = [n for n in os.environ.get("REMORA_INTERPRETERS", "").split(",") if n]


def interp_missing(interp):
    name, python, root = interp
    if ONLY_INTERPRETERS and name not in ONLY_INTERPRETERS:
        return "not in this run's interpreters (REMORA_INTERPRETERS=%s)" % ",".join(ONLY_INTERPRETERS)
    if root:
        if not os.path.isdir(root):
            return "chroot %s missing (create it with tests/provision-chroot.sh)" % root
        if shutil.which("chroot") is None:
            return "chroot(8) not installed"
    if not os.access((root or "") + python, os.X_OK):
        return "interpreter %s not found%s" % (python, " in chroot " + root if root else "")
    return None


def program_tests(prefix, programs, names, fn):
    """[(PREFIX/PROGRAM/INTERP, test, skip reason or None)] for run.py: each program (a
    tuple, its name first) on each interpreter of INTERPRETERS named in names, in that
    order; the test calls fn(interp, *the program's other items)."""
    return [("%s/%s/%s" % (prefix, p[0], i[0]), lambda i=i, p=p: fn(i, *p[1:]), interp_missing(i))
            for p in programs for i in INTERPRETERS if i[0] in names]

