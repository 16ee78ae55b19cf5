/* cli/attach.c — what `record` and `top` share: attach to a pid or launch a command
 * and wait (asleep between looks) until it, or with --subprocesses a descendant, runs an
 * interpreter; the launched command's exit code; the target's command line. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "remora.h"
#include "cli.h"
#include "../lib/lib.h"
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

static const char *const mode_names[] = { "wall", "cpu", "gil", "exception", "memory" };  /* enum sample_mode */
#define NMODES ((int)(sizeof mode_names / sizeof mode_names[0]))

const char *cli_mode_name(int mode)
{
    return mode >= 0 && mode < NMODES ? mode_names[mode] : "wall";
}

void cli_modes_help(void)
{
    fputs("\nmodes: wall (every thread), cpu (threads on a CPU), gil (the GIL holder),\n"
          "       exception (threads handling an exception); in each, without --idle,\n"
          "       a thread neither on a CPU nor holding the GIL is left out;\n"
          "       memory (where resident memory grows, in bytes: a sample every 64\n"
          "       page faults of a thread (--fault-period), read in the kernel; needs\n"
          "       the kernel engine)\n"
          "\nengines: kernel reads a running thread's stack in the kernel at each tick of\n"
          "       its CPU time (BPF: needs CAP_BPF and CAP_PERFMON), threads off a CPU from\n"
          "       user space; user reads every thread from user space; auto (default):\n"
          "       kernel where it can be had (wall and cpu modes), else user\n", stdout);
}

void cli_sampling_init(cli_sampling_t *c)
{
    memset(c, 0, sizeof *c);
    c->rate = 1000;
    c->gc = 1;
}

int cli_sampling_take(const char *what, int id, const char *flag, const char *v,
                      int argc, char **argv, int *i, cli_sampling_t *c)
{
    unsigned long long rows;

    switch (id) {
    case CLI_O_CMD:
        if (*i + 1 >= argc) {
            cli_error("%s: nothing to run after '--'", what);
            return -1;
        }
        c->cmd = argv + *i + 1;
        *i = argc;
        return 1;
    case CLI_O_NO_GC:
        c->gc = 0;
        return 1;
    case CLI_O_SUBPROCESSES:
        c->subprocesses = 1;
        return 1;
    case CLI_O_BLOCKING:
        c->blocking = 1;
        return 1;
    case CLI_O_IDLE:
        c->idle = 1;
        return 1;
    case CLI_O_NONBLOCKING:
        c->nonblocking = 1;
        return 1;
    case CLI_O_FUNCTION:
        c->function = 1;
        return 1;
    case CLI_O_OPCODES:
        c->opcodes = 1;
        return 1;
    case CLI_O_NATIVE:
        c->native = 1;
        return 1;
    case CLI_O_ASYNC:
        if (c->async == 0)
            c->async = SAMPLE_ASYNC_RUNNING;
        return 1;
    case CLI_O_ASYNC_MODE:
        if (v != NULL && strcmp(v, "running") == 0)
            c->async = SAMPLE_ASYNC_RUNNING;
        else if (v != NULL && strcmp(v, "all") == 0)
            c->async = SAMPLE_ASYNC_ALL;
        else
            return cli_bad_value(what, flag, v, "an async mode: running or all");
        return 1;
    case CLI_O_ENGINE:
        if (v != NULL && strcmp(v, "auto") == 0)
            c->engine = CLI_ENGINE_AUTO;
        else if (v != NULL && strcmp(v, "kernel") == 0)
            c->engine = CLI_ENGINE_KERNEL;
        else if (v != NULL && strcmp(v, "user") == 0)
            c->engine = CLI_ENGINE_USER;
        else
            return cli_bad_value(what, flag, v, "an engine: auto, kernel or user");
        return 1;
    case CLI_O_GIL:
        if (c->mode_given && c->mode != SAMPLE_GIL) {
            cli_error("%s: --gil is --mode gil: not with --mode %s; give one of them", what,
                      cli_mode_name(c->mode));
            return -1;
        }
        c->mode = SAMPLE_GIL;
        c->mode_given = 2;
        return 1;
    case CLI_O_PID:
        return cli_parse_pid(v, &c->pid) ? cli_bad_value(what, flag, v, cli_pid_accepts) : 1;
    case CLI_O_RATE:
        return cli_parse_rate(v, &c->rate) ? cli_bad_value(what, flag, v, cli_rate_accepts) : 1;
    case CLI_O_DURATION:
        return cli_parse_duration(v, &c->duration) ?
               cli_bad_value(what, flag, v, cli_duration_accepts) : 1;
    case CLI_O_LIMIT:
        if (cli_parse_uint(v, 1, CLI_ROWS_MAX, &rows))
            return cli_bad_value(what, flag, v, cli_rows_accepts);
        c->limit = (int)rows;
        return 1;
    case CLI_O_FAULT_PERIOD:
        if (cli_parse_uint(v, 1, CLI_MEMORY_FAULTS_MAX, &rows))
            return cli_bad_value(what, flag, v, "page faults a sample, 1 to 65536");
        c->fault_period = (unsigned)rows;
        return 1;
    case CLI_O_MODE:
        for (c->mode = 0; v != NULL && c->mode < NMODES; c->mode++)
            if (strcmp(v, mode_names[c->mode]) == 0)
                break;
        if (v == NULL || c->mode == NMODES)
            return cli_bad_value(what, flag, v, "a mode: wall, cpu, gil, exception or memory");
        if (c->mode_given == 2 && c->mode != SAMPLE_GIL) {
            cli_error("%s: --gil is --mode gil: not with --mode %s; give one of them", what, v);
            return -1;
        }
        c->mode_given = 1;
        return 1;
    default:
        return 0;
    }
}

