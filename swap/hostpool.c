/*
 * swap/hostpool.c — the host pool: pinned host memory on the GPU's NUMA node,
 * carved into extents by a private jemalloc arena; or, in a pool made with
 * hostpool_config_t.blocks, one-chunk slots that are host blocks of the
 * device (Note [Pools of host blocks]). See hostpool.h.
 *
 * Owns and Invariants below are the pool of extents'; Note [Pools of host
 * blocks] says what a pool of host blocks owns.
 *
 * Owns
 *   the reservation  [base, base + span): address space for the whole limit
 *                    and a page between registrations, mapped PROT_NONE and
 *                    MAP_NORESERVE at create.
 *   registrations    regs[], in address order from base, each followed by a
 *                    hole of one page: runs of whole pieces (the last may be
 *                    what is left of the limit: Note [The whole limit]), each committed
 *                    (PROT_READ|WRITE), bound to the NUMA node, faulted in
 *                    and registered with the device by one dev_host_register
 *                    call. One piece when hostpool_alloc grows, as many as
 *                    one extent needs when it is larger; what
 *                    hostpool_reserve is short of, up to
 *                    MAX_RESERVE_REGISTRATION.
 *   the arena        a jemalloc arena whose extent hooks (Note [Extent hooks])
 *                    hand out memory of the registrations and nothing else.
 *
 * Invariants
 *   - regs[] is exactly the registered memory, registered bytes in all; the
 *     rest of the reservation (the holes after registrations, and everything
 *     from base + next on) is PROT_NONE, has no pages and is not registered.
 *   - The first regs[i].used bytes of registration i have been handed to
 *     jemalloc, which keeps them (its extents or its retained free memory)
 *     until the arena is destroyed; the rest has never been touched since it
 *     was faulted in, so it is zero.
 *   - Every extent jemalloc holds lies inside one registration
 *     (Note [One registration per extent]).
 *   - allocated is the sum of the usable sizes of the extents hostpool_alloc
 *     handed out and hostpool_free has not taken back.
 *
 * No lock: the caller serializes every call, and the hooks run only inside
 * those calls, on the caller's thread (Note [Decay]).
 *
 * Note [Pools of host blocks]
 * Issue 27 maps an evicted chunk's VA to its host copy. The driver maps a
 * handle whole, at offset 0, and cannot unmap part of a mapping, so each
 * host copy must be a handle of its own of exactly one chunk: a host block
 * (device/device.h), which is one granularity, the chunk. A pool made with
 * hostpool_config_t.blocks hands out such slots. It owns
 *   the window       [window, window + reserved): device VA reserved for the
 *                    whole limit at create (dev_va_reserve).
 *   the blocks       slot[i] is the host block mapped at window + i x chunk,
 *                    for i < made; growth makes a piece's worth (what is left
 *                    of the limit at the end: Note [The whole limit]), maps
 *                    each at the next slots and opens them to the device and
 *                    the CPU with one set_access_host call, so that a slot's
 *                    address is a host pointer, for the CPU and for copies,
 *                    as an extent's is. Opening costs a driver call per run
 *                    (48 us for one 2 MiB block on the H200, docs/gpu-results.md):
 *                    off the swap path, as registering is. A failure undoes
 *                    that growth's maps and blocks: the pool is as it was.
 *   the bitmap       busy, bit i set while slot i is handed out. alloc takes
 *                    the lowest free slot, so that the slots in use stay
 *                    packed at the window's start; no slot below `lowest` is
 *                    free.
 * hostpool_block names slot i's block, which swap/ maps a second time at the
 * chunk's own VA; the slot's mapping stays, as the address of the host copy.
 * Blocks are never released while the pool lives, as registered memory is
 * not. registered is made x chunk and allocated the slots in use x chunk, so
 * the limit, hostpool_reserve and the messages read as for extents. Whether
 * one copy may span the handles of two adjacent slots on cuda is not
 * measured yet (issue 27): nothing here promises it.
 *
 * Note [Extent hooks]
 * jemalloc calls the hooks under its own arena locks, with the contract of
 * arena.<i>.extent_hooks in its manual:
 *   alloc         returns size bytes aligned to alignment, or NULL leaving
 *                 *zero and *commit alone; must return new_addr itself when
 *                 that is not NULL; must zero if *zero and commit if *commit
 *                 on entry, and says in them what it did. Ours takes the
 *                 lowest free range of a registration that fits (first fit
 *                 over regs[], a bump pointer in each); memory it returns
 *                 has never been handed out, so it is zero and committed.
 *                 It never grows the pool: when nothing fits it notes what a
 *                 new registration would need (want) and fails, and
 *                 hostpool_alloc decides whether to grow and retries.
 *   dalloc        refuses (true): jemalloc keeps the extent, mapped and
 *                 committed, as retained memory and reuses it.
 *   destroy       nothing to do: hostpool_destroy unregisters and unmaps.
 *   commit        succeeds: the memory is committed (and nothing decommits).
 *   decommit, purge_lazy, purge_forced
 *                 refuse: pinned pages are never given back to the system.
 *   split         succeeds for a range inside one registration.
 *   merge         succeeds for two adjacent ranges of one registration.
 *
 * Note [One registration per extent]
 * A copy must not span two registrations. The CUDA documentation promises
 * fast async copies only for ranges "entirely registered", and does not say
 * that a range over two cuMemHostRegister ranges counts; sglang saw
 * cudaMemcpyBatchAsync fail with "invalid argument" on exactly that
 * (sgl-project/sglang#36798). lms's copies are whole extents, or parts of
 * one, so no extent may span two registrations:
 *   - the alloc hook takes each range from one registration;
 *   - the merge hook refuses to join ranges of two registrations, and the
 *     split hook to split a range that is not inside one;
 *   - a request larger than a piece grows the pool by one registration of
 *     enough pieces;
 *   - registrations never touch: a page that is never committed follows each
 *     one. So two extents whose addresses are contiguous are in the same
 *     registration, and a copy over adjacent extents (swap/residency.c moves
 *     chunks with adjacent host copies as one) stays inside one.
 * The cost: the unused tail of a registration serves only requests that fit
 * in it (the hook keeps it for them; it is never lost).
 *
 * Note [The whole limit]
 * The pool holds the limit rounded down to a page, not to whole pieces: the
 * registration that reaches the limit is what is left of it, shorter than a
 * piece. swap/ admits allocations for the whole host limit (lms.h: what is
 * allocated always has somewhere to be), so a pool that stopped at the last
 * whole piece failed an access with "no pinned host memory left" on memory
 * lms_malloc had accepted, whenever LMS_HOST_LIMIT was not a multiple of
 * 256 MiB: the default, half the NUMA node, included (issue 24).
 *
 * Note [Decay]
 * dirty_decay_ms and muzzy_decay_ms are -1 for this arena: jemalloc never
 * purges it by itself. Purging could not give pages back anyway (the hooks
 * refuse), and -1 keeps the hooks on the caller's thread: with decay on,
 * jemalloc's background threads (off unless LMS_JE_MALLOC_CONF turns them on)
 * and its eager purge of freed oversize extents would run our hooks on other
 * threads, while hostpool_alloc may be growing regs[]. Freed extents stay
 * "dirty" and are reused from there, but jemalloc splits a dirty extent only
 * for a request at least 1/64 of its size (opt.lg_extent_max_active_fit);
 * so on a miss hostpool_alloc purges the arena (arena.<i>.purge) before it
 * tries again or grows. With our hooks that moves the dirty extents to
 * jemalloc's retained set, where they coalesce and split without that limit;
 * no page is purged.
 *
 * Note [Exact requests]
 * The alloc hook should be asked for what an extent needs, no more. With
 * opt.retain on (jemalloc's default on Linux) it is not: jemalloc asks for
 * ever larger ranges (2 MiB, 2.5 MiB, 3 MiB, ... or, with retain_grow_limit,
 * the request rounded up to a page size class) and keeps the rest, and that
 * rest never merges with a range from another hook call ("head" extents), so
 * a 0.5 MiB remainder can never serve the 2 MiB requests lms makes. lms's
 * private jemalloc therefore runs with retain:false (lms_je_malloc_conf
 * below, read when jemalloc starts; base/meta.c's arena then unmaps what it
 * frees, as jemalloc does on most platforms). Then the hook is asked for
 * exactly the extent's size, ranges from different calls merge (inside one
 * registration: our merge hook), and jemalloc still keeps every extent our
 * dalloc hook refuses. If LMS_JE_MALLOC_CONF turns retain on again, the pool
 * still works and retain_grow_limit (one page) keeps the waste to the
 * rounding to page size classes.
 *
 * Note [Page padding]
 * jemalloc built with cache_oblivious (its default; a configure option, not
 * a runtime one) adds a page to every large extent (16 KiB and up): a 2 MiB
 * extent would occupy 2 MiB + 4 KiB of the pool, and a registration of n
 * chunks hold n - 1 chunk extents and a tail. lms builds its jemalloc with
 * --disable-cache-oblivious (CMakeLists.txt). Built otherwise, the pool
 * still works: it counts that page as occupied (hostpool_reserve), and
 * MALLOCX_ALIGN(page) keeps extents page-aligned (it turns off the random
 * offset cache_oblivious gives them).
 *
 * Note [Arena metadata]
 * An arena made with "arenas.create" allocates its own metadata (the edata_t
 * of every extent, in 2 MiB blocks) through its extent hooks: from pinned
 * memory, and before anything is registered. jemalloc 5.3's
 * "experimental.arenas_create_ext" takes { hooks, metadata_use_hooks }; with
 * false the metadata comes from ordinary mmap. The struct is jemalloc's
 * internal arena_config_t, so create checks that the running jemalloc is 5.3
 * (the version lms builds) and jemalloc checks the struct's size.
 */
