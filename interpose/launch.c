/*
 * interpose/launch.c — what a kernel launch touches, made resident before
 * the launch goes to CUDA; lms's start, its range and the streams adopted
 * for the program's, as the hooks see them; the CUDA libraries the real
 * functions come from (internal.h).
 *
 * Note [Parameter layouts]
 * A launch passes its parameters as an array of pointers to each value
 * (kernelParams), whose length the launch does not say, or as one buffer
 * (extra). Only the driver knows how many parameters a function has and
 * where each sits: cuFuncGetParamInfo(f, i) answers for i = 0, 1, ... until
 * CUDA_ERROR_INVALID_VALUE (CUDA 12.4 and later drivers). A CUkernel (what
 * cuLibraryGetKernel gives, what nvcc 13's <<<>>> launches as a
 * cudaKernel_t, and what the runtime takes for a function it does not
 * know) may stand for a CUfunction in cuLaunchKernel; the driver answers
 * for it through cuKernelGetParamInfo. cuda.h does not say what
 * cuFuncGetParamInfo answers for a CUkernel, and "no parameters"
 * (CUDA_ERROR_INVALID_VALUE at index 0) would make nothing resident: so a
 * handle is asked as what it most likely is, and, if that failed or said
 * "none", as the other; the first answer with parameters wins, and "none"
 * is believed only of a handle whose type is certain (ask_layout). Layouts
 * are asked once per function and kept in a table that launches read
 * without a lock (entries are written under `table_lock` and published with
 * a release store). A function lives as long as its module; after any
 * module or library is unloaded (launch_forget_layouts), another function
 * may come at a gone one's address, so every layout is asked again at its
 * next launch and takes its old one's slot. Nothing is freed: another
 * thread may still be reading the old one (a leak of one layout per kernel
 * per unload).
 * A function whose layout the driver does not give (a driver older than
 * 12.4, or a handle it does not know) keeps its name and the calls that
 * failed for the log; what its launches do is LMS_UNKNOWN_LAUNCH's
 * (unknown_launch), after a runtime launch's chance to be seen by the
 * driver hook (Note [Runtime launches the driver sees]).
 *
 * Note [Stream handles]
 * A launch names a CUDA stream; lms_access_pointers_modes wants the lms stream
 * adopted for it. Each thread keeps the last few pairs. A pair goes stale
 * when the stream is unadopted (cudaStreamDestroy): its handle's generation
 * no longer matches, the lms call that names it says LMS_ERR_INVALID, and
 * the stream is adopted again and the call made once more. One function
 * does that for every lms call the hooks make on a stream
 * (interpose_on_stream); lms has no status of its own for a stale handle,
 * so a call that was invalid for another reason is made twice, and fails
 * the same way twice. (A handle could only name another stream after
 * lms_shutdown and a new init, which the interposer never does.)
 *
 * Note [A failed start]
 * lms starts at the first hooked call that needs it: an allocation, a
 * memory info, or a launch, copy or memset, which asks for lms's range to
 * tell its pointers from others (interpose_start). Where it cannot start
 * (no device, LMS_DEVICE_LIMIT under one chunk, LMS_HOST_LIMIT above the
 * machine's memory), each of those calls would try again, each try opening
 * the device and failing the same way: every launch and copy of a program
 * that runs on without lms paid for a whole start. So the first failure is
 * kept, status and message, and interpose_start gives it from then on:
 * allocations and memory info fail with it, lms_last_error gives its
 * message, and launches, copies and memsets, which then find no pointer
 * of lms's, go on to CUDA (docs/interposer.md: "Safety"). A failure is forgotten where
 * a start could then go otherwise: in a forked child, which starts afresh
 * (the fork handlers hold the start lock across the fork), and after the
 * PyTorch entry points change the configuration (interpose_start_again).
 * tests/interpose/start_probe.c counts the tries: one.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "base/base.h"
#include "base/lockorder.h"
#include "interpose/internal.h"
#include "interpose/signature.h"

#define TABLE_SIZE 16384  /* functions whose layout is kept; a power of two */
#define MAX_PARAMS 4096   /* asked of the driver per function, at most */
#define STACK_HITS 64     /* pointers found per launch without a heap buffer */
#define NAME_LEN 160      /* of a kernel's name, and of one call's failure, kept for messages */
#define WHY_LEN (3 * NAME_LEN + 8)

typedef struct layout {
    launch_kind_t kind;
    const void *fn;
    bool known;        /* the driver gave the layout */
    bool said;         /* an unknown layout's launch was logged (atomic) */
    uint64_t unloads;  /* `unloads` when it was asked: older ones are asked again */
    size_t n;
    bool *read_only;   /* per parameter: a pointer to const (Note [Access modes
                          from the signature]); in the same allocation */
    char name[NAME_LEN]; /* the kernel's, as the driver (or the loader) gives it */
    char why[WHY_LEN];   /* for an unknown layout: which calls failed, and how */
    scan_param_t p[];
} layout_t;

static layout_t *table[TABLE_SIZE]; /* open addressing; read with acquire loads */
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t unloads; /* module and library unloads so far (launch_forget_layouts) */
static bool table_full_said;

/* ---- the driver's and the runtime's answers ---------------------------------- */

