/*
 * device/cuda.c — the cuda backend: the ops of device.h on a real GPU, through
 * the CUDA driver API.
 *
 * Owns, for each open device (a cuda_t):
 *   - a handle on libcuda.so.1 from dlopen: liblms is never linked against
 *     libcuda, so it loads on a machine with no driver;
 *   - the driver's entry points, resolved at open from one list,
 *     DRIVER_FUNCS (see Note [Resolving the driver]);
 *   - one reference on the device's primary context (see Note [Current context]);
 *   - from the first test kernel on: the kernels' module and the checksum ring
 *     (see Note [Checksum ring]);
 *   - while an observer is set, and from then on: the timing events of the
 *     work not yet reported, and a base event with its stream (see Note
 *     [Timing work on the GPU]; not yet run on a GPU).
 * What the ops hand out is the driver's own object, cast: a dev_stream_t * is
 * a CUstream, a dev_event_t * a CUevent, a dev_block_t a
 * CUmemGenericAllocationHandle. This file keeps no table of them (but the
 * list of adopted streams, the program's, which destroy must not destroy)
 * and checks no argument; the check layer above it does both (check.c). It must still never
 * crash on what the driver rejects: every CUresult becomes a status through
 * fail().
 *
 * Invariants: every field of cuda_t except the kernel state and the adopted
 * list is set by
 * dev_cuda_open and never changes. The kernel state is set once, under
 * lock, before kernels_loaded is set (release), and does not change
 * until close. A ring slot is busy from the checksum call that claims it to
 * the host function that delivers its result.
 *
 * Locks: lock guards the loading of the kernel state and the adopted list;
 * for the kernel state it is taken on the first kernel call of each device (later calls see
 * kernels_loaded and skip it), and no host function takes it. Ring slots are
 * claimed and freed with atomics. observe_lock guards the observer's state
 * and is held while the observer is called (it calls no op). Everything else
 * is read-only after open and the driver is thread-safe, so the ops run
 * concurrently without a lock.
 */
#include "device/layer.h"

#include "base/base.h"

#include <cuda.h>
#include <cudaTypedefs.h> /* PFN_* prototypes, for the static assertion below */
#include <dlfcn.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if CUDA_VERSION < 12000
#error "device/cuda.c needs CUDA 12.0 headers or later (cuGetProcAddress_v2)"
#endif

_Static_assert(sizeof(dev_addr_t) == sizeof(CUdeviceptr), "a dev_addr_t holds a CUdeviceptr");
_Static_assert(sizeof(dev_block_t) == sizeof(CUmemGenericAllocationHandle),
               "a dev_block_t holds a CUmemGenericAllocationHandle");
_Static_assert(sizeof(void *) == sizeof(void (*)(void)),
               "a function pointer travels through void * (dlsym, cuGetProcAddress)");

/*
 * Note [Resolving the driver]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * cuGetProcAddress_v2 (CUDA 12.0 and later) is the one symbol taken with
 * dlsym. Every other entry point is asked of it by its base name
 * ("cuMemGetInfo", never "cuMemGetInfo_v2": #fn stringifies the name as
 * written in DRIVER_FUNCS, before cuda.h's #define turns it into the _v2
 * name) with cudaVersion = CUDA_VERSION, the version of the headers this file
 * is compiled against. The driver then returns the newest variant at that
 * version, and each field's type must be that variant's prototype. For most
 * names it is the declaration the base name reaches through cuda.h
 * (__typeof__ of it, _v2 where cuda.h #defines the name so). Not for all:
 * CUDA 13.0 added cuCtxSynchronize_v2(CUcontext) without such a #define, so
 * cuda.h's cuCtxSynchronize(void) is the old ABI while "cuCtxSynchronize" at
 * 13000 is the new one; called through the old type, it synchronizes
 * whatever context a stray register names (seen on a card:
 * CUDA_ERROR_CONTEXT_IS_DESTROYED at every close). This file makes the same
 * #define for it, and a static assertion against cudaTypedefs.h's PFN
 * typedef keeps it honest. Every lookup must report
 * CU_GET_PROC_ADDRESS_SUCCESS with a non-NULL pointer.
 *
 * A driver older than CUDA_VERSION cannot honour that (cuGetProcAddress
 * rejects a cudaVersion above its own), so open first asks it for
 * cuDriverGetVersion, at version 12.0 which every driver with
 * cuGetProcAddress_v2 serves, and refuses an older driver with a message
 * naming both versions.
 *
 * There is no fallback to the v1 cuGetProcAddress, which has no symbolStatus
 * argument: a driver without cuGetProcAddress_v2 is older than CUDA 12.0, so
 * it would refuse CUDA_VERSION (12.0 or later) for every symbol anyway.
 *
 * libcuda is opened RTLD_NODELETE: dlclose balances dlopen, but the library
 * stays mapped, because after cuInit the driver has threads of its own (host
 * functions run on one) and cuInit cannot be undone; unmapping the code under
 * them would crash the process.
 */

/* What cuda.h should #define and does not (Note [Resolving the driver]). */
#if CUDA_VERSION >= 13000
#define cuCtxSynchronize cuCtxSynchronize_v2
_Static_assert(__builtin_types_compatible_p(__typeof__(cuCtxSynchronize) *,
                                           PFN_cuCtxSynchronize_v13000),
               "cuCtxSynchronize at CUDA 13.0 takes the context");
#define CTX_SYNCHRONIZE(c) (c)->drv.cuCtxSynchronize((c)->ctx)
#else
#define CTX_SYNCHRONIZE(c) (c)->drv.cuCtxSynchronize()
#endif

/* Every driver function the backend calls, by base name. */
#define DRIVER_FUNCS(X)                                                                      \
    /* errors, initialization, devices */                                                   \
    X(cuGetErrorName) X(cuGetErrorString) X(cuInit) X(cuDeviceGet) X(cuDeviceGetCount)      \
    X(cuDeviceGetName) X(cuDeviceTotalMem) X(cuDeviceGetAttribute) X(cuDeviceGetPCIBusId)   \
    /* contexts */                                                                          \
    X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease) X(cuCtxGetCurrent)             \
    X(cuCtxSetCurrent) X(cuCtxGetStreamPriorityRange) X(cuCtxSynchronize)                   \
    /* memory */                                                                            \
    X(cuMemGetInfo) X(cuMemGetAllocationGranularity) X(cuMemAddressReserve)                 \
    X(cuMemAddressFree) X(cuMemCreate) X(cuMemRelease) X(cuMemMap) X(cuMemSetAccess)        \
    X(cuMemUnmap) X(cuMemHostRegister) X(cuMemHostUnregister)                               \
    /* streams, events, copies, host functions */                                           \
    X(cuStreamCreateWithPriority) X(cuStreamDestroy) X(cuStreamSynchronize) X(cuStreamQuery) \
    X(cuEventCreate) X(cuEventDestroy) X(cuEventRecord) X(cuEventQuery)                     \
    X(cuEventSynchronize) X(cuEventElapsedTime) X(cuStreamWaitEvent) X(cuMemcpyHtoDAsync)  \
    X(cuMemcpyDtoHAsync) X(cuMemcpyDtoDAsync) X(cuLaunchHostFunc)                           \
    /* test kernels */                                                                      \
    X(cuModuleLoadData) X(cuModuleUnload) X(cuModuleGetFunction) X(cuLaunchKernel)          \
    X(cuMemAlloc) X(cuMemFree) X(cuMemAllocHost) X(cuMemFreeHost) X(cuMemsetD8Async)

/* The entry points. A field's name is what cuda.h makes of the base name
 * (cuMemGetInfo_v2 for cuMemGetInfo), and so is every call through it. */
typedef struct driver {
#define DRIVER_FIELD(fn) __typeof__(fn) *fn;
    DRIVER_FUNCS(DRIVER_FIELD)
#undef DRIVER_FIELD
} driver_t;

static const struct driver_sym {
    const char *name; /* the base name, as cuGetProcAddress wants it */
    size_t offset;    /* of its pointer in driver_t */
} driver_syms[] = {
#define DRIVER_SYM(fn) {#fn, offsetof(driver_t, fn)},
    DRIVER_FUNCS(DRIVER_SYM)
#undef DRIVER_SYM
};

typedef __typeof__(cuGetProcAddress_v2) get_proc_t;

/*
 * Note [Current context]
 * ~~~~~~~~~~~~~~~~~~~~~~
 * Driver calls act on the calling thread's current context. Open retains the
 * device's primary context, the one cudart (and so PyTorch) uses, so that
 * lms's memory, streams and events live where the application's do; close
 * releases it. An op makes it current on a thread that lacks it, and leaves it
 * current (no push and pop per call).
 *
 * The fast path is use_context(): current_id, thread-local, is the id of the
 * cuda_t that last made its context current on this thread; when it matches,
 * the op makes no extra driver call. Ids come from a counter and are never
 * reused, so a thread's entry for a closed device never matches a later one.
 *
 * The cache cannot see other code (cudaSetDevice, the application's own
 * cuCtxSetCurrent) switch the thread to another context behind it. Ops that
 * name their objects (VAs, handles, streams, events) are not misled by that;
 * the ops whose effect depends on which context is current (creating streams
 * and events, host registration, mem_info, loading and launching the test
 * kernels: a kernel must be launched from its stream's context) call
 * use_context_checked(), which asks the driver (cuCtxGetCurrent, cheap).
 *
 * Consequence for callers: a thread that has called an op has this device's
 * primary context current afterwards, whatever it had before.
 */
