/* proc/task.c — the target's threads: /proc/PID/task, each task's state and comm
 * (or the tasks a core or snapshot image holds). */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "remora.h"
#include "proc.h"
#include "proc_internal.h"
#include "../util/util.h"

int proc_tasks(proc_t *p, pid_t *tids, size_t cap, size_t *n)
{
    char path[64];
    DIR *d;
    struct dirent *e;
    size_t k = 0;

    if (p->img != NULL) {
        for (k = 0; k < p->img->ntasks; k++) {
            if (k < cap)
                tids[k] = p->img->tasks[k].tid;
            PROC_RECORD(p, rec_task(p->rec, p->img->tasks[k].tid));
        }
        *n = k;
        return REMORA_OK;
    }
    snprintf(path, sizeof path, "/proc/%d/task", (int)p->pid);
    d = opendir(path);
    if (d == NULL)
        return proc_err_from_errno(errno);
    while ((e = readdir(d)) != NULL) {
        char *end;
        long v;
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        v = strtol(e->d_name, &end, 10);
        if (*end != '\0' || v <= 0)
            continue;
        if (k < cap)
            tids[k] = (pid_t)v;
        PROC_RECORD(p, rec_task(p->rec, (pid_t)v));
        k++;
    }
    closedir(d);
    *n = k;
    return REMORA_OK;
}

int proc_stat_parse_state(const char *text, size_t len, char *state)
{
    /* "pid (comm) S ...": comm may hold spaces and parentheses; the last ')' ends it */
    const char *close = NULL;
    size_t i;

    for (i = 0; i < len; i++)
        if (text[i] == ')')
            close = text + i;
    if (close == NULL || (size_t)(close - text) + 2 >= len || close[1] != ' ')
        return REMORA_ECORRUPT;
    *state = close[2];
    return REMORA_OK;
}

/* Stat files kept open by every handle together (with --subprocesses there is one
 * handle a child): past this, a task's stat file is opened, read and closed each time,
 * so remora's descriptors stay far below the usual limit of 1024. */
#define PROC_STAT_FDS_ALL 256
static int stat_fds_open;

/* Schedstat files kept open by every handle together: past this, opened, read and closed
 * each time (a look at a thread is every few rounds, not every round). */
#define PROC_SCHED_FDS_ALL 256
static int sched_fds_open;

void proc_close_stats(proc_t *p)
{
    size_t i;

    for (i = 0; i < PROC_STAT_FDS; i++) {
        if (p->stat_fd[i].tid != 0) {
            close(p->stat_fd[i].fd);
            stat_fds_open--;
        }
        p->stat_fd[i].tid = 0;
    }
    for (i = 0; i < PROC_SCHED_FDS; i++) {
        if (p->sched_fd[i].tid != 0) {
            close(p->sched_fd[i].fd);
            sched_fds_open--;
        }
        p->sched_fd[i].tid = 0;
    }
}

/* The start of tid's stat file into buf (NUL-terminated), through the descriptor kept
 * for it: opened on first use (taking the next slot, round robin, from whoever held it)
 * and opened again once when a read through it fails (the task it was opened on has
 * gone: a task of the same id now is another). Returns the length, or -1 (errno). */
static ssize_t read_stat(proc_t *p, pid_t tid, char *buf, size_t cap)
{
    char path[96];
    size_t i;
    ssize_t n = -1;
    int fd, tries;

    for (i = 0; i < PROC_STAT_FDS && p->stat_fd[i].tid != tid; i++)
        ;
    for (tries = 0; tries < 2; tries++) {
        if (i == PROC_STAT_FDS) {
            snprintf(path, sizeof path, "/proc/%d/task/%d/stat", (int)p->pid, (int)tid);
            fd = open(path, O_RDONLY | O_CLOEXEC);
            if (fd < 0)
                return -1;
            i = p->stat_next % PROC_STAT_FDS;
            if (p->stat_fd[i].tid == 0 && stat_fds_open >= PROC_STAT_FDS_ALL) {
                /* enough kept open: read this one and close it */
                n = pread(fd, buf, cap - 1, 0);
                close(fd);
                if (n == 0)
                    errno = ESRCH;
                if (n > 0)
                    buf[n] = '\0';
                return n;
            }
            p->stat_next++;
            if (p->stat_fd[i].tid != 0)
                close(p->stat_fd[i].fd);
            else
                stat_fds_open++;
            p->stat_fd[i].tid = tid;
            p->stat_fd[i].fd = fd;
        }
        n = pread(p->stat_fd[i].fd, buf, cap - 1, 0);
        if (n > 0)
            break;
        close(p->stat_fd[i].fd);
        stat_fds_open--;
        p->stat_fd[i].tid = 0;
        i = PROC_STAT_FDS;
        if (n == 0)
            errno = ESRCH;
    }
    if (n > 0)
        buf[n] = '\0';
    return n;
}

