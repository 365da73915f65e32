/*
 * swap/residency.c — which chunk is where: the chunk states and their
 * changes, host copies, the settling of finished copies, init and teardown,
 * placement and frees, and lms_empty_cache. Eviction is in evict.c, access
 * windows (make_room, bring_in) in window.c, prefetch in prefetch.c, the
 * reclaim thread in reclaim.c; residency.h is what they share. The caller
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
 * Note [Evicted chunks stay mapped]
 * In host mode (LMS_EVICTED=host, Note [Evicted mode] in config.c) the host
 * pool is one of host blocks (Note [Pools of host blocks] in hostpool.c),
 * and a HOST chunk's VA maps its host copy's block (chunk_t.va = VA_HOST),
 * so that a kernel lms did not see reads and writes it over the link
 * instead of faulting. Its data has one home, the host block, reached at
 * two addresses (the pool's window, which copies use, and the chunk's VA):
 *   - an eviction, once its D2H copy has ended (at once for a clean drop),
 *     unmaps the device block, then maps each chunk's host block at its VA
 *     and opens the run with one set_access_host (retire, resid_host_map);
 *   - a fetch, or an overwrite over the host copy, unmaps the host mapping
 *     before it maps a device block there (window.c: resid_bring_in), so
 *     the H2D copy, queued after, reads what any write through the VA left;
 *   - a free unmaps it before the host copy goes (resid_drop_host);
 *   - every path that gives a HOST chunk's device block back unmapped
 *     (window.c: unmap_unused, give_back_early, undo_overwrites and the
 *     failures of a fetch) maps its host copy again (resid_host_remap_one).
 * A host map or set_access that fails leaves the chunk where its data is
 * still reachable: an eviction's chunk goes back onto its block, which
 * still holds the data, and stays resident and clean; a free whose unmap
 * fails keeps the host copy mapped (the chunk stays HOST, free) until its
 * next use unmaps it. Only when the device block cannot be mapped back
 * either is a chunk left unmapped, with a warning (its next fetch maps it).
 * The remaps are made where the state changes, except an eviction's while
 * another D2H copy runs: that one waits on its device block (Note [Remap
 * beside copies]). In unmapped mode (the
 * default) none of this runs: va is VA_DEVICE or VA_NONE.
 *
 * Note [Remap beside copies]
 * An eviction's host map ends with a set_access_host, which beside a D2H
 * copy costs some 33 times what it costs on an idle link and holds every
 * other VMM call back (Note [VMM beside copies] in prefetch.c). So when an
 * eviction's copy has ended while another copy out is still in flight
 * (transfers_d2h_copying), its chunks with a host copy stay EVICTING, on
 * their device blocks, mapped and accessible there, and wait (chunk_t.remap,
 * counted in prefetcher_t.remaps): their data is on both sides, and a kernel
 * lms did not see reads and writes the device block as it did a moment
 * before. Their unmap and host map are made together (retire), a run and
 * one set_access_host at a time, by resid_host_flush:
 *   - when the D2H direction goes idle (settle_xfer, after the last copy
 *     out is seen to end), as the prefetch's deferred VMM work is;
 *   - when an access needs blocks and finds too few free (make_room in
 *     window.c): what waits then is a kernel, and it goes at once, beside
 *     the copies, as a fetch a kernel waits for does; and in
 *     lms_empty_cache;
 *   - a chunk touched meanwhile is resident again (as any chunk touched
 *     while EVICTING), and a freed one is cached: both leave the queue
 *     (resid_host_unpend), their device block kept;
 *   - like EVICTING ones with a copy in flight, waiting chunks count as
 *     blocks on their way (S->evicting) for the prefetch and the reclaim
 *     thread, are no victims, and evictions nothing waits for do not start
 *     while any wait (resid_evict_ranked in evict.c), as for deferred
 *     prefetches.
 * So an evicted chunk's VA maps something at every moment lms's lock is
 * free: its device block until the remap, its host copy after. The one
 * moment it maps nothing is inside retire, between the unmap and the
 * set_access: a kernel that touches it unseen at that moment, on the GPU
 * already, still faults (the driver has no call that swaps one mapping
 * for another). swap_config_t.vmm_unordered retires at once, beside the
 * copies, only to measure what this gains. The simulator models the same
 * rule (Note [Host-mapped eviction in the simulator] in
 * bench/simulate_model.c).
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
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "swap/residency.h"

#define ALL_STREAMS UINT64_MAX

/* ---- the timeline (swap/trace.h): one branch each while none is written ---- */

