/* unwind/naming.c — frame naming: each frame of a sample gets its function, file and
 * line from its code object, and the code objects are validated once a sample.
 *
 * Every code address walked this sample is validated in one vectored read, after the
 * frames that hold it were copied: by the interpreter's code-object counter where one
 * exists (3.12+), else by a fingerprint re-read (code.c). A code object fetched for the
 * first time this sample is marked fresh: the threads whose frames hold it are read once
 * more.
 */
#include <stdlib.h>
#include <string.h>

#include "remora.h"
#include "internal.h"

/* Validates every code object of this sample in one vectored read; refetches those
 * whose fingerprint changed and those not cached.
 *
 * A frame holds its code object, so the object at a frame's code address is the one the
 * frame ran from for as long as the frame lives; once it returns, a new code object may
 * take the address. What a frame is named from must therefore be read after the frame was:
 *  - a fingerprint read after the copies that equals the entry's (last sample's codes
 *    are read so in the first read, unless frames were read later; the rest here);
 *  - or a counter moved whenever a code object is made (3.12, 3.13) or freed (3.14+),
 *    read after the copies ('post') and equal to its value when the entry was last
 *    validated: none was made or freed in between. An entry records the counter as
 *    read before its fingerprint ('pre'), which is all the proof needs.
 * A code object fetched now was read after its frame's copy with nothing to tie the
 * two: it is marked fresh, and the threads whose frames hold it are dropped (unw_sample
 * tries once more, with it cached). */
int name_resolve_codes(unwinder_t *u, reader_t *r, int have_gen, uint64_t pre, uint64_t post)
{
    const py_layout_t *L = &u->target->layout;
    size_t i, n = 0;
    int err;

    if (remora_grow((void **)&r->fps, &r->cap_fps, r->ncodes * UNW_FP_MAX + 1, 1))
        return REMORA_ENOMEM;
    if (r->late)
        have_gen = 0;
    batch_reset(r);
    for (i = 0; i < r->ncodes; i++) {
        unw_code_t *e = code_cache_peek(u->codes, r->codes[i]);
        const uint64_t *hit;
        if (e == NULL || (have_gen && e->gen == post))
            continue;
        hit = r->nspec_codes && !r->late ? bsearch(&r->codes[i], r->spec_codes, r->nspec_codes, sizeof *hit, cmp_u64) : NULL;
        if (hit != NULL)
            memcpy(r->fps + i * UNW_FP_MAX, r->spec_fps + (size_t)(hit - r->spec_codes) * UNW_FP_MAX, UNW_FP_MAX);
        else if (batch_fp(u, r, r->codes[i], r->fps + i * UNW_FP_MAX))
            return REMORA_ENOMEM;
    }
    if (batch_merge(r, &n, 0))
        return REMORA_ENOMEM;
    batch_fix(r);
    err = n > 0 ? proc_readv(u->p, r->iov, n) : REMORA_OK;
    if (err == REMORA_ENOPROC)
        return err;
    if (err == REMORA_OK && n > 0)
        batch_scatter(r);
    for (i = 0; i < r->ncodes; i++) {
        unw_code_t *e = code_cache_peek(u->codes, r->codes[i]);
        /* a fingerprint that could not be read (the batch failed: some address in it is
         * not mapped) proves nothing: the entry is fetched again */
        if (e != NULL && !(have_gen && e->gen == post) &&
            (err != REMORA_OK || !code_fp_same(e, L, r->fps + i * UNW_FP_MAX))) {
            code_cache_drop(u->codes, r->codes[i]);
            u->stats.code_stale += err == REMORA_OK;
            e = NULL;
        }
        if (e != NULL) {
            u->stats.code_hits++;
        } else {
            int gerr;
            u->stats.code_misses++;
            gerr = code_cache_get(u->codes, u->p, u->target, r->codes[i], &e);
            if (gerr == REMORA_ENOPROC || gerr == REMORA_ENOMEM)
                return gerr;
            if (gerr)
                continue;           /* no code object there: the frames holding it fail */
            e->fresh = r->stamp;
        }
        e->stamp = r->stamp;
        e->gen = have_gen ? pre : 0;
    }
    /* next sample validates these in its first read */
    if (!have_gen) {
        size_t keep = r->ncodes < RD_SPEC_CODES ? r->ncodes : RD_SPEC_CODES;
        if (r->spec_codes == NULL && (r->spec_codes = malloc(RD_SPEC_CODES * sizeof *r->spec_codes)) == NULL)
            return REMORA_ENOMEM;
        if (r->spec_fps == NULL && (r->spec_fps = malloc(RD_SPEC_CODES * UNW_FP_MAX)) == NULL)
            return REMORA_ENOMEM;
        if (keep > 0) {
            memcpy(r->spec_codes, r->codes, keep * sizeof *r->codes);
            qsort(r->spec_codes, keep, sizeof *r->spec_codes, cmp_u64);
        }
        r->nspec_codes = keep;
    } else {
        r->nspec_codes = 0;
    }
    return REMORA_OK;
}

