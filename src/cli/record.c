/* cli/record.c — `remora record`: attach to a pid or launch a command, sample it, and
 * write the profile: one period, or with --every one after another, each written by
 * outputs.c; signals and --control (control.c) pause, resume and snapshot it between
 * rounds (the sampler's hook); summary.c prints its last lines. The sampling loop is
 * sample/sampler.c. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "remora.h"
#include "cli.h"
#include "record.h"
#include "../formats/out.h"
#include "../kern/kern.h"
#include "../formats/raw.h"
#include "../proc/proc.h"
#include "../py/py.h"
#include "../lib/lib.h"
#include "../sample/sampler.h"
#include "../unwind/unwind.h"
#include "../util/util.h"

static volatile sig_atomic_t stop_flag, poke_flag, snap_flag, pause_flag;

static void on_signal(int sig)
{
    if (sig == SIGUSR1)
        snap_flag = 1;              /* a snapshot */
    else if (sig == SIGUSR2)
        pause_flag = 1;             /* pause, or resume */
    else
        stop_flag = 1;
    poke_flag = 1;
}

enum { R_OUTPUT = CLI_O_OWN, R_FORMAT, R_MAX_SAMPLES, R_DIFF, R_FRAME_ANCHOR, R_STATS, R_EVERY,
       R_CONTROL, R_SORT };

static const cli_opt_t record_opts[] = {
    CLI_SAMPLING_OPTS,
    { R_OUTPUT, "-o", "--output", NULL, "FILE",
      "the output; its ending names the format (repeatable)", 0 },
    { R_FORMAT, "-f", "--format", NULL, "FORMAT",
      "the format, if -o's ending does not say (below)", 0 },
    { R_STATS, NULL, "--stats", NULL, NULL, "print reads and CPU per sample at the end", 0 },
    { R_MAX_SAMPLES, NULL, "--max-samples", NULL, "N", "stop after N rounds", 0 },
    { R_DIFF, NULL, "--diff", NULL, "BASELINE",
      "a differential flamegraph against BASELINE", 0 },
    { R_FRAME_ANCHOR, NULL, "--frame-anchor", NULL, NULL,
      "3.15: anchor frames (writes 8 bytes a thread)", 0 },
    { R_EVERY, NULL, "--every", NULL, "SECONDS",
      "a profile each period, -o naming it by %t or %n", 0 },
    { R_CONTROL, NULL, "--control", NULL, "FIFO",
      "fifo:CTL[,ACK]: pause, resume, snapshot from a FIFO", 0 },
    { R_SORT, NULL, "--sort", NULL, "KEY", "the table's order: self (default), total or name", 0 },
    { 0 }
};

static const char record_usage[] =
    "remora record (-p PID | PID | -- CMD ARGS...) [options]";

#define RECORD_MAX_SAMPLES 1000000000000ULL

static char heatmap_index[RECORD_MAX_OUT + 1][4096];   /* -o DIR's page, per output */

/* Takes record's own option 'id' (given as 'flag' with value v) into a; -f's value into
 * *fname, its flag as given into *fflag. Returns 0, 1 after --help (printed), or -1
 * after one line. */
