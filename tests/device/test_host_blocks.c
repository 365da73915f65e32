/*
 * tests/device/test_host_blocks.c — host blocks (issue 27): host memory that
 * maps at a VA of a reservation as a device block does, opened to the device
 * and the CPU by set_access_host. Made, mapped, written and read through the
 * VA by the CPU, by copies and by a kernel, unmapped and released with no
 * leak; counted apart from device blocks; and the misuse the check layer
 * refuses. Registered for sim and gpu; on a device without host blocks
 * (dev_info_t.host_blocks) only the refusal of the ops runs. test_sim shows
 * that a host block's VA faults once unmapped, and test_fault fails the ops.
 */
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static dev_device_t *dev;

/* A device with full validation, where the check layer keeps what it needs
 * to refuse the misuse below (Note [Two levels of checking]). */
static void open_full(void)
{
    dev_config_t cfg = test_config();
    cfg.checks = DEV_CHECKS_FULL;
    dev = test_open(&cfg);
}

static void close_dev(void) { dev_close(dev); }

static void require_host_blocks(void)
{
    if (!dev->info.host_blocks)
        cr_skip_test("this device has no host blocks: %s", dev->info.host_blocks_why);
}

/* A reservation of one block with a host block mapped there and opened. */
typedef struct host_run {
    dev_addr_t va;
    dev_block_t block;
    unsigned char *p; /* va, as the CPU reaches it */
} host_run_t;

static host_run_t host_run_map(void)
{
    host_run_t h;
    size_t g = dev->info.granularity;
    TEST_OK(dev_va_reserve(dev, g, &h.va));
    TEST_OK(dev_host_block_create(dev, &h.block));
    TEST_OK(dev_map(dev, h.va, h.block));
    TEST_OK(dev_set_access_host(dev, h.va, g));
    h.p = (unsigned char *)(uintptr_t)h.va;
    return h;
}

static void host_run_unmap(host_run_t *h)
{
    size_t g = dev->info.granularity;
    TEST_OK(dev_unmap(dev, h->va, g));
    TEST_OK(dev_block_release(dev, h->block));
    TEST_OK(dev_va_free(dev, h->va, g));
}

static size_t live_total(void)
{
    dev_live_t l;
    dev_live(dev, &l);
    return l.reservations + l.blocks + l.mapped_blocks + l.host_ranges + l.streams + l.events +
           l.host_blocks + l.mapped_host_blocks;
}

TestSuite(host_blocks, .init = open_full, .fini = close_dev);

Test(host_blocks, the_device_says_whether_it_has_them_and_why_not)
{
    if (test_is_sim(dev))
        cr_assert(dev->info.host_blocks, "the sim has host blocks");
    cr_assert_eq(dev->info.host_blocks, dev->info.host_blocks_why[0] == '\0',
                 "a reason is given exactly when there are none: \"%s\"",
                 dev->info.host_blocks_why);
}

Test(host_blocks, the_cpu_writes_and_reads_a_host_block_through_its_va)
{
    require_host_blocks();
    size_t g = dev->info.granularity;
    host_run_t h = host_run_map();
    dev_live_t l;
    dev_live(dev, &l);
    cr_assert_eq(l.host_blocks, 1);
    cr_assert_eq(l.mapped_host_blocks, 1);
    cr_assert_eq(l.blocks + l.mapped_blocks, 0, "a host block is no device block");
    dev_fill_ref(h.p, g, 7);
    unsigned char *want = malloc(g);
    cr_assert_not_null(want);
    dev_fill_ref(want, g, 7);
    cr_assert(memcmp(h.p, want, g) == 0, "what the CPU wrote through the VA reads back");
    host_run_unmap(&h);
    cr_assert_eq(live_total(), 0, "nothing is left alive");
    free(want);
}