/* --frame-anchor: are the frames named below the anchor still to be taken as they are
 * for this sample's c cached frames raw[0..c) (the outermost c kept, the rest dropped:
 * below[] lost its innermost frames meanwhile)? Yes while each is the frame named there
 * (address, code object, instruction, entry: what naming takes from the walk) and each
 * code object they name is the cache entry it was, validated this sample (as naming
 * validates each frame's): naming them again would give the same. */
static int named_hold(unwinder_t *u, reader_t *r, rd_thread_t *tc, const rd_raw_t *raw, size_t c)
{
    const py_layout_t *L = &u->target->layout;
    size_t k;

    if (c == 0 || tc->named_id == 0 || tc->named_gen != tc->below_gen || tc->nnamed < c)
        return 0;
    if (tc->nnamed > c) {
        memmove(tc->named, tc->named + (tc->nnamed - c), c * sizeof *tc->named);
        tc->nnamed = c;
        tc->nnamed_codes = 0;
        for (k = 0; k < c; k++)
            if (tc->nnamed_codes == 0 || tc->named_codes[tc->nnamed_codes - 1].code != tc->named[k].code) {
                tc->named_codes[tc->nnamed_codes].code = tc->named[k].code;
                tc->named_codes[tc->nnamed_codes++].serial = tc->named[k].code_serial;
            }
    }
    for (k = 0; k < c; k++) {
        const unw_frame_t *f = &tc->named[k];
        if (raw[k].addr != f->addr || raw[k].code != f->code || (unsigned char)raw[k].eval_entry != f->entry ||
            raw[k].below != f->below || frame_addrq(L, raw[k].code, raw[k].instr) != f->offset)
            return 0;
    }
    for (k = 0; k < tc->nnamed_codes; k++) {
        const unw_code_t *e = code_cache_peek(u->codes, tc->named_codes[k].code);
        if (e == NULL || e->stamp != r->stamp || e->fresh == r->stamp || e->serial != tc->named_codes[k].serial)
            return 0;
    }
    return 1;
}

/* Keeps the thread's last c frames, just named, as its frames below the anchor. Returns
 * 0, or -1 out of memory (nothing kept). */
static int named_keep(unwinder_t *u, rd_thread_t *tc, const unw_frame_t *fr, size_t c)
{
    size_t k;

    tc->named_id = 0;
    if (remora_grow((void **)&tc->named, &tc->cap_named, c, sizeof *tc->named) ||
        remora_grow((void **)&tc->named_codes, &tc->cap_named_codes, c, sizeof *tc->named_codes))
        return -1;
    memcpy(tc->named, fr, c * sizeof *fr);
    tc->nnamed = c;
    tc->nnamed_codes = 0;
    for (k = 0; k < c; k++)
        if (tc->nnamed_codes == 0 || tc->named_codes[tc->nnamed_codes - 1].code != fr[k].code) {
            tc->named_codes[tc->nnamed_codes].code = fr[k].code;
            tc->named_codes[tc->nnamed_codes++].serial = fr[k].code_serial;
        }
    tc->named_gen = tc->below_gen;
    tc->named_id = ++u->named_ids;
    return 0;
}

