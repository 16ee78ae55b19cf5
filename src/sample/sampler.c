/* sample/sampler.c — the sampling loop: deadlines, rounds, pauses, the kernel engine's
 * ticks; each thread's sample handed to take.c, which puts it in the stack table and
 * hands it on to the sink; descendants found by subs.c.
 *
 * Rounds run on absolute deadlines (clock_nanosleep TIMER_ABSTIME) so the rate never
 * drifts; a round that cannot start on time is counted as late and skipped, not
 * squeezed in.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>

#include "remora.h"
#include "sampler_int.h"
#include "../py/py.h"
#include "../util/util.h"

int64_t sampler_now_ns(void)
{
    return remora_now_ns();
}

int sampler_new(unwinder_t *u, proc_t *p, stk_table_t *t, const sample_sink_t *sink,
                const sampler_opts_t *o, sampler_t **out)
{
    sampler_t *s = calloc(1, sizeof *s);
    size_t i;

    *out = NULL;
    if (s == NULL)
        return REMORA_ENOMEM;
    s->u = u;
    s->p = p;
    s->t = t;
    if (sink != NULL)
        s->sink = *sink;
    s->o = *o;
    s->child_status = -1;
    s->fmap_cap = 4096;
    s->fmap = malloc(s->fmap_cap * sizeof *s->fmap);
    s->gc_frame = stk_frame(t, "<GC>", "", 0);
    s->moving_frame = stk_frame(t, UNW_MOVING, "", 0);
    if (s->fmap == NULL || s->gc_frame == STK_NONE || s->moving_frame == STK_NONE) {
        sampler_free(s);
        return REMORA_ENOMEM;
    }
    for (i = 0; i < s->fmap_cap; i++)
        s->fmap[i].frame = STK_NONE;
    /* cpu mode needs to know which threads are on a CPU; without --idle every other mode
     * which threads are idle (a GIL holder never is) */
    s->want = (o->mode == SAMPLE_CPU ? UNW_WANT_CPU :
               !o->idle && o->mode != SAMPLE_MEMORY ? UNW_WANT_ACTIVE : 0) |
              (o->gc ? UNW_WANT_GC : 0) |
              (o->mode == SAMPLE_EXCEPTION || o->states ? UNW_WANT_EXC : 0) | (o->anchor ? UNW_WANT_ANCHOR : 0) |
              (o->function ? UNW_WANT_FIRSTLINE : 0) | (o->opcodes ? UNW_WANT_OPCODES : 0) |
              UNW_WANT_THREAD_NAMES;
    /* the kernel engine's stack of a thread as it left its CPU: wall and cpu modes only
     * (the round's GIL and exception state are read at another instant than that switch,
     * and a mode judged by them would mix the two: fidelity/async saw a thread in select
     * marked as handling an exception); elsewhere the kernel makes no such walk */
    if (o->kern != NULL && (o->mode == SAMPLE_WALL || o->mode == SAMPLE_CPU) && !(s->want & UNW_WANT_EXC))
        s->want |= UNW_WANT_SWITCH;
    if (o->async && u != NULL) {
        int err = async_new(t, &s->async);
        if (err) {
            sampler_free(s);
            return err;
        }
    }
    if (u != NULL) {
        unw_set_want(u, s->want | (s->async != NULL ? UNW_WANT_TASKS : 0));
        unw_set_reread_ns(u, sampler_reread_ns(o));
    }
    if (o->blocking && u != NULL) {
        int err = freeze_new(p, &s->frz);
        if (err) {
            sampler_free(s);
            return err;
        }
        if (s->want & (UNW_WANT_CPU | UNW_WANT_ACTIVE))
            freeze_want_states(s->frz);
    }
    *out = s;
    return REMORA_OK;
}

