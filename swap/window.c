/*
 * swap/window.c — access windows: what an access makes resident (make_room
 * finds the blocks, bring_in maps and fetches), held until the calling
 * thread's work is queued. Lock: swap_lock, held by every caller; make_room
 * drops it while it waits.
 *
 * Note [Access windows]
 * lms_access makes a range resident for the work the calling thread enqueues
 * next. Until that work is enqueued, recording an event on the stream would
 * not cover it, so the chunks are "held": not evictable. The hold ends at the
 * thread's next lms call (resid_close_window): by then the work is queued,
 * and an eviction records an event on each stream that used the chunk and
 * makes the d2h stream wait for it, so the copy and the unmap come after the
 * work. Holds are counted per chunk; a thread's open window lists its chunks.
 *
 *
 * Note [Swap exchange]
 * Allocations may fill the device and the host pool at once (less the reclaim
 * watermark), so an access can find that evicting a dirty chunk for a block
 * needs a host slot, and every slot holds a chunk's copy: among them, the
 * chunks this very access is about to fetch. Such an access goes in steps:
 * make_room hands back how many of its HOST chunks fit in the free blocks
 * (`partial`), those are fetched (overwrites too, so that a failure later
 * loses nothing), and once a fetch has landed its chunk is clean, so
 * drop_clean_copies frees its slot for the next eviction. Each step frees at
 * least as many slots as it took blocks, so the access finishes whenever the
 * room lms.h promises is kept; it fails only when what it needs is pinned or
 * held elsewhere.
 *
 * Note [Pipelined swaps]
 * Through the VMM API a swap costs host time besides the copies: the unmap
 * of what leaves a block, and the set_access of what arrives, about as much
 * per byte as the copy itself on an H100, and the driver does one call at a
 * time (docs/gpu-results.md). So an access overlaps them with the copies, a
 * piece (S->piece chunks, 16 MiB by default) at a time:
 *   - evictions are queued in runs of at most a piece, so they end, and are
 *     unmapped, a piece at a time;
 *   - while evictions are in flight, make_room settles one of them per step
 *     and, once a piece's worth of blocks is free, hands them back at once
 *     (an early step) instead of waiting for all: bring_in maps and fetches
 *     those while the rest are still being copied out;
 *   - bring_in sets access and queues the copies in a piece at a time, so
 *     each piece's copy runs while the next piece is made accessible.
 * An early step takes only chunks whose failure later would lose nothing
 * (UNBACKED ones, and HOST ones it fetches; not those about to be
 * overwritten, whose host copy must stay until the access succeeds); one
 * that finds none makes the next make_room wait for everything instead.
 * What an early step maps is held, like the rest of the access, so two
 * threads could each map part of what they need and wait for the other's
 * blocks: an access that finds nothing to evict while others hold chunks
 * gives back what its early steps mapped and not yet used (give_back_early;
 * unmapped, their data is still their host copy or none) and takes no more
 * early steps. Chunks an access keeps go on the LRU at once, so that one
 * that fails later leaves them evictable.
 * set_access is far slower while a D2H copy is in flight (Note [VMM beside
 * copies] in prefetch.c), so an early step that sets access beside
 * evictions in flight pays for it: it is waited for, so it goes anyway.
 */
#include <stdio.h>
#include <stdlib.h>

#include "base/lockorder.h"
#include "swap/residency.h"

/* ---- the calling thread's access window ---------------------------------- */

typedef struct window {
    uint64_t generation; /* of the state its holds belong to */
    uint32_t *chunks;
    size_t n, cap;
    uint32_t access;     /* the current resid_back's id (chunk_t.early) */
    bool no_early;       /* it gave back its early steps: it takes no more */
    stream_t *s;         /* the stream its work goes on (NULL: none), */
    int slot;            /* in this slot, */
    uint32_t gen;        /* of this generation */
    bool exiting;        /* its thread is: nothing more is started from it */
    uint64_t full_at;    /* ranking_fulls(&S->rank) when it opened (Note [Ranking between events] in
                            ranking.c) */
} window_t;

static __thread window_t W;
static pthread_key_t window_key;
static pthread_once_t window_once = PTHREAD_ONCE_INIT;

