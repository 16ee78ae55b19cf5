/* cli/dump.c — `remora dump`: every thread's Python stack, as text or JSON, of a live
 * process (-p PID) or of a core dump (--core FILE [--exe PYTHON] [--root DIR]); with
 * --locals each frame's arguments and locals too (dump_locals.c); --async every asyncio
 * task instead. This file reads them (its options, the target, its descendants);
 * dump_print.c prints them. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "remora.h"
#include "cli.h"
#include "dump.h"
#include "../formats/out.h"
#include "../lib/lib.h"
#include "../proc/proc.h"
#include "../py/py.h"
#include "../unwind/unwind.h"
#include "../util/util.h"

#define DUMP_TRIES 64    /* rounds read again until every thread reads whole */

/* One process's tasks: JSON (the process object, its threads and tasks) or text. */
static int dump_async(unwinder_t *u, pid_t pid, const py_target_t *t, int json, char *why, size_t whylen,
                      dump_src_t *src)
{
    unw_task_t *tk = NULL;
    unw_thread_t *th = NULL;
    size_t n = 0, nth = 0;
    int err;

    unw_set_tries(u, DUMP_TRIES);
    if ((err = unw_tasks(u, &tk, &n)) != REMORA_OK) {
        if (err == REMORA_ECORRUPT) {
            snprintf(why, whylen, "the task list kept changing while it was read (last: %s)",
                     *unw_tasks_problem(u) ? unw_tasks_problem(u) : "?");
            return err;
        }
        snprintf(why, whylen, "%s", err == REMORA_EVERSION ? unw_tasks_problem(u) :
                 err == REMORA_ENOMEM ? "more than 100,000 asyncio tasks (remora's bound), or "
                 "out of memory" : "could not read the asyncio tasks");
        return err;
    }
    if (!json) {
        dump_print_tasks_text(pid, t, tk, n, src);
        return REMORA_OK;
    }
    /* the tasks are kept until the next unw_tasks(): a sample of the threads, each with
     * its running task (what record --async reads per sample) */
    unw_set_want(u, UNW_WANT_ALL | UNW_WANT_TASKS);
    if ((err = unw_sample(u, &th, &nth)) != REMORA_OK) {
        snprintf(why, whylen, "could not read the thread list");
        return err;
    }
    dump_print_json_open(pid, t, th, nth, 0, 1, NULL, src, NULL);
    dump_print_tasks_json(tk, n, src);
    fputs("}\n", stdout);
    return REMORA_OK;
}

enum { D_HELP = 1, D_PID, D_CORE, D_EXE, D_ROOT, D_JSON, D_SUBPROCESSES, D_NATIVE, D_LOCALS,
       D_ASYNC, D_NO_SOURCE, D_OPCODES };

static const cli_opt_t dump_opts[] = {
    { D_HELP, "-h", "--help", NULL, NULL, "print this help and exit", 0 },
    { D_PID, "-p", "--pid", NULL, "PID", "the process to read (it is not stopped)", 0 },
    { D_CORE, NULL, "--core", NULL, "FILE", "read a core dump of a Python process instead", 0 },
    { D_EXE, NULL, "--exe", NULL, "PYTHON", "with --core: the executable the core is of", 0 },
    { D_ROOT, NULL, "--root", NULL, "DIR",
      "with --core: the process's / (a chroot, a container)", 0 },
    { D_JSON, NULL, "--json", NULL, NULL, "print JSON instead of text", 0 },
    { D_SUBPROCESSES, NULL, "--subprocesses", NULL, NULL,
      "also each descendant process running Python", 0 },
    { D_NATIVE, NULL, "--native", NULL, NULL,
      "C frames too, merged with the Python frames (ptrace)", 0 },
    { D_ASYNC, NULL, "--async", NULL, NULL,
      "every asyncio task instead: its stack, who awaits it", 0 },
    { D_LOCALS, NULL, "--locals", NULL, NULL,
      "each Python frame's arguments and local variables", 0 },
    { D_NO_SOURCE, NULL, "--no-source", NULL, NULL,
      "leave out the source line under each frame", 0 },
    { D_OPCODES, NULL, "--opcodes", NULL, NULL,
      "each Python frame's instruction (name, offset)", 0 },
    { 0 }
};

