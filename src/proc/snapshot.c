/* proc/snapshot.c — snapshots: what remora read from a source, saved to a file and
 * replayed as a source of its own, for the tests and fuzzers: compiled only into their
 * binaries (REMORA_TESTING; the Makefile's TESTING_SRC), never into remora or libremora.
 *
 * The recorder keeps every byte range read whole, the maps text, the tasks (with their
 * states and names) and, for each ELF file opened with proc_elf_open(), a trace of the
 * lookups made in it. A snapshot alone is enough to run py_target_find + unw_sample.
 *
 * File format (little-endian; every record starts at a multiple of 8):
 *   header  "RMRSNAP\0", u32 version (1), u32 0
 *   record  u32 type, u32 0, u64 len, payload[len], zero padding to a multiple of 8
 *     1 META  u32 pid, u32 source kind (enum proc_kind) it was recorded from
 *     2 MAPS  the text of a maps file
 *     3 TASK  i32 tid, u8 state (0: unknown), u8 has_comm, u16 name length, name
 *     4 FILE  u64 inode, u32 path length, u32 0, path, padding to 8, a stub ELF file
 *     5 MEM   u64 address, the bytes read there
 *   Records of other types are skipped. Overlapping MEM records: the first one wins.
 * A snapshot is untrusted input: every length and count is checked against the file.
 *
 * Reads a snapshot file (whole, through file.c) into an image (image.c) for proc.c's
 * handle; the recorder reads nothing, it is handed copies of what the handle read, and
 * writes the snapshot file. Calls image.c, elf.c's traces and file.c only.
 *
 * Over 600 lines on purpose: the writer and the reader of the format above stay in one
 * file, so that a change to one record cannot leave the other behind.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "remora.h"
#include "proc.h"
#include "proc_internal.h"
#include "../util/util.h"

#define SNAP_MAGIC "RMRSNAP"            /* 8 bytes with its NUL */
#define SNAP_VERSION 1
#define SNAP_MAX_BYTES (1ull << 30)     /* a snapshot file */
#define SNAP_MAX_TASKS 65536
#define SNAP_MAX_FILES 4096
#define SNAP_MAX_MAPS (64u << 20)
#define REC_MAX_BYTES (256u << 20)      /* bytes a recorder keeps before it gives up */

enum { R_META = 1, R_MAPS = 2, R_TASK = 3, R_FILE = 4, R_MEM = 5 };

static uint64_t pad8(uint64_t n)
{
    return (n + 7) & ~(uint64_t)7;
}

/* ---- reading a snapshot ----------------------------------------------------------- */

/* Calls back for each record: walks [16, len) and stops at the first malformed one. */
typedef struct snap_rec {
    uint32_t type;
    const unsigned char *p;
    uint64_t len;
} snap_rec_t;

static int next_record(const image_t *img, uint64_t *pos, snap_rec_t *r)
{
    uint64_t at = *pos, len;

    if (img->len - at < 16)
        return 0;
    r->type = rd32(img->buf + at);
    len = rd64(img->buf + at + 8);
    if (len > img->len - at - 16)
        return 0;
    r->p = img->buf + at + 16;
    r->len = len;
    /* the next record starts 8-aligned (or at the end) */
    *pos = at + 16 + len;
    if (img->len - *pos < pad8(len) - len)
        *pos = img->len;
    else
        *pos += pad8(len) - len;
    return 1;
}

/* Parses a snapshot's bytes (img->buf) into img. Returns 0, REMORA_ENOTPY (not a
 * snapshot), REMORA_ECORRUPT, REMORA_ENOMEM. */
