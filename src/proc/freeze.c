/* proc/freeze.c — --blocking and --native: every thread of the target held still while a
 * sample is read, through ptrace (PTRACE_SEIZE once, then PTRACE_INTERRUPT and PTRACE_CONT
 * each round); and, for --native, a thread's registers (proc_task_regs). Unlike SIGSTOP
 * it is invisible to the target's parent and shell, and the target's own signals are
 * passed on: a thread stopped to deliver a signal is resumed
 * with it. A group-stop (someone SIGSTOPped the target) is left in place (PTRACE_LISTEN).
 *
 * A thread that does not stop within FREEZE_WAIT_NS (in the kernel, uninterruptible) is
 * read running, like every thread without --blocking, and is waited for in later rounds.
 * Threads born later are seized in the round that first lists them.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>

#include "remora.h"
#include "proc.h"
#include "proc_internal.h"
#include "../util/util.h"

#define FREEZE_MAX 4096                 /* threads followed */
#define FREEZE_WAIT_NS 100000000        /* 100 ms for all threads to stop */

enum { T_RUNNING, T_ASKED, T_STOPPED, T_GROUPSTOP };

typedef struct fthread {
    pid_t tid;
    int state;
    int sig;                            /* a signal to deliver when resumed */
    int seen;                           /* listed in this round */
} fthread_t;

struct freezer {
    proc_t *p;
    pid_t pid;
    fthread_t *t;
    size_t n, cap;
    pid_t *tids;                        /* scratch for proc_tasks */
    int exit_status;                    /* the main thread's wait status once it ended */
    int started;                        /* past freeze_new: a thread we may not seize is
                                         * one exiting (a zombie), not a refusal */
    int want_states;                    /* freeze_want_states() */
};

static int seize(freezer_t *f, pid_t tid)
{
    fthread_t *t;

    if (f->n >= FREEZE_MAX)
        return REMORA_OK;
    if (ptrace(PTRACE_SEIZE, tid, NULL, NULL) != 0) {
        if (errno == ESRCH || (errno == EPERM && f->started))
            return REMORA_OK;
        return errno == EPERM ? REMORA_EPERM : REMORA_EIO;
    }
    if (remora_grow((void **)&f->t, &f->cap, f->n + 1, sizeof *f->t)) {
        ptrace(PTRACE_DETACH, tid, NULL, NULL);
        return REMORA_ENOMEM;
    }
    t = &f->t[f->n++];
    memset(t, 0, sizeof *t);
    t->tid = tid;
    t->seen = 1;
    return REMORA_OK;
}

/* Lists the threads: seizes the new ones, forgets the ones gone. */
static int refresh(freezer_t *f)
{
    size_t n = 0, i, k;
    int err = proc_tasks(f->p, f->tids, FREEZE_MAX, &n);

    if (err)
        return err;
    if (n > FREEZE_MAX)
        n = FREEZE_MAX;
    for (k = 0; k < f->n; k++)
        f->t[k].seen = 0;
    for (i = 0; i < n; i++) {
        for (k = 0; k < f->n && f->t[k].tid != f->tids[i]; k++)
            ;
        if (k < f->n)
            f->t[k].seen = 1;
        else if ((err = seize(f, f->tids[i])) != REMORA_OK)
            return err;
    }
    for (k = 0; k < f->n;) {
        if (!f->t[k].seen && f->t[k].state != T_ASKED)
            f->t[k] = f->t[--f->n];     /* gone (an asked one reports its exit below) */
        else
            k++;
    }
    return REMORA_OK;
}

int freeze_new(proc_t *p, freezer_t **out)
{
    freezer_t *f = calloc(1, sizeof *f);
    int err;

    *out = NULL;
    if (f == NULL || (f->tids = malloc(FREEZE_MAX * sizeof *f->tids)) == NULL) {
        free(f);
        return REMORA_ENOMEM;
    }
    f->p = p;
    f->pid = proc_pid(p);
    f->exit_status = -1;
    err = refresh(f);
    if (err) {
        freeze_free(f);
        return err;
    }
    f->started = 1;
    *out = f;
    return REMORA_OK;
}

/* One report from thread k: its new state. Returns 1 if it ended. */
static int report(freezer_t *f, size_t k, int st)
{
    fthread_t *t = &f->t[k];

    if (WIFEXITED(st) || WIFSIGNALED(st)) {
        if (t->tid == f->pid)
            f->exit_status = st;
        return 1;
    }
    if (!WIFSTOPPED(st))
        return 0;
    if ((st >> 16) == PTRACE_EVENT_STOP) {
        int sig = WSTOPSIG(st);
        /* an interrupt stop (SIGTRAP), or a group-stop for a stopping signal */
        t->state = sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU
                   ? T_GROUPSTOP : T_STOPPED;
    } else if ((st >> 16) == 0) {
        /* a signal on its way to the thread: it is stopped, and gets it when resumed */
        t->sig = WSTOPSIG(st);
        t->state = T_STOPPED;
    } else {
        t->state = T_STOPPED;          /* another ptrace event: stopped all the same */
    }
    return 0;
}

