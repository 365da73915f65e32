/*
 * swap/evict.c — eviction: which chunks go (the schedule's victims while it
 * is followed, else the least recently used), in runs, each copy out after
 * the work that used its chunks. Lock: swap_lock, held by every caller.
 *
 * Note [Eviction fences]
 * An eviction's copy out must come after the work that used the chunk, and
 * the simple fence, an event recorded on the stream when the eviction is
 * decided, comes after all the work queued there so far: often a kernel
 * that waits for a fetch still on the link. Then the copy out waits for
 * that fetch, and the two links, which could run at once, take turns
 * (seen in bench/train: docs/benchmarks.md, "History moved out of the
 * code's Notes"). So, while chunks go to
 * the host, the end of each access window (when its work has been queued)
 * records an event on its stream, one of a ring of USE_RING per stream,
 * and each chunk of the window remembers which (last_window). An eviction
 * waits, for the stream that used its chunks last, for the latest of
 * their windows' events (or, once the ring has gone round past it, the
 * oldest one left, which is later still); for any other stream that used
 * them, and for chunks whose window is not known (none recorded: no
 * swapping then, or the record failed; pinned memory, which any stream may
 * use), for the stream's work so far, as before.
 */
#include "swap/residency.h"

/* ---- eviction ---------------------------------------------------------------- */

bool resid_chunk_evictable(const chunks_t *t, size_t c)
{
    const chunk_t *k = &t->ch[c];
    return k->state == RESIDENT && k->xfer == NULL && k->holds == 0 && k->pins == 0 &&
           !k->free && !k->broken;
}

/* Makes the d2h stream wait for the work that used the chunks [first,
 * first + n) on every stream (Note [Eviction fences]). */
static lms_status_t after_last_use(size_t first, size_t n)
{
    uint64_t mask = 0;
    for (size_t c = first; c < first + n; c++)
        mask |= S->chunks.ch[c].streams;
    for (size_t i = 0; i < streams_slots(&S->streams) && mask != 0; i++) {
        stream_t *s = streams_slot(&S->streams, i);
        uint64_t bit = 1ull << (i < 63 ? i : 63);
        if (s == NULL || !(mask & bit))
            continue;
        bool known = i < 63; /* the window after each one's last use here */
        uint32_t latest = 0;  /* the latest of those */
        for (size_t c = first; c < first + n && known; c++) {
            const chunk_t *k = &S->chunks.ch[c];
            if (!(k->streams & bit))
                continue;
            known = k->last_window != 0 && k->last_slot == i &&
                    k->last_gen == streams_generation(&S->streams, i);
            latest = known && k->last_window > latest ? k->last_window : latest;
        }
        dev_event_t *e;
        lms_status_t st = stream_after_use(s, S->dev, known ? latest : 0, &e);
        if (st == LMS_OK)
            st = dev_stream_wait_event(S->dev, transfers_stream(&S->xfers, true), e);
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
        if ((st = resid_host_slot(&S->chunks.ch[first + slots].host)) == LMS_OK)
            slots++;
    if (st == LMS_ERR_OUT_OF_MEMORY && slots > 0) /* the pool is full: evict what fits */
        n = slots, st = LMS_OK;
    /* one copy per run of adjacent host copies */
    size_t copied = 0;
    for (size_t c = first; st == LMS_OK && !clean && c < first + n;) {
        size_t k = resid_host_run(c, first + n - c);
        if ((st = dev_copy_d2h(S->dev, transfers_stream(&S->xfers, true), S->chunks.ch[c].host,
                               chunk_addr(c), k * S->chunk)) == LMS_OK)
            copied += k;
        c += k;
    }
    if (!clean) { /* the slots no copy reads go back: a failed copy evicts the rest */
        for (size_t c = first + copied; c < first + slots; c++)
            resid_host_free(S->chunks.ch[c].host);
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
    xfer_start(&S->xfers, x, first, n, clean ? 0 : n, true);
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
        resid_memory_changed();
    }
    return LMS_OK;
}

/* The longest run around victim v of evictable chunks like it, at most
 * `want` chunks (and a piece: Note [Pipelined swaps] in window.c), of chunks policy/
 * ranks at least min_key (0: any); when ahead, none fetched ahead and not
 * yet used (evict_ranked). */
static void run_around(size_t v, size_t want, uint64_t min_key, bool ahead, size_t *first,
                       size_t *n)
{
    bool clean = S->chunks.ch[v].clean;
    size_t lo = v, hi = v + 1, cap = want < 1 ? 1 : want > S->piece ? S->piece : want;
#define LIKE(c)                                                                                    \
    (resid_evictable(c) && S->chunks.ch[c].clean == clean &&                                       \
     !(ahead && S->chunks.ch[c].prefetched) &&                                                     \
     (min_key == 0 || policy_evict_key(S->policy, c) >= min_key))
    while (hi - lo < cap && hi < S->nchunks && LIKE(hi))
        hi++;
    while (hi - lo < cap && lo > 0 && LIKE(lo - 1))
        lo--;
#undef LIKE
    *first = lo;
    *n = hi - lo;
}

/* ---- victims by the schedule (Note [Prefetch] in prefetch.c) ---------------- */

/* Starts evicting about `want` chunks of the ranked ones [from, n), best first
 * (neighbours go along when the schedule would evict them as soon: the
 * `want`-th victim's rank or better), but not, when ahead (evicting ahead
 * of need: the reclaim thread), chunks fetched ahead and not yet used: a
 * prefetch and a reclaim must not take turns on a chunk; and, when ahead,
 * none while a prefetch's VMM work or a host remap waits for the D2H link
 * to go idle. `by` is who asks (for the timeline). The number started;
 * *st says why an eviction failed. */
size_t resid_evict_ranked(size_t from, size_t n, size_t want, bool ahead, timeline_by_t by,
                          lms_status_t *st)
{
    size_t started = 0;
    *st = LMS_OK;
    if (from >= n || (ahead && (S->pf.vmm_deferred || S->pf.remaps > 0)))
        return 0; /* nothing waits for these: the deferred VMM work goes first (Notes [VMM
                     beside copies] in prefetch.c, [Remap beside copies] in residency.c) */
    size_t last = want < n - from ? from + want - 1 : n - 1;
    uint64_t min_key = want == 0 ? 0 : ranking_key(&S->rank, last);
    for (size_t i = from; i < n && started < want; i++) {
        size_t c = ranking_chunk(&S->rank, i), first, run;
        if (!resid_evictable(c) || (ahead && S->chunks.ch[c].prefetched))
            continue; /* gone with an earlier run */
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
size_t resid_evict_some(size_t want, bool ahead, timeline_by_t by, lms_status_t *st)
{
    size_t started = 0;
    *st = LMS_OK;
    if (resid_by_schedule()) {
        size_t n = ranking_victims(&S->rank, want, S->resident);
        started = resid_evict_ranked(0, n, want, ahead, by, st);
        if (started < want && *st == LMS_OK) { /* what became evictable since, in full */
            ranking_stale_full(&S->rank);
            started += resid_evict_ranked(0, ranking_victims(&S->rank, want - started, S->resident),
                                          want - started, ahead, by, st);
        }
        return started;
    }
    uint32_t c = S->chunks.lru_head;
    while (c != NO_CHUNK && started < want) {
        uint32_t next = S->chunks.ch[c].lru_next;
        if (resid_evictable(c)) {
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
