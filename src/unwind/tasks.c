/* unwind/tasks.c — asyncio tasks, read from outside: every task of every event loop, its
 * name, its coroutine stack and the tasks awaiting it; per sample, each thread's running
 * task.
 *
 * 3.14+ (py_asyncio_t from the _asyncio module's AsyncioDebug section): every pending
 * native task is on a list (struct llist_node) headed in the state of the thread that
 * made it, or the interpreter's once that thread is gone. unw_tasks() reads each head,
 * then each list node by node (one read of the whole task object each: its loop, state,
 * name, coroutine, awaiters and next node), checking each node's back link; a list that
 * moved under the walk is walked again (UNW_TASK_TRIES times, then REMORA_ECORRUPT).
 * Then, in vectored reads: the names (a str, or an int N for "Task-N"), each task's
 * coroutine chain one level per read (the coroutine object with its embedded frame; a
 * coroutine suspended in an await names the object it awaits just below its frame's
 * stack pointer, followed while it is a coroutine or a generator), and the awaiter sets.
 * 3.9-3.13 (py_asyncio_t kind PY_ASYNC_REGISTRY): the tasks are those of asyncio.tasks'
 * registries (the WeakSet _all_tasks, or _scheduled_tasks and the set _eager_tasks: each
 * weak reference's object), kept when their type is the module's _CTask or _PyTask (the
 * pure-Python task, whose fields are its instance attributes) or a subclass of either
 * (its tp_base chain, remembered per type); the running ones are the
 * values of its _current_tasks dict {loop: task}, a loop's thread the one whose pthread id
 * is the loop's _thread_id. Awaiter links are found from each task's fut_waiter: a task
 * (plain `await task`), a _GatheringFuture (its _children: gather); and from a chain
 * suspended in TaskGroup.__aexit__ (the group's _tasks, the frame's self); a shield()'s outer
 * future (the task its _outer_done_callback closes over, found through fut_callback0).
 * Every walk is bounded: UNW_MAX_TASKS tasks, UNW_MAX_TASK_DEPTH coroutines per chain (a
 * coroutine seen again in its own chain ends it), UNW_MAX_AWAITERS per task.
 * Memory read: thread and interpreter states, task objects, str/int names, coroutine
 * objects, set tables, code objects (through the code cache).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "remora.h"
#include "internal.h"

#define UNW_TASK_TRIES 4            /* walks of task lists that moved under the reading */
#define TK_NAME_HEAD 96             /* bytes first read of a name object */
#define TK_GEN_READ 160             /* bytes read of a coroutine: through the fields of its
                                     * embedded frame read (3.11: gen_iframe 80 + 80) */
#define TK_SET_MAX (1u << 16)       /* set entries scanned (awaiters) */
#define TK_RELOOK_NS 500000000      /* _asyncio not loaded: looked for again this often */
#define TK_SETS 4                   /* registry sets checked for change after a reading */
#define TK_MAX_LOOPS 256            /* event loops whose threads are looked up */
#define TK_CUR_READ 1024            /* bytes of _current_tasks' keys read per sample */
#define TK_LOOP_NS 1000000000       /* a loop's thread is looked up again this often */
#define TK_PY_CODES 16              /* pure-Python running tasks whose code is cached */
#define TK_FRAME_READ 128           /* bytes read of a 3.9/3.10 frame object */
#define TK_TYPES 32                 /* task subclasses remembered (before 3.14) */
#define TK_TYPE_DEPTH 16            /* tp_base links followed from a type */
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
} tk_raw_t;

/* An awaiter link found before 3.14: 'child' is awaited by 'parent'. */
typedef struct tk_link {
    uint64_t child, parent;
} tk_link_t;

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
    size_t cap_run;
};

/* REMORA_ECORRUPT, remembering why: the reading is made again, and the last reason is
 * what unw_tasks_problem() says when every try met one. */
