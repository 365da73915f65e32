/*
 * device/cuda.c — the cuda backend: the ops of device.h on a real GPU, through
 * the CUDA driver API. This file opens and closes a device, keeps the
 * current context, and has the memory ops and the ops table; cuda_work.c has
 * the streams, events, copies, host functions, launches and the observer;
 * cuda.h is what they share.
 *
 * Owns, for each open device (a cuda_t):
 *   - a handle on libcuda.so.1 from dlopen: liblms is never linked against
 *     libcuda, so it loads on a machine with no driver;
 *   - the driver's entry points, resolved at open from one list,
 *     DRIVER_FUNCS in cuda.h (see Note [Resolving the driver] in
 *     cuda_driver.c);
 *   - one reference on the device's primary context (see Note [Current context]);
 *   - while an observer is set, and from then on: the timing events of the
 *     work not yet reported, and a base event with its stream (see Note
 *     [Timing work on the GPU] in cuda_work.c).
 * What the ops hand out is the driver's own object, cast: a dev_stream_t * is
 * a CUstream, a dev_event_t * a CUevent, a dev_block_t a
 * CUmemGenericAllocationHandle. The backend keeps no table of them (but the
 * list of adopted streams, the program's, which destroy must not destroy)
 * and checks no argument; the check layer above it does both (check.c). It
 * must still never crash on what the driver rejects: every CUresult becomes
 * a status through dev_cuda_fail().
 *
 * Invariants: every field of cuda_t except the adopted list and the
 * observer's state is set by dev_cuda_open and never changes.
 *
 * Locks: lock guards the adopted list. observe_lock guards the observer's
 * state and is held while the observer is called (it calls no op).
 * Everything else is read-only after open and the driver is thread-safe, so
 * the ops run concurrently without a lock.
 */
#include "device/cuda.h"

#include "base/base.h"

#include <dlfcn.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(dev_addr_t) == sizeof(CUdeviceptr), "a dev_addr_t holds a CUdeviceptr");
_Static_assert(sizeof(dev_block_t) == sizeof(CUmemGenericAllocationHandle),
               "a dev_block_t holds a CUmemGenericAllocationHandle");

/* ---- context ---------------------------------------------------------------- */

/*
 * Note [Current context]
 * ~~~~~~~~~~~~~~~~~~~~~~
 * Driver calls act on the calling thread's current context. Open retains the
 * device's primary context, the one cudart (and so PyTorch) uses, so that
 * lms's memory, streams and events live where the application's do; close
 * releases it. An op makes it current on a thread that lacks it, and leaves it
 * current (no push and pop per call).
 *
 * The fast path is cuda_use_context() (cuda.h): cuda_current_id,
 * thread-local, is the id of the cuda_t that last made its context current
 * on this thread; when it matches, the op makes no extra driver call. Ids
 * come from a counter and are never reused, so a thread's entry for a
 * closed device never matches a later one.
 *
 * The cache cannot see other code (cudaSetDevice, the application's own
 * cuCtxSetCurrent) switch the thread to another context behind it. Ops that
 * name their objects (VAs, handles, streams, events) are not misled by that;
 * the ops whose effect depends on which context is current (creating streams
 * and events, host registration, mem_info, launches: a kernel must be
 * launched from its stream's context) call cuda_use_context_checked(),
 * which asks the driver (cuCtxGetCurrent, cheap).
 *
 * Consequence for callers: a thread that has called an op has this device's
 * primary context current afterwards, whatever it had before.
 */
_Thread_local uint64_t cuda_current_id; /* 0: none yet */
static atomic_uint_fast64_t next_id = 1;

lms_status_t cuda_set_context(cuda_t *c)
{
    CUresult r = c->drv.cuCtxSetCurrent(c->ctx);
    if (r != CUDA_SUCCESS)
        return dev_cuda_fail(r, "cuCtxSetCurrent(primary context of device %d)", c->ordinal);
    cuda_current_id = c->id;
    return LMS_OK;
}

lms_status_t cuda_use_context_checked(cuda_t *c)
{
    CUcontext cur = NULL;
    CUresult r = c->drv.cuCtxGetCurrent(&cur);
    if (r != CUDA_SUCCESS)
        return dev_cuda_fail(r, "cuCtxGetCurrent()");
    if (cur != c->ctx)
        cuda_current_id = 0;
    return cuda_use_context(c);
}

/* ---- ops: memory ------------------------------------------------------------ */

