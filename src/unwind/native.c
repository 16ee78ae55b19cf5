/* unwind/native.c — --native: each thread's C stack merged with its Python stack.
 *
 * The C stack is unwound by elfutils' libdwfl (CFI from .eh_frame/.debug_frame, the
 * x86_64 frame-pointer rule where a frame has none) over remora's own memory source: the
 * thread's registers (a live thread held still by freeze.c, or a core's NT_PRSTATUS) and
 * its stack, copied in one read from the stack pointer to the end of its mapping (at most
 * NAT_STACK_MAX); any other word is read alone, NAT_WORD_READS at most per thread. Frames
 * are named from the files' symbol tables (file:line where debug information is found),
 * "??" with the module and offset where no symbol covers them.
 *
 * Merging (native_merge.c): each call of the interpreter's eval loop on the C stack is replaced by the
 * Python frames it ran (unw_frame_t.entry marks where each call's frames begin). Which C
 * frame is an eval loop's is found, in order of preference, by an address the eval loop
 * keeps in its own C frame: 3.12+ the C-owned shim frame it pushes (a local variable),
 * 3.11 its _PyCFrame (a local, linked from tstate->cframe); else (3.9/3.10) by the address
 * range of _PyEval_EvalFrameDefault (and its .cold parts) in the symbol tables. When
 * neither is known, the Python frames not placed go outermost, after the C frames.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <dwarf.h>

#include "remora.h"
#include "native_int.h"

/* ---- libdwfl's view of the thread: registers and memory ---------------------- */

static pid_t cb_next_thread(Dwfl *dwfl, void *arg, void **thread_arg)
{
    (void)dwfl, (void)arg, (void)thread_arg;
    return 0;                       /* threads are asked for by id only */
}

static bool cb_get_thread(Dwfl *dwfl, pid_t tid, void *arg, void **thread_arg)
{
    (void)dwfl, (void)tid;
    *thread_arg = arg;
    return true;
}

bool nat_memory_read(Dwfl *dwfl, Dwarf_Addr addr, Dwarf_Word *result, void *arg)
{
    unw_native_t *n = arg;

    (void)dwfl;
    if (addr >= n->stack_lo && n->stack_len >= 8 && addr - n->stack_lo <= n->stack_len - 8) {
        memcpy(result, n->stack + (addr - n->stack_lo), 8);
        return true;
    }
    if (n->words >= n->words_max)
        return false;
    n->words++;
    return proc_read(n->p, addr, result, 8) == REMORA_OK;
}

static bool cb_set_initial_registers(Dwfl_Thread *thread, void *arg)
{
    unw_native_t *n = arg;

    if (!dwfl_thread_state_registers(thread, 0, PROC_NREGS, (const Dwarf_Word *)n->regs))
        return false;
    dwfl_thread_state_register_pc(thread, n->regs[PROC_REG_PC]);
    return true;
}

static const Dwfl_Thread_Callbacks thread_cb = {
    .next_thread = cb_next_thread,
    .get_thread = cb_get_thread,
    .memory_read = nat_memory_read,
    .set_initial_registers = cb_set_initial_registers,
};

static void keep_ranges(unw_native_t *n, const proc_maps_t *m);
static int funcs_module(Dwfl_Module *mod, void **userdata, const char *name, Dwarf_Addr start,
                        void *arg);
static void funcs_sort(unw_native_t *n);

/* ---- modules ------------------------------------------------------------------ */

/* The ranges of _PyEval_EvalFrameDefault (and parts of it, "...cold") in mod. */
static void find_eval(unw_native_t *n, Dwfl_Module *mod)
{
    int k, nsym = dwfl_module_getsymtab(mod);
    static const char want[] = "_PyEval_EvalFrameDefault";

    for (k = 1; k < nsym && n->neval < NAT_EVAL_RANGES; k++) {
        GElf_Sym sym;
        GElf_Addr addr;
        const char *name = dwfl_module_getsym_info(mod, k, &sym, &addr, NULL, NULL, NULL);
        if (name == NULL || GELF_ST_TYPE(sym.st_info) != STT_FUNC || sym.st_size == 0 ||
            strncmp(name, want, sizeof want - 1) != 0 ||
            (name[sizeof want - 1] != '\0' && name[sizeof want - 1] != '.'))
            continue;
        n->eval_lo[n->neval] = addr;
        n->eval_hi[n->neval] = addr + sym.st_size;
        n->neval++;
    }
}

