"""remora: read the Python stacks of another running CPython process (3.9 to 3.15).

A stand-in for CPython 3.15's ``_remote_debugging`` that runs on any CPython 3.9+ and
reads a target of any version 3.9-3.15, over libremora (docs/api.md)::

    import remora
    for thread in remora.dump(pid):
        print(thread)

``RemoteUnwinder`` takes ``_remote_debugging.RemoteUnwinder``'s arguments and returns its
result types (``InterpreterInfo``, ``ThreadInfo``, ``FrameInfo``, ``LocationInfo``,
``AwaitedInfo``, ``TaskInfo``, ``CoroInfo``). Where a target's version lacks something the
field holds what it has: before 3.11 a ``LocationInfo``'s ``end_lineno`` is its line and
its columns are None. Reading needs the rights ptrace needs (root, or CAP_SYS_PTRACE).
"""

import os
import time

from . import _remora

__all__ = [
    "RemoteUnwinder", "InterpreterInfo", "ThreadInfo", "FrameInfo", "LocationInfo",
    "AwaitedInfo", "TaskInfo", "CoroInfo", "get_child_pids", "is_python_process", "dump",
    "sample", "sample_engine", "Thread", "THREAD_STATUS_HAS_GIL", "THREAD_STATUS_ON_CPU",
    "THREAD_STATUS_UNKNOWN", "THREAD_STATUS_GIL_REQUESTED", "THREAD_STATUS_HAS_EXCEPTION",
    "THREAD_STATUS_MAIN_THREAD", "PROFILING_MODE_WALL", "PROFILING_MODE_CPU",
    "PROFILING_MODE_GIL", "PROFILING_MODE_ALL", "PROFILING_MODE_EXCEPTION",
    "PROCESS_VM_READV_SUPPORTED", "__version__",
]

__version__ = _remora.version

THREAD_STATUS_HAS_GIL = _remora.THREAD_HAS_GIL
THREAD_STATUS_ON_CPU = _remora.THREAD_ON_CPU
THREAD_STATUS_UNKNOWN = _remora.THREAD_UNKNOWN
THREAD_STATUS_GIL_REQUESTED = _remora.THREAD_GIL_REQUESTED
THREAD_STATUS_HAS_EXCEPTION = _remora.THREAD_HAS_EXCEPTION
THREAD_STATUS_MAIN_THREAD = _remora.THREAD_MAIN

PROFILING_MODE_WALL = 0
PROFILING_MODE_CPU = 1
PROFILING_MODE_GIL = 2
PROFILING_MODE_ALL = 3
PROFILING_MODE_EXCEPTION = 4
_MODES = (PROFILING_MODE_WALL, PROFILING_MODE_CPU, PROFILING_MODE_GIL, PROFILING_MODE_ALL,
          PROFILING_MODE_EXCEPTION)

PROCESS_VM_READV_SUPPORTED = 1


# --- the result types: tuples with named fields, as CPython's struct sequences -----------

try:
    # a field read in C, with no Python frame (what namedtuple's fields are): a
    # get_stack_trace() result is read field by field, and a property over a Python
    # function made that read cost about as much as the rest of the loop around the call
    from _collections import _tuplegetter as _field
except ImportError:              # another implementation: a C getter all the same
    import operator

    def _field(i, doc):
        return property(operator.itemgetter(i), doc=doc)


def _struct(name, fields, doc):
    """A tuple type with named fields, built like a struct sequence: Type(sequence)."""
    def __new__(cls, sequence=(), dict=None):
        items = tuple(sequence)
        if len(items) != len(fields):
            raise TypeError("%s() takes a %d-sequence (%d-sequence given)"
                            % (name, len(fields), len(items)))
        return tuple.__new__(cls, items)

    def __repr__(self):
        return "%s.%s(%s)" % (type(self).__module__, name, ", ".join(
            "%s=%r" % (f, v) for f, v in zip(fields, self)))

    def __reduce__(self):
        return (type(self), (tuple(self),))

    ns = {"__new__": __new__, "__repr__": __repr__, "__reduce__": __reduce__,
          "__slots__": (), "__doc__": doc, "__match_args__": tuple(fields),
          "n_fields": len(fields), "n_sequence_fields": len(fields), "n_unnamed_fields": 0,
          "_fields": tuple(fields)}
    for i, f in enumerate(fields):
        ns[f] = _field(i, "Alias for field number %d" % i)
    cls = type(name, (tuple,), ns)
    cls.__module__ = __name__
    return cls


