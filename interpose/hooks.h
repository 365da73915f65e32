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
 * The compiler checks each wrapper against the header's declaration.
 * tests/alloc/check_exports.sh reads the names from this file: keep one
 * entry a line, starting with X(.
 */
#ifndef LMS_INTERPOSE_HOOKS_H
#define LMS_INTERPOSE_HOOKS_H

#define LMS_HOOKS(X)                                                                         \
    X(rt, cudaError_t, cudaMalloc, (void **devPtr, size_t size), (devPtr, size))             \
    X(rt, cudaError_t, cudaFree, (void *devPtr), (devPtr))                                   \
    X(rt, cudaError_t, cudaMemGetInfo, (size_t *free_b, size_t *total_b), (free_b, total_b)) \
    X(drv, CUresult, cuMemAlloc_v2, (CUdeviceptr *dptr, size_t bytesize), (dptr, bytesize))  \
    X(drv, CUresult, cuMemFree_v2, (CUdeviceptr dptr), (dptr))                               \
    X(drv, CUresult, cuMemGetInfo_v2, (size_t *free_b, size_t *total_b), (free_b, total_b))

#endif /* LMS_INTERPOSE_HOOKS_H */
