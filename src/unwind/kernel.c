/* unwind/kernel.c — the unwinder's side of the kernel engine (src/kern/).
 *
 * Gives the engine each thread's state and each target's layout as plain offsets, takes
 * every thread's on/off-CPU state from the engine's table, and names the frames of a
 * tick (a kernel sample) with the code-object cache, each checked against the fingerprint
 * the kernel read with the frame. Reads of the target only for a code object not cached.
 *
 * A thread's time on a CPU is its ticks' (one each period of its own CPU time, so short
 * stints count as much as long ones); a round counts only the time of threads off a CPU.
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "remora.h"
#include "internal.h"
#include "../kern/kern.h"

_Static_assert(KERN_NATIVE_REGS == PROC_NREGS, "the kernel's user registers are proc.h's");

#define KU_FAILED 16                /* threads whose failed ticks are read at the next round */
#define KU_WAKE_NS 50000            /* a switch this close before a round woke is its doing */
#define KU_MAX_PERIODS 100000       /* periods one reading stands for, at most */
#define KU_BEHIND 2                 /* periods of CPU time with no tick: ticks held up */
#define KU_CARRY 2                  /* periods of time off a CPU a thread found on one carries,
                                     * at most (one on a CPU at every round, remora's wake-up
                                     * preempting it, would pile up its preemptions) */

/* A thread whose ticks could not be read in the kernel since the last round (a page not
 * present, no state known, deeper than the kernel walks, a walk not rooted): the next
 * round reads it from user space, its sample standing for those ticks. */
typedef struct ku_failed {
    pid_t tid;
    unsigned n;
} ku_failed_t;

/* The last KU_SWITCH_KEEP stacks the kernel walked as a thread left its CPU
 * (KERN_S_SWITCH), their frames as the kernel sent them (named only when a round takes
 * one): the ring is read after the round's table, so switches after the one the round
 * saw may come with it. */
#define KU_SWITCH_KEEP 4
#define KU_GEN_BACKOFF_NS 1000000000        /* no hint after a failed proof: 1 s, */
#define KU_GEN_BACKOFF_MAX_NS 16000000000   /* ... doubled to 16 s at most */
typedef struct ku_switch_rec {
    uint64_t t_ns;                  /* the switch's time: the table's since_ns then (0: none) */
    uint64_t tstate;
    uint32_t flags, nframes;
    size_t cap;
    kern_frame_t *frames;
    int has_task;                   /* --async: its running task came with it, */
    kern_task_t task;               /* ... as the walk read it */
    int has_native;                 /* --native: its user context came with it */
    kern_native_t nat;              /* ... its registers; its stack in natbuf */
    unsigned char *natbuf;          /* KERN_NATIVE_MAX bytes, allocated at first use */
} ku_switch_rec_t;

typedef struct ku_switch {
    pid_t tid;                      /* 0: empty */
    unsigned next;                  /* the slot the next record goes to */
    uint64_t want_ns;               /* the switch the round found it off its CPU since: its
                                     * record is kept whatever comes after it */
    ku_switch_rec_t rec[KU_SWITCH_KEEP];
} ku_switch_t;

struct unw_kern {
    kern_t *k;
    kern_layout_t lay;
    unw_frame_t frames[KERN_MAX_FRAMES];   /* the last tick's, named */
    unw_thread_t th;                /* ... and its thread, handed to unw_kern_tick's caller */
    ku_failed_t pending[KU_FAILED]; /* failed since the round began */
    ku_failed_t now[KU_FAILED];     /* ... before it: this round reads them */
    size_t npending, nnow;
    uint64_t gen_seen;              /* the code-object counter of the last tick named with
                                     * fingerprints (its entries proved at it) */
    int gen_failed;                 /* a tick without fingerprints had a frame not proved */
    int64_t gen_off_until;          /* ... so no hint until then (every tick fingerprinted) */
    int64_t gen_backoff;            /* ... for this long, doubled at each failure */
    int64_t woke_ns;                /* when this round's remora woke */
    int64_t full_ns;                /* ... the last round that read (unw_kern_light) */
    int64_t looked_ns;              /* the round before this one (read or not) */
    int64_t checked_ns;             /* ... this one's time, once looked */
    int64_t period_ns;              /* the rounds' period (the ticks') */
    uint32_t switch_gap_ns;         /* the layout's switch_gap_ns where UNW_WANT_SWITCH is
                                     * wanted (0 in it otherwise: no walk at a switch-out) */
    int64_t resumed_ns;             /* the last unw_kern_resume(): no look before it counts */
    int cpu;                        /* ... on this CPU */
    uint64_t light_idle;            /* periods of idle time light rounds looked at, not yet
                                     * taken (unw_kern_light_idle) */
    ku_switch_t sw[UNW_KERN_SWITCH];    /* by tid % UNW_KERN_SWITCH */
    unw_kern_stats_t stats;
};

void kern_unw_free(struct unw_kern *k, pid_t pid)
{
    size_t i, j;

    if (k == NULL)
        return;
    kern_remove_process(k->k, pid);
    for (i = 0; i < UNW_KERN_SWITCH; i++)
        for (j = 0; j < KU_SWITCH_KEEP; j++) {
            free(k->sw[i].rec[j].frames);
            free(k->sw[i].rec[j].natbuf);
        }
    free(k);
}

/* Can the kernel read the exception state of t's threads as unw_exc_state() does? */
static int exc_readable(const py_target_t *t)
{
    const py_layout_t *L = &t->layout;

    return L->ts_exc_info != 0 && L->ei_size != 0 && L->ei_exc + 8 <= L->ei_size &&
           L->ei_previous + 8 <= L->ei_size && L->ts_exc_info + 8 <= L->ts_size && t->none != 0;
}

