/* lib/api.c — libremora's public API (include/remora/remora.h) over the internals: a
 * handle holds the target (proc/), its interpreter (py/) and an unwinder (unwind/), and
 * turns each reading into the public structs, which it owns. Reads the target only
 * through the unwinder; with REMORA_NATIVE it stops a live target's threads (ptrace)
 * for the length of each read.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "remora.h"
#include "lib.h"
#include "../proc/proc.h"
#include "../py/py.h"
#include "../unwind/unwind.h"
#include "../util/util.h"

#define LIB_TRIES 64            /* remora_set_tries' default: what dump reads with */
#define LIB_GC_FRAME "<GC>"

#define LIB_FLAGS (REMORA_MAIN_THREAD | REMORA_ACTIVE | REMORA_ONLY_GIL | REMORA_ONLY_CPU | \
                   REMORA_ONLY_EXCEPTION | REMORA_STATUS | REMORA_THREAD_NAMES | REMORA_GC | \
                   REMORA_OPCODES | REMORA_NATIVE | REMORA_RUNNING_TASK | REMORA_FRAME_ANCHOR | \
                   REMORA_ENTRY_MARKS)

/* A thread's frames as the last remora_read() made them: a frame read again with the same
 * identity (lib_same) is made by copying, with no location looked up. */
typedef struct lib_seen {
    pid_t native_id;
    uint64_t ident;
    int64_t interp;
    uint64_t read;              /* the reading that last saw the thread */
    size_t n, cap_in, cap_out;
    unw_frame_t *in;            /* innermost first: the unwinder's frames, */
    remora_frame_t *out;        /* ... and what lib_frame made of each */
    size_t held;                /* the unwinder's held and held_id for them */
    uint64_t held_id;
} lib_seen_t;

struct remora {
    proc_t *p;
    py_target_t t;
    unwinder_t *u;
    freezer_t *frz;             /* REMORA_NATIVE on a live target: its threads held still
                                 * while a reading is made */
    unsigned flags;
    remora_thread_t *th;        /* the last reading's threads, */
    size_t cap_th;
    remora_frame_t *fr;         /* ... and every thread's (or task's) frames, back to back */
    size_t cap_fr;
    remora_task_t *tk;          /* the last remora_tasks() */
    size_t cap_tk;
    lib_seen_t *seen;           /* each thread of the last reading */
    size_t nseen, cap_seen;
    uint64_t reads;
    struct lib_sampling *smp;   /* remora_sample()'s state (sample_api.c), from its first */
    char err[512];
};

const char *remora_version(void)
{
    return REMORA_VERSION;
}

pid_t remora_pid(const remora_t *r)
{
    return proc_pid(r->p);
}

const char *remora_python_version(const remora_t *r)
{
    return r->t.version;
}

int remora_python_minor(const remora_t *r)
{
    return r->t.layout.minor;
}

const char *remora_last_error(const remora_t *r)
{
    return r->err;
}

void remora_set_tries(remora_t *r, unsigned tries)
{
    unw_set_tries(r->u, tries);
}

proc_t *remora_proc(remora_t *r)
{
    return r->p;
}

const py_target_t *remora_target(const remora_t *r)
{
    return &r->t;
}

unwinder_t *remora_unwinder(remora_t *r)
{
    return r->u;
}

unsigned remora_flags(const remora_t *r)
{
    return r->flags;
}

char *remora_errbuf(remora_t *r, size_t *cap)
{
    *cap = sizeof r->err;
    return r->err;
}

struct lib_sampling **remora_sampling(remora_t *r)
{
    return &r->smp;
}

freezer_t **remora_freezer(remora_t *r)
{
    return &r->frz;
}

/* The unwinder's reading for the flags: each bit's cost is paid only when asked. */
static unsigned lib_want(unsigned flags)
{
    unsigned want = 0;

    if (flags & (REMORA_STATUS | REMORA_ONLY_CPU | REMORA_ONLY_EXCEPTION))
        want |= UNW_WANT_CPU | UNW_WANT_EXC | UNW_WANT_GC;
    if (flags & REMORA_ACTIVE)
        want |= UNW_WANT_ACTIVE;
    if (flags & REMORA_THREAD_NAMES)
        want |= UNW_WANT_THREAD_NAMES | UNW_WANT_COMM;
    if (flags & REMORA_GC)
        want |= UNW_WANT_GC;
    if (flags & REMORA_OPCODES)
        want |= UNW_WANT_OPCODES;
    if (flags & REMORA_RUNNING_TASK)
        want |= UNW_WANT_TASKS;
    if (flags & REMORA_FRAME_ANCHOR)
        want |= UNW_WANT_ANCHOR;
    return want;
}