/* The libraries whose functions the hooks pass calls on to (hooks.h: libcuda,
 * libcudart, libnccl), asked in this order when the process's lookup order
 * has no definition after liblms.so: a library loaded RTLD_LOCAL (as
 * libtorch_cuda loads NCCL, and the runtime libcuda) is in none. */
static const char *const cuda_libs[] = {"libcuda.so.1",    "libcudart.so.13", "libcudart.so.12",
                                        "libcudart.so",    "libnccl.so.2",    "libnccl.so"};

/* Whether f is liblms.so's own (a library's handle also finds what its
 * dependencies define, and one may depend on liblms.so). */
static bool ours(const void *f)
{
    Dl_info mine, theirs;
    return dladdr((void *)ours, &mine) != 0 && dladdr(f, &theirs) != 0 &&
           mine.dli_fbase == theirs.dli_fbase;
}

/* Libraries a lookup on a handle found hooked names in that nothing else
 * defined (interpose_sym_library): each held loaded by a handle of lms's. */
#define MAX_FOUND_LIBS 16
static void *found_libs[MAX_FOUND_LIBS];
static size_t nfound_libs; /* read with acquire loads; written under found_lock */
static pthread_mutex_t found_lock = PTHREAD_MUTEX_INITIALIZER;

static void *sym_in(void *lib, const char *name)
{
    void *f = dlsym(lib, name);
    return f != NULL && !ours(f) ? f : NULL;
}

void *interpose_sym(const char *name)
{
    void *f = dlsym(RTLD_NEXT, name);
    for (size_t k = 0; f == NULL && k < sizeof cuda_libs / sizeof *cuda_libs; k++) {
        void *lib = dlopen(cuda_libs[k], RTLD_NOW | RTLD_NOLOAD);
        if (lib != NULL) {
            f = sym_in(lib, name);
            dlclose(lib); /* whoever loaded it holds it loaded */
        }
    }
    size_t n = __atomic_load_n(&nfound_libs, __ATOMIC_ACQUIRE);
    for (size_t k = 0; f == NULL && k < n; k++)
        f = sym_in(found_libs[k], name);
    return f;
}

void interpose_sym_library(void *found)
{
    Dl_info info;
    if (dladdr(found, &info) == 0 || info.dli_fname == NULL || ours(found))
        return;
    void *lib = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD); /* a reference of lms's */
    if (lib == NULL)
        return;
    lo_lock(&found_lock, LO_LAUNCH_LIBS);
    bool known = false;
    for (size_t k = 0; k < nfound_libs && !known; k++)
        known = found_libs[k] == lib;
    if (!known && nfound_libs < MAX_FOUND_LIBS) {
        found_libs[nfound_libs] = lib;
        __atomic_store_n(&nfound_libs, nfound_libs + 1, __ATOMIC_RELEASE);
        lib = NULL; /* kept */
    }
    lo_unlock(&found_lock, LO_LAUNCH_LIBS);
    if (lib != NULL)
        dlclose(lib);
}

typedef CUresult (*param_info_t)(void *fn, size_t i, size_t *offset, size_t *size);
typedef CUresult (*get_name_t)(const char **name, void *fn);

/* CUDA's name of r ("CUDA_ERROR_NOT_SUPPORTED"), or its number, into buf. */
static const char *cu_error(CUresult r, char *buf, size_t len)
{
    const char *s = NULL;
    CUresult (*name)(CUresult, const char **) =
        (CUresult(*)(CUresult, const char **))interpose_sym("cuGetErrorName");
    if (name != NULL && name(r, &s) == CUDA_SUCCESS && s != NULL)
        snprintf(buf, len, "%s", s);
    else
        snprintf(buf, len, "CUresult %d", (int)r);
    return buf;
}

/* How one driver call answered for a function's parameters: it could not
 * tell, the handle is not of the type it takes (CUDA_ERROR_INVALID_HANDLE),
 * or it has none, or some. */
typedef enum { PARAMS_FAILED, PARAMS_OTHER_TYPE, PARAMS_NONE, PARAMS_SOME } params_answer_t;

/* Asks `ask` (cuFuncGetParamInfo or cuKernelGetParamInfo, named `what`) for
 * the layout of h into p and *n: CUDA_ERROR_INVALID_VALUE past the last
 * parameter, so at index 0 "none". A failure says why into why. */
static params_answer_t ask_params(const char *what, void *h, scan_param_t *p, size_t *n,
                                  char *why)
{
    param_info_t ask = (param_info_t)interpose_sym(what);
    if (ask == NULL) {
        snprintf(why, NAME_LEN, "%s is not in this driver (CUDA 12.4 and later have it)", what);
        return PARAMS_FAILED;
    }
    size_t i = 0;
    CUresult r = CUDA_SUCCESS;
    while (i < MAX_PARAMS && (r = ask(h, i, &p[i].offset, &p[i].size)) == CUDA_SUCCESS)
        i++;
    if (r == CUDA_SUCCESS) { /* not all of them: a partial layout would miss pointers */
        snprintf(why, NAME_LEN, "%s: more than %d parameters", what, MAX_PARAMS);
        return PARAMS_FAILED;
    }
    if (r != CUDA_ERROR_INVALID_VALUE) {
        char e[64];
        snprintf(why, NAME_LEN, "%s: %s", what, cu_error(r, e, sizeof e));
        return i == 0 && r == CUDA_ERROR_INVALID_HANDLE ? PARAMS_OTHER_TYPE : PARAMS_FAILED;
    }
    *n = i;
    return i > 0 ? PARAMS_SOME : PARAMS_NONE;
}

