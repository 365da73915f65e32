/*
 * tests/swap/test_unseen.c — an access lms never saw (issue 27): a kernel
 * that reads and writes an evicted chunk through pointers stored in device
 * memory, with no lms_access of the chunk. The stand-in is the test kernel
 * "indirect" (kernels.h, dev_indirect), whose one declared range is the
 * array of pointers.
 *
 * In unmapped mode (LMS_EVICTED=unmapped, today's) an evicted chunk's
 * addresses are unmapped: on sim the kernel gets SIGSEGV, as a real one gets
 * an illegal address. In host-mapped mode (LMS_EVICTED=host) they are mapped
 * to the chunk's host copy: the kernel must read the bytes lms evicted and
 * leave what it wrote, there for the next lms_access. Until swap/ builds
 * that mode lms_init refuses it, and the host-mode test skips, saying so.
 */
#include <signal.h>
#include <string.h>

#include "harness.h"
#include "swap/swap.h"

#define LIMIT_CHUNKS 4
#define HOST_CHUNKS 16
#define NPTRS 8                        /* pointers into the evicted chunk */
#define SEED 2700                      /* the chunk's contents: dev_fill_ref(SEED) */
#define ADD 0x0123456789abcdefull      /* what the kernel adds to each word */

static size_t chunk;
static bool sim; /* the device is the sim's */
static unsigned char *expect, *got; /* host images of one chunk, freed by stop */

static void stop(void)
{
    lms_shutdown();
    free(expect);
    free(got);
    expect = got = NULL;
}

/* unseen runs on both backends; unseen_sim only on sim (tests/CMakeLists.txt
 * gives the gpu run a filter): a test that expects a signal cannot skip, and
 * on a GPU the fault is an illegal address, not SIGSEGV. */
TestSuite(unseen, .fini = stop, .timeout = 300);
TestSuite(unseen_sim, .fini = stop, .timeout = 300);

static dev_addr_t addr(const void *p) { return (dev_addr_t)(uintptr_t)p; }

/* Starts lms with a device of LIMIT_CHUNKS chunks and LMS_EVICTED = evicted,
 * on dc; returns swap_init's status. */
static lms_status_t start_on(dev_config_t dc, const char *evicted)
{
    dev_device_t *probe = test_open(&dc); /* skips when there is no device */
    chunk = probe->info.granularity;
    sim = test_is_sim(probe);
    dev_close(probe);
    swap_config_t cfg;
    swap_config_from_options(&cfg);
    cfg.device = dc;
    cfg.device_limit = LIMIT_CHUNKS * chunk;
    cfg.host_limit = HOST_CHUNKS * chunk;
    cfg.evicted = evicted;
    expect = calloc(1, chunk);
    got = calloc(1, chunk);
    cr_assert(expect != NULL && got != NULL);
    return swap_init(&cfg);
}

static lms_status_t start(const char *evicted) { return start_on(test_config(), evicted); }

/* Where pointer i points: the first word, the last, and words between. */
static size_t word_offset(size_t i) { return (chunk / 8 - 1) * i / (NPTRS - 1) * 8; }

/* An evicted chunk filled with SEED, and a pinned array of NPTRS pointers
 * into it (lms memory, resident): *ptrs_out, *target_out. */
static void evicted_chunk_and_pointers(uint64_t **ptrs_out, unsigned char **target_out)
{
    dev_device_t *dev = swap_device();
    dev_stream_t *ds = swap_stream(NULL);
    unsigned char *target = NULL;
    uint64_t *ptrs = NULL;
    TEST_OK(lms_malloc((void **)&target, chunk, NULL));
    TEST_OK(lms_access(target, chunk, LMS_OVERWRITE, NULL));
    TEST_OK(dev_fill(dev, ds, addr(target), chunk, SEED));
    TEST_OK(lms_malloc((void **)&ptrs, NPTRS * sizeof *ptrs, NULL));
    TEST_OK(lms_pin(ptrs, NPTRS * sizeof *ptrs));
    static uint64_t host_ptrs[NPTRS]; /* lives until the copy has run (synchronized below) */
    for (size_t i = 0; i < NPTRS; i++)
        host_ptrs[i] = addr(target + word_offset(i));
    TEST_OK(lms_access(ptrs, sizeof host_ptrs, LMS_OVERWRITE, NULL));
    TEST_OK(dev_copy_h2d(dev, ds, addr(ptrs), host_ptrs, sizeof host_ptrs));
    TEST_OK(lms_stream_synchronize(NULL));
    /* More than the device holds pushes the chunk out (the pinned array stays). */
    for (size_t i = 0; i < LIMIT_CHUNKS + 1; i++) {
        void *other = NULL;
        TEST_OK(lms_malloc(&other, chunk, NULL));
        TEST_OK(lms_access(other, chunk, LMS_OVERWRITE, NULL));
        TEST_OK(dev_fill(dev, ds, addr(other), chunk, SEED + 1 + i));
    }
    TEST_OK(lms_stream_synchronize(NULL));
    test_settled_stats();
    swap_chunk_state_t where;
    TEST_OK(swap_chunk_state(target, &where));
    cr_assert_eq(where, SWAP_CHUNK_HOST, "the chunk was evicted (state %d)", (int)where);
    *ptrs_out = ptrs;
    *target_out = target;
}

