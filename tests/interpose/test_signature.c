/*
 * tests/interpose/test_signature.c — pointers to const in demangled kernel
 * signatures (interpose/signature.h), as the driver's names demangle:
 * plain and templated kernels, __restrict__, pointers to pointers, commas
 * inside template arguments, lambdas in the name, and what is not read.
 */
#include <stdbool.h>

#include "harness.h"
#include "interpose/signature.h"

#define N 8

/* signature_read_only of sig over n parameters, into ro (all true before, so
 * that a parameter left unset shows). */
static bool read(const char *sig, size_t n, bool ro[N])
{
    for (int i = 0; i < N; i++)
        ro[i] = true;
    return signature_read_only(sig, n, ro);
}

Test(signature, pointers_to_const_are_read_only_and_the_rest_is_not)
{
    bool ro[N];
    cr_assert(read("saxpy(float const*, float*, int, float)", 4, ro));
    cr_assert(ro[0] && !ro[1] && !ro[2] && !ro[3]);
    cr_assert(read("k<float, 4>(float const* __restrict__, float* __restrict__, float const*)", 3, ro));
    cr_assert(ro[0] && !ro[1] && ro[2], "__restrict__ and templates");
    cr_assert(read("k(char const volatile*, char volatile const*, double const* const*, float**)", 4, ro));
    cr_assert(ro[0] && ro[1] && ro[2] && !ro[3], "volatile, and a pointer to const pointers");
    cr_assert(read("k(float const (*) [4], float const&, std::pair<float const*, int>)", 3, ro));
    cr_assert(!ro[0] && !ro[1] && !ro[2], "arrays, references and structs are not read-only");
    cr_assert(read("k(myconst*, notconst*)", 2, ro));
    cr_assert(!ro[0] && !ro[1], "const must be a word of its own");
}

Test(signature, the_list_is_the_one_that_ends_the_signature)
{
    bool ro[N];
    const char *lambda =
        "void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl<at::native::"
        "(anonymous namespace)::add_kernel(at::TensorIteratorBase&, c10::Scalar const&)::"
        "{lambda(float, float)#1}>(at::TensorIteratorBase&, {lambda(float, float)#1} const&)::"
        "{lambda(int)#1}>(int, {lambda(int)#1})";
    cr_assert(read(lambda, 2, ro));
    cr_assert(!ro[0] && !ro[1]);
    cr_assert(read("k()", 0, ro) && read("k(void)", 0, ro) && read("k( )", 0, ro));
    cr_assert(ro[0], "no parameter: nothing set");
}

Test(signature, what_cannot_be_read_changes_nothing)
{
    bool ro[N];
    cr_assert(!read("saxpy(float const*, float*)", 3, ro), "a count that differs");
    cr_assert(ro[0] && ro[1] && ro[2], "...leaves the flags as they were");
    cr_assert(!read("_Z5saxpyPKfPf", 2, ro), "a mangled name");
    cr_assert(!read("saxpy", 0, ro) && !read("", 0, ro) && !signature_read_only(NULL, 0, ro));
    cr_assert(!read("k(int)) ", 1, ro), "brackets that do not balance");
    cr_assert(!read("k(std::less<int>, int>)", 2, ro));
}
