/* formats/pprof.c — pprof's profile.proto, gzipped (what `go tool pprof`, Grafana Pyroscope
 * and Parca read). Encoded by hand: a few varints and length-delimited fields.
 *
 *   Profile   sample_type (samples/count, then MODE/nanoseconds when the rate is known;
 *             --mode memory: resident/bytes, a sample's sample_bytes each),
 *             one Sample per distinct stack of a thread: location ids innermost first,
 *             values (count, count x period), labels thread (name) and thread_id (tid);
 *             one Location per interned frame (id = frame + 1) with one Line (function,
 *             line); one Function per (function, file) (id = row of stk_fn_rows + 1, no
 *             system_name: pprof would "demangle" it and drop every <...>, <module> too; its
 *             start_line the lowest line seen); the string table (every string valid
 *             UTF-8: a byte that is not becomes U+FFFD); time, duration, period.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "remora.h"
#include "out.h"
#include "../util/util.h"

typedef struct pbuf {
    unsigned char *p;
    size_t n, cap;
    int oom;
} pbuf_t;

static void pb_raw(pbuf_t *b, const void *data, size_t n)
{
    if (b->oom || n == 0)
        return;                 /* n == 0: data may be NULL (an empty packed field) */
    if (remora_grow((void **)&b->p, &b->cap, b->n + n, 1)) {
        b->oom = 1;
        return;
    }
    memcpy(b->p + b->n, data, n);
    b->n += n;
}

static void pb_varint(pbuf_t *b, uint64_t v)
{
    unsigned char tmp[10];
    size_t n = 0;

    do {
        tmp[n++] = (unsigned char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v != 0);
    pb_raw(b, tmp, n);
}

static void pb_uint(pbuf_t *b, unsigned field, uint64_t v)
{
    pb_varint(b, (uint64_t)field << 3);         /* wire type 0 */
    pb_varint(b, v);
}

static void pb_bytes(pbuf_t *b, unsigned field, const void *data, size_t n)
{
    pb_varint(b, (uint64_t)field << 3 | 2);     /* wire type 2 */
    pb_varint(b, n);
    pb_raw(b, data, n);
}

/* A string as valid UTF-8: each byte that is not part of a valid sequence → U+FFFD. */
static void pb_string(pbuf_t *b, unsigned field, const char *str)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t n = strlen(str), i, len = 0, k;

    for (i = 0; i < n; i += k)
        len += (k = out_utf8_len(s + i, n - i)) ? k : (k = 1, 3);
    pb_varint(b, (uint64_t)field << 3 | 2);
    pb_varint(b, len);
    for (i = 0; i < n; i += k) {
        if ((k = out_utf8_len(s + i, n - i)) != 0) {
            pb_raw(b, s + i, k);
        } else {
            pb_raw(b, "\xef\xbf\xbd", 3);
            k = 1;
        }
    }
}

/* --- samples ------------------------------------------------------------------------- */

struct pctx {
    pbuf_t *out, msg, sub;
    out_strs_t *strs;
    int64_t period;             /* ns (--mode memory: bytes) a sample stands for; 0: unknown */
    uint32_t k_thread, k_tid;   /* label keys */
};

static void put_sample(void *ctx, const stk_thread_t *th, const uint32_t *frames, size_t n,
                       uint64_t count)
{
    struct pctx *c = ctx;
    size_t i;

    c->msg.n = 0;
    c->sub.n = 0;
    for (i = n; i > 0; i--)                     /* innermost first */
        pb_varint(&c->sub, (uint64_t)frames[i - 1] + 1);
    pb_bytes(&c->msg, 1, c->sub.p, c->sub.n);   /* location_id, packed */
    c->sub.n = 0;
    pb_varint(&c->sub, count);
    if (c->period > 0)
        pb_varint(&c->sub, count * (uint64_t)c->period);
    pb_bytes(&c->msg, 2, c->sub.p, c->sub.n);   /* value, packed */
    c->sub.n = 0;
    pb_uint(&c->sub, 1, c->k_thread);
    pb_uint(&c->sub, 2, out_strs_index(c->strs, th->name));
    pb_bytes(&c->msg, 3, c->sub.p, c->sub.n);   /* label thread = name */
    c->sub.n = 0;
    pb_uint(&c->sub, 1, c->k_tid);
    pb_uint(&c->sub, 3, (uint64_t)th->tid);
    pb_bytes(&c->msg, 3, c->sub.p, c->sub.n);   /* label thread_id = tid */
    if (!c->msg.oom && !c->sub.oom)
        pb_bytes(c->out, 2, c->msg.p, c->msg.n);
    else
        c->out->oom = 1;
}

static void value_type(pbuf_t *out, pbuf_t *msg, unsigned field, uint32_t type, uint32_t unit)
{
    msg->n = 0;
    pb_uint(msg, 1, type);
    pb_uint(msg, 2, unit);
    pb_bytes(out, field, msg->p, msg->n);
}

