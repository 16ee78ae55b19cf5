/* formats/flamegraph.c — the self-contained HTML flamegraph.
 *
 * Writes the template (src/formats/flamegraph.html, embedded at build time) with the
 * profile inserted as JSON into its <script type="application/json"> element. The page
 * draws on a canvas and reads its data with JSON.parse, so every string from the target
 * stays data: the JSON is escaped so that no byte sequence can close the element.
 *
 * Data layout (read by the template's load()):
 *   {"version":1, "current":PROFILE, "baseline":PROFILE|null}
 *   PROFILE = {"meta":{...}, "total":N, "strings":[...], "frames":[fn,file,line,...],
 *              "threads":[[tid,name,samples],...], "depth":[...], "frame":[...],
 *              "self":[...], "native":[...]}
 * "strings" is the string table: each distinct function and file name once; frames are
 * triples of string indexes and a line; "native" lists the C frames' indexes (--native;
 * absent when there are none; "ops", [[frame, instruction, byte offset], ...] the frames
 * at an instruction, --opcodes, absent without). The nodes of every thread's trie follow
 * in depth-first pre-order, thread by thread: depth 0 is a thread's root (frame -1), and
 * a node's parent is the nearest earlier node one level up, so the tree needs no parent
 * links.
 *
 * With a baseline, the current PROFILE also holds "diff" (one entry per node, in the
 * nodes' order), computed here so that the page only paints it:
 *   {"sigmas":3, "min_change":0.01, "total":C, "base_total":B, "noise50":share, "full":share,
 *    "base":[...], "change":[...], "noise":[...], "colour":[...]}
 * A node's path is its thread's name (its tid when it has none) and the (function, file)
 * of each frame from the root down; both profiles' samples are summed per path (frames
 * of one function at several lines are one path). For a node: base = the baseline's
 * samples on its path, change = its path's share of all samples now minus in the
 * baseline, noise = 3 standard errors of that difference if nothing had changed (binomial
 * sampling, pooled share q = (c + b) / (C + B): 3 sqrt(q (1 - q) (1/C + 1/B))), and
 * colour = 0 when |change| <= noise (sampling noise) or |change| < min_change (1 point:
 * what two runs of one program differ by beyond that noise), else the sign of the change times
 * an intensity from 0.2 (just beyond the noise) to 1 at "full", the largest |change|
 * coloured: 0.2 + 0.8 sqrt(|change| / full). noise50 is the noise of a path at 50%
 * of both profiles, the largest any path can have.
 */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "remora.h"
#include "out.h"
#include "flamegraph.h"

void out_flamegraph_json_str(FILE *f, const char *str, size_t n)
{
    const unsigned char *s = (const unsigned char *)(str ? str : "");

    if (str == NULL)
        n = 0;
    fputc('"', f);
    while (n > 0) {
        size_t k = 1;
        if (*s == '"' || *s == '\\') {
            fputc('\\', f);
            fputc(*s, f);
        } else if (*s < 0x20 || *s == 0x7f || *s == '<' || *s == '>' || *s == '&') {
            fprintf(f, "\\u%04x", *s);
        } else if ((k = out_utf8_len(s, n)) == 0) {
            fputs("\\ufffd", f);
            k = 1;
        } else if (k == 3 && s[0] == 0xe2 && s[1] == 0x80 && (s[2] == 0xa8 || s[2] == 0xa9)) {
            fprintf(f, "\\u%04x", s[2] == 0xa8 ? 0x2028 : 0x2029);
        } else {
            fwrite(s, 1, k, f);
        }
        s += k;
        n -= k;
    }
    fputc('"', f);
}

static void put_cstr(FILE *f, const char *s)
{
    out_flamegraph_json_str(f, s, s ? strlen(s) : 0);
}

/* A char array of profile_meta_t, which may lack its NUL when full. */
static void put_field(FILE *f, const char *key, const char *s, size_t cap)
{
    fprintf(f, "\"%s\":", key);
    out_flamegraph_json_str(f, s, strnlen(s, cap));
}

static void put_double(FILE *f, const char *key, double v)
{
    fprintf(f, "\"%s\":%.9g", key, isfinite(v) ? v : 0.0);
}

