/* kern/kern.c — the in-kernel engine's loader (kern.h): loads the BPF object embedded as a
 * libbpf skeleton, attaches the sched_switch program, opens a task-clock perf event (or,
 * for --mode memory, a page-faults one) per target thread with the frame walker attached
 * to it, fills the maps the programs look up, maps the thread-state table for reads
 * without a system call, and consumes the ring buffer into kern_sample_t.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "remora.h"
#include "kern_bpf.h"
#include "remora_bpf.skel.h"

/* the mmapped arrays are indexed as C arrays: each value a multiple of 8 bytes, as the
 * kernel lays an array map's values out */
_Static_assert(sizeof(struct kern_walking) % 8 == 0, "walking[] values 8-byte aligned");
_Static_assert(sizeof(struct kern_ts_ent) % 8 == 0, "tstates[] values 8-byte aligned");

#define KERN_MAX_EVENTS 4096        /* threads sampled in the kernel at once, all processes */
#define KERN_NAT_STASH 16           /* user contexts waiting for their tick (one per CPU whose
                                     * records interleave, at most: 16 is room to spare) */

/* A tick's user context (KERN_S_NATIVE), copied out of the ring until its tick comes
 * (the ring's slot is the kernel's again once consumed). */
typedef struct kern_nat_slot {
    pid_t pid, tid;                 /* tid 0: free */
    uint64_t t_ns;
    uint64_t age;                   /* the oldest is taken when none is free */
    kern_native_t nat;
    unsigned char *buf;             /* KERN_NATIVE_MAX bytes, allocated at first use */
} kern_nat_slot_t;

/* One target thread's task-clock event and its link to the frame walker. */
typedef struct kern_event {
    pid_t pid, tid;
    int fd;
    struct bpf_link *link;
} kern_event_t;

struct kern {
    struct remora_bpf *skel;
    struct ring_buffer *rb;
    struct ring_buffer *swrb;       /* the switch-out walks' ring (kern_poll_switch) */
    uint64_t period_ns;             /* of each thread's own CPU time; 0: no frame walker
                                     * (--mode memory: KERN_FAULT_NOMINAL_NS) */
    uint64_t faults;                /* --mode memory: page faults between two walks; 0: the
                                     * events are task-clock ones */
    kern_event_t *events;           /* KERN_MAX_EVENTS */
    size_t nevents;
    const struct kern_ts_ent *table;/* the mmapped thread-state table */
    size_t table_len;
    const struct kern_walking *walking; /* the mmapped walks under way, a CPU each */
    size_t walking_len;
    int ncpus;                      /* of them, the CPUs there may be */
    int paused;                     /* kern_pause(): every event off */
    pid_t procs[KERN_MAX_PROCS];    /* slot -> pid (0: free) */
    kern_nat_slot_t nat[KERN_NAT_STASH];
    uint64_t nat_age;
    int (*cb)(void *ctx, const kern_sample_t *s); /* kern_poll's, during the call */
    void *cb_ctx;
    int cb_err;
};

/* libbpf's messages (the verifier's log among them) only when asked for: the library
 * never prints otherwise. */
static int kern_libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
    if (level == LIBBPF_DEBUG || getenv("REMORA_KERN_LIBBPF") == NULL)
        return 0;
    return vfprintf(stderr, fmt, ap);
}

/* errno -> REMORA_E*, and the reason line. */
static int kern_fail(int err, char *why, size_t whylen, const char *step)
{
    if (err < 0)
        err = -err;
    if (why != NULL && whylen > 0)
        snprintf(why, whylen, "%s: %s", step, strerror(err));
    if (err == EPERM || err == EACCES)
        return REMORA_EPERM;
    if (err == ENOMEM || err == E2BIG)
        return REMORA_ENOMEM;
    return REMORA_EVERSION;
}

