/*
 * device/check.c — the check layer: the outermost layer of every device stack.
 * It validates every argument of every op and keeps enough bookkeeping that
 * misuse (a double unmap, a block released while mapped, a stream of another
 * device, a copy outside the device's reservations) is a clean LMS_ERR_INVALID
 * with a message on every backend, instead of a crash on one and silent
 * corruption on another. Below it, backends may assume valid arguments.
 *
 * Owns:
 *   reservations  base, size, and per block-sized granule of VA the block
 *                 mapped there (a check handle, 0 = none) and whether access
 *                 was set;
 *   blocks        a table of slots; a handle is (layer tag << 48) |
 *                 (generation << 32) | (slot + 1), so a handle of another
 *                 device or a released one is recognised without dereferencing;
 *   streams, events  wrapper structs (magic, owner, inner object) on two lists;
 *   host ranges   registered with host_register.
 * Invariant: the bookkeeping changes only after the layer below succeeded, so
 * a failure anywhere below leaves every object as it was.
 *
 * Lock: check.lock guards all of the above except the immutable fields of a
 * stream or event (magic, owner, inner), which ops read without it. The VMM
 * ops hold the lock across the call below (map, unmap and friends do not wait
 * for streams, and no host function takes this lock); copies and kernels take
 * it only to check that their device range lies in a reservation.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "device/layer.h"

#define STREAM_MAGIC 0x6c6d7353u /* "lmsS" */
#define EVENT_MAGIC 0x6c6d7345u  /* "lmsE" */

typedef struct reservation {
    dev_addr_t base;
    size_t size;
    dev_block_t *block; /* per granule: the check handle mapped there, 0 = none */
    bool *access;       /* per granule: set_access was done since it was mapped */
} reservation_t;

typedef struct block_slot {
    dev_block_t inner; /* 0: the slot is free */
    uint32_t generation;
    uint32_t maps;     /* VAs it is mapped at */
    uint32_t next_free;
} block_slot_t;

typedef struct node {
    struct node *prev, *next;
} node_t;

typedef struct check_stream {
    node_t node; /* first: a node_t * is a check_stream_t * */
    uint32_t magic;
    struct check *owner;
    dev_stream_t *inner;
} check_stream_t;

typedef struct check_event {
    node_t node;
    uint32_t magic;
    struct check *owner;
    dev_event_t *inner;
} check_event_t;

typedef struct host_range {
    char *ptr;
    size_t size;
} host_range_t;

typedef struct check {
    dev_layer_t inner;
    size_t granularity;
    uint64_t tag; /* this layer's bits 48..63 of every block handle */
    pthread_mutex_t lock;
    reservation_t *res;
    size_t nres, capres;
    block_slot_t *slots;
    uint32_t nslots, capslots, free_slot; /* free_slot: head of the free list, UINT32_MAX = none */
    host_range_t *host;
    size_t nhost, caphost;
    node_t streams, events; /* circular lists of the live wrappers */
    dev_live_t live;
} check_t;

static atomic_uint next_tag = 1;

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
    void *p = realloc(*array, cap2 * elem);
    if (p == NULL)
        return false;
    *array = p;
    *cap = cap2;
    return true;
}

static void list_init(node_t *head) { head->prev = head->next = head; }
static void list_add(node_t *head, node_t *n)
{
    n->next = head->next;
    n->prev = head;
    head->next->prev = n;
    head->next = n;
}
static void list_del(node_t *n)
{
    n->prev->next = n->next;
    n->next->prev = n->prev;
}

/* ---- lookups (caller holds the lock) ----------------------------------------- */

/* The reservation holding all of [va, va+size), or NULL. */
static reservation_t *find_reservation(check_t *c, dev_addr_t va, size_t size)
{
    for (size_t i = 0; i < c->nres; i++) {
        reservation_t *r = &c->res[i];
        if (va >= r->base && va - r->base < r->size && size <= r->size - (va - r->base))
            return r;
    }
    return NULL;
}

