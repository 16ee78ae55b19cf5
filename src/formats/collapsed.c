/* formats/collapsed.c — Brendan Gregg's collapsed stacks: one line per distinct stack,
 * outermost frame first, frames joined by ';', then a space and the count (--mode memory:
 * the bytes, count x the bytes a sample stands for). A frame is
 * "function (file:line)"; the first element is "thread NAME (TID)".
 *
 * Names are escaped by out_text_str() with ';' as the quote, so a line stays one stack
 * (whoever splits lines, even at U+2028 or U+0085) and is valid UTF-8: '\' → "\\",
 * ';' → "\;", newline, carriage return, tab → "\n", "\r", "\t", other control
 * characters (C0, DEL, C1) → "\xNN", U+2028/U+2029 → "\u2028"/"\u2029", each byte that
 * is not part of valid UTF-8 → U+FFFD. The reader undoes it.
 *
 * --opcodes: the innermost frame's instruction follows it, "function (file:line) [OP@N]",
 * OP its name (capitals, digits, '_') and N its byte offset in the bytecode; only after
 * the ')' that ends a frame's place, which no name can end a frame with.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "remora.h"
#include "out.h"
#include "../util/util.h"

static void put_escaped(FILE *f, const char *s)
{
    out_text_str(f, s, ';');
}

struct wctx {
    const stk_table_t *t;
    FILE *f;
    const out_options_t *o;
    uint64_t unit;                  /* what a sample counts for: 1, or --mode memory's bytes */
};

static void write_stack(void *ctx, const stk_thread_t *th, const uint32_t *frames, size_t n, uint64_t count)
{
    struct wctx *w = ctx;
    size_t i;
    int first = 1;

    if (!w->o || !w->o->no_threads) {
        fputs("thread ", w->f);
        put_escaped(w->f, th->name[0] ? th->name : "?");
        fprintf(w->f, " (%d)", (int)th->tid);
        first = 0;
    }
    for (i = 0; i < n; i++) {
        const stk_frame_t *fr = stk_frame_at(w->t, frames[i]);
        if (!first)
            fputc(';', w->f);
        first = 0;
        put_escaped(w->f, fr->function);
        if (fr->file[0]) {
            fputs(" (", w->f);
            put_escaped(w->f, fr->file);
            fprintf(w->f, ":%d)", fr->line);
            if (fr->op != NULL)
                fprintf(w->f, " [%s@%d]", fr->op, fr->offset);
        }
    }
    if (first)
        fputs("<no frames>", w->f);
    fprintf(w->f, " %llu\n", (unsigned long long)(count * w->unit));
}

