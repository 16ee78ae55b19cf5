/* tests/unit/unit_mem.c — the synthetic target the thread-name and asyncio tests read
 * (unit_threads.c, unit_tasks.c): objects of a 3.9-like layout built in memory of our own
 * from PN_BASE, and a snapshot of it opened as the source an unwinder reads. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proc/proc.h"
#include "unwind/internal.h"
#include "unit.h"

unsigned char *pn_mem;                  /* the target's memory from PN_BASE */
static uint64_t pn_top;                 /* bump allocator */

void pn_put(uint64_t addr, uint64_t v)
{
    memcpy(pn_mem + (addr - PN_BASE), &v, 8);
}

uint64_t pn_alloc(size_t len)
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

uint64_t pn_str(const char *text)
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

uint64_t pn_int(uint64_t v)
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
uint64_t pn_dict(const uint64_t (*e)[3], size_t n, uint64_t size, uint64_t nentries)
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
uint64_t pn_thread(uint64_t name)
{
    uint64_t t = pn_alloc(32), kv[2][3] = { { 11, pn_str("_name"), name }, { 12, pn_str("_ident"), 0 } };
    kv[1][2] = pn_int(5);
    pn_put(t, 1);
    pn_put(t + 8, pn_thread_type);
    pn_put(t + 16, pn_dict(kv, 2, 8, 2));
    return t;
}

/* The snapshot of pn_mem[0..pn_top - PN_BASE) (one MEM record): a source to read. */
proc_t *pn_source(void)
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
uint64_t pn_active;                    /* the last registry's _active dict */

uint64_t pn_registry(const uint64_t (*active)[3], size_t n, uint64_t size, uint64_t nentries)
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

void pn_begin(void)
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
int tn_test_read(uint64_t interp, const uint64_t *idents, size_t n, thread_names_t **pn, proc_t **p,
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

void tn_test_end(thread_names_t *pn, proc_t *p)
{
    tn_free(pn);
    proc_free(p);
}
