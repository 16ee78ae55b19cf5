/* unwind/sample.c — every thread's stack per sample in a bounded number of system calls.
 *
 * unw_sample() runs one round: the first read (copy.c) of every thread state and stack
 * copy; each thread's walk in its copies (walk.c; anchor.c, parked.c), checked against
 * the second copies; the code objects validated once and the frames named (naming.c).
 * A thread whose innermost frames moved while they were read keeps the outer frames
 * known (partial); one whose stack could not be read at all gets an error. A sample
 * that fetched a code object for the first time is taken once more, it cached.
 * Near 700 lines on purpose: a thread's reading, its re-readings and the rules for what a
 * moved stack may keep (sample_thread) are one decision, best read top to bottom; the
 * copies, the walk and its checks, and the naming each have a file of their own.
 */
#include <stdlib.h>
#include <string.h>

#include "remora.h"
#include "internal.h"

void unw_reader_free(reader_t *r)
{
    size_t i;

    if (r == NULL)
        return;
    for (i = 0; i < r->nthreads; i++)
        tc_fini(&r->threads[i]);
    for (i = 0; i < r->cap_blocks; i++) {
        free(r->blocks[i].one);
        free(r->blocks[i].two);
    }
    free(r->blocks);
    free(r->interps);
    free(r->threads);
    free(r->iov);
    free(r->req);
    free(r->stage);
    free(r->staged);
    free(r->order);
    free(r->walk);
    free(r->walk2);
    free(r->scratch);
    free(r->codes);
    free(r->fps);
    free(r->spec_codes);
    free(r->spec_fps);
    free(r->raw);
    free(r);
}

/* The thread list, the states and the stack copies: the first read of a round, again
 * (rebuilding the thread cache) while the lists moved under it, three times at most. */
static int sample_lists(unwinder_t *u, reader_t *r)
{
    const py_layout_t *L = &u->target->layout;
    size_t i;
    int err, attempt;

    for (attempt = 0;; attempt++) {
        if (!r->valid && (err = tc_rebuild(u, r)) != REMORA_OK)
            return err;
        err = copy_states(u, r);
        if (err == REMORA_ENOPROC || err == REMORA_ENOMEM || err == REMORA_EPERM)
            return err;
        if (err == REMORA_OK && tc_lists_unchanged(L, r))
            return REMORA_OK;
        /* a chunk or cframe may have been freed: read without speculation next time */
        for (i = 0; i < r->nthreads; i++) {
            rd_thread_t *tc = &r->threads[i];
            tc->chunk = 0;
            tc->base = 0;
            tc->cframe = 0;
            tc->nsb = 0;
            if (tc->anc_state != ANC_OFF)
                tc->anc_state = ANC_NONE;
            tc->nbelow = 0;
        }
        r->nspec_codes = 0;
        r->valid = 0;
        if (attempt == 2)
            return REMORA_ECORRUPT;
    }
}

/* What is known of thread i without its stack: ids, GIL, GC, exception state, and what
 * /proc says of its task. */
static void thread_identity(unwinder_t *u, reader_t *r, rd_thread_t *tc, unw_thread_t *th)
{
    const py_layout_t *L = &u->target->layout;
    const rd_interp_t *fi = &r->interps[tc->interp];

    pid_t was = tc->native_id;

    memset(th, 0, sizeof *th);
    if (L->ts_native_thread_id != 0) {
        /* set by the thread itself once it runs: read it every sample */
        uint64_t nid = get_u64(tc->ts, L->ts_native_thread_id);
        tc->native_id = nid < (1u << 31) ? (pid_t)nid : 0;
    } else if (tc->tid_now > 0 && get_u64(tc->ts, L->ts_thread_id) == tc->pthread_seen) {
        tc->native_id = tc->tid_now;
    }
    if (tc->native_id != was) {
        tc->known = 0;              /* another thread in this state now */
        tc->root = 0;
    }
    th->tstate = tc->tstate;
    th->ident = get_u64(tc->ts, L->ts_thread_id);
    th->interp = fi->addr;
    th->interp_id = fi->id;
    th->native_id = tc->native_id;
    th->is_main = tc->native_id == proc_pid(u->p);
    th->holds_gil = fi->locked && fi->holder == tc->tstate;
    th->gc = fi->gc != 0;
    if (u->want & UNW_WANT_EXC)     /* from this sample's copy of the thread state */
        th->handling_exc = unw_exc_state(u, tc->tstate, tc->ts, &tc->exc_item);
    /* a parked thread too: one that released the GIL may be running C code. With the
     * kernel engine, from its table (no system call), and a thread on a CPU is left to
     * it; without, after its walk (idle_decide) */
    if (th->native_id > 0 && u->kern != NULL)
        kern_cpu_state(u, tc, th);
    if (th->native_id > 0 && (u->want & UNW_WANT_NAMES))
        proc_task_name(u->p, th->native_id, th->name, sizeof th->name);
}

