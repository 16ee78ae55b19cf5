/* proc/file.c — errno mapped to REMORA_E* codes (once, here, for every file of proc/),
 * and whole-file reads.
 *
 * Reads local files only: small files under /proc (maps, a task's stat and comm), and
 * the core or snapshot file a handle is opened on. Calls nothing else in proc/.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "remora.h"
#include "proc_internal.h"
#include "../util/util.h"

int proc_err_from_errno(int e)
{
    switch (e) {
    case ESRCH:
    case ENOENT:
        return REMORA_ENOPROC;
    case EPERM:
    case EACCES:
        return REMORA_EPERM;
    case EFAULT:
        return REMORA_EFAULT;
    case ENOMEM:
        return REMORA_ENOMEM;
    default:
        return REMORA_EIO;
    }
}

int proc_slurp(const char *path, size_t max, char **buf, size_t *len)
{
    size_t cap = 4096, n = 0;
    char *b;
    int fd = open(path, O_RDONLY | O_CLOEXEC);

    *buf = NULL;
    *len = 0;
    if (fd < 0)
        return proc_err_from_errno(errno);
    b = malloc(cap + 1);
    if (b == NULL)
        goto nomem;
    for (;;) {
        ssize_t r;
        if (n == cap) {
            char *nb;
            if (cap >= max)
                break;
            cap = cap * 2 > max ? max : cap * 2;
            nb = realloc(b, cap + 1);
            if (nb == NULL)
                goto nomem;
            b = nb;
        }
        r = read(fd, b + n, cap - n);
        if (r < 0) {
            int err;
            if (errno == EINTR)
                continue;
            err = proc_err_from_errno(errno);
            /* reading a dead task's files fails with ESRCH */
            free(b);
            close(fd);
            return err;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    b[n] = '\0';
    *buf = b;
    *len = n;
    return REMORA_OK;
nomem:
    free(b);
    close(fd);
    return REMORA_ENOMEM;
}

int proc_read_file(const char *path, size_t max, unsigned char **buf, size_t *len)
{
    struct stat st;
    unsigned char *b;
    size_t n = 0;
    const char *kind;
    int fd = remora_input_open(path, &kind);      /* a FIFO must not block it */

    *buf = NULL;
    *len = 0;
    if (fd < 0)
        return kind != NULL ? REMORA_EUSAGE : proc_err_from_errno(errno);
    if (fstat(fd, &st) != 0) {
        close(fd);
        return REMORA_EIO;
    }
    if ((uint64_t)st.st_size > max) {
        close(fd);
        return REMORA_ENOMEM;
    }
    b = malloc(st.st_size > 0 ? (size_t)st.st_size : 1);
    if (b == NULL) {
        close(fd);
        return REMORA_ENOMEM;
    }
    while (n < (size_t)st.st_size) {
        ssize_t r = read(fd, b + n, (size_t)st.st_size - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            free(b);
            close(fd);
            return REMORA_EIO;
        }
        n += (size_t)r;
    }
    close(fd);
    *buf = b;
    *len = n;
    return REMORA_OK;
}
