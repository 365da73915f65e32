/*
 * swap/lms.c — include/lms.h's functions and swap.h's. Each takes the lock,
 * checks its arguments and calls the module whose work it is:
 *   init.c      start and end (S from NULL and back), exit and fork;
 *   streams.c   streams and stream-ordered frees (Note [Stream-ordered
 *               free] there);
 *   pins.c      the pin records (Note [Pin records] there);
 *   tcache.c    the thread caches (Note [Thread caches] there), whose
 *               lock-free calls come first in lms_malloc and lms_free;
 *   residency   residency.c, window.c, evict.c, prefetch.c, reclaim.c: the
 *               block pool, fetch, evict, access windows, the reclaim thread;
 *   alloc/      placement.
 * lms_version and lms_stats_fields, constants, take no lock.
 * What is left here is malloc's own: placing within the capacity, the order
 * of its retries, and its out-of-memory message.
 *
 * Owns S, the one state of the process (NULL while lms is not running; the
 * composition of the modules' structs, internal.h), and its lock.
 *
 * Lock: `swap_lock` guards all of S, and init and shutdown. Public functions
 * take it; static ones assume it. It is never held while waiting for a stream
 * (waits drop it first: events_wait_unlocked); it is held across map and
 * unmap, which do not wait for streams, and no host function takes it. Every
 * public function that takes it first closes the calling thread's access
 * window (Note [Access windows] in window.c).
 */
#include <stdint.h>

#include "base/lockorder.h"
#include "swap/tcache.h"

pthread_mutex_t swap_lock = PTHREAD_MUTEX_INITIALIZER;
state_t *S;

/* Takes the lock and ends the calling thread's access window. */
static void enter(void)
{
    lo_lock(&swap_lock, LO_SWAP);
    if (resid_window_open())
        resid_close_window();
}

static void leave(void) { lo_unlock(&swap_lock, LO_SWAP); }

/* ---- helpers ------------------------------------------------------------------- */

static stream_t *find_stream(lms_stream_t handle) { return streams_find(&S->streams, handle); }

static lms_stream_t handle_of(size_t slot)
{
    return streams_handle(slot, streams_generation(&S->streams, slot));
}

static lms_status_t bad_stream(const char *op, lms_stream_t s) { return streams_bad_handle(op, s); }

lms_status_t swap_sync_released(void) { return streams_sync_released(&S->streams); }

/* ---- init and shutdown ---------------------------------------------------------- */

static double device_fraction; /* lms_set_device_fraction's, for every later start */
static bool no_swapping;       /* lms_forbid_swapping was called */

/* Starts lms from the options if it is not running. */
static lms_status_t ensure(void)
{
    return S != NULL ? LMS_OK : swap_init_from_options(device_fraction, no_swapping);
}

lms_status_t lms_forbid_swapping(void)
{
    enter();
    lms_status_t st = LMS_OK;
    if (S != NULL && S->cfg.swap)
        st = base_fail(LMS_ERR_UNSUPPORTED, "lms_forbid_swapping: lms is running with swapping; "
                       "call it before the first allocation");
    else
        no_swapping = true;
    leave();
    return st;
}

lms_status_t lms_set_device_fraction(double fraction)
{
    if (!(fraction >= 0 && fraction <= 1)) /* NaN too */
        return base_fail(LMS_ERR_INVALID, "lms_set_device_fraction: %g is not in [0, 1]", fraction);
    enter();
    lms_status_t st = LMS_OK;
    if (S != NULL)
        st = base_fail(LMS_ERR_UNSUPPORTED, "lms_set_device_fraction: lms is running, with a device "
                       "limit of %zu bytes; set the fraction before the first allocation",
                       S->budget * S->chunk);
    else
        device_fraction = fraction;
    leave();
    return st;
}

lms_status_t lms_expect_unseen_access(void)
{
    enter();
    lms_status_t st = LMS_OK;
    if (S != NULL && !__atomic_load_n(&swap_unseen_expected, __ATOMIC_RELAXED))
        st = base_fail(LMS_ERR_UNSUPPORTED, "lms_expect_unseen_access: lms is running, with "
                       "evicted chunks %s (%s); call it before lms starts",
                       swap_evicted_str(S->resolved.evicted), S->resolved.evicted_why);
    else
        __atomic_store_n(&swap_unseen_expected, true, __ATOMIC_RELAXED);
    leave();
    return st;
}

