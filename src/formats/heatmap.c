/* formats/heatmap.c — the line heatmap: a self-contained HTML page (no script) that opens
 * on the hottest file's sampled lines in their source, then lists the hottest lines (their
 * text and function), the files, and every other file's sampled lines: each line's self
 * and inclusive samples, shaded by its inclusive share or, with the page's toggle (a CSS
 * radio button), its self share, with links from a line to the functions it calls most.
 * The hottest file: the one with the most self samples among those whose source is shown
 * (else the first by inclusive share).
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
#include "heatmap.h"
#include "flamegraph.h"
#include "../util/util.h"

#define HM_CONTEXT 4                /* lines of source shown around each sampled line */
#define HM_CALLEES 3                /* callees linked from a line */
#define HM_LINE_SHOWN 400           /* bytes of one source line shown */
#define HM_TOP_LINES 25             /* rows of the page's table of hottest lines */
#define HM_OPS 4                    /* --opcodes: instructions shown on a line */
#define HM_HOT_TRIES 16             /* files tried for the one the page opens on */

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

/* The opacity of a line's red for a share (square root: a line of 1% still shows). */
static double shade(uint64_t n, uint64_t total)
{
    double a = total ? sqrt((double)n / (double)total) : 0.0;

    return n ? 0.05 + 0.7 * (a > 1 ? 1 : a) : 0.0;
}

/* A line's background: its inclusive and its self shade, as --i and --s, which the page's
 * style picks from with its toggle. */
static void put_shade(FILE *f, uint64_t self, uint64_t incl, uint64_t total)
{
    fprintf(f, " class=h style=\"--i:%.3f;--s:%.3f\"", shade(incl, total), shade(self, total));
}

/* The source of 'file' through o->source, with its index of lines: *starts the caller's or
 * *own (which the caller frees; NULL when unused). src->problem says why there is none. */
static void source_get(const out_options_t *o, const char *file, out_source_t *src, uint32_t **own,
                       const uint32_t **starts, size_t *nstarts)
{
    *src = (out_source_t){ NULL, 0, "no source given to the report", 0, NULL, 0 };
    *own = NULL;
    *starts = NULL;
    *nstarts = 0;
    if (o != NULL && o->source != NULL)
        o->source(o->source_ctx, file, src);
    if (src->problem == NULL && src->starts != NULL) {
        *starts = src->starts;          /* the caller's index of the text */
        *nstarts = src->nstarts;
    } else if (src->problem == NULL) {
        if (lines_index(src->text, src->len, own, nstarts) != 0)
            src->problem = "out of memory";
        *starts = *own;
    }
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

    /* this line's calls only (grouped by hm_count) */
    for (c = h->call_first[li]; c < h->call_first[li + 1]; c++)
        keep_best(best, &nbest, HM_CALLEES, &h->calls[0].n, sizeof *h->calls, h->call_list[c]);
    for (k = 0; k < nbest; k++) {
        const hm_call_t *cl = &h->calls[best[k]];
        const stk_fn_row_t *r = &h->rows[cl->row];
        /* to the callee's line nearest its definition, if it was sampled */
        uint32_t at = hm_find_line(h, r->file, r->line);
        fputs(k ? ", " : "", f);
        if (at != UINT32_MAX)
            fprintf(f, "<a href=\"#f%u-%d\">", h->lines[at].fileno, r->line);
        fputs("\xe2\x86\x92 ", f);
        put_htmlz(f, r->function);
        fprintf(f, " %.1f%%", pct(cl->n, total));
        if (at != UINT32_MAX)
            fputs("</a>", f);
    }
}

