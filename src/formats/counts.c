/* formats/counts.c — the counts' words, defined once (docs/cli.md, "Counts"): rounds
 * asked and taken, thread samples written, left out as idle, errors and partial as shares
 * of the thread samples written. The summary, --stats, top and every format's header
 * that shows counts write them through here, so one word means one thing everywhere.
 * Reads the profile's metadata only. */
#include <stdio.h>

#include "out.h"

const char *out_plural(uint64_t n, const char *one, const char *many)
{
    return n == 1 ? one : many;
}

double out_time_sampled(const profile_meta_t *m)
{
    double secs = m->duration_s - m->paused_s;

    return secs > 0 ? secs : 0.0;
}

uint64_t out_rounds_asked(const profile_meta_t *m)
{
    double n = m->rate_hz * out_time_sampled(m);

    /* a hostile recording's rate and duration: no conversion past uint64_t */
    return n > 0 && n < 1.8e19 ? (uint64_t)(n + 0.5) : 0;
}

double out_share(uint64_t part, uint64_t whole)
{
    return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

int out_counts_text(char *buf, size_t n, const profile_meta_t *m, uint64_t written)
{
    double secs = out_time_sampled(m);
    int len;

    if (!m->counted) {
        /* collapsed stacks, an older recording: only what the table holds is known */
        return snprintf(buf, n, "%llu thread %s written", (unsigned long long)written,
                        out_plural(written, "sample", "samples"));
    }
    written = m->written;
    len = snprintf(buf, n, "%llu %s taken of %llu asked in %.2f s (%.0f Hz of %.0f Hz asked), "
                   "%llu thread %s written, %llu left out as idle (%s), "
                   "%llu %s (%.2f%%), %llu partial (%.2f%%)",
                   (unsigned long long)m->samples, out_plural(m->samples, "round", "rounds"),
                   (unsigned long long)out_rounds_asked(m), secs,
                   secs > 0 ? (double)m->samples / secs : 0.0, m->rate_hz,
                   (unsigned long long)written, out_plural(written, "sample", "samples"),
                   (unsigned long long)m->idle, m->idle_kept ? "--idle" : "--idle keeps them",
                   (unsigned long long)m->errors, out_plural(m->errors, "error", "errors"),
                   out_share(m->errors, written), (unsigned long long)m->partial,
                   out_share(m->partial, written));
    return len;
}
