/* py/debug_offsets.c — layouts of CPython 3.13+ from the target's _Py_DebugOffsets.
 *
 * 3.13+ place a _Py_DebugOffsets struct at the start of _PyRuntime: a cookie, the
 * version, then sections of u64 offsets. The struct grows per minor version, so
 * remora keeps, for each known version, the ordered list of its fields (every field
 * is 8 bytes), reads the struct once, and checks every offset it uses against the
 * size the struct itself declares for that section.
 */
#include <stdio.h>
#include <string.h>

#include "remora.h"
#include "py.h"

/* The fields remora uses, plus a filler for those it skips. */
enum dbg_field {
    D_SKIP = 0,
    D_COOKIE, D_VERSION, D_FREE_THREADED,
    D_RT_SIZE, D_RT_INTERPRETERS_HEAD,
    D_IS_SIZE, D_IS_ID, D_IS_NEXT, D_IS_THREADS_HEAD, D_IS_GC, D_IS_CEVAL_GIL, D_IS_GIL_STATE,
    D_IS_GIL_LOCKED, D_IS_GIL_HOLDER, D_IS_CODE_GEN, D_IS_MODULES,
    D_TS_SIZE, D_TS_NEXT, D_TS_INTERP, D_TS_CURRENT_FRAME, D_TS_THREAD_ID,
    D_TS_NATIVE_THREAD_ID, D_TS_DATASTACK_CHUNK, D_TS_CURRENT_EXC, D_TS_EXC_STATE, D_EI_EXC_VALUE,
    D_TS_LAST_PROFILED, D_TS_LAST_PROFILED_SEQ, D_TS_GIL_REQUESTED,
    D_FR_SIZE, D_FR_PREVIOUS, D_FR_EXECUTABLE, D_FR_INSTR_PTR, D_FR_OWNER,
    D_CO_SIZE, D_CO_FILENAME, D_CO_NAME, D_CO_QUALNAME, D_CO_LINETABLE, D_CO_FIRSTLINENO,
    D_CO_CODE_ADAPTIVE,
    D_OB_TYPE,
    D_BYTES_SIZE, D_BYTES_OB_SIZE, D_BYTES_SVAL,
    D_U_SIZE, D_U_STATE, D_U_LENGTH, D_U_ASCII_SIZE, D_U_COMPACT_SIZE,
    D_GC_SIZE, D_GC_COLLECTING,
    D_FR_LOCALSPLUS, D_CO_ARGCOUNT, D_CO_LP_NAMES, D_CO_LP_KINDS, D_TP_NAME,
    D_TUPLE_ITEM, D_LIST_ITEM, D_FLOAT_FVAL, D_SET_USED, D_SET_TABLE, D_SET_MASK,
    D_NFIELDS
};

#define S D_SKIP

/* CPython 3.13 (Include/internal/pycore_runtime.h). */
static const unsigned char layout_313[] = {
    D_COOKIE, D_VERSION, D_FREE_THREADED,
    D_RT_SIZE, S, D_RT_INTERPRETERS_HEAD,
    D_IS_SIZE, D_IS_ID, D_IS_NEXT, D_IS_THREADS_HEAD, D_IS_GC, D_IS_MODULES, S, S, D_IS_CEVAL_GIL, D_IS_GIL_STATE, S,
    D_IS_GIL_LOCKED, D_IS_GIL_HOLDER,
    D_TS_SIZE, S, D_TS_NEXT, D_TS_INTERP, D_TS_CURRENT_FRAME, D_TS_THREAD_ID,
    D_TS_NATIVE_THREAD_ID, D_TS_DATASTACK_CHUNK, S,
    D_FR_SIZE, D_FR_PREVIOUS, D_FR_EXECUTABLE, D_FR_INSTR_PTR, D_FR_LOCALSPLUS, D_FR_OWNER,
    D_CO_SIZE, D_CO_FILENAME, D_CO_NAME, D_CO_QUALNAME, D_CO_LINETABLE, D_CO_FIRSTLINENO, D_CO_ARGCOUNT, D_CO_LP_NAMES, D_CO_LP_KINDS,
    D_CO_CODE_ADAPTIVE,
    S, D_OB_TYPE,                       /* pyobject */
    S, D_TP_NAME, S, S,                 /* type_object */
    S, D_TUPLE_ITEM, S,                 /* tuple_object */
    S, D_LIST_ITEM, S,                  /* list_object */
    S, S, S,                            /* dict_object */
    S, D_FLOAT_FVAL,                    /* float_object */
    S, S, S,                            /* long_object */
    D_BYTES_SIZE, D_BYTES_OB_SIZE, D_BYTES_SVAL,
    D_U_SIZE, D_U_STATE, D_U_LENGTH, D_U_ASCII_SIZE,
    D_GC_SIZE, D_GC_COLLECTING,
};

