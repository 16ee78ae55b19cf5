/* unwind/internal.h — the per-sample reader's state, shared by the files that read a sample.
 *
 *   sample.c       unw_sample(): one round, thread by thread
 *   copy.c         the first read: states, GIL, stack copies; copying again
 *   batch.c        requests merged into few vectored reads
 *   threadcache.c  the interpreters and thread states kept between samples
 *   walk.c         walking a thread's frames in its copies, and checking them
 *   anchor.c       --frame-anchor (3.15)
 *   parked.c       threads that have not held the GIL since their last walk
 *   naming.c       validating the sample's code objects
 *
 * Not for use outside src/unwind/.
 */
#ifndef REMORA_UNWIND_INTERNAL_H
#define REMORA_UNWIND_INTERNAL_H

#include <stdint.h>
#include <string.h>

#include "unwind.h"

#define RD_MIN_COPY 1024u
#define RD_MAX_COPY (256u << 10)
#define RD_BLOCK 4096u
#ifndef RD_GAP
#define RD_GAP 512u               /* bytes between two frames still read as one range */
#endif
#define RD_CHUNK_HDR 24u
#define RD_SPEC 512               /* speculative blocks per thread, at most */
#define RD_SPEC_CODES 512         /* code objects validated in the first read */          /* struct _PyStackChunk: previous, size, top */

typedef struct fast_interp {
    uint64_t addr;
    int64_t id;
    uint64_t gil;                   /* 3.12+: the struct _gil_runtime_state in use */
    size_t first, count;            /* its threads in the thread cache */
    uint64_t head, next;            /* read this sample */
    int32_t locked, gc;
    uint64_t holder;
    uint64_t gen;                   /* code-object counter (3.13+), read after the copies */
    uint64_t sw;                    /* the GIL's switch_number, read this sample */
    int sw_ok;                      /* ... when its offset is known */
    uint64_t last_sw, last_holder;  /* sw and holder as the last sample read them */
} rd_interp_t;

typedef struct fast_block {
    uint64_t addr;
    size_t len;
    unsigned char *one, *two;       /* read while walking, re-read to validate */
    size_t cap;
} rd_block_t;

typedef struct fast_thread {
    uint64_t tstate;
    size_t interp;
    pid_t native_id;
    unsigned char *ts;              /* this sample's copy of the thread state */
    uint64_t cframe, cur_spec;      /* 3.11/3.12: cframe and its current_frame */
    uint64_t cur_mid;               /* the current frame, read between the two copies */
    uint64_t cur_end;               /* and again after the second */
    uint64_t cf_end;                /* 3.11/3.12: the thread state's cframe, read last */
    uint64_t pthread_seen;          /* 3.9/3.10: its pthread_t last sample (0: not yet) */
    int32_t tid_now, tid_end;       /* 3.9/3.10: the tid in that pthread, read this sample
                                     * with the state and again after the thread's copies */
    uint64_t chunk;                 /* the chunk copied (0: none yet) */
    uint64_t base;                  /* where the copies start: the chunk, or the anchor */
    size_t chunk_size;              /* from its header, once copied */
    size_t copy_len, copied;        /* bytes to copy next time; bytes copied now */
    unsigned char *a, *b;           /* the two copies */
    size_t cap;
    rd_block_t *sb;               /* frames outside the chunk last time, read again */
    size_t nsb, cap_sb;
    /* --frame-anchor (3.15): the interpreter keeps last_profiled_frame at a frame remora
     * wrote there, moves it to the caller when that frame returns and counts the moves
     * (seq). While it still names 'anc' with the same seq, every frame below anc is as
     * it was when remora last read it after writing: only anc and above are copied. */
    int anc_state;                  /* ANC_NONE, ANC_WRITTEN, ANC_CACHED, ANC_OFF */
    uint64_t anc, anc_seq;          /* ANC_WRITTEN: what was written, seq seen then;
                                     * ANC_CACHED: the anchor frame and its seq */
    uint64_t lp_end[2];             /* last_profiled_frame and seq, read after the copies */
    unsigned char tail[64];         /* 3.15 with an anchor: current_frame through seq, one read */
    size_t tail_len;
    struct walked *below;           /* ANC_CACHED: the frames below anc, innermost first */
    size_t nbelow, cap_below;
    /* A parked thread: its last consistent walk, taken while another thread held the
     * GIL, kept with that GIL's last holder and switch count. While both stay the same
     * this thread has not taken the GIL, so its frames have not moved: the walk is
     * reused and nothing of its stack is read (see parked_holds()). */
    struct walked *saved;
    size_t nsaved, cap_saved;
    int saved_ok, reuse;            /* a walk is saved; this sample expects to reuse it */
    uint64_t saved_sw, saved_holder, saved_cur, saved_cframe;
} rd_thread_t;

enum { ANC_NONE, ANC_WRITTEN, ANC_CACHED, ANC_OFF };
#define ANC_REWRITE 32              /* frames walked above the anchor before moving it up */

/* One frame walked: where its link fields came from, to compare with a second copy. */
typedef struct walked {
    uint64_t addr, prev, code, instr;
    int src;                        /* -1: chunk copy; k >= 0: block k; -2-k: spec block k */
    int shim;                       /* a C-owned frame: walked through, not reported */
    int entry;                      /* 3.11: the first frame of an eval loop (is_entry) */
    int cached;                     /* --frame-anchor: below the anchor, from the cache */
} walked_t;

