/* unwind/copy.c — the first read of a sample and the copies of each thread's stack.
 *
 * One vectored read: every interpreter's list heads, GIL and GC state, every thread
 * state, and (3.11+) the live part of each thread's data-stack chunk copied twice with
 * the current-frame pointer read between the copies and again after; then the
 * code-object counters and last sample's fingerprints (naming.c), after every copy.
 * copy_again() copies one thread's chunk again when the walk needs more of it.
 */
#include <stdlib.h>
#include <string.h>

#include "remora.h"
#include "internal.h"

/* Requests the reads that follow a thread's second copy: the current frame pointer and,
 * with an anchor, last_profiled_frame and its seq -- one range when they sit together
 * in the thread state (3.15), unpacked by unpack_tail() once read. */
static int add_end_reads(unwinder_t *u, reader_t *r, rd_thread_t *tc, uint64_t cp)
{
    const py_layout_t *L = &u->target->layout;

    tc->tail_len = 0;
    tc->ds_end[0] = tc->ds_end[1] = 0;
    if (L->frames_kind == PY_FRAMES_CFRAME && tc->cfw_len > 0 &&
        batch_req(r, tc->cfw_lo, tc->cfw + RD_CFW_MAX, tc->cfw_len))
        return -1;
    /* 3.11+: the data stack's chunk and top once more, after the second copies: a frame
     * in the chunk below the top then, and at the round's start, lived through the copies
     * (walk_check, the frame walked from). datastack_top follows datastack_chunk in every
     * version's thread state; checked where it is used */
    if (L->ts_datastack_chunk && L->ts_datastack_chunk + PY_TS_DATASTACK_SPAN <= L->ts_size &&
        batch_req(r, tc->tstate + L->ts_datastack_chunk, tc->ds_end, PY_TS_DATASTACK_SPAN))
        return -1;
    if (anchor_on(u, tc) && cp == tc->tstate + L->ts_frame && L->ts_last_profiled > L->ts_frame &&
        L->ts_last_profiled + PY_TS_LAST_PROFILED_SPAN - L->ts_frame <= sizeof tc->tail) {
        tc->tail_len = (size_t)(L->ts_last_profiled + PY_TS_LAST_PROFILED_SPAN - L->ts_frame);
        return batch_req(r, cp, tc->tail, tc->tail_len);
    }
    if (batch_req(r, cp, &tc->cur_end, 8))
        return -1;
    if (anchor_on(u, tc) && batch_req(r, tc->tstate + L->ts_last_profiled, tc->lp_end, PY_TS_LAST_PROFILED_SPAN))
        return -1;
    return 0;
}

static void unpack_tail(const py_layout_t *L, rd_thread_t *tc)
{
    if (tc->tail_len == 0)
        return;
    memcpy(&tc->cur_end, tc->tail, 8);
    memcpy(tc->lp_end, tc->tail + (L->ts_last_profiled - L->ts_frame), PY_TS_LAST_PROFILED_SPAN);
}

/* 3.11/3.12: a thread's current frame is its innermost eval loop's cframe's, and that
 * cframe is a local of the loop, on the C stack: the state names another whenever C code
 * calls back into Python or returns (a class made, a generator resumed: on Django's
 * templates most of a thread's readings, 87% of them before the copies' middle). So the
 * thread state's cframe is read just before the current frame between the copies, and
 * with the current frame through last sample's cframe the window of the C stack that
 * holds the current_frame of every cframe seen lately is copied, again after the second
 * copies: copy_cframe_settle() takes the current frame through the cframe current then. */
static int cfw_holds(const rd_thread_t *tc, uint64_t f)
{
    return tc->cfw_len > 0 && f >= tc->cfw_lo && f - tc->cfw_lo <= tc->cfw_len - 8;
}

int copy_cfw_holds(const py_layout_t *L, const rd_thread_t *tc, uint64_t cf)
{
    return L->frames_kind == PY_FRAMES_CFRAME && cf + L->cframe_current_frame >= cf &&
           cfw_holds(tc, cf + L->cframe_current_frame);
}

