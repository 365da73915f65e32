/*
 * device/check.c — the check layer: the outermost layer of every device stack.
 * It validates every argument of every op and keeps enough bookkeeping that
 * misuse (a double unmap, a block released while mapped, a stream destroyed
 * or of another device, a copy outside the device's reservations) is a clean
 * LMS_ERR_INVALID with a message on every backend, instead of a crash on one
 * and silent corruption on another. Below it, backends may assume valid
 * arguments.
 *
 * Owns:
 *   reservations  base, size, and per granule of VA the block mapped there;
 *   three tables  blocks, streams and events, of the objects the layer below
 *                 made. What the caller holds is a handle, never a pointer to
 *                 memory: see Note [Handles];
 *   host ranges   registered with host_register;
 *   the observer  set_observer's: the layer below reports its own streams,
 *                 and the observer is told the handles that name them.
 * Invariant: the bookkeeping changes only after the layer below succeeded, so
 * a failure anywhere below leaves every object as it was.
 *
 * Lock: check.lock guards all of it. Ops that create, destroy, map or unmap
 * hold it across the call below (none of those waits for a stream, and no
 * host function takes this lock); ops that enqueue work or wait hold it only
 * to look their handles and ranges up, so a synchronize never blocks others.
 * The observer's calls come from the layer below (a sim worker, or a cuda op
 * in progress) and take the lock to find the handle, so set_observer must
 * not hold it across the call below, which waits for those calls.
 *
 * Note [Handles]
 * A block, stream or event handle is a 64-bit number (streams and events cast
 * to the opaque pointer types), laid out as
 *     [63..48 layer tag][47..46 kind][45..28 generation][27..0 slot + 1]
 * and is checked by lookup, never dereferenced: a destroyed object, a handle
 * of another device or another kind, or a made-up value is recognised as such.
 * A slot's generation grows on every release; a slot whose generation is used
 * up is retired rather than reused, so an old handle never becomes valid
 * again. The tag tells devices apart while both are open (it repeats after
 * 65535 opens, which matters only for a handle used after its device closed).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "device/layer.h"

#define SLOT_BITS 28
#define GENERATION_BITS 18
#define GENERATION_RETIRED ((1u << GENERATION_BITS) - 1)
#define NO_SLOT UINT32_MAX

typedef enum kind { KIND_BLOCK = 1, KIND_STREAM, KIND_EVENT } kind_t;
static const char *const kind_names[] = {"", "block", "stream", "event"};

typedef struct slot {
    uint64_t inner;      /* the object of the layer below */
    uint32_t generation; /* of the handle naming this slot now (or next) */
    uint32_t next_free;  /* free list link, NO_SLOT = end */
    uint32_t maps;       /* blocks: VAs it is mapped at */
    bool used;
} slot_t;

typedef struct table {
    kind_t kind;
    slot_t *slots;
    size_t n, cap;
    uint32_t free_head; /* NO_SLOT: none free */
    size_t live;
} table_t;

typedef struct reservation {
    dev_addr_t base;
    size_t size;
    dev_block_t *block; /* per granule: the handle of the block mapped there, 0 = none */
} reservation_t;

typedef struct host_range {
    char *ptr;
    size_t size;
} host_range_t;

typedef struct check {
    dev_layer_t inner;
    size_t granularity;
    uint64_t tag; /* this layer's bits 48..63 of every handle; never 0 */
    pthread_mutex_t lock;
    reservation_t *res;
    size_t nres, capres;
    table_t blocks, streams, events;
    size_t mapped_blocks; /* granules with a block mapped, over all reservations */
    host_range_t *host;
    size_t nhost, caphost;
    dev_observer_t observer; /* the caller's, told of the handles; NULL: none */
    void *observer_ctx;
} check_t;

static atomic_uint next_tag;

#define INNER(c, op, ...) ((c)->inner.ops->op((c)->inner.self, __VA_ARGS__))

static lms_status_t invalid(const char *op, const char *why)
{
    return base_fail(LMS_ERR_INVALID, "%s: %s", op, why);
}

static bool grow(void **array, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return true;
    size_t cap2 = *cap ? *cap * 2 : 8;
    void *p = base_meta_realloc(*array, cap2 * elem);
    if (p == NULL)
        return false;
    *array = p;
    *cap = cap2;
    return true;
}

/* ---- handle tables (caller holds the lock) ----------------------------------- */

static uint64_t handle_of(const check_t *c, const table_t *t, size_t slot)
{
    return c->tag | (uint64_t)t->kind << 46 |
           (uint64_t)t->slots[slot].generation << SLOT_BITS | (slot + 1);
}

