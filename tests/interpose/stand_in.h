/*
 * tests/interpose/stand_in.h — what the probes on the stand-in CUDA
 * (fake_cuda.h) share: writing an allocation's pattern and checking what the
 * stand-in's "kernels" found. Include after probe.h.
 */
#ifndef LMS_TESTS_STAND_IN_H
#define LMS_TESTS_STAND_IN_H

#include <stdint.h>

#include <cuda.h>

#include "lms.h"
#include "fake_cuda.h"

/* Writes the pattern of seed over [p, p + size) as a "kernel" on the host
 * would: lms_access maps it for the work that follows (the sim's device
 * memory is the host's), and the write is done before the next lms call.
 * The stand-in's kernels then expect it there. */
static inline void stand_in_write(CUdeviceptr p, size_t size, uint64_t seed)
{
    uint64_t *w = (uint64_t *)(uintptr_t)p;
    CHECK(lms_access(w, size, LMS_OVERWRITE, NULL) == LMS_OK, "access: %s", lms_last_error());
    for (size_t j = 0; j < size / 8; j++)
        w[j] = fake_word(seed, j);
    fake_expect(w, size, seed);
}

/* The stand-in's kernels found their data n times since `before` (a count
 * of fake_counts().checked), and never found wrong data. */
static inline void expect_checked(uint64_t before, uint64_t n, const char *what)
{
    fake_counts_t c = fake_counts();
    CHECK(c.checked - before == n, "%s: %llu pointers found their data, want %llu", what,
          (unsigned long long)(c.checked - before), (unsigned long long)n);
    CHECK(c.wrong == 0, "%s: %llu pointers found wrong data", what, (unsigned long long)c.wrong);
}

#endif /* LMS_TESTS_STAND_IN_H */
