#!/bin/sh
# bad_traces.sh SIMULATE CORPUS — bench/simulate on the traces of issue 24's
# bug 7, kept in the trace fuzz target's seed corpus: each is refused with
# "FILE:LINE: what" on stderr and exit status 2 (bad input), not run for
# minutes, failed as an internal error (exit 1), or cut short silently.
set -eu
simulate=${1:?usage: bad_traces.sh path/to/simulate corpus-dir}
corpus=${2:?}
failures=0

# refused FILE LINE MESSAGE-PATTERN
refused() {
    rc=0
    err=$("$simulate" --trace "$corpus/$1" --oversub 2 2>&1 >/dev/null) || rc=$?
    if [ "$rc" -ne 2 ]; then
        echo "FAIL: $1: exit status $rc, not 2: $err"
        failures=$((failures + 1))
    elif ! echo "$err" | grep -q "$1:$2: $3"; then
        echo "FAIL: $1: stderr does not match '$1:$2: $3': $err"
        failures=$((failures + 1))
    fi
}

refused bug7-chunk-count.trace 3 'the tensors live at once would need more than 1048576 chunks'
refused bug7-kernel-no-alloc.trace 3 'a kernel, and no alloc in the whole trace'
refused bug7-kernel-time.trace 4 "the kernels' times add up to more than 2^52 ns"
refused bug7-nul-byte.trace 4 'a NUL byte at column 13'
[ "$failures" -eq 0 ] || exit 1
echo "bad_traces: bench/simulate refused each of bug 7's traces with FILE:LINE and exit status 2"
