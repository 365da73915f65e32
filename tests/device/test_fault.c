/*
 * tests/device/test_fault.c — every op, failed on purpose by the fault layer,
 * returns the error to its caller, changes nothing and leaks nothing; the
 * same call then succeeds. Registered for sim and gpu.
 *
 * One scenario uses every op of the table. It runs with a plan that fails one
 * op's first call (once per op), and with random failures of every op; each
 * step retries a failed call, so a call that failed but changed something
 * (mapped half a run, kept a block) shows up as the retry's LMS_ERR_INVALID or
 * as memory missing at the end.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#include <criterion/parameterized.h>

#define INJECTED LMS_ERR_DEVICE

typedef struct scenario {
    dev_device_t *dev;
    uint64_t failures; /* failed calls seen by the scenario */
} scenario_t;

/* Calls expr until it succeeds; every failure must be an injected one. */
#define RETRY(sc, expr)                                                                      \
    do {                                                                                     \
        lms_status_t st_;                                                                    \
        for (int tries_ = 0; (st_ = (expr)) != LMS_OK; tries_++) {                           \
            cr_assert_eq(st_, INJECTED, "%s -> %s: %s", #expr, lms_status_str(st_),          \
                         lms_last_error());                                                  \
            cr_assert(strstr(lms_last_error(), "injected") != NULL, "%s", lms_last_error()); \
            cr_assert(tries_ < 1000, "%s never succeeded", #expr);                           \
            (sc)->failures++;                                                                \
        }                                                                                    \
    } while (0)

static void mark_ran(void *p) { ++*(int *)p; }

static void count_work(void *ctx, const dev_work_t *w)
{
    (void)w;
    atomic_fetch_add((atomic_int *)ctx, 1);
}

/* Where the device has host blocks: one, mapped and opened to the CPU, takes
 * the device's first g bytes by a D2H copy into its VA (the CPU sees them),
 * and gives 64 bytes the CPU wrote back by an H2D copy out of it. */
static void host_block_round_trip(scenario_t *sc, dev_stream_t *s, dev_addr_t va,
                                  unsigned char *host)
{
    dev_device_t *dev = sc->dev;
    size_t g = dev->info.granularity;
    dev_addr_t hva;
    dev_block_t hb;
    RETRY(sc, dev_host_block_create(dev, &hb));
    RETRY(sc, dev_va_reserve(dev, g, &hva));
    RETRY(sc, dev_map(dev, hva, hb));
    RETRY(sc, dev_set_access_host(dev, hva, g));
    unsigned char *hp = (unsigned char *)(uintptr_t)hva;
    RETRY(sc, dev_copy_d2h(dev, s, hp, va, g));
    RETRY(sc, dev_stream_synchronize(dev, s));
    cr_assert(memcmp(hp, host, g) == 0, "the D2H copy into the host block arrived");
    memset(hp, 0x5a, 64);
    RETRY(sc, dev_copy_h2d(dev, s, va, hp, 64));
    RETRY(sc, dev_copy_d2h(dev, s, host, va, 64));
    RETRY(sc, dev_stream_synchronize(dev, s));
    cr_assert(memcmp(host, hp, 64) == 0, "the H2D copy out of the host block arrived");
    RETRY(sc, dev_unmap(dev, hva, g));
    RETRY(sc, dev_block_release(dev, hb));
    RETRY(sc, dev_va_free(dev, hva, g));
}

static void run_scenario(scenario_t *sc)
{
    dev_device_t *dev = sc->dev;
    size_t g = dev->info.granularity, free0, total, free1;
    RETRY(sc, dev_mem_info(dev, &free0, &total));

    dev_addr_t va;
    dev_block_t b[2];
    RETRY(sc, dev_va_reserve(dev, 2 * g, &va));
    RETRY(sc, dev_block_create(dev, &b[0]));
    RETRY(sc, dev_block_create(dev, &b[1]));
    RETRY(sc, dev_map(dev, va, b[0]));
    RETRY(sc, dev_map(dev, va + g, b[1]));
    RETRY(sc, dev_set_access(dev, va, 2 * g));

    size_t n = g + 4096;
    unsigned char *host = aligned_alloc(4096, 2 * n);
    cr_assert_not_null(host);
    dev_fill_ref(host, n, 3);
    RETRY(sc, dev_host_register(dev, host, 2 * n));

    dev_stream_t *s1, *s2, *s3;
    dev_event_t *e;
    RETRY(sc, dev_stream_create(dev, DEV_PRIORITY_HIGH, &s1));
    RETRY(sc, dev_stream_create(dev, DEV_PRIORITY_NORMAL, &s2));
    RETRY(sc, dev_stream_adopt(dev, 0x1 /* CU_STREAM_LEGACY */, &s3));
    RETRY(sc, dev_event_create(dev, &e));
    static atomic_int reported;
    atomic_store(&reported, 0);
    RETRY(sc, dev_set_observer(dev, count_work, &reported));

    /* s1: upload, then a kernel; s2 waits for s1 and reads back */
    uint64_t sum = 0;
    RETRY(sc, dev_copy_h2d(dev, s1, va, host, n));
    RETRY(sc, dev_checksum(dev, s1, va, n, &sum));
    RETRY(sc, dev_fill(dev, s1, va + n, 2 * g - n, 11));
    RETRY(sc, dev_axpy(dev, s1, 16, 2.f, va, va + 2 * g - 64));
    dev_kernel_args_t colsum = {DEV_KERNEL_COLSUM, {va, va + 2 * g - 256}, .m = 2, .n = 4};
    RETRY(sc, dev_kernel(dev, s1, &colsum));
    RETRY(sc, dev_event_record(dev, e, s1));
    RETRY(sc, dev_stream_wait_event(dev, s2, e));
    RETRY(sc, dev_copy_d2d(dev, s2, va + 2 * g - 128, va, 64));
    RETRY(sc, dev_stream_wait_event(dev, s3, e));
    RETRY(sc, dev_copy_d2d(dev, s3, va + 2 * g - 192, va, 64));
    RETRY(sc, dev_copy_d2h(dev, s2, host + n, va, n));
    int ran = 0;
    RETRY(sc, dev_host_func(dev, s2, mark_ran, &ran));
    RETRY(sc, dev_event_synchronize(dev, e));
    lms_status_t q;
    while ((q = dev_event_query(dev, e)) != LMS_OK) {
        cr_assert(q == INJECTED || q == LMS_NOT_READY, "%s", lms_last_error());
        sc->failures += q == INJECTED;
    }
    RETRY(sc, dev_stream_synchronize(dev, s2));
    RETRY(sc, dev_stream_synchronize(dev, s3));
    cr_assert_eq(ran, 1, "the host function ran once");
    RETRY(sc, dev_set_observer(dev, NULL, NULL)); /* returns once all was reported */
    cr_assert_eq(atomic_load(&reported), 9, "each piece of work that was enqueued was reported "
                                            "once, and none that failed");

    cr_assert(memcmp(host, host + n, n) == 0, "the data made the round trip intact");
    cr_assert_eq(sum, dev_checksum_ref(host, n));
    if (dev->info.host_blocks)
        host_block_round_trip(sc, s1, va, host);

    RETRY(sc, dev_event_destroy(dev, e));
    RETRY(sc, dev_stream_destroy(dev, s3));
    RETRY(sc, dev_stream_destroy(dev, s2));
    RETRY(sc, dev_stream_destroy(dev, s1));
    RETRY(sc, dev_host_unregister(dev, host));
    RETRY(sc, dev_unmap(dev, va, 2 * g));
    RETRY(sc, dev_block_release(dev, b[1]));
    RETRY(sc, dev_block_release(dev, b[0]));
    RETRY(sc, dev_va_free(dev, va, 2 * g));
    free(host);

    dev_live_t live;
    dev_live(dev, &live);
    cr_assert_eq(live.reservations + live.blocks + live.mapped_blocks + live.host_ranges +
                     live.streams + live.events + live.host_blocks + live.mapped_host_blocks,
                 0, "nothing is left alive");
    RETRY(sc, dev_mem_info(dev, &free1, &total));
    if (test_is_sim(dev))
        cr_assert_eq(free1, free0, "every block went back to the device");
}

static dev_device_t *open_faulty(void)
{
    dev_config_t cfg = test_config();
    cfg.fault_injection = true;
    dev_device_t *dev = test_open(&cfg);
    if (!dev->info.has_kernels)
        cr_skip_test("the test kernels are not built (no nvcc)");
    return dev;
}

TestSuite(fault);

Test(fault, the_scenario_passes_without_faults)
{
    scenario_t sc = {open_faulty()};
    run_scenario(&sc);
    cr_assert_eq(sc.failures, 0);
    cr_assert_eq(dev_fault_injected(sc.dev), 0);
    uint64_t host = sc.dev->info.host_blocks;
    cr_assert(dev_fault_calls(sc.dev, DEV_OP_map) == 2 + host);
    cr_assert(dev_fault_calls(sc.dev, DEV_OP_host_block_create) == host);
    cr_assert(dev_fault_calls(sc.dev, DEV_OP_set_access_host) == host);
    dev_close(sc.dev);
}

ParameterizedTestParameters(fault, each_op_fails_cleanly)
{
    static dev_op_t ops[DEV_OP_COUNT];
    for (int i = 0; i < DEV_OP_COUNT; i++)
        ops[i] = (dev_op_t)i;
    return cr_make_param_array(dev_op_t, ops, DEV_OP_COUNT);
}

ParameterizedTest(dev_op_t *op, fault, each_op_fails_cleanly)
{
    scenario_t sc = {open_faulty()};
    if ((*op == DEV_OP_host_block_create || *op == DEV_OP_set_access_host) &&
        !sc.dev->info.host_blocks)
        cr_skip_test("%s: this device has no host blocks", dev_op_name(*op));
    dev_fault_plan_t plan = {.op = *op, .first = 1, .count = 1};
    TEST_OK(dev_fault_set(sc.dev, &plan));
    run_scenario(&sc);
    cr_assert_eq(dev_fault_injected(sc.dev), 1, "%s was called and failed once",
                 dev_op_name(*op));
    cr_assert_eq(sc.failures, 1, "the caller saw the failure of %s", dev_op_name(*op));
    dev_close(sc.dev);
}

Test(fault, random_faults_in_every_op_lose_nothing)
{
    for (uint64_t seed = 1; seed <= 8; seed++) {
        scenario_t sc = {open_faulty()};
        dev_fault_plan_t plan = {.op = DEV_OP_COUNT, .probability = 0.2, .seed = seed};
        TEST_OK(dev_fault_set(sc.dev, &plan));
        run_scenario(&sc);
        cr_assert_eq(sc.failures, dev_fault_injected(sc.dev), "seed %llu",
                     (unsigned long long)seed);
        cr_assert(sc.failures > 0, "seed %llu injected something", (unsigned long long)seed);
        dev_close(sc.dev);
    }
}

Test(fault, a_later_call_fails_when_asked)
{
    scenario_t sc = {open_faulty()};
    dev_fault_plan_t plan = {.op = DEV_OP_block_create, .first = 2, .count = 1,
                             .status = LMS_ERR_OUT_OF_MEMORY};
    TEST_OK(dev_fault_set(sc.dev, &plan));
    dev_block_t b1, b2;
    TEST_OK(dev_block_create(sc.dev, &b1));
    TEST_FAILS(LMS_ERR_OUT_OF_MEMORY, dev_block_create(sc.dev, &b2));
    TEST_OK(dev_block_create(sc.dev, &b2));
    cr_assert_eq(dev_fault_calls(sc.dev, DEV_OP_block_create), 3);
    dev_close(sc.dev);
}

Test(fault, plans_need_a_fault_layer_and_sane_values)
{
    dev_device_t *plain = test_open_default();
    dev_fault_plan_t plan = {.op = DEV_OP_map, .first = 1, .count = 1};
    TEST_FAILS(LMS_ERR_INVALID, dev_fault_set(plain, &plan));
    dev_close(plain);
    scenario_t sc = {open_faulty()};
    plan.probability = 1.5;
    TEST_FAILS(LMS_ERR_INVALID, dev_fault_set(sc.dev, &plan));
    plan.probability = 0;
    plan.op = (dev_op_t)(DEV_OP_COUNT + 1);
    TEST_FAILS(LMS_ERR_INVALID, dev_fault_set(sc.dev, &plan));
    TEST_FAILS(LMS_ERR_INVALID, dev_fault_set(sc.dev, NULL));
    plan = (dev_fault_plan_t){.op = DEV_OP_COUNT, .first = 1, .count = 1};
    TEST_FAILS(LMS_ERR_INVALID, dev_fault_set(sc.dev, &plan)); /* never fires */
    plan = (dev_fault_plan_t){.op = DEV_OP_map, .first = 1, .count = 1, .status = LMS_NOT_READY};
    TEST_FAILS(LMS_ERR_INVALID, dev_fault_set(sc.dev, &plan));
    plan = (dev_fault_plan_t){.op = DEV_OP_map, .first = 1, .count = 1,
                              .also = 1ull << DEV_OP_unmap}; /* `also` needs a probability */
    TEST_FAILS(LMS_ERR_INVALID, dev_fault_set(sc.dev, &plan));
    plan = (dev_fault_plan_t){.op = DEV_OP_map, .probability = 1, .also = 1ull << DEV_OP_COUNT};
    TEST_FAILS(LMS_ERR_INVALID, dev_fault_set(sc.dev, &plan));
    dev_close(sc.dev);
}

Test(fault, also_fails_the_ops_it_names_and_no_other)
{
    scenario_t sc = {open_faulty()};
    dev_fault_plan_t plan = {.op = DEV_OP_event_record, .probability = 1,
                             .also = 1ull << DEV_OP_stream_synchronize};
    TEST_OK(dev_fault_set(sc.dev, &plan));
    dev_stream_t *s;
    dev_event_t *e;
    TEST_OK(dev_stream_create(sc.dev, DEV_PRIORITY_NORMAL, &s));
    TEST_OK(dev_event_create(sc.dev, &e));
    TEST_FAILS(INJECTED, dev_event_record(sc.dev, e, s));
    TEST_FAILS(INJECTED, dev_stream_synchronize(sc.dev, s));
    cr_assert_eq(dev_fault_injected(sc.dev), 2);
    plan = (dev_fault_plan_t){0};
    TEST_OK(dev_fault_set(sc.dev, &plan));
    TEST_OK(dev_event_record(sc.dev, e, s));
    TEST_OK(dev_stream_synchronize(sc.dev, s));
    TEST_OK(dev_event_destroy(sc.dev, e));
    TEST_OK(dev_stream_destroy(sc.dev, s));
    dev_close(sc.dev);
}

Test(fault, a_plan_given_at_open_is_in_force_from_the_first_call)
{
    dev_fault_plan_t plan = {.op = DEV_OP_block_create, .first = 1, .count = 1};
    dev_config_t cfg = test_config();
    cfg.fault_injection = true;
    cfg.fault_plan = &plan;
    dev_device_t *dev = test_open(&cfg);
    dev_block_t b;
    TEST_FAILS(INJECTED, dev_block_create(dev, &b));
    TEST_OK(dev_block_create(dev, &b));
    cr_assert_eq(dev_fault_calls(dev, DEV_OP_block_create), 2);
    TEST_OK(dev_block_release(dev, b));
    dev_close(dev);
    /* a plan with no fault layer, or one dev_fault_set refuses: no device */
    dev_device_t *none = (dev_device_t *)1;
    cfg.fault_injection = false;
    TEST_FAILS(LMS_ERR_INVALID, dev_open(&cfg, &none));
    cr_assert_eq(none, (dev_device_t *)1, "no device is handed out");
    cfg.fault_injection = true;
    plan.probability = 2;
    TEST_FAILS(LMS_ERR_INVALID, dev_open(&cfg, &none));
    cr_assert_eq(none, (dev_device_t *)1);
}

Test(fault, closing_with_a_plan_still_set_releases_everything)
{
    scenario_t sc = {open_faulty()};
    dev_device_t *dev = sc.dev;
    size_t g = dev->info.granularity;
    dev_addr_t va;
    dev_block_t b;
    dev_stream_t *s;
    TEST_OK(dev_va_reserve(dev, g, &va));
    TEST_OK(dev_block_create(dev, &b));
    TEST_OK(dev_map(dev, va, b));
    TEST_OK(dev_stream_create(dev, DEV_PRIORITY_NORMAL, &s));
    dev_fault_plan_t all = {.op = DEV_OP_COUNT, .probability = 1};
    TEST_OK(dev_fault_set(dev, &all));
    TEST_FAILS(INJECTED, dev_unmap(dev, va, g));
    dev_close(dev); /* the sanitizer build sees a leak or a live worker if it failed */
}
