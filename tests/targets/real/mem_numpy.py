# Memory real-program target (tests/functional/memory_real_tests.py): numpy allocating
# arrays, each site of its own keeping what it makes.
#
#   python mem_numpy.py READY
#
# work(n) runs n steps; each keeps fresh arrays at five sites of its own, all made by
# numpy's C functions (the innermost Python frame is the site itself): a frame of random
# samples (768 KB of float64), a float32 copy of it scaled (384 KB), an int64 ramp
# (192 KB), a mask of it (96 KB of bool) and a short int64 ramp (40 KB). Nothing kept is
# freed, no temporary is made, so every array allocated is fresh memory written at once
# (allocation == growth); arrays over glibc's mmap threshold are mapped anew each time
# (none reaches 2 MB, where a huge page could hold it on a machine set to "always").
# tracemalloc sees numpy's data through PyTraceMalloc_Track. The window, tracemalloc and
# READY: memwindow.py, copied beside it.

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))    # -I leaves it out
import memwindow                                                  # noqa: E402

rng = np.random.default_rng(49)
FRAMES, SCALED, RAMPS, MASKS, IDS = [], [], [], [], []


def load_frame():
    FRAMES.append(rng.random(96_000))


def scale_frame():
    SCALED.append(np.multiply(FRAMES[-1], 0.5, dtype=np.float32))


def make_ramp():
    RAMPS.append(np.arange(24_000, dtype=np.int64))


def mask_frame():
    MASKS.append(np.greater(FRAMES[-1], 0.5))


def make_ids():
    IDS.append(np.arange(5_000, dtype=np.int64))


def work(n):
    for _ in range(n):
        load_frame()
        scale_frame()
        make_ramp()
        mask_frame()
        make_ids()


if __name__ == "__main__":
    memwindow.run(sys.modules[__name__], lambda: work(5), {"numpy": np.__version__})
