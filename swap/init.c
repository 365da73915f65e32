/*
 * swap/init.c — lms's start and end: the state S built from a configuration
 * (swap_init_locked) and taken apart (swap_destroy_locked), the
 * configuration read from the options, the timeline's start and end
 * (LMS_TRACE: opened at init, finished at shutdown or exit; trace.c writes
 * it), and what lms does at the process's exit (LMS_STATS) and fork (Note
 * [Fork]).
 *
 * S's parts are each their module's: this file makes them, hands each what
 * it needs of the others (the pins their unpin, the streams what a released
 * free goes to) and takes them apart. Lock: swap_lock, held by every caller
 * here; the at-exit and fork handlers take it themselves.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/lockorder.h"
#include "swap/config.h"
#include "swap/tcache.h"
#include "swap/trace.h"

static uint64_t generations; /* of initializations, ever */
/* S->dev where LeakSanitizer looks: S lives in the metadata arena, which it
 * does not scan, so a program that exits with lms running (which may) had
 * the device, libc memory, reported leaked whenever no stale copy of the
 * pointer happened to be left on a thread's stack. */
static dev_device_t *volatile device_root;

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
        .evict_ahead = o->evict_ahead != 0,
        .policy_lru = strcmp(o->policy, "lru") == 0,
        .trace_path = o->trace,
        .evicted = o->evicted,
    };
    dev_config_from_options(&cfg->device);
}

/* The stats for the timeline's end: lms_stats's, or what there is of a
 * start that failed before its placement existed. */
static void final_stats(lms_stats_t *out)
{
    if (S->alloc != NULL)
        resid_stats(out);
    else
        *out = S->stats;
    swap_launch_stats(out);
}

void swap_destroy_locked(void)
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
    if (tracing)
        final_stats(&final);
    if (tracing || S->cfg.measure_links) {
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
    for (int tries = 0; !lo_trylock(&swap_lock, LO_SWAP); tries++) {
        if (tries == 1000) {
            base_log(BASE_LOG_WARN, "%s: another thread was inside lms at exit: %s", what, left);
            return false;
        }
        usleep(1000);
    }
    return true;
}

void swap_print_stats_locked(void)
{
    if (S != NULL && S->cfg.stats_at_exit) {
        lms_stats_t t;
        resid_stats(&t);
        swap_launch_stats(&t);
        print_stats(&t);
    }
}

static void stats_at_exit(void)
{
    if (!lock_at_exit("LMS_STATS", "no stats are printed"))
        return;
    swap_print_stats_locked();
    lo_unlock(&swap_lock, LO_SWAP);
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
    lo_unlock(&swap_lock, LO_SWAP);
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

static void before_fork(void) { lo_lock(&swap_lock, LO_SWAP); }

static void after_fork_parent(void) { lo_unlock(&swap_lock, LO_SWAP); }

static void after_fork_child(void)
{
    if (S != NULL) {
        forked_after_start = true;
        S = NULL;
        tc_invalidate();
    }
    if (timeline_on)
        timeline_forget(); /* the parent's file and buffer */
    lo_unlock(&swap_lock, LO_SWAP);
}

static void register_fork_handlers(void)
{
    if (pthread_atfork(before_fork, after_fork_parent, after_fork_child) != 0)
        base_log(BASE_LOG_WARN, "pthread_atfork failed: a fork during an lms call may leave "
                                "the child's lms locked");
}

/* A pending free goes back to everyone (Note [Stream-ordered free] in
 * streams.c): its pins go, alloc/ releases its space, residency its chunks. */
static void release_freed(size_t offset, size_t size)
{
    pins_released(&S->pins, offset, size);
    alloc_chunks_t freed;
    alloc_release(S->alloc, offset, &freed);
    resid_freed(freed);
}

lms_status_t swap_init_locked(const swap_config_t *cfg, bool from_options)
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
    swap_launch_reset();
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
    /* every "0 = default" and clamp, once (Note [Resolved configuration] in config.c) */
    swap_facts_t facts = {0};
    swap_resolved_t *r = &S->resolved;
    if ((st = swap_facts_device(S->dev, &facts)) != LMS_OK ||
        (st = swap_facts_host(S->dev->info.host_numa_node, &facts)) != LMS_OK ||
        (st = swap_config_resolve(cfg, from_options, &facts, r)) != LMS_OK)
        goto fail;
    size_t chunk = S->chunk = r->chunk, va = r->va_size;
    S->budget = r->budget;
    S->host_limit = r->host_limit;
    S->nchunks = r->nchunks;
    S->va_size = va;
    S->capacity = r->capacity;
    if ((st = dev_va_reserve(S->dev, va, &S->base)) != LMS_OK) {
        char why[256];
        snprintf(why, sizeof why, "%s", lms_last_error());
        st = base_fail(
            st, "lms_init: %s of addresses cannot be reserved (%s): %s", swap_fmt(va, a),
            cfg->va_reserve ? "LMS_VA_RESERVE" : "4 x (LMS_DEVICE_LIMIT + LMS_HOST_LIMIT)", why);
        goto fail;
    }
    alloc_config_t ac = {.chunk_size = chunk, .nchunks = S->nchunks,
                         .large_threshold = r->large_threshold};
    if ((st = alloc_create(&ac, &S->alloc)) != LMS_OK)
        goto fail;
    if ((st = resid_init()) != LMS_OK)
        goto fail;
    if ((st = streams_init(&S->streams, S->dev, &S->events, chunk, r->flush_bytes,
                           release_freed)) != LMS_OK)
        goto fail;
    if (cfg->preallocate && (st = blocks_preallocate(&S->blocks)) != LMS_OK)
        goto fail;
    if (timeline_on || cfg->measure_links) { /* the device's work from now on */
        timeline_copy_streams(S->xfers.h2d, S->xfers.d2h);
        if ((st = dev_set_observer(S->dev, timeline_device_work, NULL)) != LMS_OK)
            goto fail;
    }
    if (timeline_on) {
        static pthread_once_t once = PTHREAD_ONCE_INIT;
        pthread_once(&once, register_timeline_at_exit);
    }
    base_log(BASE_LOG_INFO, "%s device %s: limit %s, host limit %s, %s reserved at 0x%llx; "
             "evicted chunks %s (%s)", S->dev->info.backend, S->dev->info.name,
             swap_fmt(S->budget * chunk, a), swap_fmt(S->host_limit, c), swap_fmt(va, b),
             (unsigned long long)S->base, swap_evicted_str(r->evicted), r->evicted_why);
    if (cfg->swap)
        resid_start();
    if (cfg->stats_at_exit) {
        static pthread_once_t once = PTHREAD_ONCE_INIT;
        pthread_once(&once, register_stats_at_exit);
    }
    return LMS_OK;
fail:
    swap_destroy_locked();
    return st;
}

lms_status_t swap_init_from_options(double device_fraction, bool no_swapping)
{
    swap_config_t cfg;
    swap_config_from_options(&cfg);
    cfg.device_fraction = device_fraction;
    cfg.swap = cfg.swap && !no_swapping;
    return swap_init_locked(&cfg, true);
}
