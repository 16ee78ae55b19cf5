/* formats/speedscope.c — speedscope's file format: shared frames, one "sampled" profile
 * per thread whose samples are the distinct stacks (outermost frame first) and whose
 * weights are the time they stand for, in seconds: their counts x the sampling interval
 * (out_sample_seconds), so that speedscope's durations read as time. */
#include <stdlib.h>
#include <string.h>

#include "remora.h"
#include "out.h"

struct sctx {
    FILE *f;
    const stk_thread_t *thread;     /* the thread being written */
    int first;
    int pass;                       /* 0: samples, 1: weights */
    double dt;                      /* seconds a sample stands for */
};

static void put_stack(void *ctx, const stk_thread_t *th, const uint32_t *frames, size_t n, uint64_t count)
{
    struct sctx *c = ctx;
    size_t i;

    if (th != c->thread)
        return;
    if (!c->first)
        fputc(',', c->f);
    c->first = 0;
    if (c->pass == 1) {
        fprintf(c->f, "%.12g", (double)count * c->dt);
        return;
    }
    fputc('[', c->f);
    for (i = 0; i < n; i++)
        fprintf(c->f, i ? ",%u" : "%u", frames[i]);
    fputc(']', c->f);
}

int out_speedscope_write(const profile_t *p, FILE *f, const out_options_t *o)
{
    const stk_table_t *t = p->stacks;
    size_t i, nthreads = stk_nthreads(t);
    struct sctx c;
    int err;
    char name[768], words[512];

    (void)o;
    c.dt = p->meta.sample_bytes > 0 ? (double)p->meta.sample_bytes : out_sample_seconds(&p->meta);
    fputs("{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\",\"exporter\":\"remora "
          REMORA_VERSION "\",\"name\":", f);
    /* the counts' words (docs/cli.md, "Counts") in the name speedscope shows */
    out_counts_text(words, sizeof words, &p->meta, stk_total_samples(t));
    snprintf(name, sizeof name, "remora pid %d (Python %.32s): %s", (int)p->meta.pid, p->meta.python,
             words);
    out_json_str(f, name);
    fputs(",\"activeProfileIndex\":0,\"shared\":{\"frames\":[", f);
    for (i = 0; i < stk_nframes(t); i++) {
        const stk_frame_t *fr = stk_frame_at(t, (uint32_t)i);
        fputs(i ? ",{\"name\":" : "{\"name\":", f);
        out_json_str(f, fr->function);
        if (fr->file[0]) {
            fputs(",\"file\":", f);
            out_json_str(f, fr->file);
            fprintf(f, ",\"line\":%d", fr->line > 0 ? fr->line : 0);
        }
        fputc('}', f);
    }
    fputs("]},\"profiles\":[", f);
    for (i = 0; i < nthreads; i++) {
        const stk_thread_t *th = stk_thread_at(t, i);
        size_t cap = strlen(th->name) + 32;
        char *label = malloc(cap);
        if (label == NULL)
            return REMORA_ENOMEM;
        /* the whole name, however long (a collapsed file converted may have any) */
        snprintf(label, cap, "thread %s (%d)", th->name[0] ? th->name : "?", (int)th->tid);
        fputs(i ? ",{\"type\":\"sampled\",\"name\":" : "{\"type\":\"sampled\",\"name\":", f);
        out_json_str(f, label);
        free(label);
        fprintf(f, ",\"unit\":\"%s\",\"startValue\":0,\"endValue\":%.12g,\"samples\":[",
                p->meta.sample_bytes > 0 ? "bytes" : "seconds",
                (double)th->samples * c.dt);
        c.f = f;
        c.thread = th;
        for (c.pass = 0; c.pass < 2; c.pass++) {
            c.first = 1;
            if (c.pass == 1)
                fputs("],\"weights\":[", f);
            err = stk_foreach_stack(t, put_stack, &c);
            if (err)
                return err;
        }
        fputs("]}", f);
    }
    if (nthreads == 0)
        fputs("{\"type\":\"sampled\",\"name\":\"no samples\",\"unit\":\"seconds\",\"startValue\":0,"
              "\"endValue\":0,\"samples\":[],\"weights\":[]}", f);
    fputs("]}\n", f);
    return ferror(f) ? REMORA_EIO : REMORA_OK;
}
