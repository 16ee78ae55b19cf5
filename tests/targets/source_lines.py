"""Target for the source-line tests of `dump` (runs on CPython 3.9-3.15): one thread parked
in each kind of file a code object can name, and the truth of every parked thread's frames
as this interpreter sees them (sys._current_frames(), linecache).

    python source_lines.py READY

Each thread parks (on one Event) in a function from: a module with CRLF line ends and
tab indentation; one with lone CR line ends; a module with a non-ASCII line and a line of
5,000 characters; a module rewritten after it was imported (the file's time now later than
the process's start); a module deleted after it was imported; code compiled under a
relative file name (found from the working directory); under "<string>"; under the names
of a binary file, a 17 MB (sparse) file, a FIFO and a directory. READY (JSON, written
through a temporary file and a rename once every thread is parked):

    {"pid": N, "threads": [{"case": S, "native_id": N, "frames": [{"function": S (co_qualname
      where there is one), "file": S, "line": N, "source": S or null, "changed": B}, ...innermost first]}]}

"source" is linecache's line, stripped, where the file can be read as source; null where it
cannot (the file missing, not source, or no file at all: never asked of linecache, which would
block on the FIFO). "changed": the file was written after the process started. Stdin EOF ends it.
"""
import json
import linecache
import os
import sys
import threading
import time

READY = sys.argv[1]
DIR = os.path.dirname(os.path.abspath(READY))
PAST = time.time() - 3600
park = threading.Event()

# a function whose body calls park.wait() on its third line, in each file
BODY = "def parked(ev):\n    here = 1\n    ev.wait()   # parked here\n"


def write(name, data, mtime=PAST):
    path = os.path.join(DIR, name)
    with open(path, "wb") as f:
        f.write(data)
    os.utime(path, (mtime, mtime))
    return path


def load(path, name):
    """The function parked() of the file at path, imported as module 'name'."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.parked


def compiled(filename, text=BODY):
    """parked() compiled from text under the file name given (no file read)."""
    ns = {}
    exec(compile(text, filename, "exec"), ns)
    return ns["parked"]


sys.dont_write_bytecode = True
cases = {}
cases["crlf"] = load(write("crlf_mod.py", b"# crlf\r\ndef parked(ev):\r\n\there = 1\r\n"
                            b"\tev.wait()   # parked here, CRLF\r\n"), "crlf_mod")
cases["cr"] = load(write("cr_mod.py", b"# cr\rdef parked(ev):\r    here = 1\r"
                          b"    ev.wait()   # parked here, CR\r"), "cr_mod")
cases["unicode"] = load(write("uni_mod.py", ("# caf\u00e9\ndef parked(ev):\n    s = '\u00e9\U0001f600'\n"
                                            "    ev.wait() or s  # caf\u00e9 \U0001f600\n"
                                            "LONG = '" + "x" * 5000 + "'\n").encode()), "uni_mod")
cases["long"] = load(write("long_mod.py", ("def parked(ev):\n    here = 1\n    ev.wait() or '"
                                           + "y" * 5000 + "'\n").encode()), "long_mod")
changed_path = write("changed_mod.py", BODY.encode())
cases["changed"] = load(changed_path, "changed_mod")
gone_path = write("gone_mod.py", BODY.encode())
cases["missing"] = load(gone_path, "gone_mod")
os.unlink(gone_path)
os.chdir(DIR)
write("rel_mod.py", ("# relative\n" + BODY).encode())
cases["relative"] = compiled("rel_mod.py", "# relative\n" + BODY)
cases["nameless"] = compiled("<string>")
cases["binary"] = compiled(write("binary.py", b"\x7fELF\x00\x00\x01" * 100))
big = os.path.join(DIR, "big.py")
with open(big, "wb") as f:
    f.truncate(17 << 20)               # sparse: 17 MB that take no room
cases["huge"] = compiled(big)
fifo = os.path.join(DIR, "fifo.py")
os.mkfifo(fifo)
cases["fifo"] = compiled(fifo)
os.mkdir(os.path.join(DIR, "dir.py"))
cases["dir"] = compiled(os.path.join(DIR, "dir.py"))

UNREADABLE = {gone_path, "<string>", os.path.join(DIR, "binary.py"), big, fifo,
              os.path.join(DIR, "dir.py")}

threads = {}
for name, fn in cases.items():
    t = threading.Thread(target=fn, args=(park,), name=name, daemon=True)
    t.start()
    threads[name] = t

# the rewritten module: other text, written now (after the process started)
with open(changed_path, "w") as f:
    f.write("# rewritten after import\n# line 2\n# line 3 now says this\n# line 4\n")
# its time a second on: a rewrite within the start's clock tick would not tell
os.utime(changed_path, (time.time() + 1, time.time() + 1))
linecache.checkcache()


def parked_all():
    frames = sys._current_frames()
    for t in threads.values():
        f = frames.get(t.ident)
        if f is None or f.f_code.co_name != "wait" or not f.f_code.co_filename.endswith("threading.py"):
            return None
    return frames


deadline = time.monotonic() + 30
while (frames := parked_all()) is None:
    if time.monotonic() > deadline:
        sys.exit("source_lines: the threads did not park")
    time.sleep(0.001)

out = []
for name, t in threads.items():
    stack, f = [], frames[t.ident]
    while f is not None:
        path, line = f.f_code.co_filename, f.f_lineno
        if path in UNREADABLE or path.startswith("<"):
            src = None
        else:
            src = linecache.getline(path, line).strip() or None
        stack.append({"function": getattr(f.f_code, "co_qualname", f.f_code.co_name),
                      "file": path, "line": line, "source": src,
                      "changed": path == changed_path})
        f = f.f_back
    out.append({"case": name, "native_id": t.native_id, "frames": stack})

with open(READY + ".tmp", "w") as f:
    json.dump({"pid": os.getpid(), "threads": out}, f)
os.rename(READY + ".tmp", READY)
sys.stdin.read()
