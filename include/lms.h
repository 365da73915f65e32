/*
 * lms.h — the public API of lms, a CUDA allocator that lets a program use more
 * GPU memory than the GPU has.
 *
 * This header is the only interface a program needs. Every fallible function
 * returns an lms_status_t (0 = LMS_OK); on failure lms_last_error() says what
 * went wrong on the calling thread, and nothing that was stored is lost.
 *
 * Today lms is a fast VMM allocator with a hard device limit: every chunk an
 * allocation touches is backed by device memory while it is allocated.
 * Swapping to host memory comes next. Settings come from LMS_* environment
 * variables (`lms-info --options` lists them).
 */
#ifndef LMS_H
#define LMS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LMS_API __attribute__((visibility("default")))

typedef enum lms_status {
    LMS_OK = 0,
    LMS_NOT_READY,         /* the queried work has not finished yet (not a failure) */
    LMS_ERR_INVALID,       /* bad argument, or a call out of order; nothing changed */
    LMS_ERR_OUT_OF_MEMORY, /* device or host memory exhausted */
    LMS_ERR_NO_DEVICE,     /* the backend or device asked for is not there */
    LMS_ERR_UNSUPPORTED,   /* this build or this backend cannot do it */
    LMS_ERR_DEVICE,        /* the driver failed; lms_last_error() names call and error */
    LMS_ERR_SYSTEM,        /* an operating-system call failed */
} lms_status_t;

/* A short, constant description of a status ("invalid argument"). Never NULL. */
LMS_API const char *lms_status_str(lms_status_t status);

/* The message of the last failure on the calling thread, naming the call and
 * its arguments (and the driver's error name for LMS_ERR_DEVICE). Valid until
 * the thread's next lms call. "" if nothing has failed on this thread. */
LMS_API const char *lms_last_error(void);

/* A stream: a FIFO of device work. Frees are stream-ordered on it. NULL names
 * lms's default stream. */
typedef struct lms_stream *lms_stream_t;

/* Opens the device (LMS_BACKEND, LMS_DEVICE), reserves the VA range and sets
 * the device limit. Called by every other function on first use; calling it
 * again is a no-op. Thread-safe. */
LMS_API lms_status_t lms_init(void);

/* Releases everything lms holds — every allocation still live included — and
 * closes the device. A later call of any function initializes lms again. */
LMS_API lms_status_t lms_shutdown(void);

/* Allocates size bytes of device memory, aligned to 256 bytes, and stores its
 * address in *ptr. The memory may be used by work enqueued on `stream` after
 * this call. size 0 succeeds with *ptr = NULL, as cudaMalloc does.
 * LMS_ERR_OUT_OF_MEMORY when the device limit is reached; *ptr is then NULL
 * and nothing else changed. */
LMS_API lms_status_t lms_malloc(void **ptr, size_t size, lms_stream_t stream);

/* Frees ptr, stream-ordered: an allocation on `stream` of the same size class
 * (or, when large, the same number of chunks) reuses the memory at once;
 * other allocations only once the work queued on `stream` before this call
 * has finished. lms never synchronizes the whole device for it, but an
 * allocation that finds no room otherwise may wait for that work.
 * NULL is a no-op. A pointer lms did not hand out, an interior pointer or a
 * second free is LMS_ERR_INVALID and changes nothing. */
LMS_API lms_status_t lms_free(void *ptr, lms_stream_t stream);

/* The allocation that contains ptr (any address inside it): its base and its
 * usable size (the request rounded up to its size class). LMS_ERR_INVALID if
 * ptr is in no live allocation. */
LMS_API lms_status_t lms_allocation_of(const void *ptr, void **base, size_t *size);

/* Device memory as lms accounts it: total is the device limit
 * (LMS_DEVICE_LIMIT); free is what allocations do not occupy. */
LMS_API lms_status_t lms_memory_info(size_t *free_bytes, size_t *total_bytes);

/* Streams of lms's device. Destroying a stream lets its queued work finish. */
LMS_API lms_status_t lms_stream_create(lms_stream_t *stream);
LMS_API lms_status_t lms_stream_destroy(lms_stream_t stream);
LMS_API lms_status_t lms_stream_synchronize(lms_stream_t stream);

#ifdef __cplusplus
}
#endif
#endif /* LMS_H */
