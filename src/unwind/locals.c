/* unwind/locals.c — dump --locals: a frame's arguments and local variables, each as the
 * text of its repr(), read from outside.
 *
 * Reads the frame's slots (f_localsplus on 3.9/3.10, localsplus on 3.11+), the code
 * object's names and kinds (co_varnames, co_cellvars, co_freevars before 3.11,
 * co_localsplusnames and co_localspluskinds from 3.11), cells, and each value's objects.
 * Types are told by comparing ob_type with the target's own type objects (py_target_t).
 * Every read is bounded (LOC_* below, UNW_LOCAL_* in unwind.h); a value that cannot be
 * read whole says <unreadable>. A live target runs on: each value is read twice and
 * taken when both readings agree (and its slot held the same object), else read again,
 * LOC_TRIES times, then shown as <moving>.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "remora.h"
#include "internal.h"

#define CO_VARARGS 0x4          /* code flags, the same in every release */
#define CO_VARKEYWORDS 0x8
#define CO_FAST_HIDDEN 0x10     /* 3.12+: a comprehension's inlined variable */
#define CO_FAST_LOCAL 0x20
#define CO_FAST_CELL 0x40
#define CO_FAST_FREE 0x80

#define LOC_TRIES 3             /* readings of a value that moved while read */
#define LOC_SCAN 4              /* dict and set entries scanned per item shown, at most */
#define LOC_TPNAME 64           /* bytes of a type's name */
#define LOC_HEAD 128            /* bytes first read of a value */

typedef struct slot {
    uint64_t at;                /* where the slot is in the target (re-read: moved?) */
    uint64_t bits;              /* what it held */
    uint32_t name_off;          /* in text */
    unsigned kind;
    int deref;                  /* a cell slot: show what the cell holds */
} slot_t;

struct unw_locals {
    proc_t *p;
    const py_target_t *t;
    const py_layout_t *L;
    unsigned budget;            /* reads left for this value */
    uint64_t open[UNW_LOCAL_DEPTH + 1];   /* containers being shown (recursion) */
    int nopen;
    int torn;                   /* this reading met a freed object (reference count 0) */
    slot_t slots[UNW_LOCALS_MAX];
    unw_local_t out[UNW_LOCALS_MAX];
    char *text;                 /* names and values, back to back */
    size_t tlen, tcap;
    char val[UNW_LOCAL_VALUE];
    char val2[UNW_LOCAL_VALUE];         /* the first of two readings of a value */
    uint32_t cps[UNW_LOCAL_STR];
    unsigned char raw[UNW_LOCAL_STR * 4];
};

int unw_locals_new(proc_t *p, const py_target_t *t, unw_locals_t **out)
{
    unw_locals_t *lr = calloc(1, sizeof *lr);

    *out = NULL;
    if (lr == NULL)
        return REMORA_ENOMEM;
    lr->p = p;
    lr->t = t;
    lr->L = &t->layout;
    *out = lr;
    return REMORA_OK;
}

void unw_locals_free(unw_locals_t *lr)
{
    if (lr == NULL)
        return;
    free(lr->text);
    free(lr);
}

/* One read of the target, counted against the value's budget. */
static int rd(unw_locals_t *lr, uint64_t addr, void *buf, size_t len)
{
    if (lr->budget == 0)
        return REMORA_ENOMEM;
    lr->budget--;
    if (addr == 0 || addr + len < addr)
        return REMORA_EFAULT;
    return proc_read(lr->p, addr, buf, len);
}

static int rd_u64(unw_locals_t *lr, uint64_t addr, uint64_t *v)
{
    return rd(lr, addr, v, 8);
}

/* Appends s[0..n) and a NUL to text; returns its offset, or -1. */
static int64_t text_add(unw_locals_t *lr, const char *s, size_t n)
{
    size_t at = lr->tlen;

    if (remora_grow((void **)&lr->text, &lr->tcap, lr->tlen + n + 1, 1))
        return -1;
    memcpy(lr->text + at, s, n);
    lr->text[at + n] = '\0';
    lr->tlen += n + 1;
    return (int64_t)at;
}

static void value(unw_locals_t *lr, pyr_buf_t *b, uint64_t obj, int depth);

