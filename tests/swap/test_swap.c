/*
 * tests/swap/test_swap.c — swapping as a program sees it through lms.h:
 * allocations beyond the device limit, lms_access modes, clean drops, pins,
 * bad input, frees in every state, the stats, and the bugs of issue 25.
 * Issue 4. The other suites of the program test_swap, which share this
 * fixture (swap_fixture.h: the configuration every test starts with and how
 * data is checked), are in test_swap_oom.c (out of memory),
 * test_swap_evicted.c (queued work, where an evicted chunk's addresses point,
 * eviction fences), test_swap_faults.c (driver failures, the fault layer, on
 * every path that moves data) and test_swap_prefetch.c (the schedule).
 *
 * The random multi-threaded stress and its ThreadSanitizer run are in
 * tests/swap/stress.c (a plain program: Criterion cannot run under TSan).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "swap_fixture.h"

/* ---- more than the device holds ------------------------------------------ */

Test(swap, four_times_the_device_limit_is_written_then_read_back_correct)
{
    enum { LARGE = 10, SMALL = 300 };
    size_t large = 3 * chunk - 100, small = 7000;
    void *p[LARGE + SMALL];
    size_t n[LARGE + SMALL];
    for (int i = 0; i < LARGE + SMALL; i++) {
        n[i] = i < LARGE ? large : small;
        p[i] = must_malloc(n[i]);
        fill(p[i], n[i], 1000 + (uint64_t)i);
    }
    lms_stats_t st = test_stats();
    cr_assert_geq(st.allocated_bytes, 4 * st.device_limit, "allocated %llu bytes",
                  (unsigned long long)st.allocated_bytes);
    /* read back everything, in order, then in reverse order on another stream */
    lms_stream_t other;
    TEST_OK(lms_stream_create(&other));
    TEST_OK(lms_stream_synchronize(NULL));
    static uint64_t got[2][LARGE + SMALL];
    for (int i = 0; i < LARGE + SMALL; i++)
        checksum_on(p[i], n[i], NULL, &got[0][i]);
    TEST_OK(lms_stream_synchronize(NULL));
    for (int i = LARGE + SMALL - 1; i >= 0; i--)
        checksum_on(p[i], n[i], other, &got[1][i]);
    TEST_OK(lms_stream_synchronize(other));
    for (int i = 0; i < LARGE + SMALL; i++) {
        uint64_t want = fill_sum(n[i], 1000 + (uint64_t)i);
        cr_assert_eq(got[0][i], want, "allocation %d (%zu bytes) read back wrong", i, n[i]);
        cr_assert_eq(got[1][i], want, "allocation %d (%zu bytes) read back wrong on another stream",
                     i, n[i]);
    }
    st = test_stats();
    check_invariants(&st);
    cr_assert_gt(st.evictions, 0);
    cr_assert_gt(st.fetches, 0);
    cr_assert_gt(st.host_bytes, 0);
    TEST_OK(lms_stream_destroy(other));
}

Test(swap, an_allocation_larger_than_the_device_is_used_piece_by_piece)
{
    size_t n = 2 * LIMIT_CHUNKS * chunk;
    unsigned char *p = must_malloc(n), *image = scratch(n);
    cr_assert_not_null(image);
    for (size_t i = 0; i < 2 * LIMIT_CHUNKS; i++) {
        fill(p + i * chunk, chunk, 50 + i);
        dev_fill_ref(image + i * chunk, chunk, 50 + i);
    }
    /* pieces that straddle chunks and fills */
    for (size_t off = chunk / 2; off + 3 * chunk <= n; off += 3 * chunk)
        cr_assert_eq(read_sum(p + off, 3 * chunk), dev_checksum_ref(image + off, 3 * chunk),
                     "[%zu, +%zu) of the allocation", off, 3 * chunk);
    /* the whole of it can never be resident at once */
    TEST_FAILS(LMS_ERR_OUT_OF_MEMORY, lms_access(p, n, LMS_READ, NULL));
    for (size_t off = 0; off < n; off += chunk)
        cr_assert_eq(read_sum(p + off, chunk), dev_checksum_ref(image + off, chunk));
    unscratch(image);
}

Test(swap, access_many_makes_every_range_resident_for_one_piece_of_work)
{
    void **p = chunks_filled(3 * LIMIT_CHUNKS, 10);
    dev_device_t *dev = swap_device();
    dev_stream_t *ds = swap_stream(NULL);
    /* half a chunk of each of six allocations spread over the whole set,
     * read three and overwritten three, in one call */
    lms_range_t r[6];
    uint64_t sums[3];
    for (int i = 0; i < 6; i++)
        r[i] = (lms_range_t){(char *)p[4 * i] + chunk / 4, chunk / 2,
                             i < 3 ? LMS_READ : LMS_OVERWRITE};
    TEST_OK(lms_access_many(r, 6, NULL));
    for (int i = 0; i < 3; i++)
        TEST_OK(dev_checksum(dev, ds, addr(r[i].ptr), r[i].bytes, &sums[i]));
    for (int i = 3; i < 6; i++)
        TEST_OK(dev_fill(dev, ds, addr(r[i].ptr), r[i].bytes, 500 + (uint64_t)i));
    TEST_OK(lms_stream_synchronize(NULL));
    unsigned char *image = scratch(chunk);
    for (int i = 0; i < 6; i++) {
        dev_fill_ref(image, chunk, 10 + 4 * (uint64_t)i);
        if (i < 3)
            cr_assert_eq(sums[i], dev_checksum_ref(image + chunk / 4, chunk / 2));
        else
            dev_fill_ref(image + chunk / 4, chunk / 2, 500 + (uint64_t)i);
        cr_assert_eq(read_sum(p[4 * i], chunk), dev_checksum_ref(image, chunk),
                     "allocation %d after the batch", 4 * i);
    }
    unscratch(image);
    /* more than the device at once fails and loses nothing */
    lms_range_t all[LIMIT_CHUNKS + 1];
    for (int i = 0; i <= LIMIT_CHUNKS; i++)
        all[i] = (lms_range_t){p[i], chunk, LMS_READ};
    TEST_FAILS(LMS_ERR_OUT_OF_MEMORY, lms_access_many(all, LIMIT_CHUNKS + 1, NULL));
    for (int i = 0; i <= LIMIT_CHUNKS; i++) /* none of them was overwritten above */
        EXPECT_FILLED(p[i], chunk, 10 + (uint64_t)i);
    free_all(p, 3 * LIMIT_CHUNKS);
}

