/* unwind/tasks_lists.c — 3.14+ asyncio tasks: the lists they are on.
 *
 * py_asyncio_t from the _asyncio module's AsyncioDebug section: every pending native task
 * is on a list (struct llist_node) headed in the state of the thread that made it, or the
 * interpreter's once that thread is gone. tk_lists_once() reads each head, then each list
 * node by node (one read of the whole task object each: its loop, state, name, coroutine,
 * awaiters and next node), checking each node's back link; a list that moved under the
 * walk is walked again (tasks.c: UNW_TASK_TRIES times, then REMORA_ECORRUPT).
 * Memory read: thread and interpreter states, task objects.
 */
#include <stdlib.h>
#include <string.h>

#include "remora.h"
#include "internal.h"
#include "tasks.h"

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

#ifdef REMORA_TESTING
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
#endif

/* One reading of every list; 0, REMORA_ECORRUPT (it moved), or an error. */
int tk_lists_once(unwinder_t *u, struct unw_tasks_state *tk, unw_thread_t *th, size_t nth,
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
