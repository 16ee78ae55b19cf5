/* tests/fuzz/tool.c — replays fuzz inputs and records snapshots (no libFuzzer needed).
 *
 *   fuzz_tool replay DIR            every file of DIR/corpus/T/ and DIR/regress/T/ through
 *                                   target T, each in a child process; ends with
 *                                   "replay: N passed, N failed"
 *   fuzz_tool run TARGET FILE...    files through one target (a crash to debug)
 *   fuzz_tool snap-record PID OUT   records a snapshot of a live process while finding
 *                                   its interpreter and reading every thread; prints the
 *                                   threads as `remora dump --json` does
 *   fuzz_tool snap-record-locals PID OUT   the same, also reading every frame's locals
 *                                   (dump --locals; the JSON is the same, without them)
 *   fuzz_tool snap-dump FILE        the same, read back from a snapshot alone
 *   fuzz_tool native-seed DIR       seeds of the native target: this thread's registers
 *                                   and stack, captured inside a qsort comparison, in
 *                                   DIR/qsort-root0..2 (each Python walk rule)
 *   fuzz_tool list                  the target names
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <ucontext.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "remora.h"
#include "proc/proc.h"
#include "py/py.h"
#include "unwind/unwind.h"
#include "formats/out.h"
#include "fuzz.h"
#include "util/util.h"

#define FUZZ_MAX_INPUT (64u << 20)

static const fuzz_target_t *find_target(const char *name)
{
    const fuzz_target_t *t;

    for (t = fuzz_targets; t->name != NULL; t++)
        if (strcmp(t->name, name) == 0)
            return t;
    return NULL;
}

static int read_input(const char *path, unsigned char **buf, size_t *len)
{
    FILE *f = fopen(path, "rb");
    unsigned char *b = NULL;
    size_t n = 0, cap = 0;

    *buf = NULL;
    *len = 0;
    if (f == NULL)
        return -1;
    for (;;) {
        size_t r;
        if (n == cap) {
            unsigned char *nb;
            if (cap >= FUZZ_MAX_INPUT)
                break;
            cap = cap ? cap * 2 : 65536;
            nb = realloc(b, cap);
            if (nb == NULL) {
                free(b);
                fclose(f);
                return -1;
            }
            b = nb;
        }
        r = fread(b + n, 1, cap - n, f);
        if (r == 0)
            break;
        n += r;
    }
    fclose(f);
    *buf = b;
    *len = n;
    return 0;
}

/* Runs one file through t in a child. Returns 1 if it passed. */
static int run_one(const fuzz_target_t *t, const char *path)
{
    pid_t pid;
    int status;

    fflush(stdout);
    fflush(stderr);
    pid = fork();
    if (pid < 0)
        return 0;
    if (pid == 0) {
        unsigned char *b;
        size_t len;
        if (read_input(path, &b, &len) != 0) {
            fprintf(stderr, "cannot read %s\n", path);
            exit(2);
        }
        t->run(b, len);
        free(b);
        exit(0);                    /* exit, not _exit: LeakSanitizer runs at exit */
    }
    if (waitpid(pid, &status, 0) != pid)
        return 0;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 1;
    if (WIFSIGNALED(status))
        printf("FAIL replay %s %s: killed by signal %d\n", t->name, path, WTERMSIG(status));
    else
        printf("FAIL replay %s %s: exit %d\n", t->name, path, WEXITSTATUS(status));
    return 0;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every regular file of dir, sorted, through t. */
static void replay_dir(const fuzz_target_t *t, const char *dir, int *passed, int *failed)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char **names = NULL;
    size_t n = 0, cap = 0, i;

    if (d == NULL)
        return;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        if (n == cap) {
            char **nv;
            cap = cap ? cap * 2 : 64;
            nv = realloc(names, cap * sizeof *nv);
            if (nv == NULL)
                break;
            names = nv;
        }
        names[n] = malloc(strlen(dir) + strlen(e->d_name) + 2);
        if (names[n] == NULL)
            break;
        sprintf(names[n], "%s/%s", dir, e->d_name);
        n++;
    }
    closedir(d);
    if (n > 1)
        qsort(names, n, sizeof *names, name_cmp);
    for (i = 0; i < n; i++) {
        if (run_one(t, names[i]))
            (*passed)++;
        else
            (*failed)++;
        free(names[i]);
    }
    free(names);
}

