/* unwind/pynames.c — Python thread names (threading.Thread.name), read from the target.
 *
 * The main interpreter's sys.modules, its "threading" module's dict, the "_active" dict
 * there ({ident: Thread}, ident the thread state's thread_id) and each Thread's "_name"
 * attribute: a table ident -> name kept between samples. It is read again only every so
 * often (pyn_update: a thread ident not there at the last reading appears, at most every
 * PYN_NEW_NS; otherwise every PYN_REFRESH_NS), never per sample. Bounded: PYN_MAX_ENTRIES
 * threads, PYN_MAX_SCAN entries of any other dict, names cut at PYN_NAME_BYTES. Every
 * object read has its type checked (str, dict, int and module types from the symbols);
 * a registry that fails a check names nothing, and the caller keeps the kernel's names.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "remora.h"
#include "internal.h"

#define PYN_NAME_BYTES (UNW_MAX_NAME + 1)   /* >= 256 code points of any kind */
#define PYN_HEAD 64                         /* bytes first read of each object */
#define PYN_STR_HEAD 192                    /* ... of each name (most fit whole) */
#define PYN_RETRIES 3                       /* readings for a thread not named yet */
#define PYN_SLOTS 64                        /* attributes of a Thread looked through */

typedef struct pyn_name {
    uint64_t ident;
    size_t off;                     /* its name: text + off */
} pyn_name_t;

/* A Thread's type, as this reading found it. */
typedef struct pyn_type {
    uint64_t addr, flags, basicsize, keys;
    int64_t dictoffset;
    int name_idx;                   /* "_name" in its shared keys (-1: not there) */
} pyn_type_t;

#define PYN_TYPES 8

/* One _active entry while it is read. */
typedef struct pyn_item {
    uint64_t key, value;            /* the int and the Thread */
    uint64_t ident;
    uint64_t dict;                  /* its attribute dict (0: none) */
    uint64_t vbase;                 /* its values[] (0: not known) */
    int idx;                        /* "_name" at vbase[idx] */
    uint64_t name;                  /* the str */
    int ok;
} pyn_item_t;

struct pynames {
    pyn_name_t *tab;                /* sorted by ident */
    size_t n, cap;
    char *text;
    size_t used, cap_text;
    uint64_t *seen;                 /* idents asked for at the last reading (sorted) */
    size_t nseen, cap_seen;
    int64_t last_ns;
    int done;                       /* read at least once */
    int retries;                    /* readings since the last new ident, for unnamed ones */
    uint64_t k_threading, k_active, k_name;   /* key str objects matched before */
    pyn_item_t *items;              /* PYN_MAX_ENTRIES */
    uint64_t (*kv)[3];              /* a dict's (key, value, index) */
    size_t cap_kv;
    unsigned char *buf;             /* reads land here */
    size_t cap_buf;
    proc_iov_t *iov;
    size_t cap_iov;
    pyn_type_t types[PYN_TYPES];
    size_t ntypes;
    uint64_t readings;
};

static int64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

pynames_t *pyn_new(void)
{
    pynames_t *pn = calloc(1, sizeof *pn);

    if (pn == NULL)
        return NULL;
    pn->items = malloc(PYN_MAX_ENTRIES * sizeof *pn->items);
    if (pn->items == NULL) {
        free(pn);
        return NULL;
    }
    return pn;
}

void pyn_free(pynames_t *pn)
{
    if (pn == NULL)
        return;
    free(pn->tab);
    free(pn->text);
    free(pn->seen);
    free(pn->items);
    free(pn->kv);
    free(pn->buf);
    free(pn->iov);
    free(pn);
}

static int buf_need(pynames_t *pn, size_t len)
{
    return remora_grow((void **)&pn->buf, &pn->cap_buf, len, 1) ? REMORA_ENOMEM : REMORA_OK;
}

/* Reads n objects' first 'len' bytes (addrs[i * stride], as uint64_t) into pn->buf,
 * len apart, in one vectored read; when that fails, one by one, a failed one zeroed
 * (its type then matches nothing). Returns 0 or REMORA_ENOMEM / REMORA_ENOPROC. */