static void window_exit(void *arg)
{
    (void)arg;
    W.exiting = true; /* a thread-exit destructor: the driver's own state may be gone */
    lo_lock(&swap_lock, LO_SWAP);
    resid_close_window();
    lo_unlock(&swap_lock, LO_SWAP);
    base_meta_free(W.chunks);
    W = (window_t){0};
}

static void window_key_create(void) { (void)pthread_key_create(&window_key, window_exit); }

bool resid_window_open(void) { return W.n > 0; }

const size_t *resid_window_count(void) { return &W.n; }

/* Records the event after the work of the closing window on its stream;
 * the window's number there, 0 if none was recorded. */
static uint32_t window_fence(void)
{
    stream_t *s = W.s;
    if (s == NULL || W.slot < 0 || (size_t)W.slot >= streams_slots(&S->streams) ||
        streams_slot(&S->streams, (size_t)W.slot) != s ||
        streams_generation(&S->streams, (size_t)W.slot) != W.gen || W.exiting ||
        (S->host_chunks == 0 && S->evicting == 0))
        return 0;
    return stream_fence_window(s, S->dev);
}

void resid_close_window(void)
{
    if (S != NULL && W.generation == S->generation && W.n > 0) {
        ranking_stale(&S->rank); /* what it held is evictable now: rank again */
        /* a full ranking made while it was held left its chunks out */
        bool missed = S->policy != NULL && ranking_fulls(&S->rank) != W.full_at;
        uint32_t w = window_fence();
        for (size_t i = 0; i < W.n; i++) {
            chunk_t *k = &S->chunks.ch[W.chunks[i]];
            k->holds--;
            if (missed)
                ranking_touched(&S->rank, W.chunks[i], 1);
            if (W.s != NULL) {
                k->last_window = w;
                k->last_slot = (uint16_t)W.slot;
                k->last_gen = W.gen;
            }
        }
        S->holds.total -= W.n;
        if (S->holds.waiters > 0)
            pthread_cond_broadcast(&S->holds.unheld);
        /* what it held may be what the schedule evicts next, for what it
         * fetches next (Note [Prefetch without harm] in policy.c): while
         * held, neither could happen */
        W.n = 0;
        if (resid_by_schedule() && !W.exiting)
            resid_prefetch();
    }
    W.n = 0;
}

/* Room for n more chunks in the window, so that holding cannot fail. */
static bool window_reserve(size_t n)
{
    if (W.cap == 0) { /* first use on this thread: close it at thread exit */
        pthread_once(&window_once, window_key_create);
        (void)pthread_setspecific(window_key, &W);
    }
    return swap_grow((void **)&W.chunks, &W.cap, W.n + n, sizeof *W.chunks);
}

/* ---- access ---------------------------------------------------------------------- */

/* Chunk c was mapped onto a block for an access that failed, and holds no
 * data yet: gives the block back, leaving c in state `was` (UNBACKED, or
 * HOST: its host copy is its data, mapped at its VA again in host mode:
 * Note [Evicted chunks stay mapped] in residency.c; should that fail, its
 * block is mapped back). Should the driver refuse the unmap too,
 * c stays mapped and becomes an ordinary resident chunk instead: made
 * accessible, and refilled from its host copy (FETCHING). Should that fail
 * as well, c is left broken: resident, keeping its host copy, never evicted,
 * and repaired (this again) before any access uses it (repair_broken). */
