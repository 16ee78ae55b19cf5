/* cli/record.c — `remora record`: attach to a pid or launch a command, sample it,
 * and write the profile; `remora convert`: turn a recording into another format.
 * Near 700 lines: both commands share the output checks and load_profile() (record's
 * --diff baseline, convert's input); the sampling loop is sample/sampler.c. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <libgen.h>
#include <linux/magic.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include "remora.h"
#include "cli.h"
#include "../formats/out.h"
#include "../kern/kern.h"
#include "../formats/raw.h"
#include "../proc/proc.h"
#include "../py/py.h"
#include "../sample/sampler.h"
#include "../unwind/unwind.h"
#include "../util/util.h"

static volatile sig_atomic_t stop_flag;

static void on_signal(int sig)
{
    (void)sig;
    stop_flag = 1;
}

/* The sampler's sink for the raw recording: each thread sample appended to it. */
static int raw_sink_sample(void *ctx, const stk_table_t *t, uint32_t thread, uint32_t node,
                           int64_t t_ns, unsigned flags)
{
    return raw_sample(ctx, t, thread, node, t_ns, flags);
}

#define RECORD_MAX_OUT 8

typedef struct record_args {
    cli_sampling_t c;       /* -p, --, -r, -d, --mode, --no-gc, -l */
    const char *out_path[RECORD_MAX_OUT];   /* NULL: the table on stdout */
    const out_format_t *fmt[RECORD_MAX_OUT];
    int nout;
    int stats;
    int anchor;             /* --frame-anchor: 3.15's last_profiled_frame (writes) */
    uint64_t max_samples;
    const char *diff;       /* a baseline for a differential flamegraph */
} record_args_t;

enum { R_OUTPUT = CLI_O_OWN, R_FORMAT, R_MAX_SAMPLES, R_DIFF, R_FRAME_ANCHOR, R_STATS };

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
    { 0 }
};

static const char record_usage[] =
    "remora record (-p PID | -- CMD ARGS...) [options]";

/* The lines after the options of `record --help` and `convert --help`. */
static void formats_help(int writers_only)
{
    const char *names = out_format_names(writers_only);
    size_t col = 9;

    /* the names, wrapped within 80 columns */
    fputs("\nformats:", stdout);
    while (*names) {
        size_t n = strcspn(names, " ");
        if (col + 1 + n > 78) {
            fputs("\n ", stdout);
            col = 1;
        }
        printf(" %.*s", (int)n, names);
        col += 1 + n;
        names += n;
        while (*names == ' ')
            names++;
    }
    printf("\n"
           "  by -o's ending: .html flamegraph, .json speedscope, .gecko.json firefox,\n"
           "  .pb.gz pprof, .collapsed or .txt collapsed, .pstats pstats, .heatmap.html\n"
           "  heatmap (-f heatmap -o DIR: DIR/index.html)%s\n"
           "  without -o: the table on stdout\n",
           writers_only ? "" : ", .remora raw");
}

#define RECORD_MAX_SAMPLES 1000000000000ULL

/* -f heatmap -o DIR: the page goes to DIR/index.html (buf, cap bytes); any other path as
 * it is. */
static const char *heatmap_path(const out_format_t *fmt, const char *path, char *buf, size_t cap)
{
    struct stat st;

    if (fmt == NULL || strcmp(fmt->name, "heatmap") != 0 || path == NULL || strcmp(path, "-") == 0 ||
        stat(path, &st) != 0 || !S_ISDIR(st.st_mode) ||
        snprintf(buf, cap, "%s/index.html", path) >= (int)cap)
        return path;
    return buf;
}

static char heatmap_index[RECORD_MAX_OUT + 1][4096];   /* -o DIR's page, per output */

/* The source files a heatmap shows, as the target sees them (proc/source.c): the live
 * target's through its root, a gone one's or a recording's as this host names them. */
typedef struct cli_src {
    proc_t *p;
    proc_src_t s;
} cli_src_t;

