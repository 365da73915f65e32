/*
 * tests/swap/test_swap_evicted.c — suite swap of the program test_swap
 * (the fixture is swap_fixture.h): eviction and the work queued on a chunk,
 * where an evicted chunk's addresses point (LMS_EVICTED), and the fences
 * that order an eviction after its chunk's work.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "swap_fixture.h"

/* ---- queued work ------------------------------------------------------------- */

/* The chunks of chunks_filled(2 * LIMIT_CHUNKS, 10) hold their data; then
 * they are freed. */
static void others_hold_their_data_then_go(void **other)
{
    for (int i = 0; i < 2 * LIMIT_CHUNKS; i++)
        EXPECT_FILLED(other[i], chunk, 10 + (uint64_t)i);
    free_all(other, 2 * LIMIT_CHUNKS);
}

/* With `swapping`, something is on the host first, so that each access
 * window records the event after its work (Note [Eviction fences]). */
static void eviction_waits_for_queued_work(bool swapping)
{
    void *x = swapping ? evicted_chunk(3) : NULL;
    lms_stream_t a;
    TEST_OK(lms_stream_create(&a));
    void *w = must_malloc(chunk), *r = must_malloc(chunk);
    fill(r, chunk, 2);
    TEST_OK(lms_stream_synchronize(NULL));
    /* a: gate, fill w, checksum r; the host does not wait for them */
    uint64_t sum = 0;
    test_gate_close();
    lms_range_t ranges[2] = {{w, chunk, LMS_OVERWRITE}, {r, chunk, LMS_READ}};
    dev_device_t *dev = swap_device();
    dev_stream_t *ds = swap_stream(a);
    TEST_OK(lms_access_many(ranges, 2, a));
    TEST_OK(dev_host_func(dev, ds, test_gate_wait, NULL));
    TEST_OK(dev_fill(dev, ds, addr(w), chunk, 1));
    TEST_OK(dev_checksum(dev, ds, addr(r), chunk, &sum));
    pthread_t opener;
    pthread_create(&opener, NULL, test_gate_open_later, NULL);
    /* meanwhile the default stream wants the whole device twice over: w
     * and r may go, but not from under a's kernels */
    void **other = chunks_filled(2 * LIMIT_CHUNKS, 10);
    pthread_join(opener, NULL);
    TEST_OK(lms_stream_synchronize(a));
    cr_assert_eq(sum, fill_sum(chunk, 2));
    EXPECT_FILLED(w, chunk, 1);
    EXPECT_FILLED(r, chunk, 2);
    others_hold_their_data_then_go(other);
    TEST_OK(lms_stream_destroy(a));
    if (x != NULL)
        EXPECT_FILLED(x, chunk, 3);
}

Test(swap, eviction_waits_for_the_work_queued_on_a_chunk)
{
    eviction_waits_for_queued_work(false);
}

Test(swap, eviction_waits_for_the_work_queued_on_a_chunk_while_swapping)
{
    eviction_waits_for_queued_work(true);
}

typedef struct user {
    int id;
    char failure[200];
} user_t;

static void *share_chunks(void *arg)
{
    user_t *u = arg;
    lms_stream_t s;
    if (lms_stream_create(&s) != LMS_OK) {
        snprintf(u->failure, sizeof u->failure, "stream_create: %s", lms_last_error());
        return NULL;
    }
    dev_device_t *dev = swap_device();
    dev_stream_t *ds = swap_stream(s);
    enum { N = 64, SIZE = 192000 };
    void *p[N];
    uint64_t sums[N];
    for (int i = 0; i < N; i++)
        if (lms_malloc(&p[i], SIZE, s) != LMS_OK) {
            snprintf(u->failure, sizeof u->failure, "malloc: %s", lms_last_error());
            return NULL;
        }
    for (int round = 0; round < 8 && !u->failure[0]; round++) {
        for (int i = 0; i < N; i++) {
            uint64_t seed = (uint64_t)u->id << 32 | (uint64_t)round << 16 | (uint64_t)i;
            lms_status_t st = lms_access(p[i], SIZE, round % 2 ? LMS_WRITE : LMS_OVERWRITE, s);
            if (st == LMS_OK)
                st = dev_fill(dev, ds, addr(p[i]), SIZE, seed);
            if (st == LMS_OK)
                st = lms_access(p[i], SIZE, LMS_READ, s);
            if (st == LMS_OK)
                st = dev_checksum(dev, ds, addr(p[i]), SIZE, &sums[i]);
            if (st != LMS_OK) {
                snprintf(u->failure, sizeof u->failure, "access: %s", lms_last_error());
                break;
            }
        }
        lms_stream_synchronize(s);
        for (int i = 0; i < N && !u->failure[0]; i++) {
            uint64_t seed = (uint64_t)u->id << 32 | (uint64_t)round << 16 | (uint64_t)i;
            if (sums[i] != fill_sum(SIZE, seed))
                snprintf(u->failure, sizeof u->failure, "thread %d round %d allocation %d wrong",
                         u->id, round, i);
        }
    }
    for (int i = 0; i < N; i++)
        lms_free(p[i], s);
    lms_stream_destroy(s);
    return NULL;
}

