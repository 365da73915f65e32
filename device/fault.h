/*
 * device/fault.h — fault injection: a device opened with fault_injection
 * (dev_config_t) has the fault layer in its stack (device.h), which fails
 * the calls a plan names, so that every error path above the device can be
 * tested on sim or on a GPU. The layer is fault.c.
 */
#ifndef LMS_DEVICE_FAULT_H
#define LMS_DEVICE_FAULT_H

#include <stdint.h>

#include "device/device.h"

/* Fail calls first .. first+count-1 (1-based, counted per op since the plan
 * was set) of op; or, when probability > 0, each call of op (every op if
 * op == DEV_OP_COUNT) and of the ops in `also` with that probability, drawn
 * from seed. A failing call returns status and does nothing. A plan with
 * first == 0 and probability == 0 injects nothing. */
typedef struct dev_fault_plan {
    dev_op_t op;
    uint64_t first;
    uint64_t count;
    double probability;
    uint64_t also; /* with a probability: more ops, bit 1 << op each */
    uint64_t seed;
    lms_status_t status; /* 0 means LMS_ERR_DEVICE */
} dev_fault_plan_t;

/* Replaces the plan and zeroes the counters. LMS_ERR_INVALID if dev was not
 * opened with fault_injection, or for a plan that names no op, an op out of
 * range, a probability outside [0, 1] or a status that is no failure. */
lms_status_t dev_fault_set(dev_device_t *dev, const dev_fault_plan_t *plan);
/* Calls of op seen by the fault layer since the plan was set (0 without one). */
uint64_t dev_fault_calls(dev_device_t *dev, dev_op_t op);
/* Calls failed on purpose since the plan was set. */
uint64_t dev_fault_injected(dev_device_t *dev);

#endif /* LMS_DEVICE_FAULT_H */
