/* unwind/locals_int.h — what locals.c (a frame's slots, names and kinds; each value
 * read twice) and locals_repr.c (a value's objects into repr() text) share. Not for use
 * outside those two files.
 */
#ifndef REMORA_UNWIND_LOCALS_INT_H
#define REMORA_UNWIND_LOCALS_INT_H

#include <stdint.h>

#include "internal.h"

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

/* One read of the target, counted against the value's budget (lr->budget):
 * REMORA_ENOMEM once it is spent. */
int loc_rd(unw_locals_t *lr, uint64_t addr, void *buf, size_t len);
int loc_rd_u64(unw_locals_t *lr, uint64_t addr, uint64_t *v);
/* An object's reference count, from the start of its header h: 0 only once it is freed
 * (a live object, or an immortal one, never has 0). */
uint64_t loc_refcount(const py_layout_t *L, const unsigned char *h);
/* locals_repr.c: the repr of the object at obj, depth containers deep, appended to b
 * (lr->torn set when it met a freed object). */
void loc_value(unw_locals_t *lr, pyr_buf_t *b, uint64_t obj, int depth);

#endif