Test(swap, threads_whose_small_allocations_share_chunks_keep_each_others_data)
{
    /* 3 threads x 64 x 192000 bytes: over twice the device, interleaved in
     * slabs. An access names at most 2 chunks, so the threads' open windows
     * hold at most 6 of the 8: an access never finds the device full. */
    enum { T = 3 };
    pthread_t t[T];
    static user_t u[T];
    for (int i = 0; i < T; i++) {
        u[i].id = i + 1;
        pthread_create(&t[i], NULL, share_chunks, &u[i]);
    }
    for (int i = 0; i < T; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < T; i++)
        cr_assert_eq(u[i].failure[0], '\0', "%s", u[i].failure);
    lms_stats_t st = test_settled_stats();
    check_invariants(&st);
    all_room_is_free_again();
}

/* ---- where an evicted chunk's addresses point (LMS_EVICTED) ------------------- */

/* Starts lms again in evicted mode `mode`, on sim only: there a kernel's
 * access is the CPU's, so the CPU reading an evicted chunk's addresses
 * stands for a kernel lms did not see. */
static void restart_evicted(const char *mode)
{
    swap_config_t cfg = config(HOST_CHUNKS, false);
    cfg.evicted = mode;
    cfg.device.checks = DEV_CHECKS_FULL; /* a map over a mapping fails, an unmap of none too */
    TEST_OK(lms_shutdown());
    TEST_OK(swap_init(&cfg));
    if (!test_is_sim(swap_device()))
        cr_skip_test("the CPU reads device addresses on sim only");
}

/* Host mode (Note [Evicted chunks stay mapped] in swap/residency.c): an
 * evicted chunk's addresses show its host copy, for reads and writes, and
 * a write there is what the next fetch brings in. */
Test(swap, an_evicted_chunk_is_read_and_written_at_its_addresses_in_host_mode)
{
    restart_evicted("host");
    void *x = evicted_chunk(41);
    lms_stats_t st = test_stats();
    cr_assert_geq(st.host_bytes, chunk, "x is on the host");
    unsigned char *image = scratch(chunk);
    dev_fill_ref(image, chunk, 41);
    cr_assert(memcmp(x, image, chunk) == 0, "x's addresses show its evicted bytes");
    memset(image + 64, 0x5a, 64);
    memset((unsigned char *)x + 64, 0x5a, 64); /* an access lms does not see */
    cr_assert_eq(test_stats().fetches, st.fetches, "nothing fetched it");
    cr_assert_eq(read_sum(x, chunk), dev_checksum_ref(image, chunk),
                 "the fetch brought in what was written at its addresses");
    /* evicted again after a read: a clean drop, mapped to the same host copy */
    void *y = evicted_chunk(42);
    cr_assert(memcmp(x, image, chunk) == 0, "x, dropped clean, shows its host copy again");
    unscratch(image);
    TEST_OK(lms_free(y, NULL));
    TEST_OK(lms_free(x, NULL));
    st = test_stats();
    check_invariants(&st);
}

/* Unmapped mode: the same read faults (a kernel gets an illegal address). */
Test(swap, an_evicted_chunk_faults_at_its_addresses_in_unmapped_mode, .signal = SIGSEGV)
{
    restart_evicted("unmapped");
    void *x = evicted_chunk(41);
    cr_assert_geq(test_stats().host_bytes, chunk, "x is on the host");
    test_expect_fault_in(x, chunk);
    cr_assert_eq(*(volatile unsigned char *)x, 0, "not reached: the read faults");
    cr_assert_fail("an evicted chunk's addresses were readable in unmapped mode");
}

