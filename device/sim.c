/*
 * device/sim.c — the sim backend: a GPU emulated in host memory, with the
 * failure semantics of a real one. See Note [Sim semantics].
 *
 * Owns: the memfd that is the device memory and its free-block stack, the
 * memfd of the host blocks and its free stack, every stream's worker thread
 * and FIFO, the events, the two throttled links, the observer.
 *
 * Locks (never two at once, except event_lock -> a stream's lock):
 *   sim.lock          guards free_blocks / free_count, the host blocks' stack
 *                     and count, and workers
 *   sim.event_lock    guards every event's (stream, seq)
 *   sim.observer_lock guards the observer; a worker holds it while it calls
 *                     the observer, so that set_observer waits for the calls
 *                     in progress (the observer calls no op)
 *   stream.lock       guards that stream's queue, counters and stopping flag
 *   link.lock         guards that link's busy_until
 * No lock is held while an op runs on a worker, so a host function or a
 * launch may fault (SIGSEGV) without leaving a lock behind that matters.
 *
 * Note [Sim semantics]
 * - VA reservation is mmap(PROT_NONE, MAP_NORESERVE): touching it faults.
 * - Device memory is one memfd of the configured capacity, cut into blocks of
 *   the granularity. map = mmap(MAP_SHARED|MAP_FIXED) of a block, still
 *   PROT_NONE; set_access = mprotect(READ|WRITE), as cuMemMap needs
 *   cuMemSetAccess; unmap = an anonymous PROT_NONE mapping over the range, so a
 *   later touch gets SIGSEGV as a real kernel gets an illegal address. The same
 *   block mapped at two VAs shows the same bytes. Released blocks are punched
 *   out of the memfd, so a fresh block reads zeros and costs no host memory.
 * - Host blocks are blocks of a second memfd, which grows as they are made
 *   (host memory has no capacity here); their ids carry SIM_HOST_BLOCK, so
 *   that map and block_release pick the file. They map, unmap and are
 *   released as device blocks are; set_access_host is set_access. Mapped
 *   and accessible, a VA is a host pointer on sim as on cuda, because every
 *   device address is one here.
 * - Each stream is a worker thread running a FIFO of ops (copies, host
 *   functions, launches, event waits). An op's number in its stream is its
 *   seq; the stream counts submitted and completed ops. An event is the pair
 *   (stream, seq of the last op submitted when it was recorded): done when that
 *   stream has completed seq ops. A wait is an op that blocks its worker until
 *   then. So events cost no queue entry and work across streams.
 * - Copies in one direction share one link. With a bandwidth set, a copy
 *   reserves the link's next free time slot of n / bandwidth and finishes at
 *   the end of it, so copies overlap compute and each other as on a real GPU
 *   (H2D and D2H in parallel, two H2D copies one after the other). D2D copies
 *   and launches are not throttled.
 * - unmap and set_access take LMS_SIM_VMM_US_PER_MIB of host time, one call
 *   at a time; a set_access while a D2H copy runs takes
 *   LMS_SIM_SET_ACCESS_D2H_US_PER_MIB where that is set, as on the H100;
 *   at close, LMS_LOG=info says how many did and how long they took.
 * - An observer (set_observer) is told of each copy, host function and launch
 *   by the worker that ran it, after it ran and before it counts as
 *   completed, with the clock read around it; a throttled copy reports its
 *   slot on the link (it may have waited for the slot, its memmove runs at
 *   the slot's start, and the worker may wake late from the slot's end),
 *   or until its memmove ended if that was later.
 * - Stream priorities are accepted and ignored. Destroying a stream returns at
 *   once, as cuStreamDestroy does; its worker drains the queue, then exits.
 * - Many mappings make many kernel VMAs: the process's vm.max_map_count
 *   (65530 by default) bounds the blocks that can be mapped apart at once.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <numa.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/base.h"
#include "base/lockorder.h"
#include "device/layer.h"

/* Bandwidth limits: below 1 MB/s a 64 GiB copy's delay no longer fits the
 * clock; above 100 TB/s a limit means nothing. */
#define SIM_MIN_GBPS 0.001
#define SIM_MAX_GBPS 100000.0
#define SIM_MAX_VMM_US_PER_MIB 100000.0 /* 0.1 s per MiB */
#define SIM_HOST_BLOCK (1ull << 62) /* in a block id: a host block, index id - tag - 1 */

typedef struct link {
    pthread_mutex_t lock;
    double bytes_per_ns; /* 0: unthrottled */
    uint64_t busy_until; /* ns; when the last reserved slot ends */
    atomic_int running;  /* copies running on it now (their memmove or slot); no lock */
} link_t;

