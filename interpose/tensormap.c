/*
 * interpose/tensormap.c — TMA descriptors: the tensor address each one the
 * program encoded describes (internal.h).
 *
 * Note [Tensor maps]
 * A TMA descriptor is 128 bytes whose layout CUDA does not document: the
 * tensor's address may sit in it shifted or packed, where the 8-byte scan
 * of a launch's parameters (scan.h) does not find it. The hooks of
 * cuTensorMapEncodeTiled, cuTensorMapEncodeIm2col, cuTensorMapEncodeIm2colWide
 * and cuTensorMapReplaceAddress (interpose.c) learn each descriptor CUDA
 * wrote for lms's memory: its bytes, and the address it was given. A launch
 * looks every 128 bytes at a multiple of 64 of its parameter buffer up
 * (CUtensorMap is aligned to 64 bytes, to 128 in CUDA 13's cuda.h: a
 * descriptor passed by value, alone or in a struct, sits at one), and what
 * it finds names the allocation to make resident, as a pointer would.
 *
 * The same inputs give the same bytes, so a descriptor found names the
 * address it was made for. The table is keyed by the whole 128 bytes, open
 * addressing that grows to MAX_ENTRIES; past that, a new descriptor takes
 * the place of the one at its slot, which is said once in the log and
 * counted (a launch with a forgotten one makes nothing of it resident,
 * though the 8-byte scan may still find its address). A program encodes a
 * descriptor per tensor and operation and reuses it (CUTLASS, Triton): far
 * fewer than MAX_ENTRIES distinct ones. Descriptors built on the device (in
 * device memory, as grouped GEMMs may) are not seen: lms_pin what they
 * address.
 *
 * Launches pay for this only once a descriptor was learnt, and then per 128
 * bytes at a multiple of 64 of a parameter at least that large (PyTorch's
 * TensorIterator kernels take structs that large): a lock-free look at a
 * bitmap of the descriptors' first 16 bytes, and only when its bit is set,
 * the table under a read lock.
 *
 * Lock: `lock` (read for lookups, write for changes) guards the table;
 * `seen` (bits set, never cleared) and `learnt` are read without it.
 */
#include <pthread.h>
#include <string.h>

#include "base/base.h"
#include "base/lockorder.h"
#include "interpose/internal.h"

#define FIRST_ENTRIES 256
#define MAX_ENTRIES ((size_t)1 << 16) /* 8.5 MiB of descriptors */
#define WORDS (TENSORMAP_BYTES / 8)
#define SEEN_BITS ((size_t)1 << 16)

typedef struct entry {
    uint64_t bytes[WORDS];
    uintptr_t address; /* 0: empty */
} entry_t;

static pthread_rwlock_t lock = PTHREAD_RWLOCK_INITIALIZER;
static entry_t *table;      /* cap entries, made at the first descriptor */
static size_t cap, used;
static uint64_t forgotten;  /* descriptors a full table dropped */
static uint64_t seen[SEEN_BITS / 64]; /* by first 16 bytes: maybe learnt */
static uint64_t learnt;

static uint64_t hash_of(const uint64_t *w)
{
    uint64_t h = 0;
    for (int i = 0; i < WORDS; i++)
        h = (h ^ w[i]) * 0x9e3779b97f4a7c15ull;
    return h ^ (h >> 29);
}

static size_t seen_bit(const uint64_t *w)
{
    return (size_t)(((w[0] ^ (w[1] * 0xc2b2ae3d27d4eb4full)) * 0x9e3779b97f4a7c15ull) >> 48) &
           (SEEN_BITS - 1);
}

/* The slot of w in a table of c entries: its own, or the empty one where it
 * would go (lock held). */
static size_t slot_of(const entry_t *t, size_t c, const uint64_t *w)
{
    size_t i = (size_t)hash_of(w) & (c - 1);
    while (t[i].address != 0 && memcmp(t[i].bytes, w, sizeof t[i].bytes) != 0)
        i = (i + 1) & (c - 1);
    return i;
}

/* Twice the room, or false (write lock held). */
static bool grow(void)
{
    size_t c = cap == 0 ? FIRST_ENTRIES : 2 * cap;
    entry_t *t = base_meta_calloc(c, sizeof *t);
    if (t == NULL)
        return false;
    for (size_t i = 0; i < cap; i++)
        if (table[i].address != 0)
            t[slot_of(t, c, table[i].bytes)] = table[i];
    base_meta_free(table);
    table = t;
    cap = c;
    return true;
}

