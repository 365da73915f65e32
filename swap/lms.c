/*
 * swap/lms.c — include/lms.h: init and shutdown, malloc and frees;
 * streams and stream-ordered frees are streams.c's (Note [Stream-ordered
 * free] there), pin records pins.c's, residency (the block pool, fetch,
 * evict, access) residency.c's and its neighbours'. See swap.h and
 * internal.h.
 *
 * Owns (one state for the process, S, NULL while lms is not initialized):
 *   the device and the VA reservation; the placement (alloc/);
 *   the timeline's start and end (LMS_TRACE: opened at init, finished at
 *             shutdown or exit; swap/trace.c writes it).
 *
 * Lock: `swap_lock` guards all of it, and init and shutdown. Public functions
 * take it; static ones assume it. It is never held while waiting for a stream
 * (waits drop it first: swap_wait_unlocked); it is held across map and unmap,
 * which do not wait for streams, and no host function takes it. Every public
 * function that takes it first closes the calling thread's access window
 * (Note [Access windows] in residency.c).
 */
#include <numa.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "swap/tcache.h"
#include "swap/trace.h"

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

char *swap_fmt(uint64_t bytes, char *buf) { return base_format_size(bytes, buf, 32); }

/* ---- streams and fences -------------------------------------------------------- */

static stream_t *find_stream(lms_stream_t handle) { return streams_find(&S->streams, handle); }

static lms_stream_t handle_of(size_t slot) { return streams_handle(slot, S->streams.generation_of[slot]); }

static lms_status_t bad_stream(const char *op, lms_stream_t s) { return streams_bad_handle(op, s); }

lms_status_t swap_sync_released(void) { return streams_sync_released(&S->streams); }

/* A pending free goes back to everyone (Note [Stream-ordered free] in
 * streams.c): its pins go, alloc/ releases its space, residency its chunks. */
static void release_freed(size_t offset, size_t size)
{
    pins_released(&S->pins, offset, size);
    alloc_chunks_t freed;
    alloc_release(S->alloc, offset, &freed);
    resid_freed(freed);
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
    streams_drain(&S->streams);
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
    streams_destroy(&S->streams);
    events_destroy(&S->events);
    pins_destroy(&S->pins);
    alloc_destroy(S->alloc);
    base_meta_free(S);
    S = NULL;
    tc_invalidate(); /* and the calling thread's cache forgets the state */
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
    size_t flush_bytes = S->budget * chunk / 16 > 64 * BASE_MiB ? 64 * BASE_MiB : S->budget * chunk / 16;
    if ((st = streams_init(&S->streams, S->dev, &S->events, chunk, flush_bytes, release_freed)) !=
        LMS_OK)
        goto fail;
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
    if (S != NULL && all && offset_of(ptr, &offset) && (st = streams_all(&S->streams, &s)) != LMS_OK)
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