/* Stores inner in a free slot; *handle names it. */
static lms_status_t table_add(check_t *c, table_t *t, uint64_t inner, uint64_t *handle)
{
    uint32_t i = t->free_head;
    if (i != NO_SLOT) {
        t->free_head = t->slots[i].next_free;
    } else {
        if (t->n + 1 >= (1u << SLOT_BITS) || !grow((void **)&t->slots, &t->cap, t->n + 1,
                                                    sizeof *t->slots))
            return base_fail(LMS_ERR_OUT_OF_MEMORY, "no host memory to track another %s",
                             kind_names[t->kind]);
        i = (uint32_t)t->n++;
        t->slots[i] = (slot_t){.next_free = NO_SLOT};
    }
    slot_t *s = &t->slots[i];
    s->inner = inner;
    s->maps = 0;
    s->used = true;
    t->live++;
    *handle = handle_of(c, t, i);
    return LMS_OK;
}

/* The slot handle names, or a failure that says why it names none. */
static lms_status_t table_find(check_t *c, table_t *t, const char *op, uint64_t handle,
                               slot_t **out)
{
    const char *what = kind_names[t->kind];
    uint64_t slot = (handle & ((1ull << SLOT_BITS) - 1)) - 1;
    if (handle == 0)
        return base_fail(LMS_ERR_INVALID, "%s: the %s is NULL", op, what);
    if ((handle & ~0ull << 48) != c->tag)
        return base_fail(LMS_ERR_INVALID, "%s: the %s belongs to another device, or is no %s",
                         op, what, what);
    if ((handle >> 46 & 3) != t->kind)
        return base_fail(LMS_ERR_INVALID, "%s: 0x%llx is a %s, not a %s", op,
                         (unsigned long long)handle, kind_names[handle >> 46 & 3], what);
    slot_t *s = slot < t->n ? &t->slots[slot] : NULL;
    if (s == NULL || !s->used ||
        s->generation != (handle >> SLOT_BITS & ((1u << GENERATION_BITS) - 1)))
        return base_fail(LMS_ERR_INVALID, "%s: the %s 0x%llx was destroyed, or never existed", op,
                         what, (unsigned long long)handle);
    *out = s;
    return LMS_OK;
}

static void table_remove(table_t *t, slot_t *s)
{
    s->used = false;
    s->inner = 0;
    t->live--;
    if (++s->generation == GENERATION_RETIRED)
        return; /* retired: its handles stay invalid for good */
    s->next_free = t->free_head;
    t->free_head = (uint32_t)(s - t->slots);
}

/* Looks up a stream or event handle and returns its inner object. */
static lms_status_t lookup(check_t *c, table_t *t, const char *op, const void *handle, void **inner)
{
    pthread_mutex_lock(&c->lock);
    slot_t *s;
    lms_status_t st = table_find(c, t, op, (uint64_t)(uintptr_t)handle, &s);
    if (st == LMS_OK)
        *inner = (void *)(uintptr_t)s->inner;
    pthread_mutex_unlock(&c->lock);
    return st;
}

#define STREAM(c, op, s, out) lookup((c), &(c)->streams, (op), (s), (void **)(out))
#define EVENT(c, op, e, out) lookup((c), &(c)->events, (op), (e), (void **)(out))

/* ---- ranges ---------------------------------------------------------------- */

/* The reservation holding all of [va, va+size), or NULL. Caller holds the lock. */
static reservation_t *find_reservation(check_t *c, dev_addr_t va, size_t size)
{
    for (size_t i = 0; i < c->nres; i++) {
        reservation_t *r = &c->res[i];
        if (va >= r->base && va - r->base < r->size && size <= r->size - (va - r->base))
            return r;
    }
    return NULL;
}

/* Checks that [va, va+size) is a nonzero, aligned run of granules inside one
 * reservation; on success *r and *first name it. Caller holds the lock. */
static lms_status_t check_run(check_t *c, const char *op, dev_addr_t va, size_t size,
                              reservation_t **r, size_t *first)
{
    if (size == 0)
        return invalid(op, "size is 0");
    if (va % c->granularity != 0 || size % c->granularity != 0)
        return base_fail(LMS_ERR_INVALID,
                         "%s: address 0x%llx and size %zu must be multiples of the granularity %zu",
                         op, (unsigned long long)va, size, c->granularity);
    *r = find_reservation(c, va, size);
    if (*r == NULL)
        return base_fail(LMS_ERR_INVALID,
                         "%s: [0x%llx, +%zu) is not inside one reservation of this device", op,
                         (unsigned long long)va, size);
    *first = (size_t)(va - (*r)->base) / c->granularity;
    return LMS_OK;
}