/* The name the driver gives h (`what`: cuFuncGetName or cuKernelGetName)
 * into name; false if none. */
static bool ask_name(const char *what, void *h, char *name)
{
    get_name_t get = (get_name_t)interpose_sym(what);
    const char *s = NULL;
    if (get == NULL || get(&s, h) != CUDA_SUCCESS || s == NULL)
        return false;
    snprintf(name, NAME_LEN, "%s", s);
    return true;
}

/* One way to ask the driver for a function's layout: a handle, asked as a
 * CUkernel (cuKernelGetParamInfo) or a CUfunction (cuFuncGetParamInfo), and
 * whether the handle is known to be that (then "no parameters" is believed). */
typedef struct asking {
    void *h;
    bool kernel;
    bool certain;
} asking_t;

/*
 * Note [The program's last error]
 * libcudart records the error of every runtime call that fails as the
 * calling thread's last error, which cudaGetLastError returns (and resets)
 * and cudaPeekAtLastError shows; frameworks read it after each launch
 * (PyTorch's C10_CUDA_KERNEL_LAUNCH_CHECK). So a runtime call lms makes
 * inside a hook and which may fail must leave it as it was: asking
 * cudaGetFuncBySymbol about the cudaKernel_t of nvcc 13's <<<>>> (not a
 * stub) left cudaErrorInvalidDeviceFunction there, and every launch of
 * PyTorch under the preload failed with "invalid device function" although
 * the kernel ran (an H200, CUDA 13.0, 2026-11-26). The driver's calls keep
 * no such state.
 */

/* cudaGetFuncBySymbol, leaving the thread's last error as it was (Note [The
 * program's last error]): asked only while none is pending, and its own
 * error read back out. */
static cudaError_t func_by_symbol(cudaFunction_t *out, const void *stub)
{
    cudaError_t (*by_symbol)(cudaFunction_t *, const void *) =
        (cudaError_t(*)(cudaFunction_t *, const void *))interpose_sym("cudaGetFuncBySymbol");
    cudaError_t (*peek)(void) = (cudaError_t(*)(void))interpose_sym("cudaPeekAtLastError");
    cudaError_t (*get_last)(void) = (cudaError_t(*)(void))interpose_sym("cudaGetLastError");
    if (by_symbol == NULL || peek == NULL || get_last == NULL)
        return cudaErrorSymbolNotFound;
    if (peek() != cudaSuccess) /* the program's, unread: ours would replace it */
        return cudaErrorNotReady;
    cudaError_t e = by_symbol(out, stub);
    if (e != cudaSuccess)
        (void)get_last();
    return e;
}

/* fn's layout into l->p, l->n, l->known (else l->why), and its name into
 * l->name. See Note [Parameter layouts]. A runtime launch's fn is a stub,
 * whose CUfunction cudaGetFuncBySymbol gives (certain), or else a
 * cudaKernel_t: asked as a CUkernel, whose "no parameters" is believed only
 * once cuKernelGetFunction has shown it is one (a stub the runtime does not
 * know would be misread). A driver launch's fn is a CUfunction or a
 * CUkernel: asked as both, parameters from either are believed, and "none"
 * from one when the other says none too or that the handle is not its type
 * (not when it cannot tell: a driver that cannot answer for CUfunctions
 * may misread one as a CUkernel). At most MAX_PARAMS parameters. */
static void ask_layout(layout_t *l)
{
    void *f = (void *)l->fn;
    asking_t ask[2];
    int n = 0;
    char why[3][NAME_LEN] = {"", "", ""};
    if (l->kind == LAUNCH_DRIVER) {
        ask[n++] = (asking_t){f, false, false};
        ask[n++] = (asking_t){f, true, false};
    } else {
        CUresult (*get_fn)(CUfunction *, CUkernel) =
            (CUresult(*)(CUfunction *, CUkernel))interpose_sym("cuKernelGetFunction");
        cudaFunction_t cf;
        CUfunction kf;
        /* __cudaLaunchKernel's fn is a cudaKernel_t, never a stub: not asked */
        cudaError_t e = l->kind == LAUNCH_KERNEL ? cudaErrorInvalidDeviceFunction
                                                 : func_by_symbol(&cf, l->fn);
        if (e == cudaSuccess) {
            ask[n++] = (asking_t){(void *)cf, false, true};
        } else {
            if (l->kind != LAUNCH_KERNEL)
                snprintf(why[2], sizeof why[2], "cudaGetFuncBySymbol: cudaError_t %d", (int)e);
            ask[n++] = (asking_t){f, true, false};
            if (get_fn != NULL && get_fn(&kf, (CUkernel)f) == CUDA_SUCCESS)
                ask[n++] = (asking_t){(void *)kf, false, true};
        }
    }
    bool none = false, undecided = false;
    for (int a = 0; a < n && !l->known; a++) {
        size_t m = 0;
        params_answer_t got =
            ask_params(ask[a].kernel ? "cuKernelGetParamInfo" : "cuFuncGetParamInfo", ask[a].h, l->p,
                       &m, why[a]);
        if (got == PARAMS_SOME || (got == PARAMS_NONE && ask[a].certain)) {
            l->known = true;
            l->n = m;
        }
        if (got == PARAMS_NONE && !ask[a].certain)
            snprintf(why[a], sizeof why[a], "%s: no parameters, of a handle that may not be a %s",
                     ask[a].kernel ? "cuKernelGetParamInfo" : "cuFuncGetParamInfo",
                     ask[a].kernel ? "CUkernel" : "CUfunction");
        none |= got == PARAMS_NONE;
        undecided |= got == PARAMS_FAILED;
    }
    if (!l->known && none && !undecided && l->kind == LAUNCH_DRIVER) /* no parameters either way */
        l->known = true, l->n = 0;
    if (!l->known)
        snprintf(l->why, sizeof l->why, "%s%s%s%s%s", why[2], why[2][0] && why[0][0] ? "; " : "",
                 why[0], why[0][0] && why[1][0] ? "; " : "", why[1]);
    for (int a = n - 1; a >= 0; a--) /* the certain handle last: its name wins */
        if (ask[a].certain || l->name[0] == '\0')
            (void)ask_name(ask[a].kernel ? "cuKernelGetName" : "cuFuncGetName", ask[a].h, l->name);
    Dl_info d;
    if (l->name[0] == '\0' && l->kind != LAUNCH_DRIVER && dladdr(l->fn, &d) != 0 &&
        d.dli_sname != NULL && d.dli_saddr == l->fn)
        snprintf(l->name, sizeof l->name, "%s", d.dli_sname);
    if (l->name[0] == '\0')
        snprintf(l->name, sizeof l->name, "%p", l->fn);
}

