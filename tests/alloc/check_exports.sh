#!/bin/sh
# check_exports.sh LIB [HOOKS_H] — liblms.so exports only lms_* symbols and,
# given interpose/hooks.h, the CUDA entry points listed there and dlsym (none of
# malloc's family, nothing of its private jemalloc), and needs no libjemalloc.
set -eu
lib=${1:?usage: check_exports.sh path/to/liblms.so [interpose/hooks.h]}
hooks=${2:-}
allowed=" "
if [ -n "$hooks" ]; then
    # an entry: X(lib, ret, name, (params), (args))
    # and dlsym (interpose/dlsym.c), which answers the hooks too
    allowed=" dlsym $(sed -n 's/^ *X([a-z]*, *[A-Za-z_]*, *\([A-Za-z0-9_]*\),.*/\1/p' "$hooks" | tr '\n' ' ')"
    [ "$allowed" != " " ] || { echo "FAIL: no hooks read from $hooks"; exit 1; }
fi
# __odr_asan.*: AddressSanitizer's ODR indicators, one per exported global,
# present in the sanitized build only.
bad=$(nm -D --defined-only "$lib" | awk -v ok="$allowed" \
    'NF >= 3 && $3 !~ /^lms_/ && $3 !~ /^__odr_asan\./ && index(ok, " " $3 " ") == 0 { print $3 }')
[ -z "$bad" ] || { printf "FAIL: %s exports other symbols: %s\n" "$lib" "$(echo "$bad" | tr "\n" " ")"; exit 1; }
needed=$(readelf -d "$lib" | grep NEEDED || true)
if echo "$needed" | grep -qi jemalloc; then
    echo "FAIL: $lib needs a jemalloc library:"; echo "$needed"; exit 1
fi
if echo "$needed" | grep -qiE "libcuda|libcudart"; then
    echo "FAIL: $lib needs a CUDA library (it finds them at run time):"; echo "$needed"; exit 1
fi
n=$(nm -D --defined-only "$lib" | awk 'NF >= 3' | wc -l)
h=$(nm -D --defined-only "$lib" | awk -v ok="$allowed" 'NF >= 3 && index(ok, " " $3 " ") > 0' | wc -l)
echo "check_exports: $lib exports $n symbols: lms_* and $h hooked CUDA entry points; needs no jemalloc or CUDA library"