Test(host_blocks, host_blocks_are_not_device_memory)
{
    require_host_blocks();
    size_t f0, f1, t;
    TEST_OK(dev_mem_info(dev, &f0, &t));
    host_run_t h = host_run_map();
    TEST_OK(dev_mem_info(dev, &f1, &t));
    if (test_is_sim(dev)) /* a GPU's free memory moves with what other processes do */
        cr_assert_eq(f1, f0, "a host block takes none of the device's memory");
    host_run_unmap(&h);
}

/* Device block <- host buffer, host block <- device block (D2H into the
 * host block's VA), device block <- host block (H2D out of it), host
 * buffer <- device block; and a kernel and a D2D copy on the host block's
 * VA as device memory. */
Test(host_blocks, copies_and_kernels_reach_a_host_block_through_its_va)
{
    require_host_blocks();
    size_t g = dev->info.granularity;
    test_run_t run = test_run_map(dev, 1);
    host_run_t h = host_run_map();
    unsigned char *buf = malloc(2 * g);
    cr_assert_not_null(buf);
    dev_stream_t *s;
    TEST_OK(dev_stream_create(dev, DEV_PRIORITY_NORMAL, &s));

    dev_fill_ref(buf, g, 1);
    TEST_OK(dev_copy_h2d(dev, s, run.base, buf, g));
    TEST_OK(dev_copy_d2h(dev, s, h.p, run.base, g));
    TEST_OK(dev_stream_synchronize(dev, s));
    cr_assert(memcmp(h.p, buf, g) == 0, "a D2H copy into the host block's VA arrived");

    dev_fill_ref(h.p, g, 2);
    TEST_OK(dev_copy_h2d(dev, s, run.base, h.p, g));
    TEST_OK(dev_copy_d2h(dev, s, buf + g, run.base, g));
    TEST_OK(dev_stream_synchronize(dev, s));
    dev_fill_ref(buf, g, 2);
    cr_assert(memcmp(buf + g, buf, g) == 0, "an H2D copy out of the host block's VA arrived");

    TEST_OK(dev_copy_d2d(dev, s, h.va, run.base + g / 2, g / 2));
    TEST_OK(dev_stream_synchronize(dev, s));
    cr_assert(memcmp(h.p, buf + g / 2, g / 2) == 0, "a D2D copy into the host block arrived");
    if (dev->info.has_kernels) {
        uint64_t sum = 0;
        TEST_OK(dev_checksum(dev, s, h.va, g, &sum));
        TEST_OK(dev_stream_synchronize(dev, s));
        cr_assert_eq(sum, dev_checksum_ref(h.p, g), "a kernel reads the host block");
    }
    TEST_OK(dev_stream_destroy(dev, s));
    host_run_unmap(&h);
    test_run_unmap(dev, &run);
    cr_assert_eq(live_total(), 0, "nothing is left alive");
    free(buf);
}

/* One copy each way across two host blocks mapped side by side in one
 * reservation, as swap/ copies a run of chunks evicted together where
 * dev_info_t.host_block_runs says a device can. Run whatever the device
 * says, with handle checks only (full ones refuse it where the device
 * says no): on a GPU this is what shows whether cuda can, and cuda's
 * host_block_runs may say yes once it has passed there (issue 27). */
static void open_handles(void)
{
    dev_config_t cfg = test_config();
    cfg.checks = DEV_CHECKS_HANDLES;
    dev = test_open(&cfg);
}

TestSuite(host_block_runs, .init = open_handles, .fini = close_dev);