/* A str object's repr. */
static void show_str(unw_locals_t *lr, pyr_buf_t *b, uint64_t obj, const unsigned char *h)
{
    pyo_str_t s;
    unsigned kind;
    int64_t length;
    uint64_t hdr, keep, i;

    if (pyo_str(lr->L, h, LOC_HEAD, &s) != REMORA_OK) {
        pyr_puts(b, "<unreadable>");
        return;
    }
    kind = s.kind;
    length = s.length;
    hdr = s.data;
    keep = (uint64_t)length > UNW_LOCAL_STR ? UNW_LOCAL_STR : (uint64_t)length;
    if (keep > 0 && rd(lr, obj + hdr, lr->raw, keep * kind) != REMORA_OK) {
        pyr_puts(b, "<unreadable>");
        return;
    }
    for (i = 0; i < keep; i++) {
        if (kind == 1) {
            lr->cps[i] = lr->raw[i];
        } else if (kind == 2) {
            uint16_t v;
            memcpy(&v, lr->raw + 2 * i, 2);
            lr->cps[i] = v;
        } else {
            memcpy(&lr->cps[i], lr->raw + 4 * i, 4);
        }
    }
    pyr_str(b, lr->cps, keep, (uint64_t)length > keep);
}

static void show_bytes(unw_locals_t *lr, pyr_buf_t *b, uint64_t obj, const unsigned char *h)
{
    int64_t size;
    uint64_t keep;

    memcpy(&size, h + lr->L->bytes_size, 8);
    if (size < 0) {
        pyr_puts(b, "<unreadable>");
        return;
    }
    keep = (uint64_t)size > UNW_LOCAL_STR ? UNW_LOCAL_STR : (uint64_t)size;
    if (keep > 0 && rd(lr, obj + lr->L->bytes_sval, lr->raw, keep) != REMORA_OK) {
        pyr_puts(b, "<unreadable>");
        return;
    }
    pyr_bytes(b, lr->raw, keep, (uint64_t)size > keep);
}

/* An int's repr (or a bool's, is_bool). */
static void show_long(unw_locals_t *lr, pyr_buf_t *b, uint64_t obj, const unsigned char *h,
                      int is_bool)
{
    const py_layout_t *L = lr->L;
    uint32_t digits[PYR_INT_DIGITS];
    uint64_t n;
    int neg;

    if (pyo_long_digits(L, h, &n, &neg) != REMORA_OK) {
        pyr_puts(b, "<unreadable>");
        return;
    }
    if (is_bool) {
        pyr_puts(b, n == 0 ? "False" : "True");
        return;
    }
    if (n > PYR_INT_DIGITS) {
        char tmp[64];
        snprintf(tmp, sizeof tmp, "<int of %llu 30-bit digits>", (unsigned long long)n);
        pyr_puts(b, tmp);
        return;
    }
    if (n > 0 && rd(lr, obj + L->long_digits, digits, n * 4) != REMORA_OK) {
        pyr_puts(b, "<unreadable>");
        return;
    }
    if (pyr_int(b, digits, n, neg) != 0)
        pyr_puts(b, "<unreadable>");
}