static int tk_moved(struct unw_tasks_state *tk, const char *why)
{
    tk->moved = why;
    return REMORA_ECORRUPT;
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void tasks_free(struct unw_tasks_state *tk)
{
    if (tk == NULL)
        return;
    free(tk->tasks);
    free(tk->raw);
    free(tk->keys);
    free(tk->frames);
    free(tk->aw);
    free(tk->buf);
    free(tk->iov);
    free(tk->lists);
    free(tk->tsv);
    free(tk->chain);
    free(tk->links);
    free(tk->addrs);
    free(tk->run);
    free(tk);
}

/* The layout, looked up once (again every TK_RELOOK_NS while _asyncio is not loaded). */
static int tk_layout(unwinder_t *u, struct unw_tasks_state **out)
{
    struct unw_tasks_state *tk = u->tasks;
    int64_t now;

    if (tk == NULL) {
        if ((tk = calloc(1, sizeof *tk)) == NULL)
            return REMORA_ENOMEM;
        tk->chain = malloc(UNW_MAX_CHAIN * sizeof *tk->chain);
        if (tk->chain == NULL) {
            free(tk);
            return REMORA_ENOMEM;
        }
        u->tasks = tk;
    }
    *out = tk;
    now = now_ns();
    if (tk->looked && (tk->a.found || tk->err != REMORA_OK || now - tk->looked_ns < TK_RELOOK_NS))
        return tk->err;
    tk->looked = 1;
    tk->looked_ns = now;
    tk->why[0] = '\0';
    tk->err = py_asyncio_find(u->p, u->target, &tk->a, tk->why, sizeof tk->why);
    if (tk->err == REMORA_ENOPROC || tk->err == REMORA_EPERM || tk->err == REMORA_ENOMEM) {
        int e = tk->err;
        tk->looked = 0;             /* transient: look again next time */
        tk->err = REMORA_OK;
        return e;
    }
    return tk->err;
}

const char *unw_tasks_problem(const unwinder_t *u)
{
    const struct unw_tasks_state *tk = u->tasks;

    if (tk == NULL)
        return "";
    return tk->last_err == REMORA_ECORRUPT && tk->moved != NULL ? tk->moved : tk->why;
}

static int need_buf(struct unw_tasks_state *tk, size_t len)
{
    return remora_grow((void **)&tk->buf, &tk->cap_buf, len, 1) ? REMORA_ENOMEM : REMORA_OK;
}

static int need_iov(struct unw_tasks_state *tk, size_t n)
{
    return remora_grow((void **)&tk->iov, &tk->cap_iov, n, sizeof *tk->iov) ? REMORA_ENOMEM : REMORA_OK;
}

static int cmp_key(const void *x, const void *y)
{
    const tk_key_t *a = x, *b = y;
    return a->id < b->id ? -1 : a->id > b->id;
}

/* The index of task 'id' among tk->keys[0..n), or -1. */
static ssize_t find_task(const struct unw_tasks_state *tk, size_t n, uint64_t id)
{
    tk_key_t key, *k;

    key.id = id;
    k = n ? bsearch(&key, tk->keys, n, sizeof *tk->keys, cmp_key) : NULL;
    return k != NULL ? (ssize_t)k->idx : -1;
}

/* Walks every list once into tk->raw[0..*n). *moved: a node's back link did not name the
 * node before it (the list changed while read). */
static int walk_lists(unwinder_t *u, struct unw_tasks_state *tk, size_t nlists, size_t *n, int *moved)
{
    const py_asyncio_t *a = &tk->a;
    size_t l, k = 0;
    int err;

    *moved = 0;
    if ((err = need_buf(tk, a->task_size)) != REMORA_OK)
        return err;
    for (l = 0; l < nlists; l++) {
        uint64_t head = tk->lists[2 * l], prev = head, node = tk->lists[2 * l + 1];
        while (node != head && node != 0) {
            uint64_t task;
            if (k >= UNW_MAX_TASKS)
                return REMORA_ENOMEM;
            if (node % 8 != 0 || node < a->task_node) {
                *moved = 1;
                return REMORA_OK;
            }
            task = node - a->task_node;
            if ((err = proc_read(u->p, task, tk->buf, a->task_size)) != REMORA_OK) {
                if (err == REMORA_EFAULT) {
                    *moved = 1;
                    return REMORA_OK;
                }
                return err;
            }
            if (get_u64(tk->buf, a->task_node + 8) != prev || tk->buf[a->task_is_task] != 1) {
                *moved = 1;
                return REMORA_OK;
            }
            if (remora_grow((void **)&tk->raw, &tk->cap_raw, k + 1, sizeof *tk->raw))
                return REMORA_ENOMEM;
            {
                tk_raw_t *r = &tk->raw[k];
                int32_t state;
                memcpy(&state, tk->buf + a->task_state, 4);
                memset(r, 0, sizeof *r);
                r->id = task;
                r->loop = get_u64(tk->buf, a->task_loop);
                r->coro = get_u64(tk->buf, a->task_coro);
                r->name = get_u64(tk->buf, a->task_name);
                r->awaited_by = get_u64(tk->buf, a->task_awaited_by);
                r->is_set = tk->buf[a->task_awaited_by_is_set] != 0;
                /* pending (asyncio.all_tasks() leaves out done ones), and whole: a task
                 * still being made (linked before its coroutine or name is set) is not
                 * one yet */
                if (state == 0 && r->coro != 0 && r->name != 0)
                    k++;
            }
            prev = node;
            node = get_u64(tk->buf, a->task_node);
        }
    }
    *n = k;
    return REMORA_OK;
}

int tasks_walk_test(unwinder_t *u, const py_asyncio_t *a, const uint64_t *lists, size_t nlists,
                    size_t *n, int *moved)
{
    struct unw_tasks_state *tk = calloc(1, sizeof *tk);
    int err;

    *n = 0;
    *moved = 0;
    if (tk == NULL || (tk->lists = malloc(2 * nlists * sizeof *tk->lists + 8)) == NULL) {
        tasks_free(tk);
        return REMORA_ENOMEM;
    }
    tk->a = *a;
    memcpy(tk->lists, lists, 2 * nlists * sizeof *tk->lists);
    err = walk_lists(u, tk, nlists, n, moved);
    tasks_free(tk);
    return err;
}

/* Each task's name: a str, or an int N ("Task-N", named lazily). */
static int read_names(unwinder_t *u, struct unw_tasks_state *tk, size_t n)
{
    const py_layout_t *L = &u->target->layout;
    char name[UNW_MAX_NAME * 4 + 1];
    size_t i, k = 0;
    int err;

    if (need_buf(tk, n * TK_NAME_HEAD) || need_iov(tk, n))
        return REMORA_ENOMEM;
    for (i = 0; i < n; i++) {
        uint64_t at = tk->raw[i].name;
        memset(tk->buf + i * TK_NAME_HEAD, 0, TK_NAME_HEAD);
        if (at == 0 || at % 8 != 0)
            continue;
        tk->iov[k].addr = at;
        tk->iov[k].buf = tk->buf + i * TK_NAME_HEAD;
        tk->iov[k].len = TK_NAME_HEAD;
        k++;
    }
    if ((err = pyo_readv_zero(u->p, tk->iov, k)) != REMORA_OK)
        return err;
    for (i = 0; i < n; i++) {
        const unsigned char *h = tk->buf + i * TK_NAME_HEAD;
        uint64_t type = get_u64(h, L->ob_type);
        size_t len = 0;

        tk->tasks[i].name = NULL;
        if (type != 0 && type == u->target->str_type &&
            pystr_from_head(u->p, L, tk->raw[i].name, h, TK_NAME_HEAD, name, sizeof name, &len) == REMORA_OK) {
            tk->tasks[i].name = strtab_intern(u->names, name, len);
        } else if (type != 0 && type == u->target->long_type) {
            /* a small non-negative int: one 30-bit digit (or two) */
            uint64_t v = 0;
            if (pyo_long(u, h, TK_NAME_HEAD, &v) == REMORA_OK && v < (UINT64_C(1) << 60)) {
                len = (size_t)snprintf(name, sizeof name, "Task-%llu", (unsigned long long)v);
                tk->tasks[i].name = strtab_intern(u->names, name, len);
            }
        }
        if (tk->tasks[i].name == NULL) {
            if (tk->unnamed == NULL && (tk->unnamed = strtab_intern(u->names, "?", 1)) == NULL)
                return REMORA_ENOMEM;
            tk->tasks[i].name = tk->unnamed;
        }
    }
    return REMORA_OK;
}

static int add_frame(unwinder_t *u, struct unw_tasks_state *tk, uint64_t code, uint64_t instr)
{
    const py_layout_t *L = &u->target->layout;
    unw_code_t *e;
    unw_frame_t *f;
    int err;

    if ((err = code_cache_get(u->codes, u->p, u->target, code, &e)) != REMORA_OK)
        return err;
    if (remora_grow((void **)&tk->frames, &tk->cap_frames, tk->nframes + 1, sizeof *tk->frames))
        return REMORA_ENOMEM;
    f = &tk->frames[tk->nframes++];
    memset(f, 0, sizeof *f);
    f->function = e->function;
    f->file = e->file;
    f->line = code_line(e, L, frame_addrq(L, code, instr));
    return REMORA_OK;
}

/* Is this frame a TaskGroup's __aexit__ (or 3.13+'s _aexit), suspended while its group's
 * tasks run? */
static int is_group_exit(const unw_frame_t *f)
{
    size_t fl = strlen(f->file);

    return (strcmp(f->function, "TaskGroup.__aexit__") == 0 ||
            strcmp(f->function, "TaskGroup._aexit") == 0) &&
           fl >= 13 && strcmp(f->file + fl - 13, "taskgroups.py") == 0;
}

/* Each task's coroutine chain into tk->frames, grouped per task innermost first: one level
 * for every task per two or three vectored reads (the coroutines; 3.9/3.10 their frame
 * objects; the objects they await). */
static int read_chains(unwinder_t *u, struct unw_tasks_state *tk, size_t n)
{
    const py_layout_t *L = &u->target->layout;
    const py_asyncio_t *a = &tk->a;
    const size_t stride = TK_GEN_READ + TK_FRAME_READ + 8;
    size_t i, level, active = 0;
    int objects = a->coro_frame == PY_CORO_OBJECT_STACKTOP || a->coro_frame == PY_CORO_OBJECT_DEPTH;
    int err = REMORA_OK;

    if (objects ? (a->gen_frame_ptr + 8 > TK_GEN_READ || L->fr_code + 8 > TK_FRAME_READ ||
                   L->fr_instr + 4 > TK_FRAME_READ || a->fr_stacktop_at + 8 > TK_FRAME_READ ||
                   a->fr_localsplus + 8 > TK_FRAME_READ || a->fr_state_at + 1 > TK_FRAME_READ)
                : (a->gen_iframe + L->fr_code + 8 > TK_GEN_READ ||
                   a->gen_iframe + L->fr_instr + 8 > TK_GEN_READ ||
                   a->gen_iframe + a->fr_stackpointer + 8 > TK_GEN_READ ||
                   a->gen_iframe + a->fr_stacktop_at + 4 > TK_GEN_READ ||
                   a->gen_iframe + a->fr_localsplus + 8 > TK_GEN_READ))
        return tk_moved(tk, "the coroutine layout does not fit remora's reads");
    for (i = 0; i < n; i++) {
        tk->raw[i].at = tk->raw[i].coro;
        tk->raw[i].group = 0;
        active += tk->raw[i].at != 0;
    }
    for (level = 0; level < UNW_MAX_TASK_DEPTH && active > 0; level++) {
        size_t k = 0;
        if (need_buf(tk, n * stride) || need_iov(tk, n)) {
            err = REMORA_ENOMEM;
            goto out;
        }
        /* the coroutines */
        for (i = 0; i < n; i++) {
            unsigned char *g = tk->buf + i * stride;
            memset(g, 0, stride);
            if (tk->raw[i].at == 0)
                continue;
            if (tk->raw[i].at % 8 != 0) {
                tk->raw[i].at = 0;
                active--;
                continue;
            }
            tk->iov[k++] = (proc_iov_t){ tk->raw[i].at, g, TK_GEN_READ };
        }
        if ((err = pyo_readv_zero(u->p, tk->iov, k)) != REMORA_OK)
            goto out;
        for (i = 0; i < n; i++) {
            uint64_t type = get_u64(tk->buf + i * stride, L->ob_type);
            if (tk->raw[i].at != 0 && (type == 0 || (type != u->target->coro_type &&
                                                     type != u->target->gen_type))) {
                tk->raw[i].at = 0;      /* not a coroutine: a future's iterator, the end */
                active--;
            }
        }
        /* 3.9/3.10: their frame objects */
        if (objects) {
            k = 0;
            for (i = 0; i < n; i++) {
                unsigned char *g = tk->buf + i * stride;
                uint64_t f = get_u64(g, a->gen_frame_ptr);
                if (tk->raw[i].at == 0)
                    continue;
                if (f == 0 || f % 8 != 0) {
                    tk->raw[i].at = 0;
                    active--;
                    continue;
                }
                tk->iov[k++] = (proc_iov_t){ f, g + TK_GEN_READ, TK_FRAME_READ };
            }
            if ((err = pyo_readv_zero(u->p, tk->iov, k)) != REMORA_OK)
                goto out;
        }
        /* each frame named; where it awaits, the address of what it awaits */
        k = 0;
        for (i = 0; i < n; i++) {
            unsigned char *g = tk->buf + i * stride;
            const unsigned char *fr = objects ? g + TK_GEN_READ : g + a->gen_iframe;
            uint64_t code, instr, next = 0;
            int8_t state;
            if (tk->raw[i].at == 0)
                continue;
            code = get_u64(fr, L->fr_code) & ~(uint64_t)7;
            instr = get_instr(L, fr);
            if (code != 0) {
                size_t before = tk->nframes;
                err = add_frame(u, tk, code, instr);
                if (err == REMORA_OK) {
                    tk->frames[before].below = i;   /* the task it is for, until grouped */
                    /* a TaskGroup's exit: its self (the first local) names the group */
                    if (!objects && a->fr_localsplus != 0 && tk->raw[i].group == 0 &&
                        is_group_exit(&tk->frames[before]))
                        tk->raw[i].group = get_u64(fr, a->fr_localsplus);
                } else if (err != REMORA_EFAULT && err != REMORA_ECORRUPT) {
                    goto out;
                }
                err = REMORA_OK;
            }
            switch (a->coro_frame) {
            case PY_CORO_EMBEDDED_SP: {
                uint64_t sp = get_u64(fr, a->fr_stackpointer);
                memcpy(&state, g + a->gen_frame_state, 1);
                if (state == a->gen_yield_from && sp >= a->fr_yf_back && sp % 8 == 0)
                    next = sp - a->fr_yf_back;
                break;
            }
            case PY_CORO_EMBEDDED_TOP: {
                int32_t top;
                memcpy(&state, g + a->gen_frame_state, 1);
                memcpy(&top, fr + a->fr_stacktop_at, 4);
                if (state == a->gen_yield_from && top >= 1 && top < (1 << 20))
                    next = tk->raw[i].at + a->gen_iframe + a->fr_localsplus + 8 * (uint64_t)(top - 1);
                break;
            }
            case PY_CORO_OBJECT_STACKTOP: {
                uint64_t top = get_u64(fr, a->fr_stacktop_at), vs = get_u64(fr, a->fr_localsplus);
                if (top != 0 && top % 8 == 0 && top > vs && top - vs < (1u << 20))
                    next = top - 8;
                break;
            }
            case PY_CORO_OBJECT_DEPTH: {
                uint64_t vs = get_u64(fr, a->fr_localsplus);
                int32_t depth;
                memcpy(&state, fr + a->fr_state_at, 1);
                memcpy(&depth, fr + a->fr_stacktop_at, 4);
                if (state == a->gen_yield_from && depth >= 1 && depth < (1 << 20) && vs % 8 == 0 && vs != 0)
                    next = vs + 8 * (uint64_t)(depth - 1);
                break;
            }
            }
            if (next == 0) {
                tk->raw[i].at = 0;
                active--;
                continue;
            }
            tk->iov[k++] = (proc_iov_t){ next, g + TK_GEN_READ + TK_FRAME_READ, 8 };
        }
        if ((err = pyo_readv_zero(u->p, tk->iov, k)) != REMORA_OK)
            goto out;
        for (i = 0; i < n; i++) {
            uint64_t next;
            if (tk->raw[i].at == 0)
                continue;
            next = get_u64(tk->buf + i * stride, TK_GEN_READ + TK_FRAME_READ) & ~(uint64_t)3;
            if (next == tk->raw[i].at || next == tk->raw[i].coro)
                next = 0;           /* a coroutine awaiting itself: a cycle, not followed */
            tk->raw[i].at = next;
            if (next == 0)
                active--;
        }
    }
    /* frames were added level by level for all tasks: group them per task, innermost
     * first (the deepest level first) */
    {
        size_t total = tk->nframes, base = 0, j;
        unw_frame_t *sorted = malloc((total + 1) * sizeof *sorted);
        size_t *count = calloc(n + 1, sizeof *count), *pos = calloc(n + 1, sizeof *pos);
        if (sorted == NULL || count == NULL || pos == NULL) {
            free(sorted);
            free(count);
            free(pos);
            err = REMORA_ENOMEM;
            goto out;
        }
        for (j = 0; j < total; j++)
            count[tk->frames[j].below]++;
        for (i = 0; i < n; i++) {
            tk->raw[i].first_frame = base;
            tk->raw[i].nframes = count[i];
            pos[i] = base + count[i];       /* filled from the end: innermost first */
            base += count[i];
        }
        for (j = 0; j < total; j++) {
            size_t t = tk->frames[j].below;
            sorted[--pos[t]] = tk->frames[j];
            sorted[pos[t]].below = 0;
        }
        if (total > 0)
            memcpy(tk->frames, sorted, total * sizeof *sorted);
        free(sorted);
        free(count);
        free(pos);
    }
out:
    return err;
}

static int add_link(struct unw_tasks_state *tk, uint64_t child, uint64_t parent)
{
    if (tk->nlinks >= (size_t)UNW_MAX_TASKS * 4)
        return REMORA_OK;               /* bounded: more links are left out */
    if (remora_grow((void **)&tk->links, &tk->cap_links, tk->nlinks + 1, sizeof *tk->links))
        return REMORA_ENOMEM;
    tk->links[tk->nlinks].child = child;
    tk->links[tk->nlinks].parent = parent;
    tk->nlinks++;
    return REMORA_OK;
}

/* 3.14+: each task's awaiters that are tasks (task_awaited_by: one object, or a set's
 * keys), as links. */
static int read_awaiters(unwinder_t *u, struct unw_tasks_state *tk, size_t n)
{
    const py_asyncio_t *a = &tk->a;
    size_t i;
    int err;

    for (i = 0; i < n; i++) {
        tk_raw_t *r = &tk->raw[i];
        if (r->awaited_by == 0 || r->awaited_by % 8 != 0)
            continue;
        if (!r->is_set) {
            if (find_task(tk, n, r->awaited_by) >= 0 && (err = add_link(tk, r->id, r->awaited_by)))
                return err;
            continue;
        }
        {
            unsigned char h[64];
            uint64_t mask, table, j;
            size_t added = 0;
            if ((err = proc_read(u->p, r->awaited_by, h, sizeof h)) != REMORA_OK) {
                if (err == REMORA_EFAULT)
                    continue;
                return err;
            }
            mask = get_u64(h, a->set_mask);
            table = get_u64(h, a->set_table);
            if (mask + 1 > TK_SET_MAX || ((mask + 1) & mask) != 0 || table == 0 || table % 8 != 0)
                continue;
            if (need_buf(tk, (mask + 1) * 16))
                return REMORA_ENOMEM;
            if ((err = proc_read(u->p, table, tk->buf, (mask + 1) * 16)) != REMORA_OK) {
                if (err == REMORA_EFAULT)
                    continue;
                return err;
            }
            for (j = 0; j <= mask && added < UNW_MAX_AWAITERS; j++) {
                uint64_t key = get_u64(tk->buf, j * 16);
                if (key == 0 || find_task(tk, n, key) < 0)
                    continue;
                if ((err = add_link(tk, r->id, key)) != REMORA_OK)
                    return err;
                added++;
            }
        }
    }
    return REMORA_OK;
}

static int cmp_link(const void *x, const void *y)
{
    const tk_link_t *a = x, *b = y;
    if (a->child != b->child)
        return a->child < b->child ? -1 : 1;
    return a->parent < b->parent ? -1 : a->parent > b->parent;
}

/* The links sorted by task, once each, as tk->aw and each raw's first_aw / naw (at most
 * UNW_MAX_AWAITERS a task). */
static int links_fill(struct unw_tasks_state *tk, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++)
        tk->raw[i].first_aw = tk->raw[i].naw = 0;
    tk->naw = 0;
    if (remora_grow((void **)&tk->aw, &tk->cap_aw, tk->nlinks + 1, sizeof *tk->aw))
        return REMORA_ENOMEM;
    if (tk->nlinks > 0)
        qsort(tk->links, tk->nlinks, sizeof *tk->links, cmp_link);
    for (i = 0; i < tk->nlinks; i++) {
        ssize_t idx;
        if (i > 0 && tk->links[i].child == tk->links[i - 1].child &&
            tk->links[i].parent == tk->links[i - 1].parent)
            continue;
        if ((idx = find_task(tk, n, tk->links[i].child)) < 0)
            continue;
        if (tk->raw[idx].naw == 0)
            tk->raw[idx].first_aw = tk->naw;
        else if (tk->raw[idx].naw >= UNW_MAX_AWAITERS)
            continue;
        tk->aw[tk->naw++] = tk->links[i].parent;
        tk->raw[idx].naw++;
    }
    return REMORA_OK;
}