static void cli_source(void *ctx, const char *file, out_source_t *out)
{
    cli_src_t *c = ctx;

    proc_src_free(&c->s);
    memset(out, 0, sizeof *out);
    if (proc_source_read(c->p, file, &c->s) != REMORA_OK)
        out->problem = "out of memory";
    else if (c->s.state != PROC_SRC_OK)
        out->problem = proc_src_state_str(c->s.state);
    else {
        out->text = c->s.text;
        out->len = c->s.len;
        out->changed = c->s.changed;
    }
}

static const char out_accepts[] = "a file name (its ending picks the format, else -f), or - for stdout";
static const char diff_accepts[] = "a baseline profile: a .remora recording or collapsed stacks";

/* A binary format (pstats: Python's marshal) is not written to a terminal: one line
 * saying what to do instead. Returns 0, or -1 when refused. */
static int binary_to_terminal(const char *cmd, const out_format_t *fmt, const char *path)
{
    if (strcmp(fmt->name, "pstats") == 0 && strcmp(path, "-") == 0 && isatty(1)) {
        cli_error("%s: the pstats format is binary (Python's marshal), not for a terminal: add "
                  "-o FILE.pstats, or -f table for the table", cmd);
        return -1;
    }
    return 0;
}

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
            formats_help(0);
            return 1;
        case R_OUTPUT:
            if (v == NULL || *v == '\0')
                return cli_bad_value("record", s, v ? "" : NULL, out_accepts);
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
                return cli_bad_value("record", s, v ? "" : NULL, diff_accepts);
            a->diff = v;
            break;
        case R_FRAME_ANCHOR:
            a->anchor = 1;
            break;
        case R_STATS:
            a->stats = 1;
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
    if (a->nout == 0) {
        /* no -o: the format asked for (the table by default) on stdout */
        a->out_path[0] = NULL;
        a->fmt[0] = out_format_by_name(fname ? fname : "table");
        a->nout = 1;
        if (a->fmt[0]->write == NULL) {
            cli_error("the raw format needs a file: add -o FILE.remora");
            return -1;
        }
        return binary_to_terminal("record", a->fmt[0], "-");
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
        if (binary_to_terminal("record", a->fmt[i], a->out_path[i]))
            return -1;
        a->out_path[i] = heatmap_path(a->fmt[i], a->out_path[i], heatmap_index[i], sizeof heatmap_index[i]);
        if (a->fmt[i]->write == NULL && strcmp(a->out_path[i], "-") == 0) {
            cli_error("the raw format cannot go to stdout: add -o FILE.remora");
            return -1;
        }
        if (a->fmt[i]->write == NULL && nraw++ > 0) {
            cli_error("record: only one raw output (-o FILE.remora): '%s' is a second one",
                      a->out_path[i]);
            return -1;
        }
    }
    return 0;
}

/* Can an output be written to 'path'? Checked before sampling so nothing is lost. */
static int check_writable(const char *path)
{
    const char *why = path != NULL ? remora_output_check(path) : NULL;

    if (why != NULL) {
        cli_error("cannot write '%s': %s; choose another -o", path, why);
        return -1;
    }
    return 0;
}

static int load_profile(const char *path, stk_table_t *t, profile_meta_t *m, profile_t *events);

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