#include <errno.h>
#include <inttypes.h>
#include <numa.h>
#include <numaif.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <lms_jemalloc.h>

#include "base/base.h"
#include "swap/hostpool.h"

/* See Note [Exact requests]. lms's private jemalloc reads this when it starts. */
const char *lms_je_malloc_conf = "retain:false";

#define DEFAULT_PIECE (256 * BASE_MiB)
#define MAX_NODES 1024 /* NUMA nodes a node number may name */
/* hostpool_reserve registers at most this much in one dev_host_register call:
 * one pinning call over hundreds of GiB fails on recent drivers. */
#define MAX_RESERVE_REGISTRATION (16 * BASE_GiB)

typedef struct registration {
    char *base;
    size_t size; /* a multiple of the piece, or the limit's remainder */
    size_t used; /* bytes from base handed to jemalloc (Note [Extent hooks]) */
} registration_t;

/* jemalloc 5.3's arena_config_t (include/jemalloc/internal/arena_types.h),
 * for "experimental.arenas_create_ext": Note [Arena metadata]. */
typedef struct je_arena_config {
    extent_hooks_t *extent_hooks;
    bool metadata_use_hooks;
} je_arena_config_t;

struct hostpool {
    extent_hooks_t hooks; /* what jemalloc passes back to every hook: pool_of() */
    dev_device_t *dev;
    char *base;           /* the reservation */
    size_t span;          /* its size: reserved, and a page for each registration */
    size_t reserved;      /* the limit rounded down to a page (Note [The whole limit]) */
    size_t piece;
    size_t page;          /* the larger of the OS's and jemalloc's page */
    size_t os_page;       /* extents are multiples of it */
    int numa_node;        /* bound to; -1 none */
    unsigned arena;       /* jemalloc's index */
    bool have_arena;
    int flags;            /* for every *allocx call */
    size_t large_min;     /* smallest large size class: extents at least this big */
    size_t large_pad;     /* bytes jemalloc adds to each large extent (Note [Page padding]) */
    registration_t *regs; /* in address order, back to back from base */
    size_t nregs, capregs;
    size_t registered;    /* bytes in regs[] */
    size_t next;          /* offset from base of the next registration */
    size_t allocated;     /* usable bytes in extents handed out */
    size_t padded;        /* extents handed out that carry large_pad */
    size_t want;          /* since the last reset: the fewest bytes a fresh
                             registration needs for a request the alloc hook
                             refused; SIZE_MAX: none refused */
    /* a pool of host blocks only (Note [Pools of host blocks]); reserved and
     * piece are multiples of chunk, and registered and allocated count it */
    bool blocks;
    size_t chunk;         /* a slot's bytes: one host block */
    size_t stuck;         /* blocks of a failed growth still mapped at slots [made, made +
                             stuck): their unmap failed; the next growth unmaps them first */
    dev_addr_t window;    /* reserved bytes of device VA; 0 until reserved */
    dev_block_t *slot;    /* slot[i]: the block mapped at slot i, i < made */
    uint64_t *busy;       /* bit i: slot i is handed out */
    size_t made;          /* slots with a block, mapped and opened */
    size_t lowest;        /* no slot below it is free */
};

