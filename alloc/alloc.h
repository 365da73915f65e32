/*
 * alloc/ — placement: where in the reserved VA range each allocation lives.
 *
 * alloc/ decides offsets and keeps the chunk table; it maps nothing (swap/
 * backs the chunks alloc/ reports as newly used). It is pure bookkeeping: no
 * device calls, no locks — the caller (swap/) serializes every call.
 *
 * Glossary
 *   chunk   granularity bytes of the range, the unit of residency. Chunk i
 *           covers offsets [i * chunk_size, (i + 1) * chunk_size).
 *   large   an allocation of at least large_threshold bytes (8 chunks by
 *           default), or of a size class served by runs (see small): a run
 *           of whole chunks of its own, placed best fit (smallest free run
 *           that fits, lowest offset among equals) and coalesced with its
 *           free neighbours when released.
 *   small   a smaller allocation: a slot of its size class in a slab, a run
 *           of 1..16 chunks cut into equal slots, as few chunks as leave at
 *           most 1/16 of the slab unused (alloc.c: Note [Slab geometry]); a
 *           class that would have one slot per slab is served by runs.
 *           Classes are 256-byte multiples up to 2 KiB, then 8 per doubling,
 *           so that a request of 2 KiB or more wastes at most 12.5% (below
 *           2 KiB, cudaMalloc's 256-byte alignment rules). A slot may
 *           straddle chunks.
 *   cached  a small allocation freed into a thread cache (swap/tcache.c):
 *           no allocation any more (lookups and frees of it fail), but its
 *           slot stays taken and alloc_usage still counts it as live, until
 *           alloc_uncache makes it live again or alloc_cached_freed freed.
 *   freed   an allocation the caller has freed but whose space must not be
 *           reused yet (stream order, see swap/): it is no allocation any more
 *           (lookups and frees of it fail), and it is no free space either,
 *           until alloc_release.
 *
 * Placement is deterministic: the same sequence of calls gives the same
 * offsets, in any process, because every choice depends only on the table.
 * Lookups (alloc_find) are O(1): index arithmetic plus the chunk table.
 *
 * alloc_live_small, alloc_find_small, alloc_cache and alloc_uncache are the exception to "the caller serializes":
 * they may run in any thread beside any call (Note [Lock-free slots]).
 */
#ifndef LMS_ALLOC_H
#define LMS_ALLOC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lms.h"

typedef struct alloc alloc_t;

/* Small size classes are numbered 0 .. ALLOC_MAX_CLASSES - 1. */
#define ALLOC_MAX_CLASSES 128

typedef struct alloc_config {
    size_t chunk_size;      /* a power of two, 4 KiB..128 MiB */
    size_t nchunks;         /* chunks in the range */
    size_t large_threshold; /* 0: ALLOC_DEFAULT_LARGE_CHUNKS chunks; else at least 4 KiB,
                               at most 16 chunks */
} alloc_config_t;

/* large_threshold 0: requests of this many chunks or more are runs. */
#define ALLOC_DEFAULT_LARGE_CHUNKS 8

lms_status_t alloc_create(const alloc_config_t *cfg, alloc_t **out);

/* Whether alloc_create takes large_threshold with chunks of chunk_size. */
bool alloc_large_threshold_ok(size_t chunk_size, size_t large_threshold);
void alloc_destroy(alloc_t *a);

/* What a call changed in the chunks in use: the chunks [first, first + n)
 * came into use (alloc_place) or went out of it (alloc_release). A chunk is
 * in use while it holds bytes of a run, or of a taken slot (live, cached or
 * freed); a slab's other chunks hold only address space, and cost a caller
 * that backs chunks in use nothing. n is 0 when no chunk changed. */
typedef struct alloc_chunks {
    size_t first, n;
} alloc_chunks_t;

/* Places an allocation of size > 0 bytes; *offset is 256-aligned. It brings
 * no more chunks into use than a run of its own would: a slab takes its
 * lowest free slot, so only that slot's last chunks can be new. When the
 * range has no room for a new slab of its class, it is placed as a run.
 * LMS_ERR_OUT_OF_MEMORY (with a message) when no free run is large enough. */
lms_status_t alloc_place(alloc_t *a, size_t size, size_t *offset, alloc_chunks_t *used);

/* Undoes the alloc_place that returned offset (for a caller that could not
 * back it): the space is free again at once. */
