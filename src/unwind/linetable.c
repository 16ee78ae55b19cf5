/* unwind/linetable.c — instruction offset → line, for each CPython line-table format.
 *
 * Pure functions over a copy of the table; every read is bounds-checked, so a corrupt
 * or hostile table yields a wrong line at worst, never a read past its end.
 */
#include <limits.h>

#include "unwind.h"

/* Lines are summed in 64 bits: a corrupt table or first line cannot overflow them; a sum
 * that no int holds is reported as "no line". */
static int line_or_none(long long line)
{
    return line < INT_MIN || line > INT_MAX ? -1 : (int)line;
}

int lt_lnotab_line(const unsigned char *tab, size_t len, int firstlineno, int addrq)
{
    /* 3.9: pairs (address increment, signed line increment) */
    long long line = firstlineno;
    int addr = 0;
    size_t i;

    if (addrq < 0)
        return firstlineno;
    for (i = 0; i + 1 < len; i += 2) {
        addr += tab[i];
        if (addr > addrq)
            break;
        line += (signed char)tab[i + 1];
    }
    return line_or_none(line);
}

int lt_310_line(const unsigned char *tab, size_t len, int firstlineno, int addrq)
{
    /* 3.10: pairs (byte length of a range, signed line delta; -128 = no line) */
    long long line = firstlineno;
    int start = 0;
    size_t i;

    if (addrq < 0)
        return firstlineno;
    for (i = 0; i + 1 < len; i += 2) {
        int end = start + tab[i];
        int delta = (signed char)tab[i + 1];
        if (delta != -128)
            line += delta;
        if (addrq >= start && addrq < end)
            return delta == -128 ? -1 : line_or_none(line);
        start = end;
    }
    return -1;
}

/* 3.11+ varints: 6 bits a byte, bit 6 says more follow. */
static unsigned read_varint(const unsigned char *tab, size_t len, size_t *i)
{
    unsigned v, shift = 0;
    unsigned char b;

    if (*i >= len)
        return 0;
    b = tab[(*i)++];
    v = b & 63;
    while ((b & 64) && *i < len && shift < 24) {
        b = tab[(*i)++];
        shift += 6;
        v |= (unsigned)(b & 63) << shift;
    }
    return v;
}

static int read_svarint(const unsigned char *tab, size_t len, size_t *i)
{
    unsigned u = read_varint(tab, len, i);
    return (u & 1) ? -(int)(u >> 1) : (int)(u >> 1);
}

int lt_locations_line(const unsigned char *tab, size_t len, int firstlineno, int addrq)
{
    /* Entries: a first byte 1CCCCLLL (code C, length L+1 code units), then payload. */
    long long line = firstlineno;
    int addr = 0;
    size_t i = 0;

    if (addrq < 0)
        return firstlineno;
    while (i < len) {
        unsigned char first = tab[i++];
        int code, length, ldelta = 0, noline = 0;

        if (!(first & 0x80))
            continue;            /* not an entry start: resynchronise */
        code = (first >> 3) & 15;
        length = ((first & 7) + 1) * 2;
        switch (code) {
        case 15:                 /* no location */
            noline = 1;
            break;
        case 14:                 /* long form: line delta, end line, column, end column */
            ldelta = read_svarint(tab, len, &i);
            (void)read_varint(tab, len, &i);
            (void)read_varint(tab, len, &i);
            (void)read_varint(tab, len, &i);
            break;
        case 13:                 /* no column */
            ldelta = read_svarint(tab, len, &i);
            break;
        case 12:
        case 11:
        case 10:                 /* one line form: delta = code - 10, two column bytes */
            ldelta = code - 10;
            i += 2;
            break;
        default:                 /* short form: same line, one column byte */
            i += 1;
            break;
        }
        line += ldelta;
        if (addrq >= addr && addrq < addr + length)
            return noline ? -1 : line_or_none(line);
        addr += length;
        /* skip to the next entry start (payload bytes never have bit 7 set) */
        while (i < len && !(tab[i] & 0x80))
            i++;
    }
    return -1;
}

int lt_locations_entry(const unsigned char *tab, size_t len, int firstlineno, int addrq,
                       lt_location_t *out)
{
    /* the same walk as lt_locations_line, the entry's columns and end line decoded */
    long long line = firstlineno;
    int addr = 0;
    size_t i = 0;

    out->line = out->end_line = -1;
    out->column = out->end_column = -1;
    if (addrq < 0) {
        out->line = out->end_line = firstlineno;
        return 0;
    }
    while (i < len) {
        unsigned char first = tab[i++];
        int code, length, ldelta = 0, noline = 0;
        long long end_delta = 0;
        int col = -1, end_col = -1;

        if (!(first & 0x80))
            continue;
        code = (first >> 3) & 15;
        length = ((first & 7) + 1) * 2;
        switch (code) {
        case 15:
            noline = 1;
            break;
        case 14:
            ldelta = read_svarint(tab, len, &i);
            end_delta = read_varint(tab, len, &i);
            col = (int)read_varint(tab, len, &i) - 1;
            end_col = (int)read_varint(tab, len, &i) - 1;
            break;
        case 13:
            ldelta = read_svarint(tab, len, &i);
            break;
        case 12:
        case 11:
        case 10:
            ldelta = code - 10;
            if (i + 2 <= len) {
                col = tab[i];
                end_col = tab[i + 1];
            }
            i += 2;
            break;
        default:                 /* short form: column code*8 + bits 4-6, length bits 0-3 */
            if (i < len) {
                col = code * 8 + ((tab[i] >> 4) & 7);
                end_col = col + (tab[i] & 15);
            }
            i += 1;
            break;
        }
        line += ldelta;
        if (addrq >= addr && addrq < addr + length) {
            if (noline)
                return -1;
            out->line = line_or_none(line);
            out->end_line = out->line < 0 ? -1 : line_or_none(line + end_delta);
            out->column = col;
            out->end_column = end_col;
            return out->line < 0 ? -1 : 0;
        }
        addr += length;
        while (i < len && !(tab[i] & 0x80))
            i++;
    }
    return -1;
}
