/*
 * swap/blocks.h — the pool of physical device blocks: blocks created and
 * mapped nowhere, and how many more the device limit allows. Blocks are
 * created once (cuMemCreate on the swap path costs as much as a copy) and
 * reused; lms_empty_cache gives the pool's back to the driver. Guarded by
 * swap_lock.
 */
#ifndef LMS_SWAP_BLOCKS_H
#define LMS_SWAP_BLOCKS_H

#include "device/device.h"

#ifndef HIDDEN
#define HIDDEN __attribute__((visibility("hidden")))
#endif

typedef struct blocks {
    dev_device_t *dev;
    dev_block_t *pool; /* created and mapped nowhere */
    size_t npool;
    size_t created;    /* blocks that exist (in the pool or mapped) */
    size_t budget;     /* blocks the device limit allows */
} blocks_t;

HIDDEN lms_status_t blocks_init(blocks_t *b, dev_device_t *dev, size_t budget);
HIDDEN void blocks_destroy(blocks_t *b); /* the blocks go with the device */

/* Creates every block the budget allows, into the pool (LMS_PREALLOCATE). */
HIDDEN lms_status_t blocks_preallocate(blocks_t *b);

/* Blocks that can be had without unmapping anything. */
static inline size_t blocks_unmapped(const blocks_t *b)
{
    return b->npool + (b->budget - b->created);
}

/* A block from the pool, or newly created within the budget; the caller
 * made sure one of those exists (blocks_unmapped). */
HIDDEN lms_status_t blocks_take(blocks_t *b, dev_block_t *out);

/* Puts an unmapped block back. */
static inline void blocks_put(blocks_t *b, dev_block_t block) { b->pool[b->npool++] = block; }

/* Releases the pool's blocks to the driver (lms_empty_cache); blocks_take
 * creates them again within the budget. Stops at the first failure. */
HIDDEN lms_status_t blocks_release_pool(blocks_t *b);

#endif /* LMS_SWAP_BLOCKS_H */
