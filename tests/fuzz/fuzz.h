/*
 * tests/fuzz/fuzz.h — what a fuzz target defines (libFuzzer's interface),
 * whether it runs under libFuzzer (make test-fuzz, clang) or under
 * replay.c, which feeds it the files of its seed corpus (CTest, every
 * build).
 *
 * A target returns 0 for every input; a finding is a crash, a sanitizer
 * report, an abort() on a broken invariant, or an exit() (which libFuzzer
 * counts as a crash, and which replay.c's caller sees as a failed test).
 */
#ifndef LMS_TESTS_FUZZ_H
#define LMS_TESTS_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/* Optional: once, before the first input. */
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* A broken invariant: says which on stderr and aborts. */
#define FUZZ_CHECK(cond, ...)                                                \
    do {                                                                     \
        if (!(cond)) {                                                       \
            fprintf(stderr, "fuzz: %s:%d: ", __FILE__, __LINE__);            \
            fprintf(stderr, __VA_ARGS__);                                    \
            fputc('\n', stderr);                                             \
            abort();                                                         \
        }                                                                    \
    } while (0)

#endif /* LMS_TESTS_FUZZ_H */
