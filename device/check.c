/*
 * device/check.c — the check layer: the outermost layer of every device stack.
 * This file: memory, mappings and host ranges, teardown; check_work.c:
 * streams, events, the work queued on them and the observer.
 * It validates every argument of every op and keeps enough bookkeeping that
 * misuse (a double unmap, a block released while mapped, a stream destroyed
 * or of another device, a copy outside the device's reservations) is a clean
 * LMS_ERR_INVALID with a message on every backend, instead of a crash on one
 * and silent corruption on another. Below it, backends may assume valid
 * arguments.
 *
 * Owns:
 *   reservations  base, size, and per granule of VA the block mapped there;
 *   four tables   blocks, host blocks, streams and events, of the objects the
 *                 layer below made. What the caller holds is a handle, never
 *                 a pointer to memory: see Note [Handles] in handle.c. A host
 *                 block is no device memory: it is counted apart, maps where
 *                 a block maps, and is the only memory set_access_host takes;
 *                 with full validation, a reservation's host blocks opened to
 *                 the CPU are the only part of it a copy takes as host memory,
 *                 and one copy's range stays in one of them unless the
 *                 device says it may span them (info.host_block_runs);
 *   host ranges   registered with host_register;
 *   the observer  set_observer's: the layer below reports its own streams,
 *                 and the observer is told the handles that name them.
 * Invariant: the bookkeeping changes only after the layer below succeeded, so
 * a failure anywhere below leaves every object as it was.
 *
 * Note [Two levels of checking]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * Handles are always checked: a destroyed, foreign or made-up block, stream
 * or event is LMS_ERR_INVALID in every build, and costs a lookup with no
 * lock (Note [Handles]). So are the arguments that need no state (NULL, 0,
 * alignment, wrapping). What needs the bookkeeping (a copy inside a
 * reservation of this device, a map of a VA already mapped, an unmap or
 * set_access of a VA not mapped, a block released while mapped) is checked
 * only with full validation (check.full:
 * dev_config_t.checks, LMS_DEVICE_CHECKS; on in Debug and sanitizer builds
 * and in the test suites). Full validation must hold the lock across the
 * call below, or two threads could both pass its check; on an H100 a map,
 * unmap or set_access costs 30-40 us of driver time, which the lock would
 * serialize across lms's threads. Without it, the bookkeeping that dev_close
 * and dev_live need is still kept, under the lock taken after the call below
 * has returned, and misuse that only the bookkeeping shows is the layer
 * below's to reject (sim and cuda reject most of it, as the driver does).
 *
 * Locks: check.lock guards the reservations, the host ranges, the blocks'
 * map counts and the observer. Each handle table has a lock of its own for
 * adding and removing (taken inside check.lock where both are held) and none
 * for lookups. With full validation, ops that create, destroy, map or unmap
 * hold check.lock across the call below (none of those waits for a stream,
 * and no host function takes this lock); without it, only va_reserve,
 * va_free, host_register and host_unregister do, which are rare and never
 * on the swap path. Ops that enqueue work or wait take it only to look
 * their ranges up, with full validation, so a synchronize never blocks
 * others. The observer's calls come from the layer below (a sim worker, or
 * a cuda op in progress) and take the lock to find the handle, so
 * set_observer must not hold it across the call below, which waits for
 * those calls.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "base/lockorder.h"
#include "device/check.h"

static atomic_uint next_tag;

lms_status_t check_invalid(const char *op, const char *why)
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

/* Looks up a stream or event handle and returns its inner object. */
lms_status_t check_lookup(handle_table_t *t, const char *op, const void *handle, void **inner)
{
    handle_slot_t *s;
    lms_status_t st = handle_find(t, op, (uint64_t)(uintptr_t)handle, &s);
    if (st == LMS_OK)
        *inner = (void *)(uintptr_t)atomic_load_explicit(&s->inner, memory_order_relaxed);
    return st;
}


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

/* Checks that [va, va+size) is a nonzero, aligned run of granules: what
 * needs no bookkeeping. */
