/* proc/core.c — the ELF core file source.
 *
 * Reads a 64-bit little-endian ELF core (gcore's or the kernel's): PT_LOAD segments
 * become the image's memory (a segment's bytes past p_filesz are read from the file
 * mapped there, which gcore and the kernel leave out of the core), NT_FILE gives the
 * file-backed mappings, NT_PRSTATUS the threads, NT_PRPSINFO the pid and name, NT_AUXV
 * the entry point (to tell which file is the executable). A maps text is synthesized
 * from them for proc_maps_read(). Every field is read with memcpy and checked against
 * the file's size: a core is untrusted input. Builds an image (image.c) for proc.c's
 * handle; calls image.c and file.c only.
 */
#include <elf.h>
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

#ifndef NT_FILE
#define NT_FILE 0x46494c45
#endif

#define CORE_MAX_TASKS 65536
#define CORE_MAX_FILES 65536        /* distinct files */
#define CORE_MAX_FMAPS (1u << 20)   /* NT_FILE entries */

/* x86_64 and aarch64 (the layouts agree on these fields) */
#define PRSTATUS_PID_OFF 32
#define PRSTATUS_REG_OFF 112
#define PRSTATUS_REG_LEN (27 * 8)
#define PRPSINFO_UID_OFF 16
#define PRPSINFO_GID_OFF 20
#define PRPSINFO_PID_OFF 24
#define PRPSINFO_FNAME_OFF 40
#define PRPSINFO_FNAME_LEN 16

static int in_buf(size_t len, uint64_t off, uint64_t n)
{
    return off <= len && n <= len - off;
}

typedef struct core_notes {
    const unsigned char *nt_file;   /* NT_FILE descriptor */
    uint64_t nt_file_len;
    uint64_t entry;                 /* AT_ENTRY from NT_AUXV, 0 if none */
    int have_psinfo;
    pid_t pid;
    uint32_t uid, gid;
    char fname[PRPSINFO_FNAME_LEN + 1];
} core_notes_t;

static int add_task(image_t *img, pid_t tid, size_t *cap)
{
    size_t i;

    if (tid <= 0)
        return REMORA_OK;
    for (i = 0; i < img->ntasks; i++)
        if (img->tasks[i].tid == tid)
            return REMORA_OK;
    if (img->ntasks >= CORE_MAX_TASKS)
        return REMORA_OK;
    if (img->ntasks == *cap) {
        size_t ncap = *cap ? *cap * 2 : 16;
        img_task_t *nv = realloc(img->tasks, ncap * sizeof *nv);
        if (nv == NULL)
            return REMORA_ENOMEM;
        img->tasks = nv;
        *cap = ncap;
    }
    memset(&img->tasks[img->ntasks], 0, sizeof img->tasks[0]);
    img->tasks[img->ntasks].tid = tid;
    img->tasks[img->ntasks].state = 'S';    /* unknown: frozen in the core, not running */
    img->ntasks++;
    return REMORA_OK;
}

/* Walks the notes of one PT_NOTE segment at [off, off+len) of the core. */
static int parse_notes(image_t *img, uint64_t off, uint64_t len, core_notes_t *cn, size_t *task_cap)
{
    const unsigned char *b = img->buf;
    uint64_t p = off, end = off + len;
    int err;

    while (end - p >= 12) {
        uint32_t namesz = rd32(b + p), descsz = rd32(b + p + 4), type = rd32(b + p + 8);
        uint64_t name_off = p + 12;
        uint64_t desc_off = name_off + (((uint64_t)namesz + 3) & ~(uint64_t)3);
        uint64_t next = desc_off + (((uint64_t)descsz + 3) & ~(uint64_t)3);
        const unsigned char *desc = b + desc_off;
        int core_name;

        if (desc_off > end || next > end || next < desc_off)
            break;
        core_name = namesz == 5 && memcmp(b + name_off, "CORE", 5) == 0;
        if (core_name && type == NT_PRSTATUS && descsz >= PRSTATUS_PID_OFF + 4) {
            int32_t tid;
            memcpy(&tid, desc + PRSTATUS_PID_OFF, 4);
            err = add_task(img, (pid_t)tid, task_cap);
            if (err)
                return err;
            /* x86_64: pr_reg (struct user_regs_struct, 27 words) at 112 */
            if (descsz >= PRSTATUS_REG_OFF + PRSTATUS_REG_LEN) {
                img_task_t *t = (img_task_t *)image_task(img, (pid_t)tid);
                if (t != NULL) {
                    memcpy(t->regs, desc + PRSTATUS_REG_OFF, PRSTATUS_REG_LEN);
                    t->has_regs = 1;
                }
            }
        } else if (core_name && type == NT_PRPSINFO &&
                   descsz >= PRPSINFO_FNAME_OFF + PRPSINFO_FNAME_LEN) {
            int32_t pid;
            memcpy(&pid, desc + PRPSINFO_PID_OFF, 4);
            cn->have_psinfo = 1;
            cn->pid = pid > 0 ? (pid_t)pid : 0;
            cn->uid = rd32(desc + PRPSINFO_UID_OFF);
            cn->gid = rd32(desc + PRPSINFO_GID_OFF);
            memcpy(cn->fname, desc + PRPSINFO_FNAME_OFF, PRPSINFO_FNAME_LEN);
            cn->fname[PRPSINFO_FNAME_LEN] = '\0';
        } else if (core_name && type == NT_AUXV) {
            uint64_t k;
            for (k = 0; k + 16 <= descsz; k += 16)
                if (rd64(desc + k) == AT_ENTRY)
                    cn->entry = rd64(desc + k + 8);
        } else if (core_name && type == NT_FILE && cn->nt_file == NULL) {
            cn->nt_file = desc;
            cn->nt_file_len = descsz;
        }
        p = next;
    }
    return REMORA_OK;
}

