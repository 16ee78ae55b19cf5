/* formats/heatmap_count.c — the line heatmap's counts: every stack of the table walked
 * once, each Python frame's line counted self (innermost) or inclusive (once a sample,
 * however often recursion puts it there), its callee, and --opcodes its instruction, in
 * open-addressing tables keyed by interned pointers; then the calls and instructions
 * grouped by line and file, so that heatmap.c writes them in time linear in their number
 * (a profile of 80k distinct lines has 80k of each).
 */
#include <stdlib.h>
#include <string.h>

#include "remora.h"
#include "heatmap.h"
#include "../util/util.h"

static uint64_t mix(uint64_t h)
{
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 32;
    return h;
}

/* Doubles an open-addressing table of indexes + 1 when it is half full, rehashing with
 * key(i). Returns 0 or -1. */
static int rehash(uint32_t **slots, size_t *nslots, size_t used, uint64_t (*key)(const hm_t *, uint32_t),
                  const hm_t *h)
{
    size_t cap = *nslots ? *nslots * 2 : 1024, i;
    uint32_t *s;

    if (used * 2 < *nslots)
        return 0;
    if ((s = calloc(cap, sizeof *s)) == NULL)
        return -1;
    for (i = 0; i < used; i++) {
        size_t j = (size_t)mix(key(h, (uint32_t)i)) & (cap - 1);
        while (s[j])
            j = (j + 1) & (cap - 1);
        s[j] = (uint32_t)i + 1;
    }
    free(*slots);
    *slots = s;
    *nslots = cap;
    return 0;
}

static uint64_t line_key(const hm_t *h, uint32_t i)
{
    return (uint64_t)(uintptr_t)h->lines[i].file * 31 + (uint64_t)(uint32_t)h->lines[i].line;
}

static uint64_t file_key(const hm_t *h, uint32_t i)
{
    return (uint64_t)(uintptr_t)h->files[i].file;
}

static uint64_t call_key(const hm_t *h, uint32_t i)
{
    return (uint64_t)h->calls[i].line << 32 | h->calls[i].row;
}

static uint64_t op_key(const hm_t *h, uint32_t i)
{
    return (uint64_t)h->ops[i].line << 32 ^ (uint64_t)(uintptr_t)h->ops[i].op;
}

static void op_add(hm_t *h, uint32_t line, const char *op, uint64_t n)
{
    uint64_t k = (uint64_t)line << 32 ^ (uint64_t)(uintptr_t)op;
    size_t j;

    if (rehash(&h->op_slots, &h->nop_slots, h->nops, op_key, h) != 0) {
        h->oom = 1;
        return;
    }
    for (j = (size_t)mix(k) & (h->nop_slots - 1); h->op_slots[j]; j = (j + 1) & (h->nop_slots - 1)) {
        hm_op_t *o = &h->ops[h->op_slots[j] - 1];
        if (o->line == line && o->op == op) {
            o->n += n;
            return;
        }
    }
    if (remora_grow((void **)&h->ops, &h->cap_ops, h->nops + 1, sizeof *h->ops)) {
        h->oom = 1;
        return;
    }
    h->ops[h->nops] = (hm_op_t){ line, op, n };
    h->op_slots[j] = (uint32_t)h->nops + 1;
    h->nops++;
}

static uint32_t file_of(hm_t *h, const char *file)
{
    size_t j;

    /* hashed: a profile can name as many files as lines */
    if (rehash(&h->file_slots, &h->nfile_slots, h->nfiles, file_key, h) != 0) {
        h->oom = 1;
        return UINT32_MAX;
    }
    for (j = (size_t)mix((uint64_t)(uintptr_t)file) & (h->nfile_slots - 1); h->file_slots[j];
         j = (j + 1) & (h->nfile_slots - 1))
        if (h->files[h->file_slots[j] - 1].file == file)
            return h->file_slots[j] - 1;
    if (remora_grow((void **)&h->files, &h->cap_files, h->nfiles + 1, sizeof *h->files)) {
        h->oom = 1;
        return UINT32_MAX;
    }
    memset(&h->files[h->nfiles], 0, sizeof *h->files);
    h->files[h->nfiles].file = file;
    h->file_slots[j] = (uint32_t)h->nfiles + 1;
    return (uint32_t)h->nfiles++;
}