static const char dump_usage[] =
    "remora dump ([-p] PID | --core FILE [--exe PYTHON] [--root DIR]) [opts]";

/* The one-line explanation of a failure on a core file; returns the exit code. */
static int core_fail(int err, const char *core, const proc_t *p, const char *why)
{
    const char *note = p ? proc_problem(p) : "";

    switch (err) {
    case REMORA_ENOPROC:
        cli_error("cannot open core file '%s': no such file", core);
        break;
    case REMORA_EPERM:
        cli_error("permission denied reading core file '%s'", core);
        break;
    case REMORA_EUSAGE:
        /* found by its type on opening (check_dump looked before): never read */
        cli_error("'%s' is not a regular file, so not a core file: give a core dump "
                  "(gcore, or the kernel's core pattern)", core);
        break;
    case REMORA_ENOTPY:
    case REMORA_EVERSION:
        if (p == NULL)
            cli_error("'%s' is not an ELF core file (64-bit, little-endian)", core);
        else if (*note)
            cli_error("core '%s': %s; %s (point --exe at the executable, --root at the "
                      "chroot or container root the process ran in)", core,
                      why && *why ? why : remora_strerror(err), note);
        else
            cli_error("core '%s': %s", core, why && *why ? why : remora_strerror(err));
        break;
    default:
        cli_error("core '%s': %s (%s)%s%s", core, why && *why ? why : "cannot read it",
                  remora_strerror(err), *note ? "; " : "", note);
        break;
    }
    return remora_exit_code(err);
}


/* A live target runs on while it is read: the per-sample reader checks that no stack
 * moved while it was read and that every code object is the one its frame ran from. A
 * thread caught moving (or a thread list changing under us) is read again, a few times
 * at most; what is still unreadable then is said so. */
static int read_live(unwinder_t *u, unw_thread_t **th, size_t *n)
{
    unw_set_tries(u, DUMP_TRIES);
    return unw_sample(u, th, n);
}

/* A live process opened through libremora (its messages are the command's): *r owns the
 * source and the unwinder (reading everything, as dump prints it), which *p, *t and *u
 * borrow; what dump reads beyond the API's structs (locals, source lines, C frames, tasks
 * as dump prints them) goes through that unwinder. Returns 0, or a code with why set. */
static int open_live(pid_t pid, remora_t **r, proc_t **p, const py_target_t **t,
                     unwinder_t **u, char *why, size_t whylen)
{
    int err = remora_open(pid, 0, r, why, whylen);

    if (err)
        return err;
    *p = remora_proc(*r);
    *t = remora_target(*r);
    *u = remora_unwinder(*r);
    unw_set_want(*u, UNW_WANT_ALL);
    return REMORA_OK;
}

#define DUMP_SUBPROCESSES 256

/* --subprocesses: every descendant of pid that runs Python, after pid itself (one JSON
 * object each, in the "processes" array the caller opened). One that is not Python or
 * exits meanwhile is left out: it has no Python stacks to show. */