static int snapshot_parse(image_t *img, pid_t *pid)
{
    uint64_t pos;
    snap_rec_t r;
    size_t nmem = 0, ntask = 0, nfile = 0;

    *pid = 0;
    if (img->len < 16 || memcmp(img->buf, SNAP_MAGIC, 8) != 0)
        return REMORA_ENOTPY;
    if (rd32(img->buf + 8) != SNAP_VERSION)
        return REMORA_ECORRUPT;
    for (pos = 16; next_record(img, &pos, &r);) {
        nmem += r.type == R_MEM;
        ntask += r.type == R_TASK;
        nfile += r.type == R_FILE;
    }
    if (ntask > SNAP_MAX_TASKS || nfile > SNAP_MAX_FILES)
        return REMORA_ECORRUPT;
    img->segs = calloc(nmem ? nmem : 1, sizeof *img->segs);
    img->tasks = calloc(ntask ? ntask : 1, sizeof *img->tasks);
    img->files = calloc(nfile ? nfile : 1, sizeof *img->files);
    if (img->segs == NULL || img->tasks == NULL || img->files == NULL)
        return REMORA_ENOMEM;

    for (pos = 16; next_record(img, &pos, &r);) {
        switch (r.type) {
        case R_META:
            if (r.len >= 8) {
                int32_t v;
                memcpy(&v, r.p, 4);
                *pid = v > 0 ? (pid_t)v : 0;
            }
            break;
        case R_MAPS:
            if (r.len > SNAP_MAX_MAPS)
                return REMORA_ECORRUPT;
            free(img->maps_text);
            img->maps_text = malloc(r.len + 1);
            if (img->maps_text == NULL)
                return REMORA_ENOMEM;
            memcpy(img->maps_text, r.p, r.len);
            img->maps_text[r.len] = '\0';
            img->maps_len = r.len;
            break;
        case R_TASK: {
            img_task_t *t = &img->tasks[img->ntasks];
            int32_t tid;
            uint16_t nlen;
            if (r.len < 8)
                break;
            memcpy(&tid, r.p, 4);
            memcpy(&nlen, r.p + 6, 2);
            if (tid <= 0 || nlen > r.len - 8 || image_task(img, tid) != NULL)
                break;
            memset(t, 0, sizeof *t);
            t->tid = tid;
            t->state = (char)r.p[4];
            t->has_comm = r.p[5] != 0;
            if (nlen >= sizeof t->name)
                nlen = sizeof t->name - 1;
            memcpy(t->name, r.p + 8, nlen);
            t->name[nlen] = '\0';
            t->name[strnlen(t->name, nlen)] = '\0';
            img->ntasks++;
            break;
        }
        case R_FILE: {
            img_file_t *f = &img->files[img->nfiles];
            uint64_t plen, at;
            if (r.len < 16)
                break;
            plen = rd32(r.p + 8);
            if (plen == 0 || plen > r.len - 16)
                break;
            at = 16 + pad8(plen);
            if (at > r.len || memchr(r.p + 16, '\0', plen) != NULL)
                break;
            memset(f, 0, sizeof *f);
            f->path = malloc(plen + 1);
            if (f->path == NULL)
                return REMORA_ENOMEM;
            memcpy(f->path, r.p + 16, plen);
            f->path[plen] = '\0';
            f->inode = rd64(r.p);
            f->bytes = r.p + at;
            f->len = r.len - at;
            img->nfiles++;
            break;
        }
        case R_MEM: {
            img_seg_t *s = &img->segs[img->nsegs];
            uint64_t addr;
            if (r.len <= 8)
                break;
            addr = rd64(r.p);
            if (addr + (r.len - 8) < addr)
                break;
            s->start = addr;
            s->end = addr + (r.len - 8);
            s->data = r.p + 8;
            s->data_len = r.len - 8;
            img->nsegs++;
            break;
        }
        default:
            break;
        }
    }
    image_seal(img);
    return REMORA_OK;
}

/* Parses img (its buf filled) as a snapshot; on success *out = img, else img is freed. */
static int open_snapshot_image(image_t *img, image_t **out, pid_t *pid)
{
    int err = snapshot_parse(img, pid);

    if (err) {
        image_free(img);
        return err;
    }
    *out = img;
    return REMORA_OK;
}

int snapshot_open(const char *file, image_t **out, pid_t *pid)
{
    image_t *img;
    int err;

    *out = NULL;
    img = image_new();
    if (img == NULL)
        return REMORA_ENOMEM;
    err = proc_read_file(file, SNAP_MAX_BYTES, &img->buf, &img->len);
    if (err) {
        image_free(img);
        return err == REMORA_ENOMEM ? REMORA_ECORRUPT : err;
    }
    return open_snapshot_image(img, out, pid);
}