/*
 * Note [Access modes from the signature]
 * A pointer parameter declared const (`const float *x`) is one a kernel reads
 * through and does not write: the allocation it points to is made resident
 * for reading (LMS_READ), which keeps a host copy it was fetched from current,
 * so that evicting it later is a drop, not a copy. The driver says nothing
 * of a parameter but its offset and size; the kernel's name says more when it
 * is C++: the driver gives the mangled name (cuFuncGetName), and the C++
 * runtime already in the process (libstdc++'s __cxa_demangle: every
 * nvcc-built program and PyTorch have it; lms does not load it) turns it
 * into a signature that signature.h reads. Everything else is read and
 * written (LMS_WRITE): pointers in structs passed by value (PyTorch's
 * TensorIterator kernels carry all theirs so), pointers to non-const,
 * kernels declared extern "C", tensor maps, a signature whose parameter
 * count is not the driver's, and a parameter of another size than a
 * pointer's. A kernel that casts const away and writes through such a
 * pointer breaks its own declaration; lms would then drop what it wrote
 * when it evicts the chunk unchanged since its last copy out. An
 * allocation that two parameters name, one const and one not, is written.
 */
static void learn_read_only(layout_t *l)
{
    for (size_t i = 0; i < l->n; i++)
        l->read_only[i] = false;
    if (l->n == 0 || strncmp(l->name, "_Z", 2) != 0)
        return;
    char *(*demangle)(const char *, char *, size_t *, int *) =
        (char *(*)(const char *, char *, size_t *, int *))dlsym(RTLD_DEFAULT, "__cxa_demangle");
    int status = -1;
    char *sig = demangle != NULL ? demangle(l->name, NULL, NULL, &status) : NULL;
    if (sig != NULL && status == 0 && signature_read_only(sig, l->n, l->read_only))
        for (size_t i = 0; i < l->n; i++)
            l->read_only[i] = l->read_only[i] && l->p[i].size == sizeof(void *);
    free(sig); /* the C++ runtime's, from the program's malloc: see LMS_LIBC_MALLOC_ALLOWED */
}

static size_t slot_of(launch_kind_t kind, const void *fn)
{
    uint64_t h = (uint64_t)(uintptr_t)fn * 0x9e3779b97f4a7c15ull + (uint64_t)kind;
    return (size_t)(h >> 40) & (TABLE_SIZE - 1);
}

void launch_forget_layouts(void) { __atomic_fetch_add(&unloads, 1, __ATOMIC_RELEASE); }

/* fn's layout: from the table, or asked now and kept (in place of one
 * asked before a module was unloaded, which is left, never freed: another
 * thread may still read it). NULL only when the host has no memory for it. */
