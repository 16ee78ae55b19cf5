/* unwind/fast.c — every thread's stack per sample in a bounded number of system calls.
 *
 * Reads, per sample: one vectored read of each interpreter's thread-list head, GIL and
 * GC state, every thread state, and (3.11+) the live part of each thread's data-stack
 * chunk, copied twice, followed by the current-frame pointer again; frames are walked
 * in the copy. Frames outside the chunk (generators, coroutines, older chunks) are read
 * in blocks. Code objects are validated after the frames naming them were read: last
 * sample's in the first read, after the copies (their fingerprints, or the interpreter's
 * code-object counter where it has one), others in a second read (resolve_codes); a
 * code object first read this sample drops its thread, and the sample is taken once
 * more. A sample is consistent when both copies agree on every frame link walked and
 * the current frame did not move; else the thread is reported with REMORA_ECORRUPT.
 * 3.9/3.10 frames are heap objects: read one by one, then re-read together to check.
 */
#include <stdlib.h>
#include <string.h>

#include "remora.h"
#include "unwind.h"

#define FAST_MIN_COPY 1024u
#define FAST_MAX_COPY (256u << 10)
#define FAST_BLOCK 4096u
#ifndef FAST_GAP
#define FAST_GAP 512u               /* bytes between two frames still read as one range */
#endif
#define FAST_CHUNK_HDR 24u
#define FAST_SPEC 512               /* speculative blocks per thread, at most */
#define FAST_SPEC_CODES 512         /* code objects validated in the first read */          /* struct _PyStackChunk: previous, size, top */

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
} fast_interp_t;

typedef struct fast_block {
    uint64_t addr;
    size_t len;
    unsigned char *one, *two;       /* read while walking, re-read to validate */
    size_t cap;
} fast_block_t;

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
    fast_block_t *sb;               /* frames outside the chunk last time, read again */
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
} fast_thread_t;

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

typedef struct fast {
    int valid;
    uint64_t rt_head;               /* the runtime's first interpreter, read this sample */
    uint32_t gen_global;            /* 3.12: _Py_next_func_version, read after the copies */
    uint64_t gen_last;              /* the counters as the last sample read them, hashed
                                     * (0: not read) */
    fast_interp_t *interps;
    size_t ninterps, cap_interps;
    fast_thread_t *threads;
    size_t nthreads;
    proc_iov_t *iov;
    size_t cap_iov;
    proc_iov_t *req;                /* small reads to merge when near each other */
    size_t nreq, cap_req;
    unsigned char *stage;           /* where merged reads land before being scattered */
    size_t cap_stage, nstage;       /* its size, and the bytes placed this read */
    size_t *staged;                 /* iovs reading into stage: offsets until staged_fix() */
    size_t nstaged, cap_staged;
    size_t *order;
    size_t cap_order;
    walked_t *walk;                 /* UNW_MAX_DEPTH */
    uint64_t *scratch;              /* UNW_MAX_DEPTH */
    fast_block_t *blocks;           /* frames read outside the chunk this sample */
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
} fast_t;

static uint64_t get_u64(const unsigned char *b, uint64_t off)
{
    uint64_t v;
    memcpy(&v, b + off, 8);
    return v;
}

/* A frame's instruction: f_lasti (an int) on 3.9/3.10, a pointer on 3.11+. */
static uint64_t get_instr(const py_layout_t *L, const unsigned char *fb)
{
    uint32_t v;

    if (L->frames_kind != PY_FRAMES_OBJECTS)
        return get_u64(fb, L->fr_instr);
    memcpy(&v, fb + L->fr_instr, 4);
    return v;
}

static void thread_fini(fast_thread_t *t);

/* Does this thread keep an anchor (--frame-anchor on a 3.15 target)? */
static int anchoring(const unwinder_t *u, const fast_thread_t *t)
{
    const py_layout_t *L = &u->t->layout;

    return (u->want & UNW_WANT_ANCHOR) && L->ts_last_profiled != 0 &&
           L->ts_last_profiled_seq == L->ts_last_profiled + 8 && t->anc_state != ANC_OFF;
}

static int add_req(fast_t *f, uint64_t addr, void *buf, size_t len);

/* Requests the reads that follow a thread's second copy: the current frame pointer and,
 * with an anchor, last_profiled_frame and its seq -- one range when they sit together
 * in the thread state (3.15), unpacked by unpack_tail() once read. */
static int add_end_reads(unwinder_t *u, fast_t *f, fast_thread_t *t, uint64_t cp)
{
    const py_layout_t *L = &u->t->layout;

    t->tail_len = 0;
    if (anchoring(u, t) && cp == t->tstate + L->ts_frame && L->ts_last_profiled > L->ts_frame &&
        L->ts_last_profiled + 16 - L->ts_frame <= sizeof t->tail) {
        t->tail_len = (size_t)(L->ts_last_profiled + 16 - L->ts_frame);
        return add_req(f, cp, t->tail, t->tail_len);
    }
    if (add_req(f, cp, &t->cur_end, 8))
        return -1;
    if (anchoring(u, t) && add_req(f, t->tstate + L->ts_last_profiled, t->lp_end, 16))
        return -1;
    return 0;
}

static void unpack_tail(const py_layout_t *L, fast_thread_t *t)
{
    if (t->tail_len == 0)
        return;
    memcpy(&t->cur_end, t->tail, 8);
    memcpy(t->lp_end, t->tail + (L->ts_last_profiled - L->ts_frame), 16);
}

/* Forgets the anchor: the next copy starts at the chunk again. */
static void anchor_drop(fast_thread_t *t)
{
    if (t->anc_state != ANC_OFF)
        t->anc_state = ANC_NONE;
    if (t->base != t->chunk) {
        t->copy_len += (size_t)(t->base - t->chunk);
        t->base = t->chunk;
        t->copied = 0;
    }
    t->nbelow = 0;
}

void unw_fast_free(void *opaque)
{
    fast_t *f = opaque;
    size_t i;

    if (f == NULL)
        return;
    for (i = 0; i < f->nthreads; i++)
        thread_fini(&f->threads[i]);
    for (i = 0; i < f->cap_blocks; i++) {
        free(f->blocks[i].one);
        free(f->blocks[i].two);
    }
    free(f->blocks);
    free(f->interps);
    free(f->threads);
    free(f->iov);
    free(f->req);
    free(f->stage);
    free(f->staged);
    free(f->order);
    free(f->walk);
    free(f->scratch);
    free(f->codes);
    free(f->fps);
    free(f->spec_codes);
    free(f->spec_fps);
    free(f);
}

static int add_iov(fast_t *f, size_t *n, uint64_t addr, void *buf, size_t len)
{
    if (remora_grow((void **)&f->iov, &f->cap_iov, *n + 1, sizeof *f->iov))
        return -1;
    f->iov[*n].addr = addr;
    f->iov[*n].buf = buf;
    f->iov[*n].len = len;
    (*n)++;
    return 0;
}

static void thread_fini(fast_thread_t *t)
{
    size_t i;

    free(t->ts);
    free(t->a);
    free(t->b);
    for (i = 0; i < t->cap_sb; i++) {
        free(t->sb[i].one);
        free(t->sb[i].two);
    }
    free(t->sb);
    free(t->below);
    free(t->saved);
    memset(t, 0, sizeof *t);
}

#define FAST_MERGE_GAP 512u
#define FAST_MERGE_MAX 16384u
#define FAST_ISORT 48u              /* requests sorted by insertion, at most */

static int add_req(fast_t *f, uint64_t addr, void *buf, size_t len)
{
    if (remora_grow((void **)&f->req, &f->cap_req, f->nreq + 1, sizeof *f->req))
        return -1;
    f->req[f->nreq].addr = addr;
    f->req[f->nreq].buf = buf;
    f->req[f->nreq].len = len;
    f->nreq++;
    return 0;
}

/* Asks for the fingerprint of the code object at 'code' (code.c says which reads) into
 * buf, UNW_FP_MAX bytes. Requests, so that neighbours merge: code objects and their
 * names sit together in the allocator's pools. */
static int add_fp(unwinder_t *u, fast_t *f, uint64_t code, unsigned char *buf)
{
    proc_iov_t v[UNW_FP_READS];
    size_t k, m = code_fp_iov(u->codes, &u->t->layout, code, buf, v);

    for (k = 0; k < m; k++)
        if (add_req(f, v[k].addr, v[k].buf, v[k].len))
            return -1;
    return 0;
}

static const proc_iov_t *sort_base;

static int by_addr(const void *a, const void *b)
{
    uint64_t x = sort_base[*(const size_t *)a].addr, y = sort_base[*(const size_t *)b].addr;
    return x < y ? -1 : x > y;
}

