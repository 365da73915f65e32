/*
 * interpose/tensormap.h — TMA descriptors (CUtensorMap: 128 opaque bytes that
 * cuTensorMapEncodeTiled and its siblings write, and Hopper's bf16, fp16 and
 * TF32 GEMMs take as kernel parameters): the tensor address each one the
 * program encoded describes, so that a launch whose parameters hold one
 * makes that tensor resident (Note [Tensor maps] in tensormap.c).
 */
#ifndef LMS_INTERPOSE_TENSORMAP_H
#define LMS_INTERPOSE_TENSORMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "interpose/scan.h"

#define TENSORMAP_BYTES 128 /* sizeof(CUtensorMap) */
#define TENSORMAP_ALIGN 64  /* where one may sit in a parameter buffer: CUtensorMap is
                               aligned to 64 (128 since CUDA 13's cuda.h) */

/* The descriptor now at map (TENSORMAP_BYTES, as CUDA just wrote it)
 * addresses lms's memory at address. Thread-safe. */
void tensormap_learn(const void *map, uintptr_t address);

/* Whether any descriptor was learnt (one load: launches pay nothing more
 * until one is). */
bool tensormap_any(void);

/* Adds the address of every learnt descriptor among the parameters (the
 * kernelParams form, laid out as layout: each TENSORMAP_BYTES at a multiple
 * of TENSORMAP_ALIGN of the parameter buffer inside a parameter) to
 * out[found...] and its parameter's index to param_of (unless NULL), at
 * most max kept, and returns the new count of all found (more than max:
 * out holds the first max), as scan_params does. */
size_t tensormap_scan(void *const *values, const scan_param_t *layout, size_t n, uintptr_t *out,
                      uint32_t *param_of, size_t max, size_t found);

/* The same over one parameter buffer of `size` bytes (the `extra` form). */
size_t tensormap_scan_buffer(const void *buf, size_t size, uintptr_t *out, size_t max,
                             size_t found);

#endif /* LMS_INTERPOSE_TENSORMAP_H */