static layout_t *layout_of(launch_kind_t kind, const void *fn)
{
    uint64_t now = __atomic_load_n(&unloads, __ATOMIC_ACQUIRE);
    static __thread layout_t *unkept; /* the table is full: this thread's last one */
    size_t i = slot_of(kind, fn);
    for (size_t probe = 0; probe < TABLE_SIZE; probe++, i = (i + 1) & (TABLE_SIZE - 1)) {
        layout_t *l = __atomic_load_n(&table[i], __ATOMIC_ACQUIRE);
        if (l == NULL)
            break;
        if (l->fn == fn && l->kind == kind && l->unloads == now)
            return l;
        if (l->fn == fn && l->kind == kind)
            break; /* stale: asked again below, into its slot */
    }
    if (unkept != NULL && unkept->fn == fn && unkept->kind == kind && unkept->unloads == now)
        return unkept;
    layout_t *ask = base_meta_calloc(1, sizeof *ask + MAX_PARAMS * sizeof *ask->p);
    if (ask == NULL)
        return NULL;
    *ask = (layout_t){.kind = kind, .fn = fn, .unloads = now};
    ask_layout(ask);
    size_t n = ask->n;
    layout_t *l = base_meta_alloc(sizeof *l + n * sizeof *l->p + n * sizeof *l->read_only);
    if (l == NULL) {
        base_meta_free(ask);
        return NULL;
    }
    memcpy(l, ask, sizeof *l + n * sizeof *l->p);
    base_meta_free(ask);
    l->read_only = (bool *)(void *)&l->p[n];
    learn_read_only(l);
    /* keep it, unless another thread did first or the table is full */
    lo_lock(&table_lock, LO_LAUNCH_LAYOUTS);
    i = slot_of(kind, fn);
    for (size_t probe = 0; probe < TABLE_SIZE; probe++, i = (i + 1) & (TABLE_SIZE - 1)) {
        layout_t *t = table[i];
        if (t != NULL && (t->fn != fn || t->kind != kind))
            continue;
        if (t != NULL && t->unloads == now) { /* another thread's, of this generation */
            lo_unlock(&table_lock, LO_LAUNCH_LAYOUTS);
            base_meta_free(l);
            return t;
        }
        __atomic_store_n(&table[i], l, __ATOMIC_RELEASE); /* empty, or stale */
        lo_unlock(&table_lock, LO_LAUNCH_LAYOUTS);
        return l;
    }
    bool say = !table_full_said;
    table_full_said = true;
    lo_unlock(&table_lock, LO_LAUNCH_LAYOUTS);
    if (say)
        base_log(BASE_LOG_WARN, "interpose: more than %d kernels launched: layouts of the others "
                 "are asked of the driver again at each launch", TABLE_SIZE);
    base_meta_free(unkept);
    return unkept = l;
}

/* ---- launch doors lms cannot see through (launch_unseeable) ---------------- */

static bool unknown_fails(void);

lms_status_t launch_unseeable(const void *fn, const char *door, bool *said)
{
    (void)lms_note_launch(LMS_LAUNCH_UNKNOWN);
    bool fail = unknown_fails(), say = !__atomic_exchange_n(said, true, __ATOMIC_RELAXED);
    if (!fail && !say)
        return LMS_OK;
    char name[NAME_LEN] = "";
    if (!ask_name("cuFuncGetName", (void *)fn, name) && !ask_name("cuKernelGetName", (void *)fn, name))
        snprintf(name, sizeof name, "%p", fn);
    if (say)
        base_log(BASE_LOG_WARN, "interpose: %s (kernel %s): its parameters are not in the call, so "
                 "lms cannot see what it touches: %s", door, name,
                 fail ? "it is not launched (LMS_UNKNOWN_LAUNCH=launch launches it with nothing "
                        "made resident)"
                      : "it is launched with nothing made resident (LMS_UNKNOWN_LAUNCH); lms "
                        "memory it touches must be pinned (lms_pin)");
    if (fail)
        return base_fail(LMS_ERR_UNSUPPORTED, "interpose: %s of kernel %s not launched: lms cannot "
                         "see its parameters; LMS_UNKNOWN_LAUNCH=launch launches it unseen", door,
                         name);
    return LMS_OK;
}

/* ---- streams (Note [Stream handles]) ----------------------------------------- */

#define STREAM_CACHE 4
static __thread struct {
    void *native;
    lms_stream_t stream;
    bool set;
} streams[STREAM_CACHE];
static __thread unsigned streams_next;

lms_status_t interpose_stream(void *native, bool fresh, lms_stream_t *out)
{
    for (unsigned k = 0; k < STREAM_CACHE; k++)
        if (streams[k].set && streams[k].native == native) {
            if (!fresh) {
                *out = streams[k].stream;
                return LMS_OK;
            }
            streams[k].set = false;
        }
    lms_status_t st = interpose_start();
    if (st == LMS_OK)
        st = lms_stream_adopt(native, out);
    if (st == LMS_OK) {
        unsigned k = streams_next++ % STREAM_CACHE;
        streams[k].native = native;
        streams[k].stream = *out;
        streams[k].set = true;
    }
    return st;
}

/*
 * Note [Pinned small allocations]
 * What a kernel reaches through pointers stored in device memory (an array
 * of pointers) no hook sees. Such arrays and what they point to are often
 * small: with LMS_PIN_SMALLER_THAN, an allocation below it is pinned when it
 * is made (lms_pin: resident from then on, for any stream) and stays pinned
 * until its memory is released after the free, when the chunks it alone
 * occupied drop their pins; a chunk shared with other small allocations
 * stays pinned until all of them are freed. Pinned longer than needed,
 * never shorter. An allocation that cannot be pinned is freed again and
 * fails as out of memory.
 */
lms_status_t interpose_pin_small(void *p, size_t size)
{
    if (p == NULL || size == 0 || size >= base_options()->pin_smaller_than)
        return LMS_OK;
    lms_status_t st = lms_pin(p, size);
    if (st != LMS_OK) {
        char why[256];
        snprintf(why, sizeof why, "%s", lms_last_error());
        (void)lms_free(p, LMS_ALL_STREAMS);
        st = base_fail(st, "LMS_PIN_SMALLER_THAN: %zu bytes could not be pinned: %s", size, why);
    }
    return st;
}