int snapshot_open_mem(const void *buf, size_t len, image_t **out, pid_t *pid)
{
    image_t *img;

    *out = NULL;
    if (len > SNAP_MAX_BYTES)
        return REMORA_ECORRUPT;
    img = image_new();
    if (img == NULL)
        return REMORA_ENOMEM;
    /* a copy: 8-aligned, so stub ELF files in it can be read in place */
    img->buf = malloc(len ? len : 1);
    if (img->buf == NULL) {
        image_free(img);
        return REMORA_ENOMEM;
    }
    if (len)
        memcpy(img->buf, buf, len);
    img->len = len;
    return open_snapshot_image(img, out, pid);
}

/* ---- recording -------------------------------------------------------------------- */

typedef struct rec_read {
    uint64_t addr;
    size_t len;
    size_t at;                  /* offset in the recorder's data */
} rec_read_t;

typedef struct rec_file {
    char *path;
    uint64_t inode;
    elf_trace_t *trace;
} rec_file_t;

struct recorder {
    rec_read_t *reads;
    size_t nreads, cap_reads;
    unsigned char *data;
    size_t data_len, cap_data;
    char *maps;
    size_t maps_len;
    img_task_t *tasks;
    size_t ntasks, cap_tasks;
    rec_file_t *files;
    size_t nfiles, cap_files;
    int failed;                 /* out of memory or over REC_MAX_BYTES: cannot be saved */
};

recorder_t *rec_new(void)
{
    return calloc(1, sizeof(recorder_t));
}

void rec_free(recorder_t *r)
{
    size_t i;

    if (r == NULL)
        return;
    for (i = 0; i < r->nfiles; i++) {
        free(r->files[i].path);
        elf_trace_free(r->files[i].trace);
    }
    free(r->files);
    free(r->reads);
    free(r->data);
    free(r->maps);
    free(r->tasks);
    free(r);
}

void rec_mem(recorder_t *r, uint64_t addr, const void *buf, size_t len)
{
    if (r->failed)
        return;
    if (len > REC_MAX_BYTES - r->data_len || addr + len < addr ||
        remora_grow((void **)&r->data, &r->cap_data, r->data_len + len, 1) ||
        remora_grow((void **)&r->reads, &r->cap_reads, r->nreads + 1, sizeof *r->reads)) {
        r->failed = 1;
        return;
    }
    memcpy(r->data + r->data_len, buf, len);
    r->reads[r->nreads].addr = addr;
    r->reads[r->nreads].len = len;
    r->reads[r->nreads].at = r->data_len;
    r->nreads++;
    r->data_len += len;
}

void rec_memv(recorder_t *r, const proc_iov_t *iov, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++)
        if (iov[i].len > 0)
            rec_mem(r, iov[i].addr, iov[i].buf, iov[i].len);
}

void rec_maps(recorder_t *r, const char *text, size_t len)
{
    char *copy;

    if (r->failed)
        return;
    copy = malloc(len ? len : 1);
    if (copy == NULL) {
        r->failed = 1;
        return;
    }
    memcpy(copy, text, len);
    free(r->maps);
    r->maps = copy;
    r->maps_len = len;
}

static img_task_t *rec_task_get(recorder_t *r, pid_t tid)
{
    size_t i;

    for (i = 0; i < r->ntasks; i++)
        if (r->tasks[i].tid == tid)
            return &r->tasks[i];
    if (r->failed || r->ntasks >= SNAP_MAX_TASKS ||
        remora_grow((void **)&r->tasks, &r->cap_tasks, r->ntasks + 1, sizeof *r->tasks)) {
        r->failed = 1;
        return NULL;
    }
    memset(&r->tasks[r->ntasks], 0, sizeof r->tasks[0]);
    r->tasks[r->ntasks].tid = tid;
    return &r->tasks[r->ntasks++];
}

void rec_task(recorder_t *r, pid_t tid)
{
    (void)rec_task_get(r, tid);
}

void rec_task_state(recorder_t *r, pid_t tid, char state)
{
    img_task_t *t = rec_task_get(r, tid);

    if (t != NULL)
        t->state = state;
}

