/* cli/top.h — what top.c (the model, the keys, the run) shares with top_draw.c (the
 * frames it draws). */
#ifndef REMORA_CLI_TOP_H
#define REMORA_CLI_TOP_H

#include <stddef.h>
#include <stdint.h>
#include <termios.h>

#include "cli.h"
#include "../proc/proc.h"
#include "../sample/sampler.h"

enum { SORT_OWN, SORT_TOTAL, SORT_OWNTIME, SORT_TOTALTIME, SORT_N };

typedef struct view_row {
    uint32_t row;               /* index into top.rows */
    uint64_t self, total;       /* samples in the interval shown */
} view_row_t;

typedef struct top {
    const cli_sampling_t *a;
    sampler_t *s;
    stk_table_t *table;
    const char *python;
    char command[512];
    int tty, keys, sort;
    struct termios saved;
    int64_t last_ns;            /* the last refresh */
    uint64_t last_rounds;
    stk_fn_row_t *rows;         /* every function's totals since the start, at the last refresh */
    size_t nrows;
    view_row_t *view;
    uint64_t view_rounds;       /* rounds the view's interval took */
    sampler_stats_t prev;       /* the sampler's counts at the last refresh */
    sampler_stats_t win;        /* ... their change over the view's interval (the header's
                                 * shares: GIL, GIL wait, exception, GC, idle) */
    const char *engine;         /* "kernel" or "user" */
    int gil_wait_known;         /* the target says when a thread waits for the GIL (3.15+) */
    uint64_t unit;              /* --mode memory: bytes a sample stands for (0: time) */
    uint64_t last_samples, view_samples;    /* ... samples at the last refresh, and in
                                 * the view's interval: memory's shares are of them */
    const char *title;          /* "last second" or "whole run" */
    char *buf;                  /* the frame being drawn */
    size_t buflen;
    /* what the keys chose */
    int paused;                 /* p: the screen is not redrawn each second */
    char filter[64];            /* /: rows whose function or file contain it ("" = all) */
    char typing[64];            /* the filter being typed, while typing_on */
    size_t ntyping;
    int typing_on;
    int esc;                    /* bytes of an escape sequence seen (arrows: ESC [ A/B) */
    pid_t tid;                  /* t: one thread's samples (0 = every thread's) */
    stk_fn_row_t *base;         /* r: the totals at the reset, subtracted (NULL = none) */
    size_t nbase;
    size_t sel;                 /* the selected row among those shown */
    proc_t *p;                  /* the target, for the selected row's source line */
    proc_src_cache_t *src_cache; /* the files read for source lines (a new one when full) */
    const proc_src_t *src;      /* the file of the last source line shown (in src_cache) */
    const char *src_file;       /* its name (interned by the table), NULL = none read */
} top_t;

/* top.c: a row's samples since the start or the last reset (r): own (self) or total. */
uint64_t top_since(const top_t *tp, uint32_t row, int total);
/* Is the row shown under the filter? */
int top_shown(const top_t *tp, const stk_fn_row_t *r);

/* top_draw.c: the frame on the terminal, fitted to its size; or printed, up to 'limit'
 * rows, as `top -b` does (and the whole run's table at the end). */
void top_paint(top_t *tp);
void top_print_frame(top_t *tp, size_t limit);

#endif
