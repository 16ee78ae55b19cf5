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
#define TK_GEN_READ 160             /* bytes read of a coroutine: up to its frame's stack
                                     * pointer (gen_iframe + fr_stackpointer + 8) */
#define TK_SET_MAX (1u << 16)       /* set entries scanned (awaiters) */
#define TK_RELOOK_NS 500000000      /* _asyncio not loaded: looked for again this often */

typedef struct tk_raw {
    uint64_t id, loop, coro, name, awaited_by;
    int is_set;
    size_t first_frame, nframes;    /* in tk->frames */
    size_t first_aw, naw;           /* in tk->aw */
    uint64_t at;                    /* the chain's walk: the object to read next (0: done) */
} tk_raw_t;

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
    uint64_t *tsv;                  /* per thread: running loop, running task */
    size_t cap_tsv;
    const unw_task_t **chain;       /* unw_task_chain(): UNW_MAX_CHAIN pointers */
    /* per sample (UNW_WANT_TASKS) */
    uint64_t *run, *coro, *code;    /* coro and code point into run */
    size_t cap_run;
};

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
    return u->tasks != NULL ? u->tasks->why : "";
}

static int need_buf(struct unw_tasks_state *tk, size_t len)
{
    return remora_grow((void **)&tk->buf, &tk->cap_buf, len, 1) ? REMORA_ENOMEM : REMORA_OK;
}

static int need_iov(struct unw_tasks_state *tk, size_t n)
{
    return remora_grow((void **)&tk->iov, &tk->cap_iov, n, sizeof *tk->iov) ? REMORA_ENOMEM : REMORA_OK;
}

/* Reads tk->iov[0..n); a segment that fails is zeroed (its object then matches no type
 * and is left out), halving the batch down to single segments. */
static int readv_zero(proc_t *p, proc_iov_t *iov, size_t n)
{
    int err;

    if (n == 0)
        return REMORA_OK;
    err = proc_readv(p, iov, n);
    if (err == REMORA_OK || err == REMORA_ENOPROC || err == REMORA_ENOMEM || err == REMORA_EPERM)
        return err;
    if (n == 1) {
        memset(iov[0].buf, 0, iov[0].len);
        return REMORA_OK;
    }
    if ((err = readv_zero(p, iov, n / 2)) != REMORA_OK)
        return err;
    return readv_zero(p, iov + n / 2, n - n / 2);
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
                if (state == 0)     /* pending: asyncio.all_tasks() leaves out done ones */
                    k++;
            }
            prev = node;
            node = get_u64(tk->buf, a->task_node);
        }
    }
    *n = k;
    return REMORA_OK;
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
    if ((err = readv_zero(u->p, tk->iov, k)) != REMORA_OK)
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
            uint64_t tag = get_u64(h, 16), v = 0;
            int64_t nd = L->long_tagged ? ((tag & 3) ? -1 : (int64_t)(tag >> 3)) : (int64_t)tag;
            if (nd >= 0 && nd <= 2) {
                for (int d = (int)nd - 1; d >= 0; d--) {
                    uint32_t dig;
                    memcpy(&dig, h + L->long_digits + 4 * d, 4);
                    v = v << 30 | (dig & 0x3fffffff);
                }
                len = (size_t)snprintf(name, sizeof name, "Task-%llu", (unsigned long long)v);
                tk->tasks[i].name = strtab_intern(u->names, name, len);
            }
        }
        if (tk->tasks[i].name == NULL)
            tk->tasks[i].name = strtab_intern(u->names, "?", 1);
        if (tk->tasks[i].name == NULL)
            return REMORA_ENOMEM;
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

/* Each task's coroutine chain, outermost first into tk->frames (reversed at the end):
 * one level for every task per pair of vectored reads. */
