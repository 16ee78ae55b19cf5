/* kern/remora.bpf.c — the in-kernel engine's BPF programs (kern.h): a cpu-clock perf
 * program that walks the interrupted thread's Python frames, per its process's layout,
 * into the ring buffer; and a sched_switch program that keeps the thread-state table.
 * Hash maps are only looked up here (user space fills them); writes go to array maps,
 * per-CPU arrays and the ring buffer only.
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "kern_bpf.h"

/* bpf_probe_read_user is for GPL-compatible programs only: the kernel asks for this. */
char LICENSE[] SEC("license") = "GPL";

/* The two fields of the kernel's task_struct read here, relocated by CO-RE. */
struct task_struct {
    int pid;
    int tgid;
} __attribute__((preserve_access_index));

#if defined(__TARGET_ARCH_x86)
/* The registers the kernel keeps of a task's user mode (x86_64), relocated by CO-RE. */
struct pt_regs {
    unsigned long r15, r14, r13, r12, bp, bx, r11, r10, r9, r8, ax, cx, dx, si, di, orig_ax,
                  ip, cs, flags, sp, ss;
} __attribute__((preserve_access_index));
#endif

/* target process (tgid) -> its slot in layouts[] */
struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, KERN_MAX_PROCS);
    __type(key, __u32);
    __type(value, __u32);
} procs SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, KERN_MAX_PROCS);
    __type(key, __u32);
    __type(value, kern_layout_t);
} layouts SEC(".maps");

/* (pid, tid) -> the thread state's address in the target */
struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, KERN_THREADS);
    __type(key, struct kern_thread_key);
    __type(value, __u64);
} threads SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(map_flags, BPF_F_MMAPABLE);
    __uint(max_entries, KERN_TS_SLOTS);
    __type(key, __u32);
    __type(value, struct kern_ts_ent);
} tstates SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(map_flags, BPF_F_MMAPABLE);
    __uint(max_entries, KERN_MAX_CPUS);
    __type(key, __u32);
    __type(value, struct kern_walking);
} walking SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct kern_counts);
} counts SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct kern_scratch);
} scratch SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_RINGBUF);
    __uint(max_entries, KERN_RING_BYTES);
} ring SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_RINGBUF);
    __uint(max_entries, KERN_SWRING_BYTES);
} swring SEC(".maps");

/* code object -> the fingerprint user space named it with (user space fills it; an LRU
 * map: its own inserts push the oldest out) */
struct {
    __uint(type, BPF_MAP_TYPE_LRU_HASH);
    __uint(max_entries, KERN_KNOWN);
    __type(key, __u64);
    __type(value, __u64);
} known SEC(".maps");

#define barrier() asm volatile("" ::: "memory")

/* ---- the thread-state table ----------------------------------------------------------- */

static __always_inline void ts_switch(struct task_struct *t, int in, __u64 now, int runnable, int by_self)
{
    __u32 tgid = (__u32)BPF_CORE_READ(t, tgid), tid = (__u32)BPF_CORE_READ(t, pid), idx;
    struct kern_ts_ent *e;

    if (bpf_map_lookup_elem(&procs, &tgid) == NULL)
        return;
    idx = tid & (KERN_TS_SLOTS - 1);
    e = bpf_map_lookup_elem(&tstates, &idx);
    if (e == NULL)
        return;
    e->seq++;                       /* odd: being written */
    barrier();
    if (e->tid != tid) {            /* the slot becomes this thread's */
        e->tid = tid;
        e->on_cpu = 0;
        e->runnable = 0;
        e->run_ns = 0;
        e->since_ns = 0;
        e->switches = 0;
        e->tick_cpu = 0;
        e->walk_ns = 0;
    }
    if (in) {
        e->on_cpu = 1;
        e->runnable = 0;
    } else {
        if (e->on_cpu && e->since_ns != 0 && now > e->since_ns)
            e->run_ns += now - e->since_ns;
        e->on_cpu = 0;
        e->runnable = runnable;
    }
    e->by_self = !in && by_self;
    e->since_ns = now;
    e->cpu = bpf_get_smp_processor_id();
    e->switches++;
    barrier();
    e->seq++;                       /* even: done */
}

/* The tick's thread is on a CPU now: a thread that has run since before the engine was
 * attached has had no switch yet, and its slot would stay unknown (a /proc read) until it
 * had one. Only a slot that is not already this thread's and on a CPU is written. */
static __always_inline void ts_running(__u32 tid, __u64 now)
{
    __u32 idx = tid & (KERN_TS_SLOTS - 1);
    struct kern_ts_ent *e = bpf_map_lookup_elem(&tstates, &idx);

    if (e == NULL)
        return;
    if (e->tid == tid) {
        /* a tick came: its CPU time then, against which user space sees its ticks keep up
         * (kernel.c: a CPU held up has none) */
        e->tick_cpu = e->run_ns + (e->on_cpu && now > e->since_ns ? now - e->since_ns : 0);
        if (e->on_cpu)
            return;
    }
    e->seq++;
    barrier();
    if (e->tid != tid) {
        e->tid = tid;
        e->run_ns = 0;
        e->switches = 1;            /* seen: user space takes a slot with none as unknown */
        e->tick_cpu = 0;
        e->walk_ns = 0;
    }
    e->on_cpu = 1;
    e->runnable = 0;
    e->since_ns = now;
    e->cpu = bpf_get_smp_processor_id();
    barrier();
    e->seq++;
}

