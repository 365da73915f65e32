/*
 * swap/residency.c — which chunk is where: the block pool, fetch and evict,
 * access windows, pins, and the reclaim thread. See internal.h; the caller
 * holds swap_lock in every function here unless it says otherwise. Each
 * decision is reported to the LMS_TRACE timeline where it is made, and where
 * its stats counter moves (swap/trace.h), at a branch while none is written.
 *
 * Note [Chunk states]
 *   UNBACKED  no block, no data worth keeping (never touched, or freed).
 *   RESIDENT  mapped on a block. `clean`: the host copy (host) is current, so
 *             evicting it needs no copy. A free RESIDENT chunk is "cached".
 *   EVICTING  its D2H copy (or, when clean, the point after its last work)
 *             is queued on the d2h stream; unmapped once that is done.
 *   HOST      no block; its data is in the host copy.
 *   FETCHING  mapped, its H2D copy queued on the h2d stream; users wait on
 *             the copy's event.
 * While `xfer` is set a copy still reads or writes the chunk's memory or its
 * host copy: the chunk is not unmapped and its host copy is not freed (those
 * wait for the copy, see complete()), and a new user waits for an H2D.
 * A chunk touched while EVICTING becomes RESIDENT again at once; the copy
 * finishes and either becomes its host copy (read) or is dropped (write).
 * A freed chunk is dropped in any state, never copied.
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
 * Note [Unfenced copies]
 * A copy's tracking (xfer_new: its record and event) is made before the copy
 * is queued, so that a queued copy is always tracked. Its event is recorded
 * right after the copy (xfer_start); if that record fails, the copy still
 * runs, and its chunks must stay as they are (FETCHING or EVICTING, host copy
 * kept) until it is known to have ended. So the xfer stays in flight,
 * unfenced: the next look at it records the event then (a stream is FIFO:
 * an event recorded later also follows the copy), and one that must wait for
 * it synchronizes the copy stream if recording fails again, which settles
 * every copy on that stream. Until one of those succeeds, callers that need
 * the chunks fail with the device's error rather than use them. Likewise a
 * copy whose event fails to answer a query stays in flight, and a wait for
 * it returns the failure: lms never takes "failed" for "finished", so a
 * broken device makes calls fail rather than free memory a copy may use.
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
 * Not yet exploited: on the H100, set_access is about 34 times slower while
 * a D2H copy is in flight (40 us per 2 MiB beside an H2D one, 30 idle), so
 * an early step that sets access beside evictions still in flight pays for
 * it; ordering the steps around that is the next gain (docs/gpu-results.md).
 *
 * Note [Prefetch]
 * Every access is reported to policy/ (a run of chunks, used or overwritten,
 * at the time of the call), and every free of whole chunks; lms_mark_iteration
 * ends an iteration. While policy/ follows its schedule:
 *   - eviction (the reclaim thread's and direct) takes the chunks used
 *     furthest ahead (Belady's MIN), data the schedule says is freed before
 *     its next use first. Data it says is overwritten is still copied out
 *     when dirty: the schedule is a prediction, and one that is wrong must
 *     not lose data (Note [Dead data] in policy.c).
 *   - after each access, and again when its window closes (what it held
 *     is often what MIN evicts next), what the next accesses read is
 *     fetched ahead (policy_prefetch: in order of use, just in time for the
 *     H2D link's rate): into free blocks (or those on their way) that new
 *     data ahead of them does not need first, less the one the reclaim
 *     thread keeps, and for the rest in place of chunks MIN would evict
 *     for them, which are evicted now so that a later call
 *     finds their blocks free (Note [Prefetch without harm]). Further
 *     ahead, while the H2D link would otherwise idle, into free blocks
 *     nothing before needs (Note [Prefetch horizon]). At most a piece per
 *     call, so that an access pays little host time; a walk that found
 *     nothing is not repeated until the position, the host's chunks, the
 *     free blocks or the link's queue say something may have changed.
 * While following, the reclaim thread keeps free only what new data ahead
 * needs (policy_prefetch's blocks_ahead: overwrites and chunks with no
 * data, less what frees give back), not the watermarks: more free blocks
 * only make the device smaller (in the trace simulator, GPT at 1.25x moved
 * 20% more with the watermarks). It never evicts a chunk fetched ahead and
 * not yet used: prefetch and reclaim must not take turns on one.
 * The link's rate is learnt from the copies: bytes finished over the time
 * the H2D stream was seen busy (an underestimate, which makes prefetch start
 * earlier, not later).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "swap/internal.h"
#include "swap/trace.h"

#define MAX_RUN 64 /* chunks evicted in one copy */
#define PIECE_BYTES (16u << 20) /* a step of a pipelined swap, by default (Note [Pipelined swaps]) */
#define ALL_STREAMS UINT64_MAX

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
    uint64_t full_at;    /* S->rank.rankings_full when it opened (Note [Ranking between events]) */
} window_t;

static __thread window_t W;
static pthread_key_t window_key;
static pthread_once_t window_once = PTHREAD_ONCE_INIT;

static void window_exit(void *arg)
{
    (void)arg;
    W.exiting = true; /* a thread-exit destructor: the driver's own state may be gone */
    pthread_mutex_lock(&swap_lock);
    resid_close_window();
    pthread_mutex_unlock(&swap_lock);
    base_meta_free(W.chunks);
    W = (window_t){0};
}

static void window_key_create(void) { (void)pthread_key_create(&window_key, window_exit); }

bool resid_window_open(void) { return W.n > 0; }

const size_t *resid_window_count(void) { return &W.n; }

/* Note [Eviction fences]
 * An eviction's copy out must come after the work that used the chunk, and
 * the simple fence, an event recorded on the stream when the eviction is
 * decided, comes after all the work queued there so far: often a kernel
 * that waits for a fetch still on the link. Then the copy out waits for
 * that fetch, and the two links, which could run at once, take turns: in
 * bench/train at 4x, each layer's Adam update fetched its state, ran, and
 * only then let the previous layer's state go out. So, while chunks go to
 * the host, the end of each access window (when its work has been queued)
 * records an event on its stream, one of a ring of USE_RING per stream,
 * and each chunk of the window remembers which (last_window). An eviction
 * waits, for the stream that used its chunks last, for the latest of
 * their windows' events (or, once the ring has gone round past it, the
 * oldest one left, which is later still); for any other stream that used
 * them, and for chunks whose window is not known (none recorded: no
 * swapping then, or the record failed; pinned memory, which any stream may
 * use), for the stream's work so far, as before. */

