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
                                     use; Note [Eviction fences] in evict.c) */
    uint32_t windows;       /* access windows fenced on it so far */
    deque_t small[ALLOC_MAX_CLASSES];
    deque_t large;
    uint64_t epoch;        /* of frees not yet fenced */
    size_t unfenced_bytes; /* freed in the current epoch */
    fence_t *fences;       /* oldest first */
    size_t nfences, capfences;
} stream_t;

/* Gives the pending entry [offset, offset + size) back to everyone: the work
 * queued before its free has finished, or nobody can race it. */
typedef void (*streams_release_fn)(size_t offset, size_t size);

typedef struct streams {
    dev_device_t *dev;
    events_t *events;     /* the pool fences take their events from */
    size_t chunk;         /* bytes per chunk: large entries match by chunk count */
    streams_release_fn release; /* what a released entry goes to */
    stream_t *slot[MAX_STREAMS];         /* [0]: the default stream; NULL: free slot */
    uint32_t generation_of[MAX_STREAMS]; /* of the handle of each slot */
    size_t n;             /* slots in use or used before */
    size_t live;          /* streams that exist, the default one included (not the
                             all-streams one, which runs no work) */
    size_t all_slot;      /* the all-streams stream's slot; 0: not made yet */
    uint64_t released_at_once; /* frees released at once (one-stream rule), ever */
    uint64_t released_synced;  /* of those, how many the default stream has finished */
    size_t flush_bytes;   /* unfenced bytes of a stream that trigger a fence */
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

/* The invalid-handle failure of op. */
HIDDEN lms_status_t streams_bad_handle(const char *op, lms_stream_t handle);

/* ---- the table --------------------------------------------------------------
 * t is zeroed (the state is allocated so) before streams_init. */

/* Makes the default stream, slot 0; t keeps dev, events and release for
 * good. A free's space waits for a fence once a stream holds flush_bytes of
 * unfenced frees. */
HIDDEN lms_status_t streams_init(streams_t *t, dev_device_t *dev, events_t *events, size_t chunk,
                                 size_t flush_bytes, streams_release_fn release);
/* Waits for every stream's queued work (at shutdown, before the host pool
 * goes); errors are the device's to report. */
HIDDEN void streams_drain(streams_t *t);
/* Frees the streams' host state, once the device (which destroys their
 * device streams and events) is closed. */
HIDDEN void streams_destroy(streams_t *t);

/* A new lms stream, ordered after every other one; *slot is its slot. */
HIDDEN lms_status_t streams_create(streams_t *t, size_t *slot);
/* The stream adopted for the program's cuda_stream (Note [Adopted streams]
 * in streams.c), adopted now if it was not; *slot is its slot. */
HIDDEN lms_status_t streams_adopt(streams_t *t, void *cuda_stream, size_t *slot);
/* The slot of the stream adopted for cuda_stream; 0 if none. */
HIDDEN size_t streams_adopted(const streams_t *t, void *cuda_stream);
/* The all-streams stream, made on first use (Note [Free after all
 * streams] in streams.c). */
HIDDEN lms_status_t streams_all(streams_t *t, stream_t **out);
/* Destroys the live stream handle names (not the default one) once its
 * work is done, its pending frees going back to everyone; the lock is
 * dropped meanwhile, so it may fail as destroyed by another thread. */
HIDDEN lms_status_t streams_remove(streams_t *t, lms_stream_t handle);

/* ---- stream-ordered frees (Note [Stream-ordered free] in streams.c) -------- */

/* Queues the freed allocation [offset, offset + size) (of size class cls;
 * < 0: whole chunks) on s, or releases it at once when nobody can race it
 * (s NULL: a stream destroyed since, whose work is done; or lms has one
 * stream only); *queued says which. Fails only when the host has no memory
 * for s's pending list: the allocation is then still freed, and the
 * caller's. */
HIDDEN lms_status_t streams_queue(streams_t *t, stream_t *s, size_t offset, size_t size, int cls,
                                  bool *queued);
/* Lets a stream that frees much give its memory back to everyone: a fence
 * once its unfenced frees reach the flush size. One that cannot be recorded
 * now is recorded when an allocation runs short. */
HIDDEN void streams_flush(streams_t *t, stream_t *s);
/* Takes off s's pending list an entry that an allocation of size (of size
 * class cls; < 0: large) may reuse at once (Note [Placement repeats] in
 * streams.c): false if none; else its offset and its size as freed. */
HIDDEN bool streams_reuse(streams_t *t, stream_t *s, int cls, size_t size, size_t *offset,
                          size_t *freed_size);
/* Releases the entries of every stream covered by fences whose events have
 * completed, after fencing every stream if fence_first. */
HIDDEN lms_status_t streams_collect_all(streams_t *t, bool fence_first);
/* Waits, with the lock dropped, for the newest fence of every stream.
 * Errors are left for the collect that follows. */
HIDDEN void streams_wait_for_fences(streams_t *t);
/* Waits until the default stream has finished what was queued when the
 * frees released at once so far were made (released_synced). */
HIDDEN lms_status_t streams_sync_released(streams_t *t);

/* Whether memory freed at once (one-stream rule) may still be in use by the
 * default stream: until streams_sync_released, its blocks must not be
 * taken for another chunk. */
static inline bool streams_released_pending(const streams_t *t)
{
    return t->released_synced < t->released_at_once;
}

/* Slots in use or used before, the stream in slot i (NULL: none), and the
 * generation of slot i's handle: what a chunk remembers of its last user. */
static inline size_t streams_slots(const streams_t *t) { return t->n; }
static inline stream_t *streams_slot(const streams_t *t, size_t i) { return t->slot[i]; }
static inline uint32_t streams_generation(const streams_t *t, size_t i)
{
    return t->generation_of[i];
}

/* ---- eviction fences (Note [Eviction fences] in evict.c) ------------------- */

/* Records on s the event after the work of its next access window (one of
 * a ring of USE_RING): that window's number, 0 if none was recorded. */
HIDDEN uint32_t stream_fence_window(stream_t *s, dev_device_t *dev);

/* The event an eviction waits for on s: after s's window `latest` (or the
 * oldest of the ring left, which is later still), or, for latest 0 (not
 * known), one recorded now after all of s's work. */
HIDDEN lms_status_t stream_after_use(stream_t *s, dev_device_t *dev, uint32_t latest,
                                     dev_event_t **out);

#endif /* LMS_SWAP_STREAMS_H */
