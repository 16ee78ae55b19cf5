#!/usr/bin/env python3
"""Writes the fuzz seed corpora (tests/fuzz/corpus/TARGET/) from the interpreters on this
machine. Run by `make fuzz-seeds`; the output is committed (keep it small: a few hundred KB).

    python3 tests/fuzz/gen_seeds.py --tool build/fuzz_tool [--out tests/fuzz/corpus]

  unwind     snapshots of tests/fuzz/seed_target.py on 3.9-3.15 (fuzz_tool snap-record),
             with their maps text cut to the files the snapshot holds; each must replay
             to the same dump as the whole snapshot
  elf        the stub ELF files in those snapshots, and a tiny shared object (cc)
  maps       maps texts of those targets
  lnotab, lt310, locations
             line tables of a few functions as each interpreter built them
             (input: i32 firstlineno, i32 instruction offset, then the table)
  core       a small synthetic ELF core (notes, NT_FILE, segments held and not)
  locals     snapshots of tests/targets/locals_target.py (light) on 3.9 and 3.15,
             recorded while every frame's locals are read (snap-record-locals)
  native     fuzz_tool's own registers and stack captured inside a qsort comparison
             (fuzz_tool native-seed), under each Python walk rule
Standard library only. Needs root for the chroot interpreters (REMORA_CHROOT).
"""
import argparse
import glob
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CHROOT = os.environ.get("REMORA_CHROOT", "/var/cache/remora/sid")
PYENV = os.path.expanduser("~/.pyenv/versions")


def pyenv(minor):
    found = sorted(glob.glob("%s/3.%d.*/bin/python3.%d" % (PYENV, minor, minor)))
    return found[-1] if found else None


# (seed name, interpreter as the target sees it, chroot or None)
INTERPS = [
    ("3.9", pyenv(9), None),
    ("3.10", pyenv(10), None),
    ("3.11-static", "/usr/bin/python3.11", None),
    ("3.12", pyenv(12), None),
    ("3.13-pie", "/usr/bin/python3.13-pie", CHROOT),
    ("3.14", "/usr/bin/python3.14", CHROOT),
    ("3.15", "/usr/bin/python3.15", CHROOT),
]

R_MAPS, R_FILE = 2, 4


def records(snap):
    """(type, payload) of each record of a snapshot."""
    assert snap[:8] == b"RMRSNAP\0", "not a snapshot"
    pos, out = 16, []
    while pos + 16 <= len(snap):
        typ, _, n = struct.unpack_from("<IIQ", snap, pos)
        out.append((typ, snap[pos + 16:pos + 16 + n]))
        pos += 16 + ((n + 7) & ~7)
    return out


def build(header, recs):
    out = bytearray(header)
    for typ, payload in recs:
        out += struct.pack("<IIQ", typ, 0, len(payload)) + payload
        out += b"\0" * (((len(payload) + 7) & ~7) - len(payload))
    return bytes(out)


def file_records(snap):
    """(path, stub bytes) of each FILE record."""
    out = []
    for typ, p in records(snap):
        if typ == R_FILE:
            n = struct.unpack_from("<I", p, 8)[0]
            path = p[16:16 + n].decode("utf-8", "replace")
            out.append((path, p[16 + ((n + 7) & ~7):]))
    return out


def prune_maps(snap):
    """The snapshot with its maps text cut to the lines of the files it holds."""
    keep = {path for path, _ in file_records(snap)}
    recs = []
    for typ, p in records(snap):
        if typ == R_MAPS:
            lines = [l for l in p.decode("utf-8", "replace").splitlines(True)
                     if l.split(None, 5)[5:] and l.split(None, 5)[5].strip() in keep]
            p = "".join(lines).encode()
        recs.append((typ, p))
    return build(snap[:16], recs)


def maps_text(snap):
    for typ, p in records(snap):
        if typ == R_MAPS:
            return p
    return b""


def wait_file(path, proc, timeout=30):
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("target not ready (exit %s)" % proc.poll())
        time.sleep(0.01)


