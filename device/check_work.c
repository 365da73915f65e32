/*
 * device/check_work.c — the check layer's streams, events, the work queued on
 * streams (copies, host functions, launches) and the observer: handles are
 * looked up with no lock, and ranges checked as the level of checking says
 * (Note [Two levels of checking] in check.c).
 */
#include <stdatomic.h>
#include <stdint.h>

#include "base/base.h"
#include "base/lockorder.h"
#include "device/check.h"

/* ---- streams and events ------------------------------------------------------ */

/* Registers a stream or event the layer below just made; destroys it again if
 * the table cannot take it. */
static lms_status_t add_object(check_t *c, handle_table_t *t, void *inner, uint64_t *handle)
{
    lms_status_t st = handle_add(t, (uint64_t)(uintptr_t)inner, handle);
    if (st != LMS_OK && t->kind == HANDLE_STREAM)
        INNER(c, stream_destroy, inner);
    else if (st != LMS_OK)
        INNER(c, event_destroy, inner);
    return st;
}

/* Destroys the stream or event handle names. Only a handle is checked, in
 * either level of checking: no lock is held across the layer below's destroy. */
static lms_status_t destroy_object(check_t *c, handle_table_t *t, const char *op, const void *handle)
{
    handle_slot_t *s;
    lms_status_t st = handle_find(t, op, (uint64_t)(uintptr_t)handle, &s);
    uint64_t inner = st == LMS_OK ? atomic_load_explicit(&s->inner, memory_order_relaxed) : 0;
    if (st == LMS_OK)
        st = t->kind == HANDLE_STREAM ? INNER(c, stream_destroy, (dev_stream_t *)(uintptr_t)inner)
                                      : INNER(c, event_destroy, (dev_event_t *)(uintptr_t)inner);
    if (st == LMS_OK)
        handle_remove(t, s);
    return st;
}

/* Hands out the stream the layer below just made (st: how that went). */
static lms_status_t add_stream(check_t *c, lms_status_t st, dev_stream_t *inner, dev_stream_t **out)
{
    uint64_t handle;
    if (st == LMS_OK)
        st = add_object(c, &c->streams, inner, &handle);
    if (st == LMS_OK)
        *out = (dev_stream_t *)(uintptr_t)handle;
    return st;
}

lms_status_t check_stream_create(void *self, dev_priority_t priority, dev_stream_t **out)
{
    check_t *c = self;
    if (out == NULL)
        return check_invalid("stream_create", "NULL output");
    if (priority != DEV_PRIORITY_NORMAL && priority != DEV_PRIORITY_HIGH)
        return check_invalid("stream_create", "unknown priority");
    dev_stream_t *inner = NULL;
    lms_status_t st = INNER(c, stream_create, priority, &inner);
    return add_stream(c, st, inner, out);
}

lms_status_t check_stream_adopt(void *self, uint64_t native, dev_stream_t **out)
{
    check_t *c = self;
    if (out == NULL)
        return check_invalid("stream_adopt", "NULL output");
    if (native == 0)
        return check_invalid("stream_adopt", "native stream 0 (the legacy default stream is 0x1)");
    dev_stream_t *inner = NULL;
    lms_status_t st = INNER(c, stream_adopt, native, &inner);
    return add_stream(c, st, inner, out);
}

lms_status_t check_stream_destroy(void *self, dev_stream_t *stream)
{
    return destroy_object(self, &((check_t *)self)->streams, "stream_destroy", stream);
}

lms_status_t check_stream_synchronize(void *self, dev_stream_t *stream)
{
    check_t *c = self;
    dev_stream_t *s;
    lms_status_t st = STREAM(c, "stream_synchronize", stream, &s);
    return st != LMS_OK ? st : INNER(c, stream_synchronize, s);
}

