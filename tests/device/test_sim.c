/*
 * tests/device/test_sim.c — what only the sim backend can show: a touch of
 * unmapped memory faults (on a GPU it kills the context, so it cannot be a
 * test there), link throttling is exact enough to make overlap real, and bad
 * sim settings are refused.
 */
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static dev_device_t *open_sim(double h2d_gbps, double d2h_gbps)
{
    dev_config_t cfg = test_config();
    cfg.backend = "sim";
    cfg.sim_h2d_gbps = h2d_gbps;
    cfg.sim_d2h_gbps = d2h_gbps;
    return test_open(&cfg);
}

TestSuite(sim);

Test(sim, a_mapped_block_with_access_is_usable_from_the_host)
{
    dev_device_t *dev = open_sim(0, 0);
    test_run_t run = test_run_map(dev, 2);
    memset((void *)(uintptr_t)run.base, 0xab, run.size);
    cr_assert_eq(((unsigned char *)(uintptr_t)run.base)[run.size - 1], 0xab);
    test_run_unmap(dev, &run);
    dev_close(dev);
}

Test(sim, touching_an_unmapped_block_faults, .signal = SIGSEGV)
{
    dev_device_t *dev = open_sim(0, 0);
    test_run_t run = test_run_map(dev, 1);
    volatile unsigned char *p = (volatile unsigned char *)(uintptr_t)run.base;
    p[0] = 1;
    TEST_OK(dev_unmap(dev, run.base, run.size));
    p[0] = 2; /* a real kernel gets an illegal address here */
}

Test(sim, touching_a_reservation_never_mapped_faults, .signal = SIGSEGV)
{
    dev_device_t *dev = open_sim(0, 0);
    dev_addr_t va;
    TEST_OK(dev_va_reserve(dev, dev->info.granularity, &va));
    *(volatile char *)(uintptr_t)va = 1;
}

Test(sim, touching_a_block_mapped_without_access_faults, .signal = SIGSEGV)
{
    dev_device_t *dev = open_sim(0, 0);
    dev_addr_t va;
    dev_block_t b;
    TEST_OK(dev_va_reserve(dev, dev->info.granularity, &va));
    TEST_OK(dev_block_create(dev, &b));
    TEST_OK(dev_map(dev, va, b));
    *(volatile char *)(uintptr_t)va = 1; /* cuMemMap without cuMemSetAccess */
}

Test(sim, a_kernel_on_an_unmapped_block_faults, .signal = SIGSEGV)
{
    dev_device_t *dev = open_sim(0, 0);
    test_run_t run = test_run_map(dev, 1);
    dev_stream_t *s;
    TEST_OK(dev_stream_create(dev, DEV_PRIORITY_NORMAL, &s));
    TEST_OK(dev_unmap(dev, run.base, run.size));
    TEST_OK(dev_fill(dev, s, run.base, 64, 1));
    TEST_OK(dev_stream_synchronize(dev, s));
}

/* Wall time of the copies enqueued by enqueue(), from enqueue to the end of
 * the last, in ns: the best of three, so one unlucky wake-up on a busy machine
 * does not decide the result. Throttling only ever makes copies slower, so a
 * backend without it is caught every time. */
typedef void (*enqueue_fn)(dev_device_t *dev, dev_stream_t *a, dev_stream_t *b, dev_addr_t d,
                           void *h, size_t n);

static double best_of_3_ms(dev_device_t *dev, enqueue_fn enqueue, size_t n, double expect_ms)
{
    test_run_t run = test_run_map(dev, 2 * n / dev->info.granularity);
    void *h = aligned_alloc(4096, 2 * n);
    cr_assert_not_null(h);
    memset(h, 1, 2 * n);
    TEST_OK(dev_host_register(dev, h, 2 * n));
    dev_stream_t *a, *b;
    TEST_OK(dev_stream_create(dev, DEV_PRIORITY_HIGH, &a));
    TEST_OK(dev_stream_create(dev, DEV_PRIORITY_HIGH, &b));
    double best = 1e30;
    for (int rep = 0; rep < 3; rep++) {
        uint64_t t0 = base_now_ns();
        enqueue(dev, a, b, run.base, h, n);
        TEST_OK(dev_stream_synchronize(dev, a));
        TEST_OK(dev_stream_synchronize(dev, b));
        double ms = (double)(base_now_ns() - t0) / 1e6;
        if (fabs(ms - expect_ms) < fabs(best - expect_ms))
            best = ms;
    }
    TEST_OK(dev_host_unregister(dev, h));
    test_run_unmap(dev, &run);
    free(h);
    return best;
}

