/* tests/kern/kern_tool.c — drives the in-kernel engine (src/kern/kern.h) by hand: finds
 * the target's interpreter and its kern_layout_t (unw_kern_layout), hands over the
 * thread states given, polls the ring buffer for a while and prints every sample (checking
 * each frame's fingerprint against one computed here from the target's memory), and the
 * thread-state table's view of the threads asked for. Needs root (CAP_BPF, CAP_PERFMON).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "remora.h"
#include "proc/proc.h"
#include "py/py.h"
#include "unwind/internal.h"
#include "kern/kern.h"

#define TOOL_MAX_TIDS 64

typedef struct tool {
    proc_t *p;
    kern_layout_t lay;
    int quiet;                      /* counts only, no sample lines */
    uint64_t samples, frames, fp_ok, fp_bad, fp_gone, nostate, fault, cut;
} tool_t;

/* The fingerprint of the code object at 'code', read now through /proc (0: unreadable). */
static uint64_t tool_fp(tool_t *t, uint64_t code)
{
    const kern_layout_t *K = &t->lay;
    uint64_t w[KERN_FP_WORDS + 2 * KERN_FP_STR_WORDS], str, len;
    unsigned n = (K->fp_len + 7) / 8, k;
    uint32_t at[2] = { K->co_name, K->co_filename };

    memset(w, 0, sizeof w);
    if (proc_read(t->p, code + K->fp_off, w, K->fp_len) != REMORA_OK)
        return 0;
    for (k = 0; K->str_hash != 0 && k < 2; k++) {
        if (proc_read(t->p, code + at[k], &str, 8) != REMORA_OK ||
            proc_read(t->p, str + K->str_hash - 8, &w[n], 16) != REMORA_OK)
            return 0;
        len = w[n] < KERN_FP_STR_DATA ? w[n] : KERN_FP_STR_DATA;
        if (len != 0 && proc_read(t->p, str + K->str_data, &w[n + 2], (size_t)len) != REMORA_OK)
            return 0;
        n += KERN_FP_STR_WORDS;
    }
    return kern_fp_mix(w, n);
}

static int tool_sample(void *ctx, const kern_sample_t *s)
{
    tool_t *t = ctx;
    uint32_t i;

    t->samples++;
    t->frames += s->nframes;
    t->nostate += (s->flags & KERN_S_NOSTATE) != 0;
    t->fault += (s->flags & KERN_S_FAULT) != 0;
    t->cut += (s->flags & KERN_S_CUT) != 0;
    if (!t->quiet)
        printf("sample t=%llu pid=%d tid=%d tstate=0x%llx flags=%u nframes=%u\n",
               (unsigned long long)s->t_ns, s->pid, s->tid, (unsigned long long)s->tstate,
               s->flags, s->nframes);
    for (i = 0; i < s->nframes; i++) {
        const kern_frame_t *f = &s->frames[i];
        const char *v = "-";

        if (!(f->flags & KERN_F_SHIM)) {
            uint64_t fp = tool_fp(t, f->code);

            v = fp == 0 ? "gone" : fp == f->fp ? "ok" : "BAD";
            t->fp_ok += fp == f->fp;
            t->fp_bad += fp != 0 && fp != f->fp;
            t->fp_gone += fp == 0;
        }
        if (!t->quiet)
            printf("  %3u frame=0x%llx code=0x%llx instr=0x%llx flags=%u fp=%016llx %s\n", i,
                   (unsigned long long)f->addr, (unsigned long long)f->code,
                   (unsigned long long)f->instr, f->flags, (unsigned long long)f->fp, v);
    }
    return 0;
}

static uint64_t tool_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void tool_states(const kern_t *k, const pid_t *tids, int n)
{
    uint64_t now = tool_now_ns();
    int i;

    for (i = 0; i < n; i++) {
        kern_tstate_t s;

        kern_thread_state(k, tids[i], &s);
        printf("tstate tid=%d known=%d on_cpu=%d runnable=%d run_ns=%llu (+%llu on cpu now) "
               "since=%.3fs ago switches=%llu\n", tids[i], s.known, s.on_cpu, s.runnable,
               (unsigned long long)s.run_ns,
               (unsigned long long)(s.on_cpu && s.since_ns ? now - s.since_ns : 0),
               s.since_ns ? (double)(now - s.since_ns) / 1e9 : 0.0,
               (unsigned long long)s.switches);
    }
}

static void usage(void)
{
    fprintf(stderr, "usage: kern_tool [-r HZ] [-s SECONDS] [-q] -p PID [TID=TSTATE ...] "
                    "[-w TID ...]\n  -q: counts only; -w: print these threads' table state each second\n");
    exit(1);
}

