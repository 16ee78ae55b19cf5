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
int fuzz_native(const uint8_t *data, size_t size);
int fuzz_locals(const uint8_t *data, size_t size);
int fuzz_collapsed(const uint8_t *data, size_t size);
int fuzz_raw(const uint8_t *data, size_t size);

/* fuzz_native's relocations (its input format, targets.c): a word whose top 16 bits are
 * FUZZ_EXE or FUZZ_LIBC is an address in this program or in libc. */
#define FUZZ_EXE 0xFEEDu
#define FUZZ_LIBC 0xFEECu
uint64_t fuzz_reloc(uint64_t v);
uint64_t fuzz_libc_base(void);

#endif
