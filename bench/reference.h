/*
 * bench/reference.h — the CUDA allocators lms is compared against, for the
 * benchmarks (bench/alloc). Not part of liblms.so: cuda-only code that
 * measures, on lms's device, what lms replaces.
 */
#ifndef LMS_BENCH_REFERENCE_H
#define LMS_BENCH_REFERENCE_H

#include "device/device.h"

/*
 * For benchmarks: cudaMalloc/cudaFree and cudaMallocAsync/cudaFreeAsync of the
 * CUDA runtime, on the device lms runs on (reference.c; reference_none.c where the build
 * has no CUDA headers). The runtime is
 * opened with dlopen (libcudart.so.13, .12, then libcudart.so), never linked,
 * as libcuda is. Opening retains nothing of dev and changes one thing of the
 * process: the release threshold of the device's default memory pool is
 * raised to UINT64_MAX, so that cudaMallocAsync is measured in its steady
 * state (with the default 0, the pool returns its memory to the OS at every
 * synchronize); close puts the old threshold back.
 */
typedef struct dev_reference dev_reference_t;

typedef enum dev_reference_alloc {
    DEV_REFERENCE_MALLOC,       /* cudaMalloc + cudaFree */
    DEV_REFERENCE_MALLOC_ASYNC, /* cudaMallocAsync + cudaFreeAsync on the reference's own
                                   stream (non-blocking), from the default pool */
} dev_reference_alloc_t;

/* What was opened. */
typedef struct dev_reference_info {
    char runtime[32];    /* the library loaded, e.g. "libcudart.so.13" */
    int runtime_version; /* cudaRuntimeGetVersion, e.g. 13000 */
} dev_reference_info_t;

/* Opens the reference allocators on dev's CUDA device (its info.ordinal).
 * LMS_ERR_UNSUPPORTED when dev is not on the cuda backend, when this liblms
 * was built without the CUDA toolkit, when no CUDA runtime can be loaded, or
 * when the device has no memory pools; LMS_ERR_DEVICE when the runtime fails. */
lms_status_t dev_reference_open(dev_device_t *dev, dev_reference_t **out,
                                dev_reference_info_t *info);
/* Does `pairs` allocations of size bytes, each freed at once, with the given
 * allocator, on the calling thread (which it makes use the device). Async pairs
 * are only enqueued: see dev_reference_synchronize. */
lms_status_t dev_reference_pairs(dev_reference_t *ref, dev_reference_alloc_t which, size_t size,
                                 int pairs);
/* Waits until the async pairs enqueued so far have run. */
lms_status_t dev_reference_synchronize(dev_reference_t *ref);
/* Synchronizes, restores the pool's release threshold and destroys the
 * stream. NULL is a no-op. */
void dev_reference_close(dev_reference_t *ref);

#endif /* LMS_BENCH_REFERENCE_H */