static int read_heads(proc_t *p, pynames_t *pn, const uint64_t *addrs, size_t stride, size_t n,
                      size_t len)
{
    size_t i;
    int err;

    if (n == 0)
        return REMORA_OK;
    if (buf_need(pn, n * len) ||
        remora_grow((void **)&pn->iov, &pn->cap_iov, n, sizeof *pn->iov))
        return REMORA_ENOMEM;
    for (i = 0; i < n; i++) {
        pn->iov[i].addr = addrs[i * stride];
        pn->iov[i].buf = pn->buf + i * len;
        pn->iov[i].len = len;
    }
    err = proc_readv(p, pn->iov, n);
    if (err == REMORA_OK)
        return REMORA_OK;
    if (err == REMORA_ENOPROC || err == REMORA_ENOMEM)
        return err;
    for (i = 0; i < n; i++) {
        err = pn->iov[i].addr != 0 && pn->iov[i].addr % 8 == 0 ?
              proc_read(p, pn->iov[i].addr, pn->iov[i].buf, len) : REMORA_EFAULT;
        if (err == REMORA_ENOPROC)
            return err;
        if (err)
            memset(pn->iov[i].buf, 0, len);
    }
    return REMORA_OK;
}

/* Is the str object whose first bytes are head[0..got) the ASCII string 'want'? */
static int head_is(const unwinder_t *u, const unsigned char *head, size_t got, const char *want)
{
    const py_layout_t *L = &u->target->layout;
    size_t wl = strlen(want);
    uint32_t state;
    int64_t length;

    if (L->u_ascii_size + wl > got || L->u_state + 4 > got || L->u_length + 8 > got ||
        get_u64(head, L->ob_type) != u->target->str_type)
        return 0;
    memcpy(&state, head + L->u_state, 4);
    memcpy(&length, head + L->u_length, 8);
    /* compact ASCII: kind 1, compact, ascii */
    if (((state >> 2) & 7) != 1 || !((state >> 5) & 1) || !((state >> 6) & 1) ||
        length != (int64_t)wl)
        return 0;
    return memcmp(head + L->u_ascii_size, want, wl) == 0;
}

/* The entries of the keys object at 'keys' (values from 'values', a values[] array, when
 * not 0): pn->kv[0..*n) = (key, value, index), empty ones left out, at most 'max'
 * entries scanned. 0, REMORA_ECORRUPT, a read error or REMORA_ENOMEM. */
static int keys_items(unwinder_t *u, pynames_t *pn, uint64_t keys, uint64_t values, size_t max,
                      size_t *n)
{
    const py_layout_t *L = &u->target->layout;
    unsigned char h[48];
    uint64_t entries, esz, koff, voff;
    int64_t nent;
    size_t i, k = 0;
    int err;

    *n = 0;
    if (keys == 0 || keys % 8 != 0)
        return REMORA_ECORRUPT;
    if ((err = proc_read(u->p, keys, h, sizeof h)) != REMORA_OK)
        return err;
    memcpy(&nent, h + L->dk_nentries, 8);
    if (L->dk_layout == PY_DK_SIZED) {
        uint64_t size = get_u64(h, 8), width;
        if (size < 8 || size > (1u << 26) || (size & (size - 1)) != 0)
            return REMORA_ECORRUPT;
        width = size <= 0xff ? 1 : size <= 0xffff ? 2 : 4;
        entries = L->dk_indices + size * width;
        esz = 24;
        if (nent < 0 || (uint64_t)nent > size)
            return REMORA_ECORRUPT;
    } else {
        unsigned log2_size = h[8], log2_ib = h[9], kind = h[10];
        if (log2_size < 3 || log2_size > 26 || log2_ib < log2_size || log2_ib > log2_size + 3 ||
            kind > 2)
            return REMORA_ECORRUPT;
        entries = L->dk_indices + ((uint64_t)1 << log2_ib);
        esz = kind == 0 ? 24 : 16;
        if (nent < 0 || (uint64_t)nent > ((uint64_t)1 << log2_size))
            return REMORA_ECORRUPT;
    }
    koff = esz == 24 ? 8 : 0;
    voff = esz == 24 ? 16 : 8;
    if ((size_t)nent > max)
        nent = (int64_t)max;
    if (nent == 0)
        return REMORA_OK;
    if (buf_need(pn, (size_t)nent * (esz + 8)) ||
        remora_grow((void **)&pn->kv, &pn->cap_kv, (size_t)nent, sizeof *pn->kv))
        return REMORA_ENOMEM;
    if ((err = proc_read(u->p, keys + entries, pn->buf, (size_t)nent * esz)) != REMORA_OK)
        return err;
    if (values != 0 &&
        (err = proc_read(u->p, values, pn->buf + (size_t)nent * esz, (size_t)nent * 8)) != REMORA_OK)
        return err;
    for (i = 0; i < (size_t)nent; i++) {
        uint64_t key = get_u64(pn->buf, i * esz + koff);
        uint64_t val = values != 0 ? get_u64(pn->buf, (size_t)nent * esz + i * 8) :
                       get_u64(pn->buf, i * esz + voff);
        if (key == 0 || key % 8 != 0)
            continue;
        pn->kv[k][0] = key;
        pn->kv[k][1] = val;
        pn->kv[k][2] = i;
        k++;
    }
    *n = k;
    return REMORA_OK;
}

