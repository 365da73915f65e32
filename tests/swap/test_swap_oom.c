/*
 * tests/swap/test_swap_oom.c — suite swap of the program test_swap (issue 4;
 * the fixture is swap_fixture.h): out of memory, on the device and the host.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "swap_fixture.h"

/* ---- out of memory ---------------------------------------------------------- */

Test(swap, malloc_beyond_the_device_and_host_limits_fails_with_a_message_and_loses_nothing)
{
    restart(LIMIT_CHUNKS, false); /* room for 2 x LIMIT_CHUNKS - HIGH_CHUNKS chunks */
    cr_assert_eq(room_chunks(), 14);
    size_t free_b, total;
    TEST_OK(lms_memory_info(&free_b, &total));
    cr_assert_eq(total, LIMIT_CHUNKS * chunk);
    cr_assert_eq(free_b, total, "free is at most total");
    enum { N = 8 };
    size_t sizes[N] = {3 * chunk, chunk, 3 * chunk - 1, chunk, 2 * chunk, chunk / 2 + 1, chunk,
                       2 * chunk};
    void *p[N];
    for (int i = 0; i < N; i++) { /* 14 chunks */
        p[i] = must_malloc(sizes[i]);
        fill(p[i], sizes[i], 60 + (uint64_t)i);
    }
    TEST_OK(lms_memory_info(&free_b, &total));
    cr_assert_eq(free_b, 0);
    lms_stats_t s0 = test_stats();
    cr_assert_eq(s0.allocated_bytes, room_chunks() * chunk);
    void *q = (void *)1;
    TEST_FAILS(LMS_ERR_OUT_OF_MEMORY, lms_malloc(&q, 1, NULL));
    cr_assert_null(q);
    const char *msg = lms_last_error();
    cr_assert(strstr(msg, "LMS_DEVICE_LIMIT") != NULL && strstr(msg, "LMS_HOST_LIMIT") != NULL,
              "the message names both settings to raise: %s", msg);
    TEST_FAILS(LMS_ERR_OUT_OF_MEMORY, lms_malloc(&q, 5 * chunk, NULL));
    cr_assert_eq(test_stats().ooms - s0.ooms, 2);
    /* everything allocated has somewhere to be, and is intact */
    for (int i = N - 1; i >= 0; i--)
        EXPECT_FILLED(p[i], sizes[i], 60 + (uint64_t)i);
    /* a free makes room again */
    TEST_OK(lms_free(p[1], NULL));
    TEST_OK(lms_stream_synchronize(NULL));
    p[1] = must_malloc(chunk);
    fill(p[1], chunk, 99);
    for (int i = 0; i < N; i++)
        EXPECT_FILLED(p[i], sizes[i], i == 1 ? 99 : 60 + (uint64_t)i);
    lms_stats_t st = test_stats();
    check_invariants(&st);
}

/* Issue 24: the host pool registers pinned memory in pieces of 256 MiB; with
 * a host limit that is not a multiple of one (300 MiB here; the default,
 * half the NUMA node, is almost never one), it stopped at the last whole
 * piece, and an access to memory lms_malloc had admitted failed with "no
 * pinned host memory left". Every chunk of the room is written and read back. */
Test(swap, the_whole_host_limit_holds_data_when_it_is_not_a_multiple_of_the_pool_piece)
{
    size_t host = 300 * BASE_MiB / chunk;
    restart(host, false);
    size_t n = room_chunks();
    cr_assert_eq(n, LIMIT_CHUNKS + host - HIGH_CHUNKS);
    void **p = chunks_filled(n, 500);
    void *q = (void *)1;
    TEST_FAILS(LMS_ERR_OUT_OF_MEMORY, lms_malloc(&q, 1, NULL)); /* admission is exact */
    for (size_t i = 0; i < n; i++)
        EXPECT_FILLED(p[i], chunk, 500 + i);
    lms_stats_t st = test_settled_stats();
    cr_assert_eq(st.ooms, 1, "only the malloc beyond the room failed");
    check_invariants(&st);
    free_all(p, n);
}

/* Chunks lms_malloc gives before out of memory (all freed again); the
 * failure's message in oom_message. */
