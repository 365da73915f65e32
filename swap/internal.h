/*
 * swap/internal.h — the state lms.c and residency.c share. Not an interface:
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

#define HIDDEN __attribute__((visibility("hidden")))
#define MAX_STREAMS 0xffffu
#define NO_CHUNK UINT32_MAX

/* ---- streams and stream-ordered frees (lms.c) ---------------------------- */

/* A range lms_pin pinned, count times so far (Note [Pin records] in lms.c). */
typedef struct pin_record {
    size_t offset, bytes;
    uint32_t count;
} pin_record_t;

typedef struct pending {
    size_t offset; /* of the freed allocation */
    size_t size;   /* its usable size */
    uint64_t epoch;
} pending_t;

/* A ring of pending entries, oldest at the bottom: the stream reuses from the
 * top, fences release from the bottom. */
typedef struct deque {
    pending_t *items;
    size_t head, len, cap; /* cap is 0 or a power of two */
} deque_t;

typedef struct fence {
    dev_event_t *event;
    uint64_t epoch; /* entries of this epoch and before are covered */
} fence_t;

#define USE_RING 16 /* events a stream keeps after its recent access windows */

typedef struct stream {
    dev_stream_t *dev;
    uint64_t native;        /* adopted: the program's CUDA stream; 0: lms's own */
    bool all;               /* the all-streams stream: see Note [Free after all streams] */
    dev_event_t *use_event; /* recorded when an eviction must wait for its work */
    dev_event_t *after[USE_RING]; /* after[w % USE_RING]: recorded after the work of
                                     its w-th fenced access window (made at first
                                     use; Note [Eviction fences] in residency.c) */
    uint32_t windows;       /* access windows fenced on it so far */
    deque_t small[ALLOC_MAX_CLASSES];
    deque_t large;
    uint64_t epoch;        /* of frees not yet fenced */
    size_t unfenced_bytes; /* freed in the current epoch */
    fence_t *fences;       /* oldest first */
    size_t nfences, capfences;
} stream_t;

/* ---- residency (residency.c) ------------------------------------------- */

/* Chunk states: see DESIGN.md, swap/, and Note [Chunk states] in residency.c. */
enum { UNBACKED, RESIDENT, EVICTING, HOST, FETCHING };

/* A copy in flight (or, for a clean drop, the point after which the chunks'
 * last work has finished): its event, and the chunks whose `xfer` names it. */
typedef struct xfer {
    dev_event_t *event;
    struct xfer *next; /* in its direction's list, oldest first */
    size_t first, n;   /* the chunks it covers: [first, first + n) */
    size_t copied;     /* how many of them it copies (a fetch's may be scattered) */
    bool d2h;
    bool fenced;       /* its event is recorded after the copy (Note [Unfenced copies]) */
    bool done;         /* known to have finished without its event: a synchronize */
} xfer_t;

typedef struct chunk {
    dev_block_t block;  /* 0: none */
    xfer_t *xfer;       /* a copy still using its device memory or host copy */
    char *host;         /* its host copy (a chunk's extent of the host pool), or NULL */
    uint32_t lru_prev, lru_next;
    uint32_t holds;     /* open access windows that name it */
    uint32_t pins;
    uint32_t stamp;     /* the last access that looked at it */
    uint32_t early;     /* the access whose early step mapped it, until one
                           that names it succeeds (Note [Pipelined swaps]) */
    uint64_t streams;   /* stream slots that used it (bit 63: slots >= 63) */
    uint32_t last_window; /* its last use was in this fenced window of stream slot
                             last_slot (generation last_gen); 0: not known
                             (Note [Eviction fences]) */
    uint32_t last_gen;
    uint16_t last_slot;
    uint8_t state;
    uint8_t acc;        /* the current access's needs (residency.c) */
    bool clean;         /* RESIDENT, and the host copy is current */
    bool drop_host;     /* drop the host copy once xfer is done */
    bool free;          /* free in alloc/ */
    bool on_lru;
    bool prefetched;    /* fetched ahead of use, not yet used (stats.prefetch_hits) */
    bool broken;        /* RESIDENT, but neither accessible nor holding its
                           data (residency.c: unmap_unused): repaired before
                           any use, never evicted */
} chunk_t;

