/* tests/unit/unit_formats.c — unit tests of formats/: JSON and text escaping, collapsed
 * stacks written and read back, marshal and pstats, the .remora recording (C frames, the
 * source it keeps), the counts' words, and the bounds of what is read in (collapsed
 * stacks, util/input.c's refusals). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "remora.h"
#include "formats/out.h"
#include "formats/raw.h"
#include "util/util.h"
#include "unit.h"

void test_json(void)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);

    out_json_str(f, "a\"b\\c\n\x01 caf\xc3\xa9 \xff\xfe <x>");
    fclose(f);
    CHECK(strcmp(buf, "\"a\\\"b\\\\c\\u000a\\u0001 caf\xc3\xa9 \\ufffd\\ufffd <x>\"") == 0, "escaped: %s", buf);
    free(buf);
}

/* out_text_str, and collapsed stacks written and read back with hostile names */
void test_text(void)
{
    static const char *names[] = {
        "a\\b;c\n\r\t\x01\x1b[31m\x7f \xc2\x85\xc2\x9b \xe2\x80\xa8 caf\xc3\xa9 \xf0\x9f\x98\x80 \\x41 \\u2028",
        "\\", ";", "</script>", "end\\",
    };
    char *buf = NULL;
    size_t len = 0, i, bad = 0;
    uint64_t samples = 0;
    FILE *f = open_memstream(&buf, &len);
    stk_table_t *t = stk_new(), *back = stk_new();
    uint32_t frames[5];
    profile_t prof;

    out_text_str(f, "a\\\"b\n\x01\xc2\x85\xe2\x80\xa9\xff <x>", '"');
    fclose(f);
    CHECK(strcmp(buf, "a\\\\\\\"b\\n\\x01\\x85\\u2029\xef\xbf\xbd <x>") == 0, "text escaped: %s", buf);
    free(buf);

    for (i = 0; i < 5; i++)
        frames[i] = stk_frame(t, names[i], names[(i + 1) % 5], (int)i + 1);
    stk_add(t, stk_thread(t, 7, "th;\\\n\xff"), frames, 5, 3);
    memset(&prof, 0, sizeof prof);
    prof.stacks = t;
    buf = NULL;
    f = open_memstream(&buf, &len);
    out_collapsed_write(&prof, f, NULL);
    fclose(f);
    CHECK(strchr(buf, '\n') == buf + len - 1, "one line: %s", buf);
    f = fmemopen(buf, len, "r");
    CHECK(out_collapsed_read(f, back, OUT_COLLAPSED_MAX_LINE, &samples, &bad) == 0 && samples == 3, "read back (line %zu)", bad);
    fclose(f);
    CHECK(stk_nthreads(back) == 1 && strcmp(stk_thread_at(back, 0)->name, "th;\\\n\xef\xbf\xbd") == 0,
          "thread name read back: %s", stk_nthreads(back) ? stk_thread_at(back, 0)->name : "(none)");
    for (i = 0; i < 5 && i < stk_nframes(back); i++) {
        const stk_frame_t *fr = stk_frame_at(back, (uint32_t)i);
        CHECK(strcmp(fr->function, names[i]) == 0 && strcmp(fr->file, names[(i + 1) % 5]) == 0 &&
              fr->line == (int)i + 1, "frame %zu read back: %s (%s:%d)", i, fr->function, fr->file, fr->line);
    }
    free(buf);
    stk_free(t);
    stk_free(back);
}

/* ---- marshal: the bytes Python's marshal format gives each object (version 4, no refs) ---- */

static int bytes_are(const char *buf, size_t len, const char *want, size_t wlen)
{
    return len == wlen && memcmp(buf, want, wlen) == 0;
}

