#!/bin/sh
# Starts examples/demo.py, dumps its threads with remora, and stops it.
set -eu
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}
dir=$(mktemp -d)
"$py" examples/demo.py --ready "$dir/pid" &
demo=$!
trap 'kill $demo 2>/dev/null; rm -rf "$dir"' EXIT
i=0
while [ ! -f "$dir/pid" ]; do        # the demo writes this file when its threads run
    i=$((i + 1)); [ $i -lt 3000 ] || { echo "demo did not start" >&2; exit 1; }
    sleep 0.01
done
./remora dump -p "$(cat "$dir/pid")"
