/* unwind/pynames.c — Python thread names (threading.Thread.name), read from the target.
 *
 * The main interpreter's sys.modules, its "threading" module's dict, the "_active" dict
 * there ({ident: Thread}, ident the thread state's thread_id) and each Thread's "_name"
 * attribute: a table ident -> name kept between samples. It is read again only every so
 * often (pyn_update: a thread ident not there at the last reading appears, at most every
 * PYN_NEW_NS; otherwise every PYN_REFRESH_NS), never per sample.
 *
 * Bounded whatever the registry holds: _active's entries (the table's whole room) are
 * scanned in chunks of PYN_CHUNK (one read each, at most PYN_MAX_ENTRIES), only those whose
 * stored hash is that of a thread asked for (an int's hash is its value) are followed:
 * the reads after the scan depend on the threads sampled, not on the registry's size,
 * and are vectored. Entries past PYN_MAX_ENTRIES are not looked at (counted: those
 * threads keep the kernel's names). PYN_MAX_SCAN entries of any other dict, names cut
 * at PYN_NAME_BYTES. Memory: the chunk buffer (allocated once), per-thread arrays that
 * grow with the threads sampled, two name tables. Every object read has its type
 * checked (str, dict, int and module types from the symbols); a registry that fails a
 * check names nothing, and the caller keeps the kernel's names.
 *
 * A registry that changes while it is read: each name is read between two readings of
 * the slot it hangs from, with the thread's int and its Thread's type, in one vectored
 * read (follow()); a slot that moved (a rename) is followed, at most PYN_NAME_ROUNDS
 * rounds, each reading every str the slot pointed to in this reading (PYN_CANDS at most)
 * between two readings of the slot. A thread whose chain moved otherwise, or a scan
 * during which the dict's table was replaced or grew (its address or header changed),
 * or that found none of the threads (a table being built), is read again, at most
 * PYN_TRIES scans in one reading (and the whole reading once more if it failed). A
 * thread still not read then keeps the name of the last reading if its Thread object is
 * the same one; otherwise, if it was renamed through every round, PYN_MOVING (its name
 * not known, said so); otherwise the kernel's.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "remora.h"
#include "internal.h"

#define PYN_NAME_BYTES (UNW_MAX_NAME + 1)   /* >= 256 code points of any kind */
#define PYN_HEAD 64                         /* bytes first read of each object */
#define PYN_BASICSIZE 4096                  /* a Thread's size, at most */
#define PYN_STR_HEAD 192                    /* ... of each name (most fit whole) */
#define PYN_RETRIES 3                       /* readings for a thread not named yet */
#define PYN_SLOTS 64                        /* attributes of a Thread looked through */
#define PYN_CHUNK 4096                      /* _active entries read at once (96 KB) */
#define PYN_ESZ 24                          /* an _active entry: hash, key, value */
#define PYN_TRIES 4                         /* scans of a registry that moved, per reading */
#ifndef PYN_NAME_ROUNDS
#define PYN_NAME_ROUNDS 16                  /* a name's slot followed as the thread is renamed */
#endif
#define PYN_CANDS 8                         /* ... each round to the strs it last pointed to */
#define PYN_MOVING "<moving>"               /* the name of a thread renamed through every round */
#define PYN_M61 ((UINT64_C(1) << 61) - 1)   /* an int's hash: its value modulo 2^61 - 1 */

typedef struct pyn_name {
    uint64_t ident;
    uint64_t thread;                /* the Thread object it was read from */
    size_t off;                     /* its name: text + off */
    int moving;                     /* PYN_MOVING: renamed all the while it was read */
} pyn_name_t;

/* Where a reading's names are kept (two: the last reading's, kept for torn threads). */
typedef struct pyn_table {
    pyn_name_t *tab;                /* sorted by ident */
    size_t n, cap;
    char *text;
    size_t used, cap_text;
} pyn_table_t;

/* A Thread's type, as this reading found it. */
typedef struct pyn_type {
    uint64_t addr;
    pyo_type_t t;
    int name_idx;                   /* "_name" in its shared keys (-1: not there) */
} pyn_type_t;

#define PYN_TYPES 8

/* A dict entry: key, value, the address the value was read from, its index. */
typedef struct pyn_kv {
    uint64_t key, value, slot;
    size_t index;
} pyn_kv_t;

/* A thread asked for, and its _active entry while it is read (one per ident). */
enum { IT_WANTED = 0, IT_FOUND, IT_NAMED, IT_TORN, IT_DONE };

typedef struct pyn_item {
    uint64_t hash, ident;           /* sorted by hash */
    int state;                      /* IT_*: IT_NAMED and IT_DONE (no name) are final */
    uint64_t key, value;            /* the int and the Thread */
    uint64_t type;                  /* the Thread's type */
    unsigned char obj[PYO_PRE_MAX + PYN_HEAD];  /* its bytes from L->inst_pre before it */
    uint64_t dict;                  /* its attribute dict (0: none) */
    uint64_t vbase;                 /* its values[] (0: not known) */
    int idx;                        /* "_name" at vbase[idx] */
    uint64_t name;                  /* the str */
    uint64_t slot;                  /* where 'name' was read (0: not known) */
    uint64_t a;                     /* the address read for it in the current step */
    int moving;                     /* this reading: renamed through every round */
    uint64_t cand[PYN_CANDS];       /* the strs the slot pointed to, the latest first */
    int ncand;
    size_t nb, boff;                /* this round: heads read, where its bytes are */
} pyn_item_t;