static lms_status_t mem_info(void *self, size_t *free_bytes, size_t *total_bytes)
{
    cuda_t *c = self;
    lms_status_t status = cuda_use_context_checked(c);
    if (status != LMS_OK)
        return status;
    size_t free_b = 0, total_b = 0;
    CUresult r = c->drv.cuMemGetInfo(&free_b, &total_b);
    if (r != CUDA_SUCCESS)
        return dev_cuda_fail(r, "cuMemGetInfo(device %d)", c->ordinal);
    *free_bytes = free_b;
    *total_bytes = total_b;
    return LMS_OK;
}

static lms_status_t va_reserve(void *self, size_t size, dev_addr_t *base)
{
    cuda_t *c = self;
    lms_status_t status = cuda_use_context(c);
    if (status != LMS_OK)
        return status;
    CUdeviceptr p = 0;
    CUresult r = c->drv.cuMemAddressReserve(&p, size, c->granularity, 0, 0);
    if (r != CUDA_SUCCESS)
        return dev_cuda_fail(r, "cuMemAddressReserve(%zu bytes, alignment %zu)", size,
                    c->granularity);
    *base = p;
    return LMS_OK;
}

static lms_status_t va_free(void *self, dev_addr_t base, size_t size)
{
    cuda_t *c = self;
    lms_status_t status = cuda_use_context(c);
    if (status != LMS_OK)
        return status;
    CUresult r = c->drv.cuMemAddressFree(base, size);
    if (r != CUDA_SUCCESS)
        return dev_cuda_fail(r, "cuMemAddressFree(0x%" PRIx64 ", %zu bytes)", base, size);
    return LMS_OK;
}

static lms_status_t block_create(void *self, dev_block_t *block)
{
    cuda_t *c = self;
    lms_status_t status = cuda_use_context(c);
    if (status != LMS_OK)
        return status;
    CUmemGenericAllocationHandle h = 0;
    CUresult r = c->drv.cuMemCreate(&h, c->granularity, &c->block_prop, 0);
    if (r != CUDA_SUCCESS)
        return dev_cuda_fail(r, "cuMemCreate(%zu bytes, pinned, device %d)", c->granularity,
                    c->ordinal);
    *block = h;
    return LMS_OK;
}

static lms_status_t block_release(void *self, dev_block_t block)
{
    cuda_t *c = self;
    lms_status_t status = cuda_use_context(c);
    if (status != LMS_OK)
        return status;
    CUresult r = c->drv.cuMemRelease(block);
    if (r != CUDA_SUCCESS)
        return dev_cuda_fail(r, "cuMemRelease(block 0x%" PRIx64 ")", block);
    return LMS_OK;
}

static lms_status_t map(void *self, dev_addr_t va, dev_block_t block)
{
    cuda_t *c = self;
    lms_status_t status = cuda_use_context(c);
    if (status != LMS_OK)
        return status;
    CUresult r = c->drv.cuMemMap(va, c->granularity, 0, block, 0);
    if (r != CUDA_SUCCESS)
        return dev_cuda_fail(r, "cuMemMap(va 0x%" PRIx64 ", %zu bytes, block 0x%" PRIx64 ")", va,
                    c->granularity, block);
    return LMS_OK;
}

/* One driver call for the whole range: cuMemSetAccess takes "a fully mapped
 * address range containing all allocations created by cuMemMap/cuMemCreate". */
static lms_status_t set_access(void *self, dev_addr_t va, size_t size)
{
    cuda_t *c = self;
    lms_status_t status = cuda_use_context(c);
    if (status != LMS_OK)
        return status;
    CUresult r = c->drv.cuMemSetAccess(va, size, &c->access, 1);
    if (r != CUDA_SUCCESS)
        return dev_cuda_fail(r, "cuMemSetAccess(va 0x%" PRIx64 ", %zu bytes, read/write for device %d)",
                    va, size, c->ordinal);
    return LMS_OK;
}

/* Note [Host blocks on cuda]: of the kind the open chose. */
static lms_status_t host_block_create(void *self, dev_block_t *block)
{
    cuda_t *c = self;
    lms_status_t status = cuda_use_context(c);
    if (status != LMS_OK)
        return status;
    CUmemGenericAllocationHandle h = 0;
    CUresult r = c->drv.cuMemCreate(&h, c->granularity, &c->host_prop, 0);
    if (r != CUDA_SUCCESS)
        return dev_cuda_fail(r, "cuMemCreate(%zu bytes, pinned, %s)", c->granularity,
                             c->host_where);
    *block = h;
    return LMS_OK;
}

