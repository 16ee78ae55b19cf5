/* py/behaviour.c — the version facts the walker relies on, as named fields.
 *
 * Each rule below is a fact of CPython's own headers (Include/internal/pycore_frame.h,
 * pycore_gil.h, pycore_code.h of each release) about a field next to one the layout
 * already locates. Reads nothing from the target: py_layout_derive() only fills in the
 * behaviour part of a py_layout_t, once the version's offsets are known.
 */
#include "py.h"

/* PyHeapTypeObject's ht_cached_keys, 3.PY_MINOR_FIRST to 3.PY_MINOR_LAST in turn (see
 * below): a release added to py.h without its own entry here does not build. */
static const uint64_t cached_keys[] = { 864, 872, 872, 880, 880, 880, 888 };
_Static_assert(sizeof cached_keys / sizeof cached_keys[0] == PY_MINOR_LAST - PY_MINOR_FIRST + 1,
               "ht_cached_keys: one entry for each release read");

/* cur, or the end of the field [off, off + len) where that is further (off 0: none). */
static uint64_t end_of(uint64_t cur, uint64_t off, uint64_t len)
{
    return off != 0 && off + len > cur ? off + len : cur;
}

/* The part of a thread state the readings use: the fields below, ending where the last
 * one does. 3.15's PyThreadState is 888 bytes, of which a reading needs the first 304;
 * the kernel's cost of a read is per byte as well as per range (tests/bench/vmread.c). */
static uint64_t ts_read_len(const py_layout_t *L)
{
    uint64_t n = 8;

    n = end_of(n, L->ts_next, 8);
    n = end_of(n, L->ts_interp, 8);
    n = end_of(n, L->ts_frame, 8);
    n = end_of(n, L->ts_thread_id, 8);
    n = end_of(n, L->ts_native_thread_id, 8);
    n = end_of(n, L->ts_datastack_chunk, PY_TS_DATASTACK_SPAN);
    n = end_of(n, L->ts_last_profiled, 8);
    n = end_of(n, L->ts_last_profiled_seq, 8);
    n = end_of(n, L->ts_gil_requested, 4);
    n = end_of(n, L->ts_exc_info, 8);
    n = end_of(n, L->ts_exc_state, L->ei_size);
    return n < L->ts_size ? n : L->ts_size;
}

