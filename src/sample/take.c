/* sample/take.c — each thread's sample into the stack table: filtered by the mode, its
 * table thread (by native id and interpreter, under its Python or kernel name), its
 * frames mapped to table frames through a pointer-keyed cache and to a trie node that
 * reuses the prefix of the thread's last stack, marked partial or <GC>, handed to the
 * sink. A warm round allocates nothing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "remora.h"
#include "sampler_int.h"

static size_t fmap_slot(const fmap_entry_t *m, size_t cap, const char *fn, const char *file, int line)
{
    uint64_t h = ((uint64_t)(uintptr_t)fn * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)(uintptr_t)file * 0xc2b2ae3d27d4eb4full) ^
                 (uint64_t)(unsigned)line * 0x165667b19e3779f9ull;
    size_t i = (size_t)(h >> 17) & (cap - 1);

    while (m[i].frame != STK_NONE &&
           (m[i].function != fn || m[i].file != file || m[i].line != line))
        i = (i + 1) & (cap - 1);
    return i;
}

static int fmap_grow(sampler_t *s)
{
    size_t ncap = s->fmap_cap * 2, i;
    fmap_entry_t *nm = malloc(ncap * sizeof *nm);

    if (nm == NULL)
        return -1;
    for (i = 0; i < ncap; i++)
        nm[i].frame = STK_NONE;
    for (i = 0; i < s->fmap_cap; i++) {
        const fmap_entry_t *e = &s->fmap[i];
        if (e->frame != STK_NONE)
            nm[fmap_slot(nm, ncap, e->function, e->file, e->line)] = *e;
    }
    free(s->fmap);
    s->fmap = nm;
    s->fmap_cap = ncap;
    return 0;
}

static uint32_t map_frame(sampler_t *s, const unw_frame_t *f)
{
    size_t i;
    uint32_t id;

    if (f->op != NULL)              /* --opcodes: not in the map, which keys no instruction */
        return stk_frame_op(s->t, f->function, f->file, f->line, f->op, f->offset);
    i = fmap_slot(s->fmap, s->fmap_cap, f->function, f->file, f->line);
    if (s->fmap[i].frame != STK_NONE)
        return s->fmap[i].frame;
    id = stk_frame_kind(s->t, f->function, f->file, f->line, f->native);
    if (id == STK_NONE)
        return STK_NONE;
    s->fmap[i].function = f->function;
    s->fmap[i].file = f->file;
    s->fmap[i].line = f->line;
    s->fmap[i].frame = id;
    if (++s->fmap_count * 2 > s->fmap_cap && fmap_grow(s))
        return STK_NONE;
    return id;
}

/* What follows a thread's name in the table: " [interpreter N]" for its state in a
 * subinterpreter (the main interpreter's, id 0, carry no mark), " [pid N]" for a
 * descendant's thread (--subprocesses). */
static void name_marks(char *name, size_t cap, int64_t interp, pid_t pid)
{
    size_t len = strlen(name);

    if (interp != 0 && len < cap)
        len += (size_t)snprintf(name + len, cap - len, " [interpreter %lld]", (long long)interp);
    if (pid != 0 && len < cap)
        snprintf(name + len, cap - len, " [pid %d]", (int)pid);
}

/* The table thread a thread's sample goes to, keyed by its native id and interpreter (a
 * thread that entered a subinterpreter has a stack in each), under its thread name
 * (threading.Thread's, as the unwinder last read it) or, while it has none, the kernel's
 * (from /proc), marked by name_marks(). A thread first seen under its comm takes
 * its thread name when one is known (its comm stood for it); one renamed while
 * recorded goes on as another table thread of the same tid, so each name keeps the
 * samples taken under it; one whose thread name is not read any more keeps the last.
 * Returns the index in s->tids, or (size_t)-1 when out of memory. */
