/*
 * tests/swap/test_hostpool.c — the host pool (swap/hostpool.h): extents lie
 * page-aligned inside one registration, never overlap and keep what is
 * written to them; freed memory is reused; the limit holds exactly; the pool
 * grows only when told to; a failing registration reaches the caller and
 * leaves nothing committed; destroy unregisters and unmaps everything; pages
 * sit on the NUMA node asked for. Registered for sim and gpu.
 *
 * A pool of host blocks (hostpool_config_t.blocks; skipped where the device
 * has none) hands out one-chunk slots, lowest first, whose block maps at
 * another VA with the same bytes; it keeps the limit and the accounting,
 * refuses other sizes and addresses, loses nothing when its growth fails,
 * and leaves no host block behind at destroy.
 *
 * The pool is given a device that wraps the run's device and records every
 * host_register and host_unregister (the recorder below), so that a test sees
 * the registrations the pool made.
 */
#include <errno.h>
#include <inttypes.h>
#include <numa.h>
#include <numaif.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <lms_jemalloc.h>

#include "harness.h"
#include "swap/hostpool.h"

#define MiB BASE_MiB

/* ---- the recorder ------------------------------------------------------------- */

typedef struct range {
    char *p;
    size_t n;
} range_t;

#define MAX_RANGES 4096

static dev_device_t *real;    /* the run's device */
static dev_device_t recorder; /* the same device, with host_register recorded */
static dev_ops_t recorder_ops;
static range_t ranges[MAX_RANGES]; /* registered now */
static size_t nranges;
static range_t last_try; /* the last host_register asked for, whether it failed or not */
static hostpool_t *pool;
static size_t page;

static lms_status_t record_register(void *self, void *p, size_t n)
{
    last_try = (range_t){p, n};
    lms_status_t st = real->ops->host_register(self, p, n);
    if (st == LMS_OK && nranges < MAX_RANGES)
        ranges[nranges++] = (range_t){p, n};
    return st;
}

static lms_status_t record_unregister(void *self, void *p)
{
    lms_status_t st = real->ops->host_unregister(self, p);
    for (size_t i = 0; st == LMS_OK && i < nranges; i++)
        if (ranges[i].p == p) {
            ranges[i] = ranges[--nranges];
            break;
        }
    return st;
}

static void open_device(bool faults)
{
    dev_config_t cfg = test_config();
    cfg.fault_injection = faults;
    real = test_open(&cfg);
    recorder = *real;
    recorder_ops = *real->ops;
    recorder_ops.host_register = record_register;
    recorder_ops.host_unregister = record_unregister;
    recorder.ops = &recorder_ops;
    nranges = 0;
    last_try = (range_t){NULL, 0};
    page = (size_t)sysconf(_SC_PAGESIZE);
}

static hostpool_config_t pool_config(size_t limit, size_t piece, int node)
{
    return (hostpool_config_t){.dev = &recorder, .limit = limit, .piece = piece, .numa_node = node};
}

/* The run's device with faults off, and a pool of `limit` in `piece`s. */
static void open_pool(size_t limit, size_t piece)
{
    open_device(false);
    hostpool_config_t hc = pool_config(limit, piece, -1);
    TEST_OK(hostpool_create(&hc, &pool));
}

static void close_all(void)
{
    hostpool_destroy(pool);
    pool = NULL;
    dev_close(real);
    real = NULL;
}

TestSuite(hostpool, .fini = close_all);

/* ---- helpers ------------------------------------------------------------------------ */

static hostpool_usage_t usage(void)
{
    hostpool_usage_t u;
    hostpool_usage(pool, &u);
    return u;
}

static size_t host_ranges(void)
{
    dev_live_t live;
    dev_live(real, &live);
    return live.host_ranges;
}

/* The registration holding all of [p, p+n), or NULL. */
static const range_t *registration_of(const void *p, size_t n)
{
    const char *c = p;
    for (size_t i = 0; i < nranges; i++)
        if (c >= ranges[i].p && c + n <= ranges[i].p + ranges[i].n)
            return &ranges[i];
    return NULL;
}

/* No registration ends where another starts: extents with contiguous
 * addresses, which swap/ copies as one, are then in one registration. */
static void assert_registrations_apart(void)
{
    for (size_t i = 0; i < nranges; i++)
        for (size_t j = 0; j < nranges; j++)
            cr_assert_neq(ranges[i].p + ranges[i].n, ranges[j].p,
                          "registrations [%p, +%zu) and [%p, +%zu) touch", (void *)ranges[i].p,
                          ranges[i].n, (void *)ranges[j].p, ranges[j].n);
}

static size_t registered_bytes(void)
{
    size_t sum = 0;
    for (size_t i = 0; i < nranges; i++)
        sum += ranges[i].n;
    return sum;
}

static void *alloc_ok(size_t bytes, bool may_grow)
{
    void *p = NULL;
    TEST_OK(hostpool_alloc(pool, bytes, may_grow, &p));
    cr_assert_eq((uintptr_t)p % page, 0, "extent %p of %zu bytes is not page-aligned", p, bytes);
    cr_assert_not_null(registration_of(p, bytes),
                       "extent [%p, +%zu) is not inside one registered range", p, bytes);
    return p;
}

