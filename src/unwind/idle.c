/* unwind/idle.c — which threads are on a CPU without the kernel engine (UNW_WANT_CPU,
 * UNW_WANT_ACTIVE), with a system call for a thread only when it may have changed.
 *
 * Reads /proc/PID/task/TID/schedstat (the scheduler's count of the thread's switches onto
 * a CPU, and its run time) and, when those moved, .../stat (its state letter). A thread
 * whose switches and run time are what they were at its last look has not been put on a
 * CPU since (asleep then: asleep still) nor taken off one (running then: running still).
 * When to look: see idle_decide(); docs/how-it-reads.md ("Idle threads") says how stale
 * a decision can be.
 */
#include "remora.h"
#include "internal.h"

/* Rounds an asleep thread with no sign of running goes without a look, at most. */
#define IDLE_COLD 16
/* Rounds after a thread was seen running, holding the GIL, switched or with its stack
 * moving, during which it is looked at every round. */
#define IDLE_WARM 64

/* One look at the thread: its schedstat, and its state letter when that moved since the
 * last look (or there is no last look to compare with). Returns 1 when it is on a CPU or
 * runnable. */
static int idle_look(unwinder_t *u, rd_thread_t *tc, uint64_t now)
{
    uint64_t run = 0, arrivals = 0;
    int sched = proc_task_sched(u->p, tc->native_id, &run, &arrivals) == REMORA_OK;
    char state;

    if (sched) {
        u->stats.idle_sched++;
        if (tc->idle.sched && tc->idle.state != IDLE_UNKNOWN) {
            if (run == tc->idle.run && arrivals == tc->idle.arrivals)
                return tc->idle.state == IDLE_RUNNING;  /* not switched since: as it was */
            tc->idle.warm = now + IDLE_WARM;            /* switched since */
        }
    }
    /* read before the state: a thread asleep now is asleep while these stay the same */
    tc->idle.sched = sched;
    tc->idle.run = run;
    tc->idle.arrivals = arrivals;
    u->stats.idle_states++;
    if (proc_task_state(u->p, tc->native_id, &state) != REMORA_OK) {
        tc->idle.state = IDLE_UNKNOWN;      /* gone, or unreadable: not on a CPU */
        return 0;
    }
    tc->idle.state = state == 'R' ? IDLE_RUNNING : IDLE_ASLEEP;
    if (tc->idle.state == IDLE_RUNNING)
        tc->idle.warm = now + IDLE_WARM;
    return tc->idle.state == IDLE_RUNNING;
}

/* Thread i's on_cpu this round, after its walk (or, reused, a parked thread's saved walk
 * before it is taken). Returns idle_skips(). Known for free: a thread holding the GIL
 * runs Python (UNW_WANT_ACTIVE: never idle, so not looked at; UNW_WANT_CPU: looked at,
 * since it may be blocked holding it or waiting for a CPU). Looked at every round: a
 * thread not known asleep (running, runnable, or never looked at); one whose innermost
 * frame moved since the last round (it held the GIL meanwhile, and may have let it go
 * into C code); one that within IDLE_WARM rounds held the GIL, moved, ran or was switched
 * (a thread running C code without the GIL waits for the GIL between its calls, asleep,
 * and comes back to the same frame). The rest, asleep at their last look with no sign of
 * running since, every IDLE_COLD rounds. */
int idle_decide(unwinder_t *u, reader_t *r, size_t i, int reused)
{
    rd_thread_t *tc = &r->threads[i];
    unw_thread_t *th = &u->threads[i];
    uint64_t now = r->round, top = 0, instr = 0;
    size_t k;
    int moved, fresh;

    th->on_cpu = 0;
    if (th->native_id <= 0)
        return idle_skips(u, th);   /* no task to ask about */
    fresh = tc->idle.tid != th->native_id;
    if (fresh) {                    /* a thread not seen yet, or another in this state */
        tc->idle.tid = th->native_id;
        tc->idle.state = IDLE_UNKNOWN;
        tc->idle.sched = 0;
        tc->idle.warm = tc->idle.due = 0;
        tc->idle.top = tc->idle.instr = 0;
    } else if (tc->idle.round == now) {
        th->on_cpu = tc->idle.on;   /* decided already this round (before its walk, or in
                                     * a reading of the round before this one) */
        return idle_skips(u, th);
    }
    tc->idle.round = now;
    /* its stack moved (it ran Python, so it held the GIL since the last round); a parked
     * thread's saved walk has not */
    if (reused) {
        for (k = 0; k < tc->nsaved && tc->saved[k].shim; k++)
            ;
        if (k < tc->nsaved) {
            top = tc->saved[k].addr;
            instr = tc->saved[k].instr;
        }
    } else if (tc->raw_n > 0) {
        top = r->raw[tc->raw_first].addr;
        instr = r->raw[tc->raw_first].instr;
    }
    moved = !fresh && (th->error || tc->partial || top != tc->idle.top || instr != tc->idle.instr);
    tc->idle.top = top;
    tc->idle.instr = instr;
    if (th->holds_gil || moved)
        tc->idle.warm = now + IDLE_WARM;
    if (th->holds_gil && !(u->want & UNW_WANT_CPU)) {
        /* never idle (UNW_WANT_ACTIVE): taken as on a CPU, as it runs Python; looked at
         * again the first round it does not hold the GIL */
        tc->idle.state = IDLE_UNKNOWN;
        th->on_cpu = tc->idle.on = 1;
        return 0;
    }
    /* Looked at: every thread where a look costs no system call (a core, a snapshot,
     * --blocking's held states); one not known asleep; one that ran lately (warm), or
     * whose stack moved; else every IDLE_COLD rounds, spread over the rounds. */
    if (!proc_states_held(u->p) && tc->idle.state == IDLE_ASLEEP && !moved && now >= tc->idle.warm &&
        now < tc->idle.due) {
        u->stats.idle_kept++;
        th->on_cpu = tc->idle.on = 0;
        return idle_skips(u, th);
    }
    th->on_cpu = tc->idle.on = idle_look(u, tc, now);
    tc->idle.due = now + (fresh ? 1 + i % IDLE_COLD : IDLE_COLD);
    return idle_skips(u, th);
}