typedef struct sim {
    int memfd;               /* the device memory */
    size_t capacity;         /* bytes; a multiple of granularity */
    size_t granularity;
    size_t nblocks;          /* capacity / granularity */
    pthread_mutex_t lock;
    uint32_t *free_blocks;   /* stack of free block indices; top = next created */
    size_t free_count;
    int host_memfd;          /* the host blocks, host_cap * granularity bytes */
    uint32_t *host_free;     /* stack of free host block indices, room for host_cap */
    size_t host_nfree;
    size_t host_made;        /* host block indices ever handed out, at most host_cap */
    size_t host_cap;
    size_t workers;          /* stream workers still running (destroy does not wait) */
    pthread_cond_t workers_done;
    link_t h2d, d2h;
    pthread_mutex_t event_lock;
    double vmm_ns_per_byte;  /* sim_vmm_us_per_mib, per byte */
    double access_d2h_ns_per_byte; /* sim_set_access_d2h_us_per_mib, per byte; 0: as vmm's */
    pthread_mutex_t vmm_lock; /* one unmap or set_access pays its time at a time */
    uint64_t beside_calls, beside_ns; /* vmm_lock: set_access calls made beside a D2H copy,
                                         and the time charged for them */
    pthread_mutex_t observer_lock;
    dev_observer_t observer; /* NULL: none */
    void *observer_ctx;
    atomic_bool observed;    /* observer != NULL, read by workers without the lock */
} sim_t;

typedef struct sim_stream sim_stream_t;
typedef struct sim_op sim_op_t;

struct sim_op {
    void (*run)(sim_op_t *op);
    sim_op_t *next;
    const char *name;      /* the op, for an observer; NULL: not work (a wait) */
    dev_work_kind_t kind;
    size_t bytes;          /* copies: n */
    uint64_t start_ns;     /* when it started, while observed (run_copy: its slot's start) */
    uint64_t end_ns;       /* run_copy, throttled: when its slot ended; else 0 (the worker's clock) */
    union {
        struct { void *dst; const void *src; size_t n; link_t *link; } copy;
        struct { dev_host_fn_t fn; void *arg; } host;
        struct { sim_stream_t *stream; uint64_t seq; } wait;
        struct { void (*run)(const void *args); unsigned char args[DEV_LAUNCH_ARGS]; } launch;
    } u;
};

struct sim_stream {
    sim_t *sim;
    pthread_mutex_t lock;
    pthread_cond_t changed; /* an op was queued or finished, or stopping was set */
    sim_op_t *head, *tail;  /* ops not yet started */
    uint64_t submitted;     /* ops queued so far */
    uint64_t completed;     /* ops finished so far (FIFO: the first `completed`) */
    bool stopping;          /* destroy was called: drain, then exit */
    atomic_int refs;        /* the creator until destroy, the worker until it exits,
                               each event recorded here, each pending wait */
};

typedef struct sim_event {
    sim_stream_t *stream; /* of the latest record, with a reference; NULL: never recorded */
    uint64_t seq;         /* done when stream->completed >= seq */
} sim_event_t;

static void *as_ptr(dev_addr_t a) { return (void *)(uintptr_t)a; }

static lms_status_t sys_fail(const char *what, int err)
{
    return base_fail(err == ENOMEM ? LMS_ERR_OUT_OF_MEMORY : LMS_ERR_SYSTEM, "sim: %s: %s%s",
                     what, strerror(err),
                     err == ENOMEM ? " (too many mappings? see vm.max_map_count)" : "");
}

/* ---- streams ------------------------------------------------------------ */

static void stream_unref(sim_stream_t *s)
{
    if (s == NULL || atomic_fetch_sub(&s->refs, 1) != 1)
        return;
    pthread_cond_destroy(&s->changed);
    pthread_mutex_destroy(&s->lock);
    base_meta_free(s);
}

/* Tells the observer, if one is still set, that op ran on s until now. */
static void observe(sim_t *sim, sim_stream_t *s, const sim_op_t *op)
{
    dev_work_t work = {.kind = op->kind, .stream = (dev_stream_t *)s, .name = op->name,
                       .bytes = op->bytes, .start_ns = op->start_ns,
                       .end_ns = op->end_ns != 0 ? op->end_ns : base_now_ns()};
    lo_lock(&sim->observer_lock, LO_DEV_OBSERVER);
    if (sim->observer != NULL)
        sim->observer(sim->observer_ctx, &work);
    lo_unlock(&sim->observer_lock, LO_DEV_OBSERVER);
}

/* A stream's worker: runs the FIFO until the stream is destroyed and drained,
 * then drops its reference and tells the device it is gone. */
static void *worker_main(void *arg)
{
    sim_stream_t *s = arg;
    sim_t *sim = s->sim;
    lo_lock(&s->lock, LO_SIM_STREAM);
    for (;;) {
        while (s->head == NULL && !s->stopping)
            lo_cond_wait(&s->changed, &s->lock, LO_SIM_STREAM);
        sim_op_t *op = s->head;
        if (op == NULL)
            break; /* stopping and drained */
        s->head = op->next;
        if (s->head == NULL)
            s->tail = NULL;
        lo_unlock(&s->lock, LO_SIM_STREAM);
        bool observed = op->name != NULL &&
                        atomic_load_explicit(&sim->observed, memory_order_acquire);
        if (observed)
            op->start_ns = base_now_ns();
        op->run(op);
        if (observed)
            observe(sim, s, op);
        base_meta_free(op);
        lo_lock(&s->lock, LO_SIM_STREAM);
        s->completed++;
        pthread_cond_broadcast(&s->changed);
    }
    lo_unlock(&s->lock, LO_SIM_STREAM);
    stream_unref(s);
    lo_lock(&sim->lock, LO_SIM);
    if (--sim->workers == 0)
        pthread_cond_broadcast(&sim->workers_done);
    lo_unlock(&sim->lock, LO_SIM);
    return NULL;
}

