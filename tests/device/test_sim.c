/*
 * tests/device/test_sim.c — what only the sim backend can show: a touch of
 * unmapped memory faults (on a GPU it kills the context, so it cannot be a
 * test there), link throttling is exact enough to make overlap real (and an
 * observer sees a throttled copy in its slot on the link), replacing the
 * observer waits for its calls in progress, and bad sim settings are refused.
 */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "harness.h"

static dev_device_t *open_sim(double h2d_gbps, double d2h_gbps)
{
    dev_config_t cfg = test_config();
    cfg.backend = "sim";
    cfg.sim_memory = 256 * BASE_MiB;
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
    test_expect_fault_in((void *)p, 1);
    p[0] = 2; /* a real kernel gets an illegal address here */
}

/* Host blocks (test_host_blocks): unmapped, the VA is the reservation's
 * again, whatever was behind it. */
Test(sim, touching_an_unmapped_host_block_faults, .signal = SIGSEGV)
{
    dev_device_t *dev = open_sim(0, 0);
    size_t g = dev->info.granularity;
    dev_addr_t va;
    dev_block_t b;
    TEST_OK(dev_va_reserve(dev, g, &va));
    TEST_OK(dev_host_block_create(dev, &b));
    TEST_OK(dev_map(dev, va, b));
    TEST_OK(dev_set_access_host(dev, va, g));
    volatile unsigned char *p = (volatile unsigned char *)(uintptr_t)va;
    p[g - 1] = 1;
    TEST_OK(dev_unmap(dev, va, g));
    test_expect_fault_in((void *)p, g);
    p[g - 1] = 2; /* a real kernel gets an illegal address here */
}

Test(sim, a_host_block_made_again_reads_zeros)
{
    dev_device_t *dev = open_sim(0, 0);
    size_t g = dev->info.granularity;
    dev_addr_t va;
    dev_block_t b;
    TEST_OK(dev_va_reserve(dev, g, &va));
    for (int round = 0; round < 2; round++) {
        TEST_OK(dev_host_block_create(dev, &b));
        TEST_OK(dev_map(dev, va, b));
        TEST_OK(dev_set_access_host(dev, va, g));
        unsigned char *p = (unsigned char *)(uintptr_t)va;
        for (size_t i = 0; i < g; i += 4096)
            cr_assert_eq(p[i], 0, "round %d: byte %zu of a fresh host block", round, i);
        memset(p, 0xee, g);
        TEST_OK(dev_unmap(dev, va, g));
        TEST_OK(dev_block_release(dev, b)); /* its pages go back to the host */
    }
    TEST_OK(dev_va_free(dev, va, g));
    dev_close(dev);
}

Test(sim, touching_a_reservation_never_mapped_faults, .signal = SIGSEGV)
{
    dev_device_t *dev = open_sim(0, 0);
    dev_addr_t va;
    TEST_OK(dev_va_reserve(dev, dev->info.granularity, &va));
    test_expect_fault_in((void *)(uintptr_t)va, 1);
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
    test_expect_fault_in((void *)(uintptr_t)va, 1);
    *(volatile char *)(uintptr_t)va = 1; /* cuMemMap without cuMemSetAccess */
}

Test(sim, a_kernel_on_an_unmapped_block_faults, .signal = SIGSEGV)
{
    dev_device_t *dev = open_sim(0, 0);
    test_run_t run = test_run_map(dev, 1);
    dev_stream_t *s;
    TEST_OK(dev_stream_create(dev, DEV_PRIORITY_NORMAL, &s));
    TEST_OK(dev_unmap(dev, run.base, run.size));
    test_expect_fault_in((void *)(uintptr_t)run.base, 64);
    TEST_OK(dev_fill(dev, s, run.base, 64, 1));
    TEST_OK(dev_stream_synchronize(dev, s));
}

