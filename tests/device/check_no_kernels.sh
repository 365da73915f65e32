#!/bin/sh
# check_no_kernels.sh NM LIB — liblms.so holds none of the test kernels, which
# are the library lms_kernels' (Note [Kernels table] in device/device.c): no
# symbol of theirs (dev_fill, dev_checksum, dev_axpy, dev_kernel*, the host
# references, the fatbin dev_cuda_kernels_image), dynamic or local, and no
# CUDA kernel's name, which their fatbin, or a module lookup, would carry.
set -eu
nm=${1:?usage: check_no_kernels.sh NM path/to/liblms.so}
lib=${2:?usage: check_no_kernels.sh NM path/to/liblms.so}
# A stripped library has no local symbols left to read: the names are still checked.
syms=$({ "$nm" "$lib" 2>/dev/null || true; "$nm" -D "$lib"; } | awk 'NF >= 2 { print $NF }')
[ -n "$syms" ] || { echo "FAIL: $nm read no symbol of $lib"; exit 1; }
bad=$(echo "$syms" | grep -E '^(dev_(fill|checksum|axpy|kernel|mix64|cuda_kernels_image)|kernels_)' \
    | sort -u || true)
[ -z "$bad" ] || { printf "FAIL: %s has the test kernels' symbols: %s\n" "$lib" "$(echo "$bad" | tr '\n' ' ')"; exit 1; }
for name in dev_fill_kernel dev_checksum_kernel dev_axpy_kernel dev_k_gemm; do
    if grep -q -a -F "$name" "$lib"; then
        echo "FAIL: $lib holds the CUDA kernel name $name (a fatbin, or a module lookup)"
        exit 1
    fi
done
echo "check_no_kernels: $lib holds no test kernel, reference or fatbin"
