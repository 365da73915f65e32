/*
 * tests/alloc/malloc_probe.c — liblms.so must not replace the host program's
 * malloc: a program linked with liblms.so, one that loads it with dlopen, and
 * one that runs under LD_PRELOAD=liblms.so all still use glibc's malloc, and
 * lms works in each (lms's own memory comes from its private jemalloc, see
 * base/meta.c).
 *
 * A plain program (no Criterion, which would link lms_core), built three ways
 * by tests/CMakeLists.txt:
 *   PROBE_LINKED   linked against liblms.so
 *   PROBE_DLOPEN   not linked; argv[1], liblms.so, opened with
 *                  dlopen(RTLD_NOW | RTLD_LOCAL), lms_* taken with dlsym
 *   PROBE_PRELOAD  not linked; run with LD_PRELOAD=liblms.so, lms_* taken
 *                  from the global scope
 * Each checks, in order:
 *   1. every malloc-family function the program resolves (dlsym(RTLD_DEFAULT))
 *      is libc.so.6's, and so is what liblms.so's own scope resolves;
 *      liblms.so exports no jemalloc name;
 *   2. glibc's mallinfo2 sees a small and a large malloc the program makes;
 *   3. lms_init, lms_malloc(1 MiB) and lms_free succeed (LMS_BACKEND=sim);
 *   4. 1 and 2 again, now that lms (and its jemalloc) has run.
 * In a sanitized build the program's malloc is ASan's, by design: there 1
 * checks only that it is not liblms.so's, and 2 is skipped.
 * Prints one line per failure and a summary; exit status 0 when all passed.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lms.h"

#if defined(PROBE_LINKED)
static const char *const mode = "linked with liblms.so";
#elif defined(PROBE_DLOPEN)
static const char *const mode = "liblms.so loaded with dlopen(RTLD_NOW | RTLD_LOCAL)";
#elif defined(PROBE_PRELOAD)
static const char *const mode = "liblms.so in LD_PRELOAD";
#else
#error "build with one of PROBE_LINKED, PROBE_DLOPEN, PROBE_PRELOAD"
#endif

#ifdef __SANITIZE_ADDRESS__
static const int sanitized = 1;
#else
static const int sanitized = 0;
#endif

static int failures, checks;

#define CHECK(cond, ...)                                                                    \
    do {                                                                                    \
        checks++;                                                                           \
        if (!(cond)) {                                                                      \
            failures++;                                                                     \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                                     \
            printf(__VA_ARGS__);                                                            \
            printf("\n");                                                                   \
        }                                                                                   \
    } while (0)

static const char *const malloc_family[] = {
    "malloc",  "free",   "calloc", "realloc",            "reallocarray", "posix_memalign",
    "aligned_alloc", "memalign", "valloc", "malloc_usable_size", "mallinfo2",
};

/* Names the private jemalloc has or could have had, were it not prefixed and hidden. */
static const char *const jemalloc_names[] = {
    "mallocx", "rallocx", "dallocx", "mallctl", "je_malloc", "je_mallocx",
    "lms_je_malloc", "lms_je_mallocx", "lms_je_mallctl", "lms_je_dallocx",
};

typedef struct lms_fns {
    lms_status_t (*init)(void);
    lms_status_t (*malloc)(void **ptr, size_t size, lms_stream_t stream);
    lms_status_t (*free)(void *ptr, lms_stream_t stream);
    lms_status_t (*shutdown)(void);
    const char *(*last_error)(void);
} lms_fns_t;

static const char *object_of(const void *addr)
{
    Dl_info info;
    return addr && dladdr(addr, &info) && info.dli_fname ? info.dli_fname : "(none)";
}

/* 1: the program's malloc family is glibc's (or, sanitized, not liblms.so's). */
static void check_malloc_is_glibcs(void *libc, void *lms, const char *lms_path)
{
    for (size_t i = 0; i < sizeof malloc_family / sizeof *malloc_family; i++) {
        const char *name = malloc_family[i];
        void *glibc = dlsym(libc, name);
        if (glibc == NULL)
            continue; /* not in this glibc */
        void *seen = dlsym(RTLD_DEFAULT, name);
        void *from_lms = dlsym(lms, name);
        CHECK(seen != NULL, "the program does not resolve %s", name);
        CHECK(strcmp(object_of(seen), lms_path) != 0, "%s resolves into liblms.so", name);
        CHECK(strcmp(object_of(from_lms), lms_path) != 0, "liblms.so defines %s", name);
        if (!sanitized) {
            CHECK(seen == glibc, "the program's %s is %p in %s, not glibc's %p", name, seen,
                  object_of(seen), glibc);
            CHECK(from_lms == glibc, "liblms.so's scope resolves %s to %p in %s, not glibc's",
                  name, from_lms, object_of(from_lms));
        }
    }
    for (size_t i = 0; i < sizeof jemalloc_names / sizeof *jemalloc_names; i++) {
        void *sym = dlsym(lms, jemalloc_names[i]);
        CHECK(sym == NULL, "liblms.so's scope has %s (in %s)", jemalloc_names[i], object_of(sym));
    }
}

/* Bytes glibc's malloc holds for the program: its heap plus its mmapped blocks. */
static size_t glibc_in_use(void)
{
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
}