static size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

static hostpool_t *pool_of(extent_hooks_t *hooks)
{
    return (hostpool_t *)((char *)hooks - offsetof(hostpool_t, hooks));
}

/* The registration holding addr, or NULL. */
static registration_t *registration_of(hostpool_t *hp, const void *addr)
{
    const char *a = addr;
    if (hp->nregs == 0 || a < hp->base || a >= hp->base + hp->next)
        return NULL;
    size_t lo = 0, hi = hp->nregs; /* regs[lo].base <= a < regs[hi].base */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (hp->regs[mid].base <= a)
            lo = mid;
        else
            hi = mid;
    }
    return a < hp->regs[lo].base + hp->regs[lo].size ? &hp->regs[lo] : NULL; /* not in the hole */
}

static bool inside(const registration_t *r, const void *addr, size_t size)
{
    const char *a = addr;
    return r != NULL && a >= r->base && size <= r->size && (size_t)(a - r->base) <= r->size - size;
}

/* ---- extent hooks: Note [Extent hooks] --------------------------------------- */

static void *hook_alloc(extent_hooks_t *hooks, void *new_addr, size_t size, size_t alignment,
                        bool *zero, bool *commit, unsigned arena_ind)
{
    (void)arena_ind;
    hostpool_t *hp = pool_of(hooks);
    for (size_t i = 0; i < hp->nregs; i++) {
        registration_t *r = &hp->regs[i];
        uintptr_t end = (uintptr_t)r->base + r->size;
        uintptr_t next = (uintptr_t)r->base + r->used;
        uintptr_t start = (next + alignment - 1) & ~(uintptr_t)(alignment - 1);
        if (new_addr != NULL && (uintptr_t)new_addr != next)
            continue; /* new_addr must be the next free byte of its registration */
        if (start < next || start > end || end - start < size)
            continue;
        r->used = start + size - (uintptr_t)r->base;
        *zero = true; /* never handed out: still the zero pages of the commit */
        *commit = true;
        return (void *)start;
    }
    if (new_addr == NULL) {
        size_t slack = alignment > hp->page ? alignment - hp->page : 0;
        if (size + slack < hp->want)
            hp->want = size + slack;
    }
    return NULL;
}

static bool hook_dalloc(extent_hooks_t *hooks, void *addr, size_t size, bool committed,
                        unsigned arena_ind)
{
    (void)hooks, (void)addr, (void)size, (void)committed, (void)arena_ind;
    return true; /* jemalloc retains it */
}

static void hook_destroy(extent_hooks_t *hooks, void *addr, size_t size, bool committed,
                         unsigned arena_ind)
{
    (void)hooks, (void)addr, (void)size, (void)committed, (void)arena_ind;
}

static bool hook_commit(extent_hooks_t *hooks, void *addr, size_t size, size_t offset,
                        size_t length, unsigned arena_ind)
{
    (void)hooks, (void)addr, (void)size, (void)offset, (void)length, (void)arena_ind;
    return false; /* committed since the registration was made */
}

