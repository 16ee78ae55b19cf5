/* sample/sampler.c — the sampling loop: deadlines, modes, turning each thread's frames
 * into a node of the stack table, handed on to the sink.
 *
 * Rounds run on absolute deadlines (clock_nanosleep TIMER_ABSTIME) so the rate never
 * drifts; a round that cannot start on time is counted as late and skipped, not
 * squeezed in. Frames are mapped to table frames through a pointer-keyed cache, so a
 * warm round allocates nothing.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>

#include "remora.h"
#include "sampler.h"
#include "async.h"
#include "../py/py.h"
#include "../util/util.h"
#include "../kern/kern.h"

/* --subprocesses: the target's descendants, found by a scan of /proc every SUB_SCAN_NS,
 * each sampled in the same rounds through an unwinder of its own once its interpreter is
 * found (a child that is not Python yet, a shell or one that has not loaded it, is looked
 * at again on each scan, SUB_FIND_TRIES times at most). */
#define SUB_MAX 256
#define SUB_SCAN_NS 200000000
#define SUB_FIND_TRIES 50
#define SUB_BAD_ROUNDS 200          /* unreadable this long: it exec'd; find it anew */

typedef struct sub {
    pid_t pid;
    proc_t *p;
    py_target_t *t;
    unwinder_t *u;                  /* NULL until its interpreter is found */
    int tries, bad;
} sub_t;


/* A thread's previous stack (outermost first) and the trie node of each prefix: a new
 * stack that shares the prefix reuses its nodes, so aggregation costs O(changed frames). */
struct last_stack {
    unw_frame_t *frames;
    uint32_t *nodes;
    size_t n, cap;
};

typedef struct fmap_entry {
    const char *function, *file;   /* the unwinder's interned strings */
    int line;
    uint32_t frame;                /* table frame; STK_NONE = empty */
} fmap_entry_t;

struct sampler {
    unwinder_t *u;
    proc_t *p;
    stk_table_t *t;
    sample_sink_t sink;             /* sink.sample NULL: none */
    sampler_opts_t o;
    sampler_stats_t st;
    fmap_entry_t *fmap;
    size_t fmap_cap, fmap_count;
    uint32_t gc_frame;
    uint32_t moving_frame;          /* UNW_MOVING, above a partial stack */
    unsigned want;                  /* UNW_WANT_* for every unwinder */
    int child_status;
    /* (tid, interpreter id) → table thread, last seen; and that thread's last stack, to
     * reuse its path */
    pid_t *tids;
    int64_t *interps;
    uint32_t *tthreads;
    const char **tpy;               /* the Python name the table thread has (interned in
                                     * the table), NULL while it has the kernel's */
    struct last_stack *last;
    size_t ntids, cap_tids;
    sub_t *subs;
    size_t nsubs, cap_subs;
    freezer_t *frz;                 /* --blocking */
    async_t *async;                 /* --async (the target's tasks; never a descendant's) */
    pid_t found[SUB_MAX];           /* the last scan's descendants */
    int64_t next_scan;
    int64_t last_read_ns;           /* when the last round's reading began: no tick is
                                     * written before it */
    int64_t tick_ns;                /* the latest time a tick was written at */
    int paused;                     /* sampler_pause(): no rounds, no ticks */
    int64_t paused_at;              /* ... since (CLOCK_MONOTONIC) */
    sampler_hook_t hook;            /* sampler_set_hook(): called between rounds */
    void *hook_ctx;
    volatile sig_atomic_t *hook_poke;   /* set (by a signal handler): call it now */
    int64_t hook_every_ns, hook_next;
    int64_t hook_due;               /* sampler_hook_due(): called by then too (0: no) */
    unsigned round_light, round_full;   /* this round's processes that read nothing, and
                                     * those that read */
};

int64_t sampler_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
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
    s->want = (o->mode == SAMPLE_CPU ? UNW_WANT_CPU : !o->idle ? UNW_WANT_ACTIVE : 0) |
              (o->gc ? UNW_WANT_GC : 0) |
              (o->mode == SAMPLE_EXCEPTION ? UNW_WANT_EXC : 0) | (o->anchor ? UNW_WANT_ANCHOR : 0) |
              (o->function ? UNW_WANT_FIRSTLINE : 0) | (o->opcodes ? UNW_WANT_OPCODES : 0) |
              UNW_WANT_PYNAMES;
    if (o->async && u != NULL) {
        int err = async_new(t, &s->async);
        if (err) {
            sampler_free(s);
            return err;
        }
    }
    if (u != NULL)
        unw_set_want(u, s->want | (s->async != NULL ? UNW_WANT_TASKS : 0));
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
    free(s->tpy);
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

