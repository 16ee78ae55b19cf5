# Target for the record torn-stack test (runs on CPython 3.9-3.15).
#
# The main thread alternates two short call chains, a -> b -> c and x -> y -> z, as fast
# as it can. Every stack it can have is therefore <module> -> main -> alternate, followed
# by a prefix of one chain (or nothing, between calls); a sample that mixes the chains or
# breaks their order was torn by the reader. After the first round it writes argv[1]
# (temp + rename): {"pid": N, "main": TID}; it polls stdin every ROUNDS alternations and
# exits at EOF.

import json
import os
import select
import sys
import threading

ROUNDS = 2000


def a():
    b()


def b():
    c()


def c():
    pass


def x():
    y()


def y():
    z()


def z():
    pass


def alternate(ready):
    stdin = sys.stdin.buffer.raw
    announced = False
    while True:
        for _ in range(ROUNDS):
            a()
            x()
        if not announced:
            tmp = ready + ".tmp"
            with open(tmp, "w") as f:
                json.dump({"pid": os.getpid(), "main": threading.get_native_id()}, f)
            os.rename(tmp, ready)
            announced = True
        if select.select([stdin], [], [], 0)[0] and not os.read(stdin.fileno(), 4096):
            return


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: alternate.py READY_PATH")
    alternate(sys.argv[1])


main()
