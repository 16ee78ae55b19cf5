/* tests/unit/unit_kern.c — unit tests of the kernel engine's side in the unwinder
 * (unwind/kernel.c): what the gil and exception modes read, and the weight of a thread's
 * time off a CPU. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "remora.h"
#include "kern/kern.h"
#include "unwind/internal.h"
#include "unit.h"

/* The kernel engine's reading of what gil and exception modes ask (unw_kern_reads): every
 * table version's GIL and exception state readable; a layout without them refused in one
 * phrase naming the mode, the other mode unaffected; the exception walk never on in the
 * layout itself (the default's tick reads nothing more: kern_sync_threads turns it on). */
void test_kern_reads(void)
{
    int minor;

    for (minor = 9; minor <= 12; minor++) {
        const py_layout_t *L = py_layout_for_minor(minor);
        py_target_t T;
        unwinder_t u;
        kern_layout_t kl;
        char why[256] = "";
        if (L == NULL)
            continue;
        memset(&T, 0, sizeof T);
        memset(&u, 0, sizeof u);
        T.layout = *L;
        py_layout_derive(&T.layout);
        T.runtime = 0x7f0000001000ull;
        T.none = 0x7f0000002000ull;
        snprintf(T.version, sizeof T.version, "3.%d", minor);
        u.target = &T;
        CHECK(unw_kern_reads(&u, 1, 0, why, sizeof why) == REMORA_OK, "3.%d gil: %s", minor, why);
        CHECK(unw_kern_reads(&u, 0, 1, why, sizeof why) == REMORA_OK, "3.%d exception: %s", minor, why);
        CHECK(unw_kern_layout(&T, &kl, why, sizeof why) == REMORA_OK && kl.exc_on == 0 &&
              kl.ts_exc_info != 0 && kl.exc_none == T.none && kl.ts_interp != 0,
              "3.%d: the layout's GIL and exception offsets, the walk off", minor);
        T.layout.gil_holder = 0;
        CHECK(unw_kern_reads(&u, 1, 0, why, sizeof why) == REMORA_EVERSION &&
              strstr(why, "--mode gil") != NULL && strchr(why, '\n') == NULL,
              "3.%d without the GIL's holder: gil refused in one phrase (%s)", minor, why);
        CHECK(unw_kern_reads(&u, 0, 1, why, sizeof why) == REMORA_OK, "3.%d: exception still read", minor);
        T.layout.ts_exc_info = 0;
        CHECK(unw_kern_reads(&u, 0, 1, why, sizeof why) == REMORA_EVERSION &&
              strstr(why, "--mode exception") != NULL, "3.%d without exc_info: refused (%s)", minor, why);
        CHECK(unw_kern_reads(&u, 0, 0, why, sizeof why) == REMORA_OK, "3.%d: wall still runs", minor);
    }
}

/* ---- the kernel engine's weight of a thread's time off a CPU (kernel.c) ---------- */

/* A thread that runs 'burst' ns then waits 'wait' ns, over and over from t = 1 s, looked
 * at by rounds 'gap(i)' ns apart: its CPU time and state at t. */
struct ow_sched {
    int64_t burst, wait;
    int kind;                       /* 0: rounds a period apart; 1: 0.4 and 1.6 periods in
                                     * turn; 2: a fifth of them 3 periods late, else 0.5 */
    uint32_t lcg;
};

static int64_t ow_gap(struct ow_sched *s, int i, int64_t period)
{
    if (s->kind == 0)
        return period;
    if (s->kind == 1)
        return i % 2 ? period * 2 / 5 : period * 8 / 5;
    s->lcg = s->lcg * 1664525u + 1013904223u;
    return (s->lcg >> 8) % 5 == 0 ? 3 * period : period / 2;
}

/* The CPU share of the thread's bursts as a profile made of these rounds would give it
 * (its time on a CPU counted by its ticks, a period of CPU time each; off a CPU by
 * kern_off_weigh), and as the rule before it would: a sample off a CPU standing for the
 * periods since it went off or since the round before, one at least. */
