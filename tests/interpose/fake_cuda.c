/*
 * tests/interpose/fake_cuda.c — see fake_cuda.h. Defines the CUDA entry
 * points the hooks pass launches, copies and memsets on to, those they ask
 * for layouts, and NCCL's collectives; nothing else of CUDA.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include "lms.h"
#include "interpose/nccl_abi.h"
#include "fake_cuda.h"

#define API __attribute__((visibility("default")))
#define MAX_EXPECT 64
#define MAX_STUBS 16

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct { const char *base; size_t bytes; uint64_t seed; } expect[MAX_EXPECT];
static size_t nexpect;
static struct { const void *stub; const fake_fn_t *fn; int hidden; } stubs[MAX_STUBS];
static size_t nstubs;
static fake_counts_t counts;

API void fake_expect(const void *base, size_t bytes, uint64_t seed)
{
    pthread_mutex_lock(&lock);
    size_t i = 0;
    while (i < nexpect && expect[i].base != base) /* memory allocated again: its new pattern */
        i++;
    if (i < MAX_EXPECT)
        expect[i] = (typeof(expect[0])){base, bytes, seed};
    nexpect += i == nexpect && i < MAX_EXPECT;
    pthread_mutex_unlock(&lock);
}

static void bind(const void *stub, const fake_fn_t *fn, int hidden)
{
    pthread_mutex_lock(&lock);
    if (nstubs < MAX_STUBS)
        stubs[nstubs++] = (typeof(stubs[0])){stub, fn, hidden};
    pthread_mutex_unlock(&lock);
}

API void fake_bind_stub(const void *stub, const fake_fn_t *fn) { bind(stub, fn, 0); }

API void fake_bind_stub_hidden(const void *stub, const fake_fn_t *fn) { bind(stub, fn, 1); }

/* The function bound to stub (hidden ones too: the runtime knows them), or NULL. */
static const fake_fn_t *bound(const void *stub, int with_hidden)
{
    const fake_fn_t *fn = NULL;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < nstubs; i++)
        if (stubs[i].stub == stub && (with_hidden || !stubs[i].hidden))
            fn = stubs[i].fn;
    pthread_mutex_unlock(&lock);
    return fn;
}

/* Whether h is a stub's address, not a handle: the driver refuses it. */
static int is_stub(const void *h)
{
    pthread_mutex_lock(&lock);
    int found = 0;
    for (size_t i = 0; i < nstubs; i++)
        found |= stubs[i].stub == h;
    pthread_mutex_unlock(&lock);
    return found;
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
    /* tensor maps: a TMA load reads the tensor each descriptor names */
    for (size_t o = (at + 63) & ~(size_t)63; o + 128 <= at + size; o += 64) {
        uint64_t w[2];
        memcpy(w, p + (o - at), sizeof w);
        if (w[0] != FAKE_TENSOR_MAP_MAGIC)
            continue;
        counts.tensor_maps++;
        run_word(w[1] ^ FAKE_TENSOR_MAP_KEY);
    }
}

/* ---- graphs: one capture at a time, of kernelParams launches ---- */

#define MAX_CAPTURED 16
typedef struct fake_graph {
    size_t n;
    struct { const fake_fn_t *fn; unsigned char bytes[FAKE_MAX_PARAMS][64]; } k[MAX_CAPTURED];
} fake_graph_t;

#define MAX_JOINED 4
static void *capturing;        /* the stream the capture began on, NULL: none */
static void *joined[MAX_JOINED];        /* streams that joined it through an event */
static void *capture_events[MAX_JOINED]; /* events recorded on the capture's streams */
static size_t njoined, nevents;
static uint64_t capture_id;
static fake_graph_t *captured; /* what it recorded */
static __thread CUstreamCaptureMode thread_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

/* Whether stream is in the capture (lock held). */
static int in_capture(void *stream)
{
    if (capturing == NULL)
        return 0;
    if (stream == capturing)
        return 1;
    for (size_t i = 0; i < njoined; i++)
        if (joined[i] == stream)
            return 1;
    return 0;
}

/* Records a launch on a stream being captured (lock held); false if the
 * stream is not being captured. */
static int record(const fake_fn_t *fn, void *stream, void **params)
{
    if (!in_capture(stream) || params == NULL || captured->n == MAX_CAPTURED)
        return 0;
    size_t k = captured->n++;
    captured->k[k].fn = fn;
    for (size_t i = 0; i < fn->n; i++)
        memcpy(captured->k[k].bytes[i], params[i], fn->size[i] < 64 ? fn->size[i] : 64);
    counts.captured++;
    return 1;
}