/* tid's schedstat file into buf (NUL-terminated), through the descriptor kept in its slot
 * (tid % PROC_SCHED_FDS: a process's threads have ids close together), opened on first
 * use and again once when a read through it fails (the task has gone: another of the same
 * id is another task). Returns the length, or -1 (errno). */
static ssize_t read_sched(proc_t *p, pid_t tid, char *buf, size_t cap)
{
    char path[96];
    size_t i = (size_t)tid % PROC_SCHED_FDS;
    ssize_t n = -1;
    int tries, fd;

    for (tries = 0; tries < 2; tries++) {
        if (p->sched_fd[i].tid != tid) {
            snprintf(path, sizeof path, "/proc/%d/task/%d/schedstat", (int)p->pid, (int)tid);
            fd = open(path, O_RDONLY | O_CLOEXEC);
            if (fd < 0)
                return -1;
            if (p->sched_fd[i].tid == 0 && sched_fds_open >= PROC_SCHED_FDS_ALL) {
                n = pread(fd, buf, cap - 1, 0);     /* enough kept open: read and close */
                close(fd);
                break;
            }
            if (p->sched_fd[i].tid != 0)
                close(p->sched_fd[i].fd);
            else
                sched_fds_open++;
            p->sched_fd[i].tid = tid;
            p->sched_fd[i].fd = fd;
        }
        n = pread(p->sched_fd[i].fd, buf, cap - 1, 0);
        if (n > 0)
            break;
        close(p->sched_fd[i].fd);
        sched_fds_open--;
        p->sched_fd[i].tid = 0;
    }
    if (n == 0)
        errno = ESRCH;
    if (n > 0)
        buf[n] = '\0';
    return n;
}

int proc_task_sched(proc_t *p, pid_t tid, uint64_t *run_ns, uint64_t *arrivals)
{
    /* "RUN_NS WAIT_NS ARRIVALS\n" (a kernel that does not count writes "0 0 0") */
    char text[128], *end;
    unsigned long long run, count;
    ssize_t len;

    if (p->img != NULL || p->holding || tid <= 0)
        return REMORA_EUSAGE;
    errno = ESRCH;
    len = read_sched(p, tid, text, sizeof text);
    if (len <= 0)
        return errno == ENOENT && access("/proc/self/schedstat", F_OK) != 0 ? REMORA_EUSAGE : REMORA_ENOPROC;
    errno = 0;
    run = strtoull(text, &end, 10);
    if (end == text || *end != ' ')
        return REMORA_EUSAGE;
    strtoull(end, &end, 10);
    if (*end != ' ')
        return REMORA_EUSAGE;
    count = strtoull(end, &end, 10);
    if (errno != 0 || count == 0)
        return REMORA_EUSAGE;       /* a task that exists has been on a CPU: not counted here */
    *run_ns = run;
    *arrivals = count;
    return REMORA_OK;
}

int proc_task_state(proc_t *p, pid_t tid, char *state)
{
    /* "pid (comm) S ...": comm is 15 bytes at most, every field after S a number */
    char text[256];
    ssize_t len;
    int err;

    if (p->holding) {
        size_t i;
        for (i = 0; i < p->nheld; i++)
            if (p->held[i].tid == tid) {
                *state = p->held[i].state;
                return REMORA_OK;
            }
    }
    if (p->img != NULL) {
        const img_task_t *t = image_task(p->img, tid);
        if (t == NULL || t->state == 0)
            return REMORA_ENOPROC;
        *state = t->state;
        err = REMORA_OK;
    } else {
        errno = ESRCH;
        len = tid > 0 ? read_stat(p, tid, text, sizeof text) : -1;
        if (len <= 0)
            return errno == EACCES || errno == EPERM ? REMORA_EPERM : REMORA_ENOPROC;
        err = proc_stat_parse_state(text, (size_t)len, state);
    }
    if (err == REMORA_OK)
        PROC_RECORD(p, rec_task_state(p->rec, tid, *state));
    return err;
}

