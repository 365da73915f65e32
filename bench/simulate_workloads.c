/*
 * bench/simulate_workloads.c — the simulator's workloads: building one (the
 * builders the trace reader and the generators share), placing its tensors
 * on chunk ids as lms's allocator would, and the generated ones: a
 * GPT-style transformer and a ResNet-50-style CNN, one training step an
 * iteration, as the kernels a framework launches, the tensors they touch
 * and the allocations and frees between them.
 *
 * Compute time, both: a roofline per kernel, max(flops / FLOP rate, bytes
 * touched / HBM rate), with the bytes of every tensor the kernel names (a
 * w access counts twice). The rates are H100 SXM's peaks at realistic
 * efficiency: bf16 matmuls and flash attention at 400 TFLOP/s (of 989),
 * convolutions at 250 TFLOP/s (cuDNN's are less efficient than GEMMs),
 * HBM at 2.6 TB/s (of 3.35). Layernorm, GELU, batchnorm, ReLU, residual
 * adds and the optimizer are memory-bound by this rule.
 *
 * Parameters and state live for the whole run: the first iteration
 * allocates them and initializes them with one kernel per parameter (its
 * first write, o). Gradients are allocated at their first write in backward
 * and freed after the optimizer step (zero_grad(set_to_none=True), PyTorch's
 * default). Activations saved for backward are allocated by the forward
 * kernel that writes them (o), marked as activations of the layer whose
 * backward reads them, and freed after their last backward use; backward's
 * gradients of activations are temporaries freed as soon as consumed.
 * Layers are numbered in forward order: 0 the embedding (the CNN's stem),
 * then the blocks, then the head; kernels carry their layer and phase.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/alloc.h"
#include "bench/simulate.h"

/* ---- building a workload ---------------------------------------------------- */

void sim_init(sim_workload_t *w, const char *name, uint64_t chunk_bytes)
{
    *w = (sim_workload_t){.chunk_bytes = chunk_bytes};
    snprintf(w->name, sizeof w->name, "%s", name);
}

void sim_release(sim_workload_t *w)
{
    free(w->tensors);
    free(w->ops);
    free(w->acc);
    free(w->in_use);
    *w = (sim_workload_t){0};
}

static sim_op_t *push_op(sim_workload_t *w, sim_op_kind_t kind)
{
    w->ops = sim_grow(w->ops, &w->capops, w->nops + 1, sizeof *w->ops);
    sim_op_t *op = &w->ops[w->nops++];
    *op = (sim_op_t){.kind = kind, .layer = -1, .tensor = SIM_NONE};
    return op;
}

uint32_t sim_alloc(sim_workload_t *w, uint64_t bytes, bool act, int32_t layer)
{
    w->tensors = sim_grow(w->tensors, &w->captensors, w->ntensors + 1, sizeof *w->tensors);
    uint32_t t = (uint32_t)w->ntensors++;
    w->tensors[t] = (sim_tensor_t){.bytes = bytes,
                                   .act = act,
                                   .layer = layer,
                                   .alloc_op = (uint32_t)w->nops,
                                   .free_op = SIM_NONE};
    push_op(w, SIM_ALLOC)->tensor = t;
    return t;
}

void sim_free(sim_workload_t *w, uint32_t t)
{
    w->tensors[t].free_op = (uint32_t)w->nops;
    push_op(w, SIM_FREE)->tensor = t;
}

void sim_kernel(sim_workload_t *w, uint64_t ns, int32_t layer, sim_phase_t phase)
{
    sim_op_t *op = push_op(w, SIM_KERNEL);
    op->ns = ns;
    op->layer = layer;
    op->phase = phase;
    op->acc = (uint32_t)w->nacc;
}

static sim_mode_t merge_mode(sim_mode_t a, sim_mode_t b)
{
    return a == b ? a : SIM_WRITE;
}

void sim_touch(sim_workload_t *w, uint32_t t, sim_mode_t mode)
{
    sim_op_t *op = &w->ops[w->nops - 1];
    for (uint32_t i = op->acc; i < op->acc + op->nacc; i++) {
        if (w->acc[i].tensor == t) {
            w->acc[i].mode = merge_mode(w->acc[i].mode, mode);
            return;
        }
    }
    w->acc = sim_grow(w->acc, &w->capacc, w->nacc + 1, sizeof *w->acc);
    w->acc[w->nacc++] = (sim_access_t){.tensor = t, .mode = mode};
    op->nacc++;
}

void sim_iteration(sim_workload_t *w)
{
    push_op(w, SIM_ITERATION);
}

/* ---- placement ------------------------------------------------------------ */