static size_t fmap_slot(const fmap_entry_t *m, size_t cap, const char *fn, const char *file, int line)
{
    uint64_t h = ((uint64_t)(uintptr_t)fn * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)(uintptr_t)file * 0xc2b2ae3d27d4eb4full) ^
                 (uint64_t)(unsigned)line * 0x165667b19e3779f9ull;
    size_t i = (size_t)(h >> 17) & (cap - 1);

    while (m[i].frame != STK_NONE &&
           (m[i].function != fn || m[i].file != file || m[i].line != line))
        i = (i + 1) & (cap - 1);
    return i;
}

static int fmap_grow(sampler_t *s)
{
    size_t ncap = s->fmap_cap * 2, i;
    fmap_entry_t *nm = malloc(ncap * sizeof *nm);

    if (nm == NULL)
        return -1;
    for (i = 0; i < ncap; i++)
        nm[i].frame = STK_NONE;
    for (i = 0; i < s->fmap_cap; i++) {
        const fmap_entry_t *e = &s->fmap[i];
        if (e->frame != STK_NONE)
            nm[fmap_slot(nm, ncap, e->function, e->file, e->line)] = *e;
    }
    free(s->fmap);
    s->fmap = nm;
    s->fmap_cap = ncap;
    return 0;
}

static uint32_t map_frame(sampler_t *s, const unw_frame_t *f)
{
    size_t i;
    uint32_t id;

    if (f->op != NULL)              /* --opcodes: not in the map, which keys no instruction */
        return stk_frame_op(s->t, f->function, f->file, f->line, f->op, f->offset);
    i = fmap_slot(s->fmap, s->fmap_cap, f->function, f->file, f->line);
    if (s->fmap[i].frame != STK_NONE)
        return s->fmap[i].frame;
    id = stk_frame_kind(s->t, f->function, f->file, f->line, f->native);
    if (id == STK_NONE)
        return STK_NONE;
    s->fmap[i].function = f->function;
    s->fmap[i].file = f->file;
    s->fmap[i].line = f->line;
    s->fmap[i].frame = id;
    if (++s->fmap_count * 2 > s->fmap_cap && fmap_grow(s))
        return STK_NONE;
    return id;
}

/* What follows a thread's name in the table: " [interpreter N]" for its state in a
 * subinterpreter (the main interpreter's, id 0, carry no mark), " [pid N]" for a
 * descendant's thread (--subprocesses). */
static void name_marks(char *name, size_t cap, int64_t interp, pid_t pid)
{
    size_t len = strlen(name);

    if (interp != 0 && len < cap)
        len += (size_t)snprintf(name + len, cap - len, " [interpreter %lld]", (long long)interp);
    if (pid != 0 && len < cap)
        snprintf(name + len, cap - len, " [pid %d]", (int)pid);
}

/* The table thread a thread's sample goes to, keyed by its native id and interpreter (a
 * thread that entered a subinterpreter has a stack in each), under its Python name
 * (threading.Thread's, as the unwinder last read it) or, while it has none, the kernel's
 * (from /proc), marked by name_marks(). A thread first seen under the kernel's name takes
 * its Python name when one is known (the kernel's stood for it); one renamed while
 * recorded goes on as another table thread of the same tid, so each name keeps the
 * samples taken under it; one whose Python name is not read any more keeps the last.
 * Returns the index in s->tids, or (size_t)-1 when out of memory. */
