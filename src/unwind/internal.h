/* unwind/internal.h — the per-sample reader's state, shared by the files that read a
 * sample, and what the other files of unwind/ share, declared file by file (which file
 * does what: docs/layout.md). Longer than a file should be (~730 lines) because it is
 * the folder's one internal header: declarations and a few inline helpers, a section per
 * file.
 *
 * Not for use outside src/unwind/.
 */
#ifndef REMORA_UNWIND_INTERNAL_H
#define REMORA_UNWIND_INTERNAL_H

#include <stdint.h>
#include <string.h>

#include "unwind.h"
#include "../kern/kern.h"

/* ---- pystr.c ---------------------------------------------------------------- */

/* Reads a str object as UTF-8 into out (at most cap-1 bytes, NUL-terminated; longer
 * strings are cut at UNW_MAX_NAME code points or at cap). Returns 0 with *len, or a
 * REMORA_E* code (REMORA_ECORRUPT for a non-compact or implausible object). */
int pystr_read(proc_t *p, const py_layout_t *L, uint64_t addr, char *out, size_t cap, size_t *len);

/* As pystr_read; with img, also copies the object as read, from its type on (after the
 * reference count) to the end of its data, at most imgcap bytes, into img (*imglen). */
int pystr_read_img(proc_t *p, const py_layout_t *L, uint64_t addr, char *out, size_t cap,
                   size_t *len, unsigned char *img, size_t imgcap, size_t *imglen);

/* As pystr_read, for a str object whose first bytes were read already into head[0..got)
 * (from its start at 'addr'): reads the rest from the target only if it is longer. */
int pystr_from_head(proc_t *p, const py_layout_t *L, uint64_t addr, const unsigned char *head,
                    size_t got, char *out, size_t cap, size_t *len);

/* Reads a bytes object's contents (at most 'max' bytes) into a malloc'd buffer. */
int pybytes_read(proc_t *p, const py_layout_t *L, uint64_t addr, size_t max,
                 unsigned char **out, size_t *len);

/* ---- thread_names.c: thread names (threading's, not the comm) ------------------- */

#define TN_MAX_ENTRIES 65536   /* threading._active entries scanned (1.5 MB, 16 reads): all of
                                 * a registry that held at most 21,845 threads when its table
                                 * was last resized (CPython sizes it to 3 x the count then) */
#define TN_MAX_SCAN 8192       /* entries of sys.modules or a module's dict scanned */
#define TN_REFRESH_NS 500000000 /* the registry is read again this often ... */
#define TN_NEW_NS 20000000     /* ... or, when a thread not in the last reading appears,
                                 * this */

typedef struct thread_names thread_names_t;

thread_names_t *tn_new(void);
void tn_free(thread_names_t *pn);

/* Reads the registry of the interpreter at 'interp' again when it is due: never read,
 * TN_REFRESH_NS since the last reading, or one of idents[0..n) (the threads' pthread
 * ids) was not among those of the last reading and TN_NEW_NS passed. A registry that
 * cannot be read gives no thread name. Returns 0, REMORA_ENOPROC or REMORA_ENOMEM. */
int tn_update(unwinder_t *u, thread_names_t *pn, uint64_t interp, const uint64_t *idents, size_t n,
               int force);

/* The thread name of the thread whose pthread id is 'ident' (UTF-8, valid until the next
 * tn_update), or NULL. */
const char *tn_lookup(const thread_names_t *pn, uint64_t ident);

/* What the readings cost and found. */
typedef struct tn_stats {
    uint64_t readings;          /* times the registry was read */
    uint64_t reads;             /* system calls those readings made */
    uint64_t scans;             /* scans of _active (more than one in a reading: it moved) */
    uint64_t torn;              /* threads left unread after TN_TRIES scans, in all */
    uint64_t unscanned;         /* _active entries past TN_MAX_ENTRIES at the last scan */
    uint64_t ns;                /* time those readings took, in all */
} tn_stats_t;

void tn_get_stats(const thread_names_t *pn, tn_stats_t *out);

/* ---- code.c --------------------------------------------------------------- */

/* An entry is validated by its fingerprint: the code object's name, file and line-table
 * pointers and, from 3.12, its co_version (unique: numbered from a counter when the code
 * object is made); before 3.12, which has nothing unique, also the first bytes of its
 * name and file str objects (all but the reference count), read at the addresses the
 * entry was made from. Freed and reused together, those addresses prove nothing. */
#define UNW_FP_SPAN 64          /* bytes of a code object compared, at most */
#define UNW_FP_STR 248          /* bytes of a str object compared, at most (what the
                                 * first read of a str holds after the reference count) */
#define UNW_FP_MAX (UNW_FP_SPAN + 2 * UNW_FP_STR)   /* a whole fingerprint, read back */
#define UNW_FP_READS 3          /* the reads that fetch it */

typedef struct unw_code {
    uint64_t addr;              /* the code object's address; 0 = empty slot */
    unsigned char fp[UNW_FP_SPAN]; /* the code object's part of the fingerprint */
    uint64_t str_at[2];         /* before 3.12: the function name's and the file's str */
    size_t str_len[2];          /* objects (+8), and the bytes of each compared */
    unsigned char *str_img;     /* owned: those bytes, UNW_FP_STR apart (NULL: 3.12+) */
    uint64_t stamp;             /* the sample in which it was last validated */
    uint64_t gen;               /* the code generation it was last validated at (naming.c) */
    uint64_t fresh;             /* the sample that fetched it (naming.c) */
    uint64_t serial;            /* its own number, new each time an entry is fetched: the
                                 * same serial, the same content (unw_frame_t.code_serial) */
    uint64_t kfp;               /* its fingerprint as the kernel engine mixes it (kernel.c;
                                 * 0: not computed yet) */
    uint64_t kgen;              /* kernel.c, 3.12+: 1 + the code-object counter's value at
                                 * which it was the object at its address (0: none) */
    uint64_t kknown;            /* kernel.c: the fingerprint the kernel's known map has for
                                 * its address (0: not told yet) */
    const char *function;       /* interned: co_qualname (3.11+) or co_name */
    const char *file;           /* interned: co_filename */
    int firstlineno;
    unsigned char *linetable;   /* owned */
    size_t linetable_len;
    int lc_addr[4], lc_line[4]; /* recently computed lines */
    unsigned lc_next;
    int ll_addr[4];             /* recently computed whole locations (unw_frame_location) */
    lt_location_t ll_loc[4];
    unsigned ll_next;
    unsigned char *calls;       /* 3.11: owned bitmap, one bit per code unit: where a frame
                                 * rests while it calls inline (NULL: not known) */
    size_t calls_units;
    uint64_t bytecode;          /* --opcodes: where its bytecode's bytes are in the target
                                 * (3.11+ inside it; 3.9/3.10 its co_code's, read at first
                                 * use), 0 = not known yet */
    size_t bytecode_len;        /* ... and how many */
} unw_code_t;

