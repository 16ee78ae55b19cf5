/* formats/raw.c — writing and reading .remora recordings (see raw.h), with the source
 * lines their heatmap shows, kept at the end (got through the caller's callback: this
 * file reads no source) and served back to convert's. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "remora.h"
#include "raw.h"
#include "heatmap.h"
#include "../util/util.h"

_Static_assert(RAW_ON_CPU == SAMPLE_F_ON_CPU && RAW_GIL == SAMPLE_F_GIL && RAW_GC == SAMPLE_F_GC &&
               RAW_TICK == SAMPLE_F_TICK,
               "a recording's flags byte holds the SAMPLE_F_* flags as they are");

#define RAW_EXTS ".remora"          /* the format's ending (formats.c's table) */

static const char magic[8] = { 'R', 'E', 'M', 'O', 'R', 'A', 0, RAW_VERSION };

struct raw_writer {
    FILE *f;
    char *path, *tmp;
    /* what of the table is already in the file */
    size_t frames_done, nodes_done, threads_done;
    const char **thread_names;      /* name written per thread */
    size_t thread_names_cap;
    /* string pointer → id */
    const char **skeys;
    uint32_t *svals;
    size_t scap, scount;
    int64_t last_ns;
    int failed;
    /* raw_keep_source's: the next tail's source */
    const stk_table_t *src_t;
    out_source_fn src_fn;
    void *src_ctx;
};

static void put_varint(FILE *f, uint64_t v)
{
    unsigned char b[10];
    int n = 0;

    do {
        b[n] = v & 0x7f;
        v >>= 7;
        if (v)
            b[n] |= 0x80;
        n++;
    } while (v);
    fwrite(b, 1, (size_t)n, f);
}

