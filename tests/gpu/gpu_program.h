/*
 * tests/gpu/gpu_program.h — what the nvcc-built programs that run under the
 * preload share (tests/gpu/preload_probe.cu, bench/launch_gpu.cu,
 * bench/host_numa.cu): skipping where there is no CUDA device, and naming
 * the library a function comes from. Header-only; each is one program.
 */
#ifndef LMS_GPU_PROGRAM_H
#define LMS_GPU_PROGRAM_H

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include <cuda_runtime.h>

/* CTest's "skipped" (SKIP_RETURN_CODE). */
#define GPU_SKIP 77

/* True if device 0 is there; else prints "SKIP: no CUDA device: <why>"
 * (the runtime's reason: no driver, none visible) and is false. */
static inline bool gpu_present(void)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e == cudaSuccess && n > 0)
        return true;
    printf("SKIP: no CUDA device: %s\n",
           e != cudaSuccess ? cudaGetErrorString(e) : "cudaGetDeviceCount found none");
    return false;
}

/* The file name (no directory) of the object that holds f, "nobody" if
 * none: whether the preload or CUDA answers a name. */
static inline const char *gpu_object_of(const void *f)
{
    Dl_info where;
    if (f == NULL || dladdr(f, &where) == 0 || where.dli_fname == NULL)
        return "nobody";
    const char *slash = strrchr(where.dli_fname, '/');
    return slash != NULL ? slash + 1 : where.dli_fname;
}

#endif