/* Memory freed on streams comes back once their work up to the free is
 * done (fences, waited for); thread caches give theirs back (this thread's
 * now, the others' at their next call); then residency gives the blocks
 * back. */
lms_status_t lms_empty_cache(void)
{
    enter();
    lms_status_t st = ensure();
    if (st == LMS_OK) {
        tc_flush();
        tc_invalidate();
        if ((st = streams_collect_all(&S->streams, true)) == LMS_OK) {
            streams_wait_for_fences(&S->streams);
            st = streams_collect_all(&S->streams, false);
        }
        while (st == LMS_OK && alloc_trim_one(S->alloc)) { /* kept empty slabs' addresses */
        }
    }
    if (st == LMS_OK)
        st = resid_empty_cache();
    leave();
    return st;
}

lms_status_t lms_init(void)
{
    enter();
    lms_status_t st = ensure();
    leave();
    return st;
}

lms_status_t swap_init(const swap_config_t *cfg)
{
    if (cfg == NULL)
        return base_fail(LMS_ERR_INVALID, "swap_init: NULL config");
    lo_lock(&swap_lock, LO_SWAP);
    lms_status_t st = S != NULL ? base_fail(LMS_ERR_INVALID, "swap_init: lms is initialized already")
                                : swap_init_locked(cfg, false);
    lo_unlock(&swap_lock, LO_SWAP);
    return st;
}

lms_status_t lms_shutdown(void)
{
    enter();
    swap_print_stats_locked(); /* this run of lms ends here, not at exit */
    swap_destroy_locked();
    leave();
    return LMS_OK;
}

/* ---- allocation -------------------------------------------------------------- */

/* Why a placement found no room: the device and host limits are taken, or
 * the reserved address range has no run of free chunks large enough. */
typedef enum no_room { NO_ROOM_IN_LIMITS, NO_ROOM_IN_RANGE } no_room_t;

/* The out of memory of lms_malloc(size), saying what is allocated and
 * which setting to raise for `where`, and why (alloc/'s message) if set. */
static lms_status_t out_of_memory(size_t size, no_room_t where, const char *why)
{
    alloc_usage_t u;
    alloc_usage(S->alloc, &u);
    lms_stats_t t;
    resid_stats(&t);
    char req[32], live[32], fr[32], res[32], host[32], pin[32], lim[32], hlim[32];
    size_t room = u.used_chunks < S->capacity ? (S->capacity - u.used_chunks) * S->chunk : 0;
    S->stats.ooms++;
    return base_fail(LMS_ERR_OUT_OF_MEMORY,
                     "lms_malloc(%s): out of memory: %s allocated in %zu allocations, %s free; "
                     "%s resident of the %s device limit, %s on host of the %s host limit%s, "
                     "%s pinned%s%s. %s, or free memory",
                     swap_fmt(size, req), swap_fmt(u.live_bytes, live), u.live_count,
                     swap_fmt(room, fr), swap_fmt(t.resident_bytes, res), swap_fmt(t.device_limit, lim),
                     swap_fmt(t.host_bytes, host), swap_fmt(t.host_limit, hlim),
                     S->cfg.swap ? "" : " (LMS_SWAP=0)", swap_fmt(t.pinned_bytes, pin),
                     why ? ": " : "", why ? why : "",
                     where == NO_ROOM_IN_RANGE ? "Raise LMS_VA_RESERVE"
                     : S->cfg.swap ? "Raise LMS_HOST_LIMIT or LMS_DEVICE_LIMIT"
                                   : "Raise LMS_DEVICE_LIMIT");
}

/* Places size bytes, within the capacity (device plus host chunks: whatever
 * is allocated must have somewhere to be); on failure nothing changed. Out
 * of memory says where there was no room (the caller writes the message;
 * alloc/'s, when the range had none, says why). */
