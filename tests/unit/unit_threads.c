/* tests/unit/unit_threads.c — unit tests of what names a thread: its name from threading's
 * registry (unwind/thread_names.c, over unit_mem.c's synthetic target) and, on 3.9/3.10,
 * its tid's offset in struct pthread (unwind/threads.c). */
#include <stdlib.h>
#include <string.h>

#include "proc/proc.h"
#include "unwind/internal.h"
#include "unit.h"

/* ---- thread names (unwind/thread_names.c) over synthetic memory: a snapshot holding a
 * sys.modules, a threading module, its _active dict and Thread objects laid out as a
 * 3.9-like target (sized dict keys, a Thread's dict at +16) with offsets of our own ---- */

void test_thread_names(void)
{
    const uint64_t A = 0x7f0000001000, B = 0x7f0000002000, C = 0x7f0000003000, D = 0x7f0000004000,
                   E = 0x7f0000005000, F = 0x7f0000006000, G = 0x7f0000007000, H = 0x7f0000008000;
    uint64_t reg[10][3], interp, idents[8] = { A, B, D, E, F, C, G, H }, s1, s2;
    py_target_t T;
    unwinder_t u;
    thread_names_t *pn;
    proc_t *p;
    tn_stats_t st;
    int err;

    pn_mem = calloc(1, PN_SIZE);
    if (pn_mem == NULL) {
        CHECK(0, "no memory");
        return;
    }
    /* a few entries (a deleted one among them), a key that is not an int, a name that
     * is not a str, a Thread that is not one (its type not a heap type) */
    pn_begin();
    reg[0][0] = A, reg[0][1] = pn_int(A), reg[0][2] = pn_thread(pn_str("alpha"));
    reg[1][0] = 7, reg[1][1] = 0, reg[1][2] = 0;                          /* deleted */
    reg[2][0] = B, reg[2][1] = pn_int(B), reg[2][2] = pn_thread(pn_str("beta"));
    reg[3][0] = E, reg[3][1] = pn_str("not an int"), reg[3][2] = pn_thread(pn_str("eps"));
    reg[4][0] = F, reg[4][1] = pn_int(F), reg[4][2] = pn_thread(pn_int(99));
    reg[5][0] = C, reg[5][1] = pn_int(C), reg[5][2] = pn_int(3);        /* no Thread */
    reg[6][0] = 9, reg[6][1] = pn_int(9), reg[6][2] = pn_thread(pn_str("dummy"));
    /* names as a str being built can look: no zero after its code points; a byte of
     * 0x80 or more in an ASCII one */
    s1 = pn_str("gammaX"), pn_put(s1 + 16, 5);
    s2 = pn_str("et\xe1"), pn_put(s2 + 16, 3);
    reg[7][0] = G, reg[7][1] = pn_int(G), reg[7][2] = pn_thread(s1);
    reg[8][0] = H, reg[8][1] = pn_int(H), reg[8][2] = pn_thread(s2);
    interp = pn_registry(reg, 9, 16, 9);
    err = tn_test_read(interp, idents, 8, &pn, &p, &u, &T);
    CHECK(err == 0 && pn != NULL, "read: %d", err);
    if (err == 0) {
        const char *a = tn_lookup(pn, A), *b = tn_lookup(pn, B);
        CHECK(a != NULL && strcmp(a, "alpha") == 0, "A named %s", a ? a : "(none)");
        CHECK(b != NULL && strcmp(b, "beta") == 0, "B named %s", b ? b : "(none)");
        CHECK(tn_lookup(pn, D) == NULL, "D (not in the registry) named");
        CHECK(tn_lookup(pn, E) == NULL, "E (a str key) named %s", tn_lookup(pn, E));
        CHECK(tn_lookup(pn, F) == NULL, "F (an int name) named %s", tn_lookup(pn, F));
        CHECK(tn_lookup(pn, C) == NULL, "C (an int, not a Thread) named %s", tn_lookup(pn, C));
        CHECK(tn_lookup(pn, 9) == NULL, "an ident not asked for named");
        CHECK(tn_lookup(pn, G) == NULL, "G (no terminating zero) named %s", tn_lookup(pn, G));
        CHECK(tn_lookup(pn, H) == NULL, "H (ASCII with a high byte) named %s", tn_lookup(pn, H));
        tn_get_stats(pn, &st);
        CHECK(st.readings == 1 && st.unscanned == 0 && st.scans <= 4, "stats: %llu readings, %llu scans",
              (unsigned long long)st.readings, (unsigned long long)st.scans);
    }
    tn_test_end(pn, p);

    /* a reading whose chains fail where the last reading's held: a thread read through
     * the same Thread object keeps its last name (counted torn), one whose Thread object
     * is another gets none */
    pn_begin();
    reg[0][0] = A, reg[0][1] = pn_int(A), reg[0][2] = pn_thread(pn_str("alpha"));
    reg[1][0] = B, reg[1][1] = pn_int(B), reg[1][2] = pn_thread(pn_str("beta"));
    interp = pn_registry(reg, 2, 8, 2);
    err = tn_test_read(interp, idents, 2, &pn, &p, &u, &T);
    CHECK(err == 0 && pn != NULL && tn_lookup(pn, A) != NULL && tn_lookup(pn, B) != NULL,
          "before: err %d", err);
    if (err == 0 && pn != NULL) {
        proc_t *p2;
        uint64_t keys, ents;
        memcpy(&keys, pn_mem + (pn_active + 32 - PN_BASE), 8);
        ents = keys + 40 + 8;
        pn_put(ents + 8, pn_str("A's int gone"));       /* A: its key no longer its int */
        pn_put(ents + 24 + 16, pn_thread(pn_int(7)));   /* B: another Thread, no str name */
        p2 = pn_source();
        u.p = p2;
        err = p2 != NULL ? tn_update(&u, pn, interp, idents, 2, 1) : -1;
        tn_get_stats(pn, &st);
        CHECK(err == 0 && tn_lookup(pn, A) != NULL && strcmp(tn_lookup(pn, A), "alpha") == 0 &&
              tn_lookup(pn, B) == NULL && st.torn == 2 && st.scans == 1 + 4,
              "after: err %d, A %s, B %s, torn %llu, scans %llu", err,
              tn_lookup(pn, A) ? tn_lookup(pn, A) : "(none)", tn_lookup(pn, B) ? tn_lookup(pn, B) : "(none)",
              (unsigned long long)st.torn, (unsigned long long)st.scans);
        proc_free(p2);
    }
    tn_test_end(pn, p);

    /* a table as 3.9 and 3.10 build it: the dict points to it, its entries copied, its
     * dk_nentries still 0: read all the same */
    pn_begin();
    reg[0][0] = A, reg[0][1] = pn_int(A), reg[0][2] = pn_thread(pn_str("alpha"));
    interp = pn_registry(reg, 1, 8, 0);
    err = tn_test_read(interp, idents, 2, &pn, &p, &u, &T);
    CHECK(err == 0 && pn != NULL && tn_lookup(pn, A) != NULL && strcmp(tn_lookup(pn, A), "alpha") == 0,
          "dk_nentries 0: err %d, A %s", err, pn && tn_lookup(pn, A) ? tn_lookup(pn, A) : "(none)");
    tn_test_end(pn, p);

    /* nentries lies: more than its table holds; then within the table, past the memory */
    pn_begin();
    reg[0][0] = A, reg[0][1] = pn_int(A), reg[0][2] = pn_thread(pn_str("alpha"));
    interp = pn_registry(reg, 1, 8, 9);
    err = tn_test_read(interp, idents, 2, &pn, &p, &u, &T);
    CHECK(err == 0 && pn != NULL && tn_lookup(pn, A) == NULL, "nentries > size: err %d, A %s", err,
          pn && tn_lookup(pn, A) ? tn_lookup(pn, A) : "(none)");
    tn_test_end(pn, p);
    pn_begin();
    reg[0][0] = A, reg[0][1] = pn_int(A), reg[0][2] = pn_thread(pn_str("alpha"));
    interp = pn_registry(reg, 1, 8, 1);
    {
        uint64_t keys;
        memcpy(&keys, pn_mem + (pn_active + 32 - PN_BASE), 8);
        pn_put(keys + 8, 1u << 26);         /* a table of 2^26, its entries far away */
        pn_put(keys + 32, 1u << 26);
    }
    err = tn_test_read(interp, idents, 2, &pn, &p, &u, &T);
    CHECK(err == 0 && pn != NULL && tn_lookup(pn, A) == NULL, "nentries past the memory: err %d", err);
    if (pn != NULL) {
        tn_get_stats(pn, &st);
        CHECK(st.scans == 4 && st.reads < 100, "past the memory: %llu scans, %llu reads",
              (unsigned long long)st.scans, (unsigned long long)st.reads);
    }
    tn_test_end(pn, p);

    /* the bound: 70,000 entries, A at entry 100, B at entry 69,000 (past 65,536: the
     * kernel's name, counted) */
    pn_begin();
    {
        enum { N = 70000 };
        static uint64_t big[N][3];
        uint64_t dummy = pn_thread(pn_str("dummy")), one = pn_int(1);
        size_t i;
        for (i = 0; i < N; i++)
            big[i][0] = 2 * i + 1, big[i][1] = one, big[i][2] = dummy;
        big[100][0] = A, big[100][1] = pn_int(A), big[100][2] = pn_thread(pn_str("alpha"));
        big[69000][0] = B, big[69000][1] = pn_int(B), big[69000][2] = pn_thread(pn_str("beta"));
        interp = pn_registry((const uint64_t (*)[3])big, N, 1u << 17, N);
        err = tn_test_read(interp, idents, 2, &pn, &p, &u, &T);
        CHECK(err == 0 && pn != NULL && tn_lookup(pn, A) != NULL && strcmp(tn_lookup(pn, A), "alpha") == 0,
              "70,000 entries: err %d, A %s", err, pn && tn_lookup(pn, A) ? tn_lookup(pn, A) : "(none)");
        if (err == 0 && pn != NULL) {
            tn_get_stats(pn, &st);
            CHECK(tn_lookup(pn, B) == NULL && st.unscanned == N - TN_MAX_ENTRIES && st.scans == 1 &&
                  st.reads < 40, "past the bound: B %s, %llu unscanned, %llu scans, %llu reads",
                  tn_lookup(pn, B) ? tn_lookup(pn, B) : "(none)", (unsigned long long)st.unscanned,
                  (unsigned long long)st.scans, (unsigned long long)st.reads);
        }
        tn_test_end(pn, p);
    }
    free(pn_mem);
}