/* The message of a failure to open pid (the command says the same). */
static void open_why(int err, pid_t pid, char *why, size_t whylen)
{
    switch (err) {
    case REMORA_ENOPROC:
        snprintf(why, whylen, "no process with pid %d (it does not exist or has exited)", (int)pid);
        break;
    case REMORA_EPERM:
        snprintf(why, whylen, "permission denied reading pid %d: run as root or as the target's "
                 "user with CAP_SYS_PTRACE, or allow ptrace (sysctl kernel.yama.ptrace_scope=0)",
                 (int)pid);
        break;
    case REMORA_ENOTPY:
        snprintf(why, whylen, proc_is_kernel_thread(pid) ? "pid %d is a kernel thread, not a "
                 "Python process" : "pid %d is not a Python process", (int)pid);
        break;
    default:
        snprintf(why, whylen, "pid %d: %s", (int)pid, remora_strerror(err));
        break;
    }
}

/* The handle over an opened source p (taken over: freed on failure, but for live 3): live
 * 0 a core, 1 a pid remora_open() opened (its messages), 2 a live process adopted for
 * sampling (the command's: no tries, its own messages), 3 a core adopted by the command
 * (its messages: p is left to it on failure); found: its interpreter, already found. */
static int lib_new(proc_t *p, const py_target_t *found, unsigned flags, int live, remora_t **out,
                   char *why, size_t whylen)
{
    remora_t *r;
    int err;

    *out = NULL;
    if ((r = calloc(1, sizeof *r)) == NULL) {
        if (live != 3)
            proc_free(p);
        snprintf(why, whylen, "out of memory");
        return REMORA_ENOMEM;
    }
    r->p = p;
    r->flags = flags;
    if (found != NULL)
        r->t = *found;
    else if ((err = py_target_find(p, &r->t, why, whylen)) != REMORA_OK) {
        if (*why == '\0' && live == 1)
            open_why(err, proc_pid(p), why, whylen);
        goto error;
    }
    if ((err = unw_new(p, &r->t, &r->u)) != REMORA_OK) {
        snprintf(why, whylen, "out of memory");
        goto error;
    }
    unw_set_tries(r->u, live >= 2 ? 0 : LIB_TRIES);     /* the command says when */
    if (flags & REMORA_NATIVE) {
        if ((err = unw_native_enable(r->u)) != REMORA_OK) {
            snprintf(why, whylen, "%s", err == REMORA_EUSAGE ?
                     "C stacks (REMORA_NATIVE) are read on x86_64 only, from a live process or a core" :
                     "no ELF file of the target could be read for its C stacks (REMORA_NATIVE)");
            goto error;
        }
        if ((live == 1 || live == 2) && (err = freeze_new(p, &r->frz)) != REMORA_OK) {
            snprintf(why, whylen, "REMORA_NATIVE: cannot stop pid %d's threads with ptrace (%s%s)",
                     (int)proc_pid(p), remora_strerror(err),
                     err == REMORA_EPERM ? ": another tracer has it, or ptrace is not allowed" : "");
            goto error;
        }
        if (r->frz != NULL)
            freeze_want_states(r->frz);
    }
    /* adopted for sampling: everything, as a new unwinder reads (the sampler says what) */
    unw_set_want(r->u, live >= 2 ? UNW_WANT_ALL : lib_want(flags));
    *out = r;
    return REMORA_OK;
error:
    if (live == 3)
        r->p = NULL;            /* the caller's still: its messages name what it found */
    remora_close(r);
    return err;
}

/* What remora_open and remora_open_core check first: *why pointed at local when the
 * caller gave no buffer, and emptied; out given, *out NULL; flags known. Returns 0, or
 * REMORA_EUSAGE with *why saying why. */
static int open_begin(unsigned flags, remora_t **out, char **why, size_t *whylen, char *local,
                      size_t localcap)
{
    if (*why == NULL || *whylen == 0) {
        *why = local;
        *whylen = localcap;
    }
    **why = '\0';
    if (out == NULL)
        return REMORA_EUSAGE;
    *out = NULL;
    if ((flags & ~LIB_FLAGS) != 0) {
        snprintf(*why, *whylen, "unknown flags 0x%x", (int)(flags & ~LIB_FLAGS));
        return REMORA_EUSAGE;
    }
    return REMORA_OK;
}

