/* cli/args.c — option values, parsed strictly: whole numbers are decimal digits only (no
 * sign, no spaces, no 0x, no exponent), rates and durations a decimal number and a unit;
 * each in a range the messages (and docs/cli.md) name. Nothing here reads the target. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "remora.h"
#include "cli.h"

const char cli_pid_accepts[] = "a PID, a whole number from 1 to 4194304";
const char cli_rate_accepts[] =
    "a rate, a whole number of Hz from 1 to 1000000 (1000, 10k, 2.5khz, 1mhz)";
const char cli_duration_accepts[] =
    "a duration from 1 ms to 30 days: seconds, or a number and s, ms or m (30, 0.5, 250ms, 2m)";
const char cli_rows_accepts[] = "a number of rows, a whole number from 1 to 1000000";

int cli_bad_value(const char *cmd, const char *flag, const char *value, const char *accepts)
{
    if (value == NULL)
        cli_error("%s: %s takes %s: none given", cmd, flag, accepts);
    else
        cli_error("%s: %s takes %s: '%s' is not one", cmd, flag, accepts, value);
    return -1;
}

int cli_parse_uint(const char *s, unsigned long long min, unsigned long long max,
                   unsigned long long *out)
{
    unsigned long long v = 0;

    if (s == NULL || *s == '\0')
        return -1;
    for (; *s; s++) {
        unsigned d = (unsigned)(*s - '0');
        if (d > 9 || d > max || v > (max - d) / 10)
            return -1;          /* not a digit, or past max (also past 2^64) */
        v = v * 10 + d;
    }
    if (v < min)
        return -1;
    *out = v;
    return 0;
}

int cli_parse_pid(const char *s, pid_t *out)
{
    unsigned long long v;

    if (cli_parse_uint(s, 1, CLI_PID_MAX, &v))
        return -1;
    *out = (pid_t)v;
    return 0;
}

int cli_word_pid(const char *what, const char *word, pid_t *pos, const char *usage)
{
    pid_t pid;

    if (cli_parse_pid(word, &pid) != 0) {
        cli_error("%s: unexpected argument '%s'; %s", what, word, usage);
        return -1;
    }
    if (*pos != 0) {
        cli_error("%s: two pids, %d and %d: give one (-p PID, or the pid alone)", what, (int)*pos,
                  (int)pid);
        return -1;
    }
    *pos = pid;
    return 0;
}

int cli_word_pid_check(const char *what, pid_t pos, pid_t *pid)
{
    if (pos == 0)
        return 0;
    if (*pid != 0 && *pid != pos) {
        cli_error("%s: two pids, %d and %d: give one (-p PID, or the pid alone)", what, (int)*pid,
                  (int)pos);
        return -1;
    }
    *pid = pos;
    return 0;
}

/* Splits "12.50unit" into its whole part, its fraction (digits after the point, without
 * the trailing zeros) and the unit. Returns 0, or -1 if it does not start with a number
 * ([digits][.digits], one digit at least) or the whole part is longer than 'max_int'
 * digits. */
static int split_number(const char *s, size_t max_int, unsigned long long *whole,
                        const char **frac, size_t *nfrac, const char **unit)
{
    size_t ni = strspn(s, "0123456789"), nf = 0;
    const char *p = s + ni;

    *frac = "";
    if (*p == '.') {
        nf = strspn(p + 1, "0123456789");
        if (nf == 0)
            return -1;          /* "5." */
        *frac = p + 1;
        p += 1 + nf;
    }
    if (ni + nf == 0)
        return -1;
    while (ni > 1 && *s == '0')
        s++, ni--;              /* leading zeros count for nothing */
    if (ni > max_int)
        return -1;
    *whole = 0;
    for (size_t i = 0; i < ni; i++)
        *whole = *whole * 10 + (unsigned long long)(s[i] - '0');
    while (nf > 0 && (*frac)[nf - 1] == '0')
        nf--;
    *nfrac = nf;
    *unit = p;
    return 0;
}

int cli_parse_rate(const char *s, double *hz)
{
    unsigned long long whole, micro = 0, mult;
    const char *frac, *unit;
    size_t nfrac, i;

    /* past 7 digits the rate is past 1 MHz whatever the unit */
    if (s == NULL || split_number(s, 7, &whole, &frac, &nfrac, &unit))
        return -1;
    if (*unit == '\0' || strcasecmp(unit, "hz") == 0)
        mult = 1;
    else if (strcmp(unit, "k") == 0 || strcmp(unit, "K") == 0 || strcasecmp(unit, "khz") == 0)
        mult = 1000;
    else if (strcmp(unit, "M") == 0 || strcasecmp(unit, "mhz") == 0)
        mult = 1000000;
    else
        return -1;
    if (nfrac > 6)
        return -1;              /* finer than 1 Hz whatever the unit: not a whole number */
    /* exactly, in millionths: whole.frac x mult, then whole Hz only */
    for (i = 0; i < 6; i++)
        micro = micro * 10 + (i < nfrac ? (unsigned long long)(frac[i] - '0') : 0);
    micro = (whole * 1000000 + micro) * mult;       /* < 10^7 x 10^6 x 10^6 < 2^64 */
    if (micro % 1000000 != 0)
        return -1;
    micro /= 1000000;
    if (micro < 1 || micro > CLI_RATE_MAX)
        return -1;
    *hz = (double)micro;
    return 0;
}

int cli_parse_duration(const char *s, double *seconds)
{
    unsigned long long whole;
    const char *frac, *unit;
    size_t nfrac, i;
    double unit_s, v, scale = 0.1;

    if (s == NULL || split_number(s, 12, &whole, &frac, &nfrac, &unit))
        return -1;
    if (*unit == '\0' || strcmp(unit, "s") == 0)
        unit_s = 1;
    else if (strcmp(unit, "ms") == 0)
        unit_s = 1e-3;
    else if (strcmp(unit, "m") == 0)
        unit_s = 60;
    else
        return -1;
    v = (double)whole;
    for (i = 0; i < nfrac && i < 15; i++, scale /= 10)
        v += (frac[i] - '0') * scale;
    v *= unit_s;
    /* 1 ms at least (with a little slack for 0.001 x 1 in binary), 30 days at most */
    if (!(v >= 1e-3 * (1 - 1e-12)) || v > CLI_DURATION_MAX)
        return -1;
    *seconds = v;
    return 0;
}