static uint32_t line_of(hm_t *h, const char *file, int line)
{
    uint64_t k = (uint64_t)(uintptr_t)file * 31 + (uint64_t)(uint32_t)line;
    size_t j;
    uint32_t fno;

    if (rehash(&h->slots, &h->nslots, h->nlines, line_key, h) != 0) {
        h->oom = 1;
        return UINT32_MAX;
    }
    for (j = (size_t)mix(k) & (h->nslots - 1); h->slots[j]; j = (j + 1) & (h->nslots - 1)) {
        hm_line_t *l = &h->lines[h->slots[j] - 1];
        if (l->file == file && l->line == line)
            return h->slots[j] - 1;
    }
    if ((fno = file_of(h, file)) == UINT32_MAX ||
        remora_grow((void **)&h->lines, &h->cap_lines, h->nlines + 1, sizeof *h->lines)) {
        h->oom = 1;
        return UINT32_MAX;
    }
    memset(&h->lines[h->nlines], 0, sizeof *h->lines);
    h->lines[h->nlines].file = file;
    h->lines[h->nlines].line = line;
    h->lines[h->nlines].fileno = fno;
    h->slots[j] = (uint32_t)h->nlines + 1;
    return (uint32_t)h->nlines++;
}

uint32_t hm_find_line(const hm_t *h, const char *file, int line)
{
    uint64_t k = (uint64_t)(uintptr_t)file * 31 + (uint64_t)(uint32_t)line;
    size_t j;

    if (h->nslots == 0)
        return UINT32_MAX;
    for (j = (size_t)mix(k) & (h->nslots - 1); h->slots[j]; j = (j + 1) & (h->nslots - 1)) {
        const hm_line_t *l = &h->lines[h->slots[j] - 1];
        if (l->file == file && l->line == line)
            return h->slots[j] - 1;
    }
    return UINT32_MAX;
}

static void call_add(hm_t *h, uint32_t line, uint32_t row, uint64_t n)
{
    uint64_t k = (uint64_t)line << 32 | row;
    size_t j;

    if (rehash(&h->call_slots, &h->ncall_slots, h->ncalls, call_key, h) != 0) {
        h->oom = 1;
        return;
    }
    for (j = (size_t)mix(k) & (h->ncall_slots - 1); h->call_slots[j]; j = (j + 1) & (h->ncall_slots - 1)) {
        hm_call_t *c = &h->calls[h->call_slots[j] - 1];
        if (c->line == line && c->row == row) {
            if (c->stamp != h->stamp) {
                c->stamp = h->stamp;
                c->n += n;
            }
            return;
        }
    }
    if (remora_grow((void **)&h->calls, &h->cap_calls, h->ncalls + 1, sizeof *h->calls)) {
        h->oom = 1;
        return;
    }
    h->calls[h->ncalls] = (hm_call_t){ line, row, n, h->stamp };
    h->call_slots[j] = (uint32_t)h->ncalls + 1;
    h->ncalls++;
}

/* A frame that names a place in a source file: a Python frame with a file and a line
 * (not a marker such as <GC> or <moving>, not a C frame). */
static const stk_frame_t *py_frame(const hm_t *h, uint32_t fi)
{
    const stk_frame_t *f = stk_frame_at(h->t, fi);

    return f != NULL && !f->native && f->file != NULL && *f->file != '\0' && f->line > 0 ? f : NULL;
}

static void count_stack(void *ctx, const stk_thread_t *thread, const uint32_t *frames, size_t n,
                        uint64_t count)
{
    hm_t *h = ctx;
    size_t k;

    (void)thread;
    h->stamp++;
    for (k = 0; k < n && !h->oom; k++) {
        const stk_frame_t *f = py_frame(h, frames[k]);
        uint32_t li;
        hm_line_t *l;
        hm_file_t *fl;
        if (f == NULL || (li = line_of(h, f->file, f->line)) == UINT32_MAX)
            continue;
        l = &h->lines[li];
        fl = &h->files[l->fileno];
        if (l->function == NULL)
            l->function = f->function;      /* the first function met at the line */
        if (l->stamp != h->stamp) {
            l->stamp = h->stamp;
            l->incl += count;
        }
        if (fl->stamp != h->stamp) {
            fl->stamp = h->stamp;
            fl->incl += count;
        }
        if (k + 1 == n) {
            l->self += count;
            fl->self += count;
            if (f->op != NULL)
                op_add(h, li, f->op, count);
        } else if (py_frame(h, frames[k + 1]) != NULL) {
            call_add(h, li, h->row_of_frame[frames[k + 1]], count);
        }
    }
}

static uint32_t call_line(const hm_t *h, size_t i)
{
    return h->calls[i].line;
}

static uint32_t op_line(const hm_t *h, size_t i)
{
    return h->ops[i].line;
}

static uint32_t op_file(const hm_t *h, size_t i)
{
    return h->lines[h->ops[i].line].fileno;
}

