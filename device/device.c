/*
 * device/device.c — builds a device stack (check -> [fault ->] backend), closes
 * it, tells the kernels table of both, and the small things every layer
 * shares: op names, options. See device.h.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "device/fault.h"
#include "device/layer.h"

/* The ops table is its name, close, and one pointer per DEV_OP_LIST entry. */
_Static_assert(sizeof(dev_ops_t) == (2 + DEV_OP_COUNT) * sizeof(void *),
               "DEV_OP_LIST names every op of dev_ops_t");

const char *dev_op_name(dev_op_t op)
{
    static const char *const names[] = {
#define DEV_OP_NAME(op) #op,
        DEV_OP_LIST(DEV_OP_NAME)
#undef DEV_OP_NAME
    };
    return (unsigned)op < DEV_OP_COUNT ? names[op] : "?";
}

void dev_config_from_options(dev_config_t *cfg)
{
    const base_options_t *o = base_options();
    *cfg = (dev_config_t){
        .backend = o->backend,
        .ordinal = (int)o->device,
        .sim_memory = o->sim_memory,
        .sim_granularity = o->sim_granularity,
        .sim_h2d_gbps = o->sim_h2d_gbps,
        .sim_d2h_gbps = o->sim_d2h_gbps,
        .sim_vmm_us_per_mib = o->sim_vmm_us_per_mib,
        .sim_set_access_d2h_us_per_mib = o->sim_set_access_d2h_us_per_mib,
    };
}

/* Whether the check layer validates fully (Note [Two levels of checking] in
 * check.c): as asked, else as LMS_DEVICE_CHECKS says, whose auto follows the
 * build (LMS_DEVICE_CHECKS_FULL: Debug and sanitizer builds). */
#ifdef LMS_DEVICE_CHECKS_FULL
static const bool full_checks_by_default = true;
#else
static const bool full_checks_by_default = false;
#endif

static bool full_checks(dev_checks_t asked)
{
    if (asked != DEV_CHECKS_DEFAULT)
        return asked == DEV_CHECKS_FULL;
    const char *option = base_options()->device_checks;
    if (strcmp(option, "full") == 0)
        return true;
    if (strcmp(option, "handles") == 0)
        return false;
    return full_checks_by_default;
}

/*
 * Note [Kernels table]
 * ~~~~~~~~~~~~~~~~~~~~
 * liblms.so holds no kernel and no fatbin: the test kernels (fill, checksum,
 * axpy, bench/train's training kernels) are the library lms_kernels
 * (device/kernels/), linked into tests, benchmarks and lms-info only. It
 * launches through the launch op, so its kernels are checked by the check
 * layer, failed by the fault layer and seen by the observer like any op.
 *
 * It sets itself up for each device through a kernels table that it
 * registers when the program starts (dev_set_kernels), because the devices
 * it runs on are mostly opened inside lms (lms_init), where it cannot reach.
 * dev_open calls the table's open before it returns, so before the caller
 * can queue a host function on the device, which is where the cuda side
 * must load its module (Note [Kernels load at open] in
 * device/kernels/cuda.c). A process-wide pointer, read once per open: a
 * device keeps the table it was opened with until it closes.
 */
static _Atomic(const dev_kernels_t *) kernel_table;

void dev_set_kernels(const dev_kernels_t *kernels)
{
    atomic_store_explicit(&kernel_table, kernels, memory_order_release);
}

static lms_status_t open_backend(const dev_config_t *cfg, dev_layer_t *out, dev_info_t *info)
{
    const char *b = cfg->backend ? cfg->backend : "auto";
    if (strcmp(b, "sim") == 0)
        return dev_sim_open(cfg, out, info);
    if (strcmp(b, "cuda") == 0)
        return dev_cuda_open(cfg->ordinal, out, info);
    if (strcmp(b, "auto") != 0)
        return base_fail(LMS_ERR_INVALID, "dev_open: unknown backend \"%s\" (auto, cuda or sim)", b);
    lms_status_t st = dev_cuda_open(cfg->ordinal, out, info);
    if (st != LMS_ERR_NO_DEVICE)
        return st;
    base_log(BASE_LOG_INFO, "no CUDA device (%s); using the sim backend", lms_last_error());
    return dev_sim_open(cfg, out, info);
}

lms_status_t dev_open(const dev_config_t *cfg, dev_device_t **out)
{
    dev_config_t from_options;
    if (cfg == NULL) {
        dev_config_from_options(&from_options);
        cfg = &from_options;
    }
    if (out == NULL)
        return base_fail(LMS_ERR_INVALID, "dev_open: NULL output");
    dev_device_t *dev = base_meta_calloc(1, sizeof *dev);
    if (dev == NULL)
        return base_fail(LMS_ERR_OUT_OF_MEMORY, "dev_open: no host memory");
    dev_layer_t layer;
    lms_status_t st = open_backend(cfg, &layer, &dev->info);
    if (st != LMS_OK)
        goto fail_dev;
    if (cfg->fault_injection) {
        dev_layer_t fault;
        st = dev_fault_open(layer, &fault, &dev->fault);
        if (st != LMS_OK)
            goto fail_layer;
        layer = fault;
    }
    dev_layer_t check;
    st = dev_check_open(layer, &dev->info, full_checks(cfg->checks), &check);
    if (st != LMS_OK)
        goto fail_layer;
    dev->ops = check.ops;
    dev->self = check.self;
    if (cfg->fault_plan != NULL && (st = dev_fault_set(dev, cfg->fault_plan)) != LMS_OK) {
        dev_close(dev);
        return st;
    }
    dev->kernel_table = atomic_load_explicit(&kernel_table, memory_order_acquire);
    if (dev->kernel_table != NULL)
        dev->kernel_table->open(dev);
    *out = dev;
    return LMS_OK;

fail_layer:
    layer.ops->close(layer.self);
fail_dev:
    base_meta_free(dev);
    return st;
}

void dev_close(dev_device_t *dev)
{
    if (dev == NULL)
        return;
    if (dev->fault != NULL) /* teardown must not fail on purpose */
        dev_fault_layer_set(dev->fault, &(dev_fault_plan_t){0});
    dev_check_destroy_all(dev->self);
    if (dev->kernel_table != NULL)
        dev->kernel_table->close(dev);
    dev->ops->close(dev->self);
    base_meta_free(dev);
}

void dev_live(dev_device_t *dev, dev_live_t *out)
{
    dev_check_live(dev->self, out);
}