/* ---- the frame walker ----------------------------------------------------------------- */

struct walk {
    __u64 cur;                      /* the next frame to read (0: none) */
    __u32 n;                        /* frames written */
    __u32 flags;                    /* KERN_S_* */
    __u32 slot;                     /* the process's layouts[] index */
    __u32 nseen;                    /* code objects in the scratch's seen_* */
};

/* A frame's field at win[off], off the frame's place in the window plus the field's
 * offset: the frame lies in the window (win_frame()) and the field in the frame
 * (kern_layout_ok()), so off + 8 <= KERN_WIN; the mask, with 8 bytes of slack past
 * KERN_WIN, shows the bound to the verifier without a branch (a branch per field made
 * the walk's states too many to verify) */
static __always_inline __u64 fr_u64(const struct kern_scratch *s, __u32 off)
{
    return *(const __u64 *)(s->win + (off & (KERN_WIN - 1)));
}

static __always_inline __u8 fr_u8(const struct kern_scratch *s, __u32 off)
{
    return s->win[off & (KERN_WIN - 1)];
}

/* The frame at cur, sz bytes, into the window unless it is there already. 3.11+: from
 * the start of the frame's page (KERN_WIN bytes at most) through its end, the frames
 * below it in its page (its callers, most of the time: a chunk of the data stack grows
 * up) with it: one read for many frames. Never below that page: a read that meets a page
 * not mapped (under a chunk's start) fails, and its fault costs more than a read.
 * 3.9/3.10: the frame object alone (its callers are elsewhere). 0, or -1: not read. */
static __always_inline int win_frame(struct kern_scratch *s, const kern_layout_t *L,
                                     __u64 cur, __u32 sz)
{
    __u64 hi = cur + sz, lo, len;

    if (cur >= s->lo && cur - s->lo <= (__u64)s->have && s->have - (cur - s->lo) >= sz)
        return 0;
    s->have = 0;
    if (hi < cur)
        return -1;
    lo = L->frames_kind != KERN_FRAMES_OBJECTS ? cur & ~4095ull : cur;
    if (hi - lo > KERN_WIN)
        lo = hi - KERN_WIN;
    len = hi - lo;
    if (len == 0 || len > KERN_WIN)
        return -1;
    barrier_var(len);               /* the bound checked is the one the call is given */
    if (bpf_probe_read_user(s->win, len, (const void *)lo) != 0)
        return -1;
    s->lo = lo;
    s->have = (__u32)len;
    return 0;
}

/* One str's words of the fingerprint at w[at..]: its length and hash, then the first
 * min(length, KERN_FP_STR_DATA) bytes at str_data, the rest zero. One read from the
 * length through KERN_FP_STR_DATA bytes of characters (kern_layout_ok checks they are
 * KERN_STR_BUF apart at most): past a short str's end it reads its neighbours, masked out
 * here (past the end of a mapping the read fails: the tick goes to user space). 0, or
 * -1 on a failed read. */
static __always_inline int fp_str(struct kern_scratch *s, const kern_layout_t *L, __u64 code,
                                  __u32 off, __u32 at)
{
    __u64 str, n, *b = s->sb;
    __u32 d = (L->str_data - (L->str_hash - 8)) / 8, j;

    if (at > KERN_FP_MAX - KERN_FP_STR_WORDS || d > KERN_STR_BUF / 8 - KERN_FP_STR_DATA / 8)
        return -1;
    /* the str's pointer: in the span just read, or read now */
    if (off >= L->fp_off && off + 8 <= L->fp_off + L->fp_len && (off - L->fp_off) % 8 == 0)
        str = s->w[((off - L->fp_off) / 8) & (KERN_FP_WORDS - 1)];
    else if (bpf_probe_read_user(&str, 8, (const void *)(code + off)) != 0)
        return -1;
    if (bpf_probe_read_user(b, KERN_STR_BUF, (const void *)(str + L->str_hash - 8)) != 0)
        return -1;
    n = b[0];                       /* the length, in code points: the object holds as many bytes */
    s->w[at & (KERN_FP_WBUF - 1)] = n;
    s->w[(at + 1) & (KERN_FP_WBUF - 1)] = b[1];
    for (j = 0; j < KERN_FP_STR_DATA / 8; j++) {
        __u64 v = b[(d + j) & (KERN_STR_BUF / 8 - 1)], keep = n > 8 * j ? n - 8 * j : 0;
        if (keep < 8)
            v &= keep ? ~0ull >> (64 - 8 * keep) : 0;     /* little-endian: the low bytes */
        s->w[(at + 2 + j) & (KERN_FP_WBUF - 1)] = v;
    }
    return 0;
}