/* The counts' words (docs/cli.md, "Counts"), beside the older fields ("samples" is the
 * rounds taken): "counted" false when the profile does not know them (collapsed stacks,
 * an older recording), then only "thread_samples" (the table's) and "counts" hold. */
static void write_counts(FILE *f, const profile_meta_t *m, uint64_t written)
{
    char words[512];

    out_counts_text(words, sizeof words, m, written);
    fprintf(f, ",\"counted\":%s,\"rounds\":%" PRIu64 ",\"rounds_asked\":%" PRIu64
               ",\"thread_samples\":%" PRIu64 ",\"idle\":%" PRIu64 ",\"idle_kept\":%s"
               ",\"partial\":%" PRIu64 ",",
            m->counted ? "true" : "false", m->samples, out_rounds_asked(m),
            m->counted ? m->written : written, m->idle, m->idle_kept ? "true" : "false",
            m->partial);
    put_double(f, "paused_s", m->paused_s);
    fputc(',', f);
    put_cstr(f, "counts");
    fputc(':', f);
    put_cstr(f, words);
}

static void write_meta(FILE *f, const profile_meta_t *m, uint64_t written)
{
    fprintf(f, "{\"pid\":%ld,", (long)m->pid);
    put_field(f, "command", m->command, sizeof m->command);
    fputc(',', f);
    put_field(f, "python", m->python, sizeof m->python);
    fputc(',', f);
    put_field(f, "mode", m->mode, sizeof m->mode);
    fputc(',', f);
    put_field(f, "engine", m->engine, sizeof m->engine);
    fputc(',', f);
    put_double(f, "duration_s", m->duration_s);
    fputc(',', f);
    put_double(f, "rate_hz", m->rate_hz);
    fprintf(f, ",\"samples\":%" PRIu64 ",\"errors\":%" PRIu64 ",\"late\":%" PRIu64
               ",\"start_unix_ns\":%" PRId64 ",\"sample_bytes\":%" PRIu64,
            m->samples, m->errors, m->late, m->start_unix_ns, m->sample_bytes);
    write_counts(f, m, written);
    fputc('}', f);
}

/* Distinct strings of the frame table, keyed by their interned address. */
typedef struct strset {
    const char **list;      /* in order of first use */
    size_t n;
    uint32_t *slots;        /* list index + 1; 0 = empty */
    size_t cap;             /* a power of two */
} strset_t;

static size_t strset_slot(const strset_t *s, const char *p)
{
    uint64_t h = (uint64_t)(uintptr_t)p;
    size_t j;

    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 32;
    for (j = (size_t)h & (s->cap - 1); s->slots[j] && s->list[s->slots[j] - 1] != p; j = (j + 1) & (s->cap - 1))
        ;
    return j;
}

static void strset_add(strset_t *s, const char *p)
{
    size_t j = strset_slot(s, p);

    if (!s->slots[j]) {
        s->list[s->n] = p;
        s->slots[j] = (uint32_t)++s->n;
    }
}

static uint32_t strset_index(const strset_t *s, const char *p)
{
    return s->slots[strset_slot(s, p)] - 1;
}

/* Next node after 'node' in pre-order within the subtree of 'root', or STK_NONE;
 * *depth follows the walk. */
static uint32_t next_preorder(const stk_table_t *t, uint32_t node, uint32_t root, int *depth)
{
    const stk_node_t *n = stk_node_at(t, node);

    if (n->first_child != STK_NONE) {
        (*depth)++;
        return n->first_child;
    }
    while (node != root) {
        n = stk_node_at(t, node);
        if (n->next_sibling != STK_NONE)
            return n->next_sibling;
        node = n->parent;
        (*depth)--;
    }
    return STK_NONE;
}

enum { COL_DEPTH, COL_FRAME, COL_SELF };

/* One array of the node columns, every thread's nodes in pre-order. */
static void write_nodes(FILE *f, const stk_table_t *t, int col)
{
    size_t i, nth = stk_nthreads(t);
    const char *sep = "";

    fputc('[', f);
    for (i = 0; i < nth; i++) {
        uint32_t root = stk_thread_at(t, i)->root, node = root;
        int depth = 0;
        while (node != STK_NONE) {
            const stk_node_t *n = stk_node_at(t, node);
            if (col == COL_DEPTH)
                fprintf(f, "%s%d", sep, depth);
            else if (col == COL_FRAME)
                fprintf(f, "%s%ld", sep, n->frame == STK_NONE ? -1L : (long)n->frame);
            else
                fprintf(f, "%s%" PRIu64, sep, n->self);
            sep = ",";
            node = next_preorder(t, node, root, &depth);
        }
    }
    fputc(']', f);
}