/*
 * Note [Placement in the simulator]
 * A tensor's chunks are where lms would put its bytes: sim_place replays the
 * allocs and frees through alloc/ itself (alloc_place, alloc_release), with
 * the chunk size of the workload and lms's default large threshold (8
 * chunks: swap/config.c takes 0 as alloc/'s default), so requests under it
 * share slabs of 1..16 chunks by size class and larger ones are best-fit
 * runs. A tensor then touches the chunks its bytes fall in, and several may
 * share one. What the model takes from that (simulate_model.c):
 *   - a chunk is live while alloc/ says it is in use (alloc_chunks_t: the
 *     chunks an alloc brought into use, and those a free took out of it);
 *   - an overwrite (o) needs no data only in the chunks the tensor's bytes
 *     fill entirely; a chunk it covers in part is a use, as other bytes of
 *     it may be live (swap/window.c's mark_needs reports the same);
 *   - policy/ hears of a free only for a run, whose chunks are its own (swap/
 *     lms.c's queue_freed: a slot's free says nothing of its chunk).
 * The footprint a row's device size comes from is the most chunks in use at
 * once (sim_chunks_in_use). The lower bound (simulate_bound.c) is computed
 * on the chunks as the model takes them, each once (Note [Chunk workload]).
 * Frees take effect at once, as on one stream whose work before the free
 * has finished; lms's thread caches (swap/tcache.c), which keep a freed
 * slot taken until a malloc of its class reuses it, are left out.
 * --placement chunks gives every tensor whole chunks of its own, first fit,
 * the simulator's placement before alloc/ was used, for comparison.
 */

const char *const sim_placement_name[] = {"lms", "chunks"};

/* Free runs of chunk ids, ascending; the last one is open-ended. */
typedef struct extents {
    struct span {
        uint32_t first, n;
    } * r;
    size_t n, cap;
} extents_t;

static uint32_t place_alloc(const sim_workload_t *w, extents_t *e, uint32_t n)
{
    for (size_t i = 0; i < e->n; i++) {
        if (e->r[i].n < n)
            continue;
        uint32_t first = e->r[i].first;
        e->r[i].first += n;
        e->r[i].n -= n;
        if (e->r[i].n == 0) {
            memmove(&e->r[i], &e->r[i + 1], (e->n - i - 1) * sizeof *e->r);
            e->n--;
        }
        return first;
    }
    /* the reader keeps the chunks live at once below the cap, but first fit
     * may leave holes (Note [What a trace may ask] in simulate_trace.c) */
    sim_bad("%s: placing the tensors first fit takes more than %u chunk ids, the most the "
            "simulator models", w->name, SIM_MAX_PLACED);
}

static void place_free(extents_t *e, uint32_t first, uint32_t n)
{
    size_t i = 0;
    while (i < e->n && e->r[i].first < first)
        i++;
    bool left = i > 0 && e->r[i - 1].first + e->r[i - 1].n == first;
    bool right = i < e->n && first + n == e->r[i].first;
    if (left && right) {
        e->r[i - 1].n += n + e->r[i].n;
        memmove(&e->r[i], &e->r[i + 1], (e->n - i - 1) * sizeof *e->r);
        e->n--;
    } else if (left) {
        e->r[i - 1].n += n;
    } else if (right) {
        e->r[i].first = first;
        e->r[i].n += n;
    } else {
        e->r = sim_grow(e->r, &e->cap, e->n + 1, sizeof *e->r);
        memmove(&e->r[i + 1], &e->r[i], (e->n - i) * sizeof *e->r);
        e->r[i] = (struct span){first, n};
        e->n++;
    }
}

/* One placement's state: alloc/'s, or the free runs of --placement chunks. */
typedef struct placer {
    sim_workload_t *w;
    alloc_t *a; /* NULL: whole chunks */
    extents_t e;
    uint64_t in_use; /* chunks */
} placer_t;

/* alloc/ with lms's configuration for chunks of chunk_bytes over nchunks
 * chunk ids; NULL when alloc/ takes no such chunk size. */
static alloc_t *lms_alloc(uint64_t chunk_bytes, size_t nchunks)
{
    alloc_config_t cfg = {.chunk_size = chunk_bytes, .nchunks = nchunks};
    alloc_t *a;
    return alloc_create(&cfg, &a) == LMS_OK ? a : NULL;
}

bool sim_lms_places(const sim_workload_t *w)
{
    alloc_t *a = lms_alloc(w->chunk_bytes, 1);
    alloc_destroy(a);
    return a != NULL;
}

static void place_one(placer_t *p, sim_tensor_t *t)
{
    const sim_workload_t *w = p->w;
    uint64_t n = sim_chunks_of(w, t->bytes);
    if (n > SIM_MAX_PLACED)
        sim_bad("%s: a tensor of %llu bytes is more than %u chunks, the most the simulator "
                "models", w->name, (unsigned long long)t->bytes, SIM_MAX_PLACED);
    if (p->a == NULL) { /* whole chunks of its own: all of them its, and all new */
        t->first = t->whole = t->used_first = place_alloc(w, &p->e, (uint32_t)n);
        t->span = t->nwhole = t->nchunks = t->used_n = (uint32_t)n;
        t->offset = (uint64_t)t->first * w->chunk_bytes;
        p->in_use += n;
        return;
    }
    size_t off;
    alloc_chunks_t used;
    if (alloc_place(p->a, (size_t)t->bytes, &off, &used) != LMS_OK)
        sim_bad("%s: placing the tensors as lms does takes more than %u chunk ids, the most the "
                "simulator models", w->name, SIM_MAX_PLACED);
    uint64_t c = w->chunk_bytes, end = off + t->bytes;
    t->offset = off;
    t->slot = alloc_class_at(p->a, off) >= 0;
    t->first = (uint32_t)(off / c);
    t->span = (uint32_t)((end - 1) / c + 1 - t->first);
    t->whole = (uint32_t)((off + c - 1) / c); /* the chunks [off, end) covers entirely */
    t->nwhole = end / c > t->whole ? (uint32_t)(end / c - t->whole) : 0;
    t->nchunks = t->slot ? t->nwhole : t->span;
    t->used_first = (uint32_t)used.first;
    t->used_n = (uint32_t)used.n;
    p->in_use += used.n;
}

