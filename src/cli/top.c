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
 * end is always the whole run's, of every thread. This file holds the model, the keys
 * and the run; top_draw.c draws the frames (top.h). */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "remora.h"
#include "cli.h"
#include "top.h"
#include "../formats/out.h"
#include "../proc/proc.h"
#include "../lib/lib.h"
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

static const cli_opt_t top_opts[] = {
    CLI_SAMPLING_OPTS,
    { 0 }
};

static const char top_usage[] = "remora top (-p PID | PID | -- CMD ARGS...) [options]";

/* Returns 0, 1 after --help (printed), or -1 after one line. */
static int parse_top(int argc, char **argv, cli_sampling_t *a)
{
    int i;
    pid_t word = 0;

    cli_sampling_init(a);
    for (i = 1; i < argc; i++) {
        const char *flag, *v;
        int id = cli_opt_next("top", top_opts, argc, argv, &i, &flag, &v), took;
        if (id == CLI_ARG_BAD)
            return -1;
        if (id == CLI_ARG_WORD) {
            /* a pid alone, as -p (`remora top 1234`) */
            if (cli_word_pid("top", flag, &word, "see 'remora top --help' for the options"))
                return -1;
            continue;
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
    if (cli_word_pid_check("top", word, &a->pid))
        return -1;
    return cli_sampling_check("top", a);
}

/* --- the model: last second's deltas over every function's totals -------------------- */

/* A row's samples since the start or the last reset (r): own (self) or total. */
uint64_t top_since(const top_t *tp, uint32_t row, int total)
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
    case SORT_OWNTIME: return top_since(tp, v->row, 0);
    default: return top_since(tp, v->row, 1);
    }
}

/* Is the row shown under the filter? */
int top_shown(const top_t *tp, const stk_fn_row_t *r)
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
    tp->win = *st;
    if (!whole) {
        tp->win.looked -= tp->prev.looked;
        tp->win.on_gil -= tp->prev.on_gil;
        tp->win.gil_wait -= tp->prev.gil_wait;
        tp->win.in_gc -= tp->prev.in_gc;
        tp->win.exc -= tp->prev.exc;
        tp->win.exc_known -= tp->prev.exc_known;
        tp->win.idle -= tp->prev.idle;
        tp->win.samples -= tp->prev.samples;
    }
    tp->prev = *st;
    tp->view_samples = whole ? st->samples : st->samples - tp->last_samples;
    tp->title = whole ? "whole run" : "last second";
    free(tp->rows);
    free(tp->view);
    tp->rows = rows;
    tp->view = view;
    tp->nrows = n;
    tp->last_ns = now;
    tp->last_rounds = st->rounds;
    tp->last_samples = st->samples;
    sort_view(tp);
    return REMORA_OK;
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
        top_paint(tp);
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
        top_paint(tp);
    else
        top_print_frame(tp, (size_t)tp->a->limit);
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
    proc_cmdline(ct.pid, tp.command, sizeof tp.command);
    tp.table = stk_new();
    /* a command that is not Python, whose descendants are (--subprocesses): no unwinder */
    if (tp.table == NULL) {
        cli_error("out of memory");
        rc = REMORA_EXIT_FAIL;
        goto out;
    }
    u = ct.r != NULL ? remora_unwinder(ct.r) : NULL;       /* the handle's */
    if (a.async && (rc = cli_async_check(u, &ct.t)) != REMORA_EXIT_OK)
        goto out;
    if ((rc = cli_sampler_opts("top", &a, &ct, u, &kern, &so)) != REMORA_EXIT_OK)
        goto out;
    so.states = 1;                  /* the header's exception share */
    tp.engine = cli_engine_name(kern);
    tp.gil_wait_known = ct.t.layout.ts_gil_requested != 0;   /* the thread says it waits */
    if (a.mode == SAMPLE_MEMORY && kern != NULL)
        tp.unit = kern_fault_period(kern) * (uint64_t)sysconf(_SC_PAGESIZE);
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
        top_print_frame(&tp, (size_t)a.limit);
    if (ferror(stdout)) {
        cli_error("writing the table to stdout failed");
        rc = REMORA_EXIT_FAIL;
    }
    if (gone)
        cli_error("pid %d exited", (int)a.pid);
    else
        cli_say_waiting(&ct);       /* as record says it (-d, q: the command goes on) */
    if (rc == REMORA_EXIT_OK && gone && a.cmd == NULL && a.duration > 0)
        rc = REMORA_EXIT_NOPROC;   /* the target went away before -d ended */
out:
    screen_leave(&tp);
    if (a.cmd != NULL && cli_finish_child(&ct) >= 0 && (rc == REMORA_EXIT_OK || gone))
        rc = cli_child_exit_code(ct.child_status);
    sampler_free(tp.s);
    cli_target_free(&ct);           /* the handle's unwinder (u) with it */
    kern_close(kern);               /* after every unwinder (the sampler's too) */
    stk_free(tp.table);
    free(tp.rows);
    free(tp.view);
    free(tp.buf);
    free(tp.base);
    proc_src_cache_free(tp.src_cache);
    return rc;
}
