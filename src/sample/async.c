/* sample/async.c — --async: a thread running an asyncio task written as the task's awaiter
 * chain instead of the event loop's machinery; with --async-mode all, every waiting task.
 *
 * The chain comes from the unwinder's last full reading of the task list (unw_tasks;
 * unw_task_chain looks a task up in it without a system call). An awaiter is suspended
 * while the task it awaits runs, so its coroutine frames hold as long as that task is the
 * one running: the list is read again (before a round's unw_sample(): unw_tasks() samples
 * the threads itself, which ends the validity of an earlier sample's array) only when a
 * thread ran a task it does not hold, or when it is older than ASYNC_PERIOD_NS (async.h).
 * The running task's own frames always come from the thread's sample. Warm, a sample
 * allocates nothing: the stack is built in a scratch array, the "task NAME" frames are
 * cached by the unwinder's interned task name.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "remora.h"
#include "async.h"

typedef struct task_name_slot {
    const char *name;           /* the unwinder's interned task name (NULL: empty slot) */
    const char *frame;          /* "task NAME", interned in the table */
} task_name_slot_t;

struct async {
    stk_table_t *t;
    const char *empty;          /* "" interned in the table: the task frames' file */
    const char *unknown;        /* ASYNC_UNKNOWN, interned */
    unw_frame_t *buf;           /* the stack being built, innermost first */
    size_t n, cap;
    task_name_slot_t task_names[ASYNC_TASK_NAMES];
    char text[UNW_MAX_NAME * 4 + sizeof ASYNC_TASK_PREFIX + 8];
    int read;                   /* a list was read at least once */
    int64_t last_ns;            /* when the last reading began */
    int64_t cost_ns;            /* what it took */
    unw_task_t *tasks;          /* the last reading's list (the unwinder's) */
    size_t ntasks;
    const unw_task_t *tasks_alone;  /* a chain of one */
    int missed;                 /* a thread ran a task the list did not hold */
    int ran;                    /* a thread ran a task since the last reading */
};

int async_new(stk_table_t *t, async_t **out)
{
    async_t *a = calloc(1, sizeof *a);

    *out = NULL;
    if (a == NULL)
        return REMORA_ENOMEM;
    a->t = t;
    a->empty = stk_intern(t, "");
    a->unknown = stk_intern(t, ASYNC_UNKNOWN);
    if (a->empty == NULL || a->unknown == NULL) {
        free(a);
        return REMORA_ENOMEM;
    }
    *out = a;
    return REMORA_OK;
}

void async_free(async_t *a)
{
    if (a == NULL)
        return;
    free(a->buf);
    free(a);
}

/* Reads the whole task list. Returns 0 (a list that moved or could not be followed:
 * counted, no list until the next reading), or a fatal code. */
static int read_list(async_t *a, unwinder_t *u, int64_t now, sampler_stats_t *st)
{
    int64_t t0 = sampler_now_ns();
    int err = unw_tasks(u, &a->tasks, &a->ntasks);

    a->cost_ns = sampler_now_ns() - t0;
    a->last_ns = now;
    a->read = 1;
    st->task_reads++;
    st->task_read_ns += (uint64_t)a->cost_ns;
    if (err == REMORA_ENOPROC || err == REMORA_EPERM || err == REMORA_ENOMEM)
        return err;
    if (err) {
        st->task_read_errors++;
        a->tasks = NULL;
        a->ntasks = 0;
    }
    return REMORA_OK;
}

/* Is a reading due, 'gap' after the last one (and at least ASYNC_COST_FACTOR times what
 * that one cost)? */
static int due(const async_t *a, int64_t now, int64_t gap)
{
    int64_t min = a->cost_ns * ASYNC_COST_FACTOR;

    return !a->read || now - a->last_ns >= (gap > min ? gap : min);
}

size_t async_ntasks(const async_t *a)
{
    return a->ntasks;
}

uint64_t async_task_id(const async_t *a, size_t i)
{
    return i < a->ntasks && a->tasks != NULL ? a->tasks[i].id : 0;
}

/* Room for k more frames (grown up to ASYNC_MAX_FRAMES): 0, or -1 when there is none
 * (the stack is cut there: its outer tasks left out) or memory ran out (*oom set). */
static int room(async_t *a, size_t k, int *oom)
{
    size_t ncap;
    unw_frame_t *nb;

    if (a->n + k <= a->cap)
        return 0;
    if (a->n + k > ASYNC_MAX_FRAMES)
        return -1;
    ncap = a->cap ? a->cap : 256;
    while (ncap < a->n + k)
        ncap *= 2;
    if (ncap > ASYNC_MAX_FRAMES)
        ncap = ASYNC_MAX_FRAMES;
    nb = realloc(a->buf, ncap * sizeof *nb);
    if (nb == NULL) {
        *oom = 1;
        return -1;
    }
    a->buf = nb;
    a->cap = ncap;
    return 0;
}

static void push_frames(async_t *a, const unw_frame_t *f, size_t n)
{
    memcpy(a->buf + a->n, f, n * sizeof *f);
    a->n += n;
}

/* "task NAME" for the unwinder's interned task name, interned in the table (cached by
 * the name's address). NULL when out of memory. */
static const char *task_frame_name(async_t *a, const char *name)
{
    uint64_t h = (uint64_t)(uintptr_t)name * 0x9e3779b97f4a7c15ull;
    task_name_slot_t *slot = &a->task_names[(h >> 40) & (ASYNC_TASK_NAMES - 1)];
    const char *fn;

    if (name == NULL)
        name = "";
    if (slot->name == name && slot->frame != NULL)
        return slot->frame;
    snprintf(a->text, sizeof a->text, "%s%s", ASYNC_TASK_PREFIX, name);
    fn = stk_intern(a->t, a->text);
    if (fn == NULL)
        return NULL;
    slot->name = name;
    slot->frame = fn;
    return fn;
}

