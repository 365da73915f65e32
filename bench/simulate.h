/*
 * bench/simulate.h — what the files of the trace-driven policy simulator
 * share (private to bench/simulate*.c):
 *   simulate.c            the program: options, rows, summaries, --check
 *   simulate_workloads.c  a workload: building one, placing its tensors,
 *                         and the generated ones (gpt, cnn)
 *   simulate_trace.c      the trace format (docs/trace-format.md)
 *   simulate_bound.c      iterations, footprints, Note [Lower bound]
 *   simulate_model.c      the discrete-event model (its state: simulate_model.h)
 *   simulate_policy.c     the policies' prefetch, reclaim and vDNN's plan
 *
 *   tensor     one allocation: its bytes, whether it is an activation and of
 *              which layer (hints for the vdnn baseline), and where
 *              sim_place put it (alloc/'s placement, or whole chunks first
 *              fit: Note [Placement in the simulator]). A trace's ids
 *              name live tensors and may be reused after a free; here each
 *              allocation is a tensor of its own, numbered in the order of
 *              the allocs.
 *   op         an alloc, a free, a kernel (its compute time, an optional
 *              layer and phase, and the tensors it touches, each with a
 *              mode), or an iteration boundary.
 *   iteration  the ops up to a boundary; ops after the last one form one
 *              more. A generated workload's first iteration also allocates
 *              and initializes the parameters and the optimizer's state.
 * Every function here exits the program when the host has no memory.
 */
#ifndef LMS_BENCH_SIMULATE_H
#define LMS_BENCH_SIMULATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "policy/policy.h"

#define SIM_NONE UINT32_MAX
#define SIM_MAX_CHUNKS 0x7fffffffu /* a device's chunks stay below: the model tags ids with bit 31 */
/* What the model can be asked to run (Note [What a trace may ask] in
 * simulate_trace.c): the chunk ids a workload's tensors may need at once,
 * a chunk's bytes, and its kernels' times added up. */
#define SIM_MAX_PLACED (1u << 20)
#define SIM_MAX_CHUNK_BYTES (1ull << 30)
#define SIM_MAX_COMPUTE_NS (1ull << 52)

typedef enum sim_mode {
    SIM_READ,      /* r: reads the tensor */
    SIM_WRITE,     /* w: reads and writes it */
    SIM_OVERWRITE, /* o: writes every byte before reading any */
} sim_mode_t;

typedef enum sim_phase { SIM_PHASE_NONE, SIM_FWD, SIM_BWD, SIM_OPT } sim_phase_t;

typedef enum sim_op_kind { SIM_ALLOC, SIM_FREE, SIM_KERNEL, SIM_ITERATION } sim_op_kind_t;

/* Where sim_place puts tensors: lms's alloc/, or whole chunks first fit. */
typedef enum sim_placement { SIM_PLACE_LMS, SIM_PLACE_CHUNKS } sim_placement_t;
extern const char *const sim_placement_name[2];

typedef struct sim_tensor {
    uint64_t bytes;
    int32_t layer;              /* -1: no hint */
    bool act;                   /* an activation: saved in forward for backward */
    uint32_t alloc_op, free_op; /* op indices; free_op SIM_NONE: never freed */
    /* Placement, by sim_place (Note [Placement in the simulator]): */
    uint64_t offset;              /* its first byte's in the range */
    uint32_t first, span;         /* the chunks its bytes touch */
    uint32_t whole, nwhole;       /* of those, the ones it fills entirely: an overwrite needs
                                     none of their data */
    uint32_t nchunks;             /* of those, the ones no other tensor shares (a run's all, a
                                     slot's those it fills); in a chunk workload, its chunks */
    uint32_t used_first, used_n;  /* the chunks that came into use at its alloc */
    uint32_t gone_first, gone_n;  /* and those that went out of use at its free */
    bool slot;                    /* in a slab's slot: policy/ hears of no free of it */
} sim_tensor_t;

typedef struct sim_access {
    uint32_t tensor;
    sim_mode_t mode;
} sim_access_t;

