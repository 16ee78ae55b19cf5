/* unwind/ — every thread's Python stack in a CPython target, read from outside.
 *
 * Never prints: every function returns data and a REMORA_E* code. This header is the
 * folder's public face: the unwinder (unw_new, unw_sample) and the pure line-table
 * decoders. internal.h declares, file by file, what the folder's files share; which file
 * does what: docs/layout.md.
 */
#ifndef REMORA_UNWIND_H
#define REMORA_UNWIND_H

#include <string.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../proc/proc.h"
#include "../py/py.h"
#include "../util/util.h"

/* Bounds on what is read from the target. */
#define UNW_MAX_DEPTH 4096          /* frames per thread */
#define UNW_MAX_THREADS 4096        /* thread states per interpreter */
#define UNW_MAX_INTERPS 256
#define UNW_MAX_NAME 1024           /* code points kept of a name (a function's, a thread's,
                                     * a task's) or a path */
#define UNW_MAX_LINETABLE (1u << 20)
#define UNW_CODE_CACHE 4096         /* entries (power of two) */

/* ---- linetable.c (pure) --------------------------------------------------- */

/* Each returns the line of the instruction at byte offset 'addrq' (code units × 2), as
 * CPython's PyCode_Addr2Line does, or -1 where the table says "no line". A negative
 * addrq gives firstlineno. Every read stays inside tab[0..len). */
int lt_lnotab_line(const unsigned char *tab, size_t len, int firstlineno, int addrq);
int lt_310_line(const unsigned char *tab, size_t len, int firstlineno, int addrq);
int lt_locations_line(const unsigned char *tab, size_t len, int firstlineno, int addrq);

/* 3.11+: the whole location of the instruction at 'addrq' (line, end line, 0-based
 * columns in UTF-8 bytes; -1 where the entry has none). Returns 0, or -1 where the table
 * says "no location" (every field -1). Every read stays inside tab[0..len). */
typedef struct lt_location {
    int line, end_line, column, end_column;
} lt_location_t;
int lt_locations_entry(const unsigned char *tab, size_t len, int firstlineno, int addrq,
                       lt_location_t *out);

/* ---- the unwinder ------------------------------------------------------------ */

typedef struct unw_frame {
    const char *function;       /* interned */
    const char *file;           /* interned (a C frame: its source file, else its module) */
    int line;                   /* a C frame without line information: 0 */
    unsigned char native;       /* a C frame (UNW_WANT_NATIVE, native.c) */
    unsigned char entry;        /* a Python frame that one C call of the eval loop began
                                 * with (its outermost): 3.9/3.10 every frame; 3.11 a frame
                                 * marked is_entry; 3.12+ one whose previous is C-owned */
    unsigned char gen;          /* a kernel walk's frame (a tick's, a switch-out's) of a
                                 * generator or coroutine (KERN_F_GEN); else 0 */
    uint64_t below;             /* 3.12+, an entry frame: the address of that C-owned frame
                                 * (a local of the eval loop, on the C stack), else 0 */
    uint64_t addr;              /* a Python frame: the frame's address (a PyFrameObject on
                                 * 3.9/3.10, else an _PyInterpreterFrame), else 0 */
    uint64_t code;              /* ... and its code object's (dump --locals reads both) */
    const char *op;             /* UNW_WANT_OPCODES, a thread's innermost Python frame: its
                                 * instruction's name (a constant), else NULL */
    int offset;                 /* ... and the instruction's byte offset in the bytecode */
    uint64_t code_serial;       /* a Python frame named by unw_sample: its code-cache entry's
                                 * serial (equal serials, the same code object read: the
                                 * same names, lines and locations); else 0 */
} unw_frame_t;

