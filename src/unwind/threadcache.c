/* unwind/threadcache.c — the interpreters and thread states kept from sample to sample.
 *
 * tc_rebuild() walks the interpreter and thread-state lists the slow way (threads.c) and
 * keeps, per thread state, what the per-sample reader learnt of it (its copies, blocks,
 * parked walk, anchor); tc_lists_unchanged() checks, from the states this sample read,
 * that the lists are still what the cache says; tc_settle_ids() names each thread by its
 * native id and drops states whose thread has not started.
 */
#include <stdlib.h>
#include <string.h>

#include "remora.h"
#include "internal.h"

void tc_fini(rd_thread_t *tc)
{
    size_t i;

    free(tc->ts);
    free(tc->a);
    free(tc->b);
    for (i = 0; i < tc->cap_sb; i++) {
        free(tc->sb[i].one);
        free(tc->sb[i].two);
    }
    free(tc->sb);
    free(tc->below);
    free(tc->named);
    free(tc->named_codes);
    free(tc->saved);
    free(tc->calls);
    free(tc->cfw);
    memset(tc, 0, sizeof *tc);
}

/* Rebuilds the thread cache with a full (slow) walk of the lists; threads seen before
 * keep their copies and what was learnt about their chunks. */
int tc_rebuild(unwinder_t *u, reader_t *r)
{
    const py_layout_t *L = &u->target->layout;
    unw_thread_t *th;
    rd_thread_t *nt;
    size_t n, i, j, k;
    int err;

    r->valid = 0;
    /* the lists and the thread states only: the stacks are the fast walk's */
    err = threads_list(u, &th, &n);
    if (err)
        return err;
    nt = calloc(n ? n : 1, sizeof *nt);
    if (nt == NULL)
        return REMORA_ENOMEM;
    /* every interpreter, with or without threads, in list order */
    r->ninterps = 0;
    {
        uint64_t ia;
        size_t guard = 0;
        if ((err = proc_read_u64(u->p, u->target->runtime + L->rt_interpreters_head, &ia)))
            goto fail;
        while (ia != 0) {
            rd_interp_t *fi;
            if (++guard > UNW_MAX_INTERPS) {
                err = REMORA_ECORRUPT;
                goto fail;
            }
            if (remora_grow((void **)&r->interps, &r->cap_interps, r->ninterps + 1, sizeof *r->interps)) {
                err = REMORA_ENOMEM;
                goto fail;
            }
            fi = &r->interps[r->ninterps++];
            memset(fi, 0, sizeof *fi);
            fi->addr = ia;
            if ((err = proc_read(u->p, ia + L->is_id, &fi->id, 8)) ||
                (L->gil_in_interp && (err = proc_read_u64(u->p, ia + L->is_gil_ptr, &fi->gil))) ||
                (err = proc_read_u64(u->p, ia + L->is_next, &ia)))
                goto fail;
        }
    }
    for (i = 0, k = 0; i < n; i++) {
        rd_interp_t *fi;
        while (k < r->ninterps && r->interps[k].addr != th[i].interp)
            k++;
        if (k == r->ninterps) {
            err = REMORA_ECORRUPT;       /* the lists changed between the two walks */
            goto fail;
        }
        fi = &r->interps[k];
        if (fi->count++ == 0)
            fi->first = i;
        nt[i].interp = k;
        for (j = 0; j < r->nthreads; j++)
            if (r->threads[j].tstate == th[i].tstate && r->threads[j].ts != NULL)
                break;
        if (j < r->nthreads) {
            size_t keep = nt[i].interp;
            nt[i] = r->threads[j];
            nt[i].interp = keep;
            nt[i].saved_ok = 0;         /* the lists moved: read every stack once */
            memset(&r->threads[j], 0, sizeof r->threads[j]);
        } else if ((nt[i].ts = malloc(L->ts_size)) == NULL) {
            err = REMORA_ENOMEM;
            goto fail;
        } else if (L->ts_native_thread_id == 0 && proc_read_u64(u->p, th[i].tstate + L->ts_thread_id,
                                                                 &nt[i].pthread_seen) != REMORA_OK) {
            /* 3.9/3.10, a new state: its struct pthread, whose tid the first sample reads
             * in its own read (the id this walk found may already belong to another
             * thread that took the same cached stack over) */
            nt[i].pthread_seen = 0;
        }
        nt[i].tstate = th[i].tstate;
        nt[i].native_id = th[i].native_id;
    }
    for (k = 0; k < r->nthreads; k++)
        tc_fini(&r->threads[k]);
    free(r->threads);
    r->threads = nt;
    r->nthreads = n;
    r->valid = 1;
    return REMORA_OK;
fail:
    for (i = 0; i < n; i++)
        tc_fini(&nt[i]);
    free(nt);
    return err;
}

