/*
 * policy/policy.c — the schedule, its next-use oracle, and prefetch. See
 * policy.h.
 *
 * Owns (host metadata, base_meta_*):
 *   cur[]      the current iteration's events, in order.
 *   sched[]    the schedule's events (the last complete iteration).
 *   start[], use[]  the schedule's index: the events that name chunk c are
 *              use[start[c] .. start[c + 1]), ascending, so a next use is a
 *              binary search. Built whole at each boundary; the old index
 *              stays until the new one exists.
 *   last[]     per chunk, the clock of its last access (0: never): LRU.
 *   seen[]     scratch of policy_prefetch.
 * Event indices and use counts are 32-bit: an iteration of 2^32 - 1 events
 * or chunk uses is refused (LMS_ERR_OUT_OF_MEMORY).
 *
 * Note [Following the schedule]
 * Each event is matched against the schedule at the position: the same
 * event there is a hit, and the position moves past it. Otherwise the next
 * FOLLOW_AHEAD events of the schedule are searched (wrapping round its end):
 * found, the events skipped are taken to be missing this time, and the
 * position moves past the one found; not found, the event is taken to be
 * one the schedule does not have, and the position stays. Either is a miss.
 * A changed event costs two misses (an unknown one, then a skip), so a
 * program whose iterations differ in a few events keeps following. The last
 * POLICY_WINDOW events decide whether eviction follows the schedule: not
 * while more than miss_threshold of them missed; again once enough hit.
 *
 * Note [Finding the iteration]
 * A program that never marks its iterations gets them found. With no
 * schedule, each event that equals one of the first DETECT_ANCHORS events
 * recorded proposes a period: the distance between the two. A proposed
 * period L is then checked event by event, each against the one L before
 * it; it is dropped once more than 2 + 1/8 of its checks failed (a few
 * changed events pass), and accepted once it has passed max(L,
 * DETECT_CHECKS) checks: a whole period repeated. Since a program's first
 * events (set-up, a first step unlike the rest) may never come back, later
 * events anchor too: DETECT_ANCHORS of them at DETECT_WINDOW x (2^g - 1)
 * events from the start, g = 1, 2, ..., so that a preamble of P events
 * delays the search by at most 2P + DETECT_WINDOW events (the first group
 * past it), whatever the period. The last L events become
 * the schedule, and from then on an iteration ends where the schedule's
 * matching wraps round its end, while it follows: the event that matched is
 * the next iteration's first. Where the boundary falls within the program's own step
 * does not matter, since the next use wraps too. A program whose sequence
 * changes for good falls back to LRU (Note [Following the schedule]); after
 * 2 x the schedule's length (and at least POLICY_WINDOW) events without
 * following, the search starts again on the events after that point.
 *
 * Note [Prefetch horizon]
 * Copies to the device run in order on one link, and a chunk fetched early
 * holds a block from then on that the events before its use may want. So a
 * chunk is fetched ahead only once its use is within twice the time the
 * link needs for it and the chunks taken before it in this call (the factor
 * 2 is slack for a link slower than measured), plus twice the mean time of
 * an event (the granularity at which uses are known): just in time, with
 * room. The horizon must not count the copies already queued: with the link
 * busy, reaching further ahead only takes blocks sooner. Times come from the
 * schedule's own events (policy_access's now_ns).
 * Just in time is too late where the link is idle now and the bottleneck
 * later: the optimizer step reads each weight's state once, for little
 * compute, after a backward pass that leaves the link idle and, as it frees
 * activations, the device half empty. So past the horizon the walk goes on
 * while the link's queue (what is on its way and what this call took) is
 * under two event times, and takes chunks into free blocks only (evict_after
 * is UINT64_MAX): while the fetches taken, all held from now, and the most
 * new data ahead needs up to each (frees later do not count: the block is
 * taken now) leave a block free, the one the reclaim thread keeps. The
 * link's queue is a condition because far fetches would otherwise take the
 * blocks that near ones, late on a busy link, then evict for. Measured in
 * the trace simulator: docs/benchmarks.md, bench/simulate, "Prefetch
 * horizon" and "Past the horizon, into free blocks", and "History moved out
 * of the code's Notes".
 *
 * Note [Eviction ahead]
 * The links are full duplex: while chunks come in, victims could be going
 * out. But a victim evicted only when a fetch or new data needs its block
 * makes the two take turns (D2H, then H2D into the block; the trace
 * simulator's GPT at 2x over a full-duplex link spent 83% of its link time
 * with one direction alone busy). And where new data comes in bursts (the
 * forward pass's activations after an optimizer step that fetched the
 * optimizer's state into the room the backward pass freed) the evictions it
 * needs cannot start before the burst if nothing asks for them. So the plan
 * looks ahead along the schedule at the blocks the events will need (new
 * data and fetches, less what frees give back: peak(d) up to event d) and
 * at the time until each; the D2H link frees d2h_rate / chunk blocks a
 * nanosecond, taken at half (slack, as the prefetch horizon's factor 2). At
 * event d, peak(d) - spare - until(d) x that rate blocks are late unless
 * they start out now; the most late at any d (d*) is how many to evict now.
 * Which: MIN's, and only those MIN would evict anyway before their next
 * use, or the eviction costs a fetch MIN does not make (Note [Prefetch
 * without harm]). MIN evicts, at d*, the chunks with the furthest next uses
 * then, as many as the blocks still needed there (E = peak(d*) - spare). A
 * ranked victim v with its next use after d* is one of them if fewer than E
 * chunks rank above it at d*: the i ranked above it now, and the chunks
 * used from now to d* whose next use after that comes later than v's (they
 * are resident at d*, and outrank v). This is checked at each of the first
 * AHEAD_DEMANDS points where more blocks are late than at any before (d*
 * alone, the latest, let an early burst wait for a later one's safe few).
 * Chunks whose next event is a free are skipped: the free gives their
 * blocks back, and copying out dead data is waste. The walk is the length
 * of the schedule at most, so it is made again only every AHEAD_EVERY
 * events, or with a new schedule; between, its demands and counts are
 * reused, shifted by how far the position moved. But a block taken since
 * the walk served a need the walk counted (a kernel waiting for its blocks
 * takes them one at a time, at one position), so a walk kept counts it
 * twice, and evicted one chunk more for each: in the simulator, once its
 * plans were swap/'s, GPT at 1.25x moved 15% more with eviction ahead than
 * without, the fetches ahead taking back the blocks so freed. So a walk
 * kept may only say that nothing is late; where it says something is, and
 * the room's spare blocks are not what they were at the walk, it is made
 * again (the walk's next uses are sorted a segment between two demands at
 * a time, each once, so that walking again costs little).
 * Measured in the simulator on h100-pcie5 (docs/benchmarks.md, bench/simulate,
 * "Eviction ahead"), with its plans checked against swap/'s: faster on every
 * row of gpt, cnn and the six recorded traces at 1.25x to 8x (GPT 1.23 to
 * 1.17 of the lower bound at 1.25x, 1.24 to 1.15 at 4x, 1.29 to 1.22 at
 * 8x), moving no more on gpt and cnn but 0.2% at cnn 8x; on the traces up
 * to 5% more on a few rows (gpt2_ckpt at 2x, resnet18 at 3x), still
 * faster on them. A first form without the MIN check gained more (GPT at
 * 2x over a full-duplex link with no VMM costs: 1.71 to 1.37) but moved up
 * to 9% more. What no
 * eviction ahead removes: the forward pass's evictions and the backward
 * pass's fetches cannot overlap, each pass having the device full.
 * bench/train on sim shows both directions busy at once (both_busy_ms) but
 * no step time it changes beyond that machine's noise, with the same bytes
 * moved: its link-bound phase is Adam's, where what goes out (a layer's
 * updated state) exists only once that layer's update ran, so nothing can
 * leave earlier. On by default (LMS_EVICT_AHEAD=0 turns it off), as in the
 * simulator, where with the VMM order of Note [VMM beside copies] in
 * swap/prefetch.c and alloc/'s placement it is faster or as fast on every
 * row of every workload, moving no more bytes.
 *
 * Note [Dead data]
 * Data whose next event is a free is dead: it goes before anything else.
 * Data whose next event overwrites it is dead too, but its chunk needs a
 * block again at that event, and swap/ still copies it out if it is dirty
 * (the schedule is a prediction: one that is wrong must not lose data), so
 * evicting it saves the fetch only. Ranked as never used again, such chunks
 * go first and cost more than they save (GPT at 2x in the trace simulator
 * copied 12% more out: docs/benchmarks.md, bench/simulate, "Dead data"). So
 * an overwrite ranks as a use.
 *
 * Note [Prefetch without harm]
 * Fetching chunk c ahead of its use at d (events from the position) in
 * place of a resident chunk v is harmless only if Belady's MIN, at d, would
 * evict v too; else the prefetch costs a copy MIN would not make. A loop
 * over more than fits shows it: fetching the next chunk in place of the one
 * used furthest ahead now moves every chunk once per iteration, while MIN
 * evicts the one just used (at d its next use is the furthest) and keeps
 * the rest. MIN at d chooses among the chunks resident then: those used
 * before d, with their next use after d, and the others. So c may take v's
 * place only if v's next use comes after d and no earlier than the latest
 * next use (after d) of every chunk used from the event before the position
 * up to d: the running maximum, over the uses walked, of the next use after
 * each (the last use before d of any chunk has its next one after d, so the
 * maximum is one of those). A tie is MIN's choice too: the chunk that set
 * the maximum is often v itself, just used (in a loop over more than fits,
 * the one MIN evicts); so evict_after is one less than that maximum. Free
 * blocks are not free of conditions either: MIN gives them to the events
 * before d that need a block (overwrites, chunks with no data) and takes
 * back those their frees release, so fetch i may have one only if the most
 * blocks those events and the fetches before it need at any point before
 * it (blocks_before) is below the free blocks; past that, it takes the
 * place of the ranked victim that many further down. swap/ keeps one
 * block free for the reclaim thread, which a fetch into it would only make
 * evict the chunk ranked first, needed soon or not: that block counts as
 * that chunk's place: a fetch that took it as a free block would make
 * reclaim and prefetch take turns, each evicting what the other fetched
 * (tests/swap's loop: docs/benchmarks.md, bench/e2e). The aim is the "conservative"
 * strategy of Cao et al. (SIGMETRICS 1995): what MIN fetches, as early as it
 * can be; this is an approximation of it (MIN is not simulated forward), and
 * the simulator measures how close it comes (docs/benchmarks.md,
 * bench/simulate, the "Bytes" target).
 */