/* The items of the dict object at 'dict' (pn->kv, as keys_items). */
static int dict_items(unwinder_t *u, pynames_t *pn, uint64_t dict, size_t max, size_t *n)
{
    const py_layout_t *L = &u->target->layout;
    unsigned char h[48];
    uint64_t values;
    int err;

    *n = 0;
    if (dict == 0 || dict % 8 != 0)
        return REMORA_ECORRUPT;
    if ((err = proc_read(u->p, dict, h, sizeof h)) != REMORA_OK)
        return err;
    if (get_u64(h, L->ob_type) != u->target->dict_type)
        return REMORA_ECORRUPT;
    values = get_u64(h, L->dict_values);
    return keys_items(u, pn, get_u64(h, L->dict_keys), values ? values + L->dv_values : 0, max, n);
}

/* The value under the str key 'want' in pn->kv[0..n) (cache: the key object matched
 * last time, tried first), or 0. *idx: its entry's index. */
static uint64_t kv_find(unwinder_t *u, pynames_t *pn, size_t n, const char *want, uint64_t *cache,
                        int *idx)
{
    size_t i, len = u->target->layout.u_ascii_size + strlen(want);
    uint64_t *addrs;

    for (i = 0; i < n; i++)
        if (*cache != 0 && pn->kv[i][0] == *cache) {
            if (idx)
                *idx = (int)pn->kv[i][2];
            return pn->kv[i][1];
        }
    /* read each key's head (pn->buf is overwritten: copy the keys out first) */
    addrs = malloc(n * sizeof *addrs);
    if (addrs == NULL)
        return 0;
    for (i = 0; i < n; i++)
        addrs[i] = pn->kv[i][0];
    if (read_heads(u->p, pn, addrs, 1, n, len) != REMORA_OK) {
        free(addrs);
        return 0;
    }
    free(addrs);
    for (i = 0; i < n; i++)
        if (head_is(u, pn->buf + i * len, len, want)) {
            *cache = pn->kv[i][0];
            if (idx)
                *idx = (int)pn->kv[i][2];
            return pn->kv[i][1];
        }
    return 0;
}

/* A PyLongObject's value as a u64 (its first bytes in h): 0 when negative, too large or
 * not an int. */
static uint64_t long_value(const unwinder_t *u, const unsigned char *h)
{
    const py_layout_t *L = &u->target->layout;
    uint64_t tag = get_u64(h, 16), v = 0;
    int64_t nd;
    int i;

    if (get_u64(h, L->ob_type) != u->target->long_type)
        return 0;
    if (L->long_tagged) {
        if ((tag & 3) != 0)         /* zero or negative */
            return 0;
        nd = (int64_t)(tag >> 3);
    } else {
        nd = (int64_t)tag;
    }
    if (nd < 1 || nd > 3 || L->long_digits + 4 * (uint64_t)nd > PYN_HEAD)
        return 0;
    for (i = (int)nd - 1; i >= 0; i--) {
        uint32_t d;
        memcpy(&d, h + L->long_digits + 4 * i, 4);
        if (d >= (1u << 30) || (i == 2 && d >= 16))
            return 0;
        v = v << 30 | d;
    }
    return v;
}

/* The type of a Thread (a heap type): flags, basic size, dict offset, and where "_name"
 * lies in the keys its instances share. NULL when it cannot be read. */