/* Reads n objects' first len bytes at addrs[0..n) into out (len apart), in vectored reads
 * of at most 512 segments; an unreadable or unaligned one is zeroed. */
static int read_many(unwinder_t *u, struct unw_tasks_state *tk, const uint64_t *addrs, size_t n,
                     size_t len, unsigned char *out)
{
    size_t i, k;
    int err;

    if (need_iov(tk, 512))
        return REMORA_ENOMEM;
    for (i = 0; i < n; i += k) {
        size_t m = 0;
        for (k = 0; k < 512 && i + k < n; k++) {
            uint64_t a = addrs[i + k];
            unsigned char *b = out + (i + k) * len;
            if (a == 0 || a % 8 != 0) {
                memset(b, 0, len);
                continue;
            }
            tk->iov[m++] = (proc_iov_t){ a, b, len };
        }
        if ((err = pyo_readv_zero(u->p, tk->iov, m)) != REMORA_OK)
            return err;
    }
    return REMORA_OK;
}

static int add_addr(struct unw_tasks_state *tk, size_t *n, uint64_t a)
{
    if (*n >= UNW_MAX_TASKS * 2)
        return REMORA_ENOMEM;
    if (remora_grow((void **)&tk->addrs, &tk->cap_addrs, *n + 1, sizeof *tk->addrs))
        return REMORA_ENOMEM;
    tk->addrs[(*n)++] = a;
    return REMORA_OK;
}

