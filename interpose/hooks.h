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
 * _ptsz and _ptds twins, the per-thread-default-stream entry points, are
 * declared only under CUDA_API_PER_THREAD_DEFAULT_STREAM). CUDA 13's cuda.h
 * declares CUDA 12.8's cuMemcpyBatchAsync and cuMemcpy3DBatchAsync only for
 * itself (the public names are macros for the _v2 forms, which dropped an
 * argument): this file undoes the macros, and interpose.c checks those two
 * against cudaTypedefs.h's function types for 12.8.
 *
 * Two lists: LMS_HOOKS, whose entries lms answers itself (hook_<name> in
 * interpose.c), and LMS_ACCESS_HOOKS, whose entries go on to CUDA or NCCL
 * after lms has made what they touch resident (access_<name> in access.c).
 * lib is then also nccl (libnccl: ncclResult_t). tests/alloc/check_exports.sh
 * reads the names from this file: each entry starts a line with X(, and
 * its name is on that line.
 */
#ifndef LMS_INTERPOSE_HOOKS_H
#define LMS_INTERPOSE_HOOKS_H

#include <cuda.h> /* CUDA_VERSION: entry points newer than the headers are left out */
/* The list has both forms of the batched copies: cuda.h's names are macros
 * for CUDA 13's (Note [Batched copies] in access.c). */
#undef cuMemcpyBatchAsync
#undef cuMemcpy3DBatchAsync

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
    X(rt, cudaError_t, __cudaLaunchKernel, (cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, \
      void **args, size_t sharedMem, cudaStream_t stream),                                   \
      (kernel, gridDim, blockDim, args, sharedMem, stream))                                  \
    X(rt, cudaError_t, __cudaLaunchKernel_ptsz, (cudaKernel_t kernel, dim3 gridDim,           \
      dim3 blockDim, void **args, size_t sharedMem, cudaStream_t stream),                    \
      (kernel, gridDim, blockDim, args, sharedMem, stream))                                  \
    X(rt, cudaError_t, cudaLaunchCooperativeKernel, (const void *func, dim3 gridDim,          \
      dim3 blockDim, void **args, size_t sharedMem, cudaStream_t stream),                    \
      (func, gridDim, blockDim, args, sharedMem, stream))                                    \
    X(rt, cudaError_t, cudaLaunchCooperativeKernel_ptsz, (const void *func, dim3 gridDim,     \
      dim3 blockDim, void **args, size_t sharedMem, cudaStream_t stream),                    \
      (func, gridDim, blockDim, args, sharedMem, stream))                                    \
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
    X(drv, CUresult, cuLaunchCooperativeKernel, (CUfunction f, unsigned gridDimX,             \
      unsigned gridDimY, unsigned gridDimZ, unsigned blockDimX, unsigned blockDimY,           \
      unsigned blockDimZ, unsigned sharedMemBytes, CUstream hStream, void **kernelParams),    \
      (f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes,      \
      hStream, kernelParams))                                                                \
    X(drv, CUresult, cuLaunchCooperativeKernel_ptsz, (CUfunction f, unsigned gridDimX,        \
      unsigned gridDimY, unsigned gridDimZ, unsigned blockDimX, unsigned blockDimY,           \
      unsigned blockDimZ, unsigned sharedMemBytes, CUstream hStream, void **kernelParams),    \
      (f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes,      \
      hStream, kernelParams))                                                                \
    LMS_TENSOR_MAP_HOOKS(X)                                                                  \
    X(drv, CUresult, cuLaunch, (CUfunction f), (f))                                          \
    X(drv, CUresult, cuLaunchGrid, (CUfunction f, int grid_width, int grid_height),           \
      (f, grid_width, grid_height))                                                          \
    X(drv, CUresult, cuLaunchGridAsync, (CUfunction f, int grid_width, int grid_height,       \
      CUstream hStream), (f, grid_width, grid_height, hStream))                              \
    X(drv, CUresult, cuLaunchCooperativeKernelMultiDevice, (CUDA_LAUNCH_PARAMS *launchParamsList, \
      unsigned int numDevices, unsigned int flags), (launchParamsList, numDevices, flags))   \
    X(drv, CUresult, cuModuleUnload, (CUmodule hmod), (hmod))                                \
    X(drv, CUresult, cuLibraryUnload, (CUlibrary library), (library))                        \
    LMS_LIBRARY_HOOKS_12050(X)                                                               \
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
      (symbol, funcPtr, cudaVersion, flags, driverStatus))                                   \
    X(rt, cudaError_t, cudaGetDriverEntryPoint_ptsz, (const char *symbol, void **funcPtr,     \
      unsigned long long flags, enum cudaDriverEntryPointQueryResult *driverStatus),          \
      (symbol, funcPtr, flags, driverStatus))                                                \
    X(rt, cudaError_t, cudaGetDriverEntryPointByVersion_ptsz, (const char *symbol,            \
      void **funcPtr, unsigned int cudaVersion, unsigned long long flags,                     \
      enum cudaDriverEntryPointQueryResult *driverStatus),                                   \
      (symbol, funcPtr, cudaVersion, flags, driverStatus))                                   \
    X(nccl, ncclResult_t, ncclGroupStart, (void), ())                                        \
    X(nccl, ncclResult_t, ncclGroupEnd, (void), ())                                          \
    LMS_GRAPH_HOOKS(X)

/* The runtime's library unload (CUDA 12.5): layouts learnt before it may
 * belong to functions gone (Note [Parameter layouts] in launch.c). */
#if CUDA_VERSION >= 12050
#define LMS_LIBRARY_HOOKS_12050(X)                                                           \
    X(rt, cudaError_t, cudaLibraryUnload, (cudaLibrary_t library), (library))
#else
#define LMS_LIBRARY_HOOKS_12050(X)
#endif

/* TMA descriptors: what each one encoded for lms's memory addresses is
 * learnt (hook_<name> in interpose.c; Note [Tensor maps] in tensormap.c).
 * cuTensorMapEncodeIm2colWide came with CUDA 12.8. */
