/*
 * interpose/interpose.c — the CUDA entry points liblms.so exports in place
 * of libcudart's and libcuda's, for LD_PRELOAD=liblms.so under a program
 * that was not written for lms (DESIGN.md: interpose/). Each translates the
 * call into lms.h calls; nothing here decides anything.
 *
 * Which entry points: interpose/hooks.h, the one list. For each, the wrapper
 * below calls hook_<name> when lms is enabled (LMS_ENABLE, default 1), else
 * the real function: the next definition of the symbol after liblms.so in
 * the process's lookup order (dlsym(RTLD_NEXT)), found on first use. With
 * LMS_ENABLE=0 every wrapper is that call and nothing else: the process
 * behaves as with no preload.
 *
 * Note [What the hooks cover so far]
 * Allocation, free and memory info, runtime and driver, stream-ordered
 * ones included (on the stream adopted for the program's: lms.h,
 * lms_stream_adopt). Memory info reports lms's budget (lms_memory_info), so
 * LMS_DEVICE_LIMIT is the device size a framework sees. cudaFree and
 * cuMemFree free for all streams (LMS_ALL_STREAMS): CUDA's contract without
 * its synchronize. A pointer lms did not hand out (memory the program
 * allocated before lms was enabled, or in a library that binds its own
 * calls) goes to the real free. Memory-pool calls (cudaMemPool*, the pools
 * of cudaMallocAsync) go to CUDA unchanged: they describe CUDA's pools,
 * which lms's allocations are not in. Kernel launches, through every door
 * CUDA 13 has (the runtime's, nvcc 13's <<<>>> as __cudaLaunchKernel, the
 * driver's, cooperative ones), make what their parameters point to
 * resident first (launch.c), tensor maps' tensors among it (the encoders
 * are hooked: Note [Tensor maps] in tensormap.c); copies, memsets and NCCL
 * collectives what they read and write (access.h). Stream destroys let lms
 * forget the stream first. Lookups by name answer lms's wrappers (Note
 * [Lookups by name] in symbols.c). Graph capture pins what captured calls
 * touch for the life of the graphs made from it, and a stream that may be joining a
 * capture (a wait for an event) is let go of first (Note [Graph capture]
 * in graph.c). Batched copies are hooked in the driver, in both CUDA
 * 12.8's and 13's forms (Note [Batched copies] in access.c). Every copy
 * and memset of CUDA 13 that can touch device memory is hooked, those to
 * and from CUDA arrays and the 3D peer copies among them. On the
 * sim backend nothing runs kernels: tests/interpose checks the hooks with
 * a stand-in CUDA.
 *
 * A program or library that links libcudart statically (nvcc's default)
 * binds its runtime calls inside itself: no preload reaches them. Its
 * runtime finds the driver with dlopen and dlsym, which liblms.so answers
 * (Note [dlsym] in dlsym.c), so its allocations, launches and copies reach
 * lms as driver calls. PyTorch links the shared libcudart.
 */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>
/* Programs still call deprecated entry points (cudaGetDriverEntryPoint):
 * the hooks define them. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#include "base/base.h"
#include "interpose/internal.h"

/* The batched copies' forms that cuda.h does not declare for programs (all
 * per-thread twins, and CUDA 12.8's under CUDA 13's headers): their types
 * as cudaTypedefs.h gives them. */
#if CUDA_VERSION >= 12080
_Static_assert(__builtin_types_compatible_p(__typeof__(&cuMemcpyBatchAsync),
                                            PFN_cuMemcpyBatchAsync_v12080) &&
                   __builtin_types_compatible_p(__typeof__(&cuMemcpyBatchAsync_ptsz),
                                                PFN_cuMemcpyBatchAsync_v12080_ptsz) &&
                   __builtin_types_compatible_p(__typeof__(&cuMemcpy3DBatchAsync),
                                                PFN_cuMemcpy3DBatchAsync_v12080) &&
                   __builtin_types_compatible_p(__typeof__(&cuMemcpy3DBatchAsync_ptsz),
                                                PFN_cuMemcpy3DBatchAsync_v12080_ptsz),
               "CUDA 12.8's batched copies' hooks have CUDA's types");
#endif
#if CUDA_VERSION >= 13000
_Static_assert(__builtin_types_compatible_p(__typeof__(&cuMemcpyBatchAsync_v2_ptsz),
                                            PFN_cuMemcpyBatchAsync_v13000_ptsz) &&
                   __builtin_types_compatible_p(__typeof__(&cuMemcpy3DBatchAsync_v2_ptsz),
                                                PFN_cuMemcpy3DBatchAsync_v13000_ptsz),
               "CUDA 13's batched copies' per-thread hooks have CUDA's types");
#endif

/* ---- lms's answers ----------------------------------------------------------------- */

static bool enabled(void) { return base_options()->enable != 0; }

static bool on_sim(void) { return strcmp(base_options()->backend, "sim") == 0; }

