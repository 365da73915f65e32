/*
 * tests/interpose/nccl_local_probe.c — a hooked collective whose NCCL was
 * loaded RTLD_LOCAL still reaches NCCL (interpose_sym opens the libraries
 * the hook list names with RTLD_NOLOAD), and a hooked call with no NCCL
 * loaded at all fails with a line in the log, not silently. Run with
 * LD_PRELOAD=liblms.so, LMS_BACKEND=sim, LMS_DEVICE_LIMIT=16MiB,
 * LMS_HOST_LIMIT=64MiB, LMS_POLICY=lru (tests/CMakeLists.txt), with the
 * path of libnccl_caller.so as its argument.
 *
 * The all-reduce's buffers are evicted first: the hook must make them
 * resident, and the one rank's result is its own send buffer.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "lms.h"
#include "interpose/nccl_abi.h"
#include "probe.h"

#define MIB ((size_t)1 << 20)
#define N 12

int main(int argc, char **argv)
{
    CHECK(argc == 2, "usage: nccl_local_probe path/to/libnccl_caller.so");
    if (argc != 2)
        return 1;
    /* no NCCL anywhere yet: the hook has nothing to call, and says so */
    ncclResult_t (*all_reduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t,
                               ncclComm_t, cudaStream_t) =
        (__typeof__(all_reduce))dlsym(RTLD_DEFAULT, "ncclAllReduce");
    CHECK(all_reduce != NULL, "liblms.so's ncclAllReduce is the process's");
    float *buf[N];
    for (int i = 0; i < N; i++) {
        CHECK(lms_malloc((void **)&buf[i], 2 * MIB, NULL) == LMS_OK, "lms_malloc");
        CHECK(lms_access(buf[i], 2 * MIB, LMS_OVERWRITE, NULL) == LMS_OK, "access");
        for (size_t j = 0; j < 2 * MIB / 4; j++)
            buf[i][j] = (float)(i * 1000 + (int)(j % 1000));
    }
    if (all_reduce != NULL)
        CHECK(all_reduce(buf[0], buf[1], 16, (ncclDataType_t)7, (ncclRedOp_t)0, NULL, NULL) ==
                  ncclInternalError, "with no NCCL loaded, the hook fails (and logs why)");

    void *caller = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    CHECK(caller != NULL, "dlopen %s: %s", argv[1], dlerror());
    int (*call)(const float *, float *, size_t) =
        caller != NULL ? (__typeof__(call))dlsym(caller, "caller_all_reduce") : NULL;
    CHECK(call != NULL, "caller_all_reduce");
    CHECK(dlsym(RTLD_DEFAULT, "ncclCommCount") == NULL, "NCCL is in no global scope");
    /* the stand-in NCCL links liblms.so, so its handle also finds liblms.so's
     * own cuMemsetD8_v2: with no CUDA loaded, that is no real function (it
     * would call itself) */
    CUresult (*memset8)(CUdeviceptr, unsigned char, size_t) =
        (__typeof__(memset8))dlsym(RTLD_DEFAULT, "cuMemsetD8_v2");
    CHECK(memset8 != NULL && memset8((CUdeviceptr)(uintptr_t)buf[2], 0, 16) == CUDA_ERROR_NOT_FOUND,
          "a hooked driver call with no driver loaded fails as not found");
    for (int i = 2; i < N; i++) /* more than the device holds: 0 and 1 go to the host */
        CHECK(lms_access(buf[i], 2 * MIB, LMS_WRITE, NULL) == LMS_OK, "access");
    lms_stats_t t0, t1;
    CHECK(lms_stats(&t0) == LMS_OK, "stats");
    if (call != NULL)
        CHECK(call(buf[0], buf[1], 2 * MIB / 4) == ncclSuccess,
              "an all-reduce through a library opened RTLD_LOCAL reaches its NCCL");
    CHECK(lms_stats(&t1) == LMS_OK, "stats");
    CHECK(t1.fetches >= t0.fetches + 1, "its send buffer was fetched (%llu; the receive "
          "buffer, written whole, need not be)",
          (unsigned long long)(t1.fetches - t0.fetches));
    CHECK(lms_access(buf[1], 2 * MIB, LMS_READ, NULL) == LMS_OK, "access");
    size_t wrong = 0;
    for (size_t j = 0; j < 2 * MIB / 4; j++)
        wrong += buf[1][j] != (float)(int)(j % 1000);
    CHECK(wrong == 0, "%zu elements differ from the send buffer's", wrong);
    printf("nccl_local_probe: %s\n", failures ? "FAILED" : "ok");
    return failures != 0;
}
