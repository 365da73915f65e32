/*
 * tests/interpose/test_scan.c — the launch parameter scanner (interpose/scan.h):
 * pointers in scalars, in structs passed by value, and in the `extra`
 * buffer; values just outside the range, and words off 8-byte alignment,
 * are not taken.
 */
#include <stdalign.h>
#include <string.h>

#include <cuda.h>

#include "harness.h"
#include "interpose/scan.h"

_Static_assert((uintptr_t)CU_LAUNCH_PARAM_END == SCAN_EXTRA_END, "CUDA's END");
_Static_assert((uintptr_t)CU_LAUNCH_PARAM_BUFFER_POINTER == SCAN_EXTRA_BUFFER_POINTER,
               "CUDA's BUFFER_POINTER");
_Static_assert((uintptr_t)CU_LAUNCH_PARAM_BUFFER_SIZE == SCAN_EXTRA_BUFFER_SIZE,
               "CUDA's BUFFER_SIZE");

#define LO ((uintptr_t)0x7f0000000000)
#define BYTES ((size_t)1 << 30)
static const scan_range_t R = {LO, BYTES};

/* a kernel's parameters: (float *x, int n, struct {int k; float *y; double *z;} s,
 * char c, float *w), as CUDA lays them out */
typedef struct pair {
    int k;
    float *y;
    double *z;
} pair_t;

Test(scan, pointers_in_scalars_and_structs_are_found_in_order)
{
    float *x = (float *)(LO + 256), *w = (float *)(LO + BYTES - 8);
    int n = 7;
    pair_t s; /* zeroed whole: an initializer leaves the padding after k as the stack had it,
                 and bytes such as 0x7f00 there made a word inside the range */
    memset(&s, 0, sizeof s);
    s.k = 3;
    s.y = (float *)(LO + 4096);
    s.z = (double *)(LO - 8); /* not lms's */
    char c = 1;
    void *values[] = {&x, &n, &s, &c, &w};
    const scan_param_t layout[] = {{0, 8}, {8, 4}, {16, 24}, {40, 1}, {48, 8}};
    uintptr_t out[8];
    cr_assert_eq(scan_params(values, layout, 5, R, out, NULL, 8), 3);
    cr_assert_eq(out[0], (uintptr_t)x);
    cr_assert_eq(out[1], (uintptr_t)s.y, "the struct's pointer member, at buffer offset 24");
    cr_assert_eq(out[2], (uintptr_t)w, "the last byte of the range's last word is in it");
    cr_assert_eq(scan_params(values, layout, 5, R, out, NULL, 2), 3, "all are counted...");
    cr_assert_eq(out[1], (uintptr_t)s.y, "...and the first max kept");
    uint32_t param[8];
    cr_assert_eq(scan_params(values, layout, 5, R, out, param, 8), 3);
    cr_assert(param[0] == 0 && param[1] == 2 && param[2] == 4,
              "each pointer's parameter: %u %u %u", param[0], param[1], param[2]);
}

Test(scan, the_ends_of_the_range_and_short_parameters)
{
    uintptr_t below = LO - 1, end = LO + BYTES, first = LO;
    uint32_t lo_half = (uint32_t)LO; /* 4 bytes: no pointer fits */
    void *values[] = {&below, &end, &first, &lo_half};
    const scan_param_t layout[] = {{0, 8}, {8, 8}, {16, 8}, {24, 4}};
    uintptr_t out[4];
    cr_assert_eq(scan_params(values, layout, 4, R, out, NULL, 4), 1);
    cr_assert_eq(out[0], LO);
}

Test(scan, words_off_eight_byte_alignment_in_the_buffer_are_not_taken)
{
    /* a 12-byte parameter at offset 4 (a struct of three ints): its only word
     * at a multiple of 8 is buffer bytes 8..15, its bytes 4..11 */
    alignas(8) unsigned char p[12] = {0};
    uintptr_t v = LO + 64;
    memcpy(p + 4, &v, 8);
    void *values[] = {p};
    scan_param_t at4 = {4, 12};
    uintptr_t out[2];
    cr_assert_eq(scan_params(values, &at4, 1, R, out, NULL, 2), 1);
    memset(p, 0, sizeof p);
    memcpy(p, &v, 8); /* bytes 0..7 of the parameter: buffer offsets 4..11 */
    cr_assert_eq(scan_params(values, &at4, 1, R, out, NULL, 2), 0);
    /* the host copy itself may sit anywhere: read unaligned */
    unsigned char odd[17];
    memcpy(odd + 1, &v, 8);
    void *oddv[] = {odd + 1};
    scan_param_t at0 = {0, 8};
    cr_assert_eq(scan_params(oddv, &at0, 1, R, out, NULL, 2), 1);
    cr_assert_eq(out[0], v);
}

Test(scan, the_extra_buffer_form)
{
    alignas(8) unsigned char buf[32] = {0};
    uintptr_t a = LO + 8, b = LO + 16;
    memcpy(buf, &a, 8);
    memcpy(buf + 24, &b, 8);
    size_t size = sizeof buf;
    void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                     CU_LAUNCH_PARAM_END};
    const void *got = NULL;
    size_t got_size = 0;
    cr_assert(scan_extra(extra, &got, &got_size));
    cr_assert(got == buf && got_size == 32);
    uintptr_t out[4];
    cr_assert_eq(scan_buffer(got, got_size, R, out, 4), 2);
    cr_assert(out[0] == a && out[1] == b);
    cr_assert_eq(scan_buffer(got, 31, R, out, 4), 1, "a word past the size is not read");

    void *no_size[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_END};
    void *bad_key[] = {(void *)7, buf, CU_LAUNCH_PARAM_END};
    void *empty[] = {CU_LAUNCH_PARAM_END};
    cr_assert_not(scan_extra(no_size, &got, &got_size));
    cr_assert_not(scan_extra(bad_key, &got, &got_size));
    cr_assert_not(scan_extra(empty, &got, &got_size));
    cr_assert_not(scan_extra(NULL, &got, &got_size));
}