void alloc_unplace(alloc_t *a, size_t offset, alloc_chunks_t *freed);

/* The live allocation containing offset: its base offset and usable size. */
lms_status_t alloc_find(const alloc_t *a, size_t offset, size_t *base, size_t *size);

/* Turns the live allocation at exactly base into a freed one (see glossary).
 * LMS_ERR_INVALID, changing nothing, if base is not the base of a live
 * allocation (an interior pointer, a second free, or never allocated). */
lms_status_t alloc_mark_freed(alloc_t *a, size_t base, size_t *size);

/* Makes the freed allocation at base live again as an allocation of request
 * bytes, for its own stream's reuse: request must have the same class, or
 * when large the same chunk count (the caller matches them). */
void alloc_revive(alloc_t *a, size_t base, size_t request);

/* Makes the freed allocation at base free space. A slab left empty is kept
 * while it is its class's only one (its chunks out of use, their addresses
 * kept). */
void alloc_release(alloc_t *a, size_t base, alloc_chunks_t *freed);

/* Gives the addresses of one kept empty slab back to the free runs; false if
 * there is none. */
bool alloc_trim_one(alloc_t *a);

/* The index of the class size falls in, by arithmetic (256-byte steps up
 * to 2 KiB, then 8 per doubling), whether or not alloc has that class:
 * alloc_class_of says. For a caller that knows which indices are small. */
static inline int alloc_class_index(size_t size)
{
    if (size <= 2048)
        return (int)((size + 255) / 256) - 1;
    unsigned k = 63u - (unsigned)__builtin_clzll(size - 1); /* 2^k < size <= 2^(k+1) */
    size_t step = (size_t)1 << (k - 3);
    size_t within = (size - ((size_t)1 << k) + step - 1) / step - 1;
    return 8 + (int)(k - 11) * 8 + (int)within;
}

/* The size class of a small request, and its slot size; -1 for a large one.
 * Two requests with the same class (or the same chunk count, when large) can
 * reuse each other's space. */
int alloc_class_of(const alloc_t *a, size_t size);
size_t alloc_usable_size(const alloc_t *a, size_t size);

/* The size class of the allocation (live or freed) at base: -1 when it is
 * large. Not always alloc_class_of(its usable size): the slot of the largest
 * classes may reach the large threshold. */
int alloc_class_at(const alloc_t *a, size_t base);

/* The slot size of class cls. */
size_t alloc_class_size(const alloc_t *a, int cls);

/* A slot's live flag: 1 while it holds a live allocation. */
typedef uint8_t alloc_flag_t;

/* Lock-free. The live flag of the live small allocation at exactly base, and
 * its class, if that is below ncls; else NULL (the serialized calls say what
 * base is). The flag stays the slot's while the slot is taken. */
alloc_flag_t *alloc_live_small(const alloc_t *a, size_t base, int ncls, int *cls);

/* Lock-free. Makes the live allocation whose flag is f cached; false, changing
 * nothing, if it was not live (another thread freed it meanwhile: an exchange,
 * so that of two frees at once one fails). And makes a cached one live again,
 * for its thread cache's reuse. */
static inline bool alloc_cache(alloc_flag_t *f) { return __atomic_exchange_n(f, 0, __ATOMIC_RELAXED) == 1; }
static inline void alloc_uncache(alloc_flag_t *f) { __atomic_store_n(f, 1, __ATOMIC_RELAXED); }

/* Lock-free alloc_find for small allocations: true with the live small
 * allocation containing offset; false when there is none (the offset may
 * still be in a large one: ask alloc_find). */
bool alloc_find_small(const alloc_t *a, size_t offset, size_t *base, size_t *size);

/* Turns the cached allocation at base into a freed one; returns its size. */
size_t alloc_cached_freed(alloc_t *a, size_t base);

typedef struct alloc_usage {
    size_t live_bytes;     /* usable bytes of live (and cached) allocations */
    size_t live_count;     /* live (and cached) allocations */
    size_t used_chunks;    /* chunks in use (see alloc_chunks_t) */
    size_t peak_used_chunks;
    size_t free_runs;      /* runs of free chunks: fragmentation */
    size_t largest_free_run; /* in chunks */
} alloc_usage_t;
void alloc_usage(const alloc_t *a, alloc_usage_t *out);

size_t alloc_chunk_size(const alloc_t *a);

#endif /* LMS_ALLOC_H */
