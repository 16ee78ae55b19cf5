# Target of the --native tests on the kernel engine (CPython 3.9-3.15): a thread that
# RUNS (a tick samples threads on a CPU) in Python called back from C, in a known order:
#
#   spinner   py_spin -> py_qsort -> libc qsort() -> (ctypes callback) py_cmp -> py_work
#
# py_work and py_cmp are Python; between py_cmp and py_qsort lie the C frames of the
# callback (libffi's closure, ctypes' _CallPythonObject...), glibc's sort and ctypes' call.
# py_work counts its iterations: the target's own work rate.
#
# Once the spinner has run py_work, argv[1] is written (temp + rename): {"pid", "tid",
# "python": [the spinner's Python functions as sys._getframe() gives them in py_work,
# innermost first]}. Then each line N on stdin writes argv[1] + ".countN" (temp + rename):
# {"count": iterations so far, "t": time.monotonic()}; EOF on stdin ends it.
import ctypes
import ctypes.util
import json
import os
import sys
import threading
import time

libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
CMP = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int))
libc.qsort.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, CMP]
libc.qsort.restype = None

count = [0]
truth = {}
arrived = threading.Event()


def py_work():
    if not arrived.is_set():
        f, fns = sys._getframe(), []
        while f is not None:
            fns.append(f.f_code.co_name)
            f = f.f_back
        truth.update(tid=threading.get_native_id(), python=fns)
        arrived.set()
    x = 0
    for i in range(20):
        x += i
    count[0] += 1
    return x


def py_cmp(a, b):
    py_work()
    return a[0] - b[0]


def py_qsort():
    arr = (ctypes.c_int * 32)(*range(32, 0, -1))
    cmp = CMP(py_cmp)
    libc.qsort(arr, 32, ctypes.sizeof(ctypes.c_int), cmp)


def py_spin():
    while True:
        py_qsort()


threading.Thread(target=py_spin, name="spinner", daemon=True).start()
arrived.wait()


def put(path, doc):
    with open(path + ".tmp", "w") as out:
        json.dump(doc, out)
    os.rename(path + ".tmp", path)


put(sys.argv[1], {"pid": os.getpid(), "tid": truth["tid"], "python": truth["python"]})
for line in sys.stdin:
    put(sys.argv[1] + ".count" + line.strip(), {"count": count[0], "t": time.monotonic()})
