/*
 * tests/fuzz/fuzz_options.c — fuzzes the LMS_* options parser
 * (base/options.c): the input is lines of NAME=VALUE, set in the
 * environment for the names that begin with LMS_, and then parsed as lms
 * parses them at its start; the whole input is also given to
 * base_parse_size alone.
 *
 * base/options.c parses once per process (pthread_once) and has no entry
 * point to parse again, so this target includes the file and calls its
 * parse_all directly, input after input: parse_all sets every option
 * (its default first, then the environment's value), so each parse
 * starts afresh. Its host memory (base_meta_alloc, for paths, kept for the
 * process in lms) comes from an arena here that each input empties:
 * the names are renamed before the include, so lms's own allocator is
 * not linked in.
 *
 * What must hold, for any input: no crash or sanitizer report; every
 * option holds a valid value of its type afterwards (the environment's
 * when it was taken, its range kept); a size that parses parses again,
 * written in decimal, to the same value.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

#define base_meta_alloc fuzz_meta_alloc
#define base_meta_calloc fuzz_meta_calloc
#define base_meta_realloc fuzz_meta_realloc
#define base_meta_free fuzz_meta_free
#include "base/options.c"

extern char **environ;

static _Alignas(16) char arena[1 << 20];
static size_t arena_used;

void *fuzz_meta_alloc(size_t size)
{
    size = (size + 15) & ~(size_t)15;
    if (size > sizeof arena - arena_used)
        return NULL;
    arena_used += size;
    return arena + arena_used - size;
}

void *fuzz_meta_calloc(size_t n, size_t size)
{
    void *p = n != 0 && size > SIZE_MAX / n ? NULL : fuzz_meta_alloc(n * size);
    return p != NULL ? memset(p, 0, n * size) : NULL;
}

void *fuzz_meta_realloc(void *p, size_t size)
{
    (void)p, (void)size;
    abort(); /* options.c does not resize */
}

void fuzz_meta_free(void *p) { (void)p; }

/* The word of choices s is exactly. */
static bool one_of(const char *s, const char *choices)
{
    size_t n = strlen(s);
    for (const char *w = choices; *w != '\0';) {
        size_t wlen = strcspn(w, "|");
        if (wlen == n && strncmp(w, s, n) == 0)
            return true;
        w += wlen + (w[wlen] == '|');
    }
    return false;
}

static void check_options(void)
{
    for (size_t i = 0; i < OPTION_COUNT; i++) {
        const option_t *o = &table[i];
        const void *field = (const char *)&options + o->offset;
        const char *env = getenv(var[i]);
        bool from_env = strcmp(source[i], "env") == 0;
        FUZZ_CHECK(from_env || strcmp(source[i], "default") == 0, "%s: source %s", var[i],
                   source[i]);
        FUZZ_CHECK(!from_env || (env != NULL && *env != '\0'), "%s: env without a value",
                   var[i]);
        FUZZ_CHECK(shown[i] != NULL, "%s: nothing to show", var[i]);
        switch (o->type) {
        case TYPE_size: {
            uint64_t v;
            FUZZ_CHECK(base_parse_size(from_env ? env : o->def, &v) && v == *(const uint64_t *)field,
                       "%s: %llu, not what its text says", var[i],
                       (unsigned long long)*(const uint64_t *)field);
            break;
        }
        case TYPE_double: {
            double v = *(const double *)field;
            FUZZ_CHECK(isfinite(v) && in_range(v, o->choices), "%s: %g", var[i], v);
            break;
        }
        case TYPE_int: {
            long v = *(const long *)field;
            FUZZ_CHECK(v >= INT_MIN && v <= INT_MAX && in_range((double)v, o->choices), "%s: %ld",
                       var[i], v);
            break;
        }
        case TYPE_bool:
            break;
        case TYPE_choice:
            FUZZ_CHECK(one_of(*(const char *const *)field, o->choices), "%s: '%s'", var[i],
                       *(const char *const *)field);
            break;
        case TYPE_path:
            FUZZ_CHECK(*(const char *const *)field != NULL, "%s: NULL", var[i]);
            FUZZ_CHECK(!from_env || strcmp(*(const char *const *)field, env) == 0,
                       "%s: not the environment's", var[i]);
            break;
        }
    }
}

static void check_size(const char *s)
{
    uint64_t v, again;
    char decimal[32];
    if (!base_parse_size(s, &v))
        return;
    snprintf(decimal, sizeof decimal, "%llu", (unsigned long long)v);
    FUZZ_CHECK(base_parse_size(decimal, &again) && again == v, "'%s' is %llu, and '%s' is not",
               s, (unsigned long long)v, decimal);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *input = malloc(size + 1);
    FUZZ_CHECK(input != NULL, "no memory");
    memcpy(input, data, size);
    input[size] = '\0'; /* a NUL inside ends it, as it would end an environment string */
    check_size(input);
    char *names[64];
    size_t n = 0;
    char *save = NULL;
    for (char *line = strtok_r(input, "\n", &save); line != NULL && n < 64;
         line = strtok_r(NULL, "\n", &save)) {
        /* putenv, not setenv: glibc keeps every string setenv was given */
        if (strncmp(line, "LMS_", 4) == 0 && strchr(line, '=') != NULL && putenv(line) == 0)
            names[n++] = line;
    }
    arena_used = 0;
    parse_all();
    check_options();
    for (size_t i = 0; i < n; i++) {
        /* a copy of the name: the string itself is the environment's entry */
        char *name = strndup(names[i], (size_t)(strchr(names[i], '=') - names[i]));
        FUZZ_CHECK(name != NULL, "no memory");
        unsetenv(name);
        free(name);
    }
    for (char **e = environ; *e != NULL; e++)
        FUZZ_CHECK(*e < input || *e > input + size, "left in the environment: %s", *e);
    free(input);
    return 0;
}
