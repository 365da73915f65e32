/*
 * tests/interpose/copy_probe.c — copies, memsets and NCCL collectives
 * through liblms.so's hooks on the sim backend, with libfake_cuda.so
 * (fake_cuda.h) as the CUDA and NCCL they go on to. Run with
 * LD_PRELOAD=liblms.so, LMS_BACKEND=sim, LMS_DEVICE_LIMIT=16MiB,
 * LMS_HOST_LIMIT=64MiB, LMS_POLICY=lru, LMS_PIN_SMALLER_THAN=64KiB
 * (tests/CMakeLists.txt).
 *
 * Eight 4 MiB allocations (two 2 MiB chunks each) are written, so half of
 * them are evicted, and a host copy of each is kept. Each call is made on
 * memory that is not resident; the stand-in does it on the host, where
 * memory lms did not map faults. After each, what the device holds is read
 * back (through the hooked cudaMemcpy) and compared with the host copy.
 * Also: an overwrite of whole chunks fetches nothing, a copy larger than
 * the device fails without reaching CUDA, lookups by name give the copy
 * hooks, and an NCCL group's buffers are made resident together at
 * ncclGroupEnd (one that cannot fit fails there, loses nothing, and goes
 * through once memory is free), batched copies (batches()), copies
 * between CUDA arrays and lms memory and 3D peer copies
 * (arrays_and_peers()). With
 * LMS_PIN_SMALLER_THAN=64KiB, a small allocation stays resident through
 * all of it.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include "lms.h"
#include "interpose/nccl_abi.h"
#include "fake_cuda.h"

#define MIB ((size_t)1 << 20)
#define N 8
#define SIZE (4 * MIB)
#define CHUNK (2 * MIB)

#include "probe.h"

static char *buf[N];
static unsigned char *model[N]; /* what each allocation must hold */
static unsigned char *host;     /* a host buffer of SIZE */

static void fill(int i)
{
    uint64_t *w = (uint64_t *)(void *)buf[i];
    CHECK(lms_access(w, SIZE, LMS_OVERWRITE, NULL) == LMS_OK, "access: %s", lms_last_error());
    for (size_t j = 0; j < SIZE / 8; j++)
        w[j] = fake_word(100 + (uint64_t)i, j);
    memcpy(model[i], w, SIZE);
}

/* Allocation i, read back through cudaMemcpy, is its model. */
static void expect_model(int i, const char *what)
{
    memset(host, 0, SIZE);
    CHECK(cudaMemcpy(host, buf[i], SIZE, cudaMemcpyDeviceToHost) == cudaSuccess, "%s: read back", what);
    size_t at = 0;
    while (at < SIZE && host[at] == model[i][at])
        at++;
    CHECK(at == SIZE, "%s: allocation %d differs from its model at byte %zu", what, i, at);
}

/* How many of the depth x height rows of `width` bytes packed in host
 * differ from those at `from`, `pitch` apart and `rows` to a slice. */
static size_t rows_differ(const unsigned char *from, size_t pitch, size_t rows, size_t width,
                          size_t height, size_t depth)
{
    size_t bad = 0;
    for (size_t z = 0; z < depth; z++)
        for (size_t y = 0; y < height; y++)
            bad += memcmp(host + (z * height + y) * width, from + (z * rows + y) * pitch, width) != 0;
    return bad;
}

static uint64_t fetched(void)
{
    lms_stats_t t;
    CHECK(lms_stats(&t) == LMS_OK, "stats");
    return t.bytes_h2d;
}

/* Allocations a, b and c pinned (with the small one, 7 of the device's 8
 * chunks), after d's first chunk was used: under LRU, that chunk is the one
 * other chunk left resident; then unpinned. */