typedef struct unw_thread {
    uint64_t tstate;
    uint64_t interp;
    int64_t interp_id;
    pid_t native_id;            /* 0 if unknown */
    int is_main;
    int holds_gil;
    int gil_requested;          /* 3.15: waiting for the GIL (tstate->gil_requested, not
                                 * holding it); always 0 before (docs/api.md) */
    int on_cpu;                 /* only with UNW_WANT_CPU or UNW_WANT_ACTIVE: running or
                                 * runnable */
    int runnable;               /* the kernel engine's table: off a CPU, waiting for one (in
                                 * on_cpu too; /proc cannot tell it apart: 0 there) */
    int kernel;                 /* the kernel engine samples it: in a round, on a CPU, its
                                 * time there counted by its ticks, none by the round (no
                                 * stack read unless failed_ticks); from unw_kern_tick, a
                                 * tick's sample */
    unsigned periods;           /* the kernel engine, a thread off a CPU: the periods since it
                                 * went off (or since the last round, if later) that this
                                 * reading stands for, its stack unmoved since (rounds after
                                 * one that read nothing come up to 1 ms apart); 0 = 1
                                 * unless weighed */
    int weighed;                /* periods is the count (0: its time off a CPU since the last
                                 * sample is under half a period, carried to the next) */
    unsigned failed_ticks;      /* ticks of it the kernel could not read since the round
                                 * before: this round's stack, read from user space, stands
                                 * for them too */
    int64_t t_ns;               /* a tick's CLOCK_MONOTONIC time, the instant its frames
                                 * were read */
    int gc;                     /* its interpreter is collecting garbage (UNW_WANT_GC) */
    int handling_exc;           /* UNW_WANT_EXC: 1 when sys.exc_info() would give an exception
                                 * there (it is inside an except block), 0 when not, -1
                                 * when that could not be read */
    char comm[64];              /* its comm (the kernel's name for the task), only with
                                 * UNW_WANT_COMM */
    uint64_t ident;             /* its pthread_t (threading.get_ident()), 0 if unknown */
    const char *thread_name;        /* UNW_WANT_THREAD_NAMES: its thread name (threading's, UTF-8,
                                 * cut after UNW_MAX_NAME code points), NULL when the
                                 * thread is not in threading's registry or that could not
                                 * be read; valid until the next unw_sample() */
    int error;                  /* REMORA_E* if the stack could not be read at all */
    int partial;                /* its innermost frames moved while they were read: frames[]
                                 * holds the outer frames known (each the same function, and
                                 * a caller at the same call, at both ends of the read); the
                                 * caller marks where the rest was (UNW_MOVING) */
    int moving_in_frames;       /* partial, and the UNW_MOVING frame is already in frames[]
                                 * (--native: inner of the Python frames known, between
                                 * the C frames): the caller adds none above */
    size_t nframes;
    unw_frame_t *frames;        /* innermost first; owned by the unwinder */
    size_t held;                /* --frame-anchor: frames[nframes - held ..) are, frame for
                                 * frame, what every reading with the same held_id has
                                 * outermost (the frames below an anchor that held, named
                                 * once): a caller may take the last min(held) frames of
                                 * two such readings as equal without comparing them */
    uint64_t held_id;           /* 0: held is 0 */
    uint64_t task;              /* UNW_WANT_TASKS: the task the thread's event loop is running
                                 * now (its object's address, = unw_task_t.id), 0 when none */
    size_t task_frames;         /* how many of frames[] (innermost first) are that task's own
                                 * coroutine frames (the frames above the loop's machinery
                                 * that steps the task); 0 when task is 0 */
} unw_thread_t;

typedef struct unwinder unwinder_t;

/* The frame every output shows above a partial stack's frames (no file, line 0). */
#define UNW_MOVING "<moving>"

/* What unw_sample reads besides stacks (each costs system calls per thread). */
#define UNW_WANT_CPU 1u         /* on_cpu of every thread: the kernel engine's table, else
                                 * /proc (idle.c: looked at when it may have changed) */
#define UNW_WANT_COMM 2u       /* name: the comm, from /proc/PID/task/TID/comm */
#define UNW_WANT_GC 4u          /* gc, from the interpreter's GC state */
#define UNW_WANT_EXC 8u         /* handling_exc, from the thread state (a read per generator
                                 * or coroutine whose exception slot is walked through) */
#define UNW_WANT_THREAD_NAMES 32u    /* thread_name: the thread name, from threading._active (read
                                 * again at most every 20 ms when a thread appears, else
                                 * every 0.5 s) */
#define UNW_WANT_ALL 47u
#define UNW_WANT_ANCHOR 16u     /* 3.15, record --frame-anchor: keep the thread state's
                                 * last_profiled_frame at a frame (writes 8 bytes into the
                                 * target) and copy only the frames above it; not in ALL */
