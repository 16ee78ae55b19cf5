/* unwind/walk.c — one thread's frames walked in its copies, then checked.
 *
 * walk_frames() follows the frame links from the current frame through the chunk's first
 * copy and, for frames outside it (generators, coroutines, older chunks, 3.9/3.10 frame
 * objects), through blocks read this sample or remembered from the last one. walk_check()
 * compares every link walked with the second copy and applies the caller rules of each
 * version (a caller has run up to its call). walk_learn_blocks() remembers where frames
 * outside the chunk were, for the next sample's first read.
 */
#include <stdlib.h>
#include <string.h>

#include "remora.h"
#include "internal.h"

/* The frame header at 'addr' from a block read this sample, reading a block if needed.
 * Returns a pointer to fr_size bytes, or NULL (err set). */
static const unsigned char *block_frame(unwinder_t *u, reader_t *r, uint64_t addr, int *src, int *err)
{
    const py_layout_t *L = &u->target->layout;
    size_t i, fs = L->fr_size, blen;
    rd_block_t *b;
    uint64_t start;

    for (i = 0; i < r->nblocks; i++) {
        b = &r->blocks[i];
        if (addr >= b->addr && addr - b->addr + fs <= b->len) {
            *src = (int)i;
            return b->one + (addr - b->addr);
        }
    }
    if (r->nblocks == UNW_MAX_DEPTH) {
        *err = REMORA_ECORRUPT;
        return NULL;
    }
    if (r->nblocks == r->cap_blocks) {
        size_t old = r->cap_blocks;
        if (remora_grow((void **)&r->blocks, &r->cap_blocks, r->nblocks + 1, sizeof *r->blocks)) {
            *err = REMORA_ENOMEM;
            return NULL;
        }
        memset(r->blocks + old, 0, (r->cap_blocks - old) * sizeof *r->blocks);
    }
    b = &r->blocks[r->nblocks];
    /* callers sit below callees, so a block ending at this frame often holds them too:
     * interpreter frames by the page; frame objects (3.9/3.10), from an allocator's
     * pools, only from the start of this frame's page (mapped, as the frame is) */
    blen = RD_BLOCK;
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
    r->late = 1;
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
    *src = (int)r->nblocks++;
    return b->one + (addr - b->addr);
}

/* Walks one thread's frames from 'cur'. Returns 0, REMORA_ECORRUPT (torn), or another
 * code; *need gets the chunk length the walk wanted but did not have (0 if none). */
int walk_frames(unwinder_t *u, reader_t *r, rd_thread_t *tc, uint64_t cur, size_t *nwalked, size_t *need)
{
    const py_layout_t *L = &u->target->layout;
    size_t k = 0, steps = 0, fs = L->fr_size;
    uint64_t frame = cur;
    int err = REMORA_OK;

    *need = 0;
    r->nblocks = 0;
    while (frame != 0) {
        const unsigned char *fb;
        walked_t *w;
        int src = -1;

        if (++steps > UNW_MAX_DEPTH * 2 || frame % 8 != 0)
            return REMORA_ECORRUPT;
        if (L->frames_kind != PY_FRAMES_OBJECTS && tc->chunk && frame >= tc->chunk + RD_CHUNK_HDR &&
            frame - tc->chunk < RD_MAX_COPY && (!tc->chunk_size || frame - tc->chunk + fs <= tc->chunk_size)) {
            if (frame < tc->base) {
                /* below an anchor's copy without meeting the anchor: not the stack the
                 * anchor was set in; copy from the chunk */
                *need = SIZE_MAX;
                return REMORA_OK;
            }
            if (frame - tc->base + fs > tc->copied) {
                *need = (size_t)(frame - tc->base + fs);
                return REMORA_OK;
            }
            fb = tc->a + (frame - tc->base);
        } else {
            size_t j;
            fb = NULL;
            for (j = 0; j < tc->nsb; j++)
                if (frame >= tc->sb[j].addr && frame - tc->sb[j].addr + fs <= tc->sb[j].len) {
                    fb = tc->sb[j].one + (frame - tc->sb[j].addr);
                    src = -2 - (int)j;
                    break;
                }
            if (fb == NULL && (fb = block_frame(u, r, frame, &src, &err)) == NULL)
                return err;
        }
        if (k == UNW_MAX_DEPTH)
            return REMORA_ECORRUPT;
        /* 3.9/3.10: a frame object with no reference is freed (a code object's zombie
         * frame or the free list, linked through f_back): a torn walk went there */
        if (L->frames_kind == PY_FRAMES_OBJECTS && get_u64(fb, 0) == 0)
            return REMORA_ECORRUPT;
        w = &r->walk[k++];
        w->shim = (L->owner_shim && (unsigned char)fb[L->fr_owner] >= L->owner_shim) ||
                  unw_is_trampoline(u->target, fb);
        w->addr = frame;
        w->prev = get_u64(fb, L->fr_previous);
        w->code = get_u64(fb, L->fr_code);
        if (L->tagged_executable)
            w->code &= ~(uint64_t)3;
        w->instr = get_instr(L, fb);
        w->entry = L->fr_is_entry && fb[L->fr_is_entry] != 0;
        w->src = src;
        w->cached = 0;
        frame = w->prev;
        if (tc->anc_state == ANC_CACHED && w->addr == tc->anc && src == -1) {
            /* the anchor: below it, the frames remembered when it was set */
            if (tc->nbelow > UNW_MAX_DEPTH - k || (tc->nbelow > 0 && tc->below[0].addr != w->prev))
                return REMORA_ECORRUPT;
            memcpy(&r->walk[k], tc->below, tc->nbelow * sizeof *tc->below);
            k += tc->nbelow;
            break;
        }
    }
    *nwalked = k;
    return REMORA_OK;
}