int remora_open(pid_t pid, unsigned flags, remora_t **out, char *why, size_t whylen)
{
    char local[512];
    proc_t *p = NULL;
    int err;

    if ((err = open_begin(flags, out, &why, &whylen, local, sizeof local)) != REMORA_OK)
        return err;
    if (pid <= 0) {
        snprintf(why, whylen, "pid %d is not a process id", (int)pid);
        return REMORA_EUSAGE;
    }
    if ((err = proc_open(pid, &p)) != REMORA_OK) {
        open_why(err, pid, why, whylen);
        return err;
    }
    return lib_new(p, NULL, flags, 1, out, why, whylen);
}

int remora_open_core(const char *core, const char *exe, const char *root, unsigned flags,
                     remora_t **out, char *why, size_t whylen)
{
    char local[512];
    proc_t *p = NULL;
    int err;

    if ((err = open_begin(flags, out, &why, &whylen, local, sizeof local)) != REMORA_OK)
        return err;
    if (core == NULL) {
        snprintf(why, whylen, "no core file named");
        return REMORA_EUSAGE;
    }
    if ((err = proc_open_core(core, exe, root, &p)) != REMORA_OK) {
        snprintf(why, whylen, "core '%s': %s", core, err == REMORA_ENOPROC ? "no such file" :
                 err == REMORA_ENOTPY ? "not an ELF core file (64-bit, little-endian)" :
                 remora_strerror(err));
        return err;
    }
    err = lib_new(p, NULL, flags, 0, out, why, whylen);
    if (err != REMORA_OK && *why == '\0')
        snprintf(why, whylen, "core '%s': %s", core, remora_strerror(err));
    return err;
}

int remora_adopt(proc_t *p, const py_target_t *t, unsigned flags, remora_t **out, char *why,
                 size_t whylen)
{
    char local[512];

    if (why == NULL || whylen == 0) {
        why = local;
        whylen = sizeof local;
    }
    *why = '\0';
    *out = NULL;
    if ((flags & ~LIB_FLAGS) != 0) {
        if (proc_kind(p) == PROC_LIVE)
            proc_free(p);
        snprintf(why, whylen, "unknown flags 0x%x", (int)(flags & ~LIB_FLAGS));
        return REMORA_EUSAGE;
    }
    return lib_new(p, t, flags, proc_kind(p) == PROC_LIVE ? 2 : 3, out, why, whylen);
}

void remora_close(remora_t *r)
{
    if (r == NULL)
        return;
    lib_sampling_free(r->smp);
    if (r->frz != NULL) {
        freeze_go(r->frz);
        freeze_free(r->frz);
    }
    unw_free(r->u);
    proc_free(r->p);
    free(r->th);
    free(r->fr);
    free(r->tk);
    for (size_t i = 0; i < r->nseen; i++) {
        free(r->seen[i].in);
        free(r->seen[i].out);
    }
    free(r->seen);
    free(r);
}

/* Frame f in the public form, its location from the unwinder's code cache. */
static void lib_frame(remora_t *r, const unw_frame_t *f, remora_frame_t *o)
{
    lt_location_t loc;

    o->function = f->function ? f->function : "";
    o->file = f->file ? f->file : "";
    o->kind = f->native ? REMORA_FRAME_NATIVE : REMORA_FRAME_PYTHON;
    o->opname = NULL;
    o->opcode = o->offset = -1;
    if (!f->native && (r->flags & REMORA_OPCODES) &&
        (o->opname = unw_frame_opcode(r->u, f, &o->opcode)) != NULL)
        o->offset = f->offset;
    if (f->native) {
        o->line = f->line;
        o->end_line = -1;
        o->column = o->end_column = -1;
        return;
    }
    unw_frame_location(r->u, f, &loc);
    o->line = loc.line < 0 ? 0 : loc.line;
    o->end_line = loc.end_line;
    o->column = loc.column;
    o->end_column = loc.end_column;
}

/* REMORA_ENTRY_MARKS: does a "<native>" mark follow frame k of thread t? After each
 * Python frame an entry of the eval loop began with (3.11+: the walker's entry flag,
 * from is_entry on 3.11 and from the C-owned frame below it on 3.12+), as CPython 3.15
 * puts one for each interpreter-owned frame between Python frames and above its base
 * frame. 3.9/3.10: every call enters the eval loop from C (no frame says which C code
 * called it), so one after the outermost Python frame only. */
