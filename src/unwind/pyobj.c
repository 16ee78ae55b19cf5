/* unwind/pyobj.c — Python objects read from outside: one reader per object kind.
 *
 * The decoders (pyo_keys, pyo_long_digits, pyo_long, pyo_str, pyo_str_is_head,
 * pyo_type, pyo_inst, pyo_seq; pyo_str_cp in internal.h) read bytes already copied from
 * the target and nothing else: every reader of objects (locals, thread names, tasks and
 * the slow readers below) decodes a dict's keys, an int, a str's header and text, a
 * tuple's or list's size and where an instance keeps its attributes through them, with
 * the layout's facts (py_layout_t) and one set of bounds.
 *
 * The readers, one per container (a dict's items, a set's table, a tuple's or list's
 * items): open (the header decoded and every length checked, the entries capped), load
 * (one or two reads into the caller's buffer, through a pyo_rd_t: proc_read, or locals'
 * counted reads), next (entry by entry, empty ones left out). Thread names, locals,
 * tasks and the slow readers below walk dicts and sets through them (but thread_names.c's
 * scan of _active's whole room and tasks_running.c's per-sample look-up, over pyo_keys).
 *
 * The slow readers, for readers that run now and then (unw_tasks(), never per sample):
 * a module's dict through sys.modules, a dict's items and a str key's value, an
 * instance's attribute, a set's keys, a list's items. Every object's type is checked
 * against the target's own type objects where remora knows them (dict, str, int, module);
 * every count is bounded (PYO_MAX_ITEMS) and every read checked.
 */
#include <stdlib.h>
#include <string.h>

#include "remora.h"
#include "internal.h"

#define PYO_KEY_HEAD 128            /* bytes of a key str read to compare it (header and
                                     * a name of up to 79 ASCII characters) */
#define PYO_MAX_BASICSIZE 65536     /* an instance's size, at most */
#define TPF_INLINE_VALUES (1u << 2) /* Py_TPFLAGS_INLINE_VALUES (3.13+) */
#define TPF_MANAGED_DICT (1u << 4)  /* Py_TPFLAGS_MANAGED_DICT (3.11+) */
#define TPF_HEAPTYPE (1u << 9)      /* Py_TPFLAGS_HEAPTYPE */

static int aligned(uint64_t a)
{
    return a != 0 && a % 8 == 0;
}

/* ---- decoders: bytes already read ----------------------------------------------- */

int pyo_keys(const py_layout_t *L, const unsigned char *kh, size_t got, pyo_keys_t *k)
{
    int64_t nent;

    memset(k, 0, sizeof *k);
    if (L->dk_layout == 0 || L->dk_nentries + 8 > got || got < 16)
        return REMORA_ECORRUPT;
    nent = get_i64(kh, L->dk_nentries);
    if (L->dk_layout == PY_DK_SIZED) {
        uint64_t size = get_u64(kh, 8);
        if (size < 8 || size > ((uint64_t)1 << PYO_KEYS_LOG2_MAX) || (size & (size - 1)) != 0)
            return REMORA_ECORRUPT;
        k->size = size;
        k->entries = L->dk_indices + size * (size <= 0xff ? 1 : size <= 0xffff ? 2 : 4);
        k->esz = 24;
    } else {
        unsigned log2_size = get_u8(kh, 8), log2_ib = get_u8(kh, 9), kind = get_u8(kh, 10);
        if (log2_size < 3 || log2_size > PYO_KEYS_LOG2_MAX || log2_ib < log2_size ||
            log2_ib > log2_size + 3 || kind > 2)
            return REMORA_ECORRUPT;
        k->size = (uint64_t)1 << log2_size;
        k->kind = kind;
        k->entries = L->dk_indices + ((uint64_t)1 << log2_ib);
        k->esz = kind == 0 ? 24 : 16;
    }
    if (nent < 0 || (uint64_t)nent > k->size)
        return REMORA_ECORRUPT;
    k->nent = nent;
    k->koff = k->esz == 24 ? 8 : 0;
    k->voff = k->koff + 8;
    return REMORA_OK;
}

