/* sample/ — the stack table (interning and aggregation) and the profile model that
 * every output writer reads (which file does what: docs/layout.md).
 */
#ifndef REMORA_SAMPLE_H
#define REMORA_SAMPLE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define STK_NONE UINT32_MAX

/* An interned frame. Strings are owned by the table (interned: equal strings are
 * the same pointer). */
typedef struct stk_frame {
    const char *function;
    const char *file;
    int line;
    int native;             /* a C frame (--native): writers show it apart */
    const char *op;         /* --opcodes, a sample's innermost frame: the instruction's name
                             * (interned; NULL for every other frame) */
    int offset;             /* ... and its byte offset in the bytecode (else -1) */
} stk_frame_t;

/* A node of a thread's trie: the stack from the thread's root down to this frame. */
typedef struct stk_node {
    uint32_t parent;        /* STK_NONE for a thread's root (which has no frame) */
    uint32_t frame;         /* index into the frame table; STK_NONE for a root */
    uint32_t first_child;   /* STK_NONE if none */
    uint32_t next_sibling;  /* STK_NONE if none */
    uint64_t self;          /* samples whose innermost frame is this node */
} stk_node_t;

typedef struct stk_thread {
    pid_t tid;
    const char *name;       /* what the outputs call it: its thread name (threading's)
                             * when known, else its comm (the kernel's); interned; may
                             * be "" */
    uint32_t root;          /* node index of the thread's root */
    uint64_t samples;       /* samples counted for this thread */
} stk_thread_t;

typedef struct stk_table stk_table_t;

stk_table_t *stk_new(void);
void stk_free(stk_table_t *t);

/* Interns a string into the table. NULL only when out of memory. */
const char *stk_intern(stk_table_t *t, const char *s);

/* Interns a frame; returns its index or STK_NONE when out of memory. */
uint32_t stk_frame(stk_table_t *t, const char *function, const char *file, int line);
/* The same for a C frame (native 1) or a Python one (0): a C frame and a Python frame of
 * the same function, file and line are two frames. */
uint32_t stk_frame_kind(stk_table_t *t, const char *function, const char *file, int line,
                        int native);
/* A Python frame at an instruction (--opcodes): its name 'op' (not NULL) and byte offset.
 * Another frame than the one without an instruction, and than one at another. */
uint32_t stk_frame_op(stk_table_t *t, const char *function, const char *file, int line,
                      const char *op, int offset);

/* The thread with this tid and name (any name when 'name' is NULL), created on first
 * use: a thread renamed while recorded is two threads of the table, each with the
 * samples taken under its name, as are a thread's states in two interpreters (named
 * apart). Returns its index or STK_NONE. */
uint32_t stk_thread(stk_table_t *t, pid_t tid, const char *name);

/* Gives thread 'thread' another name (its thread name, read after its comm stood for
 * it). Returns 0, or -1 when out of memory. */
int stk_thread_rename(stk_table_t *t, uint32_t thread, const char *name);

/* Child of 'node' for 'frame', created if absent. Returns its index or STK_NONE. */
uint32_t stk_child(stk_table_t *t, uint32_t node, uint32_t frame);

/* Adds 'count' samples of a stack to thread 'thread': frames[] are frame indexes,
 * OUTERMOST first. Returns the leaf node or STK_NONE. An empty stack counts on the root. */
uint32_t stk_add(stk_table_t *t, uint32_t thread, const uint32_t *frames, size_t n, uint64_t count);

/* Adds 'count' samples at an existing node (the frame cache's fast path). */
void stk_add_at(stk_table_t *t, uint32_t thread, uint32_t node, uint64_t count);

/* Read access for writers. Pointers are valid until the next change to the table. */
size_t stk_nthreads(const stk_table_t *t);
const stk_thread_t *stk_thread_at(const stk_table_t *t, size_t i);
size_t stk_nframes(const stk_table_t *t);
const stk_frame_t *stk_frame_at(const stk_table_t *t, uint32_t i);
size_t stk_nnodes(const stk_table_t *t);
const stk_node_t *stk_node_at(const stk_table_t *t, uint32_t i);
uint64_t stk_total_samples(const stk_table_t *t);
size_t stk_memory(const stk_table_t *t);   /* bytes held, for the benchmarks */

/* Calls fn for every node with self > 0: 'frames' are frame indexes outermost first
 * (a scratch array valid during the call). Threads in table order, then depth-first. */