static int take_own(int id, const char *flag, const char *v, record_args_t *a,
                    const char **fname, const char **fflag)
{
    unsigned long long n;

    switch (id) {
    case CLI_O_HELP:
        cli_opt_help(stdout, record_usage, "sample a process and write a profile", record_opts);
        cli_modes_help();
        rec_formats_help(0);
        return 1;
    case R_OUTPUT:
        if (v == NULL || *v == '\0')
            return cli_bad_value("record", flag, v ? "" : NULL, rec_out_accepts);
        if (a->nout == RECORD_MAX_OUT) {
            cli_error("record: at most %d outputs", RECORD_MAX_OUT);
            return -1;
        }
        a->out_path[a->nout++] = v;
        break;
    case R_FORMAT:
        if (v == NULL) {
            cli_error("record: %s takes a format: none given; use one of %s", flag,
                      out_format_names(0));
            return -1;
        }
        *fname = v;
        *fflag = flag;
        break;
    case R_MAX_SAMPLES:
        if (cli_parse_uint(v, 1, RECORD_MAX_SAMPLES, &n))
            return cli_bad_value("record", flag, v,
                                 "a number of samples, a whole number from 1 to 1000000000000");
        a->max_samples = n;
        break;
    case R_DIFF:
        if (v == NULL || *v == '\0')
            return cli_bad_value("record", flag, v ? "" : NULL, rec_diff_accepts);
        a->diff = v;
        break;
    case R_FRAME_ANCHOR:
        a->anchor = 1;
        break;
    case R_STATS:
        a->stats = 1;
        break;
    case R_EVERY:
        if (v == NULL || cli_parse_duration(v, &a->every) || a->every < 1.0)
            return cli_bad_value("record", flag, v, "a period of 1 s or more: 10, 60, 1m");
        break;
    case R_CONTROL:
        if (v == NULL || strncmp(v, "fifo:", 5) != 0 || v[5] == '\0')
            return cli_bad_value("record", flag, v, rec_ctl_accepts);
        a->control = v;
        break;
    case R_SORT:
        if ((a->sort = out_sort_parse(v)) < 0)
            return cli_bad_value("record", flag, v, out_sort_accepts);
        break;
    }
    return 0;
}

/* Each output's format: the name's ending, else -f (fname, given as fflag; NULL: none);
 * no -o: the format asked for (the table by default) on stdout. Returns 0, or -1 after
 * one line. */
static int pick_formats(record_args_t *a, const char *fname, const char *fflag)
{
    int i, nraw = 0;

    if (fname != NULL && out_format_by_name(fname) == NULL) {
        cli_error("record: %s takes a format: '%s' is not one; use one of %s", fflag, fname,
                  out_format_names(0));
        return -1;
    }
    if (a->nout == 0 && a->every > 0 && (fname == NULL || !out_format_by_name(fname)->stream)) {
        cli_error("record: --every writes a file a period: add -o NAME-%%t.EXT (or -f jsonl, one "
                  "stream on stdout)");
        return -1;
    }
    if (a->nout == 0) {
        a->out_path[0] = NULL;
        a->fmt[0] = out_format_by_name(fname ? fname : "table");
        a->nout = 1;
        if (a->fmt[0]->write == NULL) {
            cli_error("the raw format needs a file: add -o FILE.remora");
            return -1;
        }
        return rec_binary_to_terminal("record", a->fmt[0], "-");
    }
    for (i = 0; i < a->nout; i++) {
        /* the name's ending decides; -f covers names that say nothing */
        a->fmt[i] = out_format_for_path(a->out_path[i]);
        if (a->fmt[i] == NULL || (fname != NULL && a->nout == 1))
            a->fmt[i] = fname ? out_format_by_name(fname) : NULL;
        if (a->fmt[i] == NULL) {
            cli_error("cannot tell the format of '%s' from its name: add -f (%s)", a->out_path[i],
                      out_format_names(0));
            return -1;
        }
        if (rec_binary_to_terminal("record", a->fmt[i], a->out_path[i]))
            return -1;
        a->out_path[i] = rec_heatmap_path(a->fmt[i], a->out_path[i], heatmap_index[i], sizeof heatmap_index[i]);
        if (a->fmt[i]->write == NULL && strcmp(a->out_path[i], "-") == 0) {
            cli_error("the raw format cannot go to stdout: add -o FILE.remora");
            return -1;
        }
        if (a->fmt[i]->write == NULL && nraw++ > 0) {
            cli_error("record: only one raw output (-o FILE.remora): '%s' is a second one",
                      a->out_path[i]);
            return -1;
        }
        if (a->every > 0 && !a->fmt[i]->stream && !rec_out_varies(a->out_path[i])) {
            cli_error("record: --every writes a file a period: put %%t (its start) or %%n (its "
                      "number) in '%s'", a->out_path[i]);
            return -1;
        }
    }
    return 0;
}