static lms_status_t check_aligned(check_t *c, const char *op, dev_addr_t va, size_t size)
{
    if (size == 0)
        return check_invalid(op, "size is 0");
    if (va % c->granularity != 0 || size % c->granularity != 0)
        return base_fail(LMS_ERR_INVALID,
                         "%s: address 0x%llx and size %zu must be multiples of the granularity %zu",
                         op, (unsigned long long)va, size, c->granularity);
    return LMS_OK;
}

/* The reservation holding the aligned run [va, va+size) in *r, and the index
 * of its first granule in *first; false if none holds it. Caller holds the lock. */
static bool find_run(check_t *c, dev_addr_t va, size_t size, reservation_t **r, size_t *first)
{
    *r = find_reservation(c, va, size);
    if (*r == NULL)
        return false;
    *first = (size_t)(va - (*r)->base) / c->granularity;
    return true;
}

/* check_aligned, and inside one reservation; on success *r and *first name
 * it. Caller holds the lock. */
static lms_status_t check_run(check_t *c, const char *op, dev_addr_t va, size_t size,
                              reservation_t **r, size_t *first)
{
    lms_status_t st = check_aligned(c, op, va, size);
    if (st == LMS_OK && !find_run(c, va, size, r, first))
        st = base_fail(LMS_ERR_INVALID,
                       "%s: [0x%llx, +%zu) is not inside one reservation of this device", op,
                       (unsigned long long)va, size);
    return st;
}

/* A device range [addr, addr+n) for a copy or launch: nonzero, and, with
 * full validation, inside a reservation of this device. */
lms_status_t check_device_range(check_t *c, const char *op, dev_addr_t addr, size_t n)
{
    if (n == 0)
        return check_invalid(op, "size is 0");
    if (addr == 0 || addr + n < addr)
        return base_fail(LMS_ERR_INVALID, "%s: bad device range [0x%llx, +%zu)", op,
                         (unsigned long long)addr, n);
    if (!c->full)
        return LMS_OK;
    lo_lock(&c->lock, LO_DEV_CHECK);
    bool inside = find_reservation(c, addr, n) != NULL;
    lo_unlock(&c->lock, LO_DEV_CHECK);
    if (!inside)
        return base_fail(LMS_ERR_INVALID,
                         "%s: [0x%llx, +%zu) is not inside a reservation of this device", op,
                         (unsigned long long)addr, n);
    return LMS_OK;
}

lms_status_t check_host_range(const char *op, const void *p, size_t n)
{
    if (p == NULL)
        return check_invalid(op, "host pointer is NULL");
    if ((uintptr_t)p + n < (uintptr_t)p)
        return check_invalid(op, "host range wraps around");
    return LMS_OK;
}

/* The first granule of [va, va+n) that is not a host block open to the CPU,
 * as an address; 0 if every one is. Caller holds the lock. */
static dev_addr_t first_closed_granule(check_t *c, const reservation_t *r, dev_addr_t va, size_t n)
{
    size_t last = (size_t)(va + n - 1 - r->base) / c->granularity;
    for (size_t g = (size_t)(va - r->base) / c->granularity; g <= last; g++)
        if (!r->cpu[g])
            return r->base + g * c->granularity;
    return 0;
}

lms_status_t check_copy_host(check_t *c, const char *op, const void *p, size_t n)
{
    lms_status_t st = check_host_range(op, p, n);
    if (st != LMS_OK || !c->full || n == 0)
        return st;
    dev_addr_t a = (dev_addr_t)(uintptr_t)p, closed = 0;
    lo_lock(&c->lock, LO_DEV_CHECK);
    bool overlaps = false;
    for (size_t i = 0; i < c->nres && !overlaps; i++)
        overlaps = a < c->res[i].base + c->res[i].size && c->res[i].base < a + n;
    reservation_t *r = overlaps ? find_reservation(c, a, n) : NULL;
    if (r != NULL)
        closed = first_closed_granule(c, r, a, n);
    lo_unlock(&c->lock, LO_DEV_CHECK);
    if (overlaps && r == NULL)
        return base_fail(LMS_ERR_INVALID,
                         "%s: host range [%p, +%zu) runs over the edge of a reservation of this "
                         "device", op, p, n);
    if (closed != 0)
        return base_fail(LMS_ERR_INVALID,
                         "%s: host range [%p, +%zu) is in a reservation of this device, and "
                         "0x%llx there is no host block opened to the CPU by set_access_host",
                         op, p, n, (unsigned long long)closed);
    if (r != NULL && !c->host_runs && (a - r->base) / c->granularity !=
                                          (a + n - 1 - r->base) / c->granularity)
        return base_fail(LMS_ERR_INVALID,
                         "%s: host range [%p, +%zu) spans host blocks, and this device does not "
                         "copy across them (info.host_block_runs)", op, p, n);
    return LMS_OK;
}