/* Stream-ordered allocation on a stream being captured makes graph memory
 * nodes, which lms cannot (Note [Graph capture] in graph.c). */
static lms_status_t not_in_capture(void *stream, const char *what)
{
    if (!graph_capturing(stream))
        return LMS_OK;
    return base_fail(LMS_ERR_UNSUPPORTED, "interpose: %s on stream %p, which is being captured "
                     "into a CUDA graph: lms does not make graph memory nodes", what, stream);
}

lms_status_t interpose_on_stream(void *native, interpose_stream_call_t call, void *args)
{
    lms_stream_t s;
    lms_status_t st = interpose_stream(native, false, &s);
    if (st == LMS_OK && (st = call(s, args)) == LMS_ERR_INVALID &&
        (st = interpose_stream(native, true, &s)) == LMS_OK) /* stale: Note [Stream handles] */
        st = call(s, args);
    return st;
}

typedef struct malloc_args {
    void **p;
    size_t size;
} malloc_args_t;

static lms_status_t malloc_on(lms_stream_t s, void *args)
{
    malloc_args_t *a = args;
    return lms_malloc(a->p, a->size, s);
}

lms_status_t interpose_malloc_on(void **p, size_t size, void *stream)
{
    lms_status_t st = not_in_capture(stream, "stream-ordered allocation");
    if (st == LMS_OK)
        st = interpose_on_stream(stream, malloc_on, &(malloc_args_t){p, size});
    if (st == LMS_OK && (st = interpose_pin_small(*p, size)) != LMS_OK)
        *p = NULL;
    if (st == LMS_OK)
        trace_alloc(*p, size);
    return st;
}

static lms_status_t free_on(lms_stream_t s, void *p) { return lms_free(p, s); }

lms_status_t interpose_free_on(void *p, void *stream)
{
    lms_status_t st = not_in_capture(stream, "stream-ordered free");
    if (st != LMS_OK)
        return st;
    graph_forget(p);
    trace_free(p);
    return interpose_on_stream(stream, free_on, p);
}

/* ---- the launch ----------------------------------------------------------------- */

/* ---- lms's start and range (Note [A failed start]) ------------------------------ */

/* lms's range, once lms is up; {0, 0} while it has not started. Threads that
 * find it at once store the same values. Kept for the process: the
 * interposer never calls lms_shutdown (after which the range could move). */
static uintptr_t range_lo;
static size_t range_bytes; /* 0: not known yet; stored after range_lo (release) */

static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;
static lms_status_t start_failure; /* the first start's failure; LMS_OK: none */
static char start_why[512];        /* its message (as long as lms_last_error's) */

/*
 * Note [Frees in a forked child]
 * In a child forked after lms started, lms cannot start (Note [Fork] in
 * swap/init.c), and a free of the parent's pointer must say so as
 * docs/interposer.md ("Safety") promises: cudaErrorNotSupported
 * (CUDA_ERROR_NOT_SUPPORTED), with lms's message in the log. Without this check it did not: the pointer is
 * not lms's in the child, so it went on to CUDA, whose runtime, unusable
 * in the child too, answered cudaErrorInsufficientDriver (35); or, where
 * the child had kept the parent's range, lms_free answered "not an address
 * lms handed out" (cudaErrorInvalidValue). A child is known by the fork
 * handler below; lms refusing to start in it (LMS_ERR_UNSUPPORTED) tells
 * one forked after the start from one forked before, which may use lms.
 */
static bool forked; /* this process is a fork's child (atomic) */

lms_status_t interpose_refused_in_child(void)
{
    void *base;
    size_t bytes;
    if (!__atomic_load_n(&forked, __ATOMIC_RELAXED) ||
        lms_reserved_range(&base, &bytes) != LMS_ERR_UNSUPPORTED)
        return LMS_OK;
    return LMS_ERR_UNSUPPORTED;
}

static void before_fork(void) { lo_lock(&start_lock, LO_INTERPOSE_START); }

static void after_fork_parent(void) { lo_unlock(&start_lock, LO_INTERPOSE_START); }

/* The child starts afresh (Note [A failed start]). */
static void after_fork_child(void)
{
    __atomic_store_n(&forked, true, __ATOMIC_RELAXED);
    start_failure = LMS_OK;
    lo_unlock(&start_lock, LO_INTERPOSE_START);
}

__attribute__((constructor)) static void watch_forks(void)
{
    if (pthread_atfork(before_fork, after_fork_parent, after_fork_child) != 0)
        base_log(BASE_LOG_WARN, "interpose: pthread_atfork failed: a free in a forked child may "
                                "get CUDA's answer rather than cudaErrorNotSupported, and a "
                                "child of a process where lms could not start does not try");
}