typedef void (*stk_visit_fn)(void *ctx, const stk_thread_t *thread, const uint32_t *frames,
                             size_t n, uint64_t count);
int stk_foreach_stack(const stk_table_t *t, stk_visit_fn fn, void *ctx);

/* A function's totals: samples with it innermost (self) and samples with it anywhere
 * (total: once per sample, however often it recurses there). */
typedef struct stk_fn_row {
    const char *function, *file;
    int line;               /* the lowest line seen: near the definition */
    int hot_line;           /* the line seen in most samples (counted once per sample;
                             * the lowest of a tie) */
    uint64_t self, total;
} stk_fn_row_t;

/* One row per (function, file) of t, in the order their first frames were interned, so a
 * row keeps its index as the table grows. *rows is malloc'd (the caller frees it), and so
 * is *row_of_frame when it is not NULL: each frame's row. Returns 0 or REMORA_ENOMEM. */
int stk_fn_rows(const stk_table_t *t, stk_fn_row_t **rows, size_t *n, uint32_t **row_of_frame);
/* The same rows (every function of the table, in the same order), counting only the
 * samples of the threads with this tid (0: every thread's). */
int stk_fn_rows_tid(const stk_table_t *t, pid_t tid, stk_fn_row_t **rows, size_t *n,
                    uint32_t **row_of_frame);

/* What a profile says about how it was taken; shown by writers that have a header. */
typedef struct profile_meta {
    pid_t pid;
    char command[1024];     /* the target's command line, spaces between arguments */
    char python[32];        /* "3.12.1" */
    char mode[16];          /* wall, cpu, gil, exception, memory */
    double duration_s;
    double rate_hz;         /* the rate asked for */
    uint64_t samples;       /* sampling rounds taken */
    uint64_t errors;        /* thread stacks that could not be read consistently */
    uint64_t late;          /* rounds not taken on time */
    int64_t start_unix_ns;
    int64_t start_mono_ns;  /* CLOCK_MONOTONIC when sampling began (0: unknown) */
    char engine[8];         /* "kernel", "user", or "" (a recording made before engines) */
    /* The counts' words (docs/cli.md, "Counts"; formats/counts.c writes them): 'samples'
     * is the rounds taken; these are 0 in a profile that does not know them (collapsed
     * stacks, a recording made before them: 'counted' is 0) */
    int counted;            /* the fields below are known */
    uint64_t written;       /* thread samples written */
    uint64_t idle;          /* thread samples left out as idle */
    int idle_kept;          /* --idle: none left out */
    uint64_t partial;       /* thread samples written partial */
    double paused_s;        /* of duration_s, the time paused: not sampled */
    uint64_t sample_bytes;  /* --mode memory: the bytes of new resident memory a sample
                             * stands for (its page faults x the page size); 0: a sample
                             * stands for time */
} profile_meta_t;

/* The kernel engine's shortest tick period (kern.h's KERN_MIN_PERIOD_NS): what a sample
 * of a recording made with it stands for at a higher rate asked. */
#define SAMPLE_KERNEL_MIN_PERIOD_NS 10000

/* What a thread was doing when its stack was read (flags of a sample). */
#define SAMPLE_F_ON_CPU 1u      /* running on a CPU */
#define SAMPLE_F_GIL 2u         /* holding the GIL */
#define SAMPLE_F_GC 4u          /* collecting garbage (its stack ends in <GC>) */
#define SAMPLE_F_TICK 8u        /* read in the kernel at a tick of its CPU time (the kernel
                                 * engine): its time is that instant; a round's sample's is
                                 * when the round's reading began */

/* One thread's sample in a recording, for the formats with a timeline. */
typedef struct prof_event {
    int64_t t_ns;           /* since sampling began */
    uint32_t thread;        /* index of the table's thread */
    uint32_t node;          /* the stack's innermost node */
    unsigned flags;         /* SAMPLE_F_ON_CPU, SAMPLE_F_GIL, SAMPLE_F_GC, SAMPLE_F_TICK */
} prof_event_t;

/* The model every writer reads. 'baseline' is set for differential outputs; 'events',
 * every sample in time order, for the formats with a timeline (out_format_t.timeline),
 * read back from a .remora recording (NULL otherwise). */
typedef struct profile {
    const stk_table_t *stacks;
    profile_meta_t meta;
    const struct profile *baseline;
    const prof_event_t *events;
    size_t nevents;
} profile_t;

#endif

