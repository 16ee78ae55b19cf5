/* kern/ — the in-kernel engine: BPF programs that read a running thread's Python stack at
 * the timer interrupt (--mode memory: at a page fault it takes), on the interrupted
 * thread's own CPU (the thread is still while they read), and keep every target thread's on/off-CPU state where user space reads it
 * without a system call.
 *
 * Which file does what: docs/layout.md.
 *
 * Nothing here knows CPython's structs: the caller hands over a kern_layout_t of plain
 * offsets; frames come back as the raw words that name them (code object, instruction,
 * a fingerprint of the code object read at the same instant), to be named in user space
 * by the unwinder's code-object cache. Never prints: REMORA_E* codes, and a reason text.
 */
#ifndef REMORA_KERN_H
#define REMORA_KERN_H

#ifndef __bpf__                     /* the BPF side (remora.bpf.c) brings its own types */
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#endif

#define KERN_MAX_FRAMES 512         /* frames walked per sample; deeper: KERN_S_CUT */
#define KERN_MIN_PERIOD_NS 10000    /* the kernel's shortest cpu-clock period (100 kHz a CPU):
                                     * a faster rate has ticks this far apart */
#define KERN_EXC_ITEMS 64           /* exception-stack items walked per tick (the user
                                     * engine's UNW_MAX_EXC_ITEMS) */
#define KERN_MAX_PROCS 64           /* target processes at once (--subprocesses) */
#define KERN_FP_WORDS 8             /* u64 words of a code object's fingerprint span, at most */
#define KERN_FP_STR_DATA 32         /* before 3.12: bytes of each str's characters mixed in */
#define KERN_FP_STR_WORDS (2 + KERN_FP_STR_DATA / 8)   /* a str's words: length, hash, data */
#define KERN_NAME_IMG 256           /* bytes of a str object's image a walk ships (kern_named_t,
                                     * kern_task_t) */

/* How to walk one interpreter's frames: plain byte offsets, every one checked by the BPF
 * side against the size of what it read. */
enum kern_frames_kind {
    KERN_FRAMES_OBJECTS = 0,        /* 3.9/3.10: tstate->frame, PyFrameObject via f_back */
    KERN_FRAMES_CFRAME = 1,         /* 3.11/3.12: tstate->cframe->current_frame */
    KERN_FRAMES_DIRECT = 2,         /* 3.13+: tstate->current_frame */
};