/* CPython 3.14 (Include/internal/pycore_debug_offsets.h). */
static const unsigned char layout_314[] = {
    D_COOKIE, D_VERSION, D_FREE_THREADED,
    D_RT_SIZE, S, D_RT_INTERPRETERS_HEAD,
    D_IS_SIZE, D_IS_ID, D_IS_NEXT, D_IS_THREADS_HEAD, S, D_IS_GC, D_IS_MODULES, S, S, D_IS_CEVAL_GIL, D_IS_GIL_STATE, S,
    D_IS_GIL_LOCKED, D_IS_GIL_HOLDER, D_IS_CODE_GEN, S,
    D_TS_SIZE, S, D_TS_NEXT, D_TS_INTERP, D_TS_CURRENT_FRAME, D_TS_THREAD_ID,
    D_TS_NATIVE_THREAD_ID, D_TS_DATASTACK_CHUNK, S,
    D_FR_SIZE, D_FR_PREVIOUS, D_FR_EXECUTABLE, D_FR_INSTR_PTR, D_FR_LOCALSPLUS, D_FR_OWNER, S, S,
    D_CO_SIZE, D_CO_FILENAME, D_CO_NAME, D_CO_QUALNAME, D_CO_LINETABLE, D_CO_FIRSTLINENO, D_CO_ARGCOUNT, D_CO_LP_NAMES, D_CO_LP_KINDS,
    D_CO_CODE_ADAPTIVE, S,
    S, D_OB_TYPE,                       /* pyobject */
    S, D_TP_NAME, S, S,                 /* type_object */
    S, D_TUPLE_ITEM, S,                 /* tuple_object */
    S, D_LIST_ITEM, S,                  /* list_object */
    S, D_SET_USED, D_SET_TABLE, D_SET_MASK, /* set_object */
    S, S, S,                            /* dict_object */
    S, D_FLOAT_FVAL,                    /* float_object */
    S, S, S,                            /* long_object */
    D_BYTES_SIZE, D_BYTES_OB_SIZE, D_BYTES_SVAL,
    D_U_SIZE, D_U_STATE, D_U_LENGTH, D_U_ASCII_SIZE,
    D_GC_SIZE, D_GC_COLLECTING,
};

/* CPython 3.15 (Include/internal/pycore_debug_offsets.h, as released). */
static const unsigned char layout_315[] = {
    D_COOKIE, D_VERSION, D_FREE_THREADED,
    D_RT_SIZE, S, D_RT_INTERPRETERS_HEAD,
    D_IS_SIZE, D_IS_ID, D_IS_NEXT, D_IS_THREADS_HEAD, S, D_IS_GC, D_IS_MODULES, S, S, D_IS_CEVAL_GIL, D_IS_GIL_STATE, S,
    D_IS_GIL_LOCKED, D_IS_GIL_HOLDER, D_IS_CODE_GEN, S,
    /* thread_state: ... datastack_chunk, status, holds_gil, gil_requested,
     * current_exception, exc_state */
    D_TS_SIZE, S, D_TS_NEXT, D_TS_INTERP, D_TS_CURRENT_FRAME, S, D_TS_LAST_PROFILED,
    D_TS_LAST_PROFILED_SEQ, D_TS_THREAD_ID,
    D_TS_NATIVE_THREAD_ID, D_TS_DATASTACK_CHUNK, S, S, D_TS_GIL_REQUESTED, D_TS_CURRENT_EXC,
    D_TS_EXC_STATE,
    D_EI_EXC_VALUE,                     /* err_stackitem */
    D_FR_SIZE, D_FR_PREVIOUS, D_FR_EXECUTABLE, D_FR_INSTR_PTR, D_FR_LOCALSPLUS, D_FR_OWNER, S, S,
    D_CO_SIZE, D_CO_FILENAME, D_CO_NAME, D_CO_QUALNAME, D_CO_LINETABLE, D_CO_FIRSTLINENO, D_CO_ARGCOUNT, D_CO_LP_NAMES, D_CO_LP_KINDS,
    D_CO_CODE_ADAPTIVE, S,
    S, D_OB_TYPE,                       /* pyobject */
    S, D_TP_NAME, S, S, S, S,           /* type_object (+ tp_basicsize, tp_dictoffset) */
    S, S,                               /* heap_type_object */
    S, D_TUPLE_ITEM, S,                 /* tuple_object */
    S, D_LIST_ITEM, S,                  /* list_object */
    S, D_SET_USED, D_SET_TABLE, D_SET_MASK, /* set_object */
    S, S, S,                            /* dict_object */
    S, D_FLOAT_FVAL,                    /* float_object */
    S, S, S,                            /* long_object */
    D_BYTES_SIZE, D_BYTES_OB_SIZE, D_BYTES_SVAL,
    D_U_SIZE, D_U_STATE, D_U_LENGTH, D_U_ASCII_SIZE, D_U_COMPACT_SIZE,
    D_GC_SIZE, D_GC_COLLECTING,
};