/* ---- 3.9/3.10: the tid's offset in struct pthread ---- */

/* One struct pthread as glibc lays it out on x86-64: the pointer to itself first, the
 * tid at 720. */
static void pt_fill(unsigned char *b, uint64_t self, int32_t tid)
{
    memset(b, 0, PTHREAD_SCAN);
    memcpy(b, &self, 8);
    memcpy(b + 16, &self, 8);
    memcpy(b + 720, &tid, 4);
}

void test_pthread_tid_offset(void)
{
    static unsigned char scan[3 * PTHREAD_SCAN];
    /* pid_max 32768: the high half of a pointer at 0x7f91... is tid 0x7f91, a worker's */
    const uint64_t main_pt = 0x7f91acdd3b80ull, w1 = 0x7f91ab55f6c0ull, w2 = 0x7f91abd606c0ull;
    pid_t tids[] = {1000, 0x7f91, 2000, 2001};
    uint64_t pts[3] = {main_pt, w1, w2};

    /* the main thread's state alone, a worker alive whose tid is that high half: the
     * first offset where every copy holds a live tid (4) would name main by the worker */
    pt_fill(scan, main_pt, 1000);
    CHECK(pthread_tid_offset(scan, pts, 1, tids, 4, 1000) == 720, "tid offset: main alone, a pointer's high half a live tid");
    /* with two workers: the high halves are one tid for three threads */
    pt_fill(scan + PTHREAD_SCAN, w1, 2000);
    pt_fill(scan + 2 * PTHREAD_SCAN, w2, 2001);
    CHECK(pthread_tid_offset(scan, pts, 3, tids, 4, 1000) == 720, "tid offset: three threads");
    /* the pid itself 0x7f91: offset 4 holds it too, the 8-aligned offset is taken */
    tids[0] = 0x7f91;
    tids[1] = 1000;
    pt_fill(scan, main_pt, 0x7f91);
    CHECK(pthread_tid_offset(scan, pts, 1, tids, 4, 0x7f91) == 720, "tid offset: the pid a pointer's high half");
    tids[0] = 1000;
    tids[1] = 0x7f91;
    pt_fill(scan, main_pt, 1000);
    /* a state whose thread has ended (tid 0): no offset yet, nor without the main thread */
    pt_fill(scan + 2 * PTHREAD_SCAN, w2, 0);
    CHECK(pthread_tid_offset(scan, pts, 3, tids, 4, 1000) == -1, "tid offset: an ended thread's state");
    CHECK(pthread_tid_offset(scan + PTHREAD_SCAN, pts + 1, 1, tids, 4, 1000) == -1, "tid offset: no main thread");
    /* two states of one struct pthread (a state made for a thread not started yet) */
    pts[2] = main_pt;
    memcpy(scan + 2 * PTHREAD_SCAN, scan, PTHREAD_SCAN);
    CHECK(pthread_tid_offset(scan, pts, 3, tids, 4, 1000) == 720, "tid offset: a shared pthread_t");
    /* two structs holding one tid at an offset: not where the tid lies */
    pts[2] = w2;
    pt_fill(scan + 2 * PTHREAD_SCAN, w2, 2000);
    CHECK(pthread_tid_offset(scan, pts, 3, tids, 4, 1000) == -1, "tid offset: one tid in two structs");
}