typedef struct state {
    swap_config_t cfg;
    uint64_t generation; /* of this initialization */
    dev_device_t *dev;
    dev_addr_t base;
    size_t va_size, chunk, nchunks;
    size_t budget;     /* device blocks */
    size_t host_limit; /* bytes */
    size_t capacity;   /* chunks allocations may occupy: budget + host chunks */
    alloc_t *alloc;

    /* residency */
    chunk_t *ch;
    uint32_t *cached;     /* free chunks that are still mapped */
    uint32_t *cached_pos; /* per chunk: its index in cached[] + 1, 0 = not cached */
    size_t ncached;
    dev_block_t *pool;    /* blocks created and mapped nowhere */
    size_t npool, created;
    uint32_t lru_head, lru_tail; /* allocated chunks with a block, least recent first */
    dev_stream_t *h2d, *d2h;     /* the copy streams */
    xfer_t *xfers[2], *xfers_tail[2]; /* in flight: [0] h2d, [1] d2h */
    size_t evicting;              /* chunks EVICTING */
    size_t h2d_queued;            /* chunks in the H2D copies in flight */
    hostpool_t *host;
    uint32_t stamp;
    uint32_t accesses;            /* resid_back calls: each one's id */
    size_t holds_total;           /* of all chunks */
    size_t hold_waiters;          /* threads waiting for holds to end */
    pthread_cond_t unheld;
    bool wake_made, unheld_made;  /* wake and unheld are initialized (resid_destroy) */
    size_t low, high;             /* reclaim watermarks, in blocks */
    size_t piece;                 /* chunks remapped and copied as one step (Note [Pipelined swaps]) */
    policy_t *policy;             /* what to evict and fetch ahead (NULL with LMS_SWAP=0) */
    struct ranked *ranked;        /* victims ranked, best first: full or head (residency.c,
                                     Note [Ranking between events]) */
    struct ranked *full, *head;   /* scratch: the last full ranking; its head re-keyed */
    policy_fetch_t *ahead;        /* scratch: what to prefetch */
    uint32_t *fetch_list;         /* scratch: the same, sorted */
    size_t ranked_n;              /* in ranked, while ranked_for == policy_version */
    uint64_t ranked_for;
    size_t full_n;                /* in full; 0: rank in full next */
    uint64_t full_basis;          /* policy_basis when it was made */
    uint32_t *touched, *touched_sorted; /* chunks reported to policy/ since (scratch) */
    size_t ntouched;              /* > TOUCHED_MAX: too many to repair the ranking */
    uint64_t rankings_full, rankings_head; /* made so far (the head's: for tests) */
    uint64_t host_entries;        /* times a chunk went to the host */
    uint64_t walk_host_entries;   /* ... when prefetch last looked ahead, */
    size_t walk_pos;              /* from where, */
    bool walk_found_none;         /* and found nothing to fetch, */
    size_t walk_spare, walk_queued; /* with these blocks free and chunks on the link */
    size_t blocks_ahead;          /* what the events ahead need (reclaim_low) */
    uint64_t h2d_seen_ns;         /* the H2D link's rate, learnt (Note [Prefetch]) */
    uint64_t h2d_busy_ns, h2d_busy_bytes;
    bool h2d_was_busy;
    pthread_t reclaimer;
    pthread_cond_t wake;
    bool reclaimer_started, stop;
    lms_stats_t stats;
    size_t resident, host_chunks, pinned; /* chunks */

    /* streams and frees */
    stream_t *streams[MAX_STREAMS]; /* [0]: the default stream; NULL: free slot */
    uint32_t generation_of[MAX_STREAMS]; /* of the handle of each slot */
    size_t nstreams;      /* slots in use or used before */
    size_t live_streams;  /* streams that exist, the default one included (not the
                             all-streams one, which runs no work) */
    size_t all_slot;      /* the all-streams stream's slot; 0: not made yet */
    dev_event_t **events; /* unused events */
    size_t nevents, capevents;
    size_t waiters;           /* threads waiting, lock dropped, on events */
    dev_event_t **retired;    /* collected while waiters > 0: not reused until 0 */
    size_t nretired, capretired;
    uint64_t released_at_once; /* frees released at once (one-stream rule), ever */
    uint64_t released_synced;  /* of those, how many the default stream has finished */
    size_t flush_bytes;   /* unfenced bytes of a stream that trigger a fence */
    bool warned_bad_free;
    pin_record_t *pinrecs; /* lms_pin's ranges, sorted (Note [Pin records] in lms.c) */
    size_t npinrecs, cappinrecs;
} state_t;

HIDDEN extern state_t *S;
HIDDEN extern pthread_mutex_t swap_lock;

/* lms.c */
HIDDEN bool swap_grow(void **array, size_t *cap, size_t need, size_t elem);
/* Whether the live allocation at offset holds a pinned range (Note [Pin
 * records] in lms.c). Lock held. */
HIDDEN bool swap_pinned_at(size_t offset);
HIDDEN lms_status_t swap_event(dev_event_t **out);
HIDDEN void swap_recycle_event(dev_event_t *e);
HIDDEN void swap_wait_unlocked(dev_event_t *e);
HIDDEN lms_status_t swap_sync_released(void);
HIDDEN char *swap_fmt(uint64_t bytes, char *buf);
/* The cached allocation at offset (live: its flag), freed on stream handle (a pending free of
 * it, or released at once when it is the only stream or gone); fails, with
 * the allocation still cached, only when the host has no memory. Without
 * may_fence it starts no device work: a fence the stream's frees call for
 * waits for a later locked call (a thread-exit destructor: Note [Thread
 * caches] in tcache.c). */
HIDDEN lms_status_t swap_free_cached(lms_stream_t handle, size_t offset, alloc_flag_t *live,
                                     bool may_fence);

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
HIDDEN void resid_free_event(alloc_chunks_t gone); /* an allocation of whole chunks freed: for policy/ */
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
/* The CLOCK_MONOTONIC time ns from now: the deadline of a timed wait on
 * residency's condition variables, which wait on that clock. */
HIDDEN struct timespec swap_deadline(uint64_t ns);
HIDDEN bool resid_window_open(void);
/* The calling thread's count of chunks in its window (resid_window_open is
 * *count > 0), for its thread cache to read without a call. */
HIDDEN const size_t *resid_window_count(void);

static inline dev_addr_t chunk_addr(size_t c) { return S->base + (dev_addr_t)c * S->chunk; }

#endif /* LMS_SWAP_INTERNAL_H */
