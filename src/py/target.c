/* py/target.c — find the CPython interpreter in a process and its version.
 *
 * Reads /proc/PID/maps, opens each candidate ELF file (through /proc/PID/root for
 * containers and chroots), finds _PyRuntime (symbol or .PyRuntime section), and reads
 * the version from _Py_DebugOffsets (3.13+), Py_Version (3.11+) or the file itself.
 */

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "remora.h"
#include "py.h"
#include "../util/util.h"

/* "python3.12" or "libpython3.12.so.1.0" → 12; -1 if the name says nothing. 'major' gets 2 or 3. */
static int minor_from_name(const char *path, int *major)
{
    const char *base = strrchr(path, '/');
    const char *s;

    base = base ? base + 1 : path;
    s = strstr(base, "python");
    if (s == NULL)
        return -1;
    s += 6;
    if ((s[0] != '2' && s[0] != '3') || s[1] != '.' || s[2] < '0' || s[2] > '9')
        return -1;
    *major = s[0] - '0';
    if (s[3] >= '0' && s[3] <= '9')
        return (s[2] - '0') * 10 + (s[3] - '0');
    return s[2] - '0';
}

/* Looks for the PY_VERSION string "3.M.P" in the file: NUL-terminated, and not preceded by a
 * digit or a dot (the linker may merge it into the tail of a longer string, such as a
 * build path ending in "Python-3.9.18"). Returns the patch or -1. */
static int patch_from_file(const elf_t *e, int minor)
{
    size_t len, at = 1;
    const unsigned char *b = elf_bytes(e, &len);
    char want[8];
    size_t wl = (size_t)snprintf(want, sizeof want, "3.%d.", minor);

    /* memmem, not a byte loop: this scans a whole libpython (tens of MB) */
    while (at + wl + 2 < len) {
        const unsigned char *hit = memmem(b + at, len - at, want, wl);
        size_t i, j;
        int patch = 0;
        if (hit == NULL)
            break;
        i = (size_t)(hit - b);
        at = i + 1;
        if ((b[i - 1] >= '0' && b[i - 1] <= '9') || b[i - 1] == '.')
            continue;
        for (j = i + wl; j < len && j < i + wl + 3 && b[j] >= '0' && b[j] <= '9'; j++)
            patch = patch * 10 + (b[j] - '0');
        if (j > i + wl && j < len && b[j] == 0)
            return patch;
    }
    return -1;
}

static void version_string(uint32_t hex, char *out, size_t len)
{
    static const char *level[16] = { [0xa] = "a", [0xb] = "b", [0xc] = "rc" };
    unsigned lv = (hex >> 4) & 0xf;

    if (lv == 0xf || level[lv] == NULL)
        snprintf(out, len, "%u.%u.%u", hex >> 24, (hex >> 16) & 0xff, (hex >> 8) & 0xff);
    else
        snprintf(out, len, "%u.%u.%u%s%u", hex >> 24, (hex >> 16) & 0xff, (hex >> 8) & 0xff,
                 level[lv], hex & 0xf);
}

/* Is this mapping a file worth opening? (offset 0, a path, not a device or special name) */
static int candidate(const proc_map_t *m)
{
    return m->path != NULL && m->path[0] == '/' && m->offset == 0 && m->inode != 0;
}

/* The addresses of the type objects and symbols remora compares with (each 0 when the
 * binary lacks it), relocated by bias. */
