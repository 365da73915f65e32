/*
 * device/layer.h — private to device/: how the layers of a device stack are
 * opened. dev_open() (device.c) is the only caller; see device.h for the stack.
 */
#ifndef LMS_DEVICE_LAYER_H
#define LMS_DEVICE_LAYER_H

#include "device/device.h"
#include "device/fault.h"

typedef struct dev_layer {
    const dev_ops_t *ops;
    void *self;
} dev_layer_t;

/* Backends: fill *out and *info, or fail with no resources held. */
lms_status_t dev_sim_open(const dev_config_t *cfg, dev_layer_t *out, dev_info_t *info);
lms_status_t dev_cuda_open(int ordinal, dev_layer_t *out, dev_info_t *info);

/* Wrappers: take ownership of inner (closing it on their close), and on
 * failure leave inner open and untouched. */
lms_status_t dev_fault_open(dev_layer_t inner, dev_layer_t *out, struct dev_fault **fault);
/* full: the check layer's full validation (Note [Two levels of checking] in check.c). */
lms_status_t dev_check_open(dev_layer_t inner, const dev_info_t *info, bool full,
                            dev_layer_t *out);

/* The check layer's teardown and counters (check.c), for dev_close / dev_live. */
void dev_check_destroy_all(void *check_self);
void dev_check_live(void *check_self, dev_live_t *out);

/* Replaces the fault layer's plan (fault.c): dev_close sets an empty one, so
 * that teardown never fails on purpose. */
void dev_fault_layer_set(struct dev_fault *fault, const dev_fault_plan_t *plan);

#endif /* LMS_DEVICE_LAYER_H */
