/*
 * tests/policy/test_policy.c — the schedule and its next-use oracle
 * (policy/ is pure C: tested directly, no device).
 */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "policy/policy.h"

#define NCHUNKS 64

static policy_t *p;

static void make(void)
{
    policy_config_t cfg = {.nchunks = NCHUNKS};
    TEST_OK(policy_create(&cfg, &p));
}

static void destroy(void) { policy_destroy(p); }

TestSuite(policy, .init = make, .fini = destroy);

static void record(const uint32_t *chunks, size_t n)
{
    for (size_t i = 0; i < n; i++)
        TEST_OK(policy_access(p, chunks[i], 1));
}

enum { A = 1, B = 2, C = 3, D = 4, E = 5 };

Test(policy, without_a_schedule_nothing_is_known)
{
    cr_assert_not(policy_has_schedule(p));
    TEST_OK(policy_access(p, A, 1));
    cr_assert_eq(policy_next_use(p, A), POLICY_NEVER);
    TEST_OK(policy_mark_iteration(p)); /* now there is one */
    cr_assert(policy_has_schedule(p));
    cr_assert_eq(policy_next_use(p, A), 0);
}

Test(policy, the_next_use_is_counted_in_events_from_the_position)
{
    const uint32_t it[] = {A, B, C, A, D, B}; /* positions 0..5 */
    record(it, 6);
    TEST_OK(policy_mark_iteration(p));
    cr_assert_eq(policy_next_use(p, A), 0);
    cr_assert_eq(policy_next_use(p, B), 1);
    cr_assert_eq(policy_next_use(p, C), 2);
    cr_assert_eq(policy_next_use(p, D), 4);
    cr_assert_eq(policy_next_use(p, E), POLICY_NEVER, "not in the schedule");
    TEST_OK(policy_access(p, A, 1)); /* position 1 */
    cr_assert_eq(policy_next_use(p, A), 2, "its next use is event 3");
    cr_assert_eq(policy_next_use(p, B), 0);
    const uint32_t cands[] = {A, B, C, D};
    cr_assert_eq(policy_victim(p, cands, 4), 3, "D is used last");
    const uint32_t with_e[] = {A, E, D};
    cr_assert_eq(policy_victim(p, with_e, 3), 1, "a chunk the schedule never names goes first");
    record((const uint32_t[]){B, C, A, D}, 4); /* position 5 */
    cr_assert_eq(policy_next_use(p, B), 0);
    cr_assert_eq(policy_next_use(p, A), 1, "next iteration: 6 - 5 + 0");
    cr_assert_eq(policy_next_use(p, C), 3, "6 - 5 + 2");
    record((const uint32_t[]){B, A, A}, 3); /* position 8: past the schedule's end */
    cr_assert_eq(policy_next_use(p, D), 4, "counted from the schedule's start");
    policy_usage_t u;
    policy_usage(p, &u);
    cr_assert(u.schedule_events == 6 && u.position == 8 && u.iterations == 1);
}

Test(policy, a_run_names_every_chunk_in_it)
{
    TEST_OK(policy_access(p, 10, 4)); /* 10..13 */
    TEST_OK(policy_access(p, 12, 1));
    TEST_OK(policy_mark_iteration(p));
    TEST_OK(policy_access(p, 10, 4)); /* position 1 */
    cr_assert_eq(policy_next_use(p, 12), 0);
    cr_assert_eq(policy_next_use(p, 13), 1, "its next use is next iteration's first event");
    cr_assert_eq(policy_next_use(p, 14), POLICY_NEVER);
}

Test(policy, bad_input_is_refused_and_changes_nothing)
{
    record((const uint32_t[]){A, B}, 2);
    TEST_FAILS(LMS_ERR_INVALID, policy_access(p, NCHUNKS, 1));
    TEST_FAILS(LMS_ERR_INVALID, policy_access(p, 5, 0));
    TEST_FAILS(LMS_ERR_INVALID, policy_access(p, NCHUNKS - 2, 3));
    TEST_FAILS(LMS_ERR_INVALID, policy_access(p, 1, SIZE_MAX));
    policy_usage_t u;
    policy_usage(p, &u);
    cr_assert_eq(u.position, 2);
    TEST_OK(policy_mark_iteration(p));
    cr_assert_eq(policy_next_use(p, NCHUNKS), POLICY_NEVER);
    cr_assert_eq(policy_next_use(p, SIZE_MAX), POLICY_NEVER);
    cr_assert_eq(policy_victim(p, NULL, 0), -1);
    policy_t *q;
    policy_config_t bad = {.nchunks = 0};
    TEST_FAILS(LMS_ERR_INVALID, policy_create(&bad, &q));
    TEST_FAILS(LMS_ERR_INVALID, policy_create(NULL, &q));
}

