/*
 * tests/interpose/fork_probe.c — liblms.so's hooks across a fork, as a
 * DataLoader worker meets them. An allocation is made through the hooks
 * (its line still in the trace's buffer) and the process forks:
 *   - the child frees the parent's pointer through every free hook, and
 *     each answers CUDA's "not supported" (docs/interposer.md: a child forked after lms
 *     started cannot use lms; Note [Frees in a forked child] in
 *     interpose/interpose.c; issue 24: cudaFree answered 35, the runtime's
 *     insufficient driver, and cuMemFree invalid value); then it exits
 *     normally, its atexit handlers and stdio's flush running;
 *   - the same again after the parent has freed through the hooks once, so
 *     that the child inherits the interposer's knowledge of lms's range
 *     (lms_free then answered "not lms's": invalid value);
 *   - then the parent frees and exits.
 * CTest then counts the trace's lines (interpose.fork_trace_once): each
 * once, the child's exit must not write the parent's buffered lines again
 * (interpose/trace.c). Run with LD_PRELOAD=liblms.so and the stand-in
 * (tests/CMakeLists.txt).
 */
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "probe.h"

/* Forks a child that frees p through each free hook and exits with its
 * failures; checks it exited 0. */
static void child_cannot_free(CUdeviceptr p, const char *when)
{
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) {
        void *q = (void *)(uintptr_t)p;
        cudaError_t rt = cudaFree(q);
        CHECK(rt == cudaErrorNotSupported, "%s: cudaFree in the child: %d, not %d", when, rt,
              cudaErrorNotSupported);
        CUresult drv = cuMemFree(p);
        CHECK(drv == CUDA_ERROR_NOT_SUPPORTED, "%s: cuMemFree in the child: %d, not %d", when, drv,
              CUDA_ERROR_NOT_SUPPORTED);
        rt = cudaFreeAsync(q, 0);
        CHECK(rt == cudaErrorNotSupported, "%s: cudaFreeAsync in the child: %d", when, rt);
        drv = cuMemFreeAsync(p, 0);
        CHECK(drv == CUDA_ERROR_NOT_SUPPORTED, "%s: cuMemFreeAsync in the child: %d", when, drv);
        CHECK(cudaFree(NULL) == cudaSuccess, "%s: cudaFree(NULL) in the child", when);
        exit(failures != 0); /* atexit handlers and stdio's flush run */
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "%s: the child failed (status %d)", when, status);
}

int main(void)
{
    CUdeviceptr p, q;
    CHECK(cuMemAlloc(&p, 1 << 20) == CUDA_SUCCESS, "cuMemAlloc");
    child_cannot_free(p, "before any free");
    CHECK(cuMemAlloc(&q, 1 << 20) == CUDA_SUCCESS, "cuMemAlloc");
    CHECK(cuMemFree(q) == CUDA_SUCCESS, "cuMemFree");
    child_cannot_free(p, "after a free");
    CHECK(cuMemFree(p) == CUDA_SUCCESS, "cuMemFree");
    return failures != 0;
}