/* --opcodes: the instructions the line's own samples were at, most first (HM_OPS). */
static void put_ops(FILE *f, const hm_t *h, uint32_t li, uint64_t total)
{
    uint32_t best[HM_OPS];
    size_t nbest = 0, c, k;

    for (c = h->op_first[li]; c < h->op_first[li + 1]; c++)
        keep_best(best, &nbest, HM_OPS, &h->ops[0].n, sizeof *h->ops, h->op_list[c]);
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
        put_shade(f, l->self, l->incl, total);
    fprintf(f, "><td class=n>%d</td>", line);
    if (l != NULL)
        fprintf(f, "<td class=c>%" PRIu64 "</td><td class=c>%.1f%%</td><td class=c>%" PRIu64
                "</td><td class=c>%.1f%%</td>", l->self * h->unit, pct(l->self, total), l->incl * h->unit,
                pct(l->incl, total));
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

/* One file's section: its heading, and its sampled lines in their source; 'hottest' marks
 * the one the page opens on. */
static void write_file(FILE *f, hm_t *h, uint32_t fno, const out_options_t *o, uint64_t total, int hottest)
{
    hm_file_t *fl = &h->files[fno];
    out_source_t src;
    uint32_t *own = NULL;
    const uint32_t *starts = NULL;
    size_t nstarts = 0, i = 0, j = 0;
    long end = 0;

    source_get(o, fl->file, &src, &own, &starts, &nstarts);
    fl->problem = src.problem;
    fl->changed = src.problem == NULL && src.changed;
    fprintf(f, "<section class=file%s><h2 id=\"f%u\">", hottest ? " id=hottest-file" : "", fno);
    if (hottest)
        fputs("<span class=t>Hottest file:</span> ", f);
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
    fputs("</table></section>\n", f);
    free(own);
}

static void write_data(FILE *f, const hm_t *h, const uint32_t *order, uint64_t total)
{
    size_t i, k;
    int first;

    fprintf(f, "<script type=\"application/json\" id=\"heatmap-data\">{\"version\":1,\"total\":%" PRIu64
            ",\"sample_bytes\":%" PRIu64 ",\"files\":[", total, h->unit > 1 ? h->unit : 0);
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
        for (k = h->file_op_first[order[i]], first = 1; k < h->file_op_first[order[i] + 1]; k++) {
            const hm_op_t *op = &h->ops[h->file_op_list[k]];
            fprintf(f, "%s[%d,", first ? "" : ",", h->lines[op->line].line);
            out_flamegraph_json_str(f, op->op, strlen(op->op));
            fprintf(f, ",%" PRIu64 "]", op->n);
            first = 0;
        }
        fputs("]}", f);
    }
    fputs("]}</script>\n", f);
}

static const char hm_style[] =
    "body{font:14px/1.35 system-ui,sans-serif;margin:1em 1.5em;color:#222}"
    "h1{font-size:1.2em;margin:.2em 0}h2{font-size:1.05em;margin-top:1.5em;word-break:break-all}"
    "#hottest-file h2{margin-top:.6em}p.sum{margin:.3em 0;color:#444}"
    ".t{font-weight:normal;color:#666}.w{color:#a40}"
    /* the shade toggle: two radio buttons (no script), their labels as buttons */
    "input.sh{position:absolute;opacity:0;pointer-events:none}"
    ".bar{display:flex;flex-wrap:wrap;gap:.4em 1em;align-items:center;margin:.3em 0}"
    ".bar label{border:1px solid #ccc;padding:1px 8px;cursor:pointer;border-radius:4px}"
    "#sh-incl:checked~.bar label[for=sh-incl],#sh-self:checked~.bar label[for=sh-self]"
    "{background:#fde3dc;border-color:#e0806a}"
    "tr.h{background:rgba(230,40,20,var(--i))}#sh-self:checked~main tr.h{background:rgba(230,40,20,var(--s))}"
    "td.fn{font-family:ui-monospace,monospace;font-size:.9em;white-space:nowrap}"
    "td.at{font-size:.9em;word-break:break-all}"
    "table{border-collapse:collapse}td,th{padding:0 .5em;text-align:left;vertical-align:top}"
    "td.n,td.c{text-align:right;color:#555;font-variant-numeric:tabular-nums}"
    "td.s{font-family:ui-monospace,monospace;white-space:pre;tab-size:8;max-width:70ch;"
    "overflow:hidden;text-overflow:ellipsis}"
    "td.k{font-size:.9em;max-width:22em}tr.g td{color:#999}"
    ".o{font-family:ui-monospace,monospace;font-size:.85em;color:#614}"
    "a{color:#1a5fb4;text-decoration:none}a:hover{text-decoration:underline}";

