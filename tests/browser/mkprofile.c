/* tests/browser/mkprofile.c — writes the flamegraphs the browser tests open, without a
 * live process: builds a stack table by hand and runs out_flamegraph_write on it.
 *
 *     mkprofile SCENARIO OUT.html [TABLE.txt [HEATMAP.html]]
 *                                    SCENARIO: basic, big, hostile, diff, deep, empty, imports
 *     mkprofile selftest             checks the writer's escaping and error paths
 *
 * With TABLE.txt it also writes remora's table of the same stack table (out_table_write,
 * what remora prints without -o), for the page's hotspots to be held to; with HEATMAP.html
 * the line heatmap too, each file's line k reading "    step_k()  # BASENAME" (a file
 * named <...> has no source), which run.mjs derives the same way.
 *
 * For a scenario it prints the ground truth on stdout as one JSON object: the stacks
 * it put in (thread, count, frames outermost first) and their totals, so run.mjs checks
 * the page against what went in, not against the writer's own arithmetic. The big
 * scenario prints only counts.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "remora.h"
#include "formats/out.h"
#include "formats/flamegraph.h"
#include "formats/heatmap.h"

typedef struct fdef {
    const char *fn, *file;
    int line;
} fdef_t;

typedef struct sdef {
    pid_t tid;
    const char *thread;
    uint64_t count;
    size_t n;
    int frames[12];
} sdef_t;

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* ---- basic: a small web shop, two threads, 1,400 samples ---------------------------- */

#define STD "/usr/lib/python3.12/"
#define VENV "/srv/shop/.venv/lib/python3.12/site-packages/"
static const fdef_t basic_frames[] = {
    { "<module>", "/srv/shop/app.py", 1 },                                /* 0 */
    { "main", "/srv/shop/app.py", 88 },                                   /* 1 */
    { "BaseServer.serve_forever", STD "socketserver.py", 235 },           /* 2 */
    { "BaseServer._handle_request_noblock", STD "socketserver.py", 316 }, /* 3 */
    { "Handler.handle", "/srv/shop/handlers.py", 40 },                    /* 4 */
    { "Handler.do_GET", "/srv/shop/handlers.py", 57 },                    /* 5 */
    { "render_catalog", "/srv/shop/views.py", 23 },                       /* 6 */
    { "query_products", "/srv/shop/db.py", 71 },                          /* 7 */
    { "Cursor.execute", VENV "pg8000/core.py", 612 },                     /* 8 */
    { "SocketIO.readinto", STD "socket.py", 707 },                        /* 9 */
    { "Template.render", VENV "jinja2/environment.py", 1301 },            /* 10 */
    { "compute_prices", "/srv/shop/pricing.py", 14 },                     /* 11 */
    { "apply_discounts", "/srv/shop/pricing.py", 39 },                    /* 12 */
    { "round_money", "/srv/shop/pricing.py", 8 },                         /* 13 */
    { "dumps", STD "json/__init__.py", 231 },                             /* 14 */
    { "JSONEncoder.encode", STD "json/encoder.py", 200 },                 /* 15 */
    { "JSONEncoder.iterencode", STD "json/encoder.py", 258 },             /* 16 */
    { "log_request", "/srv/shop/handlers.py", 90 },                       /* 17 */
    { "Logger.info", STD "logging/__init__.py", 1539 },                   /* 18 */
    { "EpollSelector.select", STD "selectors.py", 468 },                  /* 19 */
    { "Thread._bootstrap", STD "threading.py", 1030 },                    /* 20 */
    { "Thread._bootstrap_inner", STD "threading.py", 1073 },              /* 21 */
    { "Thread.run", STD "threading.py", 1010 },                           /* 22 */
    { "refresh_prices", "/srv/shop/worker.py", 31 },                      /* 23 */
    { "fetch_rates", "/srv/shop/worker.py", 55 },                         /* 24 */
    { "Queue.get", STD "queue.py", 171 },                                 /* 25 */
    { "Condition.wait", STD "threading.py", 355 },                        /* 26 */
};
static const sdef_t basic_stacks[] = {
    { 4242, "MainThread", 120, 4, { 0, 1, 2, 19 } },
    { 4242, "MainThread", 180, 10, { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9 } },
    { 4242, "MainThread", 40, 9, { 0, 1, 2, 3, 4, 5, 6, 7, 8 } },
    { 4242, "MainThread", 150, 8, { 0, 1, 2, 3, 4, 5, 6, 10 } },
    { 4242, "MainThread", 210, 10, { 0, 1, 2, 3, 4, 5, 6, 11, 12, 13 } },
    { 4242, "MainThread", 90, 9, { 0, 1, 2, 3, 4, 5, 6, 11, 12 } },
    { 4242, "MainThread", 30, 8, { 0, 1, 2, 3, 4, 5, 6, 11 } },
    { 4242, "MainThread", 110, 9, { 0, 1, 2, 3, 4, 5, 14, 15, 16 } },
    { 4242, "MainThread", 50, 7, { 0, 1, 2, 3, 4, 17, 18 } },
    { 4242, "MainThread", 20, 6, { 0, 1, 2, 3, 4, 5 } },
    { 4250, "pricing-worker", 90, 6, { 20, 21, 22, 23, 24, 9 } },
    { 4250, "pricing-worker", 130, 7, { 20, 21, 22, 23, 11, 12, 13 } },
    { 4250, "pricing-worker", 60, 6, { 20, 21, 22, 23, 11, 12 } },
    { 4250, "pricing-worker", 100, 6, { 20, 21, 22, 23, 25, 26 } },
    { 4250, "pricing-worker", 20, 4, { 20, 21, 22, 23 } },
};