/* Records the event after the work of the closing window on its stream;
 * the window's number there, 0 if none was recorded. */
static uint32_t window_fence(void)
{
    stream_t *s = W.s;
    if (s == NULL || W.slot < 0 || (size_t)W.slot >= S->streams.n || S->streams.slot[W.slot] != s ||
        S->streams.generation_of[W.slot] != W.gen || W.exiting ||
        (S->host_chunks == 0 && S->evicting == 0))
        return 0;
    uint32_t w = s->windows + 1;
    if (w == 0) /* 2^32 windows: numbering starts again, with nothing remembered */
        return 0;
    dev_event_t **e = &s->after[w % USE_RING];
    if ((*e == NULL && dev_event_create(S->dev, e) != LMS_OK) ||
        dev_event_record(S->dev, *e, s->dev) != LMS_OK)
        return 0;
    s->windows = w;
    return w;
}

static void prefetch(void);
static bool by_schedule(void);

void resid_close_window(void)
{
    if (S != NULL && W.generation == S->generation && W.n > 0) {
        ranking_stale(&S->rank); /* what it held is evictable now: rank again */
        /* a full ranking made while it was held left its chunks out */
        bool missed = S->policy != NULL && S->rank.rankings_full != W.full_at;
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
        if (by_schedule() && !W.exiting)
            prefetch();
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

/* ---- the timeline (swap/trace.h): one branch each while none is written ---- */

/* Resident or host chunks changed: the timeline's memory counter follows. */
static inline void memory_changed(void)
{
    if (timeline_on)
        timeline_memory(S->resident * S->chunk, S->host_chunks * S->chunk);
}

/* policy_access; with a timeline, an iteration mark for each iteration the
 * policy found ending with it (Note [Finding the iteration] in policy.c). */
static lms_status_t report(size_t first, size_t n, policy_kind_t kind, uint64_t now)
{
    ranking_touched(&S->rank, first, n);
    if (!timeline_on)
        return policy_access(S->policy, first, n, kind, now);
    policy_usage_t before, after;
    policy_usage(S->policy, &before);
    lms_status_t st = policy_access(S->policy, first, n, kind, now);
    policy_usage(S->policy, &after);
    for (uint64_t found = before.found; found < after.found; found++)
        timeline_iteration();
    return st;
}

/* ---- host copies ---------------------------------------------------------- */

static void drop_host(size_t c)
{
    chunk_t *k = &S->chunks.ch[c];
    if (k->host == NULL)
        return;
    if (k->xfer != NULL) { /* a copy still uses it: complete() drops it */
        k->drop_host = true;
        return;
    }
    hostpool_free(S->host, k->host);
    k->host = NULL;
    chunks_set_clean(&S->chunks, c, false);
    S->host_chunks--;
    memory_changed();
}

/* Frees the host copies of clean resident chunks, lowest first, until one
 * chunk's extent fits in the pool without growing it, or none is left. It
 * looks at the clean chunks only (Note [The clean set] in chunks.h). */
static bool drop_clean_copies(void)
{
    bool dropped = false;
    for (size_t c = chunks_next_clean(&S->chunks, 0); c < S->nchunks;
         c = chunks_next_clean(&S->chunks, c + 1)) {
        chunk_t *k = &S->chunks.ch[c];
        if (k->state == RESIDENT && k->clean && k->xfer == NULL) {
            drop_host(c);
            dropped = true;
            void *p;
            if (hostpool_alloc(S->host, S->chunk, false, &p) == LMS_OK) {
                hostpool_free(S->host, p);
                return true;
            }
        }
    }
    return dropped;
}

/* An extent of the host pool for one chunk's copy: without growing the pool
 * if it can be helped (growing registers memory, which may synchronize the
 * device). Chunks evicted together usually get adjacent extents (the arena
 * hands out equal sizes in address order), and then move in one copy. */
static lms_status_t host_slot(char **out)
{
    if (S->host == NULL)
        return base_fail(LMS_ERR_OUT_OF_MEMORY, "lms: swapping is off (LMS_SWAP=0)");
    void *p = NULL;
    lms_status_t st = hostpool_alloc(S->host, S->chunk, false, &p);
    if (st != LMS_OK && drop_clean_copies())
        st = hostpool_alloc(S->host, S->chunk, false, &p);
    if (st != LMS_OK) {
        base_log(BASE_LOG_DEBUG, "lms: growing the host pool on the swap path");
        st = hostpool_alloc(S->host, S->chunk, true, &p);
    }
    if (st == LMS_OK)
        *out = p;
    return st;
}

/* How many of the chunks from c on (at most n) have adjacent host copies. */
static size_t host_run(size_t c, size_t n)
{
    size_t k = 1;
    while (k < n && S->chunks.ch[c + k].host == S->chunks.ch[c + k - 1].host + S->chunk)
        k++;
    return k;
}

/* ---- the block pool and the cached chunks ---------------------------------- */

/* Blocks that can be taken without unmapping anything, and those that can be
 * had without evicting anything (cached chunks' blocks too). */
static size_t unmapped_blocks(void) { return blocks_unmapped(&S->blocks); }
static size_t free_blocks(void) { return unmapped_blocks() + S->chunks.ncached; }

static void set_resident(size_t c, dev_block_t b)
{
    S->chunks.ch[c].block = b;
    S->chunks.ch[c].state = RESIDENT;
    chunks_set_clean(&S->chunks, c, false);
    S->chunks.ch[c].broken = false;
    if (++S->resident * S->chunk > S->stats.peak_resident_bytes)
        S->stats.peak_resident_bytes = S->resident * S->chunk;
    memory_changed();
}

static void set_unbacked(size_t c, uint8_t state)
{
    S->host_entries += state == HOST;
    blocks_put(&S->blocks, S->chunks.ch[c].block);
    S->chunks.ch[c].block = 0;
    S->chunks.ch[c].state = state;
    S->chunks.ch[c].broken = false;
    chunks_set_clean(&S->chunks, c, false); /* off the device: never read until set_resident */
    S->resident--;
    memory_changed();
}

/* Unmaps a cached chunk with no copy in flight and puts its block in the
 * pool. The caller made sure that no queued work can still touch a cached
 * chunk (see swap_sync_released). */
static lms_status_t uncache(size_t victim)
{
    lms_status_t st = dev_unmap(S->dev, chunk_addr(victim), S->chunk);
    if (st != LMS_OK)
        return st;
    chunks_cached_remove(&S->chunks, victim);
    drop_host(victim);
    set_unbacked(victim, UNBACKED);
    return LMS_OK;
}

/* uncache() of the first cached chunk with no copy in flight. */
static lms_status_t uncache_one(void)
{
    for (size_t i = 0; i < S->chunks.ncached; i++)
        if (S->chunks.ch[S->chunks.cached[i]].xfer == NULL)
            return uncache(S->chunks.cached[i]);
    return base_fail(LMS_ERR_OUT_OF_MEMORY, "lms: no free device block");
}

/* ---- copies in flight (transfers.h) ------------------------------------------ */

/* The copy x (NULL: one already waited for) has finished: settle the chunks
 * of [first, first + n) it covered. */
static void settle(size_t first, size_t n, const xfer_t *x)
{
    for (size_t c = first; c < first + n; c++) {
        chunk_t *k = &S->chunks.ch[c];
        if (k->xfer != x)
            continue;
        k->xfer = NULL;
        if (k->state == FETCHING)
            k->state = RESIDENT;
        if (k->state == RESIDENT && !k->free)
            chunks_set_clean(&S->chunks, c, k->host != NULL && !k->drop_host);
        if (k->drop_host || (k->free && k->host != NULL)) {
            k->drop_host = false;
            drop_host(c);
        }
    }
    /* unmap the chunks whose eviction this was, a run at a time */
    for (size_t c = first; c < first + n;) {
        if (S->chunks.ch[c].state != EVICTING || S->chunks.ch[c].xfer != NULL) {
            c++;
            continue;
        }
        size_t end = c + 1;
        while (end < first + n && S->chunks.ch[end].state == EVICTING && S->chunks.ch[end].xfer == NULL)
            end++;
        lms_status_t st = dev_unmap(S->dev, chunk_addr(c), (end - c) * S->chunk);
        for (; c < end; c++) {
            S->evicting--;
            if (st == LMS_OK) {
                set_unbacked(c, S->chunks.ch[c].host != NULL ? HOST : UNBACKED);
            } else { /* still mapped: it stays, with its now-current copy */
                S->chunks.ch[c].state = RESIDENT;
                chunks_set_clean(&S->chunks, c, true);
                chunks_lru_touch(&S->chunks, c);
            }
        }
        if (st != LMS_OK)
            base_log(BASE_LOG_WARN, "lms: an evicted run stays resident: %s", lms_last_error());
    }
}

/* The copy x has finished: settle the chunks it covered. */
static void settle_xfer(void *arg, const xfer_t *x)
{
    (void)arg;
    settle(x->first, x->n, x);
}

/* Settles the copies that have finished, at most `most` of each direction
 * (an eviction's unmap is a step of a pipelined swap: Note [Pipelined
 * swaps]). */
static lms_status_t progress_upto(size_t most)
{
    return transfers_progress(&S->xfers, most, settle_xfer, NULL);
}

static lms_status_t progress(void) { return progress_upto(SIZE_MAX); }

/* xfer_wait, settling as progress_upto does. */
static lms_status_t wait_xfer(xfer_t *x, size_t most)
{
    return xfer_wait(&S->xfers, x, most, settle_xfer, NULL);
}

/* wait_xfer on the oldest copy in flight (d2h first); LMS_OK if none. */
static lms_status_t wait_oldest(size_t most)
{
    xfer_t *x = transfers_oldest(&S->xfers);
    return x != NULL ? wait_xfer(x, most) : LMS_OK;
}

/* ---- eviction ---------------------------------------------------------------- */

static bool chunk_evictable(const chunks_t *t, size_t c)
{
    const chunk_t *k = &t->ch[c];
    return k->state == RESIDENT && k->xfer == NULL && k->holds == 0 && k->pins == 0 &&
           !k->free && !k->broken;
}

static bool evictable(size_t c) { return chunk_evictable(&S->chunks, c); }

/* Makes the d2h stream wait for the work that used the chunks [first,
 * first + n) on every stream (Note [Eviction fences]). */
static lms_status_t after_last_use(size_t first, size_t n)
{
    uint64_t mask = 0;
    for (size_t c = first; c < first + n; c++)
        mask |= S->chunks.ch[c].streams;
    for (size_t i = 0; i < S->streams.n && mask != 0; i++) {
        stream_t *s = S->streams.slot[i];
        uint64_t bit = 1ull << (i < 63 ? i : 63);
        if (s == NULL || !(mask & bit))
            continue;
        bool known = i < 63; /* the window after each one's last use here */
        uint32_t latest = 0;  /* the latest of those */
        for (size_t c = first; c < first + n && known; c++) {
            const chunk_t *k = &S->chunks.ch[c];
            if (!(k->streams & bit))
                continue;
            known = k->last_window != 0 && k->last_slot == i && k->last_gen == S->streams.generation_of[i];
            latest = known && k->last_window > latest ? k->last_window : latest;
        }
        dev_event_t *e = s->use_event;
        lms_status_t st = LMS_OK;
        if (known && latest > 0) {
            uint32_t oldest = s->windows > USE_RING ? s->windows - USE_RING + 1 : 1;
            e = s->after[(latest > oldest ? latest : oldest) % USE_RING];
        } else {
            st = dev_event_record(S->dev, e, s->dev);
        }
        if (st == LMS_OK)
            st = dev_stream_wait_event(S->dev, S->xfers.d2h, e);
        if (st != LMS_OK)
            return st;
    }
    return LMS_OK;
}

/* Starts evicting the run [first, first + *n) of evictable chunks, all
 * clean or all dirty, for `by`; when the host pool has slots for only some
 * of a dirty run, or a copy fails after others were queued, the first of
 * them (*n says how many). On failure nothing changed. */
static lms_status_t evict_run(size_t first, size_t *np, timeline_by_t by)
{
    uint64_t decided = timeline_on ? base_now_ns() : 0;
    size_t n = *np;
    bool clean = S->chunks.ch[first].clean;
    xfer_t *x = NULL;
    lms_status_t st = after_last_use(first, n);
    if (st == LMS_OK)
        st = xfer_new(&S->xfers, &x);
    size_t slots = 0;
    while (st == LMS_OK && !clean && slots < n)
        if ((st = host_slot(&S->chunks.ch[first + slots].host)) == LMS_OK)
            slots++;
    if (st == LMS_ERR_OUT_OF_MEMORY && slots > 0) /* the pool is full: evict what fits */
        n = slots, st = LMS_OK;
    /* one copy per run of adjacent host copies */
    size_t copied = 0;
    for (size_t c = first; st == LMS_OK && !clean && c < first + n;) {
        size_t k = host_run(c, first + n - c);
        if ((st = dev_copy_d2h(S->dev, S->xfers.d2h, S->chunks.ch[c].host, chunk_addr(c), k * S->chunk)) == LMS_OK)
            copied += k;
        c += k;
    }
    if (!clean) { /* the slots no copy reads go back: a failed copy evicts the rest */
        for (size_t c = first + copied; c < first + slots; c++)
            hostpool_free(S->host, S->chunks.ch[c].host);
        for (size_t c = first + copied; c < first + *np; c++)
            S->chunks.ch[c].host = NULL;
        n = copied;
    }
    if (st != LMS_OK && (clean || n == 0)) {
        xfer_discard(&S->xfers, x);
        return st;
    }
    if (st != LMS_OK)
        base_log(BASE_LOG_DEBUG, "lms: %zu of %zu chunks evicted: %s", n, *np, lms_last_error());
    *np = n;
    xfer_start(&S->xfers, x, first, n, n, true);
    for (size_t c = first; c < first + n; c++) {
        chunk_t *k = &S->chunks.ch[c];
        chunks_lru_remove(&S->chunks, c);
        k->prefetched = false;
        if (!clean)
            S->host_chunks++;
        k->state = EVICTING;
        k->xfer = x;
        S->evicting++;
    }
    if (clean) {
        S->stats.clean_drops += n;
    } else {
        S->stats.evictions += n;
        S->stats.bytes_d2h += n * S->chunk;
    }
    if (timeline_on) {
        timeline_evict(decided, n, n * S->chunk, !clean, by);
        memory_changed();
    }
    return LMS_OK;
}

/* The longest run around victim v of evictable chunks like it, at most
 * `want` chunks (and a piece: Note [Pipelined swaps]), of chunks policy/
 * ranks at least min_key (0: any); when ahead, none fetched ahead and not
 * yet used (evict_ranked). */
static void run_around(size_t v, size_t want, uint64_t min_key, bool ahead, size_t *first,
                       size_t *n)
{
    bool clean = S->chunks.ch[v].clean;
    size_t lo = v, hi = v + 1, cap = want < 1 ? 1 : want > S->piece ? S->piece : want;
#define LIKE(c) (evictable(c) && S->chunks.ch[c].clean == clean && !(ahead && S->chunks.ch[c].prefetched) && \
                 (min_key == 0 || policy_evict_key(S->policy, c) >= min_key))
    while (hi - lo < cap && hi < S->nchunks && LIKE(hi))
        hi++;
    while (hi - lo < cap && lo > 0 && LIKE(lo - 1))
        lo--;
#undef LIKE
    *first = lo;
    *n = hi - lo;
}

/* ---- victims by the schedule (Note [Prefetch]) ------------------------------ */

#define PREFETCH_WALK 4096 /* events a prefetch looks ahead at most */

static bool by_schedule(void) { return S->policy != NULL && policy_following(S->policy); }

/* Starts evicting about `want` chunks of the n ranked ones, best first
 * (neighbours go along when the schedule would evict them as soon: the
 * `want`-th victim's rank or better), but not, when ahead (evicting ahead
 * of need: the reclaim thread), chunks fetched ahead and not yet used: a
 * prefetch and a reclaim must not take turns on a chunk. `by` is who asks
 * (for the timeline). The number started; *st says why an eviction failed. */
static size_t evict_ranked(size_t n, size_t want, bool ahead, timeline_by_t by, lms_status_t *st)
{
    size_t started = 0;
    *st = LMS_OK;
    uint64_t min_key = n == 0 || want == 0 ? 0 : S->rank.ranked[(want < n ? want : n) - 1].key;
    for (size_t i = 0; i < n && started < want; i++) {
        size_t c = S->rank.ranked[i].chunk, first, run;
        if (!evictable(c) || (ahead && S->chunks.ch[c].prefetched)) /* gone with an earlier run */
            continue;
        run_around(c, want - started, min_key > 0 ? min_key : 1, ahead, &first, &run);
        if ((*st = evict_run(first, &run, by)) != LMS_OK)
            break;
        started += run;
    }
    return started;
}

/* Starts evicting about `want` chunks: the ones the schedule uses furthest
 * ahead while it is followed (with `ahead`, not those fetched ahead and
 * unused), else the least recently used. The number started, 0 if nothing
 * is evictable; *st says why an eviction failed. */
static size_t evict_some(size_t want, bool ahead, timeline_by_t by, lms_status_t *st)
{
    size_t started = 0;
    *st = LMS_OK;
    if (by_schedule()) {
        started = evict_ranked(ranking_victims(&S->rank, want, S->resident), want, ahead, by, st);
        if (started < want && *st == LMS_OK) { /* what became evictable since, in full */
            ranking_stale_full(&S->rank);
            started += evict_ranked(ranking_victims(&S->rank, want - started, S->resident), want - started, ahead, by, st);
        }
        return started;
    }
    uint32_t c = S->chunks.lru_head;
    while (c != NO_CHUNK && started < want) {
        uint32_t next = S->chunks.ch[c].lru_next;
        if (evictable(c)) {
            size_t first, n;
            run_around(c, want - started, 0, false, &first, &n);
            if ((*st = evict_run(first, &n, by)) != LMS_OK)
                break;
            started += n;
            next = S->chunks.lru_head; /* the list changed around c */
        }
        c = next;
    }
    return started;
}

static void prefetch(void);

/* The reclaim thread's watermarks, in blocks free or on their way: while
 * the schedule is followed, what the events ahead need (policy_prefetch's
 * blocks_ahead, at least one): keeping more free only shrinks the device;
 * else LMS_RECLAIM_LOW and _HIGH (Note [Prefetch]). */
static size_t reclaim_low(void)
{
    return by_schedule() ? (S->pf.blocks_ahead > 0 ? S->pf.blocks_ahead : 1) : S->rc.low;
}

static size_t reclaim_high(void) { return by_schedule() ? reclaim_low() : S->rc.high; }

/* ---- the reclaim thread -------------------------------------------------------- */

/* Keeps free blocks between the watermarks, the way kswapd keeps free pages,
 * and the host pool registered ahead of need. Runs with the lock held, except
 * while it waits. */
static void *reclaim_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&swap_lock);
    while (!S->rc.stop) {
        (void)progress();
        prefetch(); /* blocks freed since the last access may take what it reads next */
        size_t have = free_blocks() + S->evicting;
        if (have < reclaim_low()) {
            lms_status_t st;
            evict_some(reclaim_high() - have, true, TIMELINE_BY_RECLAIM, &st);
            if (st != LMS_OK)
                base_log(BASE_LOG_DEBUG, "lms reclaim: %s", lms_last_error());
        }
        hostpool_usage_t hu;
        hostpool_usage(S->host, &hu);
        size_t headroom = 2 * S->rc.high * S->chunk;
        if (hu.registered < hu.limit && hu.registered - hu.allocated < headroom)
            (void)hostpool_reserve(S->host, headroom);
        if (timeline_on)
            timeline_tick();
        if (S->evicting > 0 && S->xfers.list[1] != NULL && wait_oldest(SIZE_MAX) == LMS_OK)
            continue;
        struct timespec until = swap_deadline(50 * 1000 * 1000);
        pthread_cond_timedwait(&S->rc.wake, &swap_lock, &until);
    }
    pthread_mutex_unlock(&swap_lock);
    return NULL;
}