_new = tuple.__new__           # a result made from a tuple of the right length, unchecked


class _Plain(tuple):
    """tuple with tuple's own __new__: _remora makes the result types through its slot,
    as _new does."""
    __slots__ = ()

InterpreterInfo = _struct("InterpreterInfo", ("interpreter_id", "threads"),
                          "Information about an interpreter")
ThreadInfo = _struct("ThreadInfo", ("thread_id", "status", "frame_info"),
                     "Information about a thread")
FrameInfo = _struct("FrameInfo", ("filename", "location", "funcname", "opcode"),
                    "Information about a frame")
LocationInfo = _struct("LocationInfo", ("lineno", "end_lineno", "col_offset", "end_col_offset"),
                       "Source location information: (lineno, end_lineno, col_offset, "
                       "end_col_offset)")
AwaitedInfo = _struct("AwaitedInfo", ("thread_id", "awaited_by"),
                      "Information about what a thread is awaiting")
TaskInfo = _struct("TaskInfo", ("task_id", "task_name", "coroutine_stack", "awaited_by"),
                   "Information about an asyncio task")
CoroInfo = _struct("CoroInfo", ("call_stack", "task_name"), "Information about a coroutine")


# --- errors: libremora's codes as the exceptions _remote_debugging raises -----------------

def _raise(e, pid, during):
    code, message = e.args
    if code == _remora.ENOPROC:
        raise ProcessLookupError(3, message) from None
    if code == _remora.EPERM:
        raise PermissionError(1, message) from None
    if code == _remora.EUSAGE:
        raise ValueError(message) from None
    if code in (_remora.ENOTPY, _remora.EVERSION):
        raise RuntimeError("%s: %s" % (during, message)) from None
    if code == _remora.ENOMEM and "out of memory" in message:
        raise MemoryError(message) from None
    # a target changing under the read, an address gone, a bound reached: transient
    raise RuntimeError("%s in process %d: %s" % (during, pid, message)) from None


def _open(pid, flags, during="Failed to attach"):
    try:
        return _remora.Reader(pid, flags)
    except _remora.Error as e:
        _raise(e, pid, during)


# --- frames -----------------------------------------------------------------------------

# CPython's bounds, kept so that the same stack gives the same answer here: a thread's
# frames (MAX_FRAME_CHAIN_DEPTH), a task's name, the tasks walked from a running task to
# those awaiting it. A task's coroutine chain is cut at remora's bound (UNW_MAX_TASK_DEPTH
# 1024): one that long is refused as CPython refuses one over its own.
MAX_FRAMES = 1024 + 512
MAX_TASK_NAME = 255
MAX_TASK_WAITERS = 2 ** 14
MAX_TASK_CHAIN = 1024

_NATIVE_MARK = FrameInfo(("~", None, "<native>", None))
_GC_MARK = FrameInfo(("~", None, "<GC>", None))


def _frame(t, opcodes):
    """A frame tuple of _remora as a FrameInfo."""
    file, func, line, end_line, col, end_col, opcode, kind = t
    if kind == _remora.FRAME_GC:
        return _GC_MARK
    if kind == _remora.FRAME_ENTRY:     # native=True: C code entered the interpreter here
        return _NATIVE_MARK
    if kind == _remora.FRAME_NATIVE:
        return _new(FrameInfo, (file, None, func, None))
    if line <= 0:
        location = None
    else:
        location = _new(LocationInfo, (line, end_line if end_line >= line else line,
                                       col if col >= 0 else None,
                                       end_col if end_col >= 0 else None))
    return _new(FrameInfo, (file, location, func, opcode if opcodes else None))