void tensormap_learn(const void *map, uintptr_t address)
{
    uint64_t w[WORDS];
    if (map == NULL || address == 0)
        return;
    memcpy(w, map, sizeof w);
    lo_wrlock(&lock, LO_TENSORMAP);
    if ((used + 1) * 2 > cap && cap < MAX_ENTRIES && !grow() && cap == 0) {
        lo_rwunlock(&lock, LO_TENSORMAP);
        base_log(BASE_LOG_WARN, "interpose: no host memory for tensor maps: launches that "
                                "take one may not make its tensor resident");
        return;
    }
    size_t i = slot_of(table, cap, w);
    if (table[i].address == 0 && (used + 1) * 2 > cap) { /* full: the home slot's goes */
        i = (size_t)hash_of(w) & (cap - 1);
        if (forgotten++ == 0)
            base_log(BASE_LOG_WARN, "interpose: more than %zu tensor maps: launches with the ones "
                     "forgotten to make room may not make their tensors resident", cap / 2);
    } else if (table[i].address == 0) {
        used++;
    }
    memcpy(table[i].bytes, w, sizeof w);
    table[i].address = address;
    size_t bit = seen_bit(w);
    __atomic_fetch_or(&seen[bit / 64], (uint64_t)1 << (bit % 64), __ATOMIC_RELEASE);
    lo_rwunlock(&lock, LO_TENSORMAP);
    __atomic_fetch_add(&learnt, 1, __ATOMIC_RELEASE);
}

bool tensormap_any(void) { return __atomic_load_n(&learnt, __ATOMIC_ACQUIRE) != 0; }

/* The address the descriptor at p describes, or 0: a look at `seen`, then
 * the table under the read lock. */
static uintptr_t lookup(const unsigned char *p)
{
    uint64_t w[WORDS];
    memcpy(w, p, 16); /* the host copy need not be aligned */
    size_t bit = seen_bit(w);
    if (!(__atomic_load_n(&seen[bit / 64], __ATOMIC_ACQUIRE) & ((uint64_t)1 << (bit % 64))))
        return 0;
    memcpy(w, p, sizeof w);
    lo_rdlock(&lock, LO_TENSORMAP);
    const entry_t *e = cap > 0 ? &table[slot_of(table, cap, w)] : NULL;
    uintptr_t a = e != NULL ? e->address : 0;
    lo_rwunlock(&lock, LO_TENSORMAP);
    return a;
}

/* Looks up the descriptors in `size` bytes at p, which sit at offset `at`
 * of the parameter buffer. */
static size_t scan_bytes(const unsigned char *p, size_t at, size_t size, uintptr_t *out,
                         uint32_t *param_of, uint32_t param, size_t max, size_t found)
{
    if (size < TENSORMAP_BYTES)
        return found;
    size_t first = (at + TENSORMAP_ALIGN - 1) & ~(size_t)(TENSORMAP_ALIGN - 1);
    for (size_t o = first; o - at <= size - TENSORMAP_BYTES; o += TENSORMAP_ALIGN) {
        uintptr_t a = lookup(p + (o - at));
        if (a == 0)
            continue;
        if (found < max) {
            out[found] = a;
            if (param_of != NULL)
                param_of[found] = param;
        }
        found++;
    }
    return found;
}

size_t tensormap_scan(void *const *values, const scan_param_t *layout, size_t n, uintptr_t *out,
                      uint32_t *param_of, size_t max, size_t found)
{
    if (!tensormap_any())
        return found;
    for (size_t i = 0; i < n; i++)
        if (values[i] != NULL && layout[i].size >= TENSORMAP_BYTES)
            found = scan_bytes(values[i], layout[i].offset, layout[i].size, out, param_of,
                               (uint32_t)i, max, found);
    return found;
}

size_t tensormap_scan_buffer(const void *buf, size_t size, uintptr_t *out, size_t max,
                             size_t found)
{
    if (!tensormap_any() || buf == NULL)
        return found;
    return scan_bytes(buf, 0, size, out, NULL, 0, max, found);
}
