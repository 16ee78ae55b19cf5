/* unwind/threads.c — the unwinder's handle, the interpreter and thread-state lists, native
 * thread ids and a thread's exception state.
 *
 * threads_list() reads _PyRuntime's interpreter list and each interpreter's thread-state
 * list the slow way (one read per thread state), for the thread cache to be rebuilt
 * from (threadcache.c). On 3.9/3.10, whose thread states lack native_thread_id, the
 * native id is found inside glibc's struct pthread (pointed to by thread_id) at an
 * offset calibrated against the target's task list.
 */
#include <stdlib.h>
#include <string.h>

#include "remora.h"
#include "internal.h"

#define TS_MAX_READ 8192

int unw_new(proc_t *p, const py_target_t *t, unwinder_t **out)
{
    unwinder_t *u = calloc(1, sizeof *u);

    *out = NULL;
    if (u == NULL)
        return REMORA_ENOMEM;
    u->p = p;
    u->target = t;
    u->opnames = py_opnames(&t->layout);
    u->pthread_tid_off = -1;
    u->want = UNW_WANT_ALL;
    u->strs = strtab_new();
    u->codes = u->strs ? code_cache_new(u->strs) : NULL;
    u->tsbuf = malloc(TS_MAX_READ);
    if (t->layout.fn_code)
        u->funcs = calloc(UNW_FUNCS, sizeof *u->funcs);
    if (u->codes == NULL || u->tsbuf == NULL || (t->layout.fn_code && u->funcs == NULL)) {
        unw_free(u);
        return REMORA_ENOMEM;
    }
    *out = u;
    return REMORA_OK;
}

void unw_set_want(unwinder_t *u, unsigned want)
{
    u->want = want | (u->native != NULL ? UNW_WANT_NATIVE : 0);
}

void unw_set_tries(unwinder_t *u, unsigned tries)
{
    u->tries = tries;
}

void unw_set_reread_ns(unwinder_t *u, int64_t ns)
{
    u->reread_ns = ns;
}

void unw_get_stats(const unwinder_t *u, unw_stats_t *out)
{
    *out = u->stats;
    if (u->thread_names != NULL) {
        tn_stats_t ps;
        tn_get_stats(u->thread_names, &ps);
        out->thread_name_readings = ps.readings;
        out->thread_name_reads = ps.reads;
        out->thread_name_scans = ps.scans;
        out->thread_name_torn = ps.torn;
        out->thread_name_unscanned = ps.unscanned;
        out->thread_name_ns = ps.ns;
    }
}

int unw_native_enable(unwinder_t *u)
{
    int err;

    if (u->native != NULL)
        return REMORA_OK;
    if ((err = native_new(u->p, u->strs, &u->native)) != REMORA_OK)
        return err;
    u->want |= UNW_WANT_NATIVE;
    return REMORA_OK;
}

void unw_native_get_stats(const unwinder_t *u, unw_native_stats_t *out)
{
    if (u->native == NULL)
        memset(out, 0, sizeof *out);
    else
        native_get_stats(u->native, out);
}

void unw_free(unwinder_t *u)
{
    if (u == NULL)
        return;
    native_free(u->native);
    kern_unw_free(u->kern, proc_pid(u->p));
    tasks_free(u->tasks);
    unw_reader_free(u->reader);
    tn_free(u->thread_names);
    free(u->idents);
    code_cache_free(u->codes);
    strtab_free(u->strs);
    free(u->threads);
    free(u->frames);
    free(u->tsbuf);
    free(u->funcs);
    free(u);
}

static int push_thread(unwinder_t *u, unw_thread_t **th)
{
    if (u->nthreads == u->cap_threads) {
        size_t ncap = u->cap_threads ? u->cap_threads * 2 : 16;
        unw_thread_t *nv = realloc(u->threads, ncap * sizeof *nv);
        if (nv == NULL)
            return REMORA_ENOMEM;
        u->threads = nv;
        u->cap_threads = ncap;
    }
    *th = &u->threads[u->nthreads++];
    memset(*th, 0, sizeof **th);
    return REMORA_OK;
}

