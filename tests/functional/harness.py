# The shared parts of the functional tests under the one name the test modules (every
# *_tests.py) and tests/bench/bench.py import them by: this module holds nothing of its
# own, it re-exports the parts, each of one concern. Reading what remora writes is
# formats.py's. Standard library only; the test modules import this and formats.py,
# never each other.

# common.py: paths, Fail and Skip, output in short
from common import (Fail, HERE, REPO, Skip, TARGETS, one_line, script, tail)

# interpreters.py: every interpreter path, which this run uses, how one runs
from interpreters import (CHROOT, HOST_PYTHON, INTERPRETERS, OLD_PYTHONS, ONLY_INTERPRETERS,
                          PYENV, interp_command, interp_missing, interpreter, program_tests)

# targets.py: a target, its readiness, /proc, its marks, its cores
from targets import (CRASH_TIMEOUT, CrashTarget, FUTEX_SYSCALL, GCORE_TIMEOUT, LOST,
                     READY_TIMEOUT, READ_SYSCALL, STATE_TIMEOUT, Target, VSYSCALL, free_pid,
                     gcore, kernel_cores_usable, mark, proc_state, target_says, tracer_of,
                     wait_asleep, wait_state)

# recording.py: running remora, recordings, summary and --stats, a terminal session
from recording import (Recording, Remora, SAMPLED_BEFORE_SIGNAL, SANITIZER_MARKS,
                       SHORT_SECONDS, STATS, STATS_COUNTS, STATUS, STOP_TIMEOUT, SUMMARY, Summary,
                       TTY_TIMEOUT, expect_failure, more_seconds, odd_recording, pty_drive,
                       pty_session, record, record_collapsed, signame, spawn_on_pty, summary,
                       workdir)

# judges.py: a target's truth against what remora says
from judges import (BASE, CHAINS, MOVING, Role, Source, TORN_TOLERATED, bare, check_odd_names,
                    depth_note, dump_frames_problems, dump_threads_problems, frame_line,
                    judge_profile, judge_stack, recurse_roles, simple_frames, thread_diff,
                    torn_kind, torn_verdict, version_matches)

# nodetools.py: speedscope's schema, the Firefox Profiler's client, npm ci
from nodetools import (SPEEDSCOPE_DIR, browser_check, npm_ci, profiler_call_trees, profiler_cli,
                       speedscope_validator)