static void one_h2d(dev_device_t *dev, dev_stream_t *a, dev_stream_t *b, dev_addr_t d, void *h,
                    size_t n)
{
    (void)b;
    TEST_OK(dev_copy_h2d(dev, a, d, h, n));
}

static void h2d_and_d2h(dev_device_t *dev, dev_stream_t *a, dev_stream_t *b, dev_addr_t d,
                        void *h, size_t n)
{
    TEST_OK(dev_copy_h2d(dev, a, d, h, n));
    TEST_OK(dev_copy_d2h(dev, b, (char *)h + n, d + n, n));
}

static void two_h2d(dev_device_t *dev, dev_stream_t *a, dev_stream_t *b, dev_addr_t d, void *h,
                    size_t n)
{
    TEST_OK(dev_copy_h2d(dev, a, d, h, n));
    TEST_OK(dev_copy_h2d(dev, b, d + n, (char *)h + n, n));
}

Test(sim, a_throttled_copy_takes_bytes_over_bandwidth)
{
    dev_device_t *dev = open_sim(0.5, 0.5);
    size_t n = 16 * BASE_MiB;
    double expect = (double)n / 0.5e9 * 1e3; /* 33.6 ms */
    double ms = best_of_3_ms(dev, one_h2d, n, expect);
    cr_assert(ms >= expect * 0.9 && ms <= expect * 1.1,
              "16 MiB at 0.5 GB/s took %.1f ms, expected %.1f ms +-10%%", ms, expect);
    dev_close(dev);
}

Test(sim, the_two_directions_overlap_and_one_direction_is_shared)
{
    dev_device_t *dev = open_sim(0.5, 0.5);
    size_t n = 8 * BASE_MiB;
    double one = (double)n / 0.5e9 * 1e3; /* 16.8 ms */
    double both = best_of_3_ms(dev, h2d_and_d2h, n, one);
    double same = best_of_3_ms(dev, two_h2d, n, 2 * one);
    cr_assert(both < 1.5 * one, "H2D and D2H together took %.1f ms; one alone takes %.1f ms",
              both, one);
    cr_assert(same > 1.8 * one, "two H2D copies took %.1f ms; they share one link (%.1f ms each)",
              same, one);
    dev_close(dev);
}

Test(sim, bad_settings_are_refused)
{
    dev_config_t base = test_config();
    base.backend = "sim";
    dev_device_t *dev = NULL;
    dev_config_t c = base;
    c.sim_granularity = 3 * BASE_MiB;
    TEST_FAILS(LMS_ERR_INVALID, dev_open(&c, &dev));
    c = base;
    c.sim_granularity = 1024;
    TEST_FAILS(LMS_ERR_INVALID, dev_open(&c, &dev));
    c = base;
    c.sim_memory = base.sim_granularity * 3 / 2;
    TEST_FAILS(LMS_ERR_INVALID, dev_open(&c, &dev));
    c = base;
    c.sim_memory = 0;
    TEST_FAILS(LMS_ERR_INVALID, dev_open(&c, &dev));
    c = base;
    c.sim_h2d_gbps = -1;
    TEST_FAILS(LMS_ERR_INVALID, dev_open(&c, &dev));
    c = base;
    c.backend = "opencl";
    TEST_FAILS(LMS_ERR_INVALID, dev_open(&c, &dev));
    cr_assert_null(dev);
}

Test(sim, a_small_granularity_works)
{
    dev_config_t cfg = test_config();
    cfg.backend = "sim";
    cfg.sim_granularity = 64 * BASE_KiB;
    cfg.sim_memory = 4 * BASE_MiB;
    dev_device_t *dev = test_open(&cfg);
    cr_assert_eq(dev->info.granularity, 64 * BASE_KiB);
    test_run_t run = test_run_map(dev, 64);
    test_run_unmap(dev, &run);
    dev_close(dev);
}
