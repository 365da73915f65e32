/*
 * device/cuda_work.c — the cuda backend's streams, events, the work queued
 * on streams (copies, host functions, launches) and the observer, which
 * times that work with CUDA events (Note [Timing work on the GPU]). See
 * cuda.c for what the backend owns, its invariants and its locks.
 */
#include "device/cuda.h"

#include "base/base.h"
#include "base/lockorder.h"

#include <inttypes.h>
#include <stdlib.h>

/*
 * Note [Timing work on the GPU]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * The sim implements the same contract (device.h, set_observer) and is
 * tested; test_device's observer test, registered for the gpu label, checks
 * this code on a card (it passed on an H200: docs/gpu-results.md,
 * 2026-11-26).
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
#define POLL_EVERY_NS 1000000u /* poll_work from event_query/_synchronize */

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
    lo_lock(&c->observe_lock, LO_DEV_OBSERVER);
    bool ok = c->observer != NULL && timing_event(c, &t->start) == CUDA_SUCCESS;
    if (ok && timing_event(c, &t->end) != CUDA_SUCCESS) {
        spare_event(c, t->start);
        ok = false;
    }
    lo_unlock(&c->observe_lock, LO_DEV_OBSERVER);
    if (ok && c->drv.cuEventRecord(t->start, stream) != CUDA_SUCCESS) {
        lo_lock(&c->observe_lock, LO_DEV_OBSERVER);
        spare_event(c, t->start);
        spare_event(c, t->end);
        lo_unlock(&c->observe_lock, LO_DEV_OBSERVER);
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
    lo_lock(&c->observe_lock, LO_DEV_OBSERVER);
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
    lo_unlock(&c->observe_lock, LO_DEV_OBSERVER);
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
    lo_lock(&c->observe_lock, LO_DEV_OBSERVER);
    poll_locked(c, false);
    lo_unlock(&c->observe_lock, LO_DEV_OBSERVER);
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

lms_status_t cuda_set_observer(void *self, dev_observer_t fn, void *ctx)
{
    cuda_t *c = self;
    lms_status_t status = cuda_use_context_checked(c);
    if (status != LMS_OK)
        return status;
    /* The old observer's work is waited for without observe_lock, which
     * every timed op takes: a pending event may sit behind work that waits
     * for a thread now enqueueing. Events spared meanwhile by another poll
     * and reused only make a wait longer (none is destroyed before close). */
    lo_lock(&c->observe_lock, LO_DEV_OBSERVER);
    size_t n = c->npending;
    CUevent *ends = n > 0 ? base_meta_alloc(n * sizeof *ends) : NULL;
    for (size_t i = 0; ends != NULL && i < n; i++)
        ends[i] = c->pending[i].end;
    lo_unlock(&c->observe_lock, LO_DEV_OBSERVER);
    for (size_t i = 0; ends != NULL && i < n; i++)
        (void)c->drv.cuEventSynchronize(ends[i]); /* a failure shows in poll_locked's query */
    base_meta_free(ends);
    lo_lock(&c->observe_lock, LO_DEV_OBSERVER);
    if (fn != NULL && c->base_event == NULL && (status = make_base(c)) != LMS_OK) {
        lo_unlock(&c->observe_lock, LO_DEV_OBSERVER);
        return status;
    }
    poll_locked(c, ends == NULL && n > 0); /* the old observer is told of all its work (waiting
                                              here only if the list could not be copied) */
    c->observer = fn;
    c->observer_ctx = fn != NULL ? ctx : NULL;
    atomic_store_explicit(&c->observing, fn != NULL, memory_order_relaxed);
    lo_unlock(&c->observe_lock, LO_DEV_OBSERVER);
    return LMS_OK;
}

/* For close: every timing event, the base and its stream. */
void cuda_release_observer(cuda_t *c)
{
    for (size_t i = 0; i < c->npending; i++) {
        dev_cuda_log_close(c->ordinal, c->drv.cuEventDestroy(c->pending[i].start), "cuEventDestroy(timing)");
        dev_cuda_log_close(c->ordinal, c->drv.cuEventDestroy(c->pending[i].end), "cuEventDestroy(timing)");
    }
    for (size_t i = 0; i < c->nspare; i++)
        dev_cuda_log_close(c->ordinal, c->drv.cuEventDestroy(c->spare[i]), "cuEventDestroy(timing)");
    if (c->base_event != NULL)
        dev_cuda_log_close(c->ordinal, c->drv.cuEventDestroy(c->base_event), "cuEventDestroy(base)");
    if (c->base_stream != NULL)
        dev_cuda_log_close(c->ordinal, c->drv.cuStreamDestroy(c->base_stream), "cuStreamDestroy(base)");
    base_meta_free(c->pending);
    base_meta_free(c->spare);
}

/* ---- ops: streams and events ------------------------------------------------ */

lms_status_t cuda_stream_create(void *self, dev_priority_t priority, dev_stream_t **stream)
{
    cuda_t *c = self;
    lms_status_t status = cuda_use_context_checked(c);
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
lms_status_t cuda_stream_adopt(void *self, uint64_t native, dev_stream_t **stream)
{
    cuda_t *c = self;
    lms_status_t status = cuda_use_context_checked(c);
    if (status != LMS_OK)
        return status;
    CUresult r = c->drv.cuStreamQuery((CUstream)(uintptr_t)native);
    if (r != CUDA_SUCCESS && r != CUDA_ERROR_NOT_READY)
        return dev_cuda_fail(r, "cuStreamQuery(stream 0x%" PRIx64 "), adopting it", native);
    lo_lock(&c->lock, LO_CUDA);
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
    lo_unlock(&c->lock, LO_CUDA);
    if (!room)
        return base_fail(LMS_ERR_OUT_OF_MEMORY, "cuda: no host memory to adopt a stream");
    *stream = (dev_stream_t *)(uintptr_t)native;
    return LMS_OK;
}

/* Whether stream was adopted; if so, it is adopted once less. */
static bool unadopt(cuda_t *c, CUstream stream)
{
    lo_lock(&c->lock, LO_CUDA);
    size_t i = 0;
    while (i < c->nadopted && c->adopted[i] != stream)
        i++;
    bool found = i < c->nadopted;
    if (found)
        c->adopted[i] = c->adopted[--c->nadopted];
    lo_unlock(&c->lock, LO_CUDA);
    return found;
}

lms_status_t cuda_stream_destroy(void *self, dev_stream_t *stream)
{
    cuda_t *c = self;
    if (unadopt(c, (CUstream)stream))
        return LMS_OK;
    lms_status_t status = cuda_use_context(c);
    if (status != LMS_OK)
        return status;
    CUresult r = c->drv.cuStreamDestroy((CUstream)stream);
    if (r != CUDA_SUCCESS)
        return dev_cuda_fail(r, "cuStreamDestroy(stream %p)", (void *)stream);
    return LMS_OK;
}

lms_status_t cuda_stream_synchronize(void *self, dev_stream_t *stream)
{
    cuda_t *c = self;
    lms_status_t status = cuda_use_context(c);
    if (status != LMS_OK)
        return status;
    CUresult r = c->drv.cuStreamSynchronize((CUstream)stream);
    if (r != CUDA_SUCCESS)
        return dev_cuda_fail(r, "cuStreamSynchronize(stream %p)", (void *)stream);
    poll_work(c, true); /* the stream's work is reported when this returns */
    return LMS_OK;
}

lms_status_t cuda_event_create(void *self, dev_event_t **event)
{
    cuda_t *c = self;
    lms_status_t status = cuda_use_context_checked(c);
    if (status != LMS_OK)
        return status;
    CUevent e = NULL;
    CUresult r = c->drv.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING);
    if (r != CUDA_SUCCESS)
        return dev_cuda_fail(r, "cuEventCreate(disable timing)");
    *event = (dev_event_t *)e;
    return LMS_OK;
}

lms_status_t cuda_event_destroy(void *self, dev_event_t *event)
{
    cuda_t *c = self;
    lms_status_t status = cuda_use_context(c);
    if (status != LMS_OK)
        return status;
    CUresult r = c->drv.cuEventDestroy((CUevent)event);
    if (r != CUDA_SUCCESS)
        return dev_cuda_fail(r, "cuEventDestroy(event %p)", (void *)event);
    return LMS_OK;
}

lms_status_t cuda_event_record(void *self, dev_event_t *event, dev_stream_t *stream)
{
    cuda_t *c = self;
    lms_status_t status = cuda_use_context(c);
    if (status != LMS_OK)
        return status;
    CUresult r = c->drv.cuEventRecord((CUevent)event, (CUstream)stream);
    if (r != CUDA_SUCCESS)
        return dev_cuda_fail(r, "cuEventRecord(event %p, stream %p)", (void *)event,
                    (void *)stream);
    return LMS_OK;
}

/* CUDA_ERROR_NOT_READY is an answer, not a failure: LMS_NOT_READY, no message. */
lms_status_t cuda_event_query(void *self, dev_event_t *event)
{
    cuda_t *c = self;
    lms_status_t status = cuda_use_context(c);
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

lms_status_t cuda_event_synchronize(void *self, dev_event_t *event)
{
    cuda_t *c = self;
    lms_status_t status = cuda_use_context(c);
    if (status != LMS_OK)
        return status;
    CUresult r = c->drv.cuEventSynchronize((CUevent)event);
    poll_work(c, false);
    if (r != CUDA_SUCCESS)
        return dev_cuda_fail(r, "cuEventSynchronize(event %p)", (void *)event);
    return LMS_OK;
}

lms_status_t cuda_stream_wait_event(void *self, dev_stream_t *stream, dev_event_t *event)
{
    cuda_t *c = self;
    lms_status_t status = cuda_use_context(c);
    if (status != LMS_OK)
        return status;
    CUresult r = c->drv.cuStreamWaitEvent((CUstream)stream, (CUevent)event, CU_EVENT_WAIT_DEFAULT);
    if (r != CUDA_SUCCESS)
        return dev_cuda_fail(r, "cuStreamWaitEvent(stream %p, event %p)", (void *)stream,
                    (void *)event);
    return LMS_OK;
}

/* ---- ops: copies and host functions ----------------------------------------- */

lms_status_t cuda_copy_h2d(void *self, dev_stream_t *stream, dev_addr_t dst, const void *src,
                           size_t n)
{
    cuda_t *c = self;
    lms_status_t status = cuda_use_context(c);
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

lms_status_t cuda_copy_d2h(void *self, dev_stream_t *stream, void *dst, dev_addr_t src,
                           size_t n)
{
    cuda_t *c = self;
    lms_status_t status = cuda_use_context(c);
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

lms_status_t cuda_copy_d2d(void *self, dev_stream_t *stream, dev_addr_t dst, dev_addr_t src,
                           size_t n)
{
    cuda_t *c = self;
    lms_status_t status = cuda_use_context(c);
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
lms_status_t cuda_host_func(void *self, dev_stream_t *stream, dev_host_fn_t fn, void *arg)
{
    cuda_t *c = self;
    lms_status_t status = cuda_use_context(c);
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
lms_status_t cuda_launch(void *self, dev_stream_t *stream, const dev_launch_t *l)
{
    cuda_t *c = self;
    lms_status_t status = cuda_use_context_checked(c);
    if (status != LMS_OK)
        return status;
    timed_t t;
    bool timed = observing(c) && timed_begin(c, (CUstream)stream, &t);
    status = l->enqueue(l->ctx, (uint64_t)(uintptr_t)stream, l->args);
    if (timed)
        timed_end(c, &t, status == LMS_OK, DEV_WORK_COMPUTE, l->name, 0);
    return status;
}

