/* formats/firefox.c — the Firefox Profiler's processed profile format (JSON; what
 * profiler.firefox.com opens, the format CPython's Tachyon writes too): a timeline, so it
 * needs the profile's events (every sample with its time, read back from a recording).
 *
 * One thread entry per thread of the table, each with its own tables as the format wants
 * them: stackTable (the thread's trie nodes, in creation order so a prefix comes before
 * its stack), frameTable (the frames those nodes use), funcTable (one per (function,
 * file)), samples (the thread's events: stack, time in ms since sampling began; in a
 * memory profile each weighs its bytes, weightType "bytes", which the profiler shows as
 * sizes). Strings
 * are shared (shared.stringArray). Categories: Other, Python, GC (the <GC> frame), GIL.
 * Markers: per thread, an interval "Holds GIL" for each run of samples that found the
 * thread holding the GIL, and "GC" for each run taken while it collected, from the first
 * such sample to the next sample without (or the last one plus an interval). No
 * resources or native symbols.
 */
#include <stdlib.h>
#include <string.h>

#include "remora.h"
#include "out.h"

enum { CAT_OTHER, CAT_PYTHON, CAT_GC, CAT_GIL, CAT_NATIVE };

/* Columns of a table, written as "name":[v,v,...]. */
static void col_begin(FILE *f, const char *name, int first)
{
    fprintf(f, "%s\"%s\":[", first ? "" : ",", name);
}

static void sep(FILE *f, size_t i)
{
    if (i)
        fputc(',', f);
}

static void nulls(FILE *f, const char *name, size_t n)
{
    size_t i;

    col_begin(f, name, 0);
    for (i = 0; i < n; i++)
        fputs(i ? ",null" : "null", f);
    fputc(']', f);
}

static void repeat(FILE *f, const char *name, const char *v, size_t n)
{
    size_t i;

    col_begin(f, name, 0);
    for (i = 0; i < n; i++) {
        sep(f, i);
        fputs(v, f);
    }
    fputc(']', f);
}

typedef struct ffx {
    const profile_t *p;
    const stk_table_t *t;
    out_strs_t strs;
    stk_fn_row_t *rows;
    uint32_t *row_of_frame;
    uint32_t *owner;            /* node → its thread */
    uint32_t *by_thread;        /* node indexes, grouped by thread (counting sort) */
    size_t *node_start;         /* by thread: where its nodes begin in by_thread */
    uint32_t *ev_by_thread;     /* event indexes, grouped by thread */
    size_t *ev_start;
    uint32_t *local;            /* node → its index in its thread's stackTable */
    uint32_t *frame_local, *frame_stamp, *frames;   /* frame → local index; local → frame */
    uint32_t *fn_local, *fn_stamp, *fns;            /* row → local index; local → row */
} ffx_t;

static int frame_category(const stk_frame_t *fr)
{
    if (fr->native)
        return CAT_NATIVE;          /* a C frame (--native) */
    return strcmp(fr->function, "<GC>") == 0 && fr->file[0] == '\0' ? CAT_GC : CAT_PYTHON;
}

/* Groups n items by key (counting sort): out[start[k] .. start[k + 1]) are the items of
 * key k, in increasing order. key[i] == STK_NONE is left out. */
static void group(const uint32_t *key, size_t n, size_t nkeys, uint32_t *out, size_t *start)
{
    size_t i, k, sum = 0;

    memset(start, 0, (nkeys + 1) * sizeof *start);
    for (i = 0; i < n; i++)
        if (key[i] != STK_NONE)
            start[key[i] + 1]++;
    for (k = 0; k <= nkeys; k++) {
        sum += start[k];
        start[k] = sum;
    }
    for (i = 0; i < n; i++)
        if (key[i] != STK_NONE)
            out[start[key[i]]++] = (uint32_t)i;
    /* start[k] now holds the end of key k: shift back */
    for (k = nkeys; k > 0; k--)
        start[k] = start[k - 1];
    start[0] = 0;
}

/* The time in ms of the first sample after event 'from' of another thread than 'own' that
 * carries 'flag', if before 'until'; else 'until'. */
