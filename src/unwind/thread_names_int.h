/* unwind/thread_names_int.h — what thread_names.c (the registry, the tables) and
 * thread_names_follow.c (from an entry to its name) share: the bounds, a reading's items and
 * the reader's state. Not for use outside those two files.
 */
#ifndef REMORA_UNWIND_PYNAMES_INT_H
#define REMORA_UNWIND_PYNAMES_INT_H

#include <stdint.h>

#include "internal.h"

#define TN_NAME_BYTES (UNW_MAX_NAME + 1)   /* >= 256 code points of any kind */
#define TN_HEAD 64                         /* bytes first read of each object */
#define TN_BASICSIZE 4096                  /* a Thread's size, at most */
#define TN_STR_HEAD 192                    /* ... of each name (most fit whole) */
#define TN_RETRIES 3                       /* readings for a thread not named yet */
#define TN_SLOTS 64                        /* attributes of a Thread looked through */
#define TN_CHUNK 4096                      /* _active entries read at once (96 KB) */
#define TN_ESZ 24                          /* an _active entry: hash, key, value */
#define TN_TRIES 4                         /* scans of a registry that moved, per reading */
#ifndef TN_NAME_ROUNDS
#define TN_NAME_ROUNDS 16                  /* a name's slot followed as the thread is renamed */
#endif
#define TN_CANDS 8                         /* ... each round to the strs it last pointed to */
#define TN_MOVING "<moving>"               /* the name of a thread renamed through every round */
#define TN_M61 ((UINT64_C(1) << 61) - 1)   /* an int's hash: its value modulo 2^61 - 1 */

typedef struct tn_name {
    uint64_t ident;
    uint64_t thread;                /* the Thread object it was read from */
    size_t off;                     /* its name: text + off */
    int moving;                     /* TN_MOVING: renamed all the while it was read */
} tn_name_t;

/* Where a reading's names are kept (two: the last reading's, kept for torn threads). */
typedef struct tn_table {
    tn_name_t *tab;                /* sorted by ident */
    size_t n, cap;
    char *text;
    size_t used, cap_text;
} tn_table_t;

/* A Thread's type, as this reading found it. */
typedef struct tn_type {
    uint64_t addr;
    pyo_type_t t;
    int name_idx;                   /* "_name" in its shared keys (-1: not there) */
} tn_type_t;

#define TN_TYPES 8

/* A dict entry: key, value, the address the value was read from, its index. */
typedef struct tn_kv {
    uint64_t key, value, slot;
    size_t index;
} tn_kv_t;

/* A thread asked for, and its _active entry while it is read (one per ident). */
enum { IT_WANTED = 0, IT_FOUND, IT_NAMED, IT_TORN, IT_DONE };

typedef struct tn_item {
    uint64_t hash, ident;           /* sorted by hash */
    int state;                      /* IT_*: IT_NAMED and IT_DONE (no name) are final */
    uint64_t key, value;            /* the int and the Thread */
    uint64_t type;                  /* the Thread's type */
    unsigned char obj[PYO_PRE_MAX + TN_HEAD];  /* its bytes from L->inst_pre before it */
    uint64_t dict;                  /* its attribute dict (0: none) */
    uint64_t vbase;                 /* its values[] (0: not known) */
    int idx;                        /* "_name" at vbase[idx] */
    uint64_t name;                  /* the str */
    uint64_t slot;                  /* where 'name' was read (0: not known) */
    uint64_t a;                     /* the address read for it in the current step */
    int moving;                     /* this reading: renamed through every round */
    uint64_t cand[TN_CANDS];       /* the strs the slot pointed to, the latest first */
    int ncand;
    size_t nb, boff;                /* this round: heads read, where its bytes are */
} tn_item_t;

struct thread_names {
    tn_table_t t[2];               /* t[cur]: the names now; the other, the last reading's */
    int cur;
    uint64_t *seen;                 /* idents asked for at the last reading (sorted) */
    size_t nseen, cap_seen;
    int64_t last_ns;
    int done;                       /* read at least once */
    int retries;                    /* readings since the last new ident, for unnamed ones */
    uint64_t k_threading, k_active, k_name;   /* key str objects matched before */
    tn_item_t *items;              /* one per ident asked for */
    size_t nitems, cap_items;
    unsigned char *ents;            /* TN_CHUNK entries of _active */
    tn_kv_t *kv;                   /* a dict's entries */
    size_t cap_kv;
    unsigned char *buf;             /* reads land here */
    size_t cap_buf;
    proc_iov_t *iov;
    size_t cap_iov;
    tn_type_t types[TN_TYPES];
    size_t ntypes;
    tn_stats_t st;
};

/* Grows pn->buf to len bytes. 0 or REMORA_ENOMEM. */
int tn_buf_need(thread_names_t *pn, size_t len);
/* Reads n objects' first 'len' bytes (addrs[i * stride]) into pn->buf + i * len, one
 * vectored read; an address that is 0, unaligned or unreadable leaves zeros. 0,
 * REMORA_ENOPROC, REMORA_ENOMEM or REMORA_EPERM. */
int tn_read_heads(proc_t *p, thread_names_t *pn, const uint64_t *addrs, size_t stride, size_t n,
                   size_t len);
/* The entries of the keys object at 'keys' (values from the split table 'values', a
 * dict's ma_values, when not 0; pyobj.c's dict reader): pn->kv[0..*n), at most 'max'
 * scanned. 0, REMORA_ECORRUPT, a read error or REMORA_ENOMEM. */
int tn_keys_items(unwinder_t *u, thread_names_t *pn, uint64_t keys, uint64_t values, size_t max,
                   size_t *n);
/* The items of the dict object at 'dict' (pn->kv, as tn_keys_items). */
int tn_dict_items(unwinder_t *u, thread_names_t *pn, uint64_t dict, size_t max, size_t *n);
/* The value under the str key 'want' in pn->kv[0..n) (*cache: the key object matched
 * last time), or 0; *idx its entry's index, *slot where its value was read (either may
 * be NULL). */
uint64_t tn_kv_find(unwinder_t *u, thread_names_t *pn, size_t n, const char *want, uint64_t *cache,
                     int *idx, uint64_t *slot);
/* Appends (ident, thread, name[0..len), moving) to t. 0 or REMORA_ENOMEM. */
int tn_tab_add(tn_table_t *t, uint64_t ident, uint64_t thread, const char *name, size_t len,
                int moving);

/* thread_names_follow.c: follows each IT_FOUND item from its entry to its name, checks that
 * what it went through still holds, and adds its name to t: IT_NAMED. An item whose
 * chain fails a check or moved: IT_TORN (and moving, when renamed through every round).
 * 0, REMORA_ENOPROC or REMORA_ENOMEM. */
int tn_follow(unwinder_t *u, thread_names_t *pn, tn_table_t *t);

#endif