/* "Runs" fn: see fake_cuda.h. */
static void run(const fake_fn_t *fn, void *stream, void **params, void **extra)
{
    pthread_mutex_lock(&lock);
    if (record(fn, stream, params)) {
        pthread_mutex_unlock(&lock);
        return;
    }
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
    /* a handle of another type (a stub's address, a CUkernel asked as a
     * CUfunction or the other way round): "no parameters", the one error
     * cuda.h documents besides success */
    if (fn == NULL || is_stub(fn) || (fn->flags & FAKE_KERNEL) != kernel)
        return CUDA_ERROR_INVALID_VALUE;
    if (fn->flags & FAKE_NO_LAYOUT)
        return CUDA_ERROR_NOT_SUPPORTED;
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

static CUresult get_name(const char **name, const fake_fn_t *fn)
{
    if (fn == NULL || is_stub(fn))
        return CUDA_ERROR_INVALID_HANDLE;
    *name = fn->name != NULL ? fn->name : "fake_fn";
    return CUDA_SUCCESS;
}

API CUresult cuFuncGetName(const char **name, CUfunction func)
{
    return get_name(name, (const fake_fn_t *)func);
}

API CUresult cuKernelGetName(const char **name, CUkernel kernel)
{
    return get_name(name, (const fake_fn_t *)kernel);
}

/* A CUkernel's CUfunction: a copy of it that is not FAKE_KERNEL, made once. */
API CUresult cuKernelGetFunction(CUfunction *out, CUkernel kernel)
{
    static struct { const fake_fn_t *kernel; fake_fn_t fn; } made[MAX_STUBS];
    static size_t nmade;
    const fake_fn_t *k = (const fake_fn_t *)kernel;
    if (k == NULL || is_stub(k) || !(k->flags & FAKE_KERNEL))
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&lock);
    size_t i = 0;
    while (i < nmade && made[i].kernel != k)
        i++;
    if (i == nmade && nmade < MAX_STUBS) {
        made[i].kernel = k;
        made[i].fn = *k;
        made[i].fn.flags &= ~FAKE_KERNEL;
        nmade++;
    }
    pthread_mutex_unlock(&lock);
    if (i == MAX_STUBS)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *out = (CUfunction)(void *)&made[i].fn;
    return CUDA_SUCCESS;
}

/* The runtime's last error, per thread, as libcudart keeps it: a runtime
 * call that fails records its error, cudaGetLastError returns it and
 * resets it, cudaPeekAtLastError returns it. A framework checks it after
 * each launch (PyTorch's C10_CUDA_KERNEL_LAUNCH_CHECK): an error lms's hook
 * left there fails a launch that ran. */
static __thread cudaError_t last_error;

API cudaError_t cudaGetLastError(void)
{
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}

API cudaError_t cudaPeekAtLastError(void) { return last_error; }

API cudaError_t cudaGetFuncBySymbol(cudaFunction_t *out, const void *stub)
{
    const fake_fn_t *fn = bound(stub, 0);
    if (fn == NULL)
        return last_error = cudaErrorInvalidDeviceFunction;
    *out = (cudaFunction_t)(uintptr_t)fn;
    return cudaSuccess;
}

static const fake_fn_t *of_stub(const void *stub) { return bound(stub, 1); }

static CUresult launch_kernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                              unsigned by, unsigned bz, unsigned shared, CUstream stream,
                              void **params, void **extra)
{
    (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)shared;
    run((const fake_fn_t *)f, stream, params, extra);
    return CUDA_SUCCESS;
}

API CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                            unsigned by, unsigned bz, unsigned shared, CUstream stream,
                            void **params, void **extra)
{
    return launch_kernel(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra);
}

API fake_launch_fn fake_launch_kernel(void) { return launch_kernel; }

API CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **params,
                              void **extra)
{
    run((const fake_fn_t *)f, config->hStream, params, extra);
    return CUDA_SUCCESS;
}

/* The runtime's launch: with FAKE_VIA_DRIVER, through the driver's
 * cuLaunchKernel, looked up by name (lms's answer under the preload), as
 * CUDA's runtime makes it; else here, as a runtime whose driver calls lms
 * does not see would. */
static cudaError_t runtime_launch(const void *func, void **args, cudaStream_t stream)
{
    const fake_fn_t *fn = of_stub(func);
    if (fn == NULL)
        return cudaErrorInvalidDeviceFunction;
    if (!(fn->flags & FAKE_VIA_DRIVER)) {
        run(fn, stream, args, NULL);
        return cudaSuccess;
    }
    PFN_cuLaunchKernel_v4000 launch = NULL;
    if (cuGetProcAddress_v2("cuLaunchKernel", (void **)&launch, 12000, 0, NULL) != CUDA_SUCCESS)
        return cudaErrorUnknown;
    CUresult r = launch((CUfunction)(uintptr_t)fn, 1, 1, 1, 1, 1, 1, 0, (CUstream)stream, args, NULL);
    return r == CUDA_SUCCESS ? cudaSuccess : r == CUDA_ERROR_OUT_OF_MEMORY ? cudaErrorMemoryAllocation
                                                                           : cudaErrorUnknown;
}

API cudaError_t cudaLaunchKernel(const void *func, dim3 grid, dim3 block, void **args,
                                 size_t shared, cudaStream_t stream)
{
    (void)grid, (void)block, (void)shared;
    return runtime_launch(func, args, stream);
}

static void count(uint64_t *c)
{
    pthread_mutex_lock(&lock);
    ++*c;
    pthread_mutex_unlock(&lock);
}

/* The twins below call these, not each other: a call between the stand-in's
 * exported functions would reach liblms.so's hook of it under the preload. */
static cudaError_t cooperative(const void *func, void **args, cudaStream_t stream)
{
    count(&counts.cooperative);
    return runtime_launch(func, args, stream);
}

API cudaError_t cudaLaunchCooperativeKernel(const void *func, dim3 grid, dim3 block, void **args,
                                            size_t shared, cudaStream_t stream)
{
    (void)grid, (void)block, (void)shared;
    return cooperative(func, args, stream);
}