/* The link's queue (h2d_queued, which prefetch weighs, and whose draining
 * measures the link's rate) counts the chunks a fetch copies, not the span
 * they lie in: one access that reads two chunks two apart queues 2, not 3. */
Test(swap, a_fetch_of_scattered_chunks_counts_only_those_on_the_link)
{
    char *x = must_malloc(3 * chunk);
    fill(x, 3 * chunk, 21);
    void **b = chunks_filled(LIMIT_CHUNKS, 500); /* x goes to the host */
    for (int i = 0; i < LIMIT_CHUNKS; i++)
        TEST_OK(lms_pin(b[i], chunk));
    for (int i = 0; i < LIMIT_CHUNKS; i++)
        TEST_OK(lms_unpin(b[i], chunk));
    free_all(b, LIMIT_CHUNKS);
    lms_stats_t s0 = test_settled_stats();
    bool on_host = true;
    for (size_t c = 0; c < 3; c++) {
        swap_chunk_state_t where;
        TEST_OK(swap_chunk_state(x + c * chunk, &where));
        on_host &= where == SWAP_CHUNK_HOST;
    }
    cr_assert(on_host, "x is on the host");
    test_gate_close();
    TEST_OK(dev_host_func(swap_device(), swap_copy_stream(true), test_gate_wait, NULL));
    lms_range_t r[2] = {{x, chunk, LMS_READ}, {x + 2 * chunk, chunk, LMS_READ}};
    TEST_OK(lms_access_many(r, 2, NULL));
    swap_probe_t pr;
    TEST_OK(swap_probe(&pr));
    size_t queued = pr.h2d_queued;
    test_gate_open();
    cr_assert_eq(queued, 2, "the copies of chunks 0 and 2 of x; not chunk 1");
    lms_stats_t s1 = test_settled_stats();
    cr_assert_eq(s1.fetches - s0.fetches, 2);
    /* the count goes down when lms next looks at its copies (the reclaim
     * thread does every 50 ms): wait for that, up to 10 s */
    for (int i = 0; i < 10000; i++) {
        TEST_OK(swap_probe(&pr));
        queued = pr.h2d_queued;
        if (queued == 0)
            break;
        usleep(1000);
    }
    cr_assert_eq(queued, 0, "all landed");
    EXPECT_FILLED(x, 3 * chunk, 21);
    TEST_OK(lms_free(x, NULL));
}

/* Note [Eviction fences]: while chunks go to the host, an eviction waits for
 * the work its chunk's access window queued, not for work queued on that
 * stream later: stream a's gate, queued after w's window closed, holds
 * nothing the default stream needs w's block for. (Before, the copy out
 * waited for the gate, and so did every access that needed a block.) */
Test(swap, an_eviction_waits_for_its_chunks_work_not_for_later_work_on_the_stream)
{
    void *x = evicted_chunk(7); /* something on the host: swapping */
    lms_stream_t a;
    TEST_OK(lms_stream_create(&a));
    dev_device_t *dev = swap_device();
    dev_stream_t *ds = swap_stream(a);
    void *w = must_malloc(chunk);
    TEST_OK(lms_access(w, chunk, LMS_OVERWRITE, a));
    TEST_OK(dev_fill(dev, ds, addr(w), chunk, 5));
    test_stats(); /* the window closes: its work is queued */
    test_gate_close();
    TEST_OK(dev_host_func(dev, ds, test_gate_wait, NULL));
    test_gate_watchdog_start(20000); /* should w's copy out wait for the gate after all */
    void **other = chunks_filled(2 * LIMIT_CHUNKS, 10); /* w goes to the host */
    bool waited = test_gate_is_open();
    lms_stats_t st = test_stats();
    waited |= test_gate_watchdog_stop();
    cr_assert(!waited, "the default stream's accesses waited for stream a's gate");
    cr_assert_geq(st.evictions, 1);
    TEST_OK(lms_stream_synchronize(a));
    EXPECT_FILLED(w, chunk, 5);
    EXPECT_FILLED(x, chunk, 7);
    others_hold_their_data_then_go(other);
    TEST_OK(lms_stream_destroy(a));
}

/* With one stream, a free is released at once (Note [Stream-ordered free]):
 * the chunk stays mapped, and the next allocation may be placed on it while
 * work queued before the free still waits to use it. An eviction of the new
 * allocation must wait for that work too: the copy stream is not the
 * program's. (Before, placement forgot which streams had used the chunk,
 * the copy out waited for nothing, and the queued fill ran on unmapped
 * memory: a fault in the sim.) */
