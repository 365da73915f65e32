/*
 * swap/lms.c — include/lms.h: the device, the reserved range, the pool of
 * physical blocks, stream-ordered frees. See swap.h.
 *
 * Owns (one state for the process, S, NULL while lms is not initialized):
 *   the device and the VA reservation; the placement (alloc/);
 *   block[]   per chunk, the block that backs it (0: none). A chunk that
 *             holds an allocation is always backed. A free chunk that is
 *             backed is "cached": on the cached list, its block reusable by a
 *             later allocation there at no cost, or taken for another chunk
 *             when the pool is empty;
 *   pool[]    blocks created and not mapped; at most budget blocks exist;
 *   streams   lms streams, each with its pending frees; see Note
 *             [Stream-ordered free]; an event pool for their fences.
 *
 * Lock: `lock` guards all of it, and init and shutdown. Public functions take
 * it; static ones assume it. It is never held while waiting for a stream
 * (lms_stream_synchronize drops it first); it is held across map and unmap,
 * which do not wait for streams, and no host function takes it.
 *
 * Note [Stream-ordered free]
 * lms_free(p, S) does not make p's space free at once: work queued on S
 * before the free may still use it. The allocation becomes "freed" (alloc.h)
 * and goes on S's pending list, tagged with S's epoch.
 *  - An allocation on S may reuse a pending entry of S of the same size class
 *    (or chunk count) at once: its work is queued after the free. This is the
 *    fast path of a training loop: no event, no device call.
 *  - For other streams, the space must wait until the work queued on S before
 *    the free has finished. lms records one event per batch of frees, not one
 *    per free (a "fence", covering every entry of the epochs before it), when
 *    S's unfenced frees pass a threshold or when an allocation elsewhere runs
 *    short. When a fence's event has completed, the entries it covers are
 *    released to alloc/ and become everyone's.
 *  - While lms has one stream only, nobody can race it: a free releases at
 *    once. A stream created later first waits, on the device, for an event
 *    recorded on every stream that exists, so none of its work can touch
 *    memory freed before it existed while that work still runs.
 *  - An allocation that finds no room fences every stream, releases what has
 *    completed, and as a last resort waits for the fences' events (never a
 *    device-wide synchronize, and with the lock dropped) before it reports
 *    out of memory. So an allocation may wait for work queued before a free
 *    on another stream; a program that holds such work back until the
 *    allocation returns deadlocks, as it would with PyTorch's allocator.
 */
#include <numa.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc/alloc.h"
#include "base/base.h"
#include "swap/swap.h"

#define MAX_STREAMS 0xffffu
#define LARGE_REUSE_SCAN 64 /* pending large entries of a stream looked at for reuse */

typedef struct pending {
    size_t offset; /* of the freed allocation */
    size_t size;   /* its usable size */
    uint64_t epoch;
} pending_t;

/* A ring of pending entries, oldest at the bottom: the stream reuses from the
 * top, fences release from the bottom. */
typedef struct deque {
    pending_t *items;
    size_t head, len, cap; /* cap is 0 or a power of two */
} deque_t;

typedef struct fence {
    dev_event_t *event;
    uint64_t epoch; /* entries of this epoch and before are covered */
} fence_t;

typedef struct stream {
    dev_stream_t *dev;
    deque_t small[ALLOC_MAX_CLASSES];
    deque_t large;
    uint64_t epoch;        /* of frees not yet fenced */
    size_t unfenced_bytes; /* freed in the current epoch */
    fence_t *fences;       /* oldest first */
    size_t nfences, capfences;
} stream_t;

typedef struct state {
    swap_config_t cfg;
    dev_device_t *dev;
    dev_addr_t base;
    size_t va_size, chunk, nchunks;
    size_t budget;          /* blocks */
    size_t host_limit;      /* bytes */
    alloc_t *alloc;
    dev_block_t *block;     /* per chunk */
    uint32_t *cached;       /* the cached chunks */
    uint32_t *cached_pos;   /* per chunk: its index in cached[] + 1, 0 = not cached */
    size_t ncached;
    dev_block_t *pool;
    size_t npool, created;
    stream_t *streams[MAX_STREAMS]; /* [0]: the default stream; NULL: free slot */
    uint32_t generation[MAX_STREAMS]; /* of the handle of each slot */
    size_t nstreams;      /* slots in use or used before */
    size_t live_streams;  /* streams that exist, the default one included */
    dev_event_t **events; /* unused events for fences */
    size_t nevents, capevents;
    size_t waiters;           /* threads waiting, lock dropped, on fence events */
    dev_event_t **retired;    /* collected while waiters > 0: not reused until 0 */
    size_t nretired, capretired;
    uint64_t released_at_once; /* frees released at once (one-stream rule), ever */
    uint64_t released_synced;  /* of those, how many the default stream has finished */
    dev_event_t *sync_event;   /* recorded on the default stream for that; never pooled */
    bool *mapped_here;         /* back_chunks' scratch: chunks it mapped */
    size_t capmapped;
    size_t flush_bytes;   /* unfenced bytes of a stream that trigger a fence */
    bool warned_bad_free;
} state_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static state_t *S;

