/* formats/svg.c — a static SVG flamegraph: one self-contained file, drawn without a
 * script, no network, what people paste into an issue (py-spy's `--format flamegraph`
 * writes one).
 *
 * A small script zooms on a click in a browser (zoom_script); the file is whole without it.
 *
 * Layout: root at the bottom (as py-spy and flamegraph.pl draw it). Level 0 is "all"
 * (every sample), level 1 a box per thread ("thread NAME (TID)", as collapsed stacks begin),
 * then the frames outermost first. A box's width is its share of all samples (its
 * inclusive count: its own samples and its callees'), siblings in order of their names,
 * each a <g> holding a <title> ("function (file:line) — N samples, P%"; a memory profile's
 * "— N bytes (X MiB), P%", the header naming the bytes of resident growth a sample stands
 * for), the <rect> and a label cut to the box's width. Colours hash the frame's file (its function when it has
 * none), so one module keeps one colour from run to run; C frames (--native) are blue.
 *
 * Bounds: a frame with less than 0.1% of the samples is not drawn (nor its callees), and
 * the header says how many samples that leaves out; at most SVG_MAX_RECTS boxes, the
 * deepest levels dropped first (the header says from which level). A title's name is cut
 * at SVG_MAX_TITLE characters.
 *
 * Every name is the target's: written as XML text, '&', '<', '>', quotes as references,
 * control characters (C0, DEL, C1) as "\xNN" ("\n", "\r", "\t"), U+2028/U+2029 as
 * "\u2028"/"\u2029", U+FFFE/U+FFFF and each byte that is not part of valid UTF-8 as
 * U+FFFD: XML 1.0 allows no control character but tab and newlines, even as a reference.
 */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "remora.h"
#include "out.h"
#include "../util/util.h"

#define SVG_WIDTH 1200          /* px, the picture's width */
#define SVG_PAD 10              /* px, the margin */
#define SVG_ROW 16              /* px, a level's height (the box one less) */
#define SVG_FONT 12             /* px, monospace */
#define SVG_CHAR 7.3            /* px, a character's advance at SVG_FONT (0.6 em, rounded up) */
#define SVG_HEADER 3            /* rows of text above the boxes */
#define SVG_MIN_PER_MILLE 1     /* a frame narrower than 1/1000 of the samples is not drawn */
#define SVG_MAX_RECTS 50000     /* boxes at most: a browser still opens the file (49,002
                                 * boxes of short names: 6 MB, 2.1 s in headless Chromium) */
#define SVG_MAX_TITLE 2000      /* characters of a name in a title */

/* Click to zoom, for a browser (the picture is whole without it; viewers and GitHub
 * ignore it): a box clicked fills the width, the boxes above it in its span scaled with
 * it, the ones below it that span it (its callers) drawn across the width, faded, the
 * others hidden; "all" shows everything again. Names are only read from the titles and
 * written back as text (textContent), never parsed. Constants: svg.c's. */
