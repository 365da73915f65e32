#!/bin/sh
# Builds lms fresh on a GPU machine and runs the named steps, each under its
# own time limit, writing every log into OUTDIR (the device tool's $OUT).
# For the lent GPU machine, which has CUDA and CMake but no package registry:
# the Debian build dependencies travel in .deps (see docs/gpu-results.md).
#
#   tools/gpu-session.sh OUTDIR STEP[:SECONDS]...
#
# Steps: env (driver, toolkit, CPU), build (fresh, in /tmp/lms-gpu), info
# (lms-info --json), test (ctest -L gpu), a suite by name (test_device,
# test_swap, ...: that suite alone on cuda), stress, alloc, swap, remap,
# vmm_threads, train, many_chunks (the benchmarks on cuda), alloc_sim (bench/alloc on sim:
# the host alone), gpt2 (bench/gpt2.py: PyTorch under LD_PRELOAD at 2x),
# gpt2_e2e (the same at 1.25x-4x). A step that fails is logged and the next one runs; a
# step whose time is up is killed. With LMS_GPU_DEADLINE (seconds since the
# epoch) set, no step runs past it. The device tool brings back 8 files at
# most, so OUTDIR gets summary.txt, the benchmarks' output as NAME.jsonl, and
# every other step's log in all.log.
set -u
B=/tmp/lms-gpu

if [ "${1:-}" = --do ]; then # one step's body, run under timeout by step()
    case $2 in
    env)
        date -u; uname -a
        nvidia-smi; nvidia-smi -q | sed -n '1,30p'
        nvcc --version; cmake --version | head -1; gcc --version | head -1
        lscpu | sed -n '1,20p'
        cat /sys/devices/system/node/online ;;
    build)
        rm -rf "$B" && mkdir -p "$B" &&
            cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
                -DLMS_JEMALLOC_TARBALL="$PWD/.deps/jemalloc_5.3.0.orig.tar.bz2" &&
            cmake --build "$B" -j"$(nproc)" ;;
    info) LMS_BACKEND=cuda "$B/lms-info" --json ;;
    test) ctest --test-dir "$B" -L gpu --output-on-failure --timeout "$3" -j1 ;;
    test_*) LMS_BACKEND=cuda "$B/tests/$2" --jobs 1 --verbose=1 --timeout 60 ;;
    stress)
        LMS_BACKEND=cuda LMS_DEVICE_LIMIT=2GiB LMS_HOST_LIMIT=16GiB \
            "$B/tests/stress" --ops "${LMS_GPU_STRESS_OPS:-200000}" ;;
    alloc | swap | remap | vmm_threads) LMS_BACKEND=cuda "$B/bench/$2" ;;
    alloc_sim) LMS_BACKEND=sim "$B/bench/alloc" --quick ;; # the host alone, for comparison
    train) LMS_BACKEND=cuda "$B/bench/train" --oversub 2,4 ;;
    many_chunks) LMS_BACKEND=cuda "$B/bench/many_chunks" --chunks 8192 ;; # 16 GB, 32 GB on host
    gpt2) python3 bench/gpt2.py suite --lib "$B/liblms.so" --ratios 2 ;;
    gpt2_e2e) python3 bench/gpt2.py suite --lib "$B/liblms.so" --ratios 1.25,1.5,2,4 --steps 12 ;;
    *) echo "unknown step $2" >&2; exit 2 ;;
    esac
    exit
fi

out=${1:?usage: gpu-session.sh OUTDIR STEP[:SECONDS]...}
shift
deadline=${LMS_GPU_DEADLINE:-0}
summary=$out/summary.txt
logs=$(mktemp -d)
: >"$summary"
for s in "$@"; do
    name=${s%%:*} secs=${s#*:}
    [ "$secs" = "$s" ] && secs=300
    if [ "$deadline" -gt 0 ]; then
        left=$((deadline - $(date +%s)))
        [ "$left" -lt 10 ] && { echo "$name: not started (deadline)" >>"$summary"; continue; }
        [ "$secs" -gt "$left" ] && secs=$left
    fi
    t0=$(date +%s)
    timeout -k 5 "$secs" sh "$0" --do "$name" "$secs" >"$logs/$name.log" 2>&1
    echo "$name: rc=$? in $(($(date +%s) - t0)) s (limit $secs)" >>"$summary"
    case $name in
    alloc | alloc_sim | swap | remap | vmm_threads | train | gpt2 | gpt2_e2e) cp "$logs/$name.log" "$out/$name.jsonl" ;;
    *) { echo "==== $name"; cat "$logs/$name.log"; } >>"$out/all.log" ;;
    esac
done
cat "$summary"