/* ---- memory ---------------------------------------------------------------- */

static lms_status_t check_mem_info(void *self, size_t *free_bytes, size_t *total_bytes)
{
    check_t *c = self;
    if (free_bytes == NULL || total_bytes == NULL)
        return check_invalid("mem_info", "NULL output");
    return INNER(c, mem_info, free_bytes, total_bytes);
}

static lms_status_t check_va_reserve(void *self, size_t size, dev_addr_t *base)
{
    check_t *c = self;
    if (base == NULL)
        return check_invalid("va_reserve", "NULL output");
    if (size == 0 || size % c->granularity != 0)
        return base_fail(LMS_ERR_INVALID,
                         "va_reserve: size %zu must be a nonzero multiple of the granularity %zu",
                         size, c->granularity);
    size_t n = size / c->granularity;
    reservation_t r = {.size = size, .block = base_meta_calloc(n, sizeof *r.block),
                       .cpu = base_meta_calloc(n, sizeof *r.cpu)};
    lms_status_t st = LMS_OK;
    if (r.block == NULL || r.cpu == NULL)
        st = base_fail(LMS_ERR_OUT_OF_MEMORY, "va_reserve: no host memory to track %zu blocks", n);
    if (st == LMS_OK)
        st = INNER(c, va_reserve, size, &r.base);
    if (st != LMS_OK) {
        base_meta_free(r.block);
        base_meta_free(r.cpu);
        return st;
    }
    lo_lock(&c->lock, LO_DEV_CHECK);
    if (!grow((void **)&c->res, &c->capres, c->nres + 1, sizeof *c->res)) {
        lo_unlock(&c->lock, LO_DEV_CHECK);
        INNER(c, va_free, r.base, size);
        base_meta_free(r.block);
        base_meta_free(r.cpu);
        return base_fail(LMS_ERR_OUT_OF_MEMORY, "va_reserve: no host memory for the reservation");
    }
    c->res[c->nres++] = r;
    lo_unlock(&c->lock, LO_DEV_CHECK);
    *base = r.base;
    return LMS_OK;
}

static lms_status_t check_va_free(void *self, dev_addr_t base, size_t size)
{
    check_t *c = self;
    lo_lock(&c->lock, LO_DEV_CHECK);
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
    base_meta_free(r->cpu);
    c->res[i] = c->res[--c->nres];
out:
    lo_unlock(&c->lock, LO_DEV_CHECK);
    return st;
}

/* Hands out as a handle of t the block the layer below made (st: whether it
 * did), or releases it again. */
static lms_status_t hand_out_block(check_t *c, lms_status_t st, dev_block_t inner,
                                   handle_table_t *t, dev_block_t *block)
{
    if (st != LMS_OK)
        return st;
    st = handle_add(t, inner, block);
    if (st != LMS_OK)
        INNER(c, block_release, inner);
    return st;
}

static lms_status_t check_block_create(void *self, dev_block_t *block)
{
    check_t *c = self;
    if (block == NULL)
        return check_invalid("block_create", "NULL output");
    dev_block_t inner = 0;
    lms_status_t st = INNER(c, block_create, &inner);
    return hand_out_block(c, st, inner, &c->blocks, block);
}

static lms_status_t check_host_block_create(void *self, dev_block_t *block)
{
    check_t *c = self;
    if (block == NULL)
        return check_invalid("host_block_create", "NULL output");
    if (!c->host_ok)
        return base_fail(LMS_ERR_UNSUPPORTED, "host_block_create: this device has no host blocks: %s",
                         c->host_why);
    dev_block_t inner = 0;
    lms_status_t st = INNER(c, host_block_create, &inner);
    return hand_out_block(c, st, inner, &c->host_blocks, block);
}