/* The page's head and its first paragraph: what was sampled, how long, what it counts. */
static void write_head(FILE *f, const profile_t *p, uint64_t total)
{
    fputs("<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8><title>remora heatmap", f);
    if (p->meta.command[0]) {
        fputs(": ", f);
        put_html(f, p->meta.command, strnlen(p->meta.command, sizeof p->meta.command), 200);
    }
    fprintf(f, "</title><style>%s</style></head><body>\n"
               "<input type=radio class=sh name=shade id=sh-incl checked>"
               "<input type=radio class=sh name=shade id=sh-self>\n"
               "<h1>Where the %s, line by line</h1>\n<p class=sum>", hm_style,
            p->meta.sample_bytes > 0 ? "memory grew" : "time went");
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
    if (p->meta.sample_bytes > 0)
        fprintf(f, "%" PRIu64 " bytes of resident growth (%" PRIu64 " samples of %" PRIu64 " bytes)",
                total * p->meta.sample_bytes, total, p->meta.sample_bytes);
    else
        fprintf(f, "%" PRIu64 " samples", total);
    if (p->meta.duration_s > 0)
        fprintf(f, " in %.2f s", p->meta.duration_s);
    if (p->meta.command[0]) {
        fputs(": <code>", f);
        put_html(f, p->meta.command, strnlen(p->meta.command, sizeof p->meta.command), 1000);
        fputs("</code>", f);
    }
    if (p->meta.sample_bytes > 0)
        fputs(". Self: bytes whose growth had its innermost frame at a line; inclusive: bytes "
              "with a frame at it anywhere in the stack (the page faults that made memory "
              "resident, sampled). Shares are of all bytes.</p>\n", f);
    else
        fputs(". Self: samples whose innermost frame is at a line; inclusive: samples with a "
              "frame at it anywhere in the stack. Shares are of all samples.</p>\n", f);
    fputs("<div class=bar><span>Shade lines by <label for=sh-incl title=\"samples with the line anywhere "
          "on the stack\">inclusive (total)</label> <label for=sh-self title=\"samples whose innermost "
          "frame is at the line\">self</label></span><span>Jump to <a href=\"#hot-lines\">hottest "
          "lines</a> \xc2\xb7 <a href=\"#files\">files</a></span></div>\n<main>\n", f);
}

/* The table of the hottest lines (ntop at most, of order top: each with its function and
 * its source text, read through o->source file by file) and the one of the files (in
 * order). Returns 0, or -1 out of memory. */
static int write_tables(FILE *f, const hm_t *h, const uint32_t *order, const uint32_t *top, size_t ntop,
                        uint64_t total, const out_options_t *o)
{
    char *text[HM_TOP_LINES] = { NULL };
    size_t len[HM_TOP_LINES] = { 0 }, i, k;
    int rc = 0;

    /* the lines' texts first: each file's source once, copied (a source lasts until the
     * next call) */
    for (i = 0; i < ntop && h->lines[top[i]].self > 0 && rc == 0; i++) {
        out_source_t src;
        uint32_t *own;
        const uint32_t *starts;
        size_t nstarts;
        int done = 0;
        for (k = 0; k < i; k++)
            done |= h->lines[top[k]].fileno == h->lines[top[i]].fileno;
        if (done)
            continue;
        source_get(o, h->lines[top[i]].file, &src, &own, &starts, &nstarts);
        for (k = i; k < ntop && src.problem == NULL; k++) {
            const char *t;
            size_t n;
            if (h->lines[top[k]].fileno != h->lines[top[i]].fileno ||
                (t = lines_get(src.text, starts, nstarts, h->lines[top[k]].line, 1, &n)) == NULL)
                continue;
            n = n < HM_LINE_SHOWN ? n : HM_LINE_SHOWN;
            if ((text[k] = malloc(n + 1)) == NULL) {
                rc = -1;
                break;
            }
            memcpy(text[k], t, n);
            len[k] = n;
        }
        free(own);
    }
    fputs("<h2 id=hot-lines>Hottest lines</h2>\n<table><tr><th>self</th><th>incl.</th><th>function</th>"
          "<th>source</th><th>line</th></tr>\n", f);
    for (i = 0; i < ntop && h->lines[top[i]].self > 0 && rc == 0; i++) {
        const hm_line_t *l = &h->lines[top[i]];
        fprintf(f, "<tr class=hot><td class=c>%.1f%%</td><td class=c>%.1f%%</td><td class=fn>",
                pct(l->self, total), pct(l->incl, total));
        put_htmlz(f, l->function);
        fputs("</td><td class=s>", f);
        if (text[i] != NULL)
            put_html(f, text[i], len[i], HM_LINE_SHOWN);
        fprintf(f, "</td><td class=at><a href=\"#f%u-%d\">", l->fileno, l->line);
        put_htmlz(f, l->file);
        fprintf(f, ":%d</a></td></tr>\n", l->line);
    }
    for (i = 0; i < ntop; i++)
        free(text[i]);
    if (rc != 0)
        return rc;
    fputs("</table>\n", f);
    fputs("<h2 id=files>Files</h2>\n<table><tr><th>incl.</th><th>self</th><th>file</th></tr>\n", f);
    for (i = 0; i < h->nfiles; i++) {
        const hm_file_t *fl = &h->files[order[i]];
        fprintf(f, "<tr><td class=c>%.1f%%</td><td class=c>%.1f%%</td><td><a href=\"#f%u\">",
                pct(fl->incl, total), pct(fl->self, total), order[i]);
        put_htmlz(f, fl->file);
        fputs("</a></td></tr>\n", f);
    }
    fputs("</table>\n", f);
    return 0;
}

