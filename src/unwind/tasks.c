/* unwind/tasks.c — asyncio tasks, read from outside: every task of every event loop, its
 * name, its coroutine stack and the tasks awaiting it.
 *
 * Not filled in yet: unw_tasks() and unw_task_chain() refuse with REMORA_EUSAGE.
 */
#include "remora.h"
#include "internal.h"

int unw_tasks(unwinder_t *u, unw_task_t **tasks, size_t *n)
{
    (void)u;
    *tasks = NULL;
    *n = 0;
    return REMORA_EUSAGE;
}

int unw_task_chain(unwinder_t *u, uint64_t id, const unw_task_t **chain, size_t *n)
{
    (void)u;
    (void)id;
    (void)chain;
    *n = 0;
    return REMORA_EUSAGE;
}