/* A tick's user context record: kept (copied) for the tick record that follows it. */
static void kern_nat_keep(kern_t *k, const struct kern_nat_rec *r)
{
    kern_nat_slot_t *e = NULL;
    size_t i;

    if (r->len > KERN_NATIVE_MAX || r->len % 4096 != 0)
        return;                     /* not one of ours */
    for (i = 0; i < KERN_NAT_STASH; i++) {
        kern_nat_slot_t *x = &k->nat[i];
        if (x->tid == (pid_t)r->rec.tid || x->tid == 0) {
            e = x;                  /* the thread's older one (its tick lost) goes */
            break;
        }
        if (e == NULL || x->age < e->age)
            e = x;
    }
    if (e->buf == NULL && (e->buf = malloc(KERN_NATIVE_MAX)) == NULL)
        return;
    e->pid = (pid_t)r->rec.pid;
    e->tid = (pid_t)r->rec.tid;
    e->t_ns = r->rec.t_ns;
    e->age = ++k->nat_age;
    memcpy(e->nat.regs, r->regs, sizeof e->nat.regs);
    e->nat.lo = r->lo;
    e->nat.len = r->len;
    e->nat.has_ts_frame = r->has_ts_frame != 0;
    e->nat.ts_frame = r->ts_frame;
    e->nat.stack = e->buf;
    memcpy(e->buf, r->stack, r->len);
}

/* The user context kept for this tick (same pid, tid and time), or NULL. */
static kern_nat_slot_t *kern_nat_find(kern_t *k, const struct kern_rec *r)
{
    size_t i;

    for (i = 0; i < KERN_NAT_STASH; i++)
        if (k->nat[i].tid == (pid_t)r->tid && k->nat[i].tid != 0 && k->nat[i].pid == (pid_t)r->pid &&
            k->nat[i].t_ns == r->t_ns)
            return &k->nat[i];
    return NULL;
}

static int kern_rb_sample(void *ctx, void *data, size_t size)
{
    kern_t *k = ctx;
    const struct kern_rec *r = data;
    kern_nat_slot_t *nat;
    kern_sample_t s;
    int err;

    if (size >= sizeof *r && (r->flags & KERN_S_NATIVE)) {
        if (size >= sizeof(struct kern_nat_rec) && k->cb != NULL)
            kern_nat_keep(k, data);
        return 0;
    }
    if (size < sizeof *r || r->nframes > KERN_MAX_FRAMES || r->nnamed > KERN_NAMED ||
        size < sizeof *r + (size_t)r->nframes * sizeof(kern_frame_t) + (size_t)r->nnamed * sizeof(kern_named_t))
        return 0;                   /* not one of ours: skipped */
    s.pid = (pid_t)r->pid;
    s.tid = (pid_t)r->tid;
    s.t_ns = r->t_ns;
    s.tstate = r->tstate;
    s.gen = r->gen;
    s.flags = r->flags;
    s.nframes = r->nframes;
    s.frames = (const kern_frame_t *)(r + 1);
    s.nnamed = r->nnamed;
    s.named = (const kern_named_t *)(s.frames + r->nframes);
    s.task = NULL;
    if ((r->flags & KERN_S_TASK) &&
        size >= sizeof *r + (size_t)r->nframes * sizeof(kern_frame_t) + (size_t)r->nnamed * sizeof(kern_named_t) +
                sizeof(kern_task_t))
        s.task = (const kern_task_t *)(const void *)(s.named + r->nnamed);
    nat = kern_nat_find(k, r);
    s.native = nat != NULL ? &nat->nat : NULL;
    if (nat != NULL)
        nat->tid = 0;               /* taken: free again once the callback returns */
    if (k->cb == NULL)
        return 0;                   /* kern_discard(): dropped */
    err = k->cb(k->cb_ctx, &s);
    if (err != 0) {
        k->cb_err = err;
        return -1;                  /* libbpf stops (the record is consumed) */
    }
    return 0;
}

/* The task-clock event of thread 'tid' sampling every period_ns of its own CPU time, with
 * the frame walker attached: 0, or -errno. */
static int kern_event_open(kern_t *k, pid_t pid, pid_t tid)
{
    struct perf_event_attr a;
    kern_event_t *e;
    int fd, err;

    if (k->nevents == KERN_MAX_EVENTS)
        return -ENOSPC;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.type = PERF_TYPE_SOFTWARE;
    if (k->faults > 0) {
        /* every faults'th page fault the thread takes, in its own context */
        a.config = PERF_COUNT_SW_PAGE_FAULTS;
        a.sample_period = k->faults;
    } else {
        a.config = PERF_COUNT_SW_TASK_CLOCK;
        a.sample_period = k->period_ns;
        a.exclude_idle = 1;
    }
    fd = (int)syscall(SYS_perf_event_open, &a, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0)
        return -errno;
    e = &k->events[k->nevents];
    e->link = bpf_program__attach_perf_event(k->skel->progs.kern_tick, fd);
    if (e->link == NULL) {
        err = errno;
        close(fd);
        return -(err ? err : EINVAL);
    }
    e->fd = fd;
    e->pid = pid;
    e->tid = tid;
    k->nevents++;
    if (k->paused)
        ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
    return 0;
}