static void push_out(int a, int b, int c, int d)
{
    CHECK(lms_access(buf[d], CHUNK, LMS_READ, NULL) == LMS_OK, "access: %s", lms_last_error());
    CHECK(lms_pin(buf[a], SIZE) == LMS_OK && lms_pin(buf[b], SIZE) == LMS_OK &&
              lms_pin(buf[c], SIZE) == LMS_OK, "pin: %s", lms_last_error());
    CHECK(lms_unpin(buf[a], SIZE) == LMS_OK && lms_unpin(buf[b], SIZE) == LMS_OK &&
              lms_unpin(buf[c], SIZE) == LMS_OK, "unpin");
}

#define DEV(p) ((CUdeviceptr)(uintptr_t)(p))

/* A call CUDA refused (r) copied nothing since `before`, and allocation
 * i lost nothing. */
static void refused(int i, fake_counts_t before, CUresult r, const char *what)
{
    CHECK(r == CUDA_ERROR_INVALID_VALUE, "%s is refused (%d)", what, (int)r);
    CHECK(fake_counts().copies == before.copies, "%s: ...copies nothing", what);
    expect_model(i, what);
}

/* Batched copies (Note [Batched copies] in interpose/access.c): the
 * runtime's (through the driver's, CUDA 13's form), the driver's of CUDA
 * 12.8 and 13 through lookups by name, and a 3D batch. */
