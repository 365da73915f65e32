/*
 * swap/prefetch.c — reporting accesses to policy/, and fetching ahead what
 * the schedule reads next. Lock: swap_lock, held by every caller.
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
 *
 * Note [VMM beside copies]
 * On the H100 cuMemSetAccess costs about 15 us per MiB on an idle card and
 * about 500 us per MiB while a D2H copy is on the wire, and the driver runs
 * one VMM call at a time (docs/gpu-results.md): beside an eviction, the
 * set_access of a 2 MiB chunk takes 1 ms, 25 times the chunk's copy over
 * PCIe 5, and holds every other VMM call back meanwhile. So:
 *   - a fetch's map + set_access that nothing waits for yet (a prefetch)
 *     is not issued while a D2H copy is running (one in flight on the d2h
 *     stream, as lms knows it: queued and not seen to end; clean drops copy
 *     nothing). It is deferred (prefetcher_t.vmm_deferred), and runs when
 *     the D2H direction goes idle: the reclaim thread waits for the copies
 *     out and then looks ahead again, as does every access after it;
 *   - a D2H copy that nothing waits for (the reclaim thread's, eviction
 *     ahead's, a prefetch's room) does not start while deferred VMM work is
 *     queued (resid_evict_ranked in evict.c, when ahead); so a prefetch
 *     fetches into the free blocks first, then starts evicting for the rest;
 *   - a fetch that an access (a kernel) is waiting for is never deferred:
 *     when something waits, it goes at once, whatever it costs (the early
 *     steps of Note [Pipelined swaps] too).
 * Only the VMM calls take turns with the copies out: once a prefetch's
 * chunks are accessible, their copies in run beside the evictions that
 * start after it. The sim models the cost with
 * LMS_SIM_SET_ACCESS_D2H_US_PER_MIB; bench/simulate models the same rule.
 * swap_config_t.vmm_unordered turns it off, only to measure what it gains.
 * In host mode an eviction's host map takes turns with the copies out too
 * (Note [Remap beside copies] in residency.c).
 */
#include <stdlib.h>

#include "swap/residency.h"

#define PREFETCH_WALK 4096 /* events a prefetch looks ahead at most */

/* ---- reporting to policy/, and prefetch (Note [Prefetch]) --------------------- */

/* Reports the access of the sorted chunks u[0..n) (acc: which need their
 * data), an event per run of consecutive chunks of one kind. */
void resid_report_access(const uint32_t *u, size_t n)
{
    if (S->policy == NULL)
        return;
    uint64_t now = base_now_ns();
    for (size_t i = 0; i < n;) {
        bool use = S->chunks.ch[u[i]].acc & ACC_NEED_DATA;
        size_t j = i + 1;
        while (j < n && u[j] == u[j - 1] + 1 &&
               (bool)(S->chunks.ch[u[j]].acc & ACC_NEED_DATA) == use)
            j++;
        if (resid_report(u[i], j - i, use ? POLICY_USE : POLICY_OVERWRITE, now) !=
            LMS_OK) {
            base_log(BASE_LOG_DEBUG, "lms: policy: %s", lms_last_error());
            return;
        }
        i = j;
    }
}

/* For policy_prefetch: what the chunk's facts (swap/need.h) need. A chunk
 * being evicted, or one an access under way holds and has not brought in
 * yet (it may be waiting in make_room for blocks), is not a prefetch's to
 * fetch, but needs a block at its use: free blocks a prefetch took would be
 * the ones that access waits for. */
static policy_need_t chunk_need(void *arg, uint32_t c)
{
    (void)arg;
    const chunk_t *k = &S->chunks.ch[c];
    return policy_need_of(swap_chunk_facts(k->state, k->holds, k->free));
}

/* For policy_plan_prefetch: the ranking (Note [Ranking between events] in
 * ranking.c), deeper into the full one where a repaired head is too short. */
static size_t rank_victims(void *arg, size_t depth)
{
    (void)arg;
    size_t m = ranking_victims(&S->rank, depth, S->resident);
    if (m < depth && ranking_shallow(&S->rank, m)) {
        ranking_stale(&S->rank);
        m = ranking_victims(&S->rank, depth, S->resident);
    }
    return m;
}

static uint64_t victim_key(void *arg, size_t i)
{
    (void)arg;
    return ranking_key(&S->rank, i);
}

/* Evicts ahead what policy/ plans (policy_evict_ahead, Note [Eviction
 * ahead] in policy.c): MIN's victims, now, where the D2H link would free
 * the blocks the events ahead need too late. The D2H link's rate is taken
 * as the H2D link's learnt one: PCIe is symmetric (54.0 and 54.6 GB/s on
 * the H100, docs/gpu-results.md). Not chunks fetched ahead and unused. */
