/*
 * interpose/tensormap.c — see tensormap.h.
 *
 * Note [Tensor maps]
 * A TMA descriptor is 128 bytes whose layout CUDA does not document: the
 * tensor's address may sit in it shifted or packed, where the 8-byte scan
 * of a launch's parameters (scan.h) does not find it. The hooks of
 * cuTensorMapEncodeTiled, cuTensorMapEncodeIm2col, cuTensorMapEncodeIm2colWide
 * and cuTensorMapReplaceAddress (interpose.c) learn each descriptor CUDA
 * wrote for lms's memory: its bytes, and the address it was given. A launch
 * looks every 128 bytes at a multiple of 64 of its parameter buffer up
 * (alignof(CUtensorMap) is 64, so a descriptor passed by value, alone or in
 * a struct, sits at one), and what it finds names the allocation to make
 * resident, as a pointer would.
 *
 * The same inputs give the same bytes, so a descriptor found names the
 * address it was made for. The table is direct-mapped on a hash of the
 * bytes, TABLE entries: a descriptor whose slot a later one took is
 * forgotten, and a launch with it makes nothing of it resident (the 8-byte
 * scan may still find its address). A program encodes a descriptor per
 * tensor and operation and reuses it (CUTLASS, Triton): far fewer than
 * TABLE live at once. Descriptors built on the device (in device memory,
 * as grouped GEMMs may) are not seen: lms_pin what they address.
 *
 * Lock: `lock` guards the table; `learnt` (how many were ever learnt) is
 * read without it.
 */
#include <pthread.h>
#include <string.h>

#include "base/base.h"
#include "interpose/tensormap.h"

#define TABLE 4096 /* a power of two */
#define WORDS (TENSORMAP_BYTES / 8)

typedef struct entry {
    uint64_t bytes[WORDS];
    uintptr_t address; /* 0: empty */
} entry_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static entry_t *table; /* TABLE entries, made at the first descriptor */
static uint64_t learnt;

static size_t slot_of(const uint64_t *w)
{
    uint64_t h = 0;
    for (int i = 0; i < WORDS; i++)
        h = (h ^ w[i]) * 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 40) & (TABLE - 1);
}

void tensormap_learn(const void *map, uintptr_t address)
{
    uint64_t w[WORDS];
    if (map == NULL || address == 0)
        return;
    memcpy(w, map, sizeof w);
    pthread_mutex_lock(&lock);
    if (table == NULL && (table = base_meta_calloc(TABLE, sizeof *table)) == NULL) {
        pthread_mutex_unlock(&lock);
        base_log(BASE_LOG_WARN, "interpose: no host memory for tensor maps: launches that "
                                "take one may not make its tensor resident");
        return;
    }
    entry_t *e = &table[slot_of(w)];
    memcpy(e->bytes, w, sizeof w);
    e->address = address;
    pthread_mutex_unlock(&lock);
    __atomic_fetch_add(&learnt, 1, __ATOMIC_RELEASE);
}

bool tensormap_any(void) { return __atomic_load_n(&learnt, __ATOMIC_ACQUIRE) != 0; }

/* The address the descriptor at p describes, or 0 (lock held). */
static uintptr_t lookup(const unsigned char *p)
{
    uint64_t w[WORDS];
    memcpy(w, p, sizeof w); /* the host copy need not be aligned */
    const entry_t *e = &table[slot_of(w)];
    return e->address != 0 && memcmp(e->bytes, w, sizeof w) == 0 ? e->address : 0;
}

/* Looks up the descriptors in `size` bytes at p, which sit at offset `at`
 * of the parameter buffer (lock held). */
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
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < n; i++)
        if (values[i] != NULL && layout[i].size >= TENSORMAP_BYTES)
            found = scan_bytes(values[i], layout[i].offset, layout[i].size, out, param_of,
                               (uint32_t)i, max, found);
    pthread_mutex_unlock(&lock);
    return found;
}

size_t tensormap_scan_buffer(const void *buf, size_t size, uintptr_t *out, size_t max,
                             size_t found)
{
    if (!tensormap_any() || buf == NULL)
        return found;
    pthread_mutex_lock(&lock);
    found = scan_bytes(buf, 0, size, out, NULL, 0, max, found);
    pthread_mutex_unlock(&lock);
    return found;
}
