/*
 * device/handle.c — the check layer's handle tables: blocks, host blocks,
 * streams and events of the layer below, named by handles that are checked, never
 * dereferenced. See handle.h.
 *
 * Note [Handles]
 * ~~~~~~~~~~~~~~
 * A block, host block, stream or event handle is a 64-bit number (streams and events cast
 * to the opaque pointer types), laid out as
 *     [63..48 layer tag][47..45 kind][44..28 generation][27..0 slot + 1]
 * and is checked by lookup, never dereferenced: a destroyed object, a handle
 * of another device or another kind, or a made-up value is recognised as such.
 * A slot's generation grows on every release; a slot whose generation is used
 * up is retired rather than reused, so an old handle never becomes valid
 * again. The tag tells devices apart while both are open (it repeats after
 * 65535 opens, which matters only for a handle used after its device closed).
 *
 * The lookup takes no lock, because every copy, kernel and event op makes
 * one: slots live in pages that are made once and never move (a slot's
 * address is fixed from its first use to close), and a slot's state word,
 * generation << 1 | used, is stored with release after its inner object, so
 * that a lookup which loads it with acquire and finds the handle's
 * generation, in use, reads the inner object stored with it. A lookup that
 * races the destruction of the same object may see it either way: device.h
 * forbids that race, and either answer is one the caller could have had.
 */
#include <string.h>

#include "base/base.h"
#include "base/lockorder.h"
#include "device/handle.h"

#define SLOT_BITS 28
#define KIND_SHIFT 45
#define KIND_MASK 7u
#define GENERATION_BITS 17
#define GENERATION_MASK ((1u << GENERATION_BITS) - 1)
#define GENERATION_RETIRED GENERATION_MASK
#define PAGE_SLOTS (1u << HANDLE_PAGE_BITS)

_Static_assert((uint64_t)HANDLE_PAGES * PAGE_SLOTS < (1ull << SLOT_BITS),
               "every slot index fits a handle");

static const char *const kind_names[] = {"", "block", "stream", "event", "host block",
                                         "?", "?", "?"};

void handle_table_init(handle_table_t *t, handle_kind_t kind, uint64_t tag)
{
    memset(t, 0, sizeof *t);
    t->kind = kind;
    t->tag = tag;
    t->free_head = HANDLE_NO_SLOT;
    pthread_mutex_init(&t->lock, NULL);
}

void handle_table_free(handle_table_t *t)
{
    for (size_t p = 0; p < HANDLE_PAGES; p++)
        base_meta_free(atomic_load_explicit(&t->pages[p], memory_order_relaxed));
    pthread_mutex_destroy(&t->lock);
}

handle_slot_t *handle_slot_at(handle_table_t *t, uint32_t i)
{
    handle_slot_t *page = atomic_load_explicit(&t->pages[i >> HANDLE_PAGE_BITS],
                                               memory_order_acquire);
    return page != NULL ? &page[i & (PAGE_SLOTS - 1)] : NULL;
}

uint64_t handle_of(handle_table_t *t, uint32_t i)
{
    uint32_t generation = atomic_load_explicit(&handle_slot_at(t, i)->state,
                                               memory_order_relaxed) >> 1;
    return t->tag | (uint64_t)t->kind << KIND_SHIFT | (uint64_t)generation << SLOT_BITS | (i + 1);
}

lms_status_t handle_add(handle_table_t *t, uint64_t inner, uint64_t *handle)
{
    lo_lock(&t->lock, LO_DEV_HANDLES);
    uint32_t i = t->free_head;
    handle_slot_t *s;
    if (i != HANDLE_NO_SLOT) {
        s = handle_slot_at(t, i);
        t->free_head = s->next_free;
    } else {
        i = atomic_load_explicit(&t->n, memory_order_relaxed);
        handle_slot_t *slot = NULL;
        if (i < (uint64_t)HANDLE_PAGES * PAGE_SLOTS) {
            slot = handle_slot_at(t, i);
            if (slot == NULL) {
                handle_slot_t *made = base_meta_calloc(PAGE_SLOTS, sizeof *made);
                if (made != NULL)
                    atomic_store_explicit(&t->pages[i >> HANDLE_PAGE_BITS], made,
                                          memory_order_release);
                slot = made; /* pages fill in order: i is the new page's first slot */
            }
        }
        if (slot == NULL) {
            lo_unlock(&t->lock, LO_DEV_HANDLES);
            return base_fail(LMS_ERR_OUT_OF_MEMORY, "no host memory to track another %s",
                             kind_names[t->kind]);
        }
        s = slot;
        s->index = i;
        atomic_store_explicit(&t->n, i + 1, memory_order_release);
    }
    s->maps = 0;
    s->next_free = HANDLE_NO_SLOT;
    atomic_store_explicit(&s->inner, inner, memory_order_relaxed);
    uint32_t generation = atomic_load_explicit(&s->state, memory_order_relaxed) >> 1;
    atomic_store_explicit(&s->state, generation << 1 | 1, memory_order_release);
    t->live++;
    *handle = handle_of(t, i);
    lo_unlock(&t->lock, LO_DEV_HANDLES);
    return LMS_OK;
}

lms_status_t handle_find(handle_table_t *t, const char *op, uint64_t handle, handle_slot_t **out)
{
    const char *what = kind_names[t->kind];
    if (handle == 0)
        return base_fail(LMS_ERR_INVALID, "%s: the %s is NULL", op, what);
    if ((handle & ~0ull << 48) != t->tag)
        return base_fail(LMS_ERR_INVALID, "%s: the %s belongs to another device, or is no %s",
                         op, what, what);
    if (handle_kind_of(handle) != t->kind)
        return base_fail(LMS_ERR_INVALID, "%s: 0x%llx is a %s, not a %s", op,
                         (unsigned long long)handle, kind_names[handle_kind_of(handle)], what);
    uint64_t slot = (handle & ((1ull << SLOT_BITS) - 1)) - 1;
    uint32_t want = (uint32_t)(handle >> SLOT_BITS & GENERATION_MASK) << 1 | 1;
    handle_slot_t *s = slot < handle_count(t) ? handle_slot_at(t, (uint32_t)slot) : NULL;
    if (s == NULL || atomic_load_explicit(&s->state, memory_order_acquire) != want)
        return base_fail(LMS_ERR_INVALID, "%s: the %s 0x%llx was destroyed, or never existed", op,
                         what, (unsigned long long)handle);
    *out = s;
    return LMS_OK;
}

handle_kind_t handle_kind_of(uint64_t handle)
{
    return (handle_kind_t)(handle >> KIND_SHIFT & KIND_MASK);
}

void handle_remove(handle_table_t *t, handle_slot_t *s)
{
    lo_lock(&t->lock, LO_DEV_HANDLES);
    uint32_t generation = (atomic_load_explicit(&s->state, memory_order_relaxed) >> 1) + 1;
    atomic_store_explicit(&s->state, generation << 1, memory_order_release);
    atomic_store_explicit(&s->inner, 0, memory_order_relaxed);
    t->live--;
    if (generation != GENERATION_RETIRED) { /* retired: its handles stay invalid for good */
        s->next_free = t->free_head;
        t->free_head = s->index;
    }
    lo_unlock(&t->lock, LO_DEV_HANDLES);
}

size_t handle_live(handle_table_t *t)
{
    lo_lock(&t->lock, LO_DEV_HANDLES);
    size_t n = t->live;
    lo_unlock(&t->lock, LO_DEV_HANDLES);
    return n;
}
