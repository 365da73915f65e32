/*
 * interpose/hooks.h — the one list of the CUDA entry points liblms.so
 * interposes (DESIGN.md: interpose/). Everything per entry point is made
 * from it: the exported wrapper, the table of the real functions (found with
 * dlsym(RTLD_NEXT)) and the table of names that lookups of entry points by
 * name (cuGetProcAddress, dlsym) will be answered from.
 *
 * X(lib, ret, name, by, since, params, args)
 *   lib     rt (libcudart) or drv (libcuda): which error codes it returns
 *   ret     the return type, as the CUDA headers declare it
 *   name    the exported symbol, versioned as libcuda exports it
 *           (cuMemAlloc_v2: cuda.h's cuMemAlloc is a macro for it)
 *   by      the entry point whose hook_ or access_ function answers this
 *           one: its own name, or the name of the entry point it does what
 *           it does (a _ptds or _ptsz twin: lms treats the per-thread
 *           default stream as the legacy one, lms.h lms_stream_adopt;
 *           cuMemcpy2DUnaligned_v2: cuMemcpy2D_v2's ranges). Each such
 *           pair is declared as one function, so the compiler checks that
 *           their parameters agree.
 *   since   for a driver entry point whose name has _v2, the CUDA version
 *           from which cuGetProcAddress gives it for its base name (Note
 *           [Lookups by name] in symbols.c); 0 for the others
 *   params  the parameter list, as the CUDA headers declare it
 *   args    the parameters' names, to pass them on
 * The compiler checks each wrapper against the header's declaration (the
 * _ptsz and _ptds twins, the per-thread-default-stream entry points, are
 * declared only under CUDA_API_PER_THREAD_DEFAULT_STREAM). CUDA 13's cuda.h
 * declares CUDA 12.8's cuMemcpyBatchAsync and cuMemcpy3DBatchAsync only for
 * itself (the public names are macros for the _v2 forms, which dropped an
 * argument): this file undoes the macros (and cuGetProcAddress, cuda.h's
 * name for cuGetProcAddress_v2: the list has both), and interpose.c checks
 * those two against cudaTypedefs.h's function types for 12.8.
 *
 * Two lists: LMS_HOOKS, whose entries lms answers itself (hook_<name> in
 * interpose.c; the lookups' in symbols.c), and LMS_ACCESS_HOOKS, whose
 * entries go on to CUDA or NCCL after lms has made what they touch
 * resident (access_<name> in access.c, nccl.c). lib is then also nccl
 * (libnccl: ncclResult_t). tests/alloc/check_exports.sh reads the names
 * from this file: each entry starts a line with X(, and its name is on
 * that line.
 */
#ifndef LMS_INTERPOSE_HOOKS_H
#define LMS_INTERPOSE_HOOKS_H

#include <cuda.h> /* CUDA_VERSION: entry points newer than the headers are left out */
/* The list has both forms of the batched copies: cuda.h's names are macros
 * for CUDA 13's (Note [Batched copies] in access.c). */
#undef cuMemcpyBatchAsync
#undef cuMemcpy3DBatchAsync
#undef cuGetProcAddress

#define LMS_HOOKS(X)                                                                         \
    X(rt, cudaError_t, cudaMalloc, cudaMalloc, 0, (void **devPtr, size_t size), (devPtr,     \
      size))                                                                                 \
    X(rt, cudaError_t, cudaFree, cudaFree, 0, (void *devPtr), (devPtr))                      \
    X(rt, cudaError_t, cudaMemGetInfo, cudaMemGetInfo, 0, (size_t *free_b, size_t *total_b), \
      (free_b, total_b))                                                                     \
    X(rt, cudaError_t, cudaMallocAsync, cudaMallocAsync, 0, (void **devPtr, size_t size,     \
      cudaStream_t hStream), (devPtr, size, hStream))                                        \
    X(rt, cudaError_t, cudaMallocAsync_ptsz, cudaMallocAsync, 0, (void **devPtr,             \
      size_t size, cudaStream_t hStream), (devPtr, size, hStream))                           \
    X(rt, cudaError_t, cudaFreeAsync, cudaFreeAsync, 0, (void *devPtr,                       \
      cudaStream_t hStream), (devPtr, hStream))                                              \
    X(rt, cudaError_t, cudaFreeAsync_ptsz, cudaFreeAsync_ptsz, 0, (void *devPtr,             \
      cudaStream_t hStream), (devPtr, hStream))                                              \
    X(rt, cudaError_t, cudaStreamDestroy, cudaStreamDestroy, 0, (cudaStream_t stream),       \
      (stream))                                                                              \
    X(rt, cudaError_t, cudaLaunchKernel, cudaLaunchKernel, 0, (const void *func,             \
      dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem, cudaStream_t stream),      \
      (func, gridDim, blockDim, args, sharedMem, stream))                                    \
    X(rt, cudaError_t, cudaLaunchKernel_ptsz, cudaLaunchKernel_ptsz, 0, (const void *func,   \
      dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem, cudaStream_t stream),      \
      (func, gridDim, blockDim, args, sharedMem, stream))                                    \
    X(rt, cudaError_t, cudaLaunchKernelExC, cudaLaunchKernelExC, 0,                          \
      (const cudaLaunchConfig_t *config, const void *func, void **args), (config, func,      \
      args))                                                                                 \
    X(rt, cudaError_t, cudaLaunchKernelExC_ptsz, cudaLaunchKernelExC_ptsz, 0,                \
      (const cudaLaunchConfig_t *config, const void *func, void **args), (config, func,      \
      args))                                                                                 \
    X(rt, cudaError_t, __cudaLaunchKernel, __cudaLaunchKernel, 0, (cudaKernel_t kernel,      \
      dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem, cudaStream_t stream),      \
      (kernel, gridDim, blockDim, args, sharedMem, stream))                                  \
    X(rt, cudaError_t, __cudaLaunchKernel_ptsz, __cudaLaunchKernel_ptsz, 0,                  \
      (cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem,      \
      cudaStream_t stream), (kernel, gridDim, blockDim, args, sharedMem, stream))            \
    X(rt, cudaError_t, cudaLaunchCooperativeKernel, cudaLaunchCooperativeKernel, 0,          \
      (const void *func, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem,         \
      cudaStream_t stream), (func, gridDim, blockDim, args, sharedMem, stream))              \
    X(rt, cudaError_t, cudaLaunchCooperativeKernel_ptsz, cudaLaunchCooperativeKernel_ptsz,   \
      0, (const void *func, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem,      \
      cudaStream_t stream), (func, gridDim, blockDim, args, sharedMem, stream))              \
    X(drv, CUresult, cuMemAlloc_v2, cuMemAlloc_v2, 3020, (CUdeviceptr *dptr,                 \
      size_t bytesize), (dptr, bytesize))                                                    \
    X(drv, CUresult, cuMemFree_v2, cuMemFree_v2, 3020, (CUdeviceptr dptr), (dptr))           \
    X(drv, CUresult, cuMemGetInfo_v2, cuMemGetInfo_v2, 3020, (size_t *free_b,                \
      size_t *total_b), (free_b, total_b))                                                   \
    X(drv, CUresult, cuMemAllocAsync, cuMemAllocAsync, 0, (CUdeviceptr *dptr,                \
      size_t bytesize, CUstream hStream), (dptr, bytesize, hStream))                         \
    X(drv, CUresult, cuMemAllocAsync_ptsz, cuMemAllocAsync, 0, (CUdeviceptr *dptr,           \
      size_t bytesize, CUstream hStream), (dptr, bytesize, hStream))                         \
    X(drv, CUresult, cuMemFreeAsync, cuMemFreeAsync, 0, (CUdeviceptr dptr,                   \
      CUstream hStream), (dptr, hStream))                                                    \
    X(drv, CUresult, cuMemFreeAsync_ptsz, cuMemFreeAsync_ptsz, 0, (CUdeviceptr dptr,         \
      CUstream hStream), (dptr, hStream))                                                    \
    X(drv, CUresult, cuStreamDestroy_v2, cuStreamDestroy_v2, 4000, (CUstream hStream),       \
      (hStream))                                                                             \
    X(drv, CUresult, cuLaunchKernel, cuLaunchKernel, 0, (CUfunction f, unsigned gridDimX,    \
      unsigned gridDimY, unsigned gridDimZ, unsigned blockDimX, unsigned blockDimY,          \
      unsigned blockDimZ, unsigned sharedMemBytes, CUstream hStream, void **kernelParams,    \
      void **extra), (f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,      \
      sharedMemBytes, hStream, kernelParams, extra))                                         \
    X(drv, CUresult, cuLaunchKernel_ptsz, cuLaunchKernel_ptsz, 0, (CUfunction f,             \
      unsigned gridDimX, unsigned gridDimY, unsigned gridDimZ, unsigned blockDimX,           \
      unsigned blockDimY, unsigned blockDimZ, unsigned sharedMemBytes, CUstream hStream,     \
      void **kernelParams, void **extra), (f, gridDimX, gridDimY, gridDimZ, blockDimX,       \
      blockDimY, blockDimZ, sharedMemBytes, hStream, kernelParams, extra))                   \
    X(drv, CUresult, cuLaunchKernelEx, cuLaunchKernelEx, 0, (const CUlaunchConfig *config,   \
      CUfunction f, void **kernelParams, void **extra), (config, f, kernelParams, extra))    \
    X(drv, CUresult, cuLaunchKernelEx_ptsz, cuLaunchKernelEx_ptsz, 0,                        \
      (const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra),       \
      (config, f, kernelParams, extra))                                                      \
    X(drv, CUresult, cuLaunchCooperativeKernel, cuLaunchCooperativeKernel, 0, (CUfunction f, \
      unsigned gridDimX, unsigned gridDimY, unsigned gridDimZ, unsigned blockDimX,           \
      unsigned blockDimY, unsigned blockDimZ, unsigned sharedMemBytes, CUstream hStream,     \
      void **kernelParams), (f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY,          \
      blockDimZ, sharedMemBytes, hStream, kernelParams))                                     \
    X(drv, CUresult, cuLaunchCooperativeKernel_ptsz, cuLaunchCooperativeKernel_ptsz, 0,      \
      (CUfunction f, unsigned gridDimX, unsigned gridDimY, unsigned gridDimZ,                \
      unsigned blockDimX, unsigned blockDimY, unsigned blockDimZ, unsigned sharedMemBytes,   \
      CUstream hStream, void **kernelParams), (f, gridDimX, gridDimY, gridDimZ, blockDimX,   \
      blockDimY, blockDimZ, sharedMemBytes, hStream, kernelParams))                          \
    LMS_TENSOR_MAP_HOOKS(X)                                                                  \
    X(drv, CUresult, cuLaunch, cuLaunch, 0, (CUfunction f), (f))                             \
    X(drv, CUresult, cuLaunchGrid, cuLaunchGrid, 0, (CUfunction f, int grid_width,           \
      int grid_height), (f, grid_width, grid_height))                                        \
    X(drv, CUresult, cuLaunchGridAsync, cuLaunchGridAsync, 0, (CUfunction f, int grid_width, \
      int grid_height, CUstream hStream), (f, grid_width, grid_height, hStream))             \
    X(drv, CUresult, cuLaunchCooperativeKernelMultiDevice,                                   \
      cuLaunchCooperativeKernelMultiDevice, 0, (CUDA_LAUNCH_PARAMS *launchParamsList,        \
      unsigned int numDevices, unsigned int flags), (launchParamsList, numDevices, flags))   \
    X(drv, CUresult, cuModuleUnload, cuModuleUnload, 0, (CUmodule hmod), (hmod))             \
    X(drv, CUresult, cuLibraryUnload, cuLibraryUnload, 0, (CUlibrary library), (library))    \
    LMS_LIBRARY_HOOKS_12050(X)                                                               \
    LMS_LOOKUP_HOOKS(X)                                                                      \
    X(nccl, ncclResult_t, ncclGroupStart, ncclGroupStart, 0, (void), ())                     \
    X(nccl, ncclResult_t, ncclGroupEnd, ncclGroupEnd, 0, (void), ())                         \
    LMS_GRAPH_HOOKS(X)

