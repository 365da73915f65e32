/*
 * swap/util.h — small helpers every file of swap/ uses.
 */
#ifndef LMS_SWAP_UTIL_H
#define LMS_SWAP_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifndef HIDDEN
#define HIDDEN __attribute__((visibility("hidden")))
#endif

/* Grows *array (of elements of elem bytes, *cap of them) to hold need, in
 * the metadata arena, doubling; false, with nothing changed, without memory. */
HIDDEN bool swap_grow(void **array, size_t *cap, size_t need, size_t elem);

/* bytes as "1.5 GiB" into buf (32 bytes); buf. */
HIDDEN char *swap_fmt(uint64_t bytes, char *buf);

#endif /* LMS_SWAP_UTIL_H */
