/* unwind/code.c — the code-object cache.
 *
 * Reads a code object (its fixed part in one read), its name, qualified name, file
 * name and line table, and keeps them by address in a bounded direct-mapped table.
 * A cached entry is only used while the object at that address still carries the
 * same fingerprint (see unwind.h: pointers, co_version from 3.12, before that the name
 * and file str objects themselves), so a freed and reused address never relabels a
 * frame; an entry is kept only if the object did not change while it was read.
 */
#include <stdlib.h>
#include <string.h>

#include "remora.h"
#include "internal.h"
#include "../py/opcodes311.h"

#define CODE_MAX_READ 1024
#define CODE_MAX_UNITS 32768            /* 3.11 bytecode decoded for call points, at most */
#define CODE_WAYS 4                     /* the cache is set-associative: UNW_CODE_CACHE / 4 sets */

struct code_cache {
    strtab_t *strs;
    uint64_t serials;           /* the last entry's serial */
    unw_code_t slots[UNW_CODE_CACHE];
};

code_cache_t *code_cache_new(strtab_t *strs)
{
    code_cache_t *c = calloc(1, sizeof *c);

    if (c != NULL)
        c->strs = strs;
    return c;
}

static void entry_clear(unw_code_t *e)
{
    free(e->linetable);
    free(e->calls);
    free(e->str_img);
    memset(e, 0, sizeof *e);
}

void code_cache_free(code_cache_t *c)
{
    size_t i;

    if (c == NULL)
        return;
    for (i = 0; i < UNW_CODE_CACHE; i++)
        entry_clear(&c->slots[i]);
    free(c);
}

/* Without co_version (before 3.12) the code object holds nothing unique: its str objects
 * are compared too. */
static int fp_strings(const py_layout_t *L)
{
    return L->co_version == 0;
}

void code_fp_span(const py_layout_t *L, uint64_t *off, size_t *len)
{
    /* the name, file and line-table pointers sit together in every version, co_version
     * just before them */
    uint64_t lo = L->co_filename, hi = L->co_filename + 8, v = L->co_version;
    uint64_t f[3] = { L->co_name, L->co_linetable, L->co_qualname };
    int i;

    for (i = 0; i < 3; i++) {
        if (f[i] < lo)
            lo = f[i];
        if (f[i] + 8 > hi)
            hi = f[i] + 8;
    }
    if (hi - lo > UNW_FP_SPAN) {
        lo = L->co_filename;
        hi = L->co_filename + 8;
    }
    if (v != 0 && v < lo && hi - v <= UNW_FP_SPAN)
        lo = v;
    *off = lo;
    *len = (size_t)(hi - lo);
}

size_t code_fp_iov(code_cache_t *c, const py_layout_t *L, uint64_t addr, unsigned char *buf,
                   proc_iov_t *iov)
{
    unw_code_t *e = code_cache_peek(c, addr);
    uint64_t off;
    size_t len, n = 1, k;

    code_fp_span(L, &off, &len);
    iov[0].addr = addr + off;
    iov[0].buf = buf;
    iov[0].len = len;
    memset(buf + UNW_FP_SPAN, 0, 2 * UNW_FP_STR);
    for (k = 0; e != NULL && e->str_img != NULL && k < 2; k++) {
        if (e->str_len[k] == 0)
            continue;
        iov[n].addr = e->str_at[k];
        iov[n].buf = buf + UNW_FP_SPAN + k * UNW_FP_STR;
        iov[n].len = e->str_len[k];
        n++;
    }
    return n;
}

int code_fp_same(const unw_code_t *e, const py_layout_t *L, const unsigned char *buf)
{
    uint64_t off;
    size_t len, k;

    code_fp_span(L, &off, &len);
    if (memcmp(e->fp, buf, len) != 0)
        return 0;
    if (fp_strings(L) && e->str_img == NULL)
        return 0;               /* made without its strings: cannot be trusted */
    for (k = 0; e->str_img != NULL && k < 2; k++)
        if (memcmp(e->str_img + k * UNW_FP_STR, buf + UNW_FP_SPAN + k * UNW_FP_STR, e->str_len[k]) != 0)
            return 0;
    return 1;
}

