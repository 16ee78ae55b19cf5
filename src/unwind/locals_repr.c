/* unwind/locals_repr.c — dump --locals: a value's objects read from the target into
 * the text of its repr(): ints, floats, str, bytes, tuples, lists, dicts, sets, and
 * <TYPE object at 0x...> for the rest. Types are told by comparing ob_type with the
 * target's own type objects; each object is decoded by pyobj.c. Every read is counted
 * against the value's budget (loc_rd), containers are bounded (UNW_LOCAL_ITEMS,
 * UNW_LOCAL_DEPTH) and a container already being shown is not shown again.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "remora.h"
#include "internal.h"
#include "locals_int.h"

/* One read of the target, counted against the value's budget. */
int loc_rd(unw_locals_t *lr, uint64_t addr, void *buf, size_t len)
{
    if (lr->budget == 0)
        return REMORA_ENOMEM;
    lr->budget--;
    if (addr == 0 || addr + len < addr)
        return REMORA_EFAULT;
    return proc_read(lr->p, addr, buf, len);
}

int loc_rd_u64(unw_locals_t *lr, uint64_t addr, uint64_t *v)
{
    return loc_rd(lr, addr, v, 8);
}

static int rd_counted(void *lr, uint64_t addr, void *buf, size_t len)
{
    return loc_rd(lr, addr, buf, len);
}

/* The readers of pyobj.c, reading through loc_rd (each read counted). */
static pyo_rd_t rd_of(unw_locals_t *lr)
{
    pyo_rd_t rd = { rd_counted, lr };
    return rd;
}

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
    if (keep > 0 && loc_rd(lr, obj + hdr, lr->raw, keep * kind) != REMORA_OK) {
        pyr_puts(b, "<unreadable>");
        return;
    }
    for (i = 0; i < keep; i++)
        lr->cps[i] = pyo_str_cp(lr->raw, kind, i);
    pyr_str(b, lr->cps, keep, (uint64_t)length > keep);
}