/* <TYPE object at 0x...>, TYPE the type's tp_name (escaped). */
static void show_other(unw_locals_t *lr, pyr_buf_t *b, uint64_t obj, uint64_t type)
{
    char name[LOC_TPNAME + 1], tmp[48];
    uint64_t at = 0;
    size_t i;

    memset(name, 0, sizeof name);
    /* a type is an object whose type is PyType_Type or a subclass of it (a metaclass:
     * Py_TPFLAGS_TYPE_SUBCLASS in its flags): an object freed and its memory reused while
     * read names anything else (locals/moving on 3.9 under ASan: `<0 object at ...>`, the
     * "type" an int whose "tp_name" read "0") */
    if (lr->t->type_type != 0) {
        uint64_t meta = 0, flags = 0;
        if (rd_u64(lr, type + lr->L->ob_type, &meta) != REMORA_OK ||
            (meta != lr->t->type_type &&
             (meta == 0 || meta % 8 != 0 || lr->L->tp_flags == 0 ||
              rd_u64(lr, meta + lr->L->tp_flags, &flags) != REMORA_OK || !(flags & (UINT64_C(1) << 31))))) {
            lr->torn = 1;
            pyr_puts(b, "<unreadable>");
            return;
        }
    }
    if (rd_u64(lr, type + lr->L->tp_name, &at) != REMORA_OK || at == 0 ||
        (rd(lr, at, name, LOC_TPNAME) != REMORA_OK &&
         rd(lr, at, name, 8) != REMORA_OK)) {     /* a short name at a page's end */
        pyr_puts(b, "<unreadable>");
        return;
    }
    name[LOC_TPNAME] = '\0';
    if (name[0] == '\0') {
        lr->torn = 1;               /* no type has an empty name: memory reused */
        pyr_puts(b, "<unreadable>");
        return;
    }
    pyr_puts(b, "<");
    for (i = 0; name[i] != '\0'; i++) {
        unsigned char c = (unsigned char)name[i];
        if (c < 0x20 || c >= 0x7f) {        /* a name is ASCII; anything else escaped */
            snprintf(tmp, sizeof tmp, "\\x%02x", c);
            pyr_puts(b, tmp);
        } else {
            pyr_putn(b, (const char *)&c, 1);
        }
    }
    snprintf(tmp, sizeof tmp, " object at 0x%llx>", (unsigned long long)obj);
    pyr_puts(b, tmp);
}

/* The first items of a sequence of n object pointers at 'items' in the target. */
static void show_items(unw_locals_t *lr, pyr_buf_t *b, uint64_t items, int64_t n, int depth)
{
    uint64_t ptrs[UNW_LOCAL_ITEMS];
    size_t keep = n > UNW_LOCAL_ITEMS ? UNW_LOCAL_ITEMS : (size_t)n, i;

    if (keep > 0 && rd(lr, items, ptrs, keep * 8) != REMORA_OK) {
        pyr_puts(b, "<unreadable>");
        return;
    }
    for (i = 0; i < keep && !b->full; i++) {
        if (i)
            pyr_puts(b, ", ");
        value(lr, b, ptrs[i], depth + 1);
    }
    if ((uint64_t)n > keep)
        pyr_puts(b, ", ...");
}

/* A dict's first items: combined tables (entries hold the values) and split ones
 * (values in ma_values, in entry order). */
static void show_dict(unw_locals_t *lr, pyr_buf_t *b, uint64_t obj, const unsigned char *h,
                      int depth)
{
    const py_layout_t *L = lr->L;
    uint64_t keys = get_u64(h, L->dict_keys), values = get_u64(h, L->dict_values);
    uint64_t ent[UNW_LOCAL_ITEMS * LOC_SCAN * 3];
    uint64_t vals[UNW_LOCAL_ITEMS * LOC_SCAN];
    unsigned char kh[48];
    pyo_keys_t dk;
    size_t scan, i, shown = 0;

    int64_t used;

    memcpy(&used, h + L->ob_head, 8);   /* ma_used, after the object header, in all */
    if (used == 0) {
        pyr_puts(b, "{}");              /* (3.11+: the shared empty keys, not a table) */
        return;
    }
    if (used < 0 || L->dk_layout == 0 || keys == 0 || keys % 8 || rd(lr, keys, kh, sizeof kh) != REMORA_OK) {
        pyr_puts(b, "<unreadable>");
        return;
    }
    if (pyo_keys(L, kh, sizeof kh, &dk) != REMORA_OK)
        goto bad;
    scan = (size_t)dk.nent < UNW_LOCAL_ITEMS * LOC_SCAN ? (size_t)dk.nent : UNW_LOCAL_ITEMS * LOC_SCAN;
    if (scan > 0 && rd(lr, keys + dk.entries, ent, scan * dk.esz) != REMORA_OK)
        goto bad;
    if (values != 0 && scan > 0 && rd(lr, values + L->dv_values, vals, scan * 8) != REMORA_OK)
        goto bad;
    pyr_puts(b, "{");
    for (i = 0; i < scan && !b->full; i++) {
        const unsigned char *e = (const unsigned char *)ent + i * dk.esz;
        uint64_t k = get_u64(e, dk.koff), v = values ? vals[i] : get_u64(e, dk.voff);
        if (k == 0 || v == 0)
            continue;               /* a deleted entry */
        if (shown == UNW_LOCAL_ITEMS)
            break;
        if (shown++)
            pyr_puts(b, ", ");
        value(lr, b, k, depth + 1);
        pyr_puts(b, ": ");
        value(lr, b, v, depth + 1);
    }
    if ((int64_t)shown < used)
        pyr_puts(b, shown ? ", ..." : "...");
    pyr_puts(b, "}");
    return;
bad:
    pyr_puts(b, "<unreadable>");
    (void)obj;
}