/* 3.13+: is the frame whose first fr_size bytes are 'fb' an interpreter trampoline (the
 * frame pushed under an __init__ called by a specialized CALL, running the code that
 * checks __init__ returned None)? Its f_funcobj (at 16 from 3.12 on) is None, where a
 * function's frame holds the function. CPython hides it (an "incomplete" frame); so
 * does remora, walking through it as through a C-owned shim. */
static inline int unw_is_trampoline(const py_target_t *t, const unsigned char *fb)
{
    uint64_t funcobj;

    if (t->layout.fr_funcobj == 0 || t->none == 0)
        return 0;
    memcpy(&funcobj, fb + t->layout.fr_funcobj, 8);
    return (funcobj & ~(uint64_t)7) == t->none;
}

/* 3.11: is the code unit at 'idx' one where this code's frame rests while calling a
 * Python function inline? 1 yes, 0 no, -1 not known (no bitmap, or out of range). */
int code_calls_at(const unw_code_t *code, int64_t idx);

/* --opcodes: the name of the instruction at byte 'offset' of the code object's bytecode,
 * read now (the specialised form it has now, 3.11+), or NULL (no such instruction, a
 * failed read, a version without opcode names). */
const char *code_opcode(unwinder_t *u, unw_code_t *e, int offset);

typedef struct code_cache code_cache_t;

code_cache_t *code_cache_new(strtab_t *strs);     /* interns the entries' strings in strs */
void code_cache_free(code_cache_t *c);

/* The entry for the code object at 'addr', read from the target on a miss or when the
 * fingerprint read now differs from the cached one (a freed and reused address). The
 * pointer is valid until the next call. Returns 0 or a REMORA_E* code. */
int code_cache_get(code_cache_t *c, proc_t *p, const py_target_t *t, uint64_t addr,
                   unw_code_t **out);

/* The cached entry for 'addr' without reading the target (it may be stale: validate
 * it with the fingerprint span), or NULL. */
unw_code_t *code_cache_peek(code_cache_t *c, uint64_t addr);

/* Forgets the entry for 'addr' (its fingerprint changed). */
void code_cache_drop(code_cache_t *c, uint64_t addr);

/* The part of a code object that validates a cache entry: offset and length. */
void code_fp_span(const py_layout_t *L, uint64_t *off, size_t *len);

/* The reads that fetch the fingerprint of the code object at 'addr' into buf (UNW_FP_MAX
 * bytes; what no read fills is zeroed): its span and, before 3.12, the str objects its
 * cached entry names. Fills iov[0..UNW_FP_READS); returns how many. */
size_t code_fp_iov(code_cache_t *c, const py_layout_t *L, uint64_t addr, unsigned char *buf,
                   proc_iov_t *iov);

/* Is buf, fetched by code_fp_iov's reads, still e's fingerprint? */
int code_fp_same(const unw_code_t *e, const py_layout_t *L, const unsigned char *buf);

/* The line of byte offset 'addrq' in this code object (cached per entry). */
static inline int code_line(unw_code_t *code, const py_layout_t *L, int addrq)
{
    int line, i;

    /* a frame that has not started (3.9/3.10 f_lasti -1, 3.11+ before the first
     * instruction) is on its first line; -1 also marks an empty slot of the cache */
    if (addrq < 0)
        return code->firstlineno;
    for (i = 0; i < 4; i++)
        if (code->lc_addr[i] == addrq)
            return code->lc_line[i];
    switch (L->lines_kind) {
    case PY_LINES_LNOTAB:
        line = lt_lnotab_line(code->linetable, code->linetable_len, code->firstlineno, addrq);
        break;
    case PY_LINES_310:
        line = lt_310_line(code->linetable, code->linetable_len, code->firstlineno, addrq);
        break;
    default:
        line = lt_locations_line(code->linetable, code->linetable_len, code->firstlineno, addrq);
        break;
    }
    code->lc_addr[code->lc_next & 3] = addrq;
    code->lc_line[code->lc_next & 3] = line;
    code->lc_next++;
    return line;
}


/* ---- the unwinder's handle (threads.c) -------------------------------------- */

struct unwinder {
    proc_t *p;
    const py_target_t *target;
    strtab_t *strs;            /* interned strings (the frames' function and file names,
                                 * asyncio task names); code.c, native.c, tasks.c intern */
    code_cache_t *codes;
    unw_thread_t *threads;
    size_t nthreads, cap_threads;
    unw_frame_t *frames;        /* every thread's frames, back to back */
    size_t cap_frames;
    uint64_t named_ids;         /* the last rd_thread_t.named_id given */
    unsigned char *tsbuf;       /* one thread state */
    struct unw_func *funcs;     /* 3.11: UNW_FUNCS function objects and their code */
    int pthread_tid_off;        /* 3.9/3.10: offset of tid in struct pthread; -1 unknown */
    unsigned want;              /* UNW_WANT_* */
    const char *const *opnames; /* the target version's opcode names (--opcodes), or NULL */
    unsigned tries;             /* unw_set_tries() */
    int64_t reread_ns;          /* unw_set_reread_ns() */
    struct reader *reader;      /* the per-sample reader's state (sample.c) */
    thread_names_t *thread_names;         /* UNW_WANT_THREAD_NAMES: the thread names (threading's) */
    uint64_t *idents;           /* scratch: this sample's pthread ids */
    size_t cap_idents;
    struct unw_native *native;  /* --native (native.c), or NULL */
    struct unw_tasks_state *tasks; /* asyncio tasks (tasks.c), or NULL */
    struct unw_kern *kern;      /* the kernel engine (kernel.c), or NULL */
    unw_stats_t stats;
};


/* ---- --native (native.c) ---------------------------------------------------- */

typedef struct unw_native unw_native_t;

/* Reports the target's ELF files to libdwfl. Returns 0 or as unw_native_enable(). Names
 * are interned in 'names'. */
int native_new(proc_t *p, strtab_t *strs, unw_native_t **out);
void native_free(unw_native_t *n);
/* Each of th[0..nth): its C stack unwound and merged with its frames, which then point
 * into n's buffer (valid until the next call). Out of memory: left as they were. */
void native_merge_all(unw_native_t *n, const unwinder_t *u, unw_thread_t *th, size_t nth);
void native_get_stats(const unw_native_t *n, unw_native_stats_t *out);
#ifdef REMORA_TESTING
/* The benchmark (tests/bench/unwind_ab.c): thread tid's C stack unwound as
 * native_merge_all() does, nothing named; the frames found (0 when none). */
int native_count_frames(unw_native_t *n, pid_t tid);
#endif
/* A kernel tick's C stack (kernel.c; fuzzing too): th's C stack unwound from regs
 * (PROC_NREGS) over the bytes of its stack at [stack_lo, stack_lo + len) alone (no other
 * memory of the target is read: a frame whose caller lies outside ends the walk,
 * UNW_NATIVE_CUT; at most NAT_STACK_MAX bytes), with n's modules, and merged with th's
 * frames by layout L's rules; th's frames then point into n's buffer (valid until the
 * next call). Returns 0 or REMORA_ENOMEM. */
int native_merge_buffer(unw_native_t *n, const py_layout_t *L, const uint64_t *regs,
                        uint64_t stack_lo, const void *stack, size_t len, unw_thread_t *th);
