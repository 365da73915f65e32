/*
 * bench/model.c — the MLP of model.h on lms. Layer l maps act[l] (batch x
 * width) to act[l+1] = relu(act[l] . w[l] + b[l]) (no ReLU on the last: its
 * output is the logits); w[l] is stored in x out. Backward keeps the
 * gradient of the current layer's output in one of two buffers (grad[0],
 * grad[1]) and writes the parameter gradients dw[l], db[l]; Adam then updates
 * every parameter with its two moments.
 *
 * Dynamic (model_shape.dynamic), activations and their gradients live only
 * from the kernel that writes them to the last that reads them, as a
 * framework's do: allocated then, freed stream-ordered after it.
 *
 * Each kernel is one call of run(): lms_access_many of its operands as
 * dev_kernel_operands names them (mode included, so outputs are not fetched),
 * then the kernel on the stream's device stream, before the next lms call.
 */
#include "bench/model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "device/kernels/kernels.h"
#include "swap/swap.h"

#define SEED 0x5eedull
#define LR 1e-3
#define BETA1 0.9
#define BETA2 0.999
#define EPS 1e-8f
#define CLASSES 16 /* labels: the largest of a row's first CLASSES inputs */

typedef struct param {
    void *w, *grad, *m1, *m2; /* the parameter, its gradient, Adam's two moments */
    uint32_t n;               /* floats in each */
} param_t;

struct model {
    model_shape_t s;
    param_t *weight, *bias; /* per layer */
    void **act;             /* layers + 1: act[0] the input batch, act[layers] the logits */
    void *grad[2];          /* gradients of a layer's output, ping-pong */
    void *labels;           /* batch int32 */
    void *loss;             /* batch + 1 floats: per row, then the mean */
    float *host_x;          /* the next batch's inputs, on the host */
    int32_t *host_labels;
    uint64_t step;
    uint64_t peak; /* lms's allocated bytes at the steps' peak so far */
};

uint64_t model_bytes(const model_shape_t *s)
{
    uint64_t w = s->width, wsq = w * w;
    uint64_t params = s->layers * 4 * (wsq + w);          /* w, grad, m1, m2; weights and biases */
    uint64_t acts = (uint64_t)(s->layers + 1 + 2) * s->batch * w; /* act[], grad[2] */
    return 4 * (params + acts) + 4 * (uint64_t)s->batch + 4 * ((uint64_t)s->batch + 1);
}

double model_step_flops(const model_shape_t *s)
{
    return 6.0 * s->layers * s->batch * (double)s->width * s->width;
}

/* A uniform float in [-1, 1) from the seeded generator. */
static float uniform(uint64_t key)
{
    return (float)(dev_mix64(key) >> 40) / (float)(1 << 24) * 2.0f - 1.0f;
}

static lms_status_t run(dev_kernel_args_t *a, lms_stream_t stream)
{
    dev_operand_t ops[DEV_KERNEL_OPERANDS];
    lms_range_t ranges[DEV_KERNEL_OPERANDS];
    size_t n;
    lms_status_t st = dev_kernel_operands(a, ops, &n);
    if (st != LMS_OK)
        return st;
    size_t distinct = 0;
    for (size_t i = 0; i < n; i++) {
        bool seen = false; /* XENT may name one buffer twice: once, as written */
        for (size_t j = 0; j < distinct; j++)
            seen |= ranges[j].ptr == (const void *)(uintptr_t)ops[i].addr;
        if (!seen)
            ranges[distinct++] = (lms_range_t){(const void *)(uintptr_t)ops[i].addr,
                                               ops[i].bytes, ops[i].mode};
    }
    st = lms_access_many(ranges, distinct, stream);
    return st != LMS_OK ? st : dev_kernel(swap_device(), swap_stream(stream), a);
}

static dev_addr_t at(const void *p) { return (dev_addr_t)(uintptr_t)p; }

/* [p, p+bytes) = host, written whole; waits for the copy (init only). */
static lms_status_t upload(void *p, const void *host, size_t bytes, lms_stream_t stream)
{
    lms_status_t st = lms_access(p, bytes, LMS_OVERWRITE, stream);
    if (st == LMS_OK)
        st = dev_copy_h2d(swap_device(), swap_stream(stream), at(p), host, bytes);
    return st != LMS_OK ? st : lms_stream_synchronize(stream);
}

/* floats on stream (a step's activations: on the step's stream, where what
 * drop() freed is reused at once). */
static lms_status_t alloc(void **p, uint64_t floats, lms_stream_t stream)
{
    return lms_malloc(p, floats * sizeof(float), stream);
}

/* Frees *p after the work queued on stream, as a framework frees a tensor. */
static void drop(void **p, lms_stream_t stream)
{
    lms_free(*p, stream);
    *p = NULL;
}

