/*
 * tests/swap/test_swap_faults.c — suite swap_faults of the program test_swap
 * (the fixture is swap_fixture.h): driver failures (the fault layer) on every
 * path that moves data.
 */
#include <pthread.h>
#include <signal.h>
#include <string.h>

#include "swap_fixture.h"

/* ---- driver failures ---------------------------------------------------------
 *
 * Two kinds. On the fetch path, with free device memory (so the reclaim
 * thread is idle and every device call is the caller's), the first call of
 * an op fails: lms_access must return LMS_ERR_DEVICE naming the op, and the
 * same access then succeeds (where lms has another way, a host wait for a
 * device wait or another block, it may instead succeed, and the work after
 * it must then read the right data). And at random: an op fails with a probability
 * while a workload of fills, reads, pins and allocations runs over 3 x the
 * device; every failure must come back as a status with a message, every
 * access that succeeded must see the right data, and once the plan is cleared
 * every allocation must read back what it last held.
 *
 * unmap is included: the sim aborts only when it cannot restore a
 * reservation for real (device/sim.c, unmap_range); an injected failure
 * changes nothing, and lms keeps such a chunk mapped (residency.c).
 */


static void fetch_fails_once(dev_op_t op, bool may_recover)
{
    restart(HOST_CHUNKS, true);
    void *keep = must_malloc(chunk);
    fill(keep, chunk, 9);
    void *x = evicted_chunk(3);
    lms_stats_t s0 = test_settled_stats();
    plan(op, 1, 1, 0, 0);
    dev_device_t *dev = swap_device();
    dev_stream_t *ds = swap_stream(NULL);
    uint64_t sum = 0;
    lms_status_t st = lms_access(x, chunk, LMS_READ, NULL);
    if (st == LMS_OK)
        TEST_OK(dev_checksum(dev, ds, addr(x), chunk, &sum));
    uint64_t calls = dev_fault_calls(dev, op), injected = dev_fault_injected(dev);
    if (calls == 0) {
        /* only unmap is optional: the reclaim thread may have left a block
         * unmapped (failed_unmaps_while_taking_freed_blocks_... forces it) */
        cr_assert_eq(op, DEV_OP_unmap, "a fetch called no %s", dev_op_name(op));
        cr_assert_eq(st, LMS_OK, "%s", lms_last_error());
        cr_log_info("this fetch found an unmapped block: no unmap to fail");
    } else if (st == LMS_OK) {
        cr_assert(may_recover, "a failed %s was not returned: lms_access succeeded (%s)",
                  dev_op_name(op), lms_last_error());
        cr_assert_eq(injected, 1);
        TEST_OK(lms_stream_synchronize(NULL));
        cr_assert_eq(sum, fill_sum(chunk, 3), "the access that recovered from a failed %s "
                                              "let the kernel read wrong data", dev_op_name(op));
        cr_log_info("lms recovered from a failed %s", dev_op_name(op));
    } else {
        cr_assert_eq(st, INJECTED, "a failed %s -> %s (%s)", dev_op_name(op), lms_status_str(st),
                     lms_last_error());
        cr_assert(strstr(lms_last_error(), dev_op_name(op)) != NULL,
                  "the message names the failed call: %s", lms_last_error());
        cr_assert_eq(injected, 1);
        lms_stats_t s1 = test_settled_stats();
        cr_assert_eq(s1.pinned_bytes, s0.pinned_bytes);
        cr_assert_eq(s1.allocated_bytes, s0.allocated_bytes);
    }
    EXPECT_FILLED(x, chunk, 3); /* the same access succeeds now */
    EXPECT_FILLED(keep, chunk, 9);
    no_faults();
    fill(x, chunk, 4);
    EXPECT_FILLED(x, chunk, 4);
    lms_stats_t end = test_settled_stats();
    check_invariants(&end);
}

Test(swap_faults, a_failed_fetch_copy_is_returned_and_the_access_then_succeeds)
{
    fetch_fails_once(DEV_OP_copy_h2d, false);
}

Test(swap_faults, a_failed_map_on_fetch_is_returned_and_the_access_then_succeeds)
{
    fetch_fails_once(DEV_OP_map, false);
}