typedef struct sim_op {
    sim_op_kind_t kind;
    sim_phase_t phase;  /* kernels */
    int32_t layer;      /* kernels; -1: no hint */
    uint32_t tensor;    /* alloc, free */
    uint64_t ns;        /* kernels: compute time */
    uint32_t acc, nacc; /* kernels: their accesses, acc[acc .. acc + nacc) */
} sim_op_t;

typedef struct sim_workload {
    char name[64];
    char shape[256]; /* a generated workload's shape, as JSON members; "" for a trace */
    uint64_t chunk_bytes;
    uint64_t device_bytes; /* a trace's device line; 0: none */
    sim_tensor_t *tensors;
    size_t ntensors, captensors;
    sim_op_t *ops;
    size_t nops, capops;
    sim_access_t *acc;
    size_t nacc, capacc;
    /* By sim_place: */
    sim_placement_t placement;
    uint32_t *in_use;    /* per op: the chunks in use after it */
    uint32_t nchunks;    /* chunk ids used are 0 .. nchunks - 1 */
    uint32_t max_kernel; /* the most chunks one kernel touches */
    bool hints;          /* some tensor is an activation and some kernel has a layer */
} sim_workload_t;

/* The chunks a tensor of bytes takes: ceil(bytes / chunk), without overflow. */
static inline uint64_t sim_chunks_of(const sim_workload_t *w, uint64_t bytes)
{
    return bytes / w->chunk_bytes + (bytes % w->chunk_bytes != 0);
}

/* ---- the program's exits and memory (simulate_exit.c) ----------------------- */

/* "program: message" on stderr, then exit status 1 (a failure of the
 * simulator) or 2 (bad input). */