static cudaError_t rt_error(lms_status_t st)
{
    switch (st) {
    case LMS_OK: return cudaSuccess;
    case LMS_NOT_READY: return cudaErrorNotReady;
    case LMS_ERR_INVALID: return cudaErrorInvalidValue;
    case LMS_ERR_OUT_OF_MEMORY: return cudaErrorMemoryAllocation;
    case LMS_ERR_NO_DEVICE: return cudaErrorNoDevice;
    case LMS_ERR_UNSUPPORTED: return cudaErrorNotSupported;
    case LMS_ERR_SYSTEM: return cudaErrorOperatingSystem;
    case LMS_ERR_DEVICE: break;
    }
    return cudaErrorUnknown;
}

static CUresult drv_error(lms_status_t st)
{
    switch (st) {
    case LMS_OK: return CUDA_SUCCESS;
    case LMS_NOT_READY: return CUDA_ERROR_NOT_READY;
    case LMS_ERR_INVALID: return CUDA_ERROR_INVALID_VALUE;
    case LMS_ERR_OUT_OF_MEMORY: return CUDA_ERROR_OUT_OF_MEMORY;
    case LMS_ERR_NO_DEVICE: return CUDA_ERROR_NO_DEVICE;
    case LMS_ERR_UNSUPPORTED: return CUDA_ERROR_NOT_SUPPORTED;
    case LMS_ERR_SYSTEM: return CUDA_ERROR_OPERATING_SYSTEM;
    case LMS_ERR_DEVICE: break;
    }
    return CUDA_ERROR_UNKNOWN;
}

/* NCCL has no out-of-memory code: device memory is CUDA's, as its own
 * cudaMalloc failures are. */
static ncclResult_t nccl_error(lms_status_t st)
{
    switch (st) {
    case LMS_OK: return ncclSuccess;
    case LMS_ERR_INVALID: return ncclInvalidArgument;
    case LMS_ERR_SYSTEM: return ncclSystemError;
    default: return ncclUnhandledCudaError;
    }
}

/* A failure the program will see as a CUDA error code: the message goes to
 * the log (LMS_LOG=info), since the program cannot ask lms for it. The first
 * out-of-memory is a warning: all the program can print is "CUDA error: out
 * of memory", and lms's message names the limit that was reached (on a card,
 * GPT-2 at 2x failed so, at a default host limit, with nothing else said). */
static lms_status_t said(lms_status_t st)
{
    static atomic_bool oom_said;
    if (st == LMS_ERR_OUT_OF_MEMORY && !atomic_exchange(&oom_said, true))
        base_log(BASE_LOG_WARN, "interpose: %s (the first out-of-memory; later ones at "
                 "LMS_LOG=info)", lms_last_error());
    else if (st != LMS_OK)
        base_log(BASE_LOG_INFO, "interpose: %s", lms_last_error());
    return st;
}

/* lms_malloc on the legacy stream; where lms could not start, the first
 * failure (Note [A failed start] in launch.c), *p NULL as lms_malloc leaves
 * it. A NULL p gets lms_malloc's own answer. */
static lms_status_t malloc_started(void **p, size_t size)
{
    lms_status_t st = p != NULL ? interpose_start() : LMS_OK;
    if (st != LMS_OK) {
        *p = NULL;
        return st;
    }
    return lms_malloc(p, size, NULL);
}

static cudaError_t hook_cudaMalloc(void **devPtr, size_t size)
{
    lms_status_t st = malloc_started(devPtr, size);
    if (st == LMS_OK && (st = interpose_pin_small(*devPtr, size)) != LMS_OK)
        *devPtr = NULL;
    if (st == LMS_OK)
        trace_alloc(*devPtr, size);
    return rt_error(said(st));
}

/* cudaFree(NULL) is how programs make the runtime set up its context: that
 * goes on to CUDA, unless the device is lms's simulated one. */
static cudaError_t hook_cudaFree(void *devPtr)
{
    if (devPtr == NULL)
        return on_sim() || REAL(cudaFree) == NULL ? cudaSuccess : REAL(cudaFree)(NULL);
    lms_status_t st = said(interpose_refused_in_child()); /* Note [Frees in a forked child] */
    if (st != LMS_OK)
        return rt_error(st);
    if (!interpose_owns(devPtr))
        return REAL(cudaFree) != NULL ? REAL(cudaFree)(devPtr) : cudaErrorInvalidValue;
    graph_forget(devPtr);
    trace_free(devPtr);
    return rt_error(said(lms_free(devPtr, LMS_ALL_STREAMS)));
}

/* Where lms could not start, the first failure (Note [A failed start]);
 * NULL outputs get lms_memory_info's own answer. */
static cudaError_t hook_cudaMemGetInfo(size_t *free_b, size_t *total_b)
{
    lms_status_t st = free_b != NULL && total_b != NULL ? interpose_start() : LMS_OK;
    return rt_error(said(st == LMS_OK ? lms_memory_info(free_b, total_b) : st));
}