/* ---- imports: a launched tool's start-up imports (nested), recursion, a partial stack - */

#define BOOT "<frozen importlib._bootstrap>"
static const fdef_t imports_frames[] = {
    { "<module>", "/srv/tool/cli.py", 1 },                                        /* 0 */
    { "_find_and_load", BOOT, 1360 },                                             /* 1 */
    { "_find_and_load_unlocked", BOOT, 1331 },                                    /* 2 */
    { "_load_unlocked", BOOT, 935 },                                              /* 3 */
    { "exec_module", "<frozen importlib._bootstrap_external>", 995 },             /* 4 */
    { "_call_with_frames_removed", BOOT, 488 },                                   /* 5 */
    { "<module>", "/usr/lib/python3.12/site-packages/numpy/__init__.py", 120 },   /* 6 */
    { "main", "/srv/tool/cli.py", 40 },                                           /* 7 */
    { "walk", "/srv/tool/tree.py", 10 },                                          /* 8 */
    { "walk", "/srv/tool/tree.py", 14 },                                          /* 9 */
    { "<moving>", "", 0 },                                                        /* 10 */
    { "compile", "/usr/lib/python3.12/re/__init__.py", 227 },                     /* 11 */
};
static const sdef_t imports_stacks[] = {
    { 900, "MainThread", 300, 7, { 0, 1, 2, 3, 4, 5, 6 } },
    { 900, "MainThread", 100, 10, { 0, 1, 2, 3, 4, 5, 6, 1, 2, 11 } },
    { 900, "MainThread", 250, 5, { 0, 7, 8, 9, 8 } },
    { 900, "MainThread", 200, 4, { 0, 7, 8, 9 } },
    { 900, "MainThread", 30, 4, { 0, 7, 8, 10 } },
    { 900, "MainThread", 120, 3, { 0, 7, 11 } },
};

/* ---- hostile: names that try to become markup or script ----------------------------- */

