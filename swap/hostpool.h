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
 * A pool of the second kind (hostpool_config_t.blocks) holds one-chunk
 * slots instead of extents: each slot is a host block of the device
 * (device/device.h), mapped at its place in a device VA window and opened to
 * the device and the CPU, so that its address is a host pointer as an
 * extent's is, and hostpool_block names the block, to map it at another VA
 * as well (issue 27: an evicted chunk's VA on its host copy). It grows a
 * piece of blocks at a time, under the same limit, with the same accounting
 * and messages. See Note [Pools of host blocks] in hostpool.c.
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
    int numa_node;     /* node to bind the memory to; -1: no binding. Not for blocks:
                          the device places its host blocks */
    bool blocks;       /* slots of host blocks instead of extents: the device must have
                          them (dev_info_t.host_blocks, else LMS_ERR_UNSUPPORTED) */
    size_t chunk;      /* blocks: a slot's bytes, the device's granularity (a slot is one
                          host block); 0: the granularity. The limit rounds down to it,
                          and the piece must be a multiple of it */
} hostpool_config_t;

lms_status_t hostpool_create(const hostpool_config_t *cfg, hostpool_t **out);

/* Unregisters and unmaps everything (blocks: unmaps and releases every block
 * and frees the window); extents or slots still allocated are gone too. NULL
 * is a no-op. */
void hostpool_destroy(hostpool_t *hp);

/* An extent of `bytes` (> 0, a multiple of the page size), page-aligned, in
 * registered memory. When the registered pieces have no room: grows by whole
 * pieces if `may_grow`, else fails. LMS_ERR_OUT_OF_MEMORY (with a message
 * naming LMS_HOST_LIMIT) when the limit is reached or the extents are too
 * fragmented for it; nothing changes then.
 * Blocks: `bytes` must be the chunk (else LMS_ERR_INVALID); the slot is the
 * lowest free one, chunk-aligned in the window; growing makes a piece of
 * blocks. */
lms_status_t hostpool_alloc(hostpool_t *hp, size_t bytes, bool may_grow, void **out);

/* Gives an extent or a slot back (p as returned by hostpool_alloc). p NULL
 * is a no-op; LMS_ERR_INVALID, nothing changed, for a p the pool did not
 * hand out (an extent's: outside its registrations; a slot's: not a slot
 * handed out, a second free included). */
lms_status_t hostpool_free(hostpool_t *hp, void *p);

/* The block behind slot p (as returned by hostpool_alloc, not freed since):
 * map it at another VA (dev_map, then dev_set_access_host) and that VA shows
 * the slot's bytes. LMS_ERR_INVALID for a pool of extents, or a p that is
 * not a slot handed out. */
lms_status_t hostpool_block(const hostpool_t *hp, const void *p, dev_block_t *out);

/* The bytes an extent of `bytes` occupies (jemalloc rounds to its size
 * classes); equal to bytes when the request is a size class. Blocks: the
 * chunk for the chunk, 0 for any other size (not allocatable). */
size_t hostpool_usable(const hostpool_t *hp, size_t bytes);

/* Grows, off the swap path, until at least `bytes` more can be allocated
 * without growing (or the limit is reached: then LMS_ERR_OUT_OF_MEMORY, with
 * whatever growth was possible kept). */
lms_status_t hostpool_reserve(hostpool_t *hp, size_t bytes);

typedef struct hostpool_usage {
    size_t allocated;  /* bytes in extents handed out (usable sizes); blocks: slots in
                          use x chunk */
    size_t registered; /* bytes committed, bound and registered; blocks: blocks made x
                          chunk */
    size_t limit;
    int numa_node;     /* as bound; -1 none (blocks: always, the device places them) */
} hostpool_usage_t;
void hostpool_usage(const hostpool_t *hp, hostpool_usage_t *out);

#endif /* LMS_SWAP_HOSTPOOL_H */