/* cuMemAlloc of 0 bytes is an error, as the driver has it. */
static CUresult hook_cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    if (dptr == NULL || bytesize == 0)
        return CUDA_ERROR_INVALID_VALUE;
    void *p;
    lms_status_t st = malloc_started(&p, bytesize);
    if (st == LMS_OK)
        st = interpose_pin_small(p, bytesize);
    if (said(st) == LMS_OK) {
        *dptr = (CUdeviceptr)(uintptr_t)p;
        trace_alloc(p, bytesize);
    }
    return drv_error(st);
}

static CUresult hook_cuMemFree_v2(CUdeviceptr dptr)
{
    void *p = (void *)(uintptr_t)dptr;
    /* Note [Frees in a forked child] */
    lms_status_t st = dptr != 0 ? said(interpose_refused_in_child()) : LMS_OK;
    if (st != LMS_OK)
        return drv_error(st);
    if (dptr == 0 || !interpose_owns(p))
        return REAL(cuMemFree_v2) != NULL ? REAL(cuMemFree_v2)(dptr) : CUDA_ERROR_INVALID_VALUE;
    graph_forget(p);
    trace_free(p);
    return drv_error(said(lms_free(p, LMS_ALL_STREAMS)));
}

static CUresult hook_cuMemGetInfo_v2(size_t *free_b, size_t *total_b)
{
    lms_status_t st = free_b != NULL && total_b != NULL ? interpose_start() : LMS_OK;
    return drv_error(said(st == LMS_OK ? lms_memory_info(free_b, total_b) : st));
}

/* ---- stream-ordered allocation ----------------------------------------------------- */

static cudaError_t hook_cudaMallocAsync(void **devPtr, size_t size, cudaStream_t hStream)
{
    if (devPtr == NULL)
        return cudaErrorInvalidValue;
    return rt_error(said(interpose_malloc_on(devPtr, size, hStream)));
}

static CUresult hook_cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    if (dptr == NULL || bytesize == 0)
        return CUDA_ERROR_INVALID_VALUE;
    void *p;
    lms_status_t st = said(interpose_malloc_on(&p, bytesize, hStream));
    if (st == LMS_OK)
        *dptr = (CUdeviceptr)(uintptr_t)p;
    return drv_error(st);
}

/* A free of what lms did not hand out goes to `real`, CUDA's. */
static cudaError_t rt_free_async(void *devPtr, cudaStream_t hStream,
                                 __typeof__(&cudaFreeAsync) real)
{
    /* Note [Frees in a forked child] */
    lms_status_t st = devPtr != NULL ? said(interpose_refused_in_child()) : LMS_OK;
    if (st != LMS_OK)
        return rt_error(st);
    if (devPtr != NULL && !interpose_owns(devPtr))
        return real != NULL ? real(devPtr, hStream) : cudaErrorInvalidValue;
    return rt_error(said(interpose_free_on(devPtr, hStream)));
}

static CUresult drv_free_async(CUdeviceptr dptr, CUstream hStream,
                               __typeof__(&cuMemFreeAsync) real)
{
    void *p = (void *)(uintptr_t)dptr;
    /* Note [Frees in a forked child] */
    lms_status_t st = dptr != 0 ? said(interpose_refused_in_child()) : LMS_OK;
    if (st != LMS_OK)
        return drv_error(st);
    if (dptr == 0 || !interpose_owns(p))
        return real != NULL ? real(dptr, hStream) : CUDA_ERROR_INVALID_VALUE;
    return drv_error(said(interpose_free_on(p, hStream)));
}

static cudaError_t hook_cudaFreeAsync(void *devPtr, cudaStream_t hStream)
{
    return rt_free_async(devPtr, hStream, REAL(cudaFreeAsync));
}

static cudaError_t hook_cudaFreeAsync_ptsz(void *devPtr, cudaStream_t hStream)
{
    return rt_free_async(devPtr, hStream, REAL(cudaFreeAsync_ptsz));
}

static CUresult hook_cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    return drv_free_async(dptr, hStream, REAL(cuMemFreeAsync));
}

static CUresult hook_cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
    return drv_free_async(dptr, hStream, REAL(cuMemFreeAsync_ptsz));
}

/* lms lets go of the stream (waiting for its work) before CUDA destroys it. */
static cudaError_t hook_cudaStreamDestroy(cudaStream_t stream)
{
    lms_status_t st = said(lms_stream_unadopt(stream));
    if (st != LMS_OK)
        return rt_error(st);
    return REAL_OR(cudaStreamDestroy, (stream), MISSING_rt);
}

static CUresult hook_cuStreamDestroy_v2(CUstream hStream)
{
    lms_status_t st = said(lms_stream_unadopt(hStream));
    if (st != LMS_OK)
        return drv_error(st);
    return REAL_OR(cuStreamDestroy_v2, (hStream), MISSING_drv);
}

/* ---- launches ----------------------------------------------------------------------- */

