/* sample/subs.c — --subprocesses: the target's descendants, found by a scan of /proc,
 * each given an unwinder of its own once its interpreter is found; the ones gone
 * forgotten. Reads /proc and each descendant's memory (py_target_find).
 */
#include <stdlib.h>
#include <string.h>

#include "remora.h"
#include "sampler_int.h"
#include "../py/py.h"

void subs_reset(sampler_t *s, sub_t *c)
{
    if (c->u != NULL)
        take_forget(s);
    unw_free(c->u);
    proc_free(c->p);
    c->u = NULL;
    c->p = NULL;
    c->tries = c->bad = 0;
}

void subs_scan(sampler_t *s)
{
    size_t i, k, n;

    if (proc_descendants(proc_pid(s->p), s->found, SUB_MAX, &n) != REMORA_OK)
        return;
    /* a launched command that is not Python yet: looked at as a descendant, if it exec's one */
    if (s->u == NULL && n < SUB_MAX)
        s->found[n++] = proc_pid(s->p);
    for (k = 0; k < s->nsubs;) {
        for (i = 0; i < n && s->found[i] != s->subs[k].pid; i++)
            ;
        if (i == n) {                   /* gone, or no longer the target's */
            subs_reset(s, &s->subs[k]);
            free(s->subs[k].t);
            s->subs[k] = s->subs[--s->nsubs];
        } else {
            k++;
        }
    }
    for (i = 0; i < n; i++) {
        sub_t *c;
        for (k = 0; k < s->nsubs && s->subs[k].pid != s->found[i]; k++)
            ;
        if (k < s->nsubs)
            continue;
        if (remora_grow((void **)&s->subs, &s->cap_subs, s->nsubs + 1, sizeof *s->subs))
            return;
        c = &s->subs[s->nsubs];
        memset(c, 0, sizeof *c);
        c->pid = s->found[i];
        c->t = malloc(sizeof *c->t);
        if (c->t == NULL)
            return;
        s->nsubs++;
    }
    for (k = 0; k < s->nsubs; k++) {
        sub_t *c = &s->subs[k];
        char why[256];
        if (c->u != NULL || c->tries >= SUB_FIND_TRIES)
            continue;
        c->tries++;
        if (c->p == NULL && proc_open(c->pid, &c->p) != REMORA_OK) {
            c->p = NULL;
            continue;
        }
        if (py_target_find(c->p, c->t, why, sizeof why) != REMORA_OK ||
            unw_new(c->p, c->t, &c->u) != REMORA_OK) {
            c->u = NULL;
            proc_free(c->p);            /* opened anew next time: it may exec */
            c->p = NULL;
            continue;
        }
        unw_set_want(c->u, s->want);
        unw_set_reread_ns(c->u, sampler_reread_ns(&s->o));
        /* else (or when the kernel cannot read what the mode asks of its threads) its
         * threads are read from user space */
        if (s->o.kern != NULL &&
            unw_kern_reads(c->u, s->o.mode == SAMPLE_GIL, s->o.mode == SAMPLE_EXCEPTION, why,
                           sizeof why) == REMORA_OK)
            unw_kern_enable(c->u, s->o.kern, why, sizeof why);
        s->st.subprocesses++;
    }
}