API cudaError_t cudaLaunchCooperativeKernel_ptsz(const void *func, dim3 grid, dim3 block,
                                                 void **args, size_t shared, cudaStream_t stream)
{
    (void)grid, (void)block, (void)shared;
    return cooperative(func, args, stream);
}

API CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                       unsigned bx, unsigned by, unsigned bz, unsigned shared,
                                       CUstream stream, void **params)
{
    count(&counts.cooperative);
    return launch_kernel(f, gx, gy, gz, bx, by, bz, shared, stream, params, NULL);
}

API CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                            unsigned bx, unsigned by, unsigned bz, unsigned shared,
                                            CUstream stream, void **params)
{
    count(&counts.cooperative);
    return launch_kernel(f, gx, gy, gz, bx, by, bz, shared, stream, params, NULL);
}

/* The deprecated doors: parameters set before with cuParamSet* (none here) */
API CUresult cuLaunch(CUfunction f)
{
    run((const fake_fn_t *)f, NULL, NULL, NULL);
    return CUDA_SUCCESS;
}

API CUresult cuLaunchGrid(CUfunction f, int w, int h)
{
    (void)w, (void)h;
    run((const fake_fn_t *)f, NULL, NULL, NULL);
    return CUDA_SUCCESS;
}

API CUresult cuLaunchGridAsync(CUfunction f, int w, int h, CUstream stream)
{
    (void)w, (void)h;
    run((const fake_fn_t *)f, stream, NULL, NULL);
    return CUDA_SUCCESS;
}

API CUresult cuLaunchCooperativeKernelMultiDevice(CUDA_LAUNCH_PARAMS *list, unsigned n,
                                                  unsigned flags)
{
    (void)flags;
    for (unsigned i = 0; i < n; i++)
        run((const fake_fn_t *)list[i].function, list[i].hStream, list[i].kernelParams, NULL);
    return CUDA_SUCCESS;
}

/* Unloads: the functions of a module go (the probes' live as long as the process). */
API CUresult cuModuleUnload(CUmodule hmod)
{
    (void)hmod;
    return CUDA_SUCCESS;
}

/* nvcc 13's <<<>>>: a cudaKernel_t, which is a CUkernel. */
static cudaError_t kernel_launch(cudaKernel_t kernel, void **args, cudaStream_t stream)
{
    count(&counts.kernel_launches);
    run((const fake_fn_t *)(const void *)kernel, stream, args, NULL);
    return cudaSuccess;
}

API cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 grid, dim3 block, void **args,
                                   size_t shared, cudaStream_t stream)
{
    (void)grid, (void)block, (void)shared;
    return kernel_launch(kernel, args, stream);
}

API cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 grid, dim3 block, void **args,
                                        size_t shared, cudaStream_t stream)
{
    (void)grid, (void)block, (void)shared;
    return kernel_launch(kernel, args, stream);
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

/* Lookups by name: the stand-in's own functions, in the version CUDA would
 * give (the _v2 and per-thread twins it defines), and two that only have
 * to exist (cuMemAlloc, cuCtxSynchronize); anything else is not found. */
static void stand_in(void) {}

/* glibc's dlsym: liblms.so's would answer its wrappers (Note [dlsym] in
 * interpose/dlsym.c), and CUDA answers its own functions. */
static void *own_dlsym(void *handle, const char *name)
{
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD), *f = NULL;
    if (libc != NULL && (f = dlvsym(libc, "dlsym", "GLIBC_2.34")) == NULL)
        f = dlvsym(libc, "dlsym", "GLIBC_2.2.5");
    if (libc != NULL)
        dlclose(libc);
    void *(*real)(void *, const char *) = (__typeof__(real))f;
    void *found = real != NULL ? real(handle, name) : NULL;
    /* the stand-in's own, not a dependency's (liblms.so's, which it links) */
    Dl_info d, self;
    if (found != NULL && (dladdr(found, &d) == 0 || dladdr((void *)own_dlsym, &self) == 0 ||
                          d.dli_fbase != self.dli_fbase))
        found = NULL;
    return found;
}

static void *by_name(const char *symbol, uint64_t flags)
{
    if (strcmp(symbol, "cuMemAlloc") == 0 || strcmp(symbol, "cuCtxSynchronize") == 0)
        return (void *)stand_in;
    void *self = dlopen("libfake_cuda.so", RTLD_NOW | RTLD_NOLOAD);
    /* a function with no per-thread twin is itself for the per-thread stream */
    static const char *const pt[] = {"_v2_ptds", "_v2_ptsz", "_ptds", "_ptsz", "_v2", ""};
    static const char *const plain[] = {"_v2", ""};
    const char *const *suffix = flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM ? pt : plain;
    size_t n = suffix == pt ? 6 : 2;
    void *f = NULL;
    char name[128];
    for (size_t k = 0; k < n && f == NULL && self != NULL; k++) {
        snprintf(name, sizeof name, "%s%s", symbol, suffix[k]);
        f = own_dlsym(self, name);
    }
    if (self != NULL)
        dlclose(self);
    return f;
}

API CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                                 CUdriverProcAddressQueryResult *status)
{
    (void)version;
    *pfn = by_name(symbol, flags);
    if (status != NULL)
        *status = *pfn != NULL ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return *pfn != NULL ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

#undef cuGetProcAddress
API CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
    return cuGetProcAddress_v2(symbol, pfn, version, flags, NULL);
}