static int same_page(uint64_t a, uint64_t b)
{
    return a / 4096 == b / 4096;
}

/* Turns the requests from 'first' on into as few reads as possible: those within
 * FAST_MERGE_GAP of each other or on the same page become one read into the staging
 * buffer (scattered by scatter_reqs). The kernel's cost is per range and per page, not
 * per byte, so this is where a sample's time goes. The reads are queued at the end of
 * f->iov with stage offsets for buffers: staged_fix() makes them pointers once the
 * whole read is queued (the stage may move until then). */
static int merge_reqs_from(fast_t *f, size_t *n, size_t first)
{
    size_t i, m = f->nreq - first, total = 0, at;

    if (m == 0)
        return 0;
    if (remora_grow((void **)&f->order, &f->cap_order, m + 1, sizeof *f->order))
        return -1;
    for (i = 0; i < m; i++) {
        f->order[i] = first + i;
        total += f->req[first + i].len;
    }
    if (m <= FAST_ISORT) {
        /* a few requests, mostly in order already: qsort's set-up costs more */
        for (i = 1; i < m; i++) {
            size_t v = f->order[i], j = i;
            for (; j > 0 && f->req[f->order[j - 1]].addr > f->req[v].addr; j--)
                f->order[j] = f->order[j - 1];
            f->order[j] = v;
        }
    } else {
        sort_base = f->req;
        qsort(f->order, m, sizeof *f->order, by_addr);
    }
    /* the staging buffer is sized for the worst case: every gap filled (a page at most) */
    if (remora_grow((void **)&f->stage, &f->cap_stage, f->nstage + total + m * 4096 + 1, 1))
        return -1;
    at = f->nstage;
    for (i = 0; i < m;) {
        uint64_t lo = f->req[f->order[i]].addr, hi = lo + f->req[f->order[i]].len;
        size_t j = i + 1;
        while (j < m) {
            const proc_iov_t *r = &f->req[f->order[j]];
            uint64_t end = r->addr + r->len > hi ? r->addr + r->len : hi;
            if ((r->addr > hi + FAST_MERGE_GAP && !same_page(r->addr, hi - 1)) || end - lo > FAST_MERGE_MAX)
                break;
            hi = end;
            j++;
        }
        if (remora_grow((void **)&f->staged, &f->cap_staged, f->nstaged + 1, sizeof *f->staged) ||
            add_iov(f, n, lo, (void *)(uintptr_t)at, (size_t)(hi - lo)))
            return -1;
        f->staged[f->nstaged++] = *n - 1;
        for (; i < j; i++)
            f->req[f->order[i]].addr = (uint64_t)at + (f->req[f->order[i]].addr - lo);  /* now: offset in stage */
        at += (size_t)(hi - lo);
    }
    f->nstage = at;
    return 0;
}

/* Starts a read: no requests, nothing staged. */
static void reqs_reset(fast_t *f)
{
    f->nreq = 0;
    f->nstage = 0;
    f->nstaged = 0;
}

/* The staged reads' offsets become pointers into the stage. */
static void staged_fix(fast_t *f)
{
    size_t i;

    for (i = 0; i < f->nstaged; i++)
        f->iov[f->staged[i]].buf = f->stage + (uintptr_t)f->iov[f->staged[i]].buf;
}

static void scatter_reqs(fast_t *f)
{
    size_t i;

    for (i = 0; i < f->nreq; i++)
        memcpy(f->req[i].buf, f->stage + f->req[i].addr, f->req[i].len);
}

/* Makes room for two copies of len bytes. */
static int ensure_copies(fast_thread_t *t, size_t len)
{
    unsigned char *na, *nb;

    if (len <= t->cap)
        return 0;
    na = realloc(t->a, len);
    if (na == NULL)
        return -1;
    t->a = na;
    nb = realloc(t->b, len);
    if (nb == NULL)
        return -1;
    t->b = nb;
    t->cap = len;
    return 0;
}

/* Rebuilds the thread cache with a full (slow) walk of the lists; threads seen before
 * keep their copies and what was learnt about their chunks. */
static int rebuild(unwinder_t *u, fast_t *f)
{
    const py_layout_t *L = &u->t->layout;
    unw_thread_t *th;
    fast_thread_t *nt;
    size_t n, i, j, k;
    unsigned want = u->want;
    int err;

    f->valid = 0;
    /* the lists and the thread states only: the stacks are the fast walk's */
    u->want = (want & ~(unsigned)(UNW_WANT_CPU | UNW_WANT_NAMES)) | UNW_WANT_NOSTACKS;
    err = unw_snapshot(u, &th, &n);
    u->want = want;
    if (err)
        return err;
    nt = calloc(n ? n : 1, sizeof *nt);
    if (nt == NULL)
        return REMORA_ENOMEM;
    /* every interpreter, with or without threads, in list order */
    f->ninterps = 0;
    {
        uint64_t ia;
        size_t guard = 0;
        if ((err = proc_read_u64(u->p, u->t->runtime + L->rt_interpreters_head, &ia)))
            goto fail;
        while (ia != 0) {
            fast_interp_t *fi;
            if (++guard > UNW_MAX_INTERPS) {
                err = REMORA_ECORRUPT;
                goto fail;
            }
            if (remora_grow((void **)&f->interps, &f->cap_interps, f->ninterps + 1, sizeof *f->interps)) {
                err = REMORA_ENOMEM;
                goto fail;
            }
            fi = &f->interps[f->ninterps++];
            memset(fi, 0, sizeof *fi);
            fi->addr = ia;
            if ((err = proc_read(u->p, ia + L->is_id, &fi->id, 8)) ||
                (L->minor >= 12 && (err = proc_read_u64(u->p, ia + L->is_gil_ptr, &fi->gil))) ||
                (err = proc_read_u64(u->p, ia + L->is_next, &ia)))
                goto fail;
        }
    }
    for (i = 0, k = 0; i < n; i++) {
        fast_interp_t *fi;
        while (k < f->ninterps && f->interps[k].addr != th[i].interp)
            k++;
        if (k == f->ninterps) {
            err = REMORA_ECORRUPT;       /* the lists changed between the two walks */
            goto fail;
        }
        fi = &f->interps[k];
        if (fi->count++ == 0)
            fi->first = i;
        nt[i].interp = k;
        for (j = 0; j < f->nthreads; j++)
            if (f->threads[j].tstate == th[i].tstate && f->threads[j].ts != NULL)
                break;
        if (j < f->nthreads) {
            size_t keep = nt[i].interp;
            nt[i] = f->threads[j];
            nt[i].interp = keep;
            nt[i].saved_ok = 0;         /* the lists moved: read every stack once */
            memset(&f->threads[j], 0, sizeof f->threads[j]);
        } else if ((nt[i].ts = malloc(L->ts_size)) == NULL) {
            err = REMORA_ENOMEM;
            goto fail;
        } else if (L->ts_native_thread_id == 0 && proc_read_u64(u->p, th[i].tstate + L->ts_thread_id,
                                                                 &nt[i].pthread_seen) != REMORA_OK) {
            /* 3.9/3.10, a new state: its struct pthread, whose tid the first sample reads
             * in its own read (the id this walk found may already belong to another
             * thread that took the same cached stack over) */
            nt[i].pthread_seen = 0;
        }
        nt[i].tstate = th[i].tstate;
        nt[i].native_id = th[i].native_id;
    }
    for (k = 0; k < f->nthreads; k++)
        thread_fini(&f->threads[k]);
    free(f->threads);
    f->threads = nt;
    f->nthreads = n;
    f->valid = 1;
    return REMORA_OK;
fail:
    for (i = 0; i < n; i++)
        thread_fini(&nt[i]);
    free(nt);
    return err;
}

/* The address of an interpreter's GIL switch_number, or 0. struct _gil_runtime_state
 * has begun "interval, last_holder, locked, switch_number" in every release from 3.9 to
 * 3.15 (with the GIL enabled); the count moves whenever a thread takes the GIL from
 * another. Used only when the known offsets fit that order. */
static uint64_t gil_switch_addr(const py_layout_t *L, uint64_t rt, const fast_interp_t *fi)
{
    uint64_t base = L->minor >= 12 ? fi->gil : rt;
    uint64_t lk = L->minor >= 12 ? L->gil_locked : L->rt_gil_locked;
    uint64_t ho = L->minor >= 12 ? L->gil_holder : L->rt_gil_holder;

    if (base == 0 || lk == 0 || ho + 8 != lk || lk % 8 != 0)
        return 0;
    return base + lk + 8;
}

/* The address that holds a thread's current frame pointer. */
static uint64_t cur_ptr_addr(const py_layout_t *L, const fast_thread_t *t)
{
    if (L->frames_kind == PY_FRAMES_CFRAME)
        return t->cframe ? t->cframe + L->cframe_current_frame : 0;
    return t->tstate + L->ts_frame;
}

