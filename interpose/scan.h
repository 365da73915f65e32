/*
 * interpose/scan.h — finds the device pointers a kernel launch passes: every
 * 8-byte word of its parameters, at a multiple of 8 in the parameter buffer,
 * whose value lies in lms's reserved range (DESIGN.md: "Where access
 * knowledge comes from"). Pure: no CUDA call, no lms call; the launch hooks
 * take the layout from cuFuncGetParamInfo and resolve what is found.
 *
 * A pointer inside a struct passed by value is found as one in a scalar:
 * CUDA lays parameters out with their natural alignment, so a pointer member
 * sits at a multiple of 8 of the buffer wherever its struct is. What cannot
 * be found: pointers stored in device memory (an array of pointers), and
 * pointers packed below 8-byte alignment (a packed struct); those need
 * lms_pin (docs).
 */
#ifndef LMS_INTERPOSE_SCAN_H
#define LMS_INTERPOSE_SCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One parameter's place in the parameter buffer, as cuFuncGetParamInfo
 * gives it. */
typedef struct scan_param {
    size_t offset, size;
} scan_param_t;

/* The addresses a word must fall in: [lo, lo + bytes). */
typedef struct scan_range {
    uintptr_t lo;
    size_t bytes;
} scan_range_t;

/* The kernelParams form: values[i] points to parameter i's bytes, laid out
 * as layout[i]. Puts the words found, in order, in out (at most max), and
 * the index of the parameter each was found in in param_of (unless NULL),
 * and returns how many there are in all: more than max means out holds the
 * first max. */
size_t scan_params(void *const *values, const scan_param_t *layout, size_t n, scan_range_t r,
                   uintptr_t *out, uint32_t *param_of, size_t max);

/* The same over one parameter buffer of `size` bytes (the `extra` form). */
size_t scan_buffer(const void *buf, size_t size, scan_range_t r, uintptr_t *out, size_t max);

/* The `extra` argument of cuLaunchKernel: pairs of a key and a value ended
 * by CU_LAUNCH_PARAM_END (0); CU_LAUNCH_PARAM_BUFFER_POINTER (1) names the
 * buffer, CU_LAUNCH_PARAM_BUFFER_SIZE (2) points to its size. Sets *buf and
 * *size and returns true if it names both; false if it names neither, has
 * another key, or does not end within SCAN_EXTRA_MAX pairs. */
#define SCAN_EXTRA_END 0
#define SCAN_EXTRA_BUFFER_POINTER 1
#define SCAN_EXTRA_BUFFER_SIZE 2
#define SCAN_EXTRA_MAX 16
bool scan_extra(void *const *extra, const void **buf, size_t *size);

#endif /* LMS_INTERPOSE_SCAN_H */
