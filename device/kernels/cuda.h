/*
 * device/kernels/cuda.h — private to device/kernels/: what a launch of a
 * kernel carries, and the kernels' CUDA side that kernels.c calls (cuda.c;
 * cuda_none.c where the build had no CUDA headers, so no cuda device opens).
 */
#ifndef LMS_DEVICE_KERNELS_CUDA_H
#define LMS_DEVICE_KERNELS_CUDA_H

#include "device/kernels/kernels.h"

/* A kernel and its arguments: what dev_launch_t.args holds, copied in and
 * out with memcpy (the bytes have no alignment of their own). */
typedef struct kernel_call {
    enum { KERNEL_FILL, KERNEL_CHECKSUM, KERNEL_AXPY, KERNEL_INDIRECT, KERNEL_TRAINING } which;
    union {
        struct { dev_addr_t dst; size_t n; uint64_t seed; } fill;
        struct { dev_addr_t src; size_t n; uint64_t *out; } checksum;
        struct { size_t n; float a; dev_addr_t x, y; } axpy;
        struct { dev_addr_t ptrs; size_t n; uint64_t add; } indirect;
        dev_kernel_args_t training;
    } u;
} kernel_call_t;

_Static_assert(sizeof(kernel_call_t) <= DEV_LAUNCH_ARGS, "a kernel's call fits a launch");

/* The CUDA kernels (kernels.cu) as a fatbin image (sm_90 SASS + compute_90
 * PTX), embedded at build time (image.S.in); size 0 when the build had no
 * nvcc (image_none.c). */
extern const unsigned char dev_cuda_kernels_image[];
extern const size_t dev_cuda_kernels_image_size;

/* The kernels table's open for a device of the cuda backend: sets
 * dev->info.has_kernels and returns the kernels' state for the device (NULL
 * when there is no host memory for it: has_kernels is then false). */
void *kernels_cuda_open(dev_device_t *dev);
/* Releases what kernels_cuda_open made; NULL is a no-op. */
void kernels_cuda_close(void *state);
/* A launch's enqueue (dev_launch_t): enqueues call (a kernel_call_t) on the
 * CUstream `native`, the context current. */
lms_status_t kernels_cuda_enqueue(void *state, uint64_t native, const void *call);

#endif /* LMS_DEVICE_KERNELS_CUDA_H */
