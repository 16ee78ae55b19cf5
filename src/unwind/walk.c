/* unwind/walk.c — one thread's frames walked in its copies, then checked.
 *
 * walk_frames() follows the frame links from the current frame through the chunk's first
 * copy and, for frames outside it (generators, coroutines, older chunks, 3.9/3.10 frame
 * objects), through blocks read this sample or remembered from the last one. walk_check()
 * compares every link walked with the second copy and applies the caller rules of each
 * version (a caller has run up to its call). walk_learn_blocks() remembers where frames
 * outside the chunk were, for the next sample's first read.
 * Over 600 lines on purpose: the walk and its check run for every frame of every sample
 * and share the frame decoder and the copies' accessors as static inlines, which one
 * file keeps inline in any build (with or without LTO).
 */
#include <stdlib.h>
#include <string.h>

#include "remora.h"
#include "internal.h"

/* The frame header at 'addr' from a block read this sample, reading a block if needed.
 * Returns a pointer to fr_size bytes, or NULL (err set). */
static const unsigned char *block_frame(unwinder_t *u, reader_t *r, uint64_t addr, unsigned *idx, int *err)
{
    const py_layout_t *L = &u->target->layout;
    size_t i, fs = L->fr_size, blen;
    rd_block_t *b;
    uint64_t start;

    for (i = 0; i < r->nblocks; i++) {
        b = &r->blocks[i];
        if (addr >= b->addr && addr - b->addr + fs <= b->len) {
            *idx = (unsigned)i;
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
    *idx = (unsigned)r->nblocks++;
    return b->one + (addr - b->addr);
}

/* The one frame decoder: the fields of the frame header (fr_size bytes) at fb. */
static inline void frame_decode(const py_target_t *T, const unsigned char *fb, rd_fields_t *ff)
{
    const py_layout_t *L = &T->layout;

    ff->prev = get_u64(fb, L->fr_previous);
    ff->code = get_u64(fb, L->fr_code);
    if (L->tagged_executable)
        ff->code &= ~(uint64_t)3;
    ff->instr = get_instr(L, fb);
    ff->shim = (L->owner_shim && (unsigned char)fb[L->fr_owner] >= L->owner_shim) ||
               unw_is_trampoline(T, fb);
    ff->entry = L->fr_is_entry && fb[L->fr_is_entry] != 0;
    ff->genobj = L->fr_owner_gen < 0 && L->fr_gen != 0 ? get_u64(fb, L->fr_gen) : 0;
    ff->gen = L->fr_owner_gen >= 0 ? (unsigned char)fb[L->fr_owner] == L->fr_owner_gen : ff->genobj != 0;
    /* 3.9/3.10: a frame object with no reference is freed (a code object's zombie frame
     * or the free list, linked through f_back) */
    ff->freed = L->frames_kind == PY_FRAMES_OBJECTS && get_u64(fb, 0) == 0;
}

/* Walked frame w: the frame at addr, its header's fields ff, read from 'from' (idx). */
static inline void walked_fill(walked_t *w, uint64_t addr, const rd_fields_t *ff, int from, unsigned idx)
{
    w->addr = addr;
    w->prev = ff->prev;
    w->code = ff->code;
    w->instr = ff->instr;
    w->shim = ff->shim;
    w->entry = ff->entry;
    w->gen = ff->gen;
    w->genobj = ff->genobj;
    w->from = from;
    w->idx = idx;
    w->cached = 0;
}

/* Is 'frame' inside the part of the chunk the copies can hold? */
static inline int in_chunk(const py_layout_t *L, const rd_thread_t *tc, uint64_t frame)
{
    return L->frames_kind != PY_FRAMES_OBJECTS && tc->chunk && frame >= tc->chunk + RD_CHUNK_HDR &&
           frame - tc->chunk < RD_MAX_COPY && (!tc->chunk_size || frame - tc->chunk + L->fr_size <= tc->chunk_size);
}

int walk_frames(unwinder_t *u, reader_t *r, rd_thread_t *tc, uint64_t cur, size_t *nwalked, walk_more_t *more)
{
    const py_layout_t *L = &u->target->layout;
    size_t k = 0, steps = 0, fs = L->fr_size, nfreed = 0, lap = 1;
    uint64_t frame = cur, seen = 0;
    int err = REMORA_OK;

    more->kind = WALK_DONE;
    more->len = 0;
    r->nblocks = 0;
    r->freed_below = 0;
    while (frame != 0) {
        const unsigned char *fb;
        walked_t *w;
        rd_fields_t ff;
        int from = FROM_CHUNK;
        unsigned idx = 0;

        /* a torn walk may link frames in a ring: met again (Brent: the frame kept at
         * every power of two of steps), it ends at once instead of after 8,192 steps of
         * lookups, which made a reading last 200 us and land in the next call
         * (fidelity/mix on 3.9: recurse's samples written as json_roundtrip's) */
        if (++steps > UNW_MAX_DEPTH * 2 || frame % 8 != 0 || frame == seen)
            return REMORA_ECORRUPT;
        if (steps == lap) {
            seen = frame;
            lap *= 2;
        }
        if (in_chunk(L, tc, frame)) {
            if (frame < tc->base) {
                /* below an anchor's copy without meeting the anchor: not the stack the
                 * anchor was set in; copy from the chunk */
                more->kind = WALK_FROM_CHUNK;
                return REMORA_OK;
            }
            if (frame - tc->base + fs > tc->copied) {
                more->kind = WALK_LONGER;
                more->len = (size_t)(frame - tc->base + fs);
                return REMORA_OK;
            }
            fb = tc->a + (frame - tc->base);
        } else {
            size_t j;
            fb = NULL;
            for (j = 0; j < tc->nsb; j++)
                if (frame >= tc->sb[j].addr && frame - tc->sb[j].addr + fs <= tc->sb[j].len) {
                    fb = tc->sb[j].one + (frame - tc->sb[j].addr);
                    from = FROM_KNOWN;
                    idx = (unsigned)j;
                    break;
                }
            if (fb == NULL) {
                from = FROM_BLOCK;
                if ((fb = block_frame(u, r, frame, &idx, &err)) == NULL)
                    return err;
            }
        }
        if (k == UNW_MAX_DEPTH)
            return REMORA_ECORRUPT;
        frame_decode(u->target, fb, &ff);
        if (ff.freed) {
            /* 3.9/3.10: a frame that returned (or was never pushed) by the time it was
             * read: it and the frames above it are not known. Its f_back is left as it
             * was (a code object's zombie frame: its last caller) or links the free list:
             * walked on, what it leads to is known only by the rules of a moved stack
             * (running, ending at the thread's root; objects_moved), which hold however
             * it was reached. A run of freed frames is the free list: given up. */
            if (++nfreed > RD_FREED_RUN)
                return REMORA_ECORRUPT;
            r->freed_below = k + 1;
        } else {
            nfreed = 0;
        }
        w = &r->walk[k++];
        walked_fill(w, frame, &ff, from, idx);
        frame = w->prev;
        if (tc->anc_state == ANC_CACHED && w->addr == tc->anc && from == FROM_CHUNK) {
            /* the anchor: below it, the frames remembered when it was set, as they still
             * were when the state was read. The copies are from later: the anchor must
             * have held until after them, else the frame at its address may be another
             * call's, pushed over callers that returned meanwhile (alternate.py: y's
             * frame where b's was anchored, a remembered below it, would read a;y; seen
             * about once in 10 s at 20 kHz with the anchor rewritten at every whole
             * reading and a re-read's copies delayed). Then copy from the chunk. */
            if (tc->lp_end[0] != tc->anc || tc->lp_end[1] != tc->anc_seq) {
                more->kind = WALK_FROM_CHUNK;
                return REMORA_OK;
            }
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

/* The header of walked frame w as the first copies hold it. */
static inline const unsigned char *first_copy(const reader_t *r, const rd_thread_t *tc, const walked_t *w)
{
    if (w->from == FROM_KNOWN)
        return tc->sb[w->idx].one + (w->addr - tc->sb[w->idx].addr);
    if (w->from == FROM_CHUNK)
        return tc->a + (w->addr - tc->base);
    return r->blocks[w->idx].one + (w->addr - r->blocks[w->idx].addr);
}

/* The header of walked frame w as the second copies hold it. */
static inline const unsigned char *second_copy(const reader_t *r, const rd_thread_t *tc, const walked_t *w)
{
    if (w->from == FROM_KNOWN)
        return tc->sb[w->idx].two + (w->addr - tc->sb[w->idx].addr);
    if (w->from == FROM_CHUNK)
        return tc->b + (w->addr - tc->base);
    return r->blocks[w->idx].two + (w->addr - r->blocks[w->idx].addr);
}

/* 3.11: did frame i push frame i-1, as one copy (first or second) has them? A frame
 * that pushes its callee inline saves its stack pointer at the call, and the slots just
 * above it still hold what the call consumed: the function (CALL: NULL and the function,
 * or the method and self), or the container that BINARY_SUBSCR's __getitem__ frame
 * starts with as its first local (3.11 pushes frames inline for nothing else). A stale callee left from an
 * earlier call at the same depth (a short call of another chain, both copies torn alike)
 * was pushed for another function. 1 yes, 0 no, -1 not known (a frame outside the chunk,
 * or in another chunk). */
static int pushed_by(const py_layout_t *L, const reader_t *r, const rd_thread_t *tc, size_t i, int second)
{
    const walked_t *w = &r->walk[i], *callee = &r->walk[i - 1];
    const unsigned char *fb, *cb;
    uint64_t fs = L->fr_size, gap, f, s0, s1;
    int32_t st;

    if (w->from != FROM_CHUNK || callee->from != FROM_CHUNK || callee->addr <= w->addr)
        return -1;
    gap = callee->addr - w->addr;
    if (callee->addr - tc->base + fs + 8 > tc->copied || L->fr_callfunc + 8 > fs)
        return -1;
    fb = (second ? tc->b : tc->a) + (w->addr - tc->base);
    cb = (second ? tc->b : tc->a) + (callee->addr - tc->base);
    memcpy(&st, fb + L->fr_calltop, 4);
    if (st < 0 || fs + 8 * (uint64_t)st + PY_FR_CALL_SLOTS > gap)
        return 0;
    s0 = get_u64(fb, fs + 8 * (size_t)st);
    s1 = get_u64(fb, fs + 8 * (size_t)st + 8);
    f = get_u64(cb, L->fr_callfunc);
    return f == s0 || f == s1 || (s0 != 0 && get_u64(cb, fs) == s0);
}

/* 3.11: is code the code object of function object func? Pushing a frame writes its
 * function, its code and the rest of its header over a stale frame's, and the compiler
 * orders those stores as it likes: a copy may hold the new function with the old code
 * and instruction, the frame of a call that never was (record/torn under ASan: x;b, the
 * header of y's frame half-written over b's). Remembered per function object; read on
 * a miss and when the code no longer matches (a function made again at that address,
 * its __code__ set). 1 yes, 0 no or not readable. */
static int func_has_code(unwinder_t *u, uint64_t func, uint64_t code)
{
    unw_func_t *e;
    uint64_t now = 0;

    if (func == 0)
        return 0;
    e = &u->funcs[(func * UINT64_C(0x9E3779B97F4A7C15)) >> (64 - UNW_FUNCS_BITS)];
    if (e->func == func && e->code == code)
        return 1;
    if (proc_read_u64(u->p, func + u->target->layout.fn_code, &now) != REMORA_OK)
        return 0;
    e->func = func;
    e->code = now;
    return now == code;
}

/* Does frame i, below frame i-1 in the walk, look like a caller in both copies (fb: the
 * second)? Each version's rule (py_layout_derive) that a running frame breaks: a stale
 * frame left above a running one is no callee of it. */
static inline int looks_calling(const py_layout_t *L, const reader_t *r, const rd_thread_t *tc, size_t i,
                         const unsigned char *fb)
{
    const walked_t *w = &r->walk[i];

    if (w->shim)
        return 1;
    /* a caller has run past its first instruction: one still there that seems to have
     * a callee was just pushed under a stale frame (the copy and the current-frame
     * pointer are from different moments) */
    if (L->caller_past_start && (int64_t)(w->instr - (w->code + L->co_code_adaptive)) <= 0)
        return 0;
    if (r->walk[i - 1].shim)
        return 1;
    /* 3.12/3.13: a running frame's stacktop is -1 (the eval loop resets it when it takes
     * the stack pointer), and a frame that pushes a callee inline saves its stack pointer
     * first. Both copies must say so. */
    if (L->fr_stacktop) {
        int32_t st1, st2;
        memcpy(&st1, first_copy(r, tc, w) + L->fr_stacktop, 4);
        memcpy(&st2, fb + L->fr_stacktop, 4);
        if (st1 < 0 || st2 < 0)
            return 0;
    }
    /* 3.11: the callee was pushed for the function the caller's call consumed, in both
     * copies (an eval loop's entry frame was pushed from C: not known) */
    if (L->fr_calltop && !r->walk[i - 1].entry &&
        (pushed_by(L, r, tc, i, 0) == 0 || pushed_by(L, r, tc, i, 1) == 0))
        return 0;
    /* 3.13+: pushing a frame sets its return_offset to 0, and a Python frame that pushes
     * a callee directly sets its own to where to resume (never 0) */
    if (L->fr_return_offset) {
        uint16_t ro;
        memcpy(&ro, fb + L->fr_return_offset, 2);
        if (ro == 0)
            return 0;
    }
    return 1;
}

/* 3.9/3.10: does the frame object (fr_size bytes at fb) run, or call? Not one that
 * returned or raised through (a traceback holds it) or a suspended generator's. */
static inline int frame_runs(const py_layout_t *L, const unsigned char *fb)
{
    signed char st;

    if (L->fr_state == 0 || L->fr_state >= L->fr_size)
        return 1;
    st = (signed char)fb[L->fr_state];
    return L->fr_running < 0 ? st != 0 : st == L->fr_running;
}

/* 3.9/3.10, the current frame moved while the thread was read. The frames that held in
 * both copies (s and below) are the thread's if the walk ends at its own outermost frame,
 * the one of its last whole reading: alive while the thread runs, it is no other
 * thread's, and no live frame links to another thread's frames. And a frame known must
 * run in both copies: one that returned or raised through (a traceback holds it, linked
 * to its caller still) is no caller. A frame running, whose callers run down to the
 * thread's root, is on the thread's stack when read, however the walk came to it: the
 * frame walked from too (it was the current one between its copies, or read late and
 * still running then). Returns the innermost frame known (nwalked: none). */
static size_t objects_moved(const py_layout_t *L, const reader_t *r, const rd_thread_t *tc, size_t nwalked,
                            size_t s)
{
    const walked_t *root = nwalked ? &r->walk[nwalked - 1] : NULL;
    size_t i;

    if (root == NULL || tc->root == 0 || root->addr != tc->root || root->code != tc->root_code ||
        root->prev != 0 || L->fr_state == 0)
        return nwalked;
    for (i = nwalked; i-- > s;)
        if (!frame_runs(L, first_copy(r, tc, &r->walk[i])) || !frame_runs(L, second_copy(r, tc, &r->walk[i])))
            return i + 1;
    return s;
}

/* 3.9/3.10, the current frame moved: the frame objects remembered from the last sample
 * were read in the round's first read, those met for the first time during the walk
 * later. A frame read late under one read early may be a later call's, made in between
 * at the same address (chaos/recursion: a catching frame read on its return line under
 * frames read early of the dive before, their chain through the same address). Known:
 * the frames below the outermost one read late that has one read early above it. */
static size_t one_moment(const reader_t *r, size_t s, size_t nwalked)
{
    size_t i, cut = s;
    int early = 0;

    for (i = s; i < nwalked; i++) {
        if (r->walk[i].from == FROM_KNOWN)
            early = 1;
        else if (r->walk[i].from == FROM_BLOCK && early)
            cut = i + 1;
    }
    return cut;
}

/* 3.11+, the stack moved while it was read: did the frame walked from live through the
 * copies? So it did if it is in the chunk's copies, the same function at the same
 * instruction in both (a running frame's moves; one calling C, or called back from it,
 * rests), and below the chunk's top both in the state read at the start and after the
 * second copies: a frame that returned, or was a stale callee above its caller, lies at
 * or past the top. Its callers are checked as every caller is. Then the stack from it
 * down is one the thread had during the copies, and what ran above it is not known
 * (generators under sum(), re.sub's callback, sorted()'s key: without, the work
 * function's frame is lost; docs/how-it-reads.md). */
static int walked_from_lived(const py_layout_t *L, const reader_t *r, const rd_thread_t *tc, size_t nwalked)
{
    const walked_t *w = &r->walk[0];
    uint64_t end, top0;

    if (nwalked == 0 || w->shim || w->cached || w->from != FROM_CHUNK || L->ts_datastack_chunk == 0 ||
        L->ts_datastack_chunk + PY_TS_DATASTACK_SPAN > L->ts_size || tc->chunk == 0 || w->addr < tc->chunk)
        return 0;
    if (get_instr(L, second_copy(r, tc, w)) != w->instr || w->code == 0)
        return 0;
    top0 = get_u64(tc->ts, L->ts_datastack_chunk + PY_TS_DATASTACK_TOP);
    end = w->addr + L->fr_size;
    return get_u64(tc->ts, L->ts_datastack_chunk) == tc->chunk && tc->ds_end[0] == tc->chunk &&
           end > w->addr && end <= top0 && end <= tc->ds_end[1];
}

/* The blocks read while walking, read again, with the current frame after them (to keep
 * the read's shape: a frame object freed since fails the check) into *cur2, and the
 * thread's ids. 0: read; 1: nothing holds (the frames freed meanwhile, or the state now
 * another thread's); -1: out of memory. */
static int reread_blocks(unwinder_t *u, reader_t *r, rd_thread_t *tc, uint64_t *cur2)
{
    size_t i, n = 0;

    for (i = 0; i < r->nblocks; i++)
        if (batch_iov(r, &n, r->blocks[i].addr, r->blocks[i].two, r->blocks[i].len))
            return -1;
    if (batch_iov(r, &n, copy_cur_ptr(&u->target->layout, tc), cur2, 8) || ident_req(u, r, tc, &n))
        return -1;
    if (proc_readv(u->p, r->iov, n))
        return 1;                   /* the frames were freed meanwhile: nothing holds */
    /* the state now another thread's, at the same address, whose current frame is
     * at the same address too (3.9/3.10: a code object's zombie frame): nothing of
     * the frames read now is the thread the round named */
    return !ident_same(u, tc);
}

/* From the outermost frame in: each frame must be the same in both copies (links and
 * code object); a caller must also be at the same instruction and look like one.
 * The first frame that is not the same ends what is known; one that is the same but
 * moved on, or runs, is the innermost frame known. The walk started from the frame
 * current between the copies, so when every frame holds the stack is the one of
 * that moment, however the top moved after it. Returns the innermost frame known
 * (nwalked: none). */
static size_t frames_held(unwinder_t *u, reader_t *r, rd_thread_t *tc, size_t nwalked)
{
    const py_layout_t *L = &u->target->layout;
    size_t i, s = nwalked;

    for (i = nwalked; i-- > 0; s = i) {
        const walked_t *w = &r->walk[i];
        const unsigned char *fb;
        uint64_t code;
        if (w->cached)
            continue;               /* below the anchor: checked when remembered */
        /* the fields the check needs, straight from the second copy (what frame_decode
         * reads of the first): this loop runs for every frame of every sample */
        fb = second_copy(r, tc, w);
        code = get_u64(fb, L->fr_code);
        if (L->tagged_executable)
            code &= ~(uint64_t)3;
        /* (a frame whose code is NULL is being cleared: 3.14+ writes a NULL stack ref
         * over f_executable as it pops one) */
        if (get_u64(fb, L->fr_previous) != w->prev || (!w->shim && (code != w->code || code == 0)) ||
            (L->frames_kind == PY_FRAMES_OBJECTS && get_u64(fb, 0) == 0))
            break;                  /* s: the frame below it */
        /* 3.11: both copies name the same function, and the code is that function's */
        if (L->fn_code) {
            uint64_t func = get_u64(fb, L->fr_callfunc);
            if (func != get_u64(first_copy(r, tc, w), L->fr_callfunc) || !func_has_code(u, func, code))
                break;
        }
        if (i > 0 && ((!w->shim && get_instr(L, fb) != w->instr) || !looks_calling(L, r, tc, i, fb))) {
            s = i;
            break;
        }
    }
    return s;
}

/* The innermost frame known s, moved out for what moved while the thread was read: the
 * current frame (cur2: as read again after the blocks), frames outside the chunk read
 * after it, the top, and 3.11/3.12 the cframe. Sets r->top_moved when the frame walked
 * from lived through the copies though the top moved after. */
static size_t moved_while_read(const py_layout_t *L, reader_t *r, const rd_thread_t *tc, uint64_t cur,
                               uint64_t cur2, size_t nwalked, size_t s)
{
    /* 3.9/3.10 without remembered blocks: walked from the frame current when the state was
     * read, before any copy */
    int from_state = L->frames_kind == PY_FRAMES_OBJECTS && !(tc->nsb && tc->mid_ok);
    size_t i;

    if (L->frames_kind == PY_FRAMES_OBJECTS) {
        /* 3.9/3.10: frame objects are shared by every thread (free lists, a code object's
         * zombie frame) and outlive their calls (a traceback holds them), so two copies
         * that agree prove nothing of frames that may have been freed and made again, for
         * another thread too, in between. What does: the current frame the same from
         * before the copies to after them (a thread changes the frames below its current
         * one only by returning to them). Otherwise the frames below it that held are
         * known only as objects_moved() says. */
        uint64_t after = r->nblocks > 0 ? cur2 : tc->cur_end;
        if (from_state ? r->nblocks == 0 || cur2 != cur
                       : after != cur || get_u64(tc->ts, L->ts_frame) != cur)
            s = from_state && r->nblocks == 0 ? nwalked : one_moment(r, objects_moved(L, r, tc, nwalked, s), nwalked);
    } else if (r->nblocks > 0 && cur2 != cur) {
        /* frames met for the first time outside the chunk were read after the current
         * frame, both copies: the same only if the thread did not move meanwhile. Known:
         * the frames below the innermost of them. */
        for (i = 0; i < nwalked && r->walk[i].from != FROM_BLOCK; i++)
            ;
        if (i < nwalked && i + 1 > s)
            s = i + 1;
    }

    if (L->frames_kind != PY_FRAMES_OBJECTS && tc->copied && tc->cur_end != cur && s == 0 && nwalked > 0) {
        /* the current frame moved after it was read: two copies can agree on a top that
         * went back and forth between them (short calls at the same depth do: a stale
         * callee above its caller's next call), so the frame walked from is not known
         * unless it lived through the copies (walked_from_lived); its caller, which
         * held, is the innermost one */
        if (walked_from_lived(L, r, tc, nwalked))
            r->top_moved = 1;
        else
            s = 1;
    }
    if (L->frames_kind == PY_FRAMES_CFRAME && tc->cf_end != tc->cframe) {
        /* 3.11/3.12: the thread entered or left an eval loop while it was read (C code
         * calling back into Python): the current frame was read through a cframe that
         * may be gone, so the frame walked from may be any. Its callers are not, when
         * the walk ends at the thread's own root and each caller looked calling in both
         * copies (looks_calling): 3.12, a frame that has returned last ran (stacktop
         * -1); 3.11, it pushed its callee (pushed_by) and rests on its call (naming).
         * (re.sub and sorted() calling back: docs/how-it-reads.md.)
         * A thread not yet known: the frames below the innermost loop's entry. */
        if (tc->known && nwalked > 0 && r->walk[nwalked - 1].addr == tc->root) {
            if (s < 1 && walked_from_lived(L, r, tc, nwalked))
                r->top_moved = 1;
            else if (s < 1)
                s = 1;
        } else {
            for (i = s; i < nwalked && !(L->walk_root == PY_ROOT_ENTRY ? r->walk[i].entry : r->walk[i].shim); i++)
                ;
            s = i + 1 < nwalked ? i + 1 : nwalked;
        }
    }
    return s;
}

int walk_check(unwinder_t *u, reader_t *r, rd_thread_t *tc, uint64_t cur, size_t nwalked, size_t *keep)
{
    const py_layout_t *L = &u->target->layout;
    uint64_t cur2 = 0;
    size_t s;
    int held;

    *keep = nwalked;
    r->top_moved = 0;
    if (r->nblocks > 0 && (held = reread_blocks(u, r, tc, &cur2)) != 0)
        return held < 0 ? REMORA_ENOMEM : REMORA_OK;
    s = moved_while_read(L, r, tc, cur, cur2, nwalked, frames_held(u, r, tc, nwalked));
    if (s < r->freed_below)
        s = r->freed_below;         /* 3.9/3.10: walked through a freed frame */
    if (s > 0)
        r->top_moved = 0;           /* the frame walked from is not known at all */
    if (s > 0 && s < nwalked && !r->walk[s].cached) {
        /* the innermost frame known is named where the second copy has it */
        rd_fields_t ff;
        frame_decode(u->target, second_copy(r, tc, &r->walk[s]), &ff);
        r->walk[s].instr = ff.instr;
    }
    *keep = s;
    return REMORA_OK;
}

/* The thread's remembered block k, the array grown to hold it (new ones zeroed), or
 * NULL out of memory. */
static rd_block_t *sb_slot(rd_thread_t *tc, size_t k)
{
    if (k >= tc->cap_sb) {
        size_t old = tc->cap_sb;
        if (remora_grow((void **)&tc->sb, &tc->cap_sb, k + 1, sizeof *tc->sb))
            return NULL;
        memset(tc->sb + old, 0, (tc->cap_sb - old) * sizeof *tc->sb);
    }
    return &tc->sb[k];
}

/* Makes room in a remembered block's two copies for its length. */
static int block_room(rd_block_t *b)
{
    unsigned char *n1, *n2;

    if (b->cap >= b->len)
        return 0;
    if ((n1 = realloc(b->one, b->len)) == NULL)
        return -1;
    b->one = n1;
    if ((n2 = realloc(b->two, b->len)) == NULL)
        return -1;
    b->two = n2;
    b->cap = b->len;
    return 0;
}

/* 3.11+: adds the page (two if the frame crosses into the next) holding the frame at
 * addr, outside the chunk, to the thread's remembered blocks, to be copied with the chunk
 * in a re-reading. For a walk that went nowhere from a generator's frame read after the
 * current frame pointer: the generators of one pipeline are made together and lie side
 * by side, and read with the copies, one current then is walked as the copies have it.
 * The pages hold a frame read a moment ago: mapped. Returns 0, or -1 out of memory. */
int walk_learn_page(const py_layout_t *L, rd_thread_t *tc, uint64_t addr)
{
    uint64_t lo = addr & ~(uint64_t)4095, hi = ((addr + L->fr_size - 1) & ~(uint64_t)4095) + 4096;
    size_t k;
    rd_block_t *b;

    for (k = 0; k < tc->nsb; k++)
        if (addr >= tc->sb[k].addr && addr - tc->sb[k].addr + L->fr_size <= tc->sb[k].len)
            return 0;               /* already there */
    if (tc->nsb == RD_SPEC || hi - lo > 2 * 4096)
        return 0;
    if ((b = sb_slot(tc, tc->nsb)) == NULL)
        return -1;
    b->addr = lo;
    b->len = (size_t)(hi - lo);
    if (block_room(b))
        return -1;
    tc->nsb++;
    return 0;
}

/* Remembers where this walk found frames outside the chunk, as at most FAST_SPEC
 * ranges of at most FAST_BLOCK bytes, to read them in the next sample's first read.
 * The frames are sorted by address and grouped greedily: frame objects (3.9/3.10) and
 * generator frames sit on the heap in no particular order, often several to a page,
 * and the kernel's cost of a read is mostly per range and page; a gap costs bytes. */
int walk_learn_blocks(const py_layout_t *L, reader_t *r, rd_thread_t *tc, size_t from, size_t nwalked)
{
    size_t i, k = 0, m = 0, fs = L->fr_size;

    for (i = from; i < nwalked; i++)
        if (r->walk[i].from != FROM_CHUNK && !r->walk[i].cached)
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
        if ((b = sb_slot(tc, k++)) == NULL)
            return -1;
        b->addr = a;
        b->len = fs;
    }
    for (i = 0; i < k; i++)
        if (block_room(&tc->sb[i]))
            return -1;
    tc->nsb = k;
    return 0;
}

/* A stack that moved while the round read it (read_again): keeps what the round's first
 * reading had, for walk_moment_cut(). 3.11+: its copies of the chunk, and the data
 * stack's top both before and after them (nothing without copies, with an anchor, or
 * when the chunk changed meanwhile); 3.9/3.10: the frames it knew, walk[keep..nw) (nw 0:
 * it knew none). Returns 0, or -1 out of memory. */
int walk_moment_save(const py_layout_t *L, reader_t *r, const rd_thread_t *tc, size_t keep, size_t nw)
{
    rd_moment_t *m = &r->moment;
    uint64_t top0, top1;

    m->len = 0;
    m->nwalk = 0;
    if (L->frames_kind == PY_FRAMES_OBJECTS) {
        if (nw > keep && nw <= UNW_MAX_DEPTH) {
            memcpy(m->walk, r->walk + keep, (nw - keep) * sizeof *m->walk);
            m->nwalk = nw - keep;
            m->walk_top = keep == 0;
        }
        return 0;
    }
    if (tc->chunk == 0 || tc->copied == 0 || tc->base != tc->chunk || L->ts_datastack_chunk == 0 ||
        L->ts_datastack_chunk + PY_TS_DATASTACK_SPAN > L->ts_size ||
        get_u64(tc->ts, L->ts_datastack_chunk) != tc->chunk || tc->ds_end[0] != tc->chunk)
        return 0;
    top0 = get_u64(tc->ts, L->ts_datastack_chunk + PY_TS_DATASTACK_TOP);
    top1 = tc->ds_end[1];
    if (tc->copied > SIZE_MAX / 2 || remora_grow((void **)&m->copies, &m->cap, 2 * tc->copied, 1))
        return -1;
    memcpy(m->copies, tc->a, tc->copied);
    memcpy(m->copies + tc->copied, tc->b, tc->copied);
    m->len = tc->copied;
    m->base = tc->base;
    m->top = top0 < top1 ? top0 : top1;
    /* the lower of the current frames read before and between the copies, in the chunk
     * (outside it, a generator's or a C stack's: every frame in the chunk is calling) */
    m->cur = UINT64_MAX;
    if (tc->cur0 >= tc->chunk && tc->cur0 < m->top)
        m->cur = tc->cur0;
    if (tc->cur_mid >= tc->chunk && tc->cur_mid < m->top && tc->cur_mid < m->cur)
        m->cur = tc->cur_mid;
    return 0;
}

/* The first n words of the locals of the frame whose header is at fb, mixed into one. */
static uint64_t call_locals(const unsigned char *fb, size_t off, unsigned n)
{
    uint64_t h = UINT64_C(0xCBF29CE484222325);
    unsigned i;

    for (i = 0; i < n; i++) {
        h = (h ^ get_u64(fb, off + 8 * (size_t)i)) * UINT64_C(0x9E3779B97F4A7C15);
        h ^= h >> 29;
    }
    return h;
}

/* Keeps walk[from..nw) as the calls the thread makes, for the next round's
 * walk_moment_cut(). 3.11+: a frame in the chunk with another frame of the chunk inside
 * it (its callee, or one a C call made) keeps the first RD_CALL_LOCALS words of its
 * locals below that frame, as both copies have them: a loop's every short call at one
 * place (asyncio's _run_once running each ready handle at `handle._run()`) has other
 * locals (the handle), where one long call keeps them. Returns 0 or REMORA_ENOMEM. */
int walk_keep_calls(const py_target_t *T, reader_t *r, rd_thread_t *tc, size_t from, size_t nw)
{
    const py_layout_t *L = &T->layout;
    size_t k, off = L->fr_localsplus;
    uint64_t inner = 0;             /* the nearest frame inside, in the chunk (0: none) */

    if (remora_grow((void **)&tc->calls, &tc->cap_calls, nw - from, sizeof *tc->calls))
        return REMORA_ENOMEM;
    tc->ncalls = 0;
    for (k = from; k < nw; k++) {
        const walked_t *w = &r->walk[k];
        struct rd_call *c;
        if (w->cached)
            continue;
        c = &tc->calls[tc->ncalls++];
        c->addr = w->addr;
        c->code = w->code;
        c->instr = w->instr;
        c->locals = 0;
        c->nloc = 0;
        if (w->from != FROM_CHUNK || L->frames_kind == PY_FRAMES_OBJECTS)
            continue;
        if (inner > w->addr && off != 0 && off <= L->fr_size && inner - w->addr >= off + 8 && w->addr >= tc->base) {
            uint64_t span = (inner - w->addr - off) / 8;
            unsigned n = span < RD_CALL_LOCALS ? (unsigned)span : RD_CALL_LOCALS;
            size_t at = (size_t)(w->addr - tc->base);
            rd_fields_t ff;
            if (w->addr - tc->base <= tc->copied && tc->copied - at >= off + 8 * (size_t)n &&
                tc->copied - at >= L->fr_size) {
                frame_decode(T, tc->a + at, &ff);
                if (ff.code == w->code && ff.instr == w->instr &&
                    memcmp(tc->a + at + off, tc->b + at + off, 8 * (size_t)n) == 0) {
                    c->locals = call_locals(tc->a + at, off, n);
                    c->nloc = n;
                }
            }
        }
        inner = w->addr;
    }
    return REMORA_OK;
}

/* 3.11+, a round none of whose readings could be walked from the current frame (the
 * frame read through the state had moved on by the time its own memory was read: one of
 * fidelity/mix's pipeline of generators, suspended and linking to nothing): every frame
 * in the chunk below the data stack's top is one of the thread's callers then, and
 * while it holds the same in both copies it is one of its callers throughout them. The
 * walk from the innermost call of the last sample (tc->calls) that the last copies still
 * hold at its place, below the top both before (the state read) and after them, through
 * frames of the chunk only, each the same in both copies, each below the one before.
 * Returns the frames walked into r->walk (innermost first), 0 when none could be; the
 * caller takes them as partial (the frames inside are not known) if rooted. */
size_t walk_chunk_outer(const py_target_t *T, reader_t *r, const rd_thread_t *tc)
{
    const py_layout_t *L = &T->layout;
    size_t j, k, fs = L->fr_size;
    uint64_t top, top0;

    if (L->frames_kind == PY_FRAMES_OBJECTS || tc->chunk == 0 || tc->base != tc->chunk || tc->copied < fs ||
        L->ts_datastack_chunk == 0 || L->ts_datastack_chunk + PY_TS_DATASTACK_SPAN > L->ts_size ||
        get_u64(tc->ts, L->ts_datastack_chunk) != tc->chunk || tc->ds_end[0] != tc->chunk)
        return 0;
    top0 = get_u64(tc->ts, L->ts_datastack_chunk + PY_TS_DATASTACK_TOP);
    top = top0 < tc->ds_end[1] ? top0 : tc->ds_end[1];
    for (j = 0; j < tc->ncalls; j++) {
        const struct rd_call *c = &tc->calls[j];
        uint64_t frame = c->addr;
        rd_fields_t f1, f2;
        if (frame < tc->chunk + RD_CHUNK_HDR || frame % 8 || frame - tc->base > tc->copied - fs || frame + fs > top)
            continue;
        frame_decode(T, tc->a + (frame - tc->base), &f1);
        if (f1.code != c->code || f1.code == 0)
            continue;
        for (k = 0; frame != 0; k++) {
            walked_t *w = &r->walk[k];
            if (k == UNW_MAX_DEPTH || frame < tc->chunk + RD_CHUNK_HDR || frame % 8 ||
                frame - tc->base > tc->copied - fs || frame + fs > top)
                return 0;
            frame_decode(T, tc->a + (frame - tc->base), &f1);
            frame_decode(T, tc->b + (frame - tc->base), &f2);
            if (f1.code != f2.code || f1.prev != f2.prev || f1.instr != f2.instr || f1.code == 0 || f1.gen ||
                (f1.prev != 0 && f1.prev >= frame))
                return 0;
            walked_fill(w, frame, &f1, FROM_CHUNK, 0);
            frame = f1.prev;
        }
        return k;
    }
    return 0;
}

/* Was the call at addr (code, instr) being made at the thread's last sample too? With
 * its locals known then (3.11+), the same words in the first copies (fb: that frame's
 * header in the first of them, fb2 in the second; NULL: 3.9/3.10) must hold them still,
 * else it is another call at the same place. len: the bytes from fb on in each copy. */
static int moment_long(const py_layout_t *L, const rd_thread_t *tc, uint64_t addr, uint64_t code, uint64_t instr,
                       const unsigned char *fb, const unsigned char *fb2, size_t len)
{
    size_t j, n;

    for (j = 0; j < tc->ncalls; j++)
        if (tc->calls[j].addr == addr) {
            const struct rd_call *c = &tc->calls[j];
            if (c->code != code || c->instr != instr)
                return 0;
            if (c->nloc == 0 || fb == NULL)
                return 1;
            n = 8 * (size_t)c->nloc;
            if (L->fr_localsplus > len || len - L->fr_localsplus < n ||
                memcmp(fb + L->fr_localsplus, fb2 + L->fr_localsplus, n) != 0)
                return 1;           /* not known now: as it was */
            return call_locals(fb, L->fr_localsplus, c->nloc) == c->locals;
        }
    return 0;
}

/* 3.9/3.10, walk_moment_cut() on the frames the first reading knew: the i-th frame from
 * the root, calling then, must be the same frame object at the same call. */
static size_t moment_cut_objects(reader_t *r, const rd_thread_t *tc, size_t keep, size_t nw, int *cut)
{
    const rd_moment_t *m = &r->moment;
    size_t i, calling = m->walk_top ? 1 : 0;

    for (i = 0; i < nw - keep && i + calling < m->nwalk; i++) {
        walked_t *w = &r->walk[nw - 1 - i];
        const walked_t *f = &m->walk[m->nwalk - 1 - i];
        if (w->addr == f->addr && w->code == f->code && w->instr == f->instr && w->prev == f->prev)
            continue;
        if (!moment_long(NULL, tc, f->addr, f->code, f->instr, NULL, NULL, 0))
            return keep;            /* a short call ended: the moving top */
        *cut = 1;
        if (w->prev != f->prev)
            return nw - i;          /* another caller's frame then: cut */
        *w = *f;
        return nw - 1 - i;
    }
    return keep;
}

/* A reading kept after re-readings (walk[keep..nw), innermost first) is of a later
 * moment than the round's, and re-readings last longer where a stack moves faster: one
 * that ends after a long call the thread was making at the round's first reading has
 * returned gives that call's samples to the calls after it (fidelity/mix under the user
 * engine: the pipeline of generators read again until it returned, its samples written as
 * callback_sub's, 2-3 points each way; on 3.9, recurse's as json_roundtrip's). Read
 * outermost first, each frame that was calling then is checked; 3.11+ a frame in the
 * chunk as the first copies have it (below the current frame, below the top both before
 * and after the copies, the same in both copies), 3.9/3.10 one the first reading knew.
 * Another function's frame at its place, or the same at another call, is kept as the
 * first reading had it and the frames inside it are cut, when that call was being made a
 * round before too (tc->calls: it lasted a round, and so the re-readings crossing its end
 * are what moves its share; the same frame gone on to another instruction, only with the
 * locals it had then: a loop's calls at one place are each short); a frame with another
 * caller then is cut with them. A short
 * call that ended is the moving top the re-readings are for (cutting those too would make
 * two in five of Django's samples partial): from there, as from the current frame then
 * and wherever the first reading knew nothing, the reading is kept as it is. Returns the
 * new keep (the innermost frame kept); *cut is set when the frames from there are the
 * first reading's outer ones (partial), else left as it was. */
size_t walk_moment_cut(const py_target_t *T, reader_t *r, const rd_thread_t *tc, size_t keep, size_t nw, int *cut)
{
    const py_layout_t *L = &T->layout;
    const rd_moment_t *m = &r->moment;
    size_t k, at, fs = L->fr_size;
    int same;

    if (L->frames_kind == PY_FRAMES_OBJECTS)
        return moment_cut_objects(r, tc, keep, nw, cut);
    if (m->len == 0 || fs > m->len)
        return keep;
    for (k = nw; k > keep; k--) {
        walked_t *w = &r->walk[k - 1];
        rd_fields_t f1, f2;
        if (w->from != FROM_CHUNK || w->cached)
            continue;
        if (w->addr < m->base || w->addr - m->base > m->len - fs || w->addr + fs > m->top || w->addr >= m->cur)
            return keep;            /* the top then, or above it: nothing known */
        at = (size_t)(w->addr - m->base);
        frame_decode(T, m->copies + at, &f1);
        frame_decode(T, m->copies + m->len + at, &f2);
        if (f1.code != f2.code || f1.prev != f2.prev || f1.instr != f2.instr || f1.code == 0)
            return keep;
        if (f1.code == w->code && f1.instr == w->instr && f1.prev == w->prev)
            continue;               /* the same call: held */
        /* the same frame gone on to another instruction: the call it made then must be
         * the one it made a round before (its locals), not another at that place */
        same = f1.code == w->code && f1.prev == w->prev;
        if (!moment_long(L, tc, w->addr, f1.code, f1.instr, same ? m->copies + at : NULL, m->copies + m->len + at,
                         (size_t)(m->top - w->addr) < m->len - at ? (size_t)(m->top - w->addr) : m->len - at))
            return keep;            /* a short call ended: the moving top */
        *cut = 1;
        if (f1.prev != w->prev)
            return k;               /* another caller's frame then: cut */
        w->code = f1.code;
        w->instr = f1.instr;
        w->entry = f1.entry;
        w->gen = f1.gen;
        w->shim = f1.shim;
        return k - 1;
    }
    return keep;
}