/* A device range [addr, addr+n) for a copy or kernel: nonzero and inside a
 * reservation of this device. */
static lms_status_t check_device_range(check_t *c, const char *op, dev_addr_t addr, size_t n)
{
    if (n == 0)
        return invalid(op, "size is 0");
    if (addr == 0 || addr + n < addr)
        return base_fail(LMS_ERR_INVALID, "%s: bad device range [0x%llx, +%zu)", op,
                         (unsigned long long)addr, n);
    pthread_mutex_lock(&c->lock);
    bool inside = find_reservation(c, addr, n) != NULL;
    pthread_mutex_unlock(&c->lock);
    if (!inside)
        return base_fail(LMS_ERR_INVALID,
                         "%s: [0x%llx, +%zu) is not inside a reservation of this device", op,
                         (unsigned long long)addr, n);
    return LMS_OK;
}

static lms_status_t check_host_range(const char *op, const void *p, size_t n)
{
    if (p == NULL)
        return invalid(op, "host pointer is NULL");
    if ((uintptr_t)p + n < (uintptr_t)p)
        return invalid(op, "host range wraps around");
    return LMS_OK;
}

/* ---- memory ---------------------------------------------------------------- */

static lms_status_t check_mem_info(void *self, size_t *free_bytes, size_t *total_bytes)
{
    check_t *c = self;
    if (free_bytes == NULL || total_bytes == NULL)
        return invalid("mem_info", "NULL output");
    return INNER(c, mem_info, free_bytes, total_bytes);
}

static lms_status_t check_va_reserve(void *self, size_t size, dev_addr_t *base)
{
    check_t *c = self;
    if (base == NULL)
        return invalid("va_reserve", "NULL output");
    if (size == 0 || size % c->granularity != 0)
        return base_fail(LMS_ERR_INVALID,
                         "va_reserve: size %zu must be a nonzero multiple of the granularity %zu",
                         size, c->granularity);
    size_t n = size / c->granularity;
    reservation_t r = {.size = size, .block = base_meta_calloc(n, sizeof *r.block)};
    if (r.block == NULL)
        return base_fail(LMS_ERR_OUT_OF_MEMORY, "va_reserve: no host memory to track %zu blocks", n);
    lms_status_t st = INNER(c, va_reserve, size, &r.base);
    if (st != LMS_OK) {
        base_meta_free(r.block);
        return st;
    }
    pthread_mutex_lock(&c->lock);
    if (!grow((void **)&c->res, &c->capres, c->nres + 1, sizeof *c->res)) {
        pthread_mutex_unlock(&c->lock);
        INNER(c, va_free, r.base, size);
        base_meta_free(r.block);
        return base_fail(LMS_ERR_OUT_OF_MEMORY, "va_reserve: no host memory for the reservation");
    }
    c->res[c->nres++] = r;
    pthread_mutex_unlock(&c->lock);
    *base = r.base;
    return LMS_OK;
}

static lms_status_t check_va_free(void *self, dev_addr_t base, size_t size)
{
    check_t *c = self;
    pthread_mutex_lock(&c->lock);
    lms_status_t st;
    size_t i = 0;
    while (i < c->nres && c->res[i].base != base)
        i++;
    if (i == c->nres) {
        st = base_fail(LMS_ERR_INVALID, "va_free: 0x%llx is not the base of a reservation",
                       (unsigned long long)base);
        goto out;
    }
    reservation_t *r = &c->res[i];
    if (size != r->size) {
        st = base_fail(LMS_ERR_INVALID, "va_free: size %zu, but the reservation has %zu", size,
                       r->size);
        goto out;
    }
    size_t mapped = 0;
    for (size_t g = 0; g < size / c->granularity; g++)
        mapped += r->block[g] != 0;
    if (mapped != 0) {
        st = base_fail(LMS_ERR_INVALID, "va_free: %zu blocks are still mapped; unmap them first",
                       mapped);
        goto out;
    }
    st = INNER(c, va_free, base, size);
    if (st != LMS_OK)
        goto out;
    base_meta_free(r->block);
    c->res[i] = c->res[--c->nres];
out:
    pthread_mutex_unlock(&c->lock);
    return st;
}

static lms_status_t check_block_create(void *self, dev_block_t *block)
{
    check_t *c = self;
    if (block == NULL)
        return invalid("block_create", "NULL output");
    dev_block_t inner;
    lms_status_t st = INNER(c, block_create, &inner);
    if (st != LMS_OK)
        return st;
    pthread_mutex_lock(&c->lock);
    st = table_add(c, &c->blocks, inner, block);
    pthread_mutex_unlock(&c->lock);
    if (st != LMS_OK)
        INNER(c, block_release, inner);
    return st;
}