/* A set's or frozenset's first items, in table order (as repr() shows them). */
static void show_set(unw_locals_t *lr, pyr_buf_t *b, const unsigned char *h, int frozen, int depth)
{
    const py_layout_t *L = lr->L;
    int64_t used, mask;
    uint64_t table = get_u64(h, L->set_table), ent[UNW_LOCAL_ITEMS * LOC_SCAN * 2];
    size_t scan, i, shown = 0;

    memcpy(&used, h + L->set_used, 8);
    memcpy(&mask, h + L->set_mask, 8);
    if (used < 0 || mask < 0 || used > mask + 1 || table == 0 || table % 8) {
        pyr_puts(b, "<unreadable>");
        return;
    }
    if (used == 0) {
        pyr_puts(b, frozen ? "frozenset()" : "set()");
        return;
    }
    scan = (uint64_t)mask + 1 < UNW_LOCAL_ITEMS * LOC_SCAN ? (size_t)mask + 1 : UNW_LOCAL_ITEMS * LOC_SCAN;
    if (rd(lr, table, ent, scan * 16) != REMORA_OK) {
        pyr_puts(b, "<unreadable>");
        return;
    }
    pyr_puts(b, frozen ? "frozenset({" : "{");
    for (i = 0; i < scan && !b->full; i++) {
        uint64_t key = ent[2 * i];
        int64_t hash = (int64_t)ent[2 * i + 1];
        if (key == 0 || hash == -1)
            continue;               /* empty, or a dummy left by a removal */
        if (shown == UNW_LOCAL_ITEMS || (int64_t)shown == used)
            break;
        if (shown++)
            pyr_puts(b, ", ");
        value(lr, b, key, depth + 1);
    }
    if ((int64_t)shown < used)
        pyr_puts(b, shown ? ", ..." : "...");
    pyr_puts(b, frozen ? "})" : "}");
}

/* Opens a container for recursion checks: 0 if it is already being shown. */
static int open_obj(unw_locals_t *lr, uint64_t obj)
{
    int i;

    for (i = 0; i < lr->nopen; i++)
        if (lr->open[i] == obj)
            return 0;
    if (lr->nopen >= (int)(sizeof lr->open / sizeof lr->open[0]))
        return 0;                   /* (the depth bound keeps it from filling) */
    lr->open[lr->nopen++] = obj;
    return 1;
}

/* An object's reference count, from the start of its header: 0 only once it is freed
 * (a live object, or an immortal one, never has 0; a free list keeps it 0 until the
 * memory is reused). */
static uint64_t refcount(const py_layout_t *L, const unsigned char *h)
{
    uint64_t rc = get_u64(h, 0);
    return L->rc_low_half ? (uint32_t)rc | (rc >> 32 ? 1 : 0) : rc;
}

