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
 *   'M' pid command python mode duration_ns rate_mhz rounds errors late start_unix_ns
 *       start_mono_ns           metadata, written at the end; strings inline (len bytes)
 *   'Z'                         end of recording
 * A sample's time is the deadline of its round: its stack was read at or after that time
 * and before the next sample's time (or the end, start + duration). start_mono_ns is
 * CLOCK_MONOTONIC when sampling began, so start_mono_ns + the sum of the dt_ns so far is
 * a sample's time on the target's clock. Version 1 has no start_mono_ns; the reader reads
 * both.
 */
#ifndef REMORA_FORMATS_RAW_H
#define REMORA_FORMATS_RAW_H

#include <stdint.h>
#include <stdio.h>

#include "../sample/sample.h"

#define RAW_VERSION 3          /* written; 1 and 2 are still read (3: the engine) */

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

#endif