#define UNW_WANT_FIRSTLINE 64u  /* record --function: each frame's line is its function's
                                 * first (co_firstlineno), no line table decoded; not in ALL */
#define UNW_WANT_NATIVE 128u    /* each thread's C stack merged in (unw_native_enable) */
#define UNW_WANT_TASKS 256u    /* per sample: each thread's running asyncio task (task,
                                 * task_frames): 3 system calls a sample on 3.14+, 4-5
                                 * before (docs/async.md); not in ALL */
#define UNW_WANT_ACTIVE 512u    /* on_cpu where it tells an idle thread (record's and top's
                                 * default): as UNW_WANT_CPU, but a thread holding the GIL
                                 * (never idle) is taken as on a CPU without a look, and an
                                 * idle thread (asleep, not holding it) gets no frames, its
                                 * stack not read nor named; not in ALL */
#define UNW_WANT_OPCODES 1024u /* --opcodes: each thread's innermost Python frame's
                                 * instruction (op, offset): a read a thread; not in ALL */
#define UNW_WANT_SWITCH 2048u  /* the kernel engine: a thread's frames walked as it leaves a
                                 * CPU, for a round that finds it off the CPU since
                                 * (unw_kern_switch_stack); without it no such walk is made
                                 * (wall and cpu modes: a mode judged by the round's GIL or
                                 * exception state would mix two instants); not in ALL */
_Static_assert((UNW_WANT_ACTIVE & (UNW_WANT_ALL | UNW_WANT_ANCHOR | UNW_WANT_FIRSTLINE |
                                   UNW_WANT_NATIVE | UNW_WANT_TASKS)) == 0 &&
               (UNW_WANT_TASKS & (UNW_WANT_ALL | UNW_WANT_ANCHOR | UNW_WANT_FIRSTLINE |
                                  UNW_WANT_NATIVE)) == 0 &&
               ((UNW_WANT_ALL | UNW_WANT_ANCHOR | UNW_WANT_FIRSTLINE) & UNW_WANT_NATIVE) == 0 &&
               ((UNW_WANT_ALL | UNW_WANT_ANCHOR) & UNW_WANT_FIRSTLINE) == 0 &&
               (UNW_WANT_ALL & UNW_WANT_ANCHOR) == 0 &&
               (UNW_WANT_SWITCH & (UNW_WANT_ALL | UNW_WANT_ANCHOR | UNW_WANT_FIRSTLINE |
                                   UNW_WANT_NATIVE | UNW_WANT_TASKS | UNW_WANT_ACTIVE |
                                   UNW_WANT_OPCODES)) == 0, "UNW_WANT_* flags share a bit");

/* Returns 0 or REMORA_ENOMEM. The unwinder borrows p and t; it reads everything
 * (UNW_WANT_ALL) until unw_set_want() says otherwise. */
int unw_new(proc_t *p, const py_target_t *t, unwinder_t **out);
void unw_free(unwinder_t *u);
void unw_set_want(unwinder_t *u, unsigned want);

/* How many times unw_sample() reads a round again while a thread's stack is partial or
 * unreadable (default 0: a profiler takes every round as it is; dump asks for more). A
 * round whose thread list moved is read again once whatever this says. The one retry
 * policy: nothing above the unwinder retries. */
void unw_set_tries(unwinder_t *u, unsigned tries);

/* How long a thread whose stack moved while it was read may go on being read again, after
 * its first five re-readings (up to ten in all): a profiler gives it a share of its period
 * (default 0: five). */
void unw_set_reread_ns(unwinder_t *u, int64_t ns);

/* Reads every thread of every interpreter and its frames: the thread list kept from the
 * last sample and checked, all thread states (and, on 3.11+, each thread's data-stack
 * chunk, copied twice to detect change) in one vectored read, frames walked in the copy,
 * code objects validated in one more vectored read. The array is owned by the unwinder
 * and valid until the next call. Works on every memory source (a live process, a core,
 * a snapshot). Returns 0 (a thread whose stack could not be read has its 'error' set;
 * a stack that moved while it was read: REMORA_ECORRUPT), or a REMORA_E* code when the
 * thread list itself could not be read (REMORA_ENOPROC when the target is gone). */
int unw_sample(unwinder_t *u, unw_thread_t **threads, size_t *n);

