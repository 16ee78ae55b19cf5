/* kern/kern_bpf.h — what the BPF programs (remora.bpf.c) and the loader (kern.c) share:
 * the map sizes, the thread-state table's entry, the per-CPU counters and the ring
 * buffer's record. Included by both sides; kern.h's types come with it.
 */
#ifndef REMORA_KERN_BPF_H
#define REMORA_KERN_BPF_H

#ifdef __bpf__
typedef __u8 uint8_t;
typedef __u32 uint32_t;
typedef __s32 int32_t;
typedef __u64 uint64_t;
typedef __s64 int64_t;
typedef int pid_t;
typedef __u64 size_t;
typedef _Bool bool;
#endif
#include "kern.h"

#define KERN_TS_SLOTS 65536         /* thread-state table entries: slot = tid & (N - 1) */
#define KERN_THREADS 16384          /* (pid, tid) -> thread state entries, all processes */
#define KERN_RING_BYTES (4u << 20)  /* the ring buffer: a power of 2 pages */
#define KERN_RING_NATIVE_BYTES (32u << 20)  /* the ring with --native: each tick's user stack
                                             * record is a fixed ~33 KB (a reservation's
                                             * size is a constant): room for ~1000, half a
                                             * second of two CPUs at 1 kHz between drains */
#define KERN_SWRING_NATIVE_BYTES (16u << 20)    /* ... with --native: a switch-out's user
                                                 * stack record too (~500 of them) */
#define KERN_SWRING_BYTES (2u << 20)    /* the switch-out walks' own ring (KERN_S_SWITCH), read
                                         * apart from the ticks' at any time */
#define KERN_MAX_CPUS 1024          /* CPUs whose walks user space waits out (walking[]) */
#define KERN_FRAME_BUF 128          /* bytes of a frame header at most (fr_size) */
#define KERN_WIN 4096               /* bytes of a stack read at once (3.11+: the frames below
                                     * the one read, in their chunk, come with it) */
#define KERN_FP_MAX (KERN_FP_WORDS + 2 * KERN_FP_STR_WORDS) /* a fingerprint's words: span,
                                                             * then 2 x (len, hash, data) */

/* One thread's slot of the table, written by the sched_switch program on the CPU the
 * thread switches on (one CPU at a time for one thread), read by user space through the
 * mmap. seq is odd while a write is under way (user space retries). */
struct kern_ts_ent {
    uint32_t seq;
    uint32_t tid;                   /* whose slot it is now (0: nobody's yet) */
    uint32_t on_cpu;
    uint32_t runnable;
    uint32_t cpu;                   /* the CPU of its last switch in or out */
    uint32_t by_self;               /* off its CPU since remora's own process took that CPU
                                     * (the layout's self_tgid): no switch-out walk then */
    uint64_t run_ns;                /* on-CPU time of finished stints */
    uint64_t since_ns;              /* bpf_ktime_get_ns() of the last switch in or out */
    uint64_t switches;
    uint64_t tick_cpu;              /* its CPU time (run_ns and its stint so far) at its last
                                     * tick (outside seq: one aligned store by the thread's
                                     * own CPU) */
    uint64_t walk_ns;               /* the time of its last walk at a switch-out (outside seq,
                                     * as tick_cpu; kept for the layout's switch_gap_ns) */
};

/* walking[cpu], a CPU's walk of a target thread's tick: odd from the tick's start until its
 * record is in the ring, read by user space through the mmap (kern_settle) so that a round
 * begins only once every tick taken before it is in the ring. */
struct kern_walking {
    uint32_t seq;
    uint32_t pad;                   /* an array map's values lie 8 bytes apart at least */
};

/* The per-CPU counters (one entry); kern_get_stats sums them. */
struct kern_counts {
    uint64_t ticks, samples, dropped, faults, nostate;
    uint64_t switch_walks;          /* KERN_S_SWITCH records put in the ring */
    uint64_t native_dropped;        /* KERN_S_NATIVE records the ring had no room for */
};

/* The thread map's key. */
struct kern_thread_key {
    uint32_t pid, tid;
};

/* A ring-buffer record: this header, then nframes kern_frame_t, then nnamed kern_named_t,
 * then with KERN_S_TASK one kern_task_t. */
struct kern_rec {
    uint32_t pid, tid;
    uint64_t t_ns;
    uint64_t tstate;
    uint64_t gen;
    uint32_t flags;
    uint32_t nframes;
    uint32_t nnamed;                /* kern_named_t after the frames */
    uint32_t pad;
};

/* A tick's user context record (kern.h's kern_native_t), reserved in the ring at its full
 * size and read into in place: rec.flags KERN_S_NATIVE, rec.nframes 0, rec.t_ns the
 * tick's own time (the tick record that follows has the same pid, tid and t_ns). */
struct kern_nat_rec {
    struct kern_rec rec;
    uint64_t regs[KERN_NATIVE_REGS];
    uint64_t lo;
    uint32_t len, has_ts_frame;
    uint64_t ts_frame;
    unsigned char stack[KERN_NATIVE_MAX];
};

/* The frame walker's per-CPU scratch: the record being built, then the walk's buffers. */
#define KERN_SEEN 8                 /* code objects a walk remembers the fingerprint of */
#define KERN_STR_BUF 64             /* bytes of a str read at once: length through characters */
#define KERN_FP_WBUF 32             /* the fingerprint's words' buffer (a power of 2 >= KERN_FP_MAX) */

#define KERN_KNOWN 16384            /* code objects user space has named (the known map) */

struct kern_scratch {
    struct kern_rec rec;
    kern_frame_t frames[KERN_MAX_FRAMES];
    kern_named_t tail[KERN_NAMED];  /* the named block copied right after frames[n], */
    kern_task_t tail_task;          /* and the running task after it */
    uint64_t lo;                    /* the window: the address win[0] was read from, */
    uint32_t have, pad;             /* and how many bytes of it (kept in the map, not on the
                                     * walk's stack, where the verifier would track them) */
    unsigned char win[KERN_WIN + 8]; /* 8: fr_u64's slack */
    uint64_t w[KERN_FP_WBUF];       /* KERN_FP_MAX words used */
    uint64_t sb[KERN_STR_BUF / 8];
    uint64_t seen_code[KERN_SEEN];  /* this walk's last code objects and their fingerprints: */
    uint64_t seen_fp[KERN_SEEN];    /* a recursion's code read once */
    kern_named_t named[KERN_NAMED]; /* the walk's named frames, before the copy */
    uint64_t named_code[KERN_NAMED];    /* ... and their code objects */
    uint32_t nnamed;                /* ... how many (the walk's count: kept here, unknown to
                                     * the verifier, so that it splits no state) */
    uint32_t naming;                /* this walk names (a tick's: 1; a switch-out's: 0) */
    uint32_t has_task, pad2;        /* task_step read task (KERN_S_TASK) */
    kern_task_t task;
};

#endif