typedef struct kern_layout {
    uint32_t frames_kind;           /* enum kern_frames_kind */
    uint32_t ts_frame;              /* offset in the thread state of frame / cframe / current_frame */
    uint32_t cframe_current_frame;  /* 3.11/3.12: _PyCFrame.current_frame */
    uint32_t fr_size;               /* bytes of a frame header holding every field below (<= 128) */
    uint32_t fr_previous;           /* f_back (3.9/10), previous (3.11+) */
    uint32_t fr_code;               /* f_code, f_executable (3.13+) */
    uint32_t fr_instr;              /* f_lasti, an int (3.9/10); prev_instr / instr_ptr, a pointer */
    uint32_t fr_owner;              /* 3.11+: owner (a byte); 0 = none */
    uint32_t owner_shim;            /* owner >= this: a C-owned shim frame; 0 = no owner field */
    uint32_t fr_is_entry;           /* 3.11: is_entry (a byte); 0 = none */
    uint32_t fr_funcobj;            /* 3.13+: f_funcobj; 0 = none */
    uint64_t none_addr;             /* 3.13+: _Py_NoneStruct: f_funcobj & ~7 == it marks an
                                     * interpreter trampoline (a shim too); 0 = none */
    uint32_t tagged_executable;     /* 3.14+: mask the low 2 bits of the code word */
    uint32_t fp_off, fp_len;        /* the code object's fingerprint span (code.c's
                                     * code_fp_span): offset and bytes (<= 8 * KERN_FP_WORDS) */
    uint32_t co_name, co_filename;  /* before 3.12 (str_hash set): where the code object keeps
                                     * its name and file str pointers */
    uint32_t str_hash;              /* before 3.12: offset of a str object's hash (PyASCIIObject
                                     * .hash); the length is the word before it; 0 = none */
    uint32_t str_data;              /* ... and where a compact ASCII str's characters start
                                     * (sizeof(PyASCIIObject)): the first KERN_FP_STR_DATA
                                     * bytes from there (fewer for a shorter str) count too */
    uint32_t owner_gen;             /* 3.11+: 1 + the owner value of a generator's frame; 0 = none */
    uint32_t fr_gen;                /* 3.9/3.10: f_gen (a pointer: set in a generator's frame); 0 = none */
    /* the interpreter's GC and GIL state at the tick (KERN_S_GC, KERN_S_GIL): */
    uint32_t ts_interp;             /* the thread state's interp pointer; 0 = not read */
    uint32_t is_gc_collecting;      /* gc.collecting (an int) in the interpreter state */
    uint32_t gil_in_interp;         /* 3.12+: the GIL state is at *(interp + is_gil_ptr) */
    uint32_t is_gil_ptr;
    uint32_t gil_locked, gil_holder;/* locked (an int) and last_holder in the GIL state */
    uint64_t runtime;               /* before 3.12: the GIL state's base (_PyRuntime) */
    uint32_t ts_gil_requested;      /* 3.15: gil_requested (an int) in the thread state, read
                                     * when it does not hold the GIL (KERN_S_GIL_REQ); 0 = none */
    /* the exception state wanted (exc_on: --mode exception, top's header): whether the
     * thread is handling an exception at the tick
     * (KERN_S_EXC), as sys.exc_info() decides it: from the item at ts_exc_info along
     * ei_previous, the first whose ei_exc is neither NULL nor exc_none */
    uint32_t exc_on;                /* read at all: 0 where it is not wanted (no cost) */
    uint32_t ts_exc_info;
    uint32_t ei_exc, ei_previous;
    uint32_t switch_gap_ns;         /* a thread's frames walked as it leaves a CPU (KERN_S_SWITCH:
                                     * its stack off the CPU until its next switch-in): at
                                     * each preemption, at most once this often as it goes
                                     * to sleep; 0 = never (no ticks of time) */
    uint64_t exc_none;              /* _Py_NoneStruct's address */
    /* 3.12+: a counter bumped whenever a code object is made (3.12, 3.13) or freed
     * (3.14+): read at each tick; while it is gen_hint, user space has proof enough and
     * the frames go without fingerprints (KERN_S_GEN) */
    uint64_t gen_addr;              /* its address; 0 = none */
    uint32_t gen_size;              /* 4 or 8 bytes */
    uint32_t self_tgid;             /* remora's own process: a switch to it (its wake-up for a
                                     * round, which leaves the thread it preempted to its
                                     * ticks) walks nothing, marked by_self in the table */
    uint32_t native_stack;          /* --native: bytes of the thread's user stack copied at
                                     * each tick with its user registers (a record of its own
                                     * before the tick's, KERN_S_NATIVE), a multiple of 4096,
                                     * KERN_NATIVE_MAX at most; 0 = none (no cost) */
    uint32_t gil_pair;              /* 1: last_holder and locked lie in one aligned 16 bytes
                                     * from min(gil_holder, gil_locked), read at once */
    uint64_t gen_hint;
    /* a frame whose code object user space has not proved (not in the known map with the
     * fingerprint read, KERN_NAMED of them a tick at most) goes with its names as the tick
     * read them (kern_named_t): a code object freed before user space could read it is
     * named anyway */
    uint32_t nm_on;                 /* 0: never */
    uint32_t nm_name;               /* co_qualname (3.11+) or co_name: a str pointer */
    uint32_t nm_file;               /* co_filename */
    uint32_t nm_firstlineno;        /* co_firstlineno, an int */
    uint32_t pad3;
    uint64_t interp;                /* the process's one interpreter state, every thread's
                                     * interp (read at each tick otherwise); 0 = read it */
    /* --async: the thread's running task as the tick finds it (KERN_S_TASK, kern_task_t),
     * so that a task that runs and ends between two drains is named all the same */
    uint32_t rt_kind;               /* enum kern_rt_kind; 0 = not read (no cost) */
    uint32_t rt_ts;                 /* KERN_RT_TSTATE: asyncio_running_task in the thread state */
    uint64_t rt_dict;               /* KERN_RT_DICT: asyncio's _current_tasks {loop: task} */
    uint32_t rt_ma_keys;            /* ... PyDictObject.ma_keys */
    uint32_t rt_dk_sized;           /* ... 1: dk_size (ssize) at 8 (3.9/3.10); 0: the u8
                                     * dk_log2_index_bytes at 9 (3.11+) */
    uint32_t rt_dk_nentries;        /* ... dk_nentries (24, or 32 on 3.9/3.10) */
    uint32_t rt_dk_hdr;             /* ... where dk_indices begin (<= 40); the 24-byte
                                     * entries (hash, key, value) follow them */
    uint32_t rt_task_coro, rt_task_name;    /* the C task's coroutine and name */
    uint32_t rt_gen_frame;          /* 3.9/3.10: the coroutine's gi_frame (a pointer) */
    uint32_t rt_gen_iframe;         /* 3.11+: its embedded frame's offset */
    uint32_t rt_task_aw;            /* 3.14+: the task's awaited_by (0 = not read), */
    uint32_t rt_task_aw_is_set;     /* ... and awaited_by_is_set (a byte) */
} kern_layout_t;

