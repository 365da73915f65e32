/*
 * bench/model.h — the model bench/train and bench/e2e train: an MLP of
 * `layers` fully connected layers of width x width (ReLU between them, softmax
 * cross-entropy over `width` classes at the end), trained with Adam on a
 * fixed synthetic dataset. Every tensor — parameters, gradients, optimizer
 * state, activations, the batch — is an lms allocation, and every kernel
 * (the device's training kernels, device.h) runs after lms_access_many of
 * exactly the operands it uses, so the model trains wherever lms keeps its
 * memory, and its losses are bitwise those of a run with room for everything.
 *
 * The data: batch b (of `batches`, cycled) has inputs uniform in [-1, 1) from
 * a seeded generator and labels = the index of the largest of each row's
 * first 16 inputs (of `width` classes), which the network learns, so the
 * loss falls from about ln(width).
 *
 * One model at a time per lms start; not thread-safe.
 */
#ifndef LMS_BENCH_MODEL_H
#define LMS_BENCH_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lms.h"

typedef struct model_shape {
    uint32_t layers;  /* fully connected layers */
    uint32_t width;   /* inputs, hidden units and classes */
    uint32_t batch;   /* rows per step */
    uint32_t batches; /* distinct batches, cycled */
    bool dynamic;     /* activations allocated in each step and freed once used, as a
                         framework does; false: allocated once, with the model */
} model_shape_t;

typedef struct model model_t;

/* Allocates every tensor of the model on lms (lms must be started) and
 * initializes parameters (He-scaled from a fixed seed) and optimizer state
 * (zero). On failure, prints nothing, frees what it made and returns the
 * status (lms_last_error says why). */
lms_status_t model_create(const model_shape_t *shape, model_t **out);

/* One training step on `stream` (forward, loss, backward, Adam), then waits
 * for it and stores the batch's mean loss in *loss; ends with
 * lms_mark_iteration. */
lms_status_t model_step(model_t *m, lms_stream_t stream, float *loss);

/* lms_stats' allocated_bytes at the peak of the steps run so far (after
 * the forward pass): the footprint of a dynamic model. */
uint64_t model_peak_allocated(const model_t *m);

/* Frees every tensor. */
void model_destroy(model_t *m);

/* Bytes the model's tensors ask for (before lms rounds them to chunks). */
uint64_t model_bytes(const model_shape_t *shape);

/* The floating-point operations of one step (multiply-adds count 2). */
double model_step_flops(const model_shape_t *shape);

#endif