int pyo_long_digits(const py_layout_t *L, const unsigned char *h, uint64_t *nd, int *neg)
{
    uint64_t tag = get_u64(h, L->ob_size);     /* lv_tag, or ob_size before 3.12 */

    *nd = 0;
    *neg = 0;
    if (L->long_tagged) {
        if ((tag & 3) == 3)
            return REMORA_ECORRUPT;
        *neg = (tag & 3) == 2;
        *nd = (tag & 3) == 1 ? 0 : tag >> 3;
    } else {
        *neg = (int64_t)tag < 0;
        *nd = *neg ? (uint64_t)0 - tag : tag;
    }
    return REMORA_OK;
}

int pyo_long(const unwinder_t *u, const unsigned char *h, size_t got, uint64_t *v)
{
    const py_layout_t *L = &u->target->layout;
    uint64_t nd, x = 0;
    int neg, i;

    *v = 0;
    if (u->target->long_type == 0 || L->ob_type + 8 > got || L->ob_size + 8 > got ||
        get_u64(h, L->ob_type) != u->target->long_type ||
        pyo_long_digits(L, h, &nd, &neg) != REMORA_OK || neg || nd > 3 ||
        L->long_digits + 4 * nd > got)
        return REMORA_ECORRUPT;
    for (i = (int)nd - 1; i >= 0; i--) {
        uint32_t d = get_u32(h, L->long_digits + 4 * (uint64_t)i);
        if (d >= (1u << 30) || (i == 2 && d >= 16))
            return REMORA_ECORRUPT;
        x = x << 30 | d;
    }
    *v = x;
    return REMORA_OK;
}

int pyo_str(const py_layout_t *L, const unsigned char *h, size_t got, pyo_str_t *s)
{
    uint32_t state;

    if (L->u_state + 4 > got || L->u_length + 8 > got)
        return REMORA_ECORRUPT;
    state = get_u32(h, L->u_state);
    s->length = get_i64(h, L->u_length);
    /* GIL builds: interned:2, kind:3, compact:1, ascii:1 */
    s->kind = (state >> 2) & 7;
    s->ascii = (state >> 6) & 1;
    s->data = s->ascii ? L->u_ascii_size : L->u_compact_size;
    if (!((state >> 5) & 1) || (s->kind != 1 && s->kind != 2 && s->kind != 4) ||
        (s->ascii && s->kind != 1) || s->length < 0)
        return REMORA_ECORRUPT;
    return REMORA_OK;
}

int pyo_str_is_head(const unwinder_t *u, const unsigned char *h, size_t got, const char *want)
{
    const py_layout_t *L = &u->target->layout;
    size_t wl = strlen(want);
    pyo_str_t s;

    if (L->u_ascii_size + wl > got || L->ob_type + 8 > got ||
        get_u64(h, L->ob_type) != u->target->str_type || pyo_str(L, h, got, &s) != REMORA_OK ||
        !s.ascii || s.length != (int64_t)wl)
        return 0;
    return memcmp(h + s.data, want, wl) == 0;
}

int pyo_type(const py_layout_t *L, const unsigned char *th, size_t got, pyo_type_t *ty)
{
    memset(ty, 0, sizeof *ty);
    if (L->ht_cached_keys == 0 || L->ht_cached_keys + 8 > got)
        return REMORA_ECORRUPT;
    ty->flags = get_u64(th, L->tp_flags);
    ty->basicsize = get_u64(th, L->tp_basicsize);
    ty->dictoffset = get_i64(th, L->tp_dictoffset);
    ty->keys = get_u64(th, L->ht_cached_keys);
    ty->managed = L->inst_dict != PY_INST_DICTOFFSET && (ty->flags & TPF_MANAGED_DICT);
    if (!(ty->flags & TPF_HEAPTYPE) || ty->basicsize < L->ob_size || ty->basicsize > PYO_MAX_BASICSIZE)
        return REMORA_ECORRUPT;     /* not a heap type: no attributes of its own */
    return REMORA_OK;
}