static void unmap_unused(size_t c, uint8_t was)
{
    chunk_t *k = &S->chunks.ch[c];
    lms_status_t st = dev_unmap(S->dev, chunk_addr(c), S->chunk);
    char why[256];
    snprintf(why, sizeof why, "%s", lms_last_error());
    if (st == LMS_OK) {
        k->va = VA_NONE;
        if (was != HOST || !resid_host_remap_one(c)) {
            chunks_lru_remove(&S->chunks, c);
            resid_set_unbacked(c, was);
            return;
        }
        if (k->broken) { /* back on its block without access: repaired at its next use */
            k->state = RESIDENT;
            chunks_set_clean(&S->chunks, c, false);
            chunks_lru_touch(&S->chunks, c);
            return;
        }
        snprintf(why, sizeof why, "its host copy could not be mapped there");
    }
    k->state = RESIDENT;
    chunks_set_clean(&S->chunks, c, false);
    chunks_lru_touch(&S->chunks, c);
    st = st == LMS_OK ? LMS_OK : dev_set_access(S->dev, chunk_addr(c), S->chunk);
    xfer_t *x = NULL;
    if (st == LMS_OK && was == HOST && (st = xfer_new(&S->xfers, &x)) == LMS_OK &&
        (st = dev_copy_h2d(S->dev, transfers_stream(&S->xfers, false), chunk_addr(c), k->host,
                           S->chunk)) != LMS_OK)
        xfer_discard(&S->xfers, x);
    if (st == LMS_OK && was == HOST) {
        xfer_start(&S->xfers, x, c, 1, 1, false);
        k->state = FETCHING;
        k->xfer = x;
        S->stats.fetches++;
        S->stats.bytes_h2d += S->chunk;
        if (timeline_on)
            timeline_fetch(base_now_ns(), false, 1, S->chunk);
    }
    if (st != LMS_OK) {
        k->broken = true;
        base_log(BASE_LOG_WARN, "lms: the chunk at 0x%llx could neither be unmapped (%s) nor "
                 "made usable (%s); it is retried at its next access",
                 (unsigned long long)chunk_addr(c), why, lms_last_error());
    }
}

/* Repairs the broken chunks among u[0..n) (unmap_unused again); fails,
 * leaving them broken, if the driver still refuses. */
static lms_status_t repair_broken(const char *op, const uint32_t *u, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        chunk_t *k = &S->chunks.ch[u[i]];
        if (!k->broken)
            continue;
        k->broken = false;
        unmap_unused(u[i], k->host != NULL ? HOST : UNBACKED);
        if (k->broken)
            return base_fail(LMS_ERR_DEVICE, "%s: the chunk at 0x%llx cannot be made usable: %s",
                             op, (unsigned long long)chunk_addr(u[i]), lms_last_error());
    }
    return LMS_OK;
}

/* A failed access gives the chunks it mapped over their host copy back. */
static void undo_overwrites(const uint32_t *u, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        chunk_t *k = &S->chunks.ch[u[i]];
        if (!(k->acc & ACC_OVER_HOST))
            continue;
        k->acc &= (uint8_t)~ACC_OVER_HOST;
        unmap_unused(u[i], HOST);
    }
}

/* Chunks of the ranges that need a block now. */
static size_t blocks_needed(const uint32_t *u, size_t n)
{
    size_t need = 0;
    for (size_t i = 0; i < n; i++)
        need += S->chunks.ch[u[i]].state == UNBACKED || S->chunks.ch[u[i]].state == HOST;
    return need;
}

static lms_status_t no_room(const char *op, size_t need)
{
    char a[32], b[32], c[32];
    S->stats.ooms++;
    return base_fail(LMS_ERR_OUT_OF_MEMORY,
                     "%s: no device memory for %zu more chunks: %s resident of the %s limit, "
                     "%s pinned, the rest named by accesses whose work is being enqueued. Unpin "
                     "memory, or raise LMS_DEVICE_LIMIT",
                     op, need, swap_fmt(S->resident * S->chunk, a),
                     swap_fmt(S->budget * S->chunk, b), swap_fmt(S->pinned * S->chunk, c));
}

/* Waits, lock dropped, up to 1 ms for another thread to close its window. */
static void wait_for_holds(void)
{
    struct timespec until = base_deadline_in(1000 * 1000);
    S->holds.waiters++;
    lo_cond_timedwait(&S->holds.unheld, &swap_lock, LO_SWAP, &until);
    S->holds.waiters--;
}

/* Gives back the blocks this thread's current access mapped in early steps
 * and has not used: fetched ones whose copy has landed (their host copy is
 * their data) and UNBACKED ones (no data). No other access that named them
 * has succeeded since (it clears chunk_t.early), so nothing wrote them. */
