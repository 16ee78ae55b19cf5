/* proc/maps.c — /proc/PID/maps parsing and opening the files the target maps.
 *
 * Reads /proc/PID/maps and the files the target maps (through /proc/PID/root, else by
 * their plain path), or the maps text and files of a core or snapshot image; the parser
 * is pure and bounded.
 */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "remora.h"
#include "proc.h"
#include "proc_internal.h"
#include "../util/util.h"

static int parse_hex(const char **s, const char *end, uint64_t *out)
{
    uint64_t v = 0;
    int digits = 0;

    while (*s < end) {
        char c = **s;
        int d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (c >= 'a' && c <= 'f')
            d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            d = c - 'A' + 10;
        else
            break;
        if (digits == 16)
            return -1;
        v = v << 4 | (uint64_t)d;
        digits++;
        (*s)++;
    }
    *out = v;
    return digits ? 0 : -1;
}

static int parse_dec(const char **s, const char *end, uint64_t *out)
{
    uint64_t v = 0;
    int digits = 0;

    while (*s < end && **s >= '0' && **s <= '9') {
        if (digits == 19)
            return -1;
        v = v * 10 + (uint64_t)(**s - '0');
        digits++;
        (*s)++;
    }
    *out = v;
    return digits ? 0 : -1;
}

static int expect(const char **s, const char *end, char c)
{
    if (*s >= end || **s != c)
        return -1;
    (*s)++;
    return 0;
}

static void skip_spaces(const char **s, const char *end)
{
    while (*s < end && (**s == ' ' || **s == '\t'))
        (*s)++;
}

/* Parses one line [s, end) into m. Returns 0 or -1 if malformed. */
static int parse_line(char *line, char *end, proc_map_t *m)
{
    const char *s = line;
    uint64_t maj, min;
    int i;

    memset(m, 0, sizeof *m);
    if (parse_hex(&s, end, &m->start) || expect(&s, end, '-') || parse_hex(&s, end, &m->end))
        return -1;
    if (m->end < m->start)
        return -1;
    skip_spaces(&s, end);
    for (i = 0; i < 4; i++) {
        if (s >= end)
            return -1;
        m->perms[i] = *s++;
    }
    m->perms[4] = '\0';
    skip_spaces(&s, end);
    if (parse_hex(&s, end, &m->offset))
        return -1;
    skip_spaces(&s, end);
    if (parse_hex(&s, end, &maj) || expect(&s, end, ':') || parse_hex(&s, end, &min))
        return -1;
    m->dev_major = (unsigned)maj;
    m->dev_minor = (unsigned)min;
    skip_spaces(&s, end);
    if (parse_dec(&s, end, &m->inode))
        return -1;
    skip_spaces(&s, end);
    if (s < end) {
        m->path = (char *)s;
        *end = '\0';
    }
    return 0;
}

int proc_maps_parse(char *text, size_t len, size_t max, proc_maps_t *out)
{
    size_t cap = 0, i = 0;
    char *line = text, *stop = text + len;

    memset(out, 0, sizeof *out);
    while (line < stop) {
        char *nl = memchr(line, '\n', (size_t)(stop - line));
        char *end = nl ? nl : stop;
        proc_map_t m;

        if (i == max)
            break;
        /* the last line may lack its newline: it cannot be terminated in place */
        if (nl != NULL && parse_line(line, end, &m) == 0) {
            if (i == cap) {
                size_t ncap = cap ? cap * 2 : 64;
                proc_map_t *nv = realloc(out->v, ncap * sizeof *nv);
                if (nv == NULL) {
                    free(out->v);
                    out->v = NULL;
                    return REMORA_ENOMEM;
                }
                out->v = nv;
                cap = ncap;
            }
            out->v[i++] = m;
        }
        line = end + 1;
    }
    out->n = i;
    return REMORA_OK;
}

#define MAPS_MAX_BYTES (64u << 20)
#define MAPS_MAX_ENTRIES 1000000

int proc_maps_read(proc_t *p, proc_maps_t *out)
{
    char path[64];
    char *text;
    size_t len;
    int err;

    memset(out, 0, sizeof *out);
    if (p->img != NULL) {
        if (p->img->maps_text == NULL)
            return REMORA_ENOPROC;
        len = p->img->maps_len;
        text = malloc(len + 1);
        if (text == NULL)
            return REMORA_ENOMEM;
        memcpy(text, p->img->maps_text, len);
        text[len] = '\0';
    } else {
        snprintf(path, sizeof path, "/proc/%d/maps", (int)p->pid);
        err = proc_slurp(path, MAPS_MAX_BYTES, &text, &len);
        if (err)
            return err;
        proc_source_refresh(p);     /* the root its Python now runs in */
    }
    if (len > 0)
        PROC_RECORD(p, rec_maps(p->rec, text, len));    /* before parsing writes NULs into it */
    if (len == 0) {
        /* a zombie or exiting process has no maps */
        free(text);
        return REMORA_ENOPROC;
    }
    err = proc_maps_parse(text, len, MAPS_MAX_ENTRIES, out);
    if (err) {
        free(text);
        return err;
    }
    out->text = text;
    return REMORA_OK;
}