/* Two descriptors, the device's and the CPU's, in one driver call. */
static lms_status_t set_access_host(void *self, dev_addr_t va, size_t size)
{
    cuda_t *c = self;
    lms_status_t status = cuda_use_context(c);
    if (status != LMS_OK)
        return status;
    CUmemAccessDesc access[2] = {
        c->access,
        {.location = c->host_prop.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE}};
    CUresult r = c->drv.cuMemSetAccess(va, size, access, 2);
    if (r != CUDA_SUCCESS)
        return dev_cuda_fail(r, "cuMemSetAccess(va 0x%" PRIx64 ", %zu bytes, read/write for device "
                             "%d and the host)", va, size, c->ordinal);
    return LMS_OK;
}

/* One cuMemUnmap per block: the driver documents that "the range must be the
 * entire contiguous address range that was mapped to", i.e. one mapping, and
 * each block was mapped by its own cuMemMap. If the driver fails at block k,
 * blocks 0..k-1 stay unmapped (it cannot be undone without the handles) and the
 * message says so; that only happens when the context is lost. */
static lms_status_t unmap(void *self, dev_addr_t va, size_t size)
{
    cuda_t *c = self;
    lms_status_t status = cuda_use_context(c);
    if (status != LMS_OK)
        return status;
    for (size_t done = 0; done < size; done += c->granularity) {
        CUresult r = c->drv.cuMemUnmap(va + done, c->granularity);
        if (r != CUDA_SUCCESS)
            return dev_cuda_fail(r,
                        "cuMemUnmap(va 0x%" PRIx64 ", %zu bytes), block %zu of unmap(0x%" PRIx64
                        ", %zu bytes); the %zu bytes before it are unmapped",
                        va + done, c->granularity, done / c->granularity, va, size, done);
    }
    return LMS_OK;
}

static lms_status_t host_register(void *self, void *ptr, size_t size)
{
    cuda_t *c = self;
    lms_status_t status = cuda_use_context_checked(c);
    if (status != LMS_OK)
        return status;
    CUresult r = c->drv.cuMemHostRegister(ptr, size, CU_MEMHOSTREGISTER_PORTABLE);
    if (r != CUDA_SUCCESS)
        return dev_cuda_fail(r, "cuMemHostRegister(%p, %zu bytes, portable)", ptr, size);
    return LMS_OK;
}

static lms_status_t host_unregister(void *self, void *ptr)
{
    cuda_t *c = self;
    lms_status_t status = cuda_use_context_checked(c);
    if (status != LMS_OK)
        return status;
    CUresult r = c->drv.cuMemHostUnregister(ptr);
    if (r != CUDA_SUCCESS)
        return dev_cuda_fail(r, "cuMemHostUnregister(%p)", ptr);
    return LMS_OK;
}

/* ---- open and close --------------------------------------------------------- */

static const dev_cuda_sym_t driver_syms[] = {
#define DRIVER_SYM(fn) {#fn, offsetof(driver_t, fn)},
    DRIVER_FUNCS(DRIVER_SYM)
#undef DRIVER_SYM
};

/* Opens libcuda and fills c->drv; on failure libcuda is closed again. */
static lms_status_t load_driver(cuda_t *c)
{
    dev_cuda_get_proc_t *get_proc;
    lms_status_t status = dev_cuda_driver_open(&c->libcuda, &get_proc);
    if (status != LMS_OK)
        return status;
    status = dev_cuda_resolve(get_proc, driver_syms, sizeof driver_syms / sizeof driver_syms[0],
                              &c->drv);
    if (status != LMS_OK) {
        dlclose(c->libcuda);
        c->libcuda = NULL;
    }
    return status;
}

static lms_status_t device_attribute(cuda_t *c, CUdevice_attribute attr, const char *name,
                                     int *value)
{
    CUresult r = c->drv.cuDeviceGetAttribute(value, attr, c->device);
    if (r != CUDA_SUCCESS)
        return dev_cuda_fail(r, "cuDeviceGetAttribute(%s, device %d)", name, c->ordinal);
    return LMS_OK;
}

/* The NUMA node of the host memory nearest the device, -1 if unknown: the
 * driver's CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID when it knows (CUDA 12.2 and
 * later; -1 without NUMA), else the PCI device's numa_node in sysfs. */