static _Thread_local uint64_t current_id; /* 0: none yet */
static atomic_uint_fast64_t next_id = 1;

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
 * allocated once, when the kernels are loaded.
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

typedef struct ring_slot {
    atomic_bool busy;    /* claimed by a checksum that has not delivered yet */
    uint64_t *out;       /* where deliver() stores the result */
    const uint64_t *word; /* the pinned host word the D2H copy fills */
} ring_slot_t;

/*
 * Note [Timing work on the GPU]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * NOT YET RUN ON A GPU: no GPU was lent to the session that wrote this. The
 * sim implements the same contract (device.h, set_observer) and is tested;
 * test_device's observer test is registered for the gpu label and checks
 * this code where a GPU is.
 *
 * While an observer is set, each copy, host function and test kernel is
 * bracketed by two events created with timing (the ops' own events are
 * CU_EVENT_DISABLE_TIMING), recorded on its stream just before and just
 * after it, and the pair goes on the pending list. The GPU stamps an event
 * when the stream reaches it, so the pair says when the work ran, not when
 * it was enqueued. An op whose bracket cannot be made (no event, a record
 * refused) runs untimed and unreported; the op itself is not failed for it.
 *
 * The clock: at the first set_observer a base event is recorded on a stream
 * of the observer's own (non-blocking, nothing else on it), synchronized at
 * once, and base_now_ns() read right after; the GPU's stamp of the base and
 * that host time agree to within the synchronize's return (some us, the
 * host reading later). A pending pair is resolved once its end event has
 * completed: start = base_ns + elapsed(base, start), end = start +
 * elapsed(start, end), each elapsed from cuEventElapsedTime (float ms, with
 * a resolution of about 0.5 us). A float's 24 bits make the start's offset
 * from the base coarser as the run goes on (about 0.06 ms after 1000 s);
 * durations stay as fine as the events.
 *
 * Resolving (poll_work) happens on threads that already call the device:
 * event_query and event_synchronize (lms's progress calls them all the time;
 * at most once a millisecond there), stream_synchronize (after the wait, so
 * the stream's work is reported when it returns), and set_observer (which
 * first waits for every pending pair: the old observer gets all of its
 * work). Never in an op the check layer calls with its lock held (create,
 * destroy, map, unmap), since the observer above takes that lock. Events of
 * resolved pairs are kept for reuse.
 */
typedef struct timed {
    CUevent start, end;
    dev_work_kind_t kind;
    const char *name;
    size_t bytes;
    CUstream stream;
} timed_t;

#define POLL_EVERY_NS 1000000u /* poll_work from event_query/_synchronize */

#define KERNEL_THREADS 256 /* a multiple of the warp size: the checksum reduces per warp */
#define BLOCKS_PER_SM 8

typedef struct cuda {
    driver_t drv;      /* entry points, resolved at open */
    void *libcuda;     /* dlopen handle */
    uint64_t id;       /* unique among opens: see Note [Current context] */
    int ordinal;
    CUdevice device;
    CUcontext ctx;     /* the device's primary context, retained */
    size_t granularity;
    int high_priority; /* the device's greatest stream priority */
    unsigned max_blocks; /* grid size cap of the test kernels */
    CUmemAllocationProp block_prop; /* one pinned block on this device */
    CUmemAccessDesc access;         /* read/write for this device */
    char no_kernels[128]; /* why the test kernels are unavailable; "" if they are */

    pthread_mutex_t lock;         /* guards loading the kernel state below, and `adopted` */
    CUstream *adopted;            /* the program's streams adopted, once per adoption */
    size_t nadopted, capadopted;
    atomic_bool kernels_loaded;   /* set (release) once the kernel state is */
    CUmodule module;
    CUfunction fill_fn, checksum_fn, axpy_fn;
    CUfunction kernel_fn[DEV_KERNEL_COUNT]; /* the training kernels, by dev_kernel_t */
    CUfunction xent_mean_fn;                /* XENT's second launch */
    ring_slot_t *ring;      /* RING_SLOTS slots, host memory */
    CUdeviceptr ring_dev;   /* RING_SLOTS device words the checksum kernel adds into */
    uint64_t *ring_host;    /* RING_SLOTS pinned host words */
    atomic_uint ring_next;  /* where the next claim starts looking */

    /* the observer: Note [Timing work on the GPU]; guarded by observe_lock */
    pthread_mutex_t observe_lock;
    atomic_bool observing;        /* observer != NULL: the ops' one branch, read without the lock */
    dev_observer_t observer;
    void *observer_ctx;
    CUstream base_stream;         /* runs only the base event; NULL until the first observer */
    CUevent base_event;
    uint64_t base_ns;             /* base_now_ns() when base_event was seen done */
    timed_t *pending;             /* bracketed work not yet reported, in enqueue order */
    size_t npending, cappending;
    CUevent *spare;               /* timing events for reuse */
    size_t nspare, capspare;
    atomic_uint_fast64_t next_poll_ns; /* event_query/_synchronize poll from then on */
} cuda_t;

/* ---- errors ----------------------------------------------------------------- */

/* "CUDA_ERROR_OUT_OF_MEMORY (out of memory)" into buf. Works with the error
 * functions not (yet) resolved. */
static void error_text(const driver_t *drv, CUresult r, char *buf, size_t len)
{
    const char *name = NULL, *text = NULL;
    if (drv->cuGetErrorName == NULL || drv->cuGetErrorName(r, &name) != CUDA_SUCCESS)
        name = NULL;
    if (drv->cuGetErrorString == NULL || drv->cuGetErrorString(r, &text) != CUDA_SUCCESS)
        text = NULL;
    if (name != NULL)
        snprintf(buf, len, "%s (%s)", name, text != NULL ? text : "no description");
    else
        snprintf(buf, len, "CUresult %d", (int)r);
}

static lms_status_t status_of(CUresult r)
{
    switch (r) {
    case CUDA_ERROR_OUT_OF_MEMORY:
        return LMS_ERR_OUT_OF_MEMORY;
    case CUDA_ERROR_INVALID_VALUE:
    case CUDA_ERROR_INVALID_HANDLE:
        return LMS_ERR_INVALID;
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_NOT_INITIALIZED:
    case CUDA_ERROR_DEINITIALIZED:
    case CUDA_ERROR_STUB_LIBRARY:
    /* The driver API's forms of "insufficient driver" (cudart's
     * cudaErrorInsufficientDriver has no CUDA_ERROR_ twin). */
    case CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER:
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
    case CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE:
        return LMS_ERR_NO_DEVICE;
    case CUDA_ERROR_NOT_SUPPORTED:
        return LMS_ERR_UNSUPPORTED;
    default:
        return LMS_ERR_DEVICE;
    }
}

/* The one way a driver failure leaves this file: records
 * "<call and its arguments>: <error name> (<error string>)" and returns the
 * status r maps to. r must not be CUDA_SUCCESS. */
static lms_status_t fail(const driver_t *drv, CUresult r, const char *call, ...)
    __attribute__((format(printf, 3, 4)));
static lms_status_t fail(const driver_t *drv, CUresult r, const char *call, ...)
{
    char what[256], text[192];
    va_list ap;
    va_start(ap, call);
    vsnprintf(what, sizeof what, call, ap);
    va_end(ap);
    error_text(drv, r, text, sizeof text);
    return base_fail(status_of(r), "%s: %s", what, text);
}

/* For close, which cannot fail: logs r unless it is CUDA_SUCCESS. At process
 * exit the driver may already be gone (DEINITIALIZED): that is only debug. */
static void log_close_error(const cuda_t *c, CUresult r, const char *call)
{
    if (r == CUDA_SUCCESS)
        return;
    char text[192];
    error_text(&c->drv, r, text, sizeof text);
    base_log(r == CUDA_ERROR_DEINITIALIZED ? BASE_LOG_DEBUG : BASE_LOG_WARN,
             "cuda: closing device %d: %s: %s", c->ordinal, call, text);
}

/* ---- context ---------------------------------------------------------------- */

/* Makes c's context current on this thread unless the cache says it is.
 * See Note [Current context]. */
static lms_status_t use_context(cuda_t *c)
{
    if (current_id == c->id)
        return LMS_OK;
    CUresult r = c->drv.cuCtxSetCurrent(c->ctx);
    if (r != CUDA_SUCCESS)
        return fail(&c->drv, r, "cuCtxSetCurrent(primary context of device %d)", c->ordinal);
    current_id = c->id;
    return LMS_OK;
}

