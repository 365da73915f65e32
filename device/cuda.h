/*
 * device/cuda.h — private to the cuda backend (cuda.c, cuda_work.c): its
 * state, the driver's entry points it calls, the current-context fast path
 * of every op, and the ops cuda_work.c gives the table in cuda.c. See cuda.c
 * for what the backend owns, its invariants and its locks.
 */
#ifndef LMS_DEVICE_CUDA_H
#define LMS_DEVICE_CUDA_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "device/cuda_driver.h"
#include "device/layer.h"

/* Every driver function the backend calls, by base name. */
#define DRIVER_FUNCS(X)                                                                      \
    /* initialization, devices */                                                           \
    X(cuInit) X(cuDeviceGet) X(cuDeviceGetCount)                                            \
    X(cuDeviceGetName) X(cuDeviceTotalMem) X(cuDeviceGetAttribute) X(cuDeviceGetPCIBusId)   \
    /* contexts */                                                                          \
    X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease) X(cuCtxGetCurrent)             \
    X(cuCtxSetCurrent) X(cuCtxGetStreamPriorityRange)                                       \
    /* memory */                                                                            \
    X(cuMemGetInfo) X(cuMemGetAllocationGranularity) X(cuMemAddressReserve)                 \
    X(cuMemAddressFree) X(cuMemCreate) X(cuMemRelease) X(cuMemMap) X(cuMemSetAccess)        \
    X(cuMemUnmap) X(cuMemHostRegister) X(cuMemHostUnregister)                               \
    /* streams, events, copies, host functions */                                           \
    X(cuStreamCreateWithPriority) X(cuStreamDestroy) X(cuStreamSynchronize) X(cuStreamQuery) \
    X(cuEventCreate) X(cuEventDestroy) X(cuEventRecord) X(cuEventQuery)                     \
    X(cuEventSynchronize) X(cuEventElapsedTime) X(cuStreamWaitEvent) X(cuMemcpyHtoDAsync)  \
    X(cuMemcpyDtoHAsync) X(cuMemcpyDtoDAsync) X(cuLaunchHostFunc)

/* The entry points. A field's name is what cuda.h makes of the base name
 * (cuMemGetInfo_v2 for cuMemGetInfo), and so is every call through it. */
typedef struct driver {
#define DRIVER_FIELD(fn) __typeof__(fn) *fn;
    DRIVER_FUNCS(DRIVER_FIELD)
#undef DRIVER_FIELD
} driver_t;

/* A copy, host function or launch bracketed by timing events, not yet
 * reported: Note [Timing work on the GPU] in cuda_work.c. */
typedef struct timed {
    CUevent start, end;
    dev_work_kind_t kind;
    const char *name;
    size_t bytes;
    CUstream stream;
} timed_t;

typedef struct cuda {
    driver_t drv;      /* entry points, resolved at open */
    void *libcuda;     /* dlopen handle */
    uint64_t id;       /* unique among opens: see Note [Current context] */
    int ordinal;
    CUdevice device;
    CUcontext ctx;     /* the device's primary context, retained */
    size_t granularity;
    int high_priority; /* the device's greatest stream priority */
    CUmemAllocationProp block_prop; /* one pinned block on this device */
    CUmemAccessDesc access;         /* read/write for this device */
    CUmemAllocationProp host_prop;  /* one host block, on the device's NUMA node or, that
                                       refused, anywhere: chosen at the open, Note [Host
                                       blocks on cuda] */
    char host_where[48];            /* which, in words */

    pthread_mutex_t lock;         /* guards `adopted` */
    CUstream *adopted;            /* the program's streams adopted, once per adoption */
    size_t nadopted, capadopted;

    /* the observer: Note [Timing work on the GPU] in cuda_work.c;
       guarded by observe_lock */
    pthread_mutex_t observe_lock;
    atomic_bool observing;        /* observer != NULL: the ops' one branch, read without the lock */
    dev_observer_t observer;
    void *observer_ctx;
    CUstream base_stream;         /* runs only the base event; NULL until the first observer */
    CUevent base_event;
    uint64_t base_ns;             /* base_now_ns() when base_event was seen done */
    timed_t *pending;             /* bracketed work not yet reported, in enqueue order */
    size_t npending, cappending;
    CUevent *spare;               /* timing events for reuse */
    size_t nspare, capspare;
    atomic_uint_fast64_t next_poll_ns; /* event_query/_synchronize poll from then on */
} cuda_t;

/* ---- context: Note [Current context] in cuda.c ---------------------------- */

extern _Thread_local uint64_t cuda_current_id; /* the cuda_t.id current on this thread */

/* Makes c's context current on this thread and says so in cuda_current_id. */
lms_status_t cuda_set_context(cuda_t *c);

/* Makes c's context current on this thread unless the cache says it is. */
static inline lms_status_t cuda_use_context(cuda_t *c)
{
    return cuda_current_id == c->id ? LMS_OK : cuda_set_context(c);
}

/* Same, asking the driver which context is current instead of trusting the
 * cache: for the ops whose effect depends on it. */
lms_status_t cuda_use_context_checked(cuda_t *c);

/* ---- cuda_work.c --------------------------------------------------------------- */

/* The ops of cuda_work.c, for the table in cuda.c. */
lms_status_t cuda_stream_create(void *self, dev_priority_t priority, dev_stream_t **stream);
lms_status_t cuda_stream_adopt(void *self, uint64_t native, dev_stream_t **stream);
lms_status_t cuda_stream_destroy(void *self, dev_stream_t *stream);
lms_status_t cuda_stream_synchronize(void *self, dev_stream_t *stream);
lms_status_t cuda_event_create(void *self, dev_event_t **event);
lms_status_t cuda_event_destroy(void *self, dev_event_t *event);
lms_status_t cuda_event_record(void *self, dev_event_t *event, dev_stream_t *stream);
lms_status_t cuda_event_query(void *self, dev_event_t *event);
lms_status_t cuda_event_synchronize(void *self, dev_event_t *event);
lms_status_t cuda_stream_wait_event(void *self, dev_stream_t *stream, dev_event_t *event);
lms_status_t cuda_copy_h2d(void *self, dev_stream_t *stream, dev_addr_t dst, const void *src,
                           size_t n);
lms_status_t cuda_copy_d2h(void *self, dev_stream_t *stream, void *dst, dev_addr_t src, size_t n);
lms_status_t cuda_copy_d2d(void *self, dev_stream_t *stream, dev_addr_t dst, dev_addr_t src,
                           size_t n);
lms_status_t cuda_host_func(void *self, dev_stream_t *stream, dev_host_fn_t fn, void *arg);
lms_status_t cuda_launch(void *self, dev_stream_t *stream, const dev_launch_t *l);
lms_status_t cuda_set_observer(void *self, dev_observer_t fn, void *ctx);

/* For close: every timing event, the base and its stream. */
void cuda_release_observer(cuda_t *c);

#endif /* LMS_DEVICE_CUDA_H */
