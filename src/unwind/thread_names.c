/* unwind/thread_names.c — Python thread names (threading.Thread.name), read from the target.
 *
 * The main interpreter's sys.modules, its "threading" module's dict, the "_active" dict
 * there ({ident: Thread}, ident the thread state's thread_id) and each Thread's "_name"
 * attribute: a table ident -> name kept between samples. It is read again only every so
 * often (tn_update: a thread ident not there at the last reading appears, at most every
 * TN_NEW_NS; otherwise every TN_REFRESH_NS), never per sample.
 *
 * Bounded whatever the registry holds: _active's entries (the table's whole room) are
 * scanned in chunks of TN_CHUNK (one read each, at most TN_MAX_ENTRIES), only those whose
 * stored hash is that of a thread asked for (an int's hash is its value) are followed:
 * the reads after the scan depend on the threads sampled, not on the registry's size,
 * and are vectored. Entries past TN_MAX_ENTRIES are not looked at (counted: those
 * threads keep the kernel's names). TN_MAX_SCAN entries of any other dict, names cut
 * at TN_NAME_BYTES. Memory: the chunk buffer (allocated once), per-thread arrays that
 * grow with the threads sampled, two name tables. Every object read has its type
 * checked (str, dict, int and module types from the symbols); a registry that fails a
 * check names nothing, and the caller keeps the kernel's names.
 *
 * A registry that changes while it is read: each name is read between two readings of
 * the slot it hangs from, with the thread's int and its Thread's type, in one vectored
 * read (tn_follow()); a slot that moved (a rename) is followed, at most TN_NAME_ROUNDS
 * rounds, each reading every str the slot pointed to in this reading (TN_CANDS at most)
 * between two readings of the slot. A thread whose chain moved otherwise, or a scan
 * during which the dict's table was replaced or grew (its address or header changed),
 * or that found none of the threads (a table being built), is read again, at most
 * TN_TRIES scans in one reading (and the whole reading once more if it failed). A
 * thread still not read then keeps the name of the last reading if its Thread object is
 * the same one; otherwise, if it was renamed through every round, TN_MOVING (its name
 * not known, said so); otherwise the kernel's.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "remora.h"
#include "internal.h"
#include "thread_names_int.h"

thread_names_t *tn_new(void)
{
    thread_names_t *pn = calloc(1, sizeof *pn);

    if (pn == NULL)
        return NULL;
    pn->ents = malloc(TN_CHUNK * TN_ESZ);
    if (pn->ents == NULL) {
        free(pn);
        return NULL;
    }
    return pn;
}

void tn_free(thread_names_t *pn)
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

int tn_buf_need(thread_names_t *pn, size_t len)
{
    return remora_grow((void **)&pn->buf, &pn->cap_buf, len, 1) ? REMORA_ENOMEM : REMORA_OK;
}

/* Reads n objects' first 'len' bytes (addrs[i * stride], as uint64_t) into pn->buf,
 * len apart, in one vectored read (pyo_readv_zero); an address that is 0 or not aligned
 * is not read, its bytes zeroed. Returns 0 or REMORA_ENOMEM / REMORA_ENOPROC. */
