/* unwind/thread_names_follow.c — Python thread names: from each _active entry found to its
 * Thread's name (tn_follow()), step by step, each step one vectored read over every
 * thread: the ints, the Thread objects and their types, where each keeps its attributes,
 * the name's slot, then the names, each read between two readings of its slot. Every
 * object is decoded by pyobj.c; the reasons for each check are in thread_names.c's banner.
 */
#include <stdlib.h>
#include <string.h>

#include "remora.h"
#include "internal.h"
#include "thread_names_int.h"

/* per item and round: its heads (a bracket each), then its slot readings, the int's
 * head, the type, the values' header */
enum { C_INT = 0, C_TYPE = TN_HEAD, C_VALID = C_TYPE + 8, C_LEN = C_VALID + 8 };
/* the bytes of an item whose round reads nb heads (its brackets) */
#define TN_ITEM_BYTES(nb) ((nb) * TN_STR_HEAD + ((nb) + 1) * 8 + C_LEN)

/* A PyLongObject's value as a u64 (its first TN_HEAD bytes in h): 0 when negative,
 * too large or not an int. */
static uint64_t long_value(const unwinder_t *u, const unsigned char *h)
{
    uint64_t v;

    return pyo_long(u, h, TN_HEAD, &v) == REMORA_OK ? v : 0;
}

/* The type of a Thread (a heap type): flags, basic size, dict offset, and where "_name"
 * lies in the keys its instances share. NULL when it cannot be read. */
static tn_type_t *thread_type(unwinder_t *u, thread_names_t *pn, uint64_t addr)
{
    const py_layout_t *L = &u->target->layout;
    unsigned char h[1024];
    tn_type_t *ty;
    size_t i, n;
    int idx = -1;

    for (i = 0; i < pn->ntypes; i++)
        if (pn->types[i].addr == addr)
            return &pn->types[i];
    if (pn->ntypes == TN_TYPES || addr == 0 || addr % 8 != 0 || L->ht_cached_keys + 8 > sizeof h ||
        proc_read(u->p, addr, h, L->ht_cached_keys + 8) != REMORA_OK)
        return NULL;
    ty = &pn->types[pn->ntypes];
    ty->addr = addr;
    if (pyo_type(L, h, L->ht_cached_keys + 8, &ty->t) != REMORA_OK || ty->t.basicsize > TN_BASICSIZE)
        return NULL;                /* not a heap type: not a threading.Thread */
    if (L->inst_dict != PY_INST_DICTOFFSET ? !ty->t.managed :
        ty->t.dictoffset <= 0 || ty->t.dictoffset + 8 > TN_HEAD)
        return NULL;                /* no dict where one is looked for */
    if (ty->t.keys != 0 && tn_keys_items(u, pn, ty->t.keys, 0, TN_SLOTS, &n) == REMORA_OK)
        tn_kv_find(u, pn, n, "_name", &pn->k_name, &idx, NULL);
    ty->name_idx = idx;
    pn->ntypes++;
    return ty;
}

/* The name str of a Thread found through its attribute dict (the slow way); *slot:
 * where it was read. */
