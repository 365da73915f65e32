/*
 * swap/ — residency, and the implementation of include/lms.h: it places with
 * alloc/, owns the pool of physical blocks and every map and unmap, and keeps
 * frees stream-ordered. See Note [Stream-ordered free] in streams.c.
 *
 * Today every chunk that holds an allocation is backed by a device block
 * (swapping to host memory is the next step); a chunk that becomes free keeps
 * its block, mapped, until another allocation needs the block elsewhere, so
 * reusing freed memory costs no map.
 *
 * This header is for tests, tools and benchmarks that need more than lms.h:
 * an explicit configuration instead of the LMS_* environment, and the device
 * objects behind lms's handles (to run test kernels on an lms stream).
 */
#ifndef LMS_SWAP_H
#define LMS_SWAP_H

#include "device/device.h"
#include "lms.h"
#include "policy/policy.h"

typedef struct swap_config {
    dev_config_t device;
    size_t device_limit;    /* bytes; 0: free memory less an eighth, at most 512 MiB */
    double device_fraction; /* (0, 1]: the limit is this share of the device's memory,
                               in place of device_limit (lms_set_device_fraction); 0: none */
    size_t host_limit;      /* bytes; 0: half the memory of the GPU's NUMA node */
    size_t va_reserve;      /* bytes; 0: 4 x (device limit + host limit) */
    size_t large_threshold; /* bytes; 0: 8 chunks (alloc.h) */
    bool preallocate;       /* create every block of the device limit at init */
    bool swap;              /* false: the device limit is hard, memory is backed at
                               lms_malloc and never swapped (no host pool) */
    size_t reclaim_low;     /* bytes; 0: device limit / 32 (at least one chunk) */
    size_t reclaim_high;    /* bytes; 0: device limit / 16 (at least low + one chunk) */
    size_t thread_cache;    /* bytes of small frees a thread keeps for its own
                               reuse (Note [Thread caches]); 0: no caches */
    size_t swap_piece;      /* bytes remapped and copied as one step of a swap
                               (Note [Pipelined swaps] in window.c); 0: 16 MiB */
    bool stats_at_exit;     /* LMS_STATS=1 */
    bool evict_ahead;       /* LMS_EVICT_AHEAD (Note [Eviction ahead] in policy/policy.c) */
    const char *evicted;    /* LMS_EVICTED: "auto", "unmapped" or "host", any case (Note
                               [Evicted mode] in config.c); NULL or "": auto */
    bool policy_lru;        /* LMS_POLICY=lru: evict the least recently used, never
                               follow a schedule, never prefetch */
    const char *trace_path; /* LMS_TRACE: the file of the timeline (docs/timeline-format.md),
                               truncated at init; NULL or "": none */
    bool measure_links;     /* keep the copies' busy time each way (swap_link_busy), from
                               the device's observer, also with no timeline */
    bool vmm_unordered;     /* prefetches map and set access beside D2H copies, and
                               evictions ahead start beside that work: only to measure
                               what Note [VMM beside copies] (swap/prefetch.c) gains */
} swap_config_t;

/* Fills cfg from the LMS_* options. */
void swap_config_from_options(swap_config_t *cfg);

/* lms_init with an explicit configuration; LMS_ERR_INVALID if lms is
 * initialized already. */
lms_status_t swap_init(const swap_config_t *cfg);

/* The device lms runs on, and the device stream behind an lms stream (NULL:
 * the default stream); NULL when lms is not initialized or s is not a stream. */
dev_device_t *swap_device(void);
dev_stream_t *swap_stream(lms_stream_t s);

/* The reserved range, and the limits in force. */
typedef struct swap_layout {
    dev_addr_t base;
    size_t size;
    size_t chunk_size;
    size_t device_limit;
} swap_layout_t;
lms_status_t swap_layout(swap_layout_t *out);

/* ---- looking inside, for tests and tools (swap/probe.c) -------------------
 * Copies taken under lms's lock: what the tests of swap/ check beyond
 * lms.h, so that no test reads swap/'s own structs. */

/* Where a chunk is (Note [Chunk states] in swap/residency.c). */
typedef enum swap_chunk_state {
    SWAP_CHUNK_UNBACKED,
    SWAP_CHUNK_RESIDENT,
    SWAP_CHUNK_EVICTING,
    SWAP_CHUNK_HOST,
    SWAP_CHUNK_FETCHING,
} swap_chunk_state_t;

typedef struct swap_probe {
    size_t h2d_queued;        /* chunks in the H2D copies in flight */
    uint64_t rankings_full;   /* victim rankings made in full so far (swap/ranking.c) */
    uint64_t rankings_head;   /* ... and repaired from a full one's head */
    bool has_policy;          /* false with LMS_SWAP=0: policy is all zero */
    policy_usage_t policy;    /* policy/'s view: iterations found, schedule followed */
    uint64_t remaps_beside;   /* host mode: evicted chunks' host maps opened while lms saw
                                 a D2H copy in flight and no access waited for them */
    uint64_t remaps_deferred; /* ... evictions left on their device blocks until the copies
                                 out end (Note [Remap beside copies] in swap/residency.c), */
    size_t remaps_waiting;    /* ... of which wait now, */
    size_t host_unmapped;     /* ... and chunks with data (not UNBACKED) whose addresses map
                                 nothing now (0 unless a map failed, with a warning) */
} swap_probe_t;

/* LMS_ERR_INVALID when lms is not initialized. */
lms_status_t swap_probe(swap_probe_t *out);

/* The state of the chunk that holds address ptr of the reserved range;
 * LMS_ERR_INVALID outside it or when lms is not initialized. */
lms_status_t swap_chunk_state(const void *ptr, swap_chunk_state_t *out);

/* The time lms's copies kept each direction of the link busy, and both at
 * once, since init, as the device measured the copies (Note [Both
 * directions busy] in swap/trace.c). */
typedef struct swap_link_busy {
    uint64_t h2d_ns, d2h_ns; /* a copy ran that way */
    uint64_t both_ns;        /* copies ran both ways at once */
} swap_link_busy_t;

/* LMS_ERR_INVALID when lms is not initialized, or measures neither a
 * timeline (LMS_TRACE) nor the links (swap_config_t.measure_links). */
lms_status_t swap_link_busy(swap_link_busy_t *out);

/* lms's copy stream toward the device (h2d) or the host; NULL when lms is
 * not initialized. A test queues a host function on it to hold copies back. */
dev_stream_t *swap_copy_stream(bool h2d);

/* The unfenced bytes of frees that make a stream record a fence (default:
 * the device limit / 16, at most 64 MiB); LMS_ERR_INVALID when lms is not
 * initialized or bytes is 0. */
lms_status_t swap_set_flush_bytes(size_t bytes);

/* Waits until the work queued on the default stream before the frees
 * released at once so far has finished, so that their memory may go to
 * another use without a wait for it later (Note [Stream-ordered free]). */
lms_status_t swap_settle_released(void);

/* Takes and releases lms's lock, so that a test can show that a call on
 * another thread takes none (it returns while the lock is held). */
void swap_lock_hold(void);
void swap_lock_release(void);

#endif /* LMS_SWAP_H */