/* (internal.h) The window's bytes are the current_frame fields' addresses, f. */
int copy_cfw_learn(const py_layout_t *L, rd_thread_t *tc, uint64_t cf)
{
    uint64_t f = cf + L->cframe_current_frame, lo, hi;

    if (cf == 0 || f < cf || !cf_nested(L, tc, cf) || cfw_holds(tc, f) ||
        f > UINT64_MAX - 8)
        return 0;
    if (tc->cfw == NULL && (tc->cfw = malloc(2 * (size_t)RD_CFW_MAX)) == NULL)
        return -1;
    if (tc->cfw_len == 0) {
        lo = f;
        hi = f + 8;
    } else if (f < tc->cfw_lo) {
        lo = f;
        hi = tc->cfw_lo + tc->cfw_len;
        if (hi - lo > RD_CFW_MAX)
            hi = lo + RD_CFW_MAX;
    } else {
        hi = f + 8;
        lo = tc->cfw_lo;
        if (hi - lo > RD_CFW_MAX)
            lo = hi - RD_CFW_MAX;
    }
    tc->cfw_lo = lo;
    tc->cfw_len = (size_t)(hi - lo);
    return 0;
}

/* (internal.h) The cframe read through holds if it was the state's just before the
 * current frame was read (cf_mid); else the window's two copies give cur_mid and cur_end
 * through cf_mid. Then tc->cframe is the one they were read through, as walk_check()
 * compares with the state's cframe read last (cf_end). */
int copy_cframe_settle(const py_layout_t *L, rd_thread_t *tc)
{
    uint64_t f = tc->cf_mid + L->cframe_current_frame;

    tc->cfw_hit = 0;
    if (L->frames_kind != PY_FRAMES_CFRAME || !tc->copied || tc->cf_mid == 0)
        return 0;
    if (tc->cf_mid == tc->cframe) {
        tc->cfw_hit = 1;
    } else if (f >= tc->cf_mid && cfw_holds(tc, f)) {
        tc->cframe = tc->cf_mid;
        tc->cur_mid = get_u64(tc->cfw, (size_t)(f - tc->cfw_lo));
        tc->cur_end = get_u64(tc->cfw + RD_CFW_MAX, (size_t)(f - tc->cfw_lo));
        tc->cfw_hit = 1;
    }
    return copy_cfw_learn(L, tc, tc->cf_mid) || copy_cfw_learn(L, tc, tc->cf_end) ? -1 : 0;
}

/* The reads between the copies: the current frame (3.11/3.12: the state's cframe first,
 * the window after). -1: out of memory. */
static int add_mid_reads(const py_layout_t *L, reader_t *r, rd_thread_t *tc, size_t *n, uint64_t cp)
{
    int cf = L->frames_kind == PY_FRAMES_CFRAME;

    tc->cf_mid = 0;
    return (cf && batch_iov(r, n, tc->tstate + L->ts_frame, &tc->cf_mid, 8)) ||
           batch_iov(r, n, cp, &tc->cur_mid, 8) ||
           (cf && tc->cfw_len > 0 && batch_iov(r, n, tc->cfw_lo, tc->cfw, tc->cfw_len)) ? -1 : 0;
}

/* Makes room for two copies of len bytes. */
static int copy_room(rd_thread_t *tc, size_t len)
{
    unsigned char *na, *nb;

    if (len <= tc->cap)
        return 0;
    na = realloc(tc->a, len);
    if (na == NULL)
        return -1;
    tc->a = na;
    nb = realloc(tc->b, len);
    if (nb == NULL)
        return -1;
    tc->b = nb;
    tc->cap = len;
    return 0;
}

/* The address of an interpreter's GIL state (the runtime's before 3.12), or 0. */
static uint64_t gil_base(const py_layout_t *L, uint64_t rt, const rd_interp_t *fi)
{
    return L->gil_in_interp ? fi->gil : rt;
}

/* The address that holds a thread's current frame pointer. */
uint64_t copy_cur_ptr(const py_layout_t *L, const rd_thread_t *tc)
{
    if (L->frames_kind == PY_FRAMES_CFRAME)
        return tc->cframe ? tc->cframe + L->cframe_current_frame : 0;
    return tc->tstate + L->ts_frame;
}

/* Requests the round's state: the interpreter list's head; each interpreter's thread
 * list, next, GIL and GC state; each thread's state (and cframe's current frame, and
 * 3.9/3.10 the tid in its struct pthread); which threads are expected still parked; and
 * 3.11+ the first copies of the frames outside the chunks. -1: out of memory. */