/* Blocks until s has completed seq ops. */
static void stream_wait_seq(sim_stream_t *s, uint64_t seq)
{
    lo_lock(&s->lock, LO_SIM_STREAM);
    while (s->completed < seq)
        lo_cond_wait(&s->changed, &s->lock, LO_SIM_STREAM);
    lo_unlock(&s->lock, LO_SIM_STREAM);
}

/* Queues a copy of op at the end of stream. */
static lms_status_t submit(dev_stream_t *stream, sim_op_t op)
{
    sim_stream_t *s = (sim_stream_t *)stream;
    sim_op_t *p = base_meta_alloc(sizeof *p);
    if (p == NULL)
        return base_fail(LMS_ERR_OUT_OF_MEMORY, "sim: no host memory for a stream op");
    *p = op;
    p->next = NULL;
    lo_lock(&s->lock, LO_SIM_STREAM);
    if (s->tail != NULL)
        s->tail->next = p;
    else
        s->head = p;
    s->tail = p;
    s->submitted++;
    pthread_cond_broadcast(&s->changed);
    lo_unlock(&s->lock, LO_SIM_STREAM);
    return LMS_OK;
}

static lms_status_t sim_stream_create(void *self, dev_priority_t priority, dev_stream_t **out)
{
    sim_t *sim = self;
    (void)priority;
    sim_stream_t *s = base_meta_calloc(1, sizeof *s);
    if (s == NULL)
        return base_fail(LMS_ERR_OUT_OF_MEMORY, "sim: no host memory for a stream");
    s->sim = sim;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->changed, NULL);
    atomic_init(&s->refs, 2); /* the creator and the worker */
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    lo_lock(&sim->lock, LO_SIM);
    pthread_t worker;
    int err = pthread_create(&worker, &attr, worker_main, s);
    sim->workers += err == 0;
    lo_unlock(&sim->lock, LO_SIM);
    pthread_attr_destroy(&attr);
    if (err != 0) {
        pthread_cond_destroy(&s->changed);
        pthread_mutex_destroy(&s->lock);
        base_meta_free(s);
        return sys_fail("pthread_create for a stream", err);
    }
    *out = (dev_stream_t *)s;
    return LMS_OK;
}

/* A native stream is only a name on sim: adopting one makes a stream. */
static lms_status_t sim_stream_adopt(void *self, uint64_t native, dev_stream_t **out)
{
    (void)native;
    return sim_stream_create(self, DEV_PRIORITY_NORMAL, out);
}

/* As cuStreamDestroy: returns at once; the worker runs what is queued, then exits. */
static lms_status_t sim_stream_destroy(void *self, dev_stream_t *stream)
{
    (void)self;
    sim_stream_t *s = (sim_stream_t *)stream;
    lo_lock(&s->lock, LO_SIM_STREAM);
    s->stopping = true;
    pthread_cond_broadcast(&s->changed);
    lo_unlock(&s->lock, LO_SIM_STREAM);
    stream_unref(s);
    return LMS_OK;
}

static lms_status_t sim_stream_synchronize(void *self, dev_stream_t *stream)
{
    (void)self;
    sim_stream_t *s = (sim_stream_t *)stream;
    lo_lock(&s->lock, LO_SIM_STREAM);
    uint64_t seq = s->submitted;
    lo_unlock(&s->lock, LO_SIM_STREAM);
    stream_wait_seq(s, seq);
    return LMS_OK;
}

/* ---- events ------------------------------------------------------------- */

static lms_status_t sim_event_create(void *self, dev_event_t **out)
{
    (void)self;
    sim_event_t *e = base_meta_calloc(1, sizeof *e);
    if (e == NULL)
        return base_fail(LMS_ERR_OUT_OF_MEMORY, "sim: no host memory for an event");
    *out = (dev_event_t *)e;
    return LMS_OK;
}

static lms_status_t sim_event_destroy(void *self, dev_event_t *event)
{
    (void)self;
    sim_event_t *e = (sim_event_t *)event;
    stream_unref(e->stream);
    base_meta_free(e);
    return LMS_OK;
}