void kern_pause(kern_t *k, int paused)
{
    size_t i;

    k->paused = paused != 0;
    for (i = 0; i < k->nevents; i++)
        ioctl(k->events[i].fd, paused ? PERF_EVENT_IOC_DISABLE : PERF_EVENT_IOC_ENABLE, 0);
}

void kern_discard(kern_t *k)
{
    k->cb = NULL;
    ring_buffer__consume(k->rb);
    ring_buffer__consume(k->swrb);
}

static void kern_event_close(kern_t *k, size_t i)
{
    bpf_link__destroy(k->events[i].link);
    close(k->events[i].fd);
    k->events[i] = k->events[--k->nevents];
}

static ssize_t kern_event_find(const kern_t *k, pid_t pid, pid_t tid)
{
    size_t i;

    for (i = 0; i < k->nevents; i++)
        if (k->events[i].tid == tid && k->events[i].pid == pid)
            return (ssize_t)i;
    return -1;
}

/* A BPF_F_MMAPABLE array map, mapped read-only; NULL with errno set. */
static void *map_array(const struct bpf_map *map, size_t len)
{
    void *m = mmap(NULL, len, PROT_READ, MAP_SHARED, bpf_map__fd(map), 0);

    return m == MAP_FAILED ? NULL : m;
}

/* kern_open and kern_open_faults: rate_hz > 0 (task-clock ticks) or faults > 0 (page
 * faults), or neither (no frame walker). */
static int kern_open_ev(double rate_hz, uint64_t faults, int native, kern_t **out, char *why,
                        size_t whylen)
{
    kern_t *k;
    int err;
    void *m;

    *out = NULL;
    libbpf_set_print(kern_libbpf_print);
    k = calloc(1, sizeof *k);
    if (k == NULL)
        return kern_fail(ENOMEM, why, whylen, "kern_open");
    k->skel = remora_bpf__open();
    if (k->skel == NULL) {
        err = kern_fail(errno, why, whylen, "bpf object open");
        goto error;
    }
    k->faults = faults;
    if (rate_hz <= 0 && faults == 0)
        bpf_program__set_autoload(k->skel->progs.kern_tick, false);
    /* --native: room for the ticks' user stack records */
    if (native && (bpf_map__set_max_entries(k->skel->maps.ring, KERN_RING_NATIVE_BYTES) != 0 ||
                   bpf_map__set_max_entries(k->skel->maps.swring, KERN_SWRING_NATIVE_BYTES) != 0)) {
        err = kern_fail(errno, why, whylen, "bpf ring buffer size");
        goto error;
    }
    err = remora_bpf__load(k->skel);
    if (err != 0) {
        err = kern_fail(err, why, whylen, "bpf(BPF_PROG_LOAD)");
        goto error;
    }
    k->table_len = (size_t)KERN_TS_SLOTS * sizeof(struct kern_ts_ent);
    k->walking_len = (size_t)KERN_MAX_CPUS * sizeof(struct kern_walking);
    if ((m = map_array(k->skel->maps.tstates, k->table_len)) == NULL) {
        err = kern_fail(errno, why, whylen, "mmap(thread-state table)");
        goto error;
    }
    k->table = m;
    if ((m = map_array(k->skel->maps.walking, k->walking_len)) == NULL) {
        err = kern_fail(errno, why, whylen, "mmap(walks under way)");
        goto error;
    }
    k->walking = m;
    k->ncpus = libbpf_num_possible_cpus();
    if (k->ncpus <= 0 || k->ncpus > KERN_MAX_CPUS)
        k->ncpus = KERN_MAX_CPUS;
    k->skel->links.kern_switch = bpf_program__attach(k->skel->progs.kern_switch);
    if (k->skel->links.kern_switch == NULL) {
        err = kern_fail(errno, why, whylen, "attach raw_tp/sched_switch");
        goto error;
    }
    k->rb = ring_buffer__new(bpf_map__fd(k->skel->maps.ring), kern_rb_sample, k, NULL);
    k->swrb = ring_buffer__new(bpf_map__fd(k->skel->maps.swring), kern_rb_sample, k, NULL);
    if (k->rb == NULL || k->swrb == NULL) {
        err = kern_fail(errno, why, whylen, "ring buffer mmap");
        goto error;
    }
    if (rate_hz > 0 || faults > 0) {
        /* one event a thread, made when the thread is added: probe once now that this
         * kernel lets us, on remora's own thread, so that a refusal is said at once */
        if (faults > 0)
            k->period_ns = KERN_FAULT_NOMINAL_NS;
        else
            k->period_ns = (uint64_t)(1e9 / rate_hz);
        if (k->period_ns < KERN_MIN_PERIOD_NS)
            k->period_ns = KERN_MIN_PERIOD_NS;  /* what the kernel would make of it anyway */
        if ((k->events = calloc(KERN_MAX_EVENTS, sizeof *k->events)) == NULL) {
            err = kern_fail(ENOMEM, why, whylen, "kern_open");
            goto error;
        }
        if ((err = kern_event_open(k, 0, (pid_t)syscall(SYS_gettid))) != 0) {
            err = kern_fail(err, why, whylen, faults > 0 ?
                            "perf_event_open(page-faults) with a BPF program" :
                            "perf_event_open(task-clock) with a BPF program");
            goto error;
        }
        kern_event_close(k, 0);
    }
    *out = k;
    return REMORA_OK;
error:
    kern_close(k);
    return err;
}

