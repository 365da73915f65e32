/*
 * device/ — the only code in lms that calls CUDA or emulates it.
 *
 * One interface, the ops table dev_ops_t below, with two backends:
 *   cuda  libcuda.so.1 opened with dlopen, entry points from cuGetProcAddress;
 *         liblms.so never links libcuda, so it loads where no driver is.
 *   sim   a GPU emulated in host memory with the same failure semantics: see
 *         Note [Sim semantics] in sim.c.
 * and two layers that wrap any backend with the same table (composition, as
 * RMM wraps resources):
 *   check  checks every handle (a destroyed stream, one of another device,
 *          ...: a clean LMS_ERR_INVALID on every backend) and keeps the
 *          bookkeeping that dev_close and dev_live need; with full
 *          validation (dev_checks_t) it also checks every range and mapping
 *          against it (a double unmap, a copy outside the reservations, ...);
 *          always the outermost layer.
 *   fault  fails chosen calls ("the Nth call of op X", or at random with a
 *          probability and a seed), for error-path tests; optional.
 * dev_open() builds the stack  check -> [fault ->] sim|cuda.
 *
 * Glossary
 *   granularity  the size of a physical block and the alignment of every map
 *                (2 MiB on current GPUs). lms's chunks are built from blocks.
 *   reservation  a range of device virtual addresses with nothing behind it.
 *   block        granularity bytes of device memory; mapped at a VA it backs
 *                that VA. A block may be mapped at several VAs at once.
 *   host block   granularity bytes of host memory (on the device's NUMA node
 *                where the backend can place it) that maps at a VA as a block
 *                does; with set_access_host the device and the CPU both read
 *                and write it there. Where info.host_blocks says so.
 *   access       a mapped VA is usable by kernels and copies only after
 *                set_access; an unmapped VA faults (sim: SIGSEGV; cuda: an
 *                illegal-address error that kills the context).
 *   stream       a FIFO of device work. Work on different streams may overlap.
 *   event        a marker recorded on a stream; done when the work recorded
 *                before it has finished. Never recorded = done. Re-recording
 *                replaces the marker; a wait uses the latest record at the time
 *                the wait was enqueued.
 *   observer     a function told of each copy and kernel after it has run,
 *                with when the device ran it (set_observer): what the
 *                LMS_TRACE timeline draws device work from.
 *
 * Who waits: device work is asynchronous. unmap, block_release, va_free,
 * host_unregister and event/stream destroy do NOT wait for queued work that
 * uses the memory or object; the caller must make sure (with an event) that
 * such work has finished first. A kernel or copy that touches memory unmapped
 * under it faults, as on a real GPU.
 *
 * Threads: every op may be called from any thread, concurrently, except that a
 * caller must not race an op that destroys an object with another use of that
 * same object. Host functions run on a thread of the device (sim: the
 * stream's worker; cuda: a driver thread); they, and a launch's run and
 * enqueue (dev_launch_t), must not call ops.
 *
 * liblms has no kernels of its own: the test kernels of tests and benchmarks
 * are a library outside it (device/kernels/kernels.h) that runs them through
 * the launch op, and is told of each device opened through its kernels table
 * (dev_kernels_t, at the end).
 */
#ifndef LMS_DEVICE_H
#define LMS_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lms.h"

typedef uint64_t dev_addr_t;         /* a device virtual address (CUdeviceptr) */
typedef uint64_t dev_block_t;        /* a physical block; 0 is never a block */
typedef struct dev_stream dev_stream_t; /* opaque, owned by the layer that made it */
typedef struct dev_event dev_event_t;   /* opaque, owned by the layer that made it */
typedef void (*dev_host_fn_t)(void *arg);

/* A piece of device work as it ran, for an observer (set_observer below). */
typedef enum dev_work_kind {
    DEV_WORK_H2D,     /* copy_h2d */
    DEV_WORK_D2H,     /* copy_d2h */
    DEV_WORK_D2D,     /* copy_d2d */
    DEV_WORK_COMPUTE, /* a host function or a launch */
} dev_work_kind_t;

