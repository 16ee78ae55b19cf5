/* proc/ — the process handle: memory reads, /proc maps, ELF files, tasks.
 *
 * Everything above this layer sees a proc_t and REMORA_E* codes; only these files
 * include <sys/uio.h> or look at errno from the kernel.
 */
#ifndef REMORA_PROC_H
#define REMORA_PROC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct proc proc_t;

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
} proc_stats_t;

/* Opens the live process 'pid'. Returns 0, REMORA_ENOPROC if it does not exist,
 * REMORA_EPERM if we may not read it, REMORA_ENOMEM. Caller frees with proc_free(). */
int proc_open(pid_t pid, proc_t **out);
void proc_free(proc_t *p);
pid_t proc_pid(const proc_t *p);
const proc_stats_t *proc_stats(const proc_t *p);

/* Reads exactly 'len' bytes at 'addr'. Returns 0, or REMORA_EFAULT (unmapped or short),
 * REMORA_ENOPROC (process gone), REMORA_EPERM. */
int proc_read(proc_t *p, uint64_t addr, void *buf, size_t len);

/* Reads every segment in one system call where the kernel allows (it splits calls
 * over IOV_MAX). Returns 0 when every segment was read whole, else as proc_read. */
int proc_readv(proc_t *p, const proc_iov_t *iov, size_t n);

/* Reads a pointer-sized (8-byte) value. */
int proc_read_u64(proc_t *p, uint64_t addr, uint64_t *out);

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
 * Returns an fd or -1. */
int proc_open_mapped_file(proc_t *p, const char *path, uint64_t inode);

/* ---- tasks ---------------------------------------------------------------- */

/* Lists the target's thread ids into tids[0..cap). Returns 0 with *n set (the count may
 * exceed cap: only cap are stored), REMORA_ENOPROC, REMORA_EPERM. */
int proc_tasks(proc_t *p, pid_t *tids, size_t cap, size_t *n);

/* A task's scheduler state letter from /proc/PID/task/TID/stat ('R', 'S', 'D', ...).
 * Returns 0 or REMORA_ENOPROC. */
int proc_task_state(proc_t *p, pid_t tid, char *state);

/* The task's name (comm), NUL-terminated, at most 'len' - 1 bytes. Returns 0 or REMORA_ENOPROC. */
int proc_task_name(proc_t *p, pid_t tid, char *name, size_t len);

/* Parses the state letter out of the text of a stat file. Returns 0 or REMORA_ECORRUPT. */
int proc_stat_parse_state(const char *text, size_t len, char *state);

/* ---- ELF files ------------------------------------------------------------ */

typedef struct elf elf_t;

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

/* The file's bytes at link-time address [addr, addr+len), if they are in the file
 * (not .bss). Returns a pointer into the mapped file or NULL. */
const void *elf_at(const elf_t *e, uint64_t addr, size_t len);

/* Link-time vaddr of the PT_LOAD segment that starts at file offset 0 (page-aligned),
 * used with the mapping of offset 0 to compute the load bias. Returns 0 or REMORA_ENOTPY. */
int elf_base_vaddr(const elf_t *e, uint64_t *vaddr);

/* The whole file (for scans). */
const unsigned char *elf_bytes(const elf_t *e, size_t *len);

#endif
