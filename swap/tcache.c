/*
 * swap/tcache.c — thread caches: lms_malloc and lms_free of small sizes
 * without the lock.
 *
 * Owns, per thread (tc_self): the cache, from host metadata, made on the
 * thread's first locked lms_malloc or lms_free and flushed when the thread
 * exits.
 *
 * Lock: the fast calls (tc_malloc, tc_free, tc_lookup: inline, in tcache.h)
 * take none and touch only the calling thread's cache and, through
 * alloc_cache/alloc_uncache, the live flags of slots it owns (Note
 * [Lock-free slots] in alloc.c). The others assume swap_lock.
 *
 * Note [Thread caches]
 * A thread's small frees on a stream go to its cache rather than the stream's
 * pending list, and its small mallocs on that stream take from the cache
 * first, the lowest-addressed entry of the class: the reuse Note
 * [Stream-ordered free] in streams.c allows at once (work queued on the
 * stream after the free comes after it), here without the lock or a device
 * call: a malloc writes one byte, a free exchanges one (so that of two
 * threads freeing the same pointer at once, one fails, as a second free
 * does). Lowest, not
 * last freed: a step that frees in another order than it allocates then
 * gets the same addresses each step (Note [Placement repeats] in streams.c);
 * last freed first gave them back reversed, every other step the same. So
 * a bin is kept in descending order of address (an insertion among at most
 * TC_BIN entries, on the free), and a full one flushes its higher half. The
 * cache must also hold the lowest of its class's free entries, or a malloc
 * takes a higher one from it before lower ones it sent on: a bin remembers
 * the lowest offset it flushed (floor), a free above it goes on to the
 * stream too, and the floor is forgotten when a malloc finds the bin empty
 * (it then gets the lowest of what went on: reuse and placement both take
 * the lowest). Tested with a class's 40 allocations freed in a shuffled
 * order (tests/swap/test_lms.c).
 *  - A cache serves one stream, the one it is keyed to. A call on another
 *    stream takes the locked path, which flushes the cache and keys it to the
 *    new stream. Flushed entries become pending frees of their stream, as if
 *    lms_free had just queued them (swap_free_cached).
 *  - A cached slot is no allocation (alloc.h): lms_allocation_of and a second
 *    lms_free of it fail, on any thread. It stays taken, so its chunk stays
 *    used, and lms's counts take it as allocated until it is flushed.
 *  - A cache holds at most cfg.thread_cache bytes and TC_BIN entries of a
 *    class; classes of more than an eighth of that are not cached. A free that
 *    finds no room takes the locked path and flushes the higher half of its
 *    class's entries, or the whole cache when the bytes are over.
 *  - A malloc that finds no room flushes the calling thread's cache before
 *    it gives up, and asks every other cache to flush at its thread's next
 *    call (an epoch). Until then other threads' caches stay theirs: each
 *    holds at most thread_cache bytes, but the slabs those slots keep in use
 *    can be whole chunks.
 *  - `swap_epoch` changes when lms is initialized or shut down and when a
 *    stream is destroyed: a cache keyed under another epoch takes the locked
 *    path, where tc_key flushes it (its stream destroyed since: released at
 *    once, since the destroy waited for the stream's work) or, when lms was
 *    shut down since, forgets it (the memory is gone).
 *  - Placement stays deterministic: the cache is a function of the thread's
 *    own calls.
 *  - A thread's exit flushes its cache (thread_exit) without device work: a
 *    fence its entries call for is recorded by a later locked call.
 */
#include <string.h>

#include "base/lockorder.h"
#include "swap/tcache.h"

#define TC_MIN_FIT 8  /* a class is cached when this many slots fit in the limit */

uint64_t swap_epoch = 1;
size_t tc_small_max; /* atomic: the largest request any cache serves (0: none yet) */
size_t tc_pin_records;
__thread tcache_t *tc_self;
static pthread_key_t exit_key;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;
static bool exit_key_ok;

/* ---- locked -------------------------------------------------------------------- */

/* Flushes the first n entries of a bin (the highest-addressed); false, with
 * what could not go left in, when the host has no memory for the stream's
 * pending list. */
static bool flush_bin(tcache_t *t, tc_bin_t *b, uint32_t n)
{
    uint32_t done = 0;
    while (done < n &&
           swap_free_cached(t->stream, b->e[done].off, b->e[done].live, !t->exiting) == LMS_OK)
        done++;
    if (done > 0 && b->e[done - 1].off < b->floor)
        b->floor = b->e[done - 1].off; /* the lowest of those sent on */
    memmove(b->e, b->e + done, (b->n - done) * sizeof b->e[0]);
    b->n -= done;
    t->bytes -= (size_t)done * b->slot;
    return done == n;
}

static bool flush_all(tcache_t *t)
{
    bool ok = true;
    if (t->epoch == 0)
        return true;
    if (S == NULL || t->generation != S->generation) { /* lms was shut down since */
        for (int c = 0; c < t->ncls; c++)
            t->bins[c].n = 0;
        t->bytes = 0;
        t->epoch = 0;
        return true;
    }
    for (int c = 0; c < t->ncls; c++)
        ok = flush_bin(t, &t->bins[c], t->bins[c].n) && ok;
    return ok;
}