/* The thread's current frame as this round's first read has it (3.11/3.12 through its
 * cframe, read again when the cframe moved), and its chunk: the copies start anew when
 * it changed. Returns 0, REMORA_ECORRUPT or a read error. */
static int thread_current(unwinder_t *u, rd_thread_t *tc, uint64_t *cur)
{
    const py_layout_t *L = &u->target->layout;
    uint64_t chunk_now;
    int err;

    *cur = get_u64(tc->ts, L->ts_frame);
    if (L->frames_kind == PY_FRAMES_CFRAME) {
        uint64_t cf = *cur;
        if (cf != tc->cframe || cf == 0) {
            /* the eval loop's cframe moved: read through it, copy again */
            tc->cframe = cf;
            tc->copied = 0;
            *cur = 0;
            if (cf != 0 && (err = proc_read_u64(u->p, cf + L->cframe_current_frame, cur)) != 0)
                return err;
        } else {
            *cur = tc->cur_spec;
        }
        /* a nested eval loop publishes its cframe before setting the frame in it: only
         * the thread state's own root cframe may hold no frame */
        if (cf != 0 && *cur == 0 && (cf < tc->tstate || cf - tc->tstate >= L->ts_size))
            return REMORA_ECORRUPT;
    }
    tc->cur0 = *cur;
    if (L->frames_kind == PY_FRAMES_OBJECTS) {
        /* walked from the frame current between the remembered blocks' two copies */
        if (tc->nsb && tc->mid_ok)
            *cur = tc->cur_mid;
        return REMORA_OK;
    }
    chunk_now = get_u64(tc->ts, L->ts_datastack_chunk);
    if (chunk_now != tc->chunk) {
        tc->known = 0;
        tc->chunk = tc->base = chunk_now;
        tc->chunk_size = 0;
        tc->copied = 0;
        tc->copy_len = RD_MIN_COPY;
        if (tc->anc_state != ANC_OFF)
            tc->anc_state = ANC_NONE;
        tc->nbelow = 0;
    }
    if (anchor_on(u, tc))
        anchor_before(u, tc);
    else if (tc->base != tc->chunk)
        anchor_drop(tc);
    return REMORA_OK;
}

/* Walks the thread from its current frame, copying more of its chunk while the walk
 * needs it (three walks at most). *cur becomes the frame walked from. */
static int thread_walk(unwinder_t *u, reader_t *r, rd_thread_t *tc, uint64_t *cur, size_t *nw)
{
    const py_layout_t *L = &u->target->layout;
    walk_more_t more;
    size_t tries;
    int err;

    for (tries = 0;; tries++) {
        if (L->frames_kind != PY_FRAMES_OBJECTS && tc->chunk && tc->copied == 0 && *cur != 0) {
            /* nothing copied yet this sample: copy what the current frame needs */
            size_t want = *cur > tc->base && *cur - tc->base < RD_MAX_COPY ? (size_t)(*cur - tc->base) + L->fr_size
                                                                          : RD_MIN_COPY;
            if (want < tc->copy_len)
                want = tc->copy_len;
            if ((err = copy_again(u, r, tc, copy_clamp(tc, want))) != 0)
                return err;
        }
        if (tc->copied >= RD_CHUNK_HDR && tc->base == tc->chunk) {
            uint64_t sz = get_u64(tc->a, 8);
            tc->chunk_size = sz >= RD_CHUNK_HDR && sz <= (1u << 30) ? (size_t)sz : 0;
        }
        /* with a copy, walk from the frame that was current between its two halves */
        if (tc->copied)
            *cur = tc->cur_mid;
        err = walk_frames(u, r, tc, *cur, nw, &more);
        if (err || more.kind == WALK_DONE)
            return err;
        if (tries == 2)
            return REMORA_ECORRUPT;
        if (more.kind == WALK_FROM_CHUNK)
            anchor_drop(tc);
        else
            tc->copy_len = copy_clamp(tc, more.len + 1024);
        tc->copied = 0;
    }
}