typedef struct dev_work {
    dev_work_kind_t kind;
    dev_stream_t *stream; /* the stream it ran on, as the op's caller named it;
                             NULL if that stream has been destroyed since */
    const char *name;     /* the op: "copy_h2d", "copy_d2h", "copy_d2d", "host_func",
                             or a launch's name ("fill", "gemm", ...) (static storage) */
    size_t bytes;         /* copies: the bytes copied; compute: 0 */
    uint64_t start_ns;    /* when the device started it and finished it, on the clock */
    uint64_t end_ns;      /* of base_now_ns() (CLOCK_MONOTONIC); start_ns <= end_ns */
} dev_work_t;

/* Called once per piece of work that ran while it was set: see set_observer. */
typedef void (*dev_observer_t)(void *ctx, const dev_work_t *work);

typedef enum dev_priority {
    DEV_PRIORITY_NORMAL,
    DEV_PRIORITY_HIGH, /* the device's greatest priority: the copy streams */
} dev_priority_t;

/* What a device is; filled at open (by the backend, but has_kernels) and never
 * changed after. */
typedef struct dev_info {
    const char *backend;  /* "sim" or "cuda" */
    char name[96];        /* device name, e.g. "NVIDIA H100 80GB HBM3" */
    int ordinal;          /* CUDA device ordinal; 0 on sim */
    size_t total_memory;  /* bytes of device memory */
    size_t granularity;   /* block size and map alignment, a power of two */
    int host_numa_node;   /* NUMA node of host memory nearest the device; -1 unknown */
    bool host_blocks;     /* host blocks (host_block_create) can be made and mapped here */
    char host_blocks_why[128]; /* without host_blocks, why not, in a few words; else "" */
    bool host_block_runs; /* a copy's host range may span adjacent host blocks mapped in one
                             reservation; else each copy stays in one (cuda: not until a
                             card has shown it works, issue 27) */
    bool has_kernels;     /* the kernels table's kernels run here: set by its open
                             (dev_kernels_t); false without one */
} dev_info_t;

/* Work brought from outside liblms, for the launch op (see there). */
#define DEV_LAUNCH_RANGES 4 /* device ranges a launch may touch */
#define DEV_LAUNCH_ARGS 80  /* bytes of arguments a launch carries */

typedef struct dev_launch {
    const char *name;  /* the work, for the observer and messages (static storage) */
    size_t nranges;    /* ranges[0..nranges): the device memory the work touches */
    struct {
        dev_addr_t addr;
        size_t bytes;
    } ranges[DEV_LAUNCH_RANGES];
    void (*run)(const void *args); /* sim: the work itself, on the host */
    lms_status_t (*enqueue)(void *ctx, uint64_t native, const void *args); /* cuda: enqueues it */
    void *ctx;         /* enqueue's first argument */
    unsigned char args[DEV_LAUNCH_ARGS]; /* the work's arguments, as run and enqueue read them */
} dev_launch_t;

/*
 * The ops table. Every entry returns LMS_OK or a failure status with a message
 * (base_fail); on failure nothing changed and nothing leaked: the objects given
 * stay valid and no object was created. `self` is the layer's own state.
 * Sizes and offsets of the VMM ops are multiples of the granularity.
 */
