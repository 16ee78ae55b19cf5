/* tests/unit/unit_linetable.c — unit tests of the line tables (unwind/linetable.c): each
 * version's table as CPython built it, against the lines CPython reports; truncated and
 * hostile tables; 3.11+'s whole locations. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unwind/unwind.h"
#include "unit.h"

/* ---- line tables: each case is a table CPython built and the lines it reports ---- */

struct lt_case {
    int minor;
    const char *name;
    int firstlineno;
    const unsigned char *tab;
    size_t tablen;
    const int *off, *line;
    size_t n;
};

#include "linetables.h"

#define LT_CASE(minor, name, first, id, tablen, n) \
    { minor, name, first, id##_tab, tablen, id##_off, id##_line, n },
static const struct lt_case lt_cases[] = {
    LT_CASES_9 LT_CASES_10 LT_CASES_11 LT_CASES_12 LT_CASES_13 LT_CASES_14 LT_CASES_15
};
#undef LT_CASE

void test_linetables(void)
{
    size_t i, k;
    int seen[16] = { 0 };

    for (i = 0; i < sizeof lt_cases / sizeof lt_cases[0]; i++) {
        const struct lt_case *c = &lt_cases[i];
        int bad = 0;
        seen[c->minor] = 1;
        for (k = 0; k < c->n; k++) {
            int got;
            if (c->minor == 9)
                got = lt_lnotab_line(c->tab, c->tablen, c->firstlineno, c->off[k]);
            else if (c->minor == 10)
                got = lt_310_line(c->tab, c->tablen, c->firstlineno, c->off[k]);
            else
                got = lt_locations_line(c->tab, c->tablen, c->firstlineno, c->off[k]);
            if (got != c->line[k] && bad++ == 0)
                fprintf(stderr, "  3.%d %s offset %d: line %d, CPython says %d\n", c->minor,
                        c->name, c->off[k], got, c->line[k]);
        }
        CHECK(bad == 0, "line table of %s (3.%d): %d offsets differ", c->name, c->minor, bad);
    }
    for (i = 9; i <= 15; i++)
        CHECK(seen[i], "no line-table fixture for 3.%zu", i);
    /* truncated and hostile tables never read out of bounds (ASan checks) */
    for (i = 0; i < sizeof lt_cases / sizeof lt_cases[0]; i++) {
        const struct lt_case *c = &lt_cases[i];
        size_t cut;
        for (cut = 0; cut < c->tablen; cut += 3) {
            unsigned char *t = malloc(cut ? cut : 1);
            memcpy(t, c->tab, cut);
            (void)lt_lnotab_line(t, cut, 1, 1000);
            (void)lt_310_line(t, cut, 1, 1000);
            (void)lt_locations_line(t, cut, 1, 1000);
            free(t);
        }
    }
    {
        unsigned char junk[64];
        memset(junk, 0xff, sizeof junk);
        CHECK(lt_locations_line(junk, sizeof junk, 5, 10) >= -1, "junk table");
        CHECK(lt_lnotab_line(junk, 0, 7, 3) == 7, "empty lnotab gives firstlineno");
        CHECK(lt_locations_line(junk, sizeof junk, 7, -2) == 7, "negative offset gives firstlineno");
    }
    /* the whole location (libremora): the same line as lt_locations_line, every table */
    for (i = 0; i < sizeof lt_cases / sizeof lt_cases[0]; i++) {
        const struct lt_case *c = &lt_cases[i];
        int bad = 0;
        if (c->minor < 11)
            continue;
        for (k = 0; k < c->n; k++) {
            lt_location_t loc;
            int rc = lt_locations_entry(c->tab, c->tablen, c->firstlineno, c->off[k], &loc);
            if ((rc == 0 ? loc.line : -1) != c->line[k] || (rc == 0 && loc.end_line < loc.line))
                bad++;
        }
        CHECK(bad == 0, "locations of %s (3.%d): %d offsets differ from their lines", c->name,
              c->minor, bad);
        for (k = 0; k < c->tablen; k += 3) {
            unsigned char *t = malloc(k ? k : 1);
            lt_location_t loc;
            memcpy(t, c->tab, k);
            (void)lt_locations_entry(t, k, 1, 1000, &loc);
            free(t);
        }
    }
    {
        /* short form (col 2, length 5), one-line form (code 10: cols 4-9), long form
         * (line +2, end line +1, cols 5-10), no location; one code unit each */
        static const unsigned char tab[] = { 0x80, 0x25, 0xd0, 4, 9, 0xf0, 4, 1, 6, 11, 0xf8 };
        static const int want[4][4] = { { 10, 10, 2, 7 }, { 10, 10, 4, 9 }, { 12, 13, 5, 10 },
                                        { -1, -1, -1, -1 } };
        lt_location_t loc;
        for (k = 0; k < 4; k++) {
            int rc = lt_locations_entry(tab, sizeof tab, 10, (int)k * 2, &loc);
            CHECK(loc.line == want[k][0] && loc.end_line == want[k][1] &&
                  loc.column == want[k][2] && loc.end_column == want[k][3] &&
                  (rc == 0) == (k < 3), "location entry %zu: %d-%d cols %d-%d rc %d", k,
                  loc.line, loc.end_line, loc.column, loc.end_column, rc);
        }
    }
}
