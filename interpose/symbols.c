/*
 * interpose/symbols.c — the real functions the hooks call (each hook's
 * name, found with interpose_sym on first use) and the lookups of entry
 * points by name, which answer lms's wrappers (Note [Lookups by name]; the
 * wrappers themselves are interpose.c's, made from hooks.h).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "interpose/internal.h"
/* Programs still call deprecated entry points (cudaGetDriverEntryPoint):
 * the lookups take their wrappers' addresses. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

_Static_assert(sizeof(void *) == sizeof(void (*)(void)),
               "a function pointer travels through void * (dlsym)");

/* ---- the real functions ---------------------------------------------------------- */

static const char *const hook_name[NHOOKS] = {
#define HOOK_NAME(lib, ret, name, by, since, params, args) #name,
    LMS_ALL_HOOKS(HOOK_NAME)
#undef HOOK_NAME
};

void *hook_real_sym[NHOOKS]; /* of each, once found (atomic) */

void *hook_real_find(int i)
{
    void *f = interpose_sym(hook_name[i]);
    __atomic_store_n(&hook_real_sym[i], f, __ATOMIC_RELEASE);
    return f;
}

static bool missing_said[NHOOKS]; /* a call of a missing real function was logged (atomic) */

void hook_missing(int i)
{
    if (!__atomic_exchange_n(&missing_said[i], true, __ATOMIC_RELAXED))
        base_log(BASE_LOG_WARN, "interpose: %s: no library loaded defines it (after liblms.so, "
                 "nor libcuda, libcudart or libnccl loaded locally): its calls fail with "
                 "CUDA's (or NCCL's) not-found error", hook_name[i]);
}

/* The global scope's definition (dlopen(NULL)'s handle searches the global
 * scope only; RTLD_DEFAULT, from here, would find liblms.so's own even when
 * it was loaded locally). */
bool interpose_hooks_live(void)
{
    Dl_info first, mine;
    void *global = dlopen(NULL, RTLD_NOW);
    void *f = global != NULL ? dlsym(global, "cudaLaunchKernel") : NULL;
    if (global != NULL)
        dlclose(global);
    return f != NULL && dladdr(f, &first) != 0 && dladdr((void *)hook_real_find, &mine) != 0 &&
           first.dli_fbase == mine.dli_fbase;
}

/* ---- entry points looked up by name ------------------------------------------------ */

/*
 * Note [Lookups by name]
 * The runtime and libraries such as Triton get driver functions by name
 * (cuGetProcAddress, cudaGetDriverEntryPoint*), which a preload does not
 * reach. Each lookup goes to CUDA first, so whether and in which version a
 * function exists stays CUDA's answer; when CUDA found it and the name is
 * one of the hooks' (by base name, in the version CUDA gives: an entry
 * point with _v2 in its name from the version hooks.h's `since` gives it,
 * the base name's before; the _ptds or _ptsz twin when the per-thread
 * default stream is asked for; wrapper_for), the answer is lms's wrapper
 * instead. The lookup functions are hooked too, so a lookup of
 * cuGetProcAddress itself gets lms's, and so is dlsym on a library's
 * handle (dlsym.c), where the runtime finds cuGetProcAddress.
 */

static const char hook_lib[NHOOKS] = {
#define HOOK_LIB(lib, ret, name, by, since, params, args) #lib[0], /* 'r', 'd' or 'n' */
    LMS_ALL_HOOKS(HOOK_LIB)
#undef HOOK_LIB
};

/* hooks.h's `since`: from which CUDA version a lookup of the base name gives
 * the entry point (0: whatever the version). */
static const int hook_since[NHOOKS] = {
#define HOOK_SINCE(lib, ret, name, by, since, params, args) since,
    LMS_ALL_HOOKS(HOOK_SINCE)
#undef HOOK_SINCE
};

static void *const hook_wrapper[NHOOKS] = {
#define HOOK_ADDRESS(lib, ret, name, by, since, params, args) (void *)name,
    LMS_ALL_HOOKS(HOOK_ADDRESS)
#undef HOOK_ADDRESS
};

static int driver_hook(const char *name)
{
    for (int i = 0; i < NHOOKS; i++)
        if (hook_lib[i] == 'd' && strcmp(hook_name[i], name) == 0)
            return i;
    return -1;
}

/* lms's wrapper for the driver function `symbol` (a base name) in the
 * version CUDA gives for cudaVersion and flags, or NULL: the first hooked
 * of its forms that the version has (hook_since), _v2 before the base
 * name's; the per-thread twins, _ptds for synchronous calls and _ptsz for
 * the others, when flags ask for the per-thread default stream. */
static void *wrapper_for(const char *symbol, int version, uint64_t flags)
{
    char name[96];
    if (symbol == NULL || strlen(symbol) > 80)
        return NULL;
    bool pt = flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
    static const char *const suffix[] = {"_v2_ptds", "_v2_ptsz", "_ptds", "_ptsz", "_v2", ""};
    for (int k = 0; k < 6; k++) {
        if (k < 4 && !pt)
            continue;
        snprintf(name, sizeof name, "%s%s", symbol, suffix[k]);
        int i = driver_hook(name);
        if (i >= 0 && version >= hook_since[i])
            return hook_wrapper[i];
    }
    return NULL;
}