static void unplace_one(placer_t *p, sim_tensor_t *t)
{
    if (p->a == NULL) {
        place_free(&p->e, t->first, t->span);
        t->gone_first = t->first;
        t->gone_n = t->span;
    } else {
        size_t size;
        alloc_chunks_t gone;
        if (alloc_mark_freed(p->a, (size_t)t->offset, &size) != LMS_OK)
            sim_die("%s: alloc/ has no allocation at offset %llu to free", p->w->name,
                    (unsigned long long)t->offset);
        alloc_release(p->a, (size_t)t->offset, &gone);
        t->gone_first = (uint32_t)gone.first;
        t->gone_n = (uint32_t)gone.n;
    }
    p->in_use -= t->gone_n;
}

/* The most chunks kernel op's tensors touch, each chunk once (stamp: per
 * chunk id, the last kernel that counted it). */
static uint32_t kernel_chunks(const sim_workload_t *w, const sim_op_t *op, uint32_t *stamp,
                              uint32_t j)
{
    uint32_t n = 0;
    for (uint32_t i = op->acc; i < op->acc + op->nacc; i++) {
        const sim_tensor_t *t = &w->tensors[w->acc[i].tensor];
        for (uint32_t c = t->first; c < t->first + t->span; c++) {
            n += stamp[c] != j;
            stamp[c] = j;
        }
    }
    return n;
}

void sim_place(sim_workload_t *w, sim_placement_t placement)
{
    placer_t p = {.w = w};
    /* a range no placement can outgrow: each tensor its chunks and a new
     * slab's (at most 16), up to the chunk ids the model takes */
    uint64_t range = 0;
    for (size_t t = 0; t < w->ntensors && range < SIM_MAX_PLACED; t++)
        range += sim_chunks_of(w, w->tensors[t].bytes) + 16;
    range = range < SIM_MAX_PLACED ? range : SIM_MAX_PLACED;
    if (placement == SIM_PLACE_LMS && (p.a = lms_alloc(w->chunk_bytes, range ? range : 1)) == NULL)
        sim_bad("%s: lms places chunks of a power of two from 4 KiB to 128 MiB, not %llu bytes "
                "(--placement chunks places any)", w->name, (unsigned long long)w->chunk_bytes);
    if (p.a == NULL) {
        p.e.r = sim_grow(NULL, &p.e.cap, 1, sizeof *p.e.r);
        p.e.r[p.e.n++] = (struct span){0, SIM_MAX_PLACED};
    }
    free(w->in_use);
    w->in_use = sim_zalloc(w->nops, sizeof *w->in_use);
    w->placement = placement;
    uint32_t top = 0;
    bool act = false, layer = false;
    for (size_t j = 0; j < w->nops; j++) {
        const sim_op_t *op = &w->ops[j];
        if (op->kind == SIM_ALLOC) {
            sim_tensor_t *t = &w->tensors[op->tensor];
            place_one(&p, t);
            top = t->first + t->span > top ? t->first + t->span : top;
            act |= t->act;
        } else if (op->kind == SIM_FREE) {
            unplace_one(&p, &w->tensors[op->tensor]);
        } else if (op->kind == SIM_KERNEL) {
            layer |= op->layer >= 0;
        }
        w->in_use[j] = (uint32_t)p.in_use;
    }
    alloc_destroy(p.a);
    free(p.e.r);
    uint32_t most = 0, *stamp = sim_zalloc(top, sizeof *stamp);
    for (size_t j = 0; j < w->nops; j++) {
        uint32_t n = w->ops[j].kind == SIM_KERNEL
                         ? kernel_chunks(w, &w->ops[j], stamp, (uint32_t)j + 1)
                         : 0;
        most = n > most ? n : most;
    }
    free(stamp);
    w->hints = act && layer;
    w->nchunks = top;
    w->max_kernel = most;
}

uint64_t sim_chunks_in_use(const sim_workload_t *w, const sim_iter_t *it)
{
    uint64_t peak = 0;
    for (size_t j = it->first > 0 ? it->first - 1 : 0; j < it->end; j++)
        peak = w->in_use[j] > peak ? w->in_use[j] : peak;
    return peak;
}

#define MATMUL_FLOPS_PER_NS 400e3 /* 400 TFLOP/s */
#define CONV_FLOPS_PER_NS 250e3
#define HBM_BYTES_PER_NS 2600.0 /* 2.6 TB/s */
#define BF16 2
#define FP32 4

/* ---- kernels with roofline times ------------------------------------------ */

typedef struct touch {
    uint32_t tensor;
    sim_mode_t mode;
} touch_t;

/* A kernel of `flops` at flops_per_ns over the n tensors it touches. */
static void kernel(sim_workload_t *w, double flops, double flops_per_ns, int32_t layer,
                   sim_phase_t phase, const touch_t *t, size_t n)
{
    double bytes = 0;
    for (size_t i = 0; i < n; i++)
        bytes += (double)w->tensors[t[i].tensor].bytes * (t[i].mode == SIM_WRITE ? 2 : 1);
    double ns = flops / flops_per_ns;
    if (bytes / HBM_BYTES_PER_NS > ns)
        ns = bytes / HBM_BYTES_PER_NS;
    sim_kernel(w, (uint64_t)ns + 1, layer, phase);
    for (size_t i = 0; i < n; i++)
        sim_touch(w, t[i].tensor, t[i].mode);
}

