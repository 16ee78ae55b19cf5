/* cli/record.c — `remora record`: attach to a pid or launch a command, sample it, and
 * write the profile: one period, or with --every one after another, each written by
 * outputs.c; signals and --control (control.c) pause, resume and snapshot it between
 * rounds (the sampler's hook). The sampling loop is sample/sampler.c. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
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

typedef struct record_args {
    cli_sampling_t c;       /* -p, --, -r, -d, --mode, --no-gc, -l */
    const char *out_path[RECORD_MAX_OUT];   /* NULL: the table on stdout */
    const out_format_t *fmt[RECORD_MAX_OUT];
    int nout;
    int stats;
    int anchor;             /* --frame-anchor: 3.15's last_profiled_frame (writes) */
    uint64_t max_samples;
    const char *diff;       /* a baseline for a differential flamegraph */
    double every;           /* --every: seconds a period (0: one period) */
    const char *control;    /* --control fifo:CTL[,ACK] */
} record_args_t;

enum { R_OUTPUT = CLI_O_OWN, R_FORMAT, R_MAX_SAMPLES, R_DIFF, R_FRAME_ANCHOR, R_STATS, R_EVERY,
       R_CONTROL };

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
    { 0 }
};

static const char record_usage[] =
    "remora record (-p PID | -- CMD ARGS...) [options]";

#define RECORD_MAX_SAMPLES 1000000000000ULL

static char heatmap_index[RECORD_MAX_OUT + 1][4096];   /* -o DIR's page, per output */

