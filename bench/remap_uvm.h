/*
 * bench/remap_uvm.h — bench/remap's "uvm" rows (remap_uvm.c): unified
 * memory's migration rate, the link the peer in bench/gpt2.py's uvm rows
 * runs on. Built where the CUDA toolkit's headers are, 12.2 or later
 * (cuMemPrefetchAsync_v2); elsewhere there is no cuda backend either, and
 * the call says so.
 */
#ifndef LMS_BENCH_REMAP_UVM_H
#define LMS_BENCH_REMAP_UVM_H

#include <stdbool.h>
#include <stdio.h>

#if LMS_REMAP_UVM
/* Prints the "uvm" rows, each ending with machine (JSON fields). Runs in the
 * context current on this thread: the cuda backend's, which any device op
 * of this thread made current. Exits 1, with the driver's error, when a
 * driver call fails. */
void remap_uvm_rows(const char *machine, bool quick);
#else
static inline void remap_uvm_rows(const char *machine, bool quick)
{
    (void)machine;
    (void)quick;
    fprintf(stderr, "bench/remap: no uvm rows: built without CUDA 12.2 headers or later\n");
}
#endif

#endif /* LMS_BENCH_REMAP_UVM_H */