#include <stdlib.h>
#include <string.h>

#include "policy/policy.h"
#include "base/base.h"

#define FOLLOW_AHEAD 8
#define DETECT_ANCHORS 4
#define DETECT_CHECKS 16
#define DETECT_CANDIDATES 64
#define DETECT_WINDOW 64 /* anchors: Note [Finding the iteration] */
#define DETECT_MAX_EVENTS ((size_t)1 << 20) /* recorded without finding one: start over */
#define DEFAULT_MISS_THRESHOLD 0.25
#define AHEAD_EVERY 16  /* events between walks of eviction ahead (Note [Eviction ahead]) */
#define AHEAD_DEMANDS 8 /* the first points where more blocks are late than anywhere before */

typedef struct event {
    uint32_t first, n;
    uint32_t kind;
    uint64_t t;
} event_t;

typedef struct candidate {
    size_t period, checked, failed;
} candidate_t;

struct policy {
    size_t nchunks;
    bool lru_only;
    bool manual;    /* policy_mark_iteration was called: no automatic boundaries */
    unsigned max_misses;
    event_t *cur, *sched;
    size_t ncur, capcur, nsched, capsched;
    uint32_t *start; /* nchunks + 1, or NULL without a schedule */
    uint32_t *use;
    size_t pos;
    uint64_t iterations, found;
    uint64_t *last, clock;
    uint64_t version; /* policy_version */
    uint64_t basis;   /* policy_basis */
    uint64_t missbits; /* the last POLICY_WINDOW events, 1 = missed */
    uint64_t hits, misses, fallbacks;
    bool following;
    size_t lost;       /* events since following stopped */
    bool detecting;
    size_t det_base;   /* where the search for a period starts in cur[] */
    candidate_t cand[DETECT_CANDIDATES];
    size_t ncand;
    uint32_t *seen, seen_stamp;
    /* eviction ahead's last walk (Note [Eviction ahead]) */
    uint64_t *outrank;            /* next uses of the chunks used, in walk order, each
                                     demand's segment then sorted */
    size_t noutrank, capoutrank;
    size_t ahead_pos;             /* the position it was made at */
    size_t ahead_spare;           /* the room's spare blocks then */
    uint64_t ahead_basis;         /* policy_basis then; ahead_ok: made since */
    bool ahead_ok;
    size_t ndemands;
    struct demand {
        size_t at;      /* events from ahead_pos */
        int64_t peak;   /* blocks needed up to it */
        int64_t target; /* blocks that must be free or on their way out now for it */
        size_t nq;      /* outrank's prefix: the chunks used up to it (from the
                           demand before's nq on, sorted) */
    } demand[AHEAD_DEMANDS];
};

