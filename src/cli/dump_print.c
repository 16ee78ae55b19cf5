/* cli/dump_print.c — what `remora dump` prints: a process's threads and their frames as
 * text or JSON, its asyncio tasks (a tree of tasks under those awaiting them, or a JSON
 * array), and each frame's source line, read as the target sees its file. Names from
 * the target are escaped: out_text_str() for text, out_json_str() for JSON. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "remora.h"
#include "cli.h"
#include "dump.h"
#include "../formats/out.h"
#include "../proc/proc.h"
#include "../py/py.h"
#include "../unwind/unwind.h"

void dump_src_init(dump_src_t *c, proc_t *p)
{
    memset(c, 0, sizeof *c);
    c->p = p;
}

void dump_src_fini(dump_src_t *c)
{
    proc_src_cache_free(c->cache);
    c->cache = NULL;
    c->cache_p = NULL;
}

/* The file 'path' as read (its state says whether it could be), or NULL without memory. */
static const proc_src_t *dump_src_file(dump_src_t *c, const char *path)
{
    if (c->cache != NULL && c->cache_p != c->p)
        dump_src_fini(c);               /* another process: its own files */
    if (c->cache == NULL) {
        if ((c->cache = proc_src_cache_new(c->p)) == NULL)
            return NULL;
        c->cache_p = c->p;
    }
    return proc_src_cache_get(c->cache, path);
}

/* ,"sources_unread":[{"file":...,"why":...}...] : each file named whose lines could not
 * be shown and why, once (nothing when every file was read). */