static const char zoom_script[] =
    "<script type=\"text/ecmascript\"><![CDATA[\n"
    "(function () {\n"
    "  var W = 1200, PAD = 10, CH = 7.3, NS = 'http://www.w3.org/2000/svg', boxes = [];\n"
    "  var frames = document.getElementById('frames');\n"
    "  if (!frames) return;\n"
    "  var gs = frames.getElementsByTagName('g');\n"
    "  function label(b, x, w) {\n"
    "    var n = Math.floor((w - 6) / CH), cps = Array.from(b.name);\n"
    "    if (w <= 2 * CH || n < 3) { if (b.text) b.text.textContent = ''; return; }\n"
    "    if (!b.text) {\n"
    "      b.text = document.createElementNS(NS, 'text');\n"
    "      b.text.setAttribute('y', String(b.y + 12));\n"
    "      b.g.appendChild(b.text);\n"
    "    }\n"
    "    b.text.setAttribute('x', (x + 3).toFixed(3));\n"
    "    b.text.textContent = cps.length <= n ? b.name : cps.slice(0, n - 3).join('') + '...';\n"
    "  }\n"
    "  function place(b, x, w, shown, faded) {\n"
    "    b.g.style.display = shown ? '' : 'none';\n"
    "    b.g.style.opacity = faded ? '0.6' : '';\n"
    "    if (!shown) return;\n"
    "    b.r.setAttribute('x', x.toFixed(3));\n"
    "    b.r.setAttribute('width', w.toFixed(3));\n"
    "    label(b, x, w);\n"
    "  }\n"
    "  function zoom(z) {\n"
    "    var scale = (W - 2 * PAD) / z.w, e = 0.01;\n"
    "    for (var i = 0; i < boxes.length; i++) {\n"
    "      var b = boxes[i];\n"
    "      if (b.y > z.y && b.x <= z.x + e && b.x + b.w >= z.x + z.w - e)\n"
    "        place(b, PAD, W - 2 * PAD, true, b !== boxes[0]);\n"
    "      else if (b.y <= z.y && b.x >= z.x - e && b.x + b.w <= z.x + z.w + e)\n"
    "        place(b, PAD + (b.x - z.x) * scale, b.w * scale, true, false);\n"
    "      else\n"
    "        place(b, b.x, b.w, false, false);\n"
    "    }\n"
    "  }\n"
    "  for (var i = 0; i < gs.length; i++) {\n"
    "    var g = gs[i], r = g.getElementsByTagName('rect')[0];\n"
    "    var t = g.getElementsByTagName('title')[0];\n"
    "    if (!r || !t) continue;\n"
    "    var name = t.textContent, k = name.lastIndexOf(' \\u2014 ');\n"
    "    var b = { g: g, r: r, text: g.getElementsByTagName('text')[0] || null,\n"
    "              name: k >= 0 ? name.slice(0, k) : name, x: +r.getAttribute('x'),\n"
    "              w: +r.getAttribute('width'), y: +r.getAttribute('y') };\n"
    "    boxes.push(b);\n"
    "    g.style.cursor = 'pointer';\n"
    "    g.addEventListener('click', zoom.bind(null, b));\n"
    "  }\n"
    "})();\n"
    "]]></script>\n";

/* The characters svg_put writes for s[0..n), at most max of them (a "\xNN" is not
 * split), to f (NULL: only counted). Returns how many it wrote (or would). */
static size_t svg_put(FILE *f, const char *str, size_t n, size_t max)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t units = 0;

    while (n > 0) {
        size_t k = 1, u = 1;
        char esc[8];
        const char *out = NULL;

        esc[0] = '\0';
        if (*s == '&')
            out = "&amp;";
        else if (*s == '<')
            out = "&lt;";
        else if (*s == '>')
            out = "&gt;";
        else if (*s == '"')
            out = "&quot;";
        else if (*s == '\'')
            out = "&#39;";
        else if (*s == '\n')
            out = "\\n", u = 2;
        else if (*s == '\r')
            out = "\\r", u = 2;
        else if (*s == '\t')
            out = "\\t", u = 2;
        else if (*s < 0x20 || *s == 0x7f)
            snprintf(esc, sizeof esc, "\\x%02x", *s), u = 4;
        else if ((k = out_utf8_len(s, n)) == 0)
            out = "\xef\xbf\xbd", k = 1;                                /* U+FFFD */
        else if (k == 2 && s[0] == 0xc2 && s[1] < 0xa0)
            snprintf(esc, sizeof esc, "\\x%02x", s[1]), u = 4;          /* C1 */
        else if (k == 3 && s[0] == 0xe2 && s[1] == 0x80 && (s[2] == 0xa8 || s[2] == 0xa9))
            snprintf(esc, sizeof esc, "\\u%04x", s[2] == 0xa8 ? 0x2028 : 0x2029), u = 6;
        else if (k == 3 && s[0] == 0xef && s[1] == 0xbf && s[2] >= 0xbe)
            out = "\xef\xbf\xbd";                                       /* not XML */
        if (units + u > max)
            break;
        if (f != NULL) {
            if (out != NULL)
                fputs(out, f);
            else if (esc[0] != '\0')
                fputs(esc, f);
            else
                fwrite(s, 1, k, f);
        }
        units += u;
        s += k;
        n -= k;
    }
    return units;
}

/* s[0..n) cut to max characters: "..." ending it when it is longer. */
static void svg_put_cut(FILE *f, const char *s, size_t n, size_t max)
{
    if (max < 3 || svg_put(NULL, s, n, (size_t)-1) <= max) {
        svg_put(f, s, n, max);
        return;
    }
    svg_put(f, s, n, max - 3);
    fputs("...", f);
}

typedef struct svg_child {
    uint32_t node;
    const stk_frame_t *fr;
} svg_child_t;

