# Target for the chaos fork test (runs on CPython 3.9-3.15).
#
#   chaos_fork.py READY_PATH [FORKS]
#
# The main thread forks children over and over (fork_loop); each child runs Python code
# of its own (child_main -> child_work -> leaf, functions the parent never calls) and
# ends, by os._exit(0) or, one child in three, by sys.exit(0) through the interpreter's
# normal finalization. Between forks the parent works in parent_work -> leaf and then
# reaps the child (os.waitpid). A bare _thread thread spins in spinner -> leaf all the
# time, so every fork happens with a second thread running. The parent's stacks are
# therefore <module> -> main -> fork_loop [-> parent_work -> leaf] and
# spinner [-> leaf]; a frame of child_main, child_work or a thread id other than these
# two would be a child's, wrongly shown as the parent's.
# After the first child is reaped it writes READY_PATH (temp + rename):
#   {"pid": N, "main": TID, "spinner": TID}
# and, at the end, children.json beside it: {"children": [PID...]}. It polls stdin
# between forks and ends at EOF or, if FORKS is given, after FORKS forks (exit 0).

import _thread
import json
import os
import select
import sys
import threading
import warnings


def leaf(n):
    s = 0
    for i in range(n):
        s += i
    return s


def child_work(n):
    leaf(n)
    return n


def child_main(k):
    child_work(2000 + 500 * (k % 7))
    if k % 3 == 2:
        sys.exit(0)
    os._exit(0)


def parent_work(k):
    leaf(1000 + 300 * (k % 5))


def spinner(tids, state):
    tids.append(threading.get_native_id())
    while not state["stop"]:
        leaf(500)


def write_json(path, doc):
    tmp = path + ".tmp"
    f = open(tmp, "w")
    f.write(json.dumps(doc))
    f.close()
    os.rename(tmp, path)


def fork_loop(ready, forks, tids, state):
    stdin = sys.stdin.buffer.raw
    children = []
    k = 0
    while forks == 0 or k < forks:
        pid = os.fork()
        if pid == 0:
            child_main(k)
        children.append(pid)
        parent_work(k)
        os.waitpid(pid, 0)
        k += 1
        if k == 1:
            write_json(ready, {"pid": os.getpid(), "main": threading.get_native_id(),
                               "spinner": tids[0]})
        if forks == 0 and select.select([stdin], [], [], 0)[0] and not os.read(stdin.fileno(), 4096):
            break
    write_json(os.path.join(os.path.dirname(ready), "children.json"), {"children": children})


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: chaos_fork.py READY_PATH [FORKS]")
    # 3.12+ warns when a process with threads forks; the warning is not under test
    warnings.simplefilter("ignore")
    tids = []
    state = {"stop": False}
    _thread.start_new_thread(spinner, (tids, state))
    while not tids:
        leaf(100)
    fork_loop(sys.argv[1], int(sys.argv[2]) if len(sys.argv) == 3 else 0, tids, state)
    state["stop"] = True


main()