/* The repr of the object at obj, depth containers deep. */
static void value(unw_locals_t *lr, pyr_buf_t *b, uint64_t obj, int depth)
{
    const py_target_t *t = lr->t;
    const py_layout_t *L = lr->L;
    unsigned char h[LOC_HEAD];
    uint64_t type;
    int64_t n;
    int err;

    if (b->full)
        return;
    if (obj == 0 || obj % 8 != 0) {
        lr->torn |= obj == 0;       /* an item not set yet: a container being built */
        pyr_puts(b, "<unreadable>");
        return;
    }
    if (obj == t->none && t->none != 0) {
        pyr_puts(b, "None");
        return;
    }
    err = rd(lr, obj, h, sizeof h);
    if (err == REMORA_EFAULT)
        err = rd(lr, obj, h, 32);       /* a small object at a mapping's end */
    if (err == REMORA_ENOMEM) {
        b->full = 1;                    /* out of reads: the value ends in "..." */
        return;
    }
    if (err != REMORA_OK) {
        pyr_puts(b, "<unreadable>");
        return;
    }
    type = get_u64(h, L->ob_type);
    if (refcount(L, h) == 0) {
        lr->torn = 1;               /* freed since its container was read: moving */
        pyr_puts(b, "<unreadable>");
    } else if (type == 0 || type % 8 != 0) {
        pyr_puts(b, "<unreadable>");
    } else if (type == t->long_type || type == t->bool_type) {
        show_long(lr, b, obj, h, type == t->bool_type);
    } else if (type == t->float_type) {
        double d;
        memcpy(&d, h + L->float_fval, 8);
        pyr_float(b, d);
    } else if (type == t->str_type) {
        show_str(lr, b, obj, h);
    } else if (type == t->bytes_type) {
        show_bytes(lr, b, obj, h);
    } else if (type == t->tuple_type || type == t->list_type || type == t->dict_type ||
               type == t->set_type || type == t->frozenset_type) {
        int is_list = type == t->list_type, is_tuple = type == t->tuple_type;
        int is_dict = type == t->dict_type;
        const char *closed = is_list ? "[...]" : is_tuple ? "(...)" : is_dict ? "{...}" :
                             type == t->set_type ? "set(...)" : "frozenset(...)";
        if (depth >= UNW_LOCAL_DEPTH || !open_obj(lr, obj)) {
            pyr_puts(b, closed);    /* too deep, or itself inside itself */
            return;
        }
        memcpy(&n, h + L->ob_size, 8);
        if (is_list || is_tuple) {
            uint64_t items = is_list ? get_u64(h, L->list_items) : obj + L->tuple_items;
            if (n < 0 || (is_list && n > 0 && (items == 0 || items % 8))) {
                pyr_puts(b, "<unreadable>");
            } else {
                unsigned char again[32];
                pyr_puts(b, is_list ? "[" : "(");
                show_items(lr, b, items, n, depth);
                pyr_puts(b, is_list ? "]" : n == 1 ? ",)" : ")");
                /* the same list (count, type, size, items) after its items were read */
                if (is_list && (rd(lr, obj, again, sizeof again) != REMORA_OK ||
                                refcount(L, again) == 0 || memcmp(again + 8, h + 8, 24) != 0))
                    lr->torn = 1;
            }
        } else if (is_dict) {
            show_dict(lr, b, obj, h, depth);
        } else {
            show_set(lr, b, h, type == t->frozenset_type, depth);
        }
        lr->nopen--;
    } else {
        show_other(lr, b, obj, type);
    }
}

/* What a slot's bits point to: 3.14+ slots are _PyStackRefs (tag bits masked; a tagged
 * int is told apart). Returns the object, or 0 with *tagged set for a tagged int. */
static uint64_t slot_obj(const py_layout_t *L, uint64_t bits, int *tagged)
{
    *tagged = 0;
    if (!L->tagged_executable)
        return bits;
    if ((bits & 3) == 3) {
        *tagged = 1;
        return 0;
    }
    return bits & ~(uint64_t)3;
}

/* The text of slot s (NULL: unbound) into lr->val. */
static const char *slot_text(unw_locals_t *lr, const slot_t *s)
{
    pyr_buf_t b;
    int tagged;
    uint64_t obj = slot_obj(lr->L, s->bits, &tagged);

    pyr_init(&b, lr->val, sizeof lr->val);
    lr->budget = UNW_LOCAL_READS;
    lr->nopen = 0;
    lr->torn = 0;
    if (tagged) {
        char tmp[32];
        snprintf(tmp, sizeof tmp, "%lld", (long long)((int64_t)s->bits >> 2));
        pyr_puts(&b, tmp);
        return pyr_end(&b);
    }
    if (obj == 0)
        return NULL;
    if (s->deref) {
        unsigned char h[32];
        uint64_t type;
        if (rd(lr, obj, h, sizeof h) != REMORA_OK) {
            pyr_puts(&b, "<unreadable>");
            return pyr_end(&b);
        }
        type = get_u64(h, lr->L->ob_type);
        if (refcount(lr->L, h) == 0)
            lr->torn = 1;
        if (type == lr->t->cell_type && lr->t->cell_type != 0) {
            obj = get_u64(h, lr->L->cell_ref);
            if (obj == 0)
                return NULL;        /* an empty cell: unbound */
        }
    }
    value(lr, &b, obj, 0);
    return pyr_end(&b);
}