static char oom_message[1024];

static size_t chunks_that_fit(void)
{
    size_t n = 0, cap = 1024;
    void **p = scratch(cap * sizeof *p);
    while (n < cap && lms_malloc(&p[n], chunk, NULL) == LMS_OK)
        n++;
    snprintf(oom_message, sizeof oom_message, "%s", lms_last_error());
    for (size_t i = 0; i < n; i++)
        TEST_OK(lms_free(p[i], NULL));
    unscratch(p);
    return n;
}

/* Issue 24: reclaim watermarks past the device limit (or low above high)
 * were taken as they were, and the high one, kept free on the device, left
 * room for almost nothing; an LMS_VA_RESERVE below the room is said at start
 * and its out of memory names it, not LMS_HOST_LIMIT. */
Test(swap, bad_watermarks_are_replaced_by_the_defaults_and_a_small_va_reserve_is_named)
{
    TEST_OK(lms_shutdown());
    swap_config_t cfg = config(HOST_CHUNKS, false);
    const size_t wrong[][2] = {{2 * LIMIT_CHUNKS, 3 * LIMIT_CHUNKS},
                               {1, LIMIT_CHUNKS},
                               {4, 3}};
    for (size_t i = 0; i < sizeof wrong / sizeof *wrong; i++) {
        cfg.reclaim_low = wrong[i][0] * chunk;
        cfg.reclaim_high = wrong[i][1] * chunk;
        TEST_OK(swap_init(&cfg));
        /* the defaults on 8 chunks: low 1, high 2 */
        cr_assert_eq(chunks_that_fit(), LIMIT_CHUNKS + HOST_CHUNKS - 2,
                     "low %zu, high %zu chunks", wrong[i][0], wrong[i][1]);
        TEST_OK(lms_shutdown());
    }
    cfg = config(HOST_CHUNKS, false);
    cfg.va_reserve = 2 * chunk; /* raised to the device limit, 8 chunks */
    TEST_OK(swap_init(&cfg));
    cr_assert_eq(chunks_that_fit(), LIMIT_CHUNKS);
    cr_assert(strstr(oom_message, "Raise LMS_VA_RESERVE") != NULL &&
              strstr(oom_message, "LMS_HOST_LIMIT") == NULL, "%s", oom_message);
}

/* The reason an out of memory gives is this call's: a request larger than
 * the reserved range said "LMS_VA_RESERVE", and a later one that met the
 * limits repeated that advice (the message left from before). */
Test(swap, an_out_of_memory_names_its_own_reason)
{
    restart(LIMIT_CHUNKS, false);
    void *q = NULL;
    TEST_FAILS(LMS_ERR_OUT_OF_MEMORY, lms_malloc(&q, 1000 * chunk, NULL));
    cr_assert(strstr(lms_last_error(), "LMS_VA_RESERVE") != NULL, "%s", lms_last_error());
    size_t n = chunks_that_fit();
    cr_assert_eq(n, room_chunks());
    cr_assert(strstr(oom_message, "Raise LMS_HOST_LIMIT or LMS_DEVICE_LIMIT") != NULL &&
              strstr(oom_message, "LMS_VA_RESERVE") == NULL, "%s", oom_message);
}

/* Room full (device and host pool): a 4-chunk allocation on the host, all
 * else dirty. Free blocks plus free host slots are always 2 then (with H
 * chunks on the host: H - 6 blocks and 8 - H slots), so the access must
 * fetch part of it before its host copies can take the evictions of the
 * rest (Note [Swap exchange]). */