void sim_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
void sim_bad(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* *cap grown (doubling) to at least need elements of size bytes. */
void *sim_grow(void *p, size_t *cap, size_t need, size_t size);
/* n (at least 1) zeroed elements. */
void *sim_zalloc(size_t n, size_t size);

/* The model's settings (simulate_model.c): the link's and the VMM queue's
 * figures (a preset of simulate.c's, Note [Link presets], or flags), and
 * the run's. */
typedef struct sim_config {
    const char *link;          /* the preset the figures came from; NULL: none */
    bool link_changed;         /* a flag changed some of the preset's figures */
    double h2d_gbps, d2h_gbps; /* GB/s = bytes per ns, each direction alone */
    double both;               /* each direction's share of its rate while both are busy */
    /* The VMM queue's calls, us per MiB: map and set_access before a
     * fetch's H2D, set_access while a D2H copy is on the wire, unmap after
     * an eviction's D2H or a clean drop. */
    double map_us, access_us, access_d2h_us, unmap_us;
    /* --evicted host's calls on a host block, us per MiB: its map and
     * set_access at an evicted chunk's addresses (set_access at the second
     * rate while a D2H copy is on the wire), its unmap before a fetch. */
    double host_map_us, host_access_us, host_access_d2h_us, host_unmap_us;
    int iterations; /* of a generated workload */
    bool check;     /* also verify policy_victim against policy_evict_key */
    bool evict_ahead; /* the schedule evicts ahead (policy_evict_ahead); swap/ does not yet */
    bool vmm_defer;   /* --vmm-order defer (the default, as lms): Note [VMM beside copies] in
                         swap/prefetch.c */
    bool evicted_host; /* --evicted host: Note [Host-mapped eviction in the simulator] in
                          simulate_model.c */
} sim_config_t;

/* ---- the conformance check (simulate_conform.c, Note [One plan]) ---------------- */

#define SIM_CONFORM_MAX 64 /* the most fetches a plan checked may ask for */

/* A chunk of the model, as swap/'s table has it. */
typedef struct sim_conform_chunk {
    uint8_t state; /* swap/'s states (swap/need.h) */
    uint32_t pins; /* kernels that name it: swap/'s holds */
    bool live;     /* allocated */
    bool ahead;    /* fetched ahead, not yet used */
} sim_conform_chunk_t;
typedef void (*sim_conform_chunk_fn)(void *arg, uint32_t c, sim_conform_chunk_t *out);

/* With --check: makes the plan the model just made (fetch[0 .. n) of at
 * most max asked, plan, and the ranked keys: keys[2i] the i-th victim's)
 * again with swap/'s code over the same state, and exits (sim_die) naming
 * the first difference. */
void sim_conform_plan(policy_t *p, const policy_link_t *link, size_t nchunks,
                      sim_conform_chunk_fn chunk, void *arg, size_t free_blocks, size_t leaving,
                      size_t max, const policy_fetch_t *fetch, size_t n, const policy_plan_t *plan,
                      const uint64_t *keys);
/* Plans checked so far, and of those, left uncompared because swap/ would
 * sample its ranking. */
void sim_conform_counts(uint64_t *plans, uint64_t *sampled);

/* ---- building a workload (simulate_workloads.c) ------------------------------ */

void sim_init(sim_workload_t *w, const char *name, uint64_t chunk_bytes);
void sim_release(sim_workload_t *w);
uint32_t sim_alloc(sim_workload_t *w, uint64_t bytes, bool act, int32_t layer);
void sim_free(sim_workload_t *w, uint32_t tensor);
/* A kernel; sim_touch adds its accesses until the next op. A tensor named
 * again in the same kernel merges: the same mode twice stays, else w. */
void sim_kernel(sim_workload_t *w, uint64_t ns, int32_t layer, sim_phase_t phase);
void sim_touch(sim_workload_t *w, uint32_t tensor, sim_mode_t mode);
void sim_iteration(sim_workload_t *w);

/* Places the tensors on chunk ids, in op order, as placement says, and fills
 * the fields sim_place owns; exits (bad input) if it cannot. */
void sim_place(sim_workload_t *w, sim_placement_t placement);
/* Whether alloc/ places with w's chunk size (SIM_PLACE_LMS can be asked). */
bool sim_lms_places(const sim_workload_t *w);

typedef enum sim_scale { SIM_SCALE_DEFAULT, SIM_SCALE_QUICK } sim_scale_t;

/* Each writes `iterations` training steps into w (sim_init'd by the caller),
 * the first one preceded by allocating and initializing the parameters. */
void sim_gpt(sim_workload_t *w, sim_scale_t scale, int iterations);
void sim_cnn(sim_workload_t *w, sim_scale_t scale, int iterations);

/* ---- traces (simulate_trace.c) ------------------------------------------------ */

/* Reads a trace from f (named path in messages) into w (sim_init'd by the
 * caller). Returns false, with "path:line: what" in err, on malformed input. */
bool sim_trace_read(FILE *f, const char *path, sim_workload_t *w, char *err, size_t errlen);
/* The trace at path into w (sim_init'd here with chunk_bytes, named by the
 * file's name), placed as placement says; exits (bad input) if it cannot. */
void sim_trace_load(const char *path, uint64_t chunk_bytes, sim_placement_t placement,
                    sim_workload_t *w);
/* Writes w as a trace; device_bytes 0 writes no device line. */
void sim_trace_write(FILE *f, const sim_workload_t *w, uint64_t device_bytes);

/* ---- iterations and the lower bound (simulate_bound.c) ---------------------------- */

/* An iteration with at least one kernel: ops [first, end), and its last
 * kernel (when that finishes, the iteration's time ends). */
typedef struct sim_iter {
    size_t first, end, last_kernel;
} sim_iter_t;

typedef struct sim_iters {
    sim_iter_t *it; /* sim_iters_of's; the caller frees it */
    size_t n;
} sim_iters_t;

sim_iters_t sim_iters_of(const sim_workload_t *w);
/* The most chunks in use at once during the iteration, as placed
 * (simulate_workloads.c): its footprint. */
uint64_t sim_chunks_in_use(const sim_workload_t *w, const sim_iter_t *it);
/* Whether tensor t is live between op j - 1 and op j. */
bool sim_alive_at(const sim_tensor_t *t, size_t j);

typedef struct sim_bound {
    uint64_t compute_ns;            /* the iteration's kernels' times */
    uint64_t in_chunks, out_chunks; /* that must cross the link in it */
    /* Note [Phase bound]'s inputs, by sim_lower_bound: the workload (NULL:
     * the whole-step terms alone), its iteration and the device's chunks. */
    const sim_workload_t *w;
    sim_iter_t it;
    uint32_t capacity;
    bool steady;
} sim_bound_t;

/* The chunk workload of placed w into cw (sim_init'd here; the caller
 * sim_releases it): a tensor per interval in which a chunk is in use, the
 * same ops at chunk granularity, and the same iterations (Note [Chunk
 * workload]). Dies if w's placement and ops disagree. */
void sim_chunk_workload(const sim_workload_t *w, sim_workload_t *cw);
/* Note [Lower bound] at a device of capacity chunks; steady: the steady
 * state's, else one that holds for any run. w is a chunk workload (one
 * placed whole-chunk is its own); of another, it counts its tensors' nchunks. */
sim_bound_t sim_lower_bound(const sim_workload_t *w, const sim_iter_t *it, uint32_t capacity,
                            bool steady);
/* Its time in ns: the largest of compute, link and vmm over the whole step
 * (Note [Lower bound]) and of the phase bound (Note [Phase bound]), named
 * in *which ("compute", "link", "vmm" or "phases"). */
double sim_bound_ns(const sim_bound_t *b, const sim_config_t *cfg, uint64_t chunk,
                    const char **which);
/* The whole-step terms alone, the bound before Note [Phase bound]. */
double sim_bound_whole_step_ns(const sim_bound_t *b, const sim_config_t *cfg, uint64_t chunk,
                               const char **which);
/* Note [Lower bound]'s link and vmm terms, in their closed forms, against
 * the least found by trying 4000 splits of the time (the link's over the
 * time both directions run, the VMM queue's over the time set_access runs
 * beside D2H copies), for chunks of chunk_bytes: false, saying where in
 * why[0 .. n), if they differ. */
bool sim_bound_terms_agree(const sim_config_t *cfg, uint64_t chunk_bytes, char *why, size_t n);
/* Note [Phase bound] alone for iteration it at capacity chunks; steady as
 * for sim_lower_bound. */
double sim_phase_bound_ns(const sim_workload_t *w, const sim_iter_t *it, uint32_t capacity,
                          bool steady, const sim_config_t *cfg);

/* ---- the model (simulate_model.c) and the policies (simulate_policy.c) --------- */

typedef enum sim_policy { SIM_SCHEDULE, SIM_LRU, SIM_VDNN, SIM_NPOLICIES } sim_policy_t;
extern const char *const sim_policy_name[SIM_NPOLICIES];

typedef struct sim_result {
    uint64_t step_ns, compute_ns;
    uint64_t h2d, d2h;   /* bytes landed in the reported iteration */
    uint64_t prefetched; /* chunk fetches issued ahead of need */
    uint64_t fetches, evictions, clean_drops;
    uint64_t access_d2h_ns; /* the VMM queue's time on set_access beside a D2H copy */
    uint64_t vmm_ns;        /* the VMM queue's busy time */
    uint64_t host_vmm_ns;   /* of it, on host blocks' calls (--evicted host) */
    uint64_t remaps;        /* host blocks mapped at evicted chunks' addresses */
    uint64_t remaps_deferred; /* evictions left on their blocks until the copies out ended */
    bool following; /* the policy followed its schedule at the end */
} sim_result_t;

/* vdnn's plan, from the workload's hints: what to offload after each
 * kernel, what to fetch when each kernel starts (lists of tensors). */
typedef struct sim_vdnn_plan {
    uint32_t *off_at, *off; /* off[off_at[j] .. off_at[j + 1]): after op j finishes */
    uint32_t *pre_at, *pre; /* pre[pre_at[j] .. pre_at[j + 1]): when op j starts */
} sim_vdnn_plan_t;

void sim_vdnn_plan(const sim_workload_t *w, sim_vdnn_plan_t *plan);
void sim_vdnn_plan_free(sim_vdnn_plan_t *plan);

/* Runs every iteration of w under policy at a device of capacity chunks;
 * returns the last one's result. Dies, saying which, if an invariant of the
 * model breaks. */
sim_result_t sim_run(const sim_workload_t *w, const sim_iters_t *its, const sim_config_t *cfg,
                     const sim_vdnn_plan_t *plan, sim_policy_t policy, uint32_t capacity);

#endif /* LMS_BENCH_SIMULATE_H */