static int lib_entry_after(const remora_t *r, const unw_thread_t *t, size_t k)
{
    const unw_frame_t *f = &t->frames[k];
    size_t j;

    if (!(r->flags & REMORA_ENTRY_MARKS) || f->native)
        return 0;
    if (r->t.layout.walk_root != PY_ROOT_ANY)     /* the frames mark where each loop begins */
        return f->entry;
    for (j = k + 1; j < t->nframes; j++)
        if (!t->frames[j].native)
            return 0;
    return 1;
}

static void lib_entry_mark(remora_frame_t *o)
{
    memset(o, 0, sizeof *o);
    o->function = "<native>";
    o->file = "~";
    o->end_line = o->column = o->end_column = o->opcode = o->offset = -1;
    o->kind = REMORA_FRAME_ENTRY;
}

/* Is f what was read as g, so that lib_frame makes the same of it? A Python frame at the
 * same instruction (offset, line, the innermost's opcode) of the same code object read
 * (the code cache's serial: the same names and line table). */
static int lib_same(const unw_frame_t *f, const unw_frame_t *g)
{
    return f->code_serial != 0 && f->code_serial == g->code_serial && !f->native && !g->native &&
           f->code == g->code && f->offset == g->offset && f->line == g->line &&
           f->function == g->function && f->file == g->file && f->op == g->op;
}

/* Thread t's memory, found or made (NULL: out of memory). */
static lib_seen_t *lib_seen(remora_t *r, size_t hint, const unw_thread_t *t)
{
    lib_seen_t *s;
    size_t i;

    if (hint < r->nseen && r->seen[hint].native_id == t->native_id &&
        r->seen[hint].ident == t->ident && r->seen[hint].interp == t->interp_id)
        return &r->seen[hint];
    for (i = 0; i < r->nseen; i++)
        if (r->seen[i].native_id == t->native_id && r->seen[i].ident == t->ident &&
            r->seen[i].interp == t->interp_id)
            return &r->seen[i];
    if (remora_grow((void **)&r->seen, &r->cap_seen, r->nseen + 1, sizeof *r->seen))
        return NULL;
    s = &r->seen[r->nseen++];
    memset(s, 0, sizeof *s);
    s->native_id = t->native_id;
    s->ident = t->ident;
    s->interp = t->interp_id;
    return s;
}

/* Thread t's frames into o[0..t->nframes): those equal (lib_same) to the last reading's,
 * counted from the outermost, copied from it; the rest made. The frames the unwinder
 * holds for both readings (the same held_id: below an anchor that held, unw_thread_t)
 * are equal without a look; the rest from the outermost are compared. The memory made
 * to match, only its changed frames written. Returns 0 or -1 (out of memory: every
 * frame made, the memory forgotten). */
static int lib_frames(remora_t *r, lib_seen_t *s, const unw_thread_t *t, remora_frame_t *o)
{
    size_t n = t->nframes, pn = s->n, same = 0, fresh, k;

    s->read = r->reads + 1;
    if (t->held_id != 0 && t->held_id == s->held_id)
        same = t->held < s->held ? t->held : s->held;
    if (same > n || same > pn)
        same = 0;
    while (same < n && same < pn && lib_same(&t->frames[n - 1 - same], &s->in[pn - 1 - same]))
        same++;
    fresh = n - same;
    if (same > 0)
        memcpy(o + fresh, s->out + (pn - same), same * sizeof *o);
    for (k = 0; k < fresh; k++)
        lib_frame(r, &t->frames[k], &o[k]);
    if (remora_grow((void **)&s->in, &s->cap_in, n, sizeof *s->in) ||
        remora_grow((void **)&s->out, &s->cap_out, n, sizeof *s->out)) {
        s->n = 0;
        s->held_id = 0;
        return -1;
    }
    /* the outer frames that stayed move to their new places; the inner ones written */
    if (same > 0 && fresh != pn - same) {
        memmove(s->in + fresh, s->in + (pn - same), same * sizeof *s->in);
        memmove(s->out + fresh, s->out + (pn - same), same * sizeof *s->out);
    }
    if (fresh > 0) {
        memcpy(s->in, t->frames, fresh * sizeof *s->in);
        memcpy(s->out, o, fresh * sizeof *s->out);
    }
    s->n = n;
    s->held = t->held;
    s->held_id = t->held_id;
    return 0;
}

/* Forgets the threads this reading did not have. */
static void lib_seen_sweep(remora_t *r)
{
    size_t i = 0;

    while (i < r->nseen) {
        if (r->seen[i].read == r->reads + 1) {
            i++;
            continue;
        }
        free(r->seen[i].in);
        free(r->seen[i].out);
        r->seen[i] = r->seen[--r->nseen];
    }
}

