/*
 * device/kernels/cuda.c — the kernels on the cuda backend: the CUDA kernels
 * of kernels.cu, loaded from the fatbin the build embeds, enqueued by the
 * launch op (device.h), which has made the device's primary context current
 * and times them for an observer.
 *
 * Owns, for each device of the cuda backend (a kcuda_t, its dev->kernels):
 *   - the driver's entry points it calls, resolved from one list,
 *     KERNEL_DRIVER_FUNCS (Note [Resolving the driver] in
 *     device/cuda_driver.c), and a handle on libcuda;
 *   - one reference on the device's primary context;
 *   - the kernels' module and the checksum ring (Note [Checksum ring]),
 *     made when the device opens (Note [Kernels load at open]).
 *
 * Invariants: every field is set by kernels_cuda_open and never changes but
 * the ring's slots; a slot is busy from the checksum that claims it to the
 * host function that delivers its result.
 *
 * Locks: none. Slots are claimed and freed with atomics; the rest is
 * read-only after open and the driver is thread-safe.
 */
#include "device/kernels/cuda.h"

#include <cudaTypedefs.h> /* PFN_* prototypes, for the static assertion below */
#include <dlfcn.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "device/cuda_driver.h"

/*
 * Note [Kernels load at open]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * Host functions run one at a time, on one driver thread, and may be held
 * back by the caller (tests gate a stream with one that waits for a flag).
 * Meanwhile no other host function runs, and loading a module waits too: on
 * an H100 (driver 580), test_lms hung when its first kernel, which loaded the
 * module, came behind such a gate, and passed once the module was loaded
 * before the first host function is queued. So kernels_cuda_open loads it:
 * the kernels table's open, which dev_open calls before it returns (Note
 * [Kernels table] in device/device.c), when no host function can have been
 * queued on the device yet. A failure to load does not fail the open: every
 * launch reports it.
 */

/*
 * Note [Checksum ring]
 * ~~~~~~~~~~~~~~~~~~~~
 * checksum must deliver 8 bytes into *out, which may be pageable host memory,
 * without blocking the host when it is enqueued. A D2H copy into pageable
 * memory may block, and a host function must not call the driver, so each
 * checksum claims a slot k of a ring and enqueues on its stream:
 *   1. cuMemsetD8Async: device word k = 0;
 *   2. the checksum kernel, which atomically adds into device word k;
 *   3. cuMemcpyDtoHAsync: device word k -> pinned host word k;
 *   4. cuLaunchHostFunc(deliver): *out = pinned word k, then frees slot k.
 * The device words (cuMemAlloc) and pinned words (cuMemAllocHost) are
 * allocated once, when the kernels are loaded. The launch op times the four
 * steps as one piece of work.
 *
 * Limit: at most RING_SLOTS checksums per device may be in flight (claimed and
 * not yet delivered). One more fails with LMS_ERR_UNSUPPORTED and enqueues
 * nothing; synchronizing a stream that carries checksums frees their slots.
 * If enqueuing fails after step 1, work already queued may still write slot
 * k, so the slot is never freed (it stays busy; the driver failing there
 * means the context is usually lost anyway). If the context fails, the driver
 * does not run host functions, so *out is not written and the slot stays busy.
 */
#define RING_SLOTS 4096

#define KERNEL_THREADS 256 /* a multiple of the warp size: the checksum reduces per warp */
#define BLOCKS_PER_SM 8

/* What cuda.h should #define and does not (Note [Resolving the driver]). */
#if CUDA_VERSION >= 13000
#define cuCtxSynchronize cuCtxSynchronize_v2
_Static_assert(__builtin_types_compatible_p(__typeof__(cuCtxSynchronize) *,
                                           PFN_cuCtxSynchronize_v13000),
               "cuCtxSynchronize at CUDA 13.0 takes the context");
#define CTX_SYNCHRONIZE(k) (k)->drv.cuCtxSynchronize((k)->ctx)
#else
#define CTX_SYNCHRONIZE(k) (k)->drv.cuCtxSynchronize()
#endif

