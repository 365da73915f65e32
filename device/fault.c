/*
 * device/fault.c — the fault layer: wraps a backend and fails chosen calls, so
 * that every error path above it can be tested on sim or on a GPU (the sqlite
 * way: "calls N..N+M-1 of op X fail", or each call with a probability).
 *
 * Owns: the plan, a call counter per op, the count of injected failures, the
 * random state. A failed call does nothing below and returns plan.status with
 * a message naming the op and the call's number.
 *
 * Lock: fault.lock guards all of it; it is never held across a call below.
 * The API of fault.h is at the end.
 */
#include <pthread.h>
#include <stdlib.h>

#include "base/base.h"
#include "base/lockorder.h"
#include "device/fault.h"
#include "device/layer.h"

struct dev_fault {
    dev_layer_t inner;
    pthread_mutex_t lock;
    dev_fault_plan_t plan;
    uint64_t calls[DEV_OP_COUNT];
    uint64_t injected;
    uint64_t rng; /* xorshift64* state, from plan.seed */
};

static uint64_t next_random(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545f4914f6cdd1dull;
}

/* Counts a call of op; returns LMS_OK to pass it down, or the injected failure. */
static lms_status_t fault_point(struct dev_fault *f, dev_op_t op)
{
    lo_lock(&f->lock, LO_DEV_FAULT);
    uint64_t n = ++f->calls[op];
    const dev_fault_plan_t *p = &f->plan;
    bool fail = false;
    if (p->probability > 0 && (p->op == op || p->op == DEV_OP_COUNT || (p->also >> op & 1)))
        fail = (double)(next_random(&f->rng) >> 11) * 0x1p-53 < p->probability;
    else if (p->first != 0 && p->op == op)
        fail = n >= p->first && n - p->first < p->count;
    f->injected += fail;
    lms_status_t status = p->status ? p->status : LMS_ERR_DEVICE;
    lo_unlock(&f->lock, LO_DEV_FAULT);
    if (!fail)
        return LMS_OK;
    return base_fail(status, "%s: injected fault (call %llu)", dev_op_name(op),
                     (unsigned long long)n);
}