class RemoteUnwinder:
    """RemoteUnwinder(pid, *, all_threads=False, only_active_thread=False, mode=0,
    debug=False, skip_non_matching_threads=True, native=False, gc=False, opcodes=False,
    cache_frames=False, stats=False)

    Reads the stacks of the Python process pid from outside it (remora's reader: every
    version 3.9-3.15, from any host Python 3.9+). The arguments are those of CPython
    3.15's _remote_debugging.RemoteUnwinder:

    all_threads: every thread of every interpreter (else each interpreter's main thread)
    only_active_thread: only the thread holding the GIL
    mode: PROFILING_MODE_WALL, _CPU, _GIL, _ALL or _EXCEPTION: which status bits are read
        (CPU: on a CPU; EXCEPTION: handling an exception; ALL: both), and with
        skip_non_matching_threads, which threads are returned
    native: a "<native>" frame (filename "~") after the outermost Python frame of each
        entry into the interpreter from C (a callback of sorted(), the thread's start),
        as CPython 3.15 places them (3.9/3.10 targets: one, outermost)
    gc: a "<GC>" frame innermost on the thread running a garbage collection
    opcodes: each frame's current instruction (FrameInfo.opcode)
    cache_frames: on a 3.15 target, the thread state's last_profiled_frame kept at a frame
        read (8 bytes written, as CPython's module does), so that only the frames above
        it are copied; on any version remora reuses the unchanged part of a stack
    stats: get_stats() answers
    debug: accepted (errors always say what failed)
    """

    def __init__(self, pid, *, all_threads=False, only_active_thread=False, mode=0,
                 debug=False, skip_non_matching_threads=True, native=False, gc=False,
                 opcodes=False, cache_frames=False, stats=False):
        if all_threads and only_active_thread:
            raise ValueError("all_threads and only_active_thread cannot both be True")
        if mode not in _MODES:
            raise ValueError("mode must be one of the PROFILING_MODE_* constants, not %r"
                             % (mode,))
        self.pid = pid
        self._all = bool(all_threads)
        self._native = bool(native)
        self._opcodes = bool(opcodes)
        self._stats = bool(stats)
        self._debug = bool(debug)
        self._cache_frames = bool(cache_frames)
        self._samples = 0
        opcodes_wanted = self._opcodes
        self._make_frame = lambda t: _frame(t, opcodes_wanted)
        flags = 0
        if only_active_thread:
            flags |= _remora.ONLY_GIL
        elif not all_threads:
            flags |= _remora.MAIN_THREAD
        if mode in (PROFILING_MODE_CPU, PROFILING_MODE_ALL, PROFILING_MODE_EXCEPTION):
            flags |= _remora.STATUS
        if skip_non_matching_threads:
            flags |= {PROFILING_MODE_CPU: _remora.ONLY_CPU, PROFILING_MODE_GIL: _remora.ONLY_GIL,
                      PROFILING_MODE_EXCEPTION: _remora.ONLY_EXCEPTION}.get(mode, 0)
        if gc:
            flags |= _remora.GC
        if native:
            # "<native>" where C code entered the interpreter, as CPython 3.15 marks it
            flags |= _remora.ENTRY_MARKS
        if opcodes:
            flags |= _remora.OPCODES
        if cache_frames:
            # as CPython's: the thread's last_profiled_frame kept at a frame read (3.15)
            flags |= _remora.FRAME_ANCHOR
        self._mode = mode
        self._flags = flags
        self._reader = _open(pid, flags, "Failed to find the Python interpreter in process %d"
                             % pid if isinstance(pid, int) else "Failed to attach")
        # get_stack_trace()'s result made by _remora: each thread's frames unchanged since
        # the last call (counted from the outermost) are the same FrameInfo objects again
        self._reader.configure(self._make_frame, InterpreterInfo, ThreadInfo, _Plain,
                               THREAD_STATUS_UNKNOWN if mode in (PROFILING_MODE_WALL,
                                                                 PROFILING_MODE_GIL) else 0,
                               None, MAX_FRAMES)   # native=True: the library's own
                                                   # entry marks, not one outermost
        self._tasks_reader = None

    def _read(self):
        # each distinct frame made into a FrameInfo once, by _remora, and the same object
        # given back while it is seen (what CPython's frame cache gives back)
        try:
            return self._reader.read(self._make_frame)
        except _remora.Error as e:
            _raise(e, self.pid, "Failed to read the stacks")

    def get_stack_trace(self):
        """Every selected thread's stack, interpreter after interpreter: a list of
        InterpreterInfo(interpreter_id, [ThreadInfo(thread_id, status, [FrameInfo, ...
        innermost first])])."""
        try:
            threads = self._reader.trace()
        except _remora.Error as e:
            _raise(e, self.pid, "Failed to read the stacks")
        if type(threads) is list:
            self._samples += 1
            return threads
        # a thread that needs a look here: unreadable, moving, too deep, or our own
        interps = {}
        order = []
        for (iid, tid, status, gc, name, error, partial, task, ident, frames) in threads:
            if error:
                raise RuntimeError("Failed to unwind the stack of thread %d in process %d: %s"
                                   % (tid, self.pid, _remora.strerror(error)))
            if partial:
                raise RuntimeError("The stack of thread %d in process %d kept changing while "
                                   "it was read" % (tid, self.pid))
            if self._mode == PROFILING_MODE_WALL or self._mode == PROFILING_MODE_GIL:
                status |= THREAD_STATUS_UNKNOWN
            if len(frames) > MAX_FRAMES:
                raise RuntimeError("Too many stack frames in thread %d of process %d (over %d)"
                                   % (tid, self.pid, MAX_FRAMES))
            if self.pid == os.getpid() and tid == _native_id():
                frames = _own_frames_off(frames)
            out = frames
            if iid not in interps:
                interps[iid] = []
                order.append(iid)
            interps[iid].append(_new(ThreadInfo, (tid, status, out)))
        self._samples += 1
        return [_new(InterpreterInfo, (iid, interps[iid])) for iid in order]

    # --- asyncio ------------------------------------------------------------------------

    def _read_tasks(self):
        if self._tasks_reader is None:
            self._tasks_reader = _open(self.pid, 0)
        try:
            tasks = self._tasks_reader.tasks()
            threads = self._tasks_reader.read()
        except _remora.Error as e:
            _raise(e, self.pid, "Failed to read the asyncio tasks")
        return tasks, threads

    def _task_infos(self, tasks, deep_chain):
        by_id = {t[0]: t for t in tasks}
        own = self.pid == os.getpid()

        def stack(t):
            frames = _own_frames_off(t[4]) if own and t[3] else t[4]
            return [_frame(f, False) for f in frames]

        infos = {}
        for t in tasks:
            if deep_chain and len(t[4]) >= MAX_TASK_CHAIN and not t[3]:
                raise RuntimeError("Too many coroutine frames in task %r of process %d (%d)"
                                   % (t[1], self.pid, len(t[4])))
            tid, name = t[0], t[1][:MAX_TASK_NAME]
            awaited_by = [CoroInfo((stack(by_id[a]), a)) for a in t[5] if a in by_id]
            infos[tid] = TaskInfo((tid, name, [CoroInfo((stack(t), name))], awaited_by))
        return infos, by_id

    def get_all_awaited_by(self):
        """Every asyncio task, by the thread whose event loop it belongs to: a list of
        AwaitedInfo(thread_id, [TaskInfo(task_id, task_name, [CoroInfo(call_stack,
        task_name)], awaited_by=[CoroInfo(awaiter's stack, awaiter's task_id)])]), the
        tasks of no running loop last under thread_id 0."""
        tasks, threads = self._read_tasks()
        infos, _ = self._task_infos(tasks, True)
        out = []
        for th in threads:
            tid = th[1]
            out.append(AwaitedInfo((tid, [infos[t[0]] for t in tasks if t[2] == tid])))
        known = {th[1] for th in threads}
        out.append(AwaitedInfo((0, [infos[t[0]] for t in tasks if t[2] not in known])))
        return out

    def get_async_stack_trace(self):
        """For each thread running an asyncio task: AwaitedInfo(thread_id, [the running
        task's TaskInfo, then every task awaiting it, transitively])."""
        tasks, threads = self._read_tasks()
        infos, by_id = self._task_infos(tasks, False)
        awaiting = {}
        for t in tasks:
            for a in t[5]:
                awaiting.setdefault(t[0], []).append(a)
        out = []
        for t in tasks:
            if not t[3] or t[2] == 0:
                continue
            if len(t[4]) > MAX_FRAMES:
                raise RuntimeError("Too many async stack frames in task %r of process %d "
                                   "(over %d)" % (t[1], self.pid, MAX_FRAMES))
            seen, chain, todo = set(), [], [t[0]]
            while todo:
                i = todo.pop(0)
                if i in seen or i not in infos:
                    continue
                seen.add(i)
                if len(seen) > MAX_TASK_WAITERS:
                    raise RuntimeError("Too many task waiters of task %r in process %d (over "
                                       "%d)" % (t[1], self.pid, MAX_TASK_WAITERS))
                chain.append(infos[i])
                todo.extend(awaiting.get(i, ()))
            out.append(AwaitedInfo((t[2], chain)))
        return out

    # --- statistics ---------------------------------------------------------------------

    def get_stats(self):
        """The unwinder's statistics (stats=True): CPython's keys, each from remora's
        counter of the same meaning (docs/api.md): frame-cache hits count whole threads
        reused; code-object cache counts are per distinct code object of each reading;
        batched reads are remora's vectored reads (process_vm_readv of many ranges)."""
        if not self._stats:
            raise RuntimeError("Statistics collection was not enabled. Create "
                               "RemoteUnwinder with stats=True to collect statistics.")
        st = self._reader.stats()
        reused, samples = st["threads_kept"], st["threads"]
        code = st["code_hits"] + st["code_misses"]

        def rate(part, whole):
            return 100.0 * part / whole if whole else 0.0
        return {
            "total_samples": self._samples,
            "frame_cache_hits": reused,
            "frame_cache_misses": samples - reused,
            "frame_cache_partial_hits": 0,      # not counted (docs/api.md)
            "frames_read_from_cache": st["frames_kept"],
            "frames_read_from_memory": st["frames"] - st["frames_kept"],
            "memory_reads": st["syscalls"],
            "memory_bytes_read": st["bytes"],
            "code_object_cache_hits": st["code_hits"],
            "code_object_cache_misses": st["code_misses"],
            "stale_cache_invalidations": st["code_stale"],
            "batched_read_attempts": st["vectored"],
            "batched_read_successes": st["vectored_ok"],
            "batched_read_misses": st["vectored"] - st["vectored_ok"],
            "batched_read_segments_requested": st["segments"],
            "batched_read_segments_completed": st["segments_done"],
            "frame_cache_hit_rate": rate(reused, samples),
            "code_object_cache_hit_rate": rate(st["code_hits"], code),
            "batched_read_success_rate": rate(st["vectored_ok"], st["vectored"]),
            "batched_read_segment_completion_rate": rate(st["segments_done"], st["segments"]),
            "partial_stacks": st["partial"],
        }


