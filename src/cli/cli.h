/* cli/ — the remora command: argument parsing, messages, subcommands.
 *
 * Which file does what: docs/layout.md.
 */
#ifndef REMORA_CLI_H
#define REMORA_CLI_H

#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

#include "../proc/proc.h"
#include "../py/py.h"

/* main.c */

/* Prints "remora: <message>" and a newline on stderr. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Prints the one-line explanation of an error met while attaching to pid, and
 * returns the exit code for it. 'why' is a detail from the lower layers or NULL. */
int cli_fail(int err, pid_t pid, const char *why);

/* The subcommands (dump.c, record.c, top.c): each returns the exit code. */
int cmd_dump(int argc, char **argv);
int cmd_record(int argc, char **argv);
int cmd_convert(int argc, char **argv);
int cmd_top(int argc, char **argv);

/* opts.c: the option tables. A command's options are one table, ended by an entry of
 * id 0: its parser walks it (cli_opt_next) and its --help prints it (cli_opt_help), so
 * what the help lists is what the parser takes. */
typedef struct cli_opt {
    int id;                 /* the command's code for it, > 0 */
    const char *shrt;       /* "-p", or NULL */
    const char *lng;        /* "--pid", or NULL */
    const char *alias;      /* another long name ("--nolineno"), or NULL */
    const char *value;      /* what it takes ("PID"); NULL: a flag */
    const char *help;       /* its one line in --help; NULL: a name planned but not available
                             * yet (refused with one line, not in the help) */
    int rest;               /* "--": what follows is the command to run */
} cli_opt_t;

#define CLI_ARG_BAD (-1)    /* an unknown option or a value given to a flag: one line printed */
#define CLI_ARG_WORD (-2)   /* not an option (an INPUT, a stray word) */

/* Reads argv[*i] against opts. Returns the option's id, with *flag the name as given (for
 * messages) and *value its value (joined "-r100", "--rate=100", or the next argument,
 * *i moved past it), NULL for a flag or a value missing at the end; for a 'rest' entry
 * *value is the next argument (NULL if none) and *i stays. CLI_ARG_WORD for a word (*flag
 * is it); CLI_ARG_BAD after one line naming 'cmd'. */
int cli_opt_next(const char *cmd, const cli_opt_t *opts, int argc, char **argv, int *i,
                 const char **flag, const char **value);

/* Prints "usage: USAGE", the one-line ABOUT, then each option on one line. */
void cli_opt_help(FILE *f, const char *usage, const char *about, const cli_opt_t *opts);

/* args.c: option values. Each parser returns 0, or -1 (nothing stored) for anything but
 * the form and range its cli_*_accepts text describes. */

#define CLI_PID_MAX 4194304             /* the kernel's PID_MAX_LIMIT */
#define CLI_RATE_MAX 1000000            /* Hz */
#define CLI_DURATION_MAX (30 * 86400)   /* seconds */
#define CLI_ROWS_MAX 1000000

extern const char cli_pid_accepts[], cli_rate_accepts[], cli_duration_accepts[],
    cli_rows_accepts[];

/* Decimal digits only, min <= value <= max. */
int cli_parse_uint(const char *s, unsigned long long min, unsigned long long max,
                   unsigned long long *out);

/* A pid, 1 to CLI_PID_MAX. */
int cli_parse_pid(const char *s, pid_t *out);
/* A word on the command line of 'what' (dump, record, top) taken as the target's pid, as
 * -p would be (`remora dump 1234`): *pos is set from it. Returns 0, or -1 after one line
 * when it is no pid or a second one ('usage' ends the line). */
int cli_word_pid(const char *what, const char *word, pid_t *pos, const char *usage);
/* After the options: a pid given as a word becomes *pid, unless -p gave another. Returns
 * 0, or -1 after one line. */
int cli_word_pid_check(const char *what, pid_t pos, pid_t *pid);

/* "1000", "10k", "2.5kHz", "1mhz" → Hz: a whole number from 1 to CLI_RATE_MAX (units hz,
 * k/khz, M/mhz, any case but a bare 'm'). */
int cli_parse_rate(const char *s, double *hz);

/* "30", "0.5", "250ms", "2m" → seconds, from 1 ms to CLI_DURATION_MAX (units s, ms, m). */
int cli_parse_duration(const char *s, double *seconds);

