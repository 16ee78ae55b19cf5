/* formats/formats.c — the table of output formats, a format inferred from a path's
 * suffix, writing a profile atomically (temporary file in the same directory, then
 * rename), and the time a sample stands for. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "remora.h"
#include "out.h"
#include "../util/util.h"

static const out_format_t formats[] = {
    { .name = "flamegraph", .exts = ".html .htm", .write = out_flamegraph_write,
      .help_exts = 1, .help_at = 1 },
    { .name = "svg", .exts = ".svg", .write = out_svg_write, .help_exts = 1, .help_at = 2 },
    { .name = "firefox", .exts = ".gecko.json .firefox.json", .write = out_firefox_write,
      .timeline = 1, .help_exts = 1, .help_at = 4 },
    { .name = "speedscope", .exts = ".json .speedscope", .write = out_speedscope_write,
      .help_exts = 1, .help_at = 3 },
    { .name = "collapsed", .exts = ".collapsed .txt .folded", .write = out_collapsed_write,
      .help_exts = 2, .help_at = 6 },
    { .name = "table", .exts = ".table", .write = out_table_write },
    { .name = "pstats", .exts = ".pstats .prof", .write = out_pstats_write,
      .help_exts = 1, .help_at = 7 },
    { .name = "pprof", .exts = ".pb.gz .pprof", .write = out_pprof_write,
      .help_exts = 1, .help_at = 5 },
    { .name = "heatmap", .exts = ".heatmap.html", .write = out_heatmap_write,
      .help_exts = 1, .help_at = 8, .help_note = "(-f heatmap -o DIR: DIR/index.html)" },
    { .name = "jsonl", .exts = ".jsonl", .write = out_jsonl_write, .stream = 1,
      .help_exts = 1, .help_at = 9 },
    { .name = "raw", .exts = ".remora", .write = NULL, .help_exts = 1, .help_at = 10 },
};
#define NFORMATS (sizeof formats / sizeof formats[0])

const out_format_t *out_format_by_name(const char *name)
{
    size_t i;

    for (i = 0; i < NFORMATS; i++)
        if (strcmp(formats[i].name, name) == 0)
            return &formats[i];
    return NULL;
}

const out_format_t *out_format_at(size_t i)
{
    return i < NFORMATS ? &formats[i] : NULL;
}

/* The length of the longest of exts (space-separated) that path ends with, or 0. */
static size_t ends_with_word(const char *path, const char *exts)
{
    size_t plen = strlen(path), best = 0;
    const char *e = exts;

    while (*e) {
        size_t n = strcspn(e, " ");
        if (n > best && plen >= n && strncmp(path + plen - n, e, n) == 0)
            best = n;
        e += n;
        while (*e == ' ')
            e++;
    }
    return best;
}

/* The format whose ending is the longest the path has (".heatmap.html" over ".html"). */
const out_format_t *out_format_for_path(const char *path)
{
    const out_format_t *best = NULL;
    size_t i, n, longest = 0;

    for (i = 0; i < NFORMATS; i++)
        if ((n = ends_with_word(path, formats[i].exts)) > longest) {
            longest = n;
            best = &formats[i];
        }
    return best;
}

/* Long enough for every format of the table, each followed by ", " (checked below). */
static char list_all[128], list_writers[128];

const char *out_format_names(int writers_only)
{
    char *buf = writers_only ? list_writers : list_all;
    size_t i, n = 0;

    if (buf[0] != '\0')
        return buf;
    for (i = 0; i < NFORMATS; i++) {
        size_t len = strlen(formats[i].name);
        if (writers_only && formats[i].write == NULL)
            continue;
        if (n + len + 3 > sizeof list_all)
            break;                  /* cannot happen: the table is short */
        if (n > 0) {
            memcpy(buf + n, ", ", 2);
            n += 2;
        }
        memcpy(buf + n, formats[i].name, len);
        n += len;
    }
    buf[n] = '\0';
    return buf;
}

double out_sample_seconds(const profile_meta_t *m)
{
    /* the kernel engine: a tick is a period of its thread's CPU time (at most 100 kHz),
     * and a round's sample a period of wall time, whether or not the rounds kept up */
    if (strcmp(m->engine, "kernel") == 0 && m->rate_hz > 0 && isfinite(m->rate_hz))
        return m->rate_hz > 1e9 / SAMPLE_KERNEL_MIN_PERIOD_NS ? SAMPLE_KERNEL_MIN_PERIOD_NS / 1e9
                                                              : 1.0 / m->rate_hz;
    if (m->duration_s > 0 && m->samples > 0 && isfinite(m->duration_s))
        return m->duration_s / (double)m->samples;
    if (m->rate_hz > 0 && isfinite(m->rate_hz))
        return 1.0 / m->rate_hz;
    return 0.001;
}

int out_write_file(const out_format_t *fmt, const profile_t *p, const out_options_t *o, const char *path)
{
    char *tmp;
    FILE *f;
    int err, fd;

    if (strcmp(path, "-") == 0) {
        err = fmt->write(p, stdout, o);
        if (fflush(stdout) != 0)
            err = REMORA_EIO;
        return err;
    }
    fd = remora_output_open(path, &tmp);
    if (fd < 0)
        return errno == ENOMEM ? REMORA_ENOMEM : REMORA_EIO;
    f = fdopen(fd, "w");
    if (f == NULL) {
        close(fd);
        remora_output_done(path, tmp, 0);
        return REMORA_EIO;
    }
    err = fmt->write(p, f, o);
    if (fflush(f) != 0 || ferror(f))
        err = REMORA_EIO;
    if (fclose(f) != 0 && !err)
        err = REMORA_EIO;
    if (remora_output_done(path, tmp, !err) != 0 && !err)
        err = REMORA_EIO;
    return err;
}

/* What out_write_keep() writes: a profile in a format. */
typedef struct keep_ctx {
    const out_format_t *fmt;
    const profile_t *p;
    const out_options_t *o;
} keep_ctx_t;

static int keep_fill(int fd, void *ctx)
{
    keep_ctx_t *k = ctx;
    FILE *f = fdopen(fd, "w");
    int err;

    if (f == NULL) {
        close(fd);
        return -1;
    }
    err = k->fmt->write(k->p, f, k->o);
    if (fflush(f) != 0 || ferror(f))
        err = REMORA_EIO;
    if (fclose(f) != 0 && !err)
        err = REMORA_EIO;
    if (err == REMORA_ENOMEM)
        errno = ENOMEM;
    return err ? -1 : 0;
}

int out_write_keep(const out_format_t *fmt, const profile_t *p, const out_options_t *o,
                   const char *path, char **where)
{
    keep_ctx_t k = { fmt, p, o };

    return remora_output_keep(path, fmt->exts, keep_fill, &k, where) == 0 ? REMORA_OK : REMORA_EIO;
}
