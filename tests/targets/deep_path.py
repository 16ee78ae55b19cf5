# Target for top's narrow-terminal test (runs on CPython 3.9-3.15): functions that live in
# a file at the end of a long path, as an installed package's do. It writes a module into
# DIR/site-packages/a_rather_long_package_name/.../module_with_long_name.py (DIR: the
# directory of argv[1]), imports it, and runs two threads in it: one parked in
# deep_wait() on a lock the main thread holds, one spinning in deep_spin(). Then it
# writes argv[1] (temp + rename):
#   {"pid": N, "file": the module's path, "wait_line": the line deep_wait is parked on,
#    "wait_tid": N, "spin_tid": N}
# and the main thread blocks reading stdin until EOF.

import json
import os
import sys
import threading

MODULE = '''import threading

def deep_wait(lock, ready):
    ready.set()
    lock.acquire()                       # WAIT-LINE


def deep_spin(ready):
    ready.set()
    n = 0
    while True:
        n += 1
'''


def main():
    top = os.path.dirname(os.path.abspath(sys.argv[1]))
    d = os.path.join(top, "site-packages", *(["a_rather_long_package_name"] * 4), "subpackage")
    os.makedirs(d)
    path = os.path.join(d, "module_with_long_name.py")
    with open(path, "w") as f:
        f.write(MODULE)
    sys.path.insert(0, d)
    import module_with_long_name as m
    lock = threading.Lock()
    lock.acquire()
    tids, ready = {}, [threading.Event(), threading.Event()]

    def run(name, fn, *args):
        tids[name] = threading.get_native_id()
        fn(*args)

    threading.Thread(target=run, args=("wait", m.deep_wait, lock, ready[0]), daemon=True).start()
    threading.Thread(target=run, args=("spin", m.deep_spin, ready[1]), daemon=True).start()
    for e in ready:
        e.wait()
    line = next(i for i, l in enumerate(MODULE.splitlines(), 1) if l.endswith("# WAIT-LINE"))
    with open(sys.argv[1] + ".tmp", "w") as f:
        json.dump({"pid": os.getpid(), "file": m.__file__, "wait_line": line,
                   "wait_tid": tids["wait"], "spin_tid": tids["spin"]}, f)
    os.rename(sys.argv[1] + ".tmp", sys.argv[1])
    sys.stdin.read()


main()
