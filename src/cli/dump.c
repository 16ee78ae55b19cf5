/* cli/dump.c — `remora dump`: every thread's Python stack, as text or JSON, of a live
 * process (-p PID) or of a core dump (--core FILE [--exe PYTHON] [--root DIR]); with
 * --locals each frame's arguments and locals too (dump_locals.c). Names from the target
 * are escaped: out_text_str() for text, out_json_str() for JSON.
 * --async: every asyncio task instead (text: a tree of tasks under those awaiting them;
 * JSON: a "tasks" array in the process object). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "remora.h"
#include "cli.h"
#include "../formats/out.h"
#include "../proc/proc.h"
#include "../py/py.h"
#include "../unwind/unwind.h"
#include "../util/util.h"

/* Each frame's source line, from the files as the target sees them (proc/source.c), each
 * file read once a dump; DUMP_SRC_FILES files at most, a file past them read for its line
 * and let go. */
#define DUMP_SRC_FILES 64
typedef struct dump_src {
    proc_t *p;
    size_t n;
    struct {
        char *path;
        proc_src_t s;
    } e[DUMP_SRC_FILES];
    proc_src_t spare;               /* the file past the bound, read last */
} dump_src_t;

static void dump_src_init(dump_src_t *c, proc_t *p)
{
    memset(c, 0, sizeof *c);
    c->p = p;
}

static void dump_src_fini(dump_src_t *c)
{
    size_t i;

    for (i = 0; i < c->n; i++) {
        free(c->e[i].path);
        proc_src_free(&c->e[i].s);
    }
    proc_src_free(&c->spare);
    c->n = 0;
}

/* The file 'path' as read (its state says whether it could be), or NULL without memory. */
static const proc_src_t *dump_src_file(dump_src_t *c, const char *path)
{
    size_t i;

    for (i = 0; i < c->n; i++)
        if (strcmp(c->e[i].path, path) == 0)
            return &c->e[i].s;
    if (c->n < DUMP_SRC_FILES && (c->e[c->n].path = strdup(path)) != NULL) {
        if (proc_source_read(c->p, path, &c->e[c->n].s) != REMORA_OK) {
            free(c->e[c->n].path);
            return NULL;
        }
        return &c->e[c->n++].s;
    }
    proc_src_free(&c->spare);
    return proc_source_read(c->p, path, &c->spare) == REMORA_OK ? &c->spare : NULL;
}

/* Frame f's source line (*len bytes), or NULL; *changed: its file changed since the
 * target started. */
static const char *dump_src_line(dump_src_t *c, const unw_frame_t *f, size_t *len, int *changed)
{
    const proc_src_t *s;

    *len = 0;
    *changed = 0;
    if (c == NULL || f->native || f->line <= 0 || *f->file == '\0' ||
        (s = dump_src_file(c, f->file)) == NULL)
        return NULL;
    *changed = s->changed;
    return proc_src_line(s, f->line, len);
}

/* A bounded copy of a line for the writers, which take NUL-terminated strings. */
static const char *src_cstr(const char *line, size_t len, char *buf, size_t cap)
{
    if (len >= cap)
        len = cap - 1;
    memcpy(buf, line, len);
    buf[len] = '\0';
    return buf;
}

/* The source line under a frame in text, indented past the frame's. */
static void print_src_text(dump_src_t *c, const unw_frame_t *f, int indent)
{
    char buf[1024];
    size_t len;
    int changed;
    const char *line = dump_src_line(c, f, &len, &changed);

    if (line == NULL || len == 0)
        return;
    printf("%*s", indent, "");
    out_text_str(stdout, src_cstr(line, len, buf, sizeof buf), 0);
    fputs(changed ? "    [file changed since the process started]\n" : "\n", stdout);
}

