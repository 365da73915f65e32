/*
 * policy/ — decisions, pure C, no device calls (DESIGN.md: policy/): what
 * to evict and what to prefetch, learnt from the schedule of a training
 * iteration. swap/ reports what the program touches and asks; the trace
 * simulator (bench/simulate) drives the same code at any scale.
 *
 *   event      one access of a run of consecutive chunk ids, of a kind: a
 *              use (its data is needed), an overwrite (every byte of the run
 *              is written before any is read: the old data is dead), or a
 *              free (dead too). policy_access records one.
 *   iteration  the events between two boundaries. A boundary is a
 *              policy_mark_iteration call; a program that never calls it
 *              gets boundaries found in the repeating sequence of events
 *              (Note [Finding the iteration] in policy.c).
 *   schedule   the last complete iteration: the oracle for the current one.
 *   position   where the current iteration is in the schedule: the index of
 *              the event expected next. Events are matched against the
 *              schedule as they come, a few inserted, missing or changed
 *              ones tolerated (Note [Following the schedule]).
 *   next use   of a chunk: events from the position until the schedule next
 *              names it, wrapping into the iteration after.
 *   following  whether eviction goes by the schedule (Belady's MIN: the
 *              chunk used furthest ahead goes first; a chunk freed before
 *              its next use, before all) or by recency
 *              (LRU). LRU while there is no schedule, while more than
 *              miss_threshold of the last POLICY_WINDOW events were not the
 *              ones the schedule expected, and always with .lru set.
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
    size_t nchunks;        /* chunk ids are 0 .. nchunks - 1; at most 2^32 - 2 */
    bool lru;              /* never follow a schedule (LMS_POLICY=lru) */
    double miss_threshold; /* of the last POLICY_WINDOW events; 0: 0.25 */
} policy_config_t;

#define POLICY_WINDOW 64

typedef enum policy_kind {
    POLICY_USE,       /* reads the run, or writes part of it: its data is needed */
    POLICY_OVERWRITE, /* writes all of it before reading any: its data is dead */
    POLICY_FREE,      /* frees it: dead too */
} policy_kind_t;

/* A next use the schedule does not know: the chunk is not in it. */
#define POLICY_NEVER UINT64_MAX

lms_status_t policy_create(const policy_config_t *cfg, policy_t **out);
void policy_destroy(policy_t *p);

/* Records an event: chunks [first, first + n) are accessed as `kind`, at
 * now_ns (any clock that does not go back; 0 throughout if there is none:
 * then policy_prefetch has no time to go by). May end an iteration found
 * automatically. LMS_ERR_INVALID, recording nothing, if the run is empty or
 * leaves the range, or kind is not a kind; LMS_ERR_OUT_OF_MEMORY if the host
 * has no memory for it (nothing recorded either). */
lms_status_t policy_access(policy_t *p, size_t first, size_t n, policy_kind_t kind,
                           uint64_t now_ns);

/* Ends the current iteration: its events become the schedule (an iteration
 * with none leaves the old schedule in place) and a new iteration starts at
 * position 0. From the first call on, boundaries come only from here.
 * LMS_ERR_OUT_OF_MEMORY, with the old schedule and the current iteration
 * kept, if the host has no memory for the new schedule. */
lms_status_t policy_mark_iteration(policy_t *p);

/* Changes whenever an answer of policy_evict_key may have: at each event and
 * each mark. For a caller that keeps a ranking. */
uint64_t policy_version(const policy_t *p);

/* Changes whenever the order of policy_evict_key's answers among chunks no
 * event named since may change otherwise than by the position moving: a
 * schedule taken (each iteration's end), following starting or stopping.
 * While it stays, such chunks keep their order, except those whose next
 * use the position skipped over (they rank as needed sooner than they
 * are). For a caller that repairs a ranking instead of ranking again. */
uint64_t policy_basis(const policy_t *p);

/* Whether there is a schedule, and whether eviction follows it now. */
bool policy_has_schedule(const policy_t *p);
bool policy_following(const policy_t *p);

/* Events from the position until the schedule next names chunk: 0 if the
 * event at the position does; past the schedule's end, counted into the
 * next iteration. POLICY_NEVER if there is no schedule, the chunk is not in
 * it, or chunk is out of range. With dead != NULL, *dead says whether that
 * event is an overwrite or a free (false for POLICY_NEVER). */
uint64_t policy_next_use(const policy_t *p, size_t chunk, bool *dead);

/* Of the n candidate chunks, the index of the one to evict, -1 if n is 0.
 * Following: one whose next event is a free, else the one whose next event
 * is furthest ahead (POLICY_NEVER first; an overwrite counts as a use: it
 * needs a block then, and the data it replaces is still copied out, since
 * a prediction must not lose data — Note [Dead data] in policy.c); else
 * the least recently accessed (never accessed first). Among equals the
 * first. */
