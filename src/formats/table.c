/* formats/table.c — the table printed when no -o is given (-f table): per function (name
 * and file), self and total samples with percentages (stk_fn_rows), sorted by self time
 * (--sort: by total time, or by name).
 * A function with no sample has no row; its file:line is the line seen in most samples.
 * Names are escaped by out_text_str(): one row per line, whatever the target named its
 * functions. */
#include <stdlib.h>
#include <string.h>

#include "remora.h"
#include "out.h"

const char out_sort_accepts[] = "an order: self (or own, tottime), total (or cumulative, cumul, "
                                "cumtime) or name";

int out_sort_parse(const char *s)
{
    static const struct { const char *word; int sort; } words[] = {
        { "self", OUT_SORT_SELF }, { "own", OUT_SORT_SELF }, { "tottime", OUT_SORT_SELF },
        { "total", OUT_SORT_TOTAL }, { "cumulative", OUT_SORT_TOTAL }, { "cumul", OUT_SORT_TOTAL },
        { "cumtime", OUT_SORT_TOTAL }, { "name", OUT_SORT_NAME },
    };
    size_t i;

    for (i = 0; s != NULL && i < sizeof words / sizeof words[0]; i++)
        if (strcmp(s, words[i].word) == 0)
            return words[i].sort;
    return -1;
}

/* Ties: the name, then the file (two functions of one name in two files). */
static int by_name(const stk_fn_row_t *x, const stk_fn_row_t *y)
{
    int c = strcmp(x->function, y->function);

    return c != 0 ? c : strcmp(x->file, y->file);
}

static int by_self(const void *a, const void *b)
{
    const stk_fn_row_t *x = a, *y = b;

    if (x->self != y->self)
        return x->self < y->self ? 1 : -1;
    if (x->total != y->total)
        return x->total < y->total ? 1 : -1;
    return by_name(x, y);
}

static int by_total(const void *a, const void *b)
{
    const stk_fn_row_t *x = a, *y = b;

    if (x->total != y->total)
        return x->total < y->total ? 1 : -1;
    if (x->self != y->self)
        return x->self < y->self ? 1 : -1;
    return by_name(x, y);
}

static int by_function(const void *a, const void *b)
{
    const stk_fn_row_t *x = a, *y = b;
    int c = by_name(x, y);

    if (c != 0)
        return c;
    return x->self != y->self ? (x->self < y->self ? 1 : -1) : 0;
}

int out_table_write(const profile_t *p, FILE *f, const out_options_t *o)
{
    const stk_table_t *t = p->stacks;
    size_t nrows, i, n, limit;
    uint64_t total = stk_total_samples(t);
    uint64_t unit = p->meta.sample_bytes > 0 ? p->meta.sample_bytes : 1;
    stk_fn_row_t *rows = NULL;
    int err;

    err = stk_fn_rows(t, &rows, &nrows, NULL);
    if (!err) {
        /* rows of no sample (a frame interned but never seen, such as <GC>) are left out */
        for (i = n = 0; i < nrows; i++)
            if (rows[i].total > 0)
                rows[n++] = rows[i];
        qsort(rows, n, sizeof *rows, o && o->sort == OUT_SORT_TOTAL ? by_total :
                                     o && o->sort == OUT_SORT_NAME ? by_function : by_self);
        limit = o && o->limit > 0 ? (size_t)o->limit : 25;
        /* --mode memory: the columns are bytes of resident growth, not samples */
        if (unit > 1)
            fprintf(f, "%14s %7s %14s %7s  %s\n", "self bytes", "self%", "total bytes", "total%",
                    "function (file:line)");
        else
            fprintf(f, "%10s %7s %10s %7s  %s\n", "self", "self%", "total", "total%", "function (file:line)");
        for (i = 0; i < n && i < limit; i++) {
            const stk_fn_row_t *r = &rows[i];
            fprintf(f, "%*llu %6.2f%% %*llu %6.2f%%  ", unit > 1 ? 14 : 10, (unsigned long long)(r->self * unit),
                    total ? 100.0 * (double)r->self / (double)total : 0.0, unit > 1 ? 14 : 10,
                    (unsigned long long)(r->total * unit),
                    total ? 100.0 * (double)r->total / (double)total : 0.0);
            out_text_frame(f, r->function, r->file, r->hot_line);
            fputc('\n', f);
        }
        if (n > limit)
            fprintf(f, "(%zu more %s; -l N shows more)\n", n - limit,
                    out_plural(n - limit, "function", "functions"));
        /* the counts' words (docs/cli.md, "Counts"), in parentheses as the line above */
        {
            char words[512];
            out_counts_text(words, sizeof words, &p->meta, total);
            fprintf(f, "(%s)\n", words);
        }
    }
    free(rows);
    if (err)
        return err;
    return ferror(f) ? REMORA_EIO : REMORA_OK;
}
