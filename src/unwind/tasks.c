/* unwind/tasks.c — asyncio tasks, read from outside: every task of every event loop, its
 * name, its coroutine stack and the tasks awaiting it (unw_tasks, unw_task_chain).
 *
 * A reading: the threads (unw_sample()), then the tasks: 3.14+ (py_asyncio_t from the
 * _asyncio module's AsyncioDebug section) those on the task lists (tasks_lists.c) and the
 * pure-Python ones of asyncio.tasks' registries; 3.9-3.13 (py_asyncio_t kind
 * PY_ASYNC_REGISTRY) those of the registries alone (tasks_registry.c). A reading that
 * moved under it (a list, a registry, a task freed) is made again (UNW_TASK_TRIES times,
 * then REMORA_ECORRUPT). Then, in vectored reads: the names (a str, or an int N for
 * "Task-N"), each task's coroutine chain and the tasks awaiting it (tasks_chain.c); a
 * running task's frames are its thread's. Per sample, each thread's running task:
 * tasks_running.c. What these files share: tasks.h.
 * Every walk is bounded: UNW_MAX_TASKS tasks, UNW_MAX_TASK_DEPTH coroutines per chain (a
 * coroutine seen again in its own chain ends it), UNW_MAX_AWAITERS per task.
 * Memory read here: the tasks' names (str or int objects); the rest in the files named.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "remora.h"
#include "internal.h"
#include "tasks.h"

#define UNW_TASK_TRIES 4            /* walks of task lists that moved under the reading */

void tasks_free(struct unw_tasks_state *tk)
{
    if (tk == NULL)
        return;
    free(tk->tasks);
    free(tk->raw);
    free(tk->keys);
    free(tk->fkeys);
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
int tk_layout(unwinder_t *u, struct unw_tasks_state **out)
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
    now = remora_now_ns();
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

/* tk_name_of() and tk_name_image(): p NULL, hlen bytes at h the whole of what is known */
static const char *name_from(unwinder_t *u, proc_t *p, uint64_t at, const unsigned char *h, size_t hlen)
{
    const py_layout_t *L = &u->target->layout;
    char name[UNW_MAX_NAME * 4 + 1];
    uint64_t type = hlen >= L->ob_type + 8 ? get_u64(h, L->ob_type) : 0;
    size_t len = 0;

    if (type != 0 && type == u->target->str_type &&
        pystr_from_head(p, L, at, h, hlen, name, sizeof name, &len) == REMORA_OK)
        return strtab_intern(u->strs, name, len);
    if (type != 0 && type == u->target->long_type) {
        /* a small non-negative int: one 30-bit digit (or two) */
        uint64_t v = 0;
        if (pyo_long(u, h, hlen, &v) == REMORA_OK && v < (UINT64_C(1) << 60)) {
            len = (size_t)snprintf(name, sizeof name, "Task-%llu", (unsigned long long)v);
            return strtab_intern(u->strs, name, len);
        }
    }
    return NULL;
}

const char *tk_name_of(unwinder_t *u, uint64_t at, const unsigned char *h)
{
    return name_from(u, u->p, at, h, TK_NAME_HEAD);
}

const char *tk_name_image(unwinder_t *u, const unsigned char *h, size_t len)
{
    return name_from(u, NULL, 0, h, len);
}

/* Each task's name: a str, or an int N ("Task-N", named lazily). */
static int read_names(unwinder_t *u, struct unw_tasks_state *tk, size_t n)
{
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
        tk->tasks[i].name = tk_name_of(u, tk->raw[i].name, tk->buf + i * TK_NAME_HEAD);
        if (tk->tasks[i].name == NULL) {
            if (tk->unnamed == NULL && (tk->unnamed = strtab_intern(u->strs, "?", 1)) == NULL)
                return REMORA_ENOMEM;
            tk->tasks[i].name = tk->unnamed;
        }
    }
    return REMORA_OK;
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
    tk->nfkeys = 0;
    tk->stale = 0;
    tk->late.id = 0;
    tk->nkept = tk->next_kept = 0;
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
            err = tk_lists_once(u, tk, th, nth, &cnt);
            if (err == REMORA_OK)
                err = tk_registry_once(u, tk, th, nth, cnt, 1, &cnt);
        } else {
            err = tk_registry_once(u, tk, th, nth, 0, 0, &cnt);
        }
        if (err == REMORA_OK)
            err = index_and_name(u, tk, cnt);
        if (err != REMORA_ECORRUPT || tries + 1 >= UNW_TASK_TRIES + u->tries)
            break;
    }
    if (err != REMORA_OK)
        return err;
    tk->nframes = 0;
    if ((err = tk_read_chains(u, tk, cnt)) != REMORA_OK)
        return err;
    tk->nlinks = 0;
    if (tk->a.kind == PY_ASYNC_LISTS && (err = tk_read_awaiters(u, tk, cnt)) != REMORA_OK)
        return err;
    if ((err = tk_registry_awaiters(u, tk, cnt)) != REMORA_OK ||
        (err = tk_links_fill(tk, cnt)) != REMORA_OK)
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
                size_t m = tk_running_frames(&th[ti], outer);
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
    if ((err = tk_frame_keys(tk, cnt)) != REMORA_OK)
        return err;
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
    if (tk == NULL || (tk->ntasks == 0 && tk->late.id == 0))
        return REMORA_EFAULT;
    while (k < UNW_MAX_CHAIN) {
        ssize_t at = find_task(tk, tk->ntasks, id);
        const unw_task_t *t;
        int cycle = 0;
        /* the task a tick's drain found running, made since the reading (tasks_running.c):
         * first, as a listed task that ended may have had its address */
        if (k == 0 && id != 0 && id == tk->late.id)
            t = &tk->late;
        else if (at >= 0)
            t = &tk->tasks[at];
        else
            break;
        for (i = 0; i < k; i++)
            cycle |= rev[i] == t;
        if (cycle)
            break;
        rev[k++] = t;
        if (t->nawaited_by == 0)
            break;
        id = t->awaited_by[0];
    }
    if (k == 0)
        return REMORA_EFAULT;
    for (i = 0; i < k; i++)
        tk->chain[i] = rev[k - 1 - i];
    *chain = tk->chain;
    *n = k;
    return REMORA_OK;
}