/* ---- the differential data ------------------------------------------------------ */

#define DIFF_SIGMAS 3.0         /* standard errors of sampling noise a change must pass */
#define DIFF_MIN_COLOUR 0.2     /* the intensity of a change just beyond the noise */
#define DIFF_MIN_CHANGE 0.01    /* and a change of share under a point is never coloured:
                                 * two runs of one program differ by up to ~1 point beyond
                                 * binomial noise (partial stacks, scheduling; the run
                                 * that showed it: docs/measured.md, "--diff") */

/* An open-addressing map of 64-bit keys to dense ids 0, 1, 2... */
typedef struct idmap {
    uint64_t *keys;
    uint32_t *ids;              /* id + 1; 0 = empty */
    size_t cap, n;              /* cap: a power of two, at least twice the ids it may hold */
} idmap_t;

static int idmap_init(idmap_t *m, size_t most)
{
    for (m->cap = 64; m->cap < 2 * most + 2; m->cap *= 2)
        ;
    m->n = 0;
    m->keys = malloc(m->cap * sizeof *m->keys);
    m->ids = calloc(m->cap, sizeof *m->ids);
    return m->keys == NULL || m->ids == NULL ? -1 : 0;
}

static void idmap_fini(idmap_t *m)
{
    free(m->keys);
    free(m->ids);
}

/* The id of key, given a new one the first time (the caller sized the map). */
static uint32_t idmap_id(idmap_t *m, uint64_t key)
{
    uint64_t h = key * 0x9e3779b97f4a7c15ull;
    size_t j;

    h ^= h >> 31;
    for (j = (size_t)h & (m->cap - 1); m->ids[j]; j = (j + 1) & (m->cap - 1))
        if (m->keys[j] == key)
            return m->ids[j] - 1;
    m->keys[j] = key;
    m->ids[j] = (uint32_t)++m->n;
    return m->ids[j] - 1;
}

/* What a node stands for, compared by content across the two tables: a 64-bit FNV-1a of
 * the kind, function and file (a thread: its name, or its tid when it has none), then the
 * keys of one hash compared in a chain. */
typedef struct node_key {
    char kind;                  /* 'f' frame, 't' thread */
    const char *a, *b;          /* function and file; a thread's name (b unused) */
    long tid;                   /* a thread without a name */
} node_key_t;

typedef struct keys {
    idmap_t byhash;             /* hash → hash id */
    uint32_t *head;             /* per hash id: its first key + 1 */
    node_key_t *list;
    uint32_t *next;             /* per key: the next of the same hash + 1 */
    size_t n, cap;
} keys_t;

static uint64_t fnv(uint64_t h, const char *s)
{
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return (h ^ 0xff) * 0x100000001b3ull;   /* a separator: ("ab","c") != ("a","bc") */
}

static int same_key(const node_key_t *x, const node_key_t *y)
{
    if (x->kind != y->kind)
        return 0;
    if (x->kind == 't')
        return x->a[0] ? strcmp(x->a, y->a) == 0 : !y->a[0] && x->tid == y->tid;
    return strcmp(x->a, y->a) == 0 && strcmp(x->b, y->b) == 0;
}

/* The id of a key, dense from 0; UINT32_MAX when full (cannot happen: sized for every
 * frame and thread of both tables). */
static uint32_t key_id(keys_t *ks, const node_key_t *k)
{
    uint64_t h = 0xcbf29ce484222325ull ^ (uint64_t)(unsigned char)k->kind;
    uint32_t hid, i;

    if (k->kind == 't') {
        char tid[24];
        snprintf(tid, sizeof tid, "%ld", k->tid);
        h = fnv(h, k->a[0] ? k->a : tid);
    } else {
        h = fnv(fnv(h, k->a), k->b);
    }
    if (ks->n == ks->cap)
        return UINT32_MAX;
    hid = idmap_id(&ks->byhash, h);
    for (i = ks->head[hid]; i != 0; i = ks->next[i - 1])
        if (same_key(&ks->list[i - 1], k))
            return i - 1;
    ks->list[ks->n] = *k;
    ks->next[ks->n] = ks->head[hid];
    ks->head[hid] = (uint32_t)ks->n + 1;
    return (uint32_t)ks->n++;
}

