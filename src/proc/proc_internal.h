/* proc/ internals shared by its files. */
#ifndef REMORA_PROC_INTERNAL_H
#define REMORA_PROC_INTERNAL_H

#include "proc.h"

struct proc {
    pid_t pid;
    proc_stats_t stats;
};

/* Maps an errno value to a REMORA_E* code. */
int proc_err_from_errno(int e);

/* Reads a whole small file (under /proc) into a malloc'd NUL-terminated buffer.
 * Returns 0 with *buf and *len, or a REMORA_E* code. At most 'max' bytes. */
int proc_slurp(const char *path, size_t max, char **buf, size_t *len);

#endif