int unw_exc_state(unwinder_t *u, uint64_t tstate, const unsigned char *ts, uint64_t *at)
{
    const py_layout_t *L = &u->target->layout;
    unsigned char buf[64];
    uint64_t item, exc;
    int i;

    *at = 0;
    if (L->ts_exc_info == 0 || L->ei_size == 0 || L->ei_size > sizeof buf ||
        L->ei_exc + 8 > L->ei_size || L->ei_previous + 8 > L->ei_size ||
        L->ts_exc_info + 8 > L->ts_size || L->ts_size < L->ei_size)
        return -1;
    item = get_u64(ts, L->ts_exc_info);
    for (i = 0; i < UNW_MAX_EXC_ITEMS && item != 0; i++) {
        const unsigned char *b = buf;
        if (item % 8 != 0)
            return -1;
        if (item >= tstate && L->ts_read >= L->ei_size && item - tstate <= L->ts_read - L->ei_size)
            b = ts + (item - tstate);       /* the thread's own exc_state: already here */
        else if (proc_read(u->p, item, buf, L->ei_size) != REMORA_OK)
            return -1;
        exc = get_u64(b, L->ei_exc);
        if (exc != 0 && exc != u->target->none) {
            *at = item;
            return 1;
        }
        item = get_u64(b, L->ei_previous);
    }
    return item == 0 ? 0 : -1;
}

static int tid_in(const pid_t *tids, size_t n, int32_t v)
{
    size_t i;

    for (i = 0; i < n; i++)
        if (tids[i] == v)
            return 1;
    return 0;
}

/* 3.9/3.10: where the tid lies in the C library's struct pthread, from n copies of
 * PTHREAD_SCAN bytes of it (scan; pthreads[i] the address each was read at) and the
 * process's live tids: an offset at which every copy holds a live tid, copies of two
 * different structs two different tids, and one of them the process's own pid (the main
 * thread's: a thread state list without one cannot tell the offset). A wrong offset
 * must not pass: with pid_max at 32768 the high half of every user-space pointer
 * (0x7fxx) is a tid some thread may hold, so an offset at a multiple of 8 (where the tid
 * lies in glibc and musl) is taken before any other, and the first of those. Returns
 * the offset, or -1. */
int pthread_tid_offset(const unsigned char *scan, const uint64_t *pthreads, size_t n,
                       const pid_t *tids, size_t ntids, pid_t pid)
{
    int off, best = -1;
    size_t i, j;

    for (off = 0; off + 4 <= PTHREAD_SCAN; off += 4) {
        int fits = n > 0, has_pid = 0;
        for (i = 0; i < n && fits; i++) {
            int32_t v, w;
            memcpy(&v, scan + i * PTHREAD_SCAN + off, 4);
            fits = v > 0 && tid_in(tids, ntids, v);
            has_pid |= v == pid;
            for (j = 0; j < i && fits; j++) {
                memcpy(&w, scan + j * PTHREAD_SCAN + off, 4);
                fits = (pthreads[j] == pthreads[i]) == (w == v);
            }
        }
        if (!fits || !has_pid)
            continue;
        if (off % 8 == 0)
            return off;
        if (best < 0)
            best = off;
    }
    return best;
}

/* 3.9/3.10: each thread's native id through its pthread_t: the tid at the offset found
 * once (pthread_tid_offset()) and kept for the process's life (it is the C library's);
 * a value there that is no live tid (its thread has ended: the kernel clears it) names
 * no thread (0). */