#define MARSHAL_CASE(stmt, want)                                                         \
    do {                                                                                 \
        char *buf_ = NULL;                                                               \
        size_t len_ = 0;                                                                 \
        FILE *f = open_memstream(&buf_, &len_);                                          \
        stmt;                                                                            \
        fclose(f);                                                                       \
        CHECK(bytes_are(buf_, len_, want, sizeof want - 1), "%s: %zu bytes", #stmt, len_); \
        free(buf_);                                                                      \
    } while (0)

void test_marshal(void)
{
    char long_ascii[301], want_long[306];

    MARSHAL_CASE(out_marshal_int(f, 5), "i\x05\0\0\0");
    MARSHAL_CASE(out_marshal_int(f, -2), "i\xfe\xff\xff\xff");
    MARSHAL_CASE(out_marshal_int(f, INT32_MAX), "i\xff\xff\xff\x7f");
    /* 2^40: 15-bit digits 0, 0, 1024 */
    MARSHAL_CASE(out_marshal_int(f, 1LL << 40), "l\x03\0\0\0\0\0\0\0\0\x04");
    /* -(2^31 + 1): digits 1, 0, 2, the count negative */
    MARSHAL_CASE(out_marshal_int(f, -2147483649LL), "l\xfd\xff\xff\xff\x01\0\0\0\x02\0");
    MARSHAL_CASE(out_marshal_float(f, 1.5), "g\0\0\0\0\0\0\xf8\x3f");
    MARSHAL_CASE(out_marshal_float(f, 0.001), "g\xfc\xa9\xf1\xd2\x4d\x62\x50\x3f");
    MARSHAL_CASE(out_marshal_str(f, "ab"), "z\x02" "ab");
    MARSHAL_CASE(out_marshal_str(f, ""), "z\x00");
    MARSHAL_CASE(out_marshal_str(f, "caf\xc3\xa9"), "u\x05\0\0\0caf\xc3\xa9");
    /* not UTF-8 (a lone byte, a surrogate's encoding): U+FFFD for each byte */
    MARSHAL_CASE(out_marshal_str(f, "a\xff"), "u\x04\0\0\0a\xef\xbf\xbd");
    MARSHAL_CASE(out_marshal_str(f, "\xed\xa0\x80"), "u\x09\0\0\0\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
    MARSHAL_CASE(out_marshal_tuple(f, 3), ")\x03");
    MARSHAL_CASE(out_marshal_tuple(f, 300), "(\x2c\x01\0\0");
    MARSHAL_CASE((out_marshal_dict(f), out_marshal_str(f, "k"), out_marshal_int(f, 1), out_marshal_dict_end(f)),
                 "{z\x01ki\x01\0\0\0" "0");
    memset(long_ascii, 'x', 300);
    long_ascii[300] = '\0';
    memcpy(want_long, "a\x2c\x01\0\0", 5);
    memcpy(want_long + 5, long_ascii, 301);
    {
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        out_marshal_str(f, long_ascii);
        fclose(f);
        CHECK(bytes_are(buf, len, want_long, 305), "300 ASCII characters: TYPE_ASCII, %zu bytes", len);
        free(buf);
    }
}

/* A reader of the marshal subset above, for the pstats test: a tree of values. */
typedef struct mval {
    char type;                  /* 'i' int, 'g' float, 's' string, 't' tuple, 'd' dict */
    long long i;
    double g;
    char s[64];
    struct mval *items;         /* tuple items; dict keys and values in turn */
    size_t n;                   /* items */
} mval_t;

static void mval_free(mval_t *v)
{
    size_t i;

    for (i = 0; i < v->n; i++)
        mval_free(&v->items[i]);
    free(v->items);
}

static uint32_t le_u32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Parses one object at *p (before end); 0 or -1 when malformed. */
static int mval_read(const unsigned char **p, const unsigned char *end, mval_t *v, int depth)
{
    const unsigned char *q = *p;
    size_t n, i;
    char t;

    memset(v, 0, sizeof *v);
    if (q >= end || depth > 8)
        return -1;
    t = (char)*q++;
    if (t == 'i') {
        if (end - q < 4)
            return -1;
        v->type = 'i';
        v->i = (int32_t)le_u32(q);
        q += 4;
    } else if (t == 'g') {
        uint64_t bits;
        if (end - q < 8)
            return -1;
        bits = le_u32(q) | (uint64_t)le_u32(q + 4) << 32;
        memcpy(&v->g, &bits, 8);
        v->type = 'g';
        q += 8;
    } else if (t == 'z' || t == 'u' || t == 'a') {
        if (t == 'z')
            n = q < end ? *q++ : 0;
        else if (end - q >= 4)
            n = le_u32(q), q += 4;
        else
            return -1;
        if ((size_t)(end - q) < n)
            return -1;
        v->type = 's';
        snprintf(v->s, sizeof v->s, "%.*s", (int)n, (const char *)q);
        q += n;
    } else if (t == ')' || t == '{') {
        v->type = t == ')' ? 't' : 'd';
        n = t == ')' ? (q < end ? *q++ : 0) : 0;
        for (i = 0; t == ')' ? i < n : q < end && *q != '0'; i++) {
            mval_t *items = realloc(v->items, (i + 1) * sizeof *items);
            if (items == NULL)
                return -1;
            v->items = items;
            v->n = i + 1;
            if (mval_read(&q, end, &v->items[i], depth + 1))
                return -1;
        }
        if (t == '{') {
            if (q >= end || (v->n & 1))
                return -1;
            q++;
        }
    } else {
        return -1;
    }
    *p = q;
    return 0;
}

/* The value of the dict d under the (file, line, function) key, or NULL. */
static const mval_t *pstats_entry(const mval_t *d, const char *file, int line, const char *fn)
{
    size_t i;

    for (i = 0; d->type == 'd' && i + 1 < d->n; i += 2) {
        const mval_t *k = &d->items[i];
        if (k->type == 't' && k->n == 3 && strcmp(k->items[0].s, file) == 0 &&
            k->items[1].i == line && strcmp(k->items[2].s, fn) == 0)
            return &d->items[i + 1];
    }
    return NULL;
}

/* out_pstats_write of a small table: entries, times of samples x interval, callers with the
 * edges' samples, no entry for a thread root or a frame never sampled, ('~', 0, name) for a
 * frame without a file; and the table leaves the unsampled frame out and shows hot lines. */
void test_pstats(void)
{
    stk_table_t *t = stk_new();
    uint32_t th, f_main, f_rec20, f_rec21, f_leaf, f_gc, f_moving;
    profile_t prof;
    char *buf = NULL;
    size_t len = 0;
    FILE *f;
    mval_t d;
    const unsigned char *p;
    const mval_t *e;

    f_main = stk_frame(t, "main", "a.py", 10);
    f_rec20 = stk_frame(t, "rec", "a.py", 20);
    f_rec21 = stk_frame(t, "rec", "a.py", 21);
    f_leaf = stk_frame(t, "leaf", "b.py", 5);
    f_gc = stk_frame(t, "<GC>", "", 0);          /* interned, never sampled */
    f_moving = stk_frame(t, "<moving>", "", 0);
    (void)f_gc;
    th = stk_thread(t, 1, "MainThread");
    {
        uint32_t s1[] = { f_main, f_rec20, f_rec21, f_leaf };   /* rec recursing: line 21 twice as hot */
        uint32_t s2[] = { f_main, f_rec21, f_leaf };
        uint32_t s3[] = { f_main, f_moving };
        stk_add(t, th, s1, 4, 3);
        stk_add(t, th, s2, 3, 4);
        stk_add(t, th, s3, 2, 1);
    }
    memset(&prof, 0, sizeof prof);
    prof.stacks = t;
    prof.meta.duration_s = 2.0;
    prof.meta.samples = 8;                      /* 0.25 s a sample */
    f = open_memstream(&buf, &len);
    CHECK(out_pstats_write(&prof, f, NULL) == 0, "pstats written");
    fclose(f);
    p = (const unsigned char *)buf;
    CHECK(mval_read(&p, p + len, &d, 0) == 0 && p == (const unsigned char *)buf + len && d.type == 'd',
          "pstats: one dict, the whole file");
    CHECK(d.n == 2 * 4, "4 entries (main, rec, leaf, <moving>), got %zu", d.n / 2);
    e = pstats_entry(&d, "a.py", 21, "rec");
    CHECK(e && e->n == 5 && e->items[0].i == 7 && e->items[1].i == 7 && e->items[2].g == 0.0 &&
          e->items[3].g == 7 * 0.25, "rec at its hot line 21: 7 samples, cumtime 1.75");
    if (e && e->n == 5) {
        const mval_t *c = &e->items[4], *from_main = pstats_entry(c, "a.py", 10, "main"),
                     *from_rec = pstats_entry(c, "a.py", 21, "rec");
        CHECK(c->n == 4 && from_main && from_main->items[0].i == 7 && from_main->items[3].g == 7 * 0.25 &&
              from_rec && from_rec->items[0].i == 3 && from_rec->items[2].g == 0.0,
              "rec's callers: main (7 samples), rec (3)");
    }
    e = pstats_entry(&d, "b.py", 5, "leaf");
    CHECK(e && e->items[0].i == 7 && e->items[2].g == 7 * 0.25 && e->items[3].g == 7 * 0.25,
          "leaf: tottime = cumtime = 1.75");
    if (e && e->n == 5) {
        const mval_t *from = pstats_entry(&e->items[4], "a.py", 21, "rec");
        CHECK(e->items[4].n == 2 && from && from->items[0].i == 7 && from->items[2].g == 7 * 0.25,
              "leaf called by rec, 7 samples, all self");
    }
    e = pstats_entry(&d, "~", 0, "<moving>");
    CHECK(e && e->items[0].i == 1 && e->items[2].g == 0.25, "<moving> keyed ('~', 0, name)");
    e = pstats_entry(&d, "a.py", 10, "main");
    CHECK(e && e->items[4].n == 0 && e->items[3].g == 8 * 0.25, "main: no callers (thread roots left out)");
    mval_free(&d);
    free(buf);

    /* the table: no <GC> row, rec shown at line 21 */
    buf = NULL;
    f = open_memstream(&buf, &len);
    out_table_write(&prof, f, NULL);
    fclose(f);
    CHECK(strstr(buf, "<GC>") == NULL, "table: no row for a frame never sampled:\n%s", buf);
    CHECK(strstr(buf, "rec (a.py:21)") != NULL, "table: rec at its hot line:\n%s", buf);
    free(buf);
    stk_free(t);
}

/* --native: a C frame and a Python frame of the same name, file and line are two frames,
 * and a recording keeps which is which. */
void test_native_frames(void)
{
    stk_table_t *t = stk_new(), *back = stk_new();
    uint32_t py = stk_frame(t, "f", "x", 1), c = stk_frame_kind(t, "f", "x", 1, 1), th, n;
    char path[] = "/tmp/remora-unit-XXXXXX";
    raw_writer_t *w = NULL;
    profile_meta_t m;
    FILE *f;
    int fd = mkstemp(path), natives = 0;
    size_t i;

    CHECK(py != c && !stk_frame_at(t, py)->native && stk_frame_at(t, c)->native,
          "C and Python frames apart: %u %u", py, c);
    CHECK(stk_frame_kind(t, "f", "x", 1, 1) == c, "a C frame interned once");
    th = stk_thread(t, 1, "main");
    {
        uint32_t s[] = { py, c };
        n = stk_add(t, th, s, 2, 1);
    }
    memset(&m, 0, sizeof m);
    if (fd >= 0)
        close(fd);
    CHECK(fd >= 0 && raw_open(path, &w) == 0 && raw_sample(w, t, th, n, 0, 0) == 0 &&
          raw_close(w, &m, 1, NULL) == 0, "recording written");
    f = fopen(path, "rb");
    CHECK(f != NULL && raw_read(f, back, &m, NULL, NULL) == 0, "recording read back");
    for (i = 0; i < stk_nframes(back); i++)
        natives += stk_frame_at(back, (uint32_t)i)->native;
    CHECK(stk_nframes(back) == 2 && natives == 1, "%zu frames, %d C frames read back",
          stk_nframes(back), natives);
    if (f != NULL)
        fclose(f);
    unlink(path);
    stk_free(t);
    stk_free(back);
}

/* The source a recording keeps: a heatmap converted from it is the page the recording's
 * own heatmap was, byte for byte (lines around sampled ones, a file's end near one, a
 * line past it, a file going on well past its last, a long line, \r\n and lone \r ends,
 * a file without its last newline, one with a problem), and a recording damaged in its 'L'
 * records is refused there. */
typedef struct unit_src {
    const char *file[3], *text[3];
    int calls;
} unit_src_t;

static void unit_source(void *ctx, const char *file, out_source_t *out)
{
    unit_src_t *u = ctx;
    int i;

    memset(out, 0, sizeof *out);
    u->calls++;
    out->problem = "missing or unreadable";
    for (i = 0; i < 3; i++)
        if (strcmp(file, u->file[i]) == 0 && u->text[i] != NULL) {
            out->problem = NULL;
            out->text = u->text[i];
            out->len = strlen(u->text[i]);
            out->changed = i == 1;
        }
}

static char *unit_page(const profile_t *p, out_source_fn fn, void *ctx, size_t *len)
{
    out_options_t o = { 0, 0, fn, ctx };
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);

    if (f == NULL)
        return NULL;
    if (out_heatmap_write(p, f, &o) != 0)
        *len = 0;
    fclose(f);
    return buf;
}

void test_raw_sources(void)
{
    static char big[48 * 64 + 2000];
    stk_table_t *t = stk_new(), *back = stk_new();
    unit_src_t u = { { "/a.py", "/b.py", "/c.py" }, { big, "x = 1\r\ny = 2\rz = 3\n4\n5\n6\n7\n8\n9\n10\n11\n12", NULL }, 0 };
    static const struct { int file, line; } at[] = { { 0, 3 }, { 0, 10 }, { 0, 20 }, { 0, 45 }, { 0, 48 },
                                                    { 0, 60 }, { 1, 2 }, { 1, 3 }, { 2, 7 } };
    char path[] = "/tmp/remora-unit-XXXXXX", *want = NULL, *got = NULL;
    raw_writer_t *w = NULL;
    raw_sources_t *src = NULL;
    profile_t p1, p2;
    profile_meta_t m;
    size_t i, n = 0, wlen = 0, glen = 0;
    uint32_t th;
    FILE *f;
    int fd = mkstemp(path);

    for (i = 1; i <= 48; i++) {
        if (i == 20)                /* a long line: more than the heatmap shows */
            for (size_t k = 0; k < 300; k++)
                n += (size_t)snprintf(big + n, sizeof big - n, "\xc3\xa9");
        n += (size_t)snprintf(big + n, sizeof big - n, "line %zu <&>%s", i, i % 7 ? "\n" : "\r\n");
    }
    th = stk_thread(t, 1, "main");
    for (i = 0; i < sizeof at / sizeof at[0]; i++) {
        uint32_t s[2] = { stk_frame(t, "main", "/a.py", 1),
                          stk_frame(t, "f", u.file[at[i].file], at[i].line) };
        stk_add(t, th, s, 2, i + 1);
    }
    memset(&m, 0, sizeof m);
    if (fd >= 0)
        close(fd);
    CHECK(fd >= 0 && raw_open(path, &w) == 0, "recording opened");
    if (w == NULL)
        goto out;
    for (i = 0; i < stk_nnodes(t); i++)
        if (stk_node_at(t, (uint32_t)i)->parent != STK_NONE)
            raw_sample(w, t, th, (uint32_t)i, 0, 0);
    raw_keep_source(w, t, unit_source, &u);
    CHECK(raw_close(w, &m, 1, NULL) == 0 && u.calls == 3, "recording with its source written (%d read)", u.calls);
    f = fopen(path, "rb");
    CHECK(f != NULL && raw_read_sources(f, back, &m, NULL, NULL, &src) == 0 && src != NULL,
          "recording with its source read back");
    if (f != NULL)
        fclose(f);
    /* the recording's samples, read without its source: the page the recording's
     * heatmap would be, its files read through the callback */
    f = fopen(path, "rb");
    stk_free(t);
    t = stk_new();
    CHECK(f != NULL && t != NULL && raw_read(f, t, &m, NULL, NULL) == 0, "recording read again");
    if (f != NULL)
        fclose(f);
    memset(&p1, 0, sizeof p1);
    p1.meta = m;
    p2 = p1;
    p1.stacks = t;
    p2.stacks = back;
    want = unit_page(&p1, unit_source, &u, &wlen);
    got = unit_page(&p2, raw_source, src, &glen);
    CHECK(want != NULL && got != NULL && wlen > 0 && wlen == glen && memcmp(want, got, wlen) == 0,
          "convert's heatmap is the recording's (%zu and %zu bytes)", wlen, glen);
    if (want != NULL && got != NULL && (wlen != glen || memcmp(want, got, wlen) != 0)) {
        for (i = 0; i < wlen && i < glen && want[i] == got[i]; i++)
            ;
        fprintf(stderr, "  first difference at %zu: want '%.80s' got '%.80s'\n", i, want + i, got + i);
    }
    CHECK(want != NULL && strstr(want, "line 9 &lt;&amp;&gt;") != NULL && strstr(want, "\xe2\x80\xa6") != NULL &&
          strstr(want, "Source not shown: missing or unreadable") != NULL,
          "the page shows the lines, the long one cut, the problem");
    {
        out_source_t o;
        raw_source(src, "/nowhere.py", &o);
        CHECK(o.problem != NULL && strstr(o.problem, "not in the recording") != NULL, "a file not kept: %s",
              o.problem ? o.problem : "(none)");
        raw_source(NULL, "/a.py", &o);
        CHECK(o.problem != NULL && o.text == NULL, "collapsed stacks: no source");
    }
    /* 'L' records a writer never writes: refused where they are */
    {
        static const struct { const char *rec; size_t len; const char *what; } bad[] = {
            { "L\x00\x00\x00\x03\x01\x02\x01x", 9, NULL },         /* whole: read */
            { "L\x00\x00\x00\x03\x01\x00\x01x", 9, "a gap of 0" },
            { "L\x00\x00\x00\x03\x04\x01\x01x", 9, "more lines kept than the file has" },
            { "L\x00\x00\x00\x03\x01\x04\x01x", 9, "a line past the file's end" },
            { "L\x00\x00\x00\x03\x01\x01\x02x\n", 10, "a line holding a newline" },
            { "L\x00\x03why\x00\x03\x00", 9, "a problem and lines" },
            { "L\x05\x00\x00\x03\x01\x01\x01x", 9, "a file that is no string" },
            { "L\x00\x00\x00\xff\xff\xff\xff\x0f\x00", 10, "more lines than any file" },
        };
        for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            char rec[64];
            size_t k = 0;
            stk_table_t *bt = stk_new();
            raw_sources_t *bs = NULL;
            profile_meta_t bm;
            FILE *g;
            memcpy(rec, "REMORA\0\4S\x04" "a.py", 14);      /* a string: "a.py" */
            k = 14;
            memcpy(rec + k, bad[i].rec, bad[i].len);
            k += bad[i].len;
            rec[k++] = 'Z';
            g = fmemopen(rec, k, "rb");
            CHECK(g != NULL && raw_read_sources(g, bt, &bm, NULL, NULL, &bs) ==
                  (bad[i].what ? REMORA_ECORRUPT : REMORA_OK), "'L' with %s %s",
                  bad[i].what ? bad[i].what : "one line", bad[i].what ? "refused" : "read");
            if (g != NULL)
                fclose(g);
            raw_sources_free(bs);
            stk_free(bt);
        }
    }
out:
    free(want);
    free(got);
    raw_sources_free(src);
    unlink(path);
    stk_free(t);
    stk_free(back);
}