/* Timed waits on the condition variables here run on CLOCK_MONOTONIC: a
 * deadline on the wall clock moved with it, and a step back of the clock
 * (NTP, an administrator) stalled the reclaim thread for as long. */
static int cond_init_monotonic(pthread_cond_t *c)
{
    pthread_condattr_t attr;
    int err = pthread_condattr_init(&attr);
    if (err != 0)
        return err;
    if ((err = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC)) == 0)
        err = pthread_cond_init(c, &attr);
    pthread_condattr_destroy(&attr);
    return err;
}

struct timespec swap_deadline(uint64_t ns)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    uint64_t nsec = (uint64_t)t.tv_nsec + ns % 1000000000u;
    t.tv_sec += (time_t)(ns / 1000000000u + nsec / 1000000000u);
    t.tv_nsec = (long)(nsec % 1000000000u);
    return t;
}

void resid_start(void)
{
    if (pthread_create(&S->rc.thread, NULL, reclaim_main, NULL) == 0)
        S->rc.started = true;
    else
        base_log(BASE_LOG_WARN, "lms: no reclaim thread; evictions happen on demand only");
}

void resid_stop(void)
{
    if (!S->rc.started)
        return;
    S->rc.stop = true;
    pthread_cond_signal(&S->rc.wake);
    pthread_mutex_unlock(&swap_lock);
    pthread_join(S->rc.thread, NULL);
    pthread_mutex_lock(&swap_lock);
    S->rc.started = false;
}

