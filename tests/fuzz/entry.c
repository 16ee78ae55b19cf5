/* tests/fuzz/entry.c — libFuzzer's entry point for one target, chosen at build time:
 *   clang -fsanitize=fuzzer -DFUZZ_TARGET=fuzz_maps entry.c targets.c ... */
#include "fuzz.h"

#ifndef FUZZ_TARGET
#error "define FUZZ_TARGET (fuzz_maps, fuzz_elf, ...)"
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return FUZZ_TARGET(data, size);
}
