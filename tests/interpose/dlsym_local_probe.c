/*
 * tests/interpose/dlsym_local_probe.c — a program that loads a CUDA library
 * with dlopen(RTLD_LOCAL), as Python's ctypes does by default, and asks its
 * handle for hooked names (issue 24, bug 8). It is linked against neither
 * lms nor the library: under LD_PRELOAD=liblms.so,
 *
 *   dlsym_local_probe LIB NAME...            each NAME from LIB's handle is
 *                                            lms's wrapper (what RTLD_DEFAULT
 *                                            finds: the preload's)
 *   dlsym_local_probe --own LIB NAME...      each is LIB's own (LMS_ENABLE=0)
 *
 * Before the fix, a library loaded locally under a name lms did not know
 * (the tests' stand-in; any libcudart but .so, .so.12 and .so.13) answered
 * its own functions: lms had found no definition to compare them with.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    int own = argc > 1 && strcmp(argv[1], "--own") == 0;
    if (argc < 3 + own) {
        fprintf(stderr, "usage: dlsym_local_probe [--own] LIB NAME...\n");
        return 2;
    }
    const char *lib = argv[1 + own];
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        fprintf(stderr, "dlsym_local_probe: %s\n", dlerror());
        return 1;
    }
    int bad = 0;
    for (int i = 2 + own; i < argc; i++) {
        void *got = dlsym(h, argv[i]), *lms = dlsym(RTLD_DEFAULT, argv[i]);
        Dl_info where;
        const char *from = got != NULL && dladdr(got, &where) != 0 ? where.dli_fname : "nowhere";
        int ok = got != NULL && (own ? got != lms : got == lms);
        printf("%s %s: %p from %s (the preload's: %p)\n", ok ? "ok" : "FAILED", argv[i], got, from,
               lms);
        bad += !ok;
    }
    return bad != 0;
}