/* The protobuf, uncompressed, into out. Returns 0 or REMORA_ENOMEM. */
static int encode(const profile_t *p, pbuf_t *out)
{
    const stk_table_t *t = p->stacks;
    out_strs_t strs = { 0 };
    struct pctx c;
    stk_fn_row_t *rows = NULL;
    uint32_t *row_of_frame = NULL;
    size_t nrows = 0, i;
    const char *mode = p->meta.mode[0] ? p->meta.mode : "wall";
    /* --mode memory: the second value is resident bytes, a sample's sample_bytes each */
    const char *vtype = p->meta.sample_bytes > 0 ? "resident" : mode;
    const char *vunit = p->meta.sample_bytes > 0 ? "bytes" : "nanoseconds";
    char comment[160], words[512];
    int err;

    memset(&c, 0, sizeof c);
    c.out = out;
    c.strs = &strs;
    c.period = p->meta.sample_bytes > 0 && p->meta.sample_bytes < INT64_MAX ? (int64_t)p->meta.sample_bytes
             : p->meta.rate_hz > 0 ? (int64_t)(1e9 / p->meta.rate_hz + 0.5) : 0;
    err = stk_fn_rows(t, &rows, &nrows, &row_of_frame);
    if (err)
        goto done;
    out_strs_index(&strs, "");                  /* string 0 is always "" */
    /* sample types: samples/count, and the time they stand for when the rate is known */
    value_type(out, &c.msg, 1, out_strs_index(&strs, "samples"), out_strs_index(&strs, "count"));
    if (c.period > 0)
        value_type(out, &c.msg, 1, out_strs_index(&strs, vtype), out_strs_index(&strs, vunit));
    c.k_thread = out_strs_index(&strs, "thread");
    c.k_tid = out_strs_index(&strs, "thread_id");
    err = stk_foreach_stack(t, put_sample, &c);
    if (err)
        goto done;
    for (i = 0; i < stk_nframes(t); i++) {      /* location i + 1: frame i */
        const stk_frame_t *fr = stk_frame_at(t, (uint32_t)i);
        c.msg.n = 0;
        c.sub.n = 0;
        pb_uint(&c.msg, 1, i + 1);
        pb_uint(&c.sub, 1, (uint64_t)row_of_frame[i] + 1);
        pb_uint(&c.sub, 2, fr->line > 0 ? (uint64_t)fr->line : 0);
        pb_bytes(&c.msg, 4, c.sub.p, c.sub.n);
        pb_bytes(out, 4, c.msg.p, c.msg.n);
    }
    for (i = 0; i < nrows; i++) {               /* function i + 1: row i */
        c.msg.n = 0;
        pb_uint(&c.msg, 1, i + 1);
        pb_uint(&c.msg, 2, out_strs_index(&strs, rows[i].function));
        pb_uint(&c.msg, 4, out_strs_index(&strs, rows[i].file));
        pb_uint(&c.msg, 5, rows[i].line > 0 ? (uint64_t)rows[i].line : 0);
        pb_bytes(out, 5, c.msg.p, c.msg.n);
    }
    snprintf(comment, sizeof comment, "remora %s, pid %d, Python %s, mode %s", REMORA_VERSION,
             (int)p->meta.pid, p->meta.python[0] ? p->meta.python : "?", mode);
    {
        uint32_t ci = out_strs_index(&strs, comment), wi;
        /* a second comment: the counts' words (docs/cli.md, "Counts") */
        out_counts_text(words, sizeof words, &p->meta, stk_total_samples(t));
        wi = out_strs_index(&strs, words);
        if (c.period > 0)
            value_type(out, &c.msg, 11, out_strs_index(&strs, vtype), out_strs_index(&strs, vunit));
        for (i = 0; i < strs.n; i++)
            pb_string(out, 6, strs.v[i]);
        if (p->meta.start_unix_ns > 0)
            pb_uint(out, 9, (uint64_t)p->meta.start_unix_ns);
        if (p->meta.duration_s > 0)
            pb_uint(out, 10, (uint64_t)(p->meta.duration_s * 1e9));
        if (c.period > 0)
            pb_uint(out, 12, (uint64_t)c.period);
        pb_uint(out, 13, ci);
        pb_uint(out, 13, wi);
    }
    if (out->oom || c.msg.oom || c.sub.oom || strs.oom)
        err = REMORA_ENOMEM;
done:
    free(rows);
    free(row_of_frame);
    free(c.msg.p);
    free(c.sub.p);
    out_strs_free(&strs);
    return err;
}

int out_pprof_write(const profile_t *p, FILE *f, const out_options_t *o)
{
    pbuf_t pb = { 0 };
    z_stream zs;
    unsigned char *gz = NULL;
    uLong cap;
    int err, zerr;

    (void)o;
    err = encode(p, &pb);
    if (err == REMORA_OK && pb.n > (size_t)UINT32_MAX / 2)
        err = REMORA_ENOMEM;        /* zlib counts in unsigned int */
    if (err)
        goto done;
    memset(&zs, 0, sizeof zs);
    if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
        err = REMORA_ENOMEM;
        goto done;
    }
    cap = deflateBound(&zs, (uLong)pb.n);
    gz = malloc(cap);
    if (gz == NULL) {
        deflateEnd(&zs);
        err = REMORA_ENOMEM;
        goto done;
    }
    zs.next_in = pb.p ? pb.p : (unsigned char *)"";
    zs.avail_in = (uInt)pb.n;
    zs.next_out = gz;
    zs.avail_out = (uInt)cap;
    zerr = deflate(&zs, Z_FINISH);
    if (zerr != Z_STREAM_END) {
        deflateEnd(&zs);
        err = REMORA_ENOMEM;
        goto done;
    }
    fwrite(gz, 1, zs.total_out, f);
    deflateEnd(&zs);
    err = ferror(f) ? REMORA_EIO : REMORA_OK;
done:
    free(pb.p);
    free(gz);
    return err;
}