static void evict_ahead(void)
{
    policy_link_t link = {.chunk_bytes = S->chunk,
                          .max_events = PREFETCH_WALK,
                          .d2h_bytes_per_ns = transfers_h2d_rate(&S->xfers)};
    policy_room_t room = policy_room_of(resid_free_blocks(), S->evicting, 0);
    policy_victims_t victims = {.rank = rank_victims, .key = victim_key};
    size_t from, n = policy_evict_ahead(S->policy, &link, chunk_need, NULL, &room, &victims, &from);
    if (n == 0)
        return;
    lms_status_t st;
    resid_evict_ranked(from, ranking_victims(&S->rank, from + n, S->resident), n, true,
                       TIMELINE_BY_PREFETCH, &st);
    if (st != LMS_OK)
        base_log(BASE_LOG_DEBUG, "lms: evicting ahead: %s", lms_last_error());
    pthread_cond_signal(&S->rc.wake); /* settles them as they end */
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
    /* nothing can need a fetch that did not when last looked, unless a chunk
     * went to the host since or the position moved past what was looked at */
    policy_usage_t u;
    policy_usage(S->policy, &u);
    size_t moved = (u.position + u.schedule_events - S->pf.walk_pos) % u.schedule_events;
    /* the reclaim thread keeps a block free: a fetch into that one only
     * makes it evict the top-ranked chunk, so it is that chunk's place
     * (else reclaim and prefetch take turns, each evicting what the other
     * fetched; Note [Prefetch without harm] in policy.c) */
    policy_room_t room = policy_room_of(resid_free_blocks(), S->evicting, 0);
    size_t spare = room.spare;
    if (S->pf.walk_found_none && S->host_entries == S->pf.walk_host_entries &&
        (u.schedule_events <= PREFETCH_WALK || moved < PREFETCH_WALK / 2) &&
        (S->host_chunks == 0 ||
         (spare <= S->pf.walk_spare && transfers_h2d_queued(&S->xfers) >= S->pf.walk_queued)))
        return; /* more room, or a shorter queue, matters only with data on the host */
    policy_link_t link = {.bytes_per_ns = transfers_h2d_rate(&S->xfers),
                          .chunk_bytes = S->chunk,
                          .max_events = PREFETCH_WALK,
                          .free_blocks = spare,
                          .queued_bytes = transfers_h2d_queued(&S->xfers) * S->chunk};
    policy_victims_t victims = {.rank = rank_victims, .key = victim_key};
    policy_plan_t plan;
    size_t n = policy_plan_prefetch(S->policy, &link, chunk_need, NULL, &room, &victims,
                                    S->pf.ahead, S->piece, &plan);
    S->pf.blocks_ahead = plan.blocks_ahead > 0 ? (size_t)plan.blocks_ahead : 0;
    S->pf.walk_found_none = n == 0;
    S->pf.walk_host_entries = S->host_entries;
    S->pf.walk_pos = u.position;
    S->pf.walk_spare = spare;
    S->pf.walk_queued = transfers_h2d_queued(&S->xfers);
    lms_status_t st = LMS_OK;
    size_t now = plan.placed;
    now = now < resid_unmapped_blocks() ? now : resid_unmapped_blocks(); /* the rest once evicted */
    if (now > 0 && !S->cfg.vmm_unordered && transfers_d2h_copying(&S->xfers)) {
        S->pf.vmm_deferred = true; /* until the copies out end (Note [VMM beside copies]) */
        now = 0;
    }
    if (now > 0) {
        uint32_t stamp = ++S->chunks.stamp;
        for (size_t i = 0; i < now; i++) {
            chunk_t *k = &S->chunks.ch[S->pf.ahead[i].chunk];
            k->stamp = stamp;
            k->acc = ACC_NEED_DATA;
            S->pf.fetch_list[i] = S->pf.ahead[i].chunk;
        }
        qsort(S->pf.fetch_list, now, sizeof *S->pf.fetch_list, chunks_cmp_id);
        size_t brought;
        lms_status_t bst = resid_bring_in(S->pf.fetch_list, now, 0, false, true, &brought);
        for (size_t i = 0; i < now; i++)
            S->chunks.ch[S->pf.fetch_list[i]].prefetched =
                S->chunks.ch[S->pf.fetch_list[i]].state == FETCHING;
        st = bst;
    }
    if (plan.evict > 0) { /* ranked[0 .. evict): MIN's, for these and the demands before them */
        lms_status_t est;
        resid_evict_ranked(0, plan.ranked, plan.evict, true, TIMELINE_BY_PREFETCH, &est);
        st = st != LMS_OK ? st : est;
        /* the reclaim thread settles these copies as they end, and then
         * fetches what waits for their blocks: no access may come to do it
         * (up to its 50 ms sleep, seen in bench/swap; issue 24) */
        pthread_cond_signal(&S->rc.wake);
    }
    if (st != LMS_OK)
        base_log(BASE_LOG_DEBUG, "lms: prefetch: %s", lms_last_error());
}

void resid_prefetch(void)
{
    bool d2h_idle = !transfers_d2h_copying(&S->xfers);
    if (d2h_idle && S->pf.remaps > 0)
        resid_host_flush(); /* evictions waiting on their blocks end (Note [Remap beside copies]
                               in residency.c), should no copy's end have ended them */
    if (!resid_by_schedule() || S->host == NULL)
        return;
    if (d2h_idle)
        S->pf.vmm_deferred = false; /* what was deferred runs now, or is no longer wanted */
    prefetch();
    if (S->cfg.evict_ahead)
        evict_ahead();
}
