/* formats/jsonl.c — the JSON Lines stream (docs/jsonl.md): one JSON object a line, a
 * consumer reads each line once it ends. A "start" record, then strings and frames each
 * defined once (before the first record that uses them), then one record a period (or
 * snapshot) holding that period's threads and stacks with their counts, then an "end"
 * record. Flushed after each period. Strings and frames are kept by content across the
 * periods' tables (each period's table is a new one); past JSONL_MAX_DEFS of them a
 * "reset" record forgets them all, so memory stays bounded however long it runs.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "remora.h"
#include "out.h"
#include "../util/util.h"

#define JSONL_VERSION 1
#define JSONL_MAX_DEFS (1u << 20)   /* strings + frames defined before a reset */

typedef struct jl_frame_key {
    const char *function, *file, *op;   /* strtab pointers (op NULL: none) */
    int line, native, offset;
} jl_frame_key_t;

struct jsonl_writer {
    FILE *f;
    int own;                        /* f is ours to close (not stdout) */
    char *path;                     /* its name, when own (to keep it if the name goes) */
    strtab_t *st;                   /* the strings' stable copies */
    out_strs_t ids;                 /* stable copy -> string id */
    jl_frame_key_t *fkeys;          /* frame id -> key */
    size_t nframes, cap_frames;
    uint32_t *fslots;               /* frame id + 1, open addressing */
    size_t nfslots;
    uint32_t *map;                  /* this table's frame index -> stream frame id */
    size_t cap_map;
    int failed;
};

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v;
    h *= 0xbf58476d1ce4e5b9ull;
    return h ^ (h >> 31);
}

static size_t fslot_of(const jsonl_writer_t *w, const jl_frame_key_t *k)
{
    uint64_t h = 0x9e3779b97f4a7c15ull;

    h = mix(h, (uint64_t)(uintptr_t)k->function);
    h = mix(h, (uint64_t)(uintptr_t)k->file);
    h = mix(h, (uint64_t)(uintptr_t)k->op);
    h = mix(h, (uint64_t)(uint32_t)k->line << 32 | (uint32_t)k->offset);
    h = mix(h, (uint64_t)k->native);
    return (size_t)h & (w->nfslots - 1);
}

static int same_key(const jl_frame_key_t *a, const jl_frame_key_t *b)
{
    return a->function == b->function && a->file == b->file && a->op == b->op &&
           a->line == b->line && a->native == b->native && a->offset == b->offset;
}

/* Forgets every string and frame (the stream says so when 'say'). 0 or REMORA_ENOMEM. */
static int jl_reset(jsonl_writer_t *w, int say)
{
    strtab_free(w->st);
    out_strs_free(&w->ids);
    memset(&w->ids, 0, sizeof w->ids);
    free(w->fslots);
    w->fslots = NULL;
    w->nfslots = 0;
    w->nframes = 0;
    w->st = strtab_new();
    if (say)
        fputs("{\"type\":\"reset\"}\n", w->f);
    return w->st == NULL ? REMORA_ENOMEM : REMORA_OK;
}

/* The id of a string, defining it first if it is new; UINT32_MAX when out of memory. */
static uint32_t jl_str(jsonl_writer_t *w, const char *s)
{
    const char *c;
    size_t before = w->ids.n;
    uint32_t id;

    if (s == NULL)
        s = "";
    c = strtab_intern(w->st, s, strlen(s));
    if (c == NULL)
        return UINT32_MAX;
    id = out_strs_index(&w->ids, c);
    if (w->ids.oom)
        return UINT32_MAX;
    if (w->ids.n > before) {
        fprintf(w->f, "{\"type\":\"string\",\"id\":%u,\"value\":", id);
        out_json_str(w->f, s);
        fputs("}\n", w->f);
    }
    return id;
}

/* The id of the table's frame i, defining it (and its strings) first if it is new;
 * UINT32_MAX when out of memory. */