/* Does the walk end where every thread's stack is rooted? Never at a generator's or
 * coroutine's frame: one read while suspended links to nothing, though it may have been
 * running, called from elsewhere, in between. 3.11-3.13: at its outermost eval loop's
 * entry frame (3.12/3.13: a C-owned shim whose previous is NULL; 3.11: marked is_entry);
 * a walk that ends anywhere else followed a link not yet written. */
static int rooted(const py_layout_t *L, const reader_t *r, size_t nw)
{
    if (nw == 0)
        return 1;
    if (r->walk[nw - 1].gen)
        return 0;
    if (L->walk_root == PY_ROOT_ENTRY)
        return r->walk[nw - 1].entry;
    if (L->walk_root == PY_ROOT_SHIM)
        return r->walk[nw - 1].shim;
    return 1;
}

/* Next time copy a little more than this stack used, from where the copies start (the
 * chunk, or the anchor). */
static void next_copy_len(const py_layout_t *L, const reader_t *r, rd_thread_t *tc, uint64_t cur, size_t nw)
{
    uint64_t top = tc->base;
    size_t k;

    for (k = 0; k < nw; k++)
        if (r->walk[k].from == FROM_CHUNK && !r->walk[k].cached && r->walk[k].addr + L->fr_size > top)
            top = r->walk[k].addr + L->fr_size;
    if (cur > tc->base && cur - tc->base < RD_MAX_COPY && cur + L->fr_size > top)
        top = cur + L->fr_size;
    tc->copy_len = (size_t)(top - tc->base) + 256;
    if (tc->copy_len < RD_MIN_COPY && tc->base == tc->chunk)
        tc->copy_len = RD_MIN_COPY;
    tc->copy_len = copy_clamp(tc, tc->copy_len);
}

/* Keeps walk[from..nw) as thread i's frames, to be named (shims left out). */
static int keep_raw(unwinder_t *u, reader_t *r, rd_thread_t *tc, size_t from, size_t nw)
{
    size_t k;

    if (remora_grow((void **)&r->raw, &r->cap_raw, r->nraw + (nw - from), sizeof *r->raw))
        return REMORA_ENOMEM;
    tc->raw_first = r->nraw;
    for (k = from; k < nw; k++) {
        rd_raw_t *fr;
        if (r->walk[k].shim)
            continue;
        fr = &r->raw[r->nraw++];
        fr->addr = r->walk[k].addr;
        fr->code = r->walk[k].code;
        fr->instr = r->walk[k].instr;
        fr->entry = r->walk[k].entry;
        /* where one C call of the eval loop began (--native merges the stacks there) */
        fr->below = 0;
        if (u->target->layout.walk_root == PY_ROOT_ANY) {
            fr->eval_entry = 1;
        } else if (u->target->layout.walk_root == PY_ROOT_ENTRY) {
            fr->eval_entry = r->walk[k].entry;
        } else {
            fr->eval_entry = k + 1 < nw && r->walk[k + 1].shim;
            if (fr->eval_entry)
                fr->below = r->walk[k + 1].addr;
        }
        if (name_note_code(r, u->codes, fr->code))
            return REMORA_ENOMEM;
    }
    tc->raw_n = r->nraw - tc->raw_first;
    return REMORA_OK;
}

/* One reading of the thread's stack from its state: the current frame, the walk in its
 * copies, the check. *keep: the innermost frame known (walk_check). Returns 0, or
 * REMORA_ECORRUPT when nothing of the stack is known, or a read error. */
/* Swaps the roles of a thread's two copies (the chunk's and the remembered blocks'). */
static void swap_copies(rd_thread_t *tc)
{
    unsigned char *t = tc->a;
    size_t k;

    tc->a = tc->b;
    tc->b = t;
    for (k = 0; k < tc->nsb; k++) {
        t = tc->sb[k].one;
        tc->sb[k].one = tc->sb[k].two;
        tc->sb[k].two = t;
    }
}

/* The walk from the current frame in the first copies, checked against the second. */
static int walk_and_check(unwinder_t *u, reader_t *r, rd_thread_t *tc, uint64_t *cur, size_t *nw, size_t *keep)
{
    int err;

    if ((err = thread_walk(u, r, tc, cur, nw)) != REMORA_OK || (err = walk_check(u, r, tc, *cur, *nw, keep)) != REMORA_OK)
        return err;
    if (!rooted(&u->target->layout, r, *nw) || (*keep == *nw && *nw > 0))
        return REMORA_ECORRUPT;     /* nothing of the stack is known */
    return REMORA_OK;
}

