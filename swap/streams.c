/*
 * swap/streams.c — lms streams and stream-ordered frees (streams.h): the
 * slot table, each stream's pending frees and the fences that release them.
 *
 * Owns streams_t, which its caller hands it, with the device, the event
 * pool its fences use, and the function a released entry goes to (alloc/'s
 * release, with what pins and residency do then: the caller's). Guarded by
 * swap_lock, which the caller holds; waits drop it (events_wait_unlocked),
 * so after one a stream is looked up again by its handle.
 *
 * Note [Stream-ordered free]
 * lms_free(p, S) does not make p's space free at once: work queued on S
 * before the free may still use it. The allocation becomes "freed" (alloc.h)
 * and goes on S's pending list, tagged with S's epoch.
 *  - An allocation on S may reuse a pending entry of S of the same size class
 *    (or chunk count) at once: its work is queued after the free. This is the
 *    fast path of a training loop: no event, no device call. Of the newest
 *    LARGE_REUSE_SCAN such entries it takes the lowest address (Note
 *    [Placement repeats]). Small frees
 *    first wait in the freeing thread's cache, for that thread's allocations
 *    on S, without the lock (Note [Thread caches] in tcache.c).
 *  - For other streams, the space must wait until the work queued on S before
 *    the free has finished. lms records one event per batch of frees, not one
 *    per free (a "fence", covering every entry of the epochs before it), when
 *    S's unfenced frees pass a threshold or when an allocation elsewhere runs
 *    short. When a fence's event has completed, the entries it covers are
 *    released to alloc/ and become everyone's.
 *  - While lms has one stream only, nobody can race it: a free releases at
 *    once. A stream created later first waits, on the device, for an event
 *    recorded on every stream that exists, so none of its work can touch
 *    memory freed before it existed while that work still runs.
 *  - An allocation that finds no room fences every stream, releases what has
 *    completed, and as a last resort waits for the fences' events (never a
 *    device-wide synchronize, and with the lock dropped) before it reports
 *    out of memory. So an allocation may wait for work queued before a free
 *    on another stream; a program that holds such work back until the
 *    allocation returns deadlocks, as it would with PyTorch's allocator.
 *
 * Note [Placement repeats]
 * policy/ learns the sequence of chunks a training step touches, so a step
 * that allocates and frees the same tensors must get the same addresses as
 * the step before. Reusing the newest pending entry (a stack) did not do
 * that: a framework's step frees its activations in another order than it
 * allocated them, so the stack came out of each step permuted, and the
 * addresses rotated with a period of several steps (bench/model's
 * --dynamic MLP: a period of 4, and 50-60% more bytes moved at 1.25x than the
 * same model with static activations). Taking the lowest address of the
 * matching entries makes each choice depend on the set of pending entries
 * only, which a repeating step leaves the same. The thread caches still
 * reuse newest first (Note [Thread caches]): classes small enough for them
 * are packed many to a chunk, so a rotation among them moves less.
 *
 * Note [Free after all streams]
 * lms_free(p, LMS_ALL_STREAMS) is cudaFree's contract without its device
 * synchronize: p must not be reused before the work queued on any stream has
 * finished. The entry goes on the pending list of a stream that runs no work
 * (made at the first such free, in a slot of its own, and not counted in
 * the live streams): no allocation is ever made on it, so nothing reuses its
 * entries early, and each of its fences is recorded after it waited, on the
 * device, for an event on every other stream (order_after_all). So the
 * entries come back to everyone once all that work is done, by the usual
 * collect; the free itself never waits.
 *
 * Note [Adopted streams]
 * Adopted streams (lms_stream_adopt) are the program's CUDA streams, which
 * lms uses as its own: accesses make them wait for fetches, evictions wait
 * for their work, frees on them are stream-ordered on them. The legacy
 * default stream stands for NULL, cudaStreamLegacy and cudaStreamPerThread
 * alike: waiting for the legacy stream covers the per-thread default streams
 * (both are blocking streams), so evictions are safe, at worst late.
 */
#include "swap/streams.h"

#include <string.h>

#include "base/base.h"
#include "swap/util.h"

