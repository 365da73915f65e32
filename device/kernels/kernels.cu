/*
 * device/kernels/kernels.cu — the test kernels on the cuda backend: fill,
 * checksum, axpy and indirect, whose results are bit-identical to the host
 * references in kernels.h (dev_fill_ref, dev_checksum_ref, fmaf, kernels.c's
 * run), and the training kernels (at the end), deterministic but not
 * bitwise the host's.
 *
 * The build compiles this file with nvcc into a fatbin (sm_90 SASS +
 * compute_90 PTX) and embeds it in the kernels library (never in liblms.so)
 * as dev_cuda_kernels_image; cuda.c loads it with cuModuleLoadData and finds
 * the kernels by these extern "C" names. Their parameters are what cuda.c
 * passes to cuLaunchKernel: pointers as 64-bit device addresses, sizes as
 * unsigned long long.
 *
 * Every kernel is a grid-stride loop with 64-bit sizes and indices, so any
 * grid covers any n (n = 0 included). Launch with blockDim.x a multiple of 32:
 * the checksum reduces per warp. No shared state, no locks.
 *
 * kernels.h is C for the host and is not included here; the two definitions
 * the results depend on are restated below and must stay equal to kernels.h's.
 */

typedef unsigned long long u64; /* the type of atomicAdd's 64-bit overload */

/* = DEV_CHECKSUM_A in kernels.h. */
#define CHECKSUM_A 0x9e3779b97f4a7c15ull