int main(int argc, char **argv)
{
    static py_target_t T;
    tool_t t;
    kern_t *k = NULL;
    kern_stats_t st;
    pid_t pid = 0, watch[TOOL_MAX_TIDS];
    double rate = 99, secs = 2;
    int i, nwatch = 0, err, rc = 1, in_watch = 0;
    char why[256];
    uint64_t end;

    memset(&t, 0, sizeof t);
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-r") == 0 && i + 1 < argc)
            rate = atof(argv[++i]);
        else if (strcmp(argv[i], "-s") == 0 && i + 1 < argc)
            secs = atof(argv[++i]);
        else if (strcmp(argv[i], "-p") == 0 && i + 1 < argc)
            pid = atoi(argv[++i]);
        else if (strcmp(argv[i], "-q") == 0)
            t.quiet = 1;
        else if (strcmp(argv[i], "-w") == 0)
            in_watch = 1;
        else if (in_watch && nwatch < TOOL_MAX_TIDS)
            watch[nwatch++] = atoi(argv[i]);
    }
    if (pid <= 0)
        usage();
    err = proc_open(pid, &t.p);
    if (err != REMORA_OK) {
        fprintf(stderr, "kern_tool: proc_open %d: error %d\n", pid, err);
        return 1;
    }
    err = py_target_find(t.p, &T, why, sizeof why);
    if (err != REMORA_OK) {
        fprintf(stderr, "kern_tool: %s\n", why);
        goto error;
    }
    if (unw_kern_layout(&T, &t.lay, why, sizeof why) != REMORA_OK) {
        fprintf(stderr, "kern_tool: %s\n", why);
        goto error;
    }
    printf("python %s kind=%u ts_frame=%u cf=%u fr_size=%u prev=%u code=%u instr=%u owner=%u/%u "
           "entry=%u funcobj=%u none=0x%llx fp=%u+%u str_hash=%u\n", T.version, t.lay.frames_kind,
           t.lay.ts_frame, t.lay.cframe_current_frame, t.lay.fr_size, t.lay.fr_previous,
           t.lay.fr_code, t.lay.fr_instr, t.lay.fr_owner, t.lay.owner_shim, t.lay.fr_is_entry,
           t.lay.fr_funcobj, (unsigned long long)t.lay.none_addr, t.lay.fp_off, t.lay.fp_len,
           t.lay.str_hash);
    err = kern_open(rate, &k, why, sizeof why);
    if (err != REMORA_OK) {
        fprintf(stderr, "kern_tool: kern_open: %s (error %d)\n", why, err);
        goto error;
    }
    if (kern_add_process(k, pid, &t.lay) != REMORA_OK) {
        fprintf(stderr, "kern_tool: kern_add_process failed\n");
        goto error;
    }
    for (i = 1; i < argc; i++) {
        char *eq = strchr(argv[i], '=');

        if (eq != NULL && kern_set_thread(k, pid, atoi(argv[i]), strtoull(eq + 1, NULL, 0)) != REMORA_OK) {
            fprintf(stderr, "kern_tool: kern_set_thread %s failed\n", argv[i]);
            goto error;
        }
    }
    end = tool_now_ns() + (uint64_t)(secs * 1e9);
    for (i = 0; tool_now_ns() < end; i++) {
        usleep(10000);
        kern_poll(k, tool_sample, &t);
        if (nwatch > 0 && i % 100 == 99)
            tool_states(k, watch, nwatch);
    }
    kern_poll(k, tool_sample, &t);
    kern_get_stats(k, &st);
    printf("engine: ticks=%llu samples=%llu dropped=%llu faults=%llu nostate=%llu run_ns=%llu "
           "run_cnt=%llu\n", (unsigned long long)st.ticks, (unsigned long long)st.samples,
           (unsigned long long)st.dropped, (unsigned long long)st.faults,
           (unsigned long long)st.nostate, (unsigned long long)st.run_ns,
           (unsigned long long)st.run_cnt);
    printf("seen: samples=%llu frames=%llu fp ok=%llu bad=%llu gone=%llu nostate=%llu fault=%llu "
           "cut=%llu\n", (unsigned long long)t.samples, (unsigned long long)t.frames,
           (unsigned long long)t.fp_ok, (unsigned long long)t.fp_bad,
           (unsigned long long)t.fp_gone, (unsigned long long)t.nostate,
           (unsigned long long)t.fault, (unsigned long long)t.cut);
    rc = 0;
error:
    kern_close(k);
    proc_free(t.p);
    return rc;
}
