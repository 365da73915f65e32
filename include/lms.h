/*
 * lms.h — the public API of lms, a CUDA allocator that lets a program use more
 * GPU memory than the GPU has.
 *
 * This header is the only interface a program needs. Every fallible function
 * returns an lms_status_t (0 = LMS_OK); on failure lms_last_error() says what
 * went wrong on the calling thread, and nothing that was stored is lost.
 *
 * What exists today: status codes and error messages. The allocation API
 * (lms_malloc, lms_free, ...) arrives with the placement layer (issue 3).
 */
#ifndef LMS_H
#define LMS_H

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

#ifdef __cplusplus
}
#endif
#endif /* LMS_H */