static uint32_t jl_frame(jsonl_writer_t *w, const stk_frame_t *fr)
{
    jl_frame_key_t k;
    uint32_t fn, file, op = UINT32_MAX;
    size_t i;

    fn = jl_str(w, fr->function);
    file = jl_str(w, fr->file);
    if (fr->op != NULL)
        op = jl_str(w, fr->op);
    if (fn == UINT32_MAX || file == UINT32_MAX || (fr->op != NULL && op == UINT32_MAX))
        return UINT32_MAX;
    k.function = w->ids.v[fn];
    k.file = w->ids.v[file];
    k.op = fr->op != NULL ? w->ids.v[op] : NULL;
    k.line = fr->line;
    k.native = fr->native != 0;
    k.offset = fr->op != NULL ? fr->offset : -1;
    if (2 * (w->nframes + 1) > w->nfslots) {
        size_t n = w->nfslots ? w->nfslots * 2 : 1024, j;
        uint32_t *slots = calloc(n, sizeof *slots);
        if (slots == NULL)
            return UINT32_MAX;
        free(w->fslots);
        w->fslots = slots;
        w->nfslots = n;
        for (j = 0; j < w->nframes; j++) {
            for (i = fslot_of(w, &w->fkeys[j]); slots[i] != 0; i = (i + 1) & (n - 1))
                ;
            slots[i] = (uint32_t)j + 1;
        }
    }
    for (i = fslot_of(w, &k); w->fslots[i] != 0; i = (i + 1) & (w->nfslots - 1))
        if (same_key(&w->fkeys[w->fslots[i] - 1], &k))
            return w->fslots[i] - 1;
    if (remora_grow((void **)&w->fkeys, &w->cap_frames, w->nframes + 1, sizeof *w->fkeys))
        return UINT32_MAX;
    w->fkeys[w->nframes] = k;
    w->fslots[i] = (uint32_t)++w->nframes;
    fprintf(w->f, "{\"type\":\"frame\",\"id\":%zu,\"function\":%u,\"file\":%u,\"line\":%d",
            w->nframes - 1, fn, file, k.line);
    if (k.native)
        fputs(",\"native\":true", w->f);
    if (k.op != NULL)
        fprintf(w->f, ",\"op\":%u,\"offset\":%d", op, k.offset);
    fputs("}\n", w->f);
    return (uint32_t)w->nframes - 1;
}

static void jl_meta(FILE *f, const profile_meta_t *m)
{
    fprintf(f, "\"pid\":%d,\"command\":", (int)m->pid);
    out_json_str(f, m->command);
    fputs(",\"python\":", f);
    out_json_str(f, m->python);
    fputs(",\"mode\":", f);
    out_json_str(f, m->mode);
    fputs(",\"engine\":", f);
    out_json_str(f, m->engine);
    fprintf(f, ",\"rate_hz\":%.17g", m->rate_hz);
    if (m->sample_bytes > 0)        /* --mode memory: a count is this many bytes */
        fprintf(f, ",\"sample_bytes\":%llu", (unsigned long long)m->sample_bytes);
}

/* The counts' words (docs/cli.md, "Counts") beside rounds, errors and late: the thread
 * samples written, left out as idle, partial, the rounds asked, the time paused. */
static void jl_counts(FILE *f, const profile_meta_t *m)
{
    fprintf(f, "\"rounds_asked\":%llu,\"thread_samples\":%llu,\"idle\":%llu,\"partial\":%llu,"
            "\"paused_s\":%.9f", (unsigned long long)out_rounds_asked(m),
            (unsigned long long)m->written, (unsigned long long)m->idle,
            (unsigned long long)m->partial, m->paused_s);
}

int jsonl_open(const char *path, const profile_meta_t *m, jsonl_writer_t **out)
{
    jsonl_writer_t *w = calloc(1, sizeof *w);

    *out = NULL;
    if (w == NULL || (w->st = strtab_new()) == NULL) {
        free(w);
        return REMORA_ENOMEM;
    }
    if (path == NULL || strcmp(path, "-") == 0) {
        w->f = stdout;
    } else {
        /* written in place, not renamed into place: it is read while written (made with
         * the umask, never through another user's link: util/output.c) */
        int fd = remora_output_open_stream(path);
        w->f = fd >= 0 ? fdopen(fd, "w") : NULL;
        if (fd >= 0 && w->f == NULL)
            close(fd);
        w->own = 1;
        if (w->f != NULL && (w->path = strdup(path)) == NULL) {
            fclose(w->f);
            w->f = NULL;
            errno = ENOMEM;
        }
    }
    if (w->f == NULL) {
        int e = errno;
        strtab_free(w->st);
        free(w);
        errno = e;
        return REMORA_EIO;
    }
    fprintf(w->f, "{\"type\":\"start\",\"version\":%d,", JSONL_VERSION);
    jl_meta(w->f, m);
    fprintf(w->f, ",\"start_unix_ns\":%lld}\n", (long long)m->start_unix_ns);
    if (fflush(w->f) != 0)
        w->failed = 1;
    *out = w;
    return REMORA_OK;
}

typedef struct jl_visit {
    jsonl_writer_t *w;
    const stk_table_t *t;
    int first, oom;
} jl_visit_t;

static void jl_stack(void *ctx, const stk_thread_t *th, const uint32_t *frames, size_t n,
                     uint64_t count)
{
    jl_visit_t *v = ctx;
    size_t k;

    fprintf(v->w->f, "%s[%d,%llu,[", v->first ? "" : ",", (int)th->tid, (unsigned long long)count);
    v->first = 0;
    for (k = 0; k < n; k++)
        fprintf(v->w->f, "%s%u", k ? "," : "", v->w->map[frames[k]]);
    fputs("]]", v->w->f);
}

