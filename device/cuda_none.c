/* device/cuda_none.c — the cuda backend of a build without the CUDA toolkit's
 * headers: there is no device to open, and no CUDA allocators to compare
 * lms with (reference.c is not built either). */
#include "base/base.h"
#include "device/layer.h"

lms_status_t dev_cuda_open(int ordinal, dev_layer_t *out, dev_info_t *info)
{
    (void)ordinal, (void)out, (void)info;
    return base_fail(LMS_ERR_NO_DEVICE,
                     "this liblms was built without the CUDA toolkit: only the sim backend exists");
}

lms_status_t dev_reference_open(dev_device_t *dev, dev_reference_t **out,
                                dev_reference_info_t *info)
{
    (void)dev, (void)out, (void)info;
    return base_fail(LMS_ERR_UNSUPPORTED, "this liblms was built without the CUDA toolkit: "
                                          "no CUDA allocators to compare with");
}

/* Never called: no reference can be opened. */
lms_status_t dev_reference_pairs(dev_reference_t *ref, dev_reference_alloc_t which, size_t size,
                                 int pairs)
{
    (void)ref, (void)which, (void)size, (void)pairs;
    return base_fail(LMS_ERR_UNSUPPORTED, "this liblms was built without the CUDA toolkit");
}

lms_status_t dev_reference_synchronize(dev_reference_t *ref)
{
    (void)ref;
    return base_fail(LMS_ERR_UNSUPPORTED, "this liblms was built without the CUDA toolkit");
}

void dev_reference_close(dev_reference_t *ref)
{
    (void)ref;
}
