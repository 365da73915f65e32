/*
 * swap/ — residency, and the implementation of include/lms.h: it places with
 * alloc/, owns the pool of physical blocks and every map and unmap, and keeps
 * frees stream-ordered. See Note [Stream-ordered free] in lms.c.
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
    bool policy_lru;        /* LMS_POLICY=lru: evict the least recently used, never
                               follow a schedule, never prefetch */
    const char *trace_path; /* LMS_TRACE: the file of the timeline (docs/timeline-format.md),
                               truncated at init; NULL or "": none */
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

#endif /* LMS_SWAP_H */
