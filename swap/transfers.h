/*
 * swap/transfers.h — the copies in flight between device and host: one
 * high-priority stream each way, the copies queued on each (oldest first),
 * and the H2D link's rate learnt from them (Note [Prefetch] in prefetch.c).
 * Knows nothing of chunks: a copy covers [first, first + n), and whoever
 * settles the chunks is told when it has ended (transfers_progress).
 * Guarded by swap_lock; see Note [Unfenced copies] in residency.c.
 */
#ifndef LMS_SWAP_TRANSFERS_H
#define LMS_SWAP_TRANSFERS_H

#include "swap/events.h"

/* A copy in flight (or, for a clean drop, the point after which the chunks'
 * last work has finished): its event, and the chunks whose `xfer` names it. */
typedef struct xfer {
    dev_event_t *event;
    struct xfer *next; /* in its direction's list, oldest first */
    size_t first, n;   /* the chunks it covers: [first, first + n) */
    size_t copied;     /* how many of them it copies (a fetch's may be scattered) */
    bool d2h;
    bool fenced; /* its event is recorded after the copy (Note [Unfenced copies] in residency.c) */
    bool done;         /* known to have finished without its event: a synchronize */
} xfer_t;

typedef struct transfers {
    dev_device_t *dev;
    events_t *events;
    size_t chunk;                 /* bytes per chunk */
    dev_stream_t *h2d, *d2h;      /* the copy streams */
    xfer_t *list[2], *tail[2];    /* in flight: [0] h2d, [1] d2h */
    size_t h2d_queued;            /* chunks in the H2D copies in flight */
    size_t d2h_copies;            /* D2H copies in flight (clean drops copy nothing) */
    uint64_t h2d_seen_ns;         /* the H2D link's rate, learnt (Note [Prefetch] in prefetch.c) */
    uint64_t h2d_busy_ns, h2d_busy_bytes;
    bool h2d_was_busy;
} transfers_t;

/* Creates the two copy streams; on failure, none. */
HIDDEN lms_status_t transfers_init(transfers_t *t, dev_device_t *dev, events_t *events,
                                   size_t chunk);
/* Frees the records of copies still in flight (their events and the streams
 * go with the device). */
HIDDEN void transfers_destroy(transfers_t *t);

/* A copy's record and event, before the copy is queued (Note [Unfenced
 * copies]); xfer_start tracks it once the copy is queued, xfer_discard drops
 * it if none was (NULL: nothing). */
HIDDEN lms_status_t xfer_new(transfers_t *t, xfer_t **out);
HIDDEN void xfer_discard(transfers_t *t, xfer_t *x);

/* x is the copy (or, d2h, the clean drop: copied 0) of `copied` chunks
 * within [first, first + n) just queued on its direction's stream: in
 * flight from now on. */
HIDDEN void xfer_start(transfers_t *t, xfer_t *x, size_t first, size_t n, size_t copied, bool d2h);

/* Makes sure x can be waited for: its event recorded after it, or, with
 * may_sync, its stream synchronized (then every copy on it is done). */
HIDDEN lms_status_t xfer_fence(transfers_t *t, xfer_t *x, bool may_sync);

/* Told of each copy that has ended, before its record goes. */
typedef void (*xfer_settle_fn)(void *arg, const xfer_t *x);

/* Settles the copies that have finished, at most `most` of each direction,
 * oldest first. A copy whose event fails to say stays in flight, and the
 * (first) failure is returned. */
HIDDEN lms_status_t transfers_progress(transfers_t *t, size_t most, xfer_settle_fn settle,
                                       void *arg);

/* Waits, lock dropped, for x to end, and settles what has (at most `most`
 * copies of each direction); fails when x's end cannot be known (Note
 * [Unfenced copies]). */
HIDDEN lms_status_t xfer_wait(transfers_t *t, xfer_t *x, size_t most, xfer_settle_fn settle,
                              void *arg);

/* The oldest copy in flight, d2h first; NULL if none. */
static inline xfer_t *transfers_oldest(const transfers_t *t)
{
    return t->list[1] != NULL ? t->list[1] : t->list[0];
}

/* The stream copies of a direction go on. */
static inline dev_stream_t *transfers_stream(const transfers_t *t, bool d2h)
{
    return d2h ? t->d2h : t->h2d;
}

/* Chunks the H2D copies in flight copy; whether anything is in flight on
 * the d2h stream (a copy or a clean drop); whether a copy is (Note [VMM
 * beside copies] in prefetch.c). */
static inline size_t transfers_h2d_queued(const transfers_t *t) { return t->h2d_queued; }
static inline bool transfers_d2h_busy(const transfers_t *t) { return t->list[1] != NULL; }
static inline bool transfers_d2h_copying(const transfers_t *t) { return t->d2h_copies > 0; }

static inline bool transfers_idle(const transfers_t *t)
{
    return t->list[0] == NULL && t->list[1] == NULL;
}

/* The H2D link's rate learnt so far, bytes per ns; 0 until 8 chunks' worth. */
static inline double transfers_h2d_rate(const transfers_t *t)
{
    return t->h2d_busy_bytes >= 8 * t->chunk ? (double)t->h2d_busy_bytes / (double)t->h2d_busy_ns
                                             : 0;
}

#endif /* LMS_SWAP_TRANSFERS_H */