/* Does the thread pass the flags' selection? */
static int lib_selected(unsigned flags, const unw_thread_t *th)
{
    if ((flags & REMORA_MAIN_THREAD) && !th->is_main)
        return 0;
    if ((flags & REMORA_ACTIVE) && !th->on_cpu && !th->holds_gil)
        return 0;
    if ((flags & REMORA_ONLY_GIL) && !th->holds_gil)
        return 0;
    if ((flags & REMORA_ONLY_CPU) && !th->on_cpu)
        return 0;
    if ((flags & REMORA_ONLY_EXCEPTION) && th->handling_exc != 1)
        return 0;
    return 1;
}

static int lib_failed(remora_t *r, int err, const char *what)
{
    if (err == REMORA_ENOPROC && proc_kind(r->p) == PROC_LIVE)
        snprintf(r->err, sizeof r->err, "pid %d exited", (int)proc_pid(r->p));
    else
        snprintf(r->err, sizeof r->err, "pid %d: %s (%s)", (int)proc_pid(r->p), what,
                 remora_strerror(err));
    return err;
}

int remora_read(remora_t *r, const remora_thread_t **threads, size_t *n)
{
    unw_thread_t *th = NULL;
    size_t nth = 0, i, k, nfr = 0, m = 0;
    lib_seen_t *s;
    int err, gcf;

    *threads = NULL;
    *n = 0;
    r->err[0] = '\0';
    if (r->frz != NULL && (err = freeze_stop(r->frz)) != REMORA_OK)
        return lib_failed(r, err, "could not stop its threads");
    err = unw_sample(r->u, &th, &nth);
    if (r->frz != NULL)
        freeze_go(r->frz);
    if (err != REMORA_OK)
        return lib_failed(r, err, "could not read the thread list");
    for (i = 0; i < nth; i++)      /* with entry marks, up to one after every frame */
        nfr += (th[i].nframes + 1) * ((r->flags & REMORA_ENTRY_MARKS) ? 2 : 1);
    if (remora_grow((void **)&r->th, &r->cap_th, nth ? nth : 1, sizeof *r->th) ||
        remora_grow((void **)&r->fr, &r->cap_fr, nfr ? nfr : 1, sizeof *r->fr))
        return lib_failed(r, REMORA_ENOMEM, "out of memory");
    for (i = 0, nfr = 0; i < nth; i++) {
        const unw_thread_t *t = &th[i];
        remora_thread_t *o;

        if (!lib_selected(r->flags, t))
            continue;
        o = &r->th[m++];
        memset(o, 0, sizeof *o);
        o->native_id = t->native_id;
        o->ident = t->ident;
        o->interpreter_id = t->interp_id;
        o->status = (t->holds_gil ? REMORA_THREAD_HAS_GIL : 0) |
                    (t->gil_requested ? REMORA_THREAD_GIL_REQUESTED : 0) |
                    (t->is_main ? REMORA_THREAD_MAIN : 0);
        if ((r->flags & (REMORA_STATUS | REMORA_ACTIVE | REMORA_ONLY_CPU |
                                 REMORA_ONLY_EXCEPTION)))
            o->status |= t->on_cpu ? REMORA_THREAD_ON_CPU : 0;
        else
            o->status |= REMORA_THREAD_UNKNOWN;
        if ((r->flags & (REMORA_STATUS | REMORA_ONLY_EXCEPTION)) && t->handling_exc == 1)
            o->status |= REMORA_THREAD_HAS_EXCEPTION;
        o->gc = t->gc;
        if (r->flags & REMORA_THREAD_NAMES)
            o->name = t->thread_name ? t->thread_name : t->comm[0] ? t->comm : NULL;
        o->error = t->error;
        o->partial = t->partial;
        o->task_id = t->task;
        o->frames = &r->fr[nfr];
        /* a collection runs on the thread holding the GIL; a stack that moved after the
         * GC state was read gets no <GC> above it */
        gcf = (r->flags & REMORA_GC) && t->gc && t->holds_gil && !t->partial && !t->error;
        if (gcf) {
            remora_frame_t *g = &r->fr[nfr++];
            memset(g, 0, sizeof *g);
            g->function = LIB_GC_FRAME;
            g->file = "";
            g->end_line = g->column = g->end_column = g->opcode = g->offset = -1;
            g->kind = REMORA_FRAME_GC;
        }
        if (r->flags & REMORA_ENTRY_MARKS) {
            /* marks between the frames: each frame made anew (no reuse below) */
            for (k = 0; k < t->nframes; k++) {
                lib_frame(r, &t->frames[k], &r->fr[nfr++]);
                if (lib_entry_after(r, t, k))
                    lib_entry_mark(&r->fr[nfr++]);
            }
        } else {
            if ((s = lib_seen(r, m - 1, t)) == NULL || lib_frames(r, s, t, &r->fr[nfr]))
                for (k = 0; k < t->nframes; k++)
                    lib_frame(r, &t->frames[k], &r->fr[nfr + k]);
            nfr += t->nframes;
        }
        o->nframes = (size_t)(&r->fr[nfr] - o->frames);
    }
    lib_seen_sweep(r);
    r->reads++;
    *threads = r->th;
    *n = m;
    return REMORA_OK;
}