int proc_states_held(const proc_t *p)
{
    return p->img != NULL || p->holding;
}

int proc_hold_states(proc_t *p, const pid_t *tids, size_t n)
{
    size_t i;

    p->holding = 0;
    p->nheld = 0;
    if (remora_grow((void **)&p->held, &p->cap_held, n, sizeof *p->held))
        return REMORA_ENOMEM;
    for (i = 0; i < n; i++) {
        char st;
        if (proc_task_state(p, tids[i], &st) == REMORA_OK) {
            p->held[p->nheld].tid = tids[i];
            p->held[p->nheld++].state = st;
        }
    }
    p->holding = 1;
    return REMORA_OK;
}

void proc_release_states(proc_t *p)
{
    p->holding = 0;
    p->nheld = 0;
}

int proc_task_comm(proc_t *p, pid_t tid, char *name, size_t len)
{
    char path[96];
    char *text;
    size_t n;
    int err;

    if (len == 0)
        return REMORA_OK;
    if (p->img != NULL) {
        const img_task_t *t = image_task(p->img, tid);
        if (t == NULL || !t->has_comm) {
            name[0] = '\0';
            return REMORA_ENOPROC;
        }
        snprintf(name, len, "%s", t->name);
        PROC_RECORD(p, rec_task_comm(p->rec, tid, t->name));
        return REMORA_OK;
    }
    snprintf(path, sizeof path, "/proc/%d/task/%d/comm", (int)p->pid, (int)tid);
    err = proc_slurp(path, 256, &text, &n);
    if (err) {
        name[0] = '\0';
        return err == REMORA_EPERM ? err : REMORA_ENOPROC;
    }
    if (n > 0 && text[n - 1] == '\n')
        n--;                    /* the kernel's; a comm may end with its own newline */
    if (n >= len)
        n = len - 1;
    memcpy(name, text, n);
    name[n] = '\0';
    free(text);
    PROC_RECORD(p, rec_task_comm(p->rec, tid, name));
    return REMORA_OK;
}

int proc_rss(pid_t pid, uint64_t *bytes)
{
    char path[64], *text, *end;
    unsigned long long size, resident;
    long page = sysconf(_SC_PAGESIZE);
    size_t n;
    int err;

    *bytes = 0;
    snprintf(path, sizeof path, "/proc/%d/statm", (int)pid);
    if ((err = proc_slurp(path, 256, &text, &n)) != REMORA_OK)
        return err == REMORA_EPERM ? err : REMORA_ENOPROC;
    /* "size resident shared text lib data dt", in pages: the kernel's numbers, but the
     * text is still read with bounds (a NUL-terminated copy) */
    errno = 0;
    size = strtoull(text, &end, 10);
    resident = end != text ? strtoull(end, &end, 10) : 0;
    err = errno != 0 || end == text || page <= 0 || resident > UINT64_MAX / (uint64_t)page ?
          REMORA_ECORRUPT : REMORA_OK;
    (void)size;
    free(text);
    if (err == REMORA_OK)
        *bytes = (uint64_t)resident * (uint64_t)page;
    return err;
}

/* Every process on the machine with its parent. Returns a malloc'd array (*n entries) or
 * NULL (none readable, or out of memory). */
static pid_t (*all_parents(size_t *n))[2]
{
    DIR *d = opendir("/proc");
    struct dirent *e;
    pid_t (*pairs)[2] = NULL;
    size_t cap = 0;

    *n = 0;
    if (d == NULL)
        return NULL;
    while ((e = readdir(d)) != NULL) {
        char path[64], buf[512], *close_paren;
        long pid = strtol(e->d_name, NULL, 10), ppid;
        ssize_t len;
        int fd;
        if (pid <= 0)
            continue;
        snprintf(path, sizeof path, "/proc/%ld/stat", pid);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        len = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (len <= 0)
            continue;
        buf[len] = '\0';
        /* "pid (comm) state ppid ...": comm may hold anything, so from the last ')' */
        close_paren = strrchr(buf, ')');
        if (close_paren == NULL || sscanf(close_paren + 1, " %*c %ld", &ppid) != 1)
            continue;
        if (remora_grow((void **)&pairs, &cap, *n + 1, sizeof *pairs))
            break;
        pairs[*n][0] = (pid_t)pid;
        pairs[*n][1] = (pid_t)ppid;
        (*n)++;
    }
    closedir(d);
    return pairs;
}