typedef struct dev_ops {
    const char *name; /* the layer: "check", "fault", "sim", "cuda" */

    /* Releases what the layer still holds (it has already been told to destroy
     * everything it handed out, or the process is ending) and frees self. */
    void (*close)(void *self);

    /* Free and total device memory in bytes. */
    lms_status_t (*mem_info)(void *self, size_t *free_bytes, size_t *total_bytes);

    /* Reserves size bytes of VA, aligned to the granularity, with nothing
     * mapped. *base is never 0. */
    lms_status_t (*va_reserve)(void *self, size_t size, dev_addr_t *base);
    /* Returns a whole reservation (base and size as reserved); nothing in it
     * may still be mapped. */
    lms_status_t (*va_free)(void *self, dev_addr_t base, size_t size);

    /* Creates one block of device memory (granularity bytes, contents
     * undefined). LMS_ERR_OUT_OF_MEMORY when the device has no room. */
    lms_status_t (*block_create)(void *self, dev_block_t *block);
    /* Releases a block or a host block that is mapped nowhere. */
    lms_status_t (*block_release)(void *self, dev_block_t block);

    /* Maps block at va (granularity bytes), which must be reserved and
     * unmapped, at offset 0 of the block. block may be a host block. The VA
     * is not yet accessible: see set_access and set_access_host. */
    lms_status_t (*map)(void *self, dev_addr_t va, dev_block_t block);
    /* Makes [va, va+size) readable and writable by the device; every block of
     * it must be mapped. One call per contiguous run (it costs one driver call). */
    lms_status_t (*set_access)(void *self, dev_addr_t va, size_t size);
    /* Unmaps [va, va+size), every block of which must be mapped; the VA stays
     * reserved. Does not wait for queued work: see "Who waits". */
    lms_status_t (*unmap)(void *self, dev_addr_t va, size_t size);

    /* Page-locks host memory [ptr, ptr+size) for fast async copies. The range
     * must not overlap a registered one. Slow: never on the swap path. */
    lms_status_t (*host_register)(void *self, void *ptr, size_t size);
    /* Undoes host_register; ptr must be the start of a registered range. */
    lms_status_t (*host_unregister)(void *self, void *ptr);

    /* Creates a stream that does not synchronize with the legacy default stream. */
    lms_status_t (*stream_create)(void *self, dev_priority_t priority, dev_stream_t **stream);
    /* A stream for the program's own CUDA stream `native` (a CUstream, never
     * 0: CU_STREAM_LEGACY, 0x1, names the legacy default stream). cuda: the
     * ops on it act on that stream, which stays the program's: destroying
     * the adopted stream forgets it, and the program must not destroy the
     * native stream while lms uses it. sim: a new stream, which `native`
     * only names. Adopting one native stream twice gives two streams. */
    lms_status_t (*stream_adopt)(void *self, uint64_t native, dev_stream_t **stream);
    /* Destroys a stream; work already queued on it still runs to the end. */
    lms_status_t (*stream_destroy)(void *self, dev_stream_t *stream);
    /* Blocks until all work queued on stream so far has finished. */
    lms_status_t (*stream_synchronize)(void *self, dev_stream_t *stream);

    /* Creates an event (no timing), done until first recorded. */
    lms_status_t (*event_create)(void *self, dev_event_t **event);
    lms_status_t (*event_destroy)(void *self, dev_event_t *event);
    /* Records event at the current end of stream. */
    lms_status_t (*event_record)(void *self, dev_event_t *event, dev_stream_t *stream);
    /* LMS_OK if done, LMS_NOT_READY if not; never blocks. */
    lms_status_t (*event_query)(void *self, dev_event_t *event);
    /* Blocks until event is done. */
    lms_status_t (*event_synchronize)(void *self, dev_event_t *event);
    /* Work queued on stream after this call waits until event's latest
     * record (as of now) is done. The host does not block. */
    lms_status_t (*stream_wait_event)(void *self, dev_stream_t *stream, dev_event_t *event);

    /* Async copies of n > 0 bytes, in stream order. Host memory should be
     * registered (else cuda may copy synchronously); it must stay valid until
     * the copy has run. Device ranges must be mapped with access when the copy runs. */
    lms_status_t (*copy_h2d)(void *self, dev_stream_t *stream, dev_addr_t dst, const void *src,
                             size_t n);
    lms_status_t (*copy_d2h)(void *self, dev_stream_t *stream, void *dst, dev_addr_t src,
                             size_t n);
    lms_status_t (*copy_d2d)(void *self, dev_stream_t *stream, dev_addr_t dst, dev_addr_t src,
                             size_t n);

    /* Runs fn(arg) on a device thread when the work before it on stream has
     * finished; work after it waits for fn to return. fn must not call ops. */
    lms_status_t (*host_func)(void *self, dev_stream_t *stream, dev_host_fn_t fn, void *arg);

    /* Runs l, work brought from outside liblms (the test kernels), on stream
     * in stream order, as one piece of work named l->name. The check layer
     * checks l's ranges as a copy's device ranges, and that run and enqueue
     * are both set (each backend calls its own); the work must touch no
     * other device memory. l may be gone once this returns.
     *   sim:  l->run(args) runs on the stream's worker once the work before
     *         it has finished, on a copy of l->args made here; device
     *         addresses are host addresses there.
     *   cuda: l->enqueue(l->ctx, native, l->args) is called now, on this
     *         thread, with the device's primary context current, and
     *         enqueues the work on `native`, stream's CUstream; its status
     *         is the op's (what it enqueued before a failure stays queued). */
    lms_status_t (*launch)(void *self, dev_stream_t *stream, const dev_launch_t *l);

    /* Sets the observer (fn NULL: none, as at open): fn(ctx, work) is then
     * called once for each copy, host function and launch, after it
     * has run, with the times at which the device ran it: measured where it
     * ran, not when it was enqueued. Event records and waits are not work.
     *   sim:  for the work a stream's worker starts while fn is set; called
     *         on that worker, before the work counts as finished, so that
     *         once an event recorded after it is done (or a synchronize has
     *         returned) it has been reported. A throttled copy's span is its
     *         slot on the link.
     *   cuda: for the work enqueued while fn is set (bracketed by timing
     *         events; see Note [Timing work on the GPU] in cuda.c); called
     *         later, on the thread of an event_query, event_synchronize,
     *         stream_synchronize or set_observer of this device, once the
     *         work's end event has completed (after stream_synchronize
     *         returns, that stream's work has been reported).
     * fn must not call ops and should be quick: calls may come from several
     * threads at once and hold the device's work back. Replacing the
     * observer (with NULL too) returns once every call of the old one has
     * returned; on cuda it first waits for the work enqueued under the old
     * one to finish, and reports it. While no observer is set, the ops pay
     * one branch for this. */
    lms_status_t (*set_observer)(void *self, dev_observer_t fn, void *ctx);

    /* Host blocks (issue 27), where info.host_blocks; LMS_ERR_UNSUPPORTED
     * elsewhere. */

    /* Creates one host block (granularity bytes of host memory, contents
     * undefined), which map, unmap and block_release take as they take a
     * block. LMS_ERR_OUT_OF_MEMORY when the host has no room. */
    lms_status_t (*host_block_create)(void *self, dev_block_t *block);
    /* Makes [va, va+size), every block of which must be a mapped host block,
     * readable and writable by the device and by the CPU: (void *)va is then
     * a host pointer to the blocks, for the CPU and as the host side of
     * copy_h2d and copy_d2h, until unmapped. One call per contiguous run. */
    lms_status_t (*set_access_host)(void *self, dev_addr_t va, size_t size);
} dev_ops_t;