static lms_status_t sim_event_record(void *self, dev_event_t *event, dev_stream_t *stream)
{
    sim_t *sim = self;
    sim_event_t *e = (sim_event_t *)event;
    sim_stream_t *s = (sim_stream_t *)stream;
    lo_lock(&s->lock, LO_SIM_STREAM);
    uint64_t seq = s->submitted;
    lo_unlock(&s->lock, LO_SIM_STREAM);
    atomic_fetch_add(&s->refs, 1);
    lo_lock(&sim->event_lock, LO_SIM_EVENT);
    sim_stream_t *old = e->stream;
    e->stream = s;
    e->seq = seq;
    lo_unlock(&sim->event_lock, LO_SIM_EVENT);
    stream_unref(old);
    return LMS_OK;
}

/* The event's latest record, with a reference on its stream; stream NULL if
 * it was never recorded or that work has already completed. */
static sim_stream_t *event_pending(sim_t *sim, sim_event_t *e, uint64_t *seq)
{
    lo_lock(&sim->event_lock, LO_SIM_EVENT);
    sim_stream_t *s = e->stream;
    *seq = e->seq;
    if (s != NULL) {
        lo_lock(&s->lock, LO_SIM_STREAM);
        bool done = s->completed >= *seq;
        lo_unlock(&s->lock, LO_SIM_STREAM);
        if (done)
            s = NULL;
        else
            atomic_fetch_add(&s->refs, 1);
    }
    lo_unlock(&sim->event_lock, LO_SIM_EVENT);
    return s;
}

static lms_status_t sim_event_query(void *self, dev_event_t *event)
{
    uint64_t seq;
    sim_stream_t *s = event_pending(self, (sim_event_t *)event, &seq);
    stream_unref(s);
    return s == NULL ? LMS_OK : LMS_NOT_READY;
}

static lms_status_t sim_event_synchronize(void *self, dev_event_t *event)
{
    uint64_t seq;
    sim_stream_t *s = event_pending(self, (sim_event_t *)event, &seq);
    if (s != NULL) {
        stream_wait_seq(s, seq);
        stream_unref(s);
    }
    return LMS_OK;
}

static void run_wait(sim_op_t *op)
{
    stream_wait_seq(op->u.wait.stream, op->u.wait.seq);
    stream_unref(op->u.wait.stream);
}

static lms_status_t sim_stream_wait_event(void *self, dev_stream_t *stream, dev_event_t *event)
{
    uint64_t seq;
    sim_stream_t *s = event_pending(self, (sim_event_t *)event, &seq);
    if (s == NULL)
        return LMS_OK; /* nothing to wait for */
    /* the op owns the reference on s */
    lms_status_t st = submit(stream, (sim_op_t){.run = run_wait, .u.wait = {s, seq}});
    if (st != LMS_OK)
        stream_unref(s);
    return st;
}

/* ---- copies, host functions, launches ------------------------------------- */

static void run_copy(sim_op_t *op)
{
    link_t *link = op->u.copy.link;
    uint64_t end = 0;
    if (link != NULL)
        atomic_fetch_add(&link->running, 1);
    if (link != NULL && link->bytes_per_ns > 0) {
        lo_lock(&link->lock, LO_SIM_LINK);
        uint64_t now = base_now_ns();
        uint64_t start = link->busy_until > now ? link->busy_until : now;
        end = start + (uint64_t)ceil((double)op->u.copy.n / link->bytes_per_ns);
        link->busy_until = end;
        lo_unlock(&link->lock, LO_SIM_LINK);
        op->start_ns = start;
    }
    memmove(op->u.copy.dst, op->u.copy.src, op->u.copy.n);
    if (end != 0) { /* it ends with its slot, or its memmove if that ends later */
        uint64_t moved = base_now_ns();
        op->end_ns = moved > end ? moved : end;
        base_sleep_until_ns(end);
    }
    if (link != NULL)
        atomic_fetch_sub(&link->running, 1);
}

static lms_status_t copy(dev_stream_t *stream, dev_work_kind_t kind, const char *name, void *dst,
                         const void *src, size_t n, link_t *link)
{
    return submit(stream, (sim_op_t){.run = run_copy, .name = name, .kind = kind, .bytes = n,
                                     .u.copy = {dst, src, n, link}});
}

static lms_status_t sim_copy_h2d(void *self, dev_stream_t *s, dev_addr_t dst, const void *src,
                                 size_t n)
{
    return copy(s, DEV_WORK_H2D, "copy_h2d", as_ptr(dst), src, n, &((sim_t *)self)->h2d);
}

static lms_status_t sim_copy_d2h(void *self, dev_stream_t *s, void *dst, dev_addr_t src, size_t n)
{
    return copy(s, DEV_WORK_D2H, "copy_d2h", dst, as_ptr(src), n, &((sim_t *)self)->d2h);
}

static lms_status_t sim_copy_d2d(void *self, dev_stream_t *s, dev_addr_t dst, dev_addr_t src,
                                 size_t n)
{
    (void)self;
    return copy(s, DEV_WORK_D2D, "copy_d2d", as_ptr(dst), as_ptr(src), n, NULL);
}

static void run_host(sim_op_t *op) { op->u.host.fn(op->u.host.arg); }

