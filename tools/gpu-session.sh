#!/bin/sh
# Builds lms fresh on a GPU machine and runs the named steps, each under its
# own time limit, writing every log into OUTDIR (the device tool's $OUT).
# For the lent GPU machine, which has CUDA and CMake but no package registry:
# the Debian build dependencies travel in .deps (see docs/gpu-results.md).
#
#   tools/gpu-session.sh OUTDIR STEP[:SECONDS]...
#   tools/gpu-session.sh OUTDIR PLAN CALL       a plan's steps for one device call
#   tools/gpu-session.sh --dry-run OUTDIR PLAN|STEP...
#
# Steps: env (driver, toolkit, CPU), torch (python3's torch and CUDA versions,
# and which of __cudaLaunchKernel and cudaLaunchKernel torch's libtorch_cuda.so
# calls), build (fresh, in /tmp/lms-gpu), build_lib (the same, liblms.so
# only), build_bench (the same, liblms.so, bench/remap, swap and simulate and
# bench/libuvm_alloc.so only), build_host (the same, liblms.so, lms-info,
# bench/swap, bench/host_numa, tests/test_swap and tests/stress only), info
# (lms-info --json), test (ctest -L gpu), a suite by name (test_device,
# test_swap, ...: that suite alone on cuda), stress, alloc, swap, remap (with
# unified memory's migration rates),
# vmm_threads, train, many_chunks (the benchmarks on cuda), alloc_sim
# (bench/alloc on sim: the host alone), preload (tests/gpu/preload-probe.sh),
# launch_gpu (a hooked launch's real cost) and host_numa (CUDA 13's
# host-located VMM memory: granularity, handle count, map/set_access/unmap
# idle and beside copies, copy and kernel rates through host mappings, an
# eviction and fetch by hand), both under LD_PRELOAD, gpt2 (bench/gpt2.py:
# PyTorch under LD_PRELOAD at 2x), gpt2_e2e (the same at 1.25x-4x),
# gpt2_small (the small model unlimited and at 2x, --diagnose), gpt2_oversub
# (the suite at 2x, 4x, 1.25x, short enough for one call), gpt2_uvm (the
# suite at 2x: lms beside unified memory, with and without prefetch hints),
# calibrate (bench/calibrate.py: the simulator's prediction for gpt2_uvm's
# model and limit beside what the card did; after gpt2_uvm in one call),
# and issue 27's steps that need its host-mapped eviction (LMS_EVICTED=host),
# which skip (77) saying why until lms-info resolves that mode on the device:
# swap_modes (bench/swap --quick under LMS_EVICTED=unmapped, then host, each
# row tagged "evicted"), test_swap_host and stress_host (tests/test_swap and
# the stress on cuda under LMS_EVICTED=host), and unseen_host
# (tests/test_unseen's unseen suite on cuda: a kernel reads and writes an
# evicted chunk through pointers in device memory, in host mode), and
# python_torch (lms.torch.use() of the Python package, python/: an MLP of
# ~1.8 GB trained 4 steps as PyTorch's allocator alone, a hard 4 GiB limit,
# then under the preload at 768 MiB, swapping; tests/gpu/python_torch.py).
#
# Plans (one device call each, 9 minutes at most: the call's deadline is
# 520 s after the script starts unless LMS_GPU_DEADLINE says otherwise; with
# the unpacking of .deps before it, the 5 s a killed step is given and the
# tar after it, a call ends within 540 s):
#   first 1   env torch build info preload gpt2_small launch_gpu host_numa test
#             (what never ran on a card first; ctest -L gpu, which has passed
#             on twelve calls, gets what is left)
#   first 2   env build_lib gpt2_oversub
#   first 3   env build_bench remap gpt2_uvm calibrate swap (issue 26: unified
#             memory, the peer, beside lms, and the simulator's calibration)
#   first 4   env build_host host_numa test_host_blocks swap_modes test_swap_host stress_host
#             unseen_host (issue 27: host-mapped eviction; test_host_blocks's
#             host_block_runs says whether one copy may span host blocks on
#             cuda, which swap/ avoids until it has: dev_info_t.host_block_runs)
#   first 5   env build_run lmsrun_gpt2 python_torch (issue 28: lms-run and the
#             Python package's lms.torch.use() on the card)
# From the repository root, in the device tool's run:
#   eval "$(sh .deps/deps.sh unpack .deps /opt/lmsdeps)" && sh tools/gpu-session.sh "$OUT" first 1
#
# A step that fails is logged and the next one runs; a step whose time is up
# is killed. With LMS_GPU_DEADLINE (seconds since the epoch) set, no step runs
# past it. Exit status 1 when a step failed. summary.txt has a line per step:
# "NAME: rc=0 in N s (limit L)", "NAME: skipped (rc=77) ...: why" (77: the
# step's "cannot run here"), "NAME: FAILED rc=N ...: its last line". The
# device tool brings back 8 files at most, so OUTDIR gets summary.txt, the
# benchmarks' output as NAME.jsonl, every other step's log in all.log, and
# what steps leave beside (gpt2.py's per-run logs and traces, the preload
# probe's files) in artifacts.tgz.
#
# --dry-run proves the script without a card (CTest tools.gpu_session_dry_run):
# no GPU is visible (CUDA_VISIBLE_DEVICES=), the build is the one in
# LMS_GPU_BUILD (default build/; nothing is compiled), lms-info runs on sim,
# the steps that need a card are listed as "skipped: needs a card", and the
# others run and must pass or skip (77): the preload probe, launch_gpu,
# host_numa and gpt2.py skip without a card or torch, calibrate, with no
# rows, predicts the small model alone (skipped where python3 has no torch),
# and issue 27's steps resolve LMS_EVICTED=host on sim and skip either way
# (without the mode, saying so; with it, as needing a card).
# A plan without a call number is each of its calls in turn, each into
# OUTDIR/callN. It fails when a step fails or a call's folder holds more than
# 8 files.
set -u