static lms_status_t place(size_t size, size_t *offset, no_room_t *where)
{
    alloc_chunks_t used;
    *where = NO_ROOM_IN_LIMITS;
    lms_status_t st = alloc_place(S->alloc, size, offset, &used);
    if (st != LMS_OK) { /* alloc.h: no free run large enough */
        *where = NO_ROOM_IN_RANGE;
        return st;
    }
    alloc_usage_t u;
    alloc_usage(S->alloc, &u);
    if (u.used_chunks > S->capacity) {
        alloc_chunks_t freed;
        alloc_unplace(S->alloc, *offset, &freed);
        return LMS_ERR_OUT_OF_MEMORY;
    }
    resid_placed(used);
    if (!S->cfg.swap && used.n > 0) { /* a hard limit: backed now, like cudaMalloc */
        lms_range_t r = {(void *)(uintptr_t)(S->base + used.first * S->chunk), used.n * S->chunk,
                         LMS_OVERWRITE};
        if ((st = resid_back("lms_malloc", &r, 1, NULL, 0, 0)) != LMS_OK) {
            alloc_chunks_t freed;
            alloc_unplace(S->alloc, *offset, &freed);
            resid_freed(freed);
        }
    }
    return st;
}

/* lms_malloc and lms_free past the thread cache, out of line: the fast path
 * then saves no registers for them. */
static __attribute__((noinline)) lms_status_t malloc_locked(void **ptr, size_t size,
                                                            lms_stream_t stream);
static __attribute__((noinline)) lms_status_t free_locked(void *ptr, lms_stream_t stream);

lms_status_t lms_malloc(void **ptr, size_t size, lms_stream_t stream)
{
    if (ptr != NULL && tc_malloc(ptr, size, stream))
        return LMS_OK;
    return malloc_locked(ptr, size, stream);
}

static lms_status_t malloc_locked(void **ptr, size_t size, lms_stream_t stream)
{
    if (ptr == NULL)
        return base_fail(LMS_ERR_INVALID, "lms_malloc: ptr is NULL");
    *ptr = NULL;
    enter();
    lms_status_t st = ensure();
    stream_t *s = st == LMS_OK ? find_stream(stream) : NULL;
    if (st == LMS_OK && s == NULL)
        st = bad_stream("lms_malloc", stream);
    if (st != LMS_OK || size == 0)
        goto out;
    tc_key(stream);
    if (tc_malloc(ptr, size, stream))
        goto out;
    tc_ran_dry(size);
    size_t offset = 0, freed_size;
    no_room_t where = NO_ROOM_IN_LIMITS;
    if (streams_reuse(&S->streams, s, alloc_class_of(S->alloc, size), size, &offset, &freed_size)) {
        /* the fast path: this stream's own freed space */
        pins_released(&S->pins, offset, freed_size);
        alloc_revive(S->alloc, offset, size);
        *ptr = (void *)(uintptr_t)(S->base + offset);
        goto out;
    }
    /* Space released by completed fences first; then fence every stream and
     * take what has completed; last, wait for the fences (without the lock,
     * so other threads go on meanwhile). */
    for (int attempt = 0; attempt < 3; attempt++) {
        if (attempt == 1) { /* this thread's cache now, the others' at their next call */
            tc_flush();
            tc_invalidate();
        }
        if (attempt == 2)
            streams_wait_for_fences(&S->streams);
        lms_status_t collected = streams_collect_all(&S->streams, attempt > 0);
        while (attempt > 0 && alloc_trim_one(S->alloc)) { /* kept empty slabs' addresses */
        }
        st = place(size, &offset, &where);
        if (st == LMS_ERR_OUT_OF_MEMORY && collected != LMS_OK)
            st = collected; /* the reason more could not be freed */
        if (st != LMS_ERR_OUT_OF_MEMORY)
            break;
    }
    if (st == LMS_OK)
        *ptr = (void *)(uintptr_t)(S->base + offset);
    else if (st == LMS_ERR_OUT_OF_MEMORY)
        st = out_of_memory(size, where, where == NO_ROOM_IN_RANGE ? lms_last_error() : NULL);
out:
    leave();
    return st;
}

/* The offset of a pointer in the range, or false. Caller holds the lock. */
static bool offset_of(const void *ptr, size_t *offset)
{
    dev_addr_t a = (dev_addr_t)(uintptr_t)ptr;
    if (S == NULL || a < S->base || a - S->base >= S->va_size)
        return false;
    *offset = (size_t)(a - S->base);
    return true;
}

/* Queues the freed allocation at offset on s (NULL: a stream destroyed since,
 * whose work is done), or releases it at once when nobody can race it (Note
 * [Stream-ordered free] in streams.c); residency learns of its whole chunks'
 * end. Fails only when the host has no memory for s's pending list; the
 * allocation is then still freed, and the caller's. */
