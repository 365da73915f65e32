#!/bin/sh
# tests/gpu/preload-probe.sh — runs BUILD/tests/preload_probe (what it
# checks: tests/gpu/preload_probe.cu) under LD_PRELOAD=BUILD/liblms.so on
# the cuda backend with a small device limit and LMS_TRACE_ACCESSES, then
# checks the access trace liblms.so wrote at exit (docs/trace-format.md):
# for each case, a `kernel` line written while the case ran (between the
# `alloc` and the `free` of its marker allocation) names that case's
# buffers (`all` of them in one line, or `any`, as the probe's trace-check
# line says; buffers are found by their unique sizes in `alloc` lines).
#   preload-probe.sh BUILD_DIR [OUT_DIR]
# OUT_DIR (default: a new temporary directory) keeps the probe's output
# (preload_probe.log) and the trace (preload_probe.trace). LMS_DEVICE_LIMIT
# (default 256MiB) and LMS_HOST_LIMIT (default 2GiB) may be set. When the
# probe fails, each failed case is run again alone, since after an illegal
# address every later case in the process fails too. Exit: 0 passed, 77 no
# CUDA device (skipped), 1 failed.
#   preload-probe.sh --check PROBE_OUTPUT TRACE
# only checks TRACE against the trace-check lines of PROBE_OUTPUT, as after
# a run (tests/gpu/test-checker.sh runs it on tests/gpu/fixtures/ in CI,
# where the probe cannot run). Exit: 0 passed, 1 failed, 2 usage.
set -u

# check_trace PROBE_OUTPUT TRACE: each trace-check line of the probe's
# output (the first file, read with phase=1) against the trace (phase=2);
# one "trace NAME: ok|FAILED ..." line per check. Exit 0 if all passed, 1
# if one failed or there was none to check.
check_trace() {
    awk '
    phase == 1 && $1 == "trace-check" { checks[++nchecks] = $0 }
    phase == 1 { next }
    FNR == 1 && $0 != "lms-trace 1" {
        printf "trace: FAILED: the first line of the trace is \"%s\", not \"lms-trace 1\"\n", $0
        bad_header = 1
    }
    { last = FNR }
    $1 == "alloc" { # ids by size (the left side is made before the test)
        if ($3 in ids) ids[$3] = ids[$3] " " $2; else ids[$3] = $2
        born[$2] = FNR
    }
    $1 == "free" { died[$2] = FNR }
    $1 == "kernel" { nk++; at[nk] = FNR; text[nk] = $0 }
    END {
        bad = bad_header
        if (nchecks == 0) {
            print "trace: FAILED: the probe printed no trace-check line: there is nothing to check"
            bad++
        }
        for (c = 1; c <= nchecks; c++) {
            nf = split(checks[c], f, " ")
            name = f[2]; marker = f[3]; mode = f[4]
            if (!(marker in ids) || split(ids[marker], m, " ") != 1) {
                printf "trace %s: FAILED: no one allocation of the marker size %s\n", name, marker
                bad++; continue
            }
            lo = born[ids[marker]]; hi = (ids[marker] in died) ? died[ids[marker]] : last + 1
            nreq = 0; missing = ""; twice = ""
            for (k = 5; k <= nf; k++) {
                split(f[k], lv, "=")
                if (!(lv[2] in ids)) { missing = missing " " lv[1]; continue }
                if (split(ids[lv[2]], m, " ") != 1) { twice = twice " " lv[1] " (ids " ids[lv[2]] ")"; continue }
                nreq++; want[nreq] = ids[lv[2]]; label[nreq] = lv[1]
            }
            if (missing != "" || twice != "") {
                printf "trace %s: FAILED:%s%s%s%s\n", name, missing != "" ? " no alloc line for" : "",
                       missing, twice != "" ? " more than one alloc line of the size of" : "", twice
                bad++; continue
            }
            found = 0; delete some
            for (k = 1; k <= nk && !found; k++) {
                if (at[k] <= lo || at[k] >= hi) continue
                n = split(text[k], tok, " "); delete named
                for (t = 3; t <= n; t++) { split(tok[t], iv, ":"); named[iv[1]] = 1 }
                hits = 0; which = ""
                for (r = 1; r <= nreq; r++)
                    if (want[r] in named) { hits++; which = which " " label[r]; some[r] = 1 }
                if ((mode == "all" && hits == nreq) || (mode == "any" && hits > 0)) {
                    printf "trace %s: ok: line %d names%s: %s\n", name, at[k], which, text[k]
                    found = 1
                }
            }
            if (!found) {
                printf "trace %s: FAILED: no kernel line in lines %d..%d names %s of", name, lo, hi, mode
                for (r = 1; r <= nreq; r++) printf " %s (id %s)", label[r], want[r]
                which = ""
                for (r = 1; r <= nreq; r++) if (r in some) which = which " " label[r]
                printf "%s\n", which != "" ? "; lines there name" which : "; none names any"
                bad++
            }
        }
        exit bad != 0
    }' phase=1 "$1" phase=2 "$2"
}

if [ "${1:-}" = --check ]; then
    if [ $# -ne 3 ]; then
        echo "usage: preload-probe.sh --check PROBE_OUTPUT TRACE" >&2
        exit 2
    fi
    for f in "$2" "$3"; do
        [ -r "$f" ] || { echo "preload-probe: cannot read $f" >&2; exit 2; }
    done
    check_trace "$2" "$3"
    exit $?
fi

build=${1:?usage: preload-probe.sh BUILD_DIR [OUT_DIR]}
out=${2:-}
[ -n "$out" ] || out=$(mktemp -d)
mkdir -p "$out" || exit 1
probe=$build/tests/preload_probe lib=$build/liblms.so
log=$out/preload_probe.log trace=$out/preload_probe.trace
for f in "$probe" "$lib"; do
    [ -e "$f" ] || { echo "preload-probe: no $f (built with nvcc: tests/gpu/gpu.cmake)"; exit 1; }
done

run() { # [VAR=VALUE...] COMMAND...: under the preload; the output in $log.run
    env LD_PRELOAD="$lib" LMS_BACKEND=cuda LMS_DEVICE_LIMIT="${LMS_DEVICE_LIMIT:-256MiB}" \
        LMS_HOST_LIMIT="${LMS_HOST_LIMIT:-2GiB}" "$@" >"$log.run" 2>&1
}

rm -f "$trace"
run LMS_TRACE_ACCESSES="$trace" "$probe"
rc=$?
cp "$log.run" "$log"
cat "$log"
[ "$rc" -eq 77 ] && exit 77
[ "$rc" -eq 127 ] && echo "preload-probe: the probe could not start (a CUDA library missing? ldd $probe)"

if [ "$rc" -ne 0 ]; then
    echo "---- each failed case alone, in a process of its own:"
    for c in $(sed -n 's/^case \([a-z_0-9]*\): FAILED.*/\1/p' "$log"); do
        run "$probe" "$c"
        grep "^case $c:" "$log.run" | sed 's/^/alone: /'
    done
fi
rm -f "$log.run"

echo "---- the trace ($trace):"
if [ ! -s "$trace" ]; then
    echo "trace: FAILED: liblms.so wrote no trace"
    exit 1
fi
check_trace "$log" "$trace"
trc=$?
[ "$rc" -eq 0 ] && [ "$trc" -eq 0 ] && { echo "preload-probe: passed"; exit 0; }
echo "preload-probe: FAILED (probe exit $rc, trace check exit $trc)"
exit 1