static const fdef_t hostile_frames[] = {
    { "<module>", "/srv/app/<script>window.__pwned=10</script>.py", 1 },
    { "<img src=x onerror=alert(1)>", "/srv/app/x.py", 10 },
    { "<img src=x onerror=\"window.__pwned=1\">", "/srv/app/\"onmouseover=\"window.__pwned=11.py", 11 },
    { "</script><script>window.__pwned=2</script>", "/srv/app/a.py", 12 },
    { "quote\"d 'single' `back` ${window.__pwned=5}", "/srv/app/q.py", 13 },
    { "back\\slash \\u003c \\n \\\\", "C:\\srv\\app\\b.py", 14 },
    { "new\nline\r\tand\x01" "ctl", "/srv/app/n.py", 15 },
    { "sep\xe2\x80\xa8line\xe2\x80\xa9para", "/srv/app/s.py", 16 },
    { "<!-- <script>window.__pwned=6</script>", "/srv/app/c.py", 17 },
    { "bad utf8 \xff\xfe end", "/srv/app/u.py", 18 },
    { "&lt;b&gt;entity&amp;", "/srv/app/e.py", 19 },
    { "__proto__", "/srv/app/p.py", 20 },
    { "constructor", "/srv/app/p.py", 21 },
    { "<svg onload=window.__pwned=7>", "/srv/app/v.py", 22 },
};
#define HOSTILE_THREAD "<img src=x onerror=alert(1)></option></select><script>window.__pwned=8</script>"
static const sdef_t hostile_stacks[] = {
    { 7, HOSTILE_THREAD, 10, 2, { 0, 1 } },
    { 7, HOSTILE_THREAD, 10, 2, { 0, 2 } },
    { 7, HOSTILE_THREAD, 10, 2, { 0, 3 } },
    { 7, HOSTILE_THREAD, 10, 3, { 0, 4, 5 } },
    { 7, HOSTILE_THREAD, 10, 2, { 0, 6 } },
    { 7, HOSTILE_THREAD, 10, 2, { 0, 7 } },
    { 7, HOSTILE_THREAD, 10, 2, { 0, 8 } },
    { 7, HOSTILE_THREAD, 10, 2, { 0, 9 } },
    { 7, HOSTILE_THREAD, 10, 3, { 0, 10, 11 } },
    { 7, HOSTILE_THREAD, 10, 3, { 0, 12, 13 } },
    { 7, HOSTILE_THREAD, 10, 2, { 0, 4 } },
};

/* ---- diff: compute grew, render shrank, parse_legacy vanished, parse_fast is new ----- */

static const fdef_t diff_frames[] = {
    { "main", "/srv/app/main.py", 5 },              /* 0 */
    { "handle", "/srv/app/main.py", 20 },           /* 1 */
    { "parse_legacy", "/srv/app/parse.py", 30 },    /* 2 */
    { "compute", "/srv/app/work.py", 12 },          /* 3 */
    { "render", "/srv/app/view.py", 44 },           /* 4 */
    { "parse_fast", "/srv/app/parse.py", 90 },      /* 5 */
    { "tokenize", "/srv/app/parse.py", 101 },       /* 6 */
};
static const sdef_t diff_new[] = {
    { 100, "MainThread", 100, 3, { 0, 1, 5 } },
    { 100, "MainThread", 700, 3, { 0, 1, 3 } },
    { 100, "MainThread", 200, 3, { 0, 1, 4 } },
};
static const sdef_t diff_base[] = {
    { 90, "MainThread", 250, 3, { 0, 1, 2 } },
    { 90, "MainThread", 50, 4, { 0, 1, 2, 6 } },
    { 90, "MainThread", 400, 3, { 0, 1, 3 } },
    { 90, "MainThread", 300, 3, { 0, 1, 4 } },
};

static void json_frame(const fdef_t *f)
{
    fputc('[', stdout);
    out_json_str(stdout, f->fn);
    fputc(',', stdout);
    out_json_str(stdout, f->file);
    printf(",%d]", f->line);
}

/* Adds the stacks to t and prints them as the truth's "stacks" array. */
static int build(stk_table_t *t, const fdef_t *fr, const sdef_t *s, size_t ns)
{
    size_t i, k;
    uint32_t idx[12];

    printf("[");
    for (i = 0; i < ns; i++) {
        uint32_t th = stk_thread(t, s[i].tid, s[i].thread);
        for (k = 0; k < s[i].n; k++) {
            const fdef_t *f = &fr[s[i].frames[k]];
            idx[k] = stk_frame(t, f->fn, f->file, f->line);
            if (idx[k] == STK_NONE)
                return -1;
        }
        if (th == STK_NONE || stk_add(t, th, idx, s[i].n, s[i].count) == STK_NONE)
            return -1;
        printf("%s{\"tid\":%d,\"thread\":", i ? ",\n" : "", (int)s[i].tid);
        out_json_str(stdout, s[i].thread);
        printf(",\"count\":%" PRIu64 ",\"frames\":[", s[i].count);
        for (k = 0; k < s[i].n; k++) {
            if (k)
                fputc(',', stdout);
            json_frame(&fr[s[i].frames[k]]);
        }
        printf("]}");
    }
    printf("]");
    return 0;
}

