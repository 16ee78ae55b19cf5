# Target for the subinterpreter tests (CPython 3.9-3.15, wherever a subinterpreter can run
# code: _xxsubinterpreters.run_string on 3.9-3.12, _interpreters.exec on 3.13+).
#
# Parks three threads at known stacks:
#   main      the main interpreter's main thread, in read(0) (EOF on stdin ends it)
#   plain     a thread of the main interpreter, parked in os.read() on a pipe
#   switcher  a thread that enters a subinterpreter (enter_sub -> run_string/exec) whose
#             code parks in os.read() on a pipe: a thread state in each interpreter
# Each interpreter's code records its own frames (sys._getframe() walk, innermost first,
# the line of the blocking call) with the interpreter id the target itself reports
# (create()'s result, get_current() inside the subinterpreter), the subinterpreter's
# through a pipe the main thread reads. Then the main thread writes the truth to argv[1]
# (temp + rename) and parks:
#   {"pid": N, "threads": [{"native_id": N, "interpreter": I, "role": "...", "main": bool,
#     "frames": [{"function", "file", "line"}, ...innermost first]}]}
# With no subinterpreter module (or one that cannot run code) it writes
# {"skip": "why"} instead.

import json
import os
import sys
import threading

try:
    import _interpreters as subi
except ImportError:
    try:
        import _xxsubinterpreters as subi
    except ImportError:
        subi = None

QUALNAME = sys.version_info >= (3, 11)


def frames_of(f, stop=None):
    out = []
    while f is not None and f is not stop:
        co = f.f_code
        name = co.co_qualname if QUALNAME else co.co_name
        out.append({"function": name, "file": co.co_filename, "line": f.f_lineno})
        f = f.f_back
    return out


def note(truth, lock, role, frames):
    with lock:
        truth.append({"native_id": threading.get_native_id(), "role": role, "frames": frames})


def park_plain(block_r, truth, lock):
    note(truth, lock, "plain", frames_of(sys._getframe())); os.read(block_r, 1)


def thread_plain(block_r, truth, lock):
    park_plain(block_r, truth, lock)


SUB_CODE = """\
import json, os, sys, threading
QUALNAME = sys.version_info >= (3, 11)
def sub_report():
    f = sys._getframe(1)
    frames = []
    while f is not None:
        co = f.f_code
        frames.append({"function": co.co_qualname if QUALNAME else co.co_name,
                       "file": co.co_filename, "line": f.f_lineno})
        f = f.f_back
    iid = None
    for name in ("_interpreters", "_xxsubinterpreters"):
        try:
            mod = __import__(name)
        except ImportError:
            continue
        cur = mod.get_current()
        iid = int(cur[0] if isinstance(cur, tuple) else cur)
        break
    msg = json.dumps({"native_id": threading.get_native_id(), "current": iid,
                      "frames": frames}).encode()
    os.write(%(report_w)d, msg + b"\\n")

class Worker:
    def sub_leaf(self):
        sub_report(); os.read(%(block_r)d, 1)

def sub_mid():
    Worker().sub_leaf()

sub_mid()
"""


def enter_sub(iid, code):
    return (subi.exec if hasattr(subi, "exec") else subi.run_string)(iid, code)


def note_switch(truth, lock, f):
    note(truth, lock, "switcher", [{"function": "enter_sub", "file": f.f_code.co_filename,
                                    "line": enter_sub.__code__.co_firstlineno + 1}]
         + frames_of(f))


def thread_switcher(iid, code, truth, lock, made):
    if iid is None:
        iid = made[0] = subi.create()
        made[1].set()
    note_switch(truth, lock, sys._getframe()); enter_sub(iid, code)


def write_truth(path, doc):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f)
    os.rename(tmp, path)


def write_main(out, doc, main_id, f):
    doc["threads"].append({"native_id": threading.get_native_id(), "interpreter": main_id,
                           "role": "main", "main": True, "frames": frames_of(f)})
    write_truth(out, doc)


def park_main(out, doc, main_id):
    write_main(out, doc, main_id, sys._getframe()); sys.stdin.read()


def main():
    out = sys.argv[1]
    if subi is None:
        write_truth(out, {"skip": "no _interpreters or _xxsubinterpreters module"})
        sys.stdin.read()
        return
    # Before 3.13, run_string() runs code in the subinterpreter's first thread state,
    # made by the thread that created it, whichever thread calls it: that state names
    # its creator's thread (CPython's own account; remora cannot know better). So there
    # the switcher makes the interpreter it enters.
    made = [None, threading.Event()]
    if sys.version_info >= (3, 13):
        try:
            made[0] = subi.create()
        except Exception as e:                  # e.g. built without subinterpreter support
            write_truth(out, {"skip": "cannot create a subinterpreter: %r" % (e,)})
            sys.stdin.read()
            return
    main_cur = subi.get_main()
    main_id = int(main_cur[0] if isinstance(main_cur, tuple) else main_cur)
    block_r, block_w = os.pipe()
    report_r, report_w = os.pipe()
    truth, lock = [], threading.Lock()
    code = SUB_CODE % {"report_w": report_w, "block_r": block_r}

    plain = threading.Thread(target=thread_plain, args=(block_r, truth, lock))
    plain.start()
    switcher = threading.Thread(target=thread_switcher, args=(made[0], code, truth, lock, made))
    switcher.start()
    if made[0] is None:
        made[1].wait()
    iid = int(made[0][0] if isinstance(made[0], tuple) else made[0])
    line = b""
    while not line.endswith(b"\n"):
        chunk = os.read(report_r, 65536)
        if not chunk:
            break
        line += chunk
    sub = json.loads(line.decode())
    threads = []
    with lock:
        for t in truth:
            threads.append(dict(t, interpreter=main_id, main=False))
    threads.append({"native_id": sub["native_id"], "interpreter": iid, "role": "sub",
                    "main": False, "current": sub["current"], "frames": sub["frames"]})
    doc = {"pid": os.getpid(), "python": sys.version.split()[0], "threads": threads}
    park_main(out, doc, main_id)
    os.write(block_w, b"xx")                    # let both parked readers go
    switcher.join()
    plain.join()


if __name__ == "__main__":
    main()
