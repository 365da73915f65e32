/*
 * tests/interpose/graph_probe.c — CUDA graph capture through liblms.so's
 * hooks (Note [Graph capture] in interpose/graph.c), on the sim backend with
 * libfake_cuda.so as CUDA: its captured launches run at each graph launch,
 * reading what their parameters point to (a fault if it is not resident).
 * Run like launch_probe: LD_PRELOAD=liblms.so, LMS_BACKEND=sim,
 * LMS_DEVICE_LIMIT=16MiB (eight 2 MiB chunks), LMS_HOST_LIMIT=64MiB,
 * LMS_POLICY=lru.
 *
 * A launch and a memset captured pin the allocations they touch, and
 * nothing lms does goes onto the captured stream (lms let go of it first);
 * the graph's executable keeps them pinned through more traffic than the
 * device holds, after the graph itself is destroyed, and drops them when it
 * is destroyed. A freed allocation leaves its graph's pins, stream-ordered
 * allocation in a capture fails, once the runtime's capture (through the
 * driver's) ended no launch asks the driver about captures, and lms leaves
 * the thread's capture mode as it found it. A stream that joins a capture
 * by waiting for an event recorded in it is let go of before the wait.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "lms.h"
#include "fake_cuda.h"
#include "probe.h"
#include "stand_in.h"

#define MIB ((size_t)1 << 20)
#define N 12
#define SIZE (2 * MIB)

static CUdeviceptr buf[N];

static uint64_t pinned(void)
{
    lms_stats_t t;
    CHECK(lms_stats(&t) == LMS_OK, "stats");
    return t.pinned_bytes;
}

/* A launch of f, (void *a, void *b), on stream. */
static const fake_fn_t f2 = {0, 2, {0, 8}, {8, 8}};

static CUresult launch2(CUdeviceptr a, CUdeviceptr b, CUstream stream)
{
    void *p[] = {&a, &b};
    return cuLaunchKernel((CUfunction)(uintptr_t)&f2, 1, 1, 1, 1, 1, 1, 0, stream, p, NULL);
}

