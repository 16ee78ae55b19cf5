/* unwind/batch.c — a sample's reads, batched into as few system calls as possible.
 *
 * Callers queue small requests (address, length, destination); batch_merge() turns the
 * ones near each other (same page, or within RD_MERGE_GAP bytes) into one range read into
 * a staging buffer, and batch_scatter() copies each request's bytes out once the vectored
 * read is in. The kernel charges per range and per page, not per byte: this is where a
 * sample's time goes. Reads nothing itself.
 */
#include <stdlib.h>
#include <string.h>

#include "remora.h"
#include "internal.h"

/* Asks for the fingerprint of the code object at 'code' (code.c says which reads) into
 * buf, UNW_FP_MAX bytes. Requests, so that neighbours merge: code objects and their
 * names sit together in the allocator's pools. */
int batch_fp(unwinder_t *u, reader_t *r, uint64_t code, unsigned char *buf)
{
    proc_iov_t v[UNW_FP_READS];
    size_t k, m = code_fp_iov(u->codes, &u->target->layout, code, buf, v);

    for (k = 0; k < m; k++)
        if (batch_req(r, v[k].addr, v[k].buf, v[k].len))
            return -1;
    return 0;
}

#define RD_MERGE_GAP 512u
#define RD_MERGE_MAX 16384u
#define RD_ISORT 48u                /* requests sorted by insertion, at most */

static int by_addr(const void *a, const void *b)
{
    uint64_t x = ((const rd_key_t *)a)->addr, y = ((const rd_key_t *)b)->addr;
    return x < y ? -1 : x > y;
}

static int same_page(uint64_t a, uint64_t b)
{
    return a / 4096 == b / 4096;
}

/* Turns the requests from 'first' on into as few reads as possible: those within
 * RD_MERGE_GAP of each other or on the same page become one read into the staging
 * buffer (scattered by batch_scatter). The kernel's cost is per range and per page, not
 * per byte, so this is where a sample's time goes. The reads are queued at the end of
 * r->iov with stage offsets for buffers: batch_fix() makes them pointers once the
 * whole read is queued (the stage may move until then). */
int batch_merge(reader_t *r, size_t *n, size_t first)
{
    size_t i, m = r->nreq - first, total = 0, at;

    if (m == 0)
        return 0;
    if (remora_grow((void **)&r->order, &r->cap_order, m + 1, sizeof *r->order))
        return -1;
    for (i = 0; i < m; i++) {
        r->order[i].addr = r->req[first + i].addr;
        r->order[i].req = first + i;
        total += r->req[first + i].len;
    }
    if (m <= RD_ISORT) {
        /* a few requests, mostly in order already: qsort's set-up costs more */
        for (i = 1; i < m; i++) {
            rd_key_t v = r->order[i];
            size_t j = i;
            for (; j > 0 && r->order[j - 1].addr > v.addr; j--)
                r->order[j] = r->order[j - 1];
            r->order[j] = v;
        }
    } else {
        qsort(r->order, m, sizeof *r->order, by_addr);
    }
    /* the staging buffer is sized for the worst case: every gap filled (a page at most) */
    if (remora_grow((void **)&r->stage, &r->cap_stage, r->nstage + total + m * 4096 + 1, 1))
        return -1;
    at = r->nstage;
    for (i = 0; i < m;) {
        uint64_t lo = r->req[r->order[i].req].addr, hi = lo + r->req[r->order[i].req].len;
        size_t j = i + 1;
        while (j < m) {
            const proc_iov_t *q = &r->req[r->order[j].req];
            uint64_t end = q->addr + q->len > hi ? q->addr + q->len : hi;
            if ((q->addr > hi + RD_MERGE_GAP && !same_page(q->addr, hi - 1)) || end - lo > RD_MERGE_MAX)
                break;
            hi = end;
            j++;
        }
        if (remora_grow((void **)&r->staged, &r->cap_staged, r->nstaged + 1, sizeof *r->staged) ||
            batch_iov(r, n, lo, (void *)(uintptr_t)at, (size_t)(hi - lo)))
            return -1;
        r->staged[r->nstaged++] = *n - 1;
        for (; i < j; i++)
            r->req[r->order[i].req].addr = (uint64_t)at + (r->req[r->order[i].req].addr - lo);  /* now: offset in stage */
        at += (size_t)(hi - lo);
    }
    r->nstage = at;
    return 0;
}

/* Starts a read: no requests, nothing staged. */
void batch_reset(reader_t *r)
{
    r->nreq = 0;
    r->nstage = 0;
    r->nstaged = 0;
}

/* The staged reads' offsets become pointers into the stage. */
void batch_fix(reader_t *r)
{
    size_t i;

    for (i = 0; i < r->nstaged; i++)
        r->iov[r->staged[i]].buf = r->stage + (uintptr_t)r->iov[r->staged[i]].buf;
}

void batch_scatter(reader_t *r)
{
    size_t i;

    for (i = 0; i < r->nreq; i++)
        memcpy(r->req[i].buf, r->stage + r->req[i].addr, r->req[i].len);
}
