/* tests/unit/unit_tasks.c — unit tests of the asyncio task reader (unwind/tasks*.c): task
 * lists walked over unit_mem.c's synthetic target, and the running task named from a
 * stack's frames (tasks_running.c). */
#include <stdlib.h>
#include <string.h>

#include "remora.h"
#include "unwind/internal.h"
#include "unwind/tasks.h"
#include "unit.h"

/* ---- asyncio (unwind/tasks.c, pyobj.c) over synthetic memory: 3.14-like task lists
 * (a node at 64 in a task of 96 bytes: next, prev), a list that loops on itself, a node
 * whose back link is wrong; sets, lists and dicts whose sizes lie ---- */

enum { TK_NODE = 64, TK_SIZE = 96, TK_STATE = 48, TK_IS_TASK = 52 };

static uint64_t tk_task(int pending)
{
    uint64_t t = pn_alloc(TK_SIZE);
    pn_put(t, 1);
    pn_put(t + TK_STATE, pending ? 0 : 2);
    pn_mem[t + TK_IS_TASK - PN_BASE] = 1;
    pn_put(t + 24, 0x5000);             /* name and coroutine: something */
    pn_put(t + 32, 0x6000);
    return t;
}

static void tk_link(uint64_t head, const uint64_t *tasks, size_t n)
{
    uint64_t prev = head;
    size_t i;
    for (i = 0; i < n; i++) {
        uint64_t node = tasks[i] + TK_NODE;
        pn_put(prev, node);             /* prev's next */
        pn_put(node + 8, prev);
        prev = node;
    }
    pn_put(prev, head);
    pn_put(head + 8, prev);
}

/* --async on the kernel engine (tasks_running.c, tasks_from_frames): a stack read at one
 * instant names its running task by the coroutine frame it holds (the innermost listed
 * one, running the code the list saw there), a task made since the list (in no key) by
 * the outermost coroutine frame stepped from C, under UNW_TASK_UNLISTED, the list then
 * stale; a listed frame whose code is another's since: not that task; a task a drain
 * found running and kept: named from there, its awaiter chain through the list; a stack
 * in no task: none. */