/* The file the page opens on: the most self samples among the files whose source is
 * shown (of the HM_HOT_TRIES files of most self samples: each try reads a source), else
 * the first by inclusive share (order[0]). */
static uint32_t hottest_file(const hm_t *h, const uint32_t *order, const out_options_t *o)
{
    uint64_t below = UINT64_MAX;        /* the self samples of the file tried last */
    uint32_t last = UINT32_MAX;
    size_t i, tries;

    for (tries = 0; tries < HM_HOT_TRIES; tries++) {
        uint32_t best = UINT32_MAX;
        out_source_t src;
        uint32_t *own;
        const uint32_t *starts;
        size_t nstarts;
        /* the next file by self samples (ties by index), after the one tried last */
        for (i = 0; i < h->nfiles; i++) {
            uint64_t n = h->files[i].self;
            if (n == 0 || n > below || (n == below && i <= last))
                continue;
            if (best == UINT32_MAX || n > h->files[best].self)
                best = (uint32_t)i;
        }
        if (best == UINT32_MAX)
            break;
        source_get(o, h->files[best].file, &src, &own, &starts, &nstarts);
        free(own);
        if (src.problem == NULL)
            return best;
        below = h->files[best].self;
        last = best;
    }
    return h->nfiles ? order[0] : UINT32_MAX;
}

int out_heatmap_write(const profile_t *p, FILE *f, const out_options_t *o)
{
    hm_t h;
    uint64_t total = stk_total_samples(p->stacks);
    uint32_t *order = NULL, *top = NULL, hot;
    size_t i, ntop;
    int err = REMORA_OK;

    if (hm_count(&h, p->stacks, &order, &top))
        goto oom;
    h.unit = p->meta.sample_bytes > 0 ? p->meta.sample_bytes : 1;
    ntop = h.nlines < HM_TOP_LINES ? h.nlines : HM_TOP_LINES;
    hot = hottest_file(&h, order, o);
    write_head(f, p, total);
    if (hot != UINT32_MAX)
        write_file(f, &h, hot, o, total, 1);
    if (write_tables(f, &h, order, top, ntop, total, o) != 0)
        goto oom;
    for (i = 0; i < h.nfiles; i++)
        if (order[i] != hot)
            write_file(f, &h, order[i], o, total, 0);
    fputs("</main>\n", f);
    write_data(f, &h, order, total);
    fputs("</body></html>\n", f);
    goto out;
oom:
    errno = ENOMEM;
    err = REMORA_EIO;
out:
    hm_free(&h);
    free(order);
    free(top);
    if (err == REMORA_OK && ferror(f))
        err = REMORA_EIO;
    return err;
}
