/*
 * swap/lms.c — include/lms.h: init and shutdown, malloc and stream-ordered
 * frees, streams; residency (the block pool, fetch, evict, access) is in
 * residency.c. See swap.h and internal.h.
 *
 * Owns (one state for the process, S, NULL while lms is not initialized):
 *   the device and the VA reservation; the placement (alloc/);
 *   streams   lms streams, each with its pending frees; see Note
 *             [Stream-ordered free]; an event pool for fences and copies.
 *   the timeline's start and end (LMS_TRACE: opened at init, finished at
 *             shutdown or exit; swap/trace.c writes it).
 *
 * Lock: `swap_lock` guards all of it, and init and shutdown. Public functions
 * take it; static ones assume it. It is never held while waiting for a stream
 * (waits drop it first: swap_wait_unlocked); it is held across map and unmap,
 * which do not wait for streams, and no host function takes it. Every public
 * function that takes it first closes the calling thread's access window
 * (Note [Access windows] in residency.c).
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
 * live_streams): no allocation is ever made on it, so nothing reuses its
 * entries early, and each of its fences is recorded after it waited, on the
 * device, for an event on every other stream (order_after_all). So the
 * entries come back to everyone once all that work is done, by the usual
 * collect; the free itself never waits.
 *
 * Adopted streams (lms_stream_adopt) are the program's CUDA streams, which
 * lms uses as its own: accesses make them wait for fetches, evictions wait
 * for their work, frees on them are stream-ordered on them. The legacy
 * default stream stands for NULL, cudaStreamLegacy and cudaStreamPerThread
 * alike: waiting for the legacy stream covers the per-thread default streams
 * (both are blocking streams), so evictions are safe, at worst late.
 */
#include <numa.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "swap/tcache.h"
#include "swap/trace.h"

#define LARGE_REUSE_SCAN 64 /* pending large entries of a stream looked at for reuse */

pthread_mutex_t swap_lock = PTHREAD_MUTEX_INITIALIZER;
state_t *S;
static uint64_t generations; /* of initializations, ever */
/* S->dev where LeakSanitizer looks: S lives in the metadata arena, which it
 * does not scan, so a program that exits with lms running (which may) had
 * the device, libc memory, reported leaked whenever no stale copy of the
 * pointer happened to be left on a thread's stack. */
static dev_device_t *volatile device_root;

/* Takes the lock and ends the calling thread's access window. */
static void enter(void)
{
    pthread_mutex_lock(&swap_lock);
    if (resid_window_open())
        resid_close_window();
}

static void leave(void) { pthread_mutex_unlock(&swap_lock); }

/* ---- small helpers -------------------------------------------------------------- */

bool swap_grow(void **array, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return true;
    size_t cap2 = *cap ? *cap * 2 : 16;
    while (cap2 < need)
        cap2 *= 2;
    void *p = base_meta_realloc(*array, cap2 * elem);
    if (p == NULL)
        return false;
    *array = p;
    *cap = cap2;
    return true;
}

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

char *swap_fmt(uint64_t bytes, char *buf) { return base_format_size(bytes, buf, 32); }

/* ---- streams and fences -------------------------------------------------------- */

static stream_t *find_stream(lms_stream_t handle) { return streams_find(&S->streams, handle); }

static lms_stream_t handle_of(size_t slot) { return streams_handle(slot, S->streams.generation_of[slot]); }

static lms_status_t order_after_all(stream_t *s);
static lms_status_t add_stream(uint64_t native, bool all, size_t *slot);

static lms_status_t bad_stream(const char *op, lms_stream_t s)
{
    return base_fail(LMS_ERR_INVALID, "%s: %p is not a live lms stream", op, (void *)s);
}

/* Records a fence on s covering its frees so far, if it has unfenced ones. */
static lms_status_t fence(stream_t *s)
{
    if (s->unfenced_bytes == 0)
        return LMS_OK;
    if (!swap_grow((void **)&s->fences, &s->capfences, s->nfences + 1, sizeof *s->fences))
        return base_fail(LMS_ERR_OUT_OF_MEMORY, "no host memory for a fence");
    dev_event_t *e;
    lms_status_t st = s->all ? order_after_all(s) : LMS_OK; /* Note [Free after all streams] */
    if (st == LMS_OK)
        st = events_take(&S->events, &e);
    if (st == LMS_OK && (st = dev_event_record(S->dev, e, s->dev)) != LMS_OK)
        events_recycle(&S->events, e);
    if (st != LMS_OK)
        return st;
    s->fences[s->nfences++] = (fence_t){e, s->epoch};
    s->epoch++;
    s->unfenced_bytes = 0;
    return LMS_OK;
}