static size_t map_thread(sampler_t *s, proc_t *p, const unw_thread_t *ut)
{
    pid_t tid = ut->native_id, pid = p != s->p ? proc_pid(p) : 0;
    int64_t interp = ut->interp_id;
    const char *py = ut->py_name;
    size_t i;
    char name[1100] = "";
    uint32_t th;

    if (py != NULL && (pid != 0 || interp != 0)) {
        snprintf(name, sizeof name, "%.1024s", py);
        name_marks(name, sizeof name, interp, pid);
        py = name;
    }
    for (i = 0; i < s->ntids; i++)
        if (s->tids[i] == tid && s->interps[i] == interp)
            break;
    if (i < s->ntids) {
        if (py == NULL || (s->tpy[i] != NULL && strcmp(s->tpy[i], py) == 0))
            return i;
        if (s->tpy[i] == NULL) {
            if (stk_thread_rename(s->t, s->tthreads[i], py))
                return (size_t)-1;
        } else {
            th = stk_thread(s->t, tid, py);
            if (th == STK_NONE)
                return (size_t)-1;
            s->tthreads[i] = th;
            s->last[i].n = 0;       /* its nodes are the other thread's */
        }
        s->tpy[i] = stk_thread_at(s->t, s->tthreads[i])->name;
        return i;
    }
    if (s->ntids == s->cap_tids) {
        size_t ncap = s->cap_tids ? s->cap_tids * 2 : 16;
        pid_t *nt = realloc(s->tids, ncap * sizeof *nt);
        uint32_t *nn;
        const char **np;
        struct last_stack *nl;
        int64_t *ni;
        if (nt == NULL)
            return (size_t)-1;
        s->tids = nt;
        nn = realloc(s->tthreads, ncap * sizeof *nn);
        if (nn == NULL)
            return (size_t)-1;
        s->tthreads = nn;
        np = realloc(s->tpy, ncap * sizeof *np);
        if (np == NULL)
            return (size_t)-1;
        s->tpy = np;
        nl = realloc(s->last, ncap * sizeof *nl);
        if (nl == NULL)
            return (size_t)-1;
        s->last = nl;
        ni = realloc(s->interps, ncap * sizeof *ni);
        if (ni == NULL)
            return (size_t)-1;
        s->interps = ni;
        s->cap_tids = ncap;
    }
    if (py == NULL) {
        if (tid > 0)
            proc_task_name(p, tid, name, sizeof name);
        name_marks(name, sizeof name, interp, pid);
    }
    th = stk_thread(s->t, tid, py != NULL ? py : name);
    if (th == STK_NONE)
        return (size_t)-1;
    s->tids[s->ntids] = tid;
    s->interps[s->ntids] = interp;
    s->tthreads[s->ntids] = th;
    s->tpy[s->ntids] = py != NULL ? stk_thread_at(s->t, th)->name : NULL;
    memset(&s->last[s->ntids], 0, sizeof s->last[s->ntids]);
    return s->ntids++;
}

/* The trie node of a thread's stack (frames innermost first), reusing the nodes of the
 * prefix it shares with the thread's previous stack. STK_NONE when out of memory. */
static uint32_t stack_node(sampler_t *s, size_t ti, const unw_thread_t *th)
{
    struct last_stack *ls = &s->last[ti];
    size_t n = th->nframes, same = 0, k;
    uint32_t node;

    if (n > ls->cap) {
        size_t ncap = n < 64 ? 64 : n * 2;
        unw_frame_t *nf = realloc(ls->frames, ncap * sizeof *nf);
        uint32_t *nn;
        if (nf == NULL)
            return STK_NONE;
        ls->frames = nf;
        nn = realloc(ls->nodes, ncap * sizeof *nn);
        if (nn == NULL)
            return STK_NONE;
        ls->nodes = nn;
        ls->cap = ncap;
    }
    /* frames are interned by the unwinder: pointers and lines compare */
    while (same < n && same < ls->n) {
        const unw_frame_t *a = &th->frames[n - 1 - same], *b = &ls->frames[same];
        if (a->function != b->function || a->file != b->file || a->line != b->line)
            break;
        same++;
    }
    node = same ? ls->nodes[same - 1] : stk_thread_at(s->t, s->tthreads[ti])->root;
    for (k = same; k < n; k++) {
        uint32_t fr = map_frame(s, &th->frames[n - 1 - k]);
        if (fr == STK_NONE || (node = stk_child(s->t, node, fr)) == STK_NONE)
            return STK_NONE;
        ls->frames[k] = th->frames[n - 1 - k];
        ls->nodes[k] = node;
    }
    ls->n = n;
    return node;
}

/* --async-mode all: every waiting task of the list read this round, once, under the
 * thread that runs its loop (a task of a loop no thread runs: under a thread of its own,
 * native id 0). Returns 0 or a fatal code. */
