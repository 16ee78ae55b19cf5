/* tests/unit/unit_walk.c — unit tests of a thread's walks (unwind/walk.c, copy.c,
 * native.c) over crafted copies: through a --frame-anchor, 3.9/3.10 frame objects, frames
 * that lived through the copies, the round's moment cut, calling frames' locals, the
 * cframe window of 3.11/3.12, and the bounds of a --native C stack. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "remora.h"
#include "proc/proc.h"
#include "unwind/internal.h"
#include "util/util.h"
#include "unit.h"

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

void test_anchor_walk(void)
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

void test_objects_walk(void)
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

void test_lived_walk(void)
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
void test_call_locals(void)
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
void test_cframe_window(void)
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

void test_moment_cut(void)
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

/* --native's bounds: a C stack whose frame pointers loop, and one 600 frames deep (both
 * in memory no module covers: libdwfl's frame-pointer rule), end with UNW_NATIVE_CUT. */
void test_native_bounds(void)
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