/* ---- init and teardown ------------------------------------------------------------ */

/* The reclaim watermarks must lie inside the device limit, and low at most
 * high when both are set: a high watermark past the limit left room for
 * almost nothing (issue 24: with 1G and 2G on 320 MiB, 64 MiB could be
 * allocated). Bad ones are said and both defaults used (0). One set alone
 * moves the other's default: high is at least low + 1 chunk (resid_init). */
static void check_watermarks(size_t *low, size_t *high)
{
    char a[32], b[32], c[32];
    size_t limit = S->budget * S->chunk;
    const char *wrong = *low >= limit && *low != 0               ? "LMS_RECLAIM_LOW"
                        : *high >= limit && *high != 0           ? "LMS_RECLAIM_HIGH"
                        : *low != 0 && *high != 0 && *low > *high ? "low above high"
                                                                 : NULL;
    if (wrong == NULL)
        return;
    base_log(BASE_LOG_WARN, "LMS_RECLAIM_LOW=%s, LMS_RECLAIM_HIGH=%s: %s: each must be less "
             "than the device limit (%s), and low at most high; using the defaults (limit / 32 "
             "and limit / 16)", swap_fmt(*low, a), swap_fmt(*high, b), wrong, swap_fmt(limit, c));
    *low = *high = 0;
}

