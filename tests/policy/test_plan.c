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
