/*
 * swap/hostpool.h — the host pool: pinned host memory on the GPU's NUMA node,
 * where evicted chunks live.
 *
 * The pool reserves address space for its whole limit once, and commits,
 * binds (libnuma) and registers it with the device (dev_host_register) in
 * large pieces as it grows. A private jemalloc arena, whose extent hooks hand
 * out and split and merge pieces of that registered memory only, carves it
 * into the extents lms asks for. Pinned pages are never purged or returned to
 * the system while the pool lives; hostpool_destroy unregisters and unmaps
 * everything.
 *
 * Growing (commit + register) is slow and may synchronize the device, so it
 * is kept off the swap path: hostpool_alloc grows only if told to, and the
 * reclaim thread calls hostpool_reserve ahead of need.
 *
 * Not thread-safe: the caller (swap/) serializes every call.
 */
#ifndef LMS_SWAP_HOSTPOOL_H
#define LMS_SWAP_HOSTPOOL_H

#include <stdbool.h>
#include <stddef.h>

#include "device/device.h"

typedef struct hostpool hostpool_t;

typedef struct hostpool_config {
    dev_device_t *dev; /* registers pieces with it; must outlive the pool */
    size_t limit;      /* bytes of pinned memory at most (rounded down to piece) */
    size_t piece;      /* bytes registered at a time: a multiple of the page size;
                          0: 256 MiB, or the limit if smaller */
    int numa_node;     /* node to bind the memory to; -1: no binding */
} hostpool_config_t;

lms_status_t hostpool_create(const hostpool_config_t *cfg, hostpool_t **out);

/* Unregisters and unmaps everything; extents still allocated are gone too.
 * NULL is a no-op. */
void hostpool_destroy(hostpool_t *hp);

/* An extent of `bytes` (> 0, a multiple of the page size), page-aligned, in
 * registered memory. When the registered pieces have no room: grows by whole
 * pieces if `may_grow`, else fails. LMS_ERR_OUT_OF_MEMORY (with a message
 * naming LMS_HOST_LIMIT) when the limit is reached or the extents are too
 * fragmented for it; nothing changes then. */
lms_status_t hostpool_alloc(hostpool_t *hp, size_t bytes, bool may_grow, void **out);

/* Gives an extent back (p as returned by hostpool_alloc). NULL is a no-op. */
void hostpool_free(hostpool_t *hp, void *p);

/* The bytes an extent of `bytes` occupies (jemalloc rounds to its size
 * classes); equal to bytes when the request is a size class. */
size_t hostpool_usable(const hostpool_t *hp, size_t bytes);

/* Grows, off the swap path, until at least `bytes` more can be allocated
 * without growing (or the limit is reached: then LMS_ERR_OUT_OF_MEMORY, with
 * whatever growth was possible kept). */
lms_status_t hostpool_reserve(hostpool_t *hp, size_t bytes);

typedef struct hostpool_usage {
    size_t allocated;  /* bytes in extents handed out (usable sizes) */
    size_t registered; /* bytes committed, bound and registered */
    size_t limit;
    int numa_node;     /* as bound; -1 none */
} hostpool_usage_t;
void hostpool_usage(const hostpool_t *hp, hostpool_usage_t *out);

#endif /* LMS_SWAP_HOSTPOOL_H */