/* The stand-in's runtime says it is CUDA 12.9's, whose lookups give the
 * 12.8 forms of the batched copies. */
API cudaError_t cudaRuntimeGetVersion(int *version)
{
    *version = 12090;
    return cudaSuccess;
}

/* The runtime's lookups; the per-thread default stream's (_ptsz) take
 * cudaEnableDefault for it. */
static cudaError_t entry_point(const char *symbol, void **pfn, unsigned long long flags,
                               enum cudaDriverEntryPointQueryResult *status)
{
    *pfn = by_name(symbol, flags);
    if (status != NULL)
        *status = *pfn != NULL ? cudaDriverEntryPointSuccess : cudaDriverEntryPointSymbolNotFound;
    return cudaSuccess;
}

#define PER_THREAD(flags) ((flags) == cudaEnableDefault ? cudaEnablePerThreadDefaultStream : (flags))

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
API cudaError_t cudaGetDriverEntryPoint(const char *symbol, void **pfn, unsigned long long flags,
                                        enum cudaDriverEntryPointQueryResult *status)
{
    return entry_point(symbol, pfn, flags, status);
}
#pragma GCC diagnostic pop

API cudaError_t cudaGetDriverEntryPoint_ptsz(const char *symbol, void **pfn,
                                             unsigned long long flags,
                                             enum cudaDriverEntryPointQueryResult *status)
{
    return entry_point(symbol, pfn, PER_THREAD(flags), status);
}

API cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **pfn, unsigned version,
                                                 unsigned long long flags,
                                                 enum cudaDriverEntryPointQueryResult *status)
{
    (void)version;
    return entry_point(symbol, pfn, flags, status);
}

API cudaError_t cudaGetDriverEntryPointByVersion_ptsz(const char *symbol, void **pfn,
                                                      unsigned version, unsigned long long flags,
                                                      enum cudaDriverEntryPointQueryResult *status)
{
    (void)version;
    return entry_point(symbol, pfn, PER_THREAD(flags), status);
}

/* ---- tensor maps (fake_cuda.h) ---------------------------------------------------- */

static void write_map(CUtensorMap *map, const void *address)
{
    uint64_t w[16] = {FAKE_TENSOR_MAP_MAGIC, (uint64_t)(uintptr_t)address ^ FAKE_TENSOR_MAP_KEY};
    memcpy(map, w, sizeof w);
}

API CUresult cuTensorMapEncodeTiled(CUtensorMap *map, CUtensorMapDataType type, cuuint32_t rank,
                                    void *address, const cuuint64_t *dim, const cuuint64_t *strides,
                                    const cuuint32_t *box, const cuuint32_t *elementStrides,
                                    CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
                                    CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob)
{
    (void)type, (void)rank, (void)dim, (void)strides, (void)box, (void)elementStrides;
    (void)interleave, (void)swizzle, (void)l2, (void)oob;
    write_map(map, address);
    return CUDA_SUCCESS;
}

API CUresult cuTensorMapReplaceAddress(CUtensorMap *map, void *address)
{
    uint64_t magic;
    memcpy(&magic, map, sizeof magic);
    if (magic != FAKE_TENSOR_MAP_MAGIC)
        return CUDA_ERROR_INVALID_VALUE;
    write_map(map, address);
    return CUDA_SUCCESS;
}

/* ---- copies and memsets ------------------------------------------------------------ */

static bool no_settling; /* fake_settle_off was called (atomic) */

API void fake_settle_off(void) { __atomic_store_n(&no_settling, true, __ATOMIC_RELAXED); }

/* What `stream` was given before this call has been done: the lms stream
 * adopted for it has finished (the fetches it waits for). */
static void settle(void *stream)
{
    lms_stream_t s;
    if (!__atomic_load_n(&no_settling, __ATOMIC_RELAXED) && lms_stream_adopt(stream, &s) == LMS_OK)
        (void)lms_stream_synchronize(s);
}

static void copied(void)
{
    pthread_mutex_lock(&lock);
    counts.copies++;
    pthread_mutex_unlock(&lock);
}

static void copy2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                   size_t height, void *stream)
{
    settle(stream);
    for (size_t y = 0; y < height; y++)
        memmove((char *)dst + y * dpitch, (const char *)src + y * spitch, width);
    copied();
}

static void set2d(void *dst, size_t pitch, const void *value, size_t size, size_t width,
                  size_t height, void *stream)
{
    settle(stream);
    for (size_t y = 0; y < height; y++)
        for (size_t x = 0; x < width; x++)
            memcpy((char *)dst + y * pitch + x * size, value, size);
    copied();
}

#define D(p) ((void *)(uintptr_t)(p))

API cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
    (void)kind;
    copy2d(dst, count, src, count, count, 1, NULL);
    return cudaSuccess;
}

API cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                                cudaStream_t stream)
{
    (void)kind;
    copy2d(dst, count, src, count, count, 1, stream);
    return cudaSuccess;
}

API cudaError_t cudaMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch,
                             size_t width, size_t height, enum cudaMemcpyKind kind)
{
    (void)kind;
    copy2d(dst, dpitch, src, spitch, width, height, NULL);
    return cudaSuccess;
}

API cudaError_t cudaMemset(void *ptr, int value, size_t count)
{
    unsigned char v = (unsigned char)value;
    set2d(ptr, count, &v, 1, count, 1, NULL);
    return cudaSuccess;
}

