/* cli/outputs.c — record's outputs, a period or a snapshot at a time (record.h): the
 * names a period gives them, the recording written as the period goes (the raw output's,
 * or a temporary one the timelines are read from), the profile formats written at its
 * end, and the streams (jsonl) written a record a period over the whole run.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "remora.h"
#include "cli.h"
#include "record.h"
#include "../util/util.h"

int rec_raw_sink(void *ctx, const stk_table_t *t, uint32_t thread, uint32_t node,
                 int64_t t_ns, unsigned flags)
{
    return raw_sample(ctx, t, thread, node, t_ns, flags);
}

int rec_out_varies(const char *pattern)
{
    const char *s;

    for (s = pattern; s != NULL && (s = strchr(s, '%')) != NULL; s += 2) {
        if (s[1] == 't' || s[1] == 'n')
            return 1;
        if (s[1] == '\0')
            break;
    }
    return 0;
}

/* The length of the format's ending at the end of 'name' (the longest that matches), or 0. */
static size_t ending_len(const out_format_t *fmt, const char *name)
{
    const char *e = fmt != NULL ? fmt->exts : "";
    size_t n = strlen(name), best = 0;

    while (*e) {
        size_t k = strcspn(e, " ");
        if (k <= n && k > best && strncasecmp(name + n - k, e, k) == 0)
            best = k;
        e += k;
        while (*e == ' ')
            e++;
    }
    return best;
}

int rec_out_name(const char *pattern, const out_format_t *fmt, int64_t unix_ns, uint64_t n,
                 uint64_t snap, char *buf, size_t cap)
{
    size_t len = 0, end;
    const char *s;
    char stamp[32];
    time_t secs = (time_t)(unix_ns / 1000000000);
    struct tm tm;

    if (gmtime_r(&secs, &tm) == NULL || strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm) == 0)
        snprintf(stamp, sizeof stamp, "%lld", (long long)secs);
    for (s = pattern; *s; s++) {
        char piece[32];
        const char *add = piece;
        if (s[0] == '%' && s[1] == 't') {
            add = stamp;
            s++;
        } else if (s[0] == '%' && s[1] == 'n') {
            snprintf(piece, sizeof piece, "%llu", (unsigned long long)n);
            s++;
        } else if (s[0] == '%' && s[1] == '%') {
            piece[0] = '%', piece[1] = '\0';
            s++;
        } else {
            piece[0] = *s, piece[1] = '\0';
        }
        if (len + strlen(add) >= cap)
            return -1;
        memcpy(buf + len, add, strlen(add) + 1);
        len += strlen(add);
    }
    buf[len] = '\0';
    if (snap > 0) {
        /* before the ending, so that the tools still know the format */
        char tail[64];
        int k = snprintf(tail, sizeof tail, ".snapshot-%llu", (unsigned long long)snap);
        end = len - ending_len(fmt, buf);
        if (len + (size_t)k >= cap)
            return -1;
        memmove(buf + end + k, buf + end, len - end + 1);
        memcpy(buf + end, tail, (size_t)k);
    }
    return 0;
}

/* The heatmap's sources, as the target would read them (proc/source.c): each file once
 * per heatmap, known by its identity, within the cache's bounds. */
typedef struct rec_src {
    proc_t *p;
    proc_src_cache_t *cache;        /* made on the first file asked for */
} rec_src_t;

static void rec_source(void *ctx, const char *file, out_source_t *out)
{
    rec_src_t *c = ctx;
    const proc_src_t *s;

    memset(out, 0, sizeof *out);
    if (c->cache == NULL && (c->cache = proc_src_cache_new(c->p)) == NULL) {
        out->problem = "out of memory";
        return;
    }
    if ((s = proc_src_cache_get(c->cache, file)) == NULL)
        out->problem = "out of memory";
    else if (s->state != PROC_SRC_OK)
        out->problem = proc_src_state_str(s->state);
    else {
        out->text = s->text;
        out->len = s->len;
        out->changed = s->changed;
        out->starts = s->lines;         /* indexed once, whatever the spelling */
        out->nstarts = s->nlines;
    }
}

/* rec_write_profile(); with 'kept' not NULL, a profile that could not be written to path
 * is kept elsewhere (out_write_keep: *kept its name, malloc'd, else NULL), errno still
 * saying why path failed. */
