/*
 * swap/config.c — the configuration resolved once: swap_config_resolve turns
 * a swap_config_t and the facts of a device and host into the numbers lms
 * runs with (swap/config.h). Pure but for base_log's warnings and
 * base_options' sources; swap_facts_device and swap_facts_host read the
 * device and the host, and swap_unseen_expected, the one fact the program
 * gives (lms_expect_unseen_access, in lms.c).
 *
 * Note [Resolved configuration]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * Each setting whose 0 means a default is resolved here and nowhere else, in
 * this order (the order of init's warnings and refusals):
 *   device limit  a fraction of the device's total memory when the program
 *                 set one (lms_set_device_fraction), else LMS_DEVICE_LIMIT,
 *                 else free - min(free / 8, 512 MiB); at most the free
 *                 memory; rounded down to chunks; less than a chunk refused.
 *   host limit    0 without swapping; else LMS_HOST_LIMIT, else half the
 *                 memory of the GPU's NUMA node (the machine's where that is
 *                 not known or the machine has one node); more than the
 *                 machine's memory refused: pinned memory beyond it cannot
 *                 be had, and 4 x it as the reserve asked for tables of
 *                 billions of chunks.
 *   reserve       LMS_VA_RESERVE, else 4 x (device + host limit); at most
 *                 SWAP_VA_MAX (a larger LMS_VA_RESERVE refused), so the
 *                 product cannot wrap; below UINT32_MAX chunks (chunk ids
 *                 are 32 bits); rounded up to chunks; at least the device
 *                 limit.
 *   large         LMS_LARGE_THRESHOLD if alloc/ takes it (4 KiB..16 chunks),
 *                 else 8 chunks.
 *   watermarks    LMS_RECLAIM_LOW / _HIGH, both dropped for the defaults
 *                 when either is not below the device limit or low is above
 *                 high (issue 24: a high watermark past the limit left room
 *                 for almost nothing); else limit / 32 and / 16; low at
 *                 least a chunk, high at least low + 1 chunk.
 *   piece         LMS_SWAP_PIECE, else 16 MiB, in chunks: 1..SWAP_MAX_RUN.
 *   evicted       LMS_EVICTED, auto resolved (Note [Evicted mode]); a word
 *                 that is not one of its choices refused, and host where
 *                 the device cannot map host memory.
 * and from them: the capacity, the chunks allocations may hold. Swapping
 * needs room to turn: a chunk goes out before another comes in, and the
 * reclaim thread keeps `high` blocks free, whose data is then on the host, so
 * that much of the host limit is not for allocations. And the fence size of
 * stream-ordered frees, the device limit / 16, at most 64 MiB.
 *
 * Note [Evicted mode]
 * ~~~~~~~~~~~~~~~~~~~
 * Where an evicted chunk's addresses point (LMS_EVICTED; issue 27):
 *   unmapped  nowhere. A kernel that touches the chunk where lms did not see
 *             it (a pointer stored in device memory, a launch whose
 *             parameters lms could not read) gets an illegal address, and
 *             the CUDA context dies with the program's work.
 *   host      its host copy, a host block mapped at the chunk's addresses
 *             (dev_info_t.host_blocks): such a kernel reads and writes it
 *             over the link, slowly but correctly (Note [Evicted chunks
 *             stay mapped] in residency.c). Refused at start on a device
 *             that cannot map host memory, rather than run as unmapped
 *             under host's name.
 *   auto      host where the device maps host memory and a card has
 *             measured what the mode costs (docs/gpu-results.md): first
 *             where the program may touch memory unseen (lms runs under
 *             the preload or the PyTorch plugin, which call
 *             lms_expect_unseen_access), everywhere if the cost allows.
 *             No card has measured it yet, so auto is unmapped, and its
 *             reason says which of those facts stands in the way.
 * Without swapping nothing is evicted: the mode is unmapped, whatever was
 * asked, and nothing is refused.
 */
#include <numa.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "alloc/alloc.h"
#include "base/base.h"
#include "swap/config.h"
#include "swap/internal.h"

/* the device limit's default leaves free / 8, at most this */
#define LIMIT_SLACK_MAX (512 * BASE_MiB)
#define FLUSH_MAX (64 * BASE_MiB)

static const char *const setting_var[SWAP_SETTING_COUNT] = {
#define SETTING_VAR(setting, var) var,
    SWAP_SETTINGS(SETTING_VAR)
#undef SETTING_VAR
};

