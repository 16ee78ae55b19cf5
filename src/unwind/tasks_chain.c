/* unwind/tasks_chain.c — each asyncio task's coroutine chain (its stack) and the tasks
 * awaiting it.
 *
 * A task's chain is read one level per vectored read for every task at once: the
 * coroutine object with its embedded frame (3.9/3.10: the frame object, one more read); a
 * coroutine suspended in an await names the object it awaits just below its frame's stack
 * pointer, followed while it is a coroutine or a generator. Awaiters: 3.14+, each task's
 * task_awaited_by (one task, or a set of them); before 3.14 (and for pure-Python tasks)
 * each task's fut_waiter: a task (plain `await task`), a _GatheringFuture (its _children:
 * gather), a shield()'s outer future (the task its _outer_done_callback closes over, found
 * through fut_callback0); and a chain suspended in TaskGroup.__aexit__ (the group's
 * _tasks, the frame's self). Bounded: UNW_MAX_TASK_DEPTH coroutines per chain (a
 * coroutine seen again in its own chain ends it), UNW_MAX_AWAITERS per task.
 * Memory read: coroutine and frame objects, set tables, futures, closures, code objects
 * (through the code cache).
 */
#include <stdlib.h>
#include <string.h>

#include "remora.h"
#include "internal.h"
#include "tasks.h"

#define TK_GEN_READ 160             /* bytes read of a coroutine: through the fields of its
                                     * embedded frame read (3.11: gen_iframe 80 + 80) */
#define TK_SET_MAX (1u << 16)       /* set entries scanned (awaiters) */
#define TK_FRAME_READ 128           /* bytes read of a 3.9/3.10 frame object */

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
    f->code = code;             /* (its location: unw_frame_location) */
    f->offset = frame_addrq(L, code, instr);
    f->line = code_line(e, L, f->offset);
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

/* What the coroutine at 'at' (read into g, its frame at fr) awaits: the address of the
 * stack slot naming the object, or 0 when it awaits none. */
static uint64_t chain_awaited(const py_asyncio_t *a, uint64_t at, const unsigned char *g,
                              const unsigned char *fr)
{
    uint64_t next = 0;
    int8_t state;

    switch (a->coro_frame) {
    case PY_CORO_EMBEDDED_SP: {
        uint64_t sp = get_u64(fr, a->fr_stackpointer);
        state = get_i8(g, a->gen_frame_state);
        if (state == a->gen_yield_from && sp >= a->fr_yf_back && sp % 8 == 0)
            next = sp - a->fr_yf_back;
        break;
    }
    case PY_CORO_EMBEDDED_TOP: {
        int32_t top = get_i32(fr, a->fr_stacktop_at);
        state = get_i8(g, a->gen_frame_state);
        if (state == a->gen_yield_from && top >= 1 && top < (1 << 20))
            next = at + a->gen_iframe + a->fr_localsplus + 8 * (uint64_t)(top - 1);
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
        int32_t depth = get_i32(fr, a->fr_stacktop_at);
        state = get_i8(fr, a->fr_state_at);
        if (state == a->gen_yield_from && depth >= 1 && depth < (1 << 20) && vs % 8 == 0 && vs != 0)
            next = vs + 8 * (uint64_t)(depth - 1);
        break;
    }
    }
    return next;
}

/* Is 'type' the type of an async generator's awaitable (anext()/asend(), athrow()/
 * aclose())? By its symbol; where a binary keeps that static (3.15's athrow), by being a
 * static type (not a heap type: a class of that name is not one) named
 * "async_generator_asend" or "async_generator_athrow", each type looked at once. */
