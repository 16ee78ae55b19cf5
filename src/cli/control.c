/* cli/control.c — `record --control fifo:CTL[,ACK]` (record.h): commands from another
 * shell, a line each, read between rounds without blocking; each answered on ACK. The
 * FIFOs are opened read-write: opening does not wait for the other end, a writer that
 * comes and goes never makes the reads see an end, and an answer nobody reads is dropped
 * once the pipe is full instead of blocking the recording. A FIFO another user could
 * write is refused: it would let them drive a recording that runs as root.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "remora.h"
#include "cli.h"
#include "record.h"

const char rec_ctl_accepts[] = "fifo:CTL or fifo:CTL,ACK (FIFOs, made when missing; yours, "
                               "writable by no one else, when there)";

/* Opens a FIFO of --control, made here when missing (mode 0600, less the umask). One
 * there already is taken only when it is a FIFO (never through a symlink) of the user
 * running remora that no one else may write (group and others: no w; an ACL granting
 * more shows in the group bits): whoever may write it drives the recording. What is
 * checked is the FIFO opened, so a name swapped in the meantime changes nothing.
 * Returns its descriptor, or -1 after one line. */
static int open_fifo(const char *path)
{
    struct stat st;
    int fd;

    if (mkfifo(path, 0600) != 0 && errno != EEXIST) {
        cli_error("record: --control: cannot make the FIFO '%s': %s", path, strerror(errno));
        return -1;
    }
    /* O_NONBLOCK: a FIFO's open would wait for a writer; O_NOFOLLOW: a link is refused */
    fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
    if (fd < 0 && errno != ELOOP) {
        cli_error("record: --control: cannot open '%s': %s", path, strerror(errno));
        return -1;
    }
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISFIFO(st.st_mode)) {
        cli_error("record: --control: '%s' is not a FIFO%s; give a new name (remora makes it) or "
                  "a FIFO (mkfifo)", path, fd < 0 ? " but a symlink, not followed" : "");
        if (fd >= 0)
            close(fd);
        return -1;
    }
    if (st.st_uid != geteuid()) {
        cli_error("record: --control: the FIFO '%s' belongs to user %u, not to you (user %u): "
                  "whoever may write it drives the recording; give a new name (remora makes "
                  "it, mode 0600)", path, (unsigned)st.st_uid, (unsigned)geteuid());
        close(fd);
        return -1;
    }
    if (st.st_mode & (S_IWGRP | S_IWOTH)) {
        cli_error("record: --control: others may write the FIFO '%s' (mode %04o): whoever may "
                  "write it drives the recording; chmod go-w it, or give a new name (remora "
                  "makes it, mode 0600)", path, (unsigned)(st.st_mode & 07777));
        close(fd);
        return -1;
    }
    return fd;
}

int rec_ctl_open(const char *spec, rec_ctl_t *c)
{
    char ctl[4096];
    const char *comma;

    memset(c, 0, sizeof *c);
    c->fd = c->ack = -1;
    if (spec == NULL || strncmp(spec, "fifo:", 5) != 0 || spec[5] == '\0' || spec[5] == ',')
        return cli_bad_value("record", "--control", spec, rec_ctl_accepts);
    spec += 5;
    comma = strchr(spec, ',');
    if ((size_t)(comma ? comma - spec : (ptrdiff_t)strlen(spec)) >= sizeof ctl ||
        (comma != NULL && comma[1] == '\0'))
        return cli_bad_value("record", "--control", spec - 5, rec_ctl_accepts);
    snprintf(ctl, sizeof ctl, "%.*s", (int)(comma ? comma - spec : (ptrdiff_t)strlen(spec)), spec);
    if ((c->fd = open_fifo(ctl)) < 0)
        return -1;
    if (comma != NULL && (c->ack = open_fifo(comma + 1)) < 0) {
        rec_ctl_close(c);
        return -1;
    }
    return 0;
}

static int command_of(const char *line)
{
    static const struct { const char *word; int cmd; } words[] = {
        { "pause", CTL_PAUSE }, { "disable", CTL_PAUSE }, { "resume", CTL_RESUME },
        { "enable", CTL_RESUME }, { "snapshot", CTL_SNAPSHOT }, { "stop", CTL_STOP },
        { "ping", CTL_PING },
    };
    size_t i;

    for (i = 0; i < sizeof words / sizeof words[0]; i++)
        if (strcmp(line, words[i].word) == 0)
            return words[i].cmd;
    return CTL_BAD;
}

int rec_ctl_next(rec_ctl_t *c)
{
    for (;;) {
        char *nl = memchr(c->buf, '\n', c->len);
        ssize_t n;
        if (nl != NULL) {
            size_t k = (size_t)(nl - c->buf);
            int cmd;
            *nl = '\0';
            if (k > 0 && c->buf[k - 1] == '\r')
                c->buf[k - 1] = '\0';
            cmd = c->buf[0] == '\0' ? CTL_NONE : command_of(c->buf);
            memmove(c->buf, nl + 1, c->len - k - 1);
            c->len -= k + 1;
            if (cmd != CTL_NONE)
                return cmd;
            continue;               /* an empty line */
        }
        if (c->len == sizeof c->buf) {
            c->len = 0;             /* a line longer than any command: dropped */
            return CTL_BAD;
        }
        if (c->fd < 0)
            return CTL_NONE;
        n = read(c->fd, c->buf + c->len, sizeof c->buf - c->len);
        if (n <= 0)
            return CTL_NONE;
        c->len += (size_t)n;
    }
}

void rec_ctl_ack(rec_ctl_t *c, const char *answer)
{
    char line[128];
    int n;

    if (c->ack < 0)
        return;
    n = snprintf(line, sizeof line, "%s\n", answer);
    if (n > 0 && write(c->ack, line, (size_t)n) < 0) {
        /* nobody reads the answers and the pipe is full: dropped */
    }
}

void rec_ctl_close(rec_ctl_t *c)
{
    if (c->fd >= 0)
        close(c->fd);
    if (c->ack >= 0)
        close(c->ack);
    c->fd = c->ack = -1;
}
