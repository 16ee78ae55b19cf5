/* unwind/locals.c — dump --locals: a frame's arguments and local variables, each as the
 * text of its repr(), read from outside.
 *
 * Reads the frame's slots (f_localsplus on 3.9/3.10, localsplus on 3.11+), the code
 * object's names and kinds (co_varnames, co_cellvars, co_freevars before 3.11,
 * co_localsplusnames and co_localspluskinds from 3.11) and cells; each value's objects
 * are read into its text by locals_repr.c. Every read is bounded (LOC_* in
 * locals_int.h, UNW_LOCAL_* in unwind.h); a value that cannot be
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
#include "locals_int.h"

#define CO_VARARGS 0x4          /* code flags, the same in every release */
#define CO_VARKEYWORDS 0x8
#define CO_FAST_HIDDEN 0x10     /* 3.12+: a comprehension's inlined variable */
#define CO_FAST_LOCAL 0x20
#define CO_FAST_CELL 0x40
#define CO_FAST_FREE 0x80

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
        if (loc_rd(lr, obj, h, sizeof h) != REMORA_OK) {
            pyr_puts(&b, "<unreadable>");
            return pyr_end(&b);
        }
        type = get_u64(h, lr->L->ob_type);
        if (loc_refcount(lr->L, h) == 0)
            lr->torn = 1;
        if (type == lr->t->cell_type && lr->t->cell_type != 0) {
            obj = get_u64(h, lr->L->cell_ref);
            if (obj == 0)
                return NULL;        /* an empty cell: unbound */
        }
    }
    loc_value(lr, &b, obj, 0);
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
