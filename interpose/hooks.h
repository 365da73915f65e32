/*
 * interpose/hooks.h — the one list of the CUDA entry points liblms.so
 * interposes (DESIGN.md: interpose/). Everything per entry point is made
 * from it: the exported wrapper, the table of the real functions (found with
 * dlsym(RTLD_NEXT)) and the table of names that lookups of entry points by
 * name (cuGetProcAddress, dlsym) will be answered from.
 *
 * X(lib, ret, name, params, args)
 *   lib     rt (libcudart) or drv (libcuda): which error codes it returns
 *   ret     the return type, as the CUDA headers declare it
 *   name    the exported symbol, versioned as libcuda exports it
 *           (cuMemAlloc_v2: cuda.h's cuMemAlloc is a macro for it)
 *   params  the parameter list, as the CUDA headers declare it
 *   args    the parameters' names, to pass them on
 * The compiler checks each wrapper against the header's declaration (the
 * _ptsz twins, the per-thread-default-stream entry points, are declared
 * only under CUDA_API_PER_THREAD_DEFAULT_STREAM). tests/alloc/check_exports.sh
 * reads the names from this file: each entry starts a line with X(, and
 * its name is on that line.
 */
#ifndef LMS_INTERPOSE_HOOKS_H
#define LMS_INTERPOSE_HOOKS_H

#define LMS_HOOKS(X)                                                                         \
    X(rt, cudaError_t, cudaMalloc, (void **devPtr, size_t size), (devPtr, size))             \
    X(rt, cudaError_t, cudaFree, (void *devPtr), (devPtr))                                   \
    X(rt, cudaError_t, cudaMemGetInfo, (size_t *free_b, size_t *total_b), (free_b, total_b)) \
    X(rt, cudaError_t, cudaMallocAsync, (void **devPtr, size_t size, cudaStream_t hStream),   \
      (devPtr, size, hStream))                                                               \
    X(rt, cudaError_t, cudaMallocAsync_ptsz, (void **devPtr, size_t size, cudaStream_t hStream), \
      (devPtr, size, hStream))                                                               \
    X(rt, cudaError_t, cudaFreeAsync, (void *devPtr, cudaStream_t hStream), (devPtr, hStream)) \
    X(rt, cudaError_t, cudaFreeAsync_ptsz, (void *devPtr, cudaStream_t hStream), (devPtr, hStream)) \
    X(rt, cudaError_t, cudaStreamDestroy, (cudaStream_t stream), (stream))                   \
    X(rt, cudaError_t, cudaLaunchKernel, (const void *func, dim3 gridDim, dim3 blockDim,      \
      void **args, size_t sharedMem, cudaStream_t stream),                                   \
      (func, gridDim, blockDim, args, sharedMem, stream))                                    \
    X(rt, cudaError_t, cudaLaunchKernel_ptsz, (const void *func, dim3 gridDim, dim3 blockDim, \
      void **args, size_t sharedMem, cudaStream_t stream),                                   \
      (func, gridDim, blockDim, args, sharedMem, stream))                                    \
    X(rt, cudaError_t, cudaLaunchKernelExC, (const cudaLaunchConfig_t *config,                \
      const void *func, void **args), (config, func, args))                                  \
    X(rt, cudaError_t, cudaLaunchKernelExC_ptsz, (const cudaLaunchConfig_t *config,           \
      const void *func, void **args), (config, func, args))                                  \
    X(drv, CUresult, cuMemAlloc_v2, (CUdeviceptr *dptr, size_t bytesize), (dptr, bytesize))  \
    X(drv, CUresult, cuMemFree_v2, (CUdeviceptr dptr), (dptr))                               \
    X(drv, CUresult, cuMemGetInfo_v2, (size_t *free_b, size_t *total_b), (free_b, total_b))  \
    X(drv, CUresult, cuMemAllocAsync, (CUdeviceptr *dptr, size_t bytesize, CUstream hStream), \
      (dptr, bytesize, hStream))                                                             \
    X(drv, CUresult, cuMemAllocAsync_ptsz, (CUdeviceptr *dptr, size_t bytesize,               \
      CUstream hStream), (dptr, bytesize, hStream))                                          \
    X(drv, CUresult, cuMemFreeAsync, (CUdeviceptr dptr, CUstream hStream), (dptr, hStream))  \
    X(drv, CUresult, cuMemFreeAsync_ptsz, (CUdeviceptr dptr, CUstream hStream), (dptr, hStream)) \
    X(drv, CUresult, cuStreamDestroy_v2, (CUstream hStream), (hStream))                      \
    X(drv, CUresult, cuLaunchKernel, (CUfunction f, unsigned gridDimX, unsigned gridDimY,     \
      unsigned gridDimZ, unsigned blockDimX, unsigned blockDimY, unsigned blockDimZ,          \
      unsigned sharedMemBytes, CUstream hStream, void **kernelParams, void **extra),          \
      (f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes,      \
      hStream, kernelParams, extra))                                                         \
    X(drv, CUresult, cuLaunchKernel_ptsz, (CUfunction f, unsigned gridDimX, unsigned gridDimY, \
      unsigned gridDimZ, unsigned blockDimX, unsigned blockDimY, unsigned blockDimZ,          \
      unsigned sharedMemBytes, CUstream hStream, void **kernelParams, void **extra),          \
      (f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes,      \
      hStream, kernelParams, extra))                                                         \
    X(drv, CUresult, cuLaunchKernelEx, (const CUlaunchConfig *config, CUfunction f,           \
      void **kernelParams, void **extra), (config, f, kernelParams, extra))                  \
    X(drv, CUresult, cuLaunchKernelEx_ptsz, (const CUlaunchConfig *config, CUfunction f,      \
      void **kernelParams, void **extra), (config, f, kernelParams, extra))                  \
    X(drv, CUresult, cuGetProcAddress, (const char *symbol, void **pfn, int cudaVersion,      \
      cuuint64_t flags), (symbol, pfn, cudaVersion, flags))                                  \
    X(drv, CUresult, cuGetProcAddress_v2, (const char *symbol, void **pfn, int cudaVersion,   \
      cuuint64_t flags, CUdriverProcAddressQueryResult *symbolStatus),                       \
      (symbol, pfn, cudaVersion, flags, symbolStatus))                                       \
    X(rt, cudaError_t, cudaGetDriverEntryPoint, (const char *symbol, void **funcPtr,          \
      unsigned long long flags, enum cudaDriverEntryPointQueryResult *driverStatus),          \
      (symbol, funcPtr, flags, driverStatus))                                                \
    X(rt, cudaError_t, cudaGetDriverEntryPointByVersion, (const char *symbol, void **funcPtr, \
      unsigned int cudaVersion, unsigned long long flags,                                    \
      enum cudaDriverEntryPointQueryResult *driverStatus),                                   \
      (symbol, funcPtr, cudaVersion, flags, driverStatus))

#endif /* LMS_INTERPOSE_HOOKS_H */
