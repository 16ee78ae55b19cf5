/* out/ — output writers. They read remora's own models only, never proc/ or unwind/. */
#ifndef REMORA_OUT_H
#define REMORA_OUT_H

#include <stdint.h>
#include <stdio.h>

/* Writes str as a JSON string literal (quoted, escaped, always valid UTF-8). */
void out_json_str(FILE *f, const char *str);

#endif