/* The set of CODE_WAYS slots where the entry for 'addr' may be. */
static unw_code_t *code_set(code_cache_t *c, uint64_t addr)
{
    uint64_t h = (addr >> 4) * 0x9e3779b97f4a7c15ull;

    return &c->slots[(size_t)(h >> 40) % (UNW_CODE_CACHE / CODE_WAYS) * CODE_WAYS];
}

unw_code_t *code_cache_peek(code_cache_t *c, uint64_t addr)
{
    unw_code_t *set = code_set(c, addr);
    size_t w;

    for (w = 0; addr != 0 && w < CODE_WAYS; w++)
        if (set[w].addr == addr)
            return &set[w];
    return NULL;
}

/* The slot a new entry for 'addr' takes: its own, an empty one, else the one validated
 * longest ago (naming.c stamps entries each sample). */
static unw_code_t *code_victim(code_cache_t *c, uint64_t addr)
{
    unw_code_t *set = code_set(c, addr), *v = code_cache_peek(c, addr);
    size_t w;

    if (v != NULL)
        return v;
    v = &set[0];
    for (w = 0; w < CODE_WAYS; w++) {
        if (set[w].addr == 0)
            return &set[w];
        if (set[w].stamp < v->stamp)
            v = &set[w];
    }
    return v;
}

void code_cache_drop(code_cache_t *c, uint64_t addr)
{
    unw_code_t *e = code_cache_peek(c, addr);

    if (e != NULL)
        entry_clear(e);
}

/* Reads and interns the str at 'addr'; with e, also keeps its image as e's k-th. */
static int intern_str(code_cache_t *c, proc_t *p, const py_layout_t *L, uint64_t addr, const char **out,
                      unw_code_t *e, size_t k)
{
    char buf[UNW_MAX_NAME * 4 + 1];
    size_t len;
    int err = e == NULL ? pystr_read(p, L, addr, buf, sizeof buf, &len) :
              pystr_read_img(p, L, addr, buf, sizeof buf, &len, e->str_img + k * UNW_FP_STR,
                             UNW_FP_STR, &e->str_len[k]);

    if (err)
        return err;
    *out = strtab_intern(c->strs, buf, len);
    if (e != NULL)
        e->str_at[k] = addr + 8;
    return *out ? REMORA_OK : REMORA_ENOMEM;
}

/* 3.11: decodes the bytecode's instruction boundaries (each instruction is followed by
 * its inline cache entries) and marks the last code unit of every CALL and BINARY_SUBSCR:
 * where prev_instr rests while that instruction's callee runs. The families are stable
 * under specialization, so a copy taken once serves the code object's whole life. */
static int read_calls(proc_t *p, uint64_t code, int64_t units, unw_code_t *e)
{
    uint16_t *bc;
    size_t n, i;
    int err;

    if (units <= 0 || units > CODE_MAX_UNITS)
        return REMORA_OK;                  /* not known: the check is skipped */
    n = (size_t)units;
    bc = malloc(n * 2);
    e->calls = calloc((n + 7) / 8, 1);
    if (bc == NULL || e->calls == NULL) {
        free(bc);
        free(e->calls);
        e->calls = NULL;
        return REMORA_ENOMEM;
    }
    err = proc_read(p, code, bc, n * 2);
    if (err) {
        free(bc);
        free(e->calls);
        e->calls = NULL;
        return err == REMORA_ENOPROC ? err : REMORA_OK;
    }
    for (i = 0; i < n;) {
        unsigned op = bc[i] & 0xff;
        size_t last = i + op311_caches[op];
        if (op311_kind[op] && last < n)
            e->calls[last / 8] |= (unsigned char)(1u << (last % 8));
        i = last + 1;
    }
    e->calls_units = n;
    free(bc);
    return REMORA_OK;
}