void name_frames(unwinder_t *u, reader_t *r)
{
    const py_layout_t *L = &u->target->layout;
    size_t i, k;

    if (remora_grow((void **)&u->frames, &u->cap_frames, r->nraw + 1, sizeof *u->frames)) {
        for (i = 0; i < u->nthreads; i++)
            if (!u->threads[i].error)
                u->threads[i].error = REMORA_ENOMEM;
        return;
    }
    for (i = 0; i < u->nthreads; i++) {
        unw_thread_t *th = &u->threads[i];
        rd_thread_t *tc = &r->threads[i];
        /* no frame kept this round by any thread: r->raw may not be allocated yet */
        const rd_raw_t *raw = r->raw != NULL ? r->raw + tc->raw_first : NULL;
        int callee_entry = 1;               /* the innermost frame has no callee */
        uint64_t last_code = 0;
        unw_code_t *last_e = NULL;
        /* (3.11 has no anchor; its naming may cut the frames: none held there) */
        size_t skip = 0, c = tc->raw_cached <= tc->raw_n && !L->caller_rests_on_call ? tc->raw_cached : 0;
        size_t n = tc->raw_n;
        int held;

        th->frames = u->frames + tc->raw_first;
        th->nframes = 0;
        th->held = 0;
        th->held_id = 0;
        th->partial = th->error ? 0 : tc->partial;
        th->moving_in_frames = 0;
        if (th->error || kern_skips(th))
            continue;                       /* kern_skips: no stack read, its ticks sample it */
        /* --frame-anchor: the frames below an anchor that held are named as they were
         * (the interpreter has not touched them), so only those above are named now */
        held = c > 0 && named_hold(u, r, tc, raw + (tc->raw_n - c), c);
        if (held)
            n = tc->raw_n - c;
        for (k = 0; k < n; k++) {
            unw_frame_t *fr = &th->frames[k];
            unw_code_t *e = raw[k].code == last_code ? last_e : code_cache_peek(u->codes, raw[k].code);
            /* no code object could be read there: not a frame */
            if (e == NULL || e->stamp != r->stamp) {
                th->error = REMORA_ECORRUPT;
                break;
            }
            /* fetched after the frame was copied: perhaps another code object than the
             * frame's, made at the same address; read once more, it cached */
            if (e->fresh == r->stamp) {
                th->error = REMORA_ECORRUPT;
                r->fresh++;
                break;
            }
            /* 3.11: a frame whose callee it pushed inline (not an eval loop's entry
             * frame) rests on the last cache entry of its CALL or BINARY_SUBSCR while the
             * callee runs; resting anywhere else, it is running, and the frames above it
             * are stale ones left from an earlier call: it is the innermost frame known */
            if (L->caller_rests_on_call && !callee_entry &&
                code_calls_at(e, (int64_t)(raw[k].instr - (raw[k].code + L->co_code_adaptive)) / 2) == 0) {
                skip = k;
                th->partial = 1;
            }
            fr->function = e->function;
            fr->file = e->file;
            fr->native = 0;
            fr->entry = (unsigned char)raw[k].eval_entry;
            fr->below = raw[k].below;
            fr->addr = raw[k].addr;
            fr->code = raw[k].code;
            fr->code_serial = e->serial;
            fr->offset = frame_addrq(L, raw[k].code, raw[k].instr);
            fr->op = NULL;
            fr->line = (u->want & UNW_WANT_FIRSTLINE) ? e->firstlineno : code_line(e, L, fr->offset);
            callee_entry = raw[k].entry;
            last_code = raw[k].code;
            last_e = e;
        }
        if (th->error) {
            th->partial = 0;
            continue;
        }
        if (held)
            memcpy(th->frames + n, tc->named, c * sizeof *tc->named);
        else if (c > 0 && named_keep(u, tc, th->frames + n - c, c))
            c = 0;                          /* no memory for it: named again next time */
        if (c > 0 && tc->named_id != 0) {
            th->held = c;
            th->held_id = tc->named_id;
        }
        th->frames += skip;
        th->nframes = tc->raw_n - skip;
        /* the innermost frame may get its opcode below: never one of those held */
        if (th->held >= th->nframes)
            th->held = th->nframes > 0 ? th->nframes - 1 : 0;
        if (th->held == 0)
            th->held_id = 0;
        if ((u->want & UNW_WANT_OPCODES) && th->nframes > 0) {
            unw_code_t *e = code_cache_peek(u->codes, th->frames[0].code);
            if (e != NULL)
                th->frames[0].op = code_opcode(u, e, th->frames[0].offset);
        }
    }
}

int unw_frame_location(unwinder_t *u, const unw_frame_t *f, lt_location_t *loc)
{
    const py_layout_t *L = &u->target->layout;
    unw_code_t *e;
    int i;

    loc->line = loc->end_line = f->line;
    loc->column = loc->end_column = -1;
    if (f->native || f->code == 0)
        return REMORA_OK;
    if (L->lines_kind != PY_LINES_LOCATIONS || (u->want & UNW_WANT_FIRSTLINE))
        return REMORA_OK;
    /* the entry the frame was named from: the same address, still cached */
    e = code_cache_peek(u->codes, f->code);
    if (e == NULL || e->function != f->function || e->file != f->file)
        return REMORA_EFAULT;
    /* a sampler asks for the same few offsets of a code object again and again */
    for (i = 0; i < 4; i++)
        if (e->ll_addr[i] == f->offset && e->ll_loc[i].line == f->line) {
            *loc = e->ll_loc[i];
            return REMORA_OK;
        }
    if (lt_locations_entry(e->linetable, e->linetable_len, e->firstlineno, f->offset, loc) != 0 ||
        loc->line != f->line) {
        /* no location there, or not the line the frame was named with: the line alone */
        loc->line = loc->end_line = f->line;
        loc->column = loc->end_column = -1;
    }
    e->ll_addr[e->ll_next & 3] = f->offset;
    e->ll_loc[e->ll_next & 3] = *loc;
    e->ll_next++;
    return REMORA_OK;
}

const char *unw_frame_opcode(unwinder_t *u, const unw_frame_t *f, int *opcode)
{
    unw_code_t *e;
    const char *name;
    int k;

    *opcode = -1;
    if (f->native || f->code == 0 || u->opnames == NULL)
        return NULL;
    e = code_cache_peek(u->codes, f->code);
    if (e == NULL || e->function != f->function || e->file != f->file)
        return NULL;
    name = f->op != NULL ? f->op : code_opcode(u, e, f->offset);
    if (name == NULL)
        return NULL;
    /* its number: the index of the name (the table's own pointer) in the version's table */
    for (k = 0; k < 256; k++)
        if (u->opnames[k] == name) {
            *opcode = k;
            break;
        }
    return name;
}
