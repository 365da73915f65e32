/*
 * tests/swap/test_config.c — the configuration resolved once
 * (swap/config.c): the defaults, clamps and refusals lms_init has always
 * made, pinned to the byte (values, warnings and messages), on facts given
 * by hand: no device; and the evicted mode (Note [Evicted mode]), also on
 * the run's device's facts and with lms started there.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <numa.h>

#include "harness.h"
#include "swap/config.h"
#include "swap/swap.h"

TestSuite(config);

#define MiB BASE_MiB
#define GiB BASE_GiB
#define CHUNK (2 * MiB)

/* A device with `free_b` free of as much, 2 MiB chunks, a NUMA node of 64
 * GiB on a machine of 128 GiB. */
static swap_facts_t facts(size_t free_b)
{
    return (swap_facts_t){.free_bytes = free_b, .total_bytes = free_b, .granularity = CHUNK,
                          .node_bytes = 64 * GiB, .ram_bytes = 128 * GiB};
}

/* What a program gets with no settings: swapping on, the table's thread cache. */
static swap_config_t plain(void) { return (swap_config_t){.swap = true, .thread_cache = MiB}; }

/* Resolves with stderr in log (what base_log warned, "" if nothing). */
static lms_status_t resolve_logged(const swap_config_t *cfg, bool from_options,
                                   const swap_facts_t *f, swap_resolved_t *r, char *log, size_t len)
{
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    FILE *tmp = tmpfile();
    cr_assert(saved >= 0 && tmp != NULL);
    dup2(fileno(tmp), STDERR_FILENO);
    lms_status_t st = swap_config_resolve(cfg, from_options, f, r);
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    rewind(tmp);
    size_t n = fread(log, 1, len - 1, tmp);
    log[n] = '\0';
    fclose(tmp);
    return st;
}

/* Resolves what must resolve, warning exactly `want` ("": nothing). */
static swap_resolved_t resolve_warned(const swap_config_t *cfg, const swap_facts_t *f,
                                      const char *want)
{
    swap_resolved_t r;
    char log[1024];
    lms_status_t st = resolve_logged(cfg, false, f, &r, log, sizeof log);
    cr_assert_eq(st, LMS_OK, "%s", lms_last_error());
    cr_assert_str_eq(log, want);
    return r;
}

static swap_resolved_t resolve_quietly(const swap_config_t *cfg, const swap_facts_t *f)
{
    return resolve_warned(cfg, f, "");
}

Test(config, the_device_limit_defaults_to_free_memory_less_an_eighth_at_most_512_MiB)
{
    struct { size_t free_b, budget; } cases[] = {
        {4 * GiB, 1792},           /* free / 8 = 512 MiB: 3.5 GiB */
        {1 * GiB, 448},            /* free / 8 = 128 MiB: 896 MiB */
        {80 * GiB, 40704},         /* 512 MiB at most: 79.5 GiB */
        {10 * MiB, 4},             /* 8.75 MiB, rounded down to chunks */
        {10 * MiB + 12345, 4},     /* whatever free is, whole chunks */
    };
    swap_config_t cfg = plain();
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        swap_facts_t f = facts(cases[i].free_b);
        swap_resolved_t r = resolve_quietly(&cfg, &f);
        cr_assert_eq(r.chunk, CHUNK);
        cr_assert_eq(r.budget, cases[i].budget, "free %zu: %zu chunks", cases[i].free_b, r.budget);
        cr_assert_eq(r.from[SWAP_SET_DEVICE_LIMIT], SWAP_FROM_DEFAULT);
    }
}

Test(config, a_device_limit_is_rounded_down_to_chunks)
{
    swap_config_t cfg = plain();
    cfg.device_limit = 7 * MiB;
    swap_facts_t f = facts(4 * GiB);
    swap_resolved_t r = resolve_quietly(&cfg, &f);
    cr_assert_eq(r.budget, 3);
    cr_assert_eq(r.from[SWAP_SET_DEVICE_LIMIT], SWAP_FROM_API);
}

Test(config, a_device_limit_over_free_memory_is_clamped_with_a_warning)
{
    swap_config_t cfg = plain();
    cfg.device_limit = 8 * GiB;
    swap_facts_t f = facts(4 * GiB);
    swap_resolved_t r = resolve_warned(&cfg, &f, "lms: warning: LMS_DEVICE_LIMIT=8.00 GiB is more "
                                                 "than the device's free memory (4.00 GiB); using "
                                                 "4.00 GiB\n");
    cr_assert_eq(r.budget, 2048);
    cr_assert_eq(r.from[SWAP_SET_DEVICE_LIMIT], SWAP_FROM_CLAMPED);
}

