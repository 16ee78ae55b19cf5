/* proc/source.c — a Python source file as the target sees it, for the source lines of
 * `dump` (and any report that shows source).
 *
 * A live target's file is opened under its own root (/proc/PID/root, resolved inside it
 * with openat2's RESOLVE_IN_ROOT where the kernel has it: a container's symlink cannot
 * lead out of it), a relative name beneath its working directory; a core's under the
 * --root given, else as named; a snapshot holds no sources. The file's name comes from a
 * code object, so it is untrusted: only regular files are read (a FIFO would block), at
 * most PROC_SRC_MAX bytes, and a file holding a NUL byte is called binary (no Python
 * source does). Nothing here reads the target's memory.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "remora.h"
#include "proc_internal.h"
#include "../util/util.h"

#ifndef RESOLVE_IN_ROOT
#define RESOLVE_NO_MAGICLINKS 0x02
#define RESOLVE_IN_ROOT 0x10
#endif

struct src_how {                    /* struct open_how of <linux/openat2.h> */
    uint64_t flags, mode, resolve;
};

#ifndef RESOLVE_BENEATH
#define RESOLVE_BENEATH 0x08
#endif

/* path opened under the directory dirfd as under its root (resolve RESOLVE_IN_ROOT), or
 * only beneath it (RESOLVE_BENEATH: a relative name under the target's working directory);
 * -1 with errno set. */