/* ---- small helpers -------------------------------------------------------------- */

static bool grow(void **array, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return true;
    size_t cap2 = *cap ? *cap * 2 : 16;
    while (cap2 < need)
        cap2 *= 2;
    void *p = base_meta_realloc(*array, cap2 * elem);
    if (p == NULL)
        return false;
    *array = p;
    *cap = cap2;
    return true;
}

static bool dq_push(deque_t *d, pending_t p)
{
    if (d->len == d->cap) {
        size_t cap = d->cap ? 2 * d->cap : 16;
        pending_t *items = base_meta_alloc(cap * sizeof *items);
        if (items == NULL)
            return false;
        for (size_t i = 0; i < d->len; i++)
            items[i] = d->items[(d->head + i) & (d->cap - 1)];
        base_meta_free(d->items);
        *d = (deque_t){items, 0, d->len, cap};
    }
    d->items[(d->head + d->len++) & (d->cap - 1)] = p;
    return true;
}

static pending_t *dq_at(deque_t *d, size_t i) { return &d->items[(d->head + i) & (d->cap - 1)]; }

static void dq_remove(deque_t *d, size_t i) /* keeps the order */
{
    for (; i + 1 < d->len; i++)
        *dq_at(d, i) = *dq_at(d, i + 1);
    d->len--;
}

static char *fmt_size(uint64_t bytes, char *buf) { return base_format_size(bytes, buf, 32); }

/* ---- the block pool and the cached chunks ---------------------------------------- */

static dev_addr_t chunk_addr(size_t c) { return S->base + (dev_addr_t)c * S->chunk; }

static void cached_add(size_t c)
{
    S->cached[S->ncached++] = (uint32_t)c;
    S->cached_pos[c] = (uint32_t)S->ncached;
}

static void cached_remove(size_t c)
{
    size_t i = S->cached_pos[c] - 1;
    uint32_t last = S->cached[--S->ncached];
    S->cached[i] = last;
    S->cached_pos[last] = (uint32_t)i + 1;
    S->cached_pos[c] = 0;
}

/* A block for a chunk: from the pool, newly created within the budget, or
 * taken from a cached chunk (which is unmapped for it). back_chunks has made
 * sure no queued work can still touch a cached chunk's memory. */
static lms_status_t take_block(dev_block_t *out)
{
    if (S->npool > 0) {
        *out = S->pool[--S->npool];
        return LMS_OK;
    }
    if (S->created < S->budget) {
        lms_status_t st = dev_block_create(S->dev, out);
        if (st == LMS_OK)
            S->created++;
        return st;
    }
    size_t victim = S->cached[0];
    lms_status_t st = dev_unmap(S->dev, chunk_addr(victim), S->chunk);
    if (st != LMS_OK)
        return st;
    cached_remove(victim);
    *out = S->block[victim];
    S->block[victim] = 0;
    return LMS_OK;
}

/* Unmaps chunks [first, first + n) that this call mapped, giving their blocks
 * back to the pool (the undo of a failed back_chunks). */
static void unback(size_t first, size_t n, const bool *mapped_here)
{
    for (size_t i = 0; i < n; i++)
        if (mapped_here[i] && dev_unmap(S->dev, chunk_addr(first + i), S->chunk) == LMS_OK) {
            S->pool[S->npool++] = S->block[first + i];
            S->block[first + i] = 0;
        }
}

/* Makes every chunk of [first, first + n) backed and accessible, all or
 * nothing. LMS_ERR_OUT_OF_MEMORY, changing nothing, when the budget cannot
 * back them. */
