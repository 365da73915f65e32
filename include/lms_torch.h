/*
 * lms_torch.h — liblms.so as PyTorch's allocator
 * (torch.cuda.memory.CUDAPluggableAllocator). The functions have the
 * signatures CUDAPluggableAllocator calls; a stream is a cudaStream_t.
 *
 *   import torch
 *   alloc = torch.cuda.memory.CUDAPluggableAllocator(
 *       "/path/to/liblms.so", "lms_torch_malloc", "lms_torch_free")
 *   torch.cuda.memory.change_current_allocator(alloc)   # before any CUDA tensor
 *
 * Each tensor is then its own lms allocation, on its stream. lms can only
 * swap memory out when it sees what the program's kernels touch, which
 * takes the preload (LD_PRELOAD=liblms.so): loaded as a plugin alone, lms
 * runs without swapping (lms_forbid_swapping), as an allocator with a hard
 * limit (LMS_DEVICE_LIMIT), and says so in its log once.
 *
 * The optional hooks are for C++ integrations that hold the
 * CUDAPluggableAllocator (its set_init_fn, set_reset_fn,
 * set_memory_fraction_fn and set_record_stream_fn); Python's
 * CUDAPluggableAllocator takes only malloc and free.
 */
#ifndef LMS_TORCH_H
#define LMS_TORCH_H

#include <stddef.h>

#include "lms.h"

#ifdef __cplusplus
extern "C" {
#endif

/* size bytes on `device`'s `stream`; NULL (PyTorch raises its out-of-memory
 * error) when lms cannot, or when device is not lms's (LMS_DEVICE). The
 * reason is in the log (LMS_LOG=info). */
LMS_API void *lms_torch_malloc(size_t size, int device, void *stream);

/* Frees ptr on its allocation stream, or after the work of every stream if
 * the program recorded it on another one (lms_torch_record_stream). */
LMS_API void lms_torch_free(void *ptr, size_t size, int device, void *stream);

/* set_init_fn: starts lms. */
LMS_API void lms_torch_init(int device_count);

/* set_reset_fn (torch.cuda.empty_cache): lms_empty_cache. */
LMS_API void lms_torch_reset(void);

/* set_memory_fraction_fn (torch.cuda.set_per_process_memory_fraction): the
 * device limit becomes that share of the device (lms_set_device_fraction),
 * if lms has not started yet; memory beyond it swaps rather than fails. */
LMS_API void lms_torch_memory_fraction(double fraction, int device);

/* set_record_stream_fn (Tensor.record_stream): ptr is also used on stream,
 * so its free waits for that stream's work too. */
LMS_API void lms_torch_record_stream(void *ptr, void *stream);

#ifdef __cplusplus
}
#endif
#endif /* LMS_TORCH_H */