void rec_task_comm(recorder_t *r, pid_t tid, const char *name)
{
    img_task_t *t = rec_task_get(r, tid);

    if (t != NULL) {
        snprintf(t->name, sizeof t->name, "%s", name);
        t->has_comm = 1;
    }
}

void rec_elf(recorder_t *r, const char *path, uint64_t inode, elf_t *e)
{
    rec_file_t *f = NULL;
    size_t i;

    if (r->failed)
        return;
    for (i = 0; i < r->nfiles && f == NULL; i++)
        if (r->files[i].inode == inode && strcmp(r->files[i].path, path) == 0)
            f = &r->files[i];
    if (f == NULL) {
        if (r->nfiles >= SNAP_MAX_FILES ||
            remora_grow((void **)&r->files, &r->cap_files, r->nfiles + 1, sizeof *r->files)) {
            r->failed = 1;
            return;
        }
        f = &r->files[r->nfiles];
        f->path = strdup(path);
        f->inode = inode;
        f->trace = elf_trace_new(e);
        if (f->path == NULL || f->trace == NULL) {
            free(f->path);
            elf_trace_free(f->trace);
            r->failed = 1;
            return;
        }
        r->nfiles++;
    }
    elf_trace_attach(e, f->trace);
}

/* ---- writing ---------------------------------------------------------------------- */

typedef struct wbuf {
    unsigned char *b;
    size_t len, cap;
    int failed;
} wbuf_t;

static void put(wbuf_t *w, const void *p, size_t n)
{
    if (w->failed || remora_grow((void **)&w->b, &w->cap, w->len + n, 1)) {
        w->failed = 1;
        return;
    }
    memcpy(w->b + w->len, p, n);
    w->len += n;
}

static void put_zeros(wbuf_t *w, size_t n)
{
    static const unsigned char z[8];
    while (n > 0) {
        size_t k = n < 8 ? n : 8;
        put(w, z, k);
        n -= k;
    }
}

static void put_u32(wbuf_t *w, uint32_t v)
{
    put(w, &v, 4);
}

static void put_u64(wbuf_t *w, uint64_t v)
{
    put(w, &v, 8);
}

static void record_head(wbuf_t *w, uint32_t type, uint64_t len)
{
    put_u32(w, type);
    put_u32(w, 0);
    put_u64(w, len);
}

static void record_end(wbuf_t *w, uint64_t len)
{
    put_zeros(w, (size_t)(pad8(len) - len));
}

typedef struct span {
    uint64_t start, end;
    size_t at;                  /* offset of its bytes in the merged buffer */
} span_t;

