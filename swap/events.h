/*
 * swap/events.h — the pool of device events that fences and copies record,
 * and waits on them with swap_lock dropped. Guarded by swap_lock; a wait
 * drops it (events_wait_unlocked) and, while any thread waits, no event is
 * re-recorded or destroyed (events_recycle keeps it retired until then).
 */
#ifndef LMS_SWAP_EVENTS_H
#define LMS_SWAP_EVENTS_H

#include <pthread.h>

#include "device/device.h"

#ifndef HIDDEN
#define HIDDEN __attribute__((visibility("hidden")))
#endif

typedef struct events {
    dev_device_t *dev;
    pthread_mutex_t *lock;  /* the lock a wait drops: swap_lock */
    dev_event_t **free;     /* unused events */
    size_t nfree, capfree;
    size_t waiters;         /* threads waiting, lock dropped, on events */
    dev_event_t **retired;  /* collected while waiters > 0: not reused until 0 */
    size_t nretired, capretired;
} events_t;

static inline void events_init(events_t *ev, dev_device_t *dev, pthread_mutex_t *lock)
{
    *ev = (events_t){.dev = dev, .lock = lock};
}

/* Frees the pool's arrays; the events themselves go with the device. */
HIDDEN void events_destroy(events_t *ev);

/* An unused event: from the pool, or new. */
HIDDEN lms_status_t events_take(events_t *ev, dev_event_t **out);

/* Makes room in the pool for one more event, so that an events_put of an
 * event taken after it cannot fail. False without memory. */
HIDDEN bool events_reserve(events_t *ev);

/* Puts e back for reuse at once, into the room events_reserve made: for an
 * event no thread waits on with the lock dropped (only streams, on the
 * device), so that re-recording it harms nobody. */
static inline void events_put(events_t *ev, dev_event_t *e) { ev->free[ev->nfree++] = e; }

/* Puts an event whose record is done with back for reuse. While a thread
 * waits on events with the lock dropped, none may be re-recorded (it would
 * wait for unrelated work) or destroyed: they wait on the retired list, or,
 * if even that cannot grow, stay unused until shutdown closes the device. */
HIDDEN void events_recycle(events_t *ev, dev_event_t *e);

/* A thread that will wait on events with the lock dropped: until as many
 * events_waiters_leave, no collected event is re-recorded. */
static inline void events_waiters_enter(events_t *ev) { ev->waiters++; }
HIDDEN void events_waiters_leave(events_t *ev);

/* Waits for e with the lock dropped (the caller holds it, and must look up
 * whatever it held pointers to again afterwards). An error shows again in
 * the event's next query. */
HIDDEN void events_wait_unlocked(events_t *ev, dev_event_t *e);

#endif /* LMS_SWAP_EVENTS_H */
