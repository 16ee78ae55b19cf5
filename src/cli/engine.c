/* cli/engine.c — which engine reads the target: --engine, and the one line that says
 * why the kernel engine is not used when it was asked for or expected; the sampler's
 * options record and top take from the ones they share.
 */
#include <stdio.h>
#include <string.h>

#include "remora.h"
#include "cli.h"
#include "../kern/kern.h"
#include "../lib/lib.h"
#include "../sample/sampler.h"
#include "../unwind/unwind.h"

/* The engine request of the shared options (the library decides: lib/engine.c). */
static void engine_req(const cli_sampling_t *c, int anchor, remora_engine_req_t *q)
{
    q->engine = c->engine;
    q->rate_hz = c->rate;
    q->mode = c->mode;
    q->blocking = c->blocking;
    q->native = c->native;
    q->async = c->async;
    q->anchor = anchor;
}

/* The notice that the kernel engine is not used, held until sampling begins
 * (cli_sampler_opts): a run that fails before (the target not readable) prints its one
 * line, not this one too. */
static char engine_notice[512];

/* The one line when the kernel engine cannot be used: an error with --engine kernel
 * (returns its exit code), else a notice, held (returns 0). */
static int engine_refused(const char *what, const cli_sampling_t *c, int err, const char *why)
{
    if (c->mode == SAMPLE_MEMORY) {
        /* no profile of another kind passed off as this one */
        cli_error("%s: --mode memory needs the kernel engine, which cannot be used: %s%s", what,
                  why, err == REMORA_EPERM ? " (it needs CAP_BPF and CAP_PERFMON, or root)" : "");
        return REMORA_EXIT_USAGE;
    }
    if (c->engine == CLI_ENGINE_KERNEL) {
        cli_error("%s: the kernel engine cannot be used: %s%s", what, why,
                  err == REMORA_EPERM ? " (it needs CAP_BPF and CAP_PERFMON, or root)" : "");
        return remora_exit_code(err);
    }
    snprintf(engine_notice, sizeof engine_notice, "remora: the kernel engine cannot be used "
             "(%s%s); reading every thread from user space (a running thread's stack may end in "
             "<moving>; --engine user says this is meant)\n", why,
             err == REMORA_EPERM ? ": it needs CAP_BPF and CAP_PERFMON, or root" : "");
    return REMORA_EXIT_OK;
}

int cli_engine_open(const char *what, const cli_sampling_t *c, int anchor, struct kern **out)
{
    remora_engine_req_t q;
    char why[256] = "";
    int err, refused;

    if (c->mode == SAMPLE_MEMORY) {
        /* the frame walker at every Nth page fault of a thread (--fault-period) */
        *out = NULL;
        err = kern_open_faults(c->fault_period ? c->fault_period : CLI_MEMORY_FAULTS, out, why,
                               sizeof why);
        return err == REMORA_OK ? REMORA_EXIT_OK : engine_refused(what, c, err, why);
    }
    engine_req(c, anchor, &q);
    err = remora_engine_open(&q, out, &refused, why, sizeof why);
    if (err == REMORA_EUSAGE) {
        cli_error("%s: --engine kernel: %s; drop one of them", what, why);
        return REMORA_EXIT_USAGE;
    }
    if (err != REMORA_OK)
        return engine_refused(what, c, err, why);
    if (refused != REMORA_OK)
        return engine_refused(what, c, refused, why);
    return REMORA_EXIT_OK;
}

int cli_engine_enable(const char *what, const cli_sampling_t *c, struct unwinder *u, struct kern **k)
{
    char why[256] = "";
    int err = remora_engine_enable(u, k, c->mode, why, sizeof why);

    return err == REMORA_OK ? REMORA_EXIT_OK : engine_refused(what, c, err, why);
}

const char *cli_engine_name(const struct kern *k)
{
    return k != NULL ? "kernel" : "user";
}

const char *cli_holder(const cli_sampling_t *c)
{
    return c->native ? "--native" : c->blocking ? "--blocking" : NULL;
}

int cli_sampler_opts(const char *what, const cli_sampling_t *c, const cli_target_t *ct,
                     struct unwinder *u, struct kern **k, sampler_opts_t *so)
{
    int rc;

    memset(so, 0, sizeof *so);
    so->rate_hz = c->rate;
    so->duration_s = c->duration;
    so->mode = c->mode;
    so->gc = c->gc;
    so->child = ct->child;
    so->subprocesses = c->subprocesses;
    so->function = c->function;
    so->opcodes = c->opcodes;
    so->idle = c->idle;
    so->async = c->async;
    if (c->native && (rc = cli_native_enable(u, ct->pid)) != REMORA_EXIT_OK)
        return rc;
    if ((rc = cli_engine_enable(what, c, u, k)) != REMORA_EXIT_OK)
        return rc;
    so->kern = *k;
    /* --native on the kernel engine: each tick copies its thread's registers and stack, and
     * nothing is stopped; on the user engine the target is held still for each round (a
     * C stack unwound from a running thread's registers would be a guess) */
    so->blocking = c->blocking || (c->native && *k == NULL);
    /* sampling begins: why the kernel engine is not used, once */
    fputs(engine_notice, stderr);
    engine_notice[0] = '\0';
    return REMORA_EXIT_OK;
}