Test(swap_faults, a_failed_set_access_on_fetch_is_returned_and_the_access_then_succeeds)
{
    fetch_fails_once(DEV_OP_set_access, false);
}

Test(swap_faults, a_chunk_that_can_be_neither_unmapped_nor_made_accessible_is_repaired_later)
{
    restart(HOST_CHUNKS, true); /* fresh: the first access creates its block */
    void *x = must_malloc(chunk);
    /* every set_access and unmap fails: the access's set_access, the undo's
     * unmap, and the restore's set_access */
    dev_fault_plan_t pl = {.op = DEV_OP_set_access, .probability = 1.0,
                           .also = 1ull << DEV_OP_unmap, .seed = 1, .status = INJECTED};
    TEST_OK(dev_fault_set(swap_device(), &pl));
    TEST_FAILS(INJECTED, lms_access(x, chunk, LMS_OVERWRITE, NULL));
    cr_assert_eq(dev_fault_calls(swap_device(), DEV_OP_set_access), 2, "set access, then restore");
    cr_assert_eq(dev_fault_calls(swap_device(), DEV_OP_unmap), 1, "the undo");
    TEST_FAILS(LMS_ERR_DEVICE, lms_access(x, chunk, LMS_OVERWRITE, NULL)); /* still refused */
    cr_assert(strstr(lms_last_error(), "cannot be made usable"), "%s", lms_last_error());
    test_settled_stats(); /* nothing evicts it meanwhile (a copy out of it would fault) */
    no_faults();
    fill(x, chunk, 8); /* repaired: unmapped, then mapped and made accessible again */
    EXPECT_FILLED(x, chunk, 8);
    lms_stats_t st = test_stats();
    check_invariants(&st);
}

Test(swap_faults, a_failed_event_record_on_fetch_is_returned_or_recorded_again)
{
    fetch_fails_once(DEV_OP_event_record, true); /* Note [Unfenced copies] */
}

/* Note [Unfenced copies]: a fetch's event cannot be recorded, nor its stream
 * synchronized, while the copy is held back on the h2d stream. Nothing may
 * use the chunk, or unmap it, until lms can tell the copy has ended. */
static void fetch_held_back_and_unfenced(void *x)
{
    /* freed blocks go to another use only after an event on the default
     * stream, which would fail first: have that done now */
    TEST_OK(swap_settle_released());
    test_gate_close();
    TEST_OK(dev_host_func(swap_device(), swap_copy_stream(true), test_gate_wait, NULL));
    dev_fault_plan_t pl = {.op = DEV_OP_event_record, .probability = 1,
                           .also = 1ull << DEV_OP_stream_synchronize, .status = INJECTED};
    TEST_OK(dev_fault_set(swap_device(), &pl));
    TEST_FAILS(INJECTED, lms_access(x, chunk, LMS_READ, NULL));
    cr_assert(dev_fault_calls(swap_device(), DEV_OP_event_record) >= 1 &&
              dev_fault_calls(swap_device(), DEV_OP_stream_synchronize) >= 1,
              "the fetch was queued, then neither fenced nor synchronized: %s", lms_last_error());
}

Test(swap_faults, a_copy_whose_end_cannot_be_known_is_neither_used_nor_unmapped_early)
{
    restart(HOST_CHUNKS, true);
    void *x = evicted_chunk(3);
    fetch_held_back_and_unfenced(x);
    no_faults();
    pthread_t opener;
    pthread_create(&opener, NULL, test_gate_open_later, NULL);
    EXPECT_FILLED(x, chunk, 3); /* waits for the copy */
    pthread_join(opener, NULL);
    /* again, and other memory wants x's block meanwhile: whatever fails,
     * nothing is unmapped under the copy */
    fetch_held_back_and_unfenced(x = evicted_chunk(4));
    void *y[LIMIT_CHUNKS];
    for (int i = 0; i < LIMIT_CHUNKS; i++) {
        y[i] = must_malloc(chunk);
        lms_status_t st = lms_access(y[i], chunk, LMS_OVERWRITE, NULL);
        cr_assert(st == LMS_OK || st == INJECTED, "%s", lms_last_error());
    }
    no_faults();
    test_gate_open();
    EXPECT_FILLED(x, chunk, 4);
    for (int i = 0; i < LIMIT_CHUNKS; i++) {
        fill(y[i], chunk, 600 + (uint64_t)i);
        EXPECT_FILLED(x, chunk, 4);
    }
    for (int i = 0; i < LIMIT_CHUNKS; i++)
        EXPECT_FILLED(y[i], chunk, 600 + (uint64_t)i);
    lms_stats_t end = test_settled_stats();
    check_invariants(&end);
}

