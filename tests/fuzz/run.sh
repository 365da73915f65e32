#!/bin/sh
# run.sh BUILD_DIR JEMALLOC_TARBALL — `make test-fuzz`: builds the fuzz
# targets (tests/fuzz/fuzz.cmake) with clang's libFuzzer, ASan and UBSan in
# BUILD_DIR, and runs each for LMS_FUZZ_SECONDS (60), all at once, from its
# seed corpus (tests/fuzz/corpus/NAME, only read) and a scratch corpus
# (BUILD_DIR/corpus/NAME, kept between runs). Fails on any crash, leak,
# sanitizer report or input slower than 10 s; what found it is kept as
# BUILD_DIR/artifacts/NAME/crash-* (or leak-*, timeout-*), which
# `BUILD_DIR/fuzz/fuzz_NAME FILE` replays. Without clang or its libFuzzer
# runtime it says so and exits 0: the seed corpora still run in every
# build's CTest (fuzz.NAME).
set -eu
dir=${1:?usage: run.sh build-dir jemalloc-tarball}
tarball=${2:?}
secs=${LMS_FUZZ_SECONDS:-60}
cc=${LMS_FUZZ_CC:-clang}
src=$(cd "$(dirname "$0")/../.." && pwd)

skip() {
    echo "test-fuzz: SKIPPED: $*; the seed corpora ran as CTest's fuzz.* tests" >&2
    exit 0
}
command -v "$cc" >/dev/null 2>&1 || skip "no $cc (Debian: apt-get install clang, or make deps)"
mkdir -p "$dir"
printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n)\n{ (void)d; (void)n; return 0; }\n' \
    >"$dir/probe.c"
"$cc" -fsanitize=fuzzer,address,undefined "$dir/probe.c" -o "$dir/probe" >"$dir/probe.log" 2>&1 ||
    skip "$cc cannot link libFuzzer (Debian: apt-get install libclang-rt-$("$cc" -dumpversion | cut -d. -f1)-dev): $(tail -n 1 "$dir/probe.log")"

cmake -S "$src" -B "$dir" -DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DLMS_SANITIZE=address,undefined -DLMS_FUZZ=ON -DLMS_JEMALLOC_TARBALL="$tarball" \
    >"$dir/configure.log" 2>&1 || { cat "$dir/configure.log"; exit 1; }
targets="fuzz_trace fuzz_report fuzz_options"
# fuzz_access needs CUDA's headers, as the interposer does
cmake --build "$dir" --target help 2>/dev/null | grep -q ' fuzz_access$' &&
    targets="$targets fuzz_access"
# shellcheck disable=SC2086 # the whole output in $dir/build.log, as make test's other builds
sh "$src/tools/quiet-build.sh" "$dir" -j"${JOBS:-$(nproc)}" --target $targets

start=$(date +%s)
for t in $targets; do
    name=${t#fuzz_}
    mkdir -p "$dir/corpus/$name" "$dir/artifacts/$name"
    rm -f "$dir/artifacts/$name"/*
    # new inputs go to the first folder: the scratch one
    "$dir/fuzz/$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=4096 \
        -close_fd_mask=3 -print_final_stats=1 -artifact_prefix="$dir/artifacts/$name/" \
        "$dir/corpus/$name" "$src/tests/fuzz/corpus/$name" >"$dir/$name.log" 2>&1 &
    eval "pid_$name=\$!"
done
failed=""
for t in $targets; do
    name=${t#fuzz_}
    rc=0
    eval "wait \$pid_$name" || rc=$?
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/$name.log")
    if [ "$rc" -ne 0 ]; then
        failed="$failed $name"
        echo "test-fuzz: $name FAILED (exit status $rc); the end of $dir/$name.log:" >&2
        tail -n 40 "$dir/$name.log" >&2
        ls "$dir/artifacts/$name" >&2
    else
        echo "test-fuzz: $name passed: ${runs:-?} inputs in ${secs} s"
    fi
done
echo "test-fuzz: $(($(date +%s) - start)) s of fuzzing, all targets at once"
[ -z "$failed" ] || { echo "test-fuzz: failed:$failed" >&2; exit 1; }