int kern_open(double rate_hz, kern_t **out, char *why, size_t whylen)
{
    return kern_open_ev(rate_hz, 0, 0, out, why, whylen);
}

int kern_open_native(double rate_hz, kern_t **out, char *why, size_t whylen)
{
    return kern_open_ev(rate_hz, 0, 1, out, why, whylen);
}

int kern_open_faults(uint64_t faults, kern_t **out, char *why, size_t whylen)
{
    if (faults == 0)
        faults = 1;
    return kern_open_ev(0, faults, 0, out, why, whylen);
}

uint64_t kern_fault_period(const kern_t *k)
{
    return k->faults;
}

uint64_t kern_period_ns(const kern_t *k)
{
    return k->period_ns;
}

void kern_close(kern_t *k)
{

    if (k == NULL)
        return;
    for (size_t i = 0; i < KERN_NAT_STASH; i++)
        free(k->nat[i].buf);
    while (k->nevents > 0)
        kern_event_close(k, k->nevents - 1);
    free(k->events);
    ring_buffer__free(k->rb);
    ring_buffer__free(k->swrb);
    if (k->table != NULL)
        munmap((void *)k->table, k->table_len);
    if (k->walking != NULL)
        munmap((void *)k->walking, k->walking_len);
    remora_bpf__destroy(k->skel);
    free(k);
}

/* A layout whose offsets fit the BPF side's buffers: every field inside the frame's fr_size
 * bytes, which the walker's reads rely on (its masks only keep it inside its buffers). */
static int kern_layout_ok(const kern_layout_t *L)
{
    uint32_t sz = L->fr_size;

    if (L->frames_kind > KERN_FRAMES_DIRECT || sz == 0 || sz > KERN_FRAME_BUF)
        return 0;
    if (L->fr_previous + 8 > sz || L->fr_code + 8 > sz ||
        L->fr_instr + (L->frames_kind == KERN_FRAMES_OBJECTS ? 4 : 8) > sz)
        return 0;
    if ((L->owner_shim != 0 && L->fr_owner >= sz) || L->fr_is_entry >= sz ||
        (L->fr_funcobj != 0 && L->fr_funcobj + 8 > sz) || (L->fr_gen != 0 && L->fr_gen + 8 > sz))
        return 0;
    if (L->fp_len > 8 * KERN_FP_WORDS || (L->str_hash != 0 && L->str_hash < 8) ||
        (L->gen_addr != 0 && L->gen_size != 4 && L->gen_size != 8))
        return 0;
    if (L->native_stack % 4096 != 0 || L->native_stack > KERN_NATIVE_MAX)
        return 0;
    if (L->rt_kind > KERN_RT_DICT ||
        (L->rt_kind == KERN_RT_DICT && ((L->rt_dk_nentries != 24 && L->rt_dk_nentries != 32) || L->rt_dk_hdr > 40)))
        return 0;
    /* the str's length through its first characters in one KERN_STR_BUF read */
    if (L->str_hash != 0 && (L->str_data < L->str_hash - 8 || (L->str_data - (L->str_hash - 8)) % 8 != 0 ||
                             L->str_data - (L->str_hash - 8) + KERN_FP_STR_DATA > KERN_STR_BUF))
        return 0;
    return 1;
}

