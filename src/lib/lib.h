/* lib/lib.h — what the remora command reaches under libremora's public API: the handle's
 * source, interpreter and unwinder, for the readings the API has no form for yet (dump's
 * locals, source lines, native and task printing; record's and top's stack table), and
 * the engine decision (engine.c) that remora_sample() and the command share. Not
 * installed; docs/api.md lists it ("what the command reaches under the API"). */
#ifndef REMORA_LIB_H
#define REMORA_LIB_H

#include "remora/remora.h"
#include "../proc/proc.h"
#include "../py/py.h"
#include "../unwind/unwind.h"

/* Each borrowed from r, valid until remora_close(r). */
proc_t *remora_proc(remora_t *r);
const py_target_t *remora_target(const remora_t *r);
unwinder_t *remora_unwinder(remora_t *r);

/* The handle's flags, its message buffer (remora_last_error()'s), its sampling state
 * (sample_api.c; NULL until the first remora_sample()) and its freezer (REMORA_NATIVE on
 * a live target; NULL else), for the files of src/lib/. */
struct lib_sampling;
unsigned remora_flags(const remora_t *r);
char *remora_errbuf(remora_t *r, size_t *cap);
struct lib_sampling **remora_sampling(remora_t *r);
freezer_t **remora_freezer(remora_t *r);
/* Frees what remora_sample() kept (remora_close()). NULL is allowed. */
void lib_sampling_free(struct lib_sampling *smp);

/* A handle over p, a source the command opened: a live process, for sampling (taken
 * over: freed on failure too), or a core, for dump (taken over on success only: on
 * failure p is still the caller's, whose message names what p found, e.g. a missing
 * executable). t: its interpreter when the caller found it already (a launched command
 * waited for), else found now. Its unwinder reads everything, as a new unwinder does (the
 * sampler, or dump, then says what); a live one reads each round as it is (no tries).
 * Returns as remora_open(), *why holding py_target_find's own message (none of
 * remora_open's: the command words those). */
int remora_adopt(proc_t *p, const py_target_t *t, unsigned flags, remora_t **out, char *why,
                 size_t whylen);

/* ---- the engine decision (engine.c) --------------------------------------------- */

/* What a sampling run asks that bears on the engine. */
typedef struct remora_engine_req {
    int engine;                 /* enum remora_engine */
    double rate_hz;
    int mode;                   /* enum remora_mode (= sample.h's enum sample_mode) */
    int blocking, native, async, anchor;
} remora_engine_req_t;

/* The option that keeps the user-space engine alone (one phrase, in the command's
 * option names: "--frame-anchor is a user-space reading"), or NULL. */
const char *remora_engine_needs_user(const remora_engine_req_t *q);

/* The kernel engine for q, opened before the target is read (a launched command is
 * sampled from its start). *out NULL: the user-space engine alone reads, because q asks
 * for it (REMORA_ENGINE_USER, or needs_user with auto: *refused 0, *why the phrase), or
 * with auto the kernel engine cannot be had (*refused its code, *why why). Returns
 * REMORA_OK, or with REMORA_ENGINE_KERNEL: REMORA_EUSAGE (needs_user: *why the phrase),
 * or the code that refused it (*why why). The caller closes *out (kern_close) after
 * freeing every unwinder that used it. */
struct kern;
int remora_engine_open(const remora_engine_req_t *q, struct kern **out, int *refused,
                       char *why, size_t whylen);

/* The unwinder u (NULL: nothing yet) on the engine *k (NULL: nothing to do), sampling in
 * 'mode' (enum remora_mode): when its layout is one the kernel engine cannot walk, or
 * whose GIL (gil mode) or exception state (exception mode) it cannot read at the tick,
 * *k is closed and set NULL. Returns 0, or the code (*why why) for the caller to refuse
 * (kernel) or note (auto). */
int remora_engine_enable(unwinder_t *u, struct kern **k, int mode, char *why, size_t whylen);

/* The one line saying why the kernel engine is not used, for err/why from the two above
 * (as remora_engine()'s why_not and the command's notice have it). */
void remora_engine_refusal(int err, const char *why, char *out, size_t cap);

#endif