#if CUDA_VERSION >= 12080
#define LMS_TENSOR_MAP_HOOKS_12080(X)                                                        \
    X(drv, CUresult, cuTensorMapEncodeIm2colWide, (CUtensorMap *tensorMap,                    \
      CUtensorMapDataType tensorDataType, cuuint32_t tensorRank, void *globalAddress,         \
      const cuuint64_t *globalDim, const cuuint64_t *globalStrides,                           \
      int pixelBoxLowerCornerWidth, int pixelBoxUpperCornerWidth, cuuint32_t channelsPerPixel, \
      cuuint32_t pixelsPerColumn, const cuuint32_t *elementStrides,                           \
      CUtensorMapInterleave interleave, CUtensorMapIm2ColWideMode mode,                       \
      CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2Promotion,                         \
      CUtensorMapFloatOOBfill oobFill), (tensorMap, tensorDataType, tensorRank,               \
      globalAddress, globalDim, globalStrides, pixelBoxLowerCornerWidth,                      \
      pixelBoxUpperCornerWidth, channelsPerPixel, pixelsPerColumn, elementStrides,            \
      interleave, mode, swizzle, l2Promotion, oobFill))
#else
#define LMS_TENSOR_MAP_HOOKS_12080(X)
#endif
#define LMS_TENSOR_MAP_HOOKS(X)                                                              \
    X(drv, CUresult, cuTensorMapEncodeTiled, (CUtensorMap *tensorMap,                         \
      CUtensorMapDataType tensorDataType, cuuint32_t tensorRank, void *globalAddress,         \
      const cuuint64_t *globalDim, const cuuint64_t *globalStrides, const cuuint32_t *boxDim, \
      const cuuint32_t *elementStrides, CUtensorMapInterleave interleave,                     \
      CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2Promotion,                         \
      CUtensorMapFloatOOBfill oobFill), (tensorMap, tensorDataType, tensorRank,               \
      globalAddress, globalDim, globalStrides, boxDim, elementStrides, interleave, swizzle,   \
      l2Promotion, oobFill))                                                                 \
    X(drv, CUresult, cuTensorMapEncodeIm2col, (CUtensorMap *tensorMap,                        \
      CUtensorMapDataType tensorDataType, cuuint32_t tensorRank, void *globalAddress,         \
      const cuuint64_t *globalDim, const cuuint64_t *globalStrides,                           \
      const int *pixelBoxLowerCorner, const int *pixelBoxUpperCorner,                         \
      cuuint32_t channelsPerPixel, cuuint32_t pixelsPerColumn,                                \
      const cuuint32_t *elementStrides, CUtensorMapInterleave interleave,                     \
      CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2Promotion,                         \
      CUtensorMapFloatOOBfill oobFill), (tensorMap, tensorDataType, tensorRank,               \
      globalAddress, globalDim, globalStrides, pixelBoxLowerCorner, pixelBoxUpperCorner,      \
      channelsPerPixel, pixelsPerColumn, elementStrides, interleave, swizzle, l2Promotion,    \
      oobFill))                                                                              \
    X(drv, CUresult, cuTensorMapReplaceAddress, (CUtensorMap *tensorMap,                      \
      void *globalAddress), (tensorMap, globalAddress))                                       \
    LMS_TENSOR_MAP_HOOKS_12080(X)

/* CUDA graphs: capture, streams joining one (waits for events),
 * instantiation, clones and destruction (answered by hook_<name> in
 * interpose.c, Note [Graph capture] in graph.c). */