static int eval_module(Dwfl_Module *mod, void **userdata, const char *name, Dwarf_Addr start,
                       void *arg)
{
    (void)userdata, (void)start;
    if (name != NULL && strstr(name, "python") != NULL)
        find_eval(arg, mod);
    return DWARF_CB_OK;
}

int nat_eval_pc(const unw_native_t *n, uint64_t pc)
{
    size_t i;

    for (i = 0; i < n->neval; i++)
        if (pc >= n->eval_lo[i] && pc < n->eval_hi[i])
            return 1;
    return 0;
}

/* Reports every ELF file mapped in the target (through /proc/PID/root, or a core's
 * files) at the address its first page is mapped at. Returns 0 or a REMORA_E* code. */
/* A hash of the files mapped at offset 0 (where, which inode, which path). */
static uint64_t files_hash(const proc_maps_t *m)
{
    uint64_t h = 1469598103934665603ull;
    size_t i;
    const unsigned char *s;

    for (i = 0; i < m->n; i++) {
        if (m->v[i].path == NULL || m->v[i].path[0] != '/' || m->v[i].offset != 0)
            continue;
        h = (h ^ m->v[i].start) * 1099511628211ull;
        h = (h ^ m->v[i].inode) * 1099511628211ull;
        for (s = (const unsigned char *)m->v[i].path; *s; s++)
            h = (h ^ *s) * 1099511628211ull;
    }
    return h;
}

static int report_modules(unw_native_t *n)
{
    proc_maps_t m;
    size_t i, reported = 0;
    uint64_t h;
    int err;

    n->mapped_ns = remora_now_ns();
    if ((err = proc_maps_read(n->p, &m)) != REMORA_OK)
        return err;
    keep_ranges(n, &m);
    h = files_hash(&m);
    if (n->dwfl != NULL && h == n->files_hash) {
        /* the same files at the same places: a pc in none is in memory no file backs
         * (JIT code), and reporting them again would not name it */
        proc_maps_fini(&m);
        return REMORA_OK;
    }
    n->files_hash = h;
    if (n->dwfl != NULL)
        dwfl_end(n->dwfl);
    n->dwfl = dwfl_begin(&n->cb);
    n->neval = 0;
    memset(n->syms, 0, NAT_SYMS * sizeof *n->syms);
    n->nfuncs = 0;
    if (n->dwfl == NULL) {
        proc_maps_fini(&m);
        return REMORA_ENOMEM;
    }
    dwfl_report_begin(n->dwfl);
    for (i = 0; i < m.n && reported < NAT_MODULES; i++) {
        const proc_map_t *mp = &m.v[i];
        const char *base;
        Dwfl_Module *mod;
        size_t j;
        int fd;
        if (mp->path == NULL || mp->path[0] != '/' || mp->offset != 0)
            continue;
        /* once per file: its first mapping at offset 0 */
        for (j = 0; j < i; j++)
            if (m.v[j].offset == 0 && m.v[j].path != NULL && m.v[j].inode == mp->inode &&
                strcmp(m.v[j].path, mp->path) == 0)
                break;
        if (j < i)
            continue;
        fd = proc_open_mapped_file(n->p, mp->path, mp->inode);
        if (fd < 0)
            continue;
        base = strrchr(mp->path, '/');
        base = base ? base + 1 : mp->path;
        mod = dwfl_report_elf(n->dwfl, base, mp->path, fd, mp->start, false);
        if (mod == NULL) {
            close(fd);
            continue;
        }
        reported++;
    }
    proc_maps_fini(&m);
    if (dwfl_report_end(n->dwfl, NULL, NULL) != 0 || reported == 0)
        return REMORA_ENOTPY;
    /* the eval loop's symbols, in the modules that hold the interpreter */
    dwfl_getmodules(n->dwfl, eval_module, n, 0);
    /* every function's range, read now rather than at a sample (a symbol table's lookup
     * is a scan: a tick's new pc paid one each) */
    dwfl_getmodules(n->dwfl, funcs_module, n, 0);
    funcs_sort(n);
    if (!dwfl_attach_state(n->dwfl, NULL, proc_pid(n->p), &thread_cb, n))
        return REMORA_ENOTPY;
    return REMORA_OK;
}