int unw_kern_layout(const py_target_t *t, kern_layout_t *kl, char *why, size_t whylen)
{
    const py_layout_t *L = &t->layout;
    uint64_t off;
    size_t len;

    memset(kl, 0, sizeof *kl);
    kl->frames_kind = L->frames_kind == PY_FRAMES_OBJECTS ? KERN_FRAMES_OBJECTS
                    : L->frames_kind == PY_FRAMES_CFRAME ? KERN_FRAMES_CFRAME : KERN_FRAMES_DIRECT;
    kl->ts_frame = (uint32_t)L->ts_frame;
    kl->cframe_current_frame = (uint32_t)L->cframe_current_frame;
    kl->fr_size = (uint32_t)L->fr_size;
    kl->fr_previous = (uint32_t)L->fr_previous;
    kl->fr_code = (uint32_t)L->fr_code;
    kl->fr_instr = (uint32_t)L->fr_instr;
    kl->fr_owner = L->owner_shim ? (uint32_t)L->fr_owner : 0;
    kl->owner_shim = (uint32_t)L->owner_shim;
    kl->fr_is_entry = (uint32_t)L->fr_is_entry;
    if (L->fr_funcobj != 0 && t->none != 0) {
        kl->fr_funcobj = (uint32_t)L->fr_funcobj;
        kl->none_addr = t->none;
    }
    kl->tagged_executable = L->tagged_executable != 0;
    /* the names a walk reads with a frame whose code object user space has not named */
    if (L->co_filename != 0 && L->co_firstlineno != 0 && (L->co_qualname != 0 || L->co_name != 0) &&
        L->u_compact_size != 0 && L->u_compact_size < KERN_NAME_IMG) {
        kl->nm_on = 1;
        kl->nm_name = (uint32_t)(L->co_qualname != 0 ? L->co_qualname : L->co_name);
        kl->nm_file = (uint32_t)L->co_filename;
        kl->nm_firstlineno = (uint32_t)L->co_firstlineno;
    }
    code_fp_span(L, &off, &len);
    kl->fp_off = (uint32_t)off;
    kl->fp_len = (uint32_t)len;
    if (L->fr_owner_gen >= 0 && L->fr_owner != 0)
        kl->owner_gen = (uint32_t)L->fr_owner_gen + 1;
    else if (L->fr_gen != 0)
        kl->fr_gen = (uint32_t)L->fr_gen;
    if (L->co_version == 0) {
        /* before 3.12 nothing in the code object is unique: its name's and file's str
         * objects count too (PyASCIIObject: length, then hash, after the header) */
        kl->co_name = (uint32_t)L->co_qualname;    /* the str code.c keeps an image of */
        kl->co_filename = (uint32_t)L->co_filename;
        kl->str_hash = (uint32_t)(L->u_length + 8);
        kl->str_data = (uint32_t)L->u_ascii_size;
    }
    if (L->ts_interp != 0 && L->is_gc_collecting != 0 && L->gil_locked != 0 && L->gil_holder != 0) {
        kl->ts_interp = (uint32_t)L->ts_interp;
        kl->is_gc_collecting = (uint32_t)L->is_gc_collecting;
        kl->gil_in_interp = L->gil_in_interp != 0;
        kl->is_gil_ptr = (uint32_t)L->is_gil_ptr;
        kl->gil_locked = (uint32_t)L->gil_locked;
        kl->gil_holder = (uint32_t)L->gil_holder;
        kl->runtime = L->gil_in_interp ? 0 : t->runtime;
        kl->ts_gil_requested = (uint32_t)L->ts_gil_requested;
        /* last_holder (8 bytes) and locked (4) in the 16 bytes from the lower, aligned:
         * one read at each tick (remora.bpf.c's interp_flags) */
        kl->gil_pair = L->gil_locked > L->gil_holder ?
            L->gil_locked - L->gil_holder >= 8 && L->gil_locked - L->gil_holder <= 12 &&
            (L->gil_locked - L->gil_holder) % 4 == 0 :
            L->gil_holder - L->gil_locked == 8;
    }
    /* the exception state's place, read only where it is wanted (kern_sync_threads) */
    if (exc_readable(t)) {
        kl->ts_exc_info = (uint32_t)L->ts_exc_info;
        kl->ei_exc = (uint32_t)L->ei_exc;
        kl->ei_previous = (uint32_t)L->ei_previous;
        kl->exc_none = t->none;
    }
    if (L->fr_size == 0 || L->fr_size > 128 || L->fr_previous + 8 > L->fr_size || L->fr_code + 8 > L->fr_size ||
        L->fr_instr + 8 > L->fr_size || kl->fr_owner + 1 > L->fr_size || L->fr_is_entry + 1 > L->fr_size ||
        kl->fr_funcobj + 8 > L->fr_size || len == 0 || len > 8 * KERN_FP_WORDS || L->ts_frame + 8 > L->ts_size) {
        snprintf(why, whylen, "this interpreter's frame layout is not one the kernel engine walks "
                 "(frame header %zu bytes)", (size_t)L->fr_size);
        return REMORA_EVERSION;
    }
    return REMORA_OK;
}

int unw_kern_reads(const unwinder_t *u, int gil, int exc, char *why, size_t whylen)
{
    const py_target_t *t = u->target;
    kern_layout_t kl;
    int err;

    if ((err = unw_kern_layout(t, &kl, why, whylen)) != REMORA_OK)
        return err;
    if (gil && kl.ts_interp == 0) {
        snprintf(why, whylen, "--mode gil: Python %s's GIL state is not one the kernel engine "
                 "reads", t->version);
        return REMORA_EVERSION;
    }
    if (exc && kl.ts_exc_info == 0) {
        snprintf(why, whylen, "--mode exception: Python %s's exception state is not one the "
                 "kernel engine reads", t->version);
        return REMORA_EVERSION;
    }
    return REMORA_OK;
}

int unw_kern_enable(unwinder_t *u, struct kern *k, char *why, size_t whylen)
{
    struct unw_kern *ku;
    int err;

    if (u->kern != NULL)
        return REMORA_OK;
    if ((ku = calloc(1, sizeof *ku)) == NULL)
        return REMORA_ENOMEM;
    ku->k = k;
    ku->period_ns = (int64_t)kern_period_ns(k);
    if ((err = unw_kern_layout(u->target, &ku->lay, why, whylen)) != REMORA_OK)
        goto error;
    /* a thread's stack walked as it leaves a CPU (each preemption; going to sleep, once a
     * period of wall time at most: the rounds' pace): none with page-fault samples, whose
     * rounds take no sample */
    ku->switch_gap_ns = ku->period_ns <= 0 || kern_fault_period(k) > 0 ? 0
                      : ku->period_ns > (int64_t)UINT32_MAX ? UINT32_MAX : (uint32_t)ku->period_ns;
    /* ... and only where that stack is used (UNW_WANT_SWITCH: kern_sync_threads follows
     * a later unw_set_want) */
    ku->lay.switch_gap_ns = (u->want & UNW_WANT_SWITCH) ? ku->switch_gap_ns : 0;
    ku->lay.self_tgid = (uint32_t)getpid();
    /* --native: each tick copies its thread's user registers and the top of its stack,
     * unwound here (native_merge_tick): the target is never stopped */
    if (u->native != NULL) {
        ku->lay.native_stack = KERN_NATIVE_MAX;
        native_warm(u->native);
    }
    if ((err = kern_add_process(k, proc_pid(u->p), &ku->lay)) != REMORA_OK) {
        if (err == REMORA_ENOMEM)
            snprintf(why, whylen, "the kernel engine takes %d processes at most", KERN_MAX_PROCS);
        goto error;
    }
    u->kern = ku;
    return REMORA_OK;
error:
    free(ku);
    return err;
}