/* Wall time of the copies enqueued by enqueue(), from enqueue to the end of
 * the last, in ms: the fastest of five. A busy machine only ever adds time
 * (wake-ups of the worker and of the waiting thread), so the fastest run is
 * the one closest to what the throttle alone costs; the copies are long
 * (> 60 ms) so that those wake-ups are small beside them. */
typedef void (*enqueue_fn)(dev_device_t *dev, dev_stream_t *a, dev_stream_t *b, dev_addr_t d,
                           void *h, size_t n);

static double fastest_of_5_ms(dev_device_t *dev, enqueue_fn enqueue, size_t n)
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
    for (int rep = 0; rep < 5; rep++) {
        uint64_t t0 = base_now_ns();
        enqueue(dev, a, b, run.base, h, n);
        TEST_OK(dev_stream_synchronize(dev, a));
        TEST_OK(dev_stream_synchronize(dev, b));
        double ms = (double)(base_now_ns() - t0) / 1e6;
        if (ms < best)
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
    dev_device_t *dev = open_sim(0.25, 0.25);
    size_t n = 32 * BASE_MiB;
    double expect = (double)n / 0.25e9 * 1e3; /* 134 ms */
    double ms = fastest_of_5_ms(dev, one_h2d, n);
    cr_assert(ms >= expect * 0.9 && ms <= expect * 1.1,
              "32 MiB at 0.25 GB/s took %.1f ms, expected %.1f ms +-10%%", ms, expect);
    dev_close(dev);
}

Test(sim, the_two_directions_overlap_and_one_direction_is_shared)
{
    dev_device_t *dev = open_sim(0.25, 0.25);
    size_t n = 16 * BASE_MiB;
    double one = (double)n / 0.25e9 * 1e3; /* 67 ms */
    double both = fastest_of_5_ms(dev, h2d_and_d2h, n);
    double same = fastest_of_5_ms(dev, two_h2d, n);
    cr_assert(both < 1.5 * one, "H2D and D2H together took %.1f ms; one alone takes %.1f ms",
              both, one);
    cr_assert(same > 1.8 * one, "two H2D copies took %.1f ms; they share one link (%.1f ms each)",
              same, one);
    dev_close(dev);
}

typedef struct spans {
    pthread_mutex_t lock;
    dev_work_t work[8];
    int n;
    atomic_int entered, left; /* slow_observer's calls begun and ended */
} spans_t;

static void record_span(void *ctx, const dev_work_t *w)
{
    spans_t *s = ctx;
    pthread_mutex_lock(&s->lock);
    if (s->n < 8)
        s->work[s->n++] = *w;
    pthread_mutex_unlock(&s->lock);
}

/* Two H2D copies of n bytes on streams a and b, observed: how much longer
 * than its slot the longer one's span was, in ns, and how far the second
 * started before the first ended (0 if not). Every span is at least its slot. */
static void observe_two_h2d(dev_device_t *dev, dev_stream_t *a, dev_stream_t *b, dev_addr_t d,
                            void *h, size_t n, uint64_t slot, uint64_t *over, uint64_t *overlap)
{
    static spans_t seen = {PTHREAD_MUTEX_INITIALIZER};
    seen.n = 0;
    TEST_OK(dev_set_observer(dev, record_span, &seen));
    two_h2d(dev, a, b, d, h, n);
    TEST_OK(dev_stream_synchronize(dev, a));
    TEST_OK(dev_stream_synchronize(dev, b));
    TEST_OK(dev_set_observer(dev, NULL, NULL));
    cr_assert_eq(seen.n, 2);
    const dev_work_t *first = &seen.work[0], *second = &seen.work[1];
    if (first->start_ns > second->start_ns)
        first = &seen.work[1], second = &seen.work[0];
    *over = 0;
    for (int i = 0; i < 2; i++) {
        uint64_t took = seen.work[i].end_ns - seen.work[i].start_ns;
        cr_assert_geq(took, slot, "a copy's span (%.2f ms) is at least its slot (%.2f ms)",
                      (double)took / 1e6, (double)slot / 1e6);
        if (took - slot > *over)
            *over = took - slot;
    }
    *overlap = second->start_ns < first->end_ns ? first->end_ns - second->start_ns : 0;
}

