# Target for the --blocking tests (runs on CPython 3.9-3.15): counts the real-time signals
# (SIGRTMIN, which queue: none is merged with another) delivered to it, one byte each on
# the wakeup fd the interpreter's C handler writes to, while its main thread runs Python
# code (spin) and a second thread sleeps in C. Writes argv[1] (temp + rename) once ready:
#   {"pid": N}
# and on each line "count K" on stdin writes argv[1] + ".count": {"seq": K, "signals": N};
# exits 0 at EOF.

import json
import os
import select
import signal
import sys
import threading


def write(path, doc):
    with open(path + ".tmp", "w") as f:
        json.dump(doc, f)
    os.rename(path + ".tmp", path)


def spin(n):
    x = 0
    for i in range(n):
        x += i
    return x


def main():
    r, w = os.pipe()
    os.set_blocking(w, False)
    signal.set_wakeup_fd(w)
    signal.signal(signal.SIGRTMIN, lambda *args: None)
    threading.Thread(target=select.select, args=([os.pipe()[0]], [], []), daemon=True).start()
    write(sys.argv[1], {"pid": os.getpid()})
    count = 0
    stdin = sys.stdin.buffer.raw
    pending = b""
    while True:
        spin(2000)
        ready = select.select([stdin, r], [], [], 0)[0]
        if r in ready:
            count += len(os.read(r, 65536))
        if stdin in ready:
            data = os.read(stdin.fileno(), 4096)
            if not data:
                break
            pending += data
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                if line.startswith(b"count "):
                    while select.select([r], [], [], 0)[0]:
                        count += len(os.read(r, 65536))
                    write(sys.argv[1] + ".count", {"seq": int(line.split()[1]), "signals": count})


main()