API cudaError_t cudaMemsetAsync(void *ptr, int value, size_t count, cudaStream_t stream)
{
    unsigned char v = (unsigned char)value;
    set2d(ptr, count, &v, 1, count, 1, stream);
    return cudaSuccess;
}

API CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n)
{
    copy2d(D(dst), n, src, n, n, 1, NULL);
    return CUDA_SUCCESS;
}

API CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dst, const void *src, size_t n)
{
    return cuMemcpyHtoD_v2(dst, src, n);
}

API CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream stream)
{
    copy2d(D(dst), n, D(src), n, n, 1, stream);
    return CUDA_SUCCESS;
}

static CUresult copy3d(const CUDA_MEMCPY3D *c)
{
    settle(NULL);
    char *src = c->srcMemoryType == CU_MEMORYTYPE_HOST ? (char *)(uintptr_t)c->srcHost : D(c->srcDevice);
    char *dst = c->dstMemoryType == CU_MEMORYTYPE_HOST ? (char *)c->dstHost : D(c->dstDevice);
    for (size_t z = 0; z < c->Depth; z++)
        for (size_t y = 0; y < c->Height; y++)
            memmove(dst + ((c->dstZ + z) * c->dstHeight + c->dstY + y) * c->dstPitch + c->dstXInBytes,
                    src + ((c->srcZ + z) * c->srcHeight + c->srcY + y) * c->srcPitch + c->srcXInBytes,
                    c->WidthInBytes);
    copied();
    return CUDA_SUCCESS;
}

API CUresult cuMemcpy3D_v2(const CUDA_MEMCPY3D *c) { return copy3d(c); }

/* Host or device memory on both sides, one device. */
API CUresult cuMemcpy3DPeer(const CUDA_MEMCPY3D_PEER *p)
{
    CUDA_MEMCPY3D c = {
        .srcXInBytes = p->srcXInBytes, .srcY = p->srcY, .srcZ = p->srcZ,
        .srcMemoryType = p->srcMemoryType, .srcHost = p->srcHost, .srcDevice = p->srcDevice,
        .srcPitch = p->srcPitch, .srcHeight = p->srcHeight,
        .dstXInBytes = p->dstXInBytes, .dstY = p->dstY, .dstZ = p->dstZ,
        .dstMemoryType = p->dstMemoryType, .dstHost = p->dstHost, .dstDevice = p->dstDevice,
        .dstPitch = p->dstPitch, .dstHeight = p->dstHeight,
        .WidthInBytes = p->WidthInBytes, .Height = p->Height, .Depth = p->Depth};
    return copy3d(&c);
}

API CUresult cuMemsetD32_v2(CUdeviceptr dst, unsigned int v, size_t n)
{
    set2d(D(dst), 4 * n, &v, 4, n, 1, NULL);
    return CUDA_SUCCESS;
}

API CUresult cuMemsetD2D8Async(CUdeviceptr dst, size_t pitch, unsigned char v, size_t width,
                               size_t height, CUstream stream)
{
    set2d(D(dst), pitch, &v, 1, width, height, stream);
    return CUDA_SUCCESS;
}

/* ---- CUDA arrays (host bytes: fake_cuda.h) and peer copies --------------------------- */

API cudaError_t cudaMemcpy2DToArray(cudaArray_t dst, size_t wOffset, size_t hOffset,
                                    const void *src, size_t spitch, size_t width, size_t height,
                                    enum cudaMemcpyKind kind)
{
    (void)kind;
    copy2d((char *)dst + hOffset * FAKE_ARRAY_PITCH + wOffset, FAKE_ARRAY_PITCH, src, spitch, width,
           height, NULL);
    return cudaSuccess;
}

API cudaError_t cudaMemcpy2DFromArray(void *dst, size_t dpitch, cudaArray_const_t src,
                                      size_t wOffset, size_t hOffset, size_t width, size_t height,
                                      enum cudaMemcpyKind kind)
{
    (void)kind;
    copy2d(dst, dpitch, (const char *)src + hOffset * FAKE_ARRAY_PITCH + wOffset,
           FAKE_ARRAY_PITCH, width, height, NULL);
    return cudaSuccess;
}

API CUresult cuMemcpyDtoA_v2(CUarray dst, size_t offset, CUdeviceptr src, size_t n)
{
    copy2d((char *)dst + offset, n, D(src), n, n, 1, NULL);
    return CUDA_SUCCESS;
}

API CUresult cuMemcpyAtoD_v2(CUdeviceptr dst, CUarray src, size_t offset, size_t n)
{
    copy2d(D(dst), n, (char *)src + offset, n, n, 1, NULL);
    return CUDA_SUCCESS;
}

/* Pointers on both sides, one device. */
API cudaError_t cudaMemcpy3DPeer(const struct cudaMemcpy3DPeerParms *p)
{
    settle(NULL);
    for (size_t z = 0; z < p->extent.depth; z++)
        for (size_t y = 0; y < p->extent.height; y++)
            memmove((char *)p->dstPtr.ptr +
                        ((p->dstPos.z + z) * p->dstPtr.ysize + p->dstPos.y + y) * p->dstPtr.pitch +
                        p->dstPos.x,
                    (const char *)p->srcPtr.ptr +
                        ((p->srcPos.z + z) * p->srcPtr.ysize + p->srcPos.y + y) * p->srcPtr.pitch +
                        p->srcPos.x,
                    p->extent.width);
    copied();
    return cudaSuccess;
}