static void swap_in(void **fn, const char *symbol, int version, uint64_t flags)
{
    void *w = fn != NULL && *fn != NULL ? wrapper_for(symbol, version, flags) : NULL;
    if (w != NULL)
        *fn = w;
}

CUresult hook_cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
                                      cuuint64_t flags)
{
    CUresult r = REAL_OR(cuGetProcAddress, (symbol, pfn, cudaVersion, flags), MISSING_drv);
    if (r == CUDA_SUCCESS)
        swap_in(pfn, symbol, cudaVersion, flags);
    return r;
}

CUresult hook_cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                         cuuint64_t flags, CUdriverProcAddressQueryResult *status)
{
    CUresult r = REAL_OR(cuGetProcAddress_v2, (symbol, pfn, cudaVersion, flags, status), MISSING_drv);
    if (r == CUDA_SUCCESS && (status == NULL || *status == CU_GET_PROC_ADDRESS_SUCCESS))
        swap_in(pfn, symbol, cudaVersion, flags);
    return r;
}

/* The version of the runtime the program runs (cudaRuntimeGetVersion),
 * which cudaGetDriverEntryPoint answers for; the headers' if it says none. */
static int runtime_version(void)
{
    static int version;
    int v = __atomic_load_n(&version, __ATOMIC_RELAXED);
    if (v == 0) {
        cudaError_t (*get)(int *) = (cudaError_t(*)(int *))interpose_sym("cudaRuntimeGetVersion");
        if (get == NULL || get(&v) != cudaSuccess || v <= 0)
            v = CUDA_VERSION;
        __atomic_store_n(&version, v, __ATOMIC_RELAXED);
    }
    return v;
}

/* The runtime's answer r for symbol, in the driver's version `version`:
 * lms's wrapper in place of a function it hooks. The _ptsz lookups (a
 * program built for the per-thread default stream) take cudaEnableDefault
 * as the per-thread stream. */
static cudaError_t entry_point(cudaError_t r, const char *symbol, void **funcPtr, int version,
                               unsigned long long flags, bool per_thread,
                               const enum cudaDriverEntryPointQueryResult *status)
{
    if (per_thread && flags == cudaEnableDefault)
        flags = cudaEnablePerThreadDefaultStream;
    if (r == cudaSuccess && (status == NULL || *status == cudaDriverEntryPointSuccess))
        swap_in(funcPtr, symbol, version, flags);
    return r;
}

cudaError_t hook_cudaGetDriverEntryPoint(const char *symbol, void **funcPtr,
                                                unsigned long long flags,
                                                enum cudaDriverEntryPointQueryResult *status)
{
    return entry_point(REAL_OR(cudaGetDriverEntryPoint, (symbol, funcPtr, flags, status), MISSING_rt),
                       symbol, funcPtr, runtime_version(), flags, false, status);
}

cudaError_t hook_cudaGetDriverEntryPoint_ptsz(const char *symbol, void **funcPtr,
                                                     unsigned long long flags,
                                                     enum cudaDriverEntryPointQueryResult *status)
{
    return entry_point(REAL_OR(cudaGetDriverEntryPoint_ptsz, (symbol, funcPtr, flags, status),
                               MISSING_rt),
                       symbol, funcPtr, runtime_version(), flags, true, status);
}

cudaError_t hook_cudaGetDriverEntryPointByVersion(const char *symbol, void **funcPtr,
                                                         unsigned int cudaVersion,
                                                         unsigned long long flags,
                                                         enum cudaDriverEntryPointQueryResult *status)
{
    return entry_point(REAL_OR(cudaGetDriverEntryPointByVersion,
                               (symbol, funcPtr, cudaVersion, flags, status), MISSING_rt),
                       symbol, funcPtr, (int)cudaVersion, flags, false, status);
}

cudaError_t hook_cudaGetDriverEntryPointByVersion_ptsz(
    const char *symbol, void **funcPtr, unsigned int cudaVersion, unsigned long long flags,
    enum cudaDriverEntryPointQueryResult *status)
{
    return entry_point(REAL_OR(cudaGetDriverEntryPointByVersion_ptsz,
                               (symbol, funcPtr, cudaVersion, flags, status), MISSING_rt),
                       symbol, funcPtr, (int)cudaVersion, flags, true, status);
}

void *interpose_dlsym_answer(const char *symbol, void *found)
{
    if (found == NULL || symbol == NULL || base_options()->enable == 0)
        return found;
    for (int i = 0; i < NHOOKS; i++) {
        if (strcmp(hook_name[i], symbol) != 0)
            continue;
        if (hook_real(i) == NULL) { /* a library loaded locally, under a name lms does not know */
            interpose_sym_library(found);
            (void)hook_real(i);
        }
        return hook_real(i) == found ? hook_wrapper[i] : found;
    }
    return found;
}