/* Lookups of entry points by name: CUDA's answer, with lms's wrapper in
 * place of a function it hooks (hook_<name> in symbols.c, Note [Lookups by
 * name]). */
#define LMS_LOOKUP_HOOKS(X)                                                                  \
    X(drv, CUresult, cuGetProcAddress, cuGetProcAddress, 0, (const char *symbol, void **pfn, \
      int cudaVersion, cuuint64_t flags), (symbol, pfn, cudaVersion, flags))                 \
    X(drv, CUresult, cuGetProcAddress_v2, cuGetProcAddress_v2, 12000, (const char *symbol,   \
      void **pfn, int cudaVersion, cuuint64_t flags,                                         \
      CUdriverProcAddressQueryResult *symbolStatus), (symbol, pfn, cudaVersion, flags,       \
      symbolStatus))                                                                         \
    X(rt, cudaError_t, cudaGetDriverEntryPoint, cudaGetDriverEntryPoint, 0,                  \
      (const char *symbol, void **funcPtr, unsigned long long flags,                         \
      enum cudaDriverEntryPointQueryResult *driverStatus), (symbol, funcPtr, flags,          \
      driverStatus))                                                                         \
    X(rt, cudaError_t, cudaGetDriverEntryPointByVersion, cudaGetDriverEntryPointByVersion,   \
      0, (const char *symbol, void **funcPtr, unsigned int cudaVersion,                      \
      unsigned long long flags, enum cudaDriverEntryPointQueryResult *driverStatus),         \
      (symbol, funcPtr, cudaVersion, flags, driverStatus))                                   \
    X(rt, cudaError_t, cudaGetDriverEntryPoint_ptsz, cudaGetDriverEntryPoint_ptsz, 0,        \
      (const char *symbol, void **funcPtr, unsigned long long flags,                         \
      enum cudaDriverEntryPointQueryResult *driverStatus), (symbol, funcPtr, flags,          \
      driverStatus))                                                                         \
    X(rt, cudaError_t, cudaGetDriverEntryPointByVersion_ptsz,                                \
      cudaGetDriverEntryPointByVersion_ptsz, 0, (const char *symbol, void **funcPtr,         \
      unsigned int cudaVersion, unsigned long long flags,                                    \
      enum cudaDriverEntryPointQueryResult *driverStatus), (symbol, funcPtr, cudaVersion,    \
      flags, driverStatus))

/* The runtime's library unload (CUDA 12.5): layouts learnt before it may
 * belong to functions gone (Note [Parameter layouts] in launch.c). */
#if CUDA_VERSION >= 12050
#define LMS_LIBRARY_HOOKS_12050(X)                                                           \
    X(rt, cudaError_t, cudaLibraryUnload, cudaLibraryUnload, 0, (cudaLibrary_t library),     \
      (library))
#else
#define LMS_LIBRARY_HOOKS_12050(X)
#endif

/* TMA descriptors: what each one encoded for lms's memory addresses is
 * learnt (hook_<name> in interpose.c; Note [Tensor maps] in tensormap.c).
 * cuTensorMapEncodeIm2colWide came with CUDA 12.8. */