/* A thread-exit destructor: the driver's own state for the thread may be
 * gone, so the entries are handed to their stream without device work (as
 * residency's window_exit starts none); the fence they may call for comes
 * with a later locked call. */
static void thread_exit(void *p)
{
    tcache_t *t = p;
    t->exiting = true;
    lo_lock(&swap_lock, LO_SWAP);
    (void)flush_all(t); /* what cannot go (no host memory) stays taken */
    lo_unlock(&swap_lock, LO_SWAP);
    tc_self = NULL;
    base_meta_free(t);
}

static void make_exit_key(void) { exit_key_ok = pthread_key_create(&exit_key, thread_exit) == 0; }

/* The calling thread's cache, with bins for ncls classes; NULL when the host
 * has no memory (lms then works without one). */
static tcache_t *cache_for(int ncls)
{
    tcache_t *t = tc_self;
    if (t != NULL && t->capcls >= ncls)
        return t;
    pthread_once(&exit_once, make_exit_key);
    if (!exit_key_ok)
        return NULL;
    /* on cache lines of its own: other threads' caches are written as often */
    tcache_t *n = base_meta_calloc_aligned(sizeof *n + (size_t)ncls * sizeof n->bins[0], 64);
    if (n == NULL || pthread_setspecific(exit_key, n) != 0) { /* unflushed at exit: none */
        base_meta_free(n);
        return NULL;
    }
    if (t != NULL) { /* empty: the caller flushed it */
        memcpy(n, t, sizeof *t);
        base_meta_free(t);
    }
    n->capcls = ncls;
    n->window = resid_window_count();
    tc_self = n;
    return n;
}

void tc_key(lms_stream_t stream)
{
    tcache_t *t = tc_self;
    if (keyed_here(t, stream))
        return;
    if (t != NULL && !flush_all(t))
        return; /* still keyed to its old stream, with what could not be flushed */
    size_t limit = S->cfg.thread_cache;
    int ncls = 0;
    while (ncls < ALLOC_MAX_CLASSES && alloc_class_size(S->alloc, ncls) * TC_MIN_FIT <= limit &&
           alloc_class_of(S->alloc, alloc_class_size(S->alloc, ncls)) == ncls) /* small */
        ncls++;
    if (ncls == 0 || (t = cache_for(ncls)) == NULL) {
        if (tc_self != NULL) /* flushed above: no cache until a later key works */
            tc_self->epoch = 0;
        return;
    }
    t->epoch = __atomic_load_n(&swap_epoch, __ATOMIC_RELAXED);
    t->generation = S->generation;
    t->stream = stream;
    t->base = S->base;
    t->va_size = S->va_size;
    t->alloc = S->alloc;
    t->limit = limit;
    t->ncls = ncls;
    for (int c = 0; c < ncls; c++) {
        t->bins[c].slot = (uint32_t)alloc_class_size(S->alloc, c);
        t->bins[c].floor = SIZE_MAX;
    }
    if (t->bins[ncls - 1].slot > __atomic_load_n(&tc_small_max, __ATOMIC_RELAXED))
        __atomic_store_n(&tc_small_max, t->bins[ncls - 1].slot, __ATOMIC_RELAXED);
}

bool tc_free_locked(void *ptr, lms_stream_t stream)
{
    /* only a live small allocation's free touches the cache: a bad one
     * changes nothing */
    size_t off;
    int cls;
    if (!offset_in(S->base, S->va_size, ptr, &off) ||
        alloc_live_small(S->alloc, off, ALLOC_MAX_CLASSES, &cls) == NULL)
        return false;
    tc_key(stream);
    tcache_t *t = tc_self;
    if (!keyed_here(t, stream) || cls >= t->ncls)
        return false;
    tc_bin_t *b = &t->bins[cls];
    if (off > b->floor)
        return false; /* above what was sent on: it goes on too, the caller queues it */
    if (pins_at(&S->pins, S->alloc, off))
        return false; /* queued: its pins go when its memory is released */
    if (b->n == TC_BIN)
        (void)flush_bin(t, b, TC_BIN / 2);
    if (t->bytes + b->slot > t->limit)
        (void)flush_all(t);
    return tc_free_unpinned(ptr, stream); /* false if a flush failed: the caller queues it */
}

void tc_ran_dry(size_t size)
{
    tcache_t *t = tc_self;
    int cls = alloc_class_index(size);
    if (t != NULL && t->epoch != 0 && cls >= 0 && cls < t->ncls && t->bins[cls].n == 0)
        t->bins[cls].floor = SIZE_MAX; /* what was sent on is taken from the lowest now */
}

void tc_flush(void)
{
    if (tc_self != NULL)
        (void)flush_all(tc_self);
}

void tc_invalidate(void)
{
    __atomic_add_fetch(&swap_epoch, 1, __ATOMIC_RELEASE);
    if (S == NULL && tc_self != NULL) /* shut down: nothing to flush to */
        (void)flush_all(tc_self);
}