lms_status_t policy_create(const policy_config_t *cfg, policy_t **out)
{
    if (cfg == NULL || out == NULL || cfg->nchunks == 0 || cfg->nchunks >= UINT32_MAX)
        return base_fail(LMS_ERR_INVALID, "policy: 1 .. 2^32 - 2 chunks, not %zu",
                         cfg != NULL ? cfg->nchunks : 0);
    if (!(cfg->miss_threshold >= 0 && cfg->miss_threshold < 1))
        return base_fail(LMS_ERR_INVALID, "policy: a miss threshold is in [0, 1), not %g",
                         cfg->miss_threshold);
    policy_t *p = base_meta_calloc(1, sizeof *p);
    if (p != NULL) {
        p->last = base_meta_calloc(cfg->nchunks, sizeof *p->last);
        p->seen = base_meta_calloc(cfg->nchunks, sizeof *p->seen);
    }
    if (p == NULL || p->last == NULL || p->seen == NULL) {
        policy_destroy(p);
        return base_fail(LMS_ERR_OUT_OF_MEMORY, "policy: no host memory for %zu chunks",
                         cfg->nchunks);
    }
    p->nchunks = cfg->nchunks;
    p->lru_only = cfg->lru;
    double t = cfg->miss_threshold > 0 ? cfg->miss_threshold : DEFAULT_MISS_THRESHOLD;
    p->max_misses = (unsigned)(t * POLICY_WINDOW);
    p->detecting = true;
    *out = p;
    return LMS_OK;
}

void policy_destroy(policy_t *p)
{
    if (p == NULL)
        return;
    base_meta_free(p->cur);
    base_meta_free(p->sched);
    base_meta_free(p->start);
    base_meta_free(p->use);
    base_meta_free(p->last);
    base_meta_free(p->seen);
    base_meta_free(p->outrank);
    base_meta_free(p);
}

