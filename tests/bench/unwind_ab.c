/* tests/bench/unwind_ab.c — the measurement behind --native's choice of unwinder
 * (docs/native.md): the same threads, held still, unwound ROUNDS times each by
 *   libunwind   libunwind-ptrace (_UPT_accessors: a PTRACE_PEEKDATA per word read)
 *   libdw-pid   elfutils' dwfl_linux_proc_attach + dwfl_getthread_frames (its own
 *               ptrace memory reads, a word at a time)
 *   remora      remora's unwind/native.c: libdwfl over one copy of the stack
 *               (process_vm_readv from SP to its mapping's end), registers by ptrace
 * printing CPU microseconds per thread unwound and the frames found (names not looked
 * up: the unwind alone). Measures, never asserts. Needs libunwind-dev (bench only):
 *   make build/unwind_ab && build/unwind_ab PID [ROUNDS]
 */
#include <elfutils/libdwfl.h>
#include <libunwind-ptrace.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "remora.h"
#include "proc/proc.h"
#include "unwind/unwind.h"
#include "unwind/internal.h"
#include "util/util.h"

#define MAXT 256

static double cpu_us(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

static int count_frame(Dwfl_Frame *state, void *arg)
{
    (void)state;
    return ++*(int *)arg < 512 ? DWARF_CB_OK : DWARF_CB_ABORT;
}

int main(int argc, char **argv)
{
    pid_t pid, tids[MAXT];
    size_t nt = 0, i;
    int rounds, r, frames;
    proc_t *p = NULL;
    freezer_t *frz = NULL;
    double t0;

    if (argc < 2)
        return fprintf(stderr, "usage: unwind_ab PID [ROUNDS]\n"), 1;
    pid = atoi(argv[1]);
    rounds = argc > 2 ? atoi(argv[2]) : 200;
    if (proc_open(pid, &p) || freeze_new(p, &frz) || freeze_stop(frz) ||
        proc_tasks(p, tids, MAXT, &nt))
        return fprintf(stderr, "unwind_ab: cannot hold pid %d\n", (int)pid), 1;
    if (nt > MAXT)
        nt = MAXT;
    printf("pid %d, %zu threads, %d rounds\n", (int)pid, nt, rounds);

    /* libunwind-ptrace */
    {
        unw_addr_space_t as = unw_create_addr_space(&_UPT_accessors, 0);
        unw_set_caching_policy(as, UNW_CACHE_GLOBAL);
        frames = 0;
        t0 = cpu_us();
        for (r = 0; r < rounds; r++)
            for (i = 0; i < nt; i++) {
                void *ui = _UPT_create(tids[i]);
                unw_cursor_t c;
                int n = 0;
                if (ui != NULL && unw_init_remote(&c, as, ui) == 0)
                    while (n < 512 && unw_step(&c) > 0)
                        n++;
                frames += n + 1;
                _UPT_destroy(ui);
            }
        printf("libunwind-ptrace: %.1f us/thread, %.1f frames/thread\n",
               (cpu_us() - t0) / (rounds * (double)nt), frames / (rounds * (double)nt));
        unw_destroy_addr_space(as);
    }

    /* libdw, its own ptrace attach (the threads are ours already: it is told so) */
    {
        static char *debuginfo_path;
        Dwfl_Callbacks cb = { .find_elf = dwfl_linux_proc_find_elf,
                              .find_debuginfo = dwfl_standard_find_debuginfo,
                              .debuginfo_path = &debuginfo_path };
        Dwfl *d = dwfl_begin(&cb);
        if (d == NULL || dwfl_linux_proc_report(d, pid) != 0 || dwfl_report_end(d, NULL, NULL) != 0 ||
            dwfl_linux_proc_attach(d, pid, true) != 0) {
            printf("libdw-pid: cannot attach: %s\n", dwfl_errmsg(-1));
        } else {
            frames = 0;
            t0 = cpu_us();
            for (r = 0; r < rounds; r++)
                for (i = 0; i < nt; i++) {
                    int n = 0;
                    dwfl_getthread_frames(d, tids[i], count_frame, &n);
                    frames += n;
                }
            printf("libdw-pid (dwfl_linux_proc_attach): %.1f us/thread, %.1f frames/thread\n",
                   (cpu_us() - t0) / (rounds * (double)nt), frames / (rounds * (double)nt));
        }
        if (d != NULL)
            dwfl_end(d);
    }

    /* remora: native.c's own path, its merge given no Python frames */
    {
        strtab_t *names = strtab_new();
        unw_native_t *n = NULL;
        py_layout_t L;
        memset(&L, 0, sizeof L);
        if (names == NULL || native_new(p, names, &n) != REMORA_OK) {
            printf("remora: cannot start\n");
        } else {
            frames = 0;
            t0 = cpu_us();
            for (r = 0; r < rounds; r++)
                for (i = 0; i < nt; i++)
                    frames += native_count_frames(n, tids[i]);
            printf("remora (libdwfl over one stack copy): %.1f us/thread, %.1f frames/thread\n",
                   (cpu_us() - t0) / (rounds * (double)nt), frames / (rounds * (double)nt));
        }
        native_free(n);
        strtab_free(names);
    }
    freeze_go(frz);
    freeze_free(frz);
    proc_free(p);
    return 0;
}