static int read_chains(unwinder_t *u, struct unw_tasks_state *tk, size_t n)
{
    const py_layout_t *L = &u->target->layout;
    const py_asyncio_t *a = &tk->a;
    uint64_t *seen = NULL;
    size_t i, level, active = 0;
    int err = REMORA_OK;

    if (a->gen_iframe + a->fr_stackpointer + 8 > TK_GEN_READ ||
        a->gen_iframe + L->fr_code + 8 > TK_GEN_READ || a->gen_iframe + L->fr_instr + 8 > TK_GEN_READ)
        return REMORA_ECORRUPT;
    /* the chains are built level by level: each task's frames, once all are known, are
     * copied out in order; meanwhile each level's frame is kept per task */
    seen = calloc((size_t)n * 2 + 1, sizeof *seen);     /* per task: code, instr */
    if (seen == NULL)
        return REMORA_ENOMEM;
    for (i = 0; i < n; i++) {
        tk->raw[i].at = tk->raw[i].coro;
        tk->raw[i].first_frame = tk->nframes;
        tk->raw[i].nframes = 0;
        active += tk->raw[i].at != 0;
    }
    /* frames go to per-level slots: a level's frame of task i at level * n + i */
    for (level = 0; level < UNW_MAX_TASK_DEPTH && active > 0; level++) {
        size_t k = 0;
        if (need_buf(tk, n * (TK_GEN_READ + 8)) || need_iov(tk, n)) {
            err = REMORA_ENOMEM;
            goto out;
        }
        for (i = 0; i < n; i++) {
            if (tk->raw[i].at == 0 || tk->raw[i].at % 8 != 0) {
                tk->raw[i].at = 0;
                continue;
            }
            tk->iov[k].addr = tk->raw[i].at;
            tk->iov[k].buf = tk->buf + i * (TK_GEN_READ + 8);
            tk->iov[k].len = TK_GEN_READ;
            k++;
        }
        for (i = 0; i < n; i++)
            if (tk->raw[i].at == 0)
                memset(tk->buf + i * (TK_GEN_READ + 8), 0, TK_GEN_READ);
        if ((err = readv_zero(u->p, tk->iov, k)) != REMORA_OK)
            goto out;
        /* the awaited objects' addresses, one more read */
        k = 0;
        for (i = 0; i < n; i++) {
            unsigned char *g = tk->buf + i * (TK_GEN_READ + 8);
            uint64_t type = get_u64(g, L->ob_type), sp;
            int8_t state;
            if (tk->raw[i].at == 0)
                continue;
            if (type == 0 || (type != u->target->coro_type && type != u->target->gen_type)) {
                tk->raw[i].at = 0;
                active--;
                continue;
            }
            seen[2 * i] = get_u64(g, a->gen_iframe + L->fr_code) & ~(uint64_t)7;
            seen[2 * i + 1] = get_u64(g, a->gen_iframe + L->fr_instr);
            if (seen[2 * i] != 0) {
                /* frames are kept in level order per task: add now, fix order later */
                size_t before = tk->nframes;
                if ((err = add_frame(u, tk, seen[2 * i], seen[2 * i + 1])) != REMORA_OK) {
                    if (err != REMORA_EFAULT && err != REMORA_ECORRUPT)
                        goto out;
                    err = REMORA_OK;
                } else {
                    /* remember which task the frame is for: reuse 'below' */
                    tk->frames[before].below = i;
                }
            }
            memcpy(&state, g + a->gen_frame_state, 1);
            sp = get_u64(g, a->gen_iframe + a->fr_stackpointer);
            if (state != a->gen_yield_from || sp < a->fr_yf_back || sp % 8 != 0) {
                tk->raw[i].at = 0;
                active--;
                continue;
            }
            tk->iov[k].addr = sp - a->fr_yf_back;
            tk->iov[k].buf = g + TK_GEN_READ;
            tk->iov[k].len = 8;
            k++;
        }
        if ((err = readv_zero(u->p, tk->iov, k)) != REMORA_OK)
            goto out;
        for (i = 0; i < n; i++) {
            uint64_t next;
            if (tk->raw[i].at == 0)
                continue;
            next = get_u64(tk->buf + i * (TK_GEN_READ + 8), TK_GEN_READ) & ~(uint64_t)3;
            if (next == tk->raw[i].at || next == tk->raw[i].coro) {
                next = 0;           /* a coroutine awaiting itself: a cycle, not followed */
            }
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
        memcpy(tk->frames, sorted, total * sizeof *sorted);
        free(sorted);
        free(count);
        free(pos);
    }
out:
    free(seen);
    return err;
}

/* Each task's awaiters that are tasks (a single object, or a set's keys). */
static int read_awaiters(unwinder_t *u, struct unw_tasks_state *tk, size_t n)
{
    const py_asyncio_t *a = &tk->a;
    size_t i;
    int err;

    tk->naw = 0;
    for (i = 0; i < n; i++) {
        tk_raw_t *r = &tk->raw[i];
        r->first_aw = tk->naw;
        r->naw = 0;
        if (r->awaited_by == 0 || r->awaited_by % 8 != 0)
            continue;
        if (!r->is_set) {
            if (find_task(tk, n, r->awaited_by) < 0)
                continue;
            if (remora_grow((void **)&tk->aw, &tk->cap_aw, tk->naw + 1, sizeof *tk->aw))
                return REMORA_ENOMEM;
            tk->aw[tk->naw++] = r->awaited_by;
            r->naw = 1;
            continue;
        }
        {
            unsigned char h[64];
            uint64_t mask, table, j;
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
            for (j = 0; j <= mask && r->naw < UNW_MAX_AWAITERS; j++) {
                uint64_t key = get_u64(tk->buf, j * 16);
                if (key == 0 || find_task(tk, n, key) < 0)
                    continue;
                if (remora_grow((void **)&tk->aw, &tk->cap_aw, tk->naw + 1, sizeof *tk->aw))
                    return REMORA_ENOMEM;
                tk->aw[tk->naw++] = key;
                r->naw++;
            }
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
    if ((err = readv_zero(u->p, tk->iov, k)) != REMORA_OK)
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
            return err == REMORA_EFAULT ? REMORA_ECORRUPT : err;
        tk->lists[2 * nl] = th[i].interp + a->is_tasks_head;
        tk->lists[2 * nl + 1] = next;
        nl++;
    }
    if ((err = walk_lists(u, tk, nl, &n, &moved)) != REMORA_OK)
        return err;
    if (moved)
        return REMORA_ECORRUPT;
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

int unw_tasks(unwinder_t *u, unw_task_t **tasks, size_t *n)
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
    for (tries = 0;; tries++) {
        if ((err = unw_sample(u, &th, &nth)) != REMORA_OK)
            return err;
        err = tasks_once(u, tk, th, nth, &cnt);
        if (err != REMORA_ECORRUPT || tries + 1 >= UNW_TASK_TRIES + u->tries)
            break;
    }
    if (err != REMORA_OK)
        return err;
    if (remora_grow((void **)&tk->tasks, &tk->cap_tasks, cnt + 1, sizeof *tk->tasks) ||
        remora_grow((void **)&tk->keys, &tk->cap_keys, cnt + 1, sizeof *tk->keys))
        return REMORA_ENOMEM;
    memset(tk->tasks, 0, (cnt + 1) * sizeof *tk->tasks);
    for (i = 0; i < cnt; i++) {
        tk->keys[i].id = tk->raw[i].id;
        tk->keys[i].idx = i;
    }
    qsort(tk->keys, cnt, sizeof *tk->keys, cmp_key);
    /* the same task twice (a list that moved between two heads): read again */
    for (i = 1; i < cnt; i++)
        if (tk->keys[i].id == tk->keys[i - 1].id)
            return REMORA_ECORRUPT;
    if ((err = read_names(u, tk, cnt)) != REMORA_OK)
        return err;
    tk->nframes = 0;
    if ((err = read_chains(u, tk, cnt)) != REMORA_OK)
        return err;
    if ((err = read_awaiters(u, tk, cnt)) != REMORA_OK)
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
    if (remora_grow((void **)&tk->run, &tk->cap_run, 3 * n, sizeof *tk->run) || need_iov(tk, n))
        return REMORA_ENOMEM;
    tk->coro = tk->run + n;         /* one array: running task, coroutine, code per thread */
    tk->code = tk->run + 2 * n;
    for (i = 0; i < n; i++) {
        tk->run[i] = tk->coro[i] = tk->code[i] = 0;
        tk->iov[i] = (proc_iov_t){ th[i].tstate + tk->a.ts_running_task, &tk->run[i], 8 };
    }
    if ((err = readv_zero(u->p, tk->iov, n)) != REMORA_OK)
        return err;
    for (i = k = 0; i < n; i++)
        if (tk->run[i] != 0 && tk->run[i] % 8 == 0)
            tk->iov[k++] = (proc_iov_t){ tk->run[i] + tk->a.task_coro, &tk->coro[i], 8 };
    if (k == 0)
        return REMORA_OK;
    if ((err = readv_zero(u->p, tk->iov, k)) != REMORA_OK)
        return err;
    for (i = k = 0; i < n; i++)
        if (tk->coro[i] != 0 && tk->coro[i] % 8 == 0)
            tk->iov[k++] = (proc_iov_t){ tk->coro[i] + tk->a.gen_iframe + L->fr_code, &tk->code[i], 8 };
    if ((err = readv_zero(u->p, tk->iov, k)) != REMORA_OK)
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
    return REMORA_OK;
}
