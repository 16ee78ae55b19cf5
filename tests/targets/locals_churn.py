# A thread that rebinds its locals as fast as it can, for `remora dump --locals` reading
# values that change (and objects freed) while they are read (locals_tests.py). Writes
# argv[1] ({"native_id": N}) once it runs; the main thread reads stdin (EOF: exit).
import json
import os
import sys
import threading

OUT = sys.argv[1]


def churn(started):
    i = 0
    while True:
        num = i * 1000003
        text = "v%d" % i
        pair = [i, text]
        table = {i: text, "k": [i]}
        tup = (i, (i,))
        flt = i / 7
        i += 1
        if i == 1000:
            started.set()


started = threading.Event()
t = threading.Thread(target=churn, args=(started,), name="churner", daemon=True)
t.start()
started.wait()
with open(OUT + ".tmp", "w") as f:
    json.dump({"native_id": t.native_id}, f)
os.rename(OUT + ".tmp", OUT)
sys.stdin.buffer.read()