void unw_kern_get_stats(const unwinder_t *u, unw_kern_stats_t *out)
{
    if (u->kern != NULL)
        *out = u->kern->stats;
    else
        memset(out, 0, sizeof *out);
}

/* Is the thread's tid a native id shared by another state of the list (a thread in a
 * subinterpreter has one in each)? The kernel cannot tell which it runs on. */
static int tid_shared(const reader_t *r, size_t i)
{
    size_t j;

    for (j = 0; j < r->nthreads; j++)
        if (j != i && r->threads[j].native_id == r->threads[i].native_id)
            return 1;
    return 0;
}

/* Where the code-object counter is, with one interpreter (3.13+ keep one each: a code
 * object made in another would not move this one), or 0. */
static uint64_t gen_addr_of(const unwinder_t *u, const reader_t *r, uint32_t *size)
{
    const py_layout_t *L = &u->target->layout;

    *size = 8;
    if (u->target->code_version != 0) {
        *size = 4;                          /* 3.12: a global u32 */
        return u->target->code_version;
    }
    if (r->ninterps != 1 || r->interps[0].addr == 0)
        return 0;
    if (L->is_code_generation != 0)
        return r->interps[0].addr + L->is_code_generation;
    *size = 4;
    return L->is_code_version != 0 ? r->interps[0].addr + L->is_code_version : 0;
}

void kern_sync_threads(unwinder_t *u, reader_t *r)
{
    struct unw_kern *ku = u->kern;
    pid_t pid = proc_pid(u->p);
    uint32_t size;
    uint64_t ga = gen_addr_of(u, r, &size);
    size_t i;

    uint32_t exc_on = (u->want & UNW_WANT_EXC) && ku->lay.ts_exc_info != 0;
    uint32_t gap = (u->want & UNW_WANT_SWITCH) ? ku->switch_gap_ns : 0;

    /* one interpreter: every thread's (a thread state's interp is then not read at each
     * tick); with more, each tick reads its thread's */
    uint64_t interp = r->ninterps == 1 ? r->interps[0].addr : 0;

    /* --async: the running task read at each tick, where the last reading found it */
    kern_layout_t rt = ku->lay;
    const size_t rt_at = offsetof(kern_layout_t, rt_kind);

    if (u->want & UNW_WANT_TASKS)
        tk_kern_layout(u, &rt);
    if (ga != ku->lay.gen_addr || exc_on != ku->lay.exc_on || gap != ku->lay.switch_gap_ns ||
        interp != ku->lay.interp || memcmp((char *)&rt + rt_at, (char *)&ku->lay + rt_at, sizeof rt - rt_at) != 0) {
        memcpy((char *)&ku->lay + rt_at, (char *)&rt + rt_at, sizeof rt - rt_at);
        ku->lay.interp = interp;
        if (ga != ku->lay.gen_addr) {
            ku->lay.gen_addr = ga;
            ku->lay.gen_size = size;
            ku->lay.gen_hint = 0;
            ku->gen_seen = 0;
        }
        /* the exception state read at each tick only where it is wanted (exception mode,
         * top's header): every other walk costs what it did */
        ku->lay.exc_on = exc_on;
        /* the walks at a switch-out likewise only where the sampler uses them */
        ku->lay.switch_gap_ns = gap;
        kern_add_process(ku->k, pid, &ku->lay);
    }

    for (i = 0; i < r->nthreads; i++) {
        rd_thread_t *tc = &r->threads[i];
        pid_t tid = tc->native_id > 0 && !tid_shared(r, i) ? tc->native_id : 0;
        uint64_t ts = tid ? tc->tstate : 0;
        if (tc->kern.tid == tid && tc->kern.ts == ts)
            continue;
        if (tc->kern.tid > 0 && tc->kern.tid != tid)
            kern_set_thread(ku->k, pid, tc->kern.tid, 0);
        if (tid > 0 && kern_set_thread(ku->k, pid, tid, ts) != REMORA_OK)
            tid = 0, ts = 0;
        tc->kern.tid = tid;
        tc->kern.ts = ts;
    }
}

/* A thread's CPU time while the engine watched, at now: its finished stints and the one
 * under way. */
static uint64_t cpu_time(const kern_tstate_t *st, int64_t now_ns)
{
    return st->run_ns + (st->on_cpu && now_ns > (int64_t)st->since_ns ? (uint64_t)now_ns - st->since_ns : 0);
}

/* On a CPU, or waiting for one, with KU_BEHIND periods of CPU time since its last tick (a
 * task-clock tick comes every period of that time): its ticks are held up. */
static int behind(const struct unw_kern *ku, const kern_tstate_t *st, int64_t now_ns)
{
    uint64_t cpu = cpu_time(st, now_ns);

    return (st->on_cpu || st->runnable) && ku->period_ns > 0 && cpu > st->tick_cpu &&
           cpu - st->tick_cpu > (uint64_t)KU_BEHIND * (uint64_t)ku->period_ns;
}

int kern_off_weigh(kern_offw_t *w, int64_t now, uint64_t cpu, int64_t period, int off, unsigned *periods)
{
    int looked = w->ns > 0 && w->ns < now && cpu >= w->cpu && period > 0;
    int64_t since = 0, total, n;

    if (looked) {
        since = (now - w->ns) - (int64_t)(cpu - w->cpu);
        since = since > 0 ? since : 0;
    }
    total = w->carry + since;
    w->ns = now;
    w->cpu = cpu;
    if (!looked) {
        w->carry = 0;
        return 0;
    }
    if (!off) {
        /* KU_CARRY periods at most: the time it was preempted is in 'since' too (its
         * wall time less its CPU time), and its next sample off a CPU is of another
         * place. Kept whole, a wait a late round found over went to that place: aiohttp's
         * event loop, whose steps are preempted by its load client, had its select 1-2.5
         * points over its clock on sid 3.14 (0.3-1.1 bounded) */
        w->carry = total < KU_CARRY * period ? total : KU_CARRY * period;
        return 0;
    }
    n = total > 0 ? (total + period / 2) / period : 0;
    if (n > KU_MAX_PERIODS)
        n = KU_MAX_PERIODS;
    w->carry = total - n * period;
    if (w->carry > KU_CARRY * period)
        w->carry = KU_CARRY * period;
    *periods = (unsigned)n;
    return 1;
}

