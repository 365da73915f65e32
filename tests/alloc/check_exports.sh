#!/bin/sh
# check_exports.sh LIB — liblms.so exports only lms_* symbols (none of malloc's
# family, nothing of its private jemalloc) and needs no libjemalloc.
set -eu
lib=${1:?usage: check_exports.sh path/to/liblms.so}
# __odr_asan.*: AddressSanitizer's ODR indicators, one per exported global,
# present in the sanitized build only.
bad=$(nm -D --defined-only "$lib" | awk 'NF >= 3 && $3 !~ /^lms_/ && $3 !~ /^__odr_asan\./ { print $3 }')
[ -z "$bad" ] || { printf "FAIL: %s exports non-lms symbols: %s\n" "$lib" "$(echo "$bad" | tr "\n" " ")"; exit 1; }
needed=$(readelf -d "$lib" | grep NEEDED || true)
if echo "$needed" | grep -qi jemalloc; then
    echo "FAIL: $lib needs a jemalloc library:"; echo "$needed"; exit 1
fi
n=$(nm -D --defined-only "$lib" | awk 'NF >= 3' | wc -l)
echo "check_exports: $lib exports $n symbols, all lms_*; needs no jemalloc"