/* Same, asking the driver which context is current instead of trusting the
 * cache: for the ops whose effect depends on it. */
static lms_status_t use_context_checked(cuda_t *c)
{
    CUcontext cur = NULL;
    CUresult r = c->drv.cuCtxGetCurrent(&cur);
    if (r != CUDA_SUCCESS)
        return fail(&c->drv, r, "cuCtxGetCurrent()");
    if (cur != c->ctx)
        current_id = 0;
    return use_context(c);
}

/* ---- the observer: Note [Timing work on the GPU] ---------------------------- */

static bool observing(cuda_t *c)
{
    return atomic_load_explicit(&c->observing, memory_order_relaxed);
}

/* A timing event: a spare one, or new. observe_lock held, context current. */
static CUresult timing_event(cuda_t *c, CUevent *out)
{
    if (c->nspare > 0) {
        *out = c->spare[--c->nspare];
        return CUDA_SUCCESS;
    }
    return c->drv.cuEventCreate(out, CU_EVENT_DEFAULT);
}

/* Keeps e for reuse, or destroys it if there is no room. observe_lock held. */
static void spare_event(cuda_t *c, CUevent e)
{
    if (c->nspare == c->capspare) {
        size_t cap = c->capspare ? 2 * c->capspare : 64;
        CUevent *a = base_meta_realloc(c->spare, cap * sizeof *a);
        if (a == NULL) {
            (void)c->drv.cuEventDestroy(e);
            return;
        }
        c->spare = a;
        c->capspare = cap;
    }
    c->spare[c->nspare++] = e;
}

/* Before an op on stream, while observing: *t gets a pair of timing events,
 * the start one recorded on stream. false: the op goes untimed. */
static bool timed_begin(cuda_t *c, CUstream stream, timed_t *t)
{
    *t = (timed_t){.stream = stream};
    pthread_mutex_lock(&c->observe_lock);
    bool ok = c->observer != NULL && timing_event(c, &t->start) == CUDA_SUCCESS;
    if (ok && timing_event(c, &t->end) != CUDA_SUCCESS) {
        spare_event(c, t->start);
        ok = false;
    }
    pthread_mutex_unlock(&c->observe_lock);
    if (ok && c->drv.cuEventRecord(t->start, stream) != CUDA_SUCCESS) {
        pthread_mutex_lock(&c->observe_lock);
        spare_event(c, t->start);
        spare_event(c, t->end);
        pthread_mutex_unlock(&c->observe_lock);
        ok = false;
    }
    return ok;
}

/* After the op (enqueued: whether it was): the end event is recorded behind
 * it and the pair listed as pending; else its events go back. */
static void timed_end(cuda_t *c, timed_t *t, bool enqueued, dev_work_kind_t kind,
                      const char *name, size_t bytes)
{
    t->kind = kind;
    t->name = name;
    t->bytes = bytes;
    bool ok = enqueued && c->drv.cuEventRecord(t->end, t->stream) == CUDA_SUCCESS;
    pthread_mutex_lock(&c->observe_lock);
    if (ok && c->npending == c->cappending) {
        size_t cap = c->cappending ? 2 * c->cappending : 256;
        timed_t *a = base_meta_realloc(c->pending, cap * sizeof *a);
        if ((ok = a != NULL)) {
            c->pending = a;
            c->cappending = cap;
        }
    }
    if (ok) {
        c->pending[c->npending++] = *t;
    } else {
        spare_event(c, t->start);
        spare_event(c, t->end);
    }
    pthread_mutex_unlock(&c->observe_lock);
}

/* Milliseconds from cuEventElapsedTime as nanoseconds (0 if negative). */
static uint64_t ms_to_ns(float ms) { return ms > 0 ? (uint64_t)((double)ms * 1e6) : 0; }

/* Reports the pending pairs whose end has completed (with wait: waits for
 * each), in enqueue order, and keeps the rest; a pair whose events fail to
 * answer is dropped unreported. observe_lock held, context current. */
static void poll_locked(cuda_t *c, bool wait)
{
    size_t kept = 0;
    for (size_t i = 0; i < c->npending; i++) {
        timed_t t = c->pending[i];
        CUresult r = wait ? c->drv.cuEventSynchronize(t.end) : c->drv.cuEventQuery(t.end);
        if (r == CUDA_ERROR_NOT_READY) {
            c->pending[kept++] = t;
            continue;
        }
        float from_base = 0, took = 0;
        if (r == CUDA_SUCCESS && c->observer != NULL &&
            c->drv.cuEventElapsedTime(&from_base, c->base_event, t.start) == CUDA_SUCCESS &&
            c->drv.cuEventElapsedTime(&took, t.start, t.end) == CUDA_SUCCESS) {
            uint64_t start = c->base_ns + ms_to_ns(from_base);
            dev_work_t work = {.kind = t.kind, .stream = (dev_stream_t *)t.stream,
                               .name = t.name, .bytes = t.bytes, .start_ns = start,
                               .end_ns = start + ms_to_ns(took)};
            c->observer(c->observer_ctx, &work);
        }
        spare_event(c, t.start);
        spare_event(c, t.end);
    }
    c->npending = kept;
}

/* poll_locked without waiting; unless forced, at most once per POLL_EVERY_NS.
 * One branch while no observer is set. Context current. */
static void poll_work(cuda_t *c, bool force)
{
    if (!observing(c))
        return;
    if (!force) {
        uint64_t now = base_now_ns();
        if (now < atomic_load_explicit(&c->next_poll_ns, memory_order_relaxed))
            return;
        atomic_store_explicit(&c->next_poll_ns, now + POLL_EVERY_NS, memory_order_relaxed);
    }
    pthread_mutex_lock(&c->observe_lock);
    poll_locked(c, false);
    pthread_mutex_unlock(&c->observe_lock);
}

/* The base event and its stream (Note [Timing work on the GPU]).
 * observe_lock held, context current; on failure nothing is left. */
static lms_status_t make_base(cuda_t *c)
{
    lms_status_t status;
    CUresult r = c->drv.cuStreamCreateWithPriority(&c->base_stream, CU_STREAM_NON_BLOCKING, 0);
    if (r != CUDA_SUCCESS) {
        c->base_stream = NULL;
        return fail(&c->drv, r, "cuStreamCreateWithPriority(non-blocking, the observer's base)");
    }
    r = c->drv.cuEventCreate(&c->base_event, CU_EVENT_DEFAULT);
    if (r != CUDA_SUCCESS) {
        c->base_event = NULL;
        status = fail(&c->drv, r, "cuEventCreate(timing, the observer's base)");
        goto fail_stream;
    }
    if ((r = c->drv.cuEventRecord(c->base_event, c->base_stream)) != CUDA_SUCCESS ||
        (r = c->drv.cuEventSynchronize(c->base_event)) != CUDA_SUCCESS) {
        status = fail(&c->drv, r, "cuEventRecord/cuEventSynchronize(the observer's base event)");
        goto fail_event;
    }
    c->base_ns = base_now_ns();
    return LMS_OK;

fail_event:
    (void)c->drv.cuEventDestroy(c->base_event);
    c->base_event = NULL;
fail_stream:
    (void)c->drv.cuStreamDestroy(c->base_stream);
    c->base_stream = NULL;
    return status;
}

static lms_status_t set_observer(void *self, dev_observer_t fn, void *ctx)
{
    cuda_t *c = self;
    lms_status_t status = use_context_checked(c);
    if (status != LMS_OK)
        return status;
    /* The old observer's work is waited for without observe_lock, which
     * every timed op takes: a pending event may sit behind work that waits
     * for a thread now enqueueing. Events spared meanwhile by another poll
     * and reused only make a wait longer (none is destroyed before close). */
    pthread_mutex_lock(&c->observe_lock);
    size_t n = c->npending;
    CUevent *ends = n > 0 ? base_meta_alloc(n * sizeof *ends) : NULL;
    for (size_t i = 0; ends != NULL && i < n; i++)
        ends[i] = c->pending[i].end;
    pthread_mutex_unlock(&c->observe_lock);
    for (size_t i = 0; ends != NULL && i < n; i++)
        (void)c->drv.cuEventSynchronize(ends[i]); /* a failure shows in poll_locked's query */
    base_meta_free(ends);
    pthread_mutex_lock(&c->observe_lock);
    if (fn != NULL && c->base_event == NULL && (status = make_base(c)) != LMS_OK) {
        pthread_mutex_unlock(&c->observe_lock);
        return status;
    }
    poll_locked(c, ends == NULL && n > 0); /* the old observer is told of all its work (waiting
                                              here only if the list could not be copied) */
    c->observer = fn;
    c->observer_ctx = fn != NULL ? ctx : NULL;
    atomic_store_explicit(&c->observing, fn != NULL, memory_order_relaxed);
    pthread_mutex_unlock(&c->observe_lock);
    return LMS_OK;
}