/* Returns 0, 1 after --help (printed), or -1 after one line. */
static int parse_record(int argc, char **argv, record_args_t *a)
{
    const char *fname = NULL, *fflag = "-f";
    int i;
    pid_t word = 0;

    memset(a, 0, sizeof *a);
    cli_sampling_init(&a->c);
    for (i = 1; i < argc; i++) {
        const char *s, *v;
        int id = cli_opt_next("record", record_opts, argc, argv, &i, &s, &v), took;
        if (id == CLI_ARG_BAD)
            return -1;
        if (id == CLI_ARG_WORD) {
            /* a pid alone, as -p (`remora record 1234 -o x`); any other word is refused */
            if (cli_word_pid("record", s, &word, "see 'remora record --help' for the options "
                             "(a command to run goes after --)"))
                return -1;
            continue;
        }
        took = cli_sampling_take("record", id, s, v, argc, argv, &i, &a->c);
        if (took < 0)
            return -1;
        if (!took && (took = take_own(id, s, v, a, &fname, &fflag)) != 0)
            return took;
    }
    if (cli_word_pid_check("record", word, &a->c.pid) || cli_sampling_check("record", &a->c))
        return -1;
    return pick_formats(a, fname, fflag);
}


/* Thread samples written: the table's (a waiting task's, --async-mode all, among them). */
static uint64_t written(const sampler_stats_t *st)
{
    return st->samples + st->task_waiting;
}

/* The counts' words of m (docs/cli.md, "Counts") since the run's counts were 'base'
 * (NULL: since it began). */
static void meta_counts(const rec_run_t *r, const rec_run_t *base, profile_meta_t *m)
{
    const sampler_stats_t *st = sampler_stats(r->s);

    m->counted = 1;
    m->idle_kept = r->a->c.idle;
    m->written = written(st) - (base ? base->written0 : 0);
    m->idle = st->idle - (base ? base->idle0 : 0);
    m->partial = st->partial - (base ? base->partial0 : 0);
    m->paused_s = (double)(st->paused_ns - (base ? base->paused0 : 0)) / 1e9;
}

/* The metadata of this period up to 'end' (ns since sampling began). */
static void period_meta(const rec_run_t *r, int64_t end, profile_meta_t *m)
{
    const sampler_stats_t *st = sampler_stats(r->s);

    *m = r->prof.meta;
    m->start_unix_ns = r->prof.meta.start_unix_ns + r->period_ns;
    m->start_mono_ns = st->start_ns + r->period_ns;
    m->duration_s = (double)(end - r->period_ns) / 1e9;
    m->samples = st->rounds - r->rounds0;
    m->errors = st->errors - r->errors0;
    m->late = st->late - r->late0;
    meta_counts(r, r, m);
}

static int write_period(rec_run_t *r, uint64_t snap, int64_t end)
{
    profile_t prof = r->prof;
    int rc;

    period_meta(r, end, &prof.meta);
    prof.stacks = r->table;
    rc = rec_outs_write(&r->outs, &prof, r->n, snap);
    if (rc != REMORA_EXIT_OK)
        r->rc = rc;
    return rc;
}

/* The period is over at now (since sampling began): its profile written, the next one
 * begun in a new table. Returns 0 or a code that ends the recording. */
