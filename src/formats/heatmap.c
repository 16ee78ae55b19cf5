/* formats/heatmap.c — the line heatmap: a self-contained HTML page (no script) with an
 * index of the source files sampled and, for each, its sampled lines in their source,
 * every line's self and inclusive samples, shaded by its inclusive share, with links
 * from a line to the functions it calls most.
 *
 * Per line (function, file, line of a frame): self = samples whose innermost frame is at
 * it; inclusive = samples with a frame at it anywhere in the stack, counted once per
 * sample however often recursion puts it there. Shares are of all samples of the
 * profile. A line's callees are the functions of the frames just inside its frames.
 * The source comes through o->source (the caller reads the files: formats/ reads none);
 * a file without it is said to be what it is, and its lines are listed without text.
 *
 * The same numbers, for programs, in a <script type="application/json" id="heatmap-data">
 * element (escaped so no byte sequence closes it):
 *   {"version":1, "total":N, "files":[{"file":S, "source":"read"|WHY, "changed":B,
 *    "self":N, "inclusive":N, "lines":[[line, self, inclusive], ...],
 *    "ops":[[line, instruction, self samples at it], ...] (--opcodes; else empty)}, ...]}
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "remora.h"
#include "out.h"
#include "flamegraph.h"
#include "../util/util.h"

#define HM_CONTEXT 4                /* lines of source shown around each sampled line */
#define HM_CALLEES 3                /* callees linked from a line */
#define HM_LINE_SHOWN 400           /* bytes of one source line shown */
#define HM_TOP_LINES 25             /* rows of the page's table of hottest lines */
#define HM_OPS 4                    /* --opcodes: instructions shown on a line */

typedef struct hm_line {
    const char *file;               /* interned: compared by pointer */
    int line;
    uint32_t fileno;                /* index into files */
    uint64_t self, incl, stamp;
} hm_line_t;

typedef struct hm_call {
    uint32_t line;                  /* the calling line (index into lines) */
    uint32_t row;                   /* the function called (a row of stk_fn_rows) */
    uint64_t n, stamp;
} hm_call_t;

typedef struct hm_op {
    uint32_t line;                  /* the line (index into lines) */
    const char *op;                 /* --opcodes: an instruction samples ended at there */
    uint64_t n;
} hm_op_t;

typedef struct hm_file {
    const char *file;
    uint64_t self, incl, stamp;
    uint32_t *lines;                /* its lines (indexes), sorted by line number */
    size_t nlines, cap;
    const char *problem;            /* why its source is not shown (a constant), or NULL */
    int changed;                    /* its file changed after the process started */
} hm_file_t;

typedef struct hm {
    const stk_table_t *t;
    hm_line_t *lines;
    size_t nlines, cap_lines;
    uint32_t *slots;                /* line index + 1, open addressing; 0 = empty */
    size_t nslots;
    hm_call_t *calls;
    size_t ncalls, cap_calls;
    uint32_t *call_slots;
    size_t ncall_slots;
    hm_op_t *ops;                   /* --opcodes: self samples by line and instruction */
    size_t nops, cap_ops;
    uint32_t *op_slots;
    size_t nop_slots;
    hm_file_t *files;
    size_t nfiles, cap_files;
    stk_fn_row_t *rows;
    size_t nrows;
    uint32_t *row_of_frame;
    uint64_t stamp;                 /* the stack being counted */
    int oom;
} hm_t;

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
    size_t i;

    /* few files: a scan (the lines' table is what grows) */
    for (i = h->nfiles; i-- > 0;)
        if (h->files[i].file == file)
            return (uint32_t)i;
    if (remora_grow((void **)&h->files, &h->cap_files, h->nfiles + 1, sizeof *h->files)) {
        h->oom = 1;
        return UINT32_MAX;
    }
    memset(&h->files[h->nfiles], 0, sizeof *h->files);
    h->files[h->nfiles].file = file;
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

/* Text into HTML: & < > " ' as entities, a tab kept, other control characters and each
 * byte that is not UTF-8 shown as U+FFFD; at most 'max' bytes of it, "..." past them. */
