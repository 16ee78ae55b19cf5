/* proc/asuser.c — a file a target names, opened as the target would open it: resolved
 * inside its root (never through a link that leaves it), with its credentials.
 *
 * The name comes from the target's memory, so it is hostile. openat2's RESOLVE_IN_ROOT
 * resolves it inside the root where the kernel allows; where openat2 is refused (ENOSYS,
 * or EPERM from a seccomp profile) the name is walked here a component at a time with
 * O_NOFOLLOW, each link read and resolved again inside the root. A target whose
 * credentials could not read everything is given a short child of remora that takes its
 * fsuid, fsgid, groups and capabilities (raw syscalls: the child of a threaded process)
 * and hands the descriptor back over a socket. Nothing here reads the target's memory.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "remora.h"
#include "proc_internal.h"

#ifndef RESOLVE_IN_ROOT
#define RESOLVE_NO_MAGICLINKS 0x02
#define RESOLVE_BENEATH 0x08
#define RESOLVE_IN_ROOT 0x10
#endif

#define CAP_BIT(c) (1ull << (c))
#define CAPS_READ_ALL (CAP_BIT(CAP_DAC_OVERRIDE) | CAP_BIT(CAP_DAC_READ_SEARCH))

#define WALK_DEPTH 64               /* directories deep a name may go */
#define WALK_LINKS 40               /* links followed, as the kernel's own limit */
#define WALK_NAME 4096

struct as_how {                     /* struct open_how of <linux/openat2.h> */
    uint64_t flags, mode, resolve;
};

#define OPEN_FLAGS (O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)

/* Parses one "Name:\tv1\tv2..." line's numbers into v[0..cap); returns how many. */
static size_t status_nums(const char *text, const char *name, unsigned long long *v, size_t cap,
                          int base, int *cut)
{
    const char *s = text;
    size_t nl = strlen(name), n = 0;
    char *end;

    while (s != NULL && strncmp(s, name, nl) != 0)
        if ((s = strchr(s, '\n')) != NULL)
            s++;
    if (s == NULL)
        return 0;
    s += nl;
    for (;;) {
        while (*s == ' ' || *s == '\t')
            s++;
        if (*s == '\n' || *s == '\0')
            break;
        errno = 0;
        unsigned long long x = strtoull(s, &end, base);
        if (end == s || errno != 0)
            break;
        if (n < cap)
            v[n++] = x;
        else if (cut != NULL)
            *cut = 1;
        s = end;
    }
    return n;
}

int asuser_creds(int piddir, proc_creds_t *cr)
{
    char buf[16384];
    unsigned long long v[ASUSER_GROUPS];
    struct stat mine, theirs;
    ssize_t r;
    size_t len = 0, i, n;
    int fd, cut = 0;

    memset(cr, 0, sizeof *cr);
    fd = piddir >= 0 ? openat(piddir, "status", O_RDONLY | O_CLOEXEC)
                     : open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    while (len + 1 < sizeof buf && (r = read(fd, buf + len, sizeof buf - 1 - len)) != 0) {
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            break;
        len += (size_t)r;
    }
    close(fd);
    buf[len] = '\0';
    /* Uid: real effective saved fs: the kernel checks a file's access with the fs ids */
    if (status_nums(buf, "Uid:", v, 4, 10, NULL) != 4)
        return -1;
    cr->uid = (uid_t)v[3];
    if (status_nums(buf, "Gid:", v, 4, 10, NULL) != 4)
        return -1;
    cr->gid = (gid_t)v[3];
    if (status_nums(buf, "CapEff:", v, 1, 16, NULL) != 1)
        return -1;
    cr->caps = v[0];
    /* groups past the bound are left out: the target is then given less, never more */
    n = status_nums(buf, "Groups:", v, ASUSER_GROUPS, 10, &cut);
    for (i = 0; i < n; i++)
        cr->groups[i] = (gid_t)v[i];
    cr->ngroups = n;
    /* capabilities count only in their own user namespace: a target in another is
     * never taken to read everything (its files are read with its ids alone) */
    cr->own_userns = piddir < 0 ||
        (stat("/proc/self/ns/user", &mine) == 0 && fstatat(piddir, "ns/user", &theirs, 0) == 0 &&
         mine.st_dev == theirs.st_dev && mine.st_ino == theirs.st_ino);
    cr->known = 1;
    return 0;
}

