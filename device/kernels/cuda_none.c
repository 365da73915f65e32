/*
 * device/kernels/cuda_none.c — the kernels' CUDA side in a build without the
 * CUDA toolkit's headers, where no device of the cuda backend opens
 * (device/cuda_none.c): the kernels table's open is never called with one,
 * and a launch's enqueue is never called at all (sim calls its run).
 */
#include "base/base.h"
#include "device/kernels/cuda.h"

void *kernels_cuda_open(dev_device_t *dev)
{
    dev->info.has_kernels = false;
    return NULL;
}

void kernels_cuda_close(void *state)
{
    (void)state;
}

lms_status_t kernels_cuda_enqueue(void *state, uint64_t native, const void *call)
{
    (void)state, (void)native, (void)call;
    return base_fail(LMS_ERR_UNSUPPORTED,
                     "the kernels library was built without the CUDA toolkit: no CUDA kernels");
}