#define K(w, flops, rate, layer, phase, ...)                                                       \
    kernel(w, flops, rate, layer, phase, (const touch_t[]){__VA_ARGS__},                           \
           sizeof((const touch_t[]){__VA_ARGS__}) / sizeof(touch_t))
#define R(t) {t, SIM_READ}
#define W(t) {t, SIM_WRITE}
#define O(t) {t, SIM_OVERWRITE}

/* ---- GPT ------------------------------------------------------------------- */

/*
 * Pre-LN GPT (GPT-2/LLaMA shape without the details that move no memory):
 * an embedding tied to the LM head, `layers` blocks of attention and MLP,
 * flash attention (saves its output, not the scores), a fused
 * cross-entropy that turns the logits into their gradient in place.
 * Mixed precision with Adam: bf16 weights and gradients, fp32 master
 * weights, m and v (16 bytes a parameter with the gradient). Layernorm
 * gains and biases are under a chunk a layer and left out. Saved per
 * layer, bf16: the block's input, ln1's output, q/k/v, attention's output,
 * the residual stream after attention, ln2's output, fc1's output and
 * GELU's: 16 x tokens x hidden x 2 bytes (Korthikanti et al.'s 34 sbh with
 * flash attention's savings).
 *
 * Default: hidden 2048, 8 layers, 4 sequences of 2048 tokens (8192 tokens
 * a step), vocabulary 32000: 0.47B parameters, 10.8 GiB at its peak (the
 * head's backward), 71 ms of compute a step. Quick: hidden 1024, 2 layers,
 * 4 x 1024 tokens, vocabulary 8192 (0.8 GiB, 2.9 ms).
 */
typedef struct gpt_shape {
    int layers;
    uint64_t hidden, seq, batch, vocab;
} gpt_shape_t;

typedef struct param {
    uint32_t w, master, m, v, g; /* g: SIM_NONE outside backward and the step */
    uint64_t n;                  /* parameters */
    int32_t layer;
} param_t;

static param_t adam_param(sim_workload_t *w, uint64_t n, int32_t layer)
{
    param_t p = {.n = n, .layer = layer, .g = SIM_NONE};
    p.master = sim_alloc(w, n * FP32, false, -1);
    p.w = sim_alloc(w, n * BF16, false, -1);
    p.m = sim_alloc(w, n * FP32, false, -1);
    p.v = sim_alloc(w, n * FP32, false, -1);
    K(w, 0, 1, -1, SIM_PHASE_NONE, O(p.master), O(p.w), O(p.m), O(p.v));
    return p;
}

/* The gradient's first write: allocated here, written by the kernel after. */
static uint32_t grad(sim_workload_t *w, param_t *p)
{
    p->g = sim_alloc(w, p->n * BF16, false, -1);
    return p->g;
}

static void adam_step(sim_workload_t *w, param_t *p)
{
    K(w, 0, 1, p->layer, SIM_OPT, R(p->g), W(p->master), W(p->m), W(p->v), O(p->w));
    sim_free(w, p->g);
    p->g = SIM_NONE;
}

enum { QKV, PROJ, FC1, FC2, NMAT };

typedef struct gpt_layer {
    param_t mat[NMAT];
    uint32_t x, h1, qkv, a, xm, h2, u, gl; /* saved in forward */
} gpt_layer_t;

static gpt_shape_t gpt_shape(sim_scale_t scale)
{
    if (scale == SIM_SCALE_QUICK)
        return (gpt_shape_t){.layers = 2, .hidden = 1024, .seq = 1024, .batch = 4, .vocab = 8192};
    return (gpt_shape_t){.layers = 8, .hidden = 2048, .seq = 2048, .batch = 4, .vocab = 32000};
}

/* Forward of block l (1-based): x in, returns its output (the next input). */
static uint32_t gpt_block_fwd(sim_workload_t *w, const gpt_shape_t *s, gpt_layer_t *b, int32_t l,
                              uint32_t x)
{
    const uint64_t d = s->hidden, T = s->seq * s->batch, td = T * d * BF16;
    const double mm = MATMUL_FLOPS_PER_NS;
    const double attn = 2.0 * (double)s->batch * (double)(s->seq * s->seq) * (double)d; /* causal */
    b->x = x;
    b->h1 = sim_alloc(w, td, true, l);
    K(w, 0, mm, l, SIM_FWD, R(x), O(b->h1));
    b->qkv = sim_alloc(w, 3 * td, true, l);
    K(w, 2.0 * T * d * 3 * d, mm, l, SIM_FWD, R(b->h1), R(b->mat[QKV].w), O(b->qkv));
    b->a = sim_alloc(w, td, true, l);
    K(w, attn, mm, l, SIM_FWD, R(b->qkv), O(b->a));
    b->xm = sim_alloc(w, td, true, l);
    K(w, 2.0 * T * d * d, mm, l, SIM_FWD, R(b->a), R(b->mat[PROJ].w), R(x), O(b->xm));
    b->h2 = sim_alloc(w, td, true, l);
    K(w, 0, mm, l, SIM_FWD, R(b->xm), O(b->h2));
    b->u = sim_alloc(w, 4 * td, true, l);
    K(w, 2.0 * T * d * 4 * d, mm, l, SIM_FWD, R(b->h2), R(b->mat[FC1].w), O(b->u));
    b->gl = sim_alloc(w, 4 * td, true, l);
    K(w, 0, mm, l, SIM_FWD, R(b->u), O(b->gl));
    uint32_t out = sim_alloc(w, td, true, l + 1);
    K(w, 2.0 * T * 4 * d * d, mm, l, SIM_FWD, R(b->gl), R(b->mat[FC2].w), R(b->xm), O(out));
    return out;
}