/* policy_access; with a timeline, an iteration mark for each iteration the
 * policy found ending with it (Note [Finding the iteration] in policy.c). */
lms_status_t resid_report(size_t first, size_t n, policy_kind_t kind, uint64_t now)
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

void resid_drop_host(size_t c)
{
    chunk_t *k = &S->chunks.ch[c];
    if (k->host == NULL)
        return;
    resid_host_unpend(c);
    if (k->va == VA_HOST && resid_host_unmap(c) != LMS_OK) { /* Note [Evicted chunks stay mapped] */
        base_log(BASE_LOG_WARN, "lms: the host copy of the chunk at 0x%llx stays mapped there "
                 "until its next use: %s", (unsigned long long)chunk_addr(c), lms_last_error());
        return;
    }
    if (k->xfer != NULL) { /* a copy still uses it: complete() drops it */
        k->drop_host = true;
        return;
    }
    resid_host_free(k->host);
    k->host = NULL;
    chunks_set_clean(&S->chunks, c, false);
    S->host_chunks--;
    resid_memory_changed();
}

void resid_host_free(void *p)
{
    if (hostpool_free(S->host, p) != LMS_OK) /* not one the pool handed out: a bug of lms's */
        base_log(BASE_LOG_WARN, "lms: a host copy went back to the pool: %s", lms_last_error());
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
            resid_drop_host(c);
            dropped = true;
            void *p;
            if (hostpool_alloc(S->host, S->chunk, false, &p) == LMS_OK) {
                resid_host_free(p);
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
lms_status_t resid_host_slot(char **out)
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

/* How many of the chunks from c on (at most n) have adjacent host copies
 * that one copy may span: one where they are host blocks the device does
 * not copy across (dev_info_t.host_block_runs). */
size_t resid_host_run(size_t c, size_t n)
{
    if (resid_host_mode() && !S->dev->info.host_block_runs)
        return 1;
    size_t k = 1;
    while (k < n && S->chunks.ch[c + k].host == S->chunks.ch[c + k - 1].host + S->chunk)
        k++;
    return k;
}

/* ---- host-mapped eviction (Note [Evicted chunks stay mapped]) --------------- */

/* In host mode, maps the host copies of the chunks of [first, first + n)
 * that have one and whose VA maps nothing, each at its VA, and opens each
 * run of consecutive ones with one set_access_host. On failure the chunks
 * of the run that failed are unmapped again (VA_NONE: the caller looks at
 * each chunk's va), the runs before stay mapped, and the error is returned. */
lms_status_t resid_host_map(size_t first, size_t n)
{
    if (!resid_host_mode())
        return LMS_OK;
    lms_status_t st = LMS_OK;
    for (size_t c = first; c < first + n && st == LMS_OK;) {
        if (S->chunks.ch[c].host == NULL || S->chunks.ch[c].va != VA_NONE) {
            c++;
            continue;
        }
        size_t end = c, mapped = c;
        while (end < first + n && S->chunks.ch[end].host != NULL &&
               S->chunks.ch[end].va == VA_NONE)
            end++;
        for (; mapped < end && st == LMS_OK; mapped++) {
            dev_block_t b;
            if ((st = hostpool_block(S->host, S->chunks.ch[mapped].host, &b)) != LMS_OK ||
                (st = dev_map(S->dev, chunk_addr(mapped), b)) != LMS_OK)
                break;
            S->chunks.ch[mapped].va = VA_HOST;
        }
        if (st == LMS_OK) {
            S->pf.remaps_beside += !S->pf.access_waits && transfers_d2h_copying(&S->xfers);
            st = dev_set_access_host(S->dev, chunk_addr(c), (end - c) * S->chunk);
        }
        if (st != LMS_OK) { /* mapped but not accessible: unmapped again, one at a time */
            char why[256];
            snprintf(why, sizeof why, "%s", lms_last_error());
            for (size_t m = c; m < mapped; m++)
                if (S->chunks.ch[m].va == VA_HOST)
                    (void)resid_host_unmap(m); /* should it fail, it stays VA_HOST */
            return base_fail(st, "%s", why);
        }
        c = end;
    }
    return LMS_OK;
}

/* Unmaps the host copy mapped at chunk c's VA (VA_HOST). */
lms_status_t resid_host_unmap(size_t c)
{
    lms_status_t st = dev_unmap(S->dev, chunk_addr(c), S->chunk);
    if (st == LMS_OK)
        S->chunks.ch[c].va = VA_NONE;
    return st;
}

/* Leaves the EVICTING chunks of [first, first + n), whose copies have
 * ended, on their blocks until the copies out end (Note [Remap beside
 * copies]): their host copies are current. */
static void retire_later(size_t first, size_t n)
{
    for (size_t c = first; c < first + n; c++) {
        chunk_t *k = &S->chunks.ch[c];
        if (!k->remap) {
            k->remap = true;
            S->pf.remaps++;
            S->pf.remaps_deferred++;
            S->pf.remap_lo = c < S->pf.remap_lo ? c : S->pf.remap_lo;
            S->pf.remap_hi = c > S->pf.remap_hi ? c : S->pf.remap_hi;
            chunks_set_clean(&S->chunks, c, true);
        }
    }
}

void resid_host_unpend(size_t c)
{
    if (S->chunks.ch[c].remap) {
        S->chunks.ch[c].remap = false;
        S->pf.remaps--;
    }
}

/* Chunk c's device block was just unmapped (VA_NONE) and its data is its
 * host copy, or the block's. In host mode the host copy is mapped at its
 * VA (false: c may give its block back); should that fail, the block is
 * mapped back and made accessible (true: c stays on it, its data intact;
 * broken if it stays mapped without access: its host copy is current, so
 * window.c's repair_broken may unmap it); should that fail too, c is left
 * unmapped, with a warning (false). */
bool resid_host_remap_one(size_t c)
{
    chunk_t *k = &S->chunks.ch[c];
    if (!resid_host_mode() || k->host == NULL || resid_host_map(c, 1) == LMS_OK)
        return false;
    char why[256];
    snprintf(why, sizeof why, "%s", lms_last_error());
    if (k->va == VA_HOST) { /* mapped, not accessible, and the unmap failed: the next fetch's */
        base_log(BASE_LOG_WARN, "lms: the chunk at 0x%llx is left on its host copy without "
                 "access: %s", (unsigned long long)chunk_addr(c), why);
        return false;
    }
    lms_status_t st = dev_map(S->dev, chunk_addr(c), k->block);
    if (st == LMS_OK) {
        k->va = VA_DEVICE;
        if ((st = dev_set_access(S->dev, chunk_addr(c), S->chunk)) == LMS_OK)
            return true;
        if (dev_unmap(S->dev, chunk_addr(c), S->chunk) != LMS_OK) {
            k->broken = true; /* on its block without access: repaired before any use */
            return true;
        }
        k->va = VA_NONE;
    }
    base_log(BASE_LOG_WARN, "lms: the chunk at 0x%llx is left unmapped: its host copy could not "
             "be mapped there (%s), nor its block again (%s)", (unsigned long long)chunk_addr(c),
             why, lms_last_error());
    return false;
}

/* ---- the block pool and the cached chunks ---------------------------------- */

void resid_set_resident(size_t c, dev_block_t b)
{
    S->chunks.ch[c].block = b;
    S->chunks.ch[c].state = RESIDENT;
    S->chunks.ch[c].va = VA_DEVICE;
    chunks_set_clean(&S->chunks, c, false);
    S->chunks.ch[c].broken = false;
    if (++S->resident * S->chunk > S->stats.peak_resident_bytes)
        S->stats.peak_resident_bytes = S->resident * S->chunk;
    resid_memory_changed();
}

void resid_set_unbacked(size_t c, uint8_t state)
{
    S->host_entries += state == HOST;
    blocks_put(&S->blocks, S->chunks.ch[c].block);
    S->chunks.ch[c].block = 0;
    S->chunks.ch[c].state = state;
    S->chunks.ch[c].broken = false;
    chunks_set_clean(&S->chunks, c, false); /* off the device: never read until set_resident */
    S->resident--;
    resid_memory_changed();
}

/* Unmaps a cached chunk with no copy in flight and puts its block in the
 * pool. The caller made sure that no queued work can still touch a cached
 * chunk (see swap_sync_released). */
static lms_status_t uncache(size_t victim)
{
    lms_status_t st = dev_unmap(S->dev, chunk_addr(victim), S->chunk);
    if (st != LMS_OK)
        return st;
    S->chunks.ch[victim].va = VA_NONE;
    chunks_cached_remove(&S->chunks, victim);
    resid_drop_host(victim);
    resid_set_unbacked(victim, UNBACKED);
    return LMS_OK;
}

/* uncache() of the first cached chunk with no copy in flight. */
lms_status_t resid_uncache_one(void)
{
    for (size_t i = 0; i < S->chunks.ncached; i++)
        if (S->chunks.ch[S->chunks.cached[i]].xfer == NULL)
            return uncache(S->chunks.cached[i]);
    return base_fail(LMS_ERR_OUT_OF_MEMORY, "lms: no free device block");
}

/* ---- copies in flight (transfers.h) ------------------------------------------ */

/* Whether chunk c's eviction has no copy left in flight. */
#define ENDED(c) (S->chunks.ch[c].state == EVICTING && S->chunks.ch[c].xfer == NULL)

/* Ends the evictions of the EVICTING chunks [first, end), whose copies
 * have ended: unmaps them, in host mode maps their host copies there with
 * one set_access (Note [Evicted chunks stay mapped]; a chunk that failed
 * is tried alone), and gives their blocks back; a chunk that cannot be
 * unmapped, or mapped anew, stays resident on its block, with its
 * now-current copy. */
static void retire(size_t first, size_t end)
{
    for (size_t c = first; c < end; c++)
        resid_host_unpend(c);
    lms_status_t st = dev_unmap(S->dev, chunk_addr(first), (end - first) * S->chunk);
    for (size_t c = first; c < end && st == LMS_OK; c++)
        S->chunks.ch[c].va = VA_NONE;
    if (st == LMS_OK && resid_host_map(first, end - first) != LMS_OK)
        base_log(BASE_LOG_DEBUG, "lms: mapping evicted chunks' host copies: %s",
                 lms_last_error());
    for (size_t c = first; c < end; c++) {
        S->evicting--;
        chunk_t *k = &S->chunks.ch[c];
        if (st == LMS_OK && (k->va == VA_HOST || !resid_host_remap_one(c))) {
            resid_set_unbacked(c, k->host != NULL ? HOST : UNBACKED);
        } else { /* still mapped: it stays, with its now-current copy */
            k->state = RESIDENT;
            chunks_set_clean(&S->chunks, c, true);
            chunks_lru_touch(&S->chunks, c);
        }
    }
    if (st != LMS_OK)
        base_log(BASE_LOG_WARN, "lms: an evicted run stays resident: %s", lms_last_error());
}

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
            resid_drop_host(c);
        }
    }
    /* the chunks whose eviction this was, a run at a time: retired now, or,
     * in host mode beside another copy out, those with a host copy left on
     * their blocks until the copies out end (Note [Remap beside copies]) */
    bool later = resid_host_mode() && !S->cfg.vmm_unordered && transfers_d2h_copying(&S->xfers);