static char *fmt(uint64_t bytes, char buf[32]) { return base_format_size(bytes, buf, 32); }

/* base_options_each's callback: marks the settings the environment set. */
static void note_env(const char *var, const char *value, const char *source, const char *doc,
                     void *arg)
{
    (void)value;
    (void)doc;
    bool *env = arg;
    for (size_t i = 0; i < SWAP_SETTING_COUNT; i++)
        if (strcmp(var, setting_var[i]) == 0)
            env[i] = strcmp(source, "env") == 0;
}

/* Where a setting given as `value` came from, before any clamp. */
static swap_origin_t given(const bool *env, bool from_options, swap_setting_t s, uint64_t value)
{
    if (value == 0)
        return SWAP_FROM_DEFAULT;
    if (!from_options)
        return SWAP_FROM_API;
    return env[s] ? SWAP_FROM_ENV : SWAP_FROM_DEFAULT;
}

static lms_status_t resolve_device_limit(const swap_config_t *cfg, const swap_facts_t *f,
                                         swap_resolved_t *r)
{
    char a[32], b[32];
    size_t free_b = f->free_bytes;
    bool by_fraction = cfg->device_fraction > 0;
    size_t limit = by_fraction ? (size_t)(cfg->device_fraction * (double)f->total_bytes)
                               : cfg->device_limit;
    if (by_fraction)
        r->from[SWAP_SET_DEVICE_LIMIT] = SWAP_FROM_API;
    if (limit == 0 && !by_fraction) /* not set; a fraction that gives 0 bytes fails below */
        limit = free_b - (free_b / 8 < LIMIT_SLACK_MAX ? free_b / 8 : LIMIT_SLACK_MAX);
    if (limit > free_b) {
        base_log(BASE_LOG_WARN, "%s=%s is more than the device's free memory (%s); using %s",
                 by_fraction ? "lms_set_device_fraction's limit" : "LMS_DEVICE_LIMIT",
                 fmt(limit, a), fmt(free_b, b), b);
        limit = free_b;
        r->from[SWAP_SET_DEVICE_LIMIT] = SWAP_FROM_CLAMPED;
    }
    r->budget = limit / r->chunk;
    if (r->budget == 0) {
        char what[64];
        if (by_fraction)
            snprintf(what, sizeof what, "lms_set_device_fraction(%g)", cfg->device_fraction);
        return base_fail(LMS_ERR_INVALID, "lms_init: the device limit %s (%s) is less than one "
                         "chunk (%s)", fmt(limit, a), by_fraction ? what : "LMS_DEVICE_LIMIT",
                         fmt(r->chunk, b));
    }
    return LMS_OK;
}

static lms_status_t resolve_host_limit(const swap_config_t *cfg, const swap_facts_t *f,
                                       swap_resolved_t *r)
{
    char a[32], b[32];
    if (!cfg->swap) {
        r->host_limit = 0;
        r->from[SWAP_SET_HOST_LIMIT] = cfg->host_limit ? SWAP_FROM_CLAMPED : SWAP_FROM_DEFAULT;
        return LMS_OK;
    }
    r->host_limit = cfg->host_limit ? cfg->host_limit
                                    : (f->node_bytes > 0 ? f->node_bytes : f->ram_bytes) / 2;
    if (r->host_limit > f->ram_bytes)
        return base_fail(LMS_ERR_INVALID, "lms_init: LMS_HOST_LIMIT=%s is more than this machine's "
                         "memory (%s)", fmt(r->host_limit, a), fmt(f->ram_bytes, b));
    return LMS_OK;
}

