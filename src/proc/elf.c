/* proc/elf.c — symbols and sections of the ELF files a target maps.
 *
 * The file is mapped read-only and treated as untrusted: every header, table and
 * string is bounds-checked against the file size before it is used.
 * Test builds (REMORA_TESTING) only: a trace (elf_trace_t) remembers what was looked up
 * in a file and what it answered, to write a small stub ELF file into a snapshot that
 * answers the same.
 */

#include <elf.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "remora.h"
#include "proc.h"
#include "proc_internal.h"

#ifdef REMORA_TESTING
static void trace_lookup(elf_trace_t *t, const char *name, int section, uint64_t value, uint64_t size);
#endif

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
#ifdef REMORA_TESTING
    elf_trace_t *trace;         /* lookups are written here, if not NULL */
#endif
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
#ifdef REMORA_TESTING
    if (e->trace != NULL)
        trace_lookup(e->trace, name, 1, s->sh_addr, s->sh_size);
#endif
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
    uint64_t v, sz;

    if (lookup_in(e, SHT_DYNSYM, name, &v, &sz) != REMORA_OK &&
        lookup_in(e, SHT_SYMTAB, name, &v, &sz) != REMORA_OK)
        return REMORA_ENOTPY;
    *value = v;
    if (size)
        *size = sz;
#ifdef REMORA_TESTING
    if (e->trace != NULL)
        trace_lookup(e->trace, name, 0, v, sz);
#endif
    return REMORA_OK;
}

#ifdef REMORA_TESTING
const void *elf_at(const elf_t *e, uint64_t addr, size_t len)
{
    uint64_t off;
    size_t i;

    for (i = 0; i < e->phnum; i++) {
        const Elf64_Phdr *p = &e->ph[i];
        if (p->p_type != PT_LOAD || addr < p->p_vaddr)
            continue;
        if (addr - p->p_vaddr > p->p_filesz || len > p->p_filesz - (addr - p->p_vaddr))
            continue;
        off = p->p_offset + (addr - p->p_vaddr);
        if (off < p->p_offset || !in_file(e, off, len))    /* wrapped, or past the file */
            return NULL;
        return e->buf + off;
    }
    return NULL;
}
#endif

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

/* ---- traces and stubs ------------------------------------------------------------- */

#ifdef REMORA_TESTING

#define TRACE_MAX_ITEMS 256
#define TRACE_MAX_PH 64
#define TRACE_MAX_NAME 256
#define TRACE_MAX_STRINGS 4096      /* bytes of version strings kept */
#define TRACE_MAX_VERSION 16        /* "NNN.NNN.NNN" and its NUL */

typedef struct trace_item {
    char name[TRACE_MAX_NAME];
    int section;
    uint64_t value, size;
} trace_item_t;

struct elf_trace {
    Elf64_Ehdr eh;
    Elf64_Phdr ph[TRACE_MAX_PH];
    size_t phnum;
    trace_item_t items[TRACE_MAX_ITEMS];
    size_t nitems;
    unsigned char strings[TRACE_MAX_STRINGS];
    size_t strings_len;
};

/* Is a NUL-terminated "D+.D+.D+" at b[i]? Returns its length with the NUL, or 0. */
static size_t version_at(const unsigned char *b, size_t len, size_t i)
{
    size_t j = i;
    int part;

    if (i > 0 && ((b[i - 1] >= '0' && b[i - 1] <= '9') || b[i - 1] == '.'))
        return 0;
    for (part = 0; part < 3; part++) {
        size_t d = j;
        while (j < len && j - i < TRACE_MAX_VERSION && b[j] >= '0' && b[j] <= '9')
            j++;
        if (j == d || j >= len)
            return 0;
        if (part < 2) {
            if (b[j] != '.')
                return 0;
            j++;
        }
    }
    if (j >= len || b[j] != '\0' || j - i + 1 > TRACE_MAX_VERSION)
        return 0;
    return j - i + 1;
}

