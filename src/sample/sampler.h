/* sample/sampler.h — the sampling loop (sampler.c): timing, modes, and turning each
 * thread's frames into a node of the stack table, handed on to a sink (the CLI connects
 * the raw event log there). */
#ifndef REMORA_SAMPLER_H
#define REMORA_SAMPLER_H

#include <signal.h>

#include "sample.h"
#include "../unwind/unwind.h"


/* SAMPLE_MEMORY: only the kernel engine's samples, each taken at a page fault of its
 * thread (kern_open_faults); the rounds keep the thread list and name the frames, and
 * take no sample of their own. */
enum sample_mode { SAMPLE_WALL = 0, SAMPLE_CPU, SAMPLE_GIL, SAMPLE_EXCEPTION, SAMPLE_MEMORY };

/* --async-mode: a thread running an asyncio task written as the task's awaiter chain
 * (async.c); ALL also counts every waiting task once a round. */
enum sample_async { SAMPLE_ASYNC_OFF = 0, SAMPLE_ASYNC_RUNNING, SAMPLE_ASYNC_ALL };

typedef struct sampler_opts {
    double rate_hz;         /* rounds per second */
    double duration_s;      /* 0: until the target exits or stop is set */
    int mode;               /* enum sample_mode */
    int gc;                 /* add a <GC> frame while the interpreter collects */
    int anchor;             /* --frame-anchor (3.15): UNW_WANT_ANCHOR, writes to the target */
    pid_t child;            /* a launched command: reaped when it exits (0 = none) */
    uint64_t max_rounds;    /* stop after this many rounds (0 = no limit) */
    int subprocesses;       /* also sample the target's descendants */
    int blocking;           /* --blocking: the target stopped (ptrace) while it is read */
    int function;           /* --function: one frame per function, at its first line */
    int opcodes;            /* --opcodes: the innermost frame's instruction, a frame of its own */
    int idle;               /* --idle: keep idle threads' samples (idle: not on a CPU and
                             * not holding the GIL); without it they are left out, in
                             * every mode */
    int async;              /* enum sample_async */
    int states;             /* read each thread's exception state for the counts of
                             * sampler_stats_t below (top's header), in every mode */
    struct kern *kern;      /* the kernel engine (borrowed; it must outlive the sampler),
                             * already enabled on the target's unwinder; NULL: the
                             * user-space engine alone */
} sampler_opts_t;

typedef struct sampler_stats {
    uint64_t rounds;        /* sampling rounds taken */
    uint64_t samples;       /* thread stacks added to the table */
    uint64_t idle;          /* thread samples left out as idle (without --idle): asleep,
                             * not holding the GIL; never read, never written */
    /* Every thread sample looked at (written, left out as idle or by the mode, or an
     * error), and of those: the GIL holder's, one waiting for the GIL (3.15's flag: 0
     * before), the GIL holder's while its interpreter collects garbage; 'exc' of the
     * 'exc_known' whose exception state was read (with 'states' or in exception mode;
     * at a kernel tick too, which reads it with the frames) those handling one. */
    uint64_t looked, on_gil, gil_wait, in_gc, exc, exc_known;
    uint64_t errors;        /* thread stacks that could not be read at all */
    uint64_t partial;       /* ... of samples, those whose innermost frames moved while read:
                             * the outer frames known, then a UNW_MOVING frame */
    uint64_t late;          /* rounds skipped because remora fell behind */
    uint64_t subprocesses;  /* descendants whose interpreter was found (--subprocesses) */
    uint64_t held_ns;       /* --blocking, --native: time the target was held, in all (from
                             * asking its threads to stop to letting them go) */
    uint64_t tasks;         /* --async: samples written as a task's awaiter chain */
    uint64_t task_waiting;  /* --async-mode all: waiting tasks' samples (not in 'samples') */
    uint64_t task_unknown;  /* --async: samples of a task not in the last task list read
                             * (written under the <task> marker) */
    uint64_t task_reads;    /* --async: full readings of the task list */
    uint64_t task_read_errors;  /* ... that failed (a list that moved: the last one kept) */
    uint64_t task_read_ns;  /* ... their time, in all */
    uint64_t kernel;        /* samples the kernel engine read (in 'samples' once kept) */
    uint64_t kernel_fallback;   /* ... that held no stack (a read failed in the kernel):
                             * the thread read from user space the next round */
    uint64_t kernel_late;   /* ... written at a round's time, over 1 us later than their
                             * own: their record reached the ring after that round began */
    uint64_t kernel_unsettled;  /* rounds not taken, a CPU still walking a tick after
                             * 1 ms (counted late), or begun with ticks still coming in
                             * after 8 passes over the ring */
    uint64_t kernel_paused; /* ... taken while paused (their walk in the ring after the
                             * pause began): dropped, never written */
    uint64_t light;         /* rounds that read nothing: every thread on a CPU (sampled by
                             * its ticks) or idle, as the kernel engine's table said (and
                             * the rounds skipped after one, to the next millisecond) */
    uint64_t pauses;        /* sampler_pause(): times resumed */
    uint64_t paused_ns;     /* ... time spent paused, in all (in end_ns - start_ns) */
    int64_t start_ns, end_ns;   /* CLOCK_MONOTONIC */
} sampler_stats_t;