/* What the unwinder has done since unw_new(). */
typedef struct unw_stats {
    uint64_t thread_samples;    /* threads read by unw_sample(), in all */
    uint64_t parked;            /* ... served from a parked thread's saved walk */
    uint64_t partial;           /* ... whose innermost frames moved (unw_thread_t.partial) */
    uint64_t chunk_outer;       /* ... of them, no reading walked from the current frame:
                                 * the callers in the chunk alone (walk_chunk_outer) */
    uint64_t thread_name_readings;     /* readings of the thread names' registry (threading._active;
                                 * never per sample) */
    uint64_t thread_name_reads;        /* ... the system calls they made */
    uint64_t thread_name_scans;        /* ... scans of threading._active (> readings: it moved) */
    uint64_t thread_name_torn;         /* threads it moved under every time (their last thread
                                 * name kept) */
    uint64_t thread_name_unscanned;    /* _active entries past the bound at the last reading */
    uint64_t thread_name_ns;           /* ... the time the readings took, in all */
    uint64_t idle_sched;        /* without the kernel engine: schedstat reads (idle.c) */
    uint64_t idle_states;       /* ... stat reads (a thread's state letter) */
    uint64_t idle_kept;         /* ... thread samples whose state was its last look's */
    uint64_t threads;           /* threads of unw_sample()'s results (thread_samples and
                                 * parked count every try of a round too) */
    uint64_t threads_kept;      /* ... served from their saved walk, nothing read */
    uint64_t frames;            /* ... their Python frames, in all */
    uint64_t frames_kept;       /* ... of the threads served from their saved walk */
    uint64_t code_hits;         /* code objects of a sample found cached and unchanged */
    uint64_t code_misses;       /* ... read anew: not cached, or stale */
    uint64_t code_stale;        /* ... cached, but another object there since (dropped) */
} unw_stats_t;

void unw_get_stats(const unwinder_t *u, unw_stats_t *out);

/* The location of frame f (a Python frame of the last unw_sample() or unw_tasks()) from
 * its code object as cached: 3.11+ its end line and columns too; before, the end line is
 * the line and the columns -1. Returns 0, or REMORA_EFAULT when the code object is no
 * longer cached (*loc then holds f->line and -1s). No system call. */
int unw_frame_location(unwinder_t *u, const unw_frame_t *f, lt_location_t *loc);

/* The instruction Python frame f (of the last unw_sample() or unw_tasks()) is at: its name
 * (a constant; the innermost frame's is f->op with UNW_WANT_OPCODES, no read), *opcode its
 * number in the target's version; NULL and -1 when unknown (a C frame, a code object no
 * longer cached, bytes that cannot be read). One read of the target (a byte) a frame. */
const char *unw_frame_opcode(unwinder_t *u, const unw_frame_t *f, int *opcode);

/* ---- --native (native.c) ------------------------------------------------------ */

/* Marker frames (native, no file) of a merged stack: no C stack could be read for the
 * thread (no registers: a live thread not held still, or no native id); the C stack
 * ended before its end: remora's bounds (too deep, or a frame not above its callee:
 * corrupt), or a frame libdwfl could not unwind (neither CFI nor a frame pointer). */
#define UNW_NATIVE_NONE "<no native stack>"
#define UNW_NATIVE_CUT "<native stack cut>"

/* From now on unw_sample() merges each thread's C stack into its frames, innermost first
 * as always: each call of the eval loop replaced by the Python frames it ran, C frames
 * (unw_frame_t.native) named from symbol tables, "??" with "MODULE+0xOFFSET" as the file
 * where none names them. A live target's threads must be held still while unw_sample()
 * reads them (freeze_stop): their registers are read with ptrace. Works on live processes
 * and cores (x86_64). Returns 0, REMORA_EUSAGE (a snapshot, or not x86_64),
 * REMORA_ENOTPY (no ELF file of the target could be opened), REMORA_ENOMEM, or what
 * reading the maps returns. */
int unw_native_enable(unwinder_t *u);

typedef struct unw_native_stats {
    uint64_t threads;           /* thread samples whose C stack was unwound */
    uint64_t frames;            /* C frames unwound, in all */
    uint64_t unreadable;        /* thread samples with no C stack (UNW_NATIVE_NONE) */
    uint64_t cut;               /* ... whose C stack was cut (UNW_NATIVE_CUT) */
    uint64_t unplaced;          /* ... with Python frames no eval loop's C frame was found
                                 * for (placed outermost) */
} unw_native_stats_t;