/* The table of the kind of block the handle says it is: host blocks or
 * blocks (whose lookup then names any other kind as no block). */
static handle_table_t *block_table(check_t *c, dev_block_t block)
{
    return handle_kind_of(block) == HANDLE_HOST_BLOCK ? &c->host_blocks : &c->blocks;
}

static lms_status_t check_block_release(void *self, dev_block_t block)
{
    check_t *c = self;
    handle_slot_t *b;
    handle_table_t *t = block_table(c, block);
    if (!c->full) {
        lms_status_t st = handle_find(t, "block_release", block, &b);
        if (st == LMS_OK)
            st = INNER(c, block_release, atomic_load_explicit(&b->inner, memory_order_relaxed));
        if (st == LMS_OK)
            handle_remove(t, b);
        return st;
    }
    lo_lock(&c->lock, LO_DEV_CHECK);
    lms_status_t st = handle_find(t, "block_release", block, &b);
    if (st == LMS_OK && b->maps != 0)
        st = base_fail(LMS_ERR_INVALID, "block_release: the block is still mapped at %u VAs",
                       b->maps);
    if (st == LMS_OK)
        st = INNER(c, block_release, atomic_load_explicit(&b->inner, memory_order_relaxed));
    if (st == LMS_OK)
        handle_remove(t, b);
    lo_unlock(&c->lock, LO_DEV_CHECK);
    return st;
}

/* The bookkeeping of a map the layer below has made: block (whose slot is
 * b) at granule g of r. Caller holds the lock. */
static void record_map(check_t *c, reservation_t *r, size_t g, dev_block_t block,
                       handle_slot_t *b)
{
    r->block[g] = block;
    b->maps++;
    if (handle_kind_of(block) == HANDLE_HOST_BLOCK)
        c->mapped_host_blocks++;
    else
        c->mapped_blocks++;
}

/* The bookkeeping of an unmap the layer below has made: granules first ..
 * first+n-1 of r. Caller holds the lock. */
static void record_unmap(check_t *c, reservation_t *r, size_t first, size_t n)
{
    for (size_t g = first; g < first + n; g++) {
        handle_slot_t *b;
        if (r->block[g] == 0)
            continue; /* not mapped: without full validation, the layer below let it pass */
        /* Not found only when, without full validation, the block was released
         * while mapped: it counts no mapping any more. */
        handle_table_t *t = block_table(c, r->block[g]);
        if (handle_find(t, "unmap", r->block[g], &b) == LMS_OK)
            b->maps--;
        r->block[g] = 0;
        r->cpu[g] = false;
        if (t == &c->host_blocks)
            c->mapped_host_blocks--;
        else
            c->mapped_blocks--;
    }
}

static lms_status_t check_map(void *self, dev_addr_t va, dev_block_t block)
{
    check_t *c = self;
    reservation_t *r;
    size_t g;
    handle_slot_t *b;
    lms_status_t st;
    if (!c->full) {
        if ((st = check_aligned(c, "map", va, c->granularity)) != LMS_OK ||
            (st = handle_find(block_table(c, block), "map", block, &b)) != LMS_OK ||
            (st = INNER(c, map, va, atomic_load_explicit(&b->inner, memory_order_relaxed))) != LMS_OK)
            return st;
        lo_lock(&c->lock, LO_DEV_CHECK);
        if (find_run(c, va, c->granularity, &r, &g) && r->block[g] == 0)
            record_map(c, r, g, block, b);
        lo_unlock(&c->lock, LO_DEV_CHECK);
        return LMS_OK;
    }
    lo_lock(&c->lock, LO_DEV_CHECK);
    st = check_run(c, "map", va, c->granularity, &r, &g);
    if (st == LMS_OK)
        st = handle_find(block_table(c, block), "map", block, &b);
    if (st == LMS_OK && r->block[g] != 0)
        st = base_fail(LMS_ERR_INVALID, "map: 0x%llx is already mapped; unmap it first",
                       (unsigned long long)va);
    if (st == LMS_OK)
        st = INNER(c, map, va, atomic_load_explicit(&b->inner, memory_order_relaxed));
    if (st == LMS_OK)
        record_map(c, r, g, block, b);
    lo_unlock(&c->lock, LO_DEV_CHECK);
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
    if (!c->full) {
        lms_status_t st = check_aligned(c, "set_access", va, size);
        return st != LMS_OK ? st : INNER(c, set_access, va, size);
    }
    lo_lock(&c->lock, LO_DEV_CHECK);
    reservation_t *r;
    size_t first;
    lms_status_t st = check_mapped_run(c, "set_access", va, size, &r, &first);
    if (st == LMS_OK)
        st = INNER(c, set_access, va, size);
    lo_unlock(&c->lock, LO_DEV_CHECK);
    return st;
}

