/*
 * interpose/access.h — what copies, memsets and NCCL collectives touch of
 * lms's memory, made resident before they go on to CUDA or NCCL
 * (interpose/hooks.h: LMS_ACCESS_HOOKS; DESIGN.md: "Where access knowledge
 * comes from").
 *
 * access_<name> takes the entry point's own arguments, finds the ranges of
 * lms's reserved range the call reads and writes, and makes them resident
 * on the stream adopted for the call's (lms_access_many; the legacy default
 * stream for the synchronous calls). They stay resident until the calling
 * thread's next lms call: the wrapper makes the real call at once. LMS_OK
 * when nothing is lms's; a failure means the call must not go ahead.
 */
#ifndef LMS_INTERPOSE_ACCESS_H
#define LMS_INTERPOSE_ACCESS_H

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "lms.h"
#include "interpose/hooks.h"
#include "interpose/nccl_abi.h"

/* The _ptds and _ptsz twins touch what their base entry point touches: lms
 * treats the per-thread default stream as the legacy one (lms.h,
 * lms_stream_adopt). The batched copies' are their own: CUDA refuses a
 * batch on the legacy stream, and NULL names it only outside them. */
#define access_cudaMemcpy_ptds access_cudaMemcpy
#define access_cudaMemcpyAsync_ptsz access_cudaMemcpyAsync
#define access_cudaMemcpy2D_ptds access_cudaMemcpy2D
#define access_cudaMemcpy2DAsync_ptsz access_cudaMemcpy2DAsync
#define access_cudaMemcpy3D_ptds access_cudaMemcpy3D
#define access_cudaMemcpy3DAsync_ptsz access_cudaMemcpy3DAsync
#define access_cudaMemcpyToSymbol_ptds access_cudaMemcpyToSymbol
#define access_cudaMemcpyFromSymbol_ptds access_cudaMemcpyFromSymbol
#define access_cudaMemcpyToSymbolAsync_ptsz access_cudaMemcpyToSymbolAsync
#define access_cudaMemcpyFromSymbolAsync_ptsz access_cudaMemcpyFromSymbolAsync
#define access_cudaMemset_ptds access_cudaMemset
#define access_cudaMemsetAsync_ptsz access_cudaMemsetAsync
#define access_cudaMemset2D_ptds access_cudaMemset2D
#define access_cudaMemset2DAsync_ptsz access_cudaMemset2DAsync
#define access_cudaMemset3D_ptds access_cudaMemset3D
#define access_cudaMemset3DAsync_ptsz access_cudaMemset3DAsync
#define access_cuMemcpy_ptds access_cuMemcpy
#define access_cuMemcpyAsync_ptsz access_cuMemcpyAsync
#define access_cuMemcpyPeer_ptds access_cuMemcpyPeer
#define access_cuMemcpyPeerAsync_ptsz access_cuMemcpyPeerAsync
#define access_cuMemcpyHtoD_v2_ptds access_cuMemcpyHtoD_v2
#define access_cuMemcpyDtoH_v2_ptds access_cuMemcpyDtoH_v2
#define access_cuMemcpyDtoD_v2_ptds access_cuMemcpyDtoD_v2
#define access_cuMemcpyHtoDAsync_v2_ptsz access_cuMemcpyHtoDAsync_v2
#define access_cuMemcpyDtoHAsync_v2_ptsz access_cuMemcpyDtoHAsync_v2
#define access_cuMemcpyDtoDAsync_v2_ptsz access_cuMemcpyDtoDAsync_v2
#define access_cuMemcpy2D_v2_ptds access_cuMemcpy2D_v2
#define access_cuMemcpy2DUnaligned_v2 access_cuMemcpy2D_v2
#define access_cuMemcpy2DUnaligned_v2_ptds access_cuMemcpy2D_v2
#define access_cuMemcpy2DAsync_v2_ptsz access_cuMemcpy2DAsync_v2
#define access_cuMemcpy3D_v2_ptds access_cuMemcpy3D_v2
#define access_cuMemcpy3DAsync_v2_ptsz access_cuMemcpy3DAsync_v2
#define access_cudaMemcpy3DPeer_ptds access_cudaMemcpy3DPeer
#define access_cudaMemcpy3DPeerAsync_ptsz access_cudaMemcpy3DPeerAsync
#define access_cudaMemcpy2DToArray_ptds access_cudaMemcpy2DToArray
#define access_cudaMemcpy2DToArrayAsync_ptsz access_cudaMemcpy2DToArrayAsync
#define access_cudaMemcpy2DFromArray_ptds access_cudaMemcpy2DFromArray
#define access_cudaMemcpy2DFromArrayAsync_ptsz access_cudaMemcpy2DFromArrayAsync
#define access_cuMemcpy3DPeer_ptds access_cuMemcpy3DPeer
#define access_cuMemcpy3DPeerAsync_ptsz access_cuMemcpy3DPeerAsync
#define access_cuMemcpyDtoA_v2_ptds access_cuMemcpyDtoA_v2
#define access_cuMemcpyAtoD_v2_ptds access_cuMemcpyAtoD_v2
#define access_cuMemsetD8_v2_ptds access_cuMemsetD8_v2
#define access_cuMemsetD16_v2_ptds access_cuMemsetD16_v2
#define access_cuMemsetD32_v2_ptds access_cuMemsetD32_v2
#define access_cuMemsetD8Async_ptsz access_cuMemsetD8Async
#define access_cuMemsetD16Async_ptsz access_cuMemsetD16Async
#define access_cuMemsetD32Async_ptsz access_cuMemsetD32Async
#define access_cuMemsetD2D8_v2_ptds access_cuMemsetD2D8_v2
#define access_cuMemsetD2D16_v2_ptds access_cuMemsetD2D16_v2
#define access_cuMemsetD2D32_v2_ptds access_cuMemsetD2D32_v2
#define access_cuMemsetD2D8Async_ptsz access_cuMemsetD2D8Async
#define access_cuMemsetD2D16Async_ptsz access_cuMemsetD2D16Async
#define access_cuMemsetD2D32Async_ptsz access_cuMemsetD2D32Async

#define ACCESS_DECLARE(lib, ret, name, params, args) lms_status_t access_##name params;
LMS_ACCESS_HOOKS(ACCESS_DECLARE)
#undef ACCESS_DECLARE

/* NCCL groups (Note [NCCL groups] in access.c): the calling thread's
 * ncclGroupStart succeeded; its ncclGroupEnd is about to be called (makes
 * what the group's calls touch resident when it ends the outermost group;
 * on failure the group is as it was); that ncclGroupEnd returned. */
void access_group_started(void);
lms_status_t access_group_ending(void);
void access_group_ended(void);

#endif /* LMS_INTERPOSE_ACCESS_H */
