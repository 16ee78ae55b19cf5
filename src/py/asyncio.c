/* py/asyncio.c — where asyncio keeps its tasks in a target, and how a suspended coroutine
 * names what it awaits.
 *
 * 3.14+: the _asyncio module describes its task object and the thread and interpreter
 * fields that list tasks in Py_AsyncioModuleDebugOffsets (13 u64s: task object size,
 * name, awaited_by, is_task, awaited_by_is_set, coro, node; interpreter state size,
 * tasks head; thread state size, running loop, running task, tasks head), in an ELF
 * section named ".AsyncioDebug" (or "AsyncioDebug") of the module's shared object (pyenv, Debian's
 * lib-dynload) or of the interpreter's binary when the module is built in. It is read
 * from the target's memory at the section's loaded address. What the struct does not
 * give are facts of each release's Modules/_asynciomodule.c, Include/internal/
 * pycore_interpframe_structs.h and genobject.c, checked against the running interpreters
 * (tests/functional/async_tests.py): fut_loop right after the object header, fut_state
 * the int just before is_task, a coroutine's frame state 5 bytes before its embedded
 * frame, and where the awaited object lies below the frame's stack pointer.
 * 3.9-3.13 keep their tasks in Python-level registries (a WeakSet and a set in
 * asyncio.tasks) that remora does not read yet.
 */
#include <stdio.h>
#include <string.h>

#include "remora.h"
#include "py.h"

#define AD_FIELDS 13
#define AD_MAX_STRUCT (1u << 20)

/* The section GENERATE_DEBUG_SECTION makes: ".AsyncioDebug" on Linux builds. */
static int debug_section(const elf_t *e, uint64_t *addr, uint64_t *size)
{
    if (elf_section(e, ".AsyncioDebug", addr, size) == REMORA_OK)
        return REMORA_OK;
    return elf_section(e, "AsyncioDebug", addr, size);
}

/* The AsyncioDebug section's loaded address in the first mapped file whose name starts
 * with want_base. 0 or REMORA_ENOTPY. */
static int find_section(proc_t *p, const proc_maps_t *maps, const char *want_base, uint64_t *at)
{
    size_t i;

    for (i = 0; i < maps->n; i++) {
        const proc_map_t *m = &maps->v[i];
        const char *base;
        elf_t *e = NULL;
        uint64_t addr, size, vbase;

        if (m->path == NULL || m->path[0] != '/' || m->offset != 0 || m->inode == 0)
            continue;
        base = strrchr(m->path, '/') + 1;
        if (strncmp(base, want_base, strlen(want_base)) != 0)
            continue;
        if (proc_elf_open(p, m->path, m->inode, &e) != REMORA_OK)
            continue;
        if (debug_section(e, &addr, &size) == REMORA_OK &&
            size >= AD_FIELDS * 8 && elf_base_vaddr(e, &vbase) == REMORA_OK) {
            *at = addr + (m->start - vbase);
            elf_free(e);
            return REMORA_OK;
        }
        elf_free(e);
    }
    return REMORA_ENOTPY;
}

static int fits(uint64_t off, uint64_t width, uint64_t size)
{
    return size != 0 && size <= AD_MAX_STRUCT && off <= size && width <= size - off;
}

