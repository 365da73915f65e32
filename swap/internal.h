/*
 * swap/internal.h — the state swap/'s files share: S, the composition of
 * the modules' structs, and the calls between files. Not an interface:
 * everything here is guarded by swap_lock (see lms.c), and every function
 * declared here assumes the caller holds it.
 */
#ifndef LMS_SWAP_INTERNAL_H
#define LMS_SWAP_INTERNAL_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

#include "alloc/alloc.h"
#include "base/base.h"
#include "policy/policy.h"
#include "swap/hostpool.h"
#include "swap/swap.h"

#include "swap/blocks.h"
#include "swap/chunks.h"
#include "swap/config.h"
#include "swap/events.h"
#include "swap/pins.h"
#include "swap/ranking.h"
#include "swap/streams.h"
#include "swap/transfers.h"
#include "swap/util.h"

/* prefetch.c's: what it fetches next, and when its last look found nothing. */
typedef struct prefetcher {
    policy_fetch_t *ahead;        /* scratch: what to prefetch */
    uint32_t *fetch_list;         /* scratch: the same, sorted */
    uint64_t walk_host_entries;   /* host_entries when it last looked ahead, */
    size_t walk_pos;              /* from where, */
    bool walk_found_none;         /* and found nothing to fetch, */
    size_t walk_spare, walk_queued; /* with these blocks free and chunks on the link */
    size_t blocks_ahead;          /* what the events ahead need (reclaim_low) */
    bool vmm_deferred;            /* a prefetch's map and set_access wait for the D2H
                                     link to go idle (Note [VMM beside copies] in prefetch.c) */
    size_t remaps;                /* EVICTING chunks whose unmap and host map wait likewise, on
                                     their blocks (chunk_t.remap, Note [Remap beside copies]
                                     in residency.c), */
    size_t remap_lo, remap_hi;    /* among these (lo SIZE_MAX: none since the last flush) */
    bool access_waits;            /* a flush runs because an access waits for blocks */
    uint64_t remaps_beside;       /* host maps' set_access made beside a D2H copy that
                                     nothing waited for (swap_probe) */
    uint64_t remaps_deferred;     /* evictions left waiting on their blocks (swap_probe) */
} prefetcher_t;

/* reclaim.c's: the reclaim thread and its watermarks. */
typedef struct reclaimer {
    pthread_t thread;
    pthread_cond_t wake;
    bool wake_made;               /* wake is initialized (resid_destroy) */
    bool started, stop;
    size_t low, high;             /* watermarks, in blocks */
} reclaimer_t;

/* window.c's: the open access windows of all threads. */
typedef struct holds {
    size_t total;                 /* chunks held, of all windows */
    size_t waiters;               /* threads waiting for holds to end */
    pthread_cond_t unheld;
    bool unheld_made;             /* unheld is initialized (resid_destroy) */
    uint32_t accesses;            /* resid_back calls: each one's id */
} holds_t;

/* lms's state: the composition of swap/'s parts, each its module's. */
typedef struct state {
    swap_config_t cfg;
    swap_resolved_t resolved; /* cfg with every default and clamp resolved (config.c) */
    uint64_t generation; /* of this initialization */
    dev_device_t *dev;
    dev_addr_t base;
    size_t va_size, chunk, nchunks;
    size_t budget;     /* device blocks */
    size_t host_limit; /* bytes */
    size_t capacity;   /* chunks allocations may occupy: budget + host chunks */
    alloc_t *alloc;

    /* residency */
    chunks_t chunks;
    blocks_t blocks;
    events_t events;
    transfers_t xfers;
    ranking_t rank;               /* with a policy only */
    prefetcher_t pf;
    reclaimer_t rc;
    holds_t holds;
    hostpool_t *host;
    policy_t *policy;             /* what to evict and fetch ahead (NULL with LMS_SWAP=0) */
    size_t piece; /* chunks remapped and copied as one step (Note [Pipelined swaps] in window.c) */
    size_t resident, host_chunks, pinned, evicting; /* chunks */
    uint64_t host_entries;        /* times a chunk went to the host */
    lms_stats_t stats;

    bool warned_bad_free; /* lms_free has said once that a free was bad (lms.c) */

    /* streams and frees, pins */
    streams_t streams;
    pins_t pins;
} state_t;