long policy_victim(const policy_t *p, const uint32_t *candidates, size_t n);

/* Ranks like policy_victim: a higher key is evicted first. */
uint64_t policy_evict_key(const policy_t *p, size_t chunk);

/* The link prefetches travel on, for policy_prefetch's time-ahead bound. */
typedef struct policy_link {
    double bytes_per_ns;  /* 0: unknown, no time bound */
    size_t chunk_bytes;
    size_t max_events;    /* events looked ahead at most; 0: an iteration */
    size_t free_blocks;   /* blocks free now (or on their way): past the
                             horizon, fetches into these only (Note [Prefetch
                             horizon]); 0: none past it */
    size_t queued_bytes;  /* on their way to the device now */
    double d2h_bytes_per_ns; /* the other way: policy_evict_ahead's; 0: unknown, none */
} policy_link_t;

/* What a chunk is, as far as its next event is concerned (policy_prefetch
 * asks the caller). */
typedef enum policy_need {
    POLICY_HAS,     /* resident, or on its way: nothing */
    POLICY_ON_HOST, /* its data is on the host: a use needs a fetch, an overwrite a block */
    POLICY_NO_DATA, /* no block and no data: any event but a free needs a block */
    POLICY_CLAIMED, /* no block, and not a prefetch's to fetch: its eviction is in
                       flight, or an access under way brings it in; any event but a
                       free needs a block for it */
} policy_need_t;

typedef struct policy_fetch {
    uint32_t chunk;
    uint64_t events; /* its next use, as policy_next_use */
    uint64_t ns;     /* the time until then, as the schedule took it */
    uint64_t evict_after; /* a chunk evicted to make room for it must have its
                             next use (policy_evict_key) after this many events */
    int64_t blocks_before; /* blocks the events before it need, less those their
                              frees give back, its earlier fetches included:
                              free blocks go to those first (Note [Prefetch
                              without harm]) */
    int64_t victim; /* policy_plan_prefetch's placement: -1 a free block (or one
                       on its way), else the ranked victim whose block it takes */
} policy_fetch_t;

/* What to fetch ahead, in order of use: the chunks whose data the upcoming
 * events of the schedule use (overwrites and frees need none) and that
 * needs(arg, chunk) says are on the host, each once, at most max, and not
 * more than one iteration (or link->max_events) ahead. Only while
 * following. A chunk is taken only while its use is close enough that
 * fetching it now is not early: while the time until it is at most twice
 * what the link needs for it and those taken before it, plus twice the
 * mean time of an event (Note [Prefetch horizon]). Past that, with
 * link->free_blocks, it goes on while the link's queue
 * (link->queued_bytes and the chunks taken) is under two event times,
 * taking chunks for free blocks only (evict_after UINT64_MAX) while the
 * chunks taken and the most new data needs before each leave one of
 * link->free_blocks free (blocks_before counts both). Returns
 * how many it put in out. The caller, with `spare` free blocks and the
 * evictable chunks ranked by policy_evict_key (highest first), fetches
 * them in order: fetch i into a free block if blocks_before < spare, else
 * in place of the ranked chunk blocks_before - spare, if its key is above
 * evict_after (Note [Prefetch without harm]); it stops at the first it
 * cannot place. With blocks_ahead != NULL, *blocks_ahead is the most
 * blocks the events looked at (to the horizon, or to where the max-th
 * fetch was found) need at any point for new data (overwrites, chunks with
 * no data; less what frees give back), fetches not counted: what is worth
 * keeping free ahead of them. Uses
 * scratch state: not concurrent with any other call. */
size_t policy_prefetch(policy_t *p, const policy_link_t *link,
                       policy_need_t (*needs)(void *arg, uint32_t chunk), void *arg,
                       policy_fetch_t *out, size_t max, int64_t *blocks_ahead);

/* ---- the plan (policy/plan.c, Note [One plan]) ------------------------------- */

/* The caller's blocks, for a plan. */
typedef struct policy_room {
    size_t spare;   /* free and not promised to an access, or on their way out */
    size_t reserve; /* of those, kept free by the reclaim thread (swap/: 1) */
} policy_room_t;

/* The blocks the reclaim thread keeps free (Note [Prefetch without harm]). */
#define POLICY_RESERVE 1

/* A plan's room, as every caller counts it (Note [One plan]): the free
 * blocks and those on their way out, less those already promised to a
 * fetch that waits for one, with the reclaim thread's reserve. */
policy_room_t policy_room_of(size_t free_blocks, size_t leaving, size_t promised);

/* What a caller knows of a chunk, for policy_need_of (Note [One plan]):
 * the facts every caller can state of its own chunks, so that what a chunk
 * needs is decided here, once. */