static void type_symbols(elf_t *e, uint64_t bias, py_target_t *t)
{
    uint64_t sym;

    if (elf_symbol(e, "PyCode_Type", &sym, NULL) == REMORA_OK)
        t->code_type = sym + bias;
    /* 3.12's code-object counter is a file-local symbol: present unless stripped */
    if (elf_symbol(e, "_Py_next_func_version", &sym, NULL) == REMORA_OK)
        t->code_version = sym + bias;
    /* None: an exception slot holding it is empty (sys.exc_info(), 3.9/3.10 mostly) */
    if (elf_symbol(e, "_Py_NoneStruct", &sym, NULL) == REMORA_OK)
        t->none = sym + bias;
    /* the types of what thread names are read through (unwind/thread_names.c) */
    if (elf_symbol(e, "PyUnicode_Type", &sym, NULL) == REMORA_OK)
        t->str_type = sym + bias;
    if (elf_symbol(e, "PyDict_Type", &sym, NULL) == REMORA_OK)
        t->dict_type = sym + bias;
    if (elf_symbol(e, "PyLong_Type", &sym, NULL) == REMORA_OK)
        t->long_type = sym + bias;
    if (elf_symbol(e, "PyModule_Type", &sym, NULL) == REMORA_OK)
        t->module_type = sym + bias;
    /* what a task's coroutine chain is followed through (unwind/tasks.c) */
    if (elf_symbol(e, "PyCoro_Type", &sym, NULL) == REMORA_OK)
        t->coro_type = sym + bias;
    if (elf_symbol(e, "PyGen_Type", &sym, NULL) == REMORA_OK)
        t->gen_type = sym + bias;
    if (elf_symbol(e, "PyAsyncGen_Type", &sym, NULL) == REMORA_OK)
        t->asyncgen_type = sym + bias;
    if (elf_symbol(e, "_PyAsyncGenASend_Type", &sym, NULL) == REMORA_OK)
        t->asend_type = sym + bias;
    if (elf_symbol(e, "_PyAsyncGenAThrow_Type", &sym, NULL) == REMORA_OK)
        t->athrow_type = sym + bias;
    {
        static const struct { const char *name; size_t off; } types[] = {
            { "PyFloat_Type", offsetof(py_target_t, float_type) },
            { "PyBytes_Type", offsetof(py_target_t, bytes_type) },
            { "PyTuple_Type", offsetof(py_target_t, tuple_type) },
            { "PyList_Type", offsetof(py_target_t, list_type) },
            { "PySet_Type", offsetof(py_target_t, set_type) },
            { "PyFrozenSet_Type", offsetof(py_target_t, frozenset_type) },
            { "PyBool_Type", offsetof(py_target_t, bool_type) },
            { "PyCell_Type", offsetof(py_target_t, cell_type) },
            { "PyType_Type", offsetof(py_target_t, type_type) },
        };
        size_t i;
        for (i = 0; i < sizeof types / sizeof types[0]; i++)
            if (elf_symbol(e, types[i].name, &sym, NULL) == REMORA_OK)
                *(uint64_t *)((char *)t + types[i].off) = sym + bias;
    }
}

/* The version of the interpreter in e (mapping m): its _Py_DebugOffsets, Py_Version, or
 * failing both the file's name or the "3.M.P" it holds. 0 with *vers, a proc error, or
 * REMORA_EVERSION with 'why'. */
static int read_version(proc_t *p, elf_t *e, const proc_map_t *m, const py_target_t *t,
                        uint64_t bias, uint64_t *vers, char *why, size_t whylen)
{
    unsigned char head[16];
    uint64_t sym;
    int err, major = 3, minor;

    if ((err = proc_read(p, t->runtime, head, sizeof head)) != REMORA_OK)
        return err;
    if (memcmp(head, "xdebugpy", 8) == 0) {
        memcpy(vers, head + 8, 8);
    } else if (elf_symbol(e, "Py_Version", &sym, NULL) == REMORA_OK) {
        uint32_t v;
        if ((err = proc_read(p, sym + bias, &v, sizeof v)) != REMORA_OK)
            return err;
        *vers = v;
    } else {
        int patch;
        minor = minor_from_name(m->path, &major);
        if (minor < 0) {
            /* renamed binary: find "3.M.P" for a plausible M */
            for (minor = PY_MINOR_LAST; minor >= 0; minor--)
                if (patch_from_file(e, minor) >= 0)
                    break;
        }
        if (minor < 0) {
            snprintf(why, whylen, "found _PyRuntime in %s but cannot tell its Python version", m->path);
            return REMORA_EVERSION;
        }
        patch = patch_from_file(e, minor);
        *vers = (uint64_t)major << 24 | (uint64_t)minor << 16 | (uint64_t)(patch < 0 ? 0 : patch) << 8 | 0xf0;
    }
    return REMORA_OK;
}

/* t's layout for release 3.minor (version vers): from its _Py_DebugOffsets, or built
 * in. 0, a proc error, or REMORA_EVERSION with 'why'. */
static int set_layout(proc_t *p, py_target_t *t, int minor, uint64_t vers, char *why, size_t whylen)
{
    int err;

    if (minor >= PY_MINOR_DEBUG) {
        err = py_layout_from_debug_offsets(p, t->runtime, &t->layout, why, whylen);
        if (err)
            return err;
    } else {
        const py_layout_t *L = py_layout_for_minor(minor);
        if (L == NULL || L->minor != minor) {
            snprintf(why, whylen, "Python %s: no layout built into remora", t->version);
            return REMORA_EVERSION;
        }
        t->layout = *L;
        t->layout.hexversion = (uint32_t)vers;
    }
    py_layout_derive(&t->layout);
    return REMORA_OK;
}