#define LARGE_REUSE_SCAN 64 /* pending large entries of a stream looked at for reuse */

/* ---- deques -------------------------------------------------------------------- */

static bool dq_push(deque_t *d, pending_t p)
{
    if (d->len == d->cap) {
        size_t cap = d->cap ? 2 * d->cap : 16;
        pending_t *items = base_meta_alloc(cap * sizeof *items);
        if (items == NULL)
            return false;
        for (size_t i = 0; i < d->len; i++)
            items[i] = d->items[(d->head + i) & (d->cap - 1)];
        base_meta_free(d->items);
        *d = (deque_t){items, 0, d->len, cap};
    }
    d->items[(d->head + d->len++) & (d->cap - 1)] = p;
    return true;
}

static pending_t *dq_at(deque_t *d, size_t i) { return &d->items[(d->head + i) & (d->cap - 1)]; }

static void dq_remove(deque_t *d, size_t i) /* keeps the order */
{
    for (; i + 1 < d->len; i++)
        *dq_at(d, i) = *dq_at(d, i + 1);
    d->len--;
}

/* ---- streams ------------------------------------------------------------------- */

lms_status_t streams_bad_handle(const char *op, lms_stream_t handle)
{
    return base_fail(LMS_ERR_INVALID, "%s: %p is not a live lms stream", op, (void *)handle);
}

/* Makes s wait, on the device, for what every other stream has queued so
 * far (see Note [Stream-ordered free]). */
static lms_status_t order_after_all(streams_t *t, stream_t *s)
{
    if (!events_reserve(t->events))
        return base_fail(LMS_ERR_OUT_OF_MEMORY,
                         "no host memory to order a stream after the others");
    dev_event_t *e;
    lms_status_t st = events_take(t->events, &e);
    if (st != LMS_OK)
        return st;
    for (size_t i = 0; i < t->n && st == LMS_OK; i++)
        if (t->slot[i] != NULL && t->slot[i] != s &&
            (st = dev_event_record(t->dev, e, t->slot[i]->dev)) == LMS_OK)
            st = dev_stream_wait_event(t->dev, s->dev, e); /* waits on this record */
    events_put(t->events, e); /* only streams wait on it, on the device */
    return st;
}

/* A new stream: lms's own, or (native != 0) the program's, adopted. */
static lms_status_t new_stream(streams_t *t, uint64_t native, stream_t **out)
{
    stream_t *s = base_meta_calloc(1, sizeof *s);
    if (s == NULL)
        return base_fail(LMS_ERR_OUT_OF_MEMORY, "lms_stream_create: no host memory");
    s->native = native;
    lms_status_t st = native != 0 ? dev_stream_adopt(t->dev, native, &s->dev)
                                  : dev_stream_create(t->dev, DEV_PRIORITY_NORMAL, &s->dev);
    if (st == LMS_OK && (st = dev_event_create(t->dev, &s->use_event)) != LMS_OK)
        dev_stream_destroy(t->dev, s->dev);
    if (st != LMS_OK) {
        base_meta_free(s);
        return st;
    }
    *out = s;
    return LMS_OK;
}

/* Frees a stream's host state (its device stream is the caller's). NULL ok. */
static void free_stream(stream_t *s)
{
    if (s == NULL)
        return;
    for (int k = 0; k < ALLOC_MAX_CLASSES; k++)
        base_meta_free(s->small[k].items);
    base_meta_free(s->large.items);
    base_meta_free(s->fences);
    base_meta_free(s);
}

/* Makes a stream in the first free slot (see new_stream; `all`: the
 * all-streams one) and orders it after every other stream. */
static lms_status_t add_stream(streams_t *t, uint64_t native, bool all, size_t *slot)
{
    size_t i = 1;
    while (i < t->n && t->slot[i] != NULL)
        i++;
    if (i == MAX_STREAMS)
        return base_fail(LMS_ERR_OUT_OF_MEMORY, "%u streams exist", MAX_STREAMS - 1);
    lms_status_t st = new_stream(t, native, &t->slot[i]);
    if (st != LMS_OK)
        return st;
    t->slot[i]->all = all;
    if ((st = order_after_all(t, t->slot[i])) != LMS_OK) {
        dev_stream_destroy(t->dev, t->slot[i]->dev);
        free_stream(t->slot[i]);
        t->slot[i] = NULL;
        return st;
    }
    t->live += !all;
    if (i == t->n)
        t->n++;
    *slot = i;
    return LMS_OK;
}