static pyn_type_t *thread_type(unwinder_t *u, pynames_t *pn, uint64_t addr)
{
    const py_layout_t *L = &u->target->layout;
    unsigned char h[1024];
    pyn_type_t *ty;
    size_t i, n;
    int idx = -1;

    for (i = 0; i < pn->ntypes; i++)
        if (pn->types[i].addr == addr)
            return &pn->types[i];
    if (pn->ntypes == PYN_TYPES || addr == 0 || addr % 8 != 0 || L->ht_cached_keys + 8 > sizeof h ||
        proc_read(u->p, addr, h, L->ht_cached_keys + 8) != REMORA_OK)
        return NULL;
    ty = &pn->types[pn->ntypes];
    ty->addr = addr;
    ty->flags = get_u64(h, L->tp_flags);
    ty->basicsize = get_u64(h, L->tp_basicsize);
    memcpy(&ty->dictoffset, h + L->tp_dictoffset, 8);
    ty->keys = 0;
    if (!(ty->flags & (1u << 9)) || ty->basicsize < 16 || ty->basicsize > 4096)
        return NULL;                /* not a heap type: not a threading.Thread */
    if (L->inst_dict != PY_INST_DICTOFFSET ? (ty->flags & (1u << 4)) == 0 :
        ty->dictoffset <= 0 || ty->dictoffset + 8 > PYN_HEAD)
        return NULL;                /* no dict where one is looked for */
    ty->keys = get_u64(h, L->ht_cached_keys);
    if (ty->keys != 0 && keys_items(u, pn, ty->keys, 0, PYN_SLOTS, &n) == REMORA_OK)
        kv_find(u, pn, n, "_name", &pn->k_name, &idx);
    ty->name_idx = idx;
    pn->ntypes++;
    return ty;
}

/* The name str of Thread 'it' found through its attribute dict (the slow way). */
static uint64_t name_in_dict(unwinder_t *u, pynames_t *pn, uint64_t dict)
{
    size_t n;

    if (dict_items(u, pn, dict, PYN_SLOTS, &n) != REMORA_OK)
        return 0;
    return kv_find(u, pn, n, "_name", &pn->k_name, NULL);
}

static int cmp_name(const void *a, const void *b)
{
    const pyn_name_t *x = a, *y = b;
    return x->ident < y->ident ? -1 : x->ident > y->ident;
}