/* A request's address and index, sorted by batch_merge(). */
typedef struct rd_key {
    uint64_t addr;
    size_t req;
} rd_key_t;

typedef struct reader {
    int valid;
    uint64_t rt_head;               /* the runtime's first interpreter, read this sample */
    uint32_t gen_global;            /* 3.12: _Py_next_func_version, read after the copies */
    uint64_t gen_last;              /* the counters as the last sample read them, hashed
                                     * (0: not read) */
    rd_interp_t *interps;
    size_t ninterps, cap_interps;
    rd_thread_t *threads;
    size_t nthreads;
    proc_iov_t *iov;
    size_t cap_iov;
    proc_iov_t *req;                /* small reads to merge when near each other */
    size_t nreq, cap_req;
    unsigned char *stage;           /* where merged reads land before being scattered */
    size_t cap_stage, nstage;       /* its size, and the bytes placed this read */
    size_t *staged;                 /* iovs reading into stage: offsets until staged_fix() */
    size_t nstaged, cap_staged;
    rd_key_t *order;                /* batch_merge(): requests sorted by address */
    size_t cap_order;
    walked_t *walk;                 /* UNW_MAX_DEPTH */
    uint64_t *scratch;              /* UNW_MAX_DEPTH */
    rd_block_t *blocks;           /* frames read outside the chunk this sample */
    size_t nblocks, cap_blocks;
    uint64_t *codes;                /* unique code addresses of this sample */
    size_t ncodes, cap_codes;
    unsigned char *fps;             /* their fingerprints, read back */
    size_t cap_fps;
    uint64_t *spec_codes;           /* last sample's codes (sorted), validated in the first read */
    unsigned char *spec_fps;
    size_t nspec_codes;
    uint64_t stamp;
    int late;                       /* frames were read after the first read this sample */
    size_t fresh;                   /* threads dropped for a code object read this sample */
} reader_t;

static inline uint64_t get_u64(const unsigned char *b, uint64_t off)
{
    uint64_t v;
    memcpy(&v, b + off, 8);
    return v;
}

/* A frame's instruction: f_lasti (an int) on 3.9/3.10, a pointer on 3.11+. */
static inline uint64_t get_instr(const py_layout_t *L, const unsigned char *fb)
{
    uint32_t v;

    if (L->frames_kind != PY_FRAMES_OBJECTS)
        return get_u64(fb, L->fr_instr);
    memcpy(&v, fb + L->fr_instr, 4);
    return v;
}

static inline int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* ---- batch.c ---- */

int batch_iov(reader_t *r, size_t *n, uint64_t addr, void *buf, size_t len);
int batch_req(reader_t *r, uint64_t addr, void *buf, size_t len);
int batch_fp(unwinder_t *u, reader_t *r, uint64_t code, unsigned char *buf);
int batch_merge(reader_t *r, size_t *n, size_t first);
void batch_reset(reader_t *r);
void batch_fix(reader_t *r);
void batch_scatter(reader_t *r);

/* ---- threadcache.c ---- */

void tc_fini(rd_thread_t *tc);
int tc_rebuild(unwinder_t *u, reader_t *r);
int tc_lists_unchanged(const py_layout_t *L, const reader_t *r);
void tc_settle_ids(unwinder_t *u, reader_t *r);

/* ---- copy.c ---- */

uint64_t copy_cur_ptr(const py_layout_t *L, const rd_thread_t *tc);
int copy_states(unwinder_t *u, reader_t *r);
int copy_again(unwinder_t *u, reader_t *r, rd_thread_t *tc, size_t len);
size_t copy_clamp(const rd_thread_t *tc, size_t len);

/* ---- anchor.c ---- */

int anchor_on(const unwinder_t *u, const rd_thread_t *tc);
void anchor_drop(rd_thread_t *tc);
void anchor_before(unwinder_t *u, rd_thread_t *tc);
int anchor_after(unwinder_t *u, reader_t *r, rd_thread_t *tc, size_t nw);

/* ---- walk.c ---- */

int walk_frames(unwinder_t *u, reader_t *r, rd_thread_t *tc, uint64_t cur, size_t *nwalked, size_t *need);
int walk_check(unwinder_t *u, reader_t *r, rd_thread_t *tc, uint64_t cur, size_t nwalked);
int walk_learn_blocks(const py_layout_t *L, reader_t *r, rd_thread_t *tc, size_t nwalked);

/* ---- parked.c ---- */

int park_reread(unwinder_t *u, reader_t *r, rd_thread_t *tc);
int park_holds(const py_layout_t *L, const rd_interp_t *fi, const rd_thread_t *tc);
int park_save(reader_t *r, const rd_interp_t *fi, rd_thread_t *tc, uint64_t cur, size_t nw);

/* ---- naming.c ---- */

int name_note_code(reader_t *r, code_cache_t *cc, uint64_t addr);
int name_resolve_codes(unwinder_t *u, reader_t *r, int have_gen, uint64_t pre, uint64_t post);

#endif
