/* formats/marshal.c — the few objects of Python's marshal format that a pstats file
 * holds (CPython's Python/marshal.c, version 4 as every Python 3.4+ reads it): dicts,
 * tuples, ints, floats and strings. No references (FLAG_REF is never set), so each object
 * stands alone. Multi-byte fields are little-endian whatever the host.
 */
#include <string.h>

#include "out.h"

static void put_u32(FILE *f, uint32_t v)
{
    fputc((int)(v & 0xff), f);
    fputc((int)(v >> 8 & 0xff), f);
    fputc((int)(v >> 16 & 0xff), f);
    fputc((int)(v >> 24 & 0xff), f);
}

void out_marshal_int(FILE *f, int64_t v)
{
    uint64_t m;
    uint16_t digits[5];             /* 15 bits each: 64 bits need 5 */
    int32_t n = 0;

    if (v >= INT32_MIN && v <= INT32_MAX) {
        fputc('i', f);                                  /* TYPE_INT */
        put_u32(f, (uint32_t)(int32_t)v);
        return;
    }
    /* TYPE_LONG: the digit count (negative for a negative number), then the magnitude's
     * 15-bit digits, least significant first */
    m = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    while (m != 0) {
        digits[n++] = (uint16_t)(m & 0x7fff);
        m >>= 15;
    }
    fputc('l', f);
    put_u32(f, (uint32_t)(v < 0 ? -n : n));
    for (int32_t i = 0; i < n; i++) {
        fputc(digits[i] & 0xff, f);
        fputc(digits[i] >> 8, f);
    }
}

void out_marshal_float(FILE *f, double v)
{
    uint64_t bits;

    memcpy(&bits, &v, sizeof bits);
    fputc('g', f);                                      /* TYPE_BINARY_FLOAT */
    put_u32(f, (uint32_t)bits);
    put_u32(f, (uint32_t)(bits >> 32));
}

/* Writes (f not NULL) or only measures s as valid UTF-8: each byte that does not start a
 * valid sequence becomes U+FFFD. Stops before 'limit' bytes of output would be passed.
 * Returns the output's length; *ascii tells whether it is all ASCII. */
static size_t clean_utf8(FILE *f, const char *str, size_t limit, int *ascii)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t n = strlen(str), out = 0;

    *ascii = 1;
    while (n > 0) {
        size_t k = out_utf8_len(s, n), w = k ? k : 3;
        if (out + w > limit)
            break;
        if (f != NULL && k)
            fwrite(s, 1, k, f);
        else if (f != NULL)
            fputs("\xef\xbf\xbd", f);                   /* U+FFFD */
        if (!k || s[0] >= 0x80)
            *ascii = 0;
        out += w;
        k = k ? k : 1;
        s += k;
        n -= k;
    }
    return out;
}

void out_marshal_str(FILE *f, const char *s)
{
    int ascii;
    size_t n = clean_utf8(NULL, s ? s : "", INT32_MAX, &ascii);

    if (ascii && n < 256) {
        fputc('z', f);                                  /* TYPE_SHORT_ASCII */
        fputc((int)n, f);
    } else {
        fputc(ascii ? 'a' : 'u', f);                    /* TYPE_ASCII, TYPE_UNICODE */
        put_u32(f, (uint32_t)n);
    }
    clean_utf8(f, s ? s : "", INT32_MAX, &ascii);
}

void out_marshal_tuple(FILE *f, uint32_t n)
{
    if (n < 256) {
        fputc(')', f);                                  /* TYPE_SMALL_TUPLE */
        fputc((int)n, f);
    } else {
        fputc('(', f);                                  /* TYPE_TUPLE */
        put_u32(f, n);
    }
}

void out_marshal_dict(FILE *f)
{
    fputc('{', f);                                      /* TYPE_DICT */
}

void out_marshal_dict_end(FILE *f)
{
    fputc('0', f);                                      /* TYPE_NULL ends a dict */
}
