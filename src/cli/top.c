/* cli/top.c — `remora top`: a live table of the functions a process spends its time in,
 * redrawn every second. On a terminal it takes the screen (the alternate screen, so the
 * shell's is left as it was) and reads keys; otherwise it prints one table a second, like
 * `top -b`. Either way, when it ends (q, Ctrl-C, -d, the target exiting) the table of the
 * whole run is printed on stdout: nothing sampled is lost with the screen.
 *
 * Columns, as py-spy's: %Own and %Total over the last second, as a share of the rounds
 * taken (a function running on two threads the whole second shows 200%), and OwnTime and
 * TotalTime in seconds since the start. Names are escaped by out_text_str(), lines cut to
 * the terminal's width.
 *
 * Keys (on a terminal): 1-4 sort by a column; / types a filter (Enter applies it, Esc
 * cancels; rows whose function or file contains it, any case); p pauses the screen (the
 * sampling goes on); r resets OwnTime and TotalTime to count from now; t shows one thread
 * after another, then all again; j/k or the arrows select a row, whose source line (read
 * as the target sees its file) is shown at the bottom; q quits. The table printed at the
 * end is always the whole run's, of every thread. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "remora.h"
#include "cli.h"
#include "../formats/out.h"
#include "../proc/proc.h"
#include "../sample/sampler.h"
#include "../kern/kern.h"
#include "../unwind/unwind.h"
#include "../util/util.h"

#define TOP_REFRESH_NS 950000000        /* the sampler calls back every 0.5 s: redraw every 1 s */
#define TOP_BATCH_ROWS 20

static volatile sig_atomic_t stop_flag;

static void on_signal(int sig)
{
    (void)sig;
    stop_flag = 1;
}

enum { SORT_OWN, SORT_TOTAL, SORT_OWNTIME, SORT_TOTALTIME, SORT_N };
static const char *const sort_names[SORT_N] = { "%Own", "%Total", "OwnTime", "TotalTime" };

typedef struct view_row {
    uint32_t row;               /* index into top.rows */
    uint64_t self, total;       /* samples in the interval shown */
} view_row_t;

typedef struct top {
    const cli_sampling_t *a;
    sampler_t *s;
    stk_table_t *table;
    const char *python;
    char command[512];
    int tty, keys, sort;
    struct termios saved;
    int64_t last_ns;            /* the last refresh */
    uint64_t last_rounds;
    stk_fn_row_t *rows;         /* every function's totals since the start, at the last refresh */
    size_t nrows;
    view_row_t *view;
    uint64_t view_rounds;       /* rounds the view's interval took */
    const char *title;          /* "last second" or "whole run" */
    char *buf;                  /* the frame being drawn */
    size_t buflen;
    /* what the keys chose */
    int paused;                 /* p: the screen is not redrawn each second */
    char filter[64];            /* /: rows whose function or file contain it ("" = all) */
    char typing[64];            /* the filter being typed, while typing_on */
    size_t ntyping;
    int typing_on;
    int esc;                    /* bytes of an escape sequence seen (arrows: ESC [ A/B) */
    pid_t tid;                  /* t: one thread's samples (0 = every thread's) */
    stk_fn_row_t *base;         /* r: the totals at the reset, subtracted (NULL = none) */
    size_t nbase;
    size_t sel;                 /* the selected row among those shown */
    proc_t *p;                  /* the target, for the selected row's source line */
    proc_src_t src;             /* the file of the last source line shown */
    const char *src_file;       /* its name (interned by the table), NULL = none read */
} top_t;

static const cli_opt_t top_opts[] = {
    CLI_SAMPLING_OPTS,
    { 0 }
};

static const char top_usage[] = "remora top (-p PID | -- CMD ARGS...) [options]";

/* Returns 0, 1 after --help (printed), or -1 after one line. */
static int parse_top(int argc, char **argv, cli_sampling_t *a)
{
    int i;

    cli_sampling_init(a);
    for (i = 1; i < argc; i++) {
        const char *flag, *v;
        int id = cli_opt_next("top", top_opts, argc, argv, &i, &flag, &v), took;
        if (id == CLI_ARG_BAD)
            return -1;
        if (id == CLI_ARG_WORD) {
            cli_error("top: unexpected argument '%s'; see 'remora top --help' for the options",
                      flag);
            return -1;
        }
        if (id == CLI_O_HELP) {
            cli_opt_help(stdout, top_usage,
                         "a live table of the functions a process spends its time in\n"
                         "keys: 1-4 sort, / filter, p pause, r reset, t thread, j/k select, "
                         "q quits", top_opts);
            cli_modes_help();
            return 1;
        }
        took = cli_sampling_take("top", id, flag, v, argc, argv, &i, a);
        if (took < 0)
            return -1;
    }
    if (a->limit == 0)
        a->limit = TOP_BATCH_ROWS;
    return cli_sampling_check("top", a);
}

