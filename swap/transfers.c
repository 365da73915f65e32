/*
 * swap/transfers.c — copies in flight and the H2D link's rate
 * (transfers.h). Guarded by swap_lock.
 */
#include "swap/transfers.h"

#include "base/base.h"

lms_status_t transfers_init(transfers_t *t, dev_device_t *dev, events_t *events, size_t chunk)
{
    *t = (transfers_t){.dev = dev, .events = events, .chunk = chunk};
    lms_status_t st = dev_stream_create(dev, DEV_PRIORITY_HIGH, &t->h2d);
    if (st == LMS_OK && (st = dev_stream_create(dev, DEV_PRIORITY_HIGH, &t->d2h)) != LMS_OK) {
        dev_stream_destroy(dev, t->h2d);
        t->h2d = NULL;
    }
    return st;
}

void transfers_destroy(transfers_t *t)
{
    for (int dir = 0; dir < 2; dir++)
        for (xfer_t *x = t->list[dir], *next; x != NULL; x = next) {
            next = x->next;
            base_meta_free(x); /* its event goes with the device */
        }
    t->list[0] = t->list[1] = t->tail[0] = t->tail[1] = NULL;
}

lms_status_t xfer_new(transfers_t *t, xfer_t **out)
{
    xfer_t *x = base_meta_calloc(1, sizeof *x);
    if (x == NULL)
        return base_fail(LMS_ERR_OUT_OF_MEMORY, "lms: no host memory for metadata");
    lms_status_t st = events_take(t->events, &x->event);
    if (st != LMS_OK) {
        base_meta_free(x);
        return st;
    }
    *out = x;
    return LMS_OK;
}

void xfer_discard(transfers_t *t, xfer_t *x)
{
    if (x == NULL)
        return;
    events_recycle(t->events, x->event);
    base_meta_free(x);
}

void xfer_start(transfers_t *t, xfer_t *x, size_t first, size_t n, size_t copied, bool d2h)
{
    x->first = first;
    x->n = n;
    x->copied = copied;
    x->d2h = d2h;
    int dir = d2h;
    if (t->tail[dir] != NULL)
        t->tail[dir]->next = x;
    else
        t->list[dir] = x;
    t->tail[dir] = x;
    if (!d2h)
        t->h2d_queued += copied;
    else if (copied > 0)
        t->d2h_copies++;
    x->fenced = dev_event_record(t->dev, x->event, transfers_stream(t, x->d2h)) == LMS_OK;
    if (!x->fenced)
        base_log(BASE_LOG_DEBUG, "lms: a copy's event is recorded later: %s", lms_last_error());
}

lms_status_t xfer_fence(transfers_t *t, xfer_t *x, bool may_sync)
{
    if (x->fenced || x->done)
        return LMS_OK;
    lms_status_t st = dev_event_record(t->dev, x->event, transfers_stream(t, x->d2h));
    if (st == LMS_OK) {
        x->fenced = true;
        return LMS_OK;
    }
    if (!may_sync || (st = dev_stream_synchronize(t->dev, transfers_stream(t, x->d2h))) != LMS_OK)
        return st;
    for (xfer_t *y = t->list[x->d2h]; y != NULL; y = y->next)
        y->done = true;
    return LMS_OK;
}

/* The H2D link's rate (Note [Prefetch] in prefetch.c): the copies just
 * seen to finish, over the time since the last look while the stream was
 * busy. */
static void h2d_seen(transfers_t *t, size_t chunks)
{
    if (!t->h2d_was_busy && t->list[0] == NULL)
        return; /* idle, and was: no clock needed */
    uint64_t now = base_now_ns();
    if (t->h2d_was_busy && t->h2d_seen_ns != 0) {
        t->h2d_busy_ns += now - t->h2d_seen_ns;
        t->h2d_busy_bytes += chunks * t->chunk;
        if (t->h2d_busy_ns > 1000000000ull) { /* a second's worth: older ones weigh less */
            t->h2d_busy_ns /= 2;
            t->h2d_busy_bytes /= 2;
        }
    }
    t->h2d_seen_ns = now;
    t->h2d_was_busy = t->list[0] != NULL;
}

/* Whether a copy queued after x on its stream has ended, and so x too (the
 * stream is FIFO); then x and those between are done. */
static bool later_ended(transfers_t *t, xfer_t *x)
{
    for (xfer_t *y = x->next; y != NULL; y = y->next)
        if (y->done || (y->fenced && dev_event_query(t->dev, y->event) == LMS_OK)) {
            for (xfer_t *z = x; z != y; z = z->next)
                z->done = true;
            return true;
        }
    return false;
}

lms_status_t transfers_progress(transfers_t *t, size_t most, xfer_settle_fn settle, void *arg)
{
    lms_status_t failed = LMS_OK;
    size_t fetched = 0;
    for (int dir = 0; dir < 2; dir++)
        for (size_t done = 0; t->list[dir] != NULL && done < most; done++) {
            xfer_t *x = t->list[dir];
            if (xfer_fence(t, x, false) != LMS_OK && !later_ended(t, x))
                break; /* cannot tell yet whether it has ended */
            lms_status_t st = x->done ? LMS_OK : dev_event_query(t->dev, x->event);
            if (st != LMS_OK) {
                if (st != LMS_NOT_READY && failed == LMS_OK)
                    failed = st;
                break;
            }
            t->list[dir] = x->next;
            if (t->list[dir] == NULL)
                t->tail[dir] = NULL;
            if (dir == 0) {
                fetched += x->copied;
                t->h2d_queued -= x->copied;
            } else if (x->copied > 0) {
                t->d2h_copies--;
            }
            settle(arg, x);
            events_recycle(t->events, x->event);
            base_meta_free(x);
        }
    h2d_seen(t, fetched);
    return failed;
}

lms_status_t xfer_wait(transfers_t *t, xfer_t *x, size_t most, xfer_settle_fn settle, void *arg)
{
    lms_status_t st = xfer_fence(t, x, true);
    if (st != LMS_OK)
        return st;
    if (!x->done)
        events_wait_unlocked(t->events, x->event);
    return transfers_progress(t, most, settle, arg);
}