static int write_profile(const out_format_t *fmt, const profile_t *prof, int limit, int sort, proc_t *p,
                         const char *path, char **kept)
{
    rec_src_t src = { p, NULL };
    /* no target (nothing to read a file as): no file read, none shown */
    out_options_t oo = { limit, 0, p != NULL ? rec_source : NULL, &src, sort };
    int err = out_write_file(fmt, prof, &oo, path);

    if (kept != NULL)
        *kept = NULL;
    if (err && kept != NULL && err != REMORA_ENOMEM) {
        int saved = errno;
        if (out_write_keep(fmt, prof, &oo, path, kept) != REMORA_OK)
            *kept = NULL;
        errno = saved;
    }
    proc_src_cache_free(src.cache);
    return err;
}

int rec_write_profile(const out_format_t *fmt, const profile_t *prof, int limit, int sort, proc_t *p,
                      const char *path)
{
    return write_profile(fmt, prof, limit, sort, p, path, NULL);
}

/* The one line of an output that failed (shown: its name, e: why), and where what it
 * held is kept (kept, or NULL: nowhere; what: "profile" or "recording"). */
static void failed_line(const char *shown, int e, const char *kept, const char *what)
{
    if (kept != NULL)
        cli_error("writing '%s' failed: %s; the %s is kept in %s", shown, strerror(e), what, kept);
    else
        cli_error("writing '%s' failed: %s", shown, strerror(e));
}

int rec_outs_begin(rec_outs_t *o, const profile_meta_t *m, uint64_t n, int64_t origin_ns)
{
    int i;

    for (i = 0; i < o->n && n == 1; i++) {
        if (!o->fmt[i]->stream)
            continue;
        if (jsonl_open(o->path[i], m, &o->jl[i]) != REMORA_OK) {
            cli_error("cannot write '%s': %s; choose another -o", o->path[i] ? o->path[i] : "stdout",
                      strerror(errno));
            return REMORA_EXIT_USAGE;
        }
    }
    o->raw_temp = 0;
    if (o->raw_at >= 0) {
        if (rec_out_name(o->path[o->raw_at], o->fmt[o->raw_at], m->start_unix_ns, n, 0,
                         o->raw_path, sizeof o->raw_path)) {
            cli_error("the name '%s' is too long once expanded; choose a shorter -o", o->path[o->raw_at]);
            return REMORA_EXIT_USAGE;
        }
    } else if (o->timeline) {
        /* a timeline is written from a recording: one kept aside, deleted after use */
        const char *dir = getenv("TMPDIR");
        int fd;
        snprintf(o->raw_path, sizeof o->raw_path, "%s/remora-events-XXXXXX",
                 dir && *dir && strlen(dir) < 4000 ? dir : "/tmp");
        fd = mkstemp(o->raw_path);
        if (fd < 0) {
            cli_error("cannot write a recording for the timeline in '%s': %s; set TMPDIR",
                      o->raw_path, strerror(errno));
            return REMORA_EXIT_USAGE;
        }
        close(fd);
        o->raw_temp = 1;
    } else {
        return REMORA_EXIT_OK;
    }
    if (raw_open(o->raw_path, &o->raw)) {
        cli_error("cannot write '%s': %s; choose another -o", o->raw_path, strerror(errno));
        if (o->raw_temp)
            unlink(o->raw_path);
        o->raw_temp = 0;
        return REMORA_EXIT_USAGE;
    }
    raw_start_at(o->raw, origin_ns);
    return REMORA_EXIT_OK;
}

/* A recording read back for the timelines: *ev_table and *events (freed by the caller),
 * 0 if it could not be read. */
static int read_events(const char *path, stk_table_t **ev_table, prof_event_t **events, size_t *nevents)
{
    profile_meta_t m;
    FILE *f = fopen(path, "rb");
    int ok;

    *ev_table = stk_new();
    ok = f != NULL && *ev_table != NULL && raw_read(f, *ev_table, &m, events, nevents) == REMORA_OK;
    if (f != NULL)
        fclose(f);
    return ok;
}

