/*
 * alloc/alloc.c — placement: the chunk table, free runs, size classes and
 * slabs. See alloc.h for the glossary and the contract.
 *
 * Owns (all in host metadata from base_meta_*):
 *   chunks[]  one entry per chunk of the range: free, a large allocation's
 *             head or tail, or a slab. Free runs carry their length at both
 *             ends (boundary tags), so a released run finds its free
 *             neighbours in O(1).
 *   runs[]    every free run as the key (length << 32 | first chunk), sorted:
 *             the first key >= (n << 32) is the best fit for n chunks. Sized
 *             at create for the most runs the range can hold, so releasing
 *             never allocates and never fails.
 *   slabs     one record per slab, a run of 1..MAX_SLAB_CHUNKS chunks cut
 *             into slots (Note [Slab geometry]): a bitmap (used: taken by
 *             a live, cached or freed allocation), a live flag per slot (a
 *             byte: 1 for a live allocation), and a place on its class's list
 *             of slabs with free slots. Records sit in blocks of SLAB_BLOCK
 *             that never move, and a record keeps its flags when it is reused.
 *   fast[]    per chunk, for the lock-free calls (Note [Lock-free slots]).
 * Invariants: a chunk is in exactly one free run or used; runs[] holds every
 * free run once; a slab is on its class's partial list iff it has a free slot;
 * a slab with no used slot is its class's only slab (else its chunks are
 * released).
 *
 * No lock: swap/ serializes every call, but for the lock-free ones.
 *
 * Note [Lock-free slots]
 * alloc_live_small, alloc_find_small, alloc_cache and alloc_uncache run
 * without swap/'s lock, beside any other
 * call, so that a thread cache (swap/tcache.c) can free and reuse small slots
 * alone. They read only what cannot go away under them: fast[chunk], written
 * with release stores by slab_new and slab_delete (0, or the address of the
 * slab's live flags, FLAGS_ALIGN-aligned, or'ed with the chunk's place in
 * its slab and its class: a slot's index needs where its slab starts); the flags,
 * which a slab record keeps for the life of the alloc_t; and the class table,
 * fixed at create. They write only live flags, with relaxed atomic stores
 * (the serialized calls read and write flags the same way). A slot whose flag
 * a thread clears or sets is one it owns (its caller's allocation, or a slot
 * in its cache), so the slab cannot empty and go meanwhile. A bad pointer
 * reads a slab that may be changing, but never freed memory: it fails, or,
 * racing with its own slot's reuse, clears a flag as a late double free would.
 *
 * Note [Slab geometry]
 * A slot size that does not divide the chunk wastes the chunk's tail, and a
 * request of 1..8 chunks that is not a multiple of one wastes the last
 * chunk's: a 1.125 MiB tensor alone on a 2 MiB chunk wastes 44%, and a GPT-2
 * small (hidden 768) training step reserved 1.146x what it requested when
 * every request of half a chunk or more owned whole chunks (docs/benchmarks.md,
 * bench/alloc's fragmentation table). So size classes
 * go on up to large_threshold (8 chunks by default), and a class's slab is as
 * many whole chunks as keep its tail under 1/TAIL_WASTE: 1.125 MiB slots
 * come 5 to a 3-chunk slab (6.25% tail), 1.5 MiB ones 4 to 3 chunks (none).
 * A class for which that takes one slot (a multiple of the chunk, or within
 * 1/TAIL_WASTE of one) has no slabs: its requests are large, a run.
 *
 * A slab takes its chunks' addresses at once, but a chunk is in use (in
 * used_chunks, reported to swap/ to be backed, and counted against the
 * device and host limits) only while a taken slot has bytes in it
 * (slab.taken[]): an empty or half-filled slab costs no memory beyond the
 * chunks its slots reach. Slots may straddle chunks, so an access of one
 * makes two chunks resident and a chunk may hold parts of two tensors, as
 * small slots always could. A chunk whose last slot is released is out of
 * use, and its data dead, even while its slab lives on.
 */
#include <string.h>

#include "alloc/alloc.h"
#include "base/base.h"