/* set_access_host takes host blocks only: cuda.h forbids a CPU's access to
 * device memory ("cannot specify HOST_NUMA accessibility for allocations
 * created on other location types"). */
static lms_status_t check_set_access_host(void *self, dev_addr_t va, size_t size)
{
    check_t *c = self;
    if (!c->host_ok)
        return base_fail(LMS_ERR_UNSUPPORTED, "set_access_host: this device has no host blocks: %s",
                         c->host_why);
    if (!c->full) {
        lms_status_t st = check_aligned(c, "set_access_host", va, size);
        return st != LMS_OK ? st : INNER(c, set_access_host, va, size);
    }
    lo_lock(&c->lock, LO_DEV_CHECK);
    reservation_t *r;
    size_t first, n = size / c->granularity;
    lms_status_t st = check_mapped_run(c, "set_access_host", va, size, &r, &first);
    for (size_t g = first; st == LMS_OK && g < first + n; g++)
        if (handle_kind_of(r->block[g]) != HANDLE_HOST_BLOCK)
            st = base_fail(LMS_ERR_INVALID, "set_access_host: 0x%llx is mapped to a block of "
                           "device memory, not a host block",
                           (unsigned long long)(r->base + g * c->granularity));
    if (st == LMS_OK)
        st = INNER(c, set_access_host, va, size);
    for (size_t g = first; st == LMS_OK && g < first + n; g++)
        r->cpu[g] = true;
    lo_unlock(&c->lock, LO_DEV_CHECK);
    return st;
}

static lms_status_t check_unmap(void *self, dev_addr_t va, size_t size)
{
    check_t *c = self;
    reservation_t *r;
    size_t first;
    lms_status_t st;
    if (!c->full) {
        if ((st = check_aligned(c, "unmap", va, size)) != LMS_OK ||
            (st = INNER(c, unmap, va, size)) != LMS_OK)
            return st;
        lo_lock(&c->lock, LO_DEV_CHECK);
        if (find_run(c, va, size, &r, &first))
            record_unmap(c, r, first, size / c->granularity);
        lo_unlock(&c->lock, LO_DEV_CHECK);
        return LMS_OK;
    }
    lo_lock(&c->lock, LO_DEV_CHECK);
    st = check_mapped_run(c, "unmap", va, size, &r, &first);
    if (st == LMS_OK)
        st = INNER(c, unmap, va, size);
    if (st == LMS_OK)
        record_unmap(c, r, first, size / c->granularity);
    lo_unlock(&c->lock, LO_DEV_CHECK);
    return st;
}

static lms_status_t check_host_register(void *self, void *ptr, size_t size)
{
    check_t *c = self;
    lms_status_t st = check_host_range("host_register", ptr, size);
    if (st == LMS_OK && size == 0)
        st = check_invalid("host_register", "size is 0");
    if (st != LMS_OK)
        return st;
    char *p = ptr;
    lo_lock(&c->lock, LO_DEV_CHECK);
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
    lo_unlock(&c->lock, LO_DEV_CHECK);
    return st;
}

static lms_status_t check_host_unregister(void *self, void *ptr)
{
    check_t *c = self;
    lo_lock(&c->lock, LO_DEV_CHECK);
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
    lo_unlock(&c->lock, LO_DEV_CHECK);
    return st;
}