static int is_agen_wrapper(unwinder_t *u, struct unw_tasks_state *tk, uint64_t type)
{
    static const char *const names[2] = { "async_generator_asend", "async_generator_athrow" };
    const py_target_t *t = u->target;
    const py_layout_t *L = &t->layout;
    uint64_t flags, name_at;
    char name[32];
    unsigned k;

    if (type == 0)
        return 0;
    if (type == t->asend_type || type == t->athrow_type ||
        type == tk->wrap_types[0] || type == tk->wrap_types[1])
        return 1;
    if (type == t->coro_type || type == t->gen_type || type == t->asyncgen_type ||
        L->tp_name == 0 || L->tp_flags == 0 || (t->asend_type != 0 && t->athrow_type != 0))
        return 0;
    for (k = 0; k < 16; k++)
        if (tk->other_types[k] == type)
            return 0;
    tk->other_types[tk->nother++ % 16] = type;
    if (proc_read_u64(u->p, type + L->tp_flags, &flags) != REMORA_OK ||
        (flags & (1u << 9)) != 0 ||            /* Py_TPFLAGS_HEAPTYPE */
        proc_read_u64(u->p, type + L->tp_name, &name_at) != REMORA_OK ||
        proc_read(u->p, name_at, name, sizeof name) != REMORA_OK)
        return 0;
    name[sizeof name - 1] = '\0';
    for (k = 0; k < 2; k++)
        if (strcmp(name, names[k]) == 0) {
            tk->wrap_types[k] = type;
            return 1;
        }
    return 0;
}

/* One level of every task's chain (the coroutines tk->raw[i].at, in two or three vectored
 * reads: the coroutines; 3.9/3.10 their frame objects; the objects they await): each
 * frame named into tk->frames, each task's 'at' moved on to what it awaits (0: its chain
 * ends; *active counts the others). */
static int chain_level(unwinder_t *u, struct unw_tasks_state *tk, size_t n, int objects,
                       size_t *active)
{
    const py_layout_t *L = &u->target->layout;
    const py_asyncio_t *a = &tk->a;
    const size_t stride = TK_GEN_READ + TK_FRAME_READ + 8;
    size_t i, k = 0;
    int err;

    if (need_buf(tk, n * stride) || need_iov(tk, n))
        return REMORA_ENOMEM;
    /* the coroutines */
    for (i = 0; i < n; i++) {
        unsigned char *g = tk->buf + i * stride;
        memset(g, 0, stride);
        if (tk->raw[i].at == 0)
            continue;
        if (tk->raw[i].at % 8 != 0) {
            tk->raw[i].at = 0;
            (*active)--;
            continue;
        }
        tk->iov[k++] = (proc_iov_t){ tk->raw[i].at, g, TK_GEN_READ };
    }
    if ((err = pyo_readv_zero(u->p, tk->iov, k)) != REMORA_OK)
        return err;
    for (i = 0; i < n; i++) {
        const py_target_t *t = u->target;
        uint64_t type = get_u64(tk->buf + i * stride, L->ob_type);
        tk->raw[i].wrapper = 0;
        if (tk->raw[i].at == 0)
            continue;
        if (type != t->coro_type && type != t->gen_type && is_agen_wrapper(u, tk, type)) {
            /* anext()/asend()/athrow()'s awaitable: its generator (the field after the
             * object's head) is what runs; no frame of its own */
            tk->raw[i].wrapper = 1;
            continue;
        }
        if (type == 0 || (type != t->coro_type && type != t->gen_type &&
                          type != t->asyncgen_type)) {
            tk->raw[i].at = 0;      /* not a coroutine: a future's iterator, the end */
            (*active)--;
        }
    }
    /* 3.9/3.10: their frame objects */
    if (objects) {
        k = 0;
        for (i = 0; i < n; i++) {
            unsigned char *g = tk->buf + i * stride;
            uint64_t f = get_u64(g, a->gen_frame_ptr);
            if (tk->raw[i].at == 0 || tk->raw[i].wrapper)
                continue;
            if (f == 0 || f % 8 != 0) {
                tk->raw[i].at = 0;
                (*active)--;
                continue;
            }
            tk->iov[k++] = (proc_iov_t){ f, g + TK_GEN_READ, TK_FRAME_READ };
        }
        if ((err = pyo_readv_zero(u->p, tk->iov, k)) != REMORA_OK)
            return err;
    }
    /* each frame named; where it awaits, the address of what it awaits */
    k = 0;
    for (i = 0; i < n; i++) {
        unsigned char *g = tk->buf + i * stride;
        const unsigned char *fr = objects ? g + TK_GEN_READ : g + a->gen_iframe;
        uint64_t code, instr, next;
        if (tk->raw[i].at == 0)
            continue;
        if (tk->raw[i].wrapper) {
            /* its generator, read at the next level (the slot after ob_type) */
            tk->iov[k++] = (proc_iov_t){ tk->raw[i].at + L->ob_type + 8,
                                         g + TK_GEN_READ + TK_FRAME_READ, 8 };
            continue;
        }
        /* the task's own coroutine (the first level): where its frame is while it runs */
        if (tk->raw[i].at == tk->raw[i].coro)
            tk->raw[i].frame = objects ? get_u64(g, a->gen_frame_ptr) : tk->raw[i].at + a->gen_iframe;
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
                return err;
            }
            err = REMORA_OK;
        }
        next = chain_awaited(a, tk->raw[i].at, g, fr);
        if (next == 0) {
            tk->raw[i].at = 0;
            (*active)--;
            continue;
        }
        tk->iov[k++] = (proc_iov_t){ next, g + TK_GEN_READ + TK_FRAME_READ, 8 };
    }
    if ((err = pyo_readv_zero(u->p, tk->iov, k)) != REMORA_OK)
        return err;
    for (i = 0; i < n; i++) {
        uint64_t next;
        if (tk->raw[i].at == 0)
            continue;
        next = get_u64(tk->buf + i * stride, TK_GEN_READ + TK_FRAME_READ) & ~(uint64_t)3;
        if (next == tk->raw[i].at || next == tk->raw[i].coro)
            next = 0;           /* a coroutine awaiting itself: a cycle, not followed */
        tk->raw[i].at = next;
        if (next == 0)
            (*active)--;
    }
    return REMORA_OK;
}

