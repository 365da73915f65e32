/* device/cuda_none.c — the cuda backend of a build without the CUDA toolkit's
 * headers: there is no device to open. */
#include "base/base.h"
#include "device/layer.h"

lms_status_t dev_cuda_open(int ordinal, dev_layer_t *out, dev_info_t *info)
{
    (void)ordinal, (void)out, (void)info;
    return base_fail(LMS_ERR_NO_DEVICE,
                     "this liblms was built without the CUDA toolkit: only the sim backend exists");
}
