/* formats/raw.h — the .remora recording: an event log written while sampling and read
 * back by `remora convert`.
 *
 * Layout: the magic "REMORA\0" and a version byte, then records, each a tag byte and
 * LEB128 varints (zigzag for signed values):
 *   'S' len bytes               a string (ids count up from 0)
 *   'F' fn file line            a frame (ids count up from 0), strings by id
 *   'C' fn file line            a C frame (--native), numbered with the 'F' frames; only
 *                               recordings with C frames have it (a reader older than it
 *                               stops there, as at a corrupt record)
 *   'I' fn file line op offset  a Python frame at an instruction (--opcodes: a sample's
 *                               innermost), numbered with the 'F' frames, op a string id
 *                               (its name), offset its byte offset; only in --opcodes
 *                               recordings
 *   'T' idx tid name root       a thread (or a new name for one), its root node
 *   'N' id parent frame         a stack-trie node (child of 'parent')
 *   'X' dt_ns thread node flags a sample: time since the previous one (the first: since
 *                               sampling began), the stack's innermost node, a flags byte
 *   'L' file problem changed nlines nkept (gap len bytes)...
 *                               a sampled file's source (version 4), written at the end
 *                               before 'M' (a snapshot's too), one per file, the files by
 *                               their share of the samples: 'file' a string id; 'problem'
 *                               inline, empty when the text was read, else why there is
 *                               none as the heatmap says it ("missing or unreadable"...);
 *                               'changed' 1 when the file changed after the process
 *                               started; 'nlines' its lines (universal newlines); then
 *                               'nkept' of them, each its number's gap from the last
 *                               kept's (the first: its number) and its text without the
 *                               line's end, its first RAW_SRC_LINE bytes. Kept: each line
 *                               a sample was at and RAW_SRC_CONTEXT lines either side,
 *                               what a heatmap shows; within RAW_SRC_FILES files,
 *                               RAW_SRC_BYTES bytes of text and RAW_SRC_LINES lines (a
 *                               file past them: 'problem' says so; a reader refuses
 *                               more). `convert` shows these, opening no file.
 *   'M' pid command python mode duration_ns rate_mhz rounds errors late start_unix_ns
 *       start_mono_ns engine sample_bytes written idle idle_kept partial paused_ns
 *                               metadata, written at the end; strings inline (len bytes);
 *                               sample_bytes (version 5): --mode memory's bytes a sample
 *                               stands for, 0 for a time profile; from written on
 *                               (version 6) the counts' words (cli.md, Counts)
 *   'Z'                         end of recording
 * A sample's time is the deadline of its round: its stack was read at or after that time
 * and before the next sample's time (or the end, start + duration). start_mono_ns is
 * CLOCK_MONOTONIC when sampling began, so start_mono_ns + the sum of the dt_ns so far is
 * a sample's time on the target's clock. Version 1 has no start_mono_ns, 2 no engine, 3 no
 * 'L', 4 no sample_bytes: the reader reads them all (their files' source: "not in the recording").
 */
#ifndef REMORA_FORMATS_RAW_H
#define REMORA_FORMATS_RAW_H

#include <stdint.h>
#include <stdio.h>

#include "../sample/sample.h"
#include "out.h"

#define RAW_VERSION 6          /* written; 1 to 5 are still read (3: the engine; 4: 'L';
                                * 5: sample_bytes; 6: the counts' words in 'M') */

/* What a recording keeps of its files' source: the lines a heatmap shows (heatmap.c:
 * HM_CONTEXT lines around each sampled line, HM_LINE_SHOWN bytes of a line, more past
 * them marked; a unit test checks the two pages alike), within bounds. */