/* ---- one thread's C stack ----------------------------------------------------- */

static int cb_frame(Dwfl_Frame *state, void *arg)
{
    unw_native_t *n = arg;
    Dwarf_Addr pc;
    Dwarf_Word sp = 0;
    bool activation;

    if (!dwfl_frame_pc(state, &pc, &activation))
        return DWARF_CB_ABORT;          /* ends here (libdwfl knows no more) */
    if (n->nraw == NAT_MAX_FRAMES) {
        n->end = NAT_END_CUT;
        return DWARF_CB_ABORT;
    }
    if (dwfl_frame_reg(state, PROC_REG_SP, &sp) != 0)
        sp = 0;
    /* each caller's frame lies above its callee's: a stack that does not climb loops */
    if (n->nraw > 0 && sp != 0 && n->raw[n->nraw - 1].sp != 0 && sp <= n->raw[n->nraw - 1].sp) {
        n->end = NAT_END_CUT;
        return DWARF_CB_ABORT;
    }
    if (pc == 0)
        return DWARF_CB_ABORT;
    n->raw[n->nraw].pc = activation || pc == 0 ? pc : pc - 1;
    n->raw[n->nraw].sp = sp;
    n->nraw++;
    return DWARF_CB_OK;
}

/* Keeps the writable mappings' ranges of m (where stacks are), sorted as maps lists
 * them. */
static void keep_ranges(unw_native_t *n, const proc_maps_t *m)
{
    size_t i;

    n->nranges = 0;
    for (i = 0; i < m->n; i++) {
        if (m->v[i].perms[1] != 'w')
            continue;
        if (remora_grow((void **)&n->ranges, &n->cap_ranges, n->nranges + 1, sizeof *n->ranges))
            return;
        n->ranges[n->nranges].start = m->v[i].start;
        n->ranges[n->nranges].end = m->v[i].end;
        n->nranges++;
    }
}

/* The end of the writable mapping holding a, or 0. */
static uint64_t range_end(const unw_native_t *n, uint64_t a)
{
    size_t lo = 0, hi = n->nranges;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (a < n->ranges[mid].start)
            hi = mid;
        else if (a >= n->ranges[mid].end)
            lo = mid + 1;
        else
            return n->ranges[mid].end;
    }
    return 0;
}

/* Copies the stack from sp up to the end of its mapping (NAT_STACK_MAX at most); a stack
 * in no mapping known (a thread born since the maps were read: read again, once a round)
 * is copied to a page end, halving what is asked until a read succeeds. */
static void copy_stack(unw_native_t *n, uint64_t sp)
{
    uint64_t lo = sp >= 128 ? sp - 128 : 0, end = range_end(n, sp), first;

    n->stack_lo = lo;
    n->stack_len = 0;
    if (end == 0 && !n->maps_again) {
        proc_maps_t m;
        n->maps_again = 1;
        if (proc_maps_read(n->p, &m) == REMORA_OK) {
            keep_ranges(n, &m);
            proc_maps_fini(&m);
            end = range_end(n, sp);
        }
    }
    if (end != 0 && end > lo && end - lo <= NAT_STACK_MAX &&
        proc_read(n->p, lo, n->stack, (size_t)(end - lo)) == REMORA_OK) {
        n->stack_len = (size_t)(end - lo);
        return;
    }
    end = (lo + NAT_STACK_MAX) & ~(uint64_t)4095;
    first = (lo + 4096) & ~(uint64_t)4095;
    while (end > lo) {
        if (proc_read(n->p, lo, n->stack, (size_t)(end - lo)) == REMORA_OK) {
            n->stack_len = (size_t)(end - lo);
            return;
        }
        if (end <= first)
            return;
        end = first + (((end - first) / 2) & ~(uint64_t)4095);
    }
}

