/* cli/top_draw.c — the frames `remora top` draws: the header (the target, the counts,
 * the sort, filter and thread chosen), a row per function with its shares and times, the
 * selected row's instructions and source line; on a terminal each row's function, file
 * and line fitted to its width (the path cut from the left, so the file's name and line
 * stay), or printed whole a frame a second. Names are escaped by out_text_str(). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "remora.h"
#include "cli.h"
#include "top.h"
#include "../formats/out.h"
#include "../proc/proc.h"
#include "../sample/sampler.h"

static const char *const sort_names[SORT_N] = { "%Own", "%Total", "OwnTime", "TotalTime" };

static int cmp_tid(const void *a, const void *b)
{
    pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;

    return (x > y) - (x < y);
}

/* Threads of the target seen: the table's threads by tid (a thread renamed while sampled,
 * or with a state in two interpreters, is several threads of the table, one of the
 * target's). */
static size_t seen_threads(const stk_table_t *t)
{
    size_t n = stk_nthreads(t), i, k = 0;
    pid_t *tids = malloc(n * sizeof *tids + 1);

    if (tids == NULL)
        return n;
    for (i = 0; i < n; i++)
        tids[i] = stk_thread_at(t, i)->tid;
    qsort(tids, n, sizeof *tids, cmp_tid);
    for (i = 0; i < n; i++)
        k += i == 0 || tids[i] != tids[i - 1];
    free(tids);
    return k;
}

/* The name of the table's thread 'tid' (the first of its names: a thread renamed while
 * sampled is several threads of the table), or "". */
static const char *thread_name(const stk_table_t *t, pid_t tid)
{
    size_t n = stk_nthreads(t), i;

    for (i = 0; i < n; i++)
        if (stk_thread_at(t, i)->tid == tid && stk_thread_at(t, i)->name != NULL)
            return stk_thread_at(t, i)->name;
    return "";
}

/* " NAME P%" of a share of the window's thread samples looked at. */
static void put_share(FILE *f, const char *name, uint64_t part, uint64_t whole)
{
    fprintf(f, "  %s %.1f%%", name, out_share(part, whole));
}

/* The header: the target; the run's counts in the words of docs/cli.md's "Counts" (time
 * since the start, nothing of top pauses: p pauses the screen only), the engine; what the
 * threads were doing over the view's interval, as shares of the thread samples looked at
 * (written or left out); the view chosen. */
static void draw_header(const top_t *tp, FILE *f)
{
    const sampler_stats_t *st = sampler_stats(tp->s);
    const sampler_stats_t *w = &tp->win;
    double secs = (double)(sampler_now_ns() - st->start_ns) / 1e9;
    uint64_t written = st->samples + st->task_waiting;
    uint64_t asked = secs > 0 ? (uint64_t)(tp->a->rate * secs + 0.5) : 0;

    fprintf(f, "remora top  pid %d  Python %s  %s  ", (int)tp->a->pid, tp->python,
            cli_mode_name(tp->a->mode));
    out_text_str(f, tp->command, 0);
    fprintf(f, "\n%.1f s  %llu %s taken of %llu asked (%.0f Hz of %.0f Hz asked)  "
            "%llu thread %s written  ", secs, (unsigned long long)st->rounds,
            out_plural(st->rounds, "round", "rounds"), (unsigned long long)asked,
            secs > 0 ? (double)st->rounds / secs : 0.0, tp->a->rate,
            (unsigned long long)written, out_plural(written, "sample", "samples"));
    if (tp->a->idle)
        fputs("idle kept (--idle)", f);
    else
        fprintf(f, "%llu left out as idle", (unsigned long long)st->idle);
    fprintf(f, "  %llu %s (%.2f%%)  %zu %s  engine %s\n", (unsigned long long)st->errors,
            out_plural(st->errors, "error", "errors"), out_share(st->errors, written),
            seen_threads(tp->table), out_plural(seen_threads(tp->table), "thread", "threads"),
            tp->engine ? tp->engine : "user");
    /* the window's shares, of every thread sample looked at (an idle one too) */
    fprintf(f, "%s:", tp->title);
    put_share(f, "GIL held", w->on_gil, w->looked);
    if (tp->gil_wait_known)
        put_share(f, "waiting for GIL", w->gil_wait, w->looked);
    else
        fputs("  waiting for GIL n/a (3.15+)", f);
    if (w->exc_known > 0)
        put_share(f, "exception", w->exc, w->exc_known);
    else
        fputs("  exception n/a", f);
    put_share(f, "GC", w->in_gc, w->looked);
    if (tp->a->idle)
        fputs("  idle kept", f);
    else
        put_share(f, "idle", w->idle, w->looked);
    fprintf(f, "  of %llu thread %s looked at\n", (unsigned long long)w->looked,
            out_plural(w->looked, "sample", "samples"));
    fprintf(f, "%s, sorted by %s", tp->title, sort_names[tp->sort]);
    if (tp->tid != 0) {
        /* the thread's name is the target's: escaped */
        fputs("  [thread ", f);
        out_text_str(f, thread_name(tp->table, tp->tid), 0);
        fprintf(f, " (%d)]", (int)tp->tid);
    }
    if (tp->filter[0] != '\0') {
        fputs("  [filter: ", f);
        out_text_str(f, tp->filter, 0);
        fputc(']', f);
    }
    if (tp->base != NULL)
        fputs("  [times since reset]", f);
    if (tp->paused)
        fputs("  [paused]", f);
    fputs(tp->keys ? "  (keys: 1-4 sort, / filter, p pause, r reset, t thread, j/k select, "
          "q quits)\n" : "\n", f);
    /* --mode memory: shares of the bytes sampled, and the bytes themselves */
    fprintf(f, "%8s %8s %9s %10s  %s\n", "%Own", "%Total", tp->unit ? "Own" : "OwnTime",
            tp->unit ? "Total" : "TotalTime", "Function (file:line)");
}