static lms_status_t back_chunks(size_t first, size_t n)
{
    size_t need = 0, cached_inside = 0;
    for (size_t c = first; c < first + n; c++) {
        need += S->block[c] == 0;
        cached_inside += S->block[c] != 0;
    }
    size_t spare = S->npool + (S->budget - S->created);
    if (need > spare + (S->ncached - cached_inside))
        return LMS_ERR_OUT_OF_MEMORY; /* the caller writes the message */
    /* Taking a cached chunk's block unmaps it at once, and unmap does not wait
     * for queued work: memory released at once under the one-stream rule may
     * still be in use by the default stream (see Note [Stream-ordered free]). */
    if (need > spare && S->released_synced < S->released_at_once)
        return LMS_NOT_READY; /* the caller syncs the default stream and retries */
    if (need == 0) {
        for (size_t c = first; c < first + n; c++)
            cached_remove(c);
        return LMS_OK;
    }
    /* which chunks this call maps, for the undo; grown only for a longer run
     * than any before, so the allocation path does not allocate */
    if (!grow((void **)&S->mapped_here, &S->capmapped, n, sizeof *S->mapped_here))
        return base_fail(LMS_ERR_OUT_OF_MEMORY, "lms_malloc: no host memory");
    bool *mapped_here = S->mapped_here;
    memset(mapped_here, 0, n * sizeof *mapped_here);
    for (size_t c = first; c < first + n; c++) /* not victims for take_block */
        if (S->block[c] != 0)
            cached_remove(c);
    lms_status_t st = LMS_OK;
    for (size_t c = first; c < first + n && st == LMS_OK; c++) {
        if (S->block[c] != 0)
            continue;
        dev_block_t b;
        st = take_block(&b);
        if (st == LMS_OK && (st = dev_map(S->dev, chunk_addr(c), b)) != LMS_OK)
            S->pool[S->npool++] = b;
        if (st == LMS_OK) {
            S->block[c] = b;
            mapped_here[c - first] = true;
        }
    }
    /* the whole run is mapped now: one set_access for all of it (repeating
     * it on chunks that had access already is harmless) */
    if (st == LMS_OK)
        st = dev_set_access(S->dev, chunk_addr(first), n * S->chunk);
    if (st != LMS_OK) {
        unback(first, n, mapped_here);
        for (size_t c = first; c < first + n; c++)
            if (S->block[c] != 0)
                cached_add(c);
    }
    return st;
}

/* alloc/ freed chunks [first, first + n): they stay backed, as cached.
 * Invariant: a cached chunk is mapped and free in alloc/. */
static void chunks_freed(alloc_chunks_t freed)
{
    for (size_t c = freed.first; c < freed.first + freed.n; c++)
        cached_add(c);
}

/* ---- streams and fences -------------------------------------------------------- */

static stream_t *find_stream(lms_stream_t handle)
{
    uintptr_t h = (uintptr_t)handle;
    if (h == 0)
        return S->streams[0];
    size_t i = (h & 0xffff) - 1;
    if ((h >> 16 & 0xffff) != 0 || i >= S->nstreams || S->streams[i] == NULL || i == 0 || S->generation[i] != h >> 32)
        return NULL;
    return S->streams[i];
}

static lms_status_t bad_stream(const char *op, lms_stream_t s)
{
    return base_fail(LMS_ERR_INVALID, "%s: %p is not a live lms stream", op, (void *)s);
}

/* Records a fence on s covering its frees so far, if it has unfenced ones. */
static lms_status_t fence(stream_t *s)
{
    if (s->unfenced_bytes == 0)
        return LMS_OK;
    /* room first, so that an event never has nowhere to go back to */
    if (!grow((void **)&s->fences, &s->capfences, s->nfences + 1, sizeof *s->fences) ||
        !grow((void **)&S->events, &S->capevents, S->nevents + 1, sizeof *S->events))
        return base_fail(LMS_ERR_OUT_OF_MEMORY, "no host memory for a fence");
    dev_event_t *e;
    lms_status_t st = LMS_OK;
    if (S->nevents > 0)
        e = S->events[--S->nevents];
    else
        st = dev_event_create(S->dev, &e);
    if (st == LMS_OK && (st = dev_event_record(S->dev, e, s->dev)) != LMS_OK)
        S->events[S->nevents++] = e;
    if (st != LMS_OK)
        return st;
    s->fences[s->nfences++] = (fence_t){e, s->epoch};
    s->epoch++;
    s->unfenced_bytes = 0;
    return LMS_OK;
}

/* Puts a collected fence's event back for reuse. While a thread waits on
 * fence events with the lock dropped, none may be re-recorded (it would wait
 * for unrelated work) or destroyed: they wait on the retired list, or, if even
 * that cannot grow, stay unused until shutdown closes the device. */
static void recycle_event(dev_event_t *e)
{
    if (S->waiters > 0) {
        if (grow((void **)&S->retired, &S->capretired, S->nretired + 1, sizeof *S->retired))
            S->retired[S->nretired++] = e;
    } else if (grow((void **)&S->events, &S->capevents, S->nevents + 1, sizeof *S->events)) {
        S->events[S->nevents++] = e;
    } else {
        dev_event_destroy(S->dev, e);
    }
}

/* Waits for e with the lock dropped (the caller holds it, and must look up
 * whatever it held pointers to again afterwards). */
static void wait_unlocked(dev_event_t *e)
{
    dev_device_t *dev = S->dev;
    S->waiters++;
    pthread_mutex_unlock(&lock);
    (void)dev_event_synchronize(dev, e); /* an error shows again in the next query */
    pthread_mutex_lock(&lock);
    if (--S->waiters == 0)
        while (S->nretired > 0)
            recycle_event(S->retired[--S->nretired]);
}