/*
 * Note [One access per call]
 * A call the hooks made resident goes on to CUDA or NCCL, which may make
 * it through other hooked entry points: the runtime's copies and launches
 * through the driver's (looked up by name: lms's wrappers), NCCL's
 * collectives through launches of its own kernels. What the outer call
 * made resident covers what the inner ones touch of lms's memory, so while
 * a hooked call is in CUDA or NCCL, the hooks on that thread pass calls
 * straight through: one access per call the program makes, which is what
 * the policy learns the iteration from, not one per layer.
 */
static __thread unsigned inside;

/* Each makes what the launch points to resident (launch_access), then launches;
 * a launch whose memory cannot be made resident does not go to CUDA. A
 * runtime launch whose layout is unknown goes on with the hooks open, for
 * the driver's hook to see (Note [Runtime launches the driver sees] in
 * launch.c). */
#define LAUNCH(lib, kind, fn, stream, params, extra, real_call)                              \
    do {                                                                                     \
        if (inside) {                                                                        \
            launch_nested(kind);                                                             \
            return real_call;                                                                \
        }                                                                                    \
        bool deferred_ = false, runtime_ = kind != LAUNCH_DRIVER;                            \
        lms_status_t st_ = said(launch_access(kind, fn, stream, params, extra,               \
                                              runtime_ ? &deferred_ : NULL));                \
        if (st_ != LMS_OK) {                                                                 \
            if (runtime_)                                                                    \
                launch_done(false);                                                          \
            return lib##_error(st_);                                                         \
        }                                                                                    \
        inside += !deferred_;                                                                \
        __typeof__(real_call) r_ = real_call;                                                \
        inside -= !deferred_;                                                                \
        if (runtime_)                                                                        \
            launch_done(r_ == 0);                                                            \
        return r_;                                                                           \
    } while (0)

static cudaError_t hook_cudaLaunchKernel(const void *func, dim3 gridDim, dim3 blockDim,
                                         void **args, size_t sharedMem, cudaStream_t stream)
{
    LAUNCH(rt, LAUNCH_RUNTIME, func, stream, args, NULL,
           REAL_OR(cudaLaunchKernel, (func, gridDim, blockDim, args, sharedMem, stream), MISSING_rt));
}

static cudaError_t hook_cudaLaunchKernel_ptsz(const void *func, dim3 gridDim, dim3 blockDim,
                                              void **args, size_t sharedMem, cudaStream_t stream)
{
    LAUNCH(rt, LAUNCH_RUNTIME, func, stream, args, NULL,
           REAL_OR(cudaLaunchKernel_ptsz, (func, gridDim, blockDim, args, sharedMem, stream),
                   MISSING_rt));
}

static cudaError_t hook_cudaLaunchKernelExC(const cudaLaunchConfig_t *config, const void *func,
                                            void **args)
{
    if (config == NULL)
        return cudaErrorInvalidValue;
    LAUNCH(rt, LAUNCH_RUNTIME, func, config->stream, args, NULL,
           REAL_OR(cudaLaunchKernelExC, (config, func, args), MISSING_rt));
}

static cudaError_t hook_cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t *config,
                                                 const void *func, void **args)
{
    if (config == NULL)
        return cudaErrorInvalidValue;
    LAUNCH(rt, LAUNCH_RUNTIME, func, config->stream, args, NULL,
           REAL_OR(cudaLaunchKernelExC_ptsz, (config, func, args), MISSING_rt));
}

/* nvcc 13's <<<>>>: the stub calls __cudaLaunchKernel with the cudaKernel_t
 * that __cudaGetKernel gave it (crt/host_runtime.h), and libcudart.so.13
 * launches it with no call through the symbol table: no cudaLaunchKernel
 * hook sees it. */
static cudaError_t hook___cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim,
                                           void **args, size_t sharedMem, cudaStream_t stream)
{
    LAUNCH(rt, LAUNCH_KERNEL, kernel, stream, args, NULL,
           REAL_OR(__cudaLaunchKernel, (kernel, gridDim, blockDim, args, sharedMem, stream),
                   MISSING_rt));
}

static cudaError_t hook___cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim,
                                                void **args, size_t sharedMem, cudaStream_t stream)
{
    LAUNCH(rt, LAUNCH_KERNEL, kernel, stream, args, NULL,
           REAL_OR(__cudaLaunchKernel_ptsz, (kernel, gridDim, blockDim, args, sharedMem, stream),
                   MISSING_rt));
}

static cudaError_t hook_cudaLaunchCooperativeKernel(const void *func, dim3 gridDim, dim3 blockDim,
                                                    void **args, size_t sharedMem,
                                                    cudaStream_t stream)
{
    LAUNCH(rt, LAUNCH_RUNTIME, func, stream, args, NULL,
           REAL_OR(cudaLaunchCooperativeKernel, (func, gridDim, blockDim, args, sharedMem, stream),
                   MISSING_rt));
}