static void put_svarint(FILE *f, int64_t v)
{
    put_varint(f, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
}

static void put_bytes(FILE *f, const char *s, size_t n)
{
    put_varint(f, n);
    fwrite(s, 1, n, f);
}

static void put_str(FILE *f, const char *s)
{
    put_bytes(f, s, strlen(s));
}

int raw_open(const char *path, raw_writer_t **out)
{
    raw_writer_t *w = calloc(1, sizeof *w);
    int fd;

    *out = NULL;
    if (w == NULL)
        return REMORA_ENOMEM;
    w->path = strdup(path);
    w->scap = 1024;
    w->skeys = calloc(w->scap, sizeof *w->skeys);
    w->svals = calloc(w->scap, sizeof *w->svals);
    if (w->path == NULL || w->skeys == NULL || w->svals == NULL)
        goto nomem;
    fd = remora_output_open(path, &w->tmp);
    if (fd < 0 || (w->f = fdopen(fd, "w")) == NULL) {
        if (fd >= 0) {
            close(fd);
            remora_output_done(path, w->tmp, 0);
            w->tmp = NULL;
        }
        free(w->path);
        free(w->tmp);
        free(w->skeys);
        free(w->svals);
        free(w);
        return REMORA_EIO;
    }
    fwrite(magic, 1, sizeof magic, w->f);
    *out = w;
    return REMORA_OK;
nomem:
    free(w->path);
    free(w->tmp);
    free(w->skeys);
    free(w->svals);
    free(w);
    return REMORA_ENOMEM;
}

/* The id of string s, writing it first if it is new. UINT32_MAX when out of memory. */
static uint32_t string_id(raw_writer_t *w, const char *s)
{
    size_t i = ((uintptr_t)s >> 3) * 0x9e3779b97f4a7c15ull >> 20 & (w->scap - 1);

    while (w->skeys[i] != NULL) {
        if (w->skeys[i] == s)
            return w->svals[i];
        i = (i + 1) & (w->scap - 1);
    }
    if ((w->scount + 1) * 2 > w->scap) {
        size_t ncap = w->scap * 2, k;
        const char **nk = calloc(ncap, sizeof *nk);
        uint32_t *nv = calloc(ncap, sizeof *nv);
        if (nk == NULL || nv == NULL) {
            free(nk);
            free(nv);
            return UINT32_MAX;
        }
        for (k = 0; k < w->scap; k++) {
            size_t j;
            if (w->skeys[k] == NULL)
                continue;
            j = ((uintptr_t)w->skeys[k] >> 3) * 0x9e3779b97f4a7c15ull >> 20 & (ncap - 1);
            while (nk[j] != NULL)
                j = (j + 1) & (ncap - 1);
            nk[j] = w->skeys[k];
            nv[j] = w->svals[k];
        }
        free(w->skeys);
        free(w->svals);
        w->skeys = nk;
        w->svals = nv;
        w->scap = ncap;
        return string_id(w, s);
    }
    w->skeys[i] = s;
    w->svals[i] = (uint32_t)w->scount++;
    fputc('S', w->f);
    put_str(w->f, s);
    return w->svals[i];
}

/* The id of string s if it is written, else UINT32_MAX. */
static uint32_t string_find(const raw_writer_t *w, const char *s)
{
    size_t i = ((uintptr_t)s >> 3) * 0x9e3779b97f4a7c15ull >> 20 & (w->scap - 1);

    while (w->skeys[i] != NULL) {
        if (w->skeys[i] == s)
            return w->svals[i];
        i = (i + 1) & (w->scap - 1);
    }
    return UINT32_MAX;
}

static int catch_up(raw_writer_t *w, const stk_table_t *t)
{
    size_t n;

    for (n = stk_nframes(t); w->frames_done < n; w->frames_done++) {
        const stk_frame_t *fr = stk_frame_at(t, (uint32_t)w->frames_done);
        uint32_t fn = string_id(w, fr->function), file = string_id(w, fr->file);
        uint32_t op = fr->op != NULL ? string_id(w, fr->op) : 0;
        if (fn == UINT32_MAX || file == UINT32_MAX || op == UINT32_MAX)
            return REMORA_ENOMEM;
        fputc(fr->op != NULL ? 'I' : fr->native ? 'C' : 'F', w->f);
        put_varint(w->f, fn);
        put_varint(w->f, file);
        put_svarint(w->f, fr->line);
        if (fr->op != NULL) {
            put_varint(w->f, op);
            put_svarint(w->f, fr->offset);
        }
    }
    n = stk_nthreads(t);
    if (n > w->thread_names_cap) {
        const char **nv = realloc(w->thread_names, n * 2 * sizeof *nv);
        if (nv == NULL)
            return REMORA_ENOMEM;
        memset(nv + w->thread_names_cap, 0, (n * 2 - w->thread_names_cap) * sizeof *nv);
        w->thread_names = nv;
        w->thread_names_cap = n * 2;
    }
    for (w->threads_done = 0; w->threads_done < n; w->threads_done++) {
        const stk_thread_t *th = stk_thread_at(t, w->threads_done);
        uint32_t name;
        if (w->thread_names[w->threads_done] == th->name)
            continue;
        name = string_id(w, th->name);
        if (name == UINT32_MAX)
            return REMORA_ENOMEM;
        fputc('T', w->f);
        put_varint(w->f, w->threads_done);
        put_varint(w->f, (uint64_t)th->tid);
        put_varint(w->f, name);
        put_varint(w->f, th->root);
        w->thread_names[w->threads_done] = th->name;
    }
    for (n = stk_nnodes(t); w->nodes_done < n; w->nodes_done++) {
        const stk_node_t *nd = stk_node_at(t, (uint32_t)w->nodes_done);
        if (nd->parent == STK_NONE)
            continue;            /* a thread's root: written with the thread */
        fputc('N', w->f);
        put_varint(w->f, w->nodes_done);
        put_varint(w->f, nd->parent);
        put_varint(w->f, nd->frame);
    }
    return REMORA_OK;
}

int raw_sample(raw_writer_t *w, const stk_table_t *t, uint32_t thread, uint32_t node,
               int64_t t_ns, unsigned flags)
{
    int err;

    if (w->failed)
        return REMORA_EIO;
    /* new threads are only ever appended, but a thread may be renamed: check cheaply */
    if (w->frames_done < stk_nframes(t) || w->nodes_done < stk_nnodes(t) ||
        thread >= w->thread_names_cap || w->thread_names[thread] != stk_thread_at(t, thread)->name) {
        err = catch_up(w, t);
        if (err)
            return err;
    }
    /* a recording's times only go forward: one before the last written is written at it
     * (and the next counts from there, not from the earlier time) */
    if (t_ns < w->last_ns)
        t_ns = w->last_ns;
    fputc('X', w->f);
    put_varint(w->f, (uint64_t)(t_ns - w->last_ns));
    put_varint(w->f, thread);
    put_varint(w->f, node);
    fputc((int)(flags & 0xff), w->f);
    w->last_ns = t_ns;
    if (ferror(w->f)) {
        w->failed = 1;
        return REMORA_EIO;
    }
    return REMORA_OK;
}

/* ---- the source kept ('L') ---- */

static const char src_over[] = "not kept in the recording (past its bound of source text)";

/* What is kept so far of all files: RAW_SRC_FILES, RAW_SRC_BYTES, RAW_SRC_LINES's. */
typedef struct src_budget {
    size_t files;
    uint64_t bytes, lines;
} src_budget_t;

/* The lines kept of file fl (of h's counts), n lines long: each line sampled with
 * RAW_SRC_CONTEXT either side, as the heatmap shows them. Calls put(ctx, line) on each in
 * order; returns how many. */
static size_t each_kept(const hm_t *h, const hm_file_t *fl, size_t n,
                        void (*put)(void *, long), void *ctx)
{
    long next = 1, ln;
    size_t k, count = 0;

    for (k = 0; k < fl->nlines; k++) {
        long l = h->lines[fl->lines[k]].line;
        long from = l - RAW_SRC_CONTEXT > next ? l - RAW_SRC_CONTEXT : next;
        long to = l + RAW_SRC_CONTEXT < (long)n ? l + RAW_SRC_CONTEXT : (long)n;
        for (ln = from; ln <= to; ln++, count++)
            if (put != NULL)
                put(ctx, ln);
        if (to + 1 > next)
            next = to + 1;
    }
    return count;
}

typedef struct kept_ctx {
    FILE *f;
    const char *text;
    const uint32_t *starts;
    size_t n;
    long prev, last;
    uint64_t bytes;
} kept_ctx_t;

static void kept_line(kept_ctx_t *k, long ln, int write)
{
    size_t len;
    const char *s = lines_get(k->text, k->starts, k->n, ln, 0, &len);

    if (s == NULL)
        len = 0;
    if (len > RAW_SRC_LINE)
        len = RAW_SRC_LINE;
    k->bytes += len;
    k->last = ln;
    if (write) {
        put_varint(k->f, (uint64_t)(ln - k->prev));
        put_bytes(k->f, s != NULL ? s : "", len);
        k->prev = ln;
    }
}

static void count_line(void *ctx, long ln)
{
    kept_line(ctx, ln, 0);
}

static void write_line(void *ctx, long ln)
{
    kept_line(ctx, ln, 1);
}

/* One file's 'L' record: its source got through w's callback, the lines the heatmap
 * shows of it kept, b's bounds kept. */
static void put_file_source(raw_writer_t *w, FILE *f, const hm_t *h, const hm_file_t *fl, uint32_t id,
                            src_budget_t *b)
{
    out_source_t src;
    kept_ctx_t k = { f, NULL, NULL, 0, 0, 0, 0 };
    uint32_t *starts = NULL;
    const char *problem;
    size_t nkept = 0;

    memset(&src, 0, sizeof src);
    if (b->files >= RAW_SRC_FILES)
        problem = src_over;
    else {
        w->src_fn(w->src_ctx, fl->file, &src);
        problem = src.problem;
    }
    if (problem == NULL && lines_index(src.text, src.len, &starts, &k.n) != 0)
        problem = "out of memory";          /* as the heatmap would say */
    if (problem == NULL) {
        k.text = src.text != NULL ? src.text : "";
        k.starts = starts;
        nkept = each_kept(h, fl, k.n, count_line, &k);
        /* the convert side rebuilds a text of the lines up to the one after the last
         * kept (raw_source): that is what RAW_SRC_LINES bounds */
        if (b->bytes + k.bytes > RAW_SRC_BYTES ||
            b->lines + (uint64_t)k.last + 1 > RAW_SRC_LINES)
            problem = src_over;
    }
    fputc('L', f);
    put_varint(f, id);
    /* a reason is a short constant; the reader takes no longer one */
    put_bytes(f, problem != NULL ? problem : "", problem != NULL ? strnlen(problem, RAW_SRC_WHY) : 0);
    if (problem != NULL) {
        put_varint(f, 0);
        put_varint(f, 0);
        put_varint(f, 0);
    } else {
        b->files++;
        b->bytes += k.bytes;
        b->lines += (uint64_t)k.last + 1;
        put_varint(f, src.changed != 0);
        put_varint(f, k.n);
        put_varint(f, nkept);
        k.prev = 0;
        each_kept(h, fl, k.n, write_line, &k);
    }
    free(starts);
}

/* The 'L' records of the files of the samples (raw_keep_source's table), the files most
 * sampled first (the heatmap's order), each one whose name the recording holds. Out of
 * memory: none (the recording stays whole). */
static void put_sources(raw_writer_t *w, FILE *f)
{
    src_budget_t b = { 0, 0, 0 };
    uint32_t *order = NULL, *top = NULL;
    hm_t h;
    size_t i;

    if (w->src_fn == NULL || w->src_t == NULL)
        return;
    if (hm_count(&h, w->src_t, &order, &top) == 0)
        for (i = 0; i < h.nfiles; i++) {
            const hm_file_t *fl = &h.files[order[i]];
            uint32_t id = string_find(w, fl->file);
            if (id != UINT32_MAX)
                put_file_source(w, f, &h, fl, id, &b);
        }
    hm_free(&h);
    free(order);
    free(top);
}

void raw_keep_source(raw_writer_t *w, const stk_table_t *t, out_source_fn source, void *ctx)
{
    w->src_t = t;
    w->src_fn = source;
    w->src_ctx = ctx;
}

/* The source kept, the metadata and the end. */
static void put_tail(raw_writer_t *w, FILE *f, const profile_meta_t *m)
{
    put_sources(w, f);
    fputc('M', f);
    put_varint(f, (uint64_t)m->pid);
    put_str(f, m->command);
    put_str(f, m->python);
    put_str(f, m->mode);
    put_varint(f, (uint64_t)(m->duration_s * 1e9));
    put_varint(f, (uint64_t)(m->rate_hz * 1000));
    put_varint(f, m->samples);
    put_varint(f, m->errors);
    put_varint(f, m->late);
    put_svarint(f, m->start_unix_ns);
    put_svarint(f, m->start_mono_ns);
    put_str(f, m->engine);
    put_varint(f, m->sample_bytes);   /* version 5: --mode memory's bytes a sample stands for */
    put_varint(f, m->written);
    put_varint(f, m->idle);
    put_varint(f, (uint64_t)(m->idle_kept != 0));
    put_varint(f, m->partial);
    put_varint(f, (uint64_t)(m->paused_s > 0 ? m->paused_s * 1e9 : 0));
    fputc('Z', f);
}

void raw_start_at(raw_writer_t *w, int64_t t_ns)
{
    w->last_ns = t_ns;
}

/* What a snapshot or a kept recording holds: what is written so far (whole records: the
 * stream was flushed between two), read back through the writer's own descriptor (its
 * name may be gone with its directory), then with m the metadata and the end. */
typedef struct raw_copy {
    raw_writer_t *w;
    const profile_meta_t *m;        /* NULL: the end is written already */
} raw_copy_t;

/* Writes a raw_copy_t into fd and closes it (remora_output_keep's fill). 0, or -1. */
static int copy_fill(int fd, void *ctx)
{
    raw_copy_t *c = ctx;
    char buf[65536];
    FILE *out = fdopen(fd, "w");
    off_t at = 0;
    ssize_t n;
    int err = 0;

    if (out == NULL) {
        close(fd);
        return -1;
    }
    while ((n = pread(fileno(c->w->f), buf, sizeof buf, at)) > 0) {
        if (fwrite(buf, 1, (size_t)n, out) != (size_t)n)
            break;
        at += n;
    }
    if (n < 0)
        err = -1;
    if (c->m != NULL)
        put_tail(c->w, out, c->m);
    if (fflush(out) != 0 || ferror(out))
        err = -1;
    if (fclose(out) != 0)
        err = -1;
    return err;
}

int raw_snapshot(raw_writer_t *w, const profile_meta_t *m, const char *path, char **kept)
{
    raw_copy_t c = { w, m };
    char *tmp = NULL;
    int fd, err = REMORA_OK;

    if (kept != NULL)
        *kept = NULL;
    if (w->failed || fflush(w->f) != 0)
        return REMORA_EIO;
    if (w->tmp == NULL) {
        errno = ESPIPE;             /* written in place (a device, a FIFO): nothing to copy */
        return REMORA_EIO;
    }
    fd = remora_output_open(path, &tmp);
    if (fd < 0 || copy_fill(fd, &c) != 0)
        err = REMORA_EIO;
    if (fd >= 0 && remora_output_done(path, tmp, !err) != 0)
        err = REMORA_EIO;
    if (err && kept != NULL) {
        int saved = errno;
        if (remora_output_keep(path, RAW_EXTS, copy_fill, &c, kept) != 0)
            *kept = NULL;
        errno = saved;
    }
    w->src_fn = NULL;               /* its ctx is the caller's for this call only */
    return err;
}

int raw_close(raw_writer_t *w, const profile_meta_t *m, int commit, char **kept)
{
    int err = w->failed ? REMORA_EIO : REMORA_OK;
    char *tmp;

    if (kept != NULL)
        *kept = NULL;
    if (commit && !err)
        put_tail(w, w->f, m);
    if (fflush(w->f) != 0 || ferror(w->f))
        err = REMORA_EIO;
    if (commit && !err && w->tmp != NULL) {
        /* renamed while still open: if it cannot be (its directory removed), the
         * recording is still there to copy through the descriptor */
        tmp = w->tmp;
        w->tmp = NULL;
        if (remora_output_done(w->path, tmp, 1) != 0) {
            raw_copy_t c = { w, NULL };
            int saved = errno;
            err = REMORA_EIO;
            if (kept != NULL && remora_output_keep(w->path, RAW_EXTS, copy_fill, &c, kept) != 0)
                *kept = NULL;
            errno = saved;
        }
    }
    if (fclose(w->f) != 0 && !err)
        err = REMORA_EIO;
    if (remora_output_done(w->path, w->tmp, 0) != 0 && !err)
        err = REMORA_EIO;
    free(w->path);
    free(w->skeys);
    free(w->svals);
    free(w->thread_names);
    free(w);
    return err;
}

/* ---- reading ---- */

typedef struct rd {
    FILE *f;
    int bad;
} rd_t;

static uint64_t get_varint(rd_t *r)
{
    uint64_t v = 0;
    int shift = 0, c;

    for (;;) {
        c = fgetc(r->f);
        if (c == EOF || shift > 63) {
            r->bad = 1;
            return 0;
        }
        v |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80))
            return v;
        shift += 7;
    }
}