/* The pool bytes an extent of `usable` bytes occupies: jemalloc built with
 * cache_oblivious adds a page to each large one (Note [Page padding] in
 * swap/hostpool.c). */
static size_t occupies(size_t usable)
{
    bool cache_oblivious;
    size_t je_page, large_min, len = sizeof cache_oblivious, plen = sizeof je_page,
                               llen = sizeof large_min;
    cr_assert_eq(lms_je_mallctl("opt.cache_oblivious", &cache_oblivious, &len, NULL, 0), 0);
    cr_assert_eq(lms_je_mallctl("arenas.page", &je_page, &plen, NULL, 0), 0);
    cr_assert_eq(lms_je_mallctl("arenas.lextent.0.size", &large_min, &llen, NULL, 0), 0);
    return usable + (cache_oblivious && usable >= large_min ? je_page : 0);
}

static void fill(void *p, size_t n, uint64_t seed) { dev_fill_ref(p, n, seed); }

/* Asserts [p, p+n) still holds fill(seed); the first and last pages and
 * every 64th word in between, which finds an overlap or a lost page. */
static void check_filled(const void *p, size_t n, uint64_t seed)
{
    const uint64_t *w = p;
    size_t words = n / 8, edge = page / 8;
    for (size_t j = 0; j < words; j = (j < edge || j + edge >= words) ? j + 1 : j + 64)
        cr_assert_eq(w[j], dev_mix64(seed + j), "extent %p (%zu bytes) lost word %zu", p, n, j);
}

static uint64_t rng_state;
static uint64_t rnd(uint64_t n) { return dev_mix64(rng_state++) % n; }

static void assert_out_of_limit(lms_status_t st)
{
    cr_assert_eq(st, LMS_ERR_OUT_OF_MEMORY, "got %s: %s", lms_status_str(st), lms_last_error());
    cr_assert(strstr(lms_last_error(), "LMS_HOST_LIMIT") != NULL, "message: %s", lms_last_error());
}

/* mincore over [p, p+n): the pages resident, or -1 (errno) if it is unmapped. */
static long resident_pages(const void *p, size_t n)
{
    static unsigned char vec[65536];
    size_t pages = n / page;
    cr_assert_leq(pages, sizeof vec);
    if (mincore((void *)p, n, vec) != 0)
        return -1;
    long resident = 0;
    for (size_t i = 0; i < pages; i++)
        resident += vec[i] & 1;
    return resident;
}

/* Copies [src, src+n) to the device and back into dst (n whole blocks). */
static void through_the_device(const void *src, void *dst, size_t n)
{
    test_run_t run = test_run_map(real, n / real->info.granularity);
    dev_stream_t *s;
    TEST_OK(dev_stream_create(real, DEV_PRIORITY_HIGH, &s));
    TEST_OK(dev_copy_h2d(real, s, run.base, src, n));
    TEST_OK(dev_copy_d2h(real, s, dst, run.base, n));
    TEST_OK(dev_stream_synchronize(real, s));
    TEST_OK(dev_stream_destroy(real, s));
    test_run_unmap(real, &run);
}

/* ---- placement ----------------------------------------------------------------------- */

Test(hostpool, extents_are_page_aligned_and_inside_one_registration)
{
    open_pool(64 * MiB, 8 * MiB);
    size_t sizes[] = {page, 2 * MiB, 3 * page, 6 * MiB, 16 * page, 4 * MiB, 2 * MiB, 8 * MiB};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        size_t n = hostpool_usable(pool, sizes[i]);
        void *p = alloc_ok(sizes[i], true);
        fill(p, n, i);
    }
    hostpool_usage_t u = usage();
    cr_assert_eq(u.registered, registered_bytes());
    cr_assert_eq(host_ranges(), nranges);
    for (size_t i = 0; i < nranges; i++) {
        cr_assert_eq((uintptr_t)ranges[i].p % page, 0);
        cr_assert_eq(ranges[i].n % (8 * MiB), 0, "a registration of %zu bytes is not whole pieces",
                     ranges[i].n);
    }
    cr_assert_geq(nranges, 2);
    assert_registrations_apart();
}

Test(hostpool, distinct_extents_never_overlap_and_keep_their_contents)
{
    open_pool(256 * MiB, 32 * MiB);
    enum { LIVE = 48 };
    struct {
        char *p;
        size_t n;
        uint64_t seed;
    } live[LIVE];
    size_t nlive = 0, live_bytes = 0;
    rng_state = 42;
    for (uint64_t step = 0; step < 600; step++) {
        if (nlive == LIVE || live_bytes > 128 * MiB || (nlive > 0 && rnd(3) == 0)) {
            size_t i = rnd(nlive);
            check_filled(live[i].p, live[i].n, live[i].seed);
            hostpool_free(pool, live[i].p);
            live_bytes -= live[i].n;
            live[i] = live[--nlive];
            continue;
        }
        size_t bytes = rnd(2) ? (1 + rnd(4)) * 2 * MiB : (1 + rnd(300)) * page;
        size_t n = hostpool_usable(pool, bytes);
        char *p = alloc_ok(bytes, true);
        for (size_t i = 0; i < nlive; i++)
            cr_assert(p + n <= live[i].p || live[i].p + live[i].n <= p,
                      "[%p, +%zu) overlaps the live extent [%p, +%zu)", (void *)p, n,
                      (void *)live[i].p, live[i].n);
        fill(p, n, step);
        live[nlive++] = (typeof(live[0])){p, n, step};
        live_bytes += n;
        cr_assert_eq(usage().allocated, live_bytes);
    }
    for (size_t i = 0; i < nlive; i++)
        check_filled(live[i].p, live[i].n, live[i].seed);
}

