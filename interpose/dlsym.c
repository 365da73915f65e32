/*
 * interpose/dlsym.c — liblms.so's dlsym, so that a library that finds CUDA
 * with dlopen and dlsym gets lms's wrappers too (Note [dlsym]).
 *
 * Note [dlsym]
 * A preload reaches calls bound by the dynamic linker. A library that
 * links the CUDA runtime statically (NCCL, most CUDA extensions built
 * with nvcc's defaults) has its runtime open libcuda.so.1 with dlopen and
 * take cuGetProcAddress from it with dlsym, then every other driver
 * function from cuGetProcAddress: none of those calls is bound by the
 * dynamic linker. So dlsym on a library's handle answers lms's wrapper
 * when the name is one of the hooks' and what the library gives is the
 * function that wrapper calls (interpose_dlsym_answer): the runtime gets
 * lms's cuGetProcAddress, and through it lms's allocation, launch and copy
 * entry points (Note [Lookups by name] in symbols.c).
 *
 * A library loaded RTLD_LOCAL (Python's ctypes does so by default) is in
 * no lookup order lms asks, and lms asks libcuda, libcudart and libnccl by
 * their usual names only: under any other name (a stand-in, a renamed or
 * vendored copy) lms had no function to compare found with, and the handle
 * gave the library's own (issue 24). So the first hooked name a handle
 * finds that lms has no definition of makes that library one interpose_sym
 * asks (interpose_sym_library, which holds it loaded), and the answer is
 * lms's wrapper, calling found. Still the library's own: a second copy of a
 * library lms already calls (another libcudart than the first loaded),
 * whose functions differ from the ones lms's wrappers call. The risk taken:
 * a shim loaded locally whose hooked functions call the global definition
 * (lms's wrapper) again would recurse; a CUDA library calls its own.
 *
 * What stays as it was:
 *   - RTLD_DEFAULT and RTLD_NEXT, which depend on who asks: they go to
 *     glibc's dlsym as a tail call, so glibc sees the caller's return
 *     address as its own (this file is built with -O2 whatever the build
 *     type: at -O0 the compiler makes no tail calls). C cannot demand a
 *     tail call (GCC 12 has no musttail), so two tests fail when the
 *     compiler makes a call instead: interpose.dlsym_tail_call finds the
 *     indirect jump in liblms.so's dlsym (tests/interpose/
 *     check_tail_call.sh), and interpose.launch checks that RTLD_NEXT from
 *     the probe still means "after the probe" (both checked failing with
 *     -fno-optimize-sibling-calls, issue 25). Answering RTLD_NEXT without
 *     glibc (the caller's object by dladdr, then the objects after it) was
 *     not taken: glibc searches the caller's loader's scope in its own
 *     order, skips what was loaded RTLD_LOCAL, and applies symbol versions,
 *     none of which dl_iterate_phdr and dlsym per object reproduce;
 *   - lookups made by liblms.so itself (the cuda backend takes the real
 *     cuGetProcAddress_v2 with dlsym);
 *   - everything with LMS_ENABLE=0, and names that are not hooked;
 *   - dlvsym, which no CUDA library uses for CUDA's names.
 * glibc's dlsym is taken from libc.so.6 (glibc 2.34 and later) or
 * libdl.so.2 with dlvsym, which is not interposed.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "interpose/internal.h"

typedef void *(*dlsym_fn)(void *, const char *);

static dlsym_fn glibc_dlsym(void)
{
    static dlsym_fn real;
    dlsym_fn f = __atomic_load_n(&real, __ATOMIC_ACQUIRE);
    if (f != NULL)
        return f;
    static const char *const libs[] = {"libc.so.6", "libdl.so.2"};
    static const char *const versions[] = {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17"};
    for (size_t l = 0; f == NULL && l < sizeof libs / sizeof *libs; l++) {
        void *h = dlopen(libs[l], RTLD_NOW | RTLD_NOLOAD);
        for (size_t v = 0; h != NULL && f == NULL && v < sizeof versions / sizeof *versions; v++)
            f = (dlsym_fn)dlvsym(h, "dlsym", versions[v]);
        if (h != NULL)
            dlclose(h);
    }
    if (f == NULL) {
        static const char msg[] = "lms: glibc's dlsym not found (libc.so.6, libdl.so.2)\n";
        if (write(2, msg, sizeof msg - 1) < 0)
            abort();
        abort();
    }
    __atomic_store_n(&real, f, __ATOMIC_RELEASE);
    return f;
}

/* Whether the code at pc is liblms.so's. */
static bool ours(const void *pc)
{
    static void *base;
    Dl_info mine, theirs;
    void *b = __atomic_load_n(&base, __ATOMIC_RELAXED);
    if (b == NULL && dladdr((void *)ours, &mine) != 0)
        __atomic_store_n(&base, b = mine.dli_fbase, __ATOMIC_RELAXED);
    return dladdr(pc, &theirs) != 0 && theirs.dli_fbase == b;
}

__attribute__((visibility("default"))) void *dlsym(void *restrict handle,
                                                   const char *restrict symbol)
{
    dlsym_fn real = glibc_dlsym();
    if (handle == RTLD_DEFAULT || handle == RTLD_NEXT)
        return real(handle, symbol); /* a tail call: see Note [dlsym] */
    void *found = real(handle, symbol);
    /* names of CUDA's and NCCL's only: other lookups (a Python import's)
     * pay for nothing more */
    if (found == NULL ||
        (strncmp(symbol, "cu", 2) != 0 && strncmp(symbol, "nccl", 4) != 0 &&
         strncmp(symbol, "__cuda", 6) != 0) ||
        ours(__builtin_return_address(0)))
        return found;
    return interpose_dlsym_answer(symbol, found);
}