Test(config, a_device_fraction_is_of_total_memory_and_the_programs)
{
    swap_config_t cfg = plain();
    cfg.device_limit = 1 * GiB; /* the fraction wins */
    cfg.device_fraction = 0.25;
    swap_facts_t f = facts(4 * GiB);
    f.total_bytes = 8 * GiB;
    swap_resolved_t r = resolve_quietly(&cfg, &f);
    cr_assert_eq(r.budget, 1024);
    cr_assert_eq(r.from[SWAP_SET_DEVICE_LIMIT], SWAP_FROM_API);

    cfg.device_fraction = 1; /* 8 GiB of 4 GiB free */
    r = resolve_warned(&cfg, &f, "lms: warning: lms_set_device_fraction's limit=8.00 GiB is more "
                                 "than the device's free memory (4.00 GiB); using 4.00 GiB\n");
    cr_assert_eq(r.budget, 2048);
    cr_assert_eq(r.from[SWAP_SET_DEVICE_LIMIT], SWAP_FROM_CLAMPED);
}

Test(config, a_device_limit_under_a_chunk_is_refused_naming_its_setting)
{
    swap_config_t cfg = plain();
    cfg.device_limit = 1 * MiB;
    swap_facts_t f = facts(4 * GiB);
    swap_resolved_t r = {.budget = 77};
    cr_assert_eq(swap_config_resolve(&cfg, false, &f, &r), LMS_ERR_INVALID);
    cr_assert_str_eq(lms_last_error(), "lms_init: the device limit 1.00 MiB (LMS_DEVICE_LIMIT) is "
                                       "less than one chunk (2.00 MiB)");
    cr_assert_eq(r.budget, 77, "nothing written on failure");

    cfg.device_fraction = 1e-12;
    cr_assert_eq(swap_config_resolve(&cfg, false, &f, &r), LMS_ERR_INVALID);
    cr_assert_str_eq(lms_last_error(), "lms_init: the device limit 0 B "
                                       "(lms_set_device_fraction(1e-12)) is less than one chunk "
                                       "(2.00 MiB)");
}

Test(config, the_host_limit_defaults_to_half_the_numa_node_else_half_the_machine)
{
    swap_config_t cfg = plain();
    swap_facts_t f = facts(4 * GiB);
    swap_resolved_t r = resolve_quietly(&cfg, &f);
    cr_assert_eq(r.host_limit, 32 * GiB);
    cr_assert_eq(r.from[SWAP_SET_HOST_LIMIT], SWAP_FROM_DEFAULT);
    f.node_bytes = 0; /* not known */
    r = resolve_quietly(&cfg, &f);
    cr_assert_eq(r.host_limit, 64 * GiB);
    cfg.host_limit = 3 * GiB;
    r = resolve_quietly(&cfg, &f);
    cr_assert_eq(r.host_limit, 3 * GiB);
    cr_assert_eq(r.from[SWAP_SET_HOST_LIMIT], SWAP_FROM_API);
}

Test(config, without_swapping_there_is_no_host_limit)
{
    swap_config_t cfg = plain();
    cfg.swap = false;
    swap_facts_t f = facts(4 * GiB);
    swap_resolved_t r = resolve_quietly(&cfg, &f);
    cr_assert_eq(r.host_limit, 0);
    cr_assert_eq(r.from[SWAP_SET_HOST_LIMIT], SWAP_FROM_DEFAULT);
    cfg.host_limit = 1 * GiB;
    r = resolve_quietly(&cfg, &f);
    cr_assert_eq(r.host_limit, 0);
    cr_assert_eq(r.from[SWAP_SET_HOST_LIMIT], SWAP_FROM_CLAMPED, "given, not used");
    cr_assert_eq(r.capacity, r.budget);
}