/* Waits until the default stream has finished what was queued when the
 * frees released at once so far were made (see back_chunks). */
static lms_status_t sync_released(void)
{
    uint64_t upto = S->released_at_once;
    lms_status_t st = dev_event_record(S->dev, S->sync_event, S->streams[0]->dev);
    if (st != LMS_OK)
        return st;
    wait_unlocked(S->sync_event);
    if (S->released_synced < upto)
        S->released_synced = upto;
    return LMS_OK;
}

static void release_entry(pending_t *p)
{
    alloc_chunks_t freed;
    alloc_release(S->alloc, p->offset, &freed);
    chunks_freed(freed);
}

/* Releases the entries of s covered by fences whose events have completed
 * (waiting for them if wait). */
static lms_status_t collect(stream_t *s, bool wait)
{
    while (s->nfences > 0) {
        fence_t f = s->fences[0];
        lms_status_t st = wait ? dev_event_synchronize(S->dev, f.event)
                               : dev_event_query(S->dev, f.event);
        if (st == LMS_NOT_READY)
            return LMS_OK;
        if (st != LMS_OK)
            return st;
        for (int k = 0; k <= ALLOC_MAX_CLASSES; k++) {
            deque_t *d = k < ALLOC_MAX_CLASSES ? &s->small[k] : &s->large;
            while (d->len > 0 && dq_at(d, 0)->epoch <= f.epoch) {
                release_entry(dq_at(d, 0));
                d->head = (d->head + 1) & (d->cap - 1);
                d->len--;
            }
        }
        memmove(&s->fences[0], &s->fences[1], --s->nfences * sizeof *s->fences);
        recycle_event(f.event);
    }
    return LMS_OK;
}

/* Fences every stream if `fence_first`, then collects every stream. */
static lms_status_t collect_all(bool fence_first, bool wait)
{
    lms_status_t st = LMS_OK;
    for (size_t i = 0; i < S->nstreams && st == LMS_OK; i++) {
        if (S->streams[i] == NULL)
            continue;
        if (fence_first)
            st = fence(S->streams[i]);
        if (st == LMS_OK)
            st = collect(S->streams[i], wait);
    }
    return st;
}

/* Waits, with the lock dropped, for the newest fence of every stream (a
 * stream's fences complete in order). The events stay out of reuse meanwhile
 * (recycle_event). Errors are left for the collect that follows. */
static void wait_for_fences(void)
{
    dev_event_t *newest[64];
    size_t n = 0;
    for (size_t i = 0; i < S->nstreams && n < 64; i++)
        if (S->streams[i] != NULL && S->streams[i]->nfences > 0)
            newest[n++] = S->streams[i]->fences[S->streams[i]->nfences - 1].event;
    for (size_t i = 0; i < n; i++)
        wait_unlocked(newest[i]);
}

/* A pending entry of s that an allocation of size may take over; the
 * pointer is valid until the deque changes. */
static deque_t *reusable(stream_t *s, size_t size, size_t *index)
{
    int cls = alloc_class_of(S->alloc, size);
    if (cls >= 0) {
        deque_t *d = &s->small[cls];
        *index = d->len - 1;
        return d->len > 0 ? d : NULL;
    }
    size_t chunks = (size + S->chunk - 1) / S->chunk;
    deque_t *d = &s->large;
    for (size_t k = 0; k < d->len && k < LARGE_REUSE_SCAN; k++) {
        size_t i = d->len - 1 - k;
        if ((dq_at(d, i)->size + S->chunk - 1) / S->chunk == chunks) {
            *index = i;
            return d;
        }
    }
    return NULL;
}

/* ---- init and shutdown ---------------------------------------------------------- */

void swap_config_from_options(swap_config_t *cfg)
{
    const base_options_t *o = base_options();
    *cfg = (swap_config_t){
        .device_limit = o->device_limit,
        .host_limit = o->host_limit,
        .va_reserve = o->va_reserve,
        .large_threshold = o->large_threshold,
        .preallocate = o->preallocate != 0,
        .reclaim_low = o->reclaim_low,
        .reclaim_high = o->reclaim_high,
        .stats_at_exit = o->stats != 0,
    };
    dev_config_from_options(&cfg->device);
}

static size_t default_host_limit(int node)
{
    long long node_bytes = node >= 0 && numa_available() >= 0 ? numa_node_size64(node, NULL) : -1;
    if (node_bytes <= 0)
        node_bytes = (long long)sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGESIZE);
    return (size_t)node_bytes / 2;
}

/* Frees a stream's host state (its device stream is the caller's). NULL ok. */
static void free_stream(stream_t *s)
{
    if (s == NULL)
        return;
    for (int k = 0; k < ALLOC_MAX_CLASSES; k++)
        base_meta_free(s->small[k].items);
    base_meta_free(s->large.items);
    base_meta_free(s->fences);
    base_meta_free(s);
}