/* Loads every module's CFI and line tables now: the kernel engine's ticks unwind and name
 * from the first round on, and libdwfl's lazy loads (tens of ms, decompressing line
 * tables) made the first half second's rounds late. */
void native_warm(unw_native_t *n);
/* The word at the thread state's ts_frame offset, read with the copy the next
 * native_merge_buffer() unwinds (3.11: the _PyCFrame chain's head), taken in place of a
 * read of the target by that call alone. */
void native_set_ts_frame(unw_native_t *n, uint64_t word);
/* The same for a tick with no C stack to unwind (its copy lost): UNW_NATIVE_NONE, then
 * th's Python frames. Returns 0 or REMORA_ENOMEM. */
int native_merge_none(unw_native_t *n, const py_layout_t *L, unw_thread_t *th);

/* 3.11: a function object and the code object it ran when last read (walk.c). */
typedef struct unw_func {
    uint64_t func, code;
} unw_func_t;

#define UNW_FUNCS_BITS 10
#define UNW_FUNCS (1u << UNW_FUNCS_BITS)

/* The interpreter and thread-state lists, walked the slow way: each thread's tstate,
 * interpreter and native id (no stacks). Returns 0 or a REMORA_E* code. */
int threads_list(unwinder_t *u, unw_thread_t **threads, size_t *n);

#define UNW_MAX_EXC_ITEMS 64    /* exception-stack items walked per thread */

/* Whether the thread whose state was copied into ts[0..ts_size) from 'tstate' is handling
 * an exception, as sys.exc_info() decides it there: from the item tstate->exc_info points
 * to, along previous_item, the first item whose exception is neither NULL nor None. Items
 * inside the copy are read there, others (generators, coroutines) from the target, at
 * most UNW_MAX_EXC_ITEMS. Returns 1 or 0; -1 when the layout lacks the fields, a read
 * failed or the chain is longer than the bound. *at: the address of the item handling
 * one (0 if none). */
int unw_exc_state(unwinder_t *u, uint64_t tstate, const unsigned char *ts, uint64_t *at);

/* ---- pyobj.c: one decoder per object kind; objects read the slow way ----------- */

#define PYO_MAX_ITEMS 65536         /* entries of a dict read, at most */
#define PYO_MAX_ATTRS 4096          /* keys a type's instances share, at most */
#define PYO_MAX_SET (1u << 20)      /* slots of a set's table read, at most */

/* Reads iov[0..n), a segment that cannot be read zeroed (after reading what of it lies
 * in its first page: a small object just before an unmapped page); halves a failed batch
 * down to single segments. 0, REMORA_ENOPROC, REMORA_ENOMEM or REMORA_EPERM. */
int pyo_readv_zero(proc_t *p, const proc_iov_t *iov, size_t n);
/* The items of the dict at 'dict' (its keys and values, empty slots left out), at most
 * max into keys[] and vals[]. 0, REMORA_ECORRUPT (not a dict, or a check failed),
 * REMORA_ENOMEM (larger than PYO_MAX_ITEMS) or a read error. */
int pyo_dict_items(unwinder_t *u, uint64_t dict, uint64_t *keys, uint64_t *vals, size_t max,
                   size_t *n);
/* The value under the ASCII str key 'key': 0, REMORA_EFAULT when there is none, or as
 * pyo_dict_items. */
int pyo_dict_get(unwinder_t *u, uint64_t dict, const char *key, uint64_t *val);
/* sys.modules[name].__dict__ of the interpreter at 'interp'. As pyo_dict_get. */
int pyo_module_dict(unwinder_t *u, uint64_t interp, const char *name, uint64_t *dict);
/* An instance attribute of an object of a heap type: from its dict (at tp_dictoffset, or
 * the managed one of 3.11+) or its values (the type's shared keys). As pyo_dict_get. */
int pyo_attr(unwinder_t *u, uint64_t obj, const char *name, uint64_t *val);
/* The keys of the set at 'set' (its table's non-empty slots, the dummy among them: type-
 * check each), at most max. 0 or a code. */
int pyo_set_keys(unwinder_t *u, uint64_t set, uint64_t *keys, size_t max, size_t *n);
/* The items of the list at 'list', at most max. 0 or a code. */
int pyo_list_items(unwinder_t *u, uint64_t list, uint64_t *items, size_t max, size_t *n);
/* Is the object at addr the ASCII str 'want'? 1 or 0. */
int pyo_str_is(unwinder_t *u, uint64_t addr, const char *want);

/* The decoders: one per object kind, over bytes already read (h[0..got), from the
 * object's start), used by every reader of objects. Nothing is read from the target. */

#define PYO_KEYS_LOG2_MAX 26        /* a dict's keys table: 2^26 slots at most */
#define PYO_PRE_MAX 64              /* bytes before an object read, at most (inst_pre) */

/* A dict's keys object (PyDictKeysObject), decoded from its header. */
typedef struct pyo_keys {
    uint64_t size;                  /* slots: a power of 2, 8 to 2^PYO_KEYS_LOG2_MAX */
    uint64_t entries;               /* where entries[] begins, from the keys object */
    uint64_t esz;                   /* bytes an entry: 24 (hash, key, value) or 16 */
    uint64_t koff, voff;            /* the key and the value in an entry */
    int64_t nent;                   /* dk_nentries: entries used, 0 to size */
    unsigned kind;                  /* 3.11+: dk_kind (0: DICT_KEYS_GENERAL); 0 before */
} pyo_keys_t;

/* Decodes the keys object whose header is kh[0..got). 0 or REMORA_ECORRUPT. */
int pyo_keys(const py_layout_t *L, const unsigned char *kh, size_t got, pyo_keys_t *k);

/* An int's count of 30-bit digits and sign, from its header h (at least L->ob_size + 8
 * bytes; its type not checked: a bool's too). 0, or REMORA_ECORRUPT (a tag no int has). */
int pyo_long_digits(const py_layout_t *L, const unsigned char *h, uint64_t *nd, int *neg);
/* A non-negative int below 2^64 (three digits at most) whose first got bytes are h, its
 * type checked. 0 or REMORA_ECORRUPT. */
int pyo_long(const unwinder_t *u, const unsigned char *h, size_t got, uint64_t *v);

/* A compact str's header. */
typedef struct pyo_str {
    unsigned kind;                  /* bytes a code point: 1, 2 or 4 */
    int ascii;
    int64_t length;                 /* code points, >= 0 */
    uint64_t data;                  /* where its code points begin, from the object */
} pyo_str_t;

/* Decodes the header of the str whose first got bytes are h (its type not checked).
 * 0, or REMORA_ECORRUPT (not compact, a kind or length no str has, or bytes missing). */
int pyo_str(const py_layout_t *L, const unsigned char *h, size_t got, pyo_str_t *s);
/* Is h[0..got) the head of the compact ASCII str 'want' (its type checked)? 1 or 0. */
int pyo_str_is_head(const unwinder_t *u, const unsigned char *h, size_t got, const char *want);