lms_status_t check_event_create(void *self, dev_event_t **out)
{
    check_t *c = self;
    if (out == NULL)
        return check_invalid("event_create", "NULL output");
    dev_event_t *inner;
    uint64_t handle;
    lms_status_t st = INNER(c, event_create, &inner);
    if (st == LMS_OK)
        st = add_object(c, &c->events, inner, &handle);
    if (st == LMS_OK)
        *out = (dev_event_t *)(uintptr_t)handle;
    return st;
}

lms_status_t check_event_destroy(void *self, dev_event_t *event)
{
    return destroy_object(self, &((check_t *)self)->events, "event_destroy", event);
}

lms_status_t check_event_record(void *self, dev_event_t *event, dev_stream_t *stream)
{
    check_t *c = self;
    dev_event_t *e;
    dev_stream_t *s;
    lms_status_t st = EVENT(c, "event_record", event, &e);
    if (st == LMS_OK)
        st = STREAM(c, "event_record", stream, &s);
    return st != LMS_OK ? st : INNER(c, event_record, e, s);
}

lms_status_t check_event_query(void *self, dev_event_t *event)
{
    check_t *c = self;
    dev_event_t *e;
    lms_status_t st = EVENT(c, "event_query", event, &e);
    return st != LMS_OK ? st : INNER(c, event_query, e);
}

lms_status_t check_event_synchronize(void *self, dev_event_t *event)
{
    check_t *c = self;
    dev_event_t *e;
    lms_status_t st = EVENT(c, "event_synchronize", event, &e);
    return st != LMS_OK ? st : INNER(c, event_synchronize, e);
}

lms_status_t check_stream_wait_event(void *self, dev_stream_t *stream, dev_event_t *event)
{
    check_t *c = self;
    dev_stream_t *s;
    dev_event_t *e;
    lms_status_t st = STREAM(c, "stream_wait_event", stream, &s);
    if (st == LMS_OK)
        st = EVENT(c, "stream_wait_event", event, &e);
    return st != LMS_OK ? st : INNER(c, stream_wait_event, s, e);
}

/* ---- work on streams ----------------------------------------------------------- */

lms_status_t check_copy_h2d(void *self, dev_stream_t *stream, dev_addr_t dst,
                                   const void *src, size_t n)
{
    check_t *c = self;
    dev_stream_t *s;
    lms_status_t st = STREAM(c, "copy_h2d", stream, &s);
    if (st == LMS_OK)
        st = check_device_range(c, "copy_h2d", dst, n);
    if (st == LMS_OK)
        st = check_copy_host(c, "copy_h2d", src, n);
    return st != LMS_OK ? st : INNER(c, copy_h2d, s, dst, src, n);
}

lms_status_t check_copy_d2h(void *self, dev_stream_t *stream, void *dst, dev_addr_t src,
                                   size_t n)
{
    check_t *c = self;
    dev_stream_t *s;
    lms_status_t st = STREAM(c, "copy_d2h", stream, &s);
    if (st == LMS_OK)
        st = check_device_range(c, "copy_d2h", src, n);
    if (st == LMS_OK)
        st = check_copy_host(c, "copy_d2h", dst, n);
    return st != LMS_OK ? st : INNER(c, copy_d2h, s, dst, src, n);
}

lms_status_t check_copy_d2d(void *self, dev_stream_t *stream, dev_addr_t dst,
                                   dev_addr_t src, size_t n)
{
    check_t *c = self;
    dev_stream_t *s;
    lms_status_t st = STREAM(c, "copy_d2d", stream, &s);
    if (st == LMS_OK)
        st = check_device_range(c, "copy_d2d", dst, n);
    if (st == LMS_OK)
        st = check_device_range(c, "copy_d2d", src, n);
    return st != LMS_OK ? st : INNER(c, copy_d2d, s, dst, src, n);
}

lms_status_t check_host_func(void *self, dev_stream_t *stream, dev_host_fn_t fn, void *arg)
{
    check_t *c = self;
    dev_stream_t *s;
    lms_status_t st = STREAM(c, "host_func", stream, &s);
    if (st == LMS_OK && fn == NULL)
        st = check_invalid("host_func", "function is NULL");
    return st != LMS_OK ? st : INNER(c, host_func, s, fn, arg);
}

