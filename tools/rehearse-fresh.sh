#!/usr/bin/env bash
# A rehearsal of a fresh machine (issue 31): a new Debian root of this machine's release,
# made with mmdebstrap (build-essential, git and python3 only, from the mirrors apt uses
# here), a `git clone` of this repository inside it (its committed HEAD, through a
# bundle), then, inside it: `make demo` as the first command (it must build remora and
# dump the demo's threads), and `make test-setup` (what `make test` does before its
# tests: every package, the chroot of CPython 3.13-3.15 inside the new root, the npm
# packages). Each step is timed. Needs root and mmdebstrap; downloads about 1.5 GB.
#   tools/rehearse-fresh.sh [--demo-only] [--keep]
#     --demo-only  stop after make demo
#     --keep       keep the new root (its path is printed) instead of removing it
#   REMORA_REHEARSE_DIR   where the new root is made (default /var/tmp)
#
# It runs in a mount namespace of its own: /proc (remora reads /proc/PID) and /dev/pts are
# mounted in the new root and unmounted at the end, also on failure, and whatever is left
# mounted there goes with the namespace. It removes only the directory it made, and only
# when nothing is mounted beneath it.
set -euo pipefail
shopt -s inherit_errexit 2>/dev/null || true

die() { echo "rehearse-fresh: $*" >&2; exit 1; }

# Mount points at or beneath directory $1 (/proc/self/mountinfo's fifth field, unescaped).
mounts_under() {
    awk -v d="$1" '{
        m = $5; gsub(/\\040/, " ", m); gsub(/\\011/, "\t", m); gsub(/\\012/, "\n", m); gsub(/\\134/, "\\", m)
        if (m == d || index(m, d "/") == 1) print m
    }' /proc/self/mountinfo
}

# The ids of the processes whose root is directory $1 or beneath it: started there by this
# script (in the new root, or in the chroot `make test-setup` makes inside it).
pids_in() {
    local p r
    for p in /proc/[0-9]*; do
        r=$(readlink "$p/root" 2>/dev/null) || continue
        if [ "$r" = "$1" ] || [ "${r#"$1"/}" != "$r" ]; then
            echo "${p#/proc/}"
        fi
    done
}

# Ends the processes pids_in $1 finds, by their ids: SIGTERM, SIGKILL to those left after
# 10 s. 0 when none is left.
end_in() {
    local pids i
    pids=$(pids_in "$1")
    [ -n "$pids" ] || return 0
    echo "rehearse-fresh: ending what still runs in $1: $(echo $pids)" >&2
    kill -TERM $pids 2>/dev/null || true
    for i in $(seq 100); do
        pids=$(pids_in "$1")
        [ -n "$pids" ] || return 0
        sleep 0.1
    done
    kill -KILL $pids 2>/dev/null || true
    for i in $(seq 50); do
        [ -n "$(pids_in "$1")" ] || return 0
        sleep 0.1
    done
    return 1
}

