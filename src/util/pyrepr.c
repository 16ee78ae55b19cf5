/* util/pyrepr.c — Python's repr() of ints, floats, str and bytes, made from their parts
 * (30-bit digits, a double, code points, bytes) as CPython's own repr would write them.
 * Pure: reads nothing but its arguments. Everything is written into a bounded buffer
 * that, once full, drops the rest and ends in "..." (pyr_end()).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"
#include "printable.h"

void pyr_init(pyr_buf_t *b, char *s, size_t cap)
{
    b->s = s;
    b->len = 0;
    b->cap = cap;
    b->full = cap < 5;
    if (cap > 0)
        s[0] = '\0';
}

void pyr_putn(pyr_buf_t *b, const char *s, size_t n)
{
    if (b->full)
        return;
    if (b->len + n + 4 > b->cap) {      /* room kept for "..." and the NUL */
        b->full = 1;
        return;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

void pyr_puts(pyr_buf_t *b, const char *s)
{
    pyr_putn(b, s, strlen(s));
}

const char *pyr_end(pyr_buf_t *b)
{
    if (b->cap == 0)
        return "";
    if (b->full && b->cap >= 4) {
        if (b->len + 4 > b->cap)
            b->len = b->cap - 4;
        memcpy(b->s + b->len, "...", 4);
        b->len += 3;
    }
    return b->s;
}

int pyr_printable(uint32_t c)
{
    size_t lo = 0, hi = sizeof pyr_unprintable / sizeof pyr_unprintable[0];

    if (c >= 0x20 && c < 0x7f)
        return 1;
    if (c > 0x10ffff)
        return 0;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (c < pyr_unprintable[mid][0])
            hi = mid;
        else if (c > pyr_unprintable[mid][1])
            lo = mid + 1;
        else
            return 0;
    }
    return 1;
}

static void put_utf8(pyr_buf_t *b, uint32_t c)
{
    char o[4];
    size_t n;

    if (c < 0x80) {
        o[0] = (char)c;
        n = 1;
    } else if (c < 0x800) {
        o[0] = (char)(0xc0 | c >> 6);
        o[1] = (char)(0x80 | (c & 0x3f));
        n = 2;
    } else if (c < 0x10000) {
        o[0] = (char)(0xe0 | c >> 12);
        o[1] = (char)(0x80 | ((c >> 6) & 0x3f));
        o[2] = (char)(0x80 | (c & 0x3f));
        n = 3;
    } else {
        o[0] = (char)(0xf0 | c >> 18);
        o[1] = (char)(0x80 | ((c >> 12) & 0x3f));
        o[2] = (char)(0x80 | ((c >> 6) & 0x3f));
        o[3] = (char)(0x80 | (c & 0x3f));
        n = 4;
    }
    pyr_putn(b, o, n);
}

void pyr_str(pyr_buf_t *b, const uint32_t *cp, size_t n, int cut)
{
    size_t i;
    int sq = 0, dq = 0;
    char quote, e[16];

    for (i = 0; i < n; i++) {
        sq |= cp[i] == '\'';
        dq |= cp[i] == '"';
    }
    quote = sq && !dq ? '"' : '\'';
    pyr_putn(b, &quote, 1);
    for (i = 0; i < n && !b->full; i++) {
        uint32_t c = cp[i];
        if (c == (uint32_t)quote || c == '\\') {
            e[0] = '\\';
            e[1] = (char)c;
            pyr_putn(b, e, 2);
        } else if (c == '\t') {
            pyr_puts(b, "\\t");
        } else if (c == '\n') {
            pyr_puts(b, "\\n");
        } else if (c == '\r') {
            pyr_puts(b, "\\r");
        } else if (c < 0x20 || c == 0x7f) {
            snprintf(e, sizeof e, "\\x%02x", (unsigned)c);
            pyr_puts(b, e);
        } else if (c < 0x7f) {
            e[0] = (char)c;
            pyr_putn(b, e, 1);
        } else if (c <= 0x10ffff && (c < 0xd800 || c > 0xdfff) && pyr_printable(c)) {
            put_utf8(b, c);
        } else {
            if (c <= 0xff)
                snprintf(e, sizeof e, "\\x%02x", (unsigned)c);
            else if (c <= 0xffff)
                snprintf(e, sizeof e, "\\u%04x", (unsigned)c);
            else
                snprintf(e, sizeof e, "\\U%08x", (unsigned)c);
            pyr_puts(b, e);
        }
    }
    if (cut)
        b->full = 1;            /* the rest is not shown: "..." ends the value */
    else
        pyr_putn(b, &quote, 1);
}

void pyr_bytes(pyr_buf_t *b, const unsigned char *s, size_t n, int cut)
{
    size_t i;
    int sq = 0, dq = 0;
    char quote, e[8];

    for (i = 0; i < n; i++) {
        sq |= s[i] == '\'';
        dq |= s[i] == '"';
    }
    quote = sq && !dq ? '"' : '\'';
    pyr_putn(b, "b", 1);
    pyr_putn(b, &quote, 1);
    for (i = 0; i < n && !b->full; i++) {
        unsigned c = s[i];
        if (c == (unsigned char)quote || c == '\\') {
            e[0] = '\\';
            e[1] = (char)c;
            pyr_putn(b, e, 2);
        } else if (c == '\t') {
            pyr_puts(b, "\\t");
        } else if (c == '\n') {
            pyr_puts(b, "\\n");
        } else if (c == '\r') {
            pyr_puts(b, "\\r");
        } else if (c < 0x20 || c >= 0x7f) {
            snprintf(e, sizeof e, "\\x%02x", c);
            pyr_puts(b, e);
        } else {
            e[0] = (char)c;
            pyr_putn(b, e, 1);
        }
    }
    if (cut)
        b->full = 1;
    else
        pyr_putn(b, &quote, 1);
}