/* ---- counts: the counts' words (formats/counts.c), plurals and shares ---- */

void test_counts_words(void)
{
    profile_meta_t m;
    char buf[512];

    memset(&m, 0, sizeof m);
    m.counted = 1;
    m.rate_hz = 1000;
    m.duration_s = 1.5;
    m.paused_s = 0.5;
    m.samples = 1;
    m.written = 1;
    m.idle = 1;
    m.errors = 1;
    m.partial = 1;
    out_counts_text(buf, sizeof buf, &m, 0);
    CHECK(strcmp(buf, "1 round taken of 1000 asked in 1.00 s (1 Hz of 1000 Hz asked), 1 thread "
                 "sample written, 1 left out as idle (--idle keeps them), 1 error (100.00%), "
                 "1 partial (100.00%)") == 0, "counts: plurals, one of each: %s", buf);
    m.samples = 2;
    m.written = 400;
    m.errors = 2;
    m.partial = 0;
    m.idle_kept = 1;
    m.idle = 0;
    out_counts_text(buf, sizeof buf, &m, 0);
    CHECK(strcmp(buf, "2 rounds taken of 1000 asked in 1.00 s (2 Hz of 1000 Hz asked), 400 thread "
                 "samples written, 0 left out as idle (--idle), 2 errors (0.50%), "
                 "0 partial (0.00%)") == 0, "counts: shares of written, --idle: %s", buf);
    m.counted = 0;
    out_counts_text(buf, sizeof buf, &m, 1);
    CHECK(strcmp(buf, "1 thread sample written") == 0, "counts: a profile without them: %s", buf);
    /* a hostile recording's figures: no conversion out of range */
    m.counted = 1;
    m.rate_hz = 1e300;
    m.paused_s = 0;
    CHECK(out_rounds_asked(&m) == 0, "counts: rounds asked past 2^64 are 0");
    m.paused_s = 1e9;
    CHECK(out_time_sampled(&m) == 0.0, "counts: a pause longer than the recording: 0 s sampled");
    CHECK(strcmp(out_plural(1, "snapshot", "snapshots"), "snapshot") == 0 &&
          strcmp(out_plural(0, "period", "periods"), "periods") == 0, "counts: out_plural");
}