/* A heap type, as its instances' attributes are found through it. */
typedef struct pyo_type {
    uint64_t flags, basicsize;      /* tp_flags, tp_basicsize */
    int64_t dictoffset;             /* tp_dictoffset */
    uint64_t keys;                  /* ht_cached_keys: the keys its instances share */
    int managed;                    /* 3.11+: its instances' dict is before them (the
                                     * layout's inst_dict), not at tp_dictoffset */
} pyo_type_t;

/* Decodes the type whose first got (at least L->ht_cached_keys + 8) bytes are th.
 * 0, or REMORA_ECORRUPT (not a heap type, a size no instance has). */
int pyo_type(const py_layout_t *L, const unsigned char *th, size_t got, pyo_type_t *ty);
/* Where the instance at obj of type ty keeps its attributes, from pre (the L->inst_pre
 * bytes before obj): *dict (its dict) or *vals (its values[]: the type's shared keys
 * index them), either 0; or *dict_at, the address of its dict pointer (tp_dictoffset),
 * for the caller to read. 0, or REMORA_ECORRUPT (no dict where one is looked for). */
int pyo_inst(const py_layout_t *L, const pyo_type_t *ty, uint64_t obj, const unsigned char *pre,
             uint64_t *dict, uint64_t *vals, uint64_t *dict_at);

/* The readers: one per container kind, over the target's memory through a pyo_rd_t, each
 * in three steps: open (the header decoded, every length checked, the entries to read
 * capped at 'max'), load (the entries read, in one or two reads, into the caller's
 * buffer of 'need' bytes), next (entry by entry, empty ones left out). Used by every
 * reader of objects: the slow readers below, thread names, locals and tasks. */

/* How a reader reads the target: proc_read, or a caller's own (locals count each read). */
typedef struct pyo_rd {
    int (*read)(void *ctx, uint64_t addr, void *buf, size_t len);
    void *ctx;
} pyo_rd_t;

/* A pyo_rd_t that reads p with proc_read. */
pyo_rd_t pyo_rd_proc(proc_t *p);

/* A dict's entries, being read (PyDictKeysObject: 3.9/3.10 sized and 3.11+ log2
 * headers, general and unicode-only entries; combined or split tables). */
typedef struct pyo_dict {
    pyo_keys_t k;
    uint64_t keys;                  /* the keys object */
    uint64_t values;                /* a split table's values[] (past its header), or 0 */
    size_t n;                       /* entries to read: dk_nentries, at most max */
    size_t need;                    /* bytes pyo_dict_load reads: n entries, n values */
    const unsigned char *buf;       /* what it read (the caller's) */
    size_t i;                       /* the next entry */
} pyo_dict_t;

/* One entry of a dict. */
typedef struct pyo_item {
    uint64_t key, value;            /* key nonzero; value 0 in a split table's shared
                                     * keys, or a deleted split entry */
    uint64_t slot;                  /* where the value was read in the target */
    size_t index;                   /* the entry's index in the table */
} pyo_item_t;

/* Opens the keys object at 'keys' (its header read through rd); 'values' is the dict's
 * ma_values (0: a combined table, or only the keys wanted). 0, REMORA_ECORRUPT (a check
 * failed: unaligned, a header no keys object has, a table that wraps the address space)
 * or rd's error. */
int pyo_keys_open(const pyo_rd_t *rd, const py_layout_t *L, uint64_t keys, uint64_t values,
                  size_t max, pyo_dict_t *d);
/* Opens the dict object at 'dict' (its type checked against the target's dict type), as
 * pyo_keys_open. */
int pyo_dict_open(const pyo_rd_t *rd, const py_target_t *T, uint64_t dict, size_t max,
                  pyo_dict_t *d);
/* Reads d's entries (and values) into buf[0..d->need). 0 or rd's error. */
int pyo_dict_load(const pyo_rd_t *rd, pyo_dict_t *d, unsigned char *buf);
/* The next entry with a key (in table order) into *it: 1, or 0 at the end. */
int pyo_dict_next(pyo_dict_t *d, pyo_item_t *it);

#define PYO_SET_LOG2_MAX 30         /* a set's table: 2^30 slots at most */

/* A set's table, being read (PySetObject: entries {key, hash}). */
typedef struct pyo_set {
    uint64_t table;                 /* setentry[slots] */
    uint64_t slots;                 /* mask + 1: a power of 2, 8 to 2^PYO_SET_LOG2_MAX */
    int64_t used;                   /* keys it holds, 0 to slots */
    size_t n;                       /* slots to read: at most max */
    size_t need;                    /* bytes pyo_set_load reads */
    const unsigned char *buf;
    size_t i;
} pyo_set_t;

/* Opens the set whose header is h[0..got) (its type not checked). 0 or REMORA_ECORRUPT. */
int pyo_set_open(const py_layout_t *L, const unsigned char *h, size_t got, size_t max,
                 pyo_set_t *s);
/* Reads s's slots into buf[0..s->need). 0 or rd's error. */
int pyo_set_load(const pyo_rd_t *rd, pyo_set_t *s, unsigned char *buf);
/* The next key (empty slots and the dummy of a removal left out) into *key: 1, or 0 at
 * the end. */
int pyo_set_next(pyo_set_t *s, uint64_t *key);

/* A tuple's or a list's items, from its header h[0..got) at obj: *n (ob_size) and *items,
 * where its item pointers are. 0 or REMORA_ECORRUPT (a negative size, a list's items
 * unaligned). */
int pyo_seq(const py_layout_t *L, uint64_t obj, const unsigned char *h, size_t got, int is_list,
            uint64_t *items, int64_t *n);

/* ---- tasks.c, tasks_running.c (tasks_sample), tasks_lists.c (tasks_walk_test) ---- */

void tasks_free(struct unw_tasks_state *tk);
/* UNW_WANT_TASKS: each thread's running task and how many of its frames are the task's
 * (unw_thread_t.task, task_frames), after a sample's frames are named. 0 or an error. */
int tasks_sample(unwinder_t *u, unw_thread_t *th, size_t n);
/* The kernel engine, a stack read at one instant (a tick's, a switch-out's): th's running
 * task and task_frames from its frames' addresses and the last unw_tasks() reading
 * (round_task: the task the round's reading named for the thread, a hint that the
 * reading is stale). No system call. */
void tasks_from_frames(unwinder_t *u, unw_thread_t *th, uint64_t round_task, const kern_task_t *tick);
/* The layout's rt_* fields (the running task read at each tick, --async) for this target,
 * as far as the last task-list reading found them (before 3.14: _current_tasks); rt_kind
 * 0 when they are not known. */
void tk_kern_layout(const unwinder_t *u, kern_layout_t *kl);
#ifdef REMORA_TESTING
/* Unit tests: walks the 3.14+ task lists lists[0..2*nlists) (each a head's address and
 * its first node) with layout a, as unw_tasks() does: 0 with *n pending tasks (*moved: a
 * back link did not hold), REMORA_ENOMEM past UNW_MAX_TASKS, or a read error. */
int tasks_walk_test(unwinder_t *u, const py_asyncio_t *a, const uint64_t *lists, size_t nlists,
                    size_t *n, int *moved);
#endif

/* ---- naming.c: frame naming ---- */