#define LMS_GRAPH_HOOKS(X)                                                                    \
    X(rt, cudaError_t, cudaStreamBeginCapture, (cudaStream_t stream,                          \
      enum cudaStreamCaptureMode mode), (stream, mode))                                       \
    X(rt, cudaError_t, cudaStreamBeginCapture_ptsz, (cudaStream_t stream,                     \
      enum cudaStreamCaptureMode mode), (stream, mode))                                       \
    X(rt, cudaError_t, cudaStreamBeginCaptureToGraph, (cudaStream_t stream, cudaGraph_t graph, \
      const cudaGraphNode_t *dependencies, const cudaGraphEdgeData *dependencyData,          \
      size_t numDependencies, enum cudaStreamCaptureMode mode), (stream, graph, dependencies, \
      dependencyData, numDependencies, mode))                                                \
    X(rt, cudaError_t, cudaStreamBeginCaptureToGraph_ptsz, (cudaStream_t stream,              \
      cudaGraph_t graph, const cudaGraphNode_t *dependencies,                                 \
      const cudaGraphEdgeData *dependencyData, size_t numDependencies,                        \
      enum cudaStreamCaptureMode mode), (stream, graph, dependencies, dependencyData,         \
      numDependencies, mode))                                                                 \
    X(rt, cudaError_t, cudaStreamEndCapture, (cudaStream_t stream, cudaGraph_t *pGraph),      \
      (stream, pGraph))                                                                       \
    X(rt, cudaError_t, cudaStreamEndCapture_ptsz, (cudaStream_t stream, cudaGraph_t *pGraph), \
      (stream, pGraph))                                                                       \
    X(rt, cudaError_t, cudaStreamWaitEvent, (cudaStream_t stream, cudaEvent_t event,          \
      unsigned int flags), (stream, event, flags))                                            \
    X(rt, cudaError_t, cudaStreamWaitEvent_ptsz, (cudaStream_t stream, cudaEvent_t event,     \
      unsigned int flags), (stream, event, flags))                                            \
    X(rt, cudaError_t, cudaGraphInstantiate, (cudaGraphExec_t *pGraphExec, cudaGraph_t graph, \
      unsigned long long flags), (pGraphExec, graph, flags))                                  \
    X(rt, cudaError_t, cudaGraphInstantiateWithFlags, (cudaGraphExec_t *pGraphExec,           \
      cudaGraph_t graph, unsigned long long flags), (pGraphExec, graph, flags))               \
    X(rt, cudaError_t, cudaGraphInstantiateWithParams, (cudaGraphExec_t *pGraphExec,          \
      cudaGraph_t graph, cudaGraphInstantiateParams *instantiateParams),                      \
      (pGraphExec, graph, instantiateParams))                                                 \
    X(rt, cudaError_t, cudaGraphInstantiateWithParams_ptsz, (cudaGraphExec_t *pGraphExec,     \
      cudaGraph_t graph, cudaGraphInstantiateParams *instantiateParams),                      \
      (pGraphExec, graph, instantiateParams))                                                 \
    X(rt, cudaError_t, cudaGraphClone, (cudaGraph_t *pGraphClone, cudaGraph_t originalGraph), \
      (pGraphClone, originalGraph))                                                           \
    X(rt, cudaError_t, cudaGraphDestroy, (cudaGraph_t graph), (graph))                        \
    X(rt, cudaError_t, cudaGraphExecDestroy, (cudaGraphExec_t graphExec), (graphExec))        \
    X(drv, CUresult, cuStreamBeginCapture_v2, (CUstream hStream, CUstreamCaptureMode mode),   \
      (hStream, mode))                                                                        \
    X(drv, CUresult, cuStreamBeginCapture_v2_ptsz, (CUstream hStream,                         \
      CUstreamCaptureMode mode), (hStream, mode))                                             \
    X(drv, CUresult, cuStreamBeginCaptureToGraph, (CUstream hStream, CUgraph hGraph,          \
      const CUgraphNode *dependencies, const CUgraphEdgeData *dependencyData,                 \
      size_t numDependencies, CUstreamCaptureMode mode), (hStream, hGraph, dependencies,      \
      dependencyData, numDependencies, mode))                                                 \
    X(drv, CUresult, cuStreamBeginCaptureToGraph_ptsz, (CUstream hStream, CUgraph hGraph,     \
      const CUgraphNode *dependencies, const CUgraphEdgeData *dependencyData,                 \
      size_t numDependencies, CUstreamCaptureMode mode), (hStream, hGraph, dependencies,      \
      dependencyData, numDependencies, mode))                                                 \
    X(drv, CUresult, cuStreamEndCapture, (CUstream hStream, CUgraph *phGraph),                \
      (hStream, phGraph))                                                                     \
    X(drv, CUresult, cuStreamEndCapture_ptsz, (CUstream hStream, CUgraph *phGraph),           \
      (hStream, phGraph))                                                                     \
    X(drv, CUresult, cuStreamWaitEvent, (CUstream hStream, CUevent hEvent, unsigned int Flags), \
      (hStream, hEvent, Flags))                                                               \
    X(drv, CUresult, cuStreamWaitEvent_ptsz, (CUstream hStream, CUevent hEvent,                \
      unsigned int Flags), (hStream, hEvent, Flags))                                          \
    X(drv, CUresult, cuGraphInstantiateWithFlags, (CUgraphExec *phGraphExec, CUgraph hGraph,  \
      unsigned long long flags), (phGraphExec, hGraph, flags))                                \
    X(drv, CUresult, cuGraphInstantiateWithParams, (CUgraphExec *phGraphExec, CUgraph hGraph, \
      CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams), (phGraphExec, hGraph,                \
      instantiateParams))                                                                     \
    X(drv, CUresult, cuGraphInstantiateWithParams_ptsz, (CUgraphExec *phGraphExec,            \
      CUgraph hGraph, CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams), (phGraphExec,        \
      hGraph, instantiateParams))                                                             \
    X(drv, CUresult, cuGraphClone, (CUgraph *phGraphClone, CUgraph originalGraph),            \
      (phGraphClone, originalGraph))                                                          \
    X(drv, CUresult, cuGraphDestroy, (CUgraph hGraph), (hGraph))                              \
    X(drv, CUresult, cuGraphExecDestroy, (CUgraphExec hGraphExec), (hGraphExec))

/* Batched copies (Note [Batched copies] in access.c): CUDA 12.8's forms,
 * and 13's _v2, which dropped failIdx; none with older headers. */
#if CUDA_VERSION >= 12080
#define LMS_BATCH_HOOKS_12080(X)                                                             \
    X(drv, CUresult, cuMemcpyBatchAsync, (CUdeviceptr *dsts, CUdeviceptr *srcs,              \
      size_t *sizes, size_t count, CUmemcpyAttributes *attrs, size_t *attrsIdxs,              \
      size_t numAttrs, size_t *failIdx, CUstream hStream), (dsts, srcs, sizes, count, attrs,  \
      attrsIdxs, numAttrs, failIdx, hStream))                                                 \
    X(drv, CUresult, cuMemcpyBatchAsync_ptsz, (CUdeviceptr *dsts, CUdeviceptr *srcs,         \
      size_t *sizes, size_t count, CUmemcpyAttributes *attrs, size_t *attrsIdxs,              \
      size_t numAttrs, size_t *failIdx, CUstream hStream), (dsts, srcs, sizes, count, attrs,  \
      attrsIdxs, numAttrs, failIdx, hStream))                                                 \
    X(drv, CUresult, cuMemcpy3DBatchAsync, (size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList,   \
      size_t *failIdx, unsigned long long flags, CUstream hStream), (numOps, opList, failIdx, \
      flags, hStream))                                                                        \
    X(drv, CUresult, cuMemcpy3DBatchAsync_ptsz, (size_t numOps,                              \
      CUDA_MEMCPY3D_BATCH_OP *opList, size_t *failIdx, unsigned long long flags,              \
      CUstream hStream), (numOps, opList, failIdx, flags, hStream))