# --- reading this very process ----------------------------------------------------------

_OWN_FILE = __file__


def _native_id():
    try:
        import threading
        return threading.get_native_id()
    except (ImportError, AttributeError):
        return -1


def _own_frames_off(frames):
    """A thread of this process reading itself: its innermost frames are this module's
    (the call that reads), which CPython's C module has none of: left out."""
    k = 0
    while k < len(frames) and frames[k][0] == _OWN_FILE:
        k += 1
    return frames[k:]


# --- module functions ---------------------------------------------------------------------

def get_child_pids(pid, *, recursive=True):
    """The pids of pid's children (recursive: every descendant), from /proc."""
    out, todo = [], [pid]
    while todo:
        parent = todo.pop(0)
        try:
            tids = os.listdir("/proc/%d/task" % parent)
        except FileNotFoundError:
            if parent == pid:
                raise ProcessLookupError(3, "no process with pid %d" % pid) from None
            continue
        for tid in tids:
            try:
                with open("/proc/%d/task/%s/children" % (parent, tid)) as f:
                    kids = [int(k) for k in f.read().split()]
            except OSError:
                continue
            for k in kids:
                if k not in out:
                    out.append(k)
                    if recursive:
                        todo.append(k)
    return out


def is_python_process(pid):
    """Whether pid runs a CPython interpreter remora can read (3.9-3.15)."""
    try:
        _remora.Reader(pid, _remora.MAIN_THREAD).close()
        return True
    except _remora.Error:
        return False