/* The line offset of a frame's instruction: f_lasti (3.9: bytes, 3.10: code units) or
 * the instruction pointer's distance from the first code unit (3.11+); -1 when it has not
 * started or is out of range. Inline: naming.c calls it per frame, per sample. */
static inline int frame_addrq(const py_layout_t *L, uint64_t code, uint64_t instr)
{
    if (L->frames_kind == PY_FRAMES_OBJECTS) {
        int32_t lasti = (int32_t)(uint32_t)instr;
        if (lasti < -1 || lasti > 1 << 29)      /* -1: not started */
            lasti = -1;
        return L->lines_kind == PY_LINES_310 ? lasti * 2 : lasti;
    } else {
        int64_t off = (int64_t)(instr - (code + L->co_code_adaptive));
        return off < -2 || off > (int64_t)1 << 30 ? -1 : (int)(off / 2) * 2;
    }
}

/* Frees the per-sample reader's state (sample.c). */
void unw_reader_free(struct reader *r);


#define RD_MIN_COPY 1024u
#define RD_MAX_COPY (256u << 10)
/* 3.11/3.12: the C stack copied around the current frame's read, to find it through the
 * cframe current at that moment (copy.c, copy_cframe_settle) */
#define RD_CFW_MAX 8192u
#define RD_CALL_LOCALS 8u          /* words of a calling frame's locals kept (walk_keep_calls) */
#define RD_BLOCK 4096u
#ifndef RD_GAP
#define RD_GAP 512u               /* bytes between two frames still read as one range */
#define RD_EXC_TO_FRAME 96u       /* 3.11+: a generator's exception state lies this close
                                   * before its frame (gi_exc_state ... gi_iframe: 32 bytes
                                   * in 3.11-3.13); another generator's frame lies farther.
                                   * 3.9/3.10: this close after the generator object's start
                                   * (gi_exc_state at 64 and 56) */
#endif
#define RD_CHUNK_HDR 24u          /* struct _PyStackChunk: previous, size, top */
#define RD_FREED_RUN 8            /* 3.9/3.10: freed frames in a row a walk goes through */
#define RD_SPEC 512               /* speculative blocks per thread, at most */
#define RD_SPEC_CODES 512         /* code objects validated in the first read */

typedef struct rd_interp {
    uint64_t addr;
    int64_t id;
    uint64_t gil;                   /* 3.12+: the struct _gil_runtime_state in use */
    size_t first, count;            /* its threads in the thread cache */
    uint64_t head, next;            /* read this sample */
    int32_t locked, gc;
    uint64_t holder;
    uint64_t gen;                   /* code-object counter (3.13+), read after the copies */
    uint64_t sw;                    /* the GIL's switch_number, read this sample */
    int sw_ok;                      /* ... when its offset is known */
    uint64_t last_sw, last_holder;  /* sw and holder as the last sample read them */
} rd_interp_t;

typedef struct rd_block {
    uint64_t addr;
    size_t len;
    unsigned char *one, *two;       /* read while walking, re-read to validate */
    size_t cap;
} rd_block_t;

/* The kernel engine's last look at a thread's time off a CPU (kernel.c, kern_off_weigh): when
 * a round looked (0: no look that counts), the thread's CPU time then, and its time off a
 * CPU not yet counted by a sample (ns, may be < 0). */
typedef struct kern_offw {
    int64_t ns;
    uint64_t cpu;
    int64_t carry;
} kern_offw_t;

typedef struct rd_thread {
    uint64_t tstate;
    size_t interp;
    pid_t native_id;
    unsigned char *ts;              /* this sample's copy of the thread state */
    uint64_t cframe, cur_spec;      /* 3.11/3.12: cframe and its current_frame */
    uint64_t cur_mid;               /* the current frame, read between the two copies */
    int mid_ok;                     /* 3.9/3.10: cur_mid was read this sample */
    uint64_t cur0;                  /* the current frame the state names (through its cframe) */
    uint64_t cur_end;               /* and again after the second */
    uint64_t cf_end;                /* 3.11/3.12: the thread state's cframe, read last */
    uint64_t cf_mid;                /* 3.11/3.12: ... and just before cur_mid */
    uint64_t cfw_lo;                /* 3.11/3.12: the window of the C stack that holds the
                                     * current_frame of the cframes seen (cfw_len bytes from
                                     * cfw_lo, at most RD_CFW_MAX; 0: none yet) */
    size_t cfw_len;
    unsigned char *cfw;             /* ... its copies: with cur_mid, then with cur_end */
    int cfw_hit;                    /* cur_mid was read through the cframe current then */
    uint64_t ds_end[2];             /* 3.11+: its datastack_chunk and _top, read last (0: not
                                     * read this sample) */
    uint64_t pthread_seen;          /* 3.9/3.10: its pthread_t last sample (0: not yet) */
    int32_t tid_now, tid_end;       /* 3.9/3.10: the tid in that pthread, read this sample
                                     * with the state and again after the thread's copies */
    int unstarted;                  /* its thread has not started: left out of this round
                                     * (tc_settle_ids) */
    uint64_t exc_item;              /* the exception-state item handling one at the round's
                                     * start (--mode exception), or 0 */
    uint64_t late_pt, late_nid;     /* its ids read again after frames read late (ident_*) */
    int32_t late_tid;
    uint64_t chunk;                 /* the chunk copied (0: none yet) */
    uint64_t base;                  /* where the copies start: the chunk, or the anchor */
    size_t chunk_size;              /* from its header, once copied */
    size_t copy_len, copied;        /* bytes to copy next time; bytes copied now */
    unsigned char *a, *b;           /* the two copies */
    size_t cap;
    /* the frames of its last sample, innermost first: the calls it was making a round
     * before (walk_moment_cut); 3.11+ with each frame in the chunk the first nloc words of
     * its locals (below its callee's frame; call_locals()), which tell one call from
     * another at the same place (nloc 0: not known) */
    struct rd_call { uint64_t addr, code, instr, locals; unsigned nloc; } *calls;
    size_t ncalls, cap_calls;
    rd_block_t *sb;               /* frames outside the chunk last time, read again */
    size_t nsb, cap_sb;
    /* --frame-anchor (3.15): the interpreter keeps last_profiled_frame at a frame remora
     * wrote there, moves it to the caller when that frame returns and counts the moves
     * (seq). While it still names 'anc' with the same seq, every frame below anc is as
     * it was when remora last read it after writing: only anc and above are copied. */
    int anc_state;                  /* ANC_NONE, ANC_WRITTEN, ANC_CACHED, ANC_OFF */
    uint64_t anc, anc_seq;          /* ANC_WRITTEN: what was written, seq seen then;
                                     * ANC_CACHED: the anchor frame and its seq */
    uint64_t lp_end[2];             /* last_profiled_frame and seq, read after the copies */
    unsigned char tail[64];         /* 3.15 with an anchor: current_frame through seq, one read */
    size_t tail_len;
    struct walked *below;           /* ANC_CACHED: the frames below anc, innermost first */
    size_t nbelow, cap_below;
    uint64_t below_gen;             /* counts the times below[] was filled anew */
    /* The frames below the anchor as named (name_frames), innermost first, kept while
     * below[] holds them (named_gen == below_gen): below[] loses only its innermost
     * frames while it holds (anchor_before), so the last c named are the last c cached
     * frames of the walk. named_id tells this memory from every other one, for
     * unw_thread_t.held_id; codes[] the distinct code objects (and their cache serials)
     * they name, validated once each instead of per frame. */
    unw_frame_t *named;
    size_t nnamed, cap_named;
    uint64_t named_gen, named_id;
    struct rd_named_code { uint64_t code, serial; } *named_codes;
    size_t nnamed_codes, cap_named_codes;
    size_t raw_cached;              /* of this sample's raw frames, the outermost ones that
                                     * came from below[] (keep_raw) */
    /* A parked thread: its last consistent walk, taken while another thread held the
     * GIL, kept with that GIL's last holder and switch count. While both stay the same
     * this thread has not taken the GIL, so its frames have not moved: the walk is
     * reused and nothing of its stack is read (see parked_holds()). */
    struct walked *saved;
    size_t nsaved, cap_saved;
    uint64_t kept;                  /* the reader's stamp of the last try that served it
                                     * from its saved walk (read_parked) */
    int saved_ok, reuse;            /* a walk is saved; this sample expects to reuse it */
    uint64_t saved_sw, saved_holder, saved_cur, saved_cframe;
    /* this sample's frames, until named: r->raw[raw_first .. raw_first + raw_n) */
    size_t raw_first, raw_n;
    int partial;                    /* the frames are the outer ones known (unw_thread_t) */
    uint64_t root, root_code;       /* its outermost frame and code object at its
                                     * last whole reading (0: none yet) */
    int known;                      /* a whole stack was read since the thread (its state
                                     * and chunk) was first seen: before that, a partial one
                                     * may be a freed thread's frames (C stacks and chunks
                                     * are reused at the same addresses by the next thread) */
    /* the kernel engine (kernel.c) */
    struct rd_kern {
        pid_t tid;                  /* the tid and state it was told this thread runs on */
        uint64_t ts;
        /* its idle test for a thread the table does not know (kern_cpu_state): the state
         * /proc gave, and the thread's slot as it read just before that (any switch of the
         * thread since would have written the slot) */
        pid_t st_tid;               /* 0: nothing kept */
        int st_on;                  /* /proc said 'R' */
        uint32_t st_seq, st_owner;
        uint64_t st_ns;
        /* its ticks held up (kern_cpu_state): its CPU time when a round last read it so,
         * and the thread that was */
        pid_t behind_tid;
        uint64_t behind_cpu;
        /* its time off a CPU (kern_cpu_state): the thread the look below is of */
        pid_t off_tid;
        kern_offw_t off;
        /* found off a CPU by the table at this round, the time of the switch it left its
         * CPU at (the stack walked then is its stack now: unw_kern_switch_stack); 0: none */
        uint64_t sw_since;
    } kern;
    /* the idle test without the kernel engine (idle.c) */
    struct rd_idle {
        pid_t tid;                  /* the thread the fields below are of (0: none yet) */
        int state;                  /* IDLE_UNKNOWN, IDLE_ASLEEP, IDLE_RUNNING */
        int sched;                  /* run and arrivals below were read before the state */
        uint64_t run, arrivals;     /* /proc/.../schedstat at the last look */
        uint64_t round;             /* the round of the last decision */
        uint64_t due;               /* an asleep thread with no sign of running is looked
                                     * at again from this round on */
        uint64_t warm;              /* looked at every round until this round */
        uint64_t top, instr;        /* its innermost frame at the last decision */
        int on;                     /* the last decision: on a CPU (or runnable) */
    } idle;
} rd_thread_t;