/* --- the model: last second's deltas over every function's totals -------------------- */

/* A row's samples since the start or the last reset (r): own (self) or total. */
static uint64_t since(const top_t *tp, uint32_t row, int total)
{
    const stk_fn_row_t *r = &tp->rows[row], *b = row < tp->nbase ? &tp->base[row] : NULL;

    if (total)
        return r->total - (b && b->total <= r->total ? b->total : 0);
    return r->self - (b && b->self <= r->self ? b->self : 0);
}

static uint64_t sort_key(const top_t *tp, const view_row_t *v, int which)
{
    switch (which) {
    case SORT_OWN: return v->self;
    case SORT_TOTAL: return v->total;
    case SORT_OWNTIME: return since(tp, v->row, 0);
    default: return since(tp, v->row, 1);
    }
}

/* Is the row shown under the filter? */
static int shown(const top_t *tp, const stk_fn_row_t *r)
{
    return tp->filter[0] == '\0' || strcasestr(r->function, tp->filter) != NULL ||
           (r->file != NULL && strcasestr(r->file, tp->filter) != NULL);
}

static const top_t *sorting;    /* qsort has no context argument in C11 */

static int by_key(const void *pa, const void *pb)
{
    const view_row_t *x = pa, *y = pb;
    int k;

    for (k = 0; k < SORT_N; k++) {
        /* the chosen column first, then the others in order */
        int which = k == 0 ? sorting->sort : (k <= sorting->sort ? k - 1 : k);
        uint64_t a = sort_key(sorting, x, which), b = sort_key(sorting, y, which);
        if (a != b)
            return a < b ? 1 : -1;
    }
    return strcmp(sorting->rows[x->row].function, sorting->rows[y->row].function);
}

static void sort_view(top_t *tp)
{
    sorting = tp;
    qsort(tp->view, tp->nrows, sizeof *tp->view, by_key);
    sorting = NULL;
}

/* New totals from the table; the view is what changed since the last refresh (or, with
 * whole != 0, everything since the start). Returns 0 or REMORA_ENOMEM. */
static int refresh(top_t *tp, int whole)
{
    const sampler_stats_t *st = sampler_stats(tp->s);
    int64_t now = sampler_now_ns();
    stk_fn_row_t *rows;
    view_row_t *view;
    size_t n, i;

    if (stk_fn_rows_tid(tp->table, tp->tid, &rows, &n, NULL))
        return REMORA_ENOMEM;
    view = malloc((n ? n : 1) * sizeof *view);
    if (view == NULL) {
        free(rows);
        return REMORA_ENOMEM;
    }
    /* a row keeps its index as the table grows (stk_fn_rows): last refresh's row i is
     * this one's row i */
    for (i = 0; i < n; i++) {
        const stk_fn_row_t *old = !whole && i < tp->nrows ? &tp->rows[i] : NULL;
        view[i].row = (uint32_t)i;
        view[i].self = rows[i].self - (old ? old->self : 0);
        view[i].total = rows[i].total - (old ? old->total : 0);
    }
    tp->view_rounds = whole ? st->rounds : st->rounds - tp->last_rounds;
    tp->title = whole ? "whole run" : "last second";
    free(tp->rows);
    free(tp->view);
    tp->rows = rows;
    tp->view = view;
    tp->nrows = n;
    tp->last_ns = now;
    tp->last_rounds = st->rounds;
    sort_view(tp);
    return REMORA_OK;
}

/* --- drawing ------------------------------------------------------------------------- */

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

