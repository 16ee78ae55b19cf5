"""A small multi-threaded program for remora's demo: workers computing, a thread
waiting on I/O, and the main thread idling.

    python3 demo.py [SECONDS] [--ready FILE]

Runs for SECONDS (default: until killed); with --ready, writes its pid to FILE once
every thread is running."""
import os
import sys
import threading
import time


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


class Worker(threading.Thread):
    def run(self):
        while True:
            self.crunch()

    def crunch(self):
        fib(18)


def wait_for_input(r):
    os.read(r, 1)


def main():
    args = sys.argv[1:]
    ready = None
    if "--ready" in args:
        at = args.index("--ready")
        ready = args[at + 1]
        del args[at:at + 2]
    seconds = float(args[0]) if args else float("inf")
    r, _w = os.pipe()
    for i in range(2):
        Worker(name=f"worker-{i}", daemon=True).start()
    threading.Thread(target=wait_for_input, args=(r,), name="reader", daemon=True).start()
    if ready:
        with open(ready + ".tmp", "w") as f:
            f.write(str(os.getpid()))
        os.rename(ready + ".tmp", ready)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(min(1, max(0, end - time.monotonic())))


if __name__ == "__main__":
    main()