/* The fingerprint of the code object at 'code' (kern.h's kern_fp_mix); 0 on a failed read. */
static __always_inline __u64 fp_of(struct kern_scratch *s, const kern_layout_t *L, __u64 code)
{
    __u32 len = L->fp_len, nw, i;

    for (i = 0; i < KERN_FP_MAX; i++)
        s->w[i] = 0;
    if (len > 8 * KERN_FP_WORDS)
        return 0;
    if (len != 0 && bpf_probe_read_user(s->w, len, (const void *)(code + L->fp_off)) != 0)
        return 0;
    nw = (len + 7) / 8;
    if (L->str_hash != 0) {
        if (nw > KERN_FP_WORDS || L->str_hash < 8)
            return 0;
        if (fp_str(s, L, code, L->co_name, nw) != 0 ||
            fp_str(s, L, code, L->co_filename, nw + KERN_FP_STR_WORDS) != 0)
            return 0;
        nw += 2 * KERN_FP_STR_WORDS;
    }
    {
        __u64 h = 0x9e3779b97f4a7c15ull;    /* kern_fp_mix, bounded for the verifier */

        for (i = 0; i < KERN_FP_MAX; i++) {
            if (i >= nw)
                break;
            h ^= s->w[i];
            h *= 0xbf58476d1ce4e5b9ull;
            h ^= h >> 31;
        }
        return h | 1;
    }
}

static __always_inline int read_u64(__u64 *out, __u64 addr)
{
    return bpf_probe_read_user(out, 8, (const void *)addr);
}

/* A str object's image from its start into dst: KERN_NAME_IMG bytes, or up to the end of
 * its page when the read would cross into one not mapped. The bytes read, 0 on failure. */
static __always_inline __u32 name_img(unsigned char *dst, __u64 addr)
{
    __u32 len;

    if (addr == 0)
        return 0;
    if (bpf_probe_read_user(dst, KERN_NAME_IMG, (const void *)addr) == 0)
        return KERN_NAME_IMG;
    len = 4096 - (__u32)(addr & 4095);
    if (len == 0 || len >= KERN_NAME_IMG)
        return 0;
    barrier_var(len);
    if (bpf_probe_read_user(dst, len & (KERN_NAME_IMG - 1), (const void *)addr) != 0)
        return 0;
    return len & (KERN_NAME_IMG - 1);
}

/* The names of the code object at 'code', the k-th named of this walk, for frame i. */
static __always_inline void name_frame(struct kern_scratch *s, const kern_layout_t *L, __u64 code,
                                       __u32 i, __u32 k)
{
    kern_named_t *nm = &s->named[k & (KERN_NAMED - 1)];
    __u64 p;

    nm->frame = i;
    nm->firstlineno = 0;
    nm->name_len = 0;
    nm->file_len = 0;
    bpf_probe_read_user(&nm->firstlineno, 4, (const void *)(code + L->nm_firstlineno));
    if (read_u64(&p, code + L->nm_name) == 0)
        nm->name_len = name_img(nm->name, p);
    if (read_u64(&p, code + L->nm_file) == 0)
        nm->file_len = name_img(nm->file, p);
}

/* The i-th named frame of the walk: its code object's names (bpf_loop's callback). */
static long name_step(__u32 i, void *ctx)
{
    __u32 zero = 0, slot = *(__u32 *)ctx;
    struct kern_scratch *s = bpf_map_lookup_elem(&scratch, &zero);
    kern_layout_t *L = bpf_map_lookup_elem(&layouts, &slot);

    __u32 k = i;

    if (s == NULL || L == NULL || i >= KERN_NAMED)
        return 1;
    barrier_var(k);                 /* the mask kept for the verifier */
    k &= KERN_NAMED - 1;
    name_frame(s, L, s->named_code[k], s->named[k].frame, k);
    return 0;
}

/* --async: the thread's running task at the tick into s->task (s->has_task 1), read in a
 * loop callback of its own (its branches verified once, apart from the tick's). 3.14+: the
 * thread state's asyncio_running_task; 3.9-3.13: the newest entry of _current_tasks (the
 * dict's keys header, then one entry: a task entering appends its loop's entry, one
 * leaving deletes it, so the newest holds the running task of the last loop entered; user
 * space takes it only when its coroutine's frame is one the tick read). Then its coroutine,
 * that coroutine's frame and its name's image. */
