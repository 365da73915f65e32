/*
 * bench/simulate_model.h — the model's state, shared by simulate_model.c
 * (the model: links, the VMM queue, chunks, kernels, the event loop) and
 * simulate_policy.c (what the policies do beside it), and nothing else.
 */
#ifndef LMS_BENCH_SIMULATE_MODEL_H
#define LMS_BENCH_SIMULATE_MODEL_H

#include "bench/simulate.h"
#include "policy/policy.h"
#include "swap/need.h"

#define MAX_FETCH SIM_CONFORM_MAX /* chunks asked of policy_prefetch at a time */
/* A VMM queue entry is a chunk id and its kind, in the two bits above the
 * ids (below SIM_MAX_PLACED): a fetch (no bit: the host block's unmap if
 * its addresses map one, map, set_access), an eviction's unmap, a host
 * block's remap (map, set_access) or unmap alone (Note [Host-mapped
 * eviction in the simulator] in simulate_model.c). */
#define VMM_UNMAP 0x80000000u
#define VMM_REMAP 0x40000000u
#define VMM_HUNMAP (VMM_UNMAP | VMM_REMAP)
#define VMM_KIND VMM_HUNMAP
_Static_assert(SIM_MAX_PLACED <= VMM_REMAP, "chunk ids overlap a VMM queue entry's kind");

/* The calls of a VMM queue entry: on a device block, then on a host block. */
enum { VMM_MAP, VMM_ACCESS, VMM_UNMAP_CALL, VMM_HMAP, VMM_HACCESS, VMM_HUNMAP_CALL };

/* Where an evicted chunk's host remap is (--evicted host). */
/* DEFERRED: EVICTING, its copy done, on its block until the copies out end;
 * UNMAP: its block's unmap queued, the host map follows; QUEUED: that. */
enum { REMAP_NONE, REMAP_DEFERRED, REMAP_UNMAP, REMAP_QUEUED };

/* A chunk goes through swap/'s states (swap/need.h). */

typedef struct chunk {
    uint8_t state;
    uint8_t pins;     /* the prepared and the running kernel that name it: 0..2 */
    bool live;        /* allocated */
    bool discard;     /* freed while a copy or map was in flight: drop its result */
    bool queued;      /* on the host, waiting for a block to be prefetched into */
    bool dirty;       /* the host has no copy of its current data */
    bool ahead;       /* prefetched and not yet used */
    bool va_host;     /* its addresses map its host block (--evicted host) */
    uint8_t remap;    /* REMAP_*: its host block waits to be mapped there */
    uint32_t version; /* of its data (0: none yet); each w/o makes a new one */
    uint32_t dev_version, host_version; /* what the block and the host copy hold */
    uint32_t cand;                      /* index in the candidate set, SIM_NONE: not evictable */
} chunk_t;

typedef struct ring {
    uint32_t *v;
    size_t head, n, cap;
} ring_t;

typedef struct link {
    double rate;      /* bytes per ns, alone */
    ring_t q;         /* chunks; the head is on the wire */
    double left;      /* bytes of the head still to move */
    uint64_t done_at; /* when the head lands at the current rates */
} link_t;

typedef struct prep {
    long op;         /* the kernel, -1: none */
    uint32_t *chunk; /* the chunks it names, whether it needs their data, */
    bool *needs;
    bool *cut;       /* and whether each is the first its access listed (start_kernel) */
    size_t n, cap;
    size_t backed; /* chunk[0 .. backed) all hold blocks */
    size_t ready;  /* chunk[0 .. ready) all resident */
} prep_t;

typedef struct model {
    const sim_workload_t *w;
    const sim_config_t *cfg;
    const sim_iters_t *its;
    const sim_vdnn_plan_t *plan; /* NULL unless vdnn with hints */
    sim_policy_t pol;
    policy_t *p;
    uint64_t chunk;
    uint32_t capacity, free_blocks;
    uint32_t low, high; /* lms's reclaim watermarks for the capacity (reclaim) */
    uint32_t waiting;  /* blocks the prepared kernel still waits for */
    uint32_t evicting; /* evictions whose blocks are not yet free */
    chunk_t *c;
    uint32_t *cand; /* the evictable chunks */
    uint32_t *listed; /* per chunk: the kernel op + 1 that last listed it (prep_take) */
    uint64_t *ranked; /* scratch of rank(): key, chunk pairs */
    int64_t blocks_ahead; /* policy_prefetch's: what to keep free while following */
    size_t ranked_n;      /* in ranked, while ranked_ok (a plan's ranking) */
    bool ranked_ok;
    size_t ncand;
    link_t h2d, d2h;
    uint64_t links_at; /* when the links' progress was last taken */
    ring_t vmm;        /* chunk ids, VMM_UNMAP set for an unmap */
    uint8_t vmm_call;  /* the head's call: VMM_MAP, VMM_ACCESS or VMM_UNMAP_CALL */
    double vmm_left;   /* the fraction of that call still to run, */
    double vmm_ns;     /* at this many ns for the whole call, */
    uint64_t vmm_done; /* so it ends then */
    uint32_t vmm_fetches; /* fetches' entries in the VMM queue (map and set_access) */
    bool vmm_deferred;  /* a prefetch waits for the D2H link to go idle (vmm_defer_ahead) */
    ring_t remaps;        /* chunks whose remap is deferred (and stale entries) */
    uint32_t remaps_pending; /* remaps deferred, or their unmap or host map queued */
    ring_t pq;            /* prefetched chunks waiting for a block (and stale entries) */
    uint32_t queued;      /* chunks waiting in pq */
    uint64_t h2d_pending; /* bytes to the device issued and not landed */
    uint64_t now, version;
    size_t cursor, iter; /* the next op; the iteration the running kernel is in */
    prep_t prep, run;    /* the prepared kernel, the running one */
    uint64_t run_end;
    uint64_t win_start; /* when the current iteration's time began */
    sim_result_t cur;   /* counts of the current iteration */
    sim_result_t last;  /* of the last finished one */
    policy_fetch_t fetch[MAX_FETCH];
} model_t;

/* ---- simulate_model.c, for the policies ---------------------------------------- */

/* Dies, saying where, unless ok (an invariant of the model). */
void model_invariant(bool ok, const model_t *s, uint32_t c, const char *what);
void model_ring_push(ring_t *r, uint32_t x);
uint32_t model_ring_pop(ring_t *r);
/* Chunk c, unbacked or on the host, takes a free block, and its data is
 * fetched if it has some and needs says so. */
void model_take_block(model_t *s, uint32_t c, bool needs);
/* Starts evicting resident chunk c. */
void model_evict(model_t *s, uint32_t c);
/* Queues the unmaps and host maps of the evictions deferred while copies
 * ran out (--evicted host). */
void model_flush_remaps(model_t *s);
void model_set_queued(model_t *s, uint32_t c, bool queued);
/* policy_access at the simulated now. */
void model_report(model_t *s, uint32_t first, uint32_t n, policy_kind_t kind);
/* policy_victim over the evictable set; ncand > 0. */
uint32_t model_victim(model_t *s);

/* ---- simulate_policy.c, for the model ------------------------------------------- */

/* After every event, once the prepared kernel has what it can get: the
 * policy's prefetch, eviction ahead and reclaim. */
void model_policies(model_t *s);
/* vdnn's fetches when kernel j starts, and its offloads when it is done. */
void model_vdnn_prefetch(model_t *s, size_t j);
void model_vdnn_offload(model_t *s, size_t j);

#endif /* LMS_BENCH_SIMULATE_MODEL_H */