#define ALIGN 256u
#define NONE UINT32_MAX
#define MAX_CLASSES ALLOC_MAX_CLASSES
#define SLAB_BLOCK 1024 /* slab records per block */
#define CLASS_BITS 7      /* fast[]'s low bits: the class (MAX_CLASSES <= 128) */
#define POS_BITS 4        /* then the chunk's place in its slab */
#define FLAGS_ALIGN ((uintptr_t)1 << (CLASS_BITS + POS_BITS)) /* of a slab's live flags */
#define MAX_SLAB_CHUNKS (1u << POS_BITS)
#define TAIL_WASTE 16    /* a slab's unused tail is at most 1/TAIL_WASTE of it */
#define MAX_CHUNK ((size_t)128 << 20) /* so that a slab's slots and offsets fit 32 bits */

enum { CHUNK_FREE, CHUNK_LARGE, CHUNK_LARGE_TAIL, CHUNK_SLAB };

typedef struct chunk {
    uint8_t kind;
    bool freed;    /* CHUNK_LARGE: freed, not yet released */
    uint32_t link; /* FREE, at a run's ends: run length; LARGE: chunks in the run;
                      LARGE_TAIL: head chunk; SLAB: slab index */
    uint64_t size; /* LARGE: usable size */
} chunk_t;

typedef struct slab {
    uint32_t self;       /* its index */
    uint32_t chunk;
    uint32_t cls;
    uint32_t used;       /* slots taken */
    uint32_t prev, next; /* the class's partial list; NONE ends it */
    uint32_t hint;       /* no free slot below word hint of used_bits */
    uint32_t taken[MAX_SLAB_CHUNKS]; /* per chunk: taken slots with bytes in it */
    uint64_t *used_bits; /* NULL while the record is unused */
    uint8_t *live;       /* chunk_size / ALIGN flags, kept for the record's life */
} slab_t;

typedef struct size_class {
    /* floor(2^64 / slot_size) + 1 = (2^64 + e) / slot_size, 0 < e <= slot_size:
     * (w * recip) >> 64 is floor(w / slot_size) for any w < 2^32, since the
     * error term w * e / (slot_size * 2^64) stays below 1 / slot_size */
    uint64_t recip;
    uint32_t slot_size;
    uint32_t slots;   /* per slab; 0: a run class (its requests are large) */
    uint32_t chunks;  /* per slab */
    uint32_t partial; /* first slab with a free slot, NONE if none */
    uint32_t nslabs;  /* slabs of this class */
} size_class_t;

struct alloc {
    size_t chunk_size;
    unsigned chunk_shift;
    size_t nchunks;
    size_t large_threshold;
    chunk_t *chunks;
    uint64_t *runs;
    size_t nruns;
    slab_t **slab_blocks; /* nchunks / SLAB_BLOCK + 1, allocated as needed */
    size_t nslabs;        /* records ever made */
    uintptr_t *fast;      /* per chunk; see Note [Lock-free slots] */
    size_t flag_stride; /* flag_pos: chunk_size / ALIGN / 64, or 0 (slot order) */
    uint32_t free_slab; /* a free slab record (its `next` links the rest), NONE if none */
    size_class_t classes[MAX_CLASSES];
    int nclasses;
    alloc_usage_t usage;
};

/* ---- free runs --------------------------------------------------------------- */

static uint64_t run_key(size_t len, size_t first) { return (uint64_t)len << 32 | first; }