void proc_maps_fini(proc_maps_t *m)
{
    free(m->v);
    free(m->text);
    memset(m, 0, sizeof *m);
}

/* The file at path (the target's, or one a core names) if it is a regular file and, with
 * inode not 0, that inode: never a FIFO put there since it was mapped, nor a device
 * mapped (util/input.c). A descriptor, or -1. */
static int open_checked(const char *path, uint64_t inode)
{
    struct stat st;
    const char *kind;
    int fd = remora_input_open(path, &kind);

    if (fd < 0)
        return -1;
    if (inode != 0 && (fstat(fd, &st) != 0 || (uint64_t)st.st_ino != inode)) {
        close(fd);
        return -1;
    }
    return fd;
}

/* A memory file holding a snapshot's stub (fd or -1). */
static int memory_file(const unsigned char *bytes, size_t len)
{
    int fd = memfd_create("remora-snapshot-elf", MFD_CLOEXEC);
    size_t done = 0;

    if (fd < 0)
        return -1;
    while (done < len) {
        ssize_t w = write(fd, bytes + done, len - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            close(fd);
            return -1;
        }
        done += (size_t)w;
    }
    return fd;
}

/* Image sources: the file's bytes. Returns 0 or -1. */
static int image_file(proc_t *p, const char *path, uint64_t inode, size_t *idx,
                      const unsigned char **bytes, size_t *len)
{
    long i = image_find_file(p->img, path, p->kind == PROC_CORE ? 0 : inode);

    if (i < 0)
        return -1;
    *idx = (size_t)i;
    return image_file_bytes(p->img, (size_t)i, bytes, len);
}

/* A reader that is itself in a chroot (another mount namespace: the Python module run by
 * the test chroot's interpreter) sees a chrooted target's maps and its /proc/PID/root link
 * both as paths outside its own root ("/var/cache/x/usr/bin/python3"): neither opens
 * there, but the part of the path below the target's root does, under /proc/PID/root.
 * The inode check keeps it the file mapped. A descriptor, or -1. */
static int open_under_root(proc_t *p, const char *path, uint64_t inode)
{
    char link[64], root[4096], buf[4200];
    ssize_t n;
    size_t len;

    snprintf(link, sizeof link, "/proc/%d/root", (int)p->pid);
    n = readlink(link, root, sizeof root - 1);
    if (n <= 1)                 /* unreadable, or "/": nothing to take off */
        return -1;
    len = (size_t)n;
    root[len] = '\0';
    if (strncmp(path, root, len) != 0 || path[len] != '/')
        return -1;
    snprintf(buf, sizeof buf, "%s%s", link, path + len);
    return open_checked(buf, inode);
}

int proc_open_mapped_file(proc_t *p, const char *path, uint64_t inode)
{
    char buf[4200];
    int fd;

    if (path == NULL || path[0] != '/')
        return -1;
    if (p->img != NULL) {
        const unsigned char *bytes;
        size_t len, idx;
        if (image_file(p, path, inode, &idx, &bytes, &len) != 0)
            return -1;
        if (p->kind == PROC_CORE) {
            if (image_host_path(p->img, idx, buf, sizeof buf) != 0)
                return -1;
            return open_checked(buf, 0);
        }
        return memory_file(bytes, len);
    }
    snprintf(buf, sizeof buf, "/proc/%d/root%s", (int)p->pid, path);
    fd = open_checked(buf, inode);
    if (fd >= 0)
        return fd;
    /* a chroot: maps names the file as the host sees it */
    fd = open_checked(path, inode);
    if (fd >= 0)
        return fd;
    return open_under_root(p, path, inode);
}

int proc_elf_open(proc_t *p, const char *path, uint64_t inode, elf_t **out)
{
    int err, fd;

    *out = NULL;
    if (path == NULL || path[0] != '/')
        return REMORA_ENOTPY;
    if (p->img != NULL) {
        const unsigned char *bytes;
        size_t len, idx;
        if (image_file(p, path, inode, &idx, &bytes, &len) != 0)
            return REMORA_ENOTPY;
        err = elf_open_mem(bytes, len, out);
    } else {
        fd = proc_open_mapped_file(p, path, inode);
        if (fd < 0)
            return REMORA_ENOTPY;
        err = elf_open_fd(fd, out);
    }
    if (err)
        return err == REMORA_ENOMEM ? err : REMORA_ENOTPY;
    PROC_RECORD(p, rec_elf(p->rec, path, inode, *out));
    return REMORA_OK;
}
