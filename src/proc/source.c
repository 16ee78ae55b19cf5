/* proc/source.c — a Python source file as the target would read it, for the source
 * lines of `dump`, the heatmap and top, and a report's cache of them.
 *
 * The file's name comes from a code object, so it is hostile. A live target's file is
 * opened inside its root, a relative name beneath its working directory, with its
 * credentials (asuser.c); both and the credentials come through the /proc/PID held
 * since proc_open, so a process that is gone is read as it was last seen (a container's
 * files, never the host's), never as another given its pid. A core's files are read
 * inside --root (else '/') with the ids of its NT_PRPSINFO; a snapshot, and no process
 * at all (convert), hold no sources. Only regular files are read (a FIFO would block),
 * at most PROC_SRC_MAX bytes, and a file holding a NUL byte is called binary (no Python
 * source does). A report's cache knows files by identity (device, inode), whatever
 * their spelling, and is bounded in files, bytes and names. Nothing here reads the
 * target's memory.
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

void proc_source_refresh(proc_t *p)
{
    proc_creds_t cr;
    int fd;

    if (p->pid_dir < 0)
        return;
    if ((fd = openat(p->pid_dir, "root", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
        if (p->root_dir >= 0)
            close(p->root_dir);
        p->root_dir = fd;
    }
    if ((fd = openat(p->pid_dir, "cwd", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
        if (p->cwd_dir >= 0)
            close(p->cwd_dir);
        p->cwd_dir = fd;
    }
    if (asuser_creds(p->pid_dir, &cr) == 0)
        p->creds = cr;
}

void proc_source_attach(proc_t *p)
{
    char buf[64];

    p->pid_dir = p->root_dir = p->cwd_dir = -1;
    p->helper.sock = -1;
    if (p->kind != PROC_LIVE)
        return;
    snprintf(buf, sizeof buf, "/proc/%d", (int)p->pid);
    p->pid_dir = open(buf, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    proc_source_refresh(p);
}

void proc_source_detach(proc_t *p)
{
    asuser_helper_end(&p->helper);
    if (p->pid_dir >= 0)
        close(p->pid_dir);
    if (p->root_dir >= 0)
        close(p->root_dir);
    if (p->cwd_dir >= 0)
        close(p->cwd_dir);
    p->pid_dir = p->root_dir = p->cwd_dir = -1;
}

/* A core's root (--root, else '/') and whose ids its files are read with. */
static void core_where(proc_t *p)
{
    const image_t *img = p->img;

    if (p->root_dir >= 0 || img == NULL)
        return;
    p->root_dir = open(img->root != NULL ? img->root : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (img->have_ids)
        asuser_creds_ids(img->uid, img->gid, &p->creds);
    else
        asuser_creds(-1, &p->creds);    /* a core that does not say: as remora's user */
}

/* The file the target names 'path', opened as the target would, or -1 with *state set. */
static int open_source(proc_t *p, const char *path, int *state)
{
    int fd, e;

    *state = PROC_SRC_MISSING;
    if (p == NULL) {                    /* no process: nothing is opened */
        *state = PROC_SRC_NO_PROCESS;
        return -1;
    }
    if (p->kind == PROC_LIVE) {
        proc_source_refresh(p);
    } else if (p->kind == PROC_CORE) {
        core_where(p);
        /* gcore run from outside a chroot names the root's files by host paths: the
         * rest of the name, still resolved inside the root */
        const char *root = p->img != NULL ? p->img->root : NULL;
        size_t rl = root != NULL ? strlen(root) : 0;
        if (rl > 0 && strncmp(path, root, rl) == 0 && path[rl] == '/')
            path += rl;
    } else {
        return -1;                      /* a snapshot holds no sources */
    }
    if (path[0] == '/' ? p->root_dir < 0 : p->cwd_dir < 0) {
        *state = PROC_SRC_NO_ROOT;
        return -1;
    }
    if ((fd = asuser_open(p->root_dir, p->cwd_dir, path, &p->creds, &p->helper)) >= 0)
        return fd;
    e = errno;
    *state = e == EACCES || e == EPERM ? PROC_SRC_DENIED :
             e == EXDEV || e == ELOOP ? PROC_SRC_OUTSIDE :
             e == EISDIR ? PROC_SRC_NOT_FILE : PROC_SRC_MISSING;
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
    ssize_t n;
    int fd, k;

    if (p == NULL || p->kind != PROC_LIVE || hz <= 0 || p->pid_dir < 0)
        return 0;
    if ((fd = openat(p->pid_dir, "stat", O_RDONLY | O_CLOEXEC)) < 0)
        return 0;
    n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    if ((s = strrchr(buf, ')')) == NULL)
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
    case PROC_SRC_DENIED:
        return "not readable by the target's user";
    case PROC_SRC_OUTSIDE:
        return "its name leads out of the target's root";
    case PROC_SRC_NO_ROOT:
        return "the target's root could not be opened";
    case PROC_SRC_NO_PROCESS:
        return "no process to read it as";
    case PROC_SRC_OVER_BOUND:
        return "past the bound on source files read for one report";
    default:
        return "missing or unreadable";     /* the words outputs have always used */
    }
}

