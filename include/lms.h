/*
 * lms.h — the public API of lms, a CUDA allocator that lets a program use more
 * GPU memory than the GPU has.
 *
 * This header is the only interface a program needs. Every fallible function
 * returns an lms_status_t (0 = LMS_OK); on failure lms_last_error() says what
 * went wrong on the calling thread, and nothing that was stored is lost.
 *
 * Allocations may add up to more than the device limit (LMS_DEVICE_LIMIT):
 * the device holds the chunks in use, the rest waits in pinned host memory
 * (LMS_HOST_LIMIT). A GPU cannot fault memory in, so a program says what its
 * next work touches with lms_access (or lms_pin), and lms makes it resident
 * before that work runs. Settings come from LMS_* environment variables
 * (`lms-info --options` lists them).
 */
#ifndef LMS_H
#define LMS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LMS_API __attribute__((visibility("default")))

/* The version of this header. CMakeLists.txt's project(lms VERSION ...) is the
 * same three numbers (configuring fails where they differ): the build's one
 * version. */
#define LMS_VERSION_MAJOR 0
#define LMS_VERSION_MINOR 1
#define LMS_VERSION_PATCH 0
#define LMS_VERSION_TEXT_(n) #n
#define LMS_VERSION_TEXT(n) LMS_VERSION_TEXT_(n)
/* "MAJOR.MINOR.PATCH", made of the three above ("0.1.0") */
#define LMS_VERSION                                                                          \
    LMS_VERSION_TEXT(LMS_VERSION_MAJOR) "." LMS_VERSION_TEXT(LMS_VERSION_MINOR) "."          \
        LMS_VERSION_TEXT(LMS_VERSION_PATCH)

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

/* The version of the liblms.so running ("0.1.0"), which is LMS_VERSION of the
 * lms.h it was built with: a program built against another version's header
 * can tell. Never NULL, never fails, needs no lms_init. */
LMS_API const char *lms_version(void);

/* The message of the last failure on the calling thread, naming the call and
 * its arguments (and the driver's error name for LMS_ERR_DEVICE). Valid until
 * the thread's next lms call. "" if nothing has failed on this thread. */
LMS_API const char *lms_last_error(void);

/* A stream: a FIFO of device work. Frees are stream-ordered on it. NULL names
 * lms's default stream. */
typedef struct lms_stream *lms_stream_t;

/* For lms_free only: the free is ordered after the work queued so far on
 * every stream, as cudaFree's is (but lms_free does not wait for it). */
#define LMS_ALL_STREAMS ((lms_stream_t)(uintptr_t)-1)

/* Opens the device (LMS_BACKEND, LMS_DEVICE), reserves the VA range and sets
 * the device limit. Called by every other function on first use; calling it
 * again is a no-op. Thread-safe. */
LMS_API lms_status_t lms_init(void);

/* Releases everything lms holds — every allocation still live included — and
 * closes the device. A later call of any function initializes lms again. No
 * other lms call may run in another thread meanwhile. */
LMS_API lms_status_t lms_shutdown(void);

/* Allocates size bytes of device memory, aligned to 256 bytes, and stores its
 * address in *ptr. Nothing is backed yet: before device work touches the
 * memory, lms_access (or lms_pin) must make it resident. size 0 succeeds with
 * *ptr = NULL, as cudaMalloc does. LMS_ERR_OUT_OF_MEMORY when allocations
 * would exceed the device limit plus the host limit, less the room swapping
 * needs to turn (LMS_RECLAIM_HIGH), so that whatever is allocated always has
 * somewhere to be; *ptr is then NULL and nothing else changed. With
 * LMS_SWAP=0 the device limit alone. */
LMS_API lms_status_t lms_malloc(void **ptr, size_t size, lms_stream_t stream);