def wait_main_in_read(pid, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with open("/proc/%d/task/%d/syscall" % (pid, pid)) as f:
            if f.read().split()[:2] == ["0", "0x0"]:
                return
        time.sleep(0.005)
    raise RuntimeError("main thread never parked in read(0)")


def snapshot_of(tool, name, python, root, workdir, script=None, args=(), record="snap-record"):
    base = os.path.join(root, "tmp") if root else None
    d = tempfile.mkdtemp(prefix="remora-seed-", dir=base)
    try:
        os.chmod(d, 0o755)
        visible = d[len(root):] if root else d
        script = script or os.path.join(HERE, "seed_target.py")
        shutil.copy(script, d)
        argv = [python, "-I", visible + "/" + os.path.basename(script), visible + "/ready.json"] + list(args)
        if root:
            argv = ["chroot", root] + argv
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE)
        try:
            wait_file(os.path.join(d, "ready.json"), proc)
            wait_main_in_read(proc.pid)
            raw = os.path.join(workdir, name + ".raw")
            live = subprocess.run([tool, record, str(proc.pid), raw], check=True,
                                  stdout=subprocess.PIPE).stdout
        finally:
            proc.stdin.close()
            proc.wait()
    finally:
        shutil.rmtree(d, ignore_errors=True)
    with open(raw, "rb") as f:
        snap = f.read()
    pruned = prune_maps(snap)
    cut = os.path.join(workdir, name + ".snap")
    with open(cut, "wb") as f:
        f.write(pruned)
    again = subprocess.run([tool, "snap-dump", cut], check=True, stdout=subprocess.PIPE).stdout
    if json.loads(again) != json.loads(live):
        raise RuntimeError("%s: the pruned snapshot replays differently" % name)
    return snap, pruned


# the locals target: tests/targets/locals_target.py (small "big" values), its every
# frame's locals read while recording (fuzz_tool snap-record-locals)
LOCALS_TARGET = os.path.join(os.path.dirname(os.path.dirname(HERE)), "tests", "targets",
                             "locals_target.py")
LOCALS_SEEDS = ("3.9", "3.15")


LINETABLE_PROBE = r'''
import json, sys
def f(a, b):
    c = a + b
    for i in range(c):
        if i % 2:
            c -= 1
        else:
            try:
                c //= (i - 3)
            except ZeroDivisionError:
                pass
    return [x * 2 for x in range(c)
            if x]
out = []
for co in [f.__code__] + [k for k in f.__code__.co_consts if hasattr(k, "co_code")]:
    tab = co.co_lnotab if sys.version_info < (3, 10) else co.co_linetable
    out.append({"first": co.co_firstlineno, "tab": tab.hex(), "last": len(co.co_code) - 2})
print(json.dumps(out))
'''


def linetables(python, root):
    argv = [python, "-I", "-c", LINETABLE_PROBE]
    if root:
        argv = ["chroot", root] + argv
    return json.loads(subprocess.run(argv, check=True, stdout=subprocess.PIPE).stdout)


def note(name, typ, desc):
    n = name + b"\0"
    out = struct.pack("<III", len(n), len(desc), typ) + n + b"\0" * (-len(n) % 4)
    return out + desc + b"\0" * (-len(desc) % 4)


def synthetic_core():
    """A small core: two threads, a process name, an entry point, three file mappings
    (one held in full, one only its first page, one not at all) and an anonymous one."""
    prstatus = lambda tid: b"\0" * 32 + struct.pack("<i", tid) + b"\0" * (336 - 36)
    psinfo = bytearray(136)
    struct.pack_into("<i", psinfo, 24, 4242)
    psinfo[40:40 + 10] = b"python3.12"
    auxv = struct.pack("<QQQQ", 9, 0x401000, 0, 0)                  # AT_ENTRY
    files = [(0x400000, 0x402000, 0, b"/usr/bin/python3.12"),
             (0x7f0000000000, 0x7f0000002000, 0, b"/usr/lib/libpython3.12.so.1.0"),
             (0x7f0000002000, 0x7f0000003000, 2, b"/usr/lib/libpython3.12.so.1.0")]
    ntfile = struct.pack("<QQ", len(files), 4096)
    ntfile += b"".join(struct.pack("<QQQ", s, e, o) for s, e, o, _ in files)
    ntfile += b"".join(p + b"\0" for _, _, _, p in files)
    notes = (note(b"CORE", 3, bytes(psinfo)) + note(b"CORE", 1, prstatus(4242)) +
             note(b"CORE", 1, prstatus(4243)) + note(b"CORE", 6, auxv) +
             note(b"CORE", 0x46494c45, ntfile))
    # (vaddr, memsz, held bytes, flags)
    segs = [(0x400000, 0x2000, b"\x7fELF" + b"\x02\x01\x01" + b"\0" * 121, 5),
            (0x7f0000000000, 0x2000, b"\x7fELF" + b"\0" * 60, 4),
            (0x7f0000002000, 0x1000, b"", 6),
            (0x7f1000000000, 0x100, bytes(range(256)), 6)]
    phnum = 1 + len(segs)
    off = 64 + 56 * phnum
    phdrs = struct.pack("<IIQQQQQQ", 4, 4, off, 0, 0, len(notes), 0, 1)
    body = notes
    for vaddr, memsz, held, flags in segs:
        phdrs += struct.pack("<IIQQQQQQ", 1, flags, off + len(body), vaddr, 0, len(held),
                             memsz, 1)
        body += held
    ehdr = (b"\x7fELF\x02\x01\x01" + b"\0" * 9 +
            struct.pack("<HHIQQQIHHHHHH", 4, 62, 1, 0, 64, 0, 0, 64, 56, phnum, 64, 0, 0))
    return ehdr + phdrs + body