static bool same(const event_t *a, const event_t *b)
{
    return a->first == b->first && a->n == b->n && a->kind == b->kind;
}

/* ---- the schedule ------------------------------------------------------------ */

/* Makes cur[from .. ncur) the schedule and starts a new iteration at
 * position 0. On failure nothing changed. The index of uses (start, use)
 * costs O(nchunks) to build: an iteration that repeats the schedule's
 * events keeps it (a followed program's every iteration; and a short
 * period found, say one launch repeated, commits at every event). */
static lms_status_t commit(policy_t *p, size_t from)
{
    size_t nev = p->ncur - from;
    if (nev == 0)
        return LMS_OK; /* before any access p->cur is NULL: no pointer formed from it */
    const event_t *ev = p->cur + from;
    bool repeats = p->start != NULL && nev == p->nsched;
    for (size_t i = 0; repeats && i < nev; i++)
        repeats = same(&ev[i], &p->sched[i]);
    if (!repeats) {
        uint64_t total = 0;
        for (size_t i = 0; i < nev; i++)
            total += ev[i].n;
        uint32_t *start = total < UINT32_MAX ? base_meta_calloc(p->nchunks + 1, sizeof *start) : NULL;
        uint32_t *use = start != NULL ? base_meta_alloc((size_t)total * sizeof *use) : NULL;
        if (use == NULL) {
            base_meta_free(start);
            return base_fail(LMS_ERR_OUT_OF_MEMORY, "policy: no host memory for a schedule of %zu "
                             "events (%llu chunk uses)", nev, (unsigned long long)total);
        }
        /* counts in start[c + 1], then start[c] = where c's uses begin, used as
         * a cursor while filling (it ends where c + 1's begin), then shifted */
        for (size_t i = 0; i < nev; i++)
            for (uint32_t c = ev[i].first; c < ev[i].first + ev[i].n; c++)
                start[c + 1]++;
        for (size_t c = 0; c < p->nchunks; c++)
            start[c + 1] += start[c];
        for (size_t i = 0; i < nev; i++)
            for (uint32_t c = ev[i].first; c < ev[i].first + ev[i].n; c++)
                use[start[c]++] = (uint32_t)i;
        for (size_t c = p->nchunks; c > 0; c--)
            start[c] = start[c - 1];
        start[0] = 0;
        base_meta_free(p->start);
        base_meta_free(p->use);
        p->start = start;
        p->use = use;
    }
    if (from > 0)
        memmove(p->cur, ev, nev * sizeof *ev);
    /* the current events become the schedule; its old buffer, the next iteration's */
    event_t *e = p->sched;
    size_t cap = p->capsched;
    p->sched = p->cur;
    p->nsched = nev;
    p->capsched = p->capcur;
    p->cur = e;
    p->capcur = cap;
    p->ncur = 0;
    p->pos = 0;
    p->basis++;
    p->iterations++;
    p->detecting = false;
    p->ncand = 0;
    p->det_base = 0;
    p->lost = 0;
    p->following = !p->lru_only && (unsigned)__builtin_popcountll(p->missbits) <= p->max_misses;
    return LMS_OK;
}

lms_status_t policy_mark_iteration(policy_t *p)
{
    p->version++;
    if (p->lru_only)
        return LMS_OK;
    p->manual = true;
    p->detecting = false;
    return commit(p, 0);
}

bool policy_has_schedule(const policy_t *p) { return p->start != NULL; }

bool policy_following(const policy_t *p) { return p->following; }

uint64_t policy_version(const policy_t *p) { return p->version; }

uint64_t policy_basis(const policy_t *p) { return p->basis; }

static void note_match(policy_t *p, bool hit)
{
    p->missbits = p->missbits << 1 | !hit;
    if (hit)
        p->hits++;
    else
        p->misses++;
    bool was = p->following;
    p->following = !p->lru_only && (unsigned)__builtin_popcountll(p->missbits) <= p->max_misses;
    p->fallbacks += was && !p->following;
    p->basis += was != p->following;
    p->lost = p->following ? 0 : p->lost + 1;
}

/* Matches the event just recorded, cur[ncur - 1], against the schedule
 * (Note [Following the schedule]); ends an iteration found automatically
 * where the match wraps round the schedule's end. */
static lms_status_t follow(policy_t *p)
{
    const event_t ev = p->cur[p->ncur - 1];
    size_t ahead = p->nsched - 1 < FOLLOW_AHEAD ? p->nsched - 1 : FOLLOW_AHEAD;
    for (size_t d = 0; d <= ahead; d++) {
        size_t j = (p->pos + d) % p->nsched;
        if (!same(&p->sched[j], &ev))
            continue;
        /* the next iteration's first event; not while lost, when a match is
         * as likely a coincidence */
        if (p->pos + d >= p->nsched && !p->manual && p->following) {
            p->ncur--;
            lms_status_t st = p->ncur > 0 ? commit(p, 0) : LMS_OK;
            p->cur[p->ncur++] = ev; /* the buffer had room for it (capsched >= nsched) */
            if (st != LMS_OK)
                return st;
        }
        note_match(p, d == 0);
        p->pos = j + 1;
        return LMS_OK;
    }
    note_match(p, false);
    return LMS_OK;
}