/* The ops by name, in table order (after `name` and `close`): the fault layer
 * and its tests count and name calls with these. */
#define DEV_OP_LIST(X)                                                                   \
    X(mem_info) X(va_reserve) X(va_free) X(block_create) X(block_release) X(map)          \
    X(set_access) X(unmap) X(host_register) X(host_unregister) X(stream_create)           \
    X(stream_adopt) X(stream_destroy) X(stream_synchronize) X(event_create)               \
    X(event_destroy) X(event_record) X(event_query) X(event_synchronize)                  \
    X(stream_wait_event) X(copy_h2d) X(copy_d2h) X(copy_d2d) X(host_func) X(launch)       \
    X(set_observer) X(host_block_create) X(set_access_host)

typedef enum dev_op {
#define DEV_OP_ENUM(op) DEV_OP_##op,
    DEV_OP_LIST(DEV_OP_ENUM)
#undef DEV_OP_ENUM
    DEV_OP_COUNT
} dev_op_t;

/* "map" for DEV_OP_map; "?" out of range. */
const char *dev_op_name(dev_op_t op);

/* ---- opening a device --------------------------------------------------- */

/* The check layer's two levels (Note [Two levels of checking] in check.c). */
typedef enum dev_checks {
    DEV_CHECKS_DEFAULT, /* LMS_DEVICE_CHECKS: auto is full in Debug and sanitizer builds */
    DEV_CHECKS_HANDLES, /* handles and stateless arguments only; no lock on copies */
    DEV_CHECKS_FULL,    /* also every range and mapping against the bookkeeping */
} dev_checks_t;