static void show_bytes(unw_locals_t *lr, pyr_buf_t *b, uint64_t obj, const unsigned char *h)
{
    int64_t size = get_i64(h, lr->L->bytes_size);
    uint64_t keep;

    if (size < 0) {
        pyr_puts(b, "<unreadable>");
        return;
    }
    keep = (uint64_t)size > UNW_LOCAL_STR ? UNW_LOCAL_STR : (uint64_t)size;
    if (keep > 0 && loc_rd(lr, obj + lr->L->bytes_sval, lr->raw, keep) != REMORA_OK) {
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
    if (n > 0 && loc_rd(lr, obj + L->long_digits, digits, n * 4) != REMORA_OK) {
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
        if (loc_rd_u64(lr, type + lr->L->ob_type, &meta) != REMORA_OK ||
            (meta != lr->t->type_type &&
             (meta == 0 || meta % 8 != 0 || lr->L->tp_flags == 0 ||
              loc_rd_u64(lr, meta + lr->L->tp_flags, &flags) != REMORA_OK || !(flags & (UINT64_C(1) << 31))))) {
            lr->torn = 1;
            pyr_puts(b, "<unreadable>");
            return;
        }
    }
    if (loc_rd_u64(lr, type + lr->L->tp_name, &at) != REMORA_OK || at == 0 ||
        (loc_rd(lr, at, name, LOC_TPNAME) != REMORA_OK &&
         loc_rd(lr, at, name, 8) != REMORA_OK)) {     /* a short name at a page's end */
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

    if (keep > 0 && loc_rd(lr, items, ptrs, keep * 8) != REMORA_OK) {
        pyr_puts(b, "<unreadable>");
        return;
    }
    for (i = 0; i < keep && !b->full; i++) {
        if (i)
            pyr_puts(b, ", ");
        loc_value(lr, b, ptrs[i], depth + 1);
    }
    if ((uint64_t)n > keep)
        pyr_puts(b, ", ...");
}

/* A dict's first items: combined tables (entries hold the values) and split ones
 * (values in ma_values, in entry order). */
static void show_dict(unw_locals_t *lr, pyr_buf_t *b, const unsigned char *h, int depth)
{
    const py_layout_t *L = lr->L;
    uint64_t keys = get_u64(h, L->dict_keys), values = get_u64(h, L->dict_values);
    uint64_t buf[UNW_LOCAL_ITEMS * LOC_SCAN * 4];   /* entries of 24 bytes, values of 8 */
    int64_t used = get_i64(h, L->ob_head);          /* ma_used, after the object header */
    pyo_rd_t rd = rd_of(lr);
    pyo_dict_t d;
    pyo_item_t it;
    size_t shown = 0;

    if (used == 0) {
        pyr_puts(b, "{}");              /* (3.11+: the shared empty keys, not a table) */
        return;
    }
    if (used < 0 || keys == 0 || keys % 8 ||
        pyo_keys_open(&rd, L, keys, values, UNW_LOCAL_ITEMS * LOC_SCAN, &d) != REMORA_OK ||
        d.need > sizeof buf || pyo_dict_load(&rd, &d, (unsigned char *)buf) != REMORA_OK) {
        pyr_puts(b, "<unreadable>");
        return;
    }
    pyr_puts(b, "{");
    while (!b->full && pyo_dict_next(&d, &it)) {
        if (it.value == 0)
            continue;               /* a deleted entry */
        if (shown == UNW_LOCAL_ITEMS)
            break;
        if (shown++)
            pyr_puts(b, ", ");
        loc_value(lr, b, it.key, depth + 1);
        pyr_puts(b, ": ");
        loc_value(lr, b, it.value, depth + 1);
    }
    if ((int64_t)shown < used)
        pyr_puts(b, shown ? ", ..." : "...");
    pyr_puts(b, "}");
}

/* A set's or frozenset's first items, in table order (as repr() shows them). */
static void show_set(unw_locals_t *lr, pyr_buf_t *b, const unsigned char *h, int frozen, int depth)
{
    uint64_t buf[UNW_LOCAL_ITEMS * LOC_SCAN * 2], key;
    pyo_rd_t rd = rd_of(lr);
    pyo_set_t s;
    size_t shown = 0;

    if (pyo_set_open(lr->L, h, LOC_HEAD, UNW_LOCAL_ITEMS * LOC_SCAN, &s) != REMORA_OK) {
        pyr_puts(b, "<unreadable>");
        return;
    }
    if (s.used == 0) {
        pyr_puts(b, frozen ? "frozenset()" : "set()");
        return;
    }
    if (s.need > sizeof buf || pyo_set_load(&rd, &s, (unsigned char *)buf) != REMORA_OK) {
        pyr_puts(b, "<unreadable>");
        return;
    }
    pyr_puts(b, frozen ? "frozenset({" : "{");
    while (!b->full && pyo_set_next(&s, &key)) {
        if (shown == UNW_LOCAL_ITEMS || (int64_t)shown == s.used)
            break;
        if (shown++)
            pyr_puts(b, ", ");
        loc_value(lr, b, key, depth + 1);
    }
    if ((int64_t)shown < s.used)
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
uint64_t loc_refcount(const py_layout_t *L, const unsigned char *h)
{
    uint64_t rc = get_u64(h, 0);
    return L->rc_low_half ? (uint32_t)rc | (rc >> 32 ? 1 : 0) : rc;
}

/* The repr of the object at obj, depth containers deep. */
void loc_value(unw_locals_t *lr, pyr_buf_t *b, uint64_t obj, int depth)
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
    err = loc_rd(lr, obj, h, sizeof h);
    if (err == REMORA_EFAULT)
        err = loc_rd(lr, obj, h, 32);       /* a small object at a mapping's end */
    if (err == REMORA_ENOMEM) {
        b->full = 1;                    /* out of reads: the value ends in "..." */
        return;
    }
    if (err != REMORA_OK) {
        pyr_puts(b, "<unreadable>");
        return;
    }
    type = get_u64(h, L->ob_type);
    if (loc_refcount(L, h) == 0) {
        lr->torn = 1;               /* freed since its container was read: moving */
        pyr_puts(b, "<unreadable>");
    } else if (type == 0 || type % 8 != 0) {
        pyr_puts(b, "<unreadable>");
    } else if (type == t->long_type || type == t->bool_type) {
        show_long(lr, b, obj, h, type == t->bool_type);
    } else if (type == t->float_type) {
        double d;
        memcpy(&d, h + L->float_fval, 8);   /* a double: no integer accessor */
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
        if (is_list || is_tuple) {
            uint64_t items;
            if (pyo_seq(L, obj, h, sizeof h, is_list, &items, &n) != REMORA_OK) {
                pyr_puts(b, "<unreadable>");
            } else {
                unsigned char again[32];
                pyr_puts(b, is_list ? "[" : "(");
                show_items(lr, b, items, n, depth);
                pyr_puts(b, is_list ? "]" : n == 1 ? ",)" : ")");
                /* the same list (count, type, size, items) after its items were read */
                if (is_list && (loc_rd(lr, obj, again, sizeof again) != REMORA_OK ||
                                loc_refcount(L, again) == 0 || memcmp(again + 8, h + 8, 24) != 0))
                    lr->torn = 1;
            }
        } else if (is_dict) {
            show_dict(lr, b, h, depth);
        } else {
            show_set(lr, b, h, type == t->frozenset_type, depth);
        }
        lr->nopen--;
    } else {
        show_other(lr, b, obj, type);
    }
}