int cli_sampling_check(const char *what, const cli_sampling_t *c)
{
    if (c->idle && c->mode == SAMPLE_CPU) {
        cli_error("%s: --mode cpu keeps only threads on a CPU: --idle would keep the others; "
                  "give one of them (--mode wall --idle keeps every thread)", what);
        return -1;
    }
    if (c->mode == SAMPLE_MEMORY) {
        /* every sample is a page fault read in the kernel, at the fault: nothing read
         * from user space stands for one */
        const char *no = c->engine == CLI_ENGINE_USER ? "--engine user" : c->blocking ? "--blocking"
                       : c->native ? "--native" : c->async ? "--async" : NULL;
        if (no != NULL) {
            cli_error("%s: --mode memory reads each stack in the kernel at a page fault: not "
                      "with %s; drop it", what, no);
            return -1;
        }
    }
    if (c->fault_period != 0 && c->mode != SAMPLE_MEMORY) {
        cli_error("%s: --fault-period sets --mode memory's samples: give --mode memory, or "
                  "drop it", what);
        return -1;
    }
    if (c->blocking && c->nonblocking) {
        cli_error("%s: --blocking and --nonblocking ask for opposites: give one (without "
                  "either, remora never stops the target)", what);
        return -1;
    }
    if (c->native && c->nonblocking) {
        cli_error("%s: --native holds each thread still while its C stack is read: not with "
                  "--nonblocking; give one of them", what);
        return -1;
    }
    if (c->native && c->subprocesses) {
        cli_error("%s: --native reads one process's C stacks: not with --subprocesses; give "
                  "one of them", what);
        return -1;
    }
    if (c->async && c->native) {
        cli_error("%s: --async writes a task's coroutine frames in place of the loop's, --native "
                  "merges C frames into them: not both; give one of them", what);
        return -1;
    }
    if (c->async && c->subprocesses) {
        cli_error("%s: --async follows the tasks of one process: not with --subprocesses; give "
                  "one of them", what);
        return -1;
    }
    if (c->async == SAMPLE_ASYNC_ALL && c->mode != SAMPLE_WALL) {
        cli_error("%s: --async-mode all counts waiting tasks' wall time: not with --mode %s; "
                  "use --mode wall, or --async-mode running", what, cli_mode_name(c->mode));
        return -1;
    }
    if ((c->pid != 0) == (c->cmd != NULL)) {
        cli_error("%s needs one target: -p PID or -- CMD ARGS... (see remora %s --help)", what, what);
        return -1;
    }
    return 0;
}