const char *code_opcode(unwinder_t *u, unw_code_t *e, int offset)
{
    const py_layout_t *L = &u->target->layout;
    unsigned char op;

    if (u->opnames == NULL || offset < 0)
        return NULL;
    if (e->bytecode == 0 && L->co_code_adaptive == 0 && L->co_code != 0) {
        /* 3.9/3.10: the bytes object holding the bytecode (immutable: read once) */
        uint64_t bytes, size;
        if (proc_read_u64(u->p, e->addr + L->co_code, &bytes) != REMORA_OK || bytes == 0 ||
            proc_read_u64(u->p, bytes + L->bytes_size, &size) != REMORA_OK || size > (1u << 28))
            return NULL;
        e->bytecode = bytes + L->bytes_sval;
        e->bytecode_len = (size_t)size;
    }
    if (e->bytecode == 0 || (size_t)offset >= e->bytecode_len ||
        proc_read(u->p, e->bytecode + (uint64_t)offset, &op, 1) != REMORA_OK)
        return NULL;
    return u->opnames[op];
}

int code_calls_at(const unw_code_t *code, int64_t idx)
{
    if (code->calls == NULL || idx < 0 || (uint64_t)idx >= code->calls_units)
        return -1;
    return (code->calls[idx / 8] >> (idx % 8)) & 1;
}

/* Is the object whose head is in co alive? pymalloc keeps a freed block on its free list
 * through the block's first word, where the reference count was: a pointer, or 0 at the
 * list's end. A live object counts from 1: below 2^32 whole before 3.12; from 3.12 the
 * low half counts (immortal objects set its high bits, 3.14 flags in the high half). */
static int live(const py_layout_t *L, const unsigned char *co)
{
    uint64_t rc = get_u64(co, 0);

    if (!L->rc_low_half)
        return rc >= 1 && rc < ((uint64_t)1 << 32);
    /* the count in the low half; above it only flags: 3.14 a statically allocated
     * object's bit 39, 3.15 ob_flags in bits 48-63. A block pymalloc freed holds a
     * pointer there (its type is left as it was): bits 40-46 of any user-space address
     * above 2^40, where pymalloc's arenas are mapped */
    return (uint32_t)rc != 0 && ((rc >> 32) & 0xff7f) == 0;
}

/* Reads the code object's head and fingerprint again: 0 when they are still e's, else
 * REMORA_ECORRUPT (or the read's error). */
static int still_same(proc_t *p, const py_layout_t *L, const py_target_t *t, const unw_code_t *e,
                      uint64_t fp_off, size_t fp_len)
{
    unsigned char head[CODE_MAX_READ], img[2 * UNW_FP_STR];
    proc_iov_t iov[3];
    size_t n = 1, k;
    int err;

    iov[0].addr = e->addr;
    iov[0].buf = head;
    iov[0].len = (size_t)fp_off + fp_len;
    if (iov[0].len < L->ob_type + 8)
        iov[0].len = (size_t)L->ob_type + 8;
    for (k = 0; e->str_img != NULL && k < 2; k++) {
        if (e->str_len[k] == 0)
            continue;
        iov[n].addr = e->str_at[k];
        iov[n].buf = img + k * UNW_FP_STR;
        iov[n].len = e->str_len[k];
        n++;
    }
    err = proc_readv(p, iov, n);
    if (err)
        return err == REMORA_ENOPROC ? err : REMORA_ECORRUPT;
    if (!live(L, head) || (t->code_type != 0 && get_u64(head, L->ob_type) != t->code_type) ||
        memcmp(head + fp_off, e->fp, fp_len) != 0)
        return REMORA_ECORRUPT;
    for (k = 0; e->str_img != NULL && k < 2; k++)
        if (memcmp(img + k * UNW_FP_STR, e->str_img + k * UNW_FP_STR, e->str_len[k]) != 0)
            return REMORA_ECORRUPT;
    return REMORA_OK;
}


