/* tests/fuzz/targets.c — the fuzz targets: each takes untrusted bytes and runs one of
 * remora's parsers over them. Built into libFuzzer binaries (entry.c, `make fuzz`) and
 * into the replay tool (tool.c, `make test` replays the committed corpora).
 *
 *   maps       proc_maps_parse over a maps text
 *   elf        the ELF reader (elf_open_mem, symbols, sections, addresses), and a traced
 *              file's stub, which must answer the same lookups as the file
 *   lnotab     3.9 line table      } input: i32 firstlineno, i32 instruction offset,
 *   lt310      3.10 line table     } then the table
 *   locations  3.11+ location table}
 *   core       a core file: maps, tasks, reads, py_target_find, a recorded snapshot of it
 *   unwind     a snapshot: py_target_find + unw_sample (the per-sample reader) five times
 *   locals     a snapshot: every Python frame's locals (unwind/locals.c), as dump --locals
 *              (from the second on, the code cache's and the thread cache's hit paths)
 *   native     --native's C-stack unwinder and merge (unwind/native.c) over a thread's
 *              registers and stack bytes, with this process's own modules (format at
 *              fuzz_native)
 *   collapsed  convert's line reader (out_collapsed_read) under a line bound the input
 *              chooses; what it read written and read back (format at fuzz_collapsed)
 *   raw        convert's .remora reader (raw_read), events kept: every event names a
 *              thread and node read, the node table bounded by the input's length
 *
 * A target returns 0; a broken invariant aborts (the fuzzer reports it as a crash).
 */
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "remora.h"
#include "proc/proc.h"
#include "proc/proc_internal.h"
#include "py/py.h"
#include "unwind/unwind.h"
#include "unwind/internal.h"
#include "util/util.h"
#include "formats/out.h"
#include "formats/raw.h"
#include "fuzz.h"