typedef struct svg {
    const stk_table_t *t;
    FILE *f;
    uint64_t *incl;         /* a node's inclusive samples */
    uint64_t *start;        /* the samples left of it on its level */
    uint32_t *order;        /* every node, thread by thread, in pre-order */
    uint32_t *level;        /* its level: a thread's root 1, its frames 2, 3, ... */
    size_t nnodes;
    uint64_t total;         /* samples, every thread's */
    uint64_t min;           /* the fewest samples a box is drawn with */
    uint64_t unit;          /* --mode memory: the bytes a sample stands for; 0: samples */
    uint32_t cut;           /* the first level not drawn (the box cap) */
    double scale;           /* px a sample */
    int height;
    char *name;             /* scratch: a frame's name */
    size_t name_cap;
    svg_child_t *kids;      /* scratch: a node's children */
    size_t kids_cap;
} svg_t;

/* Interned strings: equal ones are one pointer, so compare those first. */
static int str_cmp(const char *a, const char *b)
{
    if (a == b)
        return 0;
    if (a == NULL || b == NULL)
        return a == NULL ? -1 : 1;
    return strcmp(a, b);
}

static int child_cmp(const void *pa, const void *pb)
{
    const stk_frame_t *a = ((const svg_child_t *)pa)->fr, *b = ((const svg_child_t *)pb)->fr;
    int c;

    if ((c = str_cmp(a->function, b->function)) != 0 || (c = str_cmp(a->file, b->file)) != 0)
        return c;
    if (a->line != b->line)
        return a->line < b->line ? -1 : 1;
    if (a->native != b->native)
        return a->native < b->native ? -1 : 1;
    if ((c = str_cmp(a->op, b->op)) != 0)
        return c;
    return a->offset < b->offset ? -1 : a->offset > b->offset;
}

/* The frame's name as collapsed stacks say it, "function (file:line) [OP@N]", into
 * s->name (its length in *len). Returns 0 or REMORA_ENOMEM. */
static int frame_name(svg_t *s, const stk_frame_t *fr, size_t *len)
{
    size_t fn = strlen(fr->function), fl = strlen(fr->file);
    size_t op = fr->op ? strlen(fr->op) : 0, need = fn + fl + op + 64, at = fn;

    if (need > s->name_cap && remora_grow((void **)&s->name, &s->name_cap, need, 1))
        return REMORA_ENOMEM;
    memcpy(s->name, fr->function, fn);
    if (fl > 0) {
        memcpy(s->name + at, " (", 2);
        at += 2;
        memcpy(s->name + at, fr->file, fl);
        at += fl;
        at += (size_t)snprintf(s->name + at, need - at, ":%d)", fr->line);
        if (fr->op != NULL) {
            memcpy(s->name + at, " [", 2);
            at += 2;
            memcpy(s->name + at, fr->op, op);
            at += op;
            at += (size_t)snprintf(s->name + at, need - at, "@%d]", fr->offset);
        }
    }
    *len = at;
    return REMORA_OK;
}

static uint32_t fnv1a(const char *s)
{
    uint32_t h = 2166136261u;

    while (*s)
        h = (h ^ (unsigned char)*s++) * 16777619u;
    return h;
}

/* n samples as the profile counts them: "N sample(s)", or in a memory profile (s->unit
 * bytes a sample) "N bytes (X MiB)", only "X MiB" when 'brief' (the header's room). */
static void put_amount(const svg_t *s, uint64_t n, int brief)
{
    static const char *const units[] = { "KiB", "MiB", "GiB", "TiB" };
    uint64_t b;
    double v;
    size_t u;

    if (s->unit == 0 || n > UINT64_MAX / s->unit) {
        fprintf(s->f, "%" PRIu64 " sample%s", n, n == 1 ? "" : "s");
        return;
    }
    b = n * s->unit;
    if (b < 1024 || !brief)
        fprintf(s->f, "%" PRIu64 " byte%s", b, b == 1 ? "" : "s");
    if (b < 1024)
        return;
    v = (double)b / 1024.0;
    for (u = 0; v >= 1024.0 && u + 1 < sizeof units / sizeof units[0]; u++)
        v /= 1024.0;
    fprintf(s->f, brief ? "%.1f %s" : " (%.1f %s)", v, units[u]);
}