# Steps that cannot run without a card (--dry-run skips them): one list.
card_step() {
    case $1 in
    swap_modes | test_swap_host | stress_host | unseen_host) return 1 ;; # host_mode says, in a dry run too
    test | test_* | stress | alloc | swap | remap | vmm_threads | train | many_chunks) return 0 ;;
    *) return 1 ;;
    esac
}

# Steps whose output is JSON lines: OUTDIR/NAME.jsonl; the rest go to all.log.
jsonl_step() {
    case $1 in
    alloc | alloc_sim | swap | swap_modes | remap | vmm_threads | train | gpt2 | gpt2_e2e | \
        gpt2_small | gpt2_oversub | gpt2_uvm | calibrate | launch_gpu | host_numa | \
        lmsrun_gpt2) return 0 ;;
    *) return 1 ;;
    esac
}

# A plan's steps for one call (NAME:SECONDS each; the deadline clips them).
# Times: what earlier calls took (docs/gpu-results.md) or an estimate.
plan() {
    case $1:$2 in
    # env ~5 s; torch ~10 s (import, nm -D of a ~1 GB library); build 37 s
    # on the tenth call; info ~5 s; preload, launch_gpu, host_numa: new,
    # ~10-30 s each; gpt2_small: 5 processes of ~10-15 s each (torch's start,
    # a 4-layer model, 4 steps); test: 6 suites took ~100 s, plus whatever
    # tests/gpu/gpu.cmake adds. About 300 s in all, under the 520 s deadline.
    first:1) echo env:30 torch:60 build:180 info:60 preload:90 gpt2_small:180 launch_gpu:60 \
        host_numa:60 test:300 ;;
    # A fresh machine: liblms.so alone (~30 s), then the suite. Its estimate,
    # for GPT-2 medium's shape (355M parameters, batch 8 x 1024, footprint F
    # ~35 GB): each run is a process paying torch's start, the model's
    # creation and the first step's setup, ~12 s (~20 s under the preload),
    # then per step ~0.5 s plain (about 20 TFLOP of fp32 without TF32),
    # ~0.6 s under lms unlimited, ~1, 2 and 3.5 s under lms at 1.25x, 2x and
    # 4x (F - F/X swapped each way at the 13-25 GB/s bench/swap reads), and
    # ~1.5 s with save_on_cpu (its activations out and back over the link);
    # the fraction runs fail at the first step. Fixed: plain 12 + lms 20 +
    # 3 x (lms 20 + fraction 12 + save_on_cpu 25) = ~200 s; per step: 0.5 +
    # 0.6 + (1 + 2 + 3.5) + 3 x 1.5 = ~12 s; 6 steps (4 timed): ~275 s, with
    # env and build ~310 s, leaving the first runs under the preload 1.7x
    # slack (485 s) before the deadline; each run is ended at 150 s. 2x first (issue 6's gate), 1.25x last: if the
    # deadline cuts the suite, the run it loses is the least needed.
    first:2) echo env:30 build_lib:150 gpt2_oversub:480 ;;
    # Issue 26's GPU half. A fresh machine: liblms.so and the benchmarks the
    # call runs (~30 s, the full build took 37 s); bench/remap ~30 s (its
    # rows as before, ~25 s, then 2 GiB of managed memory filled on the host
    # and 1 GiB moved 16 times each way and 8 both ways, ~3 s); gpt2_uvm
    # (GPT-2 medium at 2x, 4 steps, each run ended at 100 s): plain ~15 s,
    # lms unlimited ~25 s, lms at 2x ~45 s (a first step of 11.5 s, then 3 s
    # a step on 2026-11-26's H200), uvm and uvm_prefetch unknown, at most
    # 100 s each (a step's progress line is in its log when the run is cut):
    # ~285 s at most; calibrate: the model recorded on meta (26 s on this
    # project's 2-core CPU machine) and simulated twice at the suite's limit
    # (14 s each there), ~30 s on the card's host; swap last, with what is
    # left (~100 s; its rows were 2026-11-23's, on another card). About 400 s
    # in all, under the 520 s deadline.
    first:3) echo env:30 build_bench:150 remap:120 gpt2_uvm:300 calibrate:90 swap:150 ;;
    # Issue 27's GPU half. A fresh machine: the six targets (~40 s; the full
    # build took 37 s); host_numa ~30 s (4096 host blocks of 2 MiB made,
    # mapped and released: never timed, 2 s at 0.5 ms each; 9 x 50
    # map/set_access/unmap rounds, those beside D2H copies ~1-2 ms each; 16
    # copy lines of at most 64 MiB x 8; 10 kernel lines of 1-5 GiB through a
    # ~50 GB/s link); then,
    # once the mode exists (until then each skips in a second): swap_modes,
    # bench/swap --quick twice (~60-100 s each: the full sweep took ~100 s),
    # test_swap_host (~60 s: test_swap was one of 6 suites that took ~100 s)
    # and stress_host (the 200 000 operations took 44 s unmapped). About
    # 400 s in all, under the 520 s deadline; host_numa first, as the rest
    # may not run yet.
    first:4) echo env:30 build_host:150 host_numa:120 test_host_blocks:30 swap_modes:240 \
        test_swap_host:120 stress_host:120 unseen_host:30 ;;
    # Issue 28's GPU half: liblms.so and lms-report (~30 s); lmsrun_gpt2, the
    # small GPT-2 (4 layers, 4 steps; gpt2_small's runs took ~10-15 s each)
    # under lms-run twice, unlimited and at 256 MiB (~40 s); python_torch,
    # an MLP of ~1.8 GB, 4 steps, as PyTorch's allocator at 4 GiB and then
    # under the preload at 768 MiB (new: ~60-120 s). About 250 s.
    first:5) echo env:30 build_run:150 lmsrun_gpt2:150 python_torch:240 ;;
    *) return 1 ;;
    esac
}