static lms_status_t param_create(param_t *p, uint32_t n, const float *init, const float *zero)
{
    p->n = n;
    lms_status_t st = alloc(&p->w, n, NULL);
    if (st == LMS_OK)
        st = alloc(&p->grad, n, NULL);
    if (st == LMS_OK)
        st = alloc(&p->m1, n, NULL);
    if (st == LMS_OK)
        st = alloc(&p->m2, n, NULL);
    if (st == LMS_OK)
        st = upload(p->w, init, n * sizeof(float), NULL);
    if (st == LMS_OK)
        st = upload(p->m1, zero, n * sizeof(float), NULL);
    if (st == LMS_OK)
        st = upload(p->m2, zero, n * sizeof(float), NULL);
    return st;
}

static void param_free(param_t *p)
{
    lms_free(p->w, NULL);
    lms_free(p->grad, NULL);
    lms_free(p->m1, NULL);
    lms_free(p->m2, NULL);
}

uint64_t model_peak_allocated(const model_t *m) { return m->peak; }

void model_destroy(model_t *m)
{
    if (m == NULL)
        return;
    for (uint32_t l = 0; m->weight != NULL && l < m->s.layers; l++) {
        param_free(&m->weight[l]);
        param_free(&m->bias[l]);
    }
    for (uint32_t l = 0; m->act != NULL && l <= m->s.layers; l++)
        lms_free(m->act[l], NULL);
    lms_free(m->grad[0], NULL);
    lms_free(m->grad[1], NULL);
    lms_free(m->labels, NULL);
    lms_free(m->loss, NULL);
    free(m->weight);
    free(m->bias);
    free(m->act);
    free(m->host_x);
    free(m->host_labels);
    free(m);
}

lms_status_t model_create(const model_shape_t *shape, model_t **out)
{
    model_t *m = calloc(1, sizeof *m);
    if (m == NULL)
        return LMS_ERR_OUT_OF_MEMORY;
    m->s = *shape;
    uint32_t L = shape->layers, W = shape->width, B = shape->batch;
    size_t wsq = (size_t)W * W;
    m->weight = calloc(L, sizeof *m->weight);
    m->bias = calloc(L, sizeof *m->bias);
    m->act = calloc(L + 1, sizeof *m->act);
    m->host_x = malloc((size_t)B * W * sizeof(float));
    m->host_labels = malloc(B * sizeof(int32_t));
    float *init = malloc(wsq * sizeof(float)), *zero = calloc(wsq, sizeof(float));
    lms_status_t st = LMS_ERR_OUT_OF_MEMORY;
    if (m->weight == NULL || m->bias == NULL || m->act == NULL || m->host_x == NULL ||
        m->host_labels == NULL || init == NULL || zero == NULL)
        goto done;
    float scale = sqrtf(2.0f / (float)W); /* He initialization, uniform: var = 2 / fan_in */
    st = LMS_OK;
    for (uint32_t l = 0; st == LMS_OK && l < L; l++) {
        for (size_t i = 0; i < wsq; i++)
            init[i] = uniform(SEED + dev_mix64(1000 + l) + i) * scale * sqrtf(3.0f);
        st = param_create(&m->weight[l], (uint32_t)wsq, init, zero);
        if (st == LMS_OK)
            st = param_create(&m->bias[l], W, zero, zero);
    }
    for (uint32_t l = 0; st == LMS_OK && l <= (shape->dynamic ? 0 : L); l++)
        st = alloc(&m->act[l], (uint64_t)B * W, NULL);
    if (st == LMS_OK && !shape->dynamic)
        st = alloc(&m->grad[0], (uint64_t)B * W, NULL);
    if (st == LMS_OK && !shape->dynamic)
        st = alloc(&m->grad[1], (uint64_t)B * W, NULL);
    if (st == LMS_OK)
        st = lms_malloc(&m->labels, B * sizeof(int32_t), NULL);
    if (st == LMS_OK)
        st = alloc(&m->loss, (uint64_t)B + 1, NULL);
done:
    free(init);
    free(zero);
    if (st != LMS_OK) {
        model_destroy(m);
        return st;
    }
    *out = m;
    return LMS_OK;
}

/* The inputs and labels of batch `which`, into the host buffers. */
static void make_batch(model_t *m, uint64_t which)
{
    uint32_t W = m->s.width;
    for (uint32_t i = 0; i < m->s.batch; i++) {
        float *row = m->host_x + (size_t)i * W;
        uint32_t best = 0;
        for (uint32_t j = 0; j < W; j++) {
            row[j] = uniform(SEED + dev_mix64(which) + (uint64_t)i * W + j);
            best = j < CLASSES && row[j] > row[best] ? j : best;
        }
        m->host_labels[i] = (int32_t)best;
    }
}

static lms_status_t adam(param_t *p, float lr_t, lms_stream_t stream)
{
    dev_kernel_args_t a = {DEV_KERNEL_ADAM, {at(p->w), at(p->grad), at(p->m1), at(p->m2)},
                           .m = 1, .n = p->n, .f = {lr_t, (float)BETA1, (float)BETA2, EPS}};
    return run(&a, stream);
}