Test(host_block_runs, one_copy_spans_adjacent_host_blocks)
{
    require_host_blocks();
    size_t g = dev->info.granularity;
    cr_log_info("%s says host_block_runs %d", dev->info.backend, (int)dev->info.host_block_runs);
    if (test_is_sim(dev))
        cr_assert(dev->info.host_block_runs, "the sim copies across them");
    test_run_t run = test_run_map(dev, 2);
    dev_addr_t va;
    dev_block_t b[2];
    TEST_OK(dev_va_reserve(dev, 2 * g, &va));
    for (int i = 0; i < 2; i++) {
        TEST_OK(dev_host_block_create(dev, &b[i]));
        TEST_OK(dev_map(dev, va + (dev_addr_t)i * g, b[i]));
    }
    TEST_OK(dev_set_access_host(dev, va, 2 * g));
    unsigned char *p = (unsigned char *)(uintptr_t)va, *buf = malloc(4 * g);
    cr_assert_not_null(buf);
    dev_stream_t *s;
    TEST_OK(dev_stream_create(dev, DEV_PRIORITY_NORMAL, &s));
    dev_fill_ref(buf, 2 * g, 3);
    TEST_OK(dev_copy_h2d(dev, s, run.base, buf, 2 * g));
    TEST_OK(dev_copy_d2h(dev, s, p, run.base, 2 * g)); /* into both host blocks */
    TEST_OK(dev_stream_synchronize(dev, s));
    cr_assert(memcmp(p, buf, 2 * g) == 0, "one D2H copy filled both host blocks");
    dev_fill_ref(p, 2 * g, 4);
    TEST_OK(dev_copy_h2d(dev, s, run.base, p, 2 * g)); /* out of both */
    TEST_OK(dev_copy_d2h(dev, s, buf + 2 * g, run.base, 2 * g));
    TEST_OK(dev_stream_synchronize(dev, s));
    dev_fill_ref(buf, 2 * g, 4);
    cr_assert(memcmp(buf + 2 * g, buf, 2 * g) == 0, "one H2D copy read both host blocks");
    TEST_OK(dev_stream_destroy(dev, s));
    for (int i = 0; i < 2; i++) {
        TEST_OK(dev_unmap(dev, va + (dev_addr_t)i * g, g));
        TEST_OK(dev_block_release(dev, b[i]));
    }
    TEST_OK(dev_va_free(dev, va, 2 * g));
    test_run_unmap(dev, &run);
    cr_assert_eq(live_total(), 0, "nothing is left alive");
    free(buf);
}

Test(host_blocks, a_host_block_maps_again_after_an_unmap_and_at_two_vas)
{
    require_host_blocks();
    size_t g = dev->info.granularity;
    host_run_t h = host_run_map();
    memset(h.p, 0x5a, g);
    TEST_OK(dev_unmap(dev, h.va, g));
    dev_addr_t va2;
    TEST_OK(dev_va_reserve(dev, 2 * g, &va2));
    TEST_OK(dev_map(dev, va2 + g, h.block));
    TEST_OK(dev_map(dev, h.va, h.block));
    TEST_OK(dev_set_access_host(dev, va2 + g, g));
    TEST_OK(dev_set_access_host(dev, h.va, g));
    unsigned char *p2 = (unsigned char *)(uintptr_t)(va2 + g);
    cr_assert_eq(p2[g - 1], 0x5a, "the data stayed with the block");
    p2[0] = 0xa5;
    cr_assert_eq(h.p[0], 0xa5, "both VAs show the same bytes");
    dev_live_t l;
    dev_live(dev, &l);
    cr_assert_eq(l.mapped_host_blocks, 2);
    TEST_FAILS(LMS_ERR_INVALID, dev_block_release(dev, h.block)); /* still mapped */
    TEST_OK(dev_unmap(dev, va2 + g, g));
    TEST_OK(dev_va_free(dev, va2, 2 * g));
    host_run_unmap(&h);
    TEST_FAILS(LMS_ERR_INVALID, dev_map(dev, h.va, h.block)); /* released, and no VA */
    cr_assert_eq(live_total(), 0);
}