Test(swap, access_pointers_makes_whole_allocations_resident_and_skips_non_pointers)
{
    void *two = must_malloc(2 * chunk);
    fill(two, 2 * chunk, 77);
    void **p = chunks_filled(3 * LIMIT_CHUNKS, 30); /* evicts `two` and the first ones */
    dev_device_t *dev = swap_device();
    dev_stream_t *ds = swap_stream(NULL);
    /* interior pointers of four evicted allocations and of a two-chunk one,
     * a duplicate, NULL, a host address and an address past every allocation */
    const void *ptrs[] = {(char *)p[0] + 100, p[5], (char *)p[9] + chunk - 8, p[13], p[5],
                          (char *)two + chunk + 64, NULL, &ptrs, (char *)two + 64 * chunk};
    TEST_OK(lms_access_pointers(ptrs, sizeof ptrs / sizeof *ptrs, LMS_WRITE, NULL));
    uint64_t sums[5];
    const void *whole[5] = {p[0], p[5], p[9], p[13], two};
    for (int i = 0; i < 5; i++) /* the whole of each, from its base */
        TEST_OK(dev_checksum(dev, ds, addr(whole[i]), i < 4 ? chunk : 2 * chunk, &sums[i]));
    TEST_OK(lms_stream_synchronize(NULL));
    uint64_t seeds[4] = {30, 35, 39, 43};
    for (int i = 0; i < 4; i++)
        cr_assert_eq(sums[i], fill_sum(chunk, seeds[i]), "allocation %d", i);
    cr_assert_eq(sums[4], fill_sum(2 * chunk, 77));
    /* nothing to make resident is no failure; bad arguments are */
    TEST_OK(lms_access_pointers(NULL, 0, LMS_READ, NULL));
    const void *none[] = {NULL, (void *)0x1000};
    TEST_OK(lms_access_pointers(none, 2, LMS_READ, NULL));
    TEST_FAILS(LMS_ERR_INVALID, lms_access_pointers(NULL, 1, LMS_READ, NULL));
    TEST_FAILS(LMS_ERR_INVALID, lms_access_pointers(ptrs, 1, (lms_access_mode_t)9, NULL));
    TEST_FAILS(LMS_ERR_INVALID, lms_access_pointers(ptrs, 1, LMS_READ, (lms_stream_t)0x77));
    TEST_OK(lms_free(two, NULL));
    free_all(p, 3 * LIMIT_CHUNKS);
}

Test(swap, access_pointers_modes_reads_what_is_only_read_and_writes_the_rest)
{
    void *a = must_malloc(chunk), *b = must_malloc(chunk);
    fill(a, chunk, 1);
    fill(b, chunk, 2);
    void **other = chunks_filled(2 * LIMIT_CHUNKS, 10); /* a and b out (copied) */
    free_all(other, 2 * LIMIT_CHUNKS);
    /* a read; b named for reading and for writing: written */
    const void *ptrs[] = {a, (char *)b + 64, b};
    lms_access_mode_t modes[] = {LMS_READ, LMS_READ, LMS_WRITE};
    lms_access_mode_t bad[] = {LMS_READ, (lms_access_mode_t)9, LMS_WRITE};
    TEST_FAILS(LMS_ERR_INVALID, lms_access_pointers_modes(ptrs, bad, 3, NULL));
    TEST_FAILS(LMS_ERR_INVALID, lms_access_pointers_modes(ptrs, NULL, 3, NULL));
    TEST_OK(lms_access_pointers_modes(NULL, NULL, 0, NULL));
    lms_stats_t s0 = test_settled_stats();
    TEST_OK(lms_access_pointers_modes(ptrs, modes, 3, NULL));
    lms_stats_t s1 = test_settled_stats();
    cr_assert_eq(s1.fetches - s0.fetches, 2, "both fetched");
    other = chunks_filled(2 * LIMIT_CHUNKS, 50); /* a and b out again */
    lms_stats_t s2 = test_settled_stats();
    cr_assert_eq(s2.clean_drops - s1.clean_drops, 1,
                 "a, only read, was dropped; b, written, was copied (%llu drops)",
                 (unsigned long long)(s2.clean_drops - s1.clean_drops));
    EXPECT_FILLED(a, chunk, 1);
    EXPECT_FILLED(b, chunk, 2);
    free_all(other, 2 * LIMIT_CHUNKS);
    TEST_OK(lms_free(a, NULL));
    TEST_OK(lms_free(b, NULL));
}

Test(swap, launches_are_counted_by_what_their_hook_saw)
{
    lms_stats_t s0 = test_settled_stats();
    TEST_OK(lms_note_launch(LMS_LAUNCH_POINTERS));
    TEST_OK(lms_note_launch(LMS_LAUNCH_NO_POINTER));
    TEST_OK(lms_note_launch(LMS_LAUNCH_UNKNOWN));
    TEST_OK(lms_note_launch(LMS_LAUNCH_UNKNOWN));
    TEST_FAILS(LMS_ERR_INVALID, lms_note_launch((lms_launch_seen_t)0));
    TEST_FAILS(LMS_ERR_INVALID, lms_note_launch((lms_launch_seen_t)4));
    lms_stats_t s1 = test_settled_stats();
    cr_assert_eq(s1.launches - s0.launches, 4);
    cr_assert_eq(s1.launches_without_lms - s0.launches_without_lms, 1);
    cr_assert_eq(s1.launches_unknown - s0.launches_unknown, 2);
}

/* ---- access modes and clean copies ----------------------------------------- */

