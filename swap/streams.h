/*
 * swap/streams.h — lms streams: the slot table and its handles, each
 * stream's pending frees (deques) and fences (Note [Stream-ordered free]
 * in streams.c). Guarded by swap_lock.
 */
#ifndef LMS_SWAP_STREAMS_H
#define LMS_SWAP_STREAMS_H

#include "alloc/alloc.h"
#include "lms.h"
#include "swap/events.h"

#define MAX_STREAMS 0xffffu
#define USE_RING 16 /* events a stream keeps after its recent access windows */

typedef struct pending {
    size_t offset; /* of the freed allocation */
    size_t size;   /* its usable size */
    uint64_t epoch;
} pending_t;

/* A ring of pending entries, oldest at the bottom: the stream reuses from the
 * top, fences release from the bottom. */
typedef struct deque {
    pending_t *items;
    size_t head, len, cap; /* cap is 0 or a power of two */
} deque_t;

typedef struct fence {
    dev_event_t *event;
    uint64_t epoch; /* entries of this epoch and before are covered */
} fence_t;

typedef struct stream {
    dev_stream_t *dev;
    uint64_t native;        /* adopted: the program's CUDA stream; 0: lms's own */
    bool all;               /* the all-streams stream: see Note [Free after all streams] */
    dev_event_t *use_event; /* recorded when an eviction must wait for its work */
    dev_event_t *after[USE_RING]; /* after[w % USE_RING]: recorded after the work of
                                     its w-th fenced access window (made at first
                                     use; Note [Eviction fences] in window.c) */
    uint32_t windows;       /* access windows fenced on it so far */
    deque_t small[ALLOC_MAX_CLASSES];
    deque_t large;
    uint64_t epoch;        /* of frees not yet fenced */
    size_t unfenced_bytes; /* freed in the current epoch */
    fence_t *fences;       /* oldest first */
    size_t nfences, capfences;
} stream_t;

typedef struct streams {
    stream_t *slot[MAX_STREAMS];         /* [0]: the default stream; NULL: free slot */
    uint32_t generation_of[MAX_STREAMS]; /* of the handle of each slot */
    size_t n;             /* slots in use or used before */
    size_t live;          /* streams that exist, the default one included (not the
                             all-streams one, which runs no work) */
    size_t all_slot;      /* the all-streams stream's slot; 0: not made yet */
    uint64_t released_at_once; /* frees released at once (one-stream rule), ever */
    uint64_t released_synced;  /* of those, how many the default stream has finished */
    size_t flush_bytes;   /* unfenced bytes of a stream that trigger a fence */
    bool warned_bad_free;
} streams_t;

/* ---- handles ----------------------------------------------------------------
 * An lms_stream_t is (generation << 32 | (slot + 1)); NULL is the default
 * stream, slot 0. A handle names its stream only while the slot's
 * generation is the handle's: a destroyed stream's handle stays invalid when
 * its slot is reused. */

static inline lms_stream_t streams_handle(size_t slot, uint32_t generation)
{
    return (lms_stream_t)(uintptr_t)((uintptr_t)generation << 32 | (slot + 1));
}

/* The slot a handle names, unchecked: for a handle known to be valid. */
static inline int streams_slot_of(lms_stream_t handle)
{
    return handle == NULL ? 0 : (int)(((uintptr_t)handle & 0xffff) - 1);
}

/* The live stream a handle names (not the all-streams one), or NULL. */
static inline stream_t *streams_find(const streams_t *t, lms_stream_t handle)
{
    uintptr_t h = (uintptr_t)handle;
    if (h == 0)
        return t->slot[0];
    size_t i = (h & 0xffff) - 1;
    if ((h >> 16 & 0xffff) != 0 || i >= t->n || t->slot[i] == NULL || i == 0 ||
        t->generation_of[i] != h >> 32 || t->slot[i]->all)
        return NULL;
    return t->slot[i];
}

#endif /* LMS_SWAP_STREAMS_H */