static int open_in(int dirfd, const char *path, uint64_t resolve)
{
#ifdef SYS_openat2
    struct src_how how = { O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY, 0,
                           resolve | RESOLVE_NO_MAGICLINKS };
    long fd = syscall(SYS_openat2, dirfd, path, &how, sizeof how);

    if (fd >= 0 || (errno != ENOSYS && errno != EPERM))
        return (int)fd;
#endif
    if (resolve == RESOLVE_BENEATH && (strstr(path, "..") != NULL || path[0] == '/'))
        return -1;                  /* no openat2: no way out of the directory either */
    while (*path == '/')
        path++;
    return openat(dirfd, *path ? path : ".", O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
}

static int open_in_root(int dirfd, const char *path)
{
    return open_in(dirfd, path, RESOLVE_IN_ROOT);
}

/* The file the target names 'path', opened, or -1. */
static int open_source(const proc_t *p, const char *path)
{
    char buf[4200];
    int dir, fd;

    if (p == NULL)                  /* no process: the file as this host names it */
        return path[0] == '/' ? open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY) : -1;
    if (p->kind == PROC_LIVE) {
        snprintf(buf, sizeof buf, "/proc/%d/%s", (int)p->pid, path[0] == '/' ? "root" : "cwd");
        dir = open(buf, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dir < 0 && path[0] == '/' && (errno == ENOENT || errno == ESRCH))
            return open_source(NULL, path);     /* the process is gone: as named */
        if (dir < 0)
            return -1;
        /* a relative name: beneath the working directory only (its ".." would climb the
         * host's tree from a chrooted target's directory) */
        fd = path[0] == '/' ? open_in_root(dir, path) : open_in(dir, path, RESOLVE_BENEATH);
        close(dir);
        return fd;
    }
    if (p->kind == PROC_CORE && path[0] == '/') {
        const char *root = p->img != NULL ? p->img->root : NULL;
        if (root != NULL && strncmp(path, root, strlen(root)) != 0) {
            if ((dir = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
                return -1;
            fd = open_in_root(dir, path);
            close(dir);
            return fd;
        }
        return open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    }
    return -1;
}

/* When the live target started, in nanoseconds since the epoch; 0 if unknown. The kernel
 * gives it in clock ticks of the boot-time clock: turned into the wall clock's time by
 * today's offset between the two (/proc/stat's btime is whole seconds: too coarse). */
static int64_t started_ns(const proc_t *p)
{
    char buf[1024], *s;
    unsigned long long ticks = 0;
    long hz = sysconf(_SC_CLK_TCK);
    struct timespec real, boot;
    FILE *f;
    int k;

    if (p == NULL || p->kind != PROC_LIVE || hz <= 0)
        return 0;
    snprintf(buf, sizeof buf, "/proc/%d/stat", (int)p->pid);
    if ((f = fopen(buf, "re")) == NULL)
        return 0;
    s = fgets(buf, sizeof buf, f);
    fclose(f);
    if (s == NULL || (s = strrchr(buf, ')')) == NULL)
        return 0;
    /* fields after the name: 3 state ... 22 starttime */
    for (k = 3; k <= 22 && s != NULL; k++)
        s = strchr(s + 1, ' ');
    if (s == NULL || sscanf(s, " %llu", &ticks) != 1)
        return 0;
    if (clock_gettime(CLOCK_REALTIME, &real) != 0 || clock_gettime(CLOCK_BOOTTIME, &boot) != 0)
        return 0;
    return ((int64_t)real.tv_sec - boot.tv_sec) * 1000000000 + (real.tv_nsec - boot.tv_nsec) +
           (int64_t)(ticks * (1000000000ull / (unsigned long long)hz));
}

const char *proc_src_state_str(int state)
{
    switch (state) {
    case PROC_SRC_OK:
        return "read";
    case PROC_SRC_NOT_FILE:
        return "not a regular file";
    case PROC_SRC_TOO_BIG:
        return "too large to show";
    case PROC_SRC_BINARY:
        return "binary, not source";
    case PROC_SRC_NAMELESS:
        return "not a file (a name in angle brackets)";
    default:
        return "missing or unreadable";
    }
}

int proc_source_read(proc_t *p, const char *path, proc_src_t *out)
{
    struct stat st;
    size_t cap, n = 0;
    char *text;
    int fd;

    memset(out, 0, sizeof *out);
    out->state = PROC_SRC_MISSING;
    if (path == NULL || path[0] == '\0')
        return REMORA_OK;
    if (path[0] == '<') {
        out->state = PROC_SRC_NAMELESS;     /* "<string>", "<frozen ...>", "<stdin>" */
        return REMORA_OK;
    }
    if ((fd = open_source(p, path)) < 0)
        return REMORA_OK;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        out->state = PROC_SRC_NOT_FILE;
        close(fd);
        return REMORA_OK;
    }
    if (st.st_size > PROC_SRC_MAX) {
        out->state = PROC_SRC_TOO_BIG;
        close(fd);
        return REMORA_OK;
    }
    cap = (size_t)st.st_size + 1;           /* it may grow while read: no more than this */
    if ((text = malloc(cap)) == NULL) {
        close(fd);
        return REMORA_ENOMEM;
    }
    while (n + 1 < cap) {
        ssize_t r = read(fd, text + n, cap - 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    text[n] = '\0';
    if (memchr(text, '\0', n) != NULL) {
        free(text);
        out->state = PROC_SRC_BINARY;
        return REMORA_OK;
    }
    if (lines_index(text, n, &out->lines, &out->nlines) != 0) {
        free(text);
        return REMORA_ENOMEM;
    }
    out->text = text;
    out->len = n;
    out->state = PROC_SRC_OK;
    {
        int64_t t0 = started_ns(p);
        int64_t m = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
        /* the start time has the clock tick's grain (and a file's time the kernel's
         * coarse clock's): a file written in the tick the process began is not changed */
        out->changed = t0 != 0 && m > t0 + 50000000;
    }
    return REMORA_OK;
}

const char *proc_src_line(const proc_src_t *s, int line, size_t *len)
{
    *len = 0;
    if (s->state != PROC_SRC_OK)
        return NULL;
    return lines_get(s->text, s->lines, s->nlines, line, 1, len);
}

void proc_src_free(proc_src_t *s)
{
    free(s->text);
    free(s->lines);
    memset(s, 0, sizeof *s);
}
