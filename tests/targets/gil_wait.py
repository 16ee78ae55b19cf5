# Target of library/gil-requested/* (tests/functional/library_tests.py): a thread that
# waits for the GIL, for as long as the test looks (runs on CPython 3.9-3.15).
#
#   main     writes the truth and waits for one byte on stdin (the test sends it once it
#            has seen parked in read(2)); then holds the GIL for good: it calls libc's
#            write() and then read(0) through ctypes.PyDLL, whose calls keep the GIL, so
#            it sits in read(0) holding it until stdin's EOF
#   waiter   blocked in os.read() on a pipe (GIL released); main's write() wakes it and it
#            asks for the GIL back: it waits in take_gil() from then on. The switch interval
#            is 1000 s, so it does not even ask main to drop it within a test's time
#   parked   blocked in os.read() on a pipe nobody writes (GIL released, not asking for
#            it)
# The truth (argv[1], temp + rename): {"pid", "python", "roles": {role: native id}}.

import ctypes
import json
import os
import sys
import threading
import time

ROLES = {}
R, W = os.pipe()
NEVER, _NEVER_W = os.pipe()       # parked reads it: nothing ever comes
LIBC = ctypes.PyDLL(None)         # PyDLL: the GIL is kept across each call


def parked():
    ROLES["parked"] = threading.get_native_id()
    os.read(NEVER, 1)


def waiter():
    ROLES["waiter"] = threading.get_native_id()
    os.read(R, 1)


def version_string():
    v = sys.version_info
    s = "%d.%d.%d" % (v.major, v.minor, v.micro)
    if v.releaselevel != "final":
        s += {"alpha": "a", "beta": "b", "candidate": "rc"}[v.releaselevel] + str(v.serial)
    return s


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: gil_wait.py TRUTH_PATH")
    path = sys.argv[1]
    sys.setswitchinterval(1000)
    for fn in (parked, waiter):
        threading.Thread(target=fn, name=fn.__name__, daemon=True).start()
    deadline = time.monotonic() + 20
    while len(ROLES) < 2:
        if time.monotonic() > deadline:
            sys.exit("gil_wait: the threads never started")
        time.sleep(0.002)
    ROLES["main"] = threading.get_native_id()
    truth = {"pid": os.getpid(), "python": version_string(), "roles": ROLES}
    with open(path + ".tmp", "w") as f:
        json.dump(truth, f)
    os.rename(path + ".tmp", path)
    # the test's byte once it has seen parked in read(2) (a chroot has no /proc to look)
    os.read(0, 1)
    # from here main keeps the GIL: waiter, woken by the byte, waits for it
    buf = ctypes.create_string_buffer(1)
    LIBC.write(W, b"x", 1)
    LIBC.read(0, buf, 1)


main()