static cudaError_t hook_cudaLaunchCooperativeKernel_ptsz(const void *func, dim3 gridDim,
                                                         dim3 blockDim, void **args,
                                                         size_t sharedMem, cudaStream_t stream)
{
    LAUNCH(rt, LAUNCH_RUNTIME, func, stream, args, NULL,
           REAL_OR(cudaLaunchCooperativeKernel_ptsz,
                   (func, gridDim, blockDim, args, sharedMem, stream), MISSING_rt));
}

static CUresult hook_cuLaunchCooperativeKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                               unsigned bx, unsigned by, unsigned bz,
                                               unsigned shared, CUstream hStream,
                                               void **kernelParams)
{
    LAUNCH(drv, LAUNCH_DRIVER, f, hStream, kernelParams, NULL,
           REAL_OR(cuLaunchCooperativeKernel,
                   (f, gx, gy, gz, bx, by, bz, shared, hStream, kernelParams), MISSING_drv));
}

static CUresult hook_cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned gx, unsigned gy,
                                                    unsigned gz, unsigned bx, unsigned by,
                                                    unsigned bz, unsigned shared, CUstream hStream,
                                                    void **kernelParams)
{
    LAUNCH(drv, LAUNCH_DRIVER, f, hStream, kernelParams, NULL,
           REAL_OR(cuLaunchCooperativeKernel_ptsz,
                   (f, gx, gy, gz, bx, by, bz, shared, hStream, kernelParams), MISSING_drv));
}

/* The deprecated doors whose parameters lms cannot see (launch_unseeable). */
#define UNSEEABLE(fn, door, real_call)                                                       \
    do {                                                                                     \
        static bool said_;                                                                   \
        if (inside)                                                                          \
            return real_call;                                                                \
        lms_status_t st_ = said(launch_unseeable(fn, door, &said_));                         \
        if (st_ != LMS_OK)                                                                   \
            return drv_error(st_);                                                           \
        inside++;                                                                            \
        CUresult r_ = real_call;                                                             \
        inside--;                                                                            \
        return r_;                                                                           \
    } while (0)

static CUresult hook_cuLaunch(CUfunction f)
{
    UNSEEABLE(f, "cuLaunch", REAL_OR(cuLaunch, (f), MISSING_drv));
}

static CUresult hook_cuLaunchGrid(CUfunction f, int w, int h)
{
    UNSEEABLE(f, "cuLaunchGrid", REAL_OR(cuLaunchGrid, (f, w, h), MISSING_drv));
}

static CUresult hook_cuLaunchGridAsync(CUfunction f, int w, int h, CUstream hStream)
{
    UNSEEABLE(f, "cuLaunchGridAsync", REAL_OR(cuLaunchGridAsync, (f, w, h, hStream), MISSING_drv));
}

static CUresult hook_cuLaunchCooperativeKernelMultiDevice(CUDA_LAUNCH_PARAMS *list, unsigned n,
                                                          unsigned flags)
{
    UNSEEABLE(list != NULL && n > 0 ? (const void *)list[0].function : NULL,
              "cuLaunchCooperativeKernelMultiDevice",
              REAL_OR(cuLaunchCooperativeKernelMultiDevice, (list, n, flags), MISSING_drv));
}

/* An unload: every layout learnt is asked again at its next launch. */
static CUresult hook_cuModuleUnload(CUmodule hmod)
{
    CUresult r = REAL_OR(cuModuleUnload, (hmod), MISSING_drv);
    launch_forget_layouts();
    return r;
}

static CUresult hook_cuLibraryUnload(CUlibrary library)
{
    CUresult r = REAL_OR(cuLibraryUnload, (library), MISSING_drv);
    launch_forget_layouts();
    return r;
}

#if CUDA_VERSION >= 12050
static cudaError_t hook_cudaLibraryUnload(cudaLibrary_t library)
{
    cudaError_t r = REAL_OR(cudaLibraryUnload, (library), MISSING_rt);
    launch_forget_layouts();
    return r;
}
#endif

static CUresult hook_cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                    unsigned bx, unsigned by, unsigned bz, unsigned shared,
                                    CUstream hStream, void **kernelParams, void **extra)
{
    LAUNCH(drv, LAUNCH_DRIVER, f, hStream, kernelParams, extra,
           REAL_OR(cuLaunchKernel, (f, gx, gy, gz, bx, by, bz, shared, hStream, kernelParams, extra),
                   MISSING_drv));
}

static CUresult hook_cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                         unsigned bx, unsigned by, unsigned bz, unsigned shared,
                                         CUstream hStream, void **kernelParams, void **extra)
{
    LAUNCH(drv, LAUNCH_DRIVER, f, hStream, kernelParams, extra,
           REAL_OR(cuLaunchKernel_ptsz,
                   (f, gx, gy, gz, bx, by, bz, shared, hStream, kernelParams, extra), MISSING_drv));
}