/* Waits until the default stream has finished what was queued when the
 * frees released at once so far were made: until then a block of memory
 * freed that way must not be taken for another chunk (take_block unmaps, and
 * unmap does not wait for queued work). Each wait records an event of its
 * own: threads share the default stream, and one shared event, re-recorded
 * by another thread while this one waited unlocked, read "not ready" after
 * the wait (issue 24). */
lms_status_t swap_sync_released(void)
{
    uint64_t upto = S->streams.released_at_once;
    dev_event_t *e;
    lms_status_t st = events_take(&S->events, &e);
    if (st != LMS_OK)
        return st;
    if ((st = dev_event_record(S->dev, e, S->streams.slot[0]->dev)) == LMS_OK) {
        events_wait_unlocked(&S->events, e);
        /* the wait's own error shows again here; "not ready" after a wait
         * on an event nobody else records is the device's failure */
        if ((st = dev_event_query(S->dev, e)) == LMS_NOT_READY)
            st = base_fail(LMS_ERR_DEVICE, "lms: the default stream's work was waited for "
                                           "and is still not done");
    }
    events_recycle(&S->events, e);
    if (st != LMS_OK)
        return st;
    if (S->streams.released_synced < upto)
        S->streams.released_synced = upto;
    return LMS_OK;
}

static void release_entry(pending_t *p)
{
    pins_released(&S->pins, p->offset, p->size);
    alloc_chunks_t freed;
    alloc_release(S->alloc, p->offset, &freed);
    resid_freed(freed);
}

/* Releases the entries of s covered by fences whose events have completed
 * (waiting for them if wait). */
static lms_status_t collect(stream_t *s, bool wait)
{
    while (s->nfences > 0) {
        fence_t f = s->fences[0];
        lms_status_t st = wait ? dev_event_synchronize(S->dev, f.event)
                               : dev_event_query(S->dev, f.event);
        if (st == LMS_NOT_READY)
            return LMS_OK;
        if (st != LMS_OK)
            return st;
        for (int k = 0; k <= ALLOC_MAX_CLASSES; k++) {
            deque_t *d = k < ALLOC_MAX_CLASSES ? &s->small[k] : &s->large;
            while (d->len > 0 && dq_at(d, 0)->epoch <= f.epoch) {
                release_entry(dq_at(d, 0));
                d->head = (d->head + 1) & (d->cap - 1);
                d->len--;
            }
        }
        memmove(&s->fences[0], &s->fences[1], --s->nfences * sizeof *s->fences);
        events_recycle(&S->events, f.event);
    }
    return LMS_OK;
}

/* Fences every stream if `fence_first`, then collects every stream. */
static lms_status_t collect_all(bool fence_first, bool wait)
{
    lms_status_t st = LMS_OK;
    for (size_t i = 0; i < S->streams.n && st == LMS_OK; i++) {
        if (S->streams.slot[i] == NULL)
            continue;
        if (fence_first)
            st = fence(S->streams.slot[i]);
        if (st == LMS_OK)
            st = collect(S->streams.slot[i], wait);
    }
    return st;
}

/* Waits, with the lock dropped, for the newest fence of every stream (a
 * stream's fences complete in order), 64 streams' at a time. The events stay
 * out of reuse meanwhile (recycle_event). Errors are left for the collect
 * that follows. */
static void wait_for_fences(void)
{
    /* one waiter throughout: between two waits another thread may collect
     * the next event, which must stay retired, not re-recorded, until this
     * thread has waited on it too */
    events_waiters_enter(&S->events);
    for (size_t from = 0; from < S->streams.n;) { /* slots may come and go between batches */
        dev_event_t *newest[64];
        size_t n = 0;
        for (; from < S->streams.n && n < 64; from++)
            if (S->streams.slot[from] != NULL && S->streams.slot[from]->nfences > 0)
                newest[n++] = S->streams.slot[from]->fences[S->streams.slot[from]->nfences - 1].event;
        for (size_t i = 0; i < n; i++)
            events_wait_unlocked(&S->events, newest[i]);
    }
    events_waiters_leave(&S->events);
}

/* A pending entry of s that an allocation of size may take over; the
 * pointer is valid until the deque changes. */
static deque_t *reusable(stream_t *s, size_t size, size_t *index)
{
    int cls = alloc_class_of(S->alloc, size);
    size_t chunks = (size + S->chunk - 1) / S->chunk;
    deque_t *d = cls >= 0 ? &s->small[cls] : &s->large;
    bool found = false;
    for (size_t k = 0; k < d->len && k < LARGE_REUSE_SCAN; k++) { /* Note [Placement repeats] */
        size_t i = d->len - 1 - k;
        const pending_t *p = dq_at(d, i);
        if ((cls >= 0 || (p->size + S->chunk - 1) / S->chunk == chunks) &&
            (!found || p->offset < dq_at(d, *index)->offset)) {
            *index = i;
            found = true;
        }
    }
    return found ? d : NULL;
}