lms_status_t resid_init(void)
{
    size_t chunk = S->chunk;
    lms_status_t st = chunks_init(&S->chunks, S->nchunks);
    if (st == LMS_OK)
        st = blocks_init(&S->blocks, S->dev, S->budget);
    if (st != LMS_OK)
        return st;
    size_t low_b = S->cfg.reclaim_low, high_b = S->cfg.reclaim_high;
    check_watermarks(&low_b, &high_b);
    size_t low = low_b ? low_b / chunk : S->budget / 32;
    size_t high = high_b ? high_b / chunk : S->budget / 16;
    S->rc.low = low < 1 ? 1 : low;
    S->rc.high = high <= S->rc.low ? S->rc.low + 1 : high;
    size_t piece = (S->cfg.swap_piece ? S->cfg.swap_piece : PIECE_BYTES) / chunk;
    S->piece = piece < 1 ? 1 : piece > MAX_RUN ? MAX_RUN : piece;
    S->rc.wake_made = cond_init_monotonic(&S->rc.wake) == 0;
    S->holds.unheld_made = S->rc.wake_made && cond_init_monotonic(&S->holds.unheld) == 0;
    if (!S->holds.unheld_made)
        return base_fail(LMS_ERR_SYSTEM, "lms_init: pthread_cond_init failed");
    if ((st = transfers_init(&S->xfers, S->dev, &S->events, chunk)) != LMS_OK)
        return st;
    hostpool_config_t hc = {.dev = S->dev, .limit = S->host_limit, .piece = 0,
                            .numa_node = S->dev->info.host_numa_node};
    if (S->cfg.swap && (st = hostpool_create(&hc, &S->host)) != LMS_OK)
        return st;
    if (S->cfg.swap) {
        policy_config_t pc = {.nchunks = S->nchunks, .lru = S->cfg.policy_lru};
        if ((st = policy_create(&pc, &S->policy)) != LMS_OK ||
            (st = ranking_init(&S->rank, &S->chunks, S->policy, chunk_evictable)) != LMS_OK)
            return st;
        S->pf.ahead = base_meta_calloc(S->piece, sizeof *S->pf.ahead);
        S->pf.fetch_list = base_meta_calloc(S->piece, sizeof *S->pf.fetch_list);
        if (!S->pf.ahead || !S->pf.fetch_list)
            return base_fail(LMS_ERR_OUT_OF_MEMORY, "lms_init: no host memory for the policy");
    }
    S->stats.device_limit = S->budget * chunk;
    S->stats.host_limit = S->host_limit;
    return LMS_OK;
}