/* Unwinds from n->regs over n->stack. */
static int unwind_regs(unw_native_t *n, pid_t tid)
{
    n->nraw = 0;
    n->end = NAT_END_OK;
    n->words = 0;
    if (n->dwfl == NULL)
        return REMORA_ENOTPY;
    /* 0: the stack's end (the outermost frame's CFI says so); -1 after frames: a frame
     * neither its CFI nor its frame pointer could unwind (or a loop libdwfl saw) */
    if (dwfl_getthread_frames(n->dwfl, tid, cb_frame, n) < 0 && n->nraw > 0)
        n->end = NAT_END_CUT;
    return REMORA_OK;
}

static int walk_native(unw_native_t *n, pid_t tid)
{
    int err = proc_task_regs(n->p, tid, n->regs);

    n->nraw = 0;
    if (err)
        return err;
    copy_stack(n, n->regs[PROC_REG_SP]);
    return unwind_regs(n, tid);
}

/* ---- symbols: a C frame's function and file --------------------------------------- */

/* The index of the first function range whose hi is above pc (nfuncs: none). */
static size_t func_at(const unw_native_t *n, uint64_t pc)
{
    return REMORA_UPPER_U64(n->funcs, n->nfuncs, nat_func_t, hi, pc);
}

/* Every sized function symbol of a module into n->funcs (unsorted: funcs_sort). */
static int funcs_module(Dwfl_Module *mod, void **userdata, const char *name, Dwarf_Addr start,
                        void *arg)
{
    unw_native_t *n = arg;
    int k, nsym = dwfl_module_getsymtab(mod);

    (void)userdata, (void)name, (void)start;
    for (k = 1; k < nsym && n->nfuncs < NAT_FUNCS; k++) {
        GElf_Sym sym;
        GElf_Addr addr;
        const char *s = dwfl_module_getsym_info(mod, k, &sym, &addr, NULL, NULL, NULL);
        if (s == NULL || *s == '\0' || GELF_ST_TYPE(sym.st_info) != STT_FUNC || sym.st_size == 0 ||
            addr + sym.st_size < addr)
            continue;
        if (remora_grow((void **)&n->funcs, &n->cap_funcs, n->nfuncs + 1, sizeof *n->funcs))
            return DWARF_CB_ABORT;
        n->funcs[n->nfuncs++] = (nat_func_t){ addr, addr + sym.st_size,
                                              GELF_ST_BIND(sym.st_info) == STB_GLOBAL ? 0u
                                              : GELF_ST_BIND(sym.st_info) == STB_WEAK ? 1u : 2u,
                                              s, NULL, NULL };
    }
    return DWARF_CB_OK;
}

static int func_cmp(const void *a, const void *b)
{
    const nat_func_t *x = a, *y = b;

    if (x->lo != y->lo)
        return x->lo < y->lo ? -1 : 1;
    /* at one address: "select" before "__GI___select" and "__select", as libdwfl's lookup
     * prefers a global symbol to a weak one, a weak one to a local one */
    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    return x->hi > y->hi ? -1 : x->hi < y->hi;      /* the widest first */
}

/* n->funcs sorted by address, each range cut where the next one begins (an alias or a
 * nested symbol: the first of a place stays, as libdwfl's lookup would mostly name it). */
static void funcs_sort(unw_native_t *n)
{
    size_t i, k = 0;

    qsort(n->funcs, n->nfuncs, sizeof *n->funcs, func_cmp);
    for (i = 0; i < n->nfuncs; i++) {
        if (k > 0 && n->funcs[i].lo < n->funcs[k - 1].hi)
            continue;               /* inside the one kept before */
        n->funcs[k++] = n->funcs[i];
    }
    n->nfuncs = k;
}

/* Remembers [lo, hi) as function 'fn' (file the module's), unless it overlaps one known
 * or the table is full: a symbol the tables read up front did not give. */