int remora_tasks(remora_t *r, const remora_task_t **tasks, size_t *n)
{
    unw_task_t *tk = NULL;
    size_t ntk = 0, i, k, nfr = 0;
    int err;

    *tasks = NULL;
    *n = 0;
    r->err[0] = '\0';
    if (r->frz != NULL && (err = freeze_stop(r->frz)) != REMORA_OK)
        return lib_failed(r, err, "could not stop its threads");
    err = unw_tasks(r->u, &tk, &ntk);
    if (r->frz != NULL)
        freeze_go(r->frz);
    if (err != REMORA_OK) {
        if (err == REMORA_ECORRUPT || err == REMORA_EVERSION) {
            snprintf(r->err, sizeof r->err, "pid %d: %s%s", (int)proc_pid(r->p),
                     err == REMORA_ECORRUPT ? "the task list kept changing while it was read: " :
                     "", *unw_tasks_problem(r->u) ? unw_tasks_problem(r->u) : remora_strerror(err));
            return err;
        }
        return lib_failed(r, err, err == REMORA_ENOMEM ? "more than 100,000 asyncio tasks, or "
                          "out of memory" : "could not read the asyncio tasks");
    }
    for (i = 0; i < ntk; i++)
        nfr += tk[i].nframes;
    if (remora_grow((void **)&r->tk, &r->cap_tk, ntk ? ntk : 1, sizeof *r->tk) ||
        remora_grow((void **)&r->fr, &r->cap_fr, nfr ? nfr : 1, sizeof *r->fr))
        return lib_failed(r, REMORA_ENOMEM, "out of memory");
    for (i = 0, nfr = 0; i < ntk; i++) {
        remora_task_t *o = &r->tk[i];

        o->id = tk[i].id;
        o->name = tk[i].name ? tk[i].name : "";
        o->thread = tk[i].thread;
        o->running = tk[i].running;
        o->frames = &r->fr[nfr];
        o->nframes = tk[i].nframes;
        for (k = 0; k < tk[i].nframes; k++)
            lib_frame(r, &tk[i].frames[k], &r->fr[nfr++]);
        o->nawaited_by = tk[i].nawaited_by;
        o->awaited_by = tk[i].awaited_by;
    }
    /* the threads' arrays were the unwinder's: gone with this reading */
    *tasks = r->tk;
    *n = ntk;
    return REMORA_OK;
}

void remora_get_stats(const remora_t *r, remora_stats_t *out)
{
    unw_stats_t us;
    const proc_stats_t *ps = proc_stats(r->p);

    unw_get_stats(r->u, &us);
    memset(out, 0, sizeof *out);
    out->reads = r->reads;
    out->thread_samples = us.thread_samples;
    out->reused = us.parked;
    out->partial = us.partial;
    out->syscalls = ps->reads;
    out->bytes = ps->bytes;
}

void remora_get_cache_stats(const remora_t *r, remora_cache_stats_t *out)
{
    unw_stats_t us;
    const proc_stats_t *ps = proc_stats(r->p);

    unw_get_stats(r->u, &us);
    memset(out, 0, sizeof *out);
    out->threads = us.threads;
    out->threads_kept = us.threads_kept;
    out->frames = us.frames;
    out->frames_kept = us.frames_kept;
    out->code_hits = us.code_hits;
    out->code_misses = us.code_misses;
    out->code_stale = us.code_stale;
    out->vectored = ps->vectored;
    out->vectored_ok = ps->vectored_ok;
    out->segments = ps->segments;
    out->segments_done = ps->segments_done;
}
