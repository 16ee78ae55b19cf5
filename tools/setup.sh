#!/usr/bin/env bash
# The set-up of `make demo` and `make test`, from the one list of Debian packages,
# tools/packages.txt (the Makefile's demo-setup and test-setup run it before anything is
# compiled; so does .ci/run):
#   tools/setup.sh --demo        the packages the build and the demo need
#   tools/setup.sh --test        all of them, then the chroot of CPython 3.13-3.15
#                                (tests/provision-chroot.sh, cached) and the tests' npm
#                                packages (npm ci where node_modules is missing)
#   tools/setup.sh --list SECTION   a section's packages on one line (demo, test, node)
# As root where apt-get is, it installs the packages dpkg-query does not find installed
# (apt-get update first, only then; noninteractive); with nothing missing it installs
# nothing and prints nothing. Otherwise (not root, or no apt-get) it installs nothing and
# stops with one line on stderr giving the command to run, exit 1.
set -euo pipefail
cd "$(dirname "$0")/.."

list=tools/packages.txt
what=${1:-}

# The packages of section $1 of the list, one a line.
section() {
    awk -v s="[$1]" '/^[[:space:]]*(#|$)/ { next } /^\[/ { on = ($1 == s); next } on { print $1 }' "$list"
}

# Says $* on one line on stderr, and exits 1.
said=
stop() {
    said=1
    echo "$*" >&2
    exit 1
}

case $what in
    --demo) goal="make demo"; sections="demo" ;;
    --test) goal="make test"; sections="demo test" ;;
    --list) [ $# -eq 2 ] || stop "usage: tools/setup.sh --list demo|test|node"
            section "$2" | tr '\n' ' ' | sed 's/ $//'; echo; exit 0 ;;
    *) stop "usage: tools/setup.sh --demo | --test | --list SECTION" ;;
esac

# an unexpected failure (apt-get's, the chroot's, npm's, said above it) ends in one line too
trap 'rc=$?; if [ $rc -ne 0 ] && [ -z "$said" ]; then stop "remora: the set-up of $goal failed, exit $rc (what failed is said above; run it again: tools/setup.sh $what)"; fi' EXIT

want=$(for s in $sections; do section "$s"; done)
# Node for the browser tests: the machine's own if it has one, else Debian's
if [ "$what" = --test ] && ! command -v npm >/dev/null; then
    want="$want
$(section node)"
fi
want=$(echo "$want" | tr -s ' \n' '\n' | sed '/^$/d')

if ! command -v apt-get >/dev/null || ! command -v dpkg-query >/dev/null; then
    stop "remora: no apt-get here to install what $goal needs (install the equivalents of" \
         "tools/packages.txt's [$(echo $sections | sed 's/ /] and [/')], Debian's names, then run: $goal SETUP=no)"
fi

# installed: dpkg-query's "ii" (unknown packages are missing, its complaint kept quiet)
have=$(dpkg-query -W -f='${Package} ${db:Status-Abbrev}\n' $want 2>/dev/null | awk '$2 == "ii" { print $1 }' || true)
missing=$(comm -23 <(echo "$want" | sort -u) <(echo "$have" | sort -u) | tr '\n' ' ' | sed 's/ $//')

if [ -n "$missing" ]; then
    cmd="apt-get install -y --no-install-recommends $missing"
    [ "$(id -u)" -eq 0 ] || stop "remora: $goal needs Debian packages not installed here (run: sudo $cmd)"
    echo "remora: installing what $goal needs: $missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi

if [ "$what" = --test ]; then
    # CPython 3.13-3.15 from Debian's unstable suite (mmdebstrap runs as root; the
    # tests say so and skip those interpreters otherwise): seconds once cached
    if [ "$(id -u)" -eq 0 ]; then
        bash tests/provision-chroot.sh >/dev/null
    fi
    # the browser, speedscope-schema and Firefox Profiler tests' npm packages
    for d in tests/browser tests/speedscope tests/firefox; do
        [ -d "$d/node_modules" ] || (cd "$d" && npm ci --no-audit --no-fund --loglevel=error)
    done
fi
