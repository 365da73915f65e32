/*
 * tests/interpose/cudart_probe.c — a program that knows nothing of lms: it
 * is linked against the CUDA toolkit's shared libcudart and calls the CUDA
 * runtime. Run with LD_PRELOAD=liblms.so, LMS_BACKEND=sim,
 * LMS_DEVICE_LIMIT=64MiB and LMS_HOST_LIMIT=64MiB (tests/CMakeLists.txt):
 * lms answers its allocations, frees and memory info.
 *
 *   cudart_probe            the answers are lms's
 *   cudart_probe disabled   with LMS_ENABLE=0: none of them is lms's (on a
 *                           machine without a GPU, CUDA's own errors)
 *   cudart_probe nogpu      with LMS_BACKEND=cuda and no GPU visible
 *                           (CUDA_VISIBLE_DEVICES empty): allocations fail,
 *                           launches, copies and frees get CUDA's answers,
 *                           and nothing crashes
 *
 * dlsym on libcudart's handle gives lms's cudaMalloc (LMS_ENABLE=0: CUDA's).
 * lms's own functions are found with dlsym, as a program without lms.h
 * would: they are only there because of the preload.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#define MIB ((size_t)1 << 20)
#define LIMIT (64 * MIB)

#include "probe.h"

typedef int (*range_fn)(void **base, size_t *bytes);
typedef int (*owner_fn)(const void *ptr, void **base, size_t *size);

static range_fn lms_range(void)
{
    range_fn f;
    void *sym = dlsym(RTLD_DEFAULT, "lms_reserved_range");
    memcpy(&f, &sym, sizeof f);
    return f;
}

static int in_lms_range(const void *p)
{
    void *base;
    size_t bytes;
    range_fn f = lms_range();
    if (f == NULL || f(&base, &bytes) != 0)
        return 0;
    return (uintptr_t)p >= (uintptr_t)base && (uintptr_t)p - (uintptr_t)base < bytes;
}

/* dlsym of cudaMalloc on libcudart's own handle (Note [dlsym] in
 * interpose/dlsym.c): lms's wrapper when lms is enabled, CUDA's when not. */
static int dlsym_gives_lms_cudaMalloc(void)
{
    Dl_info rt;
    void *h = NULL;
    if (dladdr((void *)cudaGetErrorName, &rt) != 0)
        h = dlopen(rt.dli_fname, RTLD_NOW | RTLD_NOLOAD);
    CHECK(h != NULL, "libcudart's handle");
    void *f = h != NULL ? dlsym(h, "cudaMalloc") : NULL, *first = dlsym(RTLD_DEFAULT, "cudaMalloc");
    Dl_info in;
    CHECK(f != NULL && dladdr(f, &in) != 0, "dlsym(libcudart, cudaMalloc)");
    if (h != NULL)
        dlclose(h);
    return f == first && strcmp(in.dli_fname, rt.dli_fname) != 0;
}

static void enabled(void)
{
    CHECK(lms_range() != NULL, "lms_reserved_range is not in the process: is liblms.so preloaded?");
    CHECK(dlsym_gives_lms_cudaMalloc(), "dlsym on libcudart's handle gives lms's cudaMalloc");
    size_t free_b = 0, total = 0;
    cudaError_t e = cudaMemGetInfo(&free_b, &total);
    CHECK(e == cudaSuccess && total == LIMIT && free_b == LIMIT,
          "cudaMemGetInfo: %d, free %zu, total %zu: want lms's budget, %zu both", (int)e, free_b,
          total, LIMIT);

    void *p = NULL;
    e = cudaMalloc(&p, MIB);
    CHECK(e == cudaSuccess && p != NULL && in_lms_range(p), "cudaMalloc(1 MiB): %d, %p", (int)e, p);
    void *sym = dlsym(RTLD_DEFAULT, "lms_allocation_of");
    owner_fn owner;
    memcpy(&owner, &sym, sizeof owner);
    void *base = NULL;
    size_t size = 0;
    CHECK(owner != NULL && owner(p, &base, &size) == 0 && base == p && size >= MIB,
          "lms_allocation_of(%p): not lms's allocation of 1 MiB", p);
    /* free is what can still be allocated, device and host room together,
     * at most the device limit: it drops once the host's 64 MiB are taken */
    void *big = NULL;
    e = cudaMalloc(&big, 96 * MIB);
    CHECK(e == cudaSuccess && in_lms_range(big), "cudaMalloc(96 MiB): %d, %p", (int)e, big);
    e = cudaMemGetInfo(&free_b, &total);
    CHECK(e == cudaSuccess && free_b <= 2 * LIMIT - 98 * MIB,
          "cudaMemGetInfo with 98 MiB of 128 allocated: %d, free %zu", (int)e, free_b);
    CHECK(cudaFree(big) == cudaSuccess, "cudaFree(big)");

    /* the first out-of-memory is a warning naming the limits (the program
     * can print only the error code); the next one is said at info only */
    FILE *log = tmpfile();
    int saved = dup(2);
    CHECK(log != NULL && saved >= 0 && dup2(fileno(log), 2) == 2, "stderr to a file");
    void *q = (void *)1;
    e = cudaMalloc(&q, 1024 * MIB);
    cudaError_t e2 = cudaMalloc(&q, 1024 * MIB);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    CHECK(e == cudaErrorMemoryAllocation && e2 == e && q == NULL,
          "cudaMalloc(1 GiB), over 64 MiB of device and 64 of host: %d, %p", (int)e, q);
    char said[2048] = "";
    rewind(log);
    size_t n = fread(said, 1, sizeof said - 1, log);
    said[n] = '\0';
    fclose(log);
    fputs(said, stderr);
    const char *w = strstr(said, "lms: warning: interpose: ");
    CHECK(w != NULL && strstr(w, "out of memory") != NULL && strstr(w, "device limit") != NULL &&
              strstr(w + 1, "lms: warning:") == NULL,
          "two out-of-memory cudaMallocs: one warning naming the limits, got \"%s\"", said);
    CHECK(cudaMalloc(NULL, 8) == cudaErrorInvalidValue, "cudaMalloc(NULL, 8)");
    void *z = (void *)1;
    CHECK(cudaMalloc(&z, 0) == cudaSuccess && z == NULL, "cudaMalloc(&z, 0): %p", z);

    CHECK(cudaFree(p) == cudaSuccess, "cudaFree(p)");
    e = cudaFree(p);
    CHECK(e == cudaErrorInvalidValue, "a second cudaFree(p): %d", (int)e);
    CHECK(cudaFree(NULL) == cudaSuccess, "cudaFree(NULL) on the simulated device");
    e = cudaMemGetInfo(&free_b, &total);
    CHECK(e == cudaSuccess && free_b == LIMIT, "cudaMemGetInfo after the free: %d, free %zu",
          (int)e, free_b);
}