/* tmp holds "-D.DDDe+XX" not reading back as x: if the same digits one unit up or down
 * in the last place do, puts them in tmp and returns 1. */
static int near_digits(char *tmp, double x)
{
    char d[24], alt[48], *e = strchr(tmp, 'e');
    int nd = 0, exp10, delta, i, neg = tmp[0] == '-';
    const char *p;

    if (e == NULL)
        return 0;
    exp10 = atoi(e + 1);
    for (p = tmp + neg; p < e; p++)
        if (*p >= '0' && *p <= '9' && nd < (int)sizeof d - 1)
            d[nd++] = *p;
    for (delta = 1; delta >= -1; delta -= 2) {
        char t[24];
        int ex = exp10, carry = delta, start = 0;
        memcpy(t, d, (size_t)nd);
        for (i = nd - 1; i >= 0 && carry; i--) {
            int v = t[i] - '0' + carry;
            carry = v < 0 ? -1 : v > 9 ? 1 : 0;
            t[i] = (char)('0' + (v + 10) % 10);
        }
        if (carry > 0) {            /* 9.99 + 0.01 = 10.00: one more digit in front */
            memmove(t + 1, t, (size_t)nd);
            t[0] = '1';
            ex++;
        } else if (carry < 0) {
            continue;               /* below 0: not a neighbour */
        } else if (t[0] == '0') {   /* 1.00 - 0.01 = 0.99 */
            start = 1;
            ex--;
        }
        if (nd - start < 1)
            continue;
        snprintf(alt, sizeof alt, "%s%c.%.*se%d", neg ? "-" : "", t[start], nd - start - 1,
                 t + start + 1, ex);
        if (strtod(alt, NULL) == x) {
            snprintf(tmp, 48, "%s", alt);
            return 1;
        }
    }
    return 0;
}

void pyr_float(pyr_buf_t *b, double x)
{
    char tmp[48], digits[24], out[64];
    int prec, nd = 0, decpt, exp10, neg, i, o = 0;
    const char *p;

    if (isnan(x)) {
        pyr_puts(b, "nan");
        return;
    }
    if (isinf(x)) {
        pyr_puts(b, x < 0 ? "-inf" : "inf");
        return;
    }
    /* the shortest digits that read back as x: correctly rounded to 1, 2, ... 17, or
     * (next to a power of two, where the doubles below are closer together than those
     * above) one unit of the last digit off it, towards the wider side */
    for (prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, x);
        if (strtod(tmp, NULL) == x || (prec < 17 && near_digits(tmp, x)))
            break;
    }
    p = tmp;
    neg = *p == '-';
    if (neg)
        p++;
    for (; *p && *p != 'e'; p++)
        if (*p >= '0' && *p <= '9' && nd < (int)sizeof digits - 1)
            digits[nd++] = *p;
    exp10 = *p == 'e' ? atoi(p + 1) : 0;
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    digits[nd] = '\0';
    decpt = exp10 + 1;          /* x = 0.DIGITS x 10^decpt */
    if (neg)
        out[o++] = '-';
    if (decpt <= -4 || decpt > 16) {
        /* float_repr_style 'short': an exponent outside 1e-5 <= |x| < 1e16 */
        out[o++] = digits[0];
        if (nd > 1) {
            out[o++] = '.';
            for (i = 1; i < nd; i++)
                out[o++] = digits[i];
        }
        o += snprintf(out + o, sizeof out - (size_t)o, "e%c%02d", decpt - 1 < 0 ? '-' : '+',
                      abs(decpt - 1));
    } else if (decpt <= 0) {
        out[o++] = '0';
        out[o++] = '.';
        for (i = 0; i < -decpt; i++)
            out[o++] = '0';
        for (i = 0; i < nd; i++)
            out[o++] = digits[i];
    } else if (decpt >= nd) {
        for (i = 0; i < nd; i++)
            out[o++] = digits[i];
        for (i = nd; i < decpt; i++)
            out[o++] = '0';
        out[o++] = '.';
        out[o++] = '0';
    } else {
        for (i = 0; i < decpt; i++)
            out[o++] = digits[i];
        out[o++] = '.';
        for (i = decpt; i < nd; i++)
            out[o++] = digits[i];
    }
    out[o] = '\0';
    pyr_puts(b, out);
}

int pyr_int(pyr_buf_t *b, const uint32_t *digits, size_t n, int negative)
{
    uint32_t out[PYR_INT_DIGITS * 30 / 29 + 2];
    size_t nout = 0, i, j;
    char tmp[16];

    if (n > PYR_INT_DIGITS)
        return -1;
    while (n > 0 && digits[n - 1] == 0)
        n--;
    if (n == 0) {
        pyr_puts(b, "0");
        return 0;
    }
    for (i = 0; i < n; i++)
        if (digits[i] >= (1u << 30))
            return -1;
    /* base 2^30 to base 10^9, most significant digit first */
    for (i = n; i-- > 0;) {
        uint32_t carry = digits[i];
        for (j = 0; j < nout; j++) {
            uint64_t z = ((uint64_t)out[j] << 30) | carry;
            carry = (uint32_t)(z / 1000000000u);
            out[j] = (uint32_t)(z - (uint64_t)carry * 1000000000u);
        }
        while (carry) {
            out[nout++] = carry % 1000000000u;
            carry /= 1000000000u;
        }
    }
    if (negative)
        pyr_puts(b, "-");
    snprintf(tmp, sizeof tmp, "%u", out[nout - 1]);
    pyr_puts(b, tmp);
    for (i = nout - 1; i-- > 0;) {
        snprintf(tmp, sizeof tmp, "%09u", out[i]);
        pyr_puts(b, tmp);
    }
    return 0;
}
