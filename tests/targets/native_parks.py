# Target of the --native tests (CPython 3.9-3.15): four threads parked in C at known
# points, each called from a known Python function, and the main thread reading stdin.
#
#   pauser    py_outer -> py_pause -> libc pause() through ctypes
#   qsorter   py_qsort -> libc qsort() -> (ctypes callback) py_cmp -> os.read on a pipe
#   keysorter py_sorted -> sorted() (the C sort) -> py_key -> os.read on a pipe
#   sleeper   py_sleep -> time.sleep
#   jitter    py_jit -> code in an anonymous executable mapping (as a JIT's: no file, no
#             CFI; it keeps a frame pointer) -> libc pause() (x86_64 only)
#
# Each thread says it is about to park (an Event) just before its blocking call. Then
# argv[1] is written (temp + rename): {"pid", "threads": {NAME: {"tid", "python": [the
# thread's Python functions from sys._current_frames(), innermost first]}}} (the C
# functions between them are the ones named above; the tests know them). EOF on stdin
# ends it (the parked threads are daemons).
import ctypes
import ctypes.util
import json
import mmap
import os
import platform
import sys
import threading
import time

libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
CMP = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int))
libc.qsort.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, CMP]
libc.qsort.restype = None
libc.pause.argtypes = []

rd, wr = os.pipe()                  # never written: readers park there
tids = {}
JIT = platform.machine() == "x86_64"
ready = {name: threading.Event() for name in ("pauser", "qsorter", "keysorter", "sleeper") +
         (("jitter",) if JIT else ())}


def arrive(name):
    tids[name] = threading.get_native_id()
    ready[name].set()


def py_pause():
    arrive("pauser")
    libc.pause()


def py_outer():
    py_pause()


def py_cmp(a, b):
    arrive("qsorter")
    os.read(rd, 1)
    return a[0] - b[0]


def py_qsort():
    arr = (ctypes.c_int * 4)(3, 1, 2, 0)
    libc.qsort(arr, 4, ctypes.sizeof(ctypes.c_int), CMP(py_cmp))


def py_key(x):
    arrive("keysorter")
    os.read(rd, 1)
    return x


def py_sorted():
    return sorted([3, 1, 2], key=py_key)


def py_sleep():
    arrive("sleeper")
    time.sleep(3600)


def py_jit():
    # push rbp; mov rbp, rsp; call rdi; pop rbp; ret: calls its argument, in memory that
    # no file backs
    code = bytes([0x55, 0x48, 0x89, 0xE5, 0xFF, 0xD7, 0x5D, 0xC3])
    m = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    m.write(code)
    addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
    stub = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)(addr)
    arrive("jitter")
    stub(ctypes.cast(libc.pause, ctypes.c_void_p).value)


for name, fn in (("pauser", py_outer), ("qsorter", py_qsort), ("keysorter", py_sorted),
                 ("sleeper", py_sleep)) + ((("jitter", py_jit),) if JIT else ()):
    threading.Thread(target=fn, name=name, daemon=True).start()
for e in ready.values():
    e.wait()

idents = {t.native_id: t.ident for t in threading.enumerate()}
frames = sys._current_frames()
doc = {"pid": os.getpid(), "threads": {}}
for name, tid in tids.items():
    f, fns = frames[idents[tid]], []
    while f is not None:
        fns.append(f.f_code.co_name)
        f = f.f_back
    doc["threads"][name] = {"tid": tid, "python": fns}
with open(sys.argv[1] + ".tmp", "w") as out:
    json.dump(doc, out)
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
sys.stdin.read()