static void put_html(FILE *f, const char *str, size_t n, size_t max)
{
    const unsigned char *s = (const unsigned char *)(str ? str : "");
    size_t done = 0;

    if (str == NULL)
        n = 0;
    while (n > 0) {
        size_t k = 1;
        if (done >= max) {
            fputs("\xe2\x80\xa6", f);
            return;
        }
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&#39;", f); break;
        case '\t': fputc('\t', f); break;
        default:
            if (*s < 0x20 || *s == 0x7f)
                fputs("\xef\xbf\xbd", f);
            else if ((k = out_utf8_len(s, n)) == 0)
                fputs("\xef\xbf\xbd", f), k = 1;
            else
                fwrite(s, 1, k, f);
        }
        s += k;
        n -= k;
        done += k;
    }
}

static void put_htmlz(FILE *f, const char *s)
{
    put_html(f, s, s ? strlen(s) : 0, SIZE_MAX);
}

static double pct(uint64_t n, uint64_t total)
{
    return total ? 100.0 * (double)n / (double)total : 0.0;
}

/* A line's background: white to red with its inclusive share (square root: a line of
 * 1% still shows). */
static void put_shade(FILE *f, uint64_t incl, uint64_t total)
{
    double a = total ? sqrt((double)incl / (double)total) : 0.0;

    fprintf(f, " style=\"background:rgba(230,40,20,%.3f)\"", 0.05 + 0.7 * (a > 1 ? 1 : a));
}

/* Keeps best[0..*nbest) the indexes of the 'cap' largest counts seen, largest first:
 * item c, with count n[c], offered. */
static void keep_best(uint32_t *best, size_t *nbest, size_t cap, const uint64_t *n, size_t stride,
                      size_t c)
{
    size_t k;

#define HM_N(i) (*(const uint64_t *)((const char *)n + (size_t)(i) * stride))
    for (k = *nbest; k > 0 && HM_N(best[k - 1]) < HM_N(c); k--)
        if (k < cap)
            best[k] = best[k - 1];
#undef HM_N
    if (k < cap) {
        best[k] = (uint32_t)c;
        if (*nbest < cap)
            (*nbest)++;
    }
}

static void put_callees(FILE *f, const hm_t *h, uint32_t li, uint64_t total)
{
    uint32_t best[HM_CALLEES];
    size_t nbest = 0, c, k;

    /* the few calls of this line: a scan of all (bounded by the profile's frames) */
    for (c = 0; c < h->ncalls; c++)
        if (h->calls[c].line == li)
            keep_best(best, &nbest, HM_CALLEES, &h->calls[0].n, sizeof *h->calls, c);
    for (k = 0; k < nbest; k++) {
        const hm_call_t *cl = &h->calls[best[k]];
        const stk_fn_row_t *r = &h->rows[cl->row];
        uint32_t fno;
        size_t i;
        for (fno = 0; fno < h->nfiles && h->files[fno].file != r->file; fno++)
            ;
        /* to the callee's line nearest its definition that was sampled */
        for (i = 0; i < h->nlines; i++)
            if (h->lines[i].file == r->file && h->lines[i].line == r->line)
                break;
        fputs(k ? ", " : "", f);
        if (fno < h->nfiles && i < h->nlines)
            fprintf(f, "<a href=\"#f%u-%d\">", fno, r->line);
        fputs("\xe2\x86\x92 ", f);
        put_htmlz(f, r->function);
        fprintf(f, " %.1f%%", pct(cl->n, total));
        if (fno < h->nfiles && i < h->nlines)
            fputs("</a>", f);
    }
}

/* --opcodes: the instructions the line's own samples were at, most first (HM_OPS). */
static void put_ops(FILE *f, const hm_t *h, uint32_t li, uint64_t total)
{
    uint32_t best[HM_OPS];
    size_t nbest = 0, c, k;

    for (c = 0; c < h->nops; c++)
        if (h->ops[c].line == li)
            keep_best(best, &nbest, HM_OPS, &h->ops[0].n, sizeof *h->ops, c);
    for (k = 0; k < nbest; k++) {
        fprintf(f, "%s<span class=o>", k ? " " : "");
        put_htmlz(f, h->ops[best[k]].op);
        fprintf(f, " %.1f%%</span>", pct(h->ops[best[k]].n, total));
    }
    if (nbest > 0)
        fputs("<br>", f);
}

