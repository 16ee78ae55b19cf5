/* tests/lib/lib_check.c — libremora's calls the example does not make, for
 * tests/functional/library_tests.py (the library/c-api tests): a core file, flags, a second read
 * on the same handle, the asyncio tasks. Prints what it read in the example's form.
 *
 *   lib_check [--flags N] [--tasks] (PID | --core FILE [EXE [ROOT]])
 *
 * Exit status: 0, or the example's codes (1 usage, 2 no such process or file, 3
 * permission, 4 not Python, 5 other).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static void print_frames(const remora_frame_t *f, size_t n)
{
    size_t k;

    for (k = 0; k < n; k++)
        printf("    File \"%s\", line %d, in %s%s%s\n", f[k].file, f[k].line, f[k].function,
               f[k].opname ? " @" : "", f[k].opname ? f[k].opname : "");
}

int main(int argc, char **argv)
{
    unsigned flags = 0;
    int tasks = 0, i = 1, err, round;
    remora_t *r = NULL;
    char why[512];

    for (; i < argc && strncmp(argv[i], "--", 2) == 0 && strcmp(argv[i], "--core") != 0; i++) {
        if (strcmp(argv[i], "--flags") == 0 && i + 1 < argc)
            flags = (unsigned)strtoul(argv[++i], NULL, 0);
        else if (strcmp(argv[i], "--tasks") == 0)
            tasks = 1;
        else
            break;
    }
    if (i >= argc) {
        fprintf(stderr, "usage: lib_check [--flags N] [--tasks] (PID | --core FILE [EXE [ROOT]])\n");
        return 1;
    }
    if (strcmp(argv[i], "--core") == 0)
        err = i + 1 < argc ? remora_open_core(argv[i + 1], i + 2 < argc ? argv[i + 2] : NULL,
                                              i + 3 < argc ? argv[i + 3] : NULL, flags, &r, why,
                                              sizeof why)
                           : REMORA_EUSAGE;
    else
        err = remora_open((pid_t)atol(argv[i]), flags, &r, why, sizeof why);
    if (err != REMORA_OK) {
        fprintf(stderr, "lib_check: %s\n", err == REMORA_EUSAGE && r == NULL && !*why ?
                "usage" : why);
        return exit_code(err);
    }
    /* twice on the same handle: the second reading reuses what the first read */
    for (round = 0; round < 2; round++) {
        const remora_thread_t *th;
        size_t n, t;
        if ((err = remora_read(r, &th, &n)) != REMORA_OK) {
            fprintf(stderr, "lib_check: %s\n", remora_last_error(r));
            remora_close(r);
            return exit_code(err);
        }
        if (round == 0)
            continue;
        printf("pid %d: Python %s, %zu threads\n", (int)remora_pid(r), remora_python_version(r), n);
        for (t = 0; t < n; t++) {
            printf("thread %d%s%s\n", (int)th[t].native_id,
                   th[t].status & REMORA_THREAD_MAIN ? " (main)" : "",
                   th[t].status & REMORA_THREAD_HAS_GIL ? " (holds the GIL)" : "");
            print_frames(th[t].frames, th[t].nframes);
        }
    }
    if (tasks) {
        const remora_task_t *tk;
        size_t n, t, k;
        if ((err = remora_tasks(r, &tk, &n)) != REMORA_OK) {
            fprintf(stderr, "lib_check: %s\n", remora_last_error(r));
            remora_close(r);
            return exit_code(err);
        }
        for (t = 0; t < n; t++) {
            printf("task %#llx \"%s\" awaited by", (unsigned long long)tk[t].id, tk[t].name);
            for (k = 0; k < tk[t].nawaited_by; k++)
                printf(" %#llx", (unsigned long long)tk[t].awaited_by[k]);
            printf("\n");
            print_frames(tk[t].frames, tk[t].nframes);
        }
    }
    remora_close(r);
    return 0;
}