elf_trace_t *elf_trace_new(const elf_t *e)
{
    elf_trace_t *t = calloc(1, sizeof *t);
    size_t i;

    if (t == NULL)
        return NULL;
    memcpy(&t->eh, e->buf, sizeof t->eh);
    for (i = 0; i < e->phnum && t->phnum < TRACE_MAX_PH; i++)
        if (e->ph[i].p_type == PT_LOAD)
            t->ph[t->phnum++] = e->ph[i];
    /* every version string, in file order, each after a NUL */
    for (i = 0; i < e->len; i++) {
        size_t n;
        if (e->buf[i] < '0' || e->buf[i] > '9')
            continue;
        n = version_at(e->buf, e->len, i);
        if (n == 0)
            continue;
        if (t->strings_len + n + 1 > TRACE_MAX_STRINGS)
            break;
        t->strings[t->strings_len++] = '\0';
        memcpy(t->strings + t->strings_len, e->buf + i, n);
        t->strings_len += n;
        i += n - 1;
    }
    return t;
}

void elf_trace_free(elf_trace_t *t)
{
    free(t);
}

void elf_trace_attach(elf_t *e, elf_trace_t *t)
{
    e->trace = t;
}

static void trace_lookup(elf_trace_t *t, const char *name, int section, uint64_t value, uint64_t size)
{
    size_t i, n = strlen(name);

    if (n == 0 || n >= TRACE_MAX_NAME)
        return;
    for (i = 0; i < t->nitems; i++)
        if (t->items[i].section == section && strcmp(t->items[i].name, name) == 0)
            return;
    if (t->nitems == TRACE_MAX_ITEMS)
        return;
    memcpy(t->items[t->nitems].name, name, n + 1);
    t->items[t->nitems].section = section;
    t->items[t->nitems].value = value;
    t->items[t->nitems].size = size;
    t->nitems++;
}

static size_t align8(size_t n)
{
    return (n + 7) & ~(size_t)7;
}

/* Layout of a stub: header, PT_LOAD headers, version strings (.rodata), .symtab,
 * .strtab, .shstrtab, section headers: null, one SHT_NOBITS header per section looked up
 * (its address and size: first, so a lookup finds it before the stub's own sections of
 * the same name), then .shstrtab, .symtab, .strtab, .rodata. */
