/* cli/main.c — entry point: dispatches to the subcommands. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "remora.h"
#include "cli.h"
#include "../util/util.h"

static const char usage[] =
    "usage: remora <command> [options]   (remora <command> --help: its options)\n"
    "\n"
    "commands:\n"
    "  dump      print every thread's Python stack, of a live process or a core dump\n"
    "  record    sample a process (-p PID or -- CMD ARGS...) and write a profile\n"
    "  top       a live table of the functions a process spends its time in\n"
    "  convert   turn a .remora recording or collapsed stacks into another format\n"
    "\n"
    "  remora --version | --help\n"
    "\n"
    "exit codes: 0 ok, 1 usage, 2 no such process (or it exited), 3 permission denied,\n"
    "            4 not a Python process or unsupported version, 5 other failure\n";

int main(int argc, char **argv)
{
    if (argc < 2) {
        cli_error("a command is needed: dump, record, top or convert (see remora --help)");
        return REMORA_EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        fputs(usage, stdout);
        return REMORA_EXIT_OK;
    }
    if (strcmp(argv[1], "--version") == 0) {
        int minor;
        printf("remora %s\nreads CPython", REMORA_VERSION);
        for (minor = PY_MINOR_FIRST; minor <= PY_MINOR_LAST; minor++)
            printf(" 3.%d", minor);
        putchar('\n');
        return REMORA_EXIT_OK;
    }
    if (strcmp(argv[1], "dump") == 0)
        return cmd_dump(argc - 1, argv + 1);
    if (strcmp(argv[1], "record") == 0)
        return cmd_record(argc - 1, argv + 1);
    if (strcmp(argv[1], "convert") == 0)
        return cmd_convert(argc - 1, argv + 1);
    if (strcmp(argv[1], "top") == 0)
        return cmd_top(argc - 1, argv + 1);
    cli_error("unknown command '%s'; see 'remora --help'", argv[1]);
    return REMORA_EXIT_USAGE;
}