void sampler_free(sampler_t *s)
{
    size_t i;

    if (s == NULL)
        return;
    freeze_free(s->frz);
    async_free(s->async);
    free(s->fmap);
    free(s->tids);
    free(s->interps);
    free(s->tthreads);
    free(s->tname);
    for (i = 0; i < s->ntids; i++) {
        free(s->last[i].frames);
        free(s->last[i].nodes);
    }
    free(s->last);
    for (i = 0; i < s->nsubs; i++) {
        unw_free(s->subs[i].u);
        proc_free(s->subs[i].p);
        free(s->subs[i].t);
    }
    free(s->subs);
    free(s);
}

int sampler_child_status(const sampler_t *s)
{
    return s->child_status;
}

const sampler_stats_t *sampler_stats(const sampler_t *s)
{
    return &s->st;
}

const unw_thread_t *sampler_current_thread(const sampler_t *s, unsigned *count, unsigned *index)
{
    *count = s->cur != NULL ? s->cur_count : 1;
    *index = s->cur != NULL ? s->cur_index : 0;
    return s->cur;
}

static int kern_drain(sampler_t *s, int64_t *read_ns);
static int kern_switch_rec(void *ctx, const kern_sample_t *ks);
#define SWITCH_WAIT_NS 100000       /* a CPU's switch-out walk waited for after a round's
                                     * reading, at most: a thread whose walk is later is
                                     * taken as the round read it */
#define DRAIN_UNSETTLED (-1)         /* kern_drain(): a walk still under way after the wait */

/* After a round that read nothing, the next look: at most this far ahead (rounds above
 * 1 kHz are skipped, counted as rounds that read nothing) */
#define LIGHT_PACE_NS 1000000

_Static_assert(SAMPLE_KERNEL_MIN_PERIOD_NS == KERN_MIN_PERIOD_NS, "one shortest tick period");

/* One process's threads into the table. Returns 0, a transient REMORA_ECORRUPT or
 * REMORA_EFAULT (its thread list moved twice: counted as an error), or a fatal code. */
static int sample_process(sampler_t *s, unwinder_t *u, proc_t *p, freezer_t *frz, int64_t now_ns)
{
    unw_thread_t *threads;
    size_t n, i;
    int64_t held = 0, read_ns = now_ns;
    int err;

    if (frz != NULL) {
        held = sampler_now_ns();
        err = freeze_stop(frz);
        if (err) {
            if (err == REMORA_ENOPROC && s->o.child > 0 && freeze_exit_status(frz) != -1)
                s->child_status = freeze_exit_status(frz);
            return err;
        }
    }
    /* --async: the task list, when due, read before the threads (unw_tasks() samples them
     * itself) and held with them (--blocking) */
    err = u == s->u && s->async != NULL ?
          async_before(s->async, u, s->o.async == SAMPLE_ASYNC_ALL, now_ns, &s->st) : REMORA_OK;
    if (err == REMORA_OK) {
        read_ns = now_ns;
        if (s->o.kern != NULL && (err = kern_drain(s, &read_ns)) == DRAIN_UNSETTLED) {
            /* a CPU held up in the walk of a tick taken before now, whose record (and
             * those behind it in the ring) would be written after this round's samples at
             * a later time than its own: no round now (counted late), the next one reads */
            if (u == s->u && s->st.rounds > 0) {
                s->st.rounds--;
                s->st.late++;
            }
            return REMORA_OK;
        }
        /* every thread on a CPU (its ticks sample it) or idle, as the table says: no
         * reading this round (but one every few ms, for new threads) */
        if (err == REMORA_OK && frz == NULL && unw_kern_light(u, now_ns)) {
            /* the asleep threads it looked at: their time is idle, left out here as a
             * full round would leave out their samples */
            uint64_t idle = unw_kern_light_idle(u);
            s->st.idle += idle;
            s->st.looked += idle;
            s->round_light++;
            return REMORA_OK;
        }
        unw_kern_round(u, now_ns);
        s->round_full++;
        if (err == REMORA_OK)
            err = unw_sample(u, &threads, &n);
        if (read_ns > s->last_read_ns)
            s->last_read_ns = read_ns;
    }
    if (frz != NULL) {
        freeze_go(frz);             /* read: let it run while the table is updated */
        s->st.held_ns += (uint64_t)(sampler_now_ns() - held);
    }
    if (err == REMORA_ECORRUPT || err == REMORA_EFAULT) {
        s->st.errors++;
        return err;
    }
    if (err)
        return err;
    /* the stacks of the switches the round's table showed: each switch-out walk is under
     * way from before the table says the thread left (the walking count), so once the
     * walks under way now are over, every one of those is in its ring */
    if (s->o.kern != NULL && (s->want & UNW_WANT_SWITCH)) {
        kern_settle(s->o.kern, sampler_now_ns, SWITCH_WAIT_NS);
        if ((err = kern_poll_switch(s->o.kern, kern_switch_rec, s)) != REMORA_OK)
            return err;
    }
    /* a thread on a CPU is sampled by its ticks, none of its time by the round */
    for (i = 0; i < n; i++) {
        const unw_thread_t *th = &threads[i], *sw = NULL;
        unsigned count;
        /* off its CPU since the switch the kernel walked it at: that stack, not one read
         * while it may have begun to move again (UNW_WANT_SWITCH) */
        if ((s->want & UNW_WANT_SWITCH) && (err = unw_kern_switch_stack(u, i, &sw)) != REMORA_OK)
            return err;
        if (sw != NULL)
            th = sw;
        count = (th->kernel || s->o.mode == SAMPLE_MEMORY ? 0 :
                          th->periods || th->weighed ? th->periods : 1) + th->failed_ticks;
        /* memory: a round stands for no growth; a fault whose walk failed in the kernel
         * is counted here, on the stack read now (failed_ticks) */
        if ((err = take_thread(s, u, p, th, read_ns - s->st.start_ns, count)) != REMORA_OK)
            return err;
    }
    if (u == s->u && s->async != NULL && s->o.async == SAMPLE_ASYNC_ALL)
        return take_waiting_tasks(s, u, p, threads, n, now_ns);
    return REMORA_OK;
}