static void put_row(FILE *f, const hm_t *h, uint32_t fno, int line, const hm_line_t *l,
                    const out_source_t *src, const uint32_t *starts, size_t nstarts, uint64_t total)
{
    size_t len;
    const char *text = src->problem == NULL ? lines_get(src->text, starts, nstarts, line, 0, &len) : NULL;

    fprintf(f, "<tr id=\"f%u-%d\"", fno, line);
    if (l != NULL && l->incl > 0)
        put_shade(f, l->incl, total);
    fprintf(f, "><td class=n>%d</td>", line);
    if (l != NULL)
        fprintf(f, "<td class=c>%" PRIu64 "</td><td class=c>%.1f%%</td><td class=c>%" PRIu64
                "</td><td class=c>%.1f%%</td>", l->self, pct(l->self, total), l->incl, pct(l->incl, total));
    else
        fputs("<td></td><td></td><td></td><td></td>", f);
    fputs("<td class=s>", f);
    if (text != NULL)
        put_html(f, text, len, HM_LINE_SHOWN);
    fputs("</td><td class=k>", f);
    if (l != NULL) {
        put_ops(f, h, (uint32_t)(l - h->lines), total);
        put_callees(f, h, (uint32_t)(l - h->lines), total);
    }
    fputs("</td></tr>\n", f);
}

static void write_file(FILE *f, hm_t *h, uint32_t fno, const out_options_t *o, uint64_t total)
{
    hm_file_t *fl = &h->files[fno];
    out_source_t src = { NULL, 0, "no source given to the report", 0 };
    uint32_t *starts = NULL;
    size_t nstarts = 0, i = 0, j = 0;
    long end = 0;

    if (o->source != NULL)
        o->source(o->source_ctx, fl->file, &src);
    if (src.problem == NULL && lines_index(src.text, src.len, &starts, &nstarts) != 0)
        src.problem = "out of memory";
    fl->problem = src.problem;
    fl->changed = src.problem == NULL && src.changed;
    fprintf(f, "<h2 id=\"f%u\">", fno);
    put_htmlz(f, fl->file);
    fprintf(f, " <span class=t>%.1f%% inclusive, %.1f%% self</span></h2>\n",
            pct(fl->incl, total), pct(fl->self, total));
    if (src.problem != NULL) {
        fputs("<p class=w>Source not shown: ", f);
        put_htmlz(f, src.problem);
        fputs(".</p>\n", f);
    } else if (src.changed) {
        fputs("<p class=w>This file was modified after the process started: its lines may "
              "not be the ones its code was compiled from.</p>\n", f);
    }
    fputs("<table><tr><th>line</th><th>self</th><th></th><th>incl.</th><th></th><th>source</th>"
          "<th>calls</th></tr>\n", f);
    /* each sampled line with HM_CONTEXT lines of source around it (none without source),
     * runs that touch merged, a gap row between runs */
    while (i < fl->nlines) {
        long from = h->lines[fl->lines[i]].line, to = from, ln;
        if (src.problem == NULL) {
            from = from - HM_CONTEXT > 1 ? from - HM_CONTEXT : 1;
            to = to + HM_CONTEXT < (long)nstarts ? to + HM_CONTEXT : (long)nstarts;
        }
        /* the run grows while the next sampled line is within it (or just past it) */
        for (i++; i < fl->nlines; i++) {
            long next = h->lines[fl->lines[i]].line;
            if (next > to + 1 + (src.problem == NULL ? HM_CONTEXT : 0))
                break;
            to = src.problem == NULL && next + HM_CONTEXT < (long)nstarts ? next + HM_CONTEXT : next;
            if (to < next)
                to = next;
        }
        if (to < h->lines[fl->lines[i - 1]].line)
            to = h->lines[fl->lines[i - 1]].line;       /* past the file's end (it changed) */
        if (from > end + 1)
            fputs("<tr class=g><td colspan=7>\xe2\x8b\xae</td></tr>\n", f);
        for (ln = from < end + 1 ? end + 1 : from; ln <= to; ln++) {
            const hm_line_t *at = NULL;
            while (j < fl->nlines && h->lines[fl->lines[j]].line < ln)
                j++;
            if (j < fl->nlines && h->lines[fl->lines[j]].line == ln)
                at = &h->lines[fl->lines[j]];
            put_row(f, h, fno, (int)ln, at, &src, starts, nstarts, total);
        }
        end = to;
    }
    fputs("</table>\n", f);
    free(starts);
}