static void draw_header(const top_t *tp, FILE *f)
{
    const sampler_stats_t *st = sampler_stats(tp->s);
    double secs = (double)(sampler_now_ns() - st->start_ns) / 1e9;
    uint64_t tried = st->samples + st->errors;

    fprintf(f, "remora top  pid %d  Python %s  %s  ", (int)tp->a->pid, tp->python,
            cli_mode_name(tp->a->mode));
    out_text_str(f, tp->command, 0);
    fprintf(f, "\n%.1f s  %llu samples (%.0f Hz)  %llu errors (%.2f%%)  %zu threads\n"
            "%s, sorted by %s", secs, (unsigned long long)st->rounds,
            secs > 0 ? (double)st->rounds / secs : 0.0,
            (unsigned long long)st->errors, tried ? 100.0 * (double)st->errors / (double)tried : 0.0,
            seen_threads(tp->table), tp->title, sort_names[tp->sort]);
    if (tp->tid != 0)
        fprintf(f, "  [thread %d]", (int)tp->tid);
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
    fprintf(f, "%8s %8s %9s %10s  %s\n", "%Own", "%Total", "OwnTime", "TotalTime",
            "Function (file:line)");
}

#define TOP_ROW_PREFIX 40        /* the columns before a row's function: "%7.2f%% %7.2f%% ..." */
#define TOP_ELLIPSIS "\xe2\x80\xa6"    /* U+2026, one column */

/* Columns of s[0..n): UTF-8 lead bytes (a wide character counts one, as paint() does). */
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
        fputs(fn, f);                       /* fits, or no file: paint() cuts a long name */
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
        proc_src_free(&tp->src);
        tp->src_file = NULL;
        if (proc_source_read(tp->p, r->file, &tp->src) != REMORA_OK)
            return;
        tp->src_file = r->file;
    }
    line = proc_src_line(&tp->src, r->hot_line, &len);
    out_text_frame(f, r->function, r->file, r->hot_line);
    if (line == NULL) {
        fprintf(f, ": source %s\n", tp->src.state == PROC_SRC_OK ? "has no such line" :
                proc_src_state_str(tp->src.state));
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
    double pct = tp->view_rounds ? 100.0 / (double)tp->view_rounds : 0.0;
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
        if (v->self == 0 && v->total == 0 && since(tp, v->row, 1) == 0)
            break;                  /* sorted: the rest have nothing either */
        if (!shown(tp, r))
            continue;
        if (width > 0 && k == tp->sel) {
            fputs("\033[7m", f);       /* the selected row, in reverse video */
            selected = r;
        }
        fprintf(f, "%7.2f%% %7.2f%% %8.2fs %9.2fs  ", pct * (double)v->self, pct * (double)v->total,
                per_round * (double)since(tp, v->row, 0), per_round * (double)since(tp, v->row, 1));
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
static void paint(top_t *tp)
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

static void print_frame(top_t *tp, size_t limit)
{
    if (draw(tp, limit, 0) == REMORA_OK) {
        fputs(tp->buf, stdout);
        fputc('\n', stdout);
        fflush(stdout);
    }
}

/* The next thread of the table after tid (by tid order), or 0 (every thread) after the
 * last. */
static pid_t next_thread(const stk_table_t *t, pid_t tid)
{
    size_t n = stk_nthreads(t), i;
    pid_t best = 0;

    for (i = 0; i < n; i++) {
        pid_t x = stk_thread_at(t, i)->tid;
        if (x > tid && (best == 0 || x < best))
            best = x;
    }
    return best;
}

/* A key changed what is shown: draw it again now (the totals as they were). */
static void redraw(top_t *tp)
{
    if (tp->view != NULL && tp->tty) {
        sort_view(tp);
        paint(tp);
    }
}

/* One key while a filter is typed: printable bytes add to it, Backspace removes one
 * character, Enter applies it, Esc (or Ctrl-G) drops it. */
static void filter_key(top_t *tp, unsigned char c)
{
    if (c == '\r' || c == '\n') {
        memcpy(tp->filter, tp->typing, tp->ntyping);
        tp->filter[tp->ntyping] = '\0';
        tp->typing_on = 0;
        tp->sel = 0;
    } else if (c == 0x1b || c == 0x07) {
        tp->typing_on = 0;
    } else if (c == 0x7f || c == 0x08) {
        while (tp->ntyping > 0 && ((unsigned char)tp->typing[--tp->ntyping] & 0xc0) == 0x80)
            ;                       /* a whole UTF-8 character */
    } else if (c >= 0x20 && tp->ntyping + 1 < sizeof tp->typing) {
        tp->typing[tp->ntyping++] = (char)c;
    }
}

/* r: OwnTime and TotalTime count from now (the current totals become the base). */
static void reset_totals(top_t *tp)
{
    free(tp->base);
    tp->base = NULL;
    tp->nbase = 0;
    if (tp->nrows > 0 && (tp->base = malloc(tp->nrows * sizeof *tp->base)) != NULL) {
        memcpy(tp->base, tp->rows, tp->nrows * sizeof *tp->base);
        tp->nbase = tp->nrows;
    }
}

/* One key outside typing; 0 when it changes nothing shown. */
static int command_key(top_t *tp, unsigned char c)
{
    switch (c) {
    case 'q':
    case 'Q':
        stop_flag = 1;
        return 0;
    case '/':
        tp->typing_on = 1;
        tp->ntyping = strlen(tp->filter);
        memcpy(tp->typing, tp->filter, tp->ntyping);
        return 1;
    case 'p':
    case 'P':
        tp->paused = !tp->paused;
        return 1;
    case 'r':
    case 'R':
        reset_totals(tp);
        return 1;
    case 't':
    case 'T':
        /* another thread: its totals since the start (a reset was the other view's) */
        tp->tid = next_thread(tp->table, tp->tid);
        free(tp->base);
        tp->base = NULL;
        tp->nbase = 0;
        tp->sel = 0;
        refresh(tp, 1);
        return 1;
    case 'j':
        tp->sel++;
        return 1;
    case 'k':
        if (tp->sel > 0)
            tp->sel--;
        return 1;
    default:
        if (c >= '1' && c < '1' + SORT_N) {
            tp->sort = c - '1';
            return 1;
        }
        return 0;
    }
}

static void read_keys(top_t *tp)
{
    struct pollfd pfd = { STDIN_FILENO, POLLIN, 0 };
    unsigned char keys[64];
    ssize_t n, i;

    while (poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLIN)) {
        n = read(STDIN_FILENO, keys, sizeof keys);
        if (n <= 0) {
            tp->keys = 0;           /* EOF: no more keys, q or not */
            return;
        }
        for (i = 0; i < n; i++) {
            unsigned char c = keys[i];
            /* the arrows: ESC [ A (up), ESC [ B (down) */
            if (tp->esc == 1 && (c == '[' || c == 'O')) {
                tp->esc = 2;
                continue;
            }
            if (tp->esc == 2) {
                tp->esc = 0;
                if (c == 'A' && tp->sel > 0)
                    tp->sel--;
                else if (c == 'B')
                    tp->sel++;
                redraw(tp);
                continue;
            }
            tp->esc = 0;
            if (tp->typing_on) {
                filter_key(tp, c);
                redraw(tp);
            } else if (c == 0x1b) {
                tp->esc = 1;
            } else if (command_key(tp, c)) {
                redraw(tp);
            }
        }
    }
}