static lms_status_t resolve_va(const swap_config_t *cfg, swap_resolved_t *r)
{
    char a[32], b[32];
    size_t chunk = r->chunk, limit = r->budget * chunk;
    if (cfg->va_reserve > SWAP_VA_MAX)
        return base_fail(LMS_ERR_INVALID, "lms_init: LMS_VA_RESERVE=%s is more than lms reserves "
                         "(%s, the user address space of x86-64)", fmt(cfg->va_reserve, a),
                         fmt(SWAP_VA_MAX, b));
    /* device memory + RAM at most, so no wrap; saturated for facts beyond */
    size_t room = r->host_limit > SIZE_MAX - limit ? SIZE_MAX : limit + r->host_limit;
    size_t va = cfg->va_reserve ? cfg->va_reserve : room < SWAP_VA_MAX / 4 ? 4 * room : SWAP_VA_MAX;
    bool clamped = false;
    if (va / chunk >= UINT32_MAX) { /* chunk ids are 32 bits (a sim of 4 KiB blocks) */
        va = (size_t)(UINT32_MAX - 1) * chunk;
        clamped = cfg->va_reserve != 0;
    }
    va = (va + chunk - 1) / chunk * chunk;
    if (va < limit) {
        base_log(BASE_LOG_WARN, "LMS_VA_RESERVE=%s is less than the device limit (%s); "
                 "reserving %s", fmt(cfg->va_reserve, a), fmt(limit, b), b);
        va = limit;
        clamped = true;
    }
    if (clamped)
        r->from[SWAP_SET_VA_RESERVE] = SWAP_FROM_CLAMPED;
    r->va_size = va;
    r->nchunks = va / chunk;
    return LMS_OK;
}

static void resolve_large_threshold(const swap_config_t *cfg, swap_resolved_t *r)
{
    size_t chunk = r->chunk, large = cfg->large_threshold;
    if (!alloc_large_threshold_ok(chunk, large)) {
        base_log(BASE_LOG_WARN, "LMS_LARGE_THRESHOLD=%zu: must be 4 KiB..16 chunks (%zu bytes); "
                 "using the default, 8 chunks", large, 16 * chunk);
        large = 0;
        r->from[SWAP_SET_LARGE_THRESHOLD] = SWAP_FROM_CLAMPED;
    }
    r->large_threshold = large ? large : ALLOC_DEFAULT_LARGE_CHUNKS * chunk;
}

/* The reclaim watermarks must lie inside the device limit, and low at most
 * high when both are set. Bad ones are said and both defaults used. One set
 * alone moves the other's default: high is at least low + 1 chunk. */
static void resolve_watermarks(const swap_config_t *cfg, swap_resolved_t *r)
{
    char a[32], b[32], c[32];
    size_t chunk = r->chunk, limit = r->budget * chunk;
    size_t low_b = cfg->reclaim_low, high_b = cfg->reclaim_high;
    const char *wrong = low_b >= limit && low_b != 0                ? "LMS_RECLAIM_LOW"
                        : high_b >= limit && high_b != 0            ? "LMS_RECLAIM_HIGH"
                        : low_b != 0 && high_b != 0 && low_b > high_b ? "low above high"
                                                                      : NULL;
    if (wrong != NULL) {
        base_log(BASE_LOG_WARN, "LMS_RECLAIM_LOW=%s, LMS_RECLAIM_HIGH=%s: %s: each must be less "
                 "than the device limit (%s), and low at most high; using the defaults (limit / 32 "
                 "and limit / 16)", fmt(low_b, a), fmt(high_b, b), wrong, fmt(limit, c));
        r->from[SWAP_SET_RECLAIM_LOW] = low_b ? SWAP_FROM_CLAMPED : SWAP_FROM_DEFAULT;
        r->from[SWAP_SET_RECLAIM_HIGH] = high_b ? SWAP_FROM_CLAMPED : SWAP_FROM_DEFAULT;
        low_b = high_b = 0;
    }
    size_t low = low_b ? low_b / chunk : r->budget / 32;
    size_t high = high_b ? high_b / chunk : r->budget / 16;
    if (low < 1 && low_b != 0) /* a given watermark under a chunk */
        r->from[SWAP_SET_RECLAIM_LOW] = SWAP_FROM_CLAMPED;
    r->low = low < 1 ? 1 : low;
    if (high <= r->low && high_b != 0)
        r->from[SWAP_SET_RECLAIM_HIGH] = SWAP_FROM_CLAMPED;
    r->high = high <= r->low ? r->low + 1 : high;
}

static void resolve_piece(const swap_config_t *cfg, swap_resolved_t *r)
{
    size_t piece = (cfg->swap_piece ? cfg->swap_piece : SWAP_PIECE_DEFAULT) / r->chunk;
    if (cfg->swap_piece && (piece < 1 || piece > SWAP_MAX_RUN))
        r->from[SWAP_SET_SWAP_PIECE] = SWAP_FROM_CLAMPED;
    r->piece = piece < 1 ? 1 : piece > SWAP_MAX_RUN ? SWAP_MAX_RUN : piece;
}