const proc_src_stats_t *proc_src_stats(const proc_t *p)
{
    static const proc_src_stats_t none;

    return p != NULL ? &p->src_stats : &none;
}

/* Counts what a read came to (p may be NULL). */
static void count(proc_t *p, const char *path, int state)
{
    if (p == NULL || state == PROC_SRC_NAMELESS)
        return;
    if (state == PROC_SRC_OK) {
        p->src_stats.read++;
        return;
    }
    if (p->src_stats.unread++ == 0)
        snprintf(p->src_stats.first_unread, sizeof p->src_stats.first_unread, "%s: %s", path,
                 proc_src_state_str(state));
}

/* The opened file fd (closed here) read into out. Returns 0 or REMORA_ENOMEM. */
static int read_open(proc_t *p, int fd, const struct stat *st, proc_src_t *out)
{
    size_t cap, n = 0;
    char *text;

    out->dev = (uint64_t)st->st_dev;
    out->ino = (uint64_t)st->st_ino;
    if (!S_ISREG(st->st_mode)) {
        out->state = PROC_SRC_NOT_FILE;
        close(fd);
        return REMORA_OK;
    }
    if (st->st_size > PROC_SRC_MAX) {
        out->state = PROC_SRC_TOO_BIG;
        close(fd);
        return REMORA_OK;
    }
    cap = (size_t)st->st_size + 1;          /* it may grow while read: no more than this */
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
        int64_t m = (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
        /* the start time has the clock tick's grain (and a file's time the kernel's
         * coarse clock's): a file written in the tick the process began is not changed */
        out->changed = t0 != 0 && m > t0 + 50000000;
    }
    return REMORA_OK;
}

/* The file 'path' names opened (fd >= 0, st filled) or not (-1, out->state says why). */
static int open_named(proc_t *p, const char *path, proc_src_t *out, struct stat *st)
{
    int fd, state;

    memset(out, 0, sizeof *out);
    out->state = PROC_SRC_MISSING;
    if (path == NULL || path[0] == '\0')
        return -1;
    if (path[0] == '<') {
        out->state = PROC_SRC_NAMELESS;     /* "<string>", "<frozen ...>", "<stdin>" */
        return -1;
    }
    if ((fd = open_source(p, path, &state)) < 0) {
        out->state = state;
        return -1;
    }
    if (fstat(fd, st) != 0) {
        close(fd);
        out->state = PROC_SRC_NOT_FILE;
        return -1;
    }
    return fd;
}

#ifdef REMORA_TESTING
int proc_source_read(proc_t *p, const char *path, proc_src_t *out)
{
    struct stat st;
    int fd = open_named(p, path, out, &st), err = REMORA_OK;

    if (fd >= 0)
        err = read_open(p, fd, &st, out);
    if (err == REMORA_OK)
        count(p, path, out->state);
    return err;
}
#endif

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

/* ---- a report's sources ---------------------------------------------------- */

#define CACHE_BUCKETS 1024

struct proc_src_cache {
    proc_t *p;
    struct src_name {
        char *path;
        uint32_t hash;
        int32_t next;               /* the next name in its bucket, or -1 */
        const proc_src_t *src;      /* a file's entry, or one of 'fail' */
    } *names;
    size_t nnames, cap_names;
    int32_t bucket[CACHE_BUCKETS];
    proc_src_t *files[PROC_SRC_CACHE_FILES];    /* each file opened once, by identity */
    size_t nfiles;
    uint64_t bytes;                 /* of the files read (those not kept too) */
    proc_src_t fail[PROC_SRC_OVER_BOUND + 1];   /* a state without a file, per state */
};