static void destroy_state(void)
{
    if (S == NULL)
        return;
    dev_close(S->dev); /* drains the streams, unmaps, releases every block */
    for (size_t i = 0; i < S->nstreams; i++)
        free_stream(S->streams[i]);
    base_meta_free(S->events);
    base_meta_free(S->retired);
    base_meta_free(S->mapped_here);
    base_meta_free(S->pool);
    base_meta_free(S->cached_pos);
    base_meta_free(S->cached);
    base_meta_free(S->block);
    alloc_destroy(S->alloc);
    base_meta_free(S);
    S = NULL;
}

static lms_status_t new_stream(stream_t **out)
{
    stream_t *s = base_meta_calloc(1, sizeof *s);
    if (s == NULL)
        return base_fail(LMS_ERR_OUT_OF_MEMORY, "lms_stream_create: no host memory");
    lms_status_t st = dev_stream_create(S->dev, DEV_PRIORITY_NORMAL, &s->dev);
    if (st != LMS_OK) {
        base_meta_free(s);
        return st;
    }
    *out = s;
    return LMS_OK;
}

static lms_status_t init_locked(const swap_config_t *cfg)
{
    char a[32], b[32];
    S = base_meta_calloc(1, sizeof *S);
    if (S == NULL)
        return base_fail(LMS_ERR_OUT_OF_MEMORY, "lms_init: no host memory");
    S->cfg = *cfg;
    lms_status_t st = dev_open(&cfg->device, &S->dev);
    if (st != LMS_OK) {
        base_meta_free(S);
        S = NULL;
        return st;
    }
    size_t chunk = S->chunk = S->dev->info.granularity, free_b, total;
    if ((st = dev_mem_info(S->dev, &free_b, &total)) != LMS_OK)
        goto fail;
    size_t limit = cfg->device_limit;
    if (limit == 0)
        limit = free_b - (free_b / 8 < 512 * BASE_MiB ? free_b / 8 : 512 * BASE_MiB);
    if (limit > free_b) {
        base_log(BASE_LOG_WARN, "LMS_DEVICE_LIMIT=%s is more than the device's free memory (%s); using %s",
                 fmt_size(limit, a), fmt_size(free_b, b), b);
        limit = free_b;
    }
    S->budget = limit / chunk;
    if (S->budget == 0) {
        st = base_fail(LMS_ERR_INVALID, "lms_init: the device limit %s is less than one chunk (%s)",
                       fmt_size(limit, a), fmt_size(chunk, b));
        goto fail;
    }
    S->host_limit = cfg->host_limit ? cfg->host_limit : default_host_limit(S->dev->info.host_numa_node);
    size_t va = cfg->va_reserve ? cfg->va_reserve : 4 * (S->budget * chunk + S->host_limit);
    va = (va + chunk - 1) / chunk * chunk;
    if (va < S->budget * chunk)
        va = S->budget * chunk;
    if (va / chunk >= UINT32_MAX)
        va = (size_t)(UINT32_MAX - 1) * chunk;
    S->nchunks = va / chunk;
    S->va_size = va;
    if ((st = dev_va_reserve(S->dev, va, &S->base)) != LMS_OK)
        goto fail;
    alloc_config_t ac = {.chunk_size = chunk, .nchunks = S->nchunks,
                         .large_threshold = cfg->large_threshold};
    if ((st = alloc_create(&ac, &S->alloc)) != LMS_OK)
        goto fail;
    S->block = base_meta_calloc(S->nchunks, sizeof *S->block);
    S->cached = base_meta_calloc(S->nchunks, sizeof *S->cached);
    S->cached_pos = base_meta_calloc(S->nchunks, sizeof *S->cached_pos);
    S->pool = base_meta_calloc(S->budget, sizeof *S->pool);
    if (!S->block || !S->cached || !S->cached_pos || !S->pool) {
        st = base_fail(LMS_ERR_OUT_OF_MEMORY, "lms_init: no host memory for %zu chunks", S->nchunks);
        goto fail;
    }
    S->flush_bytes = S->budget * chunk / 16 > 64 * BASE_MiB ? 64 * BASE_MiB : S->budget * chunk / 16;
    if ((st = new_stream(&S->streams[0])) != LMS_OK)
        goto fail;
    S->nstreams = S->live_streams = 1;
    if ((st = dev_event_create(S->dev, &S->sync_event)) != LMS_OK)
        goto fail;
    for (; cfg->preallocate && S->created < S->budget; S->created++)
        if ((st = dev_block_create(S->dev, &S->pool[S->npool++])) != LMS_OK) {
            S->npool--;
            goto fail;
        }
    base_log(BASE_LOG_INFO, "%s device %s: limit %s, %s reserved at 0x%llx", S->dev->info.backend,
             S->dev->info.name, fmt_size(S->budget * chunk, a), fmt_size(va, b),
             (unsigned long long)S->base);
    return LMS_OK;
fail:
    destroy_state();
    return st;
}

