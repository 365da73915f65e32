/*
 * tests/swap/test_swap_prefetch.c — suite swap of the program test_swap
 * (the fixture is swap_fixture.h): the schedule, eviction by next use and
 * prefetch (issue 5).
 */
#include <string.h>

#include "swap_fixture.h"

/* ---- the schedule: eviction by next use, and prefetch (issue 5) ---------- */

#define LOOP 12 /* one-chunk allocations read in turn: 1.5 x the device limit */

static void restart_policy(bool lru)
{
    swap_config_t cfg = config(HOST_CHUNKS, false);
    cfg.policy_lru = lru;
    TEST_OK(lms_shutdown());
    TEST_OK(swap_init(&cfg));
}

/* Reads LOOP chunks in turn, `iterations` times (marking each end when
 * `marks`), and checks every read. Returns the fetches of the iterations
 * after the third, when a schedule has been learnt (or not). */
static uint64_t loop_reads(void **a, int iterations, bool marks, lms_stats_t *end)
{
    lms_stats_t before = {0};
    for (int it = 0; it < iterations; it++) {
        if (it == 3)
            before = test_settled_stats();
        for (int i = 0; i < LOOP; i++)
            EXPECT_FILLED(a[i], chunk, 100 + (uint64_t)i);
        if (marks)
            TEST_OK(lms_mark_iteration());
    }
    *end = test_settled_stats();
    check_invariants(end);
    return end->fetches - before.fetches;
}

static void **loop_data(void)
{
    void **a = scratch(LOOP * sizeof *a);
    for (int i = 0; i < LOOP; i++) {
        a[i] = must_malloc(chunk);
        fill(a[i], chunk, 100 + (uint64_t)i);
    }
    return a;
}

Test(swap, a_learnt_schedule_fetches_less_than_lru_on_a_loop_larger_than_the_device)
{
    /* LRU evicts, on a loop over more than fits, exactly what comes next:
     * every read misses. The schedule keeps what is read soonest. */
    restart_policy(true);
    lms_stats_t lru_end, sched_end;
    uint64_t lru = loop_reads(loop_data(), 8, true, &lru_end);
    cr_assert_eq(lru_end.prefetch_hits, 0, "LMS_POLICY=lru fetches nothing ahead");
    restart_policy(false);
    uint64_t sched = loop_reads(loop_data(), 8, true, &sched_end);
    /* MIN fetches about 5 of the 12 each iteration here; before prefetch
     * stopped taking the block the reclaim thread keeps free, the two took
     * turns and the schedule fetched 41 to 60 in 5 iterations (LRU: 60) */
    cr_assert_leq(3 * sched, 2 * lru, "5 iterations: %llu fetches by the schedule, %llu by LRU",
                  (unsigned long long)sched, (unsigned long long)lru);
    /* how many of them were fetched ahead depends on when the reclaim thread
     * runs: what_is_read_next_is_fetched_ahead_into_free_blocks covers that */
    policy_usage_t u = test_policy_usage();
    cr_assert(u.following && u.schedule_events == LOOP,
              "the loop's schedule (%zu events) is followed", u.schedule_events);
}

/* Each iteration reads READS chunks in turn, then fills FILLERS new chunks,
 * reads them and frees them. The fillers are used again before the reads
 * are, so MIN evicts reads to make room for them, whenever the reclaim
 * thread runs, and the frees leave room to fetch them back ahead of their
 * reads. How many are fetched ahead still depends on timing: a freed block
 * may stay cached, and a prefetch that must first evict finishes at a later
 * call (Note [Prefetch] in prefetch.c). With a plain loop over more than fits
 * it was 0 to 11 in three iterations; here it is 10 to 24 in six, and in 60
 * runs under ASan, four at a time on two cores, one iteration of 360 had
 * none. A loop's fetch counts, which do not depend on timing, are checked
 * above. */
#define READS 4
#define FILLERS 6