static void print_unread_json(const dump_src_t *c)
{
    const char *path, *why;
    size_t i;

    for (i = 0; c != NULL && proc_src_cache_unread(c->cache, i, &path, &why) == 0; i++) {
        fputs(i ? ",{\"file\":" : ",\"sources_unread\":[{\"file\":", stdout);
        out_json_str(stdout, path);
        fputs(",\"why\":", stdout);
        out_json_str(stdout, why);
        fputc('}', stdout);
    }
    if (i > 0)
        fputc(']', stdout);
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

/* The order threads are printed in: the main thread first, then the others oldest first
 * (the interpreter lists its threads newest first). *out is malloc'd (the caller frees
 * it), NULL without memory: then the list's own order. */
static size_t *thread_order(const unw_thread_t *th, size_t n)
{
    size_t *ord = malloc((n ? n : 1) * sizeof *ord), i, k = 0;

    if (ord == NULL)
        return NULL;
    for (i = 0; i < n; i++)
        if (th[i].is_main)
            ord[k++] = i;
    for (i = n; i-- > 0;)
        if (!th[i].is_main)
            ord[k++] = i;
    return ord;
}

/* More than one interpreter among the threads: only then does a thread header name its. */
static int many_interps(const unw_thread_t *th, size_t n)
{
    size_t i;

    for (i = 1; i < n; i++)
        if (th[i].interp_id != th[0].interp_id)
            return 1;
    return 0;
}

/* Frames a and b print alike (function, file, line, kind, and with 'ops' the instruction's
 * offset): a run of them is one line, `×N` (recursion). */
static int frame_same(const unw_frame_t *a, const unw_frame_t *b, int ops)
{
    return a->line == b->line && a->native == b->native && strcmp(a->function, b->function) == 0 &&
           strcmp(a->file, b->file) == 0 && (!ops || a->offset == b->offset);
}

/* The instruction Python frame f is at: its name (NULL when unknown), *opcode and *offset,
 * as the library gives them (remora_frame_t's opname): a caller's frame on 3.11 and 3.12
 * rests in its call's inline cache (`CACHE`), whose bytes are the specialiser's counters,
 * not instructions to step back over. */
static const char *frame_op(unwinder_t *ops, const unw_frame_t *f, int *opcode, int *offset)
{
    const char *name;

    *opcode = *offset = -1;
    if (ops == NULL || f->native || (name = unw_frame_opcode(ops, f, opcode)) == NULL)
        return NULL;
    *offset = f->offset;
    return name;
}

/* " [OP at N]" after a Python frame: the instruction it is at (nothing when unknown). */
static void print_op_text(unwinder_t *ops, const unw_frame_t *f)
{
    int opcode, offset;
    const char *name = frame_op(ops, f, &opcode, &offset);

    if (name != NULL)
        printf(" [%s at %d]", name, offset);
}

/* A live process's resident size (a core's pid is not its process now: none). */
static int resident_live;

void dump_print_live(int live)
{
    resident_live = live;
}

static int resident(pid_t pid, uint64_t *bytes)
{
    return resident_live && proc_rss(pid, bytes) == REMORA_OK;
}

static void put_resident_text(pid_t pid)
{
    uint64_t b;

    if (resident(pid, &b))
        printf(", resident %.2f MiB", (double)b / (1024.0 * 1024.0));
}

static void put_resident_json(pid_t pid)
{
    uint64_t b;

    if (resident(pid, &b))
        printf(",\"resident_bytes\":%llu", (unsigned long long)b);
}

void dump_print_text(pid_t pid, const py_target_t *t, const unw_thread_t *th, size_t n,
                     unw_locals_t *lr, dump_src_t *src, unwinder_t *ops)
{
    size_t j, k, run;
    size_t *ord = thread_order(th, n);
    int interps = many_interps(th, n);

    printf("Process %d: Python %s (", (int)pid, t->version);
    out_text_str(stdout, t->binary, 0);
    fputc(')', stdout);
    put_resident_text(pid);
    fputc('\n', stdout);
    for (j = 0; j < n; j++) {
        size_t i = ord != NULL ? ord[j] : j;
        printf("\nThread %d \"", (int)th[i].native_id);
        out_text_str(stdout, th[i].thread_name ? th[i].thread_name : th[i].comm, '"');
        fputc('"', stdout);
        if (interps)
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
        for (k = 0; k < th[i].nframes; k += run) {
            const unw_frame_t *f = &th[i].frames[k];
            /* recursion: the same frame again and again, one line (each frame's locals
             * differ: with --locals every frame is printed) */
            for (run = 1; lr == NULL && k + run < th[i].nframes &&
                          frame_same(f, &th[i].frames[k + run], ops != NULL); run++)
                ;
            fputs("    ", stdout);
            out_text_str(stdout, f->function, 0);
            if (*f->file == '\0' && f->line == 0 && (f->native || th[i].moving_in_frames)) {
                fputc('\n', stdout);   /* a marker */
                continue;
            }
            fputs(" (", stdout);
            out_text_str(stdout, f->file, 0);
            if (f->native && f->line == 0)
                fputs(") [C]", stdout);
            else
                printf(":%d)%s", f->line, f->native ? " [C]" : "");
            print_op_text(ops, f);
            if (run > 1)
                printf(" \u00d7%zu", run);
            fputc('\n', stdout);
            print_src_text(src, f, 8);
            dump_locals_text(lr, f);
        }
    }
    free(ord);
}

/* ,"opname":...,"opcode":N,"offset":N of a Python frame (null and -1s when unknown; a C
 * frame has none), with --opcodes. */
static void print_op_json(unwinder_t *ops, const unw_frame_t *f)
{
    int opcode, offset;
    const char *name;

    if (ops == NULL || f->native)
        return;
    name = frame_op(ops, f, &opcode, &offset);
    fputs(",\"opname\":", stdout);
    if (name == NULL) {
        fputs("null,\"opcode\":-1,\"offset\":-1", stdout);
        return;
    }
    out_json_str(stdout, name);
    printf(",\"opcode\":%d,\"offset\":%d", opcode, offset);
}

/* The process object without its closing brace. */
void dump_print_json_open(pid_t pid, const py_target_t *t, const unw_thread_t *th, size_t n,
                          int native, int tasks, unw_locals_t *lr, dump_src_t *src, unwinder_t *ops)
{
    size_t j, k;
    size_t *ord = thread_order(th, n);

    printf("{\"pid\":%d,\"python\":", (int)pid);
    out_json_str(stdout, t->version);
    put_resident_json(pid);
    fputs(",\"threads\":[", stdout);
    for (j = 0; j < n; j++) {
        size_t i = ord != NULL ? ord[j] : j;
        printf("%s{\"native_id\":%d,\"name\":", j ? "," : "", (int)th[i].native_id);
        out_json_str(stdout, th[i].thread_name ? th[i].thread_name : th[i].comm);
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
            print_op_json(ops, &th[i].frames[k]);
            dump_locals_json(lr, &th[i].frames[k]);
            fputc('}', stdout);
        }
        fputs("]}", stdout);
    }
    fputc(']', stdout);
    free(ord);
}

void dump_print_json(pid_t pid, const py_target_t *t, const unw_thread_t *th, size_t n,
                     int native, unw_locals_t *lr, dump_src_t *src, unwinder_t *ops)
{
    dump_print_json_open(pid, t, th, n, native, 0, lr, src, ops);
    print_unread_json(src);
    fputs("}\n", stdout);
}

/* ---- --async: the tasks ---- */

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

void dump_print_tasks_json(const unw_task_t *tk, size_t n, dump_src_t *src)
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
    print_unread_json(src);
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

void dump_print_tasks_text(pid_t pid, const py_target_t *t, const unw_task_t *tk, size_t n,
                           dump_src_t *src)
{
    unsigned char *done = calloc(n + 1, 1);
    size_t i;

    printf("Process %d: Python %s (", (int)pid, t->version);
    out_text_str(stdout, t->binary, 0);
    fputc(')', stdout);
    put_resident_text(pid);
    fputc('\n', stdout);
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