typedef struct dev_config {
    const char *backend;    /* "auto" (cuda if a device is present, else sim), "cuda", "sim" */
    int ordinal;            /* CUDA device ordinal */
    size_t sim_memory;      /* sim: device memory, a multiple of sim_granularity */
    size_t sim_granularity; /* sim: a power of two, at least the page size */
    double sim_h2d_gbps;    /* sim: copy bandwidth limits in GB/s (1e9 B/s); 0 = none */
    double sim_d2h_gbps;
    double sim_vmm_us_per_mib; /* sim: host time of an unmap or a set_access, us per MiB,
                                  paid one call at a time (as the cuda driver serializes
                                  them); 0 = none */
    double sim_set_access_d2h_us_per_mib; /* sim: a set_access's while a D2H copy runs
                                             (the H100's is about 33 times its idle one);
                                             0 = as sim_vmm_us_per_mib */
    bool sim_no_host_blocks; /* sim: a device without host blocks (info.host_blocks false),
                                as a GPU that cannot make them */
    bool sim_no_host_block_runs; /* sim: info.host_block_runs false, as cuda's */
    dev_checks_t checks;    /* how much the check layer checks (DEV_CHECKS_DEFAULT:
                               LMS_DEVICE_CHECKS) */
    bool fault_injection;   /* put the fault layer into the stack */
    const struct dev_fault_plan *fault_plan; /* with fault_injection: the plan in force from
                                                open on, before anything calls the device
                                                (NULL: none; see dev_fault_set) */
} dev_config_t;

/* Fills cfg from the LMS_* options (LMS_BACKEND, LMS_DEVICE, LMS_SIM_*). */
void dev_config_from_options(dev_config_t *cfg);

/* A device: its ops table, the state of the outermost layer, and its info.
 * Call through the dev_* wrappers below. */
typedef struct dev_device {
    const dev_ops_t *ops;
    void *self;
    dev_info_t info;
    struct dev_fault *fault; /* the fault layer, or NULL */
    const struct dev_kernels *kernel_table; /* the kernels table at open, or NULL */
    void *kernels;           /* that table's state for this device (its open sets it) */
} dev_device_t;

/* Opens the device cfg names (NULL: from the options). LMS_ERR_NO_DEVICE when
 * cuda is asked for and there is no driver or device; LMS_ERR_INVALID for a
 * bad sim configuration, or a fault plan that dev_fault_set would refuse. */
lms_status_t dev_open(const dev_config_t *cfg, dev_device_t **out);

/* Destroys what is still alive (streams are drained, mappings undone, blocks
 * and reservations released) and closes the device. NULL is a no-op. */
void dev_close(dev_device_t *dev);

/* Objects the check layer holds for the caller: what a leak test counts.
 * Host blocks are counted apart from (device) blocks, and so are their maps. */
typedef struct dev_live {
    size_t reservations, blocks, mapped_blocks, host_ranges, streams, events;
    size_t host_blocks, mapped_host_blocks;
} dev_live_t;
void dev_live(dev_device_t *dev, dev_live_t *out);

/* ---- the kernels table ----------------------------------------------------- */

/* What a library of kernels outside liblms (device/kernels/kernels.h) needs of
 * every device: to be told when it opens and closes. See Note [Kernels table]
 * in device.c. */
typedef struct dev_kernels {
    /* Called by dev_open once dev's stack is built, on the opening thread and
     * before dev_open returns, so before any op is called on dev: sets
     * dev->info.has_kernels and dev->kernels. It cannot fail the open: what
     * goes wrong is for the kernels to report when launched. */
    void (*open)(dev_device_t *dev);
    /* Called by dev_close once what the caller left alive is destroyed, before
     * the layers close: releases what open set up. */
    void (*close)(dev_device_t *dev);
} dev_kernels_t;

/* Sets the kernels table of the devices opened from now on (NULL: none, as at
 * start); a device keeps the one it was opened with. */
void dev_set_kernels(const dev_kernels_t *kernels);

/* ---- calls ---------------------------------------------------------------- */

#define DEV_CALL(dev, op, ...) ((dev)->ops->op((dev)->self, __VA_ARGS__))