Test(swap_faults, a_failed_stream_wait_on_fetch_is_returned_or_waited_for_on_the_host)
{
    fetch_fails_once(DEV_OP_stream_wait_event, true);
}

Test(swap_faults, a_failed_unmap_of_a_cached_chunk_on_fetch_is_returned_or_avoided)
{
    fetch_fails_once(DEV_OP_unmap, true);
}

Test(swap_faults, a_failed_block_create_on_first_use_is_returned_and_the_access_then_succeeds)
{
    restart(HOST_CHUNKS, true);
    void *x = must_malloc(2 * chunk);
    plan(DEV_OP_block_create, 1, 1, 0, 0);
    lms_status_t st = lms_access(x, 2 * chunk, LMS_OVERWRITE, NULL);
    if (dev_fault_calls(swap_device(), DEV_OP_block_create) == 0) {
        cr_assert_eq(st, LMS_OK, "%s", lms_last_error());
        cr_log_warn("no block created on first use (preallocated?): not tested here");
        TEST_OK(dev_fill(swap_device(), swap_stream(NULL), addr(x), 2 * chunk, 1));
    } else {
        cr_assert_eq(st, INJECTED, "%s", lms_last_error());
        cr_assert(strstr(lms_last_error(), "block_create") != NULL, "%s", lms_last_error());
        fill(x, 2 * chunk, 1);
    }
    EXPECT_FILLED(x, 2 * chunk, 1);
}

Test(swap_faults, failed_unmaps_while_taking_freed_blocks_leave_nothing_half_mapped)
{
    /* Most blocks are mapped under freed memory (the reclaim thread may
     * have unmapped two), so an access of the whole device unmaps freed
     * chunks for their blocks; the 2nd and 3rd unmaps fail. Once, the 2nd
     * failed after chunks of the access were mapped (with no access set
     * yet), the unmap undoing that failed too, and lms kept the chunk as
     * resident: the fill below then touched memory with no access (SIGSEGV
     * on sim, an illegal address on a GPU). */
    restart(HOST_CHUNKS, true);
    size_t n = LIMIT_CHUNKS * chunk;
    void *x = must_malloc(n);
    void **b = chunks_filled(LIMIT_CHUNKS, 600);
    free_all(b, LIMIT_CHUNKS);
    test_settled_stats();
    plan(DEV_OP_unmap, 2, 2, 0, 0);
    lms_status_t st;
    int failures = 0;
    while ((st = lms_access(x, n, LMS_OVERWRITE, NULL)) != LMS_OK) {
        cr_assert_eq(st, INJECTED, "%s", lms_last_error());
        cr_assert(strstr(lms_last_error(), "unmap") != NULL, "%s", lms_last_error());
        cr_assert_lt(++failures, 3);
    }
    TEST_OK(dev_fill(swap_device(), swap_stream(NULL), addr(x), n, 5));
    cr_assert_gt(dev_fault_injected(swap_device()), 0, "no unmap failed");
    no_faults();
    EXPECT_FILLED(x, n, 5);
    lms_stats_t end = test_settled_stats();
    check_invariants(&end);
}

