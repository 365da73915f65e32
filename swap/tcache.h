/*
 * swap/tcache.h — the thread caches' lock-free calls, inline in lms_malloc,
 * lms_free and lms_allocation_of (Note [Thread caches] in tcache.c, which
 * owns the caches and does everything that takes the lock).
 *
 * tc_malloc and tc_free take no lock and return false when the locked path
 * must run; tc_lookup answers for small allocations, or false.
 */
#ifndef LMS_SWAP_TCACHE_H
#define LMS_SWAP_TCACHE_H

#include "swap/internal.h"

#define TC_BIN 16     /* entries per class */

typedef struct tc_bin {
    uint32_t n;
    uint32_t slot; /* the class's slot size */
    size_t floor;  /* the lowest offset a flush sent on since the bin last ran dry
                      (SIZE_MAX: none): frees above it go on too (Note [Thread caches]) */
    struct {
        size_t off;
        alloc_flag_t *live;
    } e[TC_BIN]; /* highest address first: mallocs take the last */
} tc_bin_t;

typedef struct tcache {
    uint64_t epoch;      /* swap_epoch it was keyed under; 0: not keyed */
    uint64_t generation; /* S->generation then */
    lms_stream_t stream;
    dev_addr_t base;
    size_t va_size;
    const alloc_t *alloc;
    size_t bytes, limit;
    const size_t *window; /* the thread's resid_window_count() */
    int ncls, capcls; /* classes cached; bins allocated */
    bool exiting;     /* its thread is: its flushes start no device work */
    tc_bin_t bins[];
} tcache_t;

HIDDEN extern size_t tc_small_max;     /* atomic: the largest request any cache serves */
HIDDEN extern size_t tc_pin_records;   /* atomic: S->pins.n (Note [Pin records] in pins.c) */
HIDDEN extern __thread tcache_t *tc_self; /* the calling thread's cache, or NULL */

static inline bool keyed_here(const tcache_t *t, lms_stream_t stream)
{
    return t != NULL && t->stream == stream &&
           t->epoch == __atomic_load_n(&swap_epoch, __ATOMIC_ACQUIRE);
}

/* ptr's offset in the range [base, base + size), or false. */
static inline bool offset_in(dev_addr_t base, size_t size, const void *ptr, size_t *off)
{
    dev_addr_t a = (dev_addr_t)(uintptr_t)ptr;
    *off = (size_t)(a - base);
    return a >= base && *off < size;
}

static inline bool tc_malloc(void **ptr, size_t size, lms_stream_t stream)
{
    if (size > __atomic_load_n(&tc_small_max, __ATOMIC_RELAXED))
        return false; /* large: not even a look at the cache */
    tcache_t *t = tc_self;
    if (!keyed_here(t, stream) || size == 0 || *t->window != 0)
        return false;
    /* the classes below ncls are all small (tc_key), so the index is the class */
    int cls = alloc_class_index(size);
    if (cls >= t->ncls || t->bins[cls].n == 0)
        return false;
    tc_bin_t *b = &t->bins[cls];
    b->n--; /* the lowest-addressed entry (Note [Thread caches]) */
    t->bytes -= b->slot;
    alloc_uncache(b->e[b->n].live);
    *ptr = (void *)(uintptr_t)(t->base + b->e[b->n].off);
    return true;
}

/* tc_free, with the pin records already looked at (tc_free_locked). */
static inline bool tc_free_unpinned(void *ptr, lms_stream_t stream)
{
    tcache_t *t = tc_self;
    if (!keyed_here(t, stream) || *t->window != 0)
        return false;
    size_t off;
    if (!offset_in(t->base, t->va_size, ptr, &off))
        return false;
    int cls;
    alloc_flag_t *live = alloc_live_small(t->alloc, off, t->ncls, &cls);
    if (live == NULL)
        return false;
    tc_bin_t *b = &t->bins[cls];
    if (b->n == TC_BIN || t->bytes + b->slot > t->limit || off > b->floor)
        return false; /* the locked path makes room, or sends it on */
    if (!alloc_cache(live))
        return false; /* freed by another thread meanwhile: the locked path says so */
    uint32_t i = b->n; /* its place in the descending order */
    while (i > 0 && b->e[i - 1].off < off) {
        b->e[i] = b->e[i - 1];
        i--;
    }
    b->e[i].off = off;
    b->e[i].live = live;
    b->n++;
    t->bytes += b->slot;
    return true;
}

/* While anything is pinned, frees take the locked path: a pinned allocation
 * must not reach the cache, where its reuse would keep its pins (Note [Pin
 * records] in pins.c). */
static inline bool tc_free(void *ptr, lms_stream_t stream)
{
    return __atomic_load_n(&tc_pin_records, __ATOMIC_RELAXED) == 0 &&
           tc_free_unpinned(ptr, stream);
}

static inline bool tc_lookup(const void *ptr, void **base, size_t *size)
{
    tcache_t *t = tc_self;
    if (t == NULL || t->epoch != __atomic_load_n(&swap_epoch, __ATOMIC_ACQUIRE) ||
        *t->window != 0)
        return false;
    size_t off, b;
    if (!offset_in(t->base, t->va_size, ptr, &off) || !alloc_find_small(t->alloc, off, &b, size))
        return false;
    *base = (void *)(uintptr_t)(t->base + b);
    return true;
}

#endif /* LMS_SWAP_TCACHE_H */
