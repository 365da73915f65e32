/*
 * tests/policy/test_policy.c — the schedule, its next-use oracle, following
 * and finding it, and prefetch (policy/ is pure C: tested directly, no
 * device).
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
        TEST_OK(policy_access(p, chunks[i], 1, POLICY_USE, 0));
}

enum { A = 1, B = 2, C = 3, D = 4, E = 5 };

Test(policy, without_a_schedule_nothing_is_known)
{
    cr_assert_not(policy_has_schedule(p));
    TEST_OK(policy_access(p, A, 1, POLICY_USE, 0));
    cr_assert_eq(policy_next_use(p, A, NULL), POLICY_NEVER);
    TEST_OK(policy_mark_iteration(p)); /* now there is one */
    cr_assert(policy_has_schedule(p));
    cr_assert_eq(policy_next_use(p, A, NULL), 0);
}

Test(policy, the_next_use_is_counted_in_events_from_the_position)
{
    const uint32_t it[] = {A, B, C, A, D, B}; /* positions 0..5 */
    record(it, 6);
    TEST_OK(policy_mark_iteration(p));
    cr_assert_eq(policy_next_use(p, A, NULL), 0);
    cr_assert_eq(policy_next_use(p, B, NULL), 1);
    cr_assert_eq(policy_next_use(p, C, NULL), 2);
    cr_assert_eq(policy_next_use(p, D, NULL), 4);
    cr_assert_eq(policy_next_use(p, E, NULL), POLICY_NEVER, "not in the schedule");
    TEST_OK(policy_access(p, A, 1, POLICY_USE, 0)); /* position 1 */
    cr_assert_eq(policy_next_use(p, A, NULL), 2, "its next use is event 3");
    cr_assert_eq(policy_next_use(p, B, NULL), 0);
    const uint32_t cands[] = {A, B, C, D};
    cr_assert_eq(policy_victim(p, cands, 4), 3, "D is used last");
    const uint32_t with_e[] = {A, E, D};
    cr_assert_eq(policy_victim(p, with_e, 3), 1, "a chunk the schedule never names goes first");
    record((const uint32_t[]){B, C, A, D}, 4); /* position 5 */
    cr_assert_eq(policy_next_use(p, B, NULL), 0);
    cr_assert_eq(policy_next_use(p, A, NULL), 1, "next iteration: 6 - 5 + 0");
    cr_assert_eq(policy_next_use(p, C, NULL), 3, "6 - 5 + 2");
    /* an iteration longer than the schedule goes on matching it from its
     * start: B ends it, A is its first event again, and the second A is
     * the schedule's next A, two events on (B and C missing) */
    record((const uint32_t[]){B, A, A}, 3);
    cr_assert_eq(policy_next_use(p, D, NULL), 0);
    policy_usage_t u;
    policy_usage(p, &u);
    cr_assert(u.schedule_events == 6 && u.position == 4 && u.recorded == 8 && u.iterations == 1);
    cr_assert(u.hits == 7 && u.misses == 1);
}

Test(policy, a_run_names_every_chunk_in_it)
{
    TEST_OK(policy_access(p, 10, 4, POLICY_USE, 0)); /* 10..13 */
    TEST_OK(policy_access(p, 12, 1, POLICY_USE, 0));
    TEST_OK(policy_mark_iteration(p));
    TEST_OK(policy_access(p, 10, 4, POLICY_USE, 0)); /* position 1 */
    cr_assert_eq(policy_next_use(p, 12, NULL), 0);
    cr_assert_eq(policy_next_use(p, 13, NULL), 1, "its next use is next iteration's first event");
    cr_assert_eq(policy_next_use(p, 14, NULL), POLICY_NEVER);
}

