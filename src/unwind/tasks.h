/* unwind/tasks.h — what the files of the asyncio task reader share (tasks.c and the
 * tasks_*.c beside it): the reader's state (one per unwinder: u->tasks), a reading's raw
 * tasks and awaiter links, and each file's steps the others call.
 *
 * Not for use outside those files (the rest of src/unwind/ sees tasks_free(),
 * tasks_sample() and tasks_walk_test() through internal.h).
 */
#ifndef REMORA_UNWIND_TASKS_H
#define REMORA_UNWIND_TASKS_H

#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "remora.h"
#include "internal.h"

#define TK_RELOOK_NS 500000000      /* _asyncio not loaded: looked for again this often */
#define TK_SETS 4                   /* registry sets checked for change after a reading */
#define TK_MAX_LOOPS 256            /* event loops whose threads are looked up */
#define TK_CUR_READ 1024            /* bytes of _current_tasks' keys read per sample */
#define TK_PY_CODES 16              /* pure-Python running tasks whose code is cached */
#define TK_TYPES 32                 /* task subclasses remembered (before 3.14) */
#define TK_NAME_HEAD 96             /* bytes first read of a name object */
#define TK_LATE_READ 512            /* bytes of a task object read at a tick's drain, at most */
#define TK_LATE_WAITERS 1024        /* listed tasks whose fut_waiter a drain reads, at most */
#define TK_LATE_KEEP 64             /* tasks found running at drains, kept until the next reading */
#define TK_AW_TRIES 8               /* drains that look for a kept task's awaiter, at most */
#define TK_C 1                      /* the C task class, or a subclass of it */
#define TK_PY 2                     /* the pure-Python one, or a subclass of it */

typedef struct tk_raw {
    uint64_t id, loop, coro, name, awaited_by;
    uint64_t waiter;                /* registry: the future it waits on (task_fut_waiter) */
    uint64_t group;                 /* registry: the TaskGroup its chain is in __aexit__ of */
    int is_set;
    size_t first_frame, nframes;    /* in tk->frames */
    size_t first_aw, naw;           /* in tk->aw */
    uint64_t at;                    /* the chain's walk: the object to read next (0: done) */
    uint64_t frame;                 /* its coroutine's frame (3.11+: the one embedded in it;
                                     * 3.9/3.10: its frame object), where a thread's stack
                                     * has it while the task runs; 0: not known */
    int wrapper;                    /* this level's 'at' is an async generator's awaitable:
                                     * no frame of its own, its generator next */
} tk_raw_t;

/* An awaiter link found before 3.14: 'child' is awaited by 'parent'. */
typedef struct tk_link {
    uint64_t child, parent;
} tk_link_t;

/* A task the reading did not hold, found running at a tick's drain (tasks_running.c): its
 * coroutine's frame and that frame's code, its name and the listed task awaiting it. */
typedef struct tk_late {
    uint64_t frame, code, task, aw;
    const char *name;
    unsigned aw_tries;              /* tick_task(): drains that looked for its awaiter */
} tk_late_t;

typedef struct tk_key {
    uint64_t id;
    size_t idx;
} tk_key_t;

struct unw_tasks_state {
    int looked;
    int64_t looked_ns;
    int err;
    py_asyncio_t a;
    char why[256];
    const char *moved;              /* why the last reading was made again (REMORA_ECORRUPT) */
    int last_err;                   /* what the last unw_tasks() returned */
    unw_task_t *tasks;
    size_t ntasks, cap_tasks;
    tk_raw_t *raw;
    size_t cap_raw;
    tk_key_t *keys;
    size_t cap_keys;
    unw_frame_t *frames;
    size_t nframes, cap_frames;
    uint64_t *aw;
    size_t naw, cap_aw;
    unsigned char *buf;
    size_t cap_buf;
    proc_iov_t *iov;
    size_t cap_iov;
    uint64_t *lists;                /* (head address, next) per list */
    size_t cap_lists;
    uint64_t *tsv;                  /* per thread: running loop, running task, list head */
    uint64_t gfut_type;             /* registry: asyncio.tasks._GatheringFuture */
    uint64_t wrap_types[2];         /* async_generator_asend, _athrow found by name where
                                     * their symbols are not in the binary (0: not yet) */
    uint64_t other_types[16];       /* types seen not to be either (a ring) */
    unsigned nother;
    uint64_t sets[TK_SETS];         /* registry: the sets read, and their headers (fill, */
    unsigned char set_head[TK_SETS][48]; /* used, mask, table) as first read */
    size_t nsets;
    size_t nkeys;                   /* tasks in keys[] */
    size_t cap_tsv;
    const unw_task_t **chain;       /* unw_task_chain(): UNW_MAX_CHAIN pointers */
    tk_link_t *links;               /* registry: awaiter links */
    size_t nlinks, cap_links;
    uint64_t *addrs;                /* registry: scratch addresses */
    size_t cap_addrs;
    /* per sample before 3.14 (UNW_WANT_TASKS): the _current_tasks dict, the loops' threads,
     * pure-Python tasks' outermost code */
    uint64_t cur_dict, cur_ctype, cur_pytype;
    uint64_t rt_dict;               /* _current_tasks as the last reading found it, for the
                                     * kernel engine's ticks (tk_kern_layout): not forgotten
                                     * on a failed per-sample read, as cur_dict is */
    /* registry: types learnt by their tp_base chains (kind TK_C, TK_PY or 0), for the
     * task classes types_c and types_py */
    struct { uint64_t type; int kind; } types[TK_TYPES];
    size_t ntypes;
    uint64_t types_c, types_py;
    int64_t cur_looked_ns;
    struct { uint64_t loop, ident; int64_t ns; } loops[TK_MAX_LOOPS];
    size_t nloops;
    struct { uint64_t task; const char *function, *file; } pyc[TK_PY_CODES];
    size_t npyc;
    unsigned char curbuf[TK_CUR_READ];
    /* per sample (UNW_WANT_TASKS) */
    uint64_t *run, *coro, *code, *had;  /* coro, code and had point into run */
    int py_seen;                    /* 3.14+: the last reading found pure-Python tasks */
    const char *unnamed;            /* "?": a name that could not be read */
    /* the kernel engine's ticks (tasks_from_frames): the last reading's tasks by their
     * coroutine's frame address (keys' id: that address), and whether a tick found a
     * thread whose running task the reading did not hold (unw_tasks_stale) */
    tk_key_t *fkeys;
    size_t nfkeys, cap_fkeys;
    int stale;
    /* ... the tasks the reading did not hold that drains found running (a ring), and the
     * one a tick is named by (late: id 0 when none), valid until the next tick
     * (unw_task_chain() finds it) */
    tk_late_t kept[TK_LATE_KEEP];
    size_t nkept, next_kept;
    unw_task_t late;
    uint64_t late_aw;
    size_t cap_run;
};

