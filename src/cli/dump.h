/* cli/dump.h — what dump.c shares with dump_print.c, which prints what it reads. */
#ifndef REMORA_CLI_DUMP_H
#define REMORA_CLI_DUMP_H

#include <stddef.h>
#include <sys/types.h>

#include "../proc/proc.h"
#include "../py/py.h"
#include "../unwind/unwind.h"

/* Each frame's source line, from the files as the target would read them
 * (proc/source.c), each file read once a dump (a process's, with --subprocesses) and
 * known by its identity, within the cache's bounds (PROC_SRC_CACHE_*). */
typedef struct dump_src {
    proc_t *p;
    proc_src_cache_t *cache;        /* made on the first line asked for, for p */
    proc_t *cache_p;                /* the handle it reads through */
} dump_src_t;

/* A dump's source files, read through p (set before the first line is asked for). */
void dump_src_init(dump_src_t *c, proc_t *p);
void dump_src_fini(dump_src_t *c);

/* Whether the processes printed are live (-p), whose resident size (/proc/PID/statm) each
 * process's text line ends with (", resident N MiB") and its JSON object holds
 * ("resident_bytes"); not for a core. */
void dump_print_live(int live);

/* One process's threads (th, n of them), the main thread first, then the others oldest
 * first: text, or the JSON process object (with dump_print_json_open, without its closing
 * brace; 'tasks': each thread's running task too). Text folds a run of identical frames
 * (recursion) into one line ending `×N` (not with lr: each frame's locals differ) and
 * names a thread's interpreter only when the threads are of more than one. lr: each
 * frame's locals too (NULL: none); src: each frame's source line (NULL: none); native:
 * each frame says whether it is C (JSON); ops (dump --opcodes, the unwinder that read th,
 * NULL: none): each Python frame's instruction (one read of the target a frame). */
void dump_print_text(pid_t pid, const py_target_t *t, const unw_thread_t *th, size_t n,
                     unw_locals_t *lr, dump_src_t *src, unwinder_t *ops);
void dump_print_json_open(pid_t pid, const py_target_t *t, const unw_thread_t *th, size_t n,
                          int native, int tasks, unw_locals_t *lr, dump_src_t *src, unwinder_t *ops);
void dump_print_json(pid_t pid, const py_target_t *t, const unw_thread_t *th, size_t n,
                     int native, unw_locals_t *lr, dump_src_t *src, unwinder_t *ops);

/* One process's asyncio tasks (tk, n of them): the "tasks" member of its JSON object, or
 * as text the process's line and a tree of tasks under those awaiting them. */
void dump_print_tasks_json(const unw_task_t *tk, size_t n, dump_src_t *src);
void dump_print_tasks_text(pid_t pid, const py_target_t *t, const unw_task_t *tk, size_t n,
                           dump_src_t *src);

#endif