/* Are the lists still what the cache says? */
int tc_lists_unchanged(const py_layout_t *L, const reader_t *r)
{
    size_t i, k;

    if (r->rt_head != (r->ninterps ? r->interps[0].addr : 0))
        return 0;
    for (i = 0; i < r->ninterps; i++) {
        const rd_interp_t *fi = &r->interps[i];
        if (fi->next != (i + 1 < r->ninterps ? r->interps[i + 1].addr : 0))
            return 0;
        if (fi->head != (fi->count ? r->threads[fi->first].tstate : 0))
            return 0;
        for (k = 0; k < fi->count; k++) {
            const rd_thread_t *tc = &r->threads[fi->first + k];
            uint64_t want = k + 1 < fi->count ? r->threads[fi->first + k + 1].tstate : 0;
            if (get_u64(tc->ts, L->ts_next) != want || get_u64(tc->ts, L->ts_interp) != fi->addr)
                return 0;
        }
    }
    return 1;
}

/* A thread state made for a thread that has not started yet carries its creator's ids
 * (3.9-3.11) or no native id (3.12+) until that thread runs. Such a state with no frame
 * has no thread of its own yet: dropped. A thread with frames whose native id is 0, or
 * shared with another state that is not merely its unstarted child, cannot be named:
 * counted as an error. On 3.9/3.10 native ids come from the last walk of the lists
 * (through pthread_t): a shared one may be stale, so the lists are walked again. */
void tc_settle_ids(unwinder_t *u, reader_t *r)
{
    const py_layout_t *L = &u->target->layout;
    size_t i, j, keep = 0;

    for (i = 0; i < u->nthreads; i++) {
        unw_thread_t *th = &u->threads[i];
        uint64_t pt = get_u64(r->threads[i].ts, L->ts_thread_id);
        int shared = th->native_id == 0, later = 0, framed = 0, stale = 0;
        for (j = 0; j < u->nthreads; j++) {
            const unw_thread_t *o = &u->threads[j];
            /* a thread that switched into another interpreter has a state in each */
            if (j == i || o->native_id != th->native_id || o->interp != th->interp)
                continue;
            shared = 1;
            later |= j > i;     /* new states are pushed at the head: j is older */
            framed |= o->nframes > 0 && !o->error;
            stale |= get_u64(r->threads[j].ts, L->ts_thread_id) != pt;
        }
        if (L->ts_native_thread_id == 0) {
            /* a state freed and made again at the same address for another thread */
            rd_thread_t *ft = &r->threads[i];
            if (ft->pthread_seen != 0 && ft->pthread_seen != pt && !th->error) {
                th->error = REMORA_ECORRUPT;
                th->nframes = 0;
                r->valid = 0;
            }
            ft->pthread_seen = pt;
            if (shared)
                r->valid = 0;
        }
        r->threads[i].unstarted = shared && !th->error && th->nframes == 0 &&
                                  (th->native_id == 0 || later || framed);
        if (shared && !th->error && th->nframes > 0 && (th->native_id == 0 || framed || stale)) {
            th->error = REMORA_ECORRUPT;
            th->nframes = 0;
        }
    }
    /* dropped once every state was judged: each judgement sees the others in place */
    for (i = 0; i < u->nthreads; i++)
        if (!r->threads[i].unstarted)
            u->threads[keep++] = u->threads[i];
    u->nthreads = keep;
}
