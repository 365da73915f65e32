/*
 * tests/interpose/fake_nccl.c — a one-rank stand-in for NCCL, built as
 * libnccl.so.2 (its soname) and loaded only as the dependency of
 * libnccl_caller.so, which nccl_local_probe.c opens RTLD_LOCAL: NCCL is then
 * in no global scope, as when libtorch_cuda (loaded locally by Python)
 * brings it in. An all-reduce of one rank copies its send buffer to its
 * receive buffer, on the host, once the lms stream adopted for its stream
 * has done what it was given (lms's fetches).
 */
#include <string.h>

#include <cuda_runtime_api.h>

#include "lms.h"
#include "interpose/nccl_abi.h"

#define API __attribute__((visibility("default")))

API ncclResult_t ncclCommCount(const ncclComm_t comm, int *count)
{
    (void)comm;
    *count = 1;
    return ncclSuccess;
}

/* 32-bit floats only (ncclFloat32, 7): what the probe reduces. */
API ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t type,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
    (void)op, (void)comm;
    if (type != 7)
        return ncclInvalidArgument;
    lms_stream_t s;
    if (lms_stream_adopt(stream, &s) != LMS_OK || lms_stream_synchronize(s) != LMS_OK)
        return ncclUnhandledCudaError;
    memmove(recv, send, count * 4);
    return ncclSuccess;
}