/* Backward of block l: dy, the gradient of its output, in; returns its
 * input's gradient. Frees what it consumed. */
static uint32_t gpt_block_bwd(sim_workload_t *w, const gpt_shape_t *s, gpt_layer_t *b, int32_t l,
                              uint32_t dy)
{
    const uint64_t d = s->hidden, T = s->seq * s->batch, td = T * d * BF16;
    const double mm = MATMUL_FLOPS_PER_NS;
    const double attn = 5.0 * (double)s->batch * (double)(s->seq * s->seq) * (double)d;
    uint32_t dgl = sim_alloc(w, 4 * td, false, -1);
    uint32_t g = grad(w, &b->mat[FC2]);
    K(w, 4.0 * T * 4 * d * d, mm, l, SIM_BWD, R(dy), R(b->gl), R(b->mat[FC2].w), O(dgl), O(g));
    sim_free(w, b->gl);
    K(w, 0, mm, l, SIM_BWD, R(b->u), W(dgl)); /* GELU's backward, in place */
    sim_free(w, b->u);
    uint32_t dh2 = sim_alloc(w, td, false, -1);
    g = grad(w, &b->mat[FC1]);
    K(w, 4.0 * T * d * 4 * d, mm, l, SIM_BWD, R(dgl), R(b->h2), R(b->mat[FC1].w), O(dh2), O(g));
    sim_free(w, dgl);
    sim_free(w, b->h2);
    uint32_t dxm = sim_alloc(w, td, false, -1);
    K(w, 0, mm, l, SIM_BWD, R(dh2), R(b->xm), R(dy), O(dxm));
    sim_free(w, dh2);
    sim_free(w, b->xm);
    sim_free(w, dy);
    uint32_t da = sim_alloc(w, td, false, -1);
    g = grad(w, &b->mat[PROJ]);
    K(w, 4.0 * T * d * d, mm, l, SIM_BWD, R(dxm), R(b->a), R(b->mat[PROJ].w), O(da), O(g));
    sim_free(w, b->a);
    uint32_t dqkv = sim_alloc(w, 3 * td, false, -1);
    K(w, attn, mm, l, SIM_BWD, R(da), R(b->qkv), O(dqkv));
    sim_free(w, da);
    sim_free(w, b->qkv);
    uint32_t dh1 = sim_alloc(w, td, false, -1);
    g = grad(w, &b->mat[QKV]);
    K(w, 4.0 * T * d * 3 * d, mm, l, SIM_BWD, R(dqkv), R(b->h1), R(b->mat[QKV].w), O(dh1), O(g));
    sim_free(w, dqkv);
    sim_free(w, b->h1);
    uint32_t dx = sim_alloc(w, td, false, -1);
    K(w, 0, mm, l, SIM_BWD, R(dh1), R(b->x), R(dxm), O(dx));
    sim_free(w, dh1);
    sim_free(w, dxm);
    sim_free(w, b->x);
    return dx;
}

static void gpt_step(sim_workload_t *w, const gpt_shape_t *s, param_t *emb, gpt_layer_t *blocks)
{
    const uint64_t d = s->hidden, T = s->seq * s->batch, td = T * d * BF16;
    const double mm = MATMUL_FLOPS_PER_NS;
    const int32_t head = s->layers + 1;
    uint32_t x = sim_alloc(w, td, true, 1);
    K(w, 0, mm, 0, SIM_FWD, R(emb->w), O(x));
    for (int l = 1; l <= s->layers; l++)
        x = gpt_block_fwd(w, s, &blocks[l - 1], l, x);
    uint32_t hf = sim_alloc(w, td, true, head);
    K(w, 0, mm, head, SIM_FWD, R(x), O(hf));
    uint32_t logits = sim_alloc(w, T * s->vocab * BF16, false, -1);
    K(w, 2.0 * T * d * s->vocab, mm, head, SIM_FWD, R(hf), R(emb->w), O(logits));
    K(w, 0, mm, head, SIM_BWD, W(logits)); /* cross-entropy: logits -> their gradient */
    uint32_t dhf = sim_alloc(w, td, false, -1);
    uint32_t g = grad(w, emb);
    K(w, 4.0 * T * d * s->vocab, mm, head, SIM_BWD, R(logits), R(hf), R(emb->w), O(dhf), O(g));
    sim_free(w, logits);
    sim_free(w, hf);
    uint32_t dy = sim_alloc(w, td, false, -1);
    K(w, 0, mm, head, SIM_BWD, R(dhf), R(x), O(dy));
    sim_free(w, dhf);
    sim_free(w, x);
    for (int l = s->layers; l >= 1; l--)
        dy = gpt_block_bwd(w, s, &blocks[l - 1], l, dy);
    K(w, 0, mm, 0, SIM_BWD, R(dy), W(emb->g)); /* the embedding's scatter-add */
    sim_free(w, dy);
    adam_step(w, emb);
    for (int l = 1; l <= s->layers; l++)
        for (int m = 0; m < NMAT; m++)
            adam_step(w, &blocks[l - 1].mat[m]);
    sim_iteration(w);
}