static bool hook_refuse(extent_hooks_t *hooks, void *addr, size_t size, size_t offset,
                        size_t length, unsigned arena_ind)
{
    (void)hooks, (void)addr, (void)size, (void)offset, (void)length, (void)arena_ind;
    return true; /* decommit and purge: pinned pages stay */
}

static bool hook_split(extent_hooks_t *hooks, void *addr, size_t size, size_t size_a,
                       size_t size_b, bool committed, unsigned arena_ind)
{
    (void)committed, (void)arena_ind;
    hostpool_t *hp = pool_of(hooks);
    return size_a + size_b != size || !inside(registration_of(hp, addr), addr, size);
}

static bool hook_merge(extent_hooks_t *hooks, void *addr_a, size_t size_a, void *addr_b,
                       size_t size_b, bool committed, unsigned arena_ind)
{
    (void)committed, (void)arena_ind;
    hostpool_t *hp = pool_of(hooks);
    registration_t *r = registration_of(hp, addr_a);
    return (char *)addr_a + size_a != (char *)addr_b || !inside(r, addr_a, size_a + size_b);
}

static const extent_hooks_t pool_hooks = {
    .alloc = hook_alloc,
    .dalloc = hook_dalloc,
    .destroy = hook_destroy,
    .commit = hook_commit,
    .decommit = hook_refuse,
    .purge_lazy = hook_refuse,
    .purge_forced = hook_refuse,
    .split = hook_split,
    .merge = hook_merge,
};

/* ---- the arena ---------------------------------------------------------------- */

/* mallctl "arena.<i>.<what>" of the pool's arena. */
static int arena_ctl(const hostpool_t *hp, const char *what, void *oldp, size_t *oldlenp,
                     void *newp, size_t newlen)
{
    char name[64];
    snprintf(name, sizeof name, "arena.%u.%s", hp->arena, what);
    return lms_je_mallctl(name, oldp, oldlenp, newp, newlen);
}

static lms_status_t make_arena(hostpool_t *hp)
{
    const char *version = NULL;
    size_t len = sizeof version;
    if (lms_je_mallctl("version", &version, &len, NULL, 0) != 0 || strncmp(version, "5.3.", 4) != 0)
        return base_fail(LMS_ERR_UNSUPPORTED,
                         "hostpool_create: lms's jemalloc is %s, not 5.3 (Note [Arena metadata])",
                         version ? version : "of an unknown version");

    je_arena_config_t config = {.extent_hooks = &hp->hooks, .metadata_use_hooks = false};
    len = sizeof hp->arena;
    int err = lms_je_mallctl("experimental.arenas_create_ext", &hp->arena, &len, &config,
                             sizeof config);
    if (err != 0)
        return base_fail(err == EAGAIN ? LMS_ERR_OUT_OF_MEMORY : LMS_ERR_SYSTEM,
                         "hostpool_create: jemalloc cannot create an arena: %s", strerror(err));
    hp->have_arena = true;

    ssize_t never = -1; /* Note [Decay] */
    if ((err = arena_ctl(hp, "dirty_decay_ms", NULL, NULL, &never, sizeof never)) != 0 ||
        (err = arena_ctl(hp, "muzzy_decay_ms", NULL, NULL, &never, sizeof never)) != 0)
        return base_fail(LMS_ERR_SYSTEM, "hostpool_create: jemalloc cannot turn decay off: %s",
                         strerror(err));
    size_t grow_limit = hp->page;
    err = arena_ctl(hp, "retain_grow_limit", NULL, NULL, &grow_limit, sizeof grow_limit);
    if (err != 0 && err != ENOENT) /* ENOENT: opt.retain is off (Note [Exact requests]) */
        return base_fail(LMS_ERR_SYSTEM, "hostpool_create: jemalloc retain_grow_limit: %s",
                         strerror(err));

    bool cache_oblivious = false;
    len = sizeof cache_oblivious;
    size_t je_page = 0, plen = sizeof je_page;
    size_t large_min = 0, llen = sizeof large_min;
    if (lms_je_mallctl("opt.cache_oblivious", &cache_oblivious, &len, NULL, 0) != 0 ||
        lms_je_mallctl("arenas.page", &je_page, &plen, NULL, 0) != 0 ||
        lms_je_mallctl("arenas.lextent.0.size", &large_min, &llen, NULL, 0) != 0)
        return base_fail(LMS_ERR_SYSTEM, "hostpool_create: jemalloc's settings cannot be read");
    hp->large_pad = cache_oblivious ? je_page : 0;
    hp->large_min = large_min;
    /* MALLOCX_ALIGN(page): page-aligned extents whatever cache_oblivious says. */
    hp->flags = MALLOCX_ARENA(hp->arena) | MALLOCX_TCACHE_NONE | MALLOCX_ALIGN(hp->page);
    return LMS_OK;
}

/* ---- growing ------------------------------------------------------------------ */

/* Undoes a commit: the pages and the NUMA policy go, PROT_NONE again. */
static void uncommit(char *p, size_t size)
{
    if (mmap(p, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) ==
        MAP_FAILED)
        base_log(BASE_LOG_ERROR, "hostpool: cannot give back [%p, +%zu): %s", (void *)p, size,
                 strerror(errno));
}