enum kern_rt_kind {
    KERN_RT_NONE = 0,
    KERN_RT_TSTATE = 1,             /* 3.14+: one pointer in the thread state */
    KERN_RT_DICT = 2,               /* 3.9-3.13: the newest entry of _current_tasks (its
                                     * running loop's: entries are appended, a task
                                     * leaving deletes its own) */
};

/* The running task a tick read (KERN_S_TASK records carry one after their named frames):
 * the task object, its coroutine, the coroutine's frame and its name object's first bytes
 * (a str, or 3.13+'s int N of "Task-N"), read at the tick: the task may be gone by the
 * drain. */
typedef struct kern_task {
    uint64_t task, coro, frame;
    uint64_t aw;                    /* layout rt_task_aw (3.14+): its awaited_by word */
    uint32_t aw_is_set;             /* ... and awaited_by_is_set (1: a set of them) */
    uint32_t name_len;              /* bytes of name read (0: none) */
    unsigned char name[KERN_NAME_IMG];
} kern_task_t;

/* One frame as the BPF side saw it. */
#define KERN_F_SHIM 1u              /* a C-owned shim or trampoline (not a Python frame) */
#define KERN_F_ENTRY 2u             /* 3.11: is_entry set */
#define KERN_F_GEN 4u               /* a generator's or coroutine's frame (owner_gen, fr_gen) */
typedef struct kern_frame {
    uint64_t addr;                  /* the frame's address */
    uint64_t code;                  /* its code object (tag bits masked) */
    uint64_t instr;                 /* f_lasti (3.9/3.10, zero-extended) or the instruction pointer */
    uint64_t fp;                    /* kern_fp_mix() of the code object's span (and before
                                     * 3.12 of its name's and file's length and hash), read at
                                     * the same instant; 0 for a shim */
    uint32_t flags;                 /* KERN_F_* */
    uint32_t pad;
} kern_frame_t;

/* The names of a frame's code object as the walk read them (KERN_S_* records carry
 * nnamed of them after the frames): each str object's first KERN_NAME_IMG bytes from its
 * start (fewer near the end of a page), parsed by user space as a str it read itself. */