static size_t give_back_early(const uint32_t *u, size_t n)
{
    size_t freed = 0;
    for (size_t i = 0; i < n; i++) {
        size_t c = u[i];
        chunk_t *k = &S->chunks.ch[c];
        if (k->early != W.access || k->state != RESIDENT || k->xfer != NULL || k->free ||
            k->pins > 0 || (k->host != NULL && !k->clean))
            continue;
        if (dev_unmap(S->dev, chunk_addr(c), S->chunk) != LMS_OK)
            continue; /* it stays, resident */
        k->va = VA_NONE;
        if (resid_host_remap_one(c))
            continue; /* back on its block: it stays, resident */
        k->early = 0;
        chunks_lru_remove(&S->chunks, c);
        resid_set_unbacked(c, k->host != NULL ? HOST : UNBACKED);
        freed++;
    }
    return freed;
}

/* Makes the blocks the chunks u[0..n) need obtainable (free_blocks),
 * evicting and waiting as needed (direct reclaim). May drop the lock while
 * it waits; the chunks are held, so they stay allocated and are not evicted,
 * but their states may change meanwhile. When an eviction needs a host slot
 * and none is left, *partial says how many of the chunks' HOST chunks to
 * fetch first (Note [Swap exchange]). With `early`, while evictions are in
 * flight and a piece's worth of blocks is free, it returns at once with
 * *partial = the blocks free and *early set: an early step (Note [Pipelined
 * swaps]). Else *partial is 0 and all of them fit. */
static lms_status_t make_room(const char *op, const uint32_t *u, size_t n, size_t *partial,
                              bool *early)
{
    uint64_t t0 = 0;
    lms_status_t st = LMS_OK;
    *partial = 0;
    /* pipelining, one eviction's unmap per step; else all that have ended */
    size_t most = early != NULL ? 1 : SIZE_MAX;
    for (int syncs = 0, tries = 0;;) {
        (void)resid_progress_upto(most);
        size_t need = blocks_needed(u, n), have = resid_unmapped_blocks();
        if (need <= have)
            break;
        /* memory released at once (one-stream rule) may still be in use by
         * the default stream: stealing it waits for that first */
        if (S->chunks.ncached > 0 && streams_released_pending(&S->streams) && syncs++ < 100) {
            if ((st = swap_sync_released()) != LMS_OK)
                break;
            continue;
        }
        for (size_t i = 0; i < S->chunks.ncached; i++) /* those with no copy in flight */
            have += S->chunks.ch[S->chunks.cached[i]].xfer == NULL;
        if (need <= have)
            break;
        if (S->pf.remaps > 0) { /* evictions waiting on their blocks end now, beside the
                                   copies out (Note [Remap beside copies] in residency.c) */
            resid_host_flush_waited();
            continue;
        }
        if (t0 == 0)
            t0 = base_now_ns();
        size_t want = need - have, started = 0;
        lms_status_t est = LMS_OK;
        if (S->evicting < want)
            started = resid_evict_some(want - S->evicting, false, TIMELINE_BY_DIRECT, &est);
        /* a copy in flight frees a block, or leaves a chunk evictable (a
         * fetched one, or one touched while it was being evicted) */
        if (started > 0 || !transfers_idle(&S->xfers)) {
            if (early != NULL && have >= S->piece) {
                *partial = have;
                *early = true;
                break;
            }
            if ((st = resid_wait_oldest(most)) != LMS_OK)
                break;
            continue;
        }
        size_t on_host = 0;
        for (size_t i = 0; i < n; i++)
            on_host += S->chunks.ch[u[i]].state == HOST;
        if (est == LMS_ERR_OUT_OF_MEMORY && have > 0 && on_host > 0) {
            *partial = have < on_host ? have : on_host;
            break;
        }
        if (est != LMS_OK) {
            st = est;
            break;
        }
        /* nothing evictable: other threads' windows may close soon; what
         * this access's early steps hold may be what they wait for */
        if (S->holds.total > W.n && tries++ < 1000) {
            if (!W.no_early) {
                W.no_early = true;
                (void)give_back_early(u, n);
            }
            wait_for_holds();
            continue;
        }
        st = no_room(op, want);
        break;
    }
    if (t0 != 0) { /* a stall: see the timeline's stall spans */
        uint64_t t1 = base_now_ns();
        S->stats.stall_ns += t1 - t0;
        if (timeline_on)
            timeline_stall(t0, t1);
    }
    return st;
}

