/* remora — sampling profiler and stack inspector for running CPython processes.
 * Project-wide definitions: version, error codes and their exit codes (their names and
 * the mapping from one to the other: src/util/err.c, declared in src/util/util.h).
 */
#ifndef REMORA_H
#define REMORA_H

/* The version comes from the file VERSION at the top of the tree, through the Makefile
 * (-DREMORA_VERSION); debian/changelog names the same one (install_tests.py checks). */
#ifndef REMORA_VERSION
#error "REMORA_VERSION is defined by the Makefile, from the VERSION file"
#endif

/* Error codes used by every layer (REMORA_OK, REMORA_E*): the public header's, one list
 * for the library and the command. errno is mapped to these once, in proc/. */
#include "remora/remora.h"

/* Exit codes of the remora command (see README). */
enum remora_exit {
    REMORA_EXIT_OK = 0,
    REMORA_EXIT_USAGE = 1,
    REMORA_EXIT_NOPROC = 2,
    REMORA_EXIT_PERM = 3,
    REMORA_EXIT_NOTPY = 4,
    REMORA_EXIT_FAIL = 5,    /* anything else: I/O error, target data unreadable */
};

#endif