Test(hostpool, usable_is_the_size_class)
{
    open_pool(64 * MiB, 8 * MiB);
    cr_assert_eq(hostpool_usable(pool, page), page);
    cr_assert_eq(hostpool_usable(pool, 2 * MiB), 2 * MiB);
    cr_assert_eq(hostpool_usable(pool, 6 * MiB), 6 * MiB);
    cr_assert_eq(hostpool_usable(pool, 18 * MiB), 20 * MiB); /* 16, 20, 24, 28, 32 MiB */
    void *p = alloc_ok(18 * MiB, true);
    cr_assert_eq(usage().allocated, 20 * MiB);
    hostpool_free(pool, p);
    cr_assert_eq(usage().allocated, 0);
}

Test(hostpool, an_extent_larger_than_a_piece_gets_one_registration)
{
    open_pool(64 * MiB, 4 * MiB);
    alloc_ok(2 * MiB, true);
    cr_assert_eq(nranges, 1);
    char *big = alloc_ok(10 * MiB, true); /* inside one range: alloc_ok checks */
    cr_assert_eq(nranges, 2);
    cr_assert_eq(registration_of(big, 10 * MiB)->n, 12 * MiB);
    assert_registrations_apart();
    cr_assert_eq(usage().registered, 16 * MiB);
    /* the tails of both registrations still serve, without growing */
    alloc_ok(MiB, false);
    alloc_ok(MiB, false);
    cr_assert_eq(nranges, 2);
}

Test(hostpool, copies_between_extents_and_the_device_work)
{
    open_pool(32 * MiB, 8 * MiB);
    size_t g = real->info.granularity, n = 2 * g;
    char *src = alloc_ok(n, true), *dst = alloc_ok(n, true);
    fill(src, n, 7);
    memset(dst, 0, n);
    through_the_device(src, dst, n);
    cr_assert_eq(memcmp(src, dst, n), 0, "the round trip through the device changed the data");
}

/* ---- reuse ----------------------------------------------------------------------------- */

Test(hostpool, freed_memory_is_reused)
{
    open_pool(1024 * MiB, 16 * MiB);
    enum { LIVE = 8 };
    void *live[LIVE];
    size_t size[LIVE], nlive = 0, live_bytes = 0, peak = 0;
    rng_state = 7;
    for (int step = 0; step < 3000; step++) {
        if (nlive == LIVE || (nlive > 0 && rnd(2) == 0)) {
            size_t i = rnd(nlive);
            hostpool_free(pool, live[i]);
            live_bytes -= size[i];
            live[i] = live[--nlive];
            size[i] = size[nlive];
        } else {
            size_t bytes = rnd(2) ? (1 + rnd(4)) * 2 * MiB : (1 + rnd(512)) * page;
            live[nlive] = alloc_ok(bytes, true);
            size[nlive] = hostpool_usable(pool, bytes);
            live_bytes += size[nlive++];
            peak = live_bytes > peak ? live_bytes : peak;
        }
        cr_assert_eq(usage().allocated, live_bytes);
    }
    /* 3000 steps allocate gigabytes; the pool holds a small multiple of the
     * peak (not less: an extent needs a free run inside one registration) */
    cr_assert_leq(usage().registered, 4 * peak, "registered %zu for a peak of %zu",
                  usage().registered, peak);
    while (nlive > 0)
        hostpool_free(pool, live[--nlive]);
    cr_assert_eq(usage().allocated, 0);
}

Test(hostpool, a_freed_large_extent_serves_small_ones_without_growing)
{
    open_pool(16 * MiB, 16 * MiB);
    size_t big_size = occupies(16 * MiB) <= 16 * MiB ? 16 * MiB : 14 * MiB;
    void *big = alloc_ok(big_size, true), *p;
    while (hostpool_alloc(pool, page, false, &p) == LMS_OK) /* the rest of the piece */
        continue;
    hostpool_free(pool, big);
    /* jemalloc splits a free extent in hand only for requests at least 1/64
     * of its size; the pool must still find the room for smaller ones */
    for (int i = 0; i < 16; i++)
        alloc_ok(page, false);
    alloc_ok(8 * MiB, false);
    for (int i = 0; i < 2; i++)
        alloc_ok(2 * MiB, false);
    cr_assert_eq(usage().registered, 16 * MiB);
}

