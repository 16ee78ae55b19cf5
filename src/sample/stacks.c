/* sample/stacks.c — the stack table: interned frames and per-thread tries of stacks.
 *
 * Frames are interned by (function, file, line) in an open-addressing table; each
 * thread has a trie whose nodes carry the sample counts of stacks ending there.
 * Children are found through a hash of (parent, frame), so adding a sample costs
 * O(depth) lookups and nothing is allocated unless a stack is new.
 */
#include <stdlib.h>
#include <string.h>

#include "remora.h"
#include "sample.h"
#include "../util/util.h"

struct stk_table {
    strtab_t *strings;
    stk_frame_t *frames;
    size_t nframes, cap_frames;
    uint32_t *frame_slots;          /* hash → frame index + 1; 0 = empty */
    size_t frame_slots_cap;
    stk_node_t *nodes;
    size_t nnodes, cap_nodes;
    uint32_t *child_slots;          /* hash of (parent, frame) → node index + 1 */
    size_t child_slots_cap;
    stk_thread_t *threads;
    size_t nthreads, cap_threads;
    uint64_t total;
    uint32_t *scratch;              /* stk_foreach_stack's path */
    size_t scratch_cap;
};

static uint64_t mix(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return h;
}

stk_table_t *stk_new(void)
{
    stk_table_t *t = calloc(1, sizeof *t);

    if (t == NULL)
        return NULL;
    t->strings = strtab_new();
    t->frame_slots_cap = 1024;
    t->frame_slots = calloc(t->frame_slots_cap, sizeof *t->frame_slots);
    t->child_slots_cap = 4096;
    t->child_slots = calloc(t->child_slots_cap, sizeof *t->child_slots);
    if (t->strings == NULL || t->frame_slots == NULL || t->child_slots == NULL) {
        stk_free(t);
        return NULL;
    }
    return t;
}

void stk_free(stk_table_t *t)
{
    if (t == NULL)
        return;
    strtab_free(t->strings);
    free(t->frames);
    free(t->frame_slots);
    free(t->nodes);
    free(t->child_slots);
    free(t->threads);
    free(t->scratch);
    free(t);
}

const char *stk_intern(stk_table_t *t, const char *s)
{
    if (s == NULL)
        s = "";
    return strtab_intern(t->strings, s, strlen(s));
}

static uint64_t frame_hash(const char *fn, const char *file, int line, const char *op, int offset)
{
    return mix((uint64_t)(uintptr_t)fn * 31 + (uint64_t)(uintptr_t)file * 131 + (uint64_t)(unsigned)line +
               (uint64_t)(uintptr_t)op * 7 + ((uint64_t)(unsigned)offset << 32));
}

static int rehash_frames(stk_table_t *t)
{
    size_t ncap = t->frame_slots_cap * 2, i;
    uint32_t *ns = calloc(ncap, sizeof *ns);

    if (ns == NULL)
        return -1;
    for (i = 0; i < t->nframes; i++) {
        const stk_frame_t *f = &t->frames[i];
        size_t j = frame_hash(f->function, f->file, f->line, f->op, f->offset) & (ncap - 1);
        while (ns[j])
            j = (j + 1) & (ncap - 1);
        ns[j] = (uint32_t)i + 1;
    }
    free(t->frame_slots);
    t->frame_slots = ns;
    t->frame_slots_cap = ncap;
    return 0;
}

uint32_t stk_frame(stk_table_t *t, const char *function, const char *file, int line)
{
    return stk_frame_kind(t, function, file, line, 0);
}

