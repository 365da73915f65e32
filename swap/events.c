/*
 * swap/events.c — the event pool (events.h).
 */
#include "swap/events.h"

#include "base/base.h"
#include "base/lockorder.h"
#include "swap/util.h"

void events_destroy(events_t *ev)
{
    base_meta_free(ev->free);
    base_meta_free(ev->retired);
    ev->free = ev->retired = NULL;
    ev->nfree = ev->capfree = ev->nretired = ev->capretired = 0;
}

lms_status_t events_take(events_t *ev, dev_event_t **out)
{
    if (ev->nfree > 0) {
        *out = ev->free[--ev->nfree];
        return LMS_OK;
    }
    return dev_event_create(ev->dev, out);
}

bool events_reserve(events_t *ev)
{
    return swap_grow((void **)&ev->free, &ev->capfree, ev->nfree + 1, sizeof *ev->free);
}

void events_recycle(events_t *ev, dev_event_t *e)
{
    if (ev->waiters > 0) {
        if (swap_grow((void **)&ev->retired, &ev->capretired, ev->nretired + 1,
                      sizeof *ev->retired))
            ev->retired[ev->nretired++] = e;
    } else if (swap_grow((void **)&ev->free, &ev->capfree, ev->nfree + 1, sizeof *ev->free)) {
        ev->free[ev->nfree++] = e;
    } else {
        dev_event_destroy(ev->dev, e);
    }
}

void events_waiters_leave(events_t *ev)
{
    if (--ev->waiters == 0)
        while (ev->nretired > 0)
            events_recycle(ev, ev->retired[--ev->nretired]);
}

void events_wait_unlocked(events_t *ev, dev_event_t *e)
{
    dev_device_t *dev = ev->dev;
    events_waiters_enter(ev);
    lo_unlock(ev->lock, LO_SWAP);
    (void)dev_event_synchronize(dev, e);
    lo_lock(ev->lock, LO_SWAP);
    events_waiters_leave(ev);
}