/* ---- init and shutdown ---------------------------------------------------------- */

void swap_config_from_options(swap_config_t *cfg)
{
    const base_options_t *o = base_options();
    *cfg = (swap_config_t){
        .device_limit = o->device_limit,
        .host_limit = o->host_limit,
        .va_reserve = o->va_reserve,
        .large_threshold = o->large_threshold,
        .preallocate = o->preallocate != 0,
        .swap = o->swap != 0,
        .reclaim_low = o->reclaim_low,
        .reclaim_high = o->reclaim_high,
        .thread_cache = o->thread_cache,
        .swap_piece = o->swap_piece,
        .stats_at_exit = o->stats != 0,
        .policy_lru = strcmp(o->policy, "lru") == 0,
        .trace_path = o->trace,
    };
    dev_config_from_options(&cfg->device);
}

static size_t default_host_limit(int node)
{
    long long node_bytes = node >= 0 && numa_available() >= 0 ? numa_node_size64(node, NULL) : -1;
    if (node_bytes <= 0)
        node_bytes = (long long)sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGESIZE);
    return (size_t)node_bytes / 2;
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

static void launch_stats(lms_stats_t *out);
static void reset_launch_counts(void);

/* The stats for the timeline's end: lms_stats's, or what there is of a
 * start that failed before its placement existed. */
static void final_stats(lms_stats_t *out)
{
    if (S->alloc != NULL)
        resid_stats(out);
    else
        *out = S->stats;
    launch_stats(out);
}

static void destroy_state(void)
{
    if (S == NULL)
        return;
    tc_invalidate(); /* before anything goes (lms.h: no call may run beside it) */
    resid_stop();
    /* the host pool goes first, so no copy may still use it */
    for (size_t i = 0; i < S->streams.n; i++)
        if (S->streams.slot[i] != NULL)
            (void)dev_stream_synchronize(S->dev, S->streams.slot[i]->dev);
    if (S->xfers.h2d != NULL)
        (void)dev_stream_synchronize(S->dev, S->xfers.h2d);
    if (S->xfers.d2h != NULL)
        (void)dev_stream_synchronize(S->dev, S->xfers.d2h);
    /* the timeline ends with the stats as they are now, once the device has
     * reported all its work (the observer's replacement waits for that) and
     * can report no more (closed) */
    bool tracing = timeline_on;
    lms_stats_t final;
    if (tracing) {
        final_stats(&final);
        if (dev_set_observer(S->dev, NULL, NULL) != LMS_OK)
            base_log(BASE_LOG_DEBUG, "LMS_TRACE: the last device work may be missing: %s",
                     lms_last_error());
    }
    resid_destroy();
    dev_close(S->dev); /* destroys the streams and events, unmaps, releases every block */
    device_root = NULL;
    if (tracing)
        timeline_finish(&final);
    for (size_t i = 0; i < S->streams.n; i++)
        free_stream(S->streams.slot[i]);
    events_destroy(&S->events);
    pins_destroy(&S->pins);
    alloc_destroy(S->alloc);
    base_meta_free(S);
    S = NULL;
    tc_invalidate(); /* and the calling thread's cache forgets the state */
}

/* A new stream: lms's own, or (native != 0) the program's, adopted. */
static lms_status_t new_stream(uint64_t native, stream_t **out)
{
    stream_t *s = base_meta_calloc(1, sizeof *s);
    if (s == NULL)
        return base_fail(LMS_ERR_OUT_OF_MEMORY, "lms_stream_create: no host memory");
    s->native = native;
    lms_status_t st = native != 0 ? dev_stream_adopt(S->dev, native, &s->dev)
                                  : dev_stream_create(S->dev, DEV_PRIORITY_NORMAL, &s->dev);
    if (st == LMS_OK && (st = dev_event_create(S->dev, &s->use_event)) != LMS_OK)
        dev_stream_destroy(S->dev, s->dev);
    if (st != LMS_OK) {
        base_meta_free(s);
        return st;
    }
    *out = s;
    return LMS_OK;
}

static void print_stats(const lms_stats_t *t)
{
    char a[32], b[32], c[32], d[32], e[32];
    fprintf(stderr,
            "lms stats: %s fetched (%llu chunks), %s evicted (%llu chunks), %llu clean drops, "
            "%.3f s callers waited for device memory, peak resident %s of %s, %s on host now, "
            "%llu out-of-memory failures\n",
            swap_fmt(t->bytes_h2d, a), (unsigned long long)t->fetches, swap_fmt(t->bytes_d2h, b),
            (unsigned long long)t->evictions, (unsigned long long)t->clean_drops,
            (double)t->stall_ns / 1e9, swap_fmt(t->peak_resident_bytes, c),
            swap_fmt(t->device_limit, d), swap_fmt(t->host_bytes, e), (unsigned long long)t->ooms);
    if (t->launches > 0)
        fprintf(stderr, "lms stats: %llu kernel launches seen, %llu with no lms pointer, %llu "
                        "whose parameter layout was unknown\n",
                (unsigned long long)t->launches, (unsigned long long)t->launches_without_lms,
                (unsigned long long)t->launches_unknown);
}