/* Whether bring_in takes a block for chunk c this round: every chunk that
 * needs one in the last round (partial == 0); HOST ones only in an exchange
 * step (Note [Swap exchange]); in an early step (Note [Pipelined swaps])
 * those whose failure later would lose nothing: UNBACKED ones, and HOST
 * ones whose data is fetched (not those about to be overwritten). */
static bool takes_block(const chunk_t *k, size_t partial, bool early)
{
    if (k->state != UNBACKED && k->state != HOST)
        return false;
    if (partial == 0)
        return true;
    if (!early)
        return k->state == HOST;
    return k->state == UNBACKED || (k->acc & ACC_NEED_DATA);
}

/* Copies in the fetches of the newly mapped chunks u[i..j) (one run of
 * consecutive chunks), a run of consecutive host copies at a time, onto *x
 * (made on first use); marks them copied. */
typedef struct copied_in {
    size_t first, last; /* the lowest and highest chunk copied (first SIZE_MAX: none) */
    size_t n;           /* how many */
} copied_in_t;

static lms_status_t fetch_piece(const uint32_t *u, size_t i, size_t j, xfer_t **x,
                                copied_in_t *in)
{
    lms_status_t st = LMS_OK;
    while (i < j && st == LMS_OK) {
        chunk_t *k = &S->chunks.ch[u[i]];
        if (k->state != HOST || !(k->acc & ACC_NEED_DATA)) {
            i++;
            continue;
        }
        size_t e = i + 1, most = resid_host_run(u[i], j - i); /* one copy may span them */
        while (e < j && e - i < most && S->chunks.ch[u[e]].state == HOST &&
               (S->chunks.ch[u[e]].acc & ACC_NEED_DATA) && u[e] == u[e - 1] + 1)
            e++;
        if (*x == NULL && (st = xfer_new(&S->xfers, x)) != LMS_OK)
            break;
        st = dev_copy_h2d(S->dev, transfers_stream(&S->xfers, false), chunk_addr(u[i]), k->host,
                          (e - i) * S->chunk);
        if (st == LMS_OK) {
            for (size_t m = i; m < e; m++)
                S->chunks.ch[u[m]].acc |= ACC_COPIED;
            in->first = in->first < u[i] ? in->first : u[i];
            in->last = u[e - 1];
            in->n += e - i;
        }
        i = e;
    }
    return st;
}

/* A fetch of chunk c, whose host mapping it took down, failed with st before
 * c was mapped on a block: its host copy is mapped at its VA again (Note
 * [Evicted chunks stay mapped] in residency.c), and st's message stays. */
static void remap_after_failure(size_t c, lms_status_t st)
{
    char why[256];
    snprintf(why, sizeof why, "%s", lms_last_error());
    if (resid_host_map(c, 1) != LMS_OK)
        base_log(BASE_LOG_WARN, "lms: the chunk at 0x%llx is left unmapped until its next use: %s",
                 (unsigned long long)chunk_addr(c), lms_last_error());
    (void)base_fail(st, "%s", why);
}

/* Maps and fetches what the unique, sorted chunks u[0..n) need (with
 * `partial` > 0: that many of them, chosen by takes_block), on demand or
 * (ahead) as a prefetch; *brought says how many it mapped. Access is set
 * and the copies in queued a piece at a time, so that the copy of one piece
 * runs while the next is made accessible (Note [Pipelined swaps]). On
 * failure it undoes the maps whose chunks no copy fills. */