int cmd_record(int argc, char **argv)
{
    record_args_t a;
    proc_t *p = NULL;
    py_target_t t;
    unwinder_t *u = NULL;
    stk_table_t *table = NULL;
    raw_writer_t *raw = NULL;
    sampler_t *s = NULL;
    kern_t *kern = NULL;
    sampler_opts_t so;
    sample_sink_t sink;
    profile_t prof, base;
    stk_table_t *base_table = NULL;
    const sampler_stats_t *st;
    cli_target_t ct;
    pid_t pid = 0;
    int err, raw_err, rc = REMORA_EXIT_OK, gone = 0, i, raw_at = -1, timeline = 0, events_ok = 0;
    char events_tmp[64] = "";      /* the recording kept for a timeline format when none was asked for */
    stk_table_t *ev_table = NULL;
    prof_event_t *events = NULL;
    size_t nevents = 0;
    double cpu0, cpu1;
    struct sigaction sa;
    struct timespec wall;

    rc = parse_record(argc, argv, &a);
    if (rc != 0)
        return rc > 0 ? REMORA_EXIT_OK : REMORA_EXIT_USAGE;
    for (i = 0; i < a.nout; i++)
        if (check_writable(a.out_path[i]))
            return REMORA_EXIT_USAGE;
    memset(&base, 0, sizeof base);
    if (a.diff != NULL) {
        /* read the baseline first: a bad one is found before anything is sampled */
        base_table = stk_new();
        if (base_table == NULL) {
            cli_error("out of memory");
            return REMORA_EXIT_FAIL;
        }
        rc = load_profile(a.diff, base_table, &base.meta, NULL);
        if (rc != REMORA_OK) {
            stk_free(base_table);
            return rc;
        }
        base.stacks = base_table;
    }

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

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
    table = stk_new();
    /* a command that is not Python, whose descendants are (--subprocesses): no unwinder */
    if (table == NULL || (ct.python_pid == 0 && unw_new(p, &t, &u))) {
        cli_error("out of memory");
        rc = REMORA_EXIT_FAIL;
        goto out;
    }
    if (a.c.async && (rc = cli_async_check(u, &t)) != REMORA_EXIT_OK)
        goto out;
    for (i = 0; i < a.nout; i++) {
        if (a.fmt[i]->write != NULL)
            continue;
        if (raw_at >= 0) {
            cli_error("record: only one raw output");
            rc = REMORA_EXIT_USAGE;
            goto out;
        }
        raw_at = i;
        if (raw_open(a.out_path[i], &raw)) {
            cli_error("cannot write '%s': %s; choose another -o", a.out_path[i], strerror(errno));
            rc = REMORA_EXIT_USAGE;
            goto out;
        }
    }
    for (i = 0; i < a.nout; i++)
        timeline |= a.fmt[i]->timeline;
    if (timeline && raw == NULL) {
        /* a timeline is written from a recording: keep one aside, deleted at the end */
        const char *dir = getenv("TMPDIR");
        int fd;
        snprintf(events_tmp, sizeof events_tmp, "%s/remora-events-XXXXXX",
                 dir && *dir && strlen(dir) < 32 ? dir : "/tmp");
        fd = mkstemp(events_tmp);
        if (fd < 0 || raw_open(events_tmp, &raw)) {
            cli_error("cannot write a recording for the timeline in '%s': %s; set TMPDIR",
                      events_tmp, strerror(errno));
            if (fd >= 0) {
                close(fd);
                unlink(events_tmp);
            }
            events_tmp[0] = '\0';
            rc = REMORA_EXIT_USAGE;
            goto out;
        }
        close(fd);
    }
    memset(&so, 0, sizeof so);
    so.rate_hz = a.c.rate;
    so.duration_s = a.c.duration;
    so.mode = a.c.mode;
    so.gc = a.c.gc;
    so.anchor = a.anchor;
    so.child = ct.child;
    so.max_rounds = a.max_samples;
    so.subprocesses = a.c.subprocesses;
    so.blocking = a.c.blocking || a.c.native;
    so.function = a.c.function;
    so.opcodes = a.c.opcodes;
    so.idle = a.c.idle;
    so.async = a.c.async;
    sink.ctx = raw;
    sink.sample = raw != NULL ? raw_sink_sample : NULL;
    if (a.c.native && (rc = cli_native_enable(u, pid)) != REMORA_EXIT_OK)
        goto out;
    if ((rc = cli_engine_enable("record", &a.c, u, &kern)) != REMORA_EXIT_OK)
        goto out;
    so.kern = kern;
    if ((err = sampler_new(u, p, table, &sink, &so, &s)) != REMORA_OK) {
        rc = cli_sampler_fail(err, pid, a.c.native ? "--native" : a.c.blocking ? "--blocking" : NULL);
        goto out;
    }
    memset(&prof, 0, sizeof prof);
    clock_gettime(CLOCK_REALTIME, &wall);
    prof.meta.start_unix_ns = (int64_t)wall.tv_sec * 1000000000 + wall.tv_nsec;
    cli_read_cmdline(pid, prof.meta.command, sizeof prof.meta.command);

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
    } else if (err) {
        cli_error("sampling pid %d stopped: %s", (int)pid, remora_strerror(err));
        rc = err == REMORA_EPERM ? REMORA_EXIT_PERM : REMORA_EXIT_FAIL;
    }

    prof.stacks = table;
    prof.baseline = base_table ? &base : NULL;
    prof.meta.pid = pid;
    snprintf(prof.meta.python, sizeof prof.meta.python, "%s", t.version);
    snprintf(prof.meta.mode, sizeof prof.meta.mode, "%s", cli_mode_name(a.c.mode));
    prof.meta.duration_s = (double)(st->end_ns - st->start_ns) / 1e9;
    prof.meta.rate_hz = a.c.rate;
    snprintf(prof.meta.engine, sizeof prof.meta.engine, "%s", cli_engine_name(kern));
    prof.meta.samples = st->rounds;
    prof.meta.errors = st->errors;
    prof.meta.late = st->late;
    prof.meta.start_mono_ns = st->start_ns;

    /* write what was collected, whatever ended the recording: the recording first, then
     * the timelines from it, then the rest */
    raw_err = raw != NULL ? raw_close(raw, &prof.meta, 1) : REMORA_OK;
    raw = NULL;
    err = raw_err;
    if (timeline) {
        profile_meta_t m;
        FILE *f = err ? NULL : fopen(raw_at >= 0 ? a.out_path[raw_at] : events_tmp, "rb");
        ev_table = stk_new();
        events_ok = f != NULL && ev_table != NULL &&
                    raw_read(f, ev_table, &m, &events, &nevents) == REMORA_OK;
        if (f != NULL)
            fclose(f);
    }
    for (i = 0; i < a.nout; i++) {
        const char *path = a.out_path[i] ? a.out_path[i] : "-";
        if (i == raw_at) {
            err = raw_err;          /* closed above */
        } else if (a.fmt[i]->timeline) {
            out_options_t oo = { a.c.limit, 0 };
            profile_t tl = prof;
            tl.stacks = ev_table;
            tl.events = events;
            tl.nevents = nevents;
            /* an unreadable recording fails each timeline output, one line each */
            err = events_ok ? out_write_file(a.fmt[i], &tl, &oo, path) : (errno = EIO, REMORA_EIO);
        } else {
            cli_src_t src = { p, { 0 } };
            out_options_t oo = { a.c.limit, 0, cli_source, &src };
            err = out_write_file(a.fmt[i], &prof, &oo, path);
            proc_src_free(&src.s);
        }
        if (err) {
            cli_error("writing '%s' failed: %s", a.out_path[i] ? path : "stdout", strerror(errno));
            rc = REMORA_EXIT_FAIL;
        } else if (a.out_path[i] != NULL) {
            fprintf(stderr, "remora: wrote %s (%s)\n", path, a.fmt[i]->name);
        }
    }
    if (a.c.subprocesses)
        fprintf(stderr, "remora: %llu subprocesses sampled\n", (unsigned long long)st->subprocesses);
    fprintf(stderr, "remora: %llu samples in %.2f s (%.0f Hz of %.0f Hz asked), %llu errors (%.2f%%), "
            "%llu partial (%.2f%%), %llu late, engine %s%s\n",
            (unsigned long long)st->rounds, prof.meta.duration_s,
            prof.meta.duration_s > 0 ? (double)st->rounds / prof.meta.duration_s : 0.0, a.c.rate,
            (unsigned long long)st->errors,
            st->samples + st->errors ? 100.0 * (double)st->errors / (double)(st->samples + st->errors) : 0.0,
            (unsigned long long)st->partial, st->samples ? 100.0 * (double)st->partial / (double)st->samples : 0.0,
            (unsigned long long)st->late, cli_engine_name(kern), gone ? "; the target exited" : "");
    if (a.stats) {
        const proc_stats_t *ps = proc_stats(p);
        double n = st->rounds ? (double)st->rounds : 1.0;
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        fprintf(stderr, "stats: samples=%llu errors=%llu partial=%llu reads=%llu bytes=%llu reads_per_sample=%.2f "
                "cpu_us_per_sample=%.2f\n",
                (unsigned long long)st->rounds, (unsigned long long)st->errors, (unsigned long long)st->partial,
                (unsigned long long)ps->reads, (unsigned long long)ps->bytes, (double)ps->reads / n,
                (cpu1 - cpu0) * 1e6 / n);
        fprintf(stderr, "memory: maxrss_kb=%ld table_bytes=%zu\n", ru.ru_maxrss, stk_memory(table));
        if (a.anchor)
            fprintf(stderr, "anchor: writes=%llu writes_per_sample=%.4f\n",
                    (unsigned long long)ps->writes, (double)ps->writes / n);
        unw_stats_t us;
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
        if (so.blocking)
            fprintf(stderr, "held: us_per_sample=%.2f share_of_run=%.4f\n",
                    (double)st->held_ns / 1e3 / n,
                    st->end_ns > st->start_ns ? (double)st->held_ns / (double)(st->end_ns - st->start_ns) : 0.0);
        if (a.c.async)
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
                    "light=%llu bpf_runs=%llu bpf_ns=%llu tick_runs=%llu tick_ns=%llu ticks_late=%llu unsettled=%llu\n",
                    (unsigned long long)st->kernel, (unsigned long long)st->kernel_fallback,
                    (unsigned long long)uk.partial, (unsigned long long)ks.ticks,
                    (unsigned long long)ks.dropped, (unsigned long long)ks.faults,
                    (unsigned long long)ks.nostate, (unsigned long long)uk.proc_reads,
                    (unsigned long long)uk.samples, (unsigned long long)uk.missed,
                    (unsigned long long)uk.gone, (unsigned long long)st->light,
                    (unsigned long long)ks.run_cnt, (unsigned long long)ks.run_ns,
                    (unsigned long long)ks.tick_cnt, (unsigned long long)ks.tick_ns,
                    (unsigned long long)st->kernel_late, (unsigned long long)st->kernel_unsettled);
        }
        if (a.c.native && u != NULL) {
            unw_native_stats_t ns;
            unw_native_get_stats(u, &ns);
            fprintf(stderr, "native: threads=%llu frames=%llu unreadable=%llu cut=%llu "
                    "unplaced=%llu\n", (unsigned long long)ns.threads,
                    (unsigned long long)ns.frames, (unsigned long long)ns.unreadable,
                    (unsigned long long)ns.cut, (unsigned long long)ns.unplaced);
        }
    }
    if (rc == REMORA_EXIT_OK && gone && a.c.cmd == NULL && a.c.duration > 0)
        rc = REMORA_EXIT_NOPROC;   /* the target went away before -d ended */