static void dump_descendants(pid_t pid, int json, int async, int source, int opcodes)
{
    pid_t kids[DUMP_SUBPROCESSES];
    size_t nkids = 0, k;

    proc_descendants(pid, kids, DUMP_SUBPROCESSES, &nkids);
    for (k = 0; k < nkids; k++) {
        remora_t *r = NULL;
        proc_t *p = NULL;
        const py_target_t *t = NULL;
        unwinder_t *u = NULL;
        unw_thread_t *th = NULL;
        size_t n = 0;
        char why[256];
        dump_src_t src;
        dump_src_init(&src, NULL);
        if (async) {
            if (open_live(kids[k], &r, &p, &t, &u, why, sizeof why) == REMORA_OK) {
                fputs(json ? "," : "\n", stdout);
                src.p = p;
                if (dump_async(u, kids[k], t, json, why, sizeof why, source ? &src : NULL) != REMORA_OK) {
                    /* one line for the process in its place, in the same format */
                    if (json) {
                        printf("{\"pid\":%d,\"error\":", (int)kids[k]);
                        out_json_str(stdout, why);
                        fputs("}\n", stdout);
                    } else {
                        printf("Process %d: %s\n", (int)kids[k], why);
                    }
                }
            }
        } else if (open_live(kids[k], &r, &p, &t, &u, why, sizeof why) == REMORA_OK &&
                   read_live(u, &th, &n) == REMORA_OK) {
            src.p = p;
            if (json) {
                fputc(',', stdout);
                dump_print_json(kids[k], t, th, n, 0, NULL, source ? &src : NULL, opcodes ? u : NULL);
            } else {
                fputc('\n', stdout);
                dump_print_text(kids[k], t, th, n, NULL, source ? &src : NULL, opcodes ? u : NULL);
            }
        }
        dump_src_fini(&src);
        remora_close(r);                /* its unwinder and source with it */
    }
    if (json)
        fputs("]}\n", stdout);
}

/* A path option's value: not missing, not empty. Returns 0, or -1 after one line. */
static int path_arg(const char *flag, const char *v, const char *accepts, const char **out)
{
    if (v == NULL || *v == '\0')
        return cli_bad_value("dump", flag, v ? "" : NULL, accepts);
    *out = v;
    return 0;
}

/* Why 'path' is not a directory (want_dir) or not a file: returns 0 if it is, else 1 with
 * the reason in why. */
static int path_problem(const char *path, int want_dir, char *why, size_t cap)
{
    struct stat st;

    if (stat(path, &st) != 0)
        snprintf(why, cap, "%s", strerror(errno));
    else if (want_dir && !S_ISDIR(st.st_mode))
        snprintf(why, cap, "not a directory");
    else if (!want_dir && !S_ISREG(st.st_mode))
        snprintf(why, cap, "%s, not a regular file", remora_file_kind(st.st_mode));
    else
        return 0;
    return 1;
}

/* dump's options. */
typedef struct dump_args {
    pid_t pid;                      /* -p (0: --core) */
    const char *core, *exe, *root;  /* --core, --exe, --root (NULL: not given) */
    int json, subprocesses, native, async, locals, opcodes;
    int source;                     /* 0 with --no-source */
} dump_args_t;

/* Returns 0, 1 after --help (printed), or -1 after one line. */
static int parse_dump(int argc, char **argv, dump_args_t *d)
{
    int i;
    pid_t word = 0;

    memset(d, 0, sizeof *d);
    d->source = 1;
    for (i = 1; i < argc; i++) {
        const char *flag, *v;
        switch (cli_opt_next("dump", dump_opts, argc, argv, &i, &flag, &v)) {
        case CLI_ARG_BAD:
            return -1;
        case CLI_ARG_WORD:
            /* a pid alone, as -p (`remora dump 1234`) */
            if (cli_word_pid("dump", flag, &word, "see 'remora dump --help' for the options"))
                return -1;
            break;
        case D_HELP:
            cli_opt_help(stdout, dump_usage, "print every thread's Python stack, of a live "
                         "process or of a core dump", dump_opts);
            return 1;
        case D_PID:
            if (cli_parse_pid(v, &d->pid) != 0)
                return cli_bad_value("dump", flag, v, cli_pid_accepts);
            break;
        case D_CORE:
            if (path_arg(flag, v, "a core file", &d->core))
                return -1;
            break;
        case D_EXE:
            if (path_arg(flag, v, "the Python executable the core is of", &d->exe))
                return -1;
            break;
        case D_ROOT:
            if (path_arg(flag, v, "the directory the core's process saw as /", &d->root))
                return -1;
            break;
        case D_JSON:
            d->json = 1;
            break;
        case D_SUBPROCESSES:
            d->subprocesses = 1;
            break;
        case D_NATIVE:
            d->native = 1;
            break;
        case D_ASYNC:
            d->async = 1;
            break;
        case D_LOCALS:
            d->locals = 1;
            break;
        case D_NO_SOURCE:
            d->source = 0;
            break;
        case D_OPCODES:
            d->opcodes = 1;
            break;
        }
    }
    return cli_word_pid_check("dump", word, &d->pid);
}