#define TOP_ROW_PREFIX 40        /* the columns before a row's function: "%7.2f%% %7.2f%% ..." */
#define TOP_ELLIPSIS "\xe2\x80\xa6"    /* U+2026, one column */

/* Columns of s[0..n): UTF-8 lead bytes (a wide character counts one, as top_paint() does). */
static size_t ncols(const char *s, size_t n)
{
    size_t i, c = 0;

    for (i = 0; i < n; i++)
        c += ((unsigned char)s[i] & 0xc0) != 0x80;
    return c;
}

/* The byte offset in s[0..n) where its last 'keep' columns start. */
static size_t last_cols(const char *s, size_t n, size_t keep)
{
    size_t i = n, c = 0;

    while (i > 0 && c < keep) {
        i--;
        c += ((unsigned char)s[i] & 0xc0) != 0x80;
    }
    while (i < n && ((unsigned char)s[i] & 0xc0) == 0x80)
        i++;
    return i;
}

/* The byte length of s's first 'keep' columns. */
static size_t first_cols(const char *s, size_t n, size_t keep)
{
    size_t i = 0, c = 0;

    while (i < n && (c < keep || ((unsigned char)s[i] & 0xc0) == 0x80)) {
        c += ((unsigned char)s[i] & 0xc0) != 0x80;
        i++;
    }
    return i;
}

#define TOP_FILE_MIN 16          /* columns of a path's end kept before a function is cut */

/* Where the last 'keep' columns of the path p[0..n) start: at the first '/' in them if
 * there is one ("/threading.py", not "ng/threading.py"). */
static size_t path_end(const char *p, size_t n, size_t keep)
{
    size_t start = last_cols(p, n, keep);
    const char *slash = memchr(p + start, '/', n - start);

    return slash != NULL ? (size_t)(slash - p) : start;
}

/* "function (file:line)" in at most 'room' columns, names escaped (out_text_str): what
 * does not fit goes from the left of the path ("...lib/python3.12/threading.py:1010",
 * "...module_with_long_name.py:5"), so the line number and the file's name stay; when
 * fewer than TOP_FILE_MIN columns would be left for the path, the function is cut at its
 * end instead. Returns 0 or REMORA_ENOMEM. */
static int fit_frame(FILE *f, const char *function, const char *file, int line, size_t room)
{
    char *fn = NULL, *fi = NULL, tail[32];
    size_t fnlen = 0, filen = 0, fnc, fic, tailc, start, room_all = room;
    const char *slash;
    FILE *m;

    if ((m = open_memstream(&fn, &fnlen)) == NULL)
        return REMORA_ENOMEM;
    out_text_str(m, function, 0);
    if (fclose(m) != 0)
        return REMORA_ENOMEM;
    if (file != NULL && file[0] != '\0') {
        if ((m = open_memstream(&fi, &filen)) == NULL) {
            free(fn);
            return REMORA_ENOMEM;
        }
        out_text_str(m, file, 0);
        if (fclose(m) != 0) {
            free(fn);
            return REMORA_ENOMEM;
        }
    }
    snprintf(tail, sizeof tail, ":%d)", line);
    fnc = ncols(fn, fnlen);
    fic = ncols(fi ? fi : "", filen);
    tailc = strlen(tail);
    if (fi == NULL || fnc + 2 + fic + tailc <= room) {
        fputs(fn, f);                       /* fits, or no file: top_paint() cuts a long name */
        if (fi != NULL)
            fprintf(f, " (%s%s", fi, tail);
        goto done;
    }
    room = room > fnc + 3 + tailc ? room - fnc - 3 - tailc : 0;    /* for the path */
    slash = memrchr(fi, '/', filen);
    if (room >= TOP_FILE_MIN ||
        room >= ncols(slash ? slash : fi, filen - (size_t)(slash ? slash - fi : 0))) {
        start = path_end(fi, filen, room);
        fprintf(f, "%s (" TOP_ELLIPSIS "%s%s", fn, fi + start, tail);
    } else {
        /* the function's start, then " (...end of the path:line)" */
        size_t right, keep;
        start = path_end(fi, filen, TOP_FILE_MIN);
        right = 2 + 1 + ncols(fi + start, filen - start) + tailc;
        keep = room_all > right + 1 ? room_all - right - 1 : 0;
        fwrite(fn, 1, first_cols(fn, fnlen, keep), f);
        fprintf(f, TOP_ELLIPSIS " (" TOP_ELLIPSIS "%s%s", fi + start, tail);
    }
done:
    free(fn);
    free(fi);
    return REMORA_OK;
}