void test_tasks_from_frames(void)
{
    struct unw_tasks_state *tk = calloc(1, sizeof *tk);
    const unw_task_t *const *chain = NULL;
    unw_task_t tasks[3];
    tk_key_t keys[3];
    tk_raw_t raw[3];
    unw_frame_t fr[6], outer[3];
    unw_thread_t th;
    unwinder_t u;
    size_t i, nchain = 0;

    if (tk == NULL)
        return;
    memset(&u, 0, sizeof u);
    memset(tasks, 0, sizeof tasks);
    memset(raw, 0, sizeof raw);
    memset(fr, 0, sizeof fr);
    memset(outer, 0, sizeof outer);
    /* three tasks: their ids, coroutine frames (one frame unknown: 0) and that frame's
     * code as the reading saw it (their one coroutine frame, outermost) */
    for (i = 0; i < 3; i++) {
        tasks[i].id = 0x10000 + 0x100 * i;
        raw[i].frame = i == 2 ? 0 : 0x20000 + 0x100 * (2 - i);
        keys[i] = (tk_key_t){ tasks[i].id, i };
        outer[i].code = 0x50000 + 0x100 * i;
        tasks[i].frames = &outer[i];
        tasks[i].nframes = 1;
    }
    tk->tasks = tasks;
    tk->keys = keys;
    tk->ntasks = 3;
    tk->raw = raw;
    if ((tk->chain = malloc(UNW_MAX_CHAIN * sizeof *tk->chain)) == NULL) {
        free(tk);
        return;
    }
    CHECK(tk_frame_keys(tk, 3) == REMORA_OK && tk->nfkeys == 2, "two tasks with a frame keyed");
    tk->raw = NULL;
    u.tasks = tk;
    /* innermost first: two plain frames, task 1's coroutine frame, a frame, task 0's
     * coroutine frame (its awaiter's, were it one), the loop */
    for (i = 0; i < 6; i++)
        fr[i].addr = 0x30000 + 0x100 * i;
    fr[2].addr = 0x20100;
    fr[2].code = 0x50100;
    fr[2].gen = fr[2].entry = 1;
    fr[4].addr = 0x20200;
    fr[4].code = 0x50000;
    fr[4].gen = fr[4].entry = 1;
    memset(&th, 0, sizeof th);
    th.frames = fr;
    th.nframes = 6;
    tasks_from_frames(&u, &th, 0, NULL);
    CHECK(th.task == 0x10100 && th.task_frames == 3, "the innermost listed coroutine frame's task: "
          "%#llx, %zu own frames", (unsigned long long)th.task, th.task_frames);
    CHECK(!unw_tasks_stale(&u), "a listed task: the list is not stale");
    /* task 1 ended, another coroutine made at its frame's address: task 0's frame, outer */
    fr[2].code = 0x59900;
    tasks_from_frames(&u, &th, 0, NULL);
    CHECK(th.task == 0x10000 && th.task_frames == 5, "a listed frame running other code is not "
          "that task's: %#llx, %zu", (unsigned long long)th.task, th.task_frames);
    /* the new task kept by a drain that found it running: named so, its awaiter task 0 */
    tk->kept[0] = (tk_late_t){ 0x20100, 0x59900, 0x10000, 0x10200, "kept" };
    tk->nkept = 1;
    tasks_from_frames(&u, &th, 0, NULL);
    CHECK(th.task == 0x10000 && th.task_frames == 3, "a kept task named by its frame and code: "
          "%#llx, %zu", (unsigned long long)th.task, th.task_frames);
    CHECK(unw_task_chain(&u, th.task, &chain, &nchain) == REMORA_OK && nchain == 2 &&
          chain[1]->name != NULL && strcmp(chain[1]->name, "kept") == 0 && chain[0] == &tasks[2],
          "a kept task's chain: itself (not the listed task at its address), then its awaiter "
          "(%zu tasks)", nchain);
    CHECK(unw_tasks_stale(&u), "a kept task: the list is stale");
    tk->nkept = 0;
    fr[2].code = 0x50100;
    /* no listed frame: the outermost coroutine frame stepped from C is an unlisted task's */
    fr[2].addr = 0x40000;
    fr[4].addr = 0x40100;
    fr[1].gen = 1;              /* a generator iterated by Python code: not an entry */
    tasks_from_frames(&u, &th, 0, NULL);
    CHECK(th.task == UNW_TASK_UNLISTED && th.task_frames == 5, "an unlisted task: %#llx, %zu",
          (unsigned long long)th.task, th.task_frames);
    CHECK(unw_tasks_stale(&u) && !unw_tasks_stale(&u), "an unlisted task: stale once");
    /* the running task the tick read (kern_task_t): its coroutine's frame the tick's, its
     * name from the tick's image; 3.14+ with the awaiter the tick read, when listed */
    {
        static kern_task_t kt;
        py_target_t T;
        const char *text = "tick-1";

        memset(&T, 0, sizeof T);
        T.str_type = 0x1010;
        T.layout.ob_type = 8;
        T.layout.u_length = 16, T.layout.u_state = 32, T.layout.u_ascii_size = 48;
        T.layout.u_compact_size = 72;
        u.target = &T;
        u.strs = strtab_new();
        memset(&kt, 0, sizeof kt);
        kt.task = 0x70000, kt.coro = 0x40000, kt.frame = 0x40100;
        memcpy(kt.name + 8, &(uint64_t){ 0x1010 }, 8);
        memcpy(kt.name + 16, &(uint64_t){ strlen(text) }, 8);
        memcpy(kt.name + 32, &(uint32_t){ (1u << 2) | (1u << 5) | (1u << 6) }, 4);
        memcpy(kt.name + 48, text, strlen(text));
        kt.name_len = 64;
        tk->a.kind = PY_ASYNC_LISTS;
        kt.aw = 0x10200;
        tasks_from_frames(&u, &th, 0, &kt);
        CHECK(th.task == 0x70000 && th.task_frames == 5, "the tick's running task: %#llx, %zu",
              (unsigned long long)th.task, th.task_frames);
        CHECK(unw_task_chain(&u, th.task, &chain, &nchain) == REMORA_OK && nchain == 2 &&
              chain[1]->name != NULL && strcmp(chain[1]->name, text) == 0 && chain[0] == &tasks[2],
              "the tick's task named from its image, under the awaiter it read (%zu tasks)", nchain);
        CHECK(unw_tasks_stale(&u), "the tick's task: the list is stale");
        tk->nkept = 0;
        kt.aw = 0x12345;            /* not listed: a root */
        tasks_from_frames(&u, &th, 0, &kt);
        CHECK(th.task == 0x70000 && unw_task_chain(&u, th.task, &chain, &nchain) == REMORA_OK && nchain == 1,
              "an awaiter not listed is not written (%zu tasks)", nchain);
        tk->nkept = 0;
        kt.frame = 0x40800;         /* another loop's task: its frame not the tick's */
        tasks_from_frames(&u, &th, 0, &kt);
        CHECK(th.task == UNW_TASK_UNLISTED, "a tick task whose frame the tick did not read: %#llx",
              (unsigned long long)th.task);
        kt.frame = 0x40100;
        kt.name_len = 40;           /* an image that stops inside the name's header */
        tasks_from_frames(&u, &th, 0, &kt);
        CHECK(th.task == UNW_TASK_UNLISTED, "a tick task whose name image is cut: %#llx",
              (unsigned long long)th.task);
        kt.name_len = KERN_NAME_IMG + 1;
        tasks_from_frames(&u, &th, 0, &kt);
        CHECK(th.task == UNW_TASK_UNLISTED, "a name length past the image: refused");
        unw_tasks_stale(&u);
        tk->a.kind = 0;
        tk->nkept = 0;
        u.target = NULL;
        strtab_free(u.strs);
        u.strs = NULL;
    }
    /* no coroutine frame stepped from C: no task, the list stale only if the round said so */
    fr[2].gen = fr[4].gen = 0;
    tasks_from_frames(&u, &th, 0, NULL);
    CHECK(th.task == 0 && th.task_frames == 0 && !unw_tasks_stale(&u), "no task");
    tasks_from_frames(&u, &th, 0x99900, NULL);
    CHECK(th.task == 0 && unw_tasks_stale(&u), "the round's task not listed: stale");
    tasks_from_frames(&u, &th, 0x10000, NULL);
    CHECK(th.task == 0 && !unw_tasks_stale(&u), "the round's task listed: not stale");
    free(tk->fkeys);
    free(tk->chain);
    free(tk);
}

