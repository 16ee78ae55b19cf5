/* unwind/native_int.h — --native's state, shared by native.c (libdwfl: modules, one
 * thread's C stack, names) and native_merge.c (the merge with the Python frames).
 * Not for use outside those two files.
 */
#ifndef REMORA_UNWIND_NATIVE_INT_H
#define REMORA_UNWIND_NATIVE_INT_H

#include <stdbool.h>

#include <elfutils/libdwfl.h>

#include "internal.h"

#define NAT_MAX_FRAMES 512          /* C frames per thread */
#define NAT_STACK_MAX (1u << 20)    /* bytes of a thread's stack copied */
#define NAT_WORD_READS 64           /* words read outside that copy, per thread */
#define NAT_SYMS 4096               /* pc -> name cache (a power of two) */
#define NAT_FUNCS (1u << 20)        /* function ranges known (nat_func_t), at most */
#define NAT_EVAL_RANGES 8
#define NAT_CFRAMES 1024            /* 3.11: _PyCFrame links followed */
#define NAT_REMAP_NS 1000000000LL   /* modules reported again at most once a second */
#define NAT_MODULES 4096

typedef struct nat_sym {
    uint64_t pc;                    /* 0: empty */
    const char *function, *file;
    int line;
} nat_sym_t;

/* A function's address range and name, from the symbol tables (every module's, read
 * once when the modules are reported): a pc not cached (a tick's innermost pc is a new
 * one each time) named without a scan of a symbol table (libdwfl's lookup is one). */
typedef struct nat_func {
    uint64_t lo, hi;                /* [lo, hi) */
    unsigned rank;                  /* its binding: 0 global, 1 weak, 2 local (of the symbols
                                     * at one address, the one libdwfl's lookup names) */
    const char *raw;                /* the symbol's name (libdwfl's: valid while dwfl is) */
    const char *function;           /* raw interned, its version cut; NULL until first named */
    const char *file;               /* interned: the module's file, for a pc with no line;
                                     * NULL until first named */
} nat_func_t;

typedef struct nat_raw {
    uint64_t pc;                    /* the address looked up (a return address less 1) */
    uint64_t sp;                    /* the frame's stack pointer (0: not known) */
} nat_raw_t;

enum { NAT_END_OK, NAT_END_CUT };

struct unw_native {
    proc_t *p;
    strtab_t *strs;
    Dwfl *dwfl;
    Dwfl_Callbacks cb;
    int64_t mapped_ns;              /* when the maps were last read for the modules */
    uint64_t files_hash;            /* files_hash() of the maps the modules came from */
    /* the thread being unwound */
    uint64_t regs[PROC_NREGS];
    unsigned char *stack;
    uint64_t stack_lo;
    size_t stack_len;
    unsigned words, words_max;      /* words read outside the copy; at most */
    int has_ts_frame;               /* native_merge_buffer's caller gave the thread state's */
    uint64_t ts_frame;              /* ... ts_frame word as read with the copy */
    nat_raw_t raw[NAT_MAX_FRAMES];
    size_t nraw;
    int end;
    struct nat_range { uint64_t start, end; } *ranges;  /* writable mappings */
    size_t nranges, cap_ranges;
    int maps_again;                 /* the maps were read again this round */
    uint64_t eval_lo[NAT_EVAL_RANGES], eval_hi[NAT_EVAL_RANGES];
    size_t neval;
    nat_sym_t *syms;
    nat_func_t *funcs;              /* sorted by lo, disjoint */
    size_t nfuncs, cap_funcs;
    uint64_t marks[UNW_MAX_DEPTH];  /* one per Python group */
    size_t gs[UNW_MAX_DEPTH + 1];   /* where each group's frames begin */
    unw_frame_t *out;               /* every thread's merged frames, back to back */
    size_t cap_out;
    size_t *first;                  /* each thread's first frame in out */
    size_t cap_first;
    unw_native_stats_t st;
};

/* libdwfl's memory callback, used by the merge too (dwfl may be NULL): a word of the
 * thread's stack copy, or one read alone (NAT_WORD_READS at most per thread). */
bool nat_memory_read(Dwfl *dwfl, Dwarf_Addr addr, Dwarf_Word *result, void *arg);
/* Is pc inside _PyEval_EvalFrameDefault (or one of its .cold parts)? */
int nat_eval_pc(const unw_native_t *n, uint64_t pc);
/* The name of pc (cached); NULL out of memory. */
const nat_sym_t *nat_name_pc(unw_native_t *n, uint64_t pc);
/* Merges thread th's Python frames with its C stack (n->raw) into n->out from *k.
 * Returns 0 or REMORA_ENOMEM. */
int nat_merge(unw_native_t *n, const py_layout_t *L, unw_thread_t *th, size_t *k);
/* A marker frame (a C frame named 'what') into n->out at *k. Returns 0 or REMORA_ENOMEM. */
int nat_put_marker(unw_native_t *n, size_t *k, const char *what);

#endif
