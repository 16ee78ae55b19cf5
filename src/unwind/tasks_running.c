/* unwind/tasks_running.c — per sample (UNW_WANT_TASKS): each thread's running asyncio
 * task, and how many of its frames are the task's.
 *
 * 3.14+: each thread state's asyncio_running_task, its coroutine and that coroutine's
 * frame's code, in three vectored reads; pure-Python tasks (run outside the lists) as
 * before 3.14. Before 3.14: asyncio.tasks' _current_tasks dict {loop: task} (its header
 * and keys, TK_CUR_READ bytes), each loop's thread (its _thread_id, cached), each running
 * C task's coroutine's code (vectored reads), a pure-Python task's the slow way (cached).
 * A task's frames are its thread's from the innermost to the outermost one running its
 * outermost coroutine's code. Nothing allocated once the arrays have grown to the thread
 * count, but where a loop or a pure-Python task is new.
 * Memory read: thread states, the _current_tasks dict, task and coroutine objects, frame
 * objects (3.9/3.10), code objects (through the code cache).
 */
#include <stdlib.h>
#include <string.h>

#include "remora.h"
#include "internal.h"
#include "tasks.h"

#define TK_LOOP_NS 1000000000       /* a loop's thread is looked up again this often */

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

/* A running task's frames as its thread's stack has them: the thread's frames from the
 * innermost to the outermost one running the task's outermost coroutine's code. */
size_t tk_running_frames(const unw_thread_t *th, const unw_frame_t *outer)
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

/* Before 3.14, per sample, each thread's running task th[i].task found (and not one the
 * lists named: tk->had[i]): its coroutine and type (a vectored read), for a C task its
 * coroutine's frame's code (one more; 3.9/3.10 two, the frame object first), named
 * through the code cache; a pure-Python task's the slow way (TK_PY_CODES cached). Sets
 * each such thread's task_frames. 0 or an error. */
static int registry_code(unwinder_t *u, struct unw_tasks_state *tk, unw_thread_t *th, size_t n)
{
    const py_layout_t *L = &u->target->layout;
    const py_asyncio_t *a = &tk->a;
    size_t i, j, k;
    int err = REMORA_OK;

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
        th[i].task_frames = outer.function != NULL ? tk_running_frames(&th[i], &outer) : 0;
    }
    return REMORA_OK;
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
    int64_t now = remora_now_ns();
    unsigned char h[48];
    uint64_t keys, entries, esz = 24;
    pyo_keys_t dk;
    int64_t nent;
    size_t i, j;
    int err;

    if (tk->cur_dict == 0) {
        /* found by a reading of the registry (unw_tasks(), or this one: at most every
         * TK_RELOOK_NS until asyncio is imported) */
        size_t cnt = 0;
        if (now - tk->cur_looked_ns < TK_RELOOK_NS)
            return REMORA_OK;
        tk->cur_looked_ns = now;
        if ((err = tk_registry_once(u, tk, th, n, 0, py_only, &cnt)) != REMORA_OK && err != REMORA_ECORRUPT)
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
    return registry_code(u, tk, th, n);
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
        th[i].task_frames = tk_running_frames(&th[i], &outer);
    }
py:
    /* pure-Python tasks run outside the lists: asyncio.tasks' _current_tasks names them */
    for (i = 0; i < n && tk->py_seen; i++)
        if (th[i].task == 0)
            return registry_sample(u, tk, th, n, 1);
    return REMORA_OK;
}

int tk_frame_keys(struct unw_tasks_state *tk, size_t n)
{
    size_t i, k = 0;

    tk->nfkeys = 0;
    if (n > 0 && remora_grow((void **)&tk->fkeys, &tk->cap_fkeys, n, sizeof *tk->fkeys))
        return REMORA_ENOMEM;
    for (i = 0; i < n; i++)
        if (tk->raw[i].frame != 0 && tk->raw[i].frame % 8 == 0)
            tk->fkeys[k++] = (tk_key_t){ tk->raw[i].frame, i };
    if (k > 1)
        qsort(tk->fkeys, k, sizeof *tk->fkeys, cmp_key);
    tk->nfkeys = k;
    return REMORA_OK;
}

/* A stack read at one instant whose frames hold no listed task's coroutine frame: the
 * outermost coroutine or generator frame that C stepped (an entry frame: a task's step
 * calls its coroutine from C, while Python code awaits or iterates a coroutine or
 * generator in the same eval loop on 3.11+) is taken as an unlisted task's (its frames
 * and the ones inside it are the task's own, under a <task> marker): the thread's
 * frames otherwise. 1 when one is taken. */
static int unlisted_task(struct unw_tasks_state *tk, unw_thread_t *th)
{
    size_t j = th->nframes;

    while (j-- > 0)
        if (!th->frames[j].native && th->frames[j].gen && th->frames[j].entry) {
            th->task = UNW_TASK_UNLISTED;
            th->task_frames = j + 1;
            tk->stale = 1;
            return 1;
        }
    return 0;
}

/* The kernel engine: the running task is the one whose coroutine's frame the frames read
 * at one instant hold (a coroutine's frame is in it, or its frame object, for as long as
 * it lives: no second read of a stack that moves). The innermost such frame: a task steps
 * no other task's coroutine. The tasks are the last reading's (unw_tasks()): a task made
 * since is in no key: unlisted_task() (the reading is stale: unw_tasks_stale() says so);
 * so too when the round's reading said the thread ran a task (round_task) the reading
 * does not hold. No system call. */
void tasks_from_frames(unwinder_t *u, unw_thread_t *th, uint64_t round_task)
{
    struct unw_tasks_state *tk = u->tasks;
    size_t j;

    th->task = 0;
    th->task_frames = 0;
    if (tk == NULL)
        return;
    if (tk->nfkeys == 0 || tk->nfkeys > tk->ntasks) {
        if (!unlisted_task(tk, th) && round_task != 0)
            tk->stale = 1;
        return;
    }
    for (j = 0; j < th->nframes; j++) {
        tk_key_t key, *k;
        if (th->frames[j].native || th->frames[j].addr == 0)
            continue;
        key.id = th->frames[j].addr;
        k = bsearch(&key, tk->fkeys, tk->nfkeys, sizeof *tk->fkeys, cmp_key);
        if (k == NULL || k->idx >= tk->ntasks)
            continue;
        th->task = tk->tasks[k->idx].id;
        th->task_frames = j + 1;
        return;
    }
    if (!unlisted_task(tk, th) && round_task != 0 && find_task(tk, tk->ntasks, round_task) < 0)
        tk->stale = 1;
}

int unw_tasks_stale(unwinder_t *u)
{
    int stale = u->tasks != NULL && u->tasks->stale;

    if (u->tasks != NULL)
        u->tasks->stale = 0;
    return stale;
}