/* Frees ptr, stream-ordered: an allocation on `stream` of the same size class
 * (or, when large, the same number of chunks) reuses the memory at once;
 * other allocations only once the work queued on `stream` before this call
 * has finished. lms never synchronizes the whole device for it, but an
 * allocation that finds no room otherwise may wait for that work.
 * A small free first goes to the calling thread's cache (LMS_THREAD_CACHE),
 * whose memory only that thread's allocations on `stream` reuse, without a
 * lock; it goes back to `stream` when the thread calls lms_malloc or lms_free
 * on another stream, exits, or finds no room to allocate (or, at its next
 * call, when another thread found no room).
 * With stream LMS_ALL_STREAMS, no allocation on any stream reuses the
 * memory before the work queued on every stream before this call has
 * finished (and the thread cache is not used).
 * NULL is a no-op. A pointer lms did not hand out, an interior pointer or a
 * second free is LMS_ERR_INVALID and changes nothing. */
LMS_API lms_status_t lms_free(void *ptr, lms_stream_t stream);

/* The allocation that contains ptr (any address inside it): its base and its
 * usable size (the request rounded up to its size class). LMS_ERR_INVALID if
 * ptr is in no live allocation. */
LMS_API lms_status_t lms_allocation_of(const void *ptr, void **base, size_t *size);

/* The device address range lms reserved (LMS_VA_RESERVE): every pointer lms
 * hands out lies in [*base, *base + *bytes), and nothing else does.
 * Initializes lms if it is not yet. */
LMS_API lms_status_t lms_reserved_range(void **base, size_t *bytes);

/* Device memory as lms accounts it: total is the device limit
 * (LMS_DEVICE_LIMIT); free is what can still be allocated (device plus host
 * room not yet taken by allocations), at most total. */
LMS_API lms_status_t lms_memory_info(size_t *free_bytes, size_t *total_bytes);

/* Before lms starts (lms_init, or the first call that starts it): its
 * device limit will be this share of the device's memory, in place of
 * LMS_DEVICE_LIMIT, for this start and later ones (as a framework's memory
 * fraction: torch.cuda.set_per_process_memory_fraction); 0 goes back to
 * LMS_DEVICE_LIMIT. LMS_ERR_INVALID outside [0, 1]; LMS_ERR_UNSUPPORTED
 * while lms runs (its limit is fixed until lms_shutdown). */
LMS_API lms_status_t lms_set_device_fraction(double fraction);

/* Before lms starts: it will start without swapping (as LMS_SWAP=0: the
 * device limit is hard and allocations are backed at once), for code that
 * hands out lms memory without seeing what the program's kernels touch (the
 * PyTorch plugin loaded without the preload). LMS_ERR_UNSUPPORTED while lms
 * runs with swapping; LMS_OK if it runs without. */
LMS_API lms_status_t lms_forbid_swapping(void);

/* Before lms starts: the program may touch lms's memory where lms does not
 * see it (a pointer stored in device memory, a launch whose parameters lms
 * cannot read), as code that hands out lms memory to kernels it does not
 * know may (the preload and the PyTorch plugin call it). With LMS_EVICTED=auto
 * lms weighs this, for this start and later ones, when it chooses where an
 * evicted chunk's addresses point (`lms-info` says which and why).
 * LMS_ERR_UNSUPPORTED while lms runs, unless it was called before lms
 * started; nothing changes then. */
LMS_API lms_status_t lms_expect_unseen_access(void);

/* Gives the driver back the device memory lms holds but nothing uses: the
 * blocks of freed memory and those evictions left empty (a framework's
 * empty_cache). lms creates blocks again, within its limit, when it needs
 * them. Waits for the work that may still use freed memory first. */
LMS_API lms_status_t lms_empty_cache(void);

/* How work uses a range. */
typedef enum lms_access_mode {
    LMS_READ = 1,      /* reads it: its contents must be there */
    LMS_WRITE = 2,     /* reads and writes it (bytes not written keep their value) */
    LMS_OVERWRITE = 3, /* writes every byte before reading any: old contents need not move */
} lms_access_mode_t;

typedef struct lms_range {
    const void *ptr;
    size_t bytes;
    lms_access_mode_t mode;
} lms_range_t;

