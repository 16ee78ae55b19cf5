/* unwind/tasks_registry.c — asyncio tasks before 3.14 (and 3.14+'s pure-Python ones):
 * asyncio.tasks' registries.
 *
 * py_asyncio_t kind PY_ASYNC_REGISTRY: the tasks are those of asyncio.tasks' registries
 * (the WeakSet _all_tasks, or _scheduled_tasks and the set _eager_tasks: each weak
 * reference's object), kept when their type is the module's _CTask or _PyTask (the
 * pure-Python task, whose fields are its instance attributes) or a subclass of either
 * (its tp_base chain, remembered per type); the running ones are the values of its
 * _current_tasks dict {loop: task}, a loop's thread the one whose pthread id is the
 * loop's _thread_id. A registry that changed while its tasks were read is read again.
 * Memory read: modules, dicts, sets, weak references, task objects and their attributes,
 * type objects (tp_base), loops' _thread_id.
 */
#include <stdlib.h>
#include <string.h>

#include "remora.h"
#include "internal.h"
#include "tasks.h"

#define TK_TYPE_DEPTH 16            /* tp_base links followed from a type */

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

/* The objects of asyncio.tasks' registries (md: its dict): the WeakSets _all_tasks and
 * _scheduled_tasks, the set _eager_tasks (each set's header noted: set_moved()); sorted,
 * once each, into tk->addrs[0..*nout). 0 or an error (REMORA_ENOMEM past UNW_MAX_TASKS). */
static int registry_addrs(unwinder_t *u, struct unw_tasks_state *tk, uint64_t md, size_t *nout)
{
    uint64_t reg = 0;
    size_t i, j, n = 0;
    int err = REMORA_OK;

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
    *nout = n;
    return REMORA_OK;
}

/* The objects at tk->addrs[0..n) that are pending tasks (of the class ctype or pytype, or a
 * subclass) into tk->raw[first..*nout): a C task's fields from its object, a pure-Python
 * one's from its attributes. 0 or an error. */
static int registry_tasks(unwinder_t *u, struct unw_tasks_state *tk, size_t n, uint64_t ctype,
                          uint64_t pytype, size_t first, size_t *nout)
{
    const py_asyncio_t *a = &tk->a;
    unsigned char *heads = NULL;
    size_t i, k = first;
    int err;

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
    *nout = k;
out:
    free(heads);
    return err;
}

/* Which thread runs each loop that a task of tk->raw[first..k) or _current_tasks names (its
 * _thread_id): each thread's running loop and task into tk->tsv (py_only: only for the
 * threads whose running task the lists did not name). 0 or an error. */
static int registry_running(unwinder_t *u, struct unw_tasks_state *tk, uint64_t md, unw_thread_t *th,
                            size_t nth, size_t first, size_t k, int py_only)
{
    uint64_t cur = 0, *keys = NULL, *vals = NULL;
    size_t i, j, ncur = 0;
    int err = REMORA_OK;

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
out:
    free(keys);
    free(vals);
    return err;
}

/* Before 3.14: the tasks of asyncio.tasks' registries into tk->raw[first..*nout); each
 * thread's running loop and task into tk->tsv as tk_lists_once() fills it. py_only (3.14+,
 * after tk_lists_once()): only pure-Python tasks (the C ones are on the lists), and only a
 * thread's running task where the lists named none. */
int tk_registry_once(unwinder_t *u, struct unw_tasks_state *tk, unw_thread_t *th, size_t nth,
                     size_t first, int py_only, size_t *nout)
{
    uint64_t interp = 0, md, ctype = 0, pytype = 0;
    size_t i, n = 0, k = first;
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
    /* where the kernel engine's ticks read the running task, even when the registries
     * move while they are read (tasks made and ended faster than a reading: most readings
     * are then made again) */
    if (!py_only) {
        uint64_t cur = 0;
        if (pyo_dict_get(u, md, "_current_tasks", &cur) == REMORA_OK && cur != 0)
            tk->rt_dict = cur;
    }
    if (ctype == 0 && pytype == 0)
        return py_only ? REMORA_OK : tk_moved(tk, "asyncio.tasks names neither _CTask nor _PyTask");
    if ((err = registry_addrs(u, tk, md, &n)) != REMORA_OK ||
        (err = registry_tasks(u, tk, n, ctype, pytype, first, &k)) != REMORA_OK)
        return err;
    /* a registry that changed while its tasks were read: read again */
    if (set_moved(u, tk))
        return tk_moved(tk, "a task registry changed while its tasks were read");
    /* the running tasks: _current_tasks {loop: task}; each loop's thread: its _thread_id */
    if (!py_only) {
        tk->cur_ctype = ctype;
        tk->cur_pytype = pytype;
    } else {
        tk->cur_pytype = pytype;
    }
    if ((err = registry_running(u, tk, md, th, nth, first, k, py_only)) != REMORA_OK)
        return err;
    *nout = k;
    if (py_only)
        tk->py_seen = k > first;
    return REMORA_OK;
}