/* Did the links walked stay the same? Compares the chunk's second copy and re-reads
 * the blocks (with the current frame pointer) in one vectored read. */
int walk_check(unwinder_t *u, reader_t *r, rd_thread_t *tc, uint64_t cur, size_t nwalked)
{
    const py_layout_t *L = &u->target->layout;
    size_t i, n = 0;
    uint64_t cur2 = 0;

    /* the frame walked from must still be current after the second copy */
    if (tc->copied && tc->cur_end != cur)
        return REMORA_ECORRUPT;
    if (L->frames_kind == PY_FRAMES_OBJECTS && r->nblocks == 0 && tc->nsb && tc->cur_end != cur)
        return REMORA_ECORRUPT;
    if (L->frames_kind == PY_FRAMES_CFRAME && tc->cf_end != tc->cframe)
        return REMORA_ECORRUPT;

    if (r->nblocks > 0) {
        for (i = 0; i < r->nblocks; i++)
            if (batch_iov(r, &n, r->blocks[i].addr, r->blocks[i].two, r->blocks[i].len))
                return REMORA_ENOMEM;
        if (batch_iov(r, &n, L->frames_kind == PY_FRAMES_CFRAME ? tc->cframe + L->cframe_current_frame
                                                              : tc->tstate + L->ts_frame, &cur2, 8))
            return REMORA_ENOMEM;
        if (proc_readv(u->p, r->iov, n) || cur2 != cur)
            return REMORA_ECORRUPT;
    }
    for (i = 0; i < nwalked; i++) {
        const walked_t *w = &r->walk[i];
        const unsigned char *fb;
        uint64_t code, instr;
        if (w->cached)
            break;                      /* below the anchor: checked when remembered */
        if (w->src <= -2)
            fb = tc->sb[-2 - w->src].two + (w->addr - tc->sb[-2 - w->src].addr);
        else if (w->src < 0)
            fb = tc->b + (w->addr - tc->base);
        else
            fb = r->blocks[w->src].two + (w->addr - r->blocks[w->src].addr);
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
        if (i > 0 && !w->shim && L->caller_past_start &&
            (int64_t)(w->instr - (w->code + L->co_code_adaptive)) <= 0)
            return REMORA_ECORRUPT;
        if (!w->shim && (code != w->code || (i > 0 && instr != w->instr)))
            return REMORA_ECORRUPT;
        /* 3.12/3.13: a running frame's stacktop is -1 (the eval loop resets it when it
         * takes the stack pointer), and a frame that pushes a callee inline saves its
         * stack pointer first. A caller at -1 below a Python callee is running, so the
         * callee is a stale frame above it. Both copies must say so. */
        if (i > 0 && !w->shim && !r->walk[i - 1].shim && L->fr_stacktop && w->src == -1) {
            int32_t st1, st2;
            memcpy(&st1, tc->a + (w->addr - tc->base) + L->fr_stacktop, 4);
            memcpy(&st2, fb + L->fr_stacktop, 4);
            if (st1 < 0 || st2 < 0)
                return REMORA_ECORRUPT;
        }
        /* 3.13+: pushing a frame sets its return_offset to 0, and a Python frame that
         * pushes a callee directly sets its own to where to resume (never 0). A caller at
         * 0 below a Python callee is the same stale picture. */
        if (i > 0 && !w->shim && !r->walk[i - 1].shim && L->fr_return_offset) {
            uint16_t ro;
            memcpy(&ro, fb + L->fr_return_offset, 2);
            if (ro == 0)
                return REMORA_ECORRUPT;
        }
    }
    return REMORA_OK;
}

/* Remembers where this walk found frames outside the chunk, as at most FAST_SPEC
 * ranges of at most FAST_BLOCK bytes, to read them in the next sample's first read.
 * The frames are sorted by address and grouped greedily: frame objects (3.9/3.10) and
 * generator frames sit on the heap in no particular order, often several to a page,
 * and the kernel's cost of a read is mostly per range and page; a gap costs bytes. */
int walk_learn_blocks(const py_layout_t *L, reader_t *r, rd_thread_t *tc, size_t nwalked)
{
    size_t i, k = 0, m = 0, fs = L->fr_size;

    for (i = 0; i < nwalked; i++)
        if (r->walk[i].src != -1 && !r->walk[i].cached)
            r->scratch[m++] = r->walk[i].addr;
    if (m > 1)
        qsort(r->scratch, m, sizeof *r->scratch, cmp_u64);
    for (i = 0; i < m; i++) {
        uint64_t a = r->scratch[i];
        rd_block_t *b;
        if (k > 0) {
            b = &tc->sb[k - 1];
            /* a small gap (frame objects of one allocator pool lie 400-500 bytes
             * apart) and at most two pages, each holding part of a frame: all mapped */
            if (a <= b->addr + b->len + RD_GAP && a + fs - b->addr <= RD_BLOCK &&
                (a + fs - 1) / 4096 - b->addr / 4096 <= 1) {
                if (a + fs > b->addr + b->len)
                    b->len = (size_t)(a + fs - b->addr);
                continue;
            }
        }
        if (k == RD_SPEC)
            break;
        if (k == tc->cap_sb) {
            size_t old = tc->cap_sb;
            if (remora_grow((void **)&tc->sb, &tc->cap_sb, k + 1, sizeof *tc->sb))
                return -1;
            memset(tc->sb + old, 0, (tc->cap_sb - old) * sizeof *tc->sb);
        }
        b = &tc->sb[k++];
        b->addr = a;
        b->len = fs;
    }
    for (i = 0; i < k; i++) {
        rd_block_t *b = &tc->sb[i];
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
    tc->nsb = k;
    return 0;
}