void py_layout_derive(py_layout_t *L)
{
    int m = L->minor;

    /* struct _gil_runtime_state begins "interval, last_holder, locked, switch_number"
     * in every release 3.9-3.15: in _PyRuntime's ceval before 3.12, behind a pointer in
     * each interpreter from 3.12 */
    L->gil_in_interp = m >= 12;
    if (!L->gil_in_interp) {
        L->gil_locked = L->rt_gil_locked;
        L->gil_holder = L->rt_gil_holder;
    }
    L->gil_switch = 0;
    if (L->gil_locked != 0 && L->gil_holder + 8 == L->gil_locked && L->gil_locked % 8 == 0)
        L->gil_switch = L->gil_locked + 8;

    /* _PyInterpreterFrame, just before 'owner' (a char): 3.11 "bool is_entry; char
     * owner"; 3.12 "int stacktop; uint16_t return_offset; char owner"; 3.13 the same
     * with stacktop; 3.14+ "_PyStackRef *stackpointer; ... uint16_t return_offset;
     * char owner". f_funcobj is the third pointer from 3.12 on. */
    L->fr_is_entry = m == 11 && L->fr_owner >= 1 ? L->fr_owner - 1 : 0;
    L->fr_stacktop = (m == 12 || m == 13) && L->fr_owner >= 6 ? L->fr_owner - 6 : 0;
    /* where a caller's call left what it consumed: 3.11 "int stacktop; bool is_entry;
     * char owner", the frame starting with f_func. Not 3.12 (LOAD_ATTR_PROPERTY and
     * _GETATTRIBUTE_OVERRIDDEN push a frame after writing NULL over what they consumed)
     * nor 3.13+ (specialized calls write the new frame over the callable's slot). */
    L->fr_calltop = m == 11 && L->fr_is_entry >= 4 + 8 ? L->fr_is_entry - 4 : 0;
    L->fr_callfunc = 0;
    /* PyFunctionObject: PyObject_HEAD, then globals, builtins, name, qualname, code */
    L->fn_code = m == 11 ? 16 + 4 * 8 : 0;
    L->fr_return_offset = m >= 13 && L->fr_owner >= 2 ? L->fr_owner - 2 : 0;
    L->fr_funcobj = m >= 13 && L->fr_size >= 24 ? 16 : 0;
    /* enum _frameowner: FRAME_OWNED_BY_GENERATOR is 1 from 3.11 to 3.15 */
    L->fr_owner_gen = L->frames_kind != PY_FRAMES_OBJECTS && L->fr_owner != 0 ? 1 : -1;
    L->walk_root = m == 11 ? PY_ROOT_ENTRY : m >= 12 ? PY_ROOT_SHIM : PY_ROOT_ANY;
    L->caller_rests_on_call = m == 11;
    L->caller_past_start = L->frames_kind != PY_FRAMES_OBJECTS;
    L->fr_running = m == 9 ? -1 : 0;
    L->reread_moved = L->frames_kind == PY_FRAMES_OBJECTS || L->fr_stacktop != 0 || L->fr_return_offset != 0 ||
                      L->fr_calltop != 0;

    /* PyCodeObject: co_qualname from 3.11 (before, the name is all there is);
     * co_version, the field before co_localsplusnames, two pointers before co_filename,
     * from 3.12 */
    if (m < 11)
        L->co_qualname = L->co_name;
    L->co_version = m >= 12 && L->co_filename >= L->co_firstlineno + 24 ? L->co_filename - 20 : 0;
    L->ob_head = 16;                /* ob_refcnt, ob_type */
    L->ob_size = L->ob_head;

    /* dump --locals. PyCodeObject 3.11-3.15: co_flags, co_argcount, co_posonlyargcount,
     * co_kwonlyargcount, ints in a row (3.13+ publish only co_argcount). PySetObject:
     * ob_refcnt, ob_type, fill, used, mask, table in every release (3.13 does not
     * publish it). PyCellObject: PyObject_HEAD, then ob_ref. The slots hold _PyStackRefs
     * from 3.14 (tagged_executable: the low bits masked). */
    if (L->frames_kind == PY_FRAMES_DIRECT && L->co_argcount >= 4) {
        L->co_flags = L->co_argcount - 4;
        L->co_kwonlyargcount = L->co_argcount + 8;
    }
    if (L->set_table == 0) {
        L->set_used = 24;
        L->set_mask = 32;
        L->set_table = 40;
    }
    if (L->cell_ref == 0)
        L->cell_ref = 16;
    L->rc_low_half = m >= 12;

    /* Objects read for thread names. PyDictObject: ob_refcnt, ob_type, ma_used,
     * ma_version_tag (3.14+: _ma_watcher_tag), ma_keys, ma_values in every release.
     * PyDictKeysObject 3.9/3.10: dk_refcnt, dk_size, dk_lookup, dk_usable, dk_nentries,
     * dk_indices; 3.11+: dk_refcnt, three u8s, dk_version (u32), dk_usable, dk_nentries,
     * dk_indices. PyDictValues: values[] alone (3.11/3.12), after capacity, size,
     * embedded, valid and 4 bytes of padding (3.13+). PyTypeObject: tp_basicsize 32,
     * tp_flags 168, tp_base 256, tp_dictoffset 288 in all; PyHeapTypeObject's ht_cached_keys follows
     * ht_name, ht_slots, ht_qualname (3.9 864, 3.10/3.11 872, 3.12-3.14 880, 3.15 888,
     * where PyTypeObject grew). PyModuleObject: PyObject_HEAD, then md_dict. */
    L->dk_layout = m >= 11 ? PY_DK_LOG2 : PY_DK_SIZED;
    L->dict_keys = 32;
    L->dict_values = 40;
    L->dk_nentries = m >= 11 ? 24 : 32;
    L->dk_indices = m >= 11 ? 32 : 40;
    L->dv_values = m >= 13 ? 8 : 0;
    L->tp_basicsize = 32;
    L->tp_flags = 168;
    L->tp_dictoffset = 288;
    L->ht_cached_keys = m >= PY_MINOR_FIRST && m <= PY_MINOR_LAST ? cached_keys[m - PY_MINOR_FIRST] : 0;
    L->inst_dict = m <= 10 ? PY_INST_DICTOFFSET : m == 11 ? PY_INST_MANAGED :
                   m == 12 ? PY_INST_TAGGED : PY_INST_INLINE;
    /* before an instance: 3.11 its values pointer at -32 and dict at -24, 3.12+ its
     * dict (or PyDictOrValues) at -24, then the GC header (two words) in every release */
    L->inst_pre = 32;
    L->inst_pre_values = 0;
    L->inst_pre_dict = 8;
    L->tp_base = 256;
    L->long_tagged = m >= 12;
    L->long_digits = 24;
    L->md_dict = 16;
    if (L->ht_cached_keys == 0 || L->is_modules == 0)
        L->dk_layout = 0;       /* a release whose facts are not known: no names */
    L->ts_read = ts_read_len(L);
}
