/* lib/sample_api.c — remora_sample(): the command's sampling loop (sample/sampler.c) run
 * on a handle's target, with either engine (engine.c decides), each thread sample kept
 * handed to the caller's callback in the public form. A run has an unwinder and a stack
 * table of its own (the handle's readings are left as they were); each sample's frames
 * are its node's path in that table, so the table's prefix sharing is the frame cache
 * and a warm round allocates nothing. Reads the target as the command does; with
 * blocking (or REMORA_NATIVE) it stops its threads (ptrace) for each round.
 */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

#include "lib.h"
#include "../kern/kern.h"
#include "../sample/sampler.h"
#include "../util/util.h"

#define LIB_RATE_DEFAULT 100.0
#define LIB_RATE_MAX 100000.0

/* What remora_sample() keeps on the handle between runs, and its run's state. */
struct lib_sampling {
    volatile sig_atomic_t stop;     /* remora_sample_stop(), or the callback said so */
    const char *engine;             /* the last run's engine, NULL before one */
    char why_not[320];              /* ... why not the kernel's ("" when it was) */
    remora_sample_stats_t st;
    remora_frame_t *fr;             /* a sample's frames (grows with the deepest stack) */
    size_t cap_fr;
    /* the run under way */
    sampler_t *s;
    uint32_t gc_frame, moving_frame;    /* the table's <GC> and <moving> */
    unsigned flags;                 /* the handle's REMORA_* */
    int mode, status_known, async;
    remora_sample_cb cb;
    void *ctx;
};

void lib_sampling_free(struct lib_sampling *smp)
{
    if (smp == NULL)
        return;
    free(smp->fr);
    free(smp);
}

void remora_sample_opts_init(remora_sample_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->rate_hz = LIB_RATE_DEFAULT;
    o->mode = REMORA_MODE_WALL;
    o->engine = REMORA_ENGINE_AUTO;
    o->gc = 1;
}

void remora_sample_stop(remora_t *r)
{
    struct lib_sampling *smp = *remora_sampling(r);

    if (smp != NULL)
        smp->stop = 1;
}

void remora_get_sample_stats(const remora_t *r, remora_sample_stats_t *out)
{
    struct lib_sampling *smp = *remora_sampling((remora_t *)r);

    if (smp != NULL)
        *out = smp->st;
    else
        memset(out, 0, sizeof *out);
}

const char *remora_engine(const remora_t *r, const char **why_not)
{
    struct lib_sampling *smp = *remora_sampling((remora_t *)r);

    if (why_not != NULL)
        *why_not = smp != NULL && smp->engine != NULL ? smp->why_not : "";
    return smp != NULL ? smp->engine : NULL;
}