void sim_gpt(sim_workload_t *w, sim_scale_t scale, int iterations)
{
    gpt_shape_t s = gpt_shape(scale);
    const uint64_t d = s.hidden;
    const uint64_t mat[NMAT] = {3 * d * d, d * d, 4 * d * d, 4 * d * d};
    gpt_layer_t *blocks = sim_zalloc((size_t)s.layers, sizeof *blocks);
    param_t emb = adam_param(w, s.vocab * d, 0);
    for (int l = 1; l <= s.layers; l++)
        for (int m = 0; m < NMAT; m++)
            blocks[l - 1].mat[m] = adam_param(w, mat[m], l);
    for (int i = 0; i < iterations; i++)
        gpt_step(w, &s, &emb, blocks);
    free(blocks);
    snprintf(w->shape, sizeof w->shape,
             "\"layers\":%d,\"hidden\":%llu,\"seq\":%llu,\"batch\":%llu,\"vocab\":%llu,"
             "\"params\":%llu",
             s.layers, (unsigned long long)d, (unsigned long long)s.seq,
             (unsigned long long)s.batch, (unsigned long long)s.vocab,
             (unsigned long long)(s.vocab * d + (uint64_t)s.layers * 12 * d * d));
}

/* ---- CNN ------------------------------------------------------------------- */

/*
 * ResNet-50 (v1.5: the stride on the 3x3 convolution) on 224 x 224 images,
 * bf16 activations, SGD with momentum on fp32 weights (AMP keeps fp32
 * parameters). A block's convolutions share one flat parameter (and
 * gradient and momentum) tensor, as flat-parameter wrappers and DDP's
 * buckets do: a 3x3 convolution of stage 1 is 150 KB, and a tensor of its
 * own would take a whole 2 MiB chunk in the simulator. Saved per block:
 * its input, each convolution's output (for batchnorm's backward) and each
 * batchnorm+ReLU's output (the next convolution's input), the downsampling
 * convolution's output; the block's output is the next block's input.
 *
 * Default: batch 128: 25.6M parameters, 5.4 GiB at the peak (the end of
 * forward), 23 ms of compute a step (5500 images a second: unfused
 * batchnorm and ReLU as eager PyTorch runs them, less than MLPerf's fused
 * kernels reach). Quick: batch 16 on 112 x 112 images.
 */
typedef struct cnn_shape {
    uint64_t batch, image;
} cnn_shape_t;

typedef struct sgd_param {
    uint32_t w, mom, g;
    uint64_t n;
    int32_t layer;
} sgd_param_t;

static sgd_param_t sgd_param(sim_workload_t *w, uint64_t n, int32_t layer)
{
    sgd_param_t p = {.n = n, .layer = layer, .g = SIM_NONE};
    p.w = sim_alloc(w, n * FP32, false, -1);
    p.mom = sim_alloc(w, n * FP32, false, -1);
    K(w, 0, 1, -1, SIM_PHASE_NONE, O(p.w), O(p.mom));
    return p;
}

/* The flat gradient, allocated before the block's first weight-gradient
 * kernel; each of the block's convolutions writes its part (w). */
static uint32_t sgd_grad(sim_workload_t *w, sgd_param_t *p)
{
    p->g = sim_alloc(w, p->n * FP32, false, -1);
    return p->g;
}

static void sgd_step(sim_workload_t *w, sgd_param_t *p)
{
    K(w, 0, 1, p->layer, SIM_OPT, R(p->g), W(p->w), W(p->mom));
    sim_free(w, p->g);
    p->g = SIM_NONE;
}

#define NBLOCKS 16

typedef struct cnn_block {
    uint64_t cin, width, hin, h; /* input channels, bottleneck width, input and output size */
    bool down;                   /* a downsampling shortcut (the stage's first block) */
    sgd_param_t p;
    uint32_t x, c1, r1, c2, r2, c3, cd, y; /* saved in forward */
} cnn_block_t;

static uint64_t act_bytes(const cnn_shape_t *s, uint64_t ch, uint64_t hw)
{
    return s->batch * ch * hw * hw * BF16;
}