/* Note [Evicted mode]. The message names the variable as the program set it. */
static lms_status_t resolve_evicted(const swap_config_t *cfg, bool from_options,
                                    const swap_facts_t *f, swap_resolved_t *r)
{
    const char *word = cfg->evicted != NULL && cfg->evicted[0] != '\0' ? cfg->evicted : "auto";
    const char *var = from_options ? "LMS_EVICTED" : "swap_config_t.evicted";
    bool host = strcasecmp(word, "host") == 0, unmapped = strcasecmp(word, "unmapped") == 0;
    if (!host && !unmapped && strcasecmp(word, "auto") != 0)
        return base_fail(LMS_ERR_INVALID, "lms_init: %s=%s: not auto, unmapped or host", var,
                         word);
    const char *why = f->host_blocks_why != NULL && f->host_blocks_why[0] != '\0'
                          ? f->host_blocks_why
                          : "not said";
    r->evicted = SWAP_EVICTED_UNMAPPED;
    if (!cfg->swap)
        snprintf(r->evicted_why, sizeof r->evicted_why, "no swapping: nothing is evicted");
    else if (unmapped)
        snprintf(r->evicted_why, sizeof r->evicted_why, "%s=%s", var, word);
    else if (host && !f->host_blocks)
        return base_fail(LMS_ERR_UNSUPPORTED, "lms_init: %s=host: this device cannot map host "
                         "memory at device addresses (%s); use unmapped or auto", var, why);
    else if (host) {
        r->evicted = SWAP_EVICTED_HOST;
        snprintf(r->evicted_why, sizeof r->evicted_why, "%s=%s", var, word);
    } else if (!f->host_blocks)
        snprintf(r->evicted_why, sizeof r->evicted_why,
                 "auto: this device cannot map host memory at device addresses (%s)", why);
    else
        snprintf(r->evicted_why, sizeof r->evicted_why,
                 "auto: host-mapped eviction not measured on a card yet%s",
                 f->unseen ? "" : "; not under the preload or the PyTorch plugin");
    return LMS_OK;
}

lms_status_t swap_config_resolve(const swap_config_t *cfg, bool from_options,
                                 const swap_facts_t *facts, swap_resolved_t *out)
{
    char a[32], b[32];
    if (cfg == NULL || facts == NULL || out == NULL)
        return base_fail(LMS_ERR_INVALID, "swap_config_resolve: NULL argument");
    if (facts->granularity == 0)
        return base_fail(LMS_ERR_INVALID, "swap_config_resolve: the device's granularity is 0");
    bool env[SWAP_SETTING_COUNT] = {false};
    if (from_options)
        base_options_each(note_env, env);
    const size_t value[SWAP_SETTING_COUNT] = {
        [SWAP_SET_DEVICE_LIMIT] = cfg->device_limit, [SWAP_SET_HOST_LIMIT] = cfg->host_limit,
        [SWAP_SET_VA_RESERVE] = cfg->va_reserve, [SWAP_SET_LARGE_THRESHOLD] = cfg->large_threshold,
        [SWAP_SET_RECLAIM_LOW] = cfg->reclaim_low, [SWAP_SET_RECLAIM_HIGH] = cfg->reclaim_high,
        [SWAP_SET_SWAP_PIECE] = cfg->swap_piece, [SWAP_SET_THREAD_CACHE] = cfg->thread_cache,
    };
    swap_resolved_t r = {.chunk = facts->granularity, .thread_cache = cfg->thread_cache};
    for (int s = 0; s < SWAP_SETTING_COUNT; s++)
        r.from[s] = given(env, from_options, (swap_setting_t)s, value[s]);
    lms_status_t st;
    if ((st = resolve_device_limit(cfg, facts, &r)) != LMS_OK ||
        (st = resolve_host_limit(cfg, facts, &r)) != LMS_OK || (st = resolve_va(cfg, &r)) != LMS_OK)
        return st;
    resolve_large_threshold(cfg, &r);
    resolve_watermarks(cfg, &r);
    resolve_piece(cfg, &r);
    if ((st = resolve_evicted(cfg, from_options, facts, &r)) != LMS_OK)
        return st;
    size_t host_chunks = r.host_limit / r.chunk;
    r.capacity = r.budget + (host_chunks > r.high ? host_chunks - r.high : 0);
    if (cfg->va_reserve && r.nchunks < r.capacity)
        base_log(BASE_LOG_WARN, "LMS_VA_RESERVE=%s is less than the room for allocations (%s of "
                 "the device and host limits): allocations stop at the reserved range",
                 fmt(r.va_size, a), fmt(r.capacity * r.chunk, b));
    size_t limit = r.budget * r.chunk;
    r.flush_bytes = limit / 16 > FLUSH_MAX ? FLUSH_MAX : limit / 16;
    *out = r;
    return LMS_OK;
}