/* ---- batched copies ---------------------------------------------------------------- */

/* CUDA 12.8's forms, beside 13's (cuda.h's names are macros for those) */
#undef cuMemcpyBatchAsync
#undef cuMemcpy3DBatchAsync

static int valid_order(CUmemcpySrcAccessOrder o)
{
    return o >= CU_MEMCPY_SRC_ACCESS_ORDER_STREAM && o <= CU_MEMCPY_SRC_ACCESS_ORDER_ANY;
}

/* CUDA refuses batches on the legacy stream, which NULL names outside the
 * per-thread forms. */
static int legacy(CUstream stream, int per_thread)
{
    return stream == CU_STREAM_LEGACY || (stream == NULL && !per_thread);
}

/* Copies whose source may be read out of stream order are made first, at
 * once, before what the stream was given is done (lms's fetches among it),
 * as a copy engine may; then the others, after it. A batch CUDA would
 * refuse does nothing. */
static CUresult batch(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
                      CUmemcpyAttributes *attrs, size_t *idxs, size_t nattrs, CUstream stream,
                      int per_thread)
{
    if (count == 0 || nattrs == 0 || nattrs > count || idxs[0] != 0 || legacy(stream, per_thread))
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t k = 0; k < nattrs; k++)
        if ((k > 0 && (idxs[k] <= idxs[k - 1] || idxs[k] >= count)) ||
            !valid_order(attrs[k].srcAccessOrder))
            return CUDA_ERROR_INVALID_VALUE;
    for (int in_order = 0; in_order < 2; in_order++) {
        if (in_order)
            settle(stream);
        for (size_t i = 0, k = 0; i < count; i++) {
            while (k + 1 < nattrs && idxs[k + 1] <= i)
                k++;
            if ((attrs[k].srcAccessOrder == CU_MEMCPY_SRC_ACCESS_ORDER_STREAM) != in_order)
                continue;
            memmove(D(dsts[i]), D(srcs[i]), sizes[i]);
            copied();
        }
    }
    return CUDA_SUCCESS;
}

API CUresult cuMemcpyBatchAsync_v2(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes,
                                   size_t count, CUmemcpyAttributes *attrs, size_t *idxs,
                                   size_t nattrs, CUstream stream)
{
    return batch(dsts, srcs, sizes, count, attrs, idxs, nattrs, stream, 0);
}

API CUresult cuMemcpyBatchAsync_v2_ptsz(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes,
                                        size_t count, CUmemcpyAttributes *attrs, size_t *idxs,
                                        size_t nattrs, CUstream stream)
{
    return batch(dsts, srcs, sizes, count, attrs, idxs, nattrs, stream, 1);
}

API CUresult cuMemcpyBatchAsync(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
                                CUmemcpyAttributes *attrs, size_t *idxs, size_t nattrs,
                                size_t *fail, CUstream stream)
{
    CUresult r = batch(dsts, srcs, sizes, count, attrs, idxs, nattrs, stream, 0);
    if (r != CUDA_SUCCESS && fail != NULL)
        *fail = SIZE_MAX;
    return r;
}

/* A pointer operand CUDA takes for extent e. */
static int valid_operand(const CUmemcpy3DOperand *o, const CUextent3D *e)
{
    return o->type == CU_MEMCPY_OPERAND_TYPE_POINTER &&
           (o->op.ptr.rowLength == 0 || o->op.ptr.rowLength >= e->width) &&
           (o->op.ptr.layerHeight == 0 || o->op.ptr.layerHeight >= e->height);
}

static void copy_op(const CUDA_MEMCPY3D_BATCH_OP *o)
{
    const CUextent3D *e = &o->extent;
    size_t srow = o->src.op.ptr.rowLength ? o->src.op.ptr.rowLength : e->width;
    size_t slayer = o->src.op.ptr.layerHeight ? o->src.op.ptr.layerHeight : e->height;
    size_t drow = o->dst.op.ptr.rowLength ? o->dst.op.ptr.rowLength : e->width;
    size_t dlayer = o->dst.op.ptr.layerHeight ? o->dst.op.ptr.layerHeight : e->height;
    for (size_t z = 0; z < e->depth; z++)
        for (size_t y = 0; y < e->height; y++)
            memmove((char *)D(o->dst.op.ptr.ptr) + (z * dlayer + y) * drow,
                    (const char *)D(o->src.op.ptr.ptr) + (z * slayer + y) * srow, e->width);
    copied();
}

/* Pointer operands only; in the order of batch(). */
API CUresult cuMemcpy3DBatchAsync_v2(size_t n, CUDA_MEMCPY3D_BATCH_OP *ops,
                                     unsigned long long flags, CUstream stream)
{
    if (n == 0 || flags != 0 || legacy(stream, 0))
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < n; i++) {
        const CUextent3D *e = &ops[i].extent;
        if (!valid_order(ops[i].srcAccessOrder) || e->width == 0 || e->height == 0 ||
            e->depth == 0 || !valid_operand(&ops[i].src, e) || !valid_operand(&ops[i].dst, e))
            return CUDA_ERROR_INVALID_VALUE;
    }
    for (int in_order = 0; in_order < 2; in_order++) {
        if (in_order)
            settle(stream);
        for (size_t i = 0; i < n; i++)
            if ((ops[i].srcAccessOrder == CU_MEMCPY_SRC_ACCESS_ORDER_STREAM) == in_order)
                copy_op(&ops[i]);
    }
    return CUDA_SUCCESS;
}