static int intern_file(image_t *img, const char *path, size_t plen, size_t *cap, size_t *idx)
{
    size_t i;
    char *copy;

    for (i = 0; i < img->nfiles; i++)
        if (strlen(img->files[i].path) == plen && memcmp(img->files[i].path, path, plen) == 0) {
            *idx = i;
            return REMORA_OK;
        }
    if (img->nfiles >= CORE_MAX_FILES)
        return REMORA_ECORRUPT;
    if (img->nfiles == *cap) {
        size_t ncap = *cap ? *cap * 2 : 16;
        img_file_t *nv = realloc(img->files, ncap * sizeof *nv);
        if (nv == NULL)
            return REMORA_ENOMEM;
        img->files = nv;
        *cap = ncap;
    }
    copy = malloc(plen + 1);
    if (copy == NULL)
        return REMORA_ENOMEM;
    memcpy(copy, path, plen);
    copy[plen] = '\0';
    memset(&img->files[img->nfiles], 0, sizeof img->files[0]);
    img->files[img->nfiles].path = copy;
    *idx = img->nfiles++;
    return REMORA_OK;
}

/* NT_FILE: count, page size, count x (start, end, page offset), then count paths. */
static int parse_nt_file(image_t *img, const unsigned char *d, uint64_t len)
{
    uint64_t count, page, k, names, pos;
    size_t cap = 0;
    int err;

    if (d == NULL || len < 16)
        return REMORA_OK;
    count = rd64(d);
    page = rd64(d + 8);
    if (page == 0 || page > (1u << 30) || (page & (page - 1)) != 0)
        return REMORA_ECORRUPT;
    if (count > CORE_MAX_FMAPS || count > (len - 16) / 24)
        return REMORA_ECORRUPT;
    /* gdb writes a "page size" of 1 (offsets in bytes); mappings are at least 4 KiB pages */
    img->page = page < 4096 ? 4096 : page;
    img->fmaps = calloc(count ? count : 1, sizeof *img->fmaps);
    if (img->fmaps == NULL)
        return REMORA_ENOMEM;
    names = 16 + count * 24;
    pos = names;
    for (k = 0; k < count; k++) {
        const unsigned char *e = d + 16 + k * 24;
        const unsigned char *nul;
        uint64_t start = rd64(e), end = rd64(e + 8), pgoff = rd64(e + 16);
        size_t idx;

        if (pos >= len)
            return REMORA_ECORRUPT;
        nul = memchr(d + pos, '\0', (size_t)(len - pos));
        if (nul == NULL)
            return REMORA_ECORRUPT;
        if (pgoff > UINT64_MAX / page) {
            pos = (uint64_t)(nul - d) + 1;
            continue;
        }
        err = intern_file(img, (const char *)d + pos, (size_t)(nul - (d + pos)), &cap, &idx);
        if (err)
            return err;
        img->fmaps[img->nfmaps].start = start;
        img->fmaps[img->nfmaps].end = end;
        img->fmaps[img->nfmaps].offset = pgoff * page;
        img->fmaps[img->nfmaps].file = idx;
        img->nfmaps++;
        pos = (uint64_t)(nul - d) + 1;
    }
    return REMORA_OK;
}

/* Appends a maps line. */
static int put_line(char **text, size_t *len, size_t *cap, const char *line, size_t n)
{
    if (*cap - *len < n + 1) {
        size_t ncap = (*cap + n + 1) * 2;
        char *nt = realloc(*text, ncap);
        if (nt == NULL)
            return REMORA_ENOMEM;
        *text = nt;
        *cap = ncap;
    }
    memcpy(*text + *len, line, n);
    *len += n;
    (*text)[*len] = '\0';
    return REMORA_OK;
}