/* ---- finding the iteration (Note [Finding the iteration]) -------------------- */

static lms_status_t detect(policy_t *p)
{
    size_t i = p->ncur - 1;
    const event_t *ev = p->cur;
    for (size_t k = 0; k < p->ncand;) {
        candidate_t *c = &p->cand[k];
        c->checked++;
        c->failed += !same(&ev[i], &ev[i - c->period]);
        if (c->failed > 2 + c->checked / 8) {
            p->cand[k] = p->cand[--p->ncand];
            continue;
        }
        if (c->checked >= c->period && c->checked >= DETECT_CHECKS) {
            p->found++;
            return commit(p, i + 1 - c->period);
        }
        k++;
    }
    /* anchors: DETECT_ANCHORS events at det_base + DETECT_WINDOW x (2^g - 1) */
    for (size_t g = 0, b = p->det_base; b < i;
         g++, b = p->det_base + DETECT_WINDOW * (((size_t)1 << g) - 1))
        for (size_t a = b; a < b + DETECT_ANCHORS && a + 2 <= i; a++) {
            size_t period = i - a;
            if (!same(&ev[i], &ev[a]) || p->ncand == DETECT_CANDIDATES)
                continue;
            bool known = false;
            for (size_t k = 0; k < p->ncand && !known; k++)
                known = p->cand[k].period == period;
            if (!known) /* the match that proposed it is its first check */
                p->cand[p->ncand++] = (candidate_t){.period = period, .checked = 1};
        }
    if (i + 1 - p->det_base >= DETECT_MAX_EVENTS) {
        p->ncur = 0; /* none: start over */
        p->det_base = 0;
        p->ncand = 0;
    }
    return LMS_OK;
}

lms_status_t policy_access(policy_t *p, size_t first, size_t n, policy_kind_t kind,
                           uint64_t now_ns)
{
    if (n == 0 || first >= p->nchunks || n > p->nchunks - first)
        return base_fail(LMS_ERR_INVALID, "policy_access: chunks [%zu, +%zu) are not a run of "
                         "the %zu chunks", first, n, p->nchunks);
    if (kind != POLICY_USE && kind != POLICY_OVERWRITE && kind != POLICY_FREE)
        return base_fail(LMS_ERR_INVALID, "policy_access: %d is not a kind", (int)kind);
    p->version++;
    if (p->lru_only) { /* recency is all it keeps */
        p->clock++;
        for (size_t c = first; c < first + n; c++)
            p->last[c] = p->clock;
        return LMS_OK;
    }
    if (p->ncur == p->capcur) {
        size_t cap = p->capcur ? 2 * p->capcur : 1024;
        if (cap >= UINT32_MAX)
            cap = UINT32_MAX - 1;
        event_t *e = cap > p->ncur ? base_meta_realloc(p->cur, cap * sizeof *e) : NULL;
        if (e == NULL)
            return base_fail(LMS_ERR_OUT_OF_MEMORY, "policy_access: no host memory for an "
                             "iteration of more than %zu events", p->ncur);
        p->cur = e;
        p->capcur = cap;
    }
    p->cur[p->ncur++] = (event_t){(uint32_t)first, (uint32_t)n, kind, now_ns};
    p->clock++;
    for (size_t c = first; c < first + n; c++)
        p->last[c] = p->clock;
    lms_status_t st = LMS_OK;
    if (p->start != NULL)
        st = follow(p);
    if (st == LMS_OK && !p->manual && p->start != NULL && !p->detecting &&
        p->lost > 2 * (p->nsched > POLICY_WINDOW ? p->nsched : POLICY_WINDOW)) {
        p->detecting = true; /* lost for good: look for the new iteration */
        p->det_base = p->ncur;
        p->ncand = 0;
    }
    if (st == LMS_OK && p->detecting && !p->manual)
        st = detect(p);
    /* a failure to build a schedule keeps the event: the next one retries */
    return st;
}

/* ---- the oracle -------------------------------------------------------------- */

/* Events from the position to the schedule's next event that names chunk
 * (POLICY_NEVER if none), and that event's index in *at. */
static uint64_t next_event(const policy_t *p, size_t chunk, uint32_t *at)
{
    if (p->start == NULL || chunk >= p->nchunks || p->start[chunk] == p->start[chunk + 1])
        return POLICY_NEVER;
    const uint32_t *u = p->use + p->start[chunk];
    size_t lo = 0, hi = p->start[chunk + 1] - p->start[chunk], pos = p->pos;
    while (lo < hi) { /* the first use at or after pos */
        size_t mid = lo + (hi - lo) / 2;
        if (u[mid] < pos)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < p->start[chunk + 1] - p->start[chunk]) {
        *at = u[lo];
        return *at - pos;
    }
    *at = u[0]; /* none left in this iteration: its first use in the next one */
    return p->nsched - pos + *at;
}