#undef S

/* Each release's order, 3.PY_MINOR_DEBUG to 3.PY_MINOR_LAST in turn: a release added
 * to py.h without its own order here does not build. */
static const struct {
    const unsigned char *order;
    size_t n;
} layouts[] = {
    { layout_313, sizeof layout_313 },
    { layout_314, sizeof layout_314 },
    { layout_315, sizeof layout_315 },
};
_Static_assert(sizeof layouts / sizeof layouts[0] == PY_MINOR_LAST - PY_MINOR_DEBUG + 1,
               "_Py_DebugOffsets: one order for each release read");

#define COMPACT_TAIL 16             /* PyCompactUnicodeObject after its PyASCIIObject:
                                     * utf8_length, utf8 (when not published) */
#define DBG_MAX_FIELDS 256
#define DBG_MAX_STRUCT (1u << 20)   /* no section of the runtime is this large */

static int check(uint64_t off, uint64_t width, uint64_t size, const char *what, char *why, size_t whylen)
{
    if (size == 0 || size > DBG_MAX_STRUCT || off > size || width > size - off) {
        snprintf(why, whylen, "_Py_DebugOffsets: %s offset %llu does not fit its struct of %llu bytes",
                 what, (unsigned long long)off, (unsigned long long)size);
        return REMORA_EVERSION;
    }
    return REMORA_OK;
}

/* Where sys.exc_info() starts (PyThreadState.exc_info) and what a _PyErr_StackItem holds
 * (exc_value, previous_item: 16 bytes from 3.11 on). 3.13 and 3.14 do not publish them:
 * the headers of 3.13.0, 3.13.18 and 3.14.10 all give current_frame 72, exc_info 120 and
 * exc_state 256, so those are used when the target's current_frame is 72 too. 3.15
 * publishes current_exception, exc_state and exc_value; exc_info is the pointer right
 * after current_exception (3.15.2: 136 and 144). Anything else: 0, no exception mode. */
static void exc_layout(py_layout_t *L, const uint64_t *f)
{
    if (L->minor <= 14 && f[D_TS_CURRENT_FRAME] == 72) {
        L->ts_exc_info = 120;
        L->ts_exc_state = 256;
    } else if (L->minor >= 15 && f[D_TS_CURRENT_EXC] != 0 && f[D_EI_EXC_VALUE] == 0 &&
               f[D_TS_EXC_STATE] > f[D_TS_CURRENT_EXC]) {
        L->ts_exc_info = f[D_TS_CURRENT_EXC] + 8;
        L->ts_exc_state = f[D_TS_EXC_STATE];
    } else {
        return;
    }
    L->ei_size = 16;
    L->ei_exc = 0;
    L->ei_previous = 8;
    if (L->ts_exc_state % 8 != 0 || L->ts_size < L->ts_exc_info + 8 ||
        L->ts_size < L->ts_exc_state + L->ei_size) {
        L->ts_exc_info = L->ts_exc_state = 0;   /* does not fit: not this build's layout */
        L->ei_size = L->ei_exc = L->ei_previous = 0;
    }
}

/* dump --locals: the frame's slots and the code object's names and kinds, the objects
 * whose values are shown. Offsets that do not fit their structs cost the locals only.
 * PyCodeObject's co_flags and co_kwonlyargcount, PySetObject's fields (3.13) and the
 * cell's ob_ref are not published: behaviour.c knows them. */
