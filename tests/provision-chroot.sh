#!/usr/bin/env bash
# Provision CPython 3.13, 3.14 and 3.15 (PIE and non-PIE builds) from Debian's unstable
# suite into a chroot outside the repository, for the functional tests, with the Debian
# packages the real-program tests run (tests/functional/real_tests.py).
# Prints the chroot's path on success. A second run takes seconds (cached).
#   REMORA_CHROOT  where the chroot lives (default /var/cache/remora/sid)
#
# It never deletes what it did not make: the chroot is built in a fresh directory beside
# REMORA_CHROOT, made here, then renamed into place; a chroot already there is replaced
# only if this script made it (its marker file inside) and nothing is mounted beneath it.
# A chroot of its own that has the interpreters but not the extra packages (made before
# they were asked for) gets them installed in place with its own apt-get: nothing removed.
set -euo pipefail

root=${REMORA_CHROOT:-/var/cache/remora/sid}
pkgs="python3.13 python3.13-nopie python3.14 python3.14-nopie python3.15 python3.15-nopie"
# Django (ORM + templates), docutils, aiohttp, numpy, Jinja2 and PyYAML: the real programs' libraries;
# CPython 3.15's own tests (test_external_inspection: run against remora's module by
# tests/functional/library_tests.py), and the shared libraries that module links to
extra="python3-django python3-docutils python3-aiohttp python3-numpy python3-jinja2 python3-yaml libpython3.15-testsuite libdw1t64 libelf1t64 libbpf1"
stamp=.remora-ready                 # the interpreters installed: the chroot is whole
extra_stamp=.remora-extra           # the extra packages installed
marker=.remora-provision-chroot     # this script made the directory

stamped() { [ -f "$root/$1" ] && [ "$(cat "$root/$1")" = "$2" ]; }

if stamped "$stamp" "$pkgs" && stamped "$extra_stamp" "$extra"; then
    echo "$root"
    exit 0
fi

die() { echo "provision-chroot: $*" >&2; exit 1; }

# Mount points at or beneath directory $1, as /proc/self/mountinfo names them (its fifth
# field, octal escapes undone).
mounts_under() {
    local dir
    dir=$(realpath -e -- "$1" 2>/dev/null) || return 0
    awk -v d="$dir" '{
        m = $5; gsub(/\\040/, " ", m); gsub(/\\011/, "\t", m); gsub(/\\012/, "\n", m); gsub(/\\134/, "\\", m)
        if (m == d || index(m, d "/") == 1) print m
    }' /proc/self/mountinfo
}

# Made by this script: its marker, or (before the marker existed) its stamp.
ours() { [ -d "$1" ] && [ ! -L "$1" ] && { [ -f "$1/$marker" ] || [ -f "$1/$stamp" ]; }; }

# Removes directory $1, which this script made, unless something is mounted beneath it.
remove_ours() {
    local m
    m=$(mounts_under "$1")
    [ -z "$m" ] || die "not removing $1: mounted beneath it: ${m//$'\n'/ }"
    rm -rf --one-file-system -- "$1"
}

case $root in
    /*) ;;
    *) die "REMORA_CHROOT must be an absolute path, not '$root'" ;;
esac
[ "$(realpath -m -- "$root")" != / ] || die "REMORA_CHROOT cannot be /"

# The interpreters are there, the extra packages not: install them with the chroot's own
# apt (its sources and options are the ones mmdebstrap wrote); a failure changes no stamp.
if stamped "$stamp" "$pkgs" && ours "$root" && [ ! -L "$root" ]; then
    command -v chroot >/dev/null || die "chroot(8) is missing (coreutils)"
    chroot "$root" apt-get update -qq >&2 \
        || die "apt-get update in $root failed (nothing removed; the next run tries again)"
    chroot "$root" env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -qq --no-install-recommends $extra >&2 \
        || die "installing $extra in $root failed (nothing removed; the next run tries again)"
    echo "$extra" > "$root/$extra_stamp"
    echo "$root"
    exit 0
fi

if [ -e "$root" ] || [ -L "$root" ]; then
    ours "$root" || die "$root is there and was not made by this script (no $marker in it):" \
        "remove it yourself or set REMORA_CHROOT to another path"
    m=$(mounts_under "$root")
    [ -z "$m" ] || die "$root has file systems mounted beneath it (${m//$'\n'/ }): unmount them first"
fi

command -v mmdebstrap >/dev/null || die "mmdebstrap is missing (apt-get install mmdebstrap)"

# Use the mirror apt already uses on this machine (first Debian URI found), named nowhere here.
mirror=$( { cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null || true; } \
    | awk '$1 == "URIs:" || $1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /:\/\//) { print $i; break } }' \
    | grep -E '/debian/?$' | head -n1 || true)
[ -n "$mirror" ] || die "no Debian mirror found in apt's sources"

parent=$(dirname -- "$root")
mkdir -p -- "$parent"
new=$(mktemp -d -- "$parent/.$(basename -- "$root").new.XXXXXX")
old=
trap '[ -z "$new" ] || remove_ours "$new"' EXIT
mmdebstrap --mode=root --variant=apt \
    --aptopt='Acquire::Check-Valid-Until "false"' \
    --include="$(echo $pkgs $extra | tr ' ' ',')" \
    unstable "$new" "$mirror" >&2
echo "made by tests/provision-chroot.sh" > "$new/$marker"
echo "$pkgs" > "$new/$stamp"
echo "$extra" > "$new/$extra_stamp"
chmod 755 "$new"                    # mktemp made it 0700

if [ -e "$root" ]; then             # ours, checked above: set aside, then removed
    old=$(mktemp -u -- "$parent/.$(basename -- "$root").old.XXXXXX")
    mv -T -- "$root" "$old"
fi
mv -T -- "$new" "$root"
new=
[ -z "$old" ] || remove_ours "$old"
echo "$root"
