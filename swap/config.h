/*
 * swap/config.h — lms's configuration resolved once (Note [Resolved
 * configuration] in config.c): every "0 = default" of swap_config_t turned
 * into the number lms runs with, every value clamped as it must be, and where
 * each came from. init, residency and the policy simulator read only the
 * resolved values; `lms-info --options` prints them.
 *
 * swap_config_resolve is pure: it makes no device call and reads no
 * environment, taking what it depends on (the device's free and total memory,
 * granularity and host blocks, the memory of the GPU's NUMA node and of the
 * machine, whether the program may touch memory unseen) as swap_facts_t.
 * swap_facts_device and swap_facts_host read the two halves of the facts.
 */
#ifndef LMS_SWAP_CONFIG_H
#define LMS_SWAP_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "swap/swap.h"

/* The most address space lms reserves: x86-64's user half (4-level pages). */
#define SWAP_VA_MAX ((size_t)1 << 47)
/* A step of a pipelined swap when LMS_SWAP_PIECE is 0 (Note [Pipelined swaps] in window.c). */
#define SWAP_PIECE_DEFAULT ((size_t)16 << 20)
/* The most chunks a piece holds: residency evicts at most this many in one copy. */
#define SWAP_MAX_RUN 64

/* What the resolution depends on, measured by the caller. */
typedef struct swap_facts {
    size_t free_bytes;  /* the device's free memory now (dev_mem_info) */
    size_t total_bytes; /* the device's memory (dev_mem_info) */
    size_t granularity; /* the device's block size: a chunk */
    uint64_t node_bytes; /* memory of the GPU's NUMA node; 0: not known */
    uint64_t ram_bytes;  /* memory of the machine */
    bool host_blocks;    /* the device maps host memory at device addresses
                            (dev_info_t.host_blocks) */
    const char *host_blocks_why; /* without host_blocks, why not; NULL or "": not said */
    bool unseen;         /* the program may touch lms's memory where lms does not see it
                            (lms_expect_unseen_access: the preload, the PyTorch plugin) */
} swap_facts_t;

/* Where a resolved value came from. */
typedef enum swap_origin {
    SWAP_FROM_DEFAULT, /* the setting was 0 (or its table default): lms's default */
    SWAP_FROM_ENV,     /* an LMS_* variable */
    SWAP_FROM_API,     /* the program: swap_init's configuration, lms_set_device_fraction */
    SWAP_FROM_CLAMPED, /* given, but out of bounds: replaced by what lms can use */
} swap_origin_t;

/* The settings that resolve to a size: X(SETTING, variable). */
#define SWAP_SETTINGS(X)                      \
    X(DEVICE_LIMIT, "LMS_DEVICE_LIMIT")       \
    X(HOST_LIMIT, "LMS_HOST_LIMIT")           \
    X(VA_RESERVE, "LMS_VA_RESERVE")           \
    X(LARGE_THRESHOLD, "LMS_LARGE_THRESHOLD") \
    X(RECLAIM_LOW, "LMS_RECLAIM_LOW")         \
    X(RECLAIM_HIGH, "LMS_RECLAIM_HIGH")       \
    X(SWAP_PIECE, "LMS_SWAP_PIECE")           \
    X(THREAD_CACHE, "LMS_THREAD_CACHE")

typedef enum swap_setting {
#define SWAP_SETTING_ENUM(setting, var) SWAP_SET_##setting,
    SWAP_SETTINGS(SWAP_SETTING_ENUM)
#undef SWAP_SETTING_ENUM
    SWAP_SETTING_COUNT
} swap_setting_t;

/* Where an evicted chunk's addresses point (Note [Evicted mode] in config.c). */
typedef enum swap_evicted {
    SWAP_EVICTED_UNMAPPED, /* nowhere: an access lms did not see faults */
    SWAP_EVICTED_HOST,     /* to its host copy: such an access goes over the link */
} swap_evicted_t;

/* The configuration lms runs with. Sizes in chunks where lms counts chunks. */
typedef struct swap_resolved {
    size_t chunk;           /* bytes: the device's granularity */
    size_t budget;          /* the device limit, chunks (at least 1) */
    size_t host_limit;      /* bytes of pinned host memory; 0 without swapping */
    size_t va_size;         /* bytes to reserve, whole chunks, at least the device limit */
    size_t nchunks;         /* va_size / chunk: chunk ids are below UINT32_MAX */
    size_t large_threshold; /* bytes; never 0 (alloc_create takes it as it is) */
    size_t low, high;       /* reclaim watermarks, chunks: 1 <= low < high */
    size_t piece;           /* chunks of a step of a swap: 1..SWAP_MAX_RUN */
    size_t capacity;        /* chunks allocations may hold: the budget and the host
                               limit less the `high` blocks kept free (Note [Resolved
                               configuration]) */
    size_t flush_bytes;     /* a stream's unfenced frees that record a fence:
                               the device limit / 16, at most 64 MiB */
    size_t thread_cache;    /* bytes a thread cache keeps; 0: none */
    swap_origin_t from[SWAP_SETTING_COUNT]; /* where each setting's value came from */
    swap_evicted_t evicted; /* LMS_EVICTED resolved (Note [Evicted mode] in config.c) */
    char evicted_why[224];  /* why: the setting that chose it, or auto's reason */
} swap_resolved_t;

/*
 * Resolves cfg on a device and host described by facts into *out. Settings
 * given as nonzero values came from the LMS_* options when from_options
 * (swap_config_from_options filled cfg: base_options_each says env or
 * default), else from the program; a device_fraction is always the
 * program's. Warns on stderr (base_log) for each value it clamps, as lms has
 * always warned at init.
 *
 * Returns LMS_ERR_INVALID (base_fail, the message naming the setting) for a
 * device limit of less than one chunk, a host limit beyond the machine's
 * memory, a reserve beyond SWAP_VA_MAX, or an evicted mode that is not one
 * of LMS_EVICTED's words; and for NULL arguments or a granularity that is 0.
 * LMS_ERR_UNSUPPORTED when the evicted mode resolves to host, which the
 * device cannot map (Note [Evicted mode]).
 * *out is written only on LMS_OK.
 */
lms_status_t swap_config_resolve(const swap_config_t *cfg, bool from_options,
                                 const swap_facts_t *facts, swap_resolved_t *out);

/* The device's facts: free and total memory (dev_mem_info), granularity and
 * host_blocks (dev_info_t); the other fields are left as they are. */
lms_status_t swap_facts_device(dev_device_t *dev, swap_facts_t *facts);

/* The host's facts: node_bytes of NUMA node numa_node (-1, no NUMA, or one
 * node: 0), ram_bytes, and unseen (lms_expect_unseen_access was called in
 * this process); the device's fields are left as they are. */
lms_status_t swap_facts_host(int numa_node, swap_facts_t *facts);

/* Calls fn once per setting of SWAP_SETTINGS, in order, with its variable,
 * its resolved value in bytes and where it came from. */
lms_status_t swap_resolved_each(const swap_resolved_t *r,
                                void (*fn)(const char *var, uint64_t bytes, swap_origin_t from,
                                           void *arg),
                                void *arg);

/* "unmapped" or "host"; "?" for anything else. */
const char *swap_evicted_str(swap_evicted_t mode);

/* "default", "env", "api" or "clamped"; "?" for anything else. */
const char *swap_origin_str(swap_origin_t from);

#endif /* LMS_SWAP_CONFIG_H */