static void access_with_the_host_pool_full(lms_access_mode_t mode)
{
    restart(LIMIT_CHUNKS, false);
    size_t big = 4 * chunk, n = room_chunks() - 4;
    void *b = must_malloc(big);
    fill(b, big, 70);
    void **p = chunks_filled(n, 71); /* pushes b out, and fills the host pool */
    lms_stats_t s0 = test_settled_stats();
    cr_assert_eq(s0.resident_bytes + s0.host_bytes, s0.device_limit + s0.host_limit - 2 * chunk,
                 "2 chunks free between the device and the host pool");
    cr_assert_eq(s0.clean_drops, 0);
    if (mode == LMS_READ) {
        EXPECT_FILLED(b, big, 70);
    } else {
        fill_on(b, big, 90, mode, NULL);
        EXPECT_FILLED(b, big, 90);
    }
    for (size_t i = n; i-- > 0;)
        EXPECT_FILLED(p[i], chunk, 71 + i);
    EXPECT_FILLED(b, big, mode == LMS_READ ? 70 : 90);
    lms_stats_t st = test_settled_stats();
    cr_assert_eq(st.ooms, 0);
    check_invariants(&st);
    free_all(p, n);
    TEST_OK(lms_free(b, NULL));
}

Test(swap, a_read_larger_than_the_free_blocks_succeeds_with_the_host_pool_full)
{
    access_with_the_host_pool_full(LMS_READ);
}

Test(swap, an_overwrite_larger_than_the_free_blocks_succeeds_with_the_host_pool_full)
{
    access_with_the_host_pool_full(LMS_OVERWRITE);
}

/* Evictions slowed down (10 ms a chunk out on sim), so that an access's
 * early steps (Note [Pipelined swaps]) run while they are in flight. */
static void restart_slow_d2h(void)
{
    swap_config_t cfg = config(HOST_CHUNKS, false);
    cfg.device.sim_d2h_gbps = 0.2;
    TEST_OK(lms_shutdown());
    TEST_OK(swap_init(&cfg));
}

Test(swap, a_failed_access_leaves_what_its_early_steps_mapped_evictable)
{
    restart_slow_d2h();
    size_t na = LIMIT_CHUNKS * chunk, nx = (LIMIT_CHUNKS + 1) * chunk;
    void *a = must_malloc(na), *x = must_malloc(nx); /* x: more than the device */
    fill(a, na, 70);
    TEST_OK(lms_stream_synchronize(NULL));
    TEST_FAILS(LMS_ERR_OUT_OF_MEMORY, lms_access(x, nx, LMS_OVERWRITE, NULL));
    test_settled_stats();
    /* a fits the device, nothing is pinned, x is not in use: it reads back */
    EXPECT_FILLED(a, na, 70);
}

/* Two threads, each accessing 7 of the 8 chunks of a device full of other
 * data: each fits alone, and neither may keep blocks the other waits for. */
typedef struct early_job {
    pthread_barrier_t *start;
    void *p;
    uint64_t seed;
    lms_status_t st;
    char msg[256];
} early_job_t;

static void *early_job(void *arg)
{
    early_job_t *j = arg;
    dev_device_t *dev = swap_device();
    dev_stream_t *ds = swap_stream(NULL);
    pthread_barrier_wait(j->start);
    if ((j->st = lms_access(j->p, 7 * chunk, LMS_OVERWRITE, NULL)) == LMS_OK)
        j->st = dev_fill(dev, ds, addr(j->p), 7 * chunk, j->seed);
    else
        snprintf(j->msg, sizeof j->msg, "%s", lms_last_error());
    (void)lms_stream_synchronize(NULL); /* closes its window */
    return NULL;
}

Test(swap, two_accesses_that_each_fit_both_succeed_while_evictions_are_in_flight)
{
    restart_slow_d2h();
    size_t na = LIMIT_CHUNKS * chunk;
    void *a = must_malloc(na);
    fill(a, na, 70);
    TEST_OK(lms_stream_synchronize(NULL));
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, 2);
    early_job_t j[2];
    pthread_t t[2];
    for (int i = 0; i < 2; i++) {
        j[i] = (early_job_t){.start = &start, .p = must_malloc(7 * chunk), .seed = 90 + (uint64_t)i};
        pthread_create(&t[i], NULL, early_job, &j[i]);
    }
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&start);
    for (int i = 0; i < 2; i++)
        cr_assert_eq(j[i].st, LMS_OK, "thread %d: %s", i, j[i].msg);
    for (int i = 0; i < 2; i++)
        EXPECT_FILLED(j[i].p, 7 * chunk, 90 + (uint64_t)i);
    EXPECT_FILLED(a, na, 70);
}