static long task_step(__u32 i, void *ctx)
{
    __u32 zero = 0, slot = *(__u32 *)ctx;
    struct kern_scratch *s = bpf_map_lookup_elem(&scratch, &zero);
    kern_layout_t *L = bpf_map_lookup_elem(&layouts, &slot);
    __u64 task = 0, keys, hdr[5], ent[3], n, ib, name;
    kern_task_t *t;

    if (s == NULL || L == NULL)
        return 1;
    t = &s->task;
    if (L->rt_kind == KERN_RT_TSTATE) {
        if (s->rec.tstate == 0 || read_u64(&task, s->rec.tstate + L->rt_ts) != 0)
            return 1;
    } else if (L->rt_kind == KERN_RT_DICT) {
        if (L->rt_dict == 0 || read_u64(&keys, L->rt_dict + L->rt_ma_keys) != 0 || keys == 0 ||
            bpf_probe_read_user(hdr, sizeof hdr, (const void *)keys) != 0)
            return 1;
        n = L->rt_dk_nentries == 32 ? hdr[4] : hdr[3];   /* (kern_layout_ok: 24 or 32) */
        if (L->rt_dk_sized) {
            __u64 size = hdr[1];
            ib = size <= 0xff ? size : size <= 0xffff ? 2 * size : size <= 0xffffffffull ? 4 * size : 8 * size;
        } else {
            ib = 1ull << ((hdr[1] >> 8) & 63);
        }
        if (n == 0 || n > (1u << 24) || ib > (1ull << 32) ||
            bpf_probe_read_user(ent, sizeof ent, (const void *)(keys + L->rt_dk_hdr + ib + (n - 1) * 24)) != 0)
            return 1;
        task = ent[2];
    } else {
        return 1;
    }
    if (task == 0 || task % 8 != 0)
        return 1;
    t->task = task;
    t->coro = t->frame = 0;
    t->name_len = 0;
    if (read_u64(&t->coro, task + L->rt_task_coro) != 0 || t->coro == 0 || t->coro % 8 != 0 ||
        read_u64(&name, task + L->rt_task_name) != 0)
        return 1;
    if (L->rt_gen_frame != 0) {
        if (read_u64(&t->frame, t->coro + L->rt_gen_frame) != 0)
            return 1;
    } else {
        t->frame = t->coro + L->rt_gen_iframe;
    }
    t->aw = 0;
    t->aw_is_set = 0;
    if (L->rt_task_aw != 0 &&
        (read_u64(&t->aw, task + L->rt_task_aw) != 0 ||
         bpf_probe_read_user(&t->aw_is_set, 1, (const void *)(task + L->rt_task_aw_is_set)) != 0))
        t->aw = 0;
    t->name_len = name_img(t->name, name);
    s->has_task = 1;
    return 1;
}

/* One frame: read its header, fill frames[n], move to the previous one. 1 ends the loop. */
static long walk_step(__u32 i, void *ctx)
{
    struct walk *w = ctx;
    struct kern_scratch *s;
    kern_layout_t *L;
    kern_frame_t *f;
    __u32 zero = 0, slot = w->slot, n = w->n, sz, flags = 0, at;
    __u64 code, instr, prev;

    if (w->cur == 0)
        return 1;
    if (n >= KERN_MAX_FRAMES) {
        w->flags |= KERN_S_CUT;
        return 1;
    }
    s = bpf_map_lookup_elem(&scratch, &zero);
    L = bpf_map_lookup_elem(&layouts, &slot);
    if (s == NULL || L == NULL)
        return 1;
    sz = L->fr_size;
    if (sz == 0 || sz > KERN_FRAME_BUF)
        goto fault;
    if (win_frame(s, L, w->cur, sz) != 0)
        goto fault;
    at = (__u32)(w->cur - s->lo);   /* < KERN_WIN: the frame is in the window */
    code = fr_u64(s, at + L->fr_code);
    prev = fr_u64(s, at + L->fr_previous);
    if (L->frames_kind == KERN_FRAMES_OBJECTS) {
        instr = *(const __u32 *)(s->win + ((at + L->fr_instr) & (KERN_WIN - 1)));
        if (L->fr_gen != 0 && fr_u64(s, at + L->fr_gen) != 0)
            flags |= KERN_F_GEN;
    } else {
        instr = fr_u64(s, at + L->fr_instr);
        if (L->tagged_executable)
            code &= ~3ull;
        if (L->owner_shim != 0 && fr_u8(s, at + L->fr_owner) >= L->owner_shim)
            flags |= KERN_F_SHIM;
        if (L->fr_funcobj != 0 && L->none_addr != 0 &&
            (fr_u64(s, at + L->fr_funcobj) & ~7ull) == L->none_addr)
            flags |= KERN_F_SHIM;
        if (L->fr_is_entry != 0 && fr_u8(s, at + L->fr_is_entry) != 0)
            flags |= KERN_F_ENTRY;
        if (L->owner_gen != 0 && (__u32)fr_u8(s, at + L->fr_owner) + 1 == L->owner_gen)
            flags |= KERN_F_GEN;
    }
    f = &s->frames[n];
    f->addr = w->cur;
    f->code = code;
    f->instr = instr;
    f->flags = flags;
    f->pad = 0;
    f->fp = 0;
    if (!(flags & KERN_F_SHIM) && !(w->flags & KERN_S_GEN)) {
        __u32 k;

        /* a code object met before in this walk (a recursion): its fingerprint again */
        for (k = 0; k < KERN_SEEN && k < w->nseen; k++)
            if (s->seen_code[k] == code) {
                f->fp = s->seen_fp[k];
                break;
            }
        if (f->fp == 0) {
            f->fp = fp_of(s, L, code);
            if (f->fp == 0)
                goto fault; /* not sent: a frame goes out with its fingerprint or not at all */
            k = w->nseen % KERN_SEEN;
            s->seen_code[k & (KERN_SEEN - 1)] = code;
            s->seen_fp[k & (KERN_SEEN - 1)] = f->fp;
            w->nseen++;
            /* a code object user space has not named with this fingerprint: its names go
             * with the frame, in case it is freed before user space reads it */
            /* (the count lives in the scratch, not in the walk's context: a value the
             * verifier cannot know splits none of its states) */
            k = s->nnamed;
            if (L->nm_on && s->naming && k < KERN_NAMED) {
                __u64 *kv = bpf_map_lookup_elem(&known, &code);
                if (kv == NULL || *kv != f->fp) {
                    /* its names read after the walk (name_step): kept out of this
                     * callback, whose every branch the verifier walks per frame */
                    s->named[k & (KERN_NAMED - 1)].frame = n;
                    s->named_code[k & (KERN_NAMED - 1)] = code;
                    s->nnamed = k + 1;
                }
            }
        }
    }
    w->n = n + 1;
    w->cur = prev;
    return 0;
fault:
    w->flags |= KERN_S_FAULT;
    return 1;
}