Test(swap_faults, host_memory_that_cannot_be_registered_fails_evictions_and_loses_nothing)
{
    /* failing from the device's open on: the reclaim thread registers the
     * host pool ahead of need as soon as it starts (in host mode it makes
     * host blocks instead: LMS_EVICTED=host) */
    dev_fault_plan_t never = {.op = DEV_OP_host_register, .probability = 1.0,
                              .also = 1ull << DEV_OP_host_block_create, .status = INJECTED};
    swap_config_t cfg = config(HOST_CHUNKS, true);
    cfg.device.fault_plan = &never;
    TEST_OK(lms_shutdown());
    TEST_OK(swap_init(&cfg));
    enum { N = LIMIT_CHUNKS + 3 };
    void *p[N];
    int filled[N] = {0}, failures = 0;
    for (int i = 0; i < N; i++) {
        p[i] = must_malloc(chunk);
        dev_device_t *dev = swap_device();
        dev_stream_t *ds = swap_stream(NULL);
        lms_status_t st = lms_access(p[i], chunk, LMS_OVERWRITE, NULL);
        if (st == LMS_OK) {
            TEST_OK(dev_fill(dev, ds, addr(p[i]), chunk, 40 + (uint64_t)i));
            filled[i] = 1;
            continue;
        }
        cr_assert(st == INJECTED || st == LMS_ERR_OUT_OF_MEMORY, "%s: %s", lms_status_str(st),
                  lms_last_error());
        cr_assert_neq(lms_last_error()[0], '\0');
        failures++;
    }
    uint64_t calls = dev_fault_calls(swap_device(), DEV_OP_host_register) +
                     dev_fault_calls(swap_device(), DEV_OP_host_block_create);
    cr_log_info("host_register or host_block_create: %llu calls failed; %d accesses failed",
                (unsigned long long)calls, failures);
    cr_assert_gt(calls, 0, "the host pool never tried to grow");
    cr_assert_gt(failures, 0, "no eviction failed");
    no_faults();
    for (int i = 0; i < N; i++)
        if (filled[i])
            EXPECT_FILLED(p[i], chunk, 40 + (uint64_t)i);
    for (int i = 0; i < N; i++) {
        fill(p[i], chunk, 80 + (uint64_t)i);
        EXPECT_FILLED(p[i], chunk, 80 + (uint64_t)i);
    }
}

/* The random workload: objects over 3 x the device, each with the seed of
 * its last whole fill. */
#define OBJS 28

typedef struct obj {
    void *p;
    size_t n;
    uint64_t seed;
    bool pinned;
} obj_t;

typedef struct check {
    uint64_t got, want;
    int obj;
} check_t;

typedef struct faulty {
    obj_t o[OBJS];
    check_t checks[64];
    int nchecks;
    uint64_t rng;
    uint64_t reported, by_status[8];
    void *temp[64];
    int ntemp;
} faulty_t;

static uint64_t next(faulty_t *f)
{
    f->rng = f->rng * 6364136223846793005ull + 1442695040888963407ull;
    return f->rng >> 17;
}

/* A failed call: a status, with a message; nothing it was asked changed. */
static void failed(faulty_t *f, lms_status_t st, const char *call)
{
    cr_assert(st == INJECTED || st == LMS_ERR_OUT_OF_MEMORY, "%s -> %s: %s", call,
              lms_status_str(st), lms_last_error());
    cr_assert_neq(lms_last_error()[0], '\0', "%s failed without a message", call);
    f->reported++;
    f->by_status[st]++;
}

static void sync_and_check(faulty_t *f)
{
    lms_status_t st;
    for (int tries = 0; (st = lms_stream_synchronize(NULL)) != LMS_OK; tries++) {
        failed(f, st, "lms_stream_synchronize");
        cr_assert_lt(tries, 1000);
    }
    for (int i = 0; i < f->nchecks; i++)
        cr_assert_eq(f->checks[i].got, f->checks[i].want,
                     "object %d (%zu bytes) read back wrong after a successful access",
                     f->checks[i].obj, f->o[f->checks[i].obj].n);
    f->nchecks = 0;
}

static void enqueue_check(faulty_t *f, int i)
{
    check_t *c = &f->checks[f->nchecks++];
    c->obj = i;
    c->want = fill_sum(f->o[i].n, f->o[i].seed);
    TEST_OK(dev_checksum(swap_device(), swap_stream(NULL), addr(f->o[i].p), f->o[i].n, &c->got));
}

