/*
 * tests/policy/test_plan.c — the plan (policy/plan.c, Note [One plan]):
 * where fetches ahead go, which victims go for them, and the reclaim
 * thread's watermarks. Pure: a made-up ranking stands for the caller's.
 */
#include "harness.h"
#include "policy/policy.h"

/* A caller's ranking: keys, highest first; it ranks `shallow` of them at
 * first ask and all on a deeper one, as swap/'s repaired head does. */
typedef struct fake_rank {
    const uint64_t *key;
    size_t n, shallow, asks, deepest;
} fake_rank_t;

static size_t fake_ranked(void *arg, size_t depth)
{
    fake_rank_t *r = arg;
    r->asks++;
    r->deepest = depth > r->deepest ? depth : r->deepest;
    return r->asks == 1 && r->shallow < r->n ? r->shallow : r->n;
}

static uint64_t fake_key(void *arg, size_t i) { return ((fake_rank_t *)arg)->key[i]; }

static policy_fetch_t fetch_at(uint32_t chunk, int64_t before, uint64_t evict_after)
{
    return (policy_fetch_t){.chunk = chunk, .blocks_before = before, .evict_after = evict_after};
}

Test(plan, fetches_take_free_blocks_first_less_the_reclaim_threads_reserve)
{
    uint64_t keys[] = {100, 90, 80};
    fake_rank_t r = {.key = keys, .n = 3, .shallow = 3};
    policy_victims_t v = {.rank = fake_ranked, .key = fake_key, .arg = &r};
    policy_fetch_t f[4] = {fetch_at(1, 0, 10), fetch_at(2, 1, 10), fetch_at(3, 2, 10),
                           fetch_at(4, 3, 10)};
    policy_room_t room = {.spare = 3, .reserve = 1};
    policy_plan_t plan = {0};
    policy_plan_place(f, 4, &room, &v, &plan);
    cr_assert_eq(plan.placed, 4);
    cr_assert_eq(f[0].victim, -1, "room for two: free blocks");
    cr_assert_eq(f[1].victim, -1);
    cr_assert_eq(f[2].victim, 0, "the reserved block is the first victim's place");
    cr_assert_eq(f[3].victim, 1);
    cr_assert_eq(plan.evict, 2, "two victims go now");
    room.reserve = 0;
    policy_plan_place(f, 4, &room, &v, &plan);
    cr_assert_eq(f[2].victim, -1, "without a reserve, three free blocks");
    cr_assert_eq(f[3].victim, 0);
    cr_assert_eq(plan.evict, 1);
}

Test(plan, a_victim_must_be_used_after_the_fetchs_evict_after_and_the_first_that_is_not_ends_it)
{
    uint64_t keys[] = {100, 50, 40};
    fake_rank_t r = {.key = keys, .n = 3, .shallow = 3};
    policy_victims_t v = {.rank = fake_ranked, .key = fake_key, .arg = &r};
    /* the second victim (key 50) is not after 60: MIN would keep it */
    policy_fetch_t f[3] = {fetch_at(1, 0, 60), fetch_at(2, 1, 60), fetch_at(3, 2, 10)};
    policy_room_t room = {.spare = 1, .reserve = 1};
    policy_plan_t plan = {0};
    policy_plan_place(f, 3, &room, &v, &plan);
    cr_assert_eq(plan.placed, 1, "the third, placeable alone, waits behind the second");
    cr_assert_eq(f[0].victim, 0);
    cr_assert_eq(plan.evict, 1);
    keys[0] = 60; /* a tie is not after */
    policy_plan_place(f, 3, &room, &v, &plan);
    cr_assert_eq(plan.placed, 0);
    cr_assert_eq(plan.evict, 0, "nothing goes for a fetch that waits");
}

