# Target for the chaos thread-churn test (runs on CPython 3.9-3.15).
#
# The main thread starts and joins short-lived threads as fast as it can, in batches:
# four threading.Thread threads running thread_worker and two bare _thread threads
# running raw_worker; each worker records its native id and spends a moment in leaf.
# So a worker's stack is only ever threading.py's bootstrap frames (threading threads)
# followed by thread_worker -> leaf, or raw_worker -> leaf (bare threads), or nothing
# (being born or torn down); the main thread's is <module> -> main -> churn followed
# by threading.py / _weakrefset.py frames (start, join, Thread.__init__). No
# comprehensions, lambdas or with-blocks: every call of this file is a plain call.
# After the first batch it writes argv[1] (temp + rename): {"pid": N, "main": TID}; it
# polls stdin between batches and at EOF writes truth.json beside argv[1]:
#   {"main": TID, "thread_workers": [TID...], "raw_workers": [TID...], "batches": N}

import _thread
import json
import os
import select
import sys
import threading


def leaf(n):
    s = 0
    for i in range(n):
        s += i
    return s


def thread_worker(tids, n):
    tids.append(threading.get_native_id())
    leaf(n)


def raw_worker(tids, n, done):
    tids.append(threading.get_native_id())
    leaf(n)
    done.release()


def write_json(path, doc):
    tmp = path + ".tmp"
    f = open(tmp, "w")
    f.write(json.dumps(doc))
    f.close()
    os.rename(tmp, path)


def churn(ready):
    stdin = sys.stdin.buffer.raw
    thread_tids, raw_tids = [], []
    batches = 0
    while True:
        threads, locks = [], []
        for i in range(4):
            threads.append(threading.Thread(target=thread_worker, args=(thread_tids, 100 * (i + 1))))
        for t in threads:
            t.start()
        for i in range(2):
            done = _thread.allocate_lock()
            done.acquire()
            _thread.start_new_thread(raw_worker, (raw_tids, 150 * (i + 1), done))
            locks.append(done)
        for t in threads:
            t.join()
        for done in locks:
            done.acquire()
        batches += 1
        if batches == 1:
            write_json(ready, {"pid": os.getpid(), "main": threading.get_native_id()})
        if select.select([stdin], [], [], 0)[0] and not os.read(stdin.fileno(), 4096):
            break
    write_json(os.path.join(os.path.dirname(ready), "truth.json"),
               {"main": threading.get_native_id(), "thread_workers": thread_tids,
                "raw_workers": raw_tids, "batches": batches})


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: chaos_churn.py READY_PATH")
    churn(sys.argv[1])


main()