/* The names of tuple 'tup' into slots[first..first+n) (n at most what fits). */
static int tuple_names(unw_locals_t *lr, uint64_t tup, size_t first, size_t max, size_t *n,
                       size_t *total)
{
    unsigned char h[32];
    int64_t size;
    uint64_t ptrs[64];
    size_t i, k;
    int err;

    *n = 0;
    *total = 0;
    if (tup == 0)
        return REMORA_OK;
    if ((err = proc_read(lr->p, tup, h, sizeof h)) != REMORA_OK)
        return err;
    memcpy(&size, h + lr->L->ob_size, 8);
    if (size < 0 || size > (1 << 20) || (lr->t->tuple_type && get_u64(h, lr->L->ob_type) != lr->t->tuple_type))
        return REMORA_ECORRUPT;
    *total = (size_t)size;
    if ((size_t)size > max - first)
        size = (int64_t)(max - first);
    for (i = 0; i < (size_t)size; i += 64) {
        size_t m = (size_t)size - i < 64 ? (size_t)size - i : 64;
        if ((err = proc_read(lr->p, tup + lr->L->tuple_items + i * 8, ptrs, m * 8)) != REMORA_OK)
            return err;
        for (k = 0; k < m; k++) {
            char name[UNW_MAX_NAME * 4 + 1];
            size_t len = 0;
            int64_t off;
            if (pystr_read(lr->p, lr->L, ptrs[k], name, sizeof name, &len) != REMORA_OK) {
                memcpy(name, "<unreadable>", 13);
                len = 12;
            }
            if ((off = text_add(lr, name, len)) < 0)
                return REMORA_ENOMEM;
            lr->slots[first + i + k].name_off = (uint32_t)off;
        }
    }
    *n = (size_t)size;
    return REMORA_OK;
}

static int read_i32(unw_locals_t *lr, uint64_t addr, int32_t *v)
{
    return proc_read(lr->p, addr, v, 4);
}

/* 3.11+: one slot per name, its kind in co_localspluskinds: lr->slots[0..*n) of the
 * frame at addr (names, kinds, where each is), *total the names there are. 0 or a code. */
static int slots_311(unw_locals_t *lr, uint64_t code, uint64_t addr, size_t nargs, size_t *n,
                     size_t *total)
{
    const py_layout_t *L = lr->L;
    uint64_t names, kinds;
    unsigned char kb[UNW_LOCALS_MAX];
    int64_t ksize;
    size_t i;
    int err;

    if ((err = proc_read(lr->p, code + L->co_localsplusnames, &names, 8)) ||
        (err = proc_read(lr->p, code + L->co_localspluskinds, &kinds, 8)))
        return err;
    if ((err = tuple_names(lr, names, 0, UNW_LOCALS_MAX, n, total)) != REMORA_OK)
        return err;
    if ((err = proc_read(lr->p, kinds + L->bytes_size, &ksize, 8)) != REMORA_OK)
        return err;
    if (ksize < 0 || (size_t)ksize != *total)
        return REMORA_ECORRUPT;
    if (*n > 0 && (err = proc_read(lr->p, kinds + L->bytes_sval, kb, *n)) != REMORA_OK)
        return err;
    for (i = 0; i < *n; i++) {
        lr->slots[i].at = addr + L->fr_localsplus + i * 8;
        lr->slots[i].kind = (kb[i] & CO_FAST_CELL ? UNW_LOCAL_CELL : 0) |
                            (kb[i] & CO_FAST_FREE ? UNW_LOCAL_FREE : 0) |
                            (i < nargs ? UNW_LOCAL_ARG : 0) |
                            (kb[i] & CO_FAST_HIDDEN ? UNW_LOCAL_HIDDEN : 0);
        lr->slots[i].deref = (kb[i] & (CO_FAST_CELL | CO_FAST_FREE)) != 0;
    }
    return REMORA_OK;
}

