/* util/output.c — opening the files remora writes its outputs to.
 *
 * A regular file (or a name not there yet) is written through a temporary name beside it
 * and renamed into place once whole, so an interrupted write never leaves half a profile;
 * behind a symlink, beside the file the link names, and the link is kept. Anything else is
 * written in place, streaming: a device (/dev/null, /dev/full), a FIFO, a file only the
 * kernel can name (/proc/PID/fd/N of a deleted file). remora runs as root: renaming over
 * /dev/null would replace the device for every program on the machine. Refused, with the
 * reason: a directory, a socket, a file of /proc or /sys, a file the system does not let
 * remora write or replace (a read-only mount, chattr +i or +a, its mode for a user other
 * than root) — remora_output_check() finds these before anything is sampled.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "util.h"

#define TMP_SUFFIX ".XXXXXX"        /* the temporary name: the final name, then this */
#define MAX_LINKS 40                /* as the kernel's own limit on a path's symlinks */

/* The name 'path' ends at once its symlinks are followed, a relative link's target taken
 * from the link's own directory; it need not exist (a link to a name not there yet).
 * Returns a malloc'd name, or NULL with errno set. */
static char *final_name(const char *path)
{
    char link[PATH_MAX], *cur = strdup(path), *next, *slash;
    ssize_t n;
    size_t dir;
    int hops;

    for (hops = 0; cur != NULL && hops <= MAX_LINKS; hops++) {
        n = readlink(cur, link, sizeof link - 1);
        if (n < 0) {
            if (errno == EINVAL || errno == ENOENT)
                return cur;         /* not a link, or nothing there: the name ends here */
            free(cur);
            return NULL;
        }
        if ((size_t)n >= sizeof link - 1) {
            free(cur);
            errno = ENAMETOOLONG;
            return NULL;
        }
        link[n] = '\0';
        slash = strrchr(cur, '/');
        dir = link[0] == '/' || slash == NULL ? 0 : (size_t)(slash - cur) + 1;
        next = malloc(dir + (size_t)n + 1);
        if (next != NULL) {
            memcpy(next, cur, dir);
            memcpy(next + dir, link, (size_t)n + 1);
        }
        free(cur);
        cur = next;
    }
    if (cur == NULL) {
        errno = ENOMEM;
        return NULL;
    }
    free(cur);
    errno = ELOOP;
    return NULL;
}

/* Whether 'name' is (or would be made) in one of the kernel's own file systems, whose files
 * are interfaces, not storage for a profile. Returns NULL, or the reason for a message. */
static const char *kernel_fs(const char *name, int exists)
{
    struct statfs fs;
    const char *slash = strrchr(name, '/');
    char *dir = NULL;
    int rc;

    if (!exists && slash != NULL &&  /* a new name: the file system it would be made in */
        (dir = strndup(name, slash == name ? 1 : (size_t)(slash - name))) == NULL)
        return NULL;
    rc = statfs(exists ? name : dir ? dir : ".", &fs);
    free(dir);
    if (rc != 0)
        return NULL;                /* the open itself will say what is wrong */
    switch (fs.f_type) {
    case PROC_SUPER_MAGIC: return "it is in /proc, the kernel's files, not storage";
    case SYSFS_MAGIC: return "it is in /sys, the kernel's files, not storage";
    default: return NULL;
    }
}

/* A file no one may replace, for what chattr set on it; NULL if none (or unknown). */
static const char *locked(const char *name)
{
    struct statx sx;

    if (statx(AT_FDCWD, name, 0, STATX_BASIC_STATS, &sx) != 0)
        return NULL;
    if (sx.stx_attributes & STATX_ATTR_IMMUTABLE)
        return "it is immutable (chattr +i): no one may replace it";
    if (sx.stx_attributes & STATX_ATTR_APPEND)
        return "it is append-only (chattr +a): no one may replace it";
    return NULL;
}

/* How 'path' is written. Returns 1: through a temporary file renamed to *name (malloc'd);
 * 0: in place (*name NULL); -1: refused, errno set, *why the reason for a message (or
 * NULL: strerror(errno) says it). */
