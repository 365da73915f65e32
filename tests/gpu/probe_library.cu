/*
 * tests/gpu/probe_library.cu — kernels that the preload probe
 * (tests/gpu/preload_probe.cu, case driver_cukernel) loads at run time with
 * cudaLibraryLoadData, as JIT compilers and libraries that ship their own
 * code load theirs, rather than having the runtime register them at start:
 * the probe gets them as CUkernel handles (cudaLibraryGetKernel), which
 * lms has never seen, and launches them with the driver's cuLaunchKernel.
 * Built as a fatbin for sm_90 + PTX and embedded in the probe
 * (tests/gpu/gpu.cmake). extern "C", so that the names the probe asks for
 * are these.
 */
#include "tests/gpu/probe_kernels.h"

/* out[i] = mix_one(x[i], y[i], i, salt): the probe's `mix`, loaded another way. */
extern "C" __global__ void lib_mix(const uint32_t *x, const uint32_t *y, uint32_t *out, size_t n,
                                   uint32_t salt)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        out[i] = mix_one(x[i], y[i], i, salt);
}

/* Blocks of lib_tick that ran: the only trace a kernel without parameters
 * leaves (the probe reads it with cudaLibraryGetGlobal). */
__device__ unsigned int lib_ticks;

extern "C" __global__ void lib_tick(void)
{
    if (threadIdx.x == 0)
        atomicAdd(&lib_ticks, 1u);
}
