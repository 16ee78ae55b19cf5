/* py/ — CPython version detection and struct layouts.
 *
 * remora never includes Python.h: every structure it reads is described by a
 * py_layout_t, a table of byte offsets. 3.13+ layouts come from the target's own
 * _Py_DebugOffsets (debug_offsets.c); 3.9–3.12 layouts are generated from each
 * version's installed headers by tools/gen_offsets.sh (layouts_generated.h).
 *
 * Which file does what: docs/layout.md.
 */
#ifndef REMORA_PY_H
#define REMORA_PY_H

#include <stdint.h>
#include "../proc/proc.h"

/* How frames hang off a thread state. */
enum py_frames_kind {
    PY_FRAMES_OBJECTS = 1, /* 3.9/3.10: tstate->frame, PyFrameObject linked by f_back */
    PY_FRAMES_CFRAME = 2,  /* 3.11/3.12: tstate->cframe->current_frame, _PyInterpreterFrame */
    PY_FRAMES_DIRECT = 3,  /* 3.13+: tstate->current_frame */
};

/* How a code object maps instruction offsets to lines. */
enum py_lines_kind {
    PY_LINES_LNOTAB = 1,   /* 3.9: co_lnotab, f_lasti in bytes */
    PY_LINES_310 = 2,      /* 3.10: co_linetable, f_lasti in code units */
    PY_LINES_LOCATIONS = 3 /* 3.11+: co_linetable location table */
};

/* Byte offsets into the target's structures. A field that a version lacks is 0
 * unless said otherwise; every field is checked against its struct size before use. */
