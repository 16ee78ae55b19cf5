/* tests/unit/unit_sample.c — unit tests of sample/: the function rows of the stack table
 * (functions.c), which the table and top show. */
#include <stdlib.h>
#include <string.h>

#include "sample/sample.h"
#include "unit.h"

/* stk_fn_rows: one row per (function, file) whatever the line; self on the innermost
 * frame; total once per sample however deep the recursion; row indexes kept as the table
 * grows (top diffs two calls by index). */
void test_fn_rows(void)
{
    stk_table_t *t = stk_new();
    uint32_t f[4], th;
    stk_fn_row_t *rows = NULL, *again = NULL;
    size_t n = 0, n2 = 0;

    f[0] = stk_frame(t, "main", "a.py", 10);
    f[1] = stk_frame(t, "rec", "a.py", 20);
    f[2] = stk_frame(t, "rec", "a.py", 21);      /* same function, another line */
    f[3] = stk_frame(t, "rec", "b.py", 20);      /* same name, another file */
    th = stk_thread(t, 1, "main");
    {
        uint32_t s1[] = { f[0], f[1], f[2], f[1] }, s2[] = { f[0], f[3] };
        stk_add(t, th, s1, 4, 5);
        stk_add(t, th, s2, 2, 2);
    }
    CHECK(stk_fn_rows(t, &rows, &n, NULL) == 0 && n == 3, "3 rows, got %zu", n);
    if (n == 3) {
        CHECK(strcmp(rows[0].function, "main") == 0 && rows[0].self == 0 && rows[0].total == 7,
              "main: self %llu total %llu", (unsigned long long)rows[0].self,
              (unsigned long long)rows[0].total);
        CHECK(strcmp(rows[1].file, "a.py") == 0 && rows[1].line == 20 && rows[1].self == 5 &&
              rows[1].total == 5, "rec (a.py): line %d self %llu total %llu", rows[1].line,
              (unsigned long long)rows[1].self, (unsigned long long)rows[1].total);
        CHECK(strcmp(rows[2].file, "b.py") == 0 && rows[2].self == 2 && rows[2].total == 2,
              "rec (b.py): self %llu", (unsigned long long)rows[2].self);
    }
    {
        uint32_t s3[] = { stk_frame(t, "new", "c.py", 1), f[0], f[3] };
        stk_add(t, stk_thread(t, 2, "other"), s3, 3, 1);
    }
    CHECK(stk_fn_rows(t, &again, &n2, NULL) == 0 && n2 == 4, "4 rows after growing, got %zu", n2);
    if (n == 3 && n2 == 4) {
        size_t i;
        for (i = 0; i < 3; i++)
            CHECK(again[i].function == rows[i].function && again[i].file == rows[i].file,
                  "row %zu kept its index", i);
        CHECK(strcmp(again[3].function, "new") == 0 && again[0].total == 8 && again[2].self == 3,
              "grown: %s, main total %llu", again[3].function, (unsigned long long)again[0].total);
    }
    free(rows);
    free(again);
    stk_free(t);
}