/* All zero unless unw_native_enable() was called. */
void unw_native_get_stats(const unwinder_t *u, unw_native_stats_t *out);

/* ---- asyncio tasks (tasks.c) ------------------------------------------------- */

#define UNW_MAX_TASKS 100000        /* tasks read per call, at most */
#define UNW_MAX_TASK_DEPTH 1024     /* coroutine frames per task, at most */
#define UNW_MAX_AWAITERS 1024       /* awaiters kept per task, at most */

typedef struct unw_task {
    uint64_t id;                /* the task object's address */
    const char *name;           /* interned UTF-8: Task.get_name() */
    pid_t thread;               /* native id of the thread whose running loop is the task's
                                 * loop; 0 when no thread runs that loop now */
    int running;                /* it is that thread's current task (asyncio.current_task()) */
    size_t nframes;
    unw_frame_t *frames;        /* its coroutine stack, innermost first, through coroutines
                                 * awaiting coroutines (cr_await / yield-from); a running task:
                                 * its frames as the thread's stack has them */
    size_t nawaited_by;
    const uint64_t *awaited_by; /* ids of the tasks awaiting it (direct awaiters) */
} unw_task_t;

/* Reads every asyncio task of every thread's event loop in the target: returns 0 with the
 * array (owned by the unwinder, valid until the next call), or a REMORA_E* code. Bounded:
 * at most UNW_MAX_TASKS (100,000) tasks; a task list that keeps moving while read gives
 * REMORA_ECORRUPT (after the unwinder's tries), never a crash or a hang. A target without
 * asyncio (no task, no loop): 0 with *n = 0. It calls unw_sample() itself (a running task's
 * frames are its thread's): an array from an earlier unw_sample() is invalid after it.
 * Cost: one unw_sample(); 3.14+: a vectored read of every thread state's asyncio fields and
 * one read per task (its list node); before 3.14 (and pure-Python tasks): the registries
 * through sys.modules (a few dozen reads), the tasks in vectored reads of 512; then per
 * coroutine-chain level one vectored read for all tasks (two on 3.9/3.10), and the awaiter
 * sets. About 0.01 s for a dozen tasks, 0.15 s for 10,000 (docs/async.md). A call every
 * few hundred ms at most from a sampler. REMORA_EVERSION: layout facts that fail their
 * checks (unw_tasks_problem() says why). */
int unw_tasks(unwinder_t *u, unw_task_t **tasks, size_t *n);

/* The awaiter chain of the task 'id' for the record side, per sample: the chain is taken
 * from the last unw_tasks() result, kept by the unwinder, and costs NO system call.
 * *chain is an array of *n pointers (owned by the unwinder), root first, ending with the
 * task itself; each points into that result (valid until the next unw_tasks()). Each
 * task's frames there are its coroutine stack, innermost first (a task running then: its
 * thread's frames at that unw_tasks()). Each step follows the task's first awaiter
 * (awaited_by[0]); the chain stops at a task with none, at a cycle (the task seen again is
 * not repeated) or after UNW_MAX_CHAIN tasks. Returns 0, or REMORA_EFAULT when 'id' is not
 * in the last result (a task made since: call unw_tasks() again, at the cost above). Per
 * sample, the thread's own running task's frames are th->frames[0 .. th->task_frames). */
#define UNW_MAX_CHAIN 256
int unw_task_chain(unwinder_t *u, uint64_t id, const unw_task_t *const **chain, size_t *n);

/* The kernel engine: a stack read at one instant (a tick's, a switch-out's) names its
 * running task by the frames it holds (the task whose coroutine's frame is among them, in
 * the last unw_tasks() result), and sets th->task and task_frames so. Whether such a
 * stack, since the last call, belonged to a thread whose running task that result does
 * not hold (a task made since: call unw_tasks() again). No system call; clears the flag. */
int unw_tasks_stale(unwinder_t *u);
/* th->task of such a stack whose running task the last result does not hold (a task made
 * since: the outermost coroutine frame C stepped, and every frame inside it, are the
 * task's own): no task object's address (an odd one), so in no chain. */