static int try_file(proc_t *p, const proc_maps_t *maps, size_t at, py_target_t *t,
                    char *why, size_t whylen, int *found_old)
{
    const proc_map_t *m = &maps->v[at];
    elf_t *e = NULL;
    uint64_t sym, size, base, bias, vers;
    int err, major = 3, minor, name_minor;

    /* any source: live (through /proc/PID/root), core (the host's file), snapshot */
    if (proc_elf_open(p, m->path, m->inode, &e) != REMORA_OK)
        return REMORA_ENOTPY;
    if (elf_symbol(e, "_PyRuntime", &sym, &size) != REMORA_OK &&
        elf_section(e, ".PyRuntime", &sym, &size) != REMORA_OK) {
        /* Python 2 has no _PyRuntime; remember it to say so */
        name_minor = minor_from_name(m->path, &major);
        if (name_minor >= 0 && elf_symbol(e, "Py_Initialize", &sym, NULL) == REMORA_OK) {
            *found_old = 1;
            snprintf(why, whylen, "Python %d.%d (%s) is not supported: remora reads " PY_READS_TEXT,
                     major, name_minor, m->path);
        }
        elf_free(e);
        return REMORA_ENOTPY;
    }
    if (elf_base_vaddr(e, &base) != REMORA_OK) {
        elf_free(e);
        return REMORA_ENOTPY;
    }
    bias = m->start - base;
    memset(t, 0, sizeof *t);
    t->runtime = sym + bias;
    snprintf(t->binary, sizeof t->binary, "%s", m->path);
    type_symbols(e, bias, t);
    err = read_version(p, e, m, t, bias, &vers, why, whylen);
    elf_free(e);
    if (err)
        return err;

    version_string((uint32_t)vers, t->version, sizeof t->version);
    major = (int)(vers >> 24);
    minor = (int)((vers >> 16) & 0xff);
    if (major != 3 || minor < PY_MINOR_FIRST || minor > PY_MINOR_LAST) {
        snprintf(why, whylen, "Python %s (%s) is not supported: remora reads " PY_READS_TEXT,
                 t->version, t->binary);
        return REMORA_EVERSION;
    }
    return set_layout(p, t, minor, vers, why, whylen);
}

/* Whether a live target has exited (or is exiting: a zombie): its mappings go as it dies,
 * so a map read then names no interpreter, and the process is gone, not of another kind. */
static int exited(proc_t *p)
{
    char state = 0;
    int err;

    if (proc_kind(p) != PROC_LIVE)
        return 0;
    err = proc_task_state(p, proc_pid(p), &state);
    return err == REMORA_ENOPROC || (err == REMORA_OK && (state == 'Z' || state == 'X'));
}

int py_target_find(proc_t *p, py_target_t *t, char *why, size_t whylen)
{
    proc_maps_t maps;
    int err, pass, found_old = 0, none;
    size_t i;

    snprintf(why, whylen, "no CPython interpreter found");
    err = proc_maps_read(p, &maps);
    if (err) {
        snprintf(why, whylen, "cannot read the memory map of pid %d: %s", (int)proc_pid(p), remora_strerror(err));
        return err;
    }
    /* pass 0: libpython; pass 1: files named like python; pass 2: the rest (embedders) */
    for (pass = 0; pass < 3; pass++) {
        for (i = 0; i < maps.n; i++) {
            const proc_map_t *m = &maps.v[i];
            const char *base;
            size_t j;
            int seen = 0;

            if (!candidate(m))
                continue;
            base = strrchr(m->path, '/') + 1;
            if ((pass == 0) != (strncmp(base, "libpython", 9) == 0))
                continue;
            if (pass == 1 && strstr(base, "python") == NULL)
                continue;
            if (pass == 2 && (strstr(base, "python") != NULL || strncmp(base, "ld-", 3) == 0 ||
                              strncmp(base, "libc.", 5) == 0 || strncmp(base, "libm.", 5) == 0))
                continue;
            for (j = 0; j < i && !seen; j++)
                seen = maps.v[j].inode == m->inode && maps.v[j].offset == 0 &&
                       maps.v[j].dev_major == m->dev_major && maps.v[j].dev_minor == m->dev_minor;
            if (seen)
                continue;
            err = try_file(p, &maps, i, t, why, whylen, &found_old);
            if (err != REMORA_ENOTPY) {
                proc_maps_fini(&maps);
                return err;
            }
        }
    }
    /* no mapping at all: a process's memory goes at once as it exits (a kernel thread,
     * which has none either, is refused by proc_open) */
    none = maps.n == 0 && proc_kind(p) == PROC_LIVE;
    proc_maps_fini(&maps);
    if (found_old)
        return REMORA_EVERSION;
    if (none || exited(p)) {
        snprintf(why, whylen, "pid %d exited while remora looked for its interpreter", (int)proc_pid(p));
        return REMORA_ENOPROC;
    }
    snprintf(why, whylen, "pid %d is not a CPython process (no _PyRuntime in any mapped file)", (int)proc_pid(p));
    return REMORA_ENOTPY;
}
