/* proc/ — the process handle: memory reads, /proc maps, ELF files, tasks.
 *
 * Everything above this layer sees a proc_t and REMORA_E* codes; only these files
 * include <sys/uio.h> or look at errno from the kernel.
 *
 * A proc_t reads one of three sources, through the same functions:
 *   live process   process_vm_readv, /proc/PID/{maps,task}, files via /proc/PID/root
 *   ELF core file  PT_LOAD segments (bytes the core lacks come from the mapped file),
 *                  maps from NT_FILE + PT_LOAD, tasks from NT_PRSTATUS
 *   snapshot       what remora read from a source, saved by proc_snapshot_save()
 *                  (test and fuzz builds only: REMORA_TESTING, below)
 * Core and snapshot files are untrusted input: every length, offset and count in them
 * is checked before use.
 */
#ifndef REMORA_PROC_H
#define REMORA_PROC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct proc proc_t;
typedef struct elf elf_t;

/* Where a handle's bytes come from. */
enum proc_kind {
    PROC_LIVE = 1,
    PROC_CORE = 2,
    PROC_SNAPSHOT = 3,
};

/* One segment of a vectored read. */
typedef struct proc_iov {
    uint64_t addr;
    void *buf;
    size_t len;
} proc_iov_t;

/* Counters kept by the handle (for --stats and the benchmarks). */
typedef struct proc_stats {
    uint64_t reads;   /* system calls made to read memory */
    uint64_t bytes;   /* bytes read */
    uint64_t writes;  /* system calls made to write (only with --frame-anchor) */
    uint64_t vectored;      /* of the reads, those of a batch of ranges (proc_readv) */
    uint64_t vectored_ok;   /* ... that read every range whole */
    uint64_t segments;      /* the ranges they asked for */
    uint64_t segments_done; /* ... read whole */
} proc_stats_t;

/* Opens the live process 'pid'. Returns 0, REMORA_ENOPROC if it does not exist,
 * REMORA_EPERM if we may not read it, REMORA_ENOTPY for a kernel thread (no user memory:
 * never Python), REMORA_ENOMEM. Caller frees with proc_free(). */
int proc_open(pid_t pid, proc_t **out);

/* Is pid a kernel thread (PF_KTHREAD in /proc/PID/stat)? 0 when it is not, or cannot be
 * told (gone, unreadable). */
int proc_is_kernel_thread(pid_t pid);
void proc_free(proc_t *p);
pid_t proc_pid(const proc_t *p);
const proc_stats_t *proc_stats(const proc_t *p);
int proc_kind(const proc_t *p);

/* Opens an ELF core file of a process (gcore, or the kernel's). 'exe', if not NULL, is
 * the file to read for the core's executable (its main program); 'root', if not NULL, is
 * the directory the target saw as '/' (a chroot or container): a file the core names
 * /usr/bin/python3 is then read from ROOT/usr/bin/python3, unless its name already
 * starts with ROOT/ (gcore run from outside the chroot names host paths).
 * Files are opened when first needed and must match the core's copy of their first
 * page where the core holds one. Tasks come from NT_PRSTATUS; their state is unknown
 * ('S' is reported, so none counts as on CPU), the main thread's name is the process
 * name from NT_PRPSINFO and the others have none (""). proc_pid() is NT_PRPSINFO's pid.
 * Only a regular file is read, as every file the core names: a FIFO, a device or a
 * directory is refused by its type, never opened for long (util/input.c).
 * Returns 0, REMORA_ENOPROC (no such file), REMORA_EPERM, REMORA_EIO,
 * REMORA_EUSAGE (not a regular file), REMORA_ENOTPY (not a 64-bit little-endian ELF
 * core), REMORA_ECORRUPT, REMORA_ENOMEM. Caller frees with proc_free(). */
int proc_open_core(const char *core, const char *exe, const char *root, proc_t **out);
#ifdef REMORA_TESTING
/* ---- test builds only (the Makefile's TESTING_SRC) ---- */