/* The lock for an atexit handler of setting `what`. Another thread may be
 * inside lms at exit, or stopped in it for good holding the lock: it is
 * waited for a second at most, else false, saying what is `left` undone. */
static bool lock_at_exit(const char *what, const char *left)
{
    for (int tries = 0; pthread_mutex_trylock(&swap_lock) != 0; tries++) {
        if (tries == 1000) {
            base_log(BASE_LOG_WARN, "%s: another thread was inside lms at exit: %s", what, left);
            return false;
        }
        usleep(1000);
    }
    return true;
}

static void stats_at_exit(void)
{
    if (!lock_at_exit("LMS_STATS", "no stats are printed"))
        return;
    if (S != NULL && S->cfg.stats_at_exit) {
        lms_stats_t t;
        resid_stats(&t);
        launch_stats(&t);
        print_stats(&t);
    }
    pthread_mutex_unlock(&swap_lock);
}

static void register_stats_at_exit(void) { atexit(stats_at_exit); }

/* At exit with lms still running, the timeline ends with the stats of then
 * (work still on the device is not in it); without the lock (lock_at_exit)
 * the file is left unfinished, as by a crash. */
static void timeline_at_exit(void)
{
    if (!lock_at_exit("LMS_TRACE", "the timeline is left unfinished"))
        return;
    if (S != NULL && timeline_on) {
        lms_stats_t t;
        final_stats(&t);
        timeline_finish(&t);
    }
    pthread_mutex_unlock(&swap_lock);
}

static void register_timeline_at_exit(void) { atexit(timeline_at_exit); }

/*
 * Note [Fork]
 * A process forked after lms started gets a copy of lms's tables but none
 * of its threads (the reclaim thread, the sim's streams) and no device:
 * CUDA cannot be used in the child of a process that initialized it. In the
 * child, lms is as if never started and cannot start: what would start it
 * fails with LMS_ERR_UNSUPPORTED and says why, and the parent's pointers
 * are not lms's (the copied tables are left alone: copy-on-write, they
 * cost the child nothing untouched). A child forked before lms started may
 * start it. fork waits for the lms calls in progress on other threads, so
 * that the child finds the lock free: its handlers (pthread_atfork,
 * registered at the first start, after jemalloc's, so that jemalloc's
 * locks are still free while lms's are waited for) take swap_lock before
 * and release it after, on both sides.
 */
static bool forked_after_start;

static void before_fork(void) { pthread_mutex_lock(&swap_lock); }

static void after_fork_parent(void) { pthread_mutex_unlock(&swap_lock); }

static void after_fork_child(void)
{
    if (S != NULL) {
        forked_after_start = true;
        S = NULL;
        tc_invalidate();
    }
    if (timeline_on)
        timeline_forget(); /* the parent's file and buffer */
    pthread_mutex_unlock(&swap_lock);
}

static void register_fork_handlers(void)
{
    if (pthread_atfork(before_fork, after_fork_parent, after_fork_child) != 0)
        base_log(BASE_LOG_WARN, "pthread_atfork failed: a fork during an lms call may leave "
                                "the child's lms locked");
}

/* The most address space lms reserves: x86-64's user half (4-level pages). */
#define VA_MAX ((size_t)1 << 47)