/* Commits, binds, faults in and registers `size` bytes (whole pieces, or the
 * rest of the limit) at the next free place of the reservation, as one
 * registration followed by a hole. On failure nothing of them stays
 * committed, and the pool is as it was. */
static lms_status_t grow(hostpool_t *hp, size_t size)
{
    if (hp->nregs == hp->capregs) {
        size_t cap = hp->capregs ? 2 * hp->capregs : 8;
        registration_t *regs = base_meta_realloc(hp->regs, cap * sizeof *regs);
        if (regs == NULL)
            return base_fail(LMS_ERR_OUT_OF_MEMORY, "hostpool: no host memory for metadata");
        hp->regs = regs;
        hp->capregs = cap;
    }
    char *p = hp->base + hp->next;
    lms_status_t st;
    if (mprotect(p, size, PROT_READ | PROT_WRITE) != 0) {
        st = base_fail(LMS_ERR_SYSTEM, "hostpool: mprotect(%p, %zu): %s", (void *)p, size,
                       strerror(errno));
        goto fail;
    }
    if (hp->numa_node >= 0) {
        /* Preferred, not bound: when the node is full the pages come from
         * another one, where MPOL_BIND would call the OOM killer. */
        unsigned long mask[MAX_NODES / (8 * sizeof(unsigned long))] = {0};
        mask[hp->numa_node / (8 * sizeof(unsigned long))] |=
            1ul << (hp->numa_node % (8 * sizeof(unsigned long)));
        if (mbind(p, size, MPOL_PREFERRED, mask, MAX_NODES + 1, 0) != 0) {
            st = base_fail(LMS_ERR_SYSTEM, "hostpool: mbind to NUMA node %d: %s", hp->numa_node,
                           strerror(errno));
            goto fail;
        }
    }
    for (size_t off = 0; off < size; off += hp->os_page)
        ((volatile char *)p)[off] = 0; /* faults the page in, on the node */
    if ((st = dev_host_register(hp->dev, p, size)) != LMS_OK)
        goto fail;
    hp->regs[hp->nregs++] = (registration_t){.base = p, .size = size, .used = 0};
    hp->registered += size;
    hp->next += size + hp->page;
    return LMS_OK;
fail:
    uncommit(p, size);
    return st;
}

/* ---- sizes and messages ------------------------------------------------------ */

/* What allocated counts, for messages. */
static const char *handed_out(const hostpool_t *hp)
{
    return hp->blocks ? "in slots" : "in extents";
}

static lms_status_t out_of_limit(const hostpool_t *hp, const char *what, size_t bytes)
{
    char req[32], reg[32], lim[32], in[32];
    return base_fail(LMS_ERR_OUT_OF_MEMORY,
                     "%s: no pinned host memory left for %s: LMS_HOST_LIMIT=%s is used up "
                     "(%s registered, %s %s); raise LMS_HOST_LIMIT",
                     what, base_format_size(bytes, req, sizeof req),
                     base_format_size(hp->reserved, lim, sizeof lim),
                     base_format_size(hp->registered, reg, sizeof reg),
                     base_format_size(hp->allocated, in, sizeof in), handed_out(hp));
}

static lms_status_t no_room(const hostpool_t *hp, size_t bytes)
{
    char req[32], reg[32], in[32], lim[32];
    return base_fail(LMS_ERR_OUT_OF_MEMORY,
                     "hostpool_alloc: no room for %s in the %s of pinned memory registered "
                     "(%s %s, LMS_HOST_LIMIT=%s) without growing",
                     base_format_size(bytes, req, sizeof req),
                     base_format_size(hp->registered, reg, sizeof reg),
                     base_format_size(hp->allocated, in, sizeof in), handed_out(hp),
                     base_format_size(hp->reserved, lim, sizeof lim));
}

/* hp->reserved, the limit rounded down to `unit`, and hp->piece (cfg's; 0:
 * DEFAULT_PIECE, or the limit if smaller), which must be a multiple of it. */
static lms_status_t pool_sizes(hostpool_t *hp, const hostpool_config_t *cfg, size_t unit,
                               const char *unit_name)
{
    hp->reserved = cfg->limit / unit * unit;
    if (hp->reserved == 0)
        return base_fail(LMS_ERR_INVALID, "LMS_HOST_LIMIT=%zu is less than %s (%zu bytes): "
                         "swapping needs host memory", cfg->limit, unit_name, unit);
    size_t piece = cfg->piece != 0 ? cfg->piece : round_up(DEFAULT_PIECE, unit);
    hp->piece = cfg->piece == 0 && hp->reserved < piece ? hp->reserved : piece;
    if (hp->piece % unit != 0)
        return base_fail(LMS_ERR_INVALID,
                         "hostpool_create: piece %zu is not a positive multiple of %s (%zu)",
                         hp->piece, unit_name, unit);
    return LMS_OK;
}

