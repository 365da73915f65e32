/*
 * tests/swap/test_vmm_order.c — Note [VMM beside copies] (swap/prefetch.c):
 * a prefetch's map and set_access, which nothing waits for, are never
 * issued while a D2H copy runs, and a fetch an access waits for goes at
 * once, beside the copies out. Issue 26, item 5.
 *
 * The evidence is lms's own timeline (LMS_TRACE, docs/timeline-format.md):
 * each fetch is an instant at the time lms decided it, before its map and
 * set_access ("prefetch" ahead, "fetch" on demand), each eviction one at
 * the time it was decided, before its copy out was queued, and each copy
 * out a span of when the device ran it: a copy out is in flight from its
 * eviction's instant to its span's end. A loop over more than the device holds,
 * on a throttled link, is run with the rule and without it
 * (swap_config_t.vmm_unordered): without it, prefetches are decided inside
 * copies out (the test would see a broken rule), with it none is. An
 * access that needs more than is free fetches beside the copies out of
 * what it evicts. In host mode (LMS_EVICTED=host) an eviction's unmap and
 * host map wait for the copies out likewise, the chunk on its device block
 * meanwhile, so that its addresses always map something (Note [Remap
 * beside copies] in swap/residency.c).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "json.h"
#include "swap/swap.h"

#define LIMIT_CHUNKS 8
#define HOST_CHUNKS 48
#define READS 4     /* read each iteration, and again the next */
#define FILLERS 6   /* made, read and freed each iteration: MIN evicts reads for them */
#define ITERATIONS 10

static size_t chunk;
static char path[64];

static void setup(void)
{
    dev_config_t dc = test_config();
    dev_device_t *probe = test_open(&dc); /* skips when there is no device */
    chunk = probe->info.granularity;
    dev_close(probe);
    snprintf(path, sizeof path, "/tmp/lms-vmm-order-%ld.json", (long)getpid());
}

static void teardown(void)
{
    (void)lms_shutdown();
    unlink(path);
}

TestSuite(vmm_order, .init = setup, .fini = teardown, .timeout = 300);

static void start_as(bool unordered, const char *evicted)
{
    swap_config_t cfg;
    swap_config_from_options(&cfg);
    cfg.device = test_config();
    cfg.device.backend = "sim"; /* its link is throttled */
    cfg.device.sim_h2d_gbps = cfg.device.sim_d2h_gbps = 0.5; /* a chunk: 4 ms each way */
    cfg.device_limit = LIMIT_CHUNKS * chunk;
    cfg.host_limit = HOST_CHUNKS * chunk;
    cfg.reclaim_low = chunk;
    cfg.reclaim_high = 2 * chunk;
    cfg.swap_piece = 2 * chunk;
    cfg.trace_path = path;
    cfg.vmm_unordered = unordered;
    if (evicted != NULL) {
        cfg.evicted = evicted;
        cfg.device.sim_set_access_d2h_us_per_mib = 500; /* the H100's, beside a copy out */
    }
    TEST_OK(swap_init(&cfg));
}

static void start(bool unordered) { start_as(unordered, NULL); }

static void *must_malloc(void)
{
    void *p = NULL;
    TEST_OK(lms_malloc(&p, chunk, NULL));
    return p;
}

static void use(void *p, lms_access_mode_t mode, uint64_t seed)
{
    dev_device_t *dev = swap_device();
    dev_stream_t *s = swap_stream(NULL);
    TEST_OK(lms_access(p, chunk, mode, NULL));
    if (mode == LMS_OVERWRITE) {
        TEST_OK(dev_fill(dev, s, (dev_addr_t)(uintptr_t)p, chunk, seed));
        return;
    }
    uint64_t sum = 0;
    TEST_OK(dev_checksum(dev, s, (dev_addr_t)(uintptr_t)p, chunk, &sum));
    TEST_OK(lms_stream_synchronize(NULL));
    unsigned char *ref = malloc(chunk);
    cr_assert_not_null(ref);
    dev_fill_ref(ref, chunk, seed);
    cr_assert_eq(sum, dev_checksum_ref(ref, chunk), "the chunk of seed %llu holds its data",
                 (unsigned long long)seed);
    free(ref);
}

/* Each iteration reads READS chunks, then makes FILLERS new ones, reads
 * them and frees them (as tests/swap/test_swap_prefetch.c's
 * what_is_read_next_is_fetched_ahead_into_free_blocks): the frees leave room
 * that prefetch fills with the next iteration's reads, while the reclaim
 * thread and the accesses evict. */
