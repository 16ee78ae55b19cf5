/* sample/sampler_int.h — the sampler's state, shared by the files of the sampling loop.
 *
 *   sampler.c  the loop: deadlines, rounds, pauses, the kernel engine's ticks
 *   take.c     each thread's sample, filtered by mode, into a node of the stack table
 *   subs.c     --subprocesses: the target's descendants found and given an unwinder
 *
 * Not for use outside src/sample/.
 */
#ifndef REMORA_SAMPLER_INT_H
#define REMORA_SAMPLER_INT_H

#include "sampler.h"
#include "async.h"
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
    const char **tname;               /* the Python name the table thread has (interned in
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
    int64_t resumed_at;             /* the last resume: a tick timed from paused_at to it
                                     * is the pause's (dropped) */
    sampler_hook_t hook;            /* sampler_set_hook(): called between rounds */
    void *hook_ctx;
    volatile sig_atomic_t *hook_poke;   /* set (by a signal handler): call it now */
    int64_t hook_every_ns, hook_next;
    int64_t hook_due;               /* sampler_hook_due(): called by then too (0: no) */
    unsigned round_light, round_full;   /* this round's processes that read nothing, and
                                     * those that read */
    const unw_thread_t *cur;        /* the thread whose sample the sink is given (take.c), */
    unsigned cur_count, cur_index;  /* ... the periods it stands for, and which of them */
};

/* ---- take.c ---- */

/* One thread's sample, filtered by mode, into the table and to the sink 'count' times
 * (the periods it stands for); t_ns since sampling began. Returns 0 or a fatal code. */
int take_thread(sampler_t *s, unwinder_t *u, proc_t *p, const unw_thread_t *th, int64_t t_ns,
                unsigned count);
/* --async-mode all: every waiting task of the list read this round, once, under the
 * thread that runs its loop. Returns 0 or a fatal code. */
int take_waiting_tasks(sampler_t *s, unwinder_t *u, proc_t *p, const unw_thread_t *threads,
                       size_t n, int64_t now_ns);
/* Forgets the frame cache and the threads' last stacks (an unwinder's strings). */
void take_forget(sampler_t *s);

/* How long a thread whose stack moved may be read again in a round (unw_set_reread_ns):
 * a quarter of the period asked. */
static inline int64_t sampler_reread_ns(const sampler_opts_t *o)
{
    return (int64_t)(0.25e9 / (o->rate_hz > 0 ? o->rate_hz : 1000));
}

/* ---- subs.c ---- */

/* Frees a descendant's unwinder and process (the frames forgotten), to be found anew. */
void subs_reset(sampler_t *s, sub_t *c);
/* Finds the target's new descendants, forgets the ones gone, and looks for the
 * interpreter of those that have none yet. */
void subs_scan(sampler_t *s);

#endif