int rec_outs_write(rec_outs_t *o, const profile_t *prof, uint64_t n, uint64_t snap)
{
    char name[4096], events_path[sizeof o->raw_path + 16] = "", *raw_kept = NULL, *kept = NULL;
    stk_table_t *ev_table = NULL;
    prof_event_t *events = NULL;
    size_t nevents = 0;
    int i, err = REMORA_OK, raw_err = REMORA_OK, events_ok = 0, rc = REMORA_EXIT_OK, events_temp = 0;
    rec_src_t raw_src = { o->p, NULL };

    /* the recording first (closed, or copied so far), then the timelines from it */
    if (o->raw != NULL) {
        /* the raw output keeps the source its heatmap shows, read as a heatmap's is
         * (a timeline's temporary recording needs none) */
        if (o->raw_at >= 0 && o->p != NULL)
            raw_keep_source(o->raw, prof->stacks, rec_source, &raw_src);
        if (snap == 0) {
            raw_err = raw_close(o->raw, &prof->meta, 1, &raw_kept);
            o->raw = NULL;
            snprintf(events_path, sizeof events_path, "%s", o->raw_path);
            events_temp = o->raw_temp;
        } else if (o->raw_at >= 0) {
            if (rec_out_name(o->path[o->raw_at], o->fmt[o->raw_at], prof->meta.start_unix_ns, n,
                             snap, events_path, sizeof events_path))
                raw_err = (errno = ENAMETOOLONG, REMORA_EIO);
            else
                raw_err = raw_snapshot(o->raw, &prof->meta, events_path, &raw_kept);
        } else {
            snprintf(events_path, sizeof events_path, "%s.snapshot", o->raw_path);
            raw_err = raw_snapshot(o->raw, &prof->meta, events_path, NULL);
            events_temp = 1;
        }
        if (o->timeline && (raw_err == REMORA_OK || raw_kept != NULL))
            events_ok = read_events(raw_kept ? raw_kept : events_path, &ev_table, &events, &nevents);
        if (events_temp)
            unlink(events_path);
        if (snap == 0)
            o->raw_temp = 0;
        proc_src_cache_free(raw_src.cache);
    }
    for (i = 0; i < o->n; i++) {
        const char *shown;
        if (o->fmt[i]->stream) {
            err = jsonl_period(o->jl[i], prof, snap ? "snapshot" : "period", snap ? snap : n,
                               prof->meta.start_unix_ns + (int64_t)(prof->meta.duration_s * 1e9));
            if (err == REMORA_ENOMEM)
                errno = ENOMEM;
            shown = o->path[i] ? o->path[i] : "stdout";
        } else if (i == o->raw_at) {
            err = raw_err;
            shown = events_path;
        } else {
            if (o->path[i] == NULL)
                snprintf(name, sizeof name, "-");
            else if (rec_out_name(o->path[i], o->fmt[i], prof->meta.start_unix_ns, n, snap, name,
                                  sizeof name)) {
                cli_error("the name '%s' is too long once expanded; choose a shorter -o", o->path[i]);
                rc = REMORA_EXIT_FAIL;
                continue;
            }
            shown = o->path[i] ? name : "stdout";
            if (o->fmt[i]->timeline) {
                profile_t tl = *prof;
                tl.stacks = ev_table;
                tl.events = events;
                tl.nevents = nevents;
                /* an unreadable recording fails each timeline output, one line each */
                err = events_ok ? write_profile(o->fmt[i], &tl, o->limit, o->sort, o->p, name,
                                                o->path[i] ? &kept : NULL)
                                : (errno = EIO, REMORA_EIO);
            } else {
                err = write_profile(o->fmt[i], prof, o->limit, o->sort, o->p, name, o->path[i] ? &kept : NULL);
            }
        }
        if (err) {
            /* nothing collected is lost: what could not be written is kept elsewhere */
            failed_line(shown, errno, i == o->raw_at ? raw_kept : kept,
                        i == o->raw_at ? "recording" : "profile");
            rc = REMORA_EXIT_FAIL;
        } else if (o->path[i] != NULL && !o->fmt[i]->stream) {
            fprintf(stderr, "remora: wrote %s (%s)\n", shown, o->fmt[i]->name);
        }
        free(kept);
        kept = NULL;
    }
    free(raw_kept);
    stk_free(ev_table);
    free(events);
    return rc;
}

int rec_outs_end(rec_outs_t *o, const profile_meta_t *whole, uint64_t periods, const char *reason)
{
    int i, rc = REMORA_EXIT_OK;

    if (o->raw != NULL) {
        raw_close(o->raw, whole, 0, NULL);
        o->raw = NULL;
    }
    if (o->raw_temp)
        unlink(o->raw_path);
    o->raw_temp = 0;
    for (i = 0; i < o->n; i++) {
        if (o->jl[i] == NULL)
            continue;
        char *kept = NULL;
        if (jsonl_close(o->jl[i], whole, periods, reason, &kept) != REMORA_OK) {
            failed_line(o->path[i] ? o->path[i] : "stdout", errno, kept, "stream");
            free(kept);
            rc = REMORA_EXIT_FAIL;
        } else if (o->path[i] != NULL) {
            fprintf(stderr, "remora: wrote %s (%s)\n", o->path[i], o->fmt[i]->name);
        }
        o->jl[i] = NULL;
    }
    return rc;
}

/* ---- what record and convert share: the formats, the names, the checks ---------------- */

/* Prints lead, then each space-separated word of words after a space, wrapped within 78
 * columns (a line cut goes on after two spaces). */