static void set_meta(profile_meta_t *m, const char *cmd, pid_t pid, uint64_t samples, uint64_t errors)
{
    memset(m, 0, sizeof *m);
    m->pid = pid;
    snprintf(m->command, sizeof m->command, "%s", cmd);
    snprintf(m->python, sizeof m->python, "3.12.1");
    snprintf(m->mode, sizeof m->mode, "wall");
    snprintf(m->engine, sizeof m->engine, "user");
    m->duration_s = (double)samples / 1000.0;
    m->rate_hz = 1000;
    m->samples = samples;
    m->errors = errors;
    m->late = 2;
    m->start_unix_ns = INT64_C(1767225600) * 1000000000;   /* 2026-01-01 00:00:00 UTC */
}

/* 200,000 distinct frames in 4 threads: each stack shares a random prefix with the one
 * before and adds new frames below it (a deterministic generator, so runs compare). */
static int build_big(stk_table_t *t)
{
    uint32_t stack[64], th[4];
    size_t depth = 0, nframes = 0, nstacks = 0, i;
    uint64_t r = 0x2545f4914f6cdd1dull, total = 0;
    char fn[64], file[64];

    for (i = 0; i < 4; i++)
        th[i] = stk_thread(t, (pid_t)(5000 + i), i == 0 ? "MainThread" : "worker");
    while (nframes < 200000) {
        size_t keep, want, d;
        uint64_t count;
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        keep = depth ? (size_t)(r % depth) : 0;
        want = 8 + (size_t)((r >> 16) % 48);
        count = 1 + (r >> 32) % 40;
        for (d = keep; d < want && nframes < 200000; d++, nframes++) {
            snprintf(fn, sizeof fn, "mod%zu.Class%zu.method_%zu", nframes % 97, nframes % 13, nframes);
            snprintf(file, sizeof file, "/srv/big/pkg%zu/mod%zu.py", nframes % 7, nframes % 97);
            stack[d] = stk_frame(t, fn, file, (int)(nframes % 2000) + 1);
            if (stack[d] == STK_NONE)
                return -1;
        }
        depth = d;
        if (stk_add(t, th[(nstacks / 400) % 4], stack, depth, count) == STK_NONE)
            return -1;
        total += count;
        nstacks++;
    }
    printf("{\"scenario\":\"big\",\"frames\":%zu,\"nodes\":%zu,\"stacks\":%zu,\"total\":%" PRIu64 "}\n",
           stk_nframes(t), stk_nnodes(t), nstacks, total);
    return 0;
}

/* One thread DEEP calls deep (level_0 ... level_N-1): one sample ends at each level, and
 * DEEP more at the deepest, so that the deepest frame is half the width. */
#define DEEP 3000
static int build_deep(stk_table_t *t)
{
    static uint32_t stack[DEEP];
    uint32_t th = stk_thread(t, 77, "MainThread");
    char fn[32];
    size_t d;

    for (d = 0; d < DEEP; d++) {
        snprintf(fn, sizeof fn, "level_%zu", d);
        stack[d] = stk_frame(t, fn, "/srv/deep/rec.py", 10 + (int)(d % 5));
        if (stack[d] == STK_NONE || th == STK_NONE || stk_add(t, th, stack, d + 1, d == DEEP - 1 ? DEEP : 1) == STK_NONE)
            return -1;
    }
    printf("{\"scenario\":\"deep\",\"depth\":%d,\"total\":%" PRIu64 "}\n", DEEP, stk_total_samples(t));
    return 0;
}

static int write_html(const profile_t *p, const char *path)
{
    FILE *f = fopen(path, "w");
    int rc;

    if (f == NULL) {
        perror(path);
        return -1;
    }
    rc = out_flamegraph_write(p, f, &(out_options_t){ 0 });
    if (fclose(f) != 0 && rc == 0)
        rc = REMORA_EIO;
    if (rc != 0)
        fprintf(stderr, "mkprofile: out_flamegraph_write(%s) failed: %d\n", path, rc);
    return rc;
}

