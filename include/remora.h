/* remora — sampling profiler and stack inspector for running CPython processes.
 * Project-wide definitions: version, error codes and their exit codes.
 */
#ifndef REMORA_H
#define REMORA_H

#include <stddef.h>

#define REMORA_VERSION "0.1.0"

/* Error codes used by every layer. errno is mapped to these once, in proc/. */
enum remora_err {
    REMORA_OK = 0,
    REMORA_EUSAGE,    /* bad command line */
    REMORA_ENOPROC,   /* no such process, or it exited */
    REMORA_EPERM,     /* not allowed to read the target */
    REMORA_ENOTPY,    /* not a CPython process */
    REMORA_EVERSION,  /* CPython, but a version or build remora cannot read */
    REMORA_EFAULT,    /* an address is not mapped in the target (transient) */
    REMORA_ECORRUPT,  /* data read from the target fails a check (transient) */
    REMORA_ENOMEM,    /* out of memory or a bound was reached */
    REMORA_EIO,       /* local I/O failed (an output file, /proc) */
};

/* Exit codes of the remora command (see README). */
enum remora_exit {
    REMORA_EXIT_OK = 0,
    REMORA_EXIT_USAGE = 1,
    REMORA_EXIT_NOPROC = 2,
    REMORA_EXIT_PERM = 3,
    REMORA_EXIT_NOTPY = 4,
    REMORA_EXIT_FAIL = 5,    /* anything else: I/O error, target data unreadable */
};

/* Maps an error code to the exit code of the command. */
int remora_exit_code(int err);

/* Grows the array *v of *cap elements of 'elem' bytes (doubling) until it holds 'need';
 * *v and *cap are updated. Returns 0, or -1 (out of memory or size overflow) with the
 * array left as it was. (proc/grow.c) */
int remora_grow_to(void **v, size_t *cap, size_t need, size_t elem);

/* The same, with the common case (room enough) inline: it runs many times a sample. */
static inline int remora_grow(void **v, size_t *cap, size_t need, size_t elem)
{
    return need <= *cap ? 0 : remora_grow_to(v, cap, need, elem);
}

/* A short constant description of an error code. */
const char *remora_strerror(int err);

#endif