/* For close: every timing event, the base and its stream. */
static void release_observer(cuda_t *c)
{
    for (size_t i = 0; i < c->npending; i++) {
        log_close_error(c, c->drv.cuEventDestroy(c->pending[i].start), "cuEventDestroy(timing)");
        log_close_error(c, c->drv.cuEventDestroy(c->pending[i].end), "cuEventDestroy(timing)");
    }
    for (size_t i = 0; i < c->nspare; i++)
        log_close_error(c, c->drv.cuEventDestroy(c->spare[i]), "cuEventDestroy(timing)");
    if (c->base_event != NULL)
        log_close_error(c, c->drv.cuEventDestroy(c->base_event), "cuEventDestroy(base)");
    if (c->base_stream != NULL)
        log_close_error(c, c->drv.cuStreamDestroy(c->base_stream), "cuStreamDestroy(base)");
    base_meta_free(c->pending);
    base_meta_free(c->spare);
}

/* ---- ops: memory ------------------------------------------------------------ */

static lms_status_t mem_info(void *self, size_t *free_bytes, size_t *total_bytes)
{
    cuda_t *c = self;
    lms_status_t status = use_context_checked(c);
    if (status != LMS_OK)
        return status;
    size_t free_b = 0, total_b = 0;
    CUresult r = c->drv.cuMemGetInfo(&free_b, &total_b);
    if (r != CUDA_SUCCESS)
        return fail(&c->drv, r, "cuMemGetInfo(device %d)", c->ordinal);
    *free_bytes = free_b;
    *total_bytes = total_b;
    return LMS_OK;
}

static lms_status_t va_reserve(void *self, size_t size, dev_addr_t *base)
{
    cuda_t *c = self;
    lms_status_t status = use_context(c);
    if (status != LMS_OK)
        return status;
    CUdeviceptr p = 0;
    CUresult r = c->drv.cuMemAddressReserve(&p, size, c->granularity, 0, 0);
    if (r != CUDA_SUCCESS)
        return fail(&c->drv, r, "cuMemAddressReserve(%zu bytes, alignment %zu)", size,
                    c->granularity);
    *base = p;
    return LMS_OK;
}

static lms_status_t va_free(void *self, dev_addr_t base, size_t size)
{
    cuda_t *c = self;
    lms_status_t status = use_context(c);
    if (status != LMS_OK)
        return status;
    CUresult r = c->drv.cuMemAddressFree(base, size);
    if (r != CUDA_SUCCESS)
        return fail(&c->drv, r, "cuMemAddressFree(0x%" PRIx64 ", %zu bytes)", base, size);
    return LMS_OK;
}

static lms_status_t block_create(void *self, dev_block_t *block)
{
    cuda_t *c = self;
    lms_status_t status = use_context(c);
    if (status != LMS_OK)
        return status;
    CUmemGenericAllocationHandle h = 0;
    CUresult r = c->drv.cuMemCreate(&h, c->granularity, &c->block_prop, 0);
    if (r != CUDA_SUCCESS)
        return fail(&c->drv, r, "cuMemCreate(%zu bytes, pinned, device %d)", c->granularity,
                    c->ordinal);
    *block = h;
    return LMS_OK;
}

static lms_status_t block_release(void *self, dev_block_t block)
{
    cuda_t *c = self;
    lms_status_t status = use_context(c);
    if (status != LMS_OK)
        return status;
    CUresult r = c->drv.cuMemRelease(block);
    if (r != CUDA_SUCCESS)
        return fail(&c->drv, r, "cuMemRelease(block 0x%" PRIx64 ")", block);
    return LMS_OK;
}

static lms_status_t map(void *self, dev_addr_t va, dev_block_t block)
{
    cuda_t *c = self;
    lms_status_t status = use_context(c);
    if (status != LMS_OK)
        return status;
    CUresult r = c->drv.cuMemMap(va, c->granularity, 0, block, 0);
    if (r != CUDA_SUCCESS)
        return fail(&c->drv, r, "cuMemMap(va 0x%" PRIx64 ", %zu bytes, block 0x%" PRIx64 ")", va,
                    c->granularity, block);
    return LMS_OK;
}

/* One driver call for the whole range: cuMemSetAccess takes "a fully mapped
 * address range containing all allocations created by cuMemMap/cuMemCreate". */
static lms_status_t set_access(void *self, dev_addr_t va, size_t size)
{
    cuda_t *c = self;
    lms_status_t status = use_context(c);
    if (status != LMS_OK)
        return status;
    CUresult r = c->drv.cuMemSetAccess(va, size, &c->access, 1);
    if (r != CUDA_SUCCESS)
        return fail(&c->drv, r, "cuMemSetAccess(va 0x%" PRIx64 ", %zu bytes, read/write for device %d)",
                    va, size, c->ordinal);
    return LMS_OK;
}

/* One cuMemUnmap per block: the driver documents that "the range must be the
 * entire contiguous address range that was mapped to", i.e. one mapping, and
 * each block was mapped by its own cuMemMap. If the driver fails at block k,
 * blocks 0..k-1 stay unmapped (it cannot be undone without the handles) and the
 * message says so; that only happens when the context is lost. */
static lms_status_t unmap(void *self, dev_addr_t va, size_t size)
{
    cuda_t *c = self;
    lms_status_t status = use_context(c);
    if (status != LMS_OK)
        return status;
    for (size_t done = 0; done < size; done += c->granularity) {
        CUresult r = c->drv.cuMemUnmap(va + done, c->granularity);
        if (r != CUDA_SUCCESS)
            return fail(&c->drv, r,
                        "cuMemUnmap(va 0x%" PRIx64 ", %zu bytes), block %zu of unmap(0x%" PRIx64
                        ", %zu bytes); the %zu bytes before it are unmapped",
                        va + done, c->granularity, done / c->granularity, va, size, done);
    }
    return LMS_OK;
}

static lms_status_t host_register(void *self, void *ptr, size_t size)
{
    cuda_t *c = self;
    lms_status_t status = use_context_checked(c);
    if (status != LMS_OK)
        return status;
    CUresult r = c->drv.cuMemHostRegister(ptr, size, CU_MEMHOSTREGISTER_PORTABLE);
    if (r != CUDA_SUCCESS)
        return fail(&c->drv, r, "cuMemHostRegister(%p, %zu bytes, portable)", ptr, size);
    return LMS_OK;
}

static lms_status_t host_unregister(void *self, void *ptr)
{
    cuda_t *c = self;
    lms_status_t status = use_context_checked(c);
    if (status != LMS_OK)
        return status;
    CUresult r = c->drv.cuMemHostUnregister(ptr);
    if (r != CUDA_SUCCESS)
        return fail(&c->drv, r, "cuMemHostUnregister(%p)", ptr);
    return LMS_OK;
}

/* ---- ops: streams and events ------------------------------------------------ */

static lms_status_t stream_create(void *self, dev_priority_t priority, dev_stream_t **stream)
{
    cuda_t *c = self;
    lms_status_t status = use_context_checked(c);
    if (status != LMS_OK)
        return status;
    /* 0 is the default priority, and the least on every device. */
    int prio = priority == DEV_PRIORITY_HIGH ? c->high_priority : 0;
    CUstream s = NULL;
    CUresult r = c->drv.cuStreamCreateWithPriority(&s, CU_STREAM_NON_BLOCKING, prio);
    if (r != CUDA_SUCCESS)
        return fail(&c->drv, r, "cuStreamCreateWithPriority(non-blocking, priority %d)", prio);
    *stream = (dev_stream_t *)s;
    return LMS_OK;
}

/* The stream is the program's: it is queried (an invalid handle fails here,
 * not at the first copy) and listed, so that destroy leaves it alone. */
static lms_status_t stream_adopt(void *self, uint64_t native, dev_stream_t **stream)
{
    cuda_t *c = self;
    lms_status_t status = use_context_checked(c);
    if (status != LMS_OK)
        return status;
    CUresult r = c->drv.cuStreamQuery((CUstream)(uintptr_t)native);
    if (r != CUDA_SUCCESS && r != CUDA_ERROR_NOT_READY)
        return fail(&c->drv, r, "cuStreamQuery(stream 0x%" PRIx64 "), adopting it", native);
    pthread_mutex_lock(&c->lock);
    bool room = c->nadopted < c->capadopted;
    if (!room) {
        size_t cap = c->capadopted ? 2 * c->capadopted : 16;
        CUstream *a = base_meta_realloc(c->adopted, cap * sizeof *a);
        if ((room = a != NULL)) {
            c->adopted = a;
            c->capadopted = cap;
        }
    }
    if (room)
        c->adopted[c->nadopted++] = (CUstream)(uintptr_t)native;
    pthread_mutex_unlock(&c->lock);
    if (!room)
        return base_fail(LMS_ERR_OUT_OF_MEMORY, "cuda: no host memory to adopt a stream");
    *stream = (dev_stream_t *)(uintptr_t)native;
    return LMS_OK;
}

