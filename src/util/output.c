/* util/output.c — opening the files remora writes its outputs to.
 *
 * A regular file (or a name not there yet) is written through a temporary name beside it
 * and renamed into place once whole, so an interrupted write never leaves half a profile.
 * Anything else is written in place: a device (/dev/null, /dev/full), a FIFO, a symlink's
 * target. remora runs as root: renaming over /dev/null would replace the device for
 * every program on the machine.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

int remora_output_open(const char *path, char **tmp)
{
    struct stat st;
    size_t len;
    int fd;

    *tmp = NULL;
    if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode))
        return open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    len = strlen(path) + 16;
    if ((*tmp = malloc(len)) == NULL) {
        errno = ENOMEM;
        return -1;
    }
    snprintf(*tmp, len, "%s.XXXXXX", path);
    fd = mkstemp(*tmp);
    if (fd < 0 || fchmod(fd, 0644) != 0) {
        int saved = errno;
        if (fd >= 0) {
            close(fd);
            unlink(*tmp);
        }
        free(*tmp);
        *tmp = NULL;
        errno = saved;
        return -1;
    }
    return fd;
}

int remora_output_done(const char *path, char *tmp, int commit)
{
    int rc = 0;

    if (tmp == NULL)
        return 0;
    if (commit && rename(tmp, path) != 0)
        rc = -1;
    if (!commit || rc != 0) {
        int saved = errno;
        unlink(tmp);
        errno = saved;
    }
    free(tmp);
    return rc;
}
