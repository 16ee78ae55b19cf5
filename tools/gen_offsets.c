/* gen_offsets.c — print a py_layout_t initializer (see src/py/py.h) for the
 * CPython version whose headers this file is compiled against.
 *
 * Not part of remora itself: tools/gen_offsets.sh compiles it once per version
 * (3.9–3.12) with
 *     cc -DPy_BUILD_CORE -DPy_BUILD_CORE_BUILTIN \
 *        -I<prefix>/include/python3.X -I<prefix>/include/python3.X/internal
 * and collects the output into src/py/layouts_generated.h. Only headers are
 * used; nothing is linked against libpython.
 *
 * Field names checked against the installed headers of 3.9.18, 3.10.13,
 * 3.11.7 and 3.12.1. Notes on where they differ from the obvious guess:
 *  - PyInterpreterState's thread list is `tstate_head` on 3.9/3.10 only;
 *    3.11 already has `threads.head` (struct pythreads), like 3.12.
 *  - The GIL is in _PyRuntimeState.ceval.gil on 3.9–3.11 (3.10 also has an
 *    interpreter copy, but only under EXPERIMENTAL_ISOLATED_SUBINTERPRETERS,
 *    which release builds do not define). On 3.12 it is reached through the
 *    pointer PyInterpreterState.ceval.gil (normally &interp->_gil, or the main
 *    interpreter's _gil for interpreters that share it).
 *  - PyThreadState.native_thread_id first appears in 3.11; thread_id exists
 *    in all four.
 *  - PyCodeObject's line table is `co_lnotab` on 3.9, `co_linetable` on 3.10+
 *    (3.10 also keeps co_lnotab as a lazily computed attribute, not a field).
 *  - 3.9/3.10 frames: PyFrameObject comes from <frameobject.h>, which
 *    Python.h does not include on those versions.
 *  - _PyInterpreterFrame.owner: FRAME_OWNED_BY_CSTACK (== 3) exists on 3.12
 *    only; 3.11 marks C entry frames with `is_entry` instead and its owner
 *    values are 0..2, so owner_shim = 3 never matches there.
 *  - _PyErr_StackItem (what sys.exc_info() reads): exc_type, exc_value,
 *    exc_traceback, previous_item on 3.9/3.10; exc_value, previous_item from
 *    3.11. ei_exc is the field that is NULL or None when the item holds no
 *    exception: exc_type before 3.11, exc_value from 3.11.
 */
#include <Python.h>

#if PY_VERSION_HEX < 0x03090000 || PY_VERSION_HEX >= 0x030d0000
#  error "gen_offsets.c handles CPython 3.9 to 3.12 only (3.13+ use _Py_DebugOffsets)"
#endif

#if PY_VERSION_HEX < 0x030b0000
#  include <frameobject.h>          /* PyFrameObject (cpython/frameobject.h) */
#endif
#include "internal/pycore_runtime.h"    /* _PyRuntimeState */
#include "internal/pycore_interp.h"     /* PyInterpreterState (struct _is) */
#include "internal/pycore_pystate.h"
#include "internal/pycore_code.h"
#include "internal/pycore_gil.h"        /* struct _gil_runtime_state */
#if PY_VERSION_HEX >= 0x030b0000
#  include "internal/pycore_frame.h"    /* _PyInterpreterFrame */
#endif

#include <stddef.h>
#include <stdio.h>

#define OFF(type, member) ((unsigned long long)offsetof(type, member))
#define SIZE(type) ((unsigned long long)sizeof(type))

static void field(const char *name, unsigned long long v)
{
    printf("    .%s = %llu,\n", name, v);
}