int py_asyncio_find(proc_t *p, const py_target_t *t, py_asyncio_t *a, char *why, size_t whylen)
{
    const py_layout_t *L = &t->layout;
    proc_maps_t maps;
    uint64_t f[AD_FIELDS], at = 0;
    size_t i;
    int err;

    memset(a, 0, sizeof *a);
    if (L->minor < 14) {
        snprintf(why, whylen, "asyncio tasks are read on CPython 3.14 and later so far; this target is %s",
                 t->version);
        return REMORA_EVERSION;
    }
    if ((err = proc_maps_read(p, &maps)) != REMORA_OK) {
        snprintf(why, whylen, "cannot read the memory map of pid %d", (int)proc_pid(p));
        return err;
    }
    err = find_section(p, &maps, "_asyncio", &at);
    if (err != REMORA_OK) {
        /* built in: the section is in the interpreter's own binary */
        for (i = 0; i < maps.n && err != REMORA_OK; i++) {
            const proc_map_t *m = &maps.v[i];
            elf_t *e = NULL;
            uint64_t addr, size, vbase;
            if (m->path == NULL || m->offset != 0 || strcmp(m->path, t->binary) != 0)
                continue;
            if (proc_elf_open(p, m->path, m->inode, &e) != REMORA_OK)
                continue;
            if (debug_section(e, &addr, &size) == REMORA_OK &&
                size >= AD_FIELDS * 8 && elf_base_vaddr(e, &vbase) == REMORA_OK) {
                at = addr + (m->start - vbase);
                err = REMORA_OK;
            }
            elf_free(e);
        }
    }
    proc_maps_fini(&maps);
    if (err != REMORA_OK)
        return REMORA_OK;           /* _asyncio not loaded: no task can exist */
    if ((err = proc_read(p, at, f, sizeof f)) != REMORA_OK) {
        snprintf(why, whylen, "cannot read _asyncio's AsyncioDebug section at 0x%llx",
                 (unsigned long long)at);
        return err;
    }
    a->task_size = f[0];
    a->task_name = f[1];
    a->task_awaited_by = f[2];
    a->task_is_task = f[3];
    a->task_awaited_by_is_set = f[4];
    a->task_coro = f[5];
    a->task_node = f[6];
    a->is_tasks_head = f[8];
    a->ts_impl_size = f[9];
    a->ts_running_loop = f[10];
    a->ts_running_task = f[11];
    a->ts_tasks_head = f[12];
    /* FutureObj_HEAD: ob_refcnt, ob_type, fut_loop; ...; fut_awaited_by, fut_state (int),
     * fut_is_task (char) */
    a->task_loop = 16;
    a->task_state = a->task_is_task - 4;
    if (!fits(a->task_name, 8, a->task_size) || !fits(a->task_awaited_by, 8, a->task_size) ||
        !fits(a->task_is_task, 1, a->task_size) || !fits(a->task_awaited_by_is_set, 1, a->task_size) ||
        !fits(a->task_coro, 8, a->task_size) || !fits(a->task_node, 16, a->task_size) ||
        a->task_size > 4096 || a->task_is_task < 24 || a->task_state != a->task_awaited_by + 8 ||
        a->task_node % 8 != 0 || a->task_name % 8 != 0 || a->task_coro % 8 != 0 ||
        !fits(a->is_tasks_head, 16, f[7]) || f[7] != L->is_size ||
        !fits(a->ts_running_loop, 8, a->ts_impl_size) || !fits(a->ts_running_task, 8, a->ts_impl_size) ||
        !fits(a->ts_tasks_head, 16, a->ts_impl_size) || a->ts_impl_size < L->ts_size ||
        a->ts_running_task % 8 != 0 || a->ts_tasks_head % 8 != 0 || a->is_tasks_head % 8 != 0) {
        snprintf(why, whylen, "_asyncio's AsyncioDebug offsets fail their checks (task object of %llu bytes)",
                 (unsigned long long)a->task_size);
        return REMORA_EVERSION;
    }
    /* PyGenObject: ..., gi_frame_state (int8) then, 8-aligned, gi_iframe at 72 (3.14, 3.15);
     * _PyInterpreterFrame: stackpointer at 64. The state while suspended in a yield from:
     * FRAME_SUSPENDED_YIELD_FROM, -1 in 3.14, 2 in 3.15 (whose enum starts at
     * FRAME_CREATED 0); 3.15 leaves a NULL pushed above the awaited object (GET_AWAITABLE,
     * PUSH_NULL), so it lies 16 bytes below the stack pointer, 8 in 3.14. */
    a->gen_iframe = 72;
    a->gen_frame_state = 67;
    a->fr_stackpointer = 64;
    a->gen_yield_from = L->minor == 14 ? -1 : 2;
    a->fr_yf_back = L->minor == 14 ? 8 : 16;
    /* PySetObject: ob_refcnt, ob_type, fill, used, mask, table */
    a->set_mask = 32;
    a->set_table = 40;
    a->found = 1;
    return REMORA_OK;
}
