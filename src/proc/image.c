/* proc/image.c — the memory image behind a core or snapshot handle.
 *
 * An image is a sorted set of byte ranges of the target's memory (pointers into the
 * source file), the file-backed mappings (to read what a core does not hold from the
 * mapped file itself), the files, the tasks and a maps text. Everything in it came
 * from an untrusted file: reads are bounded by what is held, and by the file's size.
 *
 * Reads the bytes it holds and, for a core, the files the core names (opened on this
 * host and mapped when first needed). Calls nothing else in proc/.
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

#define IMAGE_CHECK_BYTES 4096      /* a core's copy of a file's first page, compared */

image_t *image_new(void)
{
    image_t *img = calloc(1, sizeof *img);

    if (img != NULL)
        img->exe_file = (size_t)-1;
    return img;
}

void image_free(image_t *img)
{
    size_t i;

    if (img == NULL)
        return;
    for (i = 0; i < img->nfiles; i++) {
        if (img->files[i].mapped)
            munmap((void *)img->files[i].bytes, img->files[i].len);
        free(img->files[i].path);
    }
    free(img->files);
    free(img->segs);
    free(img->fmaps);
    free(img->tasks);
    free(img->maps_text);
    free(img->root);
    free(img->exe);
    if (img->buf_mapped)
        munmap(img->buf, img->len);
    else
        free(img->buf);
    free(img);
}

