# Target of native/dlopen (CPython 3.9-3.15): a library loaded after remora attached.
# argv[1] is written (temp + rename) with {"pid"} when it is ready; then it reads a line
# from stdin: the path of a shared object whose block() calls pause(). It loads it
# (ctypes), writes argv[1] + ".parked" with {"tid"} and calls it from py_block, which
# never returns: EOF on stdin then ends it (the caller is a daemon thread).
import ctypes
import json
import os
import sys
import threading


def write(path, doc):
    with open(path + ".tmp", "w") as f:
        json.dump(doc, f)
    os.rename(path + ".tmp", path)


def py_block(lib):
    write(sys.argv[1] + ".parked", {"tid": threading.get_native_id()})
    lib.block()


write(sys.argv[1], {"pid": os.getpid()})
path = sys.stdin.readline().strip()
lib = ctypes.CDLL(path)
threading.Thread(target=py_block, args=(lib,), daemon=True).start()
sys.stdin.read()
