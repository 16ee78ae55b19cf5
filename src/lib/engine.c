/* lib/engine.c — which engine reads a sampled target: the kernel engine (src/kern/, BPF)
 * where it applies and can be had, else user space; and the one phrase that says why
 * not the kernel's. remora_sample() and the command (cli/engine.c, which prints it) share
 * this one decision. Opens the kernel engine's programs; reads no target.
 */
#include <stdio.h>

#include "lib.h"
#include "../kern/kern.h"
#include "../sample/sampler.h"

_Static_assert((int)REMORA_MODE_GIL == (int)SAMPLE_GIL &&
               (int)REMORA_MODE_EXCEPTION == (int)SAMPLE_EXCEPTION &&
               (int)REMORA_MODE_CPU == (int)SAMPLE_CPU && (int)REMORA_MODE_WALL == (int)SAMPLE_WALL,
               "one list of modes");

/* The kernel engine reads at the tick a running thread's frames, with its GIL state,
 * (exception mode) its exception state and (--native) its user registers and the top of
 * its stack, unwound in user space: whether a target's layout lets it read those
 * is remora_engine_enable's to say, once the target is known. */
const char *remora_engine_needs_user(const remora_engine_req_t *q)
{
    if (q->blocking)
        return "--blocking holds the target still: its reads from user space are exact";
    if (q->anchor)
        return "--frame-anchor is a user-space reading";
    return NULL;
}

int remora_engine_open(const remora_engine_req_t *q, struct kern **out, int *refused,
                       char *why, size_t whylen)
{
    const char *user = remora_engine_needs_user(q);
    int err;

    *out = NULL;
    *refused = 0;
    if (whylen > 0)
        why[0] = '\0';
    if (q->engine == REMORA_ENGINE_USER)
        return REMORA_OK;
    if (user != NULL) {
        snprintf(why, whylen, "%s", user);
        return q->engine == REMORA_ENGINE_KERNEL ? REMORA_EUSAGE : REMORA_OK;
    }
    /* --native: the ticks copy each thread's user stack (kern_open_native's larger ring) */
    err = q->native ? kern_open_native(q->rate_hz, out, why, whylen) : kern_open(q->rate_hz, out, why, whylen);
    if (err != REMORA_OK) {
        *out = NULL;
        if (q->engine == REMORA_ENGINE_KERNEL)
            return err;
        *refused = err;
    }
    return REMORA_OK;
}

int remora_engine_enable(unwinder_t *u, struct kern **k, int mode, char *why, size_t whylen)
{
    int err;

    if (*k == NULL || u == NULL)
        return REMORA_OK;
    if ((err = unw_kern_reads(u, mode == SAMPLE_GIL, mode == SAMPLE_EXCEPTION, why,
                              whylen)) == REMORA_OK &&
        (err = unw_kern_enable(u, *k, why, whylen)) == REMORA_OK)
        return REMORA_OK;
    kern_close(*k);
    *k = NULL;
    return err;
}

void remora_engine_refusal(int err, const char *why, char *out, size_t cap)
{
    snprintf(out, cap, "the kernel engine cannot be used: %s%s", why,
             err == REMORA_EPERM ? " (it needs CAP_BPF and CAP_PERFMON, or root)" : "");
}