Test(hostpool, free_memory_never_merges_across_registrations)
{
    open_pool(16 * MiB, 8 * MiB);
    TEST_OK(hostpool_reserve(pool, 8 * MiB));
    TEST_OK(hostpool_reserve(pool, 16 * MiB)); /* 8 MiB more: a second registration */
    cr_assert_eq(nranges, 2);
    /* every page of both registrations in an extent, then all free again:
     * jemalloc sees the free pages on both sides of the boundary */
    size_t n = 16 * MiB / page, got = 0;
    void **ext = calloc(n, sizeof *ext);
    cr_assert_not_null(ext);
    while (got < n && hostpool_alloc(pool, page, false, &ext[got]) == LMS_OK)
        got++;
    cr_assert_eq(got, n, "16 MiB registered held %zu page extents", got);
    for (size_t i = 0; i < n; i++)
        hostpool_free(pool, ext[i]);
    free(ext);
    void *p = NULL;
    assert_out_of_limit(hostpool_alloc(pool, 12 * MiB, true, &p)); /* it would span both */
    char *a = alloc_ok(6 * MiB, false), *b = alloc_ok(6 * MiB, false);
    cr_assert_neq(registration_of(a, 6 * MiB), registration_of(b, 6 * MiB));
    assert_registrations_apart();
}

/* ---- growing and the limit ----------------------------------------------------------------- */

Test(hostpool, no_growth_fails_cleanly_until_reserved)
{
    open_pool(64 * MiB, 16 * MiB);
    void *p = NULL;
    TEST_FAILS(LMS_ERR_OUT_OF_MEMORY, hostpool_alloc(pool, 2 * MiB, false, &p));
    cr_assert_null(p);
    cr_assert_eq(usage().registered, 0);
    cr_assert_eq(usage().allocated, 0);
    cr_assert_eq(host_ranges(), 0);

    TEST_OK(hostpool_reserve(pool, 6 * MiB));
    cr_assert_eq(usage().registered, 16 * MiB);
    for (int i = 0; i < 3; i++)
        alloc_ok(2 * MiB, false);
    TEST_OK(hostpool_reserve(pool, 24 * MiB)); /* 10 MiB free: one more piece */
    cr_assert_eq(usage().registered, 32 * MiB);
    for (int i = 0; i < 10; i++) /* 12 if no page pads them (Note [Page padding]) */
        alloc_ok(2 * MiB, false);
    TEST_OK(hostpool_reserve(pool, 0));
    cr_assert_eq(usage().registered, 32 * MiB);
}

Test(hostpool, the_limit_is_respected_exactly)
{
    open_pool(32 * MiB, 8 * MiB);
    /* 4 chunk extents to a piece, 3 where jemalloc pads them */
    size_t n = 4 * (8 * MiB / occupies(2 * MiB));
    void *ext[16];
    for (size_t i = 0; i < n; i++) {
        ext[i] = alloc_ok(2 * MiB, true);
        fill(ext[i], 2 * MiB, (uint64_t)i);
    }
    hostpool_usage_t u = usage();
    cr_assert_eq(u.registered, 32 * MiB);
    cr_assert_eq(u.allocated, n * 2 * MiB);
    cr_assert_eq(u.limit, 32 * MiB);

    void *p = NULL;
    assert_out_of_limit(hostpool_alloc(pool, 2 * MiB, true, &p));
    if (n == 16) /* nothing at all is left */
        assert_out_of_limit(hostpool_alloc(pool, page, true, &p));
    assert_out_of_limit(hostpool_reserve(pool, 8 * MiB));
    cr_assert_null(p);
    u = usage();
    cr_assert_eq(u.registered, 32 * MiB);
    cr_assert_eq(u.allocated, n * 2 * MiB);
    for (size_t i = 0; i < n; i++)
        check_filled(ext[i], 2 * MiB, (uint64_t)i);

    hostpool_free(pool, ext[5]);
    ext[5] = alloc_ok(2 * MiB, false); /* the freed extent, without growing */
    cr_assert_eq(usage().registered, 32 * MiB);
}

Test(hostpool, requests_beyond_the_limit_fail_and_reserve_keeps_its_growth)
{
    open_pool(30 * MiB + page / 2, 8 * MiB); /* rounded down to a page */
    cr_assert_eq(usage().limit, 30 * MiB);
    void *p = NULL;
    assert_out_of_limit(hostpool_alloc(pool, 32 * MiB, true, &p));
    cr_assert_eq(usage().registered, 0, "a request that cannot fit must not grow the pool");
    assert_out_of_limit(hostpool_reserve(pool, 40 * MiB));
    cr_assert_eq(usage().registered, 30 * MiB, "reserve keeps what it could grow");
    alloc_ok(16 * MiB, false);
}

/* Issue 24: a limit that is not a multiple of the piece is there to its
 * last page (Note [The whole limit]): swap/ admits allocations for all of
 * it. The last registration is the remainder, 6 MiB here. */
