/* util/search.c — the binary search over sorted address ranges (segments, mappings,
 * functions) that the readers of cores, snapshots and C stacks share. Reads only the
 * array it is given.
 */
#include <stdint.h>
#include <string.h>

#include "util.h"

size_t remora_upper_u64(const void *base, size_t n, size_t size, size_t off, uint64_t key)
{
    const unsigned char *b = base;
    size_t lo = 0, hi = n;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        uint64_t v;
        memcpy(&v, b + mid * size + off, sizeof v);     /* (no cast of a struct's field) */
        if (v <= key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}