/* The one line for a bad option value: "CMD: FLAG takes ACCEPTS: 'VALUE' is not one", or
 * "...: none given" when value is NULL. Returns -1. */
int cli_bad_value(const char *cmd, const char *flag, const char *value, const char *accepts);

/* attach.c: what record and top share. */

/* The one line for a sampler that could not start (holder: the option that holds the
 * target with ptrace, "--blocking" or "--native", whose refusal it explains; NULL if
 * none); returns the exit code. */
int cli_sampler_fail(int err, pid_t pid, const char *holder);

/* 0 if the target's layout supports the mode, else one line and -1. */
int cli_check_mode(int mode, const py_target_t *t);

/* The options record and top share. */
typedef struct cli_sampling {
    pid_t pid;              /* -p */
    char **cmd;             /* -- CMD ARGS... */
    double rate;            /* -r, Hz (default 1000) */
    double duration;        /* -d, seconds (0: until stopped) */
    int mode;               /* --mode: enum sample_mode */
    int gc;                 /* 0 with --no-gc */
    int limit;              /* -l: rows of a table (0: the default) */
    int subprocesses;       /* --subprocesses */
    int blocking;           /* --blocking */
    int idle;               /* --idle: idle threads' samples kept (left out by default) */
    int nonblocking;        /* --nonblocking (py-spy's; the default): not with --blocking */
    int function;           /* --function, --nolineno: one frame per function */
    int opcodes;            /* --opcodes: each sample's innermost instruction */
    int native;             /* --native: C frames merged in (holds the target, as --blocking) */
    int mode_given;         /* --mode or --gil given: which, for the line refusing both */
    int async;              /* --async, --async-mode: 0, SAMPLE_ASYNC_RUNNING or SAMPLE_ASYNC_ALL
                             * (--async-mode alone implies --async) */
    int engine;             /* --engine: CLI_ENGINE_AUTO (default), _KERNEL or _USER */
    unsigned fault_period;  /* --fault-period: page faults a memory sample (0: not given,
                             * CLI_MEMORY_FAULTS) */
} cli_sampling_t;

/* the library's values (lib/engine.c decides) */
enum { CLI_ENGINE_AUTO = REMORA_ENGINE_AUTO, CLI_ENGINE_KERNEL = REMORA_ENGINE_KERNEL,
       CLI_ENGINE_USER = REMORA_ENGINE_USER };

void cli_sampling_init(cli_sampling_t *c);

/* The lines after the options of record's and top's --help: the modes. */
void cli_modes_help(void);

/* "wall", "cpu", "gil" or "exception". */
const char *cli_mode_name(int mode);

/* The options record and top share, for their tables (ids below CLI_O_OWN; a command's
 * own options number from CLI_O_OWN). */