int out_collapsed_write(const profile_t *p, FILE *f, const out_options_t *o)
{
    struct wctx w = { p->stacks, f, o, p->meta.sample_bytes > 0 ? p->meta.sample_bytes : 1 };
    int err = stk_foreach_stack(p->stacks, write_stack, &w);

    if (err)
        return err;
    return ferror(f) ? REMORA_EIO : REMORA_OK;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* The code point of the n hex digits at s, or -1. */
static long hexnum(const char *s, int n)
{
    long v = 0;
    int i;

    for (i = 0; i < n; i++) {
        if (hexval(s[i]) < 0)
            return -1;
        v = v << 4 | hexval(s[i]);
    }
    return v;
}

/* Writes code point c (< 0x10000) as UTF-8 at w; NUL and surrogates as U+FFFD (the
 * strings escaped hold neither). Returns the bytes written: never more than the
 * escape's own length. */
static size_t put_cp(char *w, long c)
{
    if (c == 0 || (c >= 0xd800 && c <= 0xdfff))
        c = 0xfffd;
    if (c < 0x80) {
        w[0] = (char)c;
        return 1;
    }
    if (c < 0x800) {
        w[0] = (char)(0xc0 | c >> 6);
        w[1] = (char)(0x80 | (c & 0x3f));
        return 2;
    }
    w[0] = (char)(0xe0 | c >> 12);
    w[1] = (char)(0x80 | ((c >> 6) & 0x3f));
    w[2] = (char)(0x80 | (c & 0x3f));
    return 3;
}

/* Splits s (modified in place) at unescaped ';' and undoes the escapes: \xNN and
 * \uNNNN are code points, \n \r \t the control characters, a backslash before anything
 * else is dropped. Returns the number of parts. */
static size_t split_unescape(char *s, char **parts, size_t max)
{
    size_t n = 0;
    char *w = s;
    long c;

    parts[n++] = w;
    while (*s) {
        if (*s == '\\' && s[1] == 'x' && (c = hexnum(s + 2, 2)) >= 0) {
            w += put_cp(w, c);
            s += 4;
        } else if (*s == '\\' && s[1] == 'u' && (c = hexnum(s + 2, 4)) >= 0) {
            w += put_cp(w, c);
            s += 6;
        } else if (*s == '\\' && s[1]) {
            char e = s[1];
            *w++ = e == 'n' ? '\n' : e == 'r' ? '\r' : e == 't' ? '\t' : e;
            s += 2;
        } else if (*s == ';') {
            *w++ = '\0';
            s++;
            if (n == max)
                return n;
            parts[n++] = w;
        } else {
            *w++ = *s++;
        }
    }
    *w = '\0';
    return n;
}

/* " [OP@N]" ending s after a frame's ')' (--opcodes): the instruction's name (NUL-
 * terminated in place) and offset, s cut before it; else NULL, s as it was. */
static const char *parse_op(char *s, size_t *len, int *offset)
{
    char *b, *at, *end;
    long off;

    if (*len < 7 || s[*len - 1] != ']')
        return NULL;
    for (b = s + *len - 2; b > s + 2 && (*b == '_' || (*b >= 'A' && *b <= 'Z') ||
                                          (*b >= '0' && *b <= '9') || *b == '@'); b--)
        ;
    /* b > s + 1: b[-2] is in s */
    if (b < s + 2 || b[0] != '[' || b[-1] != ' ' || b[-2] != ')' || (at = strchr(b, '@')) == NULL || at == b + 1)
        return NULL;
    off = strtol(at + 1, &end, 10);
    if (end != s + *len - 1 || at[1] < '0' || at[1] > '9' || off > (1L << 30))
        return NULL;
    *at = '\0';
    *offset = (int)off;
    b[-1] = '\0';
    *len = (size_t)(b - 1 - s);
    return b + 1;
}

/* "function (file:line)" → parts (with " [OP@N]" after it: at an instruction); else the
 * whole is the function. */
static uint32_t parse_frame(stk_table_t *t, char *s)
{
    size_t len = strlen(s);
    char *open, *colon, *end;
    long line;
    int offset = -1;
    const char *op = parse_op(s, &len, &offset);

    if (len > 4 && s[len - 1] == ')') {
        open = NULL;
        for (end = s + len - 1; end > s; end--)
            if (end[0] == '(' && end[-1] == ' ') {
                open = end;
                break;
            }
        if (open != NULL) {
            colon = strrchr(open, ':');
            if (colon != NULL) {
                line = strtol(colon + 1, &end, 10);
                if (end == s + len - 1) {
                    open[-1] = '\0';
                    *colon = '\0';
                    return op ? stk_frame_op(t, s, open + 1, (int)line, op, offset)
                              : stk_frame(t, s, open + 1, (int)line);
                }
            }
        }
    }
    return stk_frame(t, s, "", 0);
}

#define COLLAPSED_MAX_DEPTH 65536

/* Does line[0..len) hold a control byte (C0 but tab, or DEL)? No writer of collapsed
 * stacks leaves one unescaped; binary data is full of them (NUL too). */
static int has_control(const char *line, size_t len)
{
    size_t i;

    for (i = 0; i < len; i++) {
        unsigned char c = (unsigned char)line[i];
        if ((c < 0x20 && c != '\t') || c == 0x7f)
            return 1;
    }
    return 0;
}

/* Reads the next line of f into *line (grown as needed, never past max + 1 bytes), its
 * '\n' dropped and a NUL after it (NUL bytes inside it are kept: *len counts them).
 * Returns 1, 0 at the end of the stream, or -1 for a line longer than max bytes (the
 * stream left inside it) or out of memory (*len then 0). */
static int read_line(FILE *f, char **line, size_t *cap, size_t max, size_t *len)
{
    size_t n = 0;
    int c;

    *len = 0;
    /* unlocked: the stream is this reader's alone (getc would lock it a byte at a time) */
    while ((c = getc_unlocked(f)) != EOF && c != '\n') {
        if (n == max) {
            *len = n + 1;
            return -1;
        }
        if (n + 2 > *cap && remora_grow((void **)line, cap, n + 2, 1))
            return -1;
        (*line)[n++] = (char)c;
    }
    if (c == EOF && n == 0)
        return 0;
    if (*cap == 0 && remora_grow((void **)line, cap, 1, 1))
        return -1;
    (*line)[n] = '\0';
    *len = n;
    return 1;
}

int out_collapsed_read(FILE *f, stk_table_t *t, size_t max_line, uint64_t *samples,
                       size_t *bad_line)
{
    char *line = NULL;
    size_t cap = 0, lineno = 0, len;
    int got;
    char **parts = malloc(COLLAPSED_MAX_DEPTH * sizeof *parts);
    uint32_t *frames = malloc(COLLAPSED_MAX_DEPTH * sizeof *frames);
    int err = REMORA_OK;

    *samples = 0;
    *bad_line = 0;
    if (parts == NULL || frames == NULL) {
        free(parts);
        free(frames);
        return REMORA_ENOMEM;
    }
    while ((got = read_line(f, &line, &cap, max_line, &len)) != 0) {
        char *sp, *end;
        unsigned long long count;
        size_t n, i, first = 0;
        uint32_t thread;
        pid_t tid = 0;
        const char *thread_name = "";

        lineno++;
        if (got < 0) {
            /* a line past the bound (binary data, or not collapsed stacks): never held whole */
            err = REMORA_ENOMEM;
            if (len > 0)
                *bad_line = lineno;
            break;
        }
        while (len > 0 && line[len - 1] == '\r')
            line[--len] = '\0';
        if (len == 0)
            continue;
        sp = strrchr(line, ' ');
        if (sp == NULL || sp[1] < '0' || sp[1] > '9' || has_control(line, len)) {
            err = REMORA_ECORRUPT;      /* no count, or binary: a writer escapes control bytes */
            break;
        }
        errno = 0;
        count = strtoull(sp + 1, &end, 10);
        /* the total too must be a count: no sum of lines wraps around */
        if (*end != '\0' || errno == ERANGE || count > UINT64_MAX - *samples) {
            err = REMORA_ECORRUPT;
            break;
        }
        *sp = '\0';
        n = split_unescape(line, parts, COLLAPSED_MAX_DEPTH);
        if (strncmp(parts[0], "thread ", 7) == 0) {
            char *open = strrchr(parts[0], '(');
            if (open != NULL && open > parts[0] + 7 && open[-1] == ' ') {
                tid = (pid_t)strtol(open + 1, NULL, 10);
                open[-1] = '\0';
                thread_name = parts[0] + 7;
                first = 1;
            }
        }
        thread = stk_thread(t, tid, thread_name);
        if (thread == STK_NONE) {
            err = REMORA_ENOMEM;
            break;
        }
        if (n - first == 1 && strcmp(parts[first], "<no frames>") == 0)
            first = n;
        for (i = first; i < n; i++) {
            frames[i - first] = parse_frame(t, parts[i]);
            if (frames[i - first] == STK_NONE) {
                err = REMORA_ENOMEM;
                break;
            }
        }
        if (err || stk_add(t, thread, frames, n - first, count) == STK_NONE) {
            err = err ? err : REMORA_ENOMEM;
            break;
        }
        *samples += count;
    }
    if (err == REMORA_ECORRUPT)
        *bad_line = lineno;
    else if (!err && ferror(f))
        err = REMORA_EIO;
    free(line);
    free(parts);
    free(frames);
    return err;
}