Test(hostpool, a_limit_not_a_multiple_of_the_piece_is_usable_whole)
{
    open_pool(30 * MiB, 8 * MiB);
    size_t per_piece = 8 * MiB / occupies(2 * MiB), in_rest = 6 * MiB / occupies(2 * MiB);
    size_t n = 3 * per_piece + in_rest;
    void *ext[16];
    for (size_t i = 0; i < n; i++) {
        ext[i] = alloc_ok(2 * MiB, true);
        fill(ext[i], 2 * MiB, 40 + (uint64_t)i);
    }
    cr_assert_eq(usage().registered, 30 * MiB);
    cr_assert_eq(nranges, 4);
    assert_registrations_apart();
    void *p = NULL;
    assert_out_of_limit(hostpool_alloc(pool, 2 * MiB, true, &p));
    cr_assert_null(p);
    for (size_t i = 0; i < n; i++)
        check_filled(ext[i], 2 * MiB, 40 + (uint64_t)i);

    /* the same through reserve: one call grows to the limit, remainder included */
    close_all();
    open_pool(30 * MiB, 8 * MiB);
    TEST_OK(hostpool_reserve(pool, 30 * MiB));
    cr_assert_eq(usage().registered, 30 * MiB);
    for (size_t i = 0; i < n; i++)
        alloc_ok(2 * MiB, false);
}

/* ---- failures and teardown -------------------------------------------------------------- */

Test(hostpool, a_failed_registration_reaches_the_caller_and_leaves_nothing)
{
    open_device(true);
    hostpool_config_t hc = pool_config(32 * MiB, 8 * MiB, -1);
    TEST_OK(hostpool_create(&hc, &pool));
    dev_fault_plan_t plan = {.op = DEV_OP_host_register, .first = 1, .count = 1};

    /* the first piece fails, then the same call succeeds */
    TEST_OK(dev_fault_set(real, &plan));
    void *p = NULL;
    TEST_FAILS(LMS_ERR_DEVICE, hostpool_alloc(pool, 2 * MiB, true, &p));
    cr_assert_null(p);
    cr_assert_not_null(last_try.p, "the pool never tried to register");
    cr_assert_eq(resident_pages(last_try.p, last_try.n), 0, "the failed piece stayed committed");
    cr_assert_eq(usage().registered, 0);
    cr_assert_eq(host_ranges(), 0);
    void *first = alloc_ok(2 * MiB, true);
    fill(first, 2 * MiB, 1);

    /* a later piece fails: what is there stays, and reserve fails the same way */
    size_t n = 8 * MiB / occupies(2 * MiB); /* fill the first piece */
    for (size_t i = 1; i < n; i++)
        alloc_ok(2 * MiB, true);
    cr_assert_eq(usage().registered, 8 * MiB);
    TEST_OK(dev_fault_set(real, &plan));
    TEST_FAILS(LMS_ERR_DEVICE, hostpool_alloc(pool, 2 * MiB, true, &p));
    cr_assert_eq(resident_pages(last_try.p, last_try.n), 0);
    cr_assert_eq(usage().registered, 8 * MiB);
    cr_assert_eq(usage().allocated, n * 2 * MiB);
    TEST_OK(dev_fault_set(real, &plan));
    TEST_FAILS(LMS_ERR_DEVICE, hostpool_reserve(pool, 4 * MiB));
    cr_assert_eq(usage().registered, 8 * MiB);
    cr_assert_eq(host_ranges(), 1);
    check_filled(first, 2 * MiB, 1);
    alloc_ok(2 * MiB, true);
    cr_assert_eq(usage().registered, 16 * MiB);
}

Test(hostpool, destroy_unregisters_and_unmaps_everything)
{
    open_pool(64 * MiB, 8 * MiB);
    for (int i = 0; i < 10; i++)
        alloc_ok(2 * MiB, true); /* extents still out at destroy go with the pool */
    cr_assert_geq(nranges, 3);
    cr_assert_eq(host_ranges(), nranges);
    range_t some = ranges[0];
    hostpool_destroy(pool);
    pool = NULL;
    cr_assert_eq(host_ranges(), 0);
    cr_assert_eq(nranges, 0);
    cr_assert_eq(resident_pages(some.p, some.n), -1, "the reservation is still mapped");
    cr_assert_eq(errno, ENOMEM);

    hostpool_destroy(NULL);
}

Test(hostpool, bad_arguments_are_refused)
{
    open_pool(32 * MiB, 8 * MiB);
    void *p = NULL;
    TEST_FAILS(LMS_ERR_INVALID, hostpool_alloc(pool, 0, true, &p));
    TEST_FAILS(LMS_ERR_INVALID, hostpool_alloc(pool, page + 1, true, &p));
    cr_assert_null(p);
    hostpool_free(pool, NULL);
    cr_assert_eq(usage().registered, 0);

    hostpool_t *other = NULL;
    hostpool_config_t hc = pool_config(32 * MiB, page + 512, -1);
    TEST_FAILS(LMS_ERR_INVALID, hostpool_create(&hc, &other));
    hc = pool_config(page - 1, 0, -1); /* less than a page: the message names the setting */
    TEST_FAILS(LMS_ERR_INVALID, hostpool_create(&hc, &other));
    cr_assert(strstr(lms_last_error(), "LMS_HOST_LIMIT") != NULL, "%s", lms_last_error());
    hc = pool_config(32 * MiB, 0, -1);
    hc.dev = NULL;
    TEST_FAILS(LMS_ERR_INVALID, hostpool_create(&hc, &other));
    cr_assert_null(other);
}

