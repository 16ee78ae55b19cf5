/* unwind/ — threads, frames, code objects and line tables of a CPython target.
 *
 * Never prints: every function returns data and a REMORA_E* code. Files:
 *   strtab.c     interned strings (stable pointers, grow with distinct names only)
 *   linetable.c  line-number decoders for 3.9 lnotab, 3.10 linetable, 3.11+ locations
 *   pystr.c      reading str and bytes objects out of the target
 *   code.c       the code-object cache (bounded, validated by a fingerprint)
 *   threads.c    interpreters, thread states, GIL holder, native thread ids
 *   frames.c     walking one thread's frames
 */
#ifndef REMORA_UNWIND_H
#define REMORA_UNWIND_H

#include <string.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../proc/proc.h"
#include "../py/py.h"
#include "../util/util.h"

/* Bounds on what is read from the target. */
#define UNW_MAX_DEPTH 4096          /* frames per thread */
#define UNW_MAX_THREADS 4096        /* thread states per interpreter */
#define UNW_MAX_INTERPS 256
#define UNW_MAX_NAME 1024           /* code points kept of a name or a path */
#define UNW_MAX_LINETABLE (1u << 20)
#define UNW_CODE_CACHE 4096         /* entries (power of two) */

/* ---- linetable.c (pure) --------------------------------------------------- */

/* Each returns the line of the instruction at byte offset 'addrq' (code units × 2), as
 * CPython's PyCode_Addr2Line does, or -1 where the table says "no line". A negative
 * addrq gives firstlineno. Every read stays inside tab[0..len). */
int lt_lnotab_line(const unsigned char *tab, size_t len, int firstlineno, int addrq);
int lt_310_line(const unsigned char *tab, size_t len, int firstlineno, int addrq);
int lt_locations_line(const unsigned char *tab, size_t len, int firstlineno, int addrq);

/* ---- pystr.c ---------------------------------------------------------------- */

/* Reads a str object as UTF-8 into out (at most cap-1 bytes, NUL-terminated; longer
 * strings are cut at UNW_MAX_NAME code points or at cap). Returns 0 with *len, or a
 * REMORA_E* code (REMORA_ECORRUPT for a non-compact or implausible object). */
int pystr_read(proc_t *p, const py_layout_t *L, uint64_t addr, char *out, size_t cap, size_t *len);

/* As pystr_read; with img, also copies the object as read, from its type on (after the
 * reference count) to the end of its data, at most imgcap bytes, into img (*imglen). */
int pystr_read_img(proc_t *p, const py_layout_t *L, uint64_t addr, char *out, size_t cap,
                   size_t *len, unsigned char *img, size_t imgcap, size_t *imglen);

/* Reads a bytes object's contents (at most 'max' bytes) into a malloc'd buffer. */
int pybytes_read(proc_t *p, const py_layout_t *L, uint64_t addr, size_t max,
                 unsigned char **out, size_t *len);

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
    uint64_t gen;               /* the code generation it was last validated at (fast.c) */
    uint64_t fresh;             /* the sample that fetched it (fast.c) */
    const char *function;       /* interned: co_qualname (3.11+) or co_name */
    const char *file;           /* interned: co_filename */
    int firstlineno;
    unsigned char *linetable;   /* owned */
    size_t linetable_len;
    int lc_addr[4], lc_line[4]; /* recently computed lines */
    unsigned lc_next;
    unsigned char *calls;       /* 3.11: owned bitmap, one bit per code unit: where a frame
                                 * rests while it calls inline (NULL: not known) */
    size_t calls_units;
} unw_code_t;

/* 3.13+: is the frame whose first fr_size bytes are 'fb' an interpreter trampoline (the
 * frame pushed under an __init__ called by a specialized CALL, running the code that
 * checks __init__ returned None)? Its f_funcobj (at 16 from 3.12 on) is None, where a
 * function's frame holds the function. CPython hides it (an "incomplete" frame); so
 * does remora, walking through it as through a C-owned shim. */
static inline int unw_is_trampoline(const py_target_t *t, const unsigned char *fb)
{
    uint64_t funcobj;

    if (t->layout.minor < 13 || t->none == 0 || t->layout.fr_size < 24)
        return 0;
    memcpy(&funcobj, fb + 16, 8);
    return (funcobj & ~(uint64_t)7) == t->none;
}

/* 3.11: is the code unit at 'idx' one where this code's frame rests while calling a
 * Python function inline? 1 yes, 0 no, -1 not known (no bitmap, or out of range). */
int code_calls_at(const unw_code_t *code, int64_t idx);

typedef struct code_cache code_cache_t;

code_cache_t *code_cache_new(strtab_t *names);
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
int code_line(unw_code_t *code, const py_layout_t *L, int addrq);

/* ---- threads.c / frames.c ---------------------------------------------------- */

typedef struct unw_frame {
    const char *function;       /* interned */
    const char *file;           /* interned */
    int line;
} unw_frame_t;