#define LATE_SLACK_NS 1000          /* a tick written this much after its time is not late */

/* A stack walked as a thread left its CPU: kept by its process's unwinder for a round
 * that finds the thread off a CPU since that switch. */
static int kern_switch_rec(void *ctx, const kern_sample_t *ks)
{
    sampler_t *s = ctx;
    size_t k;

    if (s->u != NULL && proc_pid(s->p) == ks->pid)
        return unw_kern_switch(s->u, ks);
    for (k = 0; k < s->nsubs; k++)
        if (s->subs[k].u != NULL && s->subs[k].pid == ks->pid)
            return unw_kern_switch(s->subs[k].u, ks);
    return REMORA_OK;
}

/* One tick: a sample of a thread on a CPU, named by its process's unwinder at once and
 * written at the tick's time (never before the last round's: a recording's times only go
 * forward). */
static int kern_sample(void *ctx, const kern_sample_t *ks)
{
    sampler_t *s = ctx;
    const unw_thread_t *th;
    unwinder_t *u = NULL;
    proc_t *p = NULL;
    size_t k;
    int64_t t;
    int err;

    if (s->u != NULL && proc_pid(s->p) == ks->pid)
        u = s->u, p = s->p;
    for (k = 0; u == NULL && k < s->nsubs; k++)
        if (s->subs[k].u != NULL && s->subs[k].pid == ks->pid)
            u = s->subs[k].u, p = s->subs[k].p;
    if (u == NULL)
        return REMORA_OK;               /* a process already forgotten */
    s->st.kernel++;
    err = unw_kern_tick(u, ks, &th);
    if (err == REMORA_EFAULT) {
        s->st.kernel_fallback++;
        return REMORA_OK;
    }
    if (err)
        return err;
    t = th->t_ns;
    if (t >= s->paused_at && (s->paused || t < s->resumed_at)) {
        /* taken while paused (a walk that reached the ring after the pause's drain, read
         * by a snapshot or after the resume): nothing taken then is kept */
        s->st.kernel_paused++;
        return REMORA_OK;
    }
    if (t < s->last_read_ns) {
        /* its record reached the ring after a round began: written late (by less than a
         * microsecond, the kernel's clock and this one's, read on two CPUs, disagree) */
        if (s->last_read_ns - t > LATE_SLACK_NS)
            s->st.kernel_late++;
        t = s->last_read_ns;
    }
    if (t > s->tick_ns)
        s->tick_ns = t;
    return take_thread(s, u, p, th, t - s->st.start_ns, 1);
}