/* Initializes from the options if needed. Caller holds the lock. */
static lms_status_t ensure(void)
{
    if (S != NULL)
        return LMS_OK;
    swap_config_t cfg;
    swap_config_from_options(&cfg);
    return init_locked(&cfg);
}

lms_status_t lms_init(void)
{
    pthread_mutex_lock(&lock);
    lms_status_t st = ensure();
    pthread_mutex_unlock(&lock);
    return st;
}

lms_status_t swap_init(const swap_config_t *cfg)
{
    if (cfg == NULL)
        return base_fail(LMS_ERR_INVALID, "swap_init: NULL config");
    pthread_mutex_lock(&lock);
    lms_status_t st = S != NULL ? base_fail(LMS_ERR_INVALID, "swap_init: lms is initialized already")
                                : init_locked(cfg);
    pthread_mutex_unlock(&lock);
    return st;
}

lms_status_t lms_shutdown(void)
{
    pthread_mutex_lock(&lock);
    destroy_state();
    pthread_mutex_unlock(&lock);
    return LMS_OK;
}

/* ---- allocation -------------------------------------------------------------- */

static lms_status_t out_of_memory(size_t size, const char *why)
{
    alloc_usage_t u;
    alloc_usage(S->alloc, &u);
    size_t limit = S->budget * S->chunk, used = u.used_chunks * S->chunk;
    char req[32], live[32], fr[32], lim[32];
    return base_fail(LMS_ERR_OUT_OF_MEMORY,
                     "lms_malloc(%s): out of device memory: %s allocated in %zu allocations, %s "
                     "free of the %s limit%s%s. Raise LMS_DEVICE_LIMIT, or free memory",
                     fmt_size(size, req), fmt_size(u.live_bytes, live), u.live_count,
                     fmt_size(limit > used ? limit - used : 0, fr), fmt_size(limit, lim),
                     why ? ": " : "", why ? why : "");
}

/* Places size bytes and backs them; on failure nothing changed. */
static lms_status_t place(size_t size, size_t *offset)
{
    alloc_chunks_t used;
    lms_status_t st = alloc_place(S->alloc, size, offset, &used);
    if (st != LMS_OK)
        return st;
    st = back_chunks(used.first, used.n);
    if (st != LMS_OK) { /* back_chunks left the chunks as they were, cached or not */
        alloc_chunks_t freed;
        alloc_unplace(S->alloc, *offset, &freed);
    }
    return st;
}

lms_status_t lms_malloc(void **ptr, size_t size, lms_stream_t stream)
{
    if (ptr == NULL)
        return base_fail(LMS_ERR_INVALID, "lms_malloc: ptr is NULL");
    *ptr = NULL;
    pthread_mutex_lock(&lock);
    lms_status_t st = ensure();
    stream_t *s = st == LMS_OK ? find_stream(stream) : NULL;
    if (st == LMS_OK && s == NULL)
        st = bad_stream("lms_malloc", stream);
    if (st != LMS_OK || size == 0)
        goto out;
    size_t offset = 0, index = 0;
    deque_t *d = reusable(s, size, &index);
    if (d != NULL) { /* the fast path: this stream's own freed space */
        offset = dq_at(d, index)->offset;
        dq_remove(d, index);
        alloc_revive(S->alloc, offset, size);
        *ptr = (void *)(uintptr_t)(S->base + offset);
        goto out;
    }
    /* Space released by completed fences first; then fence every stream and
     * take what has completed; last, wait for the fences (without the lock,
     * so other threads go on meanwhile). */
    for (int attempt = 0, syncs = 0; attempt < 3;) {
        if (attempt == 2)
            wait_for_fences();
        lms_status_t collected = collect_all(attempt > 0, false);
        for (alloc_chunks_t freed; attempt > 0 && alloc_trim_one(S->alloc, &freed);)
            chunks_freed(freed); /* kept empty slabs */
        st = place(size, &offset);
        if (st == LMS_NOT_READY && syncs++ < 100) { /* see back_chunks */
            if ((st = sync_released()) != LMS_OK)
                break;
            continue;
        }
        if (st == LMS_ERR_OUT_OF_MEMORY && collected != LMS_OK)
            st = collected; /* the reason more could not be freed */
        if (st != LMS_ERR_OUT_OF_MEMORY)
            break;
        attempt++;
    }
    if (st == LMS_NOT_READY) /* the default stream never caught up: give up */
        st = base_fail(LMS_ERR_OUT_OF_MEMORY, "the default stream's work did not finish");
    if (st == LMS_OK)
        *ptr = (void *)(uintptr_t)(S->base + offset);
    else if (st == LMS_ERR_OUT_OF_MEMORY)
        st = out_of_memory(size, lms_last_error()[0] && strstr(lms_last_error(), "LMS_VA_RESERVE")
                                     ? lms_last_error() : NULL);
out:
    pthread_mutex_unlock(&lock);
    return st;
}