# The steps: step_NAME NAME SECONDS is step NAME's body, run by --do under
# timeout; test_* (a suite by name) is step_suite. B (the build), DRY (1 in a
# dry run) and ART (the step's folder for files beside its log) come from the
# loop below.
step_fn() {
    case $1 in
    test_swap_host) echo step_test_swap_host ;;
    test_*) echo step_suite ;;
    *) echo "step_$1" ;;
    esac
}
missing() { # a file a step needs is absent: a skip in a dry run, else a failure
    echo "not present: $1"
    [ "$DRY" = 1 ] && exit 77
    exit 127
}
step_env() {
    date -u; uname -a
    nvidia-smi; nvidia-smi -q | sed -n '1,30p'
    nvcc --version; cmake --version | head -1; gcc --version | head -1
    lscpu | sed -n '1,20p'
    cat /sys/devices/system/node/online 2>/dev/null || echo "no NUMA nodes listed"
}
step_torch() {
    command -v python3 || { echo "no python3"; exit 77; }
    python3 -c 'import sys; print("python", sys.version.split()[0], sys.executable)'
    dir=$(python3 -c 'import torch, os; print(os.path.dirname(torch.__file__))') ||
        { echo "python3 has no torch"; exit 77; }
    python3 -c 'import torch
print("torch", torch.__version__, "built with CUDA", torch.version.cuda,
      "cudnn", torch.backends.cudnn.version() if torch.version.cuda else None)
print("cuda available:", torch.cuda.is_available(),
      torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")'
    lib=$dir/lib/libtorch_cuda.so
    [ -f "$lib" ] || { echo "torch has no $lib (a CPU-only torch?)"; exit 77; }
    echo "$lib: $(du -h "$lib" | cut -f1)"
    ldd "$lib" | grep -Ei 'cudart|libcuda\.' || true
    # nvcc 13's <<<>>> stubs call __cudaLaunchKernel, older ones
    # cudaLaunchKernel (DESIGN.md, "Where access knowledge comes from")
    launch=' U _*cudaLaunchKernel(_ptsz)?(@[^ ]*)?$'
    syms=$(mktemp)
    nm -D "$lib" >"$syms" || exit 1
    grep -E "$launch" "$syms"
    for s in __cudaLaunchKernel cudaLaunchKernel; do
        if grep -Eq " U $s(@|\$)" "$syms"; then
            echo "libtorch_cuda.so references $s"
        else
            echo "libtorch_cuda.so does not reference $s"
        fi
    done
    # torch's other libraries that launch kernels through the runtime
    for f in "$dir"/lib/*.so*; do
        nm -D "$f" 2>/dev/null | grep -E "$launch" >"$syms" &&
            echo "${f##*/}: $(sed 's/.* U //' "$syms" | tr '\n' ' ')"
    done
    rm -f "$syms"
}
step_build() {
    if [ "$DRY" = 1 ]; then # the build already made; nothing is compiled
        echo "dry run: using the build in $B"
        for f in liblms.so lms-info; do [ -e "$B/$f" ] || { echo "no $B/$f"; exit 1; }; done
        return
    fi
    [ "$B" = /tmp/lms-gpu ] && rm -rf "$B" # fresh; never a folder named in LMS_GPU_BUILD
    mkdir -p "$B" &&
        cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
            -DLMS_JEMALLOC_TARBALL="$PWD/.deps/jemalloc_5.3.0.orig.tar.bz2" || return
    if [ "$1" = build_lib ]; then
        cmake --build "$B" -j"$(nproc)" --target lms # liblms.so alone
    elif [ "$1" = build_bench ]; then # what plan first 3 runs; uvm_alloc last, as a toolkit
        # without libcuda's stub has no such target (bench/CMakeLists.txt): the rest is built
        cmake --build "$B" -j"$(nproc)" --target lms bench_remap bench_swap bench_simulate &&
            cmake --build "$B" -j"$(nproc)" --target uvm_alloc
    elif [ "$1" = build_run ]; then # what plan first 5 runs (lms-run is made at configure)
        cmake --build "$B" -j"$(nproc)" --target lms lms-report
    elif [ "$1" = build_host ]; then # what plan first 4 runs
        cmake --build "$B" -j"$(nproc)" --target lms lms-info bench_swap bench_host_numa \
            test_swap stress test_unseen test_host_blocks
    else
        cmake --build "$B" -j"$(nproc)"
    fi
}
step_build_lib() { step_build "$@"; }
step_build_bench() { step_build "$@"; }
step_build_host() { step_build "$@"; }
step_build_run() { step_build "$@"; }
step_info() {
    backend=cuda
    [ "$DRY" = 1 ] && backend=sim
    LMS_BACKEND=$backend "$B/lms-info" --json
}
# (the preload probe has a step of its own: not run twice in one call)
step_test() { ctest --test-dir "$B" -L gpu -E '^gpu\.preload_probe$' --output-on-failure --timeout "$2" -j1; }
step_suite() { LMS_BACKEND=cuda "$B/tests/$1" --jobs 1 --verbose=1 --timeout 60; }
step_stress() {
    LMS_BACKEND=cuda LMS_DEVICE_LIMIT=2GiB LMS_HOST_LIMIT=16GiB \
        "$B/tests/stress" --ops "${LMS_GPU_STRESS_OPS:-200000}"
}
step_alloc() { LMS_BACKEND=cuda "$B/bench/$1"; }
step_swap() { step_alloc "$@"; }
step_remap() { step_alloc "$@"; }
step_vmm_threads() { step_alloc "$@"; }
step_alloc_sim() { LMS_BACKEND=sim "$B/bench/alloc" --quick; } # the host alone, for comparison
step_train() { LMS_BACKEND=cuda "$B/bench/train" --oversub 2,4; }
step_many_chunks() { LMS_BACKEND=cuda "$B/bench/many_chunks" --chunks 8192; } # 16 GB, 32 GB on host
step_preload() {
    [ -f tests/gpu/preload-probe.sh ] || missing tests/gpu/preload-probe.sh
    sh tests/gpu/preload-probe.sh "$B" "$ART"
}
preloaded() { # a benchmark of the build under liblms.so, on cuda
    [ -x "$B/bench/$1" ] || missing "$B/bench/$1 (built where nvcc is)"
    LD_PRELOAD="$B/liblms.so" LMS_BACKEND=cuda "$B/bench/$1"
}
# 1 GiB of device so that its swapping case fills it; LRU so that its
# hook_seen line is exact (no prefetch brings a buffer back before the launch)
step_launch_gpu() { LMS_DEVICE_LIMIT=1GiB LMS_HOST_LIMIT=4GiB LMS_POLICY=lru preloaded "$@"; }
step_host_numa() { preloaded "$@"; }
# Issue 27's host-mapped eviction: lms-info --json resolves LMS_EVICTED=host as
# lms_init would under the preload ("evicted":"host", or "refused" and why);
# a build that has not the mode, or a device that cannot, skips (77), saying
# so. In a dry run it resolves on sim, and a step that gets the mode still
# skips: it needs a card.
host_mode() {
    backend=cuda
    [ "$DRY" = 1 ] && backend=sim
    info=$(LMS_EVICTED=host LMS_BACKEND=$backend "$B/lms-info" --json 2>&1)
    case $info in
    *'"evicted":"host"'*) ;;
    *'"evicted":'*)
        echo "skipped: LMS_EVICTED=host is not available on $backend in this build (issue 27):" \
            "$(echo "$info" | sed -n 's/.*"evicted":"\([^"]*\)".*"evicted_why":"\([^"]*\)".*/\1: \2/p')"
        exit 77 ;;
    *)
        echo "skipped: this build's lms-info names no evicted mode (issue 27's LMS_EVICTED):" \
            "$(echo "$info" | tail -n 1)"
        exit 77 ;;
    esac
    if [ "$DRY" = 1 ]; then
        echo "dry run: LMS_EVICTED=host resolves on sim; the step needs a card"
        exit 77
    fi
}
step_swap_modes() { # bench/swap in each mode, each row tagged with it
    host_mode
    rows=$(mktemp) rc=0
    for mode in unmapped host; do
        LMS_BACKEND=cuda LMS_EVICTED=$mode "$B/bench/swap" --quick >"$rows" || rc=1
        sed "/\"evicted\":/!s/^{\"bench\":\"swap\"/&,\"evicted\":\"$mode\"/" "$rows"
    done
    rm -f "$rows"
    return $rc
}
step_test_swap_host() { host_mode && export LMS_EVICTED=host && step_suite test_swap; }
step_stress_host() { host_mode && export LMS_EVICTED=host && step_stress; }
step_unseen_host() { host_mode && LMS_BACKEND=cuda "$B/tests/test_unseen" --filter='unseen/*' --verbose=1; }
gpt2() { # gpt2.py's suite on this build, its runs' logs in ART
    command -v python3 >/dev/null || { echo "no python3"; exit 77; }
    PYTHONUNBUFFERED=1 python3 bench/gpt2.py suite --lib "$B/liblms.so" --out "$ART" "$@"
}
step_gpt2() { gpt2 --ratios 2; }
step_gpt2_e2e() { gpt2 --ratios 1.25,1.5,2,4 --steps 12; }
# a run that hangs is ended by --timeout and the next one runs
step_gpt2_small() { gpt2 --small --ratios 2 --diagnose --timeout 90; }
step_gpt2_oversub() { gpt2 --ratios 2,4,1.25 --steps 6 --timeout 150; } # see plan first 2
step_gpt2_uvm() { # see plan first 3
    gpt2 --ratios 2 --runs lms,uvm,uvm_prefetch --steps 4 --timeout 100 \
        --uvm-lib "$B/bench/libuvm_alloc.so"
}
step_calibrate() { # the simulator beside gpt2_uvm's rows, which are in the folder beside ART
    command -v python3 >/dev/null || { echo "no python3"; exit 77; }
    if [ "$DRY" = 1 ]; then # no card, no rows: the small model's prediction alone
        python3 bench/calibrate.py --predict-only --small --simulate "$B/bench/simulate" --out "$ART"
        exit
    fi
    results=$(dirname "$ART")/gpt2_uvm/results.jsonl
    [ -f "$results" ] || missing "$results (the gpt2_uvm step's, earlier in the same call)"
    python3 bench/calibrate.py --results "$results" --simulate "$B/bench/simulate" --out "$ART"
}

