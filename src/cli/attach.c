/* cli/attach.c — what `record` and `top` share: attach to a pid or launch a command
 * and find its interpreter; the launched command's exit code; the target's command line. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "remora.h"
#include "cli.h"
#include "../sample/sampler.h"
#include "../util/util.h"

int cli_check_mode(int mode, const py_target_t *t)
{
    if (mode == SAMPLE_EXCEPTION && t->layout.ts_exc_info == 0) {
        cli_error("--mode exception: remora does not know where Python %s (%s) keeps a "
                  "thread's exception state; use another --mode", t->version, t->binary);
        return -1;
    }
    return 0;
}

static const char *const mode_names[] = { "wall", "cpu", "gil", "exception" };   /* enum sample_mode */

const char *cli_mode_name(int mode)
{
    return mode >= 0 && mode < 4 ? mode_names[mode] : "wall";
}

void cli_sampling_init(cli_sampling_t *c)
{
    memset(c, 0, sizeof *c);
    c->rate = 1000;
    c->gc = 1;
}

int cli_sampling_arg(const char *what, int argc, char **argv, int *i, cli_sampling_t *c)
{
    const char *s = argv[*i];
    const char *v = *i + 1 < argc ? argv[*i + 1] : NULL;

    if (strcmp(s, "--") == 0) {
        if (*i + 1 >= argc) {
            cli_error("%s: nothing to run after '--'", what);
            return -1;
        }
        c->cmd = argv + *i + 1;
        *i = argc;
        return 1;
    }
    if (strcmp(s, "--no-gc") == 0) {
        c->gc = 0;
        return 1;
    }
    if (strcmp(s, "--subprocesses") == 0) {
        c->subprocesses = 1;
        return 1;
    }
    if (strcmp(s, "--blocking") == 0) {
        c->blocking = 1;
        return 1;
    }
    if (strcmp(s, "-p") == 0 || strcmp(s, "--pid") == 0) {
        if (cli_parse_pid(v, &c->pid))
            return cli_bad_value(what, s, v, cli_pid_accepts);
    } else if (strcmp(s, "-r") == 0 || strcmp(s, "--rate") == 0) {
        if (cli_parse_rate(v, &c->rate))
            return cli_bad_value(what, s, v, cli_rate_accepts);
    } else if (strcmp(s, "-d") == 0 || strcmp(s, "--duration") == 0) {
        if (cli_parse_duration(v, &c->duration))
            return cli_bad_value(what, s, v, cli_duration_accepts);
    } else if (strcmp(s, "-l") == 0 || strcmp(s, "--limit") == 0) {
        unsigned long long rows;
        if (cli_parse_uint(v, 1, CLI_ROWS_MAX, &rows))
            return cli_bad_value(what, s, v, cli_rows_accepts);
        c->limit = (int)rows;
    } else if (strcmp(s, "--mode") == 0) {
        for (c->mode = 0; v != NULL && c->mode < 4; c->mode++)
            if (strcmp(v, mode_names[c->mode]) == 0)
                break;
        if (v == NULL || c->mode == 4)
            return cli_bad_value(what, s, v, "a mode: wall, cpu, gil or exception");
    } else {
        return 0;
    }
    (*i)++;
    return 1;
}

int cli_sampling_check(const char *what, const cli_sampling_t *c)
{
    if ((c->pid != 0) == (c->cmd != NULL)) {
        cli_error("%s needs one target: -p PID or -- CMD ARGS... (see remora --help)", what);
        return -1;
    }
    return 0;
}

int cli_sampler_fail(int err, pid_t pid, int blocking)
{
    if (blocking && err == REMORA_EPERM) {
        char path[64], line[256];
        long tracer = 0;
        FILE *f;
        snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
        f = fopen(path, "r");
        while (f != NULL && fgets(line, sizeof line, f) != NULL)
            if (sscanf(line, "TracerPid: %ld", &tracer) == 1)
                break;
        if (f != NULL)
            fclose(f);
        if (tracer > 0)
            cli_error("--blocking: pid %d is already traced by pid %ld (a debugger or strace?): "
                      "detach it, or record without --blocking", (int)pid, tracer);
        else
            cli_error("--blocking: not allowed to ptrace pid %d: run as root or with "
                      "CAP_SYS_PTRACE (kernel.yama.ptrace_scope), or record without --blocking",
                      (int)pid);
        return REMORA_EXIT_PERM;
    }
    if (err == REMORA_ENOPROC)
        return cli_fail(err, pid, NULL);
    cli_error("%s", err == REMORA_ENOMEM ? "out of memory" : remora_strerror(err));
    return REMORA_EXIT_FAIL;
}

void cli_read_cmdline(pid_t pid, char *out, size_t cap)
{
    char path[64];
    ssize_t n, i;
    int fd;

    out[0] = '\0';
    snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    n = read(fd, out, cap - 1);
    close(fd);
    if (n <= 0)
        return;
    for (i = 0; i < n; i++)
        if (out[i] == '\0')
            out[i] = ' ';
    while (n > 0 && out[n - 1] == ' ')
        n--;
    out[n] = '\0';
}

/* Launch: fork and exec; returns the child's pid or -1 with errno set. */
static pid_t launch(char **cmd)
{
    int fds[2];
    pid_t child;
    int e = 0;

    if (pipe2(fds, O_CLOEXEC) != 0)
        return -1;
    child = fork();
    if (child < 0) {
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (child == 0) {
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        execvp(cmd[0], cmd);
        e = errno;
        if (write(fds[1], &e, sizeof e) < 0)
            _exit(127);
        _exit(127);
    }
    close(fds[1]);
    if (read(fds[0], &e, sizeof e) == (ssize_t)sizeof e) {
        close(fds[0]);
        waitpid(child, NULL, 0);
        errno = e;
        return -1;
    }
    close(fds[0]);
    return child;
}

int cli_child_exit_code(int status)
{
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return 1;
}

int cli_attach(pid_t pid, char **cmd, volatile sig_atomic_t *stop, cli_target_t *ct)
{
    char why[512] = "";
    int err;

    memset(ct, 0, sizeof *ct);
    ct->pid = pid;
    ct->child_status = -1;
    if (cmd != NULL) {
        ct->child = launch(cmd);
        if (ct->child < 0) {
            ct->child = 0;
            cli_error("cannot run '%s': %s", cmd[0], strerror(errno));
            return REMORA_EXIT_NOPROC;
        }
        ct->pid = ct->child;
    }
    err = proc_open(ct->pid, &ct->p);
    if (err)
        return cli_fail(err, ct->pid, NULL);
    /* find the interpreter; a launched command may need a moment to load it */
    for (;;) {
        err = py_target_find(ct->p, &ct->t, why, sizeof why);
        if (err == REMORA_OK || ct->child == 0 || *stop)
            break;
        if (waitpid(ct->child, &ct->child_status, WNOHANG) == ct->child) {
            cli_error("'%s' exited before remora found a Python interpreter in it", cmd[0]);
            ct->child = 0;
            return cli_child_exit_code(ct->child_status);
        }
        {
            struct timespec ts = { 0, 200000 };
            nanosleep(&ts, NULL);
        }
    }
    if (err)
        return cli_fail(err, ct->pid, why);
    return REMORA_EXIT_OK;
}

int cli_finish_child(cli_target_t *ct)
{
    /* the command outlives the sampling (Ctrl-C, -d, q): wait for it, like a shell */
    if (ct->child > 0) {
        while (waitpid(ct->child, &ct->child_status, 0) < 0 && errno == EINTR)
            ;
        ct->child = 0;
    }
    return ct->child_status;
}
