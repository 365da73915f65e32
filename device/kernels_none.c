/* device/kernels_none.c — the kernel image of a build without nvcc: empty, so
 * the cuda backend reports has_kernels = false. */
#include "device/layer.h"

const unsigned char dev_cuda_kernels_image[1];
const size_t dev_cuda_kernels_image_size = 0;