#define KERN_NAMED 4                /* frames named a walk, at most */
typedef struct kern_named {
    uint32_t frame;                 /* its index in frames[] */
    int32_t firstlineno;
    uint32_t name_len, file_len;    /* bytes of each image read (0: none) */
    unsigned char name[KERN_NAME_IMG];
    unsigned char file[KERN_NAME_IMG];
} kern_named_t;

/* One sample of a running thread, taken at the timer interrupt. */
#define KERN_S_CUT 1u               /* deeper than KERN_MAX_FRAMES: the outermost were cut */
#define KERN_S_FAULT 2u             /* a read failed (a page not present): frames[] holds the
                                     * innermost frames read before it; the caller falls back */
#define KERN_S_NOSTATE 4u           /* the thread's tid has no thread state in the map */
#define KERN_S_GC 8u                /* its interpreter was collecting garbage */
#define KERN_S_GIL 16u              /* it held the GIL */
#define KERN_GEN_NONE UINT64_MAX    /* a gen_hint no counter reads: every tick fingerprinted */
#define KERN_S_GEN 32u              /* the code-object counter was the layout's gen_hint:
                                     * the frames carry no fingerprint (fp 0) */
#define KERN_S_GIL_REQ 64u          /* it was waiting for the GIL (3.15's gil_requested) */
#define KERN_S_EXC 128u             /* exc_on: it was handling an exception */
#define KERN_S_EXC_UNKNOWN 256u     /* exc_on: its exception state could not be read (a read
                                     * failed, or a chain longer than KERN_EXC_ITEMS) */
#define KERN_S_SWITCH 512u          /* not a tick: the stack the thread left a CPU with, at
                                     * t_ns, its switch's time (the table's since_ns); the
                                     * frames carry fingerprints and no status is read */
#define KERN_S_NATIVE 1024u         /* not a tick: the user registers and stack copy of the
                                     * tick that follows it in the ring (kern.c pairs them:
                                     * kern_sample_t.native) */
#define KERN_S_TASK 2048u           /* --async (layout rt_kind): a kern_task_t follows the
                                     * named frames */
#define KERN_NATIVE_MAX (32u << 10) /* bytes of a tick's user stack copy, at most */
#define KERN_NATIVE_REGS 17         /* x86_64 registers in DWARF's numbering (proc.h's
                                     * PROC_NREGS): rax rdx rcx rbx rsi rdi rbp rsp r8-r15 rip */

/* A tick's user context (layout native_stack): the registers the thread was interrupted
 * with in user mode (its registers at its system call's entry, if it was in one) and the
 * bytes of its stack from the start of the stack pointer's page upward, up to the first
 * page that could not be read (a page not present, the mapping's end) or native_stack. */
typedef struct kern_native {
    uint64_t regs[KERN_NATIVE_REGS];
    uint64_t lo;                    /* the address stack[0] was read from */
    uint32_t len;                   /* bytes copied (0: none could be) */
    uint32_t has_ts_frame;          /* ts_frame was read */
    uint64_t ts_frame;              /* the word at the thread state's ts_frame offset at the
                                     * tick (3.11: its _PyCFrame, on the C stack: where the
                                     * merge places each eval loop's frames) */
    const unsigned char *stack;
} kern_native_t;

typedef struct kern_sample {
    pid_t pid, tid;
    uint64_t t_ns;                  /* CLOCK_MONOTONIC */
    uint64_t tstate;                /* the thread state walked from */
    uint64_t gen;                   /* the code-object counter at the tick (0: none read) */
    uint32_t flags;                 /* KERN_S_* */
    uint32_t nframes;
    const kern_frame_t *frames;     /* innermost first; valid during the callback */
    uint32_t nnamed;
    const kern_named_t *named;      /* frames the walk named itself; valid during the callback */
    const kern_task_t *task;        /* KERN_S_TASK: its running task as the tick read it, else
                                     * NULL; valid during the callback */
    const kern_native_t *native;    /* the tick's user context (layout native_stack), or NULL
                                     * (not asked for, or its record lost); valid during the
                                     * callback */
} kern_sample_t;