/* Every driver function the kernels call, by base name. */
#define KERNEL_DRIVER_FUNCS(X)                                                               \
    X(cuDeviceGet) X(cuDeviceGetAttribute) X(cuDevicePrimaryCtxRetain)                      \
    X(cuDevicePrimaryCtxRelease) X(cuCtxPushCurrent) X(cuCtxPopCurrent) X(cuCtxSynchronize) \
    X(cuModuleLoadData) X(cuModuleUnload) X(cuModuleGetFunction) X(cuLaunchKernel)          \
    X(cuMemAlloc) X(cuMemFree) X(cuMemAllocHost) X(cuMemFreeHost) X(cuMemsetD8Async)        \
    X(cuMemcpyDtoHAsync) X(cuLaunchHostFunc)

typedef struct kernel_driver {
#define KERNEL_DRIVER_FIELD(fn) __typeof__(fn) *fn;
    KERNEL_DRIVER_FUNCS(KERNEL_DRIVER_FIELD)
#undef KERNEL_DRIVER_FIELD
} kernel_driver_t;

static const dev_cuda_sym_t driver_syms[] = {
#define KERNEL_DRIVER_SYM(fn) {#fn, offsetof(kernel_driver_t, fn)},
    KERNEL_DRIVER_FUNCS(KERNEL_DRIVER_SYM)
#undef KERNEL_DRIVER_SYM
};

typedef struct ring_slot {
    atomic_bool busy;     /* claimed by a checksum that has not delivered yet */
    uint64_t *out;        /* where deliver() stores the result */
    const uint64_t *word; /* the pinned host word the D2H copy fills */
} ring_slot_t;

typedef struct kcuda {
    int ordinal;
    lms_status_t unusable; /* LMS_OK, or why every launch fails: UNSUPPORTED when */
    char why[256];         /* no kernels are built for the device, else the failure to load */
    kernel_driver_t drv;
    void *libcuda;         /* dlopen handle; NULL until the driver is resolved */
    CUdevice device;
    CUcontext ctx;         /* the device's primary context, retained; NULL if not */
    unsigned max_blocks;   /* grid size cap */
    CUmodule module;
    CUfunction fill_fn, checksum_fn, axpy_fn, indirect_fn;
    CUfunction kernel_fn[DEV_KERNEL_COUNT]; /* the training kernels, by dev_kernel_t */
    CUfunction xent_mean_fn;                /* XENT's second launch */
    ring_slot_t *ring;      /* RING_SLOTS slots, host memory */
    CUdeviceptr ring_dev;   /* RING_SLOTS device words the checksum kernel adds into */
    uint64_t *ring_host;    /* RING_SLOTS pinned host words */
    atomic_uint ring_next;  /* where the next claim starts looking */
} kcuda_t;

/* ---- open and close --------------------------------------------------------- */

/* Frees what load made, in reverse; each field may be unset. The context is
 * current. */
static void unload(kcuda_t *k, bool log)
{
    CUresult r;
    if (k->ring_host != NULL) {
        r = k->drv.cuMemFreeHost(k->ring_host);
        if (log)
            dev_cuda_log_close(k->ordinal, r, "cuMemFreeHost(checksum ring)");
        k->ring_host = NULL;
    }
    if (k->ring_dev != 0) {
        r = k->drv.cuMemFree(k->ring_dev);
        if (log)
            dev_cuda_log_close(k->ordinal, r, "cuMemFree(checksum ring)");
        k->ring_dev = 0;
    }
    base_meta_free(k->ring);
    k->ring = NULL;
    if (k->module != NULL) {
        r = k->drv.cuModuleUnload(k->module);
        if (log)
            dev_cuda_log_close(k->ordinal, r, "cuModuleUnload(test kernels)");
        k->module = NULL;
    }
}

/* Loads the module and makes the checksum ring, the context current. On
 * failure nothing is left. */