int pyo_inst(const py_layout_t *L, const pyo_type_t *ty, uint64_t obj, const unsigned char *pre,
             uint64_t *dict, uint64_t *vals, uint64_t *dict_at)
{
    *dict = *vals = *dict_at = 0;
    if (ty->managed) {
        uint64_t dv = get_u64(pre, L->inst_pre_dict);
        switch (L->inst_dict) {
        case PY_INST_MANAGED:
            *vals = get_u64(pre, L->inst_pre_values);
            *dict = dv;
            break;
        case PY_INST_TAGGED:
            if (dv & 1)
                *vals = dv + 1;     /* stored as the values' address - 1 */
            else
                *dict = dv;
            break;
        default:                    /* PY_INST_INLINE */
            *dict = dv;
            if (dv == 0 && (ty->flags & TPF_INLINE_VALUES))
                *vals = obj + ty->basicsize;
            break;
        }
        return REMORA_OK;
    }
    if (ty->dictoffset > 0 && ty->dictoffset < PYO_MAX_BASICSIZE) {
        *dict_at = obj + (uint64_t)ty->dictoffset;
        return REMORA_OK;
    }
    return REMORA_ECORRUPT;
}

/* ---- the readers: dicts, sets, tuples and lists ---------------------------------- */

static int rd_proc(void *p, uint64_t addr, void *buf, size_t len)
{
    return proc_read(p, addr, buf, len);
}

pyo_rd_t pyo_rd_proc(proc_t *p)
{
    pyo_rd_t rd = { rd_proc, p };
    return rd;
}

/* Does [at, at + len) wrap the address space? */
static int wraps(uint64_t at, uint64_t len)
{
    return at + len < at;
}

int pyo_keys_open(const pyo_rd_t *rd, const py_layout_t *L, uint64_t keys, uint64_t values,
                  size_t max, pyo_dict_t *d)
{
    unsigned char kh[48];
    int err;

    memset(d, 0, sizeof *d);
    if (!aligned(keys) || values % 8 != 0 || L->dk_layout == 0)
        return REMORA_ECORRUPT;
    if ((err = rd->read(rd->ctx, keys, kh, sizeof kh)) != REMORA_OK)
        return err;
    if (pyo_keys(L, kh, sizeof kh, &d->k) != REMORA_OK)
        return REMORA_ECORRUPT;
    d->keys = keys;
    d->values = values != 0 ? values + L->dv_values : 0;
    d->n = (uint64_t)d->k.nent < max ? (size_t)d->k.nent : max;
    if (wraps(keys, d->k.entries + d->n * d->k.esz) ||
        (values != 0 && wraps(values, L->dv_values + d->n * 8)))
        return REMORA_ECORRUPT;
    d->need = d->n * (d->k.esz + (d->values != 0 ? 8 : 0));
    return REMORA_OK;
}

int pyo_dict_open(const pyo_rd_t *rd, const py_target_t *T, uint64_t dict, size_t max,
                  pyo_dict_t *d)
{
    const py_layout_t *L = &T->layout;
    unsigned char h[48];
    int err;

    memset(d, 0, sizeof *d);
    if (!aligned(dict) || L->dk_layout == 0 || L->dict_keys + 8 > sizeof h ||
        L->dict_values + 8 > sizeof h)
        return REMORA_ECORRUPT;
    if ((err = rd->read(rd->ctx, dict, h, sizeof h)) != REMORA_OK)
        return err;
    if (T->dict_type == 0 || get_u64(h, L->ob_type) != T->dict_type)
        return REMORA_ECORRUPT;
    return pyo_keys_open(rd, L, get_u64(h, L->dict_keys), get_u64(h, L->dict_values), max, d);
}