static void on_status(const sampler_t *s, void *ctx)
{
    top_t *tp = ctx;

    (void)s;
    if (tp->keys)
        read_keys(tp);
    if (stop_flag || sampler_now_ns() - tp->last_ns < TOP_REFRESH_NS || tp->paused)
        return;
    if (refresh(tp, 0))
        return;
    if (tp->tty)
        paint(tp);
    else
        print_frame(tp, (size_t)tp->a->limit);
}

static void screen_enter(top_t *tp)
{
    if (!isatty(STDOUT_FILENO))
        return;
    tp->tty = 1;
    if (isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &tp->saved) == 0) {
        struct termios raw = tp->saved;
        raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);     /* ISIG stays: Ctrl-C stops */
        raw.c_cc[VMIN] = 0;
        raw.c_cc[VTIME] = 0;
        if (tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0)
            tp->keys = 1;
    }
    fputs("\033[?1049h\033[?25l\033[H\033[2J", stdout);   /* alternate screen, no cursor */
    fputs("remora top: waiting for the first second of samples...\n", stdout);
    fflush(stdout);
}

static void screen_leave(top_t *tp)
{
    if (!tp->tty)
        return;
    fputs("\033[?25h\033[?1049l", stdout);
    fflush(stdout);
    if (tp->keys)
        tcsetattr(STDIN_FILENO, TCSANOW, &tp->saved);
    tp->tty = tp->keys = 0;
}