/* remora's table of p's stacks into path (its default 25 rows). */
static int write_table(const profile_t *p, const char *path)
{
    FILE *f = fopen(path, "w");
    int rc;

    if (f == NULL) {
        perror(path);
        return -1;
    }
    rc = out_table_write(p, f, &(out_options_t){ 0 });
    if (fclose(f) != 0 && rc == 0)
        rc = REMORA_EIO;
    if (rc != 0)
        fprintf(stderr, "mkprofile: out_table_write(%s) failed: %d\n", path, rc);
    return rc;
}

/* The heatmap's sources: made up, 400 lines a file, line k "    step_k()  # BASENAME". */
static char fake_text[64 * 1024];
static void fake_source(void *ctx, const char *file, out_source_t *out)
{
    const char *base = strrchr(file, '/');
    size_t len = 0;
    int k;

    (void)ctx;
    memset(out, 0, sizeof *out);
    if (file[0] == '<' || file[0] == '\0') {
        out->problem = "not a file";
        return;
    }
    base = base ? base + 1 : file;
    for (k = 1; k <= 400 && len < sizeof fake_text - 200; k++)
        len += (size_t)snprintf(fake_text + len, sizeof fake_text - len, "    step_%d()  # %.100s\n", k, base);
    out->text = fake_text;
    out->len = len;
}

static int write_heatmap(const profile_t *p, const char *path)
{
    FILE *f = fopen(path, "w");
    int rc;

    if (f == NULL) {
        perror(path);
        return -1;
    }
    rc = out_heatmap_write(p, f, &(out_options_t){ .source = fake_source });
    if (fclose(f) != 0 && rc == 0)
        rc = REMORA_EIO;
    if (rc != 0)
        fprintf(stderr, "mkprofile: out_heatmap_write(%s) failed: %d\n", path, rc);
    return rc;
}

static int scenario(const char *name, const char *out, const char *table, const char *heatmap)
{
    stk_table_t *t = stk_new(), *b = NULL;
    profile_t p = { 0 }, bp = { 0 };
    int rc = -1;

    if (t == NULL)
        goto error;
    p.stacks = t;
    if (strcmp(name, "basic") == 0) {
        set_meta(&p.meta, "python3 app.py --port 8080 --workers 1", 4242, 1000, 3);
        printf("{\"scenario\":\"basic\",\"stacks\":");
        if (build(t, basic_frames, basic_stacks, N(basic_stacks)))
            goto error;
    } else if (strcmp(name, "imports") == 0) {
        set_meta(&p.meta, "python3 /srv/tool/cli.py scan /data", 900, 1000, 0);
        printf("{\"scenario\":\"imports\",\"stacks\":");
        if (build(t, imports_frames, imports_stacks, N(imports_stacks)))
            goto error;
    } else if (strcmp(name, "hostile") == 0) {
        set_meta(&p.meta, "python3 -c \"</script><img src=x onerror=window.__pwned=4>\" \xe2\x80\xa8 & <b>", 7, 110, 0);
        printf("{\"scenario\":\"hostile\",\"stacks\":");
        if (build(t, hostile_frames, hostile_stacks, N(hostile_stacks)))
            goto error;
        printf(",\"command\":");
        out_json_str(stdout, p.meta.command);
    } else if (strcmp(name, "diff") == 0) {
        b = stk_new();
        if (b == NULL)
            goto error;
        set_meta(&p.meta, "python3 app.py --new", 100, 1000, 0);
        bp.stacks = b;
        set_meta(&bp.meta, "python3 app.py --old", 90, 1000, 0);
        p.baseline = &bp;
        printf("{\"scenario\":\"diff\",\"stacks\":");
        if (build(t, diff_frames, diff_new, N(diff_new)))
            goto error;
        printf(",\"baseline\":");
        if (build(b, diff_frames, diff_base, N(diff_base)))
            goto error;
    } else if (strcmp(name, "big") == 0) {
        set_meta(&p.meta, "python3 big.py", 5000, 30000, 12);
        if (build_big(t))
            goto error;
    } else if (strcmp(name, "deep") == 0) {
        set_meta(&p.meta, "python3 deep.py", 77, DEEP, 0);
        if (build_deep(t))
            goto error;
    } else if (strcmp(name, "empty") == 0) {
        printf("{\"scenario\":\"empty\"");   /* no meta either: as converted from nothing */
    } else {
        fprintf(stderr, "mkprofile: unknown scenario %s\n", name);
        goto error;
    }
    if (strcmp(name, "big") != 0 && strcmp(name, "deep") != 0)
        printf(",\"total\":%" PRIu64 "}\n", stk_total_samples(t));
    rc = write_html(&p, out);
    if (rc == 0 && table != NULL)
        rc = write_table(&p, table);
    if (rc == 0 && heatmap != NULL)
        rc = write_heatmap(&p, heatmap);
error:
    if (rc != 0 && t == NULL)
        fprintf(stderr, "mkprofile: out of memory\n");
    stk_free(t);
    stk_free(b);
    return rc;
}