#define WAITS(c) (later && S->chunks.ch[c].host != NULL)
    for (size_t c = first; c < first + n;) {
        if (!ENDED(c)) {
            c++;
            continue;
        }
        size_t end = c + 1;
        while (end < first + n && ENDED(end) && WAITS(end) == WAITS(c))
            end++;
        if (WAITS(c))
            retire_later(c, end - c);
        else
            retire(c, end);
        c = end;
    }
#undef WAITS
}

/* Retires the chunks that wait on their blocks (Note [Remap beside copies]),
 * a run at a time, looking between the lowest and the highest that waited. */
void resid_host_flush(void)
{
    for (size_t c = S->pf.remap_lo; c <= S->pf.remap_hi && S->pf.remaps > 0;) {
        if (!S->chunks.ch[c].remap || !ENDED(c)) { /* the second: never (defensive) */
            resid_host_unpend(c++);
            continue;
        }
        size_t end = c + 1;
        while (end < S->chunks.n && S->chunks.ch[end].remap && ENDED(end))
            end++;
        retire(c, end);
        c = end;
    }
    if (S->pf.remaps == 0) {
        S->pf.remap_lo = SIZE_MAX;
        S->pf.remap_hi = 0;
    }
}

void resid_host_flush_waited(void)
{
    S->pf.access_waits = true;
    resid_host_flush();
    S->pf.access_waits = false;
}