/* A thread's scheduling state, as the sched_switch program last wrote it. */
typedef struct kern_tstate {
    int known;                      /* the table has the thread (it was switched at least once
                                     * since the engine started, and its slot is its own) */
    int on_cpu;                     /* running now */
    int runnable;                   /* off a CPU but runnable (preempted): /proc's 'R' */
    uint64_t run_ns;                /* CPU time while the engine watched, switched-out parts
                                     * only (a thread on a CPU now adds since its switch-in) */
    uint64_t since_ns;              /* CLOCK_MONOTONIC of its last switch in or out */
    int cpu;                        /* ... on this CPU */
    int by_self;                    /* preempted by remora's own process (self_tgid) */
    uint64_t switches;              /* switches in and out seen */
    uint64_t tick_cpu;              /* its CPU time, as run_ns, at its last tick (0: none) */
    /* The slot as read, whoever's it is: every write to it (a switch or a tick of any
     * thread of that slot) changes its sequence count and its time. A thread whose
     * slot still reads the same has not been switched since (kernel.c's idle test). */
    int slot_read;                  /* 0: no consistent reading (a writer kept it busy) */
    uint32_t slot_seq, slot_tid;
    uint64_t slot_ns;
} kern_tstate_t;

typedef struct kern kern_t;

/* Loads the programs: the sched_switch program at once; with rate_hz > 0 the frame walker,
 * which runs on a task-clock event of each thread given to kern_set_thread, every 1/rate_hz
 * seconds of that thread's CPU time (at least KERN_MIN_PERIOD_NS). Returns 0, or
 * REMORA_EPERM (no CAP_BPF / CAP_PERFMON, or BPF disabled), REMORA_EVERSION (the kernel
 * lacks something needed), REMORA_ENOMEM; 'why' (may be NULL) then holds one line saying
 * what failed (e.g. "bpf(BPF_PROG_LOAD): Operation not permitted"). */
int kern_open(double rate_hz, kern_t **out, char *why, size_t whylen);

/* The same, with room in the ring for ticks that copy their user stack (--native: a
 * layout's native_stack; KERN_RING_NATIVE_BYTES in place of KERN_RING_BYTES). */
int kern_open_native(double rate_hz, kern_t **out, char *why, size_t whylen);

/* --mode memory: the same engine, its frame walker run at every faults'th page fault a
 * target thread takes (a software page-faults event of the thread: in its own context,
 * at the instant its memory grows) in place of the task-clock ticks. kern_period_ns()
 * then says KERN_FAULT_NOMINAL_NS. Returns as kern_open. */
#define KERN_FAULT_NOMINAL_NS 1000000   /* what a round stands for beside fault ticks:
                                         * nothing is weighed by it in memory mode */
int kern_open_faults(uint64_t faults, kern_t **out, char *why, size_t whylen);

/* The page faults between two walks (kern_open_faults), 0 for a time engine. */
uint64_t kern_fault_period(const kern_t *k);
void kern_close(kern_t *k);

/* The ticks' period (of a thread's CPU time), in ns; 0 without the frame walker. */
uint64_t kern_period_ns(const kern_t *k);

/* Adds a target process with its layout, or gives one added a new layout (a system call;
 * at most KERN_MAX_PROCS). The frame walker samples only threads of processes added.
 * Returns 0, REMORA_ENOMEM. */
int kern_add_process(kern_t *k, pid_t pid, const kern_layout_t *lay);
void kern_remove_process(kern_t *k, pid_t pid);