static lms_status_t init_locked(const swap_config_t *cfg)
{
    char a[32], b[32], c[32];
    if (forked_after_start)
        return base_fail(LMS_ERR_UNSUPPORTED,
                         "lms: this process was forked after lms started in its parent: lms "
                         "cannot start in it (nor can CUDA), and the parent's memory is not its");
    S = base_meta_calloc(1, sizeof *S);
    if (S == NULL)
        return base_fail(LMS_ERR_OUT_OF_MEMORY, "lms_init: no host memory");
    pins_init(&S->pins, &tc_pin_records, resid_unpin);
    static pthread_once_t fork_once = PTHREAD_ONCE_INIT;
    pthread_once(&fork_once, register_fork_handlers);
    S->cfg = *cfg;
    S->generation = ++generations;
    reset_launch_counts();
    lms_status_t st = dev_open(&cfg->device, &S->dev);
    if (st != LMS_OK) {
        base_meta_free(S);
        S = NULL;
        return st;
    }
    device_root = S->dev;
    events_init(&S->events, S->dev, &swap_lock);
    if (cfg->trace_path != NULL && cfg->trace_path[0] != '\0' &&
        (st = timeline_open(cfg->trace_path, &S->dev->info, &cfg->device)) != LMS_OK)
        goto fail;
    size_t chunk = S->chunk = S->dev->info.granularity, free_b, total;
    if ((st = dev_mem_info(S->dev, &free_b, &total)) != LMS_OK)
        goto fail;
    bool by_fraction = cfg->device_fraction > 0;
    size_t limit = by_fraction ? (size_t)(cfg->device_fraction * (double)total) : cfg->device_limit;
    if (limit == 0 && !by_fraction) /* not set; a fraction that gives 0 bytes fails below */
        limit = free_b - (free_b / 8 < 512 * BASE_MiB ? free_b / 8 : 512 * BASE_MiB);
    if (limit > free_b) {
        base_log(BASE_LOG_WARN, "%s=%s is more than the device's free memory (%s); using %s",
                 by_fraction ? "lms_set_device_fraction's limit" : "LMS_DEVICE_LIMIT",
                 swap_fmt(limit, a), swap_fmt(free_b, b), b);
        limit = free_b;
    }
    S->budget = limit / chunk;
    if (S->budget == 0) {
        char what[64];
        if (by_fraction)
            snprintf(what, sizeof what, "lms_set_device_fraction(%g)", cfg->device_fraction);
        st = base_fail(LMS_ERR_INVALID, "lms_init: the device limit %s (%s) is less than one "
                       "chunk (%s)", swap_fmt(limit, a), by_fraction ? what : "LMS_DEVICE_LIMIT",
                       swap_fmt(chunk, b));
        goto fail;
    }
    S->host_limit = !cfg->swap      ? 0
                    : cfg->host_limit ? cfg->host_limit
                                      : default_host_limit(S->dev->info.host_numa_node);
    /* Pinned host memory is the machine's: a limit beyond it cannot be met,
     * and 4 x it as the default reserve asked for tables of billions of
     * chunks (LMS_HOST_LIMIT=2^63, the settings sweep) */
    size_t ram = (size_t)sysconf(_SC_PHYS_PAGES) * (size_t)sysconf(_SC_PAGESIZE);
    if (S->host_limit > ram) {
        st = base_fail(LMS_ERR_INVALID, "lms_init: LMS_HOST_LIMIT=%s is more than this machine's "
                       "memory (%s)", swap_fmt(S->host_limit, a), swap_fmt(ram, b));
        goto fail;
    }
    if (cfg->va_reserve > VA_MAX) {
        st = base_fail(LMS_ERR_INVALID, "lms_init: LMS_VA_RESERVE=%s is more than lms reserves "
                       "(%s, the user address space of x86-64)", swap_fmt(cfg->va_reserve, a),
                       swap_fmt(VA_MAX, b));
        goto fail;
    }
    size_t room = S->budget * chunk + S->host_limit; /* device memory + RAM at most: no wrap */
    size_t va = cfg->va_reserve ? cfg->va_reserve : 4 * room < VA_MAX ? 4 * room : VA_MAX;
    if (va / chunk >= UINT32_MAX) /* chunk ids are 32 bits (a sim of 4 KiB blocks) */
        va = (size_t)(UINT32_MAX - 1) * chunk;
    va = (va + chunk - 1) / chunk * chunk;
    if (va < S->budget * chunk) {
        base_log(BASE_LOG_WARN, "LMS_VA_RESERVE=%s is less than the device limit (%s); "
                 "reserving %s", swap_fmt(cfg->va_reserve, a), swap_fmt(S->budget * chunk, b),
                 b);
        va = S->budget * chunk;
    }
    S->nchunks = va / chunk;
    S->va_size = va;
    if ((st = dev_va_reserve(S->dev, va, &S->base)) != LMS_OK) {
        char why[256];
        snprintf(why, sizeof why, "%s", lms_last_error());
        st = base_fail(st, "lms_init: %s of addresses cannot be reserved (%s): %s", swap_fmt(va, a),
                       cfg->va_reserve ? "LMS_VA_RESERVE" : "4 x (LMS_DEVICE_LIMIT + LMS_HOST_LIMIT)",
                       why);
        goto fail;
    }
    alloc_config_t ac = {.chunk_size = chunk, .nchunks = S->nchunks,
                         .large_threshold = cfg->large_threshold};
    if (!alloc_large_threshold_ok(chunk, ac.large_threshold)) { /* known only now */
        base_log(BASE_LOG_WARN, "LMS_LARGE_THRESHOLD=%zu: must be 4 KiB..16 chunks (%zu bytes); "
                 "using the default, 8 chunks", ac.large_threshold, 16 * chunk);
        ac.large_threshold = 0;
    }
    if ((st = alloc_create(&ac, &S->alloc)) != LMS_OK)
        goto fail;
    if ((st = resid_init()) != LMS_OK)
        goto fail;
    /* Whatever is allocated must have somewhere to be; and swapping needs
     * room to turn: a chunk goes out before another comes in, and the
     * reclaim thread keeps `high` blocks free, whose data is then on the
     * host. So that much of the host limit is not for allocations. */
    size_t host_chunks = S->host_limit / chunk;
    S->capacity = S->budget + (host_chunks > S->rc.high ? host_chunks - S->rc.high : 0);
    if (cfg->va_reserve && S->nchunks < S->capacity)
        base_log(BASE_LOG_WARN, "LMS_VA_RESERVE=%s is less than the room for allocations (%s of "
                 "the device and host limits): allocations stop at the reserved range",
                 swap_fmt(va, a), swap_fmt(S->capacity * chunk, b));
    S->streams.flush_bytes = S->budget * chunk / 16 > 64 * BASE_MiB ? 64 * BASE_MiB : S->budget * chunk / 16;
    if ((st = new_stream(0, &S->streams.slot[0])) != LMS_OK)
        goto fail;
    S->streams.n = S->streams.live = 1;
    if (cfg->preallocate && (st = blocks_preallocate(&S->blocks)) != LMS_OK)
        goto fail;
    if (timeline_on) { /* the device's work from now on */
        timeline_copy_streams(S->xfers.h2d, S->xfers.d2h);
        if ((st = dev_set_observer(S->dev, timeline_device_work, NULL)) != LMS_OK)
            goto fail;
        static pthread_once_t once = PTHREAD_ONCE_INIT;
        pthread_once(&once, register_timeline_at_exit);
    }
    base_log(BASE_LOG_INFO, "%s device %s: limit %s, host limit %s, %s reserved at 0x%llx",
             S->dev->info.backend, S->dev->info.name, swap_fmt(S->budget * chunk, a),
             swap_fmt(S->host_limit, c), swap_fmt(va, b), (unsigned long long)S->base);
    if (cfg->swap)
        resid_start();
    if (cfg->stats_at_exit) {
        static pthread_once_t once = PTHREAD_ONCE_INIT;
        pthread_once(&once, register_stats_at_exit);
    }
    return LMS_OK;
fail:
    destroy_state();
    return st;
}

