/* libremora — read the Python stacks of a running CPython process (3.9 to 3.15) from
 * outside it, or of a core file: every thread's frames, its status, the asyncio tasks.
 * The public C API of the remora library (docs/api.md); the remora command is built
 * over the same code. C11, Linux; link with `pkg-config --libs libremora`.
 *
 * Every function returns REMORA_OK (0) or a REMORA_E* code; remora_strerror() names a
 * code and remora_last_error() says, in one line, what failed on a handle. A handle is
 * used by one thread at a time. Nothing here trusts the target: what is read from it is
 * bounded and checked, and a target that changes while it is read is read again.
 */
#ifndef LIBREMORA_H
#define LIBREMORA_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The API's version: the major number is the soname's (libremora.so.0); a minor number
 * adds functions or flags, never changes one. */
#define REMORA_API_MAJOR 0
#define REMORA_API_MINOR 2   /* 2: remora_sample and its kin, REMORA_ENTRY_MARKS,
                              * REMORA_FRAME_ENTRY, remora_get_cache_stats */

/* Error codes, returned by every function. */
enum remora_err {
    REMORA_OK = 0,
    REMORA_EUSAGE,    /* a bad argument, or a request this source cannot serve */
    REMORA_ENOPROC,   /* no such process (or it exited), or no such core file */
    REMORA_EPERM,     /* not allowed to read the target (ptrace rules: run as root, or
                       * with CAP_SYS_PTRACE) */
    REMORA_ENOTPY,    /* not a CPython process */
    REMORA_EVERSION,  /* CPython, but a version or build remora cannot read */
    REMORA_EFAULT,    /* an address is not mapped in the target (transient) */
    REMORA_ECORRUPT,  /* data read from the target fails a check, or kept changing while
                       * it was read (transient) */
    REMORA_ENOMEM,    /* out of memory, or one of remora's bounds was reached */
    REMORA_EIO,       /* local I/O failed (/proc, a file) */
};

/* The name of an error code ("no such process"): a constant string. */
const char *remora_strerror(int err);

/* The library's version ("0.1.0"): a constant string. */
const char *remora_version(void);

/* ---- opening a target ------------------------------------------------------------ */

typedef struct remora remora_t;

/* What remora_read() reads and which threads it returns (bits; 0: every thread, its
 * Python frames, the status that costs no system call). */
#define REMORA_MAIN_THREAD   0x0001u  /* only each interpreter's main thread */
#define REMORA_ACTIVE        0x0002u  /* only threads on a CPU or holding the GIL (an idle
                                       * thread's stack is not read at all) */
#define REMORA_ONLY_GIL      0x0004u  /* only the thread holding the GIL */
#define REMORA_ONLY_CPU      0x0008u  /* only threads on a CPU (implies REMORA_STATUS) */
#define REMORA_ONLY_EXCEPTION 0x0010u /* only threads handling an exception (implies
                                       * REMORA_STATUS) */
#define REMORA_STATUS        0x0020u  /* the status bits that cost reads: ON_CPU (/proc,
                                       * looked at only when it may have changed) and
                                       * HAS_EXCEPTION (a read per thread) */
#define REMORA_THREAD_NAMES  0x0040u  /* threading's names (and the kernel's comm) */
#define REMORA_GC            0x0080u  /* a "<GC>" frame innermost on the thread that runs a
                                       * garbage collection */
#define REMORA_OPCODES       0x0100u  /* each Python frame's instruction (remora_frame_t
                                       * .opname, .opcode, .offset): a read a frame */
#define REMORA_NATIVE        0x0200u  /* C frames merged with the Python frames (x86_64;
                                       * a live target's threads are stopped with ptrace
                                       * while they are read) */
