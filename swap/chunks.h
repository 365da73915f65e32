/*
 * swap/chunks.h — the chunk table: each chunk's state (Note [Chunk states] in
 * residency.c), the LRU list of allocated chunks with a block, the set of
 * cached chunks (free, still mapped), and the set of clean chunks. Pure data:
 * no device calls, no lock of its own (swap_lock guards the table that
 * internal.h's state holds), so tests/swap/test_chunks.c drives it directly.
 */
#ifndef LMS_SWAP_CHUNKS_H
#define LMS_SWAP_CHUNKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "device/device.h"
#include "swap/need.h" /* the chunk states */

#ifndef HIDDEN
#define HIDDEN __attribute__((visibility("hidden")))
#endif
#define NO_CHUNK UINT32_MAX


/* What the current access needs of a chunk (chunk_t.acc), set by mark_needs
 * and bring_in and cleared before the access returns. */
typedef enum chunk_acc {
    ACC_NEED_DATA = 1,   /* its data must be there: a read, or a partial overwrite */
    ACC_WRITES = 2,      /* the access writes it: its host copy goes stale */
    ACC_MAPPED = 4,      /* bring_in mapped it onto a block this round */
    ACC_COPIED = 8,      /* bring_in queued its copy in this round */
    ACC_OVER_HOST = 16,  /* mapped for an overwrite over its host copy: the copy
                            goes once the access succeeds, else the block goes back */
    ACC_ACCESSIBLE = 32, /* bring_in set access on it this round */
} chunk_acc_t;

struct xfer;

/* What a chunk's VA maps (chunk_t.va), apart from its state: in host mode
 * (LMS_EVICTED=host) a HOST chunk's VA maps its host block (Note [Evicted
 * chunks stay mapped] in residency.c). */
enum { VA_NONE, VA_DEVICE, VA_HOST };

typedef struct chunk {
    dev_block_t block;  /* 0: none */
    struct xfer *xfer;  /* a copy still using its device memory or host copy */
    char *host;         /* its host copy (a chunk's extent of the host pool), or NULL */
    uint32_t lru_prev, lru_next;
    uint32_t holds;     /* open access windows that name it */
    uint32_t pins;
    uint32_t stamp;     /* the last access that looked at it */
    uint32_t early;     /* the access whose early step mapped it, until one
                           that names it succeeds (Note [Pipelined swaps] in window.c) */
    uint64_t streams;   /* stream slots that used it (bit 63: slots >= 63) */
    uint32_t last_window; /* its last use was in this fenced window of stream slot
                             last_slot (generation last_gen); 0: not known
                             (Note [Eviction fences] in evict.c) */
    uint32_t last_gen;
    uint16_t last_slot;
    uint8_t state;
    uint8_t acc;        /* chunk_acc_t flags of the current access */
    uint8_t va;         /* VA_NONE, VA_DEVICE (its block) or VA_HOST (its host copy's block) */
    bool clean;         /* RESIDENT (or EVICTING a clean run), and the host copy is
                           current: set only with chunks_set_clean */
    bool drop_host;     /* drop the host copy once xfer is done */
    bool free;          /* free in alloc/ */
    bool on_lru;
    bool prefetched;    /* fetched ahead of use, not yet used (stats.prefetch_hits) */
    bool remap;         /* EVICTING, its copy ended, still on its block: its unmap and
                           host map wait for the D2H link to go idle (Note [Remap
                           beside copies] in residency.c) */
    bool broken;        /* RESIDENT, but neither accessible nor holding its
                           data (window.c: unmap_unused): repaired before
                           any use, never evicted */
} chunk_t;

typedef struct chunks {
    chunk_t *ch;
    size_t n;
    uint32_t lru_head, lru_tail; /* allocated chunks with a block, least recent first */
    uint32_t *cached;            /* free chunks that are still mapped */
    uint32_t *cached_pos;        /* per chunk: its index in cached[] + 1, 0 = not cached */
    size_t ncached;
    uint64_t *clean_bits;        /* bit c: ch[c].clean (Note [The clean set]) */
    uint64_t *clean_words;       /* bit w: clean_bits[w] != 0 */
    uint32_t stamp;              /* the last access's stamp (chunk_t.stamp) */
} chunks_t;