static void locals_layout(py_layout_t *L, const uint64_t *f)
{
    L->fr_localsplus = f[D_FR_LOCALSPLUS];
    L->co_argcount = f[D_CO_ARGCOUNT];
    L->co_localsplusnames = f[D_CO_LP_NAMES];
    L->co_localspluskinds = f[D_CO_LP_KINDS];
    L->tp_name = f[D_TP_NAME];
    L->tuple_items = f[D_TUPLE_ITEM];
    L->list_items = f[D_LIST_ITEM];
    L->float_fval = f[D_FLOAT_FVAL];
    L->set_used = f[D_SET_USED];
    L->set_table = f[D_SET_TABLE];
    L->set_mask = f[D_SET_MASK];
    if (L->fr_localsplus == 0 || L->fr_localsplus % 8 || L->fr_localsplus > L->fr_size ||
        L->co_argcount == 0 || L->co_argcount + 12 > L->co_size ||
        L->co_localsplusnames == 0 || L->co_localsplusnames % 8 || L->co_localsplusnames + 8 > L->co_size ||
        L->co_localspluskinds == 0 || L->co_localspluskinds % 8 || L->co_localspluskinds + 8 > L->co_size ||
        L->tp_name == 0 || L->tp_name > 64 || L->tuple_items == 0 || L->tuple_items > 64 ||
        L->list_items == 0 || L->list_items > 64 || L->float_fval == 0 || L->float_fval > 64 ||
        L->set_used > 64 || L->set_table > 64 || L->set_mask > 64)
        L->fr_localsplus = 0;   /* not this build's layout: no locals */
}

/* Fills L from the fields f of a _Py_DebugOffsets of release 3.minor (version hex).
 * 0, or REMORA_EVERSION with 'why'. */
static int fill(py_layout_t *L, const uint64_t *f, int minor, uint64_t hex, char *why, size_t whylen)
{
    memset(L, 0, sizeof *L);
    L->hexversion = (uint32_t)hex;
    L->major = 3;
    L->minor = minor;
    L->frames_kind = PY_FRAMES_DIRECT;
    L->lines_kind = PY_LINES_LOCATIONS;
    L->tagged_executable = minor >= 14;
    L->owner_shim = 3;   /* FRAME_OWNED_BY_CSTACK (3.13), _INTERPRETER (3.14+) and above */

    L->rt_size = f[D_RT_SIZE];
    L->rt_interpreters_head = f[D_RT_INTERPRETERS_HEAD];
    L->is_size = f[D_IS_SIZE];
    L->is_id = f[D_IS_ID];
    L->is_next = f[D_IS_NEXT];
    L->is_threads_head = f[D_IS_THREADS_HEAD];
    L->is_gil_ptr = f[D_IS_CEVAL_GIL];
    L->is_code_generation = f[D_IS_CODE_GEN];
    /* 3.13 has no code-object generation in its debug offsets, but every new code object
     * takes a number from interp->func_state.next_version. Its offset, 17000, is what
     * 3.13.0 and 3.13.18's headers give; it is used only for interpreter states of the
     * sizes those builds have, so another build falls back to checking code objects. */
    if (minor == 13 && (f[D_IS_SIZE] == 194968 || f[D_IS_SIZE] == 194984))
        L->is_code_version = 17000;
    L->is_gc_collecting = f[D_IS_GC] + f[D_GC_COLLECTING];
    /* sys.modules, for thread names only: an offset that does not fit costs the names */
    L->is_modules = f[D_IS_MODULES];
    if (L->is_modules % 8 != 0 || L->is_modules + 8 > L->is_size)
        L->is_modules = 0;
    /* locked and holder are given inside the interpreter's own _gil: make them relative
     * to struct _gil_runtime_state, which ceval.gil points to (possibly another's) */
    if (f[D_IS_GIL_LOCKED] < f[D_IS_GIL_STATE] || f[D_IS_GIL_HOLDER] < f[D_IS_GIL_STATE]) {
        snprintf(why, whylen, "_Py_DebugOffsets: GIL offsets precede the GIL state");
        return REMORA_EVERSION;
    }
    L->gil_locked = f[D_IS_GIL_LOCKED] - f[D_IS_GIL_STATE];
    L->gil_holder = f[D_IS_GIL_HOLDER] - f[D_IS_GIL_STATE];
    L->ts_size = f[D_TS_SIZE];
    L->ts_next = f[D_TS_NEXT];
    L->ts_interp = f[D_TS_INTERP];
    L->ts_frame = f[D_TS_CURRENT_FRAME];
    L->ts_thread_id = f[D_TS_THREAD_ID];
    L->ts_native_thread_id = f[D_TS_NATIVE_THREAD_ID];
    L->ts_datastack_chunk = f[D_TS_DATASTACK_CHUNK];
    /* 3.15: the frame the interpreter moves to the caller when it pops it, and a
     * counter of those moves (--frame-anchor); 0 when not published */
    L->ts_last_profiled = f[D_TS_LAST_PROFILED];
    L->ts_last_profiled_seq = f[D_TS_LAST_PROFILED_SEQ];
    if (L->ts_last_profiled == 0 || L->ts_last_profiled_seq == 0 || L->ts_last_profiled % 8 ||
        L->ts_last_profiled_seq % 8 || L->ts_last_profiled + 8 > L->ts_size ||
        L->ts_last_profiled_seq + 8 > L->ts_size)
        L->ts_last_profiled = L->ts_last_profiled_seq = 0;
    /* 3.15: the int take_gil() sets while the thread waits for the GIL (THREAD_STATUS_
     * GIL_REQUESTED); 0 when not published (3.13, 3.14) or not fitting */
    L->ts_gil_requested = f[D_TS_GIL_REQUESTED];
    if (L->ts_gil_requested % 4 || L->ts_gil_requested + 4 > L->ts_size)
        L->ts_gil_requested = 0;
    L->fr_size = f[D_FR_SIZE];
    L->fr_previous = f[D_FR_PREVIOUS];
    L->fr_code = f[D_FR_EXECUTABLE];
    L->fr_instr = f[D_FR_INSTR_PTR];
    L->fr_owner = f[D_FR_OWNER];
    L->co_size = f[D_CO_SIZE];
    L->co_filename = f[D_CO_FILENAME];
    L->co_name = f[D_CO_NAME];
    L->co_qualname = f[D_CO_QUALNAME];
    L->co_linetable = f[D_CO_LINETABLE];
    L->co_firstlineno = f[D_CO_FIRSTLINENO];
    L->co_code_adaptive = f[D_CO_CODE_ADAPTIVE];
    L->ob_type = f[D_OB_TYPE];
    L->bytes_size = f[D_BYTES_OB_SIZE];
    L->bytes_sval = f[D_BYTES_SVAL];
    L->u_state = f[D_U_STATE];
    L->u_length = f[D_U_LENGTH];
    L->u_ascii_size = f[D_U_ASCII_SIZE];
    /* PyCompactUnicodeObject adds utf8_length and utf8 to PyASCIIObject (3.12+) */
    L->u_compact_size = f[D_U_COMPACT_SIZE] ? f[D_U_COMPACT_SIZE] : f[D_U_ASCII_SIZE] + COMPACT_TAIL;
    exc_layout(L, f);
    locals_layout(L, f);
    return REMORA_OK;
}