out:
    if (raw != NULL)
        raw_close(raw, &prof.meta, 0);
    if (events_tmp[0])
        unlink(events_tmp);
    stk_free(ev_table);
    free(events);
    if (a.c.cmd != NULL && cli_finish_child(&ct) >= 0 && (rc == REMORA_EXIT_OK || gone))
        rc = cli_child_exit_code(ct.child_status);
    sampler_free(s);
    unw_free(u);
    kern_close(kern);               /* after every unwinder (the sampler's too) */
    stk_free(table);
    stk_free(base_table);
    proc_free(ct.p);
    return rc;
}

static const char reads[] = "remora reads .remora recordings and collapsed stacks";

/* What a file that is not a profile remora reads looks like, from its first bytes, for
 * the message that refuses it. */
static const char *looks_like(const unsigned char *head, size_t n, char *buf, size_t cap,
                              size_t bad_line)
{
    size_t i = 0;

    if (n >= 2 && head[0] == 0x1f && head[1] == 0x8b)
        return "gzip data, such as a pprof profile";
    if (n >= 4 && memcmp(head, "\x7f" "ELF", 4) == 0)
        return "an ELF file";
    while (i < n && (head[i] == ' ' || head[i] == '\t' || head[i] == '\n' || head[i] == '\r'))
        i++;
    if (i < n && (head[i] == '{' || head[i] == '['))
        return "JSON, such as a speedscope or Firefox profile";
    for (i = 0; i < n; i++)
        if ((head[i] < 0x20 && head[i] != '\t' && head[i] != '\n' && head[i] != '\r') ||
            head[i] == 0x7f)
            return "binary data";
    if (bad_line == 0)
        return "no samples in it";
    snprintf(buf, cap, "text whose line %zu is not a collapsed stack, 'frame;frame COUNT'",
             bad_line);
    return buf;
}