int code_cache_get(code_cache_t *c, proc_t *p, const py_target_t *t, uint64_t addr,
                   unw_code_t **out)
{
    const py_layout_t *L = &t->layout;
    unsigned char co[CODE_MAX_READ];
    unw_code_t *e = code_victim(c, addr);
    unw_code_t fresh;
    uint64_t fp_off;
    size_t need, fp_len;
    int err;

    *out = NULL;
    if (addr == 0 || addr % 8 != 0)
        return REMORA_ECORRUPT;
    need = L->co_size < CODE_MAX_READ ? L->co_size : CODE_MAX_READ;
    if (need < L->co_firstlineno + 4 || need < L->co_filename + 8 || need < L->co_name + 8 ||
        need < L->co_linetable + 8 || need < L->co_qualname + 8 || need < L->ob_type + 8)
        return REMORA_ECORRUPT;
    err = proc_read(p, addr, co, need);
    if (err)
        return err;
    if ((t->code_type != 0 && get_u64(co, L->ob_type) != t->code_type) || !live(L, co))
        return REMORA_ECORRUPT;
    code_fp_span(L, &fp_off, &fp_len);
    if (fp_off + fp_len > need)
        return REMORA_ECORRUPT;
    if (e->addr == addr && memcmp(e->fp, co + fp_off, fp_len) == 0) {
        /* before 3.12 its str objects must still be the entry's too */
        unsigned char buf[UNW_FP_MAX];
        proc_iov_t iov[UNW_FP_READS];
        size_t n = code_fp_iov(c, L, addr, buf, iov);
        memcpy(buf, co + fp_off, fp_len);
        err = n > 1 ? proc_readv(p, iov + 1, n - 1) : REMORA_OK;
        if (err == REMORA_ENOPROC)
            return err;
        if (err == REMORA_OK && code_fp_same(e, L, buf)) {
            *out = e;
            return REMORA_OK;
        }
    }

    memset(&fresh, 0, sizeof fresh);
    fresh.addr = addr;
    memcpy(fresh.fp, co + fp_off, fp_len);
    memset(fresh.lc_addr, 0xff, sizeof fresh.lc_addr);
    memset(fresh.ll_addr, 0xff, sizeof fresh.ll_addr);
    fresh.firstlineno = get_i32(co, L->co_firstlineno);
    if (fp_strings(L) && (fresh.str_img = malloc(2 * UNW_FP_STR)) == NULL)
        return REMORA_ENOMEM;
    err = intern_str(c, p, L, get_u64(co, L->co_filename), &fresh.file,
                     fresh.str_img ? &fresh : NULL, 1);
    if (!err)
        err = intern_str(c, p, L, get_u64(co, L->co_qualname),
                         &fresh.function, fresh.str_img ? &fresh : NULL, 0);
    if (!err)
        err = pybytes_read(p, L, get_u64(co, L->co_linetable), UNW_MAX_LINETABLE,
                           &fresh.linetable, &fresh.linetable_len);
    if (err) {
        free(fresh.linetable);
        free(fresh.str_img);
        return err;
    }
    if (L->co_code_adaptive >= 24 && L->co_code_adaptive <= need && L->ob_size + 8 <= need &&
        get_u64(co, L->ob_size) < (1u << 27)) {
        fresh.bytecode = addr + L->co_code_adaptive;        /* 3.11+: inside the object */
        fresh.bytecode_len = (size_t)get_u64(co, L->ob_size) * 2;
    }
    if (L->caller_rests_on_call && L->co_code_adaptive >= 24 && L->co_code_adaptive <= need &&
        L->ob_size + 8 <= need) {
        err = read_calls(p, addr + L->co_code_adaptive, (int64_t)get_u64(co, L->ob_size), &fresh);
        if (err) {
            free(fresh.linetable);
            free(fresh.str_img);
            return err;
        }
    }
    /* the object may have changed while it was read (made, freed, reused): it must still
     * be what the entry was made from */
    err = still_same(p, L, t, &fresh, fp_off, fp_len);
    if (err) {
        free(fresh.linetable);
        free(fresh.str_img);
        free(fresh.calls);
        return err;
    }
    fresh.serial = ++c->serials;
    entry_clear(e);
    *e = fresh;
    *out = e;
    return REMORA_OK;
}