static void cnn_block_fwd(sim_workload_t *w, const cnn_shape_t *s, cnn_block_t *b, int32_t l,
                          uint32_t x)
{
    const double cv = CONV_FLOPS_PER_NS, n = (double)s->batch;
    const uint64_t wd = b->width, out = 4 * wd;
    b->x = x;
    b->c1 = sim_alloc(w, act_bytes(s, wd, b->hin), true, l);
    K(w, 2 * n * (double)(b->hin * b->hin * b->cin * wd), cv, l, SIM_FWD, R(x), R(b->p.w),
      O(b->c1));
    b->r1 = sim_alloc(w, act_bytes(s, wd, b->hin), true, l);
    K(w, 0, cv, l, SIM_FWD, R(b->c1), O(b->r1));
    b->c2 = sim_alloc(w, act_bytes(s, wd, b->h), true, l);
    K(w, 2 * n * (double)(b->h * b->h * wd * wd * 9), cv, l, SIM_FWD, R(b->r1), R(b->p.w),
      O(b->c2));
    b->r2 = sim_alloc(w, act_bytes(s, wd, b->h), true, l);
    K(w, 0, cv, l, SIM_FWD, R(b->c2), O(b->r2));
    b->c3 = sim_alloc(w, act_bytes(s, out, b->h), true, l);
    K(w, 2 * n * (double)(b->h * b->h * wd * out), cv, l, SIM_FWD, R(b->r2), R(b->p.w), O(b->c3));
    b->cd = SIM_NONE;
    if (b->down) {
        b->cd = sim_alloc(w, act_bytes(s, out, b->h), true, l);
        K(w, 2 * n * (double)(b->h * b->h * b->cin * out), cv, l, SIM_FWD, R(x), R(b->p.w),
          O(b->cd));
    }
    b->y = sim_alloc(w, act_bytes(s, out, b->h), true, l + 1);
    if (b->down)
        K(w, 0, cv, l, SIM_FWD, R(b->c3), R(b->cd), O(b->y));
    else
        K(w, 0, cv, l, SIM_FWD, R(b->c3), R(x), O(b->y));
}

/* Backward of batchnorm+ReLU: the ReLU's mask on the gradient dr in place
 * (from its saved output r), then batchnorm's from its saved input c; frees
 * dr, c and r. Two kernels, so that no kernel names more than three
 * activation-sized tensors. */
static uint32_t bn_relu_bwd(sim_workload_t *w, int32_t l, uint32_t dr, uint32_t c, uint32_t r)
{
    K(w, 0, CONV_FLOPS_PER_NS, l, SIM_BWD, R(r), W(dr));
    sim_free(w, r);
    uint32_t dc = sim_alloc(w, w->tensors[c].bytes, false, -1);
    K(w, 0, CONV_FLOPS_PER_NS, l, SIM_BWD, R(dr), R(c), O(dc));
    sim_free(w, dr);
    sim_free(w, c);
    return dc;
}

/* Backward of block l; dy, its output's gradient, in; returns its input's.
 * Frees the block's output (its last reader is this block's ReLU) and
 * what it consumed; the input stays for the block before. */
static uint32_t cnn_block_bwd(sim_workload_t *w, const cnn_shape_t *s, cnn_block_t *b, int32_t l,
                              uint32_t dy)
{
    const double cv = CONV_FLOPS_PER_NS, n = (double)s->batch;
    const uint64_t wd = b->width, out = 4 * wd;
    K(w, 0, cv, l, SIM_BWD, R(b->y), W(dy)); /* the last ReLU's mask */
    sim_free(w, b->y);
    uint32_t dc3 = sim_alloc(w, act_bytes(s, out, b->h), false, -1);
    K(w, 0, cv, l, SIM_BWD, R(dy), R(b->c3), O(dc3));
    sim_free(w, b->c3);
    uint32_t dcd = SIM_NONE;
    if (b->down) {
        dcd = sim_alloc(w, act_bytes(s, out, b->h), false, -1);
        K(w, 0, cv, l, SIM_BWD, R(dy), R(b->cd), O(dcd));
        sim_free(w, b->cd);
    }
    uint32_t g = sgd_grad(w, &b->p);
    uint32_t dr2 = sim_alloc(w, act_bytes(s, wd, b->h), false, -1);
    K(w, 4 * n * (double)(b->h * b->h * wd * out), cv, l, SIM_BWD, R(dc3), R(b->r2), R(b->p.w),
      O(dr2), W(g));
    sim_free(w, dc3);
    uint32_t dc2 = bn_relu_bwd(w, l, dr2, b->c2, b->r2);
    uint32_t dr1 = sim_alloc(w, act_bytes(s, wd, b->hin), false, -1);
    K(w, 4 * n * (double)(b->h * b->h * wd * wd * 9), cv, l, SIM_BWD, R(dc2), R(b->r1), R(b->p.w),
      O(dr1), W(g));
    sim_free(w, dc2);
    uint32_t dc1 = bn_relu_bwd(w, l, dr1, b->c1, b->r1);
    uint32_t dx = sim_alloc(w, act_bytes(s, b->cin, b->hin), false, -1);
    K(w, 4 * n * (double)(b->hin * b->hin * b->cin * wd), cv, l, SIM_BWD, R(dc1), R(b->x),
      R(b->p.w), O(dx), W(g));
    sim_free(w, dc1);
    if (b->down) {
        K(w, 4 * n * (double)(b->h * b->h * b->cin * out), cv, l, SIM_BWD, R(dcd), R(b->x),
          R(b->p.w), W(dx), W(g));
        sim_free(w, dcd);
    } else {
        K(w, 0, cv, l, SIM_BWD, R(dy), W(dx)); /* the identity shortcut */
    }
    sim_free(w, dy);
    return dx;
}

typedef struct cnn {
    cnn_shape_t s;
    sgd_param_t stem, fc;
    cnn_block_t b[NBLOCKS];
} cnn_t;

