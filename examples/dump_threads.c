/* examples/dump_threads.c — libremora's smallest useful program: every thread's Python
 * stack in a running process, innermost frame first, in the form of a traceback.
 *
 *   cc -o dump_threads dump_threads.c $(pkg-config --cflags --libs libremora)
 *   sudo ./dump_threads PID
 *
 * Exit status: 0, 1 usage, 2 no such process, 3 permission denied, 4 not Python (or a
 * version remora cannot read), 5 anything else (docs/api.md).
 */
#include <stdio.h>
#include <stdlib.h>

#include <remora/remora.h>

static int exit_code(int err)
{
    switch (err) {
    case REMORA_OK: return 0;
    case REMORA_EUSAGE: return 1;
    case REMORA_ENOPROC: return 2;
    case REMORA_EPERM: return 3;
    case REMORA_ENOTPY:
    case REMORA_EVERSION: return 4;
    default: return 5;
    }
}

int main(int argc, char **argv)
{
    char why[512];
    remora_t *r = NULL;
    const remora_thread_t *th;
    size_t n, i, k;
    char *end;
    long pid;
    int err;

    if (argc != 2 || (pid = strtol(argv[1], &end, 10)) <= 0 || *end != '\0') {
        fprintf(stderr, "usage: dump_threads PID\n");
        return 1;
    }
    /* every thread, with what costs little more: whether it is on a CPU, its name */
    err = remora_open((pid_t)pid, REMORA_STATUS | REMORA_THREAD_NAMES, &r, why, sizeof why);
    if (err != REMORA_OK) {
        fprintf(stderr, "dump_threads: %s\n", why);
        return exit_code(err);
    }
    err = remora_read(r, &th, &n);
    if (err != REMORA_OK) {
        fprintf(stderr, "dump_threads: %s\n", remora_last_error(r));
        remora_close(r);
        return exit_code(err);
    }
    printf("pid %d: Python %s, %zu threads\n", (int)remora_pid(r), remora_python_version(r), n);
    for (i = 0; i < n; i++) {
        printf("thread %d%s%s%s%s%s\n", (int)th[i].native_id,
               th[i].name ? " \"" : "", th[i].name ? th[i].name : "", th[i].name ? "\"" : "",
               th[i].status & REMORA_THREAD_MAIN ? " (main)" : "",
               th[i].status & REMORA_THREAD_HAS_GIL ? " (holds the GIL)" :
               th[i].status & REMORA_THREAD_ON_CPU ? " (on a CPU)" : "");
        if (th[i].error != REMORA_OK)
            printf("    (its stack could not be read: %s)\n", remora_strerror(th[i].error));
        for (k = 0; k < th[i].nframes; k++) {
            const remora_frame_t *f = &th[i].frames[k];
            printf("    File \"%s\", line %d, in %s\n", f->file, f->line, f->function);
        }
    }
    remora_close(r);
    return 0;
}