typedef struct py_layout {
    uint32_t hexversion;    /* PY_VERSION_HEX of the target (0x030c01f0 for 3.12.1) */
    int major, minor;
    int frames_kind;        /* enum py_frames_kind */
    int lines_kind;         /* enum py_lines_kind */
    int tagged_executable;  /* 3.14+: frame's executable is a _PyStackRef, mask low bits */
    int owner_shim;         /* frames with owner >= this are C-owned shims; 0 = no owner field */

    /* _PyRuntimeState */
    uint64_t rt_size;
    uint64_t rt_interpreters_head;  /* interpreters.head */
    uint64_t rt_gil_locked;         /* 3.9–3.11: ceval.gil.locked (int), else 0 */
    uint64_t rt_gil_holder;         /* 3.9–3.11: ceval.gil.last_holder (pointer), else 0 */

    /* PyInterpreterState */
    uint64_t is_size;
    uint64_t is_next;
    uint64_t is_id;
    uint64_t is_threads_head;       /* tstate_head (3.9–3.11), threads.head (3.12+) */
    uint64_t is_gil_ptr;            /* 3.12+: ceval.gil, a pointer to struct _gil_runtime_state */
    uint64_t is_gc_collecting;      /* gc.collecting (int) */
    uint64_t is_modules;            /* sys.modules: modules (3.9-3.11), imports.modules (3.12+) */
    uint64_t is_code_generation;    /* 3.14+: u64 bumped when a code object is freed; 0 = none */
    uint64_t is_code_version;       /* 3.13: func_state.next_version, a u32 bumped when a code
                                     * object is made; 0 = none (see debug_offsets.c) */
    uint64_t gil_locked;            /* 3.12+: offset of locked in struct _gil_runtime_state */
    uint64_t gil_holder;            /* 3.12+: offset of last_holder/holder in it */

    /* PyThreadState */
    uint64_t ts_size;
    uint64_t ts_read;               /* bytes of a thread state each reading copies: to the
                                     * end of the last field the reading uses (derived) */
    uint64_t ts_next;
    uint64_t ts_interp;
    uint64_t ts_frame;              /* frame (3.9/10), cframe (3.11/12), current_frame (3.13+) */
    uint64_t cframe_current_frame;  /* 3.11/12: _PyCFrame.current_frame */
    uint64_t ts_thread_id;          /* pthread_t */
    uint64_t ts_native_thread_id;   /* 3.11+; 0 on 3.9/3.10 (resolved through pthread_t) */
    uint64_t ts_datastack_chunk;    /* 3.11+ */
    uint64_t ts_last_profiled;      /* 3.15: last_profiled_frame (0: not published) */
    uint64_t ts_last_profiled_seq;  /* 3.15: bumped each time the interpreter moves it */
    uint64_t ts_gil_requested;      /* 3.15: gil_requested, an int set while the thread
                                     * waits in take_gil(); 0: not published */
/* Fields the walker reads as one range from the thread state: datastack_chunk then
 * datastack_top, two pointers side by side in every 3.11+ version; last_profiled_frame
 * then its seq, two u64s (the anchor is used only when they sit so, anchor_on()). */
#define PY_TS_DATASTACK_SPAN 16
#define PY_TS_DATASTACK_TOP 8       /* datastack_top, from ts_datastack_chunk */
#define PY_TS_LAST_PROFILED_SPAN 16
    uint64_t ts_exc_info;           /* exc_info: the _PyErr_StackItem * sys.exc_info() starts
                                     * from; 0 = unknown for this build (no exception mode) */
    uint64_t ts_exc_state;          /* exc_state: the thread's own _PyErr_StackItem, where
                                     * exc_info points outside generators and coroutines */

    /* _PyErr_StackItem */
    uint64_t ei_size;               /* bytes to copy to read the fields below */
    uint64_t ei_exc;                /* exc_type (3.9/3.10), exc_value (3.11+): NULL or None
                                     * when the item holds no exception */
    uint64_t ei_previous;           /* previous_item */

    /* PyFrameObject (3.9/10) or _PyInterpreterFrame (3.11+) */
    uint64_t fr_size;               /* bytes to copy to read the fields below */
    uint64_t fr_previous;           /* f_back (3.9/10), previous (3.11+) */
    uint64_t fr_code;               /* f_code, f_executable (3.13+) */
    uint64_t fr_instr;              /* f_lasti int (3.9/10), prev_instr (3.11/12), instr_ptr (3.13+) */
    uint64_t fr_owner;              /* 3.11+: owner (char) */
    uint64_t fr_gen;                /* 3.9/3.10: f_gen, the generator a frame object runs in */
    uint64_t fr_state;              /* 3.9: f_executing (char); 3.10: f_state (signed char) */

    /* PyCodeObject */
    uint64_t co_size;
    uint64_t co_filename;
    uint64_t co_name;
    uint64_t co_qualname;           /* 3.11+ */
    uint64_t co_linetable;          /* co_lnotab (3.9), co_linetable (3.10+) */
    uint64_t co_firstlineno;        /* int */
    uint64_t co_code_adaptive;      /* 3.11+: first code unit, inside the code object */
    uint64_t co_code;               /* 3.9/3.10: the bytecode's bytes object (--opcodes) */

    /* objects */
    uint64_t ob_head;               /* sizeof(PyObject): what follows the header starts here
                                     * (a dict's ma_used, a weak reference's wr_object) */
    uint64_t ob_type;
    uint64_t bytes_size;            /* PyBytesObject.ob_size */
    uint64_t bytes_sval;            /* PyBytesObject.ob_sval */
    uint64_t u_state;               /* PyASCIIObject.state (bit field word) */
    uint64_t u_length;              /* PyASCIIObject.length */
    uint64_t u_ascii_size;          /* sizeof(PyASCIIObject): data of compact ASCII */
    uint64_t u_compact_size;        /* sizeof(PyCompactUnicodeObject): data of compact non-ASCII */
    uint64_t ob_size;               /* PyVarObject.ob_size (a code object's code units, 3.11) */

    /* Locals (dump --locals, unwind/locals.c): generated for 3.9-3.12, from
     * _Py_DebugOffsets and behaviour.c for 3.13+. 0 = not known: no locals. */
    uint64_t fr_localsplus;         /* f_localsplus (3.9/3.10), localsplus (3.11+): slots */
    uint64_t co_localsplusnames;    /* 3.11+: tuple of every slot's name */
    uint64_t co_localspluskinds;    /* 3.11+: bytes, a kind per slot (CO_FAST_*) */
    uint64_t co_varnames;           /* 3.9/3.10: locals' names (the first co_nlocals slots), */
    uint64_t co_cellvars;           /* then the cells', */
    uint64_t co_freevars;           /* then the free variables' */
    uint64_t co_nlocals;            /* 3.9/3.10 (int) */
    uint64_t co_argcount, co_kwonlyargcount, co_flags;   /* ints */
    uint64_t tp_name;               /* PyTypeObject.tp_name (char *) */
    uint64_t float_fval;            /* PyFloatObject.ob_fval (double) */
    uint64_t tuple_items;           /* PyTupleObject.ob_item[] (size: ob_size) */
    uint64_t list_items;            /* PyListObject.ob_item (PyObject **, size: ob_size) */
    uint64_t set_used, set_mask, set_table;  /* PySetObject: entries {key, hash} */
    uint64_t cell_ref;              /* PyCellObject.ob_ref */

    /* How this version behaves, as the walker must know it: filled in by
     * py_layout_derive() (behaviour.c) from the version and the offsets above, so that
     * nothing under src/unwind/ checks a version number or computes an offset. An
     * offset of 0 means the version has no such field or rule. */
    int gil_in_interp;              /* 3.12+: the GIL state is at *(interp + is_gil_ptr);
                                     * before, inside _PyRuntime (gil_* from the runtime) */
    uint64_t gil_switch;            /* switch_number, from the same base as gil_locked; 0 when
                                     * the known offsets do not fit "interval, last_holder,
                                     * locked, switch_number" (every release 3.9-3.15) */
    uint64_t fr_is_entry;           /* 3.11: is_entry (bool), the first frame of an eval loop */
    uint64_t fr_stacktop;           /* 3.12/3.13: stacktop (int), -1 while the frame runs */
    uint64_t fr_calltop;            /* 3.11: stacktop (int), saved when the frame pushes
                                     * a callee inline (0: no such rule) */
    uint64_t fr_callfunc;           /* ... and the function a frame runs (3.11: f_func, 0) */
/* 3.11: the two stack slots at a caller's saved stacktop that a CALL consumes (NULL and
 * the function, or the method and self), each a PyObject *. */
#define PY_FR_CALL_SLOTS 16
    uint64_t fr_return_offset;      /* 3.13+: return_offset (u16), never 0 in a Python caller */
    uint64_t fr_funcobj;            /* 3.13+: f_funcobj, None in an interpreter trampoline */
    uint64_t fn_code;               /* 3.11: func_code in PyFunctionObject, to tell a frame
                                     * being pushed (its function new, its code a stale
                                     * frame's) from one whose header is whole (0: no check) */
    int walk_root;                  /* enum py_walk_root: where every thread's walk must end */
    int fr_owner_gen;               /* 3.11+: the owner of a generator's or coroutine's frame
                                     * (a walk never ends at one: suspended, it links to
                                     * nothing); -1 = no owner field (3.9/3.10: fr_gen) */
    int caller_rests_on_call;       /* 3.11: a caller that pushed its callee inline rests on
                                     * the last cache entry of its CALL or BINARY_SUBSCR */
    int caller_past_start;          /* 3.11+: a caller has run past its first instruction */
    int fr_running;                 /* 3.9/3.10: fr_state's byte while the frame runs (or
                                     * calls): 0 (3.10, FRAME_EXECUTING), or -1: any but 0
                                     * (3.9); a frame that returned, raised through or is
                                     * suspended (a traceback or generator holds it) has
                                     * another */
    int reread_moved;               /* a thread whose stack moved while read may be read
                                     * again at once: 3.9/3.10 (a reading holds only while
                                     * the current frame stayed the same) and 3.12+ (a
                                     * running caller is told apart by its stacktop or
                                     * return_offset); not 3.11, whose caller rule alone
                                     * let re-readings agree on mixed chains */
    uint64_t co_version;            /* 3.12+: co_version (u32), unique per code object made */

    /* The objects walked to name threads (sys.modules["threading"]._active and each
     * Thread's _name, unwind/thread_names.c): facts of each release's Include/cpython/
     * {object,dictobject,longintrepr}.h, Include/internal/pycore_dict.h (3.9:
     * Objects/dict-common.h) and pycore_object.h. dk_layout 0: not known, no names. */
    int dk_layout;                  /* enum py_dk_layout */
    uint64_t dict_keys, dict_values;/* PyDictObject: ma_keys, ma_values */
    uint64_t dk_nentries;           /* PyDictKeysObject: dk_nentries */
    uint64_t dk_indices;            /* ... dk_indices[], after which the entries lie */
    uint64_t dv_values;             /* PyDictValues: its values[] (3.13+: after an 8-byte
                                     * header whose byte 3 is 'valid') */
    uint64_t tp_basicsize, tp_flags, tp_dictoffset;    /* PyTypeObject */
    uint64_t ht_cached_keys;        /* PyHeapTypeObject: keys shared by its instances */
    int inst_dict;                  /* enum py_inst_dict: where an instance's attributes are */
    uint64_t inst_pre;              /* bytes before an instance read with it: 3.11+'s
                                     * managed values and dict pointers, the GC header */
    uint64_t inst_pre_values;       /* 3.11: the values pointer, in those bytes */
    uint64_t inst_pre_dict;         /* 3.11+: the dict (3.12: PyDictOrValues), in them */
    uint64_t tp_base;               /* PyTypeObject: tp_base */
    int long_tagged;                /* 3.12+: PyLongObject's lv_tag (digits << 3 | sign),
                                     * before: ob_size (signed count of digits) */
    uint64_t long_digits;           /* ob_digit: 30-bit digits in u32s */
    uint64_t md_dict;               /* PyModuleObject: md_dict */
    int rc_low_half;                /* 3.12+: a live object's count is in the low 32 bits
                                     * (immortal objects set high bits); before, below 2^32 */
} py_layout_t;

