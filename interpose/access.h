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
 * access.c answers the copies and memsets, nccl.c the collectives. This
 * header is the contract tests/fuzz/fuzz_access.c calls them through; the
 * rest of what interpose/'s files share is in internal.h.
 */
#ifndef LMS_INTERPOSE_ACCESS_H
#define LMS_INTERPOSE_ACCESS_H

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "lms.h"
#include "interpose/hooks.h"
#include "interpose/nccl_abi.h"

/* One per entry point that answers for itself: a twin (hooks.h's `by`)
 * redeclares its base's, which the compiler checks against it. */
#define ACCESS_DECLARE(lib, ret, name, by, since, params, args) lms_status_t access_##by params;
LMS_ACCESS_HOOKS(ACCESS_DECLARE)
#undef ACCESS_DECLARE

#endif /* LMS_INTERPOSE_ACCESS_H */