static int64_t get_svarint(rd_t *r)
{
    uint64_t u = get_varint(r);
    return (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
}

#define RAW_MAX_STRING (16u << 20)

static char *get_str(rd_t *r)
{
    uint64_t n = get_varint(r);
    char *s;

    if (r->bad || n > RAW_MAX_STRING) {
        r->bad = 1;
        return NULL;
    }
    s = malloc(n + 1);
    if (s == NULL || fread(s, 1, n, r->f) != n) {
        free(s);
        r->bad = 1;
        return NULL;
    }
    s[n] = '\0';
    return s;
}

typedef struct vec32 {
    uint32_t *v;
    size_t n, cap;
} vec32_t;

static int vec_put(vec32_t *v, size_t at, uint32_t x)
{
    if (at >= v->cap) {
        size_t ncap = v->cap ? v->cap : 256;
        uint32_t *nv;
        while (ncap <= at)
            ncap *= 2;
        if (ncap > (1u << 31))
            return -1;
        nv = realloc(v->v, ncap * sizeof *nv);
        if (nv == NULL)
            return -1;
        memset(nv + v->cap, 0xff, (ncap - v->cap) * sizeof *nv);
        v->v = nv;
        v->cap = ncap;
    }
    v->v[at] = x;
    if (at >= v->n)
        v->n = at + 1;
    return 0;
}

static uint32_t vec_get(const vec32_t *v, uint64_t at)
{
    return at < v->n ? v->v[at] : STK_NONE;
}

static void copy_field(char *dst, size_t cap, char *src)
{
    snprintf(dst, cap, "%s", src ? src : "");
    free(src);
}

/* One file's source as a recording keeps it ('L'). */
typedef struct raw_src_file {
    const char *file;               /* interned in the table read */
    size_t seq;                     /* its record's place: a later one for a file wins */
    char *problem;                  /* NULL: its text kept */
    int changed;
    size_t nlines;                  /* the file's */
    size_t nkept;
    uint32_t *line;                 /* the kept lines' numbers, ascending */
    uint32_t *off;                  /* each kept line's text in 'text' (nkept + 1) */
    char *text;
} raw_src_file_t;

struct raw_sources {
    int kept;                       /* the recording is of a version that keeps source */
    raw_src_file_t *files;
    size_t n, cap;
    int sorted;
    char *built;                    /* the text raw_source gave last */
};

/* A recording being read: the records so far, numbered as the writer numbered them. */
typedef struct raw_in {
    rd_t r;
    int version;                    /* the header's */
    stk_table_t *t;
    profile_meta_t *m;
    prof_event_t **events;          /* NULL: events not kept */
    size_t *nevents, cap_events;
    int64_t now;                    /* the last event's time */
    uint64_t max_id;                /* no node number reaches it (see raw_read) */
    const char **strings;
    size_t nstrings, capstrings;
    vec32_t frames, nodes, threads;
    raw_sources_t *src;             /* NULL: 'L' records read past */
    size_t src_records, src_texts;  /* 'L' records so far, those with text, and their */
    uint64_t src_bytes, src_lines;  /* bytes and lines: the writer's bounds (raw.h) */
} raw_in_t;

/* Each record's reader, after its tag: 0 (read), -1 (not readable: the reading stops,
 * the recording corrupt) or REMORA_ENOMEM. */

/* S: a string, interned. */
static int rec_string(raw_in_t *in)
{
    char *s = get_str(&in->r);

    if (s == NULL)
        return -1;
    if (in->nstrings == in->capstrings) {
        size_t ncap = in->capstrings ? in->capstrings * 2 : 256;
        const char **nv = realloc(in->strings, ncap * sizeof *nv);
        if (nv == NULL) {
            free(s);
            return REMORA_ENOMEM;
        }
        in->strings = nv;
        in->capstrings = ncap;
    }
    in->strings[in->nstrings++] = stk_intern(in->t, s);
    free(s);
    return 0;
}

/* F (a Python frame) or C (a native one): function, file, line. */
static int rec_frame(raw_in_t *in, int c)
{
    uint64_t fn = get_varint(&in->r), file = get_varint(&in->r);
    int64_t line = get_svarint(&in->r);
    uint32_t id;

    if (in->r.bad || fn >= in->nstrings || file >= in->nstrings)
        return -1;
    id = stk_frame_kind(in->t, in->strings[fn], in->strings[file], (int)line, c == 'C');
    return id == STK_NONE || vec_put(&in->frames, in->frames.n, id) ? -1 : 0;
}

/* I: an --opcodes frame: function, file, line, the instruction's name and offset. */
static int rec_op_frame(raw_in_t *in)
{
    uint64_t fn = get_varint(&in->r), file = get_varint(&in->r);
    int64_t line = get_svarint(&in->r);
    uint64_t op = get_varint(&in->r);
    int64_t offset = get_svarint(&in->r);
    uint32_t id;

    if (in->r.bad || fn >= in->nstrings || file >= in->nstrings || op >= in->nstrings || offset < 0 ||
        offset > (1 << 30))
        return -1;
    id = stk_frame_op(in->t, in->strings[fn], in->strings[file], (int)line, in->strings[op], (int)offset);
    return id == STK_NONE || vec_put(&in->frames, in->frames.n, id) ? -1 : 0;
}

/* T: a thread (index, tid, name, its root's node number), or one renamed. */
static int rec_thread(raw_in_t *in)
{
    stk_table_t *t = in->t;
    uint64_t idx = get_varint(&in->r), tid = get_varint(&in->r), name = get_varint(&in->r);
    uint64_t root = get_varint(&in->r);
    uint32_t th;

    if (in->r.bad || name >= in->nstrings || idx > in->threads.n || root >= in->max_id)
        return -1;
    th = vec_get(&in->threads, idx);
    if (th != STK_NONE) {
        /* a thread written again under another name: the one it had stood for
         * this one not known yet (the kernel's, until its Python name was read) */
        if (stk_thread_at(t, th)->tid != (pid_t)tid || stk_thread_rename(t, th, in->strings[name]))
            return -1;
        return 0;
    }
    th = stk_thread(t, (pid_t)tid, in->strings[name]);
    if (th == STK_NONE || vec_put(&in->threads, idx, th) ||
        vec_put(&in->nodes, root, stk_thread_at(t, th)->root))
        return -1;
    return 0;
}

/* N: a trie node (number, parent's number, frame). */
static int rec_node(raw_in_t *in)
{
    uint64_t id = get_varint(&in->r), parent = get_varint(&in->r), frame = get_varint(&in->r);
    uint32_t p = vec_get(&in->nodes, parent), fr = vec_get(&in->frames, frame), node;

    if (in->r.bad || p == STK_NONE || fr == STK_NONE || id >= in->max_id)
        return -1;
    node = stk_child(in->t, p, fr);
    return node == STK_NONE || vec_put(&in->nodes, id, node) ? -1 : 0;
}

/* X: a sample (time since the last, thread, node, flags), counted; kept as an event
 * when asked. */
static int rec_sample(raw_in_t *in)
{
    uint64_t dt = get_varint(&in->r), thread = get_varint(&in->r), node = get_varint(&in->r);
    uint32_t th = vec_get(&in->threads, thread), nd = vec_get(&in->nodes, node);
    int flags = fgetc(in->r.f);

    if (in->r.bad || flags == EOF || th == STK_NONE || nd == STK_NONE || dt > INT64_MAX / 2)
        return -1;
    stk_add_at(in->t, th, nd, 1);
    in->now = (int64_t)dt > INT64_MAX - in->now ? INT64_MAX : in->now + (int64_t)dt;
    if (in->events != NULL) {
        prof_event_t *e;
        if (remora_grow((void **)in->events, &in->cap_events, *in->nevents + 1, sizeof **in->events))
            return REMORA_ENOMEM;
        e = &(*in->events)[(*in->nevents)++];
        e->t_ns = in->now;
        e->thread = th;
        e->node = nd;
        e->flags = (unsigned)flags;
    }
    return 0;
}

static void src_file_free(raw_src_file_t *e)
{
    free(e->problem);
    free(e->line);
    free(e->off);
    free(e->text);
}

/* L: a file's source (file, problem, changed, nlines, nkept, then each kept line's gap
 * and text), held to the writer's bounds: past them, or a line out of order or holding
 * a line's end, the recording is damaged there. Kept in in->src when it is not NULL. */
static int rec_source_lines(raw_in_t *in)
{
    rd_t *r = &in->r;
    raw_src_file_t e;
    uint64_t file = get_varint(r), changed, nlines, nkept, k, at = 0, gap, len;
    size_t tcap = 0, lcap = 0, ocap = 0, bytes = 0;
    int got = -1;

    memset(&e, 0, sizeof e);
    e.problem = get_str(r);
    changed = get_varint(r);
    nlines = get_varint(r);
    nkept = get_varint(r);
    if (r->bad || file >= in->nstrings || strlen(e.problem) > RAW_SRC_WHY || changed > 1 ||
        nlines > RAW_SRC_LINES || nkept > nlines || (e.problem[0] != '\0' && nlines + nkept > 0) ||
        ++in->src_records > in->nstrings)
        goto out;                   /* a writer writes one a file, named by a string */
    if (e.problem[0] == '\0') {
        free(e.problem);
        e.problem = NULL;
        if (++in->src_texts > RAW_SRC_FILES)
            goto out;
    }
    e.file = in->strings[file];
    e.changed = (int)changed;
    e.nlines = (size_t)nlines;
    e.nkept = (size_t)nkept;
    /* the arrays grown as the lines are read: nkept is only what the file says */
    for (k = 0;; k++) {
        if (remora_grow((void **)&e.line, &lcap, k + 1, sizeof *e.line) ||
            remora_grow((void **)&e.off, &ocap, k + 1, sizeof *e.off)) {
            got = REMORA_ENOMEM;
            goto out;
        }
        e.off[k] = (uint32_t)bytes;
        if (k == nkept)
            break;
        gap = get_varint(r);
        len = get_varint(r);
        if (r->bad || gap == 0 || gap > nlines - at || len > RAW_SRC_LINE ||
            in->src_bytes + bytes + len > RAW_SRC_BYTES || in->src_lines + at + gap + 1 > RAW_SRC_LINES)
            goto out;
        at += gap;
        if (remora_grow((void **)&e.text, &tcap, bytes + len + 1, 1)) {
            got = REMORA_ENOMEM;
            goto out;
        }
        if (fread(e.text + bytes, 1, len, r->f) != len || memchr(e.text + bytes, '\n', len) != NULL ||
            memchr(e.text + bytes, '\r', len) != NULL)
            goto out;
        e.line[k] = (uint32_t)at;
        bytes += len;
    }
    if (e.problem == NULL) {
        in->src_bytes += bytes;
        in->src_lines += at + 1;    /* what raw_source's text of it holds, at most */
    }
    if (in->src == NULL) {
        got = 0;
        goto out;
    }
    if (remora_grow((void **)&in->src->files, &in->src->cap, in->src->n + 1, sizeof *in->src->files)) {
        got = REMORA_ENOMEM;
        goto out;
    }
    e.seq = in->src->n;
    in->src->files[in->src->n++] = e;
    return 0;
out:
    src_file_free(&e);
    return got;
}

/* M: the recording's metadata (fields added by later versions read as the header says). */
static void rec_meta(raw_in_t *in)
{
    profile_meta_t *m = in->m;
    rd_t *r = &in->r;
    uint64_t pid = get_varint(r);

    m->pid = (pid_t)pid;
    copy_field(m->command, sizeof m->command, get_str(r));
    copy_field(m->python, sizeof m->python, get_str(r));
    copy_field(m->mode, sizeof m->mode, get_str(r));
    m->duration_s = (double)get_varint(r) / 1e9;
    m->rate_hz = (double)get_varint(r) / 1000.0;
    m->samples = get_varint(r);
    m->errors = get_varint(r);
    m->late = get_varint(r);
    m->start_unix_ns = get_svarint(r);
    if (in->version >= 2)
        m->start_mono_ns = get_svarint(r);
    if (in->version >= 3)
        copy_field(m->engine, sizeof m->engine, get_str(r));
    if (in->version >= 5)
        m->sample_bytes = get_varint(r);
    if (in->version >= 6) {
        m->counted = 1;
        m->written = get_varint(r);
        m->idle = get_varint(r);
        m->idle_kept = get_varint(r) != 0;
        m->partial = get_varint(r);
        m->paused_s = (double)get_varint(r) / 1e9;
    }
}

int raw_read(FILE *f, stk_table_t *t, profile_meta_t *m, prof_event_t **events, size_t *nevents)
{
    return raw_read_sources(f, t, m, events, nevents, NULL);
}

int raw_read_sources(FILE *f, stk_table_t *t, profile_meta_t *m, prof_event_t **events,
                     size_t *nevents, raw_sources_t **sources)
{
    char head[8];
    raw_in_t in = { .r = { f, 0 }, .t = t, .m = m, .events = events, .nevents = nevents };
    int err = REMORA_ECORRUPT, c, got;

    memset(m, 0, sizeof *m);
    if (events != NULL) {
        *events = NULL;
        *nevents = 0;
    }
    if (sources != NULL && (*sources = in.src = calloc(1, sizeof **sources)) == NULL)
        return REMORA_ENOMEM;
    if (fread(head, 1, 8, f) != 8 || memcmp(head, magic, 7) != 0 || head[7] < 1 ||
        head[7] > RAW_VERSION)
        return ferror(f) ? REMORA_EIO : REMORA_ECORRUPT;
    in.version = head[7];
    /* Node numbers index a table as long as the largest: each node has a record of its
     * own (N, or the T of the thread it is the root of) of 4 bytes at least, so a number
     * past the file's length is damage, and the table never outgrows 4 bytes a byte of
     * the file (a stream of unknown length: 2^31 nodes, as the writer's table) */
    in.max_id = 1u << 31;
    {
        long here = ftell(f), end;
        if (here >= 0 && fseek(f, 0, SEEK_END) == 0 && (end = ftell(f)) >= 0 &&
            fseek(f, here, SEEK_SET) == 0 && (uint64_t)end < in.max_id)
            in.max_id = (uint64_t)end;
    }
    if (in.src != NULL)
        in.src->kept = in.version >= 4;
    while ((c = fgetc(f)) != EOF && !in.r.bad) {
        if (c == 'Z') {
            err = in.r.bad ? REMORA_ECORRUPT : REMORA_OK;
            break;
        }
        switch (c) {
        case 'S': got = rec_string(&in); break;
        case 'F': case 'C': got = rec_frame(&in, c); break;
        case 'I': got = rec_op_frame(&in); break;
        case 'T': got = rec_thread(&in); break;
        case 'N': got = rec_node(&in); break;
        case 'X': got = rec_sample(&in); break;
        case 'L': got = rec_source_lines(&in); break;
        case 'M': rec_meta(&in); got = 0; break;
        default: got = -1; break;
        }
        if (got == REMORA_ENOMEM) {
            err = REMORA_ENOMEM;
            goto out;
        }
        if (got != 0)
            break;
    }
    if (ferror(f))
        err = REMORA_EIO;
out:
    free(in.strings);
    free(in.frames.v);
    free(in.nodes.v);
    free(in.threads.v);
    return err;
}

/* ---- the source kept, served ---- */

static int by_file(const void *a, const void *b)
{
    const raw_src_file_t *x = a, *y = b;
    int c = strcmp(x->file, y->file);

    return c != 0 ? c : (x->seq > y->seq) - (x->seq < y->seq);
}

/* The last record kept for file, or NULL. */
static const raw_src_file_t *src_find(raw_sources_t *s, const char *file)
{
    size_t lo = 0, hi = s->n;

    if (!s->sorted && s->n > 0) {
        qsort(s->files, s->n, sizeof *s->files, by_file);
        s->sorted = 1;
    }
    /* the first entry past file's, then one back */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(s->files[mid].file, file) <= 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo > 0 && strcmp(s->files[lo - 1].file, file) == 0 ? &s->files[lo - 1] : NULL;
}

void raw_source(void *ctx, const char *file, out_source_t *out)
{
    raw_sources_t *s = ctx;
    const raw_src_file_t *e;
    size_t k, upto, line;
    char *p;

    memset(out, 0, sizeof *out);
    if (s == NULL) {
        out->problem = "not in the input (collapsed stacks hold no source)";
        return;
    }
    free(s->built);
    s->built = NULL;
    if (!s->kept) {
        out->problem = "not in the recording (made before recordings kept source)";
        return;
    }
    if ((e = src_find(s, file)) == NULL) {
        out->problem = "not in the recording";
        return;
    }
    if (e->problem != NULL) {
        out->problem = e->problem;
        return;
    }
    /* a text of the file's lines up to the one after the last kept (so the heatmap counts
     * as many as it needs: raw.h), the lines not kept empty */
    upto = e->nkept > 0 ? e->line[e->nkept - 1] + 1 : 1;
    if (upto > e->nlines)
        upto = e->nlines;
    if ((p = s->built = malloc(upto + e->off[e->nkept] + 1)) == NULL) {
        out->problem = "out of memory";
        return;
    }
    for (k = 0, line = 1; line <= upto; line++) {
        if (k < e->nkept && e->line[k] == line) {
            size_t n = e->off[k + 1] - e->off[k];
            if (n > 0)
                memcpy(p, e->text + e->off[k], n);
            p += n;
            k++;
        }
        *p++ = '\n';
    }
    out->text = s->built;
    out->len = (size_t)(p - s->built);
    out->changed = e->changed;
}

void raw_sources_free(raw_sources_t *s)
{
    size_t i;

    if (s == NULL)
        return;
    for (i = 0; i < s->n; i++)
        src_file_free(&s->files[i]);
    free(s->files);
    free(s->built);
    free(s);
}