static lms_status_t load(kcuda_t *k)
{
    static const struct {
        const char *name;
        size_t offset;
    } kernels[] = {
        {"dev_fill_kernel", offsetof(kcuda_t, fill_fn)},
        {"dev_checksum_kernel", offsetof(kcuda_t, checksum_fn)},
        {"dev_axpy_kernel", offsetof(kcuda_t, axpy_fn)},
        {"dev_indirect_kernel", offsetof(kcuda_t, indirect_fn)},
        {"dev_k_gemm", offsetof(kcuda_t, kernel_fn[DEV_KERNEL_GEMM])},
        {"dev_k_bias_act", offsetof(kcuda_t, kernel_fn[DEV_KERNEL_BIAS_ACT])},
        {"dev_k_relu_back", offsetof(kcuda_t, kernel_fn[DEV_KERNEL_RELU_BACK])},
        {"dev_k_colsum", offsetof(kcuda_t, kernel_fn[DEV_KERNEL_COLSUM])},
        {"dev_k_xent", offsetof(kcuda_t, kernel_fn[DEV_KERNEL_XENT])},
        {"dev_k_adam", offsetof(kcuda_t, kernel_fn[DEV_KERNEL_ADAM])},
        {"dev_k_xent_mean", offsetof(kcuda_t, xent_mean_fn)},
    };
    lms_status_t status;
    /* A fatbin is read in 8-byte units (nvcc and clang align theirs to 8); the
     * build's embedding need not be, so a misaligned one is loaded from a copy.
     * The driver keeps no pointer into the image after loading it. */
    const void *image = dev_cuda_kernels_image;
    void *copy = NULL;
    if ((uintptr_t)image % 16 != 0) {
        copy = base_meta_calloc_aligned((dev_cuda_kernels_image_size + 15) / 16 * 16, 16);
        if (copy == NULL)
            return base_fail(LMS_ERR_OUT_OF_MEMORY,
                             "cuda: no host memory to align the %zu-byte test kernel image",
                             dev_cuda_kernels_image_size);
        memcpy(copy, image, dev_cuda_kernels_image_size);
        image = copy;
    }
    CUresult r = k->drv.cuModuleLoadData(&k->module, image);
    base_meta_free(copy);
    if (r != CUDA_SUCCESS) {
        k->module = NULL;
        return dev_cuda_fail(r, "cuModuleLoadData(test kernels, %zu-byte fatbin, device %d)",
                             dev_cuda_kernels_image_size, k->ordinal);
    }
    for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++) {
        CUfunction *fn = (CUfunction *)((char *)k + kernels[i].offset);
        r = k->drv.cuModuleGetFunction(fn, k->module, kernels[i].name);
        if (r != CUDA_SUCCESS) {
            status = dev_cuda_fail(r, "cuModuleGetFunction(%s)", kernels[i].name);
            goto fail_unload;
        }
    }
    k->ring = base_meta_calloc(RING_SLOTS, sizeof *k->ring);
    if (k->ring == NULL) {
        status = base_fail(LMS_ERR_OUT_OF_MEMORY, "checksum: no host memory for a ring of %d slots",
                           RING_SLOTS);
        goto fail_unload;
    }
    r = k->drv.cuMemAlloc(&k->ring_dev, RING_SLOTS * sizeof(uint64_t));
    if (r != CUDA_SUCCESS) {
        k->ring_dev = 0;
        status = dev_cuda_fail(r, "cuMemAlloc(%zu bytes of checksum ring)",
                               RING_SLOTS * sizeof(uint64_t));
        goto fail_unload;
    }
    void *host = NULL;
    r = k->drv.cuMemAllocHost(&host, RING_SLOTS * sizeof(uint64_t));
    if (r != CUDA_SUCCESS) {
        status = dev_cuda_fail(r, "cuMemAllocHost(%zu bytes of checksum ring)",
                               RING_SLOTS * sizeof(uint64_t));
        goto fail_unload;
    }
    k->ring_host = host;
    for (size_t i = 0; i < RING_SLOTS; i++) {
        atomic_init(&k->ring[i].busy, false);
        k->ring[i].word = &k->ring_host[i];
    }
    atomic_init(&k->ring_next, 0);
    return LMS_OK;

fail_unload:
    unload(k, false);
    return status;
}

/* Reads what the kernels need of the device; false, with k->unusable set,
 * if they cannot run there. */
