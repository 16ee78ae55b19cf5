/* lib/lib.h — what the remora command reaches under libremora's public API (api.c):
 * the handle's source, interpreter and unwinder, for the readings the API has no form
 * for yet (dump's locals, source lines, native and task printing). Not installed. */
#ifndef REMORA_LIB_H
#define REMORA_LIB_H

#include "remora/remora.h"
#include "../proc/proc.h"
#include "../py/py.h"
#include "../unwind/unwind.h"

/* Each borrowed from r, valid until remora_close(r). */
proc_t *remora_proc(remora_t *r);
const py_target_t *remora_target(const remora_t *r);
unwinder_t *remora_unwinder(remora_t *r);

#endif
