/* formats/raw.c — writing and reading .remora recordings (see raw.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "remora.h"
#include "raw.h"
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

static void put_str(FILE *f, const char *s)
{
    size_t n = strlen(s);
    put_varint(f, n);
    fwrite(s, 1, n, f);
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

/* The metadata and the end. */
static void put_tail(FILE *f, const profile_meta_t *m)
{
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
        put_tail(out, c->m);
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
    return err;
}

int raw_close(raw_writer_t *w, const profile_meta_t *m, int commit, char **kept)
{
    int err = w->failed ? REMORA_EIO : REMORA_OK;
    char *tmp;

    if (kept != NULL)
        *kept = NULL;
    if (commit && !err)
        put_tail(w->f, m);
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

/* A recording being read: the records so far, numbered as the writer numbered them. */
typedef struct raw_in {
    rd_t r;
    int version;                    /* the header's */
    stk_table_t *t;
    profile_meta_t *m;
    prof_event_t **events;          /* NULL: events not kept */
    size_t *nevents, cap_events;
    int64_t now;                    /* the last event's time */
    const char **strings;
    size_t nstrings, capstrings;
    vec32_t frames, nodes, threads;
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

    if (in->r.bad || name >= in->nstrings || idx > in->threads.n || root > (1u << 31))
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

    if (in->r.bad || p == STK_NONE || fr == STK_NONE || id > (1u << 31))
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
}

int raw_read(FILE *f, stk_table_t *t, profile_meta_t *m, prof_event_t **events, size_t *nevents)
{
    char head[8];
    raw_in_t in = { .r = { f, 0 }, .t = t, .m = m, .events = events, .nevents = nevents };
    int err = REMORA_ECORRUPT, c, got;

    memset(m, 0, sizeof *m);
    if (events != NULL) {
        *events = NULL;
        *nevents = 0;
    }
    if (fread(head, 1, 8, f) != 8 || memcmp(head, magic, 7) != 0 || head[7] < 1 ||
        head[7] > RAW_VERSION)
        return ferror(f) ? REMORA_EIO : REMORA_ECORRUPT;
    in.version = head[7];
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