/* The runtime's, CUDA 13's form: through the driver's, looked up by name
 * (lms's answer), as the runtime makes it. */
API cudaError_t cudaMemcpyBatchAsync(void *const *dsts, const void *const *srcs,
                                     const size_t *sizes, size_t count,
                                     struct cudaMemcpyAttributes *attrs, size_t *idxs,
                                     size_t nattrs, cudaStream_t stream)
{
    PFN_cuMemcpyBatchAsync_v13000 fn = NULL;
    if (cuGetProcAddress_v2("cuMemcpyBatchAsync", (void **)&fn, 13000, 0, NULL) != CUDA_SUCCESS)
        return cudaErrorUnknown;
    CUresult r = fn((CUdeviceptr *)(uintptr_t)dsts, (CUdeviceptr *)(uintptr_t)srcs,
                    (size_t *)(uintptr_t)sizes, count, (CUmemcpyAttributes *)attrs, idxs, nattrs,
                    (CUstream)stream);
    return r == CUDA_SUCCESS ? cudaSuccess : r == CUDA_ERROR_INVALID_VALUE ? cudaErrorInvalidValue
                                                                           : cudaErrorUnknown;
}

/* ---- NCCL -------------------------------------------------------------------------- */

typedef struct op {
    int recv;   /* 0: send buffer to mailbox (or an all-reduce, all-gather); 1: receive */
    const void *send;
    void *dst;
    size_t bytes, times; /* dst gets `times` copies of bytes (all-gather: one per rank) */
    void *stream;
} op_t;

#define MAX_OPS 64
static __thread op_t queued[MAX_OPS];
static __thread size_t nqueued;
static __thread int depth;
static struct { void *data; size_t bytes; } mailbox[MAX_OPS];
static size_t mail_head, mail_tail;

/* The probes use 32-bit integers and floats (2, 7) and bytes. */
static size_t type_size(ncclDataType_t t) { return t == 2 || t == 7 ? 4 : 1; }

static void run_op(const op_t *o)
{
    settle(o->stream);
    if (!o->recv && o->dst != NULL) {
        for (size_t r = 0; r < o->times; r++)
            memmove((char *)o->dst + r * o->bytes, o->send, o->bytes);
    } else if (!o->recv) {
        void *copy = malloc(o->bytes);
        memcpy(copy, o->send, o->bytes);
        mailbox[mail_tail++ % MAX_OPS] = (typeof(mailbox[0])){copy, o->bytes};
    } else if (mail_head < mail_tail) {
        typeof(mailbox[0]) m = mailbox[mail_head++ % MAX_OPS];
        memcpy(o->dst, m.data, m.bytes < o->bytes ? m.bytes : o->bytes);
        free(m.data);
    }
    pthread_mutex_lock(&lock);
    counts.collectives++;
    pthread_mutex_unlock(&lock);
}

static ncclResult_t submit(op_t o)
{
    if (depth == 0) {
        run_op(&o);
        return ncclSuccess;
    }
    if (nqueued == MAX_OPS)
        return ncclInvalidUsage;
    queued[nqueued++] = o;
    return ncclSuccess;
}

API ncclResult_t ncclCommCount(const ncclComm_t comm, int *count)
{
    *count = *(const int *)(const void *)comm;
    return ncclSuccess;
}

/* One rank's sum is its own data. */
API ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t t,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
    (void)op, (void)comm;
    return submit((op_t){0, send, recv, count * type_size(t), 1, stream});
}

/* Every rank sent what this one did. */
API ncclResult_t ncclAllGather(const void *send, void *recv, size_t count, ncclDataType_t t,
                               ncclComm_t comm, cudaStream_t stream)
{
    int n;
    ncclCommCount(comm, &n);
    return submit((op_t){0, send, recv, count * type_size(t), (size_t)n, stream});
}

API ncclResult_t ncclSend(const void *send, size_t count, ncclDataType_t t, int peer,
                          ncclComm_t comm, cudaStream_t stream)
{
    (void)peer, (void)comm;
    return submit((op_t){0, send, NULL, count * type_size(t), 1, stream});
}

API ncclResult_t ncclRecv(void *recv, size_t count, ncclDataType_t t, int peer, ncclComm_t comm,
                          cudaStream_t stream)
{
    (void)peer, (void)comm;
    return submit((op_t){1, NULL, recv, count * type_size(t), 1, stream});
}

API ncclResult_t ncclGroupStart(void)
{
    depth++;
    return ncclSuccess;
}

API ncclResult_t ncclGroupEnd(void)
{
    if (depth == 0)
        return ncclInvalidUsage;
    if (--depth > 0)
        return ncclSuccess;
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < nqueued; i++)
            if (queued[i].recv == pass)
                run_op(&queued[i]);
    nqueued = 0;
    return ncclSuccess;
}

/* ---- graphs (driver; the runtime's go through the driver's, as CUDA's do) ---- */

API CUresult cuStreamBeginCapture_v2(CUstream stream, CUstreamCaptureMode mode)
{
    (void)mode;
    pthread_mutex_lock(&lock);
    CUresult r = CUDA_ERROR_ILLEGAL_STATE;
    if (capturing == NULL && (captured = calloc(1, sizeof *captured)) != NULL) {
        capturing = stream;
        capture_id++;
        counts.captures++;
        r = CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&lock);
    return r;
}