int cmd_top(int argc, char **argv)
{
    cli_sampling_t a;
    cli_target_t ct;
    top_t tp;
    unwinder_t *u = NULL;
    sampler_opts_t so;
    kern_t *kern = NULL;
    struct sigaction sa;
    int err, rc, gone = 0;

    switch (parse_top(argc, argv, &a)) {
    case 0: break;
    case 1: return REMORA_EXIT_OK;
    default: return REMORA_EXIT_USAGE;
    }
    memset(&tp, 0, sizeof tp);
    tp.a = &a;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);

    /* the engine is opened before the target is attached to: what out: frees must be
     * nothing yet when it fails */
    memset(&ct, 0, sizeof ct);
    ct.child_status = -1;
    if ((rc = cli_engine_open("top", &a, 0, &kern)) != REMORA_EXIT_OK)
        goto out;
    rc = cli_attach(a.pid, a.cmd, a.subprocesses, &stop_flag, &ct);
    if (rc != REMORA_EXIT_OK || ct.ended)
        goto out;
    a.pid = ct.pid;
    if (cli_check_mode(a.mode, &ct.t)) {
        rc = remora_exit_code(REMORA_EVERSION);
        goto out;
    }
    tp.python = ct.t.version;
    tp.p = ct.p;
    cli_read_cmdline(ct.pid, tp.command, sizeof tp.command);
    tp.table = stk_new();
    /* a command that is not Python, whose descendants are (--subprocesses): no unwinder */
    if (tp.table == NULL || (ct.python_pid == 0 && unw_new(ct.p, &ct.t, &u))) {
        cli_error("out of memory");
        rc = REMORA_EXIT_FAIL;
        goto out;
    }
    if (a.async && (rc = cli_async_check(u, &ct.t)) != REMORA_EXIT_OK)
        goto out;
    if ((rc = cli_sampler_opts("top", &a, &ct, u, &kern, &so)) != REMORA_EXIT_OK)
        goto out;
    if ((err = sampler_new(u, ct.p, tp.table, NULL, &so, &tp.s)) != REMORA_OK) {
        rc = cli_sampler_fail(err, a.pid, cli_holder(&a));
        goto out;
    }
    tp.last_ns = sampler_now_ns();
    screen_enter(&tp);
    err = sampler_run(tp.s, &stop_flag, on_status, &tp);
    screen_leave(&tp);
    if (err == REMORA_ENOPROC) {
        gone = 1;
        if (ct.child != 0 && sampler_child_status(tp.s) != -1) {
            ct.child_status = sampler_child_status(tp.s);
            ct.child = 0;
        }
    } else if (err) {
        cli_error("sampling pid %d stopped: %s", (int)a.pid, remora_strerror(err));
        rc = err == REMORA_EPERM ? REMORA_EXIT_PERM : REMORA_EXIT_FAIL;
    }
    /* the whole run, whatever ended it: every thread, no filter, no reset */
    tp.tid = 0;
    tp.filter[0] = '\0';
    free(tp.base);
    tp.base = NULL;
    tp.nbase = 0;
    if (refresh(&tp, 1) == REMORA_OK)
        print_frame(&tp, (size_t)a.limit);
    if (ferror(stdout)) {
        cli_error("writing the table to stdout failed");
        rc = REMORA_EXIT_FAIL;
    }
    if (gone)
        cli_error("pid %d exited", (int)a.pid);
    else if (ct.child > 0)
        cli_error("'%s' (pid %d) still runs: waiting for it to exit (Ctrl-C stops it)", a.cmd[0],
                  (int)ct.child);
    if (rc == REMORA_EXIT_OK && gone && a.cmd == NULL && a.duration > 0)
        rc = REMORA_EXIT_NOPROC;   /* the target went away before -d ended */
out:
    screen_leave(&tp);
    if (a.cmd != NULL && cli_finish_child(&ct) >= 0 && (rc == REMORA_EXIT_OK || gone))
        rc = cli_child_exit_code(ct.child_status);
    sampler_free(tp.s);
    unw_free(u);
    kern_close(kern);               /* after every unwinder (the sampler's too) */
    stk_free(tp.table);
    proc_free(ct.p);
    free(tp.rows);
    free(tp.view);
    free(tp.buf);
    free(tp.base);
    proc_src_free(&tp.src);
    return rc;
}
