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
 * than root), and in a sticky directory anyone may write (/tmp) a symlink, FIFO, device or
 * file of another user, whatever fs.protected_* say — remora_output_check() finds these
 * before anything is sampled, and the open at the end again. Every file made gets the
 * user's umask. An output that cannot be written at the end is kept elsewhere
 * (remora_output_keep).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "util.h"

#define TMP_SUFFIX ".XXXXXX"        /* the temporary name: the final name, then this */
#define MAX_LINKS 40                /* as the kernel's own limit on a path's symlinks */
#define MAX_NAME (4 * PATH_MAX)     /* a name rewritten by its links grows no longer */
#define KEEP_MARK ".rescue-"        /* a kept output: its name, this, 6 letters, its ending */

static char why_buf[PATH_MAX + 256]; /* a reason that names a file or a user */

/* The directory holding the last component of name[0..len): malloc'd ("." or "/" at the
 * least), or NULL when out of memory. */
static char *dir_of(const char *name, size_t len)
{
    size_t k = len;

    while (k > 0 && name[k - 1] != '/')
        k--;
    while (k > 1 && name[k - 1] == '/')
        k--;
    return k == 0 ? strdup(".") : strndup(name, k);
}

/* Is the directory 'dir' (its stat in *st) sticky and writable by everyone, as /tmp? */
static int sticky_shared(const char *dir, struct stat *st)
{
    return stat(dir, st) == 0 && (st->st_mode & (S_ISVTX | S_IWOTH)) == (S_ISVTX | S_IWOTH);
}

/* Whether a file of 'owner' at name[0..len) is another user's in a sticky world-writable
 * directory: neither remora's user's nor the directory owner's. The kernel's rule for
 * following a link (fs.protected_symlinks) and for opening a FIFO or file in place there
 * (fs.protected_fifos, protected_regular), applied whatever those are set to. Returns
 * NULL, or the reason (what it is, whose, where; 'verb': what remora does not do with
 * it) in why_buf. */
static const char *foreign(const char *name, size_t len, uid_t owner, const char *what,
                           const char *verb)
{
    struct stat dst;
    char *dir = dir_of(name, len);
    const char *why = NULL;

    if (dir != NULL && sticky_shared(dir, &dst) && owner != geteuid() && owner != dst.st_uid) {
        snprintf(why_buf, sizeof why_buf, "it is %s of user %u in %s, a sticky directory anyone "
                 "may write: remora does not %s another user's %s there", what,
                 (unsigned)owner, dir, verb, what + 2);
        why = why_buf;
    }
    free(dir);
    return why;
}

/* Every symlink on the way to 'path', in any of its components, walked as the kernel
 * walks them (a link's text put in its place, the walk begun again), each checked by
 * foreign(): a link another user owns in a sticky world-writable directory is never
 * followed. The walk ends at the first name not there (the open will say). Returns 0, or
 * -1 with errno set (EACCES with *why, ELOOP, ENAMETOOLONG, ENOMEM). */
static int walk_links(const char *path, const char **why)
{
    char link[PATH_MAX], *cur = strdup(path), *next;
    struct stat lst;
    size_t end, dir, rest;
    ssize_t n;
    int links = 0;

    if (cur == NULL)
        goto nomem;
again:
    for (end = 0;;) {
        char save;
        while (cur[end] == '/')
            end++;
        if (cur[end] == '\0')
            break;
        while (cur[end] != '\0' && cur[end] != '/')
            end++;
        save = cur[end];
        cur[end] = '\0';
        if (lstat(cur, &lst) != 0) {
            cur[end] = save;
            break;                  /* nothing there (or no way on): the open will say */
        }
        if (!S_ISLNK(lst.st_mode)) {
            cur[end] = save;
            continue;
        }
        if ((*why = foreign(cur, end, lst.st_uid, "a symlink", "follow")) != NULL) {
            free(cur);
            errno = EACCES;
            return -1;
        }
        n = readlink(cur, link, sizeof link - 1);
        cur[end] = save;
        if (n < 0)
            break;                  /* gone since: the open will say */
        if (++links > MAX_LINKS || (size_t)n >= sizeof link - 1) {
            free(cur);
            errno = links > MAX_LINKS ? ELOOP : ENAMETOOLONG;
            return -1;
        }
        /* the link's text in its place: after its directory when relative */
        for (dir = end; dir > 0 && cur[dir - 1] != '/'; dir--)
            ;
        if (link[0] == '/')
            dir = 0;
        rest = strlen(cur + end);
        if (dir + (size_t)n + rest >= MAX_NAME) {
            free(cur);
            errno = ENAMETOOLONG;
            return -1;
        }
        if ((next = malloc(dir + (size_t)n + rest + 1)) == NULL)
            goto nomem;
        memcpy(next, cur, dir);
        memcpy(next + dir, link, (size_t)n);
        memcpy(next + dir + n, cur + end, rest + 1);
        free(cur);
        cur = next;
        goto again;
    }
    free(cur);
    return 0;
nomem:
    free(cur);
    errno = ENOMEM;
    return -1;
}