static lms_status_t queue_freed(stream_t *s, size_t offset, size_t size, bool may_fence)
{
    int cls = alloc_class_at(S->alloc, offset);
    alloc_chunks_t own = {offset / S->chunk, (size + S->chunk - 1) / S->chunk};
    if (cls < 0) /* policy/ learns when whole chunks die (in program order) */
        resid_free_event(own);
    bool queued;
    if (streams_queue(&S->streams, s, offset, size, cls, &queued) != LMS_OK)
        return LMS_ERR_OUT_OF_MEMORY;
    if (queued && cls < 0) /* its chunks are its own: their data is dead, never copied out */
        resid_dead(own);
    if (queued && may_fence)
        streams_flush(&S->streams, s);
    return LMS_OK;
}

lms_status_t swap_free_cached(lms_stream_t handle, size_t offset, alloc_flag_t *live,
                              bool may_fence)
{
    size_t size = alloc_cached_freed(S->alloc, offset);
    if (queue_freed(find_stream(handle), offset, size, may_fence) == LMS_OK)
        return LMS_OK;
    alloc_revive(S->alloc, offset, size);
    (void)alloc_cache(live); /* live again just now: back to cached */
    return LMS_ERR_OUT_OF_MEMORY;
}

lms_status_t lms_free(void *ptr, lms_stream_t stream)
{
    if (ptr == NULL || (stream != LMS_ALL_STREAMS && tc_free(ptr, stream)))
        return LMS_OK;
    return free_locked(ptr, stream);
}

static lms_status_t free_locked(void *ptr, lms_stream_t stream)
{
    enter();
    lms_status_t st = LMS_OK;
    bool all = stream == LMS_ALL_STREAMS;
    stream_t *s = S != NULL && !all ? find_stream(stream) : NULL;
    size_t offset = 0, size = 0;
    if (S != NULL && all && offset_of(ptr, &offset) &&
        (st = streams_all(&S->streams, &s)) != LMS_OK)
        goto out;
    if (!all && s != NULL && tc_free_locked(ptr, stream)) /* Note [Thread caches] */
        goto out;
    if (!offset_of(ptr, &offset))
        st = base_fail(LMS_ERR_INVALID, "lms_free(%p): not an address lms handed out", ptr);
    else if (s == NULL)
        st = bad_stream("lms_free", stream);
    else
        st = alloc_mark_freed(S->alloc, offset, &size);
    if (st == LMS_ERR_INVALID && s != NULL && offset_of(ptr, &offset))
        st = base_fail(LMS_ERR_INVALID, "lms_free(%p): %s", ptr, lms_last_error());
    if (st == LMS_ERR_INVALID && S != NULL && !S->warned_bad_free) {
        S->warned_bad_free = true;
        base_log(BASE_LOG_WARN, "%s (reported once; later bad frees only by status)",
                 lms_last_error());
    }
    if (st == LMS_OK && queue_freed(s, offset, size, true) != LMS_OK) {
        alloc_revive(S->alloc, offset, size);
        st = base_fail(LMS_ERR_OUT_OF_MEMORY, "lms_free(%p): no host memory to queue it", ptr);
    }
out:
    leave();
    return st;
}

lms_status_t lms_allocation_of(const void *ptr, void **base, size_t *size)
{
    if (base == NULL || size == NULL)
        return base_fail(LMS_ERR_INVALID, "lms_allocation_of: NULL output");
    if (tc_lookup(ptr, base, size)) /* a small one, without the lock */
        return LMS_OK;
    enter();
    size_t offset, b;
    lms_status_t st = offset_of(ptr, &offset) ? alloc_find(S->alloc, offset, &b, size)
                                              : base_fail(LMS_ERR_INVALID,
                                                          "lms_allocation_of(%p): not an lms address",
                                                          ptr);
    if (st == LMS_OK)
        *base = (void *)(uintptr_t)(S->base + b);
    leave();
    return st;
}

lms_status_t lms_reserved_range(void **base, size_t *bytes)
{
    if (base == NULL || bytes == NULL)
        return base_fail(LMS_ERR_INVALID, "lms_reserved_range: NULL output");
    enter();
    lms_status_t st = ensure();
    if (st == LMS_OK) {
        *base = (void *)(uintptr_t)S->base;
        *bytes = S->va_size;
    }
    leave();
    return st;
}