/* Says which thread state the thread 'tid' of 'pid' runs on, and samples it from then on
 * (its task-clock event: system calls; call it when the thread list changed, not per
 * sample); tstate 0 forgets it. Returns 0, REMORA_ENOPROC (no such thread), REMORA_ENOMEM
 * (too many threads), REMORA_EPERM or REMORA_EVERSION (its event could not be made): the
 * thread is then not sampled in the kernel. */
int kern_set_thread(kern_t *k, pid_t pid, pid_t tid, uint64_t tstate);

/* The thread's scheduling state, read from a memory-mapped table: no system call. */
void kern_thread_state(const kern_t *k, pid_t tid, kern_tstate_t *out);

/* Turns every thread's event off (1: no ticks, no cost in the target) or on again (0);
 * events made meanwhile are made off. */
void kern_pause(kern_t *k, int paused);

/* Empties the ring buffer unread. */
void kern_discard(kern_t *k);

/* Waits (spinning, wait_ns at most in all, times from now()) until every walk of a tick
 * under way on a CPU when called has put its record in the ring: then every tick taken
 * before the call is there for kern_poll. No system call. Returns how many CPUs were
 * still walking when the wait ran out (0: all settled). */
int kern_settle(const kern_t *k, int64_t (*now)(void), int64_t wait_ns);

/* Hands every sample waiting in the ring buffer to cb, oldest first (no system call when
 * none waits). cb returns 0 to go on, else that code ends the call and is returned.
 * Returns 0 or cb's code. */
int kern_poll(kern_t *k, int (*cb)(void *ctx, const kern_sample_t *s), void *ctx);

/* The same for the stacks walked as target threads left a CPU (KERN_S_SWITCH), which
 * have a ring of their own: read whenever a round wants them, apart from the ticks (whose
 * order is the recording's). */
int kern_poll_switch(kern_t *k, int (*cb)(void *ctx, const kern_sample_t *s), void *ctx);

/* Tells the walker that the code object at 'code' with fingerprint 'fp' is one user space
 * has named (its frames then go without their names). Returns 0, or REMORA_EFAULT when
 * the map refused it (the walker keeps naming that one: no harm). */
int kern_known(kern_t *k, uint64_t code, uint64_t fp);

/* What the engine has done: the kernel's own counts. */
typedef struct kern_stats {
    uint64_t ticks;                 /* timer interrupts that found a target thread on the CPU */
    uint64_t samples;               /* ... that reached user space */
    uint64_t dropped;               /* ... lost: the ring buffer was full */
    uint64_t faults;                /* samples with KERN_S_FAULT */
    uint64_t nostate;               /* samples with KERN_S_NOSTATE */
    uint64_t run_ns;                /* the BPF programs' own run time (kernel.bpf_stats_enabled;
                                     * 0 when it is off) */
    uint64_t run_cnt;               /* ... and their runs */
    uint64_t tick_ns, tick_cnt;     /* ... of them the frame walker's */
    uint64_t switch_walks;          /* stacks walked at a switch-out that reached user space */
} kern_stats_t;
void kern_get_stats(const kern_t *k, kern_stats_t *out);

/* The fingerprint mix, the same on both sides, over 'n' u64 words: the span's fp_len bytes
 * zero-padded to whole words ((fp_len + 7) / 8 words), then, when str_hash is set, for the
 * name str and then the file str KERN_FP_STR_WORDS more: its length, its hash (-1 until
 * something hashed it: no help alone) and the min(length, KERN_FP_STR_DATA) bytes at
 * str_data, zero-padded (the characters of an ASCII str; inside the header and data of
 * any other, which is at least as long). */
static inline uint64_t kern_fp_mix(const uint64_t *w, unsigned n)
{
    uint64_t h = 0x9e3779b97f4a7c15ull;
    unsigned i;

    for (i = 0; i < n; i++) {
        h ^= w[i];
        h *= 0xbf58476d1ce4e5b9ull;
        h ^= h >> 31;
    }
    return h | 1;                   /* never 0: 0 marks a shim */
}

#endif