#define TOP_OPS 4               /* --opcodes: instructions named for the selected row */

/* --opcodes: the selected function's instructions its own samples were at, most first,
 * over the whole run (or the thread shown), as a line "  OP 41.2%  OP 20.0% ...". */
static void draw_ops(const top_t *tp, FILE *f, const stk_fn_row_t *r)
{
    const stk_table_t *t = tp->table;
    size_t nn = stk_nnodes(t), i, k, nbest = 0;
    struct { const char *op; uint64_t n; } best[TOP_OPS * 4];
    uint64_t all = 0;

    for (i = 0; i < nn; i++) {
        const stk_node_t *nd = stk_node_at(t, (uint32_t)i);
        const stk_frame_t *fr;
        if (nd->self == 0 || nd->frame == STK_NONE)
            continue;
        fr = stk_frame_at(t, nd->frame);
        if (fr->op == NULL || fr->function != r->function || fr->file != r->file)
            continue;
        all += nd->self;
        for (k = 0; k < nbest && best[k].op != fr->op; k++)
            ;
        if (k == nbest) {
            if (nbest == sizeof best / sizeof best[0])
                continue;           /* more kinds than shown: the first ones seen count */
            best[nbest].op = fr->op;
            best[nbest++].n = 0;
        }
        best[k].n += nd->self;
    }
    if (all == 0)
        return;
    fputs("instructions:", f);
    for (k = 0; k < TOP_OPS && k < nbest; k++) {
        size_t m = k, j;
        for (j = k + 1; j < nbest; j++)
            if (best[j].n > best[m].n)
                m = j;
        if (m != k) {
            const char *o = best[k].op;
            uint64_t n = best[k].n;
            best[k] = best[m];
            best[m].op = o;
            best[m].n = n;
        }
        fprintf(f, "  %s %.1f%%", best[k].op, 100.0 * (double)best[k].n / (double)all);
    }
    fputc('\n', f);
}

/* The last line on a terminal: the filter being typed, or the selected row's source line
 * as the target's file has it (read once per file, proc/source.c). */
static void draw_footer(top_t *tp, FILE *f, const stk_fn_row_t *r)
{
    size_t len = 0;
    const char *line = NULL;
    char buf[512];

    if (tp->typing_on) {
        fputs("\nfilter (Enter applies, Esc cancels): ", f);
        fwrite(tp->typing, 1, tp->ntyping, f);
        fputs("_\n", f);
        return;
    }
    if (r == NULL || r->file == NULL || r->file[0] == '\0')
        return;
    fputs("\n", f);
    if (tp->a->opcodes)
        draw_ops(tp, f, r);
    if (tp->src_file != r->file) {
        tp->src_file = NULL;
        tp->src = NULL;
        if (tp->src_cache == NULL && (tp->src_cache = proc_src_cache_new(tp->p)) == NULL)
            return;
        tp->src = proc_src_cache_get(tp->src_cache, r->file);
        if (tp->src != NULL && tp->src->state == PROC_SRC_OVER_BOUND) {
            /* a long run's files past the bound: the cache starts again */
            proc_src_cache_free(tp->src_cache);
            if ((tp->src_cache = proc_src_cache_new(tp->p)) == NULL)
                return;
            tp->src = proc_src_cache_get(tp->src_cache, r->file);
        }
        if (tp->src == NULL)
            return;
        tp->src_file = r->file;
    }
    line = proc_src_line(tp->src, r->hot_line, &len);
    out_text_frame(f, r->function, r->file, r->hot_line);
    if (line == NULL) {
        fprintf(f, ": source %s\n", tp->src->state == PROC_SRC_OK ? "has no such line" :
                proc_src_state_str(tp->src->state));
        return;
    }
    if (len >= sizeof buf)
        len = sizeof buf - 1;
    memcpy(buf, line, len);
    buf[len] = '\0';
    fputs(":  ", f);
    out_text_str(f, buf, 0);
    fputc('\n', f);
}