/* The first read of a sample: lists, GIL, GC, thread states, chunk copies. */
static int read_states(unwinder_t *u, fast_t *f)
{
    const py_layout_t *L = &u->t->layout;
    uint64_t rt = u->t->runtime;
    size_t n = 0, i, k, first;
    int err;

    /* first the state (lists, GIL, GC, thread states), merged; then the copies, in order */
    reqs_reset(f);
    if (add_req(f, rt + L->rt_interpreters_head, &f->rt_head, 8))
        return REMORA_ENOMEM;
    for (i = 0; i < f->ninterps; i++) {
        fast_interp_t *fi = &f->interps[i];
        uint64_t gil = L->minor >= 12 ? fi->gil : rt;
        uint64_t lk = L->minor >= 12 ? L->gil_locked : L->rt_gil_locked;
        uint64_t ho = L->minor >= 12 ? L->gil_holder : L->rt_gil_holder, sw;
        fi->last_sw = fi->sw_ok ? fi->sw : 0;
        fi->last_holder = fi->holder;
        fi->locked = 0;
        fi->holder = 0;
        fi->gc = 0;
        if (add_req(f, fi->addr + L->is_threads_head, &fi->head, 8) ||
            add_req(f, fi->addr + L->is_next, &fi->next, 8))
            return REMORA_ENOMEM;
        if (gil != 0 && (add_req(f, gil + lk, &fi->locked, 4) || add_req(f, gil + ho, &fi->holder, 8)))
            return REMORA_ENOMEM;
        fi->sw = 0;
        sw = gil_switch_addr(L, rt, fi);
        fi->sw_ok = sw != 0;
        if (sw != 0 && add_req(f, sw, &fi->sw, 8))
            return REMORA_ENOMEM;
        if ((u->want & UNW_WANT_GC) && add_req(f, fi->addr + L->is_gc_collecting, &fi->gc, 4))
            return REMORA_ENOMEM;
    }
    for (i = 0; i < f->nthreads; i++) {
        fast_thread_t *t = &f->threads[i];
        uint64_t cp = cur_ptr_addr(L, t);
        t->cur_spec = 0;
        if (add_req(f, t->tstate, t->ts, L->ts_size) ||
            (L->frames_kind == PY_FRAMES_CFRAME && cp && add_req(f, cp, &t->cur_spec, 8)))
            return REMORA_ENOMEM;
        /* 3.9/3.10 keep no native id: the tid in the thread's struct pthread, read each
         * sample, since a new thread may take over both a freed state and a cached stack */
        t->tid_now = 0;
        if (L->ts_native_thread_id == 0 && u->pthread_tid_off >= 0 && t->pthread_seen != 0 &&
            add_req(f, t->pthread_seen + (uint64_t)u->pthread_tid_off, &t->tid_now, 4))
            return REMORA_ENOMEM;
    }
    /* 3.11+: the first copies of the frames outside the chunks (C-stack entry frames,
     * generators) join the state: any time before the current frame is read between
     * the chunk's two copies will do */
    for (i = 0; i < f->nthreads; i++) {
        fast_thread_t *t = &f->threads[i];
        const fast_interp_t *fi = &f->interps[t->interp];
        /* parked at the last sample and the GIL has not changed hands since it was
         * saved: expect it still parked (checked once this read is in) */
        t->reuse = t->saved_ok && fi->sw_ok && fi->last_sw == t->saved_sw && fi->last_holder == t->saved_holder;
    }
    if (L->frames_kind != PY_FRAMES_OBJECTS)
        for (i = 0; i < f->nthreads; i++)
            for (k = 0; k < f->threads[i].nsb && !f->threads[i].reuse; k++)
                if (add_req(f, f->threads[i].sb[k].addr, f->threads[i].sb[k].one, f->threads[i].sb[k].len))
                    return REMORA_ENOMEM;
    if (merge_reqs_from(f, &n, 0))
        return REMORA_ENOMEM;
    for (i = 0; i < f->nthreads; i++) {
        fast_thread_t *t = &f->threads[i];
        uint64_t cp = cur_ptr_addr(L, t);
        int copy = L->frames_kind != PY_FRAMES_OBJECTS && t->chunk && t->copy_len && cp;
        t->cur_mid = 0;
        t->copied = 0;
        t->tail_len = 0;
        if (t->reuse)
            continue;
        /* first copies, the current frame, second copies: the walk starts from a current
         * frame read between two copies that agree, so it is what the copies show */
        if (copy) {
            if (ensure_copies(t, t->copy_len) || add_iov(f, &n, t->base, t->a, t->copy_len))
                return REMORA_ENOMEM;
            t->copied = t->copy_len;
        }
        if (L->frames_kind == PY_FRAMES_OBJECTS)
            for (k = 0; k < t->nsb; k++)
                if (add_iov(f, &n, t->sb[k].addr, t->sb[k].one, t->sb[k].len))
                    return REMORA_ENOMEM;
        t->tail_len = 0;
        if (copy && (add_iov(f, &n, cp, &t->cur_mid, 8) || add_iov(f, &n, t->base, t->b, t->copy_len)))
            return REMORA_ENOMEM;
        /* what must follow the second copies, merged: the current frame (and anchor)
         * again, the second copies of the frames outside the chunk, the cframe again */
        first = f->nreq;
        if (copy && add_end_reads(u, f, t, cp))
            return REMORA_ENOMEM;
        for (k = 0; k < t->nsb; k++)
            if (add_req(f, t->sb[k].addr, t->sb[k].two, t->sb[k].len))
                return REMORA_ENOMEM;
        /* 3.9/3.10: the current frame again, after the blocks' second copies */
        if (L->frames_kind == PY_FRAMES_OBJECTS && t->nsb) {
            if (merge_reqs_from(f, &n, first))
                return REMORA_ENOMEM;
            first = f->nreq;
            if (add_req(f, cp, &t->cur_end, 8))
                return REMORA_ENOMEM;
        }
        t->tid_end = 0;
        if (L->ts_native_thread_id == 0 && u->pthread_tid_off >= 0 && t->pthread_seen != 0 &&
            add_req(f, t->pthread_seen + (uint64_t)u->pthread_tid_off, &t->tid_end, 4))
            return REMORA_ENOMEM;
        /* 3.11/3.12: the cframe again: a nested eval loop's cframe lives on the C stack,
         * and once that loop returns its current_frame reads NULL or stale */
        if (L->frames_kind == PY_FRAMES_CFRAME && add_req(f, t->tstate + L->ts_frame, &t->cf_end, 8))
            return REMORA_ENOMEM;
        if (merge_reqs_from(f, &n, first))
            return REMORA_ENOMEM;
    }
    /* after every copy: the code-object counters again and the fingerprints of last
     * sample's code objects. Read before a copy, they would vouch for a code object
     * freed and made anew at the same address in between (resolve_codes) */
    first = f->nreq;
    f->gen_global = 0;
    if (u->t->code_version && add_req(f, u->t->code_version, &f->gen_global, 4))
        return REMORA_ENOMEM;
    for (i = 0; i < f->ninterps; i++) {
        fast_interp_t *fi = &f->interps[i];
        fi->gen = 0;
        if (L->is_code_generation && add_req(f, fi->addr + L->is_code_generation, &fi->gen, 8))
            return REMORA_ENOMEM;
        if (!L->is_code_generation && L->is_code_version &&
            add_req(f, fi->addr + L->is_code_version, &fi->gen, 4))
            return REMORA_ENOMEM;
    }
    for (k = 0; k < f->nspec_codes; k++)
        if (add_fp(u, f, f->spec_codes[k], f->spec_fps + k * UNW_FP_MAX))
            return REMORA_ENOMEM;
    if (merge_reqs_from(f, &n, first))
        return REMORA_ENOMEM;
    staged_fix(f);
    err = proc_readv(u->p, f->iov, n);
    if (err == REMORA_OK) {
        scatter_reqs(f);
        for (i = 0; i < f->nthreads; i++)
            unpack_tail(L, &f->threads[i]);
    }
    return err;
}

/* Are the lists still what the cache says? */
static int lists_unchanged(const py_layout_t *L, const fast_t *f)
{
    size_t i, k;

    if (f->rt_head != (f->ninterps ? f->interps[0].addr : 0))
        return 0;
    for (i = 0; i < f->ninterps; i++) {
        const fast_interp_t *fi = &f->interps[i];
        if (fi->next != (i + 1 < f->ninterps ? f->interps[i + 1].addr : 0))
            return 0;
        if (fi->head != (fi->count ? f->threads[fi->first].tstate : 0))
            return 0;
        for (k = 0; k < fi->count; k++) {
            const fast_thread_t *t = &f->threads[fi->first + k];
            uint64_t want = k + 1 < fi->count ? f->threads[fi->first + k + 1].tstate : 0;
            if (get_u64(t->ts, L->ts_next) != want || get_u64(t->ts, L->ts_interp) != fi->addr)
                return 0;
        }
    }
    return 1;
}