static int req_state(unwinder_t *u, reader_t *r)
{
    const py_layout_t *L = &u->target->layout;
    uint64_t rt = u->target->runtime;
    size_t i, k;

    if (batch_req(r, rt + L->rt_interpreters_head, &r->rt_head, 8))
        return -1;
    for (i = 0; i < r->ninterps; i++) {
        rd_interp_t *fi = &r->interps[i];
        uint64_t gil = gil_base(L, rt, fi);
        fi->last_sw = fi->sw_ok ? fi->sw : 0;
        fi->last_holder = fi->holder;
        fi->locked = 0;
        fi->holder = 0;
        fi->gc = 0;
        if (batch_req(r, fi->addr + L->is_threads_head, &fi->head, 8) ||
            batch_req(r, fi->addr + L->is_next, &fi->next, 8))
            return -1;
        if (gil != 0 && (batch_req(r, gil + L->gil_locked, &fi->locked, 4) ||
                         batch_req(r, gil + L->gil_holder, &fi->holder, 8)))
            return -1;
        /* the GIL's switch count moves whenever a thread takes it from another */
        fi->sw = 0;
        fi->sw_ok = gil != 0 && L->gil_switch != 0;
        if (fi->sw_ok && batch_req(r, gil + L->gil_switch, &fi->sw, 8))
            return -1;
        if ((u->want & UNW_WANT_GC) && batch_req(r, fi->addr + L->is_gc_collecting, &fi->gc, 4))
            return -1;
    }
    for (i = 0; i < r->nthreads; i++) {
        rd_thread_t *tc = &r->threads[i];
        uint64_t cp = copy_cur_ptr(L, tc);
        tc->cur_spec = 0;
        if (batch_req(r, tc->tstate, tc->ts, L->ts_read) ||
            (L->frames_kind == PY_FRAMES_CFRAME && cp && batch_req(r, cp, &tc->cur_spec, 8)))
            return -1;
        /* 3.9/3.10 keep no native id: the tid in the thread's struct pthread, read each
         * sample, since a new thread may take over both a freed state and a cached stack */
        tc->tid_now = 0;
        if (L->ts_native_thread_id == 0 && u->pthread_tid_off >= 0 && tc->pthread_seen != 0 &&
            batch_req(r, tc->pthread_seen + (uint64_t)u->pthread_tid_off, &tc->tid_now, 4))
            return -1;
    }
    /* 3.11+: the first copies of the frames outside the chunks (C-stack entry frames,
     * generators) join the state: any time before the current frame is read between
     * the chunk's two copies will do */
    for (i = 0; i < r->nthreads; i++) {
        rd_thread_t *tc = &r->threads[i];
        const rd_interp_t *fi = &r->interps[tc->interp];
        /* parked at the last sample and the GIL has not changed hands since it was
         * saved: expect it still parked (checked once this read is in) */
        tc->reuse = tc->saved_ok && fi->sw_ok && fi->last_sw == tc->saved_sw && fi->last_holder == tc->saved_holder;
    }
    if (L->frames_kind != PY_FRAMES_OBJECTS)
        for (i = 0; i < r->nthreads; i++)
            for (k = 0; k < r->threads[i].nsb && !r->threads[i].reuse; k++)
                if (batch_req(r, r->threads[i].sb[k].addr, r->threads[i].sb[k].one, r->threads[i].sb[k].len))
                    return -1;
    return 0;
}

/* Adds one thread's copies to the read (*n vectors so far), in order: first copies, the
 * current frame, second copies, then what must follow them. Nothing for a thread
 * expected still parked. -1: out of memory. */
