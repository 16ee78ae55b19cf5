/* tests/lib/lib_flags.c — one reading of a live process with the flags given, every frame
 * with its kind, every thread with its running task: for library_tests.py's
 * library/c-api/native and library/c-api/running-task (REMORA_NATIVE,
 * REMORA_RUNNING_TASK), whose output lib_check's form has no room for.
 *
 *   lib_flags FLAGS PID
 *
 * Prints "thread NID task 0xID" per thread, then "    KIND\tFUNCTION\tFILE\tLINE" per
 * frame, innermost first (KIND: python, native, gc, entry). Exit status: 0, 1 usage, 2 no
 * such process, 3 permission, 4 not Python, 5 other.
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

static const char *kind_name(int kind)
{
    switch (kind) {
    case REMORA_FRAME_PYTHON: return "python";
    case REMORA_FRAME_NATIVE: return "native";
    case REMORA_FRAME_GC: return "gc";
    case REMORA_FRAME_ENTRY: return "entry";
    default: return "?";
    }
}

int main(int argc, char **argv)
{
    const remora_thread_t *th;
    remora_t *r = NULL;
    size_t n, t, k;
    char why[512];
    int err;

    if (argc != 3) {
        fprintf(stderr, "usage: lib_flags FLAGS PID\n");
        return 1;
    }
    err = remora_open((pid_t)atol(argv[2]), (unsigned)strtoul(argv[1], NULL, 0), &r, why,
                      sizeof why);
    if (err != REMORA_OK) {
        fprintf(stderr, "lib_flags: %s\n", why);
        return exit_code(err);
    }
    if ((err = remora_read(r, &th, &n)) != REMORA_OK) {
        fprintf(stderr, "lib_flags: %s\n", remora_last_error(r));
        remora_close(r);
        return exit_code(err);
    }
    for (t = 0; t < n; t++) {
        printf("thread %d task %#llx\n", (int)th[t].native_id,
               (unsigned long long)th[t].task_id);
        for (k = 0; k < th[t].nframes; k++)
            printf("    %s\t%s\t%s\t%d\n", kind_name(th[t].frames[k].kind),
                   th[t].frames[k].function, th[t].frames[k].file, th[t].frames[k].line);
    }
    remora_close(r);
    return 0;
}
