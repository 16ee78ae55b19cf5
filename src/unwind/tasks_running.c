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
 * The kernel engine (tasks_from_frames): a tick's running task from the frames it read,
 * looked up among the last reading's tasks; one made since, from the thread's running
 * task read at the tick's drain when its coroutine's frame is the tick's (late_task(),
 * kept in a ring until the next reading).
 * Memory read: thread states, the _current_tasks dict, task and coroutine objects, frame
 * objects (3.9/3.10), code objects (through the code cache), a late task's name object
 * and the fut_waiter of the listed tasks of its loop.
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

/* Before 3.14: the _current_tasks dict's entries {loop: task} into tk->curbuf (its header,
 * then its keys object's entries, TK_CUR_READ bytes at most: two reads). 0 with *dk and
 * *nent (0: none read: more loops than that, or a dict that is not one), or an error; a
 * dict gone or replaced is forgotten (tk->cur_dict 0: found again by the next reading). */
static int cur_entries(unwinder_t *u, struct unw_tasks_state *tk, pyo_keys_t *dk, size_t *nent)
{
    const py_layout_t *L = &u->target->layout;
    unsigned char h[48];
    uint64_t keys, esz = 24;
    int err;

    *nent = 0;
    if ((err = proc_read(u->p, tk->cur_dict, h, sizeof h)) != REMORA_OK)
        goto gone;
    if (get_u64(h, L->ob_type) != u->target->dict_type || get_u64(h, L->dict_values) != 0)
        goto gone;
    keys = get_u64(h, L->dict_keys);
    if (keys == 0 || keys % 8 != 0 || (err = proc_read(u->p, keys, tk->curbuf, 64)) != REMORA_OK)
        goto gone;
    if (pyo_keys(L, tk->curbuf, 64, dk) != REMORA_OK || dk->size > 64 || dk->esz != esz)
        return REMORA_OK;
    if (dk->nent < 0 || dk->entries + (uint64_t)dk->nent * esz > TK_CUR_READ)
        return REMORA_OK;               /* more loops than a sample reads: none named */
    if ((err = proc_read(u->p, keys + dk->entries, tk->curbuf, (size_t)dk->nent * esz)) != REMORA_OK)
        goto gone;
    *nent = (size_t)dk->nent;
    return REMORA_OK;
gone:
    tk->cur_dict = 0;
    return err == REMORA_ENOPROC ? err : REMORA_OK;
}

/* Before 3.14, per sample: the _current_tasks dict {loop: task} (cur_entries(): two
 * reads), each loop's thread (cached), and for each running C task its coroutine's code
 * (a vectored read of the tasks' coroutines, one of their frames' code; 3.9/3.10 one more
 * for the frame objects). A pure-Python task's code is looked up the slow way once per
 * task (TK_PY_CODES cached). */