#define CHECK(cond)                                                                 \
    do {                                                                            \
        if (!(cond)) {                                                              \
            fprintf(stderr, "fuzz: invariant broken at %s:%d: %s\n", __FILE__,      \
                    __LINE__, #cond);                                               \
            abort();                                                                \
        }                                                                           \
    } while (0)

/* An 8-aligned copy (libFuzzer's buffer has no promised alignment). */
static unsigned char *copy(const uint8_t *data, size_t size)
{
    unsigned char *b = malloc(size ? size : 1);

    if (b != NULL && size)
        memcpy(b, data, size);
    return b;
}

int fuzz_maps(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    proc_maps_t m;
    size_t i;

    if (text == NULL)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    if (proc_maps_parse(text, size, 4096, &m) == REMORA_OK) {
        CHECK(m.n <= 4096);
        for (i = 0; i < m.n; i++) {
            CHECK(m.v[i].start <= m.v[i].end);
            CHECK(m.v[i].perms[4] == '\0');
            if (m.v[i].path != NULL) {
                CHECK(m.v[i].path >= text && m.v[i].path < text + size);
                CHECK(strlen(m.v[i].path) < size);
            }
        }
        free(m.v);
    }
    free(text);
    return 0;
}

static const char *const elf_names[] = {
    "_PyRuntime", "PyCode_Type", "Py_Version", "Py_Initialize", "_Py_next_func_version",
    "main", "",
};
static const char *const elf_sections[] = { ".PyRuntime", ".text", ".data", ".symtab", "" };

int fuzz_elf(const uint8_t *data, size_t size)
{
    unsigned char *b = copy(data, size);
    elf_t *e = NULL, *s = NULL;
    elf_trace_t *t = NULL;
    unsigned char *stub = NULL;
    size_t stub_len, i, len;
    uint64_t v, sz, base = 0;

    if (b == NULL || elf_open_mem(b, size, &e) != REMORA_OK)
        goto out;
    CHECK(elf_bytes(e, &len) == b && len == size);
    t = elf_trace_new(e);
    if (t == NULL)
        goto out;
    elf_trace_attach(e, t);
    for (i = 0; i < sizeof elf_names / sizeof elf_names[0]; i++) {
        if (elf_symbol(e, elf_names[i], &v, &sz) == REMORA_OK) {
            const volatile unsigned char *at = elf_at(e, v, 64);
            if (at != NULL)
                (void)(at[0] + at[63]);
        }
    }
    for (i = 0; i < sizeof elf_sections / sizeof elf_sections[0]; i++)
        (void)elf_section(e, elf_sections[i], &v, &sz);
    (void)elf_base_vaddr(e, &base);
    (void)elf_at(e, 0, 1);
    (void)elf_at(e, UINT64_MAX, 1);

    /* the stub answers as the file did */
    if (elf_trace_stub(t, &stub, &stub_len) != REMORA_OK)
        goto out;
    CHECK(elf_open_mem(stub, stub_len, &s) == REMORA_OK);
    /* (empty names are looked up above but not traced: no real lookup is for "") */
    for (i = 0; elf_names[i][0] != '\0'; i++) {
        uint64_t v2, sz2;
        int a = elf_symbol(e, elf_names[i], &v, &sz), c = elf_symbol(s, elf_names[i], &v2, &sz2);
        CHECK(a == c && (a != REMORA_OK || (v == v2 && sz == sz2)));
    }
    for (i = 0; elf_sections[i][0] != '\0'; i++) {
        uint64_t v2, sz2;
        int a = elf_section(e, elf_sections[i], &v, &sz);
        if (a == REMORA_OK) {
            CHECK(elf_section(s, elf_sections[i], &v2, &sz2) == REMORA_OK);
            CHECK(v == v2 && sz == sz2);
        }
    }
    {
        uint64_t b2;
        int a = elf_base_vaddr(e, &base), c = elf_base_vaddr(s, &b2);
        CHECK(a == c && (a != REMORA_OK || base == b2));
    }
out:
    elf_free(s);
    free(stub);
    elf_free(e);
    elf_trace_free(t);
    free(b);
    return 0;
}

typedef int (*lt_fn)(const unsigned char *, size_t, int, int);

static int fuzz_lt(const uint8_t *data, size_t size, lt_fn fn)
{
    int32_t first, addrq, q;
    unsigned char *tab;
    size_t len, limit, step;

    if (size < 8)
        return 0;
    memcpy(&first, data, 4);
    memcpy(&addrq, data + 4, 4);
    len = size - 8;
    tab = copy(data + 8, len);          /* exactly len bytes: ASan sees any overrun */
    if (tab == NULL)
        return 0;
    (void)fn(tab, len, first, addrq);
    (void)fn(tab, len, first, ~addrq);
    (void)fn(tab, len, first, INT32_MAX);
    /* 64 instructions spread over what the table can describe (an entry covers at most
     * 16 code units: 32 bytes) */
    limit = len * 32 + 32 < (1u << 20) ? len * 32 + 32 : (1u << 20);
    step = limit / 64 < 2 ? 2 : (limit / 64) & ~(size_t)1;
    for (q = 0; (size_t)q < limit; q += (int32_t)step)
        (void)fn(tab, len, first, q);
    free(tab);
    return 0;
}

int fuzz_lnotab(const uint8_t *data, size_t size)
{
    return fuzz_lt(data, size, lt_lnotab_line);
}

int fuzz_lt310(const uint8_t *data, size_t size)
{
    return fuzz_lt(data, size, lt_310_line);
}

int fuzz_locations(const uint8_t *data, size_t size)
{
    return fuzz_lt(data, size, lt_locations_line);
}

/* Runs the unwinder over p as remora dump does. */
static void unwind_all(proc_t *p)
{
    py_target_t *t = malloc(sizeof *t);
    unwinder_t *u = NULL;
    unw_thread_t *th;
    size_t n, i, k;
    char why[512];
    int pass;

    if (t == NULL)
        return;
    if (py_target_find(p, t, why, sizeof why) == REMORA_OK && unw_new(p, t, &u) == REMORA_OK) {
        for (pass = 0; pass < 5; pass++) {
            if (unw_sample(u, &th, &n) != REMORA_OK)
                continue;
            for (i = 0; i < n; i++) {
                CHECK(th[i].nframes <= UNW_MAX_DEPTH);
                for (k = 0; k < th[i].nframes; k++)
                    CHECK(th[i].frames[k].function != NULL && th[i].frames[k].file != NULL);
            }
        }
    }
    unw_free(u);
    free(t);
}

/* Reads made from a core, to read again from the snapshot recorded of them. */
typedef struct seen {
    uint64_t addr;
    size_t len;
    unsigned char bytes[16];
} seen_t;

int fuzz_core(const uint8_t *data, size_t size)
{
    proc_t *p = NULL, *q = NULL;
    proc_maps_t m;
    pid_t tids[64];
    size_t n = 0, i, nseen = 0;
    unsigned char buf[256], *snap = NULL;
    size_t snap_len;
    seen_t seen[128];

    /* a root where nothing exists: the fuzzer cannot make remora open host files */
    if (proc_open_core_mem(data, size, NULL, "/nonexistent-remora-fuzz-root", &p) != REMORA_OK)
        return 0;
    CHECK(proc_kind(p) == PROC_CORE);
    CHECK(proc_record_start(p) == REMORA_OK);
    if (proc_maps_read(p, &m) == REMORA_OK) {
        for (i = 0; i < m.n && i < 64; i++) {
            uint64_t at[2] = { m.v[i].start, m.v[i].end - 8 };   /* and across the end */
            int k;
            (void)proc_read(p, m.v[i].start, buf, sizeof buf);
            for (k = 0; k < 2; k++) {
                if (m.v[i].end - m.v[i].start < 8 ||
                    proc_read(p, at[k], seen[nseen].bytes, 16) != REMORA_OK)
                    continue;
                seen[nseen].addr = at[k];
                seen[nseen].len = 16;
                nseen++;
            }
            if (m.v[i].path != NULL) {
                elf_t *e;
                if (proc_elf_open(p, m.v[i].path, m.v[i].inode, &e) == REMORA_OK)
                    elf_free(e);
            }
        }
        proc_maps_fini(&m);
    }
    if (proc_tasks(p, tids, 64, &n) == REMORA_OK) {
        for (i = 0; i < n && i < 64; i++) {
            char st, name[64];
            (void)proc_task_state(p, tids[i], &st);
            (void)proc_task_comm(p, tids[i], name, sizeof name);
        }
    }
    unwind_all(p);
    (void)proc_problem(p);
    /* what was read replays from a snapshot */
    if (proc_snapshot_save_mem(p, &snap, &snap_len) == REMORA_OK) {
        CHECK(proc_open_snapshot_mem(snap, snap_len, &q) == REMORA_OK);
        if (proc_maps_read(q, &m) == REMORA_OK)
            proc_maps_fini(&m);
        for (i = 0; i < nseen; i++) {
            CHECK(proc_read(q, seen[i].addr, buf, seen[i].len) == REMORA_OK);
            CHECK(memcmp(buf, seen[i].bytes, seen[i].len) == 0);
        }
        proc_free(q);
        free(snap);
    }
    proc_free(p);
    return 0;
}

int fuzz_unwind(const uint8_t *data, size_t size)
{
    proc_t *p = NULL;

    if (proc_open_snapshot_mem(data, size, &p) != REMORA_OK)
        return 0;
    CHECK(proc_kind(p) == PROC_SNAPSHOT);
    unwind_all(p);
    proc_free(p);
    return 0;
}

/* ---- locals ----------------------------------------------------------------------
 * Input: a snapshot (seeds: fuzz_tool snap-record-locals of tests/targets/
 * locals_target.py). Every Python frame's locals read as dump --locals does: each value
 * must be one line of valid UTF-8 within UNW_LOCAL_VALUE, without control characters. */

static void locals_check(const unw_local_t *v, size_t n)
{
    size_t i;

    CHECK(n <= UNW_LOCALS_MAX);
    for (i = 0; i < n; i++) {
        const unsigned char *s;
        size_t len;
        CHECK(v[i].name != NULL);
        CHECK(v[i].has_value == (v[i].value != NULL));
        if (v[i].value == NULL)
            continue;
        s = (const unsigned char *)v[i].value;
        len = strlen(v[i].value);
        CHECK(len < UNW_LOCAL_VALUE);
        while (len > 0) {
            size_t k = out_utf8_len(s, len);
            CHECK(k > 0);
            CHECK(*s >= 0x20 && *s != 0x7f);
            s += k;
            len -= k;
        }
    }
}

int fuzz_locals(const uint8_t *data, size_t size)
{
    proc_t *p = NULL;
    py_target_t *t = malloc(sizeof *t);
    unwinder_t *u = NULL;
    unw_locals_t *lr = NULL;
    unw_thread_t *th;
    size_t n, i, k;
    char why[512];

    if (t == NULL || proc_open_snapshot_mem(data, size, &p) != REMORA_OK) {
        free(t);
        return 0;
    }
    if (py_target_find(p, t, why, sizeof why) == REMORA_OK && unw_new(p, t, &u) == REMORA_OK &&
        unw_locals_new(p, t, &lr) == REMORA_OK && unw_sample(u, &th, &n) == REMORA_OK) {
        for (i = 0; i < n; i++)
            for (k = 0; k < th[i].nframes; k++) {
                const unw_local_t *v;
                size_t nv, more;
                if (unw_locals_read(lr, &th[i].frames[k], &v, &nv, &more) == REMORA_OK)
                    locals_check(v, nv);
            }
    }
    unw_locals_free(lr);
    unw_free(u);
    proc_free(p);
    free(t);
    return 0;
}

/* ---- native ----------------------------------------------------------------------
 * Input (little-endian):
 *   u8 root (py_walk_root: low bits mod 3; bit 7: a partial stack), u8 n (Python frames,
 *   at most NATIVE_PY)
 *   n x { u8 entry, u32 below: an offset into the stack bytes, 0xffffffff for none }
 *   17 x u64 registers (DWARF order), u64 stack_lo, then the stack's bytes
 * A register or an aligned stack word whose top 16 bits are FUZZ_EXE is this program's
 * address fuzz_native + (int32_t)low 32 bits; FUZZ_LIBC, libc's base + low 32 bits: so a
 * stack captured once (fuzz_tool native-seed) unwinds the same in every run. */
#define NATIVE_PY 64

static int find_libc(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    if (info->dlpi_name != NULL && strstr(info->dlpi_name, "/libc.so") != NULL) {
        *(uint64_t *)arg = info->dlpi_addr;
        return 1;
    }
    return 0;
}

uint64_t fuzz_libc_base(void)
{
    static uint64_t base;

    if (base == 0)
        dl_iterate_phdr(find_libc, &base);
    return base;
}

uint64_t fuzz_reloc(uint64_t v)
{
    if ((v >> 48) == FUZZ_EXE)
        return (uint64_t)(uintptr_t)fuzz_native + (uint64_t)(int64_t)(int32_t)(uint32_t)v;
    if ((v >> 48) == FUZZ_LIBC)
        return fuzz_libc_base() + (uint32_t)v;
    return v;
}

int fuzz_native(const uint8_t *data, size_t size)
{
    static proc_t *self;
    static unw_native_t *nat;
    static strtab_t *names;
    static unw_frame_t py[NATIVE_PY];
    py_layout_t L;
    unw_thread_t th;
    uint64_t regs[PROC_NREGS], lo;
    size_t n, i, pos, k, len;
    unsigned char *stack;

    if (nat == NULL) {
        names = strtab_new();
        CHECK(names != NULL && proc_open(getpid(), &self) == REMORA_OK &&
              native_new(self, names, &nat) == REMORA_OK);
        for (i = 0; i < NATIVE_PY; i++) {
            char name[16];
            int w = snprintf(name, sizeof name, "py%zu", i);
            py[i].function = strtab_intern(names, name, (size_t)w);
            py[i].file = strtab_intern(names, "f.py", 4);
            py[i].line = (int)i + 1;
        }
    }
    if (size < 2)
        return 0;
    memset(&L, 0, sizeof L);
    L.walk_root = (data[0] & 0x7f) % 3;
    L.frames_kind = L.walk_root == PY_ROOT_ENTRY ? PY_FRAMES_CFRAME : PY_FRAMES_OBJECTS;
    L.ts_frame = 8;
    L.cframe_current_frame = 8;
    n = data[1] < NATIVE_PY ? data[1] : NATIVE_PY;
    pos = 2 + n * 5;
    if (size < pos + (PROC_NREGS + 1) * 8)
        return 0;
    for (i = 0; i < PROC_NREGS; i++) {
        memcpy(&regs[i], data + pos + i * 8, 8);
        regs[i] = fuzz_reloc(regs[i]);
    }
    memcpy(&lo, data + pos + PROC_NREGS * 8, 8);
    pos += (PROC_NREGS + 1) * 8;
    len = size - pos;
    if ((stack = copy(data + pos, len)) == NULL)
        return 0;
    for (k = 0; k + 8 <= len; k += 8) {
        uint64_t w;
        memcpy(&w, stack + k, 8);
        w = fuzz_reloc(w);
        memcpy(stack + k, &w, 8);
    }
    memset(&th, 0, sizeof th);
    th.frames = py;
    th.nframes = n;
    th.partial = (data[0] & 0x80) != 0;
    for (i = 0; i < n; i++) {
        uint32_t below;
        memcpy(&below, data + 2 + i * 5 + 1, 4);
        py[i].entry = data[2 + i * 5] & 1;
        py[i].below = below == 0xffffffffu ? 0 : lo + below;
        py[i].native = 0;
    }
    CHECK(native_merge_buffer(nat, &L, regs, lo, stack, len, &th) == REMORA_OK);
    if (getenv("REMORA_FUZZ_VERBOSE") != NULL)
        for (i = 0; i < th.nframes; i++)
            fprintf(stderr, "  %s (%s:%d)%s\n", th.frames[i].function, th.frames[i].file,
                    th.frames[i].line, th.frames[i].native ? " [C]" : "");
    /* every Python frame once, in its order; every frame named; a partial stack's marker
     * once, inner of every Python frame */
    CHECK(th.moving_in_frames == (th.partial && n > 0));
    for (i = 0, k = 0; i < th.nframes; i++) {
        CHECK(th.frames[i].function != NULL && th.frames[i].file != NULL);
        if (!th.frames[i].native && strcmp(th.frames[i].function, UNW_MOVING) == 0) {
            CHECK(th.partial && k == 0);
            continue;
        }
        if (!th.frames[i].native) {
            CHECK(k < n && th.frames[i].function == py[k].function);
            k++;
        }
    }
    CHECK(k == n && th.nframes <= n + 512 + 2);
    free(stack);
    return 0;
}

/* ---- collapsed -------------------------------------------------------------------
 * Input: u8 b, then collapsed stacks read under a bound of 1 << (4 + b % 17) bytes a line
 * (16 bytes to OUT_COLLAPSED_MAX_LINE). A line reported too long is longer than the
 * bound, and none accepted is; a whole read is written out and read back to the same
 * number of samples. */

/* The length of line 'no' (1-based) of text[0..n), its newline aside; 0 if none. */
static size_t line_len(const char *text, size_t n, size_t no)
{
    size_t i = 0, at = 1, start = 0;

    for (; i < n && at < no; i++)
        if (text[i] == '\n') {
            at++;
            start = i + 1;
        }
    if (at != no)
        return 0;
    for (i = start; i < n && text[i] != '\n'; i++)
        ;
    return i - start;
}

int fuzz_collapsed(const uint8_t *data, size_t size)
{
    stk_table_t *t = NULL, *back = NULL;
    size_t max, bad = 0, bad2 = 0, out_len = 0, i, start;
    uint64_t samples = 0, samples2 = 0;
    char *text, *out = NULL;
    profile_t prof;
    FILE *f;
    int err;

    if (size < 1)
        return 0;
    max = (size_t)1 << (4 + data[0] % 17);
    text = (char *)copy(data + 1, size - 1);
    if (text == NULL || (t = stk_new()) == NULL || (f = fmemopen(text, size - 1 ? size - 1 : 1, "r")) == NULL)
        goto out;
    if (size == 1)
        (void)fgetc(f);             /* fmemopen wants a byte: an empty input, read past */
    err = out_collapsed_read(f, t, max, &samples, &bad);
    fclose(f);
    CHECK(err == REMORA_OK || err == REMORA_ECORRUPT || err == REMORA_ENOMEM);
    if (err == REMORA_ECORRUPT)
        CHECK(bad >= 1);
    if (err == REMORA_ENOMEM && bad != 0)
        CHECK(line_len(text, size - 1, bad) > max);
    if (err != REMORA_OK)
        goto out;
    /* every line held: within the bound */
    for (i = 0, start = 0; i <= size - 1; i++)
        if (i == size - 1 || text[i] == '\n') {
            CHECK(i - start <= max);
            start = i + 1;
        }
    memset(&prof, 0, sizeof prof);
    prof.stacks = t;
    if ((f = open_memstream(&out, &out_len)) == NULL)
        goto out;
    CHECK(out_collapsed_write(&prof, f, NULL) == REMORA_OK);
    fclose(f);
    if ((back = stk_new()) == NULL || (f = fmemopen(out, out_len ? out_len : 1, "r")) == NULL)
        goto out;
    if (out_len == 0)
        (void)fgetc(f);
    /* escaping can lengthen a line (a byte that is not UTF-8 becomes U+FFFD): no bound */
    err = out_collapsed_read(f, back, SIZE_MAX - 1, &samples2, &bad2);
    fclose(f);
    CHECK(err == REMORA_OK || err == REMORA_ENOMEM);
    CHECK(err != REMORA_OK || samples2 == samples);
out:
    stk_free(back);
    stk_free(t);
    free(out);
    free(text);
    return 0;
}

/* ---- raw --------------------------------------------------------------------------
 * Input: a .remora recording, read with its events. */
int fuzz_raw(const uint8_t *data, size_t size)
{
    stk_table_t *t = stk_new();
    profile_meta_t m;
    prof_event_t *ev = NULL;
    size_t nev = 0, i;
    unsigned char *b = copy(data, size);
    FILE *f;
    int err;

    if (t == NULL || b == NULL || size == 0 || (f = fmemopen(b, size, "r")) == NULL)
        goto out;
    err = raw_read(f, t, &m, &ev, &nev);
    fclose(f);
    CHECK(err == REMORA_OK || err == REMORA_ECORRUPT || err == REMORA_ENOMEM);
    /* a node has a record of 4 bytes at least, a thread 5 */
    CHECK(stk_nnodes(t) <= size && stk_nthreads(t) <= size);
    for (i = 0; i < nev; i++)
        CHECK(ev[i].thread < stk_nthreads(t) && ev[i].node < stk_nnodes(t));
    CHECK(memchr(m.command, 0, sizeof m.command) != NULL && memchr(m.mode, 0, sizeof m.mode) != NULL);
out:
    free(ev);
    free(b);
    stk_free(t);
    return 0;
}

const fuzz_target_t fuzz_targets[] = {
    { "maps", fuzz_maps },
    { "elf", fuzz_elf },
    { "lnotab", fuzz_lnotab },
    { "lt310", fuzz_lt310 },
    { "locations", fuzz_locations },
    { "core", fuzz_core },
    { "unwind", fuzz_unwind },
    { "native", fuzz_native },
    { "locals", fuzz_locals },
    { "collapsed", fuzz_collapsed },
    { "raw", fuzz_raw },
    { NULL, NULL },
};
