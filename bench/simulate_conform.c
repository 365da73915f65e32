/*
 * bench/simulate_conform.c — the conformance check of Note [One plan]
 * (policy/plan.c): with --check, every plan the simulator makes for its
 * prefetch is made again by swap/'s own code over the same state, and the
 * two must be the same.
 *
 * swap/'s side is swap/'s code, not a copy: its chunk table (swap/chunks.h)
 * filled from the model's chunks, what its chunks need (swap_chunk_facts,
 * the same function the simulator describes its chunks with), its rule for
 * what may be evicted (resid_chunk_evictable), its ranking (swap/ranking.c,
 * over the LRU list), and its count of the room (policy_room_of over its
 * free blocks and those on their way out; it promises no blocks). The model
 * gives each chunk's state, the kernels that pin it (swap/'s access windows
 * that hold it), whether it is allocated (not free in alloc/) and whether it
 * was fetched ahead and not used yet.
 *
 * The same means: the same fetches, in the same order, with the same next
 * use, evict_after, blocks_before and placement, the same numbers placed,
 * to evict and ranked, and the victims going now with the same keys (which
 * chunk among equal keys may differ: the model breaks ties by its
 * candidate order, swap/ by the LRU list, and a plan depends only on the
 * keys). Where swap/ would sample its ranking (more than RANKED_MAX chunks
 * with a block) the plans may differ by design (Note [Ranking between
 * events] in swap/ranking.c): those are counted, not compared.
 */
#include <stdlib.h>
#include <string.h>

#include "bench/simulate.h"
#include "swap/residency.h"

static struct {
    chunks_t t;
    ranking_t r;
    size_t with_block; /* chunks with a block: swap/'s resident */
    bool made;
    policy_fetch_t fetch[SIM_CONFORM_MAX];
    uint64_t plans, sampled;
} C;

static policy_need_t swap_need(void *arg, uint32_t c)
{
    const chunk_t *k = &((const chunks_t *)arg)->ch[c];
    return policy_need_of(swap_chunk_facts(k->state, k->holds, k->free));
}

static size_t swap_rank(void *arg, size_t depth)
{
    return ranking_victims(arg, depth, C.with_block);
}

static uint64_t swap_key(void *arg, size_t i) { return ranking_key(arg, i); }

/* swap/'s table, as the model's chunks are now: the chunks with a block on
 * the LRU list (in id order: recency only breaks ties); how many those are.
 * Made again for each run (a workload, a policy). */
static size_t mirror(const policy_t *p, size_t nchunks, sim_conform_chunk_fn chunk, void *arg)
{
    if (C.made && (C.t.n != nchunks || C.r.policy != p)) {
        ranking_destroy(&C.r);
        chunks_destroy(&C.t);
        C.made = false;
    }
    if (!C.made) {
        if (chunks_init(&C.t, nchunks) != LMS_OK ||
            ranking_init(&C.r, &C.t, p, resid_chunk_evictable) != LMS_OK)
            sim_die("no host memory");
        C.made = true;
    }
    C.t.lru_head = C.t.lru_tail = NO_CHUNK;
    size_t with_block = 0;
    for (size_t c = 0; c < nchunks; c++) {
        sim_conform_chunk_t m;
        chunk(arg, (uint32_t)c, &m);
        chunk_t *k = &C.t.ch[c];
        k->on_lru = false;
        k->state = m.state;
        k->holds = m.pins;
        k->free = !m.live;
        k->prefetched = m.ahead;
        k->xfer = NULL;
        k->pins = 0;
        k->broken = false;
        if (m.live && (m.state == RESIDENT || m.state == EVICTING || m.state == FETCHING)) {
            chunks_lru_touch(&C.t, c);
            with_block++;
        }
    }
    return with_block;
}

static void differ(const char *what, size_t i, uint64_t sim, uint64_t swap)
{
    sim_die("conformance (Note [One plan]): plan %llu: %s %zu is %llu in the simulator's plan, "
            "%llu in swap/'s", (unsigned long long)C.plans, what, i, (unsigned long long)sim,
            (unsigned long long)swap);
}

void sim_conform_plan(policy_t *p, const policy_link_t *link, size_t nchunks,
                      sim_conform_chunk_fn chunk, void *arg, size_t free_blocks, size_t leaving,
                      size_t max, const policy_fetch_t *fetch, size_t n, const policy_plan_t *plan,
                      const uint64_t *keys)
{
    if (max > SIM_CONFORM_MAX)
        sim_die("the conformance check takes plans of %d fetches at most", SIM_CONFORM_MAX);
    C.plans++;
    C.with_block = mirror(p, nchunks, chunk, arg);
    if (C.with_block > RANKED_MAX) {
        C.sampled++;
        return;
    }
    ranking_stale_full(&C.r); /* the table changed under it */
    policy_room_t room = policy_room_of(free_blocks, leaving, 0);
    policy_link_t l = *link;
    l.free_blocks = room.spare;
    policy_victims_t victims = {.rank = swap_rank, .key = swap_key, .arg = &C.r};
    policy_plan_t sp;
    size_t sn = policy_plan_prefetch(p, &l, swap_need, &C.t, &room, &victims, C.fetch, max, &sp);
    if (sn != n)
        differ("the number of fetches", 0, n, sn);
    for (size_t i = 0; i < n; i++) {
        const policy_fetch_t *a = &fetch[i], *b = &C.fetch[i];
        if (a->chunk != b->chunk)
            differ("the chunk of fetch", i, a->chunk, b->chunk);
        if (a->events != b->events || a->evict_after != b->evict_after ||
            a->blocks_before != b->blocks_before)
            differ("the next use, evict_after or blocks_before of fetch", i, a->chunk, b->chunk);
        if (i < plan->placed && a->victim != b->victim)
            differ("the placement of fetch", i, (uint64_t)a->victim, (uint64_t)b->victim);
    }
    if (plan->placed != sp.placed)
        differ("the fetches placed", 0, plan->placed, sp.placed);
    if (plan->evict != sp.evict)
        differ("the victims to evict", 0, plan->evict, sp.evict);
    if (plan->blocks_ahead != sp.blocks_ahead)
        differ("blocks ahead", 0, (uint64_t)plan->blocks_ahead, (uint64_t)sp.blocks_ahead);
    for (size_t i = 0; i < plan->evict; i++)
        if (keys[2 * i] != ranking_key(&C.r, i))
            differ("the key of victim", i, keys[2 * i], ranking_key(&C.r, i));
}

void sim_conform_counts(uint64_t *plans, uint64_t *sampled)
{
    *plans = C.plans;
    *sampled = C.sampled;
}