lms_status_t model_step(model_t *m, lms_stream_t stream, float *loss)
{
    uint32_t L = m->s.layers, W = m->s.width, B = m->s.batch;
    dev_device_t *dev = swap_device();
    lms_status_t st;

    /* The batch: the copies read the host buffers until the step's end,
     * which waits for them (the loss is read back last). */
    make_batch(m, m->step % m->s.batches);
    st = lms_access(m->act[0], (size_t)B * W * sizeof(float), LMS_OVERWRITE, stream);
    if (st == LMS_OK)
        st = dev_copy_h2d(dev, swap_stream(stream), at(m->act[0]), m->host_x,
                          (size_t)B * W * sizeof(float));
    if (st == LMS_OK)
        st = lms_access(m->labels, B * sizeof(int32_t), LMS_OVERWRITE, stream);
    if (st == LMS_OK)
        st = dev_copy_h2d(dev, swap_stream(stream), at(m->labels), m->host_labels,
                          B * sizeof(int32_t));

    for (uint32_t l = 0; st == LMS_OK && l < L; l++) {
        if (m->s.dynamic && (st = alloc(&m->act[l + 1], (uint64_t)B * W, stream)) != LMS_OK)
            break;
        dev_kernel_args_t fc = {DEV_KERNEL_GEMM, {at(m->act[l]), at(m->weight[l].w), at(m->act[l + 1])},
                                .m = B, .n = W, .k = W};
        dev_kernel_args_t act = {DEV_KERNEL_BIAS_ACT, {at(m->act[l + 1]), at(m->bias[l].w)},
                                 .m = B, .n = W, .flags = l + 1 < L ? DEV_ACT_RELU : 0};
        st = run(&fc, stream);
        if (st == LMS_OK)
            st = run(&act, stream);
    }
    if (st == LMS_OK && m->s.dynamic)
        st = alloc(&m->grad[0], (uint64_t)B * W, stream);
    lms_stats_t now; /* the step's peak: every activation and the first gradient live */
    if (st == LMS_OK && (st = lms_stats(&now)) == LMS_OK && now.allocated_bytes > m->peak)
        m->peak = now.allocated_bytes;
    if (st == LMS_OK) {
        dev_kernel_args_t xent = {DEV_KERNEL_XENT,
                                  {at(m->act[L]), at(m->labels), at(m->loss), at(m->grad[0])},
                                  .m = B, .n = W};
        st = run(&xent, stream);
        if (m->s.dynamic)
            drop(&m->act[L], stream); /* the logits */
    }
    /* grad[g] holds d(loss)/d(output of layer l). */
    for (uint32_t l = L, g = 0; st == LMS_OK && l-- > 0; g ^= 1) {
        dev_kernel_args_t dw = {DEV_KERNEL_GEMM, {at(m->act[l]), at(m->grad[g]), at(m->weight[l].grad)},
                                .m = W, .n = W, .k = B, .flags = DEV_GEMM_TRANS_A};
        dev_kernel_args_t db = {DEV_KERNEL_COLSUM, {at(m->grad[g]), at(m->bias[l].grad)},
                                .m = B, .n = W};
        st = run(&dw, stream);
        if (st == LMS_OK)
            st = run(&db, stream);
        if (st != LMS_OK || l == 0) {
            if (m->s.dynamic)
                drop(&m->grad[g], stream);
            break;
        }
        if (m->s.dynamic && (st = alloc(&m->grad[g ^ 1], (uint64_t)B * W, stream)) != LMS_OK)
            break;
        dev_kernel_args_t dx = {DEV_KERNEL_GEMM, {at(m->grad[g]), at(m->weight[l].w), at(m->grad[g ^ 1])},
                                .m = B, .n = W, .k = W, .flags = DEV_GEMM_TRANS_B};
        dev_kernel_args_t relu = {DEV_KERNEL_RELU_BACK, {at(m->grad[g ^ 1]), at(m->act[l])},
                                  .m = B, .n = W};
        st = run(&dx, stream);
        if (st == LMS_OK)
            st = run(&relu, stream);
        if (m->s.dynamic) { /* this layer's input and output gradient are used up */
            drop(&m->act[l], stream);
            drop(&m->grad[g], stream);
        }
    }
    m->step++;
    double t = (double)m->step;
    float lr_t = (float)(LR * sqrt(1 - pow(BETA2, t)) / (1 - pow(BETA1, t)));
    for (uint32_t l = 0; st == LMS_OK && l < L; l++) {
        st = adam(&m->weight[l], lr_t, stream);
        if (st == LMS_OK)
            st = adam(&m->bias[l], lr_t, stream);
    }
    if (st == LMS_OK)
        st = lms_access((char *)m->loss + B * sizeof(float), sizeof(float), LMS_READ, stream);
    if (st == LMS_OK)
        st = dev_copy_d2h(dev, swap_stream(stream), loss, at(m->loss) + B * sizeof(float),
                          sizeof(float));
    if (st == LMS_OK)
        st = lms_stream_synchronize(stream);
    return st != LMS_OK ? st : lms_mark_iteration();
}