static void push_marker(async_t *a, const char *function)
{
    unw_frame_t *f = &a->buf[a->n++];

    memset(f, 0, sizeof *f);
    f->function = function;
    f->file = a->empty;
}

/* Appends chain[from], chain[from-1] ... chain[0] (root last: innermost first), each a
 * task's coroutine frames and its "task NAME" frame; chain[from]'s coroutine frames are
 * left out when 'own' (the thread's frames were put there). Stops at ASYNC_MAX_FRAMES.
 * Returns 0 or REMORA_ENOMEM. */
static int push_chain(async_t *a, const unw_task_t *const *chain, size_t from, int own)
{
    size_t k = from + 1;
    int oom = 0;

    while (k-- > 0) {
        const unw_task_t *tk = chain[k];
        size_t nf = own && k == from ? 0 : tk->nframes;
        const char *fn;
        if (nf > UNW_MAX_TASK_DEPTH)
            nf = UNW_MAX_TASK_DEPTH;
        if (room(a, nf + 1, &oom))
            return oom ? REMORA_ENOMEM : REMORA_OK;
        if (nf && tk->frames != NULL)
            push_frames(a, tk->frames, nf);
        if ((fn = task_frame_name(a, tk->name)) == NULL)
            return REMORA_ENOMEM;
        push_marker(a, fn);
    }
    return REMORA_OK;
}

int async_before(async_t *a, unwinder_t *u, int all, int64_t now, sampler_stats_t *st)
{
    /* all: every round while a reading costs under 1/ASYNC_COST_FACTOR of the time
     * between rounds, else as often as that allows (the waiting tasks of the last list
     * counted meanwhile) */
    int due_now;

    /* the kernel engine's ticks name a thread's task from its frames: one the list does
     * not hold is read again as a missed one */
    if (unw_tasks_stale(u))
        a->missed = 1;
    due_now = !a->read || (all && due(a, now, 0)) ||
                  (a->missed && due(a, now, ASYNC_MIN_GAP_NS)) ||
                  (a->ran && due(a, now, ASYNC_PERIOD_NS));

    if (!due_now)
        return REMORA_OK;
    a->missed = a->ran = 0;
    return read_list(a, u, now, st);
}

/* The chain of task 'id' in the last list read, root first, ending with the task. */
static int chain_of(unwinder_t *u, uint64_t id, const unw_task_t *const **chain, size_t *n)
{
    return unw_task_chain(u, id, chain, n) == REMORA_OK && *n > 0 && (*chain)[*n - 1] != NULL &&
           (*chain)[*n - 1]->id == id;
}

/* Is the listed task t the one th runs? Its outermost coroutine frame as the list read it
 * runs the code of th's outermost frame of the task (a task freed since the reading and
 * another made at its address, named by its own, run another coroutine); 1 where either
 * code is not known. */
static int same_code(const unw_task_t *t, const unw_thread_t *th, size_t own)
{
    uint64_t listed, ran;

    if (t->nframes == 0 || t->frames == NULL || own == 0)
        return 1;
    listed = t->frames[t->nframes - 1].code & ~(uint64_t)7;
    ran = th->frames[own - 1].code & ~(uint64_t)7;
    return listed == 0 || ran == 0 || listed == ran;
}

int async_thread_stack(async_t *a, unwinder_t *u, const unw_thread_t *th, sampler_stats_t *st,
                       const unw_frame_t **frames, size_t *n)
{
    const unw_task_t *const *chain = NULL;
    size_t nchain = 0, own = th->task_frames < th->nframes ? th->task_frames : th->nframes;
    int err, oom = 0, found = a->read && chain_of(u, th->task, &chain, &nchain) &&
                              same_code(chain[nchain - 1], th, own);

    *frames = NULL;
    *n = 0;
    a->n = 0;
    a->ran = 1;
    if (room(a, own + 1, &oom))
        return oom ? REMORA_ENOMEM : REMORA_OK;
    push_frames(a, th->frames, own);
    if (found) {
        if ((err = push_chain(a, chain, nchain - 1, 1)))
            return err;
        st->tasks++;
    } else {
        /* a task made since the list was read: read it again before the next round */
        push_marker(a, a->unknown);
        st->task_unknown++;
        a->missed = 1;
    }
    *frames = a->buf;
    *n = a->n;
    return REMORA_OK;
}

int async_task_stack(async_t *a, unwinder_t *u, size_t i, pid_t *thread,
                     const unw_frame_t **frames, size_t *n)
{
    const unw_task_t *tk, *const *chain = NULL;
    size_t nchain = 0;
    int err;

    *frames = NULL;
    *n = 0;
    *thread = 0;
    a->n = 0;
    if (i >= a->ntasks || a->tasks == NULL)
        return REMORA_OK;
    tk = &a->tasks[i];
    *thread = tk->thread;
    if (tk->running)
        return REMORA_OK;
    if (!chain_of(u, tk->id, &chain, &nchain)) {
        chain = &a->tasks_alone;    /* no chain: the task alone */
        a->tasks_alone = tk;
        nchain = 1;
    }
    if ((err = push_chain(a, chain, nchain - 1, 0)))
        return err;
    *frames = a->buf;
    *n = a->n;
    return REMORA_OK;
}