static int host_numa_node(cuda_t *c)
{
    int node = -1;
    if (c->drv.cuDeviceGetAttribute(&node, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, c->device) ==
            CUDA_SUCCESS &&
        node >= 0)
        return node;

    /* "[domain]:[bus]:[device].[function]" in hex; sysfs spells it
     * 0000:3b:00.0 (4-digit domain, lower case). */
    char bus_id[64];
    unsigned domain, bus, dev, fn;
    if (c->drv.cuDeviceGetPCIBusId(bus_id, (int)sizeof bus_id, c->device) != CUDA_SUCCESS ||
        sscanf(bus_id, "%x:%x:%x.%x", &domain, &bus, &dev, &fn) != 4)
        return -1;
    char path[128];
    snprintf(path, sizeof path, "/sys/bus/pci/devices/%04x:%02x:%02x.%x/numa_node", domain, bus,
             dev, fn);
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return -1;
    if (fscanf(f, "%d", &node) != 1 || node < 0)
        node = -1;
    fclose(f);
    return node;
}

/*
 * Note [Host blocks on cuda]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~
 * A host block is a cuMemCreate allocation of one block's size in host
 * memory, made with CU_MEM_LOCATION_TYPE_HOST_NUMA on the device's NUMA node
 * (0 where the system has no NUMA, as cuda.h asks), mapped with cuMemMap as a
 * device block is. The driver can do it where the device says
 * CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, and lms
 * can use it where the host location's minimum granularity divides the block
 * size, so that a host block maps at any block-aligned VA. A driver that does
 * not know the attribute (before CUDA 12.2) fails the query: no host blocks.
 *
 * A node can be refused at cuMemCreate all the same (a node without CPUs:
 * NVIDIA/nccl#2190). So the open makes one host block there and releases
 * it: if the node is refused (CUDA_ERROR_INVALID_VALUE or NOT_SUPPORTED),
 * host blocks are made with CU_MEM_LOCATION_TYPE_HOST, anywhere on the host,
 * where that location's granularity divides the block size and a block can
 * be made there too. The kind is chosen once, before any block exists, so
 * that set_access_host opens every block with the one descriptor that fits
 * it (HOST_NUMA blocks take a HOST_NUMA descriptor, cuda.h: its id is
 * ignored there; HOST blocks a HOST one). Any other failure (an out of
 * memory on the node among them) means no host blocks, with the driver's
 * word: host blocks on another node would work, but the link to them is
 * slower. Whether one copy may read or write across adjacent host blocks
 * mapped in one reservation (as it may across device blocks) is not known
 * until a card shows it: info.host_block_runs stays false, and swap/ copies
 * a host-mapped chunk at a time. None of this has run on a GPU yet (issue
 * 27).
 */
/* Whether host blocks of c->host_prop's kind fit the block size and can be
 * made (one is, and released); if not, why, in why. The driver's result
 * of the cuMemCreate in *made. */
