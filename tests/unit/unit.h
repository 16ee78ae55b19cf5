/* tests/unit/unit.h — what the unit tests' files share: CHECK and its counters (main.c),
 * each part's tests (main.c runs them in order), and the synthetic target the
 * thread-name and asyncio tests build (unit_mem.c). */
#ifndef REMORA_TESTS_UNIT_H
#define REMORA_TESTS_UNIT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "proc/proc.h"
#include "unwind/internal.h"

/* the checks that held and those that failed, across every file (main.c prints them) */
extern int passed, failed;

#define CHECK(cond, ...)                                                   \
    do {                                                                   \
        if (cond) {                                                        \
            passed++;                                                      \
        } else {                                                           \
            failed++;                                                      \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);           \
            fprintf(stderr, __VA_ARGS__);                                  \
            fputc('\n', stderr);                                           \
        }                                                                  \
    } while (0)

/* unit_linetable.c */
void test_linetables(void);

/* unit_proc.c */
void test_maps(void);
void test_stat(void);
void test_elf(void);
void test_source_cache(void);

/* unit_util.c */
void test_strtab(void);
void test_upper(void);
void test_pyrepr(void);

/* unit_sample.c */
void test_fn_rows(void);

/* unit_formats.c */
void test_json(void);
void test_text(void);
void test_marshal(void);
void test_pstats(void);
void test_native_frames(void);
void test_raw_sources(void);
void test_counts_words(void);
void test_input_bounds(void);

/* unit_py.c */
void test_ts_read(void);

/* unit_walk.c */
void test_anchor_walk(void);
void test_objects_walk(void);
void test_lived_walk(void);
void test_call_locals(void);
void test_cframe_window(void);
void test_moment_cut(void);
void test_native_bounds(void);

/* unit_threads.c */
void test_thread_names(void);
void test_pthread_tid_offset(void);

/* unit_tasks.c */
void test_tasks_from_frames(void);
void test_tasks(void);

/* unit_pyobj.c */
void test_pyo_readers(void);

/* unit_kern.c */
void test_kern_reads(void);
void test_off_weigh(void);

/* ---- unit_mem.c: the synthetic target. Its memory, PN_SIZE bytes at pn_mem, holds the
 * target's addresses from PN_BASE; the caller allocates and frees pn_mem, and
 * pn_begin() empties it before each target is built. ---- */

enum { PN_BASE = 0x100000, PN_SIZE = 4 << 20 };
extern unsigned char *pn_mem;
extern uint64_t pn_active;      /* the last pn_registry()'s _active dict */

void pn_begin(void);
/* a word at a target address; len bytes allocated (the program exits when full) */
void pn_put(uint64_t addr, uint64_t v);
uint64_t pn_alloc(size_t len);
/* objects: an ASCII str, an int, a dict of n (hash, key, value) entries, a Thread
 * named 'name', threading's registry (returns the interpreter state's address) */
uint64_t pn_str(const char *text);
uint64_t pn_int(uint64_t v);
uint64_t pn_dict(const uint64_t (*e)[3], size_t n, uint64_t size, uint64_t nentries);
uint64_t pn_thread(uint64_t name);
uint64_t pn_registry(const uint64_t (*active)[3], size_t n, uint64_t size, uint64_t nentries);
/* a snapshot of the memory built so far, as a source to read, or NULL */
proc_t *pn_source(void);
/* an unwinder *u on target *T over a snapshot *p of the memory, *pn the names read from
 * the registry at 'interp' (tn_update's return); tn_test_end() frees *pn and *p */
int tn_test_read(uint64_t interp, const uint64_t *idents, size_t n, thread_names_t **pn, proc_t **p,
                 unwinder_t *u, py_target_t *T);
void tn_test_end(thread_names_t *pn, proc_t *p);

#endif
