# Target for the launch-mode tests of commands that are not Python themselves (runs on
# CPython 3.9-3.15), started by a shell: `remora record ... -- sh -c "...; python
# grandchild.py OUT SECONDS; exit N"` (a grandchild of remora), or exec'd by one.
#
# As soon as it runs, writes OUT (temp + rename) with its own pid, its main thread's
# native id and the function it is about to spin in: a test that measures how remora
# waited reads the file's appearance as "Python runs now". Then it spends SECONDS of CPU
# (thread_time) in grandchild_spin, called from grandchild_main, and exits 0.

import json
import os
import sys
import threading
import time


def grandchild_spin(seconds):
    end = time.thread_time() + seconds      # CPU time: a busy machine cannot shorten it
    while time.thread_time() < end:
        pass


def grandchild_main():
    out, seconds = sys.argv[1], float(sys.argv[2])
    truth = {"pid": os.getpid(), "tid": threading.get_native_id(),
             "function": grandchild_spin.__name__, "caller": grandchild_main.__name__}
    with open(out + ".tmp", "w") as f:
        json.dump(truth, f)
    os.rename(out + ".tmp", out)
    grandchild_spin(seconds)


grandchild_main()