static void batches(const unsigned char *data, void *st)
{
    CUmemcpyAttributes in_order = {.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM};
    size_t at0 = 0;
    CUresult r;

    /* a whole chunk overwritten is not fetched; a source read is */
    push_out(4, 5, 6, 7);
    uint64_t h = fetched();
    void *dsts[2] = {buf[1] + CHUNK, host};
    const void *srcs[2] = {data, buf[2] + 100};
    size_t sizes[2] = {CHUNK, 1000};
    fake_counts_t c = fake_counts();
    CHECK(cudaMemcpyBatchAsync(dsts, srcs, sizes, 2, (struct cudaMemcpyAttributes *)&in_order,
                               &at0, 1, st) == cudaSuccess, "cudaMemcpyBatchAsync");
    CHECK(fake_counts().copies - c.copies == 2, "...made its two copies");
    CHECK(fetched() - h == CHUNK, "...fetched the chunk it reads and not the one it overwrites "
          "(%llu bytes)", (unsigned long long)(fetched() - h));
    CHECK(memcmp(host, model[2] + 100, 1000) == 0, "...read what allocation 2 holds");
    memcpy(model[1] + CHUNK, data, CHUNK);
    expect_model(1, "cudaMemcpyBatchAsync");

    /* a source CUDA may read at once, out of stream order: lms's fetch has
     * landed before the call goes on (the stand-in reads it then, before
     * the in-order copy before it in the list) */
    push_out(4, 5, 6, 7);
    CUmemcpyAttributes two[2] = {in_order,
                                 {.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL}};
    size_t at01[2] = {0, 1};
    unsigned char spare[64];
    CUdeviceptr d2[2] = {DEV(spare), DEV(host)}, s2[2] = {DEV(data), DEV(buf[3])};
    size_t n2[2] = {sizeof spare, SIZE};
    memset(host, 0, SIZE);
    CHECK(cuMemcpyBatchAsync(d2, s2, n2, 2, two, at01, 2, (CUstream)st) == CUDA_SUCCESS,
          "cuMemcpyBatchAsync, the second source read during the call");
    CHECK(memcmp(host, model[3], SIZE) == 0 && memcmp(spare, data, sizeof spare) == 0,
          "...read what allocation 3 holds");
    CUdeviceptr d1[1], s1[1];
    size_t n1[1];

    /* a batch CUDA refuses (no srcAccessOrder; the legacy stream) overwrites nothing */
    CUmemcpyAttributes none = {0};
    d1[0] = DEV(buf[0]), s1[0] = DEV(data), n1[0] = CHUNK;
    push_out(4, 5, 6, 7);
    c = fake_counts();
    r = cuMemcpyBatchAsync(d1, s1, n1, 1, &none, &at0, 1, (CUstream)st);
    refused(0, c, r, "a batch without a source access order");
    push_out(4, 5, 6, 7);
    c = fake_counts();
    r = cuMemcpyBatchAsync(d1, s1, n1, 1, &in_order, &at0, 1, NULL);
    refused(0, c, r, "a batch on the legacy stream");

    /* lookups by name: CUDA 12.8's form for 12.8, 13's for 13, per-thread twin */
    void *self = dlopen(NULL, RTLD_NOW), *fn = NULL;
    CUdriverProcAddressQueryResult found;
    CHECK(cuGetProcAddress("cuGetProcAddress", &fn, 11030, 0, &found) == CUDA_SUCCESS &&
              fn == dlsym(self, "cuGetProcAddress"),
          "cuGetProcAddress(cuGetProcAddress, 11.3) is lms's 4-argument form");
    CHECK(cuGetProcAddress("cuMemcpyBatchAsync", &fn, 12080, 0, &found) == CUDA_SUCCESS &&
              fn == dlsym(self, "cuMemcpyBatchAsync"),
          "cuGetProcAddress(cuMemcpyBatchAsync, 12.8) is lms's 12.8 form");
    PFN_cuMemcpyBatchAsync_v12080 v12 = (PFN_cuMemcpyBatchAsync_v12080)fn;
    CHECK(cuGetProcAddress("cuMemcpyBatchAsync", &fn, 13000, 0, &found) == CUDA_SUCCESS &&
              fn == dlsym(self, "cuMemcpyBatchAsync_v2"), "...and its _v2 for 13");
    CHECK(cuGetProcAddress("cuMemcpyBatchAsync", &fn, 13000,
                           CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &found) == CUDA_SUCCESS &&
              fn == dlsym(self, "cuMemcpyBatchAsync_v2_ptsz"), "...and its _v2_ptsz per thread");
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations" /* still called, and hooked */
    CHECK(cudaGetDriverEntryPoint("cuMemcpyBatchAsync", &fn, cudaEnableDefault, NULL) ==
              cudaSuccess && fn == dlsym(self, "cuMemcpyBatchAsync"),
          "cudaGetDriverEntryPoint under a 12.9 runtime gives the 12.8 form");
#pragma GCC diagnostic pop
    dlclose(self);

    /* the 12.8 form: a device-to-device copy; one larger than the device
     * fails, reaches no copy, and names no copy in failIdx */
    size_t fail = 0;
    d1[0] = DEV(buf[4]), s1[0] = DEV(buf[3]), n1[0] = SIZE;
    CHECK(v12 != NULL && v12(d1, s1, n1, 1, &in_order, &at0, 1, &fail, (CUstream)st) == CUDA_SUCCESS,
          "the 12.8 form");
    memcpy(model[4], model[3], SIZE);
    expect_model(4, "the 12.8 form");
    char *big;
    CHECK(cudaMalloc((void **)&big, 20 * MIB) == cudaSuccess, "20 MiB");
    d1[0] = DEV(host), s1[0] = DEV(big), n1[0] = 20 * MIB;
    c = fake_counts();
    CHECK(v12(d1, s1, n1, 1, &in_order, &at0, 1, &fail, (CUstream)st) == CUDA_ERROR_OUT_OF_MEMORY,
          "a batch larger than the device fails");
    CHECK(fail == SIZE_MAX && fake_counts().copies == c.copies,
          "...names no copy (failIdx %zu) and reaches no copy", fail);
    CHECK(cudaFree(big) == cudaSuccess, "cudaFree");

    /* 3D: 40-byte rows, 4096 apart, 3 to a layer of 8 rows, read out of
     * stream order (the stand-in does it first, at once); one packed write
     * of a whole chunk, not fetched; one of rows 4096 apart over a whole
     * chunk and a bit, which keeps what lies between them */
    CUDA_MEMCPY3D_BATCH_OP ops[3] = {
        {.src = {.type = CU_MEMCPY_OPERAND_TYPE_POINTER,
                 .op.ptr = {.ptr = DEV(buf[5] + 64), .rowLength = 4096, .layerHeight = 8}},
         .dst = {.type = CU_MEMCPY_OPERAND_TYPE_POINTER, .op.ptr = {.ptr = DEV(host)}},
         .extent = {40, 3, 2}, .srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_ANY},
        {.src = {.type = CU_MEMCPY_OPERAND_TYPE_POINTER, .op.ptr = {.ptr = DEV(data)}},
         .dst = {.type = CU_MEMCPY_OPERAND_TYPE_POINTER, .op.ptr = {.ptr = DEV(buf[6])}},
         .extent = {4096, 256, 2}, .srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM},
        {.src = {.type = CU_MEMCPY_OPERAND_TYPE_POINTER, .op.ptr = {.ptr = DEV(data)}},
         .dst = {.type = CU_MEMCPY_OPERAND_TYPE_POINTER,
                 .op.ptr = {.ptr = DEV(buf[2]), .rowLength = 4096}},
         .extent = {2048, 513, 1}, .srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM},
    };
    push_out(1, 3, 4, 7);
    memset(host, 0, 240);
    h = fetched();
    CHECK(cuMemcpy3DBatchAsync(3, ops, 0, (CUstream)st) == CUDA_SUCCESS, "cuMemcpy3DBatchAsync");
    CHECK(fetched() - h == 3 * CHUNK, "...fetched the chunks it reads and writes part of, not the "
          "one it writes whole (%llu bytes)", (unsigned long long)(fetched() - h));
    size_t bad = rows_differ(model[5] + 64, 4096, 8, 40, 3, 2);
    CHECK(bad == 0, "cuMemcpy3DBatchAsync: %zu rows differ", bad);
    memcpy(model[6], data, CHUNK);
    for (size_t row = 0; row < 513; row++)
        memcpy(model[2] + row * 4096, data + row * 2048, 2048);
    expect_model(6, "cuMemcpy3DBatchAsync");
    expect_model(2, "cuMemcpy3DBatchAsync");

    /* a 3D batch CUDA refuses (one op without a source access order; rows
     * shorter than the extent's) overwrites nothing, in any of its ops */
    CUDA_MEMCPY3D_BATCH_OP bad_ops[2] = {ops[1], ops[1]};
    bad_ops[1].dst.op.ptr.ptr = DEV(host);
    bad_ops[1].srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_INVALID;
    push_out(1, 3, 4, 7);
    c = fake_counts();
    r = cuMemcpy3DBatchAsync(2, bad_ops, 0, (CUstream)st);
    refused(6, c, r, "a 3D batch with one bad op");
    bad_ops[0].extent = (CUextent3D){MIB, 1, 2}; /* spans the chunk: 2 rows of half a MiB... */
    bad_ops[0].dst.op.ptr.rowLength = MIB / 2;   /* ...under each other */
    bad_ops[0].dst.op.ptr.layerHeight = 2;
    push_out(1, 3, 4, 7);
    c = fake_counts();
    r = cuMemcpy3DBatchAsync(1, bad_ops, 0, (CUstream)st);
    refused(6, c, r, "rows shorter than the extent's");
    expect_model(6, "cuMemcpy3DBatchAsync");
}

