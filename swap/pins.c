/*
 * swap/pins.c — the pin records (pins.h).
 *
 * Note [Pin records]
 * An unpin must match a pin, as a free matches an allocation: lms.h says a
 * range stays pinned "until as many lms_unpin calls of the same range". The
 * chunks count pins, but a chunk cannot tell which range pinned it: checking
 * only that every chunk of an unpin's range was pinned let lms_unpin(p + 2
 * MiB, 16) release half of lms_pin(p, 4 MiB), after which the matching
 * unpin failed and the other half stayed pinned forever (issue 24). So each
 * pinned range is recorded, (offset, bytes) with a count, in pins_t's rec,
 * sorted; lms_unpin needs a record of exactly its range. An allocation
 * whose memory is released (or taken again by its stream) while pinned
 * loses its records and their chunk pins then: the free of pinned memory
 * unpins it, once the work queued before the free is done. The thread
 * caches, which reuse a freed slot without the lock, must never hold one:
 * while any range is pinned (tc_pin_records) frees take the locked path,
 * and there a pinned allocation's free is queued, not cached
 * (tc_free_locked, pins_at).
 */
#include "swap/pins.h"

#include <string.h>

#include "base/base.h"
#include "swap/util.h"

/* The index of the first record at or after (offset, bytes). */
static size_t pin_index(const pins_t *p, size_t offset, size_t bytes)
{
    size_t lo = 0, hi = p->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const pin_record_t *r = &p->rec[mid];
        if (r->offset < offset || (r->offset == offset && r->bytes < bytes))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Whether record i is exactly (offset, bytes). */
static bool pin_is(const pins_t *p, size_t i, size_t offset, size_t bytes)
{
    return i < p->n && p->rec[i].offset == offset && p->rec[i].bytes == bytes;
}

static void publish(pins_t *p) { __atomic_store_n(p->published, p->n, __ATOMIC_RELAXED); }

/* Removes records [i, j), keeping the published count in step. */
static void drop_pin_records(pins_t *p, size_t i, size_t j)
{
    memmove(&p->rec[i], &p->rec[j], (p->n - j) * sizeof *p->rec);
    p->n -= j - i;
    publish(p);
}

void pins_destroy(pins_t *p)
{
    base_meta_free(p->rec);
    p->rec = NULL;
    p->n = p->cap = 0;
    publish(p);
}

bool pins_reserve(pins_t *p)
{
    return swap_grow((void **)&p->rec, &p->cap, p->n + 1, sizeof *p->rec);
}

void pins_add(pins_t *p, size_t offset, size_t bytes)
{
    size_t i = pin_index(p, offset, bytes);
    if (pin_is(p, i, offset, bytes)) {
        p->rec[i].count++;
        return;
    }
    memmove(&p->rec[i + 1], &p->rec[i], (p->n - i) * sizeof *p->rec);
    p->rec[i] = (pin_record_t){offset, bytes, 1};
    p->n++;
    publish(p);
}

bool pins_remove(pins_t *p, size_t offset, size_t bytes)
{
    size_t i = pin_index(p, offset, bytes);
    if (!pin_is(p, i, offset, bytes))
        return false;
    p->unpin(offset, bytes, 1);
    if (--p->rec[i].count == 0)
        drop_pin_records(p, i, i + 1);
    return true;
}

void pins_released(pins_t *p, size_t offset, size_t size)
{
    if (p->n == 0)
        return;
    size_t i = pin_index(p, offset, 0), j = i;
    for (; j < p->n && p->rec[j].offset < offset + size; j++)
        p->unpin(p->rec[j].offset, p->rec[j].bytes, p->rec[j].count);
    drop_pin_records(p, i, j);
}

bool pins_at(const pins_t *p, const alloc_t *alloc, size_t offset)
{
    size_t base, size;
    if (p->n == 0 || alloc_find(alloc, offset, &base, &size) != LMS_OK)
        return false;
    size_t i = pin_index(p, base, 0);
    return i < p->n && p->rec[i].offset < base + size;
}