/* Copies [t->base, t->base + len) twice, reading the current frame pointer between. */
static int recopy(unwinder_t *u, fast_t *f, fast_thread_t *t, size_t len)
{
    const py_layout_t *L = &u->t->layout;
    size_t n = 0;

    if (ensure_copies(t, len))
        return REMORA_ENOMEM;
    reqs_reset(f);
    if (add_iov(f, &n, t->base, t->a, len) || add_iov(f, &n, cur_ptr_addr(L, t), &t->cur_mid, 8) ||
        add_iov(f, &n, t->base, t->b, len) || add_end_reads(u, f, t, cur_ptr_addr(L, t)) ||
        (L->frames_kind == PY_FRAMES_CFRAME && add_req(f, t->tstate + L->ts_frame, &t->cf_end, 8)) ||
        merge_reqs_from(f, &n, 0))
        return REMORA_ENOMEM;
    staged_fix(f);
    t->copied = 0;
    f->late = 1;
    if (proc_readv(u->p, f->iov, n))
        return REMORA_ECORRUPT;
    scatter_reqs(f);
    unpack_tail(L, t);
    t->copied = len;
    return REMORA_OK;
}

/* The frame header at 'addr' from a block read this sample, reading a block if needed.
 * Returns a pointer to fr_size bytes, or NULL (err set). */
static const unsigned char *block_frame(unwinder_t *u, fast_t *f, uint64_t addr, int *src, int *err)
{
    const py_layout_t *L = &u->t->layout;
    size_t i, fs = L->fr_size, blen;
    fast_block_t *b;
    uint64_t start;

    for (i = 0; i < f->nblocks; i++) {
        b = &f->blocks[i];
        if (addr >= b->addr && addr - b->addr + fs <= b->len) {
            *src = (int)i;
            return b->one + (addr - b->addr);
        }
    }
    if (f->nblocks == UNW_MAX_DEPTH) {
        *err = REMORA_ECORRUPT;
        return NULL;
    }
    if (f->nblocks == f->cap_blocks) {
        size_t old = f->cap_blocks;
        if (remora_grow((void **)&f->blocks, &f->cap_blocks, f->nblocks + 1, sizeof *f->blocks)) {
            *err = REMORA_ENOMEM;
            return NULL;
        }
        memset(f->blocks + old, 0, (f->cap_blocks - old) * sizeof *f->blocks);
    }
    b = &f->blocks[f->nblocks];
    /* callers sit below callees, so a block ending at this frame often holds them too:
     * interpreter frames by the page; frame objects (3.9/3.10), from an allocator's
     * pools, only from the start of this frame's page (mapped, as the frame is) */
    blen = FAST_BLOCK;
    if (L->frames_kind == PY_FRAMES_OBJECTS)
        blen = (size_t)(addr % 4096) + fs;
    if (b->cap < blen) {
        unsigned char *n1 = realloc(b->one, blen), *n2;
        if (n1 == NULL) {
            *err = REMORA_ENOMEM;
            return NULL;
        }
        b->one = n1;
        n2 = realloc(b->two, blen);
        if (n2 == NULL) {
            *err = REMORA_ENOMEM;
            return NULL;
        }
        b->two = n2;
        b->cap = blen;
    }
    start = addr + fs > blen ? addr + fs - blen : addr;
    f->late = 1;
    if (blen > fs && proc_read(u->p, start, b->one, blen) == REMORA_OK) {
        b->addr = start;
        b->len = blen;
    } else {
        *err = proc_read(u->p, addr, b->one, fs);
        if (*err)
            return NULL;
        b->addr = addr;
        b->len = fs;
    }
    *src = (int)f->nblocks++;
    return b->one + (addr - b->addr);
}

/* Walks one thread's frames from 'cur'. Returns 0, REMORA_ECORRUPT (torn), or another
 * code; *need gets the chunk length the walk wanted but did not have (0 if none). */
static int walk(unwinder_t *u, fast_t *f, fast_thread_t *t, uint64_t cur, size_t *nwalked, size_t *need)
{
    const py_layout_t *L = &u->t->layout;
    size_t k = 0, steps = 0, fs = L->fr_size;
    uint64_t frame = cur;
    int err = REMORA_OK;

    *need = 0;
    f->nblocks = 0;
    while (frame != 0) {
        const unsigned char *fb;
        walked_t *w;
        int src = -1;

        if (++steps > UNW_MAX_DEPTH * 2 || frame % 8 != 0)
            return REMORA_ECORRUPT;
        if (L->frames_kind != PY_FRAMES_OBJECTS && t->chunk && frame >= t->chunk + FAST_CHUNK_HDR &&
            frame - t->chunk < FAST_MAX_COPY && (!t->chunk_size || frame - t->chunk + fs <= t->chunk_size)) {
            if (frame < t->base) {
                /* below an anchor's copy without meeting the anchor: not the stack the
                 * anchor was set in; copy from the chunk */
                *need = SIZE_MAX;
                return REMORA_OK;
            }
            if (frame - t->base + fs > t->copied) {
                *need = (size_t)(frame - t->base + fs);
                return REMORA_OK;
            }
            fb = t->a + (frame - t->base);
        } else {
            size_t j;
            fb = NULL;
            for (j = 0; j < t->nsb; j++)
                if (frame >= t->sb[j].addr && frame - t->sb[j].addr + fs <= t->sb[j].len) {
                    fb = t->sb[j].one + (frame - t->sb[j].addr);
                    src = -2 - (int)j;
                    break;
                }
            if (fb == NULL && (fb = block_frame(u, f, frame, &src, &err)) == NULL)
                return err;
        }
        if (k == UNW_MAX_DEPTH)
            return REMORA_ECORRUPT;
        /* 3.9/3.10: a frame object with no reference is freed (a code object's zombie
         * frame or the free list, linked through f_back): a torn walk went there */
        if (L->frames_kind == PY_FRAMES_OBJECTS && get_u64(fb, 0) == 0)
            return REMORA_ECORRUPT;
        w = &f->walk[k++];
        w->shim = (L->owner_shim && (unsigned char)fb[L->fr_owner] >= L->owner_shim) ||
                  unw_is_trampoline(u->t, fb);
        w->addr = frame;
        w->prev = get_u64(fb, L->fr_previous);
        w->code = get_u64(fb, L->fr_code);
        if (L->tagged_executable)
            w->code &= ~(uint64_t)3;
        w->instr = get_instr(L, fb);
        w->entry = L->minor == 11 && L->fr_owner >= 1 && fb[L->fr_owner - 1] != 0;
        w->src = src;
        w->cached = 0;
        frame = w->prev;
        if (t->anc_state == ANC_CACHED && w->addr == t->anc && src == -1) {
            /* the anchor: below it, the frames remembered when it was set */
            if (t->nbelow > UNW_MAX_DEPTH - k || (t->nbelow > 0 && t->below[0].addr != w->prev))
                return REMORA_ECORRUPT;
            memcpy(&f->walk[k], t->below, t->nbelow * sizeof *t->below);
            k += t->nbelow;
            break;
        }
    }
    *nwalked = k;
    return REMORA_OK;
}

/* Did the links walked stay the same? Compares the chunk's second copy and re-reads
 * the blocks (with the current frame pointer) in one vectored read. */
