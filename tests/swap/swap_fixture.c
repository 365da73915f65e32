/*
 * tests/swap/swap_fixture.c — the fixture and helpers that the test_swap
 * suites share (swap_fixture.h): lms started with a small explicit
 * configuration, scratch host memory freed when a test ends, and data
 * filled and checked with the test kernels. The suites are in test_swap.c,
 * test_swap_oom.c, test_swap_evicted.c, test_swap_faults.c and
 * test_swap_prefetch.c, linked into the one program test_swap.
 */
#include <stdlib.h>

#include "swap_fixture.h"

policy_usage_t test_policy_usage(void)
{
    swap_probe_t pr;
    TEST_OK(swap_probe(&pr));
    cr_assert(pr.has_policy, "lms runs with a policy");
    return pr.policy;
}

size_t chunk;

swap_config_t config(size_t host_chunks, bool faults)
{
    swap_config_t cfg;
    swap_config_from_options(&cfg);
    cfg.device = test_config();
    cfg.device.fault_injection = faults;
    cfg.device_limit = LIMIT_CHUNKS * chunk;
    cfg.host_limit = host_chunks * chunk;
    cfg.reclaim_low = chunk;
    cfg.reclaim_high = HIGH_CHUNKS * chunk;
    cfg.swap_piece = 2 * chunk; /* pipelined swaps in steps of 2 chunks: often, at this size */
    return cfg;
}

static void start(void)
{
    dev_config_t dc = test_config();
    dev_device_t *probe = test_open(&dc); /* skips when there is no device */
    chunk = probe->info.granularity;
    dev_close(probe);
    swap_config_t cfg = config(HOST_CHUNKS, false);
    TEST_OK(swap_init(&cfg));
}

/* Starts lms again with another configuration. */
void restart(size_t host_chunks, bool faults)
{
    swap_config_t cfg = config(host_chunks, faults);
    TEST_OK(lms_shutdown());
    TEST_OK(swap_init(&cfg));
}

/* Host memory for a test's arrays and images, zeroed: what a failed
 * assertion leaves behind is freed when the test ends (stop), so that
 * LeakSanitizer reports only real leaks. */
static void *scratch_list[64];

void *scratch(size_t size)
{
    for (int i = 0; i < 64; i++)
        if (scratch_list[i] == NULL) {
            scratch_list[i] = calloc(1, size ? size : 1);
            cr_assert_not_null(scratch_list[i]);
            return scratch_list[i];
        }
    cr_assert_fail("more than 64 scratch buffers");
    return NULL;
}

void unscratch(void *p)
{
    for (int i = 0; i < 64; i++)
        if (scratch_list[i] == p && p != NULL) {
            free(p);
            scratch_list[i] = NULL;
        }
}

static void stop(void)
{
    lms_shutdown();
    for (int i = 0; i < 64; i++)
        unscratch(scratch_list[i]);
}

/* Both suites of test_swap, in every one of its files, run with this fixture. */
TestSuite(swap, .init = start, .fini = stop, .timeout = 300);
TestSuite(swap_faults, .init = start, .fini = stop, .timeout = 300);

dev_addr_t addr(const void *p) { return (dev_addr_t)(uintptr_t)p; }

void *must_malloc(size_t size)
{
    void *p = NULL;
    TEST_OK(lms_malloc(&p, size, NULL));
    cr_assert_not_null(p);
    return p;
}

/* Makes [p, p+n) resident for mode on s and enqueues a fill with seed. The
 * device objects are looked up before lms_access: the kernel must be
 * enqueued before the thread's next lms call. */
void fill_on(void *p, size_t n, uint64_t seed, lms_access_mode_t mode, lms_stream_t s)
{
    dev_device_t *dev = swap_device();
    dev_stream_t *ds = swap_stream(s);
    TEST_OK(lms_access(p, n, mode, s));
    TEST_OK(dev_fill(dev, ds, addr(p), n, seed));
}

void fill(void *p, size_t n, uint64_t seed) { fill_on(p, n, seed, LMS_OVERWRITE, NULL); }

/* Enqueues a checksum of [p, p+n) on s, made resident for reading, into *out. */
void checksum_on(const void *p, size_t n, lms_stream_t s, uint64_t *out)
{
    dev_device_t *dev = swap_device();
    dev_stream_t *ds = swap_stream(s);
    TEST_OK(lms_access(p, n, LMS_READ, s));
    TEST_OK(dev_checksum(dev, ds, addr(p), n, out));
}

uint64_t read_sum(const void *p, size_t n)
{
    uint64_t sum = 0;
    checksum_on(p, n, NULL, &sum);
    TEST_OK(lms_stream_synchronize(NULL));
    return sum;
}