static lms_status_t check_block_release(void *self, dev_block_t block)
{
    check_t *c = self;
    pthread_mutex_lock(&c->lock);
    slot_t *b;
    lms_status_t st = table_find(c, &c->blocks, "block_release", block, &b);
    if (st == LMS_OK && b->maps != 0)
        st = base_fail(LMS_ERR_INVALID, "block_release: the block is still mapped at %u VAs",
                       b->maps);
    if (st == LMS_OK)
        st = INNER(c, block_release, b->inner);
    if (st == LMS_OK)
        table_remove(&c->blocks, b);
    pthread_mutex_unlock(&c->lock);
    return st;
}

static lms_status_t check_map(void *self, dev_addr_t va, dev_block_t block)
{
    check_t *c = self;
    pthread_mutex_lock(&c->lock);
    reservation_t *r;
    size_t g;
    slot_t *b;
    lms_status_t st = check_run(c, "map", va, c->granularity, &r, &g);
    if (st == LMS_OK)
        st = table_find(c, &c->blocks, "map", block, &b);
    if (st == LMS_OK && r->block[g] != 0)
        st = base_fail(LMS_ERR_INVALID, "map: 0x%llx is already mapped; unmap it first",
                       (unsigned long long)va);
    if (st == LMS_OK)
        st = INNER(c, map, va, b->inner);
    if (st == LMS_OK) {
        r->block[g] = block;
        b->maps++;
        c->mapped_blocks++;
    }
    pthread_mutex_unlock(&c->lock);
    return st;
}

/* For set_access and unmap: a valid run, every granule of which is mapped.
 * Caller holds the lock. */
static lms_status_t check_mapped_run(check_t *c, const char *op, dev_addr_t va, size_t size,
                                     reservation_t **r, size_t *first)
{
    lms_status_t st = check_run(c, op, va, size, r, first);
    for (size_t g = *first; st == LMS_OK && g < *first + size / c->granularity; g++)
        if ((*r)->block[g] == 0)
            st = base_fail(LMS_ERR_INVALID, "%s: 0x%llx is not mapped", op,
                           (unsigned long long)((*r)->base + g * c->granularity));
    return st;
}

static lms_status_t check_set_access(void *self, dev_addr_t va, size_t size)
{
    check_t *c = self;
    pthread_mutex_lock(&c->lock);
    reservation_t *r;
    size_t first;
    lms_status_t st = check_mapped_run(c, "set_access", va, size, &r, &first);
    if (st == LMS_OK)
        st = INNER(c, set_access, va, size);
    pthread_mutex_unlock(&c->lock);
    return st;
}

static lms_status_t check_unmap(void *self, dev_addr_t va, size_t size)
{
    check_t *c = self;
    pthread_mutex_lock(&c->lock);
    reservation_t *r;
    size_t first;
    lms_status_t st = check_mapped_run(c, "unmap", va, size, &r, &first);
    if (st == LMS_OK)
        st = INNER(c, unmap, va, size);
    for (size_t g = first; st == LMS_OK && g < first + size / c->granularity; g++) {
        slot_t *b;
        if (table_find(c, &c->blocks, "unmap", r->block[g], &b) == LMS_OK)
            b->maps--; /* always found: a mapped block cannot be released */
        r->block[g] = 0;
        c->mapped_blocks--;
    }
    pthread_mutex_unlock(&c->lock);
    return st;
}

static lms_status_t check_host_register(void *self, void *ptr, size_t size)
{
    check_t *c = self;
    lms_status_t st = check_host_range("host_register", ptr, size);
    if (st == LMS_OK && size == 0)
        st = invalid("host_register", "size is 0");
    if (st != LMS_OK)
        return st;
    char *p = ptr;
    pthread_mutex_lock(&c->lock);
    for (size_t i = 0; i < c->nhost; i++) {
        host_range_t *h = &c->host[i];
        if (p < h->ptr + h->size && h->ptr < p + size) {
            st = base_fail(LMS_ERR_INVALID, "host_register: [%p, +%zu) overlaps registered [%p, +%zu)",
                           ptr, size, (void *)h->ptr, h->size);
            goto out;
        }
    }
    if (!grow((void **)&c->host, &c->caphost, c->nhost + 1, sizeof *c->host)) {
        st = base_fail(LMS_ERR_OUT_OF_MEMORY, "host_register: no host memory to track it");
        goto out;
    }
    st = INNER(c, host_register, ptr, size);
    if (st != LMS_OK)
        goto out;
    c->host[c->nhost++] = (host_range_t){p, size};
out:
    pthread_mutex_unlock(&c->lock);
    return st;
}