int kern_add_process(kern_t *k, pid_t pid, const kern_layout_t *lay)
{
    uint32_t key = (uint32_t)pid, slot;
    int i, free_slot = -1;

    if (!kern_layout_ok(lay))
        return REMORA_EVERSION;
    for (i = 0; i < KERN_MAX_PROCS; i++) {
        if (k->procs[i] == pid) {
            free_slot = i;
            break;
        }
        if (k->procs[i] == 0 && free_slot < 0)
            free_slot = i;
    }
    if (free_slot < 0)
        return REMORA_ENOMEM;
    slot = (uint32_t)free_slot;
    if (bpf_map__update_elem(k->skel->maps.layouts, &slot, sizeof slot, lay, sizeof *lay, BPF_ANY) != 0)
        return REMORA_ENOMEM;
    if (bpf_map__update_elem(k->skel->maps.procs, &key, sizeof key, &slot, sizeof slot, BPF_ANY) != 0)
        return REMORA_ENOMEM;
    k->procs[slot] = pid;
    return REMORA_OK;
}

void kern_remove_process(kern_t *k, pid_t pid)
{
    uint32_t key = (uint32_t)pid;
    struct kern_thread_key t, next, *prev = NULL;
    int i, n = 0;

    bpf_map__delete_elem(k->skel->maps.procs, &key, sizeof key, 0);
    for (i = 0; i < KERN_MAX_PROCS; i++)
        if (k->procs[i] == pid)
            k->procs[i] = 0;
    for (size_t e = k->nevents; e-- > 0;)
        if (k->events[e].pid == pid)
            kern_event_close(k, e);
    /* forget its threads: a bounded pass over the thread map (deleting the key just
     * visited restarts the iteration, so the walk goes on from the one before) */
    while (n++ < KERN_THREADS * 2 &&
           bpf_map__get_next_key(k->skel->maps.threads, prev, &next, sizeof next) == 0) {
        if (next.pid == (uint32_t)pid) {
            bpf_map__delete_elem(k->skel->maps.threads, &next, sizeof next, 0);
            continue;
        }
        t = next;
        prev = &t;
    }
}

int kern_set_thread(kern_t *k, pid_t pid, pid_t tid, uint64_t tstate)
{
    struct kern_thread_key key = { .pid = (uint32_t)pid, .tid = (uint32_t)tid };
    ssize_t e = kern_event_find(k, pid, tid);
    int err;

    if (tstate == 0) {
        if (e >= 0)
            kern_event_close(k, (size_t)e);
        bpf_map__delete_elem(k->skel->maps.threads, &key, sizeof key, 0);
        return REMORA_OK;
    }
    if (bpf_map__update_elem(k->skel->maps.threads, &key, sizeof key, &tstate, sizeof tstate, BPF_ANY) != 0)
        return REMORA_ENOMEM;
    if (e < 0 && k->period_ns > 0 && (err = kern_event_open(k, pid, tid)) != 0) {
        bpf_map__delete_elem(k->skel->maps.threads, &key, sizeof key, 0);
        return err == -ESRCH ? REMORA_ENOPROC : err == -ENOSPC ? REMORA_ENOMEM
             : kern_fail(err, NULL, 0, "");
    }
    return REMORA_OK;
}

void kern_thread_state(const kern_t *k, pid_t tid, kern_tstate_t *out)
{
    const struct kern_ts_ent *e = &k->table[(uint32_t)tid & (KERN_TS_SLOTS - 1)];
    struct kern_ts_ent c;
    int tries;

    memset(out, 0, sizeof *out);
    /* a seqlock read: the writer makes seq odd, writes, makes it even again */
    for (tries = 0; tries < 64; tries++) {
        uint32_t s1 = __atomic_load_n(&e->seq, __ATOMIC_ACQUIRE);

        if (s1 & 1)
            continue;
        c.tid = __atomic_load_n(&e->tid, __ATOMIC_RELAXED);
        c.on_cpu = __atomic_load_n(&e->on_cpu, __ATOMIC_RELAXED);
        c.runnable = __atomic_load_n(&e->runnable, __ATOMIC_RELAXED);
        c.run_ns = __atomic_load_n(&e->run_ns, __ATOMIC_RELAXED);
        c.since_ns = __atomic_load_n(&e->since_ns, __ATOMIC_RELAXED);
        c.cpu = __atomic_load_n(&e->cpu, __ATOMIC_RELAXED);
        c.by_self = __atomic_load_n(&e->by_self, __ATOMIC_RELAXED);
        c.switches = __atomic_load_n(&e->switches, __ATOMIC_RELAXED);
        c.tick_cpu = __atomic_load_n(&e->tick_cpu, __ATOMIC_RELAXED);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (__atomic_load_n(&e->seq, __ATOMIC_RELAXED) != s1)
            continue;
        out->slot_read = 1;
        out->slot_seq = s1;
        out->slot_tid = c.tid;
        out->slot_ns = c.since_ns;
        if (c.tid != (uint32_t)tid || c.switches == 0)
            return;                 /* another thread's slot, or not seen yet */
        out->known = 1;
        out->on_cpu = c.on_cpu != 0;
        out->runnable = c.runnable != 0;
        out->run_ns = c.run_ns;
        out->since_ns = c.since_ns;
        out->cpu = (int)c.cpu;
        out->by_self = c.by_self != 0;
        out->switches = c.switches;
        out->tick_cpu = c.tick_cpu;
        return;
    }
}

