/* formats/ — output writers. They read the profile model of sample/ only (and use
 * util/), never proc/ or unwind/, so a recording can be converted later without the
 * process. Which file writes what: docs/layout.md.
 */
#ifndef REMORA_OUT_H
#define REMORA_OUT_H

#include <stdint.h>
#include <stdio.h>

#include "../sample/sample.h"

/* Length of the valid UTF-8 sequence at s (at most n bytes, n >= 1), or 0 if it is not
 * one (overlong forms, surrogates and code points past U+10FFFF are not). */
size_t out_utf8_len(const unsigned char *s, size_t n);

/* Writes str as a JSON string literal (quoted, escaped, always valid UTF-8). */
void out_json_str(FILE *f, const char *str);

/* Writes str for a terminal, one string on one line, reversibly: a backslash → \\,
 * newline, carriage return, tab → \n \r \t, other control characters (C0, DEL and the
 * C1 code points U+0080..U+009F) → \xNN (the code point in hex), U+2028 and U+2029 →
 * \u2028 \u2029, each byte that is not part of valid UTF-8 → U+FFFD, and the character
 * 'quote' (unless 0) → a backslash and it. Everything else is written as it is. */
void out_text_str(FILE *f, const char *str, int quote);

/* "function (file:line)" through out_text_str(); just the function when file is "". */
void out_text_frame(FILE *f, const char *function, const char *file, int line);

/* strs.c: strings by index, for formats with a string table. Keyed by pointer, so give
 * it interned strings (the table's) or string literals, never a buffer reused. */
typedef struct out_strs {
    const char **v;             /* index → string */
    size_t n, cap;
    uint32_t *slots;            /* index + 1, open addressing on the pointer */
    size_t nslots;
    int oom;                    /* an index could not be given: the output is incomplete */
} out_strs_t;

/* The index of str (a new one the first time); 0 with s->oom set when out of memory. */
uint32_t out_strs_index(out_strs_t *s, const char *str);
void out_strs_free(out_strs_t *s);

/* marshal.c: Python's marshal format (version 4, no references), little-endian.
 * An int: TYPE_INT, or TYPE_LONG outside 32 bits. A float: TYPE_BINARY_FLOAT. A string:
 * TYPE_SHORT_ASCII, TYPE_ASCII or TYPE_UNICODE, always valid UTF-8 (each byte that is not
 * part of valid UTF-8 becomes U+FFFD). A tuple of n objects: its header, then write the
 * n objects. A dict: out_marshal_dict(), keys and values in turn, out_marshal_dict_end().
 * Errors are the stream's (ferror). */
void out_marshal_int(FILE *f, int64_t v);
void out_marshal_float(FILE *f, double v);
void out_marshal_str(FILE *f, const char *s);
void out_marshal_tuple(FILE *f, uint32_t n);
void out_marshal_dict(FILE *f);
void out_marshal_dict_end(FILE *f);

/* The time one thread sample stands for, in seconds: the recording's duration over its
 * rounds when both are known (the interval achieved), else the period of the rate asked,
 * else 1 ms (remora's default rate: collapsed stacks carry neither). */
double out_sample_seconds(const profile_meta_t *m);

/* counts.c: the counts' words (docs/cli.md, "Counts"), one definition for the summary,
 * --stats, top and every header. 'one' when n is 1, else 'many'. */
const char *out_plural(uint64_t n, const char *one, const char *many);
/* The time sampled: the duration less its pauses, in seconds (>= 0). */
double out_time_sampled(const profile_meta_t *m);
/* Rounds asked: the rate asked over the time sampled, rounded. */
uint64_t out_rounds_asked(const profile_meta_t *m);
/* 100 * part / whole, 0 when whole is 0. */
double out_share(uint64_t part, uint64_t whole);
/* The counts in words into buf (snprintf's contract: returns the length it wanted):
 * "R rounds taken of A asked in D s (H Hz of RATE Hz asked), W thread samples written,
 * I left out as idle (--idle keeps them), E errors (x%), P partial (y%)", the shares of
 * the thread samples written; a profile that does not know them (m->counted 0):
 * "W thread samples written", W 'written' (the table's total). */
int out_counts_text(char *buf, size_t n, const profile_meta_t *m, uint64_t written);

/* A source file's text, for the writers that show source (the heatmap): formats/ reads
 * no file, so the caller's out_source_fn gives it, as the target saw the file. */
typedef struct out_source {
    const char *text;       /* the file's bytes (not NUL-terminated), NULL with a problem */
    size_t len;
    const char *problem;    /* NULL, or why there is no text: "missing or unreadable"... */
    int changed;            /* modified after the process started */
    const uint32_t *starts; /* the text's lines as lines_index() gives them, or NULL (the
                             * writer indexes the text itself): a file named by many
                             * spellings is indexed once */
    size_t nstarts;
} out_source_t;
/* Fills *out for 'file' (a frame's file name); what it points to lasts until the next call. */
typedef void (*out_source_fn)(void *ctx, const char *file, out_source_t *out);

/* Options shared by writers. */
typedef struct out_options {
    int limit;              /* table: rows to print (0 = default 25) */
    int no_threads;         /* collapsed: omit the leading "thread NAME (TID)" element */
    out_source_fn source;   /* heatmap: the source files (NULL: none shown) */
    void *source_ctx;
    int sort;               /* table: its order, OUT_SORT_* (0: by self) */
} out_options_t;

/* The table's orders (--sort): self samples, total samples (the function anywhere on the
 * stack), the function's name; each breaks its ties by the next, then the file. */