static void write_data(FILE *f, const hm_t *h, const uint32_t *order, uint64_t total)
{
    size_t i, k;
    int first;

    fprintf(f, "<script type=\"application/json\" id=\"heatmap-data\">{\"version\":1,\"total\":%" PRIu64
            ",\"files\":[", total);
    for (i = 0; i < h->nfiles; i++) {
        const hm_file_t *fl = &h->files[order[i]];
        const char *state = fl->problem ? fl->problem : "read";
        fputs(i ? ",{\"file\":" : "{\"file\":", f);
        out_flamegraph_json_str(f, fl->file, strlen(fl->file));
        fputs(",\"source\":", f);
        out_flamegraph_json_str(f, state, strlen(state));
        fprintf(f, ",\"changed\":%s,\"self\":%" PRIu64 ",\"inclusive\":%" PRIu64 ",\"lines\":[",
                fl->changed ? "true" : "false", fl->self, fl->incl);
        for (k = 0; k < fl->nlines; k++) {
            const hm_line_t *l = &h->lines[fl->lines[k]];
            fprintf(f, "%s[%d,%" PRIu64 ",%" PRIu64 "]", k ? "," : "", l->line, l->self, l->incl);
        }
        fputs("],\"ops\":[", f);
        for (k = 0, first = 1; k < h->nops; k++) {
            const hm_line_t *l = &h->lines[h->ops[k].line];
            if (l->fileno != order[i])
                continue;
            fprintf(f, "%s[%d,", first ? "" : ",", l->line);
            out_flamegraph_json_str(f, h->ops[k].op, strlen(h->ops[k].op));
            fprintf(f, ",%" PRIu64 "]", h->ops[k].n);
            first = 0;
        }
        fputs("]}", f);
    }
    fputs("]}</script>\n", f);
}

static const char hm_style[] =
    "body{font:14px/1.35 system-ui,sans-serif;margin:1.5em;color:#222}"
    "h1{font-size:1.3em}h2{font-size:1.05em;margin-top:2em;word-break:break-all}"
    ".t{font-weight:normal;color:#666}.w{color:#a40}"
    "table{border-collapse:collapse}td,th{padding:0 .5em;text-align:left;vertical-align:top}"
    "td.n,td.c{text-align:right;color:#555;font-variant-numeric:tabular-nums}"
    "td.s{font-family:ui-monospace,monospace;white-space:pre;tab-size:8;max-width:70ch;"
    "overflow:hidden;text-overflow:ellipsis}"
    "td.k{font-size:.9em;max-width:22em}tr.g td{color:#999}"
    ".o{font-family:ui-monospace,monospace;font-size:.85em;color:#614}"
    "a{color:#1a5fb4;text-decoration:none}a:hover{text-decoration:underline}";