static lms_status_t sim_host_func(void *self, dev_stream_t *s, dev_host_fn_t fn, void *arg)
{
    (void)self;
    return submit(s, (sim_op_t){.run = run_host, .name = "host_func", .kind = DEV_WORK_COMPUTE,
                                .u.host = {fn, arg}});
}

static void run_launch(sim_op_t *op) { op->u.launch.run(op->u.launch.args); }

/* The arguments are copied into the op: the caller's may be gone when it runs. */
static lms_status_t sim_launch(void *self, dev_stream_t *s, const dev_launch_t *l)
{
    (void)self;
    sim_op_t op = {.run = run_launch, .name = l->name, .kind = DEV_WORK_COMPUTE,
                   .u.launch.run = l->run};
    memcpy(op.u.launch.args, l->args, sizeof op.u.launch.args);
    return submit(s, op);
}

/* Taking the lock waits for the observer calls in progress (see the locks). */
static lms_status_t sim_set_observer(void *self, dev_observer_t fn, void *ctx)
{
    sim_t *sim = self;
    lo_lock(&sim->observer_lock, LO_DEV_OBSERVER);
    sim->observer = fn;
    sim->observer_ctx = fn != NULL ? ctx : NULL;
    atomic_store_explicit(&sim->observed, fn != NULL, memory_order_release);
    lo_unlock(&sim->observer_lock, LO_DEV_OBSERVER);
    return LMS_OK;
}

/* ---- memory --------------------------------------------------------------- */

static lms_status_t sim_mem_info(void *self, size_t *free_bytes, size_t *total_bytes)
{
    sim_t *sim = self;
    lo_lock(&sim->lock, LO_SIM);
    *free_bytes = sim->free_count * sim->granularity;
    lo_unlock(&sim->lock, LO_SIM);
    *total_bytes = sim->capacity;
    return LMS_OK;
}

static lms_status_t sim_va_reserve(void *self, size_t size, dev_addr_t *base)
{
    sim_t *sim = self;
    size_t align = sim->granularity;
    if (size > SIZE_MAX - align)
        return base_fail(LMS_ERR_OUT_OF_MEMORY, "sim: cannot reserve %zu bytes", size);
    char *p = mmap(NULL, size + align, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (p == MAP_FAILED)
        return sys_fail("mmap for a VA reservation", errno);
    char *aligned = (char *)(((uintptr_t)p + align - 1) & ~(uintptr_t)(align - 1));
    if (aligned > p)
        munmap(p, (size_t)(aligned - p));
    munmap(aligned + size, (size_t)(p + align - aligned));
    *base = (dev_addr_t)(uintptr_t)aligned;
    return LMS_OK;
}

static lms_status_t sim_va_free(void *self, dev_addr_t base, size_t size)
{
    (void)self;
    if (munmap(as_ptr(base), size) != 0)
        return sys_fail("munmap of a VA reservation", errno);
    return LMS_OK;
}

static lms_status_t sim_block_create(void *self, dev_block_t *block)
{
    sim_t *sim = self;
    lo_lock(&sim->lock, LO_SIM);
    if (sim->free_count == 0) {
        lo_unlock(&sim->lock, LO_SIM);
        char cap[32];
        return base_fail(LMS_ERR_OUT_OF_MEMORY,
                         "sim: device memory exhausted: all %zu blocks of the %s device are in use "
                         "(raise LMS_SIM_MEMORY)",
                         sim->nblocks, base_format_size(sim->capacity, cap, sizeof cap));
    }
    *block = (dev_block_t)sim->free_blocks[--sim->free_count] + 1;
    lo_unlock(&sim->lock, LO_SIM);
    return LMS_OK;
}

/* Host blocks: Note [Sim semantics]. The file and the stack grow together,
 * doubling, so that a release never fails. Caller holds the lock. */
static lms_status_t host_blocks_grow(sim_t *sim)
{
    size_t cap = sim->host_cap ? 2 * sim->host_cap : 16;
    if (cap > UINT32_MAX)
        return base_fail(LMS_ERR_OUT_OF_MEMORY, "sim: %zu host blocks is all there can be",
                         sim->host_cap);
    uint32_t *stack = base_meta_realloc(sim->host_free, cap * sizeof *stack);
    if (stack == NULL)
        return base_fail(LMS_ERR_OUT_OF_MEMORY, "sim: no host memory to track %zu host blocks",
                         cap);
    sim->host_free = stack;
    if (ftruncate(sim->host_memfd, (off_t)(cap * sim->granularity)) != 0)
        return sys_fail("ftruncate of the host blocks", errno);
    sim->host_cap = cap;
    return LMS_OK;
}

static lms_status_t sim_host_block_create(void *self, dev_block_t *block)
{
    sim_t *sim = self;
    lms_status_t st = LMS_OK;
    size_t index = 0;
    lo_lock(&sim->lock, LO_SIM);
    if (sim->host_nfree > 0)
        index = sim->host_free[--sim->host_nfree];
    else if (sim->host_made < sim->host_cap || (st = host_blocks_grow(sim)) == LMS_OK)
        index = sim->host_made++;
    lo_unlock(&sim->lock, LO_SIM);
    if (st == LMS_OK)
        *block = SIM_HOST_BLOCK | (index + 1);
    return st;
}

/* The file and offset of block, or false if it names no block. */
static bool block_at(sim_t *sim, dev_block_t block, int *fd, off_t *offset)
{
    if (block & SIM_HOST_BLOCK) {
        uint64_t index = (block & ~SIM_HOST_BLOCK) - 1;
        lo_lock(&sim->lock, LO_SIM);
        bool ok = index < sim->host_made;
        lo_unlock(&sim->lock, LO_SIM);
        *fd = sim->host_memfd;
        *offset = (off_t)(index * sim->granularity);
        return ok;
    }
    *fd = sim->memfd;
    *offset = (off_t)((block - 1) * sim->granularity);
    return block >= 1 && block <= sim->nblocks;
}

static lms_status_t sim_block_release(void *self, dev_block_t block)
{
    sim_t *sim = self;
    int fd;
    off_t offset;
    if (!block_at(sim, block, &fd, &offset))
        return base_fail(LMS_ERR_INVALID, "sim: block_release: no block %llu",
                         (unsigned long long)block);
    /* Gives the pages back to the host; the data is dead anyway. On failure
     * the block is still usable, only its memory is not returned early. */
    (void)fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, offset,
                    (off_t)sim->granularity);
    uint32_t index = (uint32_t)((uint64_t)offset / sim->granularity);
    lo_lock(&sim->lock, LO_SIM);
    if (fd == sim->host_memfd)
        sim->host_free[sim->host_nfree++] = index;
    else
        sim->free_blocks[sim->free_count++] = index;
    lo_unlock(&sim->lock, LO_SIM);
    return LMS_OK;
}