/* Whether stream was adopted; if so, it is adopted once less. */
static bool unadopt(cuda_t *c, CUstream stream)
{
    pthread_mutex_lock(&c->lock);
    size_t i = 0;
    while (i < c->nadopted && c->adopted[i] != stream)
        i++;
    bool found = i < c->nadopted;
    if (found)
        c->adopted[i] = c->adopted[--c->nadopted];
    pthread_mutex_unlock(&c->lock);
    return found;
}

static lms_status_t stream_destroy(void *self, dev_stream_t *stream)
{
    cuda_t *c = self;
    if (unadopt(c, (CUstream)stream))
        return LMS_OK;
    lms_status_t status = use_context(c);
    if (status != LMS_OK)
        return status;
    CUresult r = c->drv.cuStreamDestroy((CUstream)stream);
    if (r != CUDA_SUCCESS)
        return fail(&c->drv, r, "cuStreamDestroy(stream %p)", (void *)stream);
    return LMS_OK;
}

static lms_status_t stream_synchronize(void *self, dev_stream_t *stream)
{
    cuda_t *c = self;
    lms_status_t status = use_context(c);
    if (status != LMS_OK)
        return status;
    CUresult r = c->drv.cuStreamSynchronize((CUstream)stream);
    if (r != CUDA_SUCCESS)
        return fail(&c->drv, r, "cuStreamSynchronize(stream %p)", (void *)stream);
    poll_work(c, true); /* the stream's work is reported when this returns */
    return LMS_OK;
}

static lms_status_t event_create(void *self, dev_event_t **event)
{
    cuda_t *c = self;
    lms_status_t status = use_context_checked(c);
    if (status != LMS_OK)
        return status;
    CUevent e = NULL;
    CUresult r = c->drv.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING);
    if (r != CUDA_SUCCESS)
        return fail(&c->drv, r, "cuEventCreate(disable timing)");
    *event = (dev_event_t *)e;
    return LMS_OK;
}

static lms_status_t event_destroy(void *self, dev_event_t *event)
{
    cuda_t *c = self;
    lms_status_t status = use_context(c);
    if (status != LMS_OK)
        return status;
    CUresult r = c->drv.cuEventDestroy((CUevent)event);
    if (r != CUDA_SUCCESS)
        return fail(&c->drv, r, "cuEventDestroy(event %p)", (void *)event);
    return LMS_OK;
}

static lms_status_t event_record(void *self, dev_event_t *event, dev_stream_t *stream)
{
    cuda_t *c = self;
    lms_status_t status = use_context(c);
    if (status != LMS_OK)
        return status;
    CUresult r = c->drv.cuEventRecord((CUevent)event, (CUstream)stream);
    if (r != CUDA_SUCCESS)
        return fail(&c->drv, r, "cuEventRecord(event %p, stream %p)", (void *)event,
                    (void *)stream);
    return LMS_OK;
}

/* CUDA_ERROR_NOT_READY is an answer, not a failure: LMS_NOT_READY, no message. */
static lms_status_t event_query(void *self, dev_event_t *event)
{
    cuda_t *c = self;
    lms_status_t status = use_context(c);
    if (status != LMS_OK)
        return status;
    CUresult r = c->drv.cuEventQuery((CUevent)event);
    poll_work(c, false);
    if (r == CUDA_SUCCESS)
        return LMS_OK;
    if (r == CUDA_ERROR_NOT_READY)
        return LMS_NOT_READY;
    return fail(&c->drv, r, "cuEventQuery(event %p)", (void *)event);
}

static lms_status_t event_synchronize(void *self, dev_event_t *event)
{
    cuda_t *c = self;
    lms_status_t status = use_context(c);
    if (status != LMS_OK)
        return status;
    CUresult r = c->drv.cuEventSynchronize((CUevent)event);
    poll_work(c, false);
    if (r != CUDA_SUCCESS)
        return fail(&c->drv, r, "cuEventSynchronize(event %p)", (void *)event);
    return LMS_OK;
}

static lms_status_t stream_wait_event(void *self, dev_stream_t *stream, dev_event_t *event)
{
    cuda_t *c = self;
    lms_status_t status = use_context(c);
    if (status != LMS_OK)
        return status;
    CUresult r = c->drv.cuStreamWaitEvent((CUstream)stream, (CUevent)event, CU_EVENT_WAIT_DEFAULT);
    if (r != CUDA_SUCCESS)
        return fail(&c->drv, r, "cuStreamWaitEvent(stream %p, event %p)", (void *)stream,
                    (void *)event);
    return LMS_OK;
}

/* ---- ops: copies and host functions ----------------------------------------- */

static lms_status_t copy_h2d(void *self, dev_stream_t *stream, dev_addr_t dst, const void *src,
                             size_t n)
{
    cuda_t *c = self;
    lms_status_t status = use_context(c);
    if (status != LMS_OK)
        return status;
    timed_t t;
    bool timed = observing(c) && timed_begin(c, (CUstream)stream, &t);
    CUresult r = c->drv.cuMemcpyHtoDAsync(dst, src, n, (CUstream)stream);
    if (timed)
        timed_end(c, &t, r == CUDA_SUCCESS, DEV_WORK_H2D, "copy_h2d", n);
    if (r != CUDA_SUCCESS)
        return fail(&c->drv, r, "cuMemcpyHtoDAsync(dst 0x%" PRIx64 ", src %p, %zu bytes, stream %p)",
                    dst, src, n, (void *)stream);
    return LMS_OK;
}

static lms_status_t copy_d2h(void *self, dev_stream_t *stream, void *dst, dev_addr_t src,
                             size_t n)
{
    cuda_t *c = self;
    lms_status_t status = use_context(c);
    if (status != LMS_OK)
        return status;
    timed_t t;
    bool timed = observing(c) && timed_begin(c, (CUstream)stream, &t);
    CUresult r = c->drv.cuMemcpyDtoHAsync(dst, src, n, (CUstream)stream);
    if (timed)
        timed_end(c, &t, r == CUDA_SUCCESS, DEV_WORK_D2H, "copy_d2h", n);
    if (r != CUDA_SUCCESS)
        return fail(&c->drv, r, "cuMemcpyDtoHAsync(dst %p, src 0x%" PRIx64 ", %zu bytes, stream %p)",
                    dst, src, n, (void *)stream);
    return LMS_OK;
}

static lms_status_t copy_d2d(void *self, dev_stream_t *stream, dev_addr_t dst, dev_addr_t src,
                             size_t n)
{
    cuda_t *c = self;
    lms_status_t status = use_context(c);
    if (status != LMS_OK)
        return status;
    timed_t t;
    bool timed = observing(c) && timed_begin(c, (CUstream)stream, &t);
    CUresult r = c->drv.cuMemcpyDtoDAsync(dst, src, n, (CUstream)stream);
    if (timed)
        timed_end(c, &t, r == CUDA_SUCCESS, DEV_WORK_D2D, "copy_d2d", n);
    if (r != CUDA_SUCCESS)
        return fail(&c->drv, r,
                    "cuMemcpyDtoDAsync(dst 0x%" PRIx64 ", src 0x%" PRIx64 ", %zu bytes, stream %p)",
                    dst, src, n, (void *)stream);
    return LMS_OK;
}

static lms_status_t kernels_ready(cuda_t *c);

/* Host functions run one at a time, on one driver thread, and may be held
 * back by the caller (tests gate a stream with one that waits for a flag).
 * Meanwhile no other host function runs, and loading the test kernels waits
 * too: on an H100 (driver 580), test_lms hung when its first kernel came
 * behind such a gate, and passes since the kernels are loaded before the
 * first host function is queued. A failure to load is left for the first
 * kernel to report. */
static lms_status_t host_func(void *self, dev_stream_t *stream, dev_host_fn_t fn, void *arg)
{
    cuda_t *c = self;
    if (c->no_kernels[0] == '\0' && !atomic_load_explicit(&c->kernels_loaded, memory_order_acquire))
        (void)kernels_ready(c);
    lms_status_t status = use_context(c);
    if (status != LMS_OK)
        return status;
    timed_t t;
    bool timed = observing(c) && timed_begin(c, (CUstream)stream, &t);
    CUresult r = c->drv.cuLaunchHostFunc((CUstream)stream, fn, arg);
    if (timed)
        timed_end(c, &t, r == CUDA_SUCCESS, DEV_WORK_COMPUTE, "host_func", 0);
    if (r != CUDA_SUCCESS)
        return fail(&c->drv, r, "cuLaunchHostFunc(stream %p, fn %p, arg %p)", (void *)stream,
                    (void *)fn, arg);
    return LMS_OK;
}

/* ---- ops: test kernels ------------------------------------------------------ */

