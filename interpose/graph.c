/*
 * interpose/graph.c — CUDA graph capture: what a captured call touches is
 * pinned for the life of the graphs made from the capture (internal.h).
 *
 * Note [Graph capture]
 * A call made on a stream being captured does not run: CUDA records it in
 * a graph, which runs at each graph launch, possibly many times, long after.
 * lms cannot fault memory in for it then, and a capture forbids waiting on
 * or recording events from outside it. So:
 *  - Before a capture begins on a stream, lms lets go of the stream
 *    (lms_stream_unadopt: it waits for the stream's queued work), so that
 *    no eviction records an event on it while it is captured; the stream is
 *    adopted again at its first call after the capture.
 *  - A stream joins a capture when it waits for an event recorded on one
 *    of the capture's streams. While a capture is in progress, lms lets go
 *    of a stream that is about to wait for an event (it cannot tell a
 *    capture's event from another), unless the stream is captured
 *    already: the join comes after, so lms records nothing on the stream
 *    during the capture either. Outside captures a wait costs one load.
 *  - A launch, copy, memset or collective on a stream being captured pins
 *    the whole lms allocations it touches (lms_pin: resident now, waited
 *    for on the host, for any stream) instead of making them resident on the
 *    stream: nothing lms does goes into the graph. The pins belong to the
 *    capture (by its id, which every stream joined to it shares).
 *  - The capture's graph takes its pins; each executable graph made from it
 *    (instantiate) and each clone holds them too; the last one destroyed
 *    drops them. An executable graph may still be running when it is
 *    destroyed (CUDA defers its end): its last holder waits for the device
 *    (cuCtxSynchronize) before unpinning.
 *  - A freed allocation leaves every capture's pins (its memory's pins go
 *    with it), so that a later unpin cannot reach an allocation made since
 *    at the same address.
 *  - lms's calls during a capture run in the relaxed capture mode
 *    (cuThreadExchangeStreamCaptureMode), as PyTorch's allocator does, so
 *    that a global-mode capture does not refuse them.
 * What stays outside: graphs built node by node (cudaGraphAddKernelNode)
 * and nodes changed after capture (cudaGraphExecUpdate, SetParams): pin
 * their memory with lms_pin. Stream-ordered allocation and free on a stream
 * being captured (graph memory nodes) fail as not supported. A wait for an
 * event during some other thread's capture makes lms let go of the
 * waiting stream too (a host wait for its queued work, then the stream is
 * adopted again at its next call): correct, and slower only while
 * captures run. The per-thread default stream is taken as the legacy one,
 * which cannot be captured (nor join one).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>

#include <cuda.h>

#include "base/base.h"
#include "base/lockorder.h"
#include "interpose/internal.h"

typedef struct pinned {
    void *base;
    size_t size;
} pinned_t;

typedef struct pinset {
    unsigned refs;    /* holders */
    bool ran;         /* an executable graph held it */
    size_t n, cap;
    pinned_t *a;
} pinset_t;

typedef enum { CAPTURE, GRAPH, EXEC } holder_kind_t;

typedef struct holder {
    holder_kind_t kind;
    uint64_t key; /* the capture id, or the graph's or executable graph's handle */
    pinset_t *set;
} holder_t;

static pthread_mutex_t graph_lock = PTHREAD_MUTEX_INITIALIZER;
static holder_t *holders;
static size_t nholders, cap_holders; /* nholders: read without the lock too */
static int active;                   /* captures in progress (atomic) */

/* ---- the driver ---------------------------------------------------------------- */

typedef CUresult (*capture_info_v3_t)(CUstream, CUstreamCaptureStatus *, cuuint64_t *, CUgraph *,
                                      const CUgraphNode **, const CUgraphEdgeData **, size_t *);
typedef CUresult (*capture_info_v2_t)(CUstream, CUstreamCaptureStatus *, cuuint64_t *, CUgraph *,
                                      const CUgraphNode **, size_t *);

/* The driver functions used here, looked up once (on the first capture:
 * the driver is loaded by then). NULL where the driver has none. */
static struct {
    capture_info_v3_t info_v3;
    capture_info_v2_t info_v2;
    CUresult (*exchange_mode)(CUstreamCaptureMode *);
    CUresult (*synchronize)(void); /* the context-less cuCtxSynchronize of CUDA 12 */
} drv;
static pthread_once_t drv_once = PTHREAD_ONCE_INIT;

static void look_up(void)
{
    drv.info_v3 = (capture_info_v3_t)interpose_sym("cuStreamGetCaptureInfo_v3");
    if (drv.info_v3 == NULL)
        drv.info_v2 = (capture_info_v2_t)interpose_sym("cuStreamGetCaptureInfo_v2");
    drv.exchange_mode =
        (CUresult(*)(CUstreamCaptureMode *))interpose_sym("cuThreadExchangeStreamCaptureMode");
    drv.synchronize = (CUresult(*)(void))interpose_sym("cuCtxSynchronize");
}