static void disabled(void)
{
    size_t free_b = 0, total = 0;
    cudaError_t e = cudaMemGetInfo(&free_b, &total);
    CHECK(e != cudaSuccess || total != LIMIT, "cudaMemGetInfo gave lms's budget with LMS_ENABLE=0");
    CHECK(!dlsym_gives_lms_cudaMalloc(), "dlsym on libcudart's handle gave lms's cudaMalloc with LMS_ENABLE=0");
    void *p = NULL;
    e = cudaMalloc(&p, MIB);
    CHECK(e != cudaSuccess || !in_lms_range(p), "cudaMalloc gave lms's memory with LMS_ENABLE=0");
    if (e == cudaSuccess)
        cudaFree(p);
    if (failures == 0)
        printf("cudart_probe: LMS_ENABLE=0: CUDA's own answers (cudaMalloc: %s)\n",
               cudaGetErrorName(e));
}

static void kernel_stub(void) {} /* never registered: CUDA cannot run it */

static void nogpu(void)
{
    void *p = (void *)1;
    size_t free_b, total;
    cudaError_t e = cudaMalloc(&p, MIB);
    CHECK(e != cudaSuccess && p == NULL, "cudaMalloc without a GPU: %d, %p", (int)e, p);
    CHECK(cudaMemGetInfo(&free_b, &total) != cudaSuccess, "cudaMemGetInfo without a GPU");
    CHECK(cudaMallocAsync(&p, MIB, NULL) != cudaSuccess, "cudaMallocAsync without a GPU");
    (void)cudaFree(NULL); /* CUDA's answers, whatever they are: no crash */
    (void)cudaFree((void *)(uintptr_t)0x12340000);
    void *arg = &p, *args[] = {&arg};
    (void)cudaLaunchKernel((const void *)kernel_stub, (dim3){1, 1, 1}, (dim3){1, 1, 1}, args, 0, NULL);
    char a[16] = "lms", b[16];
    (void)cudaMemcpy(b, a, sizeof a, cudaMemcpyHostToHost);
    (void)cudaMemset((void *)(uintptr_t)0x12340000, 0, 16);
    (void)cudaStreamDestroy((cudaStream_t)(uintptr_t)0x5000);
    void *fn;
    enum cudaDriverEntryPointQueryResult found;
    (void)cudaGetDriverEntryPointByVersion("cuLaunchKernel", &fn, 12000, cudaEnableDefault, &found);
    if (failures == 0)
        printf("cudart_probe: without a GPU every call answered, none crashed (cudaMalloc: %s)\n",
               cudaGetErrorName(e));
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "disabled") == 0)
        disabled();
    else if (argc > 1 && strcmp(argv[1], "nogpu") == 0)
        nogpu();
    else
        enabled();
    if (failures == 0 && argc == 1)
        printf("cudart_probe: cudaMalloc, cudaFree and cudaMemGetInfo answered by lms\n");
    return failures == 0 ? 0 : 1;
}
