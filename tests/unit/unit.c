/* tests/unit/unit.c — unit tests of remora's pure parts: line tables, /proc parsers, the source cache,
 * ELF reader, interned strings, JSON escaping, frame walks, and the reading of thread
 * names over synthetic memory (a snapshot source). Ends with "unit: N passed, N failed". */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "remora.h"
#include "proc/proc.h"
#include "unwind/unwind.h"
#include "unwind/internal.h"
#include "unwind/tasks.h"
#include "kern/kern.h"
#include "formats/out.h"
#include "formats/raw.h"
#include "util/util.h"

static int passed, failed;

#define CHECK(cond, ...)                                                   \
    do {                                                                   \
        if (cond) {                                                        \
            passed++;                                                      \
        } else {                                                           \
            failed++;                                                      \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);           \
            fprintf(stderr, __VA_ARGS__);                                  \
            fputc('\n', stderr);                                           \
        }                                                                  \
    } while (0)

/* ---- line tables: each case is a table CPython built and the lines it reports ---- */

struct lt_case {
    int minor;
    const char *name;
    int firstlineno;
    const unsigned char *tab;
    size_t tablen;
    const int *off, *line;
    size_t n;
};

#include "linetables.h"

#define LT_CASE(minor, name, first, id, tablen, n) \
    { minor, name, first, id##_tab, tablen, id##_off, id##_line, n },
static const struct lt_case lt_cases[] = {
    LT_CASES_9 LT_CASES_10 LT_CASES_11 LT_CASES_12 LT_CASES_13 LT_CASES_14 LT_CASES_15
};
#undef LT_CASE

static void test_linetables(void)
{
    size_t i, k;
    int seen[16] = { 0 };

    for (i = 0; i < sizeof lt_cases / sizeof lt_cases[0]; i++) {
        const struct lt_case *c = &lt_cases[i];
        int bad = 0;
        seen[c->minor] = 1;
        for (k = 0; k < c->n; k++) {
            int got;
            if (c->minor == 9)
                got = lt_lnotab_line(c->tab, c->tablen, c->firstlineno, c->off[k]);
            else if (c->minor == 10)
                got = lt_310_line(c->tab, c->tablen, c->firstlineno, c->off[k]);
            else
                got = lt_locations_line(c->tab, c->tablen, c->firstlineno, c->off[k]);
            if (got != c->line[k] && bad++ == 0)
                fprintf(stderr, "  3.%d %s offset %d: line %d, CPython says %d\n", c->minor,
                        c->name, c->off[k], got, c->line[k]);
        }
        CHECK(bad == 0, "line table of %s (3.%d): %d offsets differ", c->name, c->minor, bad);
    }
    for (i = 9; i <= 15; i++)
        CHECK(seen[i], "no line-table fixture for 3.%zu", i);
    /* truncated and hostile tables never read out of bounds (ASan checks) */
    for (i = 0; i < sizeof lt_cases / sizeof lt_cases[0]; i++) {
        const struct lt_case *c = &lt_cases[i];
        size_t cut;
        for (cut = 0; cut < c->tablen; cut += 3) {
            unsigned char *t = malloc(cut ? cut : 1);
            memcpy(t, c->tab, cut);
            (void)lt_lnotab_line(t, cut, 1, 1000);
            (void)lt_310_line(t, cut, 1, 1000);
            (void)lt_locations_line(t, cut, 1, 1000);
            free(t);
        }
    }
    {
        unsigned char junk[64];
        memset(junk, 0xff, sizeof junk);
        CHECK(lt_locations_line(junk, sizeof junk, 5, 10) >= -1, "junk table");
        CHECK(lt_lnotab_line(junk, 0, 7, 3) == 7, "empty lnotab gives firstlineno");
        CHECK(lt_locations_line(junk, sizeof junk, 7, -2) == 7, "negative offset gives firstlineno");
    }
    /* the whole location (libremora): the same line as lt_locations_line, every table */
    for (i = 0; i < sizeof lt_cases / sizeof lt_cases[0]; i++) {
        const struct lt_case *c = &lt_cases[i];
        int bad = 0;
        if (c->minor < 11)
            continue;
        for (k = 0; k < c->n; k++) {
            lt_location_t loc;
            int rc = lt_locations_entry(c->tab, c->tablen, c->firstlineno, c->off[k], &loc);
            if ((rc == 0 ? loc.line : -1) != c->line[k] || (rc == 0 && loc.end_line < loc.line))
                bad++;
        }
        CHECK(bad == 0, "locations of %s (3.%d): %d offsets differ from their lines", c->name,
              c->minor, bad);
        for (k = 0; k < c->tablen; k += 3) {
            unsigned char *t = malloc(k ? k : 1);
            lt_location_t loc;
            memcpy(t, c->tab, k);
            (void)lt_locations_entry(t, k, 1, 1000, &loc);
            free(t);
        }
    }
    {
        /* short form (col 2, length 5), one-line form (code 10: cols 4-9), long form
         * (line +2, end line +1, cols 5-10), no location; one code unit each */
        static const unsigned char tab[] = { 0x80, 0x25, 0xd0, 4, 9, 0xf0, 4, 1, 6, 11, 0xf8 };
        static const int want[4][4] = { { 10, 10, 2, 7 }, { 10, 10, 4, 9 }, { 12, 13, 5, 10 },
                                        { -1, -1, -1, -1 } };
        lt_location_t loc;
        for (k = 0; k < 4; k++) {
            int rc = lt_locations_entry(tab, sizeof tab, 10, (int)k * 2, &loc);
            CHECK(loc.line == want[k][0] && loc.end_line == want[k][1] &&
                  loc.column == want[k][2] && loc.end_column == want[k][3] &&
                  (rc == 0) == (k < 3), "location entry %zu: %d-%d cols %d-%d rc %d", k,
                  loc.line, loc.end_line, loc.column, loc.end_column, rc);
        }
    }
}

/* ---- /proc parsers ---- */

static void test_maps(void)
{
    char text[] =
        "00400000-00452000 r-xp 00000000 08:02 173521      /usr/bin/python3.11\n"
        "7f0000000000-7f0000021000 rw-p 00000000 00:00 0 \n"
        "7f1000000000-7f1000001000 r--p 00001000 fd:01 42   /path with spaces/lib.so (deleted)\n"
        "garbage line\n"
        "ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]\n"
        "1000-2000 r--p 0 0:0 1 /no/newline";
    proc_maps_t m;

    CHECK(proc_maps_parse(text, strlen(text), 100, &m) == 0, "parse");
    CHECK(m.n == 4, "4 valid lines, got %zu", m.n);
    if (m.n == 4) {
        CHECK(m.v[0].start == 0x400000 && m.v[0].end == 0x452000, "range");
        CHECK(strcmp(m.v[0].perms, "r-xp") == 0, "perms");
        CHECK(m.v[0].inode == 173521 && m.v[0].dev_major == 8 && m.v[0].dev_minor == 2, "dev/inode");
        CHECK(strcmp(m.v[0].path, "/usr/bin/python3.11") == 0, "path");
        CHECK(m.v[1].path == NULL, "anonymous has no path");
        CHECK(strcmp(m.v[2].path, "/path with spaces/lib.so (deleted)") == 0, "path with spaces");
        CHECK(m.v[2].offset == 0x1000, "offset");
        CHECK(strcmp(m.v[3].path, "[vsyscall]") == 0, "pseudo path");
    }
    free(m.v);
    {
        char small[] = "1000-2000 r--p 0 0:0 1 /a\n3000-4000 r--p 0 0:0 1 /b\n";
        CHECK(proc_maps_parse(small, strlen(small), 1, &m) == 0 && m.n == 1, "max entries");
        free(m.v);
    }
    {
        char over[] = "1-0 r--p 0 0:0 1 /a\n11111111111111111-2 r--p 0 0:0 1 /b\n";
        CHECK(proc_maps_parse(over, strlen(over), 10, &m) == 0 && m.n == 0, "end<start and overflow rejected");
        free(m.v);
    }
}

static void test_stat(void)
{
    const char *s1 = "1234 (python3) R 1 2 3";
    const char *s2 = "1234 (evil) S (name) D 1";
    const char *s3 = "1234 (unterminated";
    char st = 0;

    CHECK(proc_stat_parse_state(s1, strlen(s1), &st) == 0 && st == 'R', "plain");
    CHECK(proc_stat_parse_state(s2, strlen(s2), &st) == 0 && st == 'D', "comm with parens");
    CHECK(proc_stat_parse_state(s3, strlen(s3), &st) != 0, "malformed");
}

/* ---- ELF ---- */

const char unit_marker[] = "remora-unit-marker";

static void test_elf(void)
{
    int fd = open("/proc/self/exe", O_RDONLY);
    elf_t *e = NULL;
    uint64_t v = 0, size = 0, base = 1;
    const char *bytes;

    CHECK(fd >= 0 && elf_open_fd(fd, &e) == 0, "open self");
    if (e == NULL)
        return;
    CHECK(elf_symbol(e, "unit_marker", &v, &size) == 0, "symbol found");
    CHECK(size == sizeof unit_marker, "symbol size %llu", (unsigned long long)size);
    bytes = elf_at(e, v, sizeof unit_marker);
    CHECK(bytes != NULL && memcmp(bytes, unit_marker, sizeof unit_marker) == 0, "bytes at symbol");
    CHECK(elf_symbol(e, "no_such_symbol_anywhere", &v, NULL) != 0, "absent symbol");
    CHECK(elf_section(e, ".text", &v, &size) == 0 && size > 0, ".text section");
    CHECK(elf_base_vaddr(e, &base) == 0, "base vaddr");
    {
        /* every truncation of the file is handled without reading past it */
        size_t len, cut;
        const unsigned char *all = elf_bytes(e, &len);
        for (cut = 0; cut < len && cut < 200000; cut += cut < 4096 ? 61 : 4093) {
            unsigned char *t = malloc(cut ? cut : 1);
            elf_t *te = NULL;
            memcpy(t, all, cut);
            if (elf_open_mem(t, cut, &te) == 0) {
                (void)elf_symbol(te, "unit_marker", &v, NULL);
                (void)elf_section(te, ".PyRuntime", &v, &size);
                elf_free(te);
            }
            free(t);
        }
        CHECK(1, "truncations");
    }
    {
        unsigned char junk[256];
        elf_t *te = NULL;
        memset(junk, 0x41, sizeof junk);
        CHECK(elf_open_mem(junk, sizeof junk, &te) == REMORA_ENOTPY, "not an ELF");
    }
    elf_free(e);
}

/* ---- interned strings, JSON ---- */

/* ---- source files: the report's cache (source.c) ---- */

static void test_source_cache(void)
{
    char dir[] = "/tmp/remora-unit-src-XXXXXX", path[128], alias[160];
    const proc_src_t *a, *b, *s;
    const char *name, *why;
    proc_src_cache_t *c;
    proc_src_t one;
    proc_t *p = NULL;
    size_t len;
    FILE *f;

    /* no process (convert): nothing is opened, and that is said once */
    CHECK(proc_source_read(NULL, "/etc/passwd", &one) == 0 && one.state == PROC_SRC_NO_PROCESS &&
          one.text == NULL, "no process: no file opened");
    proc_src_free(&one);
    c = proc_src_cache_new(NULL);
    CHECK(c != NULL, "cache");
    if (c == NULL)
        return;
    a = proc_src_cache_get(c, "/etc/passwd");
    b = proc_src_cache_get(c, "/etc/passwd");
    s = proc_src_cache_get(c, "<string>");
    CHECK(a != NULL && a == b && a->state == PROC_SRC_NO_PROCESS, "cache without a process");
    CHECK(s != NULL && s->state == PROC_SRC_NAMELESS, "<string>: no file");
    CHECK(proc_src_cache_unread(c, 0, &name, &why) == 0 && strcmp(name, "/etc/passwd") == 0 &&
          strstr(why, "no process") != NULL && proc_src_cache_unread(c, 1, &name, &why) == -1,
          "unread: the name once, <string> not listed");
    proc_src_cache_free(c);

    /* a live process (this one): one file under two spellings is one entry */
    if (mkdtemp(dir) == NULL || proc_open(getpid(), &p) != 0) {
        CHECK(0, "temp dir or proc_open of self");
        return;
    }
    snprintf(path, sizeof path, "%s/f.py", dir);
    snprintf(alias, sizeof alias, "%s/././/f.py", dir);
    if ((f = fopen(path, "w")) != NULL) {
        fputs("first = 1\n  second = 2  \n", f);
        fclose(f);
    }
    c = proc_src_cache_new(p);
    a = c ? proc_src_cache_get(c, path) : NULL;
    b = c ? proc_src_cache_get(c, alias) : NULL;
    CHECK(a != NULL && a == b && a->state == PROC_SRC_OK, "one file, two spellings: one entry");
    s = a != NULL ? a : &one;
    CHECK(a != NULL && proc_src_line(s, 2, &len) != NULL && len == 10, "its line 2");
    CHECK(proc_src_cache_unread(c, 0, &name, &why) == -1, "nothing unread");
    proc_src_cache_free(c);
    proc_free(p);
    unlink(path);
    rmdir(dir);
}

static void test_strtab(void)
{
    strtab_t *t = strtab_new();
    const char *a, *b, *c;
    char buf[32];
    int i, ok = 1;

    a = strtab_intern(t, "hello", 5);
    b = strtab_intern(t, "hello world", 5);
    c = strtab_intern(t, "hellp", 5);
    CHECK(a == b && a != c && strcmp(a, "hello") == 0, "intern");
    for (i = 0; i < 20000; i++) {
        int n = snprintf(buf, sizeof buf, "name%d", i);
        const char *s = strtab_intern(t, buf, (size_t)n);
        ok &= s != NULL && strcmp(s, buf) == 0;
    }
    CHECK(ok, "many names");
    CHECK(strtab_intern(t, "name123", 7) == strtab_intern(t, "name123", 7), "stable after growth");
    CHECK(strcmp(strtab_intern(t, "a\0b", 3), "a") == 0, "NUL cuts a name");
    strtab_free(t);
}

/* remora_upper_u64 over ranges sorted by start (as segments and mappings are), each case
 * a key and the index of the first range that begins above it. */
static void test_upper(void)
{
    struct rng { uint32_t pad; uint64_t start, end; };
    static const struct rng r[] = { { 0, 10, 20 }, { 0, 20, 30 }, { 0, 40, 50 } };
    static const struct { uint64_t key; size_t want; } cases[] = {
        { 0, 0 }, { 9, 0 }, { 10, 1 }, { 19, 1 }, { 20, 2 }, { 35, 2 }, { 40, 3 },
        { UINT64_MAX, 3 },
    };
    size_t i;

    for (i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CHECK(REMORA_UPPER_U64(r, 3, struct rng, start, cases[i].key) == cases[i].want,
              "upper bound of a start");
    CHECK(REMORA_UPPER_U64(r, 0, struct rng, start, 5) == 0, "upper bound in no range");
    CHECK(REMORA_UPPER_U64(r, 3, struct rng, end, 29) == 1, "upper bound of an end");
}

static void test_json(void)
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
static void test_text(void)
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

/* stk_fn_rows: one row per (function, file) whatever the line; self on the innermost
 * frame; total once per sample however deep the recursion; row indexes kept as the table
 * grows (top diffs two calls by index). */
/* ---- the walk through a --frame-anchor (3.15): frames below the anchor come from what
 * remora remembered; they may be used only while the anchor held through the copies ---- */

/* A walk's fixture: target, unwinder, reader and thread zeroed, the unwinder on T, the
 * reader walking into walk[]. */
static void walk_fixture(py_target_t *T, unwinder_t *u, reader_t *r, rd_thread_t *tc, walked_t *walk)
{
    memset(T, 0, sizeof *T);
    memset(u, 0, sizeof *u);
    memset(r, 0, sizeof *r);
    memset(tc, 0, sizeof *tc);
    u->target = T;
    r->walk = walk;
}

/* The frame header's layout: its kind, size and where the code, previous and
 * instruction fields lie. */
static void frame_layout(py_layout_t *L, int kind, uint64_t size, uint64_t code, uint64_t prev, uint64_t instr)
{
    L->frames_kind = kind;
    L->fr_size = size;
    L->fr_code = code;
    L->fr_previous = prev;
    L->fr_instr = instr;
}

static void test_anchor_walk(void)
{
    enum { FS = 80 };
    py_target_t T;
    unwinder_t u;
    reader_t r;
    rd_thread_t tc;
    walked_t below[1], walk[8];
    walk_more_t more;
    unsigned char copy[2 * FS];
    uint64_t chunk = 0x10000, s0 = chunk + RD_CHUNK_HDR, s1 = s0 + FS, s2 = s1 + FS, v;
    size_t nw = 0;
    int err;

    walk_fixture(&T, &u, &r, &tc, walk);
    frame_layout(&T.layout, PY_FRAMES_DIRECT, FS, 0, 8, 56);
    T.layout.fr_owner_gen = -1;
    /* copied from the anchor (s1, its code 0xc1) up: s2 (code 0xc2) runs, called by s1;
     * remembered below the anchor: s0 (0xc0), the root */
    memset(copy, 0, sizeof copy);
    v = 0xc1, memcpy(copy + 0, &v, 8);
    v = s0, memcpy(copy + 8, &v, 8);
    v = 0xc2, memcpy(copy + FS, &v, 8);
    v = s1, memcpy(copy + FS + 8, &v, 8);
    memset(below, 0, sizeof below);
    below[0].addr = s0;
    below[0].code = 0xc0;
    below[0].cached = 1;
    tc.chunk = chunk;
    tc.base = s1;
    tc.a = tc.b = copy;
    tc.copied = sizeof copy;
    tc.anc_state = ANC_CACHED;
    tc.anc = s1;
    tc.anc_seq = 7;
    tc.below = below;
    tc.nbelow = 1;

    /* the anchor held from the state's read to after the copies */
    tc.lp_end[0] = s1;
    tc.lp_end[1] = 7;
    err = walk_frames(&u, &r, &tc, s2, &nw, &more);
    CHECK(err == 0 && more.kind == WALK_DONE && nw == 3 && walk[1].addr == s1 && walk[2].addr == s0 &&
          walk[2].cached, "anchor held: err %d, more %d, %zu frames", err, (int)more.kind, nw);

    /* the anchor frame returned after the state was read (the interpreter moved it to
     * its caller, seq 8): the frame now at s1 may be another call's, over callers other
     * than those remembered. Nothing remembered is used: copy from the chunk */
    tc.lp_end[0] = s0;
    tc.lp_end[1] = 8;
    nw = 0;
    err = walk_frames(&u, &r, &tc, s2, &nw, &more);
    CHECK(err == 0 && more.kind == WALK_FROM_CHUNK, "anchor moved: err %d, more %d, %zu frames", err,
          (int)more.kind, nw);
    /* moved and back (returned, called again at the same address): seq tells */
    tc.lp_end[0] = s1;
    tc.lp_end[1] = 9;
    err = walk_frames(&u, &r, &tc, s2, &nw, &more);
    CHECK(err == 0 && more.kind == WALK_FROM_CHUNK, "anchor moved and back: err %d, more %d", err,
          (int)more.kind);
}

/* 3.9/3.10 frame objects (fields of a 120-byte header: refcount 0, f_back 24, f_code 32,
 * f_lasti 104, f_executing 116), in one remembered block (sb), both copies given. */
enum { OFS = 120 };

static void obj_frame(unsigned char *b, uint64_t refs, uint64_t back, uint64_t code, uint32_t lasti, int runs)
{
    memset(b, 0, OFS);
    memcpy(b + 0, &refs, 8);
    memcpy(b + 24, &back, 8);
    memcpy(b + 32, &code, 8);
    memcpy(b + 104, &lasti, 4);
    b[116] = (unsigned char)runs;
}

static walked_t obj_walk[UNW_MAX_DEPTH];

static void test_objects_walk(void)
{
    py_target_t T;
    unwinder_t u;
    reader_t r;
    rd_thread_t tc;
    rd_block_t sb;
    walk_more_t more;
    unsigned char one[3 * OFS], two[3 * OFS], ts[64];
    uint64_t base = 0x20000, f0 = base, f1 = base + OFS, f2 = base + 2 * OFS;
    size_t nw = 0, keep = 99;
    int err;

    walk_fixture(&T, &u, &r, &tc, obj_walk);
    memset(ts, 0, sizeof ts);
    frame_layout(&T.layout, PY_FRAMES_OBJECTS, OFS, 32, 24, 104);
    T.layout.fr_state = 116;
    T.layout.fr_running = -1;
    T.layout.fr_owner_gen = -1;
    T.layout.ts_frame = 8;
    sb.addr = base;
    sb.len = sizeof one;
    sb.one = one;
    sb.two = two;
    tc.sb = &sb;
    tc.nsb = 1;
    tc.mid_ok = 1;
    tc.ts = ts;
    tc.root = f2;
    tc.root_code = 0xc2;

    /* f0 (the frame current between the copies) returned before the first copy was
     * taken and was pushed again before the second: freed in one copy, running in the
     * other. Its caller f1 runs in both, over the thread's root f2. The walk goes
     * through f0's f_back; only f1 and f2 are known. */
    obj_frame(one, 0, f1, 0xc0, 10, 0);
    obj_frame(two, 1, f1, 0xc0, 12, 1);
    obj_frame(one + OFS, 1, f2, 0xc1, 20, 1);
    obj_frame(two + OFS, 1, f2, 0xc1, 20, 1);
    obj_frame(one + 2 * OFS, 1, 0, 0xc2, 30, 1);
    obj_frame(two + 2 * OFS, 1, 0, 0xc2, 30, 1);
    tc.cur_end = f1;                /* the current frame moved meanwhile */
    memcpy(ts + 8, &f0, 8);
    err = walk_frames(&u, &r, &tc, f0, &nw, &more);
    CHECK(err == 0 && more.kind == WALK_DONE && nw == 3 && r.freed_below == 1,
          "through a freed frame: err %d, %zu frames, freed_below %zu", err, nw, r.freed_below);
    err = walk_check(&u, &r, &tc, f0, nw, &keep);
    CHECK(err == 0 && keep == 1, "above a freed frame nothing is known: err %d, keep %zu", err, keep);

    /* f0 running in both copies, over callers running down to the root: the frame
     * walked from is known though the current frame moved after it was read */
    obj_frame(one, 1, f1, 0xc0, 10, 1);
    err = walk_frames(&u, &r, &tc, f0, &nw, &more);
    keep = 99;
    if (err == 0)
        err = walk_check(&u, &r, &tc, f0, nw, &keep);
    CHECK(err == 0 && nw == 3 && keep == 0, "running chain to the root: err %d, %zu frames, keep %zu", err, nw,
          keep);

    /* a torn ring, f0 -> f1 (freed) -> f0 ...: ends at once, not after thousands of
     * steps through the ring */
    obj_frame(one, 1, f1, 0xc0, 10, 1);
    obj_frame(one + OFS, 0, f0, 0xc1, 20, 0);
    err = walk_frames(&u, &r, &tc, f0, &nw, &more);
    CHECK(err == REMORA_ECORRUPT && r.freed_below <= 4, "ring: err %d after %zu freed frames", err,
          r.freed_below);
}

/* ---- 3.11+: the frame walked from, when the current frame moved after it was read, is
 * known only if it lived through the copies: below the chunk's top at the start and
 * after the second copy, at the same instruction in both (walked_from_lived) ---- */

static void lived_frame(unsigned char *b, uint64_t code, uint64_t prev, uint64_t instr)
{
    memset(b, 0, 80);
    memcpy(b + 0, &code, 8);
    memcpy(b + 8, &prev, 8);
    memcpy(b + 56, &instr, 8);
}

/* A chunk at 'chunk' holding three frames of 80 bytes (the root s0 0xc0, s1 0xc1 calling
 * s2 0xc2, each at its code + 40) in both copies of len bytes, and a thread state of 64
 * bytes naming 'cur' the current frame, the chunk and 'top' its top. */
static void three_frames(py_target_t *T, rd_thread_t *tc, unsigned char *one, unsigned char *two, size_t len,
                         unsigned char *ts, uint64_t chunk, uint64_t cur, uint64_t top)
{
    uint64_t s0 = chunk + RD_CHUNK_HDR, s1 = s0 + 80;

    memset(one, 0, len);
    memset(ts, 0, 64);
    frame_layout(&T->layout, PY_FRAMES_DIRECT, 80, 0, 8, 56);
    T->layout.fr_owner_gen = -1;
    T->layout.ts_frame = 8;
    T->layout.ts_datastack_chunk = 32;
    T->layout.ts_size = 64;
    lived_frame(one + RD_CHUNK_HDR, 0xc0, 0, 0xc0 + 40);
    lived_frame(one + RD_CHUNK_HDR + 80, 0xc1, s0, 0xc1 + 40);
    lived_frame(one + RD_CHUNK_HDR + 160, 0xc2, s1, 0xc2 + 40);
    memcpy(two, one, len);
    memcpy(ts + 8, &cur, 8);
    memcpy(ts + 32, &chunk, 8);
    memcpy(ts + 40, &top, 8);
    tc->ts = ts;
    tc->chunk = tc->base = chunk;
    tc->a = one;
    tc->b = two;
    tc->copied = len;
}

static void test_lived_walk(void)
{
    enum { FS = 80, TS = 64 };
    py_target_t T;
    unwinder_t u;
    reader_t r;
    rd_thread_t tc;
    walked_t walk[8];
    walk_more_t more;
    unsigned char one[RD_CHUNK_HDR + 3 * FS], two[RD_CHUNK_HDR + 3 * FS], ts[TS];
    uint64_t chunk = 0x10000, s0 = chunk + RD_CHUNK_HDR, s1 = s0 + FS, s2 = s1 + FS, top = s2 + FS + 16;
    size_t nw = 0, keep = 99;
    int err;

    walk_fixture(&T, &u, &r, &tc, walk);
    /* s2 (0xc2) calls C at one instruction in both copies, over s1 and the root s0 */
    three_frames(&T, &tc, one, two, sizeof one, ts, chunk, s2, top);
    tc.known = 1;
    tc.root = s0;
    tc.root_code = 0xc0;
    tc.cur_end = 0x99990;           /* the current frame moved after it was read */
    tc.ds_end[0] = chunk;
    tc.ds_end[1] = top;

    err = walk_frames(&u, &r, &tc, s2, &nw, &more);
    CHECK(err == 0 && more.kind == WALK_DONE && nw == 3, "walk: err %d, %zu frames", err, nw);
    err = walk_check(&u, &r, &tc, s2, nw, &keep);
    CHECK(err == 0 && keep == 0 && r.top_moved, "lived through the copies: err %d, keep %zu, top_moved %d", err,
          keep, r.top_moved);

    /* popped by the end (the top read after the second copy is at it): its caller is the
     * innermost frame known */
    tc.ds_end[1] = s2;
    err = walk_check(&u, &r, &tc, s2, nw, &keep);
    CHECK(err == 0 && keep == 1 && !r.top_moved, "popped by the end: keep %zu, top_moved %d", keep, r.top_moved);

    /* not read after the copies (0): not known */
    tc.ds_end[0] = tc.ds_end[1] = 0;
    err = walk_check(&u, &r, &tc, s2, nw, &keep);
    CHECK(err == 0 && keep == 1 && !r.top_moved, "top not read: keep %zu, top_moved %d", keep, r.top_moved);

    /* running: another instruction in the second copy */
    tc.ds_end[0] = chunk;
    tc.ds_end[1] = top;
    lived_frame(two + RD_CHUNK_HDR + 2 * FS, 0xc2, s1, 0xc2 + 44);
    err = walk_check(&u, &r, &tc, s2, nw, &keep);
    CHECK(err == 0 && keep == 1 && !r.top_moved, "moved on: keep %zu, top_moved %d", keep, r.top_moved);

    /* at the same instruction but above the top when the round began (a stale callee) */
    memcpy(two, one, sizeof one);
    memcpy(ts + 40, &s2, 8);
    err = walk_check(&u, &r, &tc, s2, nw, &keep);
    CHECK(err == 0 && keep == 1 && !r.top_moved, "above the first top: keep %zu, top_moved %d", keep,
          r.top_moved);
}


/* ---- a re-reading kept for a stack that moved holds the round's moment: a long call the
 * first copies saw being made that has returned since is kept as they had it, and the
 * frames inside it cut; a short one (the moving top) is left to the re-reading ---- */

/* The re-reading of test_moment_cut, innermost first: callee at s3, 'code' at s2 (at
 * 'instr', its caller 'prev'), s1, the root s0. */
static void moment_reading(walked_t *walk, uint64_t s0, uint64_t code, uint64_t prev, uint64_t instr)
{
    static const uint64_t codes[4] = { 0xc4, 0, 0xc1, 0xc0 };
    size_t k;

    memset(walk, 0, 4 * sizeof *walk);
    for (k = 0; k < 4; k++) {
        walk[k].addr = s0 + (3 - k) * 80;
        walk[k].code = codes[k];
        walk[k].instr = codes[k] + 40;
        walk[k].prev = k < 3 ? s0 + (2 - k) * 80 : 0;
        walk[k].from = FROM_CHUNK;
    }
    walk[1].code = code;
    walk[1].instr = instr;
    walk[1].prev = prev;
}

/* A calling frame's locals tell a long call from another call at the same place: the
 * calls kept at a sample (walk_keep_calls) hold the first words of each frame's locals
 * below the frame inside it, and walk_moment_cut takes a frame gone on to another
 * instruction as a long call that ended only when its locals are those of a round
 * before (asyncio's _run_once: each ready handle run at `handle._run()`). */
static void test_call_locals(void)
{
    enum { FS = 80, TS = 64, LOC = 64 };
    py_target_t T;
    unwinder_t u;
    reader_t r;
    rd_thread_t tc;
    walked_t walk[8];
    unsigned char one[RD_CHUNK_HDR + 4 * FS], two[RD_CHUNK_HDR + 4 * FS], ts[TS];
    uint64_t chunk = 0x10000, s0 = chunk + RD_CHUNK_HDR, s1 = s0 + FS, s2 = s1 + FS, s3 = s2 + FS;
    uint64_t top = s3 + FS, gen = 0x7000000, h1 = 0xa1000, h2 = 0xa2000, five = 5;
    size_t keep, k;
    int cut;

    walk_fixture(&T, &u, &r, &tc, walk);
    three_frames(&T, &tc, one, two, sizeof one, ts, chunk, gen, top);
    T.layout.fr_localsplus = LOC;
    lived_frame(one + RD_CHUNK_HDR + 3 * FS, 0xc3, s2, 0xc3 + 40);
    memcpy(one + (s1 - chunk) + LOC, &h1, 8);       /* s1's locals: the handle, 5 */
    memcpy(one + (s1 - chunk) + LOC + 8, &five, 8);
    memcpy(two, one, sizeof one);
    tc.cur0 = tc.cur_mid = gen;
    tc.ds_end[0] = chunk;
    tc.ds_end[1] = top;

    /* the last sample: s3 (innermost) in s2 in s1 in s0, all in the chunk */
    memset(walk, 0, 4 * sizeof *walk);
    for (k = 0; k < 4; k++) {
        walk[k].addr = s3 - k * FS;
        walk[k].code = 0xc3 - k;
        walk[k].instr = 0xc3 - k + 40;
        walk[k].prev = k < 3 ? s3 - (k + 1) * FS : 0;
        walk[k].from = FROM_CHUNK;
    }
    CHECK(walk_keep_calls(&T, &r, &tc, 0, 4) == 0 && tc.ncalls == 4, "calls kept: %zu", tc.ncalls);
    CHECK(tc.calls[0].nloc == 0 && tc.calls[1].nloc == 2 && tc.calls[2].nloc == 2 && tc.calls[3].nloc == 2,
          "locals kept below the frame inside: %u %u %u %u", tc.calls[0].nloc, tc.calls[1].nloc, tc.calls[2].nloc,
          tc.calls[3].nloc);
    /* a local the two copies disagree on, a header unlike the walk's: not known */
    two[(s1 - chunk) + LOC + 8] ^= 1;
    walk[1].instr++;
    CHECK(walk_keep_calls(&T, &r, &tc, 0, 4) == 0 && tc.calls[2].nloc == 0 && tc.calls[1].nloc == 0 &&
          tc.calls[3].nloc == 2, "copies apart, header apart: %u %u", tc.calls[2].nloc, tc.calls[1].nloc);
    two[(s1 - chunk) + LOC + 8] ^= 1;
    walk[1].instr--;
    CHECK(walk_keep_calls(&T, &r, &tc, 0, 4) == 0 && tc.calls[2].nloc == 2, "kept again: %u", tc.calls[2].nloc);

    /* the round's first copies: s1 calling s2 with the same locals; re-read after s2
     * returned and s1 went on to another instruction: the long call ended, cut */
    CHECK(walk_moment_save(&T.layout, &r, &tc, 0, 0) == 0 && r.moment.len == sizeof one, "saved %zu", r.moment.len);
    moment_reading(walk, s0, 0xc2, s1, 0xc2 + 40);
    walk[1].addr = s1;                              /* innermost first: s1, s0 */
    walk[1].code = 0xc1;
    walk[1].instr = 0xc1 + 48;
    walk[1].prev = s0;
    walk[0] = walk[1];
    walk[1] = walk[3];
    cut = 0;
    keep = walk_moment_cut(&T, &r, &tc, 0, 2, &cut);
    CHECK(keep == 0 && cut && walk[0].instr == 0xc1 + 40, "the same call ended: keep %zu cut %d", keep, cut);

    /* the first copies with another handle at that place: another call there, short:
     * the re-reading kept */
    memcpy(one + (s1 - chunk) + LOC, &h2, 8);
    memcpy(two + (s1 - chunk) + LOC, &h2, 8);
    CHECK(walk_moment_save(&T.layout, &r, &tc, 0, 0) == 0, "saved");
    walk[0].instr = 0xc1 + 48;
    cut = 0;
    keep = walk_moment_cut(&T, &r, &tc, 0, 2, &cut);
    CHECK(keep == 0 && !cut && walk[0].instr == 0xc1 + 48, "another call at that place: keep %zu cut %d", keep, cut);

    /* another function's frame at s1 now: s1's activation lasted a round, whatever it
     * called: cut as before */
    walk[0].code = 0xc5;
    walk[0].instr = 0xc5 + 40;
    cut = 0;
    keep = walk_moment_cut(&T, &r, &tc, 0, 2, &cut);
    CHECK(keep == 0 && cut && walk[0].code == 0xc1, "another function there: keep %zu cut %d", keep, cut);

    /* the locals not the same in both first copies: not known, as before (cut) */
    memcpy(two + (s1 - chunk) + LOC, &h1, 8);
    CHECK(walk_moment_save(&T.layout, &r, &tc, 0, 0) == 0, "saved");
    walk[0].code = 0xc1;
    walk[0].instr = 0xc1 + 48;
    cut = 0;
    keep = walk_moment_cut(&T, &r, &tc, 0, 2, &cut);
    CHECK(keep == 0 && cut && walk[0].instr == 0xc1 + 40, "locals torn: keep %zu cut %d", keep, cut);
    free(r.moment.copies);
    free(tc.calls);
}

/* A round none of whose readings could be walked from the current frame keeps the
 * thread's callers in the chunk: walked from the innermost call of the last sample the
 * copies still hold at its place, below the top before and after them, each frame the
 * same in both copies (walk_chunk_outer). On test_moment_cut's three frames, the calls
 * of the last sample s2, s1, s0; left as it found them. */
static void check_chunk_outer(const py_target_t *T, reader_t *r, rd_thread_t *tc, unsigned char *one,
                              unsigned char *two, size_t len)
{
    enum { FS = 80 };
    const walked_t *walk = r->walk;
    uint64_t s0 = tc->chunk + RD_CHUNK_HDR, s1 = s0 + FS, s2 = s1 + FS, top = tc->ds_end[1];
    size_t nw = walk_chunk_outer(T, r, tc);

    CHECK(nw == 3 && walk[0].addr == s2 && walk[0].code == 0xc2 && walk[0].instr == 0xc2 + 40 &&
          walk[2].addr == s0 && walk[2].prev == 0 && walk[1].from == FROM_CHUNK,
          "callers from s2: %zu frames, innermost %#llx", nw, (unsigned long long)walk[0].addr);

    /* s2 above the top read after the copies (it returned meanwhile): from s1 */
    tc->ds_end[1] = s2 + 8;
    nw = walk_chunk_outer(T, r, tc);
    CHECK(nw == 2 && walk[0].addr == s1, "s2 above the top: %zu frames", nw);
    tc->ds_end[1] = top;

    /* another function's frame at s2 now: from s1 */
    tc->calls[0].code = 0xc5;
    nw = walk_chunk_outer(T, r, tc);
    CHECK(nw == 2 && walk[0].addr == s1, "another function at s2: %zu frames", nw);
    tc->calls[0].code = 0xc2;

    /* the copies disagree on s1: nothing */
    lived_frame(two + RD_CHUNK_HDR + FS, 0xc1, s0, 0xc1 + 48);
    nw = walk_chunk_outer(T, r, tc);
    CHECK(nw == 0, "copies apart: %zu frames", nw);

    /* a link up the chunk (a loop): nothing */
    lived_frame(one + RD_CHUNK_HDR + FS, 0xc1, s2, 0xc1 + 40);
    memcpy(two, one, len);
    nw = walk_chunk_outer(T, r, tc);
    CHECK(nw == 0, "a link up: %zu frames", nw);
    lived_frame(one + RD_CHUNK_HDR + FS, 0xc1, s0, 0xc1 + 40);
    memcpy(two, one, len);

    /* another chunk by the end of the copies, or no call: nothing */
    tc->ds_end[0] = tc->chunk + 0x100000;
    CHECK(walk_chunk_outer(T, r, tc) == 0, "another chunk");
    tc->ds_end[0] = tc->chunk;
    tc->ncalls = 0;
    CHECK(walk_chunk_outer(T, r, tc) == 0, "no call");
    tc->ncalls = 3;
    CHECK(walk_chunk_outer(T, r, tc) == 3, "as at first");
}

/* 3.11/3.12: the window of the C stack that holds the current_frame of the cframes seen
 * (copy_cfw_learn) and the current frame taken through the cframe current between the
 * copies (copy_cframe_settle). */
static void test_cframe_window(void)
{
    py_layout_t L;
    rd_thread_t tc;
    uint64_t st = 0x7ffc0000f000, c0 = st - 0x100, c1 = st - 0x600, c2 = st - 0x400;
    uint64_t off, v;

    for (off = 0; off <= 8; off += 8) {
        memset(&L, 0, sizeof L);
        memset(&tc, 0, sizeof tc);
        L.frames_kind = PY_FRAMES_CFRAME;
        L.cframe_current_frame = off;
        L.ts_size = 0x200;
        tc.tstate = 0x5000;
        /* the state's own root cframe, NULL and one that wraps: no window */
        CHECK(copy_cfw_learn(&L, &tc, tc.tstate + 0x40) == 0 && copy_cfw_learn(&L, &tc, 0) == 0 &&
              copy_cfw_learn(&L, &tc, UINT64_MAX - 4) == 0 && tc.cfw_len == 0,
              "off %llu: root, NULL, wrapping: window %zu", (unsigned long long)off, tc.cfw_len);
        /* two cframes: the window spans both */
        CHECK(copy_cfw_learn(&L, &tc, c0) == 0 && copy_cfw_learn(&L, &tc, c1) == 0 && tc.cfw != NULL &&
              tc.cfw_lo == c1 + off && tc.cfw_len == c0 - c1 + 8 && copy_cfw_holds(&L, &tc, c0) &&
              copy_cfw_holds(&L, &tc, c1) && copy_cfw_holds(&L, &tc, c2) && !copy_cfw_holds(&L, &tc, c0 + 8),
              "off %llu: window %#llx + %zu", (unsigned long long)off, (unsigned long long)tc.cfw_lo, tc.cfw_len);
        /* one far below: the window moves to it, RD_CFW_MAX bytes at most */
        CHECK(copy_cfw_learn(&L, &tc, c1 - 3 * RD_CFW_MAX) == 0 && tc.cfw_len == RD_CFW_MAX &&
              copy_cfw_holds(&L, &tc, c1 - 3 * RD_CFW_MAX) && !copy_cfw_holds(&L, &tc, c0),
              "off %llu: moved down, %zu bytes", (unsigned long long)off, tc.cfw_len);
        /* and far above again */
        CHECK(copy_cfw_learn(&L, &tc, c0) == 0 && tc.cfw_len == RD_CFW_MAX && copy_cfw_holds(&L, &tc, c0) &&
              !copy_cfw_holds(&L, &tc, c1 - 3 * RD_CFW_MAX), "off %llu: moved up", (unsigned long long)off);
        tc.cfw_len = 0;
        CHECK(copy_cfw_learn(&L, &tc, c0) == 0 && copy_cfw_learn(&L, &tc, c1) == 0, "relearnt");

        /* read through c0 (last sample's), and c0 the state's between the copies too */
        tc.copied = 1024;
        tc.cframe = c0;
        tc.cf_mid = c0;
        tc.cf_end = c0;
        tc.cur_mid = 0x1111;
        tc.cur_end = 0x1111;
        memset(tc.cfw, 0, 2 * RD_CFW_MAX);
        v = 0x2222, memcpy(tc.cfw + (c1 + off - tc.cfw_lo), &v, 8);
        v = 0x3333, memcpy(tc.cfw + RD_CFW_MAX + (c1 + off - tc.cfw_lo), &v, 8);
        CHECK(copy_cframe_settle(&L, &tc) == 0 && tc.cfw_hit && tc.cframe == c0 && tc.cur_mid == 0x1111 &&
              tc.cur_end == 0x1111, "off %llu: the cframe read through: cur %#llx", (unsigned long long)off,
              (unsigned long long)tc.cur_mid);
        /* c1 the state's between the copies: its current frame from the window's copies */
        tc.cf_mid = c1;
        CHECK(copy_cframe_settle(&L, &tc) == 0 && tc.cfw_hit && tc.cframe == c1 && tc.cur_mid == 0x2222 &&
              tc.cur_end == 0x3333, "off %llu: through the window: cframe %#llx cur %#llx end %#llx",
              (unsigned long long)off, (unsigned long long)tc.cframe, (unsigned long long)tc.cur_mid,
              (unsigned long long)tc.cur_end);
        /* one outside the window: not found (the reading is judged as before), learnt */
        tc.cframe = c0;
        tc.cur_mid = 0x1111;
        tc.cf_mid = c0 + 0x100;
        CHECK(copy_cframe_settle(&L, &tc) == 0 && !tc.cfw_hit && tc.cframe == c0 && tc.cur_mid == 0x1111 &&
              copy_cfw_holds(&L, &tc, c0 + 0x100), "off %llu: outside: hit %d", (unsigned long long)off, tc.cfw_hit);
        /* not copied, or no cframe read: nothing */
        tc.copied = 0;
        tc.cf_mid = c1;
        CHECK(copy_cframe_settle(&L, &tc) == 0 && !tc.cfw_hit && tc.cframe == c0, "not copied");
        free(tc.cfw);
    }
}

static void test_moment_cut(void)
{
    enum { FS = 80, TS = 64 };
    py_target_t T;
    unwinder_t u;
    reader_t r;
    rd_thread_t tc;
    walked_t walk[8];
    struct rd_call calls[3];
    unsigned char one[RD_CHUNK_HDR + 3 * FS], two[RD_CHUNK_HDR + 3 * FS], ts[TS];
    uint64_t chunk = 0x10000, s0 = chunk + RD_CHUNK_HDR, s1 = s0 + FS, s2 = s1 + FS, top = s2 + FS + 16;
    uint64_t gen = 0x7000000, k;
    size_t keep;
    int cut;

    walk_fixture(&T, &u, &r, &tc, walk);
    memset(calls, 0, sizeof calls);
    /* the round's first copies: the root s0, s1 calling s2 (0xc2, a work function),
     * s2 calling a generator outside the chunk, the current frame then */
    three_frames(&T, &tc, one, two, sizeof one, ts, chunk, gen, top);
    tc.cur0 = tc.cur_mid = gen;
    tc.ds_end[0] = chunk;
    tc.ds_end[1] = top;
    /* a round before, the same calls were being made */
    for (k = 0; k < 3; k++) {
        calls[k].addr = s2 - k * FS;
        calls[k].code = 0xc2 - k;
        calls[k].instr = 0xc2 - k + 40;
    }
    tc.calls = calls;
    tc.ncalls = 3;
    check_chunk_outer(&T, &r, &tc, one, two, sizeof one);

    CHECK(walk_moment_save(&T.layout, &r, &tc, 0, 0) == 0 && r.moment.len == sizeof one && r.moment.top == top &&
          r.moment.cur == UINT64_MAX, "saved: %zu bytes, top %#llx", r.moment.len, (unsigned long long)r.moment.top);
    /* the copies change after the save (the re-readings copy into them) */
    memset(one, 0xee, sizeof one);

    /* re-read after s2 returned and s1 called another function (0xc3) there: s2 as the
     * first copies had it, the innermost kept, its callee cut */
    moment_reading(walk, s0, 0xc3, s1, 0xc3 + 40);
    cut = 0;
    keep = walk_moment_cut(&T, &r, &tc, 0, 4, &cut);
    CHECK(keep == 1 && cut && walk[1].code == 0xc2 && walk[1].instr == 0xc2 + 40,
          "a long call ended: keep %zu, code %#llx", keep, (unsigned long long)walk[1].code);

    /* the same call still: kept whole */
    moment_reading(walk, s0, 0xc2, s1, 0xc2 + 40);
    cut = 0;
    keep = walk_moment_cut(&T, &r, &tc, 0, 4, &cut);
    CHECK(keep == 0 && !cut && walk[1].code == 0xc2, "the same call: keep %zu", keep);

    /* the same function at another call (it returned from the call, made another) */
    moment_reading(walk, s0, 0xc2, s1, 0xc2 + 48);
    cut = 0;
    keep = walk_moment_cut(&T, &r, &tc, 0, 4, &cut);
    CHECK(keep == 1 && cut && walk[1].instr == 0xc2 + 40, "another call: keep %zu", keep);

    /* another caller's frame at s2 then: s2 cut with its callee */
    moment_reading(walk, s0, 0xc3, s1 + 8, 0xc3 + 40);
    cut = 0;
    keep = walk_moment_cut(&T, &r, &tc, 0, 4, &cut);
    CHECK(keep == 2 && cut, "another caller: keep %zu", keep);

    /* not being made a round before: a short call, the moving top, the re-reading kept */
    tc.ncalls = 2;
    calls[0].addr = s1;
    calls[0].code = 0xc1;
    calls[0].instr = 0xc1 + 40;
    calls[1].addr = s0;
    calls[1].code = 0xc0;
    calls[1].instr = 0xc0 + 40;
    moment_reading(walk, s0, 0xc3, s1, 0xc3 + 40);
    cut = 0;
    keep = walk_moment_cut(&T, &r, &tc, 0, 4, &cut);
    CHECK(keep == 0 && !cut && walk[1].code == 0xc3, "a short call: keep %zu", keep);
    tc.ncalls = 3;
    for (k = 0; k < 3; k++) {
        calls[k].addr = s2 - k * FS;
        calls[k].code = 0xc2 - k;
        calls[k].instr = 0xc2 - k + 40;
    }

    /* s2 the current frame then (its own code running, not a call): the moving top */
    memcpy(one, two, sizeof one);
    tc.cur0 = tc.cur_mid = s2;
    walk_moment_save(&T.layout, &r, &tc, 0, 0);
    moment_reading(walk, s0, 0xc3, s1, 0xc3 + 40);
    cut = 0;
    keep = walk_moment_cut(&T, &r, &tc, 0, 4, &cut);
    CHECK(keep == 0 && !cut && walk[1].code == 0xc3, "the current frame then: keep %zu", keep);
    tc.cur0 = tc.cur_mid = gen;

    /* s2 above the top read after the copies (it returned while they were taken) */
    tc.ds_end[1] = s2;
    walk_moment_save(&T.layout, &r, &tc, 0, 0);
    moment_reading(walk, s0, 0xc3, s1, 0xc3 + 40);
    cut = 0;
    keep = walk_moment_cut(&T, &r, &tc, 0, 4, &cut);
    CHECK(keep == 0 && !cut && walk[1].code == 0xc3, "above the top: keep %zu", keep);
    tc.ds_end[1] = top;

    /* the two first copies disagree on s2: nothing known of it */
    lived_frame(two + RD_CHUNK_HDR + 2 * FS, 0xc5, s1, 0xc5 + 40);
    walk_moment_save(&T.layout, &r, &tc, 0, 0);
    moment_reading(walk, s0, 0xc3, s1, 0xc3 + 40);
    cut = 0;
    keep = walk_moment_cut(&T, &r, &tc, 0, 4, &cut);
    CHECK(keep == 0 && !cut && walk[1].code == 0xc3, "copies disagree: keep %zu", keep);
    memcpy(two, one, sizeof one);

    /* another chunk by the end of the copies: nothing saved, nothing cut */
    tc.ds_end[0] = chunk + 0x100000;
    CHECK(walk_moment_save(&T.layout, &r, &tc, 0, 0) == 0 && r.moment.len == 0, "another chunk: %zu bytes saved", r.moment.len);
    moment_reading(walk, s0, 0xc3, s1, 0xc3 + 40);
    cut = 0;
    keep = walk_moment_cut(&T, &r, &tc, 0, 4, &cut);
    CHECK(keep == 0 && !cut, "nothing saved: keep %zu", keep);
    free(r.moment.copies);

    /* 3.9/3.10: frame objects, checked against the frames the first reading knew. It
     * knew (innermost first) f2 calling at 0xc2 + 40 (its callee moved), s1, s0; a round
     * before, the same calls */
    {
        walked_t first[5], known[UNW_MAX_DEPTH];
        uint64_t f0 = 0x50000, f1 = 0x51000, f2 = 0x52000, f3 = 0x53000;
        memset(&r, 0, sizeof r);
        r.walk = walk;
        r.moment.walk = known;
        frame_layout(&T.layout, PY_FRAMES_OBJECTS, 128, 32, 24, 104);
        moment_reading(first, f0, 0xc2, f1, 0xc2 + 40);
        first[0].addr = f3;
        first[1].addr = f2;
        first[2].addr = f1;
        first[3].addr = f0;
        first[0].prev = f2;
        first[2].prev = f0;
        memcpy(walk, first, sizeof first);
        CHECK(walk_moment_save(&T.layout, &r, &tc, 1, 4) == 0 && r.moment.nwalk == 3 && !r.moment.walk_top,
              "objects: %zu frames saved", r.moment.nwalk);
        tc.ncalls = 3;
        calls[0].addr = f2;
        calls[1].addr = f1;
        calls[2].addr = f0;
        /* re-read in another function's frame object (0xc3 at f3), called by s1: f2 as
         * the first reading had it, innermost */
        memcpy(walk, first, sizeof first);
        walk[1].addr = f3 + 0x800;
        walk[1].code = 0xc3;
        walk[1].instr = 0xc3 + 40;
        walk[0].prev = walk[1].addr;
        cut = 0;
        keep = walk_moment_cut(&T, &r, &tc, 0, 4, &cut);
        CHECK(keep == 1 && cut && walk[1].addr == f2 && walk[1].code == 0xc2,
              "objects, a long call ended: keep %zu, cut %d", keep, cut);
        /* the same frames still: kept whole */
        memcpy(walk, first, sizeof first);
        cut = 0;
        keep = walk_moment_cut(&T, &r, &tc, 0, 4, &cut);
        CHECK(keep == 0 && !cut, "objects, the same calls: keep %zu", keep);
        /* not being made a round before: kept as read */
        memcpy(walk, first, sizeof first);
        walk[1].addr = f3 + 0x800;
        walk[1].code = 0xc3;
        tc.ncalls = 0;
        cut = 0;
        keep = walk_moment_cut(&T, &r, &tc, 0, 4, &cut);
        CHECK(keep == 0 && !cut && walk[1].code == 0xc3, "objects, a short call: keep %zu", keep);
        /* the first reading's innermost the current frame then (not calling): f2 may
         * have moved on */
        memcpy(walk, first + 1, 3 * sizeof *walk);
        CHECK(walk_moment_save(&T.layout, &r, &tc, 0, 3) == 0 && r.moment.walk_top, "objects: the top saved");
        tc.ncalls = 3;
        memcpy(walk, first, sizeof first);
        walk[1].addr = f3 + 0x800;
        walk[1].code = 0xc3;
        cut = 0;
        keep = walk_moment_cut(&T, &r, &tc, 0, 4, &cut);
        CHECK(keep == 0 && !cut && walk[1].code == 0xc3, "objects, the current frame then: keep %zu", keep);
    }
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

static void test_marshal(void)
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
static void test_pstats(void)
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

static void test_fn_rows(void)
{
    stk_table_t *t = stk_new();
    uint32_t f[4], th;
    stk_fn_row_t *rows = NULL, *again = NULL;
    size_t n = 0, n2 = 0;

    f[0] = stk_frame(t, "main", "a.py", 10);
    f[1] = stk_frame(t, "rec", "a.py", 20);
    f[2] = stk_frame(t, "rec", "a.py", 21);      /* same function, another line */
    f[3] = stk_frame(t, "rec", "b.py", 20);      /* same name, another file */
    th = stk_thread(t, 1, "main");
    {
        uint32_t s1[] = { f[0], f[1], f[2], f[1] }, s2[] = { f[0], f[3] };
        stk_add(t, th, s1, 4, 5);
        stk_add(t, th, s2, 2, 2);
    }
    CHECK(stk_fn_rows(t, &rows, &n, NULL) == 0 && n == 3, "3 rows, got %zu", n);
    if (n == 3) {
        CHECK(strcmp(rows[0].function, "main") == 0 && rows[0].self == 0 && rows[0].total == 7,
              "main: self %llu total %llu", (unsigned long long)rows[0].self,
              (unsigned long long)rows[0].total);
        CHECK(strcmp(rows[1].file, "a.py") == 0 && rows[1].line == 20 && rows[1].self == 5 &&
              rows[1].total == 5, "rec (a.py): line %d self %llu total %llu", rows[1].line,
              (unsigned long long)rows[1].self, (unsigned long long)rows[1].total);
        CHECK(strcmp(rows[2].file, "b.py") == 0 && rows[2].self == 2 && rows[2].total == 2,
              "rec (b.py): self %llu", (unsigned long long)rows[2].self);
    }
    {
        uint32_t s3[] = { stk_frame(t, "new", "c.py", 1), f[0], f[3] };
        stk_add(t, stk_thread(t, 2, "other"), s3, 3, 1);
    }
    CHECK(stk_fn_rows(t, &again, &n2, NULL) == 0 && n2 == 4, "4 rows after growing, got %zu", n2);
    if (n == 3 && n2 == 4) {
        size_t i;
        for (i = 0; i < 3; i++)
            CHECK(again[i].function == rows[i].function && again[i].file == rows[i].file,
                  "row %zu kept its index", i);
        CHECK(strcmp(again[3].function, "new") == 0 && again[0].total == 8 && again[2].self == 3,
              "grown: %s, main total %llu", again[3].function, (unsigned long long)again[0].total);
    }
    free(rows);
    free(again);
    stk_free(t);
}

/* ---- thread names (unwind/thread_names.c) over synthetic memory: a snapshot holding a
 * sys.modules, a threading module, its _active dict and Thread objects laid out as a
 * 3.9-like target (sized dict keys, a Thread's dict at +16) with offsets of our own ---- */

enum { PN_BASE = 0x100000, PN_SIZE = 4 << 20 };
static unsigned char *pn_mem;           /* the target's memory from PN_BASE */
static uint64_t pn_top;                 /* bump allocator */

static void pn_put(uint64_t addr, uint64_t v)
{
    memcpy(pn_mem + (addr - PN_BASE), &v, 8);
}

static uint64_t pn_alloc(size_t len)
{
    uint64_t a = pn_top;
    pn_top += (len + 15) & ~(size_t)15;
    if (pn_top > PN_BASE + PN_SIZE) {
        fprintf(stderr, "unit: the synthetic target's memory is too small\n");
        exit(1);
    }
    return a;
}

/* the layout and types of the synthetic target */
enum { PN_STR_T = 0x1010, PN_DICT_T = 0x1020, PN_LONG_T = 0x1030, PN_MOD_T = 0x1040,
       PN_TP_FLAGS = 168, PN_TP_BASIC = 32, PN_TP_DICTOFF = 288, PN_HT_KEYS = 864 };

static uint64_t pn_str(const char *text)
{
    size_t n = strlen(text);
    uint64_t a = pn_alloc(48 + n + 1);
    pn_put(a, 1);
    pn_put(a + 8, PN_STR_T);
    pn_put(a + 16, n);
    pn_put(a + 32, (1u << 2) | (1u << 5) | (1u << 6));     /* kind 1, compact, ascii */
    memcpy(pn_mem + (a + 48 - PN_BASE), text, n + 1);
    return a;
}

static uint64_t pn_int(uint64_t v)
{
    uint64_t a = pn_alloc(40);
    int nd = 0;
    pn_put(a, 1);
    pn_put(a + 8, PN_LONG_T);
    while (v != 0) {
        uint32_t d = (uint32_t)(v & ((1u << 30) - 1));
        memcpy(pn_mem + (a + 24 + 4 * (uint64_t)nd - PN_BASE), &d, 4);
        v >>= 30;
        nd++;
    }
    pn_put(a + 16, (uint64_t)nd);
    return a;
}

/* A dict of n entries (hash, key, value), its table of 'size' entries (room for 2/3 of
 * them, n at most), saying it holds 'nentries' (normally n). */
static uint64_t pn_dict(const uint64_t (*e)[3], size_t n, uint64_t size, uint64_t nentries)
{
    uint64_t width = size <= 0xff ? 1 : size <= 0xffff ? 2 : 4, room = (size << 1) / 3;
    uint64_t keys = pn_alloc(40 + size * width + (room > n ? room : n) * 24), d = pn_alloc(48),
             ents = keys + 40 + size * width;
    size_t i;
    pn_put(keys, 1);
    pn_put(keys + 8, size);
    pn_put(keys + 32, nentries);
    for (i = 0; i < n; i++) {
        pn_put(ents + 24 * i, e[i][0]);
        pn_put(ents + 24 * i + 8, e[i][1]);
        pn_put(ents + 24 * i + 16, e[i][2]);
    }
    pn_put(d, 1);
    pn_put(d + 8, PN_DICT_T);
    pn_put(d + 32, keys);
    pn_put(d + 40, 0);
    return d;
}

static uint64_t pn_thread_type;

/* A Thread whose attribute dict holds "_name": name (any object). */
static uint64_t pn_thread(uint64_t name)
{
    uint64_t t = pn_alloc(32), kv[2][3] = { { 11, pn_str("_name"), name }, { 12, pn_str("_ident"), 0 } };
    kv[1][2] = pn_int(5);
    pn_put(t, 1);
    pn_put(t + 8, pn_thread_type);
    pn_put(t + 16, pn_dict(kv, 2, 8, 2));
    return t;
}

/* The snapshot of pn_mem[0..pn_top - PN_BASE) (one MEM record): a source to read. */
static proc_t *pn_source(void)
{
    size_t len = pn_top - PN_BASE, tot = 16 + 16 + 8 + 16 + 8 + ((len + 7) & ~(size_t)7);
    unsigned char *b = calloc(1, tot);
    uint64_t v;
    uint32_t w;
    proc_t *p = NULL;
    memcpy(b, "RMRSNAP", 8);
    w = 1, memcpy(b + 8, &w, 4);
    w = 1, memcpy(b + 16, &w, 4);             /* META */
    v = 8, memcpy(b + 24, &v, 8);
    w = 4242, memcpy(b + 32, &w, 4);
    w = 5, memcpy(b + 40, &w, 4);             /* MEM */
    v = 8 + len, memcpy(b + 48, &v, 8);
    v = PN_BASE, memcpy(b + 56, &v, 8);
    memcpy(b + 64, pn_mem, len);
    if (proc_open_snapshot_mem(b, tot, &p) != 0)
        p = NULL;
    free(b);
    return p;
}

/* The registry: _active's entries given; the rest (sys.modules, threading, types) built
 * here. Returns the interpreter state's address. */
static uint64_t pn_active;             /* the last registry's _active dict */

static uint64_t pn_registry(const uint64_t (*active)[3], size_t n, uint64_t size, uint64_t nentries)
{
    uint64_t act = pn_dict(active, n, size, nentries), md, mod, mods, interp;
    pn_active = act;
    uint64_t mkv[1][3], tkv[1][3];
    tkv[0][0] = 21, tkv[0][1] = pn_str("_active"), tkv[0][2] = act;
    md = pn_dict(tkv, 1, 8, 1);
    mod = pn_alloc(32);
    pn_put(mod, 1);
    pn_put(mod + 8, PN_MOD_T);
    pn_put(mod + 16, md);
    mkv[0][0] = 22, mkv[0][1] = pn_str("threading"), mkv[0][2] = mod;
    mods = pn_dict(mkv, 1, 8, 1);
    interp = pn_alloc(64);
    pn_put(interp + 40, mods);
    return interp;
}

static void pn_begin(void)
{
    memset(pn_mem, 0, PN_SIZE);
    pn_top = PN_BASE + 4096;
    /* a heap type (flags bit 9) with a dict at +16 and no shared keys */
    pn_thread_type = pn_alloc(1024);
    pn_put(pn_thread_type + 8, 0x1050);
    pn_put(pn_thread_type + PN_TP_FLAGS, 1u << 9);
    pn_put(pn_thread_type + PN_TP_BASIC, 32);
    pn_put(pn_thread_type + PN_TP_DICTOFF, 16);
    pn_put(pn_thread_type + PN_HT_KEYS, 0);
}

/* Reads the names of idents[0..n) from the registry at 'interp'; tn_update's code. */
static int tn_test_read(uint64_t interp, const uint64_t *idents, size_t n, thread_names_t **pn, proc_t **p,
                   unwinder_t *u, py_target_t *T)
{
    py_layout_t *L = &T->layout;
    memset(T, 0, sizeof *T);
    memset(u, 0, sizeof *u);
    T->str_type = PN_STR_T, T->dict_type = PN_DICT_T, T->long_type = PN_LONG_T, T->module_type = PN_MOD_T;
    L->ob_type = 8;
    L->u_length = 16, L->u_state = 32, L->u_ascii_size = 48, L->u_compact_size = 72;
    L->dk_layout = PY_DK_SIZED;
    L->dict_keys = 32, L->dict_values = 40, L->dk_nentries = 32, L->dk_indices = 40, L->dv_values = 0;
    L->tp_flags = PN_TP_FLAGS, L->tp_basicsize = PN_TP_BASIC, L->tp_dictoffset = PN_TP_DICTOFF;
    L->ht_cached_keys = PN_HT_KEYS;
    L->inst_dict = PY_INST_DICTOFFSET;
    L->long_tagged = 0, L->long_digits = 24;
    L->md_dict = 16;
    L->is_modules = 40;
    L->ob_head = 16, L->ob_size = 16, L->list_items = 24, L->set_mask = 32, L->set_table = 40;
    L->inst_pre = 32, L->inst_pre_values = 0, L->inst_pre_dict = 8, L->tp_base = 256;
    *p = pn_source();
    *pn = tn_new();
    if (*p == NULL || *pn == NULL)
        return -1;
    u->p = *p;
    u->target = T;
    return tn_update(u, *pn, interp, idents, n, 1);
}

static void tn_test_end(thread_names_t *pn, proc_t *p)
{
    tn_free(pn);
    proc_free(p);
}

static void test_thread_names(void)
{
    const uint64_t A = 0x7f0000001000, B = 0x7f0000002000, C = 0x7f0000003000, D = 0x7f0000004000,
                   E = 0x7f0000005000, F = 0x7f0000006000, G = 0x7f0000007000, H = 0x7f0000008000;
    uint64_t reg[10][3], interp, idents[8] = { A, B, D, E, F, C, G, H }, s1, s2;
    py_target_t T;
    unwinder_t u;
    thread_names_t *pn;
    proc_t *p;
    tn_stats_t st;
    int err;

    pn_mem = calloc(1, PN_SIZE);
    if (pn_mem == NULL) {
        CHECK(0, "no memory");
        return;
    }
    /* a few entries (a deleted one among them), a key that is not an int, a name that
     * is not a str, a Thread that is not one (its type not a heap type) */
    pn_begin();
    reg[0][0] = A, reg[0][1] = pn_int(A), reg[0][2] = pn_thread(pn_str("alpha"));
    reg[1][0] = 7, reg[1][1] = 0, reg[1][2] = 0;                          /* deleted */
    reg[2][0] = B, reg[2][1] = pn_int(B), reg[2][2] = pn_thread(pn_str("beta"));
    reg[3][0] = E, reg[3][1] = pn_str("not an int"), reg[3][2] = pn_thread(pn_str("eps"));
    reg[4][0] = F, reg[4][1] = pn_int(F), reg[4][2] = pn_thread(pn_int(99));
    reg[5][0] = C, reg[5][1] = pn_int(C), reg[5][2] = pn_int(3);        /* no Thread */
    reg[6][0] = 9, reg[6][1] = pn_int(9), reg[6][2] = pn_thread(pn_str("dummy"));
    /* names as a str being built can look: no zero after its code points; a byte of
     * 0x80 or more in an ASCII one */
    s1 = pn_str("gammaX"), pn_put(s1 + 16, 5);
    s2 = pn_str("et\xe1"), pn_put(s2 + 16, 3);
    reg[7][0] = G, reg[7][1] = pn_int(G), reg[7][2] = pn_thread(s1);
    reg[8][0] = H, reg[8][1] = pn_int(H), reg[8][2] = pn_thread(s2);
    interp = pn_registry(reg, 9, 16, 9);
    err = tn_test_read(interp, idents, 8, &pn, &p, &u, &T);
    CHECK(err == 0 && pn != NULL, "read: %d", err);
    if (err == 0) {
        const char *a = tn_lookup(pn, A), *b = tn_lookup(pn, B);
        CHECK(a != NULL && strcmp(a, "alpha") == 0, "A named %s", a ? a : "(none)");
        CHECK(b != NULL && strcmp(b, "beta") == 0, "B named %s", b ? b : "(none)");
        CHECK(tn_lookup(pn, D) == NULL, "D (not in the registry) named");
        CHECK(tn_lookup(pn, E) == NULL, "E (a str key) named %s", tn_lookup(pn, E));
        CHECK(tn_lookup(pn, F) == NULL, "F (an int name) named %s", tn_lookup(pn, F));
        CHECK(tn_lookup(pn, C) == NULL, "C (an int, not a Thread) named %s", tn_lookup(pn, C));
        CHECK(tn_lookup(pn, 9) == NULL, "an ident not asked for named");
        CHECK(tn_lookup(pn, G) == NULL, "G (no terminating zero) named %s", tn_lookup(pn, G));
        CHECK(tn_lookup(pn, H) == NULL, "H (ASCII with a high byte) named %s", tn_lookup(pn, H));
        tn_get_stats(pn, &st);
        CHECK(st.readings == 1 && st.unscanned == 0 && st.scans <= 4, "stats: %llu readings, %llu scans",
              (unsigned long long)st.readings, (unsigned long long)st.scans);
    }
    tn_test_end(pn, p);

    /* a reading whose chains fail where the last reading's held: a thread read through
     * the same Thread object keeps its last name (counted torn), one whose Thread object
     * is another gets none */
    pn_begin();
    reg[0][0] = A, reg[0][1] = pn_int(A), reg[0][2] = pn_thread(pn_str("alpha"));
    reg[1][0] = B, reg[1][1] = pn_int(B), reg[1][2] = pn_thread(pn_str("beta"));
    interp = pn_registry(reg, 2, 8, 2);
    err = tn_test_read(interp, idents, 2, &pn, &p, &u, &T);
    CHECK(err == 0 && pn != NULL && tn_lookup(pn, A) != NULL && tn_lookup(pn, B) != NULL,
          "before: err %d", err);
    if (err == 0 && pn != NULL) {
        proc_t *p2;
        uint64_t keys, ents;
        memcpy(&keys, pn_mem + (pn_active + 32 - PN_BASE), 8);
        ents = keys + 40 + 8;
        pn_put(ents + 8, pn_str("A's int gone"));       /* A: its key no longer its int */
        pn_put(ents + 24 + 16, pn_thread(pn_int(7)));   /* B: another Thread, no str name */
        p2 = pn_source();
        u.p = p2;
        err = p2 != NULL ? tn_update(&u, pn, interp, idents, 2, 1) : -1;
        tn_get_stats(pn, &st);
        CHECK(err == 0 && tn_lookup(pn, A) != NULL && strcmp(tn_lookup(pn, A), "alpha") == 0 &&
              tn_lookup(pn, B) == NULL && st.torn == 2 && st.scans == 1 + 4,
              "after: err %d, A %s, B %s, torn %llu, scans %llu", err,
              tn_lookup(pn, A) ? tn_lookup(pn, A) : "(none)", tn_lookup(pn, B) ? tn_lookup(pn, B) : "(none)",
              (unsigned long long)st.torn, (unsigned long long)st.scans);
        proc_free(p2);
    }
    tn_test_end(pn, p);

    /* a table as 3.9 and 3.10 build it: the dict points to it, its entries copied, its
     * dk_nentries still 0: read all the same */
    pn_begin();
    reg[0][0] = A, reg[0][1] = pn_int(A), reg[0][2] = pn_thread(pn_str("alpha"));
    interp = pn_registry(reg, 1, 8, 0);
    err = tn_test_read(interp, idents, 2, &pn, &p, &u, &T);
    CHECK(err == 0 && pn != NULL && tn_lookup(pn, A) != NULL && strcmp(tn_lookup(pn, A), "alpha") == 0,
          "dk_nentries 0: err %d, A %s", err, pn && tn_lookup(pn, A) ? tn_lookup(pn, A) : "(none)");
    tn_test_end(pn, p);

    /* nentries lies: more than its table holds; then within the table, past the memory */
    pn_begin();
    reg[0][0] = A, reg[0][1] = pn_int(A), reg[0][2] = pn_thread(pn_str("alpha"));
    interp = pn_registry(reg, 1, 8, 9);
    err = tn_test_read(interp, idents, 2, &pn, &p, &u, &T);
    CHECK(err == 0 && pn != NULL && tn_lookup(pn, A) == NULL, "nentries > size: err %d, A %s", err,
          pn && tn_lookup(pn, A) ? tn_lookup(pn, A) : "(none)");
    tn_test_end(pn, p);
    pn_begin();
    reg[0][0] = A, reg[0][1] = pn_int(A), reg[0][2] = pn_thread(pn_str("alpha"));
    interp = pn_registry(reg, 1, 8, 1);
    {
        uint64_t keys;
        memcpy(&keys, pn_mem + (pn_active + 32 - PN_BASE), 8);
        pn_put(keys + 8, 1u << 26);         /* a table of 2^26, its entries far away */
        pn_put(keys + 32, 1u << 26);
    }
    err = tn_test_read(interp, idents, 2, &pn, &p, &u, &T);
    CHECK(err == 0 && pn != NULL && tn_lookup(pn, A) == NULL, "nentries past the memory: err %d", err);
    if (pn != NULL) {
        tn_get_stats(pn, &st);
        CHECK(st.scans == 4 && st.reads < 100, "past the memory: %llu scans, %llu reads",
              (unsigned long long)st.scans, (unsigned long long)st.reads);
    }
    tn_test_end(pn, p);

    /* the bound: 70,000 entries, A at entry 100, B at entry 69,000 (past 65,536: the
     * kernel's name, counted) */
    pn_begin();
    {
        enum { N = 70000 };
        static uint64_t big[N][3];
        uint64_t dummy = pn_thread(pn_str("dummy")), one = pn_int(1);
        size_t i;
        for (i = 0; i < N; i++)
            big[i][0] = 2 * i + 1, big[i][1] = one, big[i][2] = dummy;
        big[100][0] = A, big[100][1] = pn_int(A), big[100][2] = pn_thread(pn_str("alpha"));
        big[69000][0] = B, big[69000][1] = pn_int(B), big[69000][2] = pn_thread(pn_str("beta"));
        interp = pn_registry((const uint64_t (*)[3])big, N, 1u << 17, N);
        err = tn_test_read(interp, idents, 2, &pn, &p, &u, &T);
        CHECK(err == 0 && pn != NULL && tn_lookup(pn, A) != NULL && strcmp(tn_lookup(pn, A), "alpha") == 0,
              "70,000 entries: err %d, A %s", err, pn && tn_lookup(pn, A) ? tn_lookup(pn, A) : "(none)");
        if (err == 0 && pn != NULL) {
            tn_get_stats(pn, &st);
            CHECK(tn_lookup(pn, B) == NULL && st.unscanned == N - TN_MAX_ENTRIES && st.scans == 1 &&
                  st.reads < 40, "past the bound: B %s, %llu unscanned, %llu scans, %llu reads",
                  tn_lookup(pn, B) ? tn_lookup(pn, B) : "(none)", (unsigned long long)st.unscanned,
                  (unsigned long long)st.scans, (unsigned long long)st.reads);
        }
        tn_test_end(pn, p);
    }
    free(pn_mem);
}

/* --native: a C frame and a Python frame of the same name, file and line are two frames,
 * and a recording keeps which is which. */
static void test_native_frames(void)
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

static void test_raw_sources(void)
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

/* --native's bounds: a C stack whose frame pointers loop, and one 600 frames deep (both
 * in memory no module covers: libdwfl's frame-pointer rule), end with UNW_NATIVE_CUT. */
static void test_native_bounds(void)
{
    static uint64_t stack[600 * 2 + 2];
    uint64_t regs[PROC_NREGS] = { 0 }, lo = 0x7f0000000000ull;
    strtab_t *names = strtab_new();
    proc_t *self = NULL;
    unw_native_t *n = NULL;
    unw_thread_t th;
    py_layout_t L;
    size_t k;
    int round;

    CHECK(names && proc_open(getpid(), &self) == 0 && native_new(self, names, &n) == 0,
          "native unwinder on this process");
    if (n == NULL)
        goto out;
    memset(&L, 0, sizeof L);
    for (round = 0; round < 2; round++) {
        memset(stack, 0, sizeof stack);
        if (round == 0) {           /* rbp -> itself */
            stack[0] = lo;
            stack[1] = 0x1008;
        } else {                    /* 600 frames, each 16 bytes above the last */
            for (k = 0; k < 600; k++) {
                stack[2 * k] = lo + 16 * (k + 1);
                stack[2 * k + 1] = 0x1000 + k;
            }
        }
        regs[6] = regs[7] = lo;     /* rbp, rsp */
        regs[PROC_REG_PC] = 0x2000;
        memset(&th, 0, sizeof th);
        CHECK(native_merge_buffer(n, &L, regs, lo, stack, sizeof stack, &th) == 0,
              "merged (%s)", round ? "deep" : "loop");
        CHECK(th.nframes >= 2 && th.nframes <= 513 &&
              strcmp(th.frames[th.nframes - 1].function, UNW_NATIVE_CUT) == 0,
              "%s: %zu frames, the last %s", round ? "deep" : "loop", th.nframes,
              th.nframes ? th.frames[th.nframes - 1].function : "none");
    }
out:
    native_free(n);
    proc_free(self);
    strtab_free(names);
}

/* ---- asyncio (unwind/tasks.c, pyobj.c) over synthetic memory: 3.14-like task lists
 * (a node at 64 in a task of 96 bytes: next, prev), a list that loops on itself, a node
 * whose back link is wrong; sets, lists and dicts whose sizes lie ---- */

enum { TK_NODE = 64, TK_SIZE = 96, TK_STATE = 48, TK_IS_TASK = 52 };

static uint64_t tk_task(int pending)
{
    uint64_t t = pn_alloc(TK_SIZE);
    pn_put(t, 1);
    pn_put(t + TK_STATE, pending ? 0 : 2);
    pn_mem[t + TK_IS_TASK - PN_BASE] = 1;
    pn_put(t + 24, 0x5000);             /* name and coroutine: something */
    pn_put(t + 32, 0x6000);
    return t;
}

static void tk_link(uint64_t head, const uint64_t *tasks, size_t n)
{
    uint64_t prev = head;
    size_t i;
    for (i = 0; i < n; i++) {
        uint64_t node = tasks[i] + TK_NODE;
        pn_put(prev, node);             /* prev's next */
        pn_put(node + 8, prev);
        prev = node;
    }
    pn_put(prev, head);
    pn_put(head + 8, prev);
}

/* --async on the kernel engine (tasks_running.c, tasks_from_frames): a stack read at one
 * instant names its running task by the coroutine frame it holds (the innermost listed
 * one, running the code the list saw there), a task made since the list (in no key) by
 * the outermost coroutine frame stepped from C, under UNW_TASK_UNLISTED, the list then
 * stale; a listed frame whose code is another's since: not that task; a task a drain
 * found running and kept: named from there, its awaiter chain through the list; a stack
 * in no task: none. */
static void test_tasks_from_frames(void)
{
    struct unw_tasks_state *tk = calloc(1, sizeof *tk);
    const unw_task_t *const *chain = NULL;
    unw_task_t tasks[3];
    tk_key_t keys[3];
    tk_raw_t raw[3];
    unw_frame_t fr[6], outer[3];
    unw_thread_t th;
    unwinder_t u;
    size_t i, nchain = 0;

    if (tk == NULL)
        return;
    memset(&u, 0, sizeof u);
    memset(tasks, 0, sizeof tasks);
    memset(raw, 0, sizeof raw);
    memset(fr, 0, sizeof fr);
    memset(outer, 0, sizeof outer);
    /* three tasks: their ids, coroutine frames (one frame unknown: 0) and that frame's
     * code as the reading saw it (their one coroutine frame, outermost) */
    for (i = 0; i < 3; i++) {
        tasks[i].id = 0x10000 + 0x100 * i;
        raw[i].frame = i == 2 ? 0 : 0x20000 + 0x100 * (2 - i);
        keys[i] = (tk_key_t){ tasks[i].id, i };
        outer[i].code = 0x50000 + 0x100 * i;
        tasks[i].frames = &outer[i];
        tasks[i].nframes = 1;
    }
    tk->tasks = tasks;
    tk->keys = keys;
    tk->ntasks = 3;
    tk->raw = raw;
    if ((tk->chain = malloc(UNW_MAX_CHAIN * sizeof *tk->chain)) == NULL) {
        free(tk);
        return;
    }
    CHECK(tk_frame_keys(tk, 3) == REMORA_OK && tk->nfkeys == 2, "two tasks with a frame keyed");
    tk->raw = NULL;
    u.tasks = tk;
    /* innermost first: two plain frames, task 1's coroutine frame, a frame, task 0's
     * coroutine frame (its awaiter's, were it one), the loop */
    for (i = 0; i < 6; i++)
        fr[i].addr = 0x30000 + 0x100 * i;
    fr[2].addr = 0x20100;
    fr[2].code = 0x50100;
    fr[2].gen = fr[2].entry = 1;
    fr[4].addr = 0x20200;
    fr[4].code = 0x50000;
    fr[4].gen = fr[4].entry = 1;
    memset(&th, 0, sizeof th);
    th.frames = fr;
    th.nframes = 6;
    tasks_from_frames(&u, &th, 0);
    CHECK(th.task == 0x10100 && th.task_frames == 3, "the innermost listed coroutine frame's task: "
          "%#llx, %zu own frames", (unsigned long long)th.task, th.task_frames);
    CHECK(!unw_tasks_stale(&u), "a listed task: the list is not stale");
    /* task 1 ended, another coroutine made at its frame's address: task 0's frame, outer */
    fr[2].code = 0x59900;
    tasks_from_frames(&u, &th, 0);
    CHECK(th.task == 0x10000 && th.task_frames == 5, "a listed frame running other code is not "
          "that task's: %#llx, %zu", (unsigned long long)th.task, th.task_frames);
    /* the new task kept by a drain that found it running: named so, its awaiter task 0 */
    tk->kept[0] = (tk_late_t){ 0x20100, 0x59900, 0x10000, 0x10200, "kept" };
    tk->nkept = 1;
    tasks_from_frames(&u, &th, 0);
    CHECK(th.task == 0x10000 && th.task_frames == 3, "a kept task named by its frame and code: "
          "%#llx, %zu", (unsigned long long)th.task, th.task_frames);
    CHECK(unw_task_chain(&u, th.task, &chain, &nchain) == REMORA_OK && nchain == 2 &&
          chain[1]->name != NULL && strcmp(chain[1]->name, "kept") == 0 && chain[0] == &tasks[2],
          "a kept task's chain: itself (not the listed task at its address), then its awaiter "
          "(%zu tasks)", nchain);
    CHECK(unw_tasks_stale(&u), "a kept task: the list is stale");
    tk->nkept = 0;
    fr[2].code = 0x50100;
    /* no listed frame: the outermost coroutine frame stepped from C is an unlisted task's */
    fr[2].addr = 0x40000;
    fr[4].addr = 0x40100;
    fr[1].gen = 1;              /* a generator iterated by Python code: not an entry */
    tasks_from_frames(&u, &th, 0);
    CHECK(th.task == UNW_TASK_UNLISTED && th.task_frames == 5, "an unlisted task: %#llx, %zu",
          (unsigned long long)th.task, th.task_frames);
    CHECK(unw_tasks_stale(&u) && !unw_tasks_stale(&u), "an unlisted task: stale once");
    /* no coroutine frame stepped from C: no task, the list stale only if the round said so */
    fr[2].gen = fr[4].gen = 0;
    tasks_from_frames(&u, &th, 0);
    CHECK(th.task == 0 && th.task_frames == 0 && !unw_tasks_stale(&u), "no task");
    tasks_from_frames(&u, &th, 0x99900);
    CHECK(th.task == 0 && unw_tasks_stale(&u), "the round's task not listed: stale");
    tasks_from_frames(&u, &th, 0x10000);
    CHECK(th.task == 0 && !unw_tasks_stale(&u), "the round's task listed: not stale");
    free(tk->fkeys);
    free(tk->chain);
    free(tk);
}

static void test_tasks(void)
{
    py_asyncio_t a;
    py_target_t T;
    unwinder_t u;
    thread_names_t *pn = NULL;
    proc_t *p = NULL;
    uint64_t head, tasks[5], lists[2], keys[16], items[4];
    size_t n = 0, i;
    int moved = 0, err;

    pn_mem = calloc(1, PN_SIZE);
    if (pn_mem == NULL)
        return;
    memset(&a, 0, sizeof a);
    a.task_size = TK_SIZE, a.task_node = TK_NODE, a.task_state = TK_STATE, a.task_is_task = TK_IS_TASK;
    a.task_name = 24, a.task_coro = 32, a.task_loop = 16, a.task_awaited_by = 40;

    /* five tasks, one done: four pending, in order */
    pn_begin();
    head = pn_alloc(16);
    for (i = 0; i < 5; i++)
        tasks[i] = tk_task(i != 2);
    tk_link(head, tasks, 5);
    lists[0] = head, lists[1] = tasks[0] + TK_NODE;
    CHECK(tn_test_read(0, NULL, 0, &pn, &p, &u, &T) == 0 || p != NULL, "synthetic source");
    err = tasks_walk_test(&u, &a, lists, 1, &n, &moved);
    CHECK(err == 0 && n == 4 && !moved, "a list of 5 tasks, one done: err %d, %zu tasks, moved %d", err, n, moved);
    tn_test_end(pn, p);

    /* the last node loops to itself (its back link holds): bounded, not a hang */
    pn_put(tasks[4] + TK_NODE, tasks[4] + TK_NODE);
    pn_put(tasks[4] + TK_NODE + 8, tasks[4] + TK_NODE);
    pn_put(tasks[3] + TK_NODE, tasks[4] + TK_NODE);
    tn_test_read(0, NULL, 0, &pn, &p, &u, &T);
    err = tasks_walk_test(&u, &a, lists, 1, &n, &moved);
    CHECK(moved == 1 || err == REMORA_ENOMEM, "a node looping to itself: err %d, moved %d", err, moved);
    tn_test_end(pn, p);

    /* a wrong back link (a list changing under the walk), an unaligned and an unmapped
     * next: moved, every time */
    tk_link(head, tasks, 5);
    pn_put(tasks[2] + TK_NODE + 8, tasks[0] + TK_NODE);
    tn_test_read(0, NULL, 0, &pn, &p, &u, &T);
    err = tasks_walk_test(&u, &a, lists, 1, &n, &moved);
    CHECK(err == 0 && moved == 1, "a wrong back link: err %d, moved %d", err, moved);
    tn_test_end(pn, p);
    tk_link(head, tasks, 5);
    pn_put(tasks[1] + TK_NODE, tasks[2] + TK_NODE + 3);
    tn_test_read(0, NULL, 0, &pn, &p, &u, &T);
    err = tasks_walk_test(&u, &a, lists, 1, &n, &moved);
    CHECK(err == 0 && moved == 1, "an unaligned next: err %d, moved %d", err, moved);
    tn_test_end(pn, p);
    tk_link(head, tasks, 5);
    pn_put(tasks[1] + TK_NODE, 0x7f0000000000ull + TK_NODE);
    tn_test_read(0, NULL, 0, &pn, &p, &u, &T);
    err = tasks_walk_test(&u, &a, lists, 1, &n, &moved);
    CHECK(err == 0 && moved == 1, "an unmapped next: err %d, moved %d", err, moved);
    tn_test_end(pn, p);

    /* a set whose mask is too large, one whose mask is not 2^k - 1, a good one; a list
     * longer than asked for; a dict key that is not there */
    {
        uint64_t set = pn_alloc(64), tab = pn_alloc(8 * 16), lst = pn_alloc(40), arr = pn_alloc(64);
        uint64_t kv[1][3], d;
        pn_put(set + 8, 0x1060);
        pn_put(set + 40, tab);
        pn_put(tab, tasks[0]);
        pn_put(tab + 16 * 5, tasks[1]);
        pn_put(lst + 16, 1000000);
        pn_put(lst + 24, arr);
        for (i = 0; i < 8; i++)
            pn_put(arr + 8 * i, tasks[i % 5]);
        kv[0][0] = 1, kv[0][1] = pn_str("data"), kv[0][2] = set;
        d = pn_dict(kv, 1, 8, 1);
        pn_put(set + 32, (uint64_t)1 << 40);
        tn_test_read(0, NULL, 0, &pn, &p, &u, &T);
        CHECK(pyo_set_keys(&u, set, keys, 16, &n) == REMORA_ECORRUPT, "a set of 2^40 slots is refused");
        tn_test_end(pn, p);
        pn_put(set + 32, 6);
        tn_test_read(0, NULL, 0, &pn, &p, &u, &T);
        CHECK(pyo_set_keys(&u, set, keys, 16, &n) == REMORA_ECORRUPT, "a mask of 6 is refused");
        tn_test_end(pn, p);
        pn_put(set + 32, UINT64_MAX);
        tn_test_read(0, NULL, 0, &pn, &p, &u, &T);
        CHECK(pyo_set_keys(&u, set, keys, 16, &n) == REMORA_ECORRUPT, "a mask of 2^64 - 1 (0 slots) is refused");
        tn_test_end(pn, p);
        pn_put(set + 32, 7);
        tn_test_read(0, NULL, 0, &pn, &p, &u, &T);
        err = pyo_set_keys(&u, set, keys, 16, &n);
        CHECK(err == 0 && n == 2 && keys[0] == tasks[0] && keys[1] == tasks[1], "a set's keys: err %d, %zu", err, n);
        err = pyo_list_items(&u, lst, items, 4, &n);
        CHECK(err == 0 && n == 4 && items[3] == tasks[3], "a list that says 10^6 items, 4 asked: err %d, %zu", err, n);
        err = pyo_dict_get(&u, d, "data", &items[0]);
        CHECK(err == 0 && items[0] == set, "dict['data']: err %d", err);
        CHECK(pyo_dict_get(&u, d, "nothere", &items[0]) == REMORA_EFAULT, "dict['nothere']: EFAULT");
        tn_test_end(pn, p);
    }
    free(pn_mem);
    pn_mem = NULL;
}

/* ---- unwind/pyobj.c's readers (dict, set, tuple and list) over crafted hostile memory:
 * a flat buffer at an address of the test's choosing, read through a pyo_rd_t ---- */

typedef struct flat {
    uint64_t base;
    unsigned char *mem;
    size_t len;
    unsigned reads;
} flat_t;

static int flat_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
    flat_t *f = ctx;

    f->reads++;
    if (addr < f->base || addr - f->base > f->len || len > f->len - (addr - f->base))
        return REMORA_EFAULT;
    memcpy(buf, f->mem + (addr - f->base), len);
    return REMORA_OK;
}

static void flat_put(flat_t *f, uint64_t addr, uint64_t v)
{
    memcpy(f->mem + (addr - f->base), &v, 8);
}

/* A 3.11+ keys object at 'at' (8 slots, 8 index bytes): kind, nentries; its entries at
 * at + 40. */
static void flat_keys311(flat_t *f, const py_layout_t *L, uint64_t at, unsigned kind, int64_t nent)
{
    memset(f->mem + (at - f->base), 0, 40);
    f->mem[at - f->base + 8] = 3;           /* dk_log2_size */
    f->mem[at - f->base + 9] = 3;           /* dk_log2_index_bytes */
    f->mem[at - f->base + 10] = (unsigned char)kind;
    flat_put(f, at + L->dk_nentries, (uint64_t)nent);
}

static void test_pyo_readers(void)
{
    static unsigned char mem[8192];
    flat_t f = { 0x200000, mem, sizeof mem, 0 };
    pyo_rd_t rd = { flat_read, &f };
    py_layout_t L12, L9;
    py_target_t T;
    pyo_dict_t d;
    pyo_item_t it, got[8];
    pyo_set_t st;
    unsigned char buf[4096];
    uint64_t keys = 0x200100, vals = 0x200400, dict = 0x200040, set = 0x200800, key, items;
    size_t n;
    int64_t sz;
    int err;

    if (py_layout_for_minor(12) == NULL || py_layout_for_minor(9) == NULL)
        return;
    L12 = *py_layout_for_minor(12);
    py_layout_derive(&L12);
    L9 = *py_layout_for_minor(9);
    py_layout_derive(&L9);
    memset(&T, 0, sizeof T);
    T.layout = L12;
    T.dict_type = 0x1020;

    /* a unicode-keys table (16-byte entries) of 3 entries, one deleted: 2 items, their
     * index and where each value lies */
    flat_keys311(&f, &L12, keys, 1, 3);
    flat_put(&f, keys + 40, 0x300000), flat_put(&f, keys + 48, 0x300100);
    flat_put(&f, keys + 56, 0), flat_put(&f, keys + 64, 0);
    flat_put(&f, keys + 72, 0x300200), flat_put(&f, keys + 80, 0x300300);
    err = pyo_keys_open(&rd, &L12, keys, 0, 64, &d);
    CHECK(err == 0 && d.n == 3 && d.k.esz == 16 && d.need == 48, "unicode keys: err %d n %zu", err, d.n);
    CHECK(pyo_dict_load(&rd, &d, buf) == 0, "unicode keys: loaded");
    for (n = 0; n < 8 && pyo_dict_next(&d, &got[n]); n++)
        ;
    CHECK(n == 2 && got[0].key == 0x300000 && got[0].value == 0x300100 && got[0].slot == keys + 48 &&
          got[1].index == 2 && got[1].value == 0x300300 && got[1].slot == keys + 80,
          "unicode keys: 2 items, the deleted one left out (%zu)", n);
    CHECK(!pyo_dict_next(&d, &it), "past the end: nothing more");

    /* the same keys split: values from ma_values (3.12: values[] at once) */
    flat_put(&f, vals, 0x400000), flat_put(&f, vals + 8, 0x400008), flat_put(&f, vals + 16, 0x400010);
    err = pyo_keys_open(&rd, &L12, keys, vals, 64, &d);
    CHECK(err == 0 && d.need == 3 * 24 && pyo_dict_load(&rd, &d, buf) == 0 && pyo_dict_next(&d, &it) &&
          it.value == 0x400000 && it.slot == vals && pyo_dict_next(&d, &it) && it.value == 0x400010 &&
          it.slot == vals + 16 && it.index == 2, "a split table: values from ma_values (err %d)", err);

    /* through the dict object: its type checked */
    flat_put(&f, dict + 8, 0x1020), flat_put(&f, dict + 32, keys), flat_put(&f, dict + 40, 0);
    err = pyo_dict_open(&rd, &T, dict, 64, &d);
    CHECK(err == 0 && d.keys == keys && d.values == 0 && d.n == 3, "a dict object: err %d", err);
    flat_put(&f, dict + 8, 0x1030);
    CHECK(pyo_dict_open(&rd, &T, dict, 64, &d) == REMORA_ECORRUPT, "not a dict's type: refused");
    CHECK(pyo_dict_open(&rd, &T, dict + 4, 64, &d) == REMORA_ECORRUPT, "an unaligned dict: refused");

    /* capped: 3 entries, 2 asked for */
    CHECK(pyo_keys_open(&rd, &L12, keys, 0, 2, &d) == 0 && d.n == 2 && d.need == 32 && d.k.nent == 3,
          "3 entries capped at 2");

    /* hostile headers: every one refused before any entry is read */
    flat_keys311(&f, &L12, keys, 1, 9);
    CHECK(pyo_keys_open(&rd, &L12, keys, 0, 64, &d) == REMORA_ECORRUPT, "9 entries in 8 slots: refused");
    flat_keys311(&f, &L12, keys, 1, -1);
    CHECK(pyo_keys_open(&rd, &L12, keys, 0, 64, &d) == REMORA_ECORRUPT, "-1 entries: refused");
    flat_keys311(&f, &L12, keys, 3, 1);
    CHECK(pyo_keys_open(&rd, &L12, keys, 0, 64, &d) == REMORA_ECORRUPT, "a kind no keys have: refused");
    flat_keys311(&f, &L12, keys, 0, 1);
    mem[keys - f.base + 8] = 40;
    CHECK(pyo_keys_open(&rd, &L12, keys, 0, 64, &d) == REMORA_ECORRUPT, "2^40 slots: refused");
    mem[keys - f.base + 8] = 3, mem[keys - f.base + 9] = 2;
    CHECK(pyo_keys_open(&rd, &L12, keys, 0, 64, &d) == REMORA_ECORRUPT, "fewer index bytes than slots: refused");
    mem[keys - f.base + 9] = 3;
    CHECK(pyo_keys_open(&rd, &L12, keys + 3, 0, 64, &d) == REMORA_ECORRUPT, "unaligned keys: refused");
    CHECK(pyo_keys_open(&rd, &L12, keys, vals + 4, 64, &d) == REMORA_ECORRUPT, "unaligned values: refused");
    CHECK(pyo_keys_open(&rd, &L12, keys, UINT64_MAX - 7, 64, &d) == REMORA_ECORRUPT,
          "values that wrap the address space: refused");

    /* truncated: the header, then the entries, past the memory's end */
    CHECK(pyo_keys_open(&rd, &L12, f.base + sizeof mem - 16, 0, 64, &d) == REMORA_EFAULT,
          "a header cut short: the read's error");
    flat_keys311(&f, &L12, f.base + sizeof mem - 48, 0, 5);
    err = pyo_keys_open(&rd, &L12, f.base + sizeof mem - 48, 0, 64, &d);
    CHECK(err == 0 && pyo_dict_load(&rd, &d, buf) == REMORA_EFAULT && !pyo_dict_next(&d, &it),
          "entries cut short: the read's error, no item (err %d)", err);

    /* a table at the top of the address space: its entries would wrap; refused unread */
    {
        flat_t top = { UINT64_MAX - 4095, mem, 4096, 0 };
        pyo_rd_t trd = { flat_read, &top };
        flat_keys311(&top, &L12, top.base + 4096 - 48, 0, 8);
        err = pyo_keys_open(&trd, &L12, top.base + 4096 - 48, 0, 64, &d);
        CHECK(err == REMORA_ECORRUPT && top.reads == 1, "entries that wrap: refused unread (err %d)", err);
    }

    /* a loop: a dict whose keys are its own object (entries read from its header):
     * bounded by the header's count, then done */
    flat_keys311(&f, &L12, dict, 0, 2);
    flat_put(&f, dict + 32, dict);
    flat_put(&f, dict + 8, 0x1020);
    err = pyo_dict_open(&rd, &T, dict, 64, &d);
    for (n = 0; err == 0 && pyo_dict_load(&rd, &d, buf) == 0 && n < 100 && pyo_dict_next(&d, &it); n++)
        ;
    CHECK(err != 0 || n <= 2, "keys pointing to their own dict: at most 2 items (%zu)", n);

    /* 3.9's sized keys: dk_size a power of 2, 8 at least */
    memset(mem + (keys - f.base), 0, 64);
    flat_put(&f, keys + 8, 8), flat_put(&f, keys + L9.dk_nentries, 1);
    flat_put(&f, keys + L9.dk_indices + 8 + 8, 0x300000), flat_put(&f, keys + L9.dk_indices + 8 + 16, 0x300100);
    err = pyo_keys_open(&rd, &L9, keys, 0, 64, &d);
    CHECK(err == 0 && d.k.esz == 24 && pyo_dict_load(&rd, &d, buf) == 0 && pyo_dict_next(&d, &it) &&
          it.key == 0x300000 && it.value == 0x300100, "3.9 keys: one item (err %d)", err);
    flat_put(&f, keys + 8, 12);
    CHECK(pyo_keys_open(&rd, &L9, keys, 0, 64, &d) == REMORA_ECORRUPT, "3.9: 12 slots refused");
    flat_put(&f, keys + 8, 4);
    CHECK(pyo_keys_open(&rd, &L9, keys, 0, 64, &d) == REMORA_ECORRUPT, "3.9: 4 slots refused");

    /* sets: 8 slots, 2 keys and the dummy a removal leaves */
    {
        uint64_t tab = 0x200a00;
        unsigned char h[48];
        memset(mem + (tab - f.base), 0, 8 * 16);
        flat_put(&f, tab + 16, 0x500000), flat_put(&f, tab + 24, 5);
        flat_put(&f, tab + 48, 0x500100), flat_put(&f, tab + 56, (uint64_t)-1);    /* dummy */
        flat_put(&f, tab + 96, 0x500200), flat_put(&f, tab + 104, 7);
        memset(h, 0, sizeof h);
        memcpy(h + L12.set_used, &(uint64_t){ 2 }, 8);
        memcpy(h + L12.set_mask, &(uint64_t){ 7 }, 8);
        memcpy(h + L12.set_table, &tab, 8);
        err = pyo_set_open(&L12, h, sizeof h, 64, &st);
        CHECK(err == 0 && st.slots == 8 && st.need == 128 && pyo_set_load(&rd, &st, buf) == 0,
              "a set of 8 slots: err %d", err);
        CHECK(pyo_set_next(&st, &key) && key == 0x500000 && pyo_set_next(&st, &key) && key == 0x500200 &&
              !pyo_set_next(&st, &key), "a set: 2 keys, the dummy left out");
        CHECK(pyo_set_open(&L12, h, sizeof h, 3, &st) == 0 && st.n == 3 && st.need == 48, "a set capped at 3");
        CHECK(pyo_set_open(&L12, h, L12.set_table, 64, &st) == REMORA_ECORRUPT, "a set header cut short");
        memcpy(h + L12.set_mask, &(uint64_t){ UINT64_MAX }, 8);
        CHECK(pyo_set_open(&L12, h, sizeof h, 64, &st) == REMORA_ECORRUPT, "a mask of 2^64 - 1 (slots 0)");
        memcpy(h + L12.set_mask, &(uint64_t){ 3 }, 8);
        CHECK(pyo_set_open(&L12, h, sizeof h, 64, &st) == REMORA_ECORRUPT, "a mask of 3 (below PySet_MINSIZE)");
        memcpy(h + L12.set_mask, &(uint64_t){ 12 }, 8);
        CHECK(pyo_set_open(&L12, h, sizeof h, 64, &st) == REMORA_ECORRUPT, "a mask of 12");
        memcpy(h + L12.set_mask, &(uint64_t){ (1ull << 40) - 1 }, 8);
        CHECK(pyo_set_open(&L12, h, sizeof h, 64, &st) == REMORA_ECORRUPT, "2^40 slots");
        memcpy(h + L12.set_mask, &(uint64_t){ 7 }, 8);
        memcpy(h + L12.set_used, &(uint64_t){ 9 }, 8);
        CHECK(pyo_set_open(&L12, h, sizeof h, 64, &st) == REMORA_ECORRUPT, "9 keys in 8 slots");
        memcpy(h + L12.set_used, &(uint64_t){ (uint64_t)-2 }, 8);
        CHECK(pyo_set_open(&L12, h, sizeof h, 64, &st) == REMORA_ECORRUPT, "-2 keys");
        memcpy(h + L12.set_used, &(uint64_t){ 2 }, 8);
        memcpy(h + L12.set_table, &(uint64_t){ tab + 4 }, 8);
        CHECK(pyo_set_open(&L12, h, sizeof h, 64, &st) == REMORA_ECORRUPT, "an unaligned table");
        memcpy(h + L12.set_table, &(uint64_t){ UINT64_MAX - 63 }, 8);
        CHECK(pyo_set_open(&L12, h, sizeof h, 64, &st) == REMORA_ECORRUPT, "a table that wraps");
        memcpy(h + L12.set_table, &(uint64_t){ f.base + sizeof mem - 64 }, 8);
        CHECK(pyo_set_open(&L12, h, sizeof h, 64, &st) == 0 && pyo_set_load(&rd, &st, buf) == REMORA_EFAULT &&
              !pyo_set_next(&st, &key), "a table cut short: the read's error, no key");
        /* a loop: the table is the set itself */
        memcpy(h + L12.set_table, &set, 8);
        memcpy(mem + (set - f.base), h, sizeof h);
        n = 0;
        if (pyo_set_open(&L12, h, sizeof h, 64, &st) == 0 && pyo_set_load(&rd, &st, buf) == 0)
            while (n < 100 && pyo_set_next(&st, &key))
                n++;
        CHECK(n <= 8, "a table that is its own set: at most 8 keys (%zu)", n);
    }

    /* tuples and lists: the size and where the items are */
    {
        unsigned char h[64];
        memset(h, 0, sizeof h);
        memcpy(h + L12.ob_size, &(int64_t){ 3 }, 8);
        CHECK(pyo_seq(&L12, 0x600000, h, sizeof h, 0, &items, &sz) == 0 && sz == 3 &&
              items == 0x600000 + L12.tuple_items, "a tuple of 3");
        memcpy(h + L12.ob_size, &(int64_t){ -1 }, 8);
        CHECK(pyo_seq(&L12, 0x600000, h, sizeof h, 0, &items, &sz) == REMORA_ECORRUPT && sz == 0,
              "a tuple of -1 items");
        memcpy(h + L12.ob_size, &(int64_t){ 2 }, 8);
        memcpy(h + L12.list_items, &(uint64_t){ 0x700004 }, 8);
        CHECK(pyo_seq(&L12, 0x600000, h, sizeof h, 1, &items, &sz) == REMORA_ECORRUPT, "a list's items unaligned");
        memcpy(h + L12.list_items, &(uint64_t){ 0x700000 }, 8);
        CHECK(pyo_seq(&L12, 0x600000, h, sizeof h, 1, &items, &sz) == 0 && items == 0x700000 && sz == 2,
              "a list of 2");
        CHECK(pyo_seq(&L12, 0x600000, h, L12.ob_size + 4, 1, &items, &sz) == REMORA_ECORRUPT,
              "a header cut short");
    }

    /* the typed accessors: unaligned, signed */
    {
        unsigned char b[16] = { 0xff, 0xfe, 0xff, 0xff, 0xff, 0x34, 0x12, 0x80 };
        CHECK(get_i8(b, 0) == -1 && get_u8(b, 1) == 0xfe && get_u16(b, 5) == 0x1234 &&
              get_i32(b, 1) == (int32_t)0xfffffffe && get_u32(b, 4) == 0x801234ffu &&
              get_i64(b, 8) == 0, "get_i8/u8/u16/i32/u32/i64 at unaligned offsets");
    }
}

/* ---- util/pyrepr.c: repr() of values, against what Python itself wrote ---- */

#include "pyrepr_cases.h"

static void test_pyrepr(void)
{
    char out[UNW_LOCAL_VALUE];
    pyr_buf_t b;
    size_t i;
    uint32_t big[PYR_INT_DIGITS + 1];

    for (i = 0; i < sizeof pyr_float_cases / sizeof pyr_float_cases[0]; i++) {
        double d;
        memcpy(&d, &pyr_float_cases[i].bits, 8);
        pyr_init(&b, out, sizeof out);
        pyr_float(&b, d);
        CHECK(strcmp(pyr_end(&b), pyr_float_cases[i].repr) == 0, "float %016llx: %s, want %s",
              (unsigned long long)pyr_float_cases[i].bits, out, pyr_float_cases[i].repr);
    }
    for (i = 0; i < sizeof pyr_int_cases / sizeof pyr_int_cases[0]; i++) {
        pyr_init(&b, out, sizeof out);
        CHECK(pyr_int(&b, pyr_int_cases[i].d, pyr_int_cases[i].n, pyr_int_cases[i].neg) == 0 &&
              strcmp(pyr_end(&b), pyr_int_cases[i].repr) == 0, "int %zu: %.60s, want %.60s", i, out,
              pyr_int_cases[i].repr);
    }
    for (i = 0; i < sizeof pyr_str_cases / sizeof pyr_str_cases[0]; i++) {
        pyr_init(&b, out, sizeof out);
        pyr_str(&b, pyr_str_cases[i].cp, pyr_str_cases[i].n, 0);
        CHECK(strcmp(pyr_end(&b), pyr_str_cases[i].repr) == 0, "str %zu: %s, want %s", i, out,
              pyr_str_cases[i].repr);
    }
    for (i = 0; i < sizeof pyr_bytes_cases / sizeof pyr_bytes_cases[0]; i++) {
        pyr_init(&b, out, sizeof out);
        pyr_bytes(&b, pyr_bytes_cases[i].b, pyr_bytes_cases[i].n, 0);
        CHECK(strcmp(pyr_end(&b), pyr_bytes_cases[i].repr) == 0, "bytes %zu: %s, want %s", i, out,
              pyr_bytes_cases[i].repr);
    }
    /* a str cut: no closing quote, "..." */
    {
        static const uint32_t abc[] = { 'a', 'b', 'c' };
        pyr_init(&b, out, sizeof out);
        pyr_str(&b, abc, 3, 1);
        CHECK(strcmp(pyr_end(&b), "'abc...") == 0, "cut str: %s", out);
        pyr_init(&b, out, sizeof out);
        pyr_bytes(&b, (const unsigned char *)"ab", 2, 1);
        CHECK(strcmp(pyr_end(&b), "b'ab...") == 0, "cut bytes: %s", out);
    }
    /* a full buffer keeps its bound and ends in "...", never in half a character */
    {
        static const uint32_t cps[] = { 0xe9, 0xe9, 0xe9, 0xe9, 0xe9, 0xe9, 0xe9, 0xe9, 0xe9, 0xe9 };
        char small[12];
        pyr_init(&b, small, sizeof small);
        pyr_str(&b, cps, 10, 0);
        CHECK(strcmp(pyr_end(&b), "'\xc3\xa9\xc3\xa9\xc3\xa9..." ) == 0 && strlen(small) < sizeof small,
              "full buffer: %s", small);
    }
    /* ints past the bound, digits out of range: refused, nothing written */
    memset(big, 0, sizeof big);
    big[PYR_INT_DIGITS] = 1;
    pyr_init(&b, out, sizeof out);
    CHECK(pyr_int(&b, big, PYR_INT_DIGITS + 1, 0) == -1 && b.len == 0, "int of too many digits");
    big[0] = 1u << 30;
    CHECK(pyr_int(&b, big, 1, 0) == -1 && b.len == 0, "a digit of 2^30");
    CHECK(pyr_printable('a') && !pyr_printable(0x7f) && !pyr_printable(0x2028) &&
          pyr_printable(0xe9) && !pyr_printable(0xd800) && !pyr_printable(0x110000),
          "printable");
}

/* ---- the kernel engine's weight of a thread's time off a CPU (kernel.c) ---------- */

/* A thread that runs 'burst' ns then waits 'wait' ns, over and over from t = 1 s, looked
 * at by rounds 'gap(i)' ns apart: its CPU time and state at t. */
struct ow_sched {
    int64_t burst, wait;
    int kind;                       /* 0: rounds a period apart; 1: 0.4 and 1.6 periods in
                                     * turn; 2: a fifth of them 3 periods late, else 0.5 */
    uint32_t lcg;
};

static int64_t ow_gap(struct ow_sched *s, int i, int64_t period)
{
    if (s->kind == 0)
        return period;
    if (s->kind == 1)
        return i % 2 ? period * 2 / 5 : period * 8 / 5;
    s->lcg = s->lcg * 1664525u + 1013904223u;
    return (s->lcg >> 8) % 5 == 0 ? 3 * period : period / 2;
}

/* The CPU share of the thread's bursts as a profile made of these rounds would give it
 * (its time on a CPU counted by its ticks, a period of CPU time each; off a CPU by
 * kern_off_weigh), and as the rule before it would: a sample off a CPU standing for the
 * periods since it went off or since the round before, one at least. */
static void ow_run(struct ow_sched *s, int64_t period, int rounds, double *truth, double *now_share,
                   double *old_share)
{
    const int64_t t0 = 1000000000;
    int64_t t = t0, prev = 0, cyc = s->burst + s->wait;
    uint64_t counted = 0, old = 0, cpu = 0;
    kern_offw_t w = {0, 0, 0};
    int i;

    for (i = 0; i < rounds; i++) {
        int64_t k, x, since;
        unsigned n = 0;
        int on;
        t += ow_gap(s, i, period);
        k = (t - t0) / cyc, x = (t - t0) % cyc;
        on = x < s->burst;
        cpu = (uint64_t)(k * s->burst + (on ? x : s->burst));
        since = t0 + (on ? k - 1 : k) * cyc + s->burst;     /* its last switch off */
        if (kern_off_weigh(&w, t, cpu, period, !on, &n))
            counted += n;
        if (!on && prev > 0) {
            int64_t from = since > prev ? since : prev;
            int64_t m = (t - from + period / 2) / period;
            old += m < 1 ? 1 : (uint64_t)m;
        }
        prev = t;
    }
    *truth = 100.0 * (double)cpu / (double)(t - t0);
    *now_share = 100.0 * (double)cpu / ((double)cpu + (double)counted * (double)period);
    *old_share = 100.0 * (double)cpu / ((double)cpu + (double)old * (double)period);
}

/* The part of a thread state each reading copies (py_layout_derive's ts_read): every
 * field the reading takes from it inside, and no more than the state. 3.15's offsets as
 * its _Py_DebugOffsets give them (888-byte PyThreadState, exc_state the last field read,
 * ending at 304); the built-in layouts' whole states at most. */
static void test_ts_read(void)
{
    py_layout_t L;
    int minor;

    memset(&L, 0, sizeof L);
    L.minor = 15;
    L.frames_kind = PY_FRAMES_DIRECT;
    L.ts_size = 888;
    L.ts_next = 8;
    L.ts_interp = 16;
    L.ts_frame = 0x48;
    L.ts_last_profiled = 0x58;
    L.ts_last_profiled_seq = 0x60;
    L.ts_gil_requested = 0x28;
    L.ts_exc_info = 0x90;
    L.ts_thread_id = 0xb0;
    L.ts_native_thread_id = 0xb8;
    L.ts_datastack_chunk = 0x100;
    L.ts_exc_state = 0x120;
    L.ei_size = 16;
    py_layout_derive(&L);
    CHECK(L.ts_read == 0x130, "3.15: a reading copies 304 bytes of the state (%llu)",
          (unsigned long long)L.ts_read);
    L.ts_exc_state = 0x370;         /* a field at the state's end: the whole state */
    py_layout_derive(&L);
    CHECK(L.ts_read == 888, "a last field at the end: the whole state (%llu)", (unsigned long long)L.ts_read);
    L.ts_exc_state = 0x380;         /* past the end (refused elsewhere): never over the state */
    py_layout_derive(&L);
    CHECK(L.ts_read == 888, "a field past the end: no more than the state (%llu)", (unsigned long long)L.ts_read);
    for (minor = 9; minor <= 12; minor++) {
        const py_layout_t *B = py_layout_for_minor(minor);
        if (B == NULL)
            continue;
        L = *B;
        py_layout_derive(&L);
        CHECK(L.ts_read <= L.ts_size && L.ts_read >= L.ts_frame + 8 && L.ts_read >= L.ts_thread_id + 8 &&
              L.ts_read >= L.ts_next + 8 && (L.ts_exc_info == 0 || L.ts_read >= L.ts_exc_info + 8) &&
              (L.ts_datastack_chunk == 0 || L.ts_read >= L.ts_datastack_chunk + PY_TS_DATASTACK_SPAN),
              "3.%d: the fields read inside the %llu bytes copied (state %llu)", minor,
              (unsigned long long)L.ts_read, (unsigned long long)L.ts_size);
    }
}

/* The kernel engine's reading of what gil and exception modes ask (unw_kern_reads): every
 * table version's GIL and exception state readable; a layout without them refused in one
 * phrase naming the mode, the other mode unaffected; the exception walk never on in the
 * layout itself (the default's tick reads nothing more: kern_sync_threads turns it on). */
static void test_kern_reads(void)
{
    int minor;

    for (minor = 9; minor <= 12; minor++) {
        const py_layout_t *L = py_layout_for_minor(minor);
        py_target_t T;
        unwinder_t u;
        kern_layout_t kl;
        char why[256] = "";
        if (L == NULL)
            continue;
        memset(&T, 0, sizeof T);
        memset(&u, 0, sizeof u);
        T.layout = *L;
        py_layout_derive(&T.layout);
        T.runtime = 0x7f0000001000ull;
        T.none = 0x7f0000002000ull;
        snprintf(T.version, sizeof T.version, "3.%d", minor);
        u.target = &T;
        CHECK(unw_kern_reads(&u, 1, 0, why, sizeof why) == REMORA_OK, "3.%d gil: %s", minor, why);
        CHECK(unw_kern_reads(&u, 0, 1, why, sizeof why) == REMORA_OK, "3.%d exception: %s", minor, why);
        CHECK(unw_kern_layout(&T, &kl, why, sizeof why) == REMORA_OK && kl.exc_on == 0 &&
              kl.ts_exc_info != 0 && kl.exc_none == T.none && kl.ts_interp != 0,
              "3.%d: the layout's GIL and exception offsets, the walk off", minor);
        T.layout.gil_holder = 0;
        CHECK(unw_kern_reads(&u, 1, 0, why, sizeof why) == REMORA_EVERSION &&
              strstr(why, "--mode gil") != NULL && strchr(why, '\n') == NULL,
              "3.%d without the GIL's holder: gil refused in one phrase (%s)", minor, why);
        CHECK(unw_kern_reads(&u, 0, 1, why, sizeof why) == REMORA_OK, "3.%d: exception still read", minor);
        T.layout.ts_exc_info = 0;
        CHECK(unw_kern_reads(&u, 0, 1, why, sizeof why) == REMORA_EVERSION &&
              strstr(why, "--mode exception") != NULL, "3.%d without exc_info: refused (%s)", minor, why);
        CHECK(unw_kern_reads(&u, 0, 0, why, sizeof why) == REMORA_OK, "3.%d: wall still runs", minor);
    }
}

static void test_off_weigh(void)
{
    const int64_t P = 1000000;      /* 1 kHz */
    struct ow_sched cases[] = {
        {300000, 1700000, 0, 1},    /* a cycle of two periods: every round finds it the same */
        {250000, 1250000, 1, 1},    /* rounds that come early and late in turn */
        {250000, 1250000, 2, 7},    /* some rounds late, finding it on a CPU after a wait */
        {300000, 700000, 2, 11},
        {100000, 500000, 1, 3},
    };
    kern_offw_t w = {0, 0, 0};
    int64_t t = 1000000000;
    uint64_t cpu = 0;
    unsigned n = 0, i;
    size_t c;

    for (c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        double truth, share, old;
        /* within 0.3 points; with late rounds (kind 2) the wait a late round found over
         * is carried two periods at most (KU_CARRY: see kernel.c), 1.5-2.7 points over */
        double bound = cases[c].kind == 2 ? 3.0 : 0.3;
        ow_run(&cases[c], P, 20000, &truth, &share, &old);
        CHECK(share > truth - 0.3 && share < truth + bound,
              "off weigh case %zu: bursts %.2f%% of the profile for %.2f%% of the time", c, share, truth);
        /* the rule before missed it by 2-8 points, twice as far: the cases tell the two apart */
        CHECK(fabs(old - truth) > 1.5 && fabs(old - truth) > 1.8 * fabs(share - truth),
              "off weigh case %zu: the old rule %.2f%% for %.2f%% (this one %.2f%%)", c, old, truth, share);
    }

    /* no look before: nothing counted, no carry; the first look counts from itself */
    CHECK(kern_off_weigh(&w, t, 0, P, 1, &n) == 0 && w.carry == 0, "off weigh: a first look weighs nothing");
    CHECK(kern_off_weigh(&w, t + 3 * P, 0, P, 1, &n) == 1 && n == 3 && w.carry == 0,
          "off weigh: three periods off stand for %u", n);
    /* a thread on a CPU at every round, remora's wake-up preempting it 30 us each time:
     * its preemptions pile up KU_CARRY (2) periods at most, not the 30 periods of 1000 */
    t += 3 * P;
    for (i = 0; i < 1000; i++) {
        t += P;
        cpu += (uint64_t)(P - 30000);
        kern_off_weigh(&w, t, cpu, P, 0, &n);
    }
    t += 5 * P;
    CHECK(kern_off_weigh(&w, t, cpu, P, 1, &n) == 1 && n >= 5 && n <= 7, "off weigh: 5 periods off after"
          " preemptions stand for %u", n);
    /* a wait a late round found over (the thread on a CPU again): two periods of it carry */
    w.carry = 0;
    t += P;
    cpu += (uint64_t)P;
    kern_off_weigh(&w, t, cpu, P, 0, &n);
    t += 6 * P;
    cpu += (uint64_t)(P / 4);
    kern_off_weigh(&w, t, cpu, P, 0, &n);
    t += P;
    CHECK(kern_off_weigh(&w, t, cpu, P, 1, &n) == 1 && n == 3, "off weigh: 2 carried + 1 periods off stand for %u", n);
    /* a look before the one kept (a pause, another thread) counts nothing */
    w.ns = t + P;
    CHECK(kern_off_weigh(&w, t, cpu, P, 1, &n) == 0 && w.carry == 0, "off weigh: a look from the future counts");
}

/* ---- 3.9/3.10: the tid's offset in struct pthread ---- */

/* One struct pthread as glibc lays it out on x86-64: the pointer to itself first, the
 * tid at 720. */
static void pt_fill(unsigned char *b, uint64_t self, int32_t tid)
{
    memset(b, 0, PTHREAD_SCAN);
    memcpy(b, &self, 8);
    memcpy(b + 16, &self, 8);
    memcpy(b + 720, &tid, 4);
}

static void test_pthread_tid_offset(void)
{
    static unsigned char scan[3 * PTHREAD_SCAN];
    /* pid_max 32768: the high half of a pointer at 0x7f91... is tid 0x7f91, a worker's */
    const uint64_t main_pt = 0x7f91acdd3b80ull, w1 = 0x7f91ab55f6c0ull, w2 = 0x7f91abd606c0ull;
    pid_t tids[] = {1000, 0x7f91, 2000, 2001};
    uint64_t pts[3] = {main_pt, w1, w2};

    /* the main thread's state alone, a worker alive whose tid is that high half: the
     * first offset where every copy holds a live tid (4) would name main by the worker */
    pt_fill(scan, main_pt, 1000);
    CHECK(pthread_tid_offset(scan, pts, 1, tids, 4, 1000) == 720, "tid offset: main alone, a pointer's high half a live tid");
    /* with two workers: the high halves are one tid for three threads */
    pt_fill(scan + PTHREAD_SCAN, w1, 2000);
    pt_fill(scan + 2 * PTHREAD_SCAN, w2, 2001);
    CHECK(pthread_tid_offset(scan, pts, 3, tids, 4, 1000) == 720, "tid offset: three threads");
    /* the pid itself 0x7f91: offset 4 holds it too, the 8-aligned offset is taken */
    tids[0] = 0x7f91;
    tids[1] = 1000;
    pt_fill(scan, main_pt, 0x7f91);
    CHECK(pthread_tid_offset(scan, pts, 1, tids, 4, 0x7f91) == 720, "tid offset: the pid a pointer's high half");
    tids[0] = 1000;
    tids[1] = 0x7f91;
    pt_fill(scan, main_pt, 1000);
    /* a state whose thread has ended (tid 0): no offset yet, nor without the main thread */
    pt_fill(scan + 2 * PTHREAD_SCAN, w2, 0);
    CHECK(pthread_tid_offset(scan, pts, 3, tids, 4, 1000) == -1, "tid offset: an ended thread's state");
    CHECK(pthread_tid_offset(scan + PTHREAD_SCAN, pts + 1, 1, tids, 4, 1000) == -1, "tid offset: no main thread");
    /* two states of one struct pthread (a state made for a thread not started yet) */
    pts[2] = main_pt;
    memcpy(scan + 2 * PTHREAD_SCAN, scan, PTHREAD_SCAN);
    CHECK(pthread_tid_offset(scan, pts, 3, tids, 4, 1000) == 720, "tid offset: a shared pthread_t");
    /* two structs holding one tid at an offset: not where the tid lies */
    pts[2] = w2;
    pt_fill(scan + 2 * PTHREAD_SCAN, w2, 2000);
    CHECK(pthread_tid_offset(scan, pts, 3, tids, 4, 1000) == -1, "tid offset: one tid in two structs");
}

/* ---- input bounds (issue 46): a line over the bound, a total that would wrap, inputs
 * refused by their type ---- */

/* ---- counts: the counts' words (formats/counts.c), plurals and shares ---- */

static void test_counts_words(void)
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

static void test_input_bounds(void)
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

int main(void)
{
    test_linetables();
    test_maps();
    test_stat();
    test_elf();
    test_strtab();
    test_upper();
    test_source_cache();
    test_json();
    test_text();
    test_fn_rows();
    test_marshal();
    test_pstats();
    test_native_frames();
    test_raw_sources();
    test_native_bounds();
    test_anchor_walk();
    test_objects_walk();
    test_lived_walk();
    test_moment_cut();
    test_call_locals();
    test_cframe_window();
    test_thread_names();
    test_tasks();
    test_pyo_readers();
    test_tasks_from_frames();
    test_pyrepr();
    test_off_weigh();
    test_kern_reads();
    test_ts_read();
    test_pthread_tid_offset();
    test_input_bounds();
    test_counts_words();
    printf("unit: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
