#!/bin/sh
# install_consumers.sh BUILD SOURCE VERSION WORK — lms installed and used as a
# user would (issue 28): `cmake --install BUILD --prefix WORK/prefix`, then
# examples/hello, copied out of SOURCE so that nothing of the source tree is
# in reach, built against the installed package only, twice:
#   pkg-config  cc hello.c $(pkg-config --cflags --libs lms), PKG_CONFIG_PATH
#               at the prefix, run with LD_LIBRARY_PATH at its lib directory;
#   CMake       examples/hello/CMakeLists.txt (find_package(lms 0.1) and
#               lms::lms) with CMAKE_PREFIX_PATH at the prefix, run through the
#               rpath CMake gives it (no LD_LIBRARY_PATH).
# Each runs on sim and must load the installed liblms.so, print VERSION (the
# library's and the header's) and swap. The installed liblms.so's SONAME
# must be liblms.so.0. WORK is removed at the end, pass or fail.
set -u
build=${1:?usage: install_consumers.sh BUILD SOURCE VERSION WORK}
src=${2:?}
version=${3:?}
work=${4:?}

fail() {
    echo "FAIL: $*" >&2
    exit 1
}
# cmd LOG COMMAND...: runs the command into LOG, shown when it fails
cmd() {
    log=$1
    shift
    "$@" >"$log" 2>&1 || { cat "$log"; fail "$*"; }
}
command -v pkg-config >/dev/null 2>&1 ||
    fail "pkg-config not found: apt-get install pkg-config (tools/install-deps.sh lists it)"
command -v readelf >/dev/null 2>&1 || fail "readelf not found: apt-get install binutils"

rm -rf "$work"
mkdir -p "$work/hello" || fail "cannot make $work"
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
cmd "$work/install.log" cmake --install "$build" --prefix "$prefix"
cp "$src/examples/hello/hello.c" "$src/examples/hello/CMakeLists.txt" "$work/hello/" ||
    fail "no examples/hello in $src"

export PKG_CONFIG_PATH="$prefix/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
got=$(pkg-config --variable=prefix lms) || fail "pkg-config finds no lms in $prefix"
[ "$got" = "$prefix" ] || fail "lms.pc's prefix is '$got', installed to $prefix"
libdir=$(pkg-config --variable=libdir lms)
[ "$(pkg-config --modversion lms)" = "$version" ] ||
    fail "lms.pc's version is '$(pkg-config --modversion lms)', lms's is $version"

soname=$(readelf -d "$libdir/liblms.so" | sed -n 's/.*(SONAME).*\[\(.*\)\]$/\1/p')
[ "$soname" = liblms.so.0 ] || fail "$libdir/liblms.so's SONAME is '$soname', not liblms.so.0"
[ -e "$libdir/liblms.so.0" ] || fail "no $libdir/liblms.so.0, the name programs load"

# check_run NAME PROGRAM: PROGRAM runs on sim with the installed liblms.so
check_run() {
    name=$1
    prog=$2
    loaded=$(LD_TRACE_LOADED_OBJECTS=1 "$prog" | grep liblms)
    case "$loaded" in
    *"=> $libdir/liblms.so.0 "*) ;;
    *) fail "$name: hello loads '$loaded', not $libdir/liblms.so.0" ;;
    esac
    out=$(LMS_BACKEND=sim LMS_DEVICE_LIMIT=64MiB LMS_HOST_LIMIT=256MiB "$prog" 2>&1) ||
        { echo "$out"; fail "$name: hello failed"; }
    echo "$out" | sed "s/^/  $name: /"
    for want in "^lms $version (built with lms.h $version)\$" '^device limit: 64 MiB' \
        '^swapped out [1-9][0-9]* MiB' '^after freeing: 64 MiB free$'; do
        echo "$out" | grep -q "$want" || fail "$name: hello printed no line matching '$want'"
    done
}

# shellcheck disable=SC2046 # pkg-config's words are separate arguments
cmd "$work/pc.log" ${CC:-cc} "$work/hello/hello.c" $(pkg-config --cflags --libs lms) \
    -o "$work/hello-pc"
(
    LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export LD_LIBRARY_PATH
    check_run pkg-config "$work/hello-pc"
) || exit 1

cmd "$work/cmake.log" cmake -S "$work/hello" -B "$work/hello-cmake" -DCMAKE_PREFIX_PATH="$prefix"
found=$(sed -n 's/^lms_DIR:PATH=//p' "$work/hello-cmake/CMakeCache.txt")
[ "$found" = "$libdir/cmake/lms" ] || fail "find_package(lms) found '$found', not $libdir/cmake/lms"
cmd "$work/cmake-build.log" cmake --build "$work/hello-cmake"
(
    unset LD_LIBRARY_PATH
    check_run cmake "$work/hello-cmake/hello"
) || exit 1

echo "install_consumers: installed $build into a temporary prefix; hello built with pkg-config" \
    "and with find_package(lms) runs on sim against the installed liblms.so ($soname)"