static void resolve_native_ids(unwinder_t *u, const uint64_t *pthreads)
{
    pid_t tids[1024];
    size_t ntids, i, nth = u->nthreads;
    unsigned char *scan;
    int off;

    if (nth == 0 || proc_tasks(u->p, tids, 1024, &ntids) != REMORA_OK)
        return;
    if (ntids > 1024)
        ntids = 1024;
    scan = malloc(nth * PTHREAD_SCAN);
    if (scan == NULL)
        return;
    for (i = 0; i < nth; i++)
        if (pthreads[i] == 0 || proc_read(u->p, pthreads[i], scan + i * PTHREAD_SCAN, PTHREAD_SCAN))
            memset(scan + i * PTHREAD_SCAN, 0, PTHREAD_SCAN);
    if (u->pthread_tid_off < 0)
        u->pthread_tid_off = pthread_tid_offset(scan, pthreads, nth, tids, ntids, proc_pid(u->p));
    if ((off = u->pthread_tid_off) >= 0)
        for (i = 0; i < nth; i++) {
            int32_t v;
            memcpy(&v, scan + i * PTHREAD_SCAN + off, 4);
            u->threads[i].native_id = v > 0 && tid_in(tids, ntids, v) ? v : 0;
        }
    free(scan);
}

int threads_list(unwinder_t *u, unw_thread_t **threads, size_t *n)
{
    const py_layout_t *L = &u->target->layout;
    uint64_t interp, *pthreads = NULL;
    size_t i, ninterp = 0;
    int err;

    *threads = NULL;
    *n = 0;
    u->nthreads = 0;
    if (L->ts_size > TS_MAX_READ || L->ts_size < L->ts_next + 8 || L->ts_size < L->ts_frame + 8 ||
        L->ts_size < L->ts_thread_id + 8 || L->ts_size < L->ts_native_thread_id + 8)
        return REMORA_ECORRUPT;

    err = proc_read_u64(u->p, u->target->runtime + L->rt_interpreters_head, &interp);
    if (err)
        return err;
    while (interp != 0) {
        uint64_t ts;
        int64_t interp_id = 0;
        size_t count = 0;

        if (++ninterp > UNW_MAX_INTERPS)
            return REMORA_ECORRUPT;
        err = proc_read_u64(u->p, interp + L->is_threads_head, &ts);
        if (!err)
            err = proc_read(u->p, interp + L->is_id, &interp_id, 8);
        if (err)
            return err;
        while (ts != 0) {
            unw_thread_t *th;
            if (++count > UNW_MAX_THREADS)
                return REMORA_ECORRUPT;
            err = proc_read(u->p, ts, u->tsbuf, L->ts_size);
            if (err)
                return err;
            err = push_thread(u, &th);
            if (err)
                return err;
            th->tstate = ts;
            th->interp = interp;
            th->interp_id = interp_id;
            if (L->ts_native_thread_id != 0) {
                uint64_t nid = get_u64(u->tsbuf, L->ts_native_thread_id);
                th->native_id = nid < (1u << 31) ? (pid_t)nid : 0;
            }
            ts = get_u64(u->tsbuf, L->ts_next);
        }
        err = proc_read_u64(u->p, interp + L->is_next, &interp);
        if (err)
            return err;
    }

    if (L->ts_native_thread_id == 0 && u->nthreads > 0) {
        /* 3.9/3.10: through each state's pthread_t (re-read: the states were copied
         * into one buffer in turn) */
        pthreads = malloc(u->nthreads * sizeof *pthreads);
        if (pthreads == NULL)
            return REMORA_ENOMEM;
        for (i = 0; i < u->nthreads; i++)
            if (proc_read_u64(u->p, u->threads[i].tstate + L->ts_thread_id, &pthreads[i]) != REMORA_OK)
                pthreads[i] = 0;
        resolve_native_ids(u, pthreads);
        free(pthreads);
    }
    for (i = 0; i < u->nthreads; i++)
        u->threads[i].is_main = u->threads[i].native_id == proc_pid(u->p);
    *threads = u->threads;
    *n = u->nthreads;
    return REMORA_OK;
}