/* Same over a buffer (copied; tests and fuzzing). */
int proc_open_core_mem(const void *buf, size_t len, const char *exe, const char *root,
                       proc_t **out);

/* Opens a snapshot saved by proc_snapshot_save(): reads, maps, tasks (with the states
 * and names seen when it was recorded) and ELF files replay what was recorded; any
 * other read fails with REMORA_EFAULT. Returns 0, REMORA_ENOPROC (no such file),
 * REMORA_EPERM, REMORA_EIO, REMORA_ENOTPY (not a snapshot), REMORA_ECORRUPT,
 * REMORA_ENOMEM. Caller frees with proc_free(). */
int proc_open_snapshot(const char *file, proc_t **out);
/* Same over a buffer (copied; tests and fuzzing). */
int proc_open_snapshot_mem(const void *buf, size_t len, proc_t **out);

/* Starts recording p (any source): from now on every byte range read whole, the maps
 * text, the task list, task states and comms, and the symbols and sections looked up
 * in ELF files opened with proc_elf_open() are remembered for proc_snapshot_save().
 * Later reads of the same bytes replace earlier ones. Returns 0 or REMORA_ENOMEM. */
int proc_record_start(proc_t *p);

/* Writes what was recorded to 'path' (a temporary file, then renamed). Returns 0,
 * REMORA_EUSAGE (not recording), REMORA_EIO, REMORA_ENOMEM. */
int proc_snapshot_save(proc_t *p, const char *path);
/* Same into a malloc'd buffer the caller frees. */
int proc_snapshot_save_mem(proc_t *p, unsigned char **out, size_t *len);
#endif

/* A one-line note on the last file the source could not use (a core's mapped file
 * missing, or not the one the core was made with), or "" if none. */
const char *proc_problem(const proc_t *p);

/* Reads exactly 'len' bytes at 'addr'. Returns 0, or REMORA_EFAULT (unmapped or short),
 * REMORA_ENOPROC (process gone), REMORA_EPERM. */
int proc_read(proc_t *p, uint64_t addr, void *buf, size_t len);

/* Reads every segment in one system call where the kernel allows (it splits calls
 * over IOV_MAX). Returns 0 when every segment was read whole, else as proc_read. */
int proc_readv(proc_t *p, const proc_iov_t *iov, size_t n);

/* Reads a pointer-sized (8-byte) value. */
int proc_read_u64(proc_t *p, uint64_t addr, uint64_t *out);

/* Writes an 8-byte value into a live process (process_vm_writev): the one write remora
 * can make, for the documented --frame-anchor option (3.15's last_profiled_frame).
 * Counted in the stats as a write. REMORA_EUSAGE for a core or snapshot. */
int proc_write_u64(proc_t *p, uint64_t addr, uint64_t value);

/* ---- /proc/PID/maps ------------------------------------------------------- */

typedef struct proc_map {
    uint64_t start, end, offset;
    uint64_t inode;
    unsigned dev_major, dev_minor;
    char perms[5];          /* "r-xp" */
    char *path;             /* NULL for anonymous mappings; points into the maps buffer */
} proc_map_t;

typedef struct proc_maps {
    proc_map_t *v;
    size_t n;
    char *text;             /* the file's bytes; paths point into it */
} proc_maps_t;

/* Parses the text of a maps file (modified in place: paths are NUL-terminated in it).
 * Malformed lines are skipped. At most 'max' entries. Returns 0 or REMORA_ENOMEM.
 * Caller frees with proc_maps_fini(). Pure: no system calls (fuzzed). */
int proc_maps_parse(char *text, size_t len, size_t max, proc_maps_t *out);

/* Reads and parses /proc/PID/maps. Returns 0, REMORA_ENOPROC, REMORA_EPERM, REMORA_ENOMEM. */
int proc_maps_read(proc_t *p, proc_maps_t *out);
void proc_maps_fini(proc_maps_t *m);