void kern_cpu_state(unwinder_t *u, rd_thread_t *tc, unw_thread_t *th)
{
    struct unw_kern *ku = u->kern;
    kern_tstate_t st;
    size_t i;
    char state;
    int weighed = 0;
    unsigned periods = 0;

    tc->kern.sw_since = 0;
    for (i = 0; i < ku->nnow; i++)
        if (ku->now[i].tid == tc->native_id)
            th->failed_ticks = ku->now[i].n;
    kern_thread_state(ku->k, tc->native_id, &st);
    if (!st.known) {
        /* Not in the table: no switch or tick since the engine started (asleep since
         * before, or running without a tick yet), or its slot (tid & 65535) is another
         * target thread's. /proc says which, once: any switch of this thread afterwards
         * writes its slot, so while the slot reads as it did just before that read, the
         * thread is as /proc said (never stale). A slot that moved (this thread's switch,
         * or a colliding thread's) is read again: /proc once more. Either way the round
         * reads its stack (not th->kernel). */
        if (tc->kern.st_tid == tc->native_id && st.slot_read && st.slot_seq == tc->kern.st_seq &&
            st.slot_tid == tc->kern.st_owner && st.slot_ns == tc->kern.st_ns) {
            th->on_cpu = tc->kern.st_on;
            return;
        }
        ku->stats.proc_reads++;
        tc->kern.st_tid = 0;
        if (proc_task_state(u->p, tc->native_id, &state) != REMORA_OK)
            return;                 /* gone, or unreadable: not on a CPU */
        th->on_cpu = state == 'R';
        if (st.slot_read) {
            tc->kern.st_tid = tc->native_id;
            tc->kern.st_on = th->on_cpu;
            tc->kern.st_seq = st.slot_seq;
            tc->kern.st_owner = st.slot_tid;
            tc->kern.st_ns = st.slot_ns;
        }
        return;
    }
    tc->kern.st_tid = 0;
    th->on_cpu = st.on_cpu || st.runnable;
    th->runnable = !st.on_cpu && st.runnable;
    if (!st.on_cpu) {
        ku_switch_t *e = &ku->sw[(uint32_t)tc->native_id % UNW_KERN_SWITCH];
        tc->kern.sw_since = st.since_ns;
        if (e->tid != tc->native_id) {
            e->tid = tc->native_id;     /* the slot becomes this thread's */
            e->next = 0;
            for (i = 0; i < KU_SWITCH_KEEP; i++)
                e->rec[i].t_ns = 0;
        }
        e->want_ns = st.since_ns;   /* read from the ring after this: kept */
    }
    /* on a CPU and sampled by its ticks: the round counts none of its time; nor of one
     * preempted on the CPU remora runs on as the round woke: remora's own wake-up
     * preempted it (a round would find it so at every round on that CPU); else a thread
     * waiting for a CPU is the round's, read as it stands (one that remora preempted and
     * another task keeps waiting, by_self in the table, too: its ticks stop while it waits,
     * so the round counts that time: idle/wake's cruncher went uncounted when this took
     * by_self for the wake-up) */
    th->kernel = (st.on_cpu || (th->runnable && st.cpu == ku->cpu &&
                                (int64_t)st.since_ns + KU_WAKE_NS >= ku->woke_ns)) &&
                 tc->kern.tid == tc->native_id && tc->kern.ts == tc->tstate;
    if (st.on_cpu && !th->kernel)
        ku->stats.missed++;
    /* its time off a CPU since a round last looked at it (off a CPU and the round's: what
     * its sample stands for; else carried): the time counted so is the time off a CPU,
     * whatever the stints' lengths. Counted as a period at least at each round that found
     * it off (the rule before), a thread that runs in short bursts between waits had its
     * waits counted as more or less than they lasted, as the rounds fell on its bursts */
    if (ku->period_ns > 0) {
        if (tc->kern.off_tid != tc->native_id || tc->kern.off.ns < ku->resumed_ns)
            tc->kern.off = (kern_offw_t){0, 0, 0};
        tc->kern.off_tid = tc->native_id;
        weighed = kern_off_weigh(&tc->kern.off, ku->woke_ns, cpu_time(&st, ku->woke_ns), (int64_t)ku->period_ns,
                                !st.on_cpu && !th->kernel, &periods);
    }
    /* With KU_BEHIND periods of CPU time and no tick (a tick comes every period of it):
     * its CPU is held up (a virtual CPU its host did not run, interrupts off), and the
     * thread neither moves nor ticks; the round reads it, its sample standing for the
     * periods of CPU time since its last tick or since the last round that read it so.
     * Its tick, when the CPU goes on, stands for one period. */
    if (th->kernel && behind(ku, &st, ku->woke_ns)) {
        uint64_t cpu = cpu_time(&st, ku->woke_ns), from = st.tick_cpu, n;
        if (tc->kern.behind_tid == tc->native_id && tc->kern.behind_cpu > from && tc->kern.behind_cpu <= cpu)
            from = tc->kern.behind_cpu;
        n = (cpu - from) / (uint64_t)ku->period_ns;
        if (n == 0)
            return;                 /* no period of CPU time since the last such reading */
        if (n > KU_MAX_PERIODS)
            n = KU_MAX_PERIODS;
        th->kernel = 0;
        th->periods = (unsigned)n;
        tc->kern.behind_tid = tc->native_id;
        tc->kern.behind_cpu = from + n * (uint64_t)ku->period_ns;   /* the rest is the next's */
        ku->stats.behind++;
        return;
    }
    if (weighed) {
        th->periods = periods;
        th->weighed = 1;
        return;
    }
    /* else (no look before this): each period since it went off, or from the last
     * round, is this reading's (rounds after one that read nothing are up to 1 ms apart) */
    if (!st.on_cpu && ku->period_ns > 0 && ku->looked_ns > 0) {
        int64_t from = (int64_t)st.since_ns > ku->looked_ns ? (int64_t)st.since_ns : ku->looked_ns;
        int64_t n = from > 0 && ku->woke_ns > from ? (ku->woke_ns - from + ku->period_ns / 2) / ku->period_ns : 1;
        th->periods = n < 1 ? 1 : n > KU_MAX_PERIODS ? KU_MAX_PERIODS : (unsigned)n;
    }
}

/* The kernel's fingerprint of a cached entry, mixed as the kernel mixes what it read
 * (kern.h's kern_fp_mix), from the entry's span and str images; 0 (never a mix) when the
 * images do not hold what the kernel reads. */