proc_src_cache_t *proc_src_cache_new(proc_t *p)
{
    proc_src_cache_t *c = calloc(1, sizeof *c);
    int i;

    if (c == NULL)
        return NULL;
    c->p = p;
    for (i = 0; i < CACHE_BUCKETS; i++)
        c->bucket[i] = -1;
    for (i = 0; i <= PROC_SRC_OVER_BOUND; i++)
        c->fail[i].state = i;
    return c;
}

void proc_src_cache_free(proc_src_cache_t *c)
{
    size_t i;

    if (c == NULL)
        return;
    for (i = 0; i < c->nnames; i++)
        free(c->names[i].path);
    free(c->names);
    for (i = 0; i < c->nfiles; i++) {
        proc_src_free(c->files[i]);
        free(c->files[i]);
    }
    free(c);
}

static uint32_t name_hash(const char *s)
{
    uint32_t h = 2166136261u;

    while (*s)
        h = (h ^ (unsigned char)*s++) * 16777619u;
    return h;
}

/* The file of identity st among those read, or NULL. */
static const proc_src_t *by_identity(const proc_src_cache_t *c, const struct stat *st)
{
    size_t i;

    for (i = 0; i < c->nfiles; i++)
        if (c->files[i]->dev == (uint64_t)st->st_dev && c->files[i]->ino == (uint64_t)st->st_ino)
            return c->files[i];
    return NULL;
}

/* What 'path' names, read now (or found read under another name). NULL without memory. */
static const proc_src_t *cache_read(proc_src_cache_t *c, const char *path)
{
    proc_src_t probe, *f;
    const proc_src_t *known;
    struct stat st;
    int fd = open_named(c->p, path, &probe, &st);

    if (fd < 0) {
        count(c->p, path, probe.state);
        return &c->fail[probe.state];
    }
    if ((known = by_identity(c, &st)) != NULL) {
        close(fd);
        return known;
    }
    if (c->nfiles == PROC_SRC_CACHE_FILES ||
        (S_ISREG(st.st_mode) && st.st_size <= PROC_SRC_MAX &&
         c->bytes + (uint64_t)st.st_size > PROC_SRC_CACHE_BYTES)) {
        close(fd);
        count(c->p, path, PROC_SRC_OVER_BOUND);
        return &c->fail[PROC_SRC_OVER_BOUND];
    }
    if ((f = calloc(1, sizeof *f)) == NULL) {
        close(fd);
        return NULL;
    }
    if (S_ISREG(st.st_mode) && st.st_size <= PROC_SRC_MAX)
        c->bytes += (uint64_t)st.st_size;
    if (read_open(c->p, fd, &st, f) != REMORA_OK) {
        free(f);
        return NULL;
    }
    count(c->p, path, f->state);
    c->files[c->nfiles++] = f;
    return f;
}

const proc_src_t *proc_src_cache_get(proc_src_cache_t *c, const char *path)
{
    uint32_t h = name_hash(path);
    int32_t i;
    struct src_name *nm;
    const proc_src_t *s;

    for (i = c->bucket[h % CACHE_BUCKETS]; i >= 0; i = c->names[i].next)
        if (c->names[i].hash == h && strcmp(c->names[i].path, path) == 0)
            return c->names[i].src;
    if (c->nnames == PROC_SRC_CACHE_NAMES)
        return &c->fail[PROC_SRC_OVER_BOUND];   /* no more opens: the name is not kept */
    if (c->nnames == c->cap_names) {
        size_t cap = c->cap_names ? c->cap_names * 2 : 16;
        struct src_name *grown = realloc(c->names, cap * sizeof *grown);
        if (grown == NULL)
            return NULL;
        c->names = grown;
        c->cap_names = cap;
    }
    if ((s = cache_read(c, path)) == NULL)
        return NULL;
    nm = &c->names[c->nnames];
    if ((nm->path = strdup(path)) == NULL)
        return NULL;
    nm->hash = h;
    nm->src = s;
    nm->next = c->bucket[h % CACHE_BUCKETS];
    c->bucket[h % CACHE_BUCKETS] = (int32_t)c->nnames++;
    return s;
}

int proc_src_cache_unread(const proc_src_cache_t *c, size_t i, const char **path, const char **why)
{
    size_t k;

    for (k = 0; c != NULL && k < c->nnames; k++) {
        int st = c->names[k].src->state;
        if (st == PROC_SRC_OK || st == PROC_SRC_NAMELESS)
            continue;
        if (i-- == 0) {
            *path = c->names[k].path;
            *why = proc_src_state_str(st);
            return 0;
        }
    }
    return -1;
}