/* Every offset L uses fits the struct the same table declares (f): 0, or
 * REMORA_EVERSION with 'why'. */
static int check_all(const py_layout_t *L, const uint64_t *f, char *why, size_t whylen)
{
    int err;

    if ((err = check(L->rt_interpreters_head, 8, L->rt_size, "runtime.interpreters_head", why, whylen)) ||
        (err = check(L->is_next, 8, L->is_size, "interp.next", why, whylen)) ||
        (err = check(L->is_id, 8, L->is_size, "interp.id", why, whylen)) ||
        (err = check(L->is_threads_head, 8, L->is_size, "interp.threads_head", why, whylen)) ||
        (err = check(L->is_gil_ptr, 8, L->is_size, "interp.ceval_gil", why, whylen)) ||
        (err = check(L->is_gc_collecting, 4, L->is_size, "interp.gc.collecting", why, whylen)) ||
        (err = check(L->is_code_generation, 8, L->is_size, "interp.code_object_generation", why, whylen)) ||
        (err = check(L->gil_locked, 4, 4096, "gil.locked", why, whylen)) ||
        (err = check(L->gil_holder, 8, 4096, "gil.holder", why, whylen)) ||
        (err = check(L->ts_next, 8, L->ts_size, "tstate.next", why, whylen)) ||
        (err = check(L->ts_interp, 8, L->ts_size, "tstate.interp", why, whylen)) ||
        (err = check(L->ts_frame, 8, L->ts_size, "tstate.current_frame", why, whylen)) ||
        (err = check(L->ts_thread_id, 8, L->ts_size, "tstate.thread_id", why, whylen)) ||
        (err = check(L->ts_native_thread_id, 8, L->ts_size, "tstate.native_thread_id", why, whylen)) ||
        (err = check(L->ts_datastack_chunk, 8, L->ts_size, "tstate.datastack_chunk", why, whylen)) ||
        (err = check(L->fr_previous, 8, L->fr_size, "frame.previous", why, whylen)) ||
        (err = check(L->fr_code, 8, L->fr_size, "frame.executable", why, whylen)) ||
        (err = check(L->fr_instr, 8, L->fr_size, "frame.instr_ptr", why, whylen)) ||
        (err = check(L->fr_owner, 1, L->fr_size, "frame.owner", why, whylen)) ||
        (err = check(L->co_filename, 8, L->co_size, "code.filename", why, whylen)) ||
        (err = check(L->co_name, 8, L->co_size, "code.name", why, whylen)) ||
        (err = check(L->co_qualname, 8, L->co_size, "code.qualname", why, whylen)) ||
        (err = check(L->co_linetable, 8, L->co_size, "code.linetable", why, whylen)) ||
        (err = check(L->co_firstlineno, 4, L->co_size, "code.firstlineno", why, whylen)) ||
        (err = check(L->co_code_adaptive, 0, L->co_size, "code.co_code_adaptive", why, whylen)) ||
        (err = check(L->ob_type, 8, 64, "object.ob_type", why, whylen)) ||
        (err = check(L->bytes_size, 8, f[D_BYTES_SIZE], "bytes.ob_size", why, whylen)) ||
        (err = check(L->bytes_sval, 0, f[D_BYTES_SIZE], "bytes.ob_sval", why, whylen)) ||
        (err = check(L->u_state, 4, f[D_U_SIZE], "unicode.state", why, whylen)) ||
        (err = check(L->u_length, 8, f[D_U_SIZE], "unicode.length", why, whylen)) ||
        (err = check(L->u_ascii_size, 0, 256, "unicode.asciiobject_size", why, whylen)) ||
        (err = check(L->u_compact_size, 0, 256, "unicode.compactobject_size", why, whylen)))
        return err;
    return REMORA_OK;
}