/* ,"source":... of a frame in JSON (null when its file or line cannot be read). */
static void print_src_json(dump_src_t *c, const unw_frame_t *f)
{
    char buf[1024];
    size_t len;
    int changed;
    const char *line;

    if (c == NULL)
        return;
    line = dump_src_line(c, f, &len, &changed);
    fputs(",\"source\":", stdout);
    if (line == NULL) {
        fputs("null", stdout);
        return;
    }
    out_json_str(stdout, src_cstr(line, len, buf, sizeof buf));
    if (changed)
        fputs(",\"source_changed\":true", stdout);
}

static void print_text(pid_t pid, const py_target_t *t, const unw_thread_t *th, size_t n,
                       unw_locals_t *lr, dump_src_t *src)
{
    size_t i, k;

    printf("Process %d: Python %s (", (int)pid, t->version);
    out_text_str(stdout, t->binary, 0);
    fputs(")\n", stdout);
    for (i = 0; i < n; i++) {
        printf("\nThread %d \"", (int)th[i].native_id);
        out_text_str(stdout, th[i].py_name ? th[i].py_name : th[i].name, '"');
        fputc('"', stdout);
        printf(" interpreter %lld", (long long)th[i].interp_id);
        if (th[i].is_main || th[i].holds_gil || th[i].on_cpu || th[i].handling_exc == 1) {
            const char *sep = "";
            fputs(" [", stdout);
            if (th[i].is_main)
                printf("%smain", sep), sep = ", ";
            if (th[i].holds_gil)
                printf("%sgil", sep), sep = ", ";
            if (th[i].on_cpu)
                printf("%son-cpu", sep), sep = ", ";
            if (th[i].handling_exc == 1)
                printf("%sexception", sep);
            fputc(']', stdout);
        }
        fputc('\n', stdout);
        if (th[i].error)
            printf("    <stack unreadable: %s>\n", remora_strerror(th[i].error));
        if (th[i].partial && !th[i].moving_in_frames)
            puts("    " UNW_MOVING);     /* the frames above those known moved while read */
        for (k = 0; k < th[i].nframes; k++) {
            const unw_frame_t *f = &th[i].frames[k];
            fputs("    ", stdout);
            out_text_str(stdout, f->function, 0);
            if (*f->file == '\0' && f->line == 0 && (f->native || th[i].moving_in_frames)) {
                fputc('\n', stdout);   /* a marker */
                continue;
            }
            fputs(" (", stdout);
            out_text_str(stdout, f->file, 0);
            if (f->native && f->line == 0)
                fputs(") [C]\n", stdout);
            else
                printf(":%d)%s\n", f->line, f->native ? " [C]" : "");
            print_src_text(src, f, 8);
            dump_locals_text(lr, f);
        }
    }
}

/* The process object without its closing brace. */
static void print_json_open(pid_t pid, const py_target_t *t, const unw_thread_t *th, size_t n,
                            int native, int tasks, unw_locals_t *lr, dump_src_t *src)
{
    size_t i, k;

    printf("{\"pid\":%d,\"python\":", (int)pid);
    out_json_str(stdout, t->version);
    fputs(",\"threads\":[", stdout);
    for (i = 0; i < n; i++) {
        printf("%s{\"native_id\":%d,\"name\":", i ? "," : "", (int)th[i].native_id);
        out_json_str(stdout, th[i].py_name ? th[i].py_name : th[i].name);
        printf(",\"interpreter\":%lld", (long long)th[i].interp_id);
        printf(",\"main\":%s,\"gil\":%s,\"on_cpu\":%s", th[i].is_main ? "true" : "false",
               th[i].holds_gil ? "true" : "false", th[i].on_cpu ? "true" : "false");
        printf(",\"exception\":%s", th[i].handling_exc < 0 ? "null" : th[i].handling_exc ? "true" : "false");
        if (th[i].error) {
            fputs(",\"error\":", stdout);
            out_json_str(stdout, remora_strerror(th[i].error));
        }
        if (th[i].partial)
            fputs(",\"partial\":true", stdout);
        if (tasks)
            printf(",\"task\":%llu,\"task_frames\":%zu", (unsigned long long)th[i].task,
                   th[i].task_frames);
        fputs(",\"frames\":[", stdout);
        if (th[i].partial && !th[i].moving_in_frames)
            printf("{\"function\":\"" UNW_MOVING "\",\"file\":\"\",\"line\":0%s}",
                   native ? ",\"native\":false" : "");
        for (k = 0; k < th[i].nframes; k++) {
            fputs(k || (th[i].partial && !th[i].moving_in_frames) ? ",{\"function\":" :
                  "{\"function\":", stdout);
            out_json_str(stdout, th[i].frames[k].function);
            fputs(",\"file\":", stdout);
            out_json_str(stdout, th[i].frames[k].file);
            printf(",\"line\":%d", th[i].frames[k].line);
            print_src_json(src, &th[i].frames[k]);
            if (native)
                printf(",\"native\":%s", th[i].frames[k].native ? "true" : "false");
            dump_locals_json(lr, &th[i].frames[k]);
            fputc('}', stdout);
        }
        fputs("]}", stdout);
    }
    fputc(']', stdout);
}

