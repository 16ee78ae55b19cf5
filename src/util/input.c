/* util/input.c — opening a file remora reads whole as its input (a recording, collapsed
 * stacks, a core, a snapshot, an executable or a file a core names): a regular file only.
 *
 * A FIFO with no writer blocks open() and read() for ever, a device can stream without
 * end (/dev/zero) or act on being opened: such a file is refused by its type, looked at
 * before it is opened and again on the descriptor (a name swapped in between is caught),
 * and the open itself never waits (O_NONBLOCK) nor takes a terminal (O_NOCTTY).
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "remora.h"
#include "util.h"

const char *remora_file_kind(mode_t mode)
{
    if (S_ISREG(mode))
        return "a regular file";
    if (S_ISDIR(mode))
        return "a directory";
    if (S_ISFIFO(mode))
        return "a FIFO";
    if (S_ISCHR(mode))
        return "a character device";
    if (S_ISBLK(mode))
        return "a block device";
    if (S_ISSOCK(mode))
        return "a socket";
    return "not a regular file";
}

int remora_input_open(const char *path, const char **why)
{
    struct stat st;
    int fd, flags;

    *why = NULL;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        *why = remora_file_kind(st.st_mode);
        errno = EINVAL;
        return -1;
    }
    fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        *why = remora_file_kind(st.st_mode);
        close(fd);
        errno = EINVAL;
        return -1;
    }
    /* a regular file never blocks; the flag cleared all the same, for stdio's sake */
    flags = fcntl(fd, F_GETFL);
    if (flags >= 0)
        (void)fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    return fd;
}