/* Groups items 0..n by key(h, i) (< nkeys), keeping their order within a key: a counting
 * sort. (*first)[k] .. (*first)[k + 1] are where key k's items are in *list. Returns 0,
 * or -1 out of memory. */
static int group(const hm_t *h, size_t n, size_t nkeys, uint32_t (*key)(const hm_t *, size_t),
                 uint32_t **first, uint32_t **list)
{
    uint32_t *fst = calloc(nkeys + 1, sizeof *fst), *lst = malloc((n ? n : 1) * sizeof *lst);
    size_t i, k;

    *first = fst;
    *list = lst;
    if (fst == NULL || lst == NULL)
        return -1;
    for (i = 0; i < n; i++)
        fst[key(h, i) + 1]++;
    for (k = 0; k < nkeys; k++)
        fst[k + 1] += fst[k];
    /* each key's start moves to its end as its items are placed ... */
    for (i = 0; i < n; i++)
        lst[fst[key(h, i)]++] = (uint32_t)i;
    /* ... which is the next key's start */
    for (k = nkeys; k > 0; k--)
        fst[k] = fst[k - 1];
    fst[0] = 0;
    return 0;
}

static const hm_t *sort_ctx;

static int by_line(const void *a, const void *b)
{
    const hm_line_t *x = &sort_ctx->lines[*(const uint32_t *)a], *y = &sort_ctx->lines[*(const uint32_t *)b];

    return (x->line > y->line) - (x->line < y->line);
}

static int by_self(const void *a, const void *b)
{
    const hm_line_t *x = &sort_ctx->lines[*(const uint32_t *)a], *y = &sort_ctx->lines[*(const uint32_t *)b];

    if (x->self != y->self)
        return x->self < y->self ? 1 : -1;
    return (x->incl < y->incl) - (x->incl > y->incl);
}

static int by_file_incl(const void *a, const void *b)
{
    const hm_file_t *x = &sort_ctx->files[*(const uint32_t *)a], *y = &sort_ctx->files[*(const uint32_t *)b];

    if (x->incl != y->incl)
        return x->incl < y->incl ? 1 : -1;
    return strcmp(x->file, y->file);
}

int hm_count(hm_t *h, const stk_table_t *t, uint32_t **order_out, uint32_t **top_out)
{
    uint32_t *order, *top;
    size_t i;

    *order_out = *top_out = NULL;
    memset(h, 0, sizeof *h);
    h->t = t;
    if (stk_fn_rows(t, &h->rows, &h->nrows, &h->row_of_frame) != REMORA_OK ||
        stk_foreach_stack(t, count_stack, h) != 0 || h->oom)
        return -1;
    if (group(h, h->ncalls, h->nlines, call_line, &h->call_first, &h->call_list) != 0 ||
        group(h, h->nops, h->nlines, op_line, &h->op_first, &h->op_list) != 0 ||
        group(h, h->nops, h->nfiles, op_file, &h->file_op_first, &h->file_op_list) != 0)
        return -1;
    if ((*order_out = order = malloc((h->nfiles + 1) * sizeof *order)) == NULL ||
        (*top_out = top = malloc((h->nlines + 1) * sizeof *top)) == NULL)
        return -1;
    /* each file's lines in order, the files by inclusive share */
    for (i = 0; i < h->nlines; i++) {
        hm_file_t *fl = &h->files[h->lines[i].fileno];
        if (remora_grow((void **)&fl->lines, &fl->cap, fl->nlines + 1, sizeof *fl->lines))
            return -1;
        fl->lines[fl->nlines++] = (uint32_t)i;
    }
    sort_ctx = h;
    for (i = 0; i < h->nfiles; i++) {
        qsort(h->files[i].lines, h->files[i].nlines, sizeof *h->files[i].lines, by_line);
        order[i] = (uint32_t)i;
    }
    qsort(order, h->nfiles, sizeof *order, by_file_incl);
    for (i = 0; i < h->nlines; i++)
        top[i] = (uint32_t)i;
    qsort(top, h->nlines, sizeof *top, by_self);
    return 0;
}

void hm_free(hm_t *h)
{
    size_t i;

    for (i = 0; i < h->nfiles; i++)
        free(h->files[i].lines);
    free(h->files);
    free(h->file_slots);
    free(h->call_first);
    free(h->call_list);
    free(h->op_first);
    free(h->op_list);
    free(h->file_op_first);
    free(h->file_op_list);
    free(h->lines);
    free(h->slots);
    free(h->calls);
    free(h->call_slots);
    free(h->ops);
    free(h->op_slots);
    free(h->rows);
    free(h->row_of_frame);
}