static int read_cmp(const void *a, const void *b)
{
    const rec_read_t *x = *(rec_read_t *const *)a, *y = *(rec_read_t *const *)b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* The union of the ranges read, each filled with the bytes of the last read of it. */
static int merge_reads(const recorder_t *r, span_t **spans, size_t *nspans, unsigned char **bytes)
{
    rec_read_t **order = NULL;
    span_t *sp = NULL;
    unsigned char *all = NULL;
    size_t n = 0, i, total = 0;

    *spans = NULL;
    *nspans = 0;
    *bytes = NULL;
    if (r->nreads == 0)
        return REMORA_OK;
    order = malloc(r->nreads * sizeof *order);
    sp = malloc(r->nreads * sizeof *sp);
    if (order == NULL || sp == NULL)
        goto nomem;
    for (i = 0; i < r->nreads; i++)
        order[i] = &r->reads[i];
    qsort(order, r->nreads, sizeof *order, read_cmp);
    for (i = 0; i < r->nreads; i++) {
        uint64_t s = order[i]->addr, e = s + order[i]->len;
        if (n > 0 && s <= sp[n - 1].end) {
            if (e > sp[n - 1].end)
                sp[n - 1].end = e;
            continue;
        }
        sp[n].start = s;
        sp[n].end = e;
        n++;
    }
    for (i = 0; i < n; i++) {
        sp[i].at = total;
        total += (size_t)(sp[i].end - sp[i].start);
    }
    all = malloc(total ? total : 1);
    if (all == NULL)
        goto nomem;
    /* in the order they were read: later reads win */
    for (i = 0; i < r->nreads; i++) {
        const rec_read_t *rd = &r->reads[i];
        size_t lo = REMORA_UPPER_U64(sp, n, span_t, start, rd->addr);
        memcpy(all + sp[lo - 1].at + (rd->addr - sp[lo - 1].start), r->data + rd->at, rd->len);
    }
    free(order);
    *spans = sp;
    *nspans = n;
    *bytes = all;
    return REMORA_OK;
nomem:
    free(order);
    free(sp);
    free(all);
    return REMORA_ENOMEM;
}

int rec_save_mem(const recorder_t *r, pid_t pid, int kind, unsigned char **out, size_t *len)
{
    wbuf_t w = { NULL, 0, 0, 0 };
    span_t *spans = NULL;
    unsigned char *bytes = NULL;
    size_t nspans = 0, i;
    int err;

    *out = NULL;
    *len = 0;
    if (r->failed)
        return REMORA_ENOMEM;
    err = merge_reads(r, &spans, &nspans, &bytes);
    if (err)
        return err;

    put(&w, SNAP_MAGIC, 8);
    put_u32(&w, SNAP_VERSION);
    put_u32(&w, 0);

    record_head(&w, R_META, 8);
    put_u32(&w, (uint32_t)pid);
    put_u32(&w, (uint32_t)kind);

    if (r->maps != NULL) {
        record_head(&w, R_MAPS, r->maps_len);
        put(&w, r->maps, r->maps_len);
        record_end(&w, r->maps_len);
    }
    for (i = 0; i < r->ntasks; i++) {
        const img_task_t *t = &r->tasks[i];
        uint16_t nlen = t->has_comm ? (uint16_t)strlen(t->name) : 0;
        unsigned char head[8];
        int32_t tid = t->tid;
        memcpy(head, &tid, 4);
        head[4] = (unsigned char)t->state;
        head[5] = (unsigned char)t->has_comm;
        memcpy(head + 6, &nlen, 2);
        record_head(&w, R_TASK, 8u + nlen);
        put(&w, head, 8);
        put(&w, t->name, nlen);
        record_end(&w, 8u + nlen);
    }
    for (i = 0; i < r->nfiles && !w.failed; i++) {
        const rec_file_t *f = &r->files[i];
        unsigned char *stub;
        size_t stub_len, plen = strlen(f->path);
        uint64_t total;
        if (elf_trace_stub(f->trace, &stub, &stub_len) != REMORA_OK) {
            w.failed = 1;
            break;
        }
        total = 16 + pad8(plen) + stub_len;
        record_head(&w, R_FILE, total);
        put_u64(&w, f->inode);
        put_u32(&w, (uint32_t)plen);
        put_u32(&w, 0);
        put(&w, f->path, plen);
        put_zeros(&w, (size_t)(pad8(plen) - plen));
        put(&w, stub, stub_len);
        record_end(&w, total);
        free(stub);
    }
    for (i = 0; i < nspans; i++) {
        uint64_t n = spans[i].end - spans[i].start;
        record_head(&w, R_MEM, 8 + n);
        put_u64(&w, spans[i].start);
        put(&w, bytes + spans[i].at, (size_t)n);
        record_end(&w, 8 + n);
    }
    free(spans);
    free(bytes);
    if (w.failed) {
        free(w.b);
        return REMORA_ENOMEM;
    }
    *out = w.b;
    *len = w.len;
    return REMORA_OK;
}

int rec_save(const recorder_t *r, pid_t pid, int kind, const char *path)
{
    unsigned char *b;
    size_t len, done = 0;
    char tmp[4200];
    int fd, err, n;

    err = rec_save_mem(r, pid, kind, &b, &len);
    if (err)
        return err;
    n = snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    if (n < 0 || (size_t)n >= sizeof tmp) {
        free(b);
        return REMORA_EIO;
    }
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        free(b);
        return REMORA_EIO;
    }
    while (done < len) {
        ssize_t w = write(fd, b + done, len - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        done += (size_t)w;
    }
    free(b);
    if (done != len || fsync(fd) != 0) {
        close(fd);
        unlink(tmp);
        return REMORA_EIO;
    }
    if (close(fd) != 0 || rename(tmp, path) != 0) {
        unlink(tmp);
        return REMORA_EIO;
    }
    return REMORA_OK;
}
