/*
 * tests/support/harness.h — what every suite shares: opening the device the
 * run is for, and small builders for mapped memory.
 *
 * A suite is written once and runs on either backend: CTest runs it with
 * LMS_BACKEND=sim (label sim) and again with LMS_BACKEND=cuda (label gpu).
 * When the backend asked for has no device, the test is skipped with the reason.
 * Every suite is linked with the test kernels (kernels.h), so its devices
 * have them.
 */
#ifndef LMS_TEST_HARNESS_H
#define LMS_TEST_HARNESS_H

#include <criterion/criterion.h>

#include "base/base.h"
#include "device/device.h"
#include "device/fault.h"
#include "device/kernels/kernels.h"

/* Settings for the sim backend that keep tests small; a real GPU ignores them. */
#define TEST_SIM_MEMORY (64 * BASE_MiB)
#define TEST_SIM_GRANULARITY (2 * BASE_MiB)

/* The run's config: LMS_BACKEND and LMS_DEVICE from the environment, the sim
 * sized as above. */
dev_config_t test_config(void);

/* Opens cfg's device; skips the test if the backend has no device; fails it
 * on any other error. */
dev_device_t *test_open(const dev_config_t *cfg);

/* test_open(test_config()). */
dev_device_t *test_open_default(void);

bool test_is_sim(const dev_device_t *dev);

/* A reservation of n blocks with n fresh blocks mapped in order and access set. */
typedef struct test_run {
    dev_addr_t base;
    size_t size;
    size_t n;
    dev_block_t *blocks;
} test_run_t;

test_run_t test_run_map(dev_device_t *dev, size_t n);
void test_run_unmap(dev_device_t *dev, test_run_t *run);

/* Runs child(arg) in a forked process whose stderr goes into msg (cap
 * bytes, NUL-terminated; the rest is dropped) and returns its wait status:
 * for tests that expect a process to die with a message. */
int test_child_stderr(void (*child)(void *), void *arg, char *msg, size_t cap);

/* From now on, a SIGSEGV that touches [addr, addr+len) kills the process, as
 * a test with `.signal = SIGSEGV` expects; one anywhere else makes it exit
 * with status 3 instead, so the test fails. */
void test_expect_fault_in(const void *addr, size_t len);

/* A gate that holds a stream's work back until opened: enqueue
 * test_gate_wait as a host function behind test_gate_close(), and open it from
 * this thread or from a thread running test_gate_open_later (200 ms later).
 * On cuda, host functions run one at a time on one driver thread, so while
 * the gate is closed no other host function runs: nothing may wait for one
 * (a checksum delivers its result with one) until the gate opens. */
void test_gate_close(void);
void test_gate_open(void);
bool test_gate_is_open(void);
void test_gate_wait(void *unused);
void *test_gate_open_later(void *unused);
/* A watchdog for a test whose work must NOT wait for the closed gate: it
 * opens the gate after `ms` unless test_gate_watchdog_stop comes first,
 * which opens it then and says whether the watchdog had to (so a wrong wait
 * shows as the gate found open, however slow the machine). */
void test_gate_watchdog_start(unsigned ms);
bool test_gate_watchdog_stop(void);

/* lms_stats(), asserted to succeed. */
lms_stats_t test_stats(void);

/* The stats once lms is idle: the default stream drained and the reclaim
 * thread done (three samples 20 ms apart that agree, within 4 s), as
 * lms_shutdown will find them. */
lms_stats_t test_settled_stats(void);

/* Asserts status == LMS_OK, printing lms_last_error() if not. */
#define TEST_OK(expr)                                                                       \
    do {                                                                                    \
        lms_status_t test_st_ = (expr);                                                     \
        cr_assert_eq(test_st_, LMS_OK, "%s -> %s: %s", #expr, lms_status_str(test_st_),     \
                     lms_last_error());                                                     \
    } while (0)

/* Asserts expr fails with status and leaves a message. */
#define TEST_FAILS(status, expr)                                                            \
    do {                                                                                    \
        lms_status_t test_st_ = (expr);                                                     \
        cr_assert_eq(test_st_, (status), "%s -> %s (%s), expected %s", #expr,               \
                     lms_status_str(test_st_), lms_last_error(), lms_status_str(status));   \
        cr_assert_neq(lms_last_error()[0], '\0', "%s failed without a message", #expr);     \
    } while (0)

#endif