#else
#define LMS_BATCH_HOOKS_12080(X)
#endif
#if CUDA_VERSION >= 13000
#define LMS_BATCH_HOOKS_13000(X)                                                             \
    X(drv, CUresult, cuMemcpyBatchAsync_v2, (CUdeviceptr *dsts, CUdeviceptr *srcs,           \
      size_t *sizes, size_t count, CUmemcpyAttributes *attrs, size_t *attrsIdxs,              \
      size_t numAttrs, CUstream hStream), (dsts, srcs, sizes, count, attrs, attrsIdxs,        \
      numAttrs, hStream))                                                                     \
    X(drv, CUresult, cuMemcpyBatchAsync_v2_ptsz, (CUdeviceptr *dsts, CUdeviceptr *srcs,      \
      size_t *sizes, size_t count, CUmemcpyAttributes *attrs, size_t *attrsIdxs,              \
      size_t numAttrs, CUstream hStream), (dsts, srcs, sizes, count, attrs, attrsIdxs,        \
      numAttrs, hStream))                                                                     \
    X(drv, CUresult, cuMemcpy3DBatchAsync_v2, (size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList, \
      unsigned long long flags, CUstream hStream), (numOps, opList, flags, hStream))          \
    X(drv, CUresult, cuMemcpy3DBatchAsync_v2_ptsz, (size_t numOps,                           \
      CUDA_MEMCPY3D_BATCH_OP *opList, unsigned long long flags, CUstream hStream), (numOps,   \
      opList, flags, hStream))
#else
#define LMS_BATCH_HOOKS_13000(X)
#endif