/* ---- small steps every file uses ---- */

/* REMORA_ECORRUPT, remembering why: the reading is made again, and the last reason is
 * what unw_tasks_problem() says when every try met one. */
static inline int tk_moved(struct unw_tasks_state *tk, const char *why)
{
    tk->moved = why;
    return REMORA_ECORRUPT;
}

static inline int need_buf(struct unw_tasks_state *tk, size_t len)
{
    return remora_grow((void **)&tk->buf, &tk->cap_buf, len, 1) ? REMORA_ENOMEM : REMORA_OK;
}

static inline int need_iov(struct unw_tasks_state *tk, size_t n)
{
    return remora_grow((void **)&tk->iov, &tk->cap_iov, n, sizeof *tk->iov) ? REMORA_ENOMEM : REMORA_OK;
}

static inline int cmp_key(const void *x, const void *y)
{
    const tk_key_t *a = x, *b = y;
    return a->id < b->id ? -1 : a->id > b->id;
}

/* The index of task 'id' among tk->keys[0..n), or -1. */
static inline ssize_t find_task(const struct unw_tasks_state *tk, size_t n, uint64_t id)
{
    tk_key_t key, *k;

    key.id = id;
    k = n ? bsearch(&key, tk->keys, n, sizeof *tk->keys, cmp_key) : NULL;
    return k != NULL ? (ssize_t)k->idx : -1;
}

/* ---- tasks.c ---- */

/* The reader's state (made on first use: u->tasks) and the asyncio layout, looked up once
 * (again every TK_RELOOK_NS while _asyncio is not loaded). 0 with *out, or an error. */
int tk_layout(unwinder_t *u, struct unw_tasks_state **out);

/* A task's name from its name object's head h (TK_NAME_HEAD bytes read at 'at'): a str,
 * or (3.13+) an int N named "Task-N"; interned. NULL when it is neither (or out of
 * memory). */
const char *tk_name_of(unwinder_t *u, uint64_t at, const unsigned char *h);
/* The same from an image of a name object's first len bytes (a kernel tick's): nothing
 * read, NULL when the image does not hold the whole name. */
const char *tk_name_image(unwinder_t *u, const unsigned char *h, size_t len);

/* ---- tasks_lists.c: 3.14+ ---- */

/* One reading of every list (each thread's and interpreter's) into tk->raw[0..*nout), each
 * thread's running loop, task and list head into tk->tsv; 0, REMORA_ECORRUPT (it moved),
 * or an error. */
int tk_lists_once(unwinder_t *u, struct unw_tasks_state *tk, unw_thread_t *th, size_t nth,
                  size_t *nout);

/* ---- tasks_registry.c: before 3.14 (and 3.14+'s pure-Python tasks) ---- */

/* The tasks of asyncio.tasks' registries into tk->raw[first..*nout), each thread's running
 * loop and task into tk->tsv; py_only (3.14+, after tk_lists_once()): only pure-Python
 * tasks. 0, REMORA_ECORRUPT (a registry moved: read again), or an error. */
int tk_registry_once(unwinder_t *u, struct unw_tasks_state *tk, unw_thread_t *th, size_t nth,
                     size_t first, int py_only, size_t *nout);

/* ---- tasks_chain.c: coroutine chains and awaiters ---- */

/* Each task's coroutine chain into tk->frames (tk->raw[i].first_frame, nframes), innermost
 * first. 0, REMORA_ECORRUPT (the layout does not fit remora's reads) or an error. */
int tk_read_chains(unwinder_t *u, struct unw_tasks_state *tk, size_t n);
/* 3.14+: each task's awaiters that are tasks, as links (tk->links). 0 or an error. */
int tk_read_awaiters(unwinder_t *u, struct unw_tasks_state *tk, size_t n);
/* Who awaits whom from each task's fut_waiter (read before 3.14, and for pure-Python tasks)
 * and the TaskGroup its chain waits in, as links. 0 or an error. */
int tk_registry_awaiters(unwinder_t *u, struct unw_tasks_state *tk, size_t n);
/* The links as tk->aw and each raw's first_aw / naw. 0 or REMORA_ENOMEM. */
int tk_links_fill(struct unw_tasks_state *tk, size_t n);

/* ---- tasks_running.c: per sample, each thread's running task ---- */

/* How many of th's frames, from the innermost, are the running task's whose outermost
 * coroutine runs outer's code (0: none, or outer NULL). */
size_t tk_running_frames(const unw_thread_t *th, const unw_frame_t *outer);

/* After a reading: tk->fkeys from the raw tasks' frames (0 or REMORA_ENOMEM). */
int tk_frame_keys(struct unw_tasks_state *tk, size_t n);

#endif