lms_status_t resid_bring_in(uint32_t *u, size_t n, size_t partial, bool early, bool ahead,
                             size_t *brought)
{
    uint64_t decided = timeline_on ? base_now_ns() : 0;
    *brought = 0;
    size_t to_map = 0;
    for (size_t i = 0; i < n; i++)
        to_map += takes_block(&S->chunks.ch[u[i]], partial, early);
    if (partial > 0 && to_map > partial)
        to_map = partial;
    /* every block first: unmapping a cached chunk may fail, and must not
     * leave chunks of this access mapped that a rollback then must unmap */
    while (resid_unmapped_blocks() < to_map) {
        lms_status_t st = resid_uncache_one();
        if (st != LMS_OK)
            return st;
    }
    lms_status_t st = LMS_OK;
    size_t mapped = 0; /* u[0..mapped) were looked at; those newly mapped have ACC_MAPPED */
    for (size_t taken = 0; mapped < n && taken < to_map && st == LMS_OK; mapped++) {
        size_t c = u[mapped];
        chunk_t *k = &S->chunks.ch[c];
        if (!takes_block(k, partial, early))
            continue;
        /* host mode: its host copy's mapping goes first, so the copy in
         * (queued below) reads what writes through it left (Note [Evicted
         * chunks stay mapped] in residency.c) */
        if (k->va == VA_HOST && (st = resid_host_unmap(c)) != LMS_OK)
            break;
        dev_block_t b = 0;
        if ((st = blocks_take(&S->blocks, &b)) != LMS_OK ||
            (st = dev_map(S->dev, chunk_addr(c), b)) != LMS_OK) {
            if (b != 0)
                blocks_put(&S->blocks, b);
            remap_after_failure(c, st);
            break;
        }
        uint8_t was = k->state;
        resid_set_resident(c, b);
        k->state = was; /* settled below */
        k->acc |= ACC_MAPPED;
        taken++;
    }
    *brought = mapped;
    /* a piece of consecutive newly mapped chunks at a time: access, then its
     * copies in, which run while the next piece is made accessible */
    copied_in_t in = {SIZE_MAX, 0, 0};
    xfer_t *x = NULL;
    for (size_t i = 0; i < mapped && st == LMS_OK;) {
        if (!(S->chunks.ch[u[i]].acc & ACC_MAPPED)) {
            i++;
            continue;
        }
        size_t j = i + 1;
        while (j < mapped && j - i < S->piece && (S->chunks.ch[u[j]].acc & ACC_MAPPED) &&
               u[j] == u[j - 1] + 1)
            j++;
        if ((st = dev_set_access(S->dev, chunk_addr(u[i]), (j - i) * S->chunk)) != LMS_OK)
            break;
        for (size_t m = i; m < j; m++)
            S->chunks.ch[u[m]].acc |= ACC_ACCESSIBLE;
        st = fetch_piece(u, i, j, &x, &in);
        i = j;
    }
    if (in.n > 0)
        xfer_start(&S->xfers, x, in.first, in.last + 1 - in.first, in.n, false);
    else
        xfer_discard(&S->xfers, x);
    size_t kept = 0, fetched = 0;
    for (size_t i = 0; i < mapped; i++) {
        size_t c = u[i];
        chunk_t *k = &S->chunks.ch[c];
        if (!(k->acc & ACC_MAPPED))
            continue;
        if (k->acc & ACC_COPIED) {
            fetched++;
            k->state = FETCHING;
            k->xfer = x;
            chunks_set_clean(&S->chunks, c, false);
            k->early = early ? W.access : 0;
            chunks_lru_touch(&S->chunks, c); /* evictable once it lands, should the access fail */
            S->stats.fetches++;
            S->stats.bytes_h2d += S->chunk;
            kept++;
        } else if (!(k->acc & ACC_ACCESSIBLE) ||
                   (k->state == HOST && (st != LMS_OK || (k->acc & ACC_NEED_DATA)))) {
            /* mapped without access, or its copy failed, or the access fails
             * and will not overwrite it: give the block back (a HOST chunk's
             * host copy stays its data) */
            unmap_unused(c, k->state);
        } else {
            /* mapped for an overwrite: its host copy goes once the access
             * has succeeded (resid_access), or it goes back (undo_overwrites) */
            if (k->state == HOST)
                k->acc |= ACC_OVER_HOST;
            k->early = early && k->state == UNBACKED ? W.access : 0;
            k->state = RESIDENT;
            chunks_lru_touch(&S->chunks, c);
            kept++;
        }
        k->acc &= (uint8_t)~(ACC_MAPPED | ACC_COPIED | ACC_ACCESSIBLE);
    }
    if (timeline_on && fetched > 0)
        timeline_fetch(decided, ahead, fetched, fetched * S->chunk);
    *brought = kept;
    return st;
}