#define LMS_ACCESS_HOOKS(X)                                                                   \
    X(rt, cudaError_t, cudaMemcpy, (void *dst, const void *src, size_t count,                 \
      enum cudaMemcpyKind kind), (dst, src, count, kind))                                     \
    X(rt, cudaError_t, cudaMemcpy_ptds, (void *dst, const void *src, size_t count,            \
      enum cudaMemcpyKind kind), (dst, src, count, kind))                                     \
    X(rt, cudaError_t, cudaMemcpyAsync, (void *dst, const void *src, size_t count,            \
      enum cudaMemcpyKind kind, cudaStream_t stream), (dst, src, count, kind, stream))        \
    X(rt, cudaError_t, cudaMemcpyAsync_ptsz, (void *dst, const void *src, size_t count,       \
      enum cudaMemcpyKind kind, cudaStream_t stream), (dst, src, count, kind, stream))        \
    X(rt, cudaError_t, cudaMemcpy2D, (void *dst, size_t dpitch, const void *src,              \
      size_t spitch, size_t width, size_t height, enum cudaMemcpyKind kind), (dst, dpitch,    \
      src, spitch, width, height, kind))                                                      \
    X(rt, cudaError_t, cudaMemcpy2D_ptds, (void *dst, size_t dpitch, const void *src,         \
      size_t spitch, size_t width, size_t height, enum cudaMemcpyKind kind), (dst, dpitch,    \
      src, spitch, width, height, kind))                                                      \
    X(rt, cudaError_t, cudaMemcpy2DAsync, (void *dst, size_t dpitch, const void *src,         \
      size_t spitch, size_t width, size_t height, enum cudaMemcpyKind kind,                   \
      cudaStream_t stream), (dst, dpitch, src, spitch, width, height, kind, stream))          \
    X(rt, cudaError_t, cudaMemcpy2DAsync_ptsz, (void *dst, size_t dpitch, const void *src,    \
      size_t spitch, size_t width, size_t height, enum cudaMemcpyKind kind,                   \
      cudaStream_t stream), (dst, dpitch, src, spitch, width, height, kind, stream))          \
    X(rt, cudaError_t, cudaMemcpy3D, (const struct cudaMemcpy3DParms *p), (p))                \
    X(rt, cudaError_t, cudaMemcpy3D_ptds, (const struct cudaMemcpy3DParms *p), (p))           \
    X(rt, cudaError_t, cudaMemcpy3DAsync, (const struct cudaMemcpy3DParms *p,                 \
      cudaStream_t stream), (p, stream))                                                      \
    X(rt, cudaError_t, cudaMemcpy3DAsync_ptsz, (const struct cudaMemcpy3DParms *p,            \
      cudaStream_t stream), (p, stream))                                                      \
    X(rt, cudaError_t, cudaMemcpy3DPeer, (const struct cudaMemcpy3DPeerParms *p), (p))        \
    X(rt, cudaError_t, cudaMemcpy3DPeer_ptds, (const struct cudaMemcpy3DPeerParms *p), (p))   \
    X(rt, cudaError_t, cudaMemcpy3DPeerAsync, (const struct cudaMemcpy3DPeerParms *p,         \
      cudaStream_t stream), (p, stream))                                                      \
    X(rt, cudaError_t, cudaMemcpy3DPeerAsync_ptsz, (const struct cudaMemcpy3DPeerParms *p,    \
      cudaStream_t stream), (p, stream))                                                      \
    X(rt, cudaError_t, cudaMemcpy2DToArray, (cudaArray_t dst, size_t wOffset, size_t hOffset, \
      const void *src, size_t spitch, size_t width, size_t height, enum cudaMemcpyKind kind), \
      (dst, wOffset, hOffset, src, spitch, width, height, kind))                              \
    X(rt, cudaError_t, cudaMemcpy2DToArray_ptds, (cudaArray_t dst, size_t wOffset,            \
      size_t hOffset, const void *src, size_t spitch, size_t width, size_t height,            \
      enum cudaMemcpyKind kind), (dst, wOffset, hOffset, src, spitch, width, height, kind))   \
    X(rt, cudaError_t, cudaMemcpy2DToArrayAsync, (cudaArray_t dst, size_t wOffset,            \
      size_t hOffset, const void *src, size_t spitch, size_t width, size_t height,            \
      enum cudaMemcpyKind kind, cudaStream_t stream), (dst, wOffset, hOffset, src, spitch,    \
      width, height, kind, stream))                                                           \
    X(rt, cudaError_t, cudaMemcpy2DToArrayAsync_ptsz, (cudaArray_t dst, size_t wOffset,       \
      size_t hOffset, const void *src, size_t spitch, size_t width, size_t height,            \
      enum cudaMemcpyKind kind, cudaStream_t stream), (dst, wOffset, hOffset, src, spitch,    \
      width, height, kind, stream))                                                           \
    X(rt, cudaError_t, cudaMemcpy2DFromArray, (void *dst, size_t dpitch, cudaArray_const_t src, \
      size_t wOffset, size_t hOffset, size_t width, size_t height, enum cudaMemcpyKind kind), \
      (dst, dpitch, src, wOffset, hOffset, width, height, kind))                              \
    X(rt, cudaError_t, cudaMemcpy2DFromArray_ptds, (void *dst, size_t dpitch,                 \
      cudaArray_const_t src, size_t wOffset, size_t hOffset, size_t width, size_t height,     \
      enum cudaMemcpyKind kind), (dst, dpitch, src, wOffset, hOffset, width, height, kind))   \
    X(rt, cudaError_t, cudaMemcpy2DFromArrayAsync, (void *dst, size_t dpitch,                 \
      cudaArray_const_t src, size_t wOffset, size_t hOffset, size_t width, size_t height,     \
      enum cudaMemcpyKind kind, cudaStream_t stream), (dst, dpitch, src, wOffset, hOffset,    \
      width, height, kind, stream))                                                           \
    X(rt, cudaError_t, cudaMemcpy2DFromArrayAsync_ptsz, (void *dst, size_t dpitch,            \
      cudaArray_const_t src, size_t wOffset, size_t hOffset, size_t width, size_t height,     \
      enum cudaMemcpyKind kind, cudaStream_t stream), (dst, dpitch, src, wOffset, hOffset,    \
      width, height, kind, stream))                                                           \
    X(rt, cudaError_t, cudaMemcpyPeer, (void *dst, int dstDevice, const void *src,            \
      int srcDevice, size_t count), (dst, dstDevice, src, srcDevice, count))                  \
    X(rt, cudaError_t, cudaMemcpyPeerAsync, (void *dst, int dstDevice, const void *src,       \
      int srcDevice, size_t count, cudaStream_t stream), (dst, dstDevice, src, srcDevice,     \
      count, stream))                                                                         \
    X(rt, cudaError_t, cudaMemcpyToSymbol, (const void *symbol, const void *src,              \
      size_t count, size_t offset, enum cudaMemcpyKind kind), (symbol, src, count, offset,    \
      kind))                                                                                  \
    X(rt, cudaError_t, cudaMemcpyToSymbol_ptds, (const void *symbol, const void *src,         \
      size_t count, size_t offset, enum cudaMemcpyKind kind), (symbol, src, count, offset,    \
      kind))                                                                                  \
    X(rt, cudaError_t, cudaMemcpyFromSymbol, (void *dst, const void *symbol, size_t count,    \
      size_t offset, enum cudaMemcpyKind kind), (dst, symbol, count, offset, kind))           \
    X(rt, cudaError_t, cudaMemcpyFromSymbol_ptds, (void *dst, const void *symbol,             \
      size_t count, size_t offset, enum cudaMemcpyKind kind), (dst, symbol, count, offset,    \
      kind))                                                                                  \
    X(rt, cudaError_t, cudaMemcpyToSymbolAsync, (const void *symbol, const void *src,         \
      size_t count, size_t offset, enum cudaMemcpyKind kind, cudaStream_t stream), (symbol,   \
      src, count, offset, kind, stream))                                                      \
    X(rt, cudaError_t, cudaMemcpyToSymbolAsync_ptsz, (const void *symbol, const void *src,    \
      size_t count, size_t offset, enum cudaMemcpyKind kind, cudaStream_t stream), (symbol,   \
      src, count, offset, kind, stream))                                                      \
    X(rt, cudaError_t, cudaMemcpyFromSymbolAsync, (void *dst, const void *symbol,             \
      size_t count, size_t offset, enum cudaMemcpyKind kind, cudaStream_t stream), (dst,      \
      symbol, count, offset, kind, stream))                                                   \
    X(rt, cudaError_t, cudaMemcpyFromSymbolAsync_ptsz, (void *dst, const void *symbol,        \
      size_t count, size_t offset, enum cudaMemcpyKind kind, cudaStream_t stream), (dst,      \
      symbol, count, offset, kind, stream))                                                   \
    X(rt, cudaError_t, cudaMemset, (void *devPtr, int value, size_t count), (devPtr, value,   \
      count))                                                                                 \
    X(rt, cudaError_t, cudaMemset_ptds, (void *devPtr, int value, size_t count), (devPtr,     \
      value, count))                                                                          \
    X(rt, cudaError_t, cudaMemsetAsync, (void *devPtr, int value, size_t count,               \
      cudaStream_t stream), (devPtr, value, count, stream))                                   \
    X(rt, cudaError_t, cudaMemsetAsync_ptsz, (void *devPtr, int value, size_t count,          \
      cudaStream_t stream), (devPtr, value, count, stream))                                   \
    X(rt, cudaError_t, cudaMemset2D, (void *devPtr, size_t pitch, int value, size_t width,    \
      size_t height), (devPtr, pitch, value, width, height))                                  \
    X(rt, cudaError_t, cudaMemset2D_ptds, (void *devPtr, size_t pitch, int value,             \
      size_t width, size_t height), (devPtr, pitch, value, width, height))                    \
    X(rt, cudaError_t, cudaMemset2DAsync, (void *devPtr, size_t pitch, int value,             \
      size_t width, size_t height, cudaStream_t stream), (devPtr, pitch, value, width,        \
      height, stream))                                                                        \
    X(rt, cudaError_t, cudaMemset2DAsync_ptsz, (void *devPtr, size_t pitch, int value,        \
      size_t width, size_t height, cudaStream_t stream), (devPtr, pitch, value, width,        \
      height, stream))                                                                        \
    X(rt, cudaError_t, cudaMemset3D, (struct cudaPitchedPtr pitchedDevPtr, int value,         \
      struct cudaExtent extent), (pitchedDevPtr, value, extent))                              \
    X(rt, cudaError_t, cudaMemset3D_ptds, (struct cudaPitchedPtr pitchedDevPtr, int value,    \
      struct cudaExtent extent), (pitchedDevPtr, value, extent))                              \
    X(rt, cudaError_t, cudaMemset3DAsync, (struct cudaPitchedPtr pitchedDevPtr, int value,    \
      struct cudaExtent extent, cudaStream_t stream), (pitchedDevPtr, value, extent,          \
      stream))                                                                                \
    X(rt, cudaError_t, cudaMemset3DAsync_ptsz, (struct cudaPitchedPtr pitchedDevPtr,          \
      int value, struct cudaExtent extent, cudaStream_t stream), (pitchedDevPtr, value,       \
      extent, stream))                                                                        \
    X(drv, CUresult, cuMemcpy, (CUdeviceptr dst, CUdeviceptr src, size_t ByteCount), (dst,    \
      src, ByteCount))                                                                        \
    X(drv, CUresult, cuMemcpy_ptds, (CUdeviceptr dst, CUdeviceptr src, size_t ByteCount),     \
      (dst, src, ByteCount))                                                                  \
    X(drv, CUresult, cuMemcpyAsync, (CUdeviceptr dst, CUdeviceptr src, size_t ByteCount,      \
      CUstream hStream), (dst, src, ByteCount, hStream))                                      \
    X(drv, CUresult, cuMemcpyAsync_ptsz, (CUdeviceptr dst, CUdeviceptr src,                   \
      size_t ByteCount, CUstream hStream), (dst, src, ByteCount, hStream))                    \
    X(drv, CUresult, cuMemcpyPeer, (CUdeviceptr dstDevice, CUcontext dstContext,              \
      CUdeviceptr srcDevice, CUcontext srcContext, size_t ByteCount), (dstDevice,             \
      dstContext, srcDevice, srcContext, ByteCount))                                          \
    X(drv, CUresult, cuMemcpyPeer_ptds, (CUdeviceptr dstDevice, CUcontext dstContext,         \
      CUdeviceptr srcDevice, CUcontext srcContext, size_t ByteCount), (dstDevice,             \
      dstContext, srcDevice, srcContext, ByteCount))                                          \
    X(drv, CUresult, cuMemcpyPeerAsync, (CUdeviceptr dstDevice, CUcontext dstContext,         \
      CUdeviceptr srcDevice, CUcontext srcContext, size_t ByteCount, CUstream hStream),       \
      (dstDevice, dstContext, srcDevice, srcContext, ByteCount, hStream))                     \
    X(drv, CUresult, cuMemcpyPeerAsync_ptsz, (CUdeviceptr dstDevice, CUcontext dstContext,    \
      CUdeviceptr srcDevice, CUcontext srcContext, size_t ByteCount, CUstream hStream),       \
      (dstDevice, dstContext, srcDevice, srcContext, ByteCount, hStream))                     \
    X(drv, CUresult, cuMemcpyHtoD_v2, (CUdeviceptr dstDevice, const void *srcHost,            \
      size_t ByteCount), (dstDevice, srcHost, ByteCount))                                     \
    X(drv, CUresult, cuMemcpyHtoD_v2_ptds, (CUdeviceptr dstDevice, const void *srcHost,       \
      size_t ByteCount), (dstDevice, srcHost, ByteCount))                                     \
    X(drv, CUresult, cuMemcpyDtoH_v2, (void *dstHost, CUdeviceptr srcDevice,                  \
      size_t ByteCount), (dstHost, srcDevice, ByteCount))                                     \
    X(drv, CUresult, cuMemcpyDtoH_v2_ptds, (void *dstHost, CUdeviceptr srcDevice,             \
      size_t ByteCount), (dstHost, srcDevice, ByteCount))                                     \
    X(drv, CUresult, cuMemcpyDtoD_v2, (CUdeviceptr dstDevice, CUdeviceptr srcDevice,          \
      size_t ByteCount), (dstDevice, srcDevice, ByteCount))                                   \
    X(drv, CUresult, cuMemcpyDtoD_v2_ptds, (CUdeviceptr dstDevice, CUdeviceptr srcDevice,     \
      size_t ByteCount), (dstDevice, srcDevice, ByteCount))                                   \
    X(drv, CUresult, cuMemcpyHtoDAsync_v2, (CUdeviceptr dstDevice, const void *srcHost,       \
      size_t ByteCount, CUstream hStream), (dstDevice, srcHost, ByteCount, hStream))          \
    X(drv, CUresult, cuMemcpyHtoDAsync_v2_ptsz, (CUdeviceptr dstDevice, const void *srcHost,  \
      size_t ByteCount, CUstream hStream), (dstDevice, srcHost, ByteCount, hStream))          \
    X(drv, CUresult, cuMemcpyDtoHAsync_v2, (void *dstHost, CUdeviceptr srcDevice,             \
      size_t ByteCount, CUstream hStream), (dstHost, srcDevice, ByteCount, hStream))          \
    X(drv, CUresult, cuMemcpyDtoHAsync_v2_ptsz, (void *dstHost, CUdeviceptr srcDevice,        \
      size_t ByteCount, CUstream hStream), (dstHost, srcDevice, ByteCount, hStream))          \
    X(drv, CUresult, cuMemcpyDtoDAsync_v2, (CUdeviceptr dstDevice, CUdeviceptr srcDevice,     \
      size_t ByteCount, CUstream hStream), (dstDevice, srcDevice, ByteCount, hStream))        \
    X(drv, CUresult, cuMemcpyDtoDAsync_v2_ptsz, (CUdeviceptr dstDevice,                       \
      CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream), (dstDevice, srcDevice,      \
      ByteCount, hStream))                                                                    \
    X(drv, CUresult, cuMemcpy2D_v2, (const CUDA_MEMCPY2D *pCopy), (pCopy))                    \
    X(drv, CUresult, cuMemcpy2D_v2_ptds, (const CUDA_MEMCPY2D *pCopy), (pCopy))               \
    X(drv, CUresult, cuMemcpy2DUnaligned_v2, (const CUDA_MEMCPY2D *pCopy), (pCopy))           \
    X(drv, CUresult, cuMemcpy2DUnaligned_v2_ptds, (const CUDA_MEMCPY2D *pCopy), (pCopy))      \
    X(drv, CUresult, cuMemcpy2DAsync_v2, (const CUDA_MEMCPY2D *pCopy, CUstream hStream),      \
      (pCopy, hStream))                                                                       \
    X(drv, CUresult, cuMemcpy2DAsync_v2_ptsz, (const CUDA_MEMCPY2D *pCopy,                    \
      CUstream hStream), (pCopy, hStream))                                                    \
    X(drv, CUresult, cuMemcpy3D_v2, (const CUDA_MEMCPY3D *pCopy), (pCopy))                    \
    X(drv, CUresult, cuMemcpy3D_v2_ptds, (const CUDA_MEMCPY3D *pCopy), (pCopy))               \
    X(drv, CUresult, cuMemcpy3DAsync_v2, (const CUDA_MEMCPY3D *pCopy, CUstream hStream),      \
      (pCopy, hStream))                                                                       \
    X(drv, CUresult, cuMemcpy3DAsync_v2_ptsz, (const CUDA_MEMCPY3D *pCopy,                    \
      CUstream hStream), (pCopy, hStream))                                                    \
    X(drv, CUresult, cuMemcpy3DPeer, (const CUDA_MEMCPY3D_PEER *pCopy), (pCopy))              \
    X(drv, CUresult, cuMemcpy3DPeer_ptds, (const CUDA_MEMCPY3D_PEER *pCopy), (pCopy))         \
    X(drv, CUresult, cuMemcpy3DPeerAsync, (const CUDA_MEMCPY3D_PEER *pCopy, CUstream hStream), \
      (pCopy, hStream))                                                                       \
    X(drv, CUresult, cuMemcpy3DPeerAsync_ptsz, (const CUDA_MEMCPY3D_PEER *pCopy,              \
      CUstream hStream), (pCopy, hStream))                                                    \
    X(drv, CUresult, cuMemcpyDtoA_v2, (CUarray dstArray, size_t dstOffset,                    \
      CUdeviceptr srcDevice, size_t ByteCount), (dstArray, dstOffset, srcDevice, ByteCount))  \
    X(drv, CUresult, cuMemcpyDtoA_v2_ptds, (CUarray dstArray, size_t dstOffset,               \
      CUdeviceptr srcDevice, size_t ByteCount), (dstArray, dstOffset, srcDevice, ByteCount))  \
    X(drv, CUresult, cuMemcpyAtoD_v2, (CUdeviceptr dstDevice, CUarray srcArray,               \
      size_t srcOffset, size_t ByteCount), (dstDevice, srcArray, srcOffset, ByteCount))       \
    X(drv, CUresult, cuMemcpyAtoD_v2_ptds, (CUdeviceptr dstDevice, CUarray srcArray,          \
      size_t srcOffset, size_t ByteCount), (dstDevice, srcArray, srcOffset, ByteCount))       \
    LMS_BATCH_HOOKS_12080(X)                                                                 \
    LMS_BATCH_HOOKS_13000(X)                                                                 \
    X(drv, CUresult, cuMemsetD8_v2, (CUdeviceptr dstDevice, unsigned char uc, size_t N),      \
      (dstDevice, uc, N))                                                                     \
    X(drv, CUresult, cuMemsetD8_v2_ptds, (CUdeviceptr dstDevice, unsigned char uc,            \
      size_t N), (dstDevice, uc, N))                                                          \
    X(drv, CUresult, cuMemsetD8Async, (CUdeviceptr dstDevice, unsigned char uc, size_t N,     \
      CUstream hStream), (dstDevice, uc, N, hStream))                                         \
    X(drv, CUresult, cuMemsetD8Async_ptsz, (CUdeviceptr dstDevice, unsigned char uc,          \
      size_t N, CUstream hStream), (dstDevice, uc, N, hStream))                               \
    X(drv, CUresult, cuMemsetD2D8_v2, (CUdeviceptr dstDevice, size_t dstPitch,                \
      unsigned char uc, size_t Width, size_t Height), (dstDevice, dstPitch, uc, Width,        \
      Height))                                                                                \
    X(drv, CUresult, cuMemsetD2D8_v2_ptds, (CUdeviceptr dstDevice, size_t dstPitch,           \
      unsigned char uc, size_t Width, size_t Height), (dstDevice, dstPitch, uc, Width,        \
      Height))                                                                                \
    X(drv, CUresult, cuMemsetD2D8Async, (CUdeviceptr dstDevice, size_t dstPitch,              \
      unsigned char uc, size_t Width, size_t Height, CUstream hStream), (dstDevice,           \
      dstPitch, uc, Width, Height, hStream))                                                  \
    X(drv, CUresult, cuMemsetD2D8Async_ptsz, (CUdeviceptr dstDevice, size_t dstPitch,         \
      unsigned char uc, size_t Width, size_t Height, CUstream hStream), (dstDevice,           \
      dstPitch, uc, Width, Height, hStream))                                                  \
    X(drv, CUresult, cuMemsetD16_v2, (CUdeviceptr dstDevice, unsigned short us, size_t N),    \
      (dstDevice, us, N))                                                                     \
    X(drv, CUresult, cuMemsetD16_v2_ptds, (CUdeviceptr dstDevice, unsigned short us,          \
      size_t N), (dstDevice, us, N))                                                          \
    X(drv, CUresult, cuMemsetD16Async, (CUdeviceptr dstDevice, unsigned short us, size_t N,   \
      CUstream hStream), (dstDevice, us, N, hStream))                                         \
    X(drv, CUresult, cuMemsetD16Async_ptsz, (CUdeviceptr dstDevice, unsigned short us,        \
      size_t N, CUstream hStream), (dstDevice, us, N, hStream))                               \
    X(drv, CUresult, cuMemsetD2D16_v2, (CUdeviceptr dstDevice, size_t dstPitch,               \
      unsigned short us, size_t Width, size_t Height), (dstDevice, dstPitch, us, Width,       \
      Height))                                                                                \
    X(drv, CUresult, cuMemsetD2D16_v2_ptds, (CUdeviceptr dstDevice, size_t dstPitch,          \
      unsigned short us, size_t Width, size_t Height), (dstDevice, dstPitch, us, Width,       \
      Height))                                                                                \
    X(drv, CUresult, cuMemsetD2D16Async, (CUdeviceptr dstDevice, size_t dstPitch,             \
      unsigned short us, size_t Width, size_t Height, CUstream hStream), (dstDevice,          \
      dstPitch, us, Width, Height, hStream))                                                  \
    X(drv, CUresult, cuMemsetD2D16Async_ptsz, (CUdeviceptr dstDevice, size_t dstPitch,        \
      unsigned short us, size_t Width, size_t Height, CUstream hStream), (dstDevice,          \
      dstPitch, us, Width, Height, hStream))                                                  \
    X(drv, CUresult, cuMemsetD32_v2, (CUdeviceptr dstDevice, unsigned int ui, size_t N),      \
      (dstDevice, ui, N))                                                                     \
    X(drv, CUresult, cuMemsetD32_v2_ptds, (CUdeviceptr dstDevice, unsigned int ui,            \
      size_t N), (dstDevice, ui, N))                                                          \
    X(drv, CUresult, cuMemsetD32Async, (CUdeviceptr dstDevice, unsigned int ui, size_t N,     \
      CUstream hStream), (dstDevice, ui, N, hStream))                                         \
    X(drv, CUresult, cuMemsetD32Async_ptsz, (CUdeviceptr dstDevice, unsigned int ui,          \
      size_t N, CUstream hStream), (dstDevice, ui, N, hStream))                               \
    X(drv, CUresult, cuMemsetD2D32_v2, (CUdeviceptr dstDevice, size_t dstPitch,               \
      unsigned int ui, size_t Width, size_t Height), (dstDevice, dstPitch, ui, Width,         \
      Height))                                                                                \
    X(drv, CUresult, cuMemsetD2D32_v2_ptds, (CUdeviceptr dstDevice, size_t dstPitch,          \
      unsigned int ui, size_t Width, size_t Height), (dstDevice, dstPitch, ui, Width,         \
      Height))                                                                                \
    X(drv, CUresult, cuMemsetD2D32Async, (CUdeviceptr dstDevice, size_t dstPitch,             \
      unsigned int ui, size_t Width, size_t Height, CUstream hStream), (dstDevice, dstPitch,  \
      ui, Width, Height, hStream))                                                            \
    X(drv, CUresult, cuMemsetD2D32Async_ptsz, (CUdeviceptr dstDevice, size_t dstPitch,        \
      unsigned int ui, size_t Width, size_t Height, CUstream hStream), (dstDevice, dstPitch,  \
      ui, Width, Height, hStream))                                                            \
    X(nccl, ncclResult_t, ncclAllReduce, (const void *sendbuff, void *recvbuff,               \
      size_t count, ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,                 \
      cudaStream_t stream), (sendbuff, recvbuff, count, datatype, op, comm, stream))          \
    X(nccl, ncclResult_t, ncclBroadcast, (const void *sendbuff, void *recvbuff,               \
      size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,                       \
      cudaStream_t stream), (sendbuff, recvbuff, count, datatype, root, comm, stream))        \
    X(nccl, ncclResult_t, ncclBcast, (void *buff, size_t count, ncclDataType_t datatype,      \
      int root, ncclComm_t comm, cudaStream_t stream), (buff, count, datatype, root, comm,    \
      stream))                                                                                \
    X(nccl, ncclResult_t, ncclReduce, (const void *sendbuff, void *recvbuff, size_t count,    \
      ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,                     \
      cudaStream_t stream), (sendbuff, recvbuff, count, datatype, op, root, comm, stream))    \
    X(nccl, ncclResult_t, ncclReduceScatter, (const void *sendbuff, void *recvbuff,           \
      size_t recvcount, ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,             \
      cudaStream_t stream), (sendbuff, recvbuff, recvcount, datatype, op, comm, stream))      \
    X(nccl, ncclResult_t, ncclAllGather, (const void *sendbuff, void *recvbuff,               \
      size_t sendcount, ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream),       \
      (sendbuff, recvbuff, sendcount, datatype, comm, stream))                                \
    X(nccl, ncclResult_t, ncclAlltoAll, (const void *sendbuff, void *recvbuff, size_t count,  \
      ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream), (sendbuff, recvbuff,    \
      count, datatype, comm, stream))                                                         \
    X(nccl, ncclResult_t, ncclGather, (const void *sendbuff, void *recvbuff, size_t count,    \
      ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream), (sendbuff,    \
      recvbuff, count, datatype, root, comm, stream))                                         \
    X(nccl, ncclResult_t, ncclScatter, (const void *sendbuff, void *recvbuff, size_t count,   \
      ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream), (sendbuff,    \
      recvbuff, count, datatype, root, comm, stream))                                         \
    X(nccl, ncclResult_t, ncclSend, (const void *sendbuff, size_t count,                      \
      ncclDataType_t datatype, int peer, ncclComm_t comm, cudaStream_t stream), (sendbuff,    \
      count, datatype, peer, comm, stream))                                                   \
    X(nccl, ncclResult_t, ncclRecv, (void *recvbuff, size_t count, ncclDataType_t datatype,   \
      int peer, ncclComm_t comm, cudaStream_t stream), (recvbuff, count, datatype, peer,      \
      comm, stream))                                                                          

#define LMS_ALL_HOOKS(X) LMS_HOOKS(X) LMS_ACCESS_HOOKS(X)

#endif /* LMS_INTERPOSE_HOOKS_H */