static int seg_cmp(const void *a, const void *b)
{
    const img_seg_t *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

static int fmap_cmp(const void *a, const void *b)
{
    const img_fmap_t *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

void image_seal(image_t *img)
{
    size_t i, k;

    /* qsort is not stable: equal starts keep an arbitrary one, which is fine (both came
     * from the same untrusted file) */
    if (img->nsegs > 1)
        qsort(img->segs, img->nsegs, sizeof *img->segs, seg_cmp);
    for (i = k = 0; i < img->nsegs; i++) {
        img_seg_t *s = &img->segs[i];
        if (s->end <= s->start || s->data_len > s->end - s->start)
            continue;
        if (k > 0 && s->start < img->segs[k - 1].end)
            continue;
        img->segs[k++] = *s;
    }
    img->nsegs = k;
    if (img->nfmaps > 1)
        qsort(img->fmaps, img->nfmaps, sizeof *img->fmaps, fmap_cmp);
    for (i = k = 0; i < img->nfmaps; i++) {
        img_fmap_t *f = &img->fmaps[i];
        if (f->end <= f->start || f->file >= img->nfiles || f->offset + (f->end - f->start) < f->offset)
            continue;
        if (k > 0 && f->start < img->fmaps[k - 1].end)
            continue;
        img->fmaps[k++] = *f;
    }
    img->nfmaps = k;
}

/* The index of the first segment whose start is above addr (nsegs: none). */
static size_t seg_after(const image_t *img, uint64_t addr)
{
    return REMORA_UPPER_U64(img->segs, img->nsegs, img_seg_t, start, addr);
}

/* The last segment whose start is <= addr, if addr is inside it. */
static const img_seg_t *find_seg(const image_t *img, uint64_t addr)
{
    size_t i = seg_after(img, addr);

    return i > 0 && addr < img->segs[i - 1].end ? &img->segs[i - 1] : NULL;
}

/* The last file-backed mapping whose start is <= addr, if addr is inside it. */
static const img_fmap_t *find_fmap(const image_t *img, uint64_t addr)
{
    size_t i = REMORA_UPPER_U64(img->fmaps, img->nfmaps, img_fmap_t, start, addr);

    return i > 0 && addr < img->fmaps[i - 1].end ? &img->fmaps[i - 1] : NULL;
}

/* Reads up to 'limit' bytes at addr from the file mapped there; returns the count or 0. */
static size_t read_from_file(image_t *img, uint64_t addr, unsigned char *out, uint64_t limit)
{
    const img_fmap_t *f = find_fmap(img, addr);
    const unsigned char *bytes;
    uint64_t off, n, end, held;
    size_t flen;

    if (f == NULL || image_file_bytes(img, f->file, &bytes, &flen) != 0)
        return 0;
    n = f->end - addr < limit ? f->end - addr : limit;
    off = f->offset + (addr - f->start);     /* no overflow: checked in image_seal */
    /* the mapping of the file's last page reads zeros past the file's end */
    end = img->page ? (((uint64_t)flen + img->page - 1) & ~(img->page - 1)) : flen;
    if (off >= end)
        return 0;
    if (n > end - off)
        n = end - off;
    held = off < flen ? (flen - off < n ? flen - off : n) : 0;
    if (held > 0)
        memcpy(out, bytes + off, (size_t)held);
    memset(out + held, 0, (size_t)(n - held));
    return (size_t)n;
}

int image_read(image_t *img, uint64_t addr, void *buf, size_t len)
{
    unsigned char *out = buf;

    if (addr + len < addr)
        return REMORA_EFAULT;
    while (len > 0) {
        const img_seg_t *s = find_seg(img, addr);
        uint64_t limit = len;
        size_t got;

        if (s != NULL) {
            uint64_t in = addr - s->start;
            if (s->end - addr < limit)
                limit = s->end - addr;
            if (in < s->data_len) {
                uint64_t n = s->data_len - in < limit ? s->data_len - in : limit;
                memcpy(out, s->data + in, (size_t)n);
                out += n;
                addr += n;
                len -= (size_t)n;
                continue;
            }
        } else if (img->nsegs > 0) {
            /* not in a segment: a mapping the core left out entirely; stop at the next one */
            size_t lo = seg_after(img, addr);
            if (lo < img->nsegs && img->segs[lo].start - addr < limit)
                limit = img->segs[lo].start - addr;
        }
        got = read_from_file(img, addr, out, limit);
        if (got == 0)
            return REMORA_EFAULT;
        out += got;
        addr += got;
        len -= got;
    }
    return REMORA_OK;
}

long image_find_file(const image_t *img, const char *path, uint64_t inode)
{
    size_t i;

    for (i = 0; i < img->nfiles; i++) {
        const img_file_t *f = &img->files[i];
        if (strcmp(f->path, path) != 0)
            continue;
        if (inode != 0 && f->inode != 0 && inode != f->inode)
            continue;
        return (long)i;
    }
    return -1;
}

int image_host_path(const image_t *img, size_t i, char *out, size_t len)
{
    const char *path;
    size_t rl;
    int n;

    if (i >= img->nfiles)
        return -1;
    if (i == img->exe_file && img->exe != NULL) {
        n = snprintf(out, len, "%s", img->exe);
        return n < 0 || (size_t)n >= len ? -1 : 0;
    }
    path = img->files[i].path;
    /* a name from the core must stay under the root: no "." or ".." components */
    if (path[0] != '/' || strstr(path, "/../") != NULL || strstr(path, "/./") != NULL ||
        (strlen(path) >= 3 && strcmp(path + strlen(path) - 3, "/..") == 0))
        return -1;
    if (img->root == NULL) {
        n = snprintf(out, len, "%s", path);
    } else {
        rl = strlen(img->root);
        /* gcore run outside a chroot names files as the host sees them */
        if (strncmp(path, img->root, rl) == 0 && path[rl] == '/')
            n = snprintf(out, len, "%s", path);
        else
            n = snprintf(out, len, "%s%s", img->root, path);
    }
    return n < 0 || (size_t)n >= len ? -1 : 0;
}

static void set_problem(image_t *img, const char *path, const char *what)
{
    /* keep the first problem with a Python file: it says the most */
    const char *base = strrchr(path, '/');
    int pythonish = strstr(base ? base : path, "python") != NULL;

    if (img->problem[0] != '\0' && !pythonish)
        return;
    if (img->problem[0] != '\0' && strstr(img->problem, "python") != NULL)
        return;
    snprintf(img->problem, sizeof img->problem, "%s: %s", path, what);
}

/* A core's copy of the first bytes of file i (its mapping at offset 0), if it holds one. */
static const unsigned char *core_first_page(const image_t *img, size_t i, size_t *n)
{
    size_t k;

    for (k = 0; k < img->nfmaps; k++) {
        const img_fmap_t *f = &img->fmaps[k];
        const img_seg_t *s;
        if (f->file != i || f->offset != 0)
            continue;
        s = find_seg(img, f->start);
        if (s == NULL || s->start != f->start || s->data_len == 0)
            continue;
        *n = s->data_len < IMAGE_CHECK_BYTES ? (size_t)s->data_len : IMAGE_CHECK_BYTES;
        if (*n > f->end - f->start)
            *n = (size_t)(f->end - f->start);
        return s->data;
    }
    return NULL;
}

int image_file_bytes(image_t *img, size_t i, const unsigned char **bytes, size_t *len)
{
    img_file_t *f;
    char path[4200];
    struct stat st;
    const unsigned char *first;
    const char *kind;
    size_t nfirst = 0;
    void *m;
    int fd;

    if (i >= img->nfiles)
        return -1;
    f = &img->files[i];
    if (f->state == 0 && f->bytes == NULL) {
        f->state = -1;
        if (image_host_path(img, i, path, sizeof path) != 0) {
            set_problem(img, f->path, "name too long or not absolute");
            return -1;
        }
        /* the core names it: a FIFO or a device there must not hang or flood remora */
        fd = remora_input_open(path, &kind);
        if (fd < 0) {
            char what[4300];
            if (kind != NULL)
                snprintf(what, sizeof what, "%s is %s, not a regular file", path, kind);
            else
                snprintf(what, sizeof what, "cannot open %s: %s", path, strerror(errno));
            set_problem(img, f->path, what);
            return -1;
        }
        if (fstat(fd, &st) != 0 || st.st_size <= 0) {
            close(fd);
            set_problem(img, f->path, "an empty file");
            return -1;
        }
        m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        close(fd);
        if (m == MAP_FAILED) {
            set_problem(img, f->path, "cannot map it");
            return -1;
        }
        first = core_first_page(img, i, &nfirst);
        if (first != NULL && (nfirst > (size_t)st.st_size || memcmp(first, m, nfirst) != 0)) {
            char what[4300];
            munmap(m, (size_t)st.st_size);
            snprintf(what, sizeof what, "%s is not the file the core was made with (its first "
                     "page differs)", path);
            set_problem(img, f->path, what);
            return -1;
        }
        f->bytes = m;
        f->len = (size_t)st.st_size;
        f->mapped = 1;
        f->state = 1;
    } else if (f->state == 0) {
        f->state = 1;               /* held in the source file */
    }
    if (f->state != 1)
        return -1;
    *bytes = f->bytes;
    *len = f->len;
    return 0;
}

const img_task_t *image_task(const image_t *img, pid_t tid)
{
    size_t i;

    for (i = 0; i < img->ntasks; i++)
        if (img->tasks[i].tid == tid)
            return &img->tasks[i];
    return NULL;
}

