/* formats/pstats.c — the table printed when no -o is given: per function (name and file),
 * self and total samples with percentages (stk_fn_rows), sorted by self time. Names are escaped
 * by out_text_str(): one row per line, whatever the target named its functions. */
#include <stdlib.h>
#include <string.h>

#include "remora.h"
#include "out.h"

static int by_self(const void *a, const void *b)
{
    const stk_fn_row_t *x = a, *y = b;

    if (x->self != y->self)
        return x->self < y->self ? 1 : -1;
    if (x->total != y->total)
        return x->total < y->total ? 1 : -1;
    return strcmp(x->function, y->function);
}

int out_pstats_write(const profile_t *p, FILE *f, const out_options_t *o)
{
    const stk_table_t *t = p->stacks;
    size_t nrows, i, limit;
    uint64_t total = stk_total_samples(t);
    stk_fn_row_t *rows;
    int err;

    err = stk_fn_rows(t, &rows, &nrows, NULL);
    if (!err) {
        qsort(rows, nrows, sizeof *rows, by_self);
        limit = o && o->limit > 0 ? (size_t)o->limit : 25;
        fprintf(f, "%10s %7s %10s %7s  %s\n", "self", "self%", "total", "total%", "function (file:line)");
        for (i = 0; i < nrows && i < limit; i++) {
            const stk_fn_row_t *r = &rows[i];
            fprintf(f, "%10llu %6.2f%% %10llu %6.2f%%  ", (unsigned long long)r->self,
                    total ? 100.0 * (double)r->self / (double)total : 0.0, (unsigned long long)r->total,
                    total ? 100.0 * (double)r->total / (double)total : 0.0);
            out_text_frame(f, r->function, r->file, r->line);
            fputc('\n', f);
        }
        if (nrows > limit)
            fprintf(f, "(%zu more functions; -l N shows more)\n", nrows - limit);
    }
    free(rows);
    if (err)
        return err;
    return ferror(f) ? REMORA_EIO : REMORA_OK;
}