Test(policy, an_empty_iteration_keeps_the_schedule)
{
    record((const uint32_t[]){A, B, C}, 3);
    TEST_OK(policy_mark_iteration(p));
    TEST_OK(policy_mark_iteration(p));
    policy_usage_t u;
    policy_usage(p, &u);
    cr_assert(u.schedule_events == 3 && u.iterations == 1);
    cr_assert_eq(policy_next_use(p, C), 2);
    /* a new iteration replaces it */
    record((const uint32_t[]){C, A}, 2);
    TEST_OK(policy_mark_iteration(p));
    cr_assert_eq(policy_next_use(p, C), 0);
    cr_assert_eq(policy_next_use(p, B), POLICY_NEVER, "gone from the new schedule");
}

/* ---- Belady: the oracle's evictions miss as little as offline MIN ---- */

#define K 4   /* chunks that fit */
#define LEN 200
#define SPAN 12 /* chunk ids used */

/* Misses of a K-chunk cache over seq[0..n), evicting by `pick` on a full
 * miss. MIN looks ahead in seq (and wraps, as the schedule does); LRU looks
 * back; the policy asks policy_victim, its position kept with the sequence. */
typedef enum { BY_MIN, BY_LRU, BY_POLICY } rule_t;

static size_t misses(const uint32_t *seq, size_t n, rule_t rule)
{
    uint32_t res[K];
    size_t nres = 0, missed = 0, last[SPAN] = {0};
    for (size_t i = 0; i < n; i++) {
        uint32_t c = seq[i];
        bool hit = false;
        for (size_t j = 0; j < nres; j++)
            hit |= res[j] == c;
        if (!hit) {
            missed++;
            if (nres < K) {
                res[nres++] = c;
            } else {
                size_t v = 0;
                if (rule == BY_POLICY) {
                    v = (size_t)policy_victim(p, res, K);
                } else {
                    uint64_t best = 0;
                    for (size_t j = 0; j < K; j++) {
                        uint64_t score;
                        if (rule == BY_LRU) {
                            score = i - last[res[j]]; /* the oldest use */
                        } else {
                            score = POLICY_NEVER;
                            for (size_t d = 0; d < 2 * n; d++)
                                if (seq[(i + d) % n] == res[j]) {
                                    score = d;
                                    break;
                                }
                        }
                        if (j == 0 || score > best)
                            v = j, best = score;
                    }
                }
                res[v] = c;
            }
        }
        last[c] = i;
        if (rule == BY_POLICY)
            TEST_OK(policy_access(p, c, 1));
    }
    return missed;
}

Test(policy, evicting_by_the_schedule_misses_as_little_as_belady)
{
    uint32_t *seq = calloc(LEN, sizeof *seq);
    size_t all_min = 0, all_lru = 0;
    for (unsigned seed = 1; seed <= 20; seed++) {
        srand(seed);
        for (size_t i = 0; i < LEN; i++) /* a skewed mix, so that choices matter */
            seq[i] = (uint32_t)(rand() % 3 ? rand() % 5 : rand() % SPAN);
        policy_destroy(p);
        make();
        record(seq, LEN);
        TEST_OK(policy_mark_iteration(p));
        size_t min = misses(seq, LEN, BY_MIN), lru = misses(seq, LEN, BY_LRU);
        size_t by_policy = misses(seq, LEN, BY_POLICY);
        cr_assert_eq(by_policy, min, "seed %u: the schedule's choices missed %zu, MIN %zu", seed,
                     by_policy, min);
        cr_assert_leq(min, lru);
        all_min += min;
        all_lru += lru;
    }
    cr_assert_lt(all_min, all_lru, "the traces leave room to choose badly (LRU: %zu, MIN: %zu)",
                 all_lru, all_min);
    free(seq);
}