/* lms_expect_unseen_access (lms.c) was called, for this start and every
 * later one: written under swap_lock, read by swap_facts_host (lms-info's,
 * with no lms). */
bool swap_unseen_expected;

lms_status_t swap_facts_device(dev_device_t *dev, swap_facts_t *facts)
{
    if (dev == NULL || facts == NULL)
        return base_fail(LMS_ERR_INVALID, "swap_facts_device: NULL argument");
    lms_status_t st = dev_mem_info(dev, &facts->free_bytes, &facts->total_bytes);
    if (st != LMS_OK)
        return st;
    facts->granularity = dev->info.granularity;
    facts->host_blocks = dev->info.host_blocks;
    facts->host_blocks_why = dev->info.host_blocks_why;
    return LMS_OK;
}

lms_status_t swap_facts_host(int numa_node, swap_facts_t *facts)
{
    if (facts == NULL)
        return base_fail(LMS_ERR_INVALID, "swap_facts_host: NULL facts");
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0)
        return base_fail(LMS_ERR_SYSTEM, "swap_facts_host: sysconf cannot say the memory size");
    /* With one node the node is the machine, and sysconf says its size: a
     * VM's node0/meminfo can say less, and grow as memory is touched (an
     * H200 VM's went 4.3 to 35 GiB in a minute, of 126 GiB; the default host
     * limit, half of it, failed GPT-2 at 2x; docs/gpu-results.md) */
    long long node = numa_node >= 0 && numa_available() >= 0 && numa_num_configured_nodes() > 1
                         ? numa_node_size64(numa_node, NULL)
                         : -1;
    facts->node_bytes = node > 0 ? (uint64_t)node : 0;
    facts->ram_bytes = (uint64_t)pages * (uint64_t)page;
    facts->unseen = __atomic_load_n(&swap_unseen_expected, __ATOMIC_RELAXED);
    return LMS_OK;
}

lms_status_t swap_resolved_each(const swap_resolved_t *r,
                                void (*fn)(const char *var, uint64_t bytes, swap_origin_t from,
                                           void *arg),
                                void *arg)
{
    if (r == NULL || fn == NULL)
        return base_fail(LMS_ERR_INVALID, "swap_resolved_each: NULL argument");
    const uint64_t bytes[SWAP_SETTING_COUNT] = {
        [SWAP_SET_DEVICE_LIMIT] = r->budget * r->chunk, [SWAP_SET_HOST_LIMIT] = r->host_limit,
        [SWAP_SET_VA_RESERVE] = r->va_size, [SWAP_SET_LARGE_THRESHOLD] = r->large_threshold,
        [SWAP_SET_RECLAIM_LOW] = r->low * r->chunk, [SWAP_SET_RECLAIM_HIGH] = r->high * r->chunk,
        [SWAP_SET_SWAP_PIECE] = r->piece * r->chunk, [SWAP_SET_THREAD_CACHE] = r->thread_cache,
    };
    for (int s = 0; s < SWAP_SETTING_COUNT; s++)
        fn(setting_var[s], bytes[s], r->from[s], arg);
    return LMS_OK;
}

const char *swap_evicted_str(swap_evicted_t mode)
{
    static const char *const name[] = {[SWAP_EVICTED_UNMAPPED] = "unmapped",
                                       [SWAP_EVICTED_HOST] = "host"};
    return (unsigned)mode < sizeof name / sizeof *name ? name[mode] : "?";
}

const char *swap_origin_str(swap_origin_t from)
{
    switch (from) {
    case SWAP_FROM_DEFAULT:
        return "default";
    case SWAP_FROM_ENV:
        return "env";
    case SWAP_FROM_API:
        return "api";
    case SWAP_FROM_CLAMPED:
        return "clamped";
    }
    return "?";
}