static int next_period(rec_run_t *r, int64_t now)
{
    const sampler_stats_t *st = sampler_stats(r->s);
    stk_table_t *t;
    sample_sink_t sink;
    profile_meta_t m;
    int err;

    write_period(r, 0, now);
    r->n++;
    r->period_ns = now;
    r->rounds0 = st->rounds;
    r->errors0 = st->errors;
    r->late0 = st->late;
    r->written0 = written(st);
    r->idle0 = st->idle;
    r->partial0 = st->partial;
    r->paused0 = st->paused_ns;
    period_meta(r, now, &m);
    t = stk_new();
    if (t == NULL || rec_outs_begin(&r->outs, &m, r->n, now) != REMORA_EXIT_OK) {
        stk_free(t);
        r->failed = 1;
        r->rc = REMORA_EXIT_FAIL;
        return REMORA_EIO;
    }
    sink.ctx = r->outs.raw;
    sink.sample = r->outs.raw != NULL ? rec_raw_sink : NULL;
    if ((err = sampler_set_table(r->s, t, &sink)) != REMORA_OK) {
        stk_free(t);
        return err;
    }
    stk_free(r->table);
    r->table = t;
    return REMORA_OK;
}

static int do_pause(rec_run_t *r, int paused)
{
    int err = sampler_pause(r->s, paused);

    if (err == REMORA_OK)
        fprintf(stderr, "remora: %s\n", paused ? "paused" : "resumed");
    return err;
}

/* When this period is due to end, in ns since sampling began: every period on the same
 * grid (each ends when its samples are in, a few microseconds after). */
static int64_t due_ns(const rec_run_t *r)
{
    return (int64_t)((double)r->n * r->a->every * 1e9);
}

/* Between two rounds (sampler_set_hook): signals, --control's commands, a period's end. */
static int record_hook(sampler_t *s, void *ctx, int64_t now_mono)
{
    rec_run_t *r = ctx;
    const sampler_stats_t *st = sampler_stats(s);
    int64_t now = now_mono - st->start_ns;
    int cmd, err = REMORA_OK;

    while (err == REMORA_OK) {
        /* the next command, and the signals that came before it first: a signal sent
         * before a command was written is pending when the read of it returns, so that
         * the command's answer (a `ping`) says the signal was acted on */
        cmd = rec_ctl_next(&r->ctl);
        if (snap_flag) {
            snap_flag = 0;
            write_period(r, ++r->outs.snapshots, sampler_flush(s) - st->start_ns);
        }
        if (pause_flag) {
            pause_flag = 0;
            err = do_pause(r, !sampler_paused(s));
        }
        if (err != REMORA_OK || cmd == CTL_NONE)
            break;
        switch (cmd) {
        case CTL_PAUSE:
        case CTL_RESUME:
            err = do_pause(r, cmd == CTL_PAUSE);
            rec_ctl_ack(&r->ctl, err == REMORA_OK ? "ack" : "err pause failed");
            break;
        case CTL_SNAPSHOT:
            rec_ctl_ack(&r->ctl, write_period(r, ++r->outs.snapshots, sampler_flush(s) - st->start_ns) == REMORA_EXIT_OK ? "ack"
                                                                                      : "err write failed");
            break;
        case CTL_STOP:
            stop_flag = 1;
            rec_ctl_ack(&r->ctl, "ack");
            break;
        case CTL_PING:
            rec_ctl_ack(&r->ctl, "ack");
            break;
        default:
            rec_ctl_ack(&r->ctl, "err unknown command: pause, resume, snapshot, stop or ping");
            break;
        }
    }
    /* a period ends when it is due, or just after: when the samples taken up to then are
     * in (the next one begins there, so that the periods tile the recording) */
    /* (the period due when -d ends is the last: written then, no empty one after it) */
    if (err == REMORA_OK && r->a->every > 0 && now >= due_ns(r) &&
        (r->a->c.duration <= 0 || due_ns(r) < (int64_t)(r->a->c.duration * 1e9)))
        err = next_period(r, sampler_flush(s) - st->start_ns);
    if (r->a->every > 0)
        sampler_hook_due(s, st->start_ns + due_ns(r));
    return err;
}

