/* proc/ internals shared by its files (which file does what: docs/layout.md).
 *
 * Calls go one way, never back up this list:
 *   freeze.c          → task.c, proc.c
 *   maps.c            → source.c (the held root refreshed), then as task.c
 *   task.c            → snapshot.c (the recorder), image.c, elf.c, file.c
 *   proc.c            → core.c, snapshot.c, image.c, file.c
 *   core.c            → image.c, file.c
 *   snapshot.c        → image.c, elf.c (traces), file.c
 *   source.c          → asuser.c, file.c
 *   image.c, elf.c, file.c, asuser.c call nothing else in proc/.
 *
 * Snapshots (snapshot.c, elf.c's traces) are compiled only into the test and fuzz
 * binaries, with REMORA_TESTING (Makefile: TESTING_SRC): the product's handle has no
 * recorder, and its reads do not look for one. A handle's struct differs between the
 * two builds: every file of proc/ is built again for the tests.
 */
#ifndef REMORA_PROC_INTERNAL_H
#define REMORA_PROC_INTERNAL_H

#include <string.h>

#include "proc.h"

typedef struct image image_t;

/* Little-endian words from a file's bytes (a core's notes, a recording): no alignment
 * asked of p. */
static inline uint64_t rd64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static inline uint32_t rd32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

typedef struct recorder recorder_t;

/* Hands the handle's recorder what it just read (call: a rec_* call on p->rec), when p
 * records: in test builds only; the product's build leaves nothing of it. */
#ifdef REMORA_TESTING
#define PROC_RECORD(p, call) do { if ((p)->rec != NULL) call; } while (0)
#else
#define PROC_RECORD(p, call) do { } while (0)
#endif

/* Tasks whose /proc/PID/task/TID/stat stays open (proc_task_state, every sample of
 * record's and top's default): one pread a task then, not an open, a read and a close. */
#define PROC_STAT_FDS 32
/* Tasks whose /proc/PID/task/TID/schedstat stays open (proc_task_sched, the idle test of
 * the user-space engine: a look at a thread every few rounds), slot tid % PROC_SCHED_FDS. */
#define PROC_SCHED_FDS 256

/* ---- asuser.c ------------------------------------------------------------- */

#define ASUSER_GROUPS 256           /* supplementary groups kept (more: the first ones) */

/* Whose rights a target's files are read with. */
typedef struct proc_creds {
    int known;                      /* 0: not known, nothing is read */
    uid_t uid;                      /* the fs ids: what the kernel checks a file against */
    gid_t gid;
    gid_t groups[ASUSER_GROUPS];
    size_t ngroups;
    uint64_t caps;                  /* effective capabilities */
    int own_userns;                 /* in remora's user namespace (its caps count here) */
} proc_creds_t;

/* A live target's credentials from its /proc/PID directory (piddir; -1: remora's own).
 * Returns 0, or -1 when they cannot be read (the process is gone). */
int asuser_creds(int piddir, proc_creds_t *cr);
/* Credentials of bare ids (a core's): no groups, no capabilities. */
void asuser_creds_ids(uid_t uid, gid_t gid, proc_creds_t *cr);
/* A child of remora holding a target's credentials, which opens names for it (one fork
 * for a report's files, not one a file). pid 0: none. */
typedef struct asuser_helper {
    pid_t pid;
    int sock;
    proc_creds_t creds;
} asuser_helper_t;

/* Opens 'path' for reading as a process with credentials cr would (root: its '/' for an
 * absolute name; dir: its working directory for a relative one, which ".." may not climb
 * above; -1: none, the name is not found). No link is followed out of root. Returns an
 * fd, or -1 with errno (EACCES: cr unknown; EPERM: the ids could not be taken). Unless
 * cr reads everything or remora cannot take another's ids, the open is the helper's h
 * (started on first use, again if it died or cr changed; NULL: a helper for this open
 * alone). */
int asuser_open(int root, int dir, const char *path, const proc_creds_t *cr,
                asuser_helper_t *h);
/* Ends the helper (kills and reaps it; nothing if none). */
void asuser_helper_end(asuser_helper_t *h);

