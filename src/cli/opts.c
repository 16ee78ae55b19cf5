/* cli/opts.c — the option tables: one walker every command's parser uses, and the
 * --help that prints the same table, so what a command's help lists is what it accepts.
 * Spellings: "-p 1234", "-p1234" (a short option's value joined), "--pid 1234",
 * "--pid=1234"; "--" ends the options where a table has it. */
#include <stdio.h>
#include <string.h>

#include "remora.h"
#include "cli.h"

/* The table's entry named by s (a short name alone, or a long one, with "=value" after it
 * if eq is set: *eq then points at the '='); NULL if none. A short name followed by more
 * characters is the option with its value joined (*joined set). */
static const cli_opt_t *find(const cli_opt_t *opts, const char *s, const char **eq,
                             int *joined)
{
    const cli_opt_t *o;
    size_t n;

    *eq = NULL;
    *joined = 0;
    for (o = opts; o->id != 0; o++) {
        if (o->shrt != NULL && strcmp(s, o->shrt) == 0)
            return o;
        if ((o->lng != NULL && strcmp(s, o->lng) == 0) ||
            (o->alias != NULL && strcmp(s, o->alias) == 0))
            return o;
    }
    /* --name=value */
    if (s[0] == '-' && s[1] == '-' && (*eq = strchr(s, '=')) != NULL) {
        n = (size_t)(*eq - s);
        for (o = opts; o->id != 0; o++)
            if ((o->lng != NULL && strlen(o->lng) == n && strncmp(s, o->lng, n) == 0) ||
                (o->alias != NULL && strlen(o->alias) == n && strncmp(s, o->alias, n) == 0))
                return o;
        *eq = NULL;
        return NULL;
    }
    /* -p1234: a short option that takes a value, with it */
    if (s[0] == '-' && s[1] != '-' && s[1] != '\0' && s[2] != '\0') {
        for (o = opts; o->id != 0; o++)
            if (o->shrt != NULL && o->value != NULL && s[1] == o->shrt[1] && o->shrt[2] == '\0') {
                *joined = 1;
                return o;
            }
    }
    return NULL;
}

int cli_opt_next(const char *cmd, const cli_opt_t *opts, int argc, char **argv, int *i,
                 const char **flag, const char **value)
{
    const char *s = argv[*i], *eq;
    const cli_opt_t *o;
    int joined;
    static char name[64];

    *flag = s;
    *value = NULL;
    if (s[0] != '-' || s[1] == '\0')
        return CLI_ARG_WORD;            /* a word, or "-" */
    o = find(opts, s, &eq, &joined);
    if (o == NULL) {
        cli_error("%s: unexpected argument '%s'; see 'remora %s --help' for the options", cmd,
                  s, cmd);
        return CLI_ARG_BAD;
    }
    if (o->help == NULL) {
        cli_error("%s %s is not available in this version yet", cmd, s);
        return CLI_ARG_BAD;
    }
    if (o->rest) {                      /* "--": the caller takes what follows */
        *value = *i + 1 < argc ? argv[*i + 1] : NULL;
        return o->id;
    }
    if (eq != NULL) {
        size_t n = (size_t)(eq - s);
        if (o->value == NULL) {
            cli_error("%s: %s takes no value: '%s' is not an option; see 'remora %s --help'",
                      cmd, o->lng, s, cmd);
            return CLI_ARG_BAD;
        }
        snprintf(name, sizeof name, "%.*s", (int)(n < sizeof name ? n : sizeof name - 1), s);
        *flag = name;
        *value = eq + 1;
    } else if (joined) {
        *flag = o->shrt;
        *value = s + 2;
    } else if (o->value != NULL) {
        *value = *i + 1 < argc ? argv[*i + 1] : NULL;
        if (*value != NULL)
            (*i)++;
    }
    return o->id;
}

/* "-p, --pid PID" into buf. */
static void names(const cli_opt_t *o, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s%s%s%s%s%s%s", o->shrt ? o->shrt : "",
             o->shrt && o->lng ? ", " : "", o->lng ? o->lng : "",
             o->alias ? ", " : "", o->alias ? o->alias : "",
             o->value ? " " : "", o->value ? o->value : "");
}

void cli_opt_help(FILE *f, const char *usage, const char *about, const cli_opt_t *opts)
{
    const cli_opt_t *o;
    char buf[96];

    fprintf(f, "usage: %s\n%s\n\noptions:\n", usage, about);
    for (o = opts; o->id != 0; o++) {
        if (o->help == NULL)
            continue;                   /* not available yet: refused, not offered */
        names(o, buf, sizeof buf);
        if (strlen(buf) <= 24)
            fprintf(f, "  %-24s  %s\n", buf, o->help);
        else
            fprintf(f, "  %s  %s\n", buf, o->help);
    }
}
