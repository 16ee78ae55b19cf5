/* py/ — CPython version detection and struct layouts.
 *
 * remora never includes Python.h: every structure it reads is described by a
 * py_layout_t, a table of byte offsets. 3.13+ layouts come from the target's own
 * _Py_DebugOffsets (debug_offsets.c); 3.9–3.12 layouts are generated from each
 * version's installed headers by tools/gen_offsets.sh (layouts_generated.h).
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
    uint64_t is_code_generation;    /* 3.14+: u64 bumped when a code object is freed; 0 = none */
    uint64_t is_code_version;       /* 3.13: func_state.next_version, a u32 bumped when a code
                                     * object is made; 0 = none (see debug_offsets.c) */
    uint64_t gil_locked;            /* 3.12+: offset of locked in struct _gil_runtime_state */
    uint64_t gil_holder;            /* 3.12+: offset of last_holder/holder in it */

    /* PyThreadState */
    uint64_t ts_size;
    uint64_t ts_next;
    uint64_t ts_interp;
    uint64_t ts_frame;              /* frame (3.9/10), cframe (3.11/12), current_frame (3.13+) */
    uint64_t cframe_current_frame;  /* 3.11/12: _PyCFrame.current_frame */
    uint64_t ts_thread_id;          /* pthread_t */
    uint64_t ts_native_thread_id;   /* 3.11+; 0 on 3.9/3.10 (resolved through pthread_t) */
    uint64_t ts_datastack_chunk;    /* 3.11+ */
    uint64_t ts_last_profiled;      /* 3.15: last_profiled_frame (0: not published) */
    uint64_t ts_last_profiled_seq;  /* 3.15: bumped each time the interpreter moves it */
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

    /* PyCodeObject */
    uint64_t co_size;
    uint64_t co_filename;
    uint64_t co_name;
    uint64_t co_qualname;           /* 3.11+ */
    uint64_t co_linetable;          /* co_lnotab (3.9), co_linetable (3.10+) */
    uint64_t co_firstlineno;        /* int */
    uint64_t co_code_adaptive;      /* 3.11+: first code unit, inside the code object */

    /* objects */
    uint64_t ob_type;
    uint64_t bytes_size;            /* PyBytesObject.ob_size */
    uint64_t bytes_sval;            /* PyBytesObject.ob_sval */
    uint64_t u_state;               /* PyASCIIObject.state (bit field word) */
    uint64_t u_length;              /* PyASCIIObject.length */
    uint64_t u_ascii_size;          /* sizeof(PyASCIIObject): data of compact ASCII */
    uint64_t u_compact_size;        /* sizeof(PyCompactUnicodeObject): data of compact non-ASCII */
    uint64_t ob_size;               /* PyVarObject.ob_size (a code object's code units, 3.11) */

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
    uint64_t fr_return_offset;      /* 3.13+: return_offset (u16), never 0 in a Python caller */
    uint64_t fr_funcobj;            /* 3.13+: f_funcobj, None in an interpreter trampoline */
    int walk_root;                  /* enum py_walk_root: where every thread's walk must end */
    int fr_owner_gen;               /* 3.11+: the owner of a generator's or coroutine's frame
                                     * (a walk never ends at one: suspended, it links to
                                     * nothing); -1 = no owner field (3.9/3.10: fr_gen) */
    int caller_rests_on_call;       /* 3.11: a caller that pushed its callee inline rests on
                                     * the last cache entry of its CALL or BINARY_SUBSCR */
    int caller_past_start;          /* 3.11+: a caller has run past its first instruction */
    uint64_t co_version;            /* 3.12+: co_version (u32), unique per code object made */
    int rc_low_half;                /* 3.12+: a live object's count is in the low 32 bits
                                     * (immortal objects set high bits); before, below 2^32 */
} py_layout_t;

/* Where every thread's walk of its frames ends. */
enum py_walk_root {
    PY_ROOT_ANY = 0,       /* 3.9/3.10: wherever the links end (not at a generator's) */
    PY_ROOT_ENTRY = 1,     /* 3.11: at a frame marked is_entry (fr_is_entry) */
    PY_ROOT_SHIM = 2,      /* 3.12+: at the outermost eval loop's entry frame, C-owned */
};

/* Fills in the behaviour fields of L from its version and offsets (behaviour.c). */
void py_layout_derive(py_layout_t *L);

/* Built-in layouts for 3.9–3.12 (generated). Returns NULL for other minors. */
const py_layout_t *py_layout_for_minor(int minor);

/* Fill *out from the _Py_DebugOffsets at 'runtime' in the target (3.13+).
 * 'hexversion' is the version found there. Returns 0, or a REMORA_E* code
 * (REMORA_EVERSION for a layout remora does not know or offsets that fail checks). */
int py_layout_from_debug_offsets(proc_t *p, uint64_t runtime, py_layout_t *out, char *why, size_t whylen);

/* Where the interpreter lives in a target and what version it is. */
typedef struct py_target {
    uint64_t runtime;        /* address of _PyRuntime */
    uint64_t code_type;      /* address of PyCode_Type, 0 if unknown */
    uint64_t code_version;   /* 3.12: address of _Py_next_func_version (a u32 bumped when a
                              * code object is made), 0 if the symbol is not there */
    uint64_t none;           /* address of _Py_NoneStruct (None), 0 if the symbol is not there */
    char binary[4096];       /* the ELF file that holds _PyRuntime (path as seen by the target) */
    char version[32];        /* "3.12.1" */
    py_layout_t layout;
} py_target_t;

/* Find the interpreter in p and its layout. Returns 0, or REMORA_ENOTPY (no CPython found),
 * REMORA_EVERSION (found, but a version remora cannot read; 'why' names it), or a proc error.
 * 'why' always receives a one-line explanation on failure. */
int py_target_find(proc_t *p, py_target_t *t, char *why, size_t whylen);

#endif