/* The offset of a pointer in the range, or false. Caller holds the lock. */
static bool offset_of(const void *ptr, size_t *offset)
{
    dev_addr_t a = (dev_addr_t)(uintptr_t)ptr;
    if (S == NULL || a < S->base || a - S->base >= S->va_size)
        return false;
    *offset = (size_t)(a - S->base);
    return true;
}

lms_status_t lms_free(void *ptr, lms_stream_t stream)
{
    if (ptr == NULL)
        return LMS_OK;
    pthread_mutex_lock(&lock);
    lms_status_t st = LMS_OK;
    stream_t *s = S != NULL ? find_stream(stream) : NULL;
    size_t offset = 0, size = 0;
    if (!offset_of(ptr, &offset))
        st = base_fail(LMS_ERR_INVALID, "lms_free(%p): not an address lms handed out", ptr);
    else if (s == NULL)
        st = bad_stream("lms_free", stream);
    else
        st = alloc_mark_freed(S->alloc, offset, &size);
    if (st == LMS_ERR_INVALID && s != NULL && offset_of(ptr, &offset))
        st = base_fail(LMS_ERR_INVALID, "lms_free(%p): %s", ptr, lms_last_error());
    if (st == LMS_ERR_INVALID && S != NULL && !S->warned_bad_free) {
        S->warned_bad_free = true;
        base_log(BASE_LOG_WARN, "%s (reported once; later bad frees only by status)",
                 lms_last_error());
    }
    if (st != LMS_OK)
        goto out;
    if (S->live_streams == 1) { /* see Note [Stream-ordered free] */
        alloc_chunks_t freed;
        alloc_release(S->alloc, offset, &freed);
        chunks_freed(freed);
        S->released_at_once++;
        goto out;
    }
    int cls = alloc_class_of(S->alloc, size);
    deque_t *d = cls >= 0 ? &s->small[cls] : &s->large;
    if (!dq_push(d, (pending_t){offset, size, s->epoch})) {
        alloc_revive(S->alloc, offset, size);
        st = base_fail(LMS_ERR_OUT_OF_MEMORY, "lms_free(%p): no host memory to queue it", ptr);
        goto out;
    }
    s->unfenced_bytes += size;
    /* Let a stream that frees much give its memory back to everyone. A fence
     * that cannot be recorded now is recorded when an allocation runs short. */
    if (s->unfenced_bytes >= S->flush_bytes && fence(s) != LMS_OK)
        base_log(BASE_LOG_DEBUG, "lms_free: fence deferred: %s", lms_last_error());
out:
    pthread_mutex_unlock(&lock);
    return st;
}

lms_status_t lms_allocation_of(const void *ptr, void **base, size_t *size)
{
    if (base == NULL || size == NULL)
        return base_fail(LMS_ERR_INVALID, "lms_allocation_of: NULL output");
    pthread_mutex_lock(&lock);
    size_t offset, b;
    lms_status_t st = offset_of(ptr, &offset) ? alloc_find(S->alloc, offset, &b, size)
                                              : base_fail(LMS_ERR_INVALID,
                                                          "lms_allocation_of(%p): not an lms address",
                                                          ptr);
    if (st == LMS_OK)
        *base = (void *)(uintptr_t)(S->base + b);
    pthread_mutex_unlock(&lock);
    return st;
}

lms_status_t lms_memory_info(size_t *free_bytes, size_t *total_bytes)
{
    if (free_bytes == NULL || total_bytes == NULL)
        return base_fail(LMS_ERR_INVALID, "lms_memory_info: NULL output");
    pthread_mutex_lock(&lock);
    lms_status_t st = ensure();
    if (st == LMS_OK) {
        alloc_usage_t u;
        alloc_usage(S->alloc, &u);
        size_t limit = S->budget * S->chunk, used = u.used_chunks * S->chunk;
        *total_bytes = limit;
        *free_bytes = limit > used ? limit - used : 0;
    }
    pthread_mutex_unlock(&lock);
    return st;
}

/* ---- streams ------------------------------------------------------------------- */

/* Makes the new stream s wait, on the device, for what every other stream has
 * queued so far (see Note [Stream-ordered free]). */
static lms_status_t order_after_all(stream_t *s)
{
    if (!grow((void **)&S->events, &S->capevents, S->nevents + 1, sizeof *S->events))
        return base_fail(LMS_ERR_OUT_OF_MEMORY, "lms_stream_create: no host memory");
    dev_event_t *e;
    lms_status_t st = LMS_OK;
    if (S->nevents > 0)
        e = S->events[--S->nevents];
    else if ((st = dev_event_create(S->dev, &e)) != LMS_OK)
        return st;
    for (size_t i = 0; i < S->nstreams && st == LMS_OK; i++)
        if (S->streams[i] != NULL && S->streams[i] != s &&
            (st = dev_event_record(S->dev, e, S->streams[i]->dev)) == LMS_OK)
            st = dev_stream_wait_event(S->dev, s->dev, e); /* waits on this record */
    S->events[S->nevents++] = e; /* room was made above */
    return st;
}

