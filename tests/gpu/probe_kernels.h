/*
 * tests/gpu/probe_kernels.h — what the preload probe's kernels compute,
 * shared by the kernels it registers (tests/gpu/preload_probe.cu), the
 * library it loads at run time (tests/gpu/probe_library.cu) and the host
 * that checks their results. Header-only, for nvcc.
 */
#ifndef LMS_PROBE_KERNELS_H
#define LMS_PROBE_KERNELS_H

#include <stddef.h>
#include <stdint.h>

/* Element i of the element-wise kernels' output, from x[i] and y[i]. */
static __host__ __device__ inline uint32_t mix_one(uint32_t x, uint32_t y, size_t i, uint32_t salt)
{
    return x * 2654435761u + (y ^ salt) + (uint32_t)i;
}

#endif
