/* unwind/kernel.c — the unwinder's side of the kernel engine (src/kern/).
 *
 * Gives the engine each thread's state and each target's layout as plain offsets, takes
 * every thread's on/off-CPU state from the engine's table, and names the frames of a
 * kernel sample with the code-object cache, each checked against the fingerprint the
 * kernel read with the frame. Reads of the target only for a code object not cached.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "remora.h"
#include "internal.h"
#include "../kern/kern.h"

#define KU_FALLBACK 16              /* threads read from user space next round, at most */

struct unw_kern {
    kern_t *k;
    kern_layout_t lay;
    unw_thread_t th;                /* the last kernel sample named */
    unw_frame_t frames[KERN_MAX_FRAMES];
    pid_t fallback[KU_FALLBACK];    /* a read failed in the kernel: read these from user space */
    size_t nfallback;
    unw_kern_stats_t stats;
};

void kern_unw_free(struct unw_kern *k, pid_t pid)
{
    if (k == NULL)
        return;
    kern_remove_process(k->k, pid);
    free(k);
}

/* The kernel's layout for this target, or REMORA_EVERSION with why. */
static int kern_layout_of(const py_target_t *t, kern_layout_t *kl, char *why, size_t whylen)
{
    const py_layout_t *L = &t->layout;
    uint64_t off;
    size_t len;

    memset(kl, 0, sizeof *kl);
    kl->frames_kind = L->frames_kind == PY_FRAMES_OBJECTS ? KERN_FRAMES_OBJECTS
                    : L->frames_kind == PY_FRAMES_CFRAME ? KERN_FRAMES_CFRAME : KERN_FRAMES_DIRECT;
    kl->ts_frame = (uint32_t)L->ts_frame;
    kl->cframe_current_frame = (uint32_t)L->cframe_current_frame;
    kl->fr_size = (uint32_t)L->fr_size;
    kl->fr_previous = (uint32_t)L->fr_previous;
    kl->fr_code = (uint32_t)L->fr_code;
    kl->fr_instr = (uint32_t)L->fr_instr;
    kl->fr_owner = L->owner_shim ? (uint32_t)L->fr_owner : 0;
    kl->owner_shim = (uint32_t)L->owner_shim;
    kl->fr_is_entry = (uint32_t)L->fr_is_entry;
    if (L->fr_funcobj != 0 && t->none != 0) {
        kl->fr_funcobj = (uint32_t)L->fr_funcobj;
        kl->none_addr = t->none;
    }
    kl->tagged_executable = L->tagged_executable != 0;
    code_fp_span(L, &off, &len);
    kl->fp_off = (uint32_t)off;
    kl->fp_len = (uint32_t)len;
    if (L->co_version == 0) {
        /* before 3.12 nothing in the code object is unique: its name's and file's str
         * objects count too (PyASCIIObject: length, then hash, after the header) */
        kl->co_name = (uint32_t)L->co_qualname;    /* the str code.c keeps an image of */
        kl->co_filename = (uint32_t)L->co_filename;
        kl->str_hash = 24;
    }
    if (L->fr_size == 0 || L->fr_size > 128 || L->fr_previous + 8 > L->fr_size || L->fr_code + 8 > L->fr_size ||
        L->fr_instr + 8 > L->fr_size || kl->fr_owner + 1 > L->fr_size || L->fr_is_entry + 1 > L->fr_size ||
        kl->fr_funcobj + 8 > L->fr_size || len == 0 || len > 8 * KERN_FP_WORDS || L->ts_frame + 8 > L->ts_size) {
        snprintf(why, whylen, "this interpreter's frame layout is not one the kernel engine walks "
                 "(frame header %zu bytes)", (size_t)L->fr_size);
        return REMORA_EVERSION;
    }
    return REMORA_OK;
}

