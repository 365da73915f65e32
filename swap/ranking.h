/*
 * swap/ranking.h — eviction victims in the order policy/ would evict them,
 * made cheaply between policy events (Note [Ranking between events] in
 * ranking.c). Reads the chunk table and policy/, changes neither; owns its
 * scratch. Guarded by swap_lock.
 */
#ifndef LMS_SWAP_RANKING_H
#define LMS_SWAP_RANKING_H

#include "policy/policy.h"
#include "swap/chunks.h"

#define RANKED_MAX 8192 /* candidates looked at */
#define TOUCHED_MAX 256 /* chunks reported between full rankings, at most */

typedef struct ranked {
    uint64_t key;   /* policy_evict_key: higher goes first */
    uint32_t order; /* on the LRU list: ties go least recent first */
    uint32_t chunk;
} ranked_t;

/* Whether chunk c may be evicted now (the caller's rule). */
typedef bool (*ranking_evictable_fn)(const chunks_t *t, size_t c);

typedef struct ranking {
    const chunks_t *chunks;
    const policy_t *policy;
    ranking_evictable_fn evictable;
    ranked_t *ranked;             /* victims ranked, best first: full or head */
    ranked_t *full, *head;        /* scratch: the last full ranking; its head re-keyed */
    size_t ranked_n;              /* in ranked, while ranked_for == policy_version */
    uint64_t ranked_for;
    size_t full_n;                /* in full; 0: rank in full next */
    uint64_t full_basis;          /* policy_basis when it was made */
    uint32_t *touched, *touched_sorted; /* chunks reported to policy/ since (scratch) */
    size_t ntouched;              /* > TOUCHED_MAX: too many to repair the ranking */
    uint64_t rankings_full, rankings_head; /* made so far */
} ranking_t;

HIDDEN lms_status_t ranking_init(ranking_t *r, const chunks_t *chunks, const policy_t *policy,
                                 ranking_evictable_fn evictable);
HIDDEN void ranking_destroy(ranking_t *r);

/* Chunks [first, first + n) were reported to policy/: a ranking made before
 * has their keys wrong. */
static inline void ranking_touched(ranking_t *r, size_t first, size_t n)
{
    if (r->ntouched + n > TOUCHED_MAX) {
        r->ntouched = TOUCHED_MAX + 1;
        return;
    }
    for (size_t c = first; c < first + n; c++)
        r->touched[r->ntouched++] = (uint32_t)c;
}

/* The i-th victim of the last ranking_victims, and its key. */
static inline uint32_t ranking_chunk(const ranking_t *r, size_t i) { return r->ranked[i].chunk; }
static inline uint64_t ranking_key(const ranking_t *r, size_t i) { return r->ranked[i].key; }

/* Full rankings made so far: one made while an access window was open
 * left that window's chunks out. */
static inline uint64_t ranking_fulls(const ranking_t *r) { return r->rankings_full; }

/* What was ranked may have become evictable: rank again at the next ask. */
static inline void ranking_stale(ranking_t *r) { r->ranked_n = 0; }

/* And in full. */
static inline void ranking_stale_full(ranking_t *r) { r->ranked_n = r->full_n = 0; }

/* The evictable chunks, in the order policy/ would evict them, into
 * r->ranked; how many: the full ranking, or its head repaired with at
 * least `need` entries of it looked at; `resident` chunks have a block (a
 * full ranking samples RANKED_MAX of them evenly). A ranking is kept while policy/'s
 * answers stay the same (policy_version), so that a burst of evictions
 * ranks once; the caller skips what is no longer evictable. */
HIDDEN size_t ranking_victims(ranking_t *r, size_t need, size_t resident);

/* Whether the ranking in use is a repaired head where the full ranking
 * reaches `depth` entries: ranking_stale and a deeper ranking_victims look
 * further. */
static inline bool ranking_shallow(const ranking_t *r, size_t depth)
{
    return r->ranked == r->head && depth < r->full_n;
}

#endif /* LMS_SWAP_RANKING_H */
