/* cli/summary.c — record's lines on stderr: the status line while it samples (on a
 * terminal); at its end what was sampled, how fast, how many errors, which engine, its
 * periods and pauses, and with --stats the reads, memory and each reader's and engine's
 * counts. */
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "remora.h"
#include "cli.h"
#include "record.h"
#include "../formats/out.h"
#include "../kern/kern.h"
#include "../proc/proc.h"
#include "../sample/sampler.h"
#include "../unwind/unwind.h"

void rec_status_line(const sampler_t *s, void *ctx)
{
    const sampler_stats_t *st = sampler_stats(s);
    double secs = (double)(sampler_now_ns() - st->start_ns - (int64_t)st->paused_ns) / 1e9;
    uint64_t written = st->samples + st->task_waiting;

    (void)ctx;
    fprintf(stderr, "\rremora: %llu %s, %.0f Hz, %llu thread %s written, %llu %s, %.1f s   ",
            (unsigned long long)st->rounds, out_plural(st->rounds, "round", "rounds"),
            secs > 0 ? (double)st->rounds / secs : 0.0, (unsigned long long)written,
            out_plural(written, "sample", "samples"), (unsigned long long)st->errors,
            out_plural(st->errors, "error", "errors"), secs);
    fflush(stderr);
}

double rec_cpu_seconds(void)
{
    struct rusage ru;

    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

void rec_print_summary(const rec_run_t *r, const profile_meta_t *whole)
{
    const record_args_t *a = r->a;
    const sampler_stats_t *st = sampler_stats(r->s);
    char counts[512];

    if (a->c.subprocesses)
        fprintf(stderr, "remora: %llu %s sampled\n", (unsigned long long)st->subprocesses,
                out_plural(st->subprocesses, "subprocess", "subprocesses"));
    /* the words of docs/cli.md's "Counts", as every header writes them */
    out_counts_text(counts, sizeof counts, whole, 0);
    fprintf(stderr, "remora: %s, %llu late, engine %s%s\n", counts, (unsigned long long)st->late,
            cli_engine_name(r->kern), r->gone ? "; the target exited" : "");
    if (whole->sample_bytes > 0)
        rec_print_memory(r, whole);
    if (st->pauses > 0 || a->every > 0)
        fprintf(stderr, "remora: %llu %s, %llu %s, paused %llu %s for %.2f s\n",
                (unsigned long long)r->n, out_plural(r->n, "period", "periods"),
                (unsigned long long)r->outs.snapshots,
                out_plural(r->outs.snapshots, "snapshot", "snapshots"),
                (unsigned long long)st->pauses, out_plural(st->pauses, "time", "times"),
                (double)st->paused_ns / 1e9);
}

/* --mode memory: the bytes attributed (every sample's, a fault whose walk failed among
 * them once read from user space), the target's resident size at both ends, and the
 * growth no sample stands for, named: pages made resident by the kernel on the target's
 * behalf (MAP_POPULATE, read-ahead), huge pages, faults of threads not sampled, and the
 * period's rounding. A fall in resident size (memory given back) is said as such. */
void rec_print_memory(const rec_run_t *r, const profile_meta_t *whole)
{
    const sampler_stats_t *st = sampler_stats(r->s);
    double mib = 1024.0 * 1024.0, got = (double)(st->samples * whole->sample_bytes);

    fprintf(stderr, "remora: %.2f MiB of resident growth attributed (%llu samples of %llu KiB)",
            got / mib, (unsigned long long)st->samples,
            (unsigned long long)(whole->sample_bytes / 1024));
    if (r->rss0 == UINT64_MAX || r->rss1 == UINT64_MAX) {
        fprintf(stderr, "; the target's resident size %s unknown\n",
                r->rss0 == UINT64_MAX ? "at the start" : "at the end (it exited)");
        return;
    }
    fprintf(stderr, "; the target's resident size %.2f MiB at the start, %.2f MiB at the end",
            (double)r->rss0 / mib, (double)r->rss1 / mib);
    if (r->rss1 > r->rss0 && (double)(r->rss1 - r->rss0) > got)
        fprintf(stderr, ": %.2f MiB of its growth unattributed (not faulted in by a sampled "
                "thread)\n", ((double)(r->rss1 - r->rss0) - got) / mib);
    else
        fprintf(stderr, ": all of its growth attributed (%.2f MiB faulted in beyond it: "
                "memory given back, or faults on pages already resident)\n",
                (got - ((double)r->rss1 - (double)r->rss0)) / mib);
}

/* record --stats: the lines after the summary. */
void rec_print_stats(const rec_run_t *r, const profile_meta_t *whole)
{
    const record_args_t *a = r->a;
    const sampler_stats_t *st = sampler_stats(r->s);
    const proc_stats_t *ps = proc_stats(r->ct.p);
    unwinder_t *u = r->u;
    kern_t *kern = r->kern;
    double cpu_s = r->cpu_s;
    double n = st->rounds ? (double)st->rounds : 1.0;
    struct rusage ru;
    unw_stats_t us;

    getrusage(RUSAGE_SELF, &ru);
    /* the summary's counts by the same words (docs/cli.md, "Counts") */
    fprintf(stderr, "stats: rounds=%llu rounds_asked=%llu thread_samples=%llu idle=%llu errors=%llu "
            "partial=%llu reads=%llu bytes=%llu reads_per_round=%.2f cpu_us_per_round=%.2f\n",
            (unsigned long long)whole->samples, (unsigned long long)out_rounds_asked(whole),
            (unsigned long long)whole->written, (unsigned long long)whole->idle,
            (unsigned long long)whole->errors, (unsigned long long)whole->partial,
            (unsigned long long)ps->reads, (unsigned long long)ps->bytes, (double)ps->reads / n,
            cpu_s * 1e6 / n);
    fprintf(stderr, "memory: maxrss_kb=%ld table_bytes=%zu\n", ru.ru_maxrss, stk_memory(r->table));
    if (a->anchor)
        fprintf(stderr, "anchor: writes=%llu writes_per_sample=%.4f\n",
                (unsigned long long)ps->writes, (double)ps->writes / n);
    memset(&us, 0, sizeof us);
    if (u != NULL)
        unw_get_stats(u, &us);
    fprintf(stderr, "parked: reused=%llu thread_samples=%llu\n", (unsigned long long)us.parked,
            (unsigned long long)us.thread_samples);
    fprintf(stderr, "outer: chunk_callers=%llu\n", (unsigned long long)us.chunk_outer);
    if (kern == NULL)
        fprintf(stderr, "idle: sched_reads=%llu state_reads=%llu kept=%llu\n",
                (unsigned long long)us.idle_sched, (unsigned long long)us.idle_states,
                (unsigned long long)us.idle_kept);
    fprintf(stderr, "names: readings=%llu reads=%llu scans=%llu torn=%llu unscanned=%llu us=%llu\n",
            (unsigned long long)us.thread_name_readings, (unsigned long long)us.thread_name_reads,
            (unsigned long long)us.thread_name_scans, (unsigned long long)us.thread_name_torn,
            (unsigned long long)us.thread_name_unscanned, (unsigned long long)(us.thread_name_ns / 1000));
    if (r->blocking)
        fprintf(stderr, "held: us_per_sample=%.2f share_of_run=%.4f\n",
                (double)st->held_ns / 1e3 / n,
                st->end_ns > st->start_ns ? (double)st->held_ns / (double)(st->end_ns - st->start_ns) : 0.0);
    if (a->c.async)
        fprintf(stderr, "async: task_samples=%llu waiting=%llu unknown=%llu list_reads=%llu "
                "list_errors=%llu us_per_list_read=%.1f\n", (unsigned long long)st->tasks,
                (unsigned long long)st->task_waiting, (unsigned long long)st->task_unknown,
                (unsigned long long)st->task_reads, (unsigned long long)st->task_read_errors,
                st->task_reads ? (double)st->task_read_ns / 1e3 / (double)st->task_reads : 0.0);
    if (kern != NULL) {
        kern_stats_t ks;
        unw_kern_stats_t uk;
        kern_get_stats(kern, &ks);
        memset(&uk, 0, sizeof uk);
        if (u != NULL)
            unw_kern_get_stats(u, &uk);
        fprintf(stderr, "kernel: samples=%llu fallback=%llu unnamed=%llu ticks=%llu dropped=%llu "
                "faults=%llu nostate=%llu proc_reads=%llu taken=%llu missed=%llu gone=%llu "
                "light=%llu bpf_runs=%llu bpf_ns=%llu tick_runs=%llu tick_ns=%llu ticks_late=%llu "
                "unsettled=%llu behind=%llu paused=%llu switch_walks=%llu switch_used=%llu named=%llu\n",
                (unsigned long long)st->kernel, (unsigned long long)st->kernel_fallback,
                (unsigned long long)uk.partial, (unsigned long long)ks.ticks,
                (unsigned long long)ks.dropped, (unsigned long long)ks.faults,
                (unsigned long long)ks.nostate, (unsigned long long)uk.proc_reads,
                (unsigned long long)uk.samples, (unsigned long long)uk.missed,
                (unsigned long long)uk.gone, (unsigned long long)st->light,
                (unsigned long long)ks.run_cnt, (unsigned long long)ks.run_ns,
                (unsigned long long)ks.tick_cnt, (unsigned long long)ks.tick_ns,
                (unsigned long long)st->kernel_late, (unsigned long long)st->kernel_unsettled,
                (unsigned long long)uk.behind, (unsigned long long)st->kernel_paused,
                (unsigned long long)ks.switch_walks, (unsigned long long)uk.switch_used,
                (unsigned long long)uk.named);
    }
    if (a->c.native && u != NULL) {
        unw_native_stats_t ns;
        unw_native_get_stats(u, &ns);
        fprintf(stderr, "native: threads=%llu frames=%llu unreadable=%llu cut=%llu "
                "unplaced=%llu\n", (unsigned long long)ns.threads,
                (unsigned long long)ns.frames, (unsigned long long)ns.unreadable,
                (unsigned long long)ns.cut, (unsigned long long)ns.unplaced);
    }
    {
        /* the heatmap's sources: the files that could not be read as the target, and why
         * the first could not (its name is the target's: escaped) */
        const proc_src_stats_t *ss = proc_src_stats(r->ct.p);
        if (ss->read + ss->unread > 0) {
            fprintf(stderr, "sources: read=%llu unread=%llu", (unsigned long long)ss->read,
                    (unsigned long long)ss->unread);
            if (ss->unread > 0) {
                fputs(" first_unread=", stderr);
                out_text_str(stderr, ss->first_unread, 1);
            }
            fputc('\n', stderr);
        }
    }
}