lms_status_t streams_init(streams_t *t, dev_device_t *dev, events_t *events, size_t chunk,
                          size_t flush_bytes, streams_release_fn release)
{
    t->dev = dev;
    t->events = events;
    t->chunk = chunk;
    t->release = release;
    t->flush_bytes = flush_bytes;
    lms_status_t st = new_stream(t, 0, &t->slot[0]);
    if (st == LMS_OK)
        t->n = t->live = 1;
    return st;
}

void streams_drain(streams_t *t)
{
    for (size_t i = 0; i < t->n; i++)
        if (t->slot[i] != NULL)
            (void)dev_stream_synchronize(t->dev, t->slot[i]->dev);
}

void streams_destroy(streams_t *t)
{
    for (size_t i = 0; i < t->n; i++)
        free_stream(t->slot[i]);
}

lms_status_t streams_create(streams_t *t, size_t *slot) { return add_stream(t, 0, false, slot); }

/* The key of a program's stream: NULL, cudaStreamLegacy (0x1) and
 * cudaStreamPerThread (0x2) are all the legacy default stream (Note
 * [Adopted streams]). */
static uint64_t native_key(void *cuda_stream)
{
    uintptr_t h = (uintptr_t)cuda_stream;
    return h <= 2 ? 1 : h;
}

/* The slot of the stream adopted for key; 0 if none. */
static size_t adopted_slot(const streams_t *t, uint64_t key)
{
    for (size_t i = 1; i < t->n; i++)
        if (t->slot[i] != NULL && t->slot[i]->native == key)
            return i;
    return 0;
}

size_t streams_adopted(const streams_t *t, void *cuda_stream)
{
    return adopted_slot(t, native_key(cuda_stream));
}

lms_status_t streams_adopt(streams_t *t, void *cuda_stream, size_t *slot)
{
    uint64_t key = native_key(cuda_stream);
    if ((*slot = adopted_slot(t, key)) != 0)
        return LMS_OK;
    return add_stream(t, key, false, slot);
}

lms_status_t streams_all(streams_t *t, stream_t **out)
{
    size_t i;
    lms_status_t st = LMS_OK;
    if (t->all_slot == 0 && (st = add_stream(t, 0, true, &i)) == LMS_OK)
        t->all_slot = i;
    if (st != LMS_OK)
        return base_fail(st, "lms_free(LMS_ALL_STREAMS): %s", lms_last_error());
    *out = t->slot[t->all_slot];
    return LMS_OK;
}

/* ---- fences -------------------------------------------------------------------- */

/* Records a fence on s covering its frees so far, if it has unfenced ones. */
static lms_status_t fence(streams_t *t, stream_t *s)
{
    if (s->unfenced_bytes == 0)
        return LMS_OK;
    if (!swap_grow((void **)&s->fences, &s->capfences, s->nfences + 1, sizeof *s->fences))
        return base_fail(LMS_ERR_OUT_OF_MEMORY, "no host memory for a fence");
    dev_event_t *e;
    lms_status_t st = s->all ? order_after_all(t, s) : LMS_OK; /* Note [Free after all streams] */
    if (st == LMS_OK)
        st = events_take(t->events, &e);
    if (st == LMS_OK && (st = dev_event_record(t->dev, e, s->dev)) != LMS_OK)
        events_recycle(t->events, e);
    if (st != LMS_OK)
        return st;
    s->fences[s->nfences++] = (fence_t){e, s->epoch};
    s->epoch++;
    s->unfenced_bytes = 0;
    return LMS_OK;
}