Test(swap, what_is_read_next_is_fetched_ahead_into_free_blocks)
{
    restart_policy(false);
    void **a = scratch(READS * sizeof *a);
    for (int i = 0; i < READS; i++) {
        a[i] = must_malloc(chunk);
        fill(a[i], chunk, 300 + (uint64_t)i);
    }
    enum { ITERATIONS = 8, LEARNT = 2 };
    uint64_t ahead = 0;
    for (int it = 0; it < ITERATIONS; it++) {
        lms_stats_t s0 = test_settled_stats();
        for (int i = 0; i < READS; i++)
            EXPECT_FILLED(a[i], chunk, 300 + (uint64_t)i);
        lms_stats_t s1 = test_settled_stats();
        void *b[FILLERS];
        for (int i = 0; i < FILLERS; i++) {
            b[i] = must_malloc(chunk);
            fill(b[i], chunk, 400 + (uint64_t)i);
        }
        for (int i = 0; i < FILLERS; i++)
            EXPECT_FILLED(b[i], chunk, 400 + (uint64_t)i);
        for (int i = 0; i < FILLERS; i++)
            TEST_OK(lms_free(b[i], NULL));
        TEST_OK(lms_mark_iteration());
        uint64_t hits = s1.prefetch_hits - s0.prefetch_hits;
        cr_log_info("iteration %d: %llu reads found their chunk fetched ahead, %llu fetched", it,
                    (unsigned long long)hits, (unsigned long long)(s1.fetches - s0.fetches));
        if (it >= LEARNT)
            ahead += hits;
    }
    cr_assert_geq(ahead, ITERATIONS - LEARNT, "%llu reads in %d iterations found their chunk "
                  "fetched ahead", (unsigned long long)ahead, ITERATIONS - LEARNT);
    lms_stats_t end = test_settled_stats();
    check_invariants(&end);
}

/* A loop of WIDE_LOOP one-chunk allocations of 64 KiB over a device of
 * WIDE_LIMIT chunks: three times as many chunks as are named between two
 * full rankings (Note [Ranking between events] in swap/ranking.c). */
#define WIDE_LOOP 768
#define WIDE_LIMIT 512
#define WIDE_CHUNK (64 * BASE_KiB)

Test(swap, between_full_rankings_the_ranking_is_repaired_and_fetches_stay_near_min)
{
    swap_config_t cfg = config(HOST_CHUNKS, false);
    cfg.device.sim_granularity = WIDE_CHUNK;
    cfg.device_limit = WIDE_LIMIT * WIDE_CHUNK;
    cfg.host_limit = (WIDE_LOOP + 64) * WIDE_CHUNK;
    cfg.reclaim_low = WIDE_CHUNK;
    cfg.reclaim_high = 2 * WIDE_CHUNK;
    cfg.swap_piece = 2 * WIDE_CHUNK;
    TEST_OK(lms_shutdown());
    TEST_OK(swap_init(&cfg));
    /* A card's chunks are 2 MiB: its 64 KiB allocations would share slabs,
     * 16 chunks in all, and the loop would not be three rankings wide */
    if (strcmp(swap_device()->info.backend, "sim") != 0)
        cr_skip_test("needs the sim's 64 KiB chunks");
    void **a = scratch(WIDE_LOOP * sizeof *a);
    for (int i = 0; i < WIDE_LOOP; i++) {
        a[i] = must_malloc(WIDE_CHUNK);
        fill(a[i], WIDE_CHUNK, 100 + (uint64_t)i);
    }
    lms_stats_t before = {0}, end;
    uint64_t full = 0, head = 0;
    enum { ITERATIONS = 6, COUNTED = 3 };
    for (int it = 0; it < ITERATIONS; it++) {
        if (it == ITERATIONS - COUNTED) {
            before = test_settled_stats();
            swap_probe_t pr;
            TEST_OK(swap_probe(&pr));
            full = pr.rankings_full;
            head = pr.rankings_head;
        }
        for (int i = 0; i < WIDE_LOOP; i++)
            EXPECT_FILLED(a[i], WIDE_CHUNK, 100 + (uint64_t)i);
        TEST_OK(lms_mark_iteration());
    }
    end = test_settled_stats();
    swap_probe_t pr;
    TEST_OK(swap_probe(&pr));
    full = pr.rankings_full - full;
    head = pr.rankings_head - head;
    uint64_t fetches = end.fetches - before.fetches;
    /* MIN, with the one block the reclaim thread keeps free: about
     * WIDE_LOOP - WIDE_LIMIT + 1 fetches an iteration; LRU fetches all */
    uint64_t min = COUNTED * (WIDE_LOOP - WIDE_LIMIT + 1);
    cr_log_info("%d iterations: %llu fetches (MIN about %llu), rankings %llu full, %llu repaired",
                COUNTED, (unsigned long long)fetches, (unsigned long long)min,
                (unsigned long long)full, (unsigned long long)head);
    cr_assert_leq(fetches, min + min / 8, "%llu fetches, MIN about %llu",
                  (unsigned long long)fetches, (unsigned long long)min);
    cr_assert_gt(head, 0, "rankings between full ones were repaired");
    cr_assert_leq(8 * full, head, "%llu full rankings, %llu repaired",
                  (unsigned long long)full, (unsigned long long)head);
}