static lms_status_t check_host_unregister(void *self, void *ptr)
{
    check_t *c = self;
    pthread_mutex_lock(&c->lock);
    lms_status_t st;
    size_t i = 0;
    while (i < c->nhost && c->host[i].ptr != ptr)
        i++;
    if (i == c->nhost) {
        st = base_fail(LMS_ERR_INVALID, "host_unregister: %p is not the start of a registered range",
                       ptr);
        goto out;
    }
    st = INNER(c, host_unregister, ptr);
    if (st != LMS_OK)
        goto out;
    c->host[i] = c->host[--c->nhost];
out:
    pthread_mutex_unlock(&c->lock);
    return st;
}

/* ---- streams and events ------------------------------------------------------ */

/* Registers a stream or event the layer below just made; destroys it again if
 * the table cannot take it. */
static lms_status_t add_object(check_t *c, table_t *t, void *inner, uint64_t *handle)
{
    pthread_mutex_lock(&c->lock);
    lms_status_t st = table_add(c, t, (uint64_t)(uintptr_t)inner, handle);
    pthread_mutex_unlock(&c->lock);
    if (st != LMS_OK && t->kind == KIND_STREAM)
        INNER(c, stream_destroy, inner);
    else if (st != LMS_OK)
        INNER(c, event_destroy, inner);
    return st;
}

/* Destroys the stream or event handle names (the layer below's destroy does
 * not block, so the lock is held across it). */
static lms_status_t destroy_object(check_t *c, table_t *t, const char *op, const void *handle)
{
    pthread_mutex_lock(&c->lock);
    slot_t *s;
    lms_status_t st = table_find(c, t, op, (uint64_t)(uintptr_t)handle, &s);
    if (st == LMS_OK)
        st = t->kind == KIND_STREAM ? INNER(c, stream_destroy, (dev_stream_t *)(uintptr_t)s->inner)
                                    : INNER(c, event_destroy, (dev_event_t *)(uintptr_t)s->inner);
    if (st == LMS_OK)
        table_remove(t, s);
    pthread_mutex_unlock(&c->lock);
    return st;
}

/* Hands out the stream the layer below just made (st: how that went). */
static lms_status_t add_stream(check_t *c, lms_status_t st, dev_stream_t *inner, dev_stream_t **out)
{
    uint64_t handle;
    if (st == LMS_OK)
        st = add_object(c, &c->streams, inner, &handle);
    if (st == LMS_OK)
        *out = (dev_stream_t *)(uintptr_t)handle;
    return st;
}

static lms_status_t check_stream_create(void *self, dev_priority_t priority, dev_stream_t **out)
{
    check_t *c = self;
    if (out == NULL)
        return invalid("stream_create", "NULL output");
    if (priority != DEV_PRIORITY_NORMAL && priority != DEV_PRIORITY_HIGH)
        return invalid("stream_create", "unknown priority");
    dev_stream_t *inner = NULL;
    lms_status_t st = INNER(c, stream_create, priority, &inner);
    return add_stream(c, st, inner, out);
}

static lms_status_t check_stream_adopt(void *self, uint64_t native, dev_stream_t **out)
{
    check_t *c = self;
    if (out == NULL)
        return invalid("stream_adopt", "NULL output");
    if (native == 0)
        return invalid("stream_adopt", "native stream 0 (the legacy default stream is 0x1)");
    dev_stream_t *inner = NULL;
    lms_status_t st = INNER(c, stream_adopt, native, &inner);
    return add_stream(c, st, inner, out);
}

static lms_status_t check_stream_destroy(void *self, dev_stream_t *stream)
{
    return destroy_object(self, &((check_t *)self)->streams, "stream_destroy", stream);
}

static lms_status_t check_stream_synchronize(void *self, dev_stream_t *stream)
{
    check_t *c = self;
    dev_stream_t *s;
    lms_status_t st = STREAM(c, "stream_synchronize", stream, &s);
    return st != LMS_OK ? st : INNER(c, stream_synchronize, s);
}

static lms_status_t check_event_create(void *self, dev_event_t **out)
{
    check_t *c = self;
    if (out == NULL)
        return invalid("event_create", "NULL output");
    dev_event_t *inner;
    uint64_t handle;
    lms_status_t st = INNER(c, event_create, &inner);
    if (st == LMS_OK)
        st = add_object(c, &c->events, inner, &handle);
    if (st == LMS_OK)
        *out = (dev_event_t *)(uintptr_t)handle;
    return st;
}

