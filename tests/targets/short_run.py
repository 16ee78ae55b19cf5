# Target for the record launch-mode test (runs on CPython 3.9-3.15), started by
# `remora record ... -- python short_run.py CODE`.
#
# Reads one line from stdin and prints "got: LINE" (upper-cased) to stdout, spends WORK
# seconds of CPU (thread_time) in brief_work, then ends: CODE "kill" kills itself with
# SIGKILL, any other CODE is its exit status (sys.exit).

import os
import signal
import sys
import time

WORK = 0.04


def brief_work():
    end = time.thread_time() + WORK          # CPU time: a busy machine cannot shorten it
    while time.thread_time() < end:
        pass


def main():
    line = sys.stdin.readline()
    sys.stdout.write("got: %s\n" % line.strip().upper())
    sys.stdout.flush()
    brief_work()
    if sys.argv[1] == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    sys.exit(int(sys.argv[1]))


main()
