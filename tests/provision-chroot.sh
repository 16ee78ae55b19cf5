#!/usr/bin/env bash
# Provision CPython 3.13, 3.14 and 3.15 (PIE and non-PIE builds) from Debian's unstable
# suite into a chroot outside the repository, for the functional tests.
# Prints the chroot's path on success. A second run takes seconds (cached).
#   REMORA_CHROOT  where the chroot lives (default /var/cache/remora/sid)
set -euo pipefail

root=${REMORA_CHROOT:-/var/cache/remora/sid}
pkgs="python3.13 python3.13-nopie python3.14 python3.14-nopie python3.15 python3.15-nopie"
stamp="$root/.remora-ready"

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$pkgs" ]; then
    echo "$root"
    exit 0
fi

command -v mmdebstrap >/dev/null || {
    echo "provision-chroot: mmdebstrap is missing (apt-get install mmdebstrap)" >&2
    exit 1
}

# Use the mirror apt already uses on this machine (first Debian URI found), named nowhere here.
mirror=$( { cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null || true; } \
    | awk '$1 == "URIs:" || $1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /:\/\//) { print $i; break } }' \
    | grep -E '/debian/?$' | head -n1 || true)
[ -n "$mirror" ] || { echo "provision-chroot: no Debian mirror found in apt's sources" >&2; exit 1; }

rm -rf "$root"
mkdir -p "$(dirname "$root")"
mmdebstrap --mode=root --variant=apt \
    --aptopt='Acquire::Check-Valid-Until "false"' \
    --include="$(echo $pkgs | tr ' ' ',')" \
    unstable "$root" "$mirror" >&2
echo "$pkgs" > "$stamp"
echo "$root"