/* One box: its <g>, <title>, <rect> and label. 'kind' 0 a frame, 1 a thread, 2 "all". */
static void put_box(svg_t *s, int kind, const stk_frame_t *fr, const char *name, size_t len,
                    uint64_t samples, uint64_t start, uint32_t level)
{
    double x = SVG_PAD + (double)start * s->scale, w = (double)samples * s->scale;
    int y = s->height - SVG_PAD - (int)(level + 1) * SVG_ROW;
    double share = s->total ? 100.0 * (double)samples / (double)s->total : 0.0;
    unsigned r, g, b;
    size_t fit;

    if (kind == 2) {
        r = 200, g = 200, b = 200;
    } else if (kind == 1) {
        r = 185, g = 190, b = 205;
    } else {
        uint32_t h = fnv1a(fr->file[0] ? fr->file : fr->function);
        if (fr->native)
            r = 110 + h % 50, g = 150 + (h >> 8) % 50, b = 205 + (h >> 16) % 50;
        else
            r = 205 + h % 50, g = 70 + (h >> 8) % 160, b = (h >> 16) % 55;
    }
    fputs("<g><title>", s->f);
    svg_put_cut(s->f, name, len, SVG_MAX_TITLE);
    fputs(" \xe2\x80\x94 ", s->f);
    put_amount(s, samples, 0);
    fprintf(s->f, ", %.2f%%</title>", share);
    fprintf(s->f, "<rect x=\"%.3f\" y=\"%d\" width=\"%.3f\" height=\"%d\" fill=\"rgb(%u,%u,%u)\"/>",
            x, y, w, SVG_ROW - 1, r, g, b);
    fit = w > 2 * SVG_CHAR ? (size_t)((w - 6) / SVG_CHAR) : 0;
    if (fit >= 3) {
        fprintf(s->f, "<text x=\"%.3f\" y=\"%d\">", x + 3, y + SVG_ROW - 4);
        svg_put_cut(s->f, name, len, fit);
        fputs("</text>", s->f);
    }
    fputs("</g>\n", s->f);
}

/* The order and levels of every node, the inclusive counts and the total. */
static void walk(svg_t *s)
{
    size_t i, n = 0, nth = stk_nthreads(s->t);
    int k;

    for (i = 0; i < nth; i++) {
        uint32_t root = stk_thread_at(s->t, i)->root, node = root, level = 1;
        while (node != STK_NONE && n < s->nnodes) {
            const stk_node_t *nd = stk_node_at(s->t, node);
            s->order[n++] = node;
            s->level[node] = level;
            s->incl[node] = nd->self;
            if (nd->first_child != STK_NONE) {
                node = nd->first_child;
                level++;
                continue;
            }
            /* up to the nearest ancestor (within this thread) with a next sibling */
            for (k = 0; node != root; ) {
                nd = stk_node_at(s->t, node);
                if (nd->next_sibling != STK_NONE) {
                    node = nd->next_sibling;
                    k = 1;
                    break;
                }
                node = nd->parent;
                level--;
            }
            if (!k)
                node = STK_NONE;
        }
    }
    /* reverse pre-order: every node's descendants before it */
    s->total = 0;
    while (n-- > 0) {
        uint32_t node = s->order[n], parent = stk_node_at(s->t, node)->parent;
        if (parent != STK_NONE)
            s->incl[parent] += s->incl[node];
        else
            s->total += s->incl[node];
    }
}

/* How many boxes each level has; sets s->cut and returns the samples in frames too
 * narrow to draw, or UINT64_MAX when out of memory. */
static uint64_t count_levels(svg_t *s)
{
    size_t i, maxlevel = 1, rects = 1;
    uint64_t narrow = 0;
    size_t *per;

    for (i = 0; i < s->nnodes; i++)
        if (s->level[i] > maxlevel)
            maxlevel = s->level[i];
    per = calloc(maxlevel + 1, sizeof *per);
    if (per == NULL)
        return UINT64_MAX;
    for (i = 0; i < s->nnodes; i++) {
        uint32_t parent = stk_node_at(s->t, (uint32_t)i)->parent;
        int parent_drawn = parent == STK_NONE || s->incl[parent] >= s->min;
        if (s->incl[i] >= s->min)
            per[s->level[i]]++;
        else if (parent_drawn)
            narrow += s->incl[i];
    }
    s->cut = UINT32_MAX;
    for (i = 1; i <= maxlevel; i++) {
        if (rects + per[i] > SVG_MAX_RECTS) {
            s->cut = (uint32_t)i;
            break;
        }
        rects += per[i];
    }
    free(per);
    return narrow;
}

/* Header text: a line at row 'row' (from 0). */
static void header_open(svg_t *s, int row)
{
    fprintf(s->f, "<text x=\"%d\" y=\"%d\">", SVG_PAD, SVG_PAD + SVG_FONT + row * SVG_ROW);
}