static int thread_read(unwinder_t *u, reader_t *r, rd_thread_t *tc, uint64_t *cur, size_t *nw, size_t *keep)
{
    uint64_t cur1;
    size_t nsb;
    int err;

    if ((err = thread_current(u, tc, cur)) != REMORA_OK)
        return err;
    cur1 = *cur;
    nsb = tc->nsb;
    err = walk_and_check(u, r, tc, cur, nw, keep);
    if (err != REMORA_ECORRUPT || tc->nsb != nsb ||
        (u->target->layout.frames_kind == PY_FRAMES_OBJECTS ? !(tc->nsb && tc->mid_ok) : !tc->copied))
        return err;
    /* The current frame read between the copies may have been pushed after the first
     * copy was taken: that copy holds what was there before it, and a walk through it
     * goes nowhere (3.9/3.10: a frame object freed then, or another call's). The second
     * copy was taken after it: walked there and checked against the first, the frames
     * that held are known just the same. */
    swap_copies(tc);
    *cur = cur1;
    err = walk_and_check(u, r, tc, cur, nw, keep);
    swap_copies(tc);
    return err;
}

/* Is the frame of the generator whose exception state tc->exc_item is among the frames
 * walked? The thread's own state: yes. 3.11+ a generator's state lies just before its
 * frame; 3.9/3.10 it lies in the generator object a frame's f_gen names, near its start
 * (a coroutine handling one, suspended and resumed between the round's two reads of the
 * state: async_busy.py on 3.10, a stack ending in the event loop written about once in
 * 200 exception-mode samples without). */
static int exc_frame_walked(const py_layout_t *L, const reader_t *r, const rd_thread_t *tc, size_t from, size_t nw)
{
    uint64_t item = tc->exc_item;
    size_t k;

    if (item >= tc->tstate && item - tc->tstate < L->ts_size)
        return 1;
    for (k = from; k < nw; k++) {
        const walked_t *w = &r->walk[k];
        if (L->frames_kind == PY_FRAMES_OBJECTS ? w->genobj != 0 && item > w->genobj && item - w->genobj <= RD_EXC_TO_FRAME
                                                : w->gen && w->addr > item && w->addr - item <= RD_EXC_TO_FRAME)
            return 1;
    }
    return 0;
}

#define RD_REREADS 5                /* readings again of a thread whose stack moved */

/* The thread's state read again, alone, for a second reading: what the round's first
 * read had of it is from before its stack moved. */
static int thread_reread(unwinder_t *u, reader_t *r, rd_thread_t *tc, int *other)
{
    const py_layout_t *L = &u->target->layout;
    uint64_t pthread = get_u64(tc->ts, L->ts_thread_id);
    uint64_t nid = L->ts_native_thread_id ? get_u64(tc->ts, L->ts_native_thread_id) : 0;
    int err = proc_read(u->p, tc->tstate, tc->ts, L->ts_size);

    if (err)
        return err;
    /* the state freed and made again for another thread meanwhile: its stack is not
     * the one of the thread the round named */
    *other = get_u64(tc->ts, L->ts_thread_id) != pthread ||
             (L->ts_native_thread_id && get_u64(tc->ts, L->ts_native_thread_id) != nid);
    if (*other)
        return REMORA_ECORRUPT;
    r->late = 1;
    tc->copied = 0;
    tc->mid_ok = 0;
    tc->cframe = 0;                 /* 3.11/3.12: its current frame read through it anew */
    /* 3.9/3.10: its frame objects in the blocks remembered, both copies and the current
     * frame after them, in one read (one read per frame object would be slower than
     * their calls) */
    if (L->frames_kind == PY_FRAMES_OBJECTS && tc->nsb && park_reread(u, r, tc) != REMORA_OK)
        tc->nsb = 0;
    return REMORA_OK;
}

/* Reads thread i's stack. Returns 0 (th->error set when it could not be read), or
 * REMORA_ENOPROC / REMORA_ENOMEM, which end the round. */