/* Sets acc of the chunks of the ranges (stamped; the caller holds the lock
 * from here until it has used them). With all_data, overwrites fetch too. */
static void mark_needs(const lms_range_t *r, size_t n, int pin, bool all_data)
{
    uint32_t stamp = ++S->chunks.stamp;
    for (size_t i = 0; i < n; i++) {
        size_t off = (size_t)((dev_addr_t)(uintptr_t)r[i].ptr - S->base), end = off + r[i].bytes;
        for (size_t c = off / S->chunk; c <= (end - 1) / S->chunk; c++) {
            chunk_t *k = &S->chunks.ch[c];
            if (k->stamp != stamp) {
                k->stamp = stamp;
                k->acc = 0;
            }
            bool covers = off <= c * S->chunk && end >= (c + 1) * S->chunk;
            if (all_data || r[i].mode != LMS_OVERWRITE || !covers)
                k->acc |= ACC_NEED_DATA;
            if (r[i].mode != LMS_READ || pin)
                k->acc |= ACC_WRITES;
        }
    }
}

/* Ranges r[0..n) are valid accesses of live allocations. */
static lms_status_t check_ranges(const char *op, const lms_range_t *r, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        dev_addr_t a = (dev_addr_t)(uintptr_t)r[i].ptr;
        size_t base, size;
        if (r[i].mode < LMS_READ || r[i].mode > LMS_OVERWRITE)
            return base_fail(LMS_ERR_INVALID, "%s: range %zu: %d is not an access mode", op, i,
                             (int)r[i].mode);
        if (r[i].bytes == 0)
            return base_fail(LMS_ERR_INVALID, "%s: range %zu (%p) is empty", op, i, r[i].ptr);
        if (a < S->base || a - S->base >= S->va_size ||
            alloc_find(S->alloc, (size_t)(a - S->base), &base, &size) != LMS_OK)
            return base_fail(LMS_ERR_INVALID, "%s: %p is in no live allocation", op, r[i].ptr);
        size_t off = (size_t)(a - S->base);
        if (r[i].bytes > size - (off - base))
            return base_fail(LMS_ERR_INVALID,
                             "%s: [%p, +%zu) runs past the end of its allocation (%zu bytes)", op,
                             r[i].ptr, r[i].bytes, size);
    }
    return LMS_OK;
}

lms_status_t resid_access(const char *op, const lms_range_t *r, size_t n, stream_t *s, int slot,
                          int pin)
{
    /* validate everything first: a bad range changes nothing */
    lms_status_t st = check_ranges(op, r, n);
    return st != LMS_OK ? st : resid_back(op, r, n, s, slot, pin);
}

