/* cli/convert.c — `remora convert`: a recording (.remora) or collapsed stacks turned
 * into another format; and the profile reader record's --diff shares with it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "remora.h"
#include "cli.h"
#include "record.h"
#include "../formats/out.h"
#include "../formats/raw.h"
#include "../sample/sample.h"
#include "../util/util.h"

static char heatmap_index[4096];    /* -f heatmap -o DIR's page */

static const char reads[] = "remora reads .remora recordings and collapsed stacks";

/* What a file that is not a profile remora reads looks like, from its first bytes, for
 * the message that refuses it; bad_line its first line that is not a stack (too_long: as
 * it is longer than OUT_COLLAPSED_MAX_LINE). */
static const char *looks_like(const unsigned char *head, size_t n, char *buf, size_t cap,
                              size_t bad_line, int too_long)
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
    if (too_long) {
        snprintf(buf, cap, "text whose line %zu is longer than %u MB, far more than any "
                 "collapsed stack", bad_line, OUT_COLLAPSED_MAX_LINE >> 20);
        return buf;
    }
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
 * stacks have none: an error), with 'sources' not NULL a recording's source text into
 * *sources (NULL for collapsed stacks; the caller frees it with raw_sources_free, also
 * after an error). Anything else is refused. Returns 0, or prints one line
 * and returns an exit code. A recording damaged after some samples, or collapsed stacks
 * whose last line was cut short, keep what could be read (said once, on one line). */