/* Index of the first key >= key. */
static size_t runs_lower_bound(const alloc_t *a, uint64_t key)
{
    size_t lo = 0, hi = a->nruns;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (a->runs[mid] < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void runs_insert(alloc_t *a, size_t first, size_t len)
{
    uint64_t key = run_key(len, first);
    size_t i = runs_lower_bound(a, key);
    memmove(&a->runs[i + 1], &a->runs[i], (a->nruns - i) * sizeof *a->runs);
    a->runs[i] = key;
    a->nruns++;
    a->chunks[first] = (chunk_t){.kind = CHUNK_FREE, .link = (uint32_t)len};
    a->chunks[first + len - 1] = (chunk_t){.kind = CHUNK_FREE, .link = (uint32_t)len};
}

static void runs_remove(alloc_t *a, size_t first, size_t len)
{
    size_t i = runs_lower_bound(a, run_key(len, first));
    memmove(&a->runs[i], &a->runs[i + 1], (a->nruns - i - 1) * sizeof *a->runs);
    a->nruns--;
}

/* Takes n chunks from the best-fitting free run; false if none is long enough. */
static bool take_chunks(alloc_t *a, size_t n, size_t *first)
{
    size_t i = runs_lower_bound(a, run_key(n, 0));
    if (i == a->nruns)
        return false;
    size_t len = a->runs[i] >> 32, start = a->runs[i] & 0xffffffffu;
    runs_remove(a, start, len);
    if (len > n)
        runs_insert(a, start + n, len - n);
    *first = start;
    return true;
}

/* Chunks of the range going into and out of use (holding bytes of a taken
 * slot or of a run), as opposed to taken from the free runs. */
static void use_chunks(alloc_t *a, size_t n)
{
    a->usage.used_chunks += n;
    if (a->usage.used_chunks > a->usage.peak_used_chunks)
        a->usage.peak_used_chunks = a->usage.used_chunks;
}

/* Returns [first, first + n) to the free runs, merged with free neighbours. */
static void give_chunks(alloc_t *a, size_t first, size_t n)
{
    size_t start = first, len = n;
    if (first > 0 && a->chunks[first - 1].kind == CHUNK_FREE) {
        size_t left = a->chunks[first - 1].link;
        runs_remove(a, first - left, left);
        start -= left;
        len += left;
    }
    if (first + n < a->nchunks && a->chunks[first + n].kind == CHUNK_FREE) {
        size_t right = a->chunks[first + n].link;
        runs_remove(a, first + n, right);
        len += right;
    }
    for (size_t c = first; c < first + n; c++)
        a->chunks[c] = (chunk_t){.kind = CHUNK_FREE};
    runs_insert(a, start, len);
}

/* ---- size classes -------------------------------------------------------------- */

/* The slab of a class of slot bytes: the fewest whole chunks (at most
 * MAX_SLAB_CHUNKS) whose tail, past the last slot, is at most 1/TAIL_WASTE of
 * the slab, else the one with the smallest share of tail. A slab of one slot
 * is no slab: a run of whole chunks serves the class as well (slots = 0). */
static void slab_geometry(const alloc_t *a, size_t slot, uint32_t *chunks, uint32_t *slots)
{
    size_t cs = a->chunk_size, best_k = 0, best_n = 0;
    double best_tail = 2;
    for (size_t k = (slot + cs - 1) / cs; k <= MAX_SLAB_CHUNKS; k++) {
        size_t n = k * cs / slot;
        if (n > cs / ALIGN) /* more slots than a record has flags */
            break;
        double tail = (double)(k * cs - n * slot) / (double)(k * cs);
        if (tail < best_tail) {
            best_k = k, best_n = n, best_tail = tail;
            if (tail * TAIL_WASTE <= 1)
                break;
        }
    }
    *chunks = (uint32_t)best_k;
    *slots = best_n > 1 ? (uint32_t)best_n : 0;
}

/* Classes up to the one holding large_threshold - 1 bytes. */
static void build_classes(alloc_t *a)
{
    a->nclasses = 0;
    for (int i = 0; i < MAX_CLASSES; i++) {
        size_t slot;
        if (i < 8) {
            slot = (size_t)(i + 1) * ALIGN;
        } else {
            unsigned k = 11 + (unsigned)(i - 8) / 8;
            slot = ((size_t)1 << k) + (size_t)((i - 8) % 8 + 1) * ((size_t)1 << (k - 3));
        }
        if (slot > (size_t)MAX_SLAB_CHUNKS * a->chunk_size ||
            (i > 0 && a->classes[i - 1].slot_size >= a->large_threshold))
            break;
        size_class_t *k = &a->classes[i];
        *k = (size_class_t){.recip = (uint64_t)(((__uint128_t)1 << 64) / slot) + 1,
                            .slot_size = (uint32_t)slot,
                            .partial = NONE};
        slab_geometry(a, slot, &k->chunks, &k->slots);
        a->nclasses = i + 1;
    }
}

int alloc_class_of(const alloc_t *a, size_t size)
{
    if (size >= a->large_threshold)
        return -1;
    int c = alloc_class_index(size);
    return c < a->nclasses && a->classes[c].slots > 0 ? c : -1;
}

size_t alloc_usable_size(const alloc_t *a, size_t size)
{
    int c = alloc_class_of(a, size);
    return c >= 0 ? a->classes[c].slot_size : (size + ALIGN - 1) / ALIGN * ALIGN;
}

size_t alloc_chunk_size(const alloc_t *a) { return a->chunk_size; }


/* ---- slabs -------------------------------------------------------------------- */

static slab_t *slab_at(const alloc_t *a, uint32_t i)
{
    return &a->slab_blocks[i / SLAB_BLOCK][i % SLAB_BLOCK];
}

/* fast[] of the slab's chunk at place j (Note [Lock-free slots]). */
static uintptr_t fast_word(const slab_t *s, size_t j)
{
    return (uintptr_t)s->live | (uintptr_t)j << CLASS_BITS | s->cls;
}

/* Where slot's live flag is: neighbouring slots' flags on different cache
 * lines, since neighbouring slots often go to different threads, whose
 * caches write their flags without the lock. */
static size_t flag_pos(const alloc_t *a, size_t slot)
{
    return a->flag_stride ? slot % 64 * a->flag_stride + slot / 64 : slot;
}

static uint8_t flag(const alloc_t *a, const uint8_t *live, size_t slot)
{
    return __atomic_load_n(&live[flag_pos(a, slot)], __ATOMIC_RELAXED);
}

static void set_flag(const alloc_t *a, uint8_t *live, size_t slot, uint8_t v)
{
    __atomic_store_n(&live[flag_pos(a, slot)], v, __ATOMIC_RELAXED);
}

static void partial_push(alloc_t *a, slab_t *s)
{
    size_class_t *k = &a->classes[s->cls];
    s->prev = NONE;
    s->next = k->partial;
    if (k->partial != NONE)
        slab_at(a, k->partial)->prev = s->self;
    k->partial = s->self;
}

static void partial_remove(alloc_t *a, slab_t *s)
{
    if (s->prev != NONE)
        slab_at(a, s->prev)->next = s->next;
    else
        a->classes[s->cls].partial = s->next;
    if (s->next != NONE)
        slab_at(a, s->next)->prev = s->prev;
}

/* An unused slab record: a recycled one, or a new one with its flags. */
static slab_t *record_take(alloc_t *a)
{
    if (a->free_slab != NONE) {
        slab_t *s = slab_at(a, a->free_slab);
        a->free_slab = s->next;
        return s;
    }
    uint32_t i = (uint32_t)a->nslabs;
    slab_t **block = &a->slab_blocks[i / SLAB_BLOCK];
    if (*block == NULL && (*block = base_meta_calloc(SLAB_BLOCK, sizeof **block)) == NULL)
        return NULL;
    slab_t *s = &(*block)[i % SLAB_BLOCK];
    if ((s->live = base_meta_calloc_aligned(a->chunk_size / ALIGN, FLAGS_ALIGN)) == NULL)
        return NULL;
    s->self = i;
    a->nslabs++;
    return s;
}

static void record_give(alloc_t *a, slab_t *s)
{
    s->next = a->free_slab;
    a->free_slab = s->self;
}

/* A new slab of class cls on fresh chunks. */
static lms_status_t slab_new(alloc_t *a, int cls, slab_t **out)
{
    uint32_t words = (a->classes[cls].slots + 63) / 64;
    uint64_t *bits = base_meta_calloc(words, sizeof *bits);
    slab_t *s = bits != NULL ? record_take(a) : NULL;
    if (s == NULL) {
        base_meta_free(bits);
        return base_fail(LMS_ERR_OUT_OF_MEMORY, "lms_malloc: no host memory for a slab");
    }
    size_t chunk, n = a->classes[cls].chunks;
    if (!take_chunks(a, n, &chunk)) {
        record_give(a, s);
        base_meta_free(bits);
        return base_fail(LMS_ERR_OUT_OF_MEMORY,
                         "lms_malloc: the reserved address range has no run of %zu free chunks "
                         "(LMS_VA_RESERVE)", n);
    }
    *s = (slab_t){.self = s->self, .chunk = (uint32_t)chunk, .cls = (uint32_t)cls,
                  .used_bits = bits, .live = s->live};
    for (size_t i = 0; i < a->classes[cls].slots; i++)
        set_flag(a, s->live, i, 0);
    for (size_t j = 0; j < n; j++) {
        a->chunks[chunk + j] = (chunk_t){.kind = CHUNK_SLAB, .link = s->self};
        __atomic_store_n(&a->fast[chunk + j], fast_word(s, j), __ATOMIC_RELEASE);
    }
    a->classes[cls].nslabs++;
    partial_push(a, s);
    *out = s;
    return LMS_OK;
}

/* Gives an empty slab's chunks back to the free runs (none is in use). */
static void slab_delete(alloc_t *a, slab_t *s)
{
    partial_remove(a, s);
    a->classes[s->cls].nslabs--;
    base_meta_free(s->used_bits);
    s->used_bits = NULL;
    size_t n = a->classes[s->cls].chunks;
    for (size_t j = 0; j < n; j++)
        __atomic_store_n(&a->fast[s->chunk + j], 0, __ATOMIC_RELEASE);
    give_chunks(a, s->chunk, n); /* address space: no chunk of it is in use */
    record_give(a, s);
}

static void set_bit(uint64_t *bits, size_t i) { bits[i / 64] |= 1ull << (i % 64); }
static void clear_bit(uint64_t *bits, size_t i) { bits[i / 64] &= ~(1ull << (i % 64)); }

/* Counts slot of s as taken (delta +1) or not (-1) in the chunks it has
 * bytes in; *changed gets those that came into or went out of use. Only the
 * first and last chunk of a slot can hold bytes of other slots, so the
 * chunks that change are consecutive. */
static void slot_chunks(alloc_t *a, slab_t *s, size_t slot, int delta, alloc_chunks_t *changed)
{
    size_t size = a->classes[s->cls].slot_size, from = slot * size;
    size_t j0 = from >> a->chunk_shift, j1 = (from + size - 1) >> a->chunk_shift;
    *changed = (alloc_chunks_t){0, 0};
    for (size_t j = j0; j <= j1; j++) {
        bool edge = delta > 0 ? s->taken[j]++ == 0 : --s->taken[j] == 0;
        if (edge && changed->n++ == 0)
            changed->first = s->chunk + j;
    }
    if (delta > 0)
        use_chunks(a, changed->n);
    else
        a->usage.used_chunks -= changed->n;
}

/* Takes the lowest free slot of a slab that has one. */
static size_t slab_take(alloc_t *a, slab_t *s, alloc_chunks_t *used)
{
    uint32_t slots = a->classes[s->cls].slots;
    uint32_t w = s->hint;
    while (s->used_bits[w] == ~0ull)
        w++;
    size_t slot = (size_t)w * 64 + (size_t)__builtin_ctzll(~s->used_bits[w]);
    s->hint = w;
    set_bit(s->used_bits, slot);
    set_flag(a, s->live, slot, 1);
    slot_chunks(a, s, slot, +1, used);
    if (++s->used == slots)
        partial_remove(a, s);
    return slot;
}

/* The slab of an offset inside a slab chunk, and the slot it falls in;
 * false if the offset is past the last slot. */
static bool slab_slot_in(const alloc_t *a, size_t offset, slab_t **s, size_t *slot, size_t *within)
{
    *s = slab_at(a, a->chunks[offset >> a->chunk_shift].link);
    *within = offset - ((size_t)(*s)->chunk << a->chunk_shift);
    *slot = *within / a->classes[(*s)->cls].slot_size;
    return *slot < a->classes[(*s)->cls].slots;
}

/* The same, true only if the offset is the start of a slot. */
static bool slab_slot(const alloc_t *a, size_t offset, slab_t **s, size_t *slot)
{
    size_t within;
    return slab_slot_in(a, offset, s, slot, &within) &&
           within % a->classes[(*s)->cls].slot_size == 0;
}

/* ---- the contract ------------------------------------------------------------- */

/* Places size bytes as a run of whole chunks of their own. */
static lms_status_t place_run(alloc_t *a, size_t size, size_t *offset, alloc_chunks_t *used)
{
    *used = (alloc_chunks_t){0, 0};
    if (size > a->nchunks * a->chunk_size)
        return base_fail(LMS_ERR_OUT_OF_MEMORY,
                         "lms_malloc: %zu bytes is more than the whole reserved range (%zu bytes; "
                         "LMS_VA_RESERVE)",
                         size, a->nchunks * a->chunk_size);
    size_t n = (size + a->chunk_size - 1) >> a->chunk_shift, first;
    if (!take_chunks(a, n, &first))
        return base_fail(LMS_ERR_OUT_OF_MEMORY,
                         "lms_malloc: no run of %zu free chunks in the reserved range (largest: %zu; "
                         "LMS_VA_RESERVE)",
                         n, a->nruns ? (size_t)(a->runs[a->nruns - 1] >> 32) : 0);
    size_t usable = (size + ALIGN - 1) / ALIGN * ALIGN;
    a->chunks[first] = (chunk_t){.kind = CHUNK_LARGE, .link = (uint32_t)n, .size = usable};
    for (size_t c = first + 1; c < first + n; c++)
        a->chunks[c] = (chunk_t){.kind = CHUNK_LARGE_TAIL, .link = (uint32_t)first};
    *offset = first << a->chunk_shift;
    *used = (alloc_chunks_t){first, n};
    use_chunks(a, n);
    a->usage.live_bytes += usable;
    a->usage.live_count++;
    return LMS_OK;
}

lms_status_t alloc_place(alloc_t *a, size_t size, size_t *offset, alloc_chunks_t *used)
{
    int cls = alloc_class_of(a, size);
    if (cls < 0)
        return place_run(a, size, offset, used);
    slab_t *s = NULL;
    uint32_t p = a->classes[cls].partial;
    if (p != NONE) {
        s = slab_at(a, p);
    } else if (slab_new(a, cls, &s) != LMS_OK) {
        /* no room in the range for a slab of several chunks: a run of the
         * request's own chunks may still fit */
        return a->classes[cls].chunks > (size + a->chunk_size - 1) >> a->chunk_shift
                   ? place_run(a, size, offset, used)
                   : LMS_ERR_OUT_OF_MEMORY;
    }
    size_t slot = slab_take(a, s, used);
    *offset = ((size_t)s->chunk << a->chunk_shift) + slot * a->classes[cls].slot_size;
    a->usage.live_bytes += a->classes[cls].slot_size;
    a->usage.live_count++;
    return LMS_OK;
}

lms_status_t alloc_find(const alloc_t *a, size_t offset, size_t *base, size_t *size)
{
    size_t ci = offset >> a->chunk_shift;
    const chunk_t *c = ci < a->nchunks ? &a->chunks[ci] : NULL;
    if (c != NULL && c->kind == CHUNK_LARGE_TAIL) {
        ci = c->link;
        c = &a->chunks[ci];
    }
    if (c != NULL && c->kind == CHUNK_LARGE && !c->freed &&
        offset - (ci << a->chunk_shift) < c->size) {
        *base = ci << a->chunk_shift;
        *size = c->size;
        return LMS_OK;
    }
    slab_t *s;
    size_t slot, within;
    if (c != NULL && c->kind == CHUNK_SLAB && slab_slot_in(a, offset, &s, &slot, &within) &&
        flag(a, s->live, slot)) {
        *size = a->classes[s->cls].slot_size;
        *base = offset - within + slot * *size;
        return LMS_OK;
    }
    return base_fail(LMS_ERR_INVALID, "offset 0x%zx is in no live allocation", offset);
}

int alloc_class_at(const alloc_t *a, size_t base)
{
    size_t ci = base >> a->chunk_shift;
    if (ci >= a->nchunks || a->chunks[ci].kind != CHUNK_SLAB)
        return -1;
    slab_t *s;
    size_t slot;
    return slab_slot(a, base, &s, &slot) ? (int)s->cls : -1;
}

lms_status_t alloc_mark_freed(alloc_t *a, size_t base, size_t *size)
{
    size_t ci = base >> a->chunk_shift;
    chunk_t *c = ci < a->nchunks ? &a->chunks[ci] : NULL;
    if (c != NULL && c->kind == CHUNK_LARGE && !c->freed && base % a->chunk_size == 0) {
        c->freed = true;
        *size = c->size;
    } else if (c != NULL && c->kind == CHUNK_SLAB) {
        slab_t *s;
        size_t slot;
        /* an exchange: a thread cache may free it at once (alloc_cache) */
        if (!slab_slot(a, base, &s, &slot) ||
            __atomic_exchange_n(&s->live[flag_pos(a, slot)], 0, __ATOMIC_RELAXED) != 1)
            goto invalid;
        *size = a->classes[s->cls].slot_size;
    } else {
        goto invalid;
    }
    a->usage.live_bytes -= *size;
    a->usage.live_count--;
    return LMS_OK;
invalid:;
    size_t b, n;
    if (alloc_find(a, base, &b, &n) == LMS_OK)
        return base_fail(LMS_ERR_INVALID,
                         "offset 0x%zx is inside the allocation at 0x%zx, not its start", base, b);
    return base_fail(LMS_ERR_INVALID,
                     "offset 0x%zx is not a live allocation (freed already, or never allocated)",
                     base);
}

void alloc_revive(alloc_t *a, size_t base, size_t request)
{
    chunk_t *c = &a->chunks[base >> a->chunk_shift];
    size_t size;
    if (c->kind == CHUNK_LARGE) {
        c->freed = false;
        size = c->size = alloc_usable_size(a, request);
    } else {
        slab_t *s;
        size_t slot;
        slab_slot(a, base, &s, &slot);
        set_flag(a, s->live, slot, 1);
        size = a->classes[s->cls].slot_size;
    }
    a->usage.live_bytes += size;
    a->usage.live_count++;
}

/* ---- lock-free (Note [Lock-free slots]) ---------------------------------------- */

size_t alloc_class_size(const alloc_t *a, int cls) { return a->classes[cls].slot_size; }

/* The small slot containing offset, from what is published (no lock): its
 * class, index and live flag, and where its slab starts; false when offset's
 * chunk is no slab or it lies past the slab's last slot. */
static inline __attribute__((always_inline)) bool
fast_slot(const alloc_t *a, size_t offset, int *cls, uint32_t *slot, uint8_t **flag, size_t *slab)
{
    size_t ci = offset >> a->chunk_shift;
    if (ci >= a->nchunks)
        return false;
    uintptr_t w = __atomic_load_n(&a->fast[ci], __ATOMIC_ACQUIRE);
    if (w == 0)
        return false;
    *cls = (int)(w & ((1u << CLASS_BITS) - 1));
    const size_class_t *k = &a->classes[*cls];
    size_t j = (w >> CLASS_BITS) & (MAX_SLAB_CHUNKS - 1);
    uint32_t within = (uint32_t)((j << a->chunk_shift) + (offset & (a->chunk_size - 1)));
    *slot = (uint32_t)(((__uint128_t)within * k->recip) >> 64); /* see recip */
    *flag = (uint8_t *)(w & ~(FLAGS_ALIGN - 1)) + flag_pos(a, *slot);
    *slab = offset - within;
    return *slot < k->slots;
}

alloc_flag_t *alloc_live_small(const alloc_t *a, size_t base, int ncls, int *cls)
{
    int c;
    uint32_t slot;
    uint8_t *f;
    size_t slab;
    if (!fast_slot(a, base, &c, &slot, &f, &slab) || c >= ncls ||
        slab + (size_t)slot * a->classes[c].slot_size != base ||
        !__atomic_load_n(f, __ATOMIC_RELAXED))
        return NULL;
    *cls = c;
    return f;
}

bool alloc_find_small(const alloc_t *a, size_t offset, size_t *base, size_t *size)
{
    int c;
    uint32_t slot;
    uint8_t *f;
    size_t slab;
    if (!fast_slot(a, offset, &c, &slot, &f, &slab) || !__atomic_load_n(f, __ATOMIC_RELAXED))
        return false;
    *size = a->classes[c].slot_size;
    *base = slab + (size_t)slot * *size;
    return true;
}

size_t alloc_cached_freed(alloc_t *a, size_t base)
{
    size_t size = a->classes[alloc_class_at(a, base)].slot_size;
    a->usage.live_bytes -= size;
    a->usage.live_count--;
    return size;
}

/* alloc_release; keep_empty keeps a class's only slab when it empties. */
static void release(alloc_t *a, size_t base, alloc_chunks_t *freed, bool keep_empty)
{
    size_t ci = base >> a->chunk_shift;
    chunk_t *c = &a->chunks[ci];
    *freed = (alloc_chunks_t){0, 0};
    if (c->kind == CHUNK_LARGE) {
        size_t n = c->link;
        *freed = (alloc_chunks_t){ci, n};
        a->usage.used_chunks -= n;
        give_chunks(a, ci, n);
        return;
    }
    slab_t *s;
    size_t slot;
    slab_slot(a, base, &s, &slot);
    slot_chunks(a, s, slot, -1, freed);
    clear_bit(s->used_bits, slot);
    if (slot / 64 < s->hint)
        s->hint = (uint32_t)(slot / 64);
    if (s->used-- == a->classes[s->cls].slots)
        partial_push(a, s);
    /* An empty slab goes, unless it is its class's only one: a class used by
     * a loop that allocates and frees one object would otherwise build and
     * tear down a slab each time. A kept one is its class's only slab, so it
     * heads the partial list, where alloc_trim_one finds it. Its chunks are
     * in use by nothing (freed said so): only their addresses stay taken. */
    bool only = a->classes[s->cls].nslabs == 1;
    if (s->used == 0 && !(only && keep_empty))
        slab_delete(a, s);
}

bool alloc_trim_one(alloc_t *a)
{
    for (int c = 0; c < a->nclasses; c++) {
        uint32_t i = a->classes[c].partial;
        if (i != NONE && slab_at(a, i)->used == 0) {
            slab_delete(a, slab_at(a, i));
            return true;
        }
    }
    return false;
}

void alloc_release(alloc_t *a, size_t base, alloc_chunks_t *freed)
{
    release(a, base, freed, true);
}

void alloc_unplace(alloc_t *a, size_t offset, alloc_chunks_t *freed)
{
    size_t size;
    alloc_mark_freed(a, offset, &size);
    release(a, offset, freed, false); /* an undo leaves no slab behind */
}

void alloc_usage(const alloc_t *a, alloc_usage_t *out)
{
    *out = a->usage;
    out->free_runs = a->nruns;
    out->largest_free_run = a->nruns ? (size_t)(a->runs[a->nruns - 1] >> 32) : 0;
}

bool alloc_large_threshold_ok(size_t chunk_size, size_t large_threshold)
{
    return large_threshold == 0 ||
           (large_threshold >= 4096 && chunk_size <= MAX_CHUNK &&
            large_threshold <= MAX_SLAB_CHUNKS * chunk_size);
}

lms_status_t alloc_create(const alloc_config_t *cfg, alloc_t **out)
{
    size_t cs = cfg->chunk_size;
    if (cs < 4096 || cs > MAX_CHUNK || (cs & (cs - 1)) != 0 || cfg->nchunks == 0 ||
        cfg->nchunks >= NONE || !alloc_large_threshold_ok(cs, cfg->large_threshold))
        return base_fail(LMS_ERR_INVALID,
                         "alloc: chunk size %zu must be a power of two, 4 KiB..128 MiB, the range "
                         "1..2^32 chunks (got %zu), the large threshold 4 KiB..%u chunks (got %zu)",
                         cs, cfg->nchunks, MAX_SLAB_CHUNKS, cfg->large_threshold);
    alloc_t *a = base_meta_calloc(1, sizeof *a);
    if (a == NULL)
        return base_fail(LMS_ERR_OUT_OF_MEMORY, "alloc: no host memory");
    a->chunk_size = cs;
    a->chunk_shift = (unsigned)__builtin_ctzll(cs);
    a->nchunks = cfg->nchunks;
    a->large_threshold = cfg->large_threshold ? cfg->large_threshold : ALLOC_DEFAULT_LARGE_CHUNKS * cs;
    a->flag_stride = cs / ALIGN >= 64 ? cs / ALIGN / 64 : 0;
    a->free_slab = NONE;
    a->chunks = base_meta_calloc(a->nchunks, sizeof *a->chunks);
    a->runs = base_meta_calloc(a->nchunks / 2 + 1, sizeof *a->runs); /* the most runs possible */
    a->slab_blocks = base_meta_calloc(a->nchunks / SLAB_BLOCK + 1, sizeof *a->slab_blocks);
    a->fast = base_meta_calloc(a->nchunks, sizeof *a->fast);
    if (a->chunks == NULL || a->runs == NULL || a->slab_blocks == NULL || a->fast == NULL) {
        alloc_destroy(a);
        return base_fail(LMS_ERR_OUT_OF_MEMORY, "alloc: no host memory for %zu chunks", cfg->nchunks);
    }
    build_classes(a);
    runs_insert(a, 0, a->nchunks);
    *out = a;
    return LMS_OK;
}

void alloc_destroy(alloc_t *a)
{
    if (a == NULL)
        return;
    for (size_t i = 0; i < a->nslabs; i++) {
        base_meta_free(slab_at(a, (uint32_t)i)->used_bits);
        base_meta_free(slab_at(a, (uint32_t)i)->live);
    }
    for (size_t b = 0; a->slab_blocks != NULL && b < a->nchunks / SLAB_BLOCK + 1; b++)
        base_meta_free(a->slab_blocks[b]);
    base_meta_free(a->slab_blocks);
    base_meta_free(a->fast);
    base_meta_free(a->runs);
    base_meta_free(a->chunks);
    base_meta_free(a);
}
