/*
 * device/cuda.c — the cuda backend: the ops of device.h on a real GPU, through
 * the CUDA driver API.
 *
 * Owns, for each open device (a cuda_t):
 *   - a handle on libcuda.so.1 from dlopen: liblms is never linked against
 *     libcuda, so it loads on a machine with no driver;
 *   - the driver's entry points, resolved at open from one list,
 *     DRIVER_FUNCS (see Note [Resolving the driver] in cuda_driver.c);
 *   - one reference on the device's primary context (see Note [Current context]);
 *   - while an observer is set, and from then on: the timing events of the
 *     work not yet reported, and a base event with its stream (see Note
 *     [Timing work on the GPU]; not yet run on a GPU).
 * What the ops hand out is the driver's own object, cast: a dev_stream_t * is
 * a CUstream, a dev_event_t * a CUevent, a dev_block_t a
 * CUmemGenericAllocationHandle. This file keeps no table of them (but the
 * list of adopted streams, the program's, which destroy must not destroy)
 * and checks no argument; the check layer above it does both (check.c). It
 * must still never crash on what the driver rejects: every CUresult becomes
 * a status through dev_cuda_fail().
 *
 * Invariants: every field of cuda_t except the adopted list and the
 * observer's state is set by dev_cuda_open and never changes.
 *
 * Locks: lock guards the adopted list. observe_lock guards the observer's
 * state and is held while the observer is called (it calls no op).
 * Everything else is read-only after open and the driver is thread-safe, so
 * the ops run concurrently without a lock.
 */
#include "device/layer.h"

#include "base/base.h"
#include "device/cuda_driver.h"

#include <dlfcn.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(dev_addr_t) == sizeof(CUdeviceptr), "a dev_addr_t holds a CUdeviceptr");
_Static_assert(sizeof(dev_block_t) == sizeof(CUmemGenericAllocationHandle),
               "a dev_block_t holds a CUmemGenericAllocationHandle");

/* Every driver function the backend calls, by base name. */
#define DRIVER_FUNCS(X)                                                                      \
    /* initialization, devices */                                                           \
    X(cuInit) X(cuDeviceGet) X(cuDeviceGetCount)                                            \
    X(cuDeviceGetName) X(cuDeviceTotalMem) X(cuDeviceGetAttribute) X(cuDeviceGetPCIBusId)   \
    /* contexts */                                                                          \
    X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease) X(cuCtxGetCurrent)             \
    X(cuCtxSetCurrent) X(cuCtxGetStreamPriorityRange)                                       \
    /* memory */                                                                            \
    X(cuMemGetInfo) X(cuMemGetAllocationGranularity) X(cuMemAddressReserve)                 \
    X(cuMemAddressFree) X(cuMemCreate) X(cuMemRelease) X(cuMemMap) X(cuMemSetAccess)        \
    X(cuMemUnmap) X(cuMemHostRegister) X(cuMemHostUnregister)                               \
    /* streams, events, copies, host functions */                                           \
    X(cuStreamCreateWithPriority) X(cuStreamDestroy) X(cuStreamSynchronize) X(cuStreamQuery) \
    X(cuEventCreate) X(cuEventDestroy) X(cuEventRecord) X(cuEventQuery)                     \
    X(cuEventSynchronize) X(cuEventElapsedTime) X(cuStreamWaitEvent) X(cuMemcpyHtoDAsync)  \
    X(cuMemcpyDtoHAsync) X(cuMemcpyDtoDAsync) X(cuLaunchHostFunc)

/* The entry points. A field's name is what cuda.h makes of the base name
 * (cuMemGetInfo_v2 for cuMemGetInfo), and so is every call through it. */
typedef struct driver {
#define DRIVER_FIELD(fn) __typeof__(fn) *fn;
    DRIVER_FUNCS(DRIVER_FIELD)
#undef DRIVER_FIELD
} driver_t;

static const dev_cuda_sym_t driver_syms[] = {
#define DRIVER_SYM(fn) {#fn, offsetof(driver_t, fn)},
    DRIVER_FUNCS(DRIVER_SYM)
#undef DRIVER_SYM
};

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
 * and events, host registration, mem_info, launches: a kernel must be
 * launched from its stream's context) call
 * use_context_checked(), which asks the driver (cuCtxGetCurrent, cheap).
 *
 * Consequence for callers: a thread that has called an op has this device's
 * primary context current afterwards, whatever it had before.
 */
static _Thread_local uint64_t current_id; /* 0: none yet */
static atomic_uint_fast64_t next_id = 1;