lms_status_t interpose_start(void)
{
    if (__atomic_load_n(&range_bytes, __ATOMIC_ACQUIRE) != 0)
        return LMS_OK;
    char why[sizeof start_why];
    lo_lock(&start_lock, LO_INTERPOSE_START);
    lms_status_t st = start_failure;
    if (st != LMS_OK)
        memcpy(why, start_why, sizeof why);
    lo_unlock(&start_lock, LO_INTERPOSE_START);
    if (st != LMS_OK) /* remembered: lms_last_error gives its message again */
        return base_fail(st, "%s", why);
    /* the program's kernels may touch lms's memory where the hooks do not see
     * it (Note [Evicted mode] in swap/config.c): refused only where the
     * program started lms itself before its first hooked call */
    if (lms_expect_unseen_access() != LMS_OK)
        base_log(BASE_LOG_INFO, "%s", lms_last_error());
    void *base;
    size_t bytes;
    st = lms_reserved_range(&base, &bytes);
    if (st == LMS_OK) {
        __atomic_store_n(&range_lo, (uintptr_t)base, __ATOMIC_RELAXED);
        __atomic_store_n(&range_bytes, bytes, __ATOMIC_RELEASE);
        return LMS_OK;
    }
    lo_lock(&start_lock, LO_INTERPOSE_START);
    if (start_failure == LMS_OK) { /* the first: another thread's may have come first */
        start_failure = st;
        snprintf(start_why, sizeof start_why, "%s", lms_last_error());
    }
    lo_unlock(&start_lock, LO_INTERPOSE_START);
    return st;
}

void interpose_start_again(void)
{
    lo_lock(&start_lock, LO_INTERPOSE_START);
    start_failure = LMS_OK;
    lo_unlock(&start_lock, LO_INTERPOSE_START);
}

static scan_range_t lms_range(void)
{
    size_t bytes = __atomic_load_n(&range_bytes, __ATOMIC_ACQUIRE);
    if (bytes == 0) {
        if (interpose_start() != LMS_OK)
            return (scan_range_t){0, 0};
        bytes = __atomic_load_n(&range_bytes, __ATOMIC_ACQUIRE);
    }
    return (scan_range_t){__atomic_load_n(&range_lo, __ATOMIC_RELAXED), bytes};
}

bool interpose_owns(const void *ptr)
{
    scan_range_t r = lms_range();
    return (uintptr_t)ptr >= r.lo && (uintptr_t)ptr - r.lo < r.bytes;
}

/* What a launch's parameters point to: the words found, the parameter
 * each was in (launches in the kernelParams form), and the mode each is
 * made resident with. */
typedef struct hits {
    uintptr_t *ptr;
    uint32_t *param;
    lms_access_mode_t *mode;
} hits_t;

/* What resident_hits makes resident: the first n of h. */
typedef struct hits_found {
    const hits_t *h;
    size_t n;
} hits_found_t;

static lms_status_t resident_hits(lms_stream_t s, void *args)
{
    const hits_found_t *a = args;
    return lms_access_pointers_modes((const void *const *)a->h->ptr, a->h->mode, a->n, s);
}

/* Fills h (room for max) with what the launch points to, and returns how
 * many it found in all: words in lms's range, and learnt tensor maps. */
static size_t collect(const layout_t *l, void **params, const void *buf, size_t size,
                      scan_range_t r, hits_t *h, size_t max)
{
    size_t found;
    if (params != NULL) {
        found = scan_params(params, l->p, l->n, r, h->ptr, h->param, max);
        found = tensormap_scan(params, l->p, l->n, h->ptr, h->param, max, found);
    } else {
        found = scan_buffer(buf, size, r, h->ptr, max);
        found = tensormap_scan_buffer(buf, size, h->ptr, max, found);
    }
    for (size_t k = 0; k < found && k < max; k++)
        h->mode[k] = params != NULL && h->param[k] < l->n && l->read_only[h->param[k]]
                         ? LMS_READ
                         : LMS_WRITE;
    return found;
}

/* What LMS_UNKNOWN_LAUNCH asks of a launch whose layout is unknown: fail it
 * (true), or launch it. auto: fail while lms swaps (memory may then be
 * unmapped under the kernel), launch when it does not. */
static bool unknown_fails(void)
{
    static int answer; /* 0: not known yet, 1: fail, 2: launch */
    int a = __atomic_load_n(&answer, __ATOMIC_RELAXED);
    if (a == 0) {
        const char *o = base_options()->unknown_launch;
        lms_stats_t t;
        if (strcmp(o, "fail") == 0)
            a = 1;
        else if (strcmp(o, "launch") == 0)
            a = 2;
        else /* auto: lms swaps if it has host memory to swap to */
            a = lms_stats(&t) != LMS_OK || t.host_limit > 0 ? 1 : 2;
        __atomic_store_n(&answer, a, __ATOMIC_RELAXED);
    }
    return a == 1;
}

/* A launch of l's function, whose layout is unknown: counted, said once,
 * and failed or let through as LMS_UNKNOWN_LAUNCH says (unknown_fails).
 * `late`: it has run already (Note [Runtime launches the driver sees]). */
static lms_status_t unknown_launch(layout_t *l, bool late)
{
    (void)lms_note_launch(LMS_LAUNCH_UNKNOWN);
    bool fail = !late && unknown_fails();
    if (!__atomic_exchange_n(&l->said, true, __ATOMIC_RELAXED))
        base_log(late ? BASE_LOG_ERROR : BASE_LOG_WARN,
                 "interpose: kernel %s: its parameter layout could not be learnt (%s): %s",
                 l->name, l->why,
                 late ? "the runtime launched it without passing it through lms's driver "
                        "entry points, so nothing it touches was made resident; lms_pin that"
                 : fail ? "it is not launched (LMS_UNKNOWN_LAUNCH=launch launches it with "
                          "nothing made resident)"
                        : "it is launched with nothing made resident (LMS_UNKNOWN_LAUNCH); "
                          "lms memory it touches must be pinned (lms_pin)");
    if (fail)
        return base_fail(LMS_ERR_UNSUPPORTED,
                         "interpose: kernel %s not launched: its parameter layout could not be "
                         "learnt (%s); LMS_UNKNOWN_LAUNCH=launch launches it unseen",
                         l->name, l->why);
    return LMS_OK;
}