static void ow_run(struct ow_sched *s, int64_t period, int rounds, double *truth, double *now_share,
                   double *old_share)
{
    const int64_t t0 = 1000000000;
    int64_t t = t0, prev = 0, cyc = s->burst + s->wait;
    uint64_t counted = 0, old = 0, cpu = 0;
    kern_offw_t w = {0, 0, 0};
    int i;

    for (i = 0; i < rounds; i++) {
        int64_t k, x, since;
        unsigned n = 0;
        int on;
        t += ow_gap(s, i, period);
        k = (t - t0) / cyc, x = (t - t0) % cyc;
        on = x < s->burst;
        cpu = (uint64_t)(k * s->burst + (on ? x : s->burst));
        since = t0 + (on ? k - 1 : k) * cyc + s->burst;     /* its last switch off */
        if (kern_off_weigh(&w, t, cpu, period, !on, &n))
            counted += n;
        if (!on && prev > 0) {
            int64_t from = since > prev ? since : prev;
            int64_t m = (t - from + period / 2) / period;
            old += m < 1 ? 1 : (uint64_t)m;
        }
        prev = t;
    }
    *truth = 100.0 * (double)cpu / (double)(t - t0);
    *now_share = 100.0 * (double)cpu / ((double)cpu + (double)counted * (double)period);
    *old_share = 100.0 * (double)cpu / ((double)cpu + (double)old * (double)period);
}

void test_off_weigh(void)
{
    const int64_t P = 1000000;      /* 1 kHz */
    struct ow_sched cases[] = {
        {300000, 1700000, 0, 1},    /* a cycle of two periods: every round finds it the same */
        {250000, 1250000, 1, 1},    /* rounds that come early and late in turn */
        {250000, 1250000, 2, 7},    /* some rounds late, finding it on a CPU after a wait */
        {300000, 700000, 2, 11},
        {100000, 500000, 1, 3},
    };
    kern_offw_t w = {0, 0, 0};
    int64_t t = 1000000000;
    uint64_t cpu = 0;
    unsigned n = 0, i;
    size_t c;

    for (c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        double truth, share, old;
        /* within 0.3 points; with late rounds (kind 2) the wait a late round found over
         * is carried two periods at most (KU_CARRY: see kernel.c), 1.5-2.7 points over */
        double bound = cases[c].kind == 2 ? 3.0 : 0.3;
        ow_run(&cases[c], P, 20000, &truth, &share, &old);
        CHECK(share > truth - 0.3 && share < truth + bound,
              "off weigh case %zu: bursts %.2f%% of the profile for %.2f%% of the time", c, share, truth);
        /* the rule before missed it by 2-8 points, twice as far: the cases tell the two apart */
        CHECK(fabs(old - truth) > 1.5 && fabs(old - truth) > 1.8 * fabs(share - truth),
              "off weigh case %zu: the old rule %.2f%% for %.2f%% (this one %.2f%%)", c, old, truth, share);
    }

    /* no look before: nothing counted, no carry; the first look counts from itself */
    CHECK(kern_off_weigh(&w, t, 0, P, 1, &n) == 0 && w.carry == 0, "off weigh: a first look weighs nothing");
    CHECK(kern_off_weigh(&w, t + 3 * P, 0, P, 1, &n) == 1 && n == 3 && w.carry == 0,
          "off weigh: three periods off stand for %u", n);
    /* a thread on a CPU at every round, remora's wake-up preempting it 30 us each time:
     * its preemptions pile up KU_CARRY (2) periods at most, not the 30 periods of 1000 */
    t += 3 * P;
    for (i = 0; i < 1000; i++) {
        t += P;
        cpu += (uint64_t)(P - 30000);
        kern_off_weigh(&w, t, cpu, P, 0, &n);
    }
    t += 5 * P;
    CHECK(kern_off_weigh(&w, t, cpu, P, 1, &n) == 1 && n >= 5 && n <= 7, "off weigh: 5 periods off after"
          " preemptions stand for %u", n);
    /* a wait a late round found over (the thread on a CPU again): two periods of it carry */
    w.carry = 0;
    t += P;
    cpu += (uint64_t)P;
    kern_off_weigh(&w, t, cpu, P, 0, &n);
    t += 6 * P;
    cpu += (uint64_t)(P / 4);
    kern_off_weigh(&w, t, cpu, P, 0, &n);
    t += P;
    CHECK(kern_off_weigh(&w, t, cpu, P, 1, &n) == 1 && n == 3, "off weigh: 2 carried + 1 periods off stand for %u", n);
    /* a look before the one kept (a pause, another thread) counts nothing */
    w.ns = t + P;
    CHECK(kern_off_weigh(&w, t, cpu, P, 1, &n) == 0 && w.carry == 0, "off weigh: a look from the future counts");
}
