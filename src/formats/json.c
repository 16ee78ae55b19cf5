/* formats/json.c — JSON string writing shared by the JSON-based writers.
 *
 * Escapes quotes, backslashes and control characters, and replaces bytes that are not
 * valid UTF-8 with U+FFFD, so strings from a hostile target always give valid JSON.
 */
#include <string.h>

#include "out.h"

size_t out_utf8_len(const unsigned char *s, size_t n)
{
    size_t len, i;
    uint32_t c;

    if (s[0] < 0x80)
        return 1;
    if (s[0] >= 0xc2 && s[0] <= 0xdf)
        len = 2, c = s[0] & 0x1f;
    else if (s[0] >= 0xe0 && s[0] <= 0xef)
        len = 3, c = s[0] & 0x0f;
    else if (s[0] >= 0xf0 && s[0] <= 0xf4)
        len = 4, c = s[0] & 0x07;
    else
        return 0;
    if (len > n)
        return 0;
    for (i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        c = c << 6 | (s[i] & 0x3f);
    }
    if ((len == 3 && (c < 0x800 || (c >= 0xd800 && c <= 0xdfff))) || (len == 4 && (c < 0x10000 || c > 0x10ffff)))
        return 0;
    return len;
}

void out_json_str(FILE *f, const char *str)
{
    const unsigned char *s = (const unsigned char *)(str ? str : "");
    size_t n = strlen((const char *)s);

    fputc('"', f);
    while (n > 0) {
        size_t k;
        if (*s == '"' || *s == '\\') {
            fputc('\\', f);
            fputc(*s, f);
            k = 1;
        } else if (*s < 0x20 || *s == 0x7f) {
            fprintf(f, "\\u%04x", *s);
            k = 1;
        } else if ((k = out_utf8_len(s, n)) == 0) {
            fputs("\\ufffd", f);
            k = 1;
        } else {
            fwrite(s, 1, k, f);
        }
        s += k;
        n -= k;
    }
    fputc('"', f);
}