static void run_loop(void)
{
    void *a[READS];
    for (int i = 0; i < READS; i++) {
        a[i] = must_malloc();
        use(a[i], LMS_OVERWRITE, 300 + (uint64_t)i);
    }
    for (int it = 0; it < ITERATIONS; it++) {
        for (int i = 0; i < READS; i++)
            use(a[i], LMS_READ, 300 + (uint64_t)i);
        void *b[FILLERS];
        for (int i = 0; i < FILLERS; i++) {
            b[i] = must_malloc();
            use(b[i], LMS_OVERWRITE, 400 + (uint64_t)i);
        }
        for (int i = 0; i < FILLERS; i++)
            use(b[i], LMS_READ, 400 + (uint64_t)i);
        for (int i = 0; i < FILLERS; i++)
            TEST_OK(lms_free(b[i], NULL));
        TEST_OK(lms_mark_iteration());
    }
    for (int i = 0; i < READS; i++)
        TEST_OK(lms_free(a[i], NULL));
}

typedef struct seen {
    size_t prefetches, fetches;               /* instants */
    size_t prefetches_beside, fetches_beside; /* of those, decided while a copy out was in
                                                 flight */
} seen_t;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static size_t count_before(const double *t, size_t n, double at)
{
    size_t k = 0;
    while (k < n && t[k] < at)
        k++;
    return k;
}

/* The fetches of the timeline, and which were decided while a copy out was
 * in flight: from its eviction's decision (an "evict" instant that copied;
 * each is one copy here, the host pool handing out adjacent slots) to the
 * end of its span on the device, the copies ending in the order they were
 * decided (one stream). */
static seen_t read_timeline(void)
{
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "the timeline %s", path);
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    char buf[4096];
    for (size_t n; (n = fread(buf, 1, sizeof buf, f)) > 0;)
        fwrite(buf, 1, n, mem);
    fclose(mem);
    fclose(f);
    char error[128];
    json_t *doc = json_parse(text, len, error, sizeof error);
    cr_assert_not_null(doc, "the timeline is JSON: %s", error);
    const json_t *ev = json_get(doc, "traceEvents");
    cr_assert(ev != NULL && ev->kind == JSON_ARRAY);
    double *decided = calloc(ev->n + 1, sizeof *decided), *ended = calloc(ev->n + 1, sizeof *ended);
    cr_assert(decided != NULL && ended != NULL);
    size_t ndecided = 0, nended = 0;
    for (size_t i = 0; i < ev->n; i++) {
        const json_t *e = &ev->items[i], *name = json_get(e, "name"), *dur = json_get(e, "dur");
        const json_t *args = json_get(e, "args"), *copied = json_get(args, "copied");
        if (name == NULL || name->kind != JSON_STRING)
            continue;
        if (strcmp(name->string, "d2h") == 0 && dur != NULL)
            ended[nended++] = json_get(e, "ts")->number + dur->number;
        if (strcmp(name->string, "evict") == 0 && copied != NULL && copied->boolean)
            decided[ndecided++] = json_get(e, "ts")->number;
    }
    qsort(decided, ndecided, sizeof *decided, cmp_double);
    qsort(ended, nended, sizeof *ended, cmp_double);
    seen_t s = {0};
    for (size_t i = 0; i < ev->n; i++) {
        const json_t *name = json_get(&ev->items[i], "name");
        if (name == NULL || name->kind != JSON_STRING)
            continue;
        bool ahead = strcmp(name->string, "prefetch") == 0;
        if (!ahead && strcmp(name->string, "fetch") != 0)
            continue;
        double ts = json_get(&ev->items[i], "ts")->number;
        bool beside = count_before(decided, ndecided, ts) > count_before(ended, nended, ts);
        if (ahead) {
            s.prefetches++;
            s.prefetches_beside += beside;
        } else {
            s.fetches++;
            s.fetches_beside += beside;
        }
    }
    free(decided);
    free(ended);
    json_free(doc);
    free(text);
    return s;
}

static seen_t loop_seen(bool unordered)
{
    start(unordered);
    run_loop();
    TEST_OK(lms_shutdown()); /* the timeline is finished */
    seen_t s = read_timeline();
    cr_log_info("%s: %zu prefetches, %zu decided beside a copy out; %zu fetches on demand, %zu "
                "beside one", unordered ? "unordered" : "ordered", s.prefetches,
                s.prefetches_beside, s.fetches, s.fetches_beside);
    return s;
}

Test(vmm_order, a_prefetch_never_sets_access_beside_a_copy_out)
{
    seen_t without = loop_seen(true), with = loop_seen(false);
    cr_assert_gt(without.prefetches_beside, 0,
                 "without the rule, prefetches are decided beside copies out (%zu of %zu): the "
                 "loop is one that tests it", without.prefetches_beside, without.prefetches);
    cr_assert_gt(with.prefetches, 0, "the loop fetches ahead with the rule too");
    cr_assert_eq(with.prefetches_beside, 0,
                 "%zu of %zu prefetches were decided while a copy out ran",
                 with.prefetches_beside, with.prefetches);
}