static inline lms_status_t dev_mem_info(dev_device_t *d, size_t *f, size_t *t) { return DEV_CALL(d, mem_info, f, t); }
static inline lms_status_t dev_va_reserve(dev_device_t *d, size_t size, dev_addr_t *base) { return DEV_CALL(d, va_reserve, size, base); }
static inline lms_status_t dev_va_free(dev_device_t *d, dev_addr_t base, size_t size) { return DEV_CALL(d, va_free, base, size); }
static inline lms_status_t dev_block_create(dev_device_t *d, dev_block_t *b) { return DEV_CALL(d, block_create, b); }
static inline lms_status_t dev_block_release(dev_device_t *d, dev_block_t b) { return DEV_CALL(d, block_release, b); }
static inline lms_status_t dev_map(dev_device_t *d, dev_addr_t va, dev_block_t b) { return DEV_CALL(d, map, va, b); }
static inline lms_status_t dev_set_access(dev_device_t *d, dev_addr_t va, size_t size) { return DEV_CALL(d, set_access, va, size); }
static inline lms_status_t dev_unmap(dev_device_t *d, dev_addr_t va, size_t size) { return DEV_CALL(d, unmap, va, size); }
static inline lms_status_t dev_host_register(dev_device_t *d, void *p, size_t size) { return DEV_CALL(d, host_register, p, size); }
static inline lms_status_t dev_host_unregister(dev_device_t *d, void *p) { return DEV_CALL(d, host_unregister, p); }
static inline lms_status_t dev_stream_create(dev_device_t *d, dev_priority_t prio, dev_stream_t **s) { return DEV_CALL(d, stream_create, prio, s); }
static inline lms_status_t dev_stream_adopt(dev_device_t *d, uint64_t native, dev_stream_t **s) { return DEV_CALL(d, stream_adopt, native, s); }
static inline lms_status_t dev_stream_destroy(dev_device_t *d, dev_stream_t *s) { return DEV_CALL(d, stream_destroy, s); }
static inline lms_status_t dev_stream_synchronize(dev_device_t *d, dev_stream_t *s) { return DEV_CALL(d, stream_synchronize, s); }
static inline lms_status_t dev_event_create(dev_device_t *d, dev_event_t **e) { return DEV_CALL(d, event_create, e); }
static inline lms_status_t dev_event_destroy(dev_device_t *d, dev_event_t *e) { return DEV_CALL(d, event_destroy, e); }
static inline lms_status_t dev_event_record(dev_device_t *d, dev_event_t *e, dev_stream_t *s) { return DEV_CALL(d, event_record, e, s); }
static inline lms_status_t dev_event_query(dev_device_t *d, dev_event_t *e) { return DEV_CALL(d, event_query, e); }
static inline lms_status_t dev_event_synchronize(dev_device_t *d, dev_event_t *e) { return DEV_CALL(d, event_synchronize, e); }
static inline lms_status_t dev_stream_wait_event(dev_device_t *d, dev_stream_t *s, dev_event_t *e) { return DEV_CALL(d, stream_wait_event, s, e); }
static inline lms_status_t dev_copy_h2d(dev_device_t *d, dev_stream_t *s, dev_addr_t dst, const void *src, size_t n) { return DEV_CALL(d, copy_h2d, s, dst, src, n); }
static inline lms_status_t dev_copy_d2h(dev_device_t *d, dev_stream_t *s, void *dst, dev_addr_t src, size_t n) { return DEV_CALL(d, copy_d2h, s, dst, src, n); }
static inline lms_status_t dev_copy_d2d(dev_device_t *d, dev_stream_t *s, dev_addr_t dst, dev_addr_t src, size_t n) { return DEV_CALL(d, copy_d2d, s, dst, src, n); }
static inline lms_status_t dev_host_func(dev_device_t *d, dev_stream_t *s, dev_host_fn_t fn, void *arg) { return DEV_CALL(d, host_func, s, fn, arg); }
static inline lms_status_t dev_launch(dev_device_t *d, dev_stream_t *s, const dev_launch_t *l) { return DEV_CALL(d, launch, s, l); }
static inline lms_status_t dev_set_observer(dev_device_t *d, dev_observer_t fn, void *ctx) { return DEV_CALL(d, set_observer, fn, ctx); }
static inline lms_status_t dev_host_block_create(dev_device_t *d, dev_block_t *b) { return DEV_CALL(d, host_block_create, b); }
static inline lms_status_t dev_set_access_host(dev_device_t *d, dev_addr_t va, size_t size) { return DEV_CALL(d, set_access_host, va, size); }

#endif /* LMS_DEVICE_H */