static lms_status_t create_extents(hostpool_t *hp, const hostpool_config_t *cfg)
{
    size_t je_page = 0, len = sizeof je_page;
    if (lms_je_mallctl("arenas.page", &je_page, &len, NULL, 0) != 0)
        return base_fail(LMS_ERR_SYSTEM, "hostpool_create: jemalloc's page size cannot be read");
    hp->os_page = (size_t)sysconf(_SC_PAGESIZE);
    hp->page = je_page > hp->os_page ? je_page : hp->os_page;
    lms_status_t st = pool_sizes(hp, cfg, hp->page, "a page");
    if (st != LMS_OK)
        return st;

    int node = cfg->numa_node;
    if (node >= 0 && numa_available() < 0) {
        base_log(BASE_LOG_INFO, "hostpool: no NUMA support here: host memory is not bound to node %d",
                 node);
        node = -1;
    }
    if (node >= MAX_NODES || (node >= 0 && !numa_bitmask_isbitset(numa_all_nodes_ptr, (unsigned)node)))
        return base_fail(LMS_ERR_INVALID, "hostpool_create: NUMA node %d is not one this process may use",
                         node);
    hp->numa_node = node;
    /* a registration holds a piece at least, but the last */
    size_t span = hp->reserved + (hp->reserved / hp->piece + 1) * hp->page;
    void *base = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED)
        return base_fail(LMS_ERR_OUT_OF_MEMORY,
                         "hostpool_create: cannot reserve %zu bytes of address space "
                         "for LMS_HOST_LIMIT=%zu: %s", span, cfg->limit, strerror(errno));
    hp->base = base;
    hp->span = span;
    return make_arena(hp);
}

/* ---- host blocks: Note [Pools of host blocks] -------------------------------- */

/* Unmaps slots [from, from + mapped) and releases the blocks of slots
 * [from, from + made), made >= mapped. A failed release is logged and left
 * to dev_close, which releases what its caller left; a failed unmap leaves
 * those blocks mapped and made (hp->stuck, so that no growth maps over
 * them) and is returned. */
static lms_status_t unmake_blocks(hostpool_t *hp, size_t from, size_t mapped, size_t made)
{
    size_t first = 0;
    dev_addr_t va = hp->window + from * hp->chunk;
    lms_status_t st = mapped > 0 ? dev_unmap(hp->dev, va, mapped * hp->chunk) : LMS_OK;
    char why[256];
    snprintf(why, sizeof why, "%s", lms_last_error());
    if (st != LMS_OK) {
        base_log(BASE_LOG_ERROR, "hostpool: cannot unmap %zu host blocks: %s", mapped, why);
        first = mapped; /* a mapped block cannot be released */
    }
    hp->stuck = first;
    for (size_t i = first; i < made; i++)
        if (dev_block_release(hp->dev, hp->slot[from + i]) != LMS_OK)
            base_log(BASE_LOG_ERROR, "hostpool: cannot release a host block: %s", lms_last_error());
    return st == LMS_OK ? LMS_OK : base_fail(st, "%s", why);
}

/* Makes `n` blocks, maps them at the next slots and opens them with one
 * set_access_host call. On failure none of them stays: the pool is as it was. */
static lms_status_t grow_blocks(hostpool_t *hp, size_t n)
{
    dev_addr_t va = hp->window + hp->made * hp->chunk;
    dev_block_t *b = hp->slot + hp->made;
    size_t made = 0, mapped = 0;
    lms_status_t st = LMS_OK;
    if (hp->stuck > 0 && (st = unmake_blocks(hp, hp->made, hp->stuck, hp->stuck)) != LMS_OK)
        return st; /* a failed growth's blocks are still in the way */
    for (size_t i = 0; i < n; i++) {
        if ((st = dev_host_block_create(hp->dev, &b[i])) != LMS_OK)
            break;
        made++;
        if ((st = dev_map(hp->dev, va + i * hp->chunk, b[i])) != LMS_OK)
            break;
        mapped++;
    }
    if (st == LMS_OK)
        st = dev_set_access_host(hp->dev, va, n * hp->chunk);
    if (st != LMS_OK) {
        char why[256];
        snprintf(why, sizeof why, "%s", lms_last_error());
        (void)unmake_blocks(hp, hp->made, mapped, made);
        return base_fail(st, "%s", why);
    }
    hp->made += n;
    hp->registered += n * hp->chunk;
    return LMS_OK;
}

/* The slot at p, or SIZE_MAX where p is not the address of a slot handed out. */
static size_t busy_slot_of(const hostpool_t *hp, const void *p)
{
    uintptr_t a = (uintptr_t)p;
    if (a < hp->window || (a - hp->window) % hp->chunk != 0)
        return SIZE_MAX;
    size_t i = (a - hp->window) / hp->chunk;
    return i < hp->made && (hp->busy[i / 64] >> (i % 64) & 1) ? i : SIZE_MAX;
}

/* Marks the lowest free slot busy and returns it; SIZE_MAX when every slot
 * made is in use. */
static size_t take_slot(hostpool_t *hp)
{
    for (size_t w = hp->lowest / 64; w * 64 < hp->made; w++) {
        if (~hp->busy[w] == 0)
            continue;
        size_t i = w * 64 + (size_t)__builtin_ctzll(~hp->busy[w]);
        if (i >= hp->made)
            break; /* bits past made are never set */
        hp->busy[w] |= 1ull << (i % 64);
        hp->lowest = i + 1;
        return i;
    }
    hp->lowest = hp->made;
    return SIZE_MAX;
}