Test(hostpool, the_default_piece_is_the_limit_when_smaller)
{
    open_pool(12 * MiB, 0);
    alloc_ok(2 * MiB, true);
    cr_assert_eq(usage().registered, 12 * MiB);
    cr_assert_eq(usage().limit, 12 * MiB);
}

/* ---- NUMA ----------------------------------------------------------------------------------- */

Test(hostpool, pages_are_on_the_requested_numa_node)
{
    if (numa_available() < 0)
        cr_skip_test("no NUMA support on this machine");
    open_device(false);
    hostpool_config_t hc = pool_config(32 * MiB, 8 * MiB, 0);
    TEST_OK(hostpool_create(&hc, &pool));
    cr_assert_eq(usage().numa_node, 0);
    char *p = alloc_ok(4 * MiB, true);
    fill(p, 4 * MiB, 3);
    for (size_t off = 0; off < 4 * MiB; off += 256 * page) {
        int node = -1;
        cr_assert_eq(get_mempolicy(&node, NULL, 0, p + off, MPOL_F_NODE | MPOL_F_ADDR), 0,
                     "get_mempolicy: %s", strerror(errno));
        cr_assert_eq(node, 0, "page at offset %zu is on node %d", off, node);
    }
    int mode = -1;
    unsigned long mask[16] = {0};
    cr_assert_eq(get_mempolicy(&mode, mask, 16 * 8 * sizeof(unsigned long), p, MPOL_F_ADDR), 0,
                 "get_mempolicy: %s", strerror(errno));
    cr_assert_eq(mode, MPOL_PREFERRED, "the pages have policy %d", mode);
    cr_assert_eq(mask[0] & 1, 1, "the policy does not name node 0");
}

Test(hostpool, no_node_means_no_binding)
{
    open_pool(16 * MiB, 8 * MiB);
    cr_assert_eq(usage().numa_node, -1);
    char *p = alloc_ok(2 * MiB, true);
    if (numa_available() < 0)
        return;
    int mode = -1;
    cr_assert_eq(get_mempolicy(&mode, NULL, 0, p, MPOL_F_ADDR), 0, "get_mempolicy: %s",
                 strerror(errno));
    cr_assert_eq(mode, MPOL_DEFAULT);
}

/* ---- freeing ---------------------------------------------------------------------------- */

Test(hostpool, freeing_what_the_pool_did_not_hand_out_is_refused)
{
    open_pool(32 * MiB, 8 * MiB);
    char *p = alloc_ok(2 * MiB, true), outside[64];
    TEST_FAILS(LMS_ERR_INVALID, hostpool_free(pool, outside));
    TEST_FAILS(LMS_ERR_INVALID, hostpool_free(NULL, p));
    cr_assert_eq(usage().allocated, 2 * MiB);
    TEST_OK(hostpool_free(pool, p));
    TEST_OK(hostpool_free(pool, NULL));
    cr_assert_eq(usage().allocated, 0);
}

/* ---- a pool of host blocks ---------------------------------------------------------------- */

static size_t chunk; /* the device's granularity: a slot */

/* A pool of host blocks of `limit` in `piece`s; skips where the device has
 * no host blocks. */
static void open_block_pool(size_t limit, size_t piece, bool faults)
{
    open_device(faults);
    if (!real->info.host_blocks)
        cr_skip_test("this device has no host blocks: %s", real->info.host_blocks_why);
    chunk = real->info.granularity;
    hostpool_config_t hc = pool_config(limit, piece, -1);
    hc.blocks = true;
    hc.chunk = chunk;
    TEST_OK(hostpool_create(&hc, &pool));
}

static dev_live_t live(void)
{
    dev_live_t l;
    dev_live(real, &l);
    return l;
}

static char *slot_ok(bool may_grow)
{
    void *p = NULL;
    TEST_OK(hostpool_alloc(pool, chunk, may_grow, &p));
    cr_assert_eq((uintptr_t)p % chunk, 0, "slot %p is not chunk-aligned", p);
    return p;
}

/* The pool's host blocks: all mapped, one per chunk registered. */
static void assert_blocks(size_t n)
{
    dev_live_t l = live();
    cr_assert_eq(usage().registered, n * chunk, "registered %zu for %zu blocks",
                 usage().registered, n);
    cr_assert_eq(l.host_blocks, n, "%zu host blocks live, not %zu", l.host_blocks, n);
    cr_assert_eq(l.mapped_host_blocks, n, "%zu host blocks mapped, not %zu",
                 l.mapped_host_blocks, n);
}