static uint64_t entry_kfp(unw_code_t *e, const kern_layout_t *kl)
{
    uint64_t w[KERN_FP_WORDS + 2 * KERN_FP_STR_WORDS];
    unsigned n = (kl->fp_len + 7) / 8, k;

    if (e->kfp != 0)
        return e->kfp;
    memset(w, 0, sizeof w);
    memcpy(w, e->fp, kl->fp_len);
    if (kl->str_hash != 0) {
        for (k = 0; k < 2; k++) {
            /* an image starts after the reference count (8 bytes in): length, hash, and
             * the bytes at str_data */
            const unsigned char *img = e->str_img + k * UNW_FP_STR;
            uint64_t len;
            if (e->str_img == NULL || e->str_len[k] < 24 || kl->str_data < 8)
                return 0;
            memcpy(&len, img + 8, 8);
            if (len > KERN_FP_STR_DATA)
                len = KERN_FP_STR_DATA;
            if (kl->str_data - 8 + len > e->str_len[k])
                return 0;
            memcpy(&w[n], img + 8, 16);
            memcpy(&w[n + 2], img + kl->str_data - 8, (size_t)len);
            n += KERN_FP_STR_WORDS;
        }
    }
    return e->kfp = kern_fp_mix(w, n);
}

/* The cached entry naming a frame the kernel saw, or NULL. Returns 0 or a fatal code. */
/* The code-object counter now (0 when it cannot be read). */
static uint64_t gen_now(unwinder_t *u)
{
    const kern_layout_t *kl = &u->kern->lay;
    uint64_t v = 0;

    if (proc_read(u->p, kl->gen_addr, &v, kl->gen_size) != REMORA_OK)
        return 0;
    return v;
}

/* The cached entry naming a frame of a tick with the counter at 'gen' (ks->gen), or NULL.
 * With a fingerprint (fp != 0): the entry at the frame's code address carrying it. Without
 * (KERN_S_GEN): the entry proved at that counter value; else the object read now, if the
 * counter is still that value (no code object made or freed since the tick, so the one
 * at the address is the frame's, which held it alive). *now caches the counter's value
 * read for the tick (0: not read yet). Returns 0 or a fatal code. */
/* The kernel's known map told that the entry at 'code' is named (its frames then go
 * without their names): once per entry and fingerprint, a system call each. */
static void known(unwinder_t *u, uint64_t code, unw_code_t *e)
{
    uint64_t fp = entry_kfp(e, &u->kern->lay);

    if (fp == 0 || e->kknown == fp || !u->kern->lay.nm_on)
        return;
    if (kern_known(u->kern->k, code, fp) == REMORA_OK)
        e->kknown = fp;
}

/* 3.12/3.13, where the counter is the version the next code object made gets (its
 * co_version, then the counter moves on): was the object e read now made before the
 * counter read 'gen' at the tick? Then it was alive at the tick, and alive now, so at
 * its address all along: the tick's. (3.14+ count the objects freed instead.) */
static int made_before(const unwinder_t *u, const unw_code_t *e, uint64_t gen)
{
    const py_layout_t *L = &u->target->layout;
    uint64_t off;
    size_t len;
    uint32_t v;

    if (L->co_version == 0 || L->is_code_generation != 0 || u->kern->lay.gen_size != 4)
        return 0;
    code_fp_span(L, &off, &len);
    if (L->co_version < off || L->co_version + 4 > off + len)
        return 0;
    memcpy(&v, e->fp + (L->co_version - off), 4);
    return v != 0 && (uint64_t)v < gen;
}

static int frame_code(unwinder_t *u, const kern_frame_t *f, uint64_t gen, uint64_t *now,
                      unw_code_t **out)
{
    const kern_layout_t *kl = &u->kern->lay;
    unw_code_t *e = code_cache_peek(u->codes, f->code);
    int err;

    *out = NULL;
    if (f->fp == 0) {
        if (e != NULL && e->kgen == gen + 1) {
            *out = e;
            return REMORA_OK;
        }
        err = code_cache_get(u->codes, u->p, u->target, f->code, &e);
        if (err == REMORA_ENOPROC || err == REMORA_ENOMEM)
            return err;
        if (*now == 0)
            *now = gen_now(u) + 1;
        /* no code object made since the tick; or (3.12/3.13) the object there now was
         * made before it (under code made all the time, a program compiling templates
         * per request, the count moves between nearly every tick and its drain) */
        if (err != REMORA_OK || !(*now == gen + 1 || made_before(u, e, gen)))
            u->kern->gen_failed = 1;
        if (err == REMORA_OK && (*now == gen + 1 || made_before(u, e, gen))) {
            e->kgen = gen + 1;
            known(u, f->code, e);
            *out = e;
        }
        return REMORA_OK;
    }
    if (e == NULL || entry_kfp(e, kl) != f->fp) {
        /* not cached, or cached for another object: read it now; it names the frame
         * only if it is still the object the kernel saw */
        err = code_cache_get(u->codes, u->p, u->target, f->code, &e);
        if (err == REMORA_ENOPROC || err == REMORA_ENOMEM)
            return err;
        if (err != REMORA_OK || entry_kfp(e, kl) != f->fp)
            return REMORA_OK;
    }
    if (gen != 0)
        e->kgen = gen + 1;      /* the object at its address while the counter was 'gen' */
    known(u, f->code, e);
    *out = e;
    return REMORA_OK;
}

/* Does the kernel's walk end where every thread's stack is rooted (sample.c's rooted())?
 * Never at a generator's frame; 3.11 at an is_entry frame, 3.12+ at a C-owned shim. An
 * empty walk is not rooted either: a Python thread running C code between two frames
 * (3.11: a C call's cframe pushed before its frame) is read from user space. */
static int kern_rooted(const py_layout_t *L, const kern_sample_t *ks)
{
    const kern_frame_t *f;

    if (ks->nframes == 0)
        return 0;
    if (ks->nframes > KERN_MAX_FRAMES)
        return 0;
    f = &ks->frames[ks->nframes - 1];
    if (f->flags & KERN_F_GEN)
        return 0;
    if (L->walk_root == PY_ROOT_ENTRY)
        return (f->flags & KERN_F_ENTRY) != 0;
    if (L->walk_root == PY_ROOT_SHIM)
        return (f->flags & KERN_F_SHIM) != 0;
    return 1;
}

/* The thread of the last round with this tid, or NULL: the state the kernel walked from
 * when the round listed it with this tid (3.9-3.11 give a state made for a thread not
 * started yet its creator's ids), else the first with the tid. */
static const unw_thread_t *last_thread(const unwinder_t *u, pid_t tid, uint64_t tstate)
{
    const unw_thread_t *first = NULL;
    size_t i;

    for (i = 0; i < u->nthreads; i++)
        if (u->threads[i].native_id == tid) {
            if (u->threads[i].tstate == tstate)
                return &u->threads[i];
            if (first == NULL)
                first = &u->threads[i];
        }
    return first;
}

