# Target for the chaos exit tests (runs on CPython 3.9-3.15): a program that ends by
# itself, at a moment the test picks, while remora samples it.
#
#   chaos_exit.py READY_PATH DELAY HOW
#
# The main thread and two daemon threading threads spin: main in main_loop -> work ->
# leaf, the threads in thread_loop -> work -> leaf (below threading.py's bootstrap
# frames). When the first round is done main writes READY_PATH (temp + rename):
# {"pid": N, "main": TID, "threads": [TID, TID]}; DELAY seconds later (perf_counter) it
# ends, as HOW says:
#   return   main returns: the interpreter finalizes (threading._shutdown runs), exit 0
#   exit3    sys.exit(3) from main_loop, exit 3
#   thread   a daemon thread calls os._exit(5) mid-work, exit 5
#   kill     main SIGKILLs its own process, exit -9
# No comprehensions, lambdas or with-blocks: every call of this file is a plain call.

import json
import os
import signal
import sys
import threading
import time


def leaf(n):
    s = 0
    for i in range(n):
        s += i
    return s


def work(n):
    return leaf(n)


def thread_loop(state, me):
    state["tids"][me] = threading.get_native_id()
    while True:
        work(200)
        if state["thread_exit"] and me == 1:
            os._exit(5)


def main_loop(ready, delay, how):
    state = {"tids": [0, 0], "thread_exit": False}
    threads = []
    for me in range(2):
        threads.append(threading.Thread(target=thread_loop, args=(state, me), daemon=True))
    for t in threads:
        t.start()
    while state["tids"][0] == 0 or state["tids"][1] == 0:
        work(100)
    tmp = ready + ".tmp"
    f = open(tmp, "w")
    f.write(json.dumps({"pid": os.getpid(), "main": threading.get_native_id(),
                        "threads": state["tids"]}))
    f.close()
    os.rename(tmp, ready)
    deadline = time.perf_counter() + delay
    while time.perf_counter() < deadline:
        work(300)
    if how == "exit3":
        sys.exit(3)
    if how == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if how == "thread":
        state["thread_exit"] = True
        while True:
            work(300)


def main():
    if len(sys.argv) != 4 or sys.argv[3] not in ("return", "exit3", "thread", "kill"):
        sys.exit("usage: chaos_exit.py READY_PATH DELAY return|exit3|thread|kill")
    main_loop(sys.argv[1], float(sys.argv[2]), sys.argv[3])


main()