/* Launches the indirect kernel on NULL's stream, declaring only ptrs. */
static void indirect(uint64_t *ptrs)
{
    dev_device_t *dev = swap_device();
    dev_stream_t *ds = swap_stream(NULL);
    TEST_OK(lms_access(ptrs, NPTRS * sizeof *ptrs, LMS_WRITE, NULL));
    TEST_OK(dev_indirect(dev, ds, addr(ptrs), NPTRS, ADD));
}

/* Copies [p, p+n) of lms memory into out, through lms_access. */
static void read_back(const void *p, size_t n, void *out)
{
    dev_device_t *dev = swap_device();
    dev_stream_t *ds = swap_stream(NULL);
    TEST_OK(lms_access(p, n, LMS_READ, NULL));
    TEST_OK(dev_copy_d2h(dev, ds, out, addr(p), n));
    TEST_OK(lms_stream_synchronize(NULL));
}

/* ---- the kernel itself, with no lms ------------------------------------------ */

Test(unseen, the_indirect_kernel_reads_and_adds_through_each_pointer)
{
    dev_device_t *dev = test_open_default();
    dev_stream_t *s = NULL;
    TEST_OK(dev_stream_create(dev, DEV_PRIORITY_NORMAL, &s));
    chunk = dev->info.granularity;
    test_run_t run = test_run_map(dev, 2); /* block 0: the pointers; block 1: the words */
    expect = calloc(1, chunk);
    got = calloc(1, chunk);
    cr_assert(expect != NULL && got != NULL);
    dev_fill_ref(expect, chunk, SEED);
    uint64_t ptrs[NPTRS], words[NPTRS];
    for (size_t i = 0; i < NPTRS; i++) {
        ptrs[i] = run.base + chunk + word_offset(i);
        memcpy(&words[i], expect + word_offset(i), 8);
    }
    TEST_OK(dev_copy_h2d(dev, s, run.base + chunk, expect, chunk));
    TEST_OK(dev_copy_h2d(dev, s, run.base, ptrs, sizeof ptrs));
    TEST_OK(dev_indirect(dev, s, run.base, NPTRS, ADD));
    TEST_OK(dev_copy_d2h(dev, s, ptrs, run.base, sizeof ptrs));
    TEST_OK(dev_copy_d2h(dev, s, got, run.base + chunk, chunk));
    TEST_OK(dev_stream_synchronize(dev, s));
    for (size_t i = 0; i < NPTRS; i++) {
        cr_assert_eq(ptrs[i], words[i], "pointer %zu was replaced by the word it read", i);
        uint64_t w = words[i] + ADD;
        memcpy(expect + word_offset(i), &w, 8);
    }
    cr_assert(memcmp(got, expect, chunk) == 0, "each word gained ADD, no other byte changed");
    TEST_FAILS(LMS_ERR_INVALID, dev_indirect(dev, s, run.base + 4, 1, ADD));
    test_run_unmap(dev, &run);
    TEST_OK(dev_stream_destroy(dev, s));
    dev_close(dev);
}

/* ---- through lms, in each mode ------------------------------------------------ */

/* Unmapped mode: the evicted chunk has no mapping, so the kernel faults at
 * its first word. */