/* The ticks waiting, written at their times, and *read_ns the time the round's reading
 * begins: no tick taken before it is written after the round's samples, none written
 * before them is later (a recording's times only go forward). Each pass waits out the
 * walks under way on the CPUs (kern_settle), then writes what the ring holds; the round
 * begins after a pass that found nothing: every walk not in the ring then began after
 * that pass's wait, so after every time written. Returns 0 or a fatal code. */
#define SETTLE_WAIT_NS 1000000      /* a CPU's walk waited for, at most (a held-up CPU) */

static int kern_drain(sampler_t *s, int64_t *read_ns)
{
    int err, tries;

    /* the switch ring emptied at every round, light ones too (older stacks, superseded) */
    if ((s->want & UNW_WANT_SWITCH) && (err = kern_poll_switch(s->o.kern, kern_switch_rec, s)) != REMORA_OK)
        return err;
    *read_ns = sampler_now_ns();
    for (tries = 0; tries < 8; tries++) {
        uint64_t before = s->st.kernel;
        if (kern_settle(s->o.kern, sampler_now_ns, SETTLE_WAIT_NS) > 0) {
            s->st.kernel_unsettled++;
            return DRAIN_UNSETTLED;
        }
        if ((err = kern_poll(s->o.kern, kern_sample, s)) != REMORA_OK)
            return err;
        if (s->tick_ns > *read_ns)
            *read_ns = s->tick_ns;
        if (s->st.kernel == before)
            break;
    }
    if (tries == 8)
        s->st.kernel_unsettled++;   /* ticks still coming in: the round goes on */
    return REMORA_OK;
}

int sampler_set_table(sampler_t *s, stk_table_t *t, const sample_sink_t *sink)
{
    uint32_t gc = stk_frame(t, "<GC>", "", 0), mv = stk_frame(t, UNW_MOVING, "", 0);
    async_t *a = NULL;
    size_t i;
    int err;

    if (gc == STK_NONE || mv == STK_NONE)
        return REMORA_ENOMEM;
    if (s->async != NULL) {
        /* its strings are interned in the table: a new one, which reads the tasks anew */
        if ((err = async_new(t, &a)) != REMORA_OK)
            return err;
        async_free(s->async);
        s->async = a;
    }
    /* every cache of the old table's indexes: the frame cache, the threads' last stacks
     * and the thread map (a thread is named again in the new table) */
    take_forget(s);
    for (i = 0; i < s->ntids; i++) {
        free(s->last[i].frames);
        free(s->last[i].nodes);
    }
    s->ntids = 0;
    s->t = t;
    s->gc_frame = gc;
    s->moving_frame = mv;
    s->sink = *sink;
    return REMORA_OK;
}

void sampler_set_hook(sampler_t *s, sampler_hook_t hook, void *ctx, double every_s,
                      volatile sig_atomic_t *poke)
{
    s->hook = hook;
    s->hook_ctx = ctx;
    s->hook_poke = poke;
    s->hook_every_ns = (int64_t)(every_s * 1e9);
    if (s->hook_every_ns < 1000000)
        s->hook_every_ns = 1000000;
}

int64_t sampler_flush(sampler_t *s)
{
    int64_t read_ns = sampler_now_ns();

    /* the kernel engine's ticks taken so far: in the table now, the later ones after */
    if (s->o.kern != NULL && kern_drain(s, &read_ns) == REMORA_OK && read_ns > s->last_read_ns)
        s->last_read_ns = read_ns;  /* (unsettled: what is in; a late tick is counted late) */
    return read_ns;
}