/* Remembers the header of the set at 'set' (to see that it did not change while it was
 * read: set_moved()). */
static void set_note(unwinder_t *u, struct unw_tasks_state *tk, uint64_t set)
{
    if (tk->nsets < TK_SETS &&
        proc_read(u->p, set, tk->set_head[tk->nsets], sizeof tk->set_head[0]) == REMORA_OK)
        tk->sets[tk->nsets++] = set;
}

/* Did a set noted changed (an entry added or removed, its table replaced)? */
static int set_moved(unwinder_t *u, struct unw_tasks_state *tk)
{
    unsigned char h[48];
    size_t i;

    for (i = 0; i < tk->nsets; i++)
        if (proc_read(u->p, tk->sets[i], h, sizeof h) != REMORA_OK ||
            memcmp(h + u->target->layout.ob_head, tk->set_head[i] + u->target->layout.ob_head, 32) != 0)
            return 1;
    return 0;
}

/* The objects of the WeakSet at 'ws' (each weak reference's wr_object, at 16) added to
 * tk->addrs. A WeakSet that cannot be read adds nothing (the caller finds no task). */
static int weakset_objects(unwinder_t *u, struct unw_tasks_state *tk, uint64_t ws, size_t *n)
{
    uint64_t data, *refs;
    size_t nref = 0, i;
    unsigned char *objs;
    int err;

    if (pyo_attr(u, ws, "data", &data) != REMORA_OK)
        return REMORA_OK;
    if ((refs = malloc((UNW_MAX_TASKS + 1) * sizeof *refs)) == NULL)
        return REMORA_ENOMEM;
    set_note(u, tk, data);
    err = pyo_set_keys(u, data, refs, UNW_MAX_TASKS + 1, &nref);
    if (err == REMORA_OK && nref > UNW_MAX_TASKS)
        err = REMORA_ENOMEM;            /* more than the bound: refused, not cut */
    if (err == REMORA_OK) {
        for (i = 0; i < nref; i++)
            refs[i] += u->target->layout.ob_head;   /* PyWeakReference: the header, wr_object */
        objs = malloc(nref * 8 + 8);
        err = objs == NULL ? REMORA_ENOMEM : read_many(u, tk, refs, nref, 8, objs);
        for (i = 0; err == REMORA_OK && i < nref; i++)
            err = add_addr(tk, n, get_u64(objs, i * 8));
        free(objs);
    } else if (err != REMORA_ENOPROC && err != REMORA_ENOMEM) {
        err = REMORA_OK;
    }
    free(refs);
    return err;
}

/* The kind of the objects of type 'type' (TK_C, TK_PY or 0) as the last reading learnt
 * it: no read (per sample). */
static int task_kind(const struct unw_tasks_state *tk, uint64_t type)
{
    size_t i;

    if (type == 0)
        return 0;
    if (type == tk->cur_ctype)
        return TK_C;
    if (type == tk->cur_pytype)
        return TK_PY;
    if (tk->types_c != tk->cur_ctype || tk->types_py != tk->cur_pytype)
        return 0;
    for (i = 0; i < tk->ntypes; i++)
        if (tk->types[i].type == type)
            return tk->types[i].kind;
    return 0;
}

/* As task_kind() for the task classes ctype and pytype, a type not seen yet learnt by its
 * tp_base chain (TK_TYPE_DEPTH links at most): a subclass of asyncio.Task is a task too
 * (a task factory's, a framework's), its C fields where the C class has them. */
static int task_kind_learn(unwinder_t *u, struct unw_tasks_state *tk, uint64_t type, uint64_t ctype,
                           uint64_t pytype)
{
    uint64_t t = type;
    size_t i;
    int kind = 0, d;

    if (type == 0)
        return 0;
    if (type == ctype)
        return TK_C;
    if (type == pytype)
        return TK_PY;
    if (tk->types_c != ctype || tk->types_py != pytype) {
        tk->ntypes = 0;
        tk->types_c = ctype;
        tk->types_py = pytype;
    }
    for (i = 0; i < tk->ntypes; i++)
        if (tk->types[i].type == type)
            return tk->types[i].kind;
    for (d = 0; d < TK_TYPE_DEPTH && kind == 0; d++) {
        if (t % 8 != 0 || proc_read_u64(u->p, t + u->target->layout.tp_base, &t) != REMORA_OK)
            return 0;               /* not remembered: learnt again next reading */
        if (t == 0)
            break;
        kind = t == ctype && ctype != 0 ? TK_C : t == pytype && pytype != 0 ? TK_PY : 0;
    }
    if (tk->ntypes < TK_TYPES) {
        tk->types[tk->ntypes].type = type;
        tk->types[tk->ntypes].kind = kind;
        tk->ntypes++;
    }
    return kind;
}

/* A pure-Python task's fields, from its attributes. 1 if it is pending, else 0. */
static int py_task(unwinder_t *u, tk_raw_t *r)
{
    uint64_t state = 0;
    int err = pyo_attr(u, r->id, "_state", &state);

    /* _state is a class attribute ("PENDING") until the future is done */
    if ((err != REMORA_OK && err != REMORA_EFAULT) || (err == REMORA_OK && !pyo_str_is(u, state, "PENDING")))
        return 0;
    pyo_attr(u, r->id, "_loop", &r->loop);
    pyo_attr(u, r->id, "_coro", &r->coro);
    pyo_attr(u, r->id, "_name", &r->name);
    pyo_attr(u, r->id, "_fut_waiter", &r->waiter);
    /* 3.14+: the set of its awaiters asyncio keeps for pure-Python futures */
    if (pyo_attr(u, r->id, "_asyncio_awaited_by", &r->awaited_by) == REMORA_OK)
        r->is_set = 1;
    return 1;
}