static double others_from(const ffx_t *x, size_t from, uint32_t own, unsigned flag, double until)
{
    size_t k;

    for (k = from + 1; k < x->p->nevents; k++) {
        const prof_event_t *e = &x->p->events[k];
        double t = (double)e->t_ns / 1e6;
        if (t >= until)
            break;
        if (e->thread != own && (e->flags & flag))
            return t;
    }
    return until;
}

/* The intervals of a thread's samples that carry 'flag': [start, end) in ms, written as
 * one column ('which': 0 start, 1 end) or counted (f NULL). A run of them ends at the next
 * sample without it; one whose last is a tick (the kernel engine's: an instant, between
 * rounds) ends there, as nothing says the state lasted past it; the GIL, which one thread
 * holds at a time, no later than another thread's sample holding it (its ticks come
 * between the rounds). */
static size_t intervals(const ffx_t *x, const uint32_t *evs, size_t ne, unsigned flag, FILE *f,
                        int which, size_t written)
{
    double step = x->p->meta.rate_hz > 0 ? 1000.0 / x->p->meta.rate_hz : 1.0, start = 0, last = 0;
    size_t i, n = written, last_ev = 0;
    int in = 0, last_tick = 0;

    for (i = 0; i <= ne; i++) {
        int has = i < ne && (x->p->events[evs[i]].flags & flag);
        double t = i < ne ? (double)x->p->events[evs[i]].t_ns / 1e6
                          : (double)x->p->events[evs[ne - 1]].t_ns / 1e6 + step;
        double end = t;
        /* a run that ends here, or (the GIL) that another thread's sample broke */
        if (in && flag == SAMPLE_F_GIL)
            end = others_from(x, last_ev, x->p->events[last_ev].thread, flag, t);
        if (in && (!has || end < t)) {
            if (!has && last_tick)
                end = last;
            in = 0;
            if (f != NULL) {
                sep(f, n);
                fprintf(f, "%.6f", which ? end : start);
            }
            n++;
        }
        if (has && !in) {
            in = 1;
            start = t;
        }
        if (has) {
            last = t;
            last_ev = evs[i];
            last_tick = (x->p->events[evs[i]].flags & SAMPLE_F_TICK) != 0;
        }
    }
    return n;
}

static const struct { unsigned flag; const char *name; int category; } marker_kinds[] = {
    { SAMPLE_F_GIL, "Holds GIL", CAT_GIL },
    { SAMPLE_F_GC, "GC", CAT_GC },
};
#define NKINDS (sizeof marker_kinds / sizeof marker_kinds[0])

static void write_markers(ffx_t *x, FILE *f, const uint32_t *evs, size_t ne)
{
    size_t counts[NKINDS], n = 0, k, i, w;
    int which;

    for (k = 0; k < NKINDS; k++)
        n += counts[k] = ne ? intervals(x, evs, ne, marker_kinds[k].flag, NULL, 0, 0) : 0;
    fprintf(f, ",\"markers\":{\"length\":%zu", n);
    nulls(f, "data", n);
    col_begin(f, "name", 0);
    for (k = 0, w = 0; k < NKINDS; k++) {
        uint32_t si = out_strs_index(&x->strs, marker_kinds[k].name);
        for (i = 0; i < counts[k]; i++, w++) {
            sep(f, w);
            fprintf(f, "%u", si);
        }
    }
    fputc(']', f);
    for (which = 0; which < 2; which++) {
        col_begin(f, which ? "endTime" : "startTime", 0);
        for (k = 0, w = 0; k < NKINDS; k++)
            w = counts[k] ? intervals(x, evs, ne, marker_kinds[k].flag, f, which, w) : w;
        fputc(']', f);
    }
    repeat(f, "phase", "1", n);             /* 1: an interval */
    col_begin(f, "category", 0);
    for (k = 0, w = 0; k < NKINDS; k++)
        for (i = 0; i < counts[k]; i++, w++) {
            sep(f, w);
            fprintf(f, "%d", marker_kinds[k].category);
        }
    fputs("]}", f);
}