/* Where every thread sample goes once it is in the table (e.g. the raw event log):
 * sample() is called with ctx, the table, the thread's and the stack's innermost node's
 * indexes in it, the round's deadline in ns since sampling began, and SAMPLE_F_* flags
 * (sample.h). It returns 0, or a REMORA_E* code that ends sampling with that code. */
typedef struct sample_sink {
    void *ctx;
    int (*sample)(void *ctx, const stk_table_t *t, uint32_t thread, uint32_t node,
                  int64_t t_ns, unsigned flags);
} sample_sink_t;

typedef struct sampler sampler_t;

/* The unwinder's thread whose sample the sink is being given (during sink.sample()
 * only; NULL for an asyncio task's waiting sample): what the table does not keep (its
 * ident, interpreter, main, exception state), for the library's samples; *count the
 * periods the sample stands for (the sink is called that many times), *index which. */
const unw_thread_t *sampler_current_thread(const struct sampler *s, unsigned *count,
                                           unsigned *index);

/* The sampler borrows u, p, t and sink->ctx; the sink is copied (NULL: none). u is NULL
 * for a launched command (o->child) that is not Python itself, with o->subprocesses: only
 * its descendants are sampled (itself among them once it exec's a Python), none held by
 * o->blocking, until it exits. Returns 0, REMORA_ENOMEM, or with o->blocking what
 * freeze_new() returns. */
int sampler_new(unwinder_t *u, proc_t *p, stk_table_t *t, const sample_sink_t *sink,
                const sampler_opts_t *o, sampler_t **out);
void sampler_free(sampler_t *s);
const sampler_stats_t *sampler_stats(const sampler_t *s);

/* One round: every thread's stack, filtered by mode, added to the table (and given to
 * the sink). Returns 0, REMORA_ENOPROC when the target is gone, or another fatal code
 * (the sink's among them). */
int sampler_round(sampler_t *s, int64_t now_ns);

/* Samples on absolute deadlines until the duration ends, *stop is set, or the target
 * exits. 'status' (may be NULL) is called about twice a second. Returns 0 when the
 * duration ended or stop was set, REMORA_ENOPROC when the target went away, or a
 * fatal code. Whatever was collected stays in the table either way. */
int sampler_run(sampler_t *s, volatile sig_atomic_t *stop,
                void (*status)(const sampler_t *s, void *ctx), void *ctx);

/* The wait status of the launched child once sampler_run returned REMORA_ENOPROC. */
int sampler_child_status(const sampler_t *s);

/* CLOCK_MONOTONIC in nanoseconds. */
int64_t sampler_now_ns(void);

/* Called by sampler_run() between two rounds, every_s apart (and at once when *poke is
 * set, e.g. by a signal handler): the caller's control of a running sampler. It may pause
 * it, give it a new table, or write what it holds. Returns 0, or a code that ends
 * sampler_run() with it. */
typedef int (*sampler_hook_t)(sampler_t *s, void *ctx, int64_t now_ns);
void sampler_set_hook(sampler_t *s, sampler_hook_t hook, void *ctx, double every_s,
                      volatile sig_atomic_t *poke);

/* Every sample taken up to the time returned (CLOCK_MONOTONIC) is in the table, none
 * after it: the kernel engine's ticks waiting are written. A period ends there. */
int64_t sampler_flush(sampler_t *s);

/* Asks the hook to be called at when_ns (CLOCK_MONOTONIC) too, before any later round
 * (0: no such moment). */
void sampler_hook_due(sampler_t *s, int64_t when_ns);

/* Samples into table t from the next round on (the caller keeps the old one: a period's
 * profile), handing samples to *sink. Every cache of the old table's indexes is
 * forgotten. Returns 0 or REMORA_ENOMEM (the old table kept). */
int sampler_set_table(sampler_t *s, stk_table_t *t, const sample_sink_t *sink);

/* Pauses (1) or resumes (0) sampling: no rounds while paused, and the kernel engine's
 * events are off (its ticks before the pause written first, none taken during it kept).
 * Returns 0 or a fatal code. */
int sampler_pause(sampler_t *s, int paused);
int sampler_paused(const sampler_t *s);

#endif
