/* tests/bench/vmread.c — what one process_vm_readv costs on this machine, the floor
 * under every figure of `make bench`: CPU time per call for a few shapes of read from
 * a child process (1 MB touched, parked in pause()), and the per-range and per-page
 * costs they imply; the shape of one remora sample, the least a sample checked for
 * tearing can read, and two other ways to cross into the kernel for comparison. Prints
 * a Markdown table. Measures, never asserts.
 *
 *     vmread [calls]     (default 200000 per shape)
 */
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define AREA (1u << 20)
#define PAGE 4096u
#define MAXR 16

static double cpu_us(void)
{
    struct timespec t;

    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

/* CPU us per call reading the ranges given as (offset, length) pairs, in that order. */
static double ranges(pid_t child, const char *area, char *dst, const size_t (*r)[2], int n, long calls)
{
    struct iovec local[MAXR], remote[MAXR];
    size_t at = 0;
    double t0;
    long k;
    int i;

    if (n > MAXR)
        n = MAXR;
    for (i = 0; i < n; i++) {
        local[i].iov_base = dst + at;
        local[i].iov_len = r[i][1];
        remote[i].iov_base = (void *)(area + r[i][0]);
        remote[i].iov_len = r[i][1];
        at += r[i][1];
    }
    t0 = cpu_us();
    for (k = 0; k < calls; k++)
        if (process_vm_readv(child, local, (unsigned long)n, remote, (unsigned long)n, 0) < 0) {
            perror("process_vm_readv");
            return -1.0;
        }
    return (cpu_us() - t0) / (double)calls;
}

/* CPU us per call reading 'n' ranges of 'len' bytes, 'stride' bytes apart. */
static double shape(pid_t child, const char *area, char *dst, int n, size_t len, size_t stride,
                    long calls)
{
    size_t r[MAXR][2];
    int i;

    for (i = 0; i < n && i < MAXR; i++) {
        r[i][0] = (size_t)i * stride;
        r[i][1] = len;
    }
    return ranges(child, area, dst, (const size_t (*)[2])r, n, calls);
}

/* The shape of remora's read of a busy one-thread 3.13 target at depth 50 (strace of
 * `remora record`, pyenv 3.13.0): the thread state, its C-stack entry frame, the
 * interpreter list head, the interpreter (threads, GIL), the parked main thread's
 * state, the data-stack chunk (6728 B from a page start), the current frame pointer,
 * the chunk again, the current frame again, the entry frame again, the code-object
 * counter; each on its own page, as in the target. And the least any sample checked
 * for tearing can read: the state, a copy, the current frame, a copy, the current
 * frame. */
#define TS (3 * PAGE + 0x100)
#define CHUNK (64 * PAGE)
static const size_t SAMPLE[][2] = {
    {TS, 304}, {10 * PAGE + 0xd80, 80}, {12 * PAGE + 0x738, 8}, {14 * PAGE + 0xa40, 520},
    {17 * PAGE + 0x620, 304}, {CHUNK, 6728}, {TS + 0x48, 8}, {CHUNK, 6728}, {TS + 0x48, 8},
    {10 * PAGE + 0xd80, 80}, {16 * PAGE + 0x48, 4},
};
static const size_t LEAST[][2] = {
    {TS, 304}, {CHUNK, 6728}, {TS + 0x48, 8}, {CHUNK, 6728}, {TS + 0x48, 8},
};

/* The alternatives: a bare system call (getppid), and one 64-byte pread of the child's
 * /proc/PID/mem (one range a call; no vectored form reads scattered ranges). */
static double others(pid_t child, const char *area, char *dst, long calls, double *mem)
{
    char path[64];
    double t0, bare;
    long k;
    int fd;

    t0 = cpu_us();
    for (k = 0; k < calls; k++)
        (void)syscall(SYS_getppid);
    bare = (cpu_us() - t0) / (double)calls;
    snprintf(path, sizeof path, "/proc/%d/mem", (int)child);
    fd = open(path, O_RDONLY);
    if (fd < 0) {
        perror(path);
        return -1.0;
    }
    t0 = cpu_us();
    for (k = 0; k < calls; k++)
        if (pread(fd, dst, 64, (off_t)(uintptr_t)area) != 64) {
            perror("pread");
            close(fd);
            return -1.0;
        }
    *mem = (cpu_us() - t0) / (double)calls;
    close(fd);
    return bare;
}

int main(int argc, char **argv)
{
    long calls = argc > 1 ? atol(argv[1]) : 200000;
    char *area = aligned_alloc(PAGE, AREA), *dst = malloc(AREA);
    double one, page1, pages4, r8same, r8apart, sample, least, bare, mem = -1.0;
    pid_t child;

    if (area == NULL || dst == NULL || calls <= 0)
        return 1;
    memset(area, 1, AREA);
    child = fork();
    if (child < 0)
        return 1;
    if (child == 0) {
        for (;;)
            pause();
    }
    one = shape(child, area, dst, 1, 64, 0, calls);
    page1 = shape(child, area, dst, 1, PAGE, 0, calls);
    pages4 = shape(child, area, dst, 1, 4 * PAGE, 0, calls);
    r8same = shape(child, area, dst, 8, 64, 256, calls);
    r8apart = shape(child, area, dst, 8, 64, 2 * PAGE, calls);
    sample = ranges(child, area, dst, SAMPLE, (int)(sizeof SAMPLE / sizeof SAMPLE[0]), calls);
    least = ranges(child, area, dst, LEAST, (int)(sizeof LEAST / sizeof LEAST[0]), calls);
    bare = others(child, area, dst, calls, &mem);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    if (one < 0 || page1 < 0 || pages4 < 0 || r8same < 0 || r8apart < 0 || sample < 0 || least < 0 ||
        bare < 0 || mem < 0)
        return 1;
    printf("| read | CPU us per call |\n|---|---|\n");
    printf("| 1 range, 64 B | %.2f |\n| 1 range, 4 KB (1 page) | %.2f |\n", one, page1);
    printf("| 1 range, 16 KB (4 pages) | %.2f |\n", pages4);
    printf("| 8 ranges of 64 B, one page | %.2f |\n| 8 ranges of 64 B, 8 pages | %.2f |\n", r8same, r8apart);
    printf("| remora's read at depth 50, 3.13 (11 ranges, 14.8 KB) | %.2f |\n", sample);
    printf("| the least a checked sample reads (5 ranges, 13.8 KB) | %.2f |\n", least);
    printf("| for comparison: a bare system call (getppid) | %.2f |\n", bare);
    printf("| for comparison: pread of 64 B from /proc/PID/mem | %.2f |\n", mem);
    printf("\nper call %.2f us; each further range %.2f us (same page) to %.2f us (own page); "
           "each further page of one range %.2f us\n",
           one, (r8same - one) / 7, (r8apart - one) / 7, (pages4 - page1) / 3);
    return 0;
}