/* The interpreter's GC and the GIL's state for the thread at tstate: KERN_S_GC and
 * KERN_S_GIL, and (3.15) KERN_S_GIL_REQ for a thread not holding it that waits for it;
 * nothing when a read fails. */
static __always_inline __u32 interp_flags(const kern_layout_t *L, __u64 tstate)
{
    __u64 interp = L->interp, base, holder = 0, pair[2];
    __u32 collecting = 0, locked = 0, requested = 0, out = 0, lo, dl;
    int got = 0;

    /* (every probe read costs ~0.1 us a tick: the interpreter's address from user space
     * where the process has one, the GIL's two fields in one read) */
    if (L->ts_interp == 0 || (interp == 0 && read_u64(&interp, tstate + L->ts_interp) != 0) ||
        interp == 0)
        return 0;
    if (bpf_probe_read_user(&collecting, 4, (const void *)(interp + L->is_gc_collecting)) == 0 &&
        collecting != 0)
        out |= KERN_S_GC;
    base = L->runtime;
    if (L->gil_in_interp && read_u64(&base, interp + L->is_gil_ptr) != 0)
        return out;
    if (base != 0 && L->gil_pair) {
        lo = L->gil_holder < L->gil_locked ? L->gil_holder : L->gil_locked;
        dl = L->gil_locked - lo;    /* 0, 4, 8 or 12 (kernel.c: unw_kern_layout) */
        if (bpf_probe_read_user(pair, sizeof pair, (const void *)(base + lo)) == 0) {
            holder = L->gil_holder == lo ? pair[0] : pair[1];
            locked = (__u32)((dl >= 8 ? pair[1] : pair[0]) >> (dl % 8 == 4 ? 32 : 0));
            got = 1;
        }
    } else if (base != 0 && bpf_probe_read_user(&locked, 4, (const void *)(base + L->gil_locked)) == 0 &&
               read_u64(&holder, base + L->gil_holder) == 0) {
        got = 1;
    }
    if (got && locked != 0 && holder == tstate)
        out |= KERN_S_GIL;
    /* as the user engine reads it: the thread's own flag, only while it does not hold it */
    if (!(out & KERN_S_GIL) && L->ts_gil_requested != 0 &&
        bpf_probe_read_user(&requested, 4, (const void *)(tstate + L->ts_gil_requested)) == 0 &&
        requested != 0)
        out |= KERN_S_GIL_REQ;
    return out;
}

/* The exception-stack walk's state (exc_step's context). */
struct exc_walk {
    __u64 item;                     /* the next _PyErr_StackItem (0: the chain's end) */
    __u32 slot;
    __u32 flags;                    /* KERN_S_EXC or KERN_S_EXC_UNKNOWN once decided */
};

/* One item of the exception stack: an exception in it (neither NULL nor None) ends the
 * walk with KERN_S_EXC; a failed read with KERN_S_EXC_UNKNOWN. 1 ends the loop. */
static long exc_step(__u32 i, void *ctx)
{
    struct exc_walk *e = ctx;
    kern_layout_t *L;
    __u64 exc, prev;
    __u32 slot = e->slot;

    if (e->item == 0)
        return 1;
    L = bpf_map_lookup_elem(&layouts, &slot);
    if (L == NULL || e->item % 8 != 0 || read_u64(&exc, e->item + L->ei_exc) != 0 ||
        read_u64(&prev, e->item + L->ei_previous) != 0) {
        e->flags = KERN_S_EXC_UNKNOWN;
        return 1;
    }
    if (exc != 0 && exc != L->exc_none) {
        e->flags = KERN_S_EXC;
        return 1;
    }
    e->item = prev;
    return 0;
}

/* Whether the thread at tstate is handling an exception at the tick, as sys.exc_info()
 * decides it (the user engine's unw_exc_state): KERN_S_EXC, KERN_S_EXC_UNKNOWN (a read
 * failed, or more than KERN_EXC_ITEMS items), or 0. */
static __always_inline __u32 exc_flags(const kern_layout_t *L, __u32 slot, __u64 tstate)
{
    struct exc_walk e = { .slot = slot };

    if (read_u64(&e.item, tstate + L->ts_exc_info) != 0)
        return KERN_S_EXC_UNKNOWN;
    bpf_loop(KERN_EXC_ITEMS, exc_step, &e, 0);
    if (e.flags == 0 && e.item != 0)
        return KERN_S_EXC_UNKNOWN;  /* longer than the bound */
    return e.flags;
}

/* The frames of the thread at tstate, innermost first, into s->frames: w->n of them, and
 * KERN_S_FAULT or KERN_S_CUT in w->flags when the walk could not end at the root. */