static void tick_failed(struct unw_kern *ku, pid_t tid)
{
    size_t i;

    ku->stats.fallback++;
    for (i = 0; i < ku->npending && ku->pending[i].tid != tid; i++)
        ;
    if (i == ku->npending) {
        if (i == KU_FAILED)
            return;
        ku->pending[ku->npending++] = (ku_failed_t){ tid, 0 };
    }
    ku->pending[i].n++;
}

/* The k-th frame of a walk named from the names the walk read with it (its code object
 * freed, or not the one at its address now): its function and file from the str images
 * parsed as a str read here would be, its line the code object's first line. 1 when
 * named. */
static int named_frame(unwinder_t *u, const kern_sample_t *ks, size_t k, unw_frame_t *fr)
{
    const py_layout_t *L = &u->target->layout;
    char name[4 * KERN_NAME_IMG + 1], file[4 * KERN_NAME_IMG + 1];  /* UTF-8 of the images at most */
    size_t i, nlen, flen;

    for (i = 0; i < ks->nnamed && i < KERN_NAMED; i++) {
        const kern_named_t *nm = &ks->named[i];
        if (nm->frame != k)
            continue;
        if (nm->name_len > KERN_NAME_IMG || nm->file_len > KERN_NAME_IMG ||
            pystr_from_head(NULL, L, 0, nm->name, nm->name_len, name, sizeof name, &nlen) != REMORA_OK ||
            pystr_from_head(NULL, L, 0, nm->file, nm->file_len, file, sizeof file, &flen) != REMORA_OK)
            return 0;
        fr->function = strtab_intern(u->strs, name, nlen);
        fr->file = strtab_intern(u->strs, file, flen);
        fr->line = nm->firstlineno;
        return fr->function != NULL && fr->file != NULL;
    }
    return 0;
}

/* The frames of a kernel walk (a tick's or a switch-out's) named into ku->frames: *n of
 * them, the innermost *cut of which (a frame whose code object could not be proved and
 * every one inside it) are not known. Returns 0, REMORA_ENOPROC or REMORA_ENOMEM. */
static int kern_name(unwinder_t *u, const kern_sample_t *ks, size_t *nout, size_t *cutout)
{
    const py_layout_t *L = &u->target->layout;
    struct unw_kern *ku = u->kern;
    size_t k, n = 0, cut = 0;
    uint64_t gen_read = 0;
    int err;

    *nout = *cutout = 0;
    for (k = 0; k < ks->nframes && k < KERN_MAX_FRAMES; k++) {
        const kern_frame_t *f = &ks->frames[k];
        unw_frame_t *fr;
        unw_code_t *e;
        if (f->flags & KERN_F_SHIM)
            continue;
        if ((err = frame_code(u, f, ks->gen, &gen_read, &e)) != REMORA_OK)
            return err;
        fr = &ku->frames[n++];
        memset(fr, 0, sizeof *fr);
        if (e == NULL) {
            /* the names the walk read with it, else this frame and every inner one are
             * not known */
            if (!named_frame(u, ks, k, fr))
                cut = n;
            else
                ku->stats.named++;
            fr->addr = f->addr;
            fr->code = f->code;
            fr->offset = frame_addrq(L, f->code, f->instr);
            fr->gen = (f->flags & KERN_F_GEN) != 0;
            continue;
        }
        fr->function = e->function;
        fr->file = e->file;
        fr->addr = f->addr;
        fr->code = f->code;
        fr->gen = (f->flags & KERN_F_GEN) != 0;
        fr->offset = frame_addrq(L, f->code, f->instr);
        fr->line = (u->want & UNW_WANT_FIRSTLINE) ? e->firstlineno : code_line(e, L, fr->offset);
        /* the instruction the walk caught the innermost frame at, named now */
        if ((u->want & UNW_WANT_OPCODES) && n - 1 == cut)
            fr->op = code_opcode(u, e, fr->offset);
        /* where one C call of the eval loop began, as keep_raw() decides it */
        if (L->walk_root == PY_ROOT_ANY) {
            fr->entry = 1;
        } else if (L->walk_root == PY_ROOT_ENTRY) {
            fr->entry = (f->flags & KERN_F_ENTRY) != 0;
        } else if (k + 1 < ks->nframes && (ks->frames[k + 1].flags & KERN_F_SHIM)) {
            fr->entry = 1;
            fr->below = ks->frames[k + 1].addr;
        }
    }
    if (cut > 0)
        memmove(ku->frames, ku->frames + cut, (n - cut) * sizeof *ku->frames);
    *nout = n;
    *cutout = cut;
    return REMORA_OK;
}

int unw_kern_tick(unwinder_t *u, const kern_sample_t *ks, const unw_thread_t **out)
{
    const py_layout_t *L = &u->target->layout;
    struct unw_kern *ku = u->kern;
    const unw_thread_t *last = last_thread(u, ks->tid, ks->tstate);
    unw_thread_t *th = &ku->th;
    size_t n, cut;
    int err;

    *out = NULL;
    if (last == NULL) {
        ku->stats.gone++;           /* not in the last round's list: gone since */
        return REMORA_EFAULT;
    }
    if (ks->flags & (KERN_S_FAULT | KERN_S_NOSTATE | KERN_S_CUT) || !kern_rooted(L, ks)) {
        /* nothing to root the frames read at (a link not yet written: a call or return
         * half done), or deeper than the kernel walks: user space reads the thread */
        if (!(ks->flags & (KERN_S_FAULT | KERN_S_NOSTATE | KERN_S_CUT)))
            ku->stats.unrooted++;
        tick_failed(ku, ks->tid);
        return REMORA_EFAULT;
    }
    if ((err = kern_name(u, ks, &n, &cut)) != REMORA_OK)
        return err;
    if (n == 0) {
        tick_failed(ku, ks->tid);   /* shims only: between two frames, as an empty walk */
        return REMORA_EFAULT;
    }
    /* the thread as the last round knew it, its stack as the tick read it */
    *th = *last;
    th->frames = ku->frames;
    th->nframes = n - cut;
    th->held = 0;
    th->held_id = 0;
    th->partial = cut > 0;
    th->moving_in_frames = 0;
    th->error = 0;
    th->on_cpu = 1;
    th->runnable = 0;
    th->kernel = 1;
    th->failed_ticks = 0;
    /* the thread's status as the tick read it, never the last round's: the GIL, its
     * request and the exception state with the frames, in one instant */
    if (ku->lay.ts_interp != 0) {
        th->gc = (ks->flags & KERN_S_GC) != 0;
        th->holds_gil = (ks->flags & KERN_S_GIL) != 0;
        th->gil_requested = (ks->flags & KERN_S_GIL_REQ) != 0;
    } else {
        th->gc = 0;             /* not read at the tick: no <GC> frame claimed */
    }
    if (u->want & UNW_WANT_EXC)
        th->handling_exc = !(ks->flags & KERN_S_EXC_UNKNOWN) && ku->lay.exc_on ?
                           (ks->flags & KERN_S_EXC) != 0 : -1;
    th->task = 0;
    th->task_frames = 0;
    /* --async: its running task from these frames, never from a read made after them */
    if (u->want & UNW_WANT_TASKS)
        tasks_from_frames(u, th, last->task, ks->task);
    th->t_ns = (int64_t)ks->t_ns;
    /* --native: the C stack the tick copied, merged with its Python frames; a tick whose
     * copy was lost says so (never a live read: the thread has moved on) */
    if (u->native != NULL && (u->want & UNW_WANT_NATIVE)) {
        const kern_native_t *kn = ks->native;
        if (kn != NULL && kn->has_ts_frame)
            native_set_ts_frame(u->native, kn->ts_frame);
        err = kn != NULL ? native_merge_buffer(u->native, L, kn->regs, kn->lo, kn->stack, kn->len, th)
                         : native_merge_none(u->native, L, th);
        if (err != REMORA_OK)
            return err;
    }
    ku->stats.samples++;
    if (cut > 0)
        ku->stats.partial++;
    if (ks->gen != 0 && !(ks->flags & KERN_S_GEN))
        ku->gen_seen = ks->gen;     /* proved at: the next round makes it the hint */
    *out = th;
    return REMORA_OK;
}