enum { OUT_SORT_SELF = 0, OUT_SORT_TOTAL, OUT_SORT_NAME };
/* --sort's word: self (own, tottime), total (cumulative, cumul, cumtime) or name; -1 for
 * any other. out_sort_accepts says so in a line's words. */
int out_sort_parse(const char *s);
extern const char out_sort_accepts[];

/* Every writer: returns 0, or REMORA_EIO when the stream failed. */
typedef int (*out_write_fn)(const profile_t *p, FILE *f, const out_options_t *o);

typedef struct out_format {
    const char *name;       /* "collapsed", "flamegraph", ... */
    const char *exts;       /* file name endings that select it, space-separated */
    out_write_fn write;     /* NULL for the raw recording (written while sampling) */
    int timeline;           /* needs the profile's events: written from a recording */
    int stream;             /* record writes it as it goes, a period at a time (jsonl) */
    /* --help's line "by -o's ending: .html flamegraph, ...": */
    int help_exts;          /* how many of exts it names, joined by "or" (0: not there) */
    int help_at;            /* the format's place on it, from 1 */
    const char *help_note;  /* said after the name, or NULL */
} out_format_t;

/* The format called 'name', or NULL. */
const out_format_t *out_format_by_name(const char *name);
/* The format a path's ending selects, or NULL. */
const out_format_t *out_format_for_path(const char *path);
/* The names of the formats in the table, for messages: "flamegraph, firefox, ...";
 * with 'writers_only', only those a profile can be written to after sampling (all but
 * raw). A static string. */
const char *out_format_names(int writers_only);
/* The table's i-th format, or NULL past its end. */
const out_format_t *out_format_at(size_t i);

/* Writes a profile to 'path' through a temporary file in the same directory and a
 * rename, so a half-written profile never exists under the final name. "-" writes to
 * stdout. Returns 0, or REMORA_EIO with errno set. */
int out_write_file(const out_format_t *fmt, const profile_t *p, const out_options_t *o, const char *path);

/* Keeps a profile out_write_file() could not write to 'path' in a new file beside the
 * working directory's, $TMPDIR's or /tmp's (remora_output_keep(): the name keeps the
 * format's ending). Returns 0 with *where (malloc'd, the caller frees it), or REMORA_EIO
 * with errno set (ESPIPE: 'path' is written in place, stdout, a device, a FIFO). */
int out_write_keep(const out_format_t *fmt, const profile_t *p, const out_options_t *o,
                   const char *path, char **where);

int out_collapsed_write(const profile_t *p, FILE *f, const out_options_t *o);
int out_table_write(const profile_t *p, FILE *f, const out_options_t *o);
int out_pstats_write(const profile_t *p, FILE *f, const out_options_t *o);
int out_speedscope_write(const profile_t *p, FILE *f, const out_options_t *o);
int out_flamegraph_write(const profile_t *p, FILE *f, const out_options_t *o);
/* svg.c: the static SVG flamegraph (what it draws and leaves out: its banner). */
int out_svg_write(const profile_t *p, FILE *f, const out_options_t *o);
int out_pprof_write(const profile_t *p, FILE *f, const out_options_t *o);
int out_firefox_write(const profile_t *p, FILE *f, const out_options_t *o);
int out_heatmap_write(const profile_t *p, FILE *f, const out_options_t *o);
int out_jsonl_write(const profile_t *p, FILE *f, const out_options_t *o);

/* jsonl.c: the JSON Lines stream (docs/jsonl.md), written while recording: the start
 * record (jsonl_open; path "-" or NULL: stdout; the file written in place, not renamed),
 * a record per period or snapshot (kind "period" or "snapshot", numbered n; p's meta says
 * its start, length and rounds), the end record. Each returns 0, REMORA_EIO (errno set)
 * or REMORA_ENOMEM; jsonl_close frees w either way. */
typedef struct jsonl_writer jsonl_writer_t;
int jsonl_open(const char *path, const profile_meta_t *m, jsonl_writer_t **out);
int jsonl_period(jsonl_writer_t *w, const profile_t *p, const char *kind, uint64_t n,
                 int64_t end_unix_ns);
/* jsonl_close: a file whose name went while it was written (its directory removed) is
 * REMORA_EIO (errno ENOENT), what it holds kept elsewhere when kept is not NULL (*kept
 * its name, malloc'd: remora_output_keep; else NULL). */
int jsonl_close(jsonl_writer_t *w, const profile_meta_t *m, uint64_t periods, const char *reason,
                char **kept);

/* The longest line of collapsed stacks convert reads (bytes, its newline aside): no
 * writer's stack comes near it (65536 frames of 16 bytes), and a file of one endless line
 * (binary data, a device) must not be held whole. */
#define OUT_COLLAPSED_MAX_LINE (1u << 20)

/* Reads collapsed stacks (as written by out_collapsed_write, or by other tools) into t.
 * Lines "thread NAME (TID);f1;f2 N" keep their thread; others go to thread 0. A frame
 * "name (file:line)" is split; anything else is a function with no file. A line is
 * malformed without a count (digits after its last space; the total of all lines at most
 * 2^64 - 1) or with a control byte (C0 but tab, or DEL: binary data). No line is held
 * past max_line bytes. Returns 0, REMORA_EIO,
 * REMORA_ECORRUPT with *bad_line set to the first malformed line (the stream left just
 * past it), or REMORA_ENOMEM: with *bad_line set, that line is longer than max_line (the
 * stream left inside it), else out of memory. */
int out_collapsed_read(FILE *f, stk_table_t *t, size_t max_line, uint64_t *samples,
                       size_t *bad_line);

#endif
