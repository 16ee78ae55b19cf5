/* unwind/reading.c — one thread's reading in a round (read_thread(), called by sample.c).
 *
 * Its identity without the stack; its current frame, the walk in its copies (walk.c)
 * checked against the second copies; a stack that moved while it was read read again
 * at once; and the rules for what a moved stack may keep (whole, partial, the marker
 * alone, or an error). Reads only through copy.c, walk.c, anchor.c and parked.c.
 */
#include <stdlib.h>
#include <string.h>

#include "remora.h"
#include "internal.h"

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
    /* as CPython's reader: the target's own flag, only while another holds the GIL (the
     * flag and the holder are read apart, so a thread that just got it is not both) */
    if (L->ts_gil_requested != 0 && !th->holds_gil) {
        int32_t requested;
        memcpy(&requested, tc->ts + L->ts_gil_requested, sizeof requested);
        th->gil_requested = requested != 0;
    }
    th->gc = fi->gc != 0;
    if (u->want & UNW_WANT_EXC)     /* from this sample's copy of the thread state */
        th->handling_exc = unw_exc_state(u, tc->tstate, tc->ts, &tc->exc_item);
    /* a parked thread too: one that released the GIL may be running C code. With the
     * kernel engine, from its table (no system call), and a thread on a CPU is left to
     * it; without, after its walk (idle_decide) */
    if (th->native_id > 0 && u->kern != NULL)
        kern_cpu_state(u, tc, th);
    if (th->native_id > 0 && (u->want & UNW_WANT_COMM))
        proc_task_comm(u->p, th->native_id, th->comm, sizeof th->comm);
}

/* The thread's current frame as this round's first read has it (3.11/3.12 through its
 * cframe, read again when the cframe moved unless the copies find it), and its chunk:
 * the copies start anew when it changed. Returns 0, REMORA_ECORRUPT or a read error. */
