/* tests/unit/unit_proc.c — unit tests of proc/: the /proc parsers (maps.c, task.c), the
 * ELF reader (elf.c) over this program's own file, and the report's source cache
 * (source.c). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "remora.h"
#include "proc/proc.h"
#include "unit.h"

/* ---- /proc parsers ---- */

void test_maps(void)
{
    char text[] =
        "00400000-00452000 r-xp 00000000 08:02 173521      /usr/bin/python3.11\n"
        "7f0000000000-7f0000021000 rw-p 00000000 00:00 0 \n"
        "7f1000000000-7f1000001000 r--p 00001000 fd:01 42   /path with spaces/lib.so (deleted)\n"
        "garbage line\n"
        "ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]\n"
        "1000-2000 r--p 0 0:0 1 /no/newline";
    proc_maps_t m;

    CHECK(proc_maps_parse(text, strlen(text), 100, &m) == 0, "parse");
    CHECK(m.n == 4, "4 valid lines, got %zu", m.n);
    if (m.n == 4) {
        CHECK(m.v[0].start == 0x400000 && m.v[0].end == 0x452000, "range");
        CHECK(strcmp(m.v[0].perms, "r-xp") == 0, "perms");
        CHECK(m.v[0].inode == 173521 && m.v[0].dev_major == 8 && m.v[0].dev_minor == 2, "dev/inode");
        CHECK(strcmp(m.v[0].path, "/usr/bin/python3.11") == 0, "path");
        CHECK(m.v[1].path == NULL, "anonymous has no path");
        CHECK(strcmp(m.v[2].path, "/path with spaces/lib.so (deleted)") == 0, "path with spaces");
        CHECK(m.v[2].offset == 0x1000, "offset");
        CHECK(strcmp(m.v[3].path, "[vsyscall]") == 0, "pseudo path");
    }
    free(m.v);
    {
        char small[] = "1000-2000 r--p 0 0:0 1 /a\n3000-4000 r--p 0 0:0 1 /b\n";
        CHECK(proc_maps_parse(small, strlen(small), 1, &m) == 0 && m.n == 1, "max entries");
        free(m.v);
    }
    {
        char over[] = "1-0 r--p 0 0:0 1 /a\n11111111111111111-2 r--p 0 0:0 1 /b\n";
        CHECK(proc_maps_parse(over, strlen(over), 10, &m) == 0 && m.n == 0, "end<start and overflow rejected");
        free(m.v);
    }
}

void test_stat(void)
{
    const char *s1 = "1234 (python3) R 1 2 3";
    const char *s2 = "1234 (evil) S (name) D 1";
    const char *s3 = "1234 (unterminated";
    char st = 0;

    CHECK(proc_stat_parse_state(s1, strlen(s1), &st) == 0 && st == 'R', "plain");
    CHECK(proc_stat_parse_state(s2, strlen(s2), &st) == 0 && st == 'D', "comm with parens");
    CHECK(proc_stat_parse_state(s3, strlen(s3), &st) != 0, "malformed");
}

/* ---- ELF ---- */

const char unit_marker[] = "remora-unit-marker";