static void print_json(pid_t pid, const py_target_t *t, const unw_thread_t *th, size_t n,
                       int native, unw_locals_t *lr, dump_src_t *src)
{
    print_json_open(pid, t, th, n, native, 0, lr, src);
    fputs("}\n", stdout);
}

#define DUMP_TRIES 64    /* rounds read again until every thread reads whole */

/* ---- --async ---- */

static void print_frame_json(const unw_frame_t *f, int first, dump_src_t *src)
{
    fputs(first ? "{\"function\":" : ",{\"function\":", stdout);
    out_json_str(stdout, f->function);
    fputs(",\"file\":", stdout);
    out_json_str(stdout, f->file);
    printf(",\"line\":%d", f->line);
    print_src_json(src, f);
    fputc('}', stdout);
}

static void print_tasks_json(const unw_task_t *tk, size_t n, dump_src_t *src)
{
    size_t i, k;

    fputs(",\"tasks\":[", stdout);
    for (i = 0; i < n; i++) {
        printf("%s{\"id\":%llu,\"name\":", i ? "," : "", (unsigned long long)tk[i].id);
        out_json_str(stdout, tk[i].name);
        printf(",\"thread\":%d,\"state\":\"%s\",\"frames\":[", (int)tk[i].thread,
               tk[i].running ? "running" : "pending");
        for (k = 0; k < tk[i].nframes; k++)
            print_frame_json(&tk[i].frames[k], k == 0, src);
        fputs("],\"awaited_by\":[", stdout);
        for (k = 0; k < tk[i].nawaited_by; k++)
            printf("%s%llu", k ? "," : "", (unsigned long long)tk[i].awaited_by[k]);
        fputs("]}", stdout);
    }
    fputc(']', stdout);
}

#define TREE_MAX_DEPTH 256

/* Task i and, indented under it, the tasks it awaits' awaiters... : the tasks whose
 * awaited_by names it. 'done' marks tasks printed (a task under two awaiters is printed
 * under the first; an await cycle is cut where it comes back). */
