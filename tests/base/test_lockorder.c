/* tests/base/test_lockorder.c — the lock-order witness (base/lockorder.h,
 * Note [Lock order]), built in here whatever the build type. */
#ifndef LMS_LOCK_ORDER
#define LMS_LOCK_ORDER
#endif
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/lockorder.h"
#include "harness.h"
#include "lockorder_plain.h"

TestSuite(lockorder);

static pthread_mutex_t a = PTHREAD_MUTEX_INITIALIZER, b = PTHREAD_MUTEX_INITIALIZER,
                       c = PTHREAD_MUTEX_INITIALIZER;

Test(lockorder, locks_taken_in_rising_rank_pass)
{
    lo_lock(&a, LO_SWAP);
    lo_lock(&b, LO_DEV_CHECK);
    lo_lock(&c, LO_META);
    cr_assert_eq(lo_depth(), 3);
    lo_unlock(&c, LO_META);
    lo_unlock(&b, LO_DEV_CHECK);
    lo_unlock(&a, LO_SWAP);
    cr_assert_eq(lo_depth(), 0);
}

Test(lockorder, a_lower_rank_taken_under_a_higher_one_aborts, .signal = SIGABRT)
{
    lo_lock(&a, LO_TIMELINE);
    lo_lock(&b, LO_SWAP);
}

Test(lockorder, two_locks_of_one_rank_abort, .signal = SIGABRT)
{
    lo_lock(&a, LO_SIM_STREAM);
    lo_lock(&b, LO_SIM_STREAM);
}

Test(lockorder, a_lock_taken_twice_aborts_rather_than_deadlocks, .signal = SIGABRT)
{
    lo_lock(&a, LO_SWAP);
    lo_lock(&a, LO_SWAP);
}

static void taken_out_of_order(void *arg)
{
    (void)arg;
    lo_lock(&a, LO_TIMELINE);
    lo_lock(&b, LO_SWAP);
}

Test(lockorder, the_abort_names_both_locks)
{
    char msg[1024];
    int status = test_child_stderr(taken_out_of_order, NULL, msg, sizeof msg);
    cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "status %#x", status);
    cr_assert(strstr(msg, "taking swap_lock (swap/lms.c)") != NULL, "%s", msg);
    cr_assert(strstr(msg, "while holding timeline_lock (swap/trace.c)") != NULL, "%s", msg);
    cr_assert(strstr(msg, "Note [Lock order]") != NULL, "%s", msg);
}

Test(lockorder, locks_released_out_of_order_are_forgotten_where_they_are)
{
    lo_lock(&a, LO_SWAP);
    lo_lock(&b, LO_DEV_CHECK);
    lo_lock(&c, LO_TIMELINE);
    lo_unlock(&a, LO_SWAP); /* the first taken, released first */
    cr_assert_eq(lo_depth(), 2);
    lo_unlock(&c, LO_TIMELINE);
    cr_assert_eq(lo_depth(), 1);
    /* b is held still: a lock ranked above it passes, one below it would not */
    pthread_mutex_t d = PTHREAD_MUTEX_INITIALIZER;
    lo_lock(&d, LO_SIM);
    lo_unlock(&d, LO_SIM);
    lo_unlock(&b, LO_DEV_CHECK);
    cr_assert_eq(lo_depth(), 0);
    lo_lock(&a, LO_SWAP); /* and the lowest may be taken again */
    lo_unlock(&a, LO_SWAP);
}

Test(lockorder, a_lower_rank_still_aborts_after_an_out_of_order_release, .signal = SIGABRT)
{
    lo_lock(&a, LO_SWAP);
    lo_lock(&b, LO_TIMELINE);
    lo_unlock(&a, LO_SWAP);
    lo_lock(&c, LO_DEV_CHECK); /* under timeline_lock, still held */
}

Test(lockorder, releasing_a_lock_not_held_aborts, .signal = SIGABRT)
{
    lo_unlock(&a, LO_SWAP);
}

Test(lockorder, a_trylock_is_not_checked_but_its_lock_counts_as_held)
{
    lo_lock(&c, LO_META);
    cr_assert(lo_trylock(&a, LO_SWAP)); /* never waits: no deadlock to fear */
    cr_assert_eq(lo_depth(), 2);
    lo_unlock(&c, LO_META);
    lo_unlock(&a, LO_SWAP);
    cr_assert_eq(lo_depth(), 0);
}

static void *try_a(void *arg)
{
    (void)arg;
    bool taken = lo_trylock(&a, LO_SWAP);
    return (void *)(uintptr_t)(taken + 2 * lo_depth());
}

Test(lockorder, a_failed_trylock_holds_nothing_and_each_thread_has_its_own_set)
{
    lo_lock(&a, LO_SWAP);
    pthread_t t;
    void *answer;
    cr_assert_eq(pthread_create(&t, NULL, try_a, NULL), 0);
    cr_assert_eq(pthread_join(t, &answer), 0);
    cr_assert_eq((uintptr_t)answer, 0, "the other thread: taken + 2 x depth = %zu",
                 (size_t)(uintptr_t)answer);
    cr_assert_eq(lo_depth(), 1);
    lo_unlock(&a, LO_SWAP);
}

Test(lockorder, a_condition_wait_gives_its_lock_up_and_takes_it_back)
{
    pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    lo_lock(&a, LO_SWAP);
    cr_assert_eq(lo_cond_timedwait(&cond, &a, LO_SWAP, &until), ETIMEDOUT);
    cr_assert_eq(lo_depth(), 1);
    lo_unlock(&a, LO_SWAP);
    cr_assert_eq(lo_depth(), 0);
}

Test(lockorder, a_condition_wait_under_a_higher_lock_aborts, .signal = SIGABRT)
{
    pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    lo_lock(&a, LO_SWAP);
    lo_lock(&b, LO_TIMELINE);
    lo_cond_timedwait(&cond, &a, LO_SWAP, &until); /* swap_lock retaken under timeline_lock */
}

Test(lockorder, a_forked_child_starts_with_the_forking_threads_locks)
{
    lo_lock(&a, LO_SWAP); /* as swap/init.c's prepare handler leaves it */
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        unsigned before = lo_depth();
        lo_unlock(&a, LO_SWAP); /* as its child handler does */
        _exit(before == 1 && lo_depth() == 0 ? 0 : 1);
    }
    lo_unlock(&a, LO_SWAP);
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %#x", status);
}

Test(lockorder, without_lms_lock_order_the_wrappers_are_plain_pthread_calls)
{
    cr_assert_eq(plain_depth_while_held(&a, &c), 0);
    cr_assert_eq(lo_depth(), 0);
}