/* Is the link 'name' one of the kernel's own in /proc (/proc/self/fd/1, what /dev/stdout
 * leads to), standing for a file a process holds open rather than naming one? */
static int proc_link(const char *name)
{
    struct statfs fs;
    char *dir = dir_of(name, strlen(name));
    int rc = dir != NULL && statfs(dir, &fs) == 0 && fs.f_type == PROC_SUPER_MAGIC;

    free(dir);
    return rc;
}

/* The name 'path' ends at once its symlinks are followed, a relative link's target taken
 * from the link's own directory; it need not exist (a link to a name not there yet). A
 * link foreign() refuses is not followed: NULL, errno EACCES, *why the reason. *by_proc
 * says whether a link of /proc was followed on the way (a file handed over open, as
 * /dev/stdout). Returns a malloc'd name, or NULL with errno set. */
static char *final_name(const char *path, const char **why, int *by_proc)
{
    char link[PATH_MAX], *cur = strdup(path), *next, *slash;
    struct stat lst;
    ssize_t n;
    size_t dir;
    int hops;

    *by_proc = 0;
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
        if (lstat(cur, &lst) == 0 &&
            (*why = foreign(cur, strlen(cur), lst.st_uid, "a symlink", "follow")) != NULL) {
            free(cur);
            errno = EACCES;
            return NULL;
        }
        *by_proc |= proc_link(cur);
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

/* Six letters of a name no one can guess (a temporary or a kept file's). */
static void random_letters(char *s)
{
    static const char set[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    static uint64_t count;
    unsigned char r[6];
    int i;

    if (getrandom(r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) {
        uint64_t x = (uint64_t)remora_now_ns() ^ (uint64_t)getpid() << 32 ^ ++count * 0x9e3779b97f4a7c15ull;
        for (i = 0; i < 6; i++)
            r[i] = (unsigned char)(x >> (8 * i));
    }
    for (i = 0; i < 6; i++)
        s[i] = set[r[i] % (sizeof set - 1)];
}

/* How 'path' is written (*st its stat, if it exists). Returns 1: through a temporary file
 * renamed to *name (malloc'd); 0: in place (*name NULL); -1: refused, errno set, *why the
 * reason for a message (or NULL: strerror(errno) says it). */
static int plan(const char *path, char **name, struct stat *st, const char **why)
{
    struct stat fin;
    int exists = stat(path, st) == 0, by_proc;

    *name = NULL;
    *why = NULL;
    if (!exists && errno != ENOENT)
        return -1;
    if (!exists)
        st->st_mode = 0;            /* nothing there to keep the mode of */
    if (walk_links(path, why) != 0)
        return -1;
    if (exists && S_ISDIR(st->st_mode)) {
        errno = EISDIR;
        *why = "it is a directory";
        return -1;
    }
    if (exists && S_ISSOCK(st->st_mode)) {
        errno = ENXIO;
        *why = "it is a socket, which cannot be opened as a file";
        return -1;
    }
    if ((*name = final_name(path, why, &by_proc)) == NULL)
        return -1;
    if (exists && (stat(*name, &fin) != 0 || fin.st_dev != st->st_dev || fin.st_ino != st->st_ino)) {
        free(*name);                /* a link only the kernel follows (a deleted file, one */
        *name = NULL;               /* of another mount namespace): that file, in place */
        if ((*why = kernel_fs(path, 1)) != NULL) {
            errno = EACCES;
            return -1;
        }
        return 0;
    }
    /* another user's file in /tmp: written into, it would hand them the profile (but
     * for one a process handed over open, as the shell does /dev/stdout's) */
    if (exists && !by_proc && (*why = foreign(*name, strlen(*name), st->st_uid,
                                  S_ISREG(st->st_mode) ? "a file" : S_ISFIFO(st->st_mode) ? "a FIFO"
                                                                                         : "a device",
                                  S_ISREG(st->st_mode) ? "replace" : "write into")) != NULL)
        errno = EACCES;
    else if (exists && !S_ISREG(st->st_mode)) {
        free(*name);                /* a device, a FIFO: in place, never renamed over */
        *name = NULL;
        return 0;
    } else if ((*why = kernel_fs(*name, exists)) != NULL)
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

/* A new file beside 'name' to write it through, made with the user's umask (0666 & ~umask,
 * or the directory's default ACL), never through a link; when it replaces a file (*old,
 * or NULL), no one it did not let read it may read the new one. Returns its descriptor
 * (read-write) and its name in *tmp (malloc'd), or -1 with errno set and *tmp NULL. */
static int make_temp(const char *name, const struct stat *old, char **tmp)
{
    size_t len = strlen(name) + sizeof TMP_SUFFIX;
    struct stat st;
    int fd = -1, saved, tries;

    if ((*tmp = malloc(len)) == NULL) {
        errno = ENOMEM;
        return -1;
    }
    for (tries = 0; tries < 100 && fd < 0; tries++) {
        snprintf(*tmp, len, "%s.", name);
        random_letters(*tmp + len - 7);
        (*tmp)[len - 1] = '\0';
        fd = open(*tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0666);
        if (fd < 0 && errno != EEXIST)
            break;
    }
    if (fd >= 0 && (old == NULL || fstat(fd, &st) != 0 || (st.st_mode & ~old->st_mode & 0777) == 0 ||
                    fchmod(fd, st.st_mode & old->st_mode & 0777) == 0))
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

/* Opens 'path', planned in place (st: what plan() saw there), and checks that the file
 * opened is that one: one put in its place since (a link to another file) is not
 * written, nor truncated. Returns a descriptor, or -1 with errno set. */
static int open_in_place(const char *path, const struct stat *st)
{
    struct stat now;
    /* O_NOCTTY: a terminal written to is not made remora's */
    int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOCTTY);

    if (fd < 0)
        return -1;
    if (fstat(fd, &now) != 0 || now.st_dev != st->st_dev || now.st_ino != st->st_ino) {
        close(fd);
        errno = EAGAIN;             /* it changed while being opened */
        return -1;
    }
    if (S_ISREG(now.st_mode) && ftruncate(fd, 0) != 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

const char *remora_output_check(const char *path)
{
    struct stat st;
    const char *why;
    char *name, *tmp;
    int how, fd;

    if (strcmp(path, "-") == 0)
        return NULL;
    how = plan(path, &name, &st, &why);
    if (how < 0)
        return why != NULL ? why : strerror(errno);
    if (how == 0)                   /* not opened: a FIFO's reader would see it end */
        return faccessat(AT_FDCWD, path, W_OK, AT_EACCESS) == 0 ? NULL : strerror(errno);
    fd = make_temp(name, NULL, &tmp);
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
    struct stat st;
    const char *why;
    char *name;
    int how, fd;

    *tmp = NULL;
    how = plan(path, &name, &st, &why);
    if (how < 0)
        return -1;
    if (how == 0)
        return open_in_place(path, &st);
    fd = make_temp(name, S_ISREG(st.st_mode) ? &st : NULL, tmp);
    free(name);
    return fd;
}

int remora_output_open_stream(const char *path)
{
    struct stat st, now;
    const char *why;
    char *name;
    int how, fd;

    how = plan(path, &name, &st, &why);
    if (how <= 0)
        return how < 0 ? -1 : open_in_place(path, &st);
    /* a new file, else the one there (never a link put there since, nor a file another
     * user made there since in /tmp), emptied */
    fd = open(name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0666);
    if (fd < 0 && errno == EEXIST &&
        (fd = open(name, O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY)) >= 0) {
        if (fstat(fd, &now) != 0 || !S_ISREG(now.st_mode) ||
            foreign(name, strlen(name), now.st_uid, "a file", "write into") != NULL) {
            close(fd);
            fd = -1;
            errno = EACCES;
        } else if (ftruncate(fd, 0) != 0) {
            int saved = errno;
            close(fd);
            fd = -1;
            errno = saved;
        }
    }
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

/* The length of the longest of exts (space-separated endings) 'name' ends with, in any
 * case, shorter than name; 0 if none. */
static size_t ending_of(const char *name, const char *exts)
{
    size_t n = strlen(name), best = 0, k;

    while (exts != NULL && *exts) {
        k = strcspn(exts, " ");
        if (k < n && k > best && strncasecmp(name + n - k, exts, k) == 0)
            best = k;
        exts += k;
        while (*exts == ' ')
            exts++;
    }
    return best;
}

/* A new file in 'dir' named after base (its stem, KEEP_MARK, six letters, its last 'ext'
 * bytes): made, never through a link, nothing replaced. Returns its descriptor and
 * *name (malloc'd), or -1 with errno set. */
static int make_kept(const char *dir, const char *base, size_t ext, char **name)
{
    size_t stem = strlen(base) - ext, len;
    int fd = -1, tries;

    if (stem + ext + sizeof KEEP_MARK + 6 > NAME_MAX)    /* a long name: its stem cut */
        stem = NAME_MAX > ext + sizeof KEEP_MARK + 6 ? NAME_MAX - ext - sizeof KEEP_MARK - 6 : 0;
    len = strlen(dir) + 1 + stem + sizeof KEEP_MARK + 6 + ext;
    if ((*name = malloc(len)) == NULL) {
        errno = ENOMEM;
        return -1;
    }
    for (tries = 0; tries < 100 && fd < 0; tries++) {
        char letters[7];
        random_letters(letters);
        letters[6] = '\0';
        snprintf(*name, len, "%s/%.*s" KEEP_MARK "%s%s", dir, (int)stem, base, letters,
                 base + strlen(base) - ext);
        fd = open(*name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0666);
        if (fd < 0 && errno != EEXIST)
            break;
    }
    if (fd < 0) {
        int saved = errno;
        free(*name);
        *name = NULL;
        errno = saved;
    }
    return fd;
}

int remora_output_keep(const char *path, const char *exts, int (*fill)(int fd, void *ctx),
                       void *ctx, char **where)
{
    char cwd[PATH_MAX], *name;
    const char *dirs[3], *base = strrchr(path, '/'), *tmpdir = getenv("TMPDIR");
    struct stat st;
    int i, k, fd, saved = ENOENT;

    *where = NULL;
    if (strcmp(path, "-") == 0 || (stat(path, &st) == 0 && !S_ISREG(st.st_mode))) {
        errno = ESPIPE;             /* written in place: there is no file to keep */
        return -1;
    }
    base = base != NULL ? base + 1 : path;
    if (*base == '\0')
        base = "remora-output";
    dirs[0] = getcwd(cwd, sizeof cwd) != NULL && cwd[0] == '/' ? cwd : NULL;
    dirs[1] = tmpdir != NULL && tmpdir[0] == '/' ? tmpdir : NULL;
    dirs[2] = "/tmp";
    for (i = 0; i < 3; i++) {
        for (k = 0; k < i && dirs[i] != NULL; k++)
            if (dirs[k] != NULL && strcmp(dirs[k], dirs[i]) == 0)
                dirs[i] = NULL;     /* tried already */
        if (dirs[i] == NULL)
            continue;
        fd = make_kept(dirs[i], base, ending_of(base, exts), &name);
        if (fd < 0) {
            saved = errno;
            continue;
        }
        if (fill(fd, ctx) == 0) {
            *where = name;
            return 0;
        }
        saved = errno;
        unlink(name);
        free(name);
    }
    errno = saved;
    return -1;
}

/* remora_output_keep()'s fill for remora_output_keep_copy(): all that *ctx (a descriptor
 * open for reading) holds, from its start. */
static int copy_fill(int fd, void *ctx)
{
    char buf[65536];
    int from = *(int *)ctx, saved;
    off_t at = 0;
    ssize_t n, done, k;

    while ((n = pread(from, buf, sizeof buf, at)) > 0) {
        for (done = 0; done < n; done += k)
            if ((k = write(fd, buf + done, (size_t)(n - done))) < 0)
                goto error;
        at += n;
    }
    if (n < 0)
        goto error;
    return close(fd);
error:
    saved = errno;
    close(fd);
    errno = saved;
    return -1;
}

int remora_output_keep_copy(const char *path, const char *exts, int from, char **where)
{
    return remora_output_keep(path, exts, copy_fill, &from, where);
}