struct proc {
    int kind;               /* enum proc_kind */
    pid_t pid;
    proc_stats_t stats;
    image_t *img;           /* PROC_CORE, PROC_SNAPSHOT: the source's memory, maps, tasks */
#ifdef REMORA_TESTING
    recorder_t *rec;        /* NULL unless proc_record_start() was called */
#endif
    struct {
        pid_t tid;          /* 0: the slot is free */
        int fd;
    } stat_fd[PROC_STAT_FDS];
    unsigned stat_next;     /* the slot a new task takes (round robin) */
    struct {
        pid_t tid;          /* 0: the slot is free */
        int fd;
    } sched_fd[PROC_SCHED_FDS];
    struct proc_held {
        pid_t tid;
        char state;
    } *held;                /* proc_hold_states(): states read before a --blocking stop */
    size_t nheld, cap_held;
    int holding;
    /* source.c: where and as whom the target's files are read. Live: /proc/PID held
     * (never another process of the same pid), its root and cwd as last seen (kept when
     * the process is gone: a container's files, never the host's). Core: --root or '/'. */
    int pid_dir, root_dir, cwd_dir;     /* -1: none */
    proc_creds_t creds;
    asuser_helper_t helper;             /* opens as the target: started on first need */
    proc_src_stats_t src_stats;
};

/* ---- file.c --------------------------------------------------------------- */

/* Maps an errno value to a REMORA_E* code. */
int proc_err_from_errno(int e);

/* Reads a whole small file (under /proc) into a malloc'd NUL-terminated buffer.
 * Returns 0 with *buf and *len, or a REMORA_E* code. At most 'max' bytes. */
int proc_slurp(const char *path, size_t max, char **buf, size_t *len);

/* Reads a whole regular file into a malloc'd buffer (at most 'max' bytes, else
 * REMORA_ENOMEM; anything but a regular file, never waited for: REMORA_EUSAGE). Returns 0
 * or a REMORA_E* code. */
int proc_read_file(const char *path, size_t max, unsigned char **buf, size_t *len);

/* ---- source.c ------------------------------------------------------------- */

/* Sets the handle's held directories (proc.c, at its making): a live target's /proc/PID,
 * root and cwd opened now; -1 for the others. */
void proc_source_attach(proc_t *p);
/* Closes them (proc_free). */
void proc_source_detach(proc_t *p);
/* A live target's root, working directory and credentials taken again if it is still
 * there (through the /proc/PID held: never another process given its pid), kept as last
 * seen when it is gone. Called at each source read and each maps read (a launched
 * command's root is the one its Python runs in, not the one it was forked with). */
void proc_source_refresh(proc_t *p);

/* ---- task.c --------------------------------------------------------------- */

/* Closes the stat and schedstat files proc_task_state() and proc_task_sched() keep open. */
void proc_close_stats(proc_t *p);

/* ---- proc.c --------------------------------------------------------------- */

/* The live source's reads. */
int proc_live_read(proc_t *p, uint64_t addr, void *buf, size_t len);
int proc_live_readv(proc_t *p, const proc_iov_t *iov, size_t n);

/* ---- image.c -------------------------------------------------------------- */

/* A byte range of the target's memory that the source holds. Bytes past data_len (up
 * to end) are not held: they are read from the file mapped there, if any. */
typedef struct img_seg {
    uint64_t start, end;
    const unsigned char *data;
    uint64_t data_len;
    uint32_t flags;                 /* PF_R, PF_W, PF_X (cores; for the maps text) */
} img_seg_t;

/* A file-backed mapping: [start, end) maps file 'file' from byte 'offset'. */
typedef struct img_fmap {
    uint64_t start, end, offset;
    size_t file;
} img_fmap_t;

/* A file the source knows: a core's mapped file (opened from the host on first use)
 * or a snapshot's stub ELF (bytes held in the snapshot). */
typedef struct img_file {
    char *path;                     /* as the target names it */
    uint64_t inode;                 /* snapshot: the inode recorded; core: 0 (unknown) */
    const unsigned char *bytes;     /* NULL until loaded */
    size_t len;
    int state;                      /* 0 not tried, 1 loaded, -1 unusable */
    int mapped;                     /* bytes is an mmap owned by the image */
} img_file_t;

typedef struct img_task {
    pid_t tid;
    char state;                     /* 0: unknown (proc_task_state fails) */
    int has_comm;                   /* name holds its comm (the kernel's name for it) */
    char name[64];
    int has_regs;                   /* core: NT_PRSTATUS's registers (x86_64 user_regs) */
    uint64_t regs[27];
} img_task_t;

struct image {
    unsigned char *buf;             /* the source file's bytes (owned) */
    size_t len;
    int buf_mapped;                 /* buf is an mmap */
    img_seg_t *segs;                /* sorted by start, disjoint */
    size_t nsegs;
    img_fmap_t *fmaps;              /* sorted by start, disjoint */
    size_t nfmaps;
    img_file_t *files;
    size_t nfiles;
    img_task_t *tasks;
    size_t ntasks;
    char *maps_text;                /* a maps file's text (owned) */
    size_t maps_len;
    char *root;                     /* core: where the target's '/' is on this host, or NULL */
    int have_ids;                   /* core: NT_PRPSINFO gave the process's uid and gid */
    uint32_t uid, gid;
    char *exe;                      /* core: the file to open for the executable, or NULL */
    size_t exe_file;                /* core: index of the executable in files, or (size_t)-1 */
    uint64_t page;                  /* core: page size (NT_FILE); a file reads as zeros from
                                     * its end to the end of that page, as mapped */
    char problem[512];              /* the last file that could not be used, and why */
};