/* The options that do not go together, and --exe's and --root's paths. Returns 0, or -1
 * after one line. */
static int check_dump(const dump_args_t *d)
{
    struct stat st;
    char why[512];

    if ((d->pid == 0) == (d->core == NULL)) {
        cli_error("dump needs one target, a pid or a core file: usage: %s", dump_usage);
        return -1;
    }
    if (d->native && d->subprocesses) {
        cli_error("dump: --native reads one process; leave out --subprocesses");
        return -1;
    }
    if (d->native && d->async) {
        cli_error("dump: --async shows tasks, --native C frames: one at a time");
        return -1;
    }
    if (d->opcodes && d->async) {
        cli_error("dump: --async shows tasks, --opcodes thread stacks' instructions: one at a time");
        return -1;
    }
    if (d->locals && d->async) {
        cli_error("dump: --async shows tasks, --locals thread stacks' variables: one at a time");
        return -1;
    }
    if (d->locals && d->subprocesses) {
        cli_error("dump: --locals reads one process; leave out --subprocesses");
        return -1;
    }
    if (d->core != NULL && d->subprocesses) {
        cli_error("dump: --subprocesses reads live processes, not a core file");
        return -1;
    }
    /* a FIFO, device or directory is no core: refused by its type, never read (a missing
     * file is exit 2, as a missing process, when it is opened) */
    if (d->core != NULL && stat(d->core, &st) == 0 && !S_ISREG(st.st_mode)) {
        cli_error("dump: --core takes a core file: '%s' is %s, not a regular file", d->core,
                  remora_file_kind(st.st_mode));
        return -1;
    }
    if (d->core == NULL && (d->exe != NULL || d->root != NULL)) {
        cli_error("dump: --exe and --root go with --core; usage: %s", dump_usage);
        return -1;
    }
    if (d->exe != NULL && path_problem(d->exe, 0, why, sizeof why)) {
        cli_error("dump: --exe takes the Python executable the core is of: '%s': %s", d->exe,
                  why);
        return -1;
    }
    if (d->root != NULL && path_problem(d->root, 1, why, sizeof why)) {
        cli_error("dump: --root takes the directory the core's process saw as /: '%s': %s",
                  d->root, why);
        return -1;
    }
    return 0;
}

/* --native: u merges C stacks in; a live target's threads held still (*frz) while they
 * are read. Returns REMORA_OK, an error for the caller's line (why set), or with
 * *printed set the exit code after its line. */
static int native_on(const dump_args_t *d, proc_t *p, pid_t pid, unwinder_t *u,
                     freezer_t **frz, char *why, size_t whylen, int *printed)
{
    int err = unw_native_enable(u);

    if (err) {
        snprintf(why, whylen, "--native: %s", err == REMORA_EUSAGE ?
                 "C stacks are read on x86_64 only" : "no ELF file of the target could be read");
        return err;
    }
    if (d->core != NULL)
        return REMORA_OK;
    /* its threads held still while their C stacks are read */
    if ((err = freeze_new(p, frz)) != REMORA_OK) {
        *printed = 1;
        return cli_sampler_fail(err, pid, "--native");
    }
    freeze_want_states(*frz);
    return freeze_stop(*frz);
}