int unw_kern_switch(unwinder_t *u, const kern_sample_t *ks)
{
    struct unw_kern *ku = u->kern;
    ku_switch_rec_t *r;
    ku_switch_t *e;
    size_t k;

    if (ku == NULL || ks->tid <= 0 || ks->nframes == 0 || ks->nframes > KERN_MAX_FRAMES)
        return REMORA_OK;
    e = &ku->sw[(uint32_t)ks->tid % UNW_KERN_SWITCH];
    if (e->tid != ks->tid) {        /* the slot becomes this thread's */
        e->tid = ks->tid;
        e->next = 0;
        e->want_ns = 0;
        for (k = 0; k < KU_SWITCH_KEEP; k++)
            e->rec[k].t_ns = 0;
    }
    if (e->want_ns != 0 && e->rec[e->next].t_ns == e->want_ns)
        e->next = (e->next + 1) % KU_SWITCH_KEEP;
    r = &e->rec[e->next];
    /* grown to the deepest stack seen, KERN_MAX_FRAMES at most: no allocation per record */
    if (ks->nframes > r->cap && remora_grow((void **)&r->frames, &r->cap, ks->nframes, sizeof *r->frames))
        return REMORA_ENOMEM;
    e->next = (e->next + 1) % KU_SWITCH_KEEP;
    r->t_ns = ks->t_ns;
    r->tstate = ks->tstate;
    r->flags = ks->flags;
    r->nframes = ks->nframes;
    memcpy(r->frames, ks->frames, ks->nframes * sizeof *r->frames);
    r->has_task = ks->task != NULL;
    if (r->has_task)
        r->task = *ks->task;
    r->has_native = 0;
    if (ks->native != NULL && ks->native->len <= KERN_NATIVE_MAX &&
        (r->natbuf != NULL || (r->natbuf = malloc(KERN_NATIVE_MAX)) != NULL)) {
        r->nat = *ks->native;
        memcpy(r->natbuf, ks->native->stack, ks->native->len);
        r->nat.stack = r->natbuf;
        r->has_native = 1;
    }
    return REMORA_OK;
}

int unw_kern_switch_stack(unwinder_t *u, size_t i, const unw_thread_t **out)
{
    struct unw_kern *ku = u->kern;
    const unw_thread_t *round;
    const rd_thread_t *tc;
    const ku_switch_rec_t *r;
    const ku_switch_t *e;
    kern_sample_t ks;
    unw_thread_t *th;
    size_t n, cut, k;
    int err;

    *out = NULL;
    if (ku == NULL || !(u->want & UNW_WANT_SWITCH) || u->reader == NULL || i >= u->nthreads ||
        i >= u->reader->nthreads)
        return REMORA_OK;
    round = &u->threads[i];
    tc = &u->reader->threads[i];
    if (round->kernel || round->native_id <= 0 || tc->kern.sw_since == 0 || tc->native_id != round->native_id)
        return REMORA_OK;
    e = &ku->sw[(uint32_t)round->native_id % UNW_KERN_SWITCH];
    /* the switch the table says it has been off its CPU since, from this thread state */
    for (k = 0; k < KU_SWITCH_KEEP && (e->rec[k].t_ns != tc->kern.sw_since || e->rec[k].tstate != round->tstate);
         k++)
        ;
    if (e->tid != round->native_id || k == KU_SWITCH_KEEP)
        return REMORA_OK;
    r = &e->rec[k];
    memset(&ks, 0, sizeof ks);
    ks.pid = proc_pid(u->p);
    ks.tid = e->tid;
    ks.t_ns = r->t_ns;
    ks.tstate = r->tstate;
    ks.flags = r->flags;
    ks.nframes = r->nframes;
    ks.frames = r->frames;
    if (!kern_rooted(&u->target->layout, &ks))
        return REMORA_OK;
    if ((err = kern_name(u, &ks, &n, &cut)) != REMORA_OK)
        return err;
    if (n == 0 || cut > 0)
        return REMORA_OK;           /* not all named: the round's reading stands */
    th = &ku->th;
    *th = *round;
    th->frames = ku->frames;
    th->nframes = n - cut;
    th->held = 0;
    th->held_id = 0;
    th->partial = 0;
    th->moving_in_frames = 0;
    th->error = 0;
    if (u->want & UNW_WANT_TASKS)
        tasks_from_frames(u, th, round->task, r->has_task ? &r->task : NULL);
    /* --native: the C stack it left its CPU with, as a tick's */
    if (u->native != NULL && (u->want & UNW_WANT_NATIVE)) {
        const py_layout_t *L = &u->target->layout;
        if (r->has_native && r->nat.has_ts_frame)
            native_set_ts_frame(u->native, r->nat.ts_frame);
        err = r->has_native ? native_merge_buffer(u->native, L, r->nat.regs, r->nat.lo, r->nat.stack,
                                                  r->nat.len, th)
                            : native_merge_none(u->native, L, th);
        if (err != REMORA_OK)
            return err;
    }
    ku->stats.switch_used++;
    *out = th;
    return REMORA_OK;
}