static void write_header(svg_t *s, const profile_meta_t *m, uint64_t narrow)
{
    size_t cmd = strnlen(m->command, sizeof m->command);
    size_t room = (size_t)((SVG_WIDTH - 2 * SVG_PAD) / SVG_CHAR);
    const char *sep = ", ";
    char mode[sizeof m->mode + 1], engine[sizeof m->engine + 1], python[sizeof m->python + 1];

    snprintf(mode, sizeof mode, "%.*s", (int)sizeof m->mode, m->mode);
    snprintf(engine, sizeof engine, "%.*s", (int)sizeof m->engine, m->engine);
    snprintf(python, sizeof python, "%.*s", (int)sizeof m->python, m->python);
    header_open(s, 0);
    fputs("remora flamegraph", s->f);
    if (m->pid > 0)
        fprintf(s->f, " of pid %ld", (long)m->pid);
    if (python[0]) {
        fputs(", Python ", s->f);
        svg_put(s->f, python, strlen(python), 32);
    }
    if (cmd > 0) {
        fputs(": ", s->f);
        svg_put_cut(s->f, m->command, cmd, room > 60 ? room - 60 : 3);
    }
    fputs("</text>\n", s->f);

    header_open(s, 1);
    /* the counts' words (docs/cli.md, "Counts"); the rest of the full line (the rate and
     * time) stands in the fields after it */
    fprintf(s->f, "%" PRIu64 " thread sample%s written", s->total, s->total == 1 ? "" : "s");
    if (m->counted)
        fprintf(s->f, "%s%" PRIu64 " round%s taken of %" PRIu64 " asked%s%" PRIu64
                " left out as idle%s%" PRIu64 " partial", sep, m->samples,
                m->samples == 1 ? "" : "s", out_rounds_asked(m), sep, m->idle, sep, m->partial);
    if (m->duration_s > 0 && isfinite(m->duration_s))
        fprintf(s->f, "%sduration %.2f s", sep, m->duration_s);
    if (m->rate_hz > 0 && isfinite(m->rate_hz))
        fprintf(s->f, "%srate %g Hz", sep, m->rate_hz);
    if (engine[0]) {
        fprintf(s->f, "%sengine ", sep);
        svg_put(s->f, engine, strlen(engine), 16);
    }
    if (mode[0]) {
        fprintf(s->f, "%smode ", sep);
        svg_put(s->f, mode, strlen(mode), 16);
    }
    if (m->errors > 0)
        fprintf(s->f, "%s%" PRIu64 " error%s", sep, m->errors, m->errors == 1 ? "" : "s");
    fputs("</text>\n", s->f);

    header_open(s, 2);
    if (s->total == 0) {
        fputs("no samples</text>\n", s->f);
        return;
    }
    if (s->unit > 0) {
        /* --mode memory: a sample is the growth its page faults made resident */
        put_amount(s, s->total, 1);
        fputs(" of resident growth (", s->f);
        put_amount(s, 1, 1);
        fputs(" a sample), width = share of the bytes; ", s->f);
        put_amount(s, narrow, 1);
        fputs(" in frames under 0.1%, not drawn; click to zoom", s->f);
    } else {
        fprintf(s->f, "root at the bottom, width = share of samples; %" PRIu64
                      " samples in frames too narrow to draw (under 0.1%%); in a browser, "
                      "click to zoom", narrow);
    }
    fputs("</text>\n", s->f);
    if (s->cut != UINT32_MAX) {
        /* the cap was met: levels from s->cut (frames from depth s->cut - 1) not drawn */
        header_open(s, 3);
        fprintf(s->f, "frames from depth %u on not drawn: at most %d boxes</text>\n",
                (unsigned)s->cut - 1, SVG_MAX_RECTS);
    }
}