/* Reads the registry into pn->tab. 0, or a code: the table is then empty. */
static int pyn_read(unwinder_t *u, pynames_t *pn, uint64_t interp)
{
    const py_layout_t *L = &u->target->layout;
    const py_target_t *t = u->target;
    uint64_t modules, threading, md, active;
    size_t n, i, k, ni;
    int err;

    pn->n = 0;
    pn->used = 0;
    pn->ntypes = 0;
    if (L->dk_layout == 0 || t->str_type == 0 || t->dict_type == 0 || t->long_type == 0 ||
        t->module_type == 0 || interp == 0)
        return REMORA_EVERSION;
    if ((err = proc_read_u64(u->p, interp + L->is_modules, &modules)) != REMORA_OK)
        return err;
    if ((err = dict_items(u, pn, modules, PYN_MAX_SCAN, &n)) != REMORA_OK)
        return err;
    threading = kv_find(u, pn, n, "threading", &pn->k_threading, NULL);
    if (threading == 0 || threading % 8 != 0)
        return REMORA_ECORRUPT;     /* not imported (yet) */
    {
        unsigned char h[32];
        if ((err = proc_read(u->p, threading, h, sizeof h)) != REMORA_OK)
            return err;
        if (get_u64(h, L->ob_type) != t->module_type)
            return REMORA_ECORRUPT;
        md = get_u64(h, L->md_dict);
    }
    if ((err = dict_items(u, pn, md, PYN_MAX_SCAN, &n)) != REMORA_OK)
        return err;
    active = kv_find(u, pn, n, "_active", &pn->k_active, NULL);
    if ((err = dict_items(u, pn, active, PYN_MAX_ENTRIES, &n)) != REMORA_OK)
        return err;
    for (i = 0; i < n; i++) {
        pyn_item_t *it = &pn->items[i];
        memset(it, 0, sizeof *it);
        it->key = pn->kv[i][0];
        it->value = pn->kv[i][1];
    }
    ni = n;
    /* the idents */
    if ((err = read_heads(u->p, pn, &pn->items[0].key, sizeof *pn->items / 8, ni, PYN_HEAD)))
        return err;
    for (i = 0; i < ni; i++)
        pn->items[i].ident = long_value(u, pn->buf + i * PYN_HEAD);
    /* the Thread objects, from 32 bytes before (the managed dict's pointers) */
    for (i = 0; i < ni; i++)
        pn->items[i].vbase = pn->items[i].value % 8 == 0 && pn->items[i].value > 32 ?
                             pn->items[i].value - 32 : 0;
    if ((err = read_heads(u->p, pn, &pn->items[0].vbase, sizeof *pn->items / 8, ni, PYN_HEAD + 32)))
        return err;
    {
        /* the types first: thread_type() reads into pn->buf */
        uint64_t tys[PYN_MAX_ENTRIES];
        unsigned char pre[PYN_MAX_ENTRIES][24];
        for (i = 0; i < ni; i++) {
            const unsigned char *h = pn->buf + i * (PYN_HEAD + 32);
            tys[i] = pn->items[i].ident ? get_u64(h, 32 + L->ob_type) : 0;
            memcpy(pre[i], h, 16);      /* -32, -24 */
            memcpy(pre[i] + 16, h + 32 + 16, 8);   /* +16: 3.9/3.10's usual dict */
        }
        for (i = 0; i < ni; i++) {
            pyn_item_t *it = &pn->items[i];
            pyn_type_t *ty = tys[i] ? thread_type(u, pn, tys[i]) : NULL;
            uint64_t vals = 0, dict = 0;
            it->vbase = 0;
            it->idx = -1;
            if (ty == NULL)
                continue;
            switch (L->inst_dict) {
            case PY_INST_DICTOFFSET:
                if (ty->dictoffset == 16)
                    dict = get_u64(pre[i], 16);
                else if (proc_read_u64(u->p, it->value + (uint64_t)ty->dictoffset, &dict))
                    dict = 0;
                break;
            case PY_INST_MANAGED:
                vals = get_u64(pre[i], 0);
                dict = get_u64(pre[i], 8);
                break;
            case PY_INST_TAGGED: {
                uint64_t dv = get_u64(pre[i], 8);
                if (dv & 1)
                    vals = dv + 1;      /* stored as the values' address - 1 */
                else
                    dict = dv;
                break;
            }
            case PY_INST_INLINE:
                dict = get_u64(pre[i], 8);
                if (dict == 0 && (ty->flags & (1u << 2)))
                    vals = it->value + ty->basicsize;
                break;
            }
            it->dict = dict;
            if (dict == 0 && vals != 0 && ty->name_idx >= 0) {
                it->vbase = vals;
                it->idx = ty->name_idx;
            }
            it->ok = ty->keys != 0;
        }
        /* a dict of the type's shared keys: its values[] names it too */
        for (i = 0; i < ni; i++) {
            pyn_item_t *it = &pn->items[i];
            unsigned char h[48];
            pyn_type_t *ty = NULL;
            size_t j;
            if (it->dict == 0 || it->ident == 0)
                continue;
            for (j = 0; j < pn->ntypes; j++)
                if (pn->types[j].addr == tys[i])
                    ty = &pn->types[j];
            if (ty != NULL && ty->name_idx >= 0 && proc_read(u->p, it->dict, h, sizeof h) == REMORA_OK &&
                get_u64(h, L->ob_type) == t->dict_type && get_u64(h, L->dict_keys) == ty->keys &&
                get_u64(h, L->dict_values) != 0) {
                it->vbase = get_u64(h, L->dict_values);
                it->idx = ty->name_idx;
                it->dict = 0;
            }
        }
    }
    /* the name str pointers: values[idx] (3.13+: after the header, and 'valid') */
    for (i = 0; i < ni; i++) {
        pyn_item_t *it = &pn->items[i];
        if (it->dict != 0 && it->ident != 0)
            it->name = name_in_dict(u, pn, it->dict);
        else if (it->vbase == 0 || it->idx < 0 || it->idx >= PYN_SLOTS)
            it->ident = 0;
    }
    for (i = 0; i < ni; i++) {
        pyn_item_t *it = &pn->items[i];
        unsigned char v[8 + 8 * PYN_SLOTS];
        size_t len = L->dv_values + 8 * (size_t)(it->idx + 1);
        if (it->ident == 0 || it->dict != 0 || it->name != 0)
            continue;
        if (proc_read(u->p, it->vbase, v, len) != REMORA_OK ||
            (L->dv_values >= 8 && v[3] == 0)) {   /* values no longer valid: a dict now */
            it->ident = 0;
            continue;
        }
        it->name = get_u64(v, L->dv_values + 8 * (size_t)it->idx);
    }
    /* the names */
    for (i = 0; i < ni; i++)
        if (pn->items[i].name % 8 != 0)
            pn->items[i].name = 0;
    if ((err = read_heads(u->p, pn, &pn->items[0].name, sizeof *pn->items / 8, ni, PYN_STR_HEAD)))
        return err;
    if (remora_grow((void **)&pn->tab, &pn->cap, ni, sizeof *pn->tab))
        return REMORA_ENOMEM;
    for (i = 0, k = 0; i < ni; i++) {
        pyn_item_t *it = &pn->items[i];
        const unsigned char *h = pn->buf + i * PYN_STR_HEAD;
        char name[PYN_NAME_BYTES];
        size_t len;
        if (it->ident == 0 || it->name == 0 || get_u64(h, L->ob_type) != t->str_type ||
            pystr_from_head(u->p, L, it->name, h, PYN_STR_HEAD, name, sizeof name, &len) != REMORA_OK)
            continue;
        if (remora_grow((void **)&pn->text, &pn->cap_text, pn->used + len + 1, 1))
            return REMORA_ENOMEM;
        memcpy(pn->text + pn->used, name, len + 1);
        pn->tab[k].ident = it->ident;
        pn->tab[k].off = pn->used;
        pn->used += len + 1;
        k++;
    }
    pn->n = k;
    qsort(pn->tab, pn->n, sizeof *pn->tab, cmp_name);
    return REMORA_OK;
}