/* A maps text: one line per segment and per file mapping the segments do not start.
 * Inodes are made up (file index + 1; the core has none) so that files are told apart. */
static int synth_maps(image_t *img)
{
    size_t si = 0, fi = 0, cap = 0;
    char *text = NULL;
    size_t len = 0;
    int err = REMORA_OK;

    while (err == REMORA_OK && (si < img->nsegs || fi < img->nfmaps)) {
        uint64_t start, end, off = 0, inode = 0;
        const char *path = "";
        char perms[5] = "r--p";
        const img_fmap_t *f = NULL;
        char line[160];
        int n;

        if (si < img->nsegs && (fi >= img->nfmaps || img->segs[si].start <= img->fmaps[fi].start)) {
            uint32_t fl = img->segs[si].flags;
            start = img->segs[si].start;
            end = img->segs[si].end;
            perms[0] = fl & PF_R ? 'r' : '-';
            perms[1] = fl & PF_W ? 'w' : '-';
            perms[2] = fl & PF_X ? 'x' : '-';
            if (fi < img->nfmaps && img->fmaps[fi].start == start)
                f = &img->fmaps[fi++];
            si++;
        } else {
            f = &img->fmaps[fi++];
            start = f->start;
            end = f->end;
        }
        if (f != NULL) {
            off = f->offset;
            inode = f->file + 1;
            path = img->files[f->file].path;
            if (strchr(path, '\n') != NULL)
                path = "";
        }
        n = snprintf(line, sizeof line, "%llx-%llx %s %08llx 00:00 %llu%s",
                     (unsigned long long)start, (unsigned long long)end, perms,
                     (unsigned long long)off, path[0] ? (unsigned long long)inode : 0ull,
                     path[0] ? "    " : "");
        err = put_line(&text, &len, &cap, line, (size_t)n);
        if (!err && path[0])
            err = put_line(&text, &len, &cap, path, strlen(path));
        if (!err)
            err = put_line(&text, &len, &cap, "\n", 1);
    }
    if (err) {
        free(text);
        return err;
    }
    img->maps_text = text ? text : calloc(1, 1);
    img->maps_len = len;
    return img->maps_text ? REMORA_OK : REMORA_ENOMEM;
}

/* Parses a core file's bytes (owned by img: img->buf) into img. Returns 0,
 * REMORA_ENOTPY (not a 64-bit little-endian ELF core), REMORA_ECORRUPT, REMORA_ENOMEM. */
