/* util/strtab.c — interned strings with stable addresses.
 *
 * An open-addressing table of pointers into arena blocks that never move. Memory grows
 * with the number of distinct strings, never with the number of lookups.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#define STRTAB_BLOCK (64u * 1024)

typedef struct block {
    struct block *next;
    size_t used, cap;
    char data[];
} block_t;

struct strtab {
    const char **slots;
    uint32_t *hashes;
    size_t cap, count;
    block_t *blocks;
    size_t bytes;
};

static uint32_t hash(const char *s, size_t len)
{
    uint32_t h = 2166136261u;   /* FNV-1a */
    size_t i;

    for (i = 0; i < len; i++) {
        h ^= (unsigned char)s[i];
        h *= 16777619u;
    }
    return h ? h : 1;
}

strtab_t *strtab_new(void)
{
    strtab_t *st = calloc(1, sizeof *st);

    if (st == NULL)
        return NULL;
    st->cap = 1024;
    st->slots = calloc(st->cap, sizeof *st->slots);
    st->hashes = calloc(st->cap, sizeof *st->hashes);
    if (st->slots == NULL || st->hashes == NULL) {
        strtab_free(st);
        return NULL;
    }
    return st;
}

void strtab_free(strtab_t *st)
{
    block_t *b, *n;

    if (st == NULL)
        return;
    for (b = st->blocks; b != NULL; b = n) {
        n = b->next;
        free(b);
    }
    free(st->slots);
    free(st->hashes);
    free(st);
}

size_t strtab_bytes(const strtab_t *st)
{
    return st->bytes;
}

static char *store(strtab_t *st, const char *s, size_t len)
{
    block_t *b = st->blocks;
    char *r;

    if (b == NULL || b->cap - b->used < len + 1) {
        size_t cap = len + 1 > STRTAB_BLOCK ? len + 1 : STRTAB_BLOCK;
        b = malloc(sizeof *b + cap);
        if (b == NULL)
            return NULL;
        b->used = 0;
        b->cap = cap;
        b->next = st->blocks;
        st->blocks = b;
        st->bytes += sizeof *b + cap;
    }
    r = b->data + b->used;
    memcpy(r, s, len);
    r[len] = '\0';
    b->used += len + 1;
    return r;
}

static int grow(strtab_t *st)
{
    size_t ncap = st->cap * 2, i;
    const char **ns = calloc(ncap, sizeof *ns);
    uint32_t *nh = calloc(ncap, sizeof *nh);

    if (ns == NULL || nh == NULL) {
        free(ns);
        free(nh);
        return -1;
    }
    for (i = 0; i < st->cap; i++) {
        size_t j;
        if (st->slots[i] == NULL)
            continue;
        for (j = st->hashes[i] & (ncap - 1); ns[j] != NULL; j = (j + 1) & (ncap - 1))
            ;
        ns[j] = st->slots[i];
        nh[j] = st->hashes[i];
    }
    free(st->slots);
    free(st->hashes);
    st->slots = ns;
    st->hashes = nh;
    st->cap = ncap;
    return 0;
}

const char *strtab_intern(strtab_t *st, const char *s, size_t len)
{
    const char *nul = memchr(s, '\0', len);
    uint32_t h;
    size_t i;
    char *r;

    if (nul != NULL)
        len = (size_t)(nul - s);
    h = hash(s, len);
    for (i = h & (st->cap - 1); st->slots[i] != NULL; i = (i + 1) & (st->cap - 1))
        if (st->hashes[i] == h && strncmp(st->slots[i], s, len) == 0 && st->slots[i][len] == '\0')
            return st->slots[i];
    if ((st->count + 1) * 4 > st->cap * 3) {
        if (grow(st) != 0)
            return NULL;
        for (i = h & (st->cap - 1); st->slots[i] != NULL; i = (i + 1) & (st->cap - 1))
            ;
    }
    r = store(st, s, len);
    if (r == NULL)
        return NULL;
    st->slots[i] = r;
    st->hashes[i] = h;
    st->count++;
    return r;
}