/* The first period's names of the outputs (the others differ only by their time or
 * number), each checked writable before anything is sampled. Returns REMORA_EXIT_OK or
 * REMORA_EXIT_USAGE after one line. */
static int check_outputs(const record_args_t *a, const struct timespec *wall)
{
    char name[4096];
    int i;

    for (i = 0; i < a->nout; i++) {
        if (a->out_path[i] != NULL && rec_out_name(a->out_path[i], a->fmt[i],
                                                   (int64_t)wall->tv_sec * 1000000000, 1, 0,
                                                   name, sizeof name)) {
            cli_error("the name '%s' is too long once expanded; choose a shorter -o", a->out_path[i]);
            return REMORA_EXIT_USAGE;
        }
        if (rec_check_writable(a->out_path[i] != NULL ? name : NULL))
            return REMORA_EXIT_USAGE;
    }
    return REMORA_EXIT_OK;
}

/* --diff: the baseline read into *table (the caller frees it) and base, before anything
 * is sampled, so a bad one is found first. Returns REMORA_EXIT_OK or an exit code after
 * one line. */
static int load_baseline(const char *path, profile_t *base, stk_table_t **table)
{
    int rc;

    memset(base, 0, sizeof *base);
    *table = NULL;
    if (path == NULL)
        return REMORA_EXIT_OK;
    if ((*table = stk_new()) == NULL) {
        cli_error("out of memory");
        return REMORA_EXIT_FAIL;
    }
    if ((rc = rec_load_profile(path, *table, &base->meta, NULL, NULL)) != REMORA_OK) {
        stk_free(*table);
        *table = NULL;
        return rc;
    }
    base->stacks = *table;
    return REMORA_EXIT_OK;
}

static void catch_signals(void)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGUSR2, &sa, NULL);
}

/* The target attached to (or the command launched) and its readers: the engine opened
 * first, the mode and --frame-anchor checked, the first period's table, the unwinder.
 * Returns REMORA_EXIT_OK (r->ct.ended: nothing to sample), or an exit code after one
 * line; what it made is freed by the caller either way. */
static int attach_target(rec_run_t *r)
{
    const record_args_t *a = r->a;
    const py_target_t *t = &r->ct.t;
    int rc;

    /* the engine is opened before the target is attached to: what the caller frees must
     * be nothing yet when it fails */
    if ((rc = cli_engine_open("record", &a->c, a->anchor, &r->kern)) != REMORA_EXIT_OK)
        return rc;
    rc = cli_attach(a->c.pid, a->c.cmd, a->c.subprocesses, &stop_flag, &r->ct);
    if (rc != REMORA_EXIT_OK || r->ct.ended)
        return rc;
    if (cli_check_mode(a->c.mode, t))
        return remora_exit_code(REMORA_EVERSION);
    if (a->anchor && t->layout.ts_last_profiled == 0) {
        cli_error("--frame-anchor: Python %s (%s) has no last_profiled_frame to anchor; it "
                  "needs CPython 3.15: record without it", t->version, t->binary);
        return remora_exit_code(REMORA_EVERSION);
    }
    r->table = stk_new();
    /* a command that is not Python, whose descendants are (--subprocesses): no unwinder */
    if (r->table == NULL) {
        cli_error("out of memory");
        return REMORA_EXIT_FAIL;
    }
    r->u = r->ct.r != NULL ? remora_unwinder(r->ct.r) : NULL;     /* the handle's */
    if (a->c.async)
        return cli_async_check(r->u, t);
    return REMORA_EXIT_OK;
}

/* The outputs of the run and the metadata every period shares (base: the baseline, or
 * NULL), as of wall, when sampling begins. */