static __always_inline void walk_frames(struct kern_scratch *s, const kern_layout_t *L, __u32 slot,
                                        __u64 tstate, struct walk *w)
{
    w->slot = slot;
    s->nnamed = 0;
    if (read_u64(&w->cur, tstate + L->ts_frame) != 0)
        w->flags |= KERN_S_FAULT;
    else if (L->frames_kind == KERN_FRAMES_CFRAME && w->cur != 0 &&
             read_u64(&w->cur, w->cur + L->cframe_current_frame) != 0)
        w->flags |= KERN_S_FAULT;
    s->have = 0;                    /* the window is this walk's alone */
    if (!(w->flags & KERN_S_FAULT))
        bpf_loop(KERN_MAX_FRAMES + 1, walk_step, w, 0);
}

/* --native: the interrupted thread's user registers and its stack from the start of the
 * stack pointer's page upward, L->native_stack bytes at most, a page at a time (a page
 * that cannot be read ends the copy: only what was read goes out), into a record of its
 * own put in the ring before the tick's (tick: the tick's header, its time final). The
 * user registers whatever mode the tick interrupted: the task's saved user context (in a
 * system call, as it entered it), never the interrupt's kernel registers. The record is
 * reserved at its full size (a reservation's size is a constant) and read into in place:
 * no copy through the scratch. */
static __always_inline void native_copy(void *rb, const kern_layout_t *L, struct kern_counts *c,
                                        const struct kern_rec *tick)
{
#if defined(__TARGET_ARCH_x86)
    struct kern_nat_rec *r;
    struct pt_regs *regs;
    __u64 base;
    __u32 i, lim = L->native_stack;

    r = bpf_ringbuf_reserve(rb, sizeof *r, 0);
    if (r == NULL) {
        c->native_dropped++;
        return;
    }
    regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
    r->rec.pid = tick->pid;
    r->rec.tid = tick->tid;
    r->rec.t_ns = tick->t_ns;
    r->rec.tstate = tick->tstate;
    r->rec.gen = 0;
    r->rec.flags = KERN_S_NATIVE;
    r->rec.nframes = 0;
    /* DWARF's order (kern.h) */
    r->regs[0] = BPF_CORE_READ(regs, ax);
    r->regs[1] = BPF_CORE_READ(regs, dx);
    r->regs[2] = BPF_CORE_READ(regs, cx);
    r->regs[3] = BPF_CORE_READ(regs, bx);
    r->regs[4] = BPF_CORE_READ(regs, si);
    r->regs[5] = BPF_CORE_READ(regs, di);
    r->regs[6] = BPF_CORE_READ(regs, bp);
    r->regs[7] = BPF_CORE_READ(regs, sp);
    r->regs[8] = BPF_CORE_READ(regs, r8);
    r->regs[9] = BPF_CORE_READ(regs, r9);
    r->regs[10] = BPF_CORE_READ(regs, r10);
    r->regs[11] = BPF_CORE_READ(regs, r11);
    r->regs[12] = BPF_CORE_READ(regs, r12);
    r->regs[13] = BPF_CORE_READ(regs, r13);
    r->regs[14] = BPF_CORE_READ(regs, r14);
    r->regs[15] = BPF_CORE_READ(regs, r15);
    r->regs[16] = BPF_CORE_READ(regs, ip);
    /* whole pages: every read a constant size at a constant offset (the verifier's bound
     * without masks), the first from below the stack pointer (dead stack, never unwound) */
    base = r->regs[7] & ~4095ull;
    r->lo = base;
    r->len = 0;
    r->ts_frame = 0;
    r->has_ts_frame = tick->tstate != 0 &&
        bpf_probe_read_user(&r->ts_frame, 8, (const void *)(tick->tstate + L->ts_frame)) == 0;
    for (i = 0; i < KERN_NATIVE_MAX / 4096; i++) {
        if ((i + 1) * 4096 > lim)
            break;
        if (bpf_probe_read_user(r->stack + i * 4096, 4096, (const void *)(base + i * 4096)) != 0)
            break;
        r->len = (i + 1) * 4096;
    }
    bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
#else
    (void)rb, (void)L, (void)c, (void)tick;
#endif
}