int pyo_dict_load(const pyo_rd_t *rd, pyo_dict_t *d, unsigned char *buf)
{
    int err = REMORA_OK;

    d->buf = NULL;                  /* nothing to walk unless all was read */
    d->i = 0;
    if (d->n == 0)
        return REMORA_OK;
    err = rd->read(rd->ctx, d->keys + d->k.entries, buf, d->n * d->k.esz);
    if (err == REMORA_OK && d->values != 0)
        err = rd->read(rd->ctx, d->values, buf + d->n * d->k.esz, d->n * 8);
    if (err == REMORA_OK)
        d->buf = buf;
    return err;
}

int pyo_dict_next(pyo_dict_t *d, pyo_item_t *it)
{
    while (d->buf != NULL && d->i < d->n) {
        size_t i = d->i++;
        const unsigned char *e = d->buf + i * d->k.esz;
        uint64_t key = get_u64(e, d->k.koff);
        if (key == 0)
            continue;               /* never used, or deleted (3.11+) */
        it->key = key;
        if (d->values != 0) {
            it->value = get_u64(d->buf, d->n * d->k.esz + i * 8);
            it->slot = d->values + i * 8;
        } else {
            it->value = get_u64(e, d->k.voff);
            it->slot = d->keys + d->k.entries + i * d->k.esz + d->k.voff;
        }
        it->index = i;
        return 1;
    }
    return 0;
}

int pyo_set_open(const py_layout_t *L, const unsigned char *h, size_t got, size_t max,
                 pyo_set_t *s)
{
    uint64_t mask;

    memset(s, 0, sizeof *s);
    if (L->set_table == 0 || L->set_mask + 8 > got || L->set_table + 8 > got ||
        L->set_used + 8 > got)
        return REMORA_ECORRUPT;
    mask = get_u64(h, L->set_mask);
    s->table = get_u64(h, L->set_table);
    s->used = get_i64(h, L->set_used);
    /* PySet_MINSIZE is 8: a mask of 7 at least, 2^k - 1 */
    if (mask < 7 || mask >= ((uint64_t)1 << PYO_SET_LOG2_MAX) || ((mask + 1) & mask) != 0 ||
        s->used < 0 || (uint64_t)s->used > mask + 1 || !aligned(s->table))
        return REMORA_ECORRUPT;
    s->slots = mask + 1;
    s->n = s->slots < max ? (size_t)s->slots : max;
    s->need = s->n * 16;
    if (wraps(s->table, s->need))
        return REMORA_ECORRUPT;
    return REMORA_OK;
}

int pyo_set_load(const pyo_rd_t *rd, pyo_set_t *s, unsigned char *buf)
{
    int err;

    s->buf = NULL;                  /* nothing to walk unless all was read */
    s->i = 0;
    if (s->n == 0)
        return REMORA_OK;
    if ((err = rd->read(rd->ctx, s->table, buf, s->need)) == REMORA_OK)
        s->buf = buf;
    return err;
}

int pyo_set_next(pyo_set_t *s, uint64_t *key)
{
    while (s->buf != NULL && s->i < s->n) {
        size_t i = s->i++;
        uint64_t k = get_u64(s->buf, i * 16);
        if (k == 0 || get_i64(s->buf, i * 16 + 8) == -1)
            continue;               /* empty, or the dummy a removal leaves */
        *key = k;
        return 1;
    }
    return 0;
}

int pyo_seq(const py_layout_t *L, uint64_t obj, const unsigned char *h, size_t got, int is_list,
            uint64_t *items, int64_t *n)
{
    *items = 0;
    *n = 0;
    if (L->ob_size + 8 > got || (is_list ? L->list_items == 0 || L->list_items + 8 > got :
                                           L->tuple_items == 0))
        return REMORA_ECORRUPT;
    *n = get_i64(h, L->ob_size);
    *items = is_list ? get_u64(h, L->list_items) : obj + L->tuple_items;
    if (*n < 0 || (is_list && *n > 0 && !aligned(*items))) {
        *n = 0;
        return REMORA_ECORRUPT;
    }
    return REMORA_OK;
}

/* ---- the slow readers ----------------------------------------------------------- */