#define UNW_TASK_UNLISTED 1u

/* Why unw_tasks() returned REMORA_EVERSION, or REMORA_ECORRUPT (what moved at the last
 * try) (one line), or "". */
const char *unw_tasks_problem(const unwinder_t *u);

/* ---- the kernel engine (kernel.c) ----------------------------------------------- */

struct kern;
struct kern_sample;

/* From now on a thread on a CPU is sampled by the kernel engine k (its ticks, one each
 * period of the thread's own CPU time, through unw_kern_tick), and unw_sample() reads only
 * the others (th->kernel marks one it left out, but for ticks that failed). Every
 * thread's on/off-CPU state comes from the engine's table (no system call; /proc only for
 * a thread the table does not know yet), and the engine is told each thread's state when
 * the list changes. Returns 0, REMORA_EVERSION (this layout cannot be walked in the
 * kernel; *why says why), REMORA_ENOMEM. k is borrowed. */
int unw_kern_enable(unwinder_t *u, struct kern *k, char *why, size_t whylen);

/* Can the kernel engine read, at each tick of u's threads, what --mode gil (gil) and
 * --mode exception (exc) ask: the GIL's holder, the exception state? Returns 0, or
 * REMORA_EVERSION with *why saying which cannot be read (one phrase naming the mode). */
int unw_kern_reads(const unwinder_t *u, int gil, int exc, char *why, size_t whylen);

/* The plain offsets the kernel engine walks this target's frames with. Returns 0, or
 * REMORA_EVERSION (*why says why) when its layout is not one the engine walks. */
struct kern_layout;
int unw_kern_layout(const py_target_t *t, struct kern_layout *kl, char *why, size_t whylen);

/* A tick of one of this target's threads, its frames named at once with the code-object
 * cache: *out is that thread as the last unw_sample() knew it, with the tick's stack
 * (th->kernel set, t_ns the tick's time), valid until the next call. A frame is named only
 * when the code object cached at its address carries the fingerprint the kernel read with
 * it (a code object freed and its address reused since never names it; such a frame and
 * those inside it are left out, the stack marked partial). Call it before the round's
 * unw_sample(). Returns 0, REMORA_EFAULT when the tick holds no stack to take (a read
 * failed in the kernel, no thread state known, deeper than it walks, a walk not rooted:
 * the next round reads the thread from user space in its place; or a thread gone),
 * REMORA_ENOPROC, REMORA_ENOMEM. */
/* After a pause (no rounds, no ticks): the next round counts from now_ns. */
void unw_kern_resume(unwinder_t *u, int64_t now_ns);
int unw_kern_tick(unwinder_t *u, const struct kern_sample *ks, const unw_thread_t **out);

/* A stack the kernel walked as one of this target's threads left a CPU (KERN_S_SWITCH):
 * kept, the last of each thread (UNW_KERN_SWITCH threads at most, by tid), for the rounds
 * that find the thread off a CPU since that switch. Returns 0 or REMORA_ENOMEM. */
#define UNW_KERN_SWITCH 64
int unw_kern_switch(unwinder_t *u, const struct kern_sample *ks);

/* With UNW_WANT_SWITCH, the i-th thread of the last unw_sample() with the stack the kernel
 * walked as it left its CPU, when the round found it off a CPU since that very switch (it
 * has not run since, so that is its stack at the round, whatever a read of its memory that
 * it began to move under saw): *out is u->threads[i] (status, weight) with those frames, named as a tick's,
 * valid until the next call of this or unw_kern_tick; else *out is NULL and the round's
 * own reading stands. Returns 0, REMORA_ENOPROC or REMORA_ENOMEM. */
int unw_kern_switch_stack(unwinder_t *u, size_t i, const unw_thread_t **out);

/* Whether this round may read nothing at all (called after the ticks are drained, before
 * unw_kern_round): with idle threads left out (UNW_WANT_ACTIVE), every thread of the last
 * round is, by the kernel engine's table, on a CPU with ticks of its own, or asleep and
 * not the GIL's holder at the last round that read, no tick failed, and the last full round is less than
 * UNW_KERN_FULL_NS old (a new thread waits at most that long to be seen). No system call. */
#define UNW_KERN_FULL_NS 10000000
int unw_kern_light(unwinder_t *u, int64_t now_ns);