/* The frame (function, file, line, kind, instruction), interned. */
static uint32_t frame_of(stk_table_t *t, const char *function, const char *file, int line, int native,
                         const char *op, int offset)
{
    const char *fn = stk_intern(t, function), *fl = stk_intern(t, file), *o = NULL;
    size_t j;

    if (fn == NULL || fl == NULL || (op != NULL && (o = stk_intern(t, op)) == NULL))
        return STK_NONE;
    if (o == NULL)
        offset = -1;
    for (j = frame_hash(fn, fl, line, o, offset) & (t->frame_slots_cap - 1); t->frame_slots[j];
         j = (j + 1) & (t->frame_slots_cap - 1)) {
        const stk_frame_t *f = &t->frames[t->frame_slots[j] - 1];
        if (f->function == fn && f->file == fl && f->line == line && f->native == (native != 0) &&
            f->op == o && f->offset == offset)
            return t->frame_slots[j] - 1;
    }
    if (t->nframes >= STK_NONE - 1 || remora_grow((void **)&t->frames, &t->cap_frames, t->nframes + 1, sizeof *t->frames))
        return STK_NONE;
    t->frames[t->nframes].function = fn;
    t->frames[t->nframes].file = fl;
    t->frames[t->nframes].line = line;
    t->frames[t->nframes].native = native != 0;
    t->frames[t->nframes].op = o;
    t->frames[t->nframes].offset = offset;
    t->frame_slots[j] = (uint32_t)++t->nframes;
    if (t->nframes * 4 > t->frame_slots_cap * 3 && rehash_frames(t))
        return STK_NONE;
    return (uint32_t)t->nframes - 1;
}

uint32_t stk_frame_kind(stk_table_t *t, const char *function, const char *file, int line,
                        int native)
{
    return frame_of(t, function, file, line, native, NULL, -1);
}

uint32_t stk_frame_op(stk_table_t *t, const char *function, const char *file, int line,
                      const char *op, int offset)
{
    return frame_of(t, function, file, line, 0, op, offset);
}

static uint32_t new_node(stk_table_t *t, uint32_t parent, uint32_t frame)
{
    stk_node_t *n;

    if (t->nnodes >= STK_NONE - 1 || remora_grow((void **)&t->nodes, &t->cap_nodes, t->nnodes + 1, sizeof *t->nodes))
        return STK_NONE;
    n = &t->nodes[t->nnodes];
    n->parent = parent;
    n->frame = frame;
    n->first_child = STK_NONE;
    n->next_sibling = STK_NONE;
    n->self = 0;
    if (parent != STK_NONE) {
        n->next_sibling = t->nodes[parent].first_child;
        t->nodes[parent].first_child = (uint32_t)t->nnodes;
    }
    return (uint32_t)t->nnodes++;
}

uint32_t stk_thread(stk_table_t *t, pid_t tid, const char *name)
{
    size_t i;
    stk_thread_t *th;

    for (i = 0; i < t->nthreads; i++)
        if (t->threads[i].tid == tid && (name == NULL || strcmp(t->threads[i].name, name) == 0))
            return (uint32_t)i;
    if (remora_grow((void **)&t->threads, &t->cap_threads, t->nthreads + 1, sizeof *t->threads))
        return STK_NONE;
    th = &t->threads[t->nthreads];
    th->tid = tid;
    th->name = stk_intern(t, name ? name : "");
    th->samples = 0;
    th->root = new_node(t, STK_NONE, STK_NONE);
    if (th->name == NULL || th->root == STK_NONE)
        return STK_NONE;
    return (uint32_t)t->nthreads++;
}

int stk_thread_rename(stk_table_t *t, uint32_t thread, const char *name)
{
    const char *n;

    if (thread >= t->nthreads)
        return -1;
    if ((n = stk_intern(t, name)) == NULL)
        return -1;
    t->threads[thread].name = n;
    return 0;
}

static uint64_t child_hash(uint32_t parent, uint32_t frame)
{
    return mix((uint64_t)parent << 32 | frame);
}

static int rehash_children(stk_table_t *t)
{
    size_t ncap = t->child_slots_cap * 2, i;
    uint32_t *ns = calloc(ncap, sizeof *ns);

    if (ns == NULL)
        return -1;
    for (i = 0; i < t->nnodes; i++) {
        size_t j;
        if (t->nodes[i].parent == STK_NONE)
            continue;
        j = child_hash(t->nodes[i].parent, t->nodes[i].frame) & (ncap - 1);
        while (ns[j])
            j = (j + 1) & (ncap - 1);
        ns[j] = (uint32_t)i + 1;
    }
    free(t->child_slots);
    t->child_slots = ns;
    t->child_slots_cap = ncap;
    return 0;
}

