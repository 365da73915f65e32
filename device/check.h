/*
 * device/check.h — private to the check layer (check.c: memory, mappings,
 * host ranges, teardown; check_work.c: streams, events, the work on them and
 * the observer). See check.c for what the layer owns and its locks.
 */
#ifndef LMS_DEVICE_CHECK_H
#define LMS_DEVICE_CHECK_H

#include <pthread.h>

#include "device/handle.h"
#include "device/layer.h"

typedef struct reservation {
    dev_addr_t base;
    size_t size;
    dev_block_t *block; /* per granule: the handle of the block mapped there, 0 = none */
    bool *cpu;          /* per granule: a host block the CPU may touch (set_access_host),
                           kept with full validation only */
} reservation_t;

typedef struct host_range {
    char *ptr;
    size_t size;
} host_range_t;

typedef struct check {
    dev_layer_t inner;
    size_t granularity;
    bool full;    /* full validation: Note [Two levels of checking] */
    pthread_mutex_t lock;
    reservation_t *res;
    size_t nres, capres;
    handle_table_t blocks, streams, events, host_blocks;
    size_t mapped_blocks; /* granules with a block mapped, over all reservations */
    size_t mapped_host_blocks; /* the same for host blocks */
    bool host_ok;         /* the device's info.host_blocks */
    bool host_runs;       /* its info.host_block_runs */
    char host_why[sizeof ((dev_info_t *)0)->host_blocks_why]; /* its info.host_blocks_why */
    host_range_t *host;
    size_t nhost, caphost;
    dev_observer_t observer; /* the caller's, told of the handles; NULL: none */
    void *observer_ctx;
} check_t;

#define INNER(c, op, ...) ((c)->inner.ops->op((c)->inner.self, __VA_ARGS__))

/* LMS_ERR_INVALID with "op: why". */
lms_status_t check_invalid(const char *op, const char *why);
/* Looks a stream or event handle up (no lock) and returns its inner object. */
lms_status_t check_lookup(handle_table_t *t, const char *op, const void *handle, void **inner);
#define STREAM(c, op, s, out) check_lookup(&(c)->streams, (op), (s), (void **)(out))
#define EVENT(c, op, e, out) check_lookup(&(c)->events, (op), (e), (void **)(out))
/* A device range for a copy or launch: nonzero, not wrapping, and with full
 * validation inside a reservation of this device (taking check.lock). */
lms_status_t check_device_range(check_t *c, const char *op, dev_addr_t addr, size_t n);
/* A host range: not NULL, not wrapping. */
lms_status_t check_host_range(const char *op, const void *p, size_t n);
/* The host side of a copy: check_host_range, and, with full validation, where
 * it lies in a reservation of this device, a run of mapped host blocks that
 * set_access_host opened to the CPU (taking check.lock). */
lms_status_t check_copy_host(check_t *c, const char *op, const void *p, size_t n);

/* The ops of check_work.c, for the table in check.c. */
lms_status_t check_stream_create(void *self, dev_priority_t priority, dev_stream_t **out);
lms_status_t check_stream_adopt(void *self, uint64_t native, dev_stream_t **out);
lms_status_t check_stream_destroy(void *self, dev_stream_t *stream);
lms_status_t check_stream_synchronize(void *self, dev_stream_t *stream);
lms_status_t check_event_create(void *self, dev_event_t **out);
lms_status_t check_event_destroy(void *self, dev_event_t *event);
lms_status_t check_event_record(void *self, dev_event_t *event, dev_stream_t *stream);
lms_status_t check_event_query(void *self, dev_event_t *event);
lms_status_t check_event_synchronize(void *self, dev_event_t *event);
lms_status_t check_stream_wait_event(void *self, dev_stream_t *stream, dev_event_t *event);
lms_status_t check_copy_h2d(void *self, dev_stream_t *stream, dev_addr_t dst, const void *src, size_t n);
lms_status_t check_copy_d2h(void *self, dev_stream_t *stream, void *dst, dev_addr_t src, size_t n);
lms_status_t check_copy_d2d(void *self, dev_stream_t *stream, dev_addr_t dst, dev_addr_t src, size_t n);
lms_status_t check_host_func(void *self, dev_stream_t *stream, dev_host_fn_t fn, void *arg);
lms_status_t check_launch(void *self, dev_stream_t *stream, const dev_launch_t *l);
lms_status_t check_set_observer(void *self, dev_observer_t fn, void *ctx);

#endif /* LMS_DEVICE_CHECK_H */
