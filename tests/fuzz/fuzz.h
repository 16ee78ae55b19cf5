/* tests/fuzz/fuzz.h — the fuzz targets (targets.c), for entry.c and tool.c. */
#ifndef REMORA_FUZZ_H
#define REMORA_FUZZ_H

#include <stddef.h>
#include <stdint.h>

typedef struct fuzz_target {
    const char *name;
    int (*run)(const uint8_t *data, size_t size);
} fuzz_target_t;

/* Every target, ended by { NULL, NULL }. */
extern const fuzz_target_t fuzz_targets[];

int fuzz_maps(const uint8_t *data, size_t size);
int fuzz_elf(const uint8_t *data, size_t size);
int fuzz_lnotab(const uint8_t *data, size_t size);
int fuzz_lt310(const uint8_t *data, size_t size);
int fuzz_locations(const uint8_t *data, size_t size);
int fuzz_core(const uint8_t *data, size_t size);
int fuzz_unwind(const uint8_t *data, size_t size);

#endif
