/* proc/asuser.c — a file a target names, opened as the target would open it: resolved
 * inside its root (never through a link that leaves it), with its credentials.
 *
 * The name comes from the target's memory, so it is hostile. openat2's RESOLVE_IN_ROOT
 * resolves it inside the root where the kernel allows; where openat2 is refused (ENOSYS,
 * or EPERM from a seccomp profile) the name is walked here a component at a time with
 * O_NOFOLLOW, each link read and resolved again inside the root. A target whose
 * credentials could not read everything is given a short child of remora that takes its
 * fsuid, fsgid, groups and capabilities (raw syscalls: the child of a threaded process)
 * and hands each descriptor back over a socket (one helper a target's report, not one
 * a file). Nothing here reads the target's memory.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <signal.h>
#include <stddef.h>
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

/* A request to the helper: which directories come with it (SCM_RIGHTS, in this order),
 * then the name, NUL-terminated. */
struct as_req {
    int has_root, has_dir;
    char path[WALK_NAME];
};

/* Sends 'len' bytes of buf with up to two fds (-1: none). Returns 0 or -1. */
static int send_fds(int sock, const void *buf, size_t len, const int *fds, int nfds)
{
    char ctl[CMSG_SPACE(2 * sizeof(int))];
    struct msghdr m;
    struct iovec iov;
    struct cmsghdr *c;

    memset(&m, 0, sizeof m);
    iov.iov_base = (void *)buf;
    iov.iov_len = len;
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    if (nfds > 0) {
        memset(ctl, 0, sizeof ctl);
        m.msg_control = ctl;
        m.msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int));
        c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
        memcpy(CMSG_DATA(c), fds, (size_t)nfds * sizeof(int));
    }
    return sendmsg(sock, &m, MSG_NOSIGNAL) == (ssize_t)len ? 0 : -1;
}

/* Receives a message into buf (cap bytes) and up to two fds (fds[k] -1 when absent).
 * Returns its length, 0 at the end, -1 on error. */
static ssize_t recv_fds(int sock, void *buf, size_t cap, int *fds, int nfds)
{
    char ctl[CMSG_SPACE(2 * sizeof(int))];
    struct msghdr m;
    struct iovec iov;
    struct cmsghdr *c;
    ssize_t r;
    int k;

    for (k = 0; k < nfds; k++)
        fds[k] = -1;
    memset(&m, 0, sizeof m);
    memset(ctl, 0, sizeof ctl);
    iov.iov_base = buf;
    iov.iov_len = cap;
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = ctl;
    m.msg_controllen = sizeof ctl;
    do
        r = recvmsg(sock, &m, MSG_CMSG_CLOEXEC);
    while (r < 0 && errno == EINTR);
    if (r < 0)
        return -1;
    for (c = CMSG_FIRSTHDR(&m); c != NULL; c = CMSG_NXTHDR(&m, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int), i;
            int got[2];
            if (n > 2)
                n = 2;
            memcpy(got, CMSG_DATA(c), n * sizeof(int));
            for (i = 0; i < n; i++) {
                if ((int)i < nfds)
                    fds[i] = got[i];
                else
                    close(got[i]);
            }
        }
    return r;
}

/* The helper: takes the target's credentials, then opens each name it is sent inside
 * the directories sent with it and sends the fd (or its errno) back, until the socket
 * closes. Uses nothing but system calls and its stack (the child of a threaded
 * process). */
