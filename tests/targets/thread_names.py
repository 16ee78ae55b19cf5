# Target for tests/functional/names_tests.py (runs on CPython 3.9-3.15): threads whose
# Python names (threading.Thread(name=...)) remora must show instead of the kernel's.
#
# Threads named NAMES (ASCII; non-ASCII in all of UCS-1/2/4; 200 characters; one with
# characters collapsed stacks and JSON escape), one named BEFORE that is renamed to AFTER,
# and one started with _thread.start_new_thread (not in threading's registry: remora
# names it as the kernel does). Each waits on an event, parked, except the renamed one,
# which runs Python code. Once all run, main writes argv[1] (temp + rename):
#   {"pid": N, "threads": [{"native_id": TID, "name": S}, ...],   (threading.enumerate())
#    "raw": TID, "raw_name": S (its comm), "renamed": TID}
# argv[2] says what follows:
#   hold    each line on stdin "rename" renames the thread to AFTER and writes
#           argv[1] + ".renamed" (the same JSON, after); EOF ends it;
#   phases  (under `remora record -- ...`) the thread runs as BEFORE for PHASE seconds of
#           the target's own clock, is renamed, writes argv[1] + ".renamed", runs as AFTER
#           for PHASE seconds more, and the target exits.

import _thread
import json
import os
import sys
import threading
import time

NAMES = ["worker-ascii", "caf\u00e9-\u5de5\u4f5c-\U0001f9f5", "N" * 99 + "\u00e9" + "n" * 100,
         'odd;na\\me "q" <b>&amp;']
BEFORE, AFTER = "before-rename", "after-r\u00e9name"
PHASE = 1.5                 # three times remora's period of reading the registry (0.5 s)


def comm(tid):
    try:
        with open("/proc/self/task/%d/comm" % tid) as f:
            return f.read().rstrip("\n")
    except OSError:
        return None


def own_comm():
    """The calling thread's kernel name by prctl(PR_GET_NAME): a chroot has no /proc."""
    try:
        import ctypes
        buf = ctypes.create_string_buffer(16)
        if ctypes.CDLL(None, use_errno=True).prctl(16, buf, 0, 0, 0) == 0:
            return buf.value.decode("utf-8", "replace")
    except (ImportError, OSError, AttributeError):
        pass
    return None


def truth(info):
    info["threads"] = [{"native_id": t.native_id, "name": t.name} for t in threading.enumerate()]
    return info


def write(path, info):
    with open(path + ".tmp", "w") as f:
        json.dump(truth(info), f)
    os.rename(path + ".tmp", path)


def main():
    path, mode = sys.argv[1], sys.argv[2]
    forever = threading.Event()
    started = threading.Barrier(len(NAMES) + 3)
    stop = threading.Event()
    info = {"pid": os.getpid()}

    def park():
        started.wait()
        forever.wait()

    def spin():
        started.wait()
        n = 0
        while not stop.is_set():
            n = (n * 31 + 7) % 1000003

    def raw():
        info["raw"] = _thread.get_native_id()
        info["raw_comm"] = own_comm()
        started.wait()
        forever.wait()

    threads = [threading.Thread(target=park, name=n, daemon=True) for n in NAMES]
    renamed = threading.Thread(target=spin, name=BEFORE, daemon=True)
    for t in threads + [renamed]:
        t.start()
    _thread.start_new_thread(raw, ())
    started.wait()
    info["renamed"] = renamed.native_id
    info["raw_name"] = comm(info["raw"]) or info["raw_comm"]
    write(path, info)
    if mode == "hold":
        for line in sys.stdin:
            if line.strip() == "rename":
                renamed.name = AFTER
                write(path + ".renamed", info)
        return
    t0 = time.monotonic()
    while time.monotonic() - t0 < PHASE:
        pass
    renamed.name = AFTER
    write(path + ".renamed", info)
    t0 = time.monotonic()
    while time.monotonic() - t0 < PHASE:
        pass
    stop.set()


main()
