/* util/ — small helpers every layer uses; they read nothing outside remora's own memory.
 * Which file holds what: docs/layout.md.
 */
#ifndef REMORA_UTIL_H
#define REMORA_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

/* CLOCK_MONOTONIC, in nanoseconds. */
static inline int64_t remora_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- grow.c --------------------------------------------------------------- */

/* Grows the array *v of *cap elements of 'elem' bytes (doubling) until it holds 'need';
 * *v and *cap are updated. Returns 0, or -1 (out of memory or size overflow) with the
 * array left as it was. */
int remora_grow_to(void **v, size_t *cap, size_t need, size_t elem);

/* The same, with the common case (room enough) inline: it runs many times a sample. */
static inline int remora_grow(void **v, size_t *cap, size_t need, size_t elem)
{
    return need <= *cap ? 0 : remora_grow_to(v, cap, need, elem);
}

/* ---- search.c ------------------------------------------------------------- */

/* The index of the first of the n elements of 'size' bytes at base whose uint64_t at byte
 * 'off' is above key (n: none), the elements sorted by that field. Through
 * REMORA_UPPER_U64, which names the type and field (and refuses one not 8 bytes). */
size_t remora_upper_u64(const void *base, size_t n, size_t size, size_t off, uint64_t key);
#define REMORA_UPPER_U64(base, n, type, field, key)                                       \
    ((void)sizeof(char[sizeof(((type *)0)->field) == sizeof(uint64_t) ? 1 : -1]),         \
     remora_upper_u64((base), (n), sizeof(type), offsetof(type, field), (key)))

/* ---- lines.c -------------------------------------------------------------- */

/* Where each line of text[0..len) begins, as Python's universal newlines split them (\n,
 * \r\n, a lone \r): line k (1-based) is text[starts[k-1] .. starts[k]), *n lines. Returns
 * 0, or -1 (out of memory, or a text over 4 GB). Caller frees *starts. */
int lines_index(const char *text, size_t len, uint32_t **starts, size_t *n);

/* Line 'line' (1-based) without its line end and, with 'strip', without the white space
 * around it (not NUL-terminated: *len bytes), or NULL when there is no such line. */
const char *lines_get(const char *text, const uint32_t *starts, size_t n, long line, int strip,
                      size_t *len);

/* ---- err.c ---------------------------------------------------------------- */

/* A short constant description of an error code. */
const char *remora_strerror(int err);

/* Maps an error code to the exit code of the command. */
int remora_exit_code(int err);

/* ---- output.c ------------------------------------------------------------- */

/* Opens 'path' to write an output to. A regular file, or a name not there yet, through a
 * temporary name beside it (*tmp, owned by the caller until remora_output_done()); behind a
 * symlink, beside the file it names (the link kept). Anything else (a device, a FIFO, a
 * file through a link only the kernel follows, as /dev/stdout) in place, *tmp = NULL: never
 * renamed over. A directory, a socket, a file of /proc or /sys, a file the system does
 * not let remora write, and in a sticky world-writable directory (/tmp) a link, FIFO,
 * device or file another user owns (what fs.protected_symlinks, protected_fifos and
 * protected_regular do, whatever they are set to) are refused. A new file's mode is
 * 0666 & ~umask; one replacing a file is no more readable than it was. Returns a file
 * descriptor (read-write for a temporary file), or -1 with errno set. */
int remora_output_open(const char *path, char **tmp);

/* The same, written in place (a stream read while written, as jsonl): a new file made
 * with the umask, or the file there emptied; never through a link put there since it was
 * checked. Returns a file descriptor (read-write for a file: what was written can be
 * kept if its name goes), or -1 with errno set. */
int remora_output_open_stream(const char *path);

/* Whether remora_output_open() would succeed on 'path' ("-" is stdout: yes), found out
 * before sampling without writing there: a probe file is made and removed beside a regular
 * file or a new name; a device or FIFO is not opened. Returns NULL, or the reason it would
 * not, for a message (a constant string, strerror()'s, or one naming the file: valid until
 * the next call). */
const char *remora_output_check(const char *path);