/* r's message: one line, returned code err. */
static int lib_fail(remora_t *r, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int lib_fail(remora_t *r, int err, const char *fmt, ...)
{
    size_t cap;
    char *buf = remora_errbuf(r, &cap);
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(buf, cap, fmt, ap);
    va_end(ap);
    return err;
}

/* Options the run cannot take: a message and REMORA_EUSAGE, else 0. */
static int check_opts(remora_t *r, const remora_sample_opts_t *o)
{
    size_t i;

    if (!(o->rate_hz > 0 && o->rate_hz <= LIB_RATE_MAX))
        return lib_fail(r, REMORA_EUSAGE, "rate %g Hz: give a rate above 0, at most 100,000 Hz",
                        o->rate_hz);
    if (!(o->duration_s >= 0 && o->duration_s <= 1e9))
        return lib_fail(r, REMORA_EUSAGE, "duration %g s: give 0 (no limit) or a positive "
                        "number of seconds", o->duration_s);
    if (o->mode < REMORA_MODE_WALL || o->mode > REMORA_MODE_EXCEPTION)
        return lib_fail(r, REMORA_EUSAGE, "unknown mode %d", o->mode);
    if (o->engine < REMORA_ENGINE_AUTO || o->engine > REMORA_ENGINE_USER)
        return lib_fail(r, REMORA_EUSAGE, "unknown engine %d", o->engine);
    for (i = 0; i < sizeof o->reserved / sizeof o->reserved[0]; i++)
        if (o->reserved[i] != 0)
            return lib_fail(r, REMORA_EUSAGE, "reserved options set: start from "
                            "remora_sample_opts_init()");
    if (o->idle && o->mode == REMORA_MODE_CPU)
        return lib_fail(r, REMORA_EUSAGE, "cpu mode keeps only threads on a CPU: not with idle");
    if (o->async && (remora_flags(r) & REMORA_NATIVE))
        return lib_fail(r, REMORA_EUSAGE, "async writes a task's coroutine frames in place of "
                        "the loop's, REMORA_NATIVE merges C frames into them: not both");
    if (proc_kind(remora_proc(r)) != PROC_LIVE)
        return lib_fail(r, REMORA_EUSAGE, "a core file is read with remora_read(), not sampled");
    if (o->mode == REMORA_MODE_EXCEPTION && remora_target(r)->layout.ts_exc_info == 0)
        return lib_fail(r, REMORA_EVERSION, "exception mode: remora does not know where Python "
                        "%s keeps a thread's exception state", remora_target(r)->version);
    return REMORA_OK;
}

/* A sample of the table: node's path, innermost first, into smp->fr (grown when deeper
 * than any before). Returns the frames, or -1 when out of memory; *partial set when the
 * innermost is the <moving> marker (left out). */
static long sample_frames(struct lib_sampling *smp, const stk_table_t *t, uint32_t node,
                          int *partial)
{
    size_t n = 0, depth = 0;
    uint32_t i;

    for (i = node; i != STK_NONE && stk_node_at(t, i)->frame != STK_NONE; i = stk_node_at(t, i)->parent)
        depth++;
    if (depth > smp->cap_fr &&
        remora_grow((void **)&smp->fr, &smp->cap_fr, depth, sizeof *smp->fr))
        return -1;
    *partial = 0;
    for (i = node; i != STK_NONE; i = stk_node_at(t, i)->parent) {
        const stk_node_t *nd = stk_node_at(t, i);
        const stk_frame_t *f;
        remora_frame_t *o;
        if (nd->frame == STK_NONE)
            break;
        if (nd->frame == smp->moving_frame) {
            *partial = 1;
            continue;
        }
        f = stk_frame_at(t, nd->frame);
        o = &smp->fr[n++];
        o->function = f->function;
        o->file = f->file;
        o->line = f->line;
        o->end_line = o->column = o->end_column = -1;
        o->opname = f->op;
        o->opcode = -1;
        o->offset = f->op != NULL ? f->offset : -1;
        o->kind = nd->frame == smp->gc_frame ? REMORA_FRAME_GC :
                  f->native ? REMORA_FRAME_NATIVE : REMORA_FRAME_PYTHON;
    }
    return (long)n;
}

/* The sampler's sink: the sample in the public form, to the caller's callback. */
static int lib_sink(void *ctx, const stk_table_t *t, uint32_t thread, uint32_t node,
                    int64_t t_ns, unsigned flags)
{
    struct lib_sampling *smp = ctx;
    unsigned count, index;
    const unw_thread_t *th = sampler_current_thread(smp->s, &count, &index);
    remora_sample_t o;
    long n;

    /* a thread off a CPU the kernel engine's rounds weigh: one sample, its periods said */
    if (smp->stop || index > 0)
        return REMORA_OK;
    if ((smp->flags & REMORA_MAIN_THREAD) && (th == NULL || !th->is_main))
        return REMORA_OK;
    if ((n = sample_frames(smp, t, node, &o.partial)) < 0)
        return REMORA_ENOMEM;
    o.time_ns = t_ns;
    o.round = sampler_stats(smp->s)->rounds;
    o.periods = count;
    o.native_id = stk_thread_at(t, thread)->tid;
    o.ident = th != NULL ? th->ident : 0;
    o.interpreter_id = th != NULL ? th->interp_id : 0;
    o.status = (flags & SAMPLE_F_GIL ? REMORA_THREAD_HAS_GIL : 0) |
               (th != NULL && th->is_main ? REMORA_THREAD_MAIN : 0) |
               (smp->mode == REMORA_MODE_EXCEPTION ? REMORA_THREAD_HAS_EXCEPTION : 0) |
               /* 3.15's own flag, read with the stack (at the tick, or by the round) */
               (th != NULL && th->gil_requested && !(flags & SAMPLE_F_GIL) ? REMORA_THREAD_GIL_REQUESTED : 0);
    if (smp->status_known || (flags & SAMPLE_F_TICK))
        o.status |= flags & SAMPLE_F_ON_CPU ? REMORA_THREAD_ON_CPU : 0;
    else
        o.status |= REMORA_THREAD_UNKNOWN;
    o.thread_name = stk_thread_at(t, thread)->name ? stk_thread_at(t, thread)->name : "";
    o.kernel = (flags & SAMPLE_F_TICK) != 0;
    o.task_id = smp->async && th != NULL ? th->task : 0;
    o.nframes = (size_t)n;
    o.frames = smp->fr;
    smp->st.samples++;
    if (smp->cb(smp->ctx, &o) != 0)
        smp->stop = 1;
    return REMORA_OK;
}

/* --async's check: the target's tasks can be read (a list that moved is no refusal). */
static int check_async(remora_t *r, unwinder_t *u)
{
    unw_task_t *tasks;
    size_t n;
    int err = unw_tasks(u, &tasks, &n);

    if (err == REMORA_OK || err == REMORA_ECORRUPT || err == REMORA_EFAULT)
        return REMORA_OK;
    if (err == REMORA_ENOPROC || err == REMORA_EPERM || err == REMORA_ENOMEM)
        return lib_fail(r, err, "async: reading the asyncio tasks of pid %d failed: %s",
                        (int)remora_pid(r), remora_strerror(err));
    return lib_fail(r, REMORA_EVERSION, "async: remora cannot read the asyncio tasks of Python "
                    "%s%s%s", remora_target(r)->version, *unw_tasks_problem(u) ? ": " : " yet",
                    unw_tasks_problem(u));
}

int remora_sample(remora_t *r, const remora_sample_opts_t *o, remora_sample_cb cb, void *ctx)
{
    struct lib_sampling **slot, *smp;
    const py_target_t *t;
    remora_engine_req_t q;
    sampler_opts_t so;
    sample_sink_t sink;
    stk_table_t *table = NULL;
    unwinder_t *u = NULL;
    struct kern *k = NULL;
    freezer_t **frz;
    char why[256] = "";
    unsigned flags;
    int err, refused, slack, native;

    if (r == NULL)
        return REMORA_EUSAGE;
    remora_errbuf(r, &(size_t){ 0 })[0] = '\0';
    if (o == NULL || cb == NULL)
        return lib_fail(r, REMORA_EUSAGE, "remora_sample: no options or no callback");
    if ((err = check_opts(r, o)) != REMORA_OK)
        return err;
    slot = remora_sampling(r);
    if (*slot == NULL && (*slot = calloc(1, sizeof **slot)) == NULL)
        return lib_fail(r, REMORA_ENOMEM, "out of memory");
    smp = *slot;
    memset(&smp->st, 0, sizeof smp->st);
    smp->stop = 0;
    smp->engine = NULL;
    smp->why_not[0] = '\0';
    flags = remora_flags(r);
    native = (flags & REMORA_NATIVE) != 0;
    t = remora_target(r);

    /* the engine, decided as the command decides it */
    memset(&q, 0, sizeof q);
    q.engine = o->engine;
    q.rate_hz = o->rate_hz;
    q.mode = o->mode;
    q.blocking = o->blocking || native;
    q.native = native;
    q.async = o->async;
    q.anchor = (flags & REMORA_FRAME_ANCHOR) && t->layout.ts_last_profiled != 0;
    err = remora_engine_open(&q, &k, &refused, why, sizeof why);
    if (err == REMORA_EUSAGE)
        return lib_fail(r, err, "the kernel engine cannot serve this sampling: %s", why);
    if (err != REMORA_OK) {
        remora_engine_refusal(err, why, smp->why_not, sizeof smp->why_not);
        return lib_fail(r, err, "%s", smp->why_not);
    }
    if (refused != REMORA_OK)
        remora_engine_refusal(refused, why, smp->why_not, sizeof smp->why_not);
    else if (k == NULL)
        snprintf(smp->why_not, sizeof smp->why_not, "%s", o->engine == REMORA_ENGINE_USER ?
                 "the user-space engine was asked for" : why);

    /* a run's own unwinder (the handle's readings untouched), on the engine */
    if ((err = unw_new(remora_proc(r), t, &u)) != REMORA_OK) {
        lib_fail(r, err, "out of memory");
        goto out;
    }
    if (native && (err = unw_native_enable(u)) != REMORA_OK) {
        lib_fail(r, err, "no ELF file of pid %d could be read for its C stacks (REMORA_NATIVE)",
                 (int)remora_pid(r));
        goto out;
    }
    if (o->async && (err = check_async(r, u)) != REMORA_OK)
        goto out;
    if ((err = remora_engine_enable(u, &k, o->mode, why, sizeof why)) != REMORA_OK) {
        remora_engine_refusal(err, why, smp->why_not, sizeof smp->why_not);
        if (o->engine == REMORA_ENGINE_KERNEL) {
            lib_fail(r, err, "%s", smp->why_not);
            goto out;
        }
        err = REMORA_OK;
    }
    smp->engine = k != NULL ? "kernel" : "user";
    if ((table = stk_new()) == NULL) {
        err = lib_fail(r, REMORA_ENOMEM, "out of memory");
        goto out;
    }

    memset(&so, 0, sizeof so);
    so.rate_hz = o->rate_hz;
    so.duration_s = o->duration_s;
    so.max_rounds = o->max_rounds;
    so.mode = o->mode;
    so.gc = o->gc;
    so.anchor = q.anchor;
    so.blocking = q.blocking;
    so.function = o->function;
    so.opcodes = o->opcodes || (flags & REMORA_OPCODES);
    so.idle = o->idle && !(flags & REMORA_ACTIVE);
    so.async = o->async ? SAMPLE_ASYNC_RUNNING : SAMPLE_ASYNC_OFF;
    so.kern = k;
    smp->flags = flags;
    smp->mode = o->mode;
    smp->async = o->async;
    smp->status_known = so.mode == REMORA_MODE_CPU || !so.idle;
    smp->cb = cb;
    smp->ctx = ctx;
    smp->gc_frame = stk_frame(table, "<GC>", "", 0);
    smp->moving_frame = stk_frame(table, UNW_MOVING, "", 0);
    sink.ctx = smp;
    sink.sample = lib_sink;
    /* the handle's own hold on the threads (REMORA_NATIVE) is let go: the run holds them
     * round by round, and the handle takes them again after */
    frz = remora_freezer(r);
    if (*frz != NULL) {
        freeze_free(*frz);
        *frz = NULL;
    }
    if ((err = sampler_new(u, remora_proc(r), table, &sink, &so, &smp->s)) != REMORA_OK) {
        lib_fail(r, err, err == REMORA_ENOMEM ? "out of memory" : "cannot stop pid %d's threads "
                 "with ptrace (%s)", (int)remora_pid(r), remora_strerror(err));
        goto out;
    }
    /* the sampler wakes on time (timer slack 1 ns): the caller's thread gets its own back */
    slack = prctl(PR_GET_TIMERSLACK, 0UL, 0UL, 0UL, 0UL);
    err = sampler_run(smp->s, &smp->stop, NULL, NULL);
    if (slack > 0)
        prctl(PR_SET_TIMERSLACK, (unsigned long)slack, 0UL, 0UL, 0UL);
    {
        const sampler_stats_t *st = sampler_stats(smp->s);
        smp->st.rounds = st->rounds;
        smp->st.late = st->late;
        smp->st.errors = st->errors;
        smp->st.kernel = st->kernel;
        smp->st.duration_ns = st->end_ns - st->start_ns;
    }
    if (err == REMORA_ENOPROC)
        lib_fail(r, err, "pid %d exited", (int)remora_pid(r));
    else if (err != REMORA_OK)
        lib_fail(r, err, "sampling pid %d stopped: %s", (int)remora_pid(r), remora_strerror(err));
out:
    sampler_free(smp->s);
    smp->s = NULL;
    unw_free(u);
    kern_close(k);                  /* after the unwinder that used it */
    stk_free(table);
    if (native && *remora_freezer(r) == NULL && proc_kind(remora_proc(r)) == PROC_LIVE) {
        int e = freeze_new(remora_proc(r), remora_freezer(r));
        if (e == REMORA_OK)
            freeze_want_states(*remora_freezer(r));
        else if (err == REMORA_OK)
            err = lib_fail(r, e, "REMORA_NATIVE: cannot stop pid %d's threads with ptrace "
                           "again (%s)", (int)remora_pid(r), remora_strerror(e));
    }
    return err;
}
