/*
 * device/handle.h — private to device/: the check layer's handle tables
 * (handle.c). A block, stream or event the check layer hands out is a
 * handle, never a pointer to memory: see Note [Handles] in handle.c.
 *
 * Lookups take no lock (handle_find): they are on every copy, kernel and
 * event op. Adding and removing take the table's own lock, which is never
 * held across a call to the layer below.
 */
#ifndef LMS_DEVICE_HANDLE_H
#define LMS_DEVICE_HANDLE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lms.h"

#define HANDLE_PAGE_BITS 12 /* slots per page: 4096 */
#define HANDLE_PAGES 4096   /* pages per table: 16M objects of a kind */

typedef enum handle_kind {
    HANDLE_BLOCK = 1,
    HANDLE_STREAM,
    HANDLE_EVENT,
    HANDLE_HOST_BLOCK,
} handle_kind_t;

typedef struct handle_slot {
    _Atomic uint64_t inner;  /* the object of the layer below; valid while used */
    _Atomic uint32_t state;  /* generation << 1 | used: what handle_find compares */
    uint32_t index;          /* its own index in the table, set at its first use */
    uint32_t next_free;      /* free list link (table lock) */
    uint32_t maps;           /* blocks and host blocks: VAs it is mapped at (the check
                                layer's lock) */
} handle_slot_t;

typedef struct handle_table {
    handle_kind_t kind;
    uint64_t tag;                                /* bits 48..63 of every handle; never 0 */
    _Atomic(handle_slot_t *) pages[HANDLE_PAGES]; /* made as needed, never freed before close */
    pthread_mutex_t lock;                        /* guards n, free_head, live, page making */
    _Atomic uint32_t n;                          /* slots ever used */
    uint32_t free_head;                          /* a released slot, or HANDLE_NO_SLOT */
    size_t live;
} handle_table_t;

#define HANDLE_NO_SLOT UINT32_MAX

void handle_table_init(handle_table_t *t, handle_kind_t kind, uint64_t tag);
void handle_table_free(handle_table_t *t);

/* Stores inner in a free slot; *handle names it. LMS_ERR_OUT_OF_MEMORY when
 * the table is full or no page can be made. */
lms_status_t handle_add(handle_table_t *t, uint64_t inner, uint64_t *handle);
/* The slot handle names, or LMS_ERR_INVALID naming op and why it names none
 * (NULL, another device's, another kind's, destroyed or never made). No lock. */
lms_status_t handle_find(handle_table_t *t, const char *op, uint64_t handle, handle_slot_t **out);
/* The kind a handle says it is, whether or not it names anything (0: none). */
handle_kind_t handle_kind_of(uint64_t handle);
/* Frees s: every handle of it is invalid from now on, for good. */
void handle_remove(handle_table_t *t, handle_slot_t *s);

/* Slot i (< n), and the handle that names it while it is used. */
handle_slot_t *handle_slot_at(handle_table_t *t, uint32_t i);
uint64_t handle_of(handle_table_t *t, uint32_t i);
static inline bool handle_used(handle_slot_t *s)
{
    return atomic_load_explicit(&s->state, memory_order_acquire) & 1;
}
/* The objects in use, and the slots ever used. */
size_t handle_live(handle_table_t *t);
static inline uint32_t handle_count(handle_table_t *t)
{
    return atomic_load_explicit(&t->n, memory_order_acquire);
}

#endif /* LMS_DEVICE_HANDLE_H */