# ---- inside the mount namespace: the new root, the clone, the steps ------------------
if [ "${1:-}" = --inner ]; then
    dir=$2 demo_only=$3 repo=$4
    root=$dir/root
    mounted=()
    cleanup() {
        local i
        end_in "$root" || true
        for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
            umount "${mounted[i]}" || umount -l "${mounted[i]}" || true
        done
    }
    trap cleanup EXIT

    . /etc/os-release
    [ -n "${VERSION_CODENAME:-}" ] || die "no VERSION_CODENAME in /etc/os-release"
    # the machine's own Debian sources (files whose every URI is a Debian archive), as
    # they are: mmdebstrap pastes each into the new root's sources; no mirror named here
    sources=()
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        uris=$(awk '$1 == "URIs:" { for (i = 2; i <= NF; i++) print $i }
                    $1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /:\/\//) { print $i; break } }' "$f")
        [ -n "$uris" ] || continue
        if ! echo "$uris" | grep -qvE '/debian(-security)?/?$'; then
            sources+=("$f")
        fi
    done
    [ ${#sources[@]} -gt 0 ] || die "no Debian sources in /etc/apt"

    t0=$(date +%s)
    echo "== mmdebstrap $VERSION_CODENAME: build-essential, git, python3 (sources: ${sources[*]})"
    mmdebstrap --mode=root --variant=apt --quiet \
        --aptopt='Acquire::Check-Valid-Until "false"' \
        --include=build-essential,git,python3 \
        "$VERSION_CODENAME" "$root" "${sources[@]}"
    t1=$(date +%s)
    echo "== mmdebstrap: $((t1 - t0)) s"

    # the clone: git inside the new root clones a bundle of this repository's HEAD
    git -C "$repo" bundle create -q "$root/tmp/remora.bundle" HEAD \
        $(git -C "$repo" symbolic-ref -q HEAD || true)
    chroot "$root" git clone -q /tmp/remora.bundle /root/remora
    rm -f "$root/tmp/remora.bundle"
    echo "== cloned $(git -C "$root/root/remora" log -1 --format='%h %s' | cut -c1-80)"

    # /proc (remora reads /proc/PID), and a pseudo-terminal file system of its own (apt's
    # log of dpkg asks for one) as a machine has them
    mount -t proc proc "$root/proc"
    mounted+=("$root/proc")
    mkdir -p "$root/dev/pts"
    mount -t devpts -o newinstance,ptmxmode=0666 devpts "$root/dev/pts"
    mounted+=("$root/dev/pts")

    # this machine's network, as a fresh machine of its kind has it: the certificate
    # authorities it added (here the network re-signs TLS: npm's registry fails without
    # them; the new root's ca-certificates takes them in when apt installs it) and the
    # variable that points Node at them
    if [ -d /usr/local/share/ca-certificates ]; then
        mkdir -p "$root/usr/local/share/ca-certificates"
        cp -a /usr/local/share/ca-certificates/. "$root/usr/local/share/ca-certificates/"
    fi
    netenv=()
    [ -z "${NODE_EXTRA_CA_CERTS:-}" ] || netenv+=("NODE_EXTRA_CA_CERTS=$NODE_EXTRA_CA_CERTS")

    # a login's environment, nothing else of this shell's
    in_root() {
        chroot "$root" env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
            PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "${netenv[@]}" \
            sh -c "cd /root/remora && $1"
    }
    echo "== make demo (the first command in the clone)"
    t2=$(date +%s)
    in_root "make demo" | tee "$dir/demo.out"
    t3=$(date +%s)
    # the dump names the demo's threads (examples/demo.py: MainThread, worker-0, worker-1, reader)
    for name in MainThread worker-0 worker-1 reader; do
        grep -q "^Thread [0-9]* \"$name\"" "$dir/demo.out" || die "make demo did not dump thread $name"
    done
    echo "== make demo: $((t3 - t2)) s, the demo's four threads dumped"
    in_root "make demo" >/dev/null
    t4=$(date +%s)
    echo "== make demo again (all there: no apt-get): $((t4 - t3)) s"
    if [ "$demo_only" != 1 ]; then
        echo "== make test-setup"
        in_root "make test-setup"
        t5=$(date +%s)
        echo "== make test-setup: $((t5 - t4)) s"
        in_root "make test-setup"
        t6=$(date +%s)
        echo "== make test-setup again (all there): $((t6 - t5)) s"
    fi
    echo "== rehearsal passed in $(($(date +%s) - t0)) s"
    exit 0
fi

# ---- outside: checks, the directory, the namespace, the removal -----------------------
demo_only=0 keep=0
for a; do
    case $a in
        --demo-only) demo_only=1 ;;
        --keep) keep=1 ;;
        *) die "usage: tools/rehearse-fresh.sh [--demo-only] [--keep]" ;;
    esac
done
[ "$(id -u)" -eq 0 ] || die "needs root (mmdebstrap --mode=root, chroot, mount)"
for tool in mmdebstrap unshare chroot git; do
    command -v "$tool" >/dev/null || die "$tool is missing (tools/packages.txt names its package)"
done
repo=$(cd "$(dirname "$0")/.." && pwd)
[ -z "$(git -C "$repo" status --porcelain --untracked-files=no)" ] ||
    echo "rehearse-fresh: note: uncommitted changes in $repo are not in the clone (HEAD is)"

base=$(realpath -e -- "${REMORA_REHEARSE_DIR:-/var/tmp}") || die "no directory ${REMORA_REHEARSE_DIR:-/var/tmp}"
dir=$(mktemp -d -- "$base/remora-fresh.XXXXXX")
chmod 755 "$dir"
inner=
finish() {
    rc=$?
    trap - INT TERM HUP
    # interrupted: what runs in the new root is ended first, then the namespace's shell,
    # which unmounts what it mounted
    if [ -n "$inner" ] && kill -0 "$inner" 2>/dev/null; then
        end_in "$dir/root" || true
        kill -TERM "$inner" 2>/dev/null || true
        wait "$inner" 2>/dev/null || true
    fi
    if ! end_in "$dir/root"; then
        echo "rehearse-fresh: not removing $dir: processes still run in it" >&2
    elif [ "$keep" = 1 ]; then
        echo "rehearse-fresh: the new root is kept: $dir/root"
    else
        m=$(mounts_under "$dir")
        if [ -n "$m" ]; then
            echo "rehearse-fresh: not removing $dir: mounted beneath it: ${m//$'\n'/ }" >&2
        else
            rm -rf --one-file-system -- "$dir"
        fi
    fi
    exit $rc
}
trap finish EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP
# in the background, so that a signal here is acted on at once (finish), not after it
unshare --mount --propagation private bash "$0" --inner "$dir" "$demo_only" "$repo" &
inner=$!
wait "$inner"