Test(swap, overwrite_does_not_fetch_but_read_and_write_do)
{
    size_t n = 2 * LIMIT_CHUNKS;
    void **p = chunks_filled(n, 0);
    lms_stats_t before = test_settled_stats();
    /* at least n - LIMIT_CHUNKS of them are on the host now, whatever the policy */
    for (size_t i = 0; i < n; i++)
        fill(p[i], chunk, 100 + i);
    lms_stats_t after = test_settled_stats();
    cr_assert_eq(after.bytes_h2d, before.bytes_h2d, "LMS_OVERWRITE fetched %llu bytes",
                 (unsigned long long)(after.bytes_h2d - before.bytes_h2d));
    cr_assert_eq(after.fetches, before.fetches);
    for (size_t i = 0; i < n; i++)
        EXPECT_FILLED(p[i], chunk, 100 + i);
    lms_stats_t read = test_settled_stats();
    cr_assert_geq(read.fetches - after.fetches, n - LIMIT_CHUNKS, "LMS_READ fetched %llu chunks",
                  (unsigned long long)(read.fetches - after.fetches));
    for (size_t i = 0; i < n; i++)
        fill_on(p[i], chunk, 200 + i, LMS_WRITE, NULL);
    lms_stats_t write = test_settled_stats();
    cr_assert_geq(write.fetches - read.fetches, n - LIMIT_CHUNKS,
                  "LMS_WRITE must fetch what it does not hold: %llu chunks",
                  (unsigned long long)(write.fetches - read.fetches));
    for (size_t i = 0; i < n; i++)
        EXPECT_FILLED(p[i], chunk, 200 + i);
    check_invariants(&write);
    free_all(p, n);
}

Test(swap, an_overwrite_of_part_of_a_chunk_keeps_the_rest_of_it)
{
    /* a large allocation, and two small ones that share a chunk */
    unsigned char *big = must_malloc(2 * chunk);
    char *s1 = must_malloc(4096), *s2 = must_malloc(4096);
    cr_assert_eq(addr(s1) / chunk, addr(s2) / chunk, "small allocations share a chunk");
    fill(big, 2 * chunk, 1);
    fill(s1, 4096, 2);
    fill(s2, 4096, 3);
    for (int round = 0; round < 2; round++) {
        void **other = chunks_filled(2 * LIMIT_CHUNKS, 10); /* pushes them out, usually */
        free_all(other, 2 * LIMIT_CHUNKS);
        if (round == 0) {
            fill_on(big + chunk - 8192, 16384, 4, LMS_OVERWRITE, NULL); /* across the boundary */
            fill_on(s1, 4096, 5, LMS_OVERWRITE, NULL);
        }
    }
    unsigned char *image = scratch(2 * chunk);
    dev_fill_ref(image, 2 * chunk, 1);
    dev_fill_ref(image + chunk - 8192, 16384, 4);
    cr_assert_eq(read_sum(big, 2 * chunk), dev_checksum_ref(image, 2 * chunk));
    unscratch(image);
    EXPECT_FILLED(s1, 4096, 5);
    EXPECT_FILLED(s2, 4096, 3);
}

Test(swap, a_chunk_read_after_eviction_and_evicted_again_unchanged_is_a_clean_drop)
{
    /* Seven chunks pinned leave one block for A and C; pins keep the
     * policy out of it: the block can only go to A or C. */
    void *a = must_malloc(chunk), *c = must_malloc(chunk);
    fill(c, chunk, 3);
    void **b = chunks_filled(LIMIT_CHUNKS - 1, 10);
    for (int i = 0; i < LIMIT_CHUNKS - 1; i++)
        TEST_OK(lms_pin(b[i], chunk));
    fill(a, chunk, 1);                 /* C out (copied: it was written) */
    uint64_t sum = read_sum(c, chunk); /* A out (copied), C in: C is clean now */
    cr_assert_eq(sum, fill_sum(chunk, 3));
    lms_stats_t s0 = test_settled_stats();
    cr_assert_eq(s0.pinned_bytes, (LIMIT_CHUNKS - 1) * chunk);
    /* From here on nothing unpinned on the device differs from its host copy */
    EXPECT_FILLED(a, chunk, 1); /* C dropped, A fetched: A is clean */
    EXPECT_FILLED(c, chunk, 3); /* A dropped: read after eviction, evicted unchanged */
    lms_stats_t s2 = test_settled_stats();
    cr_assert_eq(s2.bytes_d2h, s0.bytes_d2h, "clean chunks were copied out: %llu bytes",
                 (unsigned long long)(s2.bytes_d2h - s0.bytes_d2h));
    cr_assert_eq(s2.evictions, s0.evictions);
    cr_assert_geq(s2.clean_drops - s0.clean_drops, 1, "A's second eviction is a clean drop");
    cr_assert_eq(s2.fetches - s0.fetches, 2);
    cr_assert_eq(s2.bytes_h2d - s0.bytes_h2d, 2 * chunk);
    check_invariants(&s2);
    for (int i = 0; i < LIMIT_CHUNKS - 1; i++)
        TEST_OK(lms_unpin(b[i], chunk));
    free_all(b, LIMIT_CHUNKS - 1);
}

Test(swap, rereading_a_working_set_twice_the_device_copies_out_each_written_chunk_once)
{
    /* whatever the policy: after the writes, each chunk is copied out at most
     * once more (the chunks still dirty on the device); every later eviction
     * of data only read is a clean drop */
    size_t n = 2 * LIMIT_CHUNKS;
    void **p = chunks_filled(n, 30);
    lms_stats_t s0 = test_settled_stats();
    for (int round = 0; round < 3; round++)
        for (size_t i = 0; i < n; i++)
            EXPECT_FILLED(p[i], chunk, 30 + i);
    lms_stats_t s1 = test_settled_stats();
    uint64_t dropped = s1.clean_drops - s0.clean_drops, copied = s1.evictions - s0.evictions;
    cr_assert_leq(copied, LIMIT_CHUNKS, "%llu chunks copied out while only reading",
                  (unsigned long long)copied);
    cr_assert_geq(dropped + copied, s1.fetches - s0.fetches - LIMIT_CHUNKS,
                  "every fetch beyond the first device-full made room by an eviction");
    cr_assert_gt(dropped, 0);
    check_invariants(&s1);
    free_all(p, n);
}