/* Releases the entries of s covered by fences whose events have completed. */
static lms_status_t collect(streams_t *t, stream_t *s)
{
    while (s->nfences > 0) {
        fence_t f = s->fences[0];
        lms_status_t st = dev_event_query(t->dev, f.event);
        if (st == LMS_NOT_READY)
            return LMS_OK;
        if (st != LMS_OK)
            return st;
        for (int k = 0; k <= ALLOC_MAX_CLASSES; k++) {
            deque_t *d = k < ALLOC_MAX_CLASSES ? &s->small[k] : &s->large;
            while (d->len > 0 && dq_at(d, 0)->epoch <= f.epoch) {
                t->release(dq_at(d, 0)->offset, dq_at(d, 0)->size);
                d->head = (d->head + 1) & (d->cap - 1);
                d->len--;
            }
        }
        memmove(&s->fences[0], &s->fences[1], --s->nfences * sizeof *s->fences);
        events_recycle(t->events, f.event);
    }
    return LMS_OK;
}

lms_status_t streams_collect_all(streams_t *t, bool fence_first)
{
    lms_status_t st = LMS_OK;
    for (size_t i = 0; i < t->n && st == LMS_OK; i++) {
        if (t->slot[i] == NULL)
            continue;
        if (fence_first)
            st = fence(t, t->slot[i]);
        if (st == LMS_OK)
            st = collect(t, t->slot[i]);
    }
    return st;
}

/* A stream's fences complete in order: its newest covers them all. The
 * events stay out of reuse meanwhile (events_recycle), 64 streams' at a
 * time. */
void streams_wait_for_fences(streams_t *t)
{
    /* one waiter throughout: between two waits another thread may collect
     * the next event, which must stay retired, not re-recorded, until this
     * thread has waited on it too */
    events_waiters_enter(t->events);
    for (size_t from = 0; from < t->n;) { /* slots may come and go between batches */
        dev_event_t *newest[64];
        size_t n = 0;
        for (; from < t->n && n < 64; from++)
            if (t->slot[from] != NULL && t->slot[from]->nfences > 0)
                newest[n++] = t->slot[from]->fences[t->slot[from]->nfences - 1].event;
        for (size_t i = 0; i < n; i++)
            events_wait_unlocked(t->events, newest[i]);
    }
    events_waiters_leave(t->events);
}

/* Until released_synced catches up with released_at_once, a block of memory
 * freed at once must not be taken for another chunk (taking a chunk's block
 * unmaps it, and unmap does not wait for queued work). Each wait records an event of its
 * own: threads share the default stream, and one shared event, re-recorded
 * by another thread while this one waited unlocked, read "not ready" after
 * the wait (issue 24). */
lms_status_t streams_sync_released(streams_t *t)
{
    uint64_t upto = t->released_at_once;
    dev_event_t *e;
    lms_status_t st = events_take(t->events, &e);
    if (st != LMS_OK)
        return st;
    if ((st = dev_event_record(t->dev, e, t->slot[0]->dev)) == LMS_OK) {
        events_wait_unlocked(t->events, e);
        /* the wait's own error shows again here; "not ready" after a wait
         * on an event nobody else records is the device's failure */
        if ((st = dev_event_query(t->dev, e)) == LMS_NOT_READY)
            st = base_fail(LMS_ERR_DEVICE, "lms: the default stream's work was waited for "
                                           "and is still not done");
    }
    events_recycle(t->events, e);
    if (st != LMS_OK)
        return st;
    if (t->released_synced < upto)
        t->released_synced = upto;
    return LMS_OK;
}

/* ---- frees --------------------------------------------------------------------- */

lms_status_t streams_queue(streams_t *t, stream_t *s, size_t offset, size_t size, int cls,
                           bool *queued)
{
    *queued = false;
    if (s == NULL || t->live == 1) {
        t->release(offset, size);
        t->released_at_once++;
        return LMS_OK;
    }
    deque_t *d = cls >= 0 ? &s->small[cls] : &s->large;
    if (!dq_push(d, (pending_t){offset, size, s->epoch}))
        return LMS_ERR_OUT_OF_MEMORY;
    s->unfenced_bytes += size;
    *queued = true;
    return LMS_OK;
}

void streams_flush(streams_t *t, stream_t *s)
{
    if (s->unfenced_bytes >= t->flush_bytes && fence(t, s) != LMS_OK)
        base_log(BASE_LOG_DEBUG, "lms_free: fence deferred: %s", lms_last_error());
}