/* The copy x has finished: settle the chunks it covered. */
static void settle_xfer(void *arg, const xfer_t *x)
{
    (void)arg;
    settle(x->first, x->n, x);
    if (S->pf.remaps > 0 && !transfers_d2h_copying(&S->xfers))
        resid_host_flush(); /* the D2H link is idle (Note [Remap beside copies]) */
}

/* Settles the copies that have finished, at most `most` of each direction
 * (an eviction's unmap is a step of a pipelined swap: Note [Pipelined
 * swaps]). */
lms_status_t resid_progress_upto(size_t most)
{
    return transfers_progress(&S->xfers, most, settle_xfer, NULL);
}

lms_status_t resid_progress(void) { return resid_progress_upto(SIZE_MAX); }

/* xfer_wait, settling as progress_upto does. */
lms_status_t resid_wait_xfer(xfer_t *x, size_t most)
{
    return xfer_wait(&S->xfers, x, most, settle_xfer, NULL);
}

/* wait_xfer on the oldest copy in flight (d2h first); LMS_OK if none. */
lms_status_t resid_wait_oldest(size_t most)
{
    xfer_t *x = transfers_oldest(&S->xfers);
    return x != NULL ? resid_wait_xfer(x, most) : LMS_OK;
}

/* ---- init and teardown ------------------------------------------------------------ */