Test(swap, an_access_waits_for_fetches_in_flight_rather_than_failing)
{
    /* Reads on a stream of their own (so evicting the written chunks waits
     * for nothing) over a slow H2D link: after a device-full of them, every
     * resident chunk still has its fetch in flight. The next read must wait
     * for one, not report the device full: nothing is pinned or held. */
    swap_config_t cfg = config(HOST_CHUNKS, false);
    cfg.device.sim_h2d_gbps = 0.1; /* 21 ms a chunk */
    TEST_OK(lms_shutdown());
    TEST_OK(swap_init(&cfg));
    if (strcmp(swap_device()->info.backend, "sim") != 0)
        cr_skip_test("needs the sim's bandwidth limit");
    size_t n = 3 * LIMIT_CHUNKS;
    void **p = chunks_filled(n, 1);
    lms_stream_t r;
    TEST_OK(lms_stream_create(&r));
    static uint64_t sums[3 * LIMIT_CHUNKS];
    for (size_t i = 0; i < 2 * LIMIT_CHUNKS; i++) /* the first 2/3 are on the host */
        checksum_on(p[i], chunk, r, &sums[i]);
    TEST_OK(lms_stream_synchronize(r));
    for (size_t i = 0; i < 2 * LIMIT_CHUNKS; i++)
        cr_assert_eq(sums[i], fill_sum(chunk, 1 + i));
    free_all(p, n);
    TEST_OK(lms_stream_destroy(r));
}

/* ---- pins ------------------------------------------------------------------ */

Test(swap, pinned_memory_stays_resident_while_other_memory_swaps)
{
    void *pinned = must_malloc(2 * chunk);
    fill(pinned, 2 * chunk, 7);
    TEST_OK(lms_pin(pinned, 2 * chunk));
    lms_stats_t st = test_stats();
    cr_assert_eq(st.pinned_bytes, 2 * chunk);
    cr_assert_geq(st.resident_bytes, 2 * chunk);
    void **other = chunks_filled(3 * LIMIT_CHUNKS, 100);
    for (int i = 0; i < 3 * LIMIT_CHUNKS; i++)
        EXPECT_FILLED(other[i], chunk, 100 + (uint64_t)i);
    /* used with no lms_access, on a stream that never named it: on sim an
     * evicted chunk would fault here */
    lms_stream_t s;
    TEST_OK(lms_stream_create(&s));
    uint64_t sum = 0;
    TEST_OK(dev_checksum(swap_device(), swap_stream(s), addr(pinned), 2 * chunk, &sum));
    TEST_OK(dev_fill(swap_device(), swap_stream(s), addr(pinned), chunk, 8));
    TEST_OK(lms_stream_synchronize(s));
    cr_assert_eq(sum, fill_sum(2 * chunk, 7));
    /* pins nest */
    TEST_OK(lms_pin(pinned, 2 * chunk));
    TEST_OK(lms_unpin(pinned, 2 * chunk));
    cr_assert_eq(test_stats().pinned_bytes, 2 * chunk, "one pin is left");
    TEST_OK(lms_unpin(pinned, 2 * chunk));
    cr_assert_eq(test_stats().pinned_bytes, 0);
    TEST_FAILS(LMS_ERR_INVALID, lms_unpin(pinned, 2 * chunk));
    /* unpinned, it swaps like the rest and keeps its data */
    free_all(other, 3 * LIMIT_CHUNKS);
    other = chunks_filled(2 * LIMIT_CHUNKS, 200);
    unsigned char *image = scratch(2 * chunk);
    dev_fill_ref(image, 2 * chunk, 7);
    dev_fill_ref(image, chunk, 8);
    cr_assert_eq(read_sum(pinned, 2 * chunk), dev_checksum_ref(image, 2 * chunk));
    unscratch(image);
    /* a small allocation pins its whole chunk */
    void *small = must_malloc(1000);
    TEST_OK(lms_pin(small, 1000));
    cr_assert_eq(test_stats().pinned_bytes, chunk);
    TEST_OK(lms_unpin(small, 1000));
    free_all(other, 2 * LIMIT_CHUNKS);
    TEST_OK(lms_stream_destroy(s));
}

Test(swap, when_everything_is_pinned_an_access_elsewhere_fails_with_out_of_memory)
{
    void *y = must_malloc(chunk);
    fill(y, chunk, 5);
    void **x = chunks_filled(LIMIT_CHUNKS, 20);
    for (int i = 0; i < LIMIT_CHUNKS; i++)
        TEST_OK(lms_pin(x[i], chunk));
    lms_stats_t s0 = test_stats();
    cr_assert_eq(s0.pinned_bytes, s0.device_limit);
    TEST_FAILS(LMS_ERR_OUT_OF_MEMORY, lms_access(y, chunk, LMS_READ, NULL));
    TEST_FAILS(LMS_ERR_OUT_OF_MEMORY, lms_access(y, 100, LMS_OVERWRITE, NULL));
    TEST_FAILS(LMS_ERR_OUT_OF_MEMORY, lms_pin(y, chunk));
    void *z = must_malloc(chunk); /* allocating needs no device memory */
    TEST_FAILS(LMS_ERR_OUT_OF_MEMORY, lms_access(z, chunk, LMS_OVERWRITE, NULL));
    lms_stats_t s1 = test_stats();
    cr_assert_eq(s1.ooms - s0.ooms, 4);
    cr_assert_eq(s1.pinned_bytes, s0.pinned_bytes);
    cr_assert_eq(s1.evictions + s1.clean_drops, s0.evictions + s0.clean_drops,
                 "nothing pinned was evicted");
    /* the pinned memory is all still there (no lms_access needed) */
    static uint64_t sums[LIMIT_CHUNKS];
    for (int i = 0; i < LIMIT_CHUNKS; i++)
        TEST_OK(dev_checksum(swap_device(), swap_stream(NULL), addr(x[i]), chunk, &sums[i]));
    TEST_OK(lms_stream_synchronize(NULL));
    for (int i = 0; i < LIMIT_CHUNKS; i++)
        cr_assert_eq(sums[i], fill_sum(chunk, 20 + (uint64_t)i));
    /* one unpin makes room, and nothing was lost */
    TEST_OK(lms_unpin(x[0], chunk));
    EXPECT_FILLED(y, chunk, 5);
    for (int i = 1; i < LIMIT_CHUNKS; i++)
        TEST_OK(lms_unpin(x[i], chunk));
    for (int i = 0; i < LIMIT_CHUNKS; i++)
        EXPECT_FILLED(x[i], chunk, 20 + (uint64_t)i);
    free_all(x, LIMIT_CHUNKS);
}