Test(config, a_host_limit_over_the_machines_memory_is_refused)
{
    swap_config_t cfg = plain();
    cfg.host_limit = 129 * GiB;
    swap_facts_t f = facts(4 * GiB);
    swap_resolved_t r;
    cr_assert_eq(swap_config_resolve(&cfg, false, &f, &r), LMS_ERR_INVALID);
    cr_assert_str_eq(lms_last_error(), "lms_init: LMS_HOST_LIMIT=129.00 GiB is more than this "
                                       "machine's memory (128.00 GiB)");
    cfg.host_limit = 128 * GiB; /* all of it is allowed */
    cr_assert_eq(swap_config_resolve(&cfg, false, &f, &r), LMS_OK);
}

Test(config, the_reserve_defaults_to_four_times_the_device_and_host_limits)
{
    swap_config_t cfg = plain();
    swap_facts_t f = facts(4 * GiB);
    swap_resolved_t r = resolve_quietly(&cfg, &f);
    cr_assert_eq(r.va_size, 4 * (3584 * MiB + 32 * GiB));
    cr_assert_eq(r.nchunks, r.va_size / CHUNK);
    cr_assert_eq(r.from[SWAP_SET_VA_RESERVE], SWAP_FROM_DEFAULT);
}

Test(config, the_default_reserve_stops_at_the_user_address_space)
{
    swap_config_t cfg = plain();
    cfg.swap = false;
    swap_facts_t f = facts((size_t)1 << 46); /* 4 x the limit is past 2^47 */
    f.ram_bytes = f.node_bytes = (uint64_t)1 << 50;
    swap_resolved_t r = resolve_quietly(&cfg, &f);
    cr_assert_eq(r.va_size, SWAP_VA_MAX);
    cr_assert_eq(r.from[SWAP_SET_VA_RESERVE], SWAP_FROM_DEFAULT);
}

Test(config, absurd_facts_do_not_wrap_the_reserve)
{
    swap_config_t cfg = plain();
    cfg.host_limit = (size_t)1 << 63;
    swap_facts_t f = facts((size_t)1 << 63);
    f.ram_bytes = UINT64_MAX;
    swap_resolved_t r;
    char log[1024];
    cr_assert_eq(resolve_logged(&cfg, false, &f, &r, log, sizeof log), LMS_OK);
    cr_assert_geq(r.va_size, r.budget * r.chunk, "at least the device limit");
    cr_assert_eq(r.nchunks, r.va_size / r.chunk);
}

Test(config, chunk_ids_stay_below_32_bits)
{
    swap_config_t cfg = plain();
    cfg.swap = false;
    swap_facts_t f = facts(8ull << 40); /* 4 x 8 TiB in 4 KiB chunks is 2^33 of them */
    f.granularity = 4096;
    swap_resolved_t r = resolve_quietly(&cfg, &f);
    cr_assert_eq(r.va_size, (size_t)(UINT32_MAX - 1) * 4096);
    cr_assert_eq(r.nchunks, UINT32_MAX - 1);
}

Test(config, a_reserve_is_rounded_up_to_chunks)
{
    swap_config_t cfg = plain();
    cfg.device_limit = 64 * MiB;
    cfg.host_limit = 64 * MiB;
    cfg.va_reserve = 1 * GiB + 1;
    swap_facts_t f = facts(4 * GiB);
    swap_resolved_t r = resolve_quietly(&cfg, &f);
    cr_assert_eq(r.va_size, 1 * GiB + CHUNK);
    cr_assert_eq(r.from[SWAP_SET_VA_RESERVE], SWAP_FROM_API);
}

Test(config, a_reserve_under_the_device_limit_is_raised_to_it_with_a_warning)
{
    swap_config_t cfg = plain();
    cfg.device_limit = 64 * MiB;
    cfg.host_limit = 64 * MiB;
    cfg.va_reserve = 16 * MiB;
    swap_facts_t f = facts(4 * GiB);
    swap_resolved_t r = resolve_warned(&cfg, &f,
                                       "lms: warning: LMS_VA_RESERVE=16.00 MiB is less than the "
                                       "device limit (64.00 MiB); reserving 64.00 MiB\n"
                                       "lms: warning: LMS_VA_RESERVE=64.00 MiB is less than the "
                                       "room for allocations (124.00 MiB of the device and host "
                                       "limits): allocations stop at the reserved range\n");
    cr_assert_eq(r.va_size, 64 * MiB);
    cr_assert_eq(r.from[SWAP_SET_VA_RESERVE], SWAP_FROM_CLAMPED);
    /* the capacity: 32 device chunks, 32 host ones less high (2) */
    cr_assert_eq(r.capacity, 62);
}