typedef struct policy_chunk_facts {
    bool block;    /* it has a block: resident, or its fetch is under way */
    bool promised; /* it has none, but a fetch waits for one for it (that block
                      is not in the room) */
    bool leaving;  /* its eviction is in flight */
    bool held;     /* an access under way names it (one is reported once its
                      chunks are in: until then its need is not in the schedule
                      ahead) */
    bool data;     /* its data lives (on the host, when it has no block) */
} policy_chunk_facts_t;

/* The need of a chunk with these facts: POLICY_HAS with a block or one
 * promised; POLICY_CLAIMED while leaving or held (it needs a block at its
 * next event, but is not a prefetch's to fetch); else POLICY_ON_HOST with
 * data, POLICY_NO_DATA without. */
policy_need_t policy_need_of(policy_chunk_facts_t f);

/* The caller's evictable chunks, ranked as policy_evict_key ranks them
 * (highest first). */
typedef struct policy_victims {
    /* Ranks at least depth of them, where there are that many (it may rank
     * more, or answer from a ranking made before in the same plan); how
     * many are ranked. */
    size_t (*rank)(void *arg, size_t depth);
    uint64_t (*key)(void *arg, size_t i); /* of the i-th ranked, i below rank's answer */
    void *arg;
} policy_victims_t;

typedef struct policy_plan {
    size_t placed;        /* out[0 .. placed) have a place (their victim field) */
    size_t evict;         /* the ranked victims [0, evict) go now, for them */
    size_t ranked;        /* rank's last answer (0: not asked) */
    int64_t blocks_ahead; /* policy_prefetch's: what new data ahead needs */
} policy_plan_t;

/* policy_prefetch's fetches (into out, at most max; how many), each placed
 * as Note [Prefetch without harm] says, in order: fetch i into a free block
 * (victim -1) if its blocks_before is below room->spare less room->reserve,
 * else in place of the ranked victim blocks_before less that many down, if
 * its key is above the fetch's evict_after; the first that cannot be placed
 * ends the placement (plan->placed). The caller evicts the ranked victims
 * [0, plan->evict) now and fetches the placed ones as their blocks come
 * free, stopping at the first it cannot. */
size_t policy_plan_prefetch(policy_t *p, const policy_link_t *link,
                            policy_need_t (*needs)(void *arg, uint32_t chunk), void *arg,
                            const policy_room_t *room, const policy_victims_t *victims,
                            policy_fetch_t *out, size_t max, policy_plan_t *plan);

/* The placement alone, of fetch[0 .. n) (policy_prefetch's), into plan's
 * placed, evict and ranked (its blocks_ahead left as it is). */
void policy_plan_place(policy_fetch_t *fetch, size_t n, const policy_room_t *room,
                       const policy_victims_t *victims, policy_plan_t *plan);

/* Eviction ahead (Note [Eviction ahead] in policy.c): how many of the
 * ranked victims, from *from on (those before are freed before their next
 * use: not copied out for nothing), to start evicting now so that the D2H
 * link (link->d2h_bytes_per_ns, at half for slack) frees in time the blocks
 * the events ahead need beyond room->spare, the first link->max_events of
 * them (0: an iteration), counting only victims MIN would evict before
 * their next use. 0 while not following or with no D2H rate. Walks the
 * schedule every few events (the rest of the time its last walk serves);
 * uses scratch state: not concurrent with any other call. */
size_t policy_evict_ahead(policy_t *p, const policy_link_t *link,
                          policy_need_t (*needs)(void *arg, uint32_t chunk), void *arg,
                          const policy_room_t *room, const policy_victims_t *victims, size_t *from);

/* The reclaim thread's watermarks, in blocks free or on their way out, into
 * *lo and *hi: while p follows its schedule, what new data ahead needs
 * (blocks_ahead, at least 1) for both: more free blocks only make the
 * device smaller; else low and high (LMS_RECLAIM_LOW and _HIGH). p may be
 * NULL (no policy: the configured ones). */
void policy_watermarks(const policy_t *p, int64_t blocks_ahead, size_t low, size_t high,
                       size_t *lo, size_t *hi);

typedef struct policy_usage {
    size_t schedule_events; /* events in the schedule, 0 if none */
    size_t position;        /* in the schedule */
    size_t recorded;        /* events recorded in the current iteration */
    uint64_t iterations;    /* boundaries that made a schedule */
    uint64_t found;         /* of those, found automatically */
    uint64_t hits, misses;  /* events the schedule expected, and not, ever */
    uint64_t fallbacks;     /* times following stopped */
    bool following;
} policy_usage_t;
void policy_usage(const policy_t *p, policy_usage_t *out);

#endif /* LMS_POLICY_H */