static int req_copies(unwinder_t *u, reader_t *r, rd_thread_t *tc, size_t *n)
{
    const py_layout_t *L = &u->target->layout;
    uint64_t cp = copy_cur_ptr(L, tc);
    int copy = L->frames_kind != PY_FRAMES_OBJECTS && tc->chunk && tc->copy_len && cp;
    size_t k, first;

    tc->cur_mid = 0;
    tc->copied = 0;
    tc->tail_len = 0;
    tc->ds_end[0] = tc->ds_end[1] = 0;
    if (tc->reuse)
        return 0;
    /* first copies, the current frame, second copies: the walk starts from a current
     * frame read between two copies that agree, so it is what the copies show */
    if (copy) {
        if (copy_room(tc, tc->copy_len) || batch_iov(r, n, tc->base, tc->a, tc->copy_len))
            return -1;
        tc->copied = tc->copy_len;
    }
    tc->mid_ok = 0;
    if (L->frames_kind == PY_FRAMES_OBJECTS && tc->nsb) {
        /* 3.9/3.10: the frame objects remembered, then the current frame between
         * their two copies: the walk starts there, as from a chunk's copies */
        for (k = 0; k < tc->nsb; k++)
            if (batch_iov(r, n, tc->sb[k].addr, tc->sb[k].one, tc->sb[k].len))
                return -1;
        if (batch_iov(r, n, cp, &tc->cur_mid, 8))
            return -1;
        tc->mid_ok = 1;
    }
    tc->tail_len = 0;
    if (copy && (add_mid_reads(L, r, tc, n, cp) || batch_iov(r, n, tc->base, tc->b, tc->copy_len)))
        return -1;
    /* what must follow the second copies, merged: the current frame (and anchor)
     * again, the second copies of the frames outside the chunk, the cframe again */
    first = r->nreq;
    if (copy && add_end_reads(u, r, tc, cp))
        return -1;
    for (k = 0; k < tc->nsb; k++)
        if (batch_req(r, tc->sb[k].addr, tc->sb[k].two, tc->sb[k].len))
            return -1;
    /* 3.9/3.10: the current frame again, after the blocks' second copies */
    if (L->frames_kind == PY_FRAMES_OBJECTS && tc->nsb) {
        if (batch_merge(r, n, first))
            return -1;
        first = r->nreq;
        if (batch_req(r, cp, &tc->cur_end, 8))
            return -1;
    }
    tc->tid_end = 0;
    if (L->ts_native_thread_id == 0 && u->pthread_tid_off >= 0 && tc->pthread_seen != 0 &&
        batch_req(r, tc->pthread_seen + (uint64_t)u->pthread_tid_off, &tc->tid_end, 4))
        return -1;
    /* 3.11/3.12: the cframe again: a nested eval loop's cframe lives on the C stack,
     * and once that loop returns its current_frame reads NULL or stale */
    if (L->frames_kind == PY_FRAMES_CFRAME && batch_req(r, tc->tstate + L->ts_frame, &tc->cf_end, 8))
        return -1;
    return batch_merge(r, n, first) ? -1 : 0;
}

/* Requests, after every copy, the code-object counters again and the fingerprints of
 * last sample's code objects. Read before a copy, they would vouch for a code object
 * freed and made anew at the same address in between (resolve_codes). -1: out of memory. */
static int req_after_copies(unwinder_t *u, reader_t *r)
{
    const py_layout_t *L = &u->target->layout;
    size_t i, k;

    r->gen_global = 0;
    if (u->target->code_version && batch_req(r, u->target->code_version, &r->gen_global, 4))
        return -1;
    for (i = 0; i < r->ninterps; i++) {
        rd_interp_t *fi = &r->interps[i];
        fi->gen = 0;
        if (L->is_code_generation && batch_req(r, fi->addr + L->is_code_generation, &fi->gen, 8))
            return -1;
        if (!L->is_code_generation && L->is_code_version &&
            batch_req(r, fi->addr + L->is_code_version, &fi->gen, 4))
            return -1;
    }
    for (k = 0; k < r->nspec_codes; k++)
        if (batch_fp(u, r, r->spec_codes[k], r->spec_fps + k * UNW_FP_MAX))
            return -1;
    return 0;
}

/* The first read of a sample: lists, GIL, GC, thread states, chunk copies; first the
 * state, merged, then the copies in order, then what must follow every copy. */
int copy_states(unwinder_t *u, reader_t *r)
{
    size_t n = 0, i, first;
    int err;

    batch_reset(r);
    if (req_state(u, r) || batch_merge(r, &n, 0))
        return REMORA_ENOMEM;
    for (i = 0; i < r->nthreads; i++)
        if (req_copies(u, r, &r->threads[i], &n))
            return REMORA_ENOMEM;
    first = r->nreq;
    if (req_after_copies(u, r) || batch_merge(r, &n, first))
        return REMORA_ENOMEM;
    batch_fix(r);
    err = proc_readv(u->p, r->iov, n);
    if (err == REMORA_OK) {
        batch_scatter(r);
        for (i = 0; i < r->nthreads; i++) {
            unpack_tail(&u->target->layout, &r->threads[i]);
            if (!r->threads[i].reuse && copy_cframe_settle(&u->target->layout, &r->threads[i]))
                return REMORA_ENOMEM;
        }
    }
    return err;
}