/* Frees what load_kernels made, in reverse; each field may be unset. */
static void unload_kernels(cuda_t *c, bool log)
{
    CUresult r;
    if (c->ring_host != NULL) {
        r = c->drv.cuMemFreeHost(c->ring_host);
        if (log)
            log_close_error(c, r, "cuMemFreeHost(checksum ring)");
        c->ring_host = NULL;
    }
    if (c->ring_dev != 0) {
        r = c->drv.cuMemFree(c->ring_dev);
        if (log)
            log_close_error(c, r, "cuMemFree(checksum ring)");
        c->ring_dev = 0;
    }
    base_meta_free(c->ring);
    c->ring = NULL;
    if (c->module != NULL) {
        r = c->drv.cuModuleUnload(c->module);
        if (log)
            log_close_error(c, r, "cuModuleUnload(test kernels)");
        c->module = NULL;
    }
}

/* Loads the module and makes the checksum ring. lock held, c's context
 * current. On failure nothing is left. */
static lms_status_t load_kernels(cuda_t *c)
{
    static const struct {
        const char *name;
        size_t offset;
    } kernels[] = {
        {"dev_fill_kernel", offsetof(cuda_t, fill_fn)},
        {"dev_checksum_kernel", offsetof(cuda_t, checksum_fn)},
        {"dev_axpy_kernel", offsetof(cuda_t, axpy_fn)},
        {"dev_k_gemm", offsetof(cuda_t, kernel_fn[DEV_KERNEL_GEMM])},
        {"dev_k_bias_act", offsetof(cuda_t, kernel_fn[DEV_KERNEL_BIAS_ACT])},
        {"dev_k_relu_back", offsetof(cuda_t, kernel_fn[DEV_KERNEL_RELU_BACK])},
        {"dev_k_colsum", offsetof(cuda_t, kernel_fn[DEV_KERNEL_COLSUM])},
        {"dev_k_xent", offsetof(cuda_t, kernel_fn[DEV_KERNEL_XENT])},
        {"dev_k_adam", offsetof(cuda_t, kernel_fn[DEV_KERNEL_ADAM])},
        {"dev_k_xent_mean", offsetof(cuda_t, xent_mean_fn)},
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
    CUresult r = c->drv.cuModuleLoadData(&c->module, image);
    base_meta_free(copy);
    if (r != CUDA_SUCCESS) {
        c->module = NULL;
        return fail(&c->drv, r, "cuModuleLoadData(test kernels, %zu-byte fatbin, device %d)",
                    dev_cuda_kernels_image_size, c->ordinal);
    }
    for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++) {
        CUfunction *fn = (CUfunction *)((char *)c + kernels[i].offset);
        r = c->drv.cuModuleGetFunction(fn, c->module, kernels[i].name);
        if (r != CUDA_SUCCESS) {
            status = fail(&c->drv, r, "cuModuleGetFunction(%s)", kernels[i].name);
            goto fail_unload;
        }
    }
    c->ring = base_meta_calloc(RING_SLOTS, sizeof *c->ring);
    if (c->ring == NULL) {
        status = base_fail(LMS_ERR_OUT_OF_MEMORY, "checksum: no host memory for a ring of %d slots",
                           RING_SLOTS);
        goto fail_unload;
    }
    r = c->drv.cuMemAlloc(&c->ring_dev, RING_SLOTS * sizeof(uint64_t));
    if (r != CUDA_SUCCESS) {
        c->ring_dev = 0;
        status = fail(&c->drv, r, "cuMemAlloc(%zu bytes of checksum ring)",
                      RING_SLOTS * sizeof(uint64_t));
        goto fail_unload;
    }
    void *host = NULL;
    r = c->drv.cuMemAllocHost(&host, RING_SLOTS * sizeof(uint64_t));
    if (r != CUDA_SUCCESS) {
        status = fail(&c->drv, r, "cuMemAllocHost(%zu bytes of checksum ring)",
                      RING_SLOTS * sizeof(uint64_t));
        goto fail_unload;
    }
    c->ring_host = host;
    for (size_t k = 0; k < RING_SLOTS; k++) {
        atomic_init(&c->ring[k].busy, false);
        c->ring[k].word = &c->ring_host[k];
    }
    atomic_init(&c->ring_next, 0);
    return LMS_OK;

fail_unload:
    unload_kernels(c, false);
    return status;
}

/* Ready to launch a test kernel: kernels present, module loaded (once, here),
 * c's context current (checked: a kernel must be launched from its stream's
 * context). */
static lms_status_t kernels_ready(cuda_t *c)
{
    if (c->no_kernels[0] != '\0')
        return base_fail(LMS_ERR_UNSUPPORTED, "%s", c->no_kernels);
    lms_status_t status = use_context_checked(c);
    if (status != LMS_OK)
        return status;
    if (atomic_load_explicit(&c->kernels_loaded, memory_order_acquire))
        return LMS_OK;
    pthread_mutex_lock(&c->lock);
    if (!atomic_load_explicit(&c->kernels_loaded, memory_order_relaxed)) {
        status = load_kernels(c);
        if (status == LMS_OK)
            atomic_store_explicit(&c->kernels_loaded, true, memory_order_release);
    }
    pthread_mutex_unlock(&c->lock);
    return status;
}

/* Enough blocks of KERNEL_THREADS for `items` grid-stride items, at least 1,
 * at most max_blocks. */
static lms_status_t launch(cuda_t *c, CUfunction fn, const char *name, uint64_t items,
                           dev_stream_t *stream, void **args)
{
    uint64_t blocks = items / KERNEL_THREADS + (items % KERNEL_THREADS != 0);
    if (blocks == 0)
        blocks = 1;
    if (blocks > c->max_blocks)
        blocks = c->max_blocks;
    CUresult r = c->drv.cuLaunchKernel(fn, (unsigned)blocks, 1, 1, KERNEL_THREADS, 1, 1, 0,
                                       (CUstream)stream, args, NULL);
    if (r != CUDA_SUCCESS)
        return fail(&c->drv, r, "cuLaunchKernel(%s, %" PRIu64 " blocks of %d threads, stream %p)",
                    name, blocks, KERNEL_THREADS, (void *)stream);
    return LMS_OK;
}