typedef struct side {
    const stk_table_t *t;
    uint32_t *path;             /* per node: its path id */
    uint64_t *total;            /* per node: samples in its subtree */
} side_t;

/* Fills s->path and s->total. Returns 0 or -1 (out of memory). */
static int side_paths(side_t *s, keys_t *ks, idmap_t *paths)
{
    const stk_table_t *t = s->t;
    size_t nn = stk_nnodes(t), nf = stk_nframes(t), nth = stk_nthreads(t), i;
    uint32_t *fkey = malloc((nf ? nf : 1) * sizeof *fkey);
    uint32_t *rootkey = calloc(nn ? nn : 1, sizeof *rootkey);

    s->path = malloc((nn ? nn : 1) * sizeof *s->path);
    s->total = calloc(nn ? nn : 1, sizeof *s->total);
    if (fkey == NULL || rootkey == NULL || s->path == NULL || s->total == NULL) {
        free(fkey);
        free(rootkey);
        return -1;
    }
    for (i = 0; i < nf; i++) {
        const stk_frame_t *fr = stk_frame_at(t, (uint32_t)i);
        node_key_t k = { 'f', fr->function ? fr->function : "", fr->file ? fr->file : "", 0 };
        fkey[i] = key_id(ks, &k);
    }
    for (i = 0; i < nth; i++) {
        const stk_thread_t *th = stk_thread_at(t, i);
        node_key_t k = { 't', th->name ? th->name : "", "", (long)th->tid };
        if (th->root < nn)
            rootkey[th->root] = key_id(ks, &k);
    }
    /* a parent is always created before its children: one pass in index order */
    for (i = 0; i < nn; i++) {
        const stk_node_t *n = stk_node_at(t, (uint32_t)i);
        uint64_t parent = n->parent == STK_NONE || n->parent >= i ? 0 : (uint64_t)s->path[n->parent] + 1;
        uint32_t key = n->frame == STK_NONE ? rootkey[i] : n->frame < nf ? fkey[n->frame] : UINT32_MAX;
        s->path[i] = idmap_id(paths, parent << 32 | key);
    }
    for (i = nn; i-- > 0;) {
        const stk_node_t *n = stk_node_at(t, (uint32_t)i);
        s->total[i] += n->self;
        if (n->parent != STK_NONE && n->parent < i)
            s->total[n->parent] += s->total[i];
    }
    free(fkey);
    free(rootkey);
    return 0;
}

/* Every thread's nodes in pre-order (the order of the page's node columns) into order[]
 * (room for every node); returns how many. */
static size_t preorder(const stk_table_t *t, uint32_t *order)
{
    size_t i, n = 0, nth = stk_nthreads(t), nn = stk_nnodes(t);

    for (i = 0; i < nth; i++) {
        uint32_t root = stk_thread_at(t, i)->root, node = root;
        int depth = 0;
        while (node != STK_NONE && n < nn) {
            order[n++] = node;
            node = next_preorder(t, node, root, &depth);
        }
    }
    return n;
}

/* Writes ,"diff":{...} into the current profile p, against base (see the banner).
 * Returns 0 or REMORA_ENOMEM. */
