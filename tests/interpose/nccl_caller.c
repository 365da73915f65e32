/*
 * tests/interpose/nccl_caller.c — libnccl_caller.so: a library that links
 * NCCL (libnccl.so.2: fake_nccl.c), as libtorch_cuda does. Its call of
 * ncclAllReduce binds to the process's first definition: liblms.so's, under
 * the preload, whose real function is in no global scope when this library
 * was opened RTLD_LOCAL (nccl_local_probe.c).
 */
#include <cuda_runtime_api.h>

#include "interpose/nccl_abi.h"

__attribute__((visibility("default"))) int caller_all_reduce(const float *send, float *recv,
                                                             size_t n)
{
    static int one_rank = 1; /* the stand-in's communicator */
    return (int)ncclAllReduce(send, recv, n, (ncclDataType_t)7, (ncclRedOp_t)0,
                              (ncclComm_t)(void *)&one_rank, NULL);
}