enum cli_sampling_opt {
    CLI_O_HELP = 1, CLI_O_PID, CLI_O_CMD, CLI_O_RATE, CLI_O_DURATION, CLI_O_MODE, CLI_O_IDLE,
    CLI_O_NO_GC, CLI_O_SUBPROCESSES, CLI_O_BLOCKING, CLI_O_NONBLOCKING, CLI_O_GIL,
    CLI_O_FUNCTION, CLI_O_LIMIT, CLI_O_NATIVE, CLI_O_ASYNC, CLI_O_ASYNC_MODE, CLI_O_ENGINE, CLI_O_OPCODES,
    CLI_O_FAULT_PERIOD, CLI_O_OWN
};
#define CLI_OPT_HELP { CLI_O_HELP, "-h", "--help", NULL, NULL, "print this help and exit", 0 }
#define CLI_SAMPLING_OPTS \
    CLI_OPT_HELP, \
    { CLI_O_PID, "-p", "--pid", NULL, "PID", "the process to sample", 0 }, \
    { CLI_O_CMD, NULL, "--", NULL, "CMD ARGS...", \
      "run CMD, sample it to its end, exit with its code", 1 }, \
    { CLI_O_RATE, "-r", "--rate", NULL, "RATE", \
      "samples a second: 1000 (default), 10k, 2.5khz, 1mhz", 0 }, \
    { CLI_O_DURATION, "-d", "--duration", NULL, "SECONDS", \
      "stop after it: 30, 0.5, 250ms, 2m (default: never)", 0 }, \
    { CLI_O_MODE, NULL, "--mode", NULL, "MODE", \
      "wall (default), cpu, gil, exception, memory (below)", 0 }, \
    { CLI_O_FAULT_PERIOD, NULL, "--fault-period", NULL, "N", \
      "--mode memory: a sample every N page faults (64)", 0 }, \
    { CLI_O_GIL, NULL, "--gil", NULL, NULL, "the same as --mode gil (py-spy's flag)", 0 }, \
    { CLI_O_IDLE, NULL, "--idle", NULL, NULL, \
      "keep idle threads' samples (default: left out)", 0 }, \
    { CLI_O_NO_GC, NULL, "--no-gc", NULL, NULL, "no <GC> frame while the interpreter collects", 0 }, \
    { CLI_O_SUBPROCESSES, NULL, "--subprocesses", NULL, NULL, \
      "sample the target's child processes too", 0 }, \
    { CLI_O_BLOCKING, NULL, "--blocking", NULL, NULL, \
      "stop the target (ptrace) while a sample is read", 0 }, \
    { CLI_O_NONBLOCKING, NULL, "--nonblocking", NULL, NULL, \
      "never stop the target (the default; py-spy's flag)", 0 }, \
    { CLI_O_NATIVE, NULL, "--native", NULL, NULL, \
      "C frames too, merged with the Python frames (ptrace)", 0 }, \
    { CLI_O_FUNCTION, NULL, "--function", "--nolineno", NULL, \
      "one frame per function, at its first line", 0 }, \
    { CLI_O_OPCODES, NULL, "--opcodes", NULL, NULL, \
      "each sample's bytecode instruction, specialised", 0 }, \
    { CLI_O_ASYNC, NULL, "--async", NULL, NULL, \
      "asyncio: a task's awaiter chain instead of the loop", 0 }, \
    { CLI_O_ASYNC_MODE, NULL, "--async-mode", NULL, "MODE", \
      "running (default), or all: waiting tasks too", 0 }, \
    { CLI_O_ENGINE, NULL, "--engine", NULL, "ENGINE", \
      "auto (default), kernel (BPF) or user (below)", 0 }, \
    { CLI_O_LIMIT, "-l", "--limit", NULL, "ROWS", "rows of the table (top: 20 by default)", 0 }

/* Takes option 'id' (from a table holding CLI_SAMPLING_OPTS) given as 'flag' with 'value'
 * into c: returns 1; "--" takes argv[*i + 1...] as the command and moves *i to argc.
 * Returns 0 if id is not a shared option, -1 after one line on a bad value. 'what' names
 * the command in messages. */
int cli_sampling_take(const char *what, int id, const char *flag, const char *value,
                      int argc, char **argv, int *i, cli_sampling_t *c);

/* --native: makes u merge C stacks in. Returns REMORA_EXIT_OK, or prints one line and
 * returns the exit code. u may be NULL (nothing to do). */
struct unwinder;
int cli_native_enable(struct unwinder *u, pid_t pid);

/* The kernel engine for this run, per --engine, loaded before the target is attached to
 * (a command launched is sampled from its start): *out NULL when the user-space engine
 * alone reads (--engine user; --blocking, --native, --mode gil/exception, --async and
 * --frame-anchor need it; or, with auto, when the kernel engine cannot be had: one line
 * says why, printed by cli_sampler_opts once sampling begins, so that a run failing
 * before prints its own line alone). Returns REMORA_EXIT_OK, or with --engine kernel one
 * line and the exit code.
 * The caller closes *out (kern_close) after freeing every unwinder. */
struct kern;
int cli_engine_open(const char *what, const cli_sampling_t *c, int anchor, struct kern **out);

/* --mode memory: by default a sample every this many page faults of a thread (4 KiB
 * pages: 256 KiB of new resident memory a sample; the walk a sample costs an allocating
 * target about 1-2.5% of its time at 16, docs/measured.md), --fault-period's bound; with
 * --mode memory, cli_engine_open opens the fault-driven engine or exits 1
 * (REMORA_EXIT_USAGE) after one line saying why not. */
#define CLI_MEMORY_FAULTS 64
#define CLI_MEMORY_FAULTS_MAX 65536