/* A frame walked this sample, to be named once the code objects are validated. */
typedef struct rd_raw {
    uint64_t addr, code, instr;
    int entry;                      /* 3.11: the first frame of an eval loop */
    int eval_entry;                 /* unw_frame_t.entry */
    uint64_t below;                 /* unw_frame_t.below */
} rd_raw_t;

enum { ANC_NONE, ANC_WRITTEN, ANC_CACHED, ANC_OFF };
#define ANC_REWRITE 32              /* frames walked above the anchor before moving it up */

enum { FROM_CHUNK, FROM_BLOCK, FROM_KNOWN };

/* A frame header's fields, as the one frame decoder (walk.c) reads them. */
typedef struct rd_fields {
    uint64_t prev, code, instr;
    int shim;                       /* a C-owned frame or an interpreter trampoline */
    int entry;                      /* 3.11: is_entry */
    int gen;                        /* a generator's or coroutine's frame */
    uint64_t genobj;                /* 3.9/3.10: f_gen, the generator it runs in (or 0) */
    int freed;                      /* 3.9/3.10: a frame object with no reference */
} rd_fields_t;

/* One frame walked: where its link fields came from, to compare with a second copy. */
typedef struct walked {
    uint64_t addr, prev, code, instr;
    int from;                       /* where its header was read: FROM_CHUNK (the chunk's
                                     * copies), FROM_BLOCK (r->blocks[idx], read this sample)
                                     * or FROM_KNOWN (tc->sb[idx], remembered blocks) */
    unsigned idx;
    int shim;                       /* a C-owned frame: walked through, not reported */
    int entry;                      /* 3.11: the first frame of an eval loop (is_entry) */
    int gen;                        /* a generator's or coroutine's frame */
    uint64_t genobj;                /* 3.9/3.10: f_gen, the generator it runs in (or 0) */
    int cached;                     /* --frame-anchor: below the anchor, from the cache */
} walked_t;

/* A request's address and index, sorted by batch_merge(). */
typedef struct rd_key {
    uint64_t addr;
    size_t req;
} rd_key_t;

/* The round's first reading of a thread whose stack moved, kept while it is read again
 * (walk_moment_save, walk_moment_cut). */
typedef struct rd_moment {
    /* 3.11+: the first copies of the chunk one after the other, where they start, the
     * bytes in each (0: none kept), the data stack's top both before and after them, and
     * the lower current frame in the chunk (UINT64_MAX: outside it) */
    unsigned char *copies;
    size_t cap, len;
    uint64_t base, top, cur;
    /* 3.9/3.10: the frames that reading knew, innermost first (UNW_MAX_DEPTH), and
     * whether the innermost was the current frame then (else it was calling) */
    struct walked *walk;
    size_t nwalk;
    int walk_top;
} rd_moment_t;