int main(void)
{
    printf("/* CPython %s (PY_VERSION_HEX 0x%08lx) */\n", PY_VERSION, (unsigned long)PY_VERSION_HEX);
    printf("static const py_layout_t py_layout_%d_%d = {\n", PY_MAJOR_VERSION, PY_MINOR_VERSION);
    printf("    .hexversion = 0x%08lx,\n", (unsigned long)PY_VERSION_HEX);
    printf("    .major = %d,\n", PY_MAJOR_VERSION);
    printf("    .minor = %d,\n", PY_MINOR_VERSION);
#if PY_VERSION_HEX >= 0x030b0000
    printf("    .frames_kind = PY_FRAMES_CFRAME,\n");
#else
    printf("    .frames_kind = PY_FRAMES_OBJECTS,\n");
#endif
#if PY_VERSION_HEX >= 0x030b0000
    printf("    .lines_kind = PY_LINES_LOCATIONS,\n");
#elif PY_VERSION_HEX >= 0x030a0000
    printf("    .lines_kind = PY_LINES_310,\n");
#else
    printf("    .lines_kind = PY_LINES_LNOTAB,\n");
#endif
    field("tagged_executable", 0);
#if PY_VERSION_HEX >= 0x030c0000
    field("owner_shim", FRAME_OWNED_BY_CSTACK);
#elif PY_VERSION_HEX >= 0x030b0000
    field("owner_shim", 3); /* no FRAME_OWNED_BY_CSTACK in 3.11; owners are 0..2 */
#else
    field("owner_shim", 0); /* PyFrameObject has no owner field */
#endif

    printf("\n    /* _PyRuntimeState */\n");
    field("rt_size", SIZE(_PyRuntimeState));
    field("rt_interpreters_head", OFF(_PyRuntimeState, interpreters.head));
#if PY_VERSION_HEX < 0x030c0000
    field("rt_gil_locked", OFF(_PyRuntimeState, ceval.gil.locked));
    field("rt_gil_holder", OFF(_PyRuntimeState, ceval.gil.last_holder));
#else
    field("rt_gil_locked", 0);
    field("rt_gil_holder", 0);
#endif

    printf("\n    /* PyInterpreterState */\n");
    field("is_size", SIZE(PyInterpreterState));
    field("is_next", OFF(PyInterpreterState, next));
    field("is_id", OFF(PyInterpreterState, id));
#if PY_VERSION_HEX >= 0x030b0000
    field("is_threads_head", OFF(PyInterpreterState, threads.head));
#else
    field("is_threads_head", OFF(PyInterpreterState, tstate_head));
#endif
#if PY_VERSION_HEX >= 0x030c0000
    field("is_gil_ptr", OFF(PyInterpreterState, ceval.gil));
#else
    field("is_gil_ptr", 0);
#endif
    field("is_gc_collecting", OFF(PyInterpreterState, gc.collecting));
#if PY_VERSION_HEX >= 0x030c0000
    field("is_modules", OFF(PyInterpreterState, imports.modules));
#else
    field("is_modules", OFF(PyInterpreterState, modules));
#endif
#if PY_VERSION_HEX >= 0x030c0000
    field("gil_locked", OFF(struct _gil_runtime_state, locked));
    field("gil_holder", OFF(struct _gil_runtime_state, last_holder));
#else
    field("gil_locked", 0);
    field("gil_holder", 0);
#endif

    printf("\n    /* PyThreadState */\n");
    field("ts_size", SIZE(PyThreadState));
    field("ts_next", OFF(PyThreadState, next));
    field("ts_interp", OFF(PyThreadState, interp));
#if PY_VERSION_HEX >= 0x030b0000
    field("ts_frame", OFF(PyThreadState, cframe));
    field("cframe_current_frame", OFF(_PyCFrame, current_frame));
#else
    field("ts_frame", OFF(PyThreadState, frame));
    field("cframe_current_frame", 0);
#endif
    field("ts_thread_id", OFF(PyThreadState, thread_id));
#if PY_VERSION_HEX >= 0x030b0000
    field("ts_native_thread_id", OFF(PyThreadState, native_thread_id));
    field("ts_datastack_chunk", OFF(PyThreadState, datastack_chunk));
#else
    field("ts_native_thread_id", 0);
    field("ts_datastack_chunk", 0);
#endif
    field("ts_exc_info", OFF(PyThreadState, exc_info));
    field("ts_exc_state", OFF(PyThreadState, exc_state));

    printf("\n    /* _PyErr_StackItem */\n");
    field("ei_size", SIZE(_PyErr_StackItem));
#if PY_VERSION_HEX >= 0x030b0000
    field("ei_exc", OFF(_PyErr_StackItem, exc_value));
#else
    field("ei_exc", OFF(_PyErr_StackItem, exc_type));
#endif
    field("ei_previous", OFF(_PyErr_StackItem, previous_item));

#if PY_VERSION_HEX >= 0x030b0000
    printf("\n    /* _PyInterpreterFrame */\n");
    field("fr_size", OFF(_PyInterpreterFrame, localsplus));
    field("fr_previous", OFF(_PyInterpreterFrame, previous));
    field("fr_code", OFF(_PyInterpreterFrame, f_code));
    field("fr_instr", OFF(_PyInterpreterFrame, prev_instr));
    field("fr_owner", OFF(_PyInterpreterFrame, owner));
    field("fr_gen", 0);
    field("fr_state", 0);
#else
    printf("\n    /* PyFrameObject */\n");
    /* bytes read per frame: up to f_executing (3.9) or f_state (3.10), the last field
     * remora needs, after f_lasti, f_lineno and f_iblock (the object is larger, and
     * frames are read by the thousand per second) */
    field("fr_size", OFF(PyFrameObject, f_lasti) + 16);
    field("fr_previous", OFF(PyFrameObject, f_back));
    field("fr_code", OFF(PyFrameObject, f_code));
    field("fr_instr", OFF(PyFrameObject, f_lasti));
    field("fr_owner", 0);
    field("fr_gen", OFF(PyFrameObject, f_gen));
#if PY_VERSION_HEX >= 0x030a0000
    field("fr_state", OFF(PyFrameObject, f_state));
#else
    field("fr_state", OFF(PyFrameObject, f_executing));
#endif
#endif

    printf("\n    /* PyCodeObject */\n");
    field("co_size", SIZE(PyCodeObject));
    field("co_filename", OFF(PyCodeObject, co_filename));
    field("co_name", OFF(PyCodeObject, co_name));
#if PY_VERSION_HEX >= 0x030b0000
    field("co_qualname", OFF(PyCodeObject, co_qualname));
#else
    field("co_qualname", 0);
#endif
#if PY_VERSION_HEX >= 0x030a0000
    field("co_linetable", OFF(PyCodeObject, co_linetable));
#else
    field("co_linetable", OFF(PyCodeObject, co_lnotab));
#endif
    field("co_firstlineno", OFF(PyCodeObject, co_firstlineno));
#if PY_VERSION_HEX >= 0x030b0000
    field("co_code_adaptive", OFF(PyCodeObject, co_code_adaptive));
    field("co_code", 0);
#else
    field("co_code_adaptive", 0);
    field("co_code", OFF(PyCodeObject, co_code));
#endif

    printf("\n    /* objects */\n");
    field("ob_type", OFF(PyObject, ob_type));
    field("bytes_size", OFF(PyBytesObject, ob_base.ob_size));
    field("bytes_sval", OFF(PyBytesObject, ob_sval));
    field("u_state", OFF(PyASCIIObject, state));
    field("u_length", OFF(PyASCIIObject, length));
    field("u_ascii_size", SIZE(PyASCIIObject));
    field("u_compact_size", SIZE(PyCompactUnicodeObject));

    printf("\n    /* locals (dump --locals, unwind/locals.c) */\n");
#if PY_VERSION_HEX >= 0x030b0000
    field("fr_localsplus", OFF(_PyInterpreterFrame, localsplus));
    field("co_localsplusnames", OFF(PyCodeObject, co_localsplusnames));
    field("co_localspluskinds", OFF(PyCodeObject, co_localspluskinds));
    field("co_varnames", 0);
    field("co_cellvars", 0);
    field("co_freevars", 0);
    field("co_nlocals", 0);
#else
    field("fr_localsplus", OFF(PyFrameObject, f_localsplus));
    field("co_localsplusnames", 0);
    field("co_localspluskinds", 0);
    field("co_varnames", OFF(PyCodeObject, co_varnames));
    field("co_cellvars", OFF(PyCodeObject, co_cellvars));
    field("co_freevars", OFF(PyCodeObject, co_freevars));
    field("co_nlocals", OFF(PyCodeObject, co_nlocals));
#endif
    field("co_argcount", OFF(PyCodeObject, co_argcount));
    field("co_kwonlyargcount", OFF(PyCodeObject, co_kwonlyargcount));
    field("co_flags", OFF(PyCodeObject, co_flags));
    field("tp_name", OFF(PyTypeObject, tp_name));
    field("float_fval", OFF(PyFloatObject, ob_fval));
    field("tuple_items", OFF(PyTupleObject, ob_item));
    field("list_items", OFF(PyListObject, ob_item));
    field("set_used", OFF(PySetObject, used));
    field("set_mask", OFF(PySetObject, mask));
    field("set_table", OFF(PySetObject, table));
    field("cell_ref", OFF(PyCellObject, ob_ref));
    printf("};\n");
    return 0;
}