/* Opens a file mapped in the target, seen through /proc/PID/root first (containers,
 * chroots), then by its plain path; when 'inode' is nonzero the file must be that inode.
 * Core: the file on this host (see proc_open_core; 'inode' is not checked, the core
 * has none). Snapshot: a memory file holding the stub saved for that path.
 * Returns an fd or -1. */
int proc_open_mapped_file(proc_t *p, const char *path, uint64_t inode);

/* Opens the ELF file mapped in the target at 'path' as proc_open_mapped_file() finds
 * it, from any source; while recording, its lookups are traced for the snapshot.
 * Returns 0, REMORA_ENOTPY (absent, unreadable or not ELF), REMORA_ENOMEM. The elf_t
 * may borrow the handle's memory: free it (elf_free) before proc_free(p). */
int proc_elf_open(proc_t *p, const char *path, uint64_t inode, elf_t **out);

/* ---- source files (source.c) ---------------------------------------------- */

#define PROC_SRC_MAX (16 << 20)     /* a larger "source" file is not read */
enum proc_src_state {
    PROC_SRC_OK = 0,
    PROC_SRC_MISSING,               /* absent (or unreadable for another reason) */
    PROC_SRC_NOT_FILE,              /* a directory, FIFO, device... */
    PROC_SRC_TOO_BIG,               /* over PROC_SRC_MAX bytes */
    PROC_SRC_BINARY,                /* holds a NUL byte: no Python source does */
    PROC_SRC_NAMELESS,              /* "<string>", "<frozen ...>": no file at all */
    PROC_SRC_DENIED,                /* the target itself may not read it */
    PROC_SRC_OUTSIDE,               /* a link or ".." leading out of the target's root */
    PROC_SRC_NO_ROOT,               /* the target's root is not known (nor its files) */
    PROC_SRC_NO_PROCESS,            /* no process to read it as (convert) */
    PROC_SRC_OVER_BOUND,            /* past a report's bound in files or bytes */
};
typedef struct proc_src {
    char *text;                     /* the file, NUL-terminated; NULL unless state is OK */
    size_t len;
    uint32_t *lines;                /* line k (1-based) is text[lines[k-1] .. lines[k]) */
    size_t nlines;
    int state;                      /* enum proc_src_state */
    int changed;                    /* modified after the live target started: its code
                                     * may have been compiled from other text */
    uint64_t dev, ino;              /* the file's identity (0, 0: not opened) */
} proc_src_t;

/* What the handle's source reads came to (record --stats). */
typedef struct proc_src_stats {
    uint64_t read, unread;          /* files opened and read; files that could not be */
    char first_unread[320];         /* "FILE: why" of the first that could not, or "" */
} proc_src_stats_t;

#ifdef REMORA_TESTING
/* Reads the source file a code object of the target names, as the target would (see
 * source.c): inside its root, with its credentials (a live target's, as last seen when
 * it is gone; a core's ids, inside --root). With p NULL nothing is opened (state
 * PROC_SRC_NO_PROCESS). Returns 0 with out->state saying what was found, or
 * REMORA_ENOMEM. Caller frees with proc_src_free(). */
int proc_source_read(proc_t *p, const char *path, proc_src_t *out);
#endif
/* Line 'line' (1-based) without its leading and trailing white space (not
 * NUL-terminated: *len bytes), or NULL when the file has no such line. */
const char *proc_src_line(const proc_src_t *s, int line, size_t *len);
void proc_src_free(proc_src_t *s);
/* What a state means, for a message: "missing or unreadable", "binary, not source"... */
const char *proc_src_state_str(int state);
/* The handle's source reads so far (p may be NULL: all zero). */
const proc_src_stats_t *proc_src_stats(const proc_t *p);

/* A report's sources (a dump, a heatmap, top): each file read once, known by its
 * identity (device, inode) whatever the spelling of its name; at most
 * PROC_SRC_CACHE_FILES files and PROC_SRC_CACHE_BYTES bytes of text held, and
 * PROC_SRC_CACHE_NAMES names looked up (one open each): past a bound a file is not
 * read (PROC_SRC_OVER_BOUND) and costs nothing. */