/* ---- selftest: the escaping of the embedded JSON and the writer's error path ------- */

static int check_escape(const char *in, size_t len, const char *want)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *m = open_memstream(&buf, &n);
    int ok;

    if (m == NULL)
        return 0;
    out_flamegraph_json_str(m, in, len);
    fclose(m);
    ok = strcmp(buf, want) == 0;
    if (!ok)
        fprintf(stderr, "escape: got %s, want %s\n", buf, want);
    free(buf);
    return ok;
}

static int selftest(void)
{
    static const struct { const char *in; size_t len; const char *want; } cases[] = {
        { "plain", 5, "\"plain\"" },
        { "a<b>&c", 6, "\"a\\u003cb\\u003e\\u0026c\"" },
        { "</script>", 9, "\"\\u003c/script\\u003e\"" },
        { "<!--", 4, "\"\\u003c!--\"" },
        { "q\"b\\", 4, "\"q\\\"b\\\\\"" },
        { "\n\x01\x1f\x7f", 4, "\"\\u000a\\u0001\\u001f\\u007f\"" },
        { "\xe2\x80\xa8|\xe2\x80\xa9", 7, "\"\\u2028|\\u2029\"" },
        { "\xc3\xa9\xe2\x82\xac\xf0\x9f\x90\x8d", 9, "\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x90\x8d\"" },
        { "\xff", 1, "\"\\ufffd\"" },
        { "\xc0\xaf", 2, "\"\\ufffd\\ufffd\"" },
        { "\xed\xa0\x80", 3, "\"\\ufffd\\ufffd\\ufffd\"" },
        { "\xe2\x80", 2, "\"\\ufffd\\ufffd\"" },
        { "a\0b", 3, "\"a\\u0000b\"" },
    };
    size_t i;
    int failed = 0;
    stk_table_t *t;
    FILE *full;

    for (i = 0; i < N(cases); i++)
        if (!check_escape(cases[i].in, cases[i].len, cases[i].want))
            failed++;
    if (!check_escape(NULL, 3, "\"\""))
        failed++;

    /* the template holds its placeholder exactly once */
    {
        const char *tpl = (const char *)out_flamegraph_html, *m = strstr(tpl, OUT_FLAMEGRAPH_MARKER);
        if (m == NULL || strstr(m + 1, OUT_FLAMEGRAPH_MARKER) != NULL || strlen(tpl) != out_flamegraph_html_len) {
            fprintf(stderr, "template: placeholder missing or repeated, or a NUL inside\n");
            failed++;
        }
    }

    /* a stream that fails gives REMORA_EIO */
    t = stk_new();
    full = fopen("/dev/full", "w");
    if (t != NULL && full != NULL) {
        profile_t p = { 0 };
        uint32_t th = stk_thread(t, 1, "main"), fr = stk_frame(t, "f", "f.py", 1);
        int rc;
        p.stacks = t;
        stk_add(t, th, &fr, 1, 1);
        rc = out_flamegraph_write(&p, full, NULL);
        if (rc != REMORA_EIO) {
            fprintf(stderr, "write to /dev/full returned %d, want REMORA_EIO\n", rc);
            failed++;
        }
    }
    if (full != NULL)
        fclose(full);
    stk_free(t);
    printf("selftest: %s\n", failed ? "failed" : "ok");
    return failed ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "selftest") == 0)
        return selftest();
    if (argc < 3 || argc > 5) {
        fprintf(stderr, "usage: mkprofile basic|big|hostile|diff|deep|empty|imports OUT.html [TABLE.txt [HEATMAP.html]]\n"
                        "       mkprofile selftest\n");
        return 2;
    }
    return scenario(argv[1], argv[2], argc > 3 ? argv[3] : NULL, argc > 4 ? argv[4] : NULL) ? 1 : 0;
}
