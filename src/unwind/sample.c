/* unwind/sample.c — every thread's stack per sample in a bounded number of system calls.
 *
 * unw_sample() runs one round: the first read (copy.c) of every thread state and stack
 * copy, each thread's walk in its copies (walk.c; anchor.c, parked.c), the code objects
 * validated once (naming.c), the frames named. A thread whose stack moved while it was
 * read is reported with REMORA_ECORRUPT. A sample that fetched a code object for the
 * first time is taken once more, the code object cached.
 */
#include <stdlib.h>
#include <string.h>

#include "remora.h"
#include "internal.h"

void unw_reader_free(void *opaque)
{
    reader_t *r = opaque;
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
    free(r->scratch);
    free(r->codes);
    free(r->fps);
    free(r->spec_codes);
    free(r->spec_fps);
    free(r);
}

static int sample_once(unwinder_t *u, reader_t *r)
{
    const py_layout_t *L = &u->target->layout;
    size_t i, nframes_total = 0;
    int err, attempt;

    for (attempt = 0;; attempt++) {
        if (!r->valid && (err = tc_rebuild(u, r)) != REMORA_OK)
            return err;
        err = copy_states(u, r);
        if (err == REMORA_ENOPROC || err == REMORA_ENOMEM || err == REMORA_EPERM)
            return err;
        if (err == REMORA_OK && tc_lists_unchanged(L, r))
            break;
        /* a chunk or cframe may have been freed: read without speculation next time */
        for (i = 0; i < r->nthreads; i++) {
            r->threads[i].chunk = 0;
            r->threads[i].base = 0;
            r->threads[i].cframe = 0;
            r->threads[i].nsb = 0;
            if (r->threads[i].anc_state != ANC_OFF)
                r->threads[i].anc_state = ANC_NONE;
            r->threads[i].nbelow = 0;
        }
        r->nspec_codes = 0;
        r->valid = 0;
        if (attempt == 2)
            return REMORA_ECORRUPT;
    }

    if (remora_grow((void **)&u->threads, &u->cap_threads, r->nthreads, sizeof *u->threads))
        return REMORA_ENOMEM;
    u->nthreads = r->nthreads;
    u->thread_samples += r->nthreads;
    r->stamp++;
    r->ncodes = 0;
    r->late = 0;
    r->fresh = 0;
    /* pass 1: walk every thread, keeping raw frames in u->frames */
    for (i = 0; i < r->nthreads; i++) {
        rd_thread_t *tc = &r->threads[i];
        const rd_interp_t *fi = &r->interps[tc->interp];
        unw_thread_t *th = &u->threads[i];
        uint64_t cur, chunk_now;
        size_t nw = 0, need = 0, k, tries;

        memset(th, 0, sizeof *th);
        if (L->ts_native_thread_id != 0) {
            /* set by the thread itself once it runs: read it every sample */
            uint64_t nid = get_u64(tc->ts, L->ts_native_thread_id);
            tc->native_id = nid < (1u << 31) ? (pid_t)nid : 0;
        } else if (tc->tid_now > 0 && get_u64(tc->ts, L->ts_thread_id) == tc->pthread_seen) {
            tc->native_id = tc->tid_now;
        }

        th->tstate = tc->tstate;
        th->interp = fi->addr;
        th->interp_id = fi->id;
        th->native_id = tc->native_id;
        th->is_main = tc->native_id == proc_pid(u->p);
        th->holds_gil = fi->locked && fi->holder == tc->tstate;
        th->gc = fi->gc != 0;
        /* 3.9/3.10: another thread took over that struct pthread during the read: the
         * state and stack read may be either thread's */
        if (L->ts_native_thread_id == 0 && !tc->reuse && tc->tid_now != tc->tid_end) {
            th->error = REMORA_ECORRUPT;
            goto thread_done;
        }
        if (u->want & UNW_WANT_EXC)     /* from this sample's copy of the thread state */
            th->handling_exc = unw_exc_state(u, tc->tstate, tc->ts);
        /* a parked thread too: one that released the GIL may be running C code */
        if (th->native_id > 0 && (u->want & UNW_WANT_CPU)) {
            char state;
            if (proc_task_state(u->p, th->native_id, &state) == REMORA_OK)
                th->on_cpu = state == 'R';
        }
        if (th->native_id > 0 && (u->want & UNW_WANT_NAMES))
            proc_task_name(u->p, th->native_id, th->name, sizeof th->name);
        if (tc->reuse) {
            if (park_holds(L, fi, tc)) {
                /* still parked: the saved walk, nothing read */
                u->parked++;
                memcpy(r->walk, tc->saved, tc->nsaved * sizeof *r->walk);
                nw = tc->nsaved;
                goto frames;
            }
            /* it ran: read it now. 3.9/3.10: its frame objects in the blocks remembered,
             * in one read as the first read would have (one copy, the other, the current
             * frame again); 3.11+: the chunk is copied below, the few frames outside it
             * found again */
            tc->reuse = 0;
            tc->saved_ok = 0;
            if (L->frames_kind != PY_FRAMES_OBJECTS || park_reread(u, r, tc) != REMORA_OK)
                tc->nsb = 0;
        }

        if (L->frames_kind == PY_FRAMES_CFRAME) {
            uint64_t cf = get_u64(tc->ts, L->ts_frame);
            if (cf != tc->cframe || cf == 0) {
                /* the eval loop's cframe moved: read through it, copy again */
                tc->cframe = cf;
                tc->copied = 0;
                cur = 0;
                if (cf != 0 && (th->error = proc_read_u64(u->p, cf + L->cframe_current_frame, &cur)) != 0)
                    goto thread_done;
            } else {
                cur = tc->cur_spec;
            }
            /* a nested eval loop publishes its cframe before setting the frame in it:
             * only the thread state's own root cframe may hold no frame */
            if (cf != 0 && cur == 0 && (cf < tc->tstate || cf - tc->tstate >= L->ts_size)) {
                th->error = REMORA_ECORRUPT;
                goto thread_done;
            }
        } else {
            cur = get_u64(tc->ts, L->ts_frame);
        }
        if (L->frames_kind != PY_FRAMES_OBJECTS) {
            chunk_now = get_u64(tc->ts, L->ts_datastack_chunk);
            if (chunk_now != tc->chunk) {
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
        }
        for (tries = 0;; tries++) {
            if (L->frames_kind != PY_FRAMES_OBJECTS && tc->chunk && tc->copied == 0 && cur != 0) {
                /* nothing copied yet this sample: copy what the current frame needs */
                size_t want = cur > tc->base && cur - tc->base < RD_MAX_COPY ? (size_t)(cur - tc->base) + L->fr_size : RD_MIN_COPY;
                if (want < tc->copy_len)
                    want = tc->copy_len;
                want = copy_clamp(tc, want);
                if ((th->error = copy_again(u, r, tc, want)) != 0)
                    goto thread_done;
            }
            if (tc->copied >= RD_CHUNK_HDR && tc->base == tc->chunk) {
                uint64_t sz = get_u64(tc->a, 8);
                tc->chunk_size = sz >= RD_CHUNK_HDR && sz <= (1u << 30) ? (size_t)sz : 0;
            }
            /* with a copy, walk from the frame that was current between its two halves */
            if (tc->copied)
                cur = tc->cur_mid;
            th->error = walk_frames(u, r, tc, cur, &nw, &need);
            if (th->error || need == 0)
                break;
            if (tries == 2) {
                th->error = REMORA_ECORRUPT;
                break;
            }
            if (need == SIZE_MAX) {
                anchor_drop(tc);
                tc->copied = 0;
                continue;
            }
            tc->copy_len = copy_clamp(tc, need + 1024);
            tc->copied = 0;
        }
        if (th->error == REMORA_OK)
            th->error = walk_check(u, r, tc, cur, nw);
        /* 3.11-3.13: every thread's first frame is its outermost eval loop's entry frame
         * (3.12/3.13: a C-owned shim whose previous is NULL; 3.11: marked is_entry); a
         * walk that ends anywhere else followed a link not yet written (a frame pushed
         * but not linked to its caller yet) */
        if (th->error == REMORA_OK && nw > 0 &&
            (L->walk_root == PY_ROOT_ENTRY ? !r->walk[nw - 1].entry
                                           : L->walk_root == PY_ROOT_SHIM && !r->walk[nw - 1].shim))
            th->error = REMORA_ECORRUPT;
        if (th->error == REMORA_OK && tc->chunk && anchor_on(u, tc) &&
            (th->error = anchor_after(u, r, tc, nw)) == REMORA_ENOPROC)
            return REMORA_ENOPROC;
        if (th->error == REMORA_ENOMEM)
            return REMORA_ENOMEM;
        if (th->error == REMORA_OK && tc->chunk) {
            /* next time copy a little more than this stack used, from where the copies
             * start (the chunk, or the anchor) */
            uint64_t top = tc->base;
            for (k = 0; k < nw; k++)
                if (r->walk[k].src == -1 && !r->walk[k].cached && r->walk[k].addr + L->fr_size > top)
                    top = r->walk[k].addr + L->fr_size;
            if (cur > tc->base && cur - tc->base < RD_MAX_COPY && cur + L->fr_size > top)
                top = cur + L->fr_size;
            tc->copy_len = (size_t)(top - tc->base) + 256;
            if (tc->copy_len < RD_MIN_COPY && tc->base == tc->chunk)
                tc->copy_len = RD_MIN_COPY;
            tc->copy_len = copy_clamp(tc, tc->copy_len);
        }
        if (th->error)
            goto thread_done;
        if (walk_learn_blocks(L, r, tc, nw) || park_save(r, fi, tc, cur, nw))
            return REMORA_ENOMEM;
frames:
        if (remora_grow((void **)&u->frames, &u->cap_frames, nframes_total + nw, sizeof *u->frames))
            return REMORA_ENOMEM;
        th->frames = (unw_frame_t *)(uintptr_t)nframes_total;
        for (k = 0; k < nw; k++) {
            /* stash (code, instr) until the code objects are resolved */
            unw_frame_t *fr;
            if (r->walk[k].shim)
                continue;
            fr = &u->frames[nframes_total++];
            fr->function = (const char *)(uintptr_t)r->walk[k].code;
            fr->file = (const char *)(uintptr_t)r->walk[k].instr;
            fr->line = r->walk[k].entry;    /* until named: is_entry, for pass 2 */
            th->nframes++;
            if (name_note_code(r, u->codes, r->walk[k].code))
                return REMORA_ENOMEM;
        }
thread_done:
        if (th->error == REMORA_ENOPROC)
            return REMORA_ENOPROC;
        if (th->error) {
            /* a torn read keeps what was learnt; a failed read forgets the guesses */
            tc->copied = 0;
            tc->saved_ok = 0;
            if (th->error != REMORA_ECORRUPT)
                tc->nsb = 0;
        }
    }

    /* pass 2: validate the code objects once, then name every frame. With a counter
     * that moves whenever a code object is made (3.12, 3.13) or freed (3.14+), an entry
     * validated at the current value needs no read; 0 means the counter is not usable.
     * The value last sample read serves as this sample's 'pre' (resolve_codes). */
    {
        int have_gen = L->is_code_generation || L->is_code_version || u->target->code_version;
        uint64_t pre = r->gen_last, post = r->gen_global;
        for (i = 0; i < r->ninterps; i++)
            post = post * 0x9e3779b97f4a7c15ull + r->interps[i].gen + 1;
        if (u->target->code_version ? r->gen_global == 0 : r->ninterps == 0 || r->interps[0].gen == 0)
            have_gen = 0;
        r->gen_last = have_gen ? post : 0;
        if (pre == 0)
            have_gen = 0;
        err = name_resolve_codes(u, r, have_gen, pre, post);
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
            if (e == NULL || e->fresh == r->stamp) {
                th->error = REMORA_ECORRUPT;
                th->nframes = 0;
                r->fresh++;
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
            if (L->caller_rests_on_call && !callee_entry &&
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
    tc_settle_ids(u, r);
    return REMORA_OK;
}

int unw_sample(unwinder_t *u, unw_thread_t **threads, size_t *n)
{
    reader_t *r = u->reader;
    int err;

    *threads = NULL;
    *n = 0;
    if (r == NULL) {
        r = calloc(1, sizeof *r);
        if (r == NULL)
            return REMORA_ENOMEM;
        r->walk = malloc(UNW_MAX_DEPTH * sizeof *r->walk);
        r->scratch = malloc(UNW_MAX_DEPTH * sizeof *r->scratch);
        if (r->walk == NULL || r->scratch == NULL) {
            free(r->walk);
            free(r->scratch);
            free(r);
            return REMORA_ENOMEM;
        }
        u->reader = r;
    }
    if (u->target->layout.ts_size > 65536 || u->target->layout.fr_size > 4096 || u->target->layout.fr_size < 16)
        return REMORA_ECORRUPT;
    err = sample_once(u, r);
    /* threads dropped for code objects first read this sample: once more, with them
     * cached (whatever was new is checked against the frames this time) */
    if (err == REMORA_OK && r->fresh > 0)
        err = sample_once(u, r);
    if (err)
        return err;
    *threads = u->threads;
    *n = u->nthreads;
    return REMORA_OK;
}