Test(policy, bad_input_is_refused_and_changes_nothing)
{
    record((const uint32_t[]){A, B}, 2);
    TEST_FAILS(LMS_ERR_INVALID, policy_access(p, NCHUNKS, 1, POLICY_USE, 0));
    TEST_FAILS(LMS_ERR_INVALID, policy_access(p, 5, 0, POLICY_USE, 0));
    TEST_FAILS(LMS_ERR_INVALID, policy_access(p, NCHUNKS - 2, 3, POLICY_USE, 0));
    TEST_FAILS(LMS_ERR_INVALID, policy_access(p, 1, SIZE_MAX, POLICY_USE, 0));
    TEST_FAILS(LMS_ERR_INVALID, policy_access(p, 1, 1, (policy_kind_t)7, 0));
    policy_usage_t u;
    policy_usage(p, &u);
    cr_assert_eq(u.recorded, 2);
    TEST_OK(policy_mark_iteration(p));
    cr_assert_eq(policy_next_use(p, NCHUNKS, NULL), POLICY_NEVER);
    cr_assert_eq(policy_next_use(p, SIZE_MAX, NULL), POLICY_NEVER);
    cr_assert_eq(policy_victim(p, NULL, 0), -1);
    policy_t *q;
    policy_config_t bad = {.nchunks = 0};
    TEST_FAILS(LMS_ERR_INVALID, policy_create(&bad, &q));
    TEST_FAILS(LMS_ERR_INVALID, policy_create(NULL, &q));
    policy_config_t bad_threshold = {.nchunks = 4, .miss_threshold = 1.5};
    TEST_FAILS(LMS_ERR_INVALID, policy_create(&bad_threshold, &q));
    bad_threshold.miss_threshold = -0.1;
    TEST_FAILS(LMS_ERR_INVALID, policy_create(&bad_threshold, &q));
}

