/* unwind/sample.c — every thread's stack per sample in a bounded number of system calls.
 *
 * unw_sample() runs one round: the first read (copy.c) of every thread state and stack
 * copy; each thread's reading (reading.c: its walk in its copies, walk.c, anchor.c,
 * parked.c, checked against the second copies, read again when it moved); the code
 * objects validated once and the frames named (naming.c). A sample that fetched a code
 * object for the first time is taken once more, it cached.
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
    free(r->moment.walk);
    free(r->moment.copies);
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
            tc->cfw_len = 0;
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
        if ((err = read_thread(u, r, i)) != REMORA_OK)
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

/* Each thread's Python name, from the registry read again when due (thread_names.c): the
 * main interpreter's (id 0), whose threading module names every thread it started. */
static int sample_thread_names(unwinder_t *u, reader_t *r)
{
    uint64_t interp = 0;
    size_t i;
    int err;

    if (u->thread_names == NULL && (u->thread_names = tn_new()) == NULL)
        return REMORA_ENOMEM;
    if (remora_grow((void **)&u->idents, &u->cap_idents, u->nthreads, sizeof *u->idents))
        return REMORA_ENOMEM;
    for (i = 0; i < u->nthreads; i++)
        u->idents[i] = u->threads[i].ident;
    for (i = 0; i < r->ninterps; i++)
        if (r->interps[i].id == 0)
            interp = r->interps[i].addr;
    if ((err = tn_update(u, u->thread_names, interp, u->idents, u->nthreads, 0)) != REMORA_OK)
        return err;
    for (i = 0; i < u->nthreads; i++)
        u->threads[i].thread_name = u->threads[i].ident ? tn_lookup(u->thread_names, u->threads[i].ident) : NULL;
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
    r->moment.walk = malloc(UNW_MAX_DEPTH * sizeof *r->moment.walk);
    r->scratch = malloc(UNW_MAX_DEPTH * sizeof *r->scratch);
    if (r->walk == NULL || r->walk2 == NULL || r->moment.walk == NULL || r->scratch == NULL) {
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
    for (size_t i = 0; i < u->nthreads; i++) {
        int kept = u->reader->threads[i].kept == u->reader->stamp;
        u->stats.partial += u->threads[i].partial != 0;
        /* the result's threads and Python frames (before any C frame is merged) */
        u->stats.threads += 1;
        u->stats.threads_kept += (uint64_t)kept;
        u->stats.frames += u->threads[i].nframes;
        u->stats.frames_kept += kept ? u->threads[i].nframes : 0;
    }
    if ((u->want & UNW_WANT_THREAD_NAMES) && (err = sample_thread_names(u, u->reader)) != REMORA_OK)
        return err;
    if (u->native != NULL && (u->want & UNW_WANT_NATIVE))
        native_merge_all(u->native, u, u->threads, u->nthreads);
    if ((u->want & UNW_WANT_TASKS) && (err = tasks_sample(u, u->threads, u->nthreads)) != REMORA_OK)
        return err;
    *threads = u->threads;
    *n = u->nthreads;
    return REMORA_OK;
}