/* Initializes from the options if needed. Caller holds the lock. */
static double device_fraction; /* lms_set_device_fraction's, for every later start */
static bool no_swapping;       /* lms_forbid_swapping was called */

static lms_status_t ensure(void)
{
    if (S != NULL)
        return LMS_OK;
    swap_config_t cfg;
    swap_config_from_options(&cfg);
    cfg.device_fraction = device_fraction;
    cfg.swap = cfg.swap && !no_swapping;
    return init_locked(&cfg);
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
        if ((st = collect_all(true, false)) == LMS_OK) {
            wait_for_fences();
            st = collect_all(false, false);
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
    pthread_mutex_lock(&swap_lock);
    lms_status_t st = S != NULL ? base_fail(LMS_ERR_INVALID, "swap_init: lms is initialized already")
                                : init_locked(cfg);
    pthread_mutex_unlock(&swap_lock);
    return st;
}

lms_status_t lms_shutdown(void)
{
    enter();
    destroy_state();
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
    size_t offset = 0, index = 0;
    no_room_t where = NO_ROOM_IN_LIMITS;
    deque_t *d = reusable(s, size, &index);
    if (d != NULL) { /* the fast path: this stream's own freed space */
        offset = dq_at(d, index)->offset;
        pins_released(&S->pins, offset, dq_at(d, index)->size);
        dq_remove(d, index);
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
            wait_for_fences();
        lms_status_t collected = collect_all(attempt > 0, false);
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
 * [Stream-ordered free]). Fails only when the host has no memory for s's
 * pending list; the allocation is then still freed, and the caller's. */
static lms_status_t queue_freed(stream_t *s, size_t offset, size_t size, bool may_fence)
{
    int cls = alloc_class_at(S->alloc, offset);
    if (cls < 0) /* policy/ learns when whole chunks die (in program order) */
        resid_free_event((alloc_chunks_t){offset / S->chunk, (size + S->chunk - 1) / S->chunk});
    if (s == NULL || S->streams.live == 1) {
        pins_released(&S->pins, offset, size);
        alloc_chunks_t freed;
        alloc_release(S->alloc, offset, &freed);
        resid_freed(freed);
        S->streams.released_at_once++;
        return LMS_OK;
    }
    deque_t *d = cls >= 0 ? &s->small[cls] : &s->large;
    if (!dq_push(d, (pending_t){offset, size, s->epoch}))
        return LMS_ERR_OUT_OF_MEMORY;
    if (cls < 0) /* its chunks are its own: their data is dead, never copied out */
        resid_dead((alloc_chunks_t){offset / S->chunk, (size + S->chunk - 1) / S->chunk});
    s->unfenced_bytes += size;
    /* Let a stream that frees much give its memory back to everyone. A fence
     * that cannot be recorded now is recorded when an allocation runs short. */
    if (may_fence && s->unfenced_bytes >= S->streams.flush_bytes && fence(s) != LMS_OK)
        base_log(BASE_LOG_DEBUG, "lms_free: fence deferred: %s", lms_last_error());
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

/* The all-streams stream, made on first use (Note [Free after all streams]). */
static lms_status_t all_streams(stream_t **out)
{
    size_t i;
    lms_status_t st = LMS_OK;
    if (S->streams.all_slot == 0 && (st = add_stream(0, true, &i)) == LMS_OK)
        S->streams.all_slot = i;
    if (st != LMS_OK)
        return base_fail(st, "lms_free(LMS_ALL_STREAMS): %s", lms_last_error());
    *out = S->streams.slot[S->streams.all_slot];
    return LMS_OK;
}

static lms_status_t free_locked(void *ptr, lms_stream_t stream)
{
    enter();
    lms_status_t st = LMS_OK;
    bool all = stream == LMS_ALL_STREAMS;
    stream_t *s = S != NULL && !all ? find_stream(stream) : NULL;
    size_t offset = 0, size = 0;
    if (S != NULL && all && offset_of(ptr, &offset) && (st = all_streams(&s)) != LMS_OK)
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
    if (st == LMS_ERR_INVALID && S != NULL && !S->streams.warned_bad_free) {
        S->streams.warned_bad_free = true;
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

/* Makes the new stream s wait, on the device, for what every other stream has
 * queued so far (see Note [Stream-ordered free]). */
static lms_status_t order_after_all(stream_t *s)
{
    if (!swap_grow((void **)&S->events.free, &S->events.capfree, S->events.nfree + 1, sizeof *S->events.free))
        return base_fail(LMS_ERR_OUT_OF_MEMORY, "no host memory to order a stream after the others");
    dev_event_t *e;
    lms_status_t st = LMS_OK;
    if (S->events.nfree > 0)
        e = S->events.free[--S->events.nfree];
    else if ((st = dev_event_create(S->dev, &e)) != LMS_OK)
        return st;
    for (size_t i = 0; i < S->streams.n && st == LMS_OK; i++)
        if (S->streams.slot[i] != NULL && S->streams.slot[i] != s &&
            (st = dev_event_record(S->dev, e, S->streams.slot[i]->dev)) == LMS_OK)
            st = dev_stream_wait_event(S->dev, s->dev, e); /* waits on this record */
    S->events.free[S->events.nfree++] = e; /* room was made above */
    return st;
}

/* Makes a stream in the first free slot (see new_stream; `all`: the
 * all-streams one) and orders it after every other stream. */
static lms_status_t add_stream(uint64_t native, bool all, size_t *slot)
{
    size_t i = 1;
    while (i < S->streams.n && S->streams.slot[i] != NULL)
        i++;
    if (i == MAX_STREAMS)
        return base_fail(LMS_ERR_OUT_OF_MEMORY, "%u streams exist", MAX_STREAMS - 1);
    lms_status_t st = new_stream(native, &S->streams.slot[i]);
    if (st != LMS_OK)
        return st;
    S->streams.slot[i]->all = all;
    if ((st = order_after_all(S->streams.slot[i])) != LMS_OK) {
        dev_stream_destroy(S->dev, S->streams.slot[i]->dev);
        free_stream(S->streams.slot[i]);
        S->streams.slot[i] = NULL;
        return st;
    }
    S->streams.live += !all;
    if (i == S->streams.n)
        S->streams.n++;
    *slot = i;
    return LMS_OK;
}

lms_status_t lms_stream_create(lms_stream_t *out)
{
    if (out == NULL)
        return base_fail(LMS_ERR_INVALID, "lms_stream_create: NULL output");
    enter();
    size_t i;
    lms_status_t st = ensure();
    if (st == LMS_OK && (st = add_stream(0, false, &i)) == LMS_OK)
        *out = handle_of(i);
    leave();
    return st;
}

/* The key of a program's stream: NULL, cudaStreamLegacy (0x1) and
 * cudaStreamPerThread (0x2) are all the legacy default stream (Note [Free
 * after all streams]). */
static uint64_t native_key(void *cuda_stream)
{
    uintptr_t h = (uintptr_t)cuda_stream;
    return h <= 2 ? 1 : h;
}

/* The slot of the stream adopted for key; 0 if none. */
static size_t adopted_slot(uint64_t key)
{
    for (size_t i = 1; i < S->streams.n; i++)
        if (S->streams.slot[i] != NULL && S->streams.slot[i]->native == key)
            return i;
    return 0;
}

lms_status_t lms_stream_adopt(void *cuda_stream, lms_stream_t *out)
{
    if (out == NULL)
        return base_fail(LMS_ERR_INVALID, "lms_stream_adopt: NULL output");
    enter();
    uint64_t key = native_key(cuda_stream);
    size_t i = 0;
    lms_status_t st = ensure();
    if (st == LMS_OK && (i = adopted_slot(key)) == 0 && (st = add_stream(key, false, &i)) != LMS_OK)
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
    size_t i = S != NULL ? adopted_slot(native_key(cuda_stream)) : 0;
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
                                     : LMS_OK;
    /* Its pending frees go back once its queued work is done: wait for that,
     * with the lock dropped, then look the stream up again. */
    for (int round = 0; st == LMS_OK && round < 100; round++) {
        if ((st = fence(s)) != LMS_OK || s->nfences == 0)
            break;
        events_wait_unlocked(&S->events, s->fences[s->nfences - 1].event);
        if ((s = find_stream(stream)) == NULL)
            st = bad_stream("lms_stream_destroy", stream); /* destroyed meanwhile */
        else
            st = collect(s, false);
    }
    if (st == LMS_OK && s->nfences > 0)
        st = base_fail(LMS_ERR_DEVICE, "lms_stream_destroy: frees keep arriving on the stream");
    /* and every other piece of its work: evictions of chunks it used wait
     * for its work through its slot, which will be gone */
    dev_event_t *e = NULL;
    if (st == LMS_OK && (st = events_take(&S->events, &e)) == LMS_OK &&
        (st = dev_event_record(S->dev, e, s->dev)) == LMS_OK) {
        events_wait_unlocked(&S->events, e);
        if ((s = find_stream(stream)) == NULL)
            st = bad_stream("lms_stream_destroy", stream);
    }
    if (e != NULL)
        events_recycle(&S->events, e);
    if (st == LMS_OK)
        st = dev_stream_destroy(S->dev, s->dev);
    if (st == LMS_OK) {
        size_t i = ((uintptr_t)stream & 0xffff) - 1;
        (void)dev_event_destroy(S->dev, s->use_event);
        for (size_t k = 0; k < USE_RING; k++)
            if (s->after[k] != NULL)
                (void)dev_event_destroy(S->dev, s->after[k]);
        free_stream(s);
        S->streams.slot[i] = NULL;
        S->streams.generation_of[i]++;
        S->streams.live--;
        tc_invalidate(); /* caches keyed to it flush (Note [Thread caches]) */
    }
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

static int slot_of(lms_stream_t handle) { return streams_slot_of(handle); }

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
        st = resid_access("lms_access", ranges, n, s, slot_of(stream), 0);
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
        st = resid_back(op, r, m, s, slot_of(stream), 0);
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

static void reset_launch_counts(void)
{
    for (int i = LMS_LAUNCH_POINTERS; i <= LMS_LAUNCH_UNKNOWN; i++)
        __atomic_store_n(&launch_counts[i], 0, __ATOMIC_RELAXED);
}

/* The launch counts into *out (lms_stats's fields). */
static void launch_stats(lms_stats_t *out)
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
    else if (st == LMS_OK && !pins_remove(&S->pins, offset, bytes)) /* Note [Pin records] in pins.c */
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
        launch_stats(out);
    }
    leave();
    return st;
}

/* ---- swap.h --------------------------------------------------------------------- */

dev_device_t *swap_device(void)
{
    pthread_mutex_lock(&swap_lock);
    dev_device_t *dev = S != NULL ? S->dev : NULL;
    pthread_mutex_unlock(&swap_lock);
    return dev;
}

dev_stream_t *swap_stream(lms_stream_t handle)
{
    pthread_mutex_lock(&swap_lock);
    stream_t *s = S != NULL ? find_stream(handle) : NULL;
    dev_stream_t *ds = s != NULL ? s->dev : NULL;
    pthread_mutex_unlock(&swap_lock);
    return ds;
}

lms_status_t swap_layout(swap_layout_t *out)
{
    if (out == NULL)
        return base_fail(LMS_ERR_INVALID, "swap_layout: NULL output");
    pthread_mutex_lock(&swap_lock);
    lms_status_t st = ensure();
    if (st == LMS_OK)
        *out = (swap_layout_t){S->base, S->va_size, S->chunk, S->budget * S->chunk};
    pthread_mutex_unlock(&swap_lock);
    return st;
}