/* Before 3.14: the tasks of asyncio.tasks' registries into tk->raw[first..*nout); each
 * thread's running loop and task into tk->tsv as tasks_once() fills it. py_only (3.14+,
 * after tasks_once()): only pure-Python tasks (the C ones are on the lists), and only a
 * thread's running task where the lists named none. */
static int registry_once(unwinder_t *u, struct unw_tasks_state *tk, unw_thread_t *th, size_t nth,
                         size_t first, int py_only, size_t *nout)
{
    const py_asyncio_t *a = &tk->a;
    uint64_t interp = 0, md, ctype = 0, pytype = 0, reg = 0, cur = 0;
    uint64_t *keys = NULL, *vals = NULL;
    unsigned char *heads = NULL;
    size_t i, j, n = 0, k = first, ncur = 0;
    int err;

    *nout = first;
    tk->gfut_type = 0;
    tk->nsets = 0;
    if (remora_grow((void **)&tk->tsv, &tk->cap_tsv, nth * 3 + 1, sizeof *tk->tsv))
        return REMORA_ENOMEM;
    if (!py_only)
        memset(tk->tsv, 0, (nth * 3 + 1) * sizeof *tk->tsv);
    for (i = 0; i < nth; i++)
        if (interp == 0 || th[i].interp_id == 0)
            interp = th[i].interp;
    if (interp == 0)
        return REMORA_OK;
    err = pyo_module_dict(u, interp, "asyncio.tasks", &md);
    if (err == REMORA_EFAULT || (py_only && err != REMORA_OK && err != REMORA_ENOPROC && err != REMORA_ENOMEM))
        return REMORA_OK;               /* asyncio not imported: no task */
    if (err != REMORA_OK)
        return err == REMORA_ECORRUPT ? tk_moved(tk, "sys.modules['asyncio.tasks'] could not be read") : err;
    if (!py_only)
        pyo_dict_get(u, md, "_CTask", &ctype);
    pyo_dict_get(u, md, "_PyTask", &pytype);
    pyo_dict_get(u, md, "_GatheringFuture", &tk->gfut_type);
    if (ctype == 0 && pytype == 0)
        return py_only ? REMORA_OK : tk_moved(tk, "asyncio.tasks names neither _CTask nor _PyTask");
    if (pyo_dict_get(u, md, "_all_tasks", &reg) == REMORA_OK &&
        (err = weakset_objects(u, tk, reg, &n)) != REMORA_OK)
        return err;
    if (pyo_dict_get(u, md, "_scheduled_tasks", &reg) == REMORA_OK &&
        (err = weakset_objects(u, tk, reg, &n)) != REMORA_OK)
        return err;
    if (pyo_dict_get(u, md, "_eager_tasks", &reg) == REMORA_OK) {
        uint64_t *eager = malloc((UNW_MAX_TASKS + 1) * sizeof *eager);
        size_t ne = 0;
        if (eager == NULL)
            return REMORA_ENOMEM;
        set_note(u, tk, reg);
        if (pyo_set_keys(u, reg, eager, UNW_MAX_TASKS + 1, &ne) == REMORA_OK)
            for (i = 0; i < ne && err == REMORA_OK; i++)
                err = add_addr(tk, &n, eager[i]);
        if (ne > UNW_MAX_TASKS)
            err = REMORA_ENOMEM;
        free(eager);
        if (err != REMORA_OK)
            return err;
    }
    if (n > 0)
        qsort(tk->addrs, n, sizeof *tk->addrs, cmp_u64);
    for (i = j = 0; i < n; i++)         /* once each (a task in two registries) */
        if (tk->addrs[i] != 0 && (j == 0 || tk->addrs[j - 1] != tk->addrs[i]))
            tk->addrs[j++] = tk->addrs[i];
    n = j;
    if (n > UNW_MAX_TASKS)
        return REMORA_ENOMEM;
    /* each object: its first bytes (a C task: all of it) in vectored reads */
    if ((heads = malloc(n * a->task_size + 8)) == NULL)
        return REMORA_ENOMEM;
    if ((err = read_many(u, tk, tk->addrs, n, a->task_size, heads)) != REMORA_OK)
        goto out;
    for (i = 0; i < n; i++) {
        const unsigned char *h = heads + i * a->task_size;
        uint64_t type = get_u64(h, u->target->layout.ob_type);
        tk_raw_t *r;
        int32_t state;
        int kind = task_kind_learn(u, tk, type, ctype, pytype);
        if (kind == 0)
            continue;
        if (remora_grow((void **)&tk->raw, &tk->cap_raw, k + 1, sizeof *tk->raw)) {
            err = REMORA_ENOMEM;
            goto out;
        }
        r = &tk->raw[k];
        memset(r, 0, sizeof *r);
        r->id = tk->addrs[i];
        if (kind == TK_PY) {
            if (!py_task(u, r))
                continue;
        } else {
            memcpy(&state, h + a->task_state, 4);
            if (state != 0)
                continue;       /* done: asyncio.all_tasks() leaves it out */
            r->loop = get_u64(h, a->task_loop);
            r->coro = get_u64(h, a->task_coro);
            r->name = get_u64(h, a->task_name);
            r->waiter = get_u64(h, a->task_fut_waiter);
        }
        k++;
    }
    /* a registry that changed while its tasks were read: read again */
    if (set_moved(u, tk)) {
        err = tk_moved(tk, "a task registry changed while its tasks were read");
        goto out;
    }
    /* the running tasks: _current_tasks {loop: task}; each loop's thread: its _thread_id */
    if (!py_only) {
        tk->cur_ctype = ctype;
        tk->cur_pytype = pytype;
    } else {
        tk->cur_pytype = pytype;
    }
    if (pyo_dict_get(u, md, "_current_tasks", &cur) == REMORA_OK && cur != 0) {
        tk->cur_dict = cur;
        keys = malloc(TK_MAX_LOOPS * sizeof *keys);
        vals = malloc(TK_MAX_LOOPS * sizeof *vals);
        if (keys == NULL || vals == NULL) {
            err = REMORA_ENOMEM;
            goto out;
        }
        if (pyo_dict_items(u, cur, keys, vals, TK_MAX_LOOPS, &ncur) != REMORA_OK)
            ncur = 0;
    }
    /* every loop a task or the dict names: which thread runs it (TK_MAX_LOOPS at most) */
    {
        uint64_t loops[TK_MAX_LOOPS];
        size_t nl = 0, l;
        for (i = 0; i < ncur && nl < TK_MAX_LOOPS; i++)
            loops[nl++] = keys[i];
        for (i = first; i < k && nl < TK_MAX_LOOPS; i++) {
            int seen = 0;
            for (l = 0; l < nl; l++)
                seen |= loops[l] == tk->raw[i].loop;
            if (!seen && tk->raw[i].loop != 0)
                loops[nl++] = tk->raw[i].loop;
        }
        for (l = 0; l < nl; l++) {
            uint64_t tid = 0, ident = 0;
            unsigned char h[48];
            if (pyo_attr(u, loops[l], "_thread_id", &tid) != REMORA_OK || tid == 0 ||
                proc_read(u->p, tid, h, sizeof h) != REMORA_OK || pyo_long(u, h, sizeof h, &ident) != REMORA_OK)
                continue;
            for (i = 0; i < nth; i++)
                if (ident != 0 && th[i].ident == ident && (!py_only || tk->tsv[3 * i + 1] == 0)) {
                    tk->tsv[3 * i] = loops[l];
                    for (j = 0; j < ncur; j++)
                        if (keys[j] == loops[l])
                            tk->tsv[3 * i + 1] = vals[j];
                }
        }
    }
    *nout = k;
    if (py_only)
        tk->py_seen = k > first;
out:
    free(heads);
    free(keys);
    free(vals);
    return err;
}

/* A shield()'s outer future 'fut': the task its _outer_done_callback (fut_callback0)
 * closes over (the inner one) into items[0]. 1, or 0 when fut is not one. */
