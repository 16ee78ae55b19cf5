/* unwind/frames.c — one thread's Python frames, innermost first.
 *
 * 3.9/3.10 read each PyFrameObject and follow f_back; 3.11+ read each
 * _PyInterpreterFrame and follow 'previous', skipping the C-owned shim frames.
 * The walk is bounded by UNW_MAX_DEPTH and stops at a NULL link.
 */
#include <string.h>

#include "remora.h"
#include "unwind.h"

#define FRAME_MAX_READ 512

static uint64_t get_u64(const unsigned char *b, uint64_t off)
{
    uint64_t v;
    memcpy(&v, b + off, 8);
    return v;
}

int unw_walk(unwinder_t *u, uint64_t frame, unw_frame_t *out, size_t cap, size_t *n)
{
    const py_layout_t *L = &u->target->layout;
    unsigned char fb[FRAME_MAX_READ];
    size_t k = 0, steps = 0;
    int err;

    *n = 0;
    if (L->fr_size > FRAME_MAX_READ || L->fr_size < L->fr_previous + 8 ||
        L->fr_size < L->fr_code + 8 || L->fr_size < L->fr_instr + 8 ||
        (L->owner_shim && L->fr_size < L->fr_owner + 1))
        return REMORA_ECORRUPT;
    while (frame != 0) {
        unw_code_t *code;
        uint64_t code_addr;
        int addrq;

        if (++steps > UNW_MAX_DEPTH * 2 || frame % 8 != 0)
            return REMORA_ECORRUPT;
        err = proc_read(u->p, frame, fb, L->fr_size);
        if (err)
            return err;
        code_addr = get_u64(fb, L->fr_code);
        if (L->tagged_executable)
            code_addr &= ~(uint64_t)3;
        if ((L->owner_shim && (unsigned char)fb[L->fr_owner] >= L->owner_shim) ||
            unw_is_trampoline(u->target, fb)) {
            frame = get_u64(fb, L->fr_previous);
            continue;
        }
        if (k == cap)
            return REMORA_ENOMEM;
        err = code_cache_get(u->codes, u->p, u->target, code_addr, &code);
        if (err)
            return err;
        if (L->frames_kind == PY_FRAMES_OBJECTS) {
            int32_t lasti;
            memcpy(&lasti, fb + L->fr_instr, 4);
            if (lasti < -1 || lasti > 1 << 29)      /* -1: not started */
                return REMORA_ECORRUPT;
            /* 3.9 counts bytes, 3.10 code units */
            addrq = L->lines_kind == PY_LINES_310 ? lasti * 2 : lasti;
        } else {
            /* byte offset of the current instruction from the first code unit */
            uint64_t ip = get_u64(fb, L->fr_instr);
            int64_t off = (int64_t)(ip - (code_addr + L->co_code_adaptive));
            if (off < -2 || off > (int64_t)1 << 30)
                return REMORA_ECORRUPT;
            addrq = (int)(off / 2) * 2;
        }
        out[k].function = code->function;
        out[k].file = code->file;
        out[k].line = code_line(code, L, addrq);
        k++;
        frame = get_u64(fb, L->fr_previous);
    }
    *n = k;
    return REMORA_OK;
}