static void func_keep(unw_native_t *n, uint64_t lo, uint64_t hi, const char *fn, const char *file)
{
    size_t i = func_at(n, lo);

    if (hi <= lo || n->nfuncs >= NAT_FUNCS || (i < n->nfuncs && n->funcs[i].lo < hi))
        return;
    if (remora_grow((void **)&n->funcs, &n->cap_funcs, n->nfuncs + 1, sizeof *n->funcs))
        return;
    memmove(n->funcs + i + 1, n->funcs + i, (n->nfuncs - i) * sizeof *n->funcs);
    n->funcs[i] = (nat_func_t){ lo, hi, 0, fn, fn, file };
    n->nfuncs++;
}

const nat_sym_t *nat_name_pc(unw_native_t *n, uint64_t pc)
{
    nat_sym_t *e = &n->syms[(pc * 0x9E3779B97F4A7C15ull) >> (64 - 12) & (NAT_SYMS - 1)];
    Dwfl_Module *mod;
    char buf[4200];
    const char *fn = NULL, *file = NULL;
    int line = 0;
    size_t i;

    if (e->pc == pc && e->function != NULL)
        return e;
    mod = n->dwfl ? dwfl_addrmodule(n->dwfl, pc) : NULL;
    i = func_at(n, pc);
    if (mod != NULL && i < n->nfuncs && n->funcs[i].lo <= pc) {
        /* a function named before: its line alone looked up (a binary search; the symbol
         * table's is a scan of every symbol) */
        nat_func_t *nf = &n->funcs[i];
        Dwfl_Line *l = dwfl_module_getsrc(mod, pc);
        const char *src = l ? dwfl_lineinfo(l, NULL, &line, NULL, NULL, NULL) : NULL;
        if (nf->function == NULL) {
            /* "clock_nanosleep@GLIBC_2.2.5": the name without its symbol version */
            size_t len = strcspn(nf->raw, "@");
            nf->function = strtab_intern(n->strs, nf->raw, len < UNW_MAX_NAME ? len : UNW_MAX_NAME);
        }
        if (nf->file == NULL) {
            const char *mainfile = NULL;
            const char *modname = dwfl_module_info(mod, NULL, NULL, NULL, NULL, NULL, &mainfile, NULL);
            const char *modfile = mainfile ? mainfile : modname ? modname : "";
            nf->file = strtab_intern(n->strs, modfile, strnlen(modfile, UNW_MAX_NAME));
        }
        fn = nf->function;
        if (src == NULL || line <= 0) {
            line = 0;
            file = nf->file;
        } else {
            file = strtab_intern(n->strs, src, strnlen(src, UNW_MAX_NAME));
        }
    } else if (mod != NULL) {
        Dwarf_Addr start = 0;
        const char *mainfile = NULL;
        const char *modname = dwfl_module_info(mod, NULL, &start, NULL, NULL, NULL, &mainfile, NULL);
        GElf_Off off;
        GElf_Sym sym;
        const char *s = dwfl_module_addrinfo(mod, pc, &off, &sym, NULL, NULL, NULL);
        if (s != NULL && *s) {
            Dwfl_Line *l = dwfl_module_getsrc(mod, pc);
            const char *src = l ? dwfl_lineinfo(l, NULL, &line, NULL, NULL, NULL) : NULL;
            const char *modfile = mainfile ? mainfile : modname ? modname : "";
            /* "clock_nanosleep@GLIBC_2.2.5": the name without its symbol version */
            fn = strtab_intern(n->strs, s, strcspn(s, "@") < UNW_MAX_NAME ? strcspn(s, "@") : UNW_MAX_NAME);
            if (src == NULL || line <= 0) {
                line = 0;
                src = modfile;
            }
            file = strtab_intern(n->strs, src, strnlen(src, UNW_MAX_NAME));
            if (fn != NULL && sym.st_size > 0 && off < sym.st_size)
                func_keep(n, pc - off, pc - off + sym.st_size, fn,
                          strtab_intern(n->strs, modfile, strnlen(modfile, UNW_MAX_NAME)));
        } else {
            int k = snprintf(buf, sizeof buf, "%s+0x%llx", modname ? modname : "?",
                             (unsigned long long)(pc - start));
            fn = strtab_intern(n->strs, "??", 2);
            file = strtab_intern(n->strs, buf, k > 0 && (size_t)k < sizeof buf ? (size_t)k : 0);
        }
    } else {
        int k = snprintf(buf, sizeof buf, "0x%llx", (unsigned long long)pc);
        fn = strtab_intern(n->strs, "??", 2);
        file = strtab_intern(n->strs, buf, (size_t)k);
    }
    if (fn == NULL || file == NULL)
        return NULL;
    e->pc = pc;
    e->function = fn;
    e->file = file;
    e->line = line;
    return e;
}