/* qsort/bsearch order of chunk ids (uint32_t). */
static inline int chunks_cmp_id(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* Makes a table of n chunks, all free and UNBACKED; LMS_ERR_OUT_OF_MEMORY
 * (with the message) if there is no host memory for it. */
HIDDEN lms_status_t chunks_init(chunks_t *t, size_t n);
HIDDEN void chunks_destroy(chunks_t *t);

/* ---- the LRU list ------------------------------------------------------- */

static inline void chunks_lru_remove(chunks_t *t, size_t c)
{
    chunk_t *k = &t->ch[c];
    if (!k->on_lru)
        return;
    if (k->lru_prev != NO_CHUNK)
        t->ch[k->lru_prev].lru_next = k->lru_next;
    else
        t->lru_head = k->lru_next;
    if (k->lru_next != NO_CHUNK)
        t->ch[k->lru_next].lru_prev = k->lru_prev;
    else
        t->lru_tail = k->lru_prev;
    k->on_lru = false;
}

/* To the most recent end. */
static inline void chunks_lru_touch(chunks_t *t, size_t c)
{
    chunks_lru_remove(t, c);
    chunk_t *k = &t->ch[c];
    k->lru_prev = t->lru_tail;
    k->lru_next = NO_CHUNK;
    if (t->lru_tail != NO_CHUNK)
        t->ch[t->lru_tail].lru_next = (uint32_t)c;
    else
        t->lru_head = (uint32_t)c;
    t->lru_tail = (uint32_t)c;
    k->on_lru = true;
}

/* ---- the cached set: O(1) add, remove and membership ------------------------ */

static inline bool chunks_is_cached(const chunks_t *t, size_t c) { return t->cached_pos[c] != 0; }

static inline void chunks_cached_add(chunks_t *t, size_t c)
{
    t->cached[t->ncached++] = (uint32_t)c;
    t->cached_pos[c] = (uint32_t)t->ncached;
}

/* Moves the last entry into c's place: entries before c's keep theirs. */
static inline void chunks_cached_remove(chunks_t *t, size_t c)
{
    size_t i = t->cached_pos[c] - 1;
    uint32_t last = t->cached[--t->ncached];
    t->cached[i] = last;
    t->cached_pos[last] = (uint32_t)i + 1;
    t->cached_pos[c] = 0;
}

/* ---- the clean set ----------------------------------------------------------
 * Note [The clean set]
 * When the host pool has no slot for an eviction, the host copies of clean
 * resident chunks are dropped, lowest chunk first (residency.c:
 * drop_clean_copies). Scanning the whole table for them, under the swap
 * lock on the swap path, cost a pass over every chunk of the reservation
 * (millions on a large one) per miss. So `clean` is written only through
 * chunks_set_clean, which keeps a two-level bitmap of the clean chunks:
 * chunks_next_clean finds the next one in order with a word per 64 chunks
 * of the upper level, and the scan looks at the clean chunks only. A chunk
 * stops being clean when it leaves the device (set_unbacked), so the set
 * holds resident chunks and clean runs on their way out, nothing else.
 */

static inline void chunks_set_clean(chunks_t *t, size_t c, bool clean)
{
    if (t->ch[c].clean == clean) /* the bitmap says the same: untouched (a free's common case) */
        return;
    t->ch[c].clean = clean;
    uint64_t bit = 1ull << (c % 64);
    size_t w = c / 64;
    if (clean) {
        t->clean_bits[w] |= bit;
        t->clean_words[w / 64] |= 1ull << (w % 64);
    } else {
        t->clean_bits[w] &= ~bit;
        if (t->clean_bits[w] == 0)
            t->clean_words[w / 64] &= ~(1ull << (w % 64));
    }
}

/* The lowest clean chunk at or after c; t->n if none. */
HIDDEN size_t chunks_next_clean(const chunks_t *t, size_t c);

#endif /* LMS_SWAP_CHUNKS_H */
