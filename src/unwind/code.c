/* unwind/code.c — the code-object cache.
 *
 * Reads a code object (its fixed part in one read), its name, qualified name, file
 * name and line table, and keeps them by address in a bounded direct-mapped table.
 * A cached entry is only used while the object at that address still carries the
 * same fingerprint (name, file and line-table pointers, first line), so a freed and
 * reused address never relabels a frame.
 */
#include <stdlib.h>
#include <string.h>

#include "remora.h"
#include "unwind.h"

#define CODE_MAX_READ 1024

struct code_cache {
    strtab_t *names;
    unw_code_t slots[UNW_CODE_CACHE];
};

code_cache_t *code_cache_new(strtab_t *names)
{
    code_cache_t *c = calloc(1, sizeof *c);

    if (c != NULL)
        c->names = names;
    return c;
}

static void entry_clear(unw_code_t *e)
{
    free(e->linetable);
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

static uint64_t get_u64(const unsigned char *b, uint64_t off)
{
    uint64_t v;
    memcpy(&v, b + off, 8);
    return v;
}

static int32_t get_i32(const unsigned char *b, uint64_t off)
{
    int32_t v;
    memcpy(&v, b + off, 4);
    return v;
}

void code_fp_span(const py_layout_t *L, uint64_t *off, size_t *len)
{
    /* the name, file and line-table pointers sit together in every version */
    uint64_t lo = L->co_filename, hi = L->co_filename;
    uint64_t f[3] = { L->co_name, L->co_linetable, L->minor >= 11 ? L->co_qualname : L->co_name };
    int i;

    for (i = 0; i < 3; i++) {
        if (f[i] < lo)
            lo = f[i];
        if (f[i] > hi)
            hi = f[i];
    }
    if (hi + 8 - lo > UNW_FP_MAX) {
        lo = L->co_filename;
        hi = L->co_filename;
    }
    *off = lo;
    *len = (size_t)(hi + 8 - lo);
}

unw_code_t *code_cache_peek(code_cache_t *c, uint64_t addr)
{
    unw_code_t *e = &c->slots[(addr >> 4) & (UNW_CODE_CACHE - 1)];

    return e->addr == addr && addr != 0 ? e : NULL;
}

void code_cache_drop(code_cache_t *c, uint64_t addr)
{
    unw_code_t *e = code_cache_peek(c, addr);

    if (e != NULL)
        entry_clear(e);
}

static int intern_str(code_cache_t *c, proc_t *p, const py_layout_t *L, uint64_t addr, const char **out)
{
    char buf[UNW_MAX_NAME * 4 + 1];
    size_t len;
    int err = pystr_read(p, L, addr, buf, sizeof buf, &len);

    if (err)
        return err;
    *out = strtab_intern(c->names, buf, len);
    return *out ? REMORA_OK : REMORA_ENOMEM;
}

int code_cache_get(code_cache_t *c, proc_t *p, const py_target_t *t, uint64_t addr,
                   unw_code_t **out)
{
    const py_layout_t *L = &t->layout;
    unsigned char co[CODE_MAX_READ];
    unw_code_t *e = &c->slots[(addr >> 4) & (UNW_CODE_CACHE - 1)];
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
    if (t->code_type != 0 && get_u64(co, L->ob_type) != t->code_type)
        return REMORA_ECORRUPT;
    code_fp_span(L, &fp_off, &fp_len);
    if (fp_off + fp_len > need)
        return REMORA_ECORRUPT;
    if (e->addr == addr && memcmp(e->fp, co + fp_off, fp_len) == 0) {
        *out = e;
        return REMORA_OK;
    }

    memset(&fresh, 0, sizeof fresh);
    fresh.addr = addr;
    memcpy(fresh.fp, co + fp_off, fp_len);
    memset(fresh.lc_addr, 0xff, sizeof fresh.lc_addr);
    fresh.firstlineno = get_i32(co, L->co_firstlineno);
    err = intern_str(c, p, L, get_u64(co, L->co_filename), &fresh.file);
    if (!err)
        err = intern_str(c, p, L, get_u64(co, L->minor >= 11 ? L->co_qualname : L->co_name),
                         &fresh.function);
    if (!err)
        err = pybytes_read(p, L, get_u64(co, L->co_linetable), UNW_MAX_LINETABLE,
                           &fresh.linetable, &fresh.linetable_len);
    if (err) {
        free(fresh.linetable);
        return err;
    }
    entry_clear(e);
    *e = fresh;
    *out = e;
    return REMORA_OK;
}

int code_line(unw_code_t *code, const py_layout_t *L, int addrq)
{
    int line, i;

    /* a frame that has not started (3.9/3.10 f_lasti -1, 3.11+ before the first
     * instruction) is on its first line; -1 also marks an empty slot of the cache */
    if (addrq < 0)
        return code->firstlineno;
    for (i = 0; i < 4; i++)
        if (code->lc_addr[i] == addrq)
            return code->lc_line[i];
    switch (L->lines_kind) {
    case PY_LINES_LNOTAB:
        line = lt_lnotab_line(code->linetable, code->linetable_len, code->firstlineno, addrq);
        break;
    case PY_LINES_310:
        line = lt_310_line(code->linetable, code->linetable_len, code->firstlineno, addrq);
        break;
    default:
        line = lt_locations_line(code->linetable, code->linetable_len, code->firstlineno, addrq);
        break;
    }
    code->lc_addr[code->lc_next & 3] = addrq;
    code->lc_line[code->lc_next & 3] = line;
    code->lc_next++;
    return line;
}
