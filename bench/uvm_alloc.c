/*
 * bench/uvm_alloc — unified memory under PyTorch: the peer a user would pick
 * instead of lms (issue 26). A CUDAPluggableAllocator whose every tensor is
 * a cuMemAllocManaged allocation, which the driver migrates between host and
 * device by itself, faulting pages in as kernels touch them and evicting
 * others when the device is full. Built to build/bench/libuvm_alloc.so where
 * the CUDA toolkit is, linked against libcuda (only ever loaded into a
 * process that runs CUDA). bench/gpt2.py --allocator uvm|uvm_prefetch loads
 * it before PyTorch initializes CUDA:
 *
 *   torch.cuda.memory.change_current_allocator(torch.cuda.memory.CUDAPluggableAllocator(
 *       "build/bench/libuvm_alloc.so", "uvm_malloc", "uvm_free"))
 *
 * Entry points, with PyTorch's signatures (a cudaStream_t is a CUstream):
 *   uvm_malloc(size, device, stream)           managed memory; pages placed
 *                                              where they are first touched
 *   uvm_malloc_prefetch(size, device, stream)  the same, then a
 *                                              cuMemPrefetchAsync of all of it
 *                                              to the device on stream (the
 *                                              only hint an allocator can give)
 *   uvm_free(ptr, size, device, stream)        cuMemFree
 *   uvm_reserve(bytes, device)                 plain device memory, held for
 *                                              the process's life (Note [A
 *                                              device limit for UVM])
 *
 * No caching: each tensor is one driver allocation and each free one
 * cuMemFree, as each tensor is one lms allocation in gpt2.py's lms rows
 * (PYTORCH_NO_CUDA_MEMORY_CACHING=1). cuMemFree waits for the device, where
 * lms's free is stream-ordered; that is the peer as a user gets it.
 *
 * Errors. PyTorch's pluggable allocator does not check the pointer it is
 * given (torch/csrc/cuda/CUDAPluggableAllocator.cpp: malloc records and
 * returns it as it is), so a NULL would become a tensor at address 0 and
 * the first kernel that touches it an illegal address, far from the cause.
 * A failed driver call therefore prints the call and the driver's error on
 * stderr ("bench/uvm_alloc: error: ...", with "out of memory" where it is
 * one) and aborts. A size of 0 gives NULL, as PyTorch's own allocator does
 * for an empty tensor, and freeing NULL does nothing.
 *
 * State: each device's primary context, retained at its first call and
 * kept; set once under `lock`, read without it (acquire).
 */
#include <cuda.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#if CUDA_VERSION < 12020
#error "bench/uvm_alloc needs CUDA 12.2 headers or later (cuMemPrefetchAsync_v2)"
#endif

#define MAX_DEVICES 64

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(CUcontext) primary[MAX_DEVICES];

/* "out of memory" beside the driver's words for the errors that are one,
 * so that gpt2.py's log names it as PyTorch's own allocator would. */
static void fail(CUresult r, const char *call, size_t bytes, int device)
{
    const char *name = "?", *text = "?";
    cuGetErrorName(r, &name);
    cuGetErrorString(r, &text);
    fprintf(stderr, "bench/uvm_alloc: error: %s(%zu bytes) on device %d: %s (%s)%s\n", call,
            bytes, device, name, text, r == CUDA_ERROR_OUT_OF_MEMORY ? ": out of memory" : "");
    abort();
}

/* Retains device's primary context into *ctx; *call names what failed. */
static CUresult retain(int device, CUcontext *ctx, const char **call)
{
    CUdevice dev;
    CUresult r;
    if ((r = cuInit(0)) != CUDA_SUCCESS) {
        *call = "cuInit";
    } else if ((r = cuDeviceGet(&dev, device)) != CUDA_SUCCESS) {
        *call = "cuDeviceGet";
    } else if ((r = cuDevicePrimaryCtxRetain(ctx, dev)) != CUDA_SUCCESS) {
        *call = "cuDevicePrimaryCtxRetain";
    }
    return r;
}

