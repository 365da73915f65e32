/*
 * device/kernels.cu — the test kernels of the cuda backend: fill, checksum and
 * axpy, whose results are bit-identical to the host references in
 * device/device.h (dev_fill_ref, dev_checksum_ref, fmaf).
 *
 * The build compiles this file with nvcc into a fatbin (sm_90 SASS +
 * compute_90 PTX) and embeds it as dev_cuda_kernels_image; device/cuda.c loads
 * it with cuModuleLoadData and finds the kernels by these extern "C" names.
 * Their parameters are what cuda.c passes to cuLaunchKernel: pointers as
 * 64-bit device addresses, sizes as unsigned long long.
 *
 * Every kernel is a grid-stride loop with 64-bit sizes and indices, so any
 * grid covers any n (n = 0 included). Launch with blockDim.x a multiple of 32:
 * the checksum reduces per warp. No shared state, no locks.
 *
 * device.h is C for the host and is not included here; the two definitions the
 * results depend on are restated below and must stay equal to device.h's.
 */

typedef unsigned long long u64; /* the type of atomicAdd's 64-bit overload */

/* = DEV_CHECKSUM_A in device/device.h. */
#define CHECKSUM_A 0x9e3779b97f4a7c15ull

/* = dev_mix64 in device/device.h (splitmix64's finalizer). */
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