static int cmd_replay(const char *root)
{
    const fuzz_target_t *t;
    int passed = 0, failed = 0;
    char dir[4096];

    for (t = fuzz_targets; t->name != NULL; t++) {
        int p0 = passed, f0 = failed;
        snprintf(dir, sizeof dir, "%s/corpus/%s", root, t->name);
        replay_dir(t, dir, &passed, &failed);
        snprintf(dir, sizeof dir, "%s/regress/%s", root, t->name);
        replay_dir(t, dir, &passed, &failed);
        printf("%s %s: %d inputs replayed\n", failed > f0 ? "FAIL" : "PASS", t->name,
               passed - p0 + failed - f0);
    }
    printf("replay: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}

static void print_json(FILE *out, pid_t pid, const py_target_t *t, const unw_thread_t *th, size_t n)
{
    size_t i, k;

    fprintf(out, "{\"pid\":%d,\"python\":", (int)pid);
    out_json_str(out, t->version);
    fputs(",\"threads\":[", out);
    for (i = 0; i < n; i++) {
        fprintf(out, "%s{\"native_id\":%d,\"name\":", i ? "," : "", (int)th[i].native_id);
        out_json_str(out, th[i].comm);
        fprintf(out, ",\"main\":%s,\"gil\":%s,\"on_cpu\":%s", th[i].is_main ? "true" : "false",
               th[i].holds_gil ? "true" : "false", th[i].on_cpu ? "true" : "false");
        if (th[i].error) {
            fputs(",\"error\":", out);
            out_json_str(out, remora_strerror(th[i].error));
        }
        fputs(",\"frames\":[", out);
        for (k = 0; k < th[i].nframes; k++) {
            fputs(k ? ",{\"function\":" : "{\"function\":", out);
            out_json_str(out, th[i].frames[k].function);
            fputs(",\"file\":", out);
            out_json_str(out, th[i].frames[k].file);
            fprintf(out, ",\"line\":%d}", th[i].frames[k].line);
        }
        fputs("]}", out);
    }
    fputs("]}\n", out);
}

static int with_locals;     /* snap-record-locals */

/* Reads every Python frame's locals (into the snapshot being recorded). */
static void read_locals(proc_t *p, const py_target_t *t, const unw_thread_t *th, size_t n)
{
    unw_locals_t *lr = NULL;
    size_t i, k;

    if (unw_locals_new(p, t, &lr) != REMORA_OK)
        return;
    for (i = 0; i < n; i++)
        for (k = 0; k < th[i].nframes; k++) {
            const unw_local_t *v;
            size_t nv, more;
            (void)unw_locals_read(lr, &th[i].frames[k], &v, &nv, &more);
        }
    unw_locals_free(lr);
}

/* Finds the interpreter in p and reads every thread, as remora dump does; writes JSON. */
static int dump(proc_t *p, const char *what, FILE *out)
{
    py_target_t t;
    unwinder_t *u = NULL;
    unw_thread_t *th = NULL;
    size_t n = 0;
    char why[512] = "";
    int err;

    err = py_target_find(p, &t, why, sizeof why);
    if (err) {
        fprintf(stderr, "fuzz_tool: %s: %s\n", what, why);
        return 1;
    }
    err = unw_new(p, &t, &u);
    if (!err) {
        unw_set_tries(u, 8);
        err = unw_sample(u, &th, &n);
    }
    if (err) {
        fprintf(stderr, "fuzz_tool: %s: cannot read the threads: %s\n", what, remora_strerror(err));
        unw_free(u);
        return 1;
    }
    if (with_locals)
        read_locals(p, &t, th, n);
    print_json(out, proc_pid(p), &t, th, n);
    unw_free(u);
    return 0;
}

static int cmd_snap_record(const char *pidarg, const char *out)
{
    proc_t *p;
    char *text = NULL;
    size_t len = 0;
    FILE *mem;
    int err, rc;

    err = proc_open((pid_t)atoi(pidarg), &p);
    if (err) {
        fprintf(stderr, "fuzz_tool: pid %s: %s\n", pidarg, remora_strerror(err));
        return 1;
    }
    mem = open_memstream(&text, &len);
    err = mem ? proc_record_start(p) : REMORA_ENOMEM;
    rc = err ? 1 : dump(p, pidarg, mem);
    if (mem)
        fclose(mem);
    if (rc == 0) {
        /* saved before anything is printed: a closed stdout cannot lose the snapshot */
        err = proc_snapshot_save(p, out);
        if (err) {
            fprintf(stderr, "fuzz_tool: cannot save %s: %s\n", out, remora_strerror(err));
            rc = 1;
        } else {
            fwrite(text, 1, len, stdout);
        }
    }
    free(text);
    proc_free(p);
    return rc;
}

static int cmd_snap_dump(const char *file)
{
    proc_t *p;
    int err, rc;

    err = proc_open_snapshot(file, &p);
    if (err) {
        fprintf(stderr, "fuzz_tool: %s: %s\n", file, remora_strerror(err));
        return 1;
    }
    rc = dump(p, file, stdout);
    proc_free(p);
    return rc;
}

/* ---- native-seed ---------------------------------------------------------------- */

#define SEED_STACK (64u << 10)

static unsigned char seed_stack[SEED_STACK];
static size_t seed_len;
static uint64_t seed_regs[17], seed_lo;

/* The mapping [start, end) of maps holding a, or 0. With a path filter, any mapping of a
 * file whose path has 'name' in it: the first start and last end. */
static int self_range(uint64_t a, const char *name, uint64_t *start, uint64_t *end)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[4300];
    int found = 0;

    if (f == NULL)
        return 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long long s, e;
        char *path = strchr(line, '/');
        if (sscanf(line, "%llx-%llx", &s, &e) != 2)
            continue;
        if (name == NULL ? (a >= s && a < e) : (path != NULL && strstr(path, name) != NULL)) {
            if (!found || s < *start)
                *start = s;
            if (!found || e > *end)
                *end = e;
            found = 1;
            if (name == NULL)
                break;
        }
    }
    fclose(f);
    return found;
}

