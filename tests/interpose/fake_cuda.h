/*
 * tests/interpose/fake_cuda.h — a stand-in for the parts of libcuda and
 * libcudart that kernel launches go through, for testing the launch hooks
 * on a machine without a GPU (libfake_cuda.so, fake_cuda.c).
 *
 * A fake function is a fake_fn_t: its address is the CUfunction (or, with
 * FAKE_KERNEL, the CUkernel: also what __cudaLaunchKernel takes as a
 * cudaKernel_t) handed to a launch, and cuFuncGetParamInfo (or
 * cuKernelGetParamInfo) answer from its layout; cuFuncGetName and
 * cuKernelGetName give its name. Asked of a handle of the other type (a
 * CUkernel as a CUfunction, a stub's address), both say "no parameters"
 * (CUDA_ERROR_INVALID_VALUE at index 0), the one error cuda.h documents
 * for them; with FAKE_NO_LAYOUT they say CUDA_ERROR_NOT_SUPPORTED, as a
 * driver older than 12.4 would. cuKernelGetFunction gives a CUkernel's
 * CUfunction. A runtime stub is bound to one with
 * fake_bind_stub, for cudaGetFuncBySymbol; fake_bind_stub_hidden binds one
 * the runtime launches but cudaGetFuncBySymbol does not know. The
 * runtime's launches (cudaLaunchKernel, cudaLaunchCooperativeKernel) of a
 * FAKE_VIA_DRIVER function go on to the driver's cuLaunchKernel, looked up
 * with the process's cuGetProcAddress_v2 (lms's under the preload), as
 * CUDA's runtime does; others run at once, as in a runtime whose driver
 * calls lms does not see, so that only the runtime's hooks can see them.
 * Cooperative launches (runtime and driver) run as launches do.
 *
 * Tensor maps: cuTensorMapEncodeTiled and cuTensorMapReplaceAddress write a
 * descriptor (FAKE_TENSOR_MAP_MAGIC, then the address hidden from an 8-byte
 * scan, in 128 bytes); a "kernel" reads the tensor of every descriptor at
 * a multiple of 64 of its parameter buffer, as a TMA load would.
 *
 * A launch "runs the kernel" at once, on the calling thread: for every
 * 8-byte word of its parameters that points into a range given to
 * fake_expect (given again for the same base: the new pattern), it reads
 * that range's first, middle and last words until
 * they hold the expected pattern (the data may still be on its way, as a
 * kernel's would be behind a stream wait), failing after 10 s. A range
 * that is not mapped faults, as a kernel on unmapped memory would.
 *
 * Graphs: one capture at a time (cuStreamBeginCapture_v2); a stream that
 * waits for an event recorded on a stream being captured joins it (up to
 * four), as in CUDA. Launches on its streams in the kernelParams form are
 * recorded, the first 64 bytes
 * of each parameter copied, instead of run, and run at each cuGraphLaunch
 * of an executable graph made from the capture. The runtime's capture,
 * instantiate, launch and destroy calls go through the driver's, as the
 * real runtime's do (through the process's first definitions: lms's).
 *
 * Copies and memsets (the runtime's and the driver's that the probes use)
 * and NCCL's collectives (one process; ncclComm_t points to an int, the
 * communicator's size) do what they say on the calling thread, once the
 * lms stream adopted for their stream has done what it was given (lms's
 * fetches, which such a stream waits for on a GPU): memory that is not
 * mapped faults. Inside an NCCL group, calls run at ncclGroupEnd, sends
 * before receives (a receive takes the oldest send's data). Settling is an
 * lms call, after which lms may evict what the call was given (on a GPU,
 * such an eviction waits for the call's work on its stream; the stand-in
 * enqueues nothing): the probes keep what one call touches a few chunks
 * under the device limit, so that the reclaim thread's victims are older.
 */
#ifndef LMS_TESTS_FAKE_CUDA_H
#define LMS_TESTS_FAKE_CUDA_H

#include <stddef.h>
#include <stdint.h>

#define FAKE_MAX_PARAMS 8

typedef struct fake_fn {
    int flags; /* FAKE_* */
    size_t n;
    size_t offset[FAKE_MAX_PARAMS], size[FAKE_MAX_PARAMS];
    const char *name; /* as the driver gives it (mangled); NULL: "fake_fn" */
} fake_fn_t;
#define FAKE_KERNEL 1    /* a CUkernel, whose layout only cuKernelGetParamInfo gives */
#define FAKE_NO_LAYOUT 2 /* the driver gives no layout */
#define FAKE_VIA_DRIVER 4 /* the runtime launches it through the driver's cuLaunchKernel */

#define FAKE_TENSOR_MAP_MAGIC 0x7e45a3a9f00dull
#define FAKE_TENSOR_MAP_KEY 0xa5a5a5a5a5a5a5a5ull /* XORed into the address */

/* A CUDA array is, to the stand-in, host bytes in rows FAKE_ARRAY_PITCH
 * apart; a cudaArray_t or CUarray is its address. */
#define FAKE_ARRAY_PITCH 4096

/* Word j of [base, base + bytes) holds fake_word(seed, j). */
static inline uint64_t fake_word(uint64_t seed, size_t j) { return seed * 0x100000001ull + j; }

typedef struct fake_counts {
    uint64_t launches;       /* launches that reached the fake */
    uint64_t checked;        /* pointers whose range was found as expected */
    uint64_t wrong;          /* pointers whose range never held the pattern */
    uint64_t param_queries;  /* cuFuncGetParamInfo and cuKernelGetParamInfo calls */
    uint64_t stream_destroys;
    uint64_t copies;         /* copies and memsets done */
    uint64_t collectives;    /* NCCL calls done (not queued in a group) */
    void *last_stream;       /* the stream of the last launch */
    uint64_t captures;        /* stream captures begun */
    uint64_t captured;        /* launches recorded into a graph rather than run */
    uint64_t capture_queries; /* cuStreamGetCaptureInfo calls */
    uint64_t relaxed;         /* threads set to the relaxed capture mode */
    uint64_t joins;           /* streams that joined a capture through an event */
    uint64_t cooperative;     /* cooperative launches (runtime and driver) */
    uint64_t kernel_launches; /* launches of a cudaKernel_t (__cudaLaunchKernel) */
    uint64_t tensor_maps;     /* descriptors a "kernel" read */
} fake_counts_t;

void fake_expect(const void *base, size_t bytes, uint64_t seed);
void fake_bind_stub(const void *stub, const fake_fn_t *fn);
void fake_bind_stub_hidden(const void *stub, const fake_fn_t *fn);
fake_counts_t fake_counts(void);
/* The stand-in's cuLaunchKernel itself: dlsym on the stand-in's handle
 * answers liblms.so's hook under a preload (Note [dlsym]). */
typedef CUresult (*fake_launch_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                                   unsigned, unsigned, CUstream, void **, void **);
fake_launch_fn fake_launch_kernel(void);
/* From now on copies and memsets do not settle their stream: adopting it
 * would start lms, which the start probe counts. */
void fake_settle_off(void);
/* Whether the calling thread's capture mode is the global one (CUDA's
 * default: what lms must leave it as). */
int fake_thread_mode_is_global(void);

#endif /* LMS_TESTS_FAKE_CUDA_H */