/* Draws the drawn children of each drawn node, in pre-order. Returns 0 or REMORA_ENOMEM. */
static int draw(svg_t *s)
{
    size_t i, nth = stk_nthreads(s->t);
    uint64_t at = 0;
    int err;

    for (i = 0; i < nth; i++) {
        const stk_thread_t *th = stk_thread_at(s->t, i);
        s->start[th->root] = at;
        at += s->incl[th->root];
    }
    for (i = 0; i < s->nnodes; i++) {
        uint32_t node = s->order[i], c;
        const stk_node_t *nd = stk_node_at(s->t, node);
        size_t nk = 0, k, len;
        uint64_t x;

        if (s->incl[node] < s->min || s->level[node] >= s->cut)
            continue;
        if (nd->parent == STK_NONE) {
            const stk_thread_t *th = NULL;
            size_t j, nl;
            for (j = 0; j < nth && th == NULL; j++)
                if (stk_thread_at(s->t, j)->root == node)
                    th = stk_thread_at(s->t, j);
            nl = strlen(th->name[0] ? th->name : "?") + 48;
            if (nl > s->name_cap && remora_grow((void **)&s->name, &s->name_cap, nl, 1))
                return REMORA_ENOMEM;
            len = (size_t)snprintf(s->name, nl, "thread %s (%ld)", th->name[0] ? th->name : "?",
                                   (long)th->tid);
            put_box(s, 1, NULL, s->name, len, s->incl[node], s->start[node], 1);
        } else {
            const stk_frame_t *fr = stk_frame_at(s->t, nd->frame);
            if ((err = frame_name(s, fr, &len)) != 0)
                return err;
            put_box(s, 0, fr, s->name, len, s->incl[node], s->start[node], s->level[node]);
        }
        for (c = nd->first_child; c != STK_NONE; c = stk_node_at(s->t, c)->next_sibling) {
            if (nk == s->kids_cap &&
                remora_grow((void **)&s->kids, &s->kids_cap, nk + 1, sizeof *s->kids))
                return REMORA_ENOMEM;
            s->kids[nk].node = c;
            s->kids[nk++].fr = stk_frame_at(s->t, stk_node_at(s->t, c)->frame);
        }
        qsort(s->kids, nk, sizeof *s->kids, child_cmp);
        for (k = 0, x = s->start[node]; k < nk; k++) {
            s->start[s->kids[k].node] = x;
            x += s->incl[s->kids[k].node];
        }
    }
    return REMORA_OK;
}

int out_svg_write(const profile_t *p, FILE *f, const out_options_t *o)
{
    svg_t s;
    uint64_t narrow = 0;
    uint32_t levels;
    size_t i;
    int err = REMORA_ENOMEM, rows;

    (void)o;
    memset(&s, 0, sizeof s);
    s.t = p->stacks;
    s.f = f;
    s.unit = p->meta.sample_bytes;
    s.nnodes = stk_nnodes(s.t);
    s.incl = calloc(s.nnodes + 1, sizeof *s.incl);
    s.start = calloc(s.nnodes + 1, sizeof *s.start);
    s.order = calloc(s.nnodes + 1, sizeof *s.order);
    s.level = calloc(s.nnodes + 1, sizeof *s.level);
    if (s.incl == NULL || s.start == NULL || s.order == NULL || s.level == NULL)
        goto error;
    walk(&s);
    s.min = s.total / 1000 * SVG_MIN_PER_MILLE + (s.total % 1000 != 0);
    if (s.min == 0)
        s.min = 1;
    narrow = count_levels(&s);
    if (narrow == UINT64_MAX)
        goto error;
    /* the deepest level drawn */
    levels = 0;
    for (i = 0; i < s.nnodes; i++)
        if (s.incl[i] >= s.min && s.level[i] < s.cut && s.level[i] > levels)
            levels = s.level[i];
    rows = SVG_HEADER + (s.cut != UINT32_MAX);
    s.height = 2 * SVG_PAD + rows * SVG_ROW + (s.total ? (int)(levels + 1) * SVG_ROW : 0);
    s.scale = s.total ? (double)(SVG_WIDTH - 2 * SVG_PAD) / (double)s.total : 0.0;

    fputs("<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n", f);
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" "
               "height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"monospace\" "
               "font-size=\"%d\">\n",
            SVG_WIDTH, s.height, SVG_WIDTH, s.height, SVG_FONT);
    fprintf(f, "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n",
            SVG_WIDTH, s.height);
    write_header(&s, &p->meta, narrow);
    if (s.total > 0) {
        fputs("<g id=\"frames\">\n", f);
        put_box(&s, 2, NULL, "all", 3, s.total, 0, 0);
        if ((err = draw(&s)) != 0)
            goto error;
        fputs("</g>\n", f);
        fputs(zoom_script, f);
    }
    fputs("</svg>\n", f);
    err = ferror(f) ? REMORA_EIO : REMORA_OK;
error:
    free(s.incl);
    free(s.start);
    free(s.order);
    free(s.level);
    free(s.name);
    free(s.kids);
    return err;
}