/* Reads iov[0..n) in one vectored read; when that fails, each half again, down to single
 * segments: a bad address among n costs about 2 log2(n) reads more, not n. A segment
 * that fails is read again up to the end of its first page (callers read more than a
 * small object may hold: one that ends just before an unmapped page is read whole that
 * way), the rest zeroed; one that fails there too is zeroed (its type then matches
 * nothing). 0, REMORA_ENOPROC, REMORA_ENOMEM or REMORA_EPERM. */
int pyo_readv_zero(proc_t *p, const proc_iov_t *iov, size_t n)
{
    int err;

    if (n == 0)
        return REMORA_OK;
    err = proc_readv(p, iov, n);
    if (err == REMORA_OK || err == REMORA_ENOPROC || err == REMORA_ENOMEM || err == REMORA_EPERM)
        return err;
    if (n == 1) {
        size_t in_page = 4096 - (size_t)(iov[0].addr % 4096);
        memset(iov[0].buf, 0, iov[0].len);
        if (in_page < iov[0].len) {
            proc_iov_t head = { iov[0].addr, iov[0].buf, in_page };
            err = proc_readv(p, &head, 1);
            if (err == REMORA_ENOPROC || err == REMORA_ENOMEM || err == REMORA_EPERM)
                return err;
            if (err != REMORA_OK)
                memset(iov[0].buf, 0, in_page);
        }
        return REMORA_OK;
    }
    if ((err = pyo_readv_zero(p, iov, n / 2)) != REMORA_OK)
        return err;
    return pyo_readv_zero(p, iov + n / 2, n - n / 2);
}

int pyo_dict_items(unwinder_t *u, uint64_t dict, uint64_t *keys, uint64_t *vals, size_t max,
                   size_t *n)
{
    pyo_rd_t rd = pyo_rd_proc(u->p);
    pyo_dict_t d;
    pyo_item_t it;
    unsigned char *buf;
    size_t got = 0;
    int err;

    *n = 0;
    if ((err = pyo_dict_open(&rd, u->target, dict, PYO_MAX_ITEMS, &d)) != REMORA_OK)
        return err;
    if ((uint64_t)d.k.nent > PYO_MAX_ITEMS)
        return REMORA_ENOMEM;
    if (d.n == 0)
        return REMORA_OK;
    if ((buf = malloc(d.need)) == NULL)
        return REMORA_ENOMEM;
    if ((err = pyo_dict_load(&rd, &d, buf)) != REMORA_OK) {
        free(buf);
        return err;
    }
    while (got < max && pyo_dict_next(&d, &it)) {
        if (!aligned(it.key) || it.value == 0)
            continue;
        keys[got] = it.key;
        vals[got] = it.value;
        got++;
    }
    free(buf);
    *n = got;
    return REMORA_OK;
}

/* The index among keys[0..n) of the str key 'want' (all keys' heads in one vectored
 * read), or -1. */
static ssize_t key_index(unwinder_t *u, const uint64_t *keys, size_t n, const char *want)
{
    size_t len = u->target->layout.u_ascii_size + strlen(want) + 1, i;
    unsigned char *buf;
    proc_iov_t *iov;
    ssize_t found = -1;

    if (n == 0 || len > PYO_KEY_HEAD)
        return -1;
    buf = calloc(n, PYO_KEY_HEAD);
    iov = malloc(n * sizeof *iov);
    if (buf == NULL || iov == NULL) {
        free(buf);
        free(iov);
        return -1;
    }
    for (i = 0; i < n; i++) {
        iov[i].addr = keys[i];
        iov[i].buf = buf + i * PYO_KEY_HEAD;
        iov[i].len = len;
    }
    if (proc_readv(u->p, iov, n) != REMORA_OK) {
        /* one bad key: each alone */
        for (i = 0; i < n; i++)
            if (proc_read(u->p, keys[i], buf + i * PYO_KEY_HEAD, len) != REMORA_OK)
                memset(buf + i * PYO_KEY_HEAD, 0, len);
    }
    for (i = 0; i < n && found < 0; i++)
        if (pyo_str_is_head(u, buf + i * PYO_KEY_HEAD, len, want))
            found = (ssize_t)i;
    free(buf);
    free(iov);
    return found;
}

