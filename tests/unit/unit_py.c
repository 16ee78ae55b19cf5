/* tests/unit/unit_py.c — unit tests of py/: what a layout derives (behaviour.c), the part
 * of a thread state each reading copies. */
#include <string.h>

#include "py/py.h"
#include "unit.h"

/* The part of a thread state each reading copies (py_layout_derive's ts_read): every
 * field the reading takes from it inside, and no more than the state. 3.15's offsets as
 * its _Py_DebugOffsets give them (888-byte PyThreadState, exc_state the last field read,
 * ending at 304); the built-in layouts' whole states at most. */
void test_ts_read(void)
{
    py_layout_t L;
    int minor;

    memset(&L, 0, sizeof L);
    L.minor = 15;
    L.frames_kind = PY_FRAMES_DIRECT;
    L.ts_size = 888;
    L.ts_next = 8;
    L.ts_interp = 16;
    L.ts_frame = 0x48;
    L.ts_last_profiled = 0x58;
    L.ts_last_profiled_seq = 0x60;
    L.ts_gil_requested = 0x28;
    L.ts_exc_info = 0x90;
    L.ts_thread_id = 0xb0;
    L.ts_native_thread_id = 0xb8;
    L.ts_datastack_chunk = 0x100;
    L.ts_exc_state = 0x120;
    L.ei_size = 16;
    py_layout_derive(&L);
    CHECK(L.ts_read == 0x130, "3.15: a reading copies 304 bytes of the state (%llu)",
          (unsigned long long)L.ts_read);
    L.ts_exc_state = 0x370;         /* a field at the state's end: the whole state */
    py_layout_derive(&L);
    CHECK(L.ts_read == 888, "a last field at the end: the whole state (%llu)", (unsigned long long)L.ts_read);
    L.ts_exc_state = 0x380;         /* past the end (refused elsewhere): never over the state */
    py_layout_derive(&L);
    CHECK(L.ts_read == 888, "a field past the end: no more than the state (%llu)", (unsigned long long)L.ts_read);
    for (minor = 9; minor <= 12; minor++) {
        const py_layout_t *B = py_layout_for_minor(minor);
        if (B == NULL)
            continue;
        L = *B;
        py_layout_derive(&L);
        CHECK(L.ts_read <= L.ts_size && L.ts_read >= L.ts_frame + 8 && L.ts_read >= L.ts_thread_id + 8 &&
              L.ts_read >= L.ts_next + 8 && (L.ts_exc_info == 0 || L.ts_read >= L.ts_exc_info + 8) &&
              (L.ts_datastack_chunk == 0 || L.ts_read >= L.ts_datastack_chunk + PY_TS_DATASTACK_SPAN),
              "3.%d: the fields read inside the %llu bytes copied (state %llu)", minor,
              (unsigned long long)L.ts_read, (unsigned long long)L.ts_size);
    }
}
