/* util/grow.c — growing arrays, shared by every layer. */
#include <stdint.h>
#include <stdlib.h>

#include "util.h"

int remora_grow_to(void **v, size_t *cap, size_t need, size_t elem)
{
    size_t ncap;
    void *nv;

    if (need <= *cap)
        return 0;
    ncap = *cap ? *cap : 16;
    while (ncap < need) {
        if (ncap > SIZE_MAX / 2)
            return -1;
        ncap *= 2;
    }
    if (elem != 0 && ncap > SIZE_MAX / elem)
        return -1;
    nv = realloc(*v, ncap * elem);
    if (nv == NULL)
        return -1;
    *v = nv;
    *cap = ncap;
    return 0;
}