int py_layout_from_debug_offsets(proc_t *p, uint64_t runtime, py_layout_t *L, char *why, size_t whylen)
{
    const unsigned char *order;
    size_t n, i;
    uint64_t raw[DBG_MAX_FIELDS];
    uint64_t f[D_NFIELDS];
    uint64_t hex;
    int minor, err;

    memset(f, 0, sizeof f);
    err = proc_read(p, runtime, raw, 2 * sizeof(uint64_t));
    if (err)
        return err;
    if (memcmp(raw, "xdebugpy", 8) != 0) {
        snprintf(why, whylen, "no _Py_DebugOffsets cookie at _PyRuntime");
        return REMORA_EVERSION;
    }
    hex = raw[1];
    minor = (int)((hex >> 16) & 0xff);
    if ((hex >> 24) != 3 || minor < PY_MINOR_DEBUG || minor > PY_MINOR_LAST) {
        snprintf(why, whylen, "Python %d.%d (_Py_DebugOffsets version 0x%08llx) has a layout remora does not know; it reads " PY_READS_TEXT,
                 (int)(hex >> 24), minor, (unsigned long long)hex);
        return REMORA_EVERSION;
    }
    if ((hex & 0xf0) != 0xf0 && (hex & 0xf0) != 0xc0 && minor >= 14) {
        /* alphas and betas changed the struct; only release candidates and finals are known */
        snprintf(why, whylen, "Python %d.%d pre-release 0x%08llx: its _Py_DebugOffsets layout is not known to remora (release candidates and finals are)",
                 3, minor, (unsigned long long)hex);
        return REMORA_EVERSION;
    }
    order = layouts[minor - PY_MINOR_DEBUG].order;
    n = layouts[minor - PY_MINOR_DEBUG].n;
    err = proc_read(p, runtime, raw, n * sizeof(uint64_t));
    if (err)
        return err;
    for (i = 0; i < n; i++)
        if (order[i] != D_SKIP)
            f[order[i]] = raw[i];
    if (f[D_FREE_THREADED]) {
        snprintf(why, whylen, "Python %d.%d is a free-threaded build, which remora does not read yet",
                 3, minor);
        return REMORA_EVERSION;
    }

    if ((err = fill(L, f, minor, hex, why, whylen)) != REMORA_OK)
        return err;
    return check_all(L, f, why, whylen);
}