static int registry_sample(unwinder_t *u, struct unw_tasks_state *tk, unw_thread_t *th, size_t n,
                           int py_only)
{
    int64_t now = remora_now_ns();
    pyo_keys_t dk;
    size_t i, j, nent;
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
    if ((err = cur_entries(u, tk, &dk, &nent)) != REMORA_OK || nent == 0)
        return err;
    for (j = 0; j < nent; j++) {
        uint64_t loop = get_u64(tk->curbuf, j * dk.esz + dk.koff), task = get_u64(tk->curbuf, j * dk.esz + dk.voff);
        uint64_t ident;
        if (loop == 0 || task == 0 || task % 8 != 0)
            continue;
        ident = loop_ident(u, tk, loop, now);
        for (i = 0; i < n && ident != 0; i++)
            if (th[i].ident == ident && !tk->had[i])
                th[i].task = task;
    }
    return registry_code(u, tk, th, n);
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

/* The thread's running task now (at a tick's drain), as the per-sample reading finds it:
 * 3.14+ its thread state's asyncio_running_task (one read); before, the _current_tasks
 * entry of the loop the thread runs (cur_entries(): two reads; the loops' threads cached).
 * 0 when none, or when it cannot be read. */
static uint64_t running_now(unwinder_t *u, struct unw_tasks_state *tk, const unw_thread_t *th)
{
    uint64_t task = 0;
    pyo_keys_t dk;
    size_t j, nent = 0;

    if (tk->a.kind == PY_ASYNC_LISTS)
        return th->tstate != 0 && proc_read_u64(u->p, th->tstate + tk->a.ts_running_task, &task) == REMORA_OK ?
               task : 0;
    if (tk->cur_dict == 0 || th->ident == 0 || cur_entries(u, tk, &dk, &nent) != REMORA_OK)
        return 0;
    for (j = 0; j < nent; j++) {
        uint64_t loop = get_u64(tk->curbuf, j * dk.esz + dk.koff);
        task = get_u64(tk->curbuf, j * dk.esz + dk.voff);
        if (loop != 0 && task != 0 && loop_ident(u, tk, loop, remora_now_ns()) == th->ident)
            return task;
    }
    return 0;
}

/* The listed task that awaits task 'id' directly (3.14+: its awaited_by, when one task;
 * before, the listed C task of its loop whose fut_waiter is it now: one vectored read of
 * TK_LATE_WAITERS at most), or 0: none found (awaited through gather() or a TaskGroup,
 * or a root). */
static uint64_t late_awaiter(unwinder_t *u, struct unw_tasks_state *tk, uint64_t id, const unsigned char *h)
{
    const py_asyncio_t *a = &tk->a;
    uint64_t loop = get_u64(h, a->task_loop), *w;
    size_t i, k = 0;

    if (a->kind == PY_ASYNC_LISTS) {
        uint64_t aw = get_u64(h, a->task_awaited_by);
        return h[a->task_awaited_by_is_set] == 0 && aw != 0 && aw != id && find_task(tk, tk->ntasks, aw) >= 0 ?
               aw : 0;
    }
    if (a->task_fut_waiter == 0 || tk->ntasks == 0 || tk->cap_iov < 2 * TK_LATE_WAITERS ||
        tk->cap_buf < 16 * TK_LATE_WAITERS)
        return 0;               /* (grown once, by late_task()) */
    w = (uint64_t *)(void *)tk->buf;
    for (i = 0; i < tk->ntasks && k < 2 * TK_LATE_WAITERS; i++) {
        if (tk->raw[i].loop != loop || tk->raw[i].id == id)
            continue;
        tk->iov[k] = (proc_iov_t){ tk->raw[i].id + u->target->layout.ob_type, &w[k], 8 };
        tk->iov[k + 1] = (proc_iov_t){ tk->raw[i].id + a->task_fut_waiter, &w[k + 1], 8 };
        k += 2;
    }
    if (k == 0 || pyo_readv_zero(u->p, tk->iov, k) != REMORA_OK)
        return 0;
    for (i = 0; i < k; i += 2)
        if (w[i + 1] == id && task_kind(tk, w[i]) == TK_C)
            return (uint64_t)tk->iov[i].addr - u->target->layout.ob_type;
    return 0;
}

/* The task of kept entry e names th's tick, whose j-th frame is e's coroutine frame. */
static void name_late(struct unw_tasks_state *tk, unw_thread_t *th, const tk_late_t *e, size_t j)
{
    memset(&tk->late, 0, sizeof tk->late);
    tk->late.id = e->task;
    tk->late.name = e->name;
    tk->late.thread = th->native_id;
    tk->late.running = 1;
    tk->late_aw = e->aw;
    tk->late.awaited_by = &tk->late_aw;
    tk->late.nawaited_by = e->aw != 0;
    th->task = e->task;
    th->task_frames = j + 1;
}

/* The ring's entry for a task whose coroutine's frame is at 'frame': the one kept with that
 * frame (a task another now has its coroutine's frame: the newest reading wins), else the
 * next one. */
static tk_late_t *kept_slot(struct unw_tasks_state *tk, uint64_t frame)
{
    tk_late_t *e;
    size_t k;

    for (k = 0; k < tk->nkept; k++)
        if (tk->kept[k].frame == frame)
            return &tk->kept[k];
    e = &tk->kept[tk->next_kept];
    tk->next_kept = (tk->next_kept + 1) % TK_LATE_KEEP;
    if (tk->nkept < TK_LATE_KEEP)
        tk->nkept++;
    return e;
}

/* The kept task whose coroutine frame th's j-th frame is, running the code it ran then:
 * th named by it, 1; else 0. No read. */
static int kept_task(struct unw_tasks_state *tk, unw_thread_t *th, size_t j)
{
    size_t k;

    for (k = 0; k < tk->nkept; k++)
        if (tk->kept[k].frame == th->frames[j].addr && tk->kept[k].code == (th->frames[j].code & ~(uint64_t)7)) {
            name_late(tk, th, &tk->kept[k], j);
            return 1;
        }
    return 0;
}

/* late_task()'s reads were made while the target ran: a task that ended among them and a
 * new one made at the same addresses (its coroutine, its name's str) would pair one
 * task's name with another's code, and the pair would name later ticks from the ring. So
 * all is read again after the name, and must be the same: the task's coroutine and name,
 * the frame's code, the name's bytes past its reference count. 1 when it is. */
static int late_same(unwinder_t *u, const struct unw_tasks_state *tk, uint64_t task, const unsigned char *h,
                     uint64_t frame, uint64_t code, const unsigned char *nh)
{
    const py_asyncio_t *a = &tk->a;
    unsigned char h2[TK_LATE_READ], nh2[TK_NAME_HEAD];
    uint64_t code2 = 0, at = get_u64(h, a->task_name);

    return proc_read(u->p, task, h2, a->task_size) == REMORA_OK &&
           get_u64(h2, a->task_coro) == get_u64(h, a->task_coro) && get_u64(h2, a->task_name) == at &&
           proc_read_u64(u->p, frame + u->target->layout.fr_code, &code2) == REMORA_OK &&
           (code2 & ~(uint64_t)7) == code && proc_read(u->p, at, nh2, sizeof nh2) == REMORA_OK &&
           memcmp(nh + 8, nh2 + 8, sizeof nh2 - 8) == 0;
}

/* A tick whose frames hold no listed task's coroutine frame, at its drain: the thread's
 * running task read now is the tick's when its coroutine's frame is one the tick read,
 * with the same code object (so it is that task, unless the tick's task ended since and a
 * task of the same coroutine function was made at its addresses: the cost of any naming
 * by address, the list's too). Its name and the listed task awaiting it (late_awaiter())
 * are read now and kept (tk->kept, a ring, until the next reading) whether it is the
 * tick's or not: a later tick of it is named from there (kept_task()), as from the list,
 * when the thread runs another task at that tick's drain. 3-6 reads; no allocation
 * once tk->iov and tk->buf have grown (once). 1 when the tick's task is named, else 0. */
static int late_task(unwinder_t *u, struct unw_tasks_state *tk, unw_thread_t *th)
{
    const py_layout_t *L;
    const py_asyncio_t *a = &tk->a;
    unsigned char h[TK_LATE_READ], nh[TK_NAME_HEAD];
    uint64_t task, coro, frame, code = 0, at;
    tk_late_t *e = NULL;
    const char *name;
    size_t j, k;

    if (!a->found || a->task_size == 0 || a->task_size > sizeof h || th->error ||
        (a->kind != PY_ASYNC_LISTS && (need_iov(tk, 2 * TK_LATE_WAITERS) || need_buf(tk, 16 * TK_LATE_WAITERS))))
        return 0;
    L = &u->target->layout;
    task = running_now(u, tk, th);
    if (task == 0 || task % 8 != 0 || proc_read(u->p, task, h, a->task_size) != REMORA_OK)
        return 0;
    if (a->kind == PY_ASYNC_LISTS ? h[a->task_is_task] != 1 : task_kind(tk, get_u64(h, L->ob_type)) != TK_C)
        return 0;               /* a pure-Python task: named by the next reading */
    coro = get_u64(h, a->task_coro);
    if (coro == 0 || coro % 8 != 0)
        return 0;
    if (a->gen_frame_ptr != 0) {    /* 3.9/3.10: its frame object */
        if (proc_read_u64(u->p, coro + a->gen_frame_ptr, &frame) != REMORA_OK || frame == 0 || frame % 8 != 0)
            return 0;
    } else {
        frame = coro + a->gen_iframe;
    }
    if (proc_read_u64(u->p, frame + L->fr_code, &code) != REMORA_OK || (code &= ~(uint64_t)7) == 0)
        return 0;
    /* kept already (the same task, coroutine and code): its name and awaiter as read then */
    for (k = 0; k < tk->nkept && e == NULL; k++)
        if (tk->kept[k].frame == frame && tk->kept[k].task == task && tk->kept[k].code == code)
            e = &tk->kept[k];
    if (e == NULL) {
        at = get_u64(h, a->task_name);
        if (at == 0 || at % 8 != 0 || proc_read(u->p, at, nh, sizeof nh) != REMORA_OK ||
            (name = tk_name_of(u, at, nh)) == NULL || !late_same(u, tk, task, h, frame, code, nh))
            return 0;
        e = kept_slot(tk, frame);
        e->frame = frame;
        e->code = code;
        e->task = task;
        e->name = name;
        e->aw = late_awaiter(u, tk, task, h);
        e->aw_tries = 0;
    }
    for (j = 0; j < th->nframes; j++)
        if (!th->frames[j].native && th->frames[j].addr == frame)
            break;
    if (j == th->nframes || (th->frames[j].code & ~(uint64_t)7) != code)
        return 0;
    name_late(tk, th, e, j);
    return 1;
}

/* A tick whose frames hold no listed task's coroutine frame, named by the running task the
 * tick itself read (kern_task_t: the task, its coroutine's frame and its name's image,
 * all read at the tick, so a task that ran and ended before the drain is named too):
 * taken when that frame is one of the tick's (a task of another loop, newer in
 * _current_tasks, is not): th's j-th frame (tick_frame()). The listed task awaiting it: 3.14+ its awaited_by as the tick
 * read it; before, found now (late_awaiter()) while the task still has its coroutine,
 * else none (a root: no awaiter is written that was not seen). Kept as late_task() keeps
 * its tasks. 1 when named. */
static size_t tick_frame(const unw_thread_t *th, const kern_task_t *t)
{
    size_t j;

    for (j = 0; t != NULL && t->frame != 0 && j < th->nframes; j++)
        if (!th->frames[j].native && th->frames[j].addr == t->frame)
            return j;
    return SIZE_MAX;
}

static int tick_task(unwinder_t *u, struct unw_tasks_state *tk, unw_thread_t *th, const kern_task_t *t,
                     size_t j)
{
    const py_asyncio_t *a = &tk->a;
    unsigned char h[TK_LATE_READ];
    uint64_t code;
    tk_late_t *e = NULL;
    const char *name;
    size_t k;

    if (t == NULL || j >= th->nframes || t->name_len > KERN_NAME_IMG ||
        (code = th->frames[j].code & ~(uint64_t)7) == 0)
        return 0;
    for (k = 0; k < tk->nkept && e == NULL; k++)
        if (tk->kept[k].frame == t->frame && tk->kept[k].task == t->task && tk->kept[k].code == code)
            e = &tk->kept[k];
    if (e == NULL) {
        if ((name = tk_name_image(u, t->name, t->name_len)) == NULL)
            return 0;
        e = kept_slot(tk, t->frame);
        e->frame = t->frame;
        e->code = code;
        e->task = t->task;
        e->name = name;
        e->aw = 0;
        e->aw_tries = 0;
        /* 3.14+: its awaiter as the tick read it (one task, a listed one) */
        if (a->kind == PY_ASYNC_LISTS && t->aw_is_set == 0 && t->aw != 0 && t->aw != t->task &&
            find_task(tk, tk->ntasks, t->aw) >= 0)
            e->aw = t->aw;
    }
    /* before: looked for at the drains of its first TK_AW_TRIES ticks (a task that has
     * ended by then has no awaiter waiting on it any more: a root) */
    if (e->aw == 0 && a->kind != PY_ASYNC_LISTS && e->aw_tries < TK_AW_TRIES) {
        e->aw_tries++;
        if (a->task_size != 0 && a->task_size <= sizeof h &&
            !need_iov(tk, 2 * TK_LATE_WAITERS) && !need_buf(tk, 16 * TK_LATE_WAITERS) &&
            proc_read(u->p, t->task, h, a->task_size) == REMORA_OK && get_u64(h, a->task_coro) == t->coro)
            e->aw = late_awaiter(u, tk, t->task, h);
    }
    name_late(tk, th, e, j);
    return 1;
}

void tk_kern_layout(const unwinder_t *u, kern_layout_t *kl)
{
    const struct unw_tasks_state *tk = u->tasks;
    const py_layout_t *L = &u->target->layout;
    const py_asyncio_t *a;

    kl->rt_kind = KERN_RT_NONE;
    kl->rt_ts = 0;
    kl->rt_dict = 0;
    kl->rt_ma_keys = kl->rt_dk_sized = kl->rt_dk_nentries = kl->rt_dk_hdr = 0;
    kl->rt_task_coro = kl->rt_task_name = kl->rt_gen_frame = kl->rt_gen_iframe = 0;
    kl->rt_task_aw = kl->rt_task_aw_is_set = 0;
    if (tk == NULL || !(a = &tk->a)->found || a->task_coro == 0 || a->task_name == 0 ||
        (a->gen_frame_ptr == 0 && a->gen_iframe == 0))
        return;
    kl->rt_task_coro = (uint32_t)a->task_coro;
    kl->rt_task_name = (uint32_t)a->task_name;
    kl->rt_gen_frame = (uint32_t)a->gen_frame_ptr;
    kl->rt_gen_iframe = a->gen_frame_ptr == 0 ? (uint32_t)a->gen_iframe : 0;
    if (a->kind == PY_ASYNC_LISTS) {
        if (a->ts_running_task != 0) {
            kl->rt_kind = KERN_RT_TSTATE;
            kl->rt_ts = (uint32_t)a->ts_running_task;
            kl->rt_task_aw = (uint32_t)a->task_awaited_by;
            kl->rt_task_aw_is_set = (uint32_t)a->task_awaited_by_is_set;
        }
    } else if (tk->rt_dict != 0 && (L->dk_layout == PY_DK_SIZED || L->dk_layout == PY_DK_LOG2) &&
               (L->dk_nentries == 24 || L->dk_nentries == 32) && L->dk_indices <= 40) {
        kl->rt_kind = KERN_RT_DICT;
        kl->rt_dict = tk->rt_dict;
        kl->rt_ma_keys = (uint32_t)L->dict_keys;
        kl->rt_dk_sized = L->dk_layout == PY_DK_SIZED;
        kl->rt_dk_nentries = (uint32_t)L->dk_nentries;
        kl->rt_dk_hdr = (uint32_t)L->dk_indices;
    }
}

/* The kernel engine: the running task is the one whose coroutine's frame the frames read
 * at one instant hold (a coroutine's frame is in it, or its frame object, for as long as
 * it lives: no second read of a stack that moves), running the code the reading saw it
 * run (else its address is another's since). The innermost such frame: a task steps no
 * other task's coroutine. The tasks are the last reading's (unw_tasks()): a task made
 * since is in no key: the thread's running task read at the tick's drain is taken when its
 * coroutine's frame is the tick's (tick_task(): the task the tick read; else late_task():
 * the one running at the drain), else unlisted_task() writes <task>;
 * either way the reading is stale (unw_tasks_stale() says so); so too when the round's
 * reading said the thread ran a task (round_task) the reading does not hold. No system
 * call while the reading holds the task. */
/* The listed task whose coroutine's frame is th's j-th frame, running the code the reading
 * saw it run (else a task ended and its coroutine's address is another's since, or the
 * reading did not see its code: not provably it), or NULL. */
static const unw_task_t *listed_at(const struct unw_tasks_state *tk, const unw_thread_t *th, size_t j)
{
    tk_key_t key, *k;
    const unw_task_t *t;
    uint64_t code;

    key.id = th->frames[j].addr;
    k = bsearch(&key, tk->fkeys, tk->nfkeys, sizeof *tk->fkeys, cmp_key);
    if (k == NULL || k->idx >= tk->ntasks)
        return NULL;
    t = &tk->tasks[k->idx];
    code = t->nframes > 0 ? t->frames[t->nframes - 1].code & ~(uint64_t)7 : 0;
    return code != 0 && (th->frames[j].code & ~(uint64_t)7) == code ? t : NULL;
}

void tasks_from_frames(unwinder_t *u, unw_thread_t *th, uint64_t round_task, const kern_task_t *tick)
{
    struct unw_tasks_state *tk = u->tasks;
    const unw_task_t *t;
    size_t j, jt;
    int keyed;

    th->task = 0;
    th->task_frames = 0;
    if (tk == NULL)
        return;
    tk->late.id = 0;
    keyed = tk->nfkeys != 0 && tk->nfkeys <= tk->ntasks;
    /* the task the tick itself read, when its coroutine's frame is the tick's: the listed
     * one if the reading holds that very task there, else from what the tick read (not
     * a reading torn by tasks ending and made at the same addresses as it was read, nor
     * a task kept from a drain's reads) */
    if ((jt = tick_frame(th, tick)) != SIZE_MAX) {
        if (keyed && (t = listed_at(tk, th, jt)) != NULL && t->id == tick->task) {
            th->task = t->id;
            th->task_frames = jt + 1;
            return;
        }
        if (tick_task(u, tk, th, tick, jt)) {
            tk->stale = 1;
            return;
        }
    }
    if (!keyed && tk->nkept == 0)
        goto unlisted;
    for (j = 0; j < th->nframes; j++) {
        if (th->frames[j].native || th->frames[j].addr == 0)
            continue;
        if (keyed && (t = listed_at(tk, th, j)) != NULL) {
            th->task = t->id;
            th->task_frames = j + 1;
            return;
        }
        if (kept_task(tk, th, j)) {
            tk->stale = 1;
            return;
        }
    }
unlisted:
    if (late_task(u, tk, th) || unlisted_task(tk, th)) {
        tk->stale = 1;
        return;
    }
    if (round_task != 0 && (!keyed || find_task(tk, tk->ntasks, round_task) < 0))
        tk->stale = 1;
}

int unw_tasks_stale(unwinder_t *u)
{
    int stale = u->tasks != NULL && u->tasks->stale;

    if (u->tasks != NULL)
        u->tasks->stale = 0;
    return stale;
}