/* One forwarding function per op: count, maybe fail, else call the layer below. */
#define FORWARD(op, params, ...)                                            \
    static lms_status_t fault_##op params                                   \
    {                                                                       \
        struct dev_fault *f = self;                                         \
        lms_status_t st = fault_point(f, DEV_OP_##op);                      \
        return st != LMS_OK ? st : f->inner.ops->op(f->inner.self, __VA_ARGS__); \
    }

FORWARD(mem_info, (void *self, size_t *fr, size_t *t), fr, t)
FORWARD(va_reserve, (void *self, size_t size, dev_addr_t *base), size, base)
FORWARD(va_free, (void *self, dev_addr_t base, size_t size), base, size)
FORWARD(block_create, (void *self, dev_block_t *b), b)
FORWARD(block_release, (void *self, dev_block_t b), b)
FORWARD(map, (void *self, dev_addr_t va, dev_block_t b), va, b)
FORWARD(set_access, (void *self, dev_addr_t va, size_t size), va, size)
FORWARD(unmap, (void *self, dev_addr_t va, size_t size), va, size)
FORWARD(host_register, (void *self, void *p, size_t size), p, size)
FORWARD(host_unregister, (void *self, void *p), p)
FORWARD(stream_create, (void *self, dev_priority_t prio, dev_stream_t **s), prio, s)
FORWARD(stream_adopt, (void *self, uint64_t native, dev_stream_t **s), native, s)
FORWARD(stream_destroy, (void *self, dev_stream_t *s), s)
FORWARD(stream_synchronize, (void *self, dev_stream_t *s), s)
FORWARD(event_create, (void *self, dev_event_t **e), e)
FORWARD(event_destroy, (void *self, dev_event_t *e), e)
FORWARD(event_record, (void *self, dev_event_t *e, dev_stream_t *s), e, s)
FORWARD(event_query, (void *self, dev_event_t *e), e)
FORWARD(event_synchronize, (void *self, dev_event_t *e), e)
FORWARD(stream_wait_event, (void *self, dev_stream_t *s, dev_event_t *e), s, e)
FORWARD(copy_h2d, (void *self, dev_stream_t *s, dev_addr_t d, const void *src, size_t n), s, d, src, n)
FORWARD(copy_d2h, (void *self, dev_stream_t *s, void *d, dev_addr_t src, size_t n), s, d, src, n)
FORWARD(copy_d2d, (void *self, dev_stream_t *s, dev_addr_t d, dev_addr_t src, size_t n), s, d, src, n)
FORWARD(host_func, (void *self, dev_stream_t *s, dev_host_fn_t fn, void *arg), s, fn, arg)
FORWARD(launch, (void *self, dev_stream_t *s, const dev_launch_t *l), s, l)
FORWARD(set_observer, (void *self, dev_observer_t fn, void *ctx), fn, ctx)
FORWARD(host_block_create, (void *self, dev_block_t *b), b)
FORWARD(set_access_host, (void *self, dev_addr_t va, size_t size), va, size)

static void fault_close(void *self)
{
    struct dev_fault *f = self;
    f->inner.ops->close(f->inner.self);
    pthread_mutex_destroy(&f->lock);
    base_meta_free(f);
}

static const dev_ops_t fault_ops = {
    .name = "fault",
    .close = fault_close,
#define FAULT_ENTRY(op) .op = fault_##op,
    DEV_OP_LIST(FAULT_ENTRY)
#undef FAULT_ENTRY
};

lms_status_t dev_fault_open(dev_layer_t inner, dev_layer_t *out, struct dev_fault **fault)
{
    struct dev_fault *f = base_meta_calloc(1, sizeof *f);
    if (f == NULL)
        return base_fail(LMS_ERR_OUT_OF_MEMORY, "dev_open: no host memory for the fault layer");
    f->inner = inner;
    pthread_mutex_init(&f->lock, NULL);
    *out = (dev_layer_t){&fault_ops, f};
    *fault = f;
    return LMS_OK;
}

void dev_fault_layer_set(struct dev_fault *f, const dev_fault_plan_t *plan)
{
    lo_lock(&f->lock, LO_DEV_FAULT);
    f->plan = *plan;
    for (int i = 0; i < DEV_OP_COUNT; i++)
        f->calls[i] = 0;
    f->injected = 0;
    f->rng = plan->seed ? plan->seed : 0x9e3779b97f4a7c15ull; /* xorshift needs nonzero */
    lo_unlock(&f->lock, LO_DEV_FAULT);
}

static uint64_t count_calls(struct dev_fault *f, dev_op_t op)
{
    lo_lock(&f->lock, LO_DEV_FAULT);
    uint64_t n = op < DEV_OP_COUNT ? f->calls[op] : 0;
    lo_unlock(&f->lock, LO_DEV_FAULT);
    return n;
}

static uint64_t count_injected(struct dev_fault *f)
{
    lo_lock(&f->lock, LO_DEV_FAULT);
    uint64_t n = f->injected;
    lo_unlock(&f->lock, LO_DEV_FAULT);
    return n;
}

/* ---- the API of fault.h ---------------------------------------------------- */

lms_status_t dev_fault_set(dev_device_t *dev, const dev_fault_plan_t *plan)
{
    if (dev == NULL || plan == NULL)
        return base_fail(LMS_ERR_INVALID, "dev_fault_set: NULL argument");
    if (dev->fault == NULL)
        return base_fail(LMS_ERR_INVALID,
                         "dev_fault_set: the device was opened without fault_injection");
    if ((unsigned)plan->op > DEV_OP_COUNT || !(plan->probability >= 0 && plan->probability <= 1))
        return base_fail(LMS_ERR_INVALID, "dev_fault_set: bad op or probability");
    if (plan->op == DEV_OP_COUNT && plan->first != 0)
        return base_fail(LMS_ERR_INVALID, "dev_fault_set: \"every op\" needs a probability");
    if (plan->also >> DEV_OP_COUNT != 0 || (plan->also != 0 && plan->probability == 0))
        return base_fail(LMS_ERR_INVALID, "dev_fault_set: `also` names ops, and needs a probability");
    if (plan->status != LMS_OK && plan->status < LMS_ERR_INVALID)
        return base_fail(LMS_ERR_INVALID, "dev_fault_set: status must be a failure");
    dev_fault_layer_set(dev->fault, plan);
    return LMS_OK;
}

uint64_t dev_fault_calls(dev_device_t *dev, dev_op_t op)
{
    return dev && dev->fault ? count_calls(dev->fault, op) : 0;
}

uint64_t dev_fault_injected(dev_device_t *dev)
{
    return dev && dev->fault ? count_injected(dev->fault) : 0;
}