int unw_kern_light(unwinder_t *u, int64_t now_ns)
{
    struct unw_kern *ku = u->kern;
    const reader_t *r = u->reader;
    kern_tstate_t st;
    size_t i;
    int cpu;

    if (ku == NULL || r == NULL || !(u->want & UNW_WANT_ACTIVE) || ku->npending > 0 ||
        ku->full_ns == 0 || now_ns - ku->full_ns >= UNW_KERN_FULL_NS || u->nthreads != r->nthreads)
        return 0;
    for (i = 0; i < u->nthreads; i++) {
        const unw_thread_t *th = &u->threads[i];
        const rd_thread_t *tc = &r->threads[i];
        if (th->native_id <= 0 || tc->kern.tid != th->native_id)
            return 0;
        kern_thread_state(ku->k, th->native_id, &st);
        /* not in the table: asleep as /proc said, while its slot reads as it did then
         * (kern_cpu_state) */
        if (!st.known) {
            if (tc->kern.st_tid != th->native_id || !st.slot_read || st.slot_seq != tc->kern.st_seq ||
                st.slot_tid != tc->kern.st_owner || st.slot_ns != tc->kern.st_ns || tc->kern.st_on || th->holds_gil)
                return 0;
            continue;
        }
        /* waiting for a CPU (but for the one remora's wake-up took: as kern_cpu_state),
         * or asleep holding the GIL: the round's */
        if (!st.on_cpu && !st.runnable && th->holds_gil)
            return 0;
        if (behind(ku, &st, now_ns))    /* its ticks held up: the round reads it */
            return 0;
        if (st.runnable && (st.cpu != (cpu = sched_getcpu()) || (int64_t)st.since_ns + KU_WAKE_NS < now_ns))
            return 0;
    }
    /* the look at a thread asleep (no GIL) is this round's, as a full round's would be: its
     * time off a CPU until now is idle, counted so (unw_kern_light_idle), not weighed into
     * its next reading. Left to that reading, a thread that slept through light rounds and
     * was then found preempted stood for its sleep too, in the place it was preempted at
     * (a thread sleeping 6 ms in each 10 ms and spinning the rest had its spin counted
     * 55-65%) */
    for (i = 0; i < u->nthreads; i++) {
        rd_thread_t *tc = &u->reader->threads[i];
        unsigned periods = 0;
        kern_thread_state(ku->k, tc->native_id, &st);
        if (!st.known) {
            /* asleep since before the engine started, as /proc said (checked above: no
             * GIL, not running): each period since the last look is idle, as a round
             * would have left out (the full round after counts its own one). Without
             * this, a server's threads waiting since before the recording were left out
             * uncounted through every light round: 'left out as idle' 5,000-6,500 where
             * rounds x threads - written was about 9,000 */
            if (ku->period_ns > 0 && ku->checked_ns > 0 && now_ns > ku->checked_ns)
                ku->light_idle += (uint64_t)((now_ns - ku->checked_ns + ku->period_ns / 2) /
                                             ku->period_ns);
            continue;
        }
        if (st.on_cpu || st.runnable || ku->period_ns <= 0 ||
            tc->kern.off_tid != tc->native_id || tc->kern.off.ns < ku->resumed_ns)
            continue;
        if (kern_off_weigh(&tc->kern.off, now_ns, cpu_time(&st, now_ns), ku->period_ns, 1, &periods))
            ku->light_idle += periods;
    }
    ku->stats.light++;
    ku->checked_ns = now_ns;
    return 1;
}

uint64_t unw_kern_light_idle(unwinder_t *u)
{
    uint64_t n;

    if (u->kern == NULL)
        return 0;
    n = u->kern->light_idle;
    u->kern->light_idle = 0;
    return n;
}

void unw_kern_resume(unwinder_t *u, int64_t now_ns)
{
    struct unw_kern *ku = u->kern;
    size_t i;

    if (ku == NULL)
        return;
    /* a thread off a CPU stands for the periods since now, not since before the pause;
     * ticks that failed before it are not read for after it */
    ku->checked_ns = now_ns;
    ku->resumed_ns = now_ns;
    ku->npending = 0;
    /* its events were off, the switches still counted: a thread's CPU time while paused
     * is not ticks held up (behind()), so its next reading stands for its CPU time from
     * now on only (else a busy thread's first round after a 1.5 s pause stood for 1,500
     * periods taken while paused) */
    if (u->reader != NULL)
        for (i = 0; i < u->reader->nthreads; i++) {
            rd_thread_t *tc = &u->reader->threads[i];
            kern_tstate_t st;
            if (tc->native_id <= 0)
                continue;
            kern_thread_state(ku->k, tc->native_id, &st);
            tc->kern.behind_tid = tc->native_id;
            tc->kern.behind_cpu = st.known ? cpu_time(&st, now_ns) : 0;
        }
}

void unw_kern_round(unwinder_t *u, int64_t woke_ns)
{
    struct unw_kern *ku = u->kern;

    if (ku == NULL)
        return;
    ku->woke_ns = woke_ns;
    ku->full_ns = woke_ns;
    ku->looked_ns = ku->checked_ns;
    ku->checked_ns = woke_ns;
    /* the counter of the last tick proved with fingerprints: ticks at it go without;
     * unless a tick without them had a frame that could not be proved at its drain (a
     * program making or freeing code objects all the time: the count moves between a
     * tick and its drain), then none for a while, every tick fingerprinted (no cost to
     * a program whose code stays) */
    if (ku->gen_failed) {
        ku->gen_failed = 0;
        ku->gen_backoff = ku->gen_backoff == 0 ? KU_GEN_BACKOFF_NS :
                          ku->gen_backoff < KU_GEN_BACKOFF_MAX_NS ? 2 * ku->gen_backoff : ku->gen_backoff;
        ku->gen_off_until = woke_ns + ku->gen_backoff;
        if (ku->lay.gen_hint != KERN_GEN_NONE) {
            ku->lay.gen_hint = KERN_GEN_NONE;
            kern_add_process(ku->k, proc_pid(u->p), &ku->lay);
        }
    } else if (ku->lay.gen_addr != 0 && ku->gen_seen != 0 && ku->gen_seen != ku->lay.gen_hint &&
               woke_ns >= ku->gen_off_until) {
        ku->lay.gen_hint = ku->gen_seen;
        kern_add_process(ku->k, proc_pid(u->p), &ku->lay);
    }
    ku->cpu = sched_getcpu();
    memcpy(ku->now, ku->pending, ku->npending * sizeof *ku->pending);
    ku->nnow = ku->npending;
    ku->npending = 0;
}