Test(sim, copies_sharing_a_link_are_observed_in_their_slots_one_after_the_other)
{
    dev_device_t *dev = open_sim(0.25, 0.25);
    size_t n = 4 * BASE_MiB;
    uint64_t slot = (uint64_t)((double)n / 0.25); /* ns: 16.8 ms */
    test_run_t run = test_run_map(dev, 2 * n / dev->info.granularity);
    void *h = aligned_alloc(4096, 2 * n);
    cr_assert_not_null(h);
    memset(h, 3, 2 * n);
    TEST_OK(dev_host_register(dev, h, 2 * n));
    dev_stream_t *a, *b;
    TEST_OK(dev_stream_create(dev, DEV_PRIORITY_HIGH, &a));
    TEST_OK(dev_stream_create(dev, DEV_PRIORITY_HIGH, &b));
    /* the best of 5: a loaded host may run a memmove past its slot */
    uint64_t best_over = UINT64_MAX, best_overlap = UINT64_MAX;
    for (int rep = 0; rep < 5; rep++) {
        uint64_t over, overlap;
        observe_two_h2d(dev, a, b, run.base, h, n, slot, &over, &overlap);
        best_over = over < best_over ? over : best_over;
        best_overlap = overlap < best_overlap ? overlap : best_overlap;
    }
    cr_assert_leq(best_over, slot / 5, "a copy's span is its slot on the link, %.2f ms; it was "
                  "%.2f ms longer", (double)slot / 1e6, (double)best_over / 1e6);
    cr_assert_eq(best_overlap, 0, "the second copy's span starts when the first's slot ends, not "
                 "when its stream reached it (%.2f ms before)", (double)best_overlap / 1e6);
    TEST_OK(dev_host_unregister(dev, h));
    test_run_unmap(dev, &run);
    free(h);
    dev_close(dev);
}

static void do_nothing(void *arg) { (void)arg; }

static void slow_observer(void *ctx, const dev_work_t *w)
{
    spans_t *s = ctx;
    (void)w;
    atomic_fetch_add(&s->entered, 1);
    usleep(100000);
    atomic_fetch_add(&s->left, 1);
}

Test(sim, replacing_the_observer_waits_for_its_calls_in_progress)
{
    dev_device_t *dev = open_sim(0, 0);
    dev_stream_t *s;
    TEST_OK(dev_stream_create(dev, DEV_PRIORITY_NORMAL, &s));
    static spans_t calls;
    TEST_OK(dev_set_observer(dev, slow_observer, &calls));
    TEST_OK(dev_host_func(dev, s, do_nothing, NULL));
    while (atomic_load(&calls.entered) == 0)
        usleep(1000);
    TEST_OK(dev_set_observer(dev, NULL, NULL));
    cr_assert_eq(atomic_load(&calls.left), 1, "set_observer returned while its call was running");
    TEST_OK(dev_host_func(dev, s, do_nothing, NULL));
    TEST_OK(dev_stream_synchronize(dev, s));
    cr_assert_eq(atomic_load(&calls.entered), 1, "no call after the observer was removed");
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
    double bad_gbps[] = {-1, 1e-30, 1e9, NAN, INFINITY};
    for (size_t i = 0; i < sizeof bad_gbps / sizeof *bad_gbps; i++) {
        c = base;
        c.sim_d2h_gbps = bad_gbps[i];
        TEST_FAILS(LMS_ERR_INVALID, dev_open(&c, &dev));
    }
    double bad_vmm[] = {-1, 1e9, NAN, INFINITY};
    for (size_t i = 0; i < sizeof bad_vmm / sizeof *bad_vmm; i++) {
        c = base;
        c.sim_vmm_us_per_mib = bad_vmm[i];
        TEST_FAILS(LMS_ERR_INVALID, dev_open(&c, &dev));
    }
    for (size_t i = 0; i < sizeof bad_vmm / sizeof *bad_vmm; i++) {
        c = base;
        c.sim_set_access_d2h_us_per_mib = bad_vmm[i];
        TEST_FAILS(LMS_ERR_INVALID, dev_open(&c, &dev));
    }
    c = base;
    c.backend = "opencl";
    TEST_FAILS(LMS_ERR_INVALID, dev_open(&c, &dev));
    cr_assert_null(dev);
}