int cli_async_check(struct unwinder *u, const py_target_t *t)
{
    unw_task_t *tasks;
    size_t n;
    int err;

    if (u == NULL)
        return REMORA_EXIT_OK;
    /* one full read: a target whose tasks cannot be read is told now, not by an empty
     * profile; a list that moved while read (ECORRUPT, EFAULT) is no refusal */
    err = unw_tasks(u, &tasks, &n);
    if (err == REMORA_OK || err == REMORA_ECORRUPT || err == REMORA_EFAULT)
        return REMORA_EXIT_OK;
    if (err == REMORA_ENOPROC || err == REMORA_EPERM || err == REMORA_ENOMEM) {
        cli_error("--async: reading the asyncio tasks of Python %s (%s) failed: %s", t->version,
                  t->binary, remora_strerror(err));
        return remora_exit_code(err);
    }
    cli_error("--async: remora cannot read the asyncio tasks of Python %s (%s)%s%s; record "
              "without --async", t->version, t->binary, *unw_tasks_problem(u) ? ": " : " yet",
              unw_tasks_problem(u));
    return REMORA_EXIT_NOTPY;
}

int cli_sampler_fail(int err, pid_t pid, const char *holder)
{
    if (holder != NULL && err == REMORA_EPERM) {
        long tracer = proc_tracer(pid);
        if (tracer > 0)
            cli_error("%s: pid %d is already traced by pid %ld (a debugger or strace?): "
                      "detach it, or go without %s", holder, (int)pid, tracer, holder);
        else
            cli_error("%s: not allowed to ptrace pid %d: run as root or with "
                      "CAP_SYS_PTRACE (kernel.yama.ptrace_scope), or go without %s",
                      holder, (int)pid, holder);
        return REMORA_EXIT_PERM;
    }
    if (err == REMORA_ENOPROC)
        return cli_fail(err, pid, NULL);
    cli_error("%s", err == REMORA_ENOMEM ? "out of memory" : remora_strerror(err));
    return REMORA_EXIT_FAIL;
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

/* Waiting for a launched command to load its interpreter: it is looked at again after
 * WAIT_FIRST_NS, the pause doubling up to WAIT_MOST_NS (a Python is found within a few ms
 * of loading; a command that never becomes one costs a look every 20 ms), and the wait
 * ends at once when it exits (a pidfd; without one, at the next look). With
 * --subprocesses its descendants are listed at each look too, a new one looked at at once,
 * then again after WAIT_MOST_NS, the pause doubling up to WAIT_SUB_MOST_NS (the sampler's
 * scan period). A look at a process whose mapped files are those of its last look, which
 * found no interpreter, is skipped: what it maps decides (and a full look at a shell opens
 * every file it maps, locales too); a descendant is looked at in full WAIT_SUB_TRIES
 * times at most. An answer other than "not Python yet" (an unsupported version,
 * permission denied) is believed once it has held WAIT_SURE_NS: a file half mapped by
 * the loader can read as anything. */
#define WAIT_FIRST_NS 1000000
#define WAIT_MOST_NS 20000000
#define WAIT_SUB_MOST_NS 200000000
#define WAIT_SUB_MAX 256
#define WAIT_SUB_TRIES 50
#define WAIT_SURE_NS 100000000

/* Not (yet) an interpreter: look again. */
static int find_transient(int err)
{
    return err == REMORA_ENOTPY || err == REMORA_ENOPROC || err == REMORA_EFAULT ||
           err == REMORA_ECORRUPT;
}

/* A hash of p's file mappings (where, which file, from which offset); 0 if unreadable. */
static uint64_t maps_fingerprint(proc_t *p)
{
    proc_maps_t maps;
    uint64_t h = 0xcbf29ce484222325ull;
    size_t i;

    if (proc_maps_read(p, &maps) != REMORA_OK)
        return 0;
    for (i = 0; i < maps.n; i++) {
        const proc_map_t *m = &maps.v[i];
        uint64_t v[5] = { m->start, m->end, m->offset, m->inode,
                          (uint64_t)m->dev_major << 32 | m->dev_minor };
        const unsigned char *b = (const unsigned char *)v;
        size_t k;
        if (m->path == NULL || m->path[0] != '/')
            continue;           /* files only: [heap] and the like grow */
        for (k = 0; k < sizeof v; k++)
            h = (h ^ b[k]) * 0x100000001b3ull;
        for (b = (const unsigned char *)m->path; *b; b++)
            h = (h ^ *b) * 0x100000001b3ull;
    }
    proc_maps_fini(&maps);
    return h ? h : 1;
}

typedef struct wait_sub {
    pid_t pid;
    int tries;                  /* full looks */
    uint64_t fp;                /* its maps at the last full look (0: none) */
    int64_t next, pause;        /* when it is looked at again, and the pause after that */
} wait_sub_t;

/* --subprocesses, while the command is not Python: its descendants. Returns 1 with t
 * filled and *found set when one runs an interpreter remora reads, else 0. */
static int find_in_descendants(pid_t root, wait_sub_t *subs, size_t *nsubs, int64_t now,
                               py_target_t *t, pid_t *found)
{
    pid_t kids[WAIT_SUB_MAX];
    size_t n, i, k, keep = 0;
    char why[256];

    if (proc_descendants(root, kids, WAIT_SUB_MAX, &n) != REMORA_OK)
        return 0;
    /* forget those gone, keep what is known of those still there */
    for (k = 0; k < *nsubs; k++) {
        for (i = 0; i < n && kids[i] != subs[k].pid; i++)
            ;
        if (i < n)
            subs[keep++] = subs[k];
    }
    *nsubs = keep;
    for (i = 0; i < n; i++) {
        proc_t *p;
        uint64_t fp;
        int err;
        for (k = 0; k < *nsubs && subs[k].pid != kids[i]; k++)
            ;
        if (k == *nsubs) {
            if (*nsubs == WAIT_SUB_MAX)
                continue;
            memset(&subs[k], 0, sizeof subs[k]);
            subs[k].pid = kids[i];
            subs[k].next = now;
            subs[k].pause = WAIT_MOST_NS;
            (*nsubs)++;
        }
        if (now < subs[k].next || subs[k].tries >= WAIT_SUB_TRIES)
            continue;
        subs[k].next = now + subs[k].pause;
        subs[k].pause = subs[k].pause * 2 < WAIT_SUB_MOST_NS ? subs[k].pause * 2 : WAIT_SUB_MOST_NS;
        if (proc_open(kids[i], &p) != REMORA_OK)
            continue;
        fp = maps_fingerprint(p);
        if (fp == 0 || fp != subs[k].fp) {
            subs[k].tries++;
            err = py_target_find(p, t, why, sizeof why);
            subs[k].fp = err == REMORA_ENOTPY ? fp : 0;
            if (err == REMORA_OK) {
                proc_free(p);
                *found = kids[i];
                return 1;
            }
        }
        proc_free(p);
    }
    return 0;
}

/* Sleeps up to ns, or less if the child exits (pidfd readable) or a signal comes. */
static void wait_child(int pidfd, int64_t ns)
{
    struct timespec ts = { (time_t)(ns / 1000000000), (long)(ns % 1000000000) };

    if (pidfd >= 0) {
        struct pollfd pfd = { pidfd, POLLIN, 0 };
        ppoll(&pfd, 1, &ts, NULL);
    } else {
        nanosleep(&ts, NULL);
    }
}

/* The launched command's wait: until it (or with 'subprocesses' a descendant) runs an
 * interpreter, it exits, or *stop is set. Returns as cli_attach() does. */
static int wait_for_python(char **cmd, int subprocesses, volatile sig_atomic_t *stop,
                           cli_target_t *ct)
{
    char why[512] = "";
    int64_t pause = WAIT_FIRST_NS, odd_since = 0;
    uint64_t fp, last_fp = 0;
    int err, pidfd = -1, rc = REMORA_EXIT_OK;
    wait_sub_t *subs = NULL;
    size_t nsubs = 0;
    pid_t in = 0;

    pidfd = proc_pidfd(ct->child);
    if (subprocesses && (subs = malloc(WAIT_SUB_MAX * sizeof *subs)) == NULL) {
        cli_error("out of memory");
        rc = REMORA_EXIT_FAIL;
        goto done;
    }
    for (;;) {
        int64_t now;
        fp = maps_fingerprint(ct->p);
        if (fp != 0 && fp == last_fp) {
            err = REMORA_ENOTPY;            /* the same files as the last look */
        } else {
            err = py_target_find(ct->p, &ct->t, why, sizeof why);
            if (err == REMORA_OK)
                break;
            last_fp = err == REMORA_ENOTPY ? fp : 0;
        }
        now = sampler_now_ns();
        if (find_transient(err)) {
            odd_since = 0;
        } else if (odd_since == 0) {
            odd_since = now;
        } else if (now - odd_since >= WAIT_SURE_NS || err == REMORA_ENOMEM) {
            rc = cli_fail(err, ct->pid, why);
            goto done;
        }
        if (subs != NULL && find_in_descendants(ct->pid, subs, &nsubs, now, &ct->t, &in)) {
            ct->python_pid = in;
            break;
        }
        if (waitpid(ct->child, &ct->child_status, WNOHANG) == ct->child) {
            ct->child = 0;
            ct->ended = 1;
            rc = cli_child_exit_code(ct->child_status);
            if (WIFSIGNALED(ct->child_status))
                cli_error("no Python found in '%s'%s: it was killed by signal %d (%s) before "
                          "any Python interpreter ran in it", cmd[0],
                          subprocesses ? " or the processes it started" : "",
                          WTERMSIG(ct->child_status), strsignal(WTERMSIG(ct->child_status)));
            else
                cli_error("no Python found in '%s'%s: it exited with code %d before any "
                          "Python interpreter ran in it", cmd[0],
                          subprocesses ? " or the processes it started" : "", rc);
            goto done;
        }
        if (*stop) {
            ct->ended = 1;
            cli_error("stopped before a Python interpreter ran in '%s' (pid %d): nothing "
                      "sampled; waiting for it to exit", cmd[0], (int)ct->child);
            goto done;
        }
        wait_child(pidfd, pause);
        pause = pause * 2 < WAIT_MOST_NS ? pause * 2 : WAIT_MOST_NS;
    }
done:
    free(subs);
    if (pidfd >= 0)
        close(pidfd);
    return rc;
}

int cli_attach(pid_t pid, char **cmd, int subprocesses, volatile sig_atomic_t *stop,
               cli_target_t *ct)
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
    if (cmd != NULL) {
        err = wait_for_python(cmd, subprocesses, stop, ct);
        if (err != REMORA_EXIT_OK || ct->ended || ct->python_pid != 0)
            return err;
        /* the interpreter found in the command: the handle takes its source over */
        err = remora_adopt(ct->p, &ct->t, 0, &ct->r, why, sizeof why);
        ct->p = ct->r != NULL ? remora_proc(ct->r) : NULL;
        if (err) {
            cli_error("out of memory");
            return REMORA_EXIT_FAIL;
        }
        return REMORA_EXIT_OK;
    }
    /* the library's handle finds the interpreter (its messages, py_target_find's) */
    err = remora_adopt(ct->p, NULL, 0, &ct->r, why, sizeof why);
    ct->p = ct->r != NULL ? remora_proc(ct->r) : NULL;
    if (err)
        return cli_fail(err, ct->pid, why);
    ct->t = *remora_target(ct->r);
    return REMORA_EXIT_OK;
}

