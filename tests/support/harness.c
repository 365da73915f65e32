/* tests/support/harness.c — see harness.h. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>
#include <sys/wait.h>

#include "harness.h"

dev_config_t test_config(void)
{
    dev_config_t cfg;
    dev_config_from_options(&cfg);
    cfg.sim_memory = TEST_SIM_MEMORY;
    cfg.sim_granularity = TEST_SIM_GRANULARITY;
    return cfg;
}

dev_device_t *test_open(const dev_config_t *cfg)
{
    dev_device_t *dev = NULL;
    lms_status_t st = dev_open(cfg, &dev);
    if (st == LMS_ERR_NO_DEVICE)
        cr_skip_test("no %s device: %s", cfg->backend, lms_last_error());
    cr_assert_eq(st, LMS_OK, "dev_open(%s): %s", cfg->backend, lms_last_error());
    return dev;
}

dev_device_t *test_open_default(void)
{
    dev_config_t cfg = test_config();
    return test_open(&cfg);
}

bool test_is_sim(const dev_device_t *dev)
{
    return strcmp(dev->info.backend, "sim") == 0;
}

test_run_t test_run_map(dev_device_t *dev, size_t n)
{
    size_t g = dev->info.granularity;
    test_run_t run = {.size = n * g, .n = n, .blocks = calloc(n, sizeof(dev_block_t))};
    cr_assert_not_null(run.blocks);
    TEST_OK(dev_va_reserve(dev, run.size, &run.base));
    for (size_t i = 0; i < n; i++) {
        TEST_OK(dev_block_create(dev, &run.blocks[i]));
        TEST_OK(dev_map(dev, run.base + i * g, run.blocks[i]));
    }
    TEST_OK(dev_set_access(dev, run.base, run.size));
    return run;
}

void test_run_unmap(dev_device_t *dev, test_run_t *run)
{
    TEST_OK(dev_unmap(dev, run->base, run->size));
    for (size_t i = 0; i < run->n; i++)
        TEST_OK(dev_block_release(dev, run->blocks[i]));
    TEST_OK(dev_va_free(dev, run->base, run->size));
    free(run->blocks);
    run->blocks = NULL;
}

static uintptr_t fault_lo, fault_hi;

static void on_segv(int sig, siginfo_t *info, void *context)
{
    (void)context;
    uintptr_t a = (uintptr_t)info->si_addr;
    if (a >= fault_lo && a < fault_hi) {
        signal(sig, SIG_DFL); /* the faulting access runs again and kills the process */
        return;
    }
    static const char msg[] = "test: SIGSEGV outside the expected range\n";
    if (write(2, msg, sizeof msg - 1) < 0)
        _exit(3);
    _exit(3);
}

void test_expect_fault_in(const void *addr, size_t len)
{
    fault_lo = (uintptr_t)addr;
    fault_hi = fault_lo + len;
    struct sigaction sa = {.sa_sigaction = on_segv, .sa_flags = SA_SIGINFO};
    sigemptyset(&sa.sa_mask);
    cr_assert_eq(sigaction(SIGSEGV, &sa, NULL), 0);
}

static atomic_int gate;

void test_gate_close(void) { atomic_store(&gate, 0); }

void test_gate_open(void) { atomic_store(&gate, 1); }

bool test_gate_is_open(void) { return atomic_load(&gate); }

void test_gate_wait(void *unused)
{
    (void)unused;
    while (!atomic_load(&gate))
        usleep(1000);
}

void *test_gate_open_later(void *unused)
{
    (void)unused;
    usleep(200000);
    test_gate_open();
    return NULL;
}

static pthread_t watchdog;
static atomic_bool watchdog_stop, watchdog_fired;

static void *watch_gate(void *ms)
{
    for (uintptr_t i = 0; i < (uintptr_t)ms && !atomic_load(&watchdog_stop); i++)
        usleep(1000);
    atomic_store(&watchdog_fired, !atomic_load(&watchdog_stop));
    test_gate_open();
    return NULL;
}

void test_gate_watchdog_start(unsigned ms)
{
    atomic_store(&watchdog_stop, false);
    atomic_store(&watchdog_fired, false);
    cr_assert_eq(pthread_create(&watchdog, NULL, watch_gate, (void *)(uintptr_t)ms), 0);
}

bool test_gate_watchdog_stop(void)
{
    atomic_store(&watchdog_stop, true);
    pthread_join(watchdog, NULL);
    return atomic_load(&watchdog_fired);
}

lms_stats_t test_stats(void)
{
    lms_stats_t st;
    lms_status_t status = lms_stats(&st);
    cr_assert_eq(status, LMS_OK, "lms_stats: %s", lms_last_error());
    return st;
}

lms_stats_t test_settled_stats(void)
{
    lms_status_t status = lms_stream_synchronize(NULL);
    cr_assert_eq(status, LMS_OK, "lms_stream_synchronize: %s", lms_last_error());
    lms_stats_t a = test_stats(), b;
    for (int same = 0, i = 0; same < 3 && i < 200; i++) {
        usleep(20000);
        b = test_stats();
        same = memcmp(&a, &b, sizeof a) == 0 ? same + 1 : 0;
        a = b;
    }
    return a;
}

int test_child_stderr(void (*child)(void *), void *arg, char *msg, size_t cap)
{
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    pid_t pid = fork();
    cr_assert_neq(pid, -1, "fork");
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], STDERR_FILENO);
        child(arg);
        _exit(0);
    }
    close(fds[1]);
    size_t n = 0;
    for (ssize_t r; n < cap - 1 && (r = read(fds[0], msg + n, cap - 1 - n)) > 0;)
        n += (size_t)r;
    msg[n] = '\0';
    close(fds[0]);
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    return status;
}