static int write_diff(FILE *f, const profile_t *p, const profile_t *base)
{
    side_t cur = { p->stacks, NULL, NULL }, old = { base->stacks, NULL, NULL };
    size_t nkeys = stk_nframes(cur.t) + stk_nframes(old.t) + stk_nthreads(cur.t) + stk_nthreads(old.t);
    size_t nn = stk_nnodes(cur.t), nb = stk_nnodes(old.t), i, n, col;
    keys_t ks = { { 0 }, NULL, NULL, NULL, 0, nkeys };
    idmap_t paths = { 0 };
    uint64_t *csum = NULL, *bsum = NULL;
    uint32_t *order = NULL;
    double C = (double)stk_total_samples(cur.t), B = (double)stk_total_samples(old.t);
    double *change = NULL, *noise = NULL, full = 0.0;
    int rc = REMORA_ENOMEM;

    ks.head = calloc(nkeys + 1, sizeof *ks.head);
    ks.list = malloc((nkeys + 1) * sizeof *ks.list);
    ks.next = malloc((nkeys + 1) * sizeof *ks.next);
    if (ks.head == NULL || ks.list == NULL || ks.next == NULL || idmap_init(&ks.byhash, nkeys) ||
        idmap_init(&paths, nn + nb) || side_paths(&cur, &ks, &paths) || side_paths(&old, &ks, &paths))
        goto error;
    csum = calloc(paths.n + 1, sizeof *csum);
    bsum = calloc(paths.n + 1, sizeof *bsum);
    change = malloc((nn + 1) * sizeof *change);
    noise = malloc((nn + 1) * sizeof *noise);
    order = malloc((nn + 1) * sizeof *order);
    if (csum == NULL || bsum == NULL || change == NULL || noise == NULL || order == NULL)
        goto error;
    for (i = 0; i < nn; i++)
        csum[cur.path[i]] += cur.total[i];
    for (i = 0; i < nb; i++)
        bsum[old.path[i]] += old.total[i];
    for (i = 0; i < nn; i++) {
        double c = (double)csum[cur.path[i]], b = (double)bsum[cur.path[i]], q;
        change[i] = (C > 0 ? c / C : 0.0) - (B > 0 ? b / B : 0.0);
        q = C + B > 0 ? (c + b) / (C + B) : 0.0;
        noise[i] = C > 0 && B > 0 ? DIFF_SIGMAS * sqrt(q * (1.0 - q) * (1.0 / C + 1.0 / B)) : 0.0;
        if (C > 0 && B > 0 && fabs(change[i]) > noise[i] && fabs(change[i]) >= DIFF_MIN_CHANGE &&
            fabs(change[i]) > full)
            full = fabs(change[i]);
    }
    fprintf(f, ",\n\"diff\":{\"sigmas\":%g,\"min_change\":%g,\"total\":%" PRIu64 ",\"base_total\":%" PRIu64 ",",
            DIFF_SIGMAS, DIFF_MIN_CHANGE, stk_total_samples(cur.t), stk_total_samples(old.t));
    put_double(f, "noise50", C > 0 && B > 0 ? DIFF_SIGMAS * 0.5 * sqrt(1.0 / C + 1.0 / B) : 0.0);
    fputc(',', f);
    put_double(f, "full", full);
    n = preorder(cur.t, order);
    for (col = 0; col < 4; col++) {
        static const char *const cols[] = { "base", "change", "noise", "colour" };
        fprintf(f, ",\n\"%s\":[", cols[col]);
        for (i = 0; i < n; i++) {
            uint32_t x = order[i];
            double d = change[x], v;
            if (i)
                fputc(',', f);
            if (col == 0) {
                fprintf(f, "%" PRIu64, bsum[cur.path[x]]);
                continue;
            }
            if (col == 1)
                v = d;
            else if (col == 2)
                v = noise[x];
            else if (full > 0 && fabs(d) > noise[x] && fabs(d) >= DIFF_MIN_CHANGE)
                v = (d > 0 ? 1 : -1) * (DIFF_MIN_COLOUR + (1 - DIFF_MIN_COLOUR) * sqrt(fabs(d) / full));
            else
                v = 0.0;
            fprintf(f, "%.6g", isfinite(v) ? v : 0.0);
        }
        fputc(']', f);
    }
    fputc('}', f);
    rc = 0;
error:
    free(csum);
    free(bsum);
    free(change);
    free(noise);
    free(order);
    free(cur.path);
    free(cur.total);
    free(old.path);
    free(old.total);
    free(ks.head);
    free(ks.list);
    free(ks.next);
    idmap_fini(&ks.byhash);
    idmap_fini(&paths);
    return rc;
}

/* Writes one PROFILE object, with its "diff" against base when base is not NULL.
 * Returns 0 or REMORA_ENOMEM. */