SEC("perf_event")
int kern_tick(void *ctx)
{
    __u64 id = bpf_get_current_pid_tgid(), *tsp, size;
    __u32 tgid = (__u32)(id >> 32), zero = 0, slot, n, cpu, nn;
    struct kern_thread_key key = { .pid = (__u32)(id >> 32), .tid = (__u32)id };
    struct walk w = { 0 };
    struct kern_counts *c;
    struct kern_scratch *s;
    struct kern_walking *busy;
    kern_layout_t *L;
    __u32 *slotp;

    slotp = bpf_map_lookup_elem(&procs, &tgid);
    if (slotp == NULL)
        return 0;
    slot = *slotp;
    /* odd until the record is in the ring: a round that begins meanwhile waits for it (an
     * atomic add: a full barrier, the odd count seen before the tick's time is taken) */
    c = bpf_map_lookup_elem(&counts, &zero);
    s = bpf_map_lookup_elem(&scratch, &zero);
    L = bpf_map_lookup_elem(&layouts, &slot);
    if (c == NULL || s == NULL || L == NULL)
        return 0;
    cpu = bpf_get_smp_processor_id();
    busy = bpf_map_lookup_elem(&walking, &cpu);
    if (busy != NULL)
        __sync_fetch_and_add(&busy->seq, 1);
    c->ticks++;
    s->rec.pid = key.pid;
    s->rec.tid = key.tid;
    s->rec.t_ns = bpf_ktime_get_ns();
    s->rec.tstate = 0;
    s->rec.gen = 0;
    ts_running(key.tid, s->rec.t_ns);
    tsp = bpf_map_lookup_elem(&threads, &key);
    if (tsp == NULL) {
        w.flags = KERN_S_NOSTATE;
    } else {
        s->rec.tstate = *tsp;
        w.flags |= interp_flags(L, *tsp);
        if (L->exc_on)
            w.flags |= exc_flags(L, slot, *tsp);
        /* no code object made (freed) since user space last proved its cache: the frames'
         * code objects are the ones it knows at their addresses, no fingerprint needed */
        s->rec.gen = 0;
        if (L->gen_addr != 0 &&
            bpf_probe_read_user(&s->rec.gen, L->gen_size == 4 ? 4 : 8, (const void *)L->gen_addr) == 0 &&
            s->rec.gen == L->gen_hint)
            w.flags |= KERN_S_GEN;
        s->naming = 1;
        walk_frames(s, L, slot, *tsp, &w);
        s->has_task = 0;
        if (L->rt_kind != KERN_RT_NONE && !(w.flags & KERN_S_FAULT)) {
            bpf_loop(1, task_step, &slot, 0);
            if (s->has_task)
                w.flags |= KERN_S_TASK;
        }
    }
    n = w.n;
    if (n > KERN_MAX_FRAMES)
        n = KERN_MAX_FRAMES;
    s->rec.flags = w.flags;
    s->rec.nframes = n;
    /* the thread has not moved since the interrupt: any instant of the walk is its
     * sample's; the last one, so that user space never drains the ring between the time
     * and the record (a round begun in between would write its samples first) */
    s->rec.t_ns = bpf_ktime_get_ns();
    if (w.flags & KERN_S_NOSTATE)
        c->nostate++;
    if (w.flags & KERN_S_FAULT)
        c->faults++;
    /* the named frames right after the last frame (the scratch's tail holds them all) */
    nn = s->nnamed;
    if (nn > KERN_NAMED)
        nn = KERN_NAMED;
    if (nn > 0)
        bpf_loop(nn, name_step, &slot, 0);
    if (nn > 0 && bpf_probe_read_kernel((char *)s->frames + (__u64)n * sizeof(kern_frame_t),
                                        sizeof s->named, s->named) != 0)
        nn = 0;
    s->rec.nnamed = nn;
    size = sizeof(struct kern_rec) + (__u64)n * sizeof(kern_frame_t) + (__u64)nn * sizeof(kern_named_t);
    if ((w.flags & KERN_S_TASK) &&
        bpf_probe_read_kernel((char *)s->frames + (__u64)n * sizeof(kern_frame_t) + (__u64)nn * sizeof(kern_named_t),
                              sizeof s->task, &s->task) == 0)
        size += sizeof(kern_task_t);
    else
        w.flags &= ~KERN_S_TASK;
    s->rec.flags = w.flags;
    /* a tick named from its frames gets its user context, just before it (one CPU's two
     * records keep their order in the ring) */
    if (L->native_stack != 0 && !(w.flags & (KERN_S_FAULT | KERN_S_NOSTATE | KERN_S_CUT)))
        native_copy(&ring, L, c, &s->rec);
    /* no wake-up: kern_poll consumes without waiting on the ring */
    if (bpf_ringbuf_output(&ring, s, size, BPF_RB_NO_WAKEUP) != 0)
        c->dropped++;
    else
        c->samples++;
    if (busy != NULL)
        __sync_fetch_and_add(&busy->seq, 1);
    return 0;
}

/* ---- the switch-out walk -------------------------------------------------------------- */

/* Is the thread prev leaving a CPU due a walk? A target thread, switch walks on, not
 * preempted by remora itself (by_self: its wake-up for a round, which leaves that thread to
 * its ticks; with --native walked too); preempted: always (a preempted thread goes on at any moment, and a read of it
 * can begin to move under the read); going to sleep: once each switch_gap_ns of its own at
 * most (a thread that blocks thousands of times a second would pay a walk each: a round
 * reads it asleep instead). Its process's layout slot in *slot. */
static __always_inline int switch_due(struct task_struct *prev, int preempted, int by_self, __u64 now,
                                      __u32 *slot)
{
    __u32 tgid = (__u32)BPF_CORE_READ(prev, tgid), tid = (__u32)BPF_CORE_READ(prev, pid);
    __u32 idx = tid & (KERN_TS_SLOTS - 1), *slotp;
    struct kern_ts_ent *e;
    kern_layout_t *L;

    slotp = bpf_map_lookup_elem(&procs, &tgid);
    if (slotp == NULL)
        return 0;
    *slot = *slotp;
    L = bpf_map_lookup_elem(&layouts, slotp);
    e = bpf_map_lookup_elem(&tstates, &idx);
    if (L == NULL || L->switch_gap_ns == 0 || e == NULL)
        return 0;
    /* --native: walked all the same, its C stack copied (a round that reads it while
     * another task keeps it waiting has no copy of its own to unwind: "<no native stack>",
     * a twentieth of a numpy loop's samples on a loaded machine) */
    if (by_self && L->native_stack == 0)
        return 0;
    return preempted || e->tid != tid || e->walk_ns == 0 || now - e->walk_ns >= L->switch_gap_ns;
}

