/* tests/unit/unit.c — unit tests of remora's pure parts: line tables, /proc parsers,
 * ELF reader, interned strings, JSON escaping. Ends with "unit: N passed, N failed". */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "remora.h"
#include "proc/proc.h"
#include "unwind/unwind.h"
#include "unwind/internal.h"
#include "formats/out.h"
#include "formats/raw.h"

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
    CHECK(out_collapsed_read(f, back, &samples, &bad) == 0 && samples == 3, "read back (line %zu)", bad);
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
    memset(one, 0, sizeof one);
    memset(ts, 0, sizeof ts);
    frame_layout(&T.layout, PY_FRAMES_DIRECT, FS, 0, 8, 56);
    T.layout.fr_owner_gen = -1;
    T.layout.ts_frame = 8;
    T.layout.ts_datastack_chunk = 32;
    T.layout.ts_size = TS;
    /* s2 (0xc2) calls C at one instruction in both copies, over s1 and the root s0 */
    lived_frame(one + RD_CHUNK_HDR, 0xc0, 0, 0xc0 + 40);
    lived_frame(one + RD_CHUNK_HDR + FS, 0xc1, s0, 0xc1 + 40);
    lived_frame(one + RD_CHUNK_HDR + 2 * FS, 0xc2, s1, 0xc2 + 40);
    memcpy(two, one, sizeof one);
    memcpy(ts + 8, &s2, 8);
    memcpy(ts + 32, &chunk, 8);
    memcpy(ts + 40, &top, 8);
    tc.ts = ts;
    tc.chunk = tc.base = chunk;
    tc.a = one;
    tc.b = two;
    tc.copied = sizeof one;
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
          raw_close(w, &m, 1) == 0, "recording written");
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

int main(void)
{
    test_linetables();
    test_maps();
    test_stat();
    test_elf();
    test_strtab();
    test_json();
    test_text();
    test_fn_rows();
    test_native_frames();
    test_native_bounds();
    test_anchor_walk();
    test_objects_walk();
    test_lived_walk();
    printf("unit: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