/* Makes [ptr, ptr + bytes), which must lie inside one live allocation and be
 * non-empty, resident for the work the calling thread enqueues on `stream`
 * next: data not on the device is fetched on lms's copy stream and `stream`
 * waits for it on the device (the host blocks only when no device memory is
 * free and some must first be evicted). The range stays resident until the
 * calling thread's next call into lms (any function but lms_status_str and
 * lms_last_error): enqueue the work that uses it before calling lms again,
 * and name every range one piece of work uses in one lms_access_many call.
 * After that, eviction waits on the device for all work enqueued on `stream`
 * up to that point. LMS_ERR_OUT_OF_MEMORY when the range cannot be made
 * resident because everything else on the device is pinned or in use; then
 * nothing stored was lost (part of the range may have been fetched, and
 * other memory evicted, on the way). */
LMS_API lms_status_t lms_access(const void *ptr, size_t bytes, lms_access_mode_t mode,
                                lms_stream_t stream);
LMS_API lms_status_t lms_access_many(const lms_range_t *ranges, size_t n, lms_stream_t stream);

/* lms_access_many of the whole allocation that contains each of ptrs[0..n):
 * for code that sees pointer values but not what they point to, as a
 * kernel-launch hook does. A pointer in no live allocation is skipped (a
 * launch parameter may be an integer that only looks like an address);
 * n == 0, or no pointer in a live allocation, is LMS_OK and makes nothing
 * resident. */
LMS_API lms_status_t lms_access_pointers(const void *const *ptrs, size_t n,
                                         lms_access_mode_t mode, lms_stream_t stream);

/* lms_access_pointers with a mode for each pointer: modes[i] for ptrs[i]. An
 * allocation that more than one pointer names gets what their modes need
 * together (named for reading and for writing: written). */
LMS_API lms_status_t lms_access_pointers_modes(const void *const *ptrs,
                                               const lms_access_mode_t *modes, size_t n,
                                               lms_stream_t stream);

/* Marks the end of a training iteration (a step: forward, backward and
 * optimizer). lms learns the order in which an iteration accesses memory and,
 * from the next iteration on, evicts what is needed furthest ahead and
 * fetches what is needed next before it is accessed (LMS_POLICY=schedule, the
 * default). Without marks, lms finds iterations in the repeating sequence of
 * accesses itself; once a program marks one, only marks end iterations.
 * While accesses stop following the learnt order, eviction is least recently
 * used. Optional: calling it is never needed for correctness. */
LMS_API lms_status_t lms_mark_iteration(void);

/* Makes [ptr, ptr + bytes) resident, waits until it is, and keeps it resident
 * (for any stream, with no lms_access) until as many lms_unpin calls of the
 * same range. For memory the program cannot name per piece of work (pointer
 * arrays in device memory). Pins count: pinned bytes are not swappable. */
LMS_API lms_status_t lms_pin(const void *ptr, size_t bytes);
LMS_API lms_status_t lms_unpin(const void *ptr, size_t bytes);

/* Counters since lms_init, and the current residency. Byte counts and chunk
 * counts are of whole chunks (the unit lms moves). The fields, in order, are
 * one list, LMS_STATS_FIELDS(X): X(name) for each uint64_t field of
 * lms_stats_t (the timeline writes otherData.stats from it). */