static void cnn_step(sim_workload_t *w, cnn_t *c)
{
    const cnn_shape_t *s = &c->s;
    const double cv = CONV_FLOPS_PER_NS, n = (double)s->batch;
    const uint64_t h0 = s->image / 2, h1 = s->image / 4; /* after the stem's conv, its pool */
    const int32_t head = NBLOCKS + 1;
    uint32_t img = sim_alloc(w, act_bytes(s, 3, s->image), true, 0);
    K(w, 0, cv, 0, SIM_FWD, O(img)); /* the batch, copied in by the data loader */
    uint32_t c0 = sim_alloc(w, act_bytes(s, 64, h0), true, 0);
    K(w, 2 * n * (double)(h0 * h0 * 64 * 3 * 49), cv, 0, SIM_FWD, R(img), R(c->stem.w), O(c0));
    uint32_t r0 = sim_alloc(w, act_bytes(s, 64, h0), true, 0);
    K(w, 0, cv, 0, SIM_FWD, R(c0), O(r0));
    uint32_t x = sim_alloc(w, act_bytes(s, 64, h1), true, 1);
    K(w, 0, cv, 0, SIM_FWD, R(r0), O(x)); /* max pool */
    for (int l = 1; l <= NBLOCKS; l++) {
        cnn_block_fwd(w, s, &c->b[l - 1], l, x);
        x = c->b[l - 1].y;
    }
    uint32_t pooled = sim_alloc(w, s->batch * 2048 * BF16, true, head);
    K(w, 0, cv, head, SIM_FWD, R(x), O(pooled));
    uint32_t logits = sim_alloc(w, s->batch * 1000 * FP32, false, -1);
    K(w, 2 * n * 2048 * 1000, cv, head, SIM_FWD, R(pooled), R(c->fc.w), O(logits));
    K(w, 0, cv, head, SIM_BWD, W(logits)); /* cross-entropy: logits -> their gradient */
    uint32_t dpooled = sim_alloc(w, s->batch * 2048 * BF16, false, -1);
    uint32_t g = sgd_grad(w, &c->fc);
    K(w, 4 * n * 2048 * 1000, cv, head, SIM_BWD, R(logits), R(pooled), R(c->fc.w), O(dpooled),
      O(g));
    sim_free(w, logits);
    sim_free(w, pooled);
    uint32_t dy = sim_alloc(w, act_bytes(s, 2048, c->b[NBLOCKS - 1].h), false, -1);
    K(w, 0, cv, head, SIM_BWD, R(dpooled), O(dy));
    sim_free(w, dpooled);
    for (int l = NBLOCKS; l >= 1; l--)
        dy = cnn_block_bwd(w, s, &c->b[l - 1], l, dy);
    uint32_t dr0 = sim_alloc(w, act_bytes(s, 64, h0), false, -1);
    K(w, 0, cv, 0, SIM_BWD, R(dy), R(r0), O(dr0)); /* max pool */
    sim_free(w, dy);
    sim_free(w, c->b[0].x);
    uint32_t dc0 = bn_relu_bwd(w, 0, dr0, c0, r0);
    g = sgd_grad(w, &c->stem);
    K(w, 2 * n * (double)(h0 * h0 * 64 * 3 * 49), cv, 0, SIM_BWD, R(dc0), R(img), R(c->stem.w),
      O(g)); /* the stem's input needs no gradient */
    sim_free(w, dc0);
    sim_free(w, img);
    sgd_step(w, &c->stem);
    for (int l = 1; l <= NBLOCKS; l++)
        sgd_step(w, &c->b[l - 1].p);
    sgd_step(w, &c->fc);
    sim_iteration(w);
}

void sim_cnn(sim_workload_t *w, sim_scale_t scale, int iterations)
{
    static const struct {
        int blocks;
        uint64_t width;
    } stages[] = {{3, 64}, {4, 128}, {6, 256}, {3, 512}};
    cnn_t c = {.s = scale == SIM_SCALE_QUICK ? (cnn_shape_t){16, 112} : (cnn_shape_t){128, 224}};
    c.stem = sgd_param(w, 64 * 3 * 49, 0);
    uint64_t cin = 64, hw = c.s.image / 4, params = 64 * 3 * 49 + 2048 * 1000;
    int l = 1;
    for (size_t st = 0; st < sizeof stages / sizeof stages[0]; st++) {
        for (int i = 0; i < stages[st].blocks; i++, l++) {
            cnn_block_t *b = &c.b[l - 1];
            uint64_t wd = stages[st].width;
            *b = (cnn_block_t){.cin = cin, .width = wd, .hin = hw, .down = i == 0};
            b->h = i == 0 && st > 0 ? hw / 2 : hw;
            uint64_t n = cin * wd + wd * wd * 9 + wd * 4 * wd + (b->down ? cin * 4 * wd : 0);
            b->p = sgd_param(w, n, l);
            params += n;
            cin = 4 * wd;
            hw = b->h;
        }
    }
    c.fc = sgd_param(w, 2048 * 1000, NBLOCKS + 1);
    for (int i = 0; i < iterations; i++)
        cnn_step(w, &c);
    snprintf(w->shape, sizeof w->shape,
             "\"layers\":%d,\"batch\":%llu,\"image\":%llu,\"params\":%llu", NBLOCKS + 2,
             (unsigned long long)c.s.batch, (unsigned long long)c.s.image,
             (unsigned long long)params);
}