static uint64_t exe_lo, exe_hi, libc_lo, libc_hi;

static uint64_t seed_word(uint64_t w)
{
    if (w >= exe_lo && w < exe_hi) {
        int64_t off = (int64_t)(w - (uint64_t)(uintptr_t)fuzz_native);
        if (off >= INT32_MIN && off <= INT32_MAX)
            return ((uint64_t)FUZZ_EXE << 48) | (uint32_t)(int32_t)off;
    }
    if (w >= libc_lo && w < libc_hi && w - fuzz_libc_base() <= UINT32_MAX)
        return ((uint64_t)FUZZ_LIBC << 48) | (uint32_t)(w - fuzz_libc_base());
    return w;
}

static int seed_cmp(const void *a, const void *b)
{
    ucontext_t uc;
    uint64_t s = 0, e = 0;
    /* DWARF order: rax rdx rcx rbx rsi rdi rbp rsp r8-r15 rip */
    static const int gr[17] = { REG_RAX, REG_RDX, REG_RCX, REG_RBX, REG_RSI, REG_RDI, REG_RBP,
                                REG_RSP, REG_R8, REG_R9, REG_R10, REG_R11, REG_R12, REG_R13,
                                REG_R14, REG_R15, REG_RIP };
    size_t i;

    if (seed_len == 0 && getcontext(&uc) == 0) {
        for (i = 0; i < 17; i++)
            seed_regs[i] = (uint64_t)uc.uc_mcontext.gregs[gr[i]];
        seed_lo = seed_regs[7];
        if (self_range(seed_lo, NULL, &s, &e)) {
            seed_len = e - seed_lo < SEED_STACK ? (size_t)(e - seed_lo) : SEED_STACK;
            seed_len &= ~(size_t)7;
            memcpy(seed_stack, (const void *)(uintptr_t)seed_lo, seed_len);
        }
    }
    return *(const int *)a - *(const int *)b;
}

