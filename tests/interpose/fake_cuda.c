/*
 * tests/interpose/fake_cuda.c — see fake_cuda.h. Defines the CUDA entry
 * points the launch hooks pass launches on to, and those they ask for
 * layouts; nothing else of CUDA.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "fake_cuda.h"

#define API __attribute__((visibility("default")))
#define MAX_EXPECT 64
#define MAX_STUBS 16

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct { const char *base; size_t bytes; uint64_t seed; } expect[MAX_EXPECT];
static size_t nexpect;
static struct { const void *stub; const fake_fn_t *fn; } stubs[MAX_STUBS];
static size_t nstubs;
static fake_counts_t counts;

API void fake_expect(const void *base, size_t bytes, uint64_t seed)
{
    pthread_mutex_lock(&lock);
    if (nexpect < MAX_EXPECT)
        expect[nexpect++] = (typeof(expect[0])){base, bytes, seed};
    pthread_mutex_unlock(&lock);
}

API void fake_bind_stub(const void *stub, const fake_fn_t *fn)
{
    pthread_mutex_lock(&lock);
    if (nstubs < MAX_STUBS)
        stubs[nstubs++] = (typeof(stubs[0])){stub, fn};
    pthread_mutex_unlock(&lock);
}

API fake_counts_t fake_counts(void)
{
    pthread_mutex_lock(&lock);
    fake_counts_t c = counts;
    pthread_mutex_unlock(&lock);
    return c;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Whether word j of the range holds its pattern within 10 s. */
static int holds(const char *base, size_t j, uint64_t seed)
{
    const volatile uint64_t *w = (const volatile uint64_t *)(const void *)(base + 8 * j);
    for (double end = now_s() + 10; now_s() < end;)
        if (*w == fake_word(seed, j))
            return 1;
    return 0;
}

static void run_word(uint64_t v)
{
    for (size_t e = 0; e < nexpect; e++) {
        if (v < (uintptr_t)expect[e].base || v - (uintptr_t)expect[e].base >= expect[e].bytes)
            continue;
        size_t words = expect[e].bytes / 8;
        int ok = holds(expect[e].base, 0, expect[e].seed) &&
                 holds(expect[e].base, words / 2, expect[e].seed) &&
                 holds(expect[e].base, words - 1, expect[e].seed);
        counts.checked += ok;
        counts.wrong += !ok;
    }
}

static void run_bytes(const unsigned char *p, size_t at, size_t size)
{
    for (size_t o = (at + 7) & ~(size_t)7; o + 8 <= at + size; o += 8) {
        uint64_t v;
        memcpy(&v, p + (o - at), 8);
        run_word(v);
    }
}

/* "Runs" fn: see fake_cuda.h. */
static void run(const fake_fn_t *fn, void *stream, void **params, void **extra)
{
    pthread_mutex_lock(&lock);
    counts.launches++;
    counts.last_stream = stream;
    if (params != NULL) {
        for (size_t i = 0; i < fn->n; i++)
            run_bytes(params[i], fn->offset[i], fn->size[i]);
    } else if (extra != NULL && extra[0] == CU_LAUNCH_PARAM_BUFFER_POINTER &&
               extra[2] == CU_LAUNCH_PARAM_BUFFER_SIZE) {
        run_bytes(extra[1], 0, *(size_t *)extra[3]);
    }
    pthread_mutex_unlock(&lock);
}

static CUresult param_info(const fake_fn_t *fn, int kernel, size_t i, size_t *offset, size_t *size)
{
    pthread_mutex_lock(&lock);
    counts.param_queries++;
    pthread_mutex_unlock(&lock);
    if (fn == NULL || fn->kernel != kernel)
        return CUDA_ERROR_INVALID_HANDLE;
    if (i >= fn->n)
        return CUDA_ERROR_INVALID_VALUE;
    *offset = fn->offset[i];
    *size = fn->size[i];
    return CUDA_SUCCESS;
}