Test(plan, a_short_ranking_is_asked_for_a_deeper_one_and_no_victims_end_it)
{
    uint64_t keys[] = {100, 90, 80, 70, 60};
    fake_rank_t r = {.key = keys, .n = 5, .shallow = 1};
    policy_victims_t v = {.rank = fake_ranked, .key = fake_key, .arg = &r};
    policy_fetch_t f[3] = {fetch_at(1, 0, 10), fetch_at(2, 1, 10), fetch_at(3, 2, 10)};
    policy_room_t room = {.spare = 0, .reserve = 1};
    policy_plan_t plan = {0};
    policy_plan_place(f, 3, &room, &v, &plan);
    cr_assert_eq(plan.placed, 3);
    cr_assert_eq(r.asks, 2, "one ask, and one deeper when the first ran out");
    cr_assert_geq(r.deepest, 2);
    cr_assert_eq(plan.ranked, 5);
    cr_assert_eq(plan.evict, 3);
    fake_rank_t none = {.key = keys, .n = 0};
    v.arg = &none;
    policy_plan_place(f, 3, &room, &v, &plan);
    cr_assert_eq(plan.placed, 0, "nothing evictable: nothing placed");
    cr_assert_eq(plan.ranked, 0);
}

Test(plan, what_a_chunk_needs_is_decided_from_its_facts_in_one_order)
{
    policy_chunk_facts_t none = {0};
    cr_assert_eq(policy_need_of(none), POLICY_NO_DATA);
    cr_assert_eq(policy_need_of((policy_chunk_facts_t){.data = true}), POLICY_ON_HOST);
    /* a block, or one promised, wins over everything else */
    cr_assert_eq(policy_need_of((policy_chunk_facts_t){.block = true, .leaving = true,
                                                       .held = true, .data = true}),
                 POLICY_HAS);
    cr_assert_eq(policy_need_of((policy_chunk_facts_t){.promised = true, .held = true}),
                 POLICY_HAS);
    /* leaving or held: a block at its use, but not a prefetch's to fetch */
    cr_assert_eq(policy_need_of((policy_chunk_facts_t){.leaving = true, .data = true}),
                 POLICY_CLAIMED);
    cr_assert_eq(policy_need_of((policy_chunk_facts_t){.held = true, .data = true}),
                 POLICY_CLAIMED);
    cr_assert_eq(policy_need_of((policy_chunk_facts_t){.held = true}), POLICY_CLAIMED);
}

Test(plan, the_room_is_the_free_blocks_and_those_leaving_less_the_promised)
{
    policy_room_t r = policy_room_of(3, 2, 1);
    cr_assert_eq(r.spare, 4);
    cr_assert_eq(r.reserve, POLICY_RESERVE);
    cr_assert_eq(policy_room_of(1, 0, 5).spare, 0, "promised past what there is: none");
}

Test(plan, the_watermarks_are_what_new_data_ahead_needs_while_following_else_the_configured)
{
    size_t lo, hi;
    policy_watermarks(NULL, 7, 3, 5, &lo, &hi);
    cr_assert(lo == 3 && hi == 5, "no policy: the configured ones");
    policy_t *p;
    policy_config_t cfg = {.nchunks = 8};
    TEST_OK(policy_create(&cfg, &p));
    policy_watermarks(p, 7, 3, 5, &lo, &hi);
    cr_assert(lo == 3 && hi == 5, "not following: the configured ones");
    for (int it = 0; it < 2; it++) { /* a schedule, followed */
        for (size_t c = 0; c < 4; c++)
            TEST_OK(policy_access(p, c, 1, POLICY_USE, 0));
        TEST_OK(policy_mark_iteration(p));
    }
    cr_assert(policy_following(p));
    policy_watermarks(p, 7, 3, 5, &lo, &hi);
    cr_assert(lo == 7 && hi == 7, "following: what new data ahead needs, for both");
    policy_watermarks(p, 0, 3, 5, &lo, &hi);
    cr_assert(lo == 1 && hi == 1, "at least one");
    policy_destroy(p);
}

/* ---- eviction ahead (Note [Eviction ahead] in policy.c) ---- */