int cmd_dump(int argc, char **argv)
{
    dump_args_t d;
    pid_t pid;
    int err, printed = 0;
    dump_src_t src;
    unw_locals_t *lr = NULL;
    freezer_t *frz = NULL;
    remora_t *r = NULL;
    proc_t *p = NULL;
    py_target_t t;
    unwinder_t *u = NULL;
    unw_thread_t *th = NULL;
    size_t n = 0;
    char why[512] = "";

    switch (parse_dump(argc, argv, &d)) {
    case 0: break;
    case 1: return REMORA_EXIT_OK;
    default: return REMORA_EXIT_USAGE;
    }
    if (check_dump(&d))
        return REMORA_EXIT_USAGE;
    dump_print_live(d.core == NULL);
    pid = d.pid;
    dump_src_init(&src, NULL);

    if (d.core != NULL) {
        err = proc_open_core(d.core, d.exe, d.root, &p);
        if (err)
            return core_fail(err, d.core, NULL, NULL);
        pid = proc_pid(p);
        src.p = p;
        /* the library's handle over the core (p stays dump's on failure: core_fail
         * names what it found, e.g. a missing executable) */
        err = remora_adopt(p, NULL, 0, &r, why, sizeof why);
        if (err)
            goto fail;
        t = *remora_target(r);
        u = remora_unwinder(r);
    } else {
        const py_target_t *lt;
        err = open_live(pid, &r, &p, &lt, &u, why, sizeof why);
        if (err)
            return cli_fail(err, pid, why);
        t = *lt;
        src.p = p;
    }
    if (d.locals && (err = unw_locals_new(p, &t, &lr)) != REMORA_OK)
        goto fail;
    if (d.native && (err = native_on(&d, p, pid, u, &frz, why, sizeof why, &printed)) != REMORA_OK) {
        if (printed)
            goto out;
        goto fail;
    }
    if (d.async) {
        if (d.subprocesses)
            fputs(d.json ? "{\"processes\":[" : "", stdout);
        err = dump_async(u, pid, &t, d.json, why, sizeof why, d.source ? &src : NULL);
        if (err != REMORA_OK) {
            if (d.subprocesses && d.json)
                fputs("]}\n", stdout);
            if (err == REMORA_ENOPROC && d.core == NULL) {
                cli_error("pid %d exited during the dump", (int)pid);
                err = REMORA_EXIT_NOPROC;
                goto out;
            }
            goto fail;
        }
        if (d.subprocesses)
            dump_descendants(pid, d.json, 1, d.source, 0);
        fflush(stdout);
        err = REMORA_EXIT_OK;
        goto out;
    }
    err = read_live(u, &th, &n);
    if (frz != NULL) {
        freeze_go(frz);
        freeze_free(frz);
        frz = NULL;
    }
    if (err) {
        if (err == REMORA_ENOPROC && d.core == NULL) {
            cli_error("pid %d exited during the dump", (int)pid);
            err = REMORA_EXIT_NOPROC;
            goto out;
        }
        snprintf(why, sizeof why, "could not read the thread list");
        goto fail;
    }
    if (d.subprocesses)
        fputs(d.json ? "{\"processes\":[" : "", stdout);
    if (d.json)
        dump_print_json(pid, &t, th, n, d.native, lr, d.source ? &src : NULL, d.opcodes ? u : NULL);
    else
        dump_print_text(pid, &t, th, n, lr, d.source ? &src : NULL, d.opcodes ? u : NULL);
    if (d.subprocesses)
        dump_descendants(pid, d.json, 0, d.source, d.opcodes);
    fflush(stdout);
    err = REMORA_EXIT_OK;
    goto out;
fail:
    if (d.core != NULL) {
        /* ENOPROC from a core means a read found nothing, not a process gone */
        err = core_fail(err == REMORA_ENOPROC ? REMORA_EFAULT : err, d.core, p, why);
    } else {
        err = cli_fail(err, pid, why);
    }
out:
    if (frz != NULL) {
        freeze_go(frz);
        freeze_free(frz);
    }
    dump_src_fini(&src);
    unw_locals_free(lr);
    if (r != NULL) {
        remora_close(r);            /* its unwinder and source with it */
    } else {
        unw_free(u);
        proc_free(p);
    }
    return err;
}