/* ---- bad input -------------------------------------------------------------- */

/* The counters bad input must not move. */
static void expect_unchanged(const lms_stats_t *a, const lms_stats_t *b)
{
    cr_assert_eq(a->bytes_h2d, b->bytes_h2d, "bad input fetched");
    cr_assert_eq(a->fetches, b->fetches);
    cr_assert_eq(a->bytes_d2h, b->bytes_d2h, "bad input evicted");
    cr_assert_eq(a->evictions + a->clean_drops, b->evictions + b->clean_drops);
    cr_assert_eq(a->pinned_bytes, b->pinned_bytes, "bad input pinned or unpinned");
    cr_assert_eq(a->resident_bytes, b->resident_bytes);
    cr_assert_eq(a->allocated_bytes, b->allocated_bytes);
    cr_assert_eq(a->ooms, b->ooms);
}

Test(swap, bad_input_to_access_pin_and_unpin_is_rejected_and_changes_nothing)
{
    char *p = must_malloc(3 * chunk + 100), *small = must_malloc(3000), *gone = must_malloc(5000);
    void *base;
    size_t usable, usable_small;
    TEST_OK(lms_allocation_of(p, &base, &usable));
    TEST_OK(lms_allocation_of(small, &base, &usable_small));
    fill(p, 3 * chunk + 100, 1);
    fill(small, 3000, 2);
    TEST_OK(lms_free(gone, NULL));
    TEST_OK(lms_pin(small, 3000));
    lms_stream_t dead;
    TEST_OK(lms_stream_create(&dead));
    TEST_OK(lms_stream_destroy(dead));
    char host[64];
    lms_stats_t s0 = test_settled_stats();

    const struct {
        const void *ptr;
        size_t bytes;
        const char *what;
    } bad[] = {
        {NULL, 8, "NULL"},
        {host, 8, "host memory"},
        {(void *)(uintptr_t)4096, 8, "a low address"},
        {gone, 8, "a freed allocation"},
        {p + usable - 8, 16, "a range past the end"},
        {small + usable_small - 1, 2, "a small allocation's range past its end"},
        {p, usable + 1, "one byte more than the allocation"},
        {p + 8, SIZE_MAX, "a range that wraps"},
        {p, 0, "0 bytes"},
        {p + chunk, 0, "0 bytes inside"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        lms_access_mode_t modes[] = {LMS_READ, LMS_WRITE, LMS_OVERWRITE};
        for (int m = 0; m < 3; m++) {
            lms_status_t st = lms_access(bad[i].ptr, bad[i].bytes, modes[m], NULL);
            cr_assert_eq(st, LMS_ERR_INVALID, "lms_access of %s -> %s", bad[i].what,
                         lms_status_str(st));
            cr_assert_neq(lms_last_error()[0], '\0');
        }
        lms_range_t r[2] = {{p, chunk, LMS_READ}, {bad[i].ptr, bad[i].bytes, LMS_READ}};
        cr_assert_eq(lms_access_many(r, 2, NULL), LMS_ERR_INVALID, "lms_access_many with %s",
                     bad[i].what);
        cr_assert_eq(lms_pin(bad[i].ptr, bad[i].bytes), LMS_ERR_INVALID, "lms_pin of %s",
                     bad[i].what);
        cr_assert_eq(lms_unpin(bad[i].ptr, bad[i].bytes), LMS_ERR_INVALID, "lms_unpin of %s",
                     bad[i].what);
    }
    int modes[] = {0, 4, 99, -1};
    for (int m = 0; m < 4; m++) {
        TEST_FAILS(LMS_ERR_INVALID, lms_access(p, 64, (lms_access_mode_t)modes[m], NULL));
        lms_range_t r[2] = {{p, 64, LMS_READ}, {small, 64, (lms_access_mode_t)modes[m]}};
        TEST_FAILS(LMS_ERR_INVALID, lms_access_many(r, 2, NULL));
    }
    lms_stream_t streams[] = {(lms_stream_t)(uintptr_t)0x777, dead};
    for (int s = 0; s < 2; s++) {
        TEST_FAILS(LMS_ERR_INVALID, lms_access(p, 64, LMS_READ, streams[s]));
        lms_range_t r = {p, 64, LMS_READ};
        TEST_FAILS(LMS_ERR_INVALID, lms_access_many(&r, 1, streams[s]));
    }
    TEST_FAILS(LMS_ERR_INVALID, lms_access_many(NULL, 1, NULL));
    TEST_FAILS(LMS_ERR_INVALID, lms_unpin(p, chunk)); /* never pinned */
    TEST_FAILS(LMS_ERR_INVALID, lms_unpin(gone, 100));
    lms_stats_t s1 = test_settled_stats();
    expect_unchanged(&s0, &s1);

    TEST_OK(lms_unpin(small, 3000));
    TEST_FAILS(LMS_ERR_INVALID, lms_unpin(small, 3000)); /* more unpins than pins */
    /* a range inside an allocation, not at its start, is fine */
    unsigned char *image = scratch(3 * chunk + 100);
    dev_fill_ref(image, 3 * chunk + 100, 1);
    cr_assert_eq(read_sum(p + chunk + 8, chunk), dev_checksum_ref(image + chunk + 8, chunk));
    unscratch(image);
    EXPECT_FILLED(small, 3000, 2);
    EXPECT_FILLED(p, 3 * chunk + 100, 1);
}

/* Issue 24: pins were counted per chunk only, so an unpin of any range over
 * pinned chunks succeeded: lms_unpin(p + chunk, 16) released half of
 * lms_pin(p, 2 chunks), the matching unpin then failed, and the other half
 * stayed pinned for good. An unpin must name a pinned range (Note [Pin
 * records]); a free releases what is still pinned. */
Test(swap, an_unpin_must_name_a_range_that_was_pinned)
{
    char *p = must_malloc(2 * chunk);
    fill(p, 2 * chunk, 5);
    TEST_OK(lms_pin(p, 2 * chunk));
    lms_stats_t s0 = test_settled_stats();
    cr_assert_eq(s0.pinned_bytes, 2 * chunk);
    const struct { size_t off, bytes; } wrong[] = {
        {chunk, 16}, {0, chunk}, {0, 2 * chunk - 1}, {1, 2 * chunk - 1}, {chunk, chunk}};
    for (size_t i = 0; i < sizeof wrong / sizeof *wrong; i++) {
        lms_status_t st = lms_unpin(p + wrong[i].off, wrong[i].bytes);
        cr_assert_eq(st, LMS_ERR_INVALID, "lms_unpin(p + %zu, %zu) -> %s", wrong[i].off,
                     wrong[i].bytes, lms_status_str(st));
        cr_assert(strstr(lms_last_error(), "not pinned") != NULL, "%s", lms_last_error());
    }
    cr_assert_eq(test_stats().pinned_bytes, 2 * chunk, "a wrong unpin changed nothing");
    /* ranges nest and overlap by count, each unpinned by its own range */
    TEST_OK(lms_pin(p + chunk, 16));
    TEST_OK(lms_pin(p + chunk, 16));
    TEST_OK(lms_unpin(p, 2 * chunk));
    cr_assert_eq(test_stats().pinned_bytes, chunk, "the second chunk is still pinned twice");
    TEST_FAILS(LMS_ERR_INVALID, lms_unpin(p, 2 * chunk));
    TEST_OK(lms_unpin(p + chunk, 16));
    TEST_OK(lms_unpin(p + chunk, 16));
    cr_assert_eq(test_stats().pinned_bytes, 0);
    TEST_FAILS(LMS_ERR_INVALID, lms_unpin(p + chunk, 16));
    /* freed while pinned: the pins go with its memory, and a new allocation
     * there has none to unpin */
    TEST_OK(lms_pin(p, chunk));
    TEST_OK(lms_pin(p, chunk));
    TEST_OK(lms_free(p, NULL));
    TEST_OK(lms_stream_synchronize(NULL));
    cr_assert_eq(test_stats().pinned_bytes, 0);
    char *q = must_malloc(2 * chunk);
    TEST_FAILS(LMS_ERR_INVALID, lms_unpin(q, chunk));
    TEST_OK(lms_free(q, NULL));
}

/* From a review of the fix above: a free through the thread cache kept the
 * pins (the cached slot, reused, was still pinned, and its new owner could
 * unpin what it never pinned). While anything is pinned, a pinned
 * allocation's free is queued, and its pins go with its memory. */
Test(swap, a_pinned_small_allocation_freed_and_reused_keeps_no_pins)
{
    void *p = must_malloc(1000), *r = must_malloc(1000);
    TEST_OK(lms_pin(p, 1000));
    TEST_OK(lms_free(p, NULL));
    TEST_OK(lms_stream_synchronize(NULL));
    cr_assert_eq(test_stats().pinned_bytes, 0, "the free took p's pin");
    void *q = must_malloc(1000);
    TEST_FAILS(LMS_ERR_INVALID, lms_unpin(q, 1000));
    TEST_OK(lms_pin(q, 1000));
    TEST_OK(lms_free(q, NULL));
    TEST_OK(lms_stream_synchronize(NULL));
    cr_assert_eq(test_stats().pinned_bytes, 0);
    TEST_OK(lms_free(r, NULL));
}

/* ---- frees ------------------------------------------------------------------ */

Test(swap, an_allocation_is_freed_in_any_state_and_its_memory_reused)
{
    restart(LIMIT_CHUNKS, false); /* room for 2 x LIMIT_CHUNKS - HIGH_CHUNKS chunks */
    lms_stream_t a;
    TEST_OK(lms_stream_create(&a));
    size_t n = room_chunks(), gated = n - 3;
    void **p = scratch(n * sizeof *p);
    for (size_t i = 0; i < n; i++)
        p[i] = must_malloc(chunk);
    /* p[0]: never accessed; p[1 .. gated-1]: written (the early ones
     * evicted); the last two: pinned then unpinned, and read; p[gated]:
     * resident with a kernel queued behind a gate (closed last: nothing
     * may wait for a checksum while it is closed, see test_gate_wait) */
    for (size_t i = 1; i < gated; i++)
        fill(p[i], chunk, i);
    for (size_t i = gated + 1; i < n; i++) {
        fill(p[i], chunk, i);
        TEST_OK(lms_pin(p[i], chunk));
        TEST_OK(lms_unpin(p[i], chunk));
    }
    EXPECT_FILLED(p[n - 1], chunk, n - 1);
    TEST_OK(lms_stream_synchronize(NULL));
    test_gate_close();
    dev_device_t *dev = swap_device();
    dev_stream_t *ds = swap_stream(a);
    TEST_OK(lms_access(p[gated], chunk, LMS_OVERWRITE, a));
    TEST_OK(dev_host_func(dev, ds, test_gate_wait, NULL));
    TEST_OK(dev_fill(dev, ds, addr(p[gated]), chunk, gated));
    lms_stats_t s0 = test_stats();
    cr_assert_eq(s0.allocated_bytes, n * chunk);
    cr_assert_gt(s0.host_bytes, 0, "some were evicted");
    TEST_OK(lms_free(p[gated], a)); /* behind the gated kernel */
    for (size_t i = 0; i < n; i++)
        if (i != gated)
            TEST_OK(lms_free(p[i], NULL));
    pthread_t opener;
    pthread_create(&opener, NULL, test_gate_open_later, NULL);
    /* all of it again, on the other stream (so p[gated] waits for the gate) */
    for (size_t i = 0; i < n; i++) {
        p[i] = NULL;
        TEST_OK(lms_malloc(&p[i], chunk, NULL));
        fill(p[i], chunk, 100 + i);
    }
    pthread_join(opener, NULL);
    for (size_t i = 0; i < n; i++)
        EXPECT_FILLED(p[i], chunk, 100 + i);
    free_all(p, n);
    TEST_OK(lms_stream_synchronize(a));
    lms_stats_t s1 = test_settled_stats();
    cr_assert_eq(s1.pinned_bytes, 0);
    all_room_is_free_again(); /* frees pending on a stream count until released */
    /* small allocations in every state too */
    enum { SMALL = 2000 };
    static void *q[SMALL];
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < SMALL; i++) {
            q[i] = must_malloc(10000);
            if (i % 3 != 0)
                fill(q[i], 10000, (uint64_t)i);
        }
        for (int i = 0; i < SMALL; i += 7)
            if (i % 3 != 0)
                EXPECT_FILLED(q[i], 10000, (uint64_t)i);
        for (int i = 0; i < SMALL; i++)
            TEST_OK(lms_free(q[i], NULL));
    }
    lms_stats_t s2 = test_settled_stats();
    check_invariants(&s2);
    all_room_is_free_again();
    TEST_OK(lms_stream_destroy(a));
}

