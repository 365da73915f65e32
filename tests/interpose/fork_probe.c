/*
 * tests/interpose/fork_probe.c — LMS_TRACE_ACCESSES across a fork: an
 * allocation is made through liblms.so's hooks (its line still in the
 * trace's buffer), the process forks, and the child exits normally, as a
 * DataLoader worker does; then the parent frees it and exits. CTest then
 * counts the lines (interpose.fork_trace_once): each once, the child's
 * exit must not write the parent's buffered lines again (interpose/trace.c).
 * Run with LD_PRELOAD=liblms.so and the stand-in (tests/CMakeLists.txt).
 */
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cuda.h>

#include "probe.h"

int main(void)
{
    CUdeviceptr p;
    CHECK(cuMemAlloc(&p, 1 << 20) == CUDA_SUCCESS, "cuMemAlloc");
    pid_t pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0)
        exit(0); /* atexit handlers and stdio's flush run */
    int status;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "the child exited (status %d)", status);
    CHECK(cuMemFree(p) == CUDA_SUCCESS, "cuMemFree");
    return failures != 0;
}