int elf_trace_stub(const elf_trace_t *t, unsigned char **out, size_t *len)
{
    size_t nsym = 1, ntraced = 0, nsec, i, k;
    size_t strtab_len = 1, shstr_len = 1;
    size_t off_ph, off_ro, off_sym, off_str, off_shstr, off_sh, total;
    size_t name_shstrtab, name_symtab, name_strtab, name_rodata, own;
    unsigned char *b;
    Elf64_Ehdr eh;
    Elf64_Shdr *sh;

    *out = NULL;
    *len = 0;
    for (i = 0; i < t->nitems; i++) {
        size_t n = strlen(t->items[i].name) + 1;
        if (t->items[i].section) {
            ntraced++;
            shstr_len += n;
        } else {
            nsym++;
            strtab_len += n;
        }
    }
    own = 1 + ntraced;              /* index of the stub's .shstrtab */
    nsec = own + 4;
    name_shstrtab = shstr_len;
    shstr_len += sizeof ".shstrtab";
    name_symtab = shstr_len;
    shstr_len += sizeof ".symtab";
    name_strtab = shstr_len;
    shstr_len += sizeof ".strtab";
    name_rodata = shstr_len;
    shstr_len += sizeof ".rodata";

    off_ph = sizeof(Elf64_Ehdr);
    off_ro = align8(off_ph + t->phnum * sizeof(Elf64_Phdr));
    off_sym = align8(off_ro + t->strings_len);
    off_str = off_sym + nsym * sizeof(Elf64_Sym);
    off_shstr = off_str + strtab_len;
    off_sh = align8(off_shstr + shstr_len);
    total = off_sh + nsec * sizeof(Elf64_Shdr);
    b = calloc(1, total);
    if (b == NULL)
        return REMORA_ENOMEM;

    eh = t->eh;
    eh.e_phoff = off_ph;
    eh.e_phentsize = sizeof(Elf64_Phdr);
    eh.e_phnum = (Elf64_Half)t->phnum;
    eh.e_shoff = off_sh;
    eh.e_shentsize = sizeof(Elf64_Shdr);
    eh.e_shnum = (Elf64_Half)nsec;
    eh.e_shstrndx = (Elf64_Half)own;
    eh.e_ehsize = sizeof(Elf64_Ehdr);
    memcpy(b, &eh, sizeof eh);
    memcpy(b + off_ph, t->ph, t->phnum * sizeof(Elf64_Phdr));
    memcpy(b + off_ro, t->strings, t->strings_len);

    sh = (Elf64_Shdr *)(b + off_sh);
    sh[own].sh_name = (Elf64_Word)name_shstrtab;
    sh[own].sh_type = SHT_STRTAB;
    sh[own].sh_offset = off_shstr;
    sh[own].sh_size = shstr_len;
    sh[own + 1].sh_name = (Elf64_Word)name_symtab;
    sh[own + 1].sh_type = SHT_SYMTAB;
    sh[own + 1].sh_offset = off_sym;
    sh[own + 1].sh_size = nsym * sizeof(Elf64_Sym);
    sh[own + 1].sh_entsize = sizeof(Elf64_Sym);
    sh[own + 1].sh_link = (Elf64_Word)(own + 2);
    sh[own + 1].sh_info = 1;
    sh[own + 2].sh_name = (Elf64_Word)name_strtab;
    sh[own + 2].sh_type = SHT_STRTAB;
    sh[own + 2].sh_offset = off_str;
    sh[own + 2].sh_size = strtab_len;
    sh[own + 3].sh_name = (Elf64_Word)name_rodata;
    sh[own + 3].sh_type = SHT_PROGBITS;
    sh[own + 3].sh_offset = off_ro;
    sh[own + 3].sh_size = t->strings_len;
    memcpy(b + off_shstr + name_shstrtab, ".shstrtab", sizeof ".shstrtab");
    memcpy(b + off_shstr + name_symtab, ".symtab", sizeof ".symtab");
    memcpy(b + off_shstr + name_strtab, ".strtab", sizeof ".strtab");
    memcpy(b + off_shstr + name_rodata, ".rodata", sizeof ".rodata");

    {
        size_t sym_i = 1, sec_i = 1, str_at = 1, shstr_at = 1;
        Elf64_Sym *sym = (Elf64_Sym *)(b + off_sym);
        for (k = 0; k < t->nitems; k++) {
            const trace_item_t *it = &t->items[k];
            size_t n = strlen(it->name) + 1;
            if (it->section) {
                sh[sec_i].sh_name = (Elf64_Word)shstr_at;
                sh[sec_i].sh_type = SHT_NOBITS;
                sh[sec_i].sh_addr = it->value;
                sh[sec_i].sh_size = it->size;
                memcpy(b + off_shstr + shstr_at, it->name, n);
                shstr_at += n;
                sec_i++;
            } else {
                sym[sym_i].st_name = (Elf64_Word)str_at;
                sym[sym_i].st_info = ELF64_ST_INFO(STB_GLOBAL, STT_OBJECT);
                sym[sym_i].st_shndx = SHN_ABS;
                sym[sym_i].st_value = it->value;
                sym[sym_i].st_size = it->size;
                memcpy(b + off_str + str_at, it->name, n);
                str_at += n;
                sym_i++;
            }
        }
    }
    *out = b;
    *len = total;
    return REMORA_OK;
}
#endif
