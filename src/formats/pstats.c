/* formats/pstats.c — a pstats file, as Python's cProfile writes it (`pstats.Stats(path)`,
 * snakeviz, gprof2dot read it): a marshal-serialised dict
 *
 *   {(file, line, function): (primitive_calls, total_calls, tottime, cumtime, callers)}
 *   callers = {(file, line, function) of a caller: (total_calls, primitive_calls, tottime, cumtime)}
 *
 * derived from the samples, one entry per function (name and file, stk_fn_rows):
 * tottime = its self samples x the sampling interval (out_sample_seconds), cumtime = the
 * samples it is on (once per sample however deep it recurses) x the interval; the call
 * counts are sample counts (a sampler does not see calls). A caller -> callee edge counts
 * the samples in which the caller directly called the callee (once per sample), its tottime
 * those where the callee was innermost. A key's line is the function's line seen in most
 * samples; a frame with no file (remora's <moving>, <GC>, or names read from collapsed
 * stacks without one) is ('~', 0, name), as cProfile keys built-in functions. Thread roots
 * are not functions: they have no entry. Functions with no sample have none either.
 *
 * A memory profile (--mode memory) has no time to give and the format has no unit but
 * seconds for its times: its call counts carry the bytes (a function's: the bytes of the
 * samples it is on; an edge's: the bytes of the samples with it) and every time is 0, so
 * nothing reads bytes as seconds (`sort_stats("calls")` orders by bytes; the bytes a
 * function grew in itself are in the table and collapsed outputs).
 */
#include <stdlib.h>
#include <string.h>

#include "remora.h"
#include "out.h"

typedef struct edge {
    uint32_t caller, callee;        /* rows */
    uint64_t n;                     /* samples with the edge (once each) */
    uint64_t self;                  /* of those, samples with the callee innermost */
    uint64_t stamp;                 /* the last stack counted in n */
} edge_t;

struct pctx {
    const uint32_t *row_of_frame;
    edge_t *edges;
    size_t nedges, cap;             /* cap: at least the table's nodes, each one edge at most */
    uint32_t *slots;                /* edge index + 1; 0 is empty */
    size_t nslots;                  /* a power of two, over twice cap */
    uint64_t now;
};

static size_t slot_of(uint32_t a, uint32_t b, size_t mask)
{
    uint64_t h = ((uint64_t)a << 32 | b) * 0x9e3779b97f4a7c15ull;

    h ^= h >> 29;
    return (size_t)h & mask;
}

static edge_t *edge_at(struct pctx *c, uint32_t caller, uint32_t callee)
{
    size_t s = slot_of(caller, callee, c->nslots - 1);

    while (c->slots[s] != 0) {
        edge_t *e = &c->edges[c->slots[s] - 1];
        if (e->caller == caller && e->callee == callee)
            return e;
        s = (s + 1) & (c->nslots - 1);
    }
    if (c->nedges == c->cap)
        return NULL;                /* cannot happen: one edge per node at most */
    c->edges[c->nedges].caller = caller;
    c->edges[c->nedges].callee = callee;
    c->slots[s] = (uint32_t)++c->nedges;
    return &c->edges[c->nedges - 1];
}

static void count_edges(void *ctx, const stk_thread_t *th, const uint32_t *frames, size_t n,
                        uint64_t count)
{
    struct pctx *c = ctx;
    size_t i;

    (void)th;
    c->now++;
    for (i = 1; i < n; i++) {
        edge_t *e = edge_at(c, c->row_of_frame[frames[i - 1]], c->row_of_frame[frames[i]]);
        if (e == NULL)
            continue;
        if (e->stamp != c->now) {
            e->stamp = c->now;
            e->n += count;
        }
        if (i == n - 1)
            e->self += count;
    }
}

static int by_callee(const void *a, const void *b)
{
    const edge_t *x = a, *y = b;

    if (x->callee != y->callee)
        return x->callee < y->callee ? -1 : 1;
    return x->caller < y->caller ? -1 : x->caller > y->caller;
}

static void put_key(FILE *f, const stk_fn_row_t *r)
{
    out_marshal_tuple(f, 3);
    if (r->file[0] == '\0') {
        out_marshal_str(f, "~");
        out_marshal_int(f, 0);
    } else {
        out_marshal_str(f, r->file);
        out_marshal_int(f, r->hot_line > 0 ? r->hot_line : 0);
    }
    out_marshal_str(f, r->function);
}

/* n samples as a call count: n, or in a memory profile n x the bytes a sample stands for
 * (unit), saturated at INT64_MAX. */
static int64_t count_of(uint64_t n, uint64_t unit)
{
    if (unit > 0)
        n = n > (uint64_t)INT64_MAX / unit ? (uint64_t)INT64_MAX : n * unit;
    return n > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)n;
}

int out_pstats_write(const profile_t *p, FILE *f, const out_options_t *o)
{
    const stk_table_t *t = p->stacks;
    uint64_t unit = p->meta.sample_bytes;
    double dt = unit > 0 ? 0.0 : out_sample_seconds(&p->meta);
    stk_fn_row_t *rows = NULL;
    uint32_t *row_of_frame = NULL;
    struct pctx c;
    size_t nrows = 0, i, e;
    int err;

    (void)o;
    memset(&c, 0, sizeof c);
    err = stk_fn_rows(t, &rows, &nrows, &row_of_frame);
    if (err)
        goto done;
    err = REMORA_ENOMEM;
    c.row_of_frame = row_of_frame;
    c.cap = stk_nnodes(t) + 1;
    for (c.nslots = 16; c.nslots < 2 * c.cap; c.nslots *= 2)
        ;
    c.edges = calloc(c.cap, sizeof *c.edges);
    c.slots = calloc(c.nslots, sizeof *c.slots);
    if (c.edges == NULL || c.slots == NULL)
        goto done;
    err = stk_foreach_stack(t, count_edges, &c);
    if (err)
        goto done;
    qsort(c.edges, c.nedges, sizeof *c.edges, by_callee);

    out_marshal_dict(f);
    for (i = 0, e = 0; i < nrows; i++) {
        const stk_fn_row_t *r = &rows[i];
        if (r->total == 0)
            continue;               /* interned, never sampled (such as <GC>) */
        put_key(f, r);
        out_marshal_tuple(f, 5);
        out_marshal_int(f, count_of(r->total, unit));
        out_marshal_int(f, count_of(r->total, unit));
        out_marshal_float(f, (double)r->self * dt);
        out_marshal_float(f, (double)r->total * dt);
        out_marshal_dict(f);
        while (e < c.nedges && c.edges[e].callee < i)
            e++;
        for (; e < c.nedges && c.edges[e].callee == i; e++) {
            const edge_t *x = &c.edges[e];
            put_key(f, &rows[x->caller]);
            out_marshal_tuple(f, 4);
            out_marshal_int(f, count_of(x->n, unit));
            out_marshal_int(f, count_of(x->n, unit));
            out_marshal_float(f, (double)x->self * dt);
            out_marshal_float(f, (double)x->n * dt);
        }
        out_marshal_dict_end(f);
    }
    out_marshal_dict_end(f);
    err = ferror(f) ? REMORA_EIO : REMORA_OK;
done:
    free(rows);
    free(row_of_frame);
    free(c.edges);
    free(c.slots);
    return err;
}