static bool supported(kcuda_t *k)
{
    if (dev_cuda_kernels_image_size == 0) {
        k->unusable = base_fail(LMS_ERR_UNSUPPORTED,
                                "the kernels library was built without nvcc: the cuda backend "
                                "has no test kernels (fill, checksum, axpy)");
        return false;
    }
    dev_cuda_get_proc_t *get_proc;
    k->unusable = dev_cuda_driver_open(&k->libcuda, &get_proc);
    if (k->unusable != LMS_OK)
        return false;
    k->unusable = dev_cuda_resolve(get_proc, driver_syms, sizeof driver_syms / sizeof driver_syms[0],
                                   &k->drv);
    if (k->unusable != LMS_OK)
        return false;
    int cc_major = 0, cc_minor = 0, sm_count = 0;
    CUresult r = k->drv.cuDeviceGet(&k->device, k->ordinal);
    if (r == CUDA_SUCCESS)
        r = k->drv.cuDeviceGetAttribute(&cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                                        k->device);
    if (r == CUDA_SUCCESS)
        r = k->drv.cuDeviceGetAttribute(&cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                                        k->device);
    if (r == CUDA_SUCCESS)
        r = k->drv.cuDeviceGetAttribute(&sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                                        k->device);
    if (r != CUDA_SUCCESS) {
        k->unusable = dev_cuda_fail(r, "cuDeviceGet/cuDeviceGetAttribute(device %d, compute "
                                       "capability and SM count)", k->ordinal);
        return false;
    }
    if (cc_major < 9) {
        k->unusable = base_fail(LMS_ERR_UNSUPPORTED,
                                "the test kernels are built for sm_90 and later; device %d is "
                                "sm_%d%d", k->ordinal, cc_major, cc_minor);
        return false;
    }
    k->max_blocks = (unsigned)(sm_count > 0 ? sm_count : 1) * BLOCKS_PER_SM;
    return true;
}

/* Retains the primary context and loads the kernels in it: see Note [Kernels
 * load at open]. The calling thread's context is left as it was. */
static lms_status_t load_in_context(kcuda_t *k)
{
    CUresult r = k->drv.cuDevicePrimaryCtxRetain(&k->ctx, k->device);
    if (r != CUDA_SUCCESS) {
        k->ctx = NULL;
        return dev_cuda_fail(r, "cuDevicePrimaryCtxRetain(device %d), for the test kernels",
                             k->ordinal);
    }
    lms_status_t status;
    r = k->drv.cuCtxPushCurrent(k->ctx);
    if (r != CUDA_SUCCESS) {
        status = dev_cuda_fail(r, "cuCtxPushCurrent(primary context of device %d)", k->ordinal);
        goto fail_release;
    }
    status = load(k);
    CUcontext popped;
    (void)k->drv.cuCtxPopCurrent(&popped); /* what was pushed: nothing to report */
    if (status == LMS_OK)
        return LMS_OK;
fail_release:
    (void)k->drv.cuDevicePrimaryCtxRelease(k->device);
    k->ctx = NULL;
    return status;
}

void *kernels_cuda_open(dev_device_t *dev)
{
    kcuda_t *k = base_meta_calloc(1, sizeof *k);
    if (k == NULL)
        return NULL;
    k->ordinal = dev->info.ordinal;
    dev->info.has_kernels = supported(k);
    if (dev->info.has_kernels)
        k->unusable = load_in_context(k);
    if (k->unusable != LMS_OK)
        snprintf(k->why, sizeof k->why, "%s", lms_last_error());
    return k;
}

void kernels_cuda_close(void *state)
{
    kcuda_t *k = state;
    if (k == NULL)
        return;
    if (k->ctx != NULL) {
        CUresult r = k->drv.cuCtxPushCurrent(k->ctx);
        dev_cuda_log_close(k->ordinal, r, "cuCtxPushCurrent(primary context)");
        /* Checksums still queued would write the ring. The caller has waited
         * for its work already (device.h, "Who waits"); this is cheap then. */
        if (r == CUDA_SUCCESS)
            dev_cuda_log_close(k->ordinal, CTX_SYNCHRONIZE(k), "cuCtxSynchronize()");
        unload(k, true);
        CUcontext popped;
        if (r == CUDA_SUCCESS)
            dev_cuda_log_close(k->ordinal, k->drv.cuCtxPopCurrent(&popped), "cuCtxPopCurrent()");
        dev_cuda_log_close(k->ordinal, k->drv.cuDevicePrimaryCtxRelease(k->device),
                           "cuDevicePrimaryCtxRelease");
    }
    if (k->libcuda != NULL)
        dlclose(k->libcuda);
    base_meta_free(k);
}