/* Where every thread's walk of its frames ends. */
enum py_walk_root {
    PY_ROOT_ANY = 0,       /* 3.9/3.10: wherever the links end (not at a generator's) */
    PY_ROOT_ENTRY = 1,     /* 3.11: at a frame marked is_entry (fr_is_entry) */
    PY_ROOT_SHIM = 2,      /* 3.12+: at the outermost eval loop's entry frame, C-owned */
};

/* How a dict's keys object is laid out. */
enum py_dk_layout {
    PY_DK_SIZED = 1,       /* 3.9/3.10: dk_size (ssize) at 8; 24-byte entries (hash, key,
                            * value) after dk_size indices of 1, 2, 4 or 8 bytes */
    PY_DK_LOG2 = 2,        /* 3.11+: dk_log2_size, dk_log2_index_bytes, dk_kind (u8s at 8);
                            * entries after 1 << dk_log2_index_bytes bytes of indices, 24
                            * bytes (hash, key, value) for DICT_KEYS_GENERAL (0), else 16 */
};

/* Where an instance of a plain Python class keeps its attributes. */
enum py_inst_dict {
    PY_INST_DICTOFFSET = 1,/* 3.9/3.10: a dict at tp_dictoffset */
    PY_INST_MANAGED = 2,   /* 3.11: Py_TPFLAGS_MANAGED_DICT (1 << 4): values pointer and
                            * dict before the object (inst_pre_values, inst_pre_dict;
                            * either may be NULL); keys ht_cached_keys */
    PY_INST_TAGGED = 3,    /* 3.12: PyDictOrValues (inst_pre_dict): the values' address
                            * - 1 (odd), or a dict */
    PY_INST_INLINE = 4,    /* 3.13+: dict (inst_pre_dict); with Py_TPFLAGS_INLINE_VALUES (1 << 2)
                            * values inline at tp_basicsize, while the header says valid */
};