lms_status_t check_launch(void *self, dev_stream_t *stream, const dev_launch_t *l)
{
    check_t *c = self;
    if (l == NULL || l->name == NULL)
        return check_invalid("launch", "NULL launch or name");
    dev_stream_t *s;
    lms_status_t st = STREAM(c, l->name, stream, &s);
    if (st == LMS_OK && (l->run == NULL || l->enqueue == NULL))
        st = check_invalid(l->name, "a launch needs both run and enqueue");
    if (st == LMS_OK && l->nranges > DEV_LAUNCH_RANGES)
        st = check_invalid(l->name, "more ranges than DEV_LAUNCH_RANGES");
    for (size_t i = 0; st == LMS_OK && i < l->nranges; i++)
        st = check_device_range(c, l->name, l->ranges[i].addr, l->ranges[i].bytes);
    return st != LMS_OK ? st : INNER(c, launch, s, l);
}

/* ---- the observer ------------------------------------------------------------- */

/* What the layer below reports names its own stream: the caller is told the
 * handle of it (NULL if the stream is gone from the table: destroyed while
 * its last work ran). A stream slot is looked up by a scan: an observer is
 * for tracing, and a process has few streams. */
static void check_observe(void *ctx, const dev_work_t *inner)
{
    check_t *c = ctx;
    dev_work_t work = *inner;
    work.stream = NULL;
    lo_lock(&c->lock, LO_DEV_CHECK);
    dev_observer_t fn = c->observer;
    void *fn_ctx = c->observer_ctx;
    for (uint32_t i = 0; i < handle_count(&c->streams); i++) {
        handle_slot_t *s = handle_slot_at(&c->streams, i);
        if (handle_used(s) && atomic_load_explicit(&s->inner, memory_order_relaxed) ==
                                  (uint64_t)(uintptr_t)inner->stream) {
            work.stream = (dev_stream_t *)(uintptr_t)handle_of(&c->streams, i);
            break;
        }
    }
    lo_unlock(&c->lock, LO_DEV_CHECK);
    if (fn != NULL)
        fn(fn_ctx, &work);
}

/* The caller's observer is stored first (calls in progress pick it up under
 * the lock), then the layer below is told: setting it again there waits for
 * the calls of the old one in progress, which keeps set_observer's promise. */
lms_status_t check_set_observer(void *self, dev_observer_t fn, void *ctx)
{
    check_t *c = self;
    lo_lock(&c->lock, LO_DEV_CHECK);
    dev_observer_t old = c->observer;
    void *old_ctx = c->observer_ctx;
    lo_unlock(&c->lock, LO_DEV_CHECK);
    void *inner_ctx = fn != NULL ? (void *)c : NULL;
    dev_observer_t inner = fn != NULL ? check_observe : NULL;
    if (old != NULL) {
        /* The layer below reports the old observer's last work (cuda waits
         * for it) through check_observe while it still finds the old one. */
        lms_status_t st = INNER(c, set_observer, inner, inner_ctx);
        if (st == LMS_OK) {
            lo_lock(&c->lock, LO_DEV_CHECK);
            c->observer = fn;
            c->observer_ctx = fn != NULL ? ctx : NULL;
            lo_unlock(&c->lock, LO_DEV_CHECK);
        }
        return st;
    }
    lo_lock(&c->lock, LO_DEV_CHECK);
    c->observer = fn;
    c->observer_ctx = fn != NULL ? ctx : NULL;
    lo_unlock(&c->lock, LO_DEV_CHECK);
    lms_status_t st = INNER(c, set_observer, inner, inner_ctx);
    if (st != LMS_OK) {
        lo_lock(&c->lock, LO_DEV_CHECK);
        c->observer = old;
        c->observer_ctx = old_ctx;
        lo_unlock(&c->lock, LO_DEV_CHECK);
    }
    return st;
}