int out_heatmap_write(const profile_t *p, FILE *f, const out_options_t *o)
{
    hm_t h;
    uint64_t total = stk_total_samples(p->stacks);
    uint32_t *order = NULL, *top = NULL;
    size_t i, ntop;
    int err = REMORA_OK;

    memset(&h, 0, sizeof h);
    h.t = p->stacks;
    if (stk_fn_rows(p->stacks, &h.rows, &h.nrows, &h.row_of_frame) != REMORA_OK ||
        stk_foreach_stack(p->stacks, count_stack, &h) != 0 || h.oom)
        goto oom;
    if ((order = malloc((h.nfiles + 1) * sizeof *order)) == NULL ||
        (top = malloc((h.nlines + 1) * sizeof *top)) == NULL)
        goto oom;
    /* each file's lines in order, the files by inclusive share */
    for (i = 0; i < h.nlines; i++) {
        hm_file_t *fl = &h.files[h.lines[i].fileno];
        if (remora_grow((void **)&fl->lines, &fl->cap, fl->nlines + 1, sizeof *fl->lines))
            goto oom;
        fl->lines[fl->nlines++] = (uint32_t)i;
    }
    sort_ctx = &h;
    for (i = 0; i < h.nfiles; i++) {
        qsort(h.files[i].lines, h.files[i].nlines, sizeof *h.files[i].lines, by_line);
        order[i] = (uint32_t)i;
    }
    qsort(order, h.nfiles, sizeof *order, by_file_incl);
    for (i = 0; i < h.nlines; i++)
        top[i] = (uint32_t)i;
    qsort(top, h.nlines, sizeof *top, by_self);
    ntop = h.nlines < HM_TOP_LINES ? h.nlines : HM_TOP_LINES;

    fputs("<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8><title>remora heatmap", f);
    if (p->meta.command[0]) {
        fputs(": ", f);
        put_html(f, p->meta.command, strnlen(p->meta.command, sizeof p->meta.command), 200);
    }
    fprintf(f, "</title><style>%s</style></head><body>\n<h1>Where the time went, line by line</h1>\n<p>",
            hm_style);
    if (p->meta.pid)
        fprintf(f, "pid %ld, ", (long)p->meta.pid);
    if (p->meta.python[0]) {
        fputs("Python ", f);
        put_html(f, p->meta.python, strnlen(p->meta.python, sizeof p->meta.python), 32);
        fputs(", ", f);
    }
    if (p->meta.mode[0]) {
        put_html(f, p->meta.mode, strnlen(p->meta.mode, sizeof p->meta.mode), 16);
        fputs(" mode, ", f);
    }
    fprintf(f, "%" PRIu64 " samples", total);
    if (p->meta.duration_s > 0)
        fprintf(f, " in %.2f s", p->meta.duration_s);
    if (p->meta.command[0]) {
        fputs(": <code>", f);
        put_html(f, p->meta.command, strnlen(p->meta.command, sizeof p->meta.command), 1000);
        fputs("</code>", f);
    }
    fputs(". Self: samples whose innermost frame is at a line; inclusive: samples with a "
          "frame at it anywhere in the stack. Shares are of all samples.</p>\n", f);

    fputs("<h2>Hottest lines</h2>\n<table><tr><th>self</th><th>incl.</th><th>line</th></tr>\n", f);
    for (i = 0; i < ntop && h.lines[top[i]].self > 0; i++) {
        const hm_line_t *l = &h.lines[top[i]];
        fprintf(f, "<tr><td class=c>%.1f%%</td><td class=c>%.1f%%</td><td><a href=\"#f%u-%d\">",
                pct(l->self, total), pct(l->incl, total), l->fileno, l->line);
        put_htmlz(f, l->file);
        fprintf(f, ":%d</a></td></tr>\n", l->line);
    }
    fputs("</table>\n", f);
    fputs("<h2>Files</h2>\n<table><tr><th>incl.</th><th>self</th><th>file</th></tr>\n", f);
    for (i = 0; i < h.nfiles; i++) {
        const hm_file_t *fl = &h.files[order[i]];
        fprintf(f, "<tr><td class=c>%.1f%%</td><td class=c>%.1f%%</td><td><a href=\"#f%u\">",
                pct(fl->incl, total), pct(fl->self, total), order[i]);
        put_htmlz(f, fl->file);
        fputs("</a></td></tr>\n", f);
    }
    fputs("</table>\n", f);
    for (i = 0; i < h.nfiles; i++)
        write_file(f, &h, order[i], o, total);
    write_data(f, &h, order, total);
    fputs("</body></html>\n", f);
    goto out;
oom:
    errno = ENOMEM;
    err = REMORA_EIO;
out:
    for (i = 0; i < h.nfiles; i++)
        free(h.files[i].lines);
    free(h.files);
    free(h.lines);
    free(h.slots);
    free(h.calls);
    free(h.call_slots);
    free(h.ops);
    free(h.op_slots);
    free(h.rows);
    free(h.row_of_frame);
    free(order);
    free(top);
    if (err == REMORA_OK && ferror(f))
        err = REMORA_EIO;
    return err;
}