Test(config, a_reserve_past_the_user_address_space_is_refused)
{
    swap_config_t cfg = plain();
    cfg.va_reserve = SWAP_VA_MAX + 1;
    swap_facts_t f = facts(4 * GiB);
    swap_resolved_t r;
    cr_assert_eq(swap_config_resolve(&cfg, false, &f, &r), LMS_ERR_INVALID);
    cr_assert_str_eq(lms_last_error(), "lms_init: LMS_VA_RESERVE=128.00 TiB is more than lms "
                                       "reserves (128.00 TiB, the user address space of x86-64)");
    cfg.va_reserve = SWAP_VA_MAX;
    cr_assert_eq(swap_config_resolve(&cfg, false, &f, &r), LMS_OK);
    cr_assert_eq(r.va_size, SWAP_VA_MAX);
}

Test(config, the_large_threshold_defaults_to_8_chunks_and_takes_4_KiB_to_16_chunks)
{
    swap_config_t cfg = plain();
    swap_facts_t f = facts(4 * GiB);
    swap_resolved_t r = resolve_quietly(&cfg, &f);
    cr_assert_eq(r.large_threshold, 8 * CHUNK);
    cr_assert_eq(r.from[SWAP_SET_LARGE_THRESHOLD], SWAP_FROM_DEFAULT);
    size_t ok[] = {4096, CHUNK / 2, 16 * CHUNK};
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        cfg.large_threshold = ok[i];
        r = resolve_quietly(&cfg, &f);
        cr_assert_eq(r.large_threshold, ok[i]);
        cr_assert_eq(r.from[SWAP_SET_LARGE_THRESHOLD], SWAP_FROM_API);
    }
    cfg.large_threshold = 2048;
    r = resolve_warned(&cfg, &f, "lms: warning: LMS_LARGE_THRESHOLD=2048: must be 4 KiB..16 chunks "
                                 "(33554432 bytes); using the default, 8 chunks\n");
    cr_assert_eq(r.large_threshold, 8 * CHUNK);
    cr_assert_eq(r.from[SWAP_SET_LARGE_THRESHOLD], SWAP_FROM_CLAMPED);
    cfg.large_threshold = 16 * CHUNK + 1;
    r = resolve_warned(&cfg, &f, "lms: warning: LMS_LARGE_THRESHOLD=33554433: must be 4 KiB..16 "
                                 "chunks (33554432 bytes); using the default, 8 chunks\n");
    cr_assert_eq(r.large_threshold, 8 * CHUNK);
}

Test(config, the_watermarks_default_to_a_32nd_and_a_16th_of_the_limit)
{
    swap_config_t cfg = plain();
    swap_facts_t f = facts(4 * GiB); /* 1792 chunks */
    swap_resolved_t r = resolve_quietly(&cfg, &f);
    cr_assert_eq(r.low, 56);
    cr_assert_eq(r.high, 112);
    cr_assert_eq(r.from[SWAP_SET_RECLAIM_LOW], SWAP_FROM_DEFAULT);
    cr_assert_eq(r.from[SWAP_SET_RECLAIM_HIGH], SWAP_FROM_DEFAULT);
    cfg.device_limit = 40 * MiB; /* 20 chunks: 0 and 1, so 1 and 2 */
    r = resolve_quietly(&cfg, &f);
    cr_assert_eq(r.low, 1);
    cr_assert_eq(r.high, 2);
    cr_assert_eq(r.from[SWAP_SET_RECLAIM_LOW], SWAP_FROM_DEFAULT);
}

Test(config, one_watermark_given_moves_the_others_default)
{
    swap_config_t cfg = plain();
    swap_facts_t f = facts(4 * GiB);
    cfg.reclaim_low = 300 * MiB; /* 150 chunks, over the default high (112) */
    swap_resolved_t r = resolve_quietly(&cfg, &f);
    cr_assert_eq(r.low, 150);
    cr_assert_eq(r.high, 151);
    cr_assert_eq(r.from[SWAP_SET_RECLAIM_LOW], SWAP_FROM_API);
    cr_assert_eq(r.from[SWAP_SET_RECLAIM_HIGH], SWAP_FROM_DEFAULT);
    cfg.reclaim_low = 1; /* under a chunk: one */
    cfg.reclaim_high = 3 * MiB;
    r = resolve_quietly(&cfg, &f);
    cr_assert_eq(r.low, 1);
    cr_assert_eq(r.high, 2, "1 chunk is not above low: low + 1");
    cr_assert_eq(r.from[SWAP_SET_RECLAIM_LOW], SWAP_FROM_CLAMPED);
    cr_assert_eq(r.from[SWAP_SET_RECLAIM_HIGH], SWAP_FROM_CLAMPED);
}