Test(policy, an_empty_iteration_keeps_the_schedule)
{
    record((const uint32_t[]){A, B, C}, 3);
    TEST_OK(policy_mark_iteration(p));
    TEST_OK(policy_mark_iteration(p));
    policy_usage_t u;
    policy_usage(p, &u);
    cr_assert(u.schedule_events == 3 && u.iterations == 1);
    cr_assert_eq(policy_next_use(p, C, NULL), 2);
    /* a new iteration replaces it */
    record((const uint32_t[]){C, A}, 2);
    TEST_OK(policy_mark_iteration(p));
    cr_assert_eq(policy_next_use(p, C, NULL), 0);
    cr_assert_eq(policy_next_use(p, B, NULL), POLICY_NEVER, "gone from the new schedule");
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
            TEST_OK(policy_access(p, c, 1, POLICY_USE, 0));
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

/* ---- dead data, LRU ---- */

Test(policy, data_freed_before_its_next_use_goes_first_and_an_overwrite_counts_as_a_use)
{
    TEST_OK(policy_access(p, A, 1, POLICY_USE, 0));
    TEST_OK(policy_access(p, B, 1, POLICY_OVERWRITE, 0));
    TEST_OK(policy_access(p, C, 1, POLICY_USE, 0));
    TEST_OK(policy_access(p, A, 1, POLICY_FREE, 0));
    TEST_OK(policy_access(p, B, 1, POLICY_USE, 0));
    TEST_OK(policy_mark_iteration(p));
    bool dead = true;
    cr_assert_eq(policy_next_use(p, A, &dead), 0);
    cr_assert_not(dead);
    cr_assert_eq(policy_next_use(p, B, &dead), 1);
    cr_assert(dead, "its next event overwrites it");
    cr_assert_eq(policy_victim(p, (const uint32_t[]){B, C}, 2), 1,
                 "C, used after B is overwritten, goes: the overwrite needs B's block");
    TEST_OK(policy_access(p, A, 1, POLICY_USE, 0));
    cr_assert_eq(policy_next_use(p, A, &dead), 2);
    cr_assert(dead, "it is freed next");
    cr_assert_eq(policy_victim(p, (const uint32_t[]){B, C, A}, 3), 2,
                 "A, freed before any use, goes first");
    cr_assert_eq(policy_evict_key(p, A), UINT64_MAX);
    cr_assert_eq(policy_next_use(p, E, &dead), POLICY_NEVER);
    cr_assert_not(dead);
}

Test(policy, without_a_schedule_the_least_recently_accessed_goes_first)
{
    record((const uint32_t[]){A, B, C, A}, 4);
    cr_assert_not(policy_following(p));
    cr_assert_eq(policy_victim(p, (const uint32_t[]){A, B, C}, 3), 1);
    cr_assert_eq(policy_victim(p, (const uint32_t[]){A, C, D}, 3), 2, "D was never accessed");
}

Test(policy, lms_policy_lru_never_follows)
{
    policy_t *q;
    policy_config_t cfg = {.nchunks = NCHUNKS, .lru = true};
    TEST_OK(policy_create(&cfg, &q));
    for (int it = 0; it < 3; it++) {
        for (uint32_t c = 0; c < 8; c++)
            TEST_OK(policy_access(q, c, 1, POLICY_USE, 0));
        TEST_OK(policy_mark_iteration(q));
    }
    cr_assert_not(policy_has_schedule(q));
    cr_assert_not(policy_following(q));
    cr_assert_eq(policy_victim(q, (const uint32_t[]){7, 3, 5}, 3), 1, "3 is the least recent");
    policy_fetch_t f[4];
    cr_assert_eq(policy_prefetch(q, NULL, NULL, NULL, f, 4, NULL), 0);
    policy_destroy(q);
}

/* ---- following the schedule ---- */

#define LONG 120 /* events of an iteration in the tests below */

/* A repeating iteration of LONG events over chunks 0..47: runs of 1 to 3,
 * some overwrites. Chunks 48..59 are left for noise, 60..63 for probes. */
static void iteration_of(unsigned seed, uint32_t (*ev)[3], size_t n)
{
    srand(seed);
    for (size_t i = 0; i < n; i++) {
        ev[i][1] = 1 + (uint32_t)(rand() % 3);
        ev[i][0] = (uint32_t)(rand() % (48 - 2));
        ev[i][2] = rand() % 5 == 0 ? POLICY_OVERWRITE : POLICY_USE;
    }
}

static void play(policy_t *q, uint32_t (*ev)[3], size_t from, size_t to)
{
    for (size_t i = from; i < to; i++)
        TEST_OK(policy_access(q, ev[i][0], ev[i][1], (policy_kind_t)ev[i][2], 0));
}

static void noise(policy_t *q, size_t n)
{
    for (size_t i = 0; i < n; i++)
        TEST_OK(policy_access(q, 48 + (size_t)rand() % 12, 1, POLICY_USE, 0));
}

Test(policy, a_few_changed_missing_or_extra_events_keep_it_following)
{
    uint32_t ev[LONG][3];
    iteration_of(7, ev, LONG);
    play(p, ev, 0, LONG);
    TEST_OK(policy_mark_iteration(p));
    cr_assert(policy_following(p));
    play(p, ev, 0, 30);
    noise(p, 1);          /* an extra event */
    play(p, ev, 31, 60);  /* a changed one: 30 is replaced by the noise */
    play(p, ev, 61, 90);  /* a missing one: 60 */
    noise(p, 2);          /* two extra */
    play(p, ev, 90, 110);
    cr_assert(policy_following(p));
    policy_usage_t u;
    policy_usage(p, &u);
    cr_assert_eq(u.position, 110, "back in step with the schedule");
    cr_assert_leq(u.misses, 6);
    bool dead;
    for (size_t i = 110; i < LONG; i++) /* the oracle names what comes next */
        for (uint32_t c = ev[i][0]; c < ev[i][0] + ev[i][1]; c++)
            cr_assert_leq(policy_next_use(p, c, &dead), i - 110);
}

Test(policy, the_basis_changes_with_the_schedule_and_with_following_not_with_each_event)
{
    uint32_t ev[LONG][3];
    iteration_of(13, ev, LONG);
    play(p, ev, 0, LONG);
    uint64_t b = policy_basis(p);
    TEST_OK(policy_mark_iteration(p));
    cr_assert_neq(policy_basis(p), b, "a schedule taken");
    b = policy_basis(p);
    uint64_t v = policy_version(p);
    play(p, ev, 0, 40);
    cr_assert(policy_following(p));
    cr_assert_eq(policy_basis(p), b, "events followed move the position, not the basis");
    cr_assert_neq(policy_version(p), v, "...while every event changes the version");
    /* between events, the keys of chunks no event named keep their order */
    bool named[48] = {false};
    for (size_t i = 40; i < 50; i++)
        for (uint32_t k = ev[i][0]; k < ev[i][0] + ev[i][1]; k++)
            named[k] = true;
    uint64_t key[48];
    for (uint32_t k = 0; k < 48; k++)
        key[k] = policy_evict_key(p, k);
    play(p, ev, 40, 50);
    int pairs = 0;
    for (uint32_t x = 0; x < 48; x++)
        for (uint32_t y = 0; y < 48; y++)
            if (!named[x] && !named[y] && key[x] > key[y]) {
                cr_assert_gt(policy_evict_key(p, x), policy_evict_key(p, y),
                             "chunks %u and %u changed order", x, y);
                pairs++;
            }
    cr_assert_gt(pairs, 100, "%d pairs compared", pairs);
    srand(5);
    noise(p, 40); /* nothing the schedule knows: it stops following */
    cr_assert_not(policy_following(p));
    cr_assert_neq(policy_basis(p), b, "following stopped");
}

Test(policy, it_falls_back_to_lru_while_the_schedule_misses_and_returns_when_it_matches)
{
    uint32_t ev[LONG][3];
    iteration_of(11, ev, LONG);
    play(p, ev, 0, LONG);
    TEST_OK(policy_mark_iteration(p));
    srand(3);
    TEST_OK(policy_access(p, 60, 1, POLICY_USE, 0));
    noise(p, 40); /* nothing the schedule knows */
    TEST_OK(policy_access(p, 61, 1, POLICY_USE, 0));
    cr_assert_not(policy_following(p));
    policy_usage_t u;
    policy_usage(p, &u);
    cr_assert_eq(u.fallbacks, 1);
    /* LRU now: the least recently accessed chunk goes, not the one used furthest ahead */
    cr_assert_eq(policy_victim(p, (const uint32_t[]){61, 60}, 2), 1,
                 "LRU: 60, accessed before 61 (by the schedule, neither is ever used: a tie)");
    play(p, ev, 0, LONG); /* the schedule again, from where it stood */
    cr_assert(policy_following(p), "it matches again");
    policy_usage(p, &u);
    cr_assert_eq(u.fallbacks, 1);
}

/* ---- finding the iteration ---- */

/* Plays `times` iterations of ev, each with `changes` events replaced by
 * noise at random places. */
static void play_noisy(policy_t *q, uint32_t (*ev)[3], size_t n, int times, int changes)
{
    for (int it = 0; it < times; it++) {
        size_t at[8];
        for (int k = 0; k < changes; k++)
            at[k] = (size_t)rand() % n;
        for (size_t i = 0; i < n; i++) {
            bool changed = false;
            for (int k = 0; k < changes; k++)
                changed |= at[k] == i;
            if (changed)
                noise(q, 1);
            else
                play(q, ev, i, i + 1);
        }
    }
}

Test(policy, a_repeating_sequence_is_found_without_marks)
{
    uint32_t ev[LONG][3];
    iteration_of(5, ev, LONG);
    srand(99);
    play_noisy(p, ev, LONG, 2, 0);
    policy_usage_t u;
    policy_usage(p, &u);
    cr_assert(policy_has_schedule(p), "found after two iterations");
    cr_assert(policy_following(p));
    cr_assert_eq(u.schedule_events, LONG);
    cr_assert_eq(u.found, 1);
    play_noisy(p, ev, LONG, 3, 0);
    policy_usage(p, &u);
    /* each iteration after it ends by itself, at the next one's first event */
    cr_assert_eq(u.iterations, 3, "%llu", (unsigned long long)u.iterations);
    cr_assert_eq(u.misses, 0);
}

Test(policy, finding_it_survives_a_few_changed_events)
{
    uint32_t ev[LONG][3];
    iteration_of(6, ev, LONG);
    srand(1234);
    play_noisy(p, ev, LONG, 3, 3); /* 3 of 120 events differ in each iteration */
    cr_assert(policy_has_schedule(p));
    policy_usage_t before, u;
    policy_usage(p, &before);
    cr_assert_eq(before.schedule_events, LONG);
    play_noisy(p, ev, LONG, 4, 3);
    policy_usage(p, &u);
    cr_assert(policy_following(p));
    cr_assert_eq(u.fallbacks, 0);
    cr_assert_geq(u.iterations - before.iterations, 3, "boundaries still found: %llu",
                  (unsigned long long)(u.iterations - before.iterations));
    cr_assert_geq(u.hits - before.hits, (4 * LONG) * 9 / 10, "the schedule predicted %llu of %d",
                  (unsigned long long)(u.hits - before.hits), 4 * LONG);
}

Test(policy, a_sequence_that_changes_for_good_is_found_again)
{
    uint32_t one[LONG][3], two[LONG][3];
    iteration_of(8, one, LONG);
    iteration_of(9, two, 90);
    play_noisy(p, one, LONG, 3, 0);
    cr_assert(policy_following(p));
    play_noisy(p, two, 90, 8, 0); /* a new iteration of 90 events */
    policy_usage_t u;
    policy_usage(p, &u);
    cr_assert(policy_following(p));
    cr_assert_eq(u.schedule_events, 90, "%zu events, found %llu", u.schedule_events,
                 (unsigned long long)u.found);
    cr_assert_eq(u.found, 2);
    cr_assert_eq(u.fallbacks, 1);
}

Test(policy, a_preamble_that_never_comes_back_does_not_stop_the_search)
{
    uint32_t ev[LONG][3];
    iteration_of(12, ev, LONG);
    srand(5);
    noise(p, 300); /* set-up: nothing repeats */
    play_noisy(p, ev, LONG, 4, 0);
    cr_assert(policy_following(p));
    policy_usage_t u;
    policy_usage(p, &u);
    cr_assert_eq(u.schedule_events, LONG);
}

Test(policy, marks_turn_finding_off)
{
    uint32_t ev[LONG][3];
    iteration_of(10, ev, LONG);
    TEST_OK(policy_access(p, 60, 1, POLICY_USE, 0));
    TEST_OK(policy_mark_iteration(p));
    play_noisy(p, ev, LONG, 3, 0);
    policy_usage_t u;
    policy_usage(p, &u);
    cr_assert_eq(u.iterations, 1, "only the mark made a schedule");
    cr_assert_eq(u.found, 0);
    cr_assert_eq(u.recorded, 3 * LONG);
    TEST_OK(policy_mark_iteration(p));
    policy_usage(p, &u);
    cr_assert_eq(u.schedule_events, 3 * LONG);
}

/* ---- prefetch ---- */

static policy_need_t needs_all_but_c(void *arg, uint32_t chunk)
{
    (void)arg;
    return chunk != C ? POLICY_ON_HOST : POLICY_HAS;
}

Test(policy, prefetch_names_what_is_read_next_in_order_within_the_horizon)
{
    /* an event each 10 ns: A, B overwritten, B, C, A, D */
    const uint32_t seq[][2] = {{A, POLICY_USE},  {B, POLICY_OVERWRITE}, {B, POLICY_USE},
                               {C, POLICY_USE},  {A, POLICY_USE},       {D, POLICY_USE}};
    for (int i = 0; i < 6; i++)
        TEST_OK(policy_access(p, seq[i][0], 1, (policy_kind_t)seq[i][1], 10 * (uint64_t)i));
    policy_fetch_t f[8];
    cr_assert_eq(policy_prefetch(p, NULL, needs_all_but_c, NULL, f, 8, NULL), 0, "no schedule yet");
    TEST_OK(policy_mark_iteration(p));
    size_t n = policy_prefetch(p, NULL, needs_all_but_c, NULL, f, 8, NULL);
    /* B's old data is dead (overwritten first), C needs no fetch, A once */
    cr_assert_eq(n, 2);
    cr_assert(f[0].chunk == A && f[0].events == 0 && f[0].ns == 0);
    cr_assert(f[1].chunk == D && f[1].events == 5 && f[1].ns == 50);
    cr_assert_eq(f[0].blocks_before, 0);
    cr_assert_eq(f[1].blocks_before, 2, "A's fetch and B's overwrite take a block before D");
    cr_assert_eq(policy_prefetch(p, NULL, needs_all_but_c, NULL, f, 1, NULL), 1, "at most max");
    /* a slow link (1 byte/ns, 100-byte chunks) wants D early; a fast one not yet */
    policy_link_t slow = {.bytes_per_ns = 1, .chunk_bytes = 100};
    cr_assert_eq(policy_prefetch(p, &slow, needs_all_but_c, NULL, f, 8, NULL), 2);
    policy_link_t fast = {.bytes_per_ns = 100, .chunk_bytes = 100};
    cr_assert_eq(policy_prefetch(p, &fast, needs_all_but_c, NULL, f, 8, NULL), 1,
                 "D is 50 ns ahead, the horizon 2 x 2 ns + 2 x 10 ns");
    policy_link_t middling = {.bytes_per_ns = 10, .chunk_bytes = 100}; /* 2 x 20 + 20 ns */
    cr_assert_eq(policy_prefetch(p, &middling, needs_all_but_c, NULL, f, 8, NULL), 2);
    /* near the end, the next iteration's uses follow, timed round the end */
    for (int i = 0; i < 5; i++)
        TEST_OK(policy_access(p, seq[i][0], 1, (policy_kind_t)seq[i][1], 60 + 10 * (uint64_t)i));
    n = policy_prefetch(p, NULL, needs_all_but_c, NULL, f, 8, NULL);
    cr_assert_eq(n, 2);
    cr_assert(f[0].chunk == D && f[0].events == 0 && f[0].ns == 0);
    cr_assert(f[1].chunk == A && f[1].events == 1 && f[1].ns == 10);
}

Test(policy, prefetch_takes_a_place_only_where_belady_would_evict)
{
    record((const uint32_t[]){A, B, C, D}, 4); /* a loop: each chunk's next use is 4 on */
    TEST_OK(policy_mark_iteration(p));
    TEST_OK(policy_access(p, A, 1, POLICY_USE, 0)); /* position 1: A was just used */
    policy_fetch_t f[4];
    cr_assert_eq(policy_prefetch(p, NULL, needs_all_but_c, NULL, f, 4, NULL), 3);
    /* B, next: only in place of a chunk used 3 on or later, as A, just used
     * (MIN's own choice: a tie with the latest next use is one) */
    cr_assert(f[0].chunk == B && f[0].events == 0 && f[0].evict_after == 2);
    cr_assert(f[1].chunk == D && f[1].events == 2 && f[1].evict_after == 4,
              "by D's use, B and C were used too, and are next used 4 and 5 on");
    cr_assert(f[2].chunk == A && f[2].events == 3 && f[2].evict_after == 5);
    cr_assert_eq(policy_evict_key(p, D), 2);
    cr_assert_leq(policy_evict_key(p, D), f[0].evict_after, "D may not make room for B");
    cr_assert_gt(policy_evict_key(p, A), f[0].evict_after, "A may");
}

static policy_need_t e_on_host_rest_resident(void *arg, uint32_t chunk)
{
    (void)arg;
    return chunk == E ? POLICY_ON_HOST : chunk == D ? POLICY_NO_DATA : POLICY_HAS;
}

Test(policy, blocks_before_counts_what_the_events_before_take_and_their_frees_give_back)
{
    /* D (no data yet) is overwritten, A and B freed, then E read */
    TEST_OK(policy_access(p, D, 1, POLICY_OVERWRITE, 0));
    TEST_OK(policy_access(p, A, 1, POLICY_FREE, 0));
    TEST_OK(policy_access(p, B, 1, POLICY_FREE, 0));
    TEST_OK(policy_access(p, E, 1, POLICY_USE, 0));
    TEST_OK(policy_mark_iteration(p));
    policy_fetch_t f[2];
    int64_t ahead = -1;
    cr_assert_eq(policy_prefetch(p, NULL, e_on_host_rest_resident, NULL, f, 2, &ahead), 1);
    cr_assert_eq(ahead, 1, "the most new data needs at once: D's block (E's fetch not counted)");
    cr_assert_eq(f[0].chunk, E);
    cr_assert_eq(f[0].blocks_before, 1, "D's block is needed before the frees: the peak counts");
}

static policy_need_t a_claimed_rest_on_host(void *arg, uint32_t chunk)
{
    (void)arg;
    return chunk == A ? POLICY_CLAIMED : POLICY_ON_HOST;
}

/* A chunk being evicted, or one an access under way is bringing in, is not
 * a prefetch's to fetch; but its use needs a block, and free blocks go to
 * it before later fetches (a prefetch that took them would take the blocks
 * the access waits for). */
Test(policy, a_claimed_chunk_is_not_fetched_but_takes_a_block_first)
{
    record((const uint32_t[]){A, B, C}, 3);
    TEST_OK(policy_mark_iteration(p));
    policy_fetch_t f[4];
    int64_t ahead = -1;
    cr_assert_eq(policy_prefetch(p, NULL, a_claimed_rest_on_host, NULL, f, 4, &ahead), 2);
    cr_assert(f[0].chunk == B && f[1].chunk == C, "A is not fetched");
    cr_assert_eq(f[0].blocks_before, 1, "A's block comes first");
    cr_assert_eq(f[1].blocks_before, 2);
    cr_assert_eq(ahead, 1, "A needs a block as new data does");
}

static policy_need_t bc_resident_d_new_rest_on_host(void *arg, uint32_t chunk)
{
    (void)arg;
    return chunk == B || chunk == C ? POLICY_HAS : chunk == D ? POLICY_NO_DATA : POLICY_ON_HOST;
}

Test(policy, past_the_horizon_it_fetches_into_free_blocks_while_the_link_would_idle)
{
    /* an event each 10 ns: A read, D (new) written, B and C freed, E and F read */
    enum { F = 6 };
    const uint32_t seq[][2] = {{A, POLICY_USE},  {D, POLICY_OVERWRITE}, {B, POLICY_FREE},
                               {C, POLICY_FREE}, {E, POLICY_USE},       {F, POLICY_USE}};
    for (int i = 0; i < 6; i++)
        TEST_OK(policy_access(p, seq[i][0], 1, (policy_kind_t)seq[i][1], 10 * (uint64_t)i));
    TEST_OK(policy_mark_iteration(p));
    /* 1 ns a chunk: the horizon is 2 x 2 ns + 2 x 10 ns, past D and B */
    policy_link_t link = {.bytes_per_ns = 100, .chunk_bytes = 100};
    policy_fetch_t f[8];
    int64_t ahead = -1;
    cr_assert_eq(policy_prefetch(p, &link, bc_resident_d_new_rest_on_host, NULL, f, 8, &ahead), 1,
                 "no free blocks given: just in time only");
    cr_assert(f[0].chunk == A && f[0].evict_after != UINT64_MAX);
    link.free_blocks = 8;
    cr_assert_eq(policy_prefetch(p, &link, bc_resident_d_new_rest_on_host, NULL, f, 8, &ahead), 3);
    cr_assert(f[1].chunk == E && f[2].chunk == F);
    cr_assert(f[1].evict_after == UINT64_MAX && f[2].evict_after == UINT64_MAX,
              "past the horizon: into free blocks only");
    cr_assert_eq(f[1].blocks_before, 2, "A's fetch and D's new data");
    cr_assert_eq(f[2].blocks_before, 3,
                 "E's block too: taken now, it is held before the frees give theirs back");
    cr_assert_eq(ahead, 1, "what new data needs within the horizon only: D");
    link.free_blocks = 4; /* A, D and E take 3: one stays free */
    cr_assert_eq(policy_prefetch(p, &link, bc_resident_d_new_rest_on_host, NULL, f, 8, &ahead), 2);
    cr_assert_eq(f[1].chunk, E);
    link.free_blocks = 8;
    link.queued_bytes = 2000; /* 20 ns of copies queued, and A's: more than two events' time */
    cr_assert_eq(policy_prefetch(p, &link, bc_resident_d_new_rest_on_host, NULL, f, 8, &ahead), 1,
                 "a busy link gets nothing past the horizon");
    link.queued_bytes = 1900; /* with A's, 20 ns: room for E, not F */
    cr_assert_eq(policy_prefetch(p, &link, bc_resident_d_new_rest_on_host, NULL, f, 8, &ahead), 2);
}