/* Fills in the behaviour fields of L from its version and offsets (behaviour.c). */
void py_layout_derive(py_layout_t *L);

/* Built-in layouts for 3.9–3.12 (generated). Returns NULL for other minors. */
const py_layout_t *py_layout_for_minor(int minor);

/* --opcodes: the target's opcode names by number (py/opnames.c), or NULL for a version
 * without a table. */
const char *const *py_opnames(const py_layout_t *L);

/* Fill *out from the _Py_DebugOffsets at 'runtime' in the target (3.13+).
 * 'hexversion' is the version found there. Returns 0, or a REMORA_E* code
 * (REMORA_EVERSION for a layout remora does not know or offsets that fail checks). */
int py_layout_from_debug_offsets(proc_t *p, uint64_t runtime, py_layout_t *out, char *why, size_t whylen);

/* The CPython versions remora reads: 3.PY_MINOR_FIRST to 3.PY_MINOR_LAST, the first
 * through py_layout_for_minor(), the rest through _Py_DebugOffsets (remora --version
 * lists them; py_target_find() refuses the others). */
#define PY_MINOR_FIRST 9
#define PY_MINOR_LAST 15
#define PY_MINOR_DEBUG 13       /* the first through _Py_DebugOffsets */
#define PY_XSTR_(x) #x
#define PY_XSTR(x) PY_XSTR_(x)
/* "CPython 3.9 to 3.15", for messages */
#define PY_READS_TEXT "CPython 3." PY_XSTR(PY_MINOR_FIRST) " to 3." PY_XSTR(PY_MINOR_LAST)