void sampler_hook_due(sampler_t *s, int64_t when_ns)
{
    s->hook_due = when_ns;
}

int sampler_pause(sampler_t *s, int paused)
{
    int64_t read_ns, now;
    size_t k;
    int err = REMORA_OK;

    if (paused == s->paused)
        return REMORA_OK;
    if (paused) {
        /* the ticks taken so far are the recording's: written before the events stop */
        if (s->o.kern != NULL && (err = kern_drain(s, &read_ns)) > 0)
            return err;
        err = REMORA_OK;
        if (s->o.kern != NULL)
            kern_pause(s->o.kern, 1);
        s->paused_at = sampler_now_ns();
    } else {
        if (s->o.kern != NULL) {
            /* nothing taken while paused is kept: the ring emptied unread */
            kern_discard(s->o.kern);
            kern_pause(s->o.kern, 0);
        }
        now = sampler_now_ns();
        s->resumed_at = now;
        if (s->u != NULL)
            unw_kern_resume(s->u, now);
        for (k = 0; k < s->nsubs; k++)
            if (s->subs[k].u != NULL)
                unw_kern_resume(s->subs[k].u, now);
        s->st.paused_ns += (uint64_t)(now - s->paused_at);
        s->st.pauses++;
    }
    s->paused = paused;
    return err;
}

int sampler_paused(const sampler_t *s)
{
    return s->paused;
}

int sampler_round(sampler_t *s, int64_t now_ns)
{
    size_t k;
    int err;

    if (s->o.subprocesses && now_ns >= s->next_scan) {
        subs_scan(s);
        s->next_scan = now_ns + SUB_SCAN_NS;
    }
    if (s->u == NULL) {
        /* only descendants to sample: a round counts when one of them runs Python */
        for (k = 0; k < s->nsubs && s->subs[k].u == NULL; k++)
            ;
        if (k == s->nsubs)
            return REMORA_OK;
    }
    s->st.rounds++;
    s->round_light = s->round_full = 0;
    err = s->u != NULL ? sample_process(s, s->u, s->p, s->frz, now_ns) : REMORA_OK;
    if (err == REMORA_ECORRUPT || err == REMORA_EFAULT)
        err = REMORA_OK;
    if (err)
        return err;
    for (k = 0; k < s->nsubs; k++) {
        sub_t *c = &s->subs[k];
        if (c->u == NULL)
            continue;
        err = sample_process(s, c->u, c->p, NULL, now_ns);
        if (err == REMORA_OK) {
            c->bad = 0;
        } else if (err == REMORA_ENOMEM || err == REMORA_EIO) {
            return err;
        } else if ((err != REMORA_ECORRUPT && err != REMORA_EFAULT) || ++c->bad > SUB_BAD_ROUNDS) {
            subs_reset(s, c);            /* exited, or exec'd: the next scan says which */
        }
    }
    return REMORA_OK;
}

