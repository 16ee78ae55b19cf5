/* unwind/parked.c — threads that have not held the GIL since their last walk.
 *
 * A thread's frames move only while it holds the GIL, and CPython counts every change of
 * holder (switch_number). A thread whose last consistent walk was taken while another
 * thread was the last holder keeps that walk while the holder and the count stay the
 * same: nothing of its stack is read. Reads nothing but, for a thread that ran after all,
 * its remembered blocks (3.9/3.10).
 */
#include <stdlib.h>
#include <string.h>

#include "remora.h"
#include "internal.h"

/* 3.9/3.10: a thread's remembered blocks twice, its current frame between the copies
 * and again after, in one read (what copy_states() reads for it when it is not
 * expected to be parked). */
int park_reread(unwinder_t *u, reader_t *r, rd_thread_t *tc)
{
    uint64_t cp = copy_cur_ptr(&u->target->layout, tc);
    size_t n = 0, k;
    int err;

    for (k = 0; k < tc->nsb; k++)
        if (batch_iov(r, &n, tc->sb[k].addr, tc->sb[k].one, tc->sb[k].len))
            return REMORA_ENOMEM;
    if (batch_iov(r, &n, cp, &tc->cur_mid, 8))
        return REMORA_ENOMEM;
    for (k = 0; k < tc->nsb; k++)
        if (batch_iov(r, &n, tc->sb[k].addr, tc->sb[k].two, tc->sb[k].len))
            return REMORA_ENOMEM;
    if (batch_iov(r, &n, cp, &tc->cur_end, 8) || ident_req(u, r, tc, &n))
        return REMORA_ENOMEM;
    r->late = 1;
    err = proc_readv(u->p, r->iov, n);
    if (err == REMORA_OK && !ident_same(u, tc))
        err = REMORA_ECORRUPT;      /* the state is another thread's now */
    tc->mid_ok = err == REMORA_OK;
    return err;
}

/* Does the walk saved for a parked thread still hold? Its frames move only while it
 * holds the GIL, and it has not taken the GIL since the walk if the GIL's last holder
 * is the same other thread and its switch count has not moved (take_gil() counts
 * every change of holder). Its current frame must be the same too: a thread state
 * swapped in under another's GIL (PyThreadState_Swap) runs without counting. */
int park_holds(const py_layout_t *L, const rd_interp_t *fi, const rd_thread_t *tc)
{
    if (!tc->reuse || !fi->sw_ok || fi->sw != tc->saved_sw || fi->holder != tc->saved_holder ||
        fi->holder == tc->tstate)
        return 0;
    if (L->frames_kind == PY_FRAMES_CFRAME)
        return get_u64(tc->ts, L->ts_frame) == tc->saved_cframe && tc->cur_spec == tc->saved_cur;
    return get_u64(tc->ts, L->ts_frame) == tc->saved_cur;
}

/* After a consistent walk of nw frames from 'cur': keep it if another thread holds the
 * GIL (this one is parked, or about to be). Returns 0 or -1 (no memory). */
int park_save(reader_t *r, const rd_interp_t *fi, rd_thread_t *tc, uint64_t cur, size_t nw)
{
    tc->saved_ok = 0;
    if (!fi->sw_ok || fi->holder == tc->tstate || nw == 0)
        return 0;
    if (remora_grow((void **)&tc->saved, &tc->cap_saved, nw, sizeof *tc->saved))
        return -1;
    memcpy(tc->saved, r->walk, nw * sizeof *tc->saved);
    tc->nsaved = nw;
    tc->saved_sw = fi->sw;
    tc->saved_holder = fi->holder;
    tc->saved_cur = cur;
    tc->saved_cframe = tc->cframe;
    tc->saved_ok = 1;
    return 0;
}