void asuser_creds_ids(uid_t uid, gid_t gid, proc_creds_t *cr)
{
    memset(cr, 0, sizeof *cr);
    cr->uid = uid;
    cr->gid = gid;
    cr->caps = 0;               /* a core keeps no capabilities: its ids only */
    cr->own_userns = 1;
    cr->known = 1;
}

/* ---- the walk where openat2 is refused ------------------------------------ */

/* Appends the rest of the name after a link's target: buf = link + "/" + rest. */
static int splice_link(char *buf, size_t cap, const char *link, size_t llen, const char *rest)
{
    size_t rl = strlen(rest);

    if (llen + 1 + rl + 1 > cap)
        return -1;
    memmove(buf + llen + 1, rest, rl + 1);  /* rest may live in buf */
    memcpy(buf, link, llen);
    buf[llen] = rl ? '/' : '\0';
    return 0;
}

/* 'path' opened for reading, walked a component at a time from root (absolute) or dir
 * (relative; ".." may not climb above it), every link read and resolved again: an
 * absolute one from root, never by the kernel, so none leads out of the root. Uses no
 * memory but its stack (it runs in a forked child). Returns an fd, or -1 with errno. */
static int walk_open(int root, int dir, const char *path)
{
    char name[WALK_NAME], link[WALK_NAME];
    int stack[WALK_DEPTH];
    int n = 1, links = 0, fd, e;
    char *s, *comp;

    if (strlen(path) >= sizeof name) {
        errno = ENAMETOOLONG;
        return -1;
    }
    strcpy(name, path);
    stack[0] = path[0] == '/' ? root : dir;     /* borrowed: never closed here */
    s = name;
    for (;;) {
        while (*s == '/')
            s++;
        if (*s == '\0') {
            e = EISDIR;                 /* the name ends at a directory */
            goto fail;
        }
        comp = s;
        while (*s != '\0' && *s != '/')
            s++;
        int last = 1;
        for (const char *t = s; *t != '\0'; t++)
            if (*t != '/')
                last = 0;
        if (*s != '\0')
            *s++ = '\0';
        if (strcmp(comp, ".") == 0)
            continue;
        if (strcmp(comp, "..") == 0) {
            if (n > 1)
                close(stack[--n]);
            else if (stack[0] != root) {
                e = EXDEV;              /* above the working directory */
                goto fail;
            }                           /* ".." of the root is the root */
            if (last) {
                e = EISDIR;
                goto fail;
            }
            continue;
        }
        fd = last ? openat(stack[n - 1], comp, OPEN_FLAGS | O_NOFOLLOW)
                  : openat(stack[n - 1], comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd >= 0 && last) {
            while (n > 1)
                close(stack[--n]);
            return fd;
        }
        if (fd >= 0) {
            if (n == WALK_DEPTH) {
                close(fd);
                e = ENAMETOOLONG;
                goto fail;
            }
            stack[n++] = fd;
            continue;
        }
        e = errno;
        if (e != ELOOP && e != ENOTDIR)
            goto fail;
        /* a link (or not a directory: readlinkat says which) */
        ssize_t ll = readlinkat(stack[n - 1], comp, link, sizeof link);
        if (ll < 0)
            goto fail;                  /* e: not a directory */
        if ((size_t)ll >= sizeof link || ++links > WALK_LINKS) {
            e = ELOOP;
            goto fail;
        }
        if (link[0] == '/') {           /* from the root again */
            while (n > 1)
                close(stack[--n]);
            stack[0] = root;
        }
        if (splice_link(name, sizeof name, link, (size_t)ll, last ? "" : s) != 0) {
            e = ENAMETOOLONG;
            goto fail;
        }
        s = name;
    }
fail:
    while (n > 1)
        close(stack[--n]);
    errno = e;
    return -1;
}

/* 'path' opened as resolved inside root (absolute) or beneath dir (relative). */
static int open_inside(int root, int dir, const char *path)
{
    if (path[0] == '/' ? root < 0 : dir < 0) {
        errno = ENOENT;
        return -1;
    }
#ifdef SYS_openat2
    struct as_how how = { OPEN_FLAGS, 0,
                          (path[0] == '/' ? RESOLVE_IN_ROOT : RESOLVE_BENEATH) | RESOLVE_NO_MAGICLINKS };
    long fd = syscall(SYS_openat2, path[0] == '/' ? root : dir, path, &how, sizeof how);

    if (fd >= 0 || (errno != ENOSYS && errno != EPERM))
        return (int)fd;
#endif
    return walk_open(root, dir, path);
}

