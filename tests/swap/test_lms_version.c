/*
 * tests/swap/test_lms_version.c — lms.h's constants a binding reads at run
 * time instead of copying: lms_version() and lms_stats_fields(). (The rest
 * of swap/lms.c's public calls are test_lms.c's.) Neither needs a device or
 * lms_init, so no test here starts lms.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>

#include <lms.h>

TestSuite(lms_version);

Test(lms_version, the_library_says_the_version_of_the_header_it_was_built_with)
{
    const char *v = lms_version();
    cr_assert(v != NULL, "lms_version() is never NULL");
    cr_assert_str_eq(v, LMS_VERSION);
    char parts[64];
    snprintf(parts, sizeof parts, "%d.%d.%d", LMS_VERSION_MAJOR, LMS_VERSION_MINOR,
             LMS_VERSION_PATCH);
    cr_assert_str_eq(v, parts, "LMS_VERSION is MAJOR.MINOR.PATCH");
    cr_assert(lms_version() == v, "the same constant string every call");
}

Test(lms_version, the_stats_fields_are_lms_stats_t_s_names_in_order_one_uint64_t_each)
{
    const char *const *names = NULL;
    size_t n = 0;
    cr_assert_eq(lms_stats_fields(&names, &n), LMS_OK, "%s", lms_last_error());
    cr_assert(names != NULL);
    cr_assert_eq(n * sizeof(uint64_t), sizeof(lms_stats_t), "%zu names: one uint64_t each", n);
    /* field i, as this test was compiled: named names[i], at 8 x i */
    size_t i = 0;
#define CHECK_FIELD(f)                                                                       \
    cr_assert(i < n && names[i] != NULL && strcmp(names[i], #f) == 0, "field %zu is " #f, i);  \
    cr_assert_eq(offsetof(lms_stats_t, f), i * sizeof(uint64_t), #f " is at 8 x %zu", i);     \
    i++;
    LMS_STATS_FIELDS(CHECK_FIELD)
#undef CHECK_FIELD
    cr_assert_eq(i, n, "%zu names, lms_stats_t has %zu fields", n, i);
    /* A binding reads a field by its name at the offset the list gives. */
    lms_stats_t st;
    memset(&st, 0, sizeof st);
    st.host_limit = 12345;
    const uint64_t *words = (const uint64_t *)&st;
    size_t found = n;
    for (size_t j = 0; j < n; j++)
        if (strcmp(names[j], "host_limit") == 0)
            found = j;
    cr_assert(found < n && words[found] == 12345, "host_limit read by its name");
}

Test(lms_version, stats_fields_refuses_null_arguments_naming_them)
{
    const char *const *names = NULL;
    size_t n = 7;
    cr_assert_eq(lms_stats_fields(NULL, &n), LMS_ERR_INVALID);
    cr_assert_str_eq(lms_last_error(), "lms_stats_fields: NULL names");
    cr_assert_eq(n, 7, "nothing stored on failure");
    cr_assert_eq(lms_stats_fields(&names, NULL), LMS_ERR_INVALID);
    cr_assert_str_eq(lms_last_error(), "lms_stats_fields: NULL count");
    cr_assert(names == NULL, "nothing stored on failure");
}
