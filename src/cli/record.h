/* cli/record.h — what record.c shares with its parts: outputs.c (the outputs of one
 * period or snapshot, their names), control.c (--control and the signals that pause,
 * resume and snapshot a running record) and summary.c (the lines that end a record).
 */
#ifndef REMORA_CLI_RECORD_H
#define REMORA_CLI_RECORD_H

#include <stdint.h>

#include "../formats/out.h"
#include "../formats/raw.h"
#include "../proc/proc.h"
#include "cli.h"

#define RECORD_MAX_OUT 16

/* outputs.c: record's outputs. A recording is one period, or with --every one period
 * after another: each period's profile written to its own files (names expanded per
 * period: %t its start, %n its number), a stream output (jsonl) to one file, a record a
 * period. A snapshot writes what the period holds so far beside the period's files. */
typedef struct rec_outs {
    int n;
    const char *path[RECORD_MAX_OUT];   /* as given (NULL: stdout), maybe with %t, %n */
    const out_format_t *fmt[RECORD_MAX_OUT];
    int raw_at;                     /* the raw output's index, or -1 */
    int timeline;                   /* an output needs the samples in order (a recording) */
    int limit;                      /* -l */
    int sort;                       /* --sort */
    proc_t *p;                      /* the target, for a heatmap's sources */
    raw_writer_t *raw;              /* this period's recording (the raw output's, or a
                                     * temporary one for the timelines) */
    char raw_path[4096];            /* its name */
    int raw_temp;                   /* ... a temporary file, removed after use */
    jsonl_writer_t *jl[RECORD_MAX_OUT]; /* the stream outputs, open for the whole run */
    uint64_t snapshots;             /* written so far */
} rec_outs_t;

/* One period's (or snapshot's) name for an output: %t the period's start (UTC,
 * 20261203T184308Z), %n its number, %% a %; a snapshot's (snap > 0) has ".snapshot-K"
 * before the format's ending. Returns 0, or -1 when it does not fit in cap. */
int rec_out_name(const char *pattern, const out_format_t *fmt, int64_t unix_ns, uint64_t n,
                 uint64_t snap, char *buf, size_t cap);

/* Does a path hold %t or %n? */
int rec_out_varies(const char *pattern);

/* Opens what a period writes as it goes: its recording (raw_start_at origin_ns) and, in
 * the first period, the streams. Returns REMORA_EXIT_OK or an exit code after one line. */
int rec_outs_begin(rec_outs_t *o, const profile_meta_t *m, uint64_t n, int64_t origin_ns);

/* Writes a period's profile (snap 0: the recording closed, the period over) or a
 * snapshot of it (snap > 0: the recording goes on), one "wrote" line per file, one error
 * line per failure. Returns REMORA_EXIT_OK or REMORA_EXIT_FAIL. */
int rec_outs_write(rec_outs_t *o, const profile_t *prof, uint64_t n, uint64_t snap);

/* Ends the streams (reason: why the recording ended) and drops an unfinished recording.
 * Returns REMORA_EXIT_OK or REMORA_EXIT_FAIL. */
int rec_outs_end(rec_outs_t *o, const profile_meta_t *whole, uint64_t periods, const char *reason);

/* Writes one profile to path ("-": stdout) in fmt, a heatmap's sources read through the
 * target p (NULL: none shown, no file opened). Returns 0, or REMORA_EIO with errno set. */
int rec_write_profile(const out_format_t *fmt, const profile_t *prof, int limit, int sort, proc_t *p,
                      const char *path);

/* The sampler's sink for the recording: each thread sample appended to it. */
int rec_raw_sink(void *ctx, const stk_table_t *t, uint32_t thread, uint32_t node,
                 int64_t t_ns, unsigned flags);

/* control.c: --control fifo:CTL[,ACK] (perf record's form): commands a line each on the
 * FIFO CTL ("pause" or "disable", "resume" or "enable", "snapshot", "stop", "ping"), each
 * answered "ack" (or "err <why>") on the FIFO ACK. */