static dev_block_t block_handle(const check_t *c, uint32_t slot)
{
    return c->tag | (uint64_t)(c->slots[slot].generation & 0xffff) << 32 | (slot + 1);
}

static block_slot_t *find_block(check_t *c, dev_block_t handle)
{
    uint32_t slot = (uint32_t)handle - 1;
    if ((handle & ~(uint64_t)0 << 48) != c->tag || slot >= c->nslots)
        return NULL;
    block_slot_t *b = &c->slots[slot];
    if (b->inner == 0 || (b->generation & 0xffff) != (handle >> 32 & 0xffff))
        return NULL;
    return b;
}

/* Checks that [va, va+size) is a nonzero, aligned run of granules inside one
 * reservation; on success *r and *first name it. */
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

static lms_status_t check_stream(check_t *c, const char *op, dev_stream_t *stream)
{
    const check_stream_t *s = (const check_stream_t *)stream;
    if (s == NULL)
        return invalid(op, "stream is NULL");
    if (s->magic != STREAM_MAGIC)
        return invalid(op, "not a stream (destroyed, or never created)");
    if (s->owner != c)
        return invalid(op, "the stream belongs to another device");
    return LMS_OK;
}

static lms_status_t check_event(check_t *c, const char *op, dev_event_t *event)
{
    const check_event_t *e = (const check_event_t *)event;
    if (e == NULL)
        return invalid(op, "event is NULL");
    if (e->magic != EVENT_MAGIC)
        return invalid(op, "not an event (destroyed, or never created)");
    if (e->owner != c)
        return invalid(op, "the event belongs to another device");
    return LMS_OK;
}

static dev_stream_t *inner_stream(dev_stream_t *s) { return ((check_stream_t *)s)->inner; }
static dev_event_t *inner_event(dev_event_t *e) { return ((check_event_t *)e)->inner; }

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
    reservation_t r = {.size = size, .block = calloc(n, sizeof *r.block),
                       .access = calloc(n, sizeof *r.access)};
    lms_status_t st = LMS_OK;
    if (r.block == NULL || r.access == NULL) {
        st = base_fail(LMS_ERR_OUT_OF_MEMORY, "va_reserve: no host memory to track %zu blocks", n);
        goto fail;
    }
    st = INNER(c, va_reserve, size, &r.base);
    if (st != LMS_OK)
        goto fail;
    pthread_mutex_lock(&c->lock);
    if (!grow((void **)&c->res, &c->capres, c->nres + 1, sizeof *c->res)) {
        pthread_mutex_unlock(&c->lock);
        INNER(c, va_free, r.base, size);
        st = base_fail(LMS_ERR_OUT_OF_MEMORY, "va_reserve: no host memory for the reservation");
        goto fail;
    }
    c->res[c->nres++] = r;
    c->live.reservations++;
    pthread_mutex_unlock(&c->lock);
    *base = r.base;
    return LMS_OK;
fail:
    free(r.access);
    free(r.block);
    return st;
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
    free(r->block);
    free(r->access);
    c->res[i] = c->res[--c->nres];
    c->live.reservations--;
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
    uint32_t slot = c->free_slot;
    if (slot == UINT32_MAX) {
        size_t cap = c->capslots;
        if (c->nslots == UINT32_MAX - 1 ||
            !grow((void **)&c->slots, &cap, (size_t)c->nslots + 1, sizeof *c->slots)) {
            pthread_mutex_unlock(&c->lock);
            INNER(c, block_release, inner);
            return base_fail(LMS_ERR_OUT_OF_MEMORY, "block_create: no host memory to track it");
        }
        c->capslots = (uint32_t)cap;
        slot = c->nslots++;
        c->slots[slot] = (block_slot_t){0};
    } else {
        c->free_slot = c->slots[slot].next_free;
    }
    block_slot_t *b = &c->slots[slot];
    b->inner = inner;
    b->maps = 0;
    c->live.blocks++;
    *block = block_handle(c, slot);
    pthread_mutex_unlock(&c->lock);
    return LMS_OK;
}