static int walk_consistent(unwinder_t *u, fast_t *f, fast_thread_t *t, uint64_t cur, size_t nwalked)
{
    const py_layout_t *L = &u->t->layout;
    size_t i, n = 0;
    uint64_t cur2 = 0;

    /* the frame walked from must still be current after the second copy */
    if (t->copied && t->cur_end != cur)
        return REMORA_ECORRUPT;
    if (L->frames_kind == PY_FRAMES_OBJECTS && f->nblocks == 0 && t->nsb && t->cur_end != cur)
        return REMORA_ECORRUPT;
    if (L->frames_kind == PY_FRAMES_CFRAME && t->cf_end != t->cframe)
        return REMORA_ECORRUPT;

    if (f->nblocks > 0) {
        for (i = 0; i < f->nblocks; i++)
            if (add_iov(f, &n, f->blocks[i].addr, f->blocks[i].two, f->blocks[i].len))
                return REMORA_ENOMEM;
        if (add_iov(f, &n, L->frames_kind == PY_FRAMES_CFRAME ? t->cframe + L->cframe_current_frame
                                                              : t->tstate + L->ts_frame, &cur2, 8))
            return REMORA_ENOMEM;
        if (proc_readv(u->p, f->iov, n) || cur2 != cur)
            return REMORA_ECORRUPT;
    }
    for (i = 0; i < nwalked; i++) {
        const walked_t *w = &f->walk[i];
        const unsigned char *fb;
        uint64_t code, instr;
        if (w->cached)
            break;                      /* below the anchor: checked when remembered */
        if (w->src <= -2)
            fb = t->sb[-2 - w->src].two + (w->addr - t->sb[-2 - w->src].addr);
        else if (w->src < 0)
            fb = t->b + (w->addr - t->base);
        else
            fb = f->blocks[w->src].two + (w->addr - f->blocks[w->src].addr);
        code = get_u64(fb, L->fr_code);
        if (L->tagged_executable)
            code &= ~(uint64_t)3;
        instr = get_instr(L, fb);
        if (L->frames_kind == PY_FRAMES_OBJECTS && get_u64(fb, 0) == 0)
            return REMORA_ECORRUPT;     /* freed since the first copy */
        /* the innermost frame runs on: its instruction may move, its links may not */
        if (get_u64(fb, L->fr_previous) != w->prev)
            return REMORA_ECORRUPT;
        /* A caller has run up to its call: a frame still at its first instruction that
         * seems to have a callee is a frame just pushed under a stale one left above it
         * (the copy and the current-frame pointer are from different moments). */
        if (i > 0 && !w->shim && L->frames_kind != PY_FRAMES_OBJECTS &&
            (int64_t)(w->instr - (w->code + L->co_code_adaptive)) <= 0)
            return REMORA_ECORRUPT;
        if (!w->shim && (code != w->code || (i > 0 && instr != w->instr)))
            return REMORA_ECORRUPT;
        /* 3.12/3.13: a running frame's stacktop is -1 (the eval loop resets it when it
         * takes the stack pointer), and a frame that pushes a callee inline saves its
         * stack pointer first. A caller at -1 below a Python callee is running, so the
         * callee is a stale frame above it. Both copies must say so. */
        if (i > 0 && !w->shim && !f->walk[i - 1].shim && (L->minor == 12 || L->minor == 13) &&
            L->fr_owner >= 6 && w->src == -1) {
            int32_t st1, st2;
            memcpy(&st1, t->a + (w->addr - t->base) + L->fr_owner - 6, 4);
            memcpy(&st2, fb + L->fr_owner - 6, 4);
            if (st1 < 0 || st2 < 0)
                return REMORA_ECORRUPT;
        }
        /* 3.13+: pushing a frame sets its return_offset to 0, and a Python frame that
         * pushes a callee directly sets its own to where to resume (never 0). A caller at
         * 0 below a Python callee is the same stale picture. */
        if (i > 0 && !w->shim && !f->walk[i - 1].shim && L->minor >= 13 && L->fr_owner >= 2) {
            uint16_t ro;
            memcpy(&ro, fb + L->fr_owner - 2, 2);
            if (ro == 0)
                return REMORA_ECORRUPT;
        }
    }
    return REMORA_OK;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Remembers where this walk found frames outside the chunk, as at most FAST_SPEC
 * ranges of at most FAST_BLOCK bytes, to read them in the next sample's first read.
 * The frames are sorted by address and grouped greedily: frame objects (3.9/3.10) and
 * generator frames sit on the heap in no particular order, often several to a page,
 * and the kernel's cost of a read is mostly per range and page; a gap costs bytes. */
static int learn_blocks(const py_layout_t *L, fast_t *f, fast_thread_t *t, size_t nwalked)
{
    size_t i, k = 0, m = 0, fs = L->fr_size;

    for (i = 0; i < nwalked; i++)
        if (f->walk[i].src != -1 && !f->walk[i].cached)
            f->scratch[m++] = f->walk[i].addr;
    if (m > 1)
        qsort(f->scratch, m, sizeof *f->scratch, cmp_u64);
    for (i = 0; i < m; i++) {
        uint64_t a = f->scratch[i];
        fast_block_t *b;
        if (k > 0) {
            b = &t->sb[k - 1];
            /* a small gap (frame objects of one allocator pool lie 400-500 bytes
             * apart) and at most two pages, each holding part of a frame: all mapped */
            if (a <= b->addr + b->len + FAST_GAP && a + fs - b->addr <= FAST_BLOCK &&
                (a + fs - 1) / 4096 - b->addr / 4096 <= 1) {
                if (a + fs > b->addr + b->len)
                    b->len = (size_t)(a + fs - b->addr);
                continue;
            }
        }
        if (k == FAST_SPEC)
            break;
        if (k == t->cap_sb) {
            size_t old = t->cap_sb;
            if (remora_grow((void **)&t->sb, &t->cap_sb, k + 1, sizeof *t->sb))
                return -1;
            memset(t->sb + old, 0, (t->cap_sb - old) * sizeof *t->sb);
        }
        b = &t->sb[k++];
        b->addr = a;
        b->len = fs;
    }
    for (i = 0; i < k; i++) {
        fast_block_t *b = &t->sb[i];
        if (b->cap < b->len) {
            unsigned char *n1 = realloc(b->one, b->len), *n2;
            if (n1 == NULL)
                return -1;
            b->one = n1;
            n2 = realloc(b->two, b->len);
            if (n2 == NULL)
                return -1;
            b->two = n2;
            b->cap = b->len;
        }
    }
    t->nsb = k;
    return 0;
}

/* Adds a code address to this sample's set (codes[] holds each once). */
static int note_code(fast_t *f, code_cache_t *cc, uint64_t addr)
{
    unw_code_t *e;
    size_t i;

    if (f->ncodes > 0 && f->codes[f->ncodes - 1] == addr)
        return 0;                       /* recursion: the frame below ran the same code */
    e = code_cache_peek(cc, addr);
    if (e != NULL && e->stamp == f->stamp)
        return 0;
    for (i = 0; i < f->ncodes; i++)
        if (f->codes[i] == addr)
            return 0;
    if (remora_grow((void **)&f->codes, &f->cap_codes, f->ncodes + 1, sizeof *f->codes))
        return -1;
    f->codes[f->ncodes++] = addr;
    return 0;
}

/* Validates every code object of this sample in one vectored read; refetches those
 * whose fingerprint changed and those not cached.
 *
 * A frame holds its code object, so the object at a frame's code address is the one the
 * frame ran from for as long as the frame lives; once it returns, a new code object may
 * take the address. What names a frame must therefore be read after the frame was:
 *  - a fingerprint read after the copies that equals the entry's (last sample's codes
 *    are read so in the first read, unless frames were read later; the rest here);
 *  - or a counter moved whenever a code object is made (3.12, 3.13) or freed (3.14+),
 *    read after the copies ('post') and equal to its value when the entry was last
 *    validated: none was made or freed in between. An entry records the counter as
 *    read before its fingerprint ('pre'), which is all the proof needs.
 * A code object fetched now was read after its frame's copy with nothing to tie the
 * two: it is marked fresh, and the threads it names are dropped (unw_sample tries once
 * more, with it cached). */
static int resolve_codes(unwinder_t *u, fast_t *f, int have_gen, uint64_t pre, uint64_t post)
{
    const py_layout_t *L = &u->t->layout;
    size_t i, n = 0;
    int err;

    if (remora_grow((void **)&f->fps, &f->cap_fps, f->ncodes * UNW_FP_MAX + 1, 1))
        return REMORA_ENOMEM;
    if (f->late)
        have_gen = 0;
    reqs_reset(f);
    for (i = 0; i < f->ncodes; i++) {
        unw_code_t *e = code_cache_peek(u->codes, f->codes[i]);
        const uint64_t *hit;
        if (e == NULL || (have_gen && e->gen == post))
            continue;
        hit = f->nspec_codes && !f->late ? bsearch(&f->codes[i], f->spec_codes, f->nspec_codes, sizeof *hit, cmp_u64) : NULL;
        if (hit != NULL)
            memcpy(f->fps + i * UNW_FP_MAX, f->spec_fps + (size_t)(hit - f->spec_codes) * UNW_FP_MAX, UNW_FP_MAX);
        else if (add_fp(u, f, f->codes[i], f->fps + i * UNW_FP_MAX))
            return REMORA_ENOMEM;
    }
    if (merge_reqs_from(f, &n, 0))
        return REMORA_ENOMEM;
    staged_fix(f);
    if (n > 0 && (err = proc_readv(u->p, f->iov, n)) != REMORA_OK)
        return err == REMORA_ENOPROC ? err : REMORA_ECORRUPT;
    if (n > 0)
        scatter_reqs(f);
    for (i = 0; i < f->ncodes; i++) {
        unw_code_t *e = code_cache_peek(u->codes, f->codes[i]);
        if (e != NULL && !(have_gen && e->gen == post) && !code_fp_same(e, L, f->fps + i * UNW_FP_MAX)) {
            code_cache_drop(u->codes, f->codes[i]);
            e = NULL;
        }
        if (e == NULL) {
            err = code_cache_get(u->codes, u->p, u->t, f->codes[i], &e);
            if (err)
                return err;
            e->fresh = f->stamp;
        }
        e->stamp = f->stamp;
        e->gen = have_gen ? pre : 0;
    }
    /* next sample validates these in its first read */
    if (!have_gen) {
        size_t keep = f->ncodes < FAST_SPEC_CODES ? f->ncodes : FAST_SPEC_CODES;
        if (f->spec_codes == NULL && (f->spec_codes = malloc(FAST_SPEC_CODES * sizeof *f->spec_codes)) == NULL)
            return REMORA_ENOMEM;
        if (f->spec_fps == NULL && (f->spec_fps = malloc(FAST_SPEC_CODES * UNW_FP_MAX)) == NULL)
            return REMORA_ENOMEM;
        if (keep > 0) {
            memcpy(f->spec_codes, f->codes, keep * sizeof *f->codes);
            qsort(f->spec_codes, keep, sizeof *f->spec_codes, cmp_u64);
        }
        f->nspec_codes = keep;
    } else {
        f->nspec_codes = 0;
    }
    return REMORA_OK;
}

/* A thread state made for a thread that has not started yet carries its creator's ids
 * (3.9-3.11) or no native id (3.12+) until that thread runs. Such a state with no frame
 * has no thread of its own yet: dropped. A thread with frames whose native id is 0, or
 * shared with another state that is not merely its unstarted child, cannot be named:
 * counted as an error. On 3.9/3.10 native ids come from the last walk of the lists
 * (through pthread_t): a shared one may be stale, so the lists are walked again. */
static void settle_ids(unwinder_t *u, fast_t *f)
{
    const py_layout_t *L = &u->t->layout;
    size_t i, j, keep = 0;

    for (i = 0; i < u->nthreads; i++) {
        unw_thread_t *th = &u->threads[i];
        uint64_t pt = get_u64(f->threads[i].ts, L->ts_thread_id);
        int shared = th->native_id == 0, later = 0, framed = 0, stale = 0;
        for (j = 0; j < u->nthreads; j++) {
            const unw_thread_t *o = &u->threads[j];
            if (j == i || o->native_id != th->native_id)
                continue;
            shared = 1;
            later |= j > i;     /* new states are pushed at the head: j is older */
            framed |= o->nframes > 0 && !o->error;
            stale |= get_u64(f->threads[j].ts, L->ts_thread_id) != pt;
        }
        if (L->ts_native_thread_id == 0) {
            /* a state freed and made again at the same address for another thread */
            fast_thread_t *ft = &f->threads[i];
            if (ft->pthread_seen != 0 && ft->pthread_seen != pt && !th->error) {
                th->error = REMORA_ECORRUPT;
                th->nframes = 0;
                f->valid = 0;
            }
            ft->pthread_seen = pt;
            if (shared)
                f->valid = 0;
        }
        if (shared && !th->error && th->nframes == 0 && (th->native_id == 0 || later || framed))
            continue;           /* not started yet */
        if (shared && !th->error && th->nframes > 0 && (th->native_id == 0 || framed || stale)) {
            th->error = REMORA_ECORRUPT;
            th->nframes = 0;
        }
        u->threads[keep++] = *th;
    }
    u->nthreads = keep;
}

/* Bytes to copy from t->base: at least 'len', within the chunk when its size is known. */
static size_t clamp_copy(const fast_thread_t *t, size_t len)
{
    size_t off = (size_t)(t->base - t->chunk);

    if (len > FAST_MAX_COPY)
        len = FAST_MAX_COPY;
    if (t->chunk_size && off < t->chunk_size && off + len > t->chunk_size)
        len = t->chunk_size - off;
    return len;
}

/* --frame-anchor, before the walk: has the anchor stayed where it was (copy from it),
 * moved to one of the frames remembered below it (copy from there), or gone? */
static void anchor_before(unwinder_t *u, fast_thread_t *t)
{
    const py_layout_t *L = &u->t->layout;
    uint64_t lp = get_u64(t->ts, L->ts_last_profiled), seq = get_u64(t->ts, L->ts_last_profiled_seq);
    size_t j;

    if (t->anc_state != ANC_CACHED || (lp == t->anc && seq == t->anc_seq))
        return;
    /* The anchor frame returned: the interpreter moved the anchor to its caller, and on
     * to that one's caller if it returned too, counting in seq. Such a caller and all
     * below it are unchanged since they were remembered; the caller now runs, so it is
     * copied. */
    if (seq != t->anc_seq)
        for (j = 0; j < t->nbelow; j++)
            if (t->below[j].addr == lp) {
                if (t->below[j].src != -1 || t->below[j].shim || lp < t->chunk + FAST_CHUNK_HDR)
                    break;
                memmove(t->below, t->below + j + 1, (t->nbelow - j - 1) * sizeof *t->below);
                t->nbelow -= j + 1;
                t->copy_len += (size_t)(t->base - lp);
                t->base = t->anc = lp;
                t->anc_seq = seq;
                t->copied = 0;
                return;
            }
    anchor_drop(t);
}

/* --frame-anchor, after a consistent walk of nw frames: remember the frames below a
 * written anchor (this copy was taken after the write), or write one. Returns 0,
 * REMORA_ECORRUPT (the anchor moved while the frames were copied) or
 * REMORA_ENOPROC/REMORA_ENOMEM. */
static int anchor_after(unwinder_t *u, fast_t *f, fast_thread_t *t, size_t nw)
{
    const py_layout_t *L = &u->t->layout;
    uint64_t lp = get_u64(t->ts, L->ts_last_profiled), seq = get_u64(t->ts, L->ts_last_profiled_seq);
    size_t j, above = 0;
    int err;

    if (t->copied == 0 || t->lp_end[0] != lp || t->lp_end[1] != seq) {
        if (t->anc_state == ANC_CACHED)
            return REMORA_ECORRUPT;
        if (t->anc_state == ANC_WRITTEN)
            t->anc_state = ANC_NONE;
        return REMORA_OK;
    }
    if (t->anc_state == ANC_WRITTEN) {
        /* lp is what was written, or a caller it moved to: none of those frames returned
         * since the write, and this copy is from after it */
        t->anc_state = ANC_NONE;
        for (j = 0; j < nw; j++)
            if (f->walk[j].addr == lp)
                break;
        if (j == nw || f->walk[j].src != -1 || f->walk[j].shim || f->walk[j].cached ||
            lp < t->chunk + FAST_CHUNK_HDR)
            return REMORA_OK;
        if (remora_grow((void **)&t->below, &t->cap_below, nw - j, sizeof *t->below))
            return REMORA_ENOMEM;
        memcpy(t->below, f->walk + j + 1, (nw - j - 1) * sizeof *t->below);
        for (t->nbelow = 0; t->nbelow < nw - j - 1; t->nbelow++)
            t->below[t->nbelow].cached = 1;
        t->anc = lp;
        t->anc_seq = seq;
        t->anc_state = ANC_CACHED;
        t->copy_len = t->copy_len > (size_t)(lp - t->base) ? t->copy_len - (size_t)(lp - t->base) : FAST_MIN_COPY;
        t->base = lp;
        return REMORA_OK;
    }
    if (t->anc_state == ANC_CACHED) {
        for (j = 0; j < nw && f->walk[j].addr != t->anc; j++)
            above++;
        if (above <= ANC_REWRITE)
            return REMORA_OK;
    }
    /* anchor the innermost frame of the chunk: the interpreter moves it down as frames
     * return, so it stays valid however the top of the stack changes */
    for (j = 0; j < nw; j++)
        if (f->walk[j].src == -1 && !f->walk[j].shim && !f->walk[j].cached)
            break;
    if (j == nw)
        return REMORA_OK;
    err = proc_write_u64(u->p, t->tstate + L->ts_last_profiled, f->walk[j].addr);
    if (err == REMORA_ENOPROC)
        return err;
    anchor_drop(t);
    if (err) {
        t->anc_state = ANC_OFF;         /* not writable: sample without */
        return REMORA_OK;
    }
    t->anc = f->walk[j].addr;
    t->anc_seq = seq;
    t->anc_state = ANC_WRITTEN;
    return REMORA_OK;
}

/* 3.9/3.10: a thread's remembered blocks twice and its current frame again, in one
 * read (what read_states() reads for it when it is not expected to be parked). */
static int reread_blocks(unwinder_t *u, fast_t *f, fast_thread_t *t)
{
    size_t n = 0, k;

    for (k = 0; k < t->nsb; k++)
        if (add_iov(f, &n, t->sb[k].addr, t->sb[k].one, t->sb[k].len))
            return REMORA_ENOMEM;
    for (k = 0; k < t->nsb; k++)
        if (add_iov(f, &n, t->sb[k].addr, t->sb[k].two, t->sb[k].len))
            return REMORA_ENOMEM;
    if (add_iov(f, &n, cur_ptr_addr(&u->t->layout, t), &t->cur_end, 8))
        return REMORA_ENOMEM;
    f->late = 1;
    return proc_readv(u->p, f->iov, n);
}

/* Does the walk saved for a parked thread still hold? Its frames move only while it
 * holds the GIL, and it has not taken the GIL since the walk if the GIL's last holder
 * is the same other thread and its switch count has not moved (take_gil() counts
 * every change of holder). Its current frame must be the same too: a thread state
 * swapped in under another's GIL (PyThreadState_Swap) runs without counting. */
static int parked_holds(const py_layout_t *L, const fast_interp_t *fi, const fast_thread_t *t)
{
    if (!t->reuse || !fi->sw_ok || fi->sw != t->saved_sw || fi->holder != t->saved_holder ||
        fi->holder == t->tstate)
        return 0;
    if (L->frames_kind == PY_FRAMES_CFRAME)
        return get_u64(t->ts, L->ts_frame) == t->saved_cframe && t->cur_spec == t->saved_cur;
    return get_u64(t->ts, L->ts_frame) == t->saved_cur;
}

/* After a consistent walk of nw frames from 'cur': keep it if another thread holds the
 * GIL (this one is parked, or about to be). Returns 0 or -1 (no memory). */
static int park_save(fast_t *f, const fast_interp_t *fi, fast_thread_t *t, uint64_t cur, size_t nw)
{
    t->saved_ok = 0;
    if (!fi->sw_ok || fi->holder == t->tstate || nw == 0)
        return 0;
    if (remora_grow((void **)&t->saved, &t->cap_saved, nw, sizeof *t->saved))
        return -1;
    memcpy(t->saved, f->walk, nw * sizeof *t->saved);
    t->nsaved = nw;
    t->saved_sw = fi->sw;
    t->saved_holder = fi->holder;
    t->saved_cur = cur;
    t->saved_cframe = t->cframe;
    t->saved_ok = 1;
    return 0;
}

static int sample_once(unwinder_t *u, fast_t *f)
{
    const py_layout_t *L = &u->t->layout;
    size_t i, nframes_total = 0;
    int err, attempt;

    for (attempt = 0;; attempt++) {
        if (!f->valid && (err = rebuild(u, f)) != REMORA_OK)
            return err;
        err = read_states(u, f);
        if (err == REMORA_ENOPROC || err == REMORA_ENOMEM || err == REMORA_EPERM)
            return err;
        if (err == REMORA_OK && lists_unchanged(L, f))
            break;
        /* a chunk or cframe may have been freed: read without speculation next time */
        for (i = 0; i < f->nthreads; i++) {
            f->threads[i].chunk = 0;
            f->threads[i].base = 0;
            f->threads[i].cframe = 0;
            f->threads[i].nsb = 0;
            if (f->threads[i].anc_state != ANC_OFF)
                f->threads[i].anc_state = ANC_NONE;
            f->threads[i].nbelow = 0;
        }
        f->nspec_codes = 0;
        f->valid = 0;
        if (attempt == 2)
            return REMORA_ECORRUPT;
    }

    if (remora_grow((void **)&u->threads, &u->cap_threads, f->nthreads, sizeof *u->threads))
        return REMORA_ENOMEM;
    u->nthreads = f->nthreads;
    u->thread_samples += f->nthreads;
    f->stamp++;
    f->ncodes = 0;
    f->late = 0;
    f->fresh = 0;
    /* pass 1: walk every thread, keeping raw frames in u->frames */
    for (i = 0; i < f->nthreads; i++) {
        fast_thread_t *t = &f->threads[i];
        const fast_interp_t *fi = &f->interps[t->interp];
        unw_thread_t *th = &u->threads[i];
        uint64_t cur, chunk_now;
        size_t nw = 0, need = 0, k, tries;

        memset(th, 0, sizeof *th);
        if (L->ts_native_thread_id != 0) {
            /* set by the thread itself once it runs: read it every sample */
            uint64_t nid = get_u64(t->ts, L->ts_native_thread_id);
            t->native_id = nid < (1u << 31) ? (pid_t)nid : 0;
        } else if (t->tid_now > 0 && get_u64(t->ts, L->ts_thread_id) == t->pthread_seen) {
            t->native_id = t->tid_now;
        }

        th->tstate = t->tstate;
        th->interp = fi->addr;
        th->interp_id = fi->id;
        th->native_id = t->native_id;
        th->is_main = t->native_id == proc_pid(u->p);
        th->holds_gil = fi->locked && fi->holder == t->tstate;
        th->gc = fi->gc != 0;
        /* 3.9/3.10: another thread took over that struct pthread during the read: the
         * state and stack read may be either thread's */
        if (L->ts_native_thread_id == 0 && !t->reuse && t->tid_now != t->tid_end) {
            th->error = REMORA_ECORRUPT;
            goto thread_done;
        }
        if (u->want & UNW_WANT_EXC)     /* from this sample's copy of the thread state */
            th->handling_exc = unw_exc_state(u, t->tstate, t->ts);
        /* a parked thread too: one that released the GIL may be running C code */
        if (th->native_id > 0 && (u->want & UNW_WANT_CPU)) {
            char state;
            if (proc_task_state(u->p, th->native_id, &state) == REMORA_OK)
                th->on_cpu = state == 'R';
        }
        if (th->native_id > 0 && (u->want & UNW_WANT_NAMES))
            proc_task_name(u->p, th->native_id, th->name, sizeof th->name);
        if (t->reuse) {
            if (parked_holds(L, fi, t)) {
                /* still parked: the saved walk, nothing read */
                u->parked++;
                memcpy(f->walk, t->saved, t->nsaved * sizeof *f->walk);
                nw = t->nsaved;
                goto frames;
            }
            /* it ran: read it now. 3.9/3.10: its frame objects in the blocks remembered,
             * in one read as the first read would have (one copy, the other, the current
             * frame again); 3.11+: the chunk is copied below, the few frames outside it
             * found again */
            t->reuse = 0;
            t->saved_ok = 0;
            if (L->frames_kind != PY_FRAMES_OBJECTS || reread_blocks(u, f, t) != REMORA_OK)
                t->nsb = 0;
        }

        if (L->frames_kind == PY_FRAMES_CFRAME) {
            uint64_t cf = get_u64(t->ts, L->ts_frame);
            if (cf != t->cframe || cf == 0) {
                /* the eval loop's cframe moved: read through it, copy again */
                t->cframe = cf;
                t->copied = 0;
                cur = 0;
                if (cf != 0 && (th->error = proc_read_u64(u->p, cf + L->cframe_current_frame, &cur)) != 0)
                    goto thread_done;
            } else {
                cur = t->cur_spec;
            }
            /* a nested eval loop publishes its cframe before setting the frame in it:
             * only the thread state's own root cframe may hold no frame */
            if (cf != 0 && cur == 0 && (cf < t->tstate || cf - t->tstate >= L->ts_size)) {
                th->error = REMORA_ECORRUPT;
                goto thread_done;
            }
        } else {
            cur = get_u64(t->ts, L->ts_frame);
        }
        if (L->frames_kind != PY_FRAMES_OBJECTS) {
            chunk_now = get_u64(t->ts, L->ts_datastack_chunk);
            if (chunk_now != t->chunk) {
                t->chunk = t->base = chunk_now;
                t->chunk_size = 0;
                t->copied = 0;
                t->copy_len = FAST_MIN_COPY;
                if (t->anc_state != ANC_OFF)
                    t->anc_state = ANC_NONE;
                t->nbelow = 0;
            }
            if (anchoring(u, t))
                anchor_before(u, t);
            else if (t->base != t->chunk)
                anchor_drop(t);
        }
        for (tries = 0;; tries++) {
            if (L->frames_kind != PY_FRAMES_OBJECTS && t->chunk && t->copied == 0 && cur != 0) {
                /* nothing copied yet this sample: copy what the current frame needs */
                size_t want = cur > t->base && cur - t->base < FAST_MAX_COPY ? (size_t)(cur - t->base) + L->fr_size : FAST_MIN_COPY;
                if (want < t->copy_len)
                    want = t->copy_len;
                want = clamp_copy(t, want);
                if ((th->error = recopy(u, f, t, want)) != 0)
                    goto thread_done;
            }
            if (t->copied >= FAST_CHUNK_HDR && t->base == t->chunk) {
                uint64_t sz = get_u64(t->a, 8);
                t->chunk_size = sz >= FAST_CHUNK_HDR && sz <= (1u << 30) ? (size_t)sz : 0;
            }
            /* with a copy, walk from the frame that was current between its two halves */
            if (t->copied)
                cur = t->cur_mid;
            th->error = walk(u, f, t, cur, &nw, &need);
            if (th->error || need == 0)
                break;
            if (tries == 2) {
                th->error = REMORA_ECORRUPT;
                break;
            }
            if (need == SIZE_MAX) {
                anchor_drop(t);
                t->copied = 0;
                continue;
            }
            t->copy_len = clamp_copy(t, need + 1024);
            t->copied = 0;
        }
        if (th->error == REMORA_OK)
            th->error = walk_consistent(u, f, t, cur, nw);
        /* 3.11-3.13: every thread's first frame is its outermost eval loop's entry frame
         * (3.12/3.13: a C-owned shim whose previous is NULL; 3.11: marked is_entry); a
         * walk that ends anywhere else followed a link not yet written (a frame pushed
         * but not linked to its caller yet) */
        if (th->error == REMORA_OK && nw > 0 &&
            (L->minor == 11 ? !f->walk[nw - 1].entry
                            : (L->minor == 12 || L->minor == 13) && !f->walk[nw - 1].shim))
            th->error = REMORA_ECORRUPT;
        if (th->error == REMORA_OK && t->chunk && anchoring(u, t) &&
            (th->error = anchor_after(u, f, t, nw)) == REMORA_ENOPROC)
            return REMORA_ENOPROC;
        if (th->error == REMORA_ENOMEM)
            return REMORA_ENOMEM;
        if (th->error == REMORA_OK && t->chunk) {
            /* next time copy a little more than this stack used, from where the copies
             * start (the chunk, or the anchor) */
            uint64_t top = t->base;
            for (k = 0; k < nw; k++)
                if (f->walk[k].src == -1 && !f->walk[k].cached && f->walk[k].addr + L->fr_size > top)
                    top = f->walk[k].addr + L->fr_size;
            if (cur > t->base && cur - t->base < FAST_MAX_COPY && cur + L->fr_size > top)
                top = cur + L->fr_size;
            t->copy_len = (size_t)(top - t->base) + 256;
            if (t->copy_len < FAST_MIN_COPY && t->base == t->chunk)
                t->copy_len = FAST_MIN_COPY;
            t->copy_len = clamp_copy(t, t->copy_len);
        }
        if (th->error)
            goto thread_done;
        if (learn_blocks(L, f, t, nw) || park_save(f, fi, t, cur, nw))
            return REMORA_ENOMEM;
frames:
        if (remora_grow((void **)&u->frames, &u->cap_frames, nframes_total + nw, sizeof *u->frames))
            return REMORA_ENOMEM;
        th->frames = (unw_frame_t *)(uintptr_t)nframes_total;
        for (k = 0; k < nw; k++) {
            /* stash (code, instr) until the code objects are resolved */
            unw_frame_t *fr;
            if (f->walk[k].shim)
                continue;
            fr = &u->frames[nframes_total++];
            fr->function = (const char *)(uintptr_t)f->walk[k].code;
            fr->file = (const char *)(uintptr_t)f->walk[k].instr;
            fr->line = f->walk[k].entry;    /* until named: is_entry, for pass 2 */
            th->nframes++;
            if (note_code(f, u->codes, f->walk[k].code))
                return REMORA_ENOMEM;
        }
thread_done:
        if (th->error == REMORA_ENOPROC)
            return REMORA_ENOPROC;
        if (th->error) {
            /* a torn read keeps what was learnt; a failed read forgets the guesses */
            t->copied = 0;
            t->saved_ok = 0;
            if (th->error != REMORA_ECORRUPT)
                t->nsb = 0;
        }
    }

    /* pass 2: validate the code objects once, then name every frame. With a counter
     * that moves whenever a code object is made (3.12, 3.13) or freed (3.14+), an entry
     * validated at the current value needs no read; 0 means the counter is not usable.
     * The value last sample read serves as this sample's 'pre' (resolve_codes). */
    {
        int have_gen = L->is_code_generation || L->is_code_version || u->t->code_version;
        uint64_t pre = f->gen_last, post = f->gen_global;
        for (i = 0; i < f->ninterps; i++)
            post = post * 0x9e3779b97f4a7c15ull + f->interps[i].gen + 1;
        if (u->t->code_version ? f->gen_global == 0 : f->ninterps == 0 || f->interps[0].gen == 0)
            have_gen = 0;
        f->gen_last = have_gen ? post : 0;
        if (pre == 0)
            have_gen = 0;
        err = resolve_codes(u, f, have_gen, pre, post);
        if (err == REMORA_ENOPROC || err == REMORA_ENOMEM)
            return err;
        if (err) {
            for (i = 0; i < u->nthreads; i++) {
                if (!u->threads[i].error)
                    u->threads[i].error = REMORA_ECORRUPT;
                u->threads[i].nframes = 0;
                u->threads[i].frames = u->frames;
            }
            return REMORA_OK;
        }
    }
    for (i = 0; i < u->nthreads; i++) {
        unw_thread_t *th = &u->threads[i];
        size_t base = (size_t)(uintptr_t)th->frames, k;
        int callee_entry = 1;               /* the innermost frame has no callee */
        uint64_t last_code = 0;
        unw_code_t *last_e = NULL;
        th->frames = u->frames + (th->error ? 0 : base);
        if (th->error) {
            th->nframes = 0;
            continue;
        }
        for (k = 0; k < th->nframes; k++) {
            unw_frame_t *fr = &th->frames[k];
            uint64_t code = (uint64_t)(uintptr_t)fr->function, instr = (uint64_t)(uintptr_t)fr->file;
            unw_code_t *e = code == last_code ? last_e : code_cache_peek(u->codes, code);
            int addrq, entry = fr->line;
            /* fetched after the frame was copied (or pushed out of the cache since):
             * perhaps another code object than the frame's, made at the same address */
            if (e == NULL || e->fresh == f->stamp) {
                th->error = REMORA_ECORRUPT;
                th->nframes = 0;
                f->fresh++;
                break;
            }
            if (L->frames_kind == PY_FRAMES_OBJECTS) {
                int32_t lasti = (int32_t)(uint32_t)instr;
                if (lasti < -1 || lasti > 1 << 29)      /* -1: not started */
                    lasti = -1;
                addrq = L->lines_kind == PY_LINES_310 ? lasti * 2 : lasti;
            } else {
                int64_t off = (int64_t)(instr - (code + L->co_code_adaptive));
                addrq = off < -2 || off > (int64_t)1 << 30 ? -1 : (int)(off / 2) * 2;
            }
            /* 3.11: a frame whose callee it pushed inline (not an eval loop's entry
             * frame) rests on the last cache entry of its CALL or BINARY_SUBSCR while
             * the callee runs; resting anywhere else, it is running, and the callee is
             * a stale frame left above it from an earlier call. */
            if (L->minor == 11 && !callee_entry &&
                code_calls_at(e, (int64_t)(instr - (code + L->co_code_adaptive)) / 2) == 0) {
                th->error = REMORA_ECORRUPT;
                th->nframes = 0;
                break;
            }
            fr->function = e->function;
            fr->file = e->file;
            fr->line = code_line(e, L, addrq);
            callee_entry = entry;
            last_code = code;
            last_e = e;
        }
    }
    settle_ids(u, f);
    return REMORA_OK;
}

int unw_sample(unwinder_t *u, unw_thread_t **threads, size_t *n)
{
    fast_t *f = u->fast;
    int err;

    *threads = NULL;
    *n = 0;
    if (f == NULL) {
        f = calloc(1, sizeof *f);
        if (f == NULL)
            return REMORA_ENOMEM;
        f->walk = malloc(UNW_MAX_DEPTH * sizeof *f->walk);
        f->scratch = malloc(UNW_MAX_DEPTH * sizeof *f->scratch);
        if (f->walk == NULL || f->scratch == NULL) {
            free(f->walk);
            free(f->scratch);
            free(f);
            return REMORA_ENOMEM;
        }
        u->fast = f;
    }
    if (u->t->layout.ts_size > 65536 || u->t->layout.fr_size > 4096 || u->t->layout.fr_size < 16)
        return REMORA_ECORRUPT;
    err = sample_once(u, f);
    /* threads dropped for code objects first read this sample: once more, with them
     * cached (whatever was new is checked against the frames this time) */
    if (err == REMORA_OK && f->fresh > 0)
        err = sample_once(u, f);
    if (err)
        return err;
    *threads = u->threads;
    *n = u->nthreads;
    return REMORA_OK;
}