image_t *image_new(void);
void image_free(image_t *img);

/* Sorts segs and fmaps and drops entries that are empty, wrap around, or overlap an
 * earlier one. Call once after filling them. */
void image_seal(image_t *img);

/* Reads [addr, addr+len) from the image: held bytes, else the mapped file.
 * Returns 0 or REMORA_EFAULT. */
int image_read(image_t *img, uint64_t addr, void *buf, size_t len);

/* The index of the file named 'path' (and 'inode' if both are nonzero), or -1. */
long image_find_file(const image_t *img, const char *path, uint64_t inode);

/* Loads file 'i' (a core's file from the host, checked against the core's copy of its
 * first page). Returns 0 with its bytes, or -1 (img->problem says why). */
int image_file_bytes(image_t *img, size_t i, const unsigned char **bytes, size_t *len);

/* Where file 'i' is on this host (core sources): out receives the path. Returns 0 or -1. */
int image_host_path(const image_t *img, size_t i, char *out, size_t len);

const img_task_t *image_task(const image_t *img, pid_t tid);

/* ---- core.c / snapshot.c: the sources that build an image ------------------------ */

/* The image of a core file (mapped) or buffer (copied), and NT_PRPSINFO's pid; 'exe' and
 * 'root' as for proc_open_core(). Returns 0 with *out (the caller frees it with
 * image_free()), or what proc_open_core() returns. (core.c) */
int core_open(const char *core, const char *exe, const char *root, image_t **out, pid_t *pid);
#ifdef REMORA_TESTING
int core_open_mem(const void *buf, size_t len, const char *exe, const char *root,
                  image_t **out, pid_t *pid);

/* The image of a snapshot file or buffer (copied), and the pid it was recorded from.
 * Returns 0 with *out (freed with image_free()), or what proc_open_snapshot() returns.
 * (snapshot.c) */
int snapshot_open(const char *file, image_t **out, pid_t *pid);
int snapshot_open_mem(const void *buf, size_t len, image_t **out, pid_t *pid);

/* The recorder (snapshot.c): every successful read and what proc_maps_read / proc_tasks /
 * proc_task_state / proc_task_comm (the comm) / proc_elf_open returned, kept by the
 * handle that made them; it calls nothing of the handle's. */
recorder_t *rec_new(void);
void rec_free(recorder_t *r);
void rec_mem(recorder_t *r, uint64_t addr, const void *buf, size_t len);
void rec_memv(recorder_t *r, const proc_iov_t *iov, size_t n);
void rec_maps(recorder_t *r, const char *text, size_t len);
void rec_task(recorder_t *r, pid_t tid);
void rec_task_state(recorder_t *r, pid_t tid, char state);
void rec_task_comm(recorder_t *r, pid_t tid, const char *name);
/* The trace to attach to an ELF file opened at 'path' (created on first use from e). */
void rec_elf(recorder_t *r, const char *path, uint64_t inode, elf_t *e);
/* What r holds as a snapshot of process 'pid' recorded from a source of 'kind': into a
 * malloc'd buffer, or into 'path' (a temporary file, then renamed). Returns 0,
 * REMORA_EIO, REMORA_ENOMEM. */
int rec_save_mem(const recorder_t *r, pid_t pid, int kind, unsigned char **out, size_t *len);
int rec_save(const recorder_t *r, pid_t pid, int kind, const char *path);

/* ---- elf.c: traces ------------------------------------------------------------ */

/* What was asked of an ELF file and what it answered, enough to build a stub file
 * that answers the same: its header, PT_LOAD program headers, the symbols and sections
 * looked up (found ones), and its NUL-terminated "N.N.N" version strings (target.c
 * reads a patch version out of the file for 3.9/3.10). */
typedef struct elf_trace elf_trace_t;

elf_trace_t *elf_trace_new(const elf_t *e);
void elf_trace_free(elf_trace_t *t);
/* From now on, e's symbol and section lookups are written to t (which must outlive e). */
void elf_trace_attach(elf_t *e, elf_trace_t *t);
/* Builds the stub ELF file. Returns 0 with a malloc'd buffer, or REMORA_ENOMEM. */
int elf_trace_stub(const elf_trace_t *t, unsigned char **out, size_t *len);
#endif /* REMORA_TESTING */

#endif