/* Copies between CUDA arrays (the stand-in's: host rows FAKE_ARRAY_PITCH
 * apart) and lms memory, and 3D peer copies, each out of or into memory
 * pushed out first. */
static void arrays_and_peers(const unsigned char *data)
{
    unsigned char *arr = malloc(512 * FAKE_ARRAY_PITCH);
    CHECK(arr != NULL, "host memory");

    /* 50 rows of 100 bytes, 8192 apart, into the array at (8, 2) */
    push_out(4, 5, 6, 7);
    CHECK(cudaMemcpy2DToArray((cudaArray_t)arr, 8, 2, buf[2] + 300, 8192, 100, 50,
                              cudaMemcpyDeviceToDevice) == cudaSuccess, "cudaMemcpy2DToArray");
    size_t bad = 0;
    for (size_t y = 0; y < 50; y++)
        bad += memcmp(arr + (2 + y) * FAKE_ARRAY_PITCH + 8, model[2] + 300 + y * 8192, 100) != 0;
    CHECK(bad == 0, "cudaMemcpy2DToArray: %zu rows differ", bad);

    /* a whole chunk written from the array is not fetched */
    memcpy(arr, data, 512 * FAKE_ARRAY_PITCH);
    push_out(4, 5, 6, 7);
    uint64_t h = fetched();
    CHECK(cudaMemcpy2DFromArray(buf[1], FAKE_ARRAY_PITCH, (cudaArray_const_t)arr, 0, 0,
                                FAKE_ARRAY_PITCH, 512, cudaMemcpyDeviceToDevice) == cudaSuccess,
          "cudaMemcpy2DFromArray");
    CHECK(fetched() == h, "...of a whole chunk fetched %llu bytes",
          (unsigned long long)(fetched() - h));
    memcpy(model[1], data, CHUNK);
    expect_model(1, "cudaMemcpy2DFromArray");

    /* the driver's, linear */
    push_out(4, 5, 6, 7);
    CHECK(cuMemcpyDtoA((CUarray)arr, 5, DEV(buf[3] + 11), MIB) == CUDA_SUCCESS, "cuMemcpyDtoA");
    CHECK(memcmp(arr + 5, model[3] + 11, MIB) == 0, "cuMemcpyDtoA: the array differs");
    CHECK(cuMemcpyAtoD(DEV(buf[0] + CHUNK + 7), (CUarray)arr, 64, 1000) == CUDA_SUCCESS,
          "cuMemcpyAtoD");
    memcpy(model[0] + CHUNK + 7, arr + 64, 1000);
    expect_model(0, "cuMemcpyAtoD");

    /* 3D peer copies: out of lms memory (rows 4096 apart, 16 to a slice), into it */
    push_out(1, 2, 3, 7);
    struct cudaMemcpy3DPeerParms p = {
        .srcPtr = {.ptr = buf[5], .pitch = 4096, .xsize = 4096, .ysize = 16},
        .srcPos = {.x = 24, .y = 1, .z = 2},
        .dstPtr = {.ptr = host, .pitch = 48, .xsize = 48, .ysize = 4},
        .extent = {.width = 48, .height = 4, .depth = 3}};
    memset(host, 0, 4096);
    CHECK(cudaMemcpy3DPeer(&p) == cudaSuccess, "cudaMemcpy3DPeer");
    bad = rows_differ(model[5] + (2 * 16 + 1) * 4096 + 24, 4096, 16, 48, 4, 3);
    CHECK(bad == 0, "cudaMemcpy3DPeer: %zu rows differ", bad);
    CUDA_MEMCPY3D_PEER q = {.srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = data, .srcPitch = 100,
                            .srcHeight = 10, .dstMemoryType = CU_MEMORYTYPE_DEVICE,
                            .dstDevice = DEV(buf[6]), .dstXInBytes = 3, .dstPitch = 1000,
                            .dstHeight = 20, .WidthInBytes = 100, .Height = 10, .Depth = 2};
    CHECK(cuMemcpy3DPeer(&q) == CUDA_SUCCESS, "cuMemcpy3DPeer");
    for (size_t z = 0; z < 2; z++)
        for (size_t y = 0; y < 10; y++)
            memcpy(model[6] + (z * 20 + y) * 1000 + 3, data + (z * 10 + y) * 100, 100);
    expect_model(6, "cuMemcpy3DPeer");
    free(arr);
}