void cli_target_free(cli_target_t *ct)
{
    if (ct->r != NULL)
        remora_close(ct->r);        /* its source and unwinder with it */
    else
        proc_free(ct->p);
    ct->r = NULL;
    ct->p = NULL;
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

void cli_say_waiting(cli_target_t *ct)
{
    int status;
    pid_t w;

    if (ct->child <= 0)
        return;
    while ((w = waitpid(ct->child, &status, WNOHANG)) < 0 && errno == EINTR)
        ;
    if (w == ct->child) {
        ct->child_status = status;
        ct->child = 0;
    } else if (w == 0) {
        fprintf(stderr, "remora: waiting for the command (pid %d) to exit; Ctrl-C interrupts it\n",
                (int)ct->child);
    }
}

int cli_native_enable(unwinder_t *u, pid_t pid)
{
    int err;

    if (u == NULL || (err = unw_native_enable(u)) == REMORA_OK)
        return REMORA_EXIT_OK;
    if (err == REMORA_EUSAGE)
        cli_error("--native: C stacks are read on x86_64 only; sample without --native");
    else
        cli_error("--native: cannot read the ELF files mapped in pid %d (%s); sample without "
                  "--native", (int)pid, remora_strerror(err));
    return err == REMORA_EUSAGE ? REMORA_EXIT_NOTPY : remora_exit_code(err);
}