/* Was the stream, left just past its malformed line by out_collapsed_read(), cut there:
 * that line the last one, with no newline at its end (a file truncated while written)? */
static int cut_short(FILE *f)
{
    if (fgetc(f) != EOF || fseek(f, -1, SEEK_END) != 0)
        return 0;
    return fgetc(f) != '\n';
}

/* Reads a .remora recording or collapsed stacks, recognised by their content, into t and
 * m, and with 'events' not NULL a recording's samples into events->events (collapsed
 * stacks have none: an error). Anything else is refused. Returns 0, or prints one line
 * and returns an exit code. A recording damaged after some samples, or collapsed stacks
 * whose last line was cut short, keep what could be read (said once, on one line). */
static int load_profile(const char *path, stk_table_t *t, profile_meta_t *m, profile_t *events)
{
    unsigned char head[512];
    char what[128];
    struct stat st;
    size_t n;
    FILE *f;
    int err;

    memset(m, 0, sizeof *m);
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        cli_error("'%s' is a directory, not a profile: %s", path, reads);
        return REMORA_EXIT_USAGE;
    }
    f = fopen(path, "rb");
    if (f == NULL) {
        cli_error("cannot read '%s': %s", path, strerror(errno));
        return REMORA_EXIT_USAGE;
    }
    n = fread(head, 1, sizeof head, f);
    if (ferror(f)) {
        cli_error("cannot read '%s': %s", path, strerror(errno));
        fclose(f);
        return REMORA_EXIT_USAGE;
    }
    if (n == 0) {
        cli_error("'%s' is empty, not a profile: %s", path, reads);
        fclose(f);
        return REMORA_EXIT_USAGE;
    }
    if (n >= 6 && memcmp(head, "REMORA", 6) == 0) {
        if (n < 8 || head[6] != '\0') {
            cli_error("'%s' is a .remora recording cut short in its header: nothing in it "
                      "can be read", path);
            fclose(f);
            return REMORA_EXIT_USAGE;
        }
        if (head[7] < 1 || head[7] > RAW_VERSION) {
            cli_error("'%s' is a .remora recording of version %u: this remora reads versions "
                      "1 to %d (a newer remora wrote it?)", path, head[7], RAW_VERSION);
            fclose(f);
            return REMORA_EXIT_USAGE;
        }
        rewind(f);
        if (events != NULL) {
            prof_event_t *ev = NULL;
            err = raw_read(f, t, m, &ev, &events->nevents);
            events->events = ev;
        } else {
            err = raw_read(f, t, m, NULL, NULL);
        }
        if (err == REMORA_ECORRUPT && stk_total_samples(t) == 0) {
            cli_error("'%s' is a truncated or damaged .remora recording: no sample in it can "
                      "be read", path);
            fclose(f);
            return REMORA_EXIT_USAGE;
        }
        if (err == REMORA_ECORRUPT)
            cli_error("'%s' is a truncated or damaged .remora recording; using the %llu samples "
                      "read before the damage", path, (unsigned long long)stk_total_samples(t));
    } else {
        uint64_t samples = 0;
        size_t bad = 0;
        rewind(f);
        err = out_collapsed_read(f, t, &samples, &bad);
        if ((err == REMORA_OK || err == REMORA_ECORRUPT) && samples == 0) {
            cli_error("'%s' is not a profile (%s): %s", path,
                      looks_like(head, n, what, sizeof what, bad), reads);
            fclose(f);
            return REMORA_EXIT_USAGE;
        }
        if (err == REMORA_ECORRUPT && !cut_short(f)) {
            cli_error("'%s' line %zu is not a collapsed stack, 'frame;frame COUNT': %s", path,
                      bad, reads);
            fclose(f);
            return REMORA_EXIT_USAGE;
        }
        if (events != NULL) {
            cli_error("'%s' has no sample times (collapsed stacks): a timeline needs a .remora "
                      "recording (record -o FILE.remora)", path);
            fclose(f);
            return REMORA_EXIT_USAGE;
        }
        m->samples = samples;
        snprintf(m->mode, sizeof m->mode, "wall");
        if (err == REMORA_ECORRUPT)
            cli_error("'%s' ends in a line cut short (line %zu); using the stacks before it",
                      path, bad);
    }
    fclose(f);
    if (err == REMORA_ECORRUPT)
        return REMORA_OK;
    if (err) {
        cli_error("reading '%s' failed: %s", path, remora_strerror(err));
        return REMORA_EXIT_FAIL;
    }
    return REMORA_OK;
}