static int sample_thread(unwinder_t *u, reader_t *r, size_t i)
{
    const py_layout_t *L = &u->target->layout;
    rd_thread_t *tc = &r->threads[i];
    const rd_interp_t *fi = &r->interps[tc->interp];
    unw_thread_t *th = &u->threads[i];
    uint64_t cur = 0;
    size_t nw = 0, keep = 0;
    int err, moved, other = 0, unsure = 0, was_known, learned = 0;

    tc->raw_n = 0;
    tc->raw_first = r->nraw;        /* never last round's: it may lie past this one's */
    tc->partial = 0;
    thread_identity(u, r, tc, th);
    if (kern_skips(th))
        return REMORA_OK;           /* on a CPU: its ticks sample it */
    if (u->kern != NULL && idle_skips(u, th))
        return REMORA_OK;           /* idle: left out, its stack not read */
    was_known = tc->known;          /* read whole before, and the same thread still */
    /* 3.9/3.10: another thread took over that struct pthread during the read: the state
     * and stack read may be either thread's */
    if (L->ts_native_thread_id == 0 && !tc->reuse && tc->tid_now != tc->tid_end) {
        err = REMORA_ECORRUPT;
        unsure = 1;
        goto failed;
    }
    if (tc->reuse) {
        if (park_holds(L, fi, tc)) {
            /* still parked: the saved walk, nothing read (idle: not even that) */
            u->stats.parked++;
            if (u->kern == NULL && (u->want & (UNW_WANT_CPU | UNW_WANT_ACTIVE)) && idle_decide(u, r, i, 1))
                return REMORA_OK;
            memcpy(r->walk, tc->saved, tc->nsaved * sizeof *r->walk);
            return keep_raw(u, r, tc, 0, tc->nsaved);
        }
        /* it ran: read it now. 3.9/3.10: its frame objects in the blocks remembered, in
         * one read as the first read would have (one copy, the other, the current frame
         * again); 3.11+: the chunk is copied below, the few frames outside it found again */
        tc->reuse = 0;
        tc->saved_ok = 0;
        if (L->frames_kind != PY_FRAMES_OBJECTS || park_reread(u, r, tc) != REMORA_OK)
            tc->nsb = 0;
    }
    err = thread_read(u, r, tc, &cur, &nw, &keep);
    if (err == REMORA_ENOPROC || err == REMORA_ENOMEM)
        return err;
    moved = err == REMORA_OK && r->top_moved;
    if (err != REMORA_OK || keep > 0 || moved || nw == 0) {
        /* it moved while it was read: read it again at once, from its state on, until a
         * reading is whole (RD_REREADS times at most); the reading that knows the most
         * frames is kept. A thread with no frame at all (being born or ending, or read
         * between two eval loops) is read again too: empty only if it stays so. */
        size_t best = err == REMORA_OK ? nw - keep : 0, tries;
        /* A re-reading picks, by construction, the moments a stack changes fastest,
         * when two copies agree on a state that never was more often: a thread of which
         * nothing is known is read again (fidelity/mix on 3.12: 18% of rounds unwritten
         * without, 1% with) where the caller rules can tell (reread_moved), and so is one
         * whose outer frames are known (fidelity/mix: the work function's frame was
         * lost in 5.5% of 3.13's samples, the current frame having moved after it was
         * read; 3.9/3.10: a work function's frame read after the round's first read,
         * under frames read in it, is not known, but read with them next time). Each
         * reading is checked as the first is, and a reading lasts 10-20 us: five come
         * well within a period at 10 kHz. Read again once only, a stack whose outer
         * frames were known stayed partial in 55-70% of the rounds on real programs
         * with the target on a CPU of its own (issue 29: Django 3.13 64-68%, docutils
         * 47%, aiohttp 38-43%); five times, with the frames outside the chunk learnt
         * from every reading, 28-31%, 20-24% and 6-8%, remora's CPU a sample 15-30%
         * more. */
        size_t limit = err == REMORA_OK && nw == 0 ? 1
                     : !L->reread_moved ? 0
                     : RD_REREADS;
        memcpy(r->walk2, r->walk + keep, best * sizeof *r->walk);
        for (tries = 0; tries < limit; tries++) {
            uint64_t cur2 = 0;
            size_t nw2 = 0, keep2 = 0;
            int err2;
            /* the frames this walk found outside the chunk are read with the copies:
             * read later, on their own, they would be from after the current frame. All
             * of them, the known ones' callees too (3.9/3.10: one_moment(); 3.11+: a
             * generator's or coroutine's frame met first in the walk makes the frames
             * from it up unknown once the current frame moved, and so again at every
             * reading while it is not among the frames copied with the chunk). Each
             * was read a moment ago: mapped. */
            if (err == REMORA_OK && walk_learn_blocks(L, r, tc, 0, nw))
                return REMORA_ENOMEM;
            /* a walk that went nowhere from a frame outside the chunk, read late (a
             * generator that had yielded by then: fidelity/mix's pipeline): its page is
             * copied with the chunk next time */
            if (err == REMORA_ECORRUPT && nw > 0 && L->frames_kind != PY_FRAMES_OBJECTS &&
                r->walk[0].from == FROM_BLOCK && walk_learn_page(L, tc, r->walk[0].addr))
                return REMORA_ENOMEM;
            err2 = thread_reread(u, r, tc, &other);
            if (other) {
                unsure = 1;
                break;              /* another thread's state now: nothing of this one */
            }
            if (err2 == REMORA_OK)
                err2 = thread_read(u, r, tc, &cur2, &nw2, &keep2);
            if (err2 == REMORA_ENOPROC || err2 == REMORA_ENOMEM)
                return err2;
            err = err2;
            cur = cur2;
            nw = nw2;
            keep = keep2;
            moved = err == REMORA_OK && r->top_moved;
            if (err == REMORA_OK && keep == 0 && !moved && (nw > 0 || tries > 0))
                break;              /* whole */
            if (err == REMORA_OK && nw - keep > best) {
                best = nw - keep;
                memcpy(r->walk2, r->walk + keep, best * sizeof *r->walk);
            }
        }
        if (err != REMORA_OK || keep > 0 || moved || (nw == 0 && best > 0)) {
            /* the frames outside the chunk of the last reading, the unknown ones too,
             * copied with the chunk next time (3.11+; 3.9/3.10 learn below) */
            if (err == REMORA_OK && L->frames_kind != PY_FRAMES_OBJECTS) {
                if (walk_learn_blocks(L, r, tc, 0, nw))
                    return REMORA_ENOMEM;
                learned = 1;
            }
            if (best == 0)
                goto failed;
            memcpy(r->walk, r->walk2, best * sizeof *r->walk);
            err = REMORA_OK;
            cur = 0;
            nw = best;
            keep = 0;
            tc->partial = 1;
        }
    }
    if (keep > 0 || moved)
        tc->partial = 1;
    if (!tc->known && !tc->partial && tc->copied && tc->cur_end != cur) {
        err = REMORA_ECORRUPT;      /* a thread just seen whose top moved: as below */
        goto failed;
    }
    if (tc->partial && !tc->known) {
        err = REMORA_ECORRUPT;      /* a thread just seen: its outer frames may be a freed one's */
        goto failed;
    }
    if (tc->partial && nw > 0 && (r->walk[nw - 1].addr != tc->root || r->walk[nw - 1].code != tc->root_code)) {
        /* the outer frames that held must end where the thread's own stack did at its
         * last whole reading (3.12+: a shim on its C stack or in its state; 3.11: its
         * first chunk's entry frame). Frames read from a range another thread had at
         * the first read (a chunk freed and mapped again for it) agree in both copies
         * and end at that thread's root (chaos/killed on 3.15: the main thread's outer
         * frames under the diver's tid) */
        err = REMORA_ECORRUPT;
        goto failed;
    }
    if (!tc->partial && nw == 0 && tc->cur0 != 0) {
        /* no frame walked though the state named a current frame: nothing known, not an
         * empty stack */
        err = REMORA_ECORRUPT;
        goto failed;
    }
    if (!tc->partial && tc->known && tc->root != 0 && nw > 0 &&
        (r->walk[nw - 1].addr != tc->root || r->walk[nw - 1].code != tc->root_code)) {
        /* a whole reading rooted elsewhere than the thread's last one. A thread's
         * outermost frame lasts its whole life, or until it runs no Python at all (then
         * its root is forgotten, below); a walk that ends early followed a link not yet
         * written (3.15 fidelity/mix: an eval loop's entry frame on the C stack, pushed
         * for sorted()'s key, read before its previous was set, rooted the lambda). Not
         * known: the next whole reading is the thread's, as for one just seen */
        tc->known = 0;
        tc->root = 0;
        err = REMORA_ECORRUPT;
        goto failed;
    }
    if (!tc->partial) {
        tc->known = 1;
        tc->root = nw > 0 ? r->walk[nw - 1].addr : 0;
        tc->root_code = nw > 0 ? r->walk[nw - 1].code : 0;
    }
    if (!tc->partial && tc->chunk && anchor_on(u, tc) && (err = anchor_after(u, r, tc, nw)) != REMORA_OK)
        goto failed;
    if (tc->chunk)
        next_copy_len(L, r, tc, cur, nw);
    /* 3.9/3.10: with the innermost frame known, the one above it, whose call outlasts
     * the round more often than not (a work function's, read late this time) */
    if (!learned && walk_learn_blocks(L, r, tc, keep > 0 && L->frames_kind == PY_FRAMES_OBJECTS ? keep - 1 : keep, nw))
        return REMORA_ENOMEM;
    if (tc->partial) {
        /* the innermost frames moved: the outer ones known, marked partial */
        tc->partial = 1;
        tc->copied = 0;
        tc->saved_ok = 0;
    } else if (park_save(r, fi, tc, cur, nw)) {
        return REMORA_ENOMEM;
    }
    if ((err = keep_raw(u, r, tc, keep, nw)) != REMORA_OK)
        return err;
    if (th->handling_exc == 1) {
        /* read at the round's start, before the stack: it must still be handling the
         * same one now, or the frames read may be from after its except block; and one a
         * generator or coroutine handles (3.11+: its exception state sits just before
         * its frame, in the generator object) only while that frame is in the stack
         * read: a task suspended and resumed in between was not running when read */
        uint64_t at = 0;
        if (proc_read(u->p, tc->tstate, u->tsbuf, L->ts_size) == REMORA_OK)
            th->handling_exc = unw_exc_state(u, tc->tstate, u->tsbuf, &at) == 1 && at == tc->exc_item &&
                               exc_frame_walked(L, r, tc, keep, nw);
        else
            th->handling_exc = -1;
    }
    if (tc->raw_n == 0 && (tc->partial || nw > 0)) {
        /* only C-owned frames known: nothing of the Python stack (the marker alone, of
         * a thread read whole before) */
        tc->partial = was_known;
        if (!was_known)
            th->error = REMORA_ECORRUPT;
    }
    return REMORA_OK;
failed:
    if (err == REMORA_ENOPROC || err == REMORA_ENOMEM)
        return err;
    if (err == REMORA_ECORRUPT && !unsure && was_known) {
        /* nothing of the stack is known (read again as often as the policy says), or
         * nothing that may be kept (a walk rooted elsewhere, a new chunk), of a thread
         * read whole before whose state is still its own: it ran Python too fast to
         * read. A sample of the marker alone (partial, no frame), not an error: errors
         * are for what could not be read at all (memory gone, a thread whose identity
         * changed while read, one never read whole: its stack may be one remora cannot
         * read, not a moving one), and a round dropped for a moving stack is not neutral
         * (short calls move most; fidelity/mix on 3.9 dropped 1.2% of rounds, most of
         * them fib's). Nothing is guessed: no frame, not even the root, is claimed. */
        tc->partial = 1;
        tc->raw_n = 0;
        tc->copied = 0;
        tc->saved_ok = 0;
        return REMORA_OK;
    }
    th->error = err;
    /* a torn read keeps what was learnt; a failed read forgets the guesses */
    tc->copied = 0;
    tc->saved_ok = 0;
    if (err != REMORA_ECORRUPT)
        tc->nsb = 0;
    return REMORA_OK;
}