/* The capture status of stream and its capture's id; false if the driver
 * does not say (no driver, the legacy stream during another capture). */
static bool capture_info(void *stream, CUstreamCaptureStatus *status, uint64_t *id)
{
    pthread_once(&drv_once, look_up);
    cuuint64_t i = 0;
    CUresult r = drv.info_v3 != NULL
                     ? drv.info_v3((CUstream)stream, status, &i, NULL, NULL, NULL, NULL)
                 : drv.info_v2 != NULL ? drv.info_v2((CUstream)stream, status, &i, NULL, NULL, NULL)
                                       : CUDA_ERROR_NOT_FOUND;
    *id = i;
    return r == CUDA_SUCCESS;
}

/* The calling thread's capture mode set to relaxed; returns the old one for
 * relax_end. */
static CUstreamCaptureMode relax(void)
{
    pthread_once(&drv_once, look_up);
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    if (drv.exchange_mode == NULL || drv.exchange_mode(&mode) != CUDA_SUCCESS)
        return CU_STREAM_CAPTURE_MODE_RELAXED;
    return mode;
}

static void relax_end(CUstreamCaptureMode old)
{
    if (old != CU_STREAM_CAPTURE_MODE_RELAXED)
        (void)drv.exchange_mode(&old);
}

/* ---- holders (graph_lock held) -------------------------------------------------- */

static holder_t *find(holder_kind_t kind, uint64_t key)
{
    for (size_t i = 0; i < nholders; i++)
        if (holders[i].kind == kind && holders[i].key == key)
            return &holders[i];
    return NULL;
}

static bool add_holder(holder_kind_t kind, uint64_t key, pinset_t *set)
{
    if (nholders == cap_holders) {
        size_t cap = cap_holders ? 2 * cap_holders : 16;
        holder_t *h = base_meta_realloc(holders, cap * sizeof *h);
        if (h == NULL)
            return false;
        holders = h;
        cap_holders = cap;
    }
    holders[nholders] = (holder_t){kind, key, set};
    __atomic_store_n(&nholders, nholders + 1, __ATOMIC_RELEASE);
    set->refs++;
    if (kind == EXEC)
        set->ran = true;
    return true;
}

/* Drops holder h; returns its set if that was the last holder (to be
 * unpinned and freed by the caller, without the lock), else NULL. */
static pinset_t *drop_holder(holder_t *h)
{
    pinset_t *set = h->set;
    *h = holders[nholders - 1];
    __atomic_store_n(&nholders, nholders - 1, __ATOMIC_RELEASE);
    return --set->refs == 0 ? set : NULL;
}

static void release(pinset_t *set)
{
    if (set == NULL)
        return;
    CUstreamCaptureMode old = relax();
    if (set->ran && drv.synchronize != NULL) /* an executable graph may still run */
        (void)drv.synchronize();
    for (size_t i = 0; i < set->n; i++)
        if (lms_unpin(set->a[i].base, set->a[i].size) != LMS_OK)
            base_log(BASE_LOG_WARN, "interpose: unpinning a graph's memory: %s", lms_last_error());
    relax_end(old);
    base_meta_free(set->a);
    base_meta_free(set);
}

/* ---- capture ------------------------------------------------------------------- */

bool graph_capturing(void *stream)
{
    if (__atomic_load_n(&active, __ATOMIC_ACQUIRE) == 0)
        return false;
    CUstreamCaptureStatus status;
    uint64_t id;
    return capture_info(stream, &status, &id) && status == CU_STREAM_CAPTURE_STATUS_ACTIVE;
}

lms_status_t graph_capture_beginning(void *stream)
{
    CUstreamCaptureMode old = relax();
    lms_status_t st = lms_stream_unadopt(stream);
    relax_end(old);
    if (st == LMS_OK)
        __atomic_add_fetch(&active, 1, __ATOMIC_ACQ_REL);
    return st;
}

lms_status_t graph_stream_waiting(void *stream)
{
    if (__atomic_load_n(&active, __ATOMIC_ACQUIRE) == 0 || (uintptr_t)stream <= 2 ||
        graph_capturing(stream))
        return LMS_OK;
    CUstreamCaptureMode old = relax();
    lms_status_t st = lms_stream_unadopt(stream);
    relax_end(old);
    return st;
}

void graph_capture_begun(bool began)
{
    if (!began)
        __atomic_sub_fetch(&active, 1, __ATOMIC_ACQ_REL);
}

bool graph_capture_id(void *stream, uint64_t *id)
{
    CUstreamCaptureStatus status;
    return capture_info(stream, &status, id) && status != CU_STREAM_CAPTURE_STATUS_NONE;
}

