#!/bin/sh
# Runs a test binary on the cuda backend (CTest label `gpu`), or exits 77 —
# CTest's "skipped" — with the reason when this machine has no CUDA device.
#   run-gpu.sh LMS_INFO TEST_BINARY [ARGS...]
info=$1
shift
if ! reason=$(LMS_BACKEND=cuda "$info" --probe 2>&1); then
    echo "SKIP: no CUDA device: $reason"
    exit 77
fi
LMS_BACKEND=cuda exec "$@"