static void setup_run(rec_run_t *r, profile_t *base, const struct timespec *wall)
{
    const record_args_t *a = r->a;
    int i;

    r->n = 1;
    r->outs.n = a->nout;
    r->outs.limit = a->c.limit;
    r->outs.sort = a->sort;
    r->outs.p = r->ct.p;
    for (i = 0; i < a->nout; i++) {
        r->outs.path[i] = a->out_path[i];
        r->outs.fmt[i] = a->fmt[i];
        r->outs.timeline |= a->fmt[i]->timeline;
        if (a->fmt[i]->write == NULL)
            r->outs.raw_at = i;
    }
    r->prof.baseline = base;
    r->prof.meta.pid = r->ct.pid;
    r->prof.meta.start_unix_ns = (int64_t)wall->tv_sec * 1000000000 + wall->tv_nsec;
    r->prof.meta.rate_hz = a->c.rate;
    snprintf(r->prof.meta.python, sizeof r->prof.meta.python, "%s", r->ct.t.version);
    snprintf(r->prof.meta.mode, sizeof r->prof.meta.mode, "%s", cli_mode_name(a->c.mode));
    proc_cmdline(r->ct.pid, r->prof.meta.command, sizeof r->prof.meta.command);
}

/* The sampler made on the target, its recording begun (whole: the run's metadata).
 * Returns REMORA_EXIT_OK, or an exit code after one line. */
static int start_sampler(rec_run_t *r, profile_meta_t *whole)
{
    const record_args_t *a = r->a;
    sampler_opts_t so;
    sample_sink_t sink;
    int rc, err;

    if ((rc = cli_sampler_opts("record", &a->c, &r->ct, r->u, &r->kern, &so)) != REMORA_EXIT_OK)
        return rc;
    so.anchor = a->anchor;
    so.max_rounds = a->max_samples;
    r->blocking = so.blocking;
    snprintf(r->prof.meta.engine, sizeof r->prof.meta.engine, "%s", cli_engine_name(r->kern));
    if (a->c.mode == SAMPLE_MEMORY && r->kern != NULL) {
        long page = sysconf(_SC_PAGESIZE);
        r->prof.meta.sample_bytes = kern_fault_period(r->kern) * (uint64_t)(page > 0 ? page : 4096);
        /* the target's resident size as sampling begins: the summary's growth */
        if (proc_rss(r->ct.pid, &r->rss0) != REMORA_OK)
            r->rss0 = UINT64_MAX;
    }
    *whole = r->prof.meta;
    if ((rc = rec_outs_begin(&r->outs, whole, 1, 0)) != REMORA_EXIT_OK)
        return rc;
    sink.ctx = r->outs.raw;
    sink.sample = r->outs.raw != NULL ? rec_raw_sink : NULL;
    if ((err = sampler_new(r->u, r->ct.p, r->table, &sink, &so, &r->s)) != REMORA_OK)
        return cli_sampler_fail(err, r->ct.pid, cli_holder(&a->c));
    /* signals and commands are looked at every 10 ms, and at once on a signal */
    sampler_set_hook(r->s, record_hook, r, 0.01, &poke_flag);
    if (a->every > 0)
        sampler_hook_due(r->s, sampler_now_ns() + (int64_t)(a->every * 1e9));  /* set anew at the start */
    return REMORA_EXIT_OK;
}

/* Samples until the run ends, then writes what was collected, whatever ended it (the
 * last period, with --every one cut short, then the streams' end), and the summary.
 * Returns the exit code. */