/* A read of BIG chunks on the host while the device is full of BIG dirty
 * ones: the access evicts them in pieces and maps its own a piece at a time
 * as blocks come free (Note [Pipelined swaps] in swap/window.c), beside the
 * copies out of the rest: an access waits for these fetches, so they are
 * never deferred. */
#define BIG 6

Test(vmm_order, a_fetch_an_access_waits_for_goes_beside_copies_out)
{
    start(false);
    void *x = NULL, *y = NULL;
    TEST_OK(lms_malloc(&x, BIG * chunk, NULL));
    TEST_OK(lms_malloc(&y, BIG * chunk, NULL));
    for (int round = 0; round < 3; round++) {
        dev_device_t *dev = swap_device();
        for (int k = 0; k < 2; k++) { /* x out while y is written, then y out for x */
            void *p = k ? x : y;
            TEST_OK(lms_access(p, BIG * chunk, round == 0 && k == 0 ? LMS_OVERWRITE : LMS_WRITE,
                               NULL));
            TEST_OK(dev_fill(dev, swap_stream(NULL), (dev_addr_t)(uintptr_t)p, BIG * chunk,
                             500 + (uint64_t)(2 * round + k)));
            TEST_OK(lms_stream_synchronize(NULL));
        }
    }
    TEST_OK(lms_free(x, NULL));
    TEST_OK(lms_free(y, NULL));
    TEST_OK(lms_shutdown());
    seen_t s = read_timeline();
    cr_log_info("%zu fetches on demand, %zu decided beside a copy out", s.fetches,
                s.fetches_beside);
    cr_assert_gt(s.fetches_beside, 0, "%zu of %zu fetches on demand were decided while a copy "
                 "out ran", s.fetches_beside, s.fetches);
}

/* Note [Remap beside copies] (swap/residency.c): in host mode an eviction's
 * unmap and host map, which nothing waits for, are not made while another
 * copy out runs: the chunk waits on its device block meanwhile. A thread
 * beside the loop looks at lms's state (swap_probe, under lms's lock)
 * as often as it can get the lock: no chunk on the host ever has addresses
 * that map nothing, which a kernel lms did not see would fault on. */
typedef struct host_seen {
    swap_probe_t last;
    size_t looks, waiting_looks, unmapped_looks, most_unmapped;
} host_seen_t;

static volatile int looking;

static void *look(void *arg)
{
    host_seen_t *h = arg;
    while (looking) {
        swap_probe_t p;
        if (swap_probe(&p) != LMS_OK)
            continue;
        h->looks++;
        h->waiting_looks += p.remaps_waiting > 0;
        h->unmapped_looks += p.host_unmapped > 0;
        h->most_unmapped = p.host_unmapped > h->most_unmapped ? p.host_unmapped : h->most_unmapped;
    }
    return NULL;
}

static host_seen_t host_loop(bool unordered)
{
    start_as(unordered, "host");
    host_seen_t h = {0};
    pthread_t t;
    looking = 1;
    cr_assert_eq(pthread_create(&t, NULL, look, &h), 0);
    run_loop();
    looking = 0;
    pthread_join(t, NULL);
    TEST_OK(swap_probe(&h.last));
    TEST_OK(lms_shutdown());
    cr_log_info("%s: %llu host maps beside a copy out, %llu evictions waited on their blocks; "
                "of %zu looks, %zu saw one waiting, %zu an evicted chunk unmapped (at most %zu)",
                unordered ? "unordered" : "ordered", (unsigned long long)h.last.remaps_beside,
                (unsigned long long)h.last.remaps_deferred, h.looks, h.waiting_looks,
                h.unmapped_looks, h.most_unmapped);
    return h;
}

Test(vmm_order, an_evicted_chunk_is_host_mapped_when_the_copies_out_end)
{
    host_seen_t without = host_loop(true);
    cr_assert_gt(without.last.remaps_beside, 0, "without the rule, evictions' host maps are "
                 "opened beside copies out: the loop is one that tests it");
    cr_assert_eq(without.last.remaps_deferred, 0, "without the rule, no eviction waits");
    host_seen_t with = host_loop(false);
    cr_assert_eq(with.last.remaps_beside, 0, "%llu host maps were opened beside a copy out",
                 (unsigned long long)with.last.remaps_beside);
    cr_assert_gt(with.last.remaps_deferred, 0, "evictions waited on their blocks");
    cr_assert_gt(with.looks, 0, "the thread beside looked");
    cr_assert_eq(with.unmapped_looks + without.unmapped_looks, 0,
                 "%zu of %zu looks found an evicted chunk whose addresses mapped nothing (at "
                 "most %zu)", with.unmapped_looks + without.unmapped_looks,
                 with.looks + without.looks,
                 with.most_unmapped > without.most_unmapped ? with.most_unmapped
                                                            : without.most_unmapped);
}