class Thread(tuple):
    """A thread of dump(): (thread_id, name, status, frames), frames innermost first,
    each a FrameInfo."""
    __slots__ = ()
    thread_id = property(lambda self: self[0])
    name = property(lambda self: self[1])
    status = property(lambda self: self[2])
    frames = property(lambda self: self[3])

    def __repr__(self):
        return "remora.Thread(thread_id=%r, name=%r, status=%r, frames=[%d])" % (
            self[0], self[1], self[2], len(self[3]))

    def format(self):
        """The thread as a traceback's lines, innermost frame first."""
        head = "Thread %d%s%s" % (self[0], " (%s)" % self[1] if self[1] else "",
                                  " [holds the GIL]" if self[2] & THREAD_STATUS_HAS_GIL else "")
        lines = [head]
        for f in self[3]:
            line = f.location.lineno if f.location else 0
            lines.append('  File "%s", line %d, in %s' % (f.filename, line, f.funcname))
        return "\n".join(lines)


def _threads(reader, pid):
    try:
        rows = reader.read()
    except _remora.Error as e:
        _raise(e, pid, "Failed to read the stacks")
    own = pid == os.getpid()
    me = _native_id()
    return [Thread((tid, name, status, [_frame(f, False) for f in (
                _own_frames_off(frames) if own and tid == me else frames)]))
            for (_iid, tid, status, _gc, name, _err, _partial, _task, _ident, frames) in rows]