lms_status_t lms_stream_create(lms_stream_t *out)
{
    if (out == NULL)
        return base_fail(LMS_ERR_INVALID, "lms_stream_create: NULL output");
    pthread_mutex_lock(&lock);
    lms_status_t st = ensure();
    size_t i = 1;
    while (st == LMS_OK && i < S->nstreams && S->streams[i] != NULL)
        i++;
    if (st == LMS_OK && i == MAX_STREAMS)
        st = base_fail(LMS_ERR_OUT_OF_MEMORY, "lms_stream_create: %u streams exist", MAX_STREAMS - 1);
    if (st == LMS_OK && (st = new_stream(&S->streams[i])) == LMS_OK &&
        (st = order_after_all(S->streams[i])) != LMS_OK) {
        dev_stream_destroy(S->dev, S->streams[i]->dev);
        free_stream(S->streams[i]);
        S->streams[i] = NULL;
    }
    if (st == LMS_OK) {
        S->live_streams++;
        if (i == S->nstreams)
            S->nstreams++;
        *out = (lms_stream_t)(uintptr_t)((uintptr_t)S->generation[i] << 32 | (i + 1));
    }
    pthread_mutex_unlock(&lock);
    return st;
}

lms_status_t lms_stream_destroy(lms_stream_t stream)
{
    pthread_mutex_lock(&lock);
    stream_t *s = S != NULL && stream != NULL ? find_stream(stream) : NULL;
    lms_status_t st = stream == NULL ? base_fail(LMS_ERR_INVALID,
                                                 "lms_stream_destroy: the default stream stays")
                      : s == NULL    ? bad_stream("lms_stream_destroy", stream)
                                     : LMS_OK;
    /* Its pending frees go back once its queued work is done: wait for that,
     * with the lock dropped, then look the stream up again. */
    for (int round = 0; st == LMS_OK && round < 100; round++) {
        if ((st = fence(s)) != LMS_OK || s->nfences == 0)
            break;
        wait_unlocked(s->fences[s->nfences - 1].event);
        if ((s = find_stream(stream)) == NULL)
            st = bad_stream("lms_stream_destroy", stream); /* destroyed meanwhile */
        else
            st = collect(s, false);
    }
    if (st == LMS_OK && s->nfences > 0)
        st = base_fail(LMS_ERR_DEVICE, "lms_stream_destroy: frees keep arriving on the stream");
    if (st == LMS_OK)
        st = dev_stream_destroy(S->dev, s->dev);
    if (st == LMS_OK) {
        size_t i = ((uintptr_t)stream & 0xffff) - 1;
        free_stream(s);
        S->streams[i] = NULL;
        S->generation[i]++;
        S->live_streams--;
    }
    pthread_mutex_unlock(&lock);
    return st;
}

lms_status_t lms_stream_synchronize(lms_stream_t stream)
{
    pthread_mutex_lock(&lock);
    lms_status_t st = ensure();
    stream_t *s = st == LMS_OK ? find_stream(stream) : NULL;
    dev_device_t *dev = S != NULL ? S->dev : NULL;
    dev_stream_t *ds = s != NULL ? s->dev : NULL;
    if (st == LMS_OK && s == NULL)
        st = bad_stream("lms_stream_synchronize", stream);
    pthread_mutex_unlock(&lock);
    return st != LMS_OK ? st : dev_stream_synchronize(dev, ds); /* without the lock */
}

/* ---- swap.h --------------------------------------------------------------------- */

dev_device_t *swap_device(void)
{
    pthread_mutex_lock(&lock);
    dev_device_t *dev = S != NULL ? S->dev : NULL;
    pthread_mutex_unlock(&lock);
    return dev;
}

dev_stream_t *swap_stream(lms_stream_t handle)
{
    pthread_mutex_lock(&lock);
    stream_t *s = S != NULL ? find_stream(handle) : NULL;
    dev_stream_t *ds = s != NULL ? s->dev : NULL;
    pthread_mutex_unlock(&lock);
    return ds;
}

lms_status_t swap_layout(swap_layout_t *out)
{
    if (out == NULL)
        return base_fail(LMS_ERR_INVALID, "swap_layout: NULL output");
    pthread_mutex_lock(&lock);
    lms_status_t st = ensure();
    if (st == LMS_OK)
        *out = (swap_layout_t){S->base, S->va_size, S->chunk, S->budget * S->chunk};
    pthread_mutex_unlock(&lock);
    return st;
}
