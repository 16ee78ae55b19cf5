/* formats/flamegraph.c — the self-contained HTML flamegraph.
 *
 * Writes the template (src/formats/flamegraph.html, embedded at build time) with the
 * profile inserted as JSON into its <script type="application/json"> element. The page
 * draws on a canvas and reads its data with JSON.parse, so every name from the target
 * stays data: the JSON is escaped so that no byte sequence can close the element.
 *
 * Data layout (read by the template's load()):
 *   {"version":1, "current":PROFILE, "baseline":PROFILE|null}
 *   PROFILE = {"meta":{...}, "total":N, "strings":[...], "frames":[fn,file,line,...],
 *              "threads":[[tid,name,samples],...], "depth":[...], "frame":[...],
 *              "self":[...], "native":[...]}
 * strings holds each distinct function and file name once; frames are triples of
 * string indexes and a line; "native" lists the C frames' indexes (--native; absent when
 * there are none). The nodes of every thread's trie follow in depth-first
 * pre-order, thread by thread: depth 0 is a thread's root (frame -1), and a node's
 * parent is the nearest earlier node one level up, so the tree needs no parent links.
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

static void write_meta(FILE *f, const profile_meta_t *m)
{
    fprintf(f, "{\"pid\":%ld,", (long)m->pid);
    put_field(f, "command", m->command, sizeof m->command);
    fputc(',', f);
    put_field(f, "python", m->python, sizeof m->python);
    fputc(',', f);
    put_field(f, "mode", m->mode, sizeof m->mode);
    fputc(',', f);
    put_double(f, "duration_s", m->duration_s);
    fputc(',', f);
    put_double(f, "rate_hz", m->rate_hz);
    fprintf(f, ",\"samples\":%" PRIu64 ",\"errors\":%" PRIu64 ",\"late\":%" PRIu64
               ",\"start_unix_ns\":%" PRId64 "}",
            m->samples, m->errors, m->late, m->start_unix_ns);
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

/* Writes one PROFILE object. Returns 0 or REMORA_ENOMEM. */
static int write_profile(FILE *f, const profile_t *p)
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
    write_meta(f, &p->meta);
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
    for (i = 0, rc = 0; i < nf; i++) {
        if (!stk_frame_at(t, (uint32_t)i)->native)
            continue;
        fprintf(f, "%s%zu", rc ? "," : ",\n\"native\":[", i);
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
    int rc;

    (void)o;
    if (mark == NULL || p == NULL || p->stacks == NULL)
        return REMORA_EIO;          /* a template without its placeholder: a build bug */
    fwrite(tpl, 1, (size_t)(mark - tpl), f);
    fputs("{\"version\":1,\n\"current\":", f);
    rc = write_profile(f, p);
    if (rc == 0) {
        fputs(",\n\"baseline\":", f);
        if (p->baseline != NULL && p->baseline->stacks != NULL)
            rc = write_profile(f, p->baseline);
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
