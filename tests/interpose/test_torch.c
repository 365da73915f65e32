/*
 * tests/interpose/test_torch.c — the PyTorch plugin's entry points
 * (lms_torch.h) as CUDAPluggableAllocator calls them, on the sim backend:
 * built from interpose/torch.c and launch.c with lms_core, with the
 * answer to "are the hooks live?" (interpose_hooks_live, liblms.so's own in
 * interpose.c) given by each test. lms starts from the options, which each
 * test sets first (Criterion runs each test in a process of its own).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "harness.h"
#include "lms_torch.h"
#include "swap/swap.h"

static bool hooks_live;

bool interpose_hooks_live(void);
bool interpose_hooks_live(void) { return hooks_live; }

#define MIB ((size_t)1 << 20)
#define LIMIT (16 * MIB)
#define CHUNK (2 * MIB) /* the sim's default granularity */

static void options(void)
{
    setenv("LMS_SIM_MEMORY", "64MiB", 1);
    setenv("LMS_DEVICE_LIMIT", "16MiB", 1);
    setenv("LMS_HOST_LIMIT", "64MiB", 1);
    setenv("LMS_VA_RESERVE", "1GiB", 1);
}

TestSuite(torch, .init = options, .fini = (void (*)(void))lms_shutdown);

Test(torch, without_the_hooks_the_limit_is_hard)
{
    hooks_live = false;
    void *p[LIMIT / CHUNK];
    for (size_t i = 0; i < LIMIT / CHUNK; i++)
        cr_assert_not_null(p[i] = lms_torch_malloc(CHUNK, 0, NULL), "chunk %zu", i);
    cr_assert_null(lms_torch_malloc(CHUNK, 0, NULL), "nothing beyond the limit: no swapping");
    lms_stats_t t;
    TEST_OK(lms_stats(&t));
    cr_assert_eq(t.host_limit, 0, "no host pool");
    lms_torch_free(p[0], CHUNK, 0, NULL);
    cr_assert_not_null(lms_torch_malloc(CHUNK, 0, NULL), "a free makes room");
    TEST_FAILS(LMS_ERR_UNSUPPORTED, lms_set_device_fraction(0.5));
}

Test(torch, with_the_hooks_memory_beyond_the_device_swaps)
{
    hooks_live = true;
    for (size_t i = 0; i < 2 * LIMIT / CHUNK; i++)
        cr_assert_not_null(lms_torch_malloc(CHUNK, 0, NULL), "chunk %zu of twice the limit", i);
    lms_stats_t t;
    TEST_OK(lms_stats(&t));
    cr_assert_eq(t.device_limit, LIMIT);
    cr_assert_gt(t.host_limit, 0);
}

/* Kernels the hooks do not see may touch the plugin's memory, and lms knew it
 * when it started (Note [Evicted mode] in swap/config.c): else the call is
 * refused while lms runs. */
Test(torch, lms_started_by_the_plugin_expects_unseen_accesses)
{
    hooks_live = true;
    lms_torch_init(1);
    TEST_OK(lms_expect_unseen_access());
}

Test(torch, another_device_and_absurd_sizes_get_null)
{
    hooks_live = true;
    cr_assert_null(lms_torch_malloc(4096, 1, NULL), "lms runs on device 0 (LMS_DEVICE)");
    cr_assert_null(lms_torch_malloc(SIZE_MAX / 2, 0, NULL));
    lms_torch_free(NULL, 0, 0, NULL); /* nothing */
    void *p = lms_torch_malloc(4096, 0, NULL);
    cr_assert_not_null(p);
    lms_torch_free(p, 4096, 0, NULL);
}

Test(torch, a_memory_fraction_before_the_start_sets_the_limit)
{
    hooks_live = true;
    lms_torch_init(1); /* what set_init_fn calls: it starts lms, so the fraction comes late */
    lms_torch_memory_fraction(0.25, 0);
    size_t free_b, total;
    TEST_OK(lms_memory_info(&free_b, &total));
    cr_assert_eq(total, LIMIT, "a fraction after the start changes nothing");
    TEST_OK(lms_shutdown());
    lms_torch_memory_fraction(0.5, 0); /* 32 of the sim's 64 MiB */
    cr_assert_not_null(lms_torch_malloc(4096, 0, NULL));
    TEST_OK(lms_memory_info(&free_b, &total));
    cr_assert_eq(total, 32 * MIB, "half the device: %zu", total);
}

/* Without swapping (hooks_live false, as a plugin alone): memory is backed
 * at allocation, and the limit is hard, so what comes back is what was freed. */
Test(torch, reset_gives_back_what_nothing_uses)
{
    hooks_live = false;
    void *p[4];
    for (int i = 0; i < 4; i++)
        cr_assert_not_null(p[i] = lms_torch_malloc(CHUNK, 0, NULL));
    dev_live_t before, after;
    dev_live(swap_device(), &before);
    for (int i = 1; i < 4; i++)
        lms_torch_free(p[i], CHUNK, 0, NULL);
    lms_torch_reset();
    dev_live(swap_device(), &after);
    cr_assert_eq(after.blocks, 1, "one allocation's block kept: %zu of %zu", after.blocks,
                 before.blocks);
}

Test(torch, memory_recorded_on_another_stream_waits_for_its_work)
{
    hooks_live = false; /* a hard limit: the mallocs below need the memory freed */
    lms_torch_init(1);
    void *a = (void *)0x5000, *b = (void *)0x6000; /* the program's CUDA streams */
    lms_stream_t sb;
    TEST_OK(lms_stream_adopt(b, &sb));
    void *p[LIMIT / CHUNK];
    for (size_t i = 0; i < LIMIT / CHUNK; i++)
        cr_assert_not_null(p[i] = lms_torch_malloc(CHUNK, 0, a));
    /* b's work, on half of it, is held back */
    test_gate_close();
    TEST_OK(dev_host_func(swap_device(), swap_stream(sb), test_gate_wait, NULL));
    for (size_t i = 0; i < LIMIT / CHUNK / 2; i++)
        lms_torch_record_stream(p[i], b);
    for (size_t i = 0; i < LIMIT / CHUNK; i++)
        lms_torch_free(p[i], CHUNK, 0, a);
    /* what was not recorded comes back on a at once; the rest after b's work */
    pthread_t opener;
    pthread_create(&opener, NULL, test_gate_open_later, NULL);
    for (size_t i = 0; i < LIMIT / CHUNK / 2; i++) {
        cr_assert_not_null(lms_torch_malloc(CHUNK, 0, a));
        cr_assert(!test_gate_is_open(), "memory not recorded on b waited for b's work");
    }
    for (size_t i = 0; i < LIMIT / CHUNK / 2; i++) {
        cr_assert_not_null(lms_torch_malloc(CHUNK, 0, a));
        cr_assert(test_gate_is_open(), "memory recorded on b came back before b's work ran");
    }
    pthread_join(opener, NULL);
}