#if CUDA_VERSION >= 12080
#define LMS_TENSOR_MAP_HOOKS_12080(X)                                                        \
    X(drv, CUresult, cuTensorMapEncodeIm2colWide, cuTensorMapEncodeIm2colWide, 0,            \
      (CUtensorMap *tensorMap, CUtensorMapDataType tensorDataType, cuuint32_t tensorRank,    \
      void *globalAddress, const cuuint64_t *globalDim, const cuuint64_t *globalStrides,     \
      int pixelBoxLowerCornerWidth, int pixelBoxUpperCornerWidth,                            \
      cuuint32_t channelsPerPixel, cuuint32_t pixelsPerColumn,                               \
      const cuuint32_t *elementStrides, CUtensorMapInterleave interleave,                    \
      CUtensorMapIm2ColWideMode mode, CUtensorMapSwizzle swizzle,                            \
      CUtensorMapL2promotion l2Promotion, CUtensorMapFloatOOBfill oobFill), (tensorMap,      \
      tensorDataType, tensorRank, globalAddress, globalDim, globalStrides,                   \
      pixelBoxLowerCornerWidth, pixelBoxUpperCornerWidth, channelsPerPixel, pixelsPerColumn, \
      elementStrides, interleave, mode, swizzle, l2Promotion, oobFill))
#else
#define LMS_TENSOR_MAP_HOOKS_12080(X)
#endif
#define LMS_TENSOR_MAP_HOOKS(X)                                                              \
    X(drv, CUresult, cuTensorMapEncodeTiled, cuTensorMapEncodeTiled, 0,                      \
      (CUtensorMap *tensorMap, CUtensorMapDataType tensorDataType, cuuint32_t tensorRank,    \
      void *globalAddress, const cuuint64_t *globalDim, const cuuint64_t *globalStrides,     \
      const cuuint32_t *boxDim, const cuuint32_t *elementStrides,                            \
      CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,                          \
      CUtensorMapL2promotion l2Promotion, CUtensorMapFloatOOBfill oobFill), (tensorMap,      \
      tensorDataType, tensorRank, globalAddress, globalDim, globalStrides, boxDim,           \
      elementStrides, interleave, swizzle, l2Promotion, oobFill))                            \
    X(drv, CUresult, cuTensorMapEncodeIm2col, cuTensorMapEncodeIm2col, 0,                    \
      (CUtensorMap *tensorMap, CUtensorMapDataType tensorDataType, cuuint32_t tensorRank,    \
      void *globalAddress, const cuuint64_t *globalDim, const cuuint64_t *globalStrides,     \
      const int *pixelBoxLowerCorner, const int *pixelBoxUpperCorner,                        \
      cuuint32_t channelsPerPixel, cuuint32_t pixelsPerColumn,                               \
      const cuuint32_t *elementStrides, CUtensorMapInterleave interleave,                    \
      CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2Promotion,                        \
      CUtensorMapFloatOOBfill oobFill), (tensorMap, tensorDataType, tensorRank,              \
      globalAddress, globalDim, globalStrides, pixelBoxLowerCorner, pixelBoxUpperCorner,     \
      channelsPerPixel, pixelsPerColumn, elementStrides, interleave, swizzle, l2Promotion,   \
      oobFill))                                                                              \
    X(drv, CUresult, cuTensorMapReplaceAddress, cuTensorMapReplaceAddress, 0,                \
      (CUtensorMap *tensorMap, void *globalAddress), (tensorMap, globalAddress))             \
    LMS_TENSOR_MAP_HOOKS_12080(X)

/* CUDA graphs: capture, streams joining one (waits for events),
 * instantiation, clones and destruction (answered by hook_<name> in
 * interpose.c, Note [Graph capture] in graph.c). */
#define LMS_GRAPH_HOOKS(X)                                                                    \
    X(rt, cudaError_t, cudaStreamBeginCapture, cudaStreamBeginCapture, 0,                    \
      (cudaStream_t stream, enum cudaStreamCaptureMode mode), (stream, mode))                \
    X(rt, cudaError_t, cudaStreamBeginCapture_ptsz, cudaStreamBeginCapture_ptsz, 0,          \
      (cudaStream_t stream, enum cudaStreamCaptureMode mode), (stream, mode))                \
    X(rt, cudaError_t, cudaStreamBeginCaptureToGraph, cudaStreamBeginCaptureToGraph, 0,      \
      (cudaStream_t stream, cudaGraph_t graph, const cudaGraphNode_t *dependencies,          \
      const cudaGraphEdgeData *dependencyData, size_t numDependencies,                       \
      enum cudaStreamCaptureMode mode), (stream, graph, dependencies, dependencyData,        \
      numDependencies, mode))                                                                \
    X(rt, cudaError_t, cudaStreamBeginCaptureToGraph_ptsz,                                   \
      cudaStreamBeginCaptureToGraph_ptsz, 0, (cudaStream_t stream, cudaGraph_t graph,        \
      const cudaGraphNode_t *dependencies, const cudaGraphEdgeData *dependencyData,          \
      size_t numDependencies, enum cudaStreamCaptureMode mode), (stream, graph,              \
      dependencies, dependencyData, numDependencies, mode))                                  \
    X(rt, cudaError_t, cudaStreamEndCapture, cudaStreamEndCapture, 0, (cudaStream_t stream,  \
      cudaGraph_t *pGraph), (stream, pGraph))                                                \
    X(rt, cudaError_t, cudaStreamEndCapture_ptsz, cudaStreamEndCapture_ptsz, 0,              \
      (cudaStream_t stream, cudaGraph_t *pGraph), (stream, pGraph))                          \
    X(rt, cudaError_t, cudaStreamWaitEvent, cudaStreamWaitEvent, 0, (cudaStream_t stream,    \
      cudaEvent_t event, unsigned int flags), (stream, event, flags))                        \
    X(rt, cudaError_t, cudaStreamWaitEvent_ptsz, cudaStreamWaitEvent_ptsz, 0,                \
      (cudaStream_t stream, cudaEvent_t event, unsigned int flags), (stream, event, flags))  \
    X(rt, cudaError_t, cudaGraphInstantiate, cudaGraphInstantiate, 0,                        \
      (cudaGraphExec_t *pGraphExec, cudaGraph_t graph, unsigned long long flags),            \
      (pGraphExec, graph, flags))                                                            \
    X(rt, cudaError_t, cudaGraphInstantiateWithFlags, cudaGraphInstantiateWithFlags, 0,      \
      (cudaGraphExec_t *pGraphExec, cudaGraph_t graph, unsigned long long flags),            \
      (pGraphExec, graph, flags))                                                            \
    X(rt, cudaError_t, cudaGraphInstantiateWithParams, cudaGraphInstantiateWithParams, 0,    \
      (cudaGraphExec_t *pGraphExec, cudaGraph_t graph,                                       \
      cudaGraphInstantiateParams *instantiateParams), (pGraphExec, graph,                    \
      instantiateParams))                                                                    \
    X(rt, cudaError_t, cudaGraphInstantiateWithParams_ptsz,                                  \
      cudaGraphInstantiateWithParams_ptsz, 0, (cudaGraphExec_t *pGraphExec,                  \
      cudaGraph_t graph, cudaGraphInstantiateParams *instantiateParams), (pGraphExec, graph, \
      instantiateParams))                                                                    \
    X(rt, cudaError_t, cudaGraphClone, cudaGraphClone, 0, (cudaGraph_t *pGraphClone,         \
      cudaGraph_t originalGraph), (pGraphClone, originalGraph))                              \
    X(rt, cudaError_t, cudaGraphDestroy, cudaGraphDestroy, 0, (cudaGraph_t graph), (graph))  \
    X(rt, cudaError_t, cudaGraphExecDestroy, cudaGraphExecDestroy, 0,                        \
      (cudaGraphExec_t graphExec), (graphExec))                                              \
    X(drv, CUresult, cuStreamBeginCapture_v2, cuStreamBeginCapture_v2, 10010,                \
      (CUstream hStream, CUstreamCaptureMode mode), (hStream, mode))                         \
    X(drv, CUresult, cuStreamBeginCapture_v2_ptsz, cuStreamBeginCapture_v2_ptsz, 10010,      \
      (CUstream hStream, CUstreamCaptureMode mode), (hStream, mode))                         \
    X(drv, CUresult, cuStreamBeginCaptureToGraph, cuStreamBeginCaptureToGraph, 0,            \
      (CUstream hStream, CUgraph hGraph, const CUgraphNode *dependencies,                    \
      const CUgraphEdgeData *dependencyData, size_t numDependencies,                         \
      CUstreamCaptureMode mode), (hStream, hGraph, dependencies, dependencyData,             \
      numDependencies, mode))                                                                \
    X(drv, CUresult, cuStreamBeginCaptureToGraph_ptsz, cuStreamBeginCaptureToGraph_ptsz, 0,  \
      (CUstream hStream, CUgraph hGraph, const CUgraphNode *dependencies,                    \
      const CUgraphEdgeData *dependencyData, size_t numDependencies,                         \
      CUstreamCaptureMode mode), (hStream, hGraph, dependencies, dependencyData,             \
      numDependencies, mode))                                                                \
    X(drv, CUresult, cuStreamEndCapture, cuStreamEndCapture, 0, (CUstream hStream,           \
      CUgraph *phGraph), (hStream, phGraph))                                                 \
    X(drv, CUresult, cuStreamEndCapture_ptsz, cuStreamEndCapture_ptsz, 0, (CUstream hStream, \
      CUgraph *phGraph), (hStream, phGraph))                                                 \
    X(drv, CUresult, cuStreamWaitEvent, cuStreamWaitEvent, 0, (CUstream hStream,             \
      CUevent hEvent, unsigned int Flags), (hStream, hEvent, Flags))                         \
    X(drv, CUresult, cuStreamWaitEvent_ptsz, cuStreamWaitEvent_ptsz, 0, (CUstream hStream,   \
      CUevent hEvent, unsigned int Flags), (hStream, hEvent, Flags))                         \
    X(drv, CUresult, cuGraphInstantiateWithFlags, cuGraphInstantiateWithFlags, 0,            \
      (CUgraphExec *phGraphExec, CUgraph hGraph, unsigned long long flags), (phGraphExec,    \
      hGraph, flags))                                                                        \
    X(drv, CUresult, cuGraphInstantiateWithParams, cuGraphInstantiateWithParams, 0,          \
      (CUgraphExec *phGraphExec, CUgraph hGraph,                                             \
      CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams), (phGraphExec, hGraph,               \
      instantiateParams))                                                                    \
    X(drv, CUresult, cuGraphInstantiateWithParams_ptsz, cuGraphInstantiateWithParams_ptsz,   \
      0, (CUgraphExec *phGraphExec, CUgraph hGraph,                                          \
      CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams), (phGraphExec, hGraph,               \
      instantiateParams))                                                                    \
    X(drv, CUresult, cuGraphClone, cuGraphClone, 0, (CUgraph *phGraphClone,                  \
      CUgraph originalGraph), (phGraphClone, originalGraph))                                 \
    X(drv, CUresult, cuGraphDestroy, cuGraphDestroy, 0, (CUgraph hGraph), (hGraph))          \
    X(drv, CUresult, cuGraphExecDestroy, cuGraphExecDestroy, 0, (CUgraphExec hGraphExec),    \
      (hGraphExec))