static int thread_current(unwinder_t *u, rd_thread_t *tc, uint64_t *cur)
{
    const py_layout_t *L = &u->target->layout;
    uint64_t chunk_now;
    int err;

    *cur = get_u64(tc->ts, L->ts_frame);
    if (L->frames_kind == PY_FRAMES_CFRAME) {
        uint64_t cf = *cur;
        int later = 0;              /* its current frame left to the copies */
        if (tc->copied && tc->cfw_hit) {
            /* copied with the current frame read through the cframe current then
             * (copy_cframe_settle): the copies hold, whatever the state named before */
            cf = tc->cframe;
            *cur = tc->cur_mid;
        } else if (cf != tc->cframe || cf == 0) {
            /* the eval loop's cframe moved: read through it, copy again (the copies
             * read its current frame in the window when it lies there: not now) */
            tc->cframe = cf;
            tc->copied = 0;
            *cur = 0;
            later = cf != 0 && copy_cfw_holds(L, tc, cf);
            if (cf != 0 && !later && (err = proc_read_u64(u->p, cf + L->cframe_current_frame, cur)) != 0)
                return err;
        } else {
            *cur = tc->cur_spec;
        }
        /* a nested eval loop publishes its cframe before setting the frame in it: only
         * the thread state's own root cframe may hold no frame (copy_again() checks the
         * frame it reads likewise) */
        if (cf != 0 && *cur == 0 && !later && cf_nested(L, tc, cf))
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
        if (L->frames_kind != PY_FRAMES_OBJECTS && tc->chunk && tc->copied == 0 &&
            (*cur != 0 || copy_cfw_holds(L, tc, tc->cframe))) {
            /* nothing copied yet this sample: copy what the current frame needs (3.11/
             * 3.12: not read yet when the copies read it, thread_current) */
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

/* Keeps walk[from..nw) as thread i's frames, to be named (shims left out). Runs once per
 * frame of every thread read: the loop works on locals (the compiler cannot keep
 * r->nraw or tc->raw_cached in registers across stores through raw). */
static int keep_raw(unwinder_t *u, reader_t *r, rd_thread_t *tc, size_t from, size_t nw)
{
    const walked_t *w = r->walk;
    int root = u->target->layout.walk_root;
    size_t k, n, cached = 0;
    uint64_t last_code = 0;
    rd_raw_t *raw;

    if (remora_grow((void **)&r->raw, &r->cap_raw, r->nraw + (nw - from), sizeof *r->raw))
        return REMORA_ENOMEM;
    tc->raw_first = r->nraw;
    raw = r->raw != NULL ? r->raw + r->nraw : NULL;    /* NULL: nothing to keep (nw == from),
                                                     * never grown: no offset on NULL */
    for (k = from, n = 0; k < nw; k++) {
        rd_raw_t *fr;
        if (w[k].shim)
            continue;
        cached = w[k].cached ? cached + 1 : 0;
        fr = &raw[n++];
        fr->addr = w[k].addr;
        fr->code = w[k].code;
        fr->instr = w[k].instr;
        fr->entry = w[k].entry;
        /* where one C call of the eval loop began (--native merges the stacks there) */
        fr->below = 0;
        if (root == PY_ROOT_ANY) {
            fr->eval_entry = 1;
        } else if (root == PY_ROOT_ENTRY) {
            fr->eval_entry = w[k].entry;
        } else {
            fr->eval_entry = k + 1 < nw && w[k + 1].shim;
            if (fr->eval_entry)
                fr->below = w[k + 1].addr;
        }
        /* a run of frames of one code object (recursion) noted once */
        if ((n == 1 || last_code != fr->code) && name_note_code(r, u->codes, fr->code))
            return REMORA_ENOMEM;
        last_code = fr->code;
    }
    r->nraw += n;
    tc->raw_cached = cached;
    tc->raw_n = n;
    return REMORA_OK;
}

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

/* One reading of the thread's stack from its state: the current frame, the walk in its
 * copies, the check. *keep: the innermost frame known (walk_check). Returns 0, or
 * REMORA_ECORRUPT when nothing of the stack is known, or a read error. */
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

    if (item >= tc->tstate && item - tc->tstate < L->ts_read)
        return 1;
    for (k = from; k < nw; k++) {
        const walked_t *w = &r->walk[k];
        if (L->frames_kind == PY_FRAMES_OBJECTS ? w->genobj != 0 && item > w->genobj && item - w->genobj <= RD_EXC_TO_FRAME
                                                : w->gen && w->addr > item && w->addr - item <= RD_EXC_TO_FRAME)
            return 1;
    }
    return 0;
}

#define RD_REREADS 5                /* readings again of a thread whose stack moved, always */
#define RD_REREADS_MORE 10          /* ... and up to this many while u->reread_ns lasts */

/* The thread's state read again, alone, for a second reading: what the round's first
 * read had of it is from before its stack moved. */
static int thread_reread(unwinder_t *u, reader_t *r, rd_thread_t *tc, int *other)
{
    const py_layout_t *L = &u->target->layout;
    uint64_t pthread = get_u64(tc->ts, L->ts_thread_id);
    uint64_t nid = L->ts_native_thread_id ? get_u64(tc->ts, L->ts_native_thread_id) : 0;
    int err = proc_read(u->p, tc->tstate, tc->ts, L->ts_read);

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

/* One reading of a thread and its outcome, as read_thread() takes it from step to step. */
typedef struct reading {
    uint64_t cur;                   /* the frame walked from */
    size_t nw, keep;                /* frames walked in r->walk; the innermost known */
    int err;                        /* the reading's: 0, REMORA_ECORRUPT or a read error */
    int moved;                      /* its top moved while read (r->top_moved) */
    int unsure;                     /* the state may be another thread's now */
    int was_known;                  /* read whole before, and the same thread still */
    int learned;                    /* the frames outside the chunk already learnt */
    int failed;                     /* nothing of this reading may be kept */
} reading_t;

/* A thread reused from last round (tc->reuse): 1 when it is still parked, its saved walk
 * kept (*err: 0 or what keeping it returned); 0 when it ran, to be read now. */
static int read_parked(unwinder_t *u, reader_t *r, size_t i, int *err)
{
    const py_layout_t *L = &u->target->layout;
    rd_thread_t *tc = &r->threads[i];

    *err = REMORA_OK;
    if (park_holds(L, &r->interps[tc->interp], tc)) {
        /* still parked: the saved walk, nothing read (idle: not even that) */
        u->stats.parked++;
        tc->kept = r->stamp;        /* (counted once the round's result stands) */
        if (u->kern == NULL && (u->want & (UNW_WANT_CPU | UNW_WANT_ACTIVE)) && idle_decide(u, r, i, 1))
            return 1;
        memcpy(r->walk, tc->saved, tc->nsaved * sizeof *r->walk);
        *err = keep_raw(u, r, tc, 0, tc->nsaved);
        return 1;
    }
    /* it ran: read it now. 3.9/3.10: its frame objects in the blocks remembered, in
     * one read as the first read would have (one copy, the other, the current frame
     * again); 3.11+: the chunk is copied below, the few frames outside it found again */
    tc->reuse = 0;
    tc->saved_ok = 0;
    if (L->frames_kind != PY_FRAMES_OBJECTS || park_reread(u, r, tc) != REMORA_OK)
        tc->nsb = 0;
    return 0;
}

/* A thread whose stack moved while it was read (or that had no frame): read again at
 * once, from its state on, until a reading is whole (RD_REREADS times, and up to
 * RD_REREADS_MORE while the re-readings have lasted under u->reread_ns); the
 * reading that knows the most frames is kept, marked partial. A thread with no frame at
 * all (being born or ending, or read between two eval loops) is read again too: empty
 * only if it stays so. A re-reading picks the moments a stack changes fastest, where two
 * copies agree on a state that never was more often: a thread of which nothing is known
 * is read again where the caller rules can tell (reread_moved), and so is one whose
 * outer frames are known; each reading is checked as the first is (why five, and what
 * they cost: docs/how-it-reads.md). Returns 0 (g->failed: nothing may be kept), or
 * REMORA_ENOPROC / REMORA_ENOMEM. */
static int read_again(unwinder_t *u, reader_t *r, rd_thread_t *tc, reading_t *g)
{
    const py_layout_t *L = &u->target->layout;
    size_t best = g->err == REMORA_OK ? g->nw - g->keep : 0, tries;
    size_t limit = g->err == REMORA_OK && g->nw == 0 ? 1
                 : !L->reread_moved ? 0
                 : RD_REREADS_MORE;
    int64_t began = limit > RD_REREADS ? remora_now_ns() : 0;
    int other = 0;

    memcpy(r->walk2, r->walk + g->keep, best * sizeof *r->walk);
    for (tries = 0; tries < limit; tries++) {
        uint64_t cur2 = 0;
        if (tries >= RD_REREADS && remora_now_ns() - began >= u->reread_ns)
            break;                  /* the rest of the round's time is the other threads' */
        size_t nw2 = 0, keep2 = 0;
        int err2;
        /* the frames this walk found outside the chunk are read with the copies:
         * read later, on their own, they would be from after the current frame. All
         * of them, the known ones' callees too (3.9/3.10: one_moment(); 3.11+: a
         * generator's or coroutine's frame met first in the walk makes the frames
         * from it up unknown once the current frame moved, and so again at every
         * reading while it is not among the frames copied with the chunk). Each
         * was read a moment ago: mapped. */
        if (g->err == REMORA_OK && walk_learn_blocks(L, r, tc, 0, g->nw))
            return REMORA_ENOMEM;
        /* a walk that went nowhere from a frame outside the chunk, read late (a
         * generator that had yielded by then: fidelity/mix's pipeline): its page is
         * copied with the chunk next time */
        if (g->err == REMORA_ECORRUPT && g->nw > 0 && L->frames_kind != PY_FRAMES_OBJECTS &&
            r->walk[0].from == FROM_BLOCK && walk_learn_page(L, tc, r->walk[0].addr))
            return REMORA_ENOMEM;
        err2 = thread_reread(u, r, tc, &other);
        if (other) {
            g->unsure = 1;
            break;                  /* another thread's state now: nothing of this one */
        }
        if (err2 == REMORA_OK)
            err2 = thread_read(u, r, tc, &cur2, &nw2, &keep2);
        if (err2 == REMORA_ENOPROC || err2 == REMORA_ENOMEM)
            return err2;
        g->err = err2;
        g->cur = cur2;
        g->nw = nw2;
        g->keep = keep2;
        g->moved = g->err == REMORA_OK && r->top_moved;
        if (g->err == REMORA_OK && g->keep == 0 && !g->moved && (g->nw > 0 || tries > 0))
            break;                  /* whole */
        if (g->err == REMORA_OK && g->nw - g->keep > best) {
            best = g->nw - g->keep;
            memcpy(r->walk2, r->walk + g->keep, best * sizeof *r->walk);
        }
    }
    if (g->err != REMORA_OK || g->keep > 0 || g->moved || (g->nw == 0 && best > 0)) {
        /* the frames outside the chunk of the last reading, the unknown ones too,
         * copied with the chunk next time (3.11+; 3.9/3.10 learn in read_keep()) */
        if (g->err == REMORA_OK && L->frames_kind != PY_FRAMES_OBJECTS) {
            if (walk_learn_blocks(L, r, tc, 0, g->nw))
                return REMORA_ENOMEM;
            g->learned = 1;
        }
        if (best == 0) {
            size_t nw = g->err == REMORA_ECORRUPT ? walk_chunk_outer(u->target, r, tc) : 0;
            if (nw == 0 || !rooted(L, r, nw)) {
                g->failed = 1;
                return REMORA_OK;
            }
            /* its callers in the chunk: the frames inside them not known */
            u->stats.chunk_outer++;
            g->err = REMORA_OK;
            g->cur = 0;
            g->nw = nw;
            g->keep = 0;
            tc->partial = 1;
            return REMORA_OK;
        }
        memcpy(r->walk, r->walk2, best * sizeof *r->walk);
        g->err = REMORA_OK;
        g->cur = 0;
        g->nw = best;
        g->keep = 0;
        tc->partial = 1;
    }
    return REMORA_OK;
}

/* Whether the reading may be kept, whole or partial: the rules a moved stack, a thread
 * just seen and a walk's root must pass; a whole reading becomes the thread's known one
 * (and its anchor's). Returns 0, or the error the reading failed with. */
static int read_judge(unwinder_t *u, reader_t *r, rd_thread_t *tc, const reading_t *g)
{
    size_t nw = g->nw;

    if (g->keep > 0 || g->moved)
        tc->partial = 1;
    if (!tc->known && !tc->partial && tc->copied && tc->cur_end != g->cur)
        return REMORA_ECORRUPT;     /* a thread just seen whose top moved: as below */
    if (tc->partial && !tc->known)
        return REMORA_ECORRUPT;     /* a thread just seen: its outer frames may be a freed one's */
    if (tc->partial && nw > 0 && (r->walk[nw - 1].addr != tc->root || r->walk[nw - 1].code != tc->root_code)) {
        /* the outer frames that held must end where the thread's own stack did at its
         * last whole reading (3.12+: a shim on its C stack or in its state; 3.11: its
         * first chunk's entry frame). Frames read from a range another thread had at
         * the first read (a chunk freed and mapped again for it) agree in both copies
         * and end at that thread's root (chaos/killed on 3.15: the main thread's outer
         * frames under the diver's tid) */
        return REMORA_ECORRUPT;
    }
    if (!tc->partial && nw == 0 && tc->cur0 != 0) {
        /* no frame walked though the state named a current frame: nothing known, not an
         * empty stack */
        return REMORA_ECORRUPT;
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
        return REMORA_ECORRUPT;
    }
    if (!tc->partial) {
        tc->known = 1;
        tc->root = nw > 0 ? r->walk[nw - 1].addr : 0;
        tc->root_code = nw > 0 ? r->walk[nw - 1].code : 0;
    }
    if (!tc->partial && tc->chunk && anchor_on(u, tc))
        return anchor_after(u, r, tc, nw);
    return REMORA_OK;
}

/* A reading judged fit: the next copy's length, the frames to copy with it next time,
 * the walk saved for a parked thread, its frames kept to be named, and the exception
 * state checked again. Returns 0, or REMORA_ENOMEM (or keep_raw()'s error). */
static int read_keep(unwinder_t *u, reader_t *r, size_t i, const reading_t *g)
{
    const py_layout_t *L = &u->target->layout;
    rd_thread_t *tc = &r->threads[i];
    unw_thread_t *th = &u->threads[i];
    size_t nw = g->nw, keep = g->keep;
    int err;

    if (tc->chunk)
        next_copy_len(L, r, tc, g->cur, nw);
    if (walk_keep_calls(u->target, r, tc, keep, nw))
        return REMORA_ENOMEM;
    /* 3.9/3.10: with the innermost frame known, the one above it, whose call outlasts
     * the round more often than not (a work function's, read late this time) */
    if (!g->learned && walk_learn_blocks(L, r, tc, keep > 0 && L->frames_kind == PY_FRAMES_OBJECTS ? keep - 1 : keep, nw))
        return REMORA_ENOMEM;
    if (tc->partial) {
        /* the innermost frames moved: the outer ones known, marked partial */
        tc->partial = 1;
        tc->copied = 0;
        tc->saved_ok = 0;
    } else if (park_save(r, &r->interps[tc->interp], tc, g->cur, nw)) {
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
        if (proc_read(u->p, tc->tstate, u->tsbuf, L->ts_read) == REMORA_OK)
            th->handling_exc = unw_exc_state(u, tc->tstate, u->tsbuf, &at) == 1 && at == tc->exc_item &&
                               exc_frame_walked(L, r, tc, keep, nw);
        else
            th->handling_exc = -1;
    }
    if (tc->raw_n == 0 && (tc->partial || nw > 0)) {
        /* only C-owned frames known: nothing of the Python stack (the marker alone, of
         * a thread read whole before) */
        tc->partial = g->was_known;
        if (!g->was_known)
            th->error = REMORA_ECORRUPT;
    }
    return REMORA_OK;
}

/* A reading that may not be kept, with error err. Returns 0 (th->error set, or the
 * marker alone), or REMORA_ENOPROC / REMORA_ENOMEM. */
static int read_failed(rd_thread_t *tc, unw_thread_t *th, const reading_t *g, int err)
{
    tc->ncalls = 0;
    if (err == REMORA_ENOPROC || err == REMORA_ENOMEM)
        return err;
    if (err == REMORA_ECORRUPT && !g->unsure && g->was_known) {
        /* nothing of the stack is known (read again as often as the policy says), or
         * nothing that may be kept (a walk rooted elsewhere, a new chunk), of a thread
         * read whole before whose state is still its own: it ran Python too fast to
         * read. A sample of the marker alone (partial, no frame), not an error: errors
         * are for what could not be read at all (memory gone, a thread whose identity
         * changed while read, one never read whole: its stack may be one remora cannot
         * read, not a moving one), and a round dropped for a moving stack is not neutral
         * (short calls move most: docs/how-it-reads.md). Nothing is guessed: no frame,
         * not even the root, is claimed. */
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

int read_thread(unwinder_t *u, reader_t *r, size_t i)
{
    const py_layout_t *L = &u->target->layout;
    rd_thread_t *tc = &r->threads[i];
    unw_thread_t *th = &u->threads[i];
    reading_t g = {0};
    int err, cut;

    tc->raw_n = 0;
    tc->raw_cached = 0;
    tc->raw_first = r->nraw;        /* never last round's: it may lie past this one's */
    tc->partial = 0;
    thread_identity(u, r, tc, th);
    if (kern_skips(th))
        return REMORA_OK;           /* on a CPU: its ticks sample it */
    if (u->kern != NULL && idle_skips(u, th))
        return REMORA_OK;           /* idle: left out, its stack not read */
    g.was_known = tc->known;
    /* 3.9/3.10: another thread took over that struct pthread during the read: the state
     * and stack read may be either thread's */
    if (L->ts_native_thread_id == 0 && !tc->reuse && tc->tid_now != tc->tid_end) {
        g.unsure = 1;
        return read_failed(tc, th, &g, REMORA_ECORRUPT);
    }
    if (tc->reuse && read_parked(u, r, i, &err))
        return err;
    g.err = thread_read(u, r, tc, &g.cur, &g.nw, &g.keep);
    if (g.err == REMORA_ENOPROC || g.err == REMORA_ENOMEM)
        return g.err;
    g.moved = g.err == REMORA_OK && r->top_moved;
    if (g.err != REMORA_OK || g.keep > 0 || g.moved || g.nw == 0) {
        /* the round's moment: what its first copies had (walk_moment_cut) */
        if (walk_moment_save(L, r, tc, g.keep, g.err == REMORA_OK ? g.nw : 0))
            return REMORA_ENOMEM;
        if ((err = read_again(u, r, tc, &g)) != REMORA_OK)
            return err;
        if (g.failed)
            return read_failed(tc, th, &g, g.err);
        cut = 0;
        g.keep = walk_moment_cut(u->target, r, tc, g.keep, g.nw, &cut);
        if (cut)
            tc->partial = 1;
    }
    if ((err = read_judge(u, r, tc, &g)) != REMORA_OK)
        return read_failed(tc, th, &g, err);
    return read_keep(u, r, i, &g);
}