/* Over 64 slots, so that the free slots found lie in two words of the bitmap. */
Test(hostpool, a_block_pool_hands_out_the_lowest_free_slot_first)
{
    open_block_pool(192 * MiB, 64 * MiB, false);
    size_t per_piece = 64 * MiB / chunk, n = 2 * per_piece + 6, late = 2 * per_piece + 2;
    char *s[200];
    cr_assert_leq(n, 200);
    for (size_t i = 0; i < n; i++) {
        s[i] = slot_ok(true);
        cr_assert_eq(s[i], s[0] + i * chunk, "slot %zu is at %p, not next to the others", i,
                     (void *)s[i]);
        fill(s[i], chunk, 100 + i);
    }
    assert_blocks(3 * per_piece);
    cr_assert_eq(usage().allocated, n * chunk);
    TEST_OK(hostpool_free(pool, s[late]));
    TEST_OK(hostpool_free(pool, s[3]));
    cr_assert_eq(usage().allocated, (n - 2) * chunk);
    cr_assert_eq(slot_ok(false), s[3]);
    cr_assert_eq(slot_ok(false), s[late]);
    cr_assert_eq(slot_ok(false), s[n - 1] + chunk);
    cr_assert_eq(usage().allocated, (n + 1) * chunk);
    for (size_t i = 0; i < n; i++)
        if (i != 3 && i != late)
            check_filled(s[i], chunk, 100 + i);
    assert_blocks(3 * per_piece);
}

Test(hostpool, a_block_pool_grows_only_when_told_and_keeps_the_limit)
{
    open_block_pool(20 * MiB + MiB, 8 * MiB, false); /* 10 chunks: the last piece is 2 */
    size_t n = usage().limit / chunk;
    cr_assert_eq(usage().limit, 20 * MiB); /* rounded down to a chunk */
    void *p = NULL;
    TEST_FAILS(LMS_ERR_OUT_OF_MEMORY, hostpool_alloc(pool, chunk, false, &p));
    cr_assert_null(p);
    assert_blocks(0);
    TEST_OK(hostpool_reserve(pool, chunk));
    assert_blocks(8 * MiB / chunk);
    void *s[16];
    for (size_t i = 0; i < 8 * MiB / chunk; i++)
        s[i] = slot_ok(false);
    TEST_FAILS(LMS_ERR_OUT_OF_MEMORY, hostpool_alloc(pool, chunk, false, &p));
    for (size_t i = 8 * MiB / chunk; i < n; i++)
        s[i] = slot_ok(true);
    assert_blocks(n);
    cr_assert_eq(usage().allocated, n * chunk);
    assert_out_of_limit(hostpool_alloc(pool, chunk, true, &p));
    assert_out_of_limit(hostpool_reserve(pool, chunk));
    cr_assert_null(p);
    assert_blocks(n);
    cr_assert_eq(usage().allocated, n * chunk);
    cr_assert_eq(usage().numa_node, -1);
    TEST_OK(hostpool_free(pool, s[3]));
    cr_assert_eq(slot_ok(false), s[3]);

    /* reserve grows a piece at a time, the remainder last */
    close_all();
    open_block_pool(20 * MiB, 8 * MiB, false);
    TEST_OK(hostpool_reserve(pool, 20 * MiB));
    assert_blocks(20 * MiB / chunk);
}

Test(hostpool, a_slots_block_maps_at_another_va_with_the_same_bytes)
{
    open_block_pool(16 * MiB, 8 * MiB, false);
    char *a = slot_ok(true), *b = slot_ok(true);
    fill(a, chunk, 1);
    fill(b, chunk, 2);
    dev_block_t ba, bb;
    TEST_OK(hostpool_block(pool, a, &ba));
    TEST_OK(hostpool_block(pool, b, &bb));
    cr_assert_neq(ba, bb);
    dev_addr_t va;
    TEST_OK(dev_va_reserve(real, chunk, &va));
    TEST_OK(dev_map(real, va, bb));
    TEST_OK(dev_set_access_host(real, va, chunk));
    char *there = (char *)(uintptr_t)va;
    cr_assert_eq(memcmp(there, b, chunk), 0, "the block at another VA shows other bytes");
    fill(there, chunk, 3); /* written there, read in the slot */
    check_filled(b, chunk, 3);
    check_filled(a, chunk, 1);

    /* a copy from the device into the slot lands in the block */
    through_the_device(a, b, chunk);
    check_filled(there, chunk, 1);
    TEST_OK(dev_unmap(real, va, chunk));
    TEST_OK(dev_va_free(real, va, chunk));
}