static int cmd_native_seed(const char *dir)
{
    int v[2] = { 2, 1 }, root;
    char exe[4200], path[4300];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    size_t i;

    if (n <= 0)
        return 1;
    exe[n] = '\0';
    if (!self_range(0, exe, &exe_lo, &exe_hi) || !self_range(0, "/libc.so", &libc_lo, &libc_hi))
        return 1;
    qsort(v, 2, sizeof v[0], seed_cmp);
    if (seed_len == 0)
        return 1;
    for (root = 0; root < 3; root++) {
        /* three Python frames: the innermost in no eval call of its own, the other two
         * each beginning one, their C-owned frames a third and two thirds up the stack */
        uint8_t py[3 * 5] = { 0 };
        uint32_t below[3] = { 0xffffffffu, (uint32_t)(seed_len / 3) & ~7u,
                              (uint32_t)(2 * seed_len / 3) & ~7u };
        uint8_t head[2] = { (uint8_t)root, 3 };
        FILE *f;
        snprintf(path, sizeof path, "%s/qsort-root%d", dir, root);
        if ((f = fopen(path, "wb")) == NULL)
            return 1;
        for (i = 0; i < 3; i++) {
            py[i * 5] = i > 0;
            memcpy(py + i * 5 + 1, &below[i], 4);
        }
        fwrite(head, 1, 2, f);
        fwrite(py, 1, sizeof py, f);
        for (i = 0; i < 17; i++) {
            uint64_t w = seed_word(seed_regs[i]);
            fwrite(&w, 8, 1, f);
        }
        fwrite(&seed_lo, 8, 1, f);
        for (i = 0; i + 8 <= seed_len; i += 8) {
            uint64_t w;
            memcpy(&w, seed_stack + i, 8);
            w = seed_word(w);
            fwrite(&w, 8, 1, f);
        }
        if (fclose(f) != 0)
            return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    const fuzz_target_t *t;
    int i, failed = 0;

    if (argc >= 3 && strcmp(argv[1], "replay") == 0)
        return cmd_replay(argv[2]);
    if (argc >= 4 && strcmp(argv[1], "run") == 0) {
        t = find_target(argv[2]);
        if (t == NULL) {
            fprintf(stderr, "fuzz_tool: no target '%s'\n", argv[2]);
            return 1;
        }
        for (i = 3; i < argc; i++)
            failed += !run_one(t, argv[i]);
        return failed ? 1 : 0;
    }
    if (argc == 4 && strcmp(argv[1], "snap-record") == 0)
        return cmd_snap_record(argv[2], argv[3]);
    if (argc == 4 && strcmp(argv[1], "snap-record-locals") == 0) {
        with_locals = 1;
        return cmd_snap_record(argv[2], argv[3]);
    }
    if (argc == 3 && strcmp(argv[1], "snap-dump") == 0)
        return cmd_snap_dump(argv[2]);
    if (argc == 3 && strcmp(argv[1], "native-seed") == 0)
        return cmd_native_seed(argv[2]);
    if (argc == 2 && strcmp(argv[1], "list") == 0) {
        for (t = fuzz_targets; t->name != NULL; t++)
            puts(t->name);
        return 0;
    }
    fputs("usage: fuzz_tool replay DIR | run TARGET FILE... | snap-record[-locals] PID OUT | "
          "snap-dump FILE | native-seed DIR | list\n", stderr);
    return 1;
}