/* ---- launches ---------------------------------------------------------------- */

/* Enough blocks of KERNEL_THREADS for `items` grid-stride items, at least 1,
 * at most max_blocks. */
static lms_status_t launch(kcuda_t *k, CUfunction fn, const char *name, uint64_t items,
                           CUstream stream, void **args)
{
    uint64_t blocks = items / KERNEL_THREADS + (items % KERNEL_THREADS != 0);
    if (blocks == 0)
        blocks = 1;
    if (blocks > k->max_blocks)
        blocks = k->max_blocks;
    CUresult r = k->drv.cuLaunchKernel(fn, (unsigned)blocks, 1, 1, KERNEL_THREADS, 1, 1, 0, stream,
                                       args, NULL);
    if (r != CUDA_SUCCESS)
        return dev_cuda_fail(r, "cuLaunchKernel(%s, %" PRIu64 " blocks of %d threads, stream %p)",
                             name, blocks, KERNEL_THREADS, (void *)stream);
    return LMS_OK;
}

/* Runs on a driver thread when the checksum's copy has landed: see
 * Note [Checksum ring]. */
static void deliver_checksum(void *arg)
{
    ring_slot_t *slot = arg;
    *slot->out = *slot->word;
    atomic_store_explicit(&slot->busy, false, memory_order_release);
}

/* A free slot, or NULL when RING_SLOTS checksums are in flight. */
static ring_slot_t *claim_slot(kcuda_t *k)
{
    unsigned start = atomic_fetch_add_explicit(&k->ring_next, 1, memory_order_relaxed);
    for (unsigned i = 0; i < RING_SLOTS; i++) {
        ring_slot_t *slot = &k->ring[(start + i) % RING_SLOTS];
        if (!atomic_load_explicit(&slot->busy, memory_order_relaxed) &&
            !atomic_exchange_explicit(&slot->busy, true, memory_order_acquire))
            return slot;
    }
    return NULL;
}

static lms_status_t checksum(kcuda_t *k, CUstream stream, dev_addr_t src, size_t n, uint64_t *out)
{
    ring_slot_t *slot = claim_slot(k);
    if (slot == NULL)
        return base_fail(LMS_ERR_UNSUPPORTED,
                         "checksum: %d checksums are already in flight on device %d, the most the "
                         "cuda backend allows; synchronize their streams first",
                         RING_SLOTS, k->ordinal);
    slot->out = out;
    CUdeviceptr word = k->ring_dev + (CUdeviceptr)(slot - k->ring) * sizeof(uint64_t);
    CUresult r = k->drv.cuMemsetD8Async(word, 0, sizeof(uint64_t), stream);
    if (r != CUDA_SUCCESS) {
        atomic_store_explicit(&slot->busy, false, memory_order_release);
        return dev_cuda_fail(r, "cuMemsetD8Async(checksum word, 8 bytes, stream %p)",
                             (void *)stream);
    }
    /* From here on, work already queued still writes the slot's words: on a
     * failure it stays busy for good (see Note [Checksum ring]). */
    CUdeviceptr src_p = src;
    unsigned long long n_ll = n;
    void *args[] = {&src_p, &n_ll, &word};
    lms_status_t status = launch(k, k->checksum_fn, "dev_checksum_kernel", n / 8 + 1, stream, args);
    if (status != LMS_OK)
        return status;
    r = k->drv.cuMemcpyDtoHAsync((void *)slot->word, word, sizeof(uint64_t), stream);
    if (r != CUDA_SUCCESS)
        return dev_cuda_fail(r, "cuMemcpyDtoHAsync(checksum word, 8 bytes, stream %p)",
                             (void *)stream);
    r = k->drv.cuLaunchHostFunc(stream, deliver_checksum, slot);
    if (r != CUDA_SUCCESS)
        return dev_cuda_fail(r, "cuLaunchHostFunc(stream %p, deliver checksum)", (void *)stream);
    return LMS_OK;
}