/* Numbers thread ti's stacks (nodes but the root), frames and functions in the order its
 * nodes use them: x->local, x->frames/frame_local (*nf), x->fns/fn_local (*nfn). */
static void number_thread(ffx_t *x, size_t ti, size_t *nf_out, size_t *nfn_out)
{
    const stk_table_t *t = x->t;
    const uint32_t *nodes = x->by_thread + x->node_start[ti];
    size_t nn = x->node_start[ti + 1] - x->node_start[ti], nf = 0, nfn = 0, i, k;
    uint32_t stamp = (uint32_t)ti + 1;

    for (i = 0, k = 0; i < nn; i++) {
        const stk_node_t *nd = stk_node_at(t, nodes[i]);
        uint32_t fr = nd->frame, row;
        if (fr == STK_NONE)
            continue;                   /* the root */
        x->local[nodes[i]] = (uint32_t)k++;
        if (x->frame_stamp[fr] != stamp) {
            x->frame_stamp[fr] = stamp;
            x->frame_local[fr] = (uint32_t)nf;
            x->frames[nf++] = fr;
            row = x->row_of_frame[fr];
            if (x->fn_stamp[row] != stamp) {
                x->fn_stamp[row] = stamp;
                x->fn_local[row] = (uint32_t)nfn;
                x->fns[nfn++] = row;
            }
        }
    }
    *nf_out = nf;
    *nfn_out = nfn;
}

/* samples: the thread's events, each its stack and time. */
static void write_samples(ffx_t *x, FILE *f, const stk_thread_t *th, const uint32_t *evs, size_t ne)
{
    size_t i;

    fputs(",\"samples\":{", f);
    col_begin(f, "stack", 1);
    for (i = 0; i < ne; i++) {
        uint32_t node = x->p->events[evs[i]].node;
        sep(f, i);
        if (node == th->root)
            fputs("null", f);
        else
            fprintf(f, "%u", x->local[node]);
    }
    fputc(']', f);
    col_begin(f, "time", 0);
    for (i = 0; i < ne; i++) {
        sep(f, i);
        fprintf(f, "%.6f", (double)x->p->events[evs[i]].t_ns / 1e6);
    }
    fputc(']', f);
    nulls(f, "eventDelay", ne);
    if (x->p->meta.sample_bytes > 0) {
        /* --mode memory: each sample weighs the bytes it stands for, and the profiler's
         * call tree and flame graph then say bytes ("Total Size (bytes)") */
        col_begin(f, "weight", 0);
        for (i = 0; i < ne; i++) {
            sep(f, i);
            fprintf(f, "%llu", (unsigned long long)x->p->meta.sample_bytes);
        }
        fprintf(f, "],\"weightType\":\"bytes\",\"length\":%zu}", ne);
        return;
    }
    fprintf(f, ",\"weight\":null,\"weightType\":\"samples\",\"length\":%zu}", ne);
}

/* stackTable: the thread's nodes but the root, parents first. */
static void write_stack_table(ffx_t *x, FILE *f, const stk_thread_t *th, const uint32_t *nodes, size_t nn)
{
    const stk_table_t *t = x->t;
    size_t i, k;

    fputs(",\"stackTable\":{", f);
    col_begin(f, "frame", 1);
    for (i = 0, k = 0; i < nn; i++) {
        const stk_node_t *nd = stk_node_at(t, nodes[i]);
        if (nd->frame == STK_NONE)
            continue;
        sep(f, k++);
        fprintf(f, "%u", x->frame_local[nd->frame]);
    }
    fputc(']', f);
    col_begin(f, "category", 0);
    for (i = 0, k = 0; i < nn; i++) {
        const stk_node_t *nd = stk_node_at(t, nodes[i]);
        if (nd->frame == STK_NONE)
            continue;
        sep(f, k++);
        fprintf(f, "%d", frame_category(stk_frame_at(t, nd->frame)));
    }
    fputc(']', f);
    repeat(f, "subcategory", "0", nn ? nn - 1 : 0);
    col_begin(f, "prefix", 0);
    for (i = 0, k = 0; i < nn; i++) {
        const stk_node_t *nd = stk_node_at(t, nodes[i]);
        if (nd->frame == STK_NONE)
            continue;
        sep(f, k++);
        if (nd->parent == th->root)
            fputs("null", f);
        else
            fprintf(f, "%u", x->local[nd->parent]);
    }
    fprintf(f, "],\"length\":%zu}", nn ? nn - 1 : 0);
}