static void random_faults(dev_op_t op, uint64_t also, double probability, uint64_t seed,
                          bool must_call)
{
    restart(HOST_CHUNKS, true);
    static faulty_t f;
    memset(&f, 0, sizeof f);
    f.rng = seed;
    /* failures from the start: the first uses create the blocks */
    dev_fault_plan_t pl = {.op = op, .also = also, .probability = probability, .seed = seed,
                           .status = INJECTED};
    TEST_OK(dev_fault_set(swap_device(), &pl));
    dev_device_t *dev = swap_device();
    dev_stream_t *ds = swap_stream(NULL);
    for (int i = 0; i < OBJS; i++) {
        obj_t *o = &f.o[i];
        o->n = i < 4 ? 2 * chunk - 512 : i < 24 ? chunk : 20000;
        lms_status_t st;
        while ((st = lms_malloc(&o->p, o->n, NULL)) != LMS_OK) {
            failed(&f, st, "lms_malloc");
            cr_assert_lt(f.reported, 10000);
        }
        while ((st = lms_access(o->p, o->n, LMS_OVERWRITE, NULL)) != LMS_OK) {
            failed(&f, st, "lms_access (first)");
            cr_assert_lt(f.reported, 10000);
        }
        o->seed = 1000 + (uint64_t)i;
        TEST_OK(dev_fill(dev, ds, addr(o->p), o->n, o->seed));
    }
    for (int iter = 0; iter < 200; iter++) {
        int i = (int)(next(&f) % OBJS), j = (int)(next(&f) % OBJS);
        obj_t *o = &f.o[i];
        lms_status_t st;
        switch (next(&f) % 6) {
        case 0: { /* fill */
            uint64_t seed2 = next(&f);
            lms_access_mode_t mode = next(&f) % 2 ? LMS_WRITE : LMS_OVERWRITE;
            if ((st = lms_access(o->p, o->n, mode, NULL)) != LMS_OK) {
                failed(&f, st, "lms_access to fill");
                break;
            }
            TEST_OK(dev_fill(dev, ds, addr(o->p), o->n, seed2));
            o->seed = seed2;
            break;
        }
        case 1:
        case 2: /* read */
            if ((st = lms_access(o->p, o->n, LMS_READ, NULL)) != LMS_OK) {
                failed(&f, st, "lms_access to read");
                break;
            }
            enqueue_check(&f, i);
            break;
        case 3: /* pin and use with no access, or unpin */
            if (!o->pinned) {
                if ((st = lms_pin(o->p, o->n)) != LMS_OK) {
                    failed(&f, st, "lms_pin");
                    break;
                }
                o->pinned = true;
                enqueue_check(&f, i);
            } else {
                sync_and_check(&f); /* its work is done before it may move */
                if ((st = lms_unpin(o->p, o->n)) != LMS_OK)
                    failed(&f, st, "lms_unpin");
                else
                    o->pinned = false;
            }
            break;
        case 4: { /* read one, overwrite another */
            if (i == j)
                break;
            lms_range_t r[2] = {{o->p, o->n, LMS_READ}, {f.o[j].p, f.o[j].n, LMS_OVERWRITE}};
            if ((st = lms_access_many(r, 2, NULL)) != LMS_OK) {
                failed(&f, st, "lms_access_many");
                break;
            }
            enqueue_check(&f, i);
            uint64_t seed2 = next(&f);
            TEST_OK(dev_fill(dev, ds, addr(f.o[j].p), f.o[j].n, seed2));
            f.o[j].seed = seed2;
            break;
        }
        case 5: { /* a temporary allocation, used, freed later */
            void *t = NULL;
            size_t n = next(&f) % 2 ? 3 * chunk / 2 : 3000;
            if ((st = lms_malloc(&t, n, NULL)) != LMS_OK) {
                cr_assert_null(t);
                failed(&f, st, "lms_malloc");
                break;
            }
            if ((st = lms_access(t, n, LMS_OVERWRITE, NULL)) != LMS_OK)
                failed(&f, st, "lms_access of a new allocation");
            else
                TEST_OK(dev_fill(dev, ds, addr(t), n, 5));
            if (f.ntemp < 8 && next(&f) % 2)
                f.temp[f.ntemp++] = t;
            else if ((st = lms_free(t, NULL)) != LMS_OK) {
                failed(&f, st, "lms_free");
                cr_assert_lt(f.ntemp, 64);
                f.temp[f.ntemp++] = t;
            }
            break;
        }
        }
        if (f.nchecks >= 48 || iter % 16 == 15)
            sync_and_check(&f);
    }
    sync_and_check(&f);
    uint64_t injected = dev_fault_injected(dev), calls = dev_fault_calls(dev, op);
    no_faults();
    cr_log_info("%s at p=%.2f seed %llu: %llu calls, %llu failed, %llu calls of lms failed",
                dev_op_name(op), probability, (unsigned long long)seed,
                (unsigned long long)calls, (unsigned long long)injected,
                (unsigned long long)f.reported);
    if (must_call) {
        cr_assert_gt(calls, 0, "the workload never called %s", dev_op_name(op));
        cr_assert_gt(injected, 0, "no %s failed", dev_op_name(op));
    }
    /* later operations succeed, and every object holds its last fill */
    for (int i = 0; i < OBJS; i++)
        if (f.o[i].pinned)
            TEST_OK(lms_unpin(f.o[i].p, f.o[i].n));
    for (int i = 0; i < f.ntemp; i++)
        TEST_OK(lms_free(f.temp[i], NULL));
    for (int i = 0; i < OBJS; i++)
        EXPECT_FILLED(f.o[i].p, f.o[i].n, f.o[i].seed);
    for (int i = 0; i < OBJS; i++)
        fill(f.o[i].p, f.o[i].n, 7000 + (uint64_t)i);
    for (int i = OBJS - 1; i >= 0; i--)
        EXPECT_FILLED(f.o[i].p, f.o[i].n, 7000 + (uint64_t)i);
    lms_stats_t st = test_settled_stats();
    check_invariants(&st);
    cr_assert_eq(st.pinned_bytes, 0);
    for (int i = 0; i < OBJS; i++)
        TEST_OK(lms_free(f.o[i].p, NULL));
    all_room_is_free_again();
}