/* ---- teardown ---------------------------------------------------------------- */

void dev_check_live(void *self, dev_live_t *out)
{
    check_t *c = self;
    lo_lock(&c->lock, LO_DEV_CHECK);
    *out = (dev_live_t){
        .reservations = c->nres,
        .blocks = handle_live(&c->blocks),
        .mapped_blocks = c->mapped_blocks,
        .host_ranges = c->nhost,
        .streams = handle_live(&c->streams),
        .events = handle_live(&c->events),
        .host_blocks = handle_live(&c->host_blocks),
        .mapped_host_blocks = c->mapped_host_blocks,
    };
    lo_unlock(&c->lock, LO_DEV_CHECK);
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
    lo_lock(&c->lock, LO_DEV_CHECK);
    handle_slot_t *s;
    for (uint32_t i = 0; i < handle_count(&c->streams); i++)
        if (handle_used(s = handle_slot_at(&c->streams, i))) {
            log_teardown(INNER(c, stream_destroy, (dev_stream_t *)(uintptr_t)s->inner));
            handle_remove(&c->streams, s);
        }
    for (uint32_t i = 0; i < handle_count(&c->events); i++)
        if (handle_used(s = handle_slot_at(&c->events, i))) {
            log_teardown(INNER(c, event_destroy, (dev_event_t *)(uintptr_t)s->inner));
            handle_remove(&c->events, s);
        }
    for (; c->nres > 0; c->nres--) {
        reservation_t *r = &c->res[c->nres - 1];
        for (size_t g = 0; g < r->size / c->granularity; g++)
            if (r->block[g] != 0)
                log_teardown(INNER(c, unmap, r->base + g * c->granularity, c->granularity));
        log_teardown(INNER(c, va_free, r->base, r->size));
        base_meta_free(r->block);
        base_meta_free(r->cpu);
    }
    c->mapped_blocks = c->mapped_host_blocks = 0;
    handle_table_t *kinds[] = {&c->blocks, &c->host_blocks};
    for (size_t k = 0; k < 2; k++)
        for (uint32_t i = 0; i < handle_count(kinds[k]); i++)
            if (handle_used(s = handle_slot_at(kinds[k], i))) {
                log_teardown(INNER(c, block_release, s->inner));
                handle_remove(kinds[k], s);
            }
    for (; c->nhost > 0; c->nhost--)
        log_teardown(INNER(c, host_unregister, c->host[c->nhost - 1].ptr));
    lo_unlock(&c->lock, LO_DEV_CHECK);
}

static void check_close(void *self)
{
    check_t *c = self;
    c->inner.ops->close(c->inner.self);
    base_meta_free(c->res);
    handle_table_free(&c->blocks);
    handle_table_free(&c->host_blocks);
    handle_table_free(&c->streams);
    handle_table_free(&c->events);
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
    .launch = check_launch,
    .set_observer = check_set_observer,
    .host_block_create = check_host_block_create,
    .set_access_host = check_set_access_host,
};

lms_status_t dev_check_open(dev_layer_t inner, const dev_info_t *info, bool full, dev_layer_t *out)
{
    check_t *c = base_meta_calloc(1, sizeof *c);
    if (c == NULL)
        return base_fail(LMS_ERR_OUT_OF_MEMORY, "dev_open: no host memory for the check layer");
    c->inner = inner;
    c->granularity = info->granularity;
    c->full = full;
    c->host_ok = info->host_blocks;
    c->host_runs = info->host_block_runs;
    snprintf(c->host_why, sizeof c->host_why, "%s", info->host_blocks_why);
    uint64_t tag = (uint64_t)(atomic_fetch_add(&next_tag, 1) % 0xffff + 1) << 48;
    handle_table_init(&c->blocks, HANDLE_BLOCK, tag);
    handle_table_init(&c->streams, HANDLE_STREAM, tag);
    handle_table_init(&c->events, HANDLE_EVENT, tag);
    handle_table_init(&c->host_blocks, HANDLE_HOST_BLOCK, tag);
    pthread_mutex_init(&c->lock, NULL);
    *out = (dev_layer_t){&check_ops, c};
    return LMS_OK;
}