uint32_t stk_child(stk_table_t *t, uint32_t node, uint32_t frame)
{
    size_t j;
    uint32_t c;

    for (j = child_hash(node, frame) & (t->child_slots_cap - 1); t->child_slots[j];
         j = (j + 1) & (t->child_slots_cap - 1)) {
        const stk_node_t *n = &t->nodes[t->child_slots[j] - 1];
        if (n->parent == node && n->frame == frame)
            return t->child_slots[j] - 1;
    }
    c = new_node(t, node, frame);
    if (c == STK_NONE)
        return STK_NONE;
    t->child_slots[j] = c + 1;
    if (t->nnodes * 2 > t->child_slots_cap && rehash_children(t))
        return STK_NONE;
    return c;
}

void stk_add_at(stk_table_t *t, uint32_t thread, uint32_t node, uint64_t count)
{
    t->nodes[node].self += count;
    t->threads[thread].samples += count;
    t->total += count;
}

uint32_t stk_add(stk_table_t *t, uint32_t thread, const uint32_t *frames, size_t n, uint64_t count)
{
    uint32_t node;
    size_t i;

    if (thread >= t->nthreads)
        return STK_NONE;
    node = t->threads[thread].root;
    for (i = 0; i < n; i++) {
        node = stk_child(t, node, frames[i]);
        if (node == STK_NONE)
            return STK_NONE;
    }
    stk_add_at(t, thread, node, count);
    return node;
}

size_t stk_nthreads(const stk_table_t *t) { return t->nthreads; }
const stk_thread_t *stk_thread_at(const stk_table_t *t, size_t i) { return &t->threads[i]; }
size_t stk_nframes(const stk_table_t *t) { return t->nframes; }
const stk_frame_t *stk_frame_at(const stk_table_t *t, uint32_t i) { return &t->frames[i]; }
size_t stk_nnodes(const stk_table_t *t) { return t->nnodes; }
const stk_node_t *stk_node_at(const stk_table_t *t, uint32_t i) { return &t->nodes[i]; }
uint64_t stk_total_samples(const stk_table_t *t) { return t->total; }

size_t stk_memory(const stk_table_t *t)
{
    return sizeof *t + strtab_bytes(t->strings) + t->cap_frames * sizeof *t->frames +
           t->frame_slots_cap * sizeof *t->frame_slots + t->cap_nodes * sizeof *t->nodes +
           t->child_slots_cap * sizeof *t->child_slots + t->cap_threads * sizeof *t->threads +
           t->scratch_cap * sizeof *t->scratch;
}

int stk_foreach_stack(const stk_table_t *t, stk_visit_fn fn, void *ctx)
{
    stk_table_t *mt = (stk_table_t *)t;   /* the scratch path only */
    size_t i;

    for (i = 0; i < t->nthreads; i++) {
        const stk_thread_t *th = &t->threads[i];
        uint32_t node = t->nodes[th->root].first_child;
        size_t depth = 0;

        if (t->nodes[th->root].self)
            fn(ctx, th, NULL, 0, t->nodes[th->root].self);
        /* iterative depth-first walk; scratch[d] holds the frame at depth d */
        while (node != STK_NONE) {
            const stk_node_t *n = &t->nodes[node];
            if (remora_grow((void **)&mt->scratch, &mt->scratch_cap, depth + 1, sizeof *mt->scratch))
                return REMORA_ENOMEM;
            mt->scratch[depth] = n->frame;
            if (n->self)
                fn(ctx, th, mt->scratch, depth + 1, n->self);
            if (n->first_child != STK_NONE) {
                node = n->first_child;
                depth++;
                continue;
            }
            /* climb until a sibling exists */
            while (node != STK_NONE && t->nodes[node].next_sibling == STK_NONE) {
                node = t->nodes[node].parent;
                if (node == th->root) {
                    node = STK_NONE;
                    break;
                }
                depth--;
            }
            if (node != STK_NONE)
                node = t->nodes[node].next_sibling;
        }
    }
    return REMORA_OK;
}