int tn_read_heads(proc_t *p, thread_names_t *pn, const uint64_t *addrs, size_t stride, size_t n,
                      size_t len)
{
    size_t i, k = 0;

    if (n == 0)
        return REMORA_OK;
    if (tn_buf_need(pn, n * len) ||
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

/* The entries of the opened dict d: pn->kv[0..*n) = (key, value, slot, index), empty
 * ones left out. 0, a read error or REMORA_ENOMEM. */
static int kv_fill(unwinder_t *u, thread_names_t *pn, pyo_dict_t *d, size_t *n)
{
    pyo_rd_t rd = pyo_rd_proc(u->p);
    pyo_item_t it;
    size_t got = 0;
    int err;

    *n = 0;
    if (d->n == 0)
        return REMORA_OK;
    if (tn_buf_need(pn, d->need) ||
        remora_grow((void **)&pn->kv, &pn->cap_kv, d->n, sizeof *pn->kv))
        return REMORA_ENOMEM;
    if ((err = pyo_dict_load(&rd, d, pn->buf)) != REMORA_OK)
        return err;
    while (pyo_dict_next(d, &it)) {
        if (it.key % 8 != 0)
            continue;
        pn->kv[got].key = it.key;
        pn->kv[got].value = it.value;
        pn->kv[got].slot = it.slot;
        pn->kv[got].index = it.index;
        got++;
    }
    *n = got;
    return REMORA_OK;
}

/* The entries of the keys object at 'keys' (values from the split table 'values', a
 * dict's ma_values, when not 0): pn->kv[0..*n), as kv_fill, at most 'max' entries
 * scanned. 0, REMORA_ECORRUPT, a read error or REMORA_ENOMEM. */
int tn_keys_items(unwinder_t *u, thread_names_t *pn, uint64_t keys, uint64_t values, size_t max,
                      size_t *n)
{
    pyo_rd_t rd = pyo_rd_proc(u->p);
    pyo_dict_t d;
    int err;

    *n = 0;
    if ((err = pyo_keys_open(&rd, &u->target->layout, keys, values, max, &d)) != REMORA_OK)
        return err;
    return kv_fill(u, pn, &d, n);
}

/* The items of the dict object at 'dict' (pn->kv, as tn_keys_items). */
int tn_dict_items(unwinder_t *u, thread_names_t *pn, uint64_t dict, size_t max, size_t *n)
{
    pyo_rd_t rd = pyo_rd_proc(u->p);
    pyo_dict_t d;
    int err;

    *n = 0;
    if ((err = pyo_dict_open(&rd, u->target, dict, max, &d)) != REMORA_OK)
        return err;
    return kv_fill(u, pn, &d, n);
}

/* The value under the str key 'want' in pn->kv[0..n) (cache: the key object matched
 * last time, tried first), or 0. *idx: its entry's index, *slot: where its value was read
 * (either may be NULL). */
uint64_t tn_kv_find(unwinder_t *u, thread_names_t *pn, size_t n, const char *want, uint64_t *cache,
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
    addrs = calloc(n ? n : 1, sizeof *addrs);
    if (addrs == NULL)
        return 0;
    for (i = 0; i < n; i++)
        addrs[i] = pn->kv[i].key;
    if (tn_read_heads(u->p, pn, addrs, 1, n, len) != REMORA_OK) {
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

static int cmp_name(const void *a, const void *b)
{
    const tn_name_t *x = a, *y = b;
    return x->ident < y->ident ? -1 : x->ident > y->ident;
}

static int cmp_item(const void *a, const void *b)
{
    const tn_item_t *x = a, *y = b;
    return x->hash < y->hash ? -1 : x->hash > y->hash;
}

/* The item asked for whose ident's hash is h, or NULL. */
static tn_item_t *item_of(thread_names_t *pn, uint64_t h)
{
    tn_item_t key;

    key.hash = h;
    return pn->nitems ? bsearch(&key, pn->items, pn->nitems, sizeof *pn->items, cmp_item) : NULL;
}

/* The entry of 'ident' in table t, read from Thread 'thread' (0: any), or NULL. */
static const tn_name_t *tab_find(const tn_table_t *t, uint64_t ident, uint64_t thread)
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
int tn_tab_add(tn_table_t *t, uint64_t ident, uint64_t thread, const char *name, size_t len,
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
static int find_active(unwinder_t *u, thread_names_t *pn, uint64_t interp, uint64_t *active)
{
    const py_layout_t *L = &u->target->layout;
    const py_target_t *t = u->target;
    uint64_t modules, threading, md;
    unsigned char h[32];
    size_t n;
    int err;

    if ((err = proc_read_u64(u->p, interp + L->is_modules, &modules)) != REMORA_OK)
        return err;
    if ((err = tn_dict_items(u, pn, modules, TN_MAX_SCAN, &n)) != REMORA_OK)
        return err;
    threading = tn_kv_find(u, pn, n, "threading", &pn->k_threading, NULL, NULL);
    if (threading == 0 || threading % 8 != 0)
        return REMORA_ECORRUPT;     /* not imported (yet) */
    if ((err = proc_read(u->p, threading, h, sizeof h)) != REMORA_OK)
        return err;
    if (get_u64(h, L->ob_type) != t->module_type)
        return REMORA_ECORRUPT;
    md = get_u64(h, L->md_dict);
    if ((err = tn_dict_items(u, pn, md, TN_MAX_SCAN, &n)) != REMORA_OK)
        return err;
    *active = tn_kv_find(u, pn, n, "_active", &pn->k_active, NULL, NULL);
    return *active != 0 && *active % 8 == 0 ? REMORA_OK : REMORA_ECORRUPT;
}

/* One scan of the _active dict at 'active': each item not read yet whose hash an entry
 * holds becomes IT_FOUND (its int and Thread). *moved: the dict's table was replaced or
 * gained entries meanwhile, or part of it could not be read, or nothing was found in it
 * while nothing is named yet (any_named 0): an item not found may be there. 0, or a
 * code: REMORA_ECORRUPT when the dict fails a check. */
static int scan_active(unwinder_t *u, thread_names_t *pn, uint64_t active, int any_named, int *moved)
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
    if (pyo_keys(L, h, sizeof h, &dk) != REMORA_OK || dk.esz != TN_ESZ)
        return REMORA_ECORRUPT;     /* DICT_KEYS_GENERAL: entries hold their hash */
    nent = dk.nent;
    entries = keys + dk.entries;
    room = (dk.size << 1) / 3;       /* USABLE_FRACTION */
    /* The whole room of entries the table has (CPython allocates USABLE_FRACTION of its
     * size, zeroed), not only dk_nentries: a table being built (3.9 and 3.10 point the
     * dict to it first, copy the entries, then set dk_nentries) says 0 while its entries
     * are there, and an entry added as it is read is seen. */
    nscan = room < TN_MAX_ENTRIES ? room : TN_MAX_ENTRIES;
    pn->st.unscanned = (uint64_t)nent > nscan ? (uint64_t)nent - nscan : 0;
    for (off = 0; off < nscan; off += TN_CHUNK) {
        size_t k = nscan - off < TN_CHUNK ? (size_t)(nscan - off) : TN_CHUNK, i;
        err = proc_read(u->p, entries + off * TN_ESZ, pn->ents, k * TN_ESZ);
        if (err == REMORA_ENOPROC)
            return err;
        if (err) {
            *moved = 1;             /* freed (the table was replaced): scan it again */
            return REMORA_OK;
        }
        for (i = 0; i < k; i++) {
            uint64_t hash = get_u64(pn->ents, i * TN_ESZ);
            uint64_t key = get_u64(pn->ents, i * TN_ESZ + dk.koff);
            uint64_t value = get_u64(pn->ents, i * TN_ESZ + dk.voff);
            tn_item_t *it;
            if (key == 0 || key % 8 != 0 || value == 0 || value % 8 != 0 || hash >= TN_M61 ||
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

/* Reads the registry into the table not current, then makes it current. 0, or a code:
 * the current table is then empty. */
static int tn_read(unwinder_t *u, thread_names_t *pn, uint64_t interp)
{
    const py_layout_t *L = &u->target->layout;
    const py_target_t *T = u->target;
    tn_table_t *t = &pn->t[!pn->cur], *old = &pn->t[pn->cur];
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
    for (tries = 0; err == REMORA_OK && tries < TN_TRIES; tries++) {
        int moved = 0;
        pn->st.scans++;
        for (i = 0; i < pn->nitems; i++)
            if (pn->items[i].state == IT_FOUND || pn->items[i].state == IT_TORN)
                pn->items[i].state = IT_WANTED;
        err = scan_active(u, pn, active, t->n > 0, &moved);
        if (err == REMORA_OK)
            err = tn_follow(u, pn, t);
        else if (err != REMORA_ENOPROC && err != REMORA_ENOMEM)
            err = REMORA_OK, moved = 1;     /* a table read as it was replaced: again */
        if (err)
            break;
        left = 0;
        for (i = 0; i < pn->nitems; i++) {
            tn_item_t *it = &pn->items[i];
            if (it->state == IT_WANTED && !moved)
                it->state = IT_DONE;        /* not in the registry */
            left += it->state == IT_WANTED || it->state == IT_TORN;
        }
        if (left == 0)
            break;
    }
    if (err == REMORA_OK && left > 0) {
        /* read as the registry moved every time: the last reading's name, if it was read
         * from the same Thread; else, for a thread renamed all the while, TN_MOVING (in
         * the registry, its name not known: not the kernel's name, which it no longer
         * has); else nothing (the kernel's name) */
        pn->st.torn += (uint64_t)left;
        for (i = 0; i < pn->nitems; i++) {
            tn_item_t *it = &pn->items[i];
            const tn_name_t *e;
            if ((it->state != IT_TORN && it->state != IT_WANTED) || it->value == 0)
                continue;
            if ((e = tab_find(old, it->ident, it->value)) != NULL)
                err = tn_tab_add(t, it->ident, it->value, old->text + e->off, strlen(old->text + e->off),
                              e->moving);
            else if (it->moving)
                err = tn_tab_add(t, it->ident, it->value, TN_MOVING, strlen(TN_MOVING), 1);
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
static int items_set(thread_names_t *pn, const uint64_t *idents, size_t n)
{
    size_t i, k = 0;

    if (remora_grow((void **)&pn->items, &pn->cap_items, n, sizeof *pn->items))
        return REMORA_ENOMEM;
    for (i = 0; i < n; i++) {
        if (idents[i] == 0)
            continue;
        memset(&pn->items[k], 0, sizeof pn->items[k]);
        pn->items[k].ident = idents[i];
        pn->items[k].hash = idents[i] % TN_M61;
        k++;
    }
    if (k > 1)
        qsort(pn->items, k, sizeof *pn->items, cmp_item);
    for (i = 0, pn->nitems = 0; i < k; i++)
        if (pn->nitems == 0 || pn->items[pn->nitems - 1].hash != pn->items[i].hash)
            pn->items[pn->nitems++] = pn->items[i];
    return REMORA_OK;
}

const char *tn_lookup(const thread_names_t *pn, uint64_t ident)
{
    const tn_name_t *e = tab_find(&pn->t[pn->cur], ident, 0);

    return e != NULL ? pn->t[pn->cur].text + e->off : NULL;
}

/* Has the thread 'ident' a name from the last reading (TN_MOVING is none)? */
static int named(const thread_names_t *pn, uint64_t ident)
{
    const tn_name_t *e = tab_find(&pn->t[pn->cur], ident, 0);

    return e != NULL && !e->moving;
}

static int seen_has(const thread_names_t *pn, uint64_t ident)
{
    return pn->nseen != 0 && bsearch(&ident, pn->seen, pn->nseen, sizeof *pn->seen, cmp_u64) != NULL;
}

int tn_update(unwinder_t *u, thread_names_t *pn, uint64_t interp, const uint64_t *idents, size_t n,
               int force)
{
    int64_t now = remora_now_ns();
    int fresh = force || !pn->done || now - pn->last_ns >= TN_REFRESH_NS;
    uint64_t reads0;
    size_t i;
    int err;

    if (!fresh && now - pn->last_ns >= TN_NEW_NS) {
        for (i = 0; i < n && !fresh; i++)
            fresh = idents[i] != 0 && !seen_has(pn, idents[i]);
        if (fresh) {
            pn->retries = 0;
        } else if (pn->retries < TN_RETRIES) {
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
        err = tn_read(u, pn, interp);
    if (err != REMORA_OK && err != REMORA_ENOPROC && err != REMORA_ENOMEM && err != REMORA_EVERSION)
        err = tn_read(u, pn, interp);      /* once more: read as it changed, maybe */
    pn->st.reads += proc_stats(u->p)->reads - reads0;
    pn->st.ns += (uint64_t)(remora_now_ns() - now);
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

void tn_get_stats(const thread_names_t *pn, tn_stats_t *out)
{
    *out = pn->st;
}