Test(config, bad_watermarks_give_both_defaults_with_a_warning)
{
    struct { size_t low, high; const char *log; } cases[] = {
        {4 * GiB, 0, "lms: warning: LMS_RECLAIM_LOW=4.00 GiB, LMS_RECLAIM_HIGH=0 B: LMS_RECLAIM_LOW: "
                     "each must be less than the device limit (3.50 GiB), and low at most high; "
                     "using the defaults (limit / 32 and limit / 16)\n"},
        {0, 3584 * MiB, "lms: warning: LMS_RECLAIM_LOW=0 B, LMS_RECLAIM_HIGH=3.50 GiB: "
                        "LMS_RECLAIM_HIGH: each must be less than the device limit (3.50 GiB), and "
                        "low at most high; using the defaults (limit / 32 and limit / 16)\n"},
        {64 * MiB, 32 * MiB, "lms: warning: LMS_RECLAIM_LOW=64.00 MiB, LMS_RECLAIM_HIGH=32.00 MiB: "
                             "low above high: each must be less than the device limit (3.50 GiB), "
                             "and low at most high; using the defaults (limit / 32 and limit / "
                             "16)\n"},
    };
    swap_facts_t f = facts(4 * GiB);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        swap_config_t cfg = plain();
        cfg.reclaim_low = cases[i].low;
        cfg.reclaim_high = cases[i].high;
        swap_resolved_t r = resolve_warned(&cfg, &f, cases[i].log);
        cr_assert_eq(r.low, 56);
        cr_assert_eq(r.high, 112);
        cr_assert_eq(r.from[SWAP_SET_RECLAIM_LOW],
                     cases[i].low ? SWAP_FROM_CLAMPED : SWAP_FROM_DEFAULT);
    }
}