uint64_t policy_next_use(const policy_t *p, size_t chunk, bool *dead)
{
    uint32_t at;
    uint64_t d = next_event(p, chunk, &at);
    if (dead != NULL)
        *dead = d != POLICY_NEVER && p->sched[at].kind != POLICY_USE;
    return d;
}

uint64_t policy_evict_key(const policy_t *p, size_t chunk)
{
    if (chunk >= p->nchunks)
        return 0;
    if (!p->following)
        return UINT64_MAX - p->last[chunk];
    uint32_t at;
    uint64_t d = next_event(p, chunk, &at);
    if (d == POLICY_NEVER)
        return UINT64_MAX - 1;
    if (p->sched[at].kind == POLICY_FREE)
        return UINT64_MAX;
    return d;
}

long policy_victim(const policy_t *p, const uint32_t *candidates, size_t n)
{
    long best = -1;
    uint64_t top = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t k = policy_evict_key(p, candidates[i]);
        if (best < 0 || k > top) {
            best = (long)i;
            top = k;
        }
    }
    return best;
}

/* ---- prefetch (Note [Prefetch horizon], Note [Prefetch without harm]) --------- */

/* A fresh stamp for p->seen, three values apart (a walk's marks). */
static void new_stamp(policy_t *p)
{
    p->seen_stamp += 3;
    if (p->seen_stamp >= UINT32_MAX - 3) {
        memset(p->seen, 0, p->nchunks * sizeof *p->seen);
        p->seen_stamp = 3;
    }
}

/* The schedule's times (policy_access's now_ns): an event's mean gap, the
 * iteration's length, and the time of the event at the position. */
static void sched_clock(const policy_t *p, uint64_t *gap, uint64_t *length, uint64_t *now)
{
    const event_t *s = p->sched;
    size_t ns = p->nsched;
    uint64_t span = s[ns - 1].t - s[0].t;
    *gap = ns > 1 ? span / (ns - 1) : 0;
    *length = span + *gap;
    *now = p->pos < ns ? s[p->pos].t : s[ns - 1].t + *gap;
}

/* Events from schedule event j to chunk c's next use after it (wrapping
 * round the end; the schedule's length if j is its only one). c must be in
 * the schedule. */
