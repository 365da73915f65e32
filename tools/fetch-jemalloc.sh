#!/bin/sh
# fetch-jemalloc.sh DIR — puts jemalloc's source, as Debian ships it (the
# orig tarball of the jemalloc source package), in DIR and prints the
# tarball's path on stdout. Nothing is downloaded when DIR already holds a
# jemalloc_*.orig.tar.*.
#
# lms builds a private jemalloc from it (see DESIGN.md, "Dependencies"); its
# source is never committed. The download uses this machine's own apt sources,
# turned into deb-src entries in a temporary directory together with apt's
# lists and caches, so nothing under /etc/apt or /var is touched and root is
# not needed. Without apt or a reachable registry, get jemalloc 5.3.0's source
# tarball some other way and give its path to CMake as LMS_JEMALLOC_TARBALL.
set -eu
dir=${1:?usage: fetch-jemalloc.sh DIR}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

have() {
    for f in "$dir"/jemalloc_*.orig.tar.*; do
        case "$f" in *.asc) continue ;; esac
        [ -f "$f" ] && { echo "$f"; return 0; }
    done
    return 1
}
have && exit 0

command -v apt-get >/dev/null 2>&1 || {
    echo "fetch-jemalloc: no apt-get here; set LMS_JEMALLOC_TARBALL to a jemalloc 5.3.0 source tarball" >&2
    exit 1
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM
mkdir -p "$tmp/parts" "$tmp/lists/partial" "$tmp/cache/archives/partial" "$tmp/get"
# deb822 files: every stanza becomes deb-src; one-line files: every deb line.
for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] && sed 's/^Types:.*/Types: deb-src/' "$f" > "$tmp/parts/${f##*/}"
done
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] && sed -n 's/^[[:space:]]*deb[[:space:]]/deb-src /p' "$f" >> "$tmp/sources.list"
done
touch "$tmp/sources.list"
# As root apt downloads as user _apt, which cannot enter a private temp dir.
sandbox=""
[ "$(id -u)" = 0 ] && sandbox="-o APT::Sandbox::User=root"
# shellcheck disable=SC2086
set -- -o Dir::Etc::SourceList="$tmp/sources.list" -o Dir::Etc::SourceParts="$tmp/parts" \
    -o Dir::State::Lists="$tmp/lists" -o Dir::Cache="$tmp/cache" $sandbox
echo "fetch-jemalloc: downloading Debian's jemalloc source into $dir" >&2
if ! apt-get "$@" update >"$tmp/log" 2>&1 ||
    ! (cd "$tmp/get" && apt-get "$@" source --download-only jemalloc) >>"$tmp/log" 2>&1; then
    cat "$tmp/log" >&2
    echo "fetch-jemalloc: download failed; set LMS_JEMALLOC_TARBALL to a jemalloc 5.3.0 source tarball" >&2
    exit 1
fi
# Move into place only once complete, so an interrupted fetch leaves nothing
# that `have` would take for a tarball.
for f in "$tmp/get"/*; do
    [ -f "$f" ] && mv "$f" "$dir/"
done
have || { echo "fetch-jemalloc: apt fetched no jemalloc_*.orig.tar.*" >&2; exit 1; }