/* The target's unwinder u (may be NULL: a command not Python yet) on the engine *k:
 * when its layout is one the kernel engine cannot walk, *k is closed and set NULL, and
 * as cli_engine_open. */
int cli_engine_enable(const char *what, const cli_sampling_t *c, struct unwinder *u, struct kern **k);
/* "kernel" or "user", for the summary and --stats. */
const char *cli_engine_name(const struct kern *k);

/* --async: 0 if u reads the target's asyncio tasks, else one line and the exit code (4:
 * a version or build the task reader does not know). u may be NULL (nothing to check). */
int cli_async_check(struct unwinder *u, const py_target_t *t);

/* 0 if exactly one of -p and -- CMD was given, else one line and -1. */
int cli_sampling_check(const char *what, const cli_sampling_t *c);

typedef struct cli_target {
    pid_t pid;
    pid_t child;            /* the launched command while it runs, else 0 */
    int child_status;       /* its wait status once reaped, else -1 */
    int ended;              /* the command ended (or remora was stopped) before any Python
                             * ran in it: nothing to sample */
    pid_t python_pid;       /* with --subprocesses, the command's descendant whose interpreter
                             * was found while the command itself is not Python (then t is
                             * that descendant's: its version, for the checks); else 0 */
    remora_t *r;            /* the target opened through libremora (its source, interpreter
                             * and unwinder); NULL while no Python is found in it (a
                             * command launched, or whose descendant is, python_pid) */
    proc_t *p;              /* its source (remora_proc(r)), or the command's own while r is
                             * NULL; freed by cli_target_free(), also on failure */
    py_target_t t;
} cli_target_t;

/* Frees what ct holds (the handle, or the command's source). Every unwinder on the kernel
 * engine (the handle's among them) is freed by then: the caller closes the engine after. */
void cli_target_free(cli_target_t *ct);

/* Opens pid (through libremora: ct->r), or launches cmd (pid ignored) and waits, sleeping between looks, until its
 * interpreter is loaded, or with 'subprocesses' until one of its descendants runs one
 * (python_pid set). Returns REMORA_EXIT_OK, or prints one line and returns the exit code.
 * A command that exits first, with no Python found: one line, ended set, its own exit
 * code returned (it is reaped). *stop set first: one line, ended set, REMORA_EXIT_OK
 * (the command still runs: cli_finish_child() waits for it). */
int cli_attach(pid_t pid, char **cmd, int subprocesses, volatile sig_atomic_t *stop,
               cli_target_t *ct);

/* Waits for a launched command still running; returns its wait status (-1: none). */
int cli_finish_child(cli_target_t *ct);
/* Sampling ended (-d, --max-samples, q) with the launched command still running: the
 * profile is written and remora waits for the command as a shell does; one line says so
 * (else it looks hung). A command that has exited is collected here. */
void cli_say_waiting(cli_target_t *ct);

/* A wait status as a shell's exit code (128 + N for signal N). */
int cli_child_exit_code(int status);

/* engine.c: the sampler's options (*so) from the shared ones c, for the target ct read
 * by u (may be NULL): --native turned on in u (cli_native_enable), the engine *k kept or
 * let go (cli_engine_enable) and set in so; then the kernel engine's notice, if any.
 * Returns REMORA_EXIT_OK, or prints one line and returns the exit code. The caller adds its own options (record's anchor, its
 * --max-samples). */
struct sampler_opts;
int cli_sampler_opts(const char *what, const cli_sampling_t *c, const cli_target_t *ct,
                     struct unwinder *u, struct kern **k, struct sampler_opts *so);

/* The option that holds the target with ptrace (--native, --blocking), for
 * cli_sampler_fail(); NULL if none. */
const char *cli_holder(const cli_sampling_t *c);


/* dump --locals (dump_locals.c): frame f's arguments and locals, read with lr, printed
 * as text lines under the frame's line, or as the JSON members that follow the frame's
 * "line" ("locals", "arguments", "cells", "free", "unbound", "locals_more" or
 * "locals_error"). Nothing for a C frame, a marker or a NULL lr. */
struct unw_locals;
struct unw_frame;
void dump_locals_text(struct unw_locals *lr, const struct unw_frame *f);
void dump_locals_json(struct unw_locals *lr, const struct unw_frame *f);

#endif