void test_tasks(void)
{
    py_asyncio_t a;
    py_target_t T;
    unwinder_t u;
    thread_names_t *pn = NULL;
    proc_t *p = NULL;
    uint64_t head, tasks[5], lists[2], keys[16], items[4];
    size_t n = 0, i;
    int moved = 0, err;

    pn_mem = calloc(1, PN_SIZE);
    if (pn_mem == NULL)
        return;
    memset(&a, 0, sizeof a);
    a.task_size = TK_SIZE, a.task_node = TK_NODE, a.task_state = TK_STATE, a.task_is_task = TK_IS_TASK;
    a.task_name = 24, a.task_coro = 32, a.task_loop = 16, a.task_awaited_by = 40;

    /* five tasks, one done: four pending, in order */
    pn_begin();
    head = pn_alloc(16);
    for (i = 0; i < 5; i++)
        tasks[i] = tk_task(i != 2);
    tk_link(head, tasks, 5);
    lists[0] = head, lists[1] = tasks[0] + TK_NODE;
    CHECK(tn_test_read(0, NULL, 0, &pn, &p, &u, &T) == 0 || p != NULL, "synthetic source");
    err = tasks_walk_test(&u, &a, lists, 1, &n, &moved);
    CHECK(err == 0 && n == 4 && !moved, "a list of 5 tasks, one done: err %d, %zu tasks, moved %d", err, n, moved);
    tn_test_end(pn, p);

    /* the last node loops to itself (its back link holds): bounded, not a hang */
    pn_put(tasks[4] + TK_NODE, tasks[4] + TK_NODE);
    pn_put(tasks[4] + TK_NODE + 8, tasks[4] + TK_NODE);
    pn_put(tasks[3] + TK_NODE, tasks[4] + TK_NODE);
    tn_test_read(0, NULL, 0, &pn, &p, &u, &T);
    err = tasks_walk_test(&u, &a, lists, 1, &n, &moved);
    CHECK(moved == 1 || err == REMORA_ENOMEM, "a node looping to itself: err %d, moved %d", err, moved);
    tn_test_end(pn, p);

    /* a wrong back link (a list changing under the walk), an unaligned and an unmapped
     * next: moved, every time */
    tk_link(head, tasks, 5);
    pn_put(tasks[2] + TK_NODE + 8, tasks[0] + TK_NODE);
    tn_test_read(0, NULL, 0, &pn, &p, &u, &T);
    err = tasks_walk_test(&u, &a, lists, 1, &n, &moved);
    CHECK(err == 0 && moved == 1, "a wrong back link: err %d, moved %d", err, moved);
    tn_test_end(pn, p);
    tk_link(head, tasks, 5);
    pn_put(tasks[1] + TK_NODE, tasks[2] + TK_NODE + 3);
    tn_test_read(0, NULL, 0, &pn, &p, &u, &T);
    err = tasks_walk_test(&u, &a, lists, 1, &n, &moved);
    CHECK(err == 0 && moved == 1, "an unaligned next: err %d, moved %d", err, moved);
    tn_test_end(pn, p);
    tk_link(head, tasks, 5);
    pn_put(tasks[1] + TK_NODE, 0x7f0000000000ull + TK_NODE);
    tn_test_read(0, NULL, 0, &pn, &p, &u, &T);
    err = tasks_walk_test(&u, &a, lists, 1, &n, &moved);
    CHECK(err == 0 && moved == 1, "an unmapped next: err %d, moved %d", err, moved);
    tn_test_end(pn, p);

    /* a set whose mask is too large, one whose mask is not 2^k - 1, a good one; a list
     * longer than asked for; a dict key that is not there */
    {
        uint64_t set = pn_alloc(64), tab = pn_alloc(8 * 16), lst = pn_alloc(40), arr = pn_alloc(64);
        uint64_t kv[1][3], d;
        pn_put(set + 8, 0x1060);
        pn_put(set + 40, tab);
        pn_put(tab, tasks[0]);
        pn_put(tab + 16 * 5, tasks[1]);
        pn_put(lst + 16, 1000000);
        pn_put(lst + 24, arr);
        for (i = 0; i < 8; i++)
            pn_put(arr + 8 * i, tasks[i % 5]);
        kv[0][0] = 1, kv[0][1] = pn_str("data"), kv[0][2] = set;
        d = pn_dict(kv, 1, 8, 1);
        pn_put(set + 32, (uint64_t)1 << 40);
        tn_test_read(0, NULL, 0, &pn, &p, &u, &T);
        CHECK(pyo_set_keys(&u, set, keys, 16, &n) == REMORA_ECORRUPT, "a set of 2^40 slots is refused");
        tn_test_end(pn, p);
        pn_put(set + 32, 6);
        tn_test_read(0, NULL, 0, &pn, &p, &u, &T);
        CHECK(pyo_set_keys(&u, set, keys, 16, &n) == REMORA_ECORRUPT, "a mask of 6 is refused");
        tn_test_end(pn, p);
        pn_put(set + 32, UINT64_MAX);
        tn_test_read(0, NULL, 0, &pn, &p, &u, &T);
        CHECK(pyo_set_keys(&u, set, keys, 16, &n) == REMORA_ECORRUPT, "a mask of 2^64 - 1 (0 slots) is refused");
        tn_test_end(pn, p);
        pn_put(set + 32, 7);
        tn_test_read(0, NULL, 0, &pn, &p, &u, &T);
        err = pyo_set_keys(&u, set, keys, 16, &n);
        CHECK(err == 0 && n == 2 && keys[0] == tasks[0] && keys[1] == tasks[1], "a set's keys: err %d, %zu", err, n);
        err = pyo_list_items(&u, lst, items, 4, &n);
        CHECK(err == 0 && n == 4 && items[3] == tasks[3], "a list that says 10^6 items, 4 asked: err %d, %zu", err, n);
        err = pyo_dict_get(&u, d, "data", &items[0]);
        CHECK(err == 0 && items[0] == set, "dict['data']: err %d", err);
        CHECK(pyo_dict_get(&u, d, "nothere", &items[0]) == REMORA_EFAULT, "dict['nothere']: EFAULT");
        tn_test_end(pn, p);
    }
    free(pn_mem);
    pn_mem = NULL;
}
