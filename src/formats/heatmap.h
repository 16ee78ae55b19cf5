/* formats/heatmap.h — the line heatmap's counts (heatmap_count.c), which heatmap.c
 * writes as HTML, and raw.c counts to keep the lines the heatmap shows. Internal to
 * formats/.
 */
#ifndef REMORA_HEATMAP_H
#define REMORA_HEATMAP_H

#include <stdint.h>

#include "out.h"

typedef struct hm_line {
    const char *file;               /* interned: compared by pointer */
    const char *function;           /* the function of the first frame counted at it */
    int line;
    uint32_t fileno;                /* index into files */
    uint64_t self, incl, stamp;
} hm_line_t;

typedef struct hm_call {
    uint32_t line;                  /* the calling line (index into lines) */
    uint32_t row;                   /* the function called (a row of stk_fn_rows) */
    uint64_t n, stamp;
} hm_call_t;

typedef struct hm_op {
    uint32_t line;                  /* the line (index into lines) */
    const char *op;                 /* --opcodes: an instruction samples ended at there */
    uint64_t n;
} hm_op_t;

typedef struct hm_file {
    const char *file;
    uint64_t self, incl, stamp;
    uint32_t *lines;                /* its lines (indexes), sorted by line number */
    size_t nlines, cap;
    const char *problem;            /* why its source is not shown (a constant), or NULL */
    int changed;                    /* its file changed after the process started */
} hm_file_t;

typedef struct hm {
    const stk_table_t *t;
    hm_line_t *lines;
    size_t nlines, cap_lines;
    uint32_t *slots;                /* line index + 1, open addressing; 0 = empty */
    size_t nslots;
    hm_call_t *calls;
    size_t ncalls, cap_calls;
    uint32_t *call_slots;
    size_t ncall_slots;
    hm_op_t *ops;                   /* --opcodes: self samples by line and instruction */
    size_t nops, cap_ops;
    uint32_t *op_slots;
    size_t nop_slots;
    hm_file_t *files;
    size_t nfiles, cap_files;
    uint32_t *file_slots;           /* file index + 1, open addressing; 0 = empty */
    size_t nfile_slots;
    /* once counted, each line's calls and instructions, and each file's instructions, in
     * the order they were met: call_list[call_first[l] .. call_first[l + 1]) are line l's
     * calls (indexes into calls); the same for ops by line, and for ops by file */
    uint32_t *call_first, *call_list;
    uint32_t *op_first, *op_list;
    uint32_t *file_op_first, *file_op_list;
    stk_fn_row_t *rows;
    size_t nrows;
    uint32_t *row_of_frame;
    uint64_t stamp;                 /* the stack being counted */
    int oom;
    uint64_t unit;                  /* set by the writer: what a sample counts for in the
                                     * page (1; --mode memory: its bytes) */
} hm_t;

/* Counts every stack of table t into h (zeroed first): each line's self and inclusive
 * samples, its callees, --opcodes its instructions, each file's totals and its lines in
 * line order; *order: the files by inclusive share; *top: the lines by self samples.
 * Returns 0, or -1 out of memory. Either way the caller frees *order, *top (free) and h
 * (hm_free). */
int hm_count(hm_t *h, const stk_table_t *t, uint32_t **order, uint32_t **top);
void hm_free(hm_t *h);

/* The index of the counted line (file, line), or UINT32_MAX when none was sampled. */
uint32_t hm_find_line(const hm_t *h, const char *file, int line);

#endif