/* Ends an output opened with remora_output_open(), its descriptor already closed (or
 * not: rename needs no descriptor): with 'commit' the temporary file is renamed into
 * place (the name open resolved 'path' to), else removed; frees tmp. Returns 0, or -1
 * with errno set (the temporary file removed). */
int remora_output_done(const char *path, char *tmp, int commit);

/* Keeps an output that could not be written to 'path' (its directory removed, the disk
 * full, its permissions changed) in a new file: path's last component with ".rescue-" and
 * six letters put before its ending (the longest of exts, space-separated, so that the
 * format is still known), made with O_CREAT|O_EXCL|O_NOFOLLOW (nothing replaced, no link
 * followed) and the umask, in the working directory, else $TMPDIR, else /tmp. fill(fd,
 * ctx) writes it and closes fd: 0, or -1 with errno set (the file removed, the next
 * directory tried). Returns 0 with *where its absolute name (malloc'd), or -1 with errno
 * set: ESPIPE when 'path' is stdout, a device or a FIFO (written in place: nothing kept). */
int remora_output_keep(const char *path, const char *exts, int (*fill)(int fd, void *ctx),
                       void *ctx, char **where);

/* remora_output_keep() of all that the descriptor 'from' (open for reading: a temporary
 * or stream file whose name is gone) holds from its start. */
int remora_output_keep_copy(const char *path, const char *exts, int from, char **where);

/* ---- strtab.c ------------------------------------------------------------- */

typedef struct strtab strtab_t;

strtab_t *strtab_new(void);
void strtab_free(strtab_t *st);
/* Returns a NUL-terminated copy of s[0..len) that lives as long as the table; the same
 * bytes give the same pointer. NULL only when out of memory. */
const char *strtab_intern(strtab_t *st, const char *s, size_t len);
size_t strtab_bytes(const strtab_t *st);


/* ---- pyrepr.c: Python's repr() of values, from their parts (pure) ------------- */

/* A bounded output buffer: once a write does not fit it is full, drops every later
 * write, and pyr_end() ends the text with "..." (room for it is always kept). */
typedef struct pyr_buf {
    char *s;
    size_t len, cap;
    int full;
} pyr_buf_t;

#define PYR_INT_DIGITS 128      /* 30-bit digits an int may have to be shown (3840 bits) */

void pyr_init(pyr_buf_t *b, char *s, size_t cap);
void pyr_putn(pyr_buf_t *b, const char *s, size_t n);
void pyr_puts(pyr_buf_t *b, const char *s);
/* The text, NUL-terminated, with "..." at the end if anything was dropped. */
const char *pyr_end(pyr_buf_t *b);
/* Is code point c one repr() shows as it is (str.isprintable())? Unicode database of
 * tools/gen_printable.py's Python (PYR_UNIDATA). */
int pyr_printable(uint32_t c);
/* str: quoted (' unless the text holds ' and no "), escaped as repr() does; cut: the
 * code points given are the first of a longer string: no closing quote, "..." follows. */
void pyr_str(pyr_buf_t *b, const uint32_t *cp, size_t n, int cut);
/* bytes: b'...' as repr() writes it; cut as for pyr_str. */
void pyr_bytes(pyr_buf_t *b, const unsigned char *s, size_t n, int cut);
/* float: Python's shortest repr ('short' style: 0.1, 1e+16, 1e-05, -0.0, inf, nan). */
void pyr_float(pyr_buf_t *b, double x);
/* int from n 30-bit digits, least significant first. Returns 0, or -1 (nothing
 * written) for n > PYR_INT_DIGITS or a digit of 2^30 or more. */
int pyr_int(pyr_buf_t *b, const uint32_t *digits, size_t n, int negative);

/* ---- input.c -------------------------------------------------------------- */

/* What a file of this mode is, for a message: "a FIFO", "a directory", ... (constant). */
const char *remora_file_kind(mode_t mode);

/* Opens 'path' to read an input file from: a regular file only. A FIFO, device,
 * directory or socket is refused by its type, never opened for long (the open does not
 * wait, takes no terminal). Returns a blocking read-only descriptor (close-on-exec), or -1
 * with errno set: *why then says what the file is ("a FIFO", ...), or is NULL when it could
 * not be opened (errno says why). */
int remora_input_open(const char *path, const char **why);

#endif
