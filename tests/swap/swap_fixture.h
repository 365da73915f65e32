/*
 * tests/swap/swap_fixture.h — what the test_swap suites share (swap_fixture.c
 * defines it): the configuration every test starts lms with, the suites'
 * init and fini, and the helpers that fill, read and check data with the
 * test kernels.
 *
 * Every test starts lms with a small explicit configuration: a device limit
 * of LIMIT_CHUNKS chunks and a host limit of HOST_CHUNKS chunks (some tests
 * restart it with another). Data is checked with the test kernels: a fill
 * writes dev_fill_ref(seed), a checksum reads a range back, and the expected
 * checksum comes from a host image of the allocation built with
 * dev_fill_ref. On sim a kernel that touches memory lms failed to map gets
 * SIGSEGV, so a residency bug ends a test as a crash or a wrong checksum.
 */
#ifndef LMS_TESTS_SWAP_FIXTURE_H
#define LMS_TESTS_SWAP_FIXTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "harness.h"
#include "swap/swap.h"

#define LIMIT_CHUNKS 8
#define HOST_CHUNKS 48
#define HIGH_CHUNKS 2 /* the reclaim thread's high watermark (low: one chunk) */

/* The status every injected driver failure returns. */
#define INJECTED LMS_ERR_DEVICE

/* The device's granularity, set by start. */
extern size_t chunk;

policy_usage_t test_policy_usage(void);

/* The configuration with host_chunks and fault injection on or off (the
 * suites swap and swap_faults start with config(HOST_CHUNKS, false)), and lms
 * started again with another configuration. */
swap_config_t config(size_t host_chunks, bool faults);
void restart(size_t host_chunks, bool faults);

/* Zeroed host memory freed by stop if the test does not unscratch it. */
void *scratch(size_t size);
void unscratch(void *p);

dev_addr_t addr(const void *p);
void *must_malloc(size_t size);
void fill_on(void *p, size_t n, uint64_t seed, lms_access_mode_t mode, lms_stream_t s);
void fill(void *p, size_t n, uint64_t seed);
void checksum_on(const void *p, size_t n, lms_stream_t s, uint64_t *out);
uint64_t read_sum(const void *p, size_t n);
uint64_t fill_sum(size_t n, uint64_t seed);

#define EXPECT_FILLED(p, n, seed)                                                            \
    cr_assert_eq(read_sum((p), (n)), fill_sum((n), (seed)),                                  \
                 "%s (%p, %zu bytes) holds what seed %llu wrote", #p, (void *)(p),          \
                 (size_t)(n), (unsigned long long)(seed))

void check_invariants(const lms_stats_t *st);
void **chunks_filled(size_t n, uint64_t base);
void free_all(void **p, size_t n);
size_t room_chunks(void);
void all_room_is_free_again(void);

void plan(dev_op_t op, uint64_t first, uint64_t count, double probability, uint64_t seed);
void no_faults(void);
void *evicted_chunk(uint64_t seed);

#endif
