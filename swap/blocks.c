/*
 * swap/blocks.c — the pool of physical device blocks (blocks.h).
 */
#include "swap/blocks.h"

#include "base/base.h"

lms_status_t blocks_init(blocks_t *b, dev_device_t *dev, size_t budget)
{
    *b = (blocks_t){.dev = dev, .budget = budget};
    if (budget > 0 && (b->pool = base_meta_calloc(budget, sizeof *b->pool)) == NULL)
        return base_fail(LMS_ERR_OUT_OF_MEMORY, "lms_init: no host memory for %zu blocks", budget);
    return LMS_OK;
}

void blocks_destroy(blocks_t *b)
{
    base_meta_free(b->pool);
    b->pool = NULL;
    b->npool = 0;
}

lms_status_t blocks_preallocate(blocks_t *b)
{
    for (; b->created < b->budget; b->created++, b->npool++) {
        lms_status_t st = dev_block_create(b->dev, &b->pool[b->npool]);
        if (st != LMS_OK)
            return st;
    }
    return LMS_OK;
}

lms_status_t blocks_take(blocks_t *b, dev_block_t *out)
{
    if (b->npool > 0) {
        *out = b->pool[--b->npool];
        return LMS_OK;
    }
    lms_status_t st = dev_block_create(b->dev, out);
    if (st == LMS_OK)
        b->created++;
    return st;
}

lms_status_t blocks_release_pool(blocks_t *b)
{
    lms_status_t st = LMS_OK;
    while (st == LMS_OK && b->npool > 0)
        if ((st = dev_block_release(b->dev, b->pool[b->npool - 1])) == LMS_OK) {
            b->npool--;
            b->created--;
        }
    return st;
}