/* The checksum of n bytes filled with seed (remembered: tests read the same
 * data back many times, and the reference is slow under ASan). */
uint64_t fill_sum(size_t n, uint64_t seed)
{
    static __thread struct { size_t n; uint64_t seed, sum; } memo[256];
    size_t slot = (n * 31 + seed) % 256;
    if (memo[slot].n == n && memo[slot].seed == seed && n != 0)
        return memo[slot].sum;
    unsigned char *buf = malloc(n ? n : 1); /* threads call this too: not scratch */
    cr_assert_not_null(buf);
    dev_fill_ref(buf, n, seed);
    uint64_t sum = dev_checksum_ref(buf, n);
    free(buf);
    memo[slot].n = n;
    memo[slot].seed = seed;
    memo[slot].sum = sum;
    return sum;
}

/* What holds whatever the state: byte counts are whole chunks, residency
 * stays within the limits. */
void check_invariants(const lms_stats_t *st)
{
    cr_assert_eq(st->bytes_h2d, st->fetches * chunk, "h2d %llu bytes for %llu fetches",
                 (unsigned long long)st->bytes_h2d, (unsigned long long)st->fetches);
    cr_assert_eq(st->bytes_d2h, st->evictions * chunk, "d2h %llu bytes for %llu evictions",
                 (unsigned long long)st->bytes_d2h, (unsigned long long)st->evictions);
    cr_assert_leq(st->resident_bytes, st->device_limit);
    cr_assert_leq(st->peak_resident_bytes, st->device_limit);
    cr_assert_geq(st->peak_resident_bytes, st->resident_bytes);
    cr_assert_leq(st->pinned_bytes, st->resident_bytes);
    cr_assert_leq(st->host_bytes, st->host_limit);
    cr_assert_leq(st->allocated_bytes, st->device_limit + st->host_limit);
}

/* n allocations of one chunk each, filled with seeds base+i. */
void **chunks_filled(size_t n, uint64_t base)
{
    void **p = scratch(n * sizeof *p);
    for (size_t i = 0; i < n; i++) {
        p[i] = must_malloc(chunk);
        fill(p[i], chunk, base + i);
    }
    TEST_OK(lms_stream_synchronize(NULL));
    return p;
}

void free_all(void **p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        TEST_OK(lms_free(p[i], NULL));
    unscratch(p);
}

/* Chunks allocations may occupy: the device limit plus the host limit, less
 * the room swapping needs to turn (the reclaim high watermark; lms.h). */
size_t room_chunks(void)
{
    lms_stats_t st = test_stats();
    return (st.device_limit + st.host_limit) / chunk - HIGH_CHUNKS;
}

/* Everything was freed: the whole room can be allocated again.
 * (allocated_bytes need not be 0: alloc/ keeps one empty slab per size
 * class, and gives it back when room runs out.) */
void all_room_is_free_again(void)
{
    size_t n = room_chunks();
    void **p = scratch(n * sizeof *p);
    for (size_t i = 0; i < n; i++) {
        lms_status_t s = lms_malloc(&p[i], chunk, NULL);
        cr_assert_eq(s, LMS_OK, "chunk %zu of %zu: %s", i, n, lms_last_error());
    }
    void *q = NULL;
    TEST_FAILS(LMS_ERR_OUT_OF_MEMORY, lms_malloc(&q, chunk, NULL));
    free_all(p, n);
}

/* Driver failures (test_swap_faults.c): op fails with `probability`, or its calls
 * first .. first+count-1 fail, with INJECTED. */
void plan(dev_op_t op, uint64_t first, uint64_t count, double probability, uint64_t seed)
{
    dev_fault_plan_t pl = {.op = op, .first = first, .count = count, .probability = probability,
                           .seed = seed, .status = INJECTED};
    TEST_OK(dev_fault_set(swap_device(), &pl));
}

void no_faults(void) { plan(DEV_OP_COUNT, 0, 0, 0, 0); }

/* x on the host, and the device otherwise free: LIMIT_CHUNKS pinned chunks
 * push x out, then they are unpinned and freed. */
void *evicted_chunk(uint64_t seed)
{
    void *x = must_malloc(chunk);
    fill(x, chunk, seed);
    void **b = chunks_filled(LIMIT_CHUNKS, 500);
    for (int i = 0; i < LIMIT_CHUNKS; i++)
        TEST_OK(lms_pin(b[i], chunk));
    for (int i = 0; i < LIMIT_CHUNKS; i++)
        TEST_OK(lms_unpin(b[i], chunk));
    free_all(b, LIMIT_CHUNKS);
    test_settled_stats();
    return x;
}

