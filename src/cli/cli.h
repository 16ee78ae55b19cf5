/* cli/ — the remora command: argument parsing, messages, subcommands. */
#ifndef REMORA_CLI_H
#define REMORA_CLI_H

#include <sys/types.h>

/* Prints "remora: <message>" and a newline on stderr. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Parses a pid argument. Returns 0 or -1. */
int cli_parse_pid(const char *s, pid_t *out);

/* Prints the one-line explanation of an error met while attaching to pid, and
 * returns the exit code for it. 'why' is a detail from the lower layers or NULL. */
int cli_fail(int err, pid_t pid, const char *why);

int cmd_dump(int argc, char **argv);
int cmd_record(int argc, char **argv);
int cmd_convert(int argc, char **argv);

/* "1000", "10k", "1khz" → Hz. Returns 0 or -1. */
int cli_parse_rate(const char *s, double *hz);

#endif