/* Puts the reserved-but-unmapped state back over [va, va+size). If the kernel
 * refuses, MAP_FIXED may already have left a hole in the reservation that any
 * later mmap (malloc's, say) can take, and device writes would land in it: the
 * simulated device's address space is lost, as a real context would be, so
 * this stops the process rather than corrupt memory. */
static void unmap_range(dev_addr_t va, size_t size)
{
    void *p = mmap(as_ptr(va), size, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    if (p == MAP_FAILED) {
        base_log(BASE_LOG_ERROR,
                 "sim: cannot restore the reservation at [0x%llx, +%zu): %s; the simulated "
                 "device's address space is lost (vm.max_map_count?)",
                 (unsigned long long)va, size, strerror(errno));
        abort();
    }
}

static lms_status_t sim_map(void *self, dev_addr_t va, dev_block_t block)
{
    sim_t *sim = self;
    int fd;
    off_t offset;
    if (!block_at(sim, block, &fd, &offset))
        return base_fail(LMS_ERR_INVALID, "sim: map: no block %llu", (unsigned long long)block);
    void *p = mmap(as_ptr(va), sim->granularity, PROT_NONE, MAP_SHARED | MAP_FIXED, fd, offset);
    if (p == MAP_FAILED) {
        int err = errno;
        unmap_range(va, sim->granularity); /* MAP_FIXED may have dropped the old mapping */
        return sys_fail("mmap of a block", err);
    }
    return LMS_OK;
}

/* The driver's host time of an unmap or a set_access of size bytes, at
 * ns_per_byte, as LMS_SIM_VMM_US_PER_MIB models it: on an H100 both cost
 * about 8-15 us per MiB idle, whatever the size, and calls on several
 * threads take turns (docs/gpu-results.md). A set_access made while a D2H
 * copy runs costs LMS_SIM_SET_ACCESS_D2H_US_PER_MIB where that is set (about
 * 500 us per MiB on the H100: Note [VMM beside copies] in swap/prefetch.c);
 * whether one runs is looked at when the call starts. */
static void vmm_cost(sim_t *sim, size_t size, double ns_per_byte, bool beside_d2h)
{
    if (ns_per_byte == 0)
        return;
    uint64_t ns = (uint64_t)(ns_per_byte * (double)size);
    lo_lock(&sim->vmm_lock, LO_SIM_VMM);
    base_sleep_until_ns(base_now_ns() + ns);
    sim->beside_calls += beside_d2h;
    sim->beside_ns += beside_d2h ? ns : 0;
    lo_unlock(&sim->vmm_lock, LO_SIM_VMM);
}

static lms_status_t sim_set_access(void *self, dev_addr_t va, size_t size)
{
    sim_t *sim = self;
    if (mprotect(as_ptr(va), size, PROT_READ | PROT_WRITE) != 0) {
        int err = errno;
        mprotect(as_ptr(va), size, PROT_NONE); /* a failed mprotect may have done a part */
        return sys_fail("mprotect for access", err);
    }
    bool beside_d2h = sim->access_d2h_ns_per_byte > 0 && atomic_load(&sim->d2h.running) > 0;
    vmm_cost(sim, size, beside_d2h ? sim->access_d2h_ns_per_byte : sim->vmm_ns_per_byte,
             beside_d2h);
    return LMS_OK;
}

static lms_status_t sim_unmap(void *self, dev_addr_t va, size_t size)
{
    sim_t *sim = self;
    unmap_range(va, size);
    vmm_cost(sim, size, sim->vmm_ns_per_byte, false);
    return LMS_OK;
}

/* Host memory needs no pinning to be copied by a worker thread: the check
 * layer keeps the registrations, so misuse is still caught. */
static lms_status_t sim_host_register(void *self, void *ptr, size_t size)
{
    (void)self, (void)ptr, (void)size;
    return LMS_OK;
}

static lms_status_t sim_host_unregister(void *self, void *ptr)
{
    (void)self, (void)ptr;
    return LMS_OK;
}

/* ---- open and close --------------------------------------------------------- */

static void sim_close(void *self)
{
    sim_t *sim = self;
    lo_lock(&sim->lock, LO_SIM); /* destroyed streams may still be draining */
    while (sim->workers > 0)
        lo_cond_wait(&sim->workers_done, &sim->lock, LO_SIM);
    lo_unlock(&sim->lock, LO_SIM);
    if (sim->beside_calls > 0) /* what Note [VMM beside copies] in swap/prefetch.c is about */
        base_log(BASE_LOG_INFO, "sim: %llu set_access calls beside a D2H copy took %.3f s",
                 (unsigned long long)sim->beside_calls, (double)sim->beside_ns / 1e9);
    pthread_cond_destroy(&sim->workers_done);
    close(sim->memfd);
    close(sim->host_memfd);
    base_meta_free(sim->free_blocks);
    base_meta_free(sim->host_free);
    pthread_mutex_destroy(&sim->lock);
    pthread_mutex_destroy(&sim->event_lock);
    pthread_mutex_destroy(&sim->vmm_lock);
    pthread_mutex_destroy(&sim->observer_lock);
    pthread_mutex_destroy(&sim->h2d.lock);
    pthread_mutex_destroy(&sim->d2h.lock);
    base_meta_free(sim);
}

static const dev_ops_t sim_ops = {
    .name = "sim",
    .close = sim_close,
    .mem_info = sim_mem_info,
    .va_reserve = sim_va_reserve,
    .va_free = sim_va_free,
    .block_create = sim_block_create,
    .block_release = sim_block_release,
    .map = sim_map,
    .set_access = sim_set_access,
    .unmap = sim_unmap,
    .host_register = sim_host_register,
    .host_unregister = sim_host_unregister,
    .stream_create = sim_stream_create,
    .stream_adopt = sim_stream_adopt,
    .stream_destroy = sim_stream_destroy,
    .stream_synchronize = sim_stream_synchronize,
    .event_create = sim_event_create,
    .event_destroy = sim_event_destroy,
    .event_record = sim_event_record,
    .event_query = sim_event_query,
    .event_synchronize = sim_event_synchronize,
    .stream_wait_event = sim_stream_wait_event,
    .copy_h2d = sim_copy_h2d,
    .copy_d2h = sim_copy_d2h,
    .copy_d2d = sim_copy_d2d,
    .host_func = sim_host_func,
    .launch = sim_launch,
    .set_observer = sim_set_observer,
    .host_block_create = sim_host_block_create,
    .set_access_host = sim_set_access, /* the device's access is the CPU's here */
};

static lms_status_t check_config(const dev_config_t *cfg)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t g = cfg->sim_granularity;
    if (g < page || (g & (g - 1)) != 0)
        return base_fail(LMS_ERR_INVALID,
                         "sim: granularity %zu must be a power of two of at least the page size "
                         "(%zu) (LMS_SIM_GRANULARITY)",
                         g, page);
    if (cfg->sim_memory < g || cfg->sim_memory % g != 0 || cfg->sim_memory / g > UINT32_MAX)
        return base_fail(LMS_ERR_INVALID,
                         "sim: memory %zu must be a nonzero multiple of the granularity %zu "
                         "(LMS_SIM_MEMORY, LMS_SIM_GRANULARITY)",
                         cfg->sim_memory, g);
    for (int i = 0; i < 2; i++) {
        double gbps = i ? cfg->sim_d2h_gbps : cfg->sim_h2d_gbps;
        if (!(gbps == 0 || (gbps >= SIM_MIN_GBPS && gbps <= SIM_MAX_GBPS)))
            return base_fail(LMS_ERR_INVALID,
                             "sim: %s bandwidth %g GB/s must be 0 (no limit) or between %g and %g "
                             "(LMS_SIM_%s_GBPS)",
                             i ? "D2H" : "H2D", gbps, SIM_MIN_GBPS, SIM_MAX_GBPS,
                             i ? "D2H" : "H2D");
    }
    if (!(cfg->sim_vmm_us_per_mib >= 0 && cfg->sim_vmm_us_per_mib <= SIM_MAX_VMM_US_PER_MIB))
        return base_fail(LMS_ERR_INVALID,
                         "sim: %g us per MiB of unmap or set_access must be between 0 and %g "
                         "(LMS_SIM_VMM_US_PER_MIB)",
                         cfg->sim_vmm_us_per_mib, SIM_MAX_VMM_US_PER_MIB);
    double d2h = cfg->sim_set_access_d2h_us_per_mib;
    if (!(d2h >= 0 && d2h <= SIM_MAX_VMM_US_PER_MIB))
        return base_fail(LMS_ERR_INVALID,
                         "sim: %g us per MiB of set_access beside a D2H copy must be between 0 "
                         "and %g (LMS_SIM_SET_ACCESS_D2H_US_PER_MIB)",
                         d2h, SIM_MAX_VMM_US_PER_MIB);
    return LMS_OK;
}