/* The periods of idle time (threads asleep, not the GIL's holder) the light rounds since
 * the last call looked at: each such thread's time off a CPU since its last look, weighed
 * as a full round weighs the idle thread sample it leaves out. The caller counts them as
 * left out as idle; the count starts again at 0. */
uint64_t unw_kern_light_idle(unwinder_t *u);

/* A round begins, remora having woken for it at woke_ns (CLOCK_MONOTONIC): the ticks
 * failed since the last one are read by the next unw_sample(), and a thread that remora's
 * wake-up preempted is left to its ticks as one on a CPU. */
void unw_kern_round(unwinder_t *u, int64_t woke_ns);

typedef struct unw_kern_stats {
    uint64_t samples;           /* ticks named */
    uint64_t partial;           /* ... with a frame whose code object could not be named */
    uint64_t fallback;          /* ticks with no stack (a read failed in the kernel, no state,
                                 * or not rooted): read from user space at the next round */
    uint64_t unrooted;          /* ... whose walk ended where no stack is rooted */
    uint64_t gone;              /* ticks of a thread no longer in the list */
    uint64_t proc_reads;        /* /proc reads of a state the table did not know */
    uint64_t light;             /* rounds that read nothing (unw_kern_light) */
    uint64_t missed;            /* threads of a round on a CPU without ticks of their own
                                 * (their event could not be made): read from user space */
    uint64_t behind;            /* ... on a CPU or waiting for one, 2 periods of CPU time
                                 * with no tick (its ticks held up): read from user space */
    uint64_t switch_used;       /* threads of a round given the stack walked at their
                                 * switch-out (unw_kern_switch_stack) */
    uint64_t named;             /* frames named from the names the walk read with them (their
                                 * code object not one user space could prove) */
} unw_kern_stats_t;
void unw_kern_get_stats(const unwinder_t *u, unw_kern_stats_t *out);

/* ---- dump --locals (locals.c) ---------------------------------------------------- */

#define UNW_LOCALS_MAX 512      /* locals shown per frame (the rest counted) */
#define UNW_LOCAL_VALUE 4096    /* bytes of one value's text, "..." included */
#define UNW_LOCAL_STR 256       /* code points of a str, bytes of a bytes shown */
#define UNW_LOCAL_ITEMS 16      /* items of a list, tuple, dict or set shown */
#define UNW_LOCAL_DEPTH 4       /* containers nested in one value shown */
#define UNW_LOCAL_READS 512     /* reads of the target for one value */

#define UNW_LOCAL_ARG 1u        /* an argument (co_argcount, kw-only, *args, **kwargs) */
#define UNW_LOCAL_CELL 2u       /* a cell: the value is what the cell holds */
#define UNW_LOCAL_FREE 4u       /* a free variable (a cell of the enclosing function) */
#define UNW_LOCAL_HIDDEN 8u     /* internal (3.12+ inlined comprehensions): not shown */

typedef struct unw_local {
    const char *name;           /* UTF-8 as the target has it: escape it to print */
    unsigned kind;              /* UNW_LOCAL_* */
    int has_value;              /* 0: unbound (value NULL) */
    const char *value;          /* repr() text (no control characters), "<unreadable>",
                                 * or UNW_MOVING; cut with "..." at the bounds above */
} unw_local_t;

typedef struct unw_locals unw_locals_t;

/* A reader of frames' locals in p (borrowed, as t). Returns 0 or REMORA_ENOMEM. */
int unw_locals_new(proc_t *p, const py_target_t *t, unw_locals_t **out);
void unw_locals_free(unw_locals_t *lr);

/* The arguments (first, in order) and locals of frame f (from unw_sample: f->addr and
 * f->code), at most UNW_LOCALS_MAX, *more the rest. The array and its strings are owned
 * by lr, valid until the next call. Returns 0; REMORA_EVERSION: the layout lacks the
 * offsets; REMORA_EUSAGE: not a Python frame; REMORA_ECORRUPT: the frame no longer runs
 * that code (it moved since it was walked) or its code object is implausible; or a
 * read error. */
int unw_locals_read(unw_locals_t *lr, const unw_frame_t *f, const unw_local_t **out,
                    size_t *n, size_t *more);

#endif