/* ---- the handle -------------------------------------------------------------------- */

int native_new(proc_t *p, strtab_t *strs, unw_native_t **out)
{
    unw_native_t *n;
    int err;

    *out = NULL;
#if !defined(__x86_64__)
    (void)p, (void)strs;
    return REMORA_EUSAGE;
#else
    if (proc_kind(p) == PROC_SNAPSHOT)
        return REMORA_EUSAGE;
    if ((n = calloc(1, sizeof *n)) == NULL)
        return REMORA_ENOMEM;
    n->p = p;
    n->strs = strs;
    n->words_max = NAT_WORD_READS;
    n->stack = malloc(NAT_STACK_MAX);
    n->syms = calloc(NAT_SYMS, sizeof *n->syms);
    if (n->stack == NULL || n->syms == NULL) {
        native_free(n);
        return REMORA_ENOMEM;
    }
    /* debug information from the files and /usr/lib/debug only: never a debuginfod
     * server (a network fetch in a sample) */
    unsetenv("DEBUGINFOD_URLS");
    n->cb.find_elf = dwfl_linux_proc_find_elf;
    n->cb.find_debuginfo = dwfl_standard_find_debuginfo;
    if ((err = report_modules(n)) != REMORA_OK) {
        native_free(n);
        return err;
    }
    *out = n;
    return REMORA_OK;
#endif
}

void native_free(unw_native_t *n)
{
    if (n == NULL)
        return;
    if (n->dwfl != NULL)
        dwfl_end(n->dwfl);
    free(n->stack);
    free(n->syms);
    free(n->funcs);
    free(n->out);
    free(n->first);
    free(n->ranges);
    free(n);
}

void native_merge_all(unw_native_t *n, const unwinder_t *u, unw_thread_t *th, size_t nth)
{
    size_t i, k = 0;
    int remapped = 0;

    n->maps_again = 0;
    if (remora_grow((void **)&n->first, &n->cap_first, nth + 1, sizeof *n->first))
        return;
    for (i = 0; i < nth; i++) {
        size_t start = k, c;
        int err;
        n->first[i] = k;
        /* the kernel engine's rounds: a thread read there is off a CPU, and not stopped
         * (no registers to be had): its C stack is absent (its ticks carry theirs) */
        if (th[i].error || th[i].native_id <= 0 || u->kern != NULL ||
            walk_native(n, th[i].native_id) != REMORA_OK) {
            n->nraw = 0;
            n->stack_len = 0;           /* no other thread's copy for this one's merge */
            n->st.unreadable++;
            if (!th[i].error && nat_put_marker(n, &k, UNW_NATIVE_NONE) != REMORA_OK)
                return;
        } else {
            /* a pc in no module: a library loaded since, report them again (once a
             * second at most), then unwind again */
            for (c = 0; c < n->nraw && n->dwfl && dwfl_addrmodule(n->dwfl, n->raw[c].pc) != NULL; c++)
                ;
            if (c < n->nraw && !remapped && remora_now_ns() - n->mapped_ns > NAT_REMAP_NS) {
                uint64_t before = n->files_hash;
                remapped = 1;
                if (report_modules(n) == REMORA_OK && n->files_hash != before)
                    walk_native(n, th[i].native_id);
            }
            n->st.threads++;
            n->st.frames += n->nraw;
            n->st.cut += n->end == NAT_END_CUT;
        }
        if ((err = nat_merge(n, &u->target->layout, &th[i], &k)) != REMORA_OK) {
            k = start;
            return;
        }
    }
    n->first[nth] = k;
    for (i = 0; i < nth; i++) {
        th[i].frames = n->out + n->first[i];
        th[i].nframes = n->first[i + 1] - n->first[i];
    }
}