Test(sim, unmap_and_set_access_take_the_modelled_host_time)
{
    dev_config_t cfg = test_config();
    cfg.backend = "sim";
    cfg.sim_memory = 64 * BASE_MiB;
    cfg.sim_vmm_us_per_mib = 1000; /* 1 ms per MiB */
    dev_device_t *dev = test_open(&cfg);
    test_run_t run = test_run_map(dev, 2); /* maps and sets access: one cost */
    size_t mib = run.size / BASE_MiB;
    uint64_t t0 = base_now_ns();
    TEST_OK(dev_unmap(dev, run.base, run.size));
    double unmap_ms = (double)(base_now_ns() - t0) / 1e6;
    for (size_t b = 0; b < run.size / dev->info.granularity; b++)
        TEST_OK(dev_map(dev, run.base + b * dev->info.granularity, run.blocks[b]));
    t0 = base_now_ns();
    TEST_OK(dev_set_access(dev, run.base, run.size));
    double access_ms = (double)(base_now_ns() - t0) / 1e6;
    /* at least the modelled time (sleeps end late, never early) */
    cr_assert_geq(unmap_ms, (double)mib, "unmap of %zu MiB took %.2f ms", mib, unmap_ms);
    cr_assert_geq(access_ms, (double)mib, "set_access of %zu MiB took %.2f ms", mib, access_ms);
    test_run_unmap(dev, &run);
    dev_close(dev);
}

/* Note [VMM beside copies] in swap/prefetch.c: on the H100 a set_access while
 * a D2H copy runs costs about 33 times an idle one; the sim models that
 * with LMS_SIM_SET_ACCESS_D2H_US_PER_MIB, and only while one runs. */
