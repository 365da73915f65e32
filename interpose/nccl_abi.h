/*
 * interpose/nccl_abi.h — the part of NCCL's interface the hooks name: from
 * the toolkit's nccl.h when it has one (the compiler then checks the hooks
 * against it), else declared here as NCCL 2 defines them (its ABI has been
 * stable since 2.0: int-sized enums, an opaque communicator).
 */
#ifndef LMS_INTERPOSE_NCCL_ABI_H
#define LMS_INTERPOSE_NCCL_ABI_H

#if defined(__has_include) && __has_include(<nccl.h>)
#include <nccl.h>
#else
#include <cuda_runtime_api.h>
typedef enum { ncclSuccess = 0, ncclUnhandledCudaError = 1, ncclSystemError = 2,
               ncclInternalError = 3, ncclInvalidArgument = 4, ncclInvalidUsage = 5,
               ncclRemoteError = 6, ncclInProgress = 7 } ncclResult_t;
typedef struct ncclComm *ncclComm_t;
typedef enum { ncclRedOp_dummy_ = 0x7fffffff } ncclRedOp_t;
typedef enum { ncclInt8 = 0, ncclNumTypes = 12, ncclDataType_dummy_ = 0x7fffffff } ncclDataType_t;
#endif

#endif /* LMS_INTERPOSE_NCCL_ABI_H */