/* Copies [t->base, t->base + len) twice, reading the current frame pointer between. */
int copy_again(unwinder_t *u, reader_t *r, rd_thread_t *tc, size_t len)
{
    const py_layout_t *L = &u->target->layout;
    size_t n = 0, k;

    if (copy_room(tc, len))
        return REMORA_ENOMEM;
    batch_reset(r);
    /* the frames remembered outside the chunk (generators, older chunks) are copied with
     * it, the first copies before the current frame is read and the second after */
    for (k = 0; k < tc->nsb; k++)
        if (batch_req(r, tc->sb[k].addr, tc->sb[k].one, tc->sb[k].len))
            return REMORA_ENOMEM;
    if (batch_merge(r, &n, 0))
        return REMORA_ENOMEM;
    k = r->nreq;
    if (batch_iov(r, &n, tc->base, tc->a, len) || add_mid_reads(L, r, tc, &n, copy_cur_ptr(L, tc)) ||
        batch_iov(r, &n, tc->base, tc->b, len) || add_end_reads(u, r, tc, copy_cur_ptr(L, tc)) ||
        (L->frames_kind == PY_FRAMES_CFRAME && batch_req(r, tc->tstate + L->ts_frame, &tc->cf_end, 8)))
        return REMORA_ENOMEM;
    for (size_t j = 0; j < tc->nsb; j++)
        if (batch_req(r, tc->sb[j].addr, tc->sb[j].two, tc->sb[j].len))
            return REMORA_ENOMEM;
    if (batch_merge(r, &n, k) || ident_req(u, r, tc, &n))
        return REMORA_ENOMEM;
    batch_fix(r);
    tc->copied = 0;
    r->late = 1;
    /* read after the state: the state may be another thread's by now */
    if (proc_readv(u->p, r->iov, n)) {
        tc->cfw_len = 0;            /* the window too may be what failed */
        return REMORA_ECORRUPT;
    }
    if (!ident_same(u, tc))
        return REMORA_ECORRUPT;
    batch_scatter(r);
    unpack_tail(L, tc);
    tc->copied = len;
    if (copy_cframe_settle(L, tc))
        return REMORA_ENOMEM;
    if (L->frames_kind == PY_FRAMES_CFRAME && tc->cur0 == 0) {
        /* its current frame left to these copies (thread_current): as it checks */
        tc->cur0 = tc->cur_mid;
        if (tc->cur_mid == 0 && cf_nested(L, tc, tc->cframe))
            return REMORA_ECORRUPT;
    }
    return REMORA_OK;
}

/* Bytes to copy from t->base: at least 'len', within the chunk when its size is known. */
size_t copy_clamp(const rd_thread_t *tc, size_t len)
{
    size_t off = (size_t)(tc->base - tc->chunk);

    if (len > RD_MAX_COPY)
        len = RD_MAX_COPY;
    if (tc->chunk_size && off < tc->chunk_size && off + len > tc->chunk_size)
        len = tc->chunk_size - off;
    return len;
}

int ident_req(unwinder_t *u, reader_t *r, rd_thread_t *tc, size_t *n)
{
    const py_layout_t *L = &u->target->layout;

    tc->late_pt = tc->late_nid = 0;
    tc->late_tid = 0;
    if (batch_iov(r, n, tc->tstate + L->ts_thread_id, &tc->late_pt, 8))
        return -1;
    if (L->ts_native_thread_id != 0)
        return batch_iov(r, n, tc->tstate + L->ts_native_thread_id, &tc->late_nid, 8);
    if (u->pthread_tid_off >= 0 && tc->pthread_seen != 0)
        return batch_iov(r, n, tc->pthread_seen + (uint64_t)u->pthread_tid_off, &tc->late_tid, 4);
    return 0;
}

int ident_same(const unwinder_t *u, const rd_thread_t *tc)
{
    const py_layout_t *L = &u->target->layout;

    if (tc->late_pt != get_u64(tc->ts, L->ts_thread_id))
        return 0;
    if (L->ts_native_thread_id != 0)
        return tc->late_nid == get_u64(tc->ts, L->ts_native_thread_id);
    return u->pthread_tid_off < 0 || tc->pthread_seen == 0 || tc->late_tid == tc->tid_now;
}
