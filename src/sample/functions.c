/* sample/functions.c — per-function totals of a stack table (the table, pstats files and
 * `remora top`): one row per (function, file), self and total samples, its lowest line
 * and the line seen in most samples. */
#include <stdlib.h>
#include <string.h>

#include "remora.h"
#include "sample.h"

struct fctx {
    stk_fn_row_t *rows;
    const uint32_t *row_of_frame;
    uint64_t *stamp;            /* per row: the last stack counted in its total */
    uint64_t *fstamp, *ftotal;  /* per frame: the same, and its samples (once per sample) */
    uint64_t now;
    pid_t tid;                  /* count this thread's stacks only; 0 = every thread's */
};

static void count_stack(void *ctx, const stk_thread_t *th, const uint32_t *frames, size_t n,
                        uint64_t count)
{
    struct fctx *c = ctx;
    size_t i;

    if (c->tid != 0 && th->tid != c->tid)
        return;
    c->now++;
    for (i = 0; i < n; i++) {
        uint32_t r = c->row_of_frame[frames[i]];
        if (c->fstamp[frames[i]] != c->now) {
            c->fstamp[frames[i]] = c->now;
            c->ftotal[frames[i]] += count;
        }
        if (c->stamp[r] != c->now) {
            c->stamp[r] = c->now;
            c->rows[r].total += count;
        }
    }
    if (n > 0)
        c->rows[c->row_of_frame[frames[n - 1]]].self += count;
}

static size_t slot_of(const char *function, const char *file, size_t mask)
{
    uint64_t h = (uint64_t)(uintptr_t)function * 0x9e3779b97f4a7c15ull ^ (uint64_t)(uintptr_t)file;

    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 32;
    return (size_t)h & mask;
}

int stk_fn_rows(const stk_table_t *t, stk_fn_row_t **rows_out, size_t *n_out, uint32_t **row_of_frame_out)
{
    return stk_fn_rows_tid(t, 0, rows_out, n_out, row_of_frame_out);
}

int stk_fn_rows_tid(const stk_table_t *t, pid_t tid, stk_fn_row_t **rows_out, size_t *n_out,
                    uint32_t **row_of_frame_out)
{
    size_t nf = stk_nframes(t), nrows = 0, cap = 16, i;
    uint32_t *row_of_frame, *slots;
    stk_fn_row_t *rows;
    uint64_t *stamp, *fstamp = NULL, *ftotal = NULL;
    struct fctx c;
    int err = REMORA_ENOMEM;

    while (cap < 2 * nf)
        cap *= 2;
    row_of_frame = malloc((nf ? nf : 1) * sizeof *row_of_frame);
    rows = calloc(nf ? nf : 1, sizeof *rows);
    stamp = calloc(nf ? nf : 1, sizeof *stamp);
    slots = calloc(cap, sizeof *slots);     /* row index + 1; 0 is empty */
    fstamp = calloc(nf ? nf : 1, sizeof *fstamp);
    ftotal = calloc(nf ? nf : 1, sizeof *ftotal);
    if (row_of_frame == NULL || rows == NULL || stamp == NULL || slots == NULL || fstamp == NULL ||
        ftotal == NULL)
        goto fail;
    /* strings are interned, so (function, file) compare as pointers; rows come in the
     * order of their first frame, and frames are only ever appended: a row keeps its
     * index as the table grows */
    for (i = 0; i < nf; i++) {
        const stk_frame_t *fr = stk_frame_at(t, (uint32_t)i);
        size_t s = slot_of(fr->function, fr->file, cap - 1);
        while (slots[s] != 0) {
            stk_fn_row_t *r = &rows[slots[s] - 1];
            if (r->function == fr->function && r->file == fr->file)
                break;
            s = (s + 1) & (cap - 1);
        }
        if (slots[s] == 0) {
            rows[nrows].function = fr->function;
            rows[nrows].file = fr->file;
            rows[nrows].line = fr->line;
            slots[s] = (uint32_t)++nrows;
        } else if (fr->line < rows[slots[s] - 1].line) {
            rows[slots[s] - 1].line = fr->line;
        }
        row_of_frame[i] = slots[s] - 1;
    }
    c.rows = rows;
    c.row_of_frame = row_of_frame;
    c.stamp = stamp;
    c.fstamp = fstamp;
    c.ftotal = ftotal;
    c.now = 0;
    c.tid = tid;
    err = stk_foreach_stack(t, count_stack, &c);
    if (err)
        goto fail;
    /* each row's hot line: its frame in most samples (the lowest line of a tie); reuses
     * stamp as the samples of the hot frame so far */
    for (i = 0; i < nrows; i++) {
        rows[i].hot_line = rows[i].line;
        stamp[i] = 0;
    }
    for (i = 0; i < nf; i++) {
        stk_fn_row_t *r = &rows[row_of_frame[i]];
        int line = stk_frame_at(t, (uint32_t)i)->line;
        uint64_t *best = &stamp[row_of_frame[i]];
        if (ftotal[i] > *best || (ftotal[i] == *best && ftotal[i] > 0 && line < r->hot_line)) {
            *best = ftotal[i];
            r->hot_line = line;
        }
    }
    if (row_of_frame_out != NULL)
        *row_of_frame_out = row_of_frame;
    else
        free(row_of_frame);
    free(stamp);
    free(slots);
    free(fstamp);
    free(ftotal);
    *rows_out = rows;
    *n_out = nrows;
    return REMORA_OK;
fail:
    free(row_of_frame);
    free(rows);
    free(stamp);
    free(slots);
    free(fstamp);
    free(ftotal);
    return err;
}