lms_status_t resid_init(void)
{
    size_t chunk = S->chunk;
    lms_status_t st = chunks_init(&S->chunks, S->nchunks);
    if (st == LMS_OK)
        st = blocks_init(&S->blocks, S->dev, S->budget);
    if (st != LMS_OK)
        return st;
    S->rc.low = S->resolved.low;
    S->rc.high = S->resolved.high;
    S->piece = S->resolved.piece;
    S->pf.remap_lo = SIZE_MAX; /* none waits (Note [Remap beside copies]) */
    S->rc.wake_made = resid_cond_init(&S->rc.wake) == 0;
    S->holds.unheld_made = S->rc.wake_made && resid_cond_init(&S->holds.unheld) == 0;
    if (!S->holds.unheld_made)
        return base_fail(LMS_ERR_SYSTEM, "lms_init: pthread_cond_init failed");
    if ((st = transfers_init(&S->xfers, S->dev, &S->events, chunk)) != LMS_OK)
        return st;
    /* host mode: a pool of host blocks (Note [Evicted chunks stay mapped]),
     * grown a swap piece at a time: a growth makes, maps and opens each of
     * its blocks, all or none, so a piece of 256 MiB would be lost to any
     * one failed call of 128 blocks' */
    bool blocks = resid_host_mode();
    hostpool_config_t hc = {.dev = S->dev, .limit = S->host_limit,
                            .piece = blocks ? S->piece * chunk : 0,
                            .numa_node = blocks ? -1 : S->dev->info.host_numa_node,
                            .blocks = blocks, .chunk = chunk};
    if (S->cfg.swap && (st = hostpool_create(&hc, &S->host)) != LMS_OK)
        return st;
    if (S->cfg.swap) {
        policy_config_t pc = {.nchunks = S->nchunks, .lru = S->cfg.policy_lru};
        if ((st = policy_create(&pc, &S->policy)) != LMS_OK ||
            (st = ranking_init(&S->rank, &S->chunks, S->policy, resid_chunk_evictable)) != LMS_OK)
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
    S->pf.remaps = 0; /* a waiting chunk is on its device block (Note [Remap beside copies]) */
    for (size_t c = 0; c < S->chunks.n && S->chunks.ch != NULL; c++)
        if (S->chunks.ch[c].va == VA_HOST) /* the pool releases its blocks, mapped nowhere */
            (void)resid_host_unmap(c);
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
        k->streams = cached && streams_released_pending(&S->streams) ? 1 : 0;
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
        case HOST: /* its host copy stays should its VA not unmap (resid_drop_host) */
            resid_drop_host(c);
            k->state = k->host != NULL ? HOST : UNBACKED;
            break;
        case EVICTING: /* the copy finishes unneeded; the chunk stays mapped */
            S->evicting--;
            k->state = RESIDENT;
            resid_drop_host(c);
            chunks_cached_add(&S->chunks, c);
            break;
        case FETCHING: /* stays mapped; the next user waits for the copy */
            k->state = RESIDENT;
            resid_drop_host(c);
            chunks_cached_add(&S->chunks, c);
            break;
        case RESIDENT:
            resid_drop_host(c);
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
            resid_drop_host(c);
            k->state = k->host != NULL ? HOST : UNBACKED;
        } else if (k->state == RESIDENT && k->xfer == NULL) {
            resid_drop_host(c);
            chunks_set_clean(&S->chunks, c, true); /* with no host copy: evicting it drops it */
        }
    }
}