API CUresult cuFuncGetParamInfo(CUfunction func, size_t i, size_t *offset, size_t *size)
{
    return param_info((const fake_fn_t *)func, 0, i, offset, size);
}

API CUresult cuKernelGetParamInfo(CUkernel kernel, size_t i, size_t *offset, size_t *size)
{
    return param_info((const fake_fn_t *)kernel, FAKE_KERNEL, i, offset, size);
}

API cudaError_t cudaGetFuncBySymbol(cudaFunction_t *out, const void *stub)
{
    pthread_mutex_lock(&lock);
    cudaError_t r = cudaErrorInvalidDeviceFunction;
    for (size_t i = 0; i < nstubs; i++)
        if (stubs[i].stub == stub) {
            *out = (cudaFunction_t)(uintptr_t)stubs[i].fn;
            r = cudaSuccess;
        }
    pthread_mutex_unlock(&lock);
    return r;
}

static const fake_fn_t *of_stub(const void *stub)
{
    cudaFunction_t f;
    return cudaGetFuncBySymbol(&f, stub) == cudaSuccess ? (const fake_fn_t *)(void *)f : NULL;
}

API CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                            unsigned by, unsigned bz, unsigned shared, CUstream stream,
                            void **params, void **extra)
{
    (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)shared;
    run((const fake_fn_t *)f, stream, params, extra);
    return CUDA_SUCCESS;
}

API CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **params,
                              void **extra)
{
    run((const fake_fn_t *)f, config->hStream, params, extra);
    return CUDA_SUCCESS;
}

API cudaError_t cudaLaunchKernel(const void *func, dim3 grid, dim3 block, void **args,
                                 size_t shared, cudaStream_t stream)
{
    (void)grid, (void)block, (void)shared;
    const fake_fn_t *fn = of_stub(func);
    if (fn == NULL)
        return cudaErrorInvalidDeviceFunction;
    run(fn, stream, args, NULL);
    return cudaSuccess;
}

API cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t *config, const void *func,
                                    void **args)
{
    const fake_fn_t *fn = of_stub(func);
    if (fn == NULL)
        return cudaErrorInvalidDeviceFunction;
    run(fn, config->stream, args, NULL);
    return cudaSuccess;
}

API CUresult cuStreamDestroy_v2(CUstream stream)
{
    (void)stream;
    pthread_mutex_lock(&lock);
    counts.stream_destroys++;
    pthread_mutex_unlock(&lock);
    return CUDA_SUCCESS;
}

/* Lookups by name: the stand-in's own functions, and two that only have to
 * exist (cuMemAlloc, cuCtxSynchronize); anything else is not found. */
static void stand_in(void) {}

static void *by_name(const char *symbol)
{
    if (strcmp(symbol, "cuLaunchKernel") == 0)
        return (void *)cuLaunchKernel;
    if (strcmp(symbol, "cuLaunchKernelEx") == 0)
        return (void *)cuLaunchKernelEx;
    if (strcmp(symbol, "cuMemAlloc") == 0 || strcmp(symbol, "cuCtxSynchronize") == 0)
        return (void *)stand_in;
    return NULL;
}

API CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                                 CUdriverProcAddressQueryResult *status)
{
    (void)version, (void)flags;
    *pfn = by_name(symbol);
    if (status != NULL)
        *status = *pfn != NULL ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return *pfn != NULL ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

#undef cuGetProcAddress
API CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
    return cuGetProcAddress_v2(symbol, pfn, version, flags, NULL);
}

API cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **pfn, unsigned version,
                                                 unsigned long long flags,
                                                 enum cudaDriverEntryPointQueryResult *status)
{
    (void)version, (void)flags;
    *pfn = by_name(symbol);
    if (status != NULL)
        *status = *pfn != NULL ? cudaDriverEntryPointSuccess : cudaDriverEntryPointSymbolNotFound;
    return cudaSuccess;
}