/* ---- as the target -------------------------------------------------------- */

/* This process's own credentials, read once: whether it may take another's. */
static int can_switch(void)
{
    static int known, can;
    proc_creds_t self;

    if (!known) {
        known = 1;
        can = asuser_creds(-1, &self) == 0 &&
              (self.caps & (CAP_BIT(CAP_SETUID) | CAP_BIT(CAP_SETGID))) ==
              (CAP_BIT(CAP_SETUID) | CAP_BIT(CAP_SETGID));
    }
    return can;
}

/* The child: takes the target's credentials, opens, sends the fd (or its errno) back. */
static void child_open(int sock, int root, int dir, const char *path, const proc_creds_t *cr)
{
    struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
    struct __user_cap_data_struct data[2];
    char ctl[CMSG_SPACE(sizeof(int))];
    struct msghdr m;
    struct iovec iov;
    struct cmsghdr *c;
    int e = 0, fd = -1;

    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);         /* the target may not trace it */
    if (syscall(SYS_setgroups, cr->ngroups, cr->groups) != 0 ||
        syscall(SYS_setresgid, cr->gid, cr->gid, cr->gid) != 0 ||
        syscall(SYS_setresuid, cr->uid, cr->uid, cr->uid) != 0) {
        e = EPERM;
        goto send;
    }
    /* a uid 0 kept its capabilities: they become the target's (a uid other than 0 has
     * just lost them all) */
    memset(data, 0, sizeof data);
    data[0].effective = data[0].permitted = (uint32_t)cr->caps;
    data[1].effective = data[1].permitted = (uint32_t)(cr->caps >> 32);
    if (cr->uid == 0 && syscall(SYS_capset, &hdr, data) != 0) {
        e = EPERM;
        goto send;
    }
    if ((fd = open_inside(root, dir, path)) < 0)
        e = errno;
send:
    memset(&m, 0, sizeof m);
    iov.iov_base = &e;
    iov.iov_len = sizeof e;
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    if (fd >= 0) {
        memset(ctl, 0, sizeof ctl);
        m.msg_control = ctl;
        m.msg_controllen = sizeof ctl;
        c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof fd);
    }
    (void)sendmsg(sock, &m, MSG_NOSIGNAL);
    _exit(0);
}

/* 'path' opened by a child holding the target's credentials; -1 with errno. */
static int open_as(int root, int dir, const char *path, const proc_creds_t *cr)
{
    char ctl[CMSG_SPACE(sizeof(int))];
    struct msghdr m;
    struct iovec iov;
    struct cmsghdr *c;
    int sv[2], e = EIO, fd = -1, st;
    ssize_t r;
    pid_t pid;

    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        return -1;
    pid = fork();
    if (pid < 0) {
        e = errno;
        close(sv[0]);
        close(sv[1]);
        errno = e;
        return -1;
    }
    if (pid == 0) {
        close(sv[0]);
        child_open(sv[1], root, dir, path, cr);
    }
    close(sv[1]);
    memset(&m, 0, sizeof m);
    memset(ctl, 0, sizeof ctl);
    iov.iov_base = &e;
    iov.iov_len = sizeof e;
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = ctl;
    m.msg_controllen = sizeof ctl;
    do
        r = recvmsg(sv[0], &m, MSG_CMSG_CLOEXEC);
    while (r < 0 && errno == EINTR);
    if (r == (ssize_t)sizeof e)
        for (c = CMSG_FIRSTHDR(&m); c != NULL; c = CMSG_NXTHDR(&m, c))
            if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
                c->cmsg_len == CMSG_LEN(sizeof(int)))
                memcpy(&fd, CMSG_DATA(c), sizeof fd);
    if (r != (ssize_t)sizeof e)
        e = EIO;
    close(sv[0]);
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;                               /* this child only: record waits for its command */
    if (fd >= 0)
        return fd;
    errno = e ? e : EIO;
    return -1;
}

int asuser_open(int root, int dir, const char *path, const proc_creds_t *cr)
{
    if (cr == NULL || !cr->known) {
        errno = EACCES;                 /* whose file it is cannot be told: not read */
        return -1;
    }
    /* a target that reads everything, or a remora that cannot take another's ids (it
     * then reads no more than its own user may) */
    if ((cr->own_userns && cr->uid == 0 && (cr->caps & CAPS_READ_ALL) != 0) || !can_switch())
        return open_inside(root, dir, path);
    return open_as(root, dir, path, cr);
}