/* The training kernels take dev_kernel_args_t by value, as kernels.cu's
 * kargs, whose size it asserts to be this. */
_Static_assert(sizeof(dev_kernel_args_t) == 72, "kernels.cu's kargs restates dev_kernel_args_t");
#define GEMM_TILE 16 /* = kernels.cu's: GEMM runs blocks of GEMM_TILE x GEMM_TILE threads */

static lms_status_t training(kcuda_t *k, CUstream stream, const dev_kernel_args_t *a)
{
    lms_status_t status;
    dev_kernel_args_t copy = *a; /* cuLaunchKernel copies the parameters at the call */
    void *args[] = {&copy};
    const char *name = dev_kernel_name(a->kernel);
    switch (a->kernel) {
    case DEV_KERNEL_GEMM: {
        unsigned gx = (a->n + GEMM_TILE - 1) / GEMM_TILE, gy = (a->m + GEMM_TILE - 1) / GEMM_TILE;
        CUresult r = k->drv.cuLaunchKernel(k->kernel_fn[DEV_KERNEL_GEMM], gx, gy, 1, GEMM_TILE,
                                           GEMM_TILE, 1, 0, stream, args, NULL);
        if (r != CUDA_SUCCESS)
            return dev_cuda_fail(r, "cuLaunchKernel(gemm, %ux%u blocks, stream %p)", gx, gy,
                                 (void *)stream);
        return LMS_OK;
    }
    case DEV_KERNEL_COLSUM:
        return launch(k, k->kernel_fn[a->kernel], name, a->n, stream, args);
    case DEV_KERNEL_XENT:
        status = launch(k, k->kernel_fn[a->kernel], name, a->m, stream, args);
        return status != LMS_OK ? status : launch(k, k->xent_mean_fn, "xent_mean", 1, stream, args);
    case DEV_KERNEL_ADAM:
        return launch(k, k->kernel_fn[a->kernel], name, a->n, stream, args);
    default: /* BIAS_ACT, RELU_BACK: one item per element */
        return launch(k, k->kernel_fn[a->kernel], name, (uint64_t)a->m * a->n, stream, args);
    }
}

lms_status_t kernels_cuda_enqueue(void *state, uint64_t native, const void *call)
{
    kcuda_t *k = state;
    if (k == NULL)
        return base_fail(LMS_ERR_UNSUPPORTED,
                         "the test kernels have no state for this device: there was no host "
                         "memory for it when the device opened");
    if (k->unusable != LMS_OK)
        return base_fail(k->unusable, "%s", k->why);
    kernel_call_t c;
    memcpy(&c, call, sizeof c);
    CUstream stream = (CUstream)(uintptr_t)native;
    switch (c.which) {
    case KERNEL_FILL: {
        CUdeviceptr dst = c.u.fill.dst;
        unsigned long long n = c.u.fill.n, seed = c.u.fill.seed;
        void *args[] = {&dst, &n, &seed};
        return launch(k, k->fill_fn, "dev_fill_kernel", n / 8 + 1, stream, args);
    }
    case KERNEL_CHECKSUM:
        return checksum(k, stream, c.u.checksum.src, c.u.checksum.n, c.u.checksum.out);
    case KERNEL_AXPY: {
        unsigned long long n = c.u.axpy.n;
        float a = c.u.axpy.a;
        CUdeviceptr x = c.u.axpy.x, y = c.u.axpy.y;
        void *args[] = {&n, &a, &x, &y};
        return launch(k, k->axpy_fn, "dev_axpy_kernel", n, stream, args);
    }
    case KERNEL_INDIRECT: {
        CUdeviceptr ptrs = c.u.indirect.ptrs;
        unsigned long long n = c.u.indirect.n, add = c.u.indirect.add;
        void *args[] = {&ptrs, &n, &add};
        return launch(k, k->indirect_fn, "dev_indirect_kernel", n, stream, args);
    }
    case KERNEL_TRAINING:
        return training(k, stream, &c.u.training);
    }
    return base_fail(LMS_ERR_INVALID, "kernels: unknown kernel call %d", (int)c.which);
}