/* Returns 0, 1 after --help (printed), or -1 after one line. */
static int parse_record(int argc, char **argv, record_args_t *a)
{
    const char *fname = NULL, *fflag = "-f";
    int i, nraw = 0;

    memset(a, 0, sizeof *a);
    cli_sampling_init(&a->c);
    for (i = 1; i < argc; i++) {
        const char *s, *v;
        int id = cli_opt_next("record", record_opts, argc, argv, &i, &s, &v), took;
        unsigned long long n;
        if (id == CLI_ARG_BAD)
            return -1;
        if (id == CLI_ARG_WORD) {
            cli_error("record: unexpected argument '%s'; see 'remora record --help' for the "
                      "options (a command to run goes after --)", s);
            return -1;
        }
        took = cli_sampling_take("record", id, s, v, argc, argv, &i, &a->c);
        if (took < 0)
            return -1;
        if (took)
            continue;
        switch (id) {
        case CLI_O_HELP:
            cli_opt_help(stdout, record_usage, "sample a process and write a profile", record_opts);
            cli_modes_help();
            rec_formats_help(0);
            return 1;
        case R_OUTPUT:
            if (v == NULL || *v == '\0')
                return cli_bad_value("record", s, v ? "" : NULL, rec_out_accepts);
            if (a->nout == RECORD_MAX_OUT) {
                cli_error("record: at most %d outputs", RECORD_MAX_OUT);
                return -1;
            }
            a->out_path[a->nout++] = v;
            break;
        case R_FORMAT:
            if (v == NULL) {
                cli_error("record: %s takes a format: none given; use one of %s", s,
                          out_format_names(0));
                return -1;
            }
            fname = v;
            fflag = s;
            break;
        case R_MAX_SAMPLES:
            if (cli_parse_uint(v, 1, RECORD_MAX_SAMPLES, &n))
                return cli_bad_value("record", s, v,
                                     "a number of samples, a whole number from 1 to 1000000000000");
            a->max_samples = n;
            break;
        case R_DIFF:
            if (v == NULL || *v == '\0')
                return cli_bad_value("record", s, v ? "" : NULL, rec_diff_accepts);
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
                return cli_bad_value("record", s, v, "a period of 1 s or more: 10, 60, 1m");
            break;
        case R_CONTROL:
            if (v == NULL || strncmp(v, "fifo:", 5) != 0 || v[5] == '\0')
                return cli_bad_value("record", s, v, rec_ctl_accepts);
            a->control = v;
            break;
        }
    }
    if (cli_sampling_check("record", &a->c))
        return -1;
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
        /* no -o: the format asked for (the table by default) on stdout */
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


static void status_line(const sampler_t *s, void *ctx)
{
    const sampler_stats_t *st = sampler_stats(s);
    double secs = (double)(sampler_now_ns() - st->start_ns) / 1e9;

    (void)ctx;
    fprintf(stderr, "\rremora: %llu samples, %.0f Hz, %llu errors, %.1f s   ",
            (unsigned long long)st->rounds, secs > 0 ? (double)st->rounds / secs : 0.0,
            (unsigned long long)st->errors, secs);
    fflush(stderr);
}

static double cpu_seconds(void)
{
    struct rusage ru;

    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/* A running record: its outputs, the period being recorded and its control. */
typedef struct rec_run {
    record_args_t *a;
    sampler_t *s;
    rec_outs_t outs;
    rec_ctl_t ctl;
    stk_table_t *table;             /* this period's */
    profile_t prof;                 /* the metadata every period shares; the baseline */
    uint64_t n;                     /* this period's number, from 1 */
    int64_t period_ns;              /* its start, since sampling began */
    uint64_t rounds0, errors0, late0;   /* the counts when it began */
    int failed;                     /* an output could not be written: the run ends */
    int rc;                         /* the worst exit code of the writes so far */
} rec_run_t;

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

static void print_stats(const record_args_t *a, const sampler_stats_t *st, proc_t *p, unwinder_t *u,
                        kern_t *kern, stk_table_t *table, double cpu_s, int blocking);

int cmd_record(int argc, char **argv)
{
    record_args_t a;
    rec_run_t r;
    proc_t *p = NULL;
    py_target_t t;
    unwinder_t *u = NULL;
    sampler_t *s = NULL;
    kern_t *kern = NULL;
    sampler_opts_t so;
    sample_sink_t sink;
    profile_t base;
    stk_table_t *base_table = NULL;
    const sampler_stats_t *st;
    profile_meta_t whole;
    cli_target_t ct;
    pid_t pid = 0;
    int err, rc = REMORA_EXIT_OK, gone = 0, i;
    double cpu0, cpu1;
    struct sigaction sa;
    struct timespec wall;
    char name[4096];

    memset(&r, 0, sizeof r);
    memset(&whole, 0, sizeof whole);
    r.ctl.fd = r.ctl.ack = -1;
    r.outs.raw_at = -1;
    rc = parse_record(argc, argv, &a);
    if (rc != 0)
        return rc > 0 ? REMORA_EXIT_OK : REMORA_EXIT_USAGE;
    clock_gettime(CLOCK_REALTIME, &wall);
    for (i = 0; i < a.nout; i++) {
        /* the first period's names (the others differ only by their time or number) */
        if (a.out_path[i] != NULL && rec_out_name(a.out_path[i], a.fmt[i], (int64_t)wall.tv_sec * 1000000000, 1, 0,
                                                  name, sizeof name)) {
            cli_error("the name '%s' is too long once expanded; choose a shorter -o", a.out_path[i]);
            return REMORA_EXIT_USAGE;
        }
        if (rec_check_writable(a.out_path[i] != NULL ? name : NULL))
            return REMORA_EXIT_USAGE;
    }
    memset(&base, 0, sizeof base);
    if (a.diff != NULL) {
        /* read the baseline first: a bad one is found before anything is sampled */
        base_table = stk_new();
        if (base_table == NULL) {
            cli_error("out of memory");
            return REMORA_EXIT_FAIL;
        }
        rc = rec_load_profile(a.diff, base_table, &base.meta, NULL);
        if (rc != REMORA_OK) {
            stk_free(base_table);
            return rc;
        }
        base.stacks = base_table;
    }
    if (a.control != NULL && rec_ctl_open(a.control, &r.ctl)) {
        stk_free(base_table);
        return REMORA_EXIT_USAGE;
    }

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGUSR2, &sa, NULL);

    /* the engine is opened before the target is attached to: what out: frees must be
     * nothing yet when it fails */
    memset(&ct, 0, sizeof ct);
    ct.child_status = -1;
    if ((rc = cli_engine_open("record", &a.c, a.anchor, &kern)) != REMORA_EXIT_OK)
        goto out;
    rc = cli_attach(a.c.pid, a.c.cmd, a.c.subprocesses, &stop_flag, &ct);
    if (rc != REMORA_EXIT_OK || ct.ended)
        goto out;
    p = ct.p;
    t = ct.t;
    pid = ct.pid;
    if (cli_check_mode(a.c.mode, &t)) {
        rc = remora_exit_code(REMORA_EVERSION);
        goto out;
    }
    if (a.anchor && t.layout.ts_last_profiled == 0) {
        cli_error("--frame-anchor: Python %s (%s) has no last_profiled_frame to anchor; it "
                  "needs CPython 3.15: record without it", t.version, t.binary);
        rc = remora_exit_code(REMORA_EVERSION);
        goto out;
    }
    r.table = stk_new();
    /* a command that is not Python, whose descendants are (--subprocesses): no unwinder */
    if (r.table == NULL || (ct.python_pid == 0 && unw_new(p, &t, &u))) {
        cli_error("out of memory");
        rc = REMORA_EXIT_FAIL;
        goto out;
    }
    if (a.c.async && (rc = cli_async_check(u, &t)) != REMORA_EXIT_OK)
        goto out;
    r.a = &a;
    r.n = 1;
    r.outs.n = a.nout;
    r.outs.limit = a.c.limit;
    r.outs.p = p;
    for (i = 0; i < a.nout; i++) {
        r.outs.path[i] = a.out_path[i];
        r.outs.fmt[i] = a.fmt[i];
        r.outs.timeline |= a.fmt[i]->timeline;
        if (a.fmt[i]->write == NULL)
            r.outs.raw_at = i;
    }
    r.prof.baseline = base_table ? &base : NULL;
    r.prof.meta.pid = pid;
    r.prof.meta.start_unix_ns = (int64_t)wall.tv_sec * 1000000000 + wall.tv_nsec;
    r.prof.meta.rate_hz = a.c.rate;
    snprintf(r.prof.meta.python, sizeof r.prof.meta.python, "%s", t.version);
    snprintf(r.prof.meta.mode, sizeof r.prof.meta.mode, "%s", cli_mode_name(a.c.mode));
    cli_read_cmdline(pid, r.prof.meta.command, sizeof r.prof.meta.command);
    if ((rc = cli_sampler_opts("record", &a.c, &ct, u, &kern, &so)) != REMORA_EXIT_OK)
        goto out;
    so.anchor = a.anchor;
    so.max_rounds = a.max_samples;
    snprintf(r.prof.meta.engine, sizeof r.prof.meta.engine, "%s", cli_engine_name(kern));
    whole = r.prof.meta;
    if ((rc = rec_outs_begin(&r.outs, &whole, 1, 0)) != REMORA_EXIT_OK)
        goto out;
    sink.ctx = r.outs.raw;
    sink.sample = r.outs.raw != NULL ? rec_raw_sink : NULL;
    if ((err = sampler_new(u, p, r.table, &sink, &so, &s)) != REMORA_OK) {
        rc = cli_sampler_fail(err, pid, cli_holder(&a.c));
        goto out;
    }
    r.s = s;
    /* signals and commands are looked at every 10 ms, and at once on a signal */
    sampler_set_hook(s, record_hook, &r, 0.01, &poke_flag);
    if (a.every > 0)
        sampler_hook_due(s, sampler_now_ns() + (int64_t)(a.every * 1e9));  /* set anew at the start */

    cpu0 = cpu_seconds();
    err = sampler_run(s, &stop_flag, isatty(2) ? status_line : NULL, NULL);
    cpu1 = cpu_seconds();
    if (isatty(2))
        fputs("\r\033[K", stderr);
    st = sampler_stats(s);
    if (err == REMORA_ENOPROC) {
        gone = 1;
        if (ct.child != 0 && sampler_child_status(s) != -1) {
            ct.child_status = sampler_child_status(s);
            ct.child = 0;
        }
    } else if (err && !r.failed) {
        cli_error("sampling pid %d stopped: %s", (int)pid, remora_strerror(err));
        rc = err == REMORA_EPERM ? REMORA_EXIT_PERM : REMORA_EXIT_FAIL;
    }
    if (sampler_paused(s))
        sampler_pause(s, 0);        /* the time paused counted */

    /* write what was collected, whatever ended the recording: the last period (with
     * --every, one cut short), then the streams' end */
    if (!r.failed)
        write_period(&r, 0, st->end_ns - st->start_ns);
    whole.duration_s = (double)(st->end_ns - st->start_ns) / 1e9;
    whole.samples = st->rounds;
    whole.errors = st->errors;
    whole.late = st->late;
    whole.start_mono_ns = st->start_ns;
    if (rec_outs_end(&r.outs, &whole, r.n, gone ? "target exited" : r.failed ? "output failed" :
                     stop_flag ? "stopped" : "duration") != REMORA_EXIT_OK)
        r.rc = REMORA_EXIT_FAIL;
    if (r.rc != REMORA_EXIT_OK && rc == REMORA_EXIT_OK)
        rc = r.rc;
    if (a.c.subprocesses)
        fprintf(stderr, "remora: %llu subprocesses sampled\n", (unsigned long long)st->subprocesses);
    fprintf(stderr, "remora: %llu samples in %.2f s (%.0f Hz of %.0f Hz asked), %llu errors (%.2f%%), "
            "%llu partial (%.2f%%), %llu late, engine %s%s\n",
            (unsigned long long)st->rounds, whole.duration_s,
            whole.duration_s > 0 ? (double)st->rounds / whole.duration_s : 0.0, a.c.rate,
            (unsigned long long)st->errors,
            st->samples + st->errors ? 100.0 * (double)st->errors / (double)(st->samples + st->errors) : 0.0,
            (unsigned long long)st->partial, st->samples ? 100.0 * (double)st->partial / (double)st->samples : 0.0,
            (unsigned long long)st->late, cli_engine_name(kern), gone ? "; the target exited" : "");
    if (st->pauses > 0 || a.every > 0)
        fprintf(stderr, "remora: %llu periods, %llu snapshots, paused %llu times for %.2f s\n",
                (unsigned long long)r.n, (unsigned long long)r.outs.snapshots,
                (unsigned long long)st->pauses, (double)st->paused_ns / 1e9);
    if (a.stats)
        print_stats(&a, st, p, u, kern, r.table, cpu1 - cpu0, so.blocking);
    if (rc == REMORA_EXIT_OK && gone && a.c.cmd == NULL && a.c.duration > 0)
        rc = REMORA_EXIT_NOPROC;   /* the target went away before -d ended */
out:
    rec_outs_end(&r.outs, &whole, r.n, "failed");
    rec_ctl_close(&r.ctl);
    if (a.c.cmd != NULL && cli_finish_child(&ct) >= 0 && (rc == REMORA_EXIT_OK || gone))
        rc = cli_child_exit_code(ct.child_status);
    sampler_free(s);
    unw_free(u);
    kern_close(kern);               /* after every unwinder (the sampler's too) */
    stk_free(r.table);
    stk_free(base_table);
    proc_free(ct.p);
    return rc;
}

/* record --stats: the lines after the summary. */
static void print_stats(const record_args_t *a, const sampler_stats_t *st, proc_t *p, unwinder_t *u,
                        kern_t *kern, stk_table_t *table, double cpu_s, int blocking)
{
    const proc_stats_t *ps = proc_stats(p);
    double n = st->rounds ? (double)st->rounds : 1.0;
    struct rusage ru;
    unw_stats_t us;

    getrusage(RUSAGE_SELF, &ru);
    fprintf(stderr, "stats: samples=%llu errors=%llu partial=%llu reads=%llu bytes=%llu reads_per_sample=%.2f "
            "cpu_us_per_sample=%.2f\n",
            (unsigned long long)st->rounds, (unsigned long long)st->errors, (unsigned long long)st->partial,
            (unsigned long long)ps->reads, (unsigned long long)ps->bytes, (double)ps->reads / n,
            cpu_s * 1e6 / n);
    fprintf(stderr, "memory: maxrss_kb=%ld table_bytes=%zu\n", ru.ru_maxrss, stk_memory(table));
    if (a->anchor)
        fprintf(stderr, "anchor: writes=%llu writes_per_sample=%.4f\n",
                (unsigned long long)ps->writes, (double)ps->writes / n);
    memset(&us, 0, sizeof us);
    if (u != NULL)
        unw_get_stats(u, &us);
    fprintf(stderr, "parked: reused=%llu thread_samples=%llu\n", (unsigned long long)us.parked,
            (unsigned long long)us.thread_samples);
    if (kern == NULL)
        fprintf(stderr, "idle: sched_reads=%llu state_reads=%llu kept=%llu\n",
                (unsigned long long)us.idle_sched, (unsigned long long)us.idle_states,
                (unsigned long long)us.idle_kept);
    fprintf(stderr, "names: readings=%llu reads=%llu scans=%llu torn=%llu unscanned=%llu us=%llu\n",
            (unsigned long long)us.name_readings, (unsigned long long)us.name_reads,
            (unsigned long long)us.name_scans, (unsigned long long)us.name_torn,
            (unsigned long long)us.name_unscanned, (unsigned long long)(us.name_ns / 1000));
    if (blocking)
        fprintf(stderr, "held: us_per_sample=%.2f share_of_run=%.4f\n",
                (double)st->held_ns / 1e3 / n,
                st->end_ns > st->start_ns ? (double)st->held_ns / (double)(st->end_ns - st->start_ns) : 0.0);
    if (a->c.async)
        fprintf(stderr, "async: task_samples=%llu waiting=%llu unknown=%llu list_reads=%llu "
                "list_errors=%llu us_per_list_read=%.1f\n", (unsigned long long)st->tasks,
                (unsigned long long)st->task_waiting, (unsigned long long)st->task_unknown,
                (unsigned long long)st->task_reads, (unsigned long long)st->task_read_errors,
                st->task_reads ? (double)st->task_read_ns / 1e3 / (double)st->task_reads : 0.0);
    if (kern != NULL) {
        kern_stats_t ks;
        unw_kern_stats_t uk;
        kern_get_stats(kern, &ks);
        memset(&uk, 0, sizeof uk);
        if (u != NULL)
            unw_kern_get_stats(u, &uk);
        fprintf(stderr, "kernel: samples=%llu fallback=%llu unnamed=%llu ticks=%llu dropped=%llu "
                "faults=%llu nostate=%llu proc_reads=%llu taken=%llu missed=%llu gone=%llu "
                "light=%llu bpf_runs=%llu bpf_ns=%llu tick_runs=%llu tick_ns=%llu ticks_late=%llu "
                "unsettled=%llu behind=%llu\n",
                (unsigned long long)st->kernel, (unsigned long long)st->kernel_fallback,
                (unsigned long long)uk.partial, (unsigned long long)ks.ticks,
                (unsigned long long)ks.dropped, (unsigned long long)ks.faults,
                (unsigned long long)ks.nostate, (unsigned long long)uk.proc_reads,
                (unsigned long long)uk.samples, (unsigned long long)uk.missed,
                (unsigned long long)uk.gone, (unsigned long long)st->light,
                (unsigned long long)ks.run_cnt, (unsigned long long)ks.run_ns,
                (unsigned long long)ks.tick_cnt, (unsigned long long)ks.tick_ns,
                (unsigned long long)st->kernel_late, (unsigned long long)st->kernel_unsettled,
                (unsigned long long)uk.behind);
    }
    if (a->c.native && u != NULL) {
        unw_native_stats_t ns;
        unw_native_get_stats(u, &ns);
        fprintf(stderr, "native: threads=%llu frames=%llu unreadable=%llu cut=%llu "
                "unplaced=%llu\n", (unsigned long long)ns.threads,
                (unsigned long long)ns.frames, (unsigned long long)ns.unreadable,
                (unsigned long long)ns.cut, (unsigned long long)ns.unplaced);
    }
}