int unw_kern_enable(unwinder_t *u, struct kern *k, char *why, size_t whylen)
{
    struct unw_kern *ku;
    int err;

    if (u->kern != NULL)
        return REMORA_OK;
    if ((ku = calloc(1, sizeof *ku)) == NULL)
        return REMORA_ENOMEM;
    ku->k = k;
    if ((err = kern_layout_of(u->target, &ku->lay, why, whylen)) != REMORA_OK ||
        (err = kern_add_process(k, proc_pid(u->p), &ku->lay)) != REMORA_OK) {
        if (err == REMORA_ENOMEM)
            snprintf(why, whylen, "the kernel engine takes %d processes at most", KERN_MAX_PROCS);
        free(ku);
        return err;
    }
    u->kern = ku;
    return REMORA_OK;
}

void unw_kern_get_stats(const unwinder_t *u, unw_kern_stats_t *out)
{
    if (u->kern != NULL)
        *out = u->kern->stats;
    else
        memset(out, 0, sizeof *out);
}

/* Is the thread's tid a native id shared by another state of the list (a thread in a
 * subinterpreter has one in each)? The kernel cannot tell which it runs on. */
static int tid_shared(const reader_t *r, size_t i)
{
    size_t j;

    for (j = 0; j < r->nthreads; j++)
        if (j != i && r->threads[j].native_id == r->threads[i].native_id)
            return 1;
    return 0;
}

void kern_sync_threads(unwinder_t *u, reader_t *r)
{
    struct unw_kern *ku = u->kern;
    pid_t pid = proc_pid(u->p);
    size_t i;

    for (i = 0; i < r->nthreads; i++) {
        rd_thread_t *tc = &r->threads[i];
        pid_t tid = tc->native_id > 0 && !tid_shared(r, i) ? tc->native_id : 0;
        uint64_t ts = tid ? tc->tstate : 0;
        if (tc->kern_tid == tid && tc->kern_ts == ts)
            continue;
        if (tc->kern_tid > 0 && tc->kern_tid != tid)
            kern_set_thread(ku->k, pid, tc->kern_tid, 0);
        if (tid > 0 && kern_set_thread(ku->k, pid, tid, ts) != REMORA_OK)
            tid = 0, ts = 0;
        tc->kern_tid = tid;
        tc->kern_ts = ts;
    }
    ku->nfallback = 0;
}

int kern_cpu_state(unwinder_t *u, const rd_thread_t *tc, int *on_cpu, int *running)
{
    struct unw_kern *ku = u->kern;
    kern_tstate_t st;
    size_t i;

    kern_thread_state(ku->k, tc->native_id, &st);
    if (!st.known) {
        ku->stats.proc_reads++;
        return 0;
    }
    *on_cpu = st.on_cpu || st.runnable;
    /* left to the kernel only while the kernel knows its state, and not just failed there */
    *running = st.on_cpu && tc->kern_tid == tc->native_id && tc->kern_ts == tc->tstate;
    for (i = 0; i < ku->nfallback && *running; i++)
        if (ku->fallback[i] == tc->native_id)
            *running = 0;
    return 1;
}

/* The kernel's fingerprint of a cached entry, mixed as the kernel mixes what it read. */
static uint64_t entry_kfp(unw_code_t *e, const kern_layout_t *kl)
{
    uint64_t w[KERN_FP_WORDS + 4];
    unsigned n = (kl->fp_len + 7) / 8, k;

    if (e->kfp != 0)
        return e->kfp;
    memset(w, 0, sizeof w);
    memcpy(w, e->fp, kl->fp_len);
    if (kl->str_hash != 0) {
        /* the str images start after the reference count: length at 8, hash at 16 */
        for (k = 0; k < 2; k++) {
            if (e->str_img == NULL || e->str_len[k] < 24)
                return 0;       /* no image to compare: never matches (the mix is never 0) */
            memcpy(&w[n + 2 * k], e->str_img + k * UNW_FP_STR + 8, 8);
            memcpy(&w[n + 2 * k + 1], e->str_img + k * UNW_FP_STR + 16, 8);
        }
        n += 4;
    }
    return e->kfp = kern_fp_mix(w, n);
}