#define RANDOM_FAULTS(op, p)                                                                 \
    Test(swap_faults, random_##op##_failures_reach_the_caller_and_lose_nothing)              \
    {                                                                                        \
        random_faults(DEV_OP_##op, 0, p, 0x5eed0000u + DEV_OP_##op, true);                   \
    }

RANDOM_FAULTS(copy_h2d, 0.15)
RANDOM_FAULTS(copy_d2h, 0.15)
RANDOM_FAULTS(map, 0.15)
RANDOM_FAULTS(set_access, 0.15)
RANDOM_FAULTS(event_record, 0.15)
RANDOM_FAULTS(stream_wait_event, 0.15)
RANDOM_FAULTS(block_create, 0.5) /* called only until the limit's blocks exist */
RANDOM_FAULTS(unmap, 0.15)

/* Host mode's own ops (LMS_EVICTED=host: the host pool's blocks, and the
 * host copies opened at evicted chunks' addresses); unmapped mode calls
 * neither. */
Test(swap_faults, random_host_block_failures_reach_the_caller_and_lose_nothing)
{
    swap_config_t cfg;
    swap_config_from_options(&cfg);
    bool host = cfg.evicted != NULL && strcasecmp(cfg.evicted, "host") == 0;
    random_faults(DEV_OP_set_access_host, 1ull << DEV_OP_host_block_create, 0.15, 0x5eed2700u,
                  host);
}

Test(swap_faults, random_failures_of_event_creation_lose_nothing)
{
    random_faults(DEV_OP_event_create, 0, 0.15, 0xabc0, false);
}

/* Every op lms calls, so that failures meet: a copy's event record and the
 * synchronize after it (Note [Unfenced copies]), an event's wait and the
 * query after it, an unmap and what undoes it, a set_access, the unmap that
 * undoes it and the set_access that restores (a broken chunk, repaired at
 * its next access: unmap_unused in window.c). The test's own kernels and
 * host functions do not fail. */
Test(swap_faults, random_failures_of_every_op_at_once_lose_nothing)
{
    uint64_t spared = 1ull << DEV_OP_launch | 1ull << DEV_OP_host_func;
    uint64_t every = ((1ull << DEV_OP_COUNT) - 1) & ~spared;
    for (uint64_t seed = 1; seed <= 6; seed++)
        random_faults(DEV_OP_map, every, 0.05, 0xa110000u + seed, true);
}

