/* cli/errors.c — the command's one line on stderr for an error (cli_error) and the line
 * and exit code for a failure of the library's (cli_fail): every file of cli/ says what
 * failed through these, so a message has one prefix and a failure one code.
 */
#include <stdarg.h>
#include <stdio.h>

#include "remora.h"
#include "cli.h"
#include "../util/util.h"

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
