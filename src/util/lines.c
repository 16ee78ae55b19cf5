/* util/lines.c — the lines of a text as Python's universal newlines split them (\n, \r\n,
 * lone \r): an index of where each begins, and one line without its surrounding white
 * space, as traceback and linecache show it. For source files (proc/source.c) and the
 * reports that show them (formats/heatmap.c). */
#include <stdlib.h>

#include "util.h"

static size_t line_ends(const char *text, size_t len, uint32_t *starts)
{
    size_t k, n = 0;

    for (k = 0; k < len; k++)
        if (text[k] == '\n' || (text[k] == '\r' && (k + 1 == len || text[k + 1] != '\n'))) {
            n++;
            if (starts != NULL)
                starts[n] = (uint32_t)(k + 1);
        }
    if (len > 0 && text[len - 1] != '\n' && text[len - 1] != '\r') {
        n++;                        /* a last line without its newline */
        if (starts != NULL)
            starts[n] = (uint32_t)len;
    }
    return n;
}

int lines_index(const char *text, size_t len, uint32_t **starts, size_t *n)
{
    *starts = NULL;
    *n = 0;
    if (len > UINT32_MAX)
        return -1;
    *n = line_ends(text, len, NULL);
    if ((*starts = malloc((*n + 1) * sizeof **starts)) == NULL)
        return -1;
    (*starts)[0] = 0;
    line_ends(text, len, *starts);
    return 0;
}

static int blank(char c)
{
    return c == ' ' || c == '\t' || c == '\f' || c == '\v' || c == '\n' || c == '\r';
}

const char *lines_get(const char *text, const uint32_t *starts, size_t n, long line, int strip,
                      size_t *len)
{
    const char *b, *e;

    *len = 0;
    if (text == NULL || line < 1 || (size_t)line > n)
        return NULL;
    b = text + starts[line - 1];
    e = text + starts[line];
    while (e > b && (e[-1] == '\n' || e[-1] == '\r' || (strip && blank(e[-1]))))
        e--;
    while (strip && b < e && blank(*b))
        b++;
    *len = (size_t)(e - b);
    return b;
}
