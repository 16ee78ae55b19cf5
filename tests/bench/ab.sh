#!/bin/bash
# tests/bench/ab.sh BASELINE NEW [PYTHON...] — instructions per sample, two remora binaries
# side by side, counted by callgrind (repeatable on a shared machine, where CPU time is
# not). Per interpreter: busy.py at depth 50 with one busy thread, `record -r 5k` for 1 s
# and for 3 s under valgrind; instructions per sample are the difference of the two runs'
# totals over the difference of their samples (start-up cancels out). Measures only.
set -u
[ $# -ge 2 ] || { echo "usage: $0 BASELINE NEW [PYTHON...]" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "ab.sh: valgrind is not installed" >&2; exit 1; }
here=$(cd "$(dirname "$0")" && pwd)
base=$1 new=$2; shift 2
pythons=("$@")
[ ${#pythons[@]} -gt 0 ] || pythons=(~/.pyenv/versions/3.9.*/bin/python3 ~/.pyenv/versions/3.12.*/bin/python3 ~/.pyenv/versions/3.13.*/bin/python3)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

per_sample() {   # BIN PID: instructions per sample
    local bin=$1 pid=$2 d s ir
    declare -A S IR
    for d in 1 3; do
        s=$(valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.$d" "$bin" record -p "$pid" -r 5k -d $d \
                --stats --idle -o "$tmp/out.collapsed" -f collapsed 2>&1 | grep -oE "stats: (samples|rounds)=[0-9]+" | grep -oE "[0-9]+")
        ir=$(callgrind_annotate "$tmp/cg.$d" 2>/dev/null | grep -m1 "PROGRAM TOTALS" | grep -oE "^[0-9,]+" | tr -d ,)
        S[$d]=$s IR[$d]=$ir
    done
    echo $(( (${IR[3]} - ${IR[1]}) / (${S[3]} - ${S[1]}) ))
}

echo "| interpreter | baseline | new | change |"
echo "|---|---|---|---|"
for py in "${pythons[@]}"; do
    [ -x "$py" ] || continue
    rm -f "$tmp/ready"
    "$py" "$here/../targets/busy.py" "$tmp/ready" 50 1 600 </dev/null >/dev/null 2>&1 &
    pid=$!
    for _ in $(seq 200); do [ -f "$tmp/ready" ] && break; sleep 0.05; done
    a=$(per_sample "$base" $pid) b=$(per_sample "$new" $pid)
    kill $pid; wait $pid 2>/dev/null
    echo "| $("$py" -c 'import platform; print(platform.python_version())') | $a | $b | $(python3 -c "print('%+.1f%%' % (100.0 * ($b - $a) / $a))") |"
done
