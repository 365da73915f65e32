/*
 * policy/policy.c — the schedule and its next-use oracle. See policy.h.
 *
 * Owns (host metadata, base_meta_*):
 *   cur[]      the current iteration's events, in order.
 *   sched[]    the schedule's events (the last complete iteration).
 *   start[], use[]  the schedule's index: the events that name chunk c are
 *              use[start[c] .. start[c + 1]), ascending, so a next use is a
 *              binary search. Built whole at each mark; the old index stays
 *              until the new one exists.
 * Event indices and use counts are 32-bit: an iteration of 2^32 - 1 events
 * or chunk uses is refused (LMS_ERR_OUT_OF_MEMORY).
 */
#include "policy/policy.h"
#include "base/base.h"

typedef struct event {
    uint32_t first, n;
} event_t;

struct policy {
    size_t nchunks;
    event_t *cur, *sched;
    size_t ncur, capcur, nsched, capsched;
    uint32_t *start; /* nchunks + 1, or NULL without a schedule */
    uint32_t *use;
    uint64_t iterations;
};

lms_status_t policy_create(const policy_config_t *cfg, policy_t **out)
{
    if (cfg == NULL || out == NULL || cfg->nchunks == 0 || cfg->nchunks >= UINT32_MAX)
        return base_fail(LMS_ERR_INVALID, "policy: 1 .. 2^32 - 2 chunks, not %zu",
                         cfg != NULL ? cfg->nchunks : 0);
    policy_t *p = base_meta_calloc(1, sizeof *p);
    if (p == NULL)
        return base_fail(LMS_ERR_OUT_OF_MEMORY, "policy: no host memory");
    p->nchunks = cfg->nchunks;
    *out = p;
    return LMS_OK;
}

void policy_destroy(policy_t *p)
{
    if (p == NULL)
        return;
    base_meta_free(p->cur);
    base_meta_free(p->sched);
    base_meta_free(p->start);
    base_meta_free(p->use);
    base_meta_free(p);
}

lms_status_t policy_access(policy_t *p, size_t first, size_t n)
{
    if (n == 0 || first >= p->nchunks || n > p->nchunks - first)
        return base_fail(LMS_ERR_INVALID, "policy_access: chunks [%zu, +%zu) are not a run of "
                         "the %zu chunks", first, n, p->nchunks);
    if (p->ncur == p->capcur) {
        size_t cap = p->capcur ? 2 * p->capcur : 1024;
        if (cap >= UINT32_MAX)
            cap = UINT32_MAX - 1;
        event_t *e = cap > p->ncur ? base_meta_realloc(p->cur, cap * sizeof *e) : NULL;
        if (e == NULL)
            return base_fail(LMS_ERR_OUT_OF_MEMORY, "policy_access: no host memory for an "
                             "iteration of more than %zu events", p->ncur);
        p->cur = e;
        p->capcur = cap;
    }
    p->cur[p->ncur++] = (event_t){(uint32_t)first, (uint32_t)n};
    return LMS_OK;
}

lms_status_t policy_mark_iteration(policy_t *p)
{
    if (p->ncur == 0)
        return LMS_OK;
    uint64_t total = 0;
    for (size_t i = 0; i < p->ncur; i++)
        total += p->cur[i].n;
    uint32_t *start = total < UINT32_MAX ? base_meta_calloc(p->nchunks + 1, sizeof *start) : NULL;
    uint32_t *use = start != NULL ? base_meta_alloc((size_t)total * sizeof *use) : NULL;
    if (use == NULL) {
        base_meta_free(start);
        return base_fail(LMS_ERR_OUT_OF_MEMORY, "policy: no host memory for a schedule of %zu "
                         "events (%llu chunk uses)", p->ncur, (unsigned long long)total);
    }
    /* counts in start[c + 1], then start[c] = where c's uses begin, used as
     * a cursor while filling (it ends where c + 1's begin), then shifted */
    for (size_t i = 0; i < p->ncur; i++)
        for (uint32_t c = p->cur[i].first; c < p->cur[i].first + p->cur[i].n; c++)
            start[c + 1]++;
    for (size_t c = 0; c < p->nchunks; c++)
        start[c + 1] += start[c];
    for (size_t i = 0; i < p->ncur; i++)
        for (uint32_t c = p->cur[i].first; c < p->cur[i].first + p->cur[i].n; c++)
            use[start[c]++] = (uint32_t)i;
    for (size_t c = p->nchunks; c > 0; c--)
        start[c] = start[c - 1];
    start[0] = 0;
    base_meta_free(p->start);
    base_meta_free(p->use);
    p->start = start;
    p->use = use;
    /* the current events become the schedule; its old buffer, the next iteration's */
    event_t *e = p->sched;
    size_t cap = p->capsched;
    p->sched = p->cur;
    p->nsched = p->ncur;
    p->capsched = p->capcur;
    p->cur = e;
    p->capcur = cap;
    p->ncur = 0;
    p->iterations++;
    return LMS_OK;
}

bool policy_has_schedule(const policy_t *p) { return p->start != NULL; }

uint64_t policy_next_use(const policy_t *p, size_t chunk)
{
    if (p->start == NULL || chunk >= p->nchunks || p->start[chunk] == p->start[chunk + 1])
        return POLICY_NEVER;
    const uint32_t *u = p->use + p->start[chunk];
    size_t lo = 0, hi = p->start[chunk + 1] - p->start[chunk], pos = p->ncur;
    while (lo < hi) { /* the first use at or after pos */
        size_t mid = lo + (hi - lo) / 2;
        if (u[mid] < pos)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < p->start[chunk + 1] - p->start[chunk])
        return u[lo] - pos;
    /* none left in this iteration: its first use in the next one (an
     * iteration already longer than the schedule counts from its start) */
    return (pos < p->nsched ? p->nsched - pos : 0) + u[0];
}

long policy_victim(const policy_t *p, const uint32_t *candidates, size_t n)
{
    long best = -1;
    uint64_t furthest = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t d = policy_next_use(p, candidates[i]);
        if (best < 0 || d > furthest) {
            best = (long)i;
            furthest = d;
        }
    }
    return best;
}

void policy_usage(const policy_t *p, policy_usage_t *out)
{
    *out = (policy_usage_t){.schedule_events = p->start != NULL ? p->nsched : 0,
                            .position = p->ncur,
                            .iterations = p->iterations};
}