static size_t shield_inner(unwinder_t *u, struct unw_tasks_state *tk, uint64_t fut, uint64_t *items)
{
    const py_asyncio_t *a = &tk->a;
    uint64_t cb = 0, code = 0, closure = 0, cells[8], obj;
    unw_code_t *e;
    unsigned char th[32 + 8 * 8];
    int64_t size;
    size_t fl, i;

    if (a->fut_callback0 == 0 || a->tuple_items + 64 > sizeof th || proc_read_u64(u->p, fut + a->fut_callback0, &cb) != REMORA_OK ||
        cb == 0 || cb % 8 != 0 || proc_read_u64(u->p, cb + a->func_code, &code) != REMORA_OK ||
        code == 0 || code % 8 != 0 || code_cache_get(u->codes, u->p, u->target, code, &e) != REMORA_OK)
        return 0;
    fl = strlen(e->file);
    if (strstr(e->function, "_outer_done_callback") == NULL || fl < 8 ||
        strcmp(e->file + fl - 8, "tasks.py") != 0)
        return 0;
    if (proc_read_u64(u->p, cb + a->func_closure, &closure) != REMORA_OK || closure == 0 ||
        closure % 8 != 0 || proc_read(u->p, closure, th, sizeof th) != REMORA_OK)
        return 0;
    memcpy(&size, th + u->target->layout.ob_size, 8);
    if (size < 1 || size > 8)
        return 0;
    for (i = 0; i < (size_t)size; i++) {
        cells[i] = get_u64(th, a->tuple_items + 8 * i);
        if (cells[i] == 0 || cells[i] % 8 != 0 || proc_read_u64(u->p, cells[i] + u->target->layout.cell_ref, &obj) != REMORA_OK)
            continue;
        if (find_task(tk, tk->nkeys, obj) >= 0) {
            items[0] = obj;
            return 1;
        }
    }
    return 0;
}

/* Before 3.14: who awaits whom, from each task's fut_waiter and the TaskGroups its chain
 * waits in, as tk->aw and each raw's first_aw / naw. */
static int registry_awaiters(unwinder_t *u, struct unw_tasks_state *tk, size_t n)
{
    uint64_t items[UNW_MAX_AWAITERS];
    size_t i, j, m;
    int err;

    for (i = 0; i < n; i++) {
        tk_raw_t *r = &tk->raw[i];
        m = 0;
        if (r->waiter != 0 && r->waiter % 8 == 0) {
            if (find_task(tk, n, r->waiter) >= 0) {
                items[m++] = r->waiter;
            } else {
                uint64_t type = 0, children = 0;
                if (proc_read_u64(u->p, r->waiter + u->target->layout.ob_type, &type) == REMORA_OK &&
                    type != 0 && type == tk->gfut_type) {
                    if (pyo_attr(u, r->waiter, "_children", &children) == REMORA_OK)
                        pyo_list_items(u, children, items, UNW_MAX_AWAITERS, &m);
                } else {
                    m = shield_inner(u, tk, r->waiter, items);
                }
            }
        }
        if (r->group != 0) {
            uint64_t set = 0;
            size_t more = 0;
            if (pyo_attr(u, r->group, "_tasks", &set) == REMORA_OK &&
                pyo_set_keys(u, set, items + m, UNW_MAX_AWAITERS - m, &more) == REMORA_OK)
                m += more;
        }
        for (j = 0; j < m; j++) {
            if (find_task(tk, n, items[j]) < 0 || items[j] == r->id)
                continue;
            if ((err = add_link(tk, items[j], r->id)) != REMORA_OK)
                return err;
        }
    }
    return REMORA_OK;
}

/* One reading of every list; 0, REMORA_ECORRUPT (it moved), or an error. */
static int tasks_once(unwinder_t *u, struct unw_tasks_state *tk, unw_thread_t *th, size_t nth,
                      size_t *nout)
{
    const py_asyncio_t *a = &tk->a;
    size_t i, j, nl = 0, k = 0, n = 0;
    int moved, err;

    /* each thread: running loop, running task, list head (next); each interpreter: head */
    if (remora_grow((void **)&tk->tsv, &tk->cap_tsv, nth * 3 + 1, sizeof *tk->tsv) ||
        remora_grow((void **)&tk->lists, &tk->cap_lists, (nth * 2 + 1) * 2, sizeof *tk->lists) ||
        need_iov(tk, nth * 4 + 1))
        return REMORA_ENOMEM;
    for (i = 0; i < nth; i++) {
        tk->tsv[3 * i] = tk->tsv[3 * i + 1] = tk->tsv[3 * i + 2] = 0;
        tk->iov[k++] = (proc_iov_t){ th[i].tstate + a->ts_running_loop, &tk->tsv[3 * i], 8 };
        tk->iov[k++] = (proc_iov_t){ th[i].tstate + a->ts_running_task, &tk->tsv[3 * i + 1], 8 };
        tk->iov[k++] = (proc_iov_t){ th[i].tstate + a->ts_tasks_head, &tk->tsv[3 * i + 2], 8 };
    }
    if ((err = pyo_readv_zero(u->p, tk->iov, k)) != REMORA_OK)
        return err;
    for (i = 0; i < nth; i++) {
        tk->lists[2 * nl] = th[i].tstate + a->ts_tasks_head;
        tk->lists[2 * nl + 1] = tk->tsv[3 * i + 2];
        nl++;
    }
    for (i = 0; i < nth; i++) {
        int dup = 0;
        uint64_t next = 0;
        for (j = 0; j < i; j++)
            dup |= th[j].interp == th[i].interp;
        if (dup || th[i].interp == 0)
            continue;
        if ((err = proc_read_u64(u->p, th[i].interp + a->is_tasks_head, &next)) != REMORA_OK)
            return err == REMORA_EFAULT ? tk_moved(tk, "an interpreter's task list could not be read") : err;
        tk->lists[2 * nl] = th[i].interp + a->is_tasks_head;
        tk->lists[2 * nl + 1] = next;
        nl++;
    }
    if ((err = walk_lists(u, tk, nl, &n, &moved)) != REMORA_OK)
        return err;
    if (moved)
        return tk_moved(tk, "a task list changed while it was walked");
    *nout = n;
    return REMORA_OK;
}

/* A running task's frames as its thread's stack has them: the thread's frames from the
 * innermost to the outermost one running the task's outermost coroutine's code. */
static size_t running_frames(const unw_thread_t *th, const unw_frame_t *outer)
{
    size_t j, found = 0;

    if (outer == NULL || th->error)
        return 0;
    for (j = 0; j < th->nframes; j++)
        if (!th->frames[j].native && th->frames[j].function == outer->function &&
            th->frames[j].file == outer->file)
            found = j + 1;
    return found;
}

/* The tasks read, sorted by id in tk->keys, and named. REMORA_ECORRUPT when a task is
 * there twice (a list moved between two heads) or a name cannot be read (a task freed
 * after its list or registry was read): the reading is made again. */
static int index_and_name(unwinder_t *u, struct unw_tasks_state *tk, size_t cnt)
{
    size_t i;
    int err;

    if (remora_grow((void **)&tk->tasks, &tk->cap_tasks, cnt + 1, sizeof *tk->tasks) ||
        remora_grow((void **)&tk->keys, &tk->cap_keys, cnt + 1, sizeof *tk->keys))
        return REMORA_ENOMEM;
    memset(tk->tasks, 0, (cnt + 1) * sizeof *tk->tasks);
    for (i = 0; i < cnt; i++) {
        tk->keys[i].id = tk->raw[i].id;
        tk->keys[i].idx = i;
    }
    qsort(tk->keys, cnt, sizeof *tk->keys, cmp_key);
    tk->nkeys = cnt;
    for (i = 1; i < cnt; i++)
        if (tk->keys[i].id == tk->keys[i - 1].id)
            return tk_moved(tk, "a task was on two lists (a list moved between two heads)");
    if ((err = read_names(u, tk, cnt)) != REMORA_OK)
        return err;
    for (i = 0; i < cnt; i++)
        if (tk->tasks[i].name == tk->unnamed)
            return tk_moved(tk, "a task's name could not be read (the task freed, or its name replaced)");
    return REMORA_OK;
}