static lms_status_t check_event_destroy(void *self, dev_event_t *event)
{
    return destroy_object(self, &((check_t *)self)->events, "event_destroy", event);
}

static lms_status_t check_event_record(void *self, dev_event_t *event, dev_stream_t *stream)
{
    check_t *c = self;
    dev_event_t *e;
    dev_stream_t *s;
    lms_status_t st = EVENT(c, "event_record", event, &e);
    if (st == LMS_OK)
        st = STREAM(c, "event_record", stream, &s);
    return st != LMS_OK ? st : INNER(c, event_record, e, s);
}

static lms_status_t check_event_query(void *self, dev_event_t *event)
{
    check_t *c = self;
    dev_event_t *e;
    lms_status_t st = EVENT(c, "event_query", event, &e);
    return st != LMS_OK ? st : INNER(c, event_query, e);
}

static lms_status_t check_event_synchronize(void *self, dev_event_t *event)
{
    check_t *c = self;
    dev_event_t *e;
    lms_status_t st = EVENT(c, "event_synchronize", event, &e);
    return st != LMS_OK ? st : INNER(c, event_synchronize, e);
}

static lms_status_t check_stream_wait_event(void *self, dev_stream_t *stream, dev_event_t *event)
{
    check_t *c = self;
    dev_stream_t *s;
    dev_event_t *e;
    lms_status_t st = STREAM(c, "stream_wait_event", stream, &s);
    if (st == LMS_OK)
        st = EVENT(c, "stream_wait_event", event, &e);
    return st != LMS_OK ? st : INNER(c, stream_wait_event, s, e);
}

/* ---- work on streams ----------------------------------------------------------- */

static lms_status_t check_copy_h2d(void *self, dev_stream_t *stream, dev_addr_t dst,
                                   const void *src, size_t n)
{
    check_t *c = self;
    dev_stream_t *s;
    lms_status_t st = STREAM(c, "copy_h2d", stream, &s);
    if (st == LMS_OK)
        st = check_device_range(c, "copy_h2d", dst, n);
    if (st == LMS_OK)
        st = check_host_range("copy_h2d", src, n);
    return st != LMS_OK ? st : INNER(c, copy_h2d, s, dst, src, n);
}

static lms_status_t check_copy_d2h(void *self, dev_stream_t *stream, void *dst, dev_addr_t src,
                                   size_t n)
{
    check_t *c = self;
    dev_stream_t *s;
    lms_status_t st = STREAM(c, "copy_d2h", stream, &s);
    if (st == LMS_OK)
        st = check_device_range(c, "copy_d2h", src, n);
    if (st == LMS_OK)
        st = check_host_range("copy_d2h", dst, n);
    return st != LMS_OK ? st : INNER(c, copy_d2h, s, dst, src, n);
}

static lms_status_t check_copy_d2d(void *self, dev_stream_t *stream, dev_addr_t dst,
                                   dev_addr_t src, size_t n)
{
    check_t *c = self;
    dev_stream_t *s;
    lms_status_t st = STREAM(c, "copy_d2d", stream, &s);
    if (st == LMS_OK)
        st = check_device_range(c, "copy_d2d", dst, n);
    if (st == LMS_OK)
        st = check_device_range(c, "copy_d2d", src, n);
    return st != LMS_OK ? st : INNER(c, copy_d2d, s, dst, src, n);
}

static lms_status_t check_host_func(void *self, dev_stream_t *stream, dev_host_fn_t fn, void *arg)
{
    check_t *c = self;
    dev_stream_t *s;
    lms_status_t st = STREAM(c, "host_func", stream, &s);
    if (st == LMS_OK && fn == NULL)
        st = invalid("host_func", "function is NULL");
    return st != LMS_OK ? st : INNER(c, host_func, s, fn, arg);
}

static lms_status_t check_fill(void *self, dev_stream_t *stream, dev_addr_t dst, size_t n,
                               uint64_t seed)
{
    check_t *c = self;
    dev_stream_t *s;
    lms_status_t st = STREAM(c, "fill", stream, &s);
    if (st == LMS_OK)
        st = check_device_range(c, "fill", dst, n);
    return st != LMS_OK ? st : INNER(c, fill, s, dst, n, seed);
}

static lms_status_t check_checksum(void *self, dev_stream_t *stream, dev_addr_t src, size_t n,
                                   uint64_t *out)
{
    check_t *c = self;
    dev_stream_t *s;
    lms_status_t st = STREAM(c, "checksum", stream, &s);
    if (st == LMS_OK)
        st = check_device_range(c, "checksum", src, n);
    if (st == LMS_OK && out == NULL)
        st = invalid("checksum", "NULL output");
    return st != LMS_OK ? st : INNER(c, checksum, s, src, n, out);
}