/*
 * Note [Timing work on the GPU]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * NOT YET RUN ON A GPU: no GPU was lent to the session that wrote this. The
 * sim implements the same contract (device.h, set_observer) and is tested;
 * test_device's observer test is registered for the gpu label and checks
 * this code where a GPU is.
 *
 * While an observer is set, each copy, host function and launch is
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

typedef struct cuda {
    driver_t drv;      /* entry points, resolved at open */
    void *libcuda;     /* dlopen handle */
    uint64_t id;       /* unique among opens: see Note [Current context] */
    int ordinal;
    CUdevice device;
    CUcontext ctx;     /* the device's primary context, retained */
    size_t granularity;
    int high_priority; /* the device's greatest stream priority */
    CUmemAllocationProp block_prop; /* one pinned block on this device */
    CUmemAccessDesc access;         /* read/write for this device */

    pthread_mutex_t lock;         /* guards `adopted` */
    CUstream *adopted;            /* the program's streams adopted, once per adoption */
    size_t nadopted, capadopted;

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

static void log_close_error(const cuda_t *c, CUresult r, const char *call)
{
    dev_cuda_log_close(c->ordinal, r, call);
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
        return dev_cuda_fail(r, "cuCtxSetCurrent(primary context of device %d)", c->ordinal);
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
        return dev_cuda_fail(r, "cuCtxGetCurrent()");
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
        return dev_cuda_fail(r, "cuStreamCreateWithPriority(non-blocking, the observer's base)");
    }
    r = c->drv.cuEventCreate(&c->base_event, CU_EVENT_DEFAULT);
    if (r != CUDA_SUCCESS) {
        c->base_event = NULL;
        status = dev_cuda_fail(r, "cuEventCreate(timing, the observer's base)");
        goto fail_stream;
    }
    if ((r = c->drv.cuEventRecord(c->base_event, c->base_stream)) != CUDA_SUCCESS ||
        (r = c->drv.cuEventSynchronize(c->base_event)) != CUDA_SUCCESS) {
        status = dev_cuda_fail(r, "cuEventRecord/cuEventSynchronize(the observer's base event)");
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
        return dev_cuda_fail(r, "cuMemGetInfo(device %d)", c->ordinal);
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
        return dev_cuda_fail(r, "cuMemAddressReserve(%zu bytes, alignment %zu)", size,
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
        return dev_cuda_fail(r, "cuMemAddressFree(0x%" PRIx64 ", %zu bytes)", base, size);
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
        return dev_cuda_fail(r, "cuMemCreate(%zu bytes, pinned, device %d)", c->granularity,
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
        return dev_cuda_fail(r, "cuMemRelease(block 0x%" PRIx64 ")", block);
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
        return dev_cuda_fail(r, "cuMemMap(va 0x%" PRIx64 ", %zu bytes, block 0x%" PRIx64 ")", va,
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
        return dev_cuda_fail(r, "cuMemSetAccess(va 0x%" PRIx64 ", %zu bytes, read/write for device %d)",
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
            return dev_cuda_fail(r,
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
        return dev_cuda_fail(r, "cuMemHostRegister(%p, %zu bytes, portable)", ptr, size);
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
        return dev_cuda_fail(r, "cuMemHostUnregister(%p)", ptr);
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
        return dev_cuda_fail(r, "cuStreamCreateWithPriority(non-blocking, priority %d)", prio);
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
        return dev_cuda_fail(r, "cuStreamQuery(stream 0x%" PRIx64 "), adopting it", native);
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
        return dev_cuda_fail(r, "cuStreamDestroy(stream %p)", (void *)stream);
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
        return dev_cuda_fail(r, "cuStreamSynchronize(stream %p)", (void *)stream);
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
        return dev_cuda_fail(r, "cuEventCreate(disable timing)");
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
        return dev_cuda_fail(r, "cuEventDestroy(event %p)", (void *)event);
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
        return dev_cuda_fail(r, "cuEventRecord(event %p, stream %p)", (void *)event,
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
    return dev_cuda_fail(r, "cuEventQuery(event %p)", (void *)event);
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
        return dev_cuda_fail(r, "cuEventSynchronize(event %p)", (void *)event);
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
        return dev_cuda_fail(r, "cuStreamWaitEvent(stream %p, event %p)", (void *)stream,
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
        return dev_cuda_fail(r, "cuMemcpyHtoDAsync(dst 0x%" PRIx64 ", src %p, %zu bytes, stream %p)",
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
        return dev_cuda_fail(r, "cuMemcpyDtoHAsync(dst %p, src 0x%" PRIx64 ", %zu bytes, stream %p)",
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
        return dev_cuda_fail(r,
                    "cuMemcpyDtoDAsync(dst 0x%" PRIx64 ", src 0x%" PRIx64 ", %zu bytes, stream %p)",
                    dst, src, n, (void *)stream);
    return LMS_OK;
}

/* Host functions run one at a time, on one driver thread, and may be held
 * back by the caller (tests gate a stream with one that waits for a flag);
 * see Note [Kernels load at open] in kernels/cuda.c for what waits meanwhile. */
static lms_status_t host_func(void *self, dev_stream_t *stream, dev_host_fn_t fn, void *arg)
{
    cuda_t *c = self;
    lms_status_t status = use_context(c);
    if (status != LMS_OK)
        return status;
    timed_t t;
    bool timed = observing(c) && timed_begin(c, (CUstream)stream, &t);
    CUresult r = c->drv.cuLaunchHostFunc((CUstream)stream, fn, arg);
    if (timed)
        timed_end(c, &t, r == CUDA_SUCCESS, DEV_WORK_COMPUTE, "host_func", 0);
    if (r != CUDA_SUCCESS)
        return dev_cuda_fail(r, "cuLaunchHostFunc(stream %p, fn %p, arg %p)", (void *)stream,
                    (void *)fn, arg);
    return LMS_OK;
}

/* ---- ops: launches ---------------------------------------------------------- */

/* The launch's enqueue runs with the context current, checked: a kernel must
 * be launched from its stream's context. */
static lms_status_t launch(void *self, dev_stream_t *stream, const dev_launch_t *l)
{
    cuda_t *c = self;
    lms_status_t status = use_context_checked(c);
    if (status != LMS_OK)
        return status;
    timed_t t;
    bool timed = observing(c) && timed_begin(c, (CUstream)stream, &t);
    status = l->enqueue(l->ctx, (uint64_t)(uintptr_t)stream, l->args);
    if (timed)
        timed_end(c, &t, status == LMS_OK, DEV_WORK_COMPUTE, l->name, 0);
    return status;
}

/* ---- open and close --------------------------------------------------------- */

/* Opens libcuda and fills c->drv; on failure libcuda is closed again. */
static lms_status_t load_driver(cuda_t *c)
{
    dev_cuda_get_proc_t *get_proc;
    lms_status_t status = dev_cuda_driver_open(&c->libcuda, &get_proc);
    if (status != LMS_OK)
        return status;
    status = dev_cuda_resolve(get_proc, driver_syms, sizeof driver_syms / sizeof driver_syms[0],
                              &c->drv);
    if (status != LMS_OK) {
        dlclose(c->libcuda);
        c->libcuda = NULL;
    }
    return status;
}

static lms_status_t device_attribute(cuda_t *c, CUdevice_attribute attr, const char *name,
                                     int *value)
{
    CUresult r = c->drv.cuDeviceGetAttribute(value, attr, c->device);
    if (r != CUDA_SUCCESS)
        return dev_cuda_fail(r, "cuDeviceGetAttribute(%s, device %d)", name, c->ordinal);
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
    .launch = launch,
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
        (void)dev_cuda_fail(r, "cuda: cuInit(0), the driver found no usable device");
        status = LMS_ERR_NO_DEVICE;
        goto fail_close_driver;
    }
    r = c->drv.cuDeviceGet(&c->device, ordinal);
    if (r != CUDA_SUCCESS) {
        int count = 0;
        if (c->drv.cuDeviceGetCount(&count) != CUDA_SUCCESS)
            count = 0;
        (void)dev_cuda_fail(r, "cuda: cuDeviceGet(ordinal %d), the driver sees %d device(s)",
                   ordinal, count);
        status = LMS_ERR_NO_DEVICE;
        goto fail_close_driver;
    }

    int vmm = 0;
    status = device_attribute(c, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
                              "VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED", &vmm);
    if (status != LMS_OK)
        goto fail_close_driver;
    if (!vmm) {
        status = base_fail(LMS_ERR_UNSUPPORTED,
                           "cuda: device %d does not support virtual memory management "
                           "(cuMemCreate, cuMemMap), which lms is built on",
                           ordinal);
        goto fail_close_driver;
    }

    r = c->drv.cuDevicePrimaryCtxRetain(&c->ctx, c->device);
    if (r != CUDA_SUCCESS) {
        status = dev_cuda_fail(r, "cuDevicePrimaryCtxRetain(device %d)", ordinal);
        goto fail_close_driver;
    }
    status = use_context_checked(c);
    if (status != LMS_OK)
        goto fail_release_ctx;

    int least = 0;
    r = c->drv.cuCtxGetStreamPriorityRange(&least, &c->high_priority);
    if (r != CUDA_SUCCESS) {
        status = dev_cuda_fail(r, "cuCtxGetStreamPriorityRange(device %d)", ordinal);
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
        status = dev_cuda_fail(r, "cuMemGetAllocationGranularity(pinned, device %d, minimum)",
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
        status = dev_cuda_fail(r, "cuDeviceGetName(device %d)", ordinal);
        goto fail_release_ctx;
    }
    r = c->drv.cuDeviceTotalMem(&found.total_memory, c->device);
    if (r != CUDA_SUCCESS) {
        status = dev_cuda_fail(r, "cuDeviceTotalMem(device %d)", ordinal);
        goto fail_release_ctx;
    }
    found.host_numa_node = host_numa_node(c);

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