static int waiting_tasks(sampler_t *s, unwinder_t *u, proc_t *p, const unw_thread_t *threads,
                         size_t n, int64_t now_ns)
{
    size_t i, k, nt = async_ntasks(s->async);

    for (i = 0; i < nt; i++) {
        unw_thread_t ts;
        const unw_thread_t *owner = NULL;
        const unw_frame_t *af;
        pid_t tid;
        size_t ti;
        uint32_t node;
        int err = async_task_stack(s->async, u, i, &tid, &af, &ts.nframes);
        if (err)
            return err;
        if (ts.nframes == 0)
            continue;               /* running: its thread's sample has it */
        /* the list may be some rounds old: a task running now is its thread's sample */
        for (k = 0; k < n && threads[k].task != async_task_id(s->async, i); k++)
            ;
        if (k < n)
            continue;
        for (k = 0; tid != 0 && k < n && owner == NULL; k++)
            if (threads[k].native_id == tid)
                owner = &threads[k];
        if (owner == NULL) {
            static const unw_thread_t none = { .py_name = "asyncio (no running loop)" };
            owner = &none;
        }
        ti = map_thread(s, p, owner);
        if (ti == (size_t)-1)
            return REMORA_ENOMEM;
        ts.frames = (unw_frame_t *)af;
        node = stack_node(s, ti, &ts);
        if (node == STK_NONE)
            return REMORA_ENOMEM;
        stk_add_at(s->t, s->tthreads[ti], node, 1);
        s->st.task_waiting++;
        if (s->sink.sample != NULL &&
            (err = s->sink.sample(s->sink.ctx, s->t, s->tthreads[ti], node,
                                  now_ns - s->st.start_ns, 0)))
            return err;
    }
    return REMORA_OK;
}

/* One thread's sample, filtered by mode, into the table and to the sink 'count' times
 * (the periods it stands for); t_ns since sampling began. Returns 0 or a fatal code. */
static int take_thread(sampler_t *s, unwinder_t *u, proc_t *p, const unw_thread_t *th, int64_t t_ns,
                       unsigned count)
{
    uint32_t tt, node;
    unsigned flags = (th->on_cpu ? SAMPLE_F_ON_CPU : 0) | (th->holds_gil ? SAMPLE_F_GIL : 0) |
                     (th->t_ns != 0 ? SAMPLE_F_TICK : 0), c;
    size_t ti;
    int err;

    if (count == 0)
        return REMORA_OK;
    /* idle: asleep in the kernel (not running or runnable) and not holding the GIL
     * (a thread blocked while it holds it stops every other: never idle) */
    if (!s->o.idle && !th->on_cpu && !th->holds_gil)
        return REMORA_OK;
    /* cpu: on a CPU (a thread waiting for one, as the kernel engine knows, is not) */
    if (s->o.mode == SAMPLE_CPU && (!th->on_cpu || th->runnable))
        return REMORA_OK;
    if (s->o.mode == SAMPLE_GIL && !th->holds_gil)
        return REMORA_OK;
    if (s->o.mode == SAMPLE_EXCEPTION && th->handling_exc != 1) {
        if (th->handling_exc < 0)       /* its exception state could not be read */
            s->st.errors++;
        return REMORA_OK;
    }
    /* exception mode shows where the handling happens: a partial stack may have lost
     * the frame holding the except block among those that moved */
    if (s->o.mode == SAMPLE_EXCEPTION && th->partial)
        return REMORA_OK;
    if (th->error) {
        s->st.errors++;
        return REMORA_OK;
    }
    ti = map_thread(s, p, th);
    if (ti == (size_t)-1)
        return REMORA_ENOMEM;
    tt = s->tthreads[ti];
    if (th->task != 0 && u == s->u && s->async != NULL) {
        /* a task's frames under its awaiter chain, in place of the loop's */
        unw_thread_t as = *th;
        const unw_frame_t *af;
        err = async_thread_stack(s->async, u, th, &s->st, &af, &as.nframes);
        if (err)
            return err;
        as.frames = (unw_frame_t *)af;
        node = stack_node(s, ti, &as);
    } else {
        node = stack_node(s, ti, th);
    }
    if (node == STK_NONE)
        return REMORA_ENOMEM;
    if (th->partial) {
        /* the innermost frames moved while they were read: marked, never guessed */
        s->st.partial++;
        if (!th->moving_in_frames && (node = stk_child(s->t, node, s->moving_frame)) == STK_NONE)
            return REMORA_ENOMEM;
    }
    /* a partial stack moved after the GC state was read: no <GC> above its marker */
    if (s->o.gc && th->gc && th->holds_gil && !th->partial) {
        flags |= SAMPLE_F_GC;
        if ((node = stk_child(s->t, node, s->gc_frame)) == STK_NONE)
            return REMORA_ENOMEM;
    }
    stk_add_at(s->t, tt, node, count);
    s->st.samples += count;
    if (th->partial)
        s->st.partial += count - 1;
    for (c = 0; c < count && s->sink.sample != NULL; c++)
        if ((err = s->sink.sample(s->sink.ctx, s->t, tt, node, t_ns, flags)))
            return err;
    return REMORA_OK;
}