Test(unseen_sim, an_unseen_access_to_an_evicted_chunk_faults_in_unmapped_mode, .signal = SIGSEGV)
{
    TEST_OK(start("unmapped"));
    cr_assert(sim, "the sim device (LMS_BACKEND=sim): a GPU reports an illegal address instead");
    uint64_t *ptrs;
    unsigned char *target;
    evicted_chunk_and_pointers(&ptrs, &target);
    test_expect_fault_in(target, chunk);
    indirect(ptrs);
    TEST_OK(lms_stream_synchronize(NULL));
    cr_assert_fail("the kernel went through pointers to an evicted chunk with no fault");
}

/* Host-mapped mode: the kernel reads the evicted bytes over the host mapping
 * and leaves its writes there; the next lms_access sees them. */
Test(unseen, an_unseen_access_to_an_evicted_chunk_reads_and_writes_its_bytes_in_host_mode)
{
    lms_status_t st = start("host");
    if (st == LMS_ERR_UNSUPPORTED &&
        (strstr(lms_last_error(), "not built yet") != NULL || !sim))
        cr_skip_test("lms_init refuses LMS_EVICTED=host: %s", lms_last_error());
    TEST_OK(st);
    uint64_t *ptrs;
    unsigned char *target;
    evicted_chunk_and_pointers(&ptrs, &target);
    indirect(ptrs);
    TEST_OK(lms_stream_synchronize(NULL));
    uint64_t read[NPTRS];
    read_back(ptrs, sizeof read, read);
    read_back(target, chunk, got);
    dev_fill_ref(expect, chunk, SEED);
    for (size_t i = 0; i < NPTRS; i++) {
        uint64_t w;
        memcpy(&w, expect + word_offset(i), 8);
        cr_assert_eq(read[i], w, "the kernel read word %zu of the evicted chunk as filled", i);
        w += ADD;
        memcpy(expect + word_offset(i), &w, 8);
    }
    cr_assert(memcmp(got, expect, chunk) == 0,
              "the chunk holds the kernel's writes and its other bytes as filled");
}

/* A device that does not copy across host blocks (dev_info_t.host_block_runs
 * false, as cuda's until a card shows it can): every copy of a host-mapped
 * chunk stays in its own host block, which the check layer's full checks
 * enforce, and a run of chunks evicted and fetched together keeps its data. */
#define RUN 3

Test(unseen_sim, host_copies_stay_in_one_host_block_where_the_device_says_so)
{
    dev_config_t dc = test_config();
    dc.sim_no_host_block_runs = true;
    dc.checks = DEV_CHECKS_FULL;
    TEST_OK(start_on(dc, "host"));
    dev_device_t *dev = swap_device();
    dev_stream_t *ds = swap_stream(NULL);
    cr_assert(!dev->info.host_block_runs, "the sim was asked to say so");
    unsigned char *run = NULL;
    TEST_OK(lms_malloc((void **)&run, RUN * chunk, NULL));
    for (int round = 0; round < 2; round++) {
        TEST_OK(lms_access(run, RUN * chunk, round == 0 ? LMS_OVERWRITE : LMS_WRITE, NULL));
        for (size_t i = 0; i < RUN; i++)
            TEST_OK(dev_fill(dev, ds, addr(run + i * chunk), chunk, SEED + 10 * round + i));
        void *other = NULL; /* the device's worth: the run goes out together */
        TEST_OK(lms_malloc(&other, LIMIT_CHUNKS * chunk, NULL));
        TEST_OK(lms_access(other, LIMIT_CHUNKS * chunk, LMS_OVERWRITE, NULL));
        TEST_OK(lms_stream_synchronize(NULL));
        swap_chunk_state_t where;
        TEST_OK(swap_chunk_state(run + chunk, &where));
        cr_assert_eq(where, SWAP_CHUNK_HOST, "the run was evicted (state %d)", (int)where);
        TEST_OK(lms_free(other, NULL));
        for (size_t i = 0; i < RUN; i++) { /* fetched back together, then read */
            if (i == 0)
                TEST_OK(lms_access(run, RUN * chunk, LMS_READ, NULL));
            read_back(run + i * chunk, chunk, got);
            dev_fill_ref(expect, chunk, SEED + 10 * round + i);
            cr_assert(memcmp(got, expect, chunk) == 0, "chunk %zu of the run kept its data "
                      "in round %d", i, round);
        }
    }
    lms_stats_t st;
    TEST_OK(lms_stats(&st));
    cr_assert_geq(st.evictions, 2 * RUN, "the run was evicted twice (%llu evictions)",
                  (unsigned long long)st.evictions);
}