static lms_status_t create_blocks(hostpool_t *hp, const hostpool_config_t *cfg)
{
    const dev_info_t *info = &cfg->dev->info;
    hp->blocks = true;
    hp->numa_node = -1; /* the device places its host blocks */
    if (!info->host_blocks)
        return base_fail(LMS_ERR_UNSUPPORTED, "hostpool_create: this device cannot make host "
                         "blocks (%s)", info->host_blocks_why);
    hp->chunk = cfg->chunk != 0 ? cfg->chunk : info->granularity;
    if (hp->chunk != info->granularity)
        return base_fail(LMS_ERR_INVALID, "hostpool_create: a slot is one host block of %zu "
                         "bytes, not a chunk of %zu", info->granularity, hp->chunk);
    lms_status_t st = pool_sizes(hp, cfg, hp->chunk, "a chunk");
    if (st != LMS_OK)
        return st;
    size_t slots = hp->reserved / hp->chunk;
    hp->slot = base_meta_calloc(slots, sizeof *hp->slot);
    hp->busy = base_meta_calloc((slots + 63) / 64, sizeof *hp->busy);
    if (hp->slot == NULL || hp->busy == NULL)
        return base_fail(LMS_ERR_OUT_OF_MEMORY, "hostpool_create: no host memory for metadata");
    return dev_va_reserve(hp->dev, hp->reserved, &hp->window);
}

lms_status_t hostpool_block(const hostpool_t *hp, const void *p, dev_block_t *out)
{
    if (hp == NULL || out == NULL)
        return base_fail(LMS_ERR_INVALID, "hostpool_block: NULL argument");
    if (!hp->blocks)
        return base_fail(LMS_ERR_INVALID, "hostpool_block: the pool holds extents, not blocks");
    size_t i = busy_slot_of(hp, p);
    if (i == SIZE_MAX)
        return base_fail(LMS_ERR_INVALID, "hostpool_block: %p is not a slot handed out", p);
    *out = hp->slot[i];
    return LMS_OK;
}

/* ---- the pool's interface ---------------------------------------------------- */

lms_status_t hostpool_create(const hostpool_config_t *cfg, hostpool_t **out)
{
    if (cfg == NULL || cfg->dev == NULL || out == NULL)
        return base_fail(LMS_ERR_INVALID, "hostpool_create: NULL argument");
    hostpool_t *hp = base_meta_calloc(1, sizeof *hp);
    if (hp == NULL)
        return base_fail(LMS_ERR_OUT_OF_MEMORY, "hostpool_create: no host memory for metadata");
    hp->hooks = pool_hooks;
    hp->dev = cfg->dev;
    hp->want = SIZE_MAX;
    lms_status_t st = cfg->blocks ? create_blocks(hp, cfg) : create_extents(hp, cfg);
    if (st != LMS_OK) {
        hostpool_destroy(hp);
        return st;
    }
    *out = hp;
    return LMS_OK;
}

void hostpool_destroy(hostpool_t *hp)
{
    if (hp == NULL)
        return;
    (void)unmake_blocks(hp, 0, hp->made + hp->stuck, hp->made + hp->stuck);
    if (hp->window != 0 && dev_va_free(hp->dev, hp->window, hp->reserved) != LMS_OK)
        base_log(BASE_LOG_ERROR, "hostpool_destroy: %s", lms_last_error());
    /* jemalloc never writes into extents, so the memory may go after it. */
    int err;
    if (hp->have_arena && (err = arena_ctl(hp, "destroy", NULL, NULL, NULL, 0)) != 0)
        base_log(BASE_LOG_ERROR, "hostpool_destroy: jemalloc cannot destroy arena %u: %s",
                 hp->arena, strerror(err));
    for (size_t i = hp->nregs; i-- > 0;)
        if (dev_host_unregister(hp->dev, hp->regs[i].base) != LMS_OK)
            base_log(BASE_LOG_ERROR, "hostpool_destroy: %s", lms_last_error());
    if (hp->base != NULL && munmap(hp->base, hp->span) != 0)
        base_log(BASE_LOG_ERROR, "hostpool_destroy: munmap: %s", strerror(errno));
    base_meta_free(hp->regs);
    base_meta_free(hp->slot);
    base_meta_free(hp->busy);
    base_meta_free(hp);
}

/* An extent from what jemalloc holds or the hook can hand out without
 * growing, or NULL; then hp->want says what a new registration would need. */
static void *take(hostpool_t *hp, size_t bytes)
{
    hp->want = SIZE_MAX;
    void *p = lms_je_mallocx(bytes, hp->flags);
    if (p == NULL) {
        /* Note [Decay]; if the purge fails, so does the retry */
        (void)arena_ctl(hp, "purge", NULL, NULL, NULL, 0);
        hp->want = SIZE_MAX;
        p = lms_je_mallocx(bytes, hp->flags);
    }
    return p;
}

/* hostpool_alloc of a pool of host blocks. */
static lms_status_t alloc_slot(hostpool_t *hp, size_t bytes, bool may_grow, void **out)
{
    if (bytes != hp->chunk)
        return base_fail(LMS_ERR_INVALID, "hostpool_alloc: a pool of host blocks hands out one "
                         "chunk (%zu bytes) at a time, not %zu bytes", hp->chunk, bytes);
    size_t i;
    while ((i = take_slot(hp)) == SIZE_MAX) {
        size_t left = hp->reserved - hp->registered;
        if (!may_grow)
            return no_room(hp, bytes);
        if (left == 0)
            return out_of_limit(hp, "hostpool_alloc", bytes);
        lms_status_t st = grow_blocks(hp, (left < hp->piece ? left : hp->piece) / hp->chunk);
        if (st != LMS_OK)
            return st;
    }
    hp->allocated += hp->chunk;
    *out = (void *)(uintptr_t)(hp->window + i * hp->chunk);
    return LMS_OK;
}