lms_status_t lms_memory_info(size_t *free_bytes, size_t *total_bytes)
{
    if (free_bytes == NULL || total_bytes == NULL)
        return base_fail(LMS_ERR_INVALID, "lms_memory_info: NULL output");
    enter();
    lms_status_t st = ensure();
    if (st == LMS_OK) {
        alloc_usage_t u;
        alloc_usage(S->alloc, &u);
        size_t limit = S->budget * S->chunk;
        size_t room = u.used_chunks < S->capacity ? (S->capacity - u.used_chunks) * S->chunk : 0;
        *total_bytes = limit;
        *free_bytes = room < limit ? room : limit;
    }
    leave();
    return st;
}

/* ---- streams ------------------------------------------------------------------- */

lms_status_t lms_stream_create(lms_stream_t *out)
{
    if (out == NULL)
        return base_fail(LMS_ERR_INVALID, "lms_stream_create: NULL output");
    enter();
    size_t i;
    lms_status_t st = ensure();
    if (st == LMS_OK && (st = streams_create(&S->streams, &i)) == LMS_OK)
        *out = handle_of(i);
    leave();
    return st;
}

lms_status_t lms_stream_adopt(void *cuda_stream, lms_stream_t *out)
{
    if (out == NULL)
        return base_fail(LMS_ERR_INVALID, "lms_stream_adopt: NULL output");
    enter();
    size_t i = 0;
    lms_status_t st = ensure();
    if (st == LMS_OK && (st = streams_adopt(&S->streams, cuda_stream, &i)) != LMS_OK)
        st = base_fail(st, "lms_stream_adopt(%p): %s", cuda_stream, lms_last_error());
    if (st == LMS_OK)
        *out = handle_of(i);
    leave();
    return st;
}

static lms_status_t destroy_locked(lms_stream_t stream);

lms_status_t lms_stream_unadopt(void *cuda_stream)
{
    enter();
    size_t i = S != NULL ? streams_adopted(&S->streams, cuda_stream) : 0;
    lms_status_t st = i != 0 ? destroy_locked(handle_of(i)) : LMS_OK;
    leave();
    return st;
}

lms_status_t lms_stream_destroy(lms_stream_t stream)
{
    enter();
    lms_status_t st = destroy_locked(stream);
    leave();
    return st;
}

static lms_status_t destroy_locked(lms_stream_t stream)
{
    stream_t *s = S != NULL && stream != NULL ? find_stream(stream) : NULL;
    lms_status_t st = stream == NULL ? base_fail(LMS_ERR_INVALID,
                                                 "lms_stream_destroy: the default stream stays")
                      : s == NULL    ? bad_stream("lms_stream_destroy", stream)
                                     : streams_remove(&S->streams, stream);
    if (st == LMS_OK)
        tc_invalidate(); /* caches keyed to it flush (Note [Thread caches]) */
    return st;
}

lms_status_t lms_stream_synchronize(lms_stream_t stream)
{
    enter();
    lms_status_t st = ensure();
    stream_t *s = st == LMS_OK ? find_stream(stream) : NULL;
    dev_device_t *dev = S != NULL ? S->dev : NULL;
    dev_stream_t *ds = s != NULL ? s->dev : NULL;
    if (st == LMS_OK && s == NULL)
        st = bad_stream("lms_stream_synchronize", stream);
    leave();
    return st != LMS_OK ? st : dev_stream_synchronize(dev, ds); /* without the lock */
}

/* ---- residency ----------------------------------------------------------------- */

lms_status_t lms_access_many(const lms_range_t *ranges, size_t n, lms_stream_t stream)
{
    if (ranges == NULL || n == 0)
        return base_fail(LMS_ERR_INVALID, "lms_access_many: no ranges");
    enter();
    lms_status_t st = ensure();
    stream_t *s = st == LMS_OK ? find_stream(stream) : NULL;
    if (st == LMS_OK && s == NULL)
        st = bad_stream("lms_access", stream);
    if (st == LMS_OK)
        st = resid_access("lms_access", ranges, n, s, streams_slot_of(stream), 0);
    leave();
    return st;
}

/* lms_access_pointers with `mode` for every pointer, or (per_pointer)
 * modes[i] for ptrs[i] (resid_back's marking joins the modes of ranges
 * that share chunks). */