/* Batched copies (Note [Batched copies] in access.c): CUDA 12.8's forms,
 * and 13's _v2, which dropped failIdx; none with older headers. */
#if CUDA_VERSION >= 12080
#define LMS_BATCH_HOOKS_12080(X)                                                             \
    X(drv, CUresult, cuMemcpyBatchAsync, cuMemcpyBatchAsync, 0, (CUdeviceptr *dsts,          \
      CUdeviceptr *srcs, size_t *sizes, size_t count, CUmemcpyAttributes *attrs,             \
      size_t *attrsIdxs, size_t numAttrs, size_t *failIdx, CUstream hStream), (dsts, srcs,   \
      sizes, count, attrs, attrsIdxs, numAttrs, failIdx, hStream))                           \
    X(drv, CUresult, cuMemcpyBatchAsync_ptsz, cuMemcpyBatchAsync_ptsz, 0,                    \
      (CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,                    \
      CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs, size_t *failIdx,        \
      CUstream hStream), (dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, failIdx,     \
      hStream))                                                                              \
    X(drv, CUresult, cuMemcpy3DBatchAsync, cuMemcpy3DBatchAsync, 0, (size_t numOps,          \
      CUDA_MEMCPY3D_BATCH_OP *opList, size_t *failIdx, unsigned long long flags,             \
      CUstream hStream), (numOps, opList, failIdx, flags, hStream))                          \
    X(drv, CUresult, cuMemcpy3DBatchAsync_ptsz, cuMemcpy3DBatchAsync_ptsz, 0,                \
      (size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList, size_t *failIdx,                       \
      unsigned long long flags, CUstream hStream), (numOps, opList, failIdx, flags,          \
      hStream))
#else
#define LMS_BATCH_HOOKS_12080(X)
#endif
#if CUDA_VERSION >= 13000
#define LMS_BATCH_HOOKS_13000(X)                                                             \
    X(drv, CUresult, cuMemcpyBatchAsync_v2, cuMemcpyBatchAsync_v2, 13000,                    \
      (CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,                    \
      CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs, CUstream hStream),      \
      (dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, hStream))                       \
    X(drv, CUresult, cuMemcpyBatchAsync_v2_ptsz, cuMemcpyBatchAsync_v2_ptsz, 13000,          \
      (CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,                    \
      CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs, CUstream hStream),      \
      (dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, hStream))                       \
    X(drv, CUresult, cuMemcpy3DBatchAsync_v2, cuMemcpy3DBatchAsync_v2, 13000,                \
      (size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList, unsigned long long flags,              \
      CUstream hStream), (numOps, opList, flags, hStream))                                   \
    X(drv, CUresult, cuMemcpy3DBatchAsync_v2_ptsz, cuMemcpy3DBatchAsync_v2_ptsz, 13000,      \
      (size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList, unsigned long long flags,              \
      CUstream hStream), (numOps, opList, flags, hStream))
#else
#define LMS_BATCH_HOOKS_13000(X)
#endif

