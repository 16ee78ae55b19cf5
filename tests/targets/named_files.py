# A target whose code objects name files it chooses (security/source-*): one thread per
# FILE:LINE argument runs a function whose code says co_filename=FILE and whose frame
# stands at LINE (code.replace: the name and line come from the target, not from a file
# it read). Parked threads (the default) block in read(2) on a pipe never written;
# --spin threads loop on that line. Writes the ready file (argv[1], by temp + rename)
# once every thread is in its function: {"threads": [{"native_id", "file", "line"}]};
# then reads stdin to EOF, or with --exit-after N spins N loops a thread and exits
# (a target that goes away while it is recorded).
#
#   named_files.py READY [--spin] [--exit-after N] FILE:LINE...

import json
import os
import sys
import threading

ready, args = sys.argv[1], sys.argv[2:]
spin = "--spin" in args
exit_after = None
if "--exit-after" in args:
    exit_after = int(args[args.index("--exit-after") + 1])
names = [a for a in args if ":" in a]

# line 2 of each body is where its frame stands; co_firstlineno moves it to LINE
PARK = "def parked(fd, started):\n    started.set(); os.read(fd, 1)\n"
SPIN = "def spinning(n, started):\n    started.set(); i = 0\n    while i < n: i += 1\n"


def function_at(src, name, file, line):
    code = compile(src, file, "exec")
    body = next(c for c in code.co_consts if hasattr(c, "co_code"))
    first = line - 1 if not spin else line - 2
    body = body.replace(co_filename=file, co_firstlineno=first)
    return type(lambda: 0)(body, globals(), name)


threads, infos = [], []
lock = threading.Lock()
r, w = os.pipe()
for spec in names:
    file, line = spec.rsplit(":", 1)
    line = int(line)
    started = threading.Event()
    info = {"file": file, "line": line}
    if spin:
        fn = function_at(SPIN, "spinning", file, line)
        n = exit_after if exit_after is not None else 1 << 62
        t = threading.Thread(target=fn, args=(n, started))
    else:
        fn = function_at(PARK, "parked", file, line)
        t = threading.Thread(target=fn, args=(r, started), daemon=True)
    t.start()
    started.wait()
    info["native_id"] = t.native_id
    infos.append(info)
    threads.append(t)

tmp = ready + ".tmp"
with open(tmp, "w") as f:
    json.dump({"pid": os.getpid(), "threads": infos}, f)
os.rename(tmp, ready)
if exit_after is not None:
    for t in threads:
        t.join()
    os._exit(0)
sys.stdin.read()
os._exit(0)