Test(sim, a_set_access_beside_a_d2h_copy_takes_its_own_modelled_time)
{
    dev_config_t cfg = test_config();
    cfg.backend = "sim";
    cfg.sim_memory = 64 * BASE_MiB;
    cfg.sim_d2h_gbps = 0.02;                 /* 4 MiB: 210 ms */
    cfg.sim_set_access_d2h_us_per_mib = 50000; /* 50 ms per MiB beside it; none idle */
    dev_device_t *dev = test_open(&cfg);
    size_t g = dev->info.granularity, n = 4 * BASE_MiB;
    test_run_t run = test_run_map(dev, (n + g - 1) / g + 1); /* the copy's, and one more */
    void *h = aligned_alloc(4096, n);
    cr_assert_not_null(h);
    TEST_OK(dev_host_register(dev, h, n));
    dev_addr_t spare = run.base + run.size - g;
    double ms[2];
    for (int beside = 0; beside < 2; beside++) {
        dev_stream_t *s;
        TEST_OK(dev_stream_create(dev, DEV_PRIORITY_HIGH, &s));
        if (beside) {
            TEST_OK(dev_copy_d2h(dev, s, h, run.base, n));
            usleep(20000); /* under way */
        }
        uint64_t t0 = base_now_ns();
        TEST_OK(dev_set_access(dev, spare, g));
        ms[beside] = (double)(base_now_ns() - t0) / 1e6;
        TEST_OK(dev_stream_synchronize(dev, s));
        TEST_OK(dev_stream_destroy(dev, s));
    }
    double expect = 50.0 * (double)g / (double)BASE_MiB;
    cr_assert_lt(ms[0], expect / 2, "idle, set_access took %.1f ms", ms[0]);
    cr_assert_geq(ms[1], expect, "beside a D2H copy, set_access of %zu bytes took %.1f ms", g,
                  ms[1]);
    TEST_OK(dev_host_unregister(dev, h));
    test_run_unmap(dev, &run);
    free(h);
    dev_close(dev);
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

static void slow_set(void *p)
{
    usleep(50000);
    *(volatile int *)p = 1;
}

/* slow_set behind the test gate: not done until the test opens it */
static void gated_set(void *p)
{
    test_gate_wait(NULL);
    *(volatile int *)p = 1;
}

Test(sim, destroying_a_stream_returns_before_its_queued_work_ends)
{
    dev_device_t *dev = open_sim(0, 0);
    dev_stream_t *s;
    static volatile int done;
    TEST_OK(dev_stream_create(dev, DEV_PRIORITY_NORMAL, &s));
    test_gate_close();
    TEST_OK(dev_host_func(dev, s, gated_set, (void *)&done));
    test_gate_watchdog_start(20000); /* should destroy wait after all */
    TEST_OK(dev_stream_destroy(dev, s));
    bool waited = done != 0;
    waited |= test_gate_watchdog_stop();
    cr_assert(!waited, "destroy did not wait, as cuStreamDestroy does not");
    dev_close(dev); /* waits for the worker */
    cr_assert_eq(done, 1);
}

/* Entries of a /proc/self directory: this process's threads or open fds. */
static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    cr_assert_not_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

Test(sim, close_gives_everything_back_to_the_os)
{
    int threads0 = count_entries("/proc/self/task"), fds0 = count_entries("/proc/self/fd");
    dev_device_t *dev = open_sim(0, 0);
    size_t g = dev->info.granularity;
    test_run_t run = test_run_map(dev, 3);
    dev_addr_t hva; /* a host block left mapped and opened, and one left unmapped */
    dev_block_t hb[2];
    TEST_OK(dev_va_reserve(dev, g, &hva));
    TEST_OK(dev_host_block_create(dev, &hb[0]));
    TEST_OK(dev_host_block_create(dev, &hb[1]));
    TEST_OK(dev_map(dev, hva, hb[0]));
    TEST_OK(dev_set_access_host(dev, hva, g));
    memset((void *)(uintptr_t)hva, 1, g);
    dev_stream_t *s1, *s2;
    dev_event_t *e;
    static volatile int done;
    TEST_OK(dev_stream_create(dev, DEV_PRIORITY_NORMAL, &s1));
    TEST_OK(dev_stream_create(dev, DEV_PRIORITY_HIGH, &s2));
    TEST_OK(dev_event_create(dev, &e));
    TEST_OK(dev_host_func(dev, s1, slow_set, (void *)&done));
    TEST_OK(dev_event_record(dev, e, s1));
    TEST_OK(dev_stream_wait_event(dev, s2, e));
    cr_assert_eq(count_entries("/proc/self/task"), threads0 + 2);
    dev_close(dev);
    cr_assert_eq(done, 1);
    /* a worker has told close it is done just before it leaves the kernel's list */
    for (int i = 0; i < 1000 && count_entries("/proc/self/task") != threads0; i++)
        usleep(1000);
    cr_assert_eq(count_entries("/proc/self/task"), threads0, "every stream worker exited");
    cr_assert_eq(count_entries("/proc/self/fd"), fds0, "the memfds are closed");
    unsigned char vec;
    cr_assert_eq(mincore((void *)(uintptr_t)run.base, g, &vec), -1, "the reservation is unmapped");
    cr_assert_eq(errno, ENOMEM);
    cr_assert_eq(mincore((void *)(uintptr_t)hva, g, &vec), -1, "so is the host block's");
    cr_assert_eq(errno, ENOMEM);
    free(run.blocks);
}
