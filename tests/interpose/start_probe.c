/*
 * tests/interpose/start_probe.c — a process in which lms cannot start: its
 * first failure is remembered (Note [A failed start] in interpose/launch.c),
 * and the hooked calls after it do not try again. Run with
 * LD_PRELOAD=liblms.so, LMS_BACKEND=sim and LMS_DEVICE_LIMIT=1KiB, less than
 * one chunk (tests/CMakeLists.txt), on the stand-in CUDA (fake_cuda.h).
 *
 * Each try to start opens a simulated device, whose memory is a memfd named
 * "lms-sim-device": this program's memfd_create, which liblms.so's calls
 * reach (an executable's definition comes first), counts them. Before the
 * failure was remembered, every launch and copy tried (a copy twice, once
 * per side), and every allocation.
 *
 * What the program sees stays as it was (docs/interposer.md: "Safety"): allocations
 * and memory info fail with lms's error, each time with the same message in
 * lms_last_error; launches, copies and memsets of memory that is not lms's
 * go on to CUDA.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "lms.h"
#include "fake_cuda.h"
#include "probe.h"

#define CALLS 50

static unsigned starts; /* simulated devices opened: tries to start lms */

__attribute__((visibility("default"))) int memfd_create(const char *name, unsigned int flags)
{
    if (strcmp(name, "lms-sim-device") == 0)
        __atomic_fetch_add(&starts, 1, __ATOMIC_RELAXED);
    return (int)syscall(SYS_memfd_create, name, flags);
}

/* The failure lms_last_error gives now is the first start's. */
static void same_message(const char *first, const char *what)
{
    CHECK(strcmp(lms_last_error(), first) == 0, "%s: lms_last_error is \"%s\", want \"%s\"", what,
          lms_last_error(), first);
}

int main(void)
{
    fake_settle_off(); /* the stand-in's copies would adopt their stream: a start */
    void *p = NULL;
    CHECK(cudaMalloc(&p, 1 << 20) == cudaErrorInvalidValue, "cudaMalloc: lms cannot start");
    char first[512];
    snprintf(first, sizeof first, "%s", lms_last_error());
    CHECK(strstr(first, "device limit") != NULL, "the failure names the device limit: %s", first);
    CHECK(starts == 1, "the first allocation tried to start lms %u times, want 1", starts);

    static const fake_fn_t f = {0, 1, {0}, {8}, NULL};
    static uint64_t host[64], other[64];
    void *arg = host;
    void *params[] = {&arg};
    uint64_t before = fake_counts().launches, copies = fake_counts().copies;
    for (int i = 0; i < CALLS; i++) {
        CHECK(cuLaunchKernel((CUfunction)(uintptr_t)&f, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL) ==
                  CUDA_SUCCESS, "launch %d", i);
        CHECK(cudaMemcpy(other, host, sizeof host, cudaMemcpyHostToHost) == cudaSuccess, "copy %d",
              i);
        CHECK(cudaMemsetAsync(host, i, sizeof host, NULL) == cudaSuccess, "memset %d", i);
    }
    CHECK(fake_counts().launches - before == CALLS, "every launch went on to CUDA");
    CHECK(fake_counts().copies - copies == 2 * CALLS, "every copy and memset went on to CUDA");

    CUdeviceptr d;
    size_t free_b, total_b;
    CHECK(cuMemAlloc(&d, 1 << 20) == CUDA_ERROR_INVALID_VALUE, "cuMemAlloc: lms cannot start");
    same_message(first, "cuMemAlloc");
    CHECK(cudaMallocAsync(&p, 1 << 20, NULL) == cudaErrorInvalidValue, "cudaMallocAsync");
    same_message(first, "cudaMallocAsync");
    CHECK(cudaMemGetInfo(&free_b, &total_b) == cudaErrorInvalidValue, "cudaMemGetInfo");
    same_message(first, "cudaMemGetInfo");
    CHECK(starts == 1, "lms was tried %u times in all, want once", starts);
    return failures != 0;
}