typedef struct rec_ctl {
    int fd, ack;                    /* -1: none */
    char buf[256];
    size_t len;
} rec_ctl_t;

enum { CTL_NONE = 0, CTL_PAUSE, CTL_RESUME, CTL_SNAPSHOT, CTL_STOP, CTL_PING, CTL_BAD };

extern const char rec_ctl_accepts[];

/* Parses and opens the FIFOs (made when missing). Returns 0, or -1 after one line. */
int rec_ctl_open(const char *spec, rec_ctl_t *c);
/* The next command waiting (CTL_NONE: none); reads without blocking. */
int rec_ctl_next(rec_ctl_t *c);
/* Answers the last command. */
void rec_ctl_ack(rec_ctl_t *c, const char *answer);
void rec_ctl_close(rec_ctl_t *c);

/* record.c: record's options, and a running record. */
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
    int sort;               /* --sort: the table's order (OUT_SORT_*) */
} record_args_t;

struct sampler;
struct unwinder;
struct kern;

/* A running record: its target, its outputs, the period being recorded and its control. */
typedef struct rec_run {
    record_args_t *a;
    cli_target_t ct;                /* the target attached to, or the command launched */
    struct unwinder *u;             /* the handle's (ct.r; borrowed), NULL: a command not
                                     * Python, its descendants are */
    struct kern *kern;              /* the kernel engine, NULL: user space alone */
    struct sampler *s;
    rec_outs_t outs;
    rec_ctl_t ctl;
    stk_table_t *table;             /* this period's */
    profile_t prof;                 /* the metadata every period shares; the baseline */
    uint64_t n;                     /* this period's number, from 1 */
    int64_t period_ns;              /* its start, since sampling began */
    uint64_t rounds0, errors0, late0;   /* the counts when it began */
    uint64_t written0, idle0, partial0, paused0;
    int failed;                     /* an output could not be written: the run ends */
    int rc;                         /* the worst exit code of the writes so far */
    int gone;                       /* the target exited while sampled */
    int blocking;                   /* the sampler held the target (--blocking, --native) */
    double cpu_s;                   /* remora's CPU time while sampling */
    uint64_t rss0, rss1;            /* --mode memory: the target's resident bytes as
                                     * sampling began and ended (UINT64_MAX: unread) */
} rec_run_t;

/* summary.c: the status line while sampling (the sampler's status callback, on a
 * terminal); remora's CPU time so far, for --stats; the lines on stderr after a record,
 * of the whole run's counts (whole, its duration) and why it ended, and with --stats the
 * reads, memory and engines' counts. */
void rec_status_line(const struct sampler *s, void *ctx);
double rec_cpu_seconds(void);
void rec_print_summary(const rec_run_t *r, const profile_meta_t *whole);
void rec_print_memory(const rec_run_t *r, const profile_meta_t *whole);
void rec_print_stats(const rec_run_t *r, const profile_meta_t *whole);

/* outputs.c: what record and convert share. */
extern const char rec_out_accepts[], rec_diff_accepts[];
/* The lines after the options of `record --help` (and with writers_only `convert --help`). */
void rec_formats_help(int writers_only);
/* -f heatmap -o DIR: DIR/index.html (in buf, cap bytes); any other path as it is. */
const char *rec_heatmap_path(const out_format_t *fmt, const char *path, char *buf, size_t cap);
/* A binary format to a terminal: one line, -1; else 0. */
int rec_binary_to_terminal(const char *cmd, const out_format_t *fmt, const char *path);
/* Can an output be written to path? One line and -1 if not (NULL: stdout, yes). */
int rec_check_writable(const char *path);

/* convert.c: a profile read from a .remora recording or collapsed stacks into t and m
 * (and with events, the samples in order, for the timelines; with sources, a recording's
 * source text, NULL for collapsed stacks: raw_source serves either, freed with
 * raw_sources_free). Returns 0 or an exit code after one line. */
int rec_load_profile(const char *path, stk_table_t *t, profile_meta_t *m, profile_t *events,
                     raw_sources_t **sources);

#endif