int main(void)
{
    for (int i = 0; i < N; i++) {
        CHECK(cuMemAlloc(&buf[i], SIZE) == CUDA_SUCCESS, "cuMemAlloc %d", i);
        stand_in_write(buf[i], SIZE, 100 + (uint64_t)i);
    }
    CUstream x = (CUstream)(uintptr_t)0x7000, y = (CUstream)(uintptr_t)0x8000;
    fake_counts_t c = fake_counts();
    CHECK(launch2(buf[0], buf[1], x) == CUDA_SUCCESS, "a launch on x before the capture");
    expect_checked(c.checked, 2, "before the capture");

    /* lms lets go of x before the capture begins */
    lms_stream_t before;
    CHECK(lms_stream_adopt((void *)x, &before) == LMS_OK, "adopt x");
    CHECK(cuStreamBeginCapture(x, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS, "begin capture");
    CHECK(lms_stream_synchronize(before) == LMS_ERR_INVALID, "lms let go of x");
    CHECK(pinned() == 0, "nothing pinned yet");

    /* captured: recorded, not run, and what they touch pinned whole */
    c = fake_counts();
    CHECK(launch2(buf[2], buf[3] + 4096, x) == CUDA_SUCCESS, "a captured launch");
    CHECK(fake_counts().captured == c.captured + 1 && fake_counts().launches == c.launches,
          "the launch was captured, not run");
    CHECK(pinned() == 2 * SIZE, "the two allocations it touches are pinned: %llu bytes",
          (unsigned long long)pinned());
    CHECK(fake_thread_mode_is_global() && fake_counts().relaxed > c.relaxed,
          "lms pinned in the relaxed capture mode and gave the thread its own back");
    CHECK(cuMemsetD2D8Async(buf[4], 4096, 7, 4096, 1, x) == CUDA_SUCCESS, "a captured memset");
    CHECK(pinned() == 3 * SIZE, "...pins what it writes: %llu bytes", (unsigned long long)pinned());
    CUdeviceptr a;
    CHECK(cuMemAllocAsync(&a, SIZE, x) == CUDA_ERROR_NOT_SUPPORTED,
          "stream-ordered allocation in a capture is not lms's to make");
    CHECK(launch2(buf[2], buf[3], x) == CUDA_SUCCESS && pinned() == 3 * SIZE,
          "an allocation is pinned once per capture");

    CUgraph g;
    CUgraphExec e;
    CHECK(cuStreamEndCapture(x, &g) == CUDA_SUCCESS, "end capture");
    CHECK(cuGraphInstantiate(&e, g, 0) == CUDA_SUCCESS, "instantiate");
    CHECK(cuGraphDestroy(g) == CUDA_SUCCESS && pinned() == 3 * SIZE,
          "the executable graph keeps the pins after the graph goes");

    /* more than the device through the other buffers: the pinned stay */
    lms_stats_t t0, t1;
    CHECK(lms_stats(&t0) == LMS_OK, "stats");
    for (int round = 0; round < 2; round++)
        for (int i = 5; i < N; i += 2) {
            c = fake_counts();
            CHECK(launch2(buf[i], buf[i + 1 < N ? i + 1 : 0], y) == CUDA_SUCCESS, "launch on y");
            expect_checked(c.checked, 2, "traffic on y");
        }
    CHECK(lms_stats(&t1) == LMS_OK && t1.evictions > t0.evictions, "the traffic evicted");
    c = fake_counts();
    CHECK(cuGraphLaunch(e, y) == CUDA_SUCCESS, "graph launch");
    expect_checked(c.checked, 4, "the graph's launches found their memory resident");
    CHECK(cuGraphExecDestroy(e) == CUDA_SUCCESS && pinned() == 0,
          "the executable graph's end drops the pins: %llu bytes", (unsigned long long)pinned());

    /* the runtime's capture goes through the driver's: it counts once, and
     * after it no launch asks the driver about captures */
    cudaGraph_t rg;
    cudaGraphExec_t re;
    CHECK(cudaStreamBeginCapture((cudaStream_t)x, cudaStreamCaptureModeRelaxed) == cudaSuccess,
          "runtime capture");
    CHECK(launch2(buf[6], buf[7], x) == CUDA_SUCCESS && pinned() == 2 * SIZE, "captured");
    CHECK(cudaStreamEndCapture((cudaStream_t)x, &rg) == cudaSuccess, "runtime end");
    CHECK(cudaGraphInstantiate(&re, rg, 0) == cudaSuccess, "runtime instantiate");
    c = fake_counts();
    CHECK(launch2(buf[8], buf[9], y) == CUDA_SUCCESS, "a launch after every capture ended");
    CHECK(fake_counts().capture_queries == c.capture_queries,
          "no capture in progress: the launch asked the driver nothing (%llu queries)",
          (unsigned long long)(fake_counts().capture_queries - c.capture_queries));

    /* a freed allocation leaves the graph's pins: the graph's end does not
     * unpin what was allocated since at its address */
    CUdeviceptr old = buf[7];
    CHECK(cuMemFree(buf[7]) == CUDA_SUCCESS, "free a pinned allocation");
    CHECK(lms_empty_cache() == LMS_OK, "empty the cache: the freed memory is released");
    CHECK(pinned() == SIZE, "its pin went with it: %llu bytes", (unsigned long long)pinned());
    CHECK(cuMemAlloc(&buf[7], SIZE) == CUDA_SUCCESS && buf[7] == old,
          "allocate again, at the same address");
    CHECK(lms_pin((void *)(uintptr_t)buf[7], SIZE) == LMS_OK, "pin it");
    CHECK(cudaGraphDestroy(rg) == cudaSuccess && cudaGraphExecDestroy(re) == cudaSuccess,
          "runtime destroys");
    CHECK(pinned() == SIZE, "the graph's end left the new allocation's pin: %llu bytes",
          (unsigned long long)pinned());
    CHECK(lms_unpin((void *)(uintptr_t)buf[7], SIZE) == LMS_OK, "unpin");

    /* a stream that joins a capture through an event: lms lets go of it
     * before its wait, and what it launches in the capture is pinned */
    CUevent ex = (CUevent)(uintptr_t)0xe1, ey = (CUevent)(uintptr_t)0xe2;
    lms_stream_t on_y;
    stand_in_write(buf[7], SIZE, 107); /* allocated again above */
    CHECK(launch2(buf[0], buf[1], y) == CUDA_SUCCESS, "a launch on y");
    CHECK(lms_stream_adopt((void *)y, &on_y) == LMS_OK, "adopt y");
    c = fake_counts();
    CHECK(cuStreamWaitEvent(y, ex, 0) == CUDA_SUCCESS && lms_stream_synchronize(on_y) == LMS_OK &&
              fake_counts().capture_queries == c.capture_queries,
          "with no capture in progress, a wait leaves the stream to lms and asks the driver nothing");
    CHECK(cuStreamBeginCapture(x, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS, "capture x");
    CHECK(cuEventRecord(ex, x) == CUDA_SUCCESS, "record an event on x");
    c = fake_counts();
    CHECK(cudaStreamWaitEvent((cudaStream_t)y, (cudaEvent_t)ex, 0) == cudaSuccess &&
              fake_counts().joins == c.joins + 1,
          "y waits for it: y joins the capture");
    CHECK(lms_stream_synchronize(on_y) == LMS_ERR_INVALID, "lms let go of y before it joined");
    CHECK(fake_thread_mode_is_global(), "...and gave the thread its capture mode back");
    c = fake_counts();
    CHECK(launch2(buf[2], buf[3], y) == CUDA_SUCCESS && fake_counts().captured == c.captured + 1 &&
              fake_counts().launches == c.launches,
          "a launch on y is captured");
    CHECK(pinned() == 2 * SIZE, "...and pins what it touches: %llu bytes",
          (unsigned long long)pinned());
    CHECK(cuEventRecord(ey, y) == CUDA_SUCCESS && cuStreamWaitEvent(x, ey, 0) == CUDA_SUCCESS,
          "x waits for y");
    CHECK(cuStreamEndCapture(x, &g) == CUDA_SUCCESS && cuGraphInstantiate(&e, g, 0) == CUDA_SUCCESS &&
              cuGraphDestroy(g) == CUDA_SUCCESS,
          "end the capture, instantiate");
    for (int i = 5; i < N; i++) { /* (buf[4] holds the first capture's memset) */
        c = fake_counts();
        CHECK(launch2(buf[i], buf[i + 1 < N ? i + 1 : 5], y) == CUDA_SUCCESS, "launch on y");
        expect_checked(c.checked, 2, "y, after the capture");
    }
    c = fake_counts();
    CHECK(cuGraphLaunch(e, x) == CUDA_SUCCESS, "graph launch");
    expect_checked(c.checked, 2, "the launch captured on y found its memory resident");
    CHECK(cuGraphExecDestroy(e) == CUDA_SUCCESS && pinned() == 0, "its end drops the pins");

    for (int i = 0; i < N; i++)
        CHECK(cuMemFree(buf[i]) == CUDA_SUCCESS, "cuMemFree %d", i);
    fake_counts_t end = fake_counts();
    printf("graph_probe: %llu captures, %llu launches captured, %llu pointers checked: %s\n",
           (unsigned long long)end.captures, (unsigned long long)end.captured,
           (unsigned long long)end.checked, failures ? "FAILED" : "ok");
    return failures != 0;
}