TINY_SO = "int _PyRuntime[8] = { 1 }; int Py_Version = 0x030c01f0;\n"


def tiny_elf(workdir):
    cc = shutil.which("cc")
    if cc is None:
        return None
    src, out = os.path.join(workdir, "tiny.c"), os.path.join(workdir, "tiny.so")
    with open(src, "w") as f:
        f.write(TINY_SO)
    r = subprocess.run([cc, "-shared", "-nostdlib", "-Os", "-Wl,-z,max-page-size=64",
                        "-Wl,-z,noseparate-code", "-Wl,--build-id=none", "-o", out, src])
    if r.returncode != 0:
        return None
    with open(out, "rb") as f:
        return f.read()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True, help="build/fuzz_tool")
    ap.add_argument("--out", default=os.path.join(HERE, "corpus"))
    args = ap.parse_args()
    tool = os.path.abspath(args.tool)

    def put(target, name, data):
        d = os.path.join(args.out, target)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)

    work = tempfile.mkdtemp(prefix="remora-seeds-")
    try:
        for name, python, root in INTERPS:
            if python is None or not os.access((root or "") + python, os.X_OK):
                print("skip %s: interpreter not found" % name)
                continue
            snap, pruned = snapshot_of(tool, name, python, root, work)
            put("unwind", name + ".snap", pruned)
            for path, stub in file_records(snap):
                put("elf", "%s-%s" % (name, os.path.basename(path)), stub)
            if name in ("3.12", "3.15"):
                put("maps", name + ".maps", maps_text(snap))
            target = "lnotab" if name == "3.9" else "lt310" if name == "3.10" else "locations"
            for i, lt in enumerate(linetables(python, root)):
                tab = bytes.fromhex(lt["tab"])
                put(target, "%s-%d" % (name, i), struct.pack("<ii", lt["first"], lt["last"]) + tab)
            print("seeds from %s: snapshot %d bytes (maps cut from %d)"
                  % (name, len(pruned), len(snap)))
            if name in LOCALS_SEEDS:
                _, lpruned = snapshot_of(tool, name + "-locals", python, root, work,
                                         LOCALS_TARGET, ["light"], "snap-record-locals")
                put("locals", name + ".snap", lpruned)
                print("locals seed from %s: %d bytes" % (name, len(lpruned)))
        put("core", "synthetic", synthetic_core())
        # the native target: fuzz_tool's own registers and stack inside a qsort comparison
        os.makedirs(os.path.join(args.out, "native"), exist_ok=True)
        subprocess.run([tool, "native-seed", os.path.join(args.out, "native")], check=True)
        with open(os.path.join(args.out, "native", "qsort-root2"), "rb") as f:
            seed = f.read()
        put("native", "qsort-root2-partial", bytes([seed[0] | 0x80]) + seed[1:])
        so = tiny_elf(work)
        if so is not None:
            put("elf", "tiny.so", so)
        put("maps", "unit", b"00400000-00452000 r-xp 00000000 08:02 173521 /usr/bin/python3.11\n"
            b"7f0000000000-7f0000021000 rw-p 00000000 00:00 0 \n"
            b"7f1000000000-7f1000001000 r--p 00001000 fd:01 42   /path with spaces/lib.so (deleted)\n"
            b"ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0 [vsyscall]\n")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    total = sum(os.path.getsize(os.path.join(dp, f))
                for dp, _, fs in os.walk(args.out) for f in fs)
    print("corpus: %d bytes in %s" % (total, args.out))


if __name__ == "__main__":
    sys.exit(main())
