/* proc/proc.c — the live-process memory source on Linux.
 *
 * Reads the target's memory with process_vm_readv (single and vectored) and maps
 * errno to REMORA_E* codes, once, here.
 */

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>

#include "remora.h"
#include "proc.h"
#include "proc_internal.h"

int proc_err_from_errno(int e)
{
    switch (e) {
    case ESRCH:
    case ENOENT:
        return REMORA_ENOPROC;
    case EPERM:
    case EACCES:
        return REMORA_EPERM;
    case EFAULT:
        return REMORA_EFAULT;
    case ENOMEM:
        return REMORA_ENOMEM;
    default:
        return REMORA_EIO;
    }
}

int proc_open(pid_t pid, proc_t **out)
{
    char path[64];
    struct stat st;
    proc_t *p;

    *out = NULL;
    if (pid <= 0)
        return REMORA_ENOPROC;
    snprintf(path, sizeof path, "/proc/%d", (int)pid);
    if (stat(path, &st) != 0)
        return proc_err_from_errno(errno);
    p = calloc(1, sizeof *p);
    if (p == NULL)
        return REMORA_ENOMEM;
    p->pid = pid;
    *out = p;
    return REMORA_OK;
}

void proc_free(proc_t *p)
{
    free(p);
}

pid_t proc_pid(const proc_t *p)
{
    return p->pid;
}

const proc_stats_t *proc_stats(const proc_t *p)
{
    return &p->stats;
}

/* After a failed or short read: is the process still there? */
static int proc_gone(const proc_t *p)
{
    char path[64];
    struct stat st;

    snprintf(path, sizeof path, "/proc/%d", (int)p->pid);
    return stat(path, &st) != 0 && errno == ENOENT;
}

int proc_read(proc_t *p, uint64_t addr, void *buf, size_t len)
{
    struct iovec local = { buf, len };
    struct iovec remote = { (void *)(uintptr_t)addr, len };
    ssize_t n;

    if (len == 0)
        return REMORA_OK;
    if (addr == 0 || addr + len < addr)
        return REMORA_EFAULT;
    n = process_vm_readv(p->pid, &local, 1, &remote, 1, 0);
    p->stats.reads++;
    if (n < 0) {
        int err = proc_err_from_errno(errno);
        if (err == REMORA_EFAULT && proc_gone(p))
            err = REMORA_ENOPROC;
        return err;
    }
    p->stats.bytes += (uint64_t)n;
    if ((size_t)n != len)
        return proc_gone(p) ? REMORA_ENOPROC : REMORA_EFAULT;
    return REMORA_OK;
}

int proc_read_u64(proc_t *p, uint64_t addr, uint64_t *out)
{
    return proc_read(p, addr, out, sizeof *out);
}

#define PROC_IOV_BATCH 64

int proc_readv(proc_t *p, const proc_iov_t *iov, size_t n)
{
    struct iovec local[PROC_IOV_BATCH], remote[PROC_IOV_BATCH];
    size_t done = 0;

    while (done < n) {
        size_t k = n - done < PROC_IOV_BATCH ? n - done : PROC_IOV_BATCH;
        size_t want = 0, i;
        ssize_t got;

        for (i = 0; i < k; i++) {
            const proc_iov_t *v = &iov[done + i];
            if (v->addr == 0 || v->addr + v->len < v->addr)
                return REMORA_EFAULT;
            local[i].iov_base = v->buf;
            local[i].iov_len = v->len;
            remote[i].iov_base = (void *)(uintptr_t)v->addr;
            remote[i].iov_len = v->len;
            want += v->len;
        }
        got = process_vm_readv(p->pid, local, (unsigned long)k, remote, (unsigned long)k, 0);
        p->stats.reads++;
        if (got < 0) {
            int err = proc_err_from_errno(errno);
            if (err == REMORA_EFAULT && proc_gone(p))
                err = REMORA_ENOPROC;
            return err;
        }
        p->stats.bytes += (uint64_t)got;
        if ((size_t)got != want)
            return proc_gone(p) ? REMORA_ENOPROC : REMORA_EFAULT;
        done += k;
    }
    return REMORA_OK;
}