/* With a counter that moves whenever a code object is made (3.12, 3.13) or freed
 * (3.14+), an entry validated at the current value needs no read; 0 means the counter is
 * not usable. The value last sample read serves as this sample's 'pre'. */
static int sample_codes(unwinder_t *u, reader_t *r)
{
    const py_layout_t *L = &u->target->layout;
    int have_gen = L->is_code_generation || L->is_code_version || u->target->code_version;
    uint64_t pre = r->gen_last, post = r->gen_global;
    size_t i;
    int err;

    for (i = 0; i < r->ninterps; i++)
        post = post * 0x9e3779b97f4a7c15ull + r->interps[i].gen + 1;
    if (u->target->code_version ? r->gen_global == 0 : r->ninterps == 0 || r->interps[0].gen == 0)
        have_gen = 0;
    r->gen_last = have_gen ? post : 0;
    if (pre == 0)
        have_gen = 0;
    err = name_resolve_codes(u, r, have_gen, pre, post);
    if (err && err != REMORA_ENOPROC && err != REMORA_ENOMEM) {
        /* the code objects could not be validated: no frame can be named */
        for (i = 0; i < u->nthreads; i++) {
            if (!u->threads[i].error)
                u->threads[i].error = REMORA_ECORRUPT;
            r->threads[i].raw_n = 0;
        }
        err = REMORA_OK;
    }
    return err;
}