static size_t map_thread(sampler_t *s, proc_t *p, const unw_thread_t *ut)
{
    pid_t tid = ut->native_id, pid = p != s->p ? proc_pid(p) : 0;
    int64_t interp = ut->interp_id;
    const char *py = ut->thread_name;
    size_t i;
    char name[1100] = "";
    uint32_t th;

    if (py != NULL && (pid != 0 || interp != 0)) {
        snprintf(name, sizeof name, "%.1024s", py);
        name_marks(name, sizeof name, interp, pid);
        py = name;
    }
    for (i = 0; i < s->ntids; i++)
        if (s->tids[i] == tid && s->interps[i] == interp)
            break;
    if (i < s->ntids) {
        if (py == NULL || (s->tname[i] != NULL && strcmp(s->tname[i], py) == 0))
            return i;
        if (s->tname[i] == NULL) {
            if (stk_thread_rename(s->t, s->tthreads[i], py))
                return (size_t)-1;
        } else {
            th = stk_thread(s->t, tid, py);
            if (th == STK_NONE)
                return (size_t)-1;
            s->tthreads[i] = th;
            s->last[i].n = 0;       /* its nodes are the other thread's */
        }
        s->tname[i] = stk_thread_at(s->t, s->tthreads[i])->name;
        return i;
    }
    if (s->ntids == s->cap_tids) {
        size_t ncap = s->cap_tids ? s->cap_tids * 2 : 16;
        pid_t *nt = realloc(s->tids, ncap * sizeof *nt);
        uint32_t *nn;
        const char **np;
        struct last_stack *nl;
        int64_t *ni;
        if (nt == NULL)
            return (size_t)-1;
        s->tids = nt;
        nn = realloc(s->tthreads, ncap * sizeof *nn);
        if (nn == NULL)
            return (size_t)-1;
        s->tthreads = nn;
        np = realloc(s->tname, ncap * sizeof *np);
        if (np == NULL)
            return (size_t)-1;
        s->tname = np;
        nl = realloc(s->last, ncap * sizeof *nl);
        if (nl == NULL)
            return (size_t)-1;
        s->last = nl;
        ni = realloc(s->interps, ncap * sizeof *ni);
        if (ni == NULL)
            return (size_t)-1;
        s->interps = ni;
        s->cap_tids = ncap;
    }
    if (py == NULL) {
        if (tid > 0)
            proc_task_comm(p, tid, name, sizeof name);
        name_marks(name, sizeof name, interp, pid);
    }
    th = stk_thread(s->t, tid, py != NULL ? py : name);
    if (th == STK_NONE)
        return (size_t)-1;
    s->tids[s->ntids] = tid;
    s->interps[s->ntids] = interp;
    s->tthreads[s->ntids] = th;
    s->tname[s->ntids] = py != NULL ? stk_thread_at(s->t, th)->name : NULL;
    memset(&s->last[s->ntids], 0, sizeof s->last[s->ntids]);
    return s->ntids++;
}

/* The trie node of a thread's stack (frames innermost first), reusing the nodes of the
 * prefix it shares with the thread's previous stack. STK_NONE when out of memory. */
static uint32_t stack_node(sampler_t *s, size_t ti, const unw_thread_t *th)
{
    struct last_stack *ls = &s->last[ti];
    size_t n = th->nframes, same = 0, k;
    uint32_t node;

    if (n > ls->cap) {
        size_t ncap = n < 64 ? 64 : n * 2;
        unw_frame_t *nf = realloc(ls->frames, ncap * sizeof *nf);
        uint32_t *nn;
        if (nf == NULL)
            return STK_NONE;
        ls->frames = nf;
        nn = realloc(ls->nodes, ncap * sizeof *nn);
        if (nn == NULL)
            return STK_NONE;
        ls->nodes = nn;
        ls->cap = ncap;
    }
    /* frames are interned by the unwinder: pointers and lines compare */
    while (same < n && same < ls->n) {
        const unw_frame_t *a = &th->frames[n - 1 - same], *b = &ls->frames[same];
        if (a->function != b->function || a->file != b->file || a->line != b->line)
            break;
        same++;
    }
    node = same ? ls->nodes[same - 1] : stk_thread_at(s->t, s->tthreads[ti])->root;
    for (k = same; k < n; k++) {
        uint32_t fr = map_frame(s, &th->frames[n - 1 - k]);
        if (fr == STK_NONE || (node = stk_child(s->t, node, fr)) == STK_NONE)
            return STK_NONE;
        ls->frames[k] = th->frames[n - 1 - k];
        ls->nodes[k] = node;
    }
    ls->n = n;
    return node;
}

/* --async-mode all: every waiting task of the list read this round, once, under the
 * thread that runs its loop (a task of a loop no thread runs: under a thread of its own,
 * native id 0). Returns 0 or a fatal code. */
int take_waiting_tasks(sampler_t *s, unwinder_t *u, proc_t *p, const unw_thread_t *threads,
                       size_t n, int64_t now_ns)
{
    size_t i, k, nt = async_ntasks(s->async);

    for (i = 0; i < nt; i++) {
        unw_thread_t ts;
        const unw_thread_t *owner = NULL;
        const unw_frame_t *af;
        pid_t tid;
        size_t ti;
        uint32_t node;
        int err = async_task_stack(s->async, u, i, &tid, &af, &ts.nframes);
        if (err)
            return err;
        if (ts.nframes == 0)
            continue;               /* running: its thread's sample has it */
        /* the list may be some rounds old: a task running now is its thread's sample */
        for (k = 0; k < n && threads[k].task != async_task_id(s->async, i); k++)
            ;
        if (k < n)
            continue;
        for (k = 0; tid != 0 && k < n && owner == NULL; k++)
            if (threads[k].native_id == tid)
                owner = &threads[k];
        if (owner == NULL) {
            static const unw_thread_t none = { .thread_name = "asyncio (no running loop)" };
            owner = &none;
        }
        ti = map_thread(s, p, owner);
        if (ti == (size_t)-1)
            return REMORA_ENOMEM;
        ts.frames = (unw_frame_t *)af;
        node = stack_node(s, ti, &ts);
        if (node == STK_NONE)
            return REMORA_ENOMEM;
        stk_add_at(s->t, s->tthreads[ti], node, 1);
        s->st.task_waiting++;
        if (s->sink.sample != NULL &&
            (err = s->sink.sample(s->sink.ctx, s->t, s->tthreads[ti], node,
                                  now_ns - s->st.start_ns, 0)))
            return err;
    }
    return REMORA_OK;
}

