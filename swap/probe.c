/*
 * swap/probe.c — swap.h's look inside, for tests and tools: copies of
 * residency's counters and a chunk's state, taken under swap_lock.
 */
#include "base/lockorder.h"
#include "swap/internal.h"
#include "swap/trace.h"

_Static_assert((int)SWAP_CHUNK_UNBACKED == UNBACKED && (int)SWAP_CHUNK_RESIDENT == RESIDENT &&
                   (int)SWAP_CHUNK_EVICTING == EVICTING && (int)SWAP_CHUNK_HOST == HOST &&
                   (int)SWAP_CHUNK_FETCHING == FETCHING,
               "swap.h's chunk states are chunks.h's");

lms_status_t swap_probe(swap_probe_t *out)
{
    if (out == NULL)
        return base_fail(LMS_ERR_INVALID, "swap_probe: NULL out");
    lo_lock(&swap_lock, LO_SWAP);
    lms_status_t st = LMS_OK;
    if (S == NULL) {
        st = base_fail(LMS_ERR_INVALID, "swap_probe: lms is not initialized");
    } else {
        *out = (swap_probe_t){.h2d_queued = transfers_h2d_queued(&S->xfers),
                              .rankings_full = ranking_fulls(&S->rank),
                              .rankings_head = S->rank.rankings_head,
                              .has_policy = S->policy != NULL,
                              .remaps_beside = S->pf.remaps_beside,
                              .remaps_deferred = S->pf.remaps_deferred,
                              .remaps_waiting = S->pf.remaps};
        for (size_t c = 0; c < S->chunks.n && S->resolved.evicted == SWAP_EVICTED_HOST; c++)
            out->host_unmapped +=
                S->chunks.ch[c].state != UNBACKED && S->chunks.ch[c].va == VA_NONE;
        if (S->policy != NULL)
            policy_usage(S->policy, &out->policy);
    }
    lo_unlock(&swap_lock, LO_SWAP);
    return st;
}

lms_status_t swap_chunk_state(const void *ptr, swap_chunk_state_t *out)
{
    if (out == NULL)
        return base_fail(LMS_ERR_INVALID, "swap_chunk_state: NULL out");
    lo_lock(&swap_lock, LO_SWAP);
    dev_addr_t a = (dev_addr_t)(uintptr_t)ptr;
    lms_status_t st = LMS_OK;
    if (S == NULL)
        st = base_fail(LMS_ERR_INVALID, "swap_chunk_state: lms is not initialized");
    else if (a < S->base || a - S->base >= S->va_size)
        st = base_fail(LMS_ERR_INVALID, "swap_chunk_state: %p is outside lms's range", ptr);
    else
        *out = (swap_chunk_state_t)S->chunks.ch[(a - S->base) / S->chunk].state;
    lo_unlock(&swap_lock, LO_SWAP);
    return st;
}

lms_status_t swap_link_busy(swap_link_busy_t *out)
{
    if (out == NULL)
        return base_fail(LMS_ERR_INVALID, "swap_link_busy: NULL out");
    lo_lock(&swap_lock, LO_SWAP);
    lms_status_t st = LMS_OK;
    if (S == NULL)
        st = base_fail(LMS_ERR_INVALID, "swap_link_busy: lms is not initialized");
    else if (!timeline_on && !S->cfg.measure_links)
        st = base_fail(LMS_ERR_INVALID, "swap_link_busy: the links are not measured (set "
                                        "swap_config_t.measure_links, or LMS_TRACE)");
    else
        timeline_link_busy(&out->h2d_ns, &out->d2h_ns, &out->both_ns);
    lo_unlock(&swap_lock, LO_SWAP);
    return st;
}

dev_stream_t *swap_copy_stream(bool h2d)
{
    lo_lock(&swap_lock, LO_SWAP);
    dev_stream_t *s = S == NULL ? NULL : transfers_stream(&S->xfers, !h2d);
    lo_unlock(&swap_lock, LO_SWAP);
    return s;
}

lms_status_t swap_set_flush_bytes(size_t bytes)
{
    lo_lock(&swap_lock, LO_SWAP);
    lms_status_t st = LMS_OK;
    if (S == NULL || bytes == 0)
        st = base_fail(LMS_ERR_INVALID, "swap_set_flush_bytes: %s",
                       S == NULL ? "lms is not initialized" : "0 bytes");
    else
        S->streams.flush_bytes = bytes;
    lo_unlock(&swap_lock, LO_SWAP);
    return st;
}

lms_status_t swap_settle_released(void)
{
    lo_lock(&swap_lock, LO_SWAP);
    lms_status_t st = S == NULL ? base_fail(LMS_ERR_INVALID, "swap_settle_released: lms is not "
                                                             "initialized")
                                : swap_sync_released();
    lo_unlock(&swap_lock, LO_SWAP);
    return st;
}

void swap_lock_hold(void) { lo_lock(&swap_lock, LO_SWAP); }

void swap_lock_release(void) { lo_unlock(&swap_lock, LO_SWAP); }