#define LMS_STATS_FIELDS(X)                                                                  \
    X(bytes_h2d)           /* fetched to the device */                                       \
    X(bytes_d2h)           /* copied out to host memory */                                   \
    X(evictions)           /* chunks evicted with a copy */                                  \
    X(clean_drops)         /* chunks evicted without one: their host copy was current */     \
    X(fetches)             /* chunks fetched */                                              \
    X(prefetch_hits)       /* chunks an access found fetched ahead of it (landed or on the   \
                              way) */                                                        \
    X(stall_ns)            /* time callers were blocked waiting for an eviction (or for      \
                              queued work to let go of memory): host time, summed over       \
                              threads. A program that queues work ahead of the device waits  \
                              here whenever the device is full, even while the device never  \
                              idles: not the time swapping costs it */                       \
    X(ooms)                /* calls that failed with LMS_ERR_OUT_OF_MEMORY */                \
    X(resident_bytes)      /* backed by device memory now */                                 \
    X(peak_resident_bytes) /* the most resident_bytes has been */                            \
    X(host_bytes)          /* held in host memory now (copies of resident chunks included) */ \
    X(pinned_bytes)        /* in chunks pinned now */                                        \
    X(allocated_bytes)     /* chunks allocations occupy */                                   \
    X(device_limit)        /* the device memory lms may use now */                           \
    X(host_limit)          /* the host memory it may swap to; 0: it does not swap */         \
    X(launches)            /* kernel launches a launch hook saw (lms_note_launch) */         \
    X(launches_unknown)    /* of those, launches whose parameter layout could not be learnt: \
                              what they touch of lms's memory was not made resident */       \
    X(launches_without_lms) /* of those, launches whose parameters held no lms pointer */

/* What a kernel-launch hook saw of one launch it passed on, for lms_stats. */
typedef enum lms_launch_seen {
    LMS_LAUNCH_POINTERS = 1, /* its parameters were read: they held lms pointers */
    LMS_LAUNCH_NO_POINTER,   /* they were read: no lms pointer among them */
    LMS_LAUNCH_UNKNOWN,      /* its parameter layout could not be learnt */
} lms_launch_seen_t;

/* Counts one launch in lms_stats (launches, and launches_unknown or
 * launches_without_lms), for code that makes what launches touch resident
 * (the interposer). Lock-free. LMS_ERR_INVALID for another value. */
LMS_API lms_status_t lms_note_launch(lms_launch_seen_t seen);

typedef struct lms_stats {
#define LMS_STATS_FIELD_(name) uint64_t name;
    LMS_STATS_FIELDS(LMS_STATS_FIELD_)
#undef LMS_STATS_FIELD_
} lms_stats_t;
LMS_API lms_status_t lms_stats(lms_stats_t *stats);

/* The names of lms_stats_t's fields, in order ("bytes_h2d", ...): *names gets
 * a constant array of *count names, field i of lms_stats_t being the uint64_t
 * at offset 8 * i, so that a binding (ctypes, say) reads the struct of the
 * liblms.so it loaded without a copy of LMS_STATS_FIELDS. Needs no lms_init.
 * LMS_ERR_INVALID for a NULL argument. */
LMS_API lms_status_t lms_stats_fields(const char *const **names, size_t *count);

/* Streams of lms's device. Destroying a stream lets its queued work finish. */
LMS_API lms_status_t lms_stream_create(lms_stream_t *stream);
LMS_API lms_status_t lms_stream_destroy(lms_stream_t stream);
LMS_API lms_status_t lms_stream_synchronize(lms_stream_t stream);

/* The lms stream for a CUDA stream of the program (a cudaStream_t or
 * CUstream of lms's device, cast to void *), which lms then uses as it
 * uses its own: lms_access on it makes that CUDA stream wait, on the device,
 * for what it fetches; evictions wait for the work queued on it; frees on it
 * are ordered on it. NULL, cudaStreamLegacy and cudaStreamPerThread all name
 * the legacy default stream. The first call for a CUDA stream makes the lms
 * stream; later calls return the same one. lms never destroys the CUDA
 * stream: lms_stream_destroy of an adopted stream waits for its queued work
 * and forgets it. On the sim backend the CUDA stream is only a name.
 * LMS_ERR_DEVICE when the driver rejects the stream. */
LMS_API lms_status_t lms_stream_adopt(void *cuda_stream, lms_stream_t *stream);

/* lms_stream_destroy of the stream adopted for cuda_stream, if there is one;
 * LMS_OK and nothing done if there is none. A program that destroys an
 * adopted CUDA stream calls it first (the interposer does, in cudaStreamDestroy). */
LMS_API lms_status_t lms_stream_unadopt(void *cuda_stream);

#ifdef __cplusplus
}
#endif
#endif /* LMS_H */