static int tasks_read(unwinder_t *u, unw_task_t **tasks, size_t *n)
{
    struct unw_tasks_state *tk;
    unw_thread_t *th;
    size_t nth, i, cnt = 0, total_frames;
    unsigned tries;
    int err;

    *tasks = NULL;
    *n = 0;
    if ((err = tk_layout(u, &tk)) != REMORA_OK)
        return err;
    tk->ntasks = 0;
    if (!tk->a.found)
        return REMORA_OK;
    tk->moved = NULL;
    for (tries = 0;; tries++) {
        if ((err = unw_sample(u, &th, &nth)) != REMORA_OK) {
            if (err != REMORA_ECORRUPT || tries + 1 >= UNW_TASK_TRIES + u->tries)
                return err == REMORA_ECORRUPT ? tk_moved(tk, "the thread list changed while it was read") : err;
            continue;
        }
        if (tk->a.kind == PY_ASYNC_LISTS) {
            /* the C module's tasks on their lists, then pure-Python ones in the registry */
            err = tasks_once(u, tk, th, nth, &cnt);
            if (err == REMORA_OK)
                err = registry_once(u, tk, th, nth, cnt, 1, &cnt);
        } else {
            err = registry_once(u, tk, th, nth, 0, 0, &cnt);
        }
        if (err == REMORA_OK)
            err = index_and_name(u, tk, cnt);
        if (err != REMORA_ECORRUPT || tries + 1 >= UNW_TASK_TRIES + u->tries)
            break;
    }
    if (err != REMORA_OK)
        return err;
    tk->nframes = 0;
    if ((err = read_chains(u, tk, cnt)) != REMORA_OK)
        return err;
    tk->nlinks = 0;
    if (tk->a.kind == PY_ASYNC_LISTS && (err = read_awaiters(u, tk, cnt)) != REMORA_OK)
        return err;
    if ((err = registry_awaiters(u, tk, cnt)) != REMORA_OK || (err = links_fill(tk, cnt)) != REMORA_OK)
        return err;
    /* running tasks take their thread's frames: make room for them after the chains */
    total_frames = tk->nframes;
    for (i = 0; i < cnt; i++) {
        size_t t;
        for (t = 0; t < nth; t++)
            if (tk->tsv[3 * t + 1] == tk->raw[i].id)
                total_frames += th[t].nframes;
    }
    if (remora_grow((void **)&tk->frames, &tk->cap_frames, total_frames + 1, sizeof *tk->frames))
        return REMORA_ENOMEM;
    for (i = 0; i < cnt; i++) {
        unw_task_t *t = &tk->tasks[i];
        const tk_raw_t *r = &tk->raw[i];
        size_t ti;

        t->id = r->id;
        t->frames = tk->frames + r->first_frame;
        t->nframes = r->nframes;
        t->awaited_by = tk->aw + r->first_aw;
        t->nawaited_by = r->naw;
        for (ti = 0; ti < nth; ti++) {
            if (r->loop != 0 && tk->tsv[3 * ti] == r->loop && t->thread == 0)
                t->thread = th[ti].native_id;
            if (tk->tsv[3 * ti + 1] == r->id) {
                const unw_frame_t *outer = r->nframes ? &t->frames[r->nframes - 1] : NULL;
                size_t m = running_frames(&th[ti], outer);
                t->running = 1;
                t->thread = th[ti].native_id;
                if (m > 0) {
                    memcpy(tk->frames + tk->nframes, th[ti].frames, m * sizeof *th[ti].frames);
                    t->frames = tk->frames + tk->nframes;
                    t->nframes = m;
                    tk->nframes += m;
                }
            }
        }
    }
    tk->ntasks = cnt;
    *tasks = tk->tasks;
    *n = cnt;
    return REMORA_OK;
}

int unw_tasks(unwinder_t *u, unw_task_t **tasks, size_t *n)
{
    int err = tasks_read(u, tasks, n);

    if (u->tasks != NULL)
        u->tasks->last_err = err;
    return err;
}

int unw_task_chain(unwinder_t *u, uint64_t id, const unw_task_t *const **chain, size_t *n)
{
    struct unw_tasks_state *tk = u->tasks;
    const unw_task_t *rev[UNW_MAX_CHAIN];
    size_t k = 0, i;

    *chain = NULL;
    *n = 0;
    if (tk == NULL || tk->ntasks == 0)
        return REMORA_EFAULT;
    while (k < UNW_MAX_CHAIN) {
        ssize_t at = find_task(tk, tk->ntasks, id);
        int cycle = 0;
        if (at < 0)
            break;
        for (i = 0; i < k; i++)
            cycle |= rev[i] == &tk->tasks[at];
        if (cycle)
            break;
        rev[k++] = &tk->tasks[at];
        if (tk->tasks[at].nawaited_by == 0)
            break;
        id = tk->tasks[at].awaited_by[0];
    }
    if (k == 0)
        return REMORA_EFAULT;
    for (i = 0; i < k; i++)
        tk->chain[i] = rev[k - 1 - i];
    *chain = tk->chain;
    *n = k;
    return REMORA_OK;
}

/* The thread (pthread id) running 'loop' now: its _thread_id, looked up once a second at
 * most per loop (the slow way: a new loop costs reads and allocations once). */
static uint64_t loop_ident(unwinder_t *u, struct unw_tasks_state *tk, uint64_t loop, int64_t now)
{
    uint64_t tid = 0, ident = 0;
    unsigned char h[48];
    size_t i;

    for (i = 0; i < tk->nloops; i++)
        if (tk->loops[i].loop == loop && now - tk->loops[i].ns < TK_LOOP_NS)
            return tk->loops[i].ident;
    if (pyo_attr(u, loop, "_thread_id", &tid) == REMORA_OK && tid != 0 &&
        proc_read(u->p, tid, h, sizeof h) == REMORA_OK)
        pyo_long(u, h, sizeof h, &ident);
    for (i = 0; i < tk->nloops; i++)
        if (tk->loops[i].loop == loop)
            break;
    if (i == tk->nloops) {
        if (tk->nloops == TK_MAX_LOOPS)
            tk->nloops = 0;             /* bounded: start over */
        i = tk->nloops++;
    }
    tk->loops[i].loop = loop;
    tk->loops[i].ident = ident;
    tk->loops[i].ns = now;
    return ident;
}

/* Before 3.14, per sample: the _current_tasks dict {loop: task} (its header, then its keys
 * object, TK_CUR_READ bytes: two reads), each loop's thread (cached), and for each running
 * C task its coroutine's code (a vectored read of the tasks' coroutines, one of their
 * frames' code; 3.9/3.10 one more for the frame objects). A pure-Python task's code is
 * looked up the slow way once per task (TK_PY_CODES cached). */
