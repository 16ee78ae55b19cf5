/* unwind/anchor.c — --frame-anchor on 3.15: copy only the frames above an anchor.
 *
 * The interpreter keeps the thread state's last_profiled_frame at a frame remora wrote
 * there, moves it to the caller when that frame returns and counts the moves. While it
 * still names the frame written, with the same count, every frame below is as remora last
 * read it: only the frames above are copied. Writes 8 bytes per thread into the target
 * (proc_write_u64), only when asked to (UNW_WANT_ANCHOR).
 */
#include <stdlib.h>
#include <string.h>

#include "remora.h"
#include "internal.h"

/* Does this thread keep an anchor (--frame-anchor on a 3.15 target)? */
int anchor_on(const unwinder_t *u, const rd_thread_t *tc)
{
    const py_layout_t *L = &u->target->layout;

    return (u->want & UNW_WANT_ANCHOR) && L->ts_last_profiled != 0 &&
           L->ts_last_profiled_seq == L->ts_last_profiled + 8 && tc->anc_state != ANC_OFF;
}

/* Forgets the anchor: the next copy starts at the chunk again. */
void anchor_drop(rd_thread_t *tc)
{
    if (tc->anc_state != ANC_OFF)
        tc->anc_state = ANC_NONE;
    if (tc->base != tc->chunk) {
        tc->copy_len += (size_t)(tc->base - tc->chunk);
        tc->base = tc->chunk;
        tc->copied = 0;
    }
    tc->nbelow = 0;
}

/* --frame-anchor, before the walk: has the anchor stayed where it was (copy from it),
 * moved to one of the frames remembered below it (copy from there), or gone? */
void anchor_before(unwinder_t *u, rd_thread_t *tc)
{
    const py_layout_t *L = &u->target->layout;
    uint64_t lp = get_u64(tc->ts, L->ts_last_profiled), seq = get_u64(tc->ts, L->ts_last_profiled_seq);
    size_t j;

    if (tc->anc_state != ANC_CACHED || (lp == tc->anc && seq == tc->anc_seq))
        return;
    /* The anchor frame returned: the interpreter moved the anchor to its caller, and on
     * to that one's caller if it returned too, counting in seq. Such a caller and all
     * below it are unchanged since they were remembered; the caller now runs, so it is
     * copied. */
    if (seq != tc->anc_seq)
        for (j = 0; j < tc->nbelow; j++)
            if (tc->below[j].addr == lp) {
                if (tc->below[j].from != FROM_CHUNK || tc->below[j].shim || lp < tc->chunk + RD_CHUNK_HDR)
                    break;
                memmove(tc->below, tc->below + j + 1, (tc->nbelow - j - 1) * sizeof *tc->below);
                tc->nbelow -= j + 1;
                tc->copy_len += (size_t)(tc->base - lp);
                tc->base = tc->anc = lp;
                tc->anc_seq = seq;
                tc->copied = 0;
                return;
            }
    anchor_drop(tc);
}

/* --frame-anchor, after a consistent walk of nw frames: remember the frames below a
 * written anchor (this copy was taken after the write), or write one. Returns 0,
 * REMORA_ECORRUPT (the anchor moved while the frames were copied) or
 * REMORA_ENOPROC/REMORA_ENOMEM. */
int anchor_after(unwinder_t *u, reader_t *r, rd_thread_t *tc, size_t nw)
{
    const py_layout_t *L = &u->target->layout;
    uint64_t lp = get_u64(tc->ts, L->ts_last_profiled), seq = get_u64(tc->ts, L->ts_last_profiled_seq);
    size_t j, above = 0;
    int err;

    if (tc->copied == 0 || tc->lp_end[0] != lp || tc->lp_end[1] != seq) {
        if (tc->anc_state == ANC_CACHED)
            return REMORA_ECORRUPT;
        if (tc->anc_state == ANC_WRITTEN)
            tc->anc_state = ANC_NONE;
        return REMORA_OK;
    }
    if (tc->anc_state == ANC_WRITTEN) {
        /* lp is what was written, or a caller it moved to: none of those frames returned
         * since the write, and this copy is from after it */
        tc->anc_state = ANC_NONE;
        for (j = 0; j < nw; j++)
            if (r->walk[j].addr == lp)
                break;
        if (j == nw || r->walk[j].from != FROM_CHUNK || r->walk[j].shim || r->walk[j].cached ||
            lp < tc->chunk + RD_CHUNK_HDR)
            return REMORA_OK;
        if (remora_grow((void **)&tc->below, &tc->cap_below, nw - j, sizeof *tc->below))
            return REMORA_ENOMEM;
        memcpy(tc->below, r->walk + j + 1, (nw - j - 1) * sizeof *tc->below);
        for (tc->nbelow = 0; tc->nbelow < nw - j - 1; tc->nbelow++)
            tc->below[tc->nbelow].cached = 1;
        tc->below_gen++;            /* what name_frames kept named is of other frames */
        tc->anc = lp;
        tc->anc_seq = seq;
        tc->anc_state = ANC_CACHED;
        tc->copy_len = tc->copy_len > (size_t)(lp - tc->base) ? tc->copy_len - (size_t)(lp - tc->base) : RD_MIN_COPY;
        tc->base = lp;
        return REMORA_OK;
    }
    if (tc->anc_state == ANC_CACHED) {
        for (j = 0; j < nw && r->walk[j].addr != tc->anc; j++)
            above++;
        if (above <= ANC_REWRITE)
            return REMORA_OK;
    }
    /* anchor the innermost frame of the chunk: the interpreter moves it down as frames
     * return, so it stays valid however the top of the stack changes */
    for (j = 0; j < nw; j++)
        if (r->walk[j].from == FROM_CHUNK && !r->walk[j].shim && !r->walk[j].cached)
            break;
    if (j == nw)
        return REMORA_OK;
    err = proc_write_u64(u->p, tc->tstate + L->ts_last_profiled, r->walk[j].addr);
    if (err == REMORA_ENOPROC)
        return err;
    anchor_drop(tc);
    if (err) {
        tc->anc_state = ANC_OFF;         /* not writable: sample without */
        return REMORA_OK;
    }
    tc->anc = r->walk[j].addr;
    tc->anc_seq = seq;
    tc->anc_state = ANC_WRITTEN;
    return REMORA_OK;
}
