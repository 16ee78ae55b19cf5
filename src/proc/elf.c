/* proc/elf.c — symbols and sections of the ELF files a target maps.
 *
 * The file is mapped read-only and treated as untrusted: every header, table and
 * string is bounds-checked against the file size before it is used.
 */

#include <elf.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "remora.h"
#include "proc.h"

struct elf {
    const unsigned char *buf;
    size_t len;
    int mapped;                 /* buf is an mmap of the file */
    const Elf64_Shdr *sh;       /* section headers, NULL if none usable */
    size_t shnum;
    const char *shstr;          /* section name table */
    size_t shstr_len;
    const Elf64_Phdr *ph;
    size_t phnum;
};

static int in_file(const elf_t *e, uint64_t off, uint64_t len)
{
    return off <= e->len && len <= e->len - off;
}

static int elf_setup(elf_t *e)
{
    const Elf64_Ehdr *h;

    if (e->len < sizeof(Elf64_Ehdr))
        return REMORA_ENOTPY;
    h = (const Elf64_Ehdr *)e->buf;
    if (memcmp(h->e_ident, ELFMAG, SELFMAG) != 0 || h->e_ident[EI_CLASS] != ELFCLASS64 ||
        h->e_ident[EI_DATA] != ELFDATA2LSB)
        return REMORA_ENOTPY;
    if (h->e_phentsize == sizeof(Elf64_Phdr) && h->e_phoff % 8 == 0 &&
        in_file(e, h->e_phoff, (uint64_t)h->e_phnum * sizeof(Elf64_Phdr))) {
        e->ph = (const Elf64_Phdr *)(e->buf + h->e_phoff);
        e->phnum = h->e_phnum;
    }
    if (h->e_shentsize == sizeof(Elf64_Shdr) && h->e_shoff % 8 == 0 && h->e_shnum > 0 &&
        in_file(e, h->e_shoff, (uint64_t)h->e_shnum * sizeof(Elf64_Shdr))) {
        const Elf64_Shdr *sh = (const Elf64_Shdr *)(e->buf + h->e_shoff);
        e->sh = sh;
        e->shnum = h->e_shnum;
        if (h->e_shstrndx < h->e_shnum && sh[h->e_shstrndx].sh_type == SHT_STRTAB &&
            in_file(e, sh[h->e_shstrndx].sh_offset, sh[h->e_shstrndx].sh_size)) {
            e->shstr = (const char *)e->buf + sh[h->e_shstrndx].sh_offset;
            e->shstr_len = sh[h->e_shstrndx].sh_size;
        }
    }
    return REMORA_OK;
}

int elf_open_mem(const void *buf, size_t len, elf_t **out)
{
    elf_t *e = calloc(1, sizeof *e);
    int err;

    *out = NULL;
    if (e == NULL)
        return REMORA_ENOMEM;
    e->buf = buf;
    e->len = len;
    err = elf_setup(e);
    if (err) {
        free(e);
        return err;
    }
    *out = e;
    return REMORA_OK;
}

int elf_open_fd(int fd, elf_t **out)
{
    struct stat st;
    void *m;
    int err;

    *out = NULL;
    if (fstat(fd, &st) != 0 || st.st_size <= 0) {
        close(fd);
        return REMORA_EIO;
    }
    m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED)
        return REMORA_EIO;
    err = elf_open_mem(m, (size_t)st.st_size, out);
    if (err) {
        munmap(m, (size_t)st.st_size);
        return err;
    }
    (*out)->mapped = 1;
    return REMORA_OK;
}

void elf_free(elf_t *e)
{
    if (e == NULL)
        return;
    if (e->mapped)
        munmap((void *)e->buf, e->len);
    free(e);
}

/* The NUL-terminated string at 'off' of a string table of 'len' bytes, or NULL. */
static const char *str_at(const char *tab, size_t len, uint64_t off)
{
    if (tab == NULL || off >= len || memchr(tab + off, '\0', len - off) == NULL)
        return NULL;
    return tab + off;
}

static const Elf64_Shdr *find_section(const elf_t *e, const char *name)
{
    size_t i;

    for (i = 0; i < e->shnum; i++) {
        const char *n = str_at(e->shstr, e->shstr_len, e->sh[i].sh_name);
        if (n != NULL && strcmp(n, name) == 0)
            return &e->sh[i];
    }
    return NULL;
}

int elf_section(const elf_t *e, const char *name, uint64_t *addr, uint64_t *size)
{
    const Elf64_Shdr *s = find_section(e, name);

    if (s == NULL)
        return REMORA_ENOTPY;
    *addr = s->sh_addr;
    *size = s->sh_size;
    return REMORA_OK;
}

static int lookup_in(const elf_t *e, unsigned type, const char *name, uint64_t *value, uint64_t *size)
{
    size_t i;

    for (i = 0; i < e->shnum; i++) {
        const Elf64_Shdr *s = &e->sh[i];
        const Elf64_Shdr *strs;
        const Elf64_Sym *syms;
        const char *tab;
        size_t n, k;

        if (s->sh_type != type || s->sh_entsize != sizeof(Elf64_Sym) || s->sh_link >= e->shnum)
            continue;
        strs = &e->sh[s->sh_link];
        if (!in_file(e, s->sh_offset, s->sh_size) || !in_file(e, strs->sh_offset, strs->sh_size) ||
            s->sh_offset % 8 != 0)
            continue;
        syms = (const Elf64_Sym *)(e->buf + s->sh_offset);
        tab = (const char *)e->buf + strs->sh_offset;
        n = s->sh_size / sizeof(Elf64_Sym);
        for (k = 0; k < n; k++) {
            const char *sn;
            if (syms[k].st_shndx == SHN_UNDEF || syms[k].st_value == 0)
                continue;
            sn = str_at(tab, strs->sh_size, syms[k].st_name);
            if (sn != NULL && strcmp(sn, name) == 0) {
                *value = syms[k].st_value;
                if (size)
                    *size = syms[k].st_size;
                return REMORA_OK;
            }
        }
    }
    return REMORA_ENOTPY;
}

int elf_symbol(const elf_t *e, const char *name, uint64_t *value, uint64_t *size)
{
    if (lookup_in(e, SHT_DYNSYM, name, value, size) == REMORA_OK)
        return REMORA_OK;
    return lookup_in(e, SHT_SYMTAB, name, value, size);
}

const void *elf_at(const elf_t *e, uint64_t addr, size_t len)
{
    size_t i;

    for (i = 0; i < e->phnum; i++) {
        const Elf64_Phdr *p = &e->ph[i];
        if (p->p_type != PT_LOAD || addr < p->p_vaddr)
            continue;
        if (addr - p->p_vaddr > p->p_filesz || len > p->p_filesz - (addr - p->p_vaddr))
            continue;
        if (!in_file(e, p->p_offset + (addr - p->p_vaddr), len))
            return NULL;
        return e->buf + p->p_offset + (addr - p->p_vaddr);
    }
    return NULL;
}

int elf_base_vaddr(const elf_t *e, uint64_t *vaddr)
{
    size_t i;

    for (i = 0; i < e->phnum; i++) {
        const Elf64_Phdr *p = &e->ph[i];
        if (p->p_type == PT_LOAD) {
            /* the first PT_LOAD maps file offset 0 (page-aligned) */
            *vaddr = (p->p_vaddr - p->p_offset) & ~(uint64_t)0xfff;
            return REMORA_OK;
        }
    }
    return REMORA_ENOTPY;
}

const unsigned char *elf_bytes(const elf_t *e, size_t *len)
{
    *len = e->len;
    return e->buf;
}
