/* examples/sample_loop.c — libremora's sampling loop: a running process sampled at a
 * rate for a while, every thread sample printed as it comes (its time, thread and
 * frames, innermost first), then the engine that read it and the counts.
 *
 *   cc -o sample_loop sample_loop.c $(pkg-config --cflags --libs libremora)
 *   sudo ./sample_loop PID [RATE_HZ [SECONDS [auto|kernel|user [wall|cpu|gil|exception]]]]
 *
 * Exit status: 0, 1 usage, 2 no such process (or it exited while sampled), 3 permission
 * denied, 4 not Python (or a version remora cannot read), 5 anything else (docs/api.md).
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

/* One thread sample: "sample T_NS thread TID [kernel]", then its frames. Returns 0: go
 * on (nonzero would stop the sampling). */
static int on_sample(void *ctx, const remora_sample_t *s)
{
    size_t k;

    (void)ctx;
    printf("sample %lld thread %d%s%s%s\n", (long long)s->time_ns, (int)s->native_id,
           s->status & REMORA_THREAD_MAIN ? " (main)" : "", s->kernel ? " (kernel)" : "",
           s->partial ? " (partial)" : "");
    for (k = 0; k < s->nframes; k++)
        printf("    File \"%s\", line %d, in %s\n", s->frames[k].file, s->frames[k].line,
               s->frames[k].function);
    return 0;
}

static int pick(const char *v, const char *const *names, int n)
{
    int i;

    for (i = 0; i < n; i++)
        if (strcmp(v, names[i]) == 0)
            return i;
    return -1;
}

int main(int argc, char **argv)
{
    static const char *const engines[] = { "auto", "kernel", "user" };   /* enum remora_engine */
    static const char *const modes[] = { "wall", "cpu", "gil", "exception" };
    remora_sample_opts_t o;
    remora_sample_stats_t st;
    remora_t *r = NULL;
    const char *engine, *why_not;
    char why[512], *end;
    long pid;
    int err;

    remora_sample_opts_init(&o);
    o.duration_s = 1;
    if (argc < 2 || argc > 6 || (pid = strtol(argv[1], &end, 10)) <= 0 || *end != '\0' ||
        (argc > 2 && ((o.rate_hz = strtod(argv[2], &end)) <= 0 || *end != '\0')) ||
        (argc > 3 && ((o.duration_s = strtod(argv[3], &end)) <= 0 || *end != '\0')) ||
        (argc > 4 && (o.engine = pick(argv[4], engines, 3)) < 0) ||
        (argc > 5 && (o.mode = pick(argv[5], modes, 4)) < 0)) {
        fprintf(stderr, "usage: sample_loop PID [RATE_HZ [SECONDS [auto|kernel|user "
                "[wall|cpu|gil|exception]]]]\n");
        return 1;
    }
    err = remora_open((pid_t)pid, 0, &r, why, sizeof why);
    if (err != REMORA_OK) {
        fprintf(stderr, "sample_loop: %s\n", why);
        return exit_code(err);
    }
    err = remora_sample(r, &o, on_sample, NULL);
    if (err != REMORA_OK) {
        fprintf(stderr, "sample_loop: %s\n", remora_last_error(r));
        remora_close(r);
        return exit_code(err);
    }
    engine = remora_engine(r, &why_not);
    remora_get_sample_stats(r, &st);
    printf("engine %s%s%s\n", engine, *why_not ? ": " : "", why_not);
    printf("rounds %llu samples %llu late %llu kernel %llu\n", (unsigned long long)st.rounds,
           (unsigned long long)st.samples, (unsigned long long)st.late,
           (unsigned long long)st.kernel);
    remora_close(r);
    return 0;
}