/* 2: glibc's accounting sees the program's own mallocs. */
static void check_mallinfo_sees_mallocs(void)
{
    if (sanitized)
        return;
    /* small: above glibc's thread cache (which counts as in use), below its
     * mmap threshold; large: above it, so mmapped. */
    const size_t small = 40000, large = 8 << 20;
    size_t before = glibc_in_use();
    char *s = malloc(small);
    CHECK(s != NULL, "malloc(%zu)", small);
    size_t mid = glibc_in_use();
    CHECK(mid >= before + small, "mallinfo2 grew by %zd bytes for malloc(%zu)",
          (ssize_t)(mid - before), small);
    char *l = malloc(large);
    CHECK(l != NULL, "malloc(%zu)", large);
    size_t after = glibc_in_use();
    CHECK(after >= mid + large, "mallinfo2 grew by %zd bytes for malloc(%zu)",
          (ssize_t)(after - mid), large);
    if (s)
        memset(s, 1, small);
    if (l)
        memset(l, 1, large);
    free(l);
    CHECK(glibc_in_use() + large <= after, "mallinfo2 did not see free of %zu bytes", large);
    free(s);
}

/* 3: lms works in this process. */
static void check_lms_works(const lms_fns_t *f)
{
    lms_status_t st = f->init();
    CHECK(st == LMS_OK, "lms_init -> %d: %s", st, f->last_error());
    void *p = NULL;
    st = f->malloc(&p, 1 << 20, NULL);
    CHECK(st == LMS_OK && p != NULL, "lms_malloc(1 MiB) -> %d, %p: %s", st, p, f->last_error());
    if (st == LMS_OK) {
        st = f->free(p, NULL);
        CHECK(st == LMS_OK, "lms_free -> %d: %s", st, f->last_error());
    }
    st = f->shutdown();
    CHECK(st == LMS_OK, "lms_shutdown -> %d: %s", st, f->last_error());
}

#if !defined(PROBE_LINKED)
static void *need(void *lms, const char *name)
{
    void *sym = dlsym(lms, name);
    CHECK(sym != NULL, "liblms.so has no %s: %s", name, dlerror());
    return sym;
}
#endif

int main(int argc, char **argv)
{
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    if (libc == NULL) {
        printf("FAIL: libc.so.6 is not loaded: %s\n", dlerror());
        return 1;
    }
    lms_fns_t f;
    void *lms = NULL;
#if defined(PROBE_LINKED)
    (void)argc, (void)argv;
    f = (lms_fns_t){lms_init, lms_malloc, lms_free, lms_shutdown, lms_last_error};
    const char *lms_path = object_of((void *)lms_init);
    lms = dlopen(lms_path, RTLD_NOW | RTLD_NOLOAD);
#elif defined(PROBE_DLOPEN)
    if (argc != 2) {
        fprintf(stderr, "usage: %s path/to/liblms.so\n", argv[0]);
        return 2;
    }
    CHECK(dlsym(RTLD_DEFAULT, "lms_init") == NULL, "lms_init resolves before dlopen");
    lms = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (lms == NULL) {
        printf("FAIL: dlopen(%s): %s\n", argv[1], dlerror());
        return 1;
    }
    CHECK(dlsym(RTLD_DEFAULT, "lms_init") == NULL, "RTLD_LOCAL put lms_init in the global scope");
#else
    (void)argc, (void)argv;
    void *init = dlsym(RTLD_DEFAULT, "lms_init");
    if (init == NULL) {
        printf("FAIL: lms_init is not in the global scope: LD_PRELOAD=%s\n",
               getenv("LD_PRELOAD") ? getenv("LD_PRELOAD") : "(unset)");
        return 1;
    }
    lms = dlopen(object_of(init), RTLD_NOW | RTLD_NOLOAD);
#endif
    if (lms == NULL) {
        printf("FAIL: no handle to liblms.so: %s\n", dlerror());
        return 1;
    }
#if !defined(PROBE_LINKED)
    const char *lms_path = object_of(need(lms, "lms_init"));
    f.init = (lms_status_t (*)(void))need(lms, "lms_init");
    f.malloc = (lms_status_t (*)(void **, size_t, lms_stream_t))need(lms, "lms_malloc");
    f.free = (lms_status_t (*)(void *, lms_stream_t))need(lms, "lms_free");
    f.shutdown = (lms_status_t (*)(void))need(lms, "lms_shutdown");
    f.last_error = (const char *(*)(void))need(lms, "lms_last_error");
    if (failures)
        return 1;
#endif
    CHECK(strstr(lms_path, "liblms.so") != NULL, "lms_init is in %s, not liblms.so", lms_path);

    check_malloc_is_glibcs(libc, lms, lms_path);
    check_mallinfo_sees_mallocs();
    check_lms_works(&f);
    check_malloc_is_glibcs(libc, lms, lms_path);
    check_mallinfo_sees_mallocs();

    printf("malloc_probe, %s: checked that the malloc family is %s, that %s, and that "
           "lms_init, lms_malloc and lms_free work: %d checks, %d failed\n",
           mode, sanitized ? "not liblms.so's (sanitized build)" : "glibc's",
           sanitized ? "(not mallinfo2: sanitized build)" : "mallinfo2 sees the program's mallocs",
           checks, failures);
    return failures ? 1 : 0;
}