void resid_free_event(alloc_chunks_t gone)
{
    if (S->policy != NULL && gone.n > 0 &&
        resid_report(gone.first, gone.n, POLICY_FREE, base_now_ns()) != LMS_OK)
        base_log(BASE_LOG_DEBUG, "lms: policy: %s", lms_last_error());
}

lms_status_t resid_mark_iteration(void)
{
    lms_status_t st = S->policy != NULL ? policy_mark_iteration(S->policy) : LMS_OK;
    if (timeline_on && st == LMS_OK)
        timeline_iteration();
    return st;
}

/* Takes `times` pins off the chunks of [offset, offset + bytes): pins.c's pin
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
    (void)resid_progress(); /* copies that finished let their chunks go */
    resid_host_flush_waited(); /* and evictions waiting on their blocks (Note [Remap beside
                                  copies]) */
    lms_status_t st = LMS_OK;
    if (S->chunks.ncached > 0 && streams_released_pending(&S->streams))
        st = swap_sync_released();
    /* every cached chunk with no copy in flight, in one pass, in the order
     * repeated resid_uncache_one() calls took them: uncaching cached[i] moves the
     * last entry into i, and the entries before i keep their copies */
    for (size_t i = 0; st == LMS_OK && i < S->chunks.ncached;)
        if (S->chunks.ch[S->chunks.cached[i]].xfer != NULL)
            i++;
        else
            st = uncache(S->chunks.cached[i]);
    return st == LMS_OK ? blocks_release_pool(&S->blocks) : st;
}

