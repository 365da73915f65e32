/*
 * swap/residency.h — what residency's files share: residency.c (chunk
 * states, host copies, settling copies, init, frees), evict.c, window.c
 * (access windows: make_room and bring_in), prefetch.c and reclaim.c.
 * Private to them; lms.c sees residency through internal.h's resid_* calls.
 * Every function here assumes swap_lock.
 */
#ifndef LMS_SWAP_RESIDENCY_H
#define LMS_SWAP_RESIDENCY_H

#include "swap/internal.h"
#include "swap/trace.h"

/* ---- residency.c ----------------------------------------------------------- */

/* Resident or host chunks changed: the timeline's memory counter follows. */
static inline void resid_memory_changed(void)
{
    if (timeline_on)
        timeline_memory(S->resident * S->chunk, S->host_chunks * S->chunk);
}

/* Blocks that can be taken without unmapping anything, and those that can be
 * had without evicting anything (cached chunks' blocks too). */
static inline size_t resid_unmapped_blocks(void) { return blocks_unmapped(&S->blocks); }
static inline size_t resid_free_blocks(void) { return resid_unmapped_blocks() + S->chunks.ncached; }

/* Whether eviction follows policy/'s schedule now. */
static inline bool resid_by_schedule(void)
{
    return S->policy != NULL && policy_following(S->policy);
}

/* policy_access; with a timeline, an iteration mark for each iteration the
 * policy found ending with it (Note [Finding the iteration] in policy.c). */
HIDDEN lms_status_t resid_report(size_t first, size_t n, policy_kind_t kind, uint64_t now);

/* Frees chunk c's host copy (once its copy in flight is done, if any). */
HIDDEN void resid_drop_host(size_t c);
/* An extent of the host pool for one chunk's copy. */
HIDDEN lms_status_t resid_host_slot(char **out);
/* How many of the chunks from c on (at most n) have adjacent host copies. */
HIDDEN size_t resid_host_run(size_t c, size_t n);
/* Gives host copy p back to the pool; a refusal (p not the pool's) is logged. */
HIDDEN void resid_host_free(void *p);
/* Whether evicted chunks stay mapped, to their host copy (Note [Evicted
 * chunks stay mapped] in residency.c). */
static inline bool resid_host_mode(void) { return S->resolved.evicted == SWAP_EVICTED_HOST; }
/* Host mode: maps the host copies of [first, first + n) at their VAs; unmaps one. */
HIDDEN lms_status_t resid_host_map(size_t first, size_t n);
HIDDEN lms_status_t resid_host_unmap(size_t c);
/* Maps c's host copy at its VA after its block was unmapped, or (true) its block again. */
HIDDEN bool resid_host_remap_one(size_t c);
/* Note [Remap beside copies]: c no longer waits on its block (touched or
 * freed); retires every chunk that waits (unmap, host map, block back). */
HIDDEN void resid_host_unpend(size_t c);
HIDDEN void resid_host_flush(void);
/* resid_host_flush for an access that waits for the blocks. */
HIDDEN void resid_host_flush_waited(void);
/* Chunk c is mapped on block b / gives its block back, leaving `state`. */
HIDDEN void resid_set_resident(size_t c, dev_block_t b);
HIDDEN void resid_set_unbacked(size_t c, uint8_t state);
/* Unmaps the first cached chunk with no copy in flight, for its block. */
HIDDEN lms_status_t resid_uncache_one(void);

/* Settles the copies that have finished (at most `most` of each direction);
 * resid_progress: all of them. */
HIDDEN lms_status_t resid_progress_upto(size_t most);
HIDDEN lms_status_t resid_progress(void);
/* Waits, lock dropped, for x (resid_wait_oldest: the oldest copy in flight,
 * d2h first) to end, and settles at most `most` copies of each direction. */
HIDDEN lms_status_t resid_wait_xfer(xfer_t *x, size_t most);
HIDDEN lms_status_t resid_wait_oldest(size_t most);

/* ---- evict.c --------------------------------------------------------------- */

HIDDEN bool resid_chunk_evictable(const chunks_t *t, size_t c);
static inline bool resid_evictable(size_t c) { return resid_chunk_evictable(&S->chunks, c); }
/* Starts evicting about `want` chunks (the schedule's victims or the least
 * recently used; with `ahead`, none fetched ahead and unused): how many. */
HIDDEN size_t resid_evict_some(size_t want, bool ahead, timeline_by_t by, lms_status_t *st);
/* The same from the ranked victims [from, n) (S->rank.ranked). */
HIDDEN size_t resid_evict_ranked(size_t from, size_t n, size_t want, bool ahead,
                                 timeline_by_t by, lms_status_t *st);

/* ---- window.c -------------------------------------------------------------- */

/* Maps and fetches what the sorted chunks u[0..n) need (Note [Pipelined
 * swaps]); *brought says how many it kept. */
HIDDEN lms_status_t resid_bring_in(uint32_t *u, size_t n, size_t partial, bool early, bool ahead,
                                   size_t *brought);

/* ---- prefetch.c ------------------------------------------------------------ */

/* Fetches ahead what the schedule reads next, at most a piece (Note [Prefetch]). */
HIDDEN void resid_prefetch(void);
/* Reports the access of the sorted chunks u[0..n) to policy/. */
HIDDEN void resid_report_access(const uint32_t *u, size_t n);

/* ---- reclaim.c ------------------------------------------------------------- */

/* The reclaim thread's watermarks, in blocks free or on their way. */
HIDDEN size_t resid_reclaim_low(void);
HIDDEN size_t resid_reclaim_high(void);

/* pthread_cond_init on CLOCK_MONOTONIC (base_deadline_in's clock). */
HIDDEN int resid_cond_init(pthread_cond_t *c);

#endif /* LMS_SWAP_RESIDENCY_H */