int kern_settle(const kern_t *k, int64_t (*now)(void), int64_t wait_ns)
{
    int64_t until = 0;
    int cpu, late = 0;

    if (k->walking == NULL)
        return 0;
    for (cpu = 0; cpu < k->ncpus; cpu++) {
        const uint32_t *seq = &k->walking[cpu].seq;
        uint32_t s1 = __atomic_load_n(seq, __ATOMIC_ACQUIRE);

        if (!(s1 & 1))
            continue;
        /* a walk under way there: its end (the count moves on) is a few microseconds off,
         * unless that CPU is held up; then the round goes on without it */
        if (until == 0)
            until = now() + wait_ns;
        while (__atomic_load_n(seq, __ATOMIC_ACQUIRE) == s1) {
            if (now() > until) {
                late++;
                break;
            }
        }
    }
    return late;
}

static int poll_ring(kern_t *k, struct ring_buffer *rb, int (*cb)(void *ctx, const kern_sample_t *s),
                     void *ctx)
{
    int err;

    k->cb = cb;
    k->cb_ctx = ctx;
    k->cb_err = 0;
    err = ring_buffer__consume(rb);
    k->cb = NULL;
    if (k->cb_err != 0)
        return k->cb_err;
    (void)err;                      /* a negative count without cb_err: nothing to report */
    return 0;
}

int kern_poll(kern_t *k, int (*cb)(void *ctx, const kern_sample_t *s), void *ctx)
{
    return poll_ring(k, k->rb, cb, ctx);
}

int kern_poll_switch(kern_t *k, int (*cb)(void *ctx, const kern_sample_t *s), void *ctx)
{
    return poll_ring(k, k->swrb, cb, ctx);
}

int kern_known(kern_t *k, uint64_t code, uint64_t fp)
{
    if (bpf_map__update_elem(k->skel->maps.known, &code, sizeof code, &fp, sizeof fp, BPF_ANY) != 0)
        return REMORA_EFAULT;
    return REMORA_OK;
}

void kern_get_stats(const kern_t *k, kern_stats_t *out)
{
    int ncpu = libbpf_num_possible_cpus(), i, j;
    struct kern_counts *c;
    uint32_t zero = 0;
    int fds[2];

    memset(out, 0, sizeof *out);
    if (ncpu > 0 && (c = calloc((size_t)ncpu, sizeof *c)) != NULL) {
        if (bpf_map__lookup_elem(k->skel->maps.counts, &zero, sizeof zero, c,
                                 (size_t)ncpu * sizeof *c, 0) == 0) {
            for (i = 0; i < ncpu; i++) {
                out->ticks += c[i].ticks;
                out->samples += c[i].samples;
                out->dropped += c[i].dropped;
                out->faults += c[i].faults;
                out->nostate += c[i].nostate;
                out->switch_walks += c[i].switch_walks;
            }
        }
        free(c);
    }
    fds[0] = bpf_program__fd(k->skel->progs.kern_tick);
    fds[1] = bpf_program__fd(k->skel->progs.kern_switch);
    for (j = 0; j < 2; j++) {
        struct bpf_prog_info info;
        uint32_t len = sizeof info;

        memset(&info, 0, sizeof info);
        if (fds[j] >= 0 && bpf_obj_get_info_by_fd(fds[j], &info, &len) == 0) {
            out->run_ns += info.run_time_ns;
            out->run_cnt += info.run_cnt;
            if (j == 0) {
                out->tick_ns = info.run_time_ns;
                out->tick_cnt = info.run_cnt;
            }
        }
    }
}
