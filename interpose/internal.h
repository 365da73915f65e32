/*
 * interpose/internal.h — what the files of interpose/ share: the one header
 * private to the folder (DESIGN.md: interpose/). Nothing outside interpose/
 * includes it but the tests built from its sources.
 *
 * The files, and who calls what:
 *   interpose.c  the exported wrappers (made from hooks.h) and the hooks lms
 *                answers: allocation, stream destroys, launches, tensor maps,
 *                NCCL groups, graphs
 *   symbols.c    the real functions (dlsym(RTLD_NEXT)) and the lookups of
 *                entry points by name (cuGetProcAddress, dlsym's answer)
 *   dlsym.c      liblms.so's dlsym
 *   launch.c     what a launch touches; lms's start, its range and the
 *                streams adopted for the program's, as the hooks see them;
 *                the CUDA libraries the real functions come from
 *   access.c     what copies and memsets touch (access.h)
 *   nccl.c       what NCCL's collectives and groups touch
 *   graph.c      graph capture; tensormap.c TMA descriptors; trace.c
 *                LMS_TRACE_ACCESSES; torch.c lms_torch.h
 * Headers apart from this one, each a contract of its own: hooks.h (the
 * list of entry points, which tests/alloc/check_exports.sh reads too),
 * access.h (the access_ functions, which tests/fuzz/fuzz_access.c calls),
 * scan.h and signature.h (pure, with unit tests of their own), nccl_abi.h
 * (NCCL's types, which the probes use too).
 */
#ifndef LMS_INTERPOSE_INTERNAL_H
#define LMS_INTERPOSE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "lms.h"
#include "interpose/access.h"
#include "interpose/hooks.h"
#include "interpose/scan.h"

/* ---- the hooks and the real functions (interpose.c, symbols.c) ------------------ */

#define LMS_HOOK_EXPORT __attribute__((visibility("default")))

/* Every hooked name declared (again: a declaration that differs from the
 * header's fails to compile), the _ptsz twins among them. */
#define HOOK_DECLARE(lib, ret, name, by, since, params, args) LMS_HOOK_EXPORT ret name params;
LMS_ALL_HOOKS(HOOK_DECLARE)
#undef HOOK_DECLARE

enum {
#define HOOK_INDEX(lib, ret, name, by, since, params, args) HOOK_##name,
    LMS_ALL_HOOKS(HOOK_INDEX)
#undef HOOK_INDEX
    NHOOKS
};

/* The real function i: the next definition of its name after liblms.so
 * (interpose_sym), found on first use; NULL if there is none. Loaded with
 * one acquire load once found (the launch hooks pay that, no call). */
extern void *hook_real_sym[NHOOKS];
void *hook_real_find(int i);
static inline void *hook_real(int i)
{
    void *f = __atomic_load_n(&hook_real_sym[i], __ATOMIC_ACQUIRE);
    return f != NULL ? f : hook_real_find(i);
}

/* A call of hook i found no real function: said once in the log. */
void hook_missing(int i);

/* What a missing real function returns: the lookup's own failure. */
#define MISSING_rt cudaErrorSymbolNotFound
#define MISSING_drv CUDA_ERROR_NOT_FOUND
#define MISSING_nccl ncclInternalError
#define MISSING(i, missing) (hook_missing(i), (missing))

