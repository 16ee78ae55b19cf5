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
 * asyncio.tasks, read by unwind/tasks.c through the objects themselves); what is known
 * here is the C task object (task_size, fut_state, task_fut_waiter, task_coro, task_name:
 * FutureObj_HEAD and TaskObj of each release) and how a coroutine's frame is found and
 * names what it awaits.
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

/* The C TaskObj of 3.9-3.13: its size, fut_state, task_fut_waiter, task_coro, task_name
 * (fut_loop is at 16 in all). */
static const struct {
    int minor;
    uint64_t size, state, waiter, coro, name;
} task_3x[] = {
    /* 3.9: FutureObj_HEAD loop .. cancel_msg, then fut_state at 80 */
    { 9, 184, 80, 144, 152, 160 },
    /* 3.10, 3.11, 3.12: fut_exception_tb added before fut_result */
    { 10, 192, 88, 152, 160, 168 },
    { 11, 176, 88, 128, 136, 144 },
    { 12, 176, 88, 128, 136, 144 },
    /* 3.13: fut_awaited_by not yet, bit fields packed after fut_state */
    { 13, 144, 96, 112, 120, 128 },
};

static int registry_layout(const py_layout_t *L, py_asyncio_t *a, const char *version, char *why,
                           size_t whylen)
{
    size_t i;

    for (i = 0; i < sizeof task_3x / sizeof task_3x[0]; i++)
        if (task_3x[i].minor == L->minor)
            break;
    if (i == sizeof task_3x / sizeof task_3x[0] || L->dk_layout == 0 || L->is_modules == 0) {
        snprintf(why, whylen, "asyncio tasks of Python %s are not known to remora", version);
        return REMORA_EVERSION;
    }
    a->kind = PY_ASYNC_REGISTRY;
    a->task_size = task_3x[i].size;
    a->task_loop = 16;
    a->task_state = task_3x[i].state;
    a->task_fut_waiter = task_3x[i].waiter;
    a->task_coro = task_3x[i].coro;
    a->task_name = task_3x[i].name;
    if (L->minor >= 11) {
        /* PyGenObject: the frame is embedded (gi_iframe: 80 in 3.11, which keeps
         * gi_code; 72 in 3.12/3.13), gi_frame_state the int8 5 bytes before it;
         * _PyInterpreterFrame: stacktop (int) at 64, localsplus at 72 */
        a->coro_frame = PY_CORO_EMBEDDED_TOP;
        a->gen_iframe = L->minor == 11 ? 80 : 72;
        a->gen_frame_state = a->gen_iframe - 5;
        a->gen_yield_from = -1;
        a->fr_stacktop_at = 64;
        a->fr_localsplus = 72;
    } else {
        /* PyGenObject: gi_frame at 16; PyFrameObject: f_valuestack at 64, then 3.9
         * f_stacktop (pointer) at 72; 3.10 f_stackdepth (int) at 80, f_state at 108 */
        a->gen_frame_ptr = 16;
        a->fr_localsplus = 64;
        if (L->minor == 9) {
            a->coro_frame = PY_CORO_OBJECT_STACKTOP;
            a->fr_stacktop_at = 72;
        } else {
            a->coro_frame = PY_CORO_OBJECT_DEPTH;
            a->fr_stacktop_at = 80;
            a->fr_state_at = 108;
            a->gen_yield_from = -1;
        }
    }
    /* FutureObj: fut_loop, fut_callback0; PyFunctionObject: 3.9 func_code at 16,
     * func_closure at 48; 3.10+ (COMMON_FIELDS: globals, builtins, name, qualname first)
     * func_code at 48, func_closure at 72; PyCellObject: ob_ref at 16 */
    a->fut_callback0 = 24;
    a->func_code = L->minor == 9 ? 16 : 48;
    a->func_closure = L->minor == 9 ? 48 : 72;
    a->tuple_items = 24;
    a->set_mask = 32;
    a->set_table = 40;
    a->found = 1;
    return REMORA_OK;
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
    if (L->minor < 14)
        return registry_layout(L, a, t->version, why, whylen);
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
    a->kind = PY_ASYNC_LISTS;
    /* as before 3.14 (for pure-Python tasks, whose shield links asyncio does not keep):
     * FutureObj's fut_callback0, PyFunctionObject's func_code and func_closure */
    a->fut_callback0 = 24;
    a->func_code = 48;
    a->func_closure = 72;
    a->tuple_items = 32;
    a->coro_frame = PY_CORO_EMBEDDED_SP;
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