Test(swap, a_chunk_freed_and_placed_again_is_evicted_only_after_its_old_work)
{
    dev_device_t *dev = swap_device();
    dev_stream_t *ds = swap_stream(NULL);
    void *p = must_malloc(chunk);
    fill(p, chunk, 1);
    test_gate_close();
    TEST_OK(dev_host_func(dev, ds, test_gate_wait, NULL));
    TEST_OK(lms_access(p, chunk, LMS_WRITE, NULL));
    TEST_OK(dev_fill(dev, ds, addr(p), chunk, 2)); /* behind the gate */
    TEST_OK(lms_free(p, NULL));
    void *q = must_malloc(chunk);
    cr_assert_eq(q, p, "q is placed on p's chunk, still mapped");
    pthread_t opener;
    pthread_create(&opener, NULL, test_gate_open_later, NULL);
    void *o[LIMIT_CHUNKS]; /* the device's worth: q's chunk goes */
    for (int i = 0; i < LIMIT_CHUNKS; i++) {
        o[i] = must_malloc(chunk);
        TEST_OK(lms_access(o[i], chunk, LMS_OVERWRITE, NULL));
    }
    pthread_join(opener, NULL);
    TEST_OK(lms_stream_synchronize(NULL));
    fill(q, chunk, 3);
    EXPECT_FILLED(q, chunk, 3);
    for (int i = 0; i < LIMIT_CHUNKS; i++)
        TEST_OK(lms_free(o[i], NULL));
    TEST_OK(lms_free(q, NULL));
}

/* Two threads use one chunk on one stream in overlapping windows; the one
 * closed last records last, after both's work (Note [Eviction fences]). */
static lms_stream_t overlap_stream;
static void *overlap_w;
static atomic_int overlap_step;

static void *overlap_second(void *arg)
{
    (void)arg;
    TEST_OK(lms_access(overlap_w, chunk, LMS_WRITE, overlap_stream));
    atomic_store(&overlap_step, 1);
    while (atomic_load(&overlap_step) != 2)
        usleep(1000);
    dev_stream_t *ds = swap_stream(overlap_stream);
    TEST_OK(dev_host_func(swap_device(), ds, test_gate_wait, NULL));
    TEST_OK(dev_fill(swap_device(), ds, addr(overlap_w), chunk, 9));
    test_stats(); /* its window closes, after the first thread's */
    atomic_store(&overlap_step, 3);
    return NULL;
}

Test(swap, overlapping_windows_on_one_stream_fence_after_the_work_of_both)
{
    void *x = evicted_chunk(3); /* something on the host: windows record */
    TEST_OK(lms_stream_create(&overlap_stream));
    overlap_w = must_malloc(chunk);
    fill_on(overlap_w, chunk, 1, LMS_OVERWRITE, overlap_stream);
    TEST_OK(lms_stream_synchronize(overlap_stream));
    test_gate_close();
    atomic_store(&overlap_step, 0);
    pthread_t second;
    pthread_create(&second, NULL, overlap_second, NULL);
    while (atomic_load(&overlap_step) != 1)
        usleep(1000);
    TEST_OK(lms_access(overlap_w, chunk, LMS_READ, overlap_stream));
    test_stats(); /* this window closes first: its event comes before the gate */
    atomic_store(&overlap_step, 2);
    while (atomic_load(&overlap_step) != 3)
        usleep(1000);
    pthread_t opener;
    pthread_create(&opener, NULL, test_gate_open_later, NULL);
    void **other = chunks_filled(2 * LIMIT_CHUNKS, 10); /* overlap_w goes to the host */
    pthread_join(opener, NULL);
    pthread_join(second, NULL);
    TEST_OK(lms_stream_synchronize(overlap_stream));
    EXPECT_FILLED(overlap_w, chunk, 9);
    EXPECT_FILLED(x, chunk, 3);
    others_hold_their_data_then_go(other);
    TEST_OK(lms_stream_destroy(overlap_stream));
}

/* The first call of op on the fetch path fails. Either lms_access returns it
 * (LMS_ERR_DEVICE, naming the op) and a retry succeeds, or, where lms has
 * another way (may_recover: a host wait for a device wait, another block),
 * the access succeeds and the work after it reads the right data. */
