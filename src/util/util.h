/* util/ — small helpers every layer uses; they read nothing outside remora's own memory.
 *
 *   grow.c    growing arrays (doubling)
 *   err.c     names and exit codes of the REMORA_E* error codes (include/remora.h)
 *   strtab.c  interned strings (stable pointers, grow with distinct names only)
 */
#ifndef REMORA_UTIL_H
#define REMORA_UTIL_H

#include <stddef.h>

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

/* ---- err.c ---------------------------------------------------------------- */

/* A short constant description of an error code. */
const char *remora_strerror(int err);

/* Maps an error code to the exit code of the command. */
int remora_exit_code(int err);

/* ---- strtab.c ------------------------------------------------------------- */

typedef struct strtab strtab_t;

strtab_t *strtab_new(void);
void strtab_free(strtab_t *st);
/* Returns a NUL-terminated copy of s[0..len) that lives as long as the table; the same
 * bytes give the same pointer. NULL only when out of memory. */
const char *strtab_intern(strtab_t *st, const char *s, size_t len);
size_t strtab_bytes(const strtab_t *st);

#endif