HIDDEN extern state_t *S;
HIDDEN extern pthread_mutex_t swap_lock;
HIDDEN extern bool swap_unseen_expected; /* atomic; config.c's (lms_expect_unseen_access) */

/* lms.c */
/* streams_sync_released of S's streams (Note [Stream-ordered free] in
 * streams.c). */
HIDDEN lms_status_t swap_sync_released(void);
/* The cached allocation at offset (live: its flag), freed on stream handle (a pending free of
 * it, or released at once when it is the only stream or gone); fails, with
 * the allocation still cached, only when the host has no memory. Without
 * may_fence it starts no device work: a fence the stream's frees call for
 * waits for a later locked call (a thread-exit destructor: Note [Thread
 * caches] in tcache.c). */
HIDDEN lms_status_t swap_free_cached(lms_stream_t handle, size_t offset, alloc_flag_t *live,
                                     bool may_fence);
/* The launch hooks' counts (lms_note_launch) into *out, lms_stats's fields;
 * and their zeroing, at each start. These take no lock. */
HIDDEN void swap_launch_stats(lms_stats_t *out);
HIDDEN void swap_launch_reset(void);

/* init.c: lms's start and end. */
/* Starts lms with cfg (from the LMS_* options if from_options, else the
 * program's: Note [Resolved configuration] in config.c); S is NULL before,
 * and after a failure. */
HIDDEN lms_status_t swap_init_locked(const swap_config_t *cfg, bool from_options);
/* swap_init_locked with the options' configuration, lms_set_device_fraction's
 * fraction (0: none) and, if no_swapping (lms_forbid_swapping), no swapping. */
HIDDEN lms_status_t swap_init_from_options(double device_fraction, bool no_swapping);
/* Ends lms, if it is running: S is NULL after. */
HIDDEN void swap_destroy_locked(void);
/* LMS_STATS=1: prints lms_stats on stderr (at exit, and at lms_shutdown). */
HIDDEN void swap_print_stats_locked(void);

/* tcache.c: Note [Thread caches]. These assume the lock; the lock-free
 * calls are inline in swap/tcache.h. */
HIDDEN extern uint64_t swap_epoch; /* atomic */
HIDDEN void tc_key(lms_stream_t stream);    /* the calling thread's cache, for stream */
HIDDEN bool tc_free_locked(void *ptr, lms_stream_t stream); /* tc_free, keying and making room */
HIDDEN void tc_flush(void);                 /* the calling thread's cache */
HIDDEN void tc_ran_dry(size_t size);        /* a malloc found size's bin empty */
HIDDEN void tc_invalidate(void);            /* every cache: lms shut down or a stream gone */

/* residency.c */
HIDDEN lms_status_t resid_init(void);
HIDDEN void resid_start(void);          /* the reclaim thread; lock held */
HIDDEN void resid_stop(void);           /* joins it; lock held, dropped meanwhile */
HIDDEN void resid_destroy(void);        /* after the device is drained */
HIDDEN void resid_placed(alloc_chunks_t used);
HIDDEN void resid_freed(alloc_chunks_t freed);
HIDDEN void resid_dead(alloc_chunks_t dead); /* freed, not yet released */
/* An allocation of whole chunks freed: for policy/. */
HIDDEN void resid_free_event(alloc_chunks_t gone);
HIDDEN lms_status_t resid_mark_iteration(void);
HIDDEN void resid_close_window(void);   /* the calling thread's */
HIDDEN lms_status_t resid_access(const char *op, const lms_range_t *r, size_t n, stream_t *s,
                                 int slot, int pin);
/* resid_access without the checks: ranges of whole chunks of allocated memory */
HIDDEN lms_status_t resid_back(const char *op, const lms_range_t *r, size_t n, stream_t *s,
                               int slot, int pin);
HIDDEN void resid_unpin(size_t offset, size_t bytes, uint32_t times);
HIDDEN void resid_stats(lms_stats_t *out);
HIDDEN lms_status_t resid_empty_cache(void); /* lms_empty_cache; lock held */
HIDDEN bool resid_window_open(void);
/* The calling thread's count of chunks in its window (resid_window_open is
 * *count > 0), for its thread cache to read without a call. */
HIDDEN const size_t *resid_window_count(void);

static inline dev_addr_t chunk_addr(size_t c) { return S->base + (dev_addr_t)c * S->chunk; }

#endif /* LMS_SWAP_INTERNAL_H */