int pyo_dict_get(unwinder_t *u, uint64_t dict, const char *key, uint64_t *val)
{
    uint64_t *keys, *vals;
    size_t n;
    ssize_t at;
    int err;

    *val = 0;
    keys = malloc(PYO_MAX_ITEMS * sizeof *keys);
    vals = malloc(PYO_MAX_ITEMS * sizeof *vals);
    if (keys == NULL || vals == NULL) {
        free(keys);
        free(vals);
        return REMORA_ENOMEM;
    }
    err = pyo_dict_items(u, dict, keys, vals, PYO_MAX_ITEMS, &n);
    if (err == REMORA_OK) {
        at = key_index(u, keys, n, key);
        if (at >= 0)
            *val = vals[at];
        else
            err = REMORA_EFAULT;        /* no such key */
    }
    free(keys);
    free(vals);
    return err;
}

int pyo_module_dict(unwinder_t *u, uint64_t interp, const char *name, uint64_t *dict)
{
    const py_layout_t *L = &u->target->layout;
    uint64_t modules, mod;
    unsigned char h[32];
    int err;

    *dict = 0;
    if (L->is_modules == 0 || u->target->module_type == 0)
        return REMORA_ECORRUPT;
    if ((err = proc_read_u64(u->p, interp + L->is_modules, &modules)) != REMORA_OK)
        return err;
    if ((err = pyo_dict_get(u, modules, name, &mod)) != REMORA_OK)
        return err;
    if (!aligned(mod) || (err = proc_read(u->p, mod, h, sizeof h)) != REMORA_OK)
        return aligned(mod) ? err : REMORA_ECORRUPT;
    if (get_u64(h, L->ob_type) != u->target->module_type)
        return REMORA_ECORRUPT;
    *dict = get_u64(h, L->md_dict);
    return aligned(*dict) ? REMORA_OK : REMORA_ECORRUPT;
}

int pyo_attr(unwinder_t *u, uint64_t obj, const char *name, uint64_t *val)
{
    const py_layout_t *L = &u->target->layout;
    unsigned char pre[PYO_PRE_MAX + 64], th[1024];
    uint64_t type, dict, vals, dict_at;
    pyo_type_t ty;
    int err;

    *val = 0;
    if (!aligned(obj) || obj < L->inst_pre || L->inst_pre > PYO_PRE_MAX || L->ob_type + 8 > 64 ||
        L->ht_cached_keys + 8 > sizeof th)
        return REMORA_ECORRUPT;
    if ((err = proc_read(u->p, obj - L->inst_pre, pre, L->inst_pre + L->ob_type + 8)) != REMORA_OK)
        return err;
    type = get_u64(pre, L->inst_pre + L->ob_type);
    if (!aligned(type) || (err = proc_read(u->p, type, th, L->ht_cached_keys + 8)) != REMORA_OK)
        return aligned(type) ? err : REMORA_ECORRUPT;
    if (pyo_type(L, th, L->ht_cached_keys + 8, &ty) != REMORA_OK ||
        pyo_inst(L, &ty, obj, pre, &dict, &vals, &dict_at) != REMORA_OK)
        return REMORA_ECORRUPT;
    if (dict_at != 0 && (err = proc_read_u64(u->p, dict_at, &dict)) != REMORA_OK)
        return err;
    if (dict != 0)
        return pyo_dict_get(u, dict, name, val);
    if (!aligned(vals) || !aligned(ty.keys))
        return REMORA_EFAULT;
    {
        /* the values of the type's shared keys: the key's index, then values[index] */
        pyo_rd_t rd = pyo_rd_proc(u->p);
        uint64_t *keys;
        pyo_dict_t d;
        pyo_item_t it;
        size_t n;
        ssize_t at;
        unsigned char *ent;

        if (L->dk_layout != PY_DK_LOG2)
            return REMORA_ECORRUPT;
        if ((err = pyo_keys_open(&rd, L, ty.keys, 0, PYO_MAX_ATTRS, &d)) != REMORA_OK)
            return err;
        if (d.k.nent > PYO_MAX_ATTRS)
            return REMORA_ECORRUPT;
        n = d.n;
        keys = calloc(n + 1, sizeof *keys);     /* an unused entry's key stays 0 */
        ent = malloc(d.need + 1);
        err = keys == NULL || ent == NULL ? REMORA_ENOMEM : pyo_dict_load(&rd, &d, ent);
        if (err != REMORA_OK) {
            free(ent);
            free(keys);
            return err;
        }
        while (pyo_dict_next(&d, &it))
            keys[it.index] = it.key;
        free(ent);
        at = key_index(u, keys, n, name);
        free(keys);
        if (at < 0)
            return REMORA_EFAULT;
        {
            unsigned char vh[8];
            if (L->dv_values >= 8) {            /* 3.13+: the header's 'valid' byte */
                if ((err = proc_read(u->p, vals, vh, 8)) != REMORA_OK)
                    return err;
                if (vh[3] == 0)
                    return REMORA_EFAULT;
            }
            if ((err = proc_read_u64(u->p, vals + L->dv_values + 8 * (uint64_t)at, val)) != REMORA_OK)
                return err;
            return *val != 0 ? REMORA_OK : REMORA_EFAULT;   /* a shared key this one lacks */
        }
    }
}