Test(host_blocks, the_check_layer_refuses_misuse)
{
    require_host_blocks();
    size_t g = dev->info.granularity;
    test_run_t run = test_run_map(dev, 1);
    dev_addr_t va;
    dev_block_t hb;
    TEST_OK(dev_va_reserve(dev, 2 * g, &va));
    TEST_OK(dev_host_block_create(dev, &hb));
    TEST_FAILS(LMS_ERR_INVALID, dev_host_block_create(dev, NULL));
    TEST_FAILS(LMS_ERR_INVALID, dev_set_access_host(dev, run.base, g)); /* a device block */
    TEST_FAILS(LMS_ERR_INVALID, dev_set_access_host(dev, va, g));       /* nothing mapped */
    TEST_OK(dev_map(dev, va, hb));
    TEST_FAILS(LMS_ERR_INVALID, dev_set_access_host(dev, va, 2 * g));   /* half mapped */
    TEST_FAILS(LMS_ERR_INVALID, dev_set_access_host(dev, va + 1, g));   /* unaligned */

    dev_stream_t *s;
    TEST_OK(dev_stream_create(dev, DEV_PRIORITY_NORMAL, &s));
    void *hp = (void *)(uintptr_t)va;
    /* mapped, but not opened to the CPU: no host memory yet */
    TEST_FAILS(LMS_ERR_INVALID, dev_copy_d2h(dev, s, hp, run.base, 64));
    TEST_FAILS(LMS_ERR_INVALID, dev_copy_h2d(dev, s, run.base, hp, 64));
    TEST_OK(dev_set_access(dev, va, g)); /* the device's access is not the CPU's */
    TEST_FAILS(LMS_ERR_INVALID, dev_copy_d2h(dev, s, hp, run.base, 64));
    TEST_OK(dev_set_access_host(dev, va, g));
    TEST_OK(dev_copy_d2h(dev, s, hp, run.base, 64));
    TEST_OK(dev_copy_h2d(dev, s, run.base, (char *)hp + g - 64, 64));
    /* past the host block into the unmapped granule after it */
    TEST_FAILS(LMS_ERR_INVALID, dev_copy_d2h(dev, s, (char *)hp + g - 32, run.base, 64));
    /* a device block's VA is no host memory, nor is a range over a reservation's edge */
    TEST_FAILS(LMS_ERR_INVALID,
               dev_copy_d2h(dev, s, (void *)(uintptr_t)run.base, run.base, 64));
    TEST_FAILS(LMS_ERR_INVALID, dev_copy_h2d(dev, s, run.base,
                                             (char *)(uintptr_t)run.base - 32, 64));
    TEST_OK(dev_stream_synchronize(dev, s));

    /* a host block handle is no stream, and a stream no host block */
    TEST_FAILS(LMS_ERR_INVALID, dev_stream_synchronize(dev, (dev_stream_t *)(uintptr_t)hb));
    TEST_FAILS(LMS_ERR_INVALID, dev_map(dev, va + g, (dev_block_t)(uintptr_t)s));
    TEST_OK(dev_stream_destroy(dev, s));

    TEST_OK(dev_unmap(dev, va, g));
    TEST_OK(dev_block_release(dev, hb));
    TEST_FAILS(LMS_ERR_INVALID, dev_block_release(dev, hb)); /* twice */
    TEST_OK(dev_va_free(dev, va, 2 * g));
    test_run_unmap(dev, &run);
    cr_assert_eq(live_total(), 0);
}

/* A device without host blocks refuses the ops, saying why, whatever the
 * backend: the check layer answers before the backend is asked. */
Test(host_blocks, a_device_without_them_refuses_the_ops)
{
    dev_config_t cfg = test_config();
    cfg.backend = "sim";
    cfg.sim_no_host_blocks = true;
    dev_device_t *none = test_open(&cfg);
    cr_assert(!none->info.host_blocks);
    cr_assert_neq(none->info.host_blocks_why[0], '\0', "it says why");
    dev_block_t b;
    TEST_FAILS(LMS_ERR_UNSUPPORTED, dev_host_block_create(none, &b));
    cr_assert(strstr(lms_last_error(), none->info.host_blocks_why) != NULL, "%s",
              lms_last_error());
    dev_addr_t va;
    TEST_OK(dev_va_reserve(none, none->info.granularity, &va));
    TEST_FAILS(LMS_ERR_UNSUPPORTED, dev_set_access_host(none, va, none->info.granularity));
    TEST_OK(dev_va_free(none, va, none->info.granularity));
    dev_close(none);
}