int sampler_run(sampler_t *s, volatile sig_atomic_t *stop,
                void (*status)(const sampler_t *s, void *ctx), void *ctx)
{
    int64_t interval = (int64_t)(1e9 / (s->o.rate_hz > 0 ? s->o.rate_hz : 1000));
    int64_t start = sampler_now_ns(), next = start, end, next_status;
    int err = REMORA_OK;

    if (interval < 1)
        interval = 1;
    /* the kernel engine's ticks come at most every KERN_MIN_PERIOD_NS of a thread's CPU
     * time: a round stands for as long as a tick */
    if (s->o.kern != NULL && interval < KERN_MIN_PERIOD_NS)
        interval = KERN_MIN_PERIOD_NS;
    end = s->o.duration_s > 0 ? start + (int64_t)(s->o.duration_s * 1e9) : INT64_MAX;
    next_status = start + 500000000;
    s->st.start_ns = start;
    s->last_read_ns = start;
    /* wake on time: the default 50 us timer slack would cap the rate near 20 kHz */
    prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
    s->hook_next = start + (s->hook_every_ns > 0 ? s->hook_every_ns : 0);
    while (!*stop) {
        int64_t now = sampler_now_ns();
        if (s->hook != NULL && (now >= s->hook_next || (s->hook_due != 0 && now >= s->hook_due) ||
                                (s->hook_poke != NULL && *s->hook_poke))) {
            /* between rounds: the caller's control (a command, a period's end) */
            if (s->hook_poke != NULL)
                *s->hook_poke = 0;
            s->hook_due = 0;
            if ((err = s->hook(s, s->hook_ctx, now)) != REMORA_OK)
                break;
            now = sampler_now_ns();
            while (s->hook_next <= now)
                s->hook_next += s->hook_every_ns;
            if (*stop)
                break;
        }
        if (now >= end)
            break;
        if (s->paused) {
            /* no rounds: wait for the hook's next look (or a signal), then go on from
             * there, no round counted late */
            int64_t wake = s->hook_next < end ? s->hook_next : end;
            if (s->hook_due != 0 && s->hook_due < wake)
                wake = s->hook_due;
            struct timespec ts = { (time_t)(wake / 1000000000), (long)(wake % 1000000000) };
            clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
            next = sampler_now_ns();
            continue;
        }
        if (next - now > 2000) {
            /* never past the end: a round due after it is not waited for (-r 1 -d 0.5
             * takes 0.5 s) */
            int64_t wake = next < end ? next : end;
            if (s->hook_due != 0 && s->hook_due < wake)
                wake = s->hook_due;     /* the caller's moment (a period's end) is kept */
            struct timespec ts = { (time_t)(wake / 1000000000), (long)(wake % 1000000000) };
            int rc = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
            if (rc == EINTR || wake < next)
                continue;               /* a signal, or the hook's moment before the round's */
            /* the round's time is when it starts, not when it was due: a loaded machine
             * wakes remora late */
            now = sampler_now_ns();
            if (s->hook_due != 0 && now >= s->hook_due)
                continue;               /* woke past the hook's moment too: it goes first */
        } else if (now - next >= interval) {
            /* fell behind: skip the missed deadlines instead of bunching rounds */
            int64_t missed = (now - next) / interval;
            s->st.late += (uint64_t)missed;
            next += missed * interval;
        }
        if (now >= end || (s->o.max_rounds && s->st.rounds >= s->o.max_rounds))
            break;
        /* a launched command that exited is a zombie until reaped: reads would fail
         * (with --blocking, remora traces it: its stops and its end come to freeze_stop) */
        if (s->o.child > 0 && s->frz == NULL &&
            waitpid(s->o.child, &s->child_status, WNOHANG) == s->o.child) {
            err = REMORA_ENOPROC;
            break;
        }
        err = sampler_round(s, now);
        if (err == REMORA_ENOPROC && s->o.child > 0) {
            /* the command died between two checks: collect how it ended */
            while (s->child_status == -1 && waitpid(s->o.child, &s->child_status, 0) < 0 &&
                   errno == EINTR)
                ;
            break;
        }
        if (err)
            break;
        next += interval;
        if (s->round_light > 0 && s->round_full == 0) {
            s->st.light++;
            /* nothing needed reading: every thread on a CPU (its ticks sample it) or idle.
             * The next look is a pace later; what went off a CPU in between is counted
             * then for each period since (unw_thread_t.periods): its stack has not moved */
            if (next < now + LIGHT_PACE_NS) {
                int64_t skip = (now + LIGHT_PACE_NS - next) / interval;
                next += skip * interval;
                s->st.rounds += (uint64_t)skip;
                s->st.light += (uint64_t)skip;
            }
        }
        if (status != NULL && now >= next_status) {
            status(s, ctx);
            next_status = now + 500000000;
        }
    }
    s->st.end_ns = sampler_now_ns();
    return err;
}