static bool host_kind_works(cuda_t *c, char *why, size_t nwhy, CUresult *made)
{
    char err[64];
    size_t host_granularity = 0;
    *made = CUDA_SUCCESS;
    CUresult r = c->drv.cuMemGetAllocationGranularity(&host_granularity, &c->host_prop,
                                                      CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    if (r != CUDA_SUCCESS) {
        dev_cuda_error_text(r, err, sizeof err);
        snprintf(why, nwhy, "no allocation granularity %.40s: %.40s", c->host_where, err);
        return false;
    }
    if (host_granularity == 0 || c->granularity % host_granularity != 0) {
        snprintf(why, nwhy, "host granularity %zu %.40s does not divide the block size %zu",
                 host_granularity, c->host_where, c->granularity);
        return false;
    }
    CUmemGenericAllocationHandle h = 0;
    if ((*made = c->drv.cuMemCreate(&h, c->granularity, &c->host_prop, 0)) != CUDA_SUCCESS) {
        dev_cuda_error_text(*made, err, sizeof err);
        snprintf(why, nwhy, "cuMemCreate of a host block %.40s: %.40s", c->host_where, err);
        return false;
    }
    (void)c->drv.cuMemRelease(h);
    return true;
}

static void host_blocks_support(cuda_t *c, dev_info_t *info)
{
    char *why = info->host_blocks_why;
    size_t nwhy = sizeof info->host_blocks_why;
    int supported = 0;
    CUresult r = c->drv.cuDeviceGetAttribute(
        &supported, CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, c->device);
    char err[64];
    if (r != CUDA_SUCCESS) {
        dev_cuda_error_text(r, err, sizeof err);
        snprintf(why, nwhy, "driver lacks HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: %s", err);
        return;
    }
    if (!supported) {
        snprintf(why, nwhy, "the device does not support VMM allocations on a host NUMA node");
        return;
    }
    int node = info->host_numa_node >= 0 ? info->host_numa_node : 0;
    c->host_prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    c->host_prop.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
    c->host_prop.location.id = node;
    snprintf(c->host_where, sizeof c->host_where, "on host NUMA node %d", node);
    CUresult made;
    if (host_kind_works(c, why, nwhy, &made))
        return (void)(info->host_blocks = true);
    if (made != CUDA_ERROR_INVALID_VALUE && made != CUDA_ERROR_NOT_SUPPORTED)
        return; /* not a refusal of the node: why says what */
    char refused[128];
    snprintf(refused, sizeof refused, "%s", why);
    c->host_prop.location.type = CU_MEM_LOCATION_TYPE_HOST;
    c->host_prop.location.id = 0;
    snprintf(c->host_where, sizeof c->host_where, "anywhere on the host (node %d refused)", node);
    if (!host_kind_works(c, why, nwhy, &made)) {
        char anywhere[128];
        snprintf(anywhere, sizeof anywhere, "%s", why);
        snprintf(why, nwhy, "%.60s; %.60s", refused, anywhere);
        return;
    }
    base_log(BASE_LOG_INFO, "cuda: device %d: %s; host blocks are made anywhere on the host",
             c->ordinal, refused);
    info->host_blocks = true;
}

static void close_backend(void *self)
{
    cuda_t *c = self;
    /* Direct, not cuda_use_context(): close must not touch the thread's last error. */
    CUresult r = c->drv.cuCtxSetCurrent(c->ctx);
    dev_cuda_log_close(c->ordinal, r, "cuCtxSetCurrent(primary context)");
    if (r == CUDA_SUCCESS)
        cuda_current_id = c->id;
    cuda_release_observer(c);
    dev_cuda_log_close(c->ordinal, c->drv.cuDevicePrimaryCtxRelease(c->device), "cuDevicePrimaryCtxRelease");
    dlclose(c->libcuda);
    pthread_mutex_destroy(&c->lock);
    pthread_mutex_destroy(&c->observe_lock);
    base_meta_free(c->adopted);
    base_meta_free(c);
}

static const dev_ops_t cuda_ops = {
    .name = "cuda",
    .close = close_backend,
    .mem_info = mem_info,
    .va_reserve = va_reserve,
    .va_free = va_free,
    .block_create = block_create,
    .block_release = block_release,
    .map = map,
    .set_access = set_access,
    .unmap = unmap,
    .host_register = host_register,
    .host_unregister = host_unregister,
    .stream_create = cuda_stream_create,
    .stream_adopt = cuda_stream_adopt,
    .stream_destroy = cuda_stream_destroy,
    .stream_synchronize = cuda_stream_synchronize,
    .event_create = cuda_event_create,
    .event_destroy = cuda_event_destroy,
    .event_record = cuda_event_record,
    .event_query = cuda_event_query,
    .event_synchronize = cuda_event_synchronize,
    .stream_wait_event = cuda_stream_wait_event,
    .copy_h2d = cuda_copy_h2d,
    .copy_d2h = cuda_copy_d2h,
    .copy_d2d = cuda_copy_d2d,
    .host_func = cuda_host_func,
    .launch = cuda_launch,
    .set_observer = cuda_set_observer,
    .host_block_create = host_block_create,
    .set_access_host = set_access_host,
};

lms_status_t dev_cuda_open(int ordinal, dev_layer_t *out, dev_info_t *info)
{
    lms_status_t status;
    CUresult r;
    cuda_t *c = base_meta_calloc(1, sizeof *c);
    if (c == NULL)
        return base_fail(LMS_ERR_OUT_OF_MEMORY, "cuda: no host memory for the backend's state");
    c->ordinal = ordinal;
    c->id = atomic_fetch_add(&next_id, 1);
    atomic_init(&c->observing, false);
    atomic_init(&c->next_poll_ns, 0);
    if (pthread_mutex_init(&c->lock, NULL) != 0) {
        status = base_fail(LMS_ERR_SYSTEM, "cuda: pthread_mutex_init failed");
        goto fail_free;
    }
    if (pthread_mutex_init(&c->observe_lock, NULL) != 0) {
        pthread_mutex_destroy(&c->lock);
        status = base_fail(LMS_ERR_SYSTEM, "cuda: pthread_mutex_init failed");
        goto fail_free;
    }

    status = load_driver(c);
    if (status != LMS_OK)
        goto fail_destroy_lock;

    r = c->drv.cuInit(0);
    if (r != CUDA_SUCCESS) {
        /* Whatever cuInit says, there is no device to use. */
        (void)dev_cuda_fail(r, "cuda: cuInit(0), the driver found no usable device");
        status = LMS_ERR_NO_DEVICE;
        goto fail_close_driver;
    }
    r = c->drv.cuDeviceGet(&c->device, ordinal);
    if (r != CUDA_SUCCESS) {
        int count = 0;
        if (c->drv.cuDeviceGetCount(&count) != CUDA_SUCCESS)
            count = 0;
        (void)dev_cuda_fail(r, "cuda: cuDeviceGet(ordinal %d), the driver sees %d device(s)",
                   ordinal, count);
        status = LMS_ERR_NO_DEVICE;
        goto fail_close_driver;
    }

    int vmm = 0;
    status = device_attribute(c, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
                              "VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED", &vmm);
    if (status != LMS_OK)
        goto fail_close_driver;
    if (!vmm) {
        status = base_fail(LMS_ERR_UNSUPPORTED,
                           "cuda: device %d does not support virtual memory management "
                           "(cuMemCreate, cuMemMap), which lms is built on",
                           ordinal);
        goto fail_close_driver;
    }

    r = c->drv.cuDevicePrimaryCtxRetain(&c->ctx, c->device);
    if (r != CUDA_SUCCESS) {
        status = dev_cuda_fail(r, "cuDevicePrimaryCtxRetain(device %d)", ordinal);
        goto fail_close_driver;
    }
    status = cuda_use_context_checked(c);
    if (status != LMS_OK)
        goto fail_release_ctx;

    int least = 0;
    r = c->drv.cuCtxGetStreamPriorityRange(&least, &c->high_priority);
    if (r != CUDA_SUCCESS) {
        status = dev_cuda_fail(r, "cuCtxGetStreamPriorityRange(device %d)", ordinal);
        goto fail_release_ctx;
    }

    c->block_prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    c->block_prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    c->block_prop.location.id = ordinal;
    c->access.location = c->block_prop.location;
    c->access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    r = c->drv.cuMemGetAllocationGranularity(&c->granularity, &c->block_prop,
                                             CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    if (r != CUDA_SUCCESS) {
        status = dev_cuda_fail(r, "cuMemGetAllocationGranularity(pinned, device %d, minimum)",
                      ordinal);
        goto fail_release_ctx;
    }
    if (c->granularity == 0 || (c->granularity & (c->granularity - 1)) != 0) {
        status = base_fail(LMS_ERR_DEVICE, "cuda: device %d reports granularity %zu, not a power of two",
                           ordinal, c->granularity);
        goto fail_release_ctx;
    }

    dev_info_t found = {.backend = "cuda", .ordinal = ordinal, .granularity = c->granularity};
    r = c->drv.cuDeviceGetName(found.name, (int)sizeof found.name, c->device);
    if (r != CUDA_SUCCESS) {
        status = dev_cuda_fail(r, "cuDeviceGetName(device %d)", ordinal);
        goto fail_release_ctx;
    }
    r = c->drv.cuDeviceTotalMem(&found.total_memory, c->device);
    if (r != CUDA_SUCCESS) {
        status = dev_cuda_fail(r, "cuDeviceTotalMem(device %d)", ordinal);
        goto fail_release_ctx;
    }
    found.host_numa_node = host_numa_node(c);
    host_blocks_support(c, &found);

    *info = found;
    out->ops = &cuda_ops;
    out->self = c;
    return LMS_OK;

fail_release_ctx:
    c->drv.cuDevicePrimaryCtxRelease(c->device);
fail_close_driver:
    dlclose(c->libcuda);
fail_destroy_lock:
    pthread_mutex_destroy(&c->lock);
    pthread_mutex_destroy(&c->observe_lock);
fail_free:
    base_meta_free(c);
    return status;
}
