/* bench/reference_none.c — the reference allocators (reference.h) of a build
 * without the CUDA toolkit's headers: none to compare lms with. */
#include "base/base.h"
#include "bench/reference.h"

lms_status_t dev_reference_open(dev_device_t *dev, dev_reference_t **out,
                                dev_reference_info_t *info)
{
    (void)dev, (void)out, (void)info;
    return base_fail(LMS_ERR_UNSUPPORTED, "this build has no CUDA toolkit: "
                                          "no CUDA allocators to compare with");
}

/* Never called: no reference can be opened. */
lms_status_t dev_reference_pairs(dev_reference_t *ref, dev_reference_alloc_t which, size_t size,
                                 int pairs)
{
    (void)ref, (void)which, (void)size, (void)pairs;
    return base_fail(LMS_ERR_UNSUPPORTED, "this build has no CUDA toolkit");
}

lms_status_t dev_reference_synchronize(dev_reference_t *ref)
{
    (void)ref;
    return base_fail(LMS_ERR_UNSUPPORTED, "this build has no CUDA toolkit");
}

void dev_reference_close(dev_reference_t *ref)
{
    (void)ref;
}