static int plan(const char *path, char **name, const char **why)
{
    struct stat st, fin;
    int exists = stat(path, &st) == 0;

    *name = NULL;
    *why = NULL;
    if (!exists && errno != ENOENT)
        return -1;
    if (exists && S_ISDIR(st.st_mode)) {
        errno = EISDIR;
        *why = "it is a directory";
        return -1;
    }
    if (exists && S_ISSOCK(st.st_mode)) {
        errno = ENXIO;
        *why = "it is a socket, which cannot be opened as a file";
        return -1;
    }
    if (exists && !S_ISREG(st.st_mode))
        return 0;                   /* a device, a FIFO: in place, never renamed over */
    if ((*name = final_name(path)) == NULL)
        return -1;
    if (exists && (stat(*name, &fin) != 0 || fin.st_dev != st.st_dev || fin.st_ino != st.st_ino)) {
        free(*name);                /* a link only the kernel follows (a deleted file, one */
        *name = NULL;               /* of another mount namespace): that file, in place */
        if ((*why = kernel_fs(path, 1)) != NULL) {
            errno = EACCES;
            return -1;
        }
        return 0;
    }
    if ((*why = kernel_fs(*name, exists)) != NULL)
        errno = EACCES;
    else if (exists && (*why = locked(*name)) != NULL)
        errno = EPERM;
    else if (exists && faccessat(AT_FDCWD, *name, W_OK, AT_EACCESS) != 0)
        ;                           /* a read-only mount, or its mode (root may write any) */
    else
        return 1;
    free(*name);
    *name = NULL;
    return -1;
}

/* A temporary file beside 'name', mode 0644. Returns its descriptor and its name in *tmp
 * (malloc'd), or -1 with errno set and *tmp NULL. */
static int make_temp(const char *name, char **tmp)
{
    size_t len = strlen(name) + sizeof TMP_SUFFIX;
    int fd, saved;

    if ((*tmp = malloc(len)) == NULL) {
        errno = ENOMEM;
        return -1;
    }
    snprintf(*tmp, len, "%s" TMP_SUFFIX, name);
    fd = mkstemp(*tmp);
    if (fd >= 0 && fchmod(fd, 0644) == 0)
        return fd;
    saved = errno;
    if (fd >= 0) {
        close(fd);
        unlink(*tmp);
    }
    free(*tmp);
    *tmp = NULL;
    errno = saved;
    return -1;
}

const char *remora_output_check(const char *path)
{
    const char *why;
    char *name, *tmp;
    int how, fd;

    if (strcmp(path, "-") == 0)
        return NULL;
    how = plan(path, &name, &why);
    if (how < 0)
        return why != NULL ? why : strerror(errno);
    if (how == 0)                   /* not opened: a FIFO's reader would see it end */
        return faccessat(AT_FDCWD, path, W_OK, AT_EACCESS) == 0 ? NULL : strerror(errno);
    fd = make_temp(name, &tmp);
    free(name);
    if (fd < 0)
        return strerror(errno);
    close(fd);
    unlink(tmp);
    free(tmp);
    return NULL;
}

int remora_output_open(const char *path, char **tmp)
{
    const char *why;
    char *name;
    int how, fd;

    *tmp = NULL;
    how = plan(path, &name, &why);
    if (how < 0)
        return -1;
    if (how == 0)                   /* O_NOCTTY: a terminal written to is not made remora's */
        return open(path, O_WRONLY | O_TRUNC | O_CLOEXEC | O_NOCTTY);
    fd = make_temp(name, tmp);
    free(name);
    return fd;
}

int remora_output_done(const char *path, char *tmp, int commit)
{
    char *name = NULL;
    int rc = 0;

    (void)path;                     /* the name it resolved to is tmp's, less the suffix */
    if (tmp == NULL)
        return 0;
    if (commit) {
        name = strndup(tmp, strlen(tmp) - (sizeof TMP_SUFFIX - 1));
        if (name == NULL) {
            errno = ENOMEM;
            rc = -1;
        } else if (rename(tmp, name) != 0) {
            rc = -1;
        }
    }
    if (!commit || rc != 0) {
        int saved = errno;
        unlink(tmp);
        errno = saved;
    }
    free(name);
    free(tmp);
    return rc;
}