int main(void)
{
    host = malloc(SIZE);
    unsigned char *data = malloc(SIZE);
    CHECK(host != NULL && data != NULL, "host memory");
    for (size_t j = 0; j < SIZE; j++)
        data[j] = (unsigned char)(j * 7 + 3);
    for (int i = 0; i < N; i++) {
        model[i] = malloc(SIZE);
        CHECK(model[i] != NULL && cudaMalloc((void **)&buf[i], SIZE) == cudaSuccess, "alloc %d", i);
        fill(i);
    }
    lms_stats_t t0;
    CHECK(lms_stats(&t0) == LMS_OK && t0.evictions >= 8, "half was evicted (%llu chunks)",
          (unsigned long long)t0.evictions);
    /* LMS_PIN_SMALLER_THAN=64KiB: a small allocation (what a kernel might reach
     * only through a pointer stored in device memory) stays resident: it is
     * written here without an access and read at the end, after all the
     * evictions below, without one */
    uint64_t *small;
    CHECK(cudaMalloc((void **)&small, 4096) == cudaSuccess, "a small allocation");
    lms_stats_t tp;
    CHECK(lms_stats(&tp) == LMS_OK && tp.pinned_bytes - t0.pinned_bytes == CHUNK,
          "it is pinned (%llu bytes more)", (unsigned long long)(tp.pinned_bytes - t0.pinned_bytes));
    for (size_t j = 0; j < 512; j++)
        small[j] = fake_word(7, j);
    fake_counts_t c0 = fake_counts();

    /* a synchronous copy out of memory that was evicted */
    uint64_t h = fetched();
    expect_model(0, "cudaMemcpy of evicted memory");
    CHECK(fetched() - h == SIZE, "...fetched it (%llu bytes)", (unsigned long long)(fetched() - h));

    /* an overwrite of a whole chunk fetches nothing of it; of part of one, that chunk */
    h = fetched();
    void *st = (void *)(uintptr_t)0x5000;
    CHECK(cudaMemcpyAsync(buf[1] + CHUNK, data, CHUNK, cudaMemcpyHostToDevice, st) == cudaSuccess,
          "cudaMemcpyAsync to a whole chunk");
    memcpy(model[1] + CHUNK, data, CHUNK);
    CHECK(fetched() == h, "an overwrite of a whole chunk fetched %llu bytes",
          (unsigned long long)(fetched() - h));
    expect_model(1, "after the overwrite");
    CHECK(fetched() - h == CHUNK, "...its other chunk was fetched to read it back (%llu)",
          (unsigned long long)(fetched() - h));
    h = fetched();
    CHECK(cudaMemcpyAsync(buf[2] + CHUNK + 1000, data, MIB, cudaMemcpyHostToDevice, st) ==
              cudaSuccess, "cudaMemcpyAsync to part of a chunk");
    memcpy(model[2] + CHUNK + 1000, data, MIB);
    CHECK(fetched() - h == CHUNK, "part of a chunk written fetches it (%llu bytes)",
          (unsigned long long)(fetched() - h));
    expect_model(2, "after a partial write");

    /* device to device, through the driver, on a stream */
    CHECK(cuMemcpyDtoDAsync((CUdeviceptr)(uintptr_t)buf[3], (CUdeviceptr)(uintptr_t)buf[4], SIZE,
                            (CUstream)st) == CUDA_SUCCESS, "cuMemcpyDtoDAsync");
    memcpy(model[3], model[4], SIZE);
    expect_model(3, "cuMemcpyDtoDAsync");

    /* memsets: the range set, the rest kept */
    CHECK(cudaMemset(buf[5] + 1000, 0xab, 3 * MIB) == cudaSuccess, "cudaMemset");
    memset(model[5] + 1000, 0xab, 3 * MIB);
    expect_model(5, "cudaMemset");
    CHECK(cudaMemsetAsync(buf[6], 0x11, 100, st) == cudaSuccess, "cudaMemsetAsync");
    memset(model[6], 0x11, 100);
    unsigned v32 = 0xdeadbeef;
    CHECK(cuMemsetD32((CUdeviceptr)(uintptr_t)buf[7] + CHUNK, v32, MIB / 4) == CUDA_SUCCESS,
          "cuMemsetD32");
    for (size_t j = 0; j < MIB / 4; j++)
        memcpy(model[7] + CHUNK + 4 * j, &v32, 4);
    expect_model(7, "cuMemsetD32");
    CHECK(cuMemsetD2D8Async((CUdeviceptr)(uintptr_t)buf[6] + 3 * MIB, 4096, 7, 100, 10,
                            (CUstream)st) == CUDA_SUCCESS, "cuMemsetD2D8Async");
    for (size_t y = 0; y < 10; y++)
        memset(model[6] + 3 * MIB + y * 4096, 7, 100);
    expect_model(6, "cudaMemsetAsync and cuMemsetD2D8Async");

    /* pitched copies: rows of 1000 bytes, 8192 apart, out of memory evicted */
    CHECK(cudaMemcpy2D(host, 1000, buf[0] + 5000, 8192, 1000, 400, cudaMemcpyDeviceToHost) ==
              cudaSuccess, "cudaMemcpy2D");
    size_t bad = rows_differ(model[0] + 5000, 8192, 400, 1000, 400, 1);
    CHECK(bad == 0, "cudaMemcpy2D: %zu rows differ", bad);
    CUDA_MEMCPY3D c3 = {.srcXInBytes = 16, .srcY = 1, .srcZ = 1, .srcMemoryType = CU_MEMORYTYPE_DEVICE,
                        .srcDevice = (CUdeviceptr)(uintptr_t)buf[1], .srcPitch = 65536,
                        .srcHeight = 16, .dstMemoryType = CU_MEMORYTYPE_HOST, .dstHost = host,
                        .dstPitch = 64, .dstHeight = 4, .WidthInBytes = 64, .Height = 4, .Depth = 3};
    CHECK(cuMemcpy3D(&c3) == CUDA_SUCCESS, "cuMemcpy3D");
    bad = rows_differ(model[1] + (16 + 1) * 65536 + 16, 65536, 16, 64, 4, 3);
    CHECK(bad == 0, "cuMemcpy3D: %zu rows differ", bad);

    /* more than the device at once fails, and CUDA never sees it */
    char *big;
    unsigned char *bighost = malloc(20 * MIB);
    CHECK(bighost != NULL && cudaMalloc((void **)&big, 20 * MIB) == cudaSuccess, "20 MiB");
    fake_counts_t c = fake_counts();
    CHECK(cudaMemcpy(bighost, big, 20 * MIB, cudaMemcpyDeviceToHost) == cudaErrorMemoryAllocation,
          "a copy of more than the device fails");
    CHECK(fake_counts().copies == c.copies, "...and does not reach CUDA");
    CHECK(cudaFree(big) == cudaSuccess, "cudaFree");
    free(bighost);

    /* the driver's copy looked up by name is lms's, per-thread twin included */
    void *self = dlopen(NULL, RTLD_NOW), *fn = NULL;
    CUdriverProcAddressQueryResult found;
    CHECK(cuGetProcAddress("cuMemcpyHtoD", &fn, 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
                           &found) == CUDA_SUCCESS && fn == dlsym(self, "cuMemcpyHtoD_v2_ptds"),
          "cuGetProcAddress(cuMemcpyHtoD, per-thread) is lms's cuMemcpyHtoD_v2_ptds");
    CHECK(cuGetProcAddress("cuMemcpyHtoD", &fn, 12000, 0, &found) == CUDA_SUCCESS &&
              fn == dlsym(self, "cuMemcpyHtoD_v2"), "...and cuMemcpyHtoD_v2 otherwise");
    CUresult (*htod)(CUdeviceptr, const void *, size_t) = (__typeof__(htod))fn;
    CHECK(htod != NULL && htod((CUdeviceptr)(uintptr_t)buf[2], data + 1, 3 * MIB) == CUDA_SUCCESS,
          "a copy through it");
    memcpy(model[2], data + 1, 3 * MIB);
    expect_model(2, "a copy through cuGetProcAddress's answer");

    batches(data, st);
    arrays_and_peers(data);

    /* NCCL: an all-reduce (one rank's sum: a copy), an all-gather of two ranks */
    int two = 2;
    ncclComm_t comm = (ncclComm_t)(void *)&two;
    CHECK(ncclAllReduce(buf[3], buf[4], SIZE / 4, (ncclDataType_t)7 /* float */, (ncclRedOp_t)0,
                        comm, st) == ncclSuccess, "ncclAllReduce");
    memcpy(model[4], model[3], SIZE);
    expect_model(4, "ncclAllReduce");
    CHECK(ncclAllGather(buf[5] + MIB, buf[0], CHUNK / 4, (ncclDataType_t)2 /* int32 */, comm, st) ==
              ncclSuccess, "ncclAllGather");
    memcpy(model[0], model[5] + MIB, CHUNK);
    memcpy(model[0] + CHUNK, model[5] + MIB, CHUNK);
    expect_model(0, "ncclAllGather");

    /* a group: nothing runs before ncclGroupEnd, and its buffers (8 MiB)
     * cannot all be resident while 8 MiB more are pinned (and the small
     * allocation's chunk) */
    CHECK(lms_pin(buf[5], SIZE) == LMS_OK && lms_pin(buf[6], SIZE) == LMS_OK, "pin 8 MiB");
    c = fake_counts();
    CHECK(ncclGroupStart() == ncclSuccess, "ncclGroupStart");
    CHECK(ncclSend(buf[7], SIZE, (ncclDataType_t)0, 1, comm, st) == ncclSuccess, "ncclSend");
    CHECK(ncclRecv(buf[0], SIZE, (ncclDataType_t)0, 1, comm, st) == ncclSuccess, "ncclRecv");
    CHECK(ncclGroupEnd() == ncclUnhandledCudaError, "a group larger than what is free fails");
    CHECK(fake_counts().collectives == c.collectives, "...and NCCL ran none of it");
    CHECK(lms_unpin(buf[5], SIZE) == LMS_OK && lms_unpin(buf[6], SIZE) == LMS_OK, "unpin");
    CHECK(ncclGroupEnd() == ncclSuccess, "the same group ends once memory is free");
    CHECK(fake_counts().collectives - c.collectives == 2, "...and NCCL ran its two calls");
    memcpy(model[0], model[7], SIZE);
    for (int i = 0; i < N; i++)
        expect_model(i, "at the end");

    size_t wrong = 0;
    for (size_t j = 0; j < 512; j++)
        wrong += small[j] != fake_word(7, j);
    CHECK(wrong == 0, "the pinned small allocation kept its data (%zu words differ)", wrong);
    CHECK(cudaFree(small) == cudaSuccess && lms_empty_cache() == LMS_OK, "cudaFree of it");
    CHECK(lms_stats(&tp) == LMS_OK && tp.pinned_bytes == t0.pinned_bytes,
          "once released, its chunk is pinned no more (%llu bytes pinned)",
          (unsigned long long)tp.pinned_bytes);

    fake_counts_t end = fake_counts();
    for (int i = 0; i < N; i++) {
        CHECK(cudaFree(buf[i]) == cudaSuccess, "cudaFree %d", i);
        free(model[i]);
    }
    printf("copy_probe: %llu copies and memsets, %llu collectives: %s\n",
           (unsigned long long)(end.copies - c0.copies),
           (unsigned long long)(end.collectives - c0.collectives), failures ? "FAILED" : "ok");
    free(host);
    free(data);
    return failures != 0;
}