#define AHEAD_CHUNKS 64
#define MiB_ (1024 * 1024)

/* What the test's chunks are: set per test. */
static policy_need_t ahead_need[AHEAD_CHUNKS];
static policy_need_t need_of(void *arg, uint32_t c)
{
    (void)arg;
    return ahead_need[c];
}

/* The caller's ranking: the resident chunks (POLICY_HAS) by policy_evict_key. */
typedef struct true_rank {
    const policy_t *p;
    uint64_t key[AHEAD_CHUNKS];
    uint32_t chunk[AHEAD_CHUNKS];
    size_t n;
} true_rank_t;

static size_t true_ranked(void *arg, size_t depth)
{
    true_rank_t *r = arg;
    (void)depth;
    r->n = 0;
    for (uint32_t c = 0; c < AHEAD_CHUNKS; c++) {
        if (ahead_need[c] != POLICY_HAS)
            continue;
        uint64_t k = policy_evict_key(r->p, c);
        size_t i = r->n++;
        for (; i > 0 && r->key[i - 1] < k; i--) { /* highest first, lower ids first among equals */
            r->key[i] = r->key[i - 1];
            r->chunk[i] = r->chunk[i - 1];
        }
        r->key[i] = k;
        r->chunk[i] = c;
    }
    return r->n;
}

static uint64_t true_key(void *arg, size_t i) { return ((true_rank_t *)arg)->key[i]; }

/* Two iterations of: use 8..15 at t 0; free 61 (never there: nothing) at
 * 50 us; use 40..47 at 100 us (with_fetch); overwrite 20..35 at 200 us (a
 * burst of new data); use 0..7 at 300 us; free 20..35 and 50 (dead data)
 * at 400 us. Then the third iteration's first event: the position is 1,
 * and the burst is 150 us away. */
static policy_t *ahead_schedule(bool with_fetch)
{
    policy_t *p;
    policy_config_t cfg = {.nchunks = AHEAD_CHUNKS};
    TEST_OK(policy_create(&cfg, &p));
    for (int it = 0; it < 3; it++) {
        uint64_t t0 = (uint64_t)it * 1000000;
        TEST_OK(policy_access(p, 8, 8, POLICY_USE, t0));
        if (it == 2)
            break;
        TEST_OK(policy_access(p, 61, 1, POLICY_FREE, t0 + 50000));
        if (with_fetch)
            TEST_OK(policy_access(p, 40, 8, POLICY_USE, t0 + 100000));
        TEST_OK(policy_access(p, 20, 16, POLICY_OVERWRITE, t0 + 200000));
        TEST_OK(policy_access(p, 0, 8, POLICY_USE, t0 + 300000));
        TEST_OK(policy_access(p, 20, 16, POLICY_FREE, t0 + 400000));
        TEST_OK(policy_access(p, 50, 1, POLICY_FREE, t0 + 400000));
        TEST_OK(policy_mark_iteration(p));
    }
    cr_assert(policy_following(p));
    for (uint32_t c = 0; c < AHEAD_CHUNKS; c++)
        ahead_need[c] = POLICY_NO_DATA;
    for (uint32_t c = 0; c < 16; c++)
        ahead_need[c] = POLICY_HAS;
    for (uint32_t c = 40; c < 48; c++)
        ahead_need[c] = POLICY_ON_HOST;
    return p;
}

/* A D2H link of 1 MB/ms and 1 MiB chunks: far too slow for 16 chunks in
 * 150 us, so the burst is late by all it needs beyond the spare blocks. */
static const policy_link_t slow_d2h = {.chunk_bytes = MiB_, .d2h_bytes_per_ns = 1e-3};