/* Where the interpreter lives in a target and what version it is. */
typedef struct py_target {
    uint64_t runtime;        /* address of _PyRuntime */
    uint64_t code_type;      /* address of PyCode_Type, 0 if unknown */
    uint64_t code_version;   /* 3.12: address of _Py_next_func_version (a u32 bumped when a
                              * code object is made), 0 if the symbol is not there */
    uint64_t none;           /* address of _Py_NoneStruct (None), 0 if the symbol is not there */
    uint64_t str_type;       /* PyUnicode_Type, PyDict_Type, PyLong_Type, PyModule_Type: */
    uint64_t dict_type;      /* the types of the objects read for thread names (0: symbol */
    uint64_t long_type;      /* not there, no names) */
    uint64_t module_type;
    uint64_t coro_type;      /* PyCoro_Type, PyGen_Type: a task's coroutine chain (0: symbol */
    uint64_t gen_type;       /* not there, no chain followed) */
    uint64_t asyncgen_type;  /* PyAsyncGen_Type: an async generator, followed as a coroutine;
                              * _PyAsyncGenASend_Type, _PyAsyncGenAThrow_Type: the awaitables
                              * anext()/asend() and athrow()/aclose() make, followed to their
                              * generator (0: symbol not there, not followed) */
    uint64_t asend_type;
    uint64_t athrow_type;
    uint64_t float_type;     /* PyFloat_Type, PyBytes_Type, PyTuple_Type, PyList_Type, */
    uint64_t bytes_type;     /* PySet_Type, PyFrozenSet_Type, PyBool_Type, PyCell_Type: */
    uint64_t tuple_type;     /* the types dump --locals shows values of (0: symbol not */
    uint64_t list_type;      /* there, such values shown as <TYPE object at 0x...>) */
    uint64_t set_type;
    uint64_t frozenset_type;
    uint64_t bool_type;
    uint64_t cell_type;
    uint64_t type_type;      /* PyType_Type: a value's type must be a type (0: not checked) */
    char binary[4096];       /* the ELF file that holds _PyRuntime (path as seen by the target) */
    char version[32];        /* "3.12.1" */
    py_layout_t layout;
} py_target_t;

/* Find the interpreter in p and its layout. Returns 0, or REMORA_ENOTPY (no CPython found),
 * REMORA_EVERSION (found, but a version remora cannot read; 'why' names it), or a proc error.
 * 'why' always receives a one-line explanation on failure. */
int py_target_find(proc_t *p, py_target_t *t, char *why, size_t whylen);

/* ---- asyncio (asyncio.c) ----------------------------------------------------- */

/* Where asyncio's tasks are and how a coroutine chain is followed, for the target's
 * version. 3.14+: from the _asyncio module's Py_AsyncioModuleDebugOffsets (the ELF section
 * "AsyncioDebug" of the _asyncio shared module, or of the interpreter's binary when the
 * module is built in): every native task is on a list (struct llist_node: next, prev)
 * headed in its thread's state, or the interpreter's once that thread is gone. */
enum py_async_kind {
    PY_ASYNC_LISTS = 1,    /* 3.14+: per-thread task lists (AsyncioDebug) */
    PY_ASYNC_REGISTRY = 2, /* 3.9-3.13: asyncio.tasks' WeakSet (_all_tasks, 3.9-3.11;
                            * _scheduled_tasks, 3.12/3.13) and set (_eager_tasks, 3.12+),
                            * the running tasks in its _current_tasks dict {loop: task} */
};