/* ---- stats ------------------------------------------------------------------- */

Test(swap, stats_counters_move_as_expected)
{
    lms_stats_t st = test_stats();
    cr_assert_eq(st.device_limit, LIMIT_CHUNKS * chunk);
    cr_assert_eq(st.host_limit, HOST_CHUNKS * chunk);
    cr_assert_eq(st.bytes_h2d + st.bytes_d2h + st.evictions + st.clean_drops + st.fetches, 0);
    cr_assert_eq(st.resident_bytes + st.peak_resident_bytes + st.pinned_bytes, 0);
    cr_assert_eq(st.allocated_bytes + st.ooms + st.stall_ns + st.prefetch_hits, 0);

    void *p = must_malloc(2 * chunk);
    st = test_stats();
    cr_assert_eq(st.allocated_bytes, 2 * chunk);
    cr_assert_eq(st.resident_bytes, 0, "lms_malloc backs nothing");
    fill(p, 2 * chunk, 1);
    st = test_stats();
    cr_assert_eq(st.resident_bytes, 2 * chunk);
    cr_assert_eq(st.peak_resident_bytes, 2 * chunk);
    cr_assert_eq(st.fetches, 0, "a first use fetches nothing");

    void **other = chunks_filled(2 * LIMIT_CHUNKS, 10);
    st = test_settled_stats();
    cr_assert_eq(st.allocated_bytes, (2 + 2 * LIMIT_CHUNKS) * chunk);
    /* the reclaim thread keeps a chunk or two free */
    cr_assert_geq(st.peak_resident_bytes, st.device_limit - 2 * chunk);
    cr_assert_geq(st.evictions, LIMIT_CHUNKS + 2, "%llu", (unsigned long long)st.evictions);
    cr_assert_eq(st.clean_drops, 0, "everything was written");
    cr_assert_eq(st.fetches, 0, "nothing was read");
    cr_assert_geq(st.host_bytes, st.evictions * chunk);
    check_invariants(&st);

    EXPECT_FILLED(p, 2 * chunk, 1);
    lms_stats_t st2 = test_settled_stats();
    cr_assert_geq(st2.fetches - st.fetches, 1);
    check_invariants(&st2);

    free_all(other, 2 * LIMIT_CHUNKS);
    TEST_OK(lms_free(p, NULL));
    st = test_settled_stats();
    cr_assert_eq(st.allocated_bytes, 0);
    cr_assert_eq(st.host_bytes, 0, "freed chunks keep no host copy");
    cr_assert_geq(st.peak_resident_bytes, st.device_limit - 2 * chunk, "the peak stays");
}