struct pynames {
    pyn_table_t t[2];               /* t[cur]: the names now; the other, the last reading's */
    int cur;
    uint64_t *seen;                 /* idents asked for at the last reading (sorted) */
    size_t nseen, cap_seen;
    int64_t last_ns;
    int done;                       /* read at least once */
    int retries;                    /* readings since the last new ident, for unnamed ones */
    uint64_t k_threading, k_active, k_name;   /* key str objects matched before */
    pyn_item_t *items;              /* one per ident asked for */
    size_t nitems, cap_items;
    unsigned char *ents;            /* PYN_CHUNK entries of _active */
    pyn_kv_t *kv;                   /* a dict's entries */
    size_t cap_kv;
    unsigned char *buf;             /* reads land here */
    size_t cap_buf;
    proc_iov_t *iov;
    size_t cap_iov;
    pyn_type_t types[PYN_TYPES];
    size_t ntypes;
    pyn_stats_t st;
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
    pn->ents = malloc(PYN_CHUNK * PYN_ESZ);
    if (pn->ents == NULL) {
        free(pn);
        return NULL;
    }
    return pn;
}

void pyn_free(pynames_t *pn)
{
    int i;

    if (pn == NULL)
        return;
    for (i = 0; i < 2; i++) {
        free(pn->t[i].tab);
        free(pn->t[i].text);
    }
    free(pn->seen);
    free(pn->items);
    free(pn->ents);
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
 * len apart, in one vectored read (pyo_readv_zero); an address that is 0 or not aligned
 * is not read, its bytes zeroed. Returns 0 or REMORA_ENOMEM / REMORA_ENOPROC. */
static int read_heads(proc_t *p, pynames_t *pn, const uint64_t *addrs, size_t stride, size_t n,
                      size_t len)
{
    size_t i, k = 0;

    if (n == 0)
        return REMORA_OK;
    if (buf_need(pn, n * len) ||
        remora_grow((void **)&pn->iov, &pn->cap_iov, n, sizeof *pn->iov))
        return REMORA_ENOMEM;
    for (i = 0; i < n; i++) {
        uint64_t a = addrs[i * stride];
        if (a == 0 || a % 8 != 0 || a + len < a) {
            memset(pn->buf + i * len, 0, len);
            continue;
        }
        pn->iov[k].addr = a;
        pn->iov[k].buf = pn->buf + i * len;
        pn->iov[k].len = len;
        k++;
    }
    return pyo_readv_zero(p, pn->iov, k);
}

/* The entries of the keys object at 'keys' (values from 'values', a values[] array, when
 * not 0): pn->kv[0..*n) = (key, value, slot, index), empty ones left out, at most 'max'
 * entries scanned. 0, REMORA_ECORRUPT, a read error or REMORA_ENOMEM. */
static int keys_items(unwinder_t *u, pynames_t *pn, uint64_t keys, uint64_t values, size_t max,
                      size_t *n)
{
    const py_layout_t *L = &u->target->layout;
    unsigned char h[48];
    pyo_keys_t k;
    size_t i, nent, got = 0;
    int err;

    *n = 0;
    if (keys == 0 || keys % 8 != 0)
        return REMORA_ECORRUPT;
    if ((err = proc_read(u->p, keys, h, sizeof h)) != REMORA_OK)
        return err;
    if (pyo_keys(L, h, sizeof h, &k) != REMORA_OK)
        return REMORA_ECORRUPT;
    nent = (size_t)k.nent > max ? max : (size_t)k.nent;
    if (nent == 0)
        return REMORA_OK;
    if (buf_need(pn, nent * (k.esz + 8)) ||
        remora_grow((void **)&pn->kv, &pn->cap_kv, nent, sizeof *pn->kv))
        return REMORA_ENOMEM;
    if ((err = proc_read(u->p, keys + k.entries, pn->buf, nent * k.esz)) != REMORA_OK)
        return err;
    if (values != 0 &&
        (err = proc_read(u->p, values, pn->buf + nent * k.esz, nent * 8)) != REMORA_OK)
        return err;
    for (i = 0; i < nent; i++) {
        uint64_t key = get_u64(pn->buf, i * k.esz + k.koff);
        uint64_t val = values != 0 ? get_u64(pn->buf, nent * k.esz + i * 8) :
                       get_u64(pn->buf, i * k.esz + k.voff);
        if (key == 0 || key % 8 != 0)
            continue;
        pn->kv[got].key = key;
        pn->kv[got].value = val;
        pn->kv[got].slot = values != 0 ? values + i * 8 : keys + k.entries + i * k.esz + k.voff;
        pn->kv[got].index = i;
        got++;
    }
    *n = got;
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
 * last time, tried first), or 0. *idx: its entry's index, *slot: where its value was read
 * (either may be NULL). */
static uint64_t kv_find(unwinder_t *u, pynames_t *pn, size_t n, const char *want, uint64_t *cache,
                        int *idx, uint64_t *slot)
{
    size_t i, len = u->target->layout.u_ascii_size + strlen(want);
    uint64_t *addrs;

    for (i = 0; i < n; i++)
        if (*cache != 0 && pn->kv[i].key == *cache) {
            if (idx)
                *idx = (int)pn->kv[i].index;
            if (slot)
                *slot = pn->kv[i].slot;
            return pn->kv[i].value;
        }
    /* read each key's head (pn->buf is overwritten: copy the keys out first) */
    addrs = malloc(n * sizeof *addrs);
    if (addrs == NULL)
        return 0;
    for (i = 0; i < n; i++)
        addrs[i] = pn->kv[i].key;
    if (read_heads(u->p, pn, addrs, 1, n, len) != REMORA_OK) {
        free(addrs);
        return 0;
    }
    free(addrs);
    for (i = 0; i < n; i++)
        if (pyo_str_is_head(u, pn->buf + i * len, len, want)) {
            *cache = pn->kv[i].key;
            if (idx)
                *idx = (int)pn->kv[i].index;
            if (slot)
                *slot = pn->kv[i].slot;
            return pn->kv[i].value;
        }
    return 0;
}

/* A PyLongObject's value as a u64 (its first PYN_HEAD bytes in h): 0 when negative,
 * too large or not an int. */
static uint64_t long_value(const unwinder_t *u, const unsigned char *h)
{
    uint64_t v;

    return pyo_long(u, h, PYN_HEAD, &v) == REMORA_OK ? v : 0;
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
    if (pyo_type(L, h, L->ht_cached_keys + 8, &ty->t) != REMORA_OK || ty->t.basicsize > PYN_BASICSIZE)
        return NULL;                /* not a heap type: not a threading.Thread */
    if (L->inst_dict != PY_INST_DICTOFFSET ? !ty->t.managed :
        ty->t.dictoffset <= 0 || ty->t.dictoffset + 8 > PYN_HEAD)
        return NULL;                /* no dict where one is looked for */
    if (ty->t.keys != 0 && keys_items(u, pn, ty->t.keys, 0, PYN_SLOTS, &n) == REMORA_OK)
        kv_find(u, pn, n, "_name", &pn->k_name, &idx, NULL);
    ty->name_idx = idx;
    pn->ntypes++;
    return ty;
}

/* The name str of a Thread found through its attribute dict (the slow way); *slot:
 * where it was read. */
static uint64_t name_in_dict(unwinder_t *u, pynames_t *pn, uint64_t dict, uint64_t *slot)
{
    size_t n;

    if (dict_items(u, pn, dict, PYN_SLOTS, &n) != REMORA_OK)
        return 0;
    return kv_find(u, pn, n, "_name", &pn->k_name, NULL, slot);
}

static int cmp_name(const void *a, const void *b)
{
    const pyn_name_t *x = a, *y = b;
    return x->ident < y->ident ? -1 : x->ident > y->ident;
}

static int cmp_item(const void *a, const void *b)
{
    const pyn_item_t *x = a, *y = b;
    return x->hash < y->hash ? -1 : x->hash > y->hash;
}

/* The item asked for whose ident's hash is h, or NULL. */
static pyn_item_t *item_of(pynames_t *pn, uint64_t h)
{
    pyn_item_t key;

    key.hash = h;
    return pn->nitems ? bsearch(&key, pn->items, pn->nitems, sizeof *pn->items, cmp_item) : NULL;
}

/* The entry of 'ident' in table t, read from Thread 'thread' (0: any), or NULL. */
static const pyn_name_t *tab_find(const pyn_table_t *t, uint64_t ident, uint64_t thread)
{
    size_t lo = 0, hi = t->n;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t->tab[mid].ident == ident)
            return thread == 0 || t->tab[mid].thread == thread ? &t->tab[mid] : NULL;
        if (t->tab[mid].ident < ident)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* Appends (ident, thread, name[0..len), moving) to t. 0 or REMORA_ENOMEM. */
static int tab_add(pyn_table_t *t, uint64_t ident, uint64_t thread, const char *name, size_t len,
                   int moving)
{
    if (remora_grow((void **)&t->tab, &t->cap, t->n + 1, sizeof *t->tab) ||
        remora_grow((void **)&t->text, &t->cap_text, t->used + len + 1, 1))
        return REMORA_ENOMEM;
    memcpy(t->text + t->used, name, len);
    t->text[t->used + len] = '\0';
    t->tab[t->n].ident = ident;
    t->tab[t->n].thread = thread;
    t->tab[t->n].off = t->used;
    t->tab[t->n].moving = moving;
    t->used += len + 1;
    t->n++;
    return REMORA_OK;
}

/* The address of the "_active" dict: sys.modules["threading"].__dict__["_active"].
 * 0, or a code (REMORA_ECORRUPT: threading not imported, or a check failed). */
static int find_active(unwinder_t *u, pynames_t *pn, uint64_t interp, uint64_t *active)
{
    const py_layout_t *L = &u->target->layout;
    const py_target_t *t = u->target;
    uint64_t modules, threading, md;
    unsigned char h[32];
    size_t n;
    int err;

    if ((err = proc_read_u64(u->p, interp + L->is_modules, &modules)) != REMORA_OK)
        return err;
    if ((err = dict_items(u, pn, modules, PYN_MAX_SCAN, &n)) != REMORA_OK)
        return err;
    threading = kv_find(u, pn, n, "threading", &pn->k_threading, NULL, NULL);
    if (threading == 0 || threading % 8 != 0)
        return REMORA_ECORRUPT;     /* not imported (yet) */
    if ((err = proc_read(u->p, threading, h, sizeof h)) != REMORA_OK)
        return err;
    if (get_u64(h, L->ob_type) != t->module_type)
        return REMORA_ECORRUPT;
    md = get_u64(h, L->md_dict);
    if ((err = dict_items(u, pn, md, PYN_MAX_SCAN, &n)) != REMORA_OK)
        return err;
    *active = kv_find(u, pn, n, "_active", &pn->k_active, NULL, NULL);
    return *active != 0 && *active % 8 == 0 ? REMORA_OK : REMORA_ECORRUPT;
}

/* One scan of the _active dict at 'active': each item not read yet whose hash an entry
 * holds becomes IT_FOUND (its int and Thread). *moved: the dict's table was replaced or
 * gained entries meanwhile, or part of it could not be read, or nothing was found in it
 * while nothing is named yet (any_named 0): an item not found may be there. 0, or a
 * code: REMORA_ECORRUPT when the dict fails a check. */
static int scan_active(unwinder_t *u, pynames_t *pn, uint64_t active, int any_named, int *moved)
{
    const py_layout_t *L = &u->target->layout;
    unsigned char h[48];
    uint64_t keys, entries, room, nscan, off, again;
    pyo_keys_t dk;
    int64_t nent;
    size_t found = 0;
    int err;

    *moved = 0;
    if ((err = proc_read(u->p, active, h, sizeof h)) != REMORA_OK)
        return err;
    if (get_u64(h, L->ob_type) != u->target->dict_type || get_u64(h, L->dict_values) != 0)
        return REMORA_ECORRUPT;     /* int keys: never a split table */
    keys = get_u64(h, L->dict_keys);
    if (keys == 0 || keys % 8 != 0)
        return REMORA_ECORRUPT;
    if ((err = proc_read(u->p, keys, h, sizeof h)) != REMORA_OK)
        return err;
    if (pyo_keys(L, h, sizeof h, &dk) != REMORA_OK || dk.esz != PYN_ESZ)
        return REMORA_ECORRUPT;     /* DICT_KEYS_GENERAL: entries hold their hash */
    nent = dk.nent;
    entries = keys + dk.entries;
    room = (dk.size << 1) / 3;       /* USABLE_FRACTION */
    /* The whole room of entries the table has (CPython allocates USABLE_FRACTION of its
     * size, zeroed), not only dk_nentries: a table being built (3.9 and 3.10 point the
     * dict to it first, copy the entries, then set dk_nentries) says 0 while its entries
     * are there, and an entry added as it is read is seen. */
    nscan = room < PYN_MAX_ENTRIES ? room : PYN_MAX_ENTRIES;
    pn->st.unscanned = (uint64_t)nent > nscan ? (uint64_t)nent - nscan : 0;
    for (off = 0; off < nscan; off += PYN_CHUNK) {
        size_t k = nscan - off < PYN_CHUNK ? (size_t)(nscan - off) : PYN_CHUNK, i;
        err = proc_read(u->p, entries + off * PYN_ESZ, pn->ents, k * PYN_ESZ);
        if (err == REMORA_ENOPROC)
            return err;
        if (err) {
            *moved = 1;             /* freed (the table was replaced): scan it again */
            return REMORA_OK;
        }
        for (i = 0; i < k; i++) {
            uint64_t hash = get_u64(pn->ents, i * PYN_ESZ);
            uint64_t key = get_u64(pn->ents, i * PYN_ESZ + dk.koff);
            uint64_t value = get_u64(pn->ents, i * PYN_ESZ + dk.voff);
            pyn_item_t *it;
            if (key == 0 || key % 8 != 0 || value == 0 || value % 8 != 0 || hash >= PYN_M61 ||
                (it = item_of(pn, hash)) == NULL || it->state != IT_WANTED)
                continue;           /* a deleted entry, a thread not asked for */
            it->state = IT_FOUND;
            it->key = key;
            it->value = value;
            found++;
        }
    }
    /* the dict's table now, and (read just after it) that table's header: the same
     * table, the same size, as many entries. A table that gained entries meanwhile may
     * be another one at the same address (a freed table's memory goes to the next one
     * at once): the threads not found are looked for again */
    {
        unsigned char h2[48];
        proc_iov_t v[2] = { { .addr = active + L->dict_keys, .buf = &again, .len = 8 },
                            { .addr = keys, .buf = h2, .len = sizeof h2 } };
        pyo_keys_t k2;
        if ((err = proc_readv(u->p, v, 2)) == REMORA_ENOPROC)
            return err;
        *moved = err != REMORA_OK || again != keys || pyo_keys(L, h2, sizeof h2, &k2) != REMORA_OK ||
                 k2.nent != nent || k2.size != dk.size || k2.entries != dk.entries || k2.kind != dk.kind;
    }
    /* an empty table, or none of the threads asked for in it while none is named yet:
     * the main thread is there as soon as threading is imported, so more likely a table
     * read as it was being built (3.9 and 3.10 point the dict to its new table first,
     * copy the entries, then set dk_nentries) than a true answer. Looked for again */
    if (nent == 0 || (found == 0 && !any_named))
        *moved = 1;
    return REMORA_OK;
}

/* Does the str whose first bytes are head[0..got) keep CPython's rules for a finished
 * str, where they can be seen in those bytes: its code points followed by a zero one,
 * an ASCII one's all below 0x80? (A str read while it was being built, over-allocated,
 * breaks them most of the time.) A longer str: 1, nothing seen. */
static int str_whole(const py_layout_t *L, const unsigned char *head, size_t got)
{
    pyo_str_t s;
    uint64_t i;

    if (pyo_str(L, head, got, &s) != REMORA_OK ||
        s.data + ((uint64_t)s.length + 1) * s.kind > got)
        return 1;
    for (i = 0; i < s.kind; i++)
        if (head[s.data + (uint64_t)s.length * s.kind + i] != 0)
            return 0;
    if (s.ascii)
        for (i = 0; i < (uint64_t)s.length; i++)
            if (head[s.data + i] >= 0x80)
                return 0;
    return 1;
}

/* Makes x the latest of it->cand (moved to the front if there, else added, the oldest
 * dropped when full). */
static void cand_add(pyn_item_t *it, uint64_t x)
{
    int i, at = it->ncand < PYN_CANDS ? it->ncand : PYN_CANDS - 1;

    for (i = 0; i < it->ncand; i++)
        if (it->cand[i] == x) {
            at = i;
            break;
        }
    if (at == it->ncand)
        it->ncand++;
    memmove(&it->cand[1], &it->cand[0], (size_t)at * sizeof *it->cand);
    it->cand[0] = x;
}

/* Each item in state 'from' gets it->a = expr (of 'it', the caller's pointer, set to
 * each item in turn), the others 0. */
#define ITEMS_AT(pn, from, expr)                                          \
    do {                                                                  \
        size_t i_;                                                        \
        for (i_ = 0; i_ < (pn)->nitems; i_++) {                           \
            it = &(pn)->items[i_];                                        \
            it->a = it->state == (from) ? (expr) : 0;                     \
        }                                                                 \
    } while (0)

/* Follows each IT_FOUND item from its entry to its name, checks that what it went
 * through still holds, and adds its name to t: IT_NAMED. An item whose chain fails a
 * check or moved: IT_TORN. 0, REMORA_ENOPROC or REMORA_ENOMEM. */
static int follow(unwinder_t *u, pynames_t *pn, pyn_table_t *t)
{
    const py_layout_t *L = &u->target->layout;
    const py_target_t *T = u->target;
    const size_t stride = sizeof *pn->items / 8;
    const size_t vlen = 8 + 8 * PYN_SLOTS;
    pyn_item_t *it;
    size_t i, k;
    int err;

    /* the ints: the ident each holds */
    ITEMS_AT(pn, IT_FOUND, it->key);
    if ((err = read_heads(u->p, pn, &pn->items[0].a, stride, pn->nitems, PYN_HEAD)))
        return err;
    for (i = 0; i < pn->nitems; i++) {
        it = &pn->items[i];
        if (it->state == IT_FOUND && long_value(u, pn->buf + i * PYN_HEAD) != it->ident)
            it->state = IT_TORN;
    }
    /* the Thread objects, from the bytes before them (the managed dict's pointers) */
    ITEMS_AT(pn, IT_FOUND, it->value > L->inst_pre ? it->value - L->inst_pre : 0);
    if ((err = read_heads(u->p, pn, &pn->items[0].a, stride, pn->nitems, L->inst_pre + PYN_HEAD)))
        return err;
    for (i = 0; i < pn->nitems; i++) {
        const unsigned char *h = pn->buf + i * (L->inst_pre + PYN_HEAD);
        it = &pn->items[i];
        if (it->state != IT_FOUND)
            continue;
        it->type = get_u64(h, L->inst_pre + L->ob_type);
        memcpy(it->obj, h, L->inst_pre + PYN_HEAD);
        it->dict = it->vbase = it->name = it->slot = 0;
        it->idx = -1;
    }
    /* their types (thread_type() reads into pn->buf), where each keeps its attributes */
    for (i = 0; i < pn->nitems; i++) {
        pyn_type_t *ty;
        uint64_t vals = 0, dict = 0, dict_at = 0;
        it = &pn->items[i];
        if (it->state != IT_FOUND)
            continue;
        if ((ty = thread_type(u, pn, it->type)) == NULL) {
            it->state = IT_TORN;
            continue;
        }
        if (pyo_inst(L, &ty->t, it->value, it->obj, &dict, &vals, &dict_at) != REMORA_OK) {
            it->state = IT_TORN;
            continue;
        }
        if (dict_at != 0) {         /* at tp_dictoffset: in the head read, or read now */
            if (dict_at - it->value + 8 <= PYN_HEAD)
                dict = get_u64(it->obj, L->inst_pre + (dict_at - it->value));
            else if (proc_read_u64(u->p, dict_at, &dict))
                dict = 0;
        }
        it->dict = dict;
        if (dict == 0 && vals != 0 && ty->name_idx >= 0) {
            it->vbase = vals;
            it->idx = ty->name_idx;
        }
    }
    /* a dict of the type's shared keys: its values[] names it too */
    ITEMS_AT(pn, IT_FOUND, it->dict);
    if ((err = read_heads(u->p, pn, &pn->items[0].a, stride, pn->nitems, 48)))
        return err;
    for (i = 0; i < pn->nitems; i++) {
        const unsigned char *h = pn->buf + i * 48;
        pyn_type_t *ty = NULL;
        size_t j;
        it = &pn->items[i];
        if (it->state != IT_FOUND || it->dict == 0)
            continue;
        for (j = 0; j < pn->ntypes; j++)
            if (pn->types[j].addr == it->type)
                ty = &pn->types[j];
        if (ty != NULL && ty->name_idx >= 0 && get_u64(h, L->ob_type) == T->dict_type &&
            get_u64(h, L->dict_keys) == ty->t.keys && get_u64(h, L->dict_values) != 0) {
            it->vbase = get_u64(h, L->dict_values);
            it->idx = ty->name_idx;
            it->dict = 0;
        }
    }
    /* the name str pointers: through the dict (the slow way), or values[idx] (3.13+:
     * after the header, and 'valid'), in one vectored read */
    for (i = 0; i < pn->nitems; i++) {
        it = &pn->items[i];
        if (it->state != IT_FOUND)
            continue;
        if (it->dict != 0) {
            if ((it->name = name_in_dict(u, pn, it->dict, &it->slot)) == 0)
                it->state = IT_TORN;
        } else if (it->vbase == 0 || it->vbase % 8 != 0 || it->idx < 0 || it->idx >= PYN_SLOTS) {
            it->state = IT_TORN;
        }
    }
    if (buf_need(pn, pn->nitems * vlen) ||
        remora_grow((void **)&pn->iov, &pn->cap_iov, pn->nitems, sizeof *pn->iov))
        return REMORA_ENOMEM;
    for (i = 0, k = 0; i < pn->nitems; i++) {
        it = &pn->items[i];
        if (it->state != IT_FOUND || it->dict != 0)
            continue;
        pn->iov[k].addr = it->vbase;
        pn->iov[k].buf = pn->buf + i * vlen;
        pn->iov[k].len = L->dv_values + 8 * (size_t)(it->idx + 1);
        k++;
    }
    if ((err = pyo_readv_zero(u->p, pn->iov, k)))
        return err;
    for (i = 0; i < pn->nitems; i++) {
        const unsigned char *v = pn->buf + i * vlen;
        it = &pn->items[i];
        if (it->state != IT_FOUND || it->dict != 0)
            continue;
        if (L->dv_values >= 8 && v[3] == 0) {   /* values no longer valid: a dict now */
            it->state = IT_TORN;
            continue;
        }
        it->slot = it->vbase + L->dv_values + 8 * (size_t)it->idx;
        it->name = get_u64(v, L->dv_values + 8 * (size_t)it->idx);
        if (it->name == 0 || it->name % 8 != 0)
            it->state = IT_TORN;
    }
    /* the names: each str's first bytes read between two readings of the slot it was
     * read from, in one vectored read (the kernel reads the segments in order), with the
     * int, the Thread's type and the values' 'valid' byte. Both readings of the slot
     * must point to the str: it was the thread's name then, so what lay between is its
     * text, unless the thread was renamed twice within one system call (the allocator
     * gives a freed name's memory to the next name: a name read once, the slot checked
     * once after, can catch the next-but-one name being built there).
     * A slot that moved (the thread renamed meanwhile) is followed, at most
     * PYN_NAME_ROUNDS rounds. Not only to the str it pointed to last: a thread renamed in
     * a loop has freed that one by the next system call (seen on 3.13: the slot pointed
     * elsewhere at the start of each of 64 rounds, and the thread kept the kernel's
     * name), while the allocator makes its next names where its last ones were. So each
     * round after the first reads every address the slot held in this reading (the
     * PYN_CANDS last), twice over, each between two readings of the slot: a str is taken
     * when the slot pointed to it at both ends of its own read. */
    {
        /* per item: its heads (a bracket each), then its slot readings, the int's head,
         * the type, the values' header */
        enum { C_INT = 0, C_TYPE = PYN_HEAD, C_VALID = C_TYPE + 8, C_LEN = C_VALID + 8 };
        /* the bytes of an item whose round reads nb heads (its brackets) */
#define PYN_ITEM_BYTES(nb) ((nb) * PYN_STR_HEAD + ((nb) + 1) * 8 + C_LEN)
        char name[PYN_NAME_BYTES];
        int round, pending = 1;
        size_t need;

        for (i = 0; i < pn->nitems; i++)
            if (pn->items[i].state == IT_FOUND) {
                pn->items[i].cand[0] = pn->items[i].name;
                pn->items[i].ncand = 1;
            }
        if (remora_grow((void **)&pn->iov, &pn->cap_iov, (4 * PYN_CANDS + 4) * pn->nitems,
                        sizeof *pn->iov))
            return REMORA_ENOMEM;
        for (round = 0; round < PYN_NAME_ROUNDS && pending; round++) {
            pending = 0;
            /* each item's bytes at it->boff: one head in the first round, then two per
             * address the slot held */
            for (i = 0, need = 0; i < pn->nitems; i++) {
                it = &pn->items[i];
                if (it->state != IT_FOUND)
                    continue;
                it->nb = round == 0 ? 1 : 2 * (size_t)it->ncand;
                it->boff = need;
                need += PYN_ITEM_BYTES(it->nb);
            }
            if (buf_need(pn, need))
                return REMORA_ENOMEM;
            for (i = 0, k = 0; i < pn->nitems; i++) {
                unsigned char *b, *sl, *c;
                size_t j, nb;
                it = &pn->items[i];
                if (it->state != IT_FOUND)
                    continue;
                nb = it->nb;
                b = pn->buf + it->boff;
                sl = b + nb * PYN_STR_HEAD;
                c = sl + (nb + 1) * 8;
                memset(b, 0, PYN_ITEM_BYTES(nb));
                for (j = 0; j < nb; j++) {
                    pn->iov[k++] = (proc_iov_t){ .addr = it->slot, .buf = sl + 8 * j, .len = 8 };
                    pn->iov[k++] = (proc_iov_t){ .addr = it->cand[j % it->ncand],
                                                 .buf = b + j * PYN_STR_HEAD, .len = PYN_STR_HEAD };
                }
                pn->iov[k++] = (proc_iov_t){ .addr = it->slot, .buf = sl + 8 * nb, .len = 8 };
                pn->iov[k++] = (proc_iov_t){ .addr = it->key, .buf = c + C_INT, .len = PYN_HEAD };
                pn->iov[k++] = (proc_iov_t){ .addr = it->value + L->ob_type, .buf = c + C_TYPE, .len = 8 };
                if (it->vbase != 0 && it->dict == 0 && L->dv_values >= 8)
                    pn->iov[k++] = (proc_iov_t){ .addr = it->vbase, .buf = c + C_VALID, .len = 8 };
                else
                    c[C_VALID + 3] = 1;
            }
            if ((err = pyo_readv_zero(u->p, pn->iov, k)))
                return err;
            for (i = 0; i < pn->nitems; i++) {
                const unsigned char *b, *sl, *c;
                uint64_t now, last;
                size_t j, nb, len;
                int moved = 0, named = 0;
                it = &pn->items[i];
                if (it->state != IT_FOUND)
                    continue;
                nb = it->nb;
                b = pn->buf + it->boff;
                sl = b + nb * PYN_STR_HEAD;
                c = sl + (nb + 1) * 8;
                if (long_value(u, c + C_INT) != it->ident || get_u64(c, C_TYPE) != it->type ||
                    c[C_VALID + 3] == 0) {
                    it->state = IT_TORN;    /* not the entry read: the scan again */
                    continue;
                }
                for (j = 0; j < nb && !named; j++) {
                    const unsigned char *h = b + j * PYN_STR_HEAD;
                    uint64_t x = it->cand[j % it->ncand];
                    if (get_u64(sl, 8 * j) != x || get_u64(sl, 8 * (j + 1)) != x)
                        continue;           /* not its name all the while it was read */
                    if (get_u64(h, L->ob_type) == T->str_type && str_whole(L, h, PYN_STR_HEAD) &&
                        (pystr_from_head(NULL, L, x, h, PYN_STR_HEAD, name, sizeof name,
                                         &len) == REMORA_OK ||
                         /* longer than its head: the rest read, then the slot again */
                         (pystr_from_head(u->p, L, x, h, PYN_STR_HEAD, name, sizeof name,
                                          &len) == REMORA_OK &&
                          proc_read_u64(u->p, it->slot, &now) == REMORA_OK && now == x))) {
                        if ((err = tab_add(t, it->ident, it->value, name, len, 0)) != REMORA_OK)
                            return err;
                        it->state = IT_NAMED;
                        named = 1;
                    }
                }
                if (named)
                    continue;
                /* the addresses the slot held, the latest first; moved: it changed */
                last = it->cand[0];
                for (j = 0; j <= nb; j++) {
                    uint64_t x = get_u64(sl, 8 * j);
                    moved |= x != last;
                    if (x != 0 && x % 8 == 0)
                        cand_add(it, x);
                }
                if (moved && get_u64(sl, 8 * nb) != 0 && get_u64(sl, 8 * nb) % 8 == 0)
                    pending = 1;            /* renamed meanwhile: the new strs too */
                else
                    it->state = IT_TORN;    /* still, and no str: the scan again */
            }
        }
#undef PYN_ITEM_BYTES
        /* renamed through every round: its name was moving */
        for (i = 0; i < pn->nitems; i++)
            if (pn->items[i].state == IT_FOUND) {
                pn->items[i].state = IT_TORN;
                pn->items[i].moving = 1;
            }
    }
    return REMORA_OK;
}

/* Reads the registry into the table not current, then makes it current. 0, or a code:
 * the current table is then empty. */
static int pyn_read(unwinder_t *u, pynames_t *pn, uint64_t interp)
{
    const py_layout_t *L = &u->target->layout;
    const py_target_t *T = u->target;
    pyn_table_t *t = &pn->t[!pn->cur], *old = &pn->t[pn->cur];
    uint64_t active = 0;
    size_t i;
    int err = REMORA_OK, tries, left = 0;

    t->n = 0;
    t->used = 0;
    pn->ntypes = 0;
    pn->st.unscanned = 0;
    for (i = 0; i < pn->nitems; i++) {
        pn->items[i].state = IT_WANTED;
        pn->items[i].moving = 0;
    }
    if (L->dk_layout == 0 || T->str_type == 0 || T->dict_type == 0 || T->long_type == 0 ||
        T->module_type == 0 || interp == 0 || L->inst_pre > PYO_PRE_MAX)
        err = REMORA_EVERSION;
    else
        err = find_active(u, pn, interp, &active);
    for (tries = 0; err == REMORA_OK && tries < PYN_TRIES; tries++) {
        int moved = 0;
        pn->st.scans++;
        for (i = 0; i < pn->nitems; i++)
            if (pn->items[i].state == IT_FOUND || pn->items[i].state == IT_TORN)
                pn->items[i].state = IT_WANTED;
        err = scan_active(u, pn, active, t->n > 0, &moved);
        if (err == REMORA_OK)
            err = follow(u, pn, t);
        else if (err != REMORA_ENOPROC && err != REMORA_ENOMEM)
            err = REMORA_OK, moved = 1;     /* a table read as it was replaced: again */
        if (err)
            break;
        left = 0;
        for (i = 0; i < pn->nitems; i++) {
            pyn_item_t *it = &pn->items[i];
            if (it->state == IT_WANTED && !moved)
                it->state = IT_DONE;        /* not in the registry */
            left += it->state == IT_WANTED || it->state == IT_TORN;
        }
        if (left == 0)
            break;
    }
    if (err == REMORA_OK && left > 0) {
        /* read as the registry moved every time: the last reading's name, if it was read
         * from the same Thread; else, for a thread renamed all the while, PYN_MOVING (in
         * the registry, its name not known: not the kernel's name, which it no longer
         * has); else nothing (the kernel's name) */
        pn->st.torn += (uint64_t)left;
        for (i = 0; i < pn->nitems; i++) {
            pyn_item_t *it = &pn->items[i];
            const pyn_name_t *e;
            if ((it->state != IT_TORN && it->state != IT_WANTED) || it->value == 0)
                continue;
            if ((e = tab_find(old, it->ident, it->value)) != NULL)
                err = tab_add(t, it->ident, it->value, old->text + e->off, strlen(old->text + e->off),
                              e->moving);
            else if (it->moving)
                err = tab_add(t, it->ident, it->value, PYN_MOVING, strlen(PYN_MOVING), 1);
            if (err)
                break;
        }
    }
    if (err) {
        t->n = 0;
        pn->cur = !pn->cur;
        return err;
    }
    if (t->n > 1)
        qsort(t->tab, t->n, sizeof *t->tab, cmp_name);
    pn->cur = !pn->cur;
    return REMORA_OK;
}

/* Makes pn->items the idents asked for (nonzero, once each), sorted by their hash.
 * 0 or REMORA_ENOMEM. */
static int items_set(pynames_t *pn, const uint64_t *idents, size_t n)
{
    size_t i, k = 0;

    if (remora_grow((void **)&pn->items, &pn->cap_items, n, sizeof *pn->items))
        return REMORA_ENOMEM;
    for (i = 0; i < n; i++) {
        if (idents[i] == 0)
            continue;
        memset(&pn->items[k], 0, sizeof pn->items[k]);
        pn->items[k].ident = idents[i];
        pn->items[k].hash = idents[i] % PYN_M61;
        k++;
    }
    if (k > 1)
        qsort(pn->items, k, sizeof *pn->items, cmp_item);
    for (i = 0, pn->nitems = 0; i < k; i++)
        if (pn->nitems == 0 || pn->items[pn->nitems - 1].hash != pn->items[i].hash)
            pn->items[pn->nitems++] = pn->items[i];
    return REMORA_OK;
}

const char *pyn_lookup(const pynames_t *pn, uint64_t ident)
{
    const pyn_name_t *e = tab_find(&pn->t[pn->cur], ident, 0);

    return e != NULL ? pn->t[pn->cur].text + e->off : NULL;
}

/* Has the thread 'ident' a name from the last reading (PYN_MOVING is none)? */
static int named(const pynames_t *pn, uint64_t ident)
{
    const pyn_name_t *e = tab_find(&pn->t[pn->cur], ident, 0);

    return e != NULL && !e->moving;
}

static int seen_has(const pynames_t *pn, uint64_t ident)
{
    return pn->nseen != 0 && bsearch(&ident, pn->seen, pn->nseen, sizeof *pn->seen, cmp_u64) != NULL;
}

int pyn_update(unwinder_t *u, pynames_t *pn, uint64_t interp, const uint64_t *idents, size_t n,
               int force)
{
    int64_t now = now_ns();
    int fresh = force || !pn->done || now - pn->last_ns >= PYN_REFRESH_NS;
    uint64_t reads0;
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
                fresh = idents[i] != 0 && !named(pn, idents[i]);
            pn->retries += fresh;
        }
    }
    if (!fresh)
        return REMORA_OK;
    pn->done = 1;
    pn->last_ns = now;
    pn->st.readings++;
    reads0 = proc_stats(u->p)->reads;
    err = items_set(pn, idents, n);
    if (err == REMORA_OK)
        err = pyn_read(u, pn, interp);
    if (err != REMORA_OK && err != REMORA_ENOPROC && err != REMORA_ENOMEM && err != REMORA_EVERSION)
        err = pyn_read(u, pn, interp);      /* once more: read as it changed, maybe */
    pn->st.reads += proc_stats(u->p)->reads - reads0;
    pn->st.ns += (uint64_t)(now_ns() - now);
    if (err) {
        pn->t[pn->cur].n = 0;       /* nothing known: the kernel's names */
        if (err == REMORA_ENOPROC || err == REMORA_ENOMEM)
            return err;
    }
    if (remora_grow((void **)&pn->seen, &pn->cap_seen, n, sizeof *pn->seen))
        return REMORA_ENOMEM;
    if (n > 0) {
        memcpy(pn->seen, idents, n * sizeof *idents);
        qsort(pn->seen, n, sizeof *pn->seen, cmp_u64);
    }
    pn->nseen = n;
    return REMORA_OK;
}

void pyn_get_stats(const pynames_t *pn, pyn_stats_t *out)
{
    *out = pn->st;
}