int freeze_stop(freezer_t *f)
{
    struct timespec start, now, nap = { 0, 20000 };
    size_t k, waiting;
    int err = refresh(f);

    if (err == REMORA_ENOPROC || f->n == 0)
        return REMORA_ENOPROC;
    if (err)
        return err;
    if (f->want_states) {
        /* stopped, every thread reads 't': keep what each was doing before */
        for (k = 0; k < f->n; k++)
            f->tids[k] = f->t[k].tid;
        if ((err = proc_hold_states(f->p, f->tids, f->n)) != REMORA_OK)
            return err;
    }
    for (k = 0; k < f->n; k++) {
        if (f->t[k].state != T_RUNNING)
            continue;
        if (ptrace(PTRACE_INTERRUPT, f->t[k].tid, NULL, NULL) == 0)
            f->t[k].state = T_ASKED;
    }
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        waiting = 0;
        for (k = 0; k < f->n;) {
            int st;
            pid_t r;
            if (f->t[k].state != T_ASKED) {
                k++;
                continue;
            }
            r = waitpid(f->t[k].tid, &st, __WALL | WNOHANG);
            if (r == f->t[k].tid && report(f, k, st)) {
                f->t[k] = f->t[--f->n];         /* ended */
                continue;
            }
            if (r < 0 && errno == ECHILD) {
                f->t[k] = f->t[--f->n];         /* not ours any more */
                continue;
            }
            waiting += f->t[k].state == T_ASKED;
            k++;
        }
        if (waiting == 0)
            break;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if ((now.tv_sec - start.tv_sec) * 1000000000L + (now.tv_nsec - start.tv_nsec) > FREEZE_WAIT_NS)
            break;                              /* read the rest running */
        nanosleep(&nap, NULL);
    }
    if (f->n == 0)
        return REMORA_ENOPROC;
    return REMORA_OK;
}

void freeze_want_states(freezer_t *f)
{
    f->want_states = 1;
}

void freeze_go(freezer_t *f)
{
    size_t k;

    proc_release_states(f->p);
    for (k = 0; k < f->n; k++) {
        fthread_t *t = &f->t[k];
        if (t->state == T_STOPPED) {
            ptrace(PTRACE_CONT, t->tid, NULL, (void *)(long)t->sig);
            t->sig = 0;
            t->state = T_RUNNING;
        } else if (t->state == T_GROUPSTOP) {
            /* stays stopped until SIGCONT; its next stop report says when it is not */
            ptrace(PTRACE_LISTEN, t->tid, NULL, NULL);
            t->state = T_ASKED;
        }
    }
}

int freeze_exit_status(const freezer_t *f)
{
    return f->exit_status;
}

void freeze_free(freezer_t *f)
{
    struct timespec nap = { 0, 100000 };
    size_t k;
    int i;

    if (f == NULL)
        return;
    for (k = 0; k < f->n; k++) {
        /* PTRACE_DETACH needs the thread stopped: stop it if it is not (a second at
         * most; the kernel lets go of it anyway when remora exits), then let go with
         * any signal it holds */
        fthread_t *t = &f->t[k];
        int st, ended = 0;
        if (t->state == T_RUNNING && ptrace(PTRACE_INTERRUPT, t->tid, NULL, NULL) == 0)
            t->state = T_ASKED;
        for (i = 0; t->state == T_ASKED && !ended && i < 10000; i++) {
            pid_t r = waitpid(t->tid, &st, __WALL | WNOHANG);
            if (r == t->tid)
                ended = report(f, k, st);
            else if (r < 0)
                break;
            else
                nanosleep(&nap, NULL);
        }
        if (!ended)
            ptrace(PTRACE_DETACH, t->tid, NULL, (void *)(long)t->sig);
    }
    free(f->t);
    free(f->tids);
    free(f);
}

/* user_regs_struct's order (r15 r14 r13 r12 rbp rbx r11 r10 r9 r8 rax rcx rdx rsi rdi
 * orig_rax rip cs eflags rsp ...) into DWARF's (rax rdx rcx rbx rsi rdi rbp rsp r8..r15 rip). */
static void regs_to_dwarf(const uint64_t *u, uint64_t *regs)
{
    static const unsigned char from[PROC_NREGS] = {
        10, 12, 11, 5, 13, 14, 4, 19, 9, 8, 7, 6, 3, 2, 1, 0, 16
    };
    size_t i;

    for (i = 0; i < PROC_NREGS; i++)
        regs[i] = u[from[i]];
}

int proc_task_regs(proc_t *p, pid_t tid, uint64_t *regs)
{
#if defined(__x86_64__)
    if (p->kind == PROC_LIVE) {
        struct user_regs_struct ur;
        uint64_t u[27];
        _Static_assert(sizeof ur == sizeof u, "user_regs_struct is 27 words");
        if (ptrace(PTRACE_GETREGS, tid, NULL, &ur) != 0)
            return REMORA_ENOPROC;
        memcpy(u, &ur, sizeof u);
        regs_to_dwarf(u, regs);
        return REMORA_OK;
    }
    if (p->kind == PROC_CORE) {
        const img_task_t *t = image_task(p->img, tid);
        if (t == NULL || !t->has_regs)
            return REMORA_ENOPROC;
        regs_to_dwarf(t->regs, regs);
        return REMORA_OK;
    }
#else
    (void)p, (void)tid, (void)regs, (void)regs_to_dwarf;
#endif
    return REMORA_EUSAGE;
}