/* One thread's sample, filtered by mode, into the table and to the sink 'count' times
 * (the periods it stands for); t_ns since sampling began. Returns 0 or a fatal code. */
int take_thread(sampler_t *s, unwinder_t *u, proc_t *p, const unw_thread_t *th, int64_t t_ns,
                unsigned count)
{
    uint32_t tt, node;
    unsigned flags = (th->on_cpu ? SAMPLE_F_ON_CPU : 0) | (th->holds_gil ? SAMPLE_F_GIL : 0) |
                     (th->t_ns != 0 ? SAMPLE_F_TICK : 0), c;
    size_t ti;
    int err;

    if (count == 0)
        return REMORA_OK;
    /* what the threads were doing, whatever is written of them (top's header) */
    s->st.looked += count;
    if (th->holds_gil)
        s->st.on_gil += count;
    else if (th->gil_requested)
        s->st.gil_wait += count;
    if (th->holds_gil && th->gc)
        s->st.in_gc += count;
    /* a tick reads the exception state with the frames when it is wanted (kernel.c) */
    if ((s->want & UNW_WANT_EXC) && th->handling_exc >= 0) {
        s->st.exc_known += count;
        if (th->handling_exc == 1)
            s->st.exc += count;
    }
    /* idle: asleep in the kernel (not running or runnable) and not holding the GIL
     * (a thread blocked while it holds it stops every other: never idle) */
    if (!s->o.idle && !th->on_cpu && !th->holds_gil && s->o.mode != SAMPLE_MEMORY) {
        s->st.idle += count;        /* (memory: a page fault was taken: never idle) */
        return REMORA_OK;
    }
    /* cpu: on a CPU (a thread waiting for one, as the kernel engine knows, is not) */
    if (s->o.mode == SAMPLE_CPU && (!th->on_cpu || th->runnable))
        return REMORA_OK;
    if (s->o.mode == SAMPLE_GIL && !th->holds_gil)
        return REMORA_OK;
    if (s->o.mode == SAMPLE_EXCEPTION && th->handling_exc != 1) {
        if (th->handling_exc < 0)       /* its exception state could not be read */
            s->st.errors++;
        return REMORA_OK;
    }
    /* exception mode shows where the handling happens: a partial stack may have lost
     * the frame holding the except block among those that moved */
    if (s->o.mode == SAMPLE_EXCEPTION && th->partial)
        return REMORA_OK;
    if (th->error) {
        s->st.errors++;
        return REMORA_OK;
    }
    ti = map_thread(s, p, th);
    if (ti == (size_t)-1)
        return REMORA_ENOMEM;
    tt = s->tthreads[ti];
    if (th->task != 0 && u == s->u && s->async != NULL) {
        /* a task's frames under its awaiter chain, in place of the loop's */
        unw_thread_t as = *th;
        const unw_frame_t *af;
        err = async_thread_stack(s->async, u, th, &s->st, &af, &as.nframes);
        if (err)
            return err;
        as.frames = (unw_frame_t *)af;
        node = stack_node(s, ti, &as);
    } else {
        node = stack_node(s, ti, th);
    }
    if (node == STK_NONE)
        return REMORA_ENOMEM;
    if (th->partial) {
        /* the innermost frames moved while they were read: marked, never guessed */
        s->st.partial++;
        if (!th->moving_in_frames && (node = stk_child(s->t, node, s->moving_frame)) == STK_NONE)
            return REMORA_ENOMEM;
    }
    /* a partial stack moved after the GC state was read: no <GC> above its marker */
    if (s->o.gc && th->gc && th->holds_gil && !th->partial) {
        flags |= SAMPLE_F_GC;
        if ((node = stk_child(s->t, node, s->gc_frame)) == STK_NONE)
            return REMORA_ENOMEM;
    }
    stk_add_at(s->t, tt, node, count);
    s->st.samples += count;
    if (th->partial)
        s->st.partial += count - 1;
    s->cur = th;
    err = REMORA_OK;
    s->cur_count = count;
    for (c = 0; c < count && s->sink.sample != NULL; c++) {
        s->cur_index = c;
        if ((err = s->sink.sample(s->sink.ctx, s->t, tt, node, t_ns, flags)))
            break;
    }
    s->cur = NULL;
    return err;
}

/* The frame cache and the threads' last stacks hold an unwinder's string pointers:
 * forgotten when one is freed, so no new string at a freed address passes for an old. */
void take_forget(sampler_t *s)
{
    size_t i;

    for (i = 0; i < s->fmap_cap; i++)
        s->fmap[i].frame = STK_NONE;
    s->fmap_count = 0;
    for (i = 0; i < s->ntids; i++)
        s->last[i].n = 0;
}