/* Is next remora's own process, as prev's process's layout names it? */
static __always_inline int switch_to_self(struct task_struct *prev, struct task_struct *next)
{
    __u32 tgid = (__u32)BPF_CORE_READ(prev, tgid), *slotp;
    kern_layout_t *L;

    slotp = bpf_map_lookup_elem(&procs, &tgid);
    if (slotp == NULL)
        return 0;
    L = bpf_map_lookup_elem(&layouts, slotp);
    return L != NULL && L->self_tgid != 0 && (__u32)BPF_CORE_READ(next, tgid) == L->self_tgid;
}

/* The stack of a target thread leaving a CPU (t is the current task: its memory is the
 * one read), into the switch ring: until its next switch-in it does not move, so a round
 * that finds it off a CPU since this very switch (the table's since_ns is 'now') takes
 * these frames instead of reading a stack that may start moving under the read (kernel.c,
 * unw_kern_switch_stack). The frames always carry fingerprints: the record is named at
 * a later round, when the code-object counter has often moved (aiohttp on 3.15: without
 * them, 1 in 500 of the records a round took could be named); no status is read (the
 * round's own reading has it). --native: its user context before it, as a tick's. A walk that did not reach the root sends nothing. */
static __always_inline void switch_walk(struct task_struct *t, __u64 now, __u32 slot)
{
    __u32 tgid = (__u32)BPF_CORE_READ(t, tgid), tid = (__u32)BPF_CORE_READ(t, pid);
    struct kern_thread_key key = { .pid = tgid, .tid = tid };
    __u32 zero = 0, idx = tid & (KERN_TS_SLOTS - 1), n;
    struct walk w = { 0 };
    struct kern_ts_ent *e;
    struct kern_counts *c;
    struct kern_scratch *s;
    kern_layout_t *L;
    __u64 *tsp, size;

    L = bpf_map_lookup_elem(&layouts, &slot);
    e = bpf_map_lookup_elem(&tstates, &idx);
    tsp = bpf_map_lookup_elem(&threads, &key);
    c = bpf_map_lookup_elem(&counts, &zero);
    s = bpf_map_lookup_elem(&scratch, &zero);
    if (L == NULL || e == NULL || tsp == NULL || c == NULL || s == NULL)
        return;
    if (e->tid == tid)
        e->walk_ns = now;
    s->rec.pid = tgid;
    s->rec.tid = tid;
    s->rec.t_ns = now;              /* the table's since_ns for this switch */
    s->rec.tstate = *tsp;
    s->rec.gen = 0;
    s->naming = 0;                  /* (its thread is alive: named later by user space) */
    walk_frames(s, L, slot, *tsp, &w);
    n = w.n;
    if (n > KERN_MAX_FRAMES)
        n = KERN_MAX_FRAMES;
    if ((w.flags & (KERN_S_FAULT | KERN_S_CUT)) || n == 0)
        return;
    s->rec.nframes = n;
    s->rec.nnamed = 0;              /* (a switch record is named later: its thread is alive) */
    size = sizeof(struct kern_rec) + (__u64)n * sizeof(kern_frame_t);
    /* --async: its running task as it leaves, as a tick's (a preempted task may have
     * ended by the time a round takes this stack) */
    s->has_task = 0;
    if (L->rt_kind != KERN_RT_NONE) {
        bpf_loop(1, task_step, &slot, 0);
        if (s->has_task &&
            bpf_probe_read_kernel((char *)s->frames + (__u64)n * sizeof(kern_frame_t), sizeof s->task, &s->task) == 0) {
            w.flags |= KERN_S_TASK;
            size += sizeof(kern_task_t);
        }
    }
    s->rec.flags = w.flags | KERN_S_SWITCH;
    /* --native: its user context too, the stack it will resume on (the current task is
     * still the one leaving) */
    if (L->native_stack != 0)
        native_copy(&swring, L, c, &s->rec);
    if (bpf_ringbuf_output(&swring, s, size, BPF_RB_NO_WAKEUP) == 0)
        c->switch_walks++;
}

SEC("raw_tp/sched_switch")
int BPF_PROG(kern_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
             unsigned int prev_state)
{
    __u64 now = bpf_ktime_get_ns();
    struct kern_walking *busy = NULL;
    __u32 slot = 0, cpu;
    int by_self = switch_to_self(prev, next);

    /* odd from before the table says the thread left until its stack is in the ring: a
     * round that settles after reading the table finds the walk of every switch it saw */
    if (switch_due(prev, prev_state == 0, by_self, now, &slot)) {
        cpu = bpf_get_smp_processor_id();
        busy = bpf_map_lookup_elem(&walking, &cpu);
        if (busy != NULL)
            __sync_fetch_and_add(&busy->seq, 1);
    }
    ts_switch(prev, 0, now, prev_state == 0, by_self);
    if (busy != NULL) {
        switch_walk(prev, now, slot);
        __sync_fetch_and_add(&busy->seq, 1);
    }
    ts_switch(next, 1, now, 0, 0);
    return 0;
}