static void helper_main(int sock, const proc_creds_t *cr)
{
    struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
    struct __user_cap_data_struct data[2];
    struct as_req req;
    int e = 0, fds[2], root, dir, fd, k;
    ssize_t r;

    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);         /* the target may not trace it */
    /* it holds nothing of remora's but its socket: no output, no perf or BPF descriptor,
     * no pipe whose end a reader waits for (stdin, stdout and stderr on /dev/null) */
    if ((fd = open("/dev/null", O_RDWR | O_CLOEXEC)) >= 0) {
        for (k = 0; k < 3; k++)
            if (k != sock)
                dup2(fd, k);
        if (fd > 2 && fd != sock)
            close(fd);
    }
    if (sock > 3)
        syscall(SYS_close_range, 3u, (unsigned)sock - 1, 0u);
    syscall(SYS_close_range, (unsigned)sock + 1, ~0u, 0u);
    if (syscall(SYS_setgroups, cr->ngroups, cr->groups) != 0 ||
        syscall(SYS_setresgid, cr->gid, cr->gid, cr->gid) != 0 ||
        syscall(SYS_setresuid, cr->uid, cr->uid, cr->uid) != 0)
        e = EPERM;
    /* gone with remora (set after the ids change, which clears it); the socket's end
     * says so too */
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    /* a uid 0 kept its capabilities: they become the target's (a uid other than 0 has
     * just lost them all) */
    memset(data, 0, sizeof data);
    data[0].effective = data[0].permitted = (uint32_t)cr->caps;
    data[1].effective = data[1].permitted = (uint32_t)(cr->caps >> 32);
    if (e == 0 && cr->uid == 0 && syscall(SYS_capset, &hdr, data) != 0)
        e = EPERM;
    for (;;) {
        r = recv_fds(sock, &req, sizeof req, fds, 2);
        if (r <= 0)
            _exit(0);
        k = 0;
        root = req.has_root ? fds[k++] : -1;
        dir = req.has_dir ? fds[k++] : -1;
        for (; k < 2; k++)
            if (fds[k] >= 0)
                close(fds[k]);
        fd = -1;
        if (e != 0) {
            errno = e;
        } else if ((size_t)r < offsetof(struct as_req, path) + 1 ||
                   req.path[(size_t)r - offsetof(struct as_req, path) - 1] != '\0') {
            errno = EINVAL;
        } else {
            fd = open_inside(root, dir, req.path);
        }
        int err = fd >= 0 ? 0 : errno;
        if (root >= 0)
            close(root);
        if (dir >= 0)
            close(dir);
        send_fds(sock, &err, sizeof err, &fd, fd >= 0 ? 1 : 0);
        if (fd >= 0)
            close(fd);
    }
}

/* A helper holding credentials cr started; 0, or -1 with errno. */
static int helper_start(asuser_helper_t *h, const proc_creds_t *cr)
{
    int sv[2], e;
    pid_t pid;

    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
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
        helper_main(sv[1], cr);
    }
    close(sv[1]);
    h->pid = pid;
    h->sock = sv[0];
    h->creds = *cr;
    return 0;
}

void asuser_helper_end(asuser_helper_t *h)
{
    int st;

    if (h == NULL || h->pid <= 0)
        return;
    close(h->sock);
    kill(h->pid, SIGKILL);
    while (waitpid(h->pid, &st, 0) < 0 && errno == EINTR)
        ;                               /* this child only: record waits for its command */
    h->pid = 0;
    h->sock = -1;
}

static int same_creds(const proc_creds_t *a, const proc_creds_t *b)
{
    return a->uid == b->uid && a->gid == b->gid && a->caps == b->caps &&
           a->ngroups == b->ngroups &&
           memcmp(a->groups, b->groups, a->ngroups * sizeof a->groups[0]) == 0;
}

/* 'path' opened by the helper (started, or started again, for cr); -1 with errno. */
static int open_by_helper(asuser_helper_t *h, int root, int dir, const char *path,
                          const proc_creds_t *cr)
{
    struct as_req req;
    size_t len = strlen(path);
    int fds[2], n = 0, e = EIO, fd, tries;
    ssize_t r;

    if (len >= sizeof req.path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    req.has_root = root >= 0;
    req.has_dir = dir >= 0;
    memcpy(req.path, path, len + 1);
    if (root >= 0)
        fds[n++] = root;
    if (dir >= 0)
        fds[n++] = dir;
    if (h->pid > 0 && !same_creds(&h->creds, cr))
        asuser_helper_end(h);           /* the target's credentials changed */
    for (tries = 0; tries < 2; tries++) {
        if (h->pid <= 0 && helper_start(h, cr) != 0)
            return -1;
        if (send_fds(h->sock, &req, offsetof(struct as_req, path) + len + 1, fds, n) == 0 &&
            (r = recv_fds(h->sock, &e, sizeof e, &fd, 1)) == (ssize_t)sizeof e) {
            if (fd >= 0)
                return fd;
            errno = e ? e : EIO;
            return -1;
        }
        asuser_helper_end(h);           /* killed (the target's user may): once more */
    }
    errno = EIO;
    return -1;
}

int asuser_open(int root, int dir, const char *path, const proc_creds_t *cr,
                asuser_helper_t *h)
{
    asuser_helper_t once = { 0, -1, { 0 } };
    int fd, e;

    if (cr == NULL || !cr->known) {
        errno = EACCES;                 /* whose file it is cannot be told: not read */
        return -1;
    }
    /* a target that reads everything, or a remora that cannot take another's ids (it
     * then reads no more than its own user may) */
    if ((cr->own_userns && cr->uid == 0 && (cr->caps & CAPS_READ_ALL) != 0) || !can_switch())
        return open_inside(root, dir, path);
    if (h != NULL)
        return open_by_helper(h, root, dir, path, cr);
    fd = open_by_helper(&once, root, dir, path, cr);
    e = errno;
    asuser_helper_end(&once);
    errno = e;
    return fd;
}