const char *pyn_lookup(const pynames_t *pn, uint64_t ident)
{
    size_t lo = 0, hi = pn->n;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (pn->tab[mid].ident == ident)
            return pn->text + pn->tab[mid].off;
        if (pn->tab[mid].ident < ident)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

static int seen_has(const pynames_t *pn, uint64_t ident)
{
    return bsearch(&ident, pn->seen, pn->nseen, sizeof *pn->seen, cmp_u64) != NULL;
}

int pyn_update(unwinder_t *u, pynames_t *pn, uint64_t interp, const uint64_t *idents, size_t n,
               int force)
{
    int64_t now = now_ns();
    int fresh = force || !pn->done || now - pn->last_ns >= PYN_REFRESH_NS;
    size_t i;
    int err;

    if (!fresh && now - pn->last_ns >= PYN_NEW_NS) {
        for (i = 0; i < n && !fresh; i++)
            fresh = idents[i] != 0 && !seen_has(pn, idents[i]);
        if (fresh) {
            pn->retries = 0;
        } else if (pn->retries < PYN_RETRIES) {
            /* a thread seen before it was in the registry (threading adds it once the
             * thread runs): asked again a few times, then left to the periodic reading */
            for (i = 0; i < n && !fresh; i++)
                fresh = idents[i] != 0 && pyn_lookup(pn, idents[i]) == NULL;
            pn->retries += fresh;
        }
    }
    if (!fresh)
        return REMORA_OK;
    pn->done = 1;
    pn->last_ns = now;
    pn->readings++;
    err = pyn_read(u, pn, interp);
    if (err) {
        pn->n = 0;                  /* nothing known: the kernel's names */
        if (err == REMORA_ENOPROC || err == REMORA_ENOMEM)
            return err;
    }
    if (remora_grow((void **)&pn->seen, &pn->cap_seen, n, sizeof *pn->seen))
        return REMORA_ENOMEM;
    memcpy(pn->seen, idents, n * sizeof *idents);
    pn->nseen = n;
    qsort(pn->seen, pn->nseen, sizeof *pn->seen, cmp_u64);
    return REMORA_OK;
}

uint64_t pyn_readings(const pynames_t *pn)
{
    return pn->readings;
}