#define REMORA_RUNNING_TASK  0x0400u  /* each thread's running asyncio task (task_id) */
#define REMORA_FRAME_ANCHOR  0x0800u  /* 3.15 targets: keep each thread's last_profiled_frame
                                       * at a frame read, and copy only the frames above it
                                       * while the frames below are unchanged. The one flag
                                       * that writes to the target (8 bytes a thread, a
                                       * field the interpreter keeps for profilers; what
                                       * CPython's RemoteUnwinder(cache_frames=True) does);
                                       * ignored before 3.15 */
#define REMORA_ENTRY_MARKS   0x1000u  /* a "<native>" frame (REMORA_FRAME_ENTRY) where the
                                       * interpreter was entered from C: after the
                                       * outermost Python frame of each entry into the eval
                                       * loop (3.11+: where CPython 3.15's
                                       * RemoteUnwinder(native=True) puts its markers);
                                       * 3.9/3.10 record no entries: one, outermost */

/* Opens the live process 'pid' with 'flags' (REMORA_* above): finds its interpreter and
 * version. Reads only: nothing is written to the target (but with REMORA_FRAME_ANCHOR),
 * and it is not stopped (but with REMORA_NATIVE, for the length of each read). Returns REMORA_OK with *out set, or
 * REMORA_ENOPROC, REMORA_EPERM, REMORA_ENOTPY, REMORA_EVERSION, REMORA_EUSAGE (unknown
 * flags; REMORA_NATIVE where C stacks cannot be read), REMORA_ENOMEM, with *out NULL and,
 * when 'why' is not NULL, a one-line explanation in why[0..whylen). Free with
 * remora_close(). */
int remora_open(pid_t pid, unsigned flags, remora_t **out, char *why, size_t whylen);

/* The same for an ELF core file of a Python process (gcore, or the kernel's): 'exe' (or
 * NULL) the executable it is of, 'root' (or NULL) the directory the process saw as "/"
 * (a chroot, a container). REMORA_ENOPROC: no such file. */
int remora_open_core(const char *core, const char *exe, const char *root, unsigned flags,
                     remora_t **out, char *why, size_t whylen);

/* Frees the handle and everything it returned. NULL is allowed. */
void remora_close(remora_t *r);

/* The pid of the target (a core: the pid it records). */
pid_t remora_pid(const remora_t *r);

/* The target's Python version ("3.12.1"), and its minor number (12). */
const char *remora_python_version(const remora_t *r);
int remora_python_minor(const remora_t *r);

/* One line saying what the last failing call on r failed on, or "" after a success. Valid
 * until the next call on r. */
const char *remora_last_error(const remora_t *r);

/* How many times remora_read() reads the threads again while one of them moved under the
 * read (default 64: a dump; 0: take each reading as it is, as a profiler does, with such
 * threads marked partial). */
void remora_set_tries(remora_t *r, unsigned tries);

/* ---- every thread's stack --------------------------------------------------------- */

/* A frame. Locations hold what the target's version has: columns and end lines from
 * 3.11 on; before, end_line is the line and the columns are -1. */
enum remora_frame_kind {
    REMORA_FRAME_PYTHON = 0,
    REMORA_FRAME_NATIVE = 1,    /* a C frame (REMORA_NATIVE); file: its source file or its
                                 * module ("libc.so.6+0x1234"), line 0 when unknown */
    REMORA_FRAME_GC = 2,        /* "<GC>" (REMORA_GC) */
    REMORA_FRAME_ENTRY = 3,     /* "<native>", file "~" (REMORA_ENTRY_MARKS): C code called
                                 * the Python frame before it (the one inside) */
};

typedef struct remora_frame {
    const char *function;       /* qualified name (3.11+; before, the name) */
    const char *file;           /* co_filename, as the target has it */
    int line;                   /* 0 when the code has no line for the instruction */
    int end_line;               /* -1 when unknown */
    int column;                 /* 0-based, in UTF-8 bytes; -1 when unknown */
    int end_column;             /* -1 when unknown */
    const char *opname;         /* REMORA_OPCODES, a Python frame: the instruction it is at
                                 * ("CALL"; specialised forms as the target runs them),
                                 * else NULL */
    int opcode;                 /* ... its number in the target's version, else -1 */
    int offset;                 /* ... its byte offset in the bytecode, else -1 */
    int kind;                   /* enum remora_frame_kind */
} remora_frame_t;

/* A thread's status bits (the values are CPython's _remote_debugging's THREAD_STATUS_*). */
#define REMORA_THREAD_HAS_GIL       0x01u
#define REMORA_THREAD_ON_CPU        0x02u   /* REMORA_STATUS: running or runnable */
#define REMORA_THREAD_UNKNOWN       0x04u   /* whether it is on a CPU was not read */
#define REMORA_THREAD_GIL_REQUESTED 0x08u   /* waiting for the GIL: 3.15 targets only
                                             * (tstate->gil_requested), never before */
#define REMORA_THREAD_HAS_EXCEPTION 0x10u   /* REMORA_STATUS: inside an except block */
#define REMORA_THREAD_MAIN          0x20u   /* its interpreter's main thread */

typedef struct remora_thread {
    pid_t native_id;            /* the kernel's thread id (0 when unknown) */
    uint64_t ident;             /* threading.get_ident() (its pthread_t; 0 when unknown) */
    int64_t interpreter_id;     /* 0: the main interpreter */
    unsigned status;            /* REMORA_THREAD_* bits */
    int gc;                     /* its interpreter is collecting garbage (REMORA_GC,
                                 * REMORA_STATUS) */
    const char *name;           /* REMORA_THREAD_NAMES: threading's name, else the comm,
                                 * else NULL */
    int error;                  /* REMORA_E* when its stack could not be read (no frames) */
    int partial;                /* its innermost frames kept moving while they were read:
                                 * frames[] holds the outer frames that held still */
    uint64_t task_id;           /* REMORA_RUNNING_TASK: its running task (remora_task_t.id),
                                 * else 0 */
    size_t nframes;
    const remora_frame_t *frames;   /* innermost first */
} remora_thread_t;

/* Reads every thread's stack (those 'flags' select), interpreter after interpreter. The
 * unchanged part of a thread's stack is reused from the last call (a thread that has not
 * run since is not walked again), so calling it in a loop is the way to sample. The array
 * and everything it points to belong to r, valid until the next remora_read(),
 * remora_tasks() or remora_close() on it. Returns REMORA_OK (a thread whose stack could
 * not be read has 'error' set), REMORA_ENOPROC (the process exited), or another code when
 * the thread list itself could not be read. */
int remora_read(remora_t *r, const remora_thread_t **threads, size_t *n);

/* ---- asyncio tasks ---------------------------------------------------------------- */

typedef struct remora_task {
    uint64_t id;                /* the task object's address in the target */
    const char *name;           /* Task.get_name() */
    pid_t thread;               /* the native id of the thread running its event loop now
                                 * (0: none does) */
    int running;                /* that thread's current task */
    size_t nframes;
    const remora_frame_t *frames;   /* its coroutine stack, innermost first */
    size_t nawaited_by;
    const uint64_t *awaited_by; /* ids of the tasks awaiting it */
} remora_task_t;

/* Reads every asyncio task of every event loop in the target (it reads the threads too:
 * the arrays of an earlier remora_read() are invalid after it). At most 100,000 tasks.
 * Valid until the next remora_read(), remora_tasks() or remora_close(). Returns REMORA_OK
 * (no asyncio: *n = 0), REMORA_ECORRUPT (the task list kept changing), REMORA_EVERSION,
 * REMORA_ENOPROC, REMORA_ENOMEM. */
int remora_tasks(remora_t *r, const remora_task_t **tasks, size_t *n);

/* ---- statistics ------------------------------------------------------------------- */

typedef struct remora_stats {
    uint64_t reads;             /* remora_read() calls that succeeded */
    uint64_t thread_samples;    /* threads read, in all */
    uint64_t reused;            /* ... of them served whole from the last reading (a thread
                                 * that had not run since) */
    uint64_t partial;           /* ... whose innermost frames moved while read */
    uint64_t syscalls;          /* system calls made to read the target's memory */
    uint64_t bytes;             /* bytes read from it */
} remora_stats_t;

/* What r has done since it was opened. */
void remora_get_stats(const remora_t *r, remora_stats_t *out);

/* ---- sampling --------------------------------------------------------------------- */

/* Which threads' samples are kept (the command's --mode). In each mode a thread neither
 * on a CPU nor holding the GIL (idle) is left out unless remora_sample_opts_t.idle. */
enum remora_mode {
    REMORA_MODE_WALL = 0,       /* every thread */
    REMORA_MODE_CPU,            /* threads on a CPU */
    REMORA_MODE_GIL,            /* the thread holding the GIL */
    REMORA_MODE_EXCEPTION,      /* threads handling an exception */
};

/* Which engine reads the stacks (the command's --engine; docs/cli.md "Engines"). */
enum remora_engine {
    REMORA_ENGINE_AUTO = 0,     /* the kernel engine where it can be had, else user space */
    REMORA_ENGINE_KERNEL,       /* BPF: a running thread's stack read in the kernel at each
                                 * tick of its CPU time (needs CAP_BPF and CAP_PERFMON, or
                                 * root); threads off a CPU from user space */
    REMORA_ENGINE_USER,         /* every thread read from user space */
};

/* How remora_sample() samples (the command's options of the same names). Start from
 * remora_sample_opts_init(); unknown values are refused with REMORA_EUSAGE. */
typedef struct remora_sample_opts {
    double rate_hz;             /* rounds a second (default 100; at most 100,000) */
    double duration_s;          /* stop after this long (0: until stopped or the target exits) */
    uint64_t max_rounds;        /* stop after this many rounds (0: no limit) */
    int mode;                   /* enum remora_mode (default wall) */
    int engine;                 /* enum remora_engine (default auto) */
    int idle;                   /* keep idle threads' samples (not with REMORA_MODE_CPU) */
    int gc;                     /* a "<GC>" frame innermost while the thread collects
                                 * garbage (default 1) */
    int opcodes;                /* the innermost frame's instruction (opname, offset) */
    int async;                  /* a thread running an asyncio task sampled as the task's
                                 * awaiter chain (user space engine) */
    int blocking;               /* hold the target still (ptrace) while it is read (user
                                 * space engine; implied by a handle opened REMORA_NATIVE) */
    int function;               /* one frame per function, at its first line */
    int reserved[8];            /* 0 */
} remora_sample_opts_t;

/* One thread's sample. It and what it points to are valid during the callback only. */
typedef struct remora_sample {
    int64_t time_ns;            /* when it was read, in ns since sampling began (a kernel
                                 * engine's sample: the tick's instant) */
    uint64_t round;             /* the round it belongs to, from 1 */
    unsigned periods;           /* the sampling periods it stands for (1; more for a thread
                                 * off a CPU the kernel engine's rounds looked at less often,
                                 * its stack unchanged since) */
    pid_t native_id;            /* the kernel's thread id (0: an asyncio task no thread runs) */
    uint64_t ident;             /* threading.get_ident() (0 when unknown) */
    int64_t interpreter_id;
    unsigned status;            /* REMORA_THREAD_* bits: HAS_GIL, MAIN, ON_CPU (or UNKNOWN
                                 * with idle threads kept in wall mode), HAS_EXCEPTION (in
                                 * exception mode), GIL_REQUESTED (3.15 targets) */
    const char *thread_name;    /* threading's name, else the kernel's comm ("" unknown) */
    int kernel;                 /* read by the kernel engine at a tick */
    int partial;                /* its innermost frames moved while read: frames[] holds the
                                 * outer frames that held still */
    uint64_t task_id;           /* async: the task whose awaiter chain frames[] is, else 0 */
    size_t nframes;
    const remora_frame_t *frames;   /* innermost first; a sampled frame has its line (end
                                 * line and columns -1, opcode -1) */
} remora_sample_t;

/* The callback: 0 to go on, anything else to stop sampling (remora_sample() then returns
 * REMORA_OK). */
typedef int (*remora_sample_cb)(void *ctx, const remora_sample_t *s);

/* The defaults: 100 Hz, wall mode, engine auto, idle threads left out, <GC> frames. */
void remora_sample_opts_init(remora_sample_opts_t *o);

/* Samples r's target as the remora command does (its sampling loop and engines), calling
 * cb for every thread sample kept, until the duration or max_rounds ends, cb returns
 * nonzero, remora_sample_stop(r) is called, or the target exits. Rounds run on absolute
 * deadlines; one that cannot start on time is skipped, not squeezed in. The handle's
 * REMORA_MAIN_THREAD, REMORA_NATIVE and REMORA_FRAME_ANCHOR apply; its other read flags
 * do not (o says what is kept). A warm round allocates nothing. Returns REMORA_OK, or
 * REMORA_ENOPROC when the target exited (what was sampled was given to cb), REMORA_EUSAGE
 * (bad options; the kernel engine asked for with an option it cannot serve), REMORA_EPERM
 * (the kernel engine asked for and not allowed, or blocking not allowed), REMORA_EVERSION,
 * REMORA_ENOMEM; remora_last_error() says which. Not on a core file (REMORA_EUSAGE). */
int remora_sample(remora_t *r, const remora_sample_opts_t *o, remora_sample_cb cb, void *ctx);

/* Ends the remora_sample() under way on r after the current round: from the callback,
 * a signal handler or another thread. */
void remora_sample_stop(remora_t *r);

/* What the last remora_sample() on r did. */
typedef struct remora_sample_stats {
    uint64_t rounds;            /* sampling rounds taken */
    uint64_t samples;           /* thread samples given to the callback */
    uint64_t late;              /* rounds skipped: remora fell behind */
    uint64_t errors;            /* thread stacks that could not be read */
    uint64_t kernel;            /* samples the kernel engine read */
    int64_t duration_ns;        /* from the first round to the end */
} remora_sample_stats_t;
void remora_get_sample_stats(const remora_t *r, remora_sample_stats_t *out);

/* The engine the last remora_sample() on r ran ("kernel" or "user"; NULL before one), and
 * when *why_not is not NULL, one line saying why it was not the kernel engine ("" when it
 * was): the option that needs user space, or what refused the kernel engine. */
const char *remora_engine(const remora_t *r, const char **why_not);

/* Its caches and batched reads since it was opened (API 0.2). */
typedef struct remora_cache_stats {
    uint64_t threads;           /* threads of the readings' results, in all (a reading may
                                 * try again: remora_stats_t counts every try) */
    uint64_t threads_kept;      /* ... served whole from the last reading, nothing read */
    uint64_t frames;            /* their Python frames, in all */
    uint64_t frames_kept;       /* ... of the threads served whole */
    uint64_t code_hits;         /* code objects of a reading found in the cache, still the
                                 * same object (each distinct one once a reading) */
    uint64_t code_misses;       /* ... read from the target: not cached, or stale */
    uint64_t code_stale;        /* ... of those, cached but another object there since */
    uint64_t vectored;          /* vectored reads (one system call for a batch of ranges) */
    uint64_t vectored_ok;       /* ... that read every range whole */
    uint64_t segments;          /* the ranges they asked for */
    uint64_t segments_done;     /* ... read whole */
} remora_cache_stats_t;

void remora_get_cache_stats(const remora_t *r, remora_cache_stats_t *out);

#ifdef __cplusplus
}
#endif

#endif