int rec_load_profile(const char *path, stk_table_t *t, profile_meta_t *m, profile_t *events,
                     raw_sources_t **sources)
{
    unsigned char head[512];
    char what[160];
    const char *kind;
    size_t n;
    FILE *f;
    int fd, err;

    memset(m, 0, sizeof *m);
    if (sources != NULL)
        *sources = NULL;
    /* a regular file only: a FIFO would block, a device (/dev/zero) never end */
    fd = remora_input_open(path, &kind);
    if (fd < 0 && kind != NULL) {
        cli_error("'%s' is %s, not a profile: %s", path, kind, reads);
        return REMORA_EXIT_USAGE;
    }
    if (fd < 0 || (f = fdopen(fd, "rb")) == NULL) {
        cli_error("cannot read '%s': %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
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
            err = raw_read_sources(f, t, m, &ev, &events->nevents, sources);
            events->events = ev;
        } else {
            err = raw_read_sources(f, t, m, NULL, NULL, sources);
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
        int too_long;
        rewind(f);
        err = out_collapsed_read(f, t, OUT_COLLAPSED_MAX_LINE, &samples, &bad);
        too_long = err == REMORA_ENOMEM && bad != 0;
        if ((err == REMORA_OK || err == REMORA_ECORRUPT || too_long) && samples == 0) {
            cli_error("'%s' is not a profile (%s): %s", path,
                      looks_like(head, n, what, sizeof what, bad, too_long), reads);
            fclose(f);
            return REMORA_EXIT_USAGE;
        }
        if (too_long) {
            cli_error("'%s' line %zu is longer than %u MB, far more than any collapsed "
                      "stack: %s", path, bad, OUT_COLLAPSED_MAX_LINE >> 20, reads);
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

enum { C_OUTPUT = CLI_O_OWN, C_FORMAT, C_LIMIT, C_DIFF, C_SORT };

static const cli_opt_t convert_opts[] = {
    CLI_OPT_HELP,
    { C_OUTPUT, "-o", "--output", NULL, "FILE",
      "the output; its ending names the format", 0 },
    { C_FORMAT, "-f", "--format", NULL, "FORMAT", "the format, if -o's ending does not say", 0 },
    { C_LIMIT, "-l", "--limit", NULL, "ROWS", "rows of the table", 0 },
    { C_SORT, NULL, "--sort", NULL, "KEY", "the table's order: self (default), total or name", 0 },
    { C_DIFF, NULL, "--diff", NULL, "BASELINE",
      "a differential flamegraph against BASELINE", 0 },
    { 0 }
};

static const char convert_usage[] = "remora convert INPUT [options]";

/* convert's options. */
typedef struct convert_args {
    const char *in;                 /* INPUT */
    const char *out_path;           /* -o (NULL: stdout) */
    const char *fname, *fflag;      /* -f's value and the flag as given */
    const char *diff;               /* --diff */
    int limit;                      /* -l (0: the default) */
    int sort;                       /* --sort (OUT_SORT_*) */
} convert_args_t;

/* Returns 0, 1 after --help (printed), or -1 after one line. */
static int parse_convert(int argc, char **argv, convert_args_t *c)
{
    int i;

    memset(c, 0, sizeof *c);
    c->fflag = "-f";
    for (i = 1; i < argc; i++) {
        const char *s, *v;
        unsigned long long rows;
        switch (cli_opt_next("convert", convert_opts, argc, argv, &i, &s, &v)) {
        case CLI_ARG_BAD:
            return -1;
        case CLI_ARG_WORD:
            if (c->in != NULL) {
                cli_error("convert: one INPUT at a time: '%s' is a second one", s);
                return -1;
            }
            c->in = s;
            break;
        case CLI_O_HELP:
            cli_opt_help(stdout, convert_usage,
                         "turn a .remora recording or collapsed stacks (INPUT) into a format",
                         convert_opts);
            rec_formats_help(1);
            return 1;
        case C_OUTPUT:
            if (v == NULL || *v == '\0')
                return cli_bad_value("convert", s, v ? "" : NULL, rec_out_accepts);
            c->out_path = v;
            break;
        case C_FORMAT:
            if (v == NULL) {
                cli_error("convert: %s takes a format: none given; use one of %s", s,
                          out_format_names(1));
                return -1;
            }
            c->fname = v;
            c->fflag = s;
            break;
        case C_LIMIT:
            if (cli_parse_uint(v, 1, CLI_ROWS_MAX, &rows))
                return cli_bad_value("convert", s, v, cli_rows_accepts);
            c->limit = (int)rows;
            break;
        case C_DIFF:
            if (v == NULL || *v == '\0')
                return cli_bad_value("convert", s, v ? "" : NULL, rec_diff_accepts);
            c->diff = v;
            break;
        case C_SORT:
            if ((c->sort = out_sort_parse(v)) < 0)
                return cli_bad_value("convert", s, v, out_sort_accepts);
            break;
        }
    }
    return 0;
}

int cmd_convert(int argc, char **argv)
{
    convert_args_t c;
    const char *in, *out_path, *fname, *fflag, *diff;
    const out_format_t *fmt;
    stk_table_t *table = NULL, *base_table = NULL;
    profile_t prof, base;
    raw_sources_t *sources = NULL;
    int rc, limit;

    switch (parse_convert(argc, argv, &c)) {
    case 0: break;
    case 1: return REMORA_EXIT_OK;
    default: return REMORA_EXIT_USAGE;
    }
    in = c.in;
    out_path = c.out_path;
    fname = c.fname;
    fflag = c.fflag;
    diff = c.diff;
    limit = c.limit;
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
    if (rec_binary_to_terminal("convert", fmt, out_path ? out_path : "-"))
        return REMORA_EXIT_USAGE;
    if (diff != NULL && strcmp(fmt->name, "flamegraph") != 0) {
        cli_error("--diff draws a differential flamegraph: use -f flamegraph or an .html output");
        return REMORA_EXIT_USAGE;
    }
    out_path = rec_heatmap_path(fmt, out_path, heatmap_index, sizeof heatmap_index);
    if (rec_check_writable(out_path))
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
    /* the source a recording keeps: for the heatmap alone (no other format shows it) */
    rc = rec_load_profile(in, table, &prof.meta, fmt->timeline ? &prof : NULL,
                          strcmp(fmt->name, "heatmap") == 0 ? &sources : NULL);
    if (rc == REMORA_OK && diff != NULL) {
        rc = rec_load_profile(diff, base_table, &base.meta, NULL, NULL);
        base.stacks = base_table;
        prof.baseline = &base;
    }
    if (rc != REMORA_OK)
        goto out;
    prof.stacks = table;
    {
        /* a heatmap's source: what the recording kept, no file opened (the names are the
         * recording's, perhaps a hostile target's; the files may have changed since) */
        out_options_t oo = { limit, 0, raw_source, sources, c.sort };
        int werr = out_write_file(fmt, &prof, &oo, out_path ? out_path : "-");
        if (werr) {
            cli_error("writing '%s' failed: %s", out_path ? out_path : "stdout", strerror(errno));
            rc = REMORA_EXIT_FAIL;
        }
    }
out:
    raw_sources_free(sources);
    free((void *)prof.events);
    stk_free(table);
    stk_free(base_table);
    return rc;
}