void graph_capture_ended(void *stream, uint64_t id, void *graph)
{
    CUstreamCaptureStatus status;
    uint64_t now;
    if (capture_info(stream, &status, &now) && status != CU_STREAM_CAPTURE_STATUS_NONE && now == id)
        return; /* not ended (CUDA refused the end: another thread's capture) */
    __atomic_sub_fetch(&active, 1, __ATOMIC_ACQ_REL);
    lo_lock(&graph_lock, LO_GRAPH);
    holder_t *h = find(CAPTURE, id);
    pinset_t *gone = NULL;
    if (h != NULL && graph != NULL)
        h->kind = GRAPH, h->key = (uint64_t)(uintptr_t)graph;
    else if (h != NULL)
        gone = drop_holder(h);
    lo_unlock(&graph_lock, LO_GRAPH);
    release(gone);
}

/* Adds base to set, pinned; LMS_OK if it is there already. */
static lms_status_t pin_into(pinset_t *set, void *base, size_t size)
{
    for (size_t i = 0; i < set->n; i++)
        if (set->a[i].base == base)
            return LMS_OK;
    if (set->n == set->cap) {
        size_t cap = set->cap ? 2 * set->cap : 16;
        pinned_t *a = base_meta_realloc(set->a, cap * sizeof *a);
        if (a == NULL)
            return base_fail(LMS_ERR_OUT_OF_MEMORY, "interpose: no host memory for a graph's pins");
        set->a = a;
        set->cap = cap;
    }
    lms_status_t st = lms_pin(base, size);
    if (st == LMS_OK)
        set->a[set->n++] = (pinned_t){base, size};
    return st;
}

lms_status_t graph_pin_pointers(void *stream, const void *const *ptrs, size_t n)
{
    uint64_t id;
    CUstreamCaptureStatus status;
    if (!capture_info(stream, &status, &id))
        return base_fail(LMS_ERR_DEVICE, "interpose: the capture of stream %p is not known", stream);
    CUstreamCaptureMode old = relax();
    lo_lock(&graph_lock, LO_GRAPH);
    lms_status_t st = LMS_OK;
    holder_t *h = find(CAPTURE, id);
    pinset_t *set = h != NULL ? h->set : base_meta_calloc(1, sizeof *set);
    if (set == NULL)
        st = base_fail(LMS_ERR_OUT_OF_MEMORY, "interpose: no host memory for a capture's pins");
    else if (h == NULL && !add_holder(CAPTURE, id, set)) {
        base_meta_free(set);
        set = NULL;
        st = base_fail(LMS_ERR_OUT_OF_MEMORY, "interpose: no host memory for a capture's pins");
    }
    for (size_t i = 0; st == LMS_OK && i < n; i++) {
        void *base;
        size_t size;
        if (lms_allocation_of(ptrs[i], &base, &size) == LMS_OK)
            st = pin_into(set, base, size);
    }
    lo_unlock(&graph_lock, LO_GRAPH);
    relax_end(old);
    return st;
}

/* ---- graphs -------------------------------------------------------------------- */

static void hold_too(holder_kind_t kind, void *graph, void *handle)
{
    lo_lock(&graph_lock, LO_GRAPH);
    holder_t *h = find(GRAPH, (uint64_t)(uintptr_t)graph);
    if (h != NULL && !add_holder(kind, (uint64_t)(uintptr_t)handle, h->set))
        base_log(BASE_LOG_WARN, "interpose: no host memory to track a graph: its memory is "
                                "unpinned when the graph it came from is destroyed");
    lo_unlock(&graph_lock, LO_GRAPH);
}

void graph_instantiated(void *graph, void *exec) { hold_too(EXEC, graph, exec); }

void graph_cloned(void *original, void *clone) { hold_too(GRAPH, original, clone); }

static void drop(holder_kind_t kind, void *handle)
{
    if (__atomic_load_n(&nholders, __ATOMIC_ACQUIRE) == 0)
        return;
    lo_lock(&graph_lock, LO_GRAPH);
    holder_t *h = find(kind, (uint64_t)(uintptr_t)handle);
    pinset_t *gone = h != NULL ? drop_holder(h) : NULL;
    lo_unlock(&graph_lock, LO_GRAPH);
    release(gone);
}

void graph_destroyed(void *graph) { drop(GRAPH, graph); }

void graph_exec_destroyed(void *exec) { drop(EXEC, exec); }

void graph_forget(const void *ptr)
{
    if (__atomic_load_n(&nholders, __ATOMIC_ACQUIRE) == 0)
        return;
    lo_lock(&graph_lock, LO_GRAPH);
    for (size_t i = 0; i < nholders; i++) {
        pinset_t *set = holders[i].set;
        for (size_t k = 0; k < set->n; k++)
            if (set->a[k].base == ptr)
                set->a[k--] = set->a[--set->n];
    }
    lo_unlock(&graph_lock, LO_GRAPH);
}
