/* proc/proc.c — the process handle and the live-process memory source on Linux.
 *
 * Reads the target's memory with process_vm_readv (single and vectored), and /proc/PID
 * (stat only) to tell a process that is gone from an unmapped address; errno becomes a
 * REMORA_E* code through file.c. A core or snapshot handle holds the image core.c or
 * snapshot.c built, and its reads go there (image.c); in test builds, a recording handle
 * hands what it read to its recorder (snapshot.c). Those files never call back into this
 * one.
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

#define PROC_PF_KTHREAD 0x00200000u     /* the kernel's PF_KTHREAD (include/linux/sched.h) */

int proc_is_kernel_thread(pid_t pid)
{
    char path[64], *text, *s;
    unsigned long flags = 0;
    size_t len;
    int i;

    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    if (proc_slurp(path, 4096, &text, &len) != REMORA_OK)
        return 0;
    /* after the comm (which may hold anything, ')' too): state, ppid, pgrp, session,
     * tty_nr, tpgid, then flags */
    s = strrchr(text, ')');
    for (i = 0; s != NULL && i < 7; i++)
        s = strchr(s + 1, ' ');
    if (s != NULL)
        flags = strtoul(s + 1, NULL, 10);
    free(text);
    return (flags & PROC_PF_KTHREAD) != 0;
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
    /* its memory map is empty, as a process that exited: said for what it is */
    if (proc_is_kernel_thread(pid))
        return REMORA_ENOTPY;
    p = calloc(1, sizeof *p);
    if (p == NULL)
        return REMORA_ENOMEM;
    p->kind = PROC_LIVE;
    p->pid = pid;
    proc_source_attach(p);
    *out = p;
    return REMORA_OK;
}

/* A handle on a core or snapshot image (owned by the handle; freed on failure). */
static int proc_from_image(int kind, pid_t pid, image_t *img, proc_t **out)
{
    proc_t *p = calloc(1, sizeof *p);

    if (p == NULL) {
        image_free(img);
        return REMORA_ENOMEM;
    }
    p->kind = kind;
    p->pid = pid;
    p->img = img;
    proc_source_attach(p);
    *out = p;
    return REMORA_OK;
}

int proc_open_core(const char *core, const char *exe, const char *root, proc_t **out)
{
    image_t *img;
    pid_t pid;
    int err;

    *out = NULL;
    err = core_open(core, exe, root, &img, &pid);
    return err ? err : proc_from_image(PROC_CORE, pid, img, out);
}

#ifdef REMORA_TESTING
/* ---- test builds: cores from memory, snapshots (recorded and replayed) ---- */

int proc_open_core_mem(const void *buf, size_t len, const char *exe, const char *root,
                       proc_t **out)
{
    image_t *img;
    pid_t pid;
    int err;

    *out = NULL;
    err = core_open_mem(buf, len, exe, root, &img, &pid);
    return err ? err : proc_from_image(PROC_CORE, pid, img, out);
}

int proc_open_snapshot(const char *file, proc_t **out)
{
    image_t *img;
    pid_t pid;
    int err;

    *out = NULL;
    err = snapshot_open(file, &img, &pid);
    return err ? err : proc_from_image(PROC_SNAPSHOT, pid, img, out);
}

int proc_open_snapshot_mem(const void *buf, size_t len, proc_t **out)
{
    image_t *img;
    pid_t pid;
    int err;

    *out = NULL;
    err = snapshot_open_mem(buf, len, &img, &pid);
    return err ? err : proc_from_image(PROC_SNAPSHOT, pid, img, out);
}

int proc_record_start(proc_t *p)
{
    if (p->rec != NULL)
        return REMORA_OK;
    p->rec = rec_new();
    return p->rec ? REMORA_OK : REMORA_ENOMEM;
}

int proc_snapshot_save(proc_t *p, const char *path)
{
    return p->rec ? rec_save(p->rec, p->pid, p->kind, path) : REMORA_EUSAGE;
}

int proc_snapshot_save_mem(proc_t *p, unsigned char **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    return p->rec ? rec_save_mem(p->rec, p->pid, p->kind, out, len) : REMORA_EUSAGE;
}
#endif

void proc_free(proc_t *p)
{
    if (p == NULL)
        return;
    image_free(p->img);
    PROC_RECORD(p, rec_free(p->rec));
    proc_close_stats(p);
    proc_source_detach(p);
    free(p->held);
    free(p);
}

int proc_kind(const proc_t *p)
{
    return p->kind;
}

const char *proc_problem(const proc_t *p)
{
    return p->img ? p->img->problem : "";
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
    int err;

    if (p->img != NULL) {
        if (len == 0)
            return REMORA_OK;
        p->stats.reads++;
        err = image_read(p->img, addr, buf, len);
        if (err == REMORA_OK)
            p->stats.bytes += len;
    } else {
        err = proc_live_read(p, addr, buf, len);
    }
    if (err == REMORA_OK && len > 0)
        PROC_RECORD(p, rec_mem(p->rec, addr, buf, len));
    return err;
}

int proc_readv(proc_t *p, const proc_iov_t *iov, size_t n)
{
    size_t i;
    int err = REMORA_OK;

    if (p->img != NULL) {
        if (n == 0)
            return REMORA_OK;
        p->stats.reads++;
        for (i = 0; i < n && err == REMORA_OK; i++) {
            if (iov[i].len == 0)
                continue;
            err = image_read(p->img, iov[i].addr, iov[i].buf, iov[i].len);
            if (err == REMORA_OK)
                p->stats.bytes += iov[i].len;
        }
    } else {
        err = proc_live_readv(p, iov, n);
    }
    if (err == REMORA_OK)
        PROC_RECORD(p, rec_memv(p->rec, iov, n));
    return err;
}

int proc_live_read(proc_t *p, uint64_t addr, void *buf, size_t len)
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

int proc_write_u64(proc_t *p, uint64_t addr, uint64_t value)
{
    struct iovec local = { &value, 8 };
    struct iovec remote = { (void *)(uintptr_t)addr, 8 };
    ssize_t n;

    if (p->kind != PROC_LIVE)
        return REMORA_EUSAGE;
    if (addr == 0 || addr % 8 != 0)
        return REMORA_EFAULT;
    n = process_vm_writev(p->pid, &local, 1, &remote, 1, 0);
    p->stats.writes++;
    if (n < 0)
        return proc_gone(p) ? REMORA_ENOPROC : proc_err_from_errno(errno);
    return n == 8 ? REMORA_OK : REMORA_EFAULT;
}

int proc_read_u64(proc_t *p, uint64_t addr, uint64_t *out)
{
    return proc_read(p, addr, out, sizeof *out);
}

#define PROC_IOV_BATCH 1024   /* the kernel's UIO_MAXIOV: one system call per 1024 segments */

int proc_live_readv(proc_t *p, const proc_iov_t *iov, size_t n)
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
        p->stats.vectored++;
        p->stats.segments += k;
        if (got >= 0) {             /* the kernel reads the ranges in order, up to a fault */
            size_t at = 0;
            for (i = 0; i < k && at + local[i].iov_len <= (size_t)got; i++) {
                at += local[i].iov_len;
                p->stats.segments_done++;
            }
            p->stats.vectored_ok += (size_t)got == want;
        }
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
