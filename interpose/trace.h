/*
 * interpose/trace.h — LMS_TRACE_ACCESSES: the interposer's allocations,
 * frees and accesses written as a trace for bench/simulate (Note [Access
 * trace] in trace.c). Each call does nothing, after one check, when the
 * option is not set.
 */
#ifndef LMS_INTERPOSE_TRACE_H
#define LMS_INTERPOSE_TRACE_H

#include <stdbool.h>
#include <stddef.h>

#include "lms.h"

/* Whether a trace is being written (the file is opened on the first call). */
bool trace_on(void);

/* An allocation the hooks made, and its free (before lms frees it). */
void trace_alloc(const void *ptr, size_t size);
void trace_free(const void *ptr);

/* One call's accesses: ranges with their modes, or pointers into
 * allocations with theirs (a launch; modes NULL: all written). */
void trace_access(const lms_range_t *r, size_t n);
void trace_access_pointers(const void *const *ptrs, const lms_access_mode_t *modes, size_t n);

#endif /* LMS_INTERPOSE_TRACE_H */