void resid_destroy(void)
{
    transfers_destroy(&S->xfers);
    hostpool_destroy(S->host); /* every host copy with it */
    ranking_destroy(&S->rank);
    policy_destroy(S->policy);
    base_meta_free(S->pf.ahead);
    base_meta_free(S->pf.fetch_list);
    blocks_destroy(&S->blocks);
    chunks_destroy(&S->chunks);
    if (S->rc.wake_made) /* a start that failed before resid_init made them: not */
        pthread_cond_destroy(&S->rc.wake);
    if (S->holds.unheld_made)
        pthread_cond_destroy(&S->holds.unheld);
}

/* ---- placement and frees --------------------------------------------------------- */

void resid_placed(alloc_chunks_t used)
{
    for (size_t c = used.first; c < used.first + used.n; c++) {
        chunk_t *k = &S->chunks.ch[c];
        k->free = false;
        /* mapped already (cached), it is reused as is; but work queued
         * before its free may still be waiting to use it when the free was
         * released at once (one stream: Note [Stream-ordered free] in
         * lms.c), so its eviction waits for the default stream, the only
         * stream then, until swap_sync_released says that work is done */
        bool cached = chunks_is_cached(&S->chunks, c);
        k->streams = cached && S->streams.released_synced < S->streams.released_at_once ? 1 : 0;
        k->last_window = 0;
        if (cached) {
            chunks_cached_remove(&S->chunks, c);
            chunks_lru_touch(&S->chunks, c);
        }
    }
}

void resid_freed(alloc_chunks_t freed)
{
    for (size_t c = freed.first; c < freed.first + freed.n; c++) {
        chunk_t *k = &S->chunks.ch[c];
        k->free = true;
        k->prefetched = false;
        chunks_lru_remove(&S->chunks, c);
        if (k->pins > 0) {
            k->pins = 0;
            S->pinned--;
        }
        switch (k->state) {
        case UNBACKED:
            break;
        case HOST:
            drop_host(c);
            k->state = UNBACKED;
            break;
        case EVICTING: /* the copy finishes unneeded; the chunk stays mapped */
            S->evicting--;
            k->state = RESIDENT;
            drop_host(c);
            chunks_cached_add(&S->chunks, c);
            break;
        case FETCHING: /* stays mapped; the next user waits for the copy */
            k->state = RESIDENT;
            drop_host(c);
            chunks_cached_add(&S->chunks, c);
            break;
        case RESIDENT:
            drop_host(c);
            chunks_cached_add(&S->chunks, c);
            break;
        }
        chunks_set_clean(&S->chunks, c, false);
    }
}

void resid_dead(alloc_chunks_t dead)
{
    for (size_t c = dead.first; c < dead.first + dead.n; c++) {
        chunk_t *k = &S->chunks.ch[c];
        if (k->state == HOST) {
            drop_host(c);
            k->state = UNBACKED;
        } else if (k->state == RESIDENT && k->xfer == NULL) {
            drop_host(c);
            chunks_set_clean(&S->chunks, c, true); /* with no host copy: evicting it drops it */
        }
    }
}

void resid_free_event(alloc_chunks_t gone)
{
    if (S->policy != NULL && gone.n > 0 &&
        report(gone.first, gone.n, POLICY_FREE, base_now_ns()) != LMS_OK)
        base_log(BASE_LOG_DEBUG, "lms: policy: %s", lms_last_error());
}

lms_status_t resid_mark_iteration(void)
{
    lms_status_t st = S->policy != NULL ? policy_mark_iteration(S->policy) : LMS_OK;
    if (timeline_on && st == LMS_OK)
        timeline_iteration();
    return st;
}

/* ---- access ---------------------------------------------------------------------- */

/* Chunk c was mapped onto a block for an access that failed, and holds no
 * data yet: gives the block back, leaving c in state `was` (UNBACKED, or
 * HOST: its host copy is its data). Should the driver refuse the unmap too,
 * c stays mapped and becomes an ordinary resident chunk instead: made
 * accessible, and refilled from its host copy (FETCHING). Should that fail
 * as well, c is left broken: resident, keeping its host copy, never evicted,
 * and repaired (this again) before any access uses it (repair_broken). */
static void unmap_unused(size_t c, uint8_t was)
{
    chunk_t *k = &S->chunks.ch[c];
    if (dev_unmap(S->dev, chunk_addr(c), S->chunk) == LMS_OK) {
        chunks_lru_remove(&S->chunks, c);
        set_unbacked(c, was);
        return;
    }
    char why[256];
    snprintf(why, sizeof why, "%s", lms_last_error());
    k->state = RESIDENT;
    chunks_set_clean(&S->chunks, c, false);
    chunks_lru_touch(&S->chunks, c);
    lms_status_t st = dev_set_access(S->dev, chunk_addr(c), S->chunk);
    xfer_t *x = NULL;
    if (st == LMS_OK && was == HOST && (st = xfer_new(&S->xfers, &x)) == LMS_OK &&
        (st = dev_copy_h2d(S->dev, S->xfers.h2d, chunk_addr(c), k->host, S->chunk)) != LMS_OK)
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

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
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
                     op, need, swap_fmt(S->resident * S->chunk, a), swap_fmt(S->budget * S->chunk, b),
                     swap_fmt(S->pinned * S->chunk, c));
}

