/* proc/task.c — the target's threads: /proc/PID/task, each task's state and name
 * (or the tasks a core or snapshot image holds). */

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "remora.h"
#include "proc.h"
#include "proc_internal.h"

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
            if (p->rec != NULL)
                rec_task(p->rec, p->img->tasks[k].tid);
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
        if (p->rec != NULL)
            rec_task(p->rec, (pid_t)v);
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

int proc_task_state(proc_t *p, pid_t tid, char *state)
{
    char path[96];
    char *text;
    size_t len;
    int err;

    if (p->img != NULL) {
        const img_task_t *t = image_task(p->img, tid);
        if (t == NULL || t->state == 0)
            return REMORA_ENOPROC;
        *state = t->state;
        err = REMORA_OK;
    } else {
        snprintf(path, sizeof path, "/proc/%d/task/%d/stat", (int)p->pid, (int)tid);
        err = proc_slurp(path, 4096, &text, &len);
        if (err)
            return err == REMORA_EPERM ? err : REMORA_ENOPROC;
        err = proc_stat_parse_state(text, len, state);
        free(text);
    }
    if (err == REMORA_OK && p->rec != NULL)
        rec_task_state(p->rec, tid, *state);
    return err;
}

int proc_task_name(proc_t *p, pid_t tid, char *name, size_t len)
{
    char path[96];
    char *text;
    size_t n;
    int err;

    if (len == 0)
        return REMORA_OK;
    if (p->img != NULL) {
        const img_task_t *t = image_task(p->img, tid);
        if (t == NULL || !t->has_name) {
            name[0] = '\0';
            return REMORA_ENOPROC;
        }
        snprintf(name, len, "%s", t->name);
        if (p->rec != NULL)
            rec_task_name(p->rec, tid, t->name);
        return REMORA_OK;
    }
    snprintf(path, sizeof path, "/proc/%d/task/%d/comm", (int)p->pid, (int)tid);
    err = proc_slurp(path, 256, &text, &n);
    if (err) {
        name[0] = '\0';
        return err == REMORA_EPERM ? err : REMORA_ENOPROC;
    }
    if (n > 0 && text[n - 1] == '\n')
        n--;                    /* the kernel's; a name may end with its own newline */
    if (n >= len)
        n = len - 1;
    memcpy(name, text, n);
    name[n] = '\0';
    free(text);
    if (p->rec != NULL)
        rec_task_name(p->rec, tid, name);
    return REMORA_OK;
}