#define PROC_SRC_CACHE_FILES 256
#define PROC_SRC_CACHE_BYTES (64u << 20)
#define PROC_SRC_CACHE_NAMES 4096
typedef struct proc_src_cache proc_src_cache_t;
/* A cache reading through p (NULL: nothing is opened). NULL without memory. */
proc_src_cache_t *proc_src_cache_new(proc_t *p);
void proc_src_cache_free(proc_src_cache_t *c);
/* The file 'path' names, as read (its state says whether it could be). Valid until the
 * cache is freed; NULL only without memory. */
const proc_src_t *proc_src_cache_get(proc_src_cache_t *c, const char *path);
/* The i-th distinct name that named a file not read (missing, denied, ...: "<...>" names
 * are not counted) and why, for a report's --json or --stats. Returns 0 with *path and
 * *why, or -1 past the last. */
int proc_src_cache_unread(const proc_src_cache_t *c, size_t i, const char **path, const char **why);

/* ---- tasks ---------------------------------------------------------------- */

/* Lists the target's thread ids into tids[0..cap). Returns 0 with *n set (the count may
 * exceed cap: only cap are stored), REMORA_ENOPROC, REMORA_EPERM. A core lists the
 * threads of its NT_PRSTATUS notes. */
int proc_tasks(proc_t *p, pid_t *tids, size_t cap, size_t *n);

/* The live process root's descendants (children, their children...), found from each
 * thread's list of children in /proc (on a kernel without one, from every process's
 * parent), into out[0..cap) (*n of them, at most cap). Returns 0 or REMORA_ENOPROC. */
int proc_descendants(pid_t root, pid_t *out, size_t cap, size_t *n);

/* A task's scheduler state letter from /proc/PID/task/TID/stat ('R', 'S', 'D', ...).
 * Returns 0 or REMORA_ENOPROC. */
int proc_task_state(proc_t *p, pid_t tid, char *state);

/* What the scheduler has counted for a task (/proc/PID/task/TID/schedstat): its time on a
 * CPU in ns (*run_ns: updated when it leaves a CPU, and at the scheduler's ticks while it
 * runs) and how many times it was switched onto one (*arrivals). A task whose arrivals
 * have not moved since an earlier call has not been put on a CPU since; one whose run
 * time has not moved either has not left one. Returns 0, REMORA_EUSAGE (a core or a
 * snapshot, states held for --blocking, or a kernel that does not count: use
 * proc_task_state each time), REMORA_ENOPROC. */
int proc_task_sched(proc_t *p, pid_t tid, uint64_t *run_ns, uint64_t *arrivals);

/* A live process's resident size in bytes (/proc/PID/statm's resident pages times the
 * page size). Returns 0, REMORA_ENOPROC (gone, or not a live process's), REMORA_EPERM,
 * REMORA_ECORRUPT (a line that does not parse). */
int proc_rss(pid_t pid, uint64_t *bytes);

/* 1 when proc_task_state() answers without a system call: a core, a snapshot, or the
 * states held for --blocking (proc_hold_states). */
int proc_states_held(const proc_t *p);

/* Reads the state of each of tids[0..n) now and keeps it: proc_task_state() answers for
 * them from what was read until proc_release_states(). For --blocking, whose stopped
 * threads all read 't': whether a thread was running is what it was before the stop.
 * Returns 0 or REMORA_ENOMEM (nothing kept). */
int proc_hold_states(proc_t *p, const pid_t *tids, size_t n);
void proc_release_states(proc_t *p);

/* The task's comm (the kernel's name for it, /proc/PID/task/TID/comm; not threading's
 * thread name), NUL-terminated, at most 'len' - 1 bytes. Returns 0 or REMORA_ENOPROC. */
int proc_task_comm(proc_t *p, pid_t tid, char *name, size_t len);

/* The pid tracing a live process (/proc/PID/status's TracerPid): 0 for none, -1 when it
 * cannot be read. */
long proc_tracer(pid_t pid);