/*
 * Note [Runtime launches the driver sees]
 * The runtime passes its launches on to the driver's cuLaunchKernel (or a
 * twin) that it looked up by name, which is lms's (Note [Lookups by name]
 * in symbols.c), and the hooks pass calls made inside a hooked call
 * straight through (Note [One access per call] in interpose.c);
 * launch_nested notes that it happened (reaches_driver). When the layout
 * of a runtime launch cannot be learnt (its stub is not the runtime's,
 * say), launch_access defers it, once a runtime launch has been seen reaching a driver hook or when
 * LMS_UNKNOWN_LAUNCH lets unknown launches run anyway: the runtime hook
 * lets the call through with the hooks open, and the driver hook it
 * reaches claims it (deferred_from) and handles it as a launch of its own,
 * with the driver's handle. If no driver hook claimed it and the runtime
 * launched it, the kernel ran unseen: it is counted as unknown and said,
 * after the fact. Before any runtime launch has been seen reaching the
 * driver, an unknown one is failed at once when LMS_UNKNOWN_LAUNCH fails
 * unknown launches, since nothing says the driver hook would see it.
 */
static __thread layout_t *deferred_from; /* the runtime launch deferred, until claimed */
static __thread bool runtime_open;       /* a runtime launch is in CUDA on this thread */
static bool reaches_driver; /* a runtime launch reached a driver hook (atomic) */

void launch_nested(launch_kind_t kind)
{
    if (kind == LAUNCH_DRIVER && runtime_open)
        __atomic_store_n(&reaches_driver, true, __ATOMIC_RELAXED);
}

void launch_done(bool launched)
{
    layout_t *l = deferred_from;
    deferred_from = NULL;
    runtime_open = false;
    if (l != NULL && launched)
        (void)unknown_launch(l, true);
}

lms_status_t launch_access(launch_kind_t kind, const void *fn, void *stream, void **params,
                           void **extra, bool *deferred)
{
    if (deferred_from != NULL) { /* a runtime launch deferred to this one: claimed */
        deferred_from = NULL;
        __atomic_store_n(&reaches_driver, true, __ATOMIC_RELAXED);
    }
    if (deferred != NULL) {
        *deferred = false;
        runtime_open = true; /* until launch_done */
    }
    scan_range_t r = lms_range();
    if (r.bytes == 0)
        return LMS_OK;
    uintptr_t stack_ptr[STACK_HITS];
    uint32_t stack_param[STACK_HITS];
    lms_access_mode_t stack_mode[STACK_HITS];
    hits_t h = {stack_ptr, stack_param, stack_mode};
    size_t found = 0;
    const void *buf = NULL;
    size_t size = 0;
    layout_t *l = NULL;
    if (params != NULL) {
        if ((l = layout_of(kind, fn)) == NULL)
            return base_fail(LMS_ERR_OUT_OF_MEMORY, "interpose: no host memory for a layout");
        if (!l->known && deferred != NULL &&
            (__atomic_load_n(&reaches_driver, __ATOMIC_RELAXED) || !unknown_fails())) {
            *deferred = true;
            deferred_from = l;
            return LMS_OK;
        }
        if (!l->known)
            return unknown_launch(l, false);
    } else if (!scan_extra(extra, &buf, &size)) {
        (void)lms_note_launch(LMS_LAUNCH_NO_POINTER); /* no parameters */
        return LMS_OK;
    }
    /* more than fit: again into room for all (until they fit: another
     * thread may learn a tensor map in between) */
    for (size_t room = STACK_HITS; (found = collect(l, params, buf, size, r, &h, room)) > room;) {
        if (h.ptr != stack_ptr)
            base_meta_free(h.ptr);
        room = found;
        h.ptr = base_meta_alloc(room * (sizeof *h.ptr + sizeof *h.param + sizeof *h.mode));
        if (h.ptr == NULL)
            return base_fail(LMS_ERR_OUT_OF_MEMORY, "interpose: no host memory for %zu pointers",
                             room);
        h.param = (uint32_t *)(void *)(h.ptr + room);
        h.mode = (lms_access_mode_t *)(void *)(h.param + room);
    }
    (void)lms_note_launch(found > 0 ? LMS_LAUNCH_POINTERS : LMS_LAUNCH_NO_POINTER);
    if (found == 0)
        return LMS_OK;
    lms_status_t st;
    const void *const *ptrs = (const void *const *)h.ptr;
    trace_access_pointers(ptrs, h.mode, found);
    if (graph_capturing(stream)) /* Note [Graph capture] in graph.c */
        st = graph_pin_pointers(stream, ptrs, found);
    else
        st = interpose_on_stream(stream, resident_hits, &(hits_found_t){&h, found});
    if (h.ptr != stack_ptr)
        base_meta_free(h.ptr);
    return st;
}