/* frameTable: the frames the thread's nodes use. */
static void write_frame_table(ffx_t *x, FILE *f, size_t nf)
{
    const stk_table_t *t = x->t;
    size_t i;

    fputs(",\"frameTable\":{", f);
    /* --opcodes: an instruction's byte offset as the frame's address and its name as the
     * frame's implementation (the profiler's sidebar breaks a function's time down by it) */
    col_begin(f, "address", 1);
    for (i = 0; i < nf; i++) {
        const stk_frame_t *fr = stk_frame_at(t, x->frames[i]);
        sep(f, i);
        fprintf(f, "%d", fr->op != NULL ? fr->offset : -1);
    }
    fputc(']', f);
    col_begin(f, "category", 0);
    for (i = 0; i < nf; i++) {
        sep(f, i);
        fprintf(f, "%d", frame_category(stk_frame_at(t, x->frames[i])));
    }
    fputc(']', f);
    repeat(f, "subcategory", "0", nf);
    col_begin(f, "func", 0);
    for (i = 0; i < nf; i++) {
        sep(f, i);
        fprintf(f, "%u", x->fn_local[x->row_of_frame[x->frames[i]]]);
    }
    fputc(']', f);
    nulls(f, "innerWindowID", nf);
    col_begin(f, "implementation", 0);
    for (i = 0; i < nf; i++) {
        const stk_frame_t *fr = stk_frame_at(t, x->frames[i]);
        sep(f, i);
        if (fr->op != NULL)
            fprintf(f, "%u", out_strs_index(&x->strs, fr->op));
        else
            fputs("null", f);
    }
    fputc(']', f);
    nulls(f, "optimizations", nf);
    col_begin(f, "line", 0);
    for (i = 0; i < nf; i++) {
        int line = stk_frame_at(t, x->frames[i])->line;
        sep(f, i);
        if (line > 0)
            fprintf(f, "%d", line);
        else
            fputs("null", f);
    }
    fputc(']', f);
    nulls(f, "column", nf);
    repeat(f, "inlineDepth", "0", nf);
    nulls(f, "nativeSymbol", nf);
    fprintf(f, ",\"length\":%zu}", nf);
}

/* funcTable: one per (function, file) the thread's frames use. */
static void write_func_table(ffx_t *x, FILE *f, size_t nfn)
{
    size_t i;

    fputs(",\"funcTable\":{", f);
    col_begin(f, "name", 1);
    for (i = 0; i < nfn; i++) {
        sep(f, i);
        fprintf(f, "%u", out_strs_index(&x->strs, x->rows[x->fns[i]].function));
    }
    fputc(']', f);
    col_begin(f, "isJS", 0);
    for (i = 0; i < nfn; i++) {
        sep(f, i);
        fputs(x->rows[x->fns[i]].file[0] ? "true" : "false", f);
    }
    fputc(']', f);
    repeat(f, "relevantForJS", "false", nfn);
    repeat(f, "resource", "-1", nfn);
    col_begin(f, "fileName", 0);
    for (i = 0; i < nfn; i++) {
        const stk_fn_row_t *r = &x->rows[x->fns[i]];
        sep(f, i);
        if (r->file[0])
            fprintf(f, "%u", out_strs_index(&x->strs, r->file));
        else
            fputs("null", f);
    }
    fputc(']', f);
    col_begin(f, "lineNumber", 0);
    for (i = 0; i < nfn; i++) {
        const stk_fn_row_t *r = &x->rows[x->fns[i]];
        sep(f, i);
        if (r->file[0] && r->line > 0)
            fprintf(f, "%d", r->line);
        else
            fputs("null", f);
    }
    fputc(']', f);
    nulls(f, "columnNumber", nfn);
    fprintf(f, ",\"length\":%zu}", nfn);
}