/* 3.9/3.10: co_nlocals locals (co_varnames), then cells, then free variables; as
 * slots_311. */
static int slots_39(unw_locals_t *lr, uint64_t code, uint64_t addr, size_t nargs, size_t *n,
                    size_t *total)
{
    const py_layout_t *L = lr->L;
    uint64_t tv[3];
    int32_t nlocals;
    size_t got[3], tot[3], start = 0, g, i;
    int err;

    if ((err = proc_read(lr->p, code + L->co_varnames, &tv[0], 8)) ||
        (err = proc_read(lr->p, code + L->co_cellvars, &tv[1], 8)) ||
        (err = proc_read(lr->p, code + L->co_freevars, &tv[2], 8)) ||
        (err = read_i32(lr, code + L->co_nlocals, &nlocals)))
        return err;
    for (g = 0; g < 3; g++) {
        if ((err = tuple_names(lr, tv[g], start, UNW_LOCALS_MAX, &got[g], &tot[g])) != REMORA_OK)
            return err;
        if (g == 0 && (nlocals < 0 || (size_t)nlocals != tot[0]))
            return REMORA_ECORRUPT;
        for (i = start; i < start + got[g]; i++) {
            lr->slots[i].kind = g == 1 ? UNW_LOCAL_CELL : g == 2 ? UNW_LOCAL_FREE :
                                i < nargs ? UNW_LOCAL_ARG : 0;
            lr->slots[i].deref = g > 0;
        }
        /* the slots follow the names only while every name before was kept */
        for (i = start; i < start + got[g]; i++)
            lr->slots[i].at = got[0] == tot[0] && (g < 2 || got[1] == tot[1]) ?
                              addr + L->fr_localsplus + i * 8 : 0;
        start += got[g];
        *total += tot[g];
    }
    *n = start;
    return REMORA_OK;
}

/* 3.9/3.10: an argument that a closure uses lives in its cell (its own slot NULL):
 * shown once, as an argument and a cell, where the argument is. */
static void cells_as_args(unw_locals_t *lr, size_t n, size_t nargs)
{
    size_t i, k;

    for (i = 0; i < n; i++) {
        if (!(lr->slots[i].kind & UNW_LOCAL_CELL))
            continue;
        for (k = 0; k < nargs && k < n; k++)
            if ((lr->slots[k].kind & UNW_LOCAL_ARG) && lr->slots[k].bits == 0 &&
                !(lr->slots[k].kind & UNW_LOCAL_CELL) &&
                strcmp(lr->text + lr->slots[k].name_off, lr->text + lr->slots[i].name_off) == 0) {
                lr->slots[k] = lr->slots[i];
                lr->slots[k].kind |= UNW_LOCAL_ARG;
                lr->slots[i].kind |= UNW_LOCAL_HIDDEN;
                break;
            }
    }
}

/* Each of lr->slots[0..n)'s values into lr->out[0..*k) (offsets into lr->text), read
 * again while its slot moved under it. 0 or REMORA_ENOMEM. */
static int read_values(unw_locals_t *lr, size_t n, size_t *kout)
{
    size_t i, k = 0;

    for (i = 0; i < n; i++) {
        slot_t *s = &lr->slots[i];
        const char *v = NULL;
        int64_t voff = -1;
        int tries;
        if (s->kind & UNW_LOCAL_HIDDEN)
            continue;
        /* a value is taken when two readings in a row give the same text with the slot
         * unchanged between them (freed objects come back at the same addresses: the
         * slot alone proves nothing); else read again, then <moving> */
        for (tries = 0; tries < LOC_TRIES; tries++) {
            uint64_t again;
            const char *first;
            /* the slot as it is now (the frame's read may be some values old) */
            if (s->at != 0 && proc_read(lr->p, s->at, &again, 8) == REMORA_OK)
                s->bits = again;
            first = slot_text(lr, s);
            int same_slot, torn = lr->torn;
            if (first != NULL)
                snprintf(lr->val2, sizeof lr->val2, "%s", first);
            v = slot_text(lr, s);
            torn |= lr->torn;
            same_slot = s->at == 0 || proc_read(lr->p, s->at, &again, 8) != REMORA_OK ||
                        again == s->bits;
            if (same_slot && !torn && (first == NULL) == (v == NULL) &&
                (v == NULL || strcmp(v, lr->val2) == 0))
                break;
            v = UNW_MOVING;
        }
        if (v != NULL && (voff = text_add(lr, v, strlen(v))) < 0)
            return REMORA_ENOMEM;
        lr->out[k].kind = s->kind;
        lr->out[k].name = (const char *)(uintptr_t)s->name_off;
        lr->out[k].value = voff < 0 ? NULL : (const char *)(uintptr_t)(uint64_t)voff;
        lr->out[k].has_value = voff >= 0;
        k++;
    }
    *kout = k;
    return REMORA_OK;
}

