/* cli/main.c — entry point: dispatches to the subcommands. */
#include <stdarg.h>
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

void cli_error(const char *fmt, ...)
{
    va_list ap;

    fputs("remora: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

int cli_fail(int err, pid_t pid, const char *why)
{
    switch (err) {
    case REMORA_ENOPROC:
        cli_error("no process with pid %d (it does not exist or has exited)", (int)pid);
        break;
    case REMORA_EPERM:
        cli_error("permission denied reading pid %d: run remora as root or as the target's user "
                  "with CAP_SYS_PTRACE, or allow ptrace (sysctl kernel.yama.ptrace_scope=0)", (int)pid);
        break;
    case REMORA_ENOTPY:
    case REMORA_EVERSION:
        if (why && *why)
            cli_error("%s", why);
        else if (err == REMORA_ENOTPY && proc_is_kernel_thread(pid))
            cli_error("pid %d is a kernel thread, not a Python process", (int)pid);
        else if (err == REMORA_ENOTPY)
            cli_error("pid %d is not a Python process", (int)pid);
        else
            cli_error("%s", remora_strerror(err));
        break;
    default:
        if (why && *why)
            cli_error("pid %d: %s (%s)", (int)pid, why, remora_strerror(err));
        else
            cli_error("pid %d: %s", (int)pid, remora_strerror(err));
        break;
    }
    return remora_exit_code(err);
}

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