Test(plan, eviction_ahead_starts_what_a_late_burst_of_new_data_needs_with_mins_victims)
{
    policy_t *p = ahead_schedule(false);
    true_rank_t r = {.p = p};
    policy_victims_t v = {.rank = true_ranked, .key = true_key, .arg = &r};
    policy_room_t room = {.spare = 4, .reserve = 1};
    size_t from;
    size_t n = policy_evict_ahead(p, &slow_d2h, need_of, NULL, &room, &v, &from);
    /* MIN, at the burst (16 blocks, 4 free), evicts the 12 used furthest:
     * 8..15 (the next iteration) and four of 0..7 */
    cr_assert_eq(from, 0);
    cr_assert_eq(n, 12, "%zu victims", n);
    for (size_t i = 0; i < 8; i++)
        cr_assert(r.chunk[i] >= 8 && r.chunk[i] < 16, "the furthest first");
    room.spare = 16;
    cr_assert_eq(policy_evict_ahead(p, &slow_d2h, need_of, NULL, &room, &v, &from), 0,
                 "room for the burst: nothing to evict");
    policy_link_t fast = {.chunk_bytes = MiB_, .d2h_bytes_per_ns = 1000};
    room.spare = 4;
    policy_destroy(p);
    p = ahead_schedule(false);
    r.p = p;
    cr_assert_eq(policy_evict_ahead(p, &fast, need_of, NULL, &room, &v, &from), 0,
                 "a link fast enough evicts in time: nothing yet");
    policy_link_t unknown = {.chunk_bytes = MiB_};
    cr_assert_eq(policy_evict_ahead(p, &unknown, need_of, NULL, &room, &v, &from), 0,
                 "no D2H rate: none");
    policy_destroy(p);
}

Test(plan, eviction_ahead_leaves_what_chunks_used_before_the_burst_will_outrank)
{
    /* 40..47 are fetched before the burst, and their next use after it
     * comes later than 8..15's: at the burst MIN evicts them first, so of
     * the 20 blocks it needs beyond the spare, only 12 come from what is
     * resident now */
    policy_t *p = ahead_schedule(true);
    true_rank_t r = {.p = p};
    policy_victims_t v = {.rank = true_ranked, .key = true_key, .arg = &r};
    policy_room_t room = {.spare = 4, .reserve = 1};
    size_t from;
    size_t n = policy_evict_ahead(p, &slow_d2h, need_of, NULL, &room, &v, &from);
    cr_assert_eq(n, 12, "%zu victims, not the 20 late", n);
    policy_destroy(p);
}

Test(plan, eviction_ahead_skips_data_freed_before_its_next_use)
{
    policy_t *p = ahead_schedule(false);
    ahead_need[50] = POLICY_HAS; /* resident, freed before it is used again */
    true_rank_t r = {.p = p};
    policy_victims_t v = {.rank = true_ranked, .key = true_key, .arg = &r};
    policy_room_t room = {.spare = 4, .reserve = 1};
    size_t from;
    size_t n = policy_evict_ahead(p, &slow_d2h, need_of, NULL, &room, &v, &from);
    cr_assert_eq(r.chunk[0], 50, "dead data ranks first");
    cr_assert_eq(from, 1, "and is not copied out ahead");
    cr_assert_eq(n, 12);
    policy_destroy(p);
}

Test(plan, eviction_ahead_walks_again_when_the_room_changed_under_the_same_position)
{
    /* between two events the burst's first four chunks get blocks (from
     * the four spare): the blocks still late are the 12 of before, not 16 */
    policy_t *p = ahead_schedule(false);
    true_rank_t r = {.p = p};
    policy_victims_t v = {.rank = true_ranked, .key = true_key, .arg = &r};
    policy_room_t room = {.spare = 4, .reserve = 1};
    size_t from;
    cr_assert_eq(policy_evict_ahead(p, &slow_d2h, need_of, NULL, &room, &v, &from), 12);
    for (uint32_t c = 20; c < 24; c++)
        ahead_need[c] = POLICY_HAS;
    room.spare = 0;
    size_t n = policy_evict_ahead(p, &slow_d2h, need_of, NULL, &room, &v, &from);
    cr_assert_eq(n, 12, "%zu victims: a walk kept from before counts the four twice", n);
    policy_destroy(p);
}