/* The frames tk->frames[0..nframes) were added level by level for all tasks (each one's
 * 'below' its task): grouped per task, innermost first (the deepest level first), each
 * raw's first_frame and nframes. 0 or REMORA_ENOMEM. */
static int chain_group(struct unw_tasks_state *tk, size_t n)
{
    size_t total = tk->nframes, base = 0, i, j;
    unw_frame_t *sorted = malloc((total + 1) * sizeof *sorted);
    size_t *count = calloc(n + 1, sizeof *count), *pos = calloc(n + 1, sizeof *pos);

    if (sorted == NULL || count == NULL || pos == NULL) {
        free(sorted);
        free(count);
        free(pos);
        return REMORA_ENOMEM;
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
    return REMORA_OK;
}

/* Each task's coroutine chain into tk->frames, grouped per task innermost first: one level
 * for every task per two or three vectored reads (the coroutines; 3.9/3.10 their frame
 * objects; the objects they await). */
int tk_read_chains(unwinder_t *u, struct unw_tasks_state *tk, size_t n)
{
    const py_layout_t *L = &u->target->layout;
    const py_asyncio_t *a = &tk->a;
    size_t i, level, active = 0;
    int objects = a->coro_frame == PY_CORO_OBJECT_STACKTOP || a->coro_frame == PY_CORO_OBJECT_DEPTH;
    int err;

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
        tk->raw[i].frame = 0;
        active += tk->raw[i].at != 0;
    }
    for (level = 0; level < UNW_MAX_TASK_DEPTH && active > 0; level++)
        if ((err = chain_level(u, tk, n, objects, &active)) != REMORA_OK)
            return err;
    return chain_group(tk, n);
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
int tk_read_awaiters(unwinder_t *u, struct unw_tasks_state *tk, size_t n)
{
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
            pyo_rd_t rd = pyo_rd_proc(u->p);
            unsigned char h[64];
            pyo_set_t s;
            uint64_t key;
            size_t added = 0;
            if ((err = proc_read(u->p, r->awaited_by, h, sizeof h)) != REMORA_OK) {
                if (err == REMORA_EFAULT)
                    continue;
                return err;
            }
            if (pyo_set_open(&u->target->layout, h, sizeof h, TK_SET_MAX, &s) != REMORA_OK ||
                s.slots > TK_SET_MAX)
                continue;
            if (need_buf(tk, s.need))
                return REMORA_ENOMEM;
            if ((err = pyo_set_load(&rd, &s, tk->buf)) != REMORA_OK) {
                if (err == REMORA_EFAULT)
                    continue;
                return err;
            }
            while (added < UNW_MAX_AWAITERS && pyo_set_next(&s, &key)) {
                if (find_task(tk, n, key) < 0)
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
int tk_links_fill(struct unw_tasks_state *tk, size_t n)
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
    size = get_i64(th, u->target->layout.ob_size);
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
int tk_registry_awaiters(unwinder_t *u, struct unw_tasks_state *tk, size_t n)
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