static lms_status_t fill(void *self, dev_stream_t *stream, dev_addr_t dst, size_t n,
                         uint64_t seed)
{
    cuda_t *c = self;
    lms_status_t status = kernels_ready(c);
    if (status != LMS_OK)
        return status;
    CUdeviceptr dst_p = dst;
    unsigned long long n_ll = n, seed_ll = seed;
    void *args[] = {&dst_p, &n_ll, &seed_ll};
    timed_t t;
    bool timed = observing(c) && timed_begin(c, (CUstream)stream, &t);
    status = launch(c, c->fill_fn, "dev_fill_kernel", n / 8 + 1, stream, args);
    if (timed)
        timed_end(c, &t, status == LMS_OK, DEV_WORK_COMPUTE, "fill", 0);
    return status;
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
static ring_slot_t *claim_slot(cuda_t *c)
{
    unsigned start = atomic_fetch_add_explicit(&c->ring_next, 1, memory_order_relaxed);
    for (unsigned i = 0; i < RING_SLOTS; i++) {
        ring_slot_t *slot = &c->ring[(start + i) % RING_SLOTS];
        if (!atomic_load_explicit(&slot->busy, memory_order_relaxed) &&
            !atomic_exchange_explicit(&slot->busy, true, memory_order_acquire))
            return slot;
    }
    return NULL;
}

static lms_status_t checksum(void *self, dev_stream_t *stream, dev_addr_t src, size_t n,
                             uint64_t *out)
{
    cuda_t *c = self;
    lms_status_t status = kernels_ready(c);
    if (status != LMS_OK)
        return status;
    ring_slot_t *slot = claim_slot(c);
    if (slot == NULL)
        return base_fail(LMS_ERR_UNSUPPORTED,
                         "checksum: %d checksums are already in flight on device %d, the most the "
                         "cuda backend allows; synchronize their streams first",
                         RING_SLOTS, c->ordinal);
    slot->out = out;
    /* the four steps are timed as one piece of work */
    timed_t t;
    bool timed = observing(c) && timed_begin(c, (CUstream)stream, &t);
    CUdeviceptr word = c->ring_dev + (CUdeviceptr)(slot - c->ring) * sizeof(uint64_t);
    CUresult r = c->drv.cuMemsetD8Async(word, 0, sizeof(uint64_t), (CUstream)stream);
    if (r != CUDA_SUCCESS) {
        status = fail(&c->drv, r, "cuMemsetD8Async(checksum word, 8 bytes, stream %p)",
                      (void *)stream);
        goto fail_free_slot;
    }
    CUdeviceptr src_p = src;
    unsigned long long n_ll = n;
    void *args[] = {&src_p, &n_ll, &word};
    status = launch(c, c->checksum_fn, "dev_checksum_kernel", n / 8 + 1, stream, args);
    if (status != LMS_OK)
        goto fail_keep_slot;
    r = c->drv.cuMemcpyDtoHAsync((void *)slot->word, word, sizeof(uint64_t), (CUstream)stream);
    if (r != CUDA_SUCCESS) {
        status = fail(&c->drv, r, "cuMemcpyDtoHAsync(checksum word, 8 bytes, stream %p)",
                      (void *)stream);
        goto fail_keep_slot;
    }
    r = c->drv.cuLaunchHostFunc((CUstream)stream, deliver_checksum, slot);
    if (r != CUDA_SUCCESS) {
        status = fail(&c->drv, r, "cuLaunchHostFunc(stream %p, deliver checksum)", (void *)stream);
        goto fail_keep_slot;
    }
    if (timed)
        timed_end(c, &t, true, DEV_WORK_COMPUTE, "checksum", 0);
    return LMS_OK;

fail_keep_slot:
    /* Work already queued still writes the slot's words: it stays busy for
     * good (see Note [Checksum ring]). */
    if (timed)
        timed_end(c, &t, false, DEV_WORK_COMPUTE, "checksum", 0);
    return status;
fail_free_slot:
    if (timed)
        timed_end(c, &t, false, DEV_WORK_COMPUTE, "checksum", 0);
    atomic_store_explicit(&slot->busy, false, memory_order_release);
    return status;
}

static lms_status_t axpy(void *self, dev_stream_t *stream, size_t n, float a, dev_addr_t x,
                         dev_addr_t y)
{
    cuda_t *c = self;
    lms_status_t status = kernels_ready(c);
    if (status != LMS_OK)
        return status;
    unsigned long long n_ll = n;
    CUdeviceptr x_p = x, y_p = y;
    void *args[] = {&n_ll, &a, &x_p, &y_p};
    timed_t t;
    bool timed = observing(c) && timed_begin(c, (CUstream)stream, &t);
    status = launch(c, c->axpy_fn, "dev_axpy_kernel", n, stream, args);
    if (timed)
        timed_end(c, &t, status == LMS_OK, DEV_WORK_COMPUTE, "axpy", 0);
    return status;
}

/* The training kernels take dev_kernel_args_t by value, as kernels.cu's
 * kargs, whose size it asserts to be this. */
_Static_assert(sizeof(dev_kernel_args_t) == 72, "kernels.cu's kargs restates dev_kernel_args_t");
#define GEMM_TILE 16 /* = kernels.cu's: GEMM runs blocks of GEMM_TILE x GEMM_TILE threads */

static lms_status_t launch_kernel(cuda_t *c, dev_stream_t *stream, const dev_kernel_args_t *a)
{
    lms_status_t status;
    dev_kernel_args_t copy = *a; /* cuLaunchKernel copies the parameters at the call */
    void *args[] = {&copy};
    const char *name = dev_kernel_name(a->kernel);
    switch (a->kernel) {
    case DEV_KERNEL_GEMM: {
        unsigned gx = (a->n + GEMM_TILE - 1) / GEMM_TILE, gy = (a->m + GEMM_TILE - 1) / GEMM_TILE;
        CUresult r = c->drv.cuLaunchKernel(c->kernel_fn[DEV_KERNEL_GEMM], gx, gy, 1, GEMM_TILE,
                                           GEMM_TILE, 1, 0, (CUstream)stream, args, NULL);
        if (r != CUDA_SUCCESS)
            return fail(&c->drv, r, "cuLaunchKernel(gemm, %ux%u blocks, stream %p)", gx, gy,
                        (void *)stream);
        return LMS_OK;
    }
    case DEV_KERNEL_COLSUM:
        return launch(c, c->kernel_fn[a->kernel], name, a->n, stream, args);
    case DEV_KERNEL_XENT:
        status = launch(c, c->kernel_fn[a->kernel], name, a->m, stream, args);
        return status != LMS_OK ? status : launch(c, c->xent_mean_fn, "xent_mean", 1, stream, args);
    case DEV_KERNEL_ADAM:
        return launch(c, c->kernel_fn[a->kernel], name, a->n, stream, args);
    default: /* BIAS_ACT, RELU_BACK: one item per element */
        return launch(c, c->kernel_fn[a->kernel], name, (uint64_t)a->m * a->n, stream, args);
    }
}

static lms_status_t kernel(void *self, dev_stream_t *stream, const dev_kernel_args_t *a)
{
    cuda_t *c = self;
    lms_status_t status = kernels_ready(c);
    if (status != LMS_OK)
        return status;
    timed_t t;
    bool timed = observing(c) && timed_begin(c, (CUstream)stream, &t);
    status = launch_kernel(c, stream, a);
    if (timed)
        timed_end(c, &t, status == LMS_OK, DEV_WORK_COMPUTE, dev_kernel_name(a->kernel), 0);
    return status;
}

/* ---- open and close --------------------------------------------------------- */

/* *fn = the entry point `name` at `version`; LMS_ERR_NO_DEVICE if the driver
 * does not have it. See Note [Resolving the driver]. */
static lms_status_t resolve(cuda_t *c, get_proc_t *get_proc, const char *name, int version,
                            void **fn)
{
    CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    void *p = NULL;
    CUresult r = get_proc(name, &p, version, CU_GET_PROC_ADDRESS_DEFAULT, &found);
    if (r != CUDA_SUCCESS) {
        char text[192];
        error_text(&c->drv, r, text, sizeof text);
        return base_fail(LMS_ERR_NO_DEVICE, "cuda: cuGetProcAddress(%s, CUDA %d.%d): %s", name,
                         version / 1000, version % 1000 / 10, text);
    }
    if (found != CU_GET_PROC_ADDRESS_SUCCESS || p == NULL)
        return base_fail(LMS_ERR_NO_DEVICE,
                         "cuda: the NVIDIA driver has no %s for CUDA %d.%d (%s); update the driver",
                         name, version / 1000, version % 1000 / 10,
                         found == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                             ? "version not sufficient"
                             : "symbol not found");
    *fn = p;
    return LMS_OK;
}

/* Opens libcuda and fills c->drv; on failure libcuda is closed again. */
static lms_status_t load_driver(cuda_t *c)
{
    lms_status_t status;
    c->libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (c->libcuda == NULL)
        return base_fail(LMS_ERR_NO_DEVICE,
                         "cuda: cannot load libcuda.so.1 (%s): no NVIDIA driver is installed, "
                         "or it is not on the library path",
                         dlerror());

    void *sym = dlsym(c->libcuda, "cuGetProcAddress_v2");
    if (sym == NULL) {
        status = base_fail(LMS_ERR_NO_DEVICE,
                           "cuda: libcuda.so.1 has no cuGetProcAddress_v2: the NVIDIA driver is "
                           "older than CUDA 12.0, and liblms needs one for CUDA %d.%d or later",
                           CUDA_VERSION / 1000, CUDA_VERSION % 1000 / 10);
        goto fail_close;
    }
    get_proc_t *get_proc;
    memcpy(&get_proc, &sym, sizeof get_proc);

    /* The driver's version first, asked for at 12.0: see Note [Resolving the driver]. */
    void *p = NULL;
    status = resolve(c, get_proc, "cuDriverGetVersion", 12000, &p);
    if (status != LMS_OK)
        goto fail_close;
    __typeof__(cuDriverGetVersion) *driver_version;
    memcpy(&driver_version, &p, sizeof driver_version);
    int version = 0;
    CUresult r = driver_version(&version);
    if (r != CUDA_SUCCESS) {
        char text[192];
        error_text(&c->drv, r, text, sizeof text);
        status = base_fail(LMS_ERR_NO_DEVICE, "cuda: cuDriverGetVersion(): %s", text);
        goto fail_close;
    }
    if (version < CUDA_VERSION) {
        status = base_fail(LMS_ERR_NO_DEVICE,
                           "cuda: the NVIDIA driver supports CUDA %d.%d, but liblms was built "
                           "with CUDA %d.%d headers and needs a driver at least that new",
                           version / 1000, version % 1000 / 10, CUDA_VERSION / 1000,
                           CUDA_VERSION % 1000 / 10);
        goto fail_close;
    }

    for (size_t i = 0; i < sizeof driver_syms / sizeof driver_syms[0]; i++) {
        status = resolve(c, get_proc, driver_syms[i].name, CUDA_VERSION, &p);
        if (status != LMS_OK)
            goto fail_close;
        memcpy((char *)&c->drv + driver_syms[i].offset, &p, sizeof p);
    }
    return LMS_OK;

fail_close:
    dlclose(c->libcuda);
    c->libcuda = NULL;
    return status;
}

static lms_status_t device_attribute(cuda_t *c, CUdevice_attribute attr, const char *name,
                                     int *value)
{
    CUresult r = c->drv.cuDeviceGetAttribute(value, attr, c->device);
    if (r != CUDA_SUCCESS)
        return fail(&c->drv, r, "cuDeviceGetAttribute(%s, device %d)", name, c->ordinal);
    return LMS_OK;
}

/* The NUMA node of the host memory nearest the device, -1 if unknown: the
 * driver's CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID when it knows (CUDA 12.2 and
 * later; -1 without NUMA), else the PCI device's numa_node in sysfs. */
static int host_numa_node(cuda_t *c)
{
    int node = -1;
    if (c->drv.cuDeviceGetAttribute(&node, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, c->device) ==
            CUDA_SUCCESS &&
        node >= 0)
        return node;

    /* "[domain]:[bus]:[device].[function]" in hex; sysfs spells it
     * 0000:3b:00.0 (4-digit domain, lower case). */
    char bus_id[64];
    unsigned domain, bus, dev, fn;
    if (c->drv.cuDeviceGetPCIBusId(bus_id, (int)sizeof bus_id, c->device) != CUDA_SUCCESS ||
        sscanf(bus_id, "%x:%x:%x.%x", &domain, &bus, &dev, &fn) != 4)
        return -1;
    char path[128];
    snprintf(path, sizeof path, "/sys/bus/pci/devices/%04x:%02x:%02x.%x/numa_node", domain, bus,
             dev, fn);
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return -1;
    if (fscanf(f, "%d", &node) != 1 || node < 0)
        node = -1;
    fclose(f);
    return node;
}

static void close_backend(void *self)
{
    cuda_t *c = self;
    /* Direct, not use_context(): close must not touch the thread's last error. */
    CUresult r = c->drv.cuCtxSetCurrent(c->ctx);
    log_close_error(c, r, "cuCtxSetCurrent(primary context)");
    if (r == CUDA_SUCCESS)
        current_id = c->id;
    if (atomic_load_explicit(&c->kernels_loaded, memory_order_acquire)) {
        /* Checksums still queued would write the ring. The caller has waited
         * for its work already (device.h, "Who waits"); this is cheap then. */
        if (r == CUDA_SUCCESS)
            log_close_error(c, CTX_SYNCHRONIZE(c), "cuCtxSynchronize()");
        unload_kernels(c, true);
    }
    release_observer(c);
    log_close_error(c, c->drv.cuDevicePrimaryCtxRelease(c->device), "cuDevicePrimaryCtxRelease");
    dlclose(c->libcuda);
    pthread_mutex_destroy(&c->lock);
    pthread_mutex_destroy(&c->observe_lock);
    base_meta_free(c->adopted);
    base_meta_free(c);
}

static const dev_ops_t cuda_ops = {
    .name = "cuda",
    .close = close_backend,
    .mem_info = mem_info,
    .va_reserve = va_reserve,
    .va_free = va_free,
    .block_create = block_create,
    .block_release = block_release,
    .map = map,
    .set_access = set_access,
    .unmap = unmap,
    .host_register = host_register,
    .host_unregister = host_unregister,
    .stream_create = stream_create,
    .stream_adopt = stream_adopt,
    .stream_destroy = stream_destroy,
    .stream_synchronize = stream_synchronize,
    .event_create = event_create,
    .event_destroy = event_destroy,
    .event_record = event_record,
    .event_query = event_query,
    .event_synchronize = event_synchronize,
    .stream_wait_event = stream_wait_event,
    .copy_h2d = copy_h2d,
    .copy_d2h = copy_d2h,
    .copy_d2d = copy_d2d,
    .host_func = host_func,
    .fill = fill,
    .checksum = checksum,
    .axpy = axpy,
    .kernel = kernel,
    .set_observer = set_observer,
};

lms_status_t dev_cuda_open(int ordinal, dev_layer_t *out, dev_info_t *info)
{
    lms_status_t status;
    CUresult r;
    cuda_t *c = base_meta_calloc(1, sizeof *c);
    if (c == NULL)
        return base_fail(LMS_ERR_OUT_OF_MEMORY, "cuda: no host memory for the backend's state");
    c->ordinal = ordinal;
    c->id = atomic_fetch_add(&next_id, 1);
    atomic_init(&c->kernels_loaded, false);
    atomic_init(&c->observing, false);
    atomic_init(&c->next_poll_ns, 0);
    if (pthread_mutex_init(&c->lock, NULL) != 0) {
        status = base_fail(LMS_ERR_SYSTEM, "cuda: pthread_mutex_init failed");
        goto fail_free;
    }
    if (pthread_mutex_init(&c->observe_lock, NULL) != 0) {
        pthread_mutex_destroy(&c->lock);
        status = base_fail(LMS_ERR_SYSTEM, "cuda: pthread_mutex_init failed");
        goto fail_free;
    }

    status = load_driver(c);
    if (status != LMS_OK)
        goto fail_destroy_lock;

    r = c->drv.cuInit(0);
    if (r != CUDA_SUCCESS) {
        /* Whatever cuInit says, there is no device to use. */
        (void)fail(&c->drv, r, "cuda: cuInit(0), the driver found no usable device");
        status = LMS_ERR_NO_DEVICE;
        goto fail_close_driver;
    }
    r = c->drv.cuDeviceGet(&c->device, ordinal);
    if (r != CUDA_SUCCESS) {
        int count = 0;
        if (c->drv.cuDeviceGetCount(&count) != CUDA_SUCCESS)
            count = 0;
        (void)fail(&c->drv, r, "cuda: cuDeviceGet(ordinal %d), the driver sees %d device(s)",
                   ordinal, count);
        status = LMS_ERR_NO_DEVICE;
        goto fail_close_driver;
    }

    int vmm = 0, cc_major = 0, cc_minor = 0, sm_count = 0;
    if ((status = device_attribute(c, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
                                   "VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED", &vmm)) != LMS_OK ||
        (status = device_attribute(c, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                                   "COMPUTE_CAPABILITY_MAJOR", &cc_major)) != LMS_OK ||
        (status = device_attribute(c, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                                   "COMPUTE_CAPABILITY_MINOR", &cc_minor)) != LMS_OK ||
        (status = device_attribute(c, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                                   "MULTIPROCESSOR_COUNT", &sm_count)) != LMS_OK)
        goto fail_close_driver;
    if (!vmm) {
        status = base_fail(LMS_ERR_UNSUPPORTED,
                           "cuda: device %d does not support virtual memory management "
                           "(cuMemCreate, cuMemMap), which lms is built on",
                           ordinal);
        goto fail_close_driver;
    }
    c->max_blocks = (unsigned)(sm_count > 0 ? sm_count : 1) * BLOCKS_PER_SM;
    if (dev_cuda_kernels_image_size == 0)
        snprintf(c->no_kernels, sizeof c->no_kernels,
                 "liblms was built without nvcc: the cuda backend has no test kernels "
                 "(fill, checksum, axpy)");
    else if (cc_major < 9)
        snprintf(c->no_kernels, sizeof c->no_kernels,
                 "the test kernels are built for sm_90 and later; device %d is sm_%d%d", ordinal,
                 cc_major, cc_minor);

    r = c->drv.cuDevicePrimaryCtxRetain(&c->ctx, c->device);
    if (r != CUDA_SUCCESS) {
        status = fail(&c->drv, r, "cuDevicePrimaryCtxRetain(device %d)", ordinal);
        goto fail_close_driver;
    }
    status = use_context_checked(c);
    if (status != LMS_OK)
        goto fail_release_ctx;

    int least = 0;
    r = c->drv.cuCtxGetStreamPriorityRange(&least, &c->high_priority);
    if (r != CUDA_SUCCESS) {
        status = fail(&c->drv, r, "cuCtxGetStreamPriorityRange(device %d)", ordinal);
        goto fail_release_ctx;
    }

    c->block_prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    c->block_prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    c->block_prop.location.id = ordinal;
    c->access.location = c->block_prop.location;
    c->access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    r = c->drv.cuMemGetAllocationGranularity(&c->granularity, &c->block_prop,
                                             CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    if (r != CUDA_SUCCESS) {
        status = fail(&c->drv, r, "cuMemGetAllocationGranularity(pinned, device %d, minimum)",
                      ordinal);
        goto fail_release_ctx;
    }
    if (c->granularity == 0 || (c->granularity & (c->granularity - 1)) != 0) {
        status = base_fail(LMS_ERR_DEVICE, "cuda: device %d reports granularity %zu, not a power of two",
                           ordinal, c->granularity);
        goto fail_release_ctx;
    }

    dev_info_t found = {.backend = "cuda", .ordinal = ordinal, .granularity = c->granularity};
    r = c->drv.cuDeviceGetName(found.name, (int)sizeof found.name, c->device);
    if (r != CUDA_SUCCESS) {
        status = fail(&c->drv, r, "cuDeviceGetName(device %d)", ordinal);
        goto fail_release_ctx;
    }
    r = c->drv.cuDeviceTotalMem(&found.total_memory, c->device);
    if (r != CUDA_SUCCESS) {
        status = fail(&c->drv, r, "cuDeviceTotalMem(device %d)", ordinal);
        goto fail_release_ctx;
    }
    found.host_numa_node = host_numa_node(c);
    found.has_kernels = c->no_kernels[0] == '\0';

    *info = found;
    out->ops = &cuda_ops;
    out->self = c;
    return LMS_OK;

fail_release_ctx:
    c->drv.cuDevicePrimaryCtxRelease(c->device);
fail_close_driver:
    dlclose(c->libcuda);
fail_destroy_lock:
    pthread_mutex_destroy(&c->lock);
    pthread_mutex_destroy(&c->observe_lock);
fail_free:
    base_meta_free(c);
    return status;
}
