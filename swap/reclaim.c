/*
 * swap/reclaim.c — the reclaim thread, which keeps free blocks above the low
 * watermark the way kswapd keeps free pages (Note [Prefetch] in
 * prefetch.c says what the watermarks are while the schedule is followed),
 * and the monotonic clock of residency's timed waits. The thread holds
 * swap_lock except while it waits.
 */
#include "base/lockorder.h"
#include "swap/residency.h"

/* ---- the reclaim thread -------------------------------------------------------- */

/* The reclaim thread's watermarks, in blocks free or on their way, as
 * policy/ plans them (policy_watermarks; Note [Prefetch] in prefetch.c). */
static size_t watermark(bool high)
{
    size_t lo, hi;
    policy_watermarks(resid_by_schedule() ? S->policy : NULL, (int64_t)S->pf.blocks_ahead,
                      S->rc.low, S->rc.high, &lo, &hi);
    return high ? hi : lo;
}

size_t resid_reclaim_low(void) { return watermark(false); }
size_t resid_reclaim_high(void) { return watermark(true); }

/* Keeps free blocks between the watermarks, the way kswapd keeps free pages,
 * and the host pool registered ahead of need. Runs with the lock held, except
 * while it waits. */
static void *reclaim_main(void *arg)
{
    (void)arg;
    lo_lock(&swap_lock, LO_SWAP);
    while (!S->rc.stop) {
        (void)resid_progress();
        resid_prefetch(); /* blocks freed since the last access may take what it reads next */
        size_t have = resid_free_blocks() + S->evicting;
        if (have < resid_reclaim_low()) {
            lms_status_t st;
            resid_evict_some(resid_reclaim_high() - have, true, TIMELINE_BY_RECLAIM, &st);
            if (st != LMS_OK)
                base_log(BASE_LOG_DEBUG, "lms reclaim: %s", lms_last_error());
        }
        hostpool_usage_t hu;
        hostpool_usage(S->host, &hu);
        size_t headroom = 2 * S->rc.high * S->chunk;
        if (hu.registered < hu.limit && hu.registered - hu.allocated < headroom)
            (void)hostpool_reserve(S->host, headroom);
        if (timeline_on)
            timeline_tick();
        if (S->evicting > 0 && transfers_d2h_busy(&S->xfers) &&
            resid_wait_oldest(SIZE_MAX) == LMS_OK)
            continue;
        struct timespec until = base_deadline_in(50 * 1000 * 1000);
        lo_cond_timedwait(&S->rc.wake, &swap_lock, LO_SWAP, &until);
    }
    lo_unlock(&swap_lock, LO_SWAP);
    return NULL;
}

/* Timed waits on the condition variables here run on CLOCK_MONOTONIC: a
 * deadline on the wall clock moved with it, and a step back of the clock
 * (NTP, an administrator) stalled the reclaim thread for as long. */
int resid_cond_init(pthread_cond_t *c)
{
    pthread_condattr_t attr;
    int err = pthread_condattr_init(&attr);
    if (err != 0)
        return err;
    if ((err = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC)) == 0)
        err = pthread_cond_init(c, &attr);
    pthread_condattr_destroy(&attr);
    return err;
}

void resid_start(void)
{
    if (pthread_create(&S->rc.thread, NULL, reclaim_main, NULL) == 0)
        S->rc.started = true;
    else
        base_log(BASE_LOG_WARN, "lms: no reclaim thread; evictions happen on demand only");
}

void resid_stop(void)
{
    if (!S->rc.started)
        return;
    S->rc.stop = true;
    pthread_cond_signal(&S->rc.wake);
    lo_unlock(&swap_lock, LO_SWAP);
    pthread_join(S->rc.thread, NULL);
    lo_lock(&swap_lock, LO_SWAP);
    S->rc.started = false;
}