Test(swap, callers_that_wait_for_an_eviction_count_as_stalls)
{
    swap_config_t cfg = config(HOST_CHUNKS, false);
    cfg.device.sim_d2h_gbps = 1; /* 2 ms per chunk copied out */
    TEST_OK(lms_shutdown());
    TEST_OK(swap_init(&cfg));
    if (strcmp(swap_device()->info.backend, "sim") != 0)
        cr_skip_test("needs the sim's bandwidth limit");
    void **p = chunks_filled(3 * LIMIT_CHUNKS, 1);
    lms_stats_t st = test_settled_stats();
    cr_assert_gt(st.stall_ns, 0, "no stall while filling 3 x the device over a slow link");
    for (int i = 0; i < 3 * LIMIT_CHUNKS; i++)
        EXPECT_FILLED(p[i], chunk, 1 + (uint64_t)i);
    free_all(p, 3 * LIMIT_CHUNKS);
}

/* ---- issue 25: the bugs a close reading found ------------------------------ */

/* Timed waits took their deadlines from CLOCK_REALTIME, so a step of the
 * wall clock stalled the reclaim thread. Their deadlines come from one
 * helper now, on CLOCK_MONOTONIC, the clock residency's condition variables
 * wait on. (Stepping the real clock is not possible in a test.) */
Test(swap, timed_waits_have_monotonic_deadlines)
{
    const uint64_t waits[] = {0, 1000 * 1000, 50 * 1000 * 1000, 999999999, 2500000000u};
    for (size_t i = 0; i < sizeof waits / sizeof *waits; i++) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        struct timespec d = base_deadline_in(waits[i]);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        uint64_t at = (uint64_t)d.tv_sec * 1000000000u + (uint64_t)d.tv_nsec;
        cr_assert(d.tv_nsec >= 0 && d.tv_nsec < 1000000000L);
        cr_assert(at >= (uint64_t)t0.tv_sec * 1000000000u + (uint64_t)t0.tv_nsec + waits[i] &&
                      at <= (uint64_t)t1.tv_sec * 1000000000u + (uint64_t)t1.tv_nsec + waits[i],
                  "%llu ns from now", (unsigned long long)waits[i]);
    }
}

/* n * sizeof(lms_range_t) was not checked: SIZE_MAX / 2 asked the host for
 * a wrapped, huge size (LMS_ERR_OUT_OF_MEMORY), and SIZE_MAX / 24 + 1 for 8
 * bytes, after which the pointers were read up to n (here into a page that
 * cannot be read: SIGSEGV) and the ranges written past those 8 bytes. */