static int registry_sample(unwinder_t *u, struct unw_tasks_state *tk, unw_thread_t *th, size_t n,
                           int py_only)
{
    const py_layout_t *L = &u->target->layout;
    const py_asyncio_t *a = &tk->a;
    int64_t now = now_ns();
    unsigned char h[48];
    uint64_t keys, entries, esz = 24;
    pyo_keys_t dk;
    int64_t nent;
    size_t i, j, k;
    int err;

    if (tk->cur_dict == 0) {
        /* found by a reading of the registry (unw_tasks(), or this one: at most every
         * TK_RELOOK_NS until asyncio is imported) */
        size_t cnt = 0;
        if (now - tk->cur_looked_ns < TK_RELOOK_NS)
            return REMORA_OK;
        tk->cur_looked_ns = now;
        if ((err = registry_once(u, tk, th, n, 0, py_only, &cnt)) != REMORA_OK && err != REMORA_ECORRUPT)
            return err;
        if (tk->cur_dict == 0)
            return REMORA_OK;
    }
    /* py_only (3.14+): threads whose running task the lists named keep it */
    for (i = 0; i < n; i++)
        tk->had[i] = th[i].task != 0;
    if ((err = proc_read(u->p, tk->cur_dict, h, sizeof h)) != REMORA_OK)
        goto gone;
    if (get_u64(h, L->ob_type) != u->target->dict_type || get_u64(h, L->dict_values) != 0)
        goto gone;
    keys = get_u64(h, L->dict_keys);
    if (keys == 0 || keys % 8 != 0 || (err = proc_read(u->p, keys, tk->curbuf, 64)) != REMORA_OK)
        goto gone;
    if (pyo_keys(L, tk->curbuf, 64, &dk) != REMORA_OK || dk.size > 64 || dk.esz != esz)
        return REMORA_OK;
    nent = dk.nent;
    entries = dk.entries;
    if (nent < 0 || entries + (uint64_t)nent * esz > TK_CUR_READ)
        return REMORA_OK;               /* more loops than a sample reads: none named */
    if ((err = proc_read(u->p, keys + entries, tk->curbuf, (size_t)nent * esz)) != REMORA_OK)
        goto gone;
    for (j = 0; j < (size_t)nent; j++) {
        uint64_t loop = get_u64(tk->curbuf, j * esz + dk.koff), task = get_u64(tk->curbuf, j * esz + dk.voff);
        uint64_t ident;
        if (loop == 0 || task == 0 || task % 8 != 0)
            continue;
        ident = loop_ident(u, tk, loop, now);
        for (i = 0; i < n && ident != 0; i++)
            if (th[i].ident == ident && !tk->had[i])
                th[i].task = task;
    }
    /* the running tasks' coroutines and their types, then their frames' code */
    for (i = k = 0; i < n; i++) {
        tk->run[i] = tk->coro[i] = tk->code[i] = 0;
        if (th[i].task == 0 || tk->had[i])
            continue;
        tk->iov[k++] = (proc_iov_t){ th[i].task + L->ob_type, &tk->run[i], 8 };
        tk->iov[k++] = (proc_iov_t){ th[i].task + a->task_coro, &tk->coro[i], 8 };
    }
    if (k == 0 || (err = pyo_readv_zero(u->p, tk->iov, k)) != REMORA_OK)
        return err;
    for (i = k = 0; i < n; i++) {
        if (th[i].task == 0 || task_kind(tk, tk->run[i]) != TK_C || tk->coro[i] == 0 || tk->coro[i] % 8 != 0)
            continue;
        if (a->gen_frame_ptr != 0)      /* 3.9/3.10: the frame object first */
            tk->iov[k++] = (proc_iov_t){ tk->coro[i] + a->gen_frame_ptr, &tk->code[i], 8 };
        else
            tk->iov[k++] = (proc_iov_t){ tk->coro[i] + a->gen_iframe + L->fr_code, &tk->code[i], 8 };
    }
    if ((err = pyo_readv_zero(u->p, tk->iov, k)) != REMORA_OK)
        return err;
    if (a->gen_frame_ptr != 0) {
        for (i = k = 0; i < n; i++)
            if (tk->code[i] != 0 && tk->code[i] % 8 == 0)
                tk->iov[k++] = (proc_iov_t){ tk->code[i] + L->fr_code, &tk->code[i], 8 };
        if ((err = pyo_readv_zero(u->p, tk->iov, k)) != REMORA_OK)
            return err;
    }
    for (i = 0; i < n; i++) {
        unw_frame_t outer;
        unw_code_t *e;
        if (th[i].task == 0 || tk->had[i])
            continue;
        outer.function = NULL;
        if (task_kind(tk, tk->run[i]) == TK_C && tk->code[i] != 0 &&
            code_cache_get(u->codes, u->p, u->target, tk->code[i], &e) == REMORA_OK) {
            outer.function = e->function;
            outer.file = e->file;
        } else if (task_kind(tk, tk->run[i]) == TK_PY) {
            for (j = 0; j < tk->npyc; j++)
                if (tk->pyc[j].task == th[i].task) {
                    outer.function = tk->pyc[j].function;
                    outer.file = tk->pyc[j].file;
                }
            if (outer.function == NULL) {
                uint64_t coro = 0, f = 0, code = 0;
                if (pyo_attr(u, th[i].task, "_coro", &coro) == REMORA_OK && coro % 8 == 0 &&
                    (a->gen_frame_ptr != 0 ?
                     proc_read_u64(u->p, coro + a->gen_frame_ptr, &f) == REMORA_OK && f % 8 == 0 && f != 0 &&
                     proc_read_u64(u->p, f + L->fr_code, &code) == REMORA_OK :
                     proc_read_u64(u->p, coro + a->gen_iframe + L->fr_code, &code) == REMORA_OK) &&
                    code != 0 && code_cache_get(u->codes, u->p, u->target, code & ~(uint64_t)7, &e) == REMORA_OK) {
                    if (tk->npyc == TK_PY_CODES)
                        tk->npyc = 0;
                    tk->pyc[tk->npyc].task = th[i].task;
                    tk->pyc[tk->npyc].function = outer.function = e->function;
                    tk->pyc[tk->npyc].file = outer.file = e->file;
                    tk->npyc++;
                }
            }
        }
        th[i].task_frames = outer.function != NULL ? running_frames(&th[i], &outer) : 0;
    }
    return REMORA_OK;
gone:
    /* the dict is gone or replaced: found again by the next reading */
    tk->cur_dict = 0;
    return err == REMORA_ENOPROC ? err : REMORA_OK;
}

/* Per sample (UNW_WANT_TASKS), 3.14+: every thread's asyncio_running_task in one vectored
 * read; for the threads running one, its coroutine (one more) and that coroutine's frame's
 * code object (one more; named through the code cache): task_frames counts the thread's
 * frames from the innermost to the outermost one running that code. Nothing allocated
 * once the arrays have grown to the thread count. */
int tasks_sample(unwinder_t *u, unw_thread_t *th, size_t n)
{
    const py_layout_t *L = &u->target->layout;
    struct unw_tasks_state *tk;
    size_t i, k;
    int err;

    for (i = 0; i < n; i++) {
        th[i].task = 0;
        th[i].task_frames = 0;
    }
    err = tk_layout(u, &tk);
    if (err != REMORA_OK || !tk->a.found || n == 0)
        return err == REMORA_EVERSION ? REMORA_OK : err;
    if (remora_grow((void **)&tk->run, &tk->cap_run, 4 * n, sizeof *tk->run) || need_iov(tk, 2 * n))
        return REMORA_ENOMEM;
    tk->coro = tk->run + n;         /* one array: running task, coroutine, code, and whether */
    tk->code = tk->run + 2 * n;     /* the lists named a task, per thread */
    tk->had = tk->run + 3 * n;
    if (tk->a.kind != PY_ASYNC_LISTS)
        return registry_sample(u, tk, th, n, 0);
    for (i = 0; i < n; i++) {
        tk->run[i] = tk->coro[i] = tk->code[i] = 0;
        tk->iov[i] = (proc_iov_t){ th[i].tstate + tk->a.ts_running_task, &tk->run[i], 8 };
    }
    if ((err = pyo_readv_zero(u->p, tk->iov, n)) != REMORA_OK)
        return err;
    for (i = k = 0; i < n; i++)
        if (tk->run[i] != 0 && tk->run[i] % 8 == 0)
            tk->iov[k++] = (proc_iov_t){ tk->run[i] + tk->a.task_coro, &tk->coro[i], 8 };
    if (k == 0)
        goto py;
    if ((err = pyo_readv_zero(u->p, tk->iov, k)) != REMORA_OK)
        return err;
    for (i = k = 0; i < n; i++)
        if (tk->coro[i] != 0 && tk->coro[i] % 8 == 0)
            tk->iov[k++] = (proc_iov_t){ tk->coro[i] + tk->a.gen_iframe + L->fr_code, &tk->code[i], 8 };
    if ((err = pyo_readv_zero(u->p, tk->iov, k)) != REMORA_OK)
        return err;
    for (i = 0; i < n; i++) {
        unw_code_t *e;
        unw_frame_t outer;
        if (tk->run[i] == 0 || tk->run[i] % 8 != 0)
            continue;
        th[i].task = tk->run[i];
        if (tk->code[i] == 0 ||
            code_cache_get(u->codes, u->p, u->target, tk->code[i] & ~(uint64_t)7, &e) != REMORA_OK)
            continue;
        outer.function = e->function;
        outer.file = e->file;
        th[i].task_frames = running_frames(&th[i], &outer);
    }
py:
    /* pure-Python tasks run outside the lists: asyncio.tasks' _current_tasks names them */
    for (i = 0; i < n && tk->py_seen; i++)
        if (th[i].task == 0)
            return registry_sample(u, tk, th, n, 1);
    return REMORA_OK;
}