#define LMS_ACCESS_HOOKS(X)                                                                   \
    X(rt, cudaError_t, cudaMemcpy, cudaMemcpy, 0, (void *dst, const void *src, size_t count, \
      enum cudaMemcpyKind kind), (dst, src, count, kind))                                    \
    X(rt, cudaError_t, cudaMemcpy_ptds, cudaMemcpy, 0, (void *dst, const void *src,          \
      size_t count, enum cudaMemcpyKind kind), (dst, src, count, kind))                      \
    X(rt, cudaError_t, cudaMemcpyAsync, cudaMemcpyAsync, 0, (void *dst, const void *src,     \
      size_t count, enum cudaMemcpyKind kind, cudaStream_t stream), (dst, src, count, kind,  \
      stream))                                                                               \
    X(rt, cudaError_t, cudaMemcpyAsync_ptsz, cudaMemcpyAsync, 0, (void *dst,                 \
      const void *src, size_t count, enum cudaMemcpyKind kind, cudaStream_t stream), (dst,   \
      src, count, kind, stream))                                                             \
    X(rt, cudaError_t, cudaMemcpy2D, cudaMemcpy2D, 0, (void *dst, size_t dpitch,             \
      const void *src, size_t spitch, size_t width, size_t height,                           \
      enum cudaMemcpyKind kind), (dst, dpitch, src, spitch, width, height, kind))            \
    X(rt, cudaError_t, cudaMemcpy2D_ptds, cudaMemcpy2D, 0, (void *dst, size_t dpitch,        \
      const void *src, size_t spitch, size_t width, size_t height,                           \
      enum cudaMemcpyKind kind), (dst, dpitch, src, spitch, width, height, kind))            \
    X(rt, cudaError_t, cudaMemcpy2DAsync, cudaMemcpy2DAsync, 0, (void *dst, size_t dpitch,   \
      const void *src, size_t spitch, size_t width, size_t height, enum cudaMemcpyKind kind, \
      cudaStream_t stream), (dst, dpitch, src, spitch, width, height, kind, stream))         \
    X(rt, cudaError_t, cudaMemcpy2DAsync_ptsz, cudaMemcpy2DAsync, 0, (void *dst,             \
      size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,            \
      enum cudaMemcpyKind kind, cudaStream_t stream), (dst, dpitch, src, spitch, width,      \
      height, kind, stream))                                                                 \
    X(rt, cudaError_t, cudaMemcpy3D, cudaMemcpy3D, 0, (const struct cudaMemcpy3DParms *p),   \
      (p))                                                                                   \
    X(rt, cudaError_t, cudaMemcpy3D_ptds, cudaMemcpy3D, 0,                                   \
      (const struct cudaMemcpy3DParms *p), (p))                                              \
    X(rt, cudaError_t, cudaMemcpy3DAsync, cudaMemcpy3DAsync, 0,                              \
      (const struct cudaMemcpy3DParms *p, cudaStream_t stream), (p, stream))                 \
    X(rt, cudaError_t, cudaMemcpy3DAsync_ptsz, cudaMemcpy3DAsync, 0,                         \
      (const struct cudaMemcpy3DParms *p, cudaStream_t stream), (p, stream))                 \
    X(rt, cudaError_t, cudaMemcpy3DPeer, cudaMemcpy3DPeer, 0,                                \
      (const struct cudaMemcpy3DPeerParms *p), (p))                                          \
    X(rt, cudaError_t, cudaMemcpy3DPeer_ptds, cudaMemcpy3DPeer, 0,                           \
      (const struct cudaMemcpy3DPeerParms *p), (p))                                          \
    X(rt, cudaError_t, cudaMemcpy3DPeerAsync, cudaMemcpy3DPeerAsync, 0,                      \
      (const struct cudaMemcpy3DPeerParms *p, cudaStream_t stream), (p, stream))             \
    X(rt, cudaError_t, cudaMemcpy3DPeerAsync_ptsz, cudaMemcpy3DPeerAsync, 0,                 \
      (const struct cudaMemcpy3DPeerParms *p, cudaStream_t stream), (p, stream))             \
    X(rt, cudaError_t, cudaMemcpy2DToArray, cudaMemcpy2DToArray, 0, (cudaArray_t dst,        \
      size_t wOffset, size_t hOffset, const void *src, size_t spitch, size_t width,          \
      size_t height, enum cudaMemcpyKind kind), (dst, wOffset, hOffset, src, spitch, width,  \
      height, kind))                                                                         \
    X(rt, cudaError_t, cudaMemcpy2DToArray_ptds, cudaMemcpy2DToArray, 0, (cudaArray_t dst,   \
      size_t wOffset, size_t hOffset, const void *src, size_t spitch, size_t width,          \
      size_t height, enum cudaMemcpyKind kind), (dst, wOffset, hOffset, src, spitch, width,  \
      height, kind))                                                                         \
    X(rt, cudaError_t, cudaMemcpy2DToArrayAsync, cudaMemcpy2DToArrayAsync, 0,                \
      (cudaArray_t dst, size_t wOffset, size_t hOffset, const void *src, size_t spitch,      \
      size_t width, size_t height, enum cudaMemcpyKind kind, cudaStream_t stream), (dst,     \
      wOffset, hOffset, src, spitch, width, height, kind, stream))                           \
    X(rt, cudaError_t, cudaMemcpy2DToArrayAsync_ptsz, cudaMemcpy2DToArrayAsync, 0,           \
      (cudaArray_t dst, size_t wOffset, size_t hOffset, const void *src, size_t spitch,      \
      size_t width, size_t height, enum cudaMemcpyKind kind, cudaStream_t stream), (dst,     \
      wOffset, hOffset, src, spitch, width, height, kind, stream))                           \
    X(rt, cudaError_t, cudaMemcpy2DFromArray, cudaMemcpy2DFromArray, 0, (void *dst,          \
      size_t dpitch, cudaArray_const_t src, size_t wOffset, size_t hOffset, size_t width,    \
      size_t height, enum cudaMemcpyKind kind), (dst, dpitch, src, wOffset, hOffset, width,  \
      height, kind))                                                                         \
    X(rt, cudaError_t, cudaMemcpy2DFromArray_ptds, cudaMemcpy2DFromArray, 0, (void *dst,     \
      size_t dpitch, cudaArray_const_t src, size_t wOffset, size_t hOffset, size_t width,    \
      size_t height, enum cudaMemcpyKind kind), (dst, dpitch, src, wOffset, hOffset, width,  \
      height, kind))                                                                         \
    X(rt, cudaError_t, cudaMemcpy2DFromArrayAsync, cudaMemcpy2DFromArrayAsync, 0,            \
      (void *dst, size_t dpitch, cudaArray_const_t src, size_t wOffset, size_t hOffset,      \
      size_t width, size_t height, enum cudaMemcpyKind kind, cudaStream_t stream), (dst,     \
      dpitch, src, wOffset, hOffset, width, height, kind, stream))                           \
    X(rt, cudaError_t, cudaMemcpy2DFromArrayAsync_ptsz, cudaMemcpy2DFromArrayAsync, 0,       \
      (void *dst, size_t dpitch, cudaArray_const_t src, size_t wOffset, size_t hOffset,      \
      size_t width, size_t height, enum cudaMemcpyKind kind, cudaStream_t stream), (dst,     \
      dpitch, src, wOffset, hOffset, width, height, kind, stream))                           \
    X(rt, cudaError_t, cudaMemcpyPeer, cudaMemcpyPeer, 0, (void *dst, int dstDevice,         \
      const void *src, int srcDevice, size_t count), (dst, dstDevice, src, srcDevice,        \
      count))                                                                                \
    X(rt, cudaError_t, cudaMemcpyPeerAsync, cudaMemcpyPeerAsync, 0, (void *dst,              \
      int dstDevice, const void *src, int srcDevice, size_t count, cudaStream_t stream),     \
      (dst, dstDevice, src, srcDevice, count, stream))                                       \
    X(rt, cudaError_t, cudaMemcpyToSymbol, cudaMemcpyToSymbol, 0, (const void *symbol,       \
      const void *src, size_t count, size_t offset, enum cudaMemcpyKind kind), (symbol, src, \
      count, offset, kind))                                                                  \
    X(rt, cudaError_t, cudaMemcpyToSymbol_ptds, cudaMemcpyToSymbol, 0, (const void *symbol,  \
      const void *src, size_t count, size_t offset, enum cudaMemcpyKind kind), (symbol, src, \
      count, offset, kind))                                                                  \
    X(rt, cudaError_t, cudaMemcpyFromSymbol, cudaMemcpyFromSymbol, 0, (void *dst,            \
      const void *symbol, size_t count, size_t offset, enum cudaMemcpyKind kind), (dst,      \
      symbol, count, offset, kind))                                                          \
    X(rt, cudaError_t, cudaMemcpyFromSymbol_ptds, cudaMemcpyFromSymbol, 0, (void *dst,       \
      const void *symbol, size_t count, size_t offset, enum cudaMemcpyKind kind), (dst,      \
      symbol, count, offset, kind))                                                          \
    X(rt, cudaError_t, cudaMemcpyToSymbolAsync, cudaMemcpyToSymbolAsync, 0,                  \
      (const void *symbol, const void *src, size_t count, size_t offset,                     \
      enum cudaMemcpyKind kind, cudaStream_t stream), (symbol, src, count, offset, kind,     \
      stream))                                                                               \
    X(rt, cudaError_t, cudaMemcpyToSymbolAsync_ptsz, cudaMemcpyToSymbolAsync, 0,             \
      (const void *symbol, const void *src, size_t count, size_t offset,                     \
      enum cudaMemcpyKind kind, cudaStream_t stream), (symbol, src, count, offset, kind,     \
      stream))                                                                               \
    X(rt, cudaError_t, cudaMemcpyFromSymbolAsync, cudaMemcpyFromSymbolAsync, 0, (void *dst,  \
      const void *symbol, size_t count, size_t offset, enum cudaMemcpyKind kind,             \
      cudaStream_t stream), (dst, symbol, count, offset, kind, stream))                      \
    X(rt, cudaError_t, cudaMemcpyFromSymbolAsync_ptsz, cudaMemcpyFromSymbolAsync, 0,         \
      (void *dst, const void *symbol, size_t count, size_t offset, enum cudaMemcpyKind kind, \
      cudaStream_t stream), (dst, symbol, count, offset, kind, stream))                      \
    X(rt, cudaError_t, cudaMemset, cudaMemset, 0, (void *devPtr, int value, size_t count),   \
      (devPtr, value, count))                                                                \
    X(rt, cudaError_t, cudaMemset_ptds, cudaMemset, 0, (void *devPtr, int value,             \
      size_t count), (devPtr, value, count))                                                 \
    X(rt, cudaError_t, cudaMemsetAsync, cudaMemsetAsync, 0, (void *devPtr, int value,        \
      size_t count, cudaStream_t stream), (devPtr, value, count, stream))                    \
    X(rt, cudaError_t, cudaMemsetAsync_ptsz, cudaMemsetAsync, 0, (void *devPtr, int value,   \
      size_t count, cudaStream_t stream), (devPtr, value, count, stream))                    \
    X(rt, cudaError_t, cudaMemset2D, cudaMemset2D, 0, (void *devPtr, size_t pitch,           \
      int value, size_t width, size_t height), (devPtr, pitch, value, width, height))        \
    X(rt, cudaError_t, cudaMemset2D_ptds, cudaMemset2D, 0, (void *devPtr, size_t pitch,      \
      int value, size_t width, size_t height), (devPtr, pitch, value, width, height))        \
    X(rt, cudaError_t, cudaMemset2DAsync, cudaMemset2DAsync, 0, (void *devPtr, size_t pitch, \
      int value, size_t width, size_t height, cudaStream_t stream), (devPtr, pitch, value,   \
      width, height, stream))                                                                \
    X(rt, cudaError_t, cudaMemset2DAsync_ptsz, cudaMemset2DAsync, 0, (void *devPtr,          \
      size_t pitch, int value, size_t width, size_t height, cudaStream_t stream), (devPtr,   \
      pitch, value, width, height, stream))                                                  \
    X(rt, cudaError_t, cudaMemset3D, cudaMemset3D, 0, (struct cudaPitchedPtr pitchedDevPtr,  \
      int value, struct cudaExtent extent), (pitchedDevPtr, value, extent))                  \
    X(rt, cudaError_t, cudaMemset3D_ptds, cudaMemset3D, 0,                                   \
      (struct cudaPitchedPtr pitchedDevPtr, int value, struct cudaExtent extent),            \
      (pitchedDevPtr, value, extent))                                                        \
    X(rt, cudaError_t, cudaMemset3DAsync, cudaMemset3DAsync, 0,                              \
      (struct cudaPitchedPtr pitchedDevPtr, int value, struct cudaExtent extent,             \
      cudaStream_t stream), (pitchedDevPtr, value, extent, stream))                          \
    X(rt, cudaError_t, cudaMemset3DAsync_ptsz, cudaMemset3DAsync, 0,                         \
      (struct cudaPitchedPtr pitchedDevPtr, int value, struct cudaExtent extent,             \
      cudaStream_t stream), (pitchedDevPtr, value, extent, stream))                          \
    X(drv, CUresult, cuMemcpy, cuMemcpy, 0, (CUdeviceptr dst, CUdeviceptr src,               \
      size_t ByteCount), (dst, src, ByteCount))                                              \
    X(drv, CUresult, cuMemcpy_ptds, cuMemcpy, 0, (CUdeviceptr dst, CUdeviceptr src,          \
      size_t ByteCount), (dst, src, ByteCount))                                              \
    X(drv, CUresult, cuMemcpyAsync, cuMemcpyAsync, 0, (CUdeviceptr dst, CUdeviceptr src,     \
      size_t ByteCount, CUstream hStream), (dst, src, ByteCount, hStream))                   \
    X(drv, CUresult, cuMemcpyAsync_ptsz, cuMemcpyAsync, 0, (CUdeviceptr dst,                 \
      CUdeviceptr src, size_t ByteCount, CUstream hStream), (dst, src, ByteCount, hStream))  \
    X(drv, CUresult, cuMemcpyPeer, cuMemcpyPeer, 0, (CUdeviceptr dstDevice,                  \
      CUcontext dstContext, CUdeviceptr srcDevice, CUcontext srcContext, size_t ByteCount),  \
      (dstDevice, dstContext, srcDevice, srcContext, ByteCount))                             \
    X(drv, CUresult, cuMemcpyPeer_ptds, cuMemcpyPeer, 0, (CUdeviceptr dstDevice,             \
      CUcontext dstContext, CUdeviceptr srcDevice, CUcontext srcContext, size_t ByteCount),  \
      (dstDevice, dstContext, srcDevice, srcContext, ByteCount))                             \
    X(drv, CUresult, cuMemcpyPeerAsync, cuMemcpyPeerAsync, 0, (CUdeviceptr dstDevice,        \
      CUcontext dstContext, CUdeviceptr srcDevice, CUcontext srcContext, size_t ByteCount,   \
      CUstream hStream), (dstDevice, dstContext, srcDevice, srcContext, ByteCount, hStream)) \
    X(drv, CUresult, cuMemcpyPeerAsync_ptsz, cuMemcpyPeerAsync, 0, (CUdeviceptr dstDevice,   \
      CUcontext dstContext, CUdeviceptr srcDevice, CUcontext srcContext, size_t ByteCount,   \
      CUstream hStream), (dstDevice, dstContext, srcDevice, srcContext, ByteCount, hStream)) \
    X(drv, CUresult, cuMemcpyHtoD_v2, cuMemcpyHtoD_v2, 3020, (CUdeviceptr dstDevice,         \
      const void *srcHost, size_t ByteCount), (dstDevice, srcHost, ByteCount))               \
    X(drv, CUresult, cuMemcpyHtoD_v2_ptds, cuMemcpyHtoD_v2, 3020, (CUdeviceptr dstDevice,    \
      const void *srcHost, size_t ByteCount), (dstDevice, srcHost, ByteCount))               \
    X(drv, CUresult, cuMemcpyDtoH_v2, cuMemcpyDtoH_v2, 3020, (void *dstHost,                 \
      CUdeviceptr srcDevice, size_t ByteCount), (dstHost, srcDevice, ByteCount))             \
    X(drv, CUresult, cuMemcpyDtoH_v2_ptds, cuMemcpyDtoH_v2, 3020, (void *dstHost,            \
      CUdeviceptr srcDevice, size_t ByteCount), (dstHost, srcDevice, ByteCount))             \
    X(drv, CUresult, cuMemcpyDtoD_v2, cuMemcpyDtoD_v2, 3020, (CUdeviceptr dstDevice,         \
      CUdeviceptr srcDevice, size_t ByteCount), (dstDevice, srcDevice, ByteCount))           \
    X(drv, CUresult, cuMemcpyDtoD_v2_ptds, cuMemcpyDtoD_v2, 3020, (CUdeviceptr dstDevice,    \
      CUdeviceptr srcDevice, size_t ByteCount), (dstDevice, srcDevice, ByteCount))           \
    X(drv, CUresult, cuMemcpyHtoDAsync_v2, cuMemcpyHtoDAsync_v2, 3020,                       \
      (CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount, CUstream hStream),      \
      (dstDevice, srcHost, ByteCount, hStream))                                              \
    X(drv, CUresult, cuMemcpyHtoDAsync_v2_ptsz, cuMemcpyHtoDAsync_v2, 3020,                  \
      (CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount, CUstream hStream),      \
      (dstDevice, srcHost, ByteCount, hStream))                                              \
    X(drv, CUresult, cuMemcpyDtoHAsync_v2, cuMemcpyDtoHAsync_v2, 3020, (void *dstHost,       \
      CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream), (dstHost, srcDevice,       \
      ByteCount, hStream))                                                                   \
    X(drv, CUresult, cuMemcpyDtoHAsync_v2_ptsz, cuMemcpyDtoHAsync_v2, 3020, (void *dstHost,  \
      CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream), (dstHost, srcDevice,       \
      ByteCount, hStream))                                                                   \
    X(drv, CUresult, cuMemcpyDtoDAsync_v2, cuMemcpyDtoDAsync_v2, 3020,                       \
      (CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream),    \
      (dstDevice, srcDevice, ByteCount, hStream))                                            \
    X(drv, CUresult, cuMemcpyDtoDAsync_v2_ptsz, cuMemcpyDtoDAsync_v2, 3020,                  \
      (CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream),    \
      (dstDevice, srcDevice, ByteCount, hStream))                                            \
    X(drv, CUresult, cuMemcpy2D_v2, cuMemcpy2D_v2, 3020, (const CUDA_MEMCPY2D *pCopy),       \
      (pCopy))                                                                               \
    X(drv, CUresult, cuMemcpy2D_v2_ptds, cuMemcpy2D_v2, 3020, (const CUDA_MEMCPY2D *pCopy),  \
      (pCopy))                                                                               \
    X(drv, CUresult, cuMemcpy2DUnaligned_v2, cuMemcpy2D_v2, 3020,                            \
      (const CUDA_MEMCPY2D *pCopy), (pCopy))                                                 \
    X(drv, CUresult, cuMemcpy2DUnaligned_v2_ptds, cuMemcpy2D_v2, 3020,                       \
      (const CUDA_MEMCPY2D *pCopy), (pCopy))                                                 \
    X(drv, CUresult, cuMemcpy2DAsync_v2, cuMemcpy2DAsync_v2, 3020,                           \
      (const CUDA_MEMCPY2D *pCopy, CUstream hStream), (pCopy, hStream))                      \
    X(drv, CUresult, cuMemcpy2DAsync_v2_ptsz, cuMemcpy2DAsync_v2, 3020,                      \
      (const CUDA_MEMCPY2D *pCopy, CUstream hStream), (pCopy, hStream))                      \
    X(drv, CUresult, cuMemcpy3D_v2, cuMemcpy3D_v2, 3020, (const CUDA_MEMCPY3D *pCopy),       \
      (pCopy))                                                                               \
    X(drv, CUresult, cuMemcpy3D_v2_ptds, cuMemcpy3D_v2, 3020, (const CUDA_MEMCPY3D *pCopy),  \
      (pCopy))                                                                               \
    X(drv, CUresult, cuMemcpy3DAsync_v2, cuMemcpy3DAsync_v2, 3020,                           \
      (const CUDA_MEMCPY3D *pCopy, CUstream hStream), (pCopy, hStream))                      \
    X(drv, CUresult, cuMemcpy3DAsync_v2_ptsz, cuMemcpy3DAsync_v2, 3020,                      \
      (const CUDA_MEMCPY3D *pCopy, CUstream hStream), (pCopy, hStream))                      \
    X(drv, CUresult, cuMemcpy3DPeer, cuMemcpy3DPeer, 0, (const CUDA_MEMCPY3D_PEER *pCopy),   \
      (pCopy))                                                                               \
    X(drv, CUresult, cuMemcpy3DPeer_ptds, cuMemcpy3DPeer, 0,                                 \
      (const CUDA_MEMCPY3D_PEER *pCopy), (pCopy))                                            \
    X(drv, CUresult, cuMemcpy3DPeerAsync, cuMemcpy3DPeerAsync, 0,                            \
      (const CUDA_MEMCPY3D_PEER *pCopy, CUstream hStream), (pCopy, hStream))                 \
    X(drv, CUresult, cuMemcpy3DPeerAsync_ptsz, cuMemcpy3DPeerAsync, 0,                       \
      (const CUDA_MEMCPY3D_PEER *pCopy, CUstream hStream), (pCopy, hStream))                 \
    X(drv, CUresult, cuMemcpyDtoA_v2, cuMemcpyDtoA_v2, 3020, (CUarray dstArray,              \
      size_t dstOffset, CUdeviceptr srcDevice, size_t ByteCount), (dstArray, dstOffset,      \
      srcDevice, ByteCount))                                                                 \
    X(drv, CUresult, cuMemcpyDtoA_v2_ptds, cuMemcpyDtoA_v2, 3020, (CUarray dstArray,         \
      size_t dstOffset, CUdeviceptr srcDevice, size_t ByteCount), (dstArray, dstOffset,      \
      srcDevice, ByteCount))                                                                 \
    X(drv, CUresult, cuMemcpyAtoD_v2, cuMemcpyAtoD_v2, 3020, (CUdeviceptr dstDevice,         \
      CUarray srcArray, size_t srcOffset, size_t ByteCount), (dstDevice, srcArray,           \
      srcOffset, ByteCount))                                                                 \
    X(drv, CUresult, cuMemcpyAtoD_v2_ptds, cuMemcpyAtoD_v2, 3020, (CUdeviceptr dstDevice,    \
      CUarray srcArray, size_t srcOffset, size_t ByteCount), (dstDevice, srcArray,           \
      srcOffset, ByteCount))                                                                 \
    LMS_BATCH_HOOKS_12080(X)                                                                 \
    LMS_BATCH_HOOKS_13000(X)                                                                 \
    X(drv, CUresult, cuMemsetD8_v2, cuMemsetD8_v2, 3020, (CUdeviceptr dstDevice,             \
      unsigned char uc, size_t N), (dstDevice, uc, N))                                       \
    X(drv, CUresult, cuMemsetD8_v2_ptds, cuMemsetD8_v2, 3020, (CUdeviceptr dstDevice,        \
      unsigned char uc, size_t N), (dstDevice, uc, N))                                       \
    X(drv, CUresult, cuMemsetD8Async, cuMemsetD8Async, 0, (CUdeviceptr dstDevice,            \
      unsigned char uc, size_t N, CUstream hStream), (dstDevice, uc, N, hStream))            \
    X(drv, CUresult, cuMemsetD8Async_ptsz, cuMemsetD8Async, 0, (CUdeviceptr dstDevice,       \
      unsigned char uc, size_t N, CUstream hStream), (dstDevice, uc, N, hStream))            \
    X(drv, CUresult, cuMemsetD2D8_v2, cuMemsetD2D8_v2, 3020, (CUdeviceptr dstDevice,         \
      size_t dstPitch, unsigned char uc, size_t Width, size_t Height), (dstDevice, dstPitch, \
      uc, Width, Height))                                                                    \
    X(drv, CUresult, cuMemsetD2D8_v2_ptds, cuMemsetD2D8_v2, 3020, (CUdeviceptr dstDevice,    \
      size_t dstPitch, unsigned char uc, size_t Width, size_t Height), (dstDevice, dstPitch, \
      uc, Width, Height))                                                                    \
    X(drv, CUresult, cuMemsetD2D8Async, cuMemsetD2D8Async, 0, (CUdeviceptr dstDevice,        \
      size_t dstPitch, unsigned char uc, size_t Width, size_t Height, CUstream hStream),     \
      (dstDevice, dstPitch, uc, Width, Height, hStream))                                     \
    X(drv, CUresult, cuMemsetD2D8Async_ptsz, cuMemsetD2D8Async, 0, (CUdeviceptr dstDevice,   \
      size_t dstPitch, unsigned char uc, size_t Width, size_t Height, CUstream hStream),     \
      (dstDevice, dstPitch, uc, Width, Height, hStream))                                     \
    X(drv, CUresult, cuMemsetD16_v2, cuMemsetD16_v2, 3020, (CUdeviceptr dstDevice,           \
      unsigned short us, size_t N), (dstDevice, us, N))                                      \
    X(drv, CUresult, cuMemsetD16_v2_ptds, cuMemsetD16_v2, 3020, (CUdeviceptr dstDevice,      \
      unsigned short us, size_t N), (dstDevice, us, N))                                      \
    X(drv, CUresult, cuMemsetD16Async, cuMemsetD16Async, 0, (CUdeviceptr dstDevice,          \
      unsigned short us, size_t N, CUstream hStream), (dstDevice, us, N, hStream))           \
    X(drv, CUresult, cuMemsetD16Async_ptsz, cuMemsetD16Async, 0, (CUdeviceptr dstDevice,     \
      unsigned short us, size_t N, CUstream hStream), (dstDevice, us, N, hStream))           \
    X(drv, CUresult, cuMemsetD2D16_v2, cuMemsetD2D16_v2, 3020, (CUdeviceptr dstDevice,       \
      size_t dstPitch, unsigned short us, size_t Width, size_t Height), (dstDevice,          \
      dstPitch, us, Width, Height))                                                          \
    X(drv, CUresult, cuMemsetD2D16_v2_ptds, cuMemsetD2D16_v2, 3020, (CUdeviceptr dstDevice,  \
      size_t dstPitch, unsigned short us, size_t Width, size_t Height), (dstDevice,          \
      dstPitch, us, Width, Height))                                                          \
    X(drv, CUresult, cuMemsetD2D16Async, cuMemsetD2D16Async, 0, (CUdeviceptr dstDevice,      \
      size_t dstPitch, unsigned short us, size_t Width, size_t Height, CUstream hStream),    \
      (dstDevice, dstPitch, us, Width, Height, hStream))                                     \
    X(drv, CUresult, cuMemsetD2D16Async_ptsz, cuMemsetD2D16Async, 0, (CUdeviceptr dstDevice, \
      size_t dstPitch, unsigned short us, size_t Width, size_t Height, CUstream hStream),    \
      (dstDevice, dstPitch, us, Width, Height, hStream))                                     \
    X(drv, CUresult, cuMemsetD32_v2, cuMemsetD32_v2, 3020, (CUdeviceptr dstDevice,           \
      unsigned int ui, size_t N), (dstDevice, ui, N))                                        \
    X(drv, CUresult, cuMemsetD32_v2_ptds, cuMemsetD32_v2, 3020, (CUdeviceptr dstDevice,      \
      unsigned int ui, size_t N), (dstDevice, ui, N))                                        \
    X(drv, CUresult, cuMemsetD32Async, cuMemsetD32Async, 0, (CUdeviceptr dstDevice,          \
      unsigned int ui, size_t N, CUstream hStream), (dstDevice, ui, N, hStream))             \
    X(drv, CUresult, cuMemsetD32Async_ptsz, cuMemsetD32Async, 0, (CUdeviceptr dstDevice,     \
      unsigned int ui, size_t N, CUstream hStream), (dstDevice, ui, N, hStream))             \
    X(drv, CUresult, cuMemsetD2D32_v2, cuMemsetD2D32_v2, 3020, (CUdeviceptr dstDevice,       \
      size_t dstPitch, unsigned int ui, size_t Width, size_t Height), (dstDevice, dstPitch,  \
      ui, Width, Height))                                                                    \
    X(drv, CUresult, cuMemsetD2D32_v2_ptds, cuMemsetD2D32_v2, 3020, (CUdeviceptr dstDevice,  \
      size_t dstPitch, unsigned int ui, size_t Width, size_t Height), (dstDevice, dstPitch,  \
      ui, Width, Height))                                                                    \
    X(drv, CUresult, cuMemsetD2D32Async, cuMemsetD2D32Async, 0, (CUdeviceptr dstDevice,      \
      size_t dstPitch, unsigned int ui, size_t Width, size_t Height, CUstream hStream),      \
      (dstDevice, dstPitch, ui, Width, Height, hStream))                                     \
    X(drv, CUresult, cuMemsetD2D32Async_ptsz, cuMemsetD2D32Async, 0, (CUdeviceptr dstDevice, \
      size_t dstPitch, unsigned int ui, size_t Width, size_t Height, CUstream hStream),      \
      (dstDevice, dstPitch, ui, Width, Height, hStream))                                     \
    X(nccl, ncclResult_t, ncclAllReduce, ncclAllReduce, 0, (const void *sendbuff,            \
      void *recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,                 \
      ncclComm_t comm, cudaStream_t stream), (sendbuff, recvbuff, count, datatype, op, comm, \
      stream))                                                                               \
    X(nccl, ncclResult_t, ncclBroadcast, ncclBroadcast, 0, (const void *sendbuff,            \
      void *recvbuff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,      \
      cudaStream_t stream), (sendbuff, recvbuff, count, datatype, root, comm, stream))       \
    X(nccl, ncclResult_t, ncclBcast, ncclBcast, 0, (void *buff, size_t count,                \
      ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream), (buff,       \
      count, datatype, root, comm, stream))                                                  \
    X(nccl, ncclResult_t, ncclReduce, ncclReduce, 0, (const void *sendbuff, void *recvbuff,  \
      size_t count, ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,      \
      cudaStream_t stream), (sendbuff, recvbuff, count, datatype, op, root, comm, stream))   \
    X(nccl, ncclResult_t, ncclReduceScatter, ncclReduceScatter, 0, (const void *sendbuff,    \
      void *recvbuff, size_t recvcount, ncclDataType_t datatype, ncclRedOp_t op,             \
      ncclComm_t comm, cudaStream_t stream), (sendbuff, recvbuff, recvcount, datatype, op,   \
      comm, stream))                                                                         \
    X(nccl, ncclResult_t, ncclAllGather, ncclAllGather, 0, (const void *sendbuff,            \
      void *recvbuff, size_t sendcount, ncclDataType_t datatype, ncclComm_t comm,            \
      cudaStream_t stream), (sendbuff, recvbuff, sendcount, datatype, comm, stream))         \
    X(nccl, ncclResult_t, ncclAlltoAll, ncclAlltoAll, 0, (const void *sendbuff,              \
      void *recvbuff, size_t count, ncclDataType_t datatype, ncclComm_t comm,                \
      cudaStream_t stream), (sendbuff, recvbuff, count, datatype, comm, stream))             \
    X(nccl, ncclResult_t, ncclGather, ncclGather, 0, (const void *sendbuff, void *recvbuff,  \
      size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,                      \
      cudaStream_t stream), (sendbuff, recvbuff, count, datatype, root, comm, stream))       \
    X(nccl, ncclResult_t, ncclScatter, ncclScatter, 0, (const void *sendbuff,                \
      void *recvbuff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,      \
      cudaStream_t stream), (sendbuff, recvbuff, count, datatype, root, comm, stream))       \
    X(nccl, ncclResult_t, ncclSend, ncclSend, 0, (const void *sendbuff, size_t count,        \
      ncclDataType_t datatype, int peer, ncclComm_t comm, cudaStream_t stream), (sendbuff,   \
      count, datatype, peer, comm, stream))                                                  \
    X(nccl, ncclResult_t, ncclRecv, ncclRecv, 0, (void *recvbuff, size_t count,              \
      ncclDataType_t datatype, int peer, ncclComm_t comm, cudaStream_t stream), (recvbuff,   \
      count, datatype, peer, comm, stream))

#define LMS_ALL_HOOKS(X) LMS_HOOKS(X) LMS_ACCESS_HOOKS(X)

#endif /* LMS_INTERPOSE_HOOKS_H */