/* How a coroutine's frame is found and what it awaits. */
enum py_coro_frame {
    PY_CORO_EMBEDDED_SP = 1,   /* 3.14+: frame inside the coroutine; awaited object at
                                * *(stackpointer - fr_yf_back) while gi_frame_state says
                                * gen_yield_from */
    PY_CORO_EMBEDDED_TOP = 2,  /* 3.11-3.13: frame inside; while gi_frame_state is
                                * gen_yield_from (FRAME_SUSPENDED, -1): localsplus[stacktop-1]
                                * (stacktop an int at fr_stacktop_at, localsplus at
                                * fr_localsplus) */
    PY_CORO_OBJECT_STACKTOP = 3,/* 3.9: gi_frame (a frame object) at gen_frame_ptr;
                                * f_stacktop (a pointer, NULL while running) at fr_stacktop_at:
                                * the awaited object just below it */
    PY_CORO_OBJECT_DEPTH = 4,  /* 3.10: gi_frame; f_valuestack at fr_localsplus, f_stackdepth
                                * (int) at fr_stacktop_at, f_state (char) at fr_state_at,
                                * FRAME_SUSPENDED -1: valuestack[depth-1] */
};

typedef struct py_asyncio {
    int found;                      /* 1: the offsets below are known (_asyncio loaded, or
                                     * a registry version) */
    int kind;                       /* enum py_async_kind */
    int coro_frame;                 /* enum py_coro_frame */
    uint64_t task_fut_waiter;       /* C TaskObj: task_fut_waiter (3.9-3.13) */
    uint64_t gen_frame_ptr;         /* 3.9/3.10: gi_frame */
    uint64_t fr_stacktop_at, fr_localsplus, fr_state_at;
    uint64_t fut_callback0;         /* FutureObj: fut_callback0 (3.9-3.13: a shield's outer
                                     * future holds its _outer_done_callback there) */
    uint64_t func_code, func_closure;   /* PyFunctionObject */
    uint64_t tuple_items;           /* PyTupleObject's ob_item: 24, 32 from 3.14 (ob_hash) */
    uint64_t task_size;             /* sizeof(TaskObj): bytes read of each task */
    uint64_t task_loop;             /* fut_loop */
    uint64_t task_state;            /* fut_state (int): 0 pending */
    uint64_t task_name;             /* a str, or (3.13+) an int N for "Task-N" */
    uint64_t task_awaited_by;       /* a task, or a set of them (task_awaited_by_is_set) */
    uint64_t task_is_task;          /* char, 1 in a task */
    uint64_t task_awaited_by_is_set;/* char */
    uint64_t task_coro;
    uint64_t task_node;             /* struct llist_node in the task */
    uint64_t is_tasks_head;         /* PyInterpreterState: tasks of threads gone */
    uint64_t ts_impl_size;          /* sizeof(_PyThreadStateImpl) */
    uint64_t ts_running_loop;       /* _PyThreadStateImpl: asyncio_running_loop */
    uint64_t ts_running_task;       /* ... asyncio_running_task */
    uint64_t ts_tasks_head;         /* ... asyncio_tasks_head (llist_node) */
    /* a coroutine or generator object (PyCoro_Type, PyGen_Type) */
    uint64_t gen_iframe;            /* its embedded _PyInterpreterFrame */
    uint64_t gen_frame_state;       /* gi_frame_state (int8) */
    int gen_yield_from;             /* the state while suspended in await / yield from */
    uint64_t fr_stackpointer;       /* the frame's stack pointer (a _PyStackRef *) */
    uint64_t fr_yf_back;            /* the awaited object lies this many bytes below it */
    uint64_t set_table, set_mask;   /* PySetObject: table, mask (entries: key, hash) */
} py_asyncio_t;

/* Finds asyncio's layout in p for target t: 0 with a->found 1, or 0 with a->found 0 when
 * a 3.14+ target has not loaded _asyncio (no tasks can exist), or REMORA_EVERSION with
 * 'why' (offsets that fail checks), or a proc error. 3.9-3.13: the facts of the C task
 * object and of coroutine frames, taken from each release's Modules/_asynciomodule.c and
 * Include/internal/pycore_frame.h (Include/frameobject.h, 3.9/3.10) and checked against
 * the running interpreters. */
int py_asyncio_find(proc_t *p, const py_target_t *t, py_asyncio_t *a, char *why, size_t whylen);

#endif