static int core_parse(image_t *img, pid_t *pid)
{
    const unsigned char *b = img->buf;
    uint64_t phoff;
    uint16_t phnum, phentsize;
    core_notes_t cn;
    size_t i, task_cap = 0;
    int err = REMORA_OK;

    memset(&cn, 0, sizeof cn);
    *pid = 0;
    if (img->len < sizeof(Elf64_Ehdr) || memcmp(b, ELFMAG, SELFMAG) != 0 ||
        b[EI_CLASS] != ELFCLASS64 || b[EI_DATA] != ELFDATA2LSB)
        return REMORA_ENOTPY;
    {
        uint16_t type;
        memcpy(&type, b + offsetof(Elf64_Ehdr, e_type), 2);
        if (type != ET_CORE)
            return REMORA_ENOTPY;
    }
    memcpy(&phoff, b + offsetof(Elf64_Ehdr, e_phoff), 8);
    memcpy(&phentsize, b + offsetof(Elf64_Ehdr, e_phentsize), 2);
    memcpy(&phnum, b + offsetof(Elf64_Ehdr, e_phnum), 2);
    if (phentsize != sizeof(Elf64_Phdr) || !in_buf(img->len, phoff, (uint64_t)phnum * sizeof(Elf64_Phdr)))
        return REMORA_ECORRUPT;

    img->segs = calloc(phnum ? phnum : 1, sizeof *img->segs);
    if (img->segs == NULL)
        return REMORA_ENOMEM;
    for (i = 0; i < phnum && err == REMORA_OK; i++) {
        Elf64_Phdr ph;
        memcpy(&ph, b + phoff + i * sizeof ph, sizeof ph);
        if (ph.p_type == PT_NOTE) {
            if (in_buf(img->len, ph.p_offset, ph.p_filesz))
                err = parse_notes(img, ph.p_offset, ph.p_filesz, &cn, &task_cap);
        } else if (ph.p_type == PT_LOAD && ph.p_memsz > 0 && ph.p_vaddr + ph.p_memsz > ph.p_vaddr) {
            img_seg_t *s = &img->segs[img->nsegs];
            uint64_t held = ph.p_filesz < ph.p_memsz ? ph.p_filesz : ph.p_memsz;
            /* a truncated core holds less than it says */
            if (ph.p_offset >= img->len)
                held = 0;
            else if (held > img->len - ph.p_offset)
                held = img->len - ph.p_offset;
            s->start = ph.p_vaddr;
            s->end = ph.p_vaddr + ph.p_memsz;
            s->data = held ? b + ph.p_offset : NULL;
            s->data_len = held;
            s->flags = ph.p_flags;
            img->nsegs++;
        }
    }
    if (!err)
        err = parse_nt_file(img, cn.nt_file, cn.nt_file_len);
    if (err)
        return err;
    image_seal(img);
    err = synth_maps(img);
    if (err)
        return err;

    /* the executable: the file mapped at the entry point */
    if (cn.entry != 0) {
        for (i = 0; i < img->nfmaps; i++)
            if (cn.entry >= img->fmaps[i].start && cn.entry < img->fmaps[i].end) {
                img->exe_file = img->fmaps[i].file;
                break;
            }
    }
    if (img->exe_file == (size_t)-1 && img->nfmaps > 0)
        img->exe_file = img->fmaps[0].file;

    if (cn.have_psinfo) {
        img->have_ids = 1;          /* its sources are read as its own user (source.c) */
        img->uid = cn.uid;
        img->gid = cn.gid;
    }
    if (cn.have_psinfo && cn.pid > 0) {
        *pid = cn.pid;
    } else {
        /* no NT_PRPSINFO: the thread group leader usually has the smallest id */
        for (i = 0; i < img->ntasks; i++)
            if (*pid == 0 || img->tasks[i].tid < *pid)
                *pid = img->tasks[i].tid;
    }
    /* the core keeps the process's comm only (NT_PRPSINFO's fname): the main thread's */
    for (i = 0; i < img->ntasks; i++) {
        img->tasks[i].has_comm = 1;
        if (img->tasks[i].tid == *pid && cn.have_psinfo)
            snprintf(img->tasks[i].name, sizeof img->tasks[i].name, "%s", cn.fname);
    }
    return REMORA_OK;
}

/* Parses img (its buf filled) as a core; frees it on failure. */
static int open_core_image(image_t *img, const char *exe, const char *root, pid_t *pid)
{
    int err;

    if ((exe != NULL && (img->exe = strdup(exe)) == NULL) ||
        (root != NULL && (img->root = strdup(root)) == NULL)) {
        image_free(img);
        return REMORA_ENOMEM;
    }
    if (img->root != NULL) {
        size_t rl = strlen(img->root);
        while (rl > 1 && img->root[rl - 1] == '/')
            img->root[--rl] = '\0';
        if (strcmp(img->root, "/") == 0) {
            free(img->root);
            img->root = NULL;
        }
    }
    err = core_parse(img, pid);
    if (err)
        image_free(img);
    return err;
}

int core_open(const char *core, const char *exe, const char *root, image_t **out, pid_t *pid)
{
    image_t *img;
    struct stat st;
    const char *kind;
    void *m;
    int fd, err;

    *out = NULL;
    /* a FIFO would block the open for ever, a device never end */
    fd = remora_input_open(core, &kind);
    if (fd < 0)
        return kind != NULL ? REMORA_EUSAGE : proc_err_from_errno(errno);
    if (fstat(fd, &st) != 0) {
        close(fd);
        return REMORA_EIO;
    }
    if (st.st_size < (off_t)sizeof(Elf64_Ehdr)) {
        close(fd);
        return REMORA_ENOTPY;
    }
    m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED)
        return REMORA_EIO;
    img = image_new();
    if (img == NULL) {
        munmap(m, (size_t)st.st_size);
        return REMORA_ENOMEM;
    }
    img->buf = m;
    img->len = (size_t)st.st_size;
    img->buf_mapped = 1;
    if ((err = open_core_image(img, exe, root, pid)) == REMORA_OK)
        *out = img;
    return err;
}

#ifdef REMORA_TESTING
int core_open_mem(const void *buf, size_t len, const char *exe, const char *root,
                  image_t **out, pid_t *pid)
{
    image_t *img = image_new();
    int err;

    *out = NULL;
    if (img == NULL)
        return REMORA_ENOMEM;
    img->buf = malloc(len ? len : 1);
    if (img->buf == NULL) {
        image_free(img);
        return REMORA_ENOMEM;
    }
    if (len)
        memcpy(img->buf, buf, len);
    img->len = len;
    if ((err = open_core_image(img, exe, root, pid)) == REMORA_OK)
        *out = img;
    return err;
}
#endif