# lms-run (tools/lms-run.in) as a user types it: bench/gpt2.py's small model
# under it, unlimited and then at 256 MiB with the stats, the timeline and
# its report (ART/lmsrun.json, .html); gpt2.py's JSON lines on stdout.
step_lmsrun_gpt2() {
    command -v python3 >/dev/null || { echo "no python3"; exit 77; }
    python3 bench/gpt2.py check || exit 77
    LMS_BACKEND=cuda "$B/lms-run" --stats -- python3 bench/gpt2.py run --small \
        --label lmsrun_unlimited || return
    LMS_BACKEND=cuda "$B/lms-run" --device-limit 256MiB --host-limit 8GiB --stats \
        --trace "$ART/lmsrun.json" --report -- python3 bench/gpt2.py run --small \
        --label lmsrun_256MiB
}

# lms.torch.use() (python/lms) on the card: each run exits 77 (skipped) where
# python3 has no torch with CUDA, a dry run's case (no GPU visible).
step_python_torch() {
    command -v python3 >/dev/null || { echo "no python3"; exit 77; }
    export PYTHONPATH="$PWD/python" LMS_LIBRARY="$B/liblms.so" LMS_BACKEND=cuda
    LMS_DEVICE_LIMIT=4GiB python3 tests/gpu/python_torch.py || return
    LD_PRELOAD="$B/liblms.so" LMS_DEVICE_LIMIT=768MiB LMS_HOST_LIMIT=8GiB \
        python3 tests/gpu/python_torch.py --expect-swap
}