/* The program never marks. The first events it makes, the fills, never come
 * back, so the search anchors again at event 64 (Note [Finding the
 * iteration]) and the loop is found in the seventh iteration. Once it is
 * followed, a loop over more than fits fetches MIN's 5 chunks or so an
 * iteration where LRU fetches all 12. (This test asserted prefetch hits
 * before, which depend on when the reclaim thread runs and on times: 0 to
 * 11 in three iterations, and under ASan 0 in one run of six.) */
Test(swap, without_marks_the_loop_is_found_and_followed)
{
    restart_policy(false);
    void **a = loop_data();
    lms_stats_t end;
    (void)loop_reads(a, 8, false, &end);
    policy_usage_t u = test_policy_usage();
    cr_assert(u.found >= 1 && u.schedule_events == LOOP,
              "the loop was found: %llu found, a schedule of %zu events",
              (unsigned long long)u.found, u.schedule_events);
    cr_assert(u.following, "and is followed");
    enum { FOLLOWED = 4 };
    lms_stats_t before = test_settled_stats();
    for (int it = 0; it < FOLLOWED; it++)
        for (int i = 0; i < LOOP; i++)
            EXPECT_FILLED(a[i], chunk, 100 + (uint64_t)i);
    end = test_settled_stats();
    check_invariants(&end);
    uint64_t fetches = end.fetches - before.fetches;
    cr_assert_leq(3 * fetches, 2 * FOLLOWED * LOOP, "%d iterations: %llu fetches (LRU: %d)",
                  FOLLOWED, (unsigned long long)fetches, FOLLOWED * LOOP);
    u = test_policy_usage();
    cr_assert(u.following && u.misses == 0, "still followed, %llu misses",
              (unsigned long long)u.misses);
}

Test(swap, data_the_schedule_expects_to_be_overwritten_is_kept_when_it_is_read_instead)
{
    /* each iteration overwrites every chunk before reading it, so the
     * schedule takes their data for dead; then an iteration reads them
     * without writing: the last data must be there */
    restart_policy(false);
    void **a = scratch(LOOP * sizeof *a);
    for (int i = 0; i < LOOP; i++)
        a[i] = must_malloc(chunk);
    for (int it = 0; it < 5; it++) {
        for (int i = 0; i < LOOP; i++) {
            fill(a[i], chunk, 1000 * (uint64_t)it + (uint64_t)i);
            EXPECT_FILLED(a[i], chunk, 1000 * (uint64_t)it + (uint64_t)i);
        }
        TEST_OK(lms_mark_iteration());
    }
    for (int i = LOOP - 1; i >= 0; i--) /* another order, no writes */
        EXPECT_FILLED(a[i], chunk, 4000 + (uint64_t)i);
    lms_stats_t end = test_settled_stats();
    check_invariants(&end);
}

Test(swap, mark_iteration_needs_no_setup)
{
    TEST_OK(lms_shutdown());
    TEST_OK(lms_mark_iteration()); /* initializes lms, like every call */
    TEST_OK(lms_mark_iteration()); /* an empty iteration keeps what there is */
}