int unw_locals_read(unw_locals_t *lr, const unw_frame_t *f, const unw_local_t **out,
                    size_t *nout, size_t *more)
{
    const py_layout_t *L = lr->L;
    uint64_t code = f->code, addr = f->addr, check, bits[UNW_LOCALS_MAX];
    int32_t argcount = 0, kwonly = 0, flags = 0;
    size_t n = 0, total = 0, nargs, i, k;
    int err;

    *out = NULL;
    *nout = 0;
    *more = 0;
    lr->tlen = 0;
    if (L->fr_localsplus == 0 || L->co_argcount == 0)
        return REMORA_EVERSION;
    if (f->native || addr == 0 || code == 0)
        return REMORA_EUSAGE;
    /* the frame still runs the code it was walked with (else it moved since) */
    if ((err = proc_read(lr->p, addr + L->fr_code, &check, 8)) != REMORA_OK)
        return err;
    if ((check & ~(uint64_t)(L->tagged_executable ? 7 : 0)) != code)
        return REMORA_ECORRUPT;
    if ((err = read_i32(lr, code + L->co_argcount, &argcount)) ||
        (err = read_i32(lr, code + L->co_kwonlyargcount, &kwonly)) ||
        (err = read_i32(lr, code + L->co_flags, &flags)))
        return err;
    if (argcount < 0 || kwonly < 0 || argcount > 65536 || kwonly > 65536)
        return REMORA_ECORRUPT;
    nargs = (size_t)argcount + (size_t)kwonly + !!(flags & CO_VARARGS) + !!(flags & CO_VARKEYWORDS);

    err = L->co_localsplusnames != 0 ? slots_311(lr, code, addr, nargs, &n, &total) :
                                        slots_39(lr, code, addr, nargs, &n, &total);
    if (err != REMORA_OK)
        return err;
    *more = total - n;

    /* the slots, in one read (3.9/3.10: as far as the names were all kept) */
    for (k = 0; k < n && lr->slots[k].at != 0; k++)
        ;
    if (k > 0 && (err = proc_read(lr->p, addr + L->fr_localsplus, bits, k * 8)) != REMORA_OK)
        return err;
    for (i = 0; i < n; i++)
        lr->slots[i].bits = i < k ? bits[i] : 0;

    if (L->co_localsplusnames == 0)
        cells_as_args(lr, n, nargs);
    if ((err = read_values(lr, n, &k)) != REMORA_OK)
        return err;
    /* offsets into text to pointers, now that it no longer moves */
    for (i = 0; i < k; i++) {
        lr->out[i].name = lr->text + (uintptr_t)lr->out[i].name;
        lr->out[i].value = lr->out[i].has_value ? lr->text + (uintptr_t)lr->out[i].value : NULL;
    }
    /* arguments first, in their order; then the rest in slot order */
    {
        unw_local_t tmp[UNW_LOCALS_MAX];
        size_t o = 0;
        for (i = 0; i < k; i++)
            if (lr->out[i].kind & UNW_LOCAL_ARG)
                tmp[o++] = lr->out[i];
        for (i = 0; i < k; i++)
            if (!(lr->out[i].kind & UNW_LOCAL_ARG))
                tmp[o++] = lr->out[i];
        memcpy(lr->out, tmp, k * sizeof *tmp);
    }
    *out = lr->out;
    *nout = k;
    return REMORA_OK;
}
