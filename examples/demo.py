"""A small multi-threaded program for remora's demo: a worker pool computing,
a thread waiting on I/O, and the main thread idling. With an argument, it writes
its pid to that file once every thread is running."""
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
    r, _w = os.pipe()
    for i in range(2):
        Worker(name=f"worker-{i}", daemon=True).start()
    threading.Thread(target=wait_for_input, args=(r,), name="reader", daemon=True).start()
    if len(sys.argv) > 1:
        with open(sys.argv[1] + ".tmp", "w") as f:
            f.write(str(os.getpid()))
        os.rename(sys.argv[1] + ".tmp", sys.argv[1])
    while True:
        time.sleep(1)


if __name__ == "__main__":
    main()
