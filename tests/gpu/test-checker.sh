#!/bin/sh
# tests/gpu/test-checker.sh — CTest preload_probe.checker (label sim): the
# trace check of tests/gpu/preload-probe.sh, which after a probe run only a
# card makes, run here on canned files (tests/gpu/fixtures/, each says what
# it holds): probe.out with pass.trace must pass, every case ok; with
# fail.trace it must fail, on exactly the four cases fail.trace breaks and
# for their reasons. Exit 0 if so, else 1.
set -u
dir=$(cd "$(dirname "$0")" && pwd) || exit 1
fixtures=$dir/fixtures
bad=0

# check TRACE: runs the checker on probe.out and TRACE; its output in $out,
# its exit status in $rc.
check() {
    out=$(sh "$dir/preload-probe.sh" --check "$fixtures/probe.out" "$fixtures/$1")
    rc=$?
    echo "---- preload-probe.sh --check probe.out $1: exit $rc"
    echo "$out"
}

# expect LINE_PATTERN WHAT: an output line matches the basic regex, else says WHAT failed.
expect() {
    echo "$out" | grep -q "$1" || { echo "checker: FAILED: $2 (no line matches '$1')"; bad=1; }
}

check pass.trace
[ "$rc" -eq 0 ] || { echo "checker: FAILED: the passing pair exits $rc, not 0"; bad=1; }
for c in launch_chevron launch_runtime cublas_sgemm driver_cukernel tma_kernel; do
    expect "^trace $c: ok: " "$c passes with pass.trace"
done

check fail.trace
[ "$rc" -eq 1 ] || { echo "checker: FAILED: the failing pair exits $rc, not 1"; bad=1; }
expect "^trace launch_runtime: ok: " "launch_runtime, which fail.trace keeps, passes"
# the launch is missing; the copy back after the marker's free must not count
expect "^trace launch_chevron: FAILED: no kernel line .*; none names any$" \
       "launch_chevron fails: no line in its marker's lifetime names its buffers"
expect "^trace cublas_sgemm: FAILED: no kernel line .* names any of .*; none names any$" \
       "cublas_sgemm fails: its kernel names only the workspace"
expect "^trace driver_cukernel: FAILED: no one allocation of the marker size 3015$" \
       "driver_cukernel fails: no marker"
expect "^trace tma_kernel: FAILED: no kernel line .* names all of .*; lines there name out$" \
       "tma_kernel fails: its kernel names out but not the tensor"
n=$(echo "$out" | grep -c ': FAILED')
[ "$n" -eq 4 ] || { echo "checker: FAILED: $n failures with fail.trace, not 4"; bad=1; }

[ "$bad" -eq 0 ] && echo "checker: passed"
exit "$bad"