lms_status_t hostpool_alloc(hostpool_t *hp, size_t bytes, bool may_grow, void **out)
{
    if (hp == NULL || out == NULL)
        return base_fail(LMS_ERR_INVALID, "hostpool_alloc: NULL argument");
    if (hp->blocks)
        return alloc_slot(hp, bytes, may_grow, out);
    if (bytes == 0 || bytes % hp->os_page != 0)
        return base_fail(LMS_ERR_INVALID, "hostpool_alloc: %zu bytes is not a positive multiple of the page",
                         bytes);
    size_t usable = lms_je_nallocx(bytes, hp->flags);
    if (usable == 0 || usable + hp->large_pad > hp->reserved)
        return out_of_limit(hp, "hostpool_alloc", bytes);
    void *p;
    while ((p = take(hp, bytes)) == NULL) {
        if (!may_grow)
            return no_room(hp, bytes);
        if (hp->want == SIZE_MAX) /* jemalloc failed before asking the hook */
            return base_fail(LMS_ERR_OUT_OF_MEMORY,
                             "hostpool_alloc: jemalloc cannot allocate %zu bytes (no memory for its metadata)",
                             bytes);
        size_t size = round_up(hp->want, hp->piece), left = hp->reserved - hp->registered;
        if (size > left && hp->want <= left)
            size = left; /* Note [The whole limit] */
        if (size > left)
            return out_of_limit(hp, "hostpool_alloc", bytes);
        lms_status_t st = grow(hp, size);
        if (st != LMS_OK)
            return st;
    }
    usable = lms_je_sallocx(p, hp->flags);
    hp->allocated += usable;
    if (hp->large_pad != 0 && usable >= hp->large_min)
        hp->padded++;
    *out = p;
    return LMS_OK;
}

lms_status_t hostpool_free(hostpool_t *hp, void *p)
{
    if (p == NULL)
        return LMS_OK;
    if (hp == NULL)
        return base_fail(LMS_ERR_INVALID, "hostpool_free: NULL pool");
    if (hp->blocks) {
        size_t i = busy_slot_of(hp, p);
        if (i == SIZE_MAX)
            return base_fail(LMS_ERR_INVALID, "hostpool_free: %p is not a slot handed out", p);
        hp->busy[i / 64] &= ~(1ull << (i % 64));
        hp->lowest = i < hp->lowest ? i : hp->lowest;
        hp->allocated -= hp->chunk;
        return LMS_OK;
    }
    if (registration_of(hp, p) == NULL)
        return base_fail(LMS_ERR_INVALID, "hostpool_free: %p is not in the pool", p);
    size_t usable = lms_je_sallocx(p, hp->flags);
    lms_je_dallocx(p, hp->flags);
    hp->allocated -= usable;
    if (hp->large_pad != 0 && usable >= hp->large_min)
        hp->padded--;
    return LMS_OK;
}

size_t hostpool_usable(const hostpool_t *hp, size_t bytes)
{
    if (hp->blocks)
        return bytes == hp->chunk ? bytes : 0;
    return bytes == 0 ? 0 : lms_je_nallocx(bytes, hp->flags);
}

/*
 * What counts as free: every registered byte not in an extent (nor in the
 * padding of one). That is optimistic where free memory is fragmented into
 * ranges smaller than a later request, or sits in a registration's tail too
 * short for it: a later hostpool_alloc without growing can still fail then,
 * and its caller grows. jemalloc cannot tell more cheaply which requests
 * its free extents could serve. A pool of host blocks grows a piece at a
 * time, and every free slot serves.
 */
lms_status_t hostpool_reserve(hostpool_t *hp, size_t bytes)
{
    if (hp == NULL)
        return base_fail(LMS_ERR_INVALID, "hostpool_reserve: NULL pool");
    for (;;) {
        size_t occupied = hp->allocated + hp->padded * hp->large_pad;
        size_t free = hp->registered > occupied ? hp->registered - occupied : 0;
        if (free >= bytes)
            return LMS_OK;
        size_t left = hp->reserved - hp->registered;
        if (left == 0)
            return out_of_limit(hp, "hostpool_reserve", bytes - free);
        size_t most = MAX_RESERVE_REGISTRATION / hp->piece * hp->piece;
        if (most < hp->piece || hp->blocks)
            most = hp->piece;
        most = most < left ? most : left;
        size_t size = bytes - free >= most ? most : round_up(bytes - free, hp->piece);
        size = size < left ? size : left; /* Note [The whole limit] */
        lms_status_t st = hp->blocks ? grow_blocks(hp, size / hp->chunk) : grow(hp, size);
        if (st != LMS_OK)
            return st;
    }
}

/* NULL (no pool: swapping is off) reads as an empty pool with no room. */
void hostpool_usage(const hostpool_t *hp, hostpool_usage_t *out)
{
    if (hp == NULL) {
        *out = (hostpool_usage_t){.numa_node = -1};
        return;
    }
    *out = (hostpool_usage_t){
        .allocated = hp->allocated,
        .registered = hp->registered,
        .limit = hp->reserved,
        .numa_node = hp->numa_node,
    };
}