/* = dev_mix64 in kernels.h (splitmix64's finalizer). */
__device__ __forceinline__ u64 mix64(u64 x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/*
 * A byte range [p, p+n) splits into
 *   head: the bytes before the first 8-aligned address (0..7 of them),
 *   body: `words` whole aligned 8-byte words,
 *   tail: the bytes after them (0..7).
 * Offsets are relative to p. The body is read or written a word at a time;
 * the head and tail, at most 14 bytes, one byte at a time.
 */
struct split {
    u64 head;  /* bytes [0, head) */
    u64 words; /* bytes [head, tail) as aligned words */
    u64 tail;  /* bytes [tail, n) */
    u64 edges; /* head + (n - tail): number of bytes done one at a time */
};

__device__ __forceinline__ split split_range(const void *p, u64 n)
{
    split s;
    s.head = (8 - ((u64)p & 7)) & 7;
    if (s.head > n)
        s.head = n;
    s.words = (n - s.head) / 8;
    s.tail = s.head + 8 * s.words;
    s.edges = s.head + (n - s.tail);
    return s;
}

/* The offset of edge byte e (0 <= e < edges). */
__device__ __forceinline__ u64 edge_offset(const split &s, u64 e)
{
    return e < s.head ? e : s.tail + (e - s.head);
}

__device__ __forceinline__ u64 thread_index()
{
    return (u64)blockIdx.x * blockDim.x + threadIdx.x;
}

__device__ __forceinline__ u64 thread_count()
{
    return (u64)gridDim.x * blockDim.x;
}

/*
 * fill: byte i of [dst, dst+n) is byte i % 8 of mix64(seed + i / 8), i.e.
 * word j (bytes 8j..8j+7, little-endian) is mix64(seed + j) and a trailing
 * partial word keeps its low bytes. dst may have any alignment.
 */
extern "C" __global__ void dev_fill_kernel(unsigned char *dst, u64 n, u64 seed)
{
    const split s = split_range(dst, n);
    const u64 first = thread_index(), stride = thread_count();

    for (u64 e = first; e < s.edges; e += stride) {
        const u64 i = edge_offset(s, e);
        dst[i] = (unsigned char)(mix64(seed + i / 8) >> (8 * (i % 8)));
    }

    u64 *body = (u64 *)(dst + s.head);
    if (s.head == 0) {
        for (u64 k = first; k < s.words; k += stride)
            body[k] = mix64(seed + k);
    } else {
        /* Aligned word k holds offsets head+8k .. head+8k+7: the high 8-head
         * bytes of logical word k, then the low head bytes of word k+1. */
        const unsigned lo = 8 * (unsigned)s.head, hi = 64 - lo; /* both in 8..56 */
        for (u64 k = first; k < s.words; k += stride)
            body[k] = (mix64(seed + k) >> lo) | (mix64(seed + k + 1) << hi);
    }
}

/*
 * checksum: *result += sum over i of (b_i + 1) * (2*CHECKSUM_A*i + 1) mod 2^64,
 * b_i the byte at src + i. *result must be 0 before the launch.
 *
 * The sum is linear, so each thread sums its share as
 *   s0 = sum (b_i + 1),  s1 = sum (b_i + 1) * i,  share = s0 + 2*CHECKSUM_A*s1,
 * the warp adds its 32 shares, and lane 0 adds the warp's into *result.
 */
extern "C" __global__ void dev_checksum_kernel(const unsigned char *src, u64 n, u64 *result)
{
    const split s = split_range(src, n);
    const u64 first = thread_index(), stride = thread_count();
    u64 s0 = 0, s1 = 0;

    for (u64 e = first; e < s.edges; e += stride) {
        const u64 i = edge_offset(s, e);
        const u64 b1 = (u64)src[i] + 1;
        s0 += b1;
        s1 += b1 * i;
    }

    const u64 *body = (const u64 *)(src + s.head);
    for (u64 k = first; k < s.words; k += stride) {
        const u64 v = body[k];
        /* Bytes t = 0..7 of v are at offsets base + t: c = sum (b_t + 1) and
         * d = sum t * (b_t + 1) stay small, so s1 gains base * c + d. */
        unsigned c = 0, d = 0;
#pragma unroll
        for (unsigned t = 0; t < 8; t++) {
            const unsigned b1 = (unsigned)((v >> (8 * t)) & 0xff) + 1;
            c += b1;
            d += t * b1;
        }
        const u64 base = s.head + 8 * k;
        s0 += c;
        s1 += base * c + d;
    }

    u64 share = s0 + 2 * CHECKSUM_A * s1;
    /* Every thread of the block gets here: the loops above have no early exit. */
    for (unsigned offset = 16; offset > 0; offset /= 2)
        share += __shfl_down_sync(0xffffffffu, share, offset);
    if ((threadIdx.x & 31) == 0)
        atomicAdd(result, share);
}

/* axpy: y[i] = fmaf(a, x[i], y[i]) for i < n, one rounding as the host's fmaf. */
extern "C" __global__ void dev_axpy_kernel(u64 n, float a, const float *x, float *y)
{
    const u64 first = thread_index(), stride = thread_count();
    for (u64 i = first; i < n; i += stride)
        y[i] = __fmaf_rn(a, x[i], y[i]);
}

/* indirect: for i < n, ptrs[i] = *ptrs[i] and *ptrs[i] += add, through
 * pointers no launch names (kernels.h, dev_indirect). The pointers are
 * distinct, so no two threads touch one word. */
extern "C" __global__ void dev_indirect_kernel(u64 **ptrs, u64 n, u64 add)
{
    const u64 first = thread_index(), stride = thread_count();
    for (u64 i = first; i < n; i += stride) {
        u64 *w = ptrs[i];
        const u64 got = *w;
        *w = got + add;
        ptrs[i] = (u64 *)got;
    }
}

/* ---- the training kernels (kernels.h, "the training kernels") ---------------
 *
 * Each takes the one argument cuda.c passes: dev_kernel_args_t by value,
 * restated here (kargs) with the same layout, which the static_assert and
 * cuda.c's check its size against. Deterministic: no atomics, and every sum
 * runs in one fixed order (GEMM: each C[i][j] over k in order, in tiles of
 * GEMM_TILE; COLSUM over rows in order; XENT's mean over rows in order, by one
 * thread of dev_k_xent_mean, launched after dev_k_xent).
 */
struct kargs {
    int kernel;
    u64 p[4];
    unsigned m, n, k, flags;
    float f[4];
};
static_assert(sizeof(kargs) == 72, "kargs must match dev_kernel_args_t");

#define GEMM_TILE 16 /* = cuda.c's GEMM_TILE: blocks of GEMM_TILE x GEMM_TILE threads */
#define TRANS_A 1    /* = DEV_GEMM_TRANS_A ... */
#define TRANS_B 2
#define ACCUMULATE 4
#define ACT_RELU 1

__device__ __forceinline__ float *fptr(u64 a) { return (float *)a; }

/* One thread per C[row][col] (grid: n / TILE x m / TILE, rounded up). */
extern "C" __global__ void dev_k_gemm(kargs a)
{
    __shared__ float As[GEMM_TILE][GEMM_TILE], Bs[GEMM_TILE][GEMM_TILE];
    const unsigned m = a.m, n = a.n, k = a.k;
    const unsigned row = blockIdx.y * GEMM_TILE + threadIdx.y;
    const unsigned col = blockIdx.x * GEMM_TILE + threadIdx.x;
    const float *A = fptr(a.p[0]), *B = fptr(a.p[1]);
    float sum = 0.0f;
    for (unsigned k0 = 0; k0 < k; k0 += GEMM_TILE) {
        unsigned ka = k0 + threadIdx.x, kb = k0 + threadIdx.y;
        float av = 0.0f, bv = 0.0f;
        if (row < m && ka < k)
            av = (a.flags & TRANS_A) ? A[(u64)ka * m + row] : A[(u64)row * k + ka];
        if (col < n && kb < k)
            bv = (a.flags & TRANS_B) ? B[(u64)col * k + kb] : B[(u64)kb * n + col];
        As[threadIdx.y][threadIdx.x] = av;
        Bs[threadIdx.y][threadIdx.x] = bv;
        __syncthreads();
        unsigned left = k - k0 < GEMM_TILE ? k - k0 : GEMM_TILE;
        for (unsigned kk = 0; kk < left; kk++)
            sum += As[threadIdx.y][kk] * Bs[kk][threadIdx.x];
        __syncthreads();
    }
    if (row < m && col < n) {
        float *c = fptr(a.p[2]) + (u64)row * n + col;
        *c = (a.flags & ACCUMULATE) ? *c + sum : sum;
    }
}

extern "C" __global__ void dev_k_bias_act(kargs a)
{
    float *x = fptr(a.p[0]);
    const float *bias = fptr(a.p[1]);
    const u64 total = (u64)a.m * a.n;
    for (u64 i = thread_index(); i < total; i += thread_count()) {
        float v = x[i] + bias[i % a.n];
        x[i] = (a.flags & ACT_RELU) && !(v > 0.0f) ? 0.0f : v;
    }
}

extern "C" __global__ void dev_k_relu_back(kargs a)
{
    float *dx = fptr(a.p[0]);
    const float *y = fptr(a.p[1]);
    const u64 total = (u64)a.m * a.n;
    for (u64 i = thread_index(); i < total; i += thread_count())
        if (!(y[i] > 0.0f))
            dx[i] = 0.0f;
}

extern "C" __global__ void dev_k_colsum(kargs a)
{
    const float *x = fptr(a.p[0]);
    float *out = fptr(a.p[1]);
    for (u64 j = thread_index(); j < a.n; j += thread_count()) {
        float s = 0.0f;
        for (u64 i = 0; i < a.m; i++)
            s += x[i * a.n + j];
        out[j] = s;
    }
}

/* One thread per row. */
extern "C" __global__ void dev_k_xent(kargs a)
{
    const unsigned n = a.n;
    const int *label = (const int *)a.p[1];
    float *loss = fptr(a.p[2]);
    for (u64 i = thread_index(); i < a.m; i += thread_count()) {
        const float *row = fptr(a.p[0]) + i * n;
        float *drow = fptr(a.p[3]) + i * n;
        float max = row[0];
        for (unsigned j = 1; j < n; j++)
            max = row[j] > max ? row[j] : max;
        float z = 0.0f;
        for (unsigned j = 0; j < n; j++)
            z += expf(row[j] - max);
        int y = label[i];
        float at_label = (y >= 0 && (unsigned)y < n) ? row[y] : max;
        loss[i] = logf(z) - (at_label - max);
        for (unsigned j = 0; j < n; j++)
            drow[j] = (expf(row[j] - max) / z - ((int)j == y ? 1.0f : 0.0f)) / (float)a.m;
    }
}

/* One thread: loss[m] = the mean of loss[0..m), in order. */
extern "C" __global__ void dev_k_xent_mean(kargs a)
{
    if (thread_index() != 0)
        return;
    float *loss = fptr(a.p[2]);
    float s = 0.0f;
    for (unsigned i = 0; i < a.m; i++)
        s += loss[i];
    loss[a.m] = s / (float)a.m;
}

extern "C" __global__ void dev_k_adam(kargs a)
{
    float *w = fptr(a.p[0]), *mo = fptr(a.p[2]), *v = fptr(a.p[3]);
    const float *g = fptr(a.p[1]);
    const float lr = a.f[0], b1 = a.f[1], b2 = a.f[2], eps = a.f[3];
    for (u64 i = thread_index(); i < a.n; i += thread_count()) {
        mo[i] = b1 * mo[i] + (1.0f - b1) * g[i];
        v[i] = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
        w[i] -= lr * mo[i] / (sqrtf(v[i]) + eps);
    }
}
