/*
 * device/cuda_driver.c — libcuda opened, entry points resolved, driver
 * failures turned into statuses: see cuda_driver.h.
 *
 * State: the driver's two error functions, stored (release) by every
 * successful open with the same values (libcuda stays mapped) and read with
 * acquire, NULL before the first: the only thing shared between opens.
 */
#include "device/cuda_driver.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "base/base.h"

_Static_assert(sizeof(void *) == sizeof(void (*)(void)),
               "a function pointer travels through void * (dlsym, cuGetProcAddress)");

/*
 * Note [Resolving the driver]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * cuGetProcAddress_v2 (CUDA 12.0 and later) is the one symbol taken with
 * dlsym. Every other entry point is asked of it by its base name
 * ("cuMemGetInfo", never "cuMemGetInfo_v2": a caller's list, DRIVER_FUNCS in
 * cuda.c, stringifies the name as written, before cuda.h's #define turns it
 * into the _v2 name) with cudaVersion = CUDA_VERSION, the version of the
 * headers device/ is compiled against. The driver then returns the newest variant at that
 * version, and each field's type must be that variant's prototype. For most
 * names it is the declaration the base name reaches through cuda.h
 * (__typeof__ of it, _v2 where cuda.h #defines the name so). Not for all:
 * CUDA 13.0 added cuCtxSynchronize_v2(CUcontext) without such a #define, so
 * cuda.h's cuCtxSynchronize(void) is the old ABI while "cuCtxSynchronize" at
 * 13000 is the new one; called through the old type, it synchronizes
 * whatever context a stray register names (seen on a card:
 * CUDA_ERROR_CONTEXT_IS_DESTROYED at every close). A file that calls it
 * makes the same #define, and a static assertion against cudaTypedefs.h's
 * PFN typedef keeps it honest (device/kernels/cuda.c does). Every lookup
 * must report CU_GET_PROC_ADDRESS_SUCCESS with a non-NULL pointer.
 *
 * A driver older than CUDA_VERSION cannot honour that (cuGetProcAddress
 * rejects a cudaVersion above its own), so dev_cuda_driver_open first asks
 * it for
 * cuDriverGetVersion, at version 12.0 which every driver with
 * cuGetProcAddress_v2 serves, and refuses an older driver with a message
 * naming both versions.
 *
 * There is no fallback to the v1 cuGetProcAddress, which has no symbolStatus
 * argument: a driver without cuGetProcAddress_v2 is older than CUDA 12.0, so
 * it would refuse CUDA_VERSION (12.0 or later) for every symbol anyway.
 *
 * libcuda is opened RTLD_NODELETE: dlclose balances dlopen, but the library
 * stays mapped, because after cuInit the driver has threads of its own (host
 * functions run on one) and cuInit cannot be undone; unmapping the code under
 * them would crash the process.
 */

static _Atomic(__typeof__(cuGetErrorName) *) error_name;
static _Atomic(__typeof__(cuGetErrorString) *) error_string;

void dev_cuda_error_text(CUresult r, char *buf, size_t len)
{
    __typeof__(cuGetErrorName) *name_fn = atomic_load_explicit(&error_name, memory_order_acquire);
    __typeof__(cuGetErrorString) *text_fn =
        atomic_load_explicit(&error_string, memory_order_acquire);
    const char *name = NULL, *text = NULL;
    if (name_fn == NULL || name_fn(r, &name) != CUDA_SUCCESS)
        name = NULL;
    if (text_fn == NULL || text_fn(r, &text) != CUDA_SUCCESS)
        text = NULL;
    if (name != NULL)
        snprintf(buf, len, "%s (%s)", name, text != NULL ? text : "no description");
    else
        snprintf(buf, len, "CUresult %d", (int)r);
}

static lms_status_t status_of(CUresult r)
{
    switch (r) {
    case CUDA_ERROR_OUT_OF_MEMORY:
        return LMS_ERR_OUT_OF_MEMORY;
    case CUDA_ERROR_INVALID_VALUE:
    case CUDA_ERROR_INVALID_HANDLE:
        return LMS_ERR_INVALID;
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_NOT_INITIALIZED:
    case CUDA_ERROR_DEINITIALIZED:
    case CUDA_ERROR_STUB_LIBRARY:
    /* The driver API's forms of "insufficient driver" (cudart's
     * cudaErrorInsufficientDriver has no CUDA_ERROR_ twin). */
    case CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER:
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
    case CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE:
        return LMS_ERR_NO_DEVICE;
    case CUDA_ERROR_NOT_SUPPORTED:
        return LMS_ERR_UNSUPPORTED;
    default:
        return LMS_ERR_DEVICE;
    }
}

lms_status_t dev_cuda_fail(CUresult r, const char *call, ...)
{
    char what[256], text[192];
    va_list ap;
    va_start(ap, call);
    vsnprintf(what, sizeof what, call, ap);
    va_end(ap);
    dev_cuda_error_text(r, text, sizeof text);
    return base_fail(status_of(r), "%s: %s", what, text);
}