/* ---- input bounds (issue 46): a line over the bound, a total that would wrap, inputs
 * refused by their type ---- */

void test_input_bounds(void)
{
    static const struct {
        const char *text;
        size_t max;
        int err;
        size_t bad;
        uint64_t samples;
    } cases[] = {
        { "abcdef 1\n", 8, REMORA_OK, 0, 1 },               /* 8 bytes: at the bound */
        { "abcdefg 1\n", 8, REMORA_ENOMEM, 1, 0 },          /* 9: over it */
        { "a 1\nabcdefg 1\n", 8, REMORA_ENOMEM, 2, 1 },
        { "abcdef 1\r\n", 8, REMORA_ENOMEM, 1, 0 },         /* the CR counts */
        { "abcdef 1", 8, REMORA_OK, 0, 1 },                 /* no newline at the end */
        { "a 18446744073709551615\nb 0\n", 64, REMORA_OK, 0, UINT64_MAX },
        { "a 18446744073709551615\nb 1\n", 64, REMORA_ECORRUPT, 2, UINT64_MAX },
    };
    char dir[] = "/tmp/remora-unit-XXXXXX", path[64];
    const char *why;
    size_t i;
    int fd;

    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        stk_table_t *t = stk_new();
        FILE *f = fmemopen((void *)cases[i].text, strlen(cases[i].text), "r");
        uint64_t samples = 0;
        size_t bad = 0;
        int err = out_collapsed_read(f, t, cases[i].max, &samples, &bad);
        CHECK(err == cases[i].err && bad == cases[i].bad && samples == cases[i].samples,
              "collapsed case %zu: err %d line %zu samples %llu", i, err, bad,
              (unsigned long long)samples);
        fclose(f);
        stk_free(t);
    }

    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(path, sizeof path, "%s/fifo", dir);
    CHECK(mkfifo(path, 0600) == 0, "mkfifo");
    fd = remora_input_open(path, &why);         /* no writer: must not block */
    CHECK(fd < 0 && why != NULL && strcmp(why, "a FIFO") == 0, "FIFO refused: %s", why ? why : "(opened)");
    fd = remora_input_open("/dev/zero", &why);
    CHECK(fd < 0 && why != NULL && strcmp(why, "a character device") == 0, "/dev/zero refused");
    fd = remora_input_open(dir, &why);
    CHECK(fd < 0 && why != NULL && strcmp(why, "a directory") == 0, "a directory refused");
    snprintf(path, sizeof path, "%s/none", dir);
    fd = remora_input_open(path, &why);
    CHECK(fd < 0 && why == NULL && errno == ENOENT, "a missing file: ENOENT");
    snprintf(path, sizeof path, "%s/file", dir);
    fd = open(path, O_WRONLY | O_CREAT, 0600);
    CHECK(fd >= 0 && write(fd, "x", 1) == 1, "a file made");
    close(fd);
    fd = remora_input_open(path, &why);
    CHECK(fd >= 0 && why == NULL && (fcntl(fd, F_GETFL) & O_NONBLOCK) == 0,
          "a regular file opened, blocking");
    if (fd >= 0)
        close(fd);
    unlink(path);
    snprintf(path, sizeof path, "%s/fifo", dir);
    unlink(path);
    rmdir(dir);
}