static void print_task_tree(const unw_task_t *tk, size_t n, size_t i, unsigned char *done, int depth,
                            dump_src_t *src)
{
    size_t j, k;

    done[i] = 1;
    printf("%*s(T) ", 2 * depth, "");
    out_text_str(stdout, tk[i].name, 0);
    printf(" [%s] id 0x%llx", tk[i].running ? "running" : "pending", (unsigned long long)tk[i].id);
    if (tk[i].thread)
        printf(" thread %d", (int)tk[i].thread);
    fputc('\n', stdout);
    for (k = 0; k < tk[i].nframes; k++) {
        const unw_frame_t *f = &tk[i].frames[k];
        printf("%*s    ", 2 * depth, "");
        out_text_str(stdout, f->function, 0);
        fputs(" (", stdout);
        out_text_str(stdout, f->file, 0);
        printf(":%d)\n", f->line);
        print_src_text(src, f, 2 * depth + 8);
    }
    for (j = 0; j < n; j++)
        for (k = 0; k < tk[j].nawaited_by; k++)
            if (tk[j].awaited_by[k] == tk[i].id) {
                if (done[j])
                    printf("%*s  (T) 0x%llx: printed above (an await cycle or a second awaiter)\n",
                           2 * depth, "", (unsigned long long)tk[j].id);
                else if (depth + 1 >= TREE_MAX_DEPTH)
                    printf("%*s  ... deeper than %d\n", 2 * depth, "", TREE_MAX_DEPTH);
                else
                    print_task_tree(tk, n, j, done, depth + 1, src);
                break;
            }
}

static void print_tasks_text(pid_t pid, const py_target_t *t, const unw_task_t *tk, size_t n,
                             dump_src_t *src)
{
    unsigned char *done = calloc(n + 1, 1);
    size_t i;

    printf("Process %d: Python %s (", (int)pid, t->version);
    out_text_str(stdout, t->binary, 0);
    fputs(")\n", stdout);
    if (n == 0) {
        puts("no asyncio tasks");
        free(done);
        return;
    }
    if (done == NULL)
        return;
    printf("%zu asyncio task%s; each under the tasks awaiting it\n", n, n == 1 ? "" : "s");
    for (i = 0; i < n; i++)
        if (tk[i].nawaited_by == 0 && !done[i])
            print_task_tree(tk, n, i, done, 0, src);
    for (i = 0; i < n; i++)
        if (!done[i]) {
            puts("(in an await cycle:)");
            print_task_tree(tk, n, i, done, 0, src);
        }
    free(done);
}

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
        print_tasks_text(pid, t, tk, n, src);
        return REMORA_OK;
    }
    /* the tasks are kept until the next unw_tasks(): a sample of the threads, each with
     * its running task (what record --async reads per sample) */
    unw_set_want(u, UNW_WANT_ALL | UNW_WANT_TASKS);
    if ((err = unw_sample(u, &th, &nth)) != REMORA_OK) {
        snprintf(why, whylen, "could not read the thread list");
        return err;
    }
    print_json_open(pid, t, th, nth, 0, 1, NULL, src);
    print_tasks_json(tk, n, src);
    fputs("}\n", stdout);
    return REMORA_OK;
}

enum { D_HELP = 1, D_PID, D_CORE, D_EXE, D_ROOT, D_JSON, D_SUBPROCESSES, D_NATIVE, D_LOCALS,
       D_ASYNC, D_NO_SOURCE };

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
    { 0 }
};

static const char dump_usage[] =
    "remora dump (-p PID | --core FILE [--exe PYTHON] [--root DIR]) [options]";

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

#define DUMP_SUBPROCESSES 256

/* --subprocesses: every descendant of pid that runs Python, after pid itself (one JSON
 * object each, in the "processes" array the caller opened). One that is not Python or
 * exits meanwhile is left out: it has no Python stacks to show. */