void test_elf(void)
{
    int fd = open("/proc/self/exe", O_RDONLY);
    elf_t *e = NULL;
    uint64_t v = 0, size = 0, base = 1;
    const char *bytes;

    CHECK(fd >= 0 && elf_open_fd(fd, &e) == 0, "open self");
    if (e == NULL)
        return;
    CHECK(elf_symbol(e, "unit_marker", &v, &size) == 0, "symbol found");
    CHECK(size == sizeof unit_marker, "symbol size %llu", (unsigned long long)size);
    bytes = elf_at(e, v, sizeof unit_marker);
    CHECK(bytes != NULL && memcmp(bytes, unit_marker, sizeof unit_marker) == 0, "bytes at symbol");
    CHECK(elf_symbol(e, "no_such_symbol_anywhere", &v, NULL) != 0, "absent symbol");
    CHECK(elf_section(e, ".text", &v, &size) == 0 && size > 0, ".text section");
    CHECK(elf_base_vaddr(e, &base) == 0, "base vaddr");
    {
        /* every truncation of the file is handled without reading past it */
        size_t len, cut;
        const unsigned char *all = elf_bytes(e, &len);
        for (cut = 0; cut < len && cut < 200000; cut += cut < 4096 ? 61 : 4093) {
            unsigned char *t = malloc(cut ? cut : 1);
            elf_t *te = NULL;
            memcpy(t, all, cut);
            if (elf_open_mem(t, cut, &te) == 0) {
                (void)elf_symbol(te, "unit_marker", &v, NULL);
                (void)elf_section(te, ".PyRuntime", &v, &size);
                elf_free(te);
            }
            free(t);
        }
        CHECK(1, "truncations");
    }
    {
        unsigned char junk[256];
        elf_t *te = NULL;
        memset(junk, 0x41, sizeof junk);
        CHECK(elf_open_mem(junk, sizeof junk, &te) == REMORA_ENOTPY, "not an ELF");
    }
    elf_free(e);
}

/* ---- source files: the report's cache (source.c) ---- */

void test_source_cache(void)
{
    char dir[] = "/tmp/remora-unit-src-XXXXXX", path[128], alias[160];
    const proc_src_t *a, *b, *s;
    const char *name, *why;
    proc_src_cache_t *c;
    proc_src_t one;
    proc_t *p = NULL;
    size_t len;
    FILE *f;

    /* no process (convert): nothing is opened, and that is said once */
    CHECK(proc_source_read(NULL, "/etc/passwd", &one) == 0 && one.state == PROC_SRC_NO_PROCESS &&
          one.text == NULL, "no process: no file opened");
    proc_src_free(&one);
    c = proc_src_cache_new(NULL);
    CHECK(c != NULL, "cache");
    if (c == NULL)
        return;
    a = proc_src_cache_get(c, "/etc/passwd");
    b = proc_src_cache_get(c, "/etc/passwd");
    s = proc_src_cache_get(c, "<string>");
    CHECK(a != NULL && a == b && a->state == PROC_SRC_NO_PROCESS, "cache without a process");
    CHECK(s != NULL && s->state == PROC_SRC_NAMELESS, "<string>: no file");
    CHECK(proc_src_cache_unread(c, 0, &name, &why) == 0 && strcmp(name, "/etc/passwd") == 0 &&
          strstr(why, "no process") != NULL && proc_src_cache_unread(c, 1, &name, &why) == -1,
          "unread: the name once, <string> not listed");
    proc_src_cache_free(c);

    /* a live process (this one): one file under two spellings is one entry */
    if (mkdtemp(dir) == NULL || proc_open(getpid(), &p) != 0) {
        CHECK(0, "temp dir or proc_open of self");
        return;
    }
    snprintf(path, sizeof path, "%s/f.py", dir);
    snprintf(alias, sizeof alias, "%s/././/f.py", dir);
    if ((f = fopen(path, "w")) != NULL) {
        fputs("first = 1\n  second = 2  \n", f);
        fclose(f);
    }
    c = proc_src_cache_new(p);
    a = c ? proc_src_cache_get(c, path) : NULL;
    b = c ? proc_src_cache_get(c, alias) : NULL;
    CHECK(a != NULL && a == b && a->state == PROC_SRC_OK, "one file, two spellings: one entry");
    s = a != NULL ? a : &one;
    CHECK(a != NULL && proc_src_line(s, 2, &len) != NULL && len == 10, "its line 2");
    CHECK(proc_src_cache_unread(c, 0, &name, &why) == -1, "nothing unread");
    proc_src_cache_free(c);
    proc_free(p);
    unlink(path);
    rmdir(dir);
}