enum { C_OUTPUT = CLI_O_OWN, C_FORMAT, C_LIMIT, C_DIFF };

static const cli_opt_t convert_opts[] = {
    CLI_OPT_HELP,
    { C_OUTPUT, "-o", "--output", NULL, "FILE",
      "the output; its ending names the format", 0 },
    { C_FORMAT, "-f", "--format", NULL, "FORMAT", "the format, if -o's ending does not say", 0 },
    { C_LIMIT, "-l", "--limit", NULL, "ROWS", "rows of the table", 0 },
    { C_DIFF, NULL, "--diff", NULL, "BASELINE",
      "a differential flamegraph against BASELINE", 0 },
    { 0 }
};

static const char convert_usage[] = "remora convert INPUT [options]";

int cmd_convert(int argc, char **argv)
{
    const char *in = NULL, *out_path = NULL, *fname = NULL, *fflag = "-f", *diff = NULL;
    const out_format_t *fmt;
    stk_table_t *table = NULL, *base_table = NULL;
    profile_t prof, base;
    int i, rc, limit = 0;

    for (i = 1; i < argc; i++) {
        const char *s, *v;
        unsigned long long rows;
        switch (cli_opt_next("convert", convert_opts, argc, argv, &i, &s, &v)) {
        case CLI_ARG_BAD:
            return REMORA_EXIT_USAGE;
        case CLI_ARG_WORD:
            if (in != NULL) {
                cli_error("convert: one INPUT at a time: '%s' is a second one", s);
                return REMORA_EXIT_USAGE;
            }
            in = s;
            break;
        case CLI_O_HELP:
            cli_opt_help(stdout, convert_usage,
                         "turn a .remora recording or collapsed stacks (INPUT) into a format",
                         convert_opts);
            formats_help(1);
            return REMORA_EXIT_OK;
        case C_OUTPUT:
            if (v == NULL || *v == '\0') {
                cli_bad_value("convert", s, v ? "" : NULL, out_accepts);
                return REMORA_EXIT_USAGE;
            }
            out_path = v;
            break;
        case C_FORMAT:
            if (v == NULL) {
                cli_error("convert: %s takes a format: none given; use one of %s", s,
                          out_format_names(1));
                return REMORA_EXIT_USAGE;
            }
            fname = v;
            fflag = s;
            break;
        case C_LIMIT:
            if (cli_parse_uint(v, 1, CLI_ROWS_MAX, &rows)) {
                cli_bad_value("convert", s, v, cli_rows_accepts);
                return REMORA_EXIT_USAGE;
            }
            limit = (int)rows;
            break;
        case C_DIFF:
            if (v == NULL || *v == '\0') {
                cli_bad_value("convert", s, v ? "" : NULL, diff_accepts);
                return REMORA_EXIT_USAGE;
            }
            diff = v;
            break;
        }
    }
    if (in == NULL) {
        cli_error("convert needs an input: remora convert INPUT [options] (see 'remora convert "
                  "--help')");
        return REMORA_EXIT_USAGE;
    }
    fmt = fname ? out_format_by_name(fname) : out_path ? out_format_for_path(out_path) : out_format_by_name("table");
    if (fmt == NULL || fmt->write == NULL) {
        /* every message lists the formats convert writes: all of the table but raw */
        if (fname != NULL && fmt == NULL)
            cli_error("convert: %s takes a format: '%s' is not one; use one of %s", fflag, fname,
                      out_format_names(1));
        else if (fname != NULL)
            cli_error("convert: %s takes a format convert writes: 'raw' is not one (record "
                      "writes it); use one of %s", fflag, out_format_names(1));
        else if (fmt != NULL)
            cli_error("convert cannot write the raw format (record writes it): give -o another "
                      "ending, or -f; use one of %s", out_format_names(1));
        else
            cli_error("cannot tell the format of '%s' from its name: add -f (%s)", out_path,
                      out_format_names(1));
        return REMORA_EXIT_USAGE;
    }
    if (binary_to_terminal("convert", fmt, out_path ? out_path : "-"))
        return REMORA_EXIT_USAGE;
    if (diff != NULL && strcmp(fmt->name, "flamegraph") != 0) {
        cli_error("--diff draws a differential flamegraph: use -f flamegraph or an .html output");
        return REMORA_EXIT_USAGE;
    }
    out_path = heatmap_path(fmt, out_path, heatmap_index[RECORD_MAX_OUT], sizeof heatmap_index[0]);
    if (check_writable(out_path))
        return REMORA_EXIT_USAGE;
    memset(&prof, 0, sizeof prof);
    memset(&base, 0, sizeof base);
    table = stk_new();
    base_table = diff ? stk_new() : NULL;
    if (table == NULL || (diff && base_table == NULL)) {
        cli_error("out of memory");
        rc = REMORA_EXIT_FAIL;
        goto out;
    }
    rc = load_profile(in, table, &prof.meta, fmt->timeline ? &prof : NULL);
    if (rc == REMORA_OK && diff != NULL) {
        rc = load_profile(diff, base_table, &base.meta, NULL);
        base.stacks = base_table;
        prof.baseline = &base;
    }
    if (rc != REMORA_OK)
        goto out;
    prof.stacks = table;
    {
        cli_src_t src = { NULL, { 0 } };    /* a recording's files: as this host names them */
        out_options_t oo = { limit, 0, cli_source, &src };
        int werr = out_write_file(fmt, &prof, &oo, out_path ? out_path : "-");
        proc_src_free(&src.s);
        if (werr) {
            cli_error("writing '%s' failed: %s", out_path ? out_path : "stdout", strerror(errno));
            rc = REMORA_EXIT_FAIL;
        }
    }
out:
    free((void *)prof.events);
    stk_free(table);
    stk_free(base_table);
    return rc;
}