/* Makes device's primary context current on this thread (popped by
 * leave()). The runtime binds a thread to it lazily, and PyTorch calls the
 * allocator from threads of its own (autograd's), so it may not be yet. */
static void enter(int device, size_t bytes)
{
    if (device < 0 || device >= MAX_DEVICES) {
        fprintf(stderr, "bench/uvm_alloc: error: device %d: not 0..%d\n", device,
                MAX_DEVICES - 1);
        abort();
    }
    CUcontext ctx = atomic_load_explicit(&primary[device], memory_order_acquire);
    if (ctx == NULL) {
        pthread_mutex_lock(&lock);
        ctx = atomic_load_explicit(&primary[device], memory_order_relaxed);
        const char *call = NULL;
        CUresult r = ctx == NULL ? retain(device, &ctx, &call) : CUDA_SUCCESS;
        if (r == CUDA_SUCCESS)
            atomic_store_explicit(&primary[device], ctx, memory_order_release);
        pthread_mutex_unlock(&lock);
        if (r != CUDA_SUCCESS)
            fail(r, call, bytes, device);
    }
    CUresult r = cuCtxPushCurrent(ctx);
    if (r != CUDA_SUCCESS)
        fail(r, "cuCtxPushCurrent", bytes, device);
}

static void leave(int device, size_t bytes)
{
    CUcontext popped;
    CUresult r = cuCtxPopCurrent(&popped);
    if (r != CUDA_SUCCESS)
        fail(r, "cuCtxPopCurrent", bytes, device);
}

static void *managed(size_t size, int device, CUstream stream, int prefetch)
{
    if (size == 0)
        return NULL;
    enter(device, size);
    CUdeviceptr p;
    CUresult r = cuMemAllocManaged(&p, size, CU_MEM_ATTACH_GLOBAL);
    if (r != CUDA_SUCCESS)
        fail(r, "cuMemAllocManaged", size, device);
    if (prefetch) {
        CUmemLocation to = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = device};
        if ((r = cuMemPrefetchAsync_v2(p, size, to, 0, stream)) != CUDA_SUCCESS)
            fail(r, "cuMemPrefetchAsync", size, device);
    }
    leave(device, size);
    return (void *)(uintptr_t)p;
}

void *uvm_malloc(size_t size, int device, CUstream stream)
{
    return managed(size, device, stream, 0);
}

void *uvm_malloc_prefetch(size_t size, int device, CUstream stream)
{
    return managed(size, device, stream, 1);
}

void uvm_free(void *ptr, size_t size, int device, CUstream stream)
{
    (void)stream; /* cuMemFree waits for the device: no stream order to keep */
    if (ptr == NULL)
        return;
    enter(device, size);
    CUresult r = cuMemFree((CUdeviceptr)(uintptr_t)ptr);
    if (r != CUDA_SUCCESS)
        fail(r, "cuMemFree", size, device);
    leave(device, size);
}

/*
 * Note [A device limit for UVM]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * gpt2.py runs lms at a ratio X as LMS_DEVICE_LIMIT = F / X, F the model's
 * footprint. Unified memory has no limit to set: it oversubscribes whatever
 * device memory is free. So the UVM rows take the rest away: once PyTorch
 * and cuBLAS are up, gpt2.py asks how much is free and reserves all but
 * F / X of it here, as plain device memory, which the driver never evicts
 * to make room for managed pages. Managed memory then has F / X of the
 * device, as lms had. Device memory taken later outside this allocator (a
 * cuBLAS handle made on autograd's thread) comes out of that share, as
 * cudaMallocs outside the tensors come out of lms's under the preload.
 */
void *uvm_reserve(size_t bytes, int device)
{
    if (bytes == 0)
        return NULL;
    enter(device, bytes);
    CUdeviceptr p;
    CUresult r = cuMemAlloc(&p, bytes);
    if (r != CUDA_SUCCESS)
        fail(r, "cuMemAlloc", bytes, device);
    leave(device, bytes);
    return (void *)(uintptr_t)p;
}