static lms_status_t access_pointers(const char *op, const void *const *ptrs, bool per_pointer,
                                    const lms_access_mode_t *modes, lms_access_mode_t mode,
                                    size_t n, lms_stream_t stream)
{
    if ((ptrs == NULL || (per_pointer && modes == NULL)) && n > 0)
        return base_fail(LMS_ERR_INVALID, "%s: NULL %s list", op, ptrs == NULL ? "pointer" : "mode");
    if (n > SIZE_MAX / sizeof(lms_range_t)) /* its ranges' size would wrap */
        return base_fail(LMS_ERR_INVALID, "%s: %zu pointers is more than any list holds", op, n);
    for (size_t i = 0; i < n && per_pointer; i++)
        if (modes[i] < LMS_READ || modes[i] > LMS_OVERWRITE)
            return base_fail(LMS_ERR_INVALID, "%s: pointer %zu: %d is not an access mode", op, i,
                             (int)modes[i]);
    if (!per_pointer && (mode < LMS_READ || mode > LMS_OVERWRITE))
        return base_fail(LMS_ERR_INVALID, "%s: %d is not an access mode", op, (int)mode);
    lms_range_t stack[64], *r = n <= 64 ? stack : base_meta_alloc(n * sizeof *r);
    if (r == NULL)
        return base_fail(LMS_ERR_OUT_OF_MEMORY, "%s: no host memory for %zu", op, n);
    enter();
    lms_status_t st = ensure();
    stream_t *s = st == LMS_OK ? find_stream(stream) : NULL;
    if (st == LMS_OK && s == NULL)
        st = bad_stream(op, stream);
    size_t m = 0;
    for (size_t i = 0; i < n && st == LMS_OK; i++) {
        size_t offset, base, size;
        if (offset_of(ptrs[i], &offset) && alloc_find(S->alloc, offset, &base, &size) == LMS_OK)
            r[m++] = (lms_range_t){(const void *)(uintptr_t)(S->base + base), size,
                                   per_pointer ? modes[i] : mode};
    }
    if (st == LMS_OK && m > 0)
        st = resid_back(op, r, m, s, streams_slot_of(stream), 0);
    leave();
    if (r != stack)
        base_meta_free(r);
    return st;
}

lms_status_t lms_access_pointers(const void *const *ptrs, size_t n, lms_access_mode_t mode,
                                lms_stream_t stream)
{
    return access_pointers("lms_access_pointers", ptrs, false, NULL, mode, n, stream);
}

lms_status_t lms_access_pointers_modes(const void *const *ptrs, const lms_access_mode_t *modes,
                                      size_t n, lms_stream_t stream)
{
    return access_pointers("lms_access_pointers_modes", ptrs, true, modes, LMS_READ, n, stream);
}

/* ---- launch counts ---------------------------------------------------------------- */

/* What launch hooks saw (lms_note_launch), indexed by lms_launch_seen_t:
 * atomics apart from S, so that counting takes no lock; zeroed at each start. */
static uint64_t launch_counts[LMS_LAUNCH_UNKNOWN + 1];

lms_status_t lms_note_launch(lms_launch_seen_t seen)
{
    if (seen < LMS_LAUNCH_POINTERS || seen > LMS_LAUNCH_UNKNOWN)
        return base_fail(LMS_ERR_INVALID, "lms_note_launch: %d is not what a launch hook saw",
                         (int)seen);
    __atomic_fetch_add(&launch_counts[seen], 1, __ATOMIC_RELAXED);
    return LMS_OK;
}

void swap_launch_reset(void)
{
    for (int i = LMS_LAUNCH_POINTERS; i <= LMS_LAUNCH_UNKNOWN; i++)
        __atomic_store_n(&launch_counts[i], 0, __ATOMIC_RELAXED);
}

void swap_launch_stats(lms_stats_t *out)
{
    uint64_t c[LMS_LAUNCH_UNKNOWN + 1];
    for (int i = LMS_LAUNCH_POINTERS; i <= LMS_LAUNCH_UNKNOWN; i++)
        c[i] = __atomic_load_n(&launch_counts[i], __ATOMIC_RELAXED);
    out->launches = c[LMS_LAUNCH_POINTERS] + c[LMS_LAUNCH_NO_POINTER] + c[LMS_LAUNCH_UNKNOWN];
    out->launches_unknown = c[LMS_LAUNCH_UNKNOWN];
    out->launches_without_lms = c[LMS_LAUNCH_NO_POINTER];
}

