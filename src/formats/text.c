/* formats/text.c — strings from the target (function, file and thread names) written
 * into text meant for a terminal (the pstats table, `remora dump`): one string stays on
 * one line and cannot drive the terminal, and the escaping can be undone. See
 * out_text_str() in out.h for the rules.
 */
#include <string.h>

#include "out.h"

void out_text_str(FILE *f, const char *str, int quote)
{
    const unsigned char *s = (const unsigned char *)(str ? str : "");
    size_t n = strlen((const char *)s);

    while (n > 0) {
        size_t k = 1;
        if (*s == '\\' || (quote && *s == quote)) {
            fputc('\\', f);
            fputc(*s, f);
        } else if (*s == '\n') {
            fputs("\\n", f);
        } else if (*s == '\r') {
            fputs("\\r", f);
        } else if (*s == '\t') {
            fputs("\\t", f);
        } else if (*s < 0x20 || *s == 0x7f) {
            fprintf(f, "\\x%02x", *s);
        } else if ((k = out_utf8_len(s, n)) == 0) {
            fputs("\xef\xbf\xbd", f);           /* U+FFFD */
            k = 1;
        } else if (k == 2 && s[0] == 0xc2 && s[1] < 0xa0) {
            fprintf(f, "\\x%02x", s[1]);        /* C1 control, U+0080..U+009F */
        } else if (k == 3 && s[0] == 0xe2 && s[1] == 0x80 && (s[2] == 0xa8 || s[2] == 0xa9)) {
            fprintf(f, "\\u%04x", s[2] == 0xa8 ? 0x2028 : 0x2029);
        } else {
            fwrite(s, 1, k, f);
        }
        s += k;
        n -= k;
    }
}

void out_text_frame(FILE *f, const char *function, const char *file, int line)
{
    out_text_str(f, function, 0);
    if (file != NULL && file[0] != '\0') {
        fputs(" (", f);
        out_text_str(f, file, 0);
        fprintf(f, ":%d)", line);
    }
}