Test(swap, access_pointers_with_a_count_whose_ranges_overflow_fails_and_changes_nothing)
{
    void *p = must_malloc(chunk);
    fill(p, chunk, 3);
    void **others = chunks_filled(LIMIT_CHUNKS, 4); /* p goes to the host */
    long page = sysconf(_SC_PAGESIZE);
    char *m = mmap(NULL, 2 * (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
    cr_assert_neq(m, MAP_FAILED);
    cr_assert_eq(mprotect(m + page, (size_t)page, PROT_NONE), 0);
    const void **ptrs = (const void **)(void *)(m + page) - 2; /* then the unreadable page */
    ptrs[0] = ptrs[1] = p;
    lms_access_mode_t *modes = (lms_access_mode_t *)(void *)(m + page) - 2;
    modes[0] = modes[1] = LMS_READ;
    lms_stats_t s0 = test_settled_stats();
    const size_t counts[] = {SIZE_MAX / 2, SIZE_MAX / sizeof(lms_range_t) + 1, SIZE_MAX};
    for (size_t i = 0; i < sizeof counts / sizeof *counts; i++) {
        TEST_FAILS(LMS_ERR_INVALID, lms_access_pointers(ptrs, counts[i], LMS_READ, NULL));
        TEST_FAILS(LMS_ERR_INVALID, lms_access_pointers_modes(ptrs, modes, counts[i], NULL));
    }
    lms_stats_t s1 = test_settled_stats();
    expect_unchanged(&s0, &s1);
    munmap(m, 2 * (size_t)page);
    EXPECT_FILLED(p, chunk, 3);
    free_all(others, LIMIT_CHUNKS);
    TEST_OK(lms_free(p, NULL));
}

/* pthread_cond_init and pthread_cond_destroy, watched while cond_watch is
 * set: a destroy of a condition variable that no init made (in the watch)
 * is counted. The test executable's definitions take the place of libc's,
 * which they call. */
static atomic_int cond_watch;
static pthread_mutex_t cond_seen_lock = PTHREAD_MUTEX_INITIALIZER;
static const void *cond_made[1024];
static size_t ncond_made;
static atomic_int cond_bad_destroys;

int pthread_cond_init(pthread_cond_t *c, const pthread_condattr_t *attr)
{
    int (*real)(pthread_cond_t *, const pthread_condattr_t *) =
        (int (*)(pthread_cond_t *, const pthread_condattr_t *))dlsym(RTLD_NEXT, "pthread_cond_init");
    int r = real(c, attr);
    if (r == 0 && atomic_load(&cond_watch)) {
        pthread_mutex_lock(&cond_seen_lock);
        if (ncond_made < sizeof cond_made / sizeof *cond_made)
            cond_made[ncond_made++] = c;
        pthread_mutex_unlock(&cond_seen_lock);
    }
    return r;
}

int pthread_cond_destroy(pthread_cond_t *c)
{
    int (*real)(pthread_cond_t *) = (int (*)(pthread_cond_t *))dlsym(RTLD_NEXT,
                                                                     "pthread_cond_destroy");
    if (atomic_load(&cond_watch)) {
        pthread_mutex_lock(&cond_seen_lock);
        size_t i = 0;
        while (i < ncond_made && cond_made[i] != c)
            i++;
        if (i == ncond_made)
            atomic_fetch_add(&cond_bad_destroys, 1);
        else
            cond_made[i] = cond_made[--ncond_made];
        pthread_mutex_unlock(&cond_seen_lock);
    }
    return real(c);
}

/* resid_destroy destroyed the reclaim thread's condition variables even
 * when the start had failed before resid_init made them (a device limit of
 * less than a chunk fails there): undefined behaviour, harmless on glibc
 * only because the state is zeroed. */
Test(swap, a_start_that_fails_before_residency_destroys_no_condition_variable_it_never_made)
{
    TEST_OK(lms_shutdown());
    swap_config_t cfg = config(HOST_CHUNKS, false);
    cfg.device_limit = 1; /* less than a chunk */
    atomic_store(&cond_watch, 1);
    lms_status_t st = swap_init(&cfg);
    atomic_store(&cond_watch, 0);
    cr_assert_eq(st, LMS_ERR_INVALID, "%s", lms_last_error());
    cr_assert_eq(atomic_load(&cond_bad_destroys), 0,
                 "%d condition variables destroyed that were never initialized",
                 atomic_load(&cond_bad_destroys));
    cfg.device_limit = LIMIT_CHUNKS * chunk; /* and a start that works makes and destroys both */
    atomic_store(&cond_watch, 1);
    TEST_OK(swap_init(&cfg));
    TEST_OK(lms_shutdown());
    atomic_store(&cond_watch, 0);
    cr_assert_eq(atomic_load(&cond_bad_destroys), 0);
}

/* lms_empty_cache gives back every block of the cached chunks (it looked
 * for each one from the start of the cached set: quadratic; now one pass),
 * in the order it did. */
Test(swap, empty_cache_gives_back_the_block_of_every_cached_chunk)
{
    enum { N = LIMIT_CHUNKS - HIGH_CHUNKS }; /* resident: the reclaim thread evicts none */
    void **p = scratch(N * sizeof *p);
    for (size_t i = 0; i < N; i++)
        p[i] = must_malloc(chunk);
    for (size_t i = 0; i < N; i++)
        fill(p[i], chunk, 20 + i);
    TEST_OK(lms_stream_synchronize(NULL));
    for (size_t i = 0; i < N; i += 2) /* the set out of address order */
        TEST_OK(lms_free(p[i], NULL));
    for (size_t i = 1; i < N; i += 2)
        TEST_OK(lms_free(p[i], NULL));
    dev_live_t live;
    dev_live(swap_device(), &live);
    cr_assert_eq(live.mapped_blocks, N, "all cached, still mapped");
    TEST_OK(lms_empty_cache());
    dev_live(swap_device(), &live);
    cr_assert_eq(live.mapped_blocks, 0);
    cr_assert_eq(live.blocks, 0, "every block released");
    unscratch(p);
    all_room_is_free_again();
}