static int sample_and_write(rec_run_t *r, profile_meta_t *whole)
{
    const record_args_t *a = r->a;
    const sampler_stats_t *st;
    double cpu0;
    int err, rc = REMORA_EXIT_OK;

    cpu0 = rec_cpu_seconds();
    err = sampler_run(r->s, &stop_flag, isatty(2) ? rec_status_line : NULL, NULL);
    r->cpu_s = rec_cpu_seconds() - cpu0;
    if (whole->sample_bytes > 0 && proc_rss(r->ct.pid, &r->rss1) != REMORA_OK)
        r->rss1 = UINT64_MAX;       /* (a target that exited: no end to say) */
    if (isatty(2))
        fputs("\r\033[K", stderr);
    st = sampler_stats(r->s);
    if (err == REMORA_ENOPROC) {
        r->gone = 1;
        if (r->ct.child != 0 && sampler_child_status(r->s) != -1) {
            r->ct.child_status = sampler_child_status(r->s);
            r->ct.child = 0;
        }
    } else if (err && !r->failed) {
        cli_error("sampling pid %d stopped: %s", (int)r->ct.pid, remora_strerror(err));
        rc = err == REMORA_EPERM ? REMORA_EXIT_PERM : REMORA_EXIT_FAIL;
    }
    if (sampler_paused(r->s))
        sampler_pause(r->s, 0);     /* the time paused counted */

    if (!r->failed)
        write_period(r, 0, st->end_ns - st->start_ns);
    whole->duration_s = (double)(st->end_ns - st->start_ns) / 1e9;
    whole->samples = st->rounds;
    whole->errors = st->errors;
    whole->late = st->late;
    whole->start_mono_ns = st->start_ns;
    meta_counts(r, NULL, whole);
    if (rec_outs_end(&r->outs, whole, r->n, r->gone ? "target exited" : r->failed ? "output failed" :
                     stop_flag ? "stopped" : "duration") != REMORA_EXIT_OK)
        r->rc = REMORA_EXIT_FAIL;
    if (r->rc != REMORA_EXIT_OK && rc == REMORA_EXIT_OK)
        rc = r->rc;
    rec_print_summary(r, whole);
    if (a->stats)
        rec_print_stats(r, whole);
    /* a target that exited before -d ended: its profile is written, the summary says it
     * exited, and the exit code is 0 as without -d */
    return rc;
}

int cmd_record(int argc, char **argv)
{
    record_args_t a;
    rec_run_t r;
    profile_t base;
    stk_table_t *base_table;
    profile_meta_t whole;
    struct timespec wall;
    int rc;

    memset(&r, 0, sizeof r);
    memset(&whole, 0, sizeof whole);
    r.ctl.fd = r.ctl.ack = -1;
    r.outs.raw_at = -1;
    r.ct.child_status = -1;
    r.a = &a;
    rc = parse_record(argc, argv, &a);
    if (rc != 0)
        return rc > 0 ? REMORA_EXIT_OK : REMORA_EXIT_USAGE;
    clock_gettime(CLOCK_REALTIME, &wall);
    if ((rc = check_outputs(&a, &wall)) != REMORA_EXIT_OK)
        return rc;
    if ((rc = load_baseline(a.diff, &base, &base_table)) != REMORA_EXIT_OK)
        return rc;
    if (a.control != NULL && rec_ctl_open(a.control, &r.ctl)) {
        stk_free(base_table);
        return REMORA_EXIT_USAGE;
    }
    catch_signals();

    rc = attach_target(&r);
    if (rc != REMORA_EXIT_OK || r.ct.ended)
        goto out;
    setup_run(&r, base_table ? &base : NULL, &wall);
    if ((rc = start_sampler(&r, &whole)) != REMORA_EXIT_OK)
        goto out;
    rc = sample_and_write(&r, &whole);
out:
    rec_outs_end(&r.outs, &whole, r.n, "failed");
    rec_ctl_close(&r.ctl);
    if (a.c.cmd != NULL && r.ct.child > 0 && !stop_flag && r.s != NULL)
        cli_say_waiting(&r.ct);
    if (a.c.cmd != NULL && cli_finish_child(&r.ct) >= 0 && (rc == REMORA_EXIT_OK || r.gone))
        rc = cli_child_exit_code(r.ct.child_status);
    sampler_free(r.s);
    cli_target_free(&r.ct);         /* the handle's unwinder (r.u) with it */
    kern_close(r.kern);             /* after every unwinder (the sampler's too) */
    stk_free(r.table);
    stk_free(base_table);
    return rc;
}
