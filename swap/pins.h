/*
 * swap/pins.h — the ranges lms_pin pinned, each with its count, so that an
 * unpin matches a pin as a free matches an allocation (Note [Pin records]
 * in pins.c). The chunks' own pin counts are residency's; a record's are
 * taken off through the unpin function it is given. Guarded by swap_lock;
 * the count of records is also published for the thread caches, which read
 * it without the lock.
 */
#ifndef LMS_SWAP_PINS_H
#define LMS_SWAP_PINS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "alloc/alloc.h"

#ifndef HIDDEN
#define HIDDEN __attribute__((visibility("hidden")))
#endif

/* A range lms_pin pinned, count times so far. */
typedef struct pin_record {
    size_t offset, bytes;
    uint32_t count;
} pin_record_t;

/* Takes `times` pins off the chunks of [offset, offset + bytes)
 * (resid_unpin). */
typedef void (*pins_unpin_fn)(size_t offset, size_t bytes, uint32_t times);

typedef struct pins {
    pin_record_t *rec;   /* sorted by (offset, bytes) */
    size_t n, cap;
    size_t *published;   /* n, stored atomically for readers without the lock
                            (tc_pin_records) */
    pins_unpin_fn unpin; /* what takes a record's pins off its chunks */
} pins_t;

static inline void pins_init(pins_t *p, size_t *published, pins_unpin_fn unpin)
{
    *p = (pins_t){.published = published, .unpin = unpin};
}

/* Frees the records, publishing that none is left. */
HIDDEN void pins_destroy(pins_t *p);

/* Makes room for one more record, so that a pins_add after it cannot fail:
 * a pin is recorded after its chunks are pinned. False without memory. */
HIDDEN bool pins_reserve(pins_t *p);

/* Records one more pin of [offset, offset + bytes), in the room
 * pins_reserve made. */
HIDDEN void pins_add(pins_t *p, size_t offset, size_t bytes);

/* Takes one pin of exactly [offset, offset + bytes) off, chunks and record;
 * false, changing nothing, when no record is of that range. */
HIDDEN bool pins_remove(pins_t *p, size_t offset, size_t bytes);

/* The allocation at [offset, offset + size) is released or reused: the
 * records within it go, and their pins with them. */
HIDDEN void pins_released(pins_t *p, size_t offset, size_t size);

/* Whether the live allocation (of alloc) at offset holds a pinned range. */
HIDDEN bool pins_at(const pins_t *p, const alloc_t *alloc, size_t offset);

#endif /* LMS_SWAP_PINS_H */
