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
    strtab_t *t = calloc(1, sizeof *t);

    if (t == NULL)
        return NULL;
    t->cap = 1024;
    t->slots = calloc(t->cap, sizeof *t->slots);
    t->hashes = calloc(t->cap, sizeof *t->hashes);
    if (t->slots == NULL || t->hashes == NULL) {
        strtab_free(t);
        return NULL;
    }
    return t;
}

void strtab_free(strtab_t *t)
{
    block_t *b, *n;

    if (t == NULL)
        return;
    for (b = t->blocks; b != NULL; b = n) {
        n = b->next;
        free(b);
    }
    free(t->slots);
    free(t->hashes);
    free(t);
}

size_t strtab_bytes(const strtab_t *t)
{
    return t->bytes;
}

static char *store(strtab_t *t, const char *s, size_t len)
{
    block_t *b = t->blocks;
    char *r;

    if (b == NULL || b->cap - b->used < len + 1) {
        size_t cap = len + 1 > STRTAB_BLOCK ? len + 1 : STRTAB_BLOCK;
        b = malloc(sizeof *b + cap);
        if (b == NULL)
            return NULL;
        b->used = 0;
        b->cap = cap;
        b->next = t->blocks;
        t->blocks = b;
        t->bytes += sizeof *b + cap;
    }
    r = b->data + b->used;
    memcpy(r, s, len);
    r[len] = '\0';
    b->used += len + 1;
    return r;
}

static int grow(strtab_t *t)
{
    size_t ncap = t->cap * 2, i;
    const char **ns = calloc(ncap, sizeof *ns);
    uint32_t *nh = calloc(ncap, sizeof *nh);

    if (ns == NULL || nh == NULL) {
        free(ns);
        free(nh);
        return -1;
    }
    for (i = 0; i < t->cap; i++) {
        size_t j;
        if (t->slots[i] == NULL)
            continue;
        for (j = t->hashes[i] & (ncap - 1); ns[j] != NULL; j = (j + 1) & (ncap - 1))
            ;
        ns[j] = t->slots[i];
        nh[j] = t->hashes[i];
    }
    free(t->slots);
    free(t->hashes);
    t->slots = ns;
    t->hashes = nh;
    t->cap = ncap;
    return 0;
}

const char *strtab_intern(strtab_t *t, const char *s, size_t len)
{
    const char *nul = memchr(s, '\0', len);
    uint32_t h;
    size_t i;
    char *r;

    if (nul != NULL)
        len = (size_t)(nul - s);
    h = hash(s, len);
    for (i = h & (t->cap - 1); t->slots[i] != NULL; i = (i + 1) & (t->cap - 1))
        if (t->hashes[i] == h && strncmp(t->slots[i], s, len) == 0 && t->slots[i][len] == '\0')
            return t->slots[i];
    if ((t->count + 1) * 4 > t->cap * 3) {
        if (grow(t) != 0)
            return NULL;
        for (i = h & (t->cap - 1); t->slots[i] != NULL; i = (i + 1) & (t->cap - 1))
            ;
    }
    r = store(t, s, len);
    if (r == NULL)
        return NULL;
    t->slots[i] = r;
    t->hashes[i] = h;
    t->count++;
    return r;
}
