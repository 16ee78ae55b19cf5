/* tests/bench/vmread.c — what one process_vm_readv costs on this machine, the floor
 * under every figure of `make bench`: CPU time per call for a few shapes of read from
 * a child process (1 MB touched, parked in pause()), and the per-range and per-page
 * costs they imply. Prints a Markdown table. Measures, never asserts.
 *
 *     vmread [calls]     (default 200000 per shape)
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* CPU us per call reading 'n' ranges of 'len' bytes, 'stride' bytes apart. */
static double shape(pid_t child, const char *area, char *dst, int n, size_t len, size_t stride,
                    long calls)
{
    struct iovec local[MAXR], remote[MAXR];
    double t0;
    long k;
    int i;

    for (i = 0; i < n; i++) {
        local[i].iov_base = dst + (size_t)i * len;
        local[i].iov_len = len;
        remote[i].iov_base = (void *)(area + (size_t)i * stride);
        remote[i].iov_len = len;
    }
    t0 = cpu_us();
    for (k = 0; k < calls; k++)
        if (process_vm_readv(child, local, (unsigned long)n, remote, (unsigned long)n, 0) < 0) {
            perror("process_vm_readv");
            return -1.0;
        }
    return (cpu_us() - t0) / (double)calls;
}

int main(int argc, char **argv)
{
    long calls = argc > 1 ? atol(argv[1]) : 200000;
    char *area = aligned_alloc(PAGE, AREA), *dst = malloc(AREA);
    double one, page1, pages4, r8same, r8apart;
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
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    if (one < 0 || page1 < 0 || pages4 < 0 || r8same < 0 || r8apart < 0)
        return 1;
    printf("| read | CPU us per call |\n|---|---|\n");
    printf("| 1 range, 64 B | %.2f |\n| 1 range, 4 KB (1 page) | %.2f |\n", one, page1);
    printf("| 1 range, 16 KB (4 pages) | %.2f |\n", pages4);
    printf("| 8 ranges of 64 B, one page | %.2f |\n| 8 ranges of 64 B, 8 pages | %.2f |\n", r8same, r8apart);
    printf("\nper call %.2f us; each further range %.2f us (same page) to %.2f us (own page); "
           "each further page of one range %.2f us\n",
           one, (r8same - one) / 7, (r8apart - one) / 7, (pages4 - page1) / 3);
    return 0;
}