/* Waits, lock dropped, up to 1 ms for another thread to close its window. */
static void wait_for_holds(void)
{
    struct timespec until = swap_deadline(1000 * 1000);
    S->holds.waiters++;
    pthread_cond_timedwait(&S->holds.unheld, &swap_lock, &until);
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
        k->early = 0;
        chunks_lru_remove(&S->chunks, c);
        set_unbacked(c, k->host != NULL ? HOST : UNBACKED);
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
        (void)progress_upto(most);
        size_t need = blocks_needed(u, n), have = unmapped_blocks();
        if (need <= have)
            break;
        /* memory released at once (one-stream rule) may still be in use by
         * the default stream: stealing it waits for that first */
        if (S->chunks.ncached > 0 && S->streams.released_synced < S->streams.released_at_once && syncs++ < 100) {
            if ((st = swap_sync_released()) != LMS_OK)
                break;
            continue;
        }
        for (size_t i = 0; i < S->chunks.ncached; i++) /* those with no copy in flight */
            have += S->chunks.ch[S->chunks.cached[i]].xfer == NULL;
        if (need <= have)
            break;
        if (t0 == 0)
            t0 = base_now_ns();
        size_t want = need - have, started = 0;
        lms_status_t est = LMS_OK;
        if (S->evicting < want)
            started = evict_some(want - S->evicting, false, TIMELINE_BY_DIRECT, &est);
        /* a copy in flight frees a block, or leaves a chunk evictable (a
         * fetched one, or one touched while it was being evicted) */
        if (started > 0 || !transfers_idle(&S->xfers)) {
            if (early != NULL && have >= S->piece) {
                *partial = have;
                *early = true;
                break;
            }
            if ((st = wait_oldest(most)) != LMS_OK)
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
        size_t e = i + 1;
        while (e < j && S->chunks.ch[u[e]].state == HOST && (S->chunks.ch[u[e]].acc & ACC_NEED_DATA) &&
               S->chunks.ch[u[e]].host == S->chunks.ch[u[e - 1]].host + S->chunk)
            e++;
        if (*x == NULL && (st = xfer_new(&S->xfers, x)) != LMS_OK)
            break;
        st = dev_copy_h2d(S->dev, S->xfers.h2d, chunk_addr(u[i]), k->host, (e - i) * S->chunk);
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

/* Maps and fetches what the unique, sorted chunks u[0..n) need (with
 * `partial` > 0: that many of them, chosen by takes_block), on demand or
 * (ahead) as a prefetch; *brought says how many it mapped. Access is set
 * and the copies in queued a piece at a time, so that the copy of one piece
 * runs while the next is made accessible (Note [Pipelined swaps]). On
 * failure it undoes the maps whose chunks no copy fills. */
static lms_status_t bring_in(uint32_t *u, size_t n, size_t partial, bool early, bool ahead,
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
    while (unmapped_blocks() < to_map) {
        lms_status_t st = uncache_one();
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
        dev_block_t b;
        if ((st = blocks_take(&S->blocks, &b)) != LMS_OK)
            break;
        if ((st = dev_map(S->dev, chunk_addr(c), b)) != LMS_OK) {
            blocks_put(&S->blocks, b);
            break;
        }
        uint8_t was = k->state;
        set_resident(c, b);
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
        while (j < mapped && j - i < S->piece && (S->chunks.ch[u[j]].acc & ACC_MAPPED) && u[j] == u[j - 1] + 1)
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

/* ---- reporting to policy/, and prefetch (Note [Prefetch]) --------------------- */

/* Reports the access of the sorted chunks u[0..n) (acc: which need their
 * data), an event per run of consecutive chunks of one kind. */
static void report_access(const uint32_t *u, size_t n)
{
    if (S->policy == NULL)
        return;
    uint64_t now = base_now_ns();
    for (size_t i = 0; i < n;) {
        bool use = S->chunks.ch[u[i]].acc & ACC_NEED_DATA;
        size_t j = i + 1;
        while (j < n && u[j] == u[j - 1] + 1 && (bool)(S->chunks.ch[u[j]].acc & ACC_NEED_DATA) == use)
            j++;
        if (report(u[i], j - i, use ? POLICY_USE : POLICY_OVERWRITE, now) !=
            LMS_OK) {
            base_log(BASE_LOG_DEBUG, "lms: policy: %s", lms_last_error());
            return;
        }
        i = j;
    }
}

/* For policy_prefetch. A chunk being evicted, or one an access under way
 * holds and has not brought in yet (it may be waiting in make_room for
 * blocks), is not a prefetch's to fetch, but needs a block at its use:
 * free blocks a prefetch took would be the ones that access waits for. */
static policy_need_t chunk_need(void *arg, uint32_t c)
{
    (void)arg;
    const chunk_t *k = &S->chunks.ch[c];
    if (k->state == RESIDENT || k->state == FETCHING)
        return POLICY_HAS;
    if (k->state == EVICTING || k->holds > 0)
        return POLICY_CLAIMED;
    return k->state == HOST && !k->free ? POLICY_ON_HOST : POLICY_NO_DATA;
}

/* Fetches ahead what the schedule reads next, at most a piece, as
 * policy_prefetch says: a fetch takes a free block (or one on its way) if
 * the new data and fetches before it leave one (blocks_before), else the
 * block of the ranked victim that many further down, if MIN would evict it
 * (evict_after; Note [Prefetch without harm] in policy.c). Those victims
 * are evicted now; their fetches wait for a later call. Nothing waits for
 * a prefetch, so a failure is only logged. */
static void prefetch(void)
{
    if (!by_schedule() || S->host == NULL)
        return;
    /* nothing can need a fetch that did not when last looked, unless a chunk
     * went to the host since or the position moved past what was looked at */
    policy_usage_t u;
    policy_usage(S->policy, &u);
    size_t moved = (u.position + u.schedule_events - S->pf.walk_pos) % u.schedule_events;
    size_t spare = free_blocks() + S->evicting;
    if (S->pf.walk_found_none && S->host_entries == S->pf.walk_host_entries &&
        (u.schedule_events <= PREFETCH_WALK || moved < PREFETCH_WALK / 2) &&
        (S->host_chunks == 0 || (spare <= S->pf.walk_spare && S->xfers.h2d_queued >= S->pf.walk_queued)))
        return; /* more room, or a shorter queue, matters only with data on the host */
    policy_link_t link = {.bytes_per_ns = transfers_h2d_rate(&S->xfers),
                          .chunk_bytes = S->chunk,
                          .max_events = PREFETCH_WALK,
                          .free_blocks = spare,
                          .queued_bytes = S->xfers.h2d_queued * S->chunk};
    int64_t ahead;
    size_t n = policy_prefetch(S->policy, &link, chunk_need, NULL, S->pf.ahead, S->piece, &ahead);
    S->pf.blocks_ahead = ahead > 0 ? (size_t)ahead : 0;
    S->pf.walk_found_none = n == 0;
    S->pf.walk_host_entries = S->host_entries;
    S->pf.walk_pos = u.position;
    S->pf.walk_spare = spare;
    S->pf.walk_queued = S->xfers.h2d_queued;
    /* the reclaim thread keeps a block free: a fetch into that one only
     * makes it evict the top-ranked chunk, so it is that chunk's place,
     * taken on the same condition (else reclaim and prefetch take turns,
     * each evicting what the other fetched) */
    size_t room = spare > 0 ? spare - 1 : 0;
    size_t ok = 0, evict = 0, m = 0;
    lms_status_t st = LMS_OK;
    for (; ok < n; ok++) {
        int64_t slot = S->pf.ahead[ok].blocks_before;
        if (room > 0 && slot < (int64_t)room)
            continue;
        if (m == 0 && (m = ranking_victims(&S->rank, n, S->resident)) == 0)
            break;
        size_t r = slot > (int64_t)room ? (size_t)slot - room : 0;
        if (r >= m && ranking_shallow(&S->rank, r)) { /* deeper into the full one */
            ranking_stale(&S->rank);
            m = ranking_victims(&S->rank, 2 * (r + 1), S->resident); /* (doubling: few of these a look) */
        }
        if (r >= m || S->rank.ranked[r].key <= S->pf.ahead[ok].evict_after)
            break;
        evict = r + 1 > evict ? r + 1 : evict;
    }
    if (evict > 0) { /* ranked[0 .. evict): MIN's, for these and the demands before them */
        evict_ranked(m, evict, true, TIMELINE_BY_PREFETCH, &st);
        /* the reclaim thread settles these copies as they end, and then
         * fetches what waits for their blocks: no access may come to do it
         * (up to its 50 ms sleep, seen in bench/swap; issue 24) */
        pthread_cond_signal(&S->rc.wake);
    }
    size_t now = ok < n ? ok : n;
    now = now < unmapped_blocks() ? now : unmapped_blocks(); /* the rest once evicted */
    if (now > 0) {
        uint32_t stamp = ++S->chunks.stamp;
        for (size_t i = 0; i < now; i++) {
            chunk_t *k = &S->chunks.ch[S->pf.ahead[i].chunk];
            k->stamp = stamp;
            k->acc = ACC_NEED_DATA;
            S->pf.fetch_list[i] = S->pf.ahead[i].chunk;
        }
        qsort(S->pf.fetch_list, now, sizeof *S->pf.fetch_list, cmp_u32);
        size_t brought;
        lms_status_t bst = bring_in(S->pf.fetch_list, now, 0, false, true, &brought);
        for (size_t i = 0; i < now; i++)
            S->chunks.ch[S->pf.fetch_list[i]].prefetched = S->chunks.ch[S->pf.fetch_list[i]].state == FETCHING;
        st = st != LMS_OK ? st : bst;
    }
    if (st != LMS_OK)
        base_log(BASE_LOG_DEBUG, "lms: prefetch: %s", lms_last_error());
}

lms_status_t resid_access(const char *op, const lms_range_t *r, size_t n, stream_t *s, int slot,
                          int pin)
{
    /* validate everything first: a bad range changes nothing */
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
    return resid_back(op, r, n, s, slot, pin);
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
    W.gen = s != NULL ? S->streams.generation_of[slot] : 0;
    W.full_at = S->rank.rankings_full;
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
    qsort(u, nu, sizeof *u, cmp_u32);
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
        if ((st = bring_in(u, nu, partial, early, false, &brought)) != LMS_OK)
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
            k->state = RESIDENT;
            S->evicting--;
        }
        if (k->acc & ACC_WRITES) {
            chunks_set_clean(&S->chunks, c, false);
            drop_host(c);
        }
        k->acc &= (uint8_t)~ACC_OVER_HOST;
        k->early = 0; /* used from here on: no longer the early step's to give back */
        if (s != NULL)
            k->streams |= bit;
        if (pin && k->pins++ == 0)
            S->pinned++;
        chunks_lru_touch(&S->chunks, c);
    }
    report_access(u, nu);
    /* pinned memory is used from any stream with no further word: wait here
     * until every copy into it has finished */
    for (size_t i = 0; pin && i < W.n;) {
        xfer_t *x = S->chunks.ch[W.chunks[i]].xfer;
        if (x == NULL) {
            i++;
            continue;
        }
        if ((st = wait_xfer(x, SIZE_MAX)) != LMS_OK) { /* its end cannot be known: not pinned */
            for (size_t j = 0; j < nu; j++)
                if (--S->chunks.ch[u[j]].pins == 0)
                    S->pinned--;
            return st;
        }
        i = 0;
    }
    if (st == LMS_OK)
        prefetch();
    if (free_blocks() + S->evicting < reclaim_low())
        pthread_cond_signal(&S->rc.wake);
    return st;
}

/* Takes `times` pins off the chunks of [offset, offset + bytes): lms.c's pin
 * records say that lms_pin put them there. */
void resid_unpin(size_t offset, size_t bytes, uint32_t times)
{
    size_t first = offset / S->chunk, last = (offset + bytes - 1) / S->chunk;
    for (size_t c = first; c <= last; c++) {
        chunk_t *k = &S->chunks.ch[c];
        /* work on any stream may have used it meanwhile */
        k->streams = ALL_STREAMS;
        k->last_window = 0;
        if (k->pins == 0)
            continue; /* resid_freed dropped them (defensive: records go first) */
        k->pins = k->pins > times ? k->pins - times : 0;
        if (k->pins == 0)
            S->pinned--;
    }
}

void resid_stats(lms_stats_t *out)
{
    *out = S->stats;
    alloc_usage_t u;
    alloc_usage(S->alloc, &u);
    out->resident_bytes = S->resident * S->chunk;
    out->host_bytes = S->host_chunks * S->chunk;
    out->pinned_bytes = S->pinned * S->chunk;
    out->allocated_bytes = u.used_chunks * S->chunk;
}

/* ---- lms_empty_cache ---------------------------------------------------------- */

/* Cached chunks (freed, still mapped) give their blocks to the pool once no
 * queued work can use them (as an access that takes them: swap_sync_released),
 * and the pool's blocks go back to the driver; created counts them out, so
 * take_block creates them again within the budget. */
lms_status_t resid_empty_cache(void)
{
    (void)progress(); /* copies that finished let their chunks go */
    lms_status_t st = LMS_OK;
    if (S->chunks.ncached > 0 && S->streams.released_synced < S->streams.released_at_once)
        st = swap_sync_released();
    /* every cached chunk with no copy in flight, in one pass, in the order
     * repeated uncache_one() calls took them: uncaching cached[i] moves the
     * last entry into i, and the entries before i keep their copies */
    for (size_t i = 0; st == LMS_OK && i < S->chunks.ncached;)
        if (S->chunks.ch[S->chunks.cached[i]].xfer != NULL)
            i++;
        else
            st = uncache(S->chunks.cached[i]);
    return st == LMS_OK ? blocks_release_pool(&S->blocks) : st;
}