Test(config, the_swap_piece_defaults_to_16_MiB_in_chunks_from_1_to_64)
{
    struct { size_t piece, granularity, chunks; bool clamped; } cases[] = {
        {0, CHUNK, 8, false},        {0, 32 * MiB, 1, false},    {5 * MiB, CHUNK, 2, false},
        {1 * MiB, CHUNK, 1, true},   {1 * GiB, CHUNK, 64, true}, {128 * MiB, CHUNK, 64, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        swap_config_t cfg = plain();
        cfg.swap_piece = cases[i].piece;
        swap_facts_t f = facts(4 * GiB);
        f.granularity = cases[i].granularity;
        swap_resolved_t r = resolve_quietly(&cfg, &f);
        cr_assert_eq(r.piece, cases[i].chunks, "case %zu: %zu chunks", i, r.piece);
        swap_origin_t want = cases[i].clamped ? SWAP_FROM_CLAMPED
                             : cases[i].piece  ? SWAP_FROM_API
                                               : SWAP_FROM_DEFAULT;
        cr_assert_eq(r.from[SWAP_SET_SWAP_PIECE], want, "case %zu", i);
    }
}

Test(config, capacity_and_fence_size_follow_the_limits)
{
    swap_config_t cfg = plain();
    swap_facts_t f = facts(4 * GiB);
    swap_resolved_t r = resolve_quietly(&cfg, &f);
    cr_assert_eq(r.capacity, 1792 + 16384 - 112, "the host's chunks less the high watermark");
    cr_assert_eq(r.flush_bytes, 64 * MiB, "3.5 GiB / 16 is past 64 MiB");
    cfg.device_limit = 256 * MiB;
    r = resolve_quietly(&cfg, &f);
    cr_assert_eq(r.flush_bytes, 16 * MiB);
    cfg.host_limit = 4 * MiB; /* 2 chunks, under high (8): none for allocations */
    r = resolve_quietly(&cfg, &f);
    cr_assert_eq(r.capacity, 128);
}

Test(config, settings_from_the_environment_say_so)
{
    setenv("LMS_DEVICE_LIMIT", "1GiB", 1);
    setenv("LMS_SWAP_PIECE", "0", 1); /* set, but 0: lms's default */
    unsetenv("LMS_THREAD_CACHE");
    unsetenv("LMS_HOST_LIMIT");
    swap_config_t cfg;
    swap_config_from_options(&cfg);
    swap_facts_t f = facts(4 * GiB);
    swap_resolved_t r;
    char log[1024];
    cr_assert_eq(resolve_logged(&cfg, true, &f, &r, log, sizeof log), LMS_OK);
    cr_assert_eq(r.budget, 512);
    cr_assert_eq(r.from[SWAP_SET_DEVICE_LIMIT], SWAP_FROM_ENV);
    cr_assert_eq(r.from[SWAP_SET_SWAP_PIECE], SWAP_FROM_DEFAULT);
    cr_assert_eq(r.thread_cache, MiB, "the table's default");
    cr_assert_eq(r.from[SWAP_SET_THREAD_CACHE], SWAP_FROM_DEFAULT);
    cr_assert_eq(r.from[SWAP_SET_HOST_LIMIT], SWAP_FROM_DEFAULT);
}

static void collect(const char *var, uint64_t bytes, swap_origin_t from, void *arg)
{
    char *out = arg;
    size_t n = strlen(out);
    snprintf(out + n, 1024 - n, "%s %llu %s\n", var, (unsigned long long)bytes,
             swap_origin_str(from));
}

Test(config, each_setting_is_listed_in_bytes_with_its_origin)
{
    swap_config_t cfg = plain();
    cfg.device_limit = 64 * MiB;
    cfg.host_limit = 128 * MiB;
    swap_facts_t f = facts(4 * GiB);
    swap_resolved_t r = resolve_quietly(&cfg, &f);
    char out[1024] = "";
    cr_assert_eq(swap_resolved_each(&r, collect, out), LMS_OK);
    cr_assert_str_eq(out, "LMS_DEVICE_LIMIT 67108864 api\n"
                          "LMS_HOST_LIMIT 134217728 api\n"
                          "LMS_VA_RESERVE 805306368 default\n"
                          "LMS_LARGE_THRESHOLD 16777216 default\n"
                          "LMS_RECLAIM_LOW 2097152 default\n"
                          "LMS_RECLAIM_HIGH 4194304 default\n"
                          "LMS_SWAP_PIECE 16777216 default\n"
                          "LMS_THREAD_CACHE 1048576 api\n");
    cr_assert_eq(swap_resolved_each(NULL, collect, out), LMS_ERR_INVALID);
    cr_assert_eq(swap_resolved_each(&r, NULL, out), LMS_ERR_INVALID);
}

Test(config, bad_arguments_are_refused)
{
    swap_config_t cfg = plain();
    swap_facts_t f = facts(4 * GiB);
    swap_resolved_t r;
    cr_assert_eq(swap_config_resolve(NULL, false, &f, &r), LMS_ERR_INVALID);
    cr_assert_eq(swap_config_resolve(&cfg, false, NULL, &r), LMS_ERR_INVALID);
    cr_assert_eq(swap_config_resolve(&cfg, false, &f, NULL), LMS_ERR_INVALID);
    f.granularity = 0;
    cr_assert_eq(swap_config_resolve(&cfg, false, &f, &r), LMS_ERR_INVALID);
    cr_assert_eq(swap_facts_host(0, NULL), LMS_ERR_INVALID);
    cr_assert_eq(swap_facts_device(NULL, &f), LMS_ERR_INVALID);
    cr_assert_str_eq(swap_evicted_str((swap_evicted_t)99), "?");
}

Test(config, the_host_facts_are_the_machines)
{
    swap_facts_t f = {.granularity = 123};
    cr_assert_eq(swap_facts_host(-1, &f), LMS_OK);
    cr_assert_eq(f.node_bytes, 0, "no node: not known");
    cr_assert_eq(f.ram_bytes, (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE));
    cr_assert_eq(f.granularity, 123, "the device's facts are left alone");
    /* one node is the machine: its size is sysconf's, not the node's meminfo */
    if (numa_available() < 0 || numa_num_configured_nodes() == 1) {
        f.node_bytes = 1;
        cr_assert_eq(swap_facts_host(0, &f), LMS_OK);
        cr_assert_eq(f.node_bytes, 0, "one node: the machine's size is used");
    }
    cr_assert_str_eq(swap_origin_str((swap_origin_t)99), "?");
}

/* ---- the evicted mode (Note [Evicted mode]) ------------------------------------- */

/* The mode `word` resolves to with facts f, which must resolve. */
static swap_resolved_t resolve_evicted(const char *word, bool from_options, const swap_facts_t *f)
{
    swap_config_t cfg = plain();
    cfg.evicted = word;
    swap_resolved_t r;
    lms_status_t st = swap_config_resolve(&cfg, from_options, f, &r);
    cr_assert_eq(st, LMS_OK, "%s: %s", word, lms_last_error());
    return r;
}

/* The refusal of `word` with facts f: its status and message. */
static void evicted_refused(const char *word, const swap_facts_t *f, lms_status_t want,
                            const char *message)
{
    swap_config_t cfg = plain();
    cfg.evicted = word;
    swap_resolved_t r;
    cr_assert_eq(swap_config_resolve(&cfg, false, f, &r), want, "%s", word);
    cr_assert_str_eq(lms_last_error(), message);
}

Test(config, auto_evicts_unmapped_until_a_card_has_measured_host_mode)
{
    swap_facts_t f = facts(4 * GiB);
    f.host_blocks = true;
    f.unseen = true; /* the preload: where host-mapped eviction will go first */
    const char *autos[] = {NULL, "", "auto", "AUTO"};
    for (size_t i = 0; i < sizeof autos / sizeof *autos; i++) {
        swap_resolved_t r = resolve_evicted(autos[i], false, &f);
        cr_assert_eq(r.evicted, SWAP_EVICTED_UNMAPPED);
        cr_assert_str_eq(r.evicted_why, "auto: host-mapped eviction not measured on a card yet");
    }
    f.unseen = false;
    swap_resolved_t r = resolve_evicted("auto", true, &f);
    cr_assert_eq(r.evicted, SWAP_EVICTED_UNMAPPED);
    cr_assert_str_eq(r.evicted_why, "auto: host-mapped eviction not measured on a card yet; not "
                                    "under the preload or the PyTorch plugin");
    f = facts(4 * GiB); /* a device that cannot map host memory: why, as it says */
    f.host_blocks_why = "attribute 141 is 0";
    r = resolve_evicted("auto", false, &f);
    cr_assert_eq(r.evicted, SWAP_EVICTED_UNMAPPED);
    cr_assert_str_eq(r.evicted_why, "auto: this device cannot map host memory at device addresses "
                                    "(attribute 141 is 0)");
}

Test(config, unmapped_eviction_is_had_on_any_device_naming_the_setting)
{
    swap_facts_t f = facts(4 * GiB);
    swap_resolved_t r = resolve_evicted("unmapped", false, &f);
    cr_assert_eq(r.evicted, SWAP_EVICTED_UNMAPPED);
    cr_assert_str_eq(r.evicted_why, "swap_config_t.evicted=unmapped");
    f.host_blocks = true;
    r = resolve_evicted("Unmapped", true, &f);
    cr_assert_eq(r.evicted, SWAP_EVICTED_UNMAPPED);
    cr_assert_str_eq(r.evicted_why, "LMS_EVICTED=Unmapped");
}

Test(config, host_eviction_is_refused_where_the_device_cannot_map_host_memory)
{
    swap_facts_t f = facts(4 * GiB);
    f.host_blocks_why = "attribute 141 is 0";
    evicted_refused("host", &f, LMS_ERR_UNSUPPORTED,
                    "lms_init: swap_config_t.evicted=host: this device cannot map host memory at "
                    "device addresses (attribute 141 is 0); use unmapped or auto");
    f.host_blocks_why = NULL;
    evicted_refused("host", &f, LMS_ERR_UNSUPPORTED,
                    "lms_init: swap_config_t.evicted=host: this device cannot map host memory at "
                    "device addresses (not said); use unmapped or auto");
}

/* Where the device maps host memory, host is had as asked, naming the
 * setting; on the run's device's own facts too (sim maps host blocks). */
Test(config, host_eviction_is_had_where_the_device_can_map_host_memory)
{
    swap_facts_t g = facts(4 * GiB);
    g.host_blocks = true;
    swap_resolved_t r = resolve_evicted("Host", true, &g);
    cr_assert_eq(r.evicted, SWAP_EVICTED_HOST);
    cr_assert_str_eq(r.evicted_why, "LMS_EVICTED=Host");
    cr_assert_str_eq(swap_evicted_str(r.evicted), "host");
    dev_device_t *dev = test_open_default();
    swap_facts_t f = {0};
    cr_assert_eq(swap_facts_device(dev, &f), LMS_OK, "%s", lms_last_error());
    cr_assert_eq(f.granularity, dev->info.granularity);
    cr_assert_eq(f.host_blocks, dev->info.host_blocks);
    cr_assert_eq(swap_facts_host(dev->info.host_numa_node, &f), LMS_OK);
    if (!f.host_blocks) {
        dev_close(dev);
        cr_skip_test("%s cannot map host memory: %s", dev->info.name, dev->info.host_blocks_why);
    }
    r = resolve_evicted("host", false, &f);
    cr_assert_eq(r.evicted, SWAP_EVICTED_HOST);
    cr_assert_str_eq(r.evicted_why, "swap_config_t.evicted=host");
    dev_close(dev);
}

Test(config, an_evicted_mode_that_is_not_a_word_of_LMS_EVICTED_is_refused)
{
    swap_facts_t f = facts(4 * GiB);
    f.host_blocks = true;
    evicted_refused("sideways", &f, LMS_ERR_INVALID,
                    "lms_init: swap_config_t.evicted=sideways: not auto, unmapped or host");
    evicted_refused("hostile", &f, LMS_ERR_INVALID,
                    "lms_init: swap_config_t.evicted=hostile: not auto, unmapped or host");
}

Test(config, without_swapping_nothing_is_evicted_and_no_mode_refused)
{
    swap_facts_t f = facts(4 * GiB);
    swap_config_t cfg = plain();
    cfg.swap = false;
    cfg.evicted = "host"; /* on a device that cannot: nothing will be evicted */
    swap_resolved_t r;
    cr_assert_eq(swap_config_resolve(&cfg, false, &f, &r), LMS_OK, "%s", lms_last_error());
    cr_assert_eq(r.evicted, SWAP_EVICTED_UNMAPPED);
    cr_assert_str_eq(r.evicted_why, "no swapping: nothing is evicted");
}

/* lms on the run's device, from the options, swapping. */
static void start_lms(void)
{
    swap_config_t cfg;
    swap_config_from_options(&cfg);
    cfg.device = test_config();
    cfg.device_limit = 8 * CHUNK;
    cfg.host_limit = 64 * MiB;
    cfg.va_reserve = 512 * MiB;
    TEST_OK(swap_init(&cfg));
}

static bool unseen_fact(void)
{
    swap_facts_t f = {0};
    TEST_OK(swap_facts_host(-1, &f));
    return f.unseen;
}

Test(config, unseen_accesses_are_expected_before_lms_starts_only)
{
    cr_assert(!unseen_fact(), "a program expects none until it says so");
    start_lms();
    TEST_FAILS(LMS_ERR_UNSUPPORTED, lms_expect_unseen_access());
    cr_assert(strstr(lms_last_error(), "lms_expect_unseen_access: lms is running, with evicted "
                     "chunks unmapped (auto: ") != NULL, "%s", lms_last_error());
    cr_assert(strstr(lms_last_error(), "call it before lms starts") != NULL, "%s",
              lms_last_error());
    cr_assert(!unseen_fact(), "refused: nothing changed");
    TEST_OK(lms_shutdown());
    TEST_OK(lms_expect_unseen_access());
    cr_assert(unseen_fact(), "for the next start");
}

Test(config, unseen_accesses_expected_before_the_start_hold_while_lms_runs)
{
    TEST_OK(lms_expect_unseen_access());
    cr_assert(unseen_fact());
    start_lms();
    TEST_OK(lms_expect_unseen_access()); /* as the plugin's, after the preload's */
    cr_assert(unseen_fact());
    TEST_OK(lms_shutdown());
    cr_assert(unseen_fact(), "and for later starts");
}

/* lms_init resolves on the device's own facts: on one that maps host memory
 * (sim) it starts in host mode (tests/swap/test_swap.c runs in it). */
Test(config, lms_starts_with_host_eviction_where_the_device_maps_host_memory)
{
    dev_device_t *dev = test_open_default();
    bool can = dev->info.host_blocks;
    dev_close(dev);
    if (!can)
        cr_skip_test("the device cannot map host memory");
    swap_config_t cfg;
    swap_config_from_options(&cfg);
    cfg.device = test_config();
    cfg.device_limit = 8 * CHUNK;
    cfg.evicted = "host";
    TEST_OK(swap_init(&cfg));
    TEST_OK(lms_shutdown());
}