bool streams_reuse(streams_t *t, stream_t *s, int cls, size_t size, size_t *offset,
                   size_t *freed_size)
{
    size_t chunks = (size + t->chunk - 1) / t->chunk, index = 0;
    deque_t *d = cls >= 0 ? &s->small[cls] : &s->large;
    bool found = false;
    for (size_t k = 0; k < d->len && k < LARGE_REUSE_SCAN; k++) { /* Note [Placement repeats] */
        size_t i = d->len - 1 - k;
        const pending_t *p = dq_at(d, i);
        if ((cls >= 0 || (p->size + t->chunk - 1) / t->chunk == chunks) &&
            (!found || p->offset < dq_at(d, index)->offset)) {
            index = i;
            found = true;
        }
    }
    if (!found)
        return false;
    *offset = dq_at(d, index)->offset;
    *freed_size = dq_at(d, index)->size;
    dq_remove(d, index);
    return true;
}

/* ---- destroying a stream ------------------------------------------------------- */

lms_status_t streams_remove(streams_t *t, lms_stream_t handle)
{
    stream_t *s = streams_find(t, handle);
    lms_status_t st = LMS_OK;
    /* Its pending frees go back once its queued work is done: wait for that,
     * with the lock dropped, then look the stream up again. */
    for (int round = 0; st == LMS_OK && round < 100; round++) {
        if ((st = fence(t, s)) != LMS_OK || s->nfences == 0)
            break;
        events_wait_unlocked(t->events, s->fences[s->nfences - 1].event);
        if ((s = streams_find(t, handle)) == NULL)
            st = streams_bad_handle("lms_stream_destroy", handle); /* destroyed meanwhile */
        else
            st = collect(t, s);
    }
    if (st == LMS_OK && s->nfences > 0)
        st = base_fail(LMS_ERR_DEVICE, "lms_stream_destroy: frees keep arriving on the stream");
    /* and every other piece of its work: evictions of chunks it used wait
     * for its work through its slot, which will be gone */
    dev_event_t *e = NULL;
    if (st == LMS_OK && (st = events_take(t->events, &e)) == LMS_OK &&
        (st = dev_event_record(t->dev, e, s->dev)) == LMS_OK) {
        events_wait_unlocked(t->events, e);
        if ((s = streams_find(t, handle)) == NULL)
            st = streams_bad_handle("lms_stream_destroy", handle);
    }
    if (e != NULL)
        events_recycle(t->events, e);
    if (st == LMS_OK)
        st = dev_stream_destroy(t->dev, s->dev);
    if (st == LMS_OK) {
        size_t i = (size_t)streams_slot_of(handle);
        (void)dev_event_destroy(t->dev, s->use_event);
        for (size_t k = 0; k < USE_RING; k++)
            if (s->after[k] != NULL)
                (void)dev_event_destroy(t->dev, s->after[k]);
        free_stream(s);
        t->slot[i] = NULL;
        t->generation_of[i]++;
        t->live--;
    }
    return st;
}

/* ---- eviction fences (Note [Eviction fences] in evict.c) ------------------- */

uint32_t stream_fence_window(stream_t *s, dev_device_t *dev)
{
    uint32_t w = s->windows + 1;
    if (w == 0) /* 2^32 windows: numbering starts again, with nothing remembered */
        return 0;
    dev_event_t **e = &s->after[w % USE_RING];
    if ((*e == NULL && dev_event_create(dev, e) != LMS_OK) ||
        dev_event_record(dev, *e, s->dev) != LMS_OK)
        return 0;
    s->windows = w;
    return w;
}

lms_status_t stream_after_use(stream_t *s, dev_device_t *dev, uint32_t latest, dev_event_t **out)
{
    if (latest > 0) {
        uint32_t oldest = s->windows > USE_RING ? s->windows - USE_RING + 1 : 1;
        *out = s->after[(latest > oldest ? latest : oldest) % USE_RING];
        return LMS_OK;
    }
    *out = s->use_event;
    return dev_event_record(dev, s->use_event, s->dev);
}