static int write_profile(FILE *f, const profile_t *p, const profile_t *base)
{
    const stk_table_t *t = p->stacks;
    size_t nf = stk_nframes(t), nth = stk_nthreads(t), i;
    strset_t s = { 0 };
    int rc = REMORA_ENOMEM;

    for (s.cap = 64; s.cap < 4 * nf; s.cap *= 2)
        ;
    s.list = malloc((2 * nf + 1) * sizeof *s.list);
    s.slots = calloc(s.cap, sizeof *s.slots);
    if (s.list == NULL || s.slots == NULL)
        goto error;
    for (i = 0; i < nf; i++) {
        const stk_frame_t *fr = stk_frame_at(t, (uint32_t)i);
        strset_add(&s, fr->function ? fr->function : "");
        strset_add(&s, fr->file ? fr->file : "");
    }

    fputs("{\"meta\":", f);
    write_meta(f, &p->meta, stk_total_samples(t));
    fprintf(f, ",\n\"total\":%" PRIu64 ",\n\"strings\":[", stk_total_samples(t));
    for (i = 0; i < s.n; i++) {
        if (i)
            fputc(',', f);
        put_cstr(f, s.list[i]);
    }
    fputs("],\n\"frames\":[", f);
    for (i = 0; i < nf; i++) {
        const stk_frame_t *fr = stk_frame_at(t, (uint32_t)i);
        fprintf(f, "%s%" PRIu32 ",%" PRIu32 ",%d", i ? "," : "",
                strset_index(&s, fr->function ? fr->function : ""),
                strset_index(&s, fr->file ? fr->file : ""), fr->line);
    }
    fputs("],\n\"threads\":[", f);
    for (i = 0; i < nth; i++) {
        const stk_thread_t *th = stk_thread_at(t, i);
        fprintf(f, "%s[%ld,", i ? "," : "", (long)th->tid);
        put_cstr(f, th->name);
        fprintf(f, ",%" PRIu64 "]", th->samples);
    }
    fputs("],\n\"depth\":", f);
    write_nodes(f, t, COL_DEPTH);
    fputs(",\n\"frame\":", f);
    write_nodes(f, t, COL_FRAME);
    fputs(",\n\"self\":", f);
    write_nodes(f, t, COL_SELF);
    if (base != NULL && (rc = write_diff(f, p, base)) != 0)
        goto error;
    for (i = 0, rc = 0; i < nf; i++) {
        if (!stk_frame_at(t, (uint32_t)i)->native)
            continue;
        fprintf(f, "%s%zu", rc ? "," : ",\n\"native\":[", i);
        rc = 1;
    }
    if (rc)
        fputc(']', f);
    /* --opcodes: [frame, instruction name, byte offset] of the frames at an instruction */
    for (i = 0, rc = 0; i < nf; i++) {
        const stk_frame_t *fr = stk_frame_at(t, (uint32_t)i);
        if (fr->op == NULL)
            continue;
        fprintf(f, "%s[%zu,", rc ? "," : ",\n\"ops\":[", i);
        put_cstr(f, fr->op);
        fprintf(f, ",%d]", fr->offset);
        rc = 1;
    }
    fputs(rc ? "]}" : "}", f);
    rc = 0;
error:
    free(s.list);
    free(s.slots);
    return rc;
}

/* Returns 0, REMORA_EIO when the stream failed, or REMORA_ENOMEM when memory for
 * the string index ran out. Writes nothing but the one HTML document to f. */
int out_flamegraph_write(const profile_t *p, FILE *f, const out_options_t *o)
{
    const char *tpl = (const char *)out_flamegraph_html;
    const char *mark = strstr(tpl, OUT_FLAMEGRAPH_MARKER);
    int rc, has_base;

    (void)o;
    if (mark == NULL || p == NULL || p->stacks == NULL)
        return REMORA_EIO;          /* a template without its placeholder: a build bug */
    fwrite(tpl, 1, (size_t)(mark - tpl), f);
    fputs("{\"version\":1,\n\"current\":", f);
    has_base = p->baseline != NULL && p->baseline->stacks != NULL;
    rc = write_profile(f, p, has_base ? p->baseline : NULL);
    if (rc == 0) {
        fputs(",\n\"baseline\":", f);
        if (has_base)
            rc = write_profile(f, p->baseline, NULL);
        else
            fputs("null", f);
    }
    if (rc != 0)
        return rc;
    fputs("}", f);
    mark += strlen(OUT_FLAMEGRAPH_MARKER);
    fwrite(mark, 1, out_flamegraph_html_len - (size_t)(mark - tpl), f);
    if (fflush(f) != 0 || ferror(f))
        return REMORA_EIO;
    return 0;
}