/* Draws the header and up to 'limit' rows into tp->buf; with width > 0 each row's
 * function, file and line are fitted to it (fit_frame). */
static int draw(top_t *tp, size_t limit, size_t width)
{
    const sampler_stats_t *st = sampler_stats(tp->s);
    double secs = (double)(sampler_now_ns() - st->start_ns) / 1e9;
    double per_round = st->rounds ? secs / (double)st->rounds : 0.0;   /* seconds a sample stands for */
    uint64_t shares_of = tp->unit ? tp->view_samples : tp->view_rounds;
    double pct = shares_of ? 100.0 / (double)shares_of : 0.0;
    double mib = (double)tp->unit / (1024.0 * 1024.0);
    const stk_fn_row_t *selected = NULL;
    FILE *f;
    size_t i, k = 0;

    free(tp->buf);
    tp->buf = NULL;
    f = open_memstream(&tp->buf, &tp->buflen);
    if (f == NULL)
        return REMORA_ENOMEM;
    draw_header(tp, f);
    for (i = 0; i < tp->nrows && k < limit; i++) {
        const view_row_t *v = &tp->view[i];
        const stk_fn_row_t *r = &tp->rows[v->row];
        if (v->self == 0 && v->total == 0 && top_since(tp, v->row, 1) == 0)
            break;                  /* sorted: the rest have nothing either */
        if (!top_shown(tp, r))
            continue;
        if (width > 0 && k == tp->sel) {
            fputs("\033[7m", f);       /* the selected row, in reverse video */
            selected = r;
        }
        if (tp->unit)
            fprintf(f, "%7.2f%% %7.2f%% %7.1fMi %8.1fMi  ", pct * (double)v->self, pct * (double)v->total,
                    mib * (double)top_since(tp, v->row, 0), mib * (double)top_since(tp, v->row, 1));
        else
            fprintf(f, "%7.2f%% %7.2f%% %8.2fs %9.2fs  ", pct * (double)v->self, pct * (double)v->total,
                    per_round * (double)top_since(tp, v->row, 0), per_round * (double)top_since(tp, v->row, 1));
        if (width == 0)
            out_text_frame(f, r->function, r->file, r->hot_line);
        else if (fit_frame(f, r->function, r->file, r->hot_line,
                           width > TOP_ROW_PREFIX ? width - TOP_ROW_PREFIX : 1)) {
            fclose(f);
            return REMORA_ENOMEM;
        }
        fputs(width > 0 && k == tp->sel ? "\033[0m\n" : "\n", f);
        k++;
    }
    if (width > 0 && k > 0 && tp->sel >= k)
        tp->sel = k - 1;            /* fewer rows now: the last is selected next time */
    if (width > 0)
        draw_footer(tp, f, selected);
    if (fclose(f) != 0)
        return REMORA_ENOMEM;
    return REMORA_OK;
}

static void screen_size(int *rows, int *cols)
{
    struct winsize ws;

    *rows = 24;
    *cols = 80;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0 && ws.ws_col > 0) {
        *rows = ws.ws_row;
        *cols = ws.ws_col;
    }
}

/* The frame on the terminal: from the top left, each line cut to the width (names are
 * escaped, so a character is a column but for wide ones), the rest of the screen cleared. */
void top_paint(top_t *tp)
{
    int rows, cols, y = 0;
    const char *line;

    screen_size(&rows, &cols);
    if (draw(tp, rows > 8 ? (size_t)(rows - 8) : 1, (size_t)cols))
        return;
    line = tp->buf;
    fputs("\033[H", stdout);
    while (line != NULL && *line != '\0' && y < rows - 1) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line), k, col = 0;
        for (k = 0; k < len; k++) {
            if (line[k] == '\033') {  /* an escape sequence (ours: CSI ... letter): no column */
                while (k + 1 < len && !((line[k + 1] >= 'A' && line[k + 1] <= 'Z') ||
                                        (line[k + 1] >= 'a' && line[k + 1] <= 'z')))
                    k++;
                k += k + 1 < len;
                continue;
            }
            if (((unsigned char)line[k] & 0xc0) != 0x80 && col++ == (size_t)cols)
                break;
        }
        fwrite(line, 1, k, stdout);
        fputs("\033[0m\033[K\n", stdout);     /* a reverse-video row cut short ends here */
        y++;
        line = end ? end + 1 : NULL;
    }
    fputs("\033[J", stdout);
    fflush(stdout);
}

void top_print_frame(top_t *tp, size_t limit)
{
    if (draw(tp, limit, 0) == REMORA_OK) {
        fputs(tp->buf, stdout);
        fputc('\n', stdout);
        fflush(stdout);
    }
}