static lms_status_t check_axpy(void *self, dev_stream_t *stream, size_t n, float a, dev_addr_t x,
                               dev_addr_t y)
{
    check_t *c = self;
    dev_stream_t *s;
    lms_status_t st = STREAM(c, "axpy", stream, &s);
    if (st == LMS_OK && (n > SIZE_MAX / sizeof(float) || x % sizeof(float) || y % sizeof(float)))
        st = invalid("axpy", "x and y must be float-aligned and n * 4 must not overflow");
    if (st == LMS_OK)
        st = check_device_range(c, "axpy", x, n * sizeof(float));
    if (st == LMS_OK)
        st = check_device_range(c, "axpy", y, n * sizeof(float));
    return st != LMS_OK ? st : INNER(c, axpy, s, n, a, x, y);
}

static lms_status_t check_kernel(void *self, dev_stream_t *stream, const dev_kernel_args_t *a)
{
    check_t *c = self;
    dev_stream_t *s;
    dev_operand_t ops[DEV_KERNEL_OPERANDS];
    size_t n = 0;
    lms_status_t st = STREAM(c, "kernel", stream, &s);
    if (st == LMS_OK)
        st = dev_kernel_operands(a, ops, &n);
    for (size_t i = 0; st == LMS_OK && i < n; i++)
        st = check_device_range(c, dev_kernel_name(a->kernel), ops[i].addr, ops[i].bytes);
    return st != LMS_OK ? st : INNER(c, kernel, s, a);
}

/* ---- the observer ------------------------------------------------------------- */

/* What the layer below reports names its own stream: the caller is told the
 * handle of it (NULL if the stream is gone from the table: destroyed while
 * its last work ran). A stream slot is looked up by a scan: an observer is
 * for tracing, and a process has few streams. */
static void check_observe(void *ctx, const dev_work_t *inner)
{
    check_t *c = ctx;
    dev_work_t work = *inner;
    work.stream = NULL;
    pthread_mutex_lock(&c->lock);
    dev_observer_t fn = c->observer;
    void *fn_ctx = c->observer_ctx;
    for (size_t i = 0; i < c->streams.n; i++)
        if (c->streams.slots[i].used &&
            c->streams.slots[i].inner == (uint64_t)(uintptr_t)inner->stream) {
            work.stream = (dev_stream_t *)(uintptr_t)handle_of(c, &c->streams, i);
            break;
        }
    pthread_mutex_unlock(&c->lock);
    if (fn != NULL)
        fn(fn_ctx, &work);
}

/* The caller's observer is stored first (calls in progress pick it up under
 * the lock), then the layer below is told: setting it again there waits for
 * the calls of the old one in progress, which keeps set_observer's promise. */
static lms_status_t check_set_observer(void *self, dev_observer_t fn, void *ctx)
{
    check_t *c = self;
    pthread_mutex_lock(&c->lock);
    dev_observer_t old = c->observer;
    void *old_ctx = c->observer_ctx;
    pthread_mutex_unlock(&c->lock);
    void *inner_ctx = fn != NULL ? (void *)c : NULL;
    dev_observer_t inner = fn != NULL ? check_observe : NULL;
    if (old != NULL) {
        /* The layer below reports the old observer's last work (cuda waits
         * for it) through check_observe while it still finds the old one. */
        lms_status_t st = INNER(c, set_observer, inner, inner_ctx);
        if (st == LMS_OK) {
            pthread_mutex_lock(&c->lock);
            c->observer = fn;
            c->observer_ctx = fn != NULL ? ctx : NULL;
            pthread_mutex_unlock(&c->lock);
        }
        return st;
    }
    pthread_mutex_lock(&c->lock);
    c->observer = fn;
    c->observer_ctx = fn != NULL ? ctx : NULL;
    pthread_mutex_unlock(&c->lock);
    lms_status_t st = INNER(c, set_observer, inner, inner_ctx);
    if (st != LMS_OK) {
        pthread_mutex_lock(&c->lock);
        c->observer = old;
        c->observer_ctx = old_ctx;
        pthread_mutex_unlock(&c->lock);
    }
    return st;
}

/* ---- teardown ---------------------------------------------------------------- */

void dev_check_live(void *self, dev_live_t *out)
{
    check_t *c = self;
    pthread_mutex_lock(&c->lock);
    *out = (dev_live_t){
        .reservations = c->nres,
        .blocks = c->blocks.live,
        .mapped_blocks = c->mapped_blocks,
        .host_ranges = c->nhost,
        .streams = c->streams.live,
        .events = c->events.live,
    };
    pthread_mutex_unlock(&c->lock);
}