#define REAL(name) ((__typeof__(&name))hook_real(HOOK_##name))
/* The real call, or `missing` (said once) when CUDA or NCCL has no such function. */
#define REAL_OR(name, args, missing)                                                         \
    (REAL(name) != NULL ? REAL(name) args : MISSING(HOOK_##name, missing))

/* The lookups by name, answered in symbols.c (Note [Lookups by name]). */
#define HOOK_LOOKUP_DECLARE(lib, ret, name, by, since, params, args) ret hook_##by params;
LMS_LOOKUP_HOOKS(HOOK_LOOKUP_DECLARE)
#undef HOOK_LOOKUP_DECLARE

/* Whether the hooks are what the program calls: liblms.so's cudaLaunchKernel
 * is the process's first definition (preloaded, or linked ahead of CUDA),
 * not one loaded locally, as a plugin, behind CUDA's (symbols.c). */
bool interpose_hooks_live(void);

/* name from the CUDA library that defines it: the process's next definition
 * after liblms.so, else that of a CUDA library loaded locally (libcuda,
 * libcudart, libnccl by name, or one interpose_sym_library added). NULL if
 * none (launch.c). */
void *interpose_sym(const char *name);

/* Adds the library that defines found (a hooked name a dlsym on a handle
 * found, with no definition interpose_sym knew) to those interpose_sym asks
 * (Note [dlsym] in dlsym.c). */
void interpose_sym_library(void *found);

/* What dlsym answers for symbol, which a library's handle gave as found:
 * lms's wrapper when symbol is hooked, lms is enabled, and found is the
 * function that wrapper calls (or the first definition of the name lms
 * meets); found otherwise (symbols.c; Note [dlsym] in dlsym.c). */
void *interpose_dlsym_answer(const char *symbol, void *found);

/* ---- lms's start and the streams, as the hooks see them (launch.c) ------------- */

/* LMS_OK once lms has started (from the options, if it had not); else the
 * failure of its first start, remembered with its message, which
 * lms_last_error then gives (Note [A failed start] in launch.c). After the
 * start, one load. */
lms_status_t interpose_start(void);

/* The configuration changed (torch.c: lms_set_device_fraction or
 * lms_forbid_swapping took): a remembered failure to start is forgotten,
 * and the next call that needs lms tries again. */
void interpose_start_again(void);

/* Whether ptr lies in lms's reserved range (false while lms cannot start:
 * tried once, Note [A failed start]). No lock once lms is up. */
bool interpose_owns(const void *ptr);

/* LMS_ERR_UNSUPPORTED, with lms's message, in a child forked after lms
 * started (Note [Frees in a forked child] in launch.c); else LMS_OK. */
lms_status_t interpose_refused_in_child(void);

/* The lms stream adopted for the program's CUDA stream `native`, from the
 * calling thread's last few (fresh: adopted again, for a handle that turned
 * out stale; Note [Stream handles] in launch.c). */
lms_status_t interpose_stream(void *native, bool fresh, lms_stream_t *out);

/* call(s, args), an lms call that names the lms stream s, on the stream
 * adopted for `native`; when it answers LMS_ERR_INVALID, again once with
 * native adopted afresh, since the handle kept for it may be stale (Note
 * [Stream handles]). The one place stale handles are recovered from. */
typedef lms_status_t (*interpose_stream_call_t)(lms_stream_t s, void *args);
lms_status_t interpose_on_stream(void *native, interpose_stream_call_t call, void *args);

/* lms_malloc and lms_free on the lms stream adopted for the program's
 * `stream` (interpose_on_stream). */
lms_status_t interpose_malloc_on(void **p, size_t size, void *stream);
lms_status_t interpose_free_on(void *p, void *stream);

/* p, of size bytes, pinned if LMS_PIN_SMALLER_THAN says so; if it cannot
 * be, p is freed and the failure returned (Note [Pinned small allocations]
 * in launch.c). interpose_malloc_on does it itself. */
lms_status_t interpose_pin_small(void *p, size_t size);

/* ---- launches (launch.c) ---------------------------------------------------------- */

/*
 * What a kernel launch touches, made resident before the launch goes to
 * CUDA (DESIGN.md: "Where access knowledge comes from", 2). For each
 * function launched, the layout of its parameters comes from the driver
 * once (cuFuncGetParamInfo, or cuKernelGetParamInfo for a CUkernel; a
 * runtime stub is first turned into its CUfunction with
 * cudaGetFuncBySymbol) and is kept for the life of the process, with what
 * the kernel's C++ signature says of each parameter (Note [Access modes
 * from the signature] in launch.c). The launch's parameters are scanned
 * with it (scan.h, and tensormap_scan for TMA descriptors), and every
 * allocation a word points into is made resident on the launch's stream
 * (lms_access_pointers_modes, on the stream adopted for it): for reading
 * through a pointer to const, else for reading and writing. Each launch is
 * counted in lms_stats (lms_note_launch).
 */
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

/* ---- the ranges of one call, or of one NCCL group (access.c) ------------------- */

#define ACCESS_UNKNOWN SIZE_MAX /* an extent that cannot be known: the whole allocation */
#define ACCESS_INLINE_RANGES 4

typedef struct touches {
    lms_range_t *r; /* inline_r, or on the heap once more are needed */
    size_t n, cap;
    bool whole;     /* some extent is unknown: whole allocations (Note [Copy and memset ranges]) */
    bool no_memory; /* a range could not be kept */
    lms_range_t inline_r[ACCESS_INLINE_RANGES];
} touches_t;

#define TOUCHES(t) touches_t t = {.r = t.inline_r, .cap = ACCESS_INLINE_RANGES}

/* Notes that the call touches [ptr, ptr + bytes) (bytes may be
 * ACCESS_UNKNOWN), if that is lms's memory. */
void access_touch(touches_t *t, const void *ptr, size_t bytes, lms_access_mode_t mode);

/* Makes t's ranges resident on the lms stream adopted for `stream` (or pins
 * them for the graph being captured on it), written to LMS_TRACE_ACCESSES's
 * trace first. */
lms_status_t access_run(touches_t *t, void *stream);

/* Forgets t's ranges (and gives back their memory). */
void access_clear(touches_t *t);

/* NCCL groups (Note [NCCL groups] in nccl.c): the calling thread's
 * ncclGroupStart succeeded; its ncclGroupEnd is about to be called (makes
 * what the group's calls touch resident when it ends the outermost group;
 * on failure the group is as it was); that ncclGroupEnd returned. */
void access_group_started(void);
lms_status_t access_group_ending(void);
void access_group_ended(void);

/* ---- CUDA graph capture (graph.c) ------------------------------------------------ */

/*
 * What a captured call touches is pinned for the life of the graphs made
 * from the capture (Note [Graph capture] in graph.c). The hooks in
 * interpose.c call these around CUDA's capture, instantiate, clone and
 * destroy calls; the launch and access hooks ask graph_capturing first and,
 * for a stream being captured, pin with graph_pin_pointers instead of
 * making the memory resident on the stream.
 */

/* Whether the CUDA stream `stream` is being captured now. False at once,
 * with no driver call, while no capture is in progress in the process. */
bool graph_capturing(void *stream);

/* Pins the whole lms allocation that each of ptrs[0..n) points into (others
 * are skipped) for the graph being captured on `stream`, and waits until
 * they are resident; nothing is queued on the stream. */
lms_status_t graph_pin_pointers(void *stream, const void *const *ptrs, size_t n);

/* Before CUDA begins a capture on `stream`: lms lets go of the stream
 * (waiting for its queued work), so that it records nothing on it while it
 * is captured. Then graph_capture_begun with whether CUDA began it. */
lms_status_t graph_capture_beginning(void *stream);
void graph_capture_begun(bool began);

/* Before `stream` waits for an event, which joins it to a capture if the
 * event was recorded in one: while a capture is in progress, lms lets go
 * of the stream unless it is captured already. One load otherwise. */
lms_status_t graph_stream_waiting(void *stream);

/* Before CUDA ends the capture on `stream`: its id, false if the stream is
 * not being captured. After: graph_capture_ended with that id and the
 * graph made (NULL if none was): the capture's pins pass to the graph, or
 * are dropped. */
bool graph_capture_id(void *stream, uint64_t *id);
void graph_capture_ended(void *stream, uint64_t id, void *graph);

/* After CUDA made exec from graph, or clone from original: the new one
 * holds the graph's pins too. */
void graph_instantiated(void *graph, void *exec);
void graph_cloned(void *original, void *clone);

/* After CUDA destroyed a graph or an executable graph: the last holder of
 * a capture's pins drops them (after the device's work, when an executable
 * graph held them: it may still be running). */
void graph_destroyed(void *graph);
void graph_exec_destroyed(void *exec);

/* Before the allocation at ptr is freed: no graph will unpin it (its pins
 * go with its memory). No lock while no graph holds pins. */
void graph_forget(const void *ptr);

/* ---- TMA descriptors (tensormap.c) ----------------------------------------------- */

/*
 * CUtensorMap: 128 opaque bytes that cuTensorMapEncodeTiled and its
 * siblings write, and Hopper's bf16, fp16 and TF32 GEMMs take as kernel
 * parameters. The tensor address each one the program encoded describes is
 * kept, so that a launch whose parameters hold one makes that tensor
 * resident (Note [Tensor maps] in tensormap.c).
 */
#define TENSORMAP_BYTES 128 /* sizeof(CUtensorMap) */
#define TENSORMAP_ALIGN 64  /* where one may sit in a parameter buffer: CUtensorMap is
                               aligned to 64 (128 since CUDA 13's cuda.h) */

/* The descriptor now at map (TENSORMAP_BYTES, as CUDA just wrote it)
 * addresses lms's memory at address. Thread-safe. */
void tensormap_learn(const void *map, uintptr_t address);

/* Whether any descriptor was learnt (one load: launches pay nothing more
 * until one is). */
bool tensormap_any(void);

/* Adds the address of every learnt descriptor among the parameters (the
 * kernelParams form, laid out as layout: each TENSORMAP_BYTES at a multiple
 * of TENSORMAP_ALIGN of the parameter buffer inside a parameter) to
 * out[found...] and its parameter's index to param_of (unless NULL), at
 * most max kept, and returns the new count of all found (more than max:
 * out holds the first max), as scan_params does. */
size_t tensormap_scan(void *const *values, const scan_param_t *layout, size_t n, uintptr_t *out,
                      uint32_t *param_of, size_t max, size_t found);

/* The same over one parameter buffer of `size` bytes (the `extra` form). */
size_t tensormap_scan_buffer(const void *buf, size_t size, uintptr_t *out, size_t max,
                             size_t found);

/* ---- LMS_TRACE_ACCESSES (trace.c) ------------------------------------------------- */

/*
 * The interposer's allocations, frees and accesses written as a trace for
 * bench/simulate (Note [Access trace] in trace.c). Each call does nothing,
 * after one check, when the option is not set.
 */

/* Whether a trace is being written (the file is opened on the first call). */
bool trace_on(void);

/* An allocation the hooks made, and its free (before lms frees it). */
void trace_alloc(const void *ptr, size_t size);
void trace_free(const void *ptr);

/* One call's accesses: ranges with their modes, or pointers into
 * allocations with theirs (a launch; modes NULL: all written). */
void trace_access(const lms_range_t *r, size_t n);
void trace_access_pointers(const void *const *ptrs, const lms_access_mode_t *modes, size_t n);

#endif /* LMS_INTERPOSE_INTERNAL_H */