typedef struct reader {
    int valid;
    uint64_t rt_head;               /* the runtime's first interpreter, read this sample */
    uint32_t gen_global;            /* 3.12: _Py_next_func_version, read after the copies */
    uint64_t gen_last;              /* the counters as the last sample read them, hashed
                                     * (0: not read) */
    rd_interp_t *interps;
    size_t ninterps, cap_interps;
    rd_thread_t *threads;
    size_t nthreads;
    proc_iov_t *iov;
    size_t cap_iov;
    proc_iov_t *req;                /* small reads to merge when near each other */
    size_t nreq, cap_req;
    unsigned char *stage;           /* where merged reads land before being scattered */
    size_t cap_stage, nstage;       /* its size, and the bytes placed this read */
    size_t *staged;                 /* iovs reading into stage: offsets until staged_fix() */
    size_t nstaged, cap_staged;
    rd_key_t *order;                /* batch_merge(): requests sorted by address */
    size_t cap_order;
    walked_t *walk;                 /* UNW_MAX_DEPTH */
    walked_t *walk2;                /* UNW_MAX_DEPTH: a first reading's frames, kept */
    rd_moment_t moment;             /* the round's first reading of a moved stack */
    uint64_t *scratch;              /* UNW_MAX_DEPTH */
    rd_block_t *blocks;           /* frames read outside the chunk this sample */
    size_t nblocks, cap_blocks;
    size_t freed_below;             /* 3.9/3.10: walk[0 .. freed_below) is above a frame
                                     * freed when read (walk_frames): not known */
    int top_moved;                  /* 3.11+, walk_check: the frame walked from is known but
                                     * what runs above it moved: partial though keep is 0 */
    uint64_t *codes;                /* unique code addresses of this sample */
    size_t ncodes, cap_codes;
    unsigned char *fps;             /* their fingerprints, read back */
    size_t cap_fps;
    uint64_t *spec_codes;           /* last sample's codes (sorted), validated in the first read */
    unsigned char *spec_fps;
    size_t nspec_codes;
    uint64_t stamp;
    uint64_t round;                 /* unw_sample() calls, from 1 (idle.c's clock) */
    int late;                       /* frames were read after the first read this sample */
    size_t fresh;                   /* threads dropped for a code object read this sample */
    rd_raw_t *raw;                  /* every thread's frames this sample, back to back */
    size_t nraw, cap_raw;
} reader_t;

/* The member at byte 'off' of a local copy of the target's memory, one accessor per
 * width (CPython's GET_MEMBER): unaligned, native byte order. The caller has checked
 * that off + the width lies inside the copy. */
#define GET_MEMBER(name, type)                                              \
    static inline type name(const unsigned char *b, uint64_t off)           \
    {                                                                       \
        type v;                                                             \
        memcpy(&v, b + off, sizeof v);                                      \
        return v;                                                           \
    }
GET_MEMBER(get_u64, uint64_t)
GET_MEMBER(get_i64, int64_t)
GET_MEMBER(get_u32, uint32_t)
GET_MEMBER(get_i32, int32_t)
GET_MEMBER(get_u16, uint16_t)
#undef GET_MEMBER

static inline uint8_t get_u8(const unsigned char *b, uint64_t off)
{
    return b[off];
}

static inline int8_t get_i8(const unsigned char *b, uint64_t off)
{
    return (int8_t)b[off];
}

/* Code point i of a str's data, 'kind' bytes a code point (1, 2 or 4: pyo_str_t.kind);
 * the one decoder of a str's text (pystr.c's names, locals' reprs). */
static inline uint32_t pyo_str_cp(const unsigned char *data, unsigned kind, uint64_t i)
{
    return kind == 1 ? data[i] : kind == 2 ? get_u16(data, 2 * i) : get_u32(data, 4 * i);
}

/* A frame's instruction: f_lasti (an int) on 3.9/3.10, a pointer on 3.11+. */
static inline uint64_t get_instr(const py_layout_t *L, const unsigned char *fb)
{
    if (L->frames_kind != PY_FRAMES_OBJECTS)
        return get_u64(fb, L->fr_instr);
    return get_u32(fb, L->fr_instr);
}

static inline int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* ---- batch.c ---- */

/* Queues a read (an iovec at *n, then ++*n) or a request to merge (batch_merge). Return
 * 0 or -1 (no memory). Inline: a sample queues a few dozen. */
static inline int batch_iov(reader_t *r, size_t *n, uint64_t addr, void *buf, size_t len)
{
    if (remora_grow((void **)&r->iov, &r->cap_iov, *n + 1, sizeof *r->iov))
        return -1;
    r->iov[*n].addr = addr;
    r->iov[*n].buf = buf;
    r->iov[*n].len = len;
    (*n)++;
    return 0;
}

static inline int batch_req(reader_t *r, uint64_t addr, void *buf, size_t len)
{
    if (remora_grow((void **)&r->req, &r->cap_req, r->nreq + 1, sizeof *r->req))
        return -1;
    r->req[r->nreq].addr = addr;
    r->req[r->nreq].buf = buf;
    r->req[r->nreq].len = len;
    r->nreq++;
    return 0;
}


int batch_fp(unwinder_t *u, reader_t *r, uint64_t code, unsigned char *buf);
int batch_merge(reader_t *r, size_t *n, size_t first);
void batch_reset(reader_t *r);
void batch_fix(reader_t *r);
void batch_scatter(reader_t *r);

/* ---- threadcache.c ---- */

void tc_fini(rd_thread_t *tc);
int tc_rebuild(unwinder_t *u, reader_t *r);
int tc_lists_unchanged(const py_layout_t *L, const reader_t *r);
void tc_settle_ids(unwinder_t *u, reader_t *r);
#define PTHREAD_SCAN 2048           /* bytes of struct pthread searched for the tid */
int pthread_tid_offset(const unsigned char *scan, const uint64_t *pthreads, size_t n,
                       const pid_t *tids, size_t ntids, pid_t pid);

/* ---- reading.c ---- */

/* Reads thread i's stack into r->raw (tc->raw_first, raw_n). Returns 0 (th->error set
 * when it could not be read; tc->partial when only its outer frames are known), or
 * REMORA_ENOPROC / REMORA_ENOMEM, which end the round. */
int read_thread(unwinder_t *u, reader_t *r, size_t i);

/* ---- copy.c ---- */

/* 3.11/3.12: is cframe cf one of a nested eval loop (on the C stack), not the thread
 * state's own root cframe? */
static inline int cf_nested(const py_layout_t *L, const rd_thread_t *tc, uint64_t cf)
{
    return cf < tc->tstate || cf - tc->tstate >= L->ts_size;
}
/* Does the window of tc's C stack (copy.c) hold cframe cf's current frame? */
int copy_cfw_holds(const py_layout_t *L, const rd_thread_t *tc, uint64_t cf);
/* The window grown to hold cf's (a nested eval loop's), at most RD_CFW_MAX bytes kept on
 * the side of the newest. 0, or -1 out of memory. */
int copy_cfw_learn(const py_layout_t *L, rd_thread_t *tc, uint64_t cf);
/* After a read of tc's copies: its current frame through the cframe current between
 * them (tc->cfw_hit), from the window's copies when that is not the one read through;
 * the cframes seen learnt. 0, or -1 out of memory. */
int copy_cframe_settle(const py_layout_t *L, rd_thread_t *tc);

/* The thread's ids (pthread_t; native id, or 3.9/3.10 the tid in its struct pthread)
 * read again with frames read after the round's first read: the state may have been
 * freed and made again, at the same address, for a thread that took over the same frame
 * objects or chunk (3.9/3.10: a code object's zombie frame is at the same address for
 * every thread that calls it). ident_req() adds the reads, ident_same() checks them. */
