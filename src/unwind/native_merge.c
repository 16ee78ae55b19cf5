/* unwind/native_merge.c — --native: a thread's C stack (native.c) merged with its
 * Python frames. Each call of the interpreter's eval loop on the C stack is replaced by
 * the Python frames it ran (unw_frame_t.entry marks where each call's frames begin),
 * found by the address of the eval loop's own C frame (3.12+ its shim, 3.11 its
 * _PyCFrame) or, failing that, by the pc range of _PyEval_EvalFrameDefault; the Python
 * frames not placed go outermost. Reads only words of the stack copy (nat_memory_read).
 */
#include <stdbool.h>
#include <string.h>

#include "remora.h"
#include "native_int.h"

static int in_stack(const unw_native_t *n, uint64_t a)
{
    return a >= n->stack_lo && a - n->stack_lo < n->stack_len;
}

static unw_frame_t *out_frame(unw_native_t *n, size_t *k)
{
    if (remora_grow((void **)&n->out, &n->cap_out, *k + 1, sizeof *n->out))
        return NULL;
    return &n->out[(*k)++];
}

int nat_put_marker(unw_native_t *n, size_t *k, const char *what)
{
    unw_frame_t *f = out_frame(n, k);

    if (f == NULL)
        return REMORA_ENOMEM;
    memset(f, 0, sizeof *f);
    f->function = strtab_intern(n->strs, what, strlen(what));
    f->file = strtab_intern(n->strs, "", 0);
    f->native = 1;
    return f->function && f->file ? REMORA_OK : REMORA_ENOMEM;
}

/* Python group g (frames [gs[g], gs[g+1])) into out. */
static int put_group(unw_native_t *n, size_t *k, const unw_thread_t *th, const size_t *gs, size_t g)
{
    size_t i;

    for (i = gs[g]; i < gs[g + 1]; i++) {
        unw_frame_t *f = out_frame(n, k);
        if (f == NULL)
            return REMORA_ENOMEM;
        *f = th->frames[i];
    }
    return REMORA_OK;
}

/* Group g of th's Python frames; above the first, a partial stack's UNW_MOVING frame
 * (where the frames that moved were: inner of those known, under the C frames). */
static int put_python(unw_native_t *n, size_t *k, unw_thread_t *th, const size_t *gs, size_t g)
{
    if (g == 0 && th->partial) {
        unw_frame_t *f = out_frame(n, k);
        if (f == NULL)
            return REMORA_ENOMEM;
        memset(f, 0, sizeof *f);
        f->function = strtab_intern(n->strs, UNW_MOVING, strlen(UNW_MOVING));
        f->file = strtab_intern(n->strs, "", 0);
        if (f->function == NULL || f->file == NULL)
            return REMORA_ENOMEM;
        th->moving_in_frames = 1;
    }
    return put_group(n, k, th, gs, g);
}

int nat_merge(unw_native_t *n, const py_layout_t *L, unw_thread_t *th, size_t *k)
{
    size_t *gs = n->gs, ng = 0, g = 0, i, c = 0, nf = th->nframes < UNW_MAX_DEPTH ? th->nframes : UNW_MAX_DEPTH;
    int err;

    /* the groups, innermost first: each ends at a frame one call of the eval loop began
     * with; 3.12+: one whose C-owned frame is not on the C stack (an interpreter
     * trampoline on the data stack) ends none */
    gs[0] = 0;
    for (i = 0; i < nf; i++) {
        const unw_frame_t *f = &th->frames[i];
        int ends = f->entry && (L->walk_root != PY_ROOT_SHIM || in_stack(n, f->below));
        if (ends || i + 1 == nf) {
            n->marks[ng] = L->walk_root == PY_ROOT_SHIM ? f->below : 0;
            gs[++ng] = i + 1;
        }
    }
    /* 3.11: the eval loops' _PyCFrame chain, innermost first, one per group */
    if (L->walk_root == PY_ROOT_ENTRY && L->frames_kind == PY_FRAMES_CFRAME) {
        uint64_t cf = n->ts_frame;
        /* the word read with a kernel tick's copy (never read again: the thread has moved) */
        if (n->has_ts_frame || nat_memory_read(NULL, th->tstate + L->ts_frame, &cf, n)) {
            for (g = 0; g < ng && cf != 0 && in_stack(n, cf); g++) {
                n->marks[g] = cf;
                if (nat_memory_read(NULL, cf + L->cframe_current_frame + 8, &cf, n) == false)
                    break;
            }
            g = 0;
        }
    }
    for (c = 0; c < n->nraw; c++) {
        uint64_t lo = n->raw[c].sp, hi = c + 1 < n->nraw ? n->raw[c + 1].sp : UINT64_MAX;
        const nat_sym_t *s;
        unw_frame_t *f;
        /* groups whose eval loop's frame lies below this one: placed before it */
        while (g < ng && n->marks[g] != 0 && in_stack(n, n->marks[g]) && lo != 0 && n->marks[g] < lo)
            if ((err = put_python(n, k, th, gs, g++)) != REMORA_OK)
                return err;
        if (g < ng && ((n->marks[g] != 0 && in_stack(n, n->marks[g]) && lo != 0 && hi != 0 &&
                        n->marks[g] >= lo && n->marks[g] < hi) ||
                       ((n->marks[g] == 0 || !in_stack(n, n->marks[g])) && nat_eval_pc(n, n->raw[c].pc)))) {
            if ((err = put_python(n, k, th, gs, g++)) != REMORA_OK)
                return err;
            continue;
        }
        if ((s = nat_name_pc(n, n->raw[c].pc)) == NULL || (f = out_frame(n, k)) == NULL)
            return REMORA_ENOMEM;
        memset(f, 0, sizeof *f);
        f->function = s->function;
        f->file = s->file;
        f->line = s->line;
        f->native = 1;
    }
    if (n->end == NAT_END_CUT && (err = nat_put_marker(n, k, UNW_NATIVE_CUT)) != REMORA_OK)
        return err;
    if (g < ng)
        n->st.unplaced++;
    while (g < ng)
        if ((err = put_python(n, k, th, gs, g++)) != REMORA_OK)
            return err;
    return REMORA_OK;
}
