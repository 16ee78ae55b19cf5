/* tests/unit/unit_util.c — unit tests of util/: interned strings (strtab.c), the upper
 * bound of sorted ranges (util.h), repr() of values (pyrepr.c). */
#include <stdio.h>
#include <string.h>

#include "unwind/unwind.h"
#include "util/util.h"
#include "unit.h"

void test_strtab(void)
{
    strtab_t *t = strtab_new();
    const char *a, *b, *c;
    char buf[32];
    int i, ok = 1;

    a = strtab_intern(t, "hello", 5);
    b = strtab_intern(t, "hello world", 5);
    c = strtab_intern(t, "hellp", 5);
    CHECK(a == b && a != c && strcmp(a, "hello") == 0, "intern");
    for (i = 0; i < 20000; i++) {
        int n = snprintf(buf, sizeof buf, "name%d", i);
        const char *s = strtab_intern(t, buf, (size_t)n);
        ok &= s != NULL && strcmp(s, buf) == 0;
    }
    CHECK(ok, "many names");
    CHECK(strtab_intern(t, "name123", 7) == strtab_intern(t, "name123", 7), "stable after growth");
    CHECK(strcmp(strtab_intern(t, "a\0b", 3), "a") == 0, "NUL cuts a name");
    strtab_free(t);
}

/* remora_upper_u64 over ranges sorted by start (as segments and mappings are), each case
 * a key and the index of the first range that begins above it. */
void test_upper(void)
{
    struct rng { uint32_t pad; uint64_t start, end; };
    static const struct rng r[] = { { 0, 10, 20 }, { 0, 20, 30 }, { 0, 40, 50 } };
    static const struct { uint64_t key; size_t want; } cases[] = {
        { 0, 0 }, { 9, 0 }, { 10, 1 }, { 19, 1 }, { 20, 2 }, { 35, 2 }, { 40, 3 },
        { UINT64_MAX, 3 },
    };
    size_t i;

    for (i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CHECK(REMORA_UPPER_U64(r, 3, struct rng, start, cases[i].key) == cases[i].want,
              "upper bound of a start");
    CHECK(REMORA_UPPER_U64(r, 0, struct rng, start, 5) == 0, "upper bound in no range");
    CHECK(REMORA_UPPER_U64(r, 3, struct rng, end, 29) == 1, "upper bound of an end");
}

/* ---- util/pyrepr.c: repr() of values, against what Python itself wrote ---- */

#include "pyrepr_cases.h"

void test_pyrepr(void)
{
    char out[UNW_LOCAL_VALUE];
    pyr_buf_t b;
    size_t i;
    uint32_t big[PYR_INT_DIGITS + 1];

    for (i = 0; i < sizeof pyr_float_cases / sizeof pyr_float_cases[0]; i++) {
        double d;
        memcpy(&d, &pyr_float_cases[i].bits, 8);
        pyr_init(&b, out, sizeof out);
        pyr_float(&b, d);
        CHECK(strcmp(pyr_end(&b), pyr_float_cases[i].repr) == 0, "float %016llx: %s, want %s",
              (unsigned long long)pyr_float_cases[i].bits, out, pyr_float_cases[i].repr);
    }
    for (i = 0; i < sizeof pyr_int_cases / sizeof pyr_int_cases[0]; i++) {
        pyr_init(&b, out, sizeof out);
        CHECK(pyr_int(&b, pyr_int_cases[i].d, pyr_int_cases[i].n, pyr_int_cases[i].neg) == 0 &&
              strcmp(pyr_end(&b), pyr_int_cases[i].repr) == 0, "int %zu: %.60s, want %.60s", i, out,
              pyr_int_cases[i].repr);
    }
    for (i = 0; i < sizeof pyr_str_cases / sizeof pyr_str_cases[0]; i++) {
        pyr_init(&b, out, sizeof out);
        pyr_str(&b, pyr_str_cases[i].cp, pyr_str_cases[i].n, 0);
        CHECK(strcmp(pyr_end(&b), pyr_str_cases[i].repr) == 0, "str %zu: %s, want %s", i, out,
              pyr_str_cases[i].repr);
    }
    for (i = 0; i < sizeof pyr_bytes_cases / sizeof pyr_bytes_cases[0]; i++) {
        pyr_init(&b, out, sizeof out);
        pyr_bytes(&b, pyr_bytes_cases[i].b, pyr_bytes_cases[i].n, 0);
        CHECK(strcmp(pyr_end(&b), pyr_bytes_cases[i].repr) == 0, "bytes %zu: %s, want %s", i, out,
              pyr_bytes_cases[i].repr);
    }
    /* a str cut: no closing quote, "..." */
    {
        static const uint32_t abc[] = { 'a', 'b', 'c' };
        pyr_init(&b, out, sizeof out);
        pyr_str(&b, abc, 3, 1);
        CHECK(strcmp(pyr_end(&b), "'abc...") == 0, "cut str: %s", out);
        pyr_init(&b, out, sizeof out);
        pyr_bytes(&b, (const unsigned char *)"ab", 2, 1);
        CHECK(strcmp(pyr_end(&b), "b'ab...") == 0, "cut bytes: %s", out);
    }
    /* a full buffer keeps its bound and ends in "...", never in half a character */
    {
        static const uint32_t cps[] = { 0xe9, 0xe9, 0xe9, 0xe9, 0xe9, 0xe9, 0xe9, 0xe9, 0xe9, 0xe9 };
        char small[12];
        pyr_init(&b, small, sizeof small);
        pyr_str(&b, cps, 10, 0);
        CHECK(strcmp(pyr_end(&b), "'\xc3\xa9\xc3\xa9\xc3\xa9..." ) == 0 && strlen(small) < sizeof small,
              "full buffer: %s", small);
    }
    /* ints past the bound, digits out of range: refused, nothing written */
    memset(big, 0, sizeof big);
    big[PYR_INT_DIGITS] = 1;
    pyr_init(&b, out, sizeof out);
    CHECK(pyr_int(&b, big, PYR_INT_DIGITS + 1, 0) == -1 && b.len == 0, "int of too many digits");
    big[0] = 1u << 30;
    CHECK(pyr_int(&b, big, 1, 0) == -1 && b.len == 0, "a digit of 2^30");
    CHECK(pyr_printable('a') && !pyr_printable(0x7f) && !pyr_printable(0x2028) &&
          pyr_printable(0xe9) && !pyr_printable(0xd800) && !pyr_printable(0x110000),
          "printable");
}