static void put_wrapped(const char *lead, const char *words)
{
    size_t col = strlen(lead) - (lead[0] == '\n');

    fputs(lead, stdout);
    while (*words) {
        size_t n = strcspn(words, " ");
        if (col + 1 + n > 78) {
            fputs("\n ", stdout);
            col = 1;
        }
        printf(" %.*s", (int)n, words);
        col += 1 + n;
        words += n;
        while (*words == ' ')
            words++;
    }
    fputc('\n', stdout);
}

/* Appends len bytes of s to buf (n bytes held, cap in all), if they fit; returns n. */
static size_t append(char *buf, size_t cap, size_t n, const char *s, size_t len)
{
    if (n + len < cap) {
        memcpy(buf + n, s, len);
        n += len;
        buf[n] = '\0';
    }
    return n;
}

/* The formats the names' endings select, in the order of their help_at: ".html
 * flamegraph, ..., .collapsed or .txt collapsed, ..." into buf (cap bytes: the table is
 * short). */
static void endings(int writers_only, char *buf, size_t cap)
{
    const out_format_t *f;
    const char *e;
    size_t n = 0, i, len;
    int at, k;

    buf[0] = '\0';
    for (at = 1;; at++) {
        for (i = 0; (f = out_format_at(i)) != NULL && f->help_at != at; i++)
            ;
        if (f == NULL)
            break;
        if (writers_only && f->write == NULL)
            continue;
        if (n > 0)
            n = append(buf, cap, n, ", ", 2);
        for (k = 0, e = f->exts; k < f->help_exts && *e; k++) {
            if (k > 0)
                n = append(buf, cap, n, " or ", 4);
            len = strcspn(e, " ");
            n = append(buf, cap, n, e, len);
            e += len;
            while (*e == ' ')
                e++;
        }
        n = append(buf, cap, n, " ", 1);
        n = append(buf, cap, n, f->name, strlen(f->name));
        if (f->help_note != NULL) {
            n = append(buf, cap, n, " ", 1);
            n = append(buf, cap, n, f->help_note, strlen(f->help_note));
        }
    }
}

/* The lines after the options of `record --help` and `convert --help`, from the format
 * table. */
void rec_formats_help(int writers_only)
{
    char ends[512];

    put_wrapped("\nformats:", out_format_names(writers_only));
    endings(writers_only, ends, sizeof ends);
    put_wrapped("  by -o's ending:", ends);
    fputs("  without -o: the table on stdout\n", stdout);
    if (!writers_only)
        printf("\nlong recordings: --every 60 -o 'prof-%%t.pb.gz' writes a profile a minute\n"
               "  (%%t: the period's start, UTC; %%n: its number); a .jsonl output is one\n"
               "  stream, a record a period. SIGUSR1 writes a snapshot (.snapshot-K before\n"
               "  the ending), SIGUSR2 pauses or resumes; so do --control's commands.\n");
}

/* -f heatmap -o DIR: the page goes to DIR/index.html (buf, cap bytes); any other path as
 * it is. */
const char *rec_heatmap_path(const out_format_t *fmt, const char *path, char *buf, size_t cap)
{
    struct stat st;

    if (fmt == NULL || strcmp(fmt->name, "heatmap") != 0 || path == NULL || strcmp(path, "-") == 0 ||
        stat(path, &st) != 0 || !S_ISDIR(st.st_mode) ||
        snprintf(buf, cap, "%s/index.html", path) >= (int)cap)
        return path;
    return buf;
}

const char rec_out_accepts[] = "a file name (its ending picks the format, else -f), or - for stdout";
const char rec_diff_accepts[] = "a baseline profile: a .remora recording or collapsed stacks";

/* A binary format (pstats: Python's marshal) is not written to a terminal: one line
 * saying what to do instead. Returns 0, or -1 when refused. */
int rec_binary_to_terminal(const char *cmd, const out_format_t *fmt, const char *path)
{
    if (strcmp(fmt->name, "pstats") == 0 && strcmp(path, "-") == 0 && isatty(1)) {
        cli_error("%s: the pstats format is binary (Python's marshal), not for a terminal: add "
                  "-o FILE.pstats, or -f table for the table", cmd);
        return -1;
    }
    return 0;
}

/* Can an output be written to 'path'? Checked before sampling so nothing is lost. */
int rec_check_writable(const char *path)
{
    const char *why = path != NULL ? remora_output_check(path) : NULL;

    if (why != NULL) {
        cli_error("cannot write '%s': %s; choose another -o", path, why);
        return -1;
    }
    return 0;
}
