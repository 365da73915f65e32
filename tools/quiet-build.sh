#!/bin/sh
# quiet-build.sh DIR [ARGS...] — the Makefile's build step: runs
# `cmake --build DIR ARGS...` with its whole output kept in DIR/build.log,
# and shows, as it comes, what a person needs of it: each target finished
# that had work done ("[ 42%] Built target lms_core": what is being built
# and how far along), and every line that is not CMake's routine per-file
# progress, so that a compiler's warnings and errors, make's own errors and
# the custom steps' messages (nvcc) are all shown, in full. Exits with
# cmake's status; at the end it says how much was built, or on a failure
# where the whole output is.
set -eu
dir=${1:?usage: quiet-build.sh build-dir [cmake --build arguments...]}
shift
mkdir -p "$dir"
log=$dir/build.log
status=$dir/build.status
rm -f "$status"
# What is shown of the output, a line at a time as it comes (awk would do,
# but mawk, Debian's, reads its input in blocks). A "Built target" line is
# shown only for a target that had work done, so a rebuild with nothing to
# do shows none; ExternalProject's routine lines (jemalloc's) are left out
# like the per-file ones.
show() {
    work=0
    while IFS= read -r line || [ -n "$line" ]; do
        case $line in
        "["*"%] Building "* | "["*"%] Linking "* | "["*"%] Scanning "* | "["*"%] Generating "*)
            work=1 ;;
        "["*"%] No update step for "* | "["*"%] No patch step for "*) ;;
        "-- "*" command succeeded."*) ;;
        "Consolidate compiler generated dependencies of target "*) ;;
        *"make: Entering directory "* | *"make: Leaving directory "*) ;;
        *"make["*"]: Entering directory "* | *"make["*"]: Leaving directory "*) ;;
        "["*"%] Built target "*)
            [ "$work" = 0 ] || printf '%s\n' "$line"
            work=0 ;;
        *)
            printf '%s\n' "$line"
            work=1 ;;
        esac
        line=
    done
}

# cmake's status cannot come out of the pipe (POSIX sh has no pipefail):
# it goes through a file.
{
    rc=0
    cmake --build "$dir" "$@" 2>&1 || rc=$?
    echo "$rc" >"$status"
} | tee "$log" | show
rc=$(cat "$status" 2>/dev/null || echo 1)
rm -f "$status"
if [ "$rc" -ne 0 ]; then
    echo "build of $dir failed (exit status $rc); its whole output: $log" >&2
    exit "$rc"
fi
echo "$dir: $(grep -c '^\[ *[0-9]*%\] Built target ' "$log") targets up to date," \
    "$(grep -c '^\[ *[0-9]*%\] Building ' "$log") files compiled (the whole output: $log)"