static CUresult hook_cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f,
                                      void **kernelParams, void **extra)
{
    if (config == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    LAUNCH(drv, LAUNCH_DRIVER, f, config->hStream, kernelParams, extra,
           REAL_OR(cuLaunchKernelEx, (config, f, kernelParams, extra), MISSING_drv));
}

static CUresult hook_cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f,
                                           void **kernelParams, void **extra)
{
    if (config == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    LAUNCH(drv, LAUNCH_DRIVER, f, config->hStream, kernelParams, extra,
           REAL_OR(cuLaunchKernelEx_ptsz, (config, f, kernelParams, extra), MISSING_drv));
}

/* ---- tensor maps (Note [Tensor maps] in tensormap.c) --------------------------------- */

/* CUDA's answer r for the descriptor map it wrote for address: learnt if
 * the address is lms's. */
static CUresult tensor_map_made(CUresult r, const CUtensorMap *map, const void *address)
{
    if (r == CUDA_SUCCESS && interpose_owns(address))
        tensormap_learn(map, (uintptr_t)address);
    return r;
}

/* Each tensor-map entry of hooks.h names its descriptor tensorMap and its
 * address globalAddress: the hooks are made from the list. */
#define TENSOR_MAP_HOOK(lib, ret, name, by, since, params, args)                             \
    static ret hook_##name params                                                            \
    {                                                                                        \
        return tensor_map_made(REAL_OR(name, args, MISSING_##lib), tensorMap, globalAddress); \
    }
LMS_TENSOR_MAP_HOOKS(TENSOR_MAP_HOOK)
#undef TENSOR_MAP_HOOK

/* ---- NCCL groups (Note [NCCL groups] in nccl.c) ------------------------------------- */

static ncclResult_t hook_ncclGroupStart(void)
{
    ncclResult_t r = REAL_OR(ncclGroupStart, (), MISSING_nccl);
    if (r == ncclSuccess && !inside)
        access_group_started();
    return r;
}

/* The outermost end makes the group's ranges resident first; if it cannot,
 * NCCL is not called and the group stays open, as it was. */
static ncclResult_t hook_ncclGroupEnd(void)
{
    if (inside)
        return REAL_OR(ncclGroupEnd, (), MISSING_nccl);
    lms_status_t st = said(access_group_ending());
    if (st != LMS_OK)
        return nccl_error(st);
    inside++;
    ncclResult_t r = REAL_OR(ncclGroupEnd, (), MISSING_nccl);
    inside--;
    access_group_ended();
    return r;
}

/* ---- graphs (Note [Graph capture] in graph.c) ----------------------------------------- */

/* Each passes calls from inside a hooked call straight through (Note [One
 * access per call]): the runtime's graph calls go on through the driver's. */
#define GRAPH_CALL(real_call, before, after)                                                 \
    do {                                                                                     \
        if (inside)                                                                          \
            return real_call;                                                                \
        before;                                                                              \
        inside++;                                                                            \
        __typeof__(real_call) r_ = real_call;                                                \
        inside--;                                                                            \
        after;                                                                               \
        return r_;                                                                           \
    } while (0)

/* lms lets go of the stream first; a capture CUDA did not begin is not counted. */
#define CAPTURE_BEGIN(lib, stream, real_call)                                                \
    GRAPH_CALL(real_call, lms_status_t st_ = said(graph_capture_beginning(stream));          \
               if (st_ != LMS_OK) return lib##_error(st_),                                   \
               graph_capture_begun(r_ == 0))

/* The capture's pins pass to the graph made, or go. */
#define CAPTURE_END(stream, pgraph, real_call)                                               \
    GRAPH_CALL(real_call, uint64_t id_ = 0; bool captured_ = graph_capture_id(stream, &id_), \
               if (captured_) graph_capture_ended(stream, id_,                               \
                                                  r_ == 0 && (pgraph) != NULL ? (void *)*(pgraph) : NULL))

/* A new handle from graph: an executable graph or a clone. */
#define GRAPH_MADE(made, pnew, graph, real_call)                                             \
    GRAPH_CALL(real_call, (void)0, if (r_ == 0 && (pnew) != NULL) made(graph, *(pnew)))

#define GRAPH_GONE(gone, handle, real_call)                                                  \
    GRAPH_CALL(real_call, (void)0, if (r_ == 0) gone(handle))

static cudaError_t hook_cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode)
{
    CAPTURE_BEGIN(rt, stream, REAL_OR(cudaStreamBeginCapture, (stream, mode), MISSING_rt));
}

static cudaError_t hook_cudaStreamBeginCapture_ptsz(cudaStream_t stream,
                                                    enum cudaStreamCaptureMode mode)
{
    CAPTURE_BEGIN(rt, stream, REAL_OR(cudaStreamBeginCapture_ptsz, (stream, mode), MISSING_rt));
}

static cudaError_t hook_cudaStreamBeginCaptureToGraph(cudaStream_t stream, cudaGraph_t graph,
                                                      const cudaGraphNode_t *deps,
                                                      const cudaGraphEdgeData *data, size_t n,
                                                      enum cudaStreamCaptureMode mode)
{
    CAPTURE_BEGIN(rt, stream, REAL_OR(cudaStreamBeginCaptureToGraph,
                                      (stream, graph, deps, data, n, mode), MISSING_rt));
}

static cudaError_t hook_cudaStreamBeginCaptureToGraph_ptsz(cudaStream_t stream, cudaGraph_t graph,
                                                           const cudaGraphNode_t *deps,
                                                           const cudaGraphEdgeData *data, size_t n,
                                                           enum cudaStreamCaptureMode mode)
{
    CAPTURE_BEGIN(rt, stream, REAL_OR(cudaStreamBeginCaptureToGraph_ptsz,
                                      (stream, graph, deps, data, n, mode), MISSING_rt));
}

static cudaError_t hook_cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *pGraph)
{
    CAPTURE_END(stream, pGraph, REAL_OR(cudaStreamEndCapture, (stream, pGraph), MISSING_rt));
}

static cudaError_t hook_cudaStreamEndCapture_ptsz(cudaStream_t stream, cudaGraph_t *pGraph)
{
    CAPTURE_END(stream, pGraph, REAL_OR(cudaStreamEndCapture_ptsz, (stream, pGraph), MISSING_rt));
}

/* lms lets go of a stream that may be joining a capture (graph_stream_waiting). */
#define STREAM_WAIT(lib, stream, real_call)                                                  \
    GRAPH_CALL(real_call, lms_status_t st_ = said(graph_stream_waiting(stream));             \
               if (st_ != LMS_OK) return lib##_error(st_), (void)0)

static cudaError_t hook_cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event,
                                            unsigned int flags)
{
    STREAM_WAIT(rt, stream, REAL_OR(cudaStreamWaitEvent, (stream, event, flags), MISSING_rt));
}

static cudaError_t hook_cudaStreamWaitEvent_ptsz(cudaStream_t stream, cudaEvent_t event,
                                                 unsigned int flags)
{
    STREAM_WAIT(rt, stream, REAL_OR(cudaStreamWaitEvent_ptsz, (stream, event, flags), MISSING_rt));
}

static cudaError_t hook_cudaGraphInstantiate(cudaGraphExec_t *pExec, cudaGraph_t graph,
                                             unsigned long long flags)
{
    GRAPH_MADE(graph_instantiated, pExec, graph,
               REAL_OR(cudaGraphInstantiate, (pExec, graph, flags), MISSING_rt));
}

static cudaError_t hook_cudaGraphInstantiateWithFlags(cudaGraphExec_t *pExec, cudaGraph_t graph,
                                                      unsigned long long flags)
{
    GRAPH_MADE(graph_instantiated, pExec, graph,
               REAL_OR(cudaGraphInstantiateWithFlags, (pExec, graph, flags), MISSING_rt));
}

static cudaError_t hook_cudaGraphInstantiateWithParams(cudaGraphExec_t *pExec, cudaGraph_t graph,
                                                       cudaGraphInstantiateParams *params)
{
    GRAPH_MADE(graph_instantiated, pExec, graph,
               REAL_OR(cudaGraphInstantiateWithParams, (pExec, graph, params), MISSING_rt));
}

static cudaError_t hook_cudaGraphInstantiateWithParams_ptsz(cudaGraphExec_t *pExec,
                                                            cudaGraph_t graph,
                                                            cudaGraphInstantiateParams *params)
{
    GRAPH_MADE(graph_instantiated, pExec, graph,
               REAL_OR(cudaGraphInstantiateWithParams_ptsz, (pExec, graph, params), MISSING_rt));
}

static cudaError_t hook_cudaGraphClone(cudaGraph_t *pClone, cudaGraph_t original)
{
    GRAPH_MADE(graph_cloned, pClone, original, REAL_OR(cudaGraphClone, (pClone, original), MISSING_rt));
}

static cudaError_t hook_cudaGraphDestroy(cudaGraph_t graph)
{
    GRAPH_GONE(graph_destroyed, graph, REAL_OR(cudaGraphDestroy, (graph), MISSING_rt));
}

static cudaError_t hook_cudaGraphExecDestroy(cudaGraphExec_t exec)
{
    GRAPH_GONE(graph_exec_destroyed, exec, REAL_OR(cudaGraphExecDestroy, (exec), MISSING_rt));
}

static CUresult hook_cuStreamBeginCapture_v2(CUstream stream, CUstreamCaptureMode mode)
{
    CAPTURE_BEGIN(drv, stream, REAL_OR(cuStreamBeginCapture_v2, (stream, mode), MISSING_drv));
}

static CUresult hook_cuStreamBeginCapture_v2_ptsz(CUstream stream, CUstreamCaptureMode mode)
{
    CAPTURE_BEGIN(drv, stream, REAL_OR(cuStreamBeginCapture_v2_ptsz, (stream, mode), MISSING_drv));
}

static CUresult hook_cuStreamBeginCaptureToGraph(CUstream stream, CUgraph graph,
                                                 const CUgraphNode *deps,
                                                 const CUgraphEdgeData *data, size_t n,
                                                 CUstreamCaptureMode mode)
{
    CAPTURE_BEGIN(drv, stream, REAL_OR(cuStreamBeginCaptureToGraph,
                                       (stream, graph, deps, data, n, mode), MISSING_drv));
}

static CUresult hook_cuStreamBeginCaptureToGraph_ptsz(CUstream stream, CUgraph graph,
                                                      const CUgraphNode *deps,
                                                      const CUgraphEdgeData *data, size_t n,
                                                      CUstreamCaptureMode mode)
{
    CAPTURE_BEGIN(drv, stream, REAL_OR(cuStreamBeginCaptureToGraph_ptsz,
                                       (stream, graph, deps, data, n, mode), MISSING_drv));
}

static CUresult hook_cuStreamEndCapture(CUstream stream, CUgraph *pGraph)
{
    CAPTURE_END(stream, pGraph, REAL_OR(cuStreamEndCapture, (stream, pGraph), MISSING_drv));
}

static CUresult hook_cuStreamEndCapture_ptsz(CUstream stream, CUgraph *pGraph)
{
    CAPTURE_END(stream, pGraph, REAL_OR(cuStreamEndCapture_ptsz, (stream, pGraph), MISSING_drv));
}

static CUresult hook_cuStreamWaitEvent(CUstream stream, CUevent event, unsigned int flags)
{
    STREAM_WAIT(drv, stream, REAL_OR(cuStreamWaitEvent, (stream, event, flags), MISSING_drv));
}

static CUresult hook_cuStreamWaitEvent_ptsz(CUstream stream, CUevent event, unsigned int flags)
{
    STREAM_WAIT(drv, stream, REAL_OR(cuStreamWaitEvent_ptsz, (stream, event, flags), MISSING_drv));
}

static CUresult hook_cuGraphInstantiateWithFlags(CUgraphExec *pExec, CUgraph graph,
                                                 unsigned long long flags)
{
    GRAPH_MADE(graph_instantiated, pExec, graph,
               REAL_OR(cuGraphInstantiateWithFlags, (pExec, graph, flags), MISSING_drv));
}

static CUresult hook_cuGraphInstantiateWithParams(CUgraphExec *pExec, CUgraph graph,
                                                  CUDA_GRAPH_INSTANTIATE_PARAMS *params)
{
    GRAPH_MADE(graph_instantiated, pExec, graph,
               REAL_OR(cuGraphInstantiateWithParams, (pExec, graph, params), MISSING_drv));
}

static CUresult hook_cuGraphInstantiateWithParams_ptsz(CUgraphExec *pExec, CUgraph graph,
                                                       CUDA_GRAPH_INSTANTIATE_PARAMS *params)
{
    GRAPH_MADE(graph_instantiated, pExec, graph,
               REAL_OR(cuGraphInstantiateWithParams_ptsz, (pExec, graph, params), MISSING_drv));
}

static CUresult hook_cuGraphClone(CUgraph *pClone, CUgraph original)
{
    GRAPH_MADE(graph_cloned, pClone, original, REAL_OR(cuGraphClone, (pClone, original), MISSING_drv));
}

static CUresult hook_cuGraphDestroy(CUgraph graph)
{
    GRAPH_GONE(graph_destroyed, graph, REAL_OR(cuGraphDestroy, (graph), MISSING_drv));
}

static CUresult hook_cuGraphExecDestroy(CUgraphExec exec)
{
    GRAPH_GONE(graph_exec_destroyed, exec, REAL_OR(cuGraphExecDestroy, (exec), MISSING_drv));
}

/* ---- the exported wrappers --------------------------------------------------------- */

#define HOOK_WRAPPER(lib, ret, name, by, since, params, args)                                \
    LMS_HOOK_EXPORT ret name params                                                          \
    {                                                                                        \
        if (enabled())                                                                       \
            return hook_##by args;                                                           \
        return REAL_OR(name, args, MISSING_##lib);                                           \
    }
LMS_HOOKS(HOOK_WRAPPER)
#undef HOOK_WRAPPER

/* Copies, memsets and collectives: what they touch made resident
 * (access.h), then CUDA's or NCCL's call; a call whose memory cannot be
 * made resident does not go on. */
#define ACCESS_WRAPPER(lib, ret, name, by, since, params, args)                              \
    LMS_HOOK_EXPORT ret name params                                                          \
    {                                                                                        \
        if (!enabled() || inside)                                                            \
            return REAL_OR(name, args, MISSING_##lib);                                       \
        lms_status_t st = said(access_##by args);                                            \
        if (st != LMS_OK)                                                                    \
            return lib##_error(st);                                                          \
        inside++;                                                                            \
        ret r = REAL_OR(name, args, MISSING_##lib);                                          \
        inside--;                                                                            \
        return r;                                                                            \
    }
LMS_ACCESS_HOOKS(ACCESS_WRAPPER)
#undef ACCESS_WRAPPER
