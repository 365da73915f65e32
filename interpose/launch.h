/*
 * interpose/launch.h — what a kernel launch touches, made resident before the
 * launch goes to CUDA (DESIGN.md: "Where access knowledge comes from", 2).
 *
 * For each function launched, the layout of its parameters comes from the
 * driver once (cuFuncGetParamInfo, or cuKernelGetParamInfo for a CUkernel;
 * a runtime stub is first turned into its CUfunction with
 * cudaGetFuncBySymbol) and is kept for the life of the process, with what
 * the kernel's C++ signature says of each parameter (Note [Access modes
 * from the signature] in launch.c). The launch's parameters are scanned
 * with it (scan.h, and tensormap.h for TMA descriptors), and every
 * allocation a word points into is made resident on the launch's stream
 * (lms_access_pointers_modes, on the stream adopted for it): for reading
 * through a pointer to const, else for reading and writing. Each launch is
 * counted in lms_stats (lms_note_launch).
 */
#ifndef LMS_INTERPOSE_LAUNCH_H
#define LMS_INTERPOSE_LAUNCH_H

#include <stdbool.h>

#include "lms.h"

typedef enum launch_kind {
    LAUNCH_RUNTIME, /* fn is a runtime stub (the host function nvcc made), or a
                       cudaKernel_t as the runtime takes one (cudaLaunchKernel) */
    LAUNCH_KERNEL,  /* fn is a cudaKernel_t, which is a CUkernel (__cudaLaunchKernel) */
    LAUNCH_DRIVER,  /* fn is a CUfunction, or a CUkernel */
} launch_kind_t;

/* Makes resident what a launch of fn on the CUDA stream `stream` with these
 * parameters points to (params: the kernelParams form, else extra: the
 * CU_LAUNCH_PARAM_BUFFER_POINTER form). The range stays resident until the
 * calling thread's next lms call: launch at once. LMS_OK when nothing is
 * lms's; the failure of lms_access_pointers_modes (out of memory: then the
 * launch must not go ahead) or of adopting the stream otherwise.
 * A launch whose layout cannot be learnt is said once per kernel, with its
 * name and the call that failed, and fails (LMS_ERR_UNSUPPORTED) or goes
 * ahead as LMS_UNKNOWN_LAUNCH says. With deferred non-NULL (a runtime
 * launch, which the runtime passes on to the driver's hooked launch), such
 * a launch may instead be left to the driver hook (Note [Runtime launches
 * the driver sees] in launch.c): *deferred is set, and the caller lets the
 * call through with the hooks open. The caller of a runtime launch calls
 * launch_done after CUDA returned, whatever this answered. */
lms_status_t launch_access(launch_kind_t kind, const void *fn, void *stream, void **params,
                           void **extra, bool *deferred);

/* After a runtime launch (deferred non-NULL above) returned from CUDA,
 * `launched` if it succeeded: a deferred one no driver hook claimed ran
 * unseen, and is counted and said. */
void launch_done(bool launched);

/* A launch of `kind` made inside a hooked call, passed straight through
 * (Note [One access per call] in interpose.c): a driver launch inside a
 * runtime one shows that the runtime reaches lms's driver hooks. */
void launch_nested(launch_kind_t kind);

/* A launch of fn through `door`, a deprecated driver call whose parameters
 * are not in it (cuLaunch, cuLaunchGrid, cuLaunchGridAsync: cuParamSet*
 * gave them before; cuLaunchCooperativeKernelMultiDevice): counted as
 * unknown, said once per door (*said, the door's own flag) with the
 * kernel's name, and failed (LMS_ERR_UNSUPPORTED) or let through as
 * LMS_UNKNOWN_LAUNCH says. */
lms_status_t launch_unseeable(const void *fn, const char *door, bool *said);

/* A module or library was unloaded: the functions whose layouts were
 * learnt may be gone, and new ones may come at their addresses, so every
 * layout is asked again at its next launch (Note [Parameter layouts]). */
void launch_forget_layouts(void);

/* Whether ptr lies in lms's reserved range (false while lms cannot start).
 * No lock once lms is up. */
bool interpose_owns(const void *ptr);

/* The lms stream adopted for the program's CUDA stream `native`, from the
 * calling thread's last few (fresh: adopted again, for a handle that turned
 * out stale; see Note [Stream handles] in launch.c). */
lms_status_t interpose_stream(void *native, bool fresh, lms_stream_t *out);

/* lms_malloc and lms_free on the lms stream adopted for the program's
 * `stream`, adopted again if the handle kept for it turned out stale. */
lms_status_t interpose_malloc_on(void **p, size_t size, void *stream);
lms_status_t interpose_free_on(void *p, void *stream);

/* p, of size bytes, pinned if LMS_PIN_SMALLER_THAN says so; if it cannot
 * be, p is freed and the failure returned (Note [Pinned small allocations]
 * in launch.c). interpose_malloc_on does it itself. */
lms_status_t interpose_pin_small(void *p, size_t size);

/* Whether the hooks are what the program calls: liblms.so's cudaLaunchKernel
 * is the process's first definition (preloaded, or linked ahead of CUDA),
 * not one loaded locally, as a plugin, behind CUDA's (interpose.c). */
bool interpose_hooks_live(void);

/* name from the CUDA library that defines it: the process's next definition
 * after liblms.so, else that of a CUDA library loaded locally (libcuda,
 * libcudart, libnccl by name, or one interpose_sym_library added). NULL if
 * none. */
void *interpose_sym(const char *name);

/* Adds the library that defines found (a hooked name a dlsym on a handle
 * found, with no definition interpose_sym knew) to those interpose_sym asks
 * (Note [dlsym] in dlsym.c). */
void interpose_sym_library(void *found);

/* What dlsym answers for symbol, which a library's handle gave as found:
 * lms's wrapper when symbol is hooked, lms is enabled, and found is the
 * function that wrapper calls (or the first definition of the name lms
 * meets); found otherwise (interpose.c; Note [dlsym] in dlsym.c). */
void *interpose_dlsym_answer(const char *symbol, void *found);

#endif /* LMS_INTERPOSE_LAUNCH_H */