static lms_status_t check_block_release(void *self, dev_block_t block)
{
    check_t *c = self;
    pthread_mutex_lock(&c->lock);
    lms_status_t st = LMS_OK;
    block_slot_t *b = find_block(c, block);
    if (b == NULL) {
        st = base_fail(LMS_ERR_INVALID,
                       "block_release: 0x%llx is not a live block of this device "
                       "(released already, or another device's)",
                       (unsigned long long)block);
        goto out;
    }
    if (b->maps != 0) {
        st = base_fail(LMS_ERR_INVALID, "block_release: the block is still mapped at %u VAs",
                       b->maps);
        goto out;
    }
    st = INNER(c, block_release, b->inner);
    if (st != LMS_OK)
        goto out;
    b->inner = 0;
    b->generation++;
    b->next_free = c->free_slot;
    c->free_slot = (uint32_t)(b - c->slots);
    c->live.blocks--;
out:
    pthread_mutex_unlock(&c->lock);
    return st;
}

static lms_status_t check_map(void *self, dev_addr_t va, dev_block_t block)
{
    check_t *c = self;
    pthread_mutex_lock(&c->lock);
    reservation_t *r;
    size_t g;
    lms_status_t st = check_run(c, "map", va, c->granularity, &r, &g);
    if (st != LMS_OK)
        goto out;
    block_slot_t *b = find_block(c, block);
    if (b == NULL) {
        st = base_fail(LMS_ERR_INVALID, "map: 0x%llx is not a live block of this device",
                       (unsigned long long)block);
        goto out;
    }
    if (r->block[g] != 0) {
        st = base_fail(LMS_ERR_INVALID, "map: 0x%llx is already mapped; unmap it first",
                       (unsigned long long)va);
        goto out;
    }
    st = INNER(c, map, va, b->inner);
    if (st != LMS_OK)
        goto out;
    r->block[g] = block;
    r->access[g] = false;
    b->maps++;
    c->live.mapped_blocks++;
out:
    pthread_mutex_unlock(&c->lock);
    return st;
}

/* For set_access and unmap: every granule of the run must be mapped. */
static lms_status_t check_all_mapped(check_t *c, const char *op, reservation_t *r, size_t first,
                                     size_t n)
{
    for (size_t g = first; g < first + n; g++)
        if (r->block[g] == 0)
            return base_fail(LMS_ERR_INVALID, "%s: 0x%llx is not mapped", op,
                             (unsigned long long)(r->base + g * c->granularity));
    return LMS_OK;
}

static lms_status_t check_set_access(void *self, dev_addr_t va, size_t size)
{
    check_t *c = self;
    pthread_mutex_lock(&c->lock);
    reservation_t *r;
    size_t first;
    lms_status_t st = check_run(c, "set_access", va, size, &r, &first);
    size_t n = size / c->granularity;
    if (st == LMS_OK)
        st = check_all_mapped(c, "set_access", r, first, n);
    if (st == LMS_OK)
        st = INNER(c, set_access, va, size);
    if (st == LMS_OK)
        memset(&r->access[first], true, n * sizeof *r->access);
    pthread_mutex_unlock(&c->lock);
    return st;
}

