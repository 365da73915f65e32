#!/bin/sh
# Installs the Debian packages lms builds with, if any is missing.
# As root it runs apt-get; otherwise it prints the exact command and fails.
# The CUDA toolkit is not a Debian package here: it is looked for at
# /usr/local/cuda, and without it lms builds the sim backend only.
set -eu
PKGS="cmake make gcc pkg-config libnuma-dev libcriterion-dev"

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
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >/dev/null
