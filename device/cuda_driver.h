/*
 * device/cuda_driver.h — private to device/: the CUDA driver as device/
 * reaches it, for the cuda backend (cuda.c) and the CUDA side of the test
 * kernels (kernels/cuda.c). libcuda is opened with dlopen, never linked;
 * entry points are resolved by name (Note [Resolving the driver] in
 * cuda_driver.c); a driver failure becomes a status with a message. No
 * state but the driver's error functions, set at the first open.
 */
#ifndef LMS_DEVICE_CUDA_DRIVER_H
#define LMS_DEVICE_CUDA_DRIVER_H

#include <cuda.h>
#include <stddef.h>

#include "lms.h"

#if CUDA_VERSION < 12000
#error "device/ needs CUDA 12.0 headers or later (cuGetProcAddress_v2)"
#endif

typedef __typeof__(cuGetProcAddress_v2) dev_cuda_get_proc_t;

/* An entry point to resolve: its base name, as cuGetProcAddress wants it
 * ("cuMemGetInfo", never "cuMemGetInfo_v2"), and the offset of its pointer
 * in the caller's table, whose type must be what cuda.h makes of the name. */
typedef struct dev_cuda_sym {
    const char *name;
    size_t offset;
} dev_cuda_sym_t;

/* Opens libcuda.so.1 and checks that the driver serves CUDA_VERSION;
 * *get_proc is its cuGetProcAddress_v2. LMS_ERR_NO_DEVICE, with a message,
 * when there is no driver or it is too old (nothing is then left open).
 * dlclose(*libcuda) balances it. */
lms_status_t dev_cuda_driver_open(void **libcuda, dev_cuda_get_proc_t **get_proc);

/* Fills table with the n entry points of syms at CUDA_VERSION;
 * LMS_ERR_NO_DEVICE, naming it, if the driver lacks one. */
lms_status_t dev_cuda_resolve(dev_cuda_get_proc_t *get_proc, const dev_cuda_sym_t *syms, size_t n,
                              void *table);

/* "CUDA_ERROR_OUT_OF_MEMORY (out of memory)" into buf; "CUresult 2" until a
 * driver has been opened. */
void dev_cuda_error_text(CUresult r, char *buf, size_t len);

/* The one way a driver failure leaves device/: records
 * "<call and its arguments>: <error name> (<error string>)" and returns the
 * status r maps to. r must not be CUDA_SUCCESS. */
lms_status_t dev_cuda_fail(CUresult r, const char *call, ...) __attribute__((format(printf, 2, 3)));

/* For a close, which cannot fail: logs "cuda: closing device <ordinal>:
 * <call>: <error>" unless r is CUDA_SUCCESS. At process exit the driver may
 * already be gone (DEINITIALIZED): that is only debug. */
void dev_cuda_log_close(int ordinal, CUresult r, const char *call);

#endif /* LMS_DEVICE_CUDA_DRIVER_H */