static int kern_drain(sampler_t *s, int64_t *read_ns);
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
    /* a thread on a CPU is sampled by its ticks, none of its time by the round */
    for (i = 0; i < n; i++) {
        const unw_thread_t *th = &threads[i];
        unsigned count = (th->kernel ? 0 : th->periods ? th->periods : 1) + th->failed_ticks;
        if ((err = take_thread(s, u, p, th, read_ns - s->st.start_ns, count)) != REMORA_OK)
            return err;
    }
    if (u == s->u && s->async != NULL && s->o.async == SAMPLE_ASYNC_ALL)
        return waiting_tasks(s, u, p, threads, n, now_ns);
    return REMORA_OK;
}

/* The frame cache and the threads' last stacks hold an unwinder's string pointers:
 * forgotten when one is freed, so no new string at a freed address passes for an old. */
static void forget_frames(sampler_t *s)
{
    size_t i;

    for (i = 0; i < s->fmap_cap; i++)
        s->fmap[i].frame = STK_NONE;
    s->fmap_count = 0;
    for (i = 0; i < s->ntids; i++)
        s->last[i].n = 0;
}

static void sub_reset(sampler_t *s, sub_t *c)
{
    if (c->u != NULL)
        forget_frames(s);
    unw_free(c->u);
    proc_free(c->p);
    c->u = NULL;
    c->p = NULL;
    c->tries = c->bad = 0;
}

/* Finds the target's new descendants, forgets the ones gone, and looks for the
 * interpreter of those that have none yet. */
static void scan_subs(sampler_t *s)
{
    size_t i, k, n;

    if (proc_descendants(proc_pid(s->p), s->found, SUB_MAX, &n) != REMORA_OK)
        return;
    /* a launched command that is not Python yet: looked at as a descendant, if it exec's one */
    if (s->u == NULL && n < SUB_MAX)
        s->found[n++] = proc_pid(s->p);
    for (k = 0; k < s->nsubs;) {
        for (i = 0; i < n && s->found[i] != s->subs[k].pid; i++)
            ;
        if (i == n) {                   /* gone, or no longer the target's */
            sub_reset(s, &s->subs[k]);
            free(s->subs[k].t);
            s->subs[k] = s->subs[--s->nsubs];
        } else {
            k++;
        }
    }
    for (i = 0; i < n; i++) {
        sub_t *c;
        for (k = 0; k < s->nsubs && s->subs[k].pid != s->found[i]; k++)
            ;
        if (k < s->nsubs)
            continue;
        if (remora_grow((void **)&s->subs, &s->cap_subs, s->nsubs + 1, sizeof *s->subs))
            return;
        c = &s->subs[s->nsubs];
        memset(c, 0, sizeof *c);
        c->pid = s->found[i];
        c->t = malloc(sizeof *c->t);
        if (c->t == NULL)
            return;
        s->nsubs++;
    }
    for (k = 0; k < s->nsubs; k++) {
        sub_t *c = &s->subs[k];
        char why[256];
        if (c->u != NULL || c->tries >= SUB_FIND_TRIES)
            continue;
        c->tries++;
        if (c->p == NULL && proc_open(c->pid, &c->p) != REMORA_OK) {
            c->p = NULL;
            continue;
        }
        if (py_target_find(c->p, c->t, why, sizeof why) != REMORA_OK ||
            unw_new(c->p, c->t, &c->u) != REMORA_OK) {
            c->u = NULL;
            proc_free(c->p);            /* opened anew next time: it may exec */
            c->p = NULL;
            continue;
        }
        unw_set_want(c->u, s->want);
        if (s->o.kern != NULL)          /* else its threads are read from user space */
            unw_kern_enable(c->u, s->o.kern, why, sizeof why);
        s->st.subprocesses++;
    }
}

#define LATE_SLACK_NS 1000          /* a tick written this much after its time is not late */

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
    forget_frames(s);
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
        scan_subs(s);
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
            sub_reset(s, c);            /* exited, or exec'd: the next scan says which */
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