static void dump_descendants(pid_t pid, int json, int async, int source)
{
    pid_t kids[DUMP_SUBPROCESSES];
    size_t nkids = 0, k;

    proc_descendants(pid, kids, DUMP_SUBPROCESSES, &nkids);
    for (k = 0; k < nkids; k++) {
        proc_t *p = NULL;
        py_target_t t;
        unwinder_t *u = NULL;
        unw_thread_t *th = NULL;
        size_t n = 0;
        char why[256];
        dump_src_t src;
        dump_src_init(&src, NULL);
        if (async) {
            if (proc_open(kids[k], &p) == REMORA_OK &&
                py_target_find(p, &t, why, sizeof why) == REMORA_OK && unw_new(p, &t, &u) == REMORA_OK) {
                fputs(json ? "," : "\n", stdout);
                src.p = p;
                if (dump_async(u, kids[k], &t, json, why, sizeof why, source ? &src : NULL) != REMORA_OK) {
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
        } else if (proc_open(kids[k], &p) == REMORA_OK && py_target_find(p, &t, why, sizeof why) == REMORA_OK &&
            unw_new(p, &t, &u) == REMORA_OK && read_live(u, &th, &n) == REMORA_OK) {
            src.p = p;
            if (json) {
                fputc(',', stdout);
                print_json(kids[k], &t, th, n, 0, NULL, source ? &src : NULL);
            } else {
                fputc('\n', stdout);
                print_text(kids[k], &t, th, n, NULL, source ? &src : NULL);
            }
        }
        dump_src_fini(&src);
        unw_free(u);
        proc_free(p);
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
    else if (!want_dir && S_ISDIR(st.st_mode))
        snprintf(why, cap, "a directory");
    else
        return 0;
    return 1;
}

int cmd_dump(int argc, char **argv)
{
    pid_t pid = 0;
    int json = 0, subprocesses = 0, native = 0, async = 0, locals = 0, source = 1, i, err;
    dump_src_t src;
    unw_locals_t *lr = NULL;
    freezer_t *frz = NULL;
    const char *core = NULL, *exe = NULL, *root = NULL;
    proc_t *p = NULL;
    py_target_t t;
    unwinder_t *u = NULL;
    unw_thread_t *th = NULL;
    size_t n = 0;
    char why[512] = "";

    for (i = 1; i < argc; i++) {
        const char *flag, *v;
        switch (cli_opt_next("dump", dump_opts, argc, argv, &i, &flag, &v)) {
        case CLI_ARG_BAD:
            return REMORA_EXIT_USAGE;
        case CLI_ARG_WORD:
            cli_error("dump: unexpected argument '%s'; usage: %s", flag, dump_usage);
            return REMORA_EXIT_USAGE;
        case D_HELP:
            cli_opt_help(stdout, dump_usage, "print every thread's Python stack, of a live "
                         "process or of a core dump", dump_opts);
            return REMORA_EXIT_OK;
        case D_PID:
            if (cli_parse_pid(v, &pid) != 0) {
                cli_bad_value("dump", flag, v, cli_pid_accepts);
                return REMORA_EXIT_USAGE;
            }
            break;
        case D_CORE:
            if (path_arg(flag, v, "a core file", &core))
                return REMORA_EXIT_USAGE;
            break;
        case D_EXE:
            if (path_arg(flag, v, "the Python executable the core is of", &exe))
                return REMORA_EXIT_USAGE;
            break;
        case D_ROOT:
            if (path_arg(flag, v, "the directory the core's process saw as /", &root))
                return REMORA_EXIT_USAGE;
            break;
        case D_JSON:
            json = 1;
            break;
        case D_SUBPROCESSES:
            subprocesses = 1;
            break;
        case D_NATIVE:
            native = 1;
            break;
        case D_ASYNC:
            async = 1;
            break;
        case D_LOCALS:
            locals = 1;
            break;
        case D_NO_SOURCE:
            source = 0;
            break;
        }
    }
    if ((pid == 0) == (core == NULL)) {
        cli_error("dump needs one target, a pid or a core file: usage: %s", dump_usage);
        return REMORA_EXIT_USAGE;
    }
    if (native && subprocesses) {
        cli_error("dump: --native reads one process; leave out --subprocesses");
        return REMORA_EXIT_USAGE;
    }
    if (native && async) {
        cli_error("dump: --async shows tasks, --native C frames: one at a time");
        return REMORA_EXIT_USAGE;
    }
    if (locals && async) {
        cli_error("dump: --async shows tasks, --locals thread stacks' variables: one at a time");
        return REMORA_EXIT_USAGE;
    }
    if (locals && subprocesses) {
        cli_error("dump: --locals reads one process; leave out --subprocesses");
        return REMORA_EXIT_USAGE;
    }
    if (core != NULL && subprocesses) {
        cli_error("dump: --subprocesses reads live processes, not a core file");
        return REMORA_EXIT_USAGE;
    }
    if (core == NULL && (exe != NULL || root != NULL)) {
        cli_error("dump: --exe and --root go with --core; usage: %s", dump_usage);
        return REMORA_EXIT_USAGE;
    }

    if (exe != NULL && path_problem(exe, 0, why, sizeof why)) {
        cli_error("dump: --exe takes the Python executable the core is of: '%s': %s", exe, why);
        return REMORA_EXIT_USAGE;
    }
    if (root != NULL && path_problem(root, 1, why, sizeof why)) {
        cli_error("dump: --root takes the directory the core's process saw as /: '%s': %s",
                  root, why);
        return REMORA_EXIT_USAGE;
    }
    why[0] = '\0';
    dump_src_init(&src, NULL);

    if (core != NULL) {
        err = proc_open_core(core, exe, root, &p);
        if (err)
            return core_fail(err, core, NULL, NULL);
        pid = proc_pid(p);
    } else {
        err = proc_open(pid, &p);
        if (err)
            return cli_fail(err, pid, NULL);
    }
    src.p = p;
    err = py_target_find(p, &t, why, sizeof why);
    if (err)
        goto fail;
    err = unw_new(p, &t, &u);
    if (err)
        goto fail;
    if (locals && (err = unw_locals_new(p, &t, &lr)) != REMORA_OK)
        goto fail;
    if (native) {
        err = unw_native_enable(u);
        if (err) {
            snprintf(why, sizeof why, "--native: %s", err == REMORA_EUSAGE ?
                     "C stacks are read on x86_64 only" : "no ELF file of the target could be read");
            goto fail;
        }
        if (core == NULL) {
            /* its threads held still while their C stacks are read */
            if ((err = freeze_new(p, &frz)) != REMORA_OK) {
                err = cli_sampler_fail(err, pid, "--native");
                goto out;
            }
            freeze_want_states(frz);
            if ((err = freeze_stop(frz)) != REMORA_OK)
                goto fail;
        }
    }
    if (async) {
        if (subprocesses)
            fputs(json ? "{\"processes\":[" : "", stdout);
        err = dump_async(u, pid, &t, json, why, sizeof why, source ? &src : NULL);
        if (err != REMORA_OK) {
            if (subprocesses && json)
                fputs("]}\n", stdout);
            if (err == REMORA_ENOPROC && core == NULL) {
                cli_error("pid %d exited during the dump", (int)pid);
                err = REMORA_EXIT_NOPROC;
                goto out;
            }
            goto fail;
        }
        if (subprocesses)
            dump_descendants(pid, json, 1, source);
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
        if (err == REMORA_ENOPROC && core == NULL) {
            cli_error("pid %d exited during the dump", (int)pid);
            err = REMORA_EXIT_NOPROC;
            goto out;
        }
        snprintf(why, sizeof why, "could not read the thread list");
        goto fail;
    }
    if (subprocesses)
        fputs(json ? "{\"processes\":[" : "", stdout);
    if (json)
        print_json(pid, &t, th, n, native, lr, source ? &src : NULL);
    else
        print_text(pid, &t, th, n, lr, source ? &src : NULL);
    if (subprocesses)
        dump_descendants(pid, json, 0, source);
    fflush(stdout);
    err = REMORA_EXIT_OK;
    goto out;
fail:
    if (core != NULL) {
        /* ENOPROC from a core means a read found nothing, not a process gone */
        err = core_fail(err == REMORA_ENOPROC ? REMORA_EFAULT : err, core, p, why);
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
    unw_free(u);
    proc_free(p);
    return err;
}
