#!/bin/sh
# Installs the Debian packages lms builds with, if any is missing.
# As root it runs apt-get; otherwise it prints the exact command and fails.
# The CUDA toolkit is not a Debian package here: it is looked for at
# /usr/local/cuda, and without it lms builds the sim backend only.
set -eu
# clang with its runtime, whose libFuzzer `make test-fuzz` links: Debian's
# clang only recommends libclang-rt-N-dev, N being the version of clang it
# depends on (unknown here until apt's lists are there; then resolved anew)
clang_rt() {
    apt-cache depends clang 2>/dev/null |
        sed -n 's/^ *Depends: clang-\([0-9][0-9]*\)$/libclang-rt-\1-dev/p' | head -n 1
}
# python3 with pip, setuptools and wheel: the Python package (python/) and its tests
PKGS="cmake make gcc pkg-config libnuma-dev zlib1g-dev libcriterion-dev clang $(clang_rt)
    python3 python3-pip python3-setuptools python3-wheel"

command -v dpkg-query >/dev/null 2>&1 || {
    echo "install-deps: not a Debian system; make sure these are installed: $PKGS" >&2
    exit 0
}
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
        missing="$missing $p"
done
[ -z "$missing" ] && exit 0

cmd="apt-get install -y --no-install-recommends$missing"
if [ "$(id -u)" != 0 ]; then
    echo "install-deps: missing packages:$missing" >&2
    echo "install-deps: run:  sudo apt-get update && sudo $cmd" >&2
    exit 1
fi
echo "install-deps: installing$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
case "$missing $PKGS" in
*libclang-rt-*) ;;
*) missing="$missing $(clang_rt)" ;;
esac
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >/dev/null