API CUresult cuStreamEndCapture(CUstream stream, CUgraph *graph)
{
    pthread_mutex_lock(&lock);
    CUresult r = CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
    if (capturing != NULL && capturing == stream) {
        *graph = (CUgraph)captured;
        capturing = NULL;
        captured = NULL;
        njoined = nevents = 0;
        r = CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&lock);
    return r;
}

API CUresult cuStreamGetCaptureInfo_v3(CUstream stream, CUstreamCaptureStatus *status,
                                       cuuint64_t *id, CUgraph *graph, const CUgraphNode **deps,
                                       const CUgraphEdgeData **data, size_t *n)
{
    pthread_mutex_lock(&lock);
    counts.capture_queries++;
    int on = in_capture(stream);
    *status = on ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
    if (id != NULL)
        *id = on ? capture_id : 0;
    if (graph != NULL)
        *graph = on ? (CUgraph)captured : NULL;
    if (deps != NULL)
        *deps = NULL;
    if (data != NULL)
        *data = NULL;
    if (n != NULL)
        *n = 0;
    pthread_mutex_unlock(&lock);
    return CUDA_SUCCESS;
}

API CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode)
{
    CUstreamCaptureMode old = thread_mode;
    thread_mode = *mode;
    *mode = old;
    if (thread_mode == CU_STREAM_CAPTURE_MODE_RELAXED && old != thread_mode) {
        pthread_mutex_lock(&lock);
        counts.relaxed++;
        pthread_mutex_unlock(&lock);
    }
    return CUDA_SUCCESS;
}

/* An event recorded on a stream being captured is the capture's; a stream
 * that waits for it joins the capture. Events need no creating. */
API CUresult cuEventRecord(CUevent event, CUstream stream)
{
    pthread_mutex_lock(&lock);
    size_t i = 0;
    while (i < nevents && capture_events[i] != event)
        i++;
    if (i < nevents)
        capture_events[i] = capture_events[--nevents]; /* recorded again */
    if (in_capture(stream) && nevents < MAX_JOINED)
        capture_events[nevents++] = event;
    pthread_mutex_unlock(&lock);
    return CUDA_SUCCESS;
}

API CUresult cuStreamWaitEvent(CUstream stream, CUevent event, unsigned int flags)
{
    (void)flags;
    pthread_mutex_lock(&lock);
    CUresult r = CUDA_SUCCESS;
    for (size_t i = 0; i < nevents; i++)
        if (capture_events[i] == event && !in_capture(stream)) {
            if (njoined == MAX_JOINED || stream == NULL)
                r = CUDA_ERROR_STREAM_CAPTURE_ISOLATION; /* the legacy stream cannot join */
            else {
                joined[njoined++] = stream;
                counts.joins++;
            }
        }
    pthread_mutex_unlock(&lock);
    return r;
}

API int fake_thread_mode_is_global(void) { return thread_mode == CU_STREAM_CAPTURE_MODE_GLOBAL; }

/* An executable graph is a copy of the graph. */
API CUresult cuGraphInstantiateWithFlags(CUgraphExec *exec, CUgraph graph, unsigned long long flags)
{
    (void)flags;
    fake_graph_t *e = malloc(sizeof *e);
    if (e == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    memcpy(e, graph, sizeof *e);
    *exec = (CUgraphExec)e;
    return CUDA_SUCCESS;
}

API CUresult cuGraphLaunch(CUgraphExec exec, CUstream stream)
{
    const fake_graph_t *e = (const fake_graph_t *)exec;
    for (size_t k = 0; k < e->n; k++) {
        void *params[FAKE_MAX_PARAMS];
        for (size_t i = 0; i < e->k[k].fn->n; i++)
            params[i] = (void *)e->k[k].bytes[i];
        run(e->k[k].fn, stream, params, NULL);
    }
    return CUDA_SUCCESS;
}

API CUresult cuGraphDestroy(CUgraph graph)
{
    free(graph);
    return CUDA_SUCCESS;
}

API CUresult cuGraphExecDestroy(CUgraphExec exec)
{
    free(exec);
    return CUDA_SUCCESS;
}

static cudaError_t rt(CUresult r) { return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorUnknown; }

API cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode)
{
    return rt(cuStreamBeginCapture_v2((CUstream)stream, (CUstreamCaptureMode)mode));
}

API cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *graph)
{
    return rt(cuStreamEndCapture((CUstream)stream, (CUgraph *)graph));
}

API cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
    return rt(cuEventRecord((CUevent)event, (CUstream)stream));
}

API cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags)
{
    return rt(cuStreamWaitEvent((CUstream)stream, (CUevent)event, flags));
}

API cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph, unsigned long long flags)
{
    return rt(cuGraphInstantiateWithFlags((CUgraphExec *)exec, (CUgraph)graph, flags));
}

API cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream)
{
    return rt(cuGraphLaunch((CUgraphExec)exec, (CUstream)stream));
}

API cudaError_t cudaGraphDestroy(cudaGraph_t graph) { return rt(cuGraphDestroy((CUgraph)graph)); }

API cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec)
{
    return rt(cuGraphExecDestroy((CUgraphExec)exec));
}