/* Appends to out[*n..cap) the children of each thread of pid (/proc/PID/task/TID/children)
 * not already there. Returns 0, or -1 when pid's threads cannot be listed (it exited). */
static int children_of(pid_t pid, pid_t root, pid_t *out, size_t cap, size_t *n)
{
    char path[96], buf[4096];
    DIR *d;
    struct dirent *e;

    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    d = opendir(path);
    if (d == NULL)
        return -1;
    while ((e = readdir(d)) != NULL && *n < cap) {
        long tid = strtol(e->d_name, NULL, 10), kid = 0;
        ssize_t len, i;
        int fd;
        if (tid <= 0)
            continue;
        snprintf(path, sizeof path, "/proc/%d/task/%ld/children", (int)pid, tid);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        /* "PID PID ... ": a number may be cut between two reads */
        while ((len = read(fd, buf, sizeof buf)) > 0 || (len < 0 && errno == EINTR)) {
            for (i = 0; i < len; i++) {
                size_t k;
                if (buf[i] >= '0' && buf[i] <= '9') {
                    if (kid < 100000000)    /* pid_max is at most 2^22 */
                        kid = kid * 10 + (buf[i] - '0');
                    continue;
                }
                if (kid > 0 && kid < 100000000 && kid != root) {
                    for (k = 0; k < *n && out[k] != (pid_t)kid; k++)
                        ;
                    if (k == *n && *n < cap)
                        out[(*n)++] = (pid_t)kid;
                }
                kid = 0;
            }
        }
        close(fd);
    }
    closedir(d);
    return 0;
}

/* Whether the kernel lists each thread's children (CONFIG_PROC_CHILDREN). */
static int have_children_files(void)
{
    static int have = -1;
    char path[64];

    if (have < 0) {
        snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)getpid(), (int)getpid());
        have = access(path, R_OK) == 0;
    }
    return have;
}

int proc_descendants(pid_t root, pid_t *out, size_t cap, size_t *n)
{
    size_t npairs, i, k, found = 0;
    pid_t (*pairs)[2];
    int grew = 1;

    *n = 0;
    if (have_children_files()) {
        /* from the root down, each process's children: costs what the tree holds, not
         * what the machine runs (a scan of /proc reads every process's stat) */
        size_t next = 0;
        if (children_of(root, root, out, cap, n) != 0)
            return kill(root, 0) != 0 && errno == ESRCH ? REMORA_ENOPROC : REMORA_OK;
        while (next < *n)
            children_of(out[next++], root, out, cap, n);
        return REMORA_OK;
    }
    pairs = all_parents(&npairs);
    if (pairs == NULL)
        return npairs == 0 && kill(root, 0) != 0 ? REMORA_ENOPROC : REMORA_OK;
    /* children of the root or of a descendant found, to a fixpoint (a child may be
     * listed before its parent) */
    while (grew && found < cap) {
        grew = 0;
        for (i = 0; i < npairs && found < cap; i++) {
            int parent_known = pairs[i][1] == root, known = pairs[i][0] == root;
            for (k = 0; k < found && !(parent_known && known); k++) {
                parent_known |= out[k] == pairs[i][1];
                known |= out[k] == pairs[i][0];
            }
            if (parent_known && !known) {
                out[found++] = pairs[i][0];
                grew = 1;
            }
        }
    }
    free(pairs);
    *n = found;
    return REMORA_OK;
}

long proc_tracer(pid_t pid)
{
    char path[64], *text, *line;
    long tracer = -1;
    size_t n;

    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    if (proc_slurp(path, 1 << 16, &text, &n) != REMORA_OK)
        return -1;
    for (line = text; line != NULL && *line != '\0'; line = strchr(line, '\n'), line += line != NULL)
        if (sscanf(line, "TracerPid: %ld", &tracer) == 1)
            break;
    free(text);
    return tracer;
}

void proc_cmdline(pid_t pid, char *out, size_t cap)
{
    char path[64];
    ssize_t n, i;
    int fd;

    if (cap == 0)
        return;
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

int proc_pidfd(pid_t pid)
{
#ifdef SYS_pidfd_open
    return (int)syscall(SYS_pidfd_open, pid, 0);        /* always close-on-exec */
#else
    (void)pid;
    return -1;
#endif
}