/* One round: every thread read, its code objects validated, its frames named. */
static int sample_once(unwinder_t *u, reader_t *r)
{
    size_t i;
    int err;

    if ((err = sample_lists(u, r)) != REMORA_OK)
        return err;
    if (remora_grow((void **)&u->threads, &u->cap_threads, r->nthreads, sizeof *u->threads))
        return REMORA_ENOMEM;
    u->nthreads = r->nthreads;
    u->stats.thread_samples += r->nthreads;
    r->stamp++;
    r->ncodes = 0;
    r->nraw = 0;
    r->late = 0;
    r->fresh = 0;
    for (i = 0; i < r->nthreads; i++) {
        if ((err = sample_thread(u, r, i)) != REMORA_OK)
            return err;
        if (u->kern == NULL && (u->want & (UNW_WANT_CPU | UNW_WANT_ACTIVE)) && idle_decide(u, r, i, 0)) {
            rd_thread_t *tc = &r->threads[i];   /* idle: its frames are not named */
            if (r->nraw == tc->raw_first + tc->raw_n)
                r->nraw = tc->raw_first;
            tc->raw_n = 0;
            tc->partial = 0;
        }
    }
    if ((err = sample_codes(u, r)) != REMORA_OK)
        return err;
    name_frames(u, r);
    tc_settle_ids(u, r);
    if (u->kern != NULL)
        kern_sync_threads(u, r);
    return REMORA_OK;
}

