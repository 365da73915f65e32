/*
 * bench/reference.c — the CUDA allocators lms is compared against:
 * cudaMalloc/cudaFree and cudaMallocAsync/cudaFreeAsync of the CUDA runtime,
 * for benchmarks. See reference.h.
 *
 * Owns, for each open reference: a handle on the CUDA runtime from dlopen
 * (liblms is never linked against libcudart, as it is never linked against
 * libcuda, so it loads where neither is), the runtime's entry points resolved
 * from one list, RUNTIME_FUNCS, one non-blocking stream for the async pairs,
 * and the release threshold the device's default memory pool had before open.
 *
 * The runtime works in the device's primary context, the one the cuda backend
 * retains (Note [Current context] in device/cuda.c), so lms and the reference share
 * a context and a device's memory.
 *
 * Invariants: every field is set by dev_reference_open and never changes.
 * Locks: none. The runtime is thread-safe; a reference is used by one thread
 * at a time, and one reference is open at a time (each restores the pool's
 * threshold it found).
 */
#include "base/base.h"
#include "bench/reference.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Every runtime function the reference calls. Names are taken with dlsym as
 * written here: this file never defines CUDA_API_PER_THREAD_DEFAULT_STREAM,
 * so none of them is renamed to a _ptsz variant. Their signatures have not
 * changed since CUDA 11.2, so a runtime of another major version than the
 * headers' serves them. */
#define RUNTIME_FUNCS(X)                                                                     \
    X(cudaGetErrorName) X(cudaGetErrorString) X(cudaRuntimeGetVersion)                      \
    X(cudaDriverGetVersion) X(cudaSetDevice) X(cudaDeviceGetAttribute)                      \
    X(cudaDeviceGetDefaultMemPool) X(cudaMemPoolGetAttribute) X(cudaMemPoolSetAttribute)    \
    X(cudaMemPoolTrimTo) X(cudaStreamCreateWithFlags) X(cudaStreamSynchronize)              \
    X(cudaStreamDestroy) X(cudaMalloc) X(cudaFree) X(cudaMallocAsync) X(cudaFreeAsync)

typedef struct runtime {
#define RUNTIME_FIELD(fn) __typeof__(fn) *fn;
    RUNTIME_FUNCS(RUNTIME_FIELD)
#undef RUNTIME_FIELD
} runtime_t;