lms_status_t lms_access(const void *ptr, size_t bytes, lms_access_mode_t mode, lms_stream_t stream)
{
    lms_range_t r = {ptr, bytes, mode};
    return lms_access_many(&r, 1, stream);
}

lms_status_t lms_mark_iteration(void)
{
    enter();
    lms_status_t st = ensure();
    if (st == LMS_OK)
        st = resid_mark_iteration();
    leave();
    return st;
}

lms_status_t lms_pin(const void *ptr, size_t bytes)
{
    enter();
    lms_status_t st = ensure();
    lms_range_t r = {ptr, bytes, LMS_WRITE};
    size_t offset = 0;
    bool record = st == LMS_OK && bytes > 0 && offset_of(ptr, &offset);
    if (record && !pins_reserve(&S->pins))
        st = base_fail(LMS_ERR_OUT_OF_MEMORY, "lms_pin: no host memory to record the pin");
    if (st == LMS_OK)
        st = resid_access("lms_pin", &r, 1, NULL, 0, 1);
    if (st == LMS_OK && record) /* Note [Pin records] in pins.c */
        pins_add(&S->pins, offset, bytes);
    leave();
    return st;
}

lms_status_t lms_unpin(const void *ptr, size_t bytes)
{
    enter();
    lms_status_t st = ensure();
    size_t offset = 0, base, size;
    bool live = st == LMS_OK && bytes > 0 && offset_of(ptr, &offset) &&
                alloc_find(S->alloc, offset, &base, &size) == LMS_OK && offset - base <= size &&
                bytes <= size - (offset - base);
    if (st == LMS_OK && !live)
        st = base_fail(LMS_ERR_INVALID, "lms_unpin(%p, %zu): not a range of a live allocation",
                       ptr, bytes);
    else if (st == LMS_OK && !pins_remove(&S->pins, offset, bytes))
        st = base_fail(LMS_ERR_INVALID, "lms_unpin(%p, %zu): not pinned: an unpin names a range "
                       "lms_pin pinned, as a free names an allocation", ptr, bytes);
    leave();
    return st;
}

lms_status_t lms_stats(lms_stats_t *out)
{
    if (out == NULL)
        return base_fail(LMS_ERR_INVALID, "lms_stats: NULL output");
    enter();
    lms_status_t st = ensure();
    if (st == LMS_OK) {
        resid_stats(out);
        swap_launch_stats(out);
    }
    leave();
    return st;
}

/* ---- the version and the stats' names: constants, no lock ------------------------ */

const char *lms_version(void) { return LMS_VERSION; }

lms_status_t lms_stats_fields(const char *const **names, size_t *count)
{
    static const char *const fields[] = {
#define STATS_NAME(f) #f,
        LMS_STATS_FIELDS(STATS_NAME)
#undef STATS_NAME
    };
    _Static_assert(sizeof fields / sizeof *fields * sizeof(uint64_t) == sizeof(lms_stats_t),
                   "lms_stats_t is its uint64_t fields, in LMS_STATS_FIELDS's order, no padding");
    if (names == NULL || count == NULL)
        return base_fail(LMS_ERR_INVALID, "lms_stats_fields: NULL %s",
                         names == NULL ? "names" : "count");
    *names = fields;
    *count = sizeof fields / sizeof *fields;
    return LMS_OK;
}

/* ---- swap.h --------------------------------------------------------------------- */

dev_device_t *swap_device(void)
{
    lo_lock(&swap_lock, LO_SWAP);
    dev_device_t *dev = S != NULL ? S->dev : NULL;
    lo_unlock(&swap_lock, LO_SWAP);
    return dev;
}

dev_stream_t *swap_stream(lms_stream_t handle)
{
    lo_lock(&swap_lock, LO_SWAP);
    stream_t *s = S != NULL ? find_stream(handle) : NULL;
    dev_stream_t *ds = s != NULL ? s->dev : NULL;
    lo_unlock(&swap_lock, LO_SWAP);
    return ds;
}

lms_status_t swap_layout(swap_layout_t *out)
{
    if (out == NULL)
        return base_fail(LMS_ERR_INVALID, "swap_layout: NULL output");
    lo_lock(&swap_lock, LO_SWAP);
    lms_status_t st = ensure();
    if (st == LMS_OK)
        *out = (swap_layout_t){S->base, S->va_size, S->chunk, S->budget * S->chunk};
    lo_unlock(&swap_lock, LO_SWAP);
    return st;
}