/* A live process's command line (/proc/PID/cmdline), its arguments joined by spaces,
 * NUL-terminated in out[0..cap); "" when it cannot be read. */
void proc_cmdline(pid_t pid, char *out, size_t cap);

/* A pidfd for pid (readable once it exits), or -1 (a kernel without pidfd_open). */
int proc_pidfd(pid_t pid);

/* ---- --blocking: the target held still while a sample is read (freeze.c) ---- */

typedef struct freezer freezer_t;

/* Seizes (ptrace) every thread of the live process p. Returns 0, REMORA_EPERM (another
 * tracer has it, or ptrace is not allowed), REMORA_ENOPROC, REMORA_ENOMEM, REMORA_EIO. */
int freeze_new(proc_t *p, freezer_t **out);

/* Stops every thread (seizing new ones) and waits for them, 100 ms at most. Returns 0,
 * REMORA_ENOPROC once every thread has ended, or an error. */
int freeze_stop(freezer_t *f);

/* From now on freeze_stop() reads each thread's state before it stops them, and
 * proc_task_state() gives that state until freeze_go() (proc_hold_states). */
void freeze_want_states(freezer_t *f);

/* Resumes the threads freeze_stop stopped, each with a signal it was stopped for. */
void freeze_go(freezer_t *f);

/* The main thread's wait status if freeze_stop saw it end (reaped, for a child), else -1. */
int freeze_exit_status(const freezer_t *f);

/* Lets go of every thread. */
void freeze_free(freezer_t *f);

/* ---- --native: a thread's registers (freeze.c) ------------------------------ */

/* x86_64 registers in DWARF's numbering: rax rdx rcx rbx rsi rdi rbp rsp r8-r15, rip. */
#define PROC_NREGS 17
#define PROC_REG_SP 7
#define PROC_REG_PC 16

/* Thread tid's registers into regs[0..PROC_NREGS): live, a thread that freeze_stop()
 * stopped (PTRACE_GETREGS); a core, NT_PRSTATUS's. Returns 0, REMORA_ENOPROC (no such
 * thread, or a live one not stopped by us), REMORA_EUSAGE (a snapshot, which keeps no
 * registers; or not x86_64). */
int proc_task_regs(proc_t *p, pid_t tid, uint64_t *regs);

/* Parses the state letter out of the text of a stat file. Returns 0 or REMORA_ECORRUPT. */
int proc_stat_parse_state(const char *text, size_t len, char *state);

/* ---- ELF files ------------------------------------------------------------ */

/* Maps an ELF file from an open fd (closed by elf_free, not by the caller).
 * Returns 0, REMORA_ENOTPY (not a 64-bit little-endian ELF), REMORA_EIO, REMORA_ENOMEM. */
int elf_open_fd(int fd, elf_t **out);
/* Same over a buffer that the caller keeps alive (tests, fuzzing). */
int elf_open_mem(const void *buf, size_t len, elf_t **out);
void elf_free(elf_t *e);

/* Looks 'name' up in .dynsym then .symtab. Returns 0 with the symbol's link-time
 * value (and size, if 'size' is not NULL), or REMORA_ENOTPY when absent. */
int elf_symbol(const elf_t *e, const char *name, uint64_t *value, uint64_t *size);

/* A section's link-time address and size. Returns 0 or REMORA_ENOTPY. */
int elf_section(const elf_t *e, const char *name, uint64_t *addr, uint64_t *size);

#ifdef REMORA_TESTING
/* The file's bytes at link-time address [addr, addr+len), if they are in the file
 * (not .bss). Returns a pointer into the mapped file or NULL. */
const void *elf_at(const elf_t *e, uint64_t addr, size_t len);
#endif

/* Link-time vaddr of the PT_LOAD segment that starts at file offset 0 (page-aligned),
 * used with the mapping of offset 0 to compute the load bias. Returns 0 or REMORA_ENOTPY. */
int elf_base_vaddr(const elf_t *e, uint64_t *vaddr);

/* The whole file (for scans). */
const unsigned char *elf_bytes(const elf_t *e, size_t *len);

#endif