static void write_thread(ffx_t *x, FILE *f, size_t ti)
{
    const stk_thread_t *th = stk_thread_at(x->t, ti);
    const uint32_t *nodes = x->by_thread + x->node_start[ti];
    size_t nn = x->node_start[ti + 1] - x->node_start[ti], nf, nfn;
    const uint32_t *evs = x->ev_by_thread + x->ev_start[ti];
    size_t ne = x->ev_start[ti + 1] - x->ev_start[ti];
    char name[96];

    number_thread(x, ti, &nf, &nfn);
    fputs("{\"name\":", f);
    snprintf(name, sizeof name, "%d", (int)th->tid);
    out_json_str(f, th->name[0] ? th->name : name);
    fprintf(f, ",\"isMainThread\":%s,\"processStartupTime\":0,\"processShutdownTime\":null,"
            "\"registerTime\":0,\"unregisterTime\":null,\"pausedRanges\":[],\"pid\":\"%d\","
            "\"tid\":%d,\"processType\":\"default\",\"processName\":",
            th->tid == x->p->meta.pid ? "true" : "false", (int)x->p->meta.pid, (int)th->tid);
    out_json_str(f, x->p->meta.command[0] ? x->p->meta.command : "Python");
    write_samples(x, f, th, evs, ne);
    write_stack_table(x, f, th, nodes, nn);
    write_frame_table(x, f, nf);
    write_func_table(x, f, nfn);
    fputs(",\"resourceTable\":{\"lib\":[],\"name\":[],\"host\":[],\"type\":[],\"length\":0}"
          ",\"nativeSymbols\":{\"libIndex\":[],\"address\":[],\"name\":[],\"functionSize\":[],"
          "\"length\":0}", f);
    write_markers(x, f, evs, ne);
    fputc('}', f);
}

