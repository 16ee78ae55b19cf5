/* sample/async.h — --async (async.c): a thread running an asyncio task written as that
 * task's awaiter chain, and with --async-mode all every waiting task's stack each round.
 * Internal to sample/: the sampler is its only user. */
#ifndef REMORA_ASYNC_H
#define REMORA_ASYNC_H

#include "sampler.h"

/* The frame written for a task: function "task NAME", no file, line 0 (as <GC>). A
 * thread's running task missing from the last task list read (made since, and the list
 * not read again yet): this marker instead of its chain, above its own frames. */
#define ASYNC_TASK_PREFIX "task "
#define ASYNC_UNKNOWN "<task>"

/* Task-list readings: at most one per ASYNC_MIN_GAP_NS when a thread runs a task the last
 * list does not hold, at least one per ASYNC_PERIOD_NS while a thread runs a task (what a
 * cached chain can miss, for this long: a renamed task, a new awaiter, a task freed and
 * another made at its address); each gap at least ASYNC_COST_FACTOR times the last
 * reading's cost, so reading the list takes at most 1/ASYNC_COST_FACTOR of the time. */
#define ASYNC_MIN_GAP_NS 2000000
#define ASYNC_PERIOD_NS 100000000
#define ASYNC_COST_FACTOR 20
#define ASYNC_MAX_FRAMES (2 * UNW_MAX_DEPTH)   /* frames of one written stack, at most */
#define ASYNC_TASK_NAMES 1024                   /* task names kept as frames (power of two) */

typedef struct async async_t;

/* The table interns the task frames' names. Returns 0 or REMORA_ENOMEM. */
int async_new(stk_table_t *t, async_t **out);
void async_free(async_t *a);

/* Before a round's unw_sample() (unw_tasks() samples the threads itself: an array of an
 * earlier unw_sample() is no longer valid after it): reads the whole task list (bounded by
 * the unwinder: UNW_MAX_TASKS) when it is due: with 'all' (--async-mode all) every round
 * while a reading costs under 1/ASYNC_COST_FACTOR of the time since the last one, else
 * once that much time has passed; without, as above. Returns 0 (a list that moved while read is counted in st and leaves no
 * list until the next reading), or a fatal REMORA_E* code (ENOPROC, EPERM, ENOMEM). */
int async_before(async_t *a, unwinder_t *u, int all, int64_t now, sampler_stats_t *st);

/* The stack to write for a thread running a task (th->task != 0), innermost first: its
 * own frames (th->frames[0 .. th->task_frames)), "task NAME", then each awaiter's
 * suspended coroutine frames and "task NAME", up to the root task (ASYNC_UNKNOWN in
 * place of the chain when the last list read does not hold the task, or holds another at
 * its address whose coroutine ran other code: the list is read again before the next
 * round). No system call. *frames is scratch, valid until the next
 * call. Returns 0 or REMORA_ENOMEM. */
int async_thread_stack(async_t *a, unwinder_t *u, const unw_thread_t *th, sampler_stats_t *st,
                       const unw_frame_t **frames, size_t *n);

/* After a reading (async_before with 'all'): how many tasks the last list holds, the
 * i-th's id, and for the i-th, when it is waiting (not running when the list was read),
 * its stack (its coroutine frames, "task NAME", then its awaiters' as above) and the
 * native id of the thread running its loop (0: none); *n = 0 for a running task (its
 * thread's sample counts it). Returns 0 or REMORA_ENOMEM. */
size_t async_ntasks(const async_t *a);
uint64_t async_task_id(const async_t *a, size_t i);
int async_task_stack(async_t *a, unwinder_t *u, size_t i, pid_t *thread,
                     const unw_frame_t **frames, size_t *n);

#endif
