/* cli/engine.c — which engine reads the target: --engine, and the one line that says
 * why the kernel engine is not used when it was asked for or expected; the sampler's
 * options record and top take from the ones they share.
 */
#include <stdio.h>
#include <string.h>

#include "remora.h"
#include "cli.h"
#include "../kern/kern.h"
#include "../sample/sampler.h"
#include "../unwind/unwind.h"

/* What keeps the user-space engine alone, or NULL: the kernel engine reads a running
 * thread's frames only, at the tick, without the GIL's or the exception's state. */
static const char *needs_user(const cli_sampling_t *c, int anchor)
{
    if (c->blocking)
        return "--blocking holds the target still: its reads from user space are exact";
    if (c->native)
        return "--native reads C stacks with the target held still";
    if (c->mode == SAMPLE_GIL)
        return "--mode gil needs the GIL's holder at each sample";
    if (c->mode == SAMPLE_EXCEPTION)
        return "--mode exception needs each thread's exception state";
    if (c->async)
        return "--async needs each thread's running task";
    if (anchor)
        return "--frame-anchor is a user-space reading";
    return NULL;
}

/* The notice that the kernel engine is not used, held until sampling begins
 * (cli_sampler_opts): a run that fails before (the target not readable) prints its one
 * line, not this one too. */
static char engine_notice[512];

/* The one line when the kernel engine cannot be used: an error with --engine kernel
 * (returns its exit code), else a notice, held (returns 0). */
static int engine_refused(const char *what, const cli_sampling_t *c, int err, const char *why)
{
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
    const char *user = needs_user(c, anchor);
    char why[256] = "";
    int err;

    *out = NULL;
    if (c->engine == CLI_ENGINE_USER)
        return REMORA_EXIT_OK;
    if (user != NULL) {
        if (c->engine == CLI_ENGINE_KERNEL) {
            cli_error("%s: --engine kernel: %s; drop one of them", what, user);
            return REMORA_EXIT_USAGE;
        }
        return REMORA_EXIT_OK;
    }
    if ((err = kern_open(c->rate, out, why, sizeof why)) != REMORA_OK) {
        *out = NULL;
        return engine_refused(what, c, err, why);
    }
    return REMORA_EXIT_OK;
}

int cli_engine_enable(const char *what, const cli_sampling_t *c, struct unwinder *u, struct kern **k)
{
    char why[256] = "";
    int err;

    if (*k == NULL || u == NULL || (err = unw_kern_enable(u, *k, why, sizeof why)) == REMORA_OK)
        return REMORA_EXIT_OK;
    kern_close(*k);
    *k = NULL;
    return engine_refused(what, c, err, why);
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
    so->blocking = c->blocking || c->native;
    so->function = c->function;
    so->opcodes = c->opcodes;
    so->idle = c->idle;
    so->async = c->async;
    if (c->native && (rc = cli_native_enable(u, ct->pid)) != REMORA_EXIT_OK)
        return rc;
    if ((rc = cli_engine_enable(what, c, u, k)) != REMORA_EXIT_OK)
        return rc;
    so->kern = *k;
    /* sampling begins: why the kernel engine is not used, once */
    fputs(engine_notice, stderr);
    engine_notice[0] = '\0';
    return REMORA_EXIT_OK;
}