int out_firefox_write(const profile_t *p, FILE *f, const out_options_t *o)
{
    const stk_table_t *t = p->stacks;
    size_t nn = stk_nnodes(t), nf = stk_nframes(t), nth = stk_nthreads(t), ne = p->nevents;
    size_t nrows = 0, i;
    uint32_t *ev_thread = NULL;
    ffx_t x;
    int err = REMORA_ENOMEM;

    (void)o;
    if (p->events == NULL && stk_total_samples(t) > 0)
        return REMORA_EUSAGE;       /* the CLI says why: no timeline without a recording */
    memset(&x, 0, sizeof x);
    x.p = p;
    x.t = t;
    if (stk_fn_rows(t, &x.rows, &nrows, &x.row_of_frame))
        goto out;
    x.owner = malloc((nn + 1) * sizeof *x.owner);
    x.by_thread = malloc((nn + 1) * sizeof *x.by_thread);
    x.local = calloc(nn + 1, sizeof *x.local);
    x.node_start = malloc((nth + 1) * sizeof *x.node_start);
    x.ev_start = malloc((nth + 1) * sizeof *x.ev_start);
    x.ev_by_thread = malloc((ne + 1) * sizeof *x.ev_by_thread);
    ev_thread = malloc((ne + 1) * sizeof *ev_thread);
    x.frame_local = malloc((nf + 1) * sizeof *x.frame_local);
    x.frame_stamp = calloc(nf + 1, sizeof *x.frame_stamp);
    x.frames = malloc((nf + 1) * sizeof *x.frames);
    x.fn_local = malloc((nrows + 1) * sizeof *x.fn_local);
    x.fn_stamp = calloc(nrows + 1, sizeof *x.fn_stamp);
    x.fns = malloc((nrows + 1) * sizeof *x.fns);
    if (!x.owner || !x.by_thread || !x.local || !x.node_start || !x.ev_start || !x.ev_by_thread ||
        !ev_thread || !x.frame_local || !x.frame_stamp || !x.frames || !x.fn_local ||
        !x.fn_stamp || !x.fns)
        goto out;
    /* a node's thread is its parent's (a parent is made before its children); roots first */
    for (i = 0; i < nn; i++)
        x.owner[i] = STK_NONE;
    for (i = 0; i < nth; i++)
        x.owner[stk_thread_at(t, i)->root] = (uint32_t)i;
    for (i = 0; i < nn; i++) {
        const stk_node_t *nd = stk_node_at(t, (uint32_t)i);
        if (x.owner[i] == STK_NONE && nd->parent != STK_NONE && nd->parent < i)
            x.owner[i] = x.owner[nd->parent];
    }
    group(x.owner, nn, nth, x.by_thread, x.node_start);
    for (i = 0; i < ne; i++)
        ev_thread[i] = p->events[i].thread < nth && p->events[i].node < nn &&
                       x.owner[p->events[i].node] == p->events[i].thread ? p->events[i].thread : STK_NONE;
    group(ev_thread, ne, nth, x.ev_by_thread, x.ev_start);

    fprintf(f, "{\"meta\":{\"interval\":%.6f,\"startTime\":%.3f,\"processType\":0,"
            "\"product\":\"remora\",\"stackwalk\":0,\"version\":32,"
            "\"preprocessedProfileVersion\":57,\"symbolicated\":true,\"markerSchema\":[],"
            "\"platform\":\"Linux\",\"toolkit\":\"\",\"appBuildID\":\"\",\"CPUName\":\"\","
            "\"importedFrom\":\"remora " REMORA_VERSION "\",\"misc\":",
            p->meta.rate_hz > 0 ? 1000.0 / p->meta.rate_hz : 1.0,
            (double)p->meta.start_unix_ns / 1e6);
    {
        /* the counts' words (docs/cli.md, "Counts") after the interpreter and mode: what
         * the profiler shows as the profile's information */
        char misc[896], words[512], unit[96] = "";
        out_counts_text(words, sizeof words, &p->meta, stk_total_samples(t));
        if (p->meta.sample_bytes > 0)
            snprintf(unit, sizeof unit, "; weights in bytes of resident growth, %llu a sample",
                     (unsigned long long)p->meta.sample_bytes);
        snprintf(misc, sizeof misc, "Python %.32s, %.16s mode%s%.8s; %s%s",
                 p->meta.python[0] ? p->meta.python : "?", p->meta.mode[0] ? p->meta.mode : "wall",
                 p->meta.engine[0] ? ", engine " : "", p->meta.engine, words, unit);
        out_json_str(f, misc);
    }
    fputs(",\"categories\":[{\"name\":\"Other\",\"color\":\"grey\",\"subcategories\":[\"Other\"]},"
          "{\"name\":\"Python\",\"color\":\"yellow\",\"subcategories\":[\"Other\"]},"
          "{\"name\":\"GC\",\"color\":\"orange\",\"subcategories\":[\"Other\"]},"
          "{\"name\":\"GIL\",\"color\":\"green\",\"subcategories\":[\"Other\"]},"
          "{\"name\":\"Native\",\"color\":\"blue\",\"subcategories\":[\"Other\"]}],"
          "\"extensions\":{\"id\":[],\"name\":[],\"baseURL\":[],\"length\":0}},"
          "\"libs\":[],\"pages\":[],\"threads\":[", f);
    for (i = 0; i < nth; i++) {
        sep(f, i);
        write_thread(&x, f, i);
    }
    fputs("],\"shared\":{\"stringArray\":[", f);
    for (i = 0; i < x.strs.n; i++) {
        sep(f, i);
        out_json_str(f, x.strs.v[i]);
    }
    fputs("],\"sources\":{\"length\":0,\"uuid\":[],\"filename\":[]}}}\n", f);
    err = x.strs.oom ? REMORA_ENOMEM : ferror(f) ? REMORA_EIO : REMORA_OK;
out:
    free(x.rows);
    free(x.row_of_frame);
    free(x.owner);
    free(x.by_thread);
    free(x.local);
    free(x.node_start);
    free(x.ev_start);
    free(x.ev_by_thread);
    free(ev_thread);
    free(x.frame_local);
    free(x.frame_stamp);
    free(x.frames);
    free(x.fn_local);
    free(x.fn_stamp);
    free(x.fns);
    out_strs_free(&x.strs);
    return err;
}