def dump(pid, *, text=False):
    """Every thread's stack in process pid, once: a list of Thread (thread_id, name,
    status, frames innermost first), or with text=True one string, each thread as a
    traceback (innermost frame first)."""
    reader = _open(pid, _remora.STATUS | _remora.THREAD_NAMES)
    try:
        threads = _threads(reader, pid)
    finally:
        reader.close()
    if text:
        return "\n\n".join(t.format() for t in threads) + "\n"
    return threads


_SAMPLE_MODES = {"wall": _remora.MODE_WALL, "cpu": _remora.MODE_CPU, "gil": _remora.MODE_GIL,
                 "exception": _remora.MODE_EXCEPTION}
_SAMPLE_ENGINES = {"auto": _remora.ENGINE_AUTO, "kernel": _remora.ENGINE_KERNEL,
                   "user": _remora.ENGINE_USER}
_SAMPLE_QUEUE = 1024        # rounds waiting for the consumer before the sampler waits too
_SAMPLE_END = object()


def sample(pid, rate=100.0, duration=None, *, active_only=False, mode="wall", engine="auto"):
    """Samples process pid rate times a second (for duration seconds, or until it
    exits) with libremora's sampling loop, the one `remora record` runs: yields
    (time, [Thread, ...]) for each round, time from time.monotonic(), each Thread's
    frames innermost first. mode: "wall" (every thread), "cpu" (threads on a CPU), "gil"
    (the GIL's holder) or "exception" (threads handling one). active_only: leave out
    threads neither on a CPU nor holding the GIL (always so in cpu mode). engine: "auto"
    (the kernel engine where it can be had), "kernel" (BPF; PermissionError without
    CAP_BPF and CAP_PERFMON, ValueError with gil or exception mode) or "user". The engine
    that ran is sample_engine() of the iterator's last run. The iterator ends when the
    process exits or the duration ends; closing it stops the sampling."""
    if not rate > 0:
        raise ValueError("rate must be positive")
    if mode not in _SAMPLE_MODES:
        raise ValueError("mode must be one of %s" % ", ".join(_SAMPLE_MODES))
    if engine not in _SAMPLE_ENGINES:
        raise ValueError("engine must be one of %s" % ", ".join(_SAMPLE_ENGINES))
    if duration is not None and not duration > 0:
        raise ValueError("duration must be positive (or None)")
    import queue
    import threading
    reader = _open(pid, 0)
    rounds = queue.Queue(_SAMPLE_QUEUE)
    stop = threading.Event()
    start = [0.0]
    this = [0, []]              # the round being gathered: its number, its threads

    def put(item):
        while not stop.is_set():
            try:
                rounds.put(item, timeout=0.05)
                return
            except queue.Full:
                continue

    def on_sample(rnd, t_ns, tid, status, name, _partial, _kernel, frames):
        if rnd != this[0] and this[1]:
            put((start[0] + this[2] / 1e9, this[1]))
            this[1] = []
        if not this[1]:
            this[:] = [rnd, this[1], t_ns]
        this[1].append(Thread((tid, name, status, [_frame(f, False) for f in frames])))
        return stop.is_set()

    def run():
        try:
            start[0] = time.monotonic()
            _LAST_ENGINE[:] = reader.sample(on_sample, rate=float(rate),
                                            duration=float(duration or 0),
                                            mode=_SAMPLE_MODES[mode],
                                            engine=_SAMPLE_ENGINES[engine],
                                            idle=mode != "cpu" and not active_only)
            if this[1]:
                put((start[0] + this[2] / 1e9, this[1]))
            put(_SAMPLE_END)
        except _remora.Error as e:
            put(e)
        except BaseException as e:      # the callback's own failure
            put(e)

    this.append(0)
    worker = threading.Thread(target=run, name="remora.sample", daemon=True)
    worker.start()
    try:
        while True:
            item = rounds.get()
            if item is _SAMPLE_END:
                return
            if isinstance(item, _remora.Error):
                if item.args[0] == _remora.ENOPROC:
                    return
                _raise(item, pid, "Failed to sample")
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        reader.sample_stop()
        worker.join()
        reader.close()


_LAST_ENGINE = ["", ""]


def sample_engine():
    """(engine, why_not) of the last sample() run: "kernel" or "user", and one line saying
    why not the kernel engine ("" when it ran)."""
    return tuple(_LAST_ENGINE)