int ident_req(unwinder_t *u, reader_t *r, rd_thread_t *tc, size_t *n);
int ident_same(const unwinder_t *u, const rd_thread_t *tc);
uint64_t copy_cur_ptr(const py_layout_t *L, const rd_thread_t *tc);
int copy_states(unwinder_t *u, reader_t *r);
int copy_again(unwinder_t *u, reader_t *r, rd_thread_t *tc, size_t len);
size_t copy_clamp(const rd_thread_t *tc, size_t len);

/* ---- anchor.c ---- */

int anchor_on(const unwinder_t *u, const rd_thread_t *tc);
void anchor_drop(rd_thread_t *tc);
void anchor_before(unwinder_t *u, rd_thread_t *tc);
int anchor_after(unwinder_t *u, reader_t *r, rd_thread_t *tc, size_t nw);

/* ---- walk.c ---- */

/* What a walk needs before it can go on: nothing, a longer copy (len bytes from
 * tc->base), or a copy from the chunk's start (it went below an anchor's copy). */
typedef struct walk_more {
    enum { WALK_DONE, WALK_LONGER, WALK_FROM_CHUNK } kind;
    size_t len;
} walk_more_t;

/* Walks one thread's frames from 'cur' through its copies into r->walk. Returns 0 (with
 * *more saying whether the walk needs more copied first), REMORA_ECORRUPT (a link that
 * cannot be followed) or a read error. */
int walk_frames(unwinder_t *u, reader_t *r, rd_thread_t *tc, uint64_t cur, size_t *nwalked, walk_more_t *more);
/* Which walked frames held across the read: *keep is the index of the innermost frame
 * known (0: the whole walk, the stack as it was when its current frame was read; nwalked:
 * none). Frames from *keep outward were the same in both copies; a caller also at the
 * same instruction and looking like one. Returns 0, or REMORA_ENOMEM. */
int walk_check(unwinder_t *u, reader_t *r, rd_thread_t *tc, uint64_t cur, size_t nwalked, size_t *keep);
int walk_learn_blocks(const py_layout_t *L, reader_t *r, rd_thread_t *tc, size_t from, size_t nwalked);
int walk_learn_page(const py_layout_t *L, rd_thread_t *tc, uint64_t addr);
int walk_moment_save(const py_layout_t *L, reader_t *r, const rd_thread_t *tc, size_t keep, size_t nw);
size_t walk_moment_cut(const py_target_t *T, reader_t *r, const rd_thread_t *tc, size_t keep, size_t nw, int *cut);
int walk_keep_calls(const py_target_t *T, reader_t *r, rd_thread_t *tc, size_t from, size_t nw);
size_t walk_chunk_outer(const py_target_t *T, reader_t *r, const rd_thread_t *tc);

/* ---- parked.c ---- */

int park_reread(unwinder_t *u, reader_t *r, rd_thread_t *tc);
int park_holds(const py_layout_t *L, const rd_interp_t *fi, const rd_thread_t *tc);
int park_save(reader_t *r, const rd_interp_t *fi, rd_thread_t *tc, uint64_t cur, size_t nw);

/* ---- naming.c: frame naming (function, file and line from a frame's code object) -- */

/* Adds a code address to this sample's set (codes[] holds each once). */
static inline int name_note_code(reader_t *r, code_cache_t *cc, uint64_t addr)
{
    unw_code_t *e;
    size_t i;

    if (r->ncodes > 0 && r->codes[r->ncodes - 1] == addr)
        return 0;                       /* recursion: the frame below ran the same code */
    e = code_cache_peek(cc, addr);
    if (e != NULL && e->stamp == r->stamp)
        return 0;
    for (i = 0; i < r->ncodes; i++)
        if (r->codes[i] == addr)
            return 0;
    if (remora_grow((void **)&r->codes, &r->cap_codes, r->ncodes + 1, sizeof *r->codes))
        return -1;
    r->codes[r->ncodes++] = addr;
    return 0;
}

/* Frame naming: every thread's frames (u->threads[i].frames, from tc->raw_*) get their
 * function, file and line once the code objects are resolved. A frame whose code object
 * was fetched this sample drops its thread (r->fresh counts them); on 3.11 a caller not
 * resting on a call ends the stack known below it. */
void name_frames(unwinder_t *u, reader_t *r);

/* Validates this sample's code objects (naming.c says how). Returns 0, REMORA_ENOPROC or
 * REMORA_ENOMEM. */
int name_resolve_codes(unwinder_t *u, reader_t *r, int have_gen, uint64_t pre, uint64_t post);

/* ---- idle.c ---- */

enum { IDLE_UNKNOWN, IDLE_ASLEEP, IDLE_RUNNING };
/* Without the kernel engine, after thread i's walk this round (reused: before a parked
 * thread's saved walk is taken): whether it is on a CPU (th->on_cpu), from a look at /proc
 * only when it may have changed since the last. Returns idle_skips(u, th). */
int idle_decide(unwinder_t *u, reader_t *r, size_t i, int reused);
/* Record's and top's default (UNW_WANT_ACTIVE, not UNW_WANT_CPU): th is idle (asleep,
 * holding no GIL, no failed kernel tick to stand for), and the caller leaves it out: its
 * stack is not read nor named (no frames). */
static inline int idle_skips(const unwinder_t *u, const unw_thread_t *th)
{
    return (u->want & (UNW_WANT_ACTIVE | UNW_WANT_CPU)) == UNW_WANT_ACTIVE && !th->on_cpu &&
           !th->holds_gil && th->failed_ticks == 0;
}

/* ---- kernel.c ------------------------------------------------------------------ */

/* After a round's threads are known: tells the kernel engine each thread's state when it
 * changed (a system call only then). */
void kern_sync_threads(unwinder_t *u, reader_t *r);
/* The thread's on/off-CPU state from the engine's table (no system call), into th: its
 * failed_ticks, on_cpu (running or runnable), runnable and kernel (on a CPU, sampled by
 * its ticks). A thread the table does not know is read from /proc once (counted), and
 * that reading stands while its slot of the table reads the same. */
void kern_cpu_state(unwinder_t *u, rd_thread_t *tc, unw_thread_t *th);
/* A round that woke at 'now' looks at a thread with 'cpu' ns of CPU time; *w is the look
 * before, and becomes this one. The time off a CPU since the look before (the wall time
 * less the CPU time: every stint, however short) and w->carry are counted a period
 * ('period' ns, > 0) a sample, rounded, the rest carried: with 'off' (the round's sample of
 * the thread is of it off a CPU) *periods gets what that sample stands for (may be 0) and
 * 1 is returned; else (on a CPU: carried, KU_CARRY periods at most) 0. 0 too, and no
 * carry, with no look before to count from. */
int kern_off_weigh(kern_offw_t *w, int64_t now, uint64_t cpu, int64_t period, int off, unsigned *periods);
/* The round reads no stack of th: its time on a CPU is its ticks', none failed. */
static inline int kern_skips(const unw_thread_t *th)
{
    return th->kernel && th->failed_ticks == 0;
}
/* Forgets the process in the engine (which must outlive the unwinder) and frees k. */
void kern_unw_free(struct unw_kern *k, pid_t pid);

#endif