/* The runtimes tried, in order: the newest first. */
static const char *const runtime_libs[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so"};

struct dev_reference {
    runtime_t rt;            /* entry points, resolved at open */
    void *lib;               /* dlopen handle of the runtime */
    int ordinal;             /* the CUDA device, the one lms runs on */
    cudaMemPool_t pool;      /* the device's default memory pool */
    uint64_t old_threshold;  /* its release threshold before open */
    cudaStream_t stream;     /* the async pairs' stream, non-blocking */
};

/* The one way a runtime failure leaves this file: records
 * "reference: <call>: <error name> (<error string>)". */
static lms_status_t fail(const runtime_t *rt, cudaError_t e, const char *call, ...)
    __attribute__((format(printf, 3, 4)));
static lms_status_t fail(const runtime_t *rt, cudaError_t e, const char *call, ...)
{
    char what[192];
    va_list ap;
    va_start(ap, call);
    vsnprintf(what, sizeof what, call, ap);
    va_end(ap);
    return base_fail(e == cudaErrorMemoryAllocation ? LMS_ERR_OUT_OF_MEMORY : LMS_ERR_DEVICE,
                     "reference: %s: %s (%s)", what, rt->cudaGetErrorName(e),
                     rt->cudaGetErrorString(e));
}

/* Resolves RUNTIME_FUNCS from lib. */
static lms_status_t resolve(void *lib, const char *name, runtime_t *rt)
{
#define RUNTIME_SYM(fn)                                                                      \
    do {                                                                                     \
        void *sym = dlsym(lib, #fn);                                                         \
        if (sym == NULL)                                                                     \
            return base_fail(LMS_ERR_UNSUPPORTED, "reference: %s has no %s", name, #fn);     \
        memcpy(&rt->fn, &sym, sizeof sym);                                                   \
    } while (0);
    RUNTIME_FUNCS(RUNTIME_SYM)
#undef RUNTIME_SYM
    return LMS_OK;
}

/* Appends "; " (unless buf is empty) and fmt... to buf, truncating. */
static void append(char *buf, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void append(char *buf, size_t size, const char *fmt, ...)
{
    size_t len = strlen(buf);
    if (len > 0 && len + 2 < size) {
        memcpy(buf + len, "; ", 3);
        len += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + len, size - len, fmt, ap);
    va_end(ap);
}

/* Opens the first runtime of runtime_libs that loads, has every function and
 * is served by the installed driver (a runtime needs a driver of at least its
 * major version). Opened RTLD_NODELETE, as libcuda is (cuda.c): the runtime
 * registers exit handlers and starts threads, which must not outlive its code. */
static lms_status_t load_runtime(dev_reference_t *ref, dev_reference_info_t *info)
{
    char why[512] = "";
    bool loaded = false; /* some runtime loaded, whatever became of it */
    for (size_t i = 0; i < sizeof runtime_libs / sizeof *runtime_libs; i++) {
        const char *name = runtime_libs[i];
        void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
        if (lib == NULL) {
            append(why, sizeof why, "%s", dlerror());
            continue;
        }
        loaded = true;
        int runtime = 0, driver = 0;
        if (resolve(lib, name, &ref->rt) != LMS_OK) {
            append(why, sizeof why, "%s", lms_last_error());
        } else if (ref->rt.cudaRuntimeGetVersion(&runtime) != cudaSuccess ||
                   ref->rt.cudaDriverGetVersion(&driver) != cudaSuccess) {
            append(why, sizeof why, "%s: cannot tell its version or the driver's", name);
        } else if (driver == 0) {
            append(why, sizeof why, "%s: no NVIDIA driver is installed", name);
        } else if (driver / 1000 < runtime / 1000) {
            append(why, sizeof why, "%s: CUDA runtime %d.%d needs a driver for CUDA %d or later, "
                   "and the driver is for CUDA %d.%d", name, runtime / 1000,
                   runtime % 1000 / 10, runtime / 1000, driver / 1000, driver % 1000 / 10);
        } else {
            ref->lib = lib;
            snprintf(info->runtime, sizeof info->runtime, "%s", name);
            info->runtime_version = runtime;
            return LMS_OK;
        }
        dlclose(lib);
    }
    return base_fail(LMS_ERR_UNSUPPORTED, "reference: no usable CUDA runtime (%s)%s", why,
                     loaded ? "" : "; put the directory of libcudart.so.13 or .12 "
                                   "(e.g. /usr/local/cuda/lib64) on LD_LIBRARY_PATH");
}

lms_status_t dev_reference_open(dev_device_t *dev, dev_reference_t **out,
                                dev_reference_info_t *info)
{
    lms_status_t status;
    cudaError_t e;
    if (dev == NULL || out == NULL || info == NULL)
        return base_fail(LMS_ERR_INVALID, "dev_reference_open: NULL argument");
    if (strcmp(dev->info.backend, "cuda") != 0)
        return base_fail(LMS_ERR_UNSUPPORTED,
                         "reference: the %s backend has no CUDA allocators to compare with",
                         dev->info.backend);
    dev_reference_t *ref = base_meta_calloc(1, sizeof *ref);
    if (ref == NULL)
        return base_fail(LMS_ERR_OUT_OF_MEMORY, "reference: no host memory");
    ref->ordinal = dev->info.ordinal;
    dev_reference_info_t found = {0};
    status = load_runtime(ref, &found);
    if (status != LMS_OK)
        goto fail_free;
    const runtime_t *rt = &ref->rt;

    if ((e = rt->cudaSetDevice(ref->ordinal)) != cudaSuccess) {
        status = fail(rt, e, "cudaSetDevice(%d)", ref->ordinal);
        goto fail_close;
    }
    int pools = 0;
    if ((e = rt->cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported,
                                        ref->ordinal)) != cudaSuccess) {
        status = fail(rt, e, "cudaDeviceGetAttribute(MemoryPoolsSupported, %d)", ref->ordinal);
        goto fail_close;
    }
    if (!pools) {
        status = base_fail(LMS_ERR_UNSUPPORTED,
                           "reference: device %d has no memory pools (cudaMallocAsync)",
                           ref->ordinal);
        goto fail_close;
    }
    if ((e = rt->cudaDeviceGetDefaultMemPool(&ref->pool, ref->ordinal)) != cudaSuccess) {
        status = fail(rt, e, "cudaDeviceGetDefaultMemPool(%d)", ref->ordinal);
        goto fail_close;
    }
    if ((e = rt->cudaMemPoolGetAttribute(ref->pool, cudaMemPoolAttrReleaseThreshold,
                                         &ref->old_threshold)) != cudaSuccess) {
        status = fail(rt, e, "cudaMemPoolGetAttribute(default pool of %d, ReleaseThreshold)",
                      ref->ordinal);
        goto fail_close;
    }
    uint64_t keep_all = UINT64_MAX;
    if ((e = rt->cudaMemPoolSetAttribute(ref->pool, cudaMemPoolAttrReleaseThreshold,
                                         &keep_all)) != cudaSuccess) {
        status = fail(rt, e, "cudaMemPoolSetAttribute(default pool of %d, ReleaseThreshold, max)",
                      ref->ordinal);
        goto fail_close;
    }
    if ((e = rt->cudaStreamCreateWithFlags(&ref->stream, cudaStreamNonBlocking)) != cudaSuccess) {
        status = fail(rt, e, "cudaStreamCreateWithFlags(non-blocking) on device %d",
                      ref->ordinal);
        goto fail_restore;
    }
    *info = found;
    *out = ref;
    return LMS_OK;

fail_restore:
    rt->cudaMemPoolSetAttribute(ref->pool, cudaMemPoolAttrReleaseThreshold, &ref->old_threshold);
fail_close:
    dlclose(ref->lib);
fail_free:
    base_meta_free(ref);
    return status;
}

lms_status_t dev_reference_pairs(dev_reference_t *ref, dev_reference_alloc_t which, size_t size,
                                 int pairs)
{
    const runtime_t *rt = &ref->rt;
    cudaError_t e = rt->cudaSetDevice(ref->ordinal);
    if (e != cudaSuccess)
        return fail(rt, e, "cudaSetDevice(%d)", ref->ordinal);
    for (int i = 0; i < pairs; i++) {
        void *p = NULL;
        if (which == DEV_REFERENCE_MALLOC) {
            if ((e = rt->cudaMalloc(&p, size)) != cudaSuccess)
                return fail(rt, e, "cudaMalloc(%zu bytes)", size);
            if ((e = rt->cudaFree(p)) != cudaSuccess)
                return fail(rt, e, "cudaFree(%p)", p);
        } else {
            if ((e = rt->cudaMallocAsync(&p, size, ref->stream)) != cudaSuccess)
                return fail(rt, e, "cudaMallocAsync(%zu bytes)", size);
            if ((e = rt->cudaFreeAsync(p, ref->stream)) != cudaSuccess)
                return fail(rt, e, "cudaFreeAsync(%p)", p);
        }
    }
    return LMS_OK;
}

lms_status_t dev_reference_synchronize(dev_reference_t *ref)
{
    cudaError_t e = ref->rt.cudaStreamSynchronize(ref->stream);
    if (e != cudaSuccess)
        return fail(&ref->rt, e, "cudaStreamSynchronize(reference stream of device %d)",
                    ref->ordinal);
    return LMS_OK;
}

/* For close, which cannot fail: logs e unless it is cudaSuccess. */
static void log_close_error(const dev_reference_t *ref, cudaError_t e, const char *call)
{
    if (e != cudaSuccess)
        base_log(BASE_LOG_WARN, "reference: closing on device %d: %s: %s (%s)", ref->ordinal,
                 call, ref->rt.cudaGetErrorName(e), ref->rt.cudaGetErrorString(e));
}

void dev_reference_close(dev_reference_t *ref)
{
    if (ref == NULL)
        return;
    const runtime_t *rt = &ref->rt;
    log_close_error(ref, rt->cudaSetDevice(ref->ordinal), "cudaSetDevice");
    log_close_error(ref, rt->cudaStreamSynchronize(ref->stream), "cudaStreamSynchronize");
    log_close_error(ref, rt->cudaStreamDestroy(ref->stream), "cudaStreamDestroy");
    log_close_error(ref,
                    rt->cudaMemPoolSetAttribute(ref->pool, cudaMemPoolAttrReleaseThreshold,
                                                &ref->old_threshold),
                    "cudaMemPoolSetAttribute(ReleaseThreshold, as it was)");
    /* What the pool kept beyond its old threshold goes back to the OS now. */
    log_close_error(ref, rt->cudaMemPoolTrimTo(ref->pool, (size_t)ref->old_threshold),
                    "cudaMemPoolTrimTo");
    dlclose(ref->lib);
    base_meta_free(ref);
}