static lms_status_t check_unmap(void *self, dev_addr_t va, size_t size)
{
    check_t *c = self;
    pthread_mutex_lock(&c->lock);
    reservation_t *r;
    size_t first;
    lms_status_t st = check_run(c, "unmap", va, size, &r, &first);
    size_t n = size / c->granularity;
    if (st == LMS_OK)
        st = check_all_mapped(c, "unmap", r, first, n);
    if (st == LMS_OK)
        st = INNER(c, unmap, va, size);
    if (st == LMS_OK) {
        for (size_t g = first; g < first + n; g++) {
            find_block(c, r->block[g])->maps--;
            r->block[g] = 0;
            r->access[g] = false;
        }
        c->live.mapped_blocks -= n;
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
    c->live.host_ranges++;
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
    c->live.host_ranges--;
out:
    pthread_mutex_unlock(&c->lock);
    return st;
}

/* ---- streams and events ------------------------------------------------------ */

static lms_status_t check_stream_create(void *self, dev_priority_t priority, dev_stream_t **out)
{
    check_t *c = self;
    if (out == NULL)
        return invalid("stream_create", "NULL output");
    if (priority != DEV_PRIORITY_NORMAL && priority != DEV_PRIORITY_HIGH)
        return invalid("stream_create", "unknown priority");
    check_stream_t *s = calloc(1, sizeof *s);
    if (s == NULL)
        return base_fail(LMS_ERR_OUT_OF_MEMORY, "stream_create: no host memory");
    lms_status_t st = INNER(c, stream_create, priority, &s->inner);
    if (st != LMS_OK) {
        free(s);
        return st;
    }
    s->magic = STREAM_MAGIC;
    s->owner = c;
    pthread_mutex_lock(&c->lock);
    list_add(&c->streams, &s->node);
    c->live.streams++;
    pthread_mutex_unlock(&c->lock);
    *out = (dev_stream_t *)s;
    return LMS_OK;
}

static lms_status_t check_stream_destroy(void *self, dev_stream_t *stream)
{
    check_t *c = self;
    lms_status_t st = check_stream(c, "stream_destroy", stream);
    if (st == LMS_OK)
        st = INNER(c, stream_destroy, inner_stream(stream));
    if (st != LMS_OK)
        return st;
    check_stream_t *s = (check_stream_t *)stream;
    pthread_mutex_lock(&c->lock);
    list_del(&s->node);
    c->live.streams--;
    pthread_mutex_unlock(&c->lock);
    s->magic = 0;
    free(s);
    return LMS_OK;
}

static lms_status_t check_stream_synchronize(void *self, dev_stream_t *stream)
{
    check_t *c = self;
    lms_status_t st = check_stream(c, "stream_synchronize", stream);
    return st != LMS_OK ? st : INNER(c, stream_synchronize, inner_stream(stream));
}

static lms_status_t check_event_create(void *self, dev_event_t **out)
{
    check_t *c = self;
    if (out == NULL)
        return invalid("event_create", "NULL output");
    check_event_t *e = calloc(1, sizeof *e);
    if (e == NULL)
        return base_fail(LMS_ERR_OUT_OF_MEMORY, "event_create: no host memory");
    lms_status_t st = INNER(c, event_create, &e->inner);
    if (st != LMS_OK) {
        free(e);
        return st;
    }
    e->magic = EVENT_MAGIC;
    e->owner = c;
    pthread_mutex_lock(&c->lock);
    list_add(&c->events, &e->node);
    c->live.events++;
    pthread_mutex_unlock(&c->lock);
    *out = (dev_event_t *)e;
    return LMS_OK;
}

static lms_status_t check_event_destroy(void *self, dev_event_t *event)
{
    check_t *c = self;
    lms_status_t st = check_event(c, "event_destroy", event);
    if (st == LMS_OK)
        st = INNER(c, event_destroy, inner_event(event));
    if (st != LMS_OK)
        return st;
    check_event_t *e = (check_event_t *)event;
    pthread_mutex_lock(&c->lock);
    list_del(&e->node);
    c->live.events--;
    pthread_mutex_unlock(&c->lock);
    e->magic = 0;
    free(e);
    return LMS_OK;
}

static lms_status_t check_event_record(void *self, dev_event_t *event, dev_stream_t *stream)
{
    check_t *c = self;
    lms_status_t st = check_event(c, "event_record", event);
    if (st == LMS_OK)
        st = check_stream(c, "event_record", stream);
    return st != LMS_OK ? st : INNER(c, event_record, inner_event(event), inner_stream(stream));
}

static lms_status_t check_event_query(void *self, dev_event_t *event)
{
    check_t *c = self;
    lms_status_t st = check_event(c, "event_query", event);
    return st != LMS_OK ? st : INNER(c, event_query, inner_event(event));
}

static lms_status_t check_event_synchronize(void *self, dev_event_t *event)
{
    check_t *c = self;
    lms_status_t st = check_event(c, "event_synchronize", event);
    return st != LMS_OK ? st : INNER(c, event_synchronize, inner_event(event));
}

static lms_status_t check_stream_wait_event(void *self, dev_stream_t *stream, dev_event_t *event)
{
    check_t *c = self;
    lms_status_t st = check_stream(c, "stream_wait_event", stream);
    if (st == LMS_OK)
        st = check_event(c, "stream_wait_event", event);
    return st != LMS_OK ? st
                        : INNER(c, stream_wait_event, inner_stream(stream), inner_event(event));
}

/* ---- work on streams ----------------------------------------------------------- */

static lms_status_t check_copy_h2d(void *self, dev_stream_t *s, dev_addr_t dst, const void *src,
                                   size_t n)
{
    check_t *c = self;
    lms_status_t st = check_stream(c, "copy_h2d", s);
    if (st == LMS_OK)
        st = check_device_range(c, "copy_h2d", dst, n);
    if (st == LMS_OK)
        st = check_host_range("copy_h2d", src, n);
    return st != LMS_OK ? st : INNER(c, copy_h2d, inner_stream(s), dst, src, n);
}

static lms_status_t check_copy_d2h(void *self, dev_stream_t *s, void *dst, dev_addr_t src, size_t n)
{
    check_t *c = self;
    lms_status_t st = check_stream(c, "copy_d2h", s);
    if (st == LMS_OK)
        st = check_device_range(c, "copy_d2h", src, n);
    if (st == LMS_OK)
        st = check_host_range("copy_d2h", dst, n);
    return st != LMS_OK ? st : INNER(c, copy_d2h, inner_stream(s), dst, src, n);
}

static lms_status_t check_copy_d2d(void *self, dev_stream_t *s, dev_addr_t dst, dev_addr_t src,
                                   size_t n)
{
    check_t *c = self;
    lms_status_t st = check_stream(c, "copy_d2d", s);
    if (st == LMS_OK)
        st = check_device_range(c, "copy_d2d", dst, n);
    if (st == LMS_OK)
        st = check_device_range(c, "copy_d2d", src, n);
    return st != LMS_OK ? st : INNER(c, copy_d2d, inner_stream(s), dst, src, n);
}

static lms_status_t check_host_func(void *self, dev_stream_t *s, dev_host_fn_t fn, void *arg)
{
    check_t *c = self;
    lms_status_t st = check_stream(c, "host_func", s);
    if (st == LMS_OK && fn == NULL)
        st = invalid("host_func", "function is NULL");
    return st != LMS_OK ? st : INNER(c, host_func, inner_stream(s), fn, arg);
}

static lms_status_t check_fill(void *self, dev_stream_t *s, dev_addr_t dst, size_t n, uint64_t seed)
{
    check_t *c = self;
    lms_status_t st = check_stream(c, "fill", s);
    if (st == LMS_OK)
        st = check_device_range(c, "fill", dst, n);
    return st != LMS_OK ? st : INNER(c, fill, inner_stream(s), dst, n, seed);
}

static lms_status_t check_checksum(void *self, dev_stream_t *s, dev_addr_t src, size_t n,
                                   uint64_t *out)
{
    check_t *c = self;
    lms_status_t st = check_stream(c, "checksum", s);
    if (st == LMS_OK)
        st = check_device_range(c, "checksum", src, n);
    if (st == LMS_OK && out == NULL)
        st = invalid("checksum", "NULL output");
    return st != LMS_OK ? st : INNER(c, checksum, inner_stream(s), src, n, out);
}

static lms_status_t check_axpy(void *self, dev_stream_t *s, size_t n, float a, dev_addr_t x,
                               dev_addr_t y)
{
    check_t *c = self;
    lms_status_t st = check_stream(c, "axpy", s);
    if (st == LMS_OK && (n > SIZE_MAX / sizeof(float) || x % sizeof(float) || y % sizeof(float)))
        st = invalid("axpy", "x and y must be float-aligned and n * 4 must not overflow");
    if (st == LMS_OK)
        st = check_device_range(c, "axpy", x, n * sizeof(float));
    if (st == LMS_OK)
        st = check_device_range(c, "axpy", y, n * sizeof(float));
    return st != LMS_OK ? st : INNER(c, axpy, inner_stream(s), n, a, x, y);
}

/* ---- teardown ---------------------------------------------------------------- */

void dev_check_live(void *self, dev_live_t *out)
{
    check_t *c = self;
    pthread_mutex_lock(&c->lock);
    *out = c->live;
    pthread_mutex_unlock(&c->lock);
}

/* Destroys everything still alive, in the order that keeps the hard rule:
 * drain streams first, then unmap, then release memory. Failures below are
 * reported in the log, since the caller is closing and cannot retry. */
void dev_check_destroy_all(void *self)
{
    check_t *c = self;
    while (c->streams.next != &c->streams)
        if (check_stream_destroy(c, (dev_stream_t *)c->streams.next) != LMS_OK) {
            base_log(BASE_LOG_ERROR, "close: %s", lms_last_error());
            list_del(c->streams.next);
        }
    while (c->events.next != &c->events)
        if (check_event_destroy(c, (dev_event_t *)c->events.next) != LMS_OK) {
            base_log(BASE_LOG_ERROR, "close: %s", lms_last_error());
            list_del(c->events.next);
        }
    while (c->nres > 0) {
        reservation_t *r = &c->res[c->nres - 1];
        for (size_t g = 0; g < r->size / c->granularity; g++)
            if (r->block[g] != 0 && check_unmap(c, r->base + g * c->granularity, c->granularity))
                base_log(BASE_LOG_ERROR, "close: %s", lms_last_error());
        if (check_va_free(c, r->base, r->size) != LMS_OK) {
            base_log(BASE_LOG_ERROR, "close: %s", lms_last_error());
            free(r->block);
            free(r->access);
            c->nres--;
        }
    }
    for (uint32_t i = 0; i < c->nslots; i++)
        if (c->slots[i].inner != 0 &&
            check_block_release(c, block_handle(c, i)) != LMS_OK)
            base_log(BASE_LOG_ERROR, "close: %s", lms_last_error());
    while (c->nhost > 0)
        if (check_host_unregister(c, c->host[c->nhost - 1].ptr) != LMS_OK) {
            base_log(BASE_LOG_ERROR, "close: %s", lms_last_error());
            c->nhost--;
        }
}

static void check_close(void *self)
{
    check_t *c = self;
    c->inner.ops->close(c->inner.self);
    free(c->res);
    free(c->slots);
    free(c->host);
    pthread_mutex_destroy(&c->lock);
    free(c);
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
};

lms_status_t dev_check_open(dev_layer_t inner, const dev_info_t *info, dev_layer_t *out)
{
    check_t *c = calloc(1, sizeof *c);
    if (c == NULL)
        return base_fail(LMS_ERR_OUT_OF_MEMORY, "dev_open: no host memory for the check layer");
    c->inner = inner;
    c->granularity = info->granularity;
    c->tag = (uint64_t)(atomic_fetch_add(&next_tag, 1) % 0xffff + 1) << 48; /* never 0 */
    c->free_slot = UINT32_MAX;
    pthread_mutex_init(&c->lock, NULL);
    list_init(&c->streams);
    list_init(&c->events);
    *out = (dev_layer_t){&check_ops, c};
    return LMS_OK;
}