static int any_incomplete(const unwinder_t *u)
{
    size_t i;

    for (i = 0; i < u->nthreads; i++)
        if (u->threads[i].error || u->threads[i].partial)
            return 1;
    return 0;
}

/* Each thread's Python name, from the registry read again when due (pynames.c): the
 * main interpreter's (id 0), whose threading module names every thread it started. */
static int sample_names(unwinder_t *u, reader_t *r)
{
    uint64_t interp = 0;
    size_t i;
    int err;

    if (u->pynames == NULL && (u->pynames = pyn_new()) == NULL)
        return REMORA_ENOMEM;
    if (remora_grow((void **)&u->idents, &u->cap_idents, u->nthreads, sizeof *u->idents))
        return REMORA_ENOMEM;
    for (i = 0; i < u->nthreads; i++)
        u->idents[i] = u->threads[i].ident;
    for (i = 0; i < r->ninterps; i++)
        if (r->interps[i].id == 0)
            interp = r->interps[i].addr;
    if ((err = pyn_update(u, u->pynames, interp, u->idents, u->nthreads, 0)) != REMORA_OK)
        return err;
    for (i = 0; i < u->nthreads; i++)
        u->threads[i].py_name = u->threads[i].ident ? pyn_lookup(u->pynames, u->threads[i].ident) : NULL;
    return REMORA_OK;
}

static int reader_new(reader_t **out)
{
    reader_t *r = calloc(1, sizeof *r);

    *out = r;
    if (r == NULL)
        return REMORA_ENOMEM;
    r->walk = malloc(UNW_MAX_DEPTH * sizeof *r->walk);
    r->walk2 = malloc(UNW_MAX_DEPTH * sizeof *r->walk2);
    r->scratch = malloc(UNW_MAX_DEPTH * sizeof *r->scratch);
    if (r->walk == NULL || r->walk2 == NULL || r->scratch == NULL) {
        unw_reader_free(r);
        *out = NULL;
        return REMORA_ENOMEM;
    }
    return REMORA_OK;
}

int unw_sample(unwinder_t *u, unw_thread_t **threads, size_t *n)
{
    const py_layout_t *L = &u->target->layout;
    unsigned again;
    int err;

    *threads = NULL;
    *n = 0;
    if (u->reader == NULL && (err = reader_new(&u->reader)) != REMORA_OK)
        return err;
    if (L->ts_size > 65536 || L->fr_size > 4096 || L->fr_size < 16)
        return REMORA_ECORRUPT;
    u->reader->round++;
    for (again = 0;; again++) {
        err = sample_once(u, u->reader);
        /* the thread list moved under the round twice: once more */
        if (err == REMORA_ECORRUPT || err == REMORA_EFAULT)
            err = sample_once(u, u->reader);
        /* threads dropped for code objects first read this round: once more, with them
         * cached (whatever was new is checked against the frames this time) */
        if (err == REMORA_OK && u->reader->fresh > 0)
            err = sample_once(u, u->reader);
        if (err || again >= u->tries || !any_incomplete(u))
            break;
    }
    if (err)
        return err;
    for (size_t i = 0; i < u->nthreads; i++)
        u->stats.partial += u->threads[i].partial != 0;
    if ((u->want & UNW_WANT_PYNAMES) && (err = sample_names(u, u->reader)) != REMORA_OK)
        return err;
    if (u->native != NULL && (u->want & UNW_WANT_NATIVE))
        native_merge_all(u->native, u, u->threads, u->nthreads);
    if ((u->want & UNW_WANT_TASKS) && (err = tasks_sample(u, u->threads, u->nthreads)) != REMORA_OK)
        return err;
    *threads = u->threads;
    *n = u->nthreads;
    return REMORA_OK;
}