static void log_teardown(lms_status_t st)
{
    if (st != LMS_OK)
        base_log(BASE_LOG_ERROR, "closing the device: %s", lms_last_error());
}

/* Destroys everything still alive, in the order that keeps the hard rule:
 * streams (their queued work still runs), events, mappings, then memory. The
 * caller is closing and cannot retry, so a failure below is logged and the
 * object is dropped from the bookkeeping all the same. */
void dev_check_destroy_all(void *self)
{
    check_t *c = self;
    pthread_mutex_lock(&c->lock);
    for (size_t i = 0; i < c->streams.n; i++)
        if (c->streams.slots[i].used) {
            log_teardown(INNER(c, stream_destroy, (dev_stream_t *)(uintptr_t)c->streams.slots[i].inner));
            table_remove(&c->streams, &c->streams.slots[i]);
        }
    for (size_t i = 0; i < c->events.n; i++)
        if (c->events.slots[i].used) {
            log_teardown(INNER(c, event_destroy, (dev_event_t *)(uintptr_t)c->events.slots[i].inner));
            table_remove(&c->events, &c->events.slots[i]);
        }
    for (; c->nres > 0; c->nres--) {
        reservation_t *r = &c->res[c->nres - 1];
        for (size_t g = 0; g < r->size / c->granularity; g++)
            if (r->block[g] != 0)
                log_teardown(INNER(c, unmap, r->base + g * c->granularity, c->granularity));
        log_teardown(INNER(c, va_free, r->base, r->size));
        base_meta_free(r->block);
    }
    c->mapped_blocks = 0;
    for (size_t i = 0; i < c->blocks.n; i++)
        if (c->blocks.slots[i].used) {
            log_teardown(INNER(c, block_release, c->blocks.slots[i].inner));
            table_remove(&c->blocks, &c->blocks.slots[i]);
        }
    for (; c->nhost > 0; c->nhost--)
        log_teardown(INNER(c, host_unregister, c->host[c->nhost - 1].ptr));
    pthread_mutex_unlock(&c->lock);
}

static void check_close(void *self)
{
    check_t *c = self;
    c->inner.ops->close(c->inner.self);
    base_meta_free(c->res);
    base_meta_free(c->blocks.slots);
    base_meta_free(c->streams.slots);
    base_meta_free(c->events.slots);
    base_meta_free(c->host);
    pthread_mutex_destroy(&c->lock);
    base_meta_free(c);
}

static const dev_ops_t check_ops = {
    .name = "check",
    .close = check_close,
    .mem_info = check_mem_info,
    .va_reserve = check_va_reserve,
    .va_free = check_va_free,
    .block_create = check_block_create,
    .block_release = check_block_release,
    .map = check_map,
    .set_access = check_set_access,
    .unmap = check_unmap,
    .host_register = check_host_register,
    .host_unregister = check_host_unregister,
    .stream_create = check_stream_create,
    .stream_adopt = check_stream_adopt,
    .stream_destroy = check_stream_destroy,
    .stream_synchronize = check_stream_synchronize,
    .event_create = check_event_create,
    .event_destroy = check_event_destroy,
    .event_record = check_event_record,
    .event_query = check_event_query,
    .event_synchronize = check_event_synchronize,
    .stream_wait_event = check_stream_wait_event,
    .copy_h2d = check_copy_h2d,
    .copy_d2h = check_copy_d2h,
    .copy_d2d = check_copy_d2d,
    .host_func = check_host_func,
    .fill = check_fill,
    .checksum = check_checksum,
    .axpy = check_axpy,
    .kernel = check_kernel,
    .set_observer = check_set_observer,
};

lms_status_t dev_check_open(dev_layer_t inner, const dev_info_t *info, dev_layer_t *out)
{
    check_t *c = base_meta_calloc(1, sizeof *c);
    if (c == NULL)
        return base_fail(LMS_ERR_OUT_OF_MEMORY, "dev_open: no host memory for the check layer");
    c->inner = inner;
    c->granularity = info->granularity;
    c->tag = (uint64_t)(atomic_fetch_add(&next_tag, 1) % 0xffff + 1) << 48;
    c->blocks = (table_t){.kind = KIND_BLOCK, .free_head = NO_SLOT};
    c->streams = (table_t){.kind = KIND_STREAM, .free_head = NO_SLOT};
    c->events = (table_t){.kind = KIND_EVENT, .free_head = NO_SLOT};
    pthread_mutex_init(&c->lock, NULL);
    *out = (dev_layer_t){&check_ops, c};
    return LMS_OK;
}
