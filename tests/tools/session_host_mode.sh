#!/bin/sh
# tools/gpu-session.sh's gate for issue 27's steps (host_mode): whether a step
# that needs LMS_EVICTED=host runs or skips (77) is read from lms-info --json,
# here a stand-in printing each answer lms-info can give. In a dry run the
# step must skip either way, its summary line saying which answer it read.
#   sh tests/tools/session_host_mode.sh   (from the repository root)
set -u
dir=$(mktemp -d) || exit 1
trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir/build"
: >"$dir/build/liblms.so"
fail=0
# check ANSWER WANTED: with lms-info printing ANSWER, swap_modes's summary
# line must hold WANTED
check() {
    printf '#!/bin/sh\ncat <<"END"\n%s\nEND\n' "$1" >"$dir/build/lms-info"
    chmod +x "$dir/build/lms-info"
    rm -rf "$dir/out"
    LMS_GPU_BUILD="$dir/build" sh tools/gpu-session.sh --dry-run "$dir/out" swap_modes \
        >/dev/null 2>&1 || { echo "FAIL: the dry run failed for $1"; fail=1; }
    line=$(grep '^swap_modes:' "$dir/out/summary.txt")
    case $line in
    *"skipped (rc=77)"*"$2"*) echo "ok: $line" ;;
    *) echo "FAIL: lms-info said $1; the summary says: $line; wanted: $2"; fail=1 ;;
    esac
}
check '{"tool":"lms-info","evicted":"host","evicted_why":"LMS_EVICTED=host"}' \
    'dry run: LMS_EVICTED=host resolves on sim; the step needs a card'
check '{"tool":"lms-info","evicted":"refused","evicted_why":"lms would not start: not built"}' \
    'not available on sim in this build (issue 27): refused: lms would not start: not built'
check '{"tool":"lms-info","evicted":"unmapped","evicted_why":"auto: not measured"}' \
    'not available on sim in this build (issue 27): unmapped: auto: not measured'
check '{"tool":"lms-info","backend":"sim"}' "this build's lms-info names no evicted mode"
exit $fail