int jsonl_period(jsonl_writer_t *w, const profile_t *p, const char *kind, uint64_t n,
                 int64_t end_unix_ns)
{
    const stk_table_t *t = p->stacks;
    size_t nf = stk_nframes(t), i;
    jl_visit_t v = { w, t, 1, 0 };

    if (w->failed)
        return REMORA_EIO;
    if (w->ids.n + w->nframes + nf > JSONL_MAX_DEFS && jl_reset(w, 1) != REMORA_OK)
        return REMORA_ENOMEM;
    /* every frame and thread name the period uses, defined first */
    if (remora_grow((void **)&w->map, &w->cap_map, nf + 1, sizeof *w->map))
        return REMORA_ENOMEM;
    for (i = 0; i < nf; i++)
        if ((w->map[i] = jl_frame(w, stk_frame_at(t, (uint32_t)i))) == UINT32_MAX)
            return REMORA_ENOMEM;
    for (i = 0; i < stk_nthreads(t); i++)
        if (jl_str(w, stk_thread_at(t, i)->name) == UINT32_MAX)
            return REMORA_ENOMEM;
    fputs("{\"type\":", w->f);
    out_json_str(w->f, kind);
    fprintf(w->f, ",\"n\":%llu,\"start_unix_ns\":%lld,\"end_unix_ns\":%lld,\"duration_s\":%.9f,"
            "\"rounds\":%llu,\"errors\":%llu,\"late\":%llu,",
            (unsigned long long)n, (long long)p->meta.start_unix_ns, (long long)end_unix_ns,
            p->meta.duration_s, (unsigned long long)p->meta.samples,
            (unsigned long long)p->meta.errors, (unsigned long long)p->meta.late);
    jl_counts(w->f, &p->meta);
    fputs(",\"threads\":[", w->f);
    for (i = 0; i < stk_nthreads(t); i++) {
        const stk_thread_t *th = stk_thread_at(t, i);
        fprintf(w->f, "%s[%d,%u,%llu]", i ? "," : "", (int)th->tid, jl_str(w, th->name),
                (unsigned long long)th->samples);
    }
    fputs("],\"stacks\":[", w->f);
    if (stk_foreach_stack(t, jl_stack, &v) != 0)
        v.oom = 1;
    fputs("]}\n", w->f);
    if (fflush(w->f) != 0 || ferror(w->f))
        w->failed = 1;
    return v.oom ? REMORA_ENOMEM : w->failed ? REMORA_EIO : REMORA_OK;
}

int jsonl_close(jsonl_writer_t *w, const profile_meta_t *m, uint64_t periods, const char *reason,
                char **kept)
{
    int err = w->failed ? REMORA_EIO : REMORA_OK;
    struct stat st;

    if (kept != NULL)
        *kept = NULL;

    fputs("{\"type\":\"end\",\"reason\":", w->f);
    out_json_str(w->f, reason);
    fprintf(w->f, ",\"periods\":%llu,\"rounds\":%llu,\"errors\":%llu,\"late\":%llu,"
            "\"duration_s\":%.9f,", (unsigned long long)periods,
            (unsigned long long)m->samples, (unsigned long long)m->errors,
            (unsigned long long)m->late, m->duration_s);
    jl_counts(w->f, m);
    fputs("}\n", w->f);
    if ((fflush(w->f) != 0 || ferror(w->f)) && !err)
        err = REMORA_EIO;
    /* a file whose name went while it was written (its directory removed): what it
     * holds is copied out before it is closed, lost with it otherwise */
    if (w->own && !err && fstat(fileno(w->f), &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink == 0) {
        err = REMORA_EIO;
        if (kept != NULL && remora_output_keep_copy(w->path, ".jsonl", fileno(w->f), kept) != 0)
            *kept = NULL;
        errno = ENOENT;
    }
    if (w->own && fclose(w->f) != 0 && !err)
        err = REMORA_EIO;
    free(w->path);
    strtab_free(w->st);
    out_strs_free(&w->ids);
    free(w->fkeys);
    free(w->fslots);
    free(w->map);
    free(w);
    return err;
}

/* The whole profile as one stream of one period (convert, or record without --every). */
int out_jsonl_write(const profile_t *p, FILE *f, const out_options_t *o)
{
    jsonl_writer_t *w = calloc(1, sizeof *w);
    int err;

    (void)o;
    if (w == NULL || (w->st = strtab_new()) == NULL) {
        free(w);
        return REMORA_ENOMEM;
    }
    w->f = f;
    fprintf(f, "{\"type\":\"start\",\"version\":%d,", JSONL_VERSION);
    jl_meta(f, &p->meta);
    fprintf(f, ",\"start_unix_ns\":%lld}\n", (long long)p->meta.start_unix_ns);
    err = jsonl_period(w, p, "period", 1,
                       p->meta.start_unix_ns + (int64_t)(p->meta.duration_s * 1e9));
    w->own = 0;
    if (jsonl_close(w, &p->meta, 1, "written", NULL) != REMORA_OK && err == REMORA_OK)
        err = REMORA_EIO;
    return err;
}