static uint64_t name_in_dict(unwinder_t *u, thread_names_t *pn, uint64_t dict, uint64_t *slot)
{
    size_t n;

    if (tn_dict_items(u, pn, dict, TN_SLOTS, &n) != REMORA_OK)
        return 0;
    return tn_kv_find(u, pn, n, "_name", &pn->k_name, NULL, slot);
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
static void cand_add(tn_item_t *it, uint64_t x)
{
    int i, at = it->ncand < TN_CANDS ? it->ncand : TN_CANDS - 1;

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

/* The ints: each IT_FOUND item whose int no longer holds its ident is IT_TORN. */
static int follow_ints(unwinder_t *u, thread_names_t *pn)
{
    const size_t stride = sizeof *pn->items / 8;
    tn_item_t *it;
    size_t i;
    int err;

    /* the ints: the ident each holds */
    ITEMS_AT(pn, IT_FOUND, it->key);
    if ((err = tn_read_heads(u->p, pn, &pn->items[0].a, stride, pn->nitems, TN_HEAD)))
        return err;
    for (i = 0; i < pn->nitems; i++) {
        it = &pn->items[i];
        if (it->state == IT_FOUND && long_value(u, pn->buf + i * TN_HEAD) != it->ident)
            it->state = IT_TORN;
    }
    return REMORA_OK;
}

/* The Thread objects (with the bytes before them: the managed dict's pointers) and
 * their types: where each keeps its attributes (it->dict, or it->vbase and it->idx). */
static int follow_threads(unwinder_t *u, thread_names_t *pn)
{
    const py_layout_t *L = &u->target->layout;
    const size_t stride = sizeof *pn->items / 8;
    tn_item_t *it;
    size_t i;
    int err;

    /* the Thread objects, from the bytes before them (the managed dict's pointers) */
    ITEMS_AT(pn, IT_FOUND, it->value > L->inst_pre ? it->value - L->inst_pre : 0);
    if ((err = tn_read_heads(u->p, pn, &pn->items[0].a, stride, pn->nitems, L->inst_pre + TN_HEAD)))
        return err;
    for (i = 0; i < pn->nitems; i++) {
        const unsigned char *h = pn->buf + i * (L->inst_pre + TN_HEAD);
        it = &pn->items[i];
        if (it->state != IT_FOUND)
            continue;
        it->type = get_u64(h, L->inst_pre + L->ob_type);
        memcpy(it->obj, h, L->inst_pre + TN_HEAD);
        it->dict = it->vbase = it->name = it->slot = 0;
        it->idx = -1;
    }
    /* their types (thread_type() reads into pn->buf), where each keeps its attributes */
    for (i = 0; i < pn->nitems; i++) {
        tn_type_t *ty;
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
            if (dict_at - it->value + 8 <= TN_HEAD)
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
    return REMORA_OK;
}

/* An attribute dict that holds the type's shared keys: its values[] names the thread
 * too. */
static int follow_shared(unwinder_t *u, thread_names_t *pn)
{
    const py_layout_t *L = &u->target->layout;
    const py_target_t *T = u->target;
    const size_t stride = sizeof *pn->items / 8;
    tn_item_t *it;
    size_t i;
    int err;

    /* a dict of the type's shared keys: its values[] names it too */
    ITEMS_AT(pn, IT_FOUND, it->dict);
    if ((err = tn_read_heads(u->p, pn, &pn->items[0].a, stride, pn->nitems, 48)))
        return err;
    for (i = 0; i < pn->nitems; i++) {
        const unsigned char *h = pn->buf + i * 48;
        tn_type_t *ty = NULL;
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
    return REMORA_OK;
}

/* Where each name is (it->slot) and the str it points to (it->name). */
static int follow_slots(unwinder_t *u, thread_names_t *pn)
{
    const py_layout_t *L = &u->target->layout;
    const size_t vlen = 8 + 8 * TN_SLOTS;
    tn_item_t *it;
    size_t i, k;
    int err;

    /* the name str pointers: through the dict (the slow way), or values[idx] (3.13+:
     * after the header, and 'valid'), in one vectored read */
    for (i = 0; i < pn->nitems; i++) {
        it = &pn->items[i];
        if (it->state != IT_FOUND)
            continue;
        if (it->dict != 0) {
            if ((it->name = name_in_dict(u, pn, it->dict, &it->slot)) == 0)
                it->state = IT_TORN;
        } else if (it->vbase == 0 || it->vbase % 8 != 0 || it->idx < 0 || it->idx >= TN_SLOTS) {
            it->state = IT_TORN;
        }
    }
    if (tn_buf_need(pn, pn->nitems * vlen) ||
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
    return REMORA_OK;
}

/* Where an item's bytes of this round are (at it->boff): its it->nb heads, returned,
 * then its slot readings (*sl), then the int, type and values' header (*c). */
static unsigned char *item_area(thread_names_t *pn, const tn_item_t *it, unsigned char **sl,
                                unsigned char **c)
{
    unsigned char *b = pn->buf + it->boff;

    *sl = b + it->nb * TN_STR_HEAD;
    *c = *sl + (it->nb + 1) * 8;
    return b;
}

/* One round's reads into pn->iov[0..*k): for each IT_FOUND item, its it->nb heads,
 * each between two readings of its slot, then its int, its type and its values'
 * header. */
static void round_request(const unwinder_t *u, thread_names_t *pn, size_t *kout)
{
    const py_layout_t *L = &u->target->layout;
    tn_item_t *it;
    size_t i, k;

    for (i = 0, k = 0; i < pn->nitems; i++) {
        unsigned char *b, *sl, *c;
        size_t j, nb;
        it = &pn->items[i];
        if (it->state != IT_FOUND)
            continue;
        nb = it->nb;
        b = item_area(pn, it, &sl, &c);
        memset(b, 0, TN_ITEM_BYTES(nb));
        for (j = 0; j < nb; j++) {
            pn->iov[k++] = (proc_iov_t){ .addr = it->slot, .buf = sl + 8 * j, .len = 8 };
            pn->iov[k++] = (proc_iov_t){ .addr = it->cand[j % it->ncand],
                                         .buf = b + j * TN_STR_HEAD, .len = TN_STR_HEAD };
        }
        pn->iov[k++] = (proc_iov_t){ .addr = it->slot, .buf = sl + 8 * nb, .len = 8 };
        pn->iov[k++] = (proc_iov_t){ .addr = it->key, .buf = c + C_INT, .len = TN_HEAD };
        pn->iov[k++] = (proc_iov_t){ .addr = it->value + L->ob_type, .buf = c + C_TYPE, .len = 8 };
        if (it->vbase != 0 && it->dict == 0 && L->dv_values >= 8)
            pn->iov[k++] = (proc_iov_t){ .addr = it->vbase, .buf = c + C_VALID, .len = 8 };
        else
            c[C_VALID + 3] = 1;
    }
    *kout = k;
}

/* Judges one round's reads: an item whose str was its name all the while it was read
 * is added to t (IT_NAMED); one whose slot moved stays IT_FOUND (*pending: another
 * round), its candidates the addresses the slot held; any other IT_TORN. 0 or
 * REMORA_ENOMEM. */
static int round_judge(unwinder_t *u, thread_names_t *pn, tn_table_t *t, int *pending)
{
    const py_layout_t *L = &u->target->layout;
    const py_target_t *T = u->target;
    char name[TN_NAME_BYTES];
    tn_item_t *it;
    size_t i;
    int err;

    for (i = 0; i < pn->nitems; i++) {
        unsigned char *b, *sl, *c;
        uint64_t now, last;
        size_t j, nb, len;
        int moved = 0, named = 0;
        it = &pn->items[i];
        if (it->state != IT_FOUND)
            continue;
        nb = it->nb;
        b = item_area(pn, it, &sl, &c);
        if (long_value(u, c + C_INT) != it->ident || get_u64(c, C_TYPE) != it->type ||
            c[C_VALID + 3] == 0) {
            it->state = IT_TORN;    /* not the entry read: the scan again */
            continue;
        }
        for (j = 0; j < nb && !named; j++) {
            const unsigned char *h = b + j * TN_STR_HEAD;
            uint64_t x = it->cand[j % it->ncand];
            if (get_u64(sl, 8 * j) != x || get_u64(sl, 8 * (j + 1)) != x)
                continue;           /* not its name all the while it was read */
            if (get_u64(h, L->ob_type) == T->str_type && str_whole(L, h, TN_STR_HEAD) &&
                (pystr_from_head(NULL, L, x, h, TN_STR_HEAD, name, sizeof name,
                                 &len) == REMORA_OK ||
                 /* longer than its head: the rest read, then the slot again */
                 (pystr_from_head(u->p, L, x, h, TN_STR_HEAD, name, sizeof name,
                                  &len) == REMORA_OK &&
                  proc_read_u64(u->p, it->slot, &now) == REMORA_OK && now == x))) {
                if ((err = tn_tab_add(t, it->ident, it->value, name, len, 0)) != REMORA_OK)
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
            *pending = 1;            /* renamed meanwhile: the new strs too */
        else
            it->state = IT_TORN;    /* still, and no str: the scan again */
    }
    return REMORA_OK;
}

/* The names: each str's first bytes read between two readings of the slot it was
 * read from, in one vectored read (the kernel reads the segments in order), with the
 * int, the Thread's type and the values' 'valid' byte. Both readings of the slot
 * must point to the str: it was the thread's name then, so what lay between is its
 * text, unless the thread was renamed twice within one system call (the allocator
 * gives a freed name's memory to the next name: a name read once, the slot checked
 * once after, can catch the next-but-one name being built there).
 * A slot that moved (the thread renamed meanwhile) is followed, at most
 * TN_NAME_ROUNDS rounds. Not only to the str it pointed to last: a thread renamed in
 * a loop has freed that one by the next system call (seen on 3.13: the slot pointed
 * elsewhere at the start of each of 64 rounds, and the thread kept the kernel's
 * name), while the allocator makes its next names where its last ones were. So each
 * round after the first reads every address the slot held in this reading (the
 * TN_CANDS last), twice over, each between two readings of the slot: a str is taken
 * when the slot pointed to it at both ends of its own read. */
static int follow_names(unwinder_t *u, thread_names_t *pn, tn_table_t *t)
{
    tn_item_t *it;
    size_t i, k, need;
    int round, pending = 1, err;

    for (i = 0; i < pn->nitems; i++)
        if (pn->items[i].state == IT_FOUND) {
            pn->items[i].cand[0] = pn->items[i].name;
            pn->items[i].ncand = 1;
        }
    if (remora_grow((void **)&pn->iov, &pn->cap_iov, (4 * TN_CANDS + 4) * pn->nitems,
                    sizeof *pn->iov))
        return REMORA_ENOMEM;
    for (round = 0; round < TN_NAME_ROUNDS && pending; round++) {
        pending = 0;
        /* each item's bytes at it->boff: one head in the first round, then two per
         * address the slot held */
        for (i = 0, need = 0; i < pn->nitems; i++) {
            it = &pn->items[i];
            if (it->state != IT_FOUND)
                continue;
            it->nb = round == 0 ? 1 : 2 * (size_t)it->ncand;
            it->boff = need;
            need += TN_ITEM_BYTES(it->nb);
        }
        if (tn_buf_need(pn, need))
            return REMORA_ENOMEM;
        round_request(u, pn, &k);
        if ((err = pyo_readv_zero(u->p, pn->iov, k)))
            return err;
        if ((err = round_judge(u, pn, t, &pending)))
            return err;
    }
    /* renamed through every round: its name was moving */
    for (i = 0; i < pn->nitems; i++)
        if (pn->items[i].state == IT_FOUND) {
            pn->items[i].state = IT_TORN;
            pn->items[i].moving = 1;
        }
    return REMORA_OK;
}

int tn_follow(unwinder_t *u, thread_names_t *pn, tn_table_t *t)
{
    int err;

    if (pn->nitems == 0)            /* nothing to follow (and items may be NULL) */
        return REMORA_OK;
    if ((err = follow_ints(u, pn)) || (err = follow_threads(u, pn)) ||
        (err = follow_shared(u, pn)) || (err = follow_slots(u, pn)))
        return err;
    return follow_names(u, pn, t);
}