if [ "${1:-}" = --do ]; then # one step, run under timeout by the loop below
    "$(step_fn "$2")" "$2" "$3"
    exit
fi

dry=0
[ "${1:-}" = --dry-run ] && { dry=1; shift; }
usage="usage: gpu-session.sh [--dry-run] OUTDIR STEP[:SECONDS]... | OUTDIR PLAN CALL"
out=${1:?$usage}
shift
[ $# -gt 0 ] || { echo "$usage" >&2; exit 2; }
self=$(cd "$(dirname "$0")" && pwd)/gpu-session.sh
mkdir -p "$out" && out=$(cd "$out" && pwd) || exit 2
if [ -n "${LMS_GPU_BUILD:-}" ]; then
    B=$(mkdir -p "$LMS_GPU_BUILD" && cd "$LMS_GPU_BUILD" && pwd) || exit 2
elif [ "$dry" = 1 ]; then
    B=$(dirname "$self")/../build
else
    B=/tmp/lms-gpu
fi
cd "$(dirname "$self")/.." || exit 2 # the repository root: steps name its files

deadline=${LMS_GPU_DEADLINE:-0}
if [ $# = 1 ] && plan "$1" 1 >/dev/null; then # a plan without a call number
    if [ "$dry" = 0 ]; then
        echo "gpu-session.sh: say which call of plan $1 (e.g. $1 1): one call cannot hold them all" >&2
        exit 2
    fi
    rc=0 n=1
    while plan "$1" "$n" >/dev/null; do # each call's dry run, as the card would run it
        sh "$self" --dry-run "$out/call$n" "$1" "$n" || rc=1
        n=$((n + 1))
    done
    exit $rc
fi
if steps=$(plan "$1" "${2:-}"); then
    label="plan $*"
    [ "$deadline" -gt 0 ] || [ "$dry" = 1 ] || deadline=$(($(date +%s) + 520))
else
    steps=$*
    label="steps $*"
fi
for s in $steps; do # every name must be a step before any runs
    command -v "$(step_fn "${s%%:*}")" >/dev/null ||
        { echo "gpu-session.sh: unknown step ${s%%:*}" >&2; exit 2; }
done

if [ "$dry" = 1 ]; then
    CUDA_VISIBLE_DEVICES= # nothing may reach a card
    export CUDA_VISIBLE_DEVICES
fi
B=$(mkdir -p "$B" && cd "$B" && pwd) || exit 2
DRY=$dry
export B DRY

summary=$out/summary.txt
logs=$(mktemp -d)
arts=$(mktemp -d)
: >"$summary"
: >"$out/all.log"
echo "$label$([ "$dry" = 1 ] && echo ' (dry run)'), build $B" >>"$summary"
t_start=$(date +%s)
ok=0 skipped=0 failed=0 late=0
for s in $steps; do
    name=${s%%:*} secs=${s#*:}
    [ "$secs" = "$s" ] && secs=300
    if [ "$dry" = 1 ] && card_step "$name"; then
        echo "$name: skipped: needs a card" >>"$summary"
        skipped=$((skipped + 1))
        continue
    fi
    if [ "$deadline" -gt 0 ]; then
        left=$((deadline - $(date +%s)))
        if [ "$left" -lt 10 ]; then
            echo "$name: not started (deadline)" >>"$summary"
            late=$((late + 1))
            continue
        fi
        [ "$secs" -gt "$left" ] && secs=$left
    fi
    ART=$arts/$name
    mkdir -p "$ART"
    export ART
    t0=$(date +%s)
    timeout -k 5 "$secs" sh "$self" --do "$name" "$secs" >"$logs/$name.log" 2>&1
    rc=$?
    took=$(($(date +%s) - t0))
    last=$(grep -v '^[[:space:]]*$' "$logs/$name.log" | tail -n 1 | cut -c1-160)
    case $rc in
    0) echo "$name: rc=0 in $took s (limit $secs)" >>"$summary"; ok=$((ok + 1)) ;;
    77) echo "$name: skipped (rc=77) in $took s (limit $secs): $last" >>"$summary"
        skipped=$((skipped + 1)) ;;
    124 | 137) echo "$name: FAILED rc=$rc (time limit) in $took s (limit $secs): $last" >>"$summary"
        failed=$((failed + 1)) ;;
    *) echo "$name: FAILED rc=$rc in $took s (limit $secs): $last" >>"$summary"
        failed=$((failed + 1)) ;;
    esac
    if jsonl_step "$name"; then
        cp "$logs/$name.log" "$out/$name.jsonl"
    else
        { echo "==== $name"; cat "$logs/$name.log"; } >>"$out/all.log"
    fi
done

# What the steps left beside their logs, as one file (the tool brings back 8):
# without the access traces if it would pass the tool's 16 MiB.
if [ -n "$(find "$arts" -type f | head -n 1)" ]; then
    tar -czf "$out/artifacts.tgz" -C "$arts" . &&
        if [ "$(wc -c <"$out/artifacts.tgz")" -gt 15000000 ]; then
            tar -czf "$out/artifacts.tgz" -C "$arts" --exclude='*.trace' . &&
                echo "artifacts.tgz: without the access traces (over 15 MB with them)" >>"$summary"
        fi
fi
rm -rf "$logs" "$arts"
files=$(find "$out" -type f | wc -l)
echo "$ok passed, $skipped skipped, $failed failed, $late not started in $(($(date +%s) - t_start)) s; $files files in $out" >>"$summary"
if [ "$files" -gt 8 ]; then
    echo "more than the 8 files the device tool brings back" >>"$summary"
    [ "$dry" = 1 ] && failed=$((failed + 1))
fi
cat "$summary"
[ "$failed" = 0 ]