int pyo_str_is(unwinder_t *u, uint64_t addr, const char *want)
{
    unsigned char h[PYO_KEY_HEAD];
    size_t len = u->target->layout.u_ascii_size + strlen(want) + 1;

    if (!aligned(addr) || len > sizeof h || proc_read(u->p, addr, h, len) != REMORA_OK)
        return 0;
    return pyo_str_is_head(u, h, len, want);
}

int pyo_set_keys(unwinder_t *u, uint64_t set, uint64_t *keys, size_t max, size_t *n)
{
    pyo_rd_t rd = pyo_rd_proc(u->p);
    unsigned char h[48];
    pyo_set_t st;
    uint64_t key;
    unsigned char *buf;
    size_t k = 0;
    int err;

    *n = 0;
    if (!aligned(set))
        return REMORA_ECORRUPT;
    if ((err = proc_read(u->p, set, h, sizeof h)) != REMORA_OK)
        return err;
    if (pyo_set_open(&u->target->layout, h, sizeof h, PYO_MAX_SET, &st) != REMORA_OK ||
        st.slots > PYO_MAX_SET)
        return REMORA_ECORRUPT;
    if ((buf = malloc(st.need)) == NULL)
        return REMORA_ENOMEM;
    if ((err = pyo_set_load(&rd, &st, buf)) != REMORA_OK) {
        free(buf);
        return err;
    }
    while (k < max && pyo_set_next(&st, &key))
        if (aligned(key))
            keys[k++] = key;
    free(buf);
    *n = k;
    return REMORA_OK;
}

int pyo_list_items(unwinder_t *u, uint64_t list, uint64_t *items, size_t max, size_t *n)
{
    const py_layout_t *L = &u->target->layout;
    unsigned char h[40];
    int64_t size;
    uint64_t at;
    int err;

    *n = 0;
    if (!aligned(list) || L->ob_size + 8 > sizeof h || L->list_items == 0 || L->list_items + 8 > sizeof h)
        return REMORA_ECORRUPT;
    if ((err = proc_read(u->p, list, h, sizeof h)) != REMORA_OK)
        return err;
    if (pyo_seq(L, list, h, sizeof h, 1, &at, &size) != REMORA_OK)
        return REMORA_ECORRUPT;
    if ((uint64_t)size > max)
        size = (int64_t)max;
    if (size == 0)
        return REMORA_OK;
    if ((err = proc_read(u->p, at, items, (size_t)size * 8)) != REMORA_OK)
        return err;
    *n = (size_t)size;
    return REMORA_OK;
}
