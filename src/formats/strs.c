/* formats/strs.c — a string table for the writers whose formats refer to strings by index
 * (pprof, the Firefox Profiler): interned strings (equal strings are one pointer) get
 * indexes 0, 1, 2... in the order first asked for. */
#include <stdint.h>
#include <stdlib.h>

#include "remora.h"
#include "out.h"
#include "../util/util.h"

static size_t slot_of(const out_strs_t *s, const char *p)
{
    uint64_t h = (uint64_t)(uintptr_t)p * 0x9e3779b97f4a7c15ull;

    return (size_t)(h >> 20) & (s->nslots - 1);
}

static const char empty[] = "";

uint32_t out_strs_index(out_strs_t *s, const char *str)
{
    size_t i;

    if (s->oom)
        return 0;
    if (str == NULL || str[0] == '\0')
        str = empty;                /* every "" is one string */
    if (2 * (s->n + 1) > s->nslots) {
        size_t nslots = s->nslots ? s->nslots * 2 : 1024, j;
        uint32_t *slots = calloc(nslots, sizeof *slots);
        if (slots == NULL) {
            s->oom = 1;
            return 0;
        }
        free(s->slots);
        s->slots = slots;
        s->nslots = nslots;
        for (j = 0; j < s->n; j++) {
            i = slot_of(s, s->v[j]);
            while (slots[i] != 0)
                i = (i + 1) & (nslots - 1);
            slots[i] = (uint32_t)j + 1;
        }
    }
    for (i = slot_of(s, str); s->slots[i] != 0; i = (i + 1) & (s->nslots - 1))
        if (s->v[s->slots[i] - 1] == str)
            return s->slots[i] - 1;
    if (remora_grow((void **)&s->v, &s->cap, s->n + 1, sizeof *s->v)) {
        s->oom = 1;
        return 0;
    }
    s->v[s->n] = str;
    s->slots[i] = (uint32_t)++s->n;
    return (uint32_t)s->n - 1;
}

void out_strs_free(out_strs_t *s)
{
    free(s->v);
    free(s->slots);
    s->v = NULL;
    s->slots = NULL;
    s->n = s->cap = s->nslots = 0;
}