Test(hostpool, a_block_pool_refuses_other_sizes_and_addresses)
{
    open_block_pool(16 * MiB, 8 * MiB, false);
    char *s = slot_ok(true), *free_slot = slot_ok(false);
    TEST_OK(hostpool_free(pool, free_slot));
    size_t sizes[] = {0, page, chunk / 2, chunk + page, 2 * chunk};
    void *p = NULL;
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        TEST_FAILS(LMS_ERR_INVALID, hostpool_alloc(pool, sizes[i], true, &p));
        cr_assert(strstr(lms_last_error(), "one chunk") != NULL, "%s", lms_last_error());
        cr_assert_eq(hostpool_usable(pool, sizes[i]), 0);
    }
    cr_assert_null(p);
    cr_assert_eq(hostpool_usable(pool, chunk), chunk);
    dev_block_t b = 0;
    char *not_slots[] = {s + page, free_slot, s - chunk, s + 8 * MiB, NULL};
    for (size_t i = 0; i < sizeof not_slots / sizeof *not_slots; i++) {
        TEST_FAILS(LMS_ERR_INVALID, hostpool_block(pool, not_slots[i], &b));
        if (not_slots[i] != NULL)
            TEST_FAILS(LMS_ERR_INVALID, hostpool_free(pool, not_slots[i]));
    }
    cr_assert_eq(b, 0);
    TEST_FAILS(LMS_ERR_INVALID, hostpool_block(pool, s, NULL));
    cr_assert_eq(usage().allocated, chunk);
    cr_assert_eq(slot_ok(false), free_slot, "a refused free changed the slots");

    /* a pool of extents has no blocks; a bad configuration is refused */
    hostpool_t *other = NULL;
    hostpool_config_t hc = pool_config(16 * MiB, 8 * MiB, -1);
    TEST_OK(hostpool_create(&hc, &other));
    void *e = NULL;
    TEST_OK(hostpool_alloc(other, chunk, true, &e));
    TEST_FAILS(LMS_ERR_INVALID, hostpool_block(other, e, &b));
    hostpool_destroy(other);
    other = NULL;
    hc.blocks = true;
    hc.chunk = 2 * chunk;
    TEST_FAILS(LMS_ERR_INVALID, hostpool_create(&hc, &other));
    hc.chunk = 0; /* the granularity */
    hc.piece = chunk + chunk / 2;
    TEST_FAILS(LMS_ERR_INVALID, hostpool_create(&hc, &other));
    hc = pool_config(chunk - page, 0, -1);
    hc.blocks = true;
    TEST_FAILS(LMS_ERR_INVALID, hostpool_create(&hc, &other));
    cr_assert(strstr(lms_last_error(), "LMS_HOST_LIMIT") != NULL, "%s", lms_last_error());
    cr_assert_null(other);
}

Test(hostpool, a_device_without_host_blocks_refuses_a_block_pool)
{
    dev_config_t cfg = test_config();
    cfg.backend = "sim"; /* a GPU's answer is its own */
    cfg.sim_no_host_blocks = true;
    real = test_open(&cfg);
    hostpool_config_t hc = {.dev = real, .limit = 16 * MiB, .blocks = true, .numa_node = -1};
    hostpool_t *other = NULL;
    TEST_FAILS(LMS_ERR_UNSUPPORTED, hostpool_create(&hc, &other));
    cr_assert(strstr(lms_last_error(), real->info.host_blocks_why) != NULL, "%s",
              lms_last_error());
    cr_assert_null(other);
    cr_assert_eq(live().reservations, 0);
}

/* Each op of a growth fails in turn (once: the calls after it succeed), in
 * the first piece and in a later one: the growth is undone, and what the
 * pool had stays. */
Test(hostpool, a_block_pool_growth_that_fails_loses_nothing)
{
    open_block_pool(32 * MiB, 8 * MiB, true);
    size_t per_piece = 8 * MiB / chunk;
    const struct {
        dev_op_t op;
        uint64_t first;
    } fails[] = {{DEV_OP_host_block_create, 1}, {DEV_OP_host_block_create, per_piece},
                 {DEV_OP_map, 1}, {DEV_OP_map, per_piece}, {DEV_OP_set_access_host, 1}};
    size_t nfails = sizeof fails / sizeof *fails;
    char *s[16];
    size_t n = 0;
    for (int round = 0; round < 2; round++) {
        for (size_t f = 0; f < nfails; f++) {
            dev_fault_plan_t plan = {.op = fails[f].op, .first = fails[f].first, .count = 1};
            TEST_OK(dev_fault_set(real, &plan));
            void *p = NULL;
            lms_status_t st = f % 2 ? hostpool_reserve(pool, (n + 1) * chunk)
                                    : hostpool_alloc(pool, chunk, true, &p);
            cr_assert_eq(st, LMS_ERR_DEVICE, "%s failing at call %" PRIu64 ": %s",
                         dev_op_name(fails[f].op), fails[f].first, lms_status_str(st));
            cr_assert_eq(dev_fault_injected(real), 1);
            cr_assert_null(p);
            assert_blocks(round * per_piece);
            cr_assert_eq(usage().allocated, n * chunk);
        }
        for (size_t i = 0; i < per_piece; i++, n++) { /* the piece grows, and is filled */
            s[n] = slot_ok(true);
            fill(s[n], chunk, 200 + n);
        }
        assert_blocks((round + 1) * per_piece);
    }
    for (size_t i = 0; i < n; i++)
        check_filled(s[i], chunk, 200 + i);
    cr_assert_eq(s[n - 1], s[0] + (n - 1) * chunk, "a failed growth left a hole in the window");
}

Test(hostpool, destroying_a_block_pool_leaves_no_host_block)
{
    open_block_pool(32 * MiB, 8 * MiB, false);
    dev_live_t before = live();
    for (int i = 0; i < 6; i++)
        slot_ok(true); /* slots still out at destroy go with the pool */
    TEST_OK(hostpool_free(pool, slot_ok(true)));
    cr_assert_eq(live().reservations, before.reservations);
    assert_blocks(16 * MiB / chunk);
    hostpool_destroy(pool);
    pool = NULL;
    dev_live_t l = live();
    cr_assert_eq(l.host_blocks, 0);
    cr_assert_eq(l.mapped_host_blocks, 0);
    cr_assert_eq(l.reservations, before.reservations - 1, "the window is still reserved");
}
