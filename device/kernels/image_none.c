/* device/kernels/image_none.c — the kernel image of a build without nvcc:
 * empty, so a device of the cuda backend has no kernels (has_kernels false). */
#include "device/kernels/cuda.h"

const unsigned char dev_cuda_kernels_image[1];
const size_t dev_cuda_kernels_image_size = 0;