lms_status_t resid_back(const char *op, const lms_range_t *r, size_t n, stream_t *s, int slot,
                        int pin)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        size_t off = (size_t)((dev_addr_t)(uintptr_t)r[i].ptr - S->base);
        total += (off + r[i].bytes - 1) / S->chunk - off / S->chunk + 1;
    }
    resid_close_window(); /* the caller's entry did; this keeps W.chunks ours */
    if (!window_reserve(total))
        return base_fail(LMS_ERR_OUT_OF_MEMORY, "%s: no host memory", op);
    W.generation = S->generation;
    W.s = s;
    W.slot = s != NULL ? slot : -1;
    W.gen = s != NULL ? streams_generation(&S->streams, (size_t)slot) : 0;
    W.full_at = ranking_fulls(&S->rank);
    /* the chunks, each once and in order, held: no eviction takes them from
     * here on. The list is the thread's window, so it survives lock drops. */
    uint32_t stamp = ++S->chunks.stamp, *u = W.chunks;
    size_t nu = 0;
    for (size_t i = 0; i < n; i++) {
        size_t off = (size_t)((dev_addr_t)(uintptr_t)r[i].ptr - S->base), end = off + r[i].bytes;
        for (size_t c = off / S->chunk; c <= (end - 1) / S->chunk; c++)
            if (S->chunks.ch[c].stamp != stamp) {
                S->chunks.ch[c].stamp = stamp;
                u[nu++] = (uint32_t)c;
            }
    }
    qsort(u, nu, sizeof *u, chunks_cmp_id);
    for (size_t i = 0; i < nu; i++) {
        chunk_t *k = &S->chunks.ch[u[i]];
        k->holds++;
        if (k->prefetched) { /* fetched ahead: still there, or on its way */
            k->prefetched = false;
            S->stats.prefetch_hits += k->state == RESIDENT || k->state == FETCHING;
        }
    }
    W.n = nu;
    S->holds.total += nu;
    if ((W.access = ++S->holds.accesses) == 0)
        W.access = ++S->holds.accesses;
    W.no_early = false;
    lms_status_t st = repair_broken(op, u, nu);
    if (st != LMS_OK)
        return st;
    /* from make_room's return on, the lock stays held until the chunks are
     * settled; a partial step (Note [Swap exchange]) goes round again */
    for (size_t partial = 1, brought = 1; partial > 0;) {
        /* an early step that could bring nothing in waits the next time */
        bool early = false;
        if ((st = make_room(op, u, nu, &partial, brought > 0 && !W.no_early ? &early : NULL)) !=
            LMS_OK)
            return st;
        mark_needs(r, n, pin, partial > 0 && !early);
        if ((st = resid_bring_in(u, nu, partial, early, false, &brought)) != LMS_OK)
            return st;
    }
    /* wait for copies into the chunks, and for one out of a chunk about to
     * be written (the copy is then dropped, but must not read torn data);
     * nothing is marked before every wait is in place, so that a failure
     * here loses nothing */
    dev_stream_t *on = s != NULL ? s->dev : NULL;
    xfer_t *waited = NULL;
    for (size_t i = 0; i < nu && on != NULL; i++) {
        chunk_t *k = &S->chunks.ch[u[i]];
        xfer_t *x = k->xfer;
        if (x != NULL && (!x->d2h || (k->acc & ACC_WRITES)) && x != waited) {
            if ((st = xfer_fence(&S->xfers, x, true)) != LMS_OK ||
                (!x->done && (st = dev_stream_wait_event(S->dev, on, x->event)) != LMS_OK)) {
                undo_overwrites(u, nu);
                return st; /* the copies go on; a retry waits for them */
            }
            waited = x;
        }
    }
    uint64_t bit = 1ull << (slot < 63 ? slot : 63);
    for (size_t i = 0; i < nu; i++) {
        size_t c = u[i];
        chunk_t *k = &S->chunks.ch[c];
        if (k->state == EVICTING) { /* touched again: it stays */
            resid_host_unpend(c); /* Note [Remap beside copies] in residency.c */
            k->state = RESIDENT;
            S->evicting--;
        }
        if (k->acc & ACC_WRITES) {
            chunks_set_clean(&S->chunks, c, false);
            resid_drop_host(c);
        }
        k->acc &= (uint8_t)~ACC_OVER_HOST;
        k->early = 0; /* used from here on: no longer the early step's to give back */
        if (s != NULL)
            k->streams |= bit;
        if (pin && k->pins++ == 0)
            S->pinned++;
        chunks_lru_touch(&S->chunks, c);
    }
    resid_report_access(u, nu);
    /* pinned memory is used from any stream with no further word: wait here
     * until every copy into it has finished */
    for (size_t i = 0; pin && i < W.n;) {
        xfer_t *x = S->chunks.ch[W.chunks[i]].xfer;
        if (x == NULL) {
            i++;
            continue;
        }
        if ((st = resid_wait_xfer(x, SIZE_MAX)) !=
            LMS_OK) { /* its end cannot be known: not pinned */
            for (size_t j = 0; j < nu; j++)
                if (--S->chunks.ch[u[j]].pins == 0)
                    S->pinned--;
            return st;
        }
        i = 0;
    }
    if (st == LMS_OK)
        resid_prefetch();
    if (resid_free_blocks() + S->evicting < resid_reclaim_low())
        pthread_cond_signal(&S->rc.wake);
    return st;
}

