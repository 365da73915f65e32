/*
 * swap/probe.c — swap.h's look inside, for tests and tools: copies of
 * residency's counters and a chunk's state, taken under swap_lock.
 */
#include "swap/internal.h"

_Static_assert((int)SWAP_CHUNK_UNBACKED == UNBACKED && (int)SWAP_CHUNK_RESIDENT == RESIDENT &&
                   (int)SWAP_CHUNK_EVICTING == EVICTING && (int)SWAP_CHUNK_HOST == HOST &&
                   (int)SWAP_CHUNK_FETCHING == FETCHING,
               "swap.h's chunk states are chunks.h's");

lms_status_t swap_probe(swap_probe_t *out)
{
    if (out == NULL)
        return base_fail(LMS_ERR_INVALID, "swap_probe: NULL out");
    pthread_mutex_lock(&swap_lock);
    lms_status_t st = LMS_OK;
    if (S == NULL) {
        st = base_fail(LMS_ERR_INVALID, "swap_probe: lms is not initialized");
    } else {
        *out = (swap_probe_t){.h2d_queued = transfers_h2d_queued(&S->xfers),
                              .rankings_full = ranking_fulls(&S->rank),
                              .rankings_head = S->rank.rankings_head,
                              .has_policy = S->policy != NULL};
        if (S->policy != NULL)
            policy_usage(S->policy, &out->policy);
    }
    pthread_mutex_unlock(&swap_lock);
    return st;
}

lms_status_t swap_chunk_state(const void *ptr, swap_chunk_state_t *out)
{
    if (out == NULL)
        return base_fail(LMS_ERR_INVALID, "swap_chunk_state: NULL out");
    pthread_mutex_lock(&swap_lock);
    dev_addr_t a = (dev_addr_t)(uintptr_t)ptr;
    lms_status_t st = LMS_OK;
    if (S == NULL)
        st = base_fail(LMS_ERR_INVALID, "swap_chunk_state: lms is not initialized");
    else if (a < S->base || a - S->base >= S->va_size)
        st = base_fail(LMS_ERR_INVALID, "swap_chunk_state: %p is outside lms's range", ptr);
    else
        *out = (swap_chunk_state_t)S->chunks.ch[(a - S->base) / S->chunk].state;
    pthread_mutex_unlock(&swap_lock);
    return st;
}

dev_stream_t *swap_copy_stream(bool h2d)
{
    pthread_mutex_lock(&swap_lock);
    dev_stream_t *s = S == NULL ? NULL : h2d ? transfers_stream(&S->xfers, false) : transfers_stream(&S->xfers, true);
    pthread_mutex_unlock(&swap_lock);
    return s;
}

lms_status_t swap_set_flush_bytes(size_t bytes)
{
    pthread_mutex_lock(&swap_lock);
    lms_status_t st = LMS_OK;
    if (S == NULL || bytes == 0)
        st = base_fail(LMS_ERR_INVALID, "swap_set_flush_bytes: %s",
                       S == NULL ? "lms is not initialized" : "0 bytes");
    else
        S->streams.flush_bytes = bytes;
    pthread_mutex_unlock(&swap_lock);
    return st;
}

lms_status_t swap_settle_released(void)
{
    pthread_mutex_lock(&swap_lock);
    lms_status_t st = S == NULL ? base_fail(LMS_ERR_INVALID, "swap_settle_released: lms is not "
                                                             "initialized")
                                : swap_sync_released();
    pthread_mutex_unlock(&swap_lock);
    return st;
}

void swap_lock_hold(void) { pthread_mutex_lock(&swap_lock); }

void swap_lock_release(void) { pthread_mutex_unlock(&swap_lock); }
