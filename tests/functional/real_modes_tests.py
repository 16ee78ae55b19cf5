# Real programs in the modes other than wall (issue 48): real_tests.py's programs and
# judgement, every recording of a program made in one mode.
#
#   real-mode/MODE/PROGRAM/INTERP   MODE gil, exception or native (--native, wall mode);
#       PROGRAM one where the mode means something: gil on Django (its ORM's sqlite
#       calls let the GIL go) and the thread pool (four workers contending for the GIL;
#       hashlib digests without it), exception on Django (its templates' variable
#       lookups handle exceptions: ~50 samples a second; the pool's workers handle none
#       that a --blocking recording of 3.11 finds), native on numpy (its C loops under
#       Python frames), async on aiohttp (--async: a task per connection, and on Debian's
#       3.11, aiohttp 3.8, one per request that runs and ends between two drains; at most
#       real_tests.UNKNOWN_MAX % of the task samples <task>). The default engine's
#       recording (the kernel's: SKIP naming the notice line when it is not used here) and
#       two `--blocking` ones in the same mode (the reference A and the floor's B: the
#       target held still, its threads read from user space; for --native the
#       stop-the-world read of C stacks), one after another, RATE Hz for SECONDS s each.
#
# Asserted: at most PARTIAL_MAX % of the default engine's samples partial (issue 48's
# bound, tighter than issue 29's 1%); where --blocking leaves the program as it is (Django,
# numpy: one thread that computes) the leaf TV and inclusive differences against A within
# their floors (B against A) plus issue 29's margins, as real_tests.py judges them; the
# target's clock where the mode's samples are a share of the wall time it measures
# (native, which is wall mode). A gil-mode sample is one of the thread holding the GIL and
# an exception-mode one of a thread inside an except block: shares the target's clock of
# wall time does not give, so their truth here is the --blocking reference. The pool's
# comparisons are reported, not asserted (--blocking changes its scheduling: the header
# of real_tests.py).
#
# make test runs a pair of interpreters per case (Debian's static 3.11 and sid 3.15: two
# layouts, two GIL layouts); REMORA_REAL_MODES_ALL=1 runs every interpreter real_tests.py
# runs (3.13 and 3.14 too).

import os

from harness import INTERPRETERS, interp_missing
import real_tests as R

ORDER = 331
TIMED = ("real-mode/",)

PARTIAL_MAX = 0.1
INTERPS = R.REAL_INTERPS if os.environ.get("REMORA_REAL_MODES_ALL") == "1" else \
    ("debian-3.11-static", "sid-3.15")
# --async in make test on Debian's 3.11 alone (aiohttp 3.8's task per request; sid's aiohttp
# names its tasks through 3.15's lists, and async-record/kernel/* cover 3.13-3.15): time
ASYNC_INTERPS = INTERPS if os.environ.get("REMORA_REAL_MODES_ALL") == "1" else ("debian-3.11-static",)
# (mode, the flags of every recording, whether the target's clock is its truth, programs)
MODES = (("gil", ("--mode", "gil"), False, ("django", "threadpool")),
         ("exception", ("--mode", "exception"), False, ("django",)),
         ("native", ("--native",), True, ("numpy",)),
         ("async", ("--async",), True, ("aiohttp",)))


def tests(remora):
    """[(name, function, skip reason or None)] for run.py."""
    return [("real-mode/%s/%s/%s" % (mode, p[0], i[0]),
             lambda i=i, p=p, f=flags, c=clock: R.test_real(remora, i, *p[1:], flags=f, clock=c,
                                                              partial_max=PARTIAL_MAX),
             interp_missing(i))
            for mode, flags, clock, programs in MODES
            for p in R.PROGRAMS if p[0] in programs
            for i in INTERPRETERS if i[0] in INTERPS and (mode != "async" or i[0] in ASYNC_INTERPS)]
