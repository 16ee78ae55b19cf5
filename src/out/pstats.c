/* out/pstats.c — the table printed when no -o is given: per function (name and file),
 * self and total samples with percentages, sorted by self time. A function's total
 * counts each sample once, however often it recurses in that sample. Names are escaped
 * by out_text_str(): one row per line, whatever the target named its functions. */
#include <stdlib.h>
#include <string.h>

#include "remora.h"
#include "out.h"

typedef struct fn_row {
    const char *function, *file;
    int line;                   /* the lowest line seen: near the definition */
    uint64_t self, total;
    uint64_t stamp;             /* last stack counted in total */
} fn_row_t;

struct pctx {
    const stk_table_t *t;
    uint32_t *fn_of_frame;      /* frame index → row */
    fn_row_t *rows;
    uint64_t stamp;
};

static void count_stack(void *ctx, const stk_thread_t *th, const uint32_t *frames, size_t n, uint64_t count)
{
    struct pctx *c = ctx;
    size_t i;

    (void)th;
    c->stamp++;
    for (i = 0; i < n; i++) {
        fn_row_t *r = &c->rows[c->fn_of_frame[frames[i]]];
        if (r->stamp != c->stamp) {
            r->stamp = c->stamp;
            r->total += count;
        }
    }
    if (n > 0)
        c->rows[c->fn_of_frame[frames[n - 1]]].self += count;
}

static int by_self(const void *a, const void *b)
{
    const fn_row_t *x = a, *y = b;

    if (x->self != y->self)
        return x->self < y->self ? 1 : -1;
    if (x->total != y->total)
        return x->total < y->total ? 1 : -1;
    return strcmp(x->function, y->function);
}

int out_pstats_write(const profile_t *p, FILE *f, const out_options_t *o)
{
    const stk_table_t *t = p->stacks;
    size_t nf = stk_nframes(t), nrows = 0, i, j, limit;
    uint64_t total = stk_total_samples(t);
    struct pctx c;
    int err;

    memset(&c, 0, sizeof c);
    c.t = t;
    c.fn_of_frame = malloc((nf ? nf : 1) * sizeof *c.fn_of_frame);
    c.rows = calloc(nf ? nf : 1, sizeof *c.rows);
    if (c.fn_of_frame == NULL || c.rows == NULL) {
        free(c.fn_of_frame);
        free(c.rows);
        return REMORA_ENOMEM;
    }
    /* one row per (function, file): strings are interned, so pointers compare */
    for (i = 0; i < nf; i++) {
        const stk_frame_t *fr = stk_frame_at(t, (uint32_t)i);
        for (j = 0; j < nrows; j++)
            if (c.rows[j].function == fr->function && c.rows[j].file == fr->file)
                break;
        if (j == nrows) {
            c.rows[nrows].function = fr->function;
            c.rows[nrows].file = fr->file;
            c.rows[nrows].line = fr->line;
            nrows++;
        } else if (fr->line < c.rows[j].line) {
            c.rows[j].line = fr->line;
        }
        c.fn_of_frame[i] = (uint32_t)j;
    }
    err = stk_foreach_stack(t, count_stack, &c);
    if (!err) {
        qsort(c.rows, nrows, sizeof *c.rows, by_self);
        limit = o && o->limit > 0 ? (size_t)o->limit : 25;
        fprintf(f, "%10s %7s %10s %7s  %s\n", "self", "self%", "total", "total%", "function (file:line)");
        for (i = 0; i < nrows && i < limit; i++) {
            const fn_row_t *r = &c.rows[i];
            fprintf(f, "%10llu %6.2f%% %10llu %6.2f%%  ", (unsigned long long)r->self,
                    total ? 100.0 * (double)r->self / (double)total : 0.0, (unsigned long long)r->total,
                    total ? 100.0 * (double)r->total / (double)total : 0.0);
            out_text_str(f, r->function, 0);
            if (r->file[0]) {
                fputs(" (", f);
                out_text_str(f, r->file, 0);
                fprintf(f, ":%d)", r->line);
            }
            fputc('\n', f);
        }
        if (nrows > limit)
            fprintf(f, "(%zu more functions; -l N shows more)\n", nrows - limit);
    }
    free(c.fn_of_frame);
    free(c.rows);
    if (err)
        return err;
    return ferror(f) ? REMORA_EIO : REMORA_OK;
}
