# record --mode memory on real programs against tracemalloc (issue 49, "Real programs";
# docs/cli.md "Memory").
#   memory/real/PROGRAM/INTERP   PROGRAM one of tests/targets/real/mem_*.py (numpy: arrays
#       kept; leak: a response cache growing without bound and four other things kept;
#       django: ORM results on an in-memory sqlite database kept), INTERP Debian's 3.11
#       (static) and the chroot's 3.13 and 3.15, each where the package imports (else SKIP
#       naming the import error). The target takes tracemalloc snapshots itself around a
#       window (a "go N" line: work(N)) and writes compare_to(..., "traceback") by site: each
#       difference's bytes to the innermost frame of the target's own file, its line mapped
#       to its function through the target's code objects (memwindow.py). remora records
#       --mode memory over the whole window, at the default fault period (Django's small
#       window at --fault-period 16); its samples under the target's work() are
#       given, by the innermost frame of the target's file, to the same sites. Truth: the
#       top sites agree: for each of tracemalloc's TOP largest sites and every other site,
#       when tracemalloc's bytes of the two differ by more than SIGMAS binomial standard
#       deviations of remora's sample counts (n samples, shares p and q: sd of the count
#       difference sqrt(n (p + q - (p - q)^2))), remora orders them the same way. The
#       targets keep what they allocate, fresh memory written at once, so allocation is
#       growth: tracemalloc's question and remora's have the same answer (memory reused
#       after a free would be allocation without growth; a pymalloc arena emptied, given
#       back and faulted in again, growth without allocation: why mem_django.py renders
#       no template in the window). What still differs, and is tracemalloc's own memory,
#       which its account leaves out: its entry for each live block (~100 bytes), so a
#       site of many small blocks (the leak's remember_user, 18 a call) has a few points
#       more of remora's bytes than of tracemalloc's; the order test allows for it where
#       sites differ by more than that. Each test runs in 5-10 s.
import functools
import os
import shutil
import subprocess

from formats import parse_collapsed
from harness import (TARGETS, Fail, Recording, Skip, Target, interp_command, program_tests, tail,
                     target_says, workdir)

ORDER = 326           # after memory_tests

REAL = os.path.join(TARGETS, "real")
MEMWINDOW = os.path.join(REAL, "memwindow.py")
INTERPS = ("debian-3.11-static", "sid-3.13", "sid-3.15")
# (test name, script, module whose import says whether the package runs, window's work(N),
# --fault-period: None for the default, 64 faults of 4 KiB; Django's window grows ~8 MiB,
# some 30 samples at the default, too few to order five sites: every 16th fault there)
PROGRAMS = (("numpy", "mem_numpy.py", "numpy", 100, None),
            ("leak", "mem_leak.py", "os", 3000, None),
            ("django", "mem_django.py", "django", 15, 16))
TOP = 5
SIGMAS = 3.0
PAGE = 4096
DEFAULT_PERIOD = 64


def import_problem(interp, module):
    """None if interp imports module, else the import error's last line."""
    p = subprocess.run(interp_command(interp, ["-I", "-c", "import " + module]),
                       stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=60)
    if p.returncode == 0:
        return None
    return tail(p.stdout.decode("utf-8", "replace"), 1)


def remora_sites(path, own, work, sample_bytes):
    """({site: samples}, samples outside work()) of a collapsed memory profile: each stack
    under the target's work() to the innermost frame of the target's file (own)."""
    sites, outside = {}, 0
    for st in parse_collapsed(path):
        if st.count % sample_bytes:
            raise Fail("a count of %d bytes, not a multiple of the sample's %d"
                       % (st.count, sample_bytes))
        n = st.count // sample_bytes
        if not any(f[0] == work and f[1] == own for f in st.frames):
            outside += n
            continue
        site = [f[0] for f in st.frames if f[1] == own][-1]
        sites[site] = sites.get(site, 0) + n
    return sites, outside


def order_problems(truth, got, n):
    """Pairs (a, b), a among truth's TOP largest sites, which truth says differ by more than
    SIGMAS sampling deviations of n samples and got (samples) orders the other way or as
    equal: a list of sentences."""
    total = float(sum(v for v in truth.values() if v > 0))
    share = {s: max(v, 0) / total for s, v in truth.items()}
    ranked = sorted(share, key=lambda s: -share[s])
    bad = []
    for a in ranked[:TOP]:
        for b in set(ranked) | set(got):
            p, q = share.get(a, 0.0), share.get(b, 0.0)
            if b == a or p <= q:
                continue
            sd = (n * (p + q - (p - q) ** 2)) ** 0.5
            if n * (p - q) > SIGMAS * sd and got.get(a, 0) <= got.get(b, 0):
                bad.append("%s (%.1f%% of tracemalloc's bytes, %d samples) not over %s "
                           "(%.1f%%, %d samples)" % (a, 100 * p, got.get(a, 0), b, 100 * q,
                                                     got.get(b, 0)))
    return bad


def test_real(remora, interp, script, module, n, period):
    if os.environ.get("REMORA_TEST_ENGINE") == "user":
        raise Skip("REMORA_TEST_ENGINE=user: this run has no kernel engine to judge")
    why = import_problem(interp, module)
    if why is not None:
        raise Skip("%s does not import %s: %s" % (interp[0], module, why))
    d = workdir()
    rec = None
    try:
        with Target(interp, os.path.join(REAL, script), "ready.json", support=[MEMWINDOW]) as t:
            ready = t.wait_ready()
            out = os.path.join(d, "m.collapsed")
            sample_bytes = (period or DEFAULT_PERIOD) * PAGE
            rec = Recording(remora, ["-p", ready["pid"], "--mode", "memory", "-o", out] + (
                ["--fault-period", period] if period else []))
            rec.wait_sampled()
            truth = target_says(t, "go %d" % n, 1)
            rec.proc.send_signal(2)
            rc, _, err = rec.finish()
            if rc != 0:
                raise Fail("record --mode memory exited %d: %s" % (rc, tail(err)))
            got, outside = remora_sites(out, ready["file"], ready["work"], sample_bytes)
            samples = sum(got.values())
            if samples == 0:
                raise Fail("no sample under work(): %d outside; %s" % (outside, tail(err)))
            sites = truth["sites"]
            ranked = sorted(sites, key=lambda s: -sites[s])
            rows = ["%s %.1f%%/%.1f%%" % (s, 100.0 * got.get(s, 0) / samples,
                                          100.0 * max(sites[s], 0) / sum(max(v, 0) for v in sites.values()))
                    for s in ranked[:TOP]]
            others = sorted((s for s in got if s not in ranked[:TOP]), key=lambda s: -got[s])
            rows += ["%s %.1f%%/-" % (s, 100.0 * got[s] / samples) for s in others[:2]]
            bad = order_problems(sites, got, samples)
            note = ("%s (remora/tracemalloc); %.1f MiB sampled under work(), tracemalloc %.1f MiB "
                    "(%.1f MiB beyond its frames)" % ("; ".join(rows), samples * sample_bytes / 1048576.0,
                                                     truth["total"] / 1048576.0,
                                                     truth["beyond"] / 1048576.0))
            if bad:
                raise Fail("%s: %s" % ("; ".join(bad), note))
            return note
    finally:
        if rec is not None:
            rec.close()
        shutil.rmtree(d, ignore_errors=True)


def tests(remora):
    """[(name, function, skip reason or None)] for run.py."""
    return program_tests("memory/real", PROGRAMS, INTERPS, functools.partial(test_real, remora))
