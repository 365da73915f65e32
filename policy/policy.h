/*
 * policy/ — decisions, pure C, no device calls (DESIGN.md: policy/): what
 * to evict and, later, what to prefetch, learnt from the schedule of a
 * training iteration.
 *
 * This first part is the schedule and its next-use oracle:
 *   event      one access: a run of consecutive chunk ids, in the order
 *              swap/ reports them (policy_access).
 *   iteration  the events between two policy_mark_iteration calls.
 *   schedule   the last complete iteration: the oracle for the current one.
 *              Event i of the current iteration is taken to be event i of
 *              the schedule (placement is deterministic, so a repeating
 *              training step repeats its chunk ids: alloc.h).
 *   position   events recorded in the current iteration so far.
 *   next use   of a chunk: events from the position until the schedule next
 *              names it, wrapping into the iteration after (Belady's MIN
 *              evicts the chunk whose next use is furthest).
 * Not yet here (issue 5): automatic iteration boundaries, the check that the
 * current iteration still follows the schedule (and the LRU fallback),
 * prefetch, frees (dead data), and the wiring into swap/.
 *
 * No lock: the caller serializes every call.
 */
#ifndef LMS_POLICY_H
#define LMS_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lms.h"

typedef struct policy policy_t;

typedef struct policy_config {
    size_t nchunks; /* chunk ids are 0 .. nchunks - 1; at most 2^32 - 1 */
} policy_config_t;

/* A next use the schedule does not know: the chunk is not in it. */
#define POLICY_NEVER UINT64_MAX

lms_status_t policy_create(const policy_config_t *cfg, policy_t **out);
void policy_destroy(policy_t *p);

/* Records an access of chunks [first, first + n) as the next event of the
 * current iteration. LMS_ERR_INVALID, recording nothing, if the run is empty
 * or leaves the range; LMS_ERR_OUT_OF_MEMORY if the host has no memory for
 * it (nothing recorded either). */
lms_status_t policy_access(policy_t *p, size_t first, size_t n);

/* Ends the current iteration: its events become the schedule (an iteration
 * with none leaves the old schedule in place) and a new iteration starts at
 * position 0. LMS_ERR_OUT_OF_MEMORY, with the old schedule and the current
 * iteration kept, if the host has no memory for the new schedule's index. */
lms_status_t policy_mark_iteration(policy_t *p);

/* Whether there is a schedule to ask. */
bool policy_has_schedule(const policy_t *p);

/* Events from the current position until the schedule next names chunk:
 * 0 if the event at the position does; past the schedule's end, counted
 * into the next iteration. POLICY_NEVER if there is no schedule, the chunk
 * is not in it, or chunk is out of range. */
uint64_t policy_next_use(const policy_t *p, size_t chunk);

/* Of the n candidate chunks, the index of the one to evict: the furthest
 * next use (POLICY_NEVER first); among equals the first. -1 if n is 0. */
long policy_victim(const policy_t *p, const uint32_t *candidates, size_t n);

typedef struct policy_usage {
    size_t schedule_events; /* events in the schedule, 0 if none */
    size_t position;        /* events recorded in the current iteration */
    uint64_t iterations;    /* marks that made a schedule */
} policy_usage_t;
void policy_usage(const policy_t *p, policy_usage_t *out);

#endif /* LMS_POLICY_H */