void dev_cuda_log_close(int ordinal, CUresult r, const char *call)
{
    if (r == CUDA_SUCCESS)
        return;
    char text[192];
    dev_cuda_error_text(r, text, sizeof text);
    base_log(r == CUDA_ERROR_DEINITIALIZED ? BASE_LOG_DEBUG : BASE_LOG_WARN,
             "cuda: closing device %d: %s: %s", ordinal, call, text);
}

/* *fn = the entry point `name` at `version`; LMS_ERR_NO_DEVICE if the driver
 * does not have it. */
static lms_status_t resolve(dev_cuda_get_proc_t *get_proc, const char *name, int version, void **fn)
{
    CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    void *p = NULL;
    CUresult r = get_proc(name, &p, version, CU_GET_PROC_ADDRESS_DEFAULT, &found);
    if (r != CUDA_SUCCESS) {
        char text[192];
        dev_cuda_error_text(r, text, sizeof text);
        return base_fail(LMS_ERR_NO_DEVICE, "cuda: cuGetProcAddress(%s, CUDA %d.%d): %s", name,
                         version / 1000, version % 1000 / 10, text);
    }
    if (found != CU_GET_PROC_ADDRESS_SUCCESS || p == NULL)
        return base_fail(LMS_ERR_NO_DEVICE,
                         "cuda: the NVIDIA driver has no %s for CUDA %d.%d (%s); update the driver",
                         name, version / 1000, version % 1000 / 10,
                         found == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                             ? "version not sufficient"
                             : "symbol not found");
    *fn = p;
    return LMS_OK;
}

lms_status_t dev_cuda_resolve(dev_cuda_get_proc_t *get_proc, const dev_cuda_sym_t *syms, size_t n,
                              void *table)
{
    for (size_t i = 0; i < n; i++) {
        void *p = NULL;
        lms_status_t status = resolve(get_proc, syms[i].name, CUDA_VERSION, &p);
        if (status != LMS_OK)
            return status;
        memcpy((char *)table + syms[i].offset, &p, sizeof p);
    }
    return LMS_OK;
}

/* The driver's version, asked for at 12.0, then its error functions: see
 * Note [Resolving the driver]. */
static lms_status_t check_version(dev_cuda_get_proc_t *get_proc)
{
    void *p = NULL;
    lms_status_t status = resolve(get_proc, "cuDriverGetVersion", 12000, &p);
    if (status != LMS_OK)
        return status;
    __typeof__(cuDriverGetVersion) *driver_version;
    memcpy(&driver_version, &p, sizeof driver_version);
    int version = 0;
    CUresult r = driver_version(&version);
    if (r != CUDA_SUCCESS) {
        char text[192];
        dev_cuda_error_text(r, text, sizeof text);
        return base_fail(LMS_ERR_NO_DEVICE, "cuda: cuDriverGetVersion(): %s", text);
    }
    if (version < CUDA_VERSION)
        return base_fail(LMS_ERR_NO_DEVICE,
                         "cuda: the NVIDIA driver supports CUDA %d.%d, but liblms was built "
                         "with CUDA %d.%d headers and needs a driver at least that new",
                         version / 1000, version % 1000 / 10, CUDA_VERSION / 1000,
                         CUDA_VERSION % 1000 / 10);
    struct {
        __typeof__(cuGetErrorName) *cuGetErrorName;
        __typeof__(cuGetErrorString) *cuGetErrorString;
    } errors;
    static const dev_cuda_sym_t error_syms[] = {
        {"cuGetErrorName", offsetof(__typeof__(errors), cuGetErrorName)},
        {"cuGetErrorString", offsetof(__typeof__(errors), cuGetErrorString)},
    };
    status = dev_cuda_resolve(get_proc, error_syms, 2, &errors);
    if (status != LMS_OK)
        return status;
    atomic_store_explicit(&error_name, errors.cuGetErrorName, memory_order_release);
    atomic_store_explicit(&error_string, errors.cuGetErrorString, memory_order_release);
    return LMS_OK;
}

lms_status_t dev_cuda_driver_open(void **libcuda, dev_cuda_get_proc_t **get_proc)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (lib == NULL)
        return base_fail(LMS_ERR_NO_DEVICE,
                         "cuda: cannot load libcuda.so.1 (%s): no NVIDIA driver is installed, "
                         "or it is not on the library path",
                         dlerror());
    lms_status_t status;
    void *sym = dlsym(lib, "cuGetProcAddress_v2");
    if (sym == NULL) {
        status = base_fail(LMS_ERR_NO_DEVICE,
                           "cuda: libcuda.so.1 has no cuGetProcAddress_v2: the NVIDIA driver is "
                           "older than CUDA 12.0, and liblms needs one for CUDA %d.%d or later",
                           CUDA_VERSION / 1000, CUDA_VERSION % 1000 / 10);
        goto fail_close;
    }
    memcpy(get_proc, &sym, sizeof *get_proc);
    status = check_version(*get_proc);
    if (status != LMS_OK)
        goto fail_close;
    *libcuda = lib;
    return LMS_OK;

fail_close:
    dlclose(lib);
    return status;
}