/* The cached entry naming a frame the kernel saw, or NULL. Returns 0 or a fatal code. */
static int frame_code(unwinder_t *u, const kern_frame_t *f, unw_code_t **out)
{
    const kern_layout_t *kl = &u->kern->lay;
    unw_code_t *e = code_cache_peek(u->codes, f->code);
    int err;

    *out = NULL;
    if (e != NULL && entry_kfp(e, kl) == f->fp) {
        *out = e;
        return REMORA_OK;
    }
    /* not cached, or cached for another object: read it now; it names the frame only if
     * it is still the object the kernel saw */
    err = code_cache_get(u->codes, u->p, u->target, f->code, &e);
    if (err == REMORA_ENOPROC || err == REMORA_ENOMEM)
        return err;
    if (err == REMORA_OK && entry_kfp(e, kl) == f->fp)
        *out = e;
    return REMORA_OK;
}

int unw_kern_name(unwinder_t *u, const kern_sample_t *ks, unw_thread_t **out)
{
    const py_layout_t *L = &u->target->layout;
    struct unw_kern *ku = u->kern;
    unw_thread_t *th = &ku->th;
    size_t i, k, n = 0, cut = 0;
    int err;

    *out = th;
    if (ks->flags & (KERN_S_FAULT | KERN_S_NOSTATE | KERN_S_CUT)) {
        /* nothing to root the frames read at: user space reads the thread (deeper than
         * the kernel walks: as deep as UNW_MAX_DEPTH) */
        ku->stats.fallback++;
        if (ku->nfallback < KU_FALLBACK)
            ku->fallback[ku->nfallback++] = ks->tid;
        return REMORA_EFAULT;
    }
    memset(th, 0, sizeof *th);
    for (i = 0; i < u->nthreads; i++) {
        if (u->threads[i].native_id == ks->tid) {
            *th = u->threads[i];
            break;
        }
    }
    th->native_id = ks->tid;
    th->tstate = ks->tstate;
    th->is_main = ks->tid == proc_pid(u->p);
    th->on_cpu = 1;
    th->kernel = 0;
    th->partial = 0;
    th->moving_in_frames = 0;
    th->error = 0;
    th->task = 0;
    th->task_frames = 0;
    for (k = 0; k < ks->nframes && k < KERN_MAX_FRAMES; k++) {
        const kern_frame_t *f = &ks->frames[k];
        unw_frame_t *fr;
        unw_code_t *e;
        if (f->flags & KERN_F_SHIM)
            continue;
        if ((err = frame_code(u, f, &e)) != REMORA_OK)
            return err;
        fr = &ku->frames[n++];
        memset(fr, 0, sizeof *fr);
        if (e == NULL) {
            cut = n;            /* this frame and every inner one are not known */
            continue;
        }
        fr->function = e->function;
        fr->file = e->file;
        fr->addr = f->addr;
        fr->code = f->code;
        fr->line = (u->want & UNW_WANT_FIRSTLINE) ? e->firstlineno
                                                  : code_line(e, L, frame_addrq(L, f->code, f->instr));
        /* where one C call of the eval loop began, as keep_raw() decides it */
        if (L->walk_root == PY_ROOT_ANY) {
            fr->entry = 1;
        } else if (L->walk_root == PY_ROOT_ENTRY) {
            fr->entry = (f->flags & KERN_F_ENTRY) != 0;
        } else if (k + 1 < ks->nframes && (ks->frames[k + 1].flags & KERN_F_SHIM)) {
            fr->entry = 1;
            fr->below = ks->frames[k + 1].addr;
        }
    }
    th->frames = ku->frames + cut;
    th->nframes = n - cut;
    ku->stats.samples++;
    if (cut > 0) {
        th->partial = 1;
        ku->stats.partial++;
    }
    return REMORA_OK;
}