int native_merge_buffer(unw_native_t *n, const py_layout_t *L, const uint64_t *regs,
                        uint64_t stack_lo, const void *stack, size_t len, unw_thread_t *th)
{
    size_t k = 0, c;
    int err;

    /* never a word outside the copy: the thread it came from has moved on (a frame whose
     * caller lies outside ends the walk, NAT_END_CUT) */
    unsigned char *own = n->stack;

    n->words_max = 0;
    memcpy(n->regs, regs, sizeof n->regs);
    n->stack_lo = stack_lo;
    n->stack_len = len < NAT_STACK_MAX ? len : NAT_STACK_MAX;
    /* the caller's copy read in place (only read: nat_memory_read and the merge), put
     * back before returning (a tick's is 32 KB: a copy per tick was a tenth of remora) */
    n->stack = (unsigned char *)(uintptr_t)stack;
    unwind_regs(n, proc_pid(n->p));
    /* a pc in no module: a library loaded since, reported again (once a second at most;
     * the maps file only, the target never stopped), then unwound again */
    for (c = 0; c < n->nraw && n->dwfl && dwfl_addrmodule(n->dwfl, n->raw[c].pc) != NULL; c++)
        ;
    if (c < n->nraw && proc_kind(n->p) == PROC_LIVE && remora_now_ns() - n->mapped_ns > NAT_REMAP_NS) {
        uint64_t before = n->files_hash;
        if (report_modules(n) == REMORA_OK && n->files_hash != before)
            unwind_regs(n, proc_pid(n->p));
    }
    n->words_max = NAT_WORD_READS;
    n->st.threads++;
    n->st.frames += n->nraw;
    n->st.cut += n->end == NAT_END_CUT;
    err = nat_merge(n, L, th, &k);
    n->stack = own;
    n->stack_len = 0;
    n->has_ts_frame = 0;
    if (err != REMORA_OK)
        return err;
    th->frames = n->out;
    th->nframes = k;
    th->held = 0;                   /* other frames than those named below the anchor */
    th->held_id = 0;
    return REMORA_OK;
}

void native_set_ts_frame(unw_native_t *n, uint64_t word)
{
    n->has_ts_frame = 1;
    n->ts_frame = word;
}

/* One module's CFI and line tables, loaded now (libdwfl loads them at their first use). */
static int warm_module(Dwfl_Module *mod, void **userdata, const char *name, Dwarf_Addr start,
                       void *arg)
{
    Dwarf_Addr bias;
    Dwarf_Die *cu = NULL;
    size_t nlines;

    (void)userdata, (void)name, (void)start, (void)arg;
    dwfl_module_eh_cfi(mod, &bias);
    dwfl_module_dwarf_cfi(mod, &bias);
    while ((cu = dwfl_module_nextcu(mod, cu, &bias)) != NULL)
        dwfl_getsrclines(cu, &nlines);
    return DWARF_CB_OK;
}

void native_warm(unw_native_t *n)
{
    if (n->dwfl != NULL)
        dwfl_getmodules(n->dwfl, warm_module, n, 0);
}

int native_merge_none(unw_native_t *n, const py_layout_t *L, unw_thread_t *th)
{
    size_t k = 0;
    int err;

    n->nraw = 0;
    n->end = NAT_END_OK;
    n->stack_len = 0;               /* no other thread's copy for this one's merge */
    n->has_ts_frame = 0;
    n->st.unreadable++;
    if ((err = nat_put_marker(n, &k, UNW_NATIVE_NONE)) != REMORA_OK ||
        (err = nat_merge(n, L, th, &k)) != REMORA_OK)
        return err;
    th->frames = n->out;
    th->nframes = k;
    th->held = 0;
    th->held_id = 0;
    return REMORA_OK;
}

#ifdef REMORA_TESTING
int native_count_frames(unw_native_t *n, pid_t tid)
{
    n->maps_again = 0;
    return walk_native(n, tid) == REMORA_OK ? (int)n->nraw : 0;
}
#endif

void native_get_stats(const unw_native_t *n, unw_native_stats_t *out)
{
    *out = n->st;
}