typedef struct unw_thread {
    uint64_t tstate;
    uint64_t interp;
    int64_t interp_id;
    pid_t native_id;            /* 0 if unknown */
    int is_main;
    int holds_gil;
    int on_cpu;                 /* only with UNW_WANT_CPU */
    int gc;                     /* its interpreter is collecting garbage (UNW_WANT_GC) */
    int handling_exc;           /* UNW_WANT_EXC: 1 when sys.exc_info() would give an exception
                                 * there (it is inside an except block), 0 when not, -1
                                 * when that could not be read */
    char name[64];              /* the task's name (comm), only with UNW_WANT_NAMES */
    int error;                  /* REMORA_E* if the frames could not be read */
    size_t nframes;
    unw_frame_t *frames;        /* innermost first; owned by the unwinder */
} unw_thread_t;

typedef struct unwinder unwinder_t;

/* What unw_snapshot reads besides stacks (each costs system calls per thread). */
#define UNW_WANT_CPU 1u         /* on_cpu, from /proc/PID/task/TID/stat */
#define UNW_WANT_NAMES 2u       /* name, from /proc/PID/task/TID/comm */
#define UNW_WANT_GC 4u          /* gc, from the interpreter's GC state */
#define UNW_WANT_EXC 8u         /* handling_exc, from the thread state (a read per generator
                                 * or coroutine whose exception slot is walked through) */
#define UNW_WANT_ALL 15u
#define UNW_WANT_ANCHOR 16u     /* 3.15, record --frame-anchor: keep the thread state's
                                 * last_profiled_frame at a frame (writes 8 bytes into the
                                 * target) and copy only the frames above it; not in ALL */
#define UNW_WANT_NOSTACKS 32u   /* internal (fast.c's rebuild): the thread list only, no
                                 * frames walked; not in ALL */

/* Returns 0 or REMORA_ENOMEM. The unwinder borrows p and t; it reads everything
 * (UNW_WANT_ALL) until unw_set_want() says otherwise. */
int unw_new(proc_t *p, const py_target_t *t, unwinder_t **out);
void unw_free(unwinder_t *u);
void unw_set_want(unwinder_t *u, unsigned want);

/* Reads every thread of every interpreter and its frames. The array is owned by the
 * unwinder and valid until the next call. Returns 0 (a thread whose frames could not
 * be read has its 'error' set), or a REMORA_E* code when the thread list itself could
 * not be read (REMORA_ENOPROC when the target is gone). */
int unw_snapshot(unwinder_t *u, unw_thread_t **threads, size_t *n);

/* Per-sample reading of every thread (fast.c): the thread list kept from the last
 * sample and checked, all thread states (and, on 3.11+, each thread's data-stack
 * chunk, copied twice to detect change) in one vectored read, frames walked in the
 * copy, code objects validated in one more vectored read. A thread whose stack
 * changed while it was read has 'error' = REMORA_ECORRUPT. Same contract as
 * unw_snapshot. */
int unw_sample(unwinder_t *u, unw_thread_t **threads, size_t *n);

#define UNW_MAX_EXC_ITEMS 64    /* exception-stack items walked per thread */

/* Whether the thread whose state was copied into ts[0..ts_size) from 'tstate' is handling
 * an exception, as sys.exc_info() decides it there: from the item tstate->exc_info points
 * to, along previous_item, the first item whose exception is neither NULL nor None. Items
 * inside the copy are read there, others (generators, coroutines) from the target, at
 * most UNW_MAX_EXC_ITEMS. Returns 1 or 0; -1 when the layout lacks the fields, a read
 * failed or the chain is longer than the bound. (threads.c) */
int unw_exc_state(unwinder_t *u, uint64_t tstate, const unsigned char *ts);

/* Walks the frames starting at 'frame' (3.11+: an interpreter frame; 3.9/3.10: a frame
 * object) into out[0..cap). Returns 0 with *n, or a REMORA_E* code. (frames.c) */
int unw_walk(unwinder_t *u, uint64_t frame, unw_frame_t *out, size_t cap, size_t *n);

/* Internals shared by threads.c and frames.c. */
struct unwinder {
    proc_t *p;
    const py_target_t *t;
    strtab_t *names;
    code_cache_t *codes;
    unw_thread_t *threads;
    size_t nthreads, cap_threads;
    unw_frame_t *frames;        /* every thread's frames, back to back */
    size_t cap_frames;
    unsigned char *tsbuf;       /* one thread state */
    int pthread_tid_off;        /* 3.9/3.10: offset of tid in struct pthread; -1 unknown */
    unsigned want;              /* UNW_WANT_* */
    void *fast;                 /* fast.c's per-thread caches */
    uint64_t thread_samples;    /* unw_sample(): threads sampled, in all */
    uint64_t parked;            /* ... of which served from a parked thread's saved walk */
};

/* Frees fast.c's caches. */
void unw_fast_free(void *fast);

#endif