static int nearest_numa_node(void)
{
    if (numa_available() < 0)
        return -1;
    int cpu = sched_getcpu();
    return cpu < 0 ? -1 : numa_node_of_cpu(cpu);
}

lms_status_t dev_sim_open(const dev_config_t *cfg, dev_layer_t *out, dev_info_t *info)
{
    lms_status_t st = check_config(cfg);
    if (st != LMS_OK)
        return st;
    sim_t *sim = base_meta_calloc(1, sizeof *sim);
    if (sim == NULL)
        return base_fail(LMS_ERR_OUT_OF_MEMORY, "sim: no host memory for the device");
    sim->capacity = cfg->sim_memory;
    sim->granularity = cfg->sim_granularity;
    sim->nblocks = cfg->sim_memory / cfg->sim_granularity;
    sim->free_blocks = base_meta_alloc(sim->nblocks * sizeof *sim->free_blocks);
    if (sim->free_blocks == NULL) {
        st = base_fail(LMS_ERR_OUT_OF_MEMORY, "sim: no host memory for %zu blocks", sim->nblocks);
        goto fail_sim;
    }
    sim->memfd = memfd_create("lms-sim-device", MFD_CLOEXEC);
    if (sim->memfd < 0) {
        st = sys_fail("memfd_create", errno);
        goto fail_blocks;
    }
    if (ftruncate(sim->memfd, (off_t)sim->capacity) != 0) {
        st = sys_fail("ftruncate of the device memory", errno);
        goto fail_fd;
    }
    sim->host_memfd = memfd_create("lms-sim-host-blocks", MFD_CLOEXEC);
    if (sim->host_memfd < 0) {
        st = sys_fail("memfd_create for the host blocks", errno);
        goto fail_fd;
    }
    for (size_t i = 0; i < sim->nblocks; i++) /* block 0 is created first */
        sim->free_blocks[i] = (uint32_t)(sim->nblocks - 1 - i);
    sim->free_count = sim->nblocks;
    pthread_mutex_init(&sim->lock, NULL);
    pthread_cond_init(&sim->workers_done, NULL);
    pthread_mutex_init(&sim->event_lock, NULL);
    pthread_mutex_init(&sim->h2d.lock, NULL);
    pthread_mutex_init(&sim->d2h.lock, NULL);
    atomic_init(&sim->h2d.running, 0);
    atomic_init(&sim->d2h.running, 0);
    sim->h2d.bytes_per_ns = cfg->sim_h2d_gbps; /* 1 GB/s = 1 byte/ns */
    sim->d2h.bytes_per_ns = cfg->sim_d2h_gbps;
    sim->vmm_ns_per_byte = cfg->sim_vmm_us_per_mib * 1e3 / (double)(1u << 20);
    sim->access_d2h_ns_per_byte = cfg->sim_set_access_d2h_us_per_mib * 1e3 / (double)(1u << 20);
    pthread_mutex_init(&sim->vmm_lock, NULL);
    pthread_mutex_init(&sim->observer_lock, NULL);
    atomic_init(&sim->observed, false);

    char cap[32], gran[32];
    *info = (dev_info_t){
        .backend = "sim",
        .ordinal = 0,
        .total_memory = sim->capacity,
        .granularity = sim->granularity,
        .host_numa_node = nearest_numa_node(),
        .host_blocks = !cfg->sim_no_host_blocks,
        .host_block_runs = !cfg->sim_no_host_block_runs,
    };
    if (cfg->sim_no_host_blocks)
        snprintf(info->host_blocks_why, sizeof info->host_blocks_why,
                 "the sim was opened without them");
    snprintf(info->name, sizeof info->name, "simulated GPU (%s, %s blocks)",
             base_format_size(sim->capacity, cap, sizeof cap),
             base_format_size(sim->granularity, gran, sizeof gran));
    *out = (dev_layer_t){&sim_ops, sim};
    return LMS_OK;

fail_fd:
    close(sim->memfd);
fail_blocks:
    base_meta_free(sim->free_blocks);
fail_sim:
    base_meta_free(sim);
    return st;
}