static uint64_t use_after(const policy_t *p, size_t c, size_t j)
{
    const uint32_t *u = p->use + p->start[c];
    size_t lo = 0, hi = p->start[c + 1] - p->start[c], n = hi;
    while (lo < hi) { /* the first use after j */
        size_t mid = lo + (hi - lo) / 2;
        if (u[mid] <= j)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n ? u[lo] - j : p->nsched - j + u[0];
}

/* Past the horizon (Note [Prefetch horizon]): whether one more chunk may be
 * taken, with `taken` taken and new data needing demand_peak blocks at most
 * up to here. */
static bool room_beyond(const policy_link_t *link, size_t taken, int64_t demand_peak,
                        uint64_t gap)
{
    if ((int64_t)taken + demand_peak + 1 >= (int64_t)link->free_blocks)
        return false; /* a block stays free: the reclaim thread's */
    double queue = (double)link->queued_bytes + (double)taken * (double)link->chunk_bytes;
    return queue / link->bytes_per_ns <= 2 * (double)gap; /* else the link is busy */
}

size_t policy_prefetch(policy_t *p, const policy_link_t *link,
                       policy_need_t (*needs)(void *arg, uint32_t chunk), void *arg,
                       policy_fetch_t *out, size_t max, int64_t *blocks_ahead)
{
    if (blocks_ahead != NULL)
        *blocks_ahead = 0;
    if (!p->following || p->nsched == 0 || max == 0)
        return 0;
    new_stamp(p); /* seen: the stamp; freed: + 1; fetched: + 2 */
    const event_t *s = p->sched;
    size_t ns = p->nsched;
    uint64_t gap, length, now;
    sched_clock(p, &gap, &length, &now);
    double bw = link != NULL ? link->bytes_per_ns : 0;
    double chunk = link != NULL ? (double)link->chunk_bytes : 0;
    size_t walk = ns;
    if (link != NULL && link->max_events > 0 && link->max_events < ns)
        walk = link->max_events;
    /* the latest next use of the chunks used so far, from the event before
     * the position on (Note [Prefetch without harm]) */
    uint64_t latest = 0;
    size_t before = (p->pos + ns - 1) % ns;
    for (uint32_t c = s[before].first; c < s[before].first + s[before].n; c++) {
        uint64_t q = use_after(p, c, before);
        latest = q - 1 > latest ? q - 1 : latest;
    }
    /* blocks needed by the events walked, less those freed (with the fetches
     * taken, and without them), and the most of each at any point */
    int64_t blocks = 0, peak = 0, demand = 0, demand_peak = 0, at_horizon = 0;
    size_t taken = 0;
    bool beyond = false; /* past the horizon: into free blocks only */
    for (size_t d = 0; d < walk; d++) {
        size_t j = (p->pos + d) % ns;
        uint64_t at = p->pos + d < ns ? s[j].t : s[j].t + length; /* on the schedule's clock */
        uint64_t until = at > now ? at - now : 0;
        if (!beyond && bw > 0 &&
            (double)until > 2 * (double)(taken + 1) * chunk / bw + 2 * (double)gap) {
            beyond = true;
            at_horizon = demand_peak;
        }
        if (beyond && !room_beyond(link, taken, demand_peak, gap))
            break;
        uint64_t next_latest = latest;
        for (uint32_t c = s[j].first; c < s[j].first + s[j].n; c++) {
            uint64_t q = d + use_after(p, c, j);
            next_latest = q > next_latest ? q : next_latest;
            /* its first event from here is the one that counts; after a
             * free, the next one needs a block again */
            uint32_t was = p->seen[c];
            bool fetched = was == p->seen_stamp + 2;
            if (s[j].kind == POLICY_FREE) {
                bool held = was == p->seen_stamp || /* resident by then */
                            (!fetched && was != p->seen_stamp + 1 && needs(arg, c) == POLICY_HAS);
                blocks -= held || fetched;
                demand -= held; /* a fetch's block is not new data's */
                p->seen[c] = p->seen_stamp + 1;
                continue;
            }
            if (was == p->seen_stamp || fetched)
                continue;
            p->seen[c] = p->seen_stamp;
            policy_need_t need = was == p->seen_stamp + 1 ? POLICY_NO_DATA : needs(arg, c);
            if (need == POLICY_HAS)
                continue;
            if (s[j].kind == POLICY_OVERWRITE || need != POLICY_ON_HOST) {
                peak = ++blocks > peak ? blocks : peak;
                demand_peak = ++demand > demand_peak ? demand : demand_peak;
                continue;
            }
            p->seen[c] = p->seen_stamp + 2;
            out[taken] = (policy_fetch_t){.chunk = c, .events = d, .ns = until};
            if (beyond) { /* held from now: frees before its use do not count */
                out[taken].evict_after = UINT64_MAX;
                out[taken].blocks_before = (int64_t)taken + demand_peak;
            } else {
                /* a victim used as late as the latest is MIN's choice too (a
                 * tie: MIN may take either), so evict_after is one less */
                out[taken].evict_after = latest > d ? latest - 1 : d;
                out[taken].blocks_before = peak;
            }
            taken++;
            peak = ++blocks > peak ? blocks : peak;
            if (taken == max || (beyond && !room_beyond(link, taken, demand_peak, gap)))
                break;
        }
        if (taken == max)
            break; /* no room beyond: the check at the next event ends the walk */
        latest = next_latest;
    }
    if (blocks_ahead != NULL)
        *blocks_ahead = beyond ? at_horizon : demand_peak;
    return taken;
}

/* ---- eviction ahead (Note [Eviction ahead]) ----------------------------------- */

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Room for n more next uses in p->outrank. */
static bool outrank_room(policy_t *p, size_t n)
{
    if (p->noutrank + n <= p->capoutrank)
        return true;
    size_t cap = p->capoutrank > 0 ? p->capoutrank : 1024;
    while (cap < p->noutrank + n)
        cap *= 2;
    uint64_t *q = base_meta_realloc(p->outrank, cap * sizeof *q);
    if (q == NULL)
        return false;
    p->outrank = q;
    p->capoutrank = cap;
    return true;
}

/* The walk: from the position, the blocks the events need (peak) and the
 * time until each, with the D2H link's blocks a ns; keeps the first
 * AHEAD_DEMANDS points where more blocks are late than at any before
 * (demand[]), each with the next uses of the chunks used up to it, sorted
 * (outrank). False if the host has no memory for those. */
static bool ahead_walk(policy_t *p, const policy_link_t *link,
                       policy_need_t (*needs)(void *arg, uint32_t chunk), void *arg)
{
    new_stamp(p); /* seen: the stamp; freed: + 1 */
    const event_t *s = p->sched;
    size_t ns = p->nsched;
    uint64_t gap, length, now;
    sched_clock(p, &gap, &length, &now);
    size_t walk = link->max_events > 0 && link->max_events < ns ? link->max_events : ns;
    double per_ns = link->d2h_bytes_per_ns / (double)link->chunk_bytes / 2;
    int64_t blocks = 0, peak = 0, most = 0;
    p->ndemands = p->noutrank = 0;
    for (size_t d = 0; d < walk && p->ndemands < AHEAD_DEMANDS; d++) {
        size_t j = (p->pos + d) % ns;
        uint64_t at = p->pos + d < ns ? s[j].t : s[j].t + length;
        uint64_t until = at > now ? at - now : 0;
        if (!outrank_room(p, s[j].n))
            return false;
        for (uint32_t c = s[j].first; c < s[j].first + s[j].n; c++) {
            uint32_t was = p->seen[c];
            if (s[j].kind == POLICY_FREE) {
                blocks -= was == p->seen_stamp ||
                          (was != p->seen_stamp + 1 && needs(arg, c) == POLICY_HAS);
                p->seen[c] = p->seen_stamp + 1;
                continue;
            }
            size_t next = use_after(p, c, j); /* dead then: it outranks nothing */
            if (s[(j + next) % ns].kind != POLICY_FREE)
                p->outrank[p->noutrank++] = d + next;
            if (was == p->seen_stamp)
                continue;
            p->seen[c] = p->seen_stamp;
            if (was == p->seen_stamp + 1 || needs(arg, c) != POLICY_HAS)
                peak = ++blocks > peak ? blocks : peak;
        }
        int64_t target = peak - (int64_t)((double)until * per_ns);
        if (target > most) {
            most = target;
            p->demand[p->ndemands++] =
                (struct demand){.at = d, .peak = peak, .target = target, .nq = p->noutrank};
        }
    }
    /* the next uses between each demand and the one before, sorted: a
     * demand's prefix is its segment and those before (each sorted once) */
    for (size_t i = 0, lo = 0; i < p->ndemands; lo = p->demand[i++].nq)
        qsort(p->outrank + lo, p->demand[i].nq - lo, sizeof *p->outrank, cmp_u64);
    return true;
}

/* Of the next uses in walk[lo, hi) (sorted), how many come after key. */
static size_t later_than(const uint64_t *q, size_t lo, size_t hi, uint64_t key)
{
    size_t end = hi;
    while (lo < hi) { /* the first after key */
        size_t mid = lo + (hi - lo) / 2;
        if (q[mid] <= key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return end - lo;
}

/* How many of the ranked victims from `from` on MIN evicts for demand d,
 * at most `late`: those used after it that fewer than the blocks it still
 * needs (e) outrank there (Note [Eviction ahead]). */
static size_t mins_for(const policy_t *p, size_t d, const policy_victims_t *v, size_t ranked,
                       size_t from, size_t moved, int64_t late, int64_t e)
{
    const struct demand *dm = &p->demand[d];
    size_t k = 0;
    for (; from + k < ranked && (int64_t)k < late; k++) {
        uint64_t key = v->key(v->arg, from + k) + moved; /* from the walk's position */
        if (key <= dm->at)
            break; /* used before the demand: not MIN's */
        size_t above = 0; /* chunks used up to the demand with a next use after key's */
        for (size_t i = 0, lo = 0; i <= d; lo = p->demand[i++].nq)
            above += later_than(p->outrank, lo, p->demand[i].nq, key);
        if ((int64_t)(k + above) >= e)
            break;
    }
    return k;
}

/* How many ranked victims, from *from on, eviction ahead starts now, by
 * the last walk (made `moved` events ago). */
static size_t ahead_count(policy_t *p, const policy_room_t *room, const policy_victims_t *v,
                          size_t moved, size_t *from)
{
    size_t most = 0, ranked = 0, dead = 0;
    bool asked = false;
    for (size_t i = 0; i < p->ndemands; i++) {
        const struct demand *dm = &p->demand[i];
        int64_t late = dm->target - (int64_t)room->spare;
        int64_t e = dm->peak - (int64_t)room->spare; /* what MIN still evicts up to there */
        if (late <= (int64_t)most || e <= 0 || dm->at < moved)
            continue;
        if (!asked) {
            ranked = v->rank(v->arg, (size_t)p->demand[p->ndemands - 1].target + 64);
            while (dead < ranked && v->key(v->arg, dead) == UINT64_MAX)
                dead++; /* freed before their next use: the free gives their blocks back */
            asked = true;
        }
        size_t k = mins_for(p, i, v, ranked, dead, moved, late, e);
        most = k > most ? k : most;
    }
    *from = dead;
    return most;
}

size_t policy_evict_ahead(policy_t *p, const policy_link_t *link,
                          policy_need_t (*needs)(void *arg, uint32_t chunk), void *arg,
                          const policy_room_t *room, const policy_victims_t *v, size_t *from)
{
    *from = 0;
    if (!p->following || p->nsched == 0 || link == NULL || link->d2h_bytes_per_ns <= 0 ||
        link->chunk_bytes == 0)
        return 0;
    size_t ns = p->nsched, moved = (p->pos + ns - p->ahead_pos) % ns;
    bool stale = !p->ahead_ok || p->ahead_basis != p->basis || moved >= AHEAD_EVERY ||
                 (p->ndemands > 0 && moved > p->demand[0].at);
    size_t n = stale ? 0 : ahead_count(p, room, v, moved, from);
    /* a walk kept answers "none" as it is; "some" only if the room has not
     * changed since (Note [Eviction ahead]) */
    if (stale || (n > 0 && room->spare != p->ahead_spare)) {
        p->ahead_ok = ahead_walk(p, link, needs, arg);
        p->ahead_pos = p->pos;
        p->ahead_spare = room->spare;
        p->ahead_basis = p->basis;
        n = p->ahead_ok ? ahead_count(p, room, v, 0, from) : 0;
    }
    return n;
}

void policy_usage(const policy_t *p, policy_usage_t *out)
{
    *out = (policy_usage_t){.schedule_events = p->start != NULL ? p->nsched : 0,
                            .position = p->pos,
                            .recorded = p->ncur,
                            .iterations = p->iterations,
                            .found = p->found,
                            .hits = p->hits,
                            .misses = p->misses,
                            .fallbacks = p->fallbacks,
                            .following = p->following};
}