#define RAW_SRC_CONTEXT 4                   /* lines kept either side of a sampled one */
#define RAW_SRC_LINE 512                    /* bytes kept of a line */
#define RAW_SRC_FILES 4096                  /* files with text kept */
#define RAW_SRC_BYTES (32u << 20)           /* bytes of text kept, all files */
#define RAW_SRC_WHY 256                     /* bytes of a reason there is no text */
#define RAW_SRC_LINES (64u << 20)           /* the kept files' last kept lines, summed: what
                                             * convert's texts of them hold, newlines */

/* The bits of an 'X' record's flags byte: the values of sample.h's SAMPLE_F_* flags
 * (raw.c checks it), so flags pass between the two unchanged. */
#define RAW_ON_CPU 1u
#define RAW_GIL 2u
#define RAW_GC 4u
#define RAW_TICK 8u

typedef struct raw_writer raw_writer_t;

/* Opens 'path' for writing (through a temporary file renamed by raw_close).
 * Returns 0, REMORA_EIO or REMORA_ENOMEM. */
int raw_open(const char *path, raw_writer_t **out);

/* Appends one thread's sample: the stack is 'node' of table t (anything of t the file
 * lacks is written first), 'flags' SAMPLE_F_* flags. Returns 0 or REMORA_EIO. */
int raw_sample(raw_writer_t *w, const stk_table_t *t, uint32_t thread, uint32_t node,
               int64_t t_ns, unsigned flags);

/* The time the first sample's is counted from (ns since sampling began; 0 unless set):
 * a recording of one period, whose start_mono_ns is then the period's start. */
void raw_start_at(raw_writer_t *w, int64_t t_ns);

/* A copy of the recording so far, with the metadata m and the end, to 'path' (through a
 * temporary file and a rename); the recording goes on. When 'path' cannot be written and
 * kept is not NULL, the copy is kept elsewhere (remora_output_keep: *kept its name,
 * malloc'd; else NULL). Returns 0 or REMORA_EIO (errno set: why 'path' failed). */
int raw_snapshot(raw_writer_t *w, const profile_meta_t *m, const char *path, char **kept);

/* The source the next raw_snapshot or raw_close keeps of the files of t's samples: read
 * through 'source' (the heatmap's callback, as the target sees the files; ctx lasting
 * until that call); none when it is NULL, as before this is called. */
void raw_keep_source(raw_writer_t *w, const stk_table_t *t, out_source_fn source, void *ctx);

/* Writes the metadata and the end, and renames the file into place when 'commit';
 * else removes it. When the rename fails (its directory removed, say) and kept is not
 * NULL, the recording is kept elsewhere as raw_snapshot() does (*kept). Frees w. Returns
 * 0 or REMORA_EIO (errno set). */
int raw_close(raw_writer_t *w, const profile_meta_t *m, int commit, char **kept);

/* Reads a recording into t and m, and when 'events' is not NULL every sample in order
 * into *events (malloc'd, *nevents of them; the caller frees it, also on failure).
 * Returns 0, REMORA_EIO, REMORA_ENOMEM, or REMORA_ECORRUPT (not a recording, a newer
 * version, or damaged: what was read before the damage is kept). */
int raw_read(FILE *f, stk_table_t *t, profile_meta_t *m, prof_event_t **events, size_t *nevents);

/* The source text a recording keeps ('L' records), read back. */
typedef struct raw_sources raw_sources_t;

/* raw_read, and the recording's source into *sources (also on failure: what was read;
 * freed with raw_sources_free; NULL when out of memory). */
int raw_read_sources(FILE *f, stk_table_t *t, profile_meta_t *m, prof_event_t **events,
                     size_t *nevents, raw_sources_t **sources);

/* An out_source_fn serving a recording's source (ctx a raw_sources_t, or NULL for a
 * profile read from collapsed stacks): the text kept of 'file', else why there is none
 * (as when recorded, or "not in the recording"). Opens no file. What *out points to
 * lasts until the next call or raw_sources_free. */
void raw_source(void *ctx, const char *file, out_source_t *out);
void raw_sources_free(raw_sources_t *s);

#endif
