/*
 * interpose/signature.h — what a kernel's C++ signature says of its
 * parameters: which are pointers to const, which a kernel only reads through
 * (Note [Access modes from the signature] in launch.c). Pure: no CUDA call,
 * no lms call; launch.c takes the name from the driver and demangles it.
 */
#ifndef LMS_INTERPOSE_SIGNATURE_H
#define LMS_INTERPOSE_SIGNATURE_H

#include <stdbool.h>
#include <stddef.h>

/* Sets read_only[i] for each of the n parameters of sig, a demangled
 * function signature ("kernel<float>(float const*, float*, int)"): true
 * for a pointer to const ("T const*", with or without __restrict__),
 * false for anything else (a pointer to non-const, a scalar, a struct,
 * a pointer to a pointer to non-const, an array). Returns false, leaving
 * read_only as it was, when sig has no parameter list it can read or its
 * list does not have exactly n parameters. */
bool signature_read_only(const char *sig, size_t n, bool *read_only);

#endif /* LMS_INTERPOSE_SIGNATURE_H */
